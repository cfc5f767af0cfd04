"""server.logs: logfmt that logfmt parsers read back (quoted only where needed, backslash
escapes, never Python's repr), JSON lines that carry the node's identity, the process's
context on every line, and the listening line a launcher finds in either format."""

from __future__ import annotations

import io
import json
import logging
import re
from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from launch.supervisor import listening_url
from server import logs
from server.logs import EventLogger, configure_logging, logfmt, set_context

NODE = {"region": "eu-west", "node": "alpha", "role": "primary", "epoch": 3}
SIX = ("ts", "level", "region", "node", "role", "epoch")

_PAIR = re.compile(r'([^\s=]+)=(?:"((?:[^"\\]|\\.)*)"|([^\s"]*))')
_UNESCAPE = {"n": "\n", "r": "\r", "t": "\t", '"': '"', "\\": "\\"}


def parse_logfmt(line: str) -> dict[str, str]:
    """A tiny logfmt reader, as go-logfmt reads: ``key=bare`` or ``key="quoted \\" text"``."""
    fields: dict[str, str] = {}
    end = 0
    for pair in _PAIR.finditer(line):
        assert line[end : pair.start()].strip() == "", f"not logfmt at {end}: {line!r}"
        end = pair.end()
        quoted, bare = pair.group(2), pair.group(3)
        if quoted is None:
            fields[pair.group(1)] = bare
        else:
            fields[pair.group(1)] = re.sub(
                r"\\(u[0-9a-f]{4}|.)",
                lambda m: chr(int(m[1][1:], 16)) if len(m[1]) == 5 else _UNESCAPE[m[1]],
                quoted,
            )
    assert line[end:].strip() == "", f"not logfmt at {end}: {line!r}"
    return fields


@pytest.fixture(autouse=True)
def restored() -> Iterator[None]:
    """Each test configures logging as a CLI does; put back what was there after it."""
    root = logging.getLogger("arena")
    saved = (root.handlers[:], root.level, root.propagate, logs._setup.formatter)
    try:
        yield
    finally:
        root.handlers[:], root.level, root.propagate = saved[:3]
        logs._setup.formatter = saved[3]
        set_context(dict)


def configured(level: str, fmt: logs.LogFormat) -> io.StringIO:
    """Configure as ``--log-level level --log-format fmt`` does; what goes to stderr."""
    configure_logging(level, fmt)
    buffer = io.StringIO()
    handler = logging.getLogger("arena").handlers[0]
    assert isinstance(handler, logging.StreamHandler)
    handler.setStream(buffer)
    return buffer


@given(st.text())
def test_a_logfmt_value_reads_back_as_it_was(value: str) -> None:
    assert parse_logfmt(logfmt({"k": value, "after": 1})) == {"k": value, "after": "1"}


def test_logfmt_quotes_only_what_needs_it_and_never_like_python() -> None:
    line = logfmt({"a": "plain", "b": "two words", "c": "x=y", "d": 'say "hi"', "e": "", "f": None,
                   "g": True, "h": 1.5, "i": "it's", "j": "C:\\dir"})  # fmt: skip
    assert line == (
        'a=plain b="two words" c="x=y" d="say \\"hi\\"" e="" f="" g=true h=1.5 i=it\'s j=C:\\dir'
    )


def test_a_logfmt_line_has_ts_level_event_then_the_fields_then_the_node() -> None:
    stderr = configured("info", "logfmt")
    set_context(lambda: NODE)
    EventLogger("arena.test").warning("tick_overrun", tick=7, hint="a busy machine")
    EventLogger("arena.test").debug("hidden")  # below the level
    (line,) = stderr.getvalue().splitlines()
    assert re.fullmatch(
        r"ts=\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z level=warning event=tick_overrun tick=7 "
        r'hint="a busy machine" region=eu-west node=alpha role=primary epoch=3',
        line,
    ), line


def test_json_lines_parse_and_carry_the_six_fields() -> None:
    stderr = configured("debug", "json")
    set_context(lambda: NODE)
    log = EventLogger("arena.test")
    log.info("player_joined", match=0, player=2, name='Ada "the" = one')
    log.info("campaign", won_epoch=None, ratio=float("nan"))
    try:
        raise ValueError("boom")
    except ValueError:
        log.exception("heartbeat_callback_failed")
    lines = [json.loads(line) for line in stderr.getvalue().splitlines()]
    assert len(lines) == 3
    for line in lines:
        assert all(line[key] not in (None, "") for key in SIX), line
        assert (line["region"], line["node"], line["role"], line["epoch"]) == tuple(NODE.values())
    assert lines[0]["name"] == 'Ada "the" = one' and lines[0]["player"] == 2
    assert lines[1]["ratio"] == "nan" and lines[1]["won_epoch"] is None
    assert lines[2]["level"] == "error" and "ValueError: boom" in lines[2]["error"]


def test_the_call_site_s_fields_win_over_the_context() -> None:
    """A directory line about a node names that node, not the directory."""
    stderr = configured("info", "logfmt")
    set_context(lambda: {"role": "directory"})
    EventLogger("arena.test").info("node_registered", node="beta", role="standby")
    fields = parse_logfmt(stderr.getvalue())
    assert (fields["node"], fields["role"]) == ("beta", "standby")


@pytest.mark.parametrize("fmt", ["logfmt", "json"])
def test_the_listening_line_goes_to_stdout_and_a_launcher_finds_its_url(
    fmt: logs.LogFormat, capsys: pytest.CaptureFixture[str]
) -> None:
    stderr = configured("error", fmt)  # the listening line is printed at any level
    logs.announce("listening", url="ws://127.0.0.1:7777/ws", **NODE)
    out = capsys.readouterr().out
    assert stderr.getvalue() == ""
    assert listening_url(out.strip()) == "ws://127.0.0.1:7777/ws"
    fields = json.loads(out) if fmt == "json" else parse_logfmt(out.strip())
    assert {*SIX, "event", "url"} <= fields.keys() and fields["event"] == "listening"
    if fmt == "logfmt":  # the older launchers' pattern, too
        assert re.search(r"event=listening url=(\S+)", out)


def test_other_lines_are_not_taken_for_the_listening_one() -> None:
    assert listening_url('{"event":"stopping","url":"x"}') is None
    assert listening_url("{not json") is None
    assert listening_url("ts=1 level=info event=stopping") is None


def test_caplog_and_get_message_show_the_logfmt_body(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    caplog.set_level(logging.INFO, logger="arena")
    monkeypatch.setattr(logging.getLogger("arena"), "propagate", True)
    EventLogger("arena.test").info("standby_in_sync", standby="beta", tick=4)
    assert [r.getMessage() for r in caplog.records] == ["event=standby_in_sync standby=beta tick=4"]
