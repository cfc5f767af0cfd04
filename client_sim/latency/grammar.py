"""The ``--latency`` grammar: a tokenizer and a recursive-descent parser (sans-I/O).

A spec names the distribution of each bot's *base round-trip time* (the propagation floor of
its path); the same grammar, signed, gives the distribution of clock offsets, and single
durations for the CLI's scalar flags. See ``docs/latency.md`` and :data:`HELP_TEXT`.

The parser is hand-written so that every mistake is reported as one line that names the
problem and its column (:class:`LatencySpecError`), and nothing is ever evaluated.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from client_sim.latency.distributions import (
    Constant,
    Distribution,
    FieldError,
    LogNormal,
    Mix,
    Normal,
    Uniform,
    format_duration,
)

__all__ = [
    "DEFAULT_FLOOR",
    "HELP_TEXT",
    "MAX_DURATION_S",
    "LatencySpecError",
    "parse_distribution",
    "parse_duration",
]

#: Where ``normal(...)`` round-trip times are truncated unless the spec sets ``min=``.
DEFAULT_FLOOR = 0.001

#: The longest delay the grammar takes: a link's delays are milliseconds to seconds, and a
#: value like 1e308 s would only overflow the delay lines.
MAX_DURATION_S = 60.0


class LatencySpecError(ValueError):
    """A spec the user wrote is malformed; the message is one line, fit to print as is."""


# --------------------------------------------------------------------------------------------
# Tokenizer

_DIGITS = "0123456789"
_PUNCT = "(),=*"
_FORMS = ("constant", "uniform", "normal", "lognormal", "mix")
_FORMS_TEXT = "constant, uniform, normal, lognormal or mix"

_DURATION = "duration"
_NUMBER = "number"

# Parameters of each form, in positional order: (grammar name, kind, required).
_PARAMS: dict[str, tuple[tuple[str, str, bool], ...]] = {
    "constant": (("value", _DURATION, True),),
    "uniform": (("min", _DURATION, True), ("max", _DURATION, True)),
    "normal": (("mean", _DURATION, True), ("sd", _DURATION, True), ("min", _DURATION, False)),
    "lognormal": (("median", _DURATION, True), ("sigma", _NUMBER, True)),
}


@dataclass(frozen=True, slots=True)
class _Token:
    kind: str  # "number", "name", "punct" or "end"
    text: str
    col: int  # 1-based character position in the spec

    def shown(self) -> str:
        if self.kind == "end":
            return "end of spec"
        text = self.text if len(self.text) <= 24 else self.text[:21] + "..."
        return repr(text)


def _is_name_start(c: str) -> bool:
    return c.isascii() and (c.isalpha() or c == "_")


def _is_name_char(c: str) -> bool:
    return c.isascii() and (c.isalnum() or c == "_")


def _tokenize(text: str, label: str) -> list[_Token]:
    tokens: list[_Token] = []
    i, n = 0, len(text)

    def digits_at(j: int) -> bool:
        return j < n and text[j] in _DIGITS

    while i < n:
        c = text[i]
        if c.isspace():
            i += 1
            continue
        start = i
        if c in _PUNCT:
            tokens.append(_Token("punct", c, i + 1))
            i += 1
        elif c in _DIGITS or c in ".+-":
            j = i + 1 if c in "+-" else i
            mantissa = j
            while digits_at(j):
                j += 1
            if j < n and text[j] == ".":
                j += 1
                while digits_at(j):
                    j += 1
            if not any(ch in _DIGITS for ch in text[mantissa:j]):
                raise LatencySpecError(
                    f"{label}: unexpected character {c!r} at column {i + 1}; "
                    "expected a number like 80 or 0.4"
                )
            if j < n and text[j] in "eE":
                k = j + 1
                if k < n and text[k] in "+-":
                    k += 1
                if digits_at(k):
                    j = k
                    while digits_at(j):
                        j += 1
            tokens.append(_Token("number", text[start:j], start + 1))
            i = j
        elif _is_name_start(c):
            j = i + 1
            while j < n and _is_name_char(text[j]):
                j += 1
            tokens.append(_Token("name", text[start:j], start + 1))
            i = j
        else:
            raise LatencySpecError(f"{label}: unexpected character {c!r} at column {i + 1}")
    tokens.append(_Token("end", "", n + 1))
    return tokens


# --------------------------------------------------------------------------------------------
# Parser


class _Parser:
    """Recursive descent over the token list; ``signed`` allows values <= 0 (clock offsets)."""

    def __init__(self, text: str, label: str, signed: bool) -> None:
        self.label = label
        self.signed = signed
        self.tokens = _tokenize(text, label)
        self.pos = 0

    # -- helpers

    def error(self, problem: str, col: int | None = None, hint: str = "") -> LatencySpecError:
        where = f" at column {col}" if col is not None else ""
        tail = f"; {hint}" if hint else ""
        return LatencySpecError(f"{self.label}: {problem}{where}{tail}")

    def peek(self, ahead: int = 0) -> _Token:
        return self.tokens[min(self.pos + ahead, len(self.tokens) - 1)]

    def take(self) -> _Token:
        tok = self.peek()
        if tok.kind != "end":
            self.pos += 1
        return tok

    def is_punct(self, text: str, ahead: int = 0) -> bool:
        tok = self.peek(ahead)
        return tok.kind == "punct" and tok.text == text

    def expect_punct(self, text: str, after: str) -> _Token:
        tok = self.peek()
        if not self.is_punct(text):
            raise self.error(f"expected '{text}' {after}, got {tok.shown()}", tok.col)
        return self.take()

    def number(self, tok: _Token) -> float:
        value = float(tok.text)
        if not math.isfinite(value):
            raise self.error(f"number {tok.shown()} is out of range", tok.col)
        return value

    # -- grammar

    def spec(self) -> Distribution:
        if self.peek().kind == "end":
            raise self.error(
                "empty spec",
                hint="expected a duration like 80ms or a distribution like "
                "lognormal(median=40ms, sigma=0.4)",
            )
        dist = self.distribution(in_mix=False)
        tok = self.peek()
        if tok.kind != "end":
            raise self.error(f"unexpected {tok.shown()} after the end of the spec", tok.col)
        return dist

    def duration(self, what: str) -> tuple[float, int]:
        """NUMBER [UNIT]; a bare number means milliseconds."""
        tok = self.peek()
        if tok.kind != "number":
            raise self.error(
                f"expected a duration for {what}, got {tok.shown()}",
                tok.col,
                "write it like 80ms or 0.08s",
            )
        self.take()
        number = self.number(tok)
        value = number / 1000.0  # a bare number: milliseconds
        unit = self.peek()
        if unit.kind == "name":
            self.take()
            name = unit.text.lower()
            if name == "s":
                value = number
            elif name != "ms":
                raise self.error(f"unknown unit {unit.shown()}", unit.col, "expected ms or s")
        if abs(value) > MAX_DURATION_S:
            raise self.error(
                f"{format_duration(value)} is longer than {MAX_DURATION_S:g} s",
                tok.col,
                "a link's delays are milliseconds to seconds",
            )
        return value, tok.col

    def plain_number(self, what: str) -> tuple[float, int]:
        tok = self.peek()
        if tok.kind != "number":
            raise self.error(f"expected a number for {what}, got {tok.shown()}", tok.col)
        self.take()
        unit = self.peek()
        if unit.kind == "name":
            raise self.error(
                f"{what} is dimensionless but has a unit {unit.shown()}",
                unit.col,
                "remove the unit",
            )
        return self.number(tok), tok.col

    def distribution(self, in_mix: bool) -> Distribution:
        tok = self.peek()
        if tok.kind == "number":
            value, col = self.duration("the round-trip time")
            self.require_positive("constant", value, col)
            return self.build("constant", Constant, {"value": (value, col)}, col)
        if tok.kind != "name":
            raise self.error(
                f"expected a duration or a distribution, got {tok.shown()}",
                tok.col,
                f"expected a duration like 80ms or one of {_FORMS_TEXT}",
            )
        name = tok.text.lower()
        if name not in _FORMS:
            raise self.error(
                f"unknown distribution {tok.shown()}", tok.col, f"expected {_FORMS_TEXT}"
            )
        self.take()
        if name == "mix" and in_mix:
            raise self.error("a mix cannot contain a mix", tok.col, "flatten it into one mix")
        self.expect_punct("(", f"after '{name}'")
        if name == "mix":
            return self.mix(tok)
        return self.call(name, tok)

    def call(self, name: str, name_tok: _Token) -> Distribution:
        params = _PARAMS[name]
        known = {p[0]: p for p in params}
        args: dict[str, tuple[float, int]] = {}
        positional = 0
        keywords = False
        signature = ", ".join(p[0] for p in params)
        if self.is_punct(")"):
            self.take()
        else:
            while True:
                tok = self.peek()
                if tok.kind == "name" and self.is_punct("=", 1):
                    key = tok.text.lower()
                    if key not in known:
                        raise self.error(
                            f"unknown argument {tok.shown()} for {name}",
                            tok.col,
                            f"expected {signature}",
                        )
                    self.take()
                    self.take()
                    keywords = True
                else:
                    if keywords:
                        raise self.error(
                            f"positional argument after keyword arguments in {name}", tok.col
                        )
                    if positional >= len(params):
                        raise self.error(
                            f"too many arguments for {name}", tok.col, f"it takes {signature}"
                        )
                    key = params[positional][0]
                    positional += 1
                if key in args:
                    raise self.error(f"argument '{key}' of {name} given twice", tok.col)
                what = f"{name} {key}"
                if known[key][1] == _DURATION:
                    args[key] = self.duration(what)
                else:
                    args[key] = self.plain_number(what)
                if self.is_punct(","):
                    self.take()
                    continue
                if self.is_punct(")"):
                    self.take()
                    break
                nxt = self.peek()
                raise self.error(f"expected ',' or ')' in {name}(...), got {nxt.shown()}", nxt.col)
        for key, _kind, required in params:
            if required and key not in args:
                raise self.error(
                    f"missing argument '{key}' for {name}", name_tok.col, f"it takes {signature}"
                )
        col = name_tok.col
        if name == "constant":
            self.require_positive("constant", *args["value"])
            return self.build(name, Constant, args, col)
        if name == "uniform":
            self.require_positive("uniform min", *args["min"])
            return self.build(name, Uniform, args, col, low="min", high="max")
        if name == "normal":
            if "min" in args:
                self.require_positive("normal min", *args["min"])
            elif not self.signed:
                mean, mean_col = args["mean"]
                if mean <= DEFAULT_FLOOR:
                    raise self.error(
                        f"normal mean {format_duration(mean)} must be greater than "
                        f"the default floor min={format_duration(DEFAULT_FLOOR)}",
                        mean_col,
                        "round-trip times are truncated there unless you set min",
                    )
                args["min"] = (DEFAULT_FLOOR, col)
            return self.build(name, Normal, args, col, mean="mean", sd="sd", floor="min")
        return self.build(name, LogNormal, args, col, median="median", sigma="sigma")

    def require_positive(self, what: str, value: float, col: int) -> None:
        if not self.signed and value <= 0:
            raise self.error(
                f"{what} must be > 0 for a round-trip time, got {format_duration(value)}", col
            )

    def build(
        self,
        name: str,
        cls: type[Distribution],
        args: dict[str, tuple[float, int]],
        col: int,
        **fields: str,
    ) -> Distribution:
        """Construct ``cls``, turning its validation error into one positioned line."""
        if not fields:
            fields = {"value": "value"}
        kwargs = {attr: args[key][0] for attr, key in fields.items() if key in args}
        try:
            return cls(**kwargs)
        except FieldError as exc:
            where = args[exc.field][1] if exc.field in args else col
            raise self.error(str(exc), where) from None

    def mix(self, name_tok: _Token) -> Distribution:
        components: list[tuple[float, Distribution]] = []
        if self.is_punct(")"):
            raise self.error(
                "empty mix", name_tok.col, "write it like mix(0.6*80ms, 0.4*uniform(100ms,200ms))"
            )
        while True:
            tok = self.peek()
            if tok.kind != "number":
                raise self.error(
                    f"expected a weight before the mix component, got {tok.shown()}",
                    tok.col,
                    "write each component as WEIGHT*DISTRIBUTION, like 0.6*lognormal(...)",
                )
            self.take()
            weight = self.number(tok)
            if weight <= 0:
                raise self.error(f"mix weight must be > 0, got {tok.shown()}", tok.col)
            self.expect_punct("*", "after the mix weight")
            components.append((weight, self.distribution(in_mix=True)))
            if self.is_punct(","):
                self.take()
                continue
            if self.is_punct(")"):
                self.take()
                break
            nxt = self.peek()
            raise self.error(f"expected ',' or ')' in mix(...), got {nxt.shown()}", nxt.col)
        return Mix(tuple(components))


def parse_distribution(
    text: str, *, signed: bool = False, label: str = "latency spec"
) -> Distribution:
    """Parse a spec; raise :class:`LatencySpecError` (one line, with a column) if it is bad.

    ``signed=False`` (round-trip times) rejects anything that could draw a value <= 0 and
    truncates ``normal`` at :data:`DEFAULT_FLOOR` unless ``min=`` is given. ``signed=True``
    (clock offsets) allows negative values and leaves ``normal`` untruncated. ``label``
    starts the error message, e.g. ``"clock offset spec"``.
    """
    if not isinstance(text, str):
        raise TypeError(f"spec must be a str, got {type(text).__name__}")
    return _Parser(text, label, signed).spec()


def parse_duration(text: str, *, signed: bool = False, label: str = "duration") -> float:
    """Parse one duration like ``2ms``, ``0.5s`` or ``3`` (ms) into seconds.

    One duration as the specs write them (a bare number is milliseconds); ``signed=False``
    rejects values < 0. The commands' duration flags use :mod:`shared.commandline`.
    """
    if not isinstance(text, str):
        raise TypeError(f"duration must be a str, got {type(text).__name__}")
    parser = _Parser(text, label, signed)
    if parser.peek().kind == "end":
        raise parser.error("empty duration", hint="write it like 2ms or 0.5s")
    value, col = parser.duration(label)
    tok = parser.peek()
    if tok.kind != "end":
        raise parser.error(f"unexpected {tok.shown()} after the duration", tok.col)
    if not signed and value < 0:
        raise parser.error(f"must be >= 0, got {format_duration(value)}", col)
    return value


HELP_TEXT = """\
latency specs (--latency: each bot's base round-trip time):
  80ms | 0.08s | 80              constant; a bare number means milliseconds
  constant(80ms)
  uniform(20ms, 120ms)           also uniform(min=20ms, max=120ms)
  normal(mean=80ms, sd=15ms)     redrawn below min (default min=1ms)
  lognormal(median=40ms, sigma=0.4)
                                 sigma is the sd of log(RTT), dimensionless
  mix(0.6*lognormal(median=40ms, sigma=0.4), 0.4*lognormal(median=140ms, sigma=0.3))
                                 weights must be > 0 and are normalised; no mix in a mix
  Names and units are case-insensitive, whitespace is ignored, units are ms or s.
  Arguments go by position or name (positional first). Clock-offset specs use the same
  grammar and may be negative, e.g. uniform(-500ms, 500ms).
  Per packet: jitter adds an exponential one-way delay with the given mean; a lost packet
  arrives one RTO = max(200ms, 2*RTT) late and holds back those behind it (TCP)."""
