"""Latency geography: where players live and how far (in round-trip milliseconds) that is.

The model is a symmetric matrix of typical round-trip times between a handful of
locations (``na``, ``sa``, ``eu``, ``asia``, ``oce``, ``me``, ``af``); the diagonal is a
player's RTT to a node in its own region. The embedded figures in
``data/latency_matrix.json`` are approximate medians and the file names its sources.

It serves the simulation only: the bots use it to model the link to each region, and the
directory never reads it (it routes by the RTTs a client *measured*). Everything here is
pure and deterministic: :func:`draw_homes` with the same seed gives the same homes.

Errors are :class:`GeoError` with one line naming the problem, for users' input and for
matrix files alike.
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np

from shared.jsonfile import read_json

__all__ = [
    "GeoError",
    "LatencyMatrix",
    "default_matrix",
    "draw_homes",
    "load_matrix",
    "locations",
    "parse_matrix",
    "parse_population",
    "parse_regions",
    "rtt_ms",
    "split_region",
]

_LOCATION = re.compile(r"[a-z][a-z0-9_-]{0,31}")


class GeoError(ValueError):
    """Bad geography: an unknown location, a malformed matrix or population. One line."""


def _number(value: object, where: str) -> float:
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise GeoError(f"{where}: expected a number of milliseconds, got {value!r}")
    result = float(value)
    if not math.isfinite(result):
        raise GeoError(f"{where}: must be finite, got {value!r}")
    return result


def _known(name: str, known: tuple[str, ...]) -> str:
    return f"unknown location {name!r} (known: {', '.join(known)})"


@dataclass(frozen=True, slots=True, eq=False)
class LatencyMatrix:
    """A validated, symmetric RTT matrix. Build it with :func:`parse_matrix`."""

    locations: tuple[str, ...]
    descriptions: Mapping[str, str]
    source: str
    _rtt: Mapping[tuple[str, str], float]

    def __contains__(self, location: object) -> bool:
        return location in self.descriptions

    def check(self, location: str) -> str:
        """``location`` itself when known, else :class:`GeoError`."""
        if location not in self.descriptions:
            raise GeoError(_known(location, self.locations))
        return location

    def rtt_ms(self, a: str, b: str) -> float:
        """Typical round trip between a player at ``a`` and a node in region ``b``."""
        return self._rtt[self.check(a), self.check(b)]

    def row(self, a: str) -> dict[str, float]:
        """RTTs from ``a`` to every location, in the matrix's order."""
        self.check(a)
        return {b: self._rtt[a, b] for b in self.locations}


def parse_matrix(document: object) -> LatencyMatrix:
    """Validate a decoded matrix document (see ``data/latency_matrix.json``)."""
    if not isinstance(document, dict):
        raise GeoError("latency matrix: expected a JSON object at the top level")
    rows = document.get("rtt_ms")
    if not isinstance(rows, dict) or not rows:
        raise GeoError("latency matrix: 'rtt_ms' must be a non-empty object of rows")
    names = tuple(rows)
    for name in names:
        if not isinstance(name, str) or not _LOCATION.fullmatch(name):
            raise GeoError(
                f"latency matrix: location name {name!r} must be 1-32 lowercase letters, "
                "digits, '_' or '-', starting with a letter"
            )
    raw_descriptions = document.get("locations", {name: name for name in names})
    if not isinstance(raw_descriptions, dict):
        raise GeoError("latency matrix: 'locations' must be an object of name -> description")
    if set(raw_descriptions) != set(names):
        extra = sorted(set(raw_descriptions) ^ set(names))
        raise GeoError(
            f"latency matrix: 'locations' and 'rtt_ms' disagree about {', '.join(extra)}"
        )
    rtt: dict[tuple[str, str], float] = {}
    for a in names:
        row = rows[a]
        if not isinstance(row, dict):
            raise GeoError(f"latency matrix: rtt_ms.{a} must be an object of location -> ms")
        for b in row:
            if b not in rows:
                raise GeoError(f"latency matrix: rtt_ms.{a}: {_known(str(b), names)}")
        for b in names:
            if b not in row:
                raise GeoError(f"latency matrix: missing entry rtt_ms.{a}.{b}")
            value = _number(row[b], f"latency matrix: rtt_ms.{a}.{b}")
            if value <= 0:
                raise GeoError(
                    f"latency matrix: rtt_ms.{a}.{b} is {value:g} ms; every RTT must be positive"
                )
            rtt[a, b] = value
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            if rtt[a, b] != rtt[b, a]:
                raise GeoError(
                    f"latency matrix: not symmetric: rtt_ms.{a}.{b} is {rtt[a, b]:g} ms "
                    f"but rtt_ms.{b}.{a} is {rtt[b, a]:g} ms"
                )
    source = document.get("source", "")
    return LatencyMatrix(
        locations=names,
        descriptions={name: str(raw_descriptions[name]) for name in names},
        source=source if isinstance(source, str) else "",
        _rtt=rtt,
    )


def load_matrix(path: str | Path) -> LatencyMatrix:
    """Load and validate a matrix file, with one-line errors."""
    return parse_matrix(read_json(path, "latency matrix", GeoError))


@functools.cache
def default_matrix() -> LatencyMatrix:
    """The embedded matrix (``shared/data/latency_matrix.json``)."""
    text = resources.files("shared").joinpath("data/latency_matrix.json").read_text("utf-8")
    return parse_matrix(json.loads(text))


def locations(matrix: LatencyMatrix | None = None) -> tuple[str, ...]:
    """The known locations, in the matrix's order."""
    return (matrix or default_matrix()).locations


def rtt_ms(a: str, b: str, matrix: LatencyMatrix | None = None) -> float:
    """Typical RTT (ms) from a player at ``a`` to region ``b``; symmetric."""
    return (matrix or default_matrix()).rtt_ms(a, b)


def parse_population(text: str, matrix: LatencyMatrix | None = None) -> dict[str, float]:
    """``"na:0.4,eu:0.3,asia:0.3"`` -> weights normalised to sum 1, in the order given.

    Weights are any non-negative numbers (``na:40,eu:60`` works too); at least one must be
    positive. Unknown or repeated locations and bad numbers raise :class:`GeoError`.
    """
    known = matrix or default_matrix()
    if not isinstance(text, str) or not text.strip():
        raise GeoError("population: empty; expected e.g. 'na:0.4,eu:0.3,asia:0.3'")
    weights: dict[str, float] = {}
    for part in text.split(","):
        item = part.strip()
        name, sep, raw = item.partition(":")
        name, raw = name.strip(), raw.strip()
        if not sep or not name or not raw:
            raise GeoError(f"population: {item!r} is not LOCATION:WEIGHT (e.g. 'eu:0.3')")
        if name not in known:
            raise GeoError(f"population: {_known(name, known.locations)}")
        if name in weights:
            raise GeoError(f"population: {name!r} is given twice")
        try:
            weight = float(raw)
        except ValueError:
            raise GeoError(f"population: weight {raw!r} of {name!r} is not a number") from None
        if not math.isfinite(weight) or weight < 0:
            raise GeoError(f"population: weight of {name!r} must be >= 0 and finite, got {raw}")
        weights[name] = weight
    total = sum(weights.values())
    if total <= 0:
        raise GeoError("population: every weight is zero; give at least one a positive weight")
    return {name: weight / total for name, weight in weights.items()}


def draw_homes(population: Mapping[str, float] | str, n: int, seed: int) -> tuple[str, ...]:
    """``n`` home locations drawn from ``population``; the same seed gives the same homes.

    The draw does not depend on the order the population lists its locations in.
    """
    weights = parse_population(population) if isinstance(population, str) else population
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise GeoError(f"draw_homes: n must be a non-negative integer, got {n!r}")
    names = sorted(weights)
    if not names:
        raise GeoError("draw_homes: the population is empty")
    p = np.array([float(weights[name]) for name in names], dtype=np.float64)
    if not np.all(np.isfinite(p)) or np.any(p < 0) or p.sum() <= 0:
        raise GeoError("draw_homes: weights must be finite, >= 0 and not all zero")
    rng = np.random.default_rng(seed)
    picks = rng.choice(len(names), size=n, p=p / p.sum())
    return tuple(names[int(i)] for i in picks)


#: What the directory accepts as a region name (``server/directory/registry.py``).
_REGION_NAME = re.compile(r"[a-z][a-z0-9_-]{0,31}")


def split_region(item: str, known: LatencyMatrix | None = None) -> tuple[str, str]:
    """``"us-east@na"`` -> ``("us-east", "na")``; ``"eu"`` -> ``("eu", "eu")``."""
    known = known or default_matrix()
    name, at, location = item.partition("@")
    name, location = name.strip(), location.strip()
    if not at:
        location = name
    if not _REGION_NAME.fullmatch(name):
        raise GeoError(
            f"region {name!r}: names are 1-32 lowercase letters, digits, '_' or '-', "
            "starting with a letter"
        )
    if location not in known:
        if not at:
            raise GeoError(
                f"region {name!r} is not a location ({', '.join(known.locations)}); "
                f"name its location too, e.g. {name}@{known.locations[0]}"
            )
        raise GeoError(
            f"region {name!r}: unknown location {location!r} (known: {', '.join(known.locations)})"
        )
    return name, location


def parse_regions(spec: str, matrix: LatencyMatrix | None = None) -> dict[str, str]:
    """``"na,eu,us-east@na"`` -> ``{"na": "na", "eu": "eu", "us-east": "na"}`` (in order).

    A region is named after its location or written ``name@location``; names must be
    valid directory region names and unique. Errors are one-line :class:`GeoError`.
    """
    known = matrix or default_matrix()
    if not isinstance(spec, str) or not spec.strip():
        raise GeoError("regions: empty; expected e.g. 'na,eu,asia' or 'us-east@na,eu'")
    regions: dict[str, str] = {}
    for part in spec.split(","):
        if not part.strip():
            raise GeoError(f"regions: empty entry in {spec!r}")
        name, location = split_region(part.strip(), known)
        if name in regions:
            raise GeoError(f"regions: {name!r} is given twice")
        regions[name] = location
    return regions
