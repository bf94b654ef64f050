"""The cause table of benchmarks/results/original_benchmark.md is the committed raw record
``original_causes.json`` (written by ``benchmarks/original_causes.py``), number for number."""

from __future__ import annotations

import copy
import importlib.util
from pathlib import Path

import pytest

from opcc_edu.build import original_report as report

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "original_causes.py"


@pytest.fixture(scope="module")
def module():
    if not SCRIPT.is_file():
        pytest.skip("no benchmarks/original_causes.py")
    spec = importlib.util.spec_from_file_location("_original_causes", SCRIPT)
    loaded = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(loaded)
    return loaded


def test_report_cause_table_is_the_record(module):
    data = module.load()
    text = module.REPORT.read_text()
    assert module.cause_section(data) in text
    moved = copy.deepcopy(data)
    moved["causes"]["walker2d"][report.FRICTION]["agreement"] += 0.01
    assert module.cause_section(moved) not in text


def test_record_names_its_command_and_holds_every_experiment(module):
    data = module.load()
    assert "python benchmarks/original_causes.py" in data["command"]
    causes = data["causes"]
    assert list(causes) == data["envs"]
    assert all(report.MOVED_1E9 in rows for rows in causes.values())
    assert report.MOVED_1E6 in causes["halfcheetah"]
    assert all(report.ALIVE in causes[env] for env in ("hopper", "walker2d"))
    assert report.FRICTION in causes["walker2d"]
    for rows in causes.values():
        for row in rows.values():
            assert 0.0 <= row["agreement"] <= 1.0
            assert all(0.0 <= share <= 1.0 for share in row["by_horizon"].values())


def test_check_mode_passes(module, capsys):
    assert module.main(["--check"]) == 0
    assert "differs" not in capsys.readouterr().out
