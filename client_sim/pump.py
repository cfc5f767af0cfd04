"""One timer for all of a swarm's delayed packets.

Every packet of every bot is held back by its modelled link until a due time. Handing each
one to ``loop.call_at`` puts tens of thousands of timer handles a second into asyncio's
heap, whose entries compare in Python code. This pump keeps its own heap of plain tuples
(compared in C), holding each packet with the callback that takes it, and arms a single
asyncio timer for the earliest one. Equal due times are released in scheduling order, so
a link whose due times never decrease delivers in order.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
import math
from collections.abc import Callable
from typing import Any

__all__ = ["DeliveryPump"]

log = logging.getLogger("arena.bots")


class DeliveryPump:
    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._heap: list[tuple[float, int, Callable[[Any], Any], Any]] = []
        self._order = itertools.count()  # equal due times keep their scheduling order
        self._timer: asyncio.TimerHandle | None = None
        self._armed_for = math.inf
        self._firing = False

    def __len__(self) -> int:
        return len(self._heap)

    def at(self, due: float, callback: Callable[[Any], Any], payload: Any) -> None:
        """Call ``callback(payload)`` once the loop's clock reaches ``due``."""
        heapq.heappush(self._heap, (due, next(self._order), callback, payload))
        if not self._firing and due < self._armed_for:
            self._arm(due)  # (while firing, the end of the pass arms for what is left)

    def _arm(self, due: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._armed_for = due
        self._timer = self._loop.call_at(due, self._fire)

    def _fire(self) -> None:
        fired_for = self._armed_for
        self._timer, self._armed_for = None, math.inf
        heap = self._heap
        # asyncio may run a timer up to its clock resolution early: the armed time counts.
        now = max(self._loop.time(), fired_for)
        self._firing = True
        try:
            while heap and heap[0][0] <= now:
                _, _, callback, payload = heapq.heappop(heap)
                try:
                    callback(payload)
                except Exception:  # one bot's bug must not stop every other bot's packets
                    log.exception("event=delivery_failed")
        finally:
            self._firing = False
        if heap:
            self._arm(heap[0][0])

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer, self._armed_for = None, math.inf
        self._heap.clear()
