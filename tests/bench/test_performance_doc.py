"""docs/performance.md and README.md's figures are what bench/report.py makes of the
committed bench/results (run ``python bench/report.py`` after a bench run), every bench
writes to its own results file by default, and a report says how it was made."""

from __future__ import annotations

import argparse
import json
import re
import shutil
from pathlib import Path

import pytest

from bench import report
from bench.performance_doc import BENCHES, number, render_performance, replace_figures_block

ROOT = Path(__file__).resolve().parents[2]


def test_the_committed_page_and_readme_are_what_the_results_make() -> None:
    assert report.main(["--check"]) == 0, "stale: run python bench/report.py"


def test_check_fails_when_a_result_changes_and_the_page_does_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    results = tmp_path / "results"
    shutil.copytree(report.RESULTS, results)
    server = json.loads((results / "server_load.json").read_text())
    server["results"][0]["server_cpu_us_per_player_tick"] += 1.0
    (results / "server_load.json").write_text(json.dumps(server))
    monkeypatch.setattr(report, "RESULTS", results)
    assert report.main(["--check"]) == 1


def test_every_results_file_is_a_bench_s_and_says_what_made_it() -> None:
    files = sorted(path.stem for path in report.RESULTS.glob("*.json"))
    assert files == sorted(bench.name for bench in BENCHES)
    for bench in BENCHES:
        made = json.loads(report.results_path(bench.name).read_text())
        command = made.get("provenance", {}).get("command") or made["command"]
        assert command.startswith(f"python {bench.script}"), bench.name


def test_a_file_no_bench_makes_is_refused(tmp_path: Path) -> None:
    shutil.copytree(report.RESULTS, tmp_path, dirs_exist_ok=True)
    (tmp_path / "server_load_after_change.json").write_text("{}")
    with pytest.raises(ValueError, match="server_load_after_change"):
        render_performance(tmp_path)


def test_every_bench_defaults_its_json_to_its_results_file() -> None:
    for bench in BENCHES:
        source = (ROOT / bench.script).read_text(encoding="utf-8")
        assert f'add_json_option(parser, "{bench.name}")' in source, bench.script
        assert f'Start.now("{bench.name}", "{bench.script}"' in source, bench.script
    parser = argparse.ArgumentParser()
    report.add_json_option(parser, "hitreg")
    assert Path(parser.parse_args([]).json) == ROOT / "bench/results/hitreg.json"


def test_emit_adds_provenance_and_writes_nothing_for_a_dash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    start = report.Start.now("hitreg", "bench/hitreg.py", ["--quick", "--json", "-"])
    monkeypatch.chdir(tmp_path)
    report.emit({"figure": 1.5}, "-", start)
    assert list(tmp_path.iterdir()) == []
    printed = json.loads(capsys.readouterr().out)
    made = printed["provenance"]
    assert made["command"] == "python bench/hitreg.py --quick --json -"
    assert made["bench"] == "hitreg" and made["cores"] >= 1
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", made["started_at"])
    assert {"loadavg_1m_at_start", "loadavg_1m_at_end", "python"} <= made.keys()
    report.emit({"figure": 1.5}, tmp_path / "out.json", start)
    assert json.loads((tmp_path / "out.json").read_text())["provenance"] == made


def test_the_figures_block_is_replaced_and_a_readme_without_one_is_refused() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    emptied = re.sub(r"(edit there -->\n).*?(<!-- end)", r"\1\2", readme, flags=re.S)
    assert emptied != readme
    assert replace_figures_block(emptied, report.RESULTS) == readme
    with pytest.raises(ValueError, match="figures block"):
        replace_figures_block("# no block", report.RESULTS)


@pytest.mark.parametrize(
    ("value", "shown"),
    [(None, "\N{EN DASH}"), (True, "yes"), (1234, "1,234"), (1234.6, "1,235"), (15.79, "15.8"),
     (4.219, "4.22"), (0.7861, "0.786")],
)  # fmt: skip
def test_figures_are_shown_to_about_three_digits(value: object, shown: str) -> None:
    assert number(value) == shown


@pytest.mark.parametrize("name", ["performance-scaling.svg", "performance-peers.svg"])
def test_the_pictures_are_drawn_from_the_committed_results(name: str) -> None:
    matplotlib = pytest.importorskip("matplotlib")
    from bench.performance_plots import PICTURES, draw

    committed = (ROOT / "docs/images" / name).read_bytes()
    drawn_by = re.search(rb"Matplotlib v([\w.]+)", committed)
    assert drawn_by is not None
    if drawn_by.group(1).decode() != matplotlib.__version__:
        pytest.skip(f"drawn by matplotlib {drawn_by.group(1).decode()}: bytes differ by version")
    bench, _ = PICTURES[name]
    drawn = draw(name, json.loads(report.results_path(bench).read_text()))
    assert drawn == committed, "stale: run python bench/report.py"
