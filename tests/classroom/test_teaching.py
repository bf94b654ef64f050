"""The classroom assignments: built with ``otter assign``, graded with ``otter run`` (no Docker).

For every assignment: the solution scores full marks, the blank student notebook scores 0 with
no grader error, a prepared wrong answer loses exactly its question's points, and the student
notebook holds no solution and no hidden test. The grade command writes one row per student and
question for a batch with a good, a blank and a corrupt submission.
"""

from __future__ import annotations

import csv
import json
import re
import zipfile
from pathlib import Path

import nbformat
import pytest

pytest.importorskip("otter", reason="the 'teach' extra (otter-grader) is not installed")

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
    out = tmp_path / "grades.csv"
    zip_path = str(assignment.autograder_zip)
    argv = ["assignments", "grade", "--assignment", name, "--autograder", zip_path, "--out", str(out), "--jobs", "2"]
    assert main([*argv, "--timeout", "300", str(good), str(blank), str(wrong), str(corrupt)]) == 0
    with open(out, newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert list(rows[0]) == ["student", "assignment", "question", "points", "max_points", "reason", "submission"]
    assert len(rows) == 4 * len(points)
    scores: dict[str, dict[str, tuple[float, str]]] = {}
    for row in rows:
        assert row["assignment"] == name and float(row["max_points"]) == points[row["question"]]
        scores.setdefault(row["student"], {})[row["question"]] = (float(row["points"]), row["reason"])
    assert list(scores) == ["alice", "bob", "carol", "dave"]  # in the order given
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
            if marker in ("# BEGIN SOLUTION", "# END SOLUTION"):
                inside = marker == "# BEGIN SOLUTION"
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
    first = notebook["cells"][0]
    assert first["cell_type"] == "code" and "hide-output" in first["metadata"]["tags"]
    assert '"google.colab" in sys.modules' in "".join(first["source"])
    assert notebook["metadata"]["mystnb"] == {"execution_mode": "off"}


def test_a_submission_past_its_time_limit_scores_zero_with_the_reason(built, tmp_path):
    name = SOURCES[0]
    assignment = built[name]
    notebook = nbformat.read(_solution(assignment), as_version=4)
    notebook.cells.insert(1, nbformat.v4.new_code_cell("import time\n\ntime.sleep(600)"))
    path = tmp_path / "slow.ipynb"
    nbformat.write(notebook, path)
    rows = grade_submission(path, name, assignment.autograder_zip, timeout=3)
    assert [row.points for row in rows] == [0.0] * len(rows)
    assert {row.reason for row in rows} == {"timed out after 3 s"}


def test_missing_and_directory_submissions_are_reported(built, tmp_path):
    name = SOURCES[0]
    zip_path = built[name].autograder_zip
    missing = grade_submission(tmp_path / "nobody.ipynb", name, zip_path)
    assert {row.reason for row in missing} == {"file not found"}
    assert {row.reason for row in grade_submission(tmp_path, name, zip_path)} == {"not a file"}


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


def _fake_otter(outputs: list[str], scores: dict[str, float]):
    """An ``_otter`` stand-in: each call pops the next output; the output "ok" writes a
    results.json with ``scores`` into the ``-o`` folder, any other writes nothing."""
    calls = []

    def fake(args, timeout, cwd=None):
        calls.append(list(args))
        output = outputs.pop(0)
        if output == "ok":
            workdir = Path(args[args.index("-o") + 1])
            tests = [{"name": q, "score": s, "output": ""} for q, s in scores.items()]
            (workdir / "results.json").write_text(json.dumps({"tests": tests}))
        return 0 if output == "ok" else 1, output

    return fake, calls


def _any_notebook(path: Path) -> Path:
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1")]), path)
    return path


def test_a_kernel_that_dies_at_start_up_is_retried_and_other_errors_are_not(tmp_path, monkeypatch):
    import opcc_edu.classroom.teaching as teaching

    points = {"q1": 2.0, "q2": 3.0}
    died = "Traceback ...\nRuntimeError: Kernel died before replying to kernel_info\n"
    notebook = _any_notebook(tmp_path / "erin.ipynb")
    # Died once, then ran: full marks, two runs.
    fake, calls = _fake_otter([died, "ok"], points)
    monkeypatch.setattr(teaching, "_otter", fake)
    rows = grade_submission(notebook, "mini_ablation", "unused.zip", points=points)
    assert [(r.question, r.points, r.reason) for r in rows] == [("q1", 2.0, ""), ("q2", 3.0, "")]
    assert len(calls) == 2
    # Died every time: 0 with the reason and the count, after KERNEL_START_ATTEMPTS runs.
    fake, calls = _fake_otter([died] * teaching.KERNEL_START_ATTEMPTS, points)
    monkeypatch.setattr(teaching, "_otter", fake)
    rows = grade_submission(notebook, "mini_ablation", "unused.zip", points=points)
    assert len(calls) == teaching.KERNEL_START_ATTEMPTS
    assert all(r.points == 0 for r in rows)
    assert rows[0].reason.startswith("grader error: RuntimeError: Kernel died before replying to kernel_info")
    assert f"failed to start {teaching.KERNEL_START_ATTEMPTS} times" in rows[0].reason
    # Any other grader error is the submission's: one run, no retry.
    fake, calls = _fake_otter(["ValueError: something else\n"], points)
    monkeypatch.setattr(teaching, "_otter", fake)
    rows = grade_submission(notebook, "mini_ablation", "unused.zip", points=points)
    assert len(calls) == 1 and rows[0].reason == "grader error: ValueError: something else"
