"""A node's ``/health``, asked patiently: what the launchers and the chaos tools read."""

from __future__ import annotations

import asyncio
import random
import time
from typing import Any

import aiohttp

__all__ = ["HEALTH_WITHIN_S", "base_url", "node_health"]

#: How long to keep asking a node's /health before saying it does not answer.
HEALTH_WITHIN_S = 30.0


def base_url(url: str) -> str:
    """``ws://h:p/ws`` or ``http://h:p/…`` -> ``http://h:p``."""
    scheme, _, rest = url.partition("://")
    host = rest.split("/", 1)[0]
    return f"{'https' if scheme in ('wss', 'https') else 'http'}://{host}"


async def node_health(url: str, within: float = 10.0) -> dict[str, Any] | None:
    """The node's ``/health`` (also a 503's body: a node that is not ready yet), retried
    with backoff and jitter until ``within`` seconds have passed; None if none came. One
    short try is not enough on a busy machine, where a node can take a second to answer."""
    deadline = time.monotonic() + within
    pause = 0.05
    async with aiohttp.ClientSession() as session:
        while True:
            remaining = deadline - time.monotonic()
            try:
                async with session.get(
                    base_url(url) + "/health",
                    timeout=aiohttp.ClientTimeout(total=max(0.05, min(remaining, 3.0))),
                ) as response:
                    body = await response.json(content_type=None)
                    if isinstance(body, dict):
                        return body
            except (aiohttp.ClientError, TimeoutError, ValueError):
                pass
            if time.monotonic() + pause >= deadline:
                return None
            await asyncio.sleep(pause * random.uniform(0.5, 1.5))
            pause = min(pause * 2, 1.0)
