"""Calibration: is a confidence a probability of being right, and do member intervals cover?

The paper judges a confidence only by the order it puts the answers in. Two further questions
(the metrics of Chung et al.'s Uncertainty Toolbox, 2021, and of classifier calibration) are
answered here.

**Confidence as P(correct).** EV, PCI and U-PCI are rescaled from [0.5, 1] to [0, 1] (EV's
majority fraction; PCI's and U-PCI's ``1 - p`` of a two-sided test), so their direct reading as a
probability that the answer is right is :func:`confidence_as_probability`, ``(1 + c) / 2``: the
majority share of the members for EV, and for PCI ``1 - p / 2``, the one-sided confidence that
the mean difference has the predicted sign. How well that reading matches the observed rate of
correct answers is measured by:

* :func:`reliability_curve` -- accuracy against mean probability in equal-width bins;
* :func:`expected_calibration_error` (ECE) -- the bin-weighted mean gap between the two;
* :func:`brier_score` -- the mean squared gap between probability and correctness;
* the AUROC of correctness (:func:`opcc_edu.metrics.auroc`), which ignores the scale and looks
  at the order only.

:func:`isotonic_calibration` maps a confidence to P(correct) with an isotonic regression
(scikit-learn), *cross-fitted*: queries are split at random into folds, and each fold is mapped
by the regression fitted on the others, so no answer is calibrated by a fit that saw it. The
result is one more confidence (:meth:`opcc_edu.baselines.Answers.calibrate`).

**Interval coverage.** Each side's M member values give intervals for its true value at every
nominal level ``p``; a calibrated family covers the truth in a fraction ``p`` of the sides.
:func:`interval_coverage` gives the observed fraction for three families:

* ``"t"`` -- the t interval of the member mean, ``mean ± t_{(1+p)/2, M-1} s / sqrt(M)``
  (what PCI and U-PCI assume);
* ``"quantile"`` -- the members' empirical quantiles ``[Q_{(1-p)/2}, Q_{(1+p)/2}]``;
* ``"gaussian"`` -- the Uncertainty Toolbox's centred interval ``mean ± z_{(1+p)/2} s`` of a
  Gaussian with the members' mean and standard deviation.

Expected against observed coverage is the calibration curve; :func:`miscalibration_area` is
the area between it and the diagonal.

Why the toolbox is used for some of this and not all: Uncertainty Toolbox 0.1.1 installs and
runs here with numpy 2, so its miscalibration area (the area between the curves, crossings
handled) is called as it is, and the tests check our Gaussian-interval proportions and area
against its ``get_proportion_lists_vectorized`` and ``miscalibration_area``. But its intervals
are Gaussian only and it rejects a standard deviation of 0, which ensemble members that agree
exactly (a maze side that never reaches the goal) produce; and it has no t interval of a mean,
no empirical-quantile interval, and no binary-outcome calibration (ECE, Brier, reliability of a
P(correct)). Those are implemented here with the toolbox's definitions: the expected
proportions ``linspace(0, 1, num_bins)``, centred intervals, and a truth on an interval's end
counted as covered. The toolbox is imported only when an area is computed.

Shapes: N queries, M members, S sides, L nominal levels, B bins.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from .metrics import auroc, query_losses
from .names import ALL_HORIZONS
from .utils import check_choice, check_finite, check_positive_int

__all__ = [
    "INTERVAL_KINDS",
    "INTERVAL_KIND_NAMES",
    "ReliabilityCurve",
    "brier_score",
    "calibration_metrics",
    "confidence_as_probability",
    "coverage_table",
    "expected_calibration_error",
    "interval_coverage",
    "isotonic_calibration",
    "miscalibration_area",
    "reliability_curve",
]

#: The interval families of :func:`interval_coverage`.
INTERVAL_KINDS: tuple[str, ...] = ("t", "quantile", "gaussian")

#: Display names of :data:`INTERVAL_KINDS`.
INTERVAL_KIND_NAMES: dict[str, str] = {
    "t": "t interval of the mean",
    "quantile": "members' quantiles",
    "gaussian": "Gaussian of the members",
}


# --------------------------------------------------------------------------------------------
# Input checks
# --------------------------------------------------------------------------------------------
def _as_real(values: Any, argument: str) -> np.ndarray:
    array = np.asarray(values)
    if array.size == 0:
        raise ValueError(f"{argument} is empty; at least one value is needed")
    if not (np.issubdtype(array.dtype, np.number) or array.dtype == bool) or np.iscomplexobj(array):
        raise ValueError(f"{argument} must be real numbers, got dtype {array.dtype}")
    return check_finite(array.astype(np.float64), argument)


def _as_vector(values: Any, argument: str, n: int | None = None) -> np.ndarray:
    array = _as_real(values, argument)
    if array.ndim != 1:
        raise ValueError(f"{argument} must be a 1-D array of shape (N,), got shape {array.shape}")
    if n is not None and array.size != n:
        raise ValueError(f"{argument} has {array.size} entries but the other inputs have {n}")
    return array


def _as_probability(values: Any, argument: str = "probability") -> np.ndarray:
    array = _as_vector(values, argument)
    if array.min() < 0 or array.max() > 1:
        raise ValueError(f"{argument} must lie in [0, 1], got values from {array.min()!r} to {array.max()!r}")
    return array


def _as_correct(values: Any, n: int, argument: str = "correct") -> np.ndarray:
    array = _as_vector(values, argument, n)
    if np.any((array != 0) & (array != 1)):
        raise ValueError(f"{argument} must hold 0/1 (1 = the answer is right), got {np.unique(array)[:5]!r}")
    return array


# --------------------------------------------------------------------------------------------
# Confidence as a probability of being right
# --------------------------------------------------------------------------------------------
def confidence_as_probability(confidence: Any) -> np.ndarray:
    """(N,) the direct probability reading ``(1 + c) / 2`` of a confidence ``c`` in [0, 1].

    EV, PCI and U-PCI map [0.5, 1] to [0, 1]; this undoes the rescaling (see the module
    docstring), so 0 reads as a coin flip and 1 as certainty.
    """
    return (1.0 + _as_probability(confidence, "confidence")) / 2.0


@dataclasses.dataclass
class ReliabilityCurve:
    """Accuracy against mean probability in B equal-width bins of [0, 1] (empty bins kept)."""

    lower: np.ndarray
    """(B,) lower edge of each bin."""
    upper: np.ndarray
    """(B,) upper edge of each bin (the last bin includes 1)."""
    mean_probability: np.ndarray
    """(B,) mean probability of the answers in each bin (NaN when empty)."""
    accuracy: np.ndarray
    """(B,) share of right answers in each bin (NaN when empty)."""
    count: np.ndarray
    """(B,) answers in each bin."""


def reliability_curve(probability: Any, correct: Any, n_bins: int = 10) -> ReliabilityCurve:
    """Bin answers by their probability of being right and compare with their accuracy.

    Args:
        probability: (N,) probabilities in [0, 1] that each answer is right.
        correct: (N,) 1 where the answer is right, 0 where it is wrong.
        n_bins: B equal-width bins of [0, 1]; a probability on an inner edge goes to the upper bin.

    Returns:
        A :class:`ReliabilityCurve`.
    """
    n_bins = check_positive_int(n_bins, "n_bins")
    probability = _as_probability(probability)
    correct = _as_correct(correct, probability.size)
    edges = np.linspace(0.0, 1.0, n_bins + 1)
    index = np.clip(np.searchsorted(edges, probability, side="right") - 1, 0, n_bins - 1)
    count = np.bincount(index, minlength=n_bins)
    with np.errstate(divide="ignore", invalid="ignore"):
        mean_probability = np.bincount(index, probability, n_bins) / count
        accuracy = np.bincount(index, correct, n_bins) / count
    return ReliabilityCurve(edges[:-1], edges[1:], mean_probability, accuracy, count)


def expected_calibration_error(probability: Any, correct: Any, n_bins: int = 10) -> float:
    """ECE: ``sum_b (n_b / N) |accuracy_b - mean probability_b|`` over B equal-width bins.

    0 for a calibrated probability; at most 1.
    """
    curve = reliability_curve(probability, correct, n_bins)
    used = curve.count > 0
    weight = curve.count[used] / curve.count.sum()
    return float(np.sum(weight * np.abs(curve.accuracy[used] - curve.mean_probability[used])))


def brier_score(probability: Any, correct: Any) -> float:
    """The mean of ``(probability - correct)**2``: 0 is perfect, 0.25 a constant 1/2."""
    probability = _as_probability(probability)
    correct = _as_correct(correct, probability.size)
    return float(np.mean((probability - correct) ** 2))


def isotonic_calibration(confidence: Any, correct: Any, folds: int = 2, seed: int = 0) -> np.ndarray:
    """(N,) cross-fitted isotonic map from confidence to the probability of being right.

    The answers are split at random (``seed``) into ``folds`` parts of near-equal size; each
    part is mapped by a non-decreasing isotonic regression (scikit-learn, values clipped to
    [0, 1] and out-of-range confidences to the fitted ends) fitted on the other parts.

    Args:
        confidence: (N,) finite confidences (any scale).
        correct: (N,) 1 where the answer is right, 0 where it is wrong.
        folds: number of parts, at least 2 and at most N.
        seed: seed of the split.

    Returns:
        (N,) float64 probabilities in [0, 1].
    """
    from sklearn.isotonic import IsotonicRegression

    confidence = _as_vector(confidence, "confidence")
    correct = _as_correct(correct, confidence.size)
    folds = check_positive_int(folds, "folds", minimum=2)
    if folds > confidence.size:
        raise ValueError(f"folds must be at most the number of answers {confidence.size}, got {folds}")
    part = np.empty(confidence.size, dtype=np.int64)
    part[np.random.default_rng(seed).permutation(confidence.size)] = np.arange(confidence.size) % folds
    calibrated = np.empty(confidence.size)
    for k in range(folds):
        fit = part != k
        model = IsotonicRegression(y_min=0.0, y_max=1.0, increasing=True, out_of_bounds="clip")
        model.fit(confidence[fit], correct[fit])
        calibrated[~fit] = model.predict(confidence[~fit])
    return calibrated


def calibration_metrics(
    prediction: Any,
    target: Any,
    confidence: Any,
    n_bins: int = 10,
    folds: int = 2,
    seed: int = 0,
    as_probability: bool = True,
) -> dict[str, float | int | None]:
    """ECE, Brier score and AUROC of a confidence read as P(correct), before and after isotonic
    recalibration (:func:`isotonic_calibration`).

    Args:
        prediction: (N,) 0/1 predictions.
        target: (N,) 0/1 true answers.
        confidence: (N,) confidences, in [0, 1] when ``as_probability``.
        n_bins: bins of the ECE.
        folds: parts of the cross-fit.
        seed: seed of the split into parts.
        as_probability: score :func:`confidence_as_probability` of the confidence as it is;
            False for a confidence with no probability reading (the ``before`` ECE and Brier
            score are then None).

    Returns:
        ``ece``, ``brier``, ``auroc`` of :func:`confidence_as_probability` and ``ece_calibrated``,
        ``brier_calibrated``, ``auroc_calibrated`` of the cross-fitted calibration, plus
        ``accuracy`` (the share of right answers) and ``n``. JSON-ready.
    """
    correct = 1 - query_losses(prediction, target)
    confidence = _as_vector(confidence, "confidence", correct.size)
    calibrated = isotonic_calibration(confidence, correct, folds=folds, seed=seed)
    raw: dict[str, float | None] = {"ece": None, "brier": None}
    if as_probability:
        probability = confidence_as_probability(confidence)
        raw = {
            "ece": expected_calibration_error(probability, correct, n_bins),
            "brier": brier_score(probability, correct),
        }
    return {
        **raw,
        "auroc": auroc(prediction, target, confidence),
        "ece_calibrated": expected_calibration_error(calibrated, correct, n_bins),
        "brier_calibrated": brier_score(calibrated, correct),
        "auroc_calibrated": auroc(prediction, target, calibrated),
        "accuracy": float(correct.mean()),
        "n": int(correct.size),
    }


# --------------------------------------------------------------------------------------------
# Interval coverage of the members' values
# --------------------------------------------------------------------------------------------
def interval_coverage(members: Any, truth: Any, kind: str = "t", num_bins: int = 100) -> tuple[np.ndarray, np.ndarray]:
    """Expected and observed coverage of the members' intervals at L nominal levels.

    Args:
        members: (S, M) member values of S sides (M >= 2).
        truth: (S,) true values.
        kind: ``"t"``, ``"quantile"`` or ``"gaussian"`` (:data:`INTERVAL_KINDS`, module docstring).
        num_bins: L levels ``linspace(0, 1, L)``, as the Uncertainty Toolbox.

    Returns:
        ``(expected, observed)``, two (L,) arrays: the nominal levels and the share of sides
        whose interval at that level holds the truth (ends included). A side whose members all
        agree has a point interval below level 1 (for ``"t"`` and ``"gaussian"`` the interval
        at level 1 is the whole line).
    """
    check_choice(kind, INTERVAL_KINDS, "kind")
    members = _as_real(members, "members")
    if members.ndim != 2 or members.shape[1] < 2:
        raise ValueError(f"members must have shape (S, M) with M >= 2 members, got shape {members.shape}")
    truth = _as_vector(truth, "truth", members.shape[0])
    expected = np.linspace(0.0, 1.0, check_positive_int(num_bins, "num_bins", minimum=2))
    return expected, _coverage(members, truth, kind, expected)


def _coverage(members: np.ndarray, truth: np.ndarray, kind: str, levels: np.ndarray) -> np.ndarray:
    """(L,) share of the S sides whose interval at each level holds the truth."""
    from scipy import stats

    if kind == "quantile":
        lower = np.quantile(members, 0.5 - levels / 2, axis=1)
        upper = np.quantile(members, 0.5 + levels / 2, axis=1)
        return np.mean((lower <= truth) & (truth <= upper), axis=1)
    m = members.shape[1]
    spread = members.std(axis=1, ddof=1)
    if kind == "t":
        multiple, scale = stats.t.ppf(0.5 + levels / 2, df=m - 1), spread / np.sqrt(m)
    else:
        multiple, scale = stats.norm.ppf(0.5 + levels / 2), spread
    # inf * 0 (level 1, members that agree) is the whole line, not NaN
    with np.errstate(invalid="ignore"):
        half_width = np.where(np.isinf(multiple)[:, None], np.inf, multiple[:, None] * scale[None, :])
    return np.mean(np.abs(truth - members.mean(axis=1))[None, :] <= half_width, axis=1)


def miscalibration_area(expected: Any, observed: Any) -> float:
    """Area between the calibration curve ``(expected, observed)`` and the diagonal.

    Computed by the Uncertainty Toolbox's ``miscalibration_area_from_proportions`` (trapezoids,
    with the crossing points of the two curves handled). 0 is calibrated; at most 1/2.
    """
    from uncertainty_toolbox.metrics_calibration import miscalibration_area_from_proportions

    expected = _as_vector(expected, "expected")
    observed = _as_vector(observed, "observed", expected.size)
    return float(miscalibration_area_from_proportions(expected, observed))


def coverage_table(
    values_a: Any,
    values_b: Any,
    value_a: Any,
    value_b: Any,
    horizon: Any,
    kinds: tuple[str, ...] = INTERVAL_KINDS,
    num_bins: int = 100,
) -> dict[str, dict[str, dict[str, float | int]]]:
    """Interval calibration of both sides of every query, per horizon and over all horizons.

    Args:
        values_a: (N, M) member values of side a.
        values_b: (N, M) member values of side b.
        value_a: (N,) true values of side a.
        value_b: (N,) true values of side b.
        horizon: (N,) horizons.
        kinds: interval families (:data:`INTERVAL_KINDS`).
        num_bins: nominal levels L.

    Returns:
        ``table[kind][h]`` for each horizon ``h`` (a string) and ``"all"``:
        ``miscalibration_area``, ``coverage_50``, ``coverage_90`` (observed coverage of the
        intervals at levels 0.5 and 0.9) and ``n_sides``. JSON-ready.
    """
    members = np.concatenate([_as_real(values_a, "values_a"), _as_real(values_b, "values_b")])
    truth = np.concatenate([_as_vector(value_a, "value_a"), _as_vector(value_b, "value_b")])
    horizons = np.asarray(horizon)
    if horizons.ndim != 1 or 2 * horizons.size != truth.size or members.shape[0] != truth.size:
        raise ValueError(
            f"values_a, values_b, value_a, value_b and horizon must describe the same N queries; got shapes "
            f"{np.shape(values_a)}, {np.shape(values_b)}, {np.shape(value_a)}, {np.shape(value_b)}, {horizons.shape}"
        )
    sides_h = np.concatenate([horizons, horizons])
    subsets = [(str(int(h)), sides_h == h) for h in np.unique(horizons)] + [(ALL_HORIZONS, None)]
    table: dict[str, dict[str, dict[str, float | int]]] = {}
    for kind in kinds:
        check_choice(kind, INTERVAL_KINDS, "kind")
        rows = {}
        for label, mask in subsets:
            m, t = (members, truth) if mask is None else (members[mask], truth[mask])
            expected, observed = interval_coverage(m, t, kind, num_bins)
            half, most = _coverage(m, t, kind, np.array([0.5, 0.9]))
            rows[label] = {
                "miscalibration_area": miscalibration_area(expected, observed),
                "coverage_50": float(half),
                "coverage_90": float(most),
                "n_sides": int(t.size),
            }
        table[kind] = rows
    return table
