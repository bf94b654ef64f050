"""Provenance: the command, package versions, machine and checksums behind a generated file.

Every asset the package ships (policies, query sets), every cached dataset and every results
table records where it came from, so that a reader can regenerate it and a reviewer can tell two
runs apart. The pieces are built here, once:

* :func:`command_line` -- the command that is running, as a user would type it again;
* :func:`package_versions` -- the versions of the packages a result depends on;
* :func:`machine_description` -- one line naming the OS, CPU, torch threads and GPU;
* :func:`file_checksums` -- the sha256 of files a result was computed from;
* :func:`provenance` -- all of the above in one JSON-ready dict.

This module imports only the standard library (torch is looked at only if it is already
importable), so any layer may use it.
"""

from __future__ import annotations

import os
import platform
import shlex
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from importlib import metadata
from pathlib import Path

from .io import sha256_file

__all__ = [
    "DEFAULT_PACKAGES",
    "command_line",
    "file_checksums",
    "machine_description",
    "package_versions",
    "provenance",
    "sha256_file",
]

#: The packages whose versions can change a number this package produces.
DEFAULT_PACKAGES: tuple[str, ...] = (
    "opcc_edu",
    "numpy",
    "torch",
    "mujoco",
    "gymnasium",
    "gymnasium-robotics",
    "stable-baselines3",
)


def command_line(argv: Sequence[str] | None = None) -> str:
    """The running command as a shell-quoted line, ``opcc-edu ...`` for the console script.

    Args:
        argv: the argument vector; ``sys.argv`` when ``None``.
    """
    args = list(sys.argv if argv is None else argv)
    if args and Path(args[0]).name == "opcc-edu":
        args[0] = "opcc-edu"
    return shlex.join(args)


def package_versions(packages: Iterable[str] = DEFAULT_PACKAGES) -> dict[str, str]:
    """``{package: version}``, with ``"not installed"`` for a package that is absent."""
    out: dict[str, str] = {}
    for name in packages:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


def machine_description() -> str:
    """One line naming the machine: OS, CPU cores, torch threads and GPU (if any), Python."""
    parts = [platform.platform(), f"{os.cpu_count()} CPU cores"]
    processor = platform.processor()
    if processor:
        parts.append(processor)
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a dependency, but keep this module light
        pass
    else:
        parts.append(f"torch {torch.__version__} ({torch.get_num_threads()} threads)")
        parts.append(f"GPU {torch.cuda.get_device_name(0)}" if torch.cuda.is_available() else "no GPU")
    parts.append(f"Python {platform.python_version()}")
    return "; ".join(parts)


def file_checksums(paths: Mapping[str, str | os.PathLike[str]]) -> dict[str, str]:
    """``{name: sha256}`` of the files given by name."""
    return {name: sha256_file(path) for name, path in paths.items()}


def provenance(
    command: str | None = None,
    packages: Iterable[str] = DEFAULT_PACKAGES,
    inputs: Mapping[str, str | os.PathLike[str]] | None = None,
    **extra: object,
) -> dict[str, object]:
    """The provenance record of a generated file or result, ready for JSON.

    Args:
        command: the command that produced it; :func:`command_line` when ``None``.
        packages: the packages whose versions to record.
        inputs: files it was computed from, by name; their sha256 digests are recorded.
        **extra: further fields (seed, profile, recipe, ...), stored as given.

    Returns:
        ``{"command", "versions", "machine", "created", ["inputs"], **extra}``.
    """
    record: dict[str, object] = {
        "command": command_line() if command is None else command,
        "versions": package_versions(packages),
        "machine": machine_description(),
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    if inputs:
        record["inputs"] = file_checksums(inputs)
    record.update(extra)
    return record
