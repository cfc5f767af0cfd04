"""The shared hitbox model: its constants and the exact ray tests bots and server rely on."""

from __future__ import annotations

import math

import numpy as np
import pytest

from shared.hitbox import (
    BOUNDING_SPHERE_CENTRE,
    BOUNDING_SPHERE_RADIUS,
    HIT_NONE,
    HIT_PLAYER,
    HIT_WORLD,
    HITBOX_DAMAGE_MULTIPLIER,
    HITBOX_HEAD,
    HITBOX_LEGS,
    HITBOX_MIN_RADIUS,
    HITBOX_NAMES,
    HITBOX_NONE,
    HITBOX_RADIAL_EXTENT,
    HITBOX_TORSO,
    HITBOXES,
    Hitbox,
    hitbox_arrays,
    ray_hit_player,
    ray_hitbox_entries,
    ray_world_entry,
)

NO_BOXES = np.zeros((0, 3))
X = np.array([1.0, 0.0, 0.0])


def shoot(z: float, feet: list[tuple[float, float, float]], **kwargs: object):
    """A horizontal shot along +x from (0, 0, z)."""
    return ray_hit_player(
        np.array([0.0, 0.0, z]),
        kwargs.pop("direction", X),
        kwargs.pop("max_range", 100.0),
        np.array(feet, dtype=np.float64),
        kwargs.pop("box_min", NO_BOXES),
        kwargs.pop("box_max", NO_BOXES),
        **kwargs,
    )


def test_constants_are_the_documented_model():
    assert (HITBOX_NONE, HITBOX_HEAD, HITBOX_TORSO, HITBOX_LEGS) == (0, 1, 2, 3)
    assert HITBOX_NAMES == ("none", "head", "torso", "legs")
    assert (HIT_NONE, HIT_PLAYER, HIT_WORLD) == (0, 1, 2)
    assert HITBOX_DAMAGE_MULTIPLIER == (0.0, 2.0, 1.0, 0.75)
    head, torso, legs = HITBOXES
    assert head.bottom == head.top == (0.0, 0.0, 1.62) and head.radius == 0.14
    assert (torso.bottom, torso.top, torso.radius) == ((0.0, 0.0, 1.0), (0.0, 0.0, 1.38), 0.22)
    assert (legs.bottom, legs.top, legs.radius) == ((0.0, 0.0, 0.12), (0.0, 0.0, 0.85), 0.16)
    assert HITBOX_MIN_RADIUS == 0.14 and HITBOX_RADIAL_EXTENT == 0.22
    bottom, top, radius = hitbox_arrays()
    assert bottom.tolist() == [1.62, 1.0, 0.12]
    assert top.tolist() == [1.62, 1.38, 0.85]
    assert radius.tolist() == [0.14, 0.22, 0.16]


def test_hitboxes_must_be_vertical_and_positive():
    with pytest.raises(ValueError, match="vertical"):
        Hitbox(9, "arm", (0.3, 0.0, 1.2), (0.3, 0.0, 1.4), 0.05, 0.5)
    with pytest.raises(ValueError, match="positive radius"):
        Hitbox(9, "arm", (0.0, 0.0, 1.2), (0.0, 0.0, 1.4), 0.0, 0.5)


def test_bounding_sphere_encloses_every_hitbox_and_is_tight():
    centre = np.array(BOUNDING_SPHERE_CENTRE)
    assert centre[:2].tolist() == [0.0, 0.0]
    assert centre[2] == pytest.approx(0.86) and BOUNDING_SPHERE_RADIUS == pytest.approx(0.90)
    rng = np.random.default_rng(0)
    farthest = 0.0
    for box in HITBOXES:
        # Points on the capsule's surface: a point of the axis plus a radius in any direction.
        axis = rng.uniform(box.bottom[2], box.top[2], size=2000)
        normal = rng.normal(size=(2000, 3))
        normal /= np.linalg.norm(normal, axis=1, keepdims=True)
        points = normal * box.radius
        points[:, 2] += axis
        for end in (box.bottom[2], box.top[2]):  # the poles are the extreme points
            points = np.vstack([points, [[0, 0, end + box.radius], [0, 0, end - box.radius]]])
        farthest = max(farthest, float(np.linalg.norm(points - centre, axis=1).max()))
    assert farthest <= BOUNDING_SPHERE_RADIUS + 1e-12
    assert farthest == pytest.approx(BOUNDING_SPHERE_RADIUS)  # top of the head, sole of legs


@pytest.mark.parametrize(
    ("z", "hitbox", "distance"),
    [
        (1.62, HITBOX_HEAD, 10.0 - 0.14),  # through the head's centre
        (1.2, HITBOX_TORSO, 10.0 - 0.22),  # the torso's cylinder
        (0.5, HITBOX_LEGS, 10.0 - 0.16),  # the legs' cylinder
        # Between the torso's top (1.38) and the head's bottom (1.48): the torso's cap.
        (1.45, HITBOX_TORSO, 10.0 - math.sqrt(0.22**2 - 0.07**2)),
    ],
)
def test_horizontal_shots_hit_the_expected_hitbox(z, hitbox, distance):
    hit = shoot(z, [(10.0, 0.0, 0.0)])
    assert hit == (HIT_PLAYER, 0, hitbox, pytest.approx(distance, abs=1e-12))


def test_shot_over_the_head_misses_and_reports_the_range():
    assert shoot(1.8, [(10.0, 0.0, 0.0)], max_range=50.0) == (HIT_NONE, -1, HITBOX_NONE, 50.0)


def test_range_is_inclusive_and_limits_hits():
    assert shoot(1.2, [(10.0, 0.0, 0.0)], max_range=9.7).kind == HIT_NONE
    assert shoot(1.2, [(10.0, 0.0, 0.0)], max_range=9.8).kind == HIT_PLAYER


def test_vertical_shot_onto_the_head_uses_the_axis_parallel_path():
    hit = ray_hit_player(
        np.array([0.0, 0.0, 5.0]), np.array([0.0, 0.0, -1.0]), 10.0,
        np.array([[0.0, 0.0, 0.0]]), NO_BOXES, NO_BOXES,
    )  # fmt: skip
    assert hit == (HIT_PLAYER, 0, HITBOX_HEAD, pytest.approx(5.0 - 1.76, abs=1e-12))


def test_vertical_shot_beside_a_thin_part_hits_the_wider_torso():
    # 0.2 m off the axis: outside the head (0.14) and the legs (0.16), inside the torso (0.22).
    hit = ray_hit_player(
        np.array([0.2, 0.0, 5.0]), np.array([0.0, 0.0, -1.0]), 10.0,
        np.array([[0.0, 0.0, 0.0]]), NO_BOXES, NO_BOXES,
    )  # fmt: skip
    expected = 5.0 - (1.38 + math.sqrt(0.22**2 - 0.2**2))
    assert hit == (HIT_PLAYER, 0, HITBOX_TORSO, pytest.approx(expected, abs=1e-12))


def test_nearest_player_wins_and_present_mask_excludes_slots():
    feet = [(20.0, 0.0, 0.0), (10.0, 0.0, 0.0)]
    assert shoot(1.2, feet).victim == 1
    assert shoot(1.2, feet, present=np.array([True, False])).victim == 0
    assert shoot(1.2, feet, present=np.array([False, False])).kind == HIT_NONE


def test_exact_tie_between_players_goes_to_the_lower_slot():
    hit = shoot(1.2, [(10.0, 0.0, 0.0), (10.0, 0.0, 0.0)])
    assert (hit.kind, hit.victim) == (HIT_PLAYER, 0)


def test_a_wall_in_front_blocks_and_a_wall_behind_does_not():
    wall_min = np.array([[5.0, -2.0, 0.0]])
    wall_max = np.array([[5.5, 2.0, 3.0]])
    blocked = shoot(1.2, [(10.0, 0.0, 0.0)], box_min=wall_min, box_max=wall_max)
    assert blocked == (HIT_WORLD, -1, HITBOX_NONE, 5.0)
    behind = shoot(1.2, [(4.0, 0.0, 0.0)], box_min=wall_min, box_max=wall_max)
    assert (behind.kind, behind.hitbox) == (HIT_PLAYER, HITBOX_TORSO)


def test_low_cover_stops_a_leg_shot_but_not_a_head_shot():
    cover_min = np.array([[5.0, -1.0, 0.0]])
    cover_max = np.array([[6.0, 1.0, 1.2]])
    feet = [(10.0, 0.0, 0.0)]
    assert shoot(0.5, feet, box_min=cover_min, box_max=cover_max).kind == HIT_WORLD
    head = shoot(1.62, feet, box_min=cover_min, box_max=cover_max)
    assert (head.kind, head.hitbox) == (HIT_PLAYER, HITBOX_HEAD)


def test_world_wins_a_tie_with_a_player():
    # The muzzle is inside a crate and inside the target's torso: both are hit at 0.
    crate_min = np.array([[-0.5, -0.5, 0.0]])
    crate_max = np.array([[0.5, 0.5, 1.2]])
    hit = shoot(1.0, [(0.1, 0.0, 0.0)], box_min=crate_min, box_max=crate_max)
    assert hit == (HIT_WORLD, -1, HITBOX_NONE, 0.0)


def test_origin_inside_a_hitbox_hits_it_at_zero():
    assert shoot(1.62, [(0.05, 0.0, 0.0)]) == (HIT_PLAYER, 0, HITBOX_HEAD, 0.0)


def test_floor_stops_downward_shots():
    direction = np.array([1.0, 0.0, -1.0]) / math.sqrt(2.0)
    hit = shoot(1.0, [], direction=direction)
    assert hit == (HIT_WORLD, -1, HITBOX_NONE, pytest.approx(math.sqrt(2.0)))
    assert ray_world_entry(np.array([0, 0, -0.1]), X, 10.0, NO_BOXES, NO_BOXES) == 0.0


def test_slab_test_handles_axis_parallel_rays():
    box_min = np.array([[2.0, -1.0, 0.0]])
    box_max = np.array([[3.0, 1.0, 2.0]])
    assert ray_world_entry(np.array([0.0, 0.5, 1.0]), X, 10.0, box_min, box_max) == 2.0
    assert ray_world_entry(np.array([0.0, 1.5, 1.0]), X, 10.0, box_min, box_max) == math.inf


def test_entries_scale_with_the_direction_length():
    """Projectile chords pass an unnormalised direction with max_t = 1."""
    origin = np.array([0.0, 0.0, 1.2])
    feet = np.array([[10.0, 0.0, 0.0]])
    unit = ray_hitbox_entries(origin, X, 100.0, feet)
    chord = ray_hitbox_entries(origin, 20.0 * X, 1.0, feet)
    np.testing.assert_allclose(chord * 20.0, unit, rtol=1e-12)
    assert np.isinf(ray_hitbox_entries(origin, 5.0 * X, 1.0, feet)).all()  # too short


def test_a_zero_length_segment_hits_only_from_inside():
    zero = np.zeros(3)
    inside = ray_hitbox_entries(np.array([0.0, 0.0, 1.2]), zero, 1.0, np.zeros((1, 3)))
    assert inside.tolist() == [[math.inf, 0.0, math.inf]]
    outside = ray_hitbox_entries(np.array([1.0, 0.0, 1.2]), zero, 1.0, np.zeros((1, 3)))
    assert np.isinf(outside).all()
