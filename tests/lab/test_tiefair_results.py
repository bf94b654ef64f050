"""The tie-fair metrics wherever results are shown: ``opcc-edu run``'s table, the results store
(and its upgrade of directories written before them), aggregation, the report and verdicts.

Old-format (``/1``) directories are made here by writing a current directory back in the old
format exactly as the old code wrote it (the committed records, written back that way, are
byte for byte their previous versions).
"""

from __future__ import annotations

import csv
import hashlib
import json
import shutil
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from opcc_edu.lab import experiments as ex
from opcc_edu.lab import findings
from opcc_edu.lab.experiments.records import (
    RECORD_FORMAT,
    RECORD_FORMAT_V1,
    RESULT_COLUMNS_V1,
    RunRecord,
    project_row,
    render_table,
)
from opcc_edu.names import METRICS, TABLE_METRICS, TIE_FAIR_METRICS

ROOT = Path(__file__).resolve().parents[2]
COMMITTED = ROOT / "results" / "ablations" / "hard"
ANSWER = ex.synthetic_answer_function(n_queries=50, ensemble_size=4)
ROWS = 4 * 24  # 4 runs x 24 scored subsets (confidence x horizon or ensemble prefix)


# --------------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------------
def v1_record_bytes(data: bytes) -> bytes:
    """A current record file written back in format /1, as the code before the tie-fair metrics wrote it."""
    payload = json.loads(data)
    payload.pop("sha256")
    payload["format"] = RECORD_FORMAT_V1
    payload["columns"] = list(RESULT_COLUMNS_V1)
    payload["rows"] = [project_row(row) for row in payload["rows"]]
    canonical = json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()
    payload["sha256"] = hashlib.sha256(canonical).hexdigest()
    return (json.dumps(payload, separators=(",", ":")) + "\n").encode()


def v1_table(text: str) -> str:
    rows = list(csv.reader(text.splitlines()))[1:]
    return render_table(RESULT_COLUMNS_V1, [project_row(row) for row in rows])


def write_back_as_v1(directory: Path) -> None:
    for path in (directory / "records").glob("*.json"):
        path.write_bytes(v1_record_bytes(path.read_bytes()))
    results = directory / "results.csv"
    results.write_text(v1_table(results.read_text()))


def snapshot(directory: Path) -> dict[str, bytes]:
    files = sorted((directory / "records").glob("*.json")) + [directory / "results.csv", directory / "runs.csv"]
    return {path.name: path.read_bytes() for path in files}


def upgrade(directory: Path) -> tuple[dict[str, int], str]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        counts = ex.migrate_results(directory)
    return counts, " ".join(str(w.message) for w in caught if issubclass(w.category, ex.StoreWarning))


@pytest.fixture(scope="module")
def current_template(tmp_path_factory) -> Path:
    """A synthetic grid of 4 runs in the current format, with member values kept."""
    directory = tmp_path_factory.mktemp("current") / "tiny"
    grid = ex.plan_ablation("prior-scale", "tiny", datasets=["1m"], seeds=2)
    ex.run_grid(grid, directory, answer_fn=ANSWER, profile="tiny", progress=False, queries="hard")
    return directory


@pytest.fixture
def old_directory(current_template, tmp_path) -> tuple[Path, dict[str, bytes]]:
    """The template written back in format /1, and the template's current files."""
    directory = tmp_path / "tiny"
    shutil.copytree(current_template, directory)
    original = snapshot(directory)
    write_back_as_v1(directory)
    return directory, original


# --------------------------------------------------------------------------------------------
# The results store: current format, old format, the upgrade
# --------------------------------------------------------------------------------------------
def test_new_runs_record_every_tie_fair_metric(current_template):
    frame = ex.load_results(current_template)
    assert list(frame.columns) == list(ex.RESULT_COLUMNS)
    assert list(ex.RESULT_COLUMNS[8:17]) == [*METRICS, *TIE_FAIR_METRICS]
    assert frame[list(TIE_FAIR_METRICS)].notna().all().all()
    assert (frame["selective_gain"] <= 1).all() and frame["auroc"].between(0, 1).all()
    record = json.loads(next((current_template / "records").glob("*.json")).read_bytes())
    assert record["format"] == RECORD_FORMAT and record["columns"] == list(ex.RESULT_COLUMNS)


def test_an_old_directory_is_read_with_empty_tie_fair_cells_and_a_warning_naming_the_upgrade(old_directory):
    directory, original = old_directory
    before = snapshot(directory)
    with pytest.warns(ex.StoreWarning, match=r"before the tie-fair metrics.*python scripts/upgrade_results.py"):
        frame = ex.load_results(directory)
    assert len(frame) == ROWS and frame[list(TIE_FAIR_METRICS)].isna().all().all()
    assert snapshot(directory) == before, "reading never writes"
    assert (directory / "results.csv").read_text().startswith(",".join(RESULT_COLUMNS_V1) + "\n")
    table = ex.aggregate(frame, "prior-scale", metrics=TABLE_METRICS)
    assert table[table["metric"].isin(METRICS)]["mean"].notna().all()
    assert table[table["metric"].isin(TIE_FAIR_METRICS)]["mean"].isna().all()
    assert "| – | – |" in ex.format_tie_fair_table(table)


def test_the_upgrade_restores_the_current_files_byte_for_byte_and_keeps_backups(old_directory):
    directory, original = old_directory
    old = snapshot(directory)
    counts, message = upgrade(directory)
    assert counts == {"temporaries": 0, "quarantined": 0, "converted": 0, "upgraded": 4}
    assert snapshot(directory) == original, "recomputed cells are the cells the runner wrote"
    (backups,) = directory.glob("records.*.bak")
    assert {p.name: p.read_bytes() for p in backups.iterdir()} == {k: v for k, v in old.items() if k.endswith(".json")}
    (table_backup,) = directory.glob("results.csv.*.bak")
    assert table_backup.read_bytes() == old["results.csv"]
    assert str(backups) in message and str(table_backup) in message and "upgraded 4 run(s)" in message
    assert not list(directory.glob("*quarantine*"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing left to upgrade, nothing to warn about
        assert ex.migrate_results(directory)["upgraded"] == 0
        assert ex.load_results(directory)[list(TIE_FAIR_METRICS)].notna().all().all()
    assert snapshot(directory) == original


def test_the_upgrade_command(old_directory, capsys):
    import importlib.util

    script = Path(__file__).resolve().parents[2] / "scripts" / "upgrade_results.py"
    spec = importlib.util.spec_from_file_location("upgrade_results", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    main = module.main

    directory, original = old_directory
    with pytest.warns(ex.StoreWarning):
        assert main([str(directory)]) == 0
    assert "upgraded 4" in capsys.readouterr().out
    assert snapshot(directory) == original
    assert main([str(directory.parent / "nothing")]) == 2


def test_a_run_without_values_keeps_every_row_with_empty_tie_fair_cells(old_directory):
    directory, original = old_directory
    missing = sorted((directory / "values").glob("*.npz"))[0]
    missing.unlink()
    counts, message = upgrade(directory)
    assert counts["upgraded"] == 4
    run_id = "maze2d-umaze/1m/seed0/default" if "seed0__default" in missing.name else None
    assert "1 run(s) keep every row with empty tie-fair cells" in message and "were not kept" in message
    frame = ex.load_results(directory)
    assert len(frame) == ROWS
    empty = frame[frame[list(TIE_FAIR_METRICS)].isna().any(axis=1)]
    assert empty["run_id"].nunique() == 1 and len(empty) == ROWS // 4
    if run_id is not None:
        assert set(empty["run_id"]) == {run_id}
    # the paper's cells are untouched, and the other runs are as the runner wrote them
    assert v1_table((directory / "results.csv").read_text()) == v1_table(original["results.csv"].decode())
    slug = missing.name[: -len(".npz")]
    for name, data in original.items():
        if name.endswith(".json") and not name.startswith(slug):
            assert (directory / "records" / name).read_bytes() == data
    # a cell of an environment and level where one run lacks them shows "–", never a partial mean
    table = ex.aggregate(frame, "prior-scale", metrics=TIE_FAIR_METRICS)
    assert table["mean"].isna().sum() == len(TIE_FAIR_METRICS)
    assert ex.migrate_results(directory)["upgraded"] == 0, "not retried on every write"


def test_values_that_do_not_reproduce_the_recorded_metrics_fill_nothing(old_directory):
    from opcc_edu.io import load_npz, save_npz

    directory, _ = old_directory
    path = sorted((directory / "values").glob("*.npz"))[1]
    arrays, metadata = load_npz(path)
    arrays["target"] = 1 - arrays["target"]
    save_npz(path, arrays, metadata)
    _, message = upgrade(directory)
    assert "do not reproduce its recorded metrics" in message
    frame = ex.load_results(directory)
    assert len(frame) == ROWS and frame[list(TIE_FAIR_METRICS)].isna().any(axis=1).sum() == ROWS // 4


def test_an_old_table_line_no_run_reproduces_goes_to_the_old_format_quarantine(old_directory):
    directory, original = old_directory
    with open(directory / "results.csv", "a") as handle:
        handle.write("hopper,random,0,default,all,ev,2,10,0.13\n")
    _, message = upgrade(directory)
    quarantine = directory / "results.v1.quarantine.csv"
    torn = "hopper,random,0,default,all,ev,2,10,0.13"
    assert quarantine.read_text().splitlines() == [",".join(RESULT_COLUMNS_V1), torn]
    assert str(quarantine) in message
    assert snapshot(directory) == original


def test_a_csv_only_directory_of_the_old_format_is_converted_and_upgraded(current_template, tmp_path):
    directory = tmp_path / "legacy"
    directory.mkdir()
    shutil.copytree(current_template / "values", directory / "values")
    shutil.copy(current_template / "runs.csv", directory / "runs.csv")
    (directory / "results.csv").write_text(v1_table((current_template / "results.csv").read_text()))
    with pytest.warns(ex.StoreWarning, match="before the tie-fair metrics"):
        assert len(ex.load_results(directory)) == ROWS
    counts, _ = upgrade(directory)
    assert counts["converted"] == 4 and counts["upgraded"] == 4
    assert (directory / "results.csv").read_bytes() == (current_template / "results.csv").read_bytes()


def test_a_run_claimed_elsewhere_is_upgraded_later(old_directory):
    directory, original = old_directory
    slug = sorted((directory / "records").glob("*.json"))[0].stem
    with ex.ResultsStore(directory).claim(slug) as held:
        assert held
        counts, _ = upgrade(directory)
    assert counts["upgraded"] == 3
    assert RunRecord.from_json((directory / "records" / f"{slug}.json").read_bytes(), f"{slug}.json").outdated
    counts, _ = upgrade(directory)
    assert counts["upgraded"] == 1 and snapshot(directory) == original


def test_a_heuristic_directory_is_upgraded_from_its_kept_scores(tmp_path):
    directory = tmp_path / "tiny-heuristic"
    grid = ex.GridSpec(("maze2d-umaze",), {"maze2d-umaze": ("1m",)}, (0,))
    ex.run_grid(grid, directory, profile="tiny", progress=False, queries="hard", baseline="heuristic")
    original = snapshot(directory)
    write_back_as_v1(directory)
    counts, message = upgrade(directory)
    assert counts["upgraded"] == 1 and "empty tie-fair cells" not in message
    assert snapshot(directory) == original


def test_a_heuristic_run_keeps_its_answers_not_fake_member_values(tmp_path):
    from opcc_edu.io import load_npz, save_npz
    from opcc_edu.scoring import Scores

    answer = ex.heuristic_answer_function("tiny", queries="hard")
    scores = answer(ex.RunSpec("maze2d-umaze", "1m", 0, {}), False)
    assert isinstance(scores, Scores) and list(scores.predictions) == ["heuristic"]
    assert scores.info["baseline"] == "heuristic" and scores.ensemble_size == 1 and len(scores) == len(scores.target)
    directory = tmp_path / "tiny-heuristic"
    grid = ex.GridSpec(("maze2d-umaze",), {"maze2d-umaze": ("1m",)}, (0,))
    ex.run_grid(grid, directory, profile="tiny", progress=False, queries="hard", baseline="heuristic")
    (path,) = (directory / "values").glob("*.npz")
    arrays, _ = load_npz(path)
    assert sorted(arrays) == ["confidence_heuristic", "horizon", "prediction_heuristic", "target"]
    np.testing.assert_array_equal(arrays["prediction_heuristic"], scores.predictions["heuristic"])
    with pytest.raises(ValueError, match="no member values"):
        ex.load_run_values(directory, path.stem)
    # a file of the old kind (the rule's scores as (N, 1) "member values") is read by the one upgrade
    # function, kept_answers, into the same answers, and rescores to the recorded cells
    from opcc_edu.baselines.estimate import select_profile_queries
    from opcc_edu.baselines.heuristic import heuristic_answers
    from opcc_edu.config import get_profile
    from opcc_edu.queries import load_queries

    queries = select_profile_queries(load_queries("maze2d-umaze", "hard"), n=get_profile("tiny").queries_per_env)
    rule = heuristic_answers(queries)
    old = {"values_a": rule.score_a[:, None], "values_b": rule.score_b[:, None]}
    old.update(target=arrays["target"], horizon=arrays["horizon"])
    ((prediction, confidence),) = ex.records.kept_answers(old, ["heuristic"]).values()
    np.testing.assert_array_equal(prediction, arrays["prediction_heuristic"])
    np.testing.assert_array_equal(confidence, arrays["confidence_heuristic"])
    save_npz(path, old, {})
    (record,) = ex.ResultsStore(directory).records()
    rows, reason = ex.records.recompute_tie_fair(record, path)
    assert reason == "" and [tuple(row) for row in rows] == list(record.rows)
    # member values are not answers: an ensemble's file gives none
    assert ex.records.kept_answers({"values_a": np.zeros((3, 4)), "values_b": np.zeros((3, 4))}, ["ev"]) is None


def test_old_records_are_read_not_quarantined_and_unknown_formats_still_are():
    data = next((COMMITTED / "tiny" / "records").glob("*.json")).read_bytes()
    name = next((COMMITTED / "tiny" / "records").glob("*.json")).name
    old = RunRecord.from_json(v1_record_bytes(data), name)
    assert old.outdated and old.tie_fair_missing
    assert old.to_json() != data and not RunRecord.from_json(data, name).outdated
    payload = json.loads(data)
    payload.pop("sha256")
    payload["format"] = "opcc_edu.ablation-run/9"
    canonical = json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()
    payload["sha256"] = hashlib.sha256(canonical).hexdigest()
    with pytest.raises(ValueError, match="not a opcc_edu.ablation-run/2"):
        RunRecord.from_json(json.dumps(payload).encode(), name)


@pytest.mark.parametrize("profile", ["tiny", "classroom"])
def test_the_committed_results_hold_every_tie_fair_metric(profile):
    directory = COMMITTED / profile
    if not (directory / "records").is_dir():
        pytest.skip("no committed results in this checkout")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        frame = ex.load_results(directory)
    assert frame[list(TIE_FAIR_METRICS)].notna().all().all()
    assert frame["expected_aurcc"].mean() > frame["aurcc"].mean(), "on average the ties earned a discount"
    if profile == "classroom":  # 11 runs: every one recomputed from its values, cell for cell
        store = ex.ResultsStore(directory)
        for record in store.records():
            rows, reason = ex.records.recompute_tie_fair(record, directory / "values" / f"{record.slug}.npz")
            assert reason == "" and [tuple(row) for row in rows] == list(record.rows)


# --------------------------------------------------------------------------------------------
# Report, verdicts, opcc-edu run's table
# --------------------------------------------------------------------------------------------
def test_the_report_shows_the_tie_fair_table_after_the_paper_comparison(current_template, tmp_path):
    root = tmp_path / "root"
    shutil.copytree(current_template, root / "hard" / "tiny")
    text = ex.report_text(root)
    assert ex.TIE_FAIR_EXPLANATION in text
    section = text.split("### Randomized constant prior")[1].split("###")[0]
    paper, tie_fair = section.split("Tie-fair metrics of the same cells")
    assert "AURCC (↓) ours | AURCC (↓) paper" in paper
    assert "| environment | level | tie-fair AURCC (↓) | tie-fair RPP (↓) | selective gain (↑) |" in tie_fair
    latex = ex.report_text(root, "latex")
    assert "\\begin{tabular}{llrrrrr}" in latex
    with pytest.raises(ValueError, match="the paper reports only these"):
        ex.format_table(pd.DataFrame(), metrics=("selective_gain",))


def test_verdicts_accept_the_tie_fair_metrics():
    rows = [
        ("hopper", "10", "selective_gain", 0.6, 0.05),
        ("hopper", "50", "selective_gain", 0.3, 0.05),
        ("hopper", "10", "aurcc", 0.1, 0.01),
        ("hopper", "50", "aurcc", 0.2, 0.01),
    ]
    table = pd.DataFrame(rows, columns=["environment", "level", "metric", "mean", "ci"])
    (line,) = findings.trend_verdict(table, metric="selective_gain", level_prefix="h=")
    assert line == "hopper: gain h=10 0.600 -> h=50 0.300: does not grow (separated)"
    (line,) = findings.trend_verdict(table, metric="aurcc", level_prefix="h=")
    assert line.startswith("hopper: AURCC h=10 0.100 -> h=50 0.200: grows")
    assert findings.Expectation("selective_gain", "higher").judge(0.5, 0.2) == "higher"
    with pytest.raises(ValueError, match="metric"):
        findings.trend_verdict(table, metric="accuracy")


def test_run_prints_the_tie_fair_columns_beside_the_paper_metrics(tmp_path):
    from opcc_edu.baselines import METRIC_COLUMNS, format_metrics, heuristic_as_answers
    from opcc_edu.queries import load_queries

    answers = heuristic_as_answers(load_queries("maze2d-umaze", "hard"))
    table = answers.table()
    assert list(table.columns[:12]) == ["confidence", "horizon", *METRICS, *TIE_FAIR_METRICS, "n"]
    assert [key for key, _ in METRIC_COLUMNS] == [*METRICS, "expected_aurcc", "selective_gain", "auroc"]
    text = format_metrics(answers).splitlines()
    titles = ["AURCC", "RPP", "CR_K", "loss", "E[AURCC]", "gain", "AUROC"]
    assert text[0].split() == ["confidence", "horizon", *titles, "n"]
    assert text[-2].strip().startswith("E[AURCC], gain, AUROC: tie-fair")
    overall = table[table["horizon"] == "all"].iloc[0]
    assert text[-3].split()[-4:-1] == [f"{overall[k]:.4f}" for k in ("expected_aurcc", "selective_gain", "auroc")]
    summary = answers.summary()
    assert summary["tie_fair_metrics"] == list(TIE_FAIR_METRICS) and summary["paper_metrics"] == list(METRICS)
    assert set(TIE_FAIR_METRICS) <= set(summary["metrics"]["heuristic"]["all"])
    paths = answers.save(tmp_path)
    saved = json.loads(paths["json"].read_text())
    assert np.isclose(saved["metrics"]["heuristic"]["all"]["selective_gain"], overall["selective_gain"])


def test_grading_shows_that_a_constant_confidence_gains_nothing():
    from opcc_edu.classroom.assignments import grade_confidence_function
    from opcc_edu.confidence import synthetic_ensemble

    data = synthetic_ensemble(200, 8, seed=0)

    def constant(values_a, values_b):
        prediction = (values_a.mean(1) < values_b.mean(1)).astype(np.int8)
        return prediction, np.ones(len(prediction))

    table = grade_confidence_function(constant, data.values_a, data.values_b, data.target)
    assert table.loc["yours", "selective_gain"] == 0.0 and table.loc["yours", "auroc"] == 0.5
    assert table.loc["yours", "aurcc"] == pytest.approx(table.loc["yours", "loss"] / 2)
    assert table.loc["EV", "selective_gain"] > 0
