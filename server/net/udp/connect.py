"""``POST /connect`` on the player port: a connect token for the UDP endpoint.

The client sends ``{"name": ...}`` (with ``"token"``: a directory's seat reservation or a
session token, as its WebSocket ``join`` would carry; behind a directory one is required
unless ``--open-join``) and gets :meth:`shared.datagram.ConnectToken.to_json` back: the
session keys, and the region's UDP addresses, this node's first, then its standbys', so
that after a failover the same token connects to the promoted standby. The token is
sealed under the region key (:func:`server.region_key.region_key`), which every node of
the region derives from the cluster secret. A token admits nobody by itself: the seat is
given by the ``join`` that follows the handshake, checked as over WebSocket.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from aiohttp import web

from server.net.registration import check_reservation
from server.net.udp.tokens import region_connect_token
from server.tokens import TokenError, verify_token

if TYPE_CHECKING:
    from server.net.node import Node

__all__ = ["MAX_CONNECT_BODY", "connect_handler"]

#: The largest request body read (a name and a token are a few hundred bytes).
MAX_CONNECT_BODY = 4096


def _refusal(status: int, code: str, text: str, **headers: str) -> web.Response:
    return web.json_response({"error": code, "message": text}, status=status, headers=headers)


def _request_fields(body: Any) -> tuple[str, str | None]:
    """(name, token) of a request body; ValueError (one line) if it is off."""
    if not isinstance(body, dict):
        raise ValueError('send a JSON object: {"name": ...}')
    name = body.get("name", "")
    token = body.get("token")
    if not isinstance(name, str) or len(name) > 32:
        raise ValueError("name: a string of at most 32 characters")
    if token is not None and (not isinstance(token, str) or len(token) > 512):
        raise ValueError("token: a string of at most 512 characters")
    return name, token


def connect_handler(node: Node) -> Callable[[web.Request], Awaitable[web.Response]]:
    """The ``POST /connect`` handler of ``node``."""

    async def connect(request: web.Request) -> web.Response:
        udp = node.udp
        if udp is None:
            return _refusal(404, "no_udp", "this node serves no UDP (--udp-port off)")
        if not node.warm:
            return _refusal(503, "not_ready", "warming up; try again", **{"Retry-After": "1"})
        if (wait := node.sessions.handshake_wait(request.remote)) > 0:
            node.metrics.joins_refused.labels("offender_holdoff").inc()
            retry = str(max(1, math.ceil(wait)))
            return _refusal(429, "held_off", "this address's connections ended in offences",
                            **{"Retry-After": retry})  # fmt: skip
        if (request.content_length or 0) > MAX_CONNECT_BODY:
            return _refusal(413, "too_large", f"at most {MAX_CONNECT_BODY} bytes")
        try:
            raw = await request.content.read(MAX_CONNECT_BODY + 1)
            if len(raw) > MAX_CONNECT_BODY:
                raise ValueError(f"at most {MAX_CONNECT_BODY} bytes")
            name, token = _request_fields(json.loads(raw or b"{}"))
        except (ValueError, UnicodeDecodeError) as error:
            return _refusal(400, "bad_request", str(error).splitlines()[0][:200])
        refusal = _admission_refusal(node, name, token)
        if refusal is not None:
            node.metrics.joins_refused.labels(refusal[0]).inc()
            return _refusal(403, refusal[1], refusal[2])
        issued = region_connect_token(node, name.encode(), time.time())
        return web.json_response(issued.to_json())

    return connect


def _admission_refusal(node: Node, name: str, token: str | None) -> tuple[str, str, str] | None:
    """Behind a directory (without ``--open-join``) a token is handed only to a client
    with a seat reservation or a session token, as a ``join`` would be refused without:
    (metric reason, code, text), or None. The ``join`` checks the same again (and records
    the reservation's claim)."""
    config = node.config
    if not config.directory_url or config.open_join:
        return None
    if token is None:
        return (
            "reservation_required",
            "reservation_required",
            "this node seats the players its directory sends: ask the directory for a seat "
            "(POST /seat) and connect with its reservation",
        )
    now = time.time()
    try:
        verify_token(node.secret, token, config.region, now)
        return None
    except TokenError:
        pass
    code = check_reservation(node.secret, token, config.node_id, now, player=name)
    if code is None:
        return None
    return "reservation", "invalid_reservation", f"reservation {code}; ask the directory again"
