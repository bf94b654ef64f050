"""Executors: where the runs of a grid are computed.

:func:`~opcc_edu.lab.experiments.runner.run_grid` is the driver: it plans the grid, claims each
run in the results store, hands the run to an executor, and -- alone -- writes the run's
member values and its record when the run comes back. An executor only computes: a worker
calls :func:`compute_run` (answer the run's queries, score them) and returns a
:class:`RunOutcome`; it never writes the results directory, so a worker lost mid-run leaves
nothing behind, and the table can never hold a partial or duplicated run. Workers may fill the
ensemble cache, which is written atomically.

Three executors share one interface (:class:`Executor`):

* :class:`SerialExecutor` (``"local"``, the default) -- one run after another in this process.
* :class:`ProcessExecutor` (``"local"`` with ``jobs > 1``) -- N worker processes on this machine.
* :class:`RayExecutor` (``"ray"``) -- one Ray task per run, with the CPUs and GPUs it asks for,
  on a local Ray cluster or on one started with Ray's own CLI (``address``). Ray is the
  optional extra ``opcc_edu[cluster]``.

A run's result depends on the run alone: its seed is the run's seed, never the order in which
runs finish, so every executor and every number of workers gives the same rows. A run whose
worker raises, or whose worker process dies, comes back as a :class:`RunFailure`; the driver
reports it and submits it again, up to its ``retries``, while the other runs go on.
"""

from __future__ import annotations

import abc
import collections
import contextlib
import dataclasses
import os
import signal
import time
import traceback
from typing import Any

import numpy as np

from ...utils import check_choice
from .tasks import (
    Finished,
    RunFailure,
    RunFailureWarning,
    RunOutcome,
    RunsFailedError,
    RunTask,
    compute_payload,
    compute_run,
    describe_error,
    pack_task,
)

__all__ = [
    "EXECUTORS",
    "CLUSTER_EXTRA_MESSAGE",
    "RunTask",
    "RunOutcome",
    "Finished",
    "RunFailure",
    "RunFailureWarning",
    "RunsFailedError",
    "compute_run",
    "Executor",
    "SerialExecutor",
    "ProcessExecutor",
    "RayExecutor",
    "make_executor",
]

#: Names of the executors (``opcc-edu ablation --executor``).
EXECUTORS: tuple[str, ...] = ("local", "ray")

#: The one-line error of the Ray executor when Ray is not installed.
CLUSTER_EXTRA_MESSAGE = "the ray executor needs the 'cluster' extra: pip install \"opcc_edu[cluster]\""


# --------------------------------------------------------------------------------------------
# The interface
# --------------------------------------------------------------------------------------------
class Executor(abc.ABC):
    """Computes submitted runs and hands them back as they finish.

    The driver calls :meth:`submit` while :meth:`capacity` allows, then :meth:`wait` for the
    next finished run, and :meth:`close` at the end (also on an interrupt: unfinished work is
    dropped, never saved). Nothing is started before the first :meth:`submit`, so a grid with
    nothing left to run starts no worker and no cluster.
    """

    name: str = ""
    in_process: bool = False
    """Whether runs compute in the driver's process (and may show their own progress bars)."""

    def __init__(self) -> None:
        self.submitted: list[str] = []
        """Keys of every submission, retries included, in order."""

    @abc.abstractmethod
    def capacity(self) -> int:
        """How many runs may be in flight at once (at least 1)."""

    @abc.abstractmethod
    def _submit(self, key: str, task: RunTask) -> None: ...

    def submit(self, key: str, task: RunTask) -> None:
        """Start computing ``task``; :meth:`wait` returns it under ``key``."""
        self.submitted.append(key)
        self._submit(key, task)

    @abc.abstractmethod
    def wait(self) -> Finished:
        """Block until a submitted run finishes, and return it."""

    def close(self) -> None:  # noqa: B027 - most executors hold nothing
        """Stop every worker; runs still in flight are dropped."""

    def description(self) -> str:
        """One line for ``meta.json``."""
        return self.name

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class SerialExecutor(Executor):
    """One run after another in this process (today's runner); exceptions come back as failures."""

    name = "local"
    in_process = True

    def __init__(self) -> None:
        super().__init__()
        self._queue: collections.deque[tuple[str, RunTask]] = collections.deque()

    def capacity(self) -> int:
        return 1

    def _submit(self, key: str, task: RunTask) -> None:
        self._queue.append((key, task))

    def wait(self) -> Finished:
        key, task = self._queue.popleft()
        try:
            return Finished(key, compute_run(task))
        except Exception as exc:  # noqa: BLE001 - reported by the driver, which goes on
            return Finished(key, None, describe_error(exc), traceback.format_exc(), exc)


# --------------------------------------------------------------------------------------------
# Local worker processes
# --------------------------------------------------------------------------------------------
def _exit_on_term(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)


def _worker_main(connection: Any, threads: int | None) -> None:
    """Loop of a worker process: receive a packed task, send back its result; None stops.

    Ctrl-C is the driver's to handle (it stops the workers); a worker ignores it. When the driver
    stops a busy worker (SIGTERM), the worker exits through Python, releasing what it holds.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _exit_on_term)
    if threads is not None:
        import torch

        torch.set_num_threads(int(threads))
    while True:
        try:
            payload = connection.recv()
        except (EOFError, KeyboardInterrupt):
            return
        if payload is None:
            return
        connection.send(compute_payload(payload))


@dataclasses.dataclass
class _Worker:
    process: Any
    connection: Any
    key: str | None = None


def _exit_description(code: int | None) -> str:
    if code is not None and code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"the worker process was killed ({name})"
    return f"the worker process exited with status {code}"


@contextlib.contextmanager
def _main_path_hidden_if_missing():
    """Hide ``__main__.__file__`` while a worker starts when it names no file.

    A ``spawn`` worker re-runs the parent's main script from ``__main__.__file__``; a driver
    read from standard input (``python - <<EOF``, as ``results/ablations/run_committed.sh`` runs
    it) has ``<stdin>`` there, and every worker would die on the missing file. The workers need
    nothing from such a script: they import the package and receive their runs by pipe.
    """
    import sys

    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    if main is None or path is None or os.path.exists(path) or getattr(main, "__spec__", None) is not None:
        yield
        return
    del main.__file__
    try:
        yield
    finally:
        main.__file__ = path


class ProcessExecutor(Executor):
    """``jobs`` worker processes on this machine (started with ``spawn``, reused across runs).

    A worker that dies mid-run (killed, out of memory) fails only its own run; a new worker
    takes its place for the next submission.
    """

    name = "local"

    def __init__(self, jobs: int, threads: int | None = None) -> None:
        super().__init__()
        if isinstance(jobs, bool) or not isinstance(jobs, (int, np.integer)) or jobs < 1:
            raise ValueError(f"jobs must be an integer >= 1, got {jobs!r}")
        self.jobs = int(jobs)
        self.threads = max(1, (os.cpu_count() or 1) // self.jobs) if threads is None else int(threads)
        self._workers: list[_Worker] = []
        self._done: collections.deque[Finished] = collections.deque()

    def capacity(self) -> int:
        return self.jobs

    def description(self) -> str:
        return f"local, {self.jobs} processes of {self.threads} thread(s)"

    def _start_worker(self) -> _Worker:
        import multiprocessing

        context = multiprocessing.get_context("spawn")
        parent, child = context.Pipe()
        # not a daemon: an answer function may start processes of its own; close() stops it
        process = context.Process(target=_worker_main, args=(child, self.threads), daemon=False)
        with _main_path_hidden_if_missing():
            process.start()
        child.close()
        worker = _Worker(process, parent)
        self._workers.append(worker)
        return worker

    def _submit(self, key: str, task: RunTask) -> None:
        payload = pack_task(dataclasses.replace(task, progress=False, threads=None, in_worker=True))
        idle = [w for w in self._workers if w.key is None]
        worker = idle[0] if idle else self._start_worker()
        worker.key = key
        worker.connection.send(payload)

    def wait(self) -> Finished:
        from multiprocessing.connection import wait

        while not self._done:
            busy = {w.connection: w for w in self._workers if w.key is not None}
            if not busy:
                raise RuntimeError("wait() called with no run in flight")
            sentinels = {w.process.sentinel: w for w in busy.values()}
            for ready in wait([*busy, *sentinels]):
                worker = busy.get(ready) or sentinels[ready]
                if worker.key is None:
                    continue
                key, worker.key = worker.key, None
                try:
                    status, result, details = worker.connection.recv()
                except (EOFError, OSError):  # died before answering
                    worker.process.join(timeout=5)
                    self._retire(worker)
                    self._done.append(Finished(key, None, _exit_description(worker.process.exitcode)))
                    continue
                if status == "ok":
                    self._done.append(Finished(key, result))
                else:
                    self._done.append(Finished(key, None, result, details))
        return self._done.popleft()

    def _retire(self, worker: _Worker) -> None:
        self._workers.remove(worker)
        worker.connection.close()

    def close(self) -> None:
        for worker in list(self._workers):
            try:
                if worker.key is None:
                    worker.connection.send(None)
            except OSError:
                pass
        deadline = time.monotonic() + 5
        for worker in list(self._workers):
            if worker.key is not None:  # in flight: its result is not wanted any more
                worker.process.terminate()
            worker.process.join(timeout=max(0.0, deadline - time.monotonic()))
            if worker.process.is_alive():
                worker.process.kill()
                worker.process.join()
            self._retire(worker)


# --------------------------------------------------------------------------------------------
# Ray
# --------------------------------------------------------------------------------------------
def _import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise ImportError(CLUSTER_EXTRA_MESSAGE, name="ray") from None
    return ray


class RayExecutor(Executor):
    """One Ray task per run, each with ``cpus_per_run`` CPUs and ``gpus_per_run`` GPUs.

    With ``address=None`` (and Ray not yet initialised in this process) Ray starts a local
    cluster on this machine, of ``num_cpus`` CPUs (default: all), and shuts it down at
    :meth:`close`; ``address="auto"`` or ``"HOST:PORT"`` joins a cluster started with
    ``ray start``. A Ray session already open in this process is used as it is, and left open.
    Ray's own retries are off: a task that raises or whose worker dies comes back as a failure,
    which the driver retries.
    """

    name = "ray"

    def __init__(
        self,
        address: str | None = None,
        cpus_per_run: float = 1.0,
        gpus_per_run: float = 0.0,
        num_cpus: int | None = None,
    ) -> None:
        super().__init__()
        self.cpus_per_run = _check_resource(cpus_per_run, "cpus_per_run", positive=True)
        self.gpus_per_run = _check_resource(gpus_per_run, "gpus_per_run", positive=False)
        if num_cpus is not None and (isinstance(num_cpus, bool) or not isinstance(num_cpus, int) or num_cpus < 1):
            raise ValueError(f"num_cpus must be None or an integer >= 1, got {num_cpus!r}")
        if address is not None and num_cpus is not None:
            raise ValueError("num_cpus sizes a local cluster; a cluster at an address has its own (pass one, not both)")
        self.address = address
        self.num_cpus = num_cpus
        self._ray: Any = None
        self._remote: Any = None
        self._owns = False
        self._refs: dict[Any, str] = {}

    def description(self) -> str:
        where = self.address or "local cluster"
        return f"ray ({where}; {self.cpus_per_run:g} CPU and {self.gpus_per_run:g} GPU per run)"

    def start(self) -> None:
        """Connect to (or start) the cluster; called by the first :meth:`submit`."""
        if self._ray is not None:
            return
        ray = _import_ray()
        if ray.is_initialized():
            self._owns = False
        else:
            kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False}
            if self.address is None and self.num_cpus is not None:
                kwargs["num_cpus"] = self.num_cpus
            ray.init(address=self.address, **kwargs)
            self._owns = True
        self._ray = ray
        self._remote = ray.remote(compute_payload).options(
            num_cpus=self.cpus_per_run, num_gpus=self.gpus_per_run, max_retries=0
        )
        resources = ray.cluster_resources()
        cpus, gpus = resources.get("CPU", 0.0), resources.get("GPU", 0.0)
        if cpus < self.cpus_per_run or gpus < self.gpus_per_run:
            self.close()
            raise ValueError(
                f"a run asks for {self.cpus_per_run:g} CPU and {self.gpus_per_run:g} GPU (--cpus-per-run, "
                f"--gpus-per-run) but the Ray cluster has {cpus:g} CPU and {gpus:g} GPU in all"
            )

    def capacity(self) -> int:
        if self._ray is None:
            return 1  # the first submission starts the cluster
        resources = self._ray.cluster_resources()  # re-read: nodes may join or leave
        slots = resources.get("CPU", 0.0) // self.cpus_per_run
        if self.gpus_per_run > 0:
            slots = min(slots, resources.get("GPU", 0.0) // self.gpus_per_run)
        return max(1, int(slots))

    def _submit(self, key: str, task: RunTask) -> None:
        self.start()
        threads = max(1, int(self.cpus_per_run))
        payload = pack_task(dataclasses.replace(task, progress=False, threads=threads, in_worker=True))
        self._refs[self._remote.remote(payload)] = key

    def wait(self) -> Finished:
        ray = self._ray
        if not self._refs:
            raise RuntimeError("wait() called with no run in flight")
        ready, _ = ray.wait(list(self._refs), num_returns=1)
        key = self._refs.pop(ready[0])
        try:
            status, result, details = ray.get(ready[0])
        except ray.exceptions.RayError as exc:  # the worker or its node was lost
            return Finished(key, None, f"the Ray worker was lost ({describe_error(exc)})")
        if status == "ok":
            return Finished(key, result)
        return Finished(key, None, result, details)

    def close(self) -> None:
        if self._ray is None:
            return
        for ref in list(self._refs):
            try:
                self._ray.cancel(ref, force=True)
            except Exception:  # noqa: BLE001 - finished or lost meanwhile
                pass
        self._refs.clear()
        if self._owns:
            self._ray.shutdown()
        self._ray = None


def _check_resource(value: Any, argument: str, positive: bool) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = float("nan")
    if isinstance(value, bool) or not np.isfinite(number) or number < 0 or (positive and number == 0):
        bound = "> 0" if positive else ">= 0"
        raise ValueError(f"{argument} must be a number {bound}, got {value!r}")
    return number


def make_executor(
    executor: str = "local",
    jobs: int = 1,
    address: str | None = None,
    cpus_per_run: float | None = None,
    gpus_per_run: float = 0.0,
) -> Executor:
    """The executor named ``executor`` (:data:`EXECUTORS`).

    Args:
        executor: ``"local"`` (this machine) or ``"ray"`` (a Ray cluster).
        jobs: local only: runs at once, each in its own worker process (1: in this process).
        address: Ray only: the cluster to join (``"auto"``, ``"HOST:PORT"``); None starts a local
            cluster on this machine.
        cpus_per_run: CPUs (torch threads) of one run; default: Ray 1, local jobs an equal share of
            this machine's cores.
        gpus_per_run: Ray only: GPUs of one run (fractions share a GPU).

    Raises:
        ValueError: an unknown executor (naming the valid ones), an option of the other executor,
            or a count out of range.
        ImportError: ``"ray"`` without the ``cluster`` extra (one line naming it).
    """
    check_choice(executor, EXECUTORS, "executor")
    if executor == "local":
        if address is not None:
            raise ValueError("address is an option of the ray executor (executor='ray'), not of 'local'")
        if gpus_per_run:
            raise ValueError("gpus_per_run is an option of the ray executor (executor='ray'), not of 'local'")
        if isinstance(jobs, bool) or not isinstance(jobs, (int, np.integer)) or jobs < 1:
            raise ValueError(f"jobs must be an integer >= 1, got {jobs!r}")
        if jobs == 1:
            if cpus_per_run is not None:
                raise ValueError("cpus_per_run sets the threads of worker processes: pass jobs > 1 (or executor='ray')")
            return SerialExecutor()
        threads = None if cpus_per_run is None else max(1, int(_check_resource(cpus_per_run, "cpus_per_run", True)))
        return ProcessExecutor(int(jobs), threads)
    if jobs != 1:
        raise ValueError(
            f"jobs is an option of the local executor; the ray executor runs as many runs at once as the "
            f"cluster's CPUs and GPUs allow (got jobs={jobs!r})"
        )
    _import_ray()
    return RayExecutor(address, 1.0 if cpus_per_run is None else cpus_per_run, gpus_per_run)
