"""Grading in containers (``--docker``): hand the batch to ``otter grade``, one container each.

``otter grade`` already runs each submission in its own Docker container without network and
with a time limit; this module only builds its command line, checks that Docker can run, and
reads its scores back into the grade sheet's rows. Inside a container the grading is Otter's
(its tests run in the student's kernel): containers keep students away from the machine and from
each other, not from patching their own tests.
"""

from __future__ import annotations

import contextlib
import math
import os
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

from ..io import sha256_file
from .catalog import DEFAULT_TIMEOUT
from .intake import load_bundle, student_id
from .sheet import QuestionGrade


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
