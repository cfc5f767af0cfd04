"""A node given several directories (``--directory A,B``) heartbeats to the next one when
the one it uses stops answering (in-process directories on loopback ports)."""

from __future__ import annotations

import asyncio
import contextlib

import aiohttp
import pytest

from server.net.registration import heartbeat_loop
from shared.directory import Heartbeat, directory_urls
from tests.server.net.test_registration import SECRET, directory_at, free_port


def beat() -> Heartbeat:
    return Heartbeat(
        node_id="eu-1",
        region="eu",
        endpoint="ws://127.0.0.1:9/ws",
        probe="http://127.0.0.1:9/health",
        role="primary",
        epoch=1,
        matches=1,
        players=0,
        capacity=4,
    )


async def heard(url: str) -> bool:
    async with aiohttp.ClientSession() as session, session.get(f"{url}/health") as response:
        return bool((await response.json())["nodes_known"])


async def until(check: object, url: str) -> None:
    async with asyncio.timeout(10):
        while not await check(url):  # type: ignore[operator]
            await asyncio.sleep(0.02)


async def test_beats_go_to_the_next_directory_when_the_first_stops_answering() -> None:
    async with directory_at(free_port()) as second:
        async with contextlib.AsyncExitStack() as stack:
            first = await stack.enter_async_context(directory_at(free_port()))
            loop = asyncio.create_task(
                heartbeat_loop(
                    directory_url=f"{first}/,{second}", secret=SECRET, describe=beat, interval=0.05
                )
            )
            try:
                await until(heard, first)
                await asyncio.sleep(0.2)
                assert not await heard(second)  # the first one keeps the beats
                await stack.aclose()  # the first directory stops
                await until(heard, second)  # the next beat went to the second
            finally:
                loop.cancel()
                await asyncio.gather(loop, return_exceptions=True)


def test_directory_urls_are_checked_one_by_one() -> None:
    assert directory_urls("http://a:1/, https://b:2") == ("http://a:1", "https://b:2")
    with pytest.raises(ValueError, match=r"^--directory: 'ftp://c' is not an http\(s\):// URL$"):
        directory_urls("http://a:1,ftp://c")
    with pytest.raises(ValueError, match="is not an http"):
        directory_urls("http://a:1,")
