"""Requests to an etcd cluster's v3 JSON gateway, from any member that answers.

One client serves the node's coordinator and the directory's shared registry. A request
goes to the member that answered last; when that member cannot serve it (connection
refused or reset, no answer in time, a 5xx or "unavailable" from etcd) the same request goes
to the next member, each member at most once per request. etcd answers the same from every
member (reads are linearizable by default, writes go through its leader), so moving is
safe; the few requests that are not idempotent are written to be retried (a campaign finds
its own key; a lease granted twice leaves one to expire).

With a user, the client asks for a token (``/v3/auth/authenticate``) before its first
request and sends it in the ``Authorization`` header; a token etcd no longer knows (expired,
or the member restarted) is replaced and the request sent again, once.
"""

from __future__ import annotations

import asyncio
import os
import ssl
from typing import Any

import aiohttp

from server.coordination.base import CoordinatorError, CoordinatorUnavailable
from server.coordination.etcd_config import EtcdAccess, EtcdCluster
from server.coordination.etcd_gateway import EtcdAuthExpired, read_answer
from server.logs import EventLogger, Throttle

__all__ = ["EtcdClient", "etcd_ssl_context", "gateway_post"]

log = EventLogger("arena.coordination")


def etcd_ssl_context(access: EtcdAccess) -> ssl.SSLContext | None:
    """The TLS context that ``access``'s files describe (None: plain HTTP, or the system's
    CAs for ``etcds://``); :class:`ValueError` with one line when a file is unusable."""
    if not access.tls:
        return None
    for flag, path in (("--etcd-ca", access.ca), ("--etcd-cert", access.cert),
                       ("--etcd-key", access.key)):  # fmt: skip
        if path and not os.path.isfile(path):
            raise ValueError(f"{flag} {path}: no such file")
    context = ssl.create_default_context()
    try:
        if access.ca:
            context.load_verify_locations(cafile=access.ca)
        if access.cert:
            context.load_cert_chain(access.cert, access.key)
    except (OSError, ssl.SSLError) as error:
        reason = getattr(error, "reason", None) or getattr(error, "strerror", None) or error
        raise ValueError(f"etcd TLS: unusable certificate, key or CA ({reason})") from None
    return context


async def gateway_post(
    session: aiohttp.ClientSession,
    endpoint: str,
    path: str,
    payload: dict[str, Any],
    request_timeout: float,
    headers: dict[str, str] | None = None,
) -> dict[str, Any]:
    """POST ``payload`` to one member's gateway at ``endpoint``/v3/``path``, the answer read
    (:func:`read_answer`); :class:`CoordinatorUnavailable` when it does not answer."""
    url = f"{endpoint}/v3/{path}"
    try:
        async with asyncio.timeout(request_timeout):
            async with session.post(url, json=payload, headers=headers) as response:
                status = response.status
                text = await response.text()
    except (TimeoutError, aiohttp.ClientError, OSError) as exc:
        reason = "timed out" if isinstance(exc, TimeoutError) else type(exc).__name__
        raise CoordinatorUnavailable(f"etcd at {endpoint} unreachable: {reason}") from None
    return read_answer(endpoint, path, status, text)


class EtcdClient:
    """The gateway of every member of ``cluster``, one request at a time moving on to the
    next member when one fails. ``request_timeout`` caps one attempt on one member."""

    def __init__(self, cluster: EtcdCluster, *, request_timeout: float) -> None:
        self.cluster = cluster
        self.request_timeout = request_timeout
        self.switches = 0  # times a request moved on to another member
        self._current = 0
        self._session: aiohttp.ClientSession | None = None
        self._token: str | None = None
        self._authenticating: asyncio.Lock | None = None
        # (while etcd is down every request moves on from every member: one line a while)
        self._switch_log = Throttle(10.0)

    @property
    def endpoint(self) -> str:
        """The member the next request goes to first."""
        return self.cluster.endpoints[self._current]

    @property
    def endpoints(self) -> tuple[str, ...]:
        return self.cluster.endpoints

    @property
    def started(self) -> bool:
        return self._session is not None

    async def start(self) -> None:
        """Open the HTTP session (TLS as the cluster's access says)."""
        if self._session is not None:
            raise RuntimeError("etcd client already started")
        context = etcd_ssl_context(self.cluster.access)
        connector = aiohttp.TCPConnector(ssl=context if context is not None else True)
        self._session = aiohttp.ClientSession(
            connector=connector, timeout=aiohttp.ClientTimeout(total=self.request_timeout)
        )
        self._authenticating = asyncio.Lock()

    async def close(self) -> None:
        session, self._session = self._session, None
        self._token = None
        if session is not None:
            await session.close()

    async def post(self, path: str, payload: dict[str, Any]) -> dict[str, Any]:
        """The answer to ``path`` from the first member that can serve it, starting with the
        one that served last; :class:`CoordinatorUnavailable` when none can."""
        if self._session is None:
            raise RuntimeError("etcd client not started: call start() first")
        endpoints = self.cluster.endpoints
        failure: CoordinatorUnavailable | None = None
        for _ in endpoints:
            index = self._current
            endpoint = endpoints[index]
            try:
                return await self._post_with_token(endpoint, path, payload)
            except CoordinatorUnavailable as error:
                failure = error
                if len(endpoints) == 1:
                    break
                if self._current != index:
                    continue  # a request side by side already moved on from this member
                self._current = (index + 1) % len(endpoints)
                self.switches += 1
                held = self._switch_log.allow(endpoint)
                if held is not None:
                    log.warning(
                        "etcd_member_switched",
                        previous=endpoint,
                        member=endpoints[self._current],
                        reason=str(error),
                        held_back=held,
                    )
        assert failure is not None
        if len(endpoints) > 1:
            raise CoordinatorUnavailable(
                f"no etcd member answered ({len(endpoints)} tried; last: {failure})"
            )
        raise failure

    async def _post_with_token(
        self, endpoint: str, path: str, payload: dict[str, Any]
    ) -> dict[str, Any]:
        session = self._session
        assert session is not None
        if not self.cluster.access.user:
            return await gateway_post(session, endpoint, path, payload, self.request_timeout)
        token = self._token or await self._authenticate(endpoint, stale=None)
        try:
            return await gateway_post(
                session, endpoint, path, payload, self.request_timeout, {"Authorization": token}
            )
        except EtcdAuthExpired:
            token = await self._authenticate(endpoint, stale=token)
            return await gateway_post(
                session, endpoint, path, payload, self.request_timeout, {"Authorization": token}
            )

    async def _authenticate(self, endpoint: str, *, stale: str | None) -> str:
        """A fresh token (one request at a time: concurrent requests share it)."""
        lock, session = self._authenticating, self._session
        assert lock is not None and session is not None
        async with lock:
            if self._token is not None and self._token != stale:
                return self._token  # another request authenticated while this one waited
            access = self.cluster.access
            body = await gateway_post(
                session,
                endpoint,
                "auth/authenticate",
                {"name": access.user, "password": access.password},
                self.request_timeout,
            )
            token = body.get("token")
            if not isinstance(token, str) or not token:
                raise CoordinatorError(f"etcd at {endpoint} gave user {access.user!r} no token")
            self._token = token
            log.debug("etcd_authenticated", member=endpoint, user=access.user)
            return token
