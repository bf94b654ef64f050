"""benchmarks/results/original_benchmark.md's tiny answer table re-derives from the committed runs."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _script():
    spec = importlib.util.spec_from_file_location(
        "relabel_original", ROOT / "scripts" / "relabel_original_benchmark.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_tiny_answer_table_is_what_the_committed_runs_give():
    runs = ROOT / "results" / "original" / "tiny"
    report = ROOT / "benchmarks" / "results" / "original_benchmark.md"
    if not (runs.is_dir() and report.is_file()):
        pytest.skip("no committed runs or report")
    script = _script()
    table = script._answer_table(script._tiny_rows(runs), "tiny")
    section = report.read_text().split("## Our ensemble on the original queries: tiny profile")[1].split("\n## ")[0]
    assert table in section
    assert len(table.splitlines()) == 2 + 7  # every environment has its three seeds' row


def test_the_check_can_fail(tmp_path):
    """A run whose loss moved changes the table, so the comparison above would catch it."""
    import shutil

    runs = ROOT / "results" / "original" / "tiny"
    if not runs.is_dir():
        pytest.skip("no committed runs")
    script = _script()
    copy = tmp_path / "tiny"
    shutil.copytree(runs / "seed0", copy / "seed0", ignore=shutil.ignore_patterns("*.npz"))
    path = next(copy.glob("seed0/hopper/*/original-queries/results.json"))
    before = script._answer_table(script._tiny_rows(copy), "tiny")
    data = json.loads(path.read_text())
    data["metrics"]["ev"]["all"]["loss"] += 0.1
    path.write_text(json.dumps(data))
    assert script._answer_table(script._tiny_rows(copy), "tiny") != before


def test_the_stored_runs_and_the_benchmark_record_agree():
    """The runs under results/original/tiny and the record benchmarks/original_benchmark.py wrote
    (every model trained afresh at a later commit, one thread) hold the same EV scores, run for run."""
    from opcc_edu.build.original_report import answer_rows, load_original_answers, load_original_runs

    runs = ROOT / "results" / "original" / "tiny"
    record = ROOT / "benchmarks" / "results" / "original_benchmark.json"
    if not (runs.is_dir() and record.is_file()):
        pytest.skip("no committed runs or record")
    stored = load_original_runs(runs)
    rows = answer_rows(json.loads(record.read_text()), "tiny")
    assert set(rows) == set(stored)
    for env, row in rows.items():
        assert row["seeds"] == stored[env]["seeds"] == [0, 1, 2]
        assert row["loss"] == stored[env]["loss"] and row["aurcc"] == stored[env]["aurcc"], env
    # the lesson's reader returns the same rows, and says which runs they are
    read, about = load_original_answers(path=record)
    assert read == rows
    assert about["seeds"] == [0, 1, 2] and about["threads"] == 1 and about["queries"] == 300
