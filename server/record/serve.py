"""``arena-replay DIR --serve``: the live view's page on a replayed recording.

The page is the live view's (:mod:`server.view.net.feed`), in replay mode: it asks for the
match once (``/view/hello``), then for the tick it shows (``/view/frame?tick=T``) as it
plays, pauses, steps or jumps to a shot. The replay ran before the server starts
(:class:`~server.record.viewer.ReplayViewer`); every answer is read from what it kept.
"""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web

from server.record.viewer import ReplayViewer
from server.view.net.feed import page

__all__ = ["VIEWER", "create_app"]

VIEWER = web.AppKey("replay_viewer", ReplayViewer)


def _json(body: Any) -> web.Response:
    return web.json_response(body, dumps=lambda v: json.dumps(v, separators=(",", ":")))


def _int(request: web.Request, name: str) -> int:
    raw = request.query.get(name, "")
    try:
        return int(raw)
    except ValueError:
        raise web.HTTPBadRequest(text=f"{name}={raw!r}: not a whole number") from None


async def _hello(request: web.Request) -> web.Response:
    return _json(request.app[VIEWER].hello())


async def _frame(request: web.Request) -> web.Response:
    return _json(request.app[VIEWER].frame(_int(request, "tick")))


async def _shots(request: web.Request) -> web.Response:
    """Every shot in full, or one: ``?id=N`` or ``?shot=SHOOTER:SEQ[&tick=T]``."""
    viewer = request.app[VIEWER]
    if "id" in request.query:
        found = viewer.shot(_int(request, "id"))
    elif "shot" in request.query:
        tick = _int(request, "tick") if "tick" in request.query else None
        found = viewer.find_shot(request.query["shot"], tick)
    else:
        return _json(viewer.shots)
    if found is None:
        raise web.HTTPNotFound(text="no such shot in this replay")
    return _json(found)


def create_app(viewer: ReplayViewer) -> web.Application:
    """The replay viewer's app: ``/view`` and what its page asks for."""
    app = web.Application()
    app[VIEWER] = viewer
    app.router.add_get("/view", page)
    app.router.add_get("/view/hello", _hello)
    app.router.add_get("/view/frame", _frame)
    app.router.add_get("/view/shots", _shots)
    return app
