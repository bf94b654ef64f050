"""Classroom assignments: build the student and autograder versions (grading: :mod:`.grading`).

Each assignment is one source notebook under ``assignments/source/`` in Otter-Grader's format:
questions with points, solution blocks, public tests (students run them with
``grader.check("q1")``) and hidden tests. :func:`build_assignment` runs ``otter assign``: it
writes ``student/`` (the notebook without solutions, with the public tests) and ``autograder/``
(the solution notebook, every test and the autograder zip) for one assignment, and adds to the
zip ``opcc/expected.json``: the hidden inputs and the expected values that trusted code computes
at build time (:mod:`opcc_edu.classroom.checks`), against which the grader compares, outside
the student's process, what a submission's functions and values give.

Why Otter-Grader: it strips solutions, keeps hidden tests out of the student notebook, lets
students self-check (on Colab too), and its zip runs on Gradescope and in ``otter grade``'s
containers (``--docker``). Local grading does not use ``otter run``, which runs the tests inside
the student's kernel: see :mod:`opcc_edu.classroom.grading` for why and how.

The grading API is re-exported here (:func:`grade_submission`, :func:`grade_submissions`,
:func:`write_grades`, :func:`read_grades`, :class:`QuestionGrade`).
"""

from __future__ import annotations

import glob
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..config import ENV_VAR, get_profile
from ..io import atomic_write_bytes, atomic_write_text
from ..utils import check_choice
from . import runner
from .catalog import ASSIGNMENTS, EXPECTED_MEMBER, declared_constants, question_order
from .checks import build_expected
from .review import given_cells

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
        _add_expected_values(name, Path(zips[0]), built / "autograder" / f"{name}-autograder.zip", built)
        Path(zips[0]).unlink()
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


def _add_expected_values(name: str, otter_zip: Path, target: Path, built: Path) -> None:
    """Write ``target``: Otter's autograder zip plus ``opcc/expected.json``, the hidden inputs and
    expected values that trusted code computes now (:func:`opcc_edu.classroom.checks.build_expected`)
    and the handed-out code cells (not reviewed in submissions)."""
    expected = build_expected(name)
    student = json.loads((built / "student" / f"{name}.ipynb").read_text(encoding="utf-8"))
    stored = {
        "assignment": name,
        "profile": expected.pop("profile"),
        "expected": runner.encode(expected),
        "given_cells": given_cells(student),
    }
    buffer = io.BytesIO()
    with zipfile.ZipFile(otter_zip) as source, zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for member in source.infolist():
            archive.writestr(member, source.read(member.filename))
        archive.writestr(EXPECTED_MEMBER, json.dumps(stored))
    atomic_write_bytes(target, buffer.getvalue())


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
    the Colab-only install cell is tagged ``remove-cell`` (the book's page leaves it out, as the
    chapters do theirs; a student's notebook keeps and runs it), and the notebook is marked not
    to be executed by the book build (its answer cells are blank, so running it shows only
    failing checks).
    """
    import nbformat

    notebook = nbformat.reads(notebook_text, as_version=4)
    for i, cell in enumerate(notebook.cells):
        cell["id"] = f"{name.replace('_', '-')}-{i}"
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
            tags = cell.metadata.get("tags", [])
            if '"google.colab" in sys.modules' in cell.source and "remove-cell" not in tags:
                cell.metadata["tags"] = [*tags, "remove-cell"]
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
# The autograder's points
# --------------------------------------------------------------------------------------------
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
                    declared = declared_constants(archive.read(member).decode("utf-8"))
                    points[str(declared["name"])] = float(declared["points"])
    except (zipfile.BadZipFile, KeyError, SyntaxError) as exc:
        raise ValueError(f"autograder_zip {str(autograder_zip)!r} is not an Otter autograder zip: {exc}") from exc
    if not points:
        raise ValueError(f"autograder_zip {str(autograder_zip)!r} holds no test files (tests/*.py)")
    return dict(sorted(points.items(), key=lambda item: question_order(item[0])))


from .grading import (  # noqa: E402 - the grading API, re-exported
    DEFAULT_TIMEOUT,
    KERNEL_START_ATTEMPTS,
    grade_submission,
    grade_submissions,
    student_id,
)
from .sheet import GRADE_COLUMNS, QuestionGrade, read_grades, write_grades  # noqa: E402

__all__ = [
    "ASSIGNMENTS",
    "DEFAULT_TIMEOUT",
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
