"""Answers.from_values: the one place member values become scored answers (ensemble and FQE)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from opcc_edu.baselines import EnsembleConfig, FQEConfig
from opcc_edu.baselines.answers import Answers
from opcc_edu.baselines.estimate import select_profile_queries
from opcc_edu.queries import load_queries
from opcc_edu.scoring import score_values


@pytest.fixture(scope="module")
def queries():
    return select_profile_queries(load_queries("maze2d-umaze", "paper"), 40, seed=0)


def test_from_values_scores_like_score_values(queries):
    rng = np.random.default_rng(1)
    n = len(queries)
    va, vb = rng.normal(size=(n, 4)), rng.normal(size=(n, 4))
    answers = Answers.from_values(
        "maze2d-umaze", "1m", FQEConfig(), queries, va, vb, ["ev", "pci"], k=5, train_seconds=2.0
    )
    expected = score_values(va, vb, queries.target, queries.horizon, ["ev", "pci"], k=5)
    assert answers.metrics == expected.table()
    np.testing.assert_array_equal(answers.predictions["pci"], expected.predictions["pci"])
    assert (answers.baseline, answers.train_seconds, answers.k, answers.ensemble_size) == ("fqe", 2.0, 5, 4)
    assert answers.answer_seconds >= 0
    # the baseline is read from the configuration, not a tag: an ensemble's, FQE's, none (the heuristic)
    assert [dataclasses.replace(answers, config=c).baseline for c in (EnsembleConfig(), None)] == [
        "ensemble",
        "heuristic",
    ]


def test_from_values_rejects_bad_input(queries):
    n = len(queries)
    good = np.zeros((n, 3))
    with pytest.raises(ValueError, match="must both have shape"):
        Answers.from_values("maze2d-umaze", "1m", EnsembleConfig(), queries, good, np.zeros((n - 1, 3)), ["ev"])
    with pytest.raises(ValueError, match="valid choices: ev, pci, upci"):
        Answers.from_values("maze2d-umaze", "1m", EnsembleConfig(), queries, good, good, ["nope"])
    with pytest.raises(ValueError, match="one entry per query, the 39 rows"):
        Answers.from_values("maze2d-umaze", "1m", EnsembleConfig(), queries, good[1:], good[1:], ["ev"])


def test_one_values_type_held_by_the_answers_and_none_for_the_heuristic(queries):
    from opcc_edu.baselines import heuristic_as_answers
    from opcc_edu.scoring import MemberValues

    rng = np.random.default_rng(2)
    n = len(queries)
    va, vb = rng.normal(size=(n, 5)), rng.normal(size=(n, 5))
    answers = Answers.from_values("maze2d-umaze", "1m", EnsembleConfig(), queries, va, vb, ["ev", "pci"])
    assert isinstance(answers.values, MemberValues) and answers.values_a is answers.values.values_a
    prefix = answers.with_members(3)
    assert prefix.values.ensemble_size == 3 and prefix.metrics == answers.values.prefix(3).score(["ev", "pci"]).table()
    with pytest.raises(ValueError, match="between 1 and the ensemble size 5"):
        answers.values.prefix(6)
    # the no-model rule has no members: no values are held, none are made up
    rule = heuristic_as_answers(queries)
    assert rule.values is None and rule.ensemble_size == 1 and list(rule.predictions) == ["heuristic"]
    with pytest.raises(ValueError, match="heuristic baseline has no members"):
        _ = rule.values_a
