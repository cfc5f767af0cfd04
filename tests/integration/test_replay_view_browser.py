"""The replay viewer in a real headless Chromium: ``arena-replay DIR --serve`` on the golden
failover recording (no node needed), with a bot's record of one shot's sighting, the page
opened at that shot's link.

Like the live view's test (:mod:`tests.integration.test_view_browser`: Debian's chromium and
chromium-driver through Selenium; skips without them, fails in CI), it reads what the page
drew from ``<body data-*>``: the players at the shot's tick, the target's hitboxes in both
worlds (as sent to the shooter, as the server rewound it) and as the bot drew it, the aim
ray, the verdict and its cause; then steps a tick and picks another shot from the list.
The screenshot goes to ``$ARENA_TEST_ARTIFACTS`` (default ``build/test-artifacts``) as
``replay-view.png``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from server.record.entries import config_from_entry
from server.record.timeline import read_recording
from server.record.viewer import ReplayViewer
from server.sim.hitreg.backend import make_validator
from tests.integration.test_view_browser import _artifacts, _browser, _chromium, _reported

GOLDEN = Path(__file__).resolve().parents[1] / "data" / "golden" / "failover"
PAGE_WAIT_S = 10.0


def _chosen_shot() -> dict[str, Any]:
    """A shot whose claim the server did not take, else one with a target (the replay,
    in-process)."""
    files = sorted(GOLDEN.glob("*.arenalog"))
    recording = read_recording([(path.name, path.read_bytes()) for path in files])
    assert recording.config is not None
    config = config_from_entry(recording.config)
    validator = make_validator(
        "reference", box_min=config.arena.box_min, box_max=config.arena.box_max
    )
    shots = ReplayViewer(recording, config, validator).shots
    aimed = [s for s in shots if s["sent_feet"] is not None]
    return next((s for s in aimed if s["judged"] != "claimed"), aimed[0])


@pytest.fixture
def chosen(tmp_path: Path) -> tuple[dict[str, Any], Path]:
    """The shot the page opens, and a bots' record folder with its shooter's sighting."""
    shot = _chosen_shot()
    drawn = [shot["sent_feet"][0] + 0.2, shot["sent_feet"][1], shot["sent_feet"][2]]
    sighting = {
        "bot": 1, "event": "sighting", "player": shot["shooter"], "seq": shot["seq"],
        "view_time": shot["claim_time"], "target": shot["target"], "seen": drawn, "t": 1.0,
    }  # fmt: skip
    (tmp_path / "bot-0001.jsonl").write_text(json.dumps(sighting) + "\n", encoding="utf-8")
    return shot, tmp_path


@pytest.fixture
def served(chosen: tuple[dict[str, Any], Path]) -> Iterator[str]:
    """The replay served on a port the system picks; its base URL."""
    with subprocess.Popen(
        [
            sys.executable,
            "-m",
            "server.record.cli",
            str(GOLDEN),
            "--serve",
            "--port",
            "0",
            "--sightings",
            str(chosen[1]),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    ) as process:
        try:
            assert process.stdout is not None
            for line in process.stdout:  # (the replay runs before the server starts)
                if "serving the replay at " in line:
                    yield line.split("serving the replay at ")[1].strip().removesuffix("/view")
                    break
            else:
                pytest.fail(f"arena-replay --serve exited {process.wait()} without serving")
        finally:
            process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.load(response)


def test_the_replay_view_opens_a_shot_s_link_and_draws_both_worlds(
    served: str, chosen: tuple[dict[str, Any], Path]
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    binary, driver = _browser()
    lines = _get(f"{served}/view/hello")["shots"]
    shot = _get(f"{served}/view/shots?id={chosen[0]['id']}")
    assert shot["sent_feet"] and shot["server_feet"] and shot["sighting"], shot
    with _chromium(binary, driver) as browser:
        browser.get(f"{served}/view#tick={shot['tick']}&shot={shot['key']}")
        wait = WebDriverWait(browser, PAGE_WAIT_S, poll_frequency=0.1)
        wait.until(lambda b: _reported(b, "selectedShot") == shot["key"])
        wait.until(lambda b: _reported(b, "tick") == str(shot["tick"]))
        assert _reported(browser, "mode") == "replay"
        assert _reported(browser, "shotsListed") == str(len(lines))
        frame = _get(f"{served}/view/frame?tick={shot['tick']}")
        assert _reported(browser, "playersDrawn") == str(len(frame["players"])) != "0"
        # Both worlds: the target's hitboxes as sent and as rewound, in the detail and on
        # the map, the aim ray, the verdict and its cause.
        assert _reported(browser, "boxesDrawn") == "2"
        assert _reported(browser, "ghostsDrawn") == "3"
        assert _reported(browser, "sightingDrawn") == "1"
        assert _reported(browser, "rayDrawn") == "1"
        assert _reported(browser, "verdict") == shot["result"]
        assert _reported(browser, "cause") == shot["cause"]
        # The bot drew its target: the snapshots the replay says it was sent held it.
        assert _reported(browser, "targetSent") == shot["target_sent"] in ("yes", "partly")
        detail = browser.find_element(By.ID, "detail-text").text
        assert "as sent to the shooter" in detail and "where the server rewound it" in detail
        assert f"the bot (1) drew target {shot['target']}" in detail
        assert f"rewound {shot['rewind_ms']} ms" in detail and shot["cause"] in detail
        screenshot = _artifacts() / "replay-view.png"
        assert browser.save_screenshot(str(screenshot))
        # A step on shows the next tick, the shot still selected.
        browser.find_element(By.ID, "forward").click()
        wait.until(lambda b: int(_reported(b, "tick")) > shot["tick"])
        assert _reported(browser, "selectedShot") == shot["key"]
        # Another shot from the list: the page goes to its tick.
        other = next(s for s in lines if s["id"] != shot["id"])
        browser.find_element(By.CSS_SELECTOR, f'#shots li[data-shot="{other["id"]}"]').click()
        wait.until(lambda b: _reported(b, "selectedShot") == other["key"])
        wait.until(lambda b: _reported(b, "tick") == str(other["tick"]))
    from matplotlib.image import imread

    pixels = imread(screenshot)
    assert pixels.shape[0] >= 800 and float(np.std(pixels[..., :3])) > 0.05
