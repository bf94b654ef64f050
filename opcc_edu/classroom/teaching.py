"""Classroom assignments: build the student and autograder versions, grade a batch of submissions.

Each assignment is one source notebook under ``assignments/source/`` in Otter-Grader's format:
questions with points, solution blocks, public tests (students run them with
``grader.check("q1")``) and hidden tests (used only for grading). Two steps wrap Otter:

* :func:`build_assignment` runs ``otter assign``: it writes ``student/`` (the notebook without
  solutions, with the public tests) and ``autograder/`` (the solution notebook, every test and
  the autograder zip) for one assignment.
* :func:`grade_submissions` runs ``otter run`` (no Docker) on each submission and returns one
  :class:`QuestionGrade` per student and question; :func:`write_grades` saves them as CSV.

Why Otter-Grader and not a grader of our own: it already strips solutions, keeps hidden tests
out of the student notebook, lets students self-check (on Colab too) and is what teachers of
notebook courses use. What it does not give a batch of submissions is robustness, so every
submission is graded in its own ``otter run`` process with a time limit, in its own process
group: a submission that is not a notebook, raises, hangs or kills its kernel scores 0 on the
questions it affects, with the reason in the grade sheet, and the batch goes on.

Grading executes the students' code on the grading machine, with the grader's permissions.
"""

from __future__ import annotations

import ast
import csv
import glob
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from ..io import atomic_write_text
from ..utils import check_choice, check_positive_int

#: The assignments, in teaching order: name (the source notebook's stem) -> title.
ASSIGNMENTS: dict[str, str] = {
    "finite_horizon_values": "Finite-horizon values",
    "risk_coverage_metrics": "Risk-coverage metrics from scratch",
    "ensemble_confidence": "Confidence from an ensemble",
    "design_confidence": "Design a confidence function",
    "mini_ablation": "Mini-research: one ablation",
}

#: Seconds one submission may take to be graded (each assignment runs in well under 5 minutes).
DEFAULT_TIMEOUT = 600.0

#: Seconds ``otter assign`` may take for one assignment.
BUILD_TIMEOUT = 600.0

_REPOSITORY_ROOT = Path(__file__).resolve().parents[2]


def source_dir() -> Path:
    """The directory of the source notebooks (``assignments/source`` of a repository checkout).

    Raises:
        FileNotFoundError: the package is not installed from a checkout of the repository (the
            sources, which hold the solutions, are not part of the wheel).
    """
    path = _REPOSITORY_ROOT / "assignments" / "source"
    if not path.is_dir():
        raise FileNotFoundError(
            f"assignment sources not found at {path}: they live in a checkout of the repository "
            "(git clone, then pip install -e '.[teach]'), or pass the folder that holds them (--source)"
        )
    return path


def source_notebook(name: str, sources: str | os.PathLike | None = None) -> Path:
    """The source notebook (solutions and hidden tests) of assignment ``name``.

    Raises:
        ValueError: ``name`` is not one of :data:`ASSIGNMENTS` (the message lists them).
        FileNotFoundError: the notebook is missing from ``sources``.
    """
    check_choice(name, ASSIGNMENTS, "assignment")
    folder = source_dir() if sources is None else Path(sources)
    path = folder / f"{name}.ipynb"
    if not path.is_file():
        raise FileNotFoundError(f"source notebook of assignment {name!r} not found: {path}")
    return path


def require_otter() -> None:
    """Raise ImportError (naming the ``teach`` extra) unless Otter-Grader is installed."""
    try:
        import otter  # noqa: F401
    except ImportError as exc:
        raise ImportError(
            'building and grading assignments needs Otter-Grader: pip install "opcc_edu[teach]"', name="otter"
        ) from exc


def _otter(args: Sequence[str], timeout: float, cwd: str | os.PathLike | None = None) -> tuple[int | None, str]:
    """Run ``python -m otter ARGS`` in its own process group; return (status, stdout + stderr).

    The status is ``None`` when the time limit was reached; the whole group (the kernel that
    Otter started included) is then killed.
    """
    from ..config import ENV_VAR, get_profile

    # Notebooks run in kernels that read the profile from the environment: pass on the active one.
    env = {**os.environ, ENV_VAR: get_profile().name}
    process = subprocess.Popen(
        [sys.executable, "-m", "otter", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        cwd=cwd,
        start_new_session=True,
        text=True,
        errors="replace",
    )
    try:
        output, _ = process.communicate(timeout=timeout)
        return process.returncode, output
    except subprocess.TimeoutExpired:
        _kill_group(process)
        output, _ = process.communicate()
        return None, output


def _kill_group(process: subprocess.Popen) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:  # already gone
        pass


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:300] if lines else "no output"


# --------------------------------------------------------------------------------------------
# Building
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class BuiltAssignment:
    """Where :func:`build_assignment` wrote one assignment.

    Attributes:
        name: the assignment.
        student_notebook: ``OUT/NAME/student/NAME.ipynb``, to hand out (no solutions).
        student_tests: ``OUT/NAME/student/tests``, the public tests that go with it.
        autograder_zip: ``OUT/NAME/autograder/NAME-autograder.zip``, every test (for grading).
    """

    name: str
    student_notebook: Path
    student_tests: Path
    autograder_zip: Path


def build_assignment(
    name: str,
    out: str | os.PathLike,
    sources: str | os.PathLike | None = None,
    run_tests: bool = False,
    timeout: float = BUILD_TIMEOUT,
) -> BuiltAssignment:
    """Run ``otter assign`` on one source notebook and write ``OUT/NAME/{student,autograder}``.

    The output is written to a temporary folder beside ``OUT/NAME`` and moved into place only
    when complete, so an interrupted build never leaves a half-written assignment.

    Args:
        name: one of :data:`ASSIGNMENTS`.
        out: the output root.
        sources: the folder of source notebooks (None: :func:`source_dir`).
        run_tests: let Otter execute the solution notebook against every test while building
            (slower; the package's tests do the same check with ``otter run``).
        timeout: seconds the build may take.

    Raises:
        ValueError: an unknown ``name``.
        RuntimeError: ``otter assign`` failed or timed out (its last output line is included).
    """
    require_otter()
    source = source_notebook(name, sources)
    root = Path(out)
    root.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=root))
    try:
        args = ["assign", str(source), str(staging / "build")]
        if not run_tests:
            args.append("--no-run-tests")
        status, output = _otter(args, timeout)
        if status != 0:
            why = f"timed out after {timeout:g} s" if status is None else _last_line(output)
            raise RuntimeError(f"otter assign failed on assignment {name!r}: {why}")
        built = staging / "build"
        zips = sorted(glob.glob(str(built / "autograder" / f"{name}-autograder_*.zip")))
        if len(zips) != 1:
            raise RuntimeError(f"otter assign wrote {len(zips)} autograder zips for {name!r}, expected 1")
        os.replace(zips[0], built / "autograder" / f"{name}-autograder.zip")
        target = root / name
        if target.exists():
            shutil.rmtree(target)
        os.replace(built, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return BuiltAssignment(
        name=name,
        student_notebook=target / "student" / f"{name}.ipynb",
        student_tests=target / "student" / "tests",
        autograder_zip=target / "autograder" / f"{name}-autograder.zip",
    )


def build_assignments(
    out: str | os.PathLike,
    names: Iterable[str] | None = None,
    sources: str | os.PathLike | None = None,
    run_tests: bool = False,
    on_built: Callable[[BuiltAssignment], None] | None = None,
) -> list[BuiltAssignment]:
    """:func:`build_assignment` for each of ``names`` (None: every one in :data:`ASSIGNMENTS`)."""
    names = list(ASSIGNMENTS) if names is None else [check_choice(n, ASSIGNMENTS, "assignment") for n in names]
    built = []
    for name in names:
        built.append(build_assignment(name, out, sources, run_tests))
        if on_built is not None:
            on_built(built[-1])
    return built


def student_page(notebook_text: str, name: str) -> str:
    """The student notebook as the repository keeps it and the book renders it.

    Cell ids become ``NAME-0``, ``NAME-1``, ... (Otter draws random ones), outputs are dropped,
    and the notebook is marked not to be executed by the book build (its answer cells are
    blank, so running it shows only failing checks).
    """
    import nbformat

    notebook = nbformat.reads(notebook_text, as_version=4)
    for i, cell in enumerate(notebook.cells):
        cell["id"] = f"{name.replace('_', '-')}-{i}"
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    notebook.metadata["mystnb"] = {"execution_mode": "off"}
    return nbformat.writes(notebook) + "\n"


def student_versions_dir() -> Path:
    """``assignments/student`` of the repository: the student versions the book renders."""
    return source_dir().parent / "student"


def publish_student_versions(names: Iterable[str] | None = None, root: str | os.PathLike | None = None) -> list[Path]:
    """Rebuild the student versions kept in the repository (``assignments/student/NAME/``).

    Run it after editing a source notebook; a test checks that the kept versions are current.

    Returns:
        The student notebooks written.
    """
    root = student_versions_dir() if root is None else Path(root)
    written = []
    with tempfile.TemporaryDirectory(prefix="opcc-publish-") as workdir:
        for built in build_assignments(workdir, names):
            folder = root / built.name
            folder.mkdir(parents=True, exist_ok=True)
            page = student_page(built.student_notebook.read_text(encoding="utf-8"), built.name)
            written.append(atomic_write_text(folder / built.student_notebook.name, page))
            if (folder / "tests").exists():
                shutil.rmtree(folder / "tests")
            shutil.copytree(built.student_tests, folder / "tests")
    return written


# --------------------------------------------------------------------------------------------
# Grading
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class QuestionGrade:
    """One row of the grade sheet: a student's score on one question.

    Attributes:
        student: who submitted (see :func:`student_id`).
        assignment: the assignment's name.
        question: the question's name (``q1``, ``q2``, ...).
        points: points earned.
        max_points: points available.
        reason: empty for full marks; else why points were lost (a failed test's first error
            line, or what went wrong with the whole submission).
        submission: the graded file.
    """

    student: str
    assignment: str
    question: str
    points: float
    max_points: float
    reason: str
    submission: str


GRADE_COLUMNS: tuple[str, ...] = tuple(f.name for f in fields(QuestionGrade))


def question_points(autograder_zip: str | os.PathLike) -> dict[str, float]:
    """Points available per question, read from the test files in an autograder zip.

    The test files are parsed, not executed: each declares ``name = "q1"`` and ``points = N``.

    Raises:
        ValueError: the file is not an autograder zip with test files.
    """
    points: dict[str, float] = {}
    try:
        with zipfile.ZipFile(autograder_zip) as archive:
            for member in sorted(archive.namelist()):
                if member.startswith("tests/") and member.endswith(".py"):
                    declared = _declared_constants(archive.read(member).decode("utf-8"))
                    points[str(declared["name"])] = float(declared["points"])
    except (zipfile.BadZipFile, KeyError, SyntaxError) as exc:
        raise ValueError(f"autograder_zip {str(autograder_zip)!r} is not an Otter autograder zip: {exc}") from exc
    if not points:
        raise ValueError(f"autograder_zip {str(autograder_zip)!r} holds no test files (tests/*.py)")
    return dict(sorted(points.items(), key=lambda item: _question_order(item[0])))


def _question_order(name: str) -> tuple[int, str]:
    digits = "".join(ch for ch in name if ch.isdigit())
    return (int(digits) if digits else 0, name)


def _declared_constants(source: str) -> dict[str, object]:
    constants = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                constants[node.targets[0].id] = ast.literal_eval(node.value)
            except ValueError:
                continue
    return constants


def student_id(submission: str | os.PathLike, assignment: str) -> str:
    """Who submitted: the file's stem, or its folder's name when the stem is just the assignment
    name (as in ``alice/design_confidence.ipynb`` downloaded from a learning platform)."""
    path = Path(submission)
    if path.stem == assignment and path.parent.name:
        return path.parent.name
    return path.stem


def _notebook_problem(path: Path) -> str | None:
    """Why ``path`` cannot be graded as a notebook, or None."""
    import nbformat

    if not path.exists():
        return "file not found"
    if not path.is_file():
        return "not a file"
    try:
        notebook = nbformat.read(path, as_version=4)
        nbformat.validate(notebook)
    except Exception as exc:  # noqa: BLE001 - any parse failure means "not a notebook"
        return f"not a notebook ({type(exc).__name__}: {_last_line(str(exc))[:120]})"
    return None


KERNEL_START_ATTEMPTS = 3
"""How many times a submission is run when its kernel dies before it starts (a loaded machine
can lose a kernel at start-up: the student's notebook never ran, so it is not their fault)."""

_KERNEL_START_FAILURES = (
    "Kernel died before replying to kernel_info",
    "Kernel didn't respond in",
    "Timeout waiting for kernel_info reply",
)


def _kernel_failed_to_start(output: str) -> bool:
    """Whether Otter's output says the kernel never started (so no cell of the notebook ran)."""
    return any(marker in output for marker in _KERNEL_START_FAILURES)


def _failure_reason(output: str) -> str:
    """The first error of a failed question in Otter's output: ``TypeError: ...``, or for a bare
    ``AssertionError`` the failing statement."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    for i, line in enumerate(lines):
        match = re.match(r"^[A-Za-z_][\w.]*(Error|Exception|Interrupt):\s*(.*)$", line)
        if match:
            if match.group(2) or i == 0:
                return line[:300]
            return f"{line} {lines[i - 1]}"[:300]
    return "tests failed"


def grade_submission(
    submission: str | os.PathLike,
    assignment: str,
    autograder_zip: str | os.PathLike,
    timeout: float = DEFAULT_TIMEOUT,
    points: dict[str, float] | None = None,
) -> list[QuestionGrade]:
    """Grade one submission with ``otter run``; never raises for a bad submission.

    Args:
        submission: the student's ``.ipynb``.
        assignment: the assignment's name (recorded in the rows).
        autograder_zip: from :func:`build_assignment`.
        timeout: seconds the grading may take before the submission scores 0 (per attempt: a
            run whose kernel dies before it starts is retried, :data:`KERNEL_START_ATTEMPTS` in
            all, and scores 0 with the reason only when every attempt fails that way).
        points: :func:`question_points` of the zip (read from it when None).

    Returns:
        One :class:`QuestionGrade` per question of the autograder, in question order.
    """
    path = Path(submission)
    points = question_points(autograder_zip) if points is None else points
    student = student_id(path, assignment)

    def rows_of(points_and_reason: dict[str, tuple[float, str]]) -> list[QuestionGrade]:
        return [
            QuestionGrade(student, assignment, q, score, points[q], reason, str(path))
            for q, (score, reason) in points_and_reason.items()
        ]

    problem = _notebook_problem(path)
    if problem is not None:
        return rows_of({q: (0.0, problem) for q in points})
    for attempt in range(1, KERNEL_START_ATTEMPTS + 1):
        with tempfile.TemporaryDirectory(prefix="opcc-grade-") as workdir:
            status, output = _otter(
                ["run", "--no-logo", "-a", str(Path(autograder_zip).resolve()), "-o", workdir, str(path.resolve())],
                timeout,
                cwd=workdir,
            )
            results_path = Path(workdir) / "results.json"
            if status is None:
                return rows_of({q: (0.0, f"timed out after {timeout:g} s") for q in points})
            if results_path.is_file():
                results = json.loads(results_path.read_text(encoding="utf-8"))
                break
        if attempt == KERNEL_START_ATTEMPTS or not _kernel_failed_to_start(output):
            note = f" (kernel failed to start {attempt} times)" if attempt > 1 else ""
            return rows_of({q: (0.0, f"grader error: {_last_line(output)}{note}") for q in points})
    graded = {test["name"]: test for test in results.get("tests", []) if "score" in test and test["name"] in points}
    scores = {}
    for q in points:
        test = graded.get(q)
        if test is None:
            scores[q] = (0.0, "not graded (the question's tests did not run)")
            continue
        score = float(test["score"])
        reason = "" if score >= points[q] - 1e-9 else _failure_reason(test.get("output", ""))
        scores[q] = (score, reason)
    return rows_of(scores)


def grade_submissions(
    assignment: str,
    submissions: Sequence[str | os.PathLike],
    autograder_zip: str | os.PathLike,
    timeout: float = DEFAULT_TIMEOUT,
    out_csv: str | os.PathLike | None = None,
    on_graded: Callable[[list[QuestionGrade]], None] | None = None,
    jobs: int = 1,
) -> list[QuestionGrade]:
    """Grade every submission (see :func:`grade_submission`) and collect the rows.

    Args:
        assignment: one of :data:`ASSIGNMENTS`.
        submissions: the students' notebooks.
        autograder_zip: from :func:`build_assignment`.
        timeout: seconds per submission.
        out_csv: if given, the grade sheet is rewritten (atomically) after every submission, so
            an interrupted batch keeps the grades it has.
        on_graded: called with each submission's rows when it is graded (e.g. to report progress).
        jobs: submissions graded at the same time (each runs its own kernel).

    Returns:
        The rows, submission by submission (in the order given), question by question.
    """
    from concurrent.futures import ThreadPoolExecutor, as_completed

    check_choice(assignment, ASSIGNMENTS, "assignment")
    if not submissions:
        raise ValueError("submissions is empty: give at least one notebook to grade")
    jobs = check_positive_int(jobs, "jobs")
    points = question_points(autograder_zip)
    done: dict[int, list[QuestionGrade]] = {}

    def collected() -> list[QuestionGrade]:
        return [row for i in sorted(done) for row in done[i]]

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        futures = {
            pool.submit(grade_submission, submission, assignment, autograder_zip, timeout, points): i
            for i, submission in enumerate(submissions)
        }
        for future in as_completed(futures):
            rows = future.result()
            done[futures[future]] = rows
            if out_csv is not None:
                write_grades(collected(), out_csv)
            if on_graded is not None:
                on_graded(rows)
    return collected()


def write_grades(grades: Iterable[QuestionGrade], path: str | os.PathLike) -> Path:
    """Write the grade sheet as CSV (columns :data:`GRADE_COLUMNS`), atomically."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=GRADE_COLUMNS, lineterminator="\n")
    writer.writeheader()
    for grade in grades:
        writer.writerow({**asdict(grade), "points": f"{grade.points:g}", "max_points": f"{grade.max_points:g}"})
    return atomic_write_text(path, buffer.getvalue())


def read_grades(path: str | os.PathLike) -> list[QuestionGrade]:
    """Read a grade sheet written by :func:`write_grades`."""
    with open(path, newline="", encoding="utf-8") as handle:
        return [
            QuestionGrade(**{**row, "points": float(row["points"]), "max_points": float(row["max_points"])})
            for row in csv.DictReader(handle)
        ]


__all__ = [
    "ASSIGNMENTS",
    "GRADE_COLUMNS",
    "KERNEL_START_ATTEMPTS",
    "BuiltAssignment",
    "QuestionGrade",
    "build_assignment",
    "build_assignments",
    "grade_submission",
    "grade_submissions",
    "publish_student_versions",
    "question_points",
    "read_grades",
    "source_dir",
    "source_notebook",
    "student_page",
    "student_versions_dir",
    "student_id",
    "write_grades",
]
