"""The asset manifest, built: the SHA-256 of every shipped file, recorded or compared.

Reading assets checks them against the manifest (:mod:`opcc_edu.io`); writing an asset through
the package updates its entry. These functions rebuild the whole manifest and list what differs
(``python scripts/update_manifest.py [--check]``).
"""

from __future__ import annotations

import os
from pathlib import Path

from ..io import (
    MANIFEST_NAME,
    AssetIntegrityError,
    FileLock,
    assets_root,
    atomic_write_text,
    is_asset_file,
    manifest_text,
    read_manifest,
    sha256_file,
)


def asset_files(root: str | os.PathLike | None = None) -> list[str]:
    """The files a manifest of ``root`` (default :data:`ASSETS_DIR`) must list, as sorted POSIX
    paths relative to it: every file except ``.sha256`` sidecars, the manifest, hidden files."""
    root = Path(root) if root is not None else assets_root()
    files = (p.relative_to(root) for p in root.rglob("*") if p.is_file())
    return sorted(p.as_posix() for p in files if is_asset_file(p))


def compute_manifest(root: str | os.PathLike | None = None) -> dict[str, str]:
    """``{relative path: sha256}`` of every file of :func:`asset_files` as it is on disk now."""
    root = Path(root) if root is not None else assets_root()
    return {rel: sha256_file(root / rel) for rel in asset_files(root)}


def write_manifest(root: str | os.PathLike | None = None) -> Path:
    """Record the current digest of every asset file under ``root`` (default
    :data:`ASSETS_DIR`) in its ``MANIFEST.json``, dropping entries of files that are gone."""
    root = Path(root) if root is not None else assets_root()
    with FileLock(root):
        return atomic_write_text(root / MANIFEST_NAME, manifest_text(compute_manifest(root)))


def manifest_problems(root: str | os.PathLike | None = None) -> list[str]:
    """What differs between the manifest of ``root`` and the files: one line per problem
    (an unlisted file, a listed file that is missing, a digest that does not match)."""
    root = Path(root) if root is not None else assets_root()
    try:
        recorded = read_manifest(root)
    except AssetIntegrityError as exc:
        return [str(exc)]
    actual = compute_manifest(root)
    problems = [f"{rel}: not listed in the manifest" for rel in sorted(set(actual) - set(recorded))]
    problems += [f"{rel}: listed in the manifest but missing" for rel in sorted(set(recorded) - set(actual))]
    problems += [
        f"{rel}: sha256 {actual[rel]} differs from the manifest's {recorded[rel]}"
        for rel in sorted(set(actual) & set(recorded))
        if actual[rel] != recorded[rel]
    ]
    return problems
