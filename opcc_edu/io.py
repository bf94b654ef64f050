"""Safe storage: atomic writes, checksums, and no pickle anywhere.

Arrays go to ``.npz`` files (``allow_pickle=False``) and model weights to safetensors. A
file is first written next to its destination under a temporary name and then renamed, so a
reader never sees a half-written file; a SHA-256 checksum stored beside it (``<file>.sha256``)
detects a file that was truncated or altered later.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np


class CorruptFileError(ValueError):
    """A stored file is missing its checksum, fails it, or cannot be parsed."""


def sha256_file(path: str | os.PathLike) -> str:
    """Hex SHA-256 digest of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _checksum_path(path: Path) -> Path:
    return path.with_name(path.name + ".sha256")


def _atomic_write(path: Path, write) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    """Write text to ``path`` atomically."""
    path = Path(path)

    def write(tmp: str) -> None:
        with open(tmp, "w", encoding="utf-8") as handle:
            handle.write(text)

    _atomic_write(path, write)
    return path


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

    def write(tmp: str) -> None:
        with open(tmp, "wb") as handle:
            np.savez_compressed(handle, **payload)

    _atomic_write(path, write)
    atomic_write_text(_checksum_path(path), sha256_file(path) + "\n")
    return path


def load_npz(path: str | os.PathLike, verify: bool = True) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """Load a file written by :func:`save_npz`.

    Args:
        path: the ``.npz`` file.
        verify: check the stored SHA-256 checksum first.

    Returns:
        ``(arrays, metadata)``.

    Raises:
        FileNotFoundError: no such file.
        CorruptFileError: checksum missing or wrong, or the file cannot be read.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(path)
    if verify:
        check = _checksum_path(path)
        if not check.exists():
            raise CorruptFileError(f"{path}: checksum file {check.name} is missing")
        expected = check.read_text().strip()
        actual = sha256_file(path)
        if expected != actual:
            raise CorruptFileError(f"{path}: checksum mismatch (stored {expected[:12]}..., file {actual[:12]}...)")
    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {key: data[key] for key in data.files}
    except Exception as exc:  # zipfile / format errors
        raise CorruptFileError(f"{path}: cannot be read ({exc})") from exc
    metadata: dict[str, Any] = {}
    if "__metadata__" in arrays:
        metadata = json.loads(str(arrays.pop("__metadata__")))
    return arrays, metadata


def save_tensors(path: str | os.PathLike, tensors: Mapping[str, Any], metadata: Mapping[str, Any] | None = None) -> Path:
    """Save torch tensors to a safetensors file atomically (metadata as a JSON string)."""
    from safetensors.torch import save_file

    path = Path(path)
    tensors = {key: value.detach().cpu().contiguous() for key, value in tensors.items()}
    meta = {"json": json.dumps(dict(metadata or {}), sort_keys=True)}
    _atomic_write(path, lambda tmp: save_file(tensors, tmp, metadata=meta))
    atomic_write_text(_checksum_path(path), sha256_file(path) + "\n")
    return path


def load_tensors(path: str | os.PathLike, verify: bool = True, device: str = "cpu"):
    """Load a safetensors file written by :func:`save_tensors`: ``(tensors, metadata)``."""
    from safetensors import safe_open

    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(path)
    if verify:
        check = _checksum_path(path)
        if check.exists() and check.read_text().strip() != sha256_file(path):
            raise CorruptFileError(f"{path}: checksum mismatch")
    try:
        with safe_open(str(path), framework="pt", device=str(device)) as handle:
            tensors = {key: handle.get_tensor(key) for key in handle.keys()}
            meta = handle.metadata() or {}
    except Exception as exc:
        raise CorruptFileError(f"{path}: cannot be read ({exc})") from exc
    return tensors, json.loads(meta.get("json", "{}"))
