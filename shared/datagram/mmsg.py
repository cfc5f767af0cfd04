"""A tick's datagrams in a few system calls: ``sendmmsg`` and ``recvmmsg`` through ctypes.

Python's ``socket`` has neither; libc has both (Linux). The ``mmsghdr`` arrays are built as
NumPy arrays (one column a field, no Python object per datagram): built with a ctypes
structure per datagram, a batch cost more Python than the ``sendto`` loop it replaces.
The datagrams of a batch are joined into one buffer, so every ``iovec`` points into it.

Without the calls (another platform, a libc without the symbols, or a layout other than
LP64 little-endian) the same functions fall back to ``sendto`` / ``recvfrom`` loops, so
callers need no second path. The socket is expected to be non-blocking (an asyncio edge's
is): a full send buffer ends a batch early, and the count sent says where.

This module does I/O: it is the one part of :mod:`shared.datagram` outside the no-I/O
contract.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import socket
import struct
import sys
import weakref

import numpy as np

__all__ = [
    "HAVE_MMSG",
    "enable_drop_count",
    "kernel_drops",
    "receive_batch",
    "send_batch",
    "set_buffer_sizes",
]

Address = tuple[str, int]

_MSG_DONTWAIT = 0x40
_SO_RXQ_OVFL = getattr(socket, "SO_RXQ_OVFL", 40)

# struct mmsghdr on LP64 as eight 64-bit words: msg_name, msg_namelen, msg_iov, msg_iovlen,
# msg_control, msg_controllen, msg_flags, msg_len (32-bit fields in the low half).
_NAME, _NAMELEN, _IOV, _IOVLEN, _CONTROL, _CONTROLLEN, _FLAGS, _LEN = range(8)
_MMSGHDR_WORDS = 8
_IOVEC_WORDS = 2
#: Room for any socket address (a sockaddr_in6); every name slot has this size.
_NAME_BYTES = 28
#: A cmsghdr (16 bytes on LP64) and a 32-bit count, aligned.
_CONTROL_BYTES = 32
_CMSG_HEADER = struct.Struct("@QiI")


def _load_libc() -> ctypes.CDLL | None:
    if sys.byteorder != "little" or ctypes.sizeof(ctypes.c_void_p) != 8:
        return None
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        libc = ctypes.CDLL(name, use_errno=True)
        libc.sendmmsg.argtypes = (ctypes.c_int, ctypes.c_void_p, ctypes.c_uint, ctypes.c_int)
        libc.recvmmsg.argtypes = (
            ctypes.c_int,
            ctypes.c_void_p,
            ctypes.c_uint,
            ctypes.c_int,
            ctypes.c_void_p,
        )
    except (OSError, AttributeError):
        return None
    return libc


_LIBC = _load_libc()
#: Whether the batched calls are there (else the loops stand in).
HAVE_MMSG = _LIBC is not None

# The latest SO_RXQ_OVFL count seen per socket (enable_drop_count's).
_drops: weakref.WeakKeyDictionary[socket.socket, int] = weakref.WeakKeyDictionary()
# Socket addresses packed once: a node sends to the same players every tick.
_packed_names: dict[Address, bytes] = {}
_unpacked_names: dict[bytes, Address] = {}
_NAMES_KEPT = 65536


def _sockaddr(address: Address) -> bytes:
    """``address`` as a sockaddr, padded to ``_NAME_BYTES`` (length: 16 for IPv4)."""
    packed = _packed_names.get(address)
    if packed is None:
        host, port = address[0], address[1]
        if ":" in host:
            ip = socket.inet_pton(socket.AF_INET6, host)
            packed = (
                struct.pack("<H", socket.AF_INET6) + struct.pack(">HI", port, 0) + ip + bytes(4)
            )
        else:
            ip = socket.inet_pton(socket.AF_INET, host)
            packed = struct.pack("<H", socket.AF_INET) + struct.pack(">H", port) + ip + bytes(20)
        if len(_packed_names) >= _NAMES_KEPT:
            _packed_names.clear()
        _packed_names[(host, port)] = packed
    return packed


def _address(raw: bytes) -> Address:
    address = _unpacked_names.get(raw)
    if address is None:
        family = struct.unpack_from("<H", raw)[0]
        (port,) = struct.unpack_from(">H", raw, 2)
        if family == socket.AF_INET6:
            address = (socket.inet_ntop(socket.AF_INET6, raw[8:24]), port)
        else:
            address = (socket.inet_ntop(socket.AF_INET, raw[4:8]), port)
        if len(_unpacked_names) >= _NAMES_KEPT:
            _unpacked_names.clear()
        _unpacked_names[raw] = address
    return address


def _check(result: int, call: str) -> int:
    """``result``, or -1 for "try again later"; raises for a real error."""
    if result >= 0:
        return result
    error = ctypes.get_errno()
    if error in (errno.EAGAIN, errno.EWOULDBLOCK, errno.ENOBUFS, errno.EINTR):
        return -1 if error != errno.EINTR else -2
    raise OSError(error, f"{call}: {errno.errorcode.get(error, error)}")


def send_batch(sock: socket.socket, items: list[tuple[bytes, Address]]) -> int:
    """Send every ``(datagram, address)`` in as few calls as the kernel allows; returns how
    many left (fewer than asked when the send buffer filled: the rest are dropped, as a
    lossy link would)."""
    count = len(items)
    if count == 0:
        return 0
    if _LIBC is None:
        return _send_loop(sock, items)
    datagrams = [data for data, _ in items]
    blob = np.frombuffer(b"".join(datagrams) or b"\0", dtype=np.uint8)
    names = np.frombuffer(b"".join([_sockaddr(address) for _, address in items]), dtype=np.uint8)
    lengths = np.fromiter(map(len, datagrams), dtype=np.uint64, count=count)
    vectors = np.empty((count, _IOVEC_WORDS), dtype=np.uint64)
    vectors[:, 1] = lengths
    vectors[0, 0] = 0
    np.cumsum(lengths[:-1], out=vectors[1:, 0])
    vectors[:, 0] += blob.ctypes.data
    headers = np.zeros((count, _MMSGHDR_WORDS), dtype=np.uint64)
    headers[:, _NAME] = names.ctypes.data + _NAME_BYTES * np.arange(count, dtype=np.uint64)
    families = names[0::_NAME_BYTES]  # the low byte of sa_family (AF_INET 2, AF_INET6 10)
    headers[:, _NAMELEN] = np.where(families == socket.AF_INET6, _NAME_BYTES, 16)
    headers[:, _IOV] = vectors.ctypes.data + 16 * np.arange(count, dtype=np.uint64)
    headers[:, _IOVLEN] = 1
    base = headers.ctypes.data
    sent = 0
    fd = sock.fileno()
    while sent < count:
        result = _check(
            _LIBC.sendmmsg(fd, base + sent * 8 * _MMSGHDR_WORDS, count - sent, 0), "sendmmsg"
        )
        if result == -2:
            continue
        if result < 0:
            break
        sent += result
    return sent


def _send_loop(sock: socket.socket, items: list[tuple[bytes, Address]]) -> int:
    sent = 0
    for data, address in items:
        try:
            sock.sendto(data, address)
        except (BlockingIOError, InterruptedError):
            break
        sent += 1
    return sent


def receive_batch(
    sock: socket.socket, max_count: int = 64, size: int = 1500
) -> list[tuple[bytes, Address]]:
    """Up to ``max_count`` datagrams waiting on ``sock`` (each cut to ``size`` bytes), without
    blocking: an empty list when none are waiting."""
    if _LIBC is None:
        return _receive_loop(sock, max_count, size)
    buffers = np.empty(max_count * size, dtype=np.uint8)
    names = np.zeros(max_count * _NAME_BYTES, dtype=np.uint8)
    controls = np.zeros(max_count * _CONTROL_BYTES, dtype=np.uint8)
    vectors = np.empty((max_count, _IOVEC_WORDS), dtype=np.uint64)
    vectors[:, 0] = buffers.ctypes.data + size * np.arange(max_count, dtype=np.uint64)
    vectors[:, 1] = size
    headers = np.zeros((max_count, _MMSGHDR_WORDS), dtype=np.uint64)
    headers[:, _NAME] = names.ctypes.data + _NAME_BYTES * np.arange(max_count, dtype=np.uint64)
    headers[:, _NAMELEN] = _NAME_BYTES
    headers[:, _IOV] = vectors.ctypes.data + 16 * np.arange(max_count, dtype=np.uint64)
    headers[:, _IOVLEN] = 1
    headers[:, _CONTROL] = controls.ctypes.data + _CONTROL_BYTES * np.arange(
        max_count, dtype=np.uint64
    )
    headers[:, _CONTROLLEN] = _CONTROL_BYTES
    fd = sock.fileno()
    while True:
        count = _check(
            _LIBC.recvmmsg(fd, headers.ctypes.data, max_count, _MSG_DONTWAIT, None), "recvmmsg"
        )
        if count != -2:
            break
    if count <= 0:
        return []
    lengths = (headers[:count, _LEN] & 0xFFFFFFFF).tolist()
    raw = buffers.tobytes()
    raw_names = names.tobytes()
    out = [
        (
            raw[index * size : index * size + length],
            _address(raw_names[index * _NAME_BYTES : (index + 1) * _NAME_BYTES]),
        )
        for index, length in enumerate(lengths)
    ]
    if int(headers[count - 1, _CONTROLLEN]) >= _CMSG_HEADER.size + 4:
        last = count - 1
        _note_drops(sock, controls[last * _CONTROL_BYTES : count * _CONTROL_BYTES].tobytes())
    return out


def _note_drops(sock: socket.socket, control: bytes) -> None:
    _, level, kind = _CMSG_HEADER.unpack_from(control, 0)
    if level == socket.SOL_SOCKET and kind == _SO_RXQ_OVFL:
        (dropped,) = struct.unpack_from("@I", control, _CMSG_HEADER.size)
        _drops[sock] = dropped


def _receive_loop(sock: socket.socket, max_count: int, size: int) -> list[tuple[bytes, Address]]:
    out = []
    for _ in range(max_count):
        try:
            data, address = sock.recvfrom(size, _MSG_DONTWAIT)
        except (BlockingIOError, InterruptedError):
            break
        out.append((data, (address[0], address[1])))
    return out


def enable_drop_count(sock: socket.socket) -> bool:
    """Ask the kernel to report this socket's receive-queue drops (``SO_RXQ_OVFL``) with
    each datagram; :func:`kernel_drops` then reads the count. ``False`` where unsupported."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, _SO_RXQ_OVFL, 1)
    except OSError:
        return False
    _drops.setdefault(sock, 0)
    return True


def kernel_drops(sock: socket.socket) -> int:
    """Datagrams the kernel dropped for lack of buffer: this socket's count (as of the last
    batch received) when :func:`enable_drop_count` took, otherwise the host's UDP
    ``RcvbufErrors`` from ``/proc/net/snmp`` (every socket's), or 0 where neither exists."""
    if sock in _drops:
        return _drops[sock]
    try:
        with open("/proc/net/snmp", encoding="ascii") as snmp:
            rows = [line.split() for line in snmp if line.startswith("Udp:")]
    except OSError:
        return 0
    if len(rows) < 2 or "RcvbufErrors" not in rows[0]:
        return 0
    return int(rows[1][rows[0].index("RcvbufErrors")])


def set_buffer_sizes(sock: socket.socket, receive: int, send: int) -> tuple[int, int]:
    """Ask for receive and send buffers of these sizes (a tick's burst must fit); returns what
    the kernel granted (Linux doubles the request and caps it at ``rmem_max``/``wmem_max``)."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, send)
    return (
        sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF),
        sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF),
    )
