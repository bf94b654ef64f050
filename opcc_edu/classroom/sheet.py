"""The grade sheet: one row per student and question, written as CSV a spreadsheet cannot misread.

Cells that a spreadsheet would take for a formula (starting with ``=``, ``+``, ``-``, ``@``, a
tab or a carriage return) are written with a leading ``'``; :func:`read_grades` removes it.
"""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Iterable
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from ..io import atomic_write_text


@dataclass(frozen=True)
class QuestionGrade:
    """One row of the grade sheet: a student's score on one question.

    Attributes:
        student: who submitted (see :func:`opcc_edu.classroom.grading.student_id`).
        assignment: the assignment's name.
        question: the question's name (``q1``, ``q2``, ...).
        points: points earned.
        max_points: points available.
        reason: empty for full marks; else why points were lost (the first failed check, or what
            went wrong with the whole submission).
        review: what the submission's code touches that a teacher should look at (the grader,
            reference functions, /proc, subprocesses, the environment, files, IPython start-up),
            or a duplicate student; empty when nothing.
        sha256: the SHA-256 of the graded file, as read when the batch started.
        submission: the graded file.
    """

    student: str
    assignment: str
    question: str
    points: float
    max_points: float
    reason: str
    review: str = ""
    sha256: str = ""
    submission: str = ""


GRADE_COLUMNS: tuple[str, ...] = tuple(f.name for f in fields(QuestionGrade))

_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def escape_cell(text: str) -> str:
    """``text`` safe for a spreadsheet: a leading ``'`` when it starts like a formula."""
    return "'" + text if text.startswith(_FORMULA_START) else text


def _unescape(text: str) -> str:
    return text[1:] if text.startswith("'") and text[1:].startswith(_FORMULA_START) else text


def grades_csv(grades: Iterable[QuestionGrade]) -> str:
    """The CSV text of the sheet (columns :data:`GRADE_COLUMNS`)."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=GRADE_COLUMNS, lineterminator="\n")
    writer.writeheader()
    for grade in grades:
        row = {key: escape_cell(str(value)) for key, value in asdict(grade).items()}
        writer.writerow({**row, "points": f"{grade.points:g}", "max_points": f"{grade.max_points:g}"})
    return buffer.getvalue()


def write_grades(grades: Iterable[QuestionGrade], path: str | os.PathLike) -> Path:
    """Write the grade sheet as CSV, atomically."""
    return atomic_write_text(path, grades_csv(grades))


def read_grades(path: str | os.PathLike) -> list[QuestionGrade]:
    """Read a grade sheet written by :func:`write_grades`."""
    with open(path, newline="", encoding="utf-8") as handle:
        rows = []
        for row in csv.DictReader(handle):
            row = {key: _unescape(value) for key, value in row.items() if key in GRADE_COLUMNS}
            rows.append(
                QuestionGrade(**{**row, "points": float(row["points"]), "max_points": float(row["max_points"])})
            )
        return rows
