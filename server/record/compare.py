"""Two recordings of the same match, tick by tick (sans-I/O): the first tick they differ.

Each recording's view of a tick is what a primary computed or what a standby received
(the standby's entry of a tick is the primary's record of it, so the two agree exactly when
replication did). Compared per (match, tick), where both hold the tick in the same epoch:
the world's hash, the shots' verdicts, and the seats each saw change.
"""

from __future__ import annotations

from server.record.entries import TickEntry
from server.record.replay import Mismatch
from server.record.timeline import Recording

__all__ = ["compare_recordings"]


def _ticks(recording: Recording, match: int) -> dict[tuple[int, int], TickEntry]:
    """The recording's ticks of ``match``: what it computed, else what it received."""
    ticks = dict(recording.received.get(match, {}))
    ticks.update(recording.computed.get(match, {}))
    return ticks


def compare_recordings(first: Recording, second: Recording) -> tuple[Mismatch | None, int]:
    """The first difference (by tick, then match) and how many ticks both hold."""
    compared = 0
    found: list[tuple[int, int, Mismatch]] = []
    for match in sorted(set(first.matches) & set(second.matches)):
        mine, theirs = _ticks(first, match), _ticks(second, match)
        for where in sorted(mine.keys() & theirs.keys(), key=lambda w: (w[1], w[0])):
            a, b = mine[where], theirs[where]
            compared += 1
            tick = where[1]
            if a.hash != b.hash:
                found.append(
                    (
                        tick,
                        match,
                        Mismatch(tick, "hash", f"match {match} world hash {a.hash} vs {b.hash}"),
                    )
                )
                break
            if a.shots != b.shots:
                which = next(
                    (i for i, (x, y) in enumerate(zip(a.shots, b.shots, strict=False)) if x != y),
                    min(len(a.shots), len(b.shots)),
                )
                shot = (a.shots + b.shots)[which] if (a.shots or b.shots) else {}
                found.append(
                    (
                        tick,
                        match,
                        Mismatch(
                            tick,
                            "verdict",
                            f"match {match} shot {which} (slot {shot.get('shooter')} "
                            f"seq {shot.get('seq')}): {len(a.shots)} vs {len(b.shots)} shots, "
                            "verdicts differ",
                        ),
                    )
                )
                break
            if _net_seats(a) != _net_seats(b):
                found.append(
                    (
                        tick,
                        match,
                        Mismatch(
                            tick, "seat", f"match {match} seat changes {a.seats} vs {b.seats}"
                        ),
                    )
                )
                break
    if not found:
        return None, compared
    return min(found, key=lambda f: (f[0], f[1]))[2], compared


def _net_seats(tick: TickEntry) -> set[tuple[int, int, str]]:
    """The seats a tick's changes leave joined or left (a join and a leave of the same seat
    between two ticks is none: a standby never sees it)."""
    joined = {(int(c[1]), int(c[2])) for c in tick.seats if c[0] == "join"}
    left = {(int(c[1]), int(c[2])) for c in tick.seats if c[0] == "leave"}
    return {(*s, "join") for s in joined - left} | {(*s, "leave") for s in left - joined}
