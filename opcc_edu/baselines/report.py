"""Reporting a baseline's answers: the JSON summary, the files ``opcc-edu run`` writes, text tables.

* :func:`answers_summary` -- the setup, timings and every metric, JSON-ready.
* :func:`save_answers` -- ``<stem>.json`` (the summary) and ``<stem>.npz`` (values, predictions,
  confidences), written by the package's one write protocol (:mod:`opcc_edu.io`).
* :func:`format_metrics`, :func:`format_predictor_metrics` -- the tables ``opcc-edu run`` prints.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..io import atomic_write_text, save_npz
from ..metrics import query_losses
from ..names import ALL_HORIZONS, CONFIDENCE_NAMES, METRICS, TIE_FAIR_METRICS

if TYPE_CHECKING:
    from .answers import Answers


def answers_summary(answers: Answers) -> dict[str, Any]:
    """JSON-ready results: the setup, timings and every metric.

    ``metrics[confidence][horizon]`` holds every key of :func:`opcc_edu.metrics.evaluate`;
    ``paper_metrics`` and ``tie_fair_metrics`` name which of them are the paper's and which
    are tie-fair (ties broken at random, no discount for ties). ``predictor_metrics`` judges
    the value estimates alone (:meth:`predictor_metrics`: DOPE's normalised error, rank
    correlation and regret@1 per horizon) and ``calibration`` the confidences as
    probabilities and the members' intervals (:meth:`calibration`).
    """
    return {
        "env_name": answers.env_name,
        "dataset": answers.dataset_name,
        "n_queries": int(len(answers.target)),
        "queries_recipe": str(answers.queries.metadata.get("recipe", "hard")),
        "baseline": answers.baseline,
        "ensemble_size": answers.ensemble_size,
        "config": None if answers.config is None else answers.config.to_dict(),
        "k": answers.k,
        "train_seconds": answers.train_seconds,
        "answer_seconds": answers.answer_seconds,
        "cache_hit": answers.cache_hit,
        "model_path": answers.model_path,
        "paper_metrics": list(METRICS),
        "tie_fair_metrics": list(TIE_FAIR_METRICS),
        "metrics": answers.metrics,
        "predictor_metrics": answers.predictor_metrics(),
        "calibration": answers.calibration(),
    }


def save_answers(answers: Answers, directory: str | Path, stem: str | None = None) -> dict[str, Path]:
    """Write ``<stem>.json`` (summary) and ``<stem>.npz`` (values, predictions, confidences).

    Returns:
        ``{"json": path, "npz": path}``.
    """
    directory = Path(directory)
    stem = stem or f"{answers.env_name}_{answers.dataset_name}"
    arrays = {
        "values_a": answers.values_a,
        "values_b": answers.values_b,
        "target": answers.target,
        "horizon": answers.horizon,
    }
    for name in answers.predictions:
        arrays[f"prediction_{name}"] = answers.predictions[name]
        arrays[f"confidence_{name}"] = answers.confidences[name]
    json_path = atomic_write_text(
        directory / f"{stem}.json", json.dumps(answers_summary(answers), indent=2, sort_keys=True) + "\n"
    )
    npz_path = save_npz(
        directory / f"{stem}.npz", arrays, {"env_name": answers.env_name, "dataset": answers.dataset_name}
    )
    return {"json": json_path, "npz": npz_path}


METRIC_COLUMNS: tuple[tuple[str, str], ...] = (
    *((key, "loss" if key == "loss" else key.upper()) for key in METRICS),
    ("expected_aurcc", "E[AURCC]"),
    ("selective_gain", "gain"),
    ("auroc", "AUROC"),
)
"""(key, column title) of the metrics :func:`format_metrics` prints: the paper's AURCC, RPP,
CR_K and loss, then the tie-fair E[AURCC] (:func:`opcc_edu.metrics.expected_aurcc`), selective
gain and AUROC."""

#: The note under :func:`format_metrics`'s table: what the tie-fair columns mean.
TIE_FAIR_NOTE = (
    "E[AURCC], gain, AUROC: tie-fair (tied confidences ordered at random: ties earn no discount);\n"
    "gain 1 = perfect ordering, 0 = no better than random, < 0 = worse"
)


def format_metrics(answers: Answers) -> str:
    """A plain-text table per confidence and horizon: the paper's AURCC, RPP, CR_K and loss, the
    tie-fair E[AURCC], selective gain and AUROC beside them (:data:`METRIC_COLUMNS`), and n;
    then a note on the tie-fair columns (:data:`TIE_FAIR_NOTE`)."""
    header = (
        f"  {'confidence':<10} {'horizon':>7} " + " ".join(f"{title:>8}" for _, title in METRIC_COLUMNS) + f" {'n':>6}"
    )
    lines = [header, "  " + "-" * (len(header) - 2)]
    table = answers.table()
    for _, row in table.iterrows():
        cells = " ".join(f"{row[key]:>8.4f}" for key, _ in METRIC_COLUMNS)
        name = CONFIDENCE_NAMES.get(row["confidence"], row["confidence"])
        lines.append(f"  {name:<10} {row['horizon']:>7} {cells} {int(row['n']):>6}")
    lines += [f"  {line}" for line in TIE_FAIR_NOTE.split("\n")]
    return "\n".join(lines)


def format_predictor_metrics(answers: Answers) -> str:
    """A plain-text table per horizon: the PCQ loss of the member-mean answer beside DOPE's
    normalised absolute error, rank correlation and normalised regret@1 of the member-mean
    values (:meth:`Answers.predictor_metrics`), with the start states they are averaged over.
    Empty for the heuristic, which estimates no values."""
    table = answers.predictor_metrics()
    if table is None:
        return ""
    # the member-mean answer (a zero difference predicts 1), as PCI and U-PCI predict
    prediction = (answers.values_a.mean(axis=1) - answers.values_b.mean(axis=1) <= 0).astype(np.int8)
    loss = query_losses(prediction, answers.target)
    header = f"  {'horizon':>7} {'loss':>8} {'NAE':>8} {'rank corr':>10} {'regret@1':>9} {'starts':>7}"
    lines = [header, "  " + "-" * (len(header) - 2)]
    for h, row in table.items():
        mask = np.ones(loss.size, dtype=bool) if h == ALL_HORIZONS else answers.horizon == int(h)
        cells = [
            f"{value:>{width}.4f}" if value is not None else f"{'-':>{width}}"
            for value, width in (
                (row["normalized_abs_error"], 8),
                (row["rank_correlation"], 10),
                (row["normalized_regret_at_1"], 9),
            )
        ]
        lines.append(f"  {h:>7} {loss[mask].mean():>8.4f} {' '.join(cells)} {row['n_groups']:>7}")
    lines.append("  loss: PCQ 0/1 loss of the member-mean answer; NAE, regret@1: normalised by the range of true")
    lines.append("  values per horizon; rank corr: Spearman across the policies of a start state (starts: 2+ sides)")
    return "\n".join(lines)
