"""The replay viewer: a recording replayed once and kept for the page (frames, shots with
both worlds), its endpoints, and ``arena-replay DIR --serve``'s bad input."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from aiohttp.test_utils import TestClient, TestServer

from server.record import cli
from server.record import viewer as viewer_module
from server.record.entries import config_from_entry
from server.record.serve import create_app
from server.record.timeline import Recording, read_recording
from server.record.viewer import ReplayViewer, ViewerError, cause_of, is_notable, read_sightings
from server.sim.hitreg.backend import make_validator
from server.sim.matchset import MatchSet
from tests.server.record.scenes import Sent, log_file, recorded_match

Recorded = tuple[MatchSet, list[bytes]]


def _recording(recorded: Recorded) -> Recording:
    return read_recording([("log", log_file(recorded[1]))])


def _viewer(recording: Recording, **options: Any) -> ReplayViewer:
    assert recording.config is not None
    config = config_from_entry(recording.config)
    validator = make_validator(
        "reference", box_min=config.arena.box_min, box_max=config.arena.box_max
    )
    return ReplayViewer(recording, config, validator, **options)


@pytest.fixture(scope="module")
def viewer(recorded: Recorded) -> ReplayViewer:
    return _viewer(_recording(recorded))


def test_every_tick_is_kept_and_the_last_frame_is_the_match_s_end(
    recorded: Recorded, viewer: ReplayViewer
) -> None:
    matches, _ = recorded
    assert viewer.outcome.exact and viewer.first_tick == 1
    assert viewer.last_tick == matches.tick_number == len(viewer.ticks)
    frame = viewer.frame(viewer.last_tick)
    world = matches[0].world
    slots = np.flatnonzero(world.active)
    assert [p["id"] for p in frame["players"]] == slots.tolist()
    np.testing.assert_allclose([p["pos"] for p in frame["players"]], world.pos[slots], atol=0.006)
    names = {slot: seat.name for slot, seat in matches[0].seats.items()}
    assert {p["id"]: p["name"] for p in frame["players"]} == names
    # The late joiner is in no frame before it joined.
    late = next(slot for slot, name in names.items() if name == "late")
    assert late not in [p["id"] for p in viewer.frame(2)["players"]]


def test_a_long_match_lists_the_shots_a_rule_decided_first_up_to_the_cap(
    viewer: ReplayViewer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The page's list is capped (a long match judges far more shots than it can show);
    every shot is still in its tick's frame and found by its key."""
    assert len(viewer.hello()["shots"]) == len(viewer.shots) == viewer.hello()["replay"]["shots"]
    notable = [shot["id"] for shot in viewer.shots if is_notable(shot)]
    cap = len(notable) + 3
    assert notable and cap < len(viewer.shots)
    monkeypatch.setattr(viewer_module, "LISTED_SHOTS_MAX", cap)
    hello = viewer.hello()
    listed = [line["id"] for line in hello["shots"]]
    assert hello["replay"]["shots"] == len(viewer.shots) and len(listed) == cap
    assert set(notable) <= set(listed) and listed == sorted(listed)
    ordinary = sorted(set(listed) - set(notable))
    assert ordinary == [s["id"] for s in viewer.shots if not is_notable(s)][:3]  # the first ones
    left_out = next(shot for shot in viewer.shots if shot["id"] not in listed)
    assert left_out in viewer.frame(left_out["tick"])["shots"]
    monkeypatch.setattr(viewer_module, "LISTED_SHOTS_MAX", len(notable) - 1)
    assert len(viewer.hello()["shots"]) == len(notable) - 1
    assert all(is_notable(viewer.shots[line["id"]]) for line in viewer.hello()["shots"])


def test_the_shots_are_the_logged_ones_each_in_its_tick_s_frame(
    recorded: Recorded, viewer: ReplayViewer
) -> None:
    logged = [
        (t.tick, s["shooter"], s["seq"], s["result"], s["victim"])
        for t in sorted(_recording(recorded).computed[0].values(), key=lambda t: t.tick)
        for s in t.shots
    ]
    kept = [(s["tick"], s["shooter"], s["seq"], s["result"], s["victim"]) for s in viewer.shots]
    assert len(kept) > 20 and sorted(kept) == sorted(logged)
    shot = viewer.shots[len(viewer.shots) // 2]
    assert shot in viewer.frame(shot["tick"])["shots"]
    assert viewer.find_shot(shot["key"], shot["tick"]) == shot
    assert viewer.find_shot("99:99") is None


def _distance_to_axis(origin: np.ndarray, direction: np.ndarray, box: dict[str, Any]) -> float:
    """The least distance from the ray to a hitbox's axis (sampled every millimetre or so)."""
    axis = np.linspace(box["bottom"], box["top"], 500)
    along = np.clip((axis - origin) @ direction, 0.0, None)
    return float(np.min(np.linalg.norm(axis - origin - along[:, None] * direction, axis=1)))


def test_a_hit_s_ray_passes_through_its_victim_s_rewound_hitbox(viewer: ReplayViewer) -> None:
    hits = [s for s in viewer.shots if s["result"] == "hit"]
    assert hits, "the scene's players hit one another"
    for shot in hits:
        assert shot["target"] == shot["victim"]
        boxes = {box["name"]: box for box in shot["server_hitboxes"]}
        origin, direction = np.array(shot["origin"]), np.array(shot["direction"])
        direction /= np.linalg.norm(direction)
        struck = boxes[shot["hitbox"]]
        # (positions are kept to the millimetre, directions to 1e-4)
        assert _distance_to_axis(origin, direction, struck) <= struck["radius"] + 0.02, shot
        assert struck["bottom"][:2] == shot["server_feet"][:2]


def test_a_claim_taken_shows_the_target_where_it_was_sent(viewer: ReplayViewer) -> None:
    claimed = [s for s in viewer.shots if s["judged"] == "claimed" and s["target"] >= 0]
    # (a view time before the replay's first snapshot shows no box: the ring lacks it)
    shown = [s for s in claimed if s["server_feet"] is not None]
    assert len(shown) > len(claimed) / 2
    for shot in shown:
        assert shot["claim_time"] == shot["view_time"]
        assert shot["sent_feet"] == shot["server_feet"] and shot["offset_cm"] == 0.0
    for shot in viewer.shots:
        assert shot["rewind_ms"] >= 0.0 and shot["cause"] == cause_of(shot)


def test_whether_a_shooter_was_sent_its_target_is_what_the_node_coded() -> None:
    """The node (here the scene, coding every snapshot for every seat) leaves some players
    out of a client's snapshots (fog of war: the scene's players aim at others behind walls
    too); the viewer, coding the replay's snapshots again, says of each shot whether the
    snapshots its shooter drew at its view time held the target, exactly as coded."""
    sent: Sent = {}
    recording = _recording(recorded_match(sent=sent))
    viewer = _viewer(recording)
    rate = viewer.config.tick_rate
    snapshots = sorted(sent)
    seen: dict[str, int] = {}
    for shot in viewer.shots:
        if shot["target"] < 0:
            assert shot["target_sent"] is None
            continue
        at = shot["claim_time"] * rate
        before, after = [t for t in snapshots if t < at], [t for t in snapshots if t > at]
        exact = [t for t in snapshots if abs(t - at) <= 1e-3]
        if not (exact or before):  # a view time before the first snapshot: nothing drawn
            assert shot["target_sent"] is None
            continue
        drawn = exact or [max(before), *after[:1]]
        held = []
        for tick in drawn:
            slots, selected = sent[tick]
            row = slots.tolist().index(shot["shooter"])
            held.append(bool(selected[row, shot["target"]]))
        expected = "yes" if all(held) else "partly" if any(held) else "no"
        assert shot["target_sent"] == expected, shot
        seen[expected] = seen.get(expected, 0) + 1
    assert seen.get("yes", 0) > 0 and seen.get("no", 0) > 0, seen


@pytest.mark.parametrize(
    ("changes", "words"),
    [
        ({"result": "rejected"}, "dead at the view time"),
        ({"traded": True}, "a trade"),
        ({"judged": "capped"}, "rewind cap"),
        ({"judged": "clamped"}, "server's estimate"),
        ({"result": "hit", "damage": 0}, "already dead"),
        ({"result": "hit", "damage": 30}, "claim was taken"),
    ],
)
def test_the_cause_names_the_rule_that_decided(changes: dict[str, Any], words: str) -> None:
    shot = {"result": "miss", "judged": "claimed", "traded": False, "damage": 0, **changes}
    assert words in cause_of(shot)


def test_a_viewer_keeps_at_most_its_ticks_and_starts_where_asked(recorded: Recorded) -> None:
    short = _viewer(_recording(recorded), max_ticks=50)
    assert short.truncated and len(short.ticks) == 50
    window = _viewer(_recording(recorded), start=100, stop=150)
    assert (window.first_tick, window.last_tick) == (92, 150)  # (from the keyframe before)
    assert window.nearest_tick(10).tick == 92 and window.nearest_tick(151).tick == 150


def _sighting_line(shot: dict[str, Any], view_time: float, seen: list[float]) -> str:
    return json.dumps({
        "bot": 9, "event": "sighting", "player": shot["shooter"], "seq": shot["seq"],
        "view_time": view_time, "target": shot["target"], "seen": seen, "t": 1.0,
    })  # fmt: skip


def test_a_bot_s_sighting_is_shown_beside_its_shot(
    recorded: Recorded, viewer: ReplayViewer
) -> None:
    shot = next(s for s in viewer.shots if s["sent_feet"] is not None)
    drawn = [shot["sent_feet"][0] + 0.3, shot["sent_feet"][1] + 0.4, shot["sent_feet"][2]]
    lines = [
        json.dumps({"bot": 9, "epoch": 1, "tick": 5, "hash": "ab", "ack": 2, "t": 1.1}),
        _sighting_line(shot, shot["claim_time"], drawn),
        # the slot's next player, counting its inputs afresh: another claim
        _sighting_line(shot, shot["claim_time"] + 3.0, [0.0, 0.0, 0.0]),
        '{"bot": 9, "event": "sighting", "play',
    ]
    sightings = read_sightings(lines)
    assert [len(found) for found in sightings.values()] == [2]
    seen = _viewer(_recording(recorded), sightings=sightings)
    (with_sighting,) = [s for s in seen.shots if s["sighting"] is not None]
    assert with_sighting["id"] == shot["id"]
    assert with_sighting["sighting"] == {
        "bot": 9, "target": shot["target"], "seen_feet": [round(v, 3) for v in drawn],
        "view_time": shot["claim_time"],
    }  # fmt: skip
    assert with_sighting["seen_vs_sent_cm"] == pytest.approx(50.0, abs=0.2)
    assert seen.hello()["replay"]["sightings"] == 2
    assert viewer.shots[shot["id"]]["sighting"] is None


def test_a_miss_s_target_is_the_one_its_bot_says_it_aimed_at(
    recorded: Recorded, viewer: ReplayViewer
) -> None:
    miss = next(s for s in viewer.shots if s["result"] != "hit" and s["target"] >= 0)
    players = [p["id"] for p in viewer.frame(miss["tick"])["players"]]
    other = next(p for p in players if p not in (miss["target"], miss["shooter"]))
    line = _sighting_line({**miss, "target": other}, miss["claim_time"], [0.0, 0.0, 0.0])
    seen = _viewer(_recording(recorded), sightings=read_sightings([line]))
    assert seen.shots[miss["id"]]["target"] == other
    assert seen.shots[miss["id"]]["sighting"]["target"] == other


def test_a_match_not_in_the_recording_is_a_viewer_error(recorded: Recorded) -> None:
    with pytest.raises(ViewerError, match="no match 3 in the recording"):
        _viewer(_recording(recorded), match=3)


async def test_the_endpoints_answer_from_the_viewer(viewer: ReplayViewer) -> None:
    async with TestClient(TestServer(create_app(viewer))) as client:
        page = await client.get("/view")
        assert page.status == 200 and 'id="replay-bar"' in await page.text()
        hello = await (await client.get("/view/hello")).json()
        assert hello["replay"]["first_tick"] == viewer.first_tick
        assert hello["replay"]["exact"] and len(hello["shots"]) == len(viewer.shots)
        assert {h["name"] for h in hello["hitboxes"]} == {"head", "torso", "legs"}
        shot = viewer.shots[3]
        frame = await (await client.get(f"/view/frame?tick={shot['tick']}")).json()
        assert frame["tick"] == shot["tick"] and shot["id"] in [s["id"] for s in frame["shots"]]
        found = await client.get(f"/view/shots?shot={shot['key']}&tick={shot['tick']}")
        assert (await found.json())["id"] == shot["id"]
        assert (await (await client.get("/view/shots?id=3")).json()) == shot
        assert (await client.get("/view/shots?id=100000")).status == 404
        bad = await client.get("/view/frame?tick=soon")
        assert bad.status == 400 and "not a whole number" in await bad.text()


def test_serve_prints_its_url_and_stops_cleanly_on_ctrl_c(
    tmp_path: Path, recorded: Recorded
) -> None:
    (tmp_path / "a.arenalog").write_bytes(log_file(recorded[1]))
    command = [sys.executable, "-m", "server.record.cli", str(tmp_path), "--serve",
               "--port", "0", "--backend", "reference"]  # fmt: skip
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as served:
        try:
            assert served.stdout is not None
            lines = [served.stdout.readline().decode(), served.stdout.readline().decode()]
            last = recorded[0].tick_number
            assert lines[0].startswith(f"arena-replay: match 0: ticks 1..{last}, ")
            url = lines[1].split("serving the replay at ")[1].strip()
            with urllib.request.urlopen(f"{url}/hello", timeout=10) as answer:
                assert json.load(answer)["replay"]["last_tick"] == last
            served.send_signal(signal.SIGINT)
            assert served.wait(10) == 0
            assert served.stderr is not None and served.stderr.read() == b""
        finally:
            if served.poll() is None:
                served.kill()


def test_serve_with_bad_input_says_so_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], recorded: Recorded
) -> None:
    assert cli.main([str(tmp_path / "nothing"), "--serve"]) == 2
    assert capsys.readouterr().err.strip().count("\n") == 0
    (tmp_path / "a.arenalog").write_bytes(log_file(recorded[1]))
    assert cli.main([str(tmp_path), "--serve", "--match", "4"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "arena-replay: no match 4 in the recording (it holds 0)"
    assert cli.main([str(tmp_path), "--serve", "--sightings", str(tmp_path)]) == 2
    assert "no bot-*.jsonl files" in capsys.readouterr().err
    with pytest.raises(SystemExit) as stopped:
        cli.main([str(tmp_path), "--serve", "--port", "70000"])
    assert stopped.value.code == 2
