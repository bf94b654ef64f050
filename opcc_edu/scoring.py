"""Scoring member value estimates into the paper's metrics: the one place it is done.

An ensemble answers N queries with (N, M) member values per side. :func:`score_values` turns
them into predictions and confidences (one per confidence function) and scores each with
:func:`opcc_edu.metrics.evaluate` on all queries, on each horizon, and on ensemble prefixes
(members 0..m-1). ``opcc-edu run``, the ablation runner and the book all call it, so a number
means the same thing wherever it is printed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from .confidence import CONFIDENCE_FUNCTIONS, compute_confidence
from .metrics import evaluate
from .names import ALL_HORIZONS, CONFIDENCES
from .utils import check_choice

__all__ = ["Scores", "score_values"]


@dataclasses.dataclass
class Scores:
    """What :func:`score_values` returns."""

    rows: list[dict[str, float | int | str]]
    """One dict per scored subset: ``horizon`` (a string, or :data:`ALL_HORIZONS`),
    ``confidence``, ``ensemble_count``, ``ensemble_size``, then every scalar that
    :func:`opcc_edu.metrics.evaluate` returns (``n`` as an int)."""
    predictions: dict[str, np.ndarray]
    """(N,) predictions of the full ensemble, by confidence name."""
    confidences: dict[str, np.ndarray]
    """(N,) confidences of the full ensemble, by confidence name."""

    def table(self, ensemble_count: int | None = None) -> dict[str, dict[str, dict[str, float]]]:
        """``table[confidence][horizon]`` = the metrics of one prefix (default: all members)."""
        out: dict[str, dict[str, dict[str, float]]] = {}
        for row in self.rows:
            size = row["ensemble_size"] if ensemble_count is None else ensemble_count
            if row["ensemble_count"] != size:
                continue
            metrics = {
                key: value
                for key, value in row.items()
                if key not in ("horizon", "confidence", "ensemble_count", "ensemble_size")
            }
            out.setdefault(str(row["confidence"]), {})[str(row["horizon"])] = metrics
        return out


def _plain(metrics: dict) -> dict[str, float | int]:
    return {key: (int(v) if key == "n" else float(v)) for key, v in metrics.items() if np.isscalar(v)}


def score_values(
    values_a: np.ndarray,
    values_b: np.ndarray,
    target: np.ndarray,
    horizon: np.ndarray,
    confidences: Sequence[str] = CONFIDENCES,
    ensemble_counts: Sequence[int] = (),
    k: int = 10,
) -> Scores:
    """Score (N, M) member values: every confidence x (all queries and each horizon) x prefix.

    Full-ensemble answers are scored on all queries and on each horizon separately; prefixes
    (members 0..m-1, for each m in ``ensemble_counts`` below M) on all queries only, which is
    what the ensemble-count tables report. PCI and U-PCI need two members and are skipped for
    a prefix (or ensemble) of one.

    Args:
        values_a: (N, M) member values of side a.
        values_b: (N, M) member values of side b.
        target: (N,) true answers, 1 iff V_a < V_b.
        horizon: (N,) horizons, for per-horizon metrics.
        confidences: keys of :data:`opcc_edu.confidence.CONFIDENCE_FUNCTIONS`.
        ensemble_counts: prefix sizes to score besides the full ensemble.
        k: bins of the coverage resolution CR_K.

    Returns:
        A :class:`Scores`.
    """
    for name in confidences:
        check_choice(name, CONFIDENCE_FUNCTIONS, "confidence")
    values_a = np.asarray(values_a)
    values_b = np.asarray(values_b)
    target = np.asarray(target)
    horizon = np.asarray(horizon)
    m_full = int(values_a.shape[1])
    counts = sorted({int(c) for c in ensemble_counts if 1 <= int(c) < m_full} | {m_full})
    horizons = np.unique(horizon)
    rows: list[dict[str, float | int | str]] = []
    predictions: dict[str, np.ndarray] = {}
    confs: dict[str, np.ndarray] = {}
    for m in counts:
        for name in confidences:
            if name != "ev" and m < 2:
                continue
            prediction, confidence = compute_confidence(name, values_a[:, :m], values_b[:, :m])
            subsets: list[tuple[str, np.ndarray | None]] = [(ALL_HORIZONS, None)]
            if m == m_full:
                predictions[name], confs[name] = prediction, confidence
                subsets += [(str(int(h)), horizon == h) for h in horizons]
            for label, mask in subsets:
                if mask is None:
                    metrics = evaluate(prediction, target, confidence, k=k)
                else:
                    metrics = evaluate(prediction[mask], target[mask], confidence[mask], k=k)
                rows.append(
                    {
                        "horizon": label,
                        "confidence": name,
                        "ensemble_count": m,
                        "ensemble_size": m_full,
                        **_plain(metrics),
                    }
                )
    return Scores(rows, predictions, confs)
