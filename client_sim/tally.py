"""A run's tally: everything the bots' report is built from, in a form that merges.

A bot process (one worker, or one shard of a swarm split across machines) turns what its
bots measured into a :class:`Tally`: counts that add, sketches and fixed-bin histograms
that merge, a few bounded event lists, the validity it judged with its reasons. The
tallies of every process merge into the tally one process running the whole swarm would
have kept, and :mod:`client_sim.report` builds the report from that, so the report of a
merge is the report of one run. No list of raw samples is kept.

Adding a figure is one entry in one of the tables below: :data:`COUNTED` (a total summed
over bots and processes, placed at its dotted report path) or :data:`DISTRIBUTED` (a
distribution sketched per process, merged, and reported as the named percentiles). The
attribute named is read from :class:`client_sim.swarm.SwarmResult` (a number, or a list
with one entry per bot or per sample).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from client_sim.sketch import FixedBins, Sketch, SketchFormatError

__all__ = [
    "COUNTED",
    "DISTRIBUTED",
    "FORMAT",
    "RTT_BINS_MS",
    "Distribution",
    "PartError",
    "SecondTally",
    "Tally",
]

#: What a part file says it is; a part of another format is refused.
FORMAT = "arena-bots-tally/1"

#: The RTT histogram's bins: 5 ms from 0 to 600 ms, then one overflow bin.
RTT_BINS_MS = (0.0, 5.0, 120)


@dataclass(frozen=True, slots=True)
class Distribution:
    """A distribution the report gives as percentiles: ``attribute`` of SwarmResult
    (values, times ``scale``), reported at ``template.format(q=q)`` for each ``q``, and
    its sample count at ``samples`` when that is set."""

    attribute: str
    template: str
    quantiles: tuple[int, ...] = (50, 90, 95, 99)
    scale: float = 1.0
    samples: str = ""


#: Totals: the report's dotted path <- SwarmResult's attribute (a number or a per-bot list).
COUNTED: dict[str, str] = {
    "bots.requested": "requested",
    "bots.connected": "connected",
    "inputs.sent": "inputs_sent",
    "inputs.acked": "inputs_acked",
    "inputs.due": "inputs_due",
    "inputs.acked_due": "inputs_acked_due",
    "snapshots.received": "snapshots",
    "snapshots.interpolation_misses": "interpolation_misses",
    "snapshots.lost": "snapshots_lost",
    "inputs.resent": "inputs_resent",
    "inputs.recovered_by_redundancy": "inputs_recovered",
    "shots.hits_received": "hits_received",
    "failover.stalls_ridden_out": "stalls",
    "failover.seats_lost": "seats_lost",
    "bots.light.requested": "light_requested",
    "bots.light.connected": "light_connected",
    "bots.light.inputs_sent": "light_inputs_sent",
    "bots.light.inputs_acked": "light_inputs_acked",
    "bots.light.snapshots": "light_snapshots",
    "bots.light.bytes_down": "light_bytes_down",
    "bots.light.bytes_up": "light_bytes_up",
}

#: Percentiles: a name of the tally's sketch <- the distribution it sketches.
DISTRIBUTED: dict[str, Distribution] = {
    "rtt": Distribution("rtt_samples", "latency_ms.rtt_p{q}", scale=1000.0,
                        samples="latency_ms.samples"),
    "prediction_error": Distribution("prediction_errors", "prediction.error_p{q}_m",
                                     samples="prediction.samples"),
    # Per bot, the longest wait between two snapshots it showed; percentiles over bots.
    "longest_gap": Distribution("longest_gaps", "snapshots.longest_gap_ms_p{q}",
                                quantiles=(50, 99), scale=1000.0),
}  # fmt: skip


class PartError(ValueError):
    """A report part that cannot be merged: one line saying which field and why."""


@dataclass(slots=True)
class SecondTally:
    """What every bot process did during second ``k`` of the run (the report's series):
    counts add; the tick rate is the slowest process's, the loop its bots lived in."""

    at: float  # wall clock at the end of the second (the latest process's)
    seconds: float  # the slowest process's interval
    ticks: int  # the slowest process's loop iterations in it
    cpu_s: float
    bots: int
    bytes_down: int
    bytes_up: int
    shots: int
    agreed: int
    rtt: Sketch = field(default_factory=Sketch)

    def merge(self, other: SecondTally) -> None:
        def rate(s: SecondTally) -> float:
            return s.ticks / s.seconds if s.seconds > 0 else 0.0

        if rate(other) < rate(self):
            self.seconds, self.ticks = other.seconds, other.ticks
        self.at = max(self.at, other.at)
        self.cpu_s += other.cpu_s
        self.bots += other.bots
        self.bytes_down += other.bytes_down
        self.bytes_up += other.bytes_up
        self.shots += other.shots
        self.agreed += other.agreed
        self.rtt.merge(other.rtt)

    def to_json(self) -> dict[str, Any]:
        return {
            "at": self.at, "seconds": self.seconds, "ticks": self.ticks, "cpu_s": self.cpu_s,
            "bots": self.bots, "bytes_down": self.bytes_down, "bytes_up": self.bytes_up,
            "shots": self.shots, "agreed": self.agreed, "rtt": self.rtt.to_json(),
        }  # fmt: skip

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SecondTally:
        return cls(
            at=float(data["at"]),
            seconds=float(data["seconds"]),
            ticks=int(data["ticks"]),
            cpu_s=float(data["cpu_s"]),
            bots=int(data["bots"]),
            bytes_down=int(data["bytes_down"]),
            bytes_up=int(data["bytes_up"]),
            shots=int(data["shots"]),
            agreed=int(data["agreed"]),
            rtt=Sketch.from_json(data["rtt"]),
        )


@dataclass(slots=True)
class Tally:
    """One or more bot processes' account of a run (see the module's docstring).

    ``counts``: totals, keyed by dotted report paths (:data:`COUNTED`) or by
    ``group/key`` (errors, fog, shots by bucket...: the key may hold dots). ``maxima``: the
    run's length and the swarm loop's ticks (the longest process's). ``events``: the few
    things that are events, not samples: failovers as each bot saw them (wall times), first
    sightings (peeker's advantage pairs bots of different processes), unexplained shots,
    one record per process, the kills made. ``server``: what the node said (its /health
    before and after, the watch's histogram and series), from the first part that has it.
    ``population``: which bots this covers (seed, the whole swarm's size, shards).
    """

    counts: dict[str, float] = field(default_factory=dict)
    maxima: dict[str, float] = field(default_factory=dict)
    sketches: dict[str, Sketch] = field(default_factory=dict)
    histograms: dict[str, FixedBins] = field(default_factory=dict)
    events: dict[str, list[Any]] = field(default_factory=dict)
    seconds: list[SecondTally] = field(default_factory=list)
    partial: bool = False
    invalid_reasons: list[str] = field(default_factory=list)
    population: dict[str, Any] = field(default_factory=dict)
    server: dict[str, Any] = field(default_factory=dict)

    def count(self, name: str, amount: float) -> None:
        self.counts[name] = self.counts.get(name, 0) + amount

    def total(self, name: str) -> int:
        return int(self.counts.get(name, 0))

    def group(self, prefix: str) -> dict[str, float]:
        """The counts named ``prefix/KEY``, by KEY (sorted)."""
        start = prefix + "/"
        return {k[len(start) :]: v for k, v in sorted(self.counts.items()) if k.startswith(start)}

    def sketch(self, name: str) -> Sketch:
        if name not in self.sketches:
            self.sketches[name] = Sketch()
        return self.sketches[name]

    def histogram(self, name: str, low: float, width: float, bins: int) -> FixedBins:
        if name not in self.histograms:
            self.histograms[name] = FixedBins(low, width, bins)
        return self.histograms[name]

    def event_list(self, name: str) -> list[Any]:
        return self.events.setdefault(name, [])

    def merge(self, other: Tally) -> Tally:
        """Add ``other`` (another process's tally of the same run) into this one."""
        for name, amount in other.counts.items():
            self.count(name, amount)
        for name, value in other.maxima.items():
            self.maxima[name] = max(self.maxima.get(name, value), value)
        for name, sketch in other.sketches.items():
            self.sketch(name).merge(sketch)
        for name, bins in other.histograms.items():
            self.histogram(name, bins.low, bins.width, bins.bins).merge(bins)
        for name, items in other.events.items():
            self.event_list(name).extend(items)
        for k, second in enumerate(other.seconds):
            if k < len(self.seconds):
                self.seconds[k].merge(second)
            else:
                self.seconds.append(SecondTally.from_json(second.to_json()))
        self.partial = self.partial or other.partial
        self.invalid_reasons += [r for r in other.invalid_reasons if r not in self.invalid_reasons]
        self.population = merge_population(self.population, other.population)
        if not self.server:
            self.server = dict(other.server)
        return self

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "population": self.population,
            "partial": self.partial,
            "invalid_reasons": list(self.invalid_reasons),
            "counts": dict(self.counts),
            "maxima": dict(self.maxima),
            "sketches": {k: v.to_json() for k, v in self.sketches.items()},
            "histograms": {k: v.to_json() for k, v in self.histograms.items()},
            "events": self.events,
            "seconds": [s.to_json() for s in self.seconds],
            "server": self.server,
        }

    @classmethod
    def from_json(cls, data: Any) -> Tally:
        """A tally from :meth:`to_json`; PartError (one line) for anything else."""
        if not isinstance(data, dict):
            raise PartError("not a tally (a JSON object is expected)")
        if data.get("format") != FORMAT:
            raise PartError(f"format {data.get('format')!r}, not {FORMAT!r}")
        field_name = ""
        try:
            field_name = "population"
            population = _object(data["population"])
            field_name = "partial"
            partial = data["partial"]
            if not isinstance(partial, bool):
                raise TypeError("not true or false")
            field_name = "invalid_reasons"
            reasons = [str(r) for r in _array(data["invalid_reasons"])]
            field_name = "counts"
            counts = {str(k): _number(v) for k, v in _object(data["counts"]).items()}
            field_name = "maxima"
            maxima = {str(k): _number(v) for k, v in _object(data["maxima"]).items()}
            field_name = "sketches"
            sketches = {k: Sketch.from_json(v) for k, v in _object(data["sketches"]).items()}
            field_name = "histograms"
            histograms = {k: FixedBins.from_json(v) for k, v in _object(data["histograms"]).items()}
            field_name = "events"
            events = {k: _array(v) for k, v in _object(data["events"]).items()}
            field_name = "seconds"
            seconds = [SecondTally.from_json(_object(s)) for s in _array(data["seconds"])]
            field_name = "server"
            server = _object(data["server"])
        except KeyError:
            raise PartError(f"the field {field_name!r} is missing") from None
        except (SketchFormatError, TypeError, ValueError, AttributeError) as error:
            raise PartError(f"the field {field_name!r} is malformed: {error}") from None
        return cls(counts, maxima, sketches, histograms, events, seconds, partial, reasons,
                   population, server)  # fmt: skip


def merge_population(mine: dict[str, Any], theirs: dict[str, Any]) -> dict[str, Any]:
    """Two parts of one swarm: the same seed and size and number of shards (PartError
    otherwise), their shards together (a shard twice is refused)."""
    if not mine:
        return {**theirs, "shards": list(theirs.get("shards", []))}
    for key in ("seed", "count", "light", "of"):
        if mine.get(key) != theirs.get(key):
            raise PartError(
                f"parts of different swarms: {key} {mine.get(key)!r} and {theirs.get(key)!r}"
            )
    twice = set(mine.get("shards", [])) & set(theirs.get("shards", []))
    if twice:
        raise PartError(f"shard {min(twice)} is in more than one part")
    return {**mine, "shards": sorted([*mine.get("shards", []), *theirs.get("shards", [])])}


def _object(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise TypeError("not an object")
    return value


def _array(value: Any) -> list[Any]:
    if not isinstance(value, list):
        raise TypeError("not an array")
    return value


def _number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{value!r} is not a number")
    return value
