"""The replication hello: only a peer that knows the cluster secret, only as it signed it,
and only on the link whose challenge it answers."""

from __future__ import annotations

import dataclasses
from typing import Any

import msgpack
import pytest

from server.replication import messages
from server.replication.auth import SECRET_ENV, load_secret, new_nonce, sign_hello, verify_hello
from server.replication.messages import ConfigFingerprint, Hello

SECRET = b"s" * 32
NONCE = "ab" * 32
PRINT = ConfigFingerprint(matches=1, tick_rate=60, max_players=8, history_snapshots=61, map="m")


def hello(secret: bytes = SECRET, nonce: str = NONCE, node: str = "b", epoch: int = 3) -> Hello:
    return sign_hello(
        secret,
        nonce,
        node=node,
        epoch=epoch,
        tick=10,
        fingerprint=PRINT,
        url="http://h:1",
        promise=0.2,
    )


def wire(message: Hello) -> dict[str, Any]:
    return {"type": "hello", **dataclasses.asdict(message)}


def test_an_answer_to_this_challenge_is_accepted() -> None:
    assert verify_hello(SECRET, hello(), NONCE)


def test_a_hello_survives_the_wire_and_is_still_accepted() -> None:
    received = messages.decode(messages.encode(hello()))

    assert received == hello()
    assert isinstance(received, Hello) and verify_hello(SECRET, received, NONCE)


def test_a_hello_answering_another_challenge_is_refused() -> None:
    # A hello recorded on one link, replayed on another (whose challenge is new).
    assert not verify_hello(SECRET, hello(), new_nonce())
    assert not verify_hello(SECRET, hello(nonce=new_nonce()), NONCE)


def test_nonces_are_new_every_time_and_well_formed() -> None:
    nonces = {new_nonce() for _ in range(100)}

    assert len(nonces) == 100
    for nonce in nonces:
        assert messages.Challenge(nonce).nonce == nonce


def test_a_hello_made_with_another_secret_is_refused() -> None:
    assert not verify_hello(SECRET, hello(secret=b"t" * 32), NONCE)


def test_a_hello_with_a_wrong_mac_is_refused() -> None:
    message = hello()
    last = message.mac[-1]
    changed = dataclasses.replace(message, mac=message.mac[:-1] + ("0" if last != "0" else "1"))

    assert not verify_hello(SECRET, changed, NONCE)
    assert not verify_hello(SECRET, dataclasses.replace(message, mac="not hex at all"), NONCE)
    with pytest.raises(messages.MessageError):
        dataclasses.replace(message, mac="")


@pytest.mark.parametrize(
    "change",
    [{"node": "c"}, {"epoch": 4}, {"tick": 11}, {"url": "http://elsewhere:1"}, {"url": ""},
     {"promise": 30.0}, {"fingerprint": dataclasses.replace(PRINT, max_players=9)},
     {"fingerprint": dataclasses.replace(PRINT, map="n")}],
    ids=["node", "epoch", "tick", "url", "no-url", "promise", "fingerprint", "map"],
)  # fmt: skip
def test_a_hello_whose_fields_were_changed_is_refused(change: dict[str, Any]) -> None:
    # Every field the primary acts on is signed: changing one needs the secret.
    assert not verify_hello(SECRET, dataclasses.replace(hello(), **change), NONCE)


@pytest.mark.parametrize("missing", ["node", "epoch", "tick", "mac", "fingerprint", "url"])
def test_a_hello_missing_a_field_is_not_a_hello(missing: str) -> None:
    message = wire(hello())
    del message[missing]

    with pytest.raises(messages.MessageError):
        messages.decode(msgpack.packb(message))


@pytest.mark.parametrize(
    "change",
    [{"epoch": "three"}, {"epoch": None}, {"epoch": [1]}, {"promise": "soon"},
     {"promise": float("nan")}, {"node": ""}, {"fingerprint": "any"}, {"surprise": 1},
     {"ts": 1.0}],
)  # fmt: skip
def test_a_hello_with_ill_typed_or_unknown_fields_is_not_a_hello(change: dict[str, Any]) -> None:
    with pytest.raises(messages.MessageError):
        messages.decode(msgpack.packb({**wire(hello()), **change}))


@pytest.mark.parametrize(
    "nonce", ["", "ab" * 31, "ab" * 33, "AB" * 32, "zz" * 32, 7, None], ids=repr
)
def test_a_challenge_without_a_proper_nonce_is_not_a_challenge(nonce: object) -> None:
    with pytest.raises(messages.MessageError):
        messages.decode(msgpack.packb({"type": "challenge", "nonce": nonce}))


def test_a_challenge_survives_the_wire() -> None:
    challenge = messages.Challenge(new_nonce())

    assert messages.decode(messages.encode(challenge)) == challenge


def test_the_mac_depends_on_every_field_the_nonce_and_the_secret() -> None:
    base = hello().mac

    assert hello().mac == base
    others = [
        hello(secret=b"t" * 32).mac,
        hello(nonce="cd" * 32).mac,
        hello(node="c").mac,
        hello(epoch=4).mac,
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
