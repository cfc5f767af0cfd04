"""An operator's pause of the match log: nothing logged meanwhile, the files still replay,
and a replay says the gap was meant instead of calling it lost."""

from __future__ import annotations

from pathlib import Path

import aiohttp

from server.net.recording import SUFFIX, Recorder
from server.record.blocks import seal_block
from server.record.capture import MatchLog, block_of
from server.record.compare import compare_recordings
from server.record.entries import config_from_entry
from server.record.replay import replay_match
from server.record.timeline import read_recording
from server.replication.state import apply, capture_full, capture_tick
from server.sim.hitreg.backend import make_validator
from server.sim.lagcomp import LinkEstimate
from server.sim.matchset import MatchSet
from tests.server.record.scenes import log_file, recorded_match, seal_entries
from tests.server.replication.test_replication_link import bind, cluster


def test_a_paused_recording_logs_nothing_and_replays_across_its_gap(tmp_path: Path) -> None:
    matches, _ = recorded_match(ticks=30)
    match = matches[0]
    recorder = Recorder(
        str(tmp_path), matches, backend="reference", region="r", node="n",
        max_bytes=10**9, ticks_per_block=10,
    )  # fmt: skip

    def play(ticks: int) -> None:
        for _ in range(ticks):
            recorder.before_tick()
            recorder.after_tick(matches.tick(matches.tick_number + 1))

    play(45)
    paused_after = matches.tick_number
    assert recorder.pause() and not recorder.pause()
    play(20)
    # Seats and estimates change while nothing is logged: the keyframe must carry them.
    joined = match.join("while-paused", 0.08).slot
    match.leave(min(match.seats))
    match.probes.assume(joined, LinkEstimate(0.07, 0.004))
    play(20)
    assert recorder.resume() and not recorder.resume()
    match.join("right-after", 0.05)  # before the first tick logged again
    resumed_at = matches.tick_number + 1
    play(60)
    recorder.close()

    files = sorted(tmp_path.glob(f"*{SUFFIX}"))
    assert len(files) == 2, "a pause ends its file; the resumed log starts a new one"
    for path in files:
        alone = read_recording([(path.name, path.read_bytes())])
        assert alone.config is not None and not alone.damaged, path.name
    together = read_recording([(path.name, path.read_bytes()) for path in files])
    logged = sorted(t for (_, t) in together.computed[0])
    assert not [t for t in logged if paused_after < t < resumed_at], "logged while paused"
    assert together.paused[0] == {(match.epoch, paused_after)}
    assert together.config is not None
    config = config_from_entry(together.config)
    outcome = replay_match(together, config, make_validator("reference"), 0, start=31)
    assert outcome.exact and not outcome.problems, (outcome.mismatches, outcome.problems)
    (note,) = outcome.notes
    assert f"ticks {paused_after + 1}..{resumed_at - 1} were not recorded" in note
    assert "operator paused" in note and f"keyframe of tick {resumed_at}" in note
    assert outcome.last_tick == matches.tick_number
    assert outcome.ticks == (paused_after - 30) + (matches.tick_number - resumed_at)


def test_without_a_pause_entry_the_same_gap_is_a_problem(tmp_path: Path) -> None:
    # The pause entry is what tells a meant gap from lost blocks: drop it, and the replay
    # reports the ticks missing.
    matches, _ = recorded_match(ticks=30)
    recorder = Recorder(
        str(tmp_path), matches, backend="reference", region="r", node="n",
        max_bytes=10**9, ticks_per_block=10,
    )  # fmt: skip
    for tick_count, action in ((30, recorder.pause), (30, recorder.resume), (30, None)):
        for _ in range(tick_count):
            recorder.before_tick()
            recorder.after_tick(matches.tick(matches.tick_number + 1))
        if action is not None:
            action()
    recorder.close()
    together = read_recording([(p.name, p.read_bytes()) for p in tmp_path.glob(f"*{SUFFIX}")])
    together.paused.clear()
    assert together.config is not None
    config = config_from_entry(together.config)
    outcome = replay_match(together, config, make_validator("reference"), 0, start=31)
    assert outcome.exact and not outcome.notes
    (problem,) = outcome.problems
    assert "missing from the computed log" in problem


async def test_the_admin_port_pauses_and_resumes_the_recording(tmp_path: Path) -> None:
    async with cluster() as (nodes, session):
        plain = await nodes.start(bind(), node_id="plain", role="primary")
        async with session.post(plain.admin_url + "/record/pause") as answer:
            assert answer.status == 409 and "--record" in (await answer.json())["error"]
        node = await nodes.start(bind(), node_id="rec", role="primary", record=str(tmp_path))
        assert (await _post(session, node.url + "/record/pause"))[0] == 404, "admin port only"
        assert await _post(session, node.admin_url + "/record/pause") == (
            200, {"paused": True, "changed": True},
        )  # fmt: skip
        assert (await _post(session, node.admin_url + "/record/pause"))[1]["changed"] is False
        async with session.get(node.admin_url + "/metrics") as answer:
            assert "arena_record_paused 1.0" in await answer.text()
        assert await _post(session, node.admin_url + "/record/resume") == (
            200, {"paused": False, "changed": True},
        )  # fmt: skip
        async with session.get(node.admin_url + "/metrics") as answer:
            assert "arena_record_paused 0.0" in await answer.text()


async def _post(session: aiohttp.ClientSession, url: str) -> tuple[int, dict[str, object]]:
    async with session.post(url) as answer:
        if answer.status == 404:
            return 404, {}
        return answer.status, await answer.json()


def test_a_standby_paused_and_resumed_agrees_with_its_primary_tick_for_tick() -> None:
    """A standby's log names the seat changes of each tick it received: after a pause, the
    seats that changed meanwhile are in its keyframe, not in its first tick."""
    primary, _ = recorded_match(ticks=30)
    config, validator = primary.config, make_validator("reference")
    standby = MatchSet(config, 1, validator)
    epoch = primary[0].epoch
    full = capture_full(primary, epoch)
    apply(standby, full)
    made = MatchLog(primary, backend="reference", region="r", node="p", started=0.0)
    kept = MatchLog(standby, backend="reference", region="r", node="s", started=0.0)
    kept.followed(full)
    paused = False
    for step in range(150):
        if step == 40:
            kept.pause()
            paused = True
        if step == 60:
            primary[0].join("while-the-standby-paused", 0.1)
        if step == 80:
            kept.resume()
            paused = False
        made.before_tick()
        results = primary.tick(primary.tick_number + 1)
        made.after_tick(results)
        record = capture_tick(
            primary, [r.events for r in results], epoch, [r.state_hash for r in results]
        )
        apply(standby, record)
        if not paused:
            kept.followed(record)
    logs = []
    for log in (made, kept):
        pending = log.take_block()
        assert pending is not None
        blocks = [seal_entries([log.config]), seal_block(block_of(pending))]
        logs.append(read_recording([("log", log_file(blocks))]))
    mismatch, compared = compare_recordings(*logs)
    assert mismatch is None, mismatch
    assert compared == 150 - 40
