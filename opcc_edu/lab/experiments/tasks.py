"""The work of one ablation run, apart from where it runs: the task, its outcome, its failures.

:func:`compute_run` answers and scores one run (:func:`~opcc_edu.lab.experiments.answers.score_run`,
once) and writes nothing; an executor (:mod:`opcc_edu.lab.experiments.executors`) decides in which
process it runs, and the driver alone writes the results. :func:`pack_task` and
:func:`compute_payload` carry a task to another process and its outcome back (cloudpickle).
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as _dt
import os
import time
import traceback
from collections.abc import Mapping
from typing import Any

import numpy as np

from ...config import PROFILES, Profile, use_profile
from ...scoring import MemberValues, Scores
from .answers import AnswerFunction, score_run
from .grid import RunSpec
from .registry import format_value

__all__ = [
    "RunTask",
    "RunOutcome",
    "RunFailure",
    "Finished",
    "RunFailureWarning",
    "RunsFailedError",
    "compute_run",
    "run_arrays",
    "describe_error",
    "compute_payload",
    "pack_task",
]


# --------------------------------------------------------------------------------------------
# The work of one run
# --------------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class RunTask:
    """Everything a worker needs to compute one run."""

    run: RunSpec
    """The run (its seed is the run's own)."""
    answer_fn: AnswerFunction
    """The :data:`~opcc_edu.lab.experiments.answers.AnswerFunction`."""
    profile: Profile
    """The profile, made active in the worker while the run computes."""
    progress: bool = False
    """Show the answer function's own progress bars (in-process runs only)."""
    save_values: bool = True
    """Return the (N, M) member values, for ``values/<run>.npz``."""
    threads: int | None = None
    """torch threads of the worker process (``None``: leave as they are)."""
    in_worker: bool = False
    """Computed in a worker process: make ``profile`` the active profile there (a worker may
    have been started with other settings); in the driver's own process nothing changes."""


@dataclasses.dataclass
class RunOutcome:
    """What a worker returns: the run's scored rows, its runs.csv row and its member values."""

    rows: list[dict[str, Any]]
    """Rows of ``results.csv`` (keys of :data:`~opcc_edu.lab.experiments.answers.SCORE_KEYS`
    and the run's keys)."""
    summary: dict[str, Any]
    """The run's row of ``runs.csv``."""
    arrays: dict[str, np.ndarray] | None
    """What ``values/<run>.npz`` keeps (:func:`run_arrays`); None without save_values."""
    metadata: dict[str, Any]
    """Metadata of ``values/<run>.npz``."""


@dataclasses.dataclass(frozen=True)
class RunFailure:
    """One failed attempt of a run."""

    run_id: str
    attempt: int
    """1 for the first attempt."""
    error: str
    """``"ExceptionType: message"``, or what happened to the worker."""
    details: str = ""
    """The worker's traceback, when there is one."""
    exception: BaseException | None = dataclasses.field(default=None, compare=False, repr=False)
    """The exception itself (in-process runs only)."""


@dataclasses.dataclass(frozen=True)
class Finished:
    """A submitted run that came back from an executor, computed or failed."""

    key: str
    """The key it was submitted under."""
    outcome: RunOutcome | None = None
    """The computed run; None when it failed."""
    error: str = ""
    """Why it failed: ``"ExceptionType: message"``, or what happened to the worker."""
    details: str = ""
    """The worker's traceback, when there is one."""
    exception: BaseException | None = None
    """The exception itself (in-process runs only)."""


class RunFailureWarning(UserWarning):
    """A run failed; the message names it, the attempt and the error (it is retried or given up)."""


class RunsFailedError(RuntimeError):
    """Some runs failed on every attempt; every other run of the grid was computed and saved."""

    def __init__(self, failures: list[RunFailure], attempts: int, details: os.PathLike | str | None = None) -> None:
        self.failures = failures
        listed = "; ".join(f"{f.run_id}: {f.error}" for f in failures)
        where = f"; their tracebacks are in {details}" if details is not None else ""
        super().__init__(
            f"{len(failures)} run(s) failed on all {attempts} attempt(s) (the finished runs are saved; "
            f"run the same command again to retry them{where}): {listed}"
        )


def _jsonable(info: Mapping[str, Any]) -> dict[str, Any]:
    out = {}
    for key, value in info.items():
        if isinstance(value, np.generic):
            value = value.item()
        if isinstance(value, (str, int, float, bool)) or value is None:
            out[str(key)] = value
    return out


def compute_run(task: RunTask) -> RunOutcome:
    """Answer and score one run; writes nothing in the results directory (the worker's job).

    In a worker process the answer function sees ``task.profile`` as the active profile, as
    it would in the driver, so a worker started with other settings computes the same run.
    """
    if task.threads is not None:
        import torch

        torch.set_num_threads(int(task.threads))

    start = time.perf_counter()
    run = task.run
    registered = task.in_worker and PROFILES.get(task.profile.name) == task.profile
    with use_profile(task.profile.name) if registered else contextlib.nullcontext():
        values = task.answer_fn(run, task.progress)
    base = {
        "environment": run.environment,
        "dataset": run.dataset,
        "seed": run.seed,
        "configuration": run.configuration,
        "profile": task.profile.name,
        "run_id": run.run_id,
    }
    rows = [{**base, **row} for row in score_run(values)]
    arrays = None
    if task.save_values:
        arrays = run_arrays(values)
    metadata = {
        **base,
        "overrides": {k: format_value(v) for k, v in run.overrides.items()},
        "info": _jsonable(values.info),
    }
    summary = {
        **base,
        "n_queries": len(values),
        "ensemble_size": values.ensemble_size,
        "seconds": round(time.perf_counter() - start, 2),
        "finished": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    }
    return RunOutcome(rows, summary, arrays, metadata)


def run_arrays(values: MemberValues | Scores) -> dict[str, np.ndarray]:
    """What a run keeps in ``values/<run>.npz``: its member values (float32) or, for a baseline
    without members, its answers (``prediction_<name>``, ``confidence_<name>``); then ``target``
    and ``horizon``. :func:`~opcc_edu.lab.experiments.reading.load_run_values` reads the
    member values back."""
    if isinstance(values, Scores):
        arrays = {}
        for name in values.predictions:
            arrays[f"prediction_{name}"] = np.asarray(values.predictions[name])
            arrays[f"confidence_{name}"] = np.asarray(values.confidences[name], dtype=np.float64)
    else:
        arrays = {"values_a": values.values_a.astype(np.float32), "values_b": values.values_b.astype(np.float32)}
    return {**arrays, "target": values.target, "horizon": values.horizon}


def describe_error(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def compute_payload(payload: bytes) -> tuple[str, Any, str]:
    """A worker's entry point: ``("ok", outcome, "")`` or ``("error", description, traceback)``."""
    import cloudpickle

    try:
        task = cloudpickle.loads(payload)
        return "ok", compute_run(task), ""
    except Exception as exc:  # noqa: BLE001 - every failure of a run goes back to the driver
        return "error", describe_error(exc), traceback.format_exc()


def pack_task(task: RunTask) -> bytes:
    """The task as bytes for another process (the answer function may be a closure)."""
    import cloudpickle

    try:
        return cloudpickle.dumps(task)
    except Exception as exc:  # noqa: BLE001 - anything that cannot be pickled
        raise ValueError(
            f"answer_fn cannot be sent to worker processes ({describe_error(exc)}); run it with the serial "
            "local executor (jobs=1) instead"
        ) from exc
