"""A client's whole snapshot frame of a tick, as a node would send it, and the players
it shows (for the tests)."""

from __future__ import annotations

import weakref

import numpy as np

from server.sim.match import Match, TickResult
from shared.protocol import EntityBaselines, PlayerValues, SnapshotMessage, decode_server

__all__ = ["players_shown", "snapshot_for"]

# Per match and slot, what that client holds (as a bot would), to decode its deltas.
_held: weakref.WeakKeyDictionary[Match, dict[int, EntityBaselines]] = weakref.WeakKeyDictionary()
_values: weakref.WeakKeyDictionary[Match, PlayerValues] = weakref.WeakKeyDictionary()


def snapshot_for(match: Match, result: TickResult, slot: int) -> bytes:
    """The frame the node writes to ``slot``'s socket for ``result``: its part and the
    tick's shared body. LookupError for a player not seated when the tick was computed."""
    head = match.snapshot_head(result, slot)
    if head is None:
        raise LookupError(f"player {slot} was not seated at tick {result.tick}")
    return head + result.body


def players_shown(match: Match, result: TickResult, slot: int) -> np.ndarray:
    """The entity records ``slot``'s snapshot of ``result`` shows, decoded as its client
    would (against what it held: call this for each of its snapshots, in order)."""
    message = decode_server(snapshot_for(match, result, slot))
    assert isinstance(message, SnapshotMessage)
    baselines = _held.setdefault(match, {}).setdefault(slot, EntityBaselines())
    values = _values.setdefault(match, PlayerValues(match.codec, match.config.snapshot_interval))
    return baselines.apply(message.epoch, message.tick, message.base, message.entities, values)
