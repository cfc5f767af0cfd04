"""The primary's end of a standby's hello: who may follow this node, and from where.

A standby connects to ``/replicate``; the primary sends a fresh challenge (a nonce) and
the standby answers with a hello that signs it and every field of the hello with the
cluster secret (``server/replication/auth.py``). The primary refuses a hello it cannot
verify against the nonce it issued on this link (counted, and logged once in a while: a
standby retries ten times a second), steps down if the hello names a higher epoch,
refuses while it is not the primary or its configuration differs, and otherwise welcomes
the standby and hands the link to the hub, which streams it every tick.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from aiohttp import WSCloseCode, WSMsgType, web

from server.logs import EventLogger, Throttle
from server.net.state import NodeState
from server.replication import messages, state
from server.replication.auth import new_nonce, verify_hello
from server.replication.net.hub import StandbyLink
from server.replication.roles import Role

__all__ = ["HELLO_TIMEOUT_S", "StandbyDoor"]

log = EventLogger("arena.replication")

HELLO_TIMEOUT_S = 5.0


class StandbyDoor:
    """Where standbys knock (the ``/replicate`` handler of one node)."""

    def __init__(self, node: NodeState, on_new_peer: Callable[[], Awaitable[None]]) -> None:
        self.node = node
        self._on_new_peer = on_new_peer  # tells the players of a new standby
        self._refusals = Throttle()

    async def serve(self, request: web.Request, ws: web.WebSocketResponse) -> None:
        """A standby's link: authenticate it, then stream it every tick."""
        node = self.node
        nonce = new_nonce()  # this link's alone: no hello made for another link verifies
        try:
            await ws.send_bytes(messages.encode(messages.Challenge(nonce)))
        except ConnectionError:
            return  # the standby is gone already
        try:
            async with asyncio.timeout(HELLO_TIMEOUT_S):
                first = await ws.receive()
            hello = messages.decode(first.data) if first.type is WSMsgType.BINARY else None
        except (TimeoutError, messages.MessageError):
            hello = None
        if not isinstance(hello, messages.Hello) or not verify_hello(node.secret, hello, nonce):
            node.metrics.peers_refused.labels("unauthenticated").inc()
            held = self._refusals.allow("unauthenticated")
            if held is not None:
                log.warning(
                    "peer_refused",
                    reason="unauthenticated",
                    repeats=held,
                    hint="a peer does not share this node's cluster secret (ARENA_CLUSTER_SECRET)",
                    **node.log_fields,
                )
            await ws.send_bytes(messages.encode(messages.Refused("unauthenticated")))
            await ws.close(code=WSCloseCode.POLICY_VIOLATION, message=b"unauthenticated")
            return
        if hello.epoch > node.matches.epoch and node.role is Role.PRIMARY:
            node.request_step_down(hello.epoch)
        if node.role is not Role.PRIMARY or node.stepping_down.is_set():
            await ws.send_bytes(messages.encode(messages.NotPrimary(node.matches.epoch)))
            await ws.close()
            return
        if hello.fingerprint != state.config_fingerprint(node.matches):
            await ws.send_bytes(messages.encode(messages.Refused("config_mismatch")))
            await ws.close(code=WSCloseCode.POLICY_VIOLATION, message=b"config_mismatch")
            return
        await ws.send_bytes(messages.encode(messages.StandbyWelcome(node.config.node_id)))
        link = StandbyLink(hello.node, ws, request.transport)
        if hello.url and node.learned_peers.get(link.node) != hello.url:
            node.learned_peers[link.node] = hello.url
            await self._on_new_peer()
        await node.hub.serve(
            link,
            lambda: messages.encode(state.capture_full(node.matches, node.matches.epoch)),
            hello.promise,
        )
