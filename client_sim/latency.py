"""Latency specs: the ``--latency`` grammar, its distributions and the bot population (sans-I/O).

A spec names the distribution of each bot's *base round-trip time* (the propagation floor of
its path); per-packet jitter, loss and the bot's clock offset come from :class:`LinkProfile`.
Everything here is in seconds except where a name says ``_ms``; nothing reads a clock.

The grammar (see ``docs/latency.md`` and :data:`HELP_TEXT`) is parsed by a hand-written
tokenizer and a recursive-descent parser, so every mistake is reported as one line that
names the problem and its column, and nothing is ever evaluated.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np

__all__ = [
    "DEFAULT_CLOCK_OFFSET",
    "DEFAULT_FLOOR",
    "HELP_TEXT",
    "MAX_DURATION_S",
    "BotParams",
    "Constant",
    "Distribution",
    "LatencySpecError",
    "LinkProfile",
    "LogNormal",
    "Mix",
    "Normal",
    "Uniform",
    "draw_bot",
    "draw_population",
    "parse_distribution",
    "parse_duration",
]

#: Where ``normal(...)`` round-trip times are truncated unless the spec sets ``min=``.
DEFAULT_FLOOR = 0.001


class LatencySpecError(ValueError):
    """A spec the user wrote is malformed; the message is one line, fit to print as is."""


class _FieldError(ValueError):
    """Invalid constructor argument; ``field`` is its grammar name, so the parser can point."""

    def __init__(self, field: str | None, message: str) -> None:
        super().__init__(message)
        self.field = field


# --------------------------------------------------------------------------------------------
# Formatting: describe() must parse back to an equal object, bit for bit.


def _shortest(value: float, scale: float) -> str | None:
    """Shortest plain decimal ``t`` with ``float(t) / scale == value``, if one is short."""
    scaled = value * scale
    for places in range(21):
        text = f"{scaled:.{places}f}"
        if "." in text:
            text = text.rstrip("0").rstrip(".")
        if text == "-0":
            text = "0"
        if len(text) > 24:
            return None
        if float(text) / scale == value:
            return text
    return None


#: The longest delay the grammar takes: a link's delays are milliseconds to seconds, and a
#: value like 1e308 s would only overflow the delay lines.
MAX_DURATION_S = 60.0


def _fmt_duration(seconds: float) -> str:
    """Shortest ``<n>ms`` that parses back to exactly ``seconds``, else an exact ``<n>s``."""
    text = _shortest(seconds, 1000.0)
    return f"{text}ms" if text is not None else f"{seconds!r}s"


def _fmt_number(value: float) -> str:
    text = _shortest(value, 1.0)
    return text if text is not None else repr(float(value))


def _finite(field: str | None, what: str, value: float) -> float:
    value = float(value)
    if not math.isfinite(value):
        raise _FieldError(field, f"{what} must be a finite number, got {value!r}")
    return value


# --------------------------------------------------------------------------------------------
# Distributions


class Distribution(ABC):
    """A distribution of durations in seconds; immutable, hashable, comparable."""

    __slots__ = ()

    @abstractmethod
    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """Draw ``n`` values (seconds, float64) from ``rng``; deterministic for its state."""

    @abstractmethod
    def describe(self) -> str:
        """Canonical spec text: ``parse_distribution(d.describe(), signed=True) == d``."""

    @property
    @abstractmethod
    def positive(self) -> bool:
        """Whether every value drawn is > 0, as a round-trip time must be."""

    def __str__(self) -> str:
        return self.describe()


def _check_n(n: int) -> int:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
        raise ValueError(f"sample size must be a non-negative integer, got {n!r}")
    return int(n)


@dataclass(frozen=True, slots=True)
class Constant(Distribution):
    """Every bot gets the same value."""

    value: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "value", _finite("value", "constant", self.value))

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return np.full(_check_n(n), self.value, dtype=np.float64)

    def describe(self) -> str:
        return f"constant({_fmt_duration(self.value)})"

    @property
    def positive(self) -> bool:
        return self.value > 0


@dataclass(frozen=True, slots=True)
class Uniform(Distribution):
    """Uniform on ``[low, high]`` (``min``/``max`` in the grammar)."""

    low: float
    high: float

    def __post_init__(self) -> None:
        low = _finite("min", "uniform min", self.low)
        high = _finite("max", "uniform max", self.high)
        if low > high:
            raise _FieldError(
                "max",
                f"uniform min {_fmt_duration(low)} is greater than max {_fmt_duration(high)}",
            )
        object.__setattr__(self, "low", low)
        object.__setattr__(self, "high", high)

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return rng.uniform(self.low, self.high, _check_n(n))

    def describe(self) -> str:
        return f"uniform(min={_fmt_duration(self.low)}, max={_fmt_duration(self.high)})"

    @property
    def positive(self) -> bool:
        return self.low > 0


@dataclass(frozen=True, slots=True)
class Normal(Distribution):
    """Normal, truncated below at ``floor`` when set (redrawn, not clipped: no spike at it).

    The floor must lie below the mean, so at least half the mass survives and redrawing
    terminates quickly.
    """

    mean: float
    sd: float
    floor: float | None = None

    def __post_init__(self) -> None:
        mean = _finite("mean", "normal mean", self.mean)
        sd = _finite("sd", "normal sd", self.sd)
        if sd <= 0:
            raise _FieldError("sd", f"normal sd must be > 0, got {_fmt_duration(sd)}")
        object.__setattr__(self, "mean", mean)
        object.__setattr__(self, "sd", sd)
        if self.floor is not None:
            floor = _finite("min", "normal min", self.floor)
            if floor >= mean:
                raise _FieldError(
                    "mean",
                    f"normal mean {_fmt_duration(mean)} must be greater than "
                    f"its floor min={_fmt_duration(floor)}",
                )
            object.__setattr__(self, "floor", floor)

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        out = rng.normal(self.mean, self.sd, _check_n(n))
        if self.floor is not None:
            redo = np.flatnonzero(out < self.floor)
            while redo.size:
                fresh = rng.normal(self.mean, self.sd, redo.size)
                out[redo] = fresh
                redo = redo[fresh < self.floor]
        return out

    def describe(self) -> str:
        text = f"normal(mean={_fmt_duration(self.mean)}, sd={_fmt_duration(self.sd)}"
        if self.floor is not None:
            text += f", min={_fmt_duration(self.floor)}"
        return text + ")"

    @property
    def positive(self) -> bool:
        return self.floor is not None and self.floor > 0


@dataclass(frozen=True, slots=True)
class LogNormal(Distribution):
    """Log-normal with the given median; ``sigma`` is the sd of the underlying normal.

    The usual shape of internet RTTs: a floor-ish body and a long right tail.
    """

    median: float
    sigma: float

    def __post_init__(self) -> None:
        median = _finite("median", "lognormal median", self.median)
        sigma = _finite("sigma", "lognormal sigma", self.sigma)
        if median <= 0:
            raise _FieldError(
                "median", f"lognormal median must be > 0, got {_fmt_duration(median)}"
            )
        if sigma <= 0:
            raise _FieldError("sigma", f"lognormal sigma must be > 0, got {sigma!r}")
        object.__setattr__(self, "median", median)
        object.__setattr__(self, "sigma", sigma)

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return rng.lognormal(math.log(self.median), self.sigma, _check_n(n))

    def describe(self) -> str:
        return f"lognormal(median={_fmt_duration(self.median)}, sigma={_fmt_number(self.sigma)})"

    @property
    def positive(self) -> bool:
        return True


@dataclass(frozen=True, slots=True)
class Mix(Distribution):
    """Weighted mixture, e.g. two regions' populations.

    Weights are kept as written (so ``describe`` round-trips exactly) and normalised when
    sampling: any positive weights are accepted. A mix may not contain a mix: one flat mix
    says the same thing and keeps the canonical form unique.
    """

    components: tuple[tuple[float, Distribution], ...]

    def __post_init__(self) -> None:
        components = tuple(self.components)
        if not components:
            raise _FieldError(None, "mix needs at least one weighted component")
        checked = []
        for weight, part in components:
            w = _finite(None, "mix weight", weight)
            if w <= 0:
                raise _FieldError(None, f"mix weight must be > 0, got {w!r}")
            if not isinstance(part, Distribution):
                raise TypeError(f"mix component must be a Distribution, got {part!r}")
            if isinstance(part, Mix):
                raise _FieldError(None, "a mix cannot contain a mix; flatten it into one")
            checked.append((w, part))
        object.__setattr__(self, "components", tuple(checked))

    @property
    def probabilities(self) -> np.ndarray:
        weights = np.array([w for w, _ in self.components], dtype=np.float64)
        return weights / weights.sum()

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        n = _check_n(n)
        which = rng.choice(len(self.components), size=n, p=self.probabilities)
        out = np.empty(n, dtype=np.float64)
        for j, (_, part) in enumerate(self.components):
            chosen = np.flatnonzero(which == j)
            if chosen.size:
                out[chosen] = part.sample(rng, chosen.size)
        return out

    def describe(self) -> str:
        inner = ", ".join(f"{_fmt_number(w)}*{p.describe()}" for w, p in self.components)
        return f"mix({inner})"

    @property
    def positive(self) -> bool:
        return all(part.positive for _, part in self.components)


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
                f"{_fmt_duration(value)} is longer than {MAX_DURATION_S:g} s",
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
                        f"normal mean {_fmt_duration(mean)} must be greater than "
                        f"the default floor min={_fmt_duration(DEFAULT_FLOOR)}",
                        mean_col,
                        "round-trip times are truncated there unless you set min",
                    )
                args["min"] = (DEFAULT_FLOOR, col)
            return self.build(name, Normal, args, col, mean="mean", sd="sd", floor="min")
        return self.build(name, LogNormal, args, col, median="median", sigma="sigma")

    def require_positive(self, what: str, value: float, col: int) -> None:
        if not self.signed and value <= 0:
            raise self.error(
                f"{what} must be > 0 for a round-trip time, got {_fmt_duration(value)}", col
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
        except _FieldError as exc:
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

    For the CLI's scalar flags (jitter, RTO and the like); ``signed=False`` rejects values < 0.
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
        raise parser.error(f"must be >= 0, got {_fmt_duration(value)}", col)
    return value


# --------------------------------------------------------------------------------------------
# Link profile and bot population

DEFAULT_CLOCK_OFFSET: Distribution = Uniform(-0.2, 0.2)


@dataclass(frozen=True, slots=True)
class LinkProfile:
    """What every bot's link shares besides its base RTT.

    ``jitter_ms``: per packet and direction, an extra one-way delay drawn from an
    exponential distribution whose mean (and so standard deviation) is ``jitter_ms`` — a
    queueing delay: never negative, usually small, sometimes large.
    ``loss``: probability that a packet is lost; over TCP that is a retransmission, so the
    packet arrives one RTO = max(200 ms, 2 * RTT) late (and holds back those behind it).
    ``clock_offset``: distribution (seconds, may be negative) of each bot's local clock
    minus the server's clock.
    """

    jitter_ms: float = 2.0
    loss: float = 0.0
    clock_offset: Distribution = DEFAULT_CLOCK_OFFSET

    def __post_init__(self) -> None:
        jitter = float(self.jitter_ms)
        if not math.isfinite(jitter) or jitter < 0:
            raise ValueError(f"jitter_ms must be a finite number >= 0, got {self.jitter_ms!r}")
        loss = float(self.loss)
        if not 0.0 <= loss <= 1.0:
            raise ValueError(f"loss must be a probability in [0, 1], got {self.loss!r}")
        if not isinstance(self.clock_offset, Distribution):
            raise TypeError(f"clock_offset must be a Distribution, got {self.clock_offset!r}")
        object.__setattr__(self, "jitter_ms", jitter)
        object.__setattr__(self, "loss", loss)


@dataclass(frozen=True, slots=True)
class BotParams:
    """One bot's link, all in seconds; ``link_seed`` seeds its two delay lines."""

    index: int
    rtt: float
    clock_offset: float
    jitter: float
    loss: float
    link_seed: int

    def __post_init__(self) -> None:
        if self.index < 0:
            raise ValueError(f"bot index must be >= 0, got {self.index}")
        if not (math.isfinite(self.rtt) and self.rtt > 0):
            raise ValueError(f"rtt must be a finite number > 0, got {self.rtt!r}")
        if not math.isfinite(self.clock_offset):
            raise ValueError(f"clock_offset must be finite, got {self.clock_offset!r}")
        if not (math.isfinite(self.jitter) and self.jitter >= 0):
            raise ValueError(f"jitter must be a finite number >= 0, got {self.jitter!r}")
        if not 0.0 <= self.loss <= 1.0:
            raise ValueError(f"loss must be in [0, 1], got {self.loss!r}")
        if not 0 <= self.link_seed < 2**64:
            raise ValueError(f"link_seed must fit in 64 bits, got {self.link_seed}")


def _check_seed(seed: int) -> int:
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    return int(seed)


def draw_bot(
    index: int, *, seed: int, rtt: Distribution, profile: LinkProfile | None = None
) -> BotParams:
    """Bot ``index`` of the population seeded by ``seed``.

    Each bot has its own streams (``SeedSequence(seed, spawn_key=(index, k))``), so a bot's
    parameters depend only on (seed, index, specs): a worker process can draw its share of
    the bots alone, growing the swarm keeps the existing bots, and the RTT spec does not
    shift the clock offsets.
    """
    seed = _check_seed(seed)
    if isinstance(index, bool) or not isinstance(index, (int, np.integer)) or index < 0:
        raise ValueError(f"bot index must be a non-negative integer, got {index!r}")
    if not rtt.positive:
        raise ValueError(f"round-trip time distribution can draw values <= 0: {rtt.describe()}")
    profile = profile if profile is not None else LinkProfile()
    index = int(index)

    def stream(k: int) -> np.random.SeedSequence:
        return np.random.SeedSequence(seed, spawn_key=(index, k))

    base = float(rtt.sample(np.random.default_rng(stream(0)), 1)[0])
    offset = float(profile.clock_offset.sample(np.random.default_rng(stream(1)), 1)[0])
    link_seed = int(stream(2).generate_state(1, np.uint64)[0])
    return BotParams(
        index=index,
        rtt=base,
        clock_offset=offset,
        jitter=profile.jitter_ms / 1000.0,
        loss=profile.loss,
        link_seed=link_seed,
    )


def draw_population(
    n: int, *, seed: int, rtt: Distribution, profile: LinkProfile | None = None
) -> tuple[BotParams, ...]:
    """Bots ``0 .. n-1``; the same arguments give bit-identical bots."""
    n = _check_n(n)
    return tuple(draw_bot(i, seed=seed, rtt=rtt, profile=profile) for i in range(n))


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
