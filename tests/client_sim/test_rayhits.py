"""The bots' ray kernel gives the shared NumPy reference's answer: kind, victim, hitbox
and distance, on random scenes that include the corners the arithmetic contract names
(axis-aligned rays, origins inside a box or a player or under the floor, players standing
on one spot, rays that end short of everything)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from shared.hitbox import HIT_NONE, HIT_PLAYER, HIT_WORLD, RayHit, ray_hit_player
from shared.rayhits import first_hit

# Rounded coordinates: scenes, with exact ties (two players on one spot, a ray along a
# box's face) far likelier than among arbitrary floats.
coordinate = st.floats(-12.0, 12.0).map(lambda v: round(v, 2))
height = st.floats(-0.5, 3.0).map(lambda v: round(v, 2))
component = st.one_of(st.just(0.0), st.floats(-1.0, 1.0).map(lambda v: round(v, 3)))
point = st.tuples(coordinate, coordinate, height)


@st.composite
def boxes(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray]:
    corners = draw(st.lists(st.tuples(point, point), max_size=6))
    low = np.array([np.minimum(a, b) for a, b in corners]).reshape(-1, 3)
    high = np.array([np.maximum(a, b) for a, b in corners]).reshape(-1, 3)
    return low, high


@settings(max_examples=600, deadline=None)
@given(
    origin=point,
    direction=st.tuples(component, component, component),
    max_range=st.sampled_from([0.5, 5.0, 30.0, 200.0]),
    feet=st.lists(st.tuples(coordinate, coordinate, height), max_size=10),
    in_line=st.lists(st.floats(0.0, 40.0).map(lambda v: round(v, 1)), max_size=4),
    repeat=st.booleans(),
    present_bits=st.integers(0, 2**16 - 1),
    walls=boxes(),
)
def test_the_kernel_is_the_reference(
    origin: tuple[float, float, float],
    direction: tuple[float, float, float],
    max_range: float,
    feet: list[tuple[float, float, float]],
    in_line: list[float],
    repeat: bool,
    present_bits: int,
    walls: tuple[np.ndarray, np.ndarray],
) -> None:
    # Players standing in the ray's way (their chests on it), so that hits are common.
    chest = (0.0, 0.0, 1.2)
    feet = [
        *feet,
        *(
            tuple(o - c + t * v for o, c, v in zip(origin, chest, direction, strict=True))
            for t in in_line
        ),
    ]
    if repeat and feet:
        feet = [*feet, feet[-1]]  # a tie: two players on one spot, the lower slot wins
    positions = np.array(feet, dtype=np.float64).reshape(-1, 3)
    present = np.array([bool(present_bits >> k & 1) for k in range(len(feet))], dtype=bool)
    o, d = np.array(origin), np.array(direction)
    low, high = walls
    expected = ray_hit_player(o, d, max_range, positions, low, high, present)
    got = first_hit(o, d, max_range, positions, present, low, high)
    assert (got.kind, got.victim, got.hitbox) == (expected.kind, expected.victim, expected.hitbox)
    assert got.distance == expected.distance


def test_the_nearest_player_in_front_of_the_wall_is_hit() -> None:
    feet = np.array([[0.0, 10.0, 0.0], [0.0, 5.0, 0.0], [0.0, 20.0, 0.0]])
    wall = (np.array([[-5.0, 15.0, 0.0]]), np.array([[5.0, 16.0, 3.0]]))
    eye, forward = np.array([0.0, 0.0, 1.62]), np.array([0.0, 1.0, 0.0])
    hit = first_hit(eye, forward, 100.0, feet, np.ones(3, dtype=bool), *wall)
    assert hit == RayHit(HIT_PLAYER, 1, 1, hit.distance) and 4.8 < hit.distance < 4.9
    hidden = np.array([False, False, True])
    assert first_hit(eye, forward, 100.0, feet, hidden, *wall) == RayHit(HIT_WORLD, -1, 0, 15.0)
    assert first_hit(eye, forward, 12.0, feet, hidden, *wall) == RayHit(HIT_NONE, -1, 0, 12.0)


def test_of_two_players_on_one_spot_the_lower_slot_is_hit() -> None:
    feet = np.array([[3.0, 10.0, 0.0], [0.0, 10.0, 0.0], [0.0, 10.0, 0.0]])
    eye, forward = np.array([0.0, 0.0, 1.2]), np.array([0.0, 1.0, 0.0])
    no_walls = np.zeros((0, 3))
    both = first_hit(eye, forward, 100.0, feet, np.ones(3, dtype=bool), no_walls, no_walls)
    assert (both.kind, both.victim, both.hitbox) == (HIT_PLAYER, 1, 2)
    one = first_hit(eye, forward, 100.0, feet, np.array([True, False, True]), no_walls, no_walls)
    assert (one.victim, one.distance) == (2, both.distance)
