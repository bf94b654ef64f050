"""How a failure reaches the user: one line ``opcc-edu CMD: error: ...`` and an exit status.

Exit statuses of ``opcc-edu``:

* ``0`` -- success.
* ``1`` -- the command ran out of a resource: memory (host or GPU) or disk space; or, for
  ``ablation``, some runs failed on every attempt (every other run is saved).
* ``2`` -- the command cannot do what was asked: a bad option or value, an unknown name, a path
  that is a file or not writable, a missing file, a missing optional extra.
* ``130`` -- interrupted (Ctrl-C).
* ``141`` -- the reader of the output went away (``opcc-edu info | head``); nothing is printed.
"""

from __future__ import annotations

import errno
import importlib
import importlib.util

from .options import UsageError

EXIT_OK = 0
EXIT_RESOURCE = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
EXIT_BROKEN_PIPE = 141

#: Optional extras of the package: extra -> the importable modules it provides.
EXTRAS: dict[str, tuple[str, ...]] = {
    "train": ("stable_baselines3",),
    "data": ("h5py",),
    "cluster": ("ray",),
    "book": ("jupyter_book", "myst_nb", "sphinx_exercise", "sphinx_togglebutton"),
    "teach": ("otter",),
}
_MODULE_TO_EXTRA = {module: extra for extra, modules in EXTRAS.items() for module in modules}


class MissingExtraError(ImportError):
    """An optional extra the command needs is not installed."""

    def __init__(self, extra: str) -> None:
        super().__init__(f"this command needs the '{extra}' extra: pip install \"opcc_edu[{extra}]\"")
        self.extra = extra


def require_extra(extra: str) -> None:
    """Raise :class:`MissingExtraError` unless every module of the optional ``extra`` imports."""
    for module in EXTRAS[extra]:
        try:
            importlib.import_module(module)
        except ImportError:
            raise MissingExtraError(extra) from None


def _missing_module(exc: ImportError) -> str | None:
    """The top-level module whose absence caused ``exc`` (looking through chained causes)."""
    seen: BaseException | None = exc
    while seen is not None:
        name = getattr(seen, "name", None)
        if isinstance(seen, ImportError) and name:
            return name.split(".")[0]
        seen = seen.__cause__ or seen.__context__
    return None


def _import_message(exc: ImportError) -> str:
    if isinstance(exc, MissingExtraError):
        return str(exc)
    module = _missing_module(exc)
    if module in _MODULE_TO_EXTRA:
        return str(MissingExtraError(_MODULE_TO_EXTRA[module]))
    for name, extra in _MODULE_TO_EXTRA.items():  # a library's own ImportError naming the extra
        if f"[{extra}]" in str(exc) or name.replace("_", "-") in str(exc):
            return str(MissingExtraError(extra))
    if module is not None and importlib.util.find_spec(module) is None:
        return (
            f"the package '{module}' is not installed; reinstall opcc_edu with its dependencies: pip install opcc_edu"
        )
    return f"{exc} (a broken installation? reinstall opcc_edu: pip install --force-reinstall opcc_edu)"


_OS_REMEDIES: dict[int, str] = {
    errno.EACCES: "choose a writable location (--out, or $OPCC_EDU_CACHE for the cache)",
    errno.EPERM: "choose a writable location (--out, or $OPCC_EDU_CACHE for the cache)",
    errno.EROFS: "the file system is read-only; choose another location (--out, or $OPCC_EDU_CACHE)",
    errno.ENOTDIR: "a part of the path is a file; choose another location (--out, or $OPCC_EDU_CACHE)",
    errno.EISDIR: "a directory stands where a file is expected; remove it or choose another location",
    errno.EEXIST: "a file stands where a directory is expected; remove it or choose another location",
    errno.ENOSPC: "free disk space or choose another location (--out, or $OPCC_EDU_CACHE)",
    errno.EDQUOT: "free disk space or choose another location (--out, or $OPCC_EDU_CACHE)",
}
_RESOURCE_ERRNOS = {errno.ENOSPC, errno.EDQUOT}


def _os_message(exc: OSError) -> str:
    if isinstance(exc, FileNotFoundError) and exc.filename is None:
        return str(exc)  # a library message that already says what to do
    reason = exc.strerror or str(exc)
    paths = " -> ".join(str(p) for p in (exc.filename, exc.filename2) if p is not None)
    text = f"{reason}: {paths}" if paths else reason
    remedy = _OS_REMEDIES.get(exc.errno or 0)
    return f"{text}; {remedy}" if remedy else text


def _is_out_of_memory(exc: BaseException) -> bool:
    return isinstance(exc, MemoryError) or type(exc).__name__ == "OutOfMemoryError"  # torch's CUDA OOM


def _memory_message(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else "not enough memory"
    return f"out of memory: {text}; try a smaller profile, --ensemble-size or --device cpu"


def describe(exc: BaseException) -> tuple[str, int] | None:
    """``(one-line message, exit status)`` for an error the user can act on; ``None`` for a bug.

    A bug (any other exception) keeps its traceback, which is what a bug report needs.
    """
    if isinstance(exc, KeyboardInterrupt):
        return "interrupted", EXIT_INTERRUPTED
    if _is_out_of_memory(exc):
        if isinstance(exc, ValueError):  # an up-front estimate whose message says what to change
            return _first_line(str(exc)), EXIT_RESOURCE
        return _memory_message(exc), EXIT_RESOURCE
    if isinstance(exc, UsageError):
        return _first_line(str(exc)), EXIT_USAGE
    if isinstance(exc, ImportError):
        return _import_message(exc), EXIT_USAGE
    if isinstance(exc, KeyError):
        return _first_line(str(exc.args[0]) if exc.args else "missing key"), EXIT_USAGE
    if isinstance(exc, OSError):
        return _first_line(_os_message(exc)), EXIT_RESOURCE if exc.errno in _RESOURCE_ERRNOS else EXIT_USAGE
    if isinstance(exc, ValueError):
        return _first_line(str(exc)), EXIT_USAGE
    return None


def _first_line(text: str) -> str:
    """``text`` on one line (a multi-line message is joined with '; ')."""
    lines = [line.strip() for line in str(text).splitlines() if line.strip()]
    return "; ".join(lines) if lines else "failed"
