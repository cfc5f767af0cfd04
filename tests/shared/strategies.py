"""Hypothesis strategies for the protocol's typed values, shared by its tests."""

from __future__ import annotations

from hypothesis import strategies as st

from shared.protocol import (
    SHOT_RESULTS,
    U32_MAX,
    JoinEvent,
    LeaveEvent,
    RespawnEvent,
    ShotEvent,
    SnapshotEvent,
)

__all__ = ["snapshot_events"]

players = st.integers(0, 65535)
shots = st.builds(
    ShotEvent,
    shooter=players,
    seq=st.integers(0, U32_MAX),
    weapon=st.integers(0, 255),
    result=st.sampled_from(SHOT_RESULTS),
    view_time=st.floats(allow_nan=False, allow_infinity=False),
    victim=st.integers(-1, 65535),
    hitbox=st.integers(0, 255),
    damage=st.integers(0, 65535),
    kill=st.booleans(),
)
events: st.SearchStrategy[SnapshotEvent] = st.one_of(
    st.builds(JoinEvent, players),
    st.builds(LeaveEvent, players),
    st.builds(RespawnEvent, players),
    shots,
)
snapshot_events = st.lists(events, max_size=5)
