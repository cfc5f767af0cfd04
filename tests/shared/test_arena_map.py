"""Map loading: the default map is sane; every malformed document gets one clear line."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from shared.arena_map import BOX_KINDS, MapError, default_map, load_map, parse_map
from shared.movement import PLAYER_HEIGHT, PLAYER_RADIUS

GOOD: dict[str, Any] = {
    "name": "tiny",
    "bounds": {"min": [-10.0, -5.0], "max": [10, 5]},
    "boxes": [
        {"kind": "wall", "min": [0.0, -1.0, 0.0], "max": [1.0, 1.0, 3.0]},
        {"kind": "cover", "min": [-4, -4, 0], "max": [-3, -3, 1.2]},
    ],
    "spawns": [[-8.0, 0.0], [8, 0]],
}


def document(**changes: Any) -> dict[str, Any]:
    doc = copy.deepcopy(GOOD)
    doc.update(changes)
    return doc


def map_error(doc: object) -> str:
    with pytest.raises(MapError) as info:
        parse_map(doc)
    message = str(info.value)
    assert "\n" not in message and message
    return message


# -- the default map ----------------------------------------------------------------------


def test_default_map_loads_with_consistent_arrays() -> None:
    arena = default_map()
    assert arena.name == "courtyard"
    assert arena.bounds_min.tolist() == [-30.0, -30.0]
    assert arena.bounds_max.tolist() == [30.0, 30.0]
    assert arena.box_count == len(arena.box_kind) > 0
    assert arena.box_min.shape == arena.box_max.shape == (arena.box_count, 3)
    assert arena.box_min.dtype == arena.box_max.dtype == arena.spawns.dtype == np.float64
    assert set(arena.box_kind) <= set(BOX_KINDS)
    assert np.all(arena.box_min < arena.box_max)
    assert arena.spawns.shape[1] == 2 and len(arena.spawns) >= 2


def test_default_map_boxes_stand_on_the_floor_inside_the_bounds() -> None:
    arena = default_map()
    assert np.all(arena.box_min[:, 2] == 0.0)
    assert np.all(arena.box_min[:, :2] >= arena.bounds_min)
    assert np.all(arena.box_max[:, :2] <= arena.bounds_max)
    walls = np.array([k == "wall" for k in arena.box_kind])
    assert np.all(arena.box_max[walls, 2] > PLAYER_HEIGHT)  # walls are taller than a player
    assert np.all(arena.box_max[~walls, 2] < PLAYER_HEIGHT)  # cover is something to hide behind


def test_default_map_spawns_leave_room_for_a_player() -> None:
    arena = default_map()
    for x, y in arena.spawns:
        assert arena.bounds_min[0] + PLAYER_RADIUS <= x <= arena.bounds_max[0] - PLAYER_RADIUS
        assert arena.bounds_min[1] + PLAYER_RADIUS <= y <= arena.bounds_max[1] - PLAYER_RADIUS
        clear = (
            (x + PLAYER_RADIUS <= arena.box_min[:, 0])
            | (x - PLAYER_RADIUS >= arena.box_max[:, 0])
            | (y + PLAYER_RADIUS <= arena.box_min[:, 1])
            | (y - PLAYER_RADIUS >= arena.box_max[:, 1])
        )
        assert clear.all(), (x, y)
    assert len({tuple(s) for s in arena.spawns.tolist()}) == len(arena.spawns)


def test_spawn_points_are_handed_out_round_robin() -> None:
    arena = default_map()
    n = len(arena.spawns)
    assert [arena.spawn_point(i) for i in range(n)] == [tuple(s) for s in arena.spawns.tolist()]
    assert arena.spawn_point(n + 2) == arena.spawn_point(2)
    assert all(type(v) is float for v in arena.spawn_point(0))


def test_load_map_reads_the_same_map_as_parse_map(tmp_path: Path) -> None:
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps(GOOD), encoding="utf-8")
    arena = load_map(path)
    assert arena.name == "tiny"
    assert arena.bounds_max.tolist() == [10.0, 5.0]
    assert arena.box_kind == ("wall", "cover")
    assert arena.box_max.tolist() == [[1.0, 1.0, 3.0], [-3.0, -3.0, 1.2]]
    assert arena.spawns.tolist() == [[-8.0, 0.0], [8.0, 0.0]]
    assert load_map(str(path)).spawns.tolist() == arena.spawns.tolist()


def test_a_map_without_boxes_is_valid() -> None:
    doc = document()
    del doc["boxes"]
    arena = parse_map(doc)
    assert arena.box_count == 0
    assert arena.box_min.shape == arena.box_max.shape == (0, 3)


# -- load errors ------------------------------------------------------------------------------


def test_missing_file_is_one_line_naming_the_path(tmp_path: Path) -> None:
    missing = tmp_path / "nope.json"
    with pytest.raises(MapError) as info:
        load_map(missing)
    message = str(info.value)
    assert str(missing) in message and "\n" not in message
    assert info.value.__cause__ is None and info.value.__suppress_context__


def test_bad_json_is_one_line_naming_the_path(tmp_path: Path) -> None:
    path = tmp_path / "broken.json"
    path.write_text('{"name": "x",\n "bounds": ', encoding="utf-8")
    with pytest.raises(MapError) as info:
        load_map(path)
    message = str(info.value)
    assert str(path) in message and "not valid JSON" in message and "\n" not in message


def test_a_directory_is_not_a_map(tmp_path: Path) -> None:
    with pytest.raises(MapError, match="cannot read map file"):
        load_map(tmp_path)


# -- validation errors, each naming the field ---------------------------------------------------


@pytest.mark.parametrize("top", [[], "map", 3, None])
def test_top_level_must_be_an_object(top: object) -> None:
    assert map_error(top).startswith("map:")


@pytest.mark.parametrize("name", [None, "", 5])
def test_name_must_be_a_non_empty_string(name: object) -> None:
    assert map_error(document(name=name)).startswith("map.name:")


def test_bounds_must_be_an_object() -> None:
    assert map_error(document(bounds=[0, 1])).startswith("map.bounds:")


@pytest.mark.parametrize(
    ("bounds", "field"),
    [
        ({"min": [0.0, 0.0], "max": [0.0, 5.0]}, "map.bounds:"),  # min == max
        ({"min": [0.0, 6.0], "max": [5.0, 5.0]}, "map.bounds:"),  # min > max
        ({"min": [0.0], "max": [5.0, 5.0]}, "map.bounds.min:"),
        ({"min": [0.0, 0.0], "max": [5.0, 5.0, 5.0]}, "map.bounds.max:"),
        ({"max": [5.0, 5.0]}, "map.bounds.min:"),
        ({"min": [0.0, "1"], "max": [5.0, 5.0]}, "map.bounds.min:"),
        ({"min": [0.0, True], "max": [5.0, 5.0]}, "map.bounds.min:"),
    ],
)
def test_bad_bounds_name_the_field(bounds: dict[str, Any], field: str) -> None:
    assert map_error(document(bounds=bounds)).startswith(field)


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_non_finite_numbers_are_refused(value: float) -> None:
    doc = document()
    doc["boxes"][1]["max"][2] = value
    message = map_error(doc)
    assert message.startswith("map.boxes[1].max:") and "finite" in message


def test_non_finite_bounds_are_refused() -> None:
    message = map_error(document(bounds={"min": [-math.inf, 0.0], "max": [1.0, 1.0]}))
    assert message.startswith("map.bounds.min:") and "finite" in message


def test_boxes_must_be_a_list_of_objects() -> None:
    assert map_error(document(boxes={"kind": "wall"})).startswith("map.boxes:")
    assert map_error(document(boxes=[GOOD["boxes"][0], 7])).startswith("map.boxes[1]:")


@pytest.mark.parametrize("kind", ["crate", None, "WALL", 1])
def test_bad_box_kind_names_the_box(kind: object) -> None:
    doc = document()
    doc["boxes"][1]["kind"] = kind
    message = map_error(doc)
    assert message.startswith("map.boxes[1].kind:") and "wall" in message


@pytest.mark.parametrize(
    ("key", "value", "field"),
    [
        ("min", [0.0, 0.0], "map.boxes[0].min:"),
        ("max", [1.0, 1.0, 3.0, 4.0], "map.boxes[0].max:"),
        ("max", [1.0, 1.0, 0.0], "map.boxes[0]:"),  # zero height: min == max on z
        ("min", [2.0, -1.0, 0.0], "map.boxes[0]:"),  # min above max on x
    ],
)
def test_bad_box_extent_names_the_box(key: str, value: list[float], field: str) -> None:
    doc = document()
    doc["boxes"][0][key] = value
    assert map_error(doc).startswith(field)


@pytest.mark.parametrize("spawns", [None, [], "here"])
def test_spawns_must_be_a_non_empty_list(spawns: object) -> None:
    assert map_error(document(spawns=spawns)).startswith("map.spawns:")


@pytest.mark.parametrize("spawn", [[0.0], [0.0, 0.0, 0.0], [0.0, None], "0,0"])
def test_spawn_with_wrong_shape_names_the_spawn(spawn: object) -> None:
    assert map_error(document(spawns=[[0.0, 0.0], spawn])).startswith("map.spawns[1]:")


@pytest.mark.parametrize("spawn", [[10.5, 0.0], [0.0, -5.01], [-11.0, 6.0]])
def test_spawn_outside_bounds_names_the_spawn(spawn: list[float]) -> None:
    message = map_error(document(spawns=[[0.0, 0.0], spawn]))
    assert message.startswith("map.spawns[1]:") and "outside the bounds" in message


def test_spawn_exactly_on_the_bounds_is_accepted() -> None:
    arena = parse_map(document(spawns=[[-10.0, -5.0], [10.0, 5.0]]))
    assert arena.spawns.tolist() == [[-10.0, -5.0], [10.0, 5.0]]
