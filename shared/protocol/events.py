"""What happened during a tick, as the snapshot tells every client: defined once.

A snapshot's ``events`` is a list of maps, each with a ``kind``: a player joined, left or
respawned, or a shot was judged. The node builds these classes, the bots read them; on the
wire each is its fields plus ``kind``. Decoding is strict like the rest of the protocol
(an unknown kind, a missing or extra field, a wrong type is :class:`InvalidField`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from shared import schema
from shared.protocol.errors import InvalidField, as_protocol_error
from shared.protocol.fields import U32_MAX
from shared.schema import (
    WireType,
    described,
    flag,
    integer,
    number,
    numbers,
    text,
)

__all__ = [
    "JUDGEMENTS",
    "SHOT_RESULTS",
    "JoinEvent",
    "LeaveEvent",
    "RespawnEvent",
    "ShotEvent",
    "ShotResult",
    "SnapshotEvent",
    "decode_event",
    "encode_event",
]

ShotResult = Literal["hit", "miss", "world", "rejected"]
#: ``hit``: a player (``victim``, ``hitbox``); ``world``: cover; ``miss``: nothing;
#: ``rejected``: the shooter was dead at the time it fired.
SHOT_RESULTS: tuple[ShotResult, ...] = ("hit", "miss", "world", "rejected")

Judged = Literal["claimed", "clamped", "capped"]
#: How the server chose the moment it judged a shot in (``docs/lag-compensation.md``):
#: ``claimed``: the shooter's own view time; ``clamped``: the nearest time the shooter could
#: have seen (its claim was outside that); ``capped``: the oldest the rewind cap allows.
JUDGEMENTS: tuple[Judged, ...] = ("claimed", "clamped", "capped")

_PLAYER = integer(0, 65535)


@dataclass(frozen=True, slots=True)
class _Event:
    KIND: ClassVar[str] = ""
    FIELDS: ClassVar[dict[str, Callable[[str, object], Any]]] = {}

    def __post_init__(self) -> None:
        for name, check in self.FIELDS.items():
            value = getattr(self, name)
            try:
                normalised = check(f"event {self.KIND}.{name}", value)
            except schema.InvalidField as error:
                raise as_protocol_error(error) from None
            if normalised is not value:
                object.__setattr__(self, name, normalised)

    def names(self, player: int) -> bool:
        """Whether this event concerns ``player`` (so that bot reads it)."""
        return False


@dataclass(frozen=True, slots=True)
class JoinEvent(_Event):
    KIND = "join"
    FIELDS = {"player": _PLAYER}
    player: int

    def names(self, player: int) -> bool:
        return self.player == player


@dataclass(frozen=True, slots=True)
class LeaveEvent(_Event):
    KIND = "leave"
    FIELDS = {"player": _PLAYER}
    player: int

    def names(self, player: int) -> bool:
        return self.player == player


@dataclass(frozen=True, slots=True)
class RespawnEvent(_Event):
    """A dead player is back at a spawn point with full health."""

    KIND = "respawn"
    FIELDS = {"player": _PLAYER}
    player: int

    def names(self, player: int) -> bool:
        return self.player == player


def _one_of(choices: tuple[str, ...]) -> Callable[[str, object], str]:
    def check(name: str, value: object) -> str:
        if value not in choices:
            raise InvalidField(f"{name}: expected one of {', '.join(choices)}")
        return str(value)

    return described(check, WireType("str", choices=choices))


@dataclass(frozen=True, slots=True)
class ShotEvent(_Event):
    """A shot judged: the shooter's ``seq`` of the input that fired with ``weapon``, what it
    hit in the world at ``view_time`` (server time), and the damage done (0 when the victim
    was already dead in the tick's ordered story). ``judged`` says how ``view_time`` was
    chosen (:data:`JUDGEMENTS`), ``origin`` where the shot left the shooter's eye and
    ``shooter_rtt`` the server's estimate of the shooter's round trip (seconds, -1 for
    none): what a client needs to tell why its own verdict differed."""

    KIND = "shot"
    FIELDS = {
        "shooter": _PLAYER,
        "seq": integer(0, U32_MAX),
        "weapon": integer(0, 255),
        "result": _one_of(SHOT_RESULTS),
        "victim": integer(-1, 65535),
        "hitbox": integer(0, 255),
        "damage": integer(0, 65535),
        "kill": flag,
        "view_time": number(),
        "judged": _one_of(JUDGEMENTS),
        "origin": numbers(3, 1e6),
        "shooter_rtt": number(-1.0, 60.0),
        "tick": integer(-1, U32_MAX),
        "traded": flag,
    }
    shooter: int
    seq: int
    weapon: int
    result: ShotResult
    view_time: float
    victim: int = -1
    hitbox: int = 0
    damage: int = 0
    kill: bool = False
    judged: Judged = "claimed"
    origin: tuple[float, float, float] = (0.0, 0.0, 0.0)
    shooter_rtt: float = -1.0
    #: The tick that judged it (-1: not said). A snapshot tells the events of every tick
    #: since the last one: a client that sees a player dead in a snapshot learns here
    #: whether the kill came in the snapshot's own tick or before it.
    tick: int = -1
    #: The shooter had been killed before the input that fired was applied, and the shot
    #: counts anyway (its view time came before that death, as its shooter saw the world
    #: when it fired: a trade): a dead player does not move, so it left from where the
    #: shooter fell, not from where its client, not yet told, had moved it on.
    traded: bool = False

    def names(self, player: int) -> bool:
        return self.shooter == player or self.victim == player


SnapshotEvent = JoinEvent | LeaveEvent | RespawnEvent | ShotEvent
_KINDS: dict[str, type[_Event]] = {
    cls.KIND: cls for cls in (JoinEvent, LeaveEvent, RespawnEvent, ShotEvent)
}
_KIND_TEXT = text(16)


def encode_event(event: SnapshotEvent) -> dict[str, Any]:
    """The event as a msgpack-ready map: ``kind`` first, then its fields."""
    return {"kind": event.KIND, **{name: getattr(event, name) for name in event.FIELDS}}


def decode_event(raw: object) -> SnapshotEvent:
    """An event from its map; :class:`InvalidField` for anything else."""
    if not isinstance(raw, dict):
        raise InvalidField("snapshot.events: expected a map")
    fields = dict(raw)
    try:
        kind = _KIND_TEXT("event kind", fields.pop("kind", None))
    except schema.InvalidField as error:
        raise as_protocol_error(error) from None
    cls = _KINDS.get(kind)
    if cls is None:
        raise InvalidField(f"snapshot.events: unknown kind {kind[:16]!r}")
    extra = fields.keys() - cls.FIELDS.keys()
    if extra:
        raise InvalidField(f"event {kind}: unexpected field {sorted(map(str, extra))[0][:32]!r}")
    try:
        return cls(**fields)  # type: ignore[return-value]
    except TypeError:
        required = [f.name for f in dataclasses.fields(cls) if f.default is dataclasses.MISSING]
        missing = [name for name in required if name not in fields]
        first = missing[0] if missing else "?"
        raise InvalidField(f"event {kind}: missing field {first!r}") from None
