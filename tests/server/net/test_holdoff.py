"""Escalating hold-offs: the wait doubles with each close, is capped, is forgotten after a
quiet spell, and the table stays bounded whatever the number of keys."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from server.net.holdoff import HoldOffPolicy, HoldOffs, address_key


def test_each_close_doubles_the_wait_up_to_the_cap() -> None:
    holds: HoldOffs[str] = HoldOffs(HoldOffPolicy(first=1.0, cap=16.0))
    waits = []
    now = 0.0
    for _ in range(7):
        waits.append(holds.close("seat", now))
        now += waits[-1] + 0.5  # back after its wait, closed again
    assert waits == [1.0, 2.0, 4.0, 8.0, 16.0, 16.0, 16.0]
    assert holds.closes("seat") == 7


def test_a_key_waits_until_its_hold_off_ends_and_others_do_not_wait() -> None:
    holds: HoldOffs[str] = HoldOffs(HoldOffPolicy(first=2.0, cap=60.0))
    assert holds.close("a", 10.0) == 2.0
    assert holds.remaining("a", 10.0) == 2.0
    assert holds.remaining("a", 11.5) == pytest.approx(0.5)
    assert holds.remaining("a", 12.0) == 0.0
    assert holds.remaining("b", 10.0) == 0.0 and holds.closes("b") == 0


def test_a_quiet_key_is_forgotten_and_starts_again_at_the_first_wait() -> None:
    holds: HoldOffs[str] = HoldOffs(HoldOffPolicy(first=1.0, cap=60.0, forget_after=100.0))
    assert holds.close("a", 0.0) == 1.0
    assert holds.close("a", 50.0) == 2.0  # within the memory: escalated
    assert holds.close("a", 52.0 + 100.0) == 1.0  # quiet 100 s after its wait ended


def test_the_table_forgets_the_least_recently_closed_beyond_its_capacity() -> None:
    holds: HoldOffs[int] = HoldOffs(HoldOffPolicy(first=1.0, cap=8.0), capacity=3)
    for key in range(3):
        holds.close(key, 0.0)
    holds.close(0, 0.5)  # 0 closed again: now the most recent
    holds.close(3, 0.5)  # one too many: 1, the least recently closed, goes
    assert len(holds) == 3
    assert [holds.closes(key) for key in range(4)] == [2, 0, 1, 1]


@given(st.lists(st.tuples(st.integers(0, 50), st.floats(0, 10)), max_size=200))
def test_memory_is_bounded_and_no_wait_exceeds_the_cap(closes: list[tuple[int, float]]) -> None:
    holds: HoldOffs[int] = HoldOffs(HoldOffPolicy(first=0.5, cap=4.0), capacity=8)
    now = 0.0
    for key, step in closes:
        now += step
        wait = holds.close(key, now)
        assert 0.5 <= wait <= 4.0
        assert holds.remaining(key, now) == pytest.approx(wait)
        assert len(holds) <= 8


def test_a_policy_out_of_range_is_refused() -> None:
    with pytest.raises(ValueError, match="first <= cap"):
        HoldOffPolicy(first=0.0, cap=1.0)
    with pytest.raises(ValueError, match="first <= cap"):
        HoldOffPolicy(first=2.0, cap=1.0)


@pytest.mark.parametrize(
    ("address", "key"),
    [
        ("127.0.0.1", "127.0.0.1"),
        ("2001:db8:1:2:3:4:5:6", "2001:db8:1:2::/64"),
        ("2001:db8:1:2:ffff::1", "2001:db8:1:2::/64"),  # the same /64: one subscriber
        ("::ffff:10.0.0.7", "10.0.0.7"),
        ("fe80::1%eth0", "fe80::/64"),
        ("unix-socket", "unix-socket"),
        (None, None),
        ("", None),
    ],
)
def test_an_address_is_held_off_by_itself_or_its_ipv6_64(address: str | None, key: str) -> None:
    assert address_key(address) == key
