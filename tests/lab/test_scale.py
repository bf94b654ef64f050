"""The numbers of the page on running at the paper's scale are those of the benchmark reports.

Each number :mod:`opcc_edu.lab.scale` gives the page is compared with the stored JSON it is read
from (``benchmarks/results/paper_scale.json``, ``executors.json``); then the JSON is copied, one
value moved, and the page's number must move with it (the module reads, it types nothing).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from opcc_edu.config import get_profile
from opcc_edu.lab import scale

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results"
PAPER_SCALE = json.loads((RESULTS / "paper_scale.json").read_text())
EXECUTORS = json.loads((RESULTS / "executors.json").read_text())


def _copy(tmp_path: Path, edit) -> Path:
    """A checkout-like folder whose ``benchmarks/results`` holds the reports, ``edit`` applied to
    the two JSON (a function of ``(paper_scale, executors)``)."""
    folder = tmp_path / "benchmarks" / "results"
    folder.mkdir(parents=True)
    paper_scale, executors = json.loads(json.dumps(PAPER_SCALE)), json.loads(json.dumps(EXECUTORS))
    edit(paper_scale, executors)
    (folder / "paper_scale.json").write_text(json.dumps(paper_scale))
    (folder / "executors.json").write_text(json.dumps(executors))
    return tmp_path


def _rows(table) -> dict[str, tuple[str, ...]]:
    return {row[0]: row[1:] for row in table.rows}


def test_span_rounds_like_the_reports_and_shows_equal_ends_once():
    assert scale.span(4.1392, 7.8621) == "4.1–7.9"
    assert scale.span(4.1392, 7.8621, 2) == "4.14–7.86"
    assert scale.span(1179.67, 2240.69) == "1,180–2,241"
    assert scale.span(48.93, 48.94, 0) == "49"


def test_the_results_folder_is_found_from_anywhere_in_the_checkout_and_its_absence_is_named(tmp_path, monkeypatch):
    assert scale.find_benchmark_results(ROOT / "book") == RESULTS
    assert scale.find_benchmark_results(_copy(tmp_path / "copy", lambda *_: None)) == (
        tmp_path / "copy" / "benchmarks" / "results"
    )
    monkeypatch.delenv("OPCC_EDU_RESULTS", raising=False)
    monkeypatch.setattr(scale, "__file__", str(tmp_path / "wheel" / "opcc_edu" / "lab" / "scale.py"))
    with pytest.raises(FileNotFoundError, match="benchmarks/results"):
        scale.find_benchmark_results(tmp_path / "elsewhere")


def test_the_cost_of_one_run_is_the_estimates():
    run, seconds = _rows(scale.run_table()), PAPER_SCALE["paper_run_seconds"]
    training = (seconds["cpu"]["training"] / 3600, seconds["wall"]["training"] / 3600)
    total = (seconds["cpu"]["total"] / 3600, seconds["wall"]["total"] / 3600)
    assert run["training one paper-size ensemble"] == (f"{training[0]:.2f}–{training[1]:.2f} h",)
    assert run["one run"] == (f"{total[0]:.1f}–{total[1]:.1f} h",)
    assert scale.one_run()["queries"] * 2 * 100 * 50 == seconds["cpu"]["member_steps"]
    numbers = scale.cost_numbers()
    check = PAPER_SCALE["classroom_check"]
    assert numbers["measured_runs"] == str(check["measured_seconds"]["runs"])
    assert numbers["measured_median"] == f"{check['measured_seconds']['median']:.0f}"
    assert numbers["predicted"] == f"{check['predicted_seconds']['cpu']:.0f}–{check['predicted_seconds']['wall']:.0f}"


def test_every_ablations_runs_and_cost_are_the_estimates():
    numbers, table = scale.cost_numbers(), scale.cost_table()
    cells = {(runs, core, wall) for _, runs, core, wall in table.rows}
    for row in PAPER_SCALE["ablations"]:
        key = row["ablation"].replace("-", "_")
        assert numbers[f"runs_{key}"] == f"{row['runs']:,}" and numbers[f"levels_{key}"] == str(row["levels"])
        core, wall = row["core_hours"], row["wall_hours"]["64"]
        assert (
            f"{row['runs']:,}",
            scale.span(core["cpu"], core["wall"]),
            f"{scale.span(wall['cpu'], wall['wall'])} h",
        ) in cells
        sweep = scale.sweep_time(row["ablation"], 64)
        assert sweep["hours"] == pytest.approx((wall["cpu"], wall["wall"]))
        assert sweep["rounds"] == -(-row["runs"] // 64)
    assert numbers["runs_all"] == f"{PAPER_SCALE['distinct_runs']:,}"
    every = table.rows[-1]
    distinct = PAPER_SCALE["distinct_core_hours"]
    assert every[1:3] == (f"{PAPER_SCALE['distinct_runs']:,}", f"{distinct['cpu']:,.0f}–{distinct['wall']:,.0f}")
    assert table.header[-1] == "wall time on 64 one-core slots"
    # each ablation on one row, its title there once
    titles = [row["title"][:1].lower() + row["title"][1:] for row in PAPER_SCALE["ablations"]]
    assert all(sum(title in label for label, *_ in table.rows) == 1 for title in titles)


def test_the_executor_timings_are_the_benchmarks():
    numbers, seconds = scale.executor_numbers(), EXECUTORS["seconds"]
    assert numbers["ex_in_process"] == f"{seconds['in-process']:.1f}"
    assert numbers["ex_processes"] == f"{seconds['2 local processes']:.1f}" and numbers["ex_workers"] == "2"
    assert numbers["ex_ray"] == f"{seconds['ray, local cluster of 2 CPUs']:.1f}" and numbers["ex_ray_cpus"] == "2"
    assert numbers["ex_runs"] == str(EXECUTORS["runs"])
    assert numbers["ex_cores"] == str(EXECUTORS["machine"]["logical_cpus"])


def test_the_settings_are_the_paper_profiles():
    paper, numbers = get_profile("paper"), scale.setting_numbers()
    assert numbers["members"] == f"{paper.ensemble_size:,}" and numbers["steps"] == f"{paper.dynamics_train_steps:,}"
    assert (numbers["mazes"], numbers["tasks"], numbers["task_datasets"], numbers["seeds"]) == ("4", "3", "5", "5")


def test_a_value_moved_in_the_json_moves_the_page(tmp_path):
    def edit(paper_scale, executors):
        paper_scale["distinct_runs"] = 1234
        paper_scale["paper_run_seconds"]["cpu"]["training"] = 3600 * 5.5
        paper_scale["classroom_check"]["measured_seconds"]["median"] = 301.2
        termination = next(row for row in paper_scale["ablations"] if row["ablation"] == "termination")
        termination["runs"], termination["core_hours"]["cpu"] = 300, 9999.0
        termination["wall_hours"]["1"] = {"cpu": 300 * 5.0, "wall": 300 * 9.0}
        executors["seconds"]["in-process"] = 12.34

    moved = _copy(tmp_path, edit)
    numbers = {**scale.cost_numbers(moved), **scale.executor_numbers(moved)}
    assert numbers["runs_all"] == "1,234" and numbers["runs_termination"] == "300"
    assert numbers["measured_median"] == "301" and numbers["ex_in_process"] == "12.3"
    assert _rows(scale.run_table(moved))["training one paper-size ensemble"][0].startswith("5.50–")
    assert any(row[1:3] == ("300", "9,999–2,241") for row in scale.cost_table(moved).rows)
    sweep = scale.sweep_time("termination", 64, moved)
    assert (sweep["rounds"], sweep["run_hours"], sweep["hours"]) == (5, (5.0, 9.0), (25.0, 45.0))
