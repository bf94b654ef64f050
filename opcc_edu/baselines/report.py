"""Reporting a baseline's answers as text: the tables ``opcc-edu run`` prints.

* :func:`format_metrics` -- the paper's and the tie-fair metrics per confidence and horizon.
* :func:`format_predictor_metrics` -- the value estimates' own metrics per horizon.

The JSON summary and the files of a run are :func:`opcc_edu.baselines.answers.answers_summary`
and :func:`opcc_edu.baselines.answers.save_answers`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..metrics import query_losses
from ..names import ALL_HORIZONS, CONFIDENCE_NAMES, METRICS

if TYPE_CHECKING:
    from .answers import Answers


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
