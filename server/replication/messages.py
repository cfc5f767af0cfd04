"""Every message of the replication link, defined once (sans-I/O).

Frozen dataclasses, validated on construction (h11's events): a peer's malformed message
is a :class:`MessageError` with one line, never a ``KeyError`` deep in the edge. On the
wire each is a msgpack map whose ``type`` names the class and whose other keys are its
fields; :func:`encode` and :func:`decode` are the only ways in and out.

Primary to standby: a :class:`Challenge` (first), :class:`StandbyWelcome` or a refusal
(:class:`Refused`, :class:`NotPrimary`), then a :class:`FullState` and a :class:`TickRecord`
per tick, and the commit set's news: :class:`InSync` (waited for from now on) and
:class:`OutOfSync`.
Standby to primary: :class:`Hello` (once: the answer to the challenge), :class:`Ack` (per
record), :class:`Resync` (a gap, a hash mismatch or an :class:`OutOfSync`: send a full
state; the standby is no longer eligible for promotion), :class:`Fenced` (to a deposed
primary).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any, ClassVar

import msgpack

from shared.schema import MAX_EPOCH, MessageError, integer, text

__all__ = [
    "Ack",
    "Challenge",
    "ConfigFingerprint",
    "Fenced",
    "FullState",
    "Hello",
    "InSync",
    "MatchState",
    "Message",
    "MessageError",
    "NotPrimary",
    "OutOfSync",
    "Refused",
    "Resync",
    "StandbyWelcome",
    "TickRecord",
    "decode",
    "encode",
]


# The fields' checks, in the vocabulary every message family shares (shared/schema.py).
_COUNT = integer(0, MAX_EPOCH)  # ticks, epochs, counters: what msgpack's int64 holds
_SIZE = integer(1, MAX_EPOCH)
_TICK_OR_NONE = integer(-1, MAX_EPOCH)
_NAME = text(min_len=1)
_TEXT = text()


@dataclass(frozen=True, slots=True)
class ConfigFingerprint:
    """What two nodes must share for one to replicate the other."""

    matches: int
    tick_rate: int
    max_players: int
    history_snapshots: int
    map: str
    snapshot_interval: int = 1  # ticks between snapshots: a promoted standby keeps the cadence

    def __post_init__(self) -> None:
        names = ("matches", "tick_rate", "max_players", "history_snapshots", "snapshot_interval")
        for name in names:
            _SIZE(f"fingerprint {name}", getattr(self, name))
        _NAME("fingerprint map", self.map)


#: A challenge's nonce: 32 random bytes as hex.
NONCE_CHARS = 64
_HEX_DIGITS = frozenset("0123456789abcdef")


@dataclass(frozen=True, slots=True)
class Challenge:
    """The primary's first message on a link: the nonce the standby's hello must sign (a
    new one per link, so a hello recorded on one link is refused on every other)."""

    TYPE: ClassVar[str] = "challenge"
    nonce: str

    def __post_init__(self) -> None:
        if (
            not isinstance(self.nonce, str)
            or len(self.nonce) != NONCE_CHARS
            or not set(self.nonce) <= _HEX_DIGITS
        ):
            raise MessageError(f"challenge nonce must be {NONCE_CHARS} lowercase hex digits")


@dataclass(frozen=True, slots=True)
class Hello:
    """A standby's answer to a :class:`Challenge`; ``mac`` signs every other field and the
    challenge's nonce (``server/replication/auth.py``)."""

    TYPE: ClassVar[str] = "hello"
    node: str
    epoch: int
    tick: int
    fingerprint: ConfigFingerprint
    url: str  # where players reach this standby (announced to them), "" when unknown
    mac: str
    #: The standby's promise: it campaigns only after this many seconds without a record
    #: since its last acknowledgement (the primary's lease from it is shorter); 0: unknown.
    promise: float = 0.0

    def __post_init__(self) -> None:
        _NAME("hello node", self.node)
        _COUNT("hello epoch", self.epoch)
        _COUNT("hello tick", self.tick)
        if not isinstance(self.fingerprint, ConfigFingerprint):
            raise MessageError("hello fingerprint must be a configuration fingerprint")
        _TEXT("hello url", self.url)
        _NAME("hello mac", self.mac)
        if not isinstance(self.promise, float) or not 0.0 <= self.promise < 3600.0:
            raise MessageError("hello promise must be a float of seconds")


@dataclass(frozen=True, slots=True)
class StandbyWelcome:
    TYPE: ClassVar[str] = "welcome_standby"
    node: str

    def __post_init__(self) -> None:
        _NAME("welcome node", self.node)


@dataclass(frozen=True, slots=True)
class Refused:
    """The primary will not serve this standby: ``unauthenticated`` or ``config_mismatch``."""

    TYPE: ClassVar[str] = "error"
    code: str

    def __post_init__(self) -> None:
        _NAME("refusal code", self.code)


@dataclass(frozen=True, slots=True)
class NotPrimary:
    TYPE: ClassVar[str] = "not_primary"
    epoch: int

    def __post_init__(self) -> None:
        _COUNT("not_primary epoch", self.epoch)


@dataclass(frozen=True, slots=True)
class Ack:
    TYPE: ClassVar[str] = "ack"
    tick: int

    def __post_init__(self) -> None:
        _COUNT("ack tick", self.tick)


@dataclass(frozen=True, slots=True)
class Resync:
    TYPE: ClassVar[str] = "resync"


@dataclass(frozen=True, slots=True)
class Fenced:
    """A newer epoch exists: a deposed primary that hears this steps down."""

    TYPE: ClassVar[str] = "fenced"
    epoch: int

    def __post_init__(self) -> None:
        _COUNT("fenced epoch", self.epoch)


@dataclass(frozen=True, slots=True)
class InSync:
    """The primary waits for this standby from ``tick`` on: it holds every tick shown so far,
    so from now on it may be promoted (``docs/failover.md``, the commit set)."""

    TYPE: ClassVar[str] = "in_sync"
    tick: int

    def __post_init__(self) -> None:
        _COUNT("in_sync tick", self.tick)


@dataclass(frozen=True, slots=True)
class OutOfSync:
    """The standby missed the acknowledgement bound at ``tick``: the primary goes on without
    it once it has answered (with a :class:`Resync`), and it may not be promoted until it
    is in sync again."""

    TYPE: ClassVar[str] = "out_of_sync"
    tick: int

    def __post_init__(self) -> None:
        _COUNT("out_of_sync tick", self.tick)


def _seat_row(row: Any) -> bool:
    def number(value: Any) -> bool:
        return isinstance(value, (int, float)) and not isinstance(value, bool)

    return (
        isinstance(row, list)
        and len(row) == 10
        and isinstance(row[5], list)
        and len(row[5]) == 6
        and all(number(v) for v in (*row[5], row[6], row[7]))
        and all(isinstance(v, int) and not isinstance(v, bool) for v in row[8:])
    )


@dataclass(frozen=True, slots=True)
class MatchState:
    """One match after a tick, as its components export it: the tick it follows
    (``after``: the primary's previous tick, -1 for none; ticks a stall skipped lie
    between), the world's and combat's state, the seats (``[slot, name, interp_delay,
    acked, guessed, before_guesses, rtt, spread, credit, surplus]``), the tick's events,
    the join counter, the world's hash; and, in a full state only, the history ring."""

    tick: int
    after: int
    world: Mapping[str, bytes]
    combat: Mapping[str, Any]
    seats: list[list[Any]]
    joins: int
    events: list[dict[str, Any]]
    hash: str
    history: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        _COUNT("match tick", self.tick)
        _TICK_OR_NONE("match after", self.after)
        if self.after >= self.tick:
            raise MessageError(f"match tick {self.tick} cannot follow tick {self.after}")
        _COUNT("match joins", self.joins)
        for name in ("world", "combat") + (("history",) if self.history is not None else ()):
            if not isinstance(getattr(self, name), Mapping):
                raise MessageError(f"match {name} must be a map")
        if not isinstance(self.seats, list) or not all(_seat_row(row) for row in self.seats):
            raise MessageError(
                "match seats must be [slot, name, interp_delay, acked, guessed, "
                "before_guesses (6 numbers), rtt, spread, credit, surplus] rows"
            )
        if not isinstance(self.events, list) or not all(isinstance(e, dict) for e in self.events):
            raise MessageError("match events must be a list of maps")
        _NAME("match hash", self.hash)


@dataclass(frozen=True, slots=True)
class _NodeRecord:
    epoch: int
    tick: int
    matches: tuple[MatchState, ...]

    def __post_init__(self) -> None:
        _COUNT("record epoch", self.epoch)
        _COUNT("record tick", self.tick)
        if not self.matches or not all(isinstance(m, MatchState) for m in self.matches):
            raise MessageError("a record holds one state per match")


@dataclass(frozen=True, slots=True)
class TickRecord(_NodeRecord):
    """Every match of a node after one tick (no history: the standby appends its own)."""

    TYPE: ClassVar[str] = "ticks"

    def __post_init__(self) -> None:
        _NodeRecord.__post_init__(self)
        if any(m.history is not None for m in self.matches):
            raise MessageError("a tick record carries no history")


@dataclass(frozen=True, slots=True)
class FullState(_NodeRecord):
    """Every match of a node with its history: what a joining standby starts from."""

    TYPE: ClassVar[str] = "fulls"

    def __post_init__(self) -> None:
        _NodeRecord.__post_init__(self)
        if any(m.history is None for m in self.matches):
            raise MessageError("a full state carries every match's history")


Message = (
    Challenge
    | Hello
    | StandbyWelcome
    | Refused
    | NotPrimary
    | Ack
    | Resync
    | Fenced
    | InSync
    | OutOfSync
    | TickRecord
    | FullState
)
_CLASSES: dict[str, type[Any]] = {
    cls.TYPE: cls
    for cls in (Challenge, Hello, StandbyWelcome, Refused, NotPrimary, Ack, Resync, Fenced,
                InSync, OutOfSync, TickRecord, FullState)
}  # fmt: skip


def encode(message: Message) -> bytes:
    """The message as msgpack: ``{"type": ..., field: value, ...}``."""
    if isinstance(message, TickRecord | FullState):
        body: dict[str, Any] = {
            "epoch": message.epoch,
            "tick": message.tick,
            "matches": [_match_wire(m) for m in message.matches],
        }
    else:
        body = asdict(message)
    return msgpack.packb({"type": message.TYPE, **body}, use_bin_type=True)


def _match_wire(match: MatchState) -> dict[str, Any]:
    wire = {f.name: getattr(match, f.name) for f in fields(match)}
    if match.history is None:
        del wire["history"]
    return wire


def decode(data: bytes) -> Message:
    """A replication message from msgpack; :class:`MessageError` for anything else."""
    try:
        raw = msgpack.unpackb(data, raw=False)
    except Exception:  # garbage from a peer
        raise MessageError("not msgpack") from None
    if not isinstance(raw, dict):
        raise MessageError("not a map")
    cls = _CLASSES.get(raw.pop("type", None))
    if cls is None:
        raise MessageError("no known message type")
    try:
        if cls in (TickRecord, FullState):
            matches = raw.pop("matches", None)
            if not isinstance(matches, list) or not all(isinstance(m, dict) for m in matches):
                raise MessageError("matches must be a list of maps")
            return cls(**raw, matches=tuple(MatchState(**m) for m in matches))
        if cls is Hello:
            fingerprint = raw.pop("fingerprint", None)
            if not isinstance(fingerprint, dict):
                raise MessageError("hello fingerprint must be a map")
            return Hello(**raw, fingerprint=ConfigFingerprint(**fingerprint))
        return cls(**raw)
    except TypeError as error:  # missing or unknown fields
        raise MessageError(f"{cls.TYPE}: {error}") from None
