"""Scoring member value estimates into the paper's metrics: the one place it is done.

An ensemble answers N queries with (N, M) member values per side. :func:`score_values` turns
them into predictions and confidences (one per confidence function) and scores each with
:func:`opcc_edu.metrics.evaluate` on all queries, on each horizon, and on ensemble prefixes
(members 0..m-1). A baseline that gives its answers directly (the no-model heuristic) is
scored by :func:`score_answers`, through the same per-horizon loop. ``opcc-edu run``, the
ensemble, FQE and heuristic baselines, the ablation runner and the book all score here, once per
run, so a number means the same thing wherever it is printed.

Two types carry answers: :class:`MemberValues`, what members say (the ensemble, FQE), and
:class:`Scores`, what the metrics make of answers (the heuristic, without members, gives these).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from .confidence import CONFIDENCE_FUNCTIONS, resolve_confidences
from .metrics import evaluate
from .names import ALL_HORIZONS, CONFIDENCES

__all__ = ["MemberValues", "Scores", "score_answers", "score_values"]

#: The keys of a :class:`Scores` row that say what was scored (the others are metrics).
_ROW_KEYS = ("horizon", "confidence", "ensemble_count", "ensemble_size")


@dataclasses.dataclass
class MemberValues:
    """Each member's value estimate of each side of N queries: what a run returns, sends between
    processes and stores, and what :class:`opcc_edu.baselines.Answers` holds (plain arrays)."""

    values_a: np.ndarray
    """(N, M) estimates of side a's value; an (N, M, R) array is averaged over its R runs."""
    values_b: np.ndarray
    """(N, M) estimates of side b's value, as ``values_a``."""
    target: np.ndarray
    """(N,) true answers, 1 iff V_a < V_b."""
    horizon: np.ndarray
    """(N,) query horizons."""
    info: dict[str, Any] = dataclasses.field(default_factory=dict)
    """JSON-ready facts of the run (timings, cache hits)."""

    def __post_init__(self) -> None:
        a, b = (np.asarray(v, dtype=np.float64) for v in (self.values_a, self.values_b))
        a, b = (v.mean(axis=2) if v.ndim == 3 else v for v in (a, b))  # a member's Monte-Carlo mean
        if a.ndim != 2 or a.shape != b.shape:
            raise ValueError(
                "values_a and values_b must both have shape (N, M) or (N, M, R), "
                f"got {np.shape(self.values_a)} and {np.shape(self.values_b)}"
            )
        n = a.shape[0]
        target = np.asarray(self.target).astype(np.int8).reshape(-1)
        horizon = np.asarray(self.horizon).astype(np.int64).reshape(-1)
        if target.shape != (n,) or horizon.shape != (n,):
            raise ValueError(
                f"target and horizon must hold one entry per query, the {n} rows of the values; "
                f"got shapes {target.shape} and {horizon.shape}"
            )
        if not np.all(np.isfinite(a)) or not np.all(np.isfinite(b)):
            raise ValueError("values_a and values_b must be finite (a model rollout diverged?)")
        self.values_a, self.values_b, self.target, self.horizon = a, b, target, horizon

    @property
    def ensemble_size(self) -> int:
        """Members M."""
        return int(self.values_a.shape[1])

    def __len__(self) -> int:
        return int(self.values_a.shape[0])

    def prefix(self, m: int) -> MemberValues:
        """The values of members 0..m-1 (``info`` shared)."""
        if not 1 <= int(m) <= self.ensemble_size:
            raise ValueError(f"m must be between 1 and the ensemble size {self.ensemble_size}, got {m}")
        return MemberValues(self.values_a[:, :m], self.values_b[:, :m], self.target, self.horizon, self.info)

    def score(
        self, confidences: Sequence[str] = CONFIDENCES, ensemble_counts: Sequence[int] = (), k: int = 10
    ) -> Scores:
        """:func:`score_values` of these values."""
        return score_values(self.values_a, self.values_b, self.target, self.horizon, confidences, ensemble_counts, k)


@dataclasses.dataclass
class Scores:
    """What the metrics make of a baseline's answers (:func:`score_values`, :func:`score_answers`)."""

    rows: list[dict[str, float | int | str]]
    """One dict per scored subset: ``horizon`` (a string, or :data:`ALL_HORIZONS`),
    ``confidence``, ``ensemble_count``, ``ensemble_size``, then every scalar that
    :func:`opcc_edu.metrics.evaluate` returns (``n`` as an int)."""
    predictions: dict[str, np.ndarray]
    """(N,) predictions of the full ensemble, by confidence name."""
    confidences: dict[str, np.ndarray]
    """(N,) confidences of the full ensemble, by confidence name."""
    target: np.ndarray
    """(N,) true answers the predictions were scored against."""
    horizon: np.ndarray
    """(N,) query horizons."""
    info: dict[str, Any] = dataclasses.field(default_factory=dict)
    """JSON-ready facts of the run (timings, the rule)."""

    def __len__(self) -> int:
        return int(np.shape(self.target)[0])

    @property
    def ensemble_size(self) -> int:
        """Members M of the answers scored (1 for a baseline without members)."""
        return max((int(row["ensemble_size"]) for row in self.rows), default=1)

    def table(self, ensemble_count: int | None = None) -> dict[str, dict[str, dict[str, float]]]:
        """``table[confidence][horizon]`` = the metrics of one prefix (default: all members)."""
        out: dict[str, dict[str, dict[str, float]]] = {}
        for row in self.rows:
            size = row["ensemble_size"] if ensemble_count is None else ensemble_count
            if row["ensemble_count"] != size:
                continue
            metrics = {key: value for key, value in row.items() if key not in _ROW_KEYS}
            out.setdefault(str(row["confidence"]), {})[str(row["horizon"])] = metrics
        return out


def _plain(metrics: dict) -> dict[str, float | int]:
    return {key: (int(v) if key == "n" else float(v)) for key, v in metrics.items() if np.isscalar(v)}


def _per_horizon(
    prediction: np.ndarray, target: np.ndarray, confidence: np.ndarray, horizon: np.ndarray | None, k: int
) -> list[tuple[str, dict[str, float | int]]]:
    """``(label, metrics)`` on all queries, then on each horizon (none when ``horizon`` is None)."""
    out = [(ALL_HORIZONS, _plain(evaluate(prediction, target, confidence, k=k)))]
    for h in np.unique(horizon) if horizon is not None else ():
        mask = horizon == h
        out.append((str(int(h)), _plain(evaluate(prediction[mask], target[mask], confidence[mask], k=k))))
    return out


def score_answers(
    answers: Mapping[str, tuple[np.ndarray, np.ndarray]], target: np.ndarray, horizon: np.ndarray, k: int = 10
) -> Scores:
    """Score answers given directly: ``answers[name] = (prediction (N,), confidence (N,))``.

    For a baseline without members (the no-model heuristic, or answers read back from a run):
    each named answer is scored on all queries and on each horizon, as one "member"
    (``ensemble_count = ensemble_size = 1``), in the rows of :func:`score_values`.

    Args:
        answers: name -> (N,) predictions (1 iff V_a < V_b) and (N,) confidences.
        target: (N,) true answers.
        horizon: (N,) horizons.
        k: bins of the coverage resolution CR_K.
    """
    target, horizon = np.asarray(target), np.asarray(horizon)
    rows: list[dict[str, float | int | str]] = []
    predictions, confs = {}, {}
    for name, (prediction, confidence) in answers.items():
        prediction, confidence = np.asarray(prediction), np.asarray(confidence)
        predictions[name], confs[name] = prediction, confidence
        for label, metrics in _per_horizon(prediction, target, confidence, horizon, k):
            rows.append({"horizon": label, "confidence": name, "ensemble_count": 1, "ensemble_size": 1, **metrics})
    return Scores(rows, predictions, confs, target, horizon)


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
    confidences = resolve_confidences(confidences)
    values_a, values_b, target, horizon = map(np.asarray, (values_a, values_b, target, horizon))
    m_full = int(values_a.shape[1])
    counts = sorted({int(c) for c in ensemble_counts if 1 <= int(c) < m_full} | {m_full})
    rows: list[dict[str, float | int | str]] = []
    predictions: dict[str, np.ndarray] = {}
    confs: dict[str, np.ndarray] = {}
    for m in counts:
        for name in confidences:
            if name != "ev" and m < 2:
                continue
            prediction, confidence = CONFIDENCE_FUNCTIONS[name](values_a[:, :m], values_b[:, :m])
            if m == m_full:
                predictions[name], confs[name] = prediction, confidence
            by_horizon = horizon if m == m_full else None
            for label, metrics in _per_horizon(prediction, target, confidence, by_horizon, k):
                rows.append(
                    {"horizon": label, "confidence": name, "ensemble_count": m, "ensemble_size": m_full, **metrics}
                )
    return Scores(rows, predictions, confs, target, horizon)
