"""Small shared helpers: seeding, device choice, the cache directory and input checks."""

from __future__ import annotations

import contextlib
import errno
import os
import random
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

if TYPE_CHECKING:
    import torch

T = TypeVar("T")
D = TypeVar("D")

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


def get_device(device: str | torch.device | None = None) -> torch.device:
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


def cache_root() -> Path:
    """The package's cache folder, without creating it.

    ``$OPCC_EDU_CACHE`` when set, else ``$XDG_CACHE_HOME/opcc_edu``, else ``~/.cache/opcc_edu``.
    """
    root = os.environ.get(CACHE_ENV_VAR)
    if root:
        return Path(root).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "opcc_edu"


def redirect_torch_caches() -> None:
    """Send torch's compile caches under the package's cache instead of the temp directory.

    Importing ``torch._dynamo`` (an optimizer step does) creates ``$TMPDIR/torchinductor_<user>``;
    this sets ``TORCHINDUCTOR_CACHE_DIR`` (and ``TRITON_CACHE_DIR`` for GPU kernels) to folders of
    :func:`cache_root` unless the user set them. Called before the package's first optimizer step
    (ensembles, FQE, PPO), not on import.
    """
    root = cache_root()
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str(root / "torchinductor"))
    os.environ.setdefault("TRITON_CACHE_DIR", str(root / "triton"))


def cache_hint(path: str | os.PathLike) -> str:
    """``"; ..."`` advice naming ``$OPCC_EDU_CACHE`` when ``path`` lies in the cache, else ``""``.

    Appended to the message of an error about a file or folder that cannot be written.
    """
    root = cache_root()
    try:
        Path(os.path.abspath(path)).relative_to(os.path.abspath(root))
    except ValueError:
        return ""
    where = f"${CACHE_ENV_VAR}={os.environ[CACHE_ENV_VAR]}" if os.environ.get(CACHE_ENV_VAR) else f"the default {root}"
    return f"; the cache folder is {where}: set ${CACHE_ENV_VAR} to a writable folder with free space"


def ensure_directory(path: str | os.PathLike) -> Path:
    """Create folder ``path`` and its parents if needed, with errors that say what is wrong.

    Raises:
        NotADirectoryError: ``path`` or one of its parents is a file (the message names it).
        OSError: the folder cannot be created (read-only or full file system; the message
            names the folder, and ``$OPCC_EDU_CACHE`` when it lies in the cache).
    """
    path = Path(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        blocker = next((p for p in (path, *path.parents) if p.exists() and not p.is_dir()), path)
        raise NotADirectoryError(
            errno.ENOTDIR, f"cannot create folder {path}: {blocker} is a file, not a folder{cache_hint(path)}"
        ) from None
    except OSError as exc:
        raise restate_os_error(exc, f"cannot create folder {path}: {exc.strerror or exc}{cache_hint(path)}") from exc
    return path


def restate_os_error(exc: OSError, message: str) -> OSError:
    """An OSError of the same class and errno as ``exc`` (so callers catching it still do) with a new message."""
    try:
        return type(exc)(exc.errno, message)
    except TypeError:  # an OSError subclass with another constructor
        return OSError(exc.errno, message)


def cache_dir(*parts: str, create: bool = True) -> Path:
    """Return the package's cache directory (or a subdirectory of it).

    The location is :func:`cache_root`: ``$OPCC_EDU_CACHE`` when set, else
    ``$XDG_CACHE_HOME/opcc_edu``, else ``~/.cache/opcc_edu``. Generated datasets and trained
    ensembles live here.

    Raises:
        NotADirectoryError: with ``create``, the location (or a parent) is a file.
        OSError: with ``create``, the folder cannot be created (the message names it and
            ``$OPCC_EDU_CACHE``).
    """
    path = cache_root().joinpath(*parts)
    if create:
        ensure_directory(path)
    return path


def check_choice(value: T, choices: Iterable[Any], argument: str) -> T:
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


def check_finite(array: np.ndarray, argument: str) -> np.ndarray:
    """Return ``array`` if every entry is finite; else raise ValueError naming the first other one and where it is."""
    if not np.all(np.isfinite(array)):
        index = tuple(int(i) for i in np.argwhere(~np.isfinite(array))[0])
        where = index[0] if array.ndim == 1 else index
        raise ValueError(f"{argument} must be finite; found {array[index]!r} at index {where}")
    return array


def dataclass_from_dict(cls: type[D], data: Mapping[str, Any], tuple_fields: tuple[str, ...] = ("hidden_sizes",)) -> D:
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


@contextlib.contextmanager
def single_threaded() -> Iterator[None]:
    """Run a block with one torch thread, restoring the caller's setting afterwards.

    Float reductions are split by thread, so PPO's weights and the labels of a query set depend
    on the thread count. The shipped policies and query sets were built on one thread, and
    building or replaying them must be too.
    """
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def lazy_exports(package: str, namespace: dict[str, Any], exports: Mapping[str, str]) -> tuple[Callable, Callable]:
    """A package's PEP 562 ``(__getattr__, __dir__)``: each name of ``exports`` (name -> submodule,
    relative to ``package``) is imported on first use and kept in ``namespace``, the package's ``globals()``."""
    import importlib

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = namespace[name] = getattr(importlib.import_module(f".{module}", package), name)
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(exports))

    return __getattr__, __dir__
