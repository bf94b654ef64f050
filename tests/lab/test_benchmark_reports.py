"""Reports under benchmarks/results re-derive from their committed raw data, number for number.

Each report is rendered again by its script's pure rendering function from the committed JSON
and compared with the committed markdown; then one number of the JSON is moved and the rendering
must change (the rendering reads the JSON, it types nothing). :data:`REPORTS` lists every report
with the test that re-derives it, or why it has no raw data yet; a new report must be added there.
"""

from __future__ import annotations

import copy
import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results"

#: Every report under benchmarks/results: the test that re-derives it from its raw data, or, for a
#: report without committed raw data, ``None`` (it must then at least name the command that wrote it).
REPORTS = {
    "answer_quality_classroom.md": None,  # classroom-size runs; their raw runs are not committed
    "answer_quality_classroom-steps12000.md": None,
    "answer_quality_tiny.md": "test_answer_quality_reports_are_their_json",
    "reward_fit_classroom.md": None,  # classroom-size fits, not rerun on a 2-core machine
    "datasets.md": "test_datasets_report_is_its_json",
    "executors.md": "test_executors_report_is_its_json",
    "fqe.md": "test_fqe_report_is_its_json",
    "ground_truth.md": "test_ground_truth_report_is_its_json",
    "locomotion_clip.md": "test_locomotion_clip_report_is_its_json",
    "metrics.md": "test_metrics_report_is_its_json",
    "model_error_model-type_classroom.md": "test_model_error_reports_are_their_json",
    "model_error_model-type_classroom_ablations-classroom.md": "test_model_error_reports_are_their_json",
    "model_error_model-type_tiny.md": "test_model_error_reports_are_their_json",
    "original_benchmark.md": "test_original_benchmark_report_is_its_json",
    "original_gaps.md": "test_original_gaps_report_is_its_json",
    "paper_scale.md": "test_paper_scale_report_is_its_json",
    "query_recipes.md": "test_query_recipes_report_is_its_json",
    "rollout.md": "test_rollout_report_is_its_json",
    "run_time_classroom.md": "test_run_time_reports_are_their_json",
    "run_time_tiny.md": "test_run_time_reports_are_their_json",
    "training.md": "test_training_report_is_its_json",
}


def _module(name: str):
    path = ROOT / "benchmarks" / f"{name}.py"
    if not path.is_file():
        pytest.skip(f"no {path.name}")
    sys.path.insert(0, str(path.parent))
    try:
        spec = importlib.util.spec_from_file_location(f"_report_{name}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(path.parent))
    return module


def _json(name: str) -> dict:
    return json.loads((RESULTS / name).read_text())


def _md(name: str) -> str:
    return (RESULTS / name).read_text()


def _moved(data, path: tuple, by: float = 0.5):
    """A deep copy of ``data`` with the number at ``path`` moved by ``by``."""
    out = copy.deepcopy(data)
    node = out
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] += by
    return out


def _check(render, data, md: str, path: tuple, by: float = 0.5) -> None:
    assert render(data) == md
    assert render(_moved(data, path, by)) != md


def test_every_report_is_listed():
    reports = sorted(p.name for p in RESULTS.glob("*.md"))
    assert reports == sorted(REPORTS), "list each report in REPORTS with the test that re-derives it"
    tests = {name for name in globals() if name.startswith("test_")}
    assert {t for t in REPORTS.values() if t} <= tests


@pytest.mark.parametrize("name", [name for name, test in REPORTS.items() if test is None])
def test_a_report_without_raw_data_names_its_command(name):
    text = _md(name)
    assert "Written by `python benchmarks/" in text.split("\n\n")[1], name


def test_locomotion_clip_report_is_its_json():
    module = _module("locomotion_clip")
    data = _json("locomotion_clip.json")
    _check(lambda d: module.render(d, []), data, _md("locomotion_clip.md"), ("clip", 0, "modes", "health", "loss"))


def test_original_gaps_report_is_its_json():
    module = _module("original_gaps")
    records = [
        json.loads(p.read_text())
        for p in (RESULTS / "original_gaps.json", ROOT / "benchmarks/original_device/gaps/classroom_gaps.json")
    ]
    _check(module.render, records, _md("original_gaps.md"), (0, "datasets", 0, "fall_share_of_complete_episodes"))


def test_answer_quality_reports_are_their_json():
    module = _module("bench_answer_quality")
    records = sorted(RESULTS.glob("answer_quality_*.json"))
    assert records, "no answer-quality record"
    for path in records:
        data = json.loads(path.read_text())
        _check(module.render, data, _md(path.with_suffix(".md").name), ("runs", 0, "derived", "ev_loss"))
        # a hard set's heuristic moved: the target comparing EV with the heuristic reads it
        hard = next(i for i, run in enumerate(data["runs"]) if run["meta"]["recipe"] == "hard")
        assert module.render(_moved(data, ("runs", hard, "derived", "heuristic_loss"))) != _md(
            path.with_suffix(".md").name
        )


def test_executors_report_is_its_json():
    module = _module("bench_executors")
    _check(module.render, _json("executors.json"), _md("executors.md"), ("seconds", "in-process"))


def test_fqe_report_is_its_json():
    module = _module("bench_fqe")
    _check(module.render, _json("fqe.json"), _md("fqe.md"), ("samples_per_s", "vectorized"), 1000.0)


def test_rollout_report_is_its_json():
    module = _module("bench_rollout")
    path = ("runs", 0, "designs", "batched", "member_steps_per_s_wall")
    _check(module.summarize, _json("rollout.json"), _md("rollout.md"), path, 1e5)


def test_training_report_is_its_json():
    module = _module("bench_training")
    ff, ar = _json("training.json"), _json("training_ar.json")
    md = _md("training.md")
    assert module.render(ff, ar) == md
    assert module.render(_moved(ff, ("samples_per_s_wall", "batched"), 1000.0), ar) != md
    data = next(iter(ar["results"]))
    assert module.render(ff, _moved(ar, ("results", data, "ff", "mse_per_dim", 0), 0.5)) != md


def test_model_error_reports_are_their_json():
    module = _module("bench_model_error")
    for stem in ("model-type_classroom", "model-type_classroom_ablations-classroom", "model-type_tiny"):
        data = _json(f"model_error_{stem}.json")
        grid = next(iter(data["results"]))
        level = next(iter(data["results"][grid]))
        _check(module.render, data, _md(f"model_error_{stem}.md"), ("results", grid, level, 0, "mse"))


def test_run_time_reports_are_their_json():
    module = _module("bench_run_time")
    for profile in ("tiny", "classroom"):
        _check(
            lambda d, p=profile: module.render(d, p),
            _json(f"run_time_{profile}.json"),
            _md(f"run_time_{profile}.md"),
            ("runs", 0, "wall_seconds"),
            10.0,
        )


def test_paper_scale_report_is_its_json():
    module = _module("paper_scale_estimate")
    data = _json("paper_scale.json")
    _check(module.summarize, data, _md("paper_scale.md"), ("distinct_runs",), 1)
    # the estimate itself is computed from the committed training and rollout records
    assert "provenance" in data and "OMP_NUM_THREADS=1" in data["provenance"]["command"]
    assert json.loads(json.dumps(module.estimate())) == {k: v for k, v in data.items() if k != "provenance"}


def _has_command(data: dict) -> None:
    assert data["command"] and data["git_commit"], "the record names its command and commit"
    assert "OMP_NUM_THREADS=1" in data["command"], "the command pins the threads"


def test_ground_truth_report_is_its_json():
    module = _module("bench_ground_truth")
    data = _json("ground_truth.json")
    _has_command(data)
    _check(module.render, data, _md("ground_truth.md"), ("rows", 0, "batched_steps_per_s"), 1000.0)


def test_metrics_report_is_its_json():
    module = _module("bench_metrics")
    data = _json("metrics.json")
    _has_command(data)
    _check(module.render, data, _md("metrics.md"), ("seconds", "rpp_fast"), 0.01)


def test_datasets_report_is_its_json():
    module = _module("bench_datasets")
    data = _json("datasets.json")
    _has_command(data)
    _check(module.render, data, _md("datasets.md"), ("seconds", "maze raw"), 1.0)


def test_query_recipes_report_is_its_json():
    module = _module("bench_query_recipes")
    data = _json("query_recipes.json")
    _has_command(data)
    assert "OPCC_EDU_PROFILE=tiny" in data["command"]
    _check(module.render, data, _md("query_recipes.md"), ("answers", 0, "ev_loss", 0), 0.1)


def test_original_benchmark_report_is_its_json():
    """The answer tables (tiny: the runs of the record; classroom: the device record, with the no-model
    rule recomputed at the record's commit) and the agreement table re-derive from the raw records."""
    module = _module("original_benchmark")
    data = _json("original_benchmark.json")
    classroom = json.loads((ROOT / "benchmarks/original_device/classroom_original.json").read_text())
    md = _md("original_benchmark.md")
    _has_command(data)
    assert data["threads"] == 1 and sorted({r["seed"] for r in data["runs"]}) == [0, 1, 2]
    assert all("--threads 1" in r["command"] and "OMP_NUM_THREADS=1" in r["command"] for r in data["runs"])
    head = module.report_head(md)
    assert module.render(data, classroom, head) == md
    assert module.agreement_section(data) in head
    run = next(i for i, r in enumerate(data["runs"]) if r["env"] == "hopper")
    assert module.render(_moved(data, ("runs", run, "metrics", "ev", "all", "loss"), 0.1), classroom, head) != md
    assert module.render(_moved(data, ("rule", "classroom", "hopper", "loss"), 0.1), classroom, head) != md
