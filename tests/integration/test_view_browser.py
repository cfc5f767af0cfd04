"""The live view in a real headless Chromium: a node, 10 bots, the page at /view.

Debian's ``chromium`` and ``chromium-driver`` (apt, installed by ``.ci/run``) driven by
Selenium: the test skips without them, except in CI (``CI=true``), where it fails. It waits
for the page to report (in ``<body data-*>``) the players it drew and the shots it listed,
selects a shot and checks both of its target's hitboxes are drawn, and keeps a screenshot in
``$ARENA_TEST_ARTIFACTS`` (default ``build/test-artifacts``) under ``view.png``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from launch.nodes import NodeProcess, start_node
from tests.integration.test_failover import region, until_live_standby
from tests.tools import required_tool

BOTS = 10
PAGE_WAIT_S = 60.0


def _browser() -> tuple[str, str]:
    return required_tool("chromium", "chromium"), required_tool("chromedriver", "chromium-driver")


def _artifacts() -> Path:
    folder = Path(os.environ.get("ARENA_TEST_ARTIFACTS", "build/test-artifacts"))
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@contextlib.contextmanager
def _bots(node: NodeProcess, seconds: int) -> Iterator[subprocess.Popen[bytes]]:
    bots = subprocess.Popen(
        [sys.executable, "-m", "client_sim.cli", "--server", node.url,
         "--server-admin", node.admin_url, "--count", str(BOTS),
         "--duration", str(seconds), "--quiet", "--latency", "uniform(30ms,120ms)"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        yield bots
    finally:
        bots.terminate()
        try:
            bots.wait(10)
        except subprocess.TimeoutExpired:
            bots.kill()
            bots.wait()


@contextlib.contextmanager
def _chromium(binary: str, driver: str) -> Iterator[Any]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--window-size=1400,1000", "--no-first-run", "--disable-extensions"):  # fmt: skip
        options.add_argument(flag)
    browser = webdriver.Chrome(service=Service(executable_path=driver), options=options)
    try:
        yield browser
    finally:
        browser.quit()


def _reported(browser: Any, name: str) -> str:
    return str(browser.execute_script(f"return document.body.dataset.{name};"))


def test_the_view_draws_every_bot_and_their_judged_shots_with_both_boxes() -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    binary, driver = _browser()
    with start_node("--log-level", "warning") as node, _bots(node, 90):
        with _chromium(binary, driver) as browser:
            browser.get(f"{node.admin_url}/view")
            wait = WebDriverWait(browser, PAGE_WAIT_S, poll_frequency=0.25)
            wait.until(lambda b: _reported(b, "playersDrawn") == str(BOTS))
            wait.until(lambda b: int(_reported(b, "shotsListed") or 0) >= 5)
            # Followed by default: the newest shot whose shooter reported what it drew.
            wait.until(lambda b: _reported(b, "boxesDrawn") == "2")
            assert _reported(browser, "role") == "primary"
            assert int(_reported(browser, "frames")) > 0
            followed = _reported(browser, "selectedShot")
            detail = browser.find_element(By.ID, "detail-text").text
            assert "rewound" in detail and "view time" in detail, detail
            screenshot = _artifacts() / "view.png"
            assert browser.save_screenshot(str(screenshot))
            # A click picks another shot; the page says which.
            items = browser.find_elements(By.CSS_SELECTOR, "#shots li")
            items[-1].click()
            wait.until(lambda b: _reported(b, "selectedShot") not in ("", followed))
    # The picture is a real one: the map, the players and the panels, not a blank page.
    from matplotlib.image import imread

    pixels = imread(screenshot)
    assert pixels.shape[0] >= 800 and pixels.shape[1] >= 1200
    assert float(np.std(pixels[..., :3])) > 0.05


def test_the_standby_s_view_banners_its_promotion_when_the_primary_is_killed() -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    binary, driver = _browser()
    env = {"ARENA_CLUSTER_SECRET": secrets.token_hex(16)}
    with region(env) as (primary, standby), _bots(primary, 90):
        asyncio.run(until_live_standby(primary))
        with _chromium(binary, driver) as browser:
            browser.get(f"{standby.admin_url}/view")
            wait = WebDriverWait(browser, PAGE_WAIT_S, poll_frequency=0.25)
            wait.until(lambda b: _reported(b, "playersDrawn") == str(BOTS))
            assert _reported(browser, "role") == "standby"
            epoch = int(_reported(browser, "epoch"))
            primary.process.kill()
            wait.until(lambda b: _reported(b, "role") == "primary")
            banner = browser.find_element(By.ID, "banner")
            assert banner.get_attribute("class") == "promoted"
            assert "Promoted" in banner.text and int(_reported(browser, "epoch")) > epoch
            browser.save_screenshot(str(_artifacts() / "view-promoted.png"))
