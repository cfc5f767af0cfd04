"""The replication hello: only a peer that knows the cluster secret, and only now."""

from __future__ import annotations

import dataclasses
from typing import Any

import msgpack
import pytest

from server.replication import messages
from server.replication.auth import MAX_SKEW_S, SECRET_ENV, load_secret, sign_hello, verify_hello
from server.replication.messages import ConfigFingerprint, Hello

SECRET = b"s" * 32
NOW = 1_700_000_000.25
PRINT = ConfigFingerprint(matches=1, tick_rate=60, max_players=8, history_ticks=61, map="m")


def hello(secret: bytes = SECRET, node: str = "b", epoch: int = 3, ts: float = NOW) -> Hello:
    return sign_hello(
        secret, node=node, epoch=epoch, tick=10, fingerprint=PRINT, url="http://h:1", now=ts
    )


def wire(message: Hello) -> dict[str, Any]:
    return {"type": "hello", **dataclasses.asdict(message)}


def test_a_fresh_hello_is_accepted() -> None:
    assert verify_hello(SECRET, hello(), NOW)
    assert verify_hello(SECRET, hello(), NOW + MAX_SKEW_S - 0.5)
    assert verify_hello(SECRET, hello(), NOW - MAX_SKEW_S + 0.5)  # the peer's clock is ahead


def test_a_hello_survives_the_wire_and_is_still_accepted() -> None:
    assert messages.decode(messages.encode(hello())) == hello()
    assert verify_hello(SECRET, messages.decode(messages.encode(hello())), NOW)  # type: ignore[arg-type]


def test_a_hello_made_with_another_secret_is_refused() -> None:
    assert not verify_hello(SECRET, hello(secret=b"t" * 32), NOW)


def test_a_hello_with_a_wrong_mac_is_refused() -> None:
    message = hello()
    last = message.mac[-1]
    changed = dataclasses.replace(message, mac=message.mac[:-1] + ("0" if last != "0" else "1"))

    assert not verify_hello(SECRET, changed, NOW)
    assert not verify_hello(SECRET, dataclasses.replace(message, mac="not hex at all"), NOW)
    with pytest.raises(messages.MessageError):
        dataclasses.replace(message, mac="")


@pytest.mark.parametrize(
    "change", [{"node": "c"}, {"epoch": 4}, {"ts": NOW + 1.0}], ids=["node", "epoch", "ts"]
)
def test_a_hello_whose_signed_fields_were_changed_is_refused(change: dict[str, Any]) -> None:
    # Changing the node, the epoch or the timestamp needs a new MAC, i.e. the secret.
    assert not verify_hello(SECRET, dataclasses.replace(hello(), **change), NOW)


@pytest.mark.parametrize("offset", [MAX_SKEW_S + 0.01, 3600.0, -(MAX_SKEW_S + 0.01)])
def test_a_hello_outside_the_skew_window_is_refused(offset: float) -> None:
    # Too old: a replayed hello. Too far ahead: a hello prepared for a later replay.
    assert not verify_hello(SECRET, hello(), NOW + offset)


@pytest.mark.parametrize("missing", ["node", "epoch", "ts", "mac", "fingerprint"])
def test_a_hello_missing_a_field_is_not_a_hello(missing: str) -> None:
    message = wire(hello())
    del message[missing]

    with pytest.raises(messages.MessageError):
        messages.decode(msgpack.packb(message))


@pytest.mark.parametrize(
    "change",
    [{"epoch": "three"}, {"epoch": None}, {"ts": "soon"}, {"ts": None}, {"epoch": [1]},
     {"ts": float("nan")}, {"node": ""}, {"fingerprint": "any"}, {"surprise": 1}],
)  # fmt: skip
def test_a_hello_with_ill_typed_or_unknown_fields_is_not_a_hello(change: dict[str, Any]) -> None:
    with pytest.raises(messages.MessageError):
        messages.decode(msgpack.packb({**wire(hello()), **change}))


def test_the_mac_depends_on_every_signed_field_and_the_secret() -> None:
    base = hello().mac

    assert hello().mac == base
    others = [
        hello(secret=b"t" * 32).mac,
        hello(node="c").mac,
        hello(epoch=4).mac,
        hello(ts=NOW + 1e-3).mac,
    ]
    assert len({base, *others}) == 5
    assert SECRET.decode() not in base


def test_load_secret_takes_an_explicit_value_over_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(SECRET_ENV, "from-the-environment-0123")

    assert load_secret("from-the-command-line") == b"from-the-command-line"


def test_load_secret_reads_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    assert SECRET_ENV == "ARENA_CLUSTER_SECRET"
    monkeypatch.setenv(SECRET_ENV, "from-the-environment-0123")

    assert load_secret(None) == b"from-the-environment-0123"


def test_load_secret_accepts_sixteen_characters() -> None:
    assert load_secret("x" * 16) == b"x" * 16


@pytest.mark.parametrize("source", ["argument", "environment"])
def test_a_short_secret_is_refused_with_one_line(
    source: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    short = "x" * 15
    if source == "environment":
        monkeypatch.setenv(SECRET_ENV, short)

    with pytest.raises(ValueError) as refused:
        load_secret(short if source == "argument" else None)

    message = str(refused.value)
    assert "\n" not in message
    assert "16" in message
    assert SECRET_ENV in message
    assert short not in message  # the secret itself is never echoed


def test_without_a_secret_a_node_gets_a_random_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(SECRET_ENV, raising=False)

    first, second = load_secret(None), load_secret(None)

    assert len(first) == len(second) == 32
    assert first != second
