"""etcd's v3 JSON gateway as data (sans-I/O): its answers read, its errors told apart.

Gateway details (etcd 3.4, ``/v3/``; ``/v3beta/`` is the older alias): keys and values are
base64; int64 fields are JSON strings; fields with default values are omitted (a failed
transaction has no ``succeeded``, a range with no match has no ``kvs``, a keep-alive for an
expired lease has no ``TTL``); ``lease/keepalive`` is a stream that answers
``{"result": ...}`` once per request object; errors come back as a non-200 status with
``{"error", "message", "code"}`` where ``code`` is a gRPC status code. The coordinator that
talks to the gateway is :mod:`server.coordination.net.etcd`; the directory's shared state
(:mod:`server.directory.etcd_state`) builds its transactions with the helpers below.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import Any

from server.coordination.base import CoordinatorError, CoordinatorUnavailable

__all__ = [
    "GRPC_NOT_FOUND",
    "ElectionHolder",
    "EtcdAuthExpired",
    "EtcdRequestError",
    "KeyValue",
    "compare_mod_revision",
    "delete_op",
    "encoded",
    "gateway_int",
    "holder_from_range",
    "holder_from_txn",
    "key_values",
    "put_op",
    "range_op",
    "read_answer",
    "txn_body",
    "txn_ranges",
]

# gRPC status codes etcd's gateway returns in the "code" field of an error body.
GRPC_NOT_FOUND = 5
_GRPC_DEADLINE_EXCEEDED = 4
_GRPC_UNAVAILABLE = 14
_GRPC_UNAUTHENTICATED = 16


class EtcdRequestError(CoordinatorError):
    """etcd answered, with an error (``code`` is the gRPC status code, 0 if unknown)."""

    def __init__(self, message: str, *, code: int, status: int) -> None:
        super().__init__(message)
        self.code = code
        self.status = status


class EtcdAuthExpired(EtcdRequestError):
    """etcd no longer knows the auth token sent (it expired, or the member restarted):
    authenticate again and resend."""


@dataclass(frozen=True, slots=True)
class ElectionHolder:
    """The election key as read from etcd."""

    node: str  # empty when the value is not ours to parse
    url: str
    lease: int  # the lease the key is attached to (0: none)
    create_revision: int


def encoded(text: str) -> str:
    """A key or value as the gateway takes it (base64)."""
    return base64.b64encode(text.encode()).decode("ascii")


def _prefix_end(prefix: str) -> str:
    """The ``range_end`` that makes a range cover every key starting with ``prefix``
    (etcd's ``clientv3.GetPrefixRangeEnd``: the prefix with its last byte below 0xff
    incremented), base64."""
    raw = bytearray(prefix.encode())
    while raw and raw[-1] == 0xFF:
        raw.pop()
    if not raw:
        return base64.b64encode(b"\0").decode("ascii")  # every key
    raw[-1] += 1
    return base64.b64encode(bytes(raw)).decode("ascii")


def gateway_int(value: Any) -> int:
    """An int64 field of the gateway's JSON (a string, or absent when it is 0)."""
    if value is None:
        return 0
    return int(value)


def holder_from_range(kvs: Any) -> ElectionHolder | None:
    """The holder in a range answer's ``kvs`` (None: no key)."""
    if not kvs:
        return None
    kv = kvs[0]
    node = url = ""
    try:
        record = json.loads(base64.b64decode(kv.get("value", "")))
        if isinstance(record, dict):
            node = str(record["node"]) if isinstance(record.get("node"), str) else ""
            url = str(record["url"]) if isinstance(record.get("url"), str) else ""
    except ValueError:
        pass
    return ElectionHolder(
        node=node,
        url=url,
        lease=gateway_int(kv.get("lease")),
        create_revision=gateway_int(kv.get("create_revision")),
    )


def holder_from_txn(body: dict[str, Any]) -> ElectionHolder | None:
    """The holder a transaction's range read found (a lost campaign reads the winner)."""
    for response in body.get("responses") or []:
        ranged = response.get("response_range")
        if isinstance(ranged, dict):
            return holder_from_range(ranged.get("kvs"))
    return None


def read_answer(endpoint: str, path: str, status: int, text: str) -> dict[str, Any]:
    """The gateway's answer to ``path`` as a JSON object, or the error it means:
    :class:`CoordinatorUnavailable` when this member cannot serve (a 5xx, or etcd saying it
    is unavailable: another member may), :class:`EtcdAuthExpired` for a token it no longer
    knows, else :class:`EtcdRequestError`."""
    try:
        # A streaming endpoint (lease/keepalive) answers one JSON object a line.
        body = json.loads(text.strip().splitlines()[0]) if text.strip() else {}
    except ValueError:
        body = None
    if not isinstance(body, dict):
        raise CoordinatorUnavailable(
            f"etcd at {endpoint} answered {path} with something not JSON (HTTP {status})"
        )
    error = body.get("error")
    if status != 200 or error is not None:
        if isinstance(error, dict):  # streaming endpoints nest the error
            body = error
        message = str(body.get("message") or body.get("error") or f"HTTP {status}")
        raw_code = body.get("code")
        code = raw_code if isinstance(raw_code, int) else 0
        if status >= 500 or code in (_GRPC_UNAVAILABLE, _GRPC_DEADLINE_EXCEEDED):
            raise CoordinatorUnavailable(f"etcd at {endpoint} unavailable: {message}")
        if code == _GRPC_UNAUTHENTICATED or "invalid auth token" in message:
            raise EtcdAuthExpired(
                f"etcd at {endpoint} refused the auth token: {message}", code=code, status=status
            )
        raise EtcdRequestError(f"etcd refused {path}: {message}", code=code, status=status)
    return body


# -- key-value transactions (what the directory's shared state is built from) -------------


@dataclass(frozen=True, slots=True)
class KeyValue:
    """One key as a range answer lists it (key and value decoded; revisions as ints)."""

    key: str
    value: bytes
    lease: int
    create_revision: int
    mod_revision: int


def key_values(kvs: Any) -> list[KeyValue]:
    """A range answer's ``kvs`` (absent when nothing matched), decoded."""
    if not kvs:
        return []
    return [
        KeyValue(
            key=base64.b64decode(kv.get("key", "")).decode("utf-8", "replace"),
            value=base64.b64decode(kv.get("value", "")),
            lease=gateway_int(kv.get("lease")),
            create_revision=gateway_int(kv.get("create_revision")),
            mod_revision=gateway_int(kv.get("mod_revision")),
        )
        for kv in kvs
    ]


def put_op(key: str, value: bytes, *, lease: int = 0, prev_kv: bool = False) -> dict[str, Any]:
    """A transaction's put of ``value`` at ``key`` (attached to ``lease`` unless 0)."""
    put: dict[str, Any] = {"key": encoded(key), "value": base64.b64encode(value).decode("ascii")}
    if lease:
        put["lease"] = str(lease)
    if prev_kv:
        put["prev_kv"] = True
    return {"request_put": put}


def range_op(key: str, *, prefix: bool = False) -> dict[str, Any]:
    """A transaction's read of ``key`` (``prefix``: of every key starting with it)."""
    ranged = {"key": encoded(key)}
    if prefix:
        ranged["range_end"] = _prefix_end(key)
    return {"request_range": ranged}


def delete_op(key: str) -> dict[str, Any]:
    """A transaction's delete of ``key`` (a missing key is no error)."""
    return {"request_delete_range": {"key": encoded(key)}}


def compare_mod_revision(key: str, revision: int) -> dict[str, Any]:
    """True while ``key`` was last written at ``revision`` (0: while it does not exist;
    etcd compares a missing key's revisions as 0)."""
    return {"key": encoded(key), "target": "MOD", "mod_revision": str(revision)}


def txn_body(
    compare: list[dict[str, Any]],
    success: list[dict[str, Any]],
    failure: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The ``kv/txn`` request: ``success`` runs when every comparison holds (none: always),
    else ``failure``; all of it at one revision."""
    body: dict[str, Any] = {"compare": compare, "success": success}
    if failure:
        body["failure"] = failure
    return body


def txn_ranges(body: dict[str, Any]) -> list[list[KeyValue]]:
    """The keys each range of a transaction's answer read, in the order of its ranges."""
    return [
        key_values(response["response_range"].get("kvs"))
        for response in body.get("responses") or []
        if isinstance(response.get("response_range"), dict)
    ]
