"""What bots record of the snapshots they accept, and which ones they refuse."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

from client_sim.bot import Bot
from client_sim.latency import draw_bot, parse_distribution
from client_sim.recording import SnapshotRecorder
from shared import protocol
from shared.arena_map import default_map as _default_map
from shared.protocol import EntityCodec as _EntityCodec

CODEC = _EntityCodec.for_bounds(_default_map().bounds_min, _default_map().bounds_max)


def test_each_bot_gets_a_file_of_json_lines(tmp_path: Path) -> None:
    recorder = SnapshotRecorder(str(tmp_path))
    recorder.accepted(7, 3, 1201, bytes.fromhex("9f3c00ff00112233"), 118)
    recorder.accepted(7, 3, 1202, b"\x01" * 8, 119)
    recorder.accepted(2, 3, 1201, b"", -1)
    recorder.close()
    lines = (tmp_path / "bot-0007.jsonl").read_text().splitlines()
    first = json.loads(lines[0])
    assert {k: first[k] for k in ("bot", "epoch", "tick", "hash", "ack")} == {
        "bot": 7, "epoch": 3, "tick": 1201, "hash": "9f3c00ff00112233", "ack": 118,
    }  # fmt: skip
    assert first["t"] > 1e9 and len(lines) == 2
    assert json.loads((tmp_path / "bot-0002.jsonl").read_text())["ack"] == -1


def test_a_shot_s_sighting_is_a_line_of_its_bot_s_file(tmp_path: Path) -> None:
    recorder = SnapshotRecorder(str(tmp_path))
    recorder.sighted(7, 12, 345, 41.28751234, 4, (1.25, -3.5, 0.0))
    recorder.close()
    line = json.loads((tmp_path / "bot-0007.jsonl").read_text())
    assert {k: v for k, v in line.items() if k != "t"} == {
        "bot": 7, "event": "sighting", "player": 12, "seq": 345, "view_time": 41.287512,
        "target": 4, "seen": [1.25, -3.5, 0.0],
    }  # fmt: skip


async def test_a_bot_told_of_a_newer_epoch_refuses_the_older_one() -> None:
    params = draw_bot(0, seed=1, rtt=parse_distribution("40ms"))
    host = SimpleNamespace(
        config=SimpleNamespace(transport="ws"),
        pump=None,
        codec=CODEC,
        clock_changed=lambda *_: None,
    )
    bot = Bot(0, params, host, "ws://127.0.0.1:1/ws")
    bot.welcome = protocol.WelcomeMessage(1, 0, 60, 10, 0.2, "tok", "arena", "eu", 3, ("ws://b",))
    bot.epoch = 3
    assert bot.accept_snapshot(3, 11, -1)
    # A standby that took over names its epoch (standbys message, or its welcome on the
    # spare): the deposed primary's later snapshots are not shown any more.
    bot.standbys_changed(protocol.StandbysMessage(("ws://a",), 4))
    assert not bot.accept_snapshot(3, 12, -1)
    assert bot.accept_snapshot(4, 12, -1)
    bot.standbys_changed(protocol.StandbysMessage(("ws://c",), 2))  # an old one: ignored
    assert bot.welcome.standbys == ("ws://a",) and bot.epoch == 4


async def test_a_welcome_from_a_deposed_primary_changes_nothing() -> None:
    params = draw_bot(0, seed=1, rtt=parse_distribution("40ms"))
    host = SimpleNamespace(
        config=SimpleNamespace(transport="ws"),
        pump=None,
        codec=CODEC,
        clock_changed=lambda *_: None,
    )
    bot = Bot(0, params, host, "ws://127.0.0.1:1/ws")
    new = protocol.WelcomeMessage(1, 0, 60, 10, 0.2, "tok", "arena", "eu", 4, ("ws://a",))
    bot.welcome, bot.epoch, bot._active = new, 4, 1
    # The spare reached the old primary, cut off from the region and not told yet.
    bot._spare = 2
    bot._delivering = 2
    stale = protocol.WelcomeMessage(1, 0, 60, 9, 0.2, "tok", "arena", "eu", 3, ("ws://b",))
    bot.welcomed(stale)
    assert bot._active == 1 and bot.welcome is new and bot.epoch == 4
    assert bot._spare is None  # dropped: a spare there is of no use
