"""The one resolver per name, and the one scoring entry for answers given directly."""

from __future__ import annotations

import numpy as np
import pytest

from opcc_edu.confidence import resolve_confidences
from opcc_edu.datasets import DEFAULT_DATASET, resolve_dataset
from opcc_edu.metrics import evaluate
from opcc_edu.names import ALL_HORIZONS
from opcc_edu.scoring import score_answers


def test_resolve_dataset_picks_the_default_and_names_the_valid_environments():
    assert resolve_dataset("hopper") == DEFAULT_DATASET["hopper"] == "medium"
    assert resolve_dataset("maze2d-umaze", "1k") == "1k"
    with pytest.raises(ValueError, match="maze2d-umaze"):
        resolve_dataset("no-such-env")


def test_resolve_confidences_refuses_unknown_names_and_a_bare_string():
    assert resolve_confidences(["ev", "pci"]) == ("ev", "pci")
    with pytest.raises(ValueError, match="ev, pci, upci"):
        resolve_confidences(["ev", "bootstrap"])
    with pytest.raises(ValueError, match="sequence of names"):
        resolve_confidences("ev")


def test_score_answers_scores_all_queries_then_each_horizon_like_evaluate():
    rng = np.random.default_rng(0)
    target, horizon = rng.integers(0, 2, 60), np.repeat([10, 20, 30], 20)
    prediction, confidence = rng.integers(0, 2, 60), rng.random(60)
    table = score_answers({"rule": (prediction, confidence)}, target, horizon, k=5).table()["rule"]
    assert list(table) == [ALL_HORIZONS, "10", "20", "30"]
    assert table[ALL_HORIZONS]["aurcc"] == evaluate(prediction, target, confidence, k=5)["aurcc"]
    mask = horizon == 20
    assert table["20"]["rpp"] == evaluate(prediction[mask], target[mask], confidence[mask], k=5)["rpp"]
    assert table["20"]["n"] == 20
