"""The failover audit: every tick a client accepted, checked against the surviving lineage.

Sans-I/O: plain functions over the nodes' journals (``arena-server --journal``), the bots'
records (``arena-bots --record``) and the faults a run made. The *lineage* is the history
the last primary carries: its own ticks, and before its promotion the ticks of the epoch it
was promoted from up to the tick it held, and so on back to the first claim. A tick a bot
accepted is *kept* when the lineage has that tick with the same world hash, *lost*
otherwise: the region showed it, then continued from a world without it.

Nothing here trusts a node's own accounting: the numbers come from what the bots saw and
what the journals say each node published, and when.
"""

from __future__ import annotations

import itertools
import json
import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = [
    "Accepted",
    "Fault",
    "Promotion",
    "Published",
    "Welcome",
    "audit",
    "lineage",
    "read_journal",
    "read_record",
]


#: How long after a fault ended its stall is looked for.
STALL_WINDOW_S = 3.0


@dataclass(frozen=True, slots=True)
class Published:
    node: str
    epoch: int
    tick: int
    hash: str
    synced: bool
    t: float


@dataclass(frozen=True, slots=True)
class Promotion:
    node: str
    epoch: int
    from_epoch: int
    from_tick: int
    t: float
    hash: str = ""  # the world it took over at from_tick (its predecessor may not have noted it)
    resumed: bool = False  # from a checkpoint (every node had died), not from a live standby


@dataclass(frozen=True, slots=True)
class Accepted:
    bot: int
    epoch: int
    tick: int
    hash: str
    ack: int
    t: float


@dataclass(frozen=True, slots=True)
class Welcome:
    bot: int
    epoch: int
    player: int  # the seat: the same one after a reconnect is a seat resumed
    ack: int
    t: float


@dataclass(frozen=True, slots=True)
class Fault:
    kind: str  # "kill" | "pause" | "partition" (of the primary) | "kill_standby" | "kill_both"
    node: str
    start: float  # wall clock
    end: float  # SIGCONT, healing; = start for a kill; a kill_both's: its first node restarted
    epoch: int  # the primary's epoch when it was hit


@dataclass(slots=True)
class _Journals:
    published: list[Published] = field(default_factory=list)
    promotions: list[Promotion] = field(default_factory=list)


def read_journal(lines: Iterable[str]) -> tuple[list[Published], list[Promotion]]:
    """A journal's entries; a torn last line (the node was killed mid-write) is skipped."""
    found = _Journals()
    for line in lines:
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if entry.get("event") in ("promoted", "resumed"):
            found.promotions.append(
                Promotion(
                    entry["node"],
                    entry["epoch"],
                    entry["from_epoch"],
                    entry["from_tick"],
                    entry["t"],
                    entry.get("hash", ""),
                    resumed=entry["event"] == "resumed",
                )
            )
        elif "tick" in entry:
            found.published.append(
                Published(
                    entry["node"],
                    entry["epoch"],
                    entry["tick"],
                    entry["hash"],
                    entry["synced"],
                    entry["t"],
                )
            )
    return found.published, found.promotions


def read_record(lines: Iterable[str]) -> tuple[list[Accepted], list[Welcome]]:
    """A bot's record (``arena-bots --record``): the snapshots it accepted and its
    welcomes; a torn last line is skipped, and so are the shots' sightings (for the replay
    viewer, not the audit)."""
    accepted, welcomes = [], []
    for line in lines:
        try:
            e = json.loads(line)
        except ValueError:
            continue
        if e.get("event") == "welcome":
            welcomes.append(Welcome(e["bot"], e["epoch"], e["player"], e["ack"], e["t"]))
        elif "event" not in e:
            accepted.append(Accepted(e["bot"], e["epoch"], e["tick"], e["hash"], e["ack"], e["t"]))
    return accepted, welcomes


def lineage(published: list[Published], promotions: list[Promotion]) -> dict[int, frozenset[str]]:
    """Tick -> the world hashes the surviving primary's history has for it (one per match,
    as the journals join them with ``/``)."""
    if not published:
        return {}
    by_epoch: dict[int, dict[int, str]] = defaultdict(dict)
    for p in published:
        by_epoch[p.epoch][p.tick] = p.hash
    promoted = {p.epoch: p for p in promotions}
    epoch = max(by_epoch.keys() | promoted.keys())
    kept: dict[int, frozenset[str]] = {}
    upto: int | None = None  # ticks of this epoch above this one were not continued
    while True:
        for tick, digest in by_epoch.get(epoch, {}).items():
            if (upto is None or tick <= upto) and tick not in kept:
                kept[tick] = frozenset(digest.split("/"))
        step = promoted.get(epoch)
        if step is None:
            return kept
        if step.hash and step.from_tick not in kept:
            # A predecessor killed between showing its last tick and noting it: the
            # successor holds that tick all the same.
            kept[step.from_tick] = frozenset(step.hash.split("/"))
        epoch, upto = step.from_epoch, step.from_tick


def _percentile(values: list[float], q: float) -> float | None:
    return round(float(np.percentile(values, q)), 1) if values else None


def audit(
    published: list[Published],
    promotions: list[Promotion],
    accepted: dict[int, list[Accepted]],
    faults: list[Fault],
    *,
    ended_at: float,
    welcomes: dict[int, list[Welcome]] | None = None,
    calm: tuple[float, float] | None = None,
    spurious_within: float = 3.0,
) -> dict[str, Any]:
    """The audit's figures (see ``docs/failover.md``, "The audit"). ``calm``: a span with
    no faults (the CPU-hog phase), in which any promotion or reconnect is spurious."""
    kept = lineage(published, promotions)
    resumes = [p for p in promotions if p.resumed]
    lost_ticks = 0
    inputs_lost = 0
    recovery_lost = 0
    for records in accepted.values():
        lost = [a for a in records if a.hash not in kept.get(a.tick, frozenset())]
        # Shown after the checkpoint a resumed match started from: the documented price of
        # losing every node, not a failover's broken promise.
        lost_to_recovery = [a for a in lost if _before_a_resume(a, resumes)]
        recovery_lost += len(lost_to_recovery)
        lost = [a for a in lost if not _before_a_resume(a, resumes)]
        lost_ticks += len(lost)
        if lost:
            last_lost = max(a.tick for a in lost)
            kept_acks = [
                a.ack
                for a in records
                if a.tick <= last_lost and a.hash in kept.get(a.tick, frozenset())
            ]
            inputs_lost += max(0, max(a.ack for a in lost) - max(kept_acks, default=-1))
    # A deposed primary: one that published after a higher epoch was promoted. When it
    # published is bounded by its journal line (written after the sends) and by the first
    # bot that accepted the tick: a node paused between its sends and its journal line
    # wrote the line late, but the bots had the tick before.
    promoted_at = sorted((p.t, p.epoch) for p in promotions)
    first_seen: dict[tuple[int, int, str], float] = {}
    for records in accepted.values():
        for a in records:
            key = (a.epoch, a.tick, a.hash)
            first_seen[key] = min(a.t, first_seen.get(key, math.inf))

    def deposed(p: Published) -> bool:
        sent_by = min(p.t, first_seen.get((p.epoch, p.tick, p.hash), math.inf))
        return any(t < sent_by and epoch > p.epoch for t, epoch in promoted_at)

    after_successor = [p for p in published if deposed(p)]
    stale = {(p.epoch, p.tick, p.hash) for p in after_successor}
    accepted_stale = sum(
        1 for records in accepted.values() for a in records if (a.epoch, a.tick, a.hash) in stale
    )
    reused = {
        epoch for epoch, nodes in _nodes_by_epoch(published, promotions).items() if len(nodes) > 1
    }
    # The longest a region showed nothing, outages of every node (kill_both) aside.
    outages = [f.start for f in faults if f.kind == "kill_both"]
    times = sorted(p.t for p in published)
    gaps = [
        later - earlier
        for earlier, later in itertools.pairwise(times)
        if not any(earlier <= start <= later for start in outages)
    ]
    on_primary = [f for f in faults if f.kind != "kill_standby"]
    takeovers = [p for p in promotions if not p.resumed]
    spurious = [
        p
        for p in takeovers
        if not any(f.start - 0.1 <= p.t <= f.end + spurious_within for f in on_primary)
    ]
    failovers = [f for f in faults if f.kind != "kill_both"]
    stalls, lost_bots = _stalls(accepted, failovers, ended_at)
    kill_to_promotion = [
        (min(p.t for p in takeovers if p.t > f.start) - f.start) * 1000
        for f in faults
        if f.kind == "kill" and any(p.t > f.start for p in takeovers)
    ]
    return {
        "kills": sum(1 for f in faults if f.kind == "kill"),
        "pauses": sum(1 for f in faults if f.kind == "pause"),
        "partitions": sum(1 for f in faults if f.kind == "partition"),
        "standby_kills": sum(1 for f in faults if f.kind == "kill_standby"),
        "both_kills": sum(1 for f in faults if f.kind == "kill_both"),
        "promotions": len(takeovers),
        "spurious_promotions": len(spurious),
        "kill_to_promotion_ms_p50": _percentile(kill_to_promotion, 50),
        "kill_to_promotion_ms_max": round(max(kill_to_promotion), 1) if kill_to_promotion else None,
        "epochs_reused": sorted(reused),
        "ticks_published": len(published),
        "ticks_published_unsynced": sum(1 for p in published if not p.synced),
        "bots": len(accepted),
        "acked_ticks": sum(len(r) for r in accepted.values()),
        "acked_ticks_lost": lost_ticks,
        "inputs_lost": inputs_lost,
        "published_by_deposed_primary": len(after_successor),
        "published_by_deposed_primary_accepted": accepted_stale,
        "longest_without_primary_ms": round(max(gaps) * 1000, 1) if gaps else None,
        "stall_ms_p50": _percentile(stalls, 50),
        "stall_ms_p99": _percentile(stalls, 99),
        "stall_ms_max": round(max(stalls), 1) if stalls else None,
        "bots_lost": lost_bots,
        **_seats(welcomes or {}),
        "checkpoint_recoveries": _recoveries(resumes, published, accepted, faults, kept),
        "acked_ticks_lost_to_checkpoint_recovery": recovery_lost,
        "calm_phase": _calm(calm, takeovers, welcomes or {}) if calm is not None else None,
    }


def _before_a_resume(shown: Accepted, resumes: list[Promotion]) -> bool:
    """Whether a tick was shown before a resume, above the checkpoint it resumed from."""
    return any(shown.t < r.t and shown.tick > r.from_tick for r in resumes)


def _seats(welcomes: dict[int, list[Welcome]]) -> dict[str, int]:
    """Every welcome after a bot's first is a reconnect: to its own seat, or a new one."""
    resumed = lost = 0
    for seen in welcomes.values():
        ordered = sorted(seen, key=lambda w: w.t)
        for before, after in itertools.pairwise(ordered):
            if after.player == before.player:
                resumed += 1
            else:
                lost += 1
    return {"bot_reconnects": resumed + lost, "seats_resumed": resumed, "seats_lost": lost}


def _recoveries(
    resumes: list[Promotion],
    published: list[Published],
    accepted: dict[int, list[Accepted]],
    faults: list[Fault],
    kept: dict[int, frozenset[str]],
) -> list[dict[str, Any]]:
    """Each resume from a checkpoint: what it cost, how long it took the region and its
    last bot (to its first snapshot of the resumed epoch)."""
    found = []
    for r in sorted(resumes, key=lambda p: p.t):
        before = [p for p in published if p.t < r.t]
        last_shown = max((p.tick for p in before), default=r.from_tick)
        gone = {
            p.tick
            for p in before
            if p.tick > r.from_tick and frozenset(p.hash.split("/")) != kept.get(p.tick)
        }
        outage = max((f for f in faults if f.kind == "kill_both" and f.start < r.t),
                     key=lambda f: f.start, default=None)  # fmt: skip
        first = min((p.t for p in published if p.epoch == r.epoch), default=None)
        back = [
            min((a.t for a in records if a.epoch == r.epoch), default=math.inf)
            for records in accepted.values()
        ]
        last_back = max(back, default=math.inf)
        found.append(
            {
                "node": r.node,
                "epoch": r.epoch,
                "from_epoch": r.from_epoch,
                "from_tick": r.from_tick,
                "last_tick_shown_before": last_shown,
                "ticks_lost": len(gone),
                "resumed_s_after_node_start": round(r.t - outage.end, 3) if outage else None,
                "first_tick_s_after_node_start": round(first - outage.end, 3)
                if outage and first is not None
                else None,
                "first_tick_s_after_kill": round(first - outage.start, 3)
                if outage and first is not None
                else None,
                # (None when a bot never came back: bots_lost counts it)
                "every_bot_back_s_after_node_start": round(last_back - outage.end, 3)
                if outage and last_back < math.inf
                else None,
            }
        )
    return found


def _calm(
    span: tuple[float, float], takeovers: list[Promotion], welcomes: dict[int, list[Welcome]]
) -> dict[str, Any]:
    """A span with no faults: every promotion in it is spurious, and so is every reconnect."""
    began, ended = span
    firsts = {bot: min(w.t for w in seen) for bot, seen in welcomes.items() if seen}
    reconnects = sum(
        1
        for bot, seen in welcomes.items()
        for w in seen
        if began <= w.t <= ended and w.t > firsts[bot]
    )
    return {
        "seconds": round(ended - began, 1),
        "promotions": sum(1 for p in takeovers if began <= p.t <= ended),
        "bot_reconnects": reconnects,
    }


def _nodes_by_epoch(published: list[Published], promotions: list[Promotion]) -> dict[int, set[str]]:
    nodes: dict[int, set[str]] = defaultdict(set)
    for tick in published:
        nodes[tick.epoch].add(tick.node)
    for promotion in promotions:
        nodes[promotion.epoch].add(promotion.node)
    return nodes


def _stalls(
    accepted: dict[int, list[Accepted]], faults: list[Fault], ended_at: float
) -> tuple[list[float], int]:
    """Per fault and bot: the longest the bot was shown nothing through the fault, from half
    a second before it to :data:`STALL_WINDOW_S` after it ended (or the next fault; ms: what
    the player felt, modelled latency included), a silence that reaches past that window
    counted whole: to the bot's next snapshot, or to the run's end; and the bots that
    accepted nothing in the run's last 3 s."""
    stalls = []
    lost = 0
    ordered = sorted(faults, key=lambda f: f.start)
    windows = [
        (f.start - 0.5, min(f.end + STALL_WINDOW_S, ordered[i + 1].start))
        if i + 1 < len(ordered)
        else (f.start - 0.5, f.end + STALL_WINDOW_S)
        for i, f in enumerate(ordered)
    ]
    for records in accepted.values():
        times = np.array(sorted(a.t for a in records))
        if times.size == 0 or times[-1] < ended_at - 3.0:
            lost += 1
        shown = np.append(times, max(ended_at, times[-1]) if times.size else ended_at)
        for began, ended in windows:
            # The last snapshot before the window, those in it, and the first after it.
            first = max(0, int(np.searchsorted(shown, began)) - 1)
            after = min(int(np.searchsorted(shown, ended, side="right")), shown.size - 1)
            around = shown[first : after + 1]
            if around.size > 1:
                stalls.append(float(np.diff(around).max()) * 1000)
    return stalls, lost
