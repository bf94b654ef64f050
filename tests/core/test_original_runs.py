"""Reading the committed answers to the original benchmark's queries (results/original/<profile>)."""

from __future__ import annotations

import json

import pytest

from opcc_edu.build.original_report import find_original_runs, load_original_runs


def _write(folder, seed, env_dir, aurcc, loss):
    path = folder / f"seed{seed}" / env_dir / "medium" / "original-queries" / "results.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"metrics": {"ev": {"all": {"aurcc": aurcc, "loss": loss}}}}))


def test_runs_are_read_per_environment_in_seed_order(tmp_path):
    for seed, (aurcc, loss) in zip((10, 2, 0), ((0.3, 0.5), (0.2, 0.4), (0.1, 0.25)), strict=True):
        _write(tmp_path, seed, "hopper", aurcc, loss)
    _write(tmp_path, 0, "maze2d-umaze-d4rl-goal", 0.01, 0.02)  # a maze answers in its variant
    (tmp_path / "heuristic").mkdir()  # the no-model rule's folder is not a seed
    rows = load_original_runs(tmp_path)
    assert rows["hopper"] == {"aurcc": [0.1, 0.2, 0.3], "loss": [0.25, 0.4, 0.5], "seeds": [0, 2, 10]}
    assert rows["maze2d-umaze"] == {"aurcc": [0.01], "loss": [0.02], "seeds": [0]}
    assert set(rows) == {"hopper", "maze2d-umaze"}


def test_the_committed_runs_are_found_from_a_chapter(tmp_path, monkeypatch):
    found = find_original_runs("tiny")
    if found is None:
        pytest.skip("no committed results next to the package (an installed wheel)")
    monkeypatch.chdir(found.parents[2] / "book")
    assert find_original_runs("tiny") == found
    rows = load_original_runs(found)
    assert set(rows) == {
        "maze2d-open",
        "maze2d-umaze",
        "maze2d-medium",
        "maze2d-large",
        "halfcheetah",
        "hopper",
        "walker2d",
    }
    assert all(row["seeds"] == [0, 1, 2] for row in rows.values())
    assert find_original_runs("no-such-profile") is None
