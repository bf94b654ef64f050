"""Safe storage: atomic writes, checksums that cannot be skipped, and no pickle anywhere.

Arrays go to ``.npz`` files (``allow_pickle=False``), model weights to safetensors, text to
UTF-8 files.

**Writing.** Every file is written by one protocol:

1. Temporary files that killed writers left in the destination folder are removed: a
   ``.*.tmp`` file whose name records a writer process of this machine that no longer exists,
   or (written elsewhere, or named otherwise) one untouched for over a minute. A live writer's
   file is left alone (:func:`remove_stale_temp_files`).
2. The bytes go to a new file beside the destination, ``.<name>.<pid>.<host>.<token>.tmp``,
   created the way ``open()`` creates files -- mode ``0o666`` less the umask -- or with the
   destination's mode when a file is rewritten; they are flushed to disk.
3. For ``.npz`` and safetensors files, the checksum sidecar ``<file>.sha256`` (the hex SHA-256
   of the new bytes) is committed first, by rename,
4. then the data, by rename over the destination.

A crash between two steps leaves the old pair (both valid), a sidecar naming bytes that the
data file does not hold (neither valid: the file fails its check and is treated as missing),
or the new pair -- never a file that passes as valid without having been checked. A write
that fails (disk full, read-only folder) raises the same ``OSError`` class with a message
naming the destination (and ``$OPCC_EDU_CACHE`` for a file in the cache) and leaves no
partial file behind.

**Reading.** A file's sidecar is required: a missing or mismatching one raises
:class:`CorruptFileError`, which the dataset and ensemble caches treat as a missing entry
(they regenerate it and warn). Shipped assets -- files under the package's ``assets`` folder
-- are checked against ``assets/MANIFEST.json`` instead, which lists the SHA-256 of every
asset file; deleting a sidecar cannot skip that check, and a modified asset raises
:class:`AssetIntegrityError` naming the file and how to restore it. Writing an asset through
this module records its new digest in the manifest (so ``opcc-edu build`` keeps it current);
``python scripts/update_manifest.py`` regenerates the whole manifest (:mod:`opcc_edu.build.manifest`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import secrets
import socket
import stat
import struct
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import IO, Any

import numpy as np

from .utils import cache_hint, ensure_directory, restate_os_error

ASSETS_DIR = Path(__file__).resolve().parent / "assets"
"""The package's shipped assets (policies, behaviour policies, query sets, reference tables)."""
MANIFEST_NAME = "MANIFEST.json"
"""File under :data:`ASSETS_DIR` that lists the SHA-256 of every asset file."""
STALE_TEMP_SECONDS = 60.0
"""Age after which another machine's (or an unnamed writer's) temporary file counts as left over."""

_HOST = hashlib.sha256(socket.gethostname().encode()).hexdigest()[:8]
_TEMP_RE = re.compile(r"^\..+\.(?P<pid>\d+)\.(?P<host>[0-9a-f]{8})\.[0-9a-f]{8}\.tmp$")
_RESTORE_HINT = (
    "reinstall the package (pip install --force-reinstall opcc_edu) or, in a source checkout, restore it "
    "with `git checkout -- {rel}`; if it was rebuilt on purpose, run `python scripts/update_manifest.py`"
)


class CorruptFileError(ValueError):
    """A stored file is missing its checksum, fails it, or cannot be parsed."""


class AssetIntegrityError(CorruptFileError):
    """A shipped asset does not match the package's manifest (or the manifest is unusable)."""


def sha256_file(path: str | os.PathLike) -> str:
    """Hex SHA-256 digest of a file's bytes."""
    with open(path, "rb") as handle:
        return _sha256_handle(handle)


def _sha256_handle(handle: IO[bytes]) -> str:
    digest = hashlib.sha256()
    for block in iter(lambda: handle.read(1 << 20), b""):
        digest.update(block)
    return digest.hexdigest()


def _checksum_path(path: Path) -> Path:
    return path.with_name(path.name + ".sha256")


# --------------------------------------------------------------------------------------------
# The asset manifest
# --------------------------------------------------------------------------------------------
def assets_root() -> Path:
    return Path(ASSETS_DIR)  # read at call time, so that a test can point it at a copy


def is_shipped_asset(path: str | os.PathLike) -> bool:
    """Whether ``path`` lies under the package's assets folder (:data:`ASSETS_DIR`)."""
    try:
        Path(path).resolve().relative_to(assets_root().resolve())
    except ValueError:
        return False
    return True


def _source_relative(path: Path) -> str:
    """``path`` relative to the folder holding the package (a source checkout's root), if inside."""
    try:
        return Path(path).resolve().relative_to(assets_root().resolve().parent.parent).as_posix()
    except ValueError:
        return str(path)


def is_asset_file(relative: Path) -> bool:
    """Whether a path relative to the assets folder is an asset (not a sidecar, the manifest or hidden)."""
    name = relative.name
    hidden = any(part.startswith(".") or part == "__pycache__" for part in relative.parts)
    return not hidden and not name.endswith(".sha256") and relative.as_posix() != MANIFEST_NAME


def read_manifest(root: str | os.PathLike | None = None) -> dict[str, str]:
    """The recorded ``{relative path: sha256}`` of the assets under ``root``.

    Raises:
        AssetIntegrityError: the manifest is missing or cannot be parsed.
    """
    path = (Path(root) if root is not None else assets_root()) / MANIFEST_NAME
    hint = _RESTORE_HINT.format(rel=_source_relative(path))
    try:
        files = json.loads(path.read_text(encoding="utf-8"))["files"]
    except FileNotFoundError:
        raise AssetIntegrityError(f"the asset manifest {path} is missing; {hint}") from None
    except (ValueError, KeyError, TypeError) as exc:
        raise AssetIntegrityError(f"the asset manifest {path} cannot be read ({exc}); {hint}") from exc
    return {str(key): str(value) for key, value in files.items()}


def manifest_text(files: Mapping[str, str]) -> str:
    payload = {
        "about": "SHA-256 of every shipped asset; regenerate with `python scripts/update_manifest.py`",
        "algorithm": "sha256",
        "files": dict(sorted(files.items())),
    }
    return json.dumps(payload, indent=1) + "\n"


def _check_asset_digest(path: Path, actual: str) -> None:
    root = assets_root().resolve()
    rel = path.resolve().relative_to(root).as_posix()
    expected = read_manifest(root).get(rel)
    hint = _RESTORE_HINT.format(rel=_source_relative(path))
    if expected is None:
        raise AssetIntegrityError(f"{path}: shipped asset not listed in {root / MANIFEST_NAME}; {hint}")
    if expected != actual:
        raise AssetIntegrityError(
            f"{path}: shipped asset was modified or damaged (sha256 {actual[:12]}..., manifest {expected[:12]}...); "
            f"{hint}"
        )


def read_asset_text(path: str | os.PathLike) -> str:
    """The UTF-8 text of a file (newlines translated, as by ``Path.read_text``), checked against
    the manifest first when it is a shipped asset (for the JSON and CSV assets, read as text).

    Raises:
        FileNotFoundError: no such file.
        AssetIntegrityError: a shipped asset that is not listed or differs from the manifest.
    """
    path = Path(path)
    data = path.read_bytes()  # one read: the bytes checked are the bytes returned
    if is_shipped_asset(path):
        _check_asset_digest(path, hashlib.sha256(data).hexdigest())
    return data.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")  # as Path.read_text does


def _record_asset(path: Path, digest: str) -> None:
    root = assets_root().resolve()
    rel = path.resolve().relative_to(root)
    if not is_asset_file(rel):
        return
    with FileLock(root):
        try:
            files = read_manifest(root)
        except AssetIntegrityError:
            files = {}
        files[rel.as_posix()] = digest
        atomic_write_text(root / MANIFEST_NAME, manifest_text(files))


# --------------------------------------------------------------------------------------------
# Locks
# --------------------------------------------------------------------------------------------
class FileLock:
    """An exclusive advisory lock on a file or folder (``fcntl.flock``; ``filelock`` where there is none).

    The one lock of the package: the results store's claims, the asset manifest, the policy
    table and the grader's sheet all take it. A lock file is created when missing; a folder is
    locked in place. Use it as a context manager (blocking), or call :meth:`acquire` with
    ``blocking=False`` to try once. Closing the descriptor releases the lock, so a killed holder
    never leaves it held.
    """

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        self._fd: int | None = None
        self._fallback: Any = None

    def acquire(self, blocking: bool = True) -> bool:
        """Take the lock; ``False`` when ``blocking`` is off and another process holds it."""
        try:
            import fcntl
        except ImportError:  # pragma: no cover - not POSIX
            import filelock

            target = self.path / ".lock" if self.path.is_dir() else self.path
            self._fallback = filelock.FileLock(str(target))
            try:
                self._fallback.acquire(timeout=-1 if blocking else 0)
            except filelock.Timeout:
                return False
            return True
        if self.path.is_dir():
            fd = os.open(self.path, os.O_RDONLY)
        else:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
        except BlockingIOError:
            os.close(fd)
            return False
        self._fd = fd
        return True

    def release(self) -> None:
        """Release the lock (a no-op when not held)."""
        if self._fallback is not None:  # pragma: no cover - not POSIX
            self._fallback.release()
            self._fallback = None
        elif self._fd is not None:
            os.close(self._fd)  # closing the descriptor releases the flock
            self._fd = None

    def __enter__(self) -> FileLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


@contextlib.contextmanager
def locked_json(path: str | os.PathLike, default: dict[str, Any], lock: str | os.PathLike) -> Iterator[dict[str, Any]]:
    """Read-modify-write the JSON file ``path`` under :class:`FileLock` ``lock``.

    Yields the parsed file (``default`` when it does not exist yet); the dict as the block leaves
    it is written back atomically, sorted and indented. Writers of several processes do not lose
    each other's changes.
    """
    path = Path(path)
    with FileLock(lock):
        data = json.loads(path.read_text()) if path.exists() else default
        yield data
        atomic_write_text(path, json.dumps(data, indent=1, sort_keys=True) + "\n")


# --------------------------------------------------------------------------------------------
# Atomic writes
# --------------------------------------------------------------------------------------------
def _pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale_temp_files(directory: str | os.PathLike, max_age: float = STALE_TEMP_SECONDS) -> int:
    """Delete temporary files that killed writers left in ``directory``; return how many.

    A ``.*.tmp`` file is left over when its name records a writer process of this machine that
    no longer exists, or -- written on another machine, or named otherwise -- when it has not
    been modified for ``max_age`` seconds. A file of a live writer on this machine is kept (a
    writer keeps touching its file, so another machine's live writer is kept too).
    """
    removed = 0
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return 0
    now = time.time()
    for entry in entries:
        name = entry.name
        if not (name.startswith(".") and name.endswith(".tmp")):
            continue
        try:
            if not entry.is_file(follow_symlinks=False):
                continue
            age = now - entry.stat(follow_symlinks=False).st_mtime
        except OSError:
            continue
        match = _TEMP_RE.match(name)
        if match is not None and match["host"] == _HOST:
            stale = not _pid_alive(int(match["pid"])) or age > 86400.0  # a day: the pid was reused
        else:
            stale = age > max_age
        if stale:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(entry.path)
                removed += 1
    return removed


def _write_error(path: Path, exc: BaseException) -> BaseException:
    if not isinstance(exc, OSError) or str(path) in str(exc):
        return exc
    return restate_os_error(exc, f"cannot write {path}: {exc.strerror or exc}{cache_hint(path)}")


def _create_temp(path: Path) -> tuple[Path, int]:
    """A new temporary file beside ``path``: mode of ``open()`` (or of the file it replaces)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{_HOST}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666)
    try:
        mode = stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        pass
    else:
        try:
            os.chmod(tmp, mode)
        except OSError:
            os.close(fd)
            os.unlink(tmp)
            raise
    return tmp, fd


def write_all(fd: int, data: bytes) -> None:
    """Write every byte of ``data`` to the descriptor ``fd`` (``os.write`` may write fewer)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def fsync_folder(folder: str | os.PathLike) -> None:
    """Flush a folder's entries to disk, so a rename in it survives a crash (best effort)."""
    with contextlib.suppress(OSError, AttributeError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _atomic_write(path: Path, write: Callable[[IO[bytes]], None], sidecar: bool = False) -> Path:
    """Write ``path`` by the protocol of the module docstring; ``sidecar``: add ``<file>.sha256``."""
    path = Path(path)
    try:
        ensure_directory(path.parent)
    except NotADirectoryError as exc:
        raise restate_os_error(exc, f"cannot write {path}: {exc.strerror}") from None
    remove_stale_temp_files(path.parent)
    try:
        tmp, fd = _create_temp(path)
    except OSError as exc:
        raise _write_error(path, exc) from exc
    try:
        with open(fd, "w+b") as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
            handle.seek(0)
            digest = _sha256_handle(handle)
        if sidecar:
            _atomic_write(_checksum_path(path), lambda h: h.write((digest + "\n").encode()))
        os.replace(tmp, path)
    except BaseException as exc:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        error = _write_error(path, exc)
        if error is exc:
            raise
        raise error from exc
    fsync_folder(path.parent)
    if is_shipped_asset(path) and path.name != MANIFEST_NAME:
        _record_asset(path, digest)
    return path


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    """Write bytes to ``path`` atomically (no sidecar)."""
    return _atomic_write(Path(path), lambda handle: write_all(handle.fileno(), data))


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    """Write text to ``path`` atomically (UTF-8, no sidecar)."""
    return atomic_write_bytes(path, text.encode("utf-8"))


# --------------------------------------------------------------------------------------------
# Checked reads
# --------------------------------------------------------------------------------------------
def _check_digest(path: Path, actual: str, verify: bool) -> None:
    """Raise unless ``actual`` is the recorded digest (manifest for assets, else sidecar)."""
    if is_shipped_asset(path):
        _check_asset_digest(path, actual)
        return
    if not verify:
        return
    check = _checksum_path(path)
    try:
        expected = check.read_text(encoding="utf-8").split()
    except FileNotFoundError:
        raise CorruptFileError(
            f"{path}: checksum file {check.name} is missing (an interrupted write, or a file copied without it); "
            "the file is not used"
        ) from None
    if not expected or expected[0] != actual:
        stored = expected[0][:12] if expected else "nothing"
        raise CorruptFileError(f"{path}: checksum mismatch (stored {stored}..., file {actual[:12]}...)")


def save_npz(path: str | os.PathLike, arrays: Mapping[str, Any], metadata: Mapping[str, Any] | None = None) -> Path:
    """Save arrays (and optional JSON metadata) to ``path`` atomically, with a checksum file.

    Args:
        path: destination ``.npz`` file.
        arrays: name -> array-like; object arrays are refused (they would need pickle).
        metadata: JSON-serialisable mapping stored under the reserved key ``__metadata__``.

    Returns:
        The path written.
    """
    path = Path(path)
    payload: dict[str, np.ndarray] = {}
    for key, value in arrays.items():
        arr = np.asarray(value)
        if arr.dtype == object:
            raise ValueError(f"arrays[{key!r}] has dtype object, which cannot be stored without pickle")
        payload[key] = arr
    if metadata is not None:
        payload["__metadata__"] = np.asarray(json.dumps(dict(metadata), sort_keys=True))
    return _atomic_write(path, lambda handle: np.savez_compressed(handle, **payload), sidecar=True)


def load_npz(path: str | os.PathLike, verify: bool = True) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """Load a file written by :func:`save_npz`.

    Args:
        path: the ``.npz`` file.
        verify: check the SHA-256 sidecar first (``False`` reads a damaged file for
            diagnosis). A shipped asset is checked against the manifest either way.

    Returns:
        ``(arrays, metadata)``.

    Raises:
        FileNotFoundError: no such file.
        CorruptFileError: checksum missing or wrong, or the file cannot be read
            (:class:`AssetIntegrityError` for a shipped asset).
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(path)
    with open(path, "rb") as handle:  # one open file: the bytes checked are the bytes parsed
        _check_digest(path, _sha256_handle(handle), verify)
        handle.seek(0)
        try:
            with np.load(handle, allow_pickle=False) as data:
                arrays = {key: data[key] for key in data.files}
        except Exception as exc:  # zipfile / format errors
            raise CorruptFileError(f"{path}: cannot be read ({exc})") from exc
    metadata: dict[str, Any] = {}
    if "__metadata__" in arrays:
        metadata = json.loads(str(arrays.pop("__metadata__")))
    return arrays, metadata


def save_tensors(
    path: str | os.PathLike, tensors: Mapping[str, Any], metadata: Mapping[str, Any] | None = None
) -> Path:
    """Save torch tensors to a safetensors file atomically, with a checksum file.

    ``metadata`` (JSON-serialisable) is stored as a JSON string under the header key ``json``.
    """
    from safetensors.torch import save

    tensors = {key: value.detach().cpu().contiguous() for key, value in tensors.items()}
    data = save(tensors, metadata={"json": json.dumps(dict(metadata or {}), sort_keys=True)})
    return _atomic_write(Path(path), lambda handle: handle.write(data), sidecar=True)


def _safetensors_metadata(data: bytes) -> dict[str, str]:
    (length,) = struct.unpack("<Q", data[:8])
    return json.loads(data[8 : 8 + length]).get("__metadata__") or {}


def load_tensors(
    path: str | os.PathLike, verify: bool = True, device: str = "cpu"
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Load a safetensors file written by :func:`save_tensors`: ``(tensors, metadata)``.

    Args:
        path: the ``.safetensors`` file.
        verify: as for :func:`load_npz`.
        device: torch device of the returned tensors.

    Raises:
        FileNotFoundError: no such file.
        CorruptFileError: checksum missing or wrong, or the file cannot be read.
    """
    from safetensors.torch import load

    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(path)
    data = path.read_bytes()  # one read: the bytes checked are the bytes parsed
    _check_digest(path, hashlib.sha256(data).hexdigest(), verify)
    try:
        tensors = load(data)
        meta = _safetensors_metadata(data)
    except Exception as exc:
        raise CorruptFileError(f"{path}: cannot be read ({exc})") from exc
    if str(device) != "cpu":
        tensors = {key: value.to(device) for key, value in tensors.items()}
    return tensors, json.loads(meta.get("json", "{}"))
