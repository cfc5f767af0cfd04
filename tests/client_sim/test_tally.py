"""Mergeable tallies: sketches whose merge is the sketch of the whole, counts and
validity that combine, parts refused in one line, shards that hold the same bots."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from client_sim.bot_random import BotStreams
from client_sim.cli import build_parser, merge_main, parse_run
from client_sim.report import report_of, tally_of
from client_sim.sketch import RELATIVE_ACCURACY, FixedBins, Sketch
from client_sim.swarm import ProcessFigures, SwarmResult
from client_sim.tally import PartError, Tally


def test_the_merge_of_parts_sketches_matches_the_whole_within_its_accuracy() -> None:
    rng = np.random.default_rng(3)
    values = rng.lognormal(np.log(0.06), 0.5, 30_000)
    parts = [Sketch().add(chunk) for chunk in np.array_split(values, 3)]
    merged = Sketch()
    for part in parts:
        merged.merge(Sketch.from_json(json.loads(json.dumps(part.to_json()))))
    whole = Sketch().add(values)
    ordered = np.sort(values)
    for q in (0.5, 0.9, 0.95, 0.99):
        exact = ordered[int(q * (len(values) - 1))]
        assert merged.quantile(q) == whole.quantile(q)
        assert abs(merged.quantile(q) - exact) <= RELATIVE_ACCURACY * exact
    assert merged.count == len(values)


def test_fixed_bins_add_and_refuse_other_bins() -> None:
    a = FixedBins(0.0, 5.0, 4).add([1, 6, 19.9, 20, 300])
    assert a.counts == [1, 1, 0, 1] and a.overflow == 2
    a.merge(FixedBins(0.0, 5.0, 4).add([2]))
    assert a.counts == [2, 1, 0, 1]
    with pytest.raises(ValueError):
        a.merge(FixedBins(0.0, 10.0, 4))


def _result(bots: int, rtts: list[float], tick_hz: float) -> SwarmResult:
    return SwarmResult(
        requested=bots, connected=bots, duration_s=2.0, cpu_s=0.2, swarm_ticks=120,
        rtt_samples=rtts, inputs_sent=[60] * bots, inputs_acked=[50] * bots,
        snapshots=[60] * bots, bytes_down=[1000] * bots, bytes_up=[100] * bots,
        processes=[ProcessFigures(60, int(tick_hz * 2), 2.0, 0.2, 2.0)],
    )  # fmt: skip


def test_merged_tallies_sum_counts_and_keep_rates_per_bot() -> None:
    one, two = tally_of(_result(2, [0.04, 0.05], 60)), tally_of(_result(4, [0.1] * 4, 60))
    report = report_of(Tally().merge(one).merge(two))
    assert report["bots"]["connected"] == 6 and report["bots"]["workers"] == 2
    assert report["inputs"]["sent"] == 360 and report["inputs"]["acked_ratio"] == 0.8333
    assert report["snapshots"]["per_bot_per_s"] == 30.0
    assert report["latency_ms"]["samples"] == 6
    assert sum(report["latency_ms"]["histogram"]["measured"]) == 6
    assert report["valid"] is True


def test_an_invalid_part_makes_the_merge_invalid_with_its_reasons() -> None:
    slow = tally_of(_result(2, [0.04], 30))
    slow.invalid_reasons = ["a reason only that part knew"]
    report = report_of(Tally().merge(tally_of(_result(2, [0.04], 60))).merge(slow))
    assert report["valid"] is False
    assert "a reason only that part knew" in report["invalid_reasons"]
    assert any("ticks/s" in r for r in report["invalid_reasons"])  # the slow shard's rate


def test_parts_of_other_swarms_or_the_same_shard_twice_are_refused() -> None:
    a, b = Tally(population={"seed": 1, "count": 6, "of": 3, "shards": [0]}), Tally()
    b.population = {"seed": 2, "count": 6, "of": 3, "shards": [1]}
    with pytest.raises(PartError, match="seed"):
        Tally().merge(a).merge(b)
    with pytest.raises(PartError, match="shard 0"):
        Tally().merge(a).merge(Tally(population=dict(a.population)))


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda d: d.pop("counts"), "'counts' is missing"),
        (lambda d: d.__setitem__("counts", {"inputs.sent": "many"}), "'counts' is malformed"),
        (lambda d: d["sketches"]["rtt"].pop("positive"), "'sketches' is malformed"),
        (lambda d: d.__setitem__("format", "other/1"), "format"),
        (lambda d: d["events"]["processes"][0].pop("ticks"), "a malformed record"),
        (lambda d: d["server"].__setitem__("after", {"tick": "x"}), "a malformed record"),
    ],
)
def test_a_damaged_part_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], damage: object, message: str
) -> None:
    tally = tally_of(_result(2, [0.04, 0.05], 60))
    tally.server = {"before": {"tick": 1}, "after": {"tick": 2}}
    data = tally.to_json()
    damage(data)  # type: ignore[operator]
    part = tmp_path / "part.json"
    part.write_text(json.dumps(data))
    assert merge_main([str(part), "--json", str(tmp_path / "out.json")]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1, err


def test_a_shard_holds_every_nth_bot_and_each_bot_is_the_same_in_any_shard() -> None:
    def bots(*extra: str) -> dict[int, object]:
        run = parse_run(build_parser().parse_args(["--count", "7", "--seed", "5", *extra]))
        return {b.index: b for config in run.swarm_configs() for b in config.bots}

    whole = bots()
    shards = [bots("--shard", f"{i}/3", "--workers", "2") for i in range(3)]
    assert [sorted(s) for s in shards] == [[0, 3, 6], [1, 4], [2, 5]]
    for shard in shards:
        assert all(whole[k] == bot for k, bot in shard.items())


def test_each_bot_draws_the_same_numbers_whichever_process_runs_it() -> None:
    whole = BotStreams(9, range(6))
    split = [BotStreams(9, [0, 3]), BotStreams(9, [1, 4]), BotStreams(9, [2, 5])]
    everyone = whole.random(np.arange(6), 3)
    whole.random(np.array([1]))  # a neighbour's draw leaves the others' streams alone
    for stream, members in zip(split, ([0, 3], [1, 4], [2, 5]), strict=True):
        assert np.array_equal(stream.random(np.arange(2), 3), everyone[members])
    assert np.array_equal(whole.random(np.array([0])), split[0].random(np.array([0])))
    assert 0.0 <= everyone.min() and everyone.max() < 1.0 and len(np.unique(everyone)) == 18


def test_bad_shard_flags_are_one_line() -> None:
    for flag in ("3/3", "a/b", "1", "-1/2"):
        with pytest.raises(ValueError, match="--shard must be I/N"):
            parse_run(build_parser().parse_args([f"--shard={flag}"]))


def test_a_bulk_add_keeps_what_ddsketch_s_own_add_keeps() -> None:
    from ddsketch import DDSketch

    values = np.random.default_rng(8).normal(0.05, 0.04, 5_000)  # negatives and zero too
    values[:10] = 0.0
    own = DDSketch(RELATIVE_ACCURACY)
    for value in values.tolist():
        own.add(value)
    bulk = Sketch().add(values)
    for q in (0.01, 0.25, 0.5, 0.9, 0.99):
        assert bulk.quantile(q) == pytest.approx(own.get_quantile_value(q), rel=1e-9)
    assert bulk.count == own.count


def test_merge_writes_the_merged_report_and_its_pages(tmp_path: Path) -> None:
    parts = []
    for shard, rtts in enumerate(([0.04, 0.05], [0.1, 0.12, 0.2])):
        tally = tally_of(_result(len(rtts), rtts, 60))
        tally.population = {"seed": 1, "count": 5, "light": 0, "of": 2, "shards": [shard]}
        parts.append(tmp_path / f"part-{shard}.json")
        parts[-1].write_text(json.dumps(tally.to_json()))
    out, folder = tmp_path / "merged.json", tmp_path / "report"
    argv = [*map(str, parts), "--json", str(out), "--report-dir", str(folder)]
    assert merge_main([*argv, "--fail-if", "bots.connected!=5"]) == 0
    report = json.loads(out.read_text())
    assert report["bots"]["shards"] == {"of": 2, "merged": [0, 1]}
    assert report["latency_ms"]["samples"] == 5 and report["valid"] is True
    assert json.loads((folder / "report.json").read_text()) == report
    assert "data:image/png;base64," in (folder / "report.html").read_text(encoding="utf-8")
    assert merge_main([*map(str, parts[:1]), "--json", str(out)]) == 0  # a shard missing:
    assert "shard(s) 1 of 2 missing" in " ".join(json.loads(out.read_text())["invalid_reasons"])
