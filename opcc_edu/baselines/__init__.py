"""The paper's model-based baselines end to end: ensemble -> member values -> confidence -> metrics.

Koul et al. (Section 5) answer a policy-comparison query in three steps:

1. learn an ensemble of M dynamics-and-reward models from the offline dataset
   (:func:`train_ensemble`, cached by :func:`get_or_train_ensemble`);
2. let every member estimate both sides' values by simulating the policies
   (:func:`estimate_values` -> two (N, M) arrays);
3. combine the M value pairs into a prediction and a confidence (EV, PCI, U-PCI of
   :mod:`opcc_edu.confidence`) and score them (:func:`opcc_edu.scoring.score_values`).

:func:`answer_queries` does all three and returns :class:`Answers`. Every variation the paper
studies is one field of :class:`EnsembleConfig`, so an ablation is a list of configs. The
members of an ensemble are exchangeable: members 0..m-1 of a 100-member ensemble form an
m-member ensemble, which is how the ensemble-count ablation reads every size from one training
run (:meth:`Answers.with_members`).

Modules, one concept each:

* :mod:`.config` -- :class:`EnsembleConfig`, :class:`FQEConfig`, :data:`BASELINE_DEFAULTS` (no torch).
* :mod:`.training` -- :func:`train_ensemble` and its up-front memory check.
* :mod:`.cache` -- the ensemble cache: :func:`ensemble_cache_key`, :func:`get_or_train_ensemble`.
* :mod:`.estimate` -- :func:`estimate_values`, :func:`select_profile_queries`,
  :func:`profile_query_indices`.
* :mod:`.answers` -- :class:`Answers`: member values, predictions, confidences and their metrics;
  :func:`answers_summary`, :func:`save_answers`.
* :mod:`.pipeline` -- :func:`answer_queries` (train or load, estimate, score) and
  :func:`heuristic_as_answers`.
* :mod:`.report` -- :func:`format_metrics`, :func:`format_predictor_metrics`.
* :mod:`.run` -- :func:`run_end_to_end`, the job behind ``opcc-edu run``.
* :mod:`.fqe` -- a model-free baseline: bootstrapped finite-horizon fitted Q evaluation
  (:func:`train_fqe`, :func:`answer_queries_fqe`), answering through the same confidences.
* :mod:`.heuristic` -- a no-model rule (:func:`heuristic_answers`) that shows how hard a
  query set is: the start closer to the goal, or the policy with the higher average return, wins.

Only :mod:`.config` is imported with the package; the rest (and torch) on first use.
"""

from __future__ import annotations

from ..names import ALL_HORIZONS, CONFIDENCES
from ..utils import lazy_exports
from .config import BASELINE_DEFAULTS, EnsembleConfig

CONFIDENCE_METHODS: tuple[str, ...] = CONFIDENCES
"""Alias of :data:`opcc_edu.names.CONFIDENCES`: the confidences :func:`answer_queries` scores."""

_LAZY: dict[str, str] = {
    "check_training_memory": "training",
    "train_ensemble": "training",
    "CACHE_FORMAT": "cache",
    "dataset_identity": "cache",
    "ensemble_cache_key": "cache",
    "ensemble_cache_path": "cache",
    "get_or_train_ensemble": "cache",
    "estimate_values": "estimate",
    "select_profile_queries": "estimate",
    "profile_query_indices": "estimate",
    "Answers": "answers",
    "METRIC_COLUMNS": "report",
    "answer_queries": "pipeline",
    "answers_summary": "answers",
    "format_metrics": "report",
    "format_predictor_metrics": "report",
    "heuristic_as_answers": "pipeline",
    "save_answers": "answers",
    "run_end_to_end": "run",
    "FQEConfig": "config",
    "TrainingConfig": "config",
    "FittedQEnsemble": "fqe",
    "answer_queries_fqe": "fqe",
    "fqe_values": "fqe",
    "train_fqe": "fqe",
    "HeuristicAnswers": "heuristic",
    "heuristic_answers": "heuristic",
    "heuristic_error": "heuristic",
    "heuristic_metrics": "heuristic",
    "maze_goal_distances": "heuristic",
}


__getattr__, __dir__ = lazy_exports(__name__, globals(), {**_LAZY, "score_values": ".scoring"})


__all__ = ["ALL_HORIZONS", "BASELINE_DEFAULTS", "CONFIDENCE_METHODS", "EnsembleConfig", "score_values", *_LAZY]
