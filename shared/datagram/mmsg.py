"""A tick's datagrams in a few system calls: ``sendmmsg`` and ``recvmmsg`` through ctypes.

Python's ``socket`` has neither; libc has both (Linux). Without them (another platform, or a
libc that lacks the symbols) the same functions fall back to a ``sendto`` / ``recvfrom``
loop, so callers need no second path. The socket is expected to be non-blocking (an asyncio
edge's is): a full send buffer ends a batch early, and the count sent says where.

This module does I/O: it is the one part of :mod:`shared.datagram` outside the no-I/O
contract.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import socket
import struct
import weakref

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


class _IOVec(ctypes.Structure):
    _fields_ = (("base", ctypes.c_void_p), ("length", ctypes.c_size_t))


class _MsgHdr(ctypes.Structure):
    _fields_ = (
        ("name", ctypes.c_void_p),
        ("namelen", ctypes.c_uint32),
        ("iov", ctypes.POINTER(_IOVec)),
        ("iovlen", ctypes.c_size_t),
        ("control", ctypes.c_void_p),
        ("controllen", ctypes.c_size_t),
        ("flags", ctypes.c_int),
    )


class _MMsgHdr(ctypes.Structure):
    _fields_ = (("hdr", _MsgHdr), ("length", ctypes.c_uint))


def _load_libc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        libc = ctypes.CDLL(name, use_errno=True)
        libc.sendmmsg.argtypes = (
            ctypes.c_int,
            ctypes.c_void_p,
            ctypes.c_uint,
            ctypes.c_int,
        )
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

_SOCKADDR_IN6 = 28
_CMSG_HEADER = struct.Struct("@NiI" if ctypes.sizeof(ctypes.c_size_t) == 8 else "@Iii")
_CMSG_SPACE = 32  # a cmsghdr and a 32-bit count, aligned, with room to spare

# The latest SO_RXQ_OVFL count seen per socket (enable_drop_count's).
_drops: weakref.WeakKeyDictionary[socket.socket, int] = weakref.WeakKeyDictionary()


def _sockaddr(family: int, address: Address) -> bytes:
    host, port = address[0], address[1]
    if family == socket.AF_INET6:
        packed = socket.inet_pton(socket.AF_INET6, host)
        return struct.pack("<H", socket.AF_INET6) + struct.pack(">HI", port, 0) + packed + bytes(4)
    packed = socket.inet_pton(socket.AF_INET, host)
    return struct.pack("<H", socket.AF_INET) + struct.pack(">H", port) + packed + bytes(8)


def _address(raw: bytes) -> Address:
    family = struct.unpack_from("<H", raw)[0]
    (port,) = struct.unpack_from(">H", raw, 2)
    if family == socket.AF_INET6:
        return socket.inet_ntop(socket.AF_INET6, raw[8:24]), port
    return socket.inet_ntop(socket.AF_INET, raw[4:8]), port


def send_batch(sock: socket.socket, items: list[tuple[bytes, Address]]) -> int:
    """Send every ``(datagram, address)`` in as few calls as the kernel allows; returns how
    many left (fewer than asked when the send buffer filled: the rest are dropped, as a
    lossy link would)."""
    if not items:
        return 0
    if _LIBC is None:
        return _send_loop(sock, items)
    count = len(items)
    family = sock.family
    headers = (_MMsgHdr * count)()
    vectors = (_IOVec * count)()
    keep = []
    for index, (data, address) in enumerate(items):
        payload = ctypes.create_string_buffer(bytes(data), len(data))
        name = ctypes.create_string_buffer(_sockaddr(family, address))
        keep.append((payload, name))
        vectors[index].base = ctypes.addressof(payload)
        vectors[index].length = len(data)
        header = headers[index].hdr
        header.name = ctypes.addressof(name)
        header.namelen = len(name.raw) if family == socket.AF_INET6 else 16
        header.iov = ctypes.pointer(vectors[index])
        header.iovlen = 1
    sent = 0
    fd = sock.fileno()
    while sent < count:
        result = _LIBC.sendmmsg(
            fd, ctypes.addressof(headers) + sent * ctypes.sizeof(_MMsgHdr), count - sent, 0
        )
        if result < 0:
            error = ctypes.get_errno()
            if error == errno.EINTR:
                continue
            if error in (errno.EAGAIN, errno.ENOBUFS):
                break
            raise OSError(error, f"sendmmsg: {errno.errorcode.get(error, error)}")
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
    buffers = ctypes.create_string_buffer(max_count * size)
    names = ctypes.create_string_buffer(max_count * _SOCKADDR_IN6)
    controls = ctypes.create_string_buffer(max_count * _CMSG_SPACE)
    headers = (_MMsgHdr * max_count)()
    vectors = (_IOVec * max_count)()
    base, name_base, control_base = (ctypes.addressof(b) for b in (buffers, names, controls))
    for index in range(max_count):
        vectors[index].base = base + index * size
        vectors[index].length = size
        header = headers[index].hdr
        header.name = name_base + index * _SOCKADDR_IN6
        header.namelen = _SOCKADDR_IN6
        header.iov = ctypes.pointer(vectors[index])
        header.iovlen = 1
        header.control = control_base + index * _CMSG_SPACE
        header.controllen = _CMSG_SPACE
    while True:
        count = _LIBC.recvmmsg(
            sock.fileno(), ctypes.addressof(headers), max_count, _MSG_DONTWAIT, None
        )
        if count >= 0:
            break
        error = ctypes.get_errno()
        if error == errno.EINTR:
            continue
        if error in (errno.EAGAIN, errno.EWOULDBLOCK):
            return []
        raise OSError(error, f"recvmmsg: {errno.errorcode.get(error, error)}")
    raw, raw_names = buffers.raw, names.raw
    out = []
    for index in range(count):
        length = headers[index].length
        start = index * size
        name = raw_names[index * _SOCKADDR_IN6 : (index + 1) * _SOCKADDR_IN6]
        out.append((raw[start : start + min(length, size)], _address(name)))
    if count and headers[count - 1].hdr.controllen >= _CMSG_HEADER.size + 4:
        _note_drops(sock, controls.raw[(count - 1) * _CMSG_SPACE : count * _CMSG_SPACE])
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
