"""The failover audit over hand-made journals and records (sans-I/O)."""

from __future__ import annotations

import json

from launch.audit import (
    Accepted,
    Fault,
    Promotion,
    Published,
    Welcome,
    audit,
    lineage,
    read_journal,
    read_record,
)


def run_of(epoch: int, node: str, ticks: range, t0: float, world: str) -> list[Published]:
    return [Published(node, epoch, k, f"{world}{k}", True, t0 + k / 60) for k in ticks]


def region() -> tuple[list[Published], list[Promotion]]:
    """a leads epoch 1 to tick 10; b is promoted from a's tick 8 at t=0.2 and goes on."""
    published = run_of(1, "a", range(1, 11), 0.0, "x") + run_of(2, "b", range(11, 16), 0.0, "y")
    return published, [Promotion("b", 2, 1, 8, 0.2)]


def seen(bot: int, *entries: tuple[int, int, str, int]) -> list[Accepted]:
    return [Accepted(bot, e, k, h, ack, k / 60 + 0.05) for e, k, h, ack in entries]


def test_the_lineage_is_the_last_primary_and_what_it_was_promoted_from() -> None:
    published, promotions = region()
    kept = lineage(published, promotions)
    assert kept[8] == frozenset({"x8"}) and kept[12] == frozenset({"y12"})
    assert 9 not in kept and 10 not in kept  # a showed them; b went on without them


def test_a_tick_the_region_lost_counts_with_the_inputs_it_acknowledged() -> None:
    published, promotions = region()
    accepted = {
        0: seen(0, (1, 7, "x7", 3), (1, 8, "x8", 4), (1, 9, "x9", 6), (2, 12, "y12", 6)),
        1: seen(1, (1, 8, "x8", 2), (2, 11, "y11", 2)),
    }
    figures = audit(published, promotions, accepted, [], ended_at=1.0)
    assert figures["acked_ticks"] == 6
    assert figures["acked_ticks_lost"] == 1  # bot 0's tick 9
    assert figures["inputs_lost"] == 2  # inputs 5 and 6: acknowledged only in tick 9
    assert figures["promotions"] == 1 and figures["spurious_promotions"] == 1  # no fault


def test_the_tick_a_killed_primary_showed_but_never_noted_is_kept() -> None:
    published, _ = region()
    unnoted = [p for p in published if p.tick != 8]  # killed right after showing tick 8
    promotions = [Promotion("b", 2, 1, 8, 0.2, "x8")]
    accepted = {0: seen(0, (1, 8, "x8", 4))}
    assert audit(unnoted, promotions, accepted, [], ended_at=1.0)["acked_ticks_lost"] == 0


def test_a_world_that_differs_at_the_same_tick_is_lost_too() -> None:
    published, promotions = region()
    accepted = {0: seen(0, (2, 12, "not-y12", 0))}
    assert audit(published, promotions, accepted, [], ended_at=1.0)["acked_ticks_lost"] == 1


def test_ticks_published_after_a_successor_exists_are_counted_and_if_seen_so_too() -> None:
    published, promotions = region()
    late = Published("a", 1, 16, "x16", False, 0.3)  # a, paused, woke up and published
    accepted = {0: seen(0, (1, 16, "x16", 0))}
    figures = audit([*published, late], promotions, accepted, [], ended_at=1.0)
    assert figures["published_by_deposed_primary"] == 1
    assert figures["published_by_deposed_primary_accepted"] == 1
    assert figures["ticks_published_unsynced"] == 1


def test_a_journal_line_written_late_does_not_make_a_tick_late() -> None:
    # Paused between its sends and its journal line: the line says 0.3, but a bot had the
    # tick at 0.15, before the promotion at 0.2.
    published, promotions = region()
    late_line = Published("a", 1, 9, "x9", True, 0.3)
    accepted = {0: [Accepted(0, 1, 9, "x9", 0, 0.15)]}
    figures = audit([*published[:8], late_line], promotions, accepted, [], ended_at=1.0)
    assert figures["published_by_deposed_primary"] == 0


def test_an_epoch_two_nodes_used_is_reported() -> None:
    published, promotions = region()
    again = run_of(1, "c", range(1, 3), 5.0, "z")  # a restart that claimed epoch 1 again
    figures = audit([*published, *again], promotions, {}, [], ended_at=6.0)
    assert figures["epochs_reused"] == [1]


def test_stalls_per_fault_and_bots_lost() -> None:
    published, promotions = region()
    times = [0.0, 0.1, 0.2, 0.5, 0.6, 0.7]  # a 300 ms gap after a kill at 0.25
    accepted = {
        0: [Accepted(0, 1, 1, "x1", 0, t) for t in times],
        1: [Accepted(1, 1, 1, "x1", 0, t) for t in times[:3]],  # never came back
    }
    kill = Fault("kill", "a", 0.25, 0.25, 1)
    figures = audit(published, promotions, accepted, [kill], ended_at=3.6)
    assert figures["kills"] == 1 and figures["spurious_promotions"] == 0
    assert figures["stall_ms_max"] == 3400.0  # the lost bot: shown nothing to the run's end
    came_back = audit(published, promotions, {0: accepted[0]}, [kill], ended_at=0.75)
    assert came_back["stall_ms_max"] == 300.0
    assert figures["bots_lost"] == 1
    assert figures["longest_without_primary_ms"] is not None


def test_a_silence_that_outlasts_the_faults_window_counts_whole() -> None:
    """A bot shown nothing from the fault until well past its window (held up, not lost)
    stalled that long: not the gaps between the few snapshots the window holds."""
    published, promotions = region()
    before = [0.0, 0.033, 0.066, 0.1]
    accepted = {0: [Accepted(0, 1, 1, "x1", 0, t) for t in [*before, 5.0, 5.033]]}
    kill = Fault("kill", "a", 0.25, 0.25, 1)  # its window ends at 3.25
    figures = audit(published, promotions, accepted, [kill], ended_at=5.1)
    assert figures["stall_ms_max"] == 4900.0
    assert figures["bots_lost"] == 0


def test_journals_and_records_read_back_and_a_torn_last_line_is_skipped() -> None:
    lines = [
        json.dumps({"node": "a", "epoch": 1, "tick": 5, "hash": "ab", "synced": True, "t": 1.0}),
        json.dumps(
            {
                "event": "promoted",
                "node": "b",
                "epoch": 2,
                "from_epoch": 1,
                "from_tick": 5,
                "t": 2.0,
            }
        ),
        '{"node": "a", "epo',
    ]
    published, promotions = read_journal(lines)
    assert published == [Published("a", 1, 5, "ab", True, 1.0)]
    assert promotions == [Promotion("b", 2, 1, 5, 2.0)]
    record = [
        json.dumps({"bot": 3, "event": "welcome", "epoch": 1, "player": 7, "ack": -1, "t": 1.0}),
        json.dumps({"bot": 3, "epoch": 1, "tick": 5, "hash": "ab", "ack": 2, "t": 1.1}),
        json.dumps(
            {
                "bot": 3,
                "event": "sighting",
                "player": 7,
                "seq": 9,
                "view_time": 1.0,
                "target": 2,
                "seen": [1.0, 2.0, 0.0],
                "t": 1.2,
            }
        ),
    ]
    assert read_record([*record, '{"bot"']) == (
        [Accepted(3, 1, 5, "ab", 2, 1.1)],
        [Welcome(3, 1, 7, -1, 1.0)],
    )


def test_a_resume_from_a_checkpoint_costs_the_ticks_after_it_not_a_broken_promise() -> None:
    """a shows ticks 1-20 (checkpoint at 12), both nodes die, a restarts at t=1.0 and
    resumes at t=1.2 from tick 12 at epoch 2, first tick 70 (the outage is a stall)."""
    published = run_of(1, "a", range(1, 21), 0.0, "x") + [
        Published("a", 2, k, f"z{k}", True, 1.25 + (k - 70) / 60) for k in range(70, 80)
    ]
    resume = Promotion("a", 2, 1, 12, 1.2, resumed=True)
    accepted = {0: seen(0, *((1, k, f"x{k}", k) for k in range(1, 21)))}
    accepted[0] += [Accepted(0, 2, k, f"z{k}", k, 1.3 + k / 600) for k in range(70, 80)]
    welcomes = {0: [Welcome(0, 1, 4, -1, 0.0), Welcome(0, 2, 4, 12, 1.3)]}
    both = Fault("kill_both", "a", 0.34, 1.0, 1)
    figures = audit(published, [resume], accepted, [both], ended_at=1.45, welcomes=welcomes)
    assert figures["acked_ticks_lost"] == 0 and figures["promotions"] == 0
    assert figures["acked_ticks_lost_to_checkpoint_recovery"] == 8  # ticks 13-20
    (recovery,) = figures["checkpoint_recoveries"]
    assert recovery["ticks_lost"] == 8 and recovery["last_tick_shown_before"] == 20
    assert recovery["resumed_s_after_node_start"] == 0.2
    assert recovery["first_tick_s_after_node_start"] == 0.25
    assert recovery["every_bot_back_s_after_node_start"] == 0.417  # 1.3 + 70/600 - 1.0
    assert figures["seats_resumed"] == 1 and figures["seats_lost"] == 0
    assert figures["longest_without_primary_ms"] is not None  # the outage itself left out
    assert figures["longest_without_primary_ms"] < 100


def test_a_calm_phase_counts_every_promotion_and_reconnect_in_it() -> None:
    published, promotions = region()  # b's promotion at t=0.2, no fault to explain it
    welcomes = {
        0: [Welcome(0, 1, 4, -1, 0.0), Welcome(0, 2, 4, 8, 0.21)],
        1: [Welcome(1, 1, 5, -1, 0.0), Welcome(1, 2, 9, -1, 0.5)],
    }
    figures = audit(published, promotions, {}, [], ended_at=1.0, welcomes=welcomes, calm=(0.1, 0.4))
    assert figures["calm_phase"] == {"seconds": 0.3, "promotions": 1, "bot_reconnects": 1}
    assert figures["spurious_promotions"] == 1
    assert figures["bot_reconnects"] == 2 and figures["seats_lost"] == 1
