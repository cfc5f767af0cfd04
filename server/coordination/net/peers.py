"""Ask a region's peers for their ``/peer`` state, all at once, telling silence from absence.

``/peer`` is on the player port (the one peers reach) and says only what an election
needs: node, role, epoch, replicated tick, eligibility (``server/net/app.py``).

A peer that refuses the connection has nothing listening: no node to count. A peer that
accepts it but does not answer in time may be alive (paused, starved): it is *silent*, and
whoever decides on leadership has to treat it as possibly leading. The static
coordinator's campaign and the node's role loop both ask this way.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import aiohttp

__all__ = ["ask_peers"]


async def ask_peers(
    session: aiohttp.ClientSession, urls: Sequence[str], each_within: float
) -> tuple[list[tuple[str, dict[str, Any]]], list[str]]:
    """``(url, body)`` of every peer whose ``/peer`` answered a JSON object within
    ``each_within`` seconds, in ``urls``' order, and the URLs of the silent ones."""
    answers: list[tuple[str, dict[str, Any]] | None] = [None] * len(urls)
    silent: list[str] = []

    async def ask(i: int, url: str) -> None:
        try:
            async with asyncio.timeout(each_within):
                async with session.get(url.rstrip("/") + "/peer") as response:
                    body = await response.json(content_type=None)
        except aiohttp.ClientConnectorError:
            return  # nothing listens there
        except (TimeoutError, aiohttp.ClientError, ValueError):
            silent.append(url)
            return
        if isinstance(body, dict):
            answers[i] = (url, body)
        else:
            silent.append(url)  # something answers, but not a node we understand

    async with asyncio.TaskGroup() as group:
        for i, url in enumerate(urls):
            group.create_task(ask(i, url))
    return [a for a in answers if a is not None], silent
