"""The latency-spec grammar: each form, describe() round trips, one-line rejections."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from client_sim.latency import (
    DEFAULT_FLOOR,
    HELP_TEXT,
    MAX_DURATION_S,
    Constant,
    Distribution,
    LatencySpecError,
    LogNormal,
    Mix,
    Normal,
    Uniform,
    draw_bot,
    parse_distribution,
    parse_duration,
)

# --------------------------------------------------------------------------------------------
# Each form parses to exactly what it says


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("80ms", Constant(0.08)),
        ("80", Constant(0.08)),
        ("0.08s", Constant(0.08)),
        ("constant(80ms)", Constant(0.08)),
        ("constant(value=80ms)", Constant(0.08)),
        ("uniform(20ms,120ms)", Uniform(0.02, 0.12)),
        ("uniform(min=20ms,max=120ms)", Uniform(0.02, 0.12)),
        ("uniform(max=120ms,min=20ms)", Uniform(0.02, 0.12)),
        ("uniform(20ms,max=0.12s)", Uniform(0.02, 0.12)),
        ("uniform(50ms,50ms)", Uniform(0.05, 0.05)),
        ("normal(mean=80ms,sd=15ms)", Normal(0.08, 0.015, DEFAULT_FLOOR)),
        ("normal(80ms,15ms)", Normal(0.08, 0.015, DEFAULT_FLOOR)),
        ("normal(mean=80ms,sd=15ms,min=30ms)", Normal(0.08, 0.015, 0.03)),
        ("lognormal(median=40ms,sigma=0.4)", LogNormal(0.04, 0.4)),
        ("lognormal(40,0.4)", LogNormal(0.04, 0.4)),
        (
            "mix(0.6*lognormal(median=40ms,sigma=0.4), 0.4*lognormal(median=140ms,sigma=0.3))",
            Mix(((0.6, LogNormal(0.04, 0.4)), (0.4, LogNormal(0.14, 0.3)))),
        ),
        ("mix(3*20ms, 1*uniform(1s,2s))", Mix(((3.0, Constant(0.02)), (1.0, Uniform(1.0, 2.0))))),
        ("2e1ms", Constant(0.02)),
        ("1.5E-2s", Constant(0.015)),
    ],
)
def test_each_form_parses(text: str, expected: Distribution) -> None:
    assert parse_distribution(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        " LogNormal ( MEDIAN = 40 MS , Sigma = 0.4 ) ",
        "LOGNORMAL(median=40Ms,SIGMA=0.4)",
        "\tlognormal(\n40ms,\n0.4\n)\n",
        "lognormal(median=0.04S, sigma=.4)",
    ],
)
def test_whitespace_and_case_do_not_matter(text: str) -> None:
    assert parse_distribution(text) == LogNormal(0.04, 0.4)


def test_signed_specs_allow_negative_values_and_leave_normal_untruncated() -> None:
    assert parse_distribution("uniform(-500ms,500ms)", signed=True) == Uniform(-0.5, 0.5)
    assert parse_distribution("-30ms", signed=True) == Constant(-0.03)
    assert parse_distribution("normal(0ms,100ms)", signed=True) == Normal(0.0, 0.1)
    with pytest.raises(LatencySpecError, match="must be > 0 for a round-trip time"):
        parse_distribution("uniform(-500ms,500ms)")


def test_canonical_text() -> None:
    spec = "mix(0.6*lognormal(median=40ms,sigma=0.4), 0.4*normal(mean=140ms, sd=30ms))"
    assert parse_distribution(spec).describe() == (
        "mix(0.6*lognormal(median=40ms, sigma=0.4), 0.4*normal(mean=140ms, sd=30ms, min=1ms))"
    )
    assert str(Uniform(-0.2, 0.2)) == "uniform(min=-200ms, max=200ms)"
    assert Constant(0.0801).describe() == "constant(80.10000000000001ms)"  # exact, not pretty


# --------------------------------------------------------------------------------------------
# describe() round-trips, for every distribution


def finite(lo: float | None = None, hi: float | None = None) -> st.SearchStrategy[float]:
    return st.floats(min_value=lo, max_value=hi, allow_nan=False, allow_infinity=False)


# The grammar takes delays up to MAX_DURATION_S (a minute); beyond it says so (tested below).
durations = finite(-MAX_DURATION_S, MAX_DURATION_S) | finite(-10.0, 10.0)
positive = finite(1e-300, MAX_DURATION_S) | finite(1e-6, 10.0)


@st.composite
def leaves(draw: st.DrawFn, values: st.SearchStrategy[float]) -> Distribution:
    kind = draw(st.sampled_from(["constant", "uniform", "normal", "lognormal"]))
    if kind == "constant":
        return Constant(draw(values))
    if kind == "uniform":
        a, b = sorted((draw(values), draw(values)))
        return Uniform(a, b)
    if kind == "normal":
        a, b = draw(values), draw(values)
        sd = draw(positive)
        if a == b:
            return Normal(a, sd)
        floor, mean = sorted((a, b))
        return Normal(mean, sd, floor if draw(st.booleans()) else None)
    return LogNormal(draw(positive), draw(positive))


def distributions(values: st.SearchStrategy[float]) -> st.SearchStrategy[Distribution]:
    mixes = st.lists(st.tuples(positive, leaves(values)), min_size=1, max_size=4).map(
        lambda parts: Mix(tuple(parts))
    )
    return leaves(values) | mixes


def mangle(text: str, upper: bool) -> str:
    """Same spec, other spelling: spaces around punctuation, other case."""
    text = re.sub(r"([(),=*])", r" \1\t", text)
    return text.upper() if upper else text


@given(distributions(durations), st.booleans())
def test_signed_describe_round_trips(dist: Distribution, upper: bool) -> None:
    text = dist.describe()
    assert parse_distribution(text, signed=True) == dist
    assert parse_distribution(mangle(text, upper), signed=True) == dist


@given(distributions(positive), st.booleans())
def test_round_trip_time_describe_round_trips(dist: Distribution, upper: bool) -> None:
    if not dist.positive:  # normal without a floor: not a round-trip time
        with pytest.raises(ValueError):
            draw_bot(0, seed=0, rtt=dist)
        return
    assert parse_distribution(dist.describe()) == dist
    assert parse_distribution(mangle(dist.describe(), upper)) == dist


# --------------------------------------------------------------------------------------------
# Rejections: one line, the problem, the column


@pytest.mark.parametrize(
    ("text", "problem", "column"),
    [
        ("lognorml(median=40ms,sigma=0.4)", "unknown distribution 'lognorml'", 1),
        ("", "empty spec", None),
        ("   ", "empty spec", None),
        ("80ms foo", "unexpected 'foo' after the end of the spec", 6),
        ("uniform(20ms,120ms))", "unexpected ')' after the end of the spec", 20),
        ("80us", "unknown unit 'us'", 3),
        ("constant(0)", "constant must be > 0 for a round-trip time", 10),
        ("-5ms", "constant must be > 0 for a round-trip time", 1),
        ("uniform(0ms,10ms)", "uniform min must be > 0 for a round-trip time", 9),
        ("uniform(120ms,20ms)", "uniform min 120ms is greater than max 20ms", 15),
        ("normal(mean=80ms,sd=0ms)", "normal sd must be > 0", 21),
        ("normal(mean=80ms,sd=-1ms)", "normal sd must be > 0", 21),
        ("normal(mean=0.5ms,sd=1ms)", "greater than the default floor min=1ms", 13),
        ("normal(10ms,1ms,min=20ms)", "normal mean 10ms must be greater than its floor", 8),
        ("normal(10ms,1ms,min=0ms)", "normal min must be > 0", 21),
        ("lognormal(median=40ms,sigma=0)", "lognormal sigma must be > 0", 29),
        ("lognormal(median=0ms,sigma=0.4)", "lognormal median must be > 0", 18),
        ("lognormal(median=40ms,sigma=0.4ms)", "sigma is dimensionless", 32),
        ("lognormal(median=40ms)", "missing argument 'sigma' for lognormal", 1),
        ("uniform(20ms)", "missing argument 'max' for uniform", 1),
        ("constant()", "missing argument 'value' for constant", 1),
        ("lognormal(mu=3,sigma=1)", "unknown argument 'mu' for lognormal", 11),
        ("uniform(1,2,3)", "too many arguments for uniform", 13),
        ("uniform(min=1,2)", "positional argument after keyword arguments", 15),
        ("uniform(1,min=2)", "argument 'min' of uniform given twice", 11),
        ("uniform(1 2)", "expected ',' or ')' in uniform(...)", 11),
        ("uniform(1,", "expected a duration for uniform max, got end of spec", 11),
        ("uniform 1,2", "expected '(' after 'uniform'", 9),
        ("uniform(a,2)", "expected a duration for uniform min, got 'a'", 9),
        ("mix()", "empty mix", 1),
        ("mix(0.5*mix(1*80ms))", "a mix cannot contain a mix", 9),
        ("mix(0*80ms)", "mix weight must be > 0", 5),
        ("mix(-1*80ms)", "mix weight must be > 0", 5),
        ("mix(0.5 80ms)", "expected '*' after the mix weight", 9),
        ("mix(lognormal(40ms,0.4))", "expected a weight before the mix component", 5),
        ("mix(1*80ms;", "unexpected character ';'", 11),
        ("1e999", "number '1e999' is out of range", 1),
        ("80ms.", "unexpected character '.'", 5),
        ("(80ms)", "expected a duration or a distribution, got '('", 1),
        ("80ms\n)", "unexpected ')' after the end of the spec", 6),
        ("uniform(20ms,\x00)", "unexpected character '\\x00'", 14),
    ],
)
def test_rejections_name_the_problem_on_one_line(
    text: str, problem: str, column: int | None
) -> None:
    with pytest.raises(LatencySpecError) as info:
        parse_distribution(text)
    message = str(info.value)
    assert "\n" not in message and "\r" not in message
    assert message.startswith("latency spec: ")
    assert problem in message
    if column is not None:
        assert f" at column {column}" in message
    assert isinstance(info.value, ValueError)


def test_error_label_is_the_callers() -> None:
    with pytest.raises(LatencySpecError, match=r"^clock offset spec: unknown distribution"):
        parse_distribution("gauss(1,2)", signed=True, label="clock offset spec")


def test_long_garbage_is_shortened_in_the_message() -> None:
    with pytest.raises(LatencySpecError) as info:
        parse_distribution("x" * 10_000)
    assert len(str(info.value)) < 200


SPEC_CHARS = "0123456789.+-eE*(),= \tmsSxintaorlgu" + "constantuniformnormallognormalmix"


@settings(max_examples=500)
@given(st.text(alphabet=SPEC_CHARS, max_size=40) | st.text(max_size=20))
def test_any_text_parses_or_fails_with_one_line(text: str) -> None:
    try:
        dist = parse_distribution(text)
    except LatencySpecError as exc:
        assert "\n" not in str(exc) and str(exc).startswith("latency spec: ")
    else:
        assert dist.positive
        assert parse_distribution(dist.describe()) == dist


# --------------------------------------------------------------------------------------------
# Durations, help text, the longest delay


@pytest.mark.parametrize(
    ("text", "seconds"), [("2ms", 0.002), ("0.5s", 0.5), ("3", 0.003), (" 0 MS ", 0.0)]
)
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize(
    ("text", "problem"),
    [("-2ms", "must be >= 0"), ("", "empty duration"), ("2ms 3", "after the duration")],
)
def test_parse_duration_rejects(text: str, problem: str) -> None:
    with pytest.raises(LatencySpecError, match=problem) as info:
        parse_duration(text, label="jitter")
    assert str(info.value).startswith("jitter: ")


@pytest.mark.parametrize(
    "example",
    [
        "constant(80ms)",
        "uniform(20ms, 120ms)",
        "uniform(min=20ms, max=120ms)",
        "normal(mean=80ms, sd=15ms)",
        "lognormal(median=40ms, sigma=0.4)",
        "mix(0.6*lognormal(median=40ms, sigma=0.4), 0.4*lognormal(median=140ms, sigma=0.3))",
    ],
)
def test_help_text_examples_parse(example: str) -> None:
    assert example in HELP_TEXT
    parse_distribution(example)


@pytest.mark.parametrize("text", ["1e308s", "61s", "60001ms", "-61s"])
def test_a_delay_beyond_a_minute_is_refused_in_one_line(text: str) -> None:
    with pytest.raises(LatencySpecError, match="longer than 60 s"):
        parse_duration(text, signed=True, label="jitter")
    with pytest.raises(LatencySpecError, match="longer than 60 s"):
        parse_distribution(f"uniform(1ms, {text.lstrip('-')})")
