"""Prediction and reconciliation for a swarm: exact agreement, errors, replay, the ring."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from client_sim.prediction import SwarmPredictor
from shared.arena_map import default_map
from shared.movement import BUTTON_JUMP, step

ARENA = default_map()
RATE = 60
DT = 1.0 / RATE
START = np.array([[-10.0, 0.0, 0.0], [10.0, 0.0, 0.0], [0.0, -5.0, 0.0]])


def inputs(seed: int, count: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """``n`` inputs for ``count`` bots: moves inside the unit circle, some jumps."""
    rng = np.random.default_rng(seed)
    angle = rng.uniform(-np.pi, np.pi, (n, count))
    length = rng.uniform(0.0, 1.0, (n, count))
    move = np.stack((np.cos(angle) * length, np.sin(angle) * length), axis=-1)
    buttons = np.where(rng.random((n, count)) < 0.1, BUTTON_JUMP, 0)
    return move, buttons


def server_states(
    start: np.ndarray, move: np.ndarray, buttons: np.ndarray, order: list[int]
) -> list[tuple[np.ndarray, np.ndarray]]:
    """One bot's authoritative states, stepped alone; ``order`` is the inputs applied."""
    pos, vel = start[None].copy(), np.zeros((1, 3))
    states = []
    for i in order:
        pos, vel = step(pos, vel, move[i][None], buttons[i][None], DT, ARENA)
        states.append((pos[0].copy(), vel[0].copy()))
    return states


def predictor(count: int = 3, history: int = 256) -> SwarmPredictor:
    swarm = SwarmPredictor(count, ARENA, RATE, history=history)
    for bot in range(count):
        swarm.place(bot, START[bot], np.zeros(3))
    return swarm


def run(swarm: SwarmPredictor, move: np.ndarray, buttons: np.ndarray) -> None:
    bots = np.arange(swarm.count)
    for i in range(len(move)):
        assert swarm.apply(bots, move[i], buttons[i]).tolist() == [i] * swarm.count


def you(state: tuple[np.ndarray, np.ndarray]) -> tuple[float, ...]:
    return tuple(np.concatenate(state).tolist())


def test_apply_numbers_inputs_per_bot() -> None:
    swarm = predictor()
    none = np.zeros(2, dtype=np.int64)
    assert swarm.apply(np.array([0, 2]), np.zeros((2, 2)), none).tolist() == [0, 0]
    assert swarm.apply(np.array([2]), np.zeros((1, 2)), none[:1]).tolist() == [1]
    assert swarm.next_seq.tolist() == [1, 0, 2]


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), ack=st.integers(0, 19))
def test_reconciling_with_the_exact_server_state_gives_zero_error(seed: int, ack: int) -> None:
    move, buttons = inputs(seed, 3, 20)
    swarm = predictor()
    run(swarm, move, buttons)
    predicted = swarm.pos.copy()
    for bot in range(3):
        states = server_states(START[bot], move[:, bot], buttons[:, bot], list(range(ack + 1)))
        swarm.authoritative(bot, ack, you(states[-1]))
    swarm.reconcile()
    assert swarm.error_samples().tolist() == [0.0, 0.0, 0.0]
    assert swarm.pos.tolist() == predicted.tolist()  # the replay ends where prediction did
    assert swarm.acked.tolist() == [ack] * 3


def test_an_exact_prediction_is_kept_without_replaying(monkeypatch: pytest.MonkeyPatch) -> None:
    move, buttons = inputs(7, 3, 10)
    swarm = predictor()
    run(swarm, move, buttons)
    predicted = swarm.pos.copy()
    for bot in range(3):
        states = server_states(START[bot], move[:, bot], buttons[:, bot], list(range(4)))
        swarm.authoritative(bot, 3, you(states[-1]))
    steps: list[int] = []

    def counting_step(*args: object, **kwargs: object) -> tuple[np.ndarray, np.ndarray]:
        steps.append(1)
        return step(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr("client_sim.prediction.step", counting_step)
    swarm.reconcile()
    assert steps == [] and swarm.pos.tolist() == predicted.tolist()
    assert swarm.acked.tolist() == [3] * 3
    # One bot the server moved elsewhere: only it is rewound and replayed.
    states = server_states(START[1], move[:, 1], buttons[:, 1], [0, 0, 1, 2, 3])
    swarm.authoritative(1, 4, you(states[-1]))
    swarm.reconcile()
    assert len(steps) == 5  # inputs 5..9, for that one bot
    assert swarm.pos[[0, 2]].tolist() == predicted[[0, 2]].tolist()
    assert swarm.pos[1].tolist() != predicted[1].tolist()


def test_a_server_that_repeated_an_input_shows_as_error_and_the_bot_converges() -> None:
    move, buttons = inputs(7, 1, 12)
    move[:, 0] = (1.0, 0.0)  # running east: the repeated input is visibly a step further
    buttons[:] = 0
    swarm = predictor(count=1)
    run(swarm, move, buttons)
    predicted_at_5 = server_states(START[0], move[:, 0], buttons[:, 0], list(range(6)))[-1][0]
    # The server starved once and repeated input 3 before input 4 arrived.
    order = [0, 1, 2, 3, 3, 4, 5, 6, 7, 8, 9, 10, 11]
    server = server_states(START[0], move[:, 0], buttons[:, 0], order)
    after_5 = server[order.index(5)]
    swarm.authoritative(0, 5, you(after_5))
    swarm.reconcile()
    (error,) = swarm.error_samples()
    assert error == np.linalg.norm(predicted_at_5 - after_5[0])
    assert error > 0.05
    # After replaying 6..11 from the server's state the bot agrees with the server exactly.
    assert swarm.pos[0].tolist() == server[-1][0].tolist()
    assert swarm.vel[0].tolist() == server[-1][1].tolist()
    swarm.authoritative(0, 9, you(server[order.index(9)]))
    swarm.reconcile()
    assert swarm.error_samples().tolist() == [error, 0.0]


def test_only_bots_with_news_are_reconciled() -> None:
    move, buttons = inputs(3, 3, 6)
    swarm = predictor()
    run(swarm, move, buttons)
    before = swarm.pos.copy()
    swarm.authoritative(1, 2, (0.0, 0.0, 0.0, 0.0, 0.0, 0.0))  # far from the prediction
    swarm.reconcile()
    assert len(swarm.error_samples()) == 1
    assert swarm.pos[[0, 2]].tolist() == before[[0, 2]].tolist()
    assert swarm.pos[1].tolist() != before[1].tolist()
    assert swarm.acked.tolist() == [-1, 2, -1]
    swarm.reconcile()  # nothing new: nothing changes, nothing is scored
    assert len(swarm.error_samples()) == 1


def test_the_latest_authoritative_state_before_a_reconcile_wins() -> None:
    move, buttons = inputs(5, 1, 8)
    swarm = predictor(count=1)
    run(swarm, move, buttons)
    states = server_states(START[0], move[:, 0], buttons[:, 0], list(range(8)))
    swarm.authoritative(0, 2, (99.0, 99.0, 0.0, 0.0, 0.0, 0.0))
    swarm.authoritative(0, 4, you(states[4]))
    swarm.reconcile()
    assert swarm.error_samples().tolist() == [0.0]
    assert swarm.acked.tolist() == [4]


@pytest.mark.parametrize("flag", ["unscored", "skip_next"])
def test_unscored_and_skipped_bots_produce_no_error_but_are_still_corrected(flag: str) -> None:
    move, buttons = inputs(11, 2, 6)
    swarm = predictor(count=2)
    run(swarm, move, buttons)
    getattr(swarm, flag)[0] = True
    server = (1.0, 2.0, 0.0, 0.0, 0.0, 0.0)  # e.g. a respawn nobody predicted
    swarm.authoritative(0, 5, server)
    swarm.reconcile()
    assert len(swarm.error_samples()) == 0
    assert swarm.pos[0].tolist() == [1.0, 2.0, 0.0]


def test_skip_next_skips_only_the_next_reconcile() -> None:
    move, buttons = inputs(13, 1, 6)
    swarm = predictor(count=1)
    run(swarm, move, buttons)
    swarm.skip_next[0] = True
    swarm.authoritative(0, 5, (1.0, 2.0, 0.0, 0.0, 0.0, 0.0))
    swarm.reconcile()
    assert not swarm.skip_next[0]
    assert len(swarm.error_samples()) == 0
    # The next input is predicted from the corrected state, and that one is scored.
    swarm.apply(np.array([0]), np.array([[1.0, 0.0]]), np.array([0]))
    pos, vel = step(
        np.array([[1.0, 2.0, 0.0]]),
        np.zeros((1, 3)),
        np.array([[1.0, 0.0]]),
        np.array([0]),
        DT,
        ARENA,
    )
    swarm.authoritative(0, 6, (*pos[0].tolist(), *vel[0].tolist()))
    swarm.reconcile()
    assert swarm.error_samples().tolist() == [0.0]


def test_an_ack_before_the_first_input_is_not_scored() -> None:
    swarm = predictor(count=1)
    run(swarm, *inputs(17, 1, 3))
    swarm.authoritative(0, -1, (-10.0, 0.0, 0.0, 0.0, 0.0, 0.0))
    swarm.reconcile()
    assert len(swarm.error_samples()) == 0
    assert swarm.acked.tolist() == [-1]


def test_the_ring_wraps_around_beyond_history_inputs() -> None:
    history, n = 8, 21
    move, buttons = inputs(19, 1, n)
    swarm = predictor(count=1, history=history)
    run(swarm, move, buttons)
    predicted = swarm.pos.copy()
    states = server_states(START[0], move[:, 0], buttons[:, 0], list(range(n)))
    ack = n - history + 1  # seq 14: its slot (14 % 8) still holds it
    swarm.authoritative(0, ack, you(states[ack]))
    swarm.reconcile()
    assert swarm.error_samples().tolist() == [0.0]
    assert swarm.pos.tolist() == predicted.tolist()  # replayed 15..20 from the right slots
    # Keep going after the wrap: prediction and server still agree bit for bit.
    more_move, more_buttons = inputs(23, 1, 10)
    run_from = swarm.next_seq[0]
    for i in range(10):
        assert swarm.apply(np.array([0]), more_move[i], more_buttons[i]).tolist() == [run_from + i]
    all_move = np.concatenate((move, more_move))
    all_buttons = np.concatenate((buttons, more_buttons))
    states = server_states(START[0], all_move[:, 0], all_buttons[:, 0], list(range(n + 10)))
    swarm.authoritative(0, n + 8, you(states[n + 8]))
    swarm.reconcile()
    assert swarm.error_samples().tolist() == [0.0, 0.0]


def test_an_ack_whose_prediction_was_overwritten_is_not_scored() -> None:
    history, n = 8, 21
    move, buttons = inputs(29, 1, n)
    swarm = predictor(count=1, history=history)
    run(swarm, move, buttons)
    states = server_states(START[0], move[:, 0], buttons[:, 0], list(range(n)))
    ack = n - history - 1  # seq 12: its slot now holds seq 20
    swarm.authoritative(0, ack, you(states[ack]))
    swarm.reconcile()
    assert len(swarm.error_samples()) == 0


def test_a_dead_bot_is_not_moved_by_its_inputs_and_not_replayed() -> None:
    """The server does not move the dead, so the bot's prediction holds it where it lies."""
    swarm = predictor()
    swarm.unscored[1] = True
    move = np.array([[1.0, 0.0]] * 3)
    swarm.apply(np.arange(3), move, np.zeros(3, dtype=np.int64))
    assert swarm.pos[1].tolist() == START[1].tolist()
    assert swarm.pos[0].tolist() != START[0].tolist()  # the living walk
    lying = (*START[1].tolist(), 0.0, 0.0, 0.0)
    swarm.authoritative(1, 0, lying)
    swarm.reconcile()
    assert swarm.pos[1].tolist() == START[1].tolist() and swarm.acked[1] == 0


def test_a_bot_placed_in_a_new_seat_replays_none_of_the_old_seat_s_inputs() -> None:
    swarm = predictor(count=1)
    move, buttons = inputs(seed=5, count=1, n=40)
    run(swarm, move[:30], buttons[:30])  # the old seat: inputs 0-29, never acknowledged
    spawn = np.array([3.0, 4.0, 0.0])
    swarm.place(0, spawn, np.zeros(3))  # the new seat's first snapshot (ack -1)
    swarm.authoritative(0, -1, you((spawn, np.zeros(3))))
    swarm.reconcile()
    assert swarm.pos[0].tolist() == spawn.tolist()  # nothing replayed on top of the spawn

    for i in range(30, 40):
        swarm.apply(np.array([0]), move[i], buttons[i])
    state = server_states(spawn, move[:, 0], buttons[:, 0], list(range(30, 35)))[-1]
    swarm.authoritative(0, 34, you(state))
    swarm.reconcile()
    assert swarm.error_samples()[-1] == 0.0  # the new seat's inputs, predicted exactly
    expected = server_states(spawn, move[:, 0], buttons[:, 0], list(range(30, 40)))[-1]
    np.testing.assert_array_equal(swarm.pos[0], expected[0])
