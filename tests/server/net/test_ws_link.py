"""A player's write path: one whole WebSocket frame or nothing, the body never copied."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

from server.net.metrics import NodeMetrics
from server.net.ws_link import WebSocketLink
from shared import wsframe


class Writes:
    """A transport that keeps what it is handed, buffer by buffer."""

    def __init__(self, buffered: int = 0, high_water: int = 64 * 1024) -> None:
        self.calls: list[tuple[bytes, ...]] = []
        self.buffered = buffered
        self.high_water = high_water

    def get_write_buffer_limits(self) -> tuple[int, int]:
        return (self.high_water // 4, self.high_water)

    def get_write_buffer_size(self) -> int:
        return self.buffered

    def is_closing(self) -> bool:
        return False

    def writelines(self, buffers: tuple[bytes, ...]) -> None:
        self.calls.append(tuple(buffers))


def connection(transport: Writes) -> WebSocketLink:
    ws = cast(Any, SimpleNamespace(closed=False))
    return WebSocketLink(ws, cast(Any, transport), metrics=NodeMetrics())


def test_a_snapshot_is_one_vectored_write_of_header_head_and_the_shared_body() -> None:
    transport = Writes()
    body = bytes(8000)
    assert connection(transport).send_snapshot(b"head", body)
    ((header, head, sent),) = transport.calls
    assert sent is body  # handed over as it is, not joined into a copy
    assert head == b"head"
    assert header == wsframe.header(wsframe.OP_BINARY, 4 + len(body), masked=False)


def test_a_frame_the_socket_has_no_room_for_is_dropped_whole() -> None:
    transport = Writes(buffered=60 * 1024)
    assert not connection(transport).send_snapshot(b"head", bytes(8000))
    assert transport.calls == []
    alone = Writes()
    assert connection(alone).send(b"pong")
    assert [len(buffers) for buffers in alone.calls] == [2]
