"""Latency geography: the embedded matrix is sane, bad matrices and populations get one
clear line each, and home draws are reproducible."""

from __future__ import annotations

import ast
import copy
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import shared
from shared.geo import (
    GeoError,
    default_matrix,
    draw_homes,
    load_matrix,
    locations,
    parse_matrix,
    parse_population,
    rtt_ms,
)

TINY: dict[str, Any] = {
    "locations": {"na": "North America", "eu": "Europe"},
    "rtt_ms": {"na": {"na": 20, "eu": 90}, "eu": {"na": 90, "eu": 15}},
}


def tiny(**rows: dict[str, Any]) -> dict[str, Any]:
    doc = copy.deepcopy(TINY)
    doc["rtt_ms"].update(rows)
    return doc


def one_line(error: pytest.ExceptionInfo[GeoError]) -> str:
    text = str(error.value)
    assert "\n" not in text and text
    return text


# -- the embedded matrix ----------------------------------------------------------------------


def test_the_embedded_matrix_covers_five_continents_and_is_symmetric() -> None:
    matrix = default_matrix()
    assert {"na", "sa", "eu", "asia", "oce"} <= set(matrix.locations)
    for a in matrix.locations:
        assert 15 <= rtt_ms(a, a) <= 45  # a node in the player's own region
        for b in matrix.locations:
            assert rtt_ms(a, b) == rtt_ms(b, a) > 0
            if a != b:
                assert rtt_ms(a, b) > max(rtt_ms(a, a), rtt_ms(b, b))


def test_the_embedded_matrix_has_realistic_figures_and_names_its_source() -> None:
    # Typical published inter-region medians (approximate): transatlantic well under
    # 150 ms, Europe-Oceania and South America-Asia among the longest paths on Earth.
    assert 70 <= rtt_ms("na", "eu") <= 110
    assert 100 <= rtt_ms("na", "sa") <= 140
    assert 80 <= rtt_ms("asia", "oce") <= 120
    assert 230 <= rtt_ms("eu", "oce") <= 300
    assert rtt_ms("sa", "asia") >= 280
    assert "median" in default_matrix().source and "approximate" in default_matrix().source
    raw = json.loads((Path(shared.__file__).parent / "data" / "latency_matrix.json").read_text())
    assert raw["units"].startswith("milliseconds")


def test_rtt_and_row_name_unknown_locations() -> None:
    with pytest.raises(GeoError) as error:
        rtt_ms("na", "mars")
    assert "unknown location 'mars'" in one_line(error) and "asia" in str(error.value)
    assert default_matrix().row("eu")["eu"] == rtt_ms("eu", "eu")
    assert locations() == default_matrix().locations


def test_shared_geo_imports_neither_server_nor_client_sim() -> None:
    tree = ast.parse(Path(shared.__file__).with_name("geo.py").read_text())
    imported = {
        name.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for name in (
            [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
        )
    }
    assert not imported & {"server", "client_sim"}


# -- matrix validation ------------------------------------------------------------------------


def test_a_small_valid_matrix_parses() -> None:
    matrix = parse_matrix(TINY)
    assert matrix.locations == ("na", "eu")
    assert matrix.rtt_ms("eu", "na") == 90.0
    assert "na" in matrix and "sa" not in matrix


@pytest.mark.parametrize(
    ("document", "expected"),
    [
        ([], "expected a JSON object"),
        ({"rtt_ms": {}}, "non-empty object"),
        (tiny(eu={"na": 95, "eu": 15}), "not symmetric: rtt_ms.na.eu is 90 ms but rtt_ms.eu.na"),
        (tiny(na={"na": 0, "eu": 90}), "rtt_ms.na.na is 0 ms; every RTT must be positive"),
        (tiny(na={"na": -5, "eu": 90}), "must be positive"),
        (tiny(na={"na": 20}), "missing entry rtt_ms.na.eu"),
        (tiny(na={"na": 20, "eu": 90, "sa": 120}), "rtt_ms.na: unknown location 'sa'"),
        (tiny(na={"na": "20", "eu": 90}), "rtt_ms.na.na: expected a number"),
        (tiny(na={"na": True, "eu": 90}), "expected a number"),
        (tiny(na={"na": float("inf"), "eu": 90}), "must be finite"),
        (tiny(na=[20, 90]), "rtt_ms.na must be an object"),
        ({**TINY, "locations": {"na": "x"}}, "disagree about eu"),
        ({"rtt_ms": {"North America": {"North America": 20}}}, "lowercase"),
    ],
)
def test_bad_matrices_get_one_line_naming_the_problem(document: Any, expected: str) -> None:
    with pytest.raises(GeoError) as error:
        parse_matrix(document)
    assert expected in one_line(error)


def test_load_matrix_reports_unreadable_and_invalid_files(tmp_path: Path) -> None:
    with pytest.raises(GeoError) as error:
        load_matrix(tmp_path / "missing.json")
    assert "cannot read latency matrix" in one_line(error)
    bad = tmp_path / "bad.json"
    bad.write_text("{nope")
    with pytest.raises(GeoError) as error:
        load_matrix(bad)
    assert "is not valid JSON" in one_line(error)
    good = tmp_path / "good.json"
    good.write_text(json.dumps(TINY))
    assert load_matrix(good).rtt_ms("na", "eu") == 90.0


# -- populations --------------------------------------------------------------------------


def test_population_weights_are_normalised_in_the_order_given() -> None:
    weights = parse_population("na:0.4,eu:0.3,asia:0.2,sa:0.05,oce:0.05")
    assert list(weights) == ["na", "eu", "asia", "sa", "oce"]
    assert weights == pytest.approx({"na": 0.4, "eu": 0.3, "asia": 0.2, "sa": 0.05, "oce": 0.05})
    assert parse_population(" na : 40 , eu:60 ") == pytest.approx({"na": 0.4, "eu": 0.6})
    assert parse_population("eu:1,na:0") == {"eu": 1.0, "na": 0.0}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", "population: empty"),
        ("na", "'na' is not LOCATION:WEIGHT"),
        ("na:0.5,", "'' is not LOCATION:WEIGHT"),
        ("mars:1", "unknown location 'mars'"),
        ("na:1,na:2", "'na' is given twice"),
        ("na:lots", "weight 'lots' of 'na' is not a number"),
        ("na:-1", "must be >= 0 and finite"),
        ("na:nan", "must be >= 0 and finite"),
        ("na:0,eu:0", "every weight is zero"),
    ],
)
def test_bad_populations_get_one_line(text: str, expected: str) -> None:
    with pytest.raises(GeoError) as error:
        parse_population(text)
    assert expected in one_line(error)


# -- drawing homes ------------------------------------------------------------------------


def test_the_same_seed_draws_the_same_homes_whatever_the_order() -> None:
    first = draw_homes("na:0.4,eu:0.3,asia:0.2,sa:0.05,oce:0.05", 500, seed=7)
    again = draw_homes("oce:0.05,sa:0.05,asia:0.2,eu:0.3,na:0.4", 500, seed=7)
    other = draw_homes("na:0.4,eu:0.3,asia:0.2,sa:0.05,oce:0.05", 500, seed=8)
    assert first == again
    assert first != other
    assert len(first) == 500
    assert draw_homes("eu:1", 0, seed=1) == ()


def test_draws_follow_the_weights() -> None:
    counts = Counter(draw_homes({"na": 0.5, "eu": 0.3, "asia": 0.2}, 20_000, seed=3))
    assert set(counts) == {"na", "eu", "asia"}
    # 20,000 draws: the standard error of a share is at most 0.0036; allow five of them.
    assert counts["na"] / 20_000 == pytest.approx(0.5, abs=0.018)
    assert counts["eu"] / 20_000 == pytest.approx(0.3, abs=0.018)
    assert counts["asia"] / 20_000 == pytest.approx(0.2, abs=0.018)


@settings(max_examples=60, deadline=None)
@given(
    weights=st.dictionaries(
        st.sampled_from(["na", "sa", "eu", "asia", "oce"]),
        st.floats(min_value=0.0, max_value=10.0),
        min_size=1,
    ).filter(lambda w: sum(w.values()) > 0),
    n=st.integers(min_value=0, max_value=200),
    seed=st.integers(min_value=0, max_value=2**32),
)
def test_draws_only_locations_with_positive_weight(
    weights: dict[str, float], n: int, seed: int
) -> None:
    homes = draw_homes(weights, n, seed)
    assert len(homes) == n
    assert all(weights[home] > 0 for home in homes)
    assert homes == draw_homes(dict(reversed(list(weights.items()))), n, seed)


@pytest.mark.parametrize("n", [-1, 2.5, True])
def test_draw_homes_refuses_a_bad_count(n: Any) -> None:
    with pytest.raises(GeoError) as error:
        draw_homes("eu:1", n, seed=1)
    assert "n must be a non-negative integer" in one_line(error)
