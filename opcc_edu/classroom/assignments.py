"""Helpers of the classroom assignments: check a student's confidence function and score it.

A confidence function has the signature of :data:`opcc_edu.confidence.CONFIDENCE_FUNCTIONS`:
``fn(values_a (N, M), values_b (N, M)) -> (prediction (N,), confidence (N,))`` with prediction 1
meaning ``V_a < V_b``. :func:`grade_confidence_function` checks the contract with messages a
student can act on, then scores the function next to reference confidences on the same values.

The "design a confidence function" assignment (graded with Otter-Grader, see
:mod:`opcc_edu.classroom.teaching`) splits one maze's queries in two with :func:`design_task_data`: the
student tunes on the ``tuning`` half and is graded on the ``held_out`` half, which the student
notebook never loads, against the baselines' :func:`baseline_selective_gains` on that half.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ..baselines import answer_queries
from ..confidence import CONFIDENCE_FUNCTIONS, CONFIDENCE_NAMES
from ..config import get_profile, use_profile
from ..metrics import evaluate, selective_gain
from ..utils import check_choice

if TYPE_CHECKING:
    import pandas as pd

#: Columns of :func:`grade_confidence_function`: the paper's metrics and excess AURCC, then the
#: tie-fair ones (:data:`opcc_edu.names.TIE_FAIR_METRICS`), so that a function scoring well only
#: through ties (a constant confidence halves AURCC) shows a selective gain of 0.
GRADED_METRICS: tuple[str, ...] = (
    "aurcc",
    "rpp",
    "cr_k",
    "loss",
    "augrc",
    "excess_aurcc",
    "expected_aurcc",
    "selective_gain",
    "auroc",
)


def check_confidence_output(output: Any, n: int, name: str = "your function") -> tuple[np.ndarray, np.ndarray]:
    """Validate what a confidence function returned: ``(prediction (n,), confidence (n,))``.

    Raises:
        ValueError: naming what is wrong (not a pair, wrong shape, prediction not 0/1,
            non-finite confidence).
    """
    if not isinstance(output, tuple) or len(output) != 2:
        raise ValueError(f"{name} must return a pair (prediction, confidence), got {type(output).__name__}")
    prediction, confidence = (np.asarray(x) for x in output)
    for label, arr in (("prediction", prediction), ("confidence", confidence)):
        if arr.shape != (n,):
            raise ValueError(f"{name}: {label} must have shape ({n},), got {arr.shape}")
    if not np.isin(prediction, (0, 1)).all():
        raise ValueError(f"{name}: prediction must contain only 0 and 1, got values {np.unique(prediction)[:5]}")
    if not np.issubdtype(confidence.dtype, np.number) or not np.isfinite(confidence).all():
        raise ValueError(f"{name}: confidence must be finite numbers")
    return prediction.astype(np.int8), confidence.astype(np.float64)


def swap_consistency(fn: Callable, values_a: Any, values_b: Any) -> float:
    """Fraction of queries (without exact ties in the ensemble mean) on which swapping the two
    sides flips the prediction and keeps the confidence (to 1e-9). 1.0 for a consistent function.
    """
    a, b = np.asarray(values_a, dtype=np.float64), np.asarray(values_b, dtype=np.float64)
    n = a.shape[0]
    p1, c1 = check_confidence_output(fn(a, b), n)
    p2, c2 = check_confidence_output(fn(b, a), n, "your function (sides swapped)")
    untied = a.mean(1) != b.mean(1)
    if not untied.any():
        return 1.0
    ok = (p1 != p2) & np.isclose(c1, c2, rtol=0, atol=1e-9)
    return float(ok[untied].mean())


def grade_confidence_function(
    fn: Callable,
    values_a: Any,
    values_b: Any,
    target: Any,
    references: Sequence[str] = ("ev", "pci", "upci"),
    k: int = 10,
    name: str = "yours",
) -> pd.DataFrame:
    """Score ``fn`` and reference confidence functions on the same ensemble values.

    Args:
        fn: the function to grade, ``fn(values_a, values_b) -> (prediction, confidence)``.
        values_a: (N, M) member value estimates of side a.
        values_b: (N, M) member value estimates of side b.
        target: (N,) true answers (1 iff V_a < V_b).
        references: names from :data:`opcc_edu.confidence.CONFIDENCE_FUNCTIONS`.
        k: bins of CR_K.
        name: the row label of ``fn``.

    Returns:
        ``pandas.DataFrame`` indexed by function, with the columns of :data:`GRADED_METRICS`
        and ``swap_consistent`` (see :func:`swap_consistency`).
    """
    import pandas as pd

    a, b = np.asarray(values_a, dtype=np.float64), np.asarray(values_b, dtype=np.float64)
    if a.ndim != 2 or a.shape != b.shape:
        raise ValueError(f"values_a and values_b must both have shape (N, M); got {a.shape} and {b.shape}")
    target = np.asarray(target)
    if target.shape != (a.shape[0],):
        raise ValueError(f"target must have shape ({a.shape[0]},), got {target.shape}")
    rows = {}
    for ref in references:
        check_choice(ref, CONFIDENCE_FUNCTIONS, "references")
        ref_fn = CONFIDENCE_FUNCTIONS[ref]
        ref_prediction, ref_confidence = ref_fn(a, b)
        scores = evaluate(ref_prediction, target, ref_confidence, k=k)
        rows[CONFIDENCE_NAMES[ref]] = {
            **{m: scores[m] for m in GRADED_METRICS},
            "swap_consistent": swap_consistency(ref_fn, a, b),
        }
    prediction, confidence = check_confidence_output(fn(a, b), a.shape[0])
    scores = evaluate(prediction, target, confidence, k=k)
    rows[name] = {**{m: scores[m] for m in GRADED_METRICS}, "swap_consistent": swap_consistency(fn, a, b)}
    frame = pd.DataFrame(rows).T
    frame.index.name = "confidence function"
    return frame


# --------------------------------------------------------------------------------------------
# The design assignment's data: a tuning half and a held-out half of one maze's queries
# --------------------------------------------------------------------------------------------
#: Environment of the design assignment (its ensemble trains in seconds at the tiny profile).
DESIGN_ENV = "maze2d-umaze"

#: The two halves of its queries: what the student tunes on, and what grades the student.
DESIGN_SPLITS: tuple[str, ...] = ("tuning", "held_out")


@dataclass(frozen=True)
class DesignTaskData:
    """One half of the design assignment's queries.

    Attributes:
        values_a: (N, M) member value estimates of side a.
        values_b: (N, M) member value estimates of side b.
        target: (N,) true answers (1 iff V_a < V_b).
        split: ``"tuning"`` or ``"held_out"``.
    """

    values_a: np.ndarray
    values_b: np.ndarray
    target: np.ndarray
    split: str


@functools.lru_cache(maxsize=4)
def _design_answers(profile: str, progress: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    with use_profile(profile):
        answers = answer_queries(DESIGN_ENV, progress=progress)
    return answers.values_a, answers.values_b, np.asarray(answers.target)


def design_task_data(split: str = "tuning", seed: int = 0, progress: bool = False) -> DesignTaskData:
    """The ensemble values of one half of :data:`DESIGN_ENV`'s queries at the active profile.

    The queries are answered by :func:`opcc_edu.baselines.answer_queries` (trained once, then
    cached) and split in two halves by a permutation drawn with ``seed``.

    Args:
        split: ``"tuning"`` or ``"held_out"``.
        seed: seed of the split (the same on both calls, so the halves are disjoint).
        progress: show progress bars while the ensemble trains.

    Returns:
        :class:`DesignTaskData` (fresh arrays: the caller may modify them).
    """
    check_choice(split, DESIGN_SPLITS, "split")
    values_a, values_b, target = _design_answers(get_profile().name, bool(progress))
    order = np.random.default_rng(seed).permutation(len(target))
    half = order[: len(target) // 2] if split == "tuning" else order[len(target) // 2 :]
    rows = np.sort(half)
    return DesignTaskData(values_a[rows].copy(), values_b[rows].copy(), target[rows].copy(), split)


def baseline_selective_gains(values_a: Any, values_b: Any, target: Any) -> dict[str, float]:
    """Tie-fair selective gain (:func:`opcc_edu.metrics.selective_gain`) of EV, PCI and U-PCI.

    Returns:
        ``{"EV": ..., "PCI": ..., "U-PCI": ...}``: 0 is a confidence that knows nothing (ties
        earn nothing), 1 a perfect ordering of right before wrong answers.
    """
    gains = {}
    for name in ("ev", "pci", "upci"):
        prediction, confidence = CONFIDENCE_FUNCTIONS[name](values_a, values_b)
        gains[CONFIDENCE_NAMES[name]] = float(selective_gain(prediction, target, confidence))
    return gains
