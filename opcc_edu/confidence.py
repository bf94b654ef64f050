"""Confidence functions: turn M ensemble value estimates per side into an answer and a confidence.

Each member i of a learned-model ensemble estimates both sides of a policy-comparison query,
``V_i`` (side a) and ``V̂_i`` (side b). The three baselines of Koul et al. (Section 5.3) combine
the M pairs into a prediction (1 means ``V_a < V_b``) and a confidence in [0, 1]:

* **EV** (ensemble voting): majority vote of ``V_i < V̂_i``; confidence is the majority fraction
  rescaled from [0.5, 1] to [0, 1], i.e. ``|2 k - M| / M`` for k votes for "a < b".
* **PCI** (paired confidence interval): prediction from the sign of ``mean(V - V̂)``; confidence
  is the largest level alpha whose two-sided t interval for the mean difference (df = M - 1)
  excludes 0. The interval excludes 0 exactly when ``|t| > t_{(1+alpha)/2}``, with ``t`` the
  paired t statistic, so the supremum is ``alpha* = 1 - 2 * sf(|t|)`` -- one minus the paired
  t-test p-value. Closed form, no loop over alpha.
* **U-PCI** (unpaired): same prediction; confidence is the largest alpha for which the separate
  t intervals of ``mean V`` and ``mean V̂`` do not overlap. Two intervals ``m ± w`` overlap
  (one containing the other included) exactly when ``|m_a - m_b| <= w_a + w_b``; both
  half-widths scale with the same t quantile, so ``alpha* = 1 - 2 * sf(|m_a - m_b| sqrt(M) /
  (s_a + s_b))``. This is symmetric in the two sides by construction.

Ties and degenerate inputs are defined, not left to floating-point luck:

* an exact tie (EV: k = M/2 votes; PCI/U-PCI: zero mean difference) predicts 1;
* PCI/U-PCI need M >= 2 members (with M = 1 there is no spread and no t distribution) and raise
  a ValueError otherwise;
* when the spread is exactly 0 (all members agree on the difference, or on both values), the
  interval is a point: confidence 1 for a nonzero difference, 0 for a zero difference;
* complex, NaN or infinite values raise a ValueError naming the argument (never a silent cast).

How PCI differs from the public reference code (``koulanurag/opcc-baselines``), which sweeps
alpha over a 0.01 grid with ``scipy.stats.t.interval``:

* the reference adds 1e-3 to the standard error ``s_d / sqrt(M)``; we drop the term. Its
  statistic ``|d̄| / (s_d / sqrt(M) + 1e-3)`` orders queries as ours does only where the
  standard error is large against 1e-3 (return differences of whole units or more). Queries
  whose members nearly agree are pulled down there: a zero spread with a nonzero mean
  difference gets at most the grid's 0.99, tied with every other query that reaches it, where
  ours gives every such query confidence 1, above all the others;
* the reference predicts 0 when the mean difference is exactly 0 (its default answer, never
  overwritten: no interval around 0 excludes 0), ours predicts 1 (the tie rule above). Both
  give such a query confidence 0, so its place in the ordering is the same and only its answer
  differs: the loss of the lowest-confidence queries, i.e. the end of the risk-coverage curve.
  Exact ties arise where every member gives both sides the same value (sparse rewards that no
  rollout of either side collects, in the mazes).

Scale: PCI and U-PCI depend only on ratios of a mean to a spread, so multiplying every value
of a query by one positive factor leaves its confidence unchanged. They are computed that way:
each query's values are first divided by a power of two near their largest magnitude (exact,
so ordinary inputs give bit-for-bit the textbook formulas' results), and values of 1e170,
whose squares would overflow, give the same confidences as values of 1.

Teaching baselines: :func:`random_confidence` (no information; its expected AURCC is given by
:func:`opcc_edu.metrics.expected_random_aurcc`) and :func:`oracle_confidence` (knows the true
loss; reaches :func:`opcc_edu.metrics.oracle_aurcc`).

Only numpy is imported at module level; scipy.stats is imported on first use.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .metrics import query_losses
from .names import CONFIDENCE_NAMES
from .utils import check_choice, check_finite, check_positive_int

__all__ = [
    "ConfidenceFunction",
    "ensemble_voting",
    "paired_confidence_interval",
    "unpaired_confidence_interval",
    "random_confidence",
    "oracle_confidence",
    "CONFIDENCE_FUNCTIONS",
    "CONFIDENCE_NAMES",
    "compute_confidence",
    "SyntheticEnsemble",
    "synthetic_ensemble",
]

ConfidenceFunction = Callable[[Any, Any], tuple[np.ndarray, np.ndarray]]


def _check_values(values_a: Any, values_b: Any, min_members: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """Validate two (N, M) member-value arrays and return them as float64."""
    arrays = []
    for name, values in (("values_a", values_a), ("values_b", values_b)):
        array = np.asarray(values)
        if array.ndim != 2:
            raise ValueError(f"{name} must have shape (N, M) (N queries, M ensemble members), got shape {array.shape}")
        if np.iscomplexobj(array):
            raise ValueError(f"{name} must be real, got complex dtype {array.dtype} (values are returns, not phases)")
        if not (np.issubdtype(array.dtype, np.number) or array.dtype == bool):
            raise ValueError(f"{name} must be numeric, got dtype {array.dtype}")
        if array.size == 0:
            raise ValueError(f"{name} is empty (shape {array.shape}); need N >= 1 queries and M >= 1 members")
        arrays.append(check_finite(array.astype(np.float64), name))
    a, b = arrays
    if a.shape != b.shape:
        raise ValueError(f"values_a and values_b must have the same shape (N, M), got {a.shape} and {b.shape}")
    if a.shape[1] < min_members:
        raise ValueError(
            f"values_a has M = {a.shape[1]} ensemble member(s); interval-based confidences need "
            f"M >= {min_members} to estimate a spread (use 'ev' for a single member)"
        )
    return a, b


def _t_confidence(gap: np.ndarray, scale: np.ndarray, df: int) -> np.ndarray:
    """Largest alpha with ``|gap| > t_{(1+alpha)/2, df} * scale``, i.e. ``1 - 2 sf(|gap|/scale)``.

    ``scale == 0`` is a zero-width interval: confidence 1 if ``gap != 0``, else 0.
    """
    from scipy import stats

    gap = np.abs(gap)
    degenerate = scale == 0
    with np.errstate(divide="ignore", invalid="ignore"):
        statistic = np.where(degenerate, 0.0, gap / np.where(degenerate, 1.0, scale))
    # 1 - 2 sf keeps precision near 1, where 2 cdf - 1 would round away small p-values.
    confidence = 1.0 - 2.0 * stats.t.sf(statistic, df)
    confidence = np.where(degenerate, (gap > 0).astype(np.float64), confidence)
    return np.clip(confidence, 0.0, 1.0)


def _standardise(*arrays: np.ndarray) -> list[np.ndarray]:
    """Divide each row of the (N, M) arrays by one power of two near the row's largest magnitude.

    The t statistics are ratios of a location to a spread, so a common positive factor per
    query cancels; dividing by a power of two is exact, so at ordinary scales every
    intermediate -- and the result -- is bit for bit what the unscaled formulas give, while
    values near 1e170 (whose squares overflow) or 1e-170 (whose squares underflow) give the
    same confidence as values near 1.
    """
    largest = np.max([np.max(np.abs(x), axis=1) for x in arrays], axis=0)
    _, exponent = np.frexp(largest)  # largest = f * 2**exponent with 0.5 <= f < 1 (exponent 0 for 0)
    scale = np.ldexp(1.0, exponent - 1)[:, None]  # 2**1024 would overflow; scaled values lie in [-2, 2)
    return [x / scale for x in arrays]


def _mean_prediction(difference: np.ndarray) -> np.ndarray:
    # mean(V - V̂) < 0 means V < V̂; a zero mean difference (a tie) predicts 1, as in EV.
    return (difference.mean(axis=1) <= 0).astype(np.int8)


def ensemble_voting(values_a: Any, values_b: Any) -> tuple[np.ndarray, np.ndarray]:
    """Ensemble voting (EV): majority of ``V_i < V̂_i`` and its rescaled agreement.

    Args:
        values_a: (N, M) member estimates of side a's value.
        values_b: (N, M) member estimates of side b's value.

    Returns:
        ``(prediction, confidence)``: (N,) int8, 1 when at least half of the members vote
        ``V_i < V̂_i`` (a member with ``V_i == V̂_i`` votes 0; an exact half-half split predicts
        1), and (N,) float64 ``|2 k - M| / M`` in {0, 1/M or 2/M, ..., 1}, where k counts the
        votes for 1. Its resolution is at most M//2 + 1 distinct values.

    Note:
        Voting follows the paper: a member's vote is the truth of ``V_i < V̂_i``. With sparse
        rewards (the mazes) many members can return exactly equal values; they all vote 0, so
        an ensemble that agrees exactly on *equal* values answers 0 with confidence 1, whereas
        PCI and U-PCI give such a query confidence 0.
    """
    a, b = _check_values(values_a, values_b)
    members = a.shape[1]
    votes = np.count_nonzero(a < b, axis=1)
    prediction = (2 * votes >= members).astype(np.int8)
    confidence = np.abs(2 * votes - members) / members
    return prediction, confidence.astype(np.float64)


def paired_confidence_interval(values_a: Any, values_b: Any) -> tuple[np.ndarray, np.ndarray]:
    """Paired confidence interval (PCI): 1 minus the paired t-test p-value, in closed form.

    With ``d_i = V_i - V̂_i``, mean ``d̄`` and sample standard deviation ``s_d`` (ddof=1), the
    alpha-level interval ``d̄ ± t_{(1+alpha)/2, M-1} s_d / sqrt(M)`` excludes 0 for every
    ``alpha < 1 - p`` where ``p = 2 sf(|d̄| sqrt(M) / s_d)`` is the two-sided paired t-test
    p-value (:func:`scipy.stats.ttest_rel`), and includes it from there on.

    Args:
        values_a: (N, M) member estimates of side a's value, M >= 2.
        values_b: (N, M) member estimates of side b's value.

    Returns:
        ``(prediction, confidence)``: (N,) int8, 1 when ``mean(V - V̂) <= 0``; (N,) float64 in
        [0, 1]. A zero spread gives confidence 1 for a nonzero mean difference, 0 otherwise.

    Raises:
        ValueError: for M < 2, mismatched shapes, empty, complex or non-finite inputs.
    """
    a, b = _check_values(values_a, values_b, min_members=2)
    members = a.shape[1]
    a, b = _standardise(a, b)  # so that a - b cannot overflow
    (difference,) = _standardise(a - b)  # so that squares of a small difference cannot underflow
    mean = difference.mean(axis=1)
    spread = difference.std(axis=1, ddof=1)
    confidence = _t_confidence(mean, spread / np.sqrt(members), df=members - 1)
    return _mean_prediction(difference), confidence


def unpaired_confidence_interval(values_a: Any, values_b: Any) -> tuple[np.ndarray, np.ndarray]:
    """Unpaired confidence interval (U-PCI): largest alpha at which the two t intervals separate.

    The alpha-level intervals are ``m_a ± q s_a / sqrt(M)`` and ``m_b ± q s_b / sqrt(M)`` with
    the same quantile ``q = t_{(1+alpha)/2, M-1}``. They overlap -- partially or with one inside
    the other -- exactly when ``|m_a - m_b| <= q (s_a + s_b) / sqrt(M)``, so the intervals are
    disjoint for every alpha below ``1 - 2 sf(|m_a - m_b| sqrt(M) / (s_a + s_b))``. Swapping
    the sides leaves the confidence unchanged and flips the prediction (except for an exact
    tie, which predicts 1 both ways). Since ``s_a + s_b >= s_d`` this is never more confident
    than PCI.

    Args:
        values_a: (N, M) member estimates of side a's value, M >= 2.
        values_b: (N, M) member estimates of side b's value.

    Returns:
        ``(prediction, confidence)`` as for :func:`paired_confidence_interval`. When both
        spreads are exactly 0 the intervals are points: confidence 1 if the means differ, else 0.

    Raises:
        ValueError: for M < 2, mismatched shapes, empty, complex or non-finite inputs.
    """
    a, b = _check_values(values_a, values_b, min_members=2)
    members = a.shape[1]
    a, b = _standardise(a, b)
    gap = a.mean(axis=1) - b.mean(axis=1)
    spread = a.std(axis=1, ddof=1) + b.std(axis=1, ddof=1)
    confidence = _t_confidence(gap, spread / np.sqrt(members), df=members - 1)
    return _mean_prediction(a - b), confidence


def random_confidence(n: int, seed: int = 0) -> np.ndarray:
    """Uniformly random confidences in [0, 1): the no-information baseline.

    Args:
        n: number of queries N (>= 1).
        seed: seed of the NumPy generator (same seed, same confidences).

    Returns:
        (N,) float64 confidences; their expected AURCC is
        :func:`opcc_edu.metrics.expected_random_aurcc` (about the full-coverage risk).
    """
    n = check_positive_int(n, "n (the number of queries)")
    return np.random.default_rng(check_positive_int(seed, "seed", minimum=0)).random(n)


def oracle_confidence(prediction: Any, target: Any) -> np.ndarray:
    """Confidence that knows the answers: 1 for every correct prediction, 0 for every wrong one.

    It cannot be computed without the true answers, so it is a yardstick, not a method: its
    AURCC, ``r_f**2 / 2``, is the smallest any confidence reaches for these predictions
    (:func:`opcc_edu.metrics.oracle_aurcc`). The two-level ties matter: ranking the correct
    answers first with distinct confidences scores worse under linear interpolation.

    Args:
        prediction: (N,) 0/1 predictions.
        target: (N,) 0/1 true answers.

    Returns:
        (N,) float64 confidences, ``1 - loss``.
    """
    return 1.0 - query_losses(prediction, target).astype(np.float64)


#: The ensemble-based confidence functions of the paper, by the names its tables use.
CONFIDENCE_FUNCTIONS: dict[str, ConfidenceFunction] = {
    "ev": ensemble_voting,
    "pci": paired_confidence_interval,
    "upci": unpaired_confidence_interval,
}


def resolve_confidences(names: Sequence[str]) -> tuple[str, ...]:
    """The confidence names checked against :data:`CONFIDENCE_FUNCTIONS`, as a tuple.

    The one check of a confidence name: :func:`compute_confidence`, the scoring entry
    (:func:`opcc_edu.scoring.score_values`) and the baselines' entry points call it before any
    work; the scoring loop then calls the registered functions directly.

    Raises:
        ValueError: an unknown name (the message lists the valid ones); a bare string.
    """
    if isinstance(names, str):
        raise ValueError(f"confidences must be a sequence of names, got the string {names!r}")
    for name in names:
        check_choice(name, CONFIDENCE_FUNCTIONS, "confidence")
    return tuple(names)


def compute_confidence(name: str, values_a: Any, values_b: Any) -> tuple[np.ndarray, np.ndarray]:
    """Apply the confidence function called ``name`` ("ev", "pci" or "upci").

    Args:
        name: key of :data:`CONFIDENCE_FUNCTIONS`.
        values_a: (N, M) member estimates of side a's value.
        values_b: (N, M) member estimates of side b's value.

    Returns:
        ``(prediction (N,) int8, confidence (N,) float64)``.
    """
    (name,) = resolve_confidences((name,))
    return CONFIDENCE_FUNCTIONS[name](values_a, values_b)


# --------------------------------------------------------------------------------------------
# Synthetic ensemble values for teaching and tests
# --------------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class SyntheticEnsemble:
    """Member value estimates for N synthetic queries, with the true values that label them.

    Attributes:
        values_a: (N, M) member estimates of side a's value.
        values_b: (N, M) member estimates of side b's value.
        true_a: (N,) true value of side a.
        true_b: (N,) true value of side b.
        target: (N,) int8, 1 iff ``true_a < true_b`` (the query's answer).
        difficulty: (N,) per-query model-error scale (return units) used to draw the members.
    """

    values_a: np.ndarray
    values_b: np.ndarray
    true_a: np.ndarray
    true_b: np.ndarray
    target: np.ndarray
    difficulty: np.ndarray

    def __len__(self) -> int:
        return int(self.target.shape[0])

    @property
    def n_members(self) -> int:
        """Ensemble size M."""
        return int(self.values_a.shape[1])


def synthetic_ensemble(
    n_queries: int,
    n_members: int,
    seed: int = 0,
    min_gap: float = 10.0,
    gap_scale: float = 20.0,
    difficulty_range: tuple[float, float] = (2.0, 100.0),
    shared_error: float = 1.0,
    correlation: float = 0.7,
) -> SyntheticEnsemble:
    """Draw ensemble value estimates that behave like a learned-model ensemble's.

    Each query has true values ``true_a`` and ``true_b = true_a + gap`` with ``|gap| >= min_gap``
    (the benchmark drops queries whose gap is below 10, Section 4.2 of Koul et al.). A query also
    has a difficulty ``d`` (log-uniform in ``difficulty_range``): how badly the learned models
    simulate it. Member i then estimates

        V_i = true_a + e_a + d * z_i,    V̂_i = true_b + e_b + d * (rho z_i + sqrt(1 - rho**2) x_i)

    with ``e_a, e_b ~ N(0, (shared_error d)**2)`` an error *all* members share (what the data
    cannot reveal; it is what makes confident answers wrong), and ``z_i, x_i ~ N(0, 1)``
    member-specific disagreement, correlated between the two sides by ``rho = correlation``
    because the same model simulates both. Hard queries get both larger errors and more
    disagreement, so disagreement carries information, as with a real ensemble.

    Args:
        n_queries: number of queries N.
        n_members: ensemble size M.
        seed: seed of the generator (same arguments, same values).
        min_gap: smallest |true_b - true_a|.
        gap_scale: scale of the exponential excess of |gap| over ``min_gap``.
        difficulty_range: (low, high) of the log-uniform difficulty d.
        shared_error: standard deviation of the shared error, in units of d.
        correlation: correlation rho of a member's errors on the two sides, in [-1, 1].

    Returns:
        A :class:`SyntheticEnsemble`.
    """
    n, m = check_positive_int(n_queries, "n_queries"), check_positive_int(n_members, "n_members")
    low, high = difficulty_range
    if not 0 < low <= high:
        raise ValueError(f"difficulty_range must satisfy 0 < low <= high, got {difficulty_range!r}")
    if not -1.0 <= correlation <= 1.0:
        raise ValueError(f"correlation must lie in [-1, 1], got {correlation!r}")
    if min_gap < 0 or gap_scale < 0 or shared_error < 0:
        raise ValueError(
            f"min_gap, gap_scale and shared_error must be >= 0, got {min_gap!r}, {gap_scale!r}, {shared_error!r}"
        )
    rng = np.random.default_rng(seed)
    true_a = rng.uniform(0.0, 300.0, n)
    gap = rng.choice([-1.0, 1.0], n) * (min_gap + rng.exponential(gap_scale, n) if gap_scale > 0 else min_gap)
    true_b = true_a + gap
    difficulty = np.exp(rng.uniform(np.log(low), np.log(high), n))
    shared = rng.normal(0.0, 1.0, (n, 2)) * (shared_error * difficulty)[:, None]
    z = rng.normal(0.0, 1.0, (n, m))
    x = rng.normal(0.0, 1.0, (n, m))
    values_a = true_a[:, None] + shared[:, :1] + difficulty[:, None] * z
    values_b = (
        true_b[:, None] + shared[:, 1:] + difficulty[:, None] * (correlation * z + np.sqrt(1.0 - correlation**2) * x)
    )
    return SyntheticEnsemble(values_a, values_b, true_a, true_b, (true_a < true_b).astype(np.int8), difficulty)
