"""``GET /view`` (the page) and ``GET /view/feed`` (its WebSocket): the node's live view.

The feed is read-only and never costs the tick: one task builds a frame ``feed_rate``
times a second between ticks, encodes it once, and hands it to every viewer's sender,
which keeps only the newest (a slow viewer misses frames, counted in the frame it gets
next; its socket's send buffer is kept small so that "slow" shows within a few frames). A
viewer that stops answering WebSocket pings is closed after 10-20 s. The matches trace
their shots only while someone watches (:class:`~server.view.tap.ViewTap`). At most
:data:`MAX_VIEWERS` watch a node at once.

The view shows every player's position: it is for operators (a player who could open it
would see through walls). Serve it where only they reach it, or turn it off with
``--view-rate 0``.
"""

from __future__ import annotations

import asyncio
import collections
import json
import socket
from collections.abc import AsyncIterator
from importlib import resources
from typing import Any

from aiohttp import WSMsgType, web

from server.net.state import NodeState
from server.view import frames
from server.view.frames import NodeView

__all__ = ["MAX_VIEWERS", "ViewFeed", "add_view_routes", "page"]

#: Viewers of one node at once (each costs a send per frame).
MAX_VIEWERS = 8
#: Shots a viewer that connects is shown at once (the most recent).
_RECENT_SHOTS = 40
_PAGE = resources.files("server.view").joinpath("static/view.html")
#: A viewer socket's kernel send buffer: a few frames. Left to autotune it grows to
#: megabytes, and a slow viewer would be shown frames seconds old instead of missing some.
_SEND_BUFFER_BYTES = 64 * 1024


class _Viewer:
    """One viewer's mailbox: the newest frame, and how many it missed."""

    def __init__(self) -> None:
        self.latest: str | None = None
        self.missed = 0
        self.ready = asyncio.Event()

    def offer(self, body: str) -> bool:
        """The newest frame; False when it replaced one this viewer had not taken."""
        replaced = self.latest is not None
        if replaced:
            self.missed += 1
        self.latest = f'{body},"missed":{self.missed}}}'
        self.ready.set()
        return not replaced

    def take(self) -> str:
        text, self.latest = self.latest, None
        self.ready.clear()
        assert text is not None
        return text


class ViewFeed:
    """The frames of one node for its viewers."""

    def __init__(self, node: NodeState, rate: float) -> None:
        self.node = node
        self.rate = rate
        self.viewers: set[_Viewer] = set()
        self.recent: collections.deque[dict[str, Any]] = collections.deque(maxlen=_RECENT_SHOTS)
        self._recorded = node.stats.recorded

    def _node_view(self) -> NodeView:
        node, config = self.node, self.node.config
        return NodeView(
            config.region,
            config.node_id,
            node.role.value,
            node.matches.epoch,
            node.matches.tick_number,
            node.matches.server_time,
            config.lag_compensation.max_rewind * 1000.0,
        )

    def hello(self) -> dict[str, Any]:
        config = self.node.config
        message = frames.hello(config.arena, config.tick_rate, self.rate, self._node_view())
        message["recent_shots"] = list(self.recent)
        return message

    def _tick_ms(self) -> list[float]:
        """The durations of the ticks run since the last frame (a window's worth at most)."""
        stats = self.node.stats
        fresh = min(stats.recorded - self._recorded, stats.window)
        self._recorded = stats.recorded
        indices = [(stats.recorded - fresh + i) % stats.window for i in range(fresh)]
        return (stats.durations[indices] * 1000.0).tolist()

    def frame_body(self) -> str:
        """This moment's frame as JSON, less its closing brace (each viewer adds its count
        of missed frames)."""
        node = self.node
        shots = node.view.collect()
        message = frames.frame(
            self._node_view(),
            [match.world for match in node.matches.matches],
            [{slot: seat.name for slot, seat in m.seats.items()} for m in node.matches.matches],
            shots,
            self._tick_ms(),
            node.stats.period * 1000.0,
        )
        self.recent.extend(message["shots"])
        return json.dumps(message, separators=(",", ":"))[:-1]

    async def run(self) -> None:
        """Build and hand out frames for as long as the app runs."""
        while True:
            await asyncio.sleep(1.0 / self.rate)
            if self.viewers:
                body = self.frame_body()
                missed = sum(not viewer.offer(body) for viewer in self.viewers)
                if missed:
                    self.node.metrics.view_frames_missed.inc(missed)

    async def serve(self, ws: web.WebSocketResponse) -> None:
        """One viewer, until it goes: the hello, then the newest frame whenever one is
        ready (a sender task; this one reads, and ignores, what the viewer sends, so that
        its close is seen)."""
        viewer = _Viewer()
        self.viewers.add(viewer)
        self.node.metrics.viewers.set(len(self.viewers))
        if not self.node.view.watching:
            self.node.view.watch(True)
            self._recorded = self.node.stats.recorded
        sender = asyncio.create_task(self._send(ws, viewer), name="view-sender")
        try:
            async for message in ws:
                if message.type is WSMsgType.ERROR:
                    break
        finally:
            sender.cancel()
            await asyncio.gather(sender, return_exceptions=True)
            self.viewers.discard(viewer)
            self.node.metrics.viewers.set(len(self.viewers))
            if not self.viewers:
                self.node.view.watch(False)
                self.recent.clear()

    async def _send(self, ws: web.WebSocketResponse, viewer: _Viewer) -> None:
        await ws.send_str(json.dumps(self.hello(), separators=(",", ":")))
        while not ws.closed:
            await viewer.ready.wait()
            await ws.send_str(viewer.take())
            self.node.metrics.view_frames_sent.inc()


FEED = web.AppKey("view_feed", ViewFeed)


async def page(request: web.Request) -> web.Response:
    """The view's page (the live view and the replay viewer serve the same one)."""
    return web.Response(body=_PAGE.read_bytes(), content_type="text/html", charset="utf-8")


async def _feed(request: web.Request) -> web.StreamResponse:
    feed = request.app[FEED]
    if len(feed.viewers) >= MAX_VIEWERS:
        return web.json_response(
            {"error": f"this node already has {MAX_VIEWERS} viewers"}, status=503
        )
    ws = web.WebSocketResponse(compress=False, max_msg_size=4096, heartbeat=10.0)
    await ws.prepare(request)
    sock = request.transport.get_extra_info("socket") if request.transport else None
    if sock is not None:  # (a kernel buffer of its own would hide a slow viewer for seconds)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, _SEND_BUFFER_BYTES)
    await feed.serve(ws)
    return ws


def add_view_routes(app: web.Application, node: NodeState, rate: float) -> None:
    """Serve the view of ``node`` on ``app`` (its frames built ``rate`` times a second)."""
    feed = ViewFeed(node, rate)
    app[FEED] = feed

    async def frames_task(app: web.Application) -> AsyncIterator[None]:
        task = asyncio.create_task(feed.run(), name="view-feed")
        yield
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    app.router.add_get("/view", page)
    app.router.add_get("/view/feed", _feed)
    app.cleanup_ctx.append(frames_task)
