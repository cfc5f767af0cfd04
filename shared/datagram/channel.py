"""A connection's datagrams after the handshake: three lanes over one sealed packet stream.

Fiedler's "Reliability and Congestion Avoidance over UDP" and netcode.io's packet rules:
every datagram has its own sequence number (the AEAD nonce), carries the newest sequence
received from the peer and a 32-bit field of the ones before it, and a receiver drops
duplicates and sequences older than a window of 256 (:class:`ReplayWindow`). On top:

* ``UNRELIABLE`` (snapshots): sent once. A payload larger than a datagram is cut into
  fragments of ``FRAGMENT_SIZE``; a lost fragment loses that payload only. Never delivered
  twice; a late one is still delivered (the snapshot's own tick orders it).
* ``REDUNDANT`` (inputs): every datagram repeats, oldest first, the newest ``redundancy``
  payloads the peer has not acknowledged (as many as fit beside the datagram's other
  records; each leaves at least once), so a lost datagram costs no input. Each is
  delivered once, in send order: a receiver delivers only payloads newer than the newest it
  delivered (the server refuses an input older than one it applied, so order is kept).
* ``RELIABLE`` (events, errors, tokens, standby list): resent until a datagram that carried
  it is acknowledged; delivered exactly once, in order, whatever its size.

Sans-I/O: :meth:`Channel.send` queues, :meth:`Channel.datagrams` gives the sealed bytes to
send now, :meth:`Channel.receive` takes bytes that arrived; ``now`` is always passed in.
"""

from __future__ import annotations

import enum
from collections import deque
from dataclasses import dataclass
from typing import Any

from shared.datagram.constants import MAX_PAYLOAD, REDUNDANCY, REPLAY_WINDOW, RESEND_INTERVAL_S
from shared.datagram.packets import (
    ACK_HEADER,
    CHANNEL_HEADER,
    DATA_ROOM,
    FRAGMENT_SIZE,
    MAX_FRAGMENTS,
    NO_SEQUENCE,
    RECORD_HEADERS,
    Kind,
    Record,
    encode_record,
    read_records,
)
from shared.datagram.sealing import TAG_BYTES, PacketKey

__all__ = [
    "ACK_BITS",
    "DISCONNECT_COPIES",
    "MAX_MESSAGE",
    "MAX_REDUNDANT_PAYLOAD",
    "RELIABLE_CHUNK",
    "Channel",
    "Lane",
    "ReplayWindow",
]

#: Sequences before the newest that each datagram acknowledges.
ACK_BITS = 32
#: A datagram still unacknowledged when one sent this many after it was acknowledged is
#: taken as lost for :attr:`Channel.last_loss_at` (long before it leaves the ack bits).
LOSS_REORDER_THRESHOLD = 3
#: The largest UNRELIABLE or RELIABLE payload (an UNRELIABLE one is at most 255 fragments).
MAX_MESSAGE = MAX_FRAGMENTS * FRAGMENT_SIZE
#: The largest REDUNDANT payload: several must fit beside each other in one datagram.
MAX_REDUNDANT_PAYLOAD = 512
#: Disconnect packets sent on a clean close (any one arriving is enough).
DISCONNECT_COPIES = 3
#: Reliable chunks a receiver buffers ahead of the next one it expects.
RELIABLE_WINDOW = 1024
#: Fragmented payloads a receiver assembles at once (a newer one evicts the oldest).
MAX_ASSEMBLIES = 16
#: The largest RELIABLE chunk: a longer message is cut into chunks of this size.
RELIABLE_CHUNK = 1024
_WHOLE_OVERHEAD = 1 + RECORD_HEADERS[Record.UNRELIABLE].size
_MIN_DATAGRAM = CHANNEL_HEADER.size + TAG_BYTES
_SEQUENCE = CHANNEL_HEADER
_SENDS = [bytes([count]) for count in range(256)]


class Lane(enum.Enum):
    """How a payload travels (see the module's docstring)."""

    UNRELIABLE = "unreliable"
    REDUNDANT = "redundant"
    RELIABLE = "reliable"


class ReplayWindow:
    """netcode.io's replay protection: a sequence older than the newest by the window or
    more, or one already seen inside it, is refused. :meth:`check` before opening a packet,
    :meth:`commit` only once it authenticated (a forgery must not move the window)."""

    __slots__ = ("_newest", "_seen", "_size")

    def __init__(self, size: int = REPLAY_WINDOW) -> None:
        self._size = size
        self._seen = [-1] * size
        self._newest = -1

    def check(self, sequence: int) -> str | None:
        """``None`` when fresh, else the refusal cause."""
        if sequence + self._size <= self._newest:
            return "out_of_window"
        if self._seen[sequence % self._size] == sequence:
            return "replayed"
        return None

    def commit(self, sequence: int) -> None:
        self._seen[sequence % self._size] = sequence
        if sequence > self._newest:
            self._newest = sequence


@dataclass(slots=True)
class _Sent:
    """What one datagram carried, settled when the peer acknowledges it."""

    sent_at: float
    redundant_through: int
    reliable_ids: tuple[int, ...]


@dataclass(slots=True)
class _Redundant:
    """A redundant payload's record, encoded once but for its send count (between the two)."""

    ident: int
    head: bytes
    tail: bytes
    size: int  # its record's bytes: the head, the send count's byte, the tail
    sends: int = 0


@dataclass(slots=True)
class _ReliableChunk:
    record: bytes
    last_sent: float = float("-inf")
    sends: int = 0


@dataclass(slots=True)
class _Assembly:
    parts: list[bytes | None]
    have: int = 0


def _redundant_run(entries: list[_Redundant], room: int) -> list[_Redundant]:
    """The redundant payloads one datagram carries, oldest first: all of them when they fit
    in ``room``; otherwise the oldest never sent and as many after it as fit (so each leaves
    at least once, in order), then older repeats, newest first, as long as they fit."""
    count = len(entries)
    start = end = next((i for i, entry in enumerate(entries) if not entry.sends), count)
    used = 0
    while end < count and used + entries[end].size <= room:
        used += entries[end].size
        end += 1
    while start > 0 and used + entries[start - 1].size <= room:
        start -= 1
        used += entries[start].size
    return entries[start:end]


_COUNTERS = (
    "sent",
    "received",
    "bytes_sent",
    "bytes_received",
    "lost",
    "duplicates",
    "resent",
    "redundant_resent",
    "recovered_by_redundancy",
    "redundant_given_up",
    "fragments_abandoned",
)


class Channel:
    """One connection's packet stream, sealed with one key per direction."""

    def __init__(
        self,
        send_key: bytes,
        receive_key: bytes,
        now: float,
        *,
        timeout_s: float = 5.0,
        redundancy: int = REDUNDANCY,
    ) -> None:
        if redundancy < 1:
            raise ValueError("redundancy must be at least 1")
        self._send_key = PacketKey(send_key)
        self._receive_key = PacketKey(receive_key)
        self.timeout_s = timeout_s
        self.redundancy = redundancy
        self.closed = False
        self.rtt_s = 0.0
        #: When a datagram sent was last taken as lost (never: -inf): what a sender that
        #: repeats its newest state on a lossy path looks at.
        self.last_loss_at = float("-inf")
        self._disconnected = False
        self._counters = dict.fromkeys(_COUNTERS, 0)
        self._refused: dict[str, int] = {}
        # Sending.
        self._next_sequence = 0
        self._last_sent_at = float("-inf")
        self._in_flight: dict[int, _Sent] = {}
        self._unreliable: list[bytes] = []
        self._next_unreliable = 0
        self._redundant: deque[_Redundant] = deque()
        self._next_redundant = 0
        self._redundant_acked = -1
        self._reliable: dict[int, _ReliableChunk] = {}
        self._next_reliable = 0
        # Receiving.
        self._last_received_at = now
        self._replay = ReplayWindow()
        self._newest_received = -1
        self._received_bits = 0
        self._redundant_delivered = -1
        self._reliable_expected = 0
        self._reliable_early: dict[int, tuple[int, bytes]] = {}
        self._reliable_partial: list[bytes] = []
        self._unreliable_newest = -1
        self._unreliable_seen: set[int] = set()
        self._assemblies: dict[int, _Assembly] = {}

    # -- sending ---------------------------------------------------------------------------

    def send(self, payload: bytes, lane: Lane) -> None:
        """Queue ``payload`` on ``lane``; it leaves with the next :meth:`datagrams`. A payload
        too large for its lane is a ``ValueError`` (the caller's bug)."""
        if self._disconnected or self.closed:
            return
        data = bytes(payload)
        if lane is Lane.REDUNDANT:
            if len(data) > MAX_REDUNDANT_PAYLOAD:
                raise ValueError(f"a redundant payload is at most {MAX_REDUNDANT_PAYLOAD} bytes")
            record = encode_record(Record.REDUNDANT, (self._next_redundant, 0), data)
            self._redundant.append(
                _Redundant(self._next_redundant, record[:5], record[6:], len(record))
            )
            self._next_redundant += 1
            if len(self._redundant) > self.redundancy:
                self._redundant.popleft()
                self._counters["redundant_given_up"] += 1
        elif lane is Lane.UNRELIABLE:
            ident = self._next_unreliable
            self._next_unreliable += 1
            if len(data) + _WHOLE_OVERHEAD <= DATA_ROOM:
                self._unreliable.append(encode_record(Record.UNRELIABLE, (ident,), data))
                return
            if len(data) > MAX_MESSAGE:
                raise ValueError(f"an unreliable payload is at most {MAX_MESSAGE} bytes")
            count = -(-len(data) // FRAGMENT_SIZE)
            for index in range(count):
                piece = data[index * FRAGMENT_SIZE : (index + 1) * FRAGMENT_SIZE]
                self._unreliable.append(
                    encode_record(Record.FRAGMENT, (ident, index, count), piece)
                )
        elif lane is Lane.RELIABLE:
            if len(data) > MAX_MESSAGE:
                raise ValueError(f"a reliable payload is at most {MAX_MESSAGE} bytes")
            pieces = [data[i : i + RELIABLE_CHUNK] for i in range(0, len(data), RELIABLE_CHUNK)]
            pieces = pieces or [b""]
            for number, piece in enumerate(pieces):
                final = int(number == len(pieces) - 1)
                record = encode_record(Record.RELIABLE, (self._next_reliable, final), piece)
                self._reliable[self._next_reliable] = _ReliableChunk(record)
                self._next_reliable += 1
        else:  # pragma: no cover - Lane is closed
            raise ValueError(f"unknown lane {lane!r}")

    def datagrams(self, now: float) -> list[bytes]:
        """The sealed datagrams to send now, each at most ``MAX_PAYLOAD`` bytes: what was
        queued, reliable chunks due for a resend, new redundant payloads, or a keep-alive when
        nothing left for ``RESEND_INTERVAL_S``."""
        if self._disconnected or self.closed:
            return []
        queue: deque[tuple[int, bytes]] = deque()  # (reliable id or -1, record)
        resend_after = max(RESEND_INTERVAL_S, 1.5 * self.rtt_s)
        oldest_allowed = self._reliable_expected_by_peer()
        for ident, chunk in self._reliable.items():
            if ident >= oldest_allowed + RELIABLE_WINDOW:
                break
            if now - chunk.last_sent >= resend_after:
                if chunk.sends:
                    self._counters["resent"] += 1
                chunk.last_sent = now
                chunk.sends += 1
                queue.append((ident, chunk.record))
        if self._unreliable:
            queue.extend((-1, record) for record in self._unreliable)
            self._unreliable = []
        fresh = bool(self._redundant) and self._redundant[-1].sends == 0
        if not queue and not fresh and now - self._last_sent_at < RESEND_INTERVAL_S:
            return []
        out = []
        redundant = list(self._redundant)
        while True:
            room = DATA_ROOM
            parts: list[bytes] = []
            redundant_through = -1
            run = _redundant_run(redundant, room - (len(queue[0][1]) if queue else 0))
            for entry in run:
                parts += (entry.head, _SENDS[min(entry.sends, 255)], entry.tail)
                room -= entry.size
                if entry.sends:
                    self._counters["redundant_resent"] += 1
                entry.sends += 1
            if run:
                redundant_through = run[-1].ident
            reliable_ids = []
            while queue and len(queue[0][1]) <= room:
                ident, record = queue.popleft()
                parts.append(record)
                room -= len(record)
                if ident >= 0:
                    reliable_ids.append(ident)
            out.append(self._seal_payload(parts, now, redundant_through, tuple(reliable_ids)))
            if not queue and (not redundant or redundant[-1].sends):
                return out

    def _reliable_expected_by_peer(self) -> int:
        return next(iter(self._reliable), self._next_reliable)

    def _seal_payload(
        self, parts: list[bytes], now: float, redundant_through: int, reliable_ids: tuple[int, ...]
    ) -> bytes:
        sequence = self._next_sequence
        self._next_sequence += 1
        newest = self._newest_received if self._newest_received >= 0 else NO_SEQUENCE
        body = ACK_HEADER.pack(newest, self._received_bits) + b"".join(parts)
        datagram = self._send_key.seal(sequence, _SEQUENCE.pack(Kind.PAYLOAD, sequence), body)
        self._in_flight[sequence] = _Sent(now, redundant_through, reliable_ids)
        if len(self._in_flight) > REPLAY_WINDOW:
            oldest = next(iter(self._in_flight))
            del self._in_flight[oldest]
            self._counters["lost"] += 1
            self.last_loss_at = now
        self._counters["sent"] += 1
        self._counters["bytes_sent"] += len(datagram)
        self._last_sent_at = now
        return datagram

    def disconnect(self) -> list[bytes]:
        """A few disconnect packets to send (any one arriving closes the peer's side); after
        this the channel sends nothing more."""
        if self._disconnected:
            return []
        self._disconnected = True
        out = []
        for _ in range(DISCONNECT_COPIES):
            sequence = self._next_sequence
            self._next_sequence += 1
            out.append(
                self._send_key.seal(sequence, _SEQUENCE.pack(Kind.DISCONNECT, sequence), b"")
            )
        return out

    # -- receiving -------------------------------------------------------------------------

    def receive(self, datagram: bytes, now: float) -> list[tuple[Lane, bytes]]:
        """The payloads ``datagram`` delivers, in order. A datagram that fails a check
        delivers nothing and is counted under its cause in :attr:`stats`."""
        size = len(datagram)
        if size < _MIN_DATAGRAM or size > MAX_PAYLOAD:
            return self._refuse("bad_size")
        kind = datagram[0]
        if kind != Kind.PAYLOAD and kind != Kind.DISCONNECT:
            return self._refuse("bad_packet")
        _, sequence = _SEQUENCE.unpack_from(datagram, 0)
        verdict = self._replay.check(sequence)
        if verdict is not None:
            if verdict == "replayed":
                self._counters["duplicates"] += 1
            return self._refuse(verdict)
        header = bytes(datagram[: _SEQUENCE.size])
        body = self._receive_key.open(sequence, header, bytes(datagram[_SEQUENCE.size :]))
        if body is None:
            return self._refuse("bad_packet")
        self._replay.commit(sequence)
        self._counters["received"] += 1
        self._counters["bytes_received"] += size
        self._last_received_at = now
        if kind == Kind.DISCONNECT:
            self.closed = True
            return []
        if self.closed:
            return []
        if len(body) < ACK_HEADER.size:
            return self._refuse("bad_packet")
        self._note_received(sequence)
        ack, bits = ACK_HEADER.unpack_from(body, 0)
        try:
            records = read_records(body, ACK_HEADER.size, self._redundant_delivered)
        except ValueError:
            return self._refuse("bad_packet")
        if ack != NO_SEQUENCE:
            self._settle(ack, bits, now)
        delivered: list[tuple[Lane, bytes]] = []
        for record, fields, data in records:
            if record is Record.REDUNDANT:
                ident, sends_before = fields
                if ident > self._redundant_delivered:
                    self._redundant_delivered = ident
                    if sends_before:
                        self._counters["recovered_by_redundancy"] += 1
                    delivered.append((Lane.REDUNDANT, data))
            elif record is Record.RELIABLE:
                self._receive_reliable(fields[0], fields[1], data, delivered)
            elif record is Record.UNRELIABLE:
                if self._first_time(fields[0]):
                    delivered.append((Lane.UNRELIABLE, data))
            else:
                self._receive_fragment(fields[0], fields[1], fields[2], data, delivered)
        return delivered

    def _refuse(self, cause: str) -> list[tuple[Lane, bytes]]:
        self._refused[cause] = self._refused.get(cause, 0) + 1
        return []

    def _note_received(self, sequence: int) -> None:
        newest = self._newest_received
        if sequence > newest:
            shift = sequence - newest
            bits = self._received_bits << shift
            if newest >= 0 and shift <= ACK_BITS:
                bits |= 1 << (shift - 1)
            self._received_bits = bits & 0xFFFFFFFF
            self._newest_received = sequence
        else:
            distance = newest - sequence - 1
            if distance < ACK_BITS:
                self._received_bits |= 1 << distance

    def _settle(self, ack: int, bits: int, now: float) -> None:
        """The peer received ``ack`` and the sequences its ``bits`` name: what they carried
        is acknowledged; what can no longer be acknowledged counts as lost."""
        if ack >= self._next_sequence:
            return  # acknowledges what was never sent: nothing to settle
        in_flight = self._in_flight
        sent = in_flight.pop(ack, None)
        if sent is not None:
            sample = now - sent.sent_at
            self.rtt_s = sample if self.rtt_s == 0.0 else self.rtt_s + 0.1 * (sample - self.rtt_s)
            self._acknowledge(sent)
        # The bits name up to 32 datagrams, most of them settled by an earlier ack: look
        # only at those still in flight before ``ack`` (in order sent, a few), not bit by bit.
        settled = []
        for sequence in in_flight:
            if sequence >= ack:
                break
            if bits >> (ack - sequence - 1) & 1:
                settled.append(sequence)
        for sequence in settled:
            self._acknowledge(in_flight.pop(sequence))
        horizon = ack - ACK_BITS
        while in_flight:
            oldest = next(iter(in_flight))
            if oldest >= horizon:
                if oldest < ack - LOSS_REORDER_THRESHOLD:  # (QUIC's packet threshold)
                    self.last_loss_at = now  # lost, unless reordered by that many
                break
            del in_flight[oldest]
            self._counters["lost"] += 1
            self.last_loss_at = now
        redundant = self._redundant
        while redundant and redundant[0].ident <= self._redundant_acked:
            redundant.popleft()

    def _acknowledge(self, sent: _Sent) -> None:
        if sent.redundant_through > self._redundant_acked:
            self._redundant_acked = sent.redundant_through
        for ident in sent.reliable_ids:
            self._reliable.pop(ident, None)

    def _receive_reliable(
        self, ident: int, final: int, data: bytes, delivered: list[tuple[Lane, bytes]]
    ) -> None:
        expected = self._reliable_expected
        if ident < expected or ident >= expected + RELIABLE_WINDOW:
            return  # a resend of what was delivered, or too far ahead: the sender resends
        self._reliable_early[ident] = (final, data)
        early = self._reliable_early
        while expected in early:
            is_final, piece = early.pop(expected)
            expected += 1
            self._reliable_partial.append(piece)
            if is_final:
                delivered.append((Lane.RELIABLE, b"".join(self._reliable_partial)))
                self._reliable_partial = []
        self._reliable_expected = expected

    def _first_time(self, ident: int) -> bool:
        """Whether unreliable payload ``ident`` is delivered now (never twice)."""
        if ident + REPLAY_WINDOW <= self._unreliable_newest or ident in self._unreliable_seen:
            return False
        self._unreliable_seen.add(ident)
        if ident > self._unreliable_newest:
            self._unreliable_newest = ident
            if len(self._unreliable_seen) > 2 * REPLAY_WINDOW:
                floor = ident - REPLAY_WINDOW
                self._unreliable_seen = {seen for seen in self._unreliable_seen if seen > floor}
        return True

    def _receive_fragment(
        self, ident: int, index: int, count: int, data: bytes, delivered: list[tuple[Lane, bytes]]
    ) -> None:
        if count < 2 or index >= count or len(data) > FRAGMENT_SIZE:
            self._refused["bad_packet"] = self._refused.get("bad_packet", 0) + 1
            return
        if ident + REPLAY_WINDOW <= self._unreliable_newest or ident in self._unreliable_seen:
            return
        assembly = self._assemblies.get(ident)
        if assembly is None:
            if len(self._assemblies) >= MAX_ASSEMBLIES:
                del self._assemblies[min(self._assemblies)]
                self._counters["fragments_abandoned"] += 1
            assembly = self._assemblies[ident] = _Assembly([None] * count)
        if len(assembly.parts) != count or assembly.parts[index] is not None:
            return
        assembly.parts[index] = data
        assembly.have += 1
        if assembly.have == count:
            del self._assemblies[ident]
            if self._first_time(ident):
                delivered.append((Lane.UNRELIABLE, b"".join(assembly.parts)))  # type: ignore[arg-type]

    # -- state -----------------------------------------------------------------------------

    def timed_out(self, now: float) -> bool:
        """Nothing authentic arrived for ``timeout_s``."""
        return now - self._last_received_at > self.timeout_s

    @property
    def last_received_at(self) -> float:
        return self._last_received_at

    @property
    def refused(self) -> dict[str, int]:
        """Datagrams dropped, by cause."""
        return dict(self._refused)

    @property
    def stats(self) -> dict[str, Any]:
        """Counters: datagrams sent and received (and their bytes), lost (sent, never
        acknowledged), duplicates, reliable chunks resent, redundant payloads repeated in a later
        datagram (``redundant_resent``), redundant payloads delivered from a
        repeat (``recovered_by_redundancy``) or given up unacknowledged, fragmented payloads
        abandoned, and ``refused`` (a dict by cause)."""
        stats: dict[str, Any] = dict(self._counters)
        stats["refused"] = dict(self._refused)
        return stats
