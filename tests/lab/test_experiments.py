"""Tests of the ablation runner: grid, scoring, resume, aggregation, paper table and reports.

The plots of these results are tested in test_plotting.py; the results store under faults in
test_store.py.

A fake answer function stands in for training: it returns (N, M) member values whose quality
depends on the run's configuration, so grids, resumption, aggregation and reports are tested
in well under a second per test without a single dynamics model.
"""

from __future__ import annotations

import json
import math
import time
import zlib

import numpy as np
import pytest

from opcc_edu.confidence import compute_confidence
from opcc_edu.lab import experiments as ex
from opcc_edu.metrics import evaluate, risk_coverage_curve

N_QUERIES = 150
MEMBERS = 10
HORIZONS = (10, 20, 30, 40, 50)


class FakeAnswers:
    """Member values = true value + member-specific noise; noise grows with ``prior_scale``.

    Member i's noise scale is ``1 + i`` so that prefixes of the ensemble really differ (a bug
    that took the wrong members would change the scores).
    """

    def __init__(self, members: int = MEMBERS, fail_on: int | None = None):
        self.members = members
        self.calls: list[str] = []
        self.fail_on = fail_on

    def __call__(self, run: ex.RunSpec, progress: bool = True) -> ex.MemberValues:
        if self.fail_on is not None and len(self.calls) == self.fail_on:
            raise RuntimeError("simulated crash")
        self.calls.append(run.run_id)
        seed = zlib.crc32(f"{run.environment}/{run.dataset}/{run.seed}".encode())
        rng = np.random.default_rng(seed)
        horizon = np.repeat(np.asarray(HORIZONS), N_QUERIES // len(HORIZONS))
        value_a = rng.normal(0.0, 1.0, N_QUERIES) * horizon / 10
        value_b = rng.normal(0.0, 1.0, N_QUERIES) * horizon / 10
        target = (value_a < value_b).astype(np.int8)
        scale = 0.3 * (1.0 + float(run.overrides.get("prior_scale", 0.0)))
        member_scale = scale * (1.0 + np.arange(self.members))[None, :] * horizon[:, None] / 30
        noise_rng = np.random.default_rng(seed + 1 + int(10 * float(run.overrides.get("prior_scale", 0.0))))
        values_a = value_a[:, None] + member_scale * noise_rng.normal(size=(N_QUERIES, self.members))
        values_b = value_b[:, None] + member_scale * noise_rng.normal(size=(N_QUERIES, self.members))
        return ex.MemberValues(values_a, values_b, target, horizon, info={"seconds": 0.0})


# --------------------------------------------------------------------------------------------
# Registry and grid
# --------------------------------------------------------------------------------------------
def test_registry_covers_every_paper_ablation_and_practice():
    expected = {
        "dataset-type": (1, 2),
        "horizon": (3, 17),
        "confidence": (4, 16),
        "ensemble-count": (5, 18),
        "prior-scale": (6, 10),
        "stochastic": (11, 12),
        "model-type": (7, 13),
        "normalization": (14, 15),
        "clipping": (),
        "termination": (),
        "reward": (),
        "mixture": (),
    }
    assert {name: a.paper_tables for name, a in ex.ABLATIONS.items()} == expected
    for ablation in ex.ABLATIONS.values():
        if not ablation.is_selection:
            # the first level is the paper's default configuration, shared by all ablations
            assert ex.configuration_label(ablation.levels[0].overrides) == "default"
            assert len({ex.configuration_label(lv.overrides) for lv in ablation.levels}) == len(ablation.levels)


def test_unknown_names_raise_value_errors_listing_choices():
    with pytest.raises(ValueError, match="prior-scale"):
        ex.get_ablation("priors")
    with pytest.raises(ValueError, match="valid choices"):
        ex.configuration_label({"learning_rate": 1.0})
    with pytest.raises(ValueError, match="environment"):
        ex.plan_ablation("horizon", environments=["maze2d-tiny"])
    with pytest.raises(ValueError, match="seeds"):
        ex.plan_ablation("horizon", seeds=0)


def test_configuration_labels_are_canonical():
    assert ex.configuration_label({}) == "default"
    assert ex.configuration_label({"prior_scale": 0}) == "default"
    assert ex.configuration_label({"prior_scale": 5.0, "stochastic": True}) == "prior_scale=5;stochastic=true"
    assert ex.configuration_label({"stochastic": True, "prior_scale": 5}) == "prior_scale=5;stochastic=true"
    assert ex._parse_configuration("prior_scale=5;stochastic=true") == {"prior_scale": 5.0, "stochastic": True}


def test_plan_shares_the_default_run_and_orders_seeds_outermost():
    grid = ex.plan_ablation(
        "prior-scale", "tiny", environments=["maze2d-umaze", "maze2d-open"], datasets=["1m"], seeds=2
    )
    ids = [run.run_id for run in grid.runs()]
    assert len(ids) == 2 * 2 * 2 == len(set(ids)) == len(grid)
    assert ids[0] == "maze2d-umaze/1m/seed0/default"
    assert all("seed0" in i for i in ids[:4])
    horizon = ex.plan_ablation("horizon", "tiny", datasets=["1m"], seeds=[3, 4])
    assert [run.run_id for run in horizon.runs()] == ["maze2d-umaze/1m/seed3/default", "maze2d-umaze/1m/seed4/default"]


def test_dataset_type_grid_uses_every_dataset_and_paper_profile_all_locomotion_data():
    grid = ex.plan_ablation("dataset-type", "tiny", environments=["hopper"], seeds=1)
    assert len(grid.datasets["hopper"]) == 5
    paper = ex.plan_ablation("horizon", "paper", environments=["hopper", "maze2d-large"], seeds=1)
    assert len(paper.datasets["hopper"]) == 5 and paper.datasets["maze2d-large"] == ("1m",)
    tiny = ex.plan_ablation("horizon", "tiny", environments=["hopper"], seeds=1)
    assert len(tiny.datasets["hopper"]) == 1
    # tiny cuts the 100k and 1m maze prefixes to the same 20,000 transitions: run one of them
    assert ex.default_datasets("maze2d-umaze", "tiny", all_types=True) == ("1k", "10k", "1m")
    assert ex.default_datasets("maze2d-umaze", "classroom", all_types=True) == ("1k", "10k", "100k", "1m")


def test_ensemble_count_levels_scale_the_paper_fractions():
    assert ex.ensemble_count_levels(100) == ((10, 10), (20, 20), (40, 40), (80, 80), (100, 100))
    assert [c for c, _ in ex.ensemble_count_levels(20)] == [2, 4, 8, 16, 20]
    assert [c for c, _ in ex.ensemble_count_levels(10)] == [2, 2, 4, 8, 10]
    with pytest.raises(ValueError):
        ex.ensemble_count_levels(0)


# --------------------------------------------------------------------------------------------
# Scoring
# --------------------------------------------------------------------------------------------
def test_score_run_matches_direct_evaluation_for_every_subset():
    values = FakeAnswers()(ex.RunSpec("maze2d-umaze", "1m", 0, {}))
    rows = ex.score_run(values)
    # 4 distinct prefix sizes x 3 confidences on all queries + 3 confidences x 5 horizons
    assert len(rows) == 4 * 3 + 3 * 5
    lookup = {(r["horizon"], r["confidence"], r["ensemble_count"]): r for r in rows}
    for name in ("ev", "pci", "upci"):
        for m in (2, 4, 8, 10):
            prediction, confidence = compute_confidence(name, values.values_a[:, :m], values.values_b[:, :m])
            direct = evaluate(prediction, values.target, confidence)
            row = lookup[("all", name, m)]
            assert all(math.isclose(row[k], direct[k]) for k in ex.METRICS)
            assert row["ensemble_size"] == 10 and row["n"] == N_QUERIES
        prediction, confidence = compute_confidence(name, values.values_a, values.values_b)
        for h in HORIZONS:
            mask = values.horizon == h
            direct = evaluate(prediction[mask], values.target[mask], confidence[mask])
            assert math.isclose(lookup[(str(h), name, 10)]["aurcc"], direct["aurcc"])
            assert lookup[(str(h), name, 10)]["n"] == mask.sum()
    # members 0..m-1 are used: the 2-member prefix (least noisy members) differs from the full one
    assert lookup[("all", "ev", 2)]["aurcc"] != lookup[("all", "ev", 10)]["aurcc"]


def test_run_values_average_monte_carlo_runs_and_validate_shapes():
    a = np.arange(24, dtype=float).reshape(2, 3, 4)
    values = ex.MemberValues(a, a + 1, [0, 1], [10, 20])
    assert values.values_a.shape == (2, 3) and values.ensemble_size == 3
    np.testing.assert_allclose(values.values_a, a.mean(axis=2))
    with pytest.raises(ValueError, match="values_a and values_b"):
        ex.MemberValues(np.zeros((2, 3)), np.zeros((2, 4)), [0, 1], [10, 20])
    with pytest.raises(ValueError, match="target"):
        ex.MemberValues(np.zeros((2, 3)), np.zeros((2, 3)), [0, 1, 1], [10, 20])
    with pytest.raises(ValueError, match="finite"):
        ex.MemberValues(np.full((2, 3), np.nan), np.zeros((2, 3)), [0, 1], [10, 20])


# --------------------------------------------------------------------------------------------
# Runner: table on disk, resume
# --------------------------------------------------------------------------------------------
def test_run_grid_writes_table_runs_values_and_meta(tmp_path):
    fake = FakeAnswers()
    grid = ex.plan_ablation("prior-scale", "tiny", datasets=["1m"], seeds=3)
    results = ex.run_grid(
        grid, tmp_path, answer_fn=fake, profile="tiny", progress=False, label="prior-scale", command="test"
    )
    assert len(fake.calls) == 6
    assert list(results.columns) == list(ex.RESULT_COLUMNS)
    assert len(results) == 6 * 27
    assert set(results["configuration"]) == {"default", "prior_scale=5"}
    assert (tmp_path / "runs.csv").read_text().count("\n") == 7
    meta = json.loads((tmp_path / "meta.json").read_text())
    assert meta["sessions"][0]["command"] == "test" and meta["sessions"][0]["runs_completed"] == 6
    assert "CPU cores" in meta["sessions"][0]["machine"]
    saved = ex.load_run_values(tmp_path, grid.runs()[0])
    again = fake(grid.runs()[0])
    np.testing.assert_allclose(saved.values_a, again.values_a, rtol=1e-6)
    np.testing.assert_array_equal(saved.target, again.target)


def test_finished_runs_are_not_repeated_and_other_ablations_reuse_the_default_run(tmp_path):
    fake = FakeAnswers()
    ex.run_grid(
        ex.plan_ablation("prior-scale", "tiny", datasets=["1m"], seeds=2), tmp_path, answer_fn=fake, progress=False
    )
    assert len(fake.calls) == 4
    ex.run_grid(
        ex.plan_ablation("prior-scale", "tiny", datasets=["1m"], seeds=2), tmp_path, answer_fn=fake, progress=False
    )
    assert len(fake.calls) == 4
    # horizon, confidence and ensemble count read the default runs already there
    for name in ("horizon", "confidence", "ensemble-count"):
        ex.run_grid(ex.plan_ablation(name, "tiny", datasets=["1m"], seeds=2), tmp_path, answer_fn=fake, progress=False)
    assert len(fake.calls) == 4


def test_an_interrupted_grid_resumes_where_it_stopped(tmp_path):
    grid = ex.plan_ablation("prior-scale", "tiny", datasets=["1m"], seeds=3)
    crashing = FakeAnswers(fail_on=2)
    with pytest.raises(ex.RunsFailedError, match="simulated crash"), pytest.warns(ex.RunFailureWarning):
        ex.run_grid(grid, tmp_path, answer_fn=crashing, progress=False, retries=1)
    assert len(ex.load_results(tmp_path)["run_id"].unique()) == 2
    # a crash in the middle of the next write: rows of an unfinished run and a torn line
    with open(tmp_path / "results.csv", "a") as handle:
        handle.write("maze2d-umaze,1m,2,default,all,ev,10,10,0.5,0.1,0.2,0.3,150,tiny,maze2d-umaze/1m/seed2/default\n")
        handle.write("maze2d-umaze,1m,2,defa")
    resumed = FakeAnswers()
    with pytest.warns(ex.StoreWarning, match="results.quarantine.csv"):
        results = ex.run_grid(grid, tmp_path, answer_fn=resumed, progress=False)
    assert resumed.calls == [run.run_id for run in grid.runs()[2:]]
    assert len(results) == 6 * 27 and results["run_id"].nunique() == 6
    assert (tmp_path / "results.csv").read_text().count("\n") == 6 * 27 + 1
    # the complete table equals one uninterrupted run
    fresh = ex.run_grid(grid, tmp_path / "fresh", answer_fn=FakeAnswers(), progress=False)
    key = ["run_id", "horizon", "confidence", "ensemble_count"]
    a = results.sort_values(key).reset_index(drop=True)
    b = fresh.sort_values(key).reset_index(drop=True)
    np.testing.assert_allclose(a[list(ex.METRICS)].to_numpy(), b[list(ex.METRICS)].to_numpy())
    meta = json.loads((tmp_path / "meta.json").read_text())
    assert [s["runs_completed"] for s in meta["sessions"]] == [2, 4]


def test_max_runs_stops_early(tmp_path):
    fake = FakeAnswers()
    grid = ex.plan_ablation("prior-scale", "tiny", datasets=["1m"], seeds=3)
    ex.run_grid(grid, tmp_path, answer_fn=fake, progress=False, max_runs=1)
    assert len(fake.calls) == 1


# --------------------------------------------------------------------------------------------
# Aggregation
# --------------------------------------------------------------------------------------------
def _grid_results(tmp_path, name="prior-scale", seeds=4):
    grid = ex.plan_ablation(name, "tiny", datasets=["1m"], seeds=seeds)
    return grid, ex.run_grid(grid, tmp_path, answer_fn=FakeAnswers(), progress=False)


def test_aggregate_is_the_t_interval_over_seeds(tmp_path):
    from scipy import stats

    grid, results = _grid_results(tmp_path)
    table = ex.aggregate(results, "prior-scale", grid=grid)
    assert list(table["level"].unique()) == ["0", "5"]
    assert set(table["n_samples"]) == {4}
    for level, config in (("0", "default"), ("5", "prior_scale=5")):
        samples = results[
            (results["configuration"] == config)
            & (results["horizon"] == "all")
            & (results["confidence"] == "ev")
            & (results["ensemble_count"] == 10)
        ]["aurcc"].to_numpy()
        assert samples.size == 4
        half = stats.t.ppf(0.975, 3) * samples.std(ddof=1) / 2.0
        row = table[(table["level"] == level) & (table["metric"] == "aurcc")].iloc[0]
        assert math.isclose(row["mean"], samples.mean()) and math.isclose(row["ci"], half)
    # the fake's prior makes members noisier and answers worse: the aggregate must show it
    loss = table[table["metric"] == "loss"].set_index("level")["mean"]
    assert loss["5"] > loss["0"]


def test_aggregate_selection_factors(tmp_path):
    _, results = _grid_results(tmp_path, "horizon", seeds=2)
    horizon = ex.aggregate(results, "horizon")
    assert list(horizon["level"].unique()) == [str(h) for h in HORIZONS]
    # the fake's noise grows with the horizon, and so does the loss
    loss = horizon[horizon["metric"] == "loss"]["mean"].to_numpy()
    assert loss[-1] > loss[0]
    confidence = ex.aggregate(results, "confidence")
    assert list(confidence["level"].unique()) == ["ev", "pci", "upci"]
    counts = ex.aggregate(results, "ensemble-count")
    assert list(counts["level"].unique()) == ["2", "4", "8", "10"]
    single = ex.aggregate(results[results["seed"] == 0], "horizon")
    assert single["ci"].isna().all() and set(single["n_samples"]) == {1}


def test_level_risk_coverage_averages_horizons_then_runs(tmp_path):
    grid, results = _grid_results(tmp_path, "horizon", seeds=2)
    curves = ex.level_risk_coverage(tmp_path, "confidence", "maze2d-umaze", grid_points=11)
    assert list(curves) == ["ev", "pci", "upci"]
    # brute force for EV: per run, interpolate each horizon's RCC, average, then average runs
    expected = []
    for run in grid.runs():
        values = ex.load_run_values(tmp_path, run)
        prediction, confidence = compute_confidence("ev", values.values_a, values.values_b)
        per_h = []
        for h in HORIZONS:
            mask = values.horizon == h
            cov, risk, _ = risk_coverage_curve(prediction[mask], values.target[mask], confidence[mask])
            per_h.append(np.interp(np.linspace(0, 1, 11), cov, risk))
        expected.append(np.mean(per_h, axis=0))
    np.testing.assert_allclose(curves["ev"]["risk"], np.mean(expected, axis=0))
    assert int(curves["ev"]["n_runs"]) == 2 and np.all(np.isfinite(curves["ev"]["ci"]))
    # at full coverage the curve is the mean loss over horizons
    ev_all = results[(results["confidence"] == "ev") & (results["horizon"] != "all")]
    assert math.isclose(curves["ev"]["risk"][-1], ev_all["loss"].mean())
    horizon_curves = ex.level_risk_coverage(tmp_path, "horizon", "maze2d-umaze", grid_points=11, results=results)
    assert list(horizon_curves) == [str(h) for h in HORIZONS]


# --------------------------------------------------------------------------------------------
# The paper's numbers and the comparison
# --------------------------------------------------------------------------------------------
def test_paper_results_hold_every_cell_of_the_ablation_tables():
    paper = ex.paper_results()
    assert len(paper) == 636
    counts = paper.groupby("table").size().to_dict()
    # rows x 4 metrics per table, as printed in the paper
    assert counts == {
        1: 60,
        2: 16,
        3: 60,
        4: 36,
        5: 60,
        6: 24,
        7: 24,
        10: 32,
        11: 24,
        12: 32,
        13: 32,
        14: 24,
        15: 32,
        16: 36,
        17: 64,
        18: 80,
    }
    assert set(paper["metric"]) == set(ex.METRICS)
    assert paper["source"].str.contains("Table").all()
    assert all(paper.apply(lambda r: f"Table {r['table']};" in r["source"], axis=1))
    for name, ablation in ex.ABLATIONS.items():
        rows = ex.paper_results(name)
        assert set(rows["table"]) == set(ablation.paper_tables)

    def cell(table, env, level, metric):
        row = paper[
            (paper["table"] == table)
            & (paper["environment"] == env)
            & (paper["level"] == level)
            & (paper["metric"] == metric)
        ]
        assert len(row) == 1
        return row.iloc[0]

    golden = cell(6, "halfcheetah", "5", "aurcc")
    assert (golden["mean"], golden["ci"]) == (0.236, 0.005)
    assert cell(17, "maze2d-large", "40", "aurcc")["mean"] == 0.218
    bound = cell(15, "maze2d-umaze", "false", "aurcc")
    assert bound["mean"] == 0.003 and bool(bound["ci_is_bound"]) and bound["ci"] == 0.001
    # the paper labels its switch "deterministic"; True there is our stochastic = false
    assert cell(11, "hopper", "false", "cr_k")["mean"] == 0.428
    assert cell(11, "hopper", "false", "cr_k")["paper_level"] == "True"
    assert cell(5, "walker2d", "100", "rpp")["mean"] == 0.011
    assert cell(2, "maze2d-large", "1m", "loss")["mean"] == 0.251


def test_compare_with_paper_maps_prefix_sizes_and_checks_overlap(tmp_path):
    _, results = _grid_results(tmp_path, "ensemble-count", seeds=2)
    ours = ex.aggregate(results, "ensemble-count")
    table = ex.compare_with_paper(ours, "ensemble-count")
    aurcc = table[table["metric"] == "aurcc"]
    assert list(aurcc["paper_level"]) == ["10", "20", "40", "80", "100"]
    assert list(aurcc["level"]) == ["2", "2", "4", "8", "10"]
    assert list(aurcc["paper_mean"]) == [0.011, 0.009, 0.008, 0.008, 0.008]  # Table 18, umaze
    row = aurcc.iloc[-1]
    lo, hi = row["ours_mean"] - row["ours_ci"], row["ours_mean"] + row["ours_ci"]
    assert bool(row["overlap"]) == (lo <= 0.008 + 0.001 and 0.008 - 0.001 <= hi)
    # an environment without paper numbers gets nan, not an error
    ours_other = ours.assign(environment="maze2d-open-x")
    missing = ex.compare_with_paper(ours_other, "ensemble-count")
    assert missing["paper_mean"].isna().all() and missing["overlap"].isna().all()


# --------------------------------------------------------------------------------------------
# Reports, dry runs and argument checks
# --------------------------------------------------------------------------------------------
def test_reports_in_markdown_and_latex(tmp_path):
    root = tmp_path / "ablations"
    for name in ("prior-scale", "horizon"):
        ex.run_grid(
            ex.plan_ablation(name, "tiny", datasets=["1m"], seeds=2),
            root / "tiny",
            answer_fn=FakeAnswers(),
            progress=False,
            label=name,
            command=f"opcc-edu ablation {name}",
        )
    markdown = ex.report_text(root, "markdown")
    assert "### Randomized constant prior (paper tables: 6, 10)" in markdown
    assert "### Query horizon (paper tables: 3, 17)" in markdown
    assert "| maze2d-umaze | 5 |" in markdown
    assert "0.006 ± 0.001" in markdown  # Table 10, umaze, prior scale 5
    assert "`opcc-edu ablation prior-scale`" in markdown
    assert "Ensemble size" in markdown  # read from the shared default runs
    latex = ex.report_text(root, "latex")
    assert "\\begin{tabular}" in latex and "\\toprule" in latex and "$\\pm$" in latex and "95\\%" in latex
    assert "0.002 ± (<0.001)" in markdown  # Table 10, umaze RPP: the paper's bound is kept
    assert "±" not in latex
    path = ex.write_report(root, "latex")
    assert path.name == "report.tex" and path.read_text() == latex
    with pytest.raises(FileNotFoundError):
        ex.report_text(tmp_path / "nothing")
    with pytest.raises(ValueError, match="format"):
        ex.report_text(root, "html")


def test_dry_run_lists_the_plan_without_writing_and_reports_are_written(tmp_path):
    root = tmp_path / "ablations"
    plan = ex.run_ablation("prior-scale", out=root, profile="tiny", datasets=["1m"], dry_run=True)
    assert len(plan) == 4 and not plan["done"].any() and "maze2d-umaze/1m/seed1/prior_scale=5" in set(plan["run_id"])
    assert not root.exists(), "a dry run writes nothing"
    ex.run_grid(
        ex.plan_ablation("prior-scale", "tiny", datasets=["1m"], seeds=2),
        root / "paper" / "tiny",
        answer_fn=FakeAnswers(),
        progress=False,
    )
    assert ex.run_ablation("prior-scale", out=root, profile="tiny", datasets=["1m"], dry_run=True)["done"].all()
    fake = FakeAnswers()
    ex.run_ablation(
        "prior-scale", out=root, profile="tiny", datasets=["1m"], seeds=3, answer_fn=fake, progress=False, max_runs=1
    )
    assert len(fake.calls) == 1
    path = ex.write_report(root, "markdown")
    assert path == root / "report.md" and "Randomized constant prior" in path.read_text()
    with pytest.raises(FileNotFoundError):
        ex.write_report(tmp_path / "empty")


def test_bad_arguments_are_refused_before_anything_runs(tmp_path):
    fake = FakeAnswers()
    with pytest.raises(ValueError, match="max_runs"):
        ex.run_ablation("horizon", out=tmp_path, profile="tiny", answer_fn=fake, max_runs=-1)
    with pytest.raises(ValueError, match="max_runs"):
        ex.run_ablation("horizon", out=tmp_path, profile="tiny", max_runs=-1, dry_run=True)
    with pytest.raises(ValueError, match="1k, 10k, 100k, 1m"):
        ex.run_ablation("horizon", out=tmp_path, profile="tiny", datasets=["2m"], dry_run=True)
    with pytest.raises(ValueError, match="random"):
        ex.plan_ablation("horizon", "tiny", environments=["hopper"], datasets=["1m"])
    assert fake.calls == [] and not any(tmp_path.iterdir())
    ex.run_grid(
        ex.plan_ablation("horizon", "tiny", datasets=["1m"], seeds=1), tmp_path / "tiny", answer_fn=fake, progress=False
    )
    with pytest.raises(ValueError, match="valid choices: tiny"):
        ex.report_text(tmp_path, profiles=["bogus"])


# --------------------------------------------------------------------------------------------
# The real pipeline, when it is available
# --------------------------------------------------------------------------------------------
def test_real_runner_smoke_on_the_tiny_profile(tmp_path, monkeypatch):
    baselines = pytest.importorskip("opcc_edu.baselines")
    if not hasattr(baselines, "answer_queries"):
        pytest.skip("opcc_edu.baselines.answer_queries is not available")
    try:
        from opcc_edu.queries import load_queries

        load_queries("maze2d-umaze")
    except Exception as exc:  # noqa: BLE001 - no shipped query set yet
        pytest.skip(f"no query set for maze2d-umaze: {exc}")
    monkeypatch.setenv("OPCC_EDU_CACHE", str(tmp_path / "cache"))
    grid = ex.GridSpec(("maze2d-umaze",), {"maze2d-umaze": ("1k",)}, (0,))
    start = time.perf_counter()
    results = ex.run_grid(grid, tmp_path / "out", profile="tiny", progress=False)
    assert time.perf_counter() - start < 120
    assert results["run_id"].nunique() == 1
    row = results[
        (results["horizon"] == "all")
        & (results["confidence"] == "ev")
        & (results["ensemble_count"] == results["ensemble_size"])
    ].iloc[0]
    assert 0.0 <= row["aurcc"] <= 1.0
    assert 0.0 <= row["loss"] <= 1.0 and row["n"] > 0


def test_level_differences_use_the_papers_interval_reading():
    paper = ex.paper_results("prior-scale")
    diffs = ex.level_differences(paper, "prior-scale")
    row = diffs[(diffs["environment"] == "maze2d-large") & (diffs["metric"] == "aurcc")].iloc[0]
    # Table 10, large maze: 0.14 +- 0.015 without prior, 0.104 +- 0.017 with scale 5
    assert row["reference"] == "0" and row["level"] == "5"
    assert math.isclose(row["difference"], 0.104 - 0.14) and row["separated"]
    row = diffs[(diffs["environment"] == "hopper") & (diffs["metric"] == "aurcc")].iloc[0]
    assert not row["separated"]  # Table 6: 0.141 +- 0.005 vs 0.145 +- 0.003
    horizon = ex.level_differences(ex.paper_results("horizon"), "horizon")
    assert set(horizon[horizon["environment"] == "hopper"]["reference"]) == {"10"}


def test_synthetic_answer_function_is_deterministic_and_harder_at_long_horizons(tmp_path):
    answer = ex.synthetic_answer_function(n_queries=500, ensemble_size=6)
    run = ex.RunSpec("maze2d-umaze", "1m", 0, {})
    first, second = answer(run), answer(run)
    np.testing.assert_array_equal(first.values_a, second.values_a)
    assert first.values_a.shape == (500, 6) and set(first.horizon) == set(HORIZONS)
    other = answer(ex.RunSpec("maze2d-umaze", "1m", 1, {}))
    assert not np.array_equal(first.values_a, other.values_a)
    results = ex.run_grid(
        ex.plan_ablation("horizon", "tiny", datasets=["1m"], seeds=3), tmp_path, answer_fn=answer, progress=False
    )
    loss = ex.aggregate(results, "horizon").query("metric == 'loss'")["mean"].to_numpy()
    assert loss[-1] > loss[0]


def test_committed_results_prefers_the_largest_profile(tmp_path):
    root = tmp_path / "results" / "ablations"
    assert ex.committed_results(root) is None
    answer = ex.synthetic_answer_function(n_queries=50, ensemble_size=4)
    ex.run_grid(
        ex.plan_ablation("horizon", "tiny", datasets=["1m"], seeds=1),
        root / "paper" / "tiny",
        answer_fn=answer,
        progress=False,
    )
    assert ex.committed_results(root) == root / "paper" / "tiny"
    ex.run_grid(
        ex.plan_ablation("horizon", "classroom", datasets=["1m"], seeds=1),
        root / "paper" / "classroom",
        answer_fn=answer,
        profile="classroom",
        progress=False,
    )
    assert ex.committed_results(root) == root / "paper" / "classroom"
    assert ex.find_results_root(tmp_path / "results") == root
    assert ex.read_meta(root / "paper" / "tiny")["sessions"][0]["runs_completed"] == 1


def test_committed_results_for_one_ablation(tmp_path):
    root = tmp_path / "ablations"
    answer = ex.synthetic_answer_function(n_queries=50, ensemble_size=4)
    ex.run_grid(
        ex.plan_ablation("prior-scale", "tiny", datasets=["1m"], seeds=1),
        root / "paper" / "tiny",
        answer_fn=answer,
        progress=False,
    )
    ex.run_grid(
        ex.plan_ablation("horizon", "classroom", datasets=["1m"], seeds=1),
        root / "paper" / "classroom",
        answer_fn=answer,
        profile="classroom",
        progress=False,
    )
    assert ex.committed_results(root, ablation="horizon") == root / "paper" / "classroom"
    assert ex.committed_results(root, ablation="prior-scale") == root / "paper" / "tiny"
    assert ex.committed_results(root, ablation="mixture") is None


def test_committed_profiles_and_runs_table(tmp_path):
    root = tmp_path / "ablations"
    answer = ex.synthetic_answer_function(n_queries=50, ensemble_size=4)
    for profile in ("tiny", "classroom"):
        ex.run_grid(
            ex.plan_ablation("horizon", profile, datasets=["1m"], seeds=2),
            root / "paper" / profile,
            answer_fn=answer,
            profile=profile,
            progress=False,
        )
    assert ex.committed_profiles(root, ablation="horizon") == [root / "paper" / "classroom", root / "paper" / "tiny"]
    assert ex.committed_profiles(root, ablation="prior-scale") == []
    runs = ex.load_runs(root / "paper" / "tiny")
    assert len(runs) == 2 and (runs["seconds"] >= 0).all() and set(runs["n_queries"]) == {50}
    rows = ex.ablation_rows(ex.load_results(root / "paper" / "tiny"), "horizon")
    assert set(rows["level"]) == {str(h) for h in HORIZONS} and set(rows["run_id"]) == set(runs["run_id"])


def test_other_ablations_ignore_the_extra_maze_prefixes_of_the_dataset_ablation(tmp_path):
    answer = ex.synthetic_answer_function(n_queries=50, ensemble_size=4)
    for name in ("dataset-type", "prior-scale"):
        ex.run_grid(ex.plan_ablation(name, "tiny", seeds=2), tmp_path, answer_fn=answer, progress=False)
    results = ex.load_results(tmp_path)
    assert set(results["dataset"]) == {"1k", "10k", "1m"}
    prior = ex.aggregate(results, "prior-scale")
    assert set(prior["n_samples"]) == {2}, "both levels on the 1m data only"
    assert set(ex.ablation_rows(results, "horizon")["dataset"]) == {"1m"}
    datasets = ex.aggregate(results, "dataset-type")
    assert list(datasets["level"].unique()) == ["1k", "10k", "1m"]
    # an environment run on other data only keeps it
    other = results[results["dataset"] == "10k"]
    assert set(ex.ablation_rows(other, "horizon")["dataset"]) == {"10k"}


def test_configuration_levels_are_compared_on_the_datasets_they_share(tmp_path):
    # The default configuration also runs every locomotion dataset for the dataset-type
    # ablation; another configuration trains on the default dataset only. Its two levels must
    # be averaged over the same data, while a selection factor keeps every dataset.
    answer = ex.synthetic_answer_function(n_queries=50, ensemble_size=4)
    for name in ("dataset-type", "prior-scale"):
        grid = ex.plan_ablation(name, "tiny", environments=["hopper"], seeds=2)
        ex.run_grid(grid, tmp_path, answer_fn=answer, progress=False)
    results = ex.load_results(tmp_path)
    assert len(set(results["dataset"])) == 5
    rows = ex.ablation_rows(results, "prior-scale")
    assert set(rows["dataset"]) == {"medium"}
    assert rows.groupby("level")["run_id"].nunique().to_dict() == {"0": 2, "5": 2}
    prior = ex.aggregate(results, "prior-scale")
    assert set(prior["n_samples"]) == {2} and set(prior["datasets"]) == {"medium"}
    assert set(ex.ablation_rows(results, "horizon")["dataset"]) == set(results["dataset"])
    # with one level present, it keeps every dataset it has
    default_only = results[results["configuration"] == "default"]
    assert set(ex.ablation_rows(default_only, "prior-scale")["dataset"]) == set(results["dataset"])


def test_configuration_ablations_leave_out_environments_missing_a_level(tmp_path):
    # The dataset-type grid runs the default model on environments that a configuration
    # ablation never ran; their single level must not appear in that ablation's table.
    answer = ex.synthetic_answer_function(n_queries=50, ensemble_size=4)
    ex.run_grid(
        ex.plan_ablation("prior-scale", "tiny", environments=["hopper"], seeds=2),
        tmp_path,
        answer_fn=answer,
        progress=False,
    )
    grid = ex.plan_ablation("dataset-type", "tiny", environments=["walker2d"], datasets=["medium"], seeds=2)
    ex.run_grid(grid, tmp_path, answer_fn=answer, progress=False)
    results = ex.load_results(tmp_path)
    assert set(results["environment"]) == {"hopper", "walker2d"}
    rows = ex.ablation_rows(results, "prior-scale")
    assert set(rows["environment"]) == {"hopper"} and set(rows["level"]) == {"0", "5"}
    assert set(ex.aggregate(results, "prior-scale")["environment"]) == {"hopper"}
    # a selection factor reads the default runs of both
    assert set(ex.ablation_rows(results, "horizon")["environment"]) == {"hopper", "walker2d"}


def test_load_run_queries_lines_up_with_the_saved_values(tmp_path):
    import shutil

    from opcc_edu.baselines import select_profile_queries
    from opcc_edu.queries import load_queries

    directory = ex.find_results_root() / "paper" / "tiny"
    if not (directory / "values").is_dir():
        pytest.skip("no committed paper/tiny results in this checkout")
    slug = "hopper__medium__seed0__default"
    values = ex.load_run_values(directory, slug)
    queries = ex.load_run_queries(directory, slug)
    assert len(queries.target) == len(values.target) == 300
    np.testing.assert_array_equal(queries.target, values.target)
    np.testing.assert_array_equal(queries.horizon, values.horizon)
    # the truth behind each target: "is the second side better?" is yes exactly where its return is higher
    returns_a, returns_b = np.asarray(queries.returns_a).ravel(), np.asarray(queries.returns_b).ravel()
    assert np.array_equal(returns_b > returns_a, np.asarray(values.target).astype(bool))
    # a run whose saved targets no longer match the shipped query set is refused, naming both
    copy = tmp_path / "paper" / "tiny"
    (copy / "values").mkdir(parents=True)
    for name in ("meta.json",):
        shutil.copy(directory / name, copy / name)
    other = select_profile_queries(load_queries("hopper", "paper"), n=300, seed=1)
    from opcc_edu.io import save_npz

    save_npz(
        copy / "values" / f"{slug}.npz",
        {
            "values_a": values.values_a,
            "values_b": values.values_b,
            "target": np.asarray(other.target),
            "horizon": np.asarray(other.horizon),
        },
        metadata={"info": {}},
    )
    with pytest.raises(ValueError, match="no longer matches run hopper__medium__seed0__default"):
        ex.load_run_queries(copy, slug)


def test_profile_query_indices_name_the_rows_select_profile_queries_keeps():
    from opcc_edu.baselines import profile_query_indices, select_profile_queries
    from opcc_edu.queries import load_queries

    queries = load_queries("hopper", "paper")
    for n in (300, 1000):
        indices = profile_query_indices(queries, n)
        assert len(indices) == n and np.all(np.diff(indices) > 0)
        np.testing.assert_array_equal(select_profile_queries(queries, n).obs_a, np.asarray(queries.obs_a)[indices])
    np.testing.assert_array_equal(profile_query_indices(queries, 0), np.arange(len(queries)))
    # draws at two sizes are not nested: they share some queries, not all of the smaller one's
    shared = np.intersect1d(profile_query_indices(queries, 300), profile_query_indices(queries, 1000))
    assert 0 < len(shared) < 300


def test_rescore_on_shared_queries_scores_each_run_on_the_queries_every_directory_answered(tmp_path):
    """Two grids at 300 and 1,000 queries of one shipped set, whose member values are a fixed
    function of the query: on their shared queries every run scores the same in both."""
    import pandas as pd

    from opcc_edu.baselines import profile_query_indices
    from opcc_edu.queries import load_queries

    full = load_queries("hopper", "paper")
    noise = np.random.default_rng(7).normal(0.0, 40.0, size=(len(full), 2, 5))
    value_a, value_b = np.asarray(full.value_a)[:, None], np.asarray(full.value_b)[:, None]

    def answer_at(n):
        def answer(run, progress=True):
            rows = profile_query_indices(full, n)
            shift = 5.0 * run.seed  # seeds differ, the same seed in both grids agrees
            return ex.MemberValues(
                value_a[rows] + noise[rows, 0] + shift,
                value_b[rows] + noise[rows, 1],
                np.asarray(full.target)[rows],
                np.asarray(full.horizon)[rows],
            )

        return answer

    grid = ex.plan_ablation("dataset-type", "tiny", environments=["hopper"], datasets=["medium", "expert"], seeds=2)
    small, large = tmp_path / "small" / "paper" / "tiny", tmp_path / "large" / "paper" / "tiny"
    for directory, n in ((small, 300), (large, 1000)):
        ex.run_grid(grid, directory, answer_fn=answer_at(n), profile="tiny", progress=False, queries="paper")
    rescored = ex.rescore_on_shared_queries([small, large], "dataset-type")
    shared = np.intersect1d(profile_query_indices(full, 300), profile_query_indices(full, 1000))
    assert set(rescored["n"][rescored["horizon"] == ex.ALL_HORIZONS]) == {len(shared)}
    assert rescored["run_id"].nunique() == 4 and set(rescored["confidence"]) == {"ev"}
    by_dir = {d: part.drop(columns="directory").reset_index(drop=True) for d, part in rescored.groupby("directory")}
    pd.testing.assert_frame_equal(by_dir[str(small)], by_dir[str(large)])
    # against one directory alone (itself twice) the committed table comes back exactly
    alone = ex.rescore_on_shared_queries([large, large], "dataset-type").drop(columns="directory")
    ours = ex.aggregate(alone.drop_duplicates(), "dataset-type").set_index(["environment", "level", "metric"])
    committed = ex.aggregate(ex.load_results(large), "dataset-type").set_index(["environment", "level", "metric"])
    np.testing.assert_allclose(ours.loc[committed.index, "mean"], committed["mean"], rtol=0, atol=1e-12)
    # and on the shared queries the large grid's table differs from its own: the rows really were cut
    cut = ex.aggregate(by_dir[str(large)], "dataset-type").set_index(["environment", "level", "metric"])
    assert not np.allclose(cut.loc[committed.index, "mean"], committed["mean"])
    with pytest.raises(ValueError, match="share one query recipe"):
        ex.rescore_on_shared_queries([large, ex.find_results_root() / "hard" / "tiny"], "dataset-type")


@pytest.mark.parametrize("baseline", ["ensemble", "fqe"])
def test_a_grid_reads_data_and_queries_at_its_own_profile_not_the_active_one(monkeypatch, baseline):
    # A classroom grid run from a shell without OPCC_EDU_PROFILE (active profile: tiny) must
    # train on the classroom's 200,000 transitions and answer its 1,500 queries.
    from opcc_edu import baselines
    from opcc_edu.baselines import fqe
    from opcc_edu.config import get_profile, use_profile

    seen = {}

    def fake(env_name, dataset_name, config=None, queries=None, dataset_size=None, runs=None, **kwargs):
        seen.update(config=config, n=len(queries), dataset_size=dataset_size, runs=runs)
        raise RuntimeError("stop here")

    monkeypatch.setattr(baselines, "answer_queries", fake)
    monkeypatch.setattr(fqe, "answer_queries_fqe", fake)
    make = ex.baseline_answer_function if baseline == "ensemble" else ex.fqe_answer_function
    run = ex.RunSpec("hopper", "medium", 1, {})
    with use_profile("tiny"):
        with pytest.raises(RuntimeError, match="stop here"):
            make("classroom", queries="paper")(run, progress=False)
        assert get_profile().name == "tiny"  # the active profile is left alone
        sizes = ex.run_sizes(run, "classroom", "paper")
    classroom = get_profile("classroom")
    assert seen["dataset_size"] == sizes["dataset_size"] == classroom.dataset_size == 200_000
    assert seen["n"] == len(sizes["queries"]) == classroom.queries_per_env == 1_500
    assert seen["config"].ensemble_size == classroom.ensemble_size and seen["config"].seed == 1
    if baseline == "ensemble":
        assert seen["runs"] == classroom.mc_runs
    # a recipe smaller than the profile's size caps it
    assert ex.run_sizes(ex.RunSpec("maze2d-umaze", "10k", 0, {}), "classroom")["dataset_size"] == 10_000


def test_a_results_directory_holds_one_set_of_sizes(tmp_path, monkeypatch):
    # the grid's sizes are recorded in meta.json; a profile with other data or query sizes is
    # refused before it runs, instead of being averaged with the runs there as another seed
    from opcc_edu.lab.experiments import runner

    monkeypatch.setattr(
        runner,
        "baseline_answer_function",
        lambda profile=None, queries=None: ex.synthetic_answer_function(n_queries=20),
    )
    grid = ex.plan_ablation("horizon", "tiny", environments=["maze2d-umaze"], datasets=["1m"], seeds=1)
    ex.run_grid(grid, tmp_path, profile="tiny", progress=False)
    tiny = {"dataset_size": 20_000, "queries_per_env": 300, "mc_runs": 1}
    assert ex.results_sizes(tmp_path) == tiny == runner.profile_sizes("tiny")
    ex.run_grid(grid, tmp_path, profile="tiny", progress=False)  # the same sizes: resumes
    with pytest.raises(ValueError, match=r"holds runs at .*20000.*not .*200000"):
        ex.run_grid(grid, tmp_path, profile="classroom", progress=False)
    assert ex.results_sizes(tmp_path) == tiny and len(ex.load_runs(tmp_path)) == 1
    # an answer function passed in reads what it reads: nothing is recorded for it
    ex.run_grid(grid, tmp_path / "other", answer_fn=ex.synthetic_answer_function(n_queries=20), progress=False)
    assert ex.results_sizes(tmp_path / "other") is None
