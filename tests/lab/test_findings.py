"""Chapter helpers of the ablations: verdicts, level findings, live-run facts, on hand-made tables."""

import os
import subprocess
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest

from opcc_edu.lab import experiments as ex
from opcc_edu.lab import findings
from opcc_edu.lab.findings import AblationResults, Expectation


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def _table(rows):
    """Tidy table from (environment, level, metric, mean, ci) tuples."""
    return pd.DataFrame(rows, columns=["environment", "level", "metric", "mean", "ci"])


def test_trend_verdict_reads_the_smallest_and_largest_level_numerically():
    table = _table(
        [
            ("hopper", "10", "aurcc", 0.05, 0.01),
            ("hopper", "50", "aurcc", 0.15, 0.02),
            ("hopper", "9", "rpp", 0.9, 0.0),  # another metric is ignored
            ("maze2d-open", "20", "aurcc", 0.30, 0.10),
            ("maze2d-open", "100", "aurcc", 0.25, 0.10),
        ]
    )
    assert findings.trend_verdict(table, level_prefix="h=") == [
        "hopper: AURCC h=10 0.050 -> h=50 0.150: grows (separated)",
        "maze2d-open: AURCC h=20 0.300 -> h=100 0.250: does not grow (not separated)",
    ]


def test_trend_verdict_counts_missing_intervals_as_overlapping():
    table = _table([("hopper", "10", "aurcc", 0.1, np.nan), ("hopper", "50", "aurcc", 0.9, np.nan)])
    assert findings.trend_verdict(table) == ["hopper: AURCC 10 0.100 -> 50 0.900: grows (not separated)"]


def test_contrast_verdict_judges_each_expectation():
    table = _table(
        [
            ("hopper", "ev", "aurcc", 0.150, 0.0),
            ("hopper", "pci", "aurcc", 0.120, 0.0),
            ("hopper", "ev", "cr_k", 0.90, 0.0),
            ("hopper", "pci", "cr_k", 0.20, 0.0),
            ("walker2d", "ev", "aurcc", 0.070, 0.0),
            ("walker2d", "pci", "aurcc", 0.080, 0.0),
            ("walker2d", "ev", "cr_k", 0.20, 0.0),
            ("walker2d", "pci", "cr_k", 0.20, 0.0),
        ]
    )
    finding = [Expectation("aurcc", "lower"), Expectation("cr_k", "lower", digits=2)]
    assert findings.contrast_verdict(table, "pci", "ev", finding) == [
        "hopper: AURCC PCI 0.120 vs EV 0.150 (lower); CR_K PCI 0.20 vs EV 0.90 (lower)",
        "walker2d: AURCC PCI 0.080 vs EV 0.070 (not lower); CR_K PCI 0.20 vs EV 0.20 (not lower)",
    ]
    words = [Expectation("aurcc", "lower", holds="gain", fails="no gain"), Expectation("cr_k", "higher", digits=2)]
    assert findings.contrast_verdict(table, "pci", "ev", words)[1] == (
        "walker2d: AURCC PCI 0.080 vs EV 0.070 (no gain); CR_K PCI 0.20 vs EV 0.20 (not higher)"
    )


@pytest.mark.parametrize("bad", [{"metric": "ece", "direction": "lower"}, {"metric": "aurcc", "direction": "down"}])
def test_expectation_rejects_unknown_metric_or_direction(bad):
    with pytest.raises(ValueError, match=next(k for k in bad if bad[k] in ("ece", "down"))):
        Expectation(**bad)


def test_ensemble_size_verdict():
    table = _table(
        [
            ("hopper", "2", "aurcc", 0.140, 0.0),
            ("hopper", "10", "aurcc", 0.145, 0.0),
            ("hopper", "2", "cr_k", 0.30, 0.0),
            ("hopper", "10", "cr_k", 0.50, 0.0),
            ("hopper", "5", "cr_k", 0.99, 0.0),
            ("hopper", "5", "aurcc", 0.99, 0.0),
        ]
    )
    assert findings.ensemble_size_verdict(table) == [
        "hopper: 2 -> 10 members: AURCC 0.140 -> 0.145 (change +0.005); CR_K 0.30 -> 0.50 (grows)"
    ]


@pytest.mark.parametrize("far, verdict", [(0.5, "reproduced"), (0.12, "not reproduced")])
def test_dataset_spread_verdict(far, verdict):
    table = _table(
        [
            ("hopper", "medium", "aurcc", 0.10, 0.0),
            ("hopper", "expert", "aurcc", 0.15, 0.0),
            ("walker2d", "medium", "aurcc", far, 0.0),
            ("walker2d", "expert", "aurcc", far, 0.0),
        ]
    )
    lines = findings.dataset_spread_verdict(table)
    assert lines[0] == "largest AURCC spread across datasets within one environment: 0.050 (hopper)"
    assert lines[1] == f"spread of the environments' mean AURCC: {abs(far - 0.125):.3f}"
    assert lines[2] == f"environments matter more than dataset types: {verdict}"


def test_level_difference_verdict_names_the_levels_by_their_display_names():
    table = _table(
        [
            ("hopper", "0", "aurcc", 0.20, 0.01),
            ("hopper", "5", "aurcc", 0.10, 0.01),
            ("walker2d", "0", "aurcc", 0.10, 0.05),
            ("walker2d", "5", "aurcc", 0.12, 0.05),
        ]
    )
    assert findings.level_difference_verdict(table, "prior-scale") == [
        "hopper: AURCC lower with 5 than with 0 (no prior) by 0.100 (separated)",
        "walker2d: AURCC higher with 5 than with 0 (no prior) by 0.020 (not separated)",
    ]


def test_level_findings_sets_ours_beside_the_papers_differences():
    # The paper (Table 6): hopper AURCC 0.141 with no prior, 0.145 with prior 5 -- a small increase.
    table = _table([("hopper", "0", "aurcc", 0.20, 0.01), ("hopper", "5", "aurcc", 0.10, 0.01)])
    found = findings.level_findings(table, "prior-scale")
    row = found[found["metric"] == "aurcc"].iloc[0]
    assert (row["reference"], row["level"]) == ("0", "5")
    assert row["difference_ours"] == pytest.approx(-0.10) and row["separated_ours"]
    assert row["difference_paper"] > 0 and not row["same_direction"]
    assert findings.agreement_summary(found) == [
        "0 of 1 level differences with a paper counterpart point the same way;",
        "separated (95% interval excludes zero): ours 1 of 1, "
        f"paper (disjoint 95% intervals) {int(bool(row['separated_paper']))} of 1",
    ]


def test_level_findings_without_a_paper_counterpart_leaves_the_direction_open():
    table = _table([("hopper", "default", "aurcc", 0.2, 0.01), ("hopper", "clip=False", "aurcc", 0.3, 0.01)])
    found = findings.level_findings(table, "clipping")
    assert found["difference_paper"].isna().all()
    assert found["same_direction"].isna().all()
    assert findings.agreement_summary(found) == [
        "the paper reports no numbers for these levels, so no difference has a counterpart to agree with;",
        f"separated (95% interval excludes zero): ours {int(found['separated_ours'].sum())} of {len(found)}",
    ]
    assert "0 of 0" not in " ".join(findings.agreement_summary(found))


def _live(results, table, factor_dataset=False):
    grid = ex.GridSpec(("hopper",), {"hopper": ("medium", "expert")}, (0, 1))
    ablation = ex.get_ablation("dataset-type" if factor_dataset else "horizon")
    return AblationResults("live", ablation, Path("."), results, table, pd.DataFrame(), grid=grid, seconds=1.0)


def _live_frames(n_samples, aurcc=0.1, cr_k=0.3):
    results = pd.DataFrame({"aurcc": [aurcc, 0.2], "rpp": [0.0, 0.1], "cr_k": [cr_k, 0.5], "loss": [0.2, 0.3]})
    table = pd.DataFrame({"environment": ["hopper", "hopper"], "level": ["10", "50"], "n_samples": [n_samples] * 2})
    return results, table


def test_live_run_problems_is_empty_for_a_sound_run_and_names_each_broken_fact():
    assert findings.live_run_problems(_live(*_live_frames(4))) == []  # 2 seeds x 2 datasets
    assert findings.live_run_problems(_live(*_live_frames(2), factor_dataset=True)) == []  # seeds only
    assert findings.live_run_problems(_live(*_live_frames(4, aurcc=1.5))) == ["metrics outside [0, 1]: aurcc"]
    assert "CR_K below 0.2" in findings.live_run_problems(_live(*_live_frames(4, cr_k=0.1)))[0]
    assert findings.live_run_problems(_live(*_live_frames(3))) == [
        "hopper: cells must hold 4 samples (seeds x datasets)"
    ]
    no_grid = AblationResults("x", ex.get_ablation("horizon"), Path("."), *_live_frames(4), pd.DataFrame())
    with pytest.raises(ValueError, match="run_live"):
        findings.live_run_problems(no_grid)


def test_report_findings_prints_the_verdict_then_the_agreement(capsys):
    table = _table([("hopper", "0", "aurcc", 0.20, 0.01), ("hopper", "5", "aurcc", 0.10, 0.01)])
    entry = AblationResults("tiny", ex.get_ablation("prior-scale"), Path("."), pd.DataFrame(), table, pd.DataFrame())
    found = findings.report_findings(entry, ["my verdict"])
    out = capsys.readouterr().out.splitlines()
    assert "my verdict" in out
    assert out[-2].startswith("0 of 1 level differences") and out[-1].startswith("separated")
    assert len(found) == 1


def test_paper_table_has_the_metrics_or_says_there_is_none(capsys):
    assert findings.paper_table("clipping") is None
    assert "no table" in capsys.readouterr().out
    wide = findings.paper_table("horizon")
    assert list(wide.columns) == list(ex.METRICS)
    hopper = wide.xs("hopper", level="environment")["aurcc"]
    assert len(hopper) == 5 and hopper.iloc[0] < hopper.iloc[-1]


def test_describe_plan_prints_the_grid_it_returns(capsys):
    grid = findings.describe_plan("horizon", "tiny")
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "Query horizon: factor 'horizon', confidence function EV"
    assert out[1].startswith(f"profile tiny: {len(grid)} runs")
    assert [line.strip() for line in out[2 : 2 + len(grid)]] == [run.run_id for run in grid.runs()]
    assert out[-1].startswith("the paper profile needs")


def test_load_committed_matches_the_experiments_functions():
    committed = findings.load_committed("prior-scale")
    if not committed:
        pytest.skip("no committed results in this checkout")
    directories = ex.committed_profiles(ablation="prior-scale")
    assert list(committed) == [f"{ex.results_recipe(d)}/{d.name}" for d in directories]  # no name shadows another
    for (name, entry), directory in zip(committed.items(), directories, strict=True):
        recipe = ex.results_recipe(directory)
        assert entry.name == name and entry.directory == directory
        pd.testing.assert_frame_equal(entry.table, ex.aggregate(ex.load_results(directory), "prior-scale"))
        size = ex.results_sizes(directory)["dataset_size"]  # every committed directory records its sizes
        expected = ex.compare_with_paper(entry.table, "prior-scale", recipe=recipe, dataset_size=size)
        pd.testing.assert_frame_equal(entry.comparison, expected)
        used = {int(text.split(": ")[-1].split(" transitions")[0].replace(",", "")) for text in expected["data"]}
        assert used == {size}, (name, used)  # the data column names the size the runs read
        if recipe != "paper":  # the paper's cells stand beside runs on its own query sets only
            assert not entry.comparison["comparable"].fillna(False).astype(bool).any(), name


# --------------------------------------------------------------------------------------------
# Live runs leave nothing behind in the temporary folder
# --------------------------------------------------------------------------------------------
def _dead_pid() -> int:
    child = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    return int(child.stdout)


def test_a_live_directory_is_removed_when_its_process_exits(tmp_path):
    code = (
        "import sys; from opcc_edu.lab.findings import live_directory; "
        f"d = live_directory({str(tmp_path)!r}); (d / 'tiny').mkdir(); print(d)"
    )
    child = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    made = Path(child.stdout.strip())
    assert made.parent == tmp_path and made.name.startswith("opcc_live_")
    assert not made.exists()
    assert list(tmp_path.iterdir()) == []


def test_directories_of_killed_processes_are_swept_and_others_kept(tmp_path):
    from opcc_edu.lab.findings import live_directory, remove_stale_live_directories

    killed = tmp_path / "opcc_live_killed"
    (killed / "tiny").mkdir(parents=True)
    (killed / "owner.pid").write_text(str(_dead_pid()))
    running = tmp_path / "opcc_live_running"
    running.mkdir()
    (running / "owner.pid").write_text(str(os.getpid()))
    foreign = tmp_path / "opcc_live_without_owner"  # not made by live_directory: never touched
    foreign.mkdir()
    unrelated = tmp_path / "something_else"
    unrelated.mkdir()
    (unrelated / "owner.pid").write_text(str(_dead_pid()))

    assert remove_stale_live_directories(tmp_path) == [killed]
    assert not killed.exists() and running.exists() and foreign.exists() and unrelated.exists()

    mine = live_directory(tmp_path)  # sweeps first, then creates its own
    assert mine.exists() and (mine / "owner.pid").read_text() == str(os.getpid())
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([mine.name, running.name, foreign.name, unrelated.name])


def test_load_committed_names_a_grid_under_another_root_by_that_root(tmp_path):
    root = tmp_path / "ablations-elsewhere"
    grid = ex.plan_ablation("dataset-type", "tiny", environments=["maze2d-umaze"], datasets=["1k", "10k"], seeds=2)
    answer = ex.synthetic_answer_function(n_queries=50, ensemble_size=4)
    ex.run_grid(grid, root / "paper" / "tiny", answer_fn=answer, profile="tiny", progress=False, queries="paper")
    elsewhere = findings.load_committed("dataset-type", root=root)
    assert list(elsewhere) == ["ablations-elsewhere/paper/tiny"]
    assert elsewhere["ablations-elsewhere/paper/tiny"].directory == root / "paper" / "tiny"
    # the repository's own results keep their short names, whether the root is given or found
    default = ex.find_results_root()
    if default is None:
        pytest.skip("no committed results in this checkout")
    assert list(findings.load_committed("horizon", root=default)) == list(findings.load_committed("horizon"))
    assert all(name.split("/")[0] in ("paper", "hard") for name in findings.load_committed("horizon"))


def test_a_bare_root_name_loads_the_root_of_that_name_beside_the_repositorys(tmp_path, monkeypatch):
    repo = tmp_path / "results"
    (repo / "ablations").mkdir(parents=True)
    beside = repo / "ablations-larger"
    grid = ex.plan_ablation("dataset-type", "tiny", environments=["maze2d-umaze"], datasets=["1k", "10k"], seeds=2)
    answer = ex.synthetic_answer_function(n_queries=50, ensemble_size=4)
    ex.run_grid(grid, beside / "paper" / "tiny", answer_fn=answer, profile="tiny", progress=False, queries="paper")
    monkeypatch.setenv("OPCC_EDU_RESULTS", str(repo / "ablations"))
    assert ex.sibling_results_root("ablations-larger") == beside
    assert ex.sibling_results_root("ablations-missing") is None
    by_name = findings.load_committed("dataset-type", root="ablations-larger")
    assert list(by_name) == ["ablations-larger/paper/tiny"]
    assert by_name["ablations-larger/paper/tiny"].directory == beside / "paper" / "tiny"
    assert findings.load_committed("dataset-type", root="ablations-missing") == {}
    for bad in ("results/ablations-larger", "other", "../ablations-larger"):
        with pytest.raises(ValueError, match="ablations-"):
            ex.sibling_results_root(bad)


def test_run_values_reads_each_run_of_a_level_once_with_its_queries():
    entry = findings.load_committed("termination")["paper/tiny"]
    rows = ex.ablation_rows(entry.results, "termination")
    runs = findings.run_values(entry, "hopper", "none", queries=True)
    expected = rows[(rows["environment"] == "hopper") & (rows["level"] == "none")]["run_id"].unique()
    assert [run.run_id for run, _, _ in runs] == list(expected) and len(runs) == entry.results["seed"].nunique()
    for run, values, queries in runs:
        assert run.environment == "hopper" and run.level == "none"
        saved = ex.load_run_values(entry.directory, f"hopper__{run.dataset}__seed{run.seed}__termination-none")
        np.testing.assert_array_equal(values.values_a, saved.values_a)
        assert values.values_a.shape == values.values_b.shape == (len(queries), values.values_a.shape[1])
        np.testing.assert_array_equal(np.asarray(queries.target), values.target)
    everything = findings.run_values(entry)
    assert len(everything) == rows["run_id"].nunique() and len(everything[0]) == 2
    with pytest.raises(ValueError, match=r"environment 'cartpole' has no run.*'hopper'"):
        findings.run_values(entry, "cartpole")
    with pytest.raises(ValueError, match=r"level 'sometimes' has no run.*'predefined'"):
        findings.run_values(entry, level="sometimes")
