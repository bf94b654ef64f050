"""What every raw benchmark record states about how it was made, and how it is written.

:func:`provenance_record` is the block a benchmark script puts in its JSON: the command line as
typed again (with the environment variables that set threads, profile and cache in front of it),
the git commit and whether the tree held changes, package versions, the machine, the time.
:func:`write_json` writes a record atomically. A report is then rendered from the JSON alone, so
that ``tests/lab/test_benchmark_reports.py`` can re-derive it number for number.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from pathlib import Path

from opcc_edu.io import atomic_write_text
from opcc_edu.provenance import command_line, provenance

ROOT = Path(__file__).resolve().parents[1]
#: Environment variables that change a number or a time, recorded in front of the command.
SETTINGS = ("OPCC_EDU_PROFILE", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPCC_EDU_CACHE", "CUDA_VISIBLE_DEVICES")


def git_state(root: Path = ROOT) -> dict[str, object]:
    """``{"git_commit", "git_dirty", "git_changed_files"}`` of the working tree (``None`` outside git)."""
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, check=True
        ).stdout.strip()
        status = subprocess.run(
            ["git", "status", "--porcelain"], cwd=root, capture_output=True, text=True, check=True
        ).stdout.splitlines()
    except (OSError, subprocess.CalledProcessError):
        return {"git_commit": None, "git_dirty": None}
    changed = [line[3:] for line in status]
    return {"git_commit": commit, "git_dirty": bool(changed), "git_changed_files": changed}


def full_command(argv: list[str]) -> str:
    """``argv`` as a shell line, with the thread, profile and cache settings of the environment in
    front and a script path inside the repository made relative to it."""
    parts = list(argv)
    for i, part in enumerate(parts[:2]):
        path = Path(part)
        if path.is_absolute() and path.suffix == ".py":
            try:
                parts[i] = str(path.relative_to(ROOT))
            except ValueError:
                pass
    settings = [f"{name}={shlex.quote(os.environ[name])}" for name in SETTINGS if name in os.environ]
    return " ".join([*settings, command_line(parts)])


def provenance_record(**extra: object) -> dict[str, object]:
    """The provenance block of a raw benchmark record (see the module docstring)."""
    import sys

    return provenance(command=full_command(["python", *sys.argv]), **git_state(), **extra)


def model_sizes(profile: str) -> dict[str, object]:
    """The model sizes of ``profile`` a benchmark record keeps: members, widths, steps, batch."""
    from opcc_edu.config import get_profile

    prof = get_profile(profile)
    return {
        "ensemble_size": prof.ensemble_size,
        "hidden_sizes": list(prof.hidden_sizes),
        "dynamics_train_steps": prof.dynamics_train_steps,
        "batch_size": prof.batch_size,
    }


def write_json(path: Path, data: object) -> Path:
    """Write ``data`` as indented JSON, atomically."""
    return atomic_write_text(path, json.dumps(data, indent=1) + "\n")


def command_of(data: dict, script: str, options: dict[str, object] | None = None) -> str:
    """The command a raw record was made by: its ``command`` field, else (records written before
    commands were recorded) the script with the options its recorded configuration holds."""
    if data.get("command"):
        return str(data["command"])
    parts = ["python", script]
    for name, value in (options or {}).items():
        if value is None or value is False:
            continue
        flag = "--" + name.replace("_", "-")
        if value is True:
            parts.append(flag)
        elif isinstance(value, (list, tuple)):
            parts += [flag, *map(str, value)]
        else:
            parts += [flag, str(value)]
    return shlex.join(parts) + " (as its recorded configuration gives it; the record predates recorded commands)"
