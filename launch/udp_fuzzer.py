"""A UDP fuzzer against a running node: :mod:`launch.datagram_fuzz`'s bad datagrams, sent at
a steady rate from several source ports, and every reply each port gets counted.

To have genuine traffic to spoil and replay, the fuzzer is a client itself: it asks the
node's ``/connect`` for a token, connects over its own socket (the *capture* address) and
records its sealed datagrams; bad MACs and replays are sent from that connected address,
where they meet its channel's checks. A second socket (the *challenged* address) presents a
genuine token and never answers its challenge: forged responses are sent from it. Both
renew their tokens every :data:`RENEW_S` (before the node's join timeout closes a client
that never joins, and before a challenge's deadline), so the checks stay the ones meant.

What it measures is what only the sender can: per source, the bytes sent and the bytes the
node sent back, and whether any source that never answered a challenge was answered with a
connection (a PAYLOAD or DISCONNECT is only ever sent to a connected address).
"""

from __future__ import annotations

import json
import random
import socket
import time
import urllib.request
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from launch.datagram_fuzz import (
    ANY,
    CHALLENGED,
    CONNECTED,
    FUZZ_KINDS,
    SOURCE_OF,
    Material,
    fuzz_datagram,
    request_datagram,
)
from shared.datagram import ClientHandshake, ConnectToken
from shared.datagram.packets import Kind

__all__ = ["RENEW_S", "FuzzPlan", "run_fuzzer"]

Address = tuple[str, int]

#: How often the capture and challenged addresses take a fresh token: under the node's
#: 5 s join timeout and a challenge's deadline (the token's timeout_s).
RENEW_S = 3.0
#: Datagrams sent between two looks at the clock, the replies and the honest sockets.
BURST = 32
#: Genuine datagrams kept to spoil and replay (the newest).
POOL = 256
#: After the last datagram, how long replies are still read.
DRAIN_S = 0.5
_CONNECTION_KINDS = (int(Kind.PAYLOAD), int(Kind.DISCONNECT))
_CHALLENGE = bytes([Kind.CHALLENGE])


@dataclass(frozen=True, slots=True)
class FuzzPlan:
    """What to send: ``datagrams`` at ``rate`` a second from ``sources`` ports (besides the
    capture and challenged ones), to the node at ``node`` (UDP) whose HTTP base URL is
    ``base_url``; ``region_key`` when known seals the expired tokens; at most ``within_s``."""

    node: Address
    base_url: str
    datagrams: int
    rate: float
    sources: int
    seed: int
    within_s: float
    region_key: bytes | None = None


@dataclass
class _Source:
    """One socket and what crossed it."""

    sock: socket.socket
    role: str
    port: int
    sent: int = 0
    sent_bytes: int = 0
    received: int = 0
    received_bytes: int = 0
    connections: int = 0  # datagrams of a connected channel that reached it

    def send(self, data: bytes, to: Address) -> None:
        for _ in range(100):
            try:
                self.sock.sendto(data, to)
                break
            except BlockingIOError:
                time.sleep(0.001)
        else:
            raise OSError("the fuzzer's socket stayed full")
        self.sent += 1
        self.sent_bytes += len(data)

    def drain(self) -> list[bytes]:
        got = []
        for _ in range(1024):
            try:
                data = self.sock.recv(2048)
            except (BlockingIOError, ConnectionRefusedError):
                break
            got.append(data)
            self.received += 1
            self.received_bytes += len(data)
            if data and data[0] in _CONNECTION_KINDS:
                self.connections += 1
        return got

    def figures(self) -> dict[str, Any]:
        return {
            "port": self.port,
            "role": self.role,
            "sent": self.sent,
            "sent_bytes": self.sent_bytes,
            "received": self.received,
            "received_bytes": self.received_bytes,
            "connection_datagrams": self.connections,
        }


def _new_socket(role: str) -> _Source:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    sock.setblocking(False)
    return _Source(sock, role, int(sock.getsockname()[1]))


def fetch_token(base_url: str, name: str) -> ConnectToken:
    """A connect token from the node's ``/connect`` (what any client does first)."""
    request = urllib.request.Request(
        base_url + "/connect",
        data=json.dumps({"name": name}).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=5) as answer:
        return ConnectToken.from_json(json.loads(answer.read()))


@dataclass
class _Honest:
    """The fuzzer's own genuine clients: the capture (connects, its datagrams recorded) and
    the challenged address (requests, never answers)."""

    plan: FuzzPlan
    capture: _Source
    challenged: _Source
    genuine: deque[bytes] = field(default_factory=lambda: deque(maxlen=POOL))
    replays: deque[bytes] = field(default_factory=lambda: deque(maxlen=POOL))
    handshake: ClientHandshake | None = None
    handshake_sent: list[bytes] = field(default_factory=list)
    request: bytes = b""
    challenge_token: ConnectToken | None = None
    renewed_at: float = float("-inf")
    connections: int = 0
    challenges: int = 0
    renewals: int = 0
    primers: int = 0  # the challenged address's genuine requests (not fuzz)

    def service(self, now: float) -> None:
        """Renew when due, keep the capture's channel alive and recorded, read replies."""
        if now - self.renewed_at >= RENEW_S:
            self.renewed_at = now
            self.renewals += 1
            token = fetch_token(self.plan.base_url, "fuzz-capture")
            self.handshake = ClientHandshake(token, self.plan.node, now)
            self.handshake_sent = []
            self.challenge_token = fetch_token(self.plan.base_url, "fuzz-challenged")
            self.challenged.send(request_datagram(self.challenge_token.private), self.plan.node)
            self.primers += 1
        self.challenges += sum(1 for d in self.challenged.drain() if d[:1] == _CHALLENGE)
        handshake = self.handshake
        if handshake is None:
            return
        for data in self.capture.drain():
            was = handshake.state
            handshake.on_datagram(data, now)
            if was != "connected" and handshake.state == "connected":
                self.connections += 1
                self.replays.extend(self.handshake_sent)  # used now: a copy must be refused
        channel = handshake.channel
        outgoing = handshake.datagrams(now) if channel is None else channel.datagrams(now)
        for datagram in outgoing:
            self.capture.send(datagram, self.plan.node)
            self.genuine.append(datagram)
            if channel is None:
                self.handshake_sent.append(datagram)
                if datagram[0] == Kind.REQUEST:
                    self.request = datagram
            else:
                self.replays.append(datagram)

    def material(self) -> Material | None:
        if not self.replays or not self.request:
            return None
        return Material(
            genuine=tuple(self.genuine),
            replays=tuple(self.replays),
            request=self.request,
            challenged=self.challenge_token,
            node=self.plan.node,
            region_key=self.plan.region_key,
        )


def run_fuzzer(plan: FuzzPlan) -> dict[str, Any]:
    """Send the plan's datagrams (round robin over :data:`FUZZ_KINDS`, each from a source of
    its kind), paced at its rate; what was sent by kind and what each source got back. A
    node that stops answering ``/connect`` ends the run early, its ``failure`` said."""
    started = time.monotonic()
    others = [_new_socket(ANY) for _ in range(plan.sources)]
    honest = _Honest(plan, _new_socket(CONNECTED), _new_socket(CHALLENGED))
    sent = dict.fromkeys(FUZZ_KINDS, 0)
    sending_s: float | None = None
    try:
        sending_s = _fuzz(plan, honest, others, sent, started + plan.within_s)
        failure = None if sending_s is not None else "the capture never connected"
    except (OSError, ValueError) as error:  # (urllib's errors are OSErrors)
        failure = f"{type(error).__name__}: {error}"
    finally:
        for source in [*others, honest.capture, honest.challenged]:
            source.sock.close()
    result = _result(plan, sent, honest, others, started, failure)
    result["sending_s"] = None if sending_s is None else round(sending_s, 3)
    return result


def _fuzz(
    plan: FuzzPlan, honest: _Honest, others: list[_Source], sent: dict[str, int], deadline: float
) -> float | None:
    """The sending itself, counted into ``sent``: its seconds, or None when the capture
    client never connected (nothing to spoil)."""
    rng = random.Random(plan.seed)
    by_role = {ANY: others, CONNECTED: [honest.capture], CHALLENGED: [honest.challenged]}
    material = None
    while material is None and time.monotonic() < deadline:  # the capture connects first
        honest.service(time.time())
        material = honest.material()
        time.sleep(0.002)
    if material is None:
        return None
    begun = time.monotonic()
    for number in range(plan.datagrams):
        if number % BURST == 0:
            now = time.time()
            honest.service(now)
            material = honest.material() or material
            for source in others:
                source.drain()
            ahead = begun + number / plan.rate - time.monotonic()
            if ahead > 0:
                time.sleep(ahead)
            if time.monotonic() > deadline:
                break
        kind = FUZZ_KINDS[number % len(FUZZ_KINDS)]
        source = rng.choice(by_role[SOURCE_OF[kind]] + (others if kind == "replayed" else []))
        source.send(fuzz_datagram(kind, rng, material, now), plan.node)
        sent[kind] += 1
    sending_s = time.monotonic() - begun
    end = time.monotonic() + DRAIN_S
    while time.monotonic() < end:
        honest.service(time.time())
        for source in others:
            source.drain()
        time.sleep(0.01)
    return sending_s


def _result(
    plan: FuzzPlan,
    sent: dict[str, int],
    honest: _Honest,
    others: list[_Source],
    started: float,
    failure: str | None,
) -> dict[str, Any]:
    # Every source but the capture never answered a challenge: each is judged on its own.
    unanswered = [*others, honest.challenged]
    fuzz_sent = sum(sent.values())
    return {
        "failure": failure,
        "asked": plan.datagrams,
        "sent": fuzz_sent,
        "sent_by_kind": sent,
        "rate_per_s": plan.rate,
        "elapsed_s": round(time.monotonic() - started, 3),
        "sources": [source.figures() for source in unanswered],
        "capture": {
            **honest.capture.figures(),
            "connections": honest.connections,
            "renewals": honest.renewals,
        },
        "challenged_requests": honest.primers,
        "challenges_received": honest.challenges,
        "accepted_from_fuzz_sources": sum(1 for s in unanswered if s.connections),
        "amplifying_sources": [s.port for s in unanswered if s.received_bytes > s.sent_bytes],
    }
