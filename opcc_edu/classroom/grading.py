"""Grade a batch of submissions so that no student can fake a score or change another's.

Why not ``otter run``: Otter runs its tests inside the student's kernel, next to the student's
code, with the hidden tests in the working folder. A notebook can then replace the test runner,
redefine the reference functions the tests compare against, make ``np.isclose`` always true,
read the hidden tests, or leave a process or an IPython start-up file that changes the next
submission's grade. Grading here is split so that the student's code never shares a process
with a comparison or an expected value:

1. **Run the notebook** (:mod:`opcc_edu.classroom.runner`, mode ``notebook``) in a fresh
   sandbox (:mod:`opcc_edu.classroom.sandbox`: own HOME, IPYTHONDIR, TMPDIR, working folder and
   cache; resource limits; the whole process tree killed at the end or at the time limit) and
   receive the graded *values* (``rmse``, ``results``, ...) as plain data: numbers, strings,
   lists, arrays, DataFrames; never pickles, never code.
2. **Call the graded functions** in a second, fresh sandboxed process that executes only the
   notebook's top-level imports, literal constants and ``def`` statements, taken from its
   syntax tree (:func:`opcc_edu.classroom.review.extract_functions`): nothing the notebook
   patched while it ran exists there. Inputs go in and outputs come back as plain data.
3. **Compare** in this process (:mod:`opcc_edu.classroom.checks`) with expected values that
   trusted code computed when the autograder was built and stored in its zip
   (``opcc/expected.json``); they never enter a sandbox.

Isolation is chosen once per batch (:mod:`opcc_edu.classroom.isolation`): ``bwrap`` by default
(nothing of the grader's is mounted in the sandbox, which has its own PID and network
namespaces and a uid that is not the grader's), ``unsafe-local`` only when asked (every row's
review column says so), or containers (``--docker``, :mod:`opcc_edu.classroom.containers`).

Around it the batch guards its input and the sheet: each submission is read once, before
anything runs, without following a symbolic link (:mod:`opcc_edu.classroom.intake`); the same
bytes under two names are flagged; the autograder zip and the submissions are kept as private
copies whose SHA-256 is checked before every submission; a submission whose grading fails in
any way gets rows with the reason and the rest of the batch is graded; the CSV is written only
by this process and checked against its own record after the batch; each row records the
submission's SHA-256 and a ``review`` column of what its code touches (see
:func:`opcc_edu.classroom.review.review_flags`).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..io import FileLock, atomic_write_bytes, sha256_file
from ..utils import check_choice, check_positive_int
from . import runner
from .catalog import ASSIGNMENTS, DEFAULT_TIMEOUT
from .checks import CHECKS, GRADED, Context, StudentError
from .containers import DockerUnavailable, docker_command, grade_with_docker, require_docker
from .intake import MAX_SUBMISSION_BYTES, load_bundle, parse_notebook, read_submission, student_id
from .isolation import UNSAFE_NOTE, check_backend, refuse_exposed, require_backend
from .review import extract_functions, review_flags
from .sandbox import Limits, Sandbox, kill_escaped, reaping
from .sheet import QuestionGrade, grades_csv, write_grades

__all__ = [
    "DEFAULT_TIMEOUT",
    "KERNEL_START_ATTEMPTS",
    "MAX_SUBMISSION_BYTES",
    "DockerUnavailable",
    "docker_command",
    "grade_submission",
    "grade_submissions",
    "grade_with_docker",
    "load_bundle",
    "require_docker",
    "student_id",
]

#: How many times the notebook runner is started when it dies before running the first cell
#: (a loaded machine can lose a process at start-up: the student's code never ran).
KERNEL_START_ATTEMPTS = 3

#: The resource limits of a submission's processes unless told otherwise.
DEFAULT_LIMITS = Limits()


class _TimedOut(Exception):
    pass


def _ended(status: int | None) -> str:
    if status is None:
        return "killed by the grader"
    return f"killed by signal {-status}" if status < 0 else f"exit status {status}"


def _run_notebook(box: Sandbox, cells: list[str], names: Sequence[str]) -> tuple[dict[str, Any], str | None]:
    """Run the notebook's code cells; (values, why they are missing or None). Raises _TimedOut."""
    for attempt in range(1, KERNEL_START_ATTEMPTS + 1):
        child = box.start("notebook", {"cells": cells, "values": list(names)})
        started, cell, values, crashed = False, None, None, None
        while values is None:
            message = child.receive(box.deadline)
            if message == "timeout":
                box.stop(child)
                raise _TimedOut
            if isinstance(message, str):
                break
            started = started or bool(message.get("started"))
            cell = message.get("cell", cell)
            crashed = message.get("crashed", crashed)
            values = message.get("values")
        status = box.stop(child)
        if values is not None:
            return values, None
        if started:
            where = f"during code cell {cell + 1}" if cell is not None else "before its first cell"
            why = f": {crashed}" if crashed else f" ({_ended(status)})"
            return {}, f"the notebook's process ended {where}{why}; its values could not be graded"
        last = (child.stderr.strip().splitlines() or ["no output"])[-1][:200]
        failure = f"grader error: the notebook runner failed to start {attempt} times ({last})"
    return {}, failure


class _Functions:
    """The graded functions, called one at a time in a fresh sandboxed process."""

    def __init__(self, box: Sandbox, source: str, defined: dict[str, str], refused: list[str]):
        self.box, self.source, self.defined = box, source, defined
        self.refused = {r.split(":")[0]: r for r in refused}
        self.child = None
        self.starts = 0
        self.calls = 0

    def _start(self) -> None:
        if self.starts >= 10:
            raise StudentError("the functions' process ended too often")
        self.starts += 1
        self.child = self.box.start("functions", {"source": self.source})
        while True:
            message = self.child.receive(self.box.deadline)
            if message == "timeout":
                raise _TimedOut
            if isinstance(message, str) or message.get("crashed"):
                self._drop()
                raise StudentError("the notebook's functions could not be loaded")
            if message.get("ready"):
                return

    def _drop(self) -> None:
        if self.child is not None:
            self.box.stop(self.child)
            self.child = None

    def __call__(self, fn: str, *args: Any, raw_args: Sequence[int] = (), **kwargs: Any) -> Any:
        return self.timed(fn, *args, raw_args=raw_args, **kwargs)[0]

    def timed(self, fn: str, *args: Any, raw_args: Sequence[int] = (), **kwargs: Any) -> tuple[Any, float]:
        if fn not in self.defined:
            raise StudentError(self.refused.get(fn, f"{fn} is not defined (as a top-level def)"))
        if self.child is None:
            self._start()
        self.calls += 1
        encoded = [a if i in raw_args else runner.encode(a) for i, a in enumerate(args)]
        request = {
            "id": self.calls,
            "fn": fn,
            "args": encoded,
            "kwargs": {"__dict__": runner.encode(kwargs)["__dict__"]},
        }
        start = time.monotonic()
        self.child.send(request)
        message = self.child.receive(self.box.deadline)
        seconds = time.monotonic() - start
        if message == "timeout":
            raise _TimedOut
        if isinstance(message, str) or message.get("id") != self.calls:
            self._drop()
            raise StudentError(f"{fn}: its process ended or answered out of turn")
        if not message.get("ok"):
            raise StudentError(f"{fn} raised {message.get('error', 'an error')}")
        try:
            return runner.decode(message["result"]), seconds
        except (ValueError, TypeError, KeyError) as exc:
            raise StudentError(f"{fn} returned something that cannot be graded ({exc})") from exc


def _failure(exc: BaseException, question: str, index: int) -> str:
    if isinstance(exc, StudentError):
        return str(exc)[:300]
    text = str(exc).strip().splitlines()
    if isinstance(exc, AssertionError):
        return f"AssertionError: {text[0]}"[:300] if text else f"AssertionError: check {index + 1} of {question} failed"
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:300]


def _score(assignment: str, points: dict[str, float], ctx: Context) -> dict[str, tuple[float, str]]:
    scores = {}
    for question, available in points.items():
        checks = CHECKS[assignment].get(question, [])
        passed, reason = 0, ""
        for i, check in enumerate(checks):
            try:
                check(ctx)
                passed += 1
            except _TimedOut:
                raise
            except Exception as exc:  # noqa: BLE001 - any failure of a check loses its share
                reason = reason or _failure(exc, question, i)
        score = available * passed / len(checks) if checks else 0.0
        scores[question] = (round(score, 9), reason if passed < len(checks) else "")
    return scores


def grade_submission(
    submission: str | os.PathLike,
    assignment: str,
    autograder_zip: str | os.PathLike,
    timeout: float = DEFAULT_TIMEOUT,
    points: dict[str, float] | None = None,
    *,
    bundle: dict[str, Any] | None = None,
    content: bytes | None = None,
    limits: Limits = DEFAULT_LIMITS,
    extra_review: Sequence[str] = (),
    backend: str = "bwrap",
) -> list[QuestionGrade]:
    """Grade one submission (see the module docstring); never raises for a bad submission.

    Args:
        submission: the student's ``.ipynb`` (its name gives the student and the sheet's
            ``submission`` column); a symbolic link or a file that is not regular is refused.
        assignment: the assignment's name.
        autograder_zip: from :func:`opcc_edu.classroom.teaching.build_assignment` (read only
            when ``bundle`` is None).
        timeout: seconds the whole grading of this submission may take; past it every question
            scores 0 with the reason, and every process it started is killed.
        points: unused (the points come from the autograder); kept for callers.
        bundle: :func:`load_bundle` of the zip, when already read.
        content: the submission's bytes, when already read (then the file is not opened).
        limits: resource limits of its processes.
        extra_review: notes added to the review column.
        backend: ``"bwrap"`` (a sandbox, see :mod:`opcc_edu.classroom.isolation`) or
            ``"unsafe-local"`` (every row's review says so). :func:`grade_submissions` checks
            that the backend can run; here a sandbox that cannot start is a grader error.

    Returns:
        One :class:`QuestionGrade` per question of the autograder, in question order.
    """
    check_backend(backend)
    path = Path(submission)
    if bundle is None:
        bundle = load_bundle(Path(autograder_zip).read_bytes())
    points = bundle["points"]
    problem = None
    if content is None:
        content, problem = read_submission(path)
    digest = hashlib.sha256(content).hexdigest() if content is not None else ""
    cells: list[str] = []
    review = [UNSAFE_NOTE] if backend == "unsafe-local" else []
    if problem is None:
        _, cells, notes, problem = parse_notebook(content)
        review += notes
    if problem is None:
        review = review_flags(cells, bundle["given_cells"], assignment) + review
        source, defined, refused = extract_functions(cells)
        review += [f"refused {r}" for r in refused if r.split(":")[0] in GRADED[assignment]["functions"]]
    review += list(extra_review)

    def rows_of(scores: dict[str, tuple[float, str]]) -> list[QuestionGrade]:
        return [
            QuestionGrade(
                student_id(path, assignment),
                assignment,
                q,
                score,
                points[q],
                reason,
                "; ".join(review),
                digest,
                str(path),
            )
            for q, (score, reason) in scores.items()
        ]

    if problem is not None:
        return rows_of({q: (0.0, problem) for q in points})
    deadline = time.monotonic() + timeout
    env = {"OPCC_EDU_PROFILE": bundle["profile"]}
    try:
        with Sandbox(deadline, limits, env, backend=backend) as box:
            raw_values, missing = _run_notebook(box, cells, GRADED[assignment]["values"])
            if missing is not None and missing.startswith("grader error"):
                return rows_of({q: (0.0, missing) for q in points})
            values: dict[str, Any] = {}
            for name in GRADED[assignment]["values"]:
                raw = raw_values.get(name, {"__missing__": missing or f"{name} is not defined"})
                try:
                    missing_value = isinstance(raw, dict) and "__missing__" in raw
                    values[name] = StudentError(raw["__missing__"]) if missing_value else runner.decode(raw)
                except (ValueError, TypeError, KeyError, AttributeError) as exc:
                    values[name] = StudentError(f"{name} cannot be graded ({exc})")
            functions = _Functions(box, source, defined, refused)
            data = dict(bundle["expected"])
            ctx = Context(data=data, call=functions, timed_call=functions.timed, values=values, sources=defined)
            scores = _score(assignment, points, ctx)
    except _TimedOut:
        return rows_of({q: (0.0, f"timed out after {timeout:g} s") for q in points})
    except Exception as exc:  # noqa: BLE001 - whatever failed, this student gets rows that say so
        return rows_of({q: (0.0, f"grader error: {_failure(exc, q, 0)}") for q in points})
    return rows_of(scores)


def _preload() -> None:
    """Import what the checks use now, before any student's code runs (a module changed on disk
    later cannot change the grader)."""
    import nbformat  # noqa: F401
    import pandas  # noqa: F401

    from .. import metrics  # noqa: F401
    from ..confidence import compute_confidence  # noqa: F401
    from . import assignments  # noqa: F401


def grade_submissions(
    assignment: str,
    submissions: Sequence[str | os.PathLike],
    autograder_zip: str | os.PathLike,
    timeout: float = DEFAULT_TIMEOUT,
    out_csv: str | os.PathLike | None = None,
    on_graded: Callable[[list[QuestionGrade]], None] | None = None,
    jobs: int = 1,
    on_warning: Callable[[str], None] | None = None,
    limits: Limits = DEFAULT_LIMITS,
    backend: str = "bwrap",
) -> list[QuestionGrade]:
    """Grade every submission (see :func:`grade_submission`) and collect the rows.

    Args:
        assignment: one of the assignments.
        submissions: the students' notebooks.
        autograder_zip: from :func:`opcc_edu.classroom.teaching.build_assignment`.
        timeout: seconds per submission.
        out_csv: if given, the grade sheet is rewritten (atomically) after every submission, and
            checked after the batch against what this process wrote.
        on_graded: called with each submission's rows when it is graded.
        jobs: submissions graded at the same time (nothing writable is shared between them).
        on_warning: called with each warning (duplicate students or files, files changed during
            grading).
        limits: resource limits of each submission's processes.
        backend: ``"bwrap"`` (default) or ``"unsafe-local"``, see
            :mod:`opcc_edu.classroom.isolation`.

    Returns:
        The rows, submission by submission (in the order given), question by question; one
        submission's rows for every submission, whatever happened while it was graded.

    Raises:
        ValueError: a bad argument (named, with the valid choices).
        SandboxUnavailable: ``backend="bwrap"`` and no sandbox can start here, or a sandbox would
            see the autograder zip, a submission or the sheet.
    """
    from concurrent.futures import ThreadPoolExecutor, as_completed

    check_choice(assignment, ASSIGNMENTS, "assignment")
    check_backend(backend)
    if not submissions:
        raise ValueError("submissions is empty: give at least one notebook to grade")
    jobs = check_positive_int(jobs, "jobs")
    warn = on_warning or (lambda message: None)
    zip_bytes = Path(autograder_zip).read_bytes()
    try:
        bundle = load_bundle(zip_bytes)
    except ValueError as exc:
        raise ValueError(f"autograder_zip {str(autograder_zip)!r}: {exc}") from exc
    if bundle["assignment"] != assignment:
        raise ValueError(f"autograder_zip {str(autograder_zip)!r} is for {bundle['assignment']!r}, not {assignment!r}")
    require_backend(backend)
    refuse_exposed([autograder_zip, *submissions, *([out_csv] if out_csv is not None else [])], backend)
    _preload()
    zip_digest = hashlib.sha256(zip_bytes).hexdigest()
    paths = [Path(s) for s in submissions]
    read = [read_submission(p) for p in paths]
    digests = [hashlib.sha256(c).hexdigest() if c is not None else None for c, _ in read]
    students = Counter(student_id(p, assignment) for p in paths)
    for student, count in sorted(students.items()):
        if count > 1:
            warn(f"{count} submissions for student {student!r}: each is graded and flagged for review")
    same: dict[str, list[str]] = defaultdict(list)
    for path, digest in zip(paths, digests, strict=True):
        if digest is not None and student_id(path, assignment) not in same[digest]:
            same[digest].append(student_id(path, assignment))
    for digest, names in same.items():
        if len(names) > 1:
            warn(f"the same file (sha256 {digest[:12]}...) was submitted by {', '.join(map(repr, names))}")
    private = Path(tempfile.mkdtemp(prefix="opcc-batch-"))
    zip_copy = atomic_write_bytes(private / "autograder.zip", zip_bytes)
    copies = [atomic_write_bytes(private / f"{i}.ipynb", c) if c is not None else None for i, (c, _) in enumerate(read)]
    done: dict[int, list[QuestionGrade]] = {}
    written: list[str] = []
    sheet_lock = threading.Lock()

    def notes_of(i: int) -> list[str]:
        notes = []
        student = student_id(paths[i], assignment)
        if students[student] > 1:
            notes.append(f"{students[student]} submissions for this student")
        others = [name for name in same.get(digests[i] or "", []) if name != student]
        if others:
            notes.append(f"the same file as {', '.join(others)} (sha256 {str(digests[i])[:12]}...)")
        with sheet_lock:
            if sha256_file(zip_copy) != zip_digest:
                atomic_write_bytes(zip_copy, zip_bytes)
                notes.append("the autograder copy was changed during the batch (restored)")
        if copies[i] is not None and sha256_file(copies[i]) != digests[i]:
            notes.append("the private copy of this submission was changed during the batch (graded as first read)")
        return notes

    def grade_one(i: int) -> list[QuestionGrade]:
        content, problem = read[i]
        try:
            notes = notes_of(i)
            if problem is not None:
                return grade_submission(
                    paths[i], assignment, autograder_zip, bundle=bundle, extra_review=notes, backend=backend
                )
            return grade_submission(
                paths[i], assignment, autograder_zip, timeout, bundle=bundle, content=content,
                limits=limits, extra_review=notes, backend=backend,
            )  # fmt: skip
        except Exception as exc:  # noqa: BLE001 - the batch goes on; this student's rows say why
            why = f"grader error: {type(exc).__name__}: {str(exc)[:200]}"
            review = "; ".join([UNSAFE_NOTE] if backend == "unsafe-local" else [])
            return [
                QuestionGrade(
                    student_id(paths[i], assignment), assignment, q, 0.0, available, why, review,
                    digests[i] or "", str(paths[i]),
                )
                for q, available in bundle["points"].items()
            ]  # fmt: skip

    def collected() -> list[QuestionGrade]:
        return [row for i in sorted(done) for row in done[i]]

    lock_folder = Path(out_csv).parent if out_csv is not None else private
    try:
        with (
            FileLock(lock_folder if str(lock_folder) else "."),
            reaping(),
            ThreadPoolExecutor(max_workers=jobs) as pool,
        ):
            futures = {pool.submit(grade_one, i): i for i in range(len(paths))}
            for future in as_completed(futures):
                rows = future.result()
                with sheet_lock:
                    done[futures[future]] = rows
                    if out_csv is not None:
                        written[:] = [grades_csv(collected())]
                        write_grades(collected(), out_csv)
                if on_graded is not None:
                    on_graded(rows)
        kill_escaped()
    finally:
        shutil.rmtree(private, ignore_errors=True)
    sheet = Path(out_csv) if out_csv is not None else None
    if sheet is not None and (not sheet.is_file() or sheet.read_text(encoding="utf-8") != written[0]):
        write_grades(collected(), out_csv)
        warn(f"{out_csv} was changed during grading by something other than the grader: rewritten from its own record")
    for path, digest in zip(paths, digests, strict=True):
        now, _ = read_submission(path) if digest is not None else (None, None)
        if digest is not None and (now is None or hashlib.sha256(now).hexdigest() != digest):
            warn(f"{path} changed during grading: the sheet grades the file as first read (sha256 {digest[:12]}...)")
    if hashlib.sha256(Path(autograder_zip).read_bytes()).hexdigest() != zip_digest:
        warn(f"{autograder_zip} changed during grading: the sheet used the zip as it was first read")
    return collected()
