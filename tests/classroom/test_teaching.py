"""The classroom assignments: built with ``otter assign``, graded in sandboxes against trusted checks.

For every assignment: the solution scores full marks, the blank student notebook scores 0 with
no grader error, a prepared wrong answer loses exactly its question's points, a blank or wrong
notebook that patches the grader, NumPy and the package's reference functions gets the same
honest score (flagged for review), and the student notebook holds no solution and no hidden
test. The attacks of one student on the others are in ``test_grading_attacks.py``.
"""

from __future__ import annotations

import csv
import hashlib
import json
import re
import zipfile
from pathlib import Path

import nbformat
import pytest

pytest.importorskip("otter", reason="the 'teach' extra (otter-grader) is not installed")

from classroom_backend import grading_backend  # noqa: E402

from opcc_edu.classroom.isolation import UNSAFE_NOTE  # noqa: E402
from opcc_edu.classroom.teaching import (  # noqa: E402
    ASSIGNMENTS,
    build_assignment,
    grade_submission,
    grade_submissions,
    question_points,
    read_grades,
    source_dir,
    student_id,
    student_page,
    student_versions_dir,
)
from opcc_edu.cli import main  # noqa: E402

SOURCES = sorted(p.stem for p in source_dir().glob("*.ipynb"))

#: One plausible mistake per assignment: (question, text of the solution, the mistaken text).
#: Each fails every test of its question and no test of another question.
WRONG_ANSWERS: dict[str, tuple[str, str, str]] = {
    "finite_horizon_values": (
        "q2",
        "returns.std(ddof=1) / np.sqrt(n_rollouts)",
        "returns.std(ddof=1)",  # the spread of one return, not of the mean
    ),
    "risk_coverage_metrics": (
        "q3",
        "above.sum() / confidence.size**2",
        "above.sum() / max(1, loss.sum() * (~loss).sum())",  # divided by the (correct, wrong) pairs
    ),
    "ensemble_confidence": (
        "q3",
        "values_a.std(axis=1, ddof=1) + values_b.std(axis=1, ddof=1)",
        "(values_a - values_b).std(axis=1, ddof=1)",  # the paired spread: that is PCI
    ),
    "design_confidence": (
        "q2",
        "return prediction, confidence",
        "return prediction, -confidence",  # most confident where least sure
    ),
    "mini_ablation": (
        "q2",
        'summary["half_width"] = half_widths',
        'summary["half_width"] = 0.0',  # no interval
    ),
}


def test_every_source_is_an_assignment_and_has_a_wrong_answer():
    assert SOURCES, "no source notebooks under assignments/source"
    assert set(SOURCES) <= set(ASSIGNMENTS)
    assert set(SOURCES) <= set(WRONG_ANSWERS)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    from concurrent.futures import ThreadPoolExecutor

    out = tmp_path_factory.mktemp("assignments")
    with ThreadPoolExecutor(max_workers=2) as pool:  # each build is an `otter assign` process
        return dict(zip(SOURCES, pool.map(lambda name: build_assignment(name, out), SOURCES), strict=True))


def _solution(built_assignment):
    return built_assignment.autograder_zip.parent / f"{built_assignment.name}.ipynb"


def _wrong_answer(name: str, solution: Path, folder: Path) -> Path:
    question, right, wrong = WRONG_ANSWERS[name]
    notebook = nbformat.read(solution, as_version=4)
    hits = [cell for cell in notebook.cells if cell.cell_type == "code" and right in cell.source]
    assert len(hits) == 1, f"{name}: the prepared mistake must edit exactly one cell, found {len(hits)}"
    hits[0].source = hits[0].source.replace(right, wrong)
    path = folder / f"{name}.ipynb"
    path.parent.mkdir(parents=True)
    nbformat.write(notebook, path)
    return path


#: What a cheating student adds to a notebook (last cell, and first): replace Otter's test runner,
#: make NumPy's comparisons always true, redefine the package's reference functions, and plant
#: an IPython start-up file.
CHEATS = """
import os
import numpy as np
import otter
import opcc_edu.metrics, opcc_edu.mdp, opcc_edu.confidence
from otter.test_files.exception_test import ExceptionTestFile
def _passes(self, global_environment):
    for case in self.test_cases:
        self.test_case_results.append(otter.test_files.abstract_test.TestCaseResult(case, "ok", True))
ExceptionTestFile.run = _passes
np.isclose = lambda *args, **kwargs: True
np.allclose = lambda *args, **kwargs: True
np.array_equal = lambda *args, **kwargs: True
for _module in (opcc_edu.metrics, opcc_edu.mdp, opcc_edu.confidence):
    for _name in dir(_module):
        if not _name.startswith("_") and callable(getattr(_module, _name)):
            setattr(_module, _name, lambda *args, **kwargs: None)
_startup = os.path.join(os.environ.get("IPYTHONDIR", "."), "profile_default", "startup")
os.makedirs(_startup, exist_ok=True)
open(os.path.join(_startup, "00-pass.py"), "w").write("import numpy\\nnumpy.allclose = lambda *a, **k: True\\n")
"""


def _with_cheats(notebook_path: Path, path: Path, first: bool = True) -> Path:
    notebook = nbformat.read(notebook_path, as_version=4)
    if first:
        notebook.cells.insert(0, nbformat.v4.new_code_cell(CHEATS))
    notebook.cells.append(nbformat.v4.new_code_cell(CHEATS))
    nbformat.write(notebook, path)
    return path


@pytest.mark.parametrize("name", SOURCES)
def test_grade_command_solution_full_blank_zero_wrong_loses_its_question_corrupt_reported(
    name, built, tmp_path, capsys
):
    assignment = built[name]
    points = question_points(assignment.autograder_zip)
    assert 3 <= len(points) <= 6 and all(p > 0 for p in points.values())
    (tmp_path / "alice").mkdir()
    good = tmp_path / "alice" / f"{name}.ipynb"  # named after the assignment: the student is the folder
    good.write_bytes(_solution(assignment).read_bytes())
    blank = tmp_path / "bob.ipynb"
    blank.write_bytes(assignment.student_notebook.read_bytes())
    wrong = _wrong_answer(name, _solution(assignment), tmp_path / "carol")
    corrupt = tmp_path / "dave.ipynb"
    corrupt.write_text('{"cells": [')
    cheat_blank = _with_cheats(blank, tmp_path / "mallory.ipynb")
    cheat_wrong = _with_cheats(wrong, tmp_path / "oscar.ipynb", first=False)  # patches after its answers
    out = tmp_path / "grades.csv"
    zip_path = str(assignment.autograder_zip)
    argv = ["assignments", "grade", "--assignment", name, "--autograder", zip_path, "--out", str(out), "--jobs", "2"]
    argv += ["--unsafe-local"] if grading_backend() == "unsafe-local" else []
    paths = [good, blank, wrong, corrupt, cheat_blank, cheat_wrong]
    assert main([*argv, "--timeout", "300", *map(str, paths)]) == 0
    with open(out, newline="") as handle:
        rows = list(csv.DictReader(handle))
    columns = ["student", "assignment", "question", "points", "max_points", "reason", "review", "sha256", "submission"]
    assert list(rows[0]) == columns
    assert len(rows) == 6 * len(points)
    scores: dict[str, dict[str, tuple[float, str]]] = {}
    for row in rows:
        assert row["assignment"] == name and float(row["max_points"]) == points[row["question"]]
        scores.setdefault(row["student"], {})[row["question"]] = (float(row["points"]), row["reason"])
    assert list(scores) == ["alice", "bob", "carol", "dave", "mallory", "oscar"]  # in the order given
    reviews = {row["student"]: row["review"].replace(UNSAFE_NOTE, "").strip("; ") for row in rows}
    assert not reviews["alice"] and not reviews["bob"], reviews
    for cheat in ("mallory", "oscar"):  # the patches change nothing, and are flagged
        assert "grader" in reviews[cheat] and "patches" in reviews[cheat], reviews[cheat]
    assert scores["mallory"] == scores["bob"]
    assert {q: p for q, (p, _) in scores["oscar"].items()} == {**points, WRONG_ANSWERS[name][0]: 0.0}
    digests = {row["student"]: row["sha256"] for row in rows}
    assert digests["alice"] == hashlib.sha256(good.read_bytes()).hexdigest()
    assert {q: p for q, (p, _) in scores["alice"].items()} == points, scores["alice"]
    assert all(p == 0 for p, _ in scores["bob"].values()), scores["bob"]
    for _, reason in scores["bob"].values():  # failed tests, not a failure of the grader
        assert reason and not reason.startswith(("grader error", "timed out", "not graded", "not a notebook"))
    question = WRONG_ANSWERS[name][0]
    assert {q: p for q, (p, _) in scores["carol"].items()} == {**points, question: 0.0}, scores["carol"]
    assert scores["carol"][question][1], "a lost question has a reason"
    assert all(p == 0 and r.startswith("not a notebook") for p, r in scores["dave"].values())
    assert read_grades(out)[0].max_points == next(iter(points.values()))
    assert f"alice: {sum(points.values()):g}/{sum(points.values()):g}" in capsys.readouterr().err


def _solution_lines(source: Path) -> list[str]:
    """Substantial code lines inside the source's solution blocks."""
    lines = []
    for cell in nbformat.read(source, as_version=4).cells:
        if cell.cell_type != "code":
            continue
        inside = False
        for line in cell.source.splitlines():
            marker = line.strip()
            if marker.startswith(("# BEGIN SOLUTION", "# END SOLUTION")):  # "# BEGIN SOLUTION NO PROMPT" too
                inside = marker.startswith("# BEGIN SOLUTION")
            elif inside and len(marker) > 12 and not marker.startswith("#"):
                lines.append(marker)
    return lines


def _hidden_test_names(autograder_zip: Path) -> list[str]:
    names = []
    with zipfile.ZipFile(autograder_zip) as archive:
        for member in archive.namelist():
            if member.startswith("tests/") and member.endswith(".py"):
                text = archive.read(member).decode()
                names += re.findall(r"hidden=True\)\s*\ndef (\w+)", text)
    return names


@pytest.mark.parametrize("name", SOURCES)
def test_student_version_holds_no_solution_and_no_hidden_test(name, built):
    assignment = built[name]
    student_text = assignment.student_notebook.read_text()
    public_tests = "".join(p.read_text() for p in sorted(assignment.student_tests.glob("*.py")))
    solution_lines = _solution_lines(source_dir() / f"{name}.ipynb")
    assert solution_lines, f"{name}: no solution blocks found"
    leaked = [line for line in solution_lines if line in student_text]
    assert not leaked, f"{name}: solution code in the student notebook: {leaked[:3]}"
    hidden = _hidden_test_names(assignment.autograder_zip)
    assert hidden, f"{name}: every assignment has hidden tests"
    assert not [t for t in hidden if t in student_text or t in public_tests], f"{name}: a hidden test reached students"
    assert "hidden=True" not in public_tests and "BEGIN SOLUTION" not in student_text
    assert sorted(p.stem for p in assignment.student_tests.glob("*.py")) == sorted(
        question_points(assignment.autograder_zip)
    )


@pytest.mark.parametrize("name", SOURCES)
def test_kept_student_version_is_current(name, built):
    kept = student_versions_dir() / name
    fresh = student_page(built[name].student_notebook.read_text(), name)
    remedy = "rebuild with: python -c 'from opcc_edu.classroom.teaching import publish_student_versions as p; p()'"
    assert (kept / f"{name}.ipynb").read_text() == fresh, f"{name}: assignments/student is stale; {remedy}"
    for test in built[name].student_tests.glob("*.py"):
        assert (kept / "tests" / test.name).read_text() == test.read_text(), remedy
    notebook = json.loads(fresh)
    title, install = notebook["cells"][:2]  # the title first, then the Colab-only install cell
    assert title["cell_type"] == "markdown" and "".join(title["source"]).startswith("# ")
    assert install["cell_type"] == "code" and {"hide-output", "remove-cell"} <= set(install["metadata"]["tags"])
    assert not any("remove-cell" in c["metadata"].get("tags", []) for c in notebook["cells"][2:])
    assert '"google.colab" in sys.modules' in "".join(install["source"])
    assert notebook["metadata"]["mystnb"] == {"execution_mode": "off"}


def test_a_submission_past_its_time_limit_scores_zero_with_the_reason(built, tmp_path):
    name = SOURCES[0]
    assignment = built[name]
    notebook = nbformat.read(_solution(assignment), as_version=4)
    notebook.cells.insert(1, nbformat.v4.new_code_cell("import time\n\ntime.sleep(600)"))
    path = tmp_path / "slow.ipynb"
    nbformat.write(notebook, path)
    rows = grade_submission(path, name, assignment.autograder_zip, timeout=3, backend=grading_backend())
    assert [row.points for row in rows] == [0.0] * len(rows)
    assert {row.reason for row in rows} == {"timed out after 3 s"}


def test_bad_arguments_name_the_choices(tmp_path):
    with pytest.raises(ValueError, match="unknown assignment 'nope'; valid choices: finite_horizon_values"):
        build_assignment("nope", tmp_path)
    not_a_zip = tmp_path / "autograder.zip"
    not_a_zip.write_text("plain text")
    with pytest.raises(ValueError, match="not an Otter autograder zip"):
        question_points(not_a_zip)
    with pytest.raises(ValueError, match="submissions is empty"):
        grade_submissions(SOURCES[0], [], tmp_path / "x.zip")


def test_student_id_uses_the_folder_when_the_file_is_named_after_the_assignment():
    assert student_id("subs/alice/design_confidence.ipynb", "design_confidence") == "alice"
    assert student_id("subs/bob_design.ipynb", "design_confidence") == "bob_design"


def test_without_otter_the_command_names_the_teach_extra(tmp_path, monkeypatch, capsys):
    import sys

    monkeypatch.setitem(sys.modules, "otter", None)  # `import otter` now raises ImportError
    assert main(["assignments", "build", "--out", str(tmp_path)]) == 2
    assert 'pip install "opcc_edu[teach]"' in capsys.readouterr().err
    assert not any(tmp_path.iterdir())
