"""The arena's static geometry, described as data and shared by server and bots.

A map is a floor at z = 0 bounded by a rectangle, axis-aligned boxes standing on it (tall
walls and low cover) and spawn points. Boxes are kept as struct-of-arrays (``box_min`` and
``box_max``, shape ``(M, 3)``, float64) because both the movement model and the hit kernels
loop over them in vectorised or jitted code.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np

from shared.jsonfile import read_json

__all__ = ["BOX_KINDS", "ArenaMap", "MapError", "default_map", "load_map"]

BOX_KINDS = ("wall", "cover")


class MapError(ValueError):
    """A map file is malformed; the message names the offending field."""


@dataclass(frozen=True, slots=True, eq=False)
class ArenaMap:
    name: str
    bounds_min: np.ndarray  # (2,) float64, x/y of the south-west corner
    bounds_max: np.ndarray  # (2,) float64
    box_min: np.ndarray  # (M, 3) float64
    box_max: np.ndarray  # (M, 3) float64
    box_kind: tuple[str, ...]
    spawns: np.ndarray  # (S, 2) float64

    @property
    def box_count(self) -> int:
        return int(self.box_min.shape[0])

    def spawn_point(self, index: int) -> tuple[float, float]:
        """Spawn points are handed out round-robin so joins spread over the map."""
        x, y = self.spawns[index % len(self.spawns)]
        return float(x), float(y)


def _vector(raw: object, length: int, where: str) -> list[float]:
    if (
        not isinstance(raw, list)
        or len(raw) != length
        or not all(isinstance(v, int | float) and not isinstance(v, bool) for v in raw)
    ):
        raise MapError(f"{where}: expected a list of {length} numbers, got {raw!r}")
    values = [float(v) for v in raw]
    if not all(np.isfinite(values)):
        raise MapError(f"{where}: numbers must be finite, got {raw!r}")
    return values


def parse_map(document: object) -> ArenaMap:
    """Validate a decoded map document and build the arrays; raises :class:`MapError`."""
    if not isinstance(document, dict):
        raise MapError("map: expected a JSON object at the top level")
    name = document.get("name")
    if not isinstance(name, str) or not name:
        raise MapError("map.name: expected a non-empty string")
    bounds = document.get("bounds")
    if not isinstance(bounds, dict):
        raise MapError("map.bounds: expected an object with 'min' and 'max'")
    lo = _vector(bounds.get("min"), 2, "map.bounds.min")
    hi = _vector(bounds.get("max"), 2, "map.bounds.max")
    if not (lo[0] < hi[0] and lo[1] < hi[1]):
        raise MapError("map.bounds: min must be below max on both axes")
    raw_boxes = document.get("boxes", [])
    if not isinstance(raw_boxes, list):
        raise MapError("map.boxes: expected a list")
    mins, maxs, kinds = [], [], []
    for i, box in enumerate(raw_boxes):
        where = f"map.boxes[{i}]"
        if not isinstance(box, dict):
            raise MapError(f"{where}: expected an object")
        kind = box.get("kind")
        if kind not in BOX_KINDS:
            raise MapError(f"{where}.kind: expected one of {BOX_KINDS}, got {kind!r}")
        bmin = _vector(box.get("min"), 3, f"{where}.min")
        bmax = _vector(box.get("max"), 3, f"{where}.max")
        if not all(a < b for a, b in zip(bmin, bmax, strict=True)):
            raise MapError(f"{where}: min must be below max on every axis")
        mins.append(bmin)
        maxs.append(bmax)
        kinds.append(kind)
    raw_spawns = document.get("spawns")
    if not isinstance(raw_spawns, list) or not raw_spawns:
        raise MapError("map.spawns: expected a non-empty list of [x, y] points")
    spawns = [_vector(s, 2, f"map.spawns[{i}]") for i, s in enumerate(raw_spawns)]
    for i, (x, y) in enumerate(spawns):
        if not (lo[0] <= x <= hi[0] and lo[1] <= y <= hi[1]):
            raise MapError(f"map.spawns[{i}]: point {x, y} lies outside the bounds")
    return ArenaMap(
        name=name,
        bounds_min=np.array(lo, dtype=np.float64),
        bounds_max=np.array(hi, dtype=np.float64),
        box_min=np.array(mins, dtype=np.float64).reshape(-1, 3),
        box_max=np.array(maxs, dtype=np.float64).reshape(-1, 3),
        box_kind=tuple(kinds),
        spawns=np.array(spawns, dtype=np.float64),
    )


def load_map(path: str | Path) -> ArenaMap:
    """Load a map from a JSON file, with one-line errors for users."""
    return parse_map(read_json(path, "map file", MapError))


def default_map() -> ArenaMap:
    """The embedded map every command uses unless told otherwise."""
    text = resources.files("shared").joinpath("data/default_map.json").read_text("utf-8")
    return parse_map(json.loads(text))
