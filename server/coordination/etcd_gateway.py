"""etcd's v3 JSON gateway as data (sans-I/O): its answers read, its errors told apart.

Gateway details (etcd 3.4, ``/v3/``; ``/v3beta/`` is the older alias): keys and values are
base64; int64 fields are JSON strings; fields with default values are omitted (a failed
transaction has no ``succeeded``, a range with no match has no ``kvs``, a keep-alive for an
expired lease has no ``TTL``); ``lease/keepalive`` is a stream that answers
``{"result": ...}`` once per request object; errors come back as a non-200 status with
``{"error", "message", "code"}`` where ``code`` is a gRPC status code. The coordinator that
talks to the gateway is :mod:`server.coordination.net.etcd`.
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
    "EtcdRequestError",
    "encoded",
    "gateway_int",
    "holder_from_range",
    "holder_from_txn",
    "read_answer",
]

# gRPC status codes etcd's gateway returns in the "code" field of an error body.
GRPC_NOT_FOUND = 5
_GRPC_DEADLINE_EXCEEDED = 4
_GRPC_UNAVAILABLE = 14


class EtcdRequestError(CoordinatorError):
    """etcd answered, with an error (``code`` is the gRPC status code, 0 if unknown)."""

    def __init__(self, message: str, *, code: int, status: int) -> None:
        super().__init__(message)
        self.code = code
        self.status = status


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
    :class:`CoordinatorUnavailable` when etcd cannot serve (retry later), else
    :class:`EtcdRequestError`."""
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
        if status in (502, 503, 504) or code in (_GRPC_UNAVAILABLE, _GRPC_DEADLINE_EXCEEDED):
            raise CoordinatorUnavailable(f"etcd at {endpoint} unavailable: {message}")
        raise EtcdRequestError(f"etcd refused {path}: {message}", code=code, status=status)
    return body
