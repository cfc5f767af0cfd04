"""Fuzzed client messages: every kind of malformed frame an independent client
sent (random bytes, truncated msgpack, wrong types, huge integers, NaN and infinities,
deep nesting, oversize frames, unknown types, missing and extra fields), each made from
the protocol's own messages with one thing spoiled, so that none is valid by accident.
Pure functions of a seeded :class:`random.Random`: the same seed, the same frames.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from typing import Any

import msgpack

from shared import protocol
from shared.wsframe import OP_BINARY, OP_TEXT

__all__ = ["FUZZ_KINDS", "MAX_MESSAGE_BYTES", "fuzz_frame"]

MAX_MESSAGE_BYTES = 1 << 16  # the node's WebSocket limit: a larger message is closed with 1009

#: One valid message of each client type: what every spoiled message starts from.
_TEMPLATES: tuple[dict[str, Any], ...] = (
    {"type": "join", "v": protocol.PROTOCOL_VERSION, "name": "fz", "token": None,
     "interp_delay": 0.1},
    {"type": "input", "seq": 1, "tick": 1, "ack_tick": 0, "move": [0.0, 0.0], "yaw": 0.0,
     "pitch": 0.0, "buttons": 0, "view_time": 0.0},
    {"type": "ping", "id": 1, "t": 0.0},
    {"type": "probe_echo", "id": 1},
)  # fmt: skip
#: Values of the wrong type for each kind of field (a string, a list of two numbers, a
#: number, an optional string): none of them passes that field's check.
_WRONG_NUMBER = ("x", [1, 2], {"a": 1}, None, b"\x00", True)
_WRONG_TEXT = (5, 2.5, [1], {"a": 1}, b"\x00", False)
_WRONG_PAIR = ("x", None, 5, [1.0], [1.0, 2.0, 3.0], ["a", "b"], {"a": 1})
#: Integers outside the range of every integer field of input, ping and probe_echo.
_HUGE = (2**64 - 1, -(2**63), 2**53 + 1, -(2**53) - 1)
_NON_FINITE = (math.nan, math.inf, -math.inf)


def _packed(value: object) -> bytes:
    return msgpack.packb(value, use_bin_type=True)


def _wrong_for(value: object, rng: random.Random) -> object:
    if isinstance(value, str) or value is None:  # join.name, join.token
        return rng.choice(_WRONG_TEXT)
    if isinstance(value, list):  # input.move
        return rng.choice(_WRONG_PAIR)
    return rng.choice(_WRONG_NUMBER)


def _fuzz_random(rng: random.Random) -> bytes:
    return rng.randbytes(rng.randint(1, 200))


def _fuzz_truncated(rng: random.Random) -> bytes:
    whole = _packed(dict(rng.choice(_TEMPLATES)))
    return whole[: rng.randint(1, len(whole) - 1)]


def _fuzz_wrong_type(rng: random.Random) -> bytes:
    message = dict(rng.choice(_TEMPLATES))
    name = rng.choice([key for key in message if key != "type"])
    message[name] = _wrong_for(message[name], rng)
    return _packed(message)


def _fuzz_huge_int(rng: random.Random) -> bytes:
    message = dict(rng.choice(_TEMPLATES[1:]))  # every field of input/ping/probe_echo is numeric
    ints = [k for k, v in message.items() if isinstance(v, int) and not isinstance(v, bool)]
    message[rng.choice(ints)] = rng.choice(_HUGE)
    return _packed(message)


def _fuzz_non_finite(rng: random.Random) -> bytes:
    message = dict(_TEMPLATES[1]) if rng.random() < 0.8 else dict(_TEMPLATES[2])
    floats = [k for k, v in message.items() if isinstance(v, float | list)]
    name = rng.choice(floats)
    bad = rng.choice(_NON_FINITE)
    message[name] = [bad, 0.0] if isinstance(message[name], list) else bad
    return _packed(message)


def _fuzz_deep(rng: random.Random) -> bytes:
    """Arrays or maps nested hundreds deep, alone or as an input's ``move``."""
    depth = rng.randint(50, 900)
    nest = b"\x91" if rng.random() < 0.5 else b"\x81\xa1a"  # [x] or {"a": x}
    inner = nest * (depth // len(nest)) + b"\xc0"
    if rng.random() < 0.5:
        return inner  # not a map at all
    return b"\x82" + _packed("type") + _packed("input") + _packed("move") + inner


def _fuzz_oversize(rng: random.Random) -> bytes:
    return _packed({"type": "ping", "id": 1, "t": 0.0, "pad": "x" * rng.randint(1100, 8000)})


def _fuzz_unknown_type(rng: random.Random) -> bytes:
    kind = rng.choice(["snapshot", "welcome", "pong", "", "JOIN", "input ", "x" * 40, 7, None])
    return _packed({"type": kind, "id": 1})


def _fuzz_missing(rng: random.Random) -> bytes:
    message = dict(rng.choice(_TEMPLATES))
    optional = ("name", "token", "interp_delay")  # join's, with defaults
    del message[rng.choice([key for key in message if key not in ("type", *optional)])]
    if rng.random() < 0.3:
        del message["type"]
    return _packed(message)


def _fuzz_extra(rng: random.Random) -> bytes:
    message = dict(rng.choice(_TEMPLATES))
    message[rng.choice(["x", "pos", "health", "seq2", "Type"])] = rng.choice([1, 0.5, "y"])
    return _packed(message)


def _fuzz_not_a_map(rng: random.Random) -> bytes:
    return _packed(rng.choice([1, "join", [1, 2, 3], None, 2.5, b"bin", []]))


def _fuzz_empty(rng: random.Random) -> bytes:
    return b""


#: What each kind of fuzzed payload is (binary frames, except ``text``), by name.
FUZZ_KINDS: dict[str, Callable[[random.Random], bytes]] = {
    "random_bytes": _fuzz_random,
    "truncated": _fuzz_truncated,
    "wrong_type": _fuzz_wrong_type,
    "huge_int": _fuzz_huge_int,
    "non_finite": _fuzz_non_finite,
    "deep_nesting": _fuzz_deep,
    "oversize": _fuzz_oversize,  # over 1024 bytes: frame_too_large
    "unknown_type": _fuzz_unknown_type,
    "missing_field": _fuzz_missing,
    "extra_field": _fuzz_extra,
    "not_a_map": _fuzz_not_a_map,
    "empty": _fuzz_empty,
    "text": lambda rng: b'{"type": "ping"}',
}


def fuzz_frame(rng: random.Random, giant: bool = False) -> tuple[str, int, bytes]:
    """One fuzzed message: (kind, opcode, payload). ``giant``: sometimes a message over the
    node's 64 KiB limit (closed with 1009, no error)."""
    if giant and rng.random() < 0.05:
        return "giant", OP_BINARY, rng.randbytes(MAX_MESSAGE_BYTES + rng.randint(1, 1000))
    kind = rng.choice(list(FUZZ_KINDS))
    return kind, OP_TEXT if kind == "text" else OP_BINARY, FUZZ_KINDS[kind](rng)
