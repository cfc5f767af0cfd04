"""The etcd client's failover and token handling against stand-in members (aiohttp servers
on 127.0.0.1 that answer as etcd's gateway does, or fail as a member can)."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from aiohttp import web

from server.coordination import CoordinatorUnavailable
from server.coordination.etcd_config import EtcdAccess, EtcdCluster
from server.coordination.etcd_gateway import EtcdRequestError
from server.coordination.net.etcd_client import EtcdClient

Behaviour = Callable[[web.Request], Any]


@contextlib.asynccontextmanager
async def member(behaviour: Behaviour, seen: list[str]) -> AsyncIterator[str]:
    """A stand-in etcd member on a free port: every POST is recorded, then ``behaviour``."""

    async def handle(request: web.Request) -> web.StreamResponse:
        seen.append(f"{request.path} {request.headers.get('Authorization', '-')}")
        answer = behaviour(request)
        if asyncio.iscoroutine(answer):
            answer = await answer
        assert isinstance(answer, web.StreamResponse)
        return answer

    app = web.Application()
    app.router.add_post("/{tail:.*}", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


def ok(_: web.Request) -> web.Response:
    return web.json_response({"header": {"revision": "7"}})


def failing(status: int, code: int = 14) -> Behaviour:
    def answer(_: web.Request) -> web.Response:
        return web.json_response(
            {"error": "x", "message": "etcd trouble", "code": code}, status=status
        )

    return answer


async def slow(_: web.Request) -> web.Response:
    await asyncio.sleep(2.0)
    return web.json_response({})


@pytest.mark.parametrize(
    "first",
    [failing(503), failing(500, code=2), slow],
    ids=["unavailable", "internal error", "no answer in time"],
)
async def test_a_request_a_member_cannot_serve_goes_to_the_next(first: Behaviour) -> None:
    seen_a: list[str] = []
    seen_b: list[str] = []
    async with member(first, seen_a) as a, member(ok, seen_b) as b:
        client = EtcdClient(EtcdCluster((a, b)), request_timeout=0.3)
        await client.start()
        try:
            assert await client.post("kv/range", {}) == {"header": {"revision": "7"}}
            assert client.endpoint == b and client.switches == 1
            await client.post("kv/range", {})  # and stays with the member that answered
            assert len(seen_a) == 1 and len(seen_b) == 2
        finally:
            await client.close()


async def test_a_refusal_is_an_answer_and_no_member_is_tried_twice() -> None:
    seen_a: list[str] = []
    seen_b: list[str] = []
    async with member(failing(400, code=3), seen_a) as a, member(failing(503), seen_b) as b:
        client = EtcdClient(EtcdCluster((a, b)), request_timeout=0.3)
        await client.start()
        try:
            with pytest.raises(EtcdRequestError):  # etcd said no: asking elsewhere won't help
                await client.post("kv/txn", {})
            assert (len(seen_a), len(seen_b)) == (1, 0)
            client._current = 1  # b first: b fails, a refuses
            with pytest.raises(EtcdRequestError):
                await client.post("kv/txn", {})
        finally:
            await client.close()


async def test_when_no_member_answers_the_error_says_so_in_one_line() -> None:
    seen: list[str] = []
    async with member(failing(503), seen) as a, member(failing(504, code=4), seen) as b:
        client = EtcdClient(EtcdCluster((a, b)), request_timeout=0.3)
        await client.start()
        try:
            with pytest.raises(CoordinatorUnavailable, match="no etcd member answered") as info:
                await client.post("kv/range", {})
            assert "\n" not in str(info.value)
            assert len(seen) == 2  # each member once
        finally:
            await client.close()


async def test_a_token_etcd_forgot_is_replaced_once() -> None:
    seen: list[str] = []
    tokens = iter(["token-1", "token-2"])

    def etcd(request: web.Request) -> web.Response:
        if request.path == "/v3/auth/authenticate":
            return web.json_response({"token": next(tokens)})
        if request.headers.get("Authorization") == "token-2":
            return web.json_response({"kvs": []})
        return web.json_response(
            {"error": "etcdserver: invalid auth token", "message": "etcdserver: invalid auth token",
             "code": 16},
            status=401,
        )  # fmt: skip

    async with member(etcd, seen) as a:
        access = EtcdAccess(user="arena", password="pw")
        client = EtcdClient(EtcdCluster((a,), access), request_timeout=0.5)
        await client.start()
        try:
            assert await client.post("kv/range", {}) == {"kvs": []}
        finally:
            await client.close()
    assert seen == [
        "/v3/auth/authenticate -",
        "/v3/kv/range token-1",
        "/v3/auth/authenticate -",
        "/v3/kv/range token-2",
    ]


async def test_the_authenticate_request_carries_the_user_and_password() -> None:
    bodies: list[dict[str, Any]] = []

    async def etcd(request: web.Request) -> web.Response:
        if request.path == "/v3/auth/authenticate":
            bodies.append(json.loads(await request.read()))
            return web.json_response({"token": "t"})
        return web.json_response({})

    async with member(etcd, []) as a:
        client = EtcdClient(
            EtcdCluster((a,), EtcdAccess(user="u", password="p")), request_timeout=0.5
        )
        await client.start()
        try:
            await client.post("kv/range", {})
            await client.post("kv/range", {})  # the token is kept
        finally:
            await client.close()
    assert bodies == [{"name": "u", "password": "p"}]


async def test_requests_side_by_side_move_on_once() -> None:
    seen_a: list[str] = []
    seen_b: list[str] = []
    seen_c: list[str] = []
    async with (
        member(failing(503), seen_a) as a,
        member(ok, seen_b) as b,
        member(ok, seen_c) as c,
    ):
        client = EtcdClient(EtcdCluster((a, b, c)), request_timeout=0.5)
        await client.start()
        try:
            answers = await asyncio.gather(*(client.post("kv/range", {}) for _ in range(4)))
            assert all(answer == {"header": {"revision": "7"}} for answer in answers)
            # Four requests failed on a together; the client moved on one member, not four.
            assert client.endpoint == b and client.switches == 1
            assert (len(seen_a), len(seen_b), len(seen_c)) == (4, 4, 0)
        finally:
            await client.close()
