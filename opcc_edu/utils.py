"""Small shared helpers: seeding, device choice, the cache directory and input checks."""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any

import numpy as np

CACHE_ENV_VAR = "OPCC_EDU_CACHE"


def seed_everything(seed: int) -> np.random.Generator:
    """Seed Python, NumPy and torch (when installed) and return a fresh NumPy Generator.

    Code in this package never uses global random state for its own results: it threads the
    returned generator (or a ``torch.Generator``) explicitly. Seeding the globals only protects
    third-party code that does (for example stable-baselines3).

    Args:
        seed: a non-negative integer.

    Returns:
        ``numpy.random.default_rng(seed)``.
    """
    if not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    seed = int(seed)
    random.seed(seed)
    np.random.seed(seed % 2**32)
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a dependency, but keep numpy-only use cheap
        pass
    else:
        torch.manual_seed(seed)
    return np.random.default_rng(seed)


def get_device(device: Any = None):
    """Pick a torch device: the argument if given, else CUDA when available, else CPU.

    Args:
        device: ``None`` (automatic), ``"cpu"``, ``"cuda"``, ``"cuda:1"``, ``"mps"`` or a
            ``torch.device``.
    """
    import torch

    if device is None or device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise ValueError(
            f"device {device!r} is not a torch device; valid choices: None/'auto', 'cpu', 'cuda', 'cuda:N', 'mps'"
        ) from exc
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {device!r} requested but CUDA is not available; use 'cpu' or None")
    return dev


def cache_dir(*parts: str, create: bool = True) -> Path:
    """Return the package's cache directory (or a subdirectory of it).

    The location is ``$OPCC_EDU_CACHE`` when set, else ``$XDG_CACHE_HOME/opcc_edu``, else
    ``~/.cache/opcc_edu``. Generated datasets and trained ensembles live here.
    """
    root = os.environ.get(CACHE_ENV_VAR)
    if root:
        base = Path(root).expanduser()
    else:
        xdg = os.environ.get("XDG_CACHE_HOME")
        base = (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "opcc_edu"
    path = base.joinpath(*parts)
    if create:
        path.mkdir(parents=True, exist_ok=True)
    return path


def check_choice(value: Any, choices, argument: str):
    """Return ``value`` if it is one of ``choices``; else raise ValueError naming both."""
    choices = list(choices)
    if value not in choices:
        raise ValueError(f"unknown {argument} {value!r}; valid choices: {', '.join(map(str, choices))}")
    return value


def check_positive_int(value: Any, argument: str, minimum: int = 1) -> int:
    """Return ``int(value)`` if it is an integer >= ``minimum``; else raise ValueError."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"{argument} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def dataclass_from_dict(cls, data, tuple_fields: tuple[str, ...] = ("hidden_sizes",)):
    """Build dataclass ``cls`` from a JSON-style mapping (the inverse of a ``to_dict``).

    Unknown keys raise a ValueError listing the valid fields; list values of ``tuple_fields``
    become tuples again (JSON has no tuples).
    """
    import dataclasses

    fields = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - fields)
    if unknown:
        raise ValueError(f"unknown {cls.__name__} field(s) {unknown}; valid fields: {sorted(fields)}")
    data = dict(data)
    for name in tuple_fields:
        if name in data:
            data[name] = tuple(data[name])
    return cls(**data)
