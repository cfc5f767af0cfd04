"""A client's whole snapshot frame of a tick, as a node would send it (for the tests)."""

from __future__ import annotations

from server.sim.match import Match, TickResult

__all__ = ["snapshot_for"]


def snapshot_for(match: Match, result: TickResult, slot: int) -> bytes:
    """The frame the node writes to ``slot``'s socket for ``result``: its head and the
    tick's shared body. LookupError for a player not seated when the tick was computed."""
    head = match.snapshot_head(result, slot)
    if head is None:
        raise LookupError(f"player {slot} was not seated at tick {result.tick}")
    return head + result.body
