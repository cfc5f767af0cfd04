"""Batched sends and receives over a real socket pair on 127.0.0.1 (and the plain loops that
stand in where libc lacks sendmmsg/recvmmsg)."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import pytest

from shared.datagram import mmsg


@pytest.fixture
def sockets() -> Iterator[tuple[socket.socket, socket.socket]]:
    pair = []
    try:
        for _ in range(2):
            sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            pair.append(sock)
            sock.bind(("127.0.0.1", 0))
            sock.setblocking(False)
        yield pair[0], pair[1]
    finally:
        for sock in pair:
            sock.close()


def receive_all(sock: socket.socket, expected: int, max_count: int = 64) -> list:
    got: list = []
    deadline = time.monotonic() + 5.0
    while len(got) < expected and time.monotonic() < deadline:
        got += mmsg.receive_batch(sock, max_count=max_count)
    return got


@pytest.mark.parametrize("batched", [True, False])
def test_a_batch_crosses_a_socket_pair(
    sockets: tuple[socket.socket, socket.socket], batched: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not batched:
        monkeypatch.setattr(mmsg, "_LIBC", None)
    elif not mmsg.HAVE_MMSG:
        pytest.skip("libc without sendmmsg/recvmmsg")
    sender, receiver = sockets
    target = receiver.getsockname()
    items = [(bytes([n % 256]) * (1 + n * 11 % 1200), target) for n in range(100)]
    assert mmsg.send_batch(sender, items) == 100
    assert mmsg.receive_batch(receiver, max_count=64) != []  # a batch, not one datagram
    rest = receive_all(receiver, 100 - 64)
    assert len(rest) == 100 - 64
    assert mmsg.receive_batch(receiver) == []  # drained: never blocks
    # Every datagram whole, from the sender's address.
    again = [(data, sender.getsockname()) for data, _ in items]
    assert mmsg.send_batch(sender, items) == 100
    assert receive_all(receiver, 100, max_count=100) == again


def test_a_batch_to_several_addresses(sockets: tuple[socket.socket, socket.socket]) -> None:
    first, second = sockets
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sender:
        sender.bind(("127.0.0.1", 0))
        items = [(b"to %d" % n, (first, second)[n % 2].getsockname()) for n in range(10)]
        assert mmsg.send_batch(sender, items) == 10
    assert [d for d, _ in receive_all(first, 5)] == [b"to %d" % n for n in range(0, 10, 2)]
    assert [d for d, _ in receive_all(second, 5)] == [b"to %d" % n for n in range(1, 10, 2)]


def test_nothing_to_send(sockets: tuple[socket.socket, socket.socket]) -> None:
    assert mmsg.send_batch(sockets[0], []) == 0


def test_kernel_drops_are_counted(sockets: tuple[socket.socket, socket.socket]) -> None:
    sender, receiver = sockets
    if not mmsg.enable_drop_count(receiver):
        pytest.skip("no SO_RXQ_OVFL here")
    granted, _ = mmsg.set_buffer_sizes(receiver, 4096, 65536)
    assert granted < 65536
    target = receiver.getsockname()
    assert mmsg.kernel_drops(receiver) == 0
    mmsg.send_batch(sender, [(bytes(1000), target)] * 200)  # far more than the buffer holds
    while mmsg.receive_batch(receiver):
        pass
    mmsg.send_batch(sender, [(b"after", target)])  # carries the count of what was dropped
    receive_all(receiver, 1)
    assert mmsg.kernel_drops(receiver) > 0


def test_buffer_sizes_are_granted(sockets: tuple[socket.socket, socket.socket]) -> None:
    receive, send = mmsg.set_buffer_sizes(sockets[0], 100_000, 50_000)
    assert receive >= 100_000 and send >= 50_000  # Linux doubles what was asked
