"""The replication hello: only a peer that knows the cluster secret, and only now."""

from __future__ import annotations

import pytest

from server.replication.auth import MAX_SKEW_S, SECRET_ENV, hello_mac, load_secret, verify_hello

SECRET = b"s" * 32
NOW = 1_700_000_000.25


def hello(secret: bytes = SECRET, node: str = "b", epoch: int = 3, ts: float = NOW) -> dict:
    return {"node": node, "epoch": epoch, "ts": ts, "mac": hello_mac(secret, node, epoch, ts)}


def test_a_fresh_hello_is_accepted() -> None:
    assert verify_hello(SECRET, hello(), NOW)
    assert verify_hello(SECRET, hello(), NOW + MAX_SKEW_S - 0.5)
    assert verify_hello(SECRET, hello(), NOW - MAX_SKEW_S + 0.5)  # the peer's clock is ahead


def test_a_hello_with_extra_fields_is_accepted() -> None:
    message = {**hello(), "type": "hello", "tick": 10, "url": "http://127.0.0.1:1"}

    assert verify_hello(SECRET, message, NOW)


def test_a_hello_made_with_another_secret_is_refused() -> None:
    assert not verify_hello(SECRET, hello(secret=b"t" * 32), NOW)


def test_a_hello_with_a_wrong_mac_is_refused() -> None:
    message = hello()
    last = message["mac"][-1]
    message["mac"] = message["mac"][:-1] + ("0" if last != "0" else "1")

    assert not verify_hello(SECRET, message, NOW)
    assert not verify_hello(SECRET, {**hello(), "mac": ""}, NOW)
    assert not verify_hello(SECRET, {**hello(), "mac": "not hex at all"}, NOW)


@pytest.mark.parametrize(
    "change", [{"node": "c"}, {"epoch": 4}, {"ts": NOW + 1.0}], ids=["node", "epoch", "ts"]
)
def test_a_hello_whose_signed_fields_were_changed_is_refused(change: dict) -> None:
    # Changing the node, the epoch or the timestamp needs a new MAC, i.e. the secret.
    assert not verify_hello(SECRET, {**hello(), **change}, NOW)


@pytest.mark.parametrize("offset", [MAX_SKEW_S + 0.01, 3600.0, -(MAX_SKEW_S + 0.01)])
def test_a_hello_outside_the_skew_window_is_refused(offset: float) -> None:
    # Too old: a replayed hello. Too far ahead: a hello prepared for a later replay.
    assert not verify_hello(SECRET, hello(), NOW + offset)


@pytest.mark.parametrize("missing", ["node", "epoch", "ts", "mac"])
def test_a_hello_missing_a_field_is_refused(missing: str) -> None:
    message = hello()
    del message[missing]

    assert not verify_hello(SECRET, message, NOW)


@pytest.mark.parametrize(
    "change",
    [{"epoch": "three"}, {"epoch": None}, {"ts": "soon"}, {"ts": None}, {"epoch": [1]}],
)
def test_a_hello_with_ill_typed_fields_is_refused(change: dict) -> None:
    assert not verify_hello(SECRET, {**hello(), **change}, NOW)


def test_the_mac_depends_on_every_signed_field_and_the_secret() -> None:
    base = hello_mac(SECRET, "b", 3, NOW)

    assert hello_mac(SECRET, "b", 3, NOW) == base
    assert (
        len(
            {
                base,
                *(
                    hello_mac(*args)
                    for args in [
                        (b"t" * 32, "b", 3, NOW),
                        (SECRET, "c", 3, NOW),
                        (SECRET, "b", 4, NOW),
                        (SECRET, "b", 3, NOW + 1e-3),
                    ]
                ),
            }
        )
        == 5
    )
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
