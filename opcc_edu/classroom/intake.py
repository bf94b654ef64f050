"""What the grader reads before anything runs: the autograder zip and each submitted file.

* :func:`read_submission` opens a submission without following a symbolic link (``O_NOFOLLOW``)
  and reads it only when it is a regular file under :data:`MAX_SUBMISSION_BYTES`: a link to a
  classmate's notebook, to the solution or to a system file is refused, never read.
* :func:`parse_notebook` reads it with nbformat, upgrading an older format (version 3's
  worksheets) with nbformat's own conversion, validates it, and returns the code cells of the
  upgraded notebook: the review and the runner get exactly these. Cells that nbformat does not
  read (a top-level ``cells`` list in a version 3 file) never run, and are flagged.
* Reasons never quote the file: nbformat's error messages can (``NotJSONError`` repeats the
  text), so each failure is named by its kind and position only.
"""

from __future__ import annotations

import errno
import io
import json
import os
import stat
import zipfile
from pathlib import Path
from typing import Any

from . import runner
from .catalog import EXPECTED_MEMBER, declared_constants, question_order

#: The largest submission read (bytes).
MAX_SUBMISSION_BYTES = 64 * 2**20


def load_bundle(data: bytes) -> dict[str, Any]:
    """Points per question, expected values and the handed-out cells, from autograder zip bytes.

    Raises:
        ValueError: not an autograder zip built by ``opcc-edu assignments build``.
    """
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


def read_submission(path: str | os.PathLike) -> tuple[bytes | None, str | None]:
    """(the file's bytes, None), or (None, why it is not graded); never follows a symbolic link."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return None, "file not found"
    except OSError as exc:
        return None, f"cannot be read ({errno.errorcode.get(exc.errno, 'error')})"
    if stat.S_ISLNK(info.st_mode):
        return None, "a symbolic link, not a file: not followed, not graded (submit the notebook itself)"
    if stat.S_ISDIR(info.st_mode):
        return None, "not a file"
    if not stat.S_ISREG(info.st_mode):
        return None, "not a regular file (a device, pipe or socket): not read, not graded"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return None, "a symbolic link, not a file: not followed, not graded (submit the notebook itself)"
        return None, f"cannot be read ({errno.errorcode.get(exc.errno, 'error')})"
    with os.fdopen(fd, "rb") as handle:
        opened = os.fstat(handle.fileno())
        if not stat.S_ISREG(opened.st_mode) or (opened.st_dev, opened.st_ino) != (info.st_dev, info.st_ino):
            return None, "the file was replaced while it was read: not graded"
        if opened.st_size > MAX_SUBMISSION_BYTES:
            return None, f"file larger than {MAX_SUBMISSION_BYTES // 2**20} MB"
        content = handle.read(MAX_SUBMISSION_BYTES + 1)
    if len(content) > MAX_SUBMISSION_BYTES:
        return None, f"file larger than {MAX_SUBMISSION_BYTES // 2**20} MB"
    return content, None


def _where(path: Any) -> str:
    """A validation error's position, keeping only numbers and schema-like names (not content)."""
    parts = []
    for part in list(path)[:6]:
        if isinstance(part, int) or (isinstance(part, str) and part.isidentifier() and len(part) <= 24):
            parts.append(str(part))
        else:
            parts.append("?")
    return "/".join(parts) or "the top level"


def parse_notebook(content: bytes) -> tuple[dict | None, list[str], list[str], str | None]:
    """(notebook as version 4, its code cells, review notes, None) or (None, [], [], why not).

    Code cells are the sources of the upgraded notebook's code cells, in order: what both the
    review and the runner see. An older format is upgraded by nbformat (``nbformat.reads`` with
    ``as_version=4``, which runs ``nbformat.v4.upgrade``); a review note says so, and flags a
    version 3 file that also holds a top-level ``cells`` list (never run).
    """
    import nbformat

    try:
        text = content.decode("utf-8")
    except UnicodeDecodeError as exc:
        return None, [], [], f"not a notebook (not UTF-8 text: byte {exc.start})"
    try:
        raw = json.loads(text)
    except ValueError as exc:
        where = f"line {exc.lineno}, column {exc.colno}" if hasattr(exc, "lineno") else "somewhere"
        return None, [], [], f"not a notebook (not JSON: {where})"
    if not isinstance(raw, dict):
        return None, [], [], "not a notebook (JSON, but not an object)"
    major = raw.get("nbformat")
    if not isinstance(major, int) or not 1 <= major <= 4:
        return None, [], [], "not a notebook (no nbformat version 1 to 4)"
    notes = []
    if major < 4:
        notes.append(f"nbformat {major} notebook (upgraded to version 4 by nbformat)")
        if "cells" in raw:  # not part of the format: dropped before nbformat reads the rest
            notes.append("cells outside the worksheets of a version 3 notebook (never run)")
            text = json.dumps({key: value for key, value in raw.items() if key != "cells"})
    try:
        notebook = nbformat.reads(text, as_version=4)
        nbformat.validate(notebook)
    except nbformat.ValidationError as exc:
        return None, [], [], f"not a notebook (invalid nbformat at {_where(getattr(exc, 'absolute_path', []))})"
    except Exception as exc:  # noqa: BLE001 - any failure to read means "not a notebook"; not quoted
        return None, [], [], f"not a notebook (nbformat could not read it: {type(exc).__name__})"
    plain = json.loads(nbformat.writes(notebook))
    cells = []
    for cell in plain.get("cells", []):
        if cell.get("cell_type") == "code":
            source = cell.get("source", "")
            cells.append("".join(source) if isinstance(source, list) else str(source))
    return plain, cells, notes, None
