"""Input checks shared by the metrics: 0/1 answers, finite confidences, equal lengths, CR_K bins."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..utils import check_finite, check_positive_int


def _as_binary(values: Any, argument: str) -> np.ndarray:
    """Return ``values`` as a 1-D int8 array of 0/1 or raise ValueError naming ``argument``."""
    array = np.asarray(values)
    if array.ndim != 1:
        raise ValueError(f"{argument} must be a 1-D array of shape (N,), got shape {array.shape}")
    if array.size == 0:
        raise ValueError(f"{argument} is empty; at least one query is needed")
    if array.dtype == bool:
        return array.astype(np.int8)
    if not (np.issubdtype(array.dtype, np.integer) or np.issubdtype(array.dtype, np.floating)):
        raise ValueError(f"{argument} must hold 0/1 values, got dtype {array.dtype}")
    bad = (array != 0) & (array != 1)
    if np.any(bad):
        raise ValueError(
            f"{argument} must hold only 0/1 values (1 means value_a < value_b); "
            f"found {array[bad][0]!r} at index {int(np.flatnonzero(bad)[0])}"
        )
    return array.astype(np.int8)


def _as_confidence(values: Any, argument: str = "confidence") -> np.ndarray:
    """Return ``values`` as a 1-D finite float64 array or raise ValueError naming ``argument``."""
    array = np.asarray(values)
    if array.ndim != 1:
        raise ValueError(f"{argument} must be a 1-D array of shape (N,), got shape {array.shape}")
    if array.size == 0:
        raise ValueError(f"{argument} is empty; at least one query is needed")
    if not (np.issubdtype(array.dtype, np.number) or array.dtype == bool):
        raise ValueError(f"{argument} must be numeric, got dtype {array.dtype}")
    return check_finite(array.astype(np.float64), argument)


def _check_lengths(**arrays: np.ndarray) -> int:
    lengths = {name: len(array) for name, array in arrays.items()}
    if len(set(lengths.values())) != 1:
        described = ", ".join(f"{name} has {length}" for name, length in lengths.items())
        raise ValueError(f"inputs must have the same number of queries N: {described}")
    return next(iter(lengths.values()))


def query_losses(prediction: Any, target: Any) -> np.ndarray:
    """The 0/1 loss of every answer: (N,) int64, 1 where ``prediction`` differs from ``target``.

    Args:
        prediction: (N,) 0/1 predictions.
        target: (N,) 0/1 true answers.

    Raises:
        ValueError: an input is not 1-D binary, or the lengths differ.
    """
    pred = _as_binary(prediction, "prediction")
    targ = _as_binary(target, "target")
    _check_lengths(prediction=pred, target=targ)
    return (pred != targ).astype(np.int64)


def loss_and_confidence(prediction: Any, target: Any, confidence: Any) -> tuple[np.ndarray, np.ndarray]:
    loss = query_losses(prediction, target)
    conf = _as_confidence(confidence)
    _check_lengths(prediction=loss, confidence=conf)
    return loss, conf


def check_k(k: Any) -> int:
    return check_positive_int(k, "k (the number of coverage bins)")
