"""The report compares like with like, and every grid records its CPU time.

Hand-made aggregates test the comparability rule cell by cell; small grids answered by a fake
answer function test the report's rows and the CPU time of ``meta.json``.
"""

from __future__ import annotations

import json
import time

import numpy as np
import pandas as pd
import pytest
from synthetic_answers import SyntheticAnswers

from opcc_edu.display import Table
from opcc_edu.lab import experiments as ex
from opcc_edu.lab.experiments.paper import LOCOMOTION_DATASETS, describe_data, is_default_level, paper_counterpart
from opcc_edu.lab.experiments.reading import grid_compute, grid_compute_text
from opcc_edu.lab.experiments.report import BESIDE_PAPER_METRICS, format_table
from opcc_edu.names import METRIC_NAMES, METRICS, TIE_FAIR_METRICS

FIVE = list(LOCOMOTION_DATASETS)


# --------------------------------------------------------------------------------------------
# The rule, cell by cell
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("ablation", "level", "datasets", "paper_level", "recipe", "expected"),
    [
        # all five locomotion datasets: the ablation's own five-dataset mean
        ("confidence", "pci", FIVE, None, "paper", (True, "confidence", "all", "pci")),
        # one dataset, the paper's default model: Table 1's cell of that dataset
        ("confidence", "ev", ["medium"], None, "paper", (True, "dataset-type", "medium", "medium")),
        ("prior-scale", "0", ["random"], None, "paper", (True, "dataset-type", "random", "random")),
        ("ensemble-count", "10", ["medium"], "100", "paper", (True, "dataset-type", "medium", "medium")),
        # one dataset, another level: Table 1 holds the default model only
        ("confidence", "pci", ["medium"], None, "paper", (False, None, None, None)),
        ("prior-scale", "5", ["medium"], None, "paper", (False, None, None, None)),
        ("ensemble-count", "2", ["medium"], "10", "paper", (False, None, None, None)),
        ("horizon", "10", ["medium"], None, "paper", (False, None, None, None)),
        # some but not all five datasets: neither the mean nor one Table 1 cell
        ("confidence", "ev", ["medium", "random"], None, "paper", (False, None, None, None)),
        # mazes: the 1m recipe, whatever the profile keeps of it
        ("horizon", "30", ["1m"], None, "paper", (True, "horizon", "1m", "30")),
        ("prior-scale", "5", ["10k"], None, "paper", (False, None, None, None)),
        # the dataset-type ablation: Table 1 per locomotion dataset, Table 2 has 1m only
        ("dataset-type", "expert", ["expert"], None, "paper", (True, "dataset-type", "expert", "expert")),
        ("dataset-type", "1m", ["1m"], None, "paper", (True, "dataset-type", "1m", "1m")),
        ("dataset-type", "10k", ["10k"], None, "paper", (False, None, None, None)),
        # another recipe's query sets are never the paper's cell
        ("confidence", "ev", FIVE, None, "hard", (False, None, None, None)),
        ("horizon", "30", ["1m"], None, "hard", (False, None, None, None)),
        # recipe not known: judged on the data alone
        ("confidence", "ev", ["medium"], None, None, (True, "dataset-type", "medium", "medium")),
    ],
)
def test_paper_counterpart(ablation, level, datasets, paper_level, recipe, expected):
    found = paper_counterpart(ablation, level, datasets, paper_level=paper_level, recipe=recipe)
    assert (found.comparable, found.ablation, found.dataset, found.level) == expected
    assert found.note, "every cell says which paper cell it is compared with, or why none"
    if recipe == "hard":
        assert "hard query sets" in found.note


def test_default_levels_are_the_model_of_table_1():
    assert is_default_level("confidence", "ev") and not is_default_level("confidence", "upci")
    assert is_default_level("ensemble-count", "10", "100") and not is_default_level("ensemble-count", "10", "80")
    assert not any(is_default_level("horizon", h) for h in ("10", "20", "30", "40", "50"))
    for name in ("prior-scale", "stochastic", "model-type", "normalization", "clipping", "termination", "mixture"):
        first, *others = ex.get_ablation(name).levels
        assert is_default_level(name, first.label), name
        assert not any(is_default_level(name, level.label) for level in others), name


def _aggregate(rows):
    """A hand-made aggregate: (environment, level, datasets, {metric: (mean, ci)})."""
    records = []
    for env, level, datasets, metrics in rows:
        for metric, (mean, ci) in metrics.items():
            records.append(
                {
                    "environment": env,
                    "factor": "confidence",
                    "level": level,
                    "metric": metric,
                    "mean": mean,
                    "ci": ci,
                    "n_samples": 3,
                    "datasets": datasets,
                    "profile": "tiny",
                }
            )
    return pd.DataFrame(records)


def _paper(table, env, dataset, level, metric="aurcc"):
    paper = ex.paper_results()
    row = paper[
        (paper["table"] == table)
        & (paper["environment"] == env)
        & (paper["dataset"] == dataset)
        & (paper["level"] == level)
        & (paper["metric"] == metric)
    ]
    assert len(row) == 1
    return float(row["mean"].iloc[0])


def test_compare_with_paper_picks_the_like_cell_or_none():
    cells = {"aurcc": (0.1, 0.01), "loss": (0.2, 0.02)}
    ours = _aggregate(
        [
            ("hopper", "ev", "medium", cells),
            ("hopper", "pci", "medium", cells),
            ("walker2d", "ev", ", ".join(FIVE), cells),
            ("walker2d", "pci", ", ".join(FIVE), cells),
            ("halfcheetah", "ev", "medium, random", cells),
            ("maze2d-umaze", "pci", "1m", cells),
            ("maze2d-large", "pci", "1m", cells),  # Table 16 has no large maze
        ]
    )
    table = ex.compare_with_paper(ours, "confidence", recipe="paper").set_index(["environment", "level", "metric"])
    hopper_ev = table.loc[("hopper", "ev", "aurcc")]
    assert hopper_ev["comparable"] is True and hopper_ev["paper_table"] == 1
    assert hopper_ev["paper_mean"] == _paper(1, "hopper", "medium", "medium")
    assert hopper_ev["paper_cell"] == "Table 1: medium (default model)"
    assert hopper_ev["data"] == "tiny, paper queries; medium: 20,000 transitions of 1,000,000"
    hopper_pci = table.loc[("hopper", "pci", "aurcc")]
    assert hopper_pci["comparable"] is False and np.isnan(hopper_pci["paper_mean"])
    assert hopper_pci["paper_cell"].startswith("not comparable: 1 of 5 datasets")
    walker = table.loc[("walker2d", "pci", "aurcc")]
    assert walker["comparable"] is True and walker["paper_table"] == 4
    assert walker["paper_mean"] == _paper(4, "walker2d", "all", "pci")
    assert "5 datasets" in walker["data"] and walker["paper_cell"] == "Table 4: mean of 5 datasets"
    assert table.loc[("halfcheetah", "ev", "loss"), "comparable"] is False
    umaze = table.loc[("maze2d-umaze", "pci", "aurcc")]
    assert umaze["comparable"] is True and umaze["paper_mean"] == _paper(16, "maze2d-umaze", "1m", "pci")
    assert umaze["data"] == "tiny, paper queries; 1m: 20,000 transitions of 1,000,000"
    large = table.loc[("maze2d-large", "pci", "aurcc")]
    assert large["comparable"] is False and large["paper_cell"] == "not reported by the paper"
    # the same cells on the hard query sets: nothing is comparable, no paper number is shown
    hard = ex.compare_with_paper(ours, "confidence", recipe="hard")
    assert not hard["comparable"].any() and hard["paper_mean"].isna().all()
    assert hard["data"].str.startswith("tiny, hard queries; ").all()


def test_compare_with_paper_without_datasets_keeps_the_ablations_own_table():
    ours = _aggregate([("hopper", "pci", "medium", {"aurcc": (0.1, 0.01)})]).drop(columns=["datasets", "profile"])
    row = ex.compare_with_paper(ours, "confidence").iloc[0]
    assert row["comparable"] is None and row["paper_mean"] == _paper(4, "hopper", "all", "pci")


def test_describe_data_names_the_transitions_behind_each_recipe():
    assert describe_data("maze2d-umaze", ["1m"], "tiny", "paper") == (
        "tiny, paper queries; 1m: 20,000 transitions of 1,000,000"
    )
    assert describe_data("maze2d-umaze", ["10k"], "tiny") == "tiny; 10k: 10,000 transitions"
    assert describe_data("maze2d-open", ["1m"], "paper") == "paper; 1m: 1,000,000 transitions"
    assert describe_data("hopper", ["random", "medium"], "classroom") == (
        "classroom; 2 datasets (random, medium): 200,000 transitions each"
    )
    # HalfCheetah's medium-replay holds fewer transitions than the classroom cut: each size is named
    assert describe_data("halfcheetah", ["random", "medium-replay"], "classroom", "paper", 200_000) == (
        "classroom, paper queries; 2 datasets: random 200,000, medium-replay 67,584 transitions"
    )


def test_format_table_states_the_data_and_the_paper_cell_and_shows_tie_fair_beside():
    cells = {m: (0.1, 0.01) for m in METRICS}
    ours = _aggregate([("hopper", "ev", "medium", cells), ("hopper", "pci", "medium", cells)])
    tie_fair = _aggregate(
        [("hopper", lv, "medium", {m: (0.3, 0.02) for m in TIE_FAIR_METRICS}) for lv in ("ev", "pci")]
    )
    comparison = ex.compare_with_paper(ours, "confidence", recipe="paper")
    table = format_table(comparison, titles={"ev": "EV", "pci": "PCI"}, tie_fair=tie_fair)
    assert table.header[:4] == ("environment", "level", "data", "paper's cell")
    assert table.header[-len(BESIDE_PAPER_METRICS) :] == tuple(METRIC_NAMES[m] for m in BESIDE_PAPER_METRICS)
    ev, pci = table.rows
    assert ev[3] == "Table 1: medium (default model)" and ev[5] == "0.133 ± 0.001"  # Table 1, hopper medium
    assert pci[3].startswith("not comparable") and pci[5] == "–" and pci[4] == "0.100 ± 0.010"
    assert ev[-1] == "0.300 ± 0.020"
    latex = format_table(comparison, fmt="latex", tie_fair=tie_fair)
    assert latex.startswith("\\begin{tabular}{llll" + "r" * 11 + "}")


# --------------------------------------------------------------------------------------------
# Small grids: the report's rows and the CPU time of meta.json
# --------------------------------------------------------------------------------------------
def test_the_report_states_profile_recipe_data_and_comparability_on_every_row(tmp_path):
    root = tmp_path / "ablations"
    grid = ex.plan_ablation("prior-scale", "tiny", environments=["maze2d-umaze"], datasets=["1m"], seeds=2)
    ex.run_grid(grid, root / "paper" / "tiny", answer_fn=SyntheticAnswers(), progress=False, queries="paper")
    ex.run_grid(grid, root / "hard" / "tiny", answer_fn=SyntheticAnswers(), progress=False, queries="hard")
    chunks = ex.report_chunks(root)
    text = ex.report_text(root)
    assert text.index("## Profile tiny, paper query sets") < text.index("## Profile tiny, hard query sets")
    assert "CPU time" in text and "Still open: no run of the paper profile" in text
    tables = [c for c in chunks if isinstance(c, Table) and "paper's cell" in c.header]
    assert len(tables) == 2 * len(ex.ABLATIONS)  # two recipes; every ablation reads the shared default runs
    for table in tables:
        for row in table.rows:
            data, cell = row[2], row[3]
            assert data.startswith(("tiny, paper queries; 1m: 20,000 transitions of 1,000,000", "tiny, hard queries"))
            assert cell.startswith(("Table ", "not comparable", "not reported"))
            if data.startswith("tiny, hard"):
                assert cell == "not comparable: hard query sets, not the paper's" and row[5] == "–"
    prior = text.split("### Randomized constant prior")[1].split("Tie-fair metrics of the same cells")[0]
    assert "| maze2d-umaze | 5 | tiny, paper queries; 1m: 20,000 transitions of 1,000,000 | Table 10: 1m |" in prior
    latex = ex.report_text(root, "latex")
    assert "\\begin{tabular}{llll" in latex and "±" not in latex


def test_each_invocation_records_its_cpu_time_with_its_children(tmp_path):
    directory = tmp_path / "grid"
    grid = ex.plan_ablation("horizon", "tiny", environments=["maze2d-umaze"], datasets=["1m"], seeds=2)
    start = time.perf_counter()
    ex.run_grid(grid, directory, answer_fn=SyntheticAnswers(child_seconds=0.4), progress=False, label="horizon")
    wall = time.perf_counter() - start
    meta = ex.read_meta(directory)
    (session,) = meta["sessions"]
    # two runs, each with a child process that burns 0.4 s of CPU: counted in the session
    assert 0.8 <= session["cpu_seconds"] <= 0.8 + wall
    assert meta["total_cpu_seconds"] == session["cpu_seconds"] and meta["sessions_with_cpu_seconds"] == 1
    found = grid_compute(directory)
    assert found == {
        "wall_seconds": session["wall_seconds"],
        "cpu_seconds": session["cpu_seconds"],
        "sessions": 1,
        "sessions_with_cpu": 1,
    }
    assert grid_compute_text(directory) == (
        f"wall time {session['wall_seconds']:.0f} s, CPU time {session['cpu_seconds']:.0f} s"
    )


def test_sessions_written_before_cpu_time_stay_readable_and_are_counted_apart(tmp_path):
    directory = tmp_path / "grid"
    directory.mkdir()
    old = {"label": "horizon", "command": "old", "machine": "m", "wall_seconds": 12.0, "runs_completed": 1}
    (directory / "meta.json").write_text(json.dumps({"sessions": [old], "total_wall_seconds": 12.0}))
    assert grid_compute(directory) == {"wall_seconds": 12.0, "cpu_seconds": 0.0, "sessions": 1, "sessions_with_cpu": 0}
    assert grid_compute_text(directory) == "wall time 12 s, CPU time not recorded"
    grid = ex.plan_ablation("horizon", "tiny", environments=["maze2d-umaze"], datasets=["1m"], seeds=1)
    ex.run_grid(grid, directory, answer_fn=SyntheticAnswers(), progress=False, label="horizon")
    meta = ex.read_meta(directory)
    assert meta["sessions"][0] == old and "cpu_seconds" in meta["sessions"][1]
    assert meta["sessions_with_cpu_seconds"] == 1 and meta["total_cpu_seconds"] == meta["sessions"][1]["cpu_seconds"]
    found = grid_compute(meta)
    assert found["sessions"] == 2 and found["sessions_with_cpu"] == 1
    assert found["wall_seconds"] == round(12.0 + meta["sessions"][1]["wall_seconds"], 1)
    assert "(recorded by 1 of 2 invocations; the others predate it)" in grid_compute_text(meta)
