"""The on-disk cache of generated datasets.

Datasets live under ``cache_dir("datasets")`` -- ``$OPCC_EDU_CACHE/datasets`` when that variable
is set, else ``~/.cache/opcc_edu/datasets`` -- one folder per environment, one ``.npz`` file per
dataset named ``<name>__seed<seed>__n<size>__<stream id>.npz``. The stream id hashes the
recipe's parameters, the seed, the data-format version and, for policy data, the behaviour
weights, so a changed recipe or retrained policy never reuses stale data.

Files are written with :func:`opcc_edu.io.save_npz` (temporary file + rename, SHA-256 sidecar
committed first; temporary files of killed writers are removed by the next write in the
folder). A file without a valid checksum (a missing sidecar included), that cannot be parsed,
or that does not hold what its name promises is deleted and regenerated, with a warning --
never used. ``load_dataset(..., cache=False)`` neither reads nor writes this cache.
"""

from __future__ import annotations

import dataclasses
import json
import re
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from .. import __version__
from ..envs import EnvSpec
from ..io import CorruptFileError, load_npz, remove_stale_temp_files, save_npz
from ..utils import cache_dir
from .format import INFO_KEYS, summarize_dataset, take_prefix, validate_dataset
from .recipes import DATA_FORMAT_VERSION, DatasetRecipe

_FILE_RE = re.compile(r"^(?P<name>[a-z0-9-]+)__seed(?P<seed>\d+)__n(?P<size>\d+)__(?P<stream>[0-9a-f]+)\.npz$")


def dataset_cache_dir(env_name: str | None = None, create: bool = True) -> Path:
    """The datasets cache folder (of one environment, if given)."""
    parts = ("datasets",) if env_name is None else ("datasets", env_name)
    return cache_dir(*parts, create=create)


def cache_path(recipe: DatasetRecipe, seed: int, size: int, stream: str) -> Path:
    """The cache file of one dataset."""
    return dataset_cache_dir(recipe.env_name) / f"{recipe.name}__seed{int(seed)}__n{int(size)}__{stream}.npz"


def _remove(path: Path) -> None:
    for p in (path, path.with_name(path.name + ".sha256")):
        p.unlink(missing_ok=True)


def read_cached(path: Path, env_name: str | EnvSpec, size: int, stream: str) -> dict[str, np.ndarray] | None:
    """Load a cached dataset, or ``None`` when it is absent or unusable (then it is deleted).

    A file is usable when its checksum matches, it parses, its metadata names the expected
    stream, size and format version, its arrays pass :func:`validate_dataset`, and it holds
    the simulator states ``infos/qpos`` and ``infos/qvel`` (a medium-replay file written before
    the replay recorded them has the same transitions and stream id, but not the states: it is
    regenerated with them).
    """
    if not path.exists():
        return None
    try:
        data, meta = load_npz(path)
        if meta.get("format_version") != DATA_FORMAT_VERSION or meta.get("stream_id") != stream:
            raise CorruptFileError(f"{path}: metadata does not match the requested recipe")
        if validate_dataset(data, env_name) != size or meta.get("size") != size:
            raise CorruptFileError(f"{path}: holds a different number of transitions than {size}")
        missing = [key for key in INFO_KEYS if key not in data]
        if missing:
            raise CorruptFileError(f"{path}: records no simulator states ({', '.join(missing)})")
    except (CorruptFileError, ValueError, OSError, KeyError) as exc:
        warnings.warn(f"discarding unusable cached dataset ({exc}); it will be regenerated", stacklevel=3)
        _remove(path)
        return None
    return data


def write_cached(
    path: Path, data: dict[str, np.ndarray], recipe: DatasetRecipe, seed: int, stream: str, **extra
) -> Path:
    """Store a dataset atomically with its checksum and metadata (recipe, summary, versions, ``extra``)."""
    size = int(data["observations"].shape[0])
    metadata: dict[str, Any] = {
        "format_version": DATA_FORMAT_VERSION,
        "package_version": __version__,
        "env_name": recipe.env_name,
        "name": recipe.name,
        "seed": int(seed),
        "size": size,
        "stream_id": stream,
        "recipe": recipe.to_dict(),
        "summary": summarize_dataset(data).as_dict(),
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        **extra,
    }
    return save_npz(path, data, metadata)


def find_prefix_source(recipe: DatasetRecipe, seed: int, size: int, stream: str) -> Path | None:
    """A cached dataset of the same stream with more than ``size`` transitions (smallest first).

    Only meaningful for recipes whose smaller datasets are prefixes of larger ones (mazes).
    """
    folder = dataset_cache_dir(recipe.env_name)
    best: tuple[int, Path] | None = None
    for path in folder.glob(f"*__seed{int(seed)}__n*__{stream}.npz"):
        match = _FILE_RE.match(path.name)
        if match and int(match["size"]) > size and (best is None or int(match["size"]) < best[0]):
            best = (int(match["size"]), path)
    return None if best is None else best[1]


def prefix_from_cache(recipe: DatasetRecipe, seed: int, size: int, stream: str) -> dict[str, np.ndarray] | None:
    """Cut a maze dataset from a larger cached one of the same stream, if there is a usable one."""
    source = find_prefix_source(recipe, seed, size, stream)
    if source is None:
        return None
    match = _FILE_RE.match(source.name)
    data = read_cached(source, recipe.env_name, int(match["size"]), stream)
    return None if data is None else take_prefix(data, size)


@dataclasses.dataclass(frozen=True)
class CachedDataset:
    """One cached dataset file, as listed by :func:`list_cached`."""

    path: Path
    env_name: str
    name: str
    seed: int
    size: int
    megabytes: float
    summary: dict[str, Any] | None
    """Summary statistics stored at write time (``None`` if unreadable)."""


def _read_metadata(path: Path) -> dict[str, Any] | None:
    # Reads only the small metadata member of the archive; the checksum is verified on load.
    try:
        with np.load(path, allow_pickle=False) as archive:
            return json.loads(str(archive["__metadata__"]))
    except Exception:
        return None


def list_cached(env_name: str | None = None) -> list[CachedDataset]:
    """Every cached dataset (of one environment, if given), sorted by environment, name, size."""
    root = dataset_cache_dir(create=False)
    if not root.exists():
        return []
    folders = [root / env_name] if env_name else sorted(p for p in root.iterdir() if p.is_dir())
    out = []
    for folder in folders:
        for path in sorted(folder.glob("*.npz")):
            match = _FILE_RE.match(path.name)
            if not match:
                continue
            meta = _read_metadata(path)
            out.append(
                CachedDataset(
                    path=path,
                    env_name=folder.name,
                    name=match["name"],
                    seed=int(match["seed"]),
                    size=int(match["size"]),
                    megabytes=path.stat().st_size / 2**20,
                    summary=None if meta is None else meta.get("summary"),
                )
            )
    return sorted(out, key=lambda c: (c.env_name, c.name, c.size, c.seed))


def clear_cache(env_name: str | None = None) -> int:
    """Delete cached datasets (of one environment, if given), leftover temporary files included.

    Temporary files of writers that are still running are kept
    (:func:`opcc_edu.io.remove_stale_temp_files`).

    Returns:
        Number of dataset files removed.
    """
    root = dataset_cache_dir(create=False)
    if not root.exists():
        return 0
    folders = [root / env_name] if env_name else [p for p in root.iterdir() if p.is_dir()]
    removed = 0
    for folder in folders:
        for path in folder.glob("*.npz"):
            _remove(path)
            removed += 1
        remove_stale_temp_files(folder)
    return removed
