"""The benchmark's vocabulary, declared once: horizons, confidence names, metric names.

Every module that needs one of these lists imports it from here (this module imports nothing,
so any layer may use it). Display names live here too, so a table, a plot and the report print
the same words.
"""

from __future__ import annotations

#: The query horizons of the paper's benchmark (Section 4.2).
HORIZONS: tuple[int, ...] = (10, 20, 30, 40, 50)

#: ``horizon`` label of a result scored on the whole query set (all horizons together).
ALL_HORIZONS = "all"

#: The query-set recipes: ``paper`` builds sets as the original benchmark built its released
#: sets (the default, the shipped benchmark); ``hard`` is the earlier recipe of this package
#: (half same-state queries, policies compared with themselves, a 0.1 h maze filter), shipped
#: unchanged as a harder variant; ``original`` is the original benchmark's released sets and
#: policies, converted (its targets, for comparison with the paper), and ``original-relabelled``
#: the same queries labelled again in today's simulators.
QUERY_RECIPES: tuple[str, ...] = ("paper", "hard", "original", "original-relabelled")

#: The recipes of the original benchmark's released queries (compared by its own policies).
ORIGINAL_RECIPES: tuple[str, ...] = ("original", "original-relabelled")

#: The recipe of the default query sets.
DEFAULT_QUERY_RECIPE = "paper"

#: Baselines ``opcc-edu run`` and the ablation runner can answer with: the paper's ensemble of
#: learned dynamics models, a no-model rule that learns nothing from data (how hard a query set
#: is), and bootstrapped fitted Q evaluation, a model-free estimator of the same values
#: (:mod:`opcc_edu.baselines.fqe`).
BASELINES: tuple[str, ...] = ("ensemble", "heuristic", "fqe")

#: The ensemble confidence functions of the paper, by the keys its tables use.
CONFIDENCES: tuple[str, ...] = ("ev", "pci", "upci")

#: Display names of :data:`CONFIDENCES` as printed in the paper's tables.
CONFIDENCE_NAMES: dict[str, str] = {"ev": "EV", "pci": "PCI", "upci": "U-PCI"}

#: The paper's four metrics, in the order its tables print them.
METRICS: tuple[str, ...] = ("aurcc", "rpp", "cr_k", "loss")

#: Display names (with the better direction) for the keys of :func:`opcc_edu.metrics.evaluate`.
METRIC_NAMES: dict[str, str] = {
    "aurcc": "AURCC (↓)",
    "rpp": "RPP (↓)",
    "cr_k": "CR_K (↑)",
    "loss": "loss (↓)",
    "n": "queries",
    "oracle_aurcc": "oracle AURCC",
    "excess_aurcc": "excess AURCC (↓)",
    "augrc": "AUGRC (↓)",
    "random_aurcc": "E[AURCC] of random confidence",
    "n_operating_points": "operating points",
    "expected_aurcc": "tie-fair AURCC (↓)",
    "expected_rpp": "tie-fair RPP (↓)",
    "tie_fair_oracle_aurcc": "tie-fair oracle AURCC",
    "selective_gain": "selective gain (↑)",
    "auroc": "AUROC (↑)",
}

#: Metrics that give tied confidences no discount: each scores a confidence as if its ties were
#: broken uniformly at random (:mod:`opcc_edu.metrics`), so a constant confidence scores what a
#: random one does. Our tables show them next to the paper's :data:`METRICS`.
TIE_FAIR_METRICS: tuple[str, ...] = ("expected_aurcc", "expected_rpp", "selective_gain", "augrc", "auroc")

#: Every metric a results table holds: the paper's four, then the tie-fair ones.
TABLE_METRICS: tuple[str, ...] = (*METRICS, *TIE_FAIR_METRICS)

__all__ = [
    "ALL_HORIZONS",
    "BASELINES",
    "CONFIDENCES",
    "CONFIDENCE_NAMES",
    "DEFAULT_QUERY_RECIPE",
    "HORIZONS",
    "METRICS",
    "METRIC_NAMES",
    "ORIGINAL_RECIPES",
    "QUERY_RECIPES",
    "TABLE_METRICS",
    "TIE_FAIR_METRICS",
]
