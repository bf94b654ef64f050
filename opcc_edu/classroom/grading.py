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

Around it the batch guards the sheet: the autograder zip and the submissions are read once
into private copies whose SHA-256 is checked before every submission; the CSV is written only by
this process and checked against its own record after the batch; each row records the
submission's SHA-256 and a ``review`` column of what its code touches (see
:func:`opcc_edu.classroom.review.review_flags`). Limits: local grading runs as your user, so a
student's code can still read your files while it runs (the expected values in the autograder
zip included) or kill the grader; the review column flags the code that would, and
``--docker`` (:func:`grade_with_docker`) or Gradescope isolate each submission in a container.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import shutil
import subprocess
import tempfile
import threading
import time
import zipfile
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..io import FileLock, atomic_write_bytes, sha256_file
from ..utils import check_choice, check_positive_int
from . import runner
from .catalog import ASSIGNMENTS, EXPECTED_MEMBER, declared_constants, question_order
from .checks import CHECKS, GRADED, Context, StudentError
from .review import extract_functions, review_flags
from .sandbox import Limits, Sandbox, kill_escaped, reaping
from .sheet import QuestionGrade, grades_csv, write_grades

#: Seconds one submission may take to be graded (each assignment runs in well under 5 minutes).
DEFAULT_TIMEOUT = 600.0

#: How many times the notebook runner is started when it dies before running the first cell
#: (a loaded machine can lose a process at start-up: the student's code never ran).
KERNEL_START_ATTEMPTS = 3

#: The largest submission read (bytes).
MAX_SUBMISSION_BYTES = 64 * 2**20


#: The resource limits of a submission's processes unless told otherwise.
DEFAULT_LIMITS = Limits()


class _TimedOut(Exception):
    pass


def load_bundle(data: bytes) -> dict[str, Any]:
    """Points per question, expected values and the handed-out cells, from autograder zip bytes.

    Raises:
        ValueError: not an autograder zip built by ``opcc-edu assignments build``.
    """
    import io

    points: dict[str, float] = {}
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            for member in sorted(archive.namelist()):
                if member.startswith("tests/") and member.endswith(".py"):
                    declared = declared_constants(archive.read(member).decode("utf-8"))
                    points[str(declared["name"])] = float(declared["points"])
            stored = json.loads(archive.read(EXPECTED_MEMBER)) if EXPECTED_MEMBER in archive.namelist() else None
    except (zipfile.BadZipFile, KeyError, SyntaxError, ValueError) as exc:
        raise ValueError(f"not an Otter autograder zip: {exc}") from exc
    if not points:
        raise ValueError("the zip holds no test files (tests/*.py)")
    if stored is None:
        raise ValueError(f"the zip has no {EXPECTED_MEMBER}: rebuild it with 'opcc-edu assignments build'")
    return {
        "points": dict(sorted(points.items(), key=lambda item: question_order(item[0]))),
        "assignment": stored["assignment"],
        "profile": stored["profile"],
        "expected": runner.decode(stored["expected"]),
        "given_cells": stored["given_cells"],
    }


def student_id(submission: str | os.PathLike, assignment: str) -> str:
    """Who submitted: the file's stem, or its folder's name when the stem is just the assignment
    name (as in ``alice/design_confidence.ipynb`` downloaded from a learning platform)."""
    path = Path(submission)
    if path.stem == assignment and path.parent.name:
        return path.parent.name
    return path.stem


def _read_submission(path: Path) -> tuple[bytes | None, str | None]:
    if not path.exists():
        return None, "file not found"
    if not path.is_file():
        return None, "not a file"
    if path.stat().st_size > MAX_SUBMISSION_BYTES:
        return None, f"file larger than {MAX_SUBMISSION_BYTES // 2**20} MB"
    return path.read_bytes(), None


def _parse_notebook(content: bytes) -> tuple[dict | None, str | None]:
    import nbformat

    try:
        notebook = nbformat.reads(content.decode("utf-8"), as_version=4)
        nbformat.validate(notebook)
    except Exception as exc:  # noqa: BLE001 - any parse failure means "not a notebook"
        lines = [line for line in str(exc).strip().splitlines() if line.strip()]
        return None, f"not a notebook ({type(exc).__name__}: {(lines[-1] if lines else '')[:120]})"
    return json.loads(nbformat.writes(notebook)), None


def _ended(status: int | None) -> str:
    if status is None:
        return "killed by the grader"
    return f"killed by signal {-status}" if status < 0 else f"exit status {status}"


def _run_notebook(box: Sandbox, notebook_path: Path, names: Sequence[str]) -> tuple[dict[str, Any], str | None]:
    """Run the notebook; (values, why they are missing or None). Raises _TimedOut."""
    for attempt in range(1, KERNEL_START_ATTEMPTS + 1):
        child = box.start("notebook", {"notebook": str(notebook_path), "values": list(names)})
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
) -> list[QuestionGrade]:
    """Grade one submission (see the module docstring); never raises for a bad submission.

    Args:
        submission: the student's ``.ipynb`` (its name gives the student and the sheet's
            ``submission`` column).
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

    Returns:
        One :class:`QuestionGrade` per question of the autograder, in question order.
    """
    path = Path(submission)
    if bundle is None:
        bundle = load_bundle(Path(autograder_zip).read_bytes())
    points = bundle["points"]
    problem = None
    if content is None:
        content, problem = _read_submission(path)
    digest = hashlib.sha256(content).hexdigest() if content is not None else ""
    notebook, review = None, list(extra_review)
    if problem is None:
        notebook, problem = _parse_notebook(content)
    if notebook is not None:
        review = review_flags(notebook, bundle["given_cells"], assignment) + review
        source, defined, refused = extract_functions(notebook)
        review += [f"refused {r}" for r in refused if r.split(":")[0] in GRADED[assignment]["functions"]]

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
    with Sandbox(deadline, limits, env) as box:
        notebook_path = box.work / "submission.ipynb"
        notebook_path.write_bytes(content)
        try:
            raw_values, missing = _run_notebook(box, notebook_path, GRADED[assignment]["values"])
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
        on_warning: called with each warning (duplicate students, files changed during grading).
        limits: resource limits of each submission's processes.

    Returns:
        The rows, submission by submission (in the order given), question by question.
    """
    from concurrent.futures import ThreadPoolExecutor, as_completed

    check_choice(assignment, ASSIGNMENTS, "assignment")
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
    _preload()
    zip_digest = hashlib.sha256(zip_bytes).hexdigest()
    paths = [Path(s) for s in submissions]
    read = [_read_submission(p) for p in paths]
    digests = [hashlib.sha256(c).hexdigest() if c is not None else None for c, _ in read]
    students = Counter(student_id(p, assignment) for p in paths)
    for student, count in sorted(students.items()):
        if count > 1:
            warn(f"{count} submissions for student {student!r}: each is graded and flagged for review")
    private = Path(tempfile.mkdtemp(prefix="opcc-batch-"))
    zip_copy = atomic_write_bytes(private / "autograder.zip", zip_bytes)
    copies = [atomic_write_bytes(private / f"{i}.ipynb", c) if c is not None else None for i, (c, _) in enumerate(read)]
    done: dict[int, list[QuestionGrade]] = {}
    written: list[str] = []
    sheet_lock = threading.Lock()

    def grade_one(i: int) -> list[QuestionGrade]:
        notes = []
        if students[student_id(paths[i], assignment)] > 1:
            notes.append(f"{students[student_id(paths[i], assignment)]} submissions for this student")
        with sheet_lock:
            if sha256_file(zip_copy) != zip_digest:
                atomic_write_bytes(zip_copy, zip_bytes)
                notes.append("the autograder copy was changed during the batch (restored)")
        content, problem = read[i]
        if copies[i] is not None and sha256_file(copies[i]) != digests[i]:
            notes.append("the private copy of this submission was changed during the batch (graded as first read)")
        if problem is not None:
            return grade_submission(paths[i], assignment, autograder_zip, bundle=bundle, extra_review=notes)
        return grade_submission(
            paths[i],
            assignment,
            autograder_zip,
            timeout,
            bundle=bundle,
            content=content,
            limits=limits,
            extra_review=notes,
        )

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
        if digest is not None and (not path.is_file() or sha256_file(path) != digest):
            warn(f"{path} changed during grading: the sheet grades the file as first read (sha256 {digest[:12]}...)")
    if hashlib.sha256(Path(autograder_zip).read_bytes()).hexdigest() != zip_digest:
        warn(f"{autograder_zip} changed during grading: the sheet used the zip as it was first read")
    return collected()


# --------------------------------------------------------------------------------------------
# Containers
# --------------------------------------------------------------------------------------------
class DockerUnavailable(RuntimeError):
    """``--docker`` was asked for where Docker cannot run."""


def require_docker() -> None:
    """Raise :class:`DockerUnavailable` (one line) unless ``docker`` runs with a daemon."""
    if shutil.which("docker") is None:
        raise DockerUnavailable(
            "--docker needs Docker, and the docker command was not found: grade without --docker, or on Gradescope"
        )
    try:
        status = subprocess.run(["docker", "info"], capture_output=True, timeout=20, check=False).returncode
    except (OSError, subprocess.TimeoutExpired):
        status = 1
    if status != 0:
        raise DockerUnavailable(
            "--docker needs a running Docker daemon ('docker info' failed): start Docker, or grade without --docker"
        )


def docker_command(
    assignment: str,
    autograder_zip: str | os.PathLike,
    folder: str | os.PathLike,
    out: str | os.PathLike,
    timeout: float,
    jobs: int = 1,
) -> list[str]:
    """The ``otter grade`` command that grades every ``.ipynb`` in ``folder``, one container each."""
    return [
        "otter", "grade", "-n", assignment, "-a", str(autograder_zip), "-o", str(out), "--ext", "ipynb",
        "--timeout", str(max(1, math.ceil(timeout))), "--no-network", "--containers", str(jobs), str(folder),
    ]  # fmt: skip


def grade_with_docker(
    assignment: str, submissions: Sequence[str | os.PathLike], autograder_zip: str | os.PathLike,
    timeout: float = DEFAULT_TIMEOUT, jobs: int = 1,
) -> list[QuestionGrade]:  # fmt: skip
    """Hand the batch to ``otter grade`` (a container per submission, no network, the same time
    limit) and read its scores. Raises :class:`DockerUnavailable` at once without Docker."""
    import csv

    require_docker()
    bundle = load_bundle(Path(autograder_zip).read_bytes())
    with tempfile.TemporaryDirectory(prefix="opcc-docker-") as workdir:
        folder, out = Path(workdir) / "submissions", Path(workdir) / "out"
        folder.mkdir()
        names = {}
        for i, submission in enumerate(submissions):
            shutil.copyfile(submission, folder / f"s{i}.ipynb")
            names[f"s{i}"] = Path(submission)
        subprocess.run(docker_command(assignment, autograder_zip, folder, out, timeout, jobs), check=True)
        with open(out / "final_grades.csv", newline="", encoding="utf-8") as handle:
            scores = {Path(row.get("file", "")).stem: row for row in csv.DictReader(handle)}
    rows = []
    for key, path in names.items():
        row = scores.get(key, {})
        digest = sha256_file(path)
        for q, available in bundle["points"].items():
            got = 0.0
            with contextlib.suppress(ValueError, TypeError):
                got = float(row.get(q, "nan"))
            got = 0.0 if math.isnan(got) else got
            reason = "" if got >= available - 1e-9 else ("not graded" if not row else "tests failed (otter grade)")
            rows.append(
                QuestionGrade(
                    student_id(path, assignment), assignment, q, got, available, reason, "", digest, str(path)
                )
            )
    return rows
