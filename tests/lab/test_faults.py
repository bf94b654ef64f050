"""Faults of storage: tampered, half-written and unwritable files are never used silently."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

import opcc_edu.io as io_module
from opcc_edu.io import AssetIntegrityError, CorruptFileError, load_npz, load_tensors, save_npz, save_tensors
from opcc_edu.utils import CACHE_ENV_VAR, cache_dir, cache_root


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv(CACHE_ENV_VAR, str(tmp_path / "cache"))
    return tmp_path / "cache"


def _sidecar(path: Path) -> Path:
    return path.with_name(path.name + ".sha256")


def _flip_last_byte(path: Path) -> None:
    raw = bytearray(path.read_bytes())
    raw[-1] ^= 0x40
    path.write_bytes(bytes(raw))


# --------------------------------------------------------------------------------------------
# A cached ensemble whose weights were edited is retrained, never used
# --------------------------------------------------------------------------------------------
def _tiny_training_set(n: int = 256) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    obs = rng.normal(size=(n, 4)).astype(np.float32)
    return {
        "observations": obs,
        "actions": rng.uniform(-1, 1, (n, 2)).astype(np.float32),
        "rewards": rng.random(n).astype(np.float32),
        "next_observations": obs + 0.1,
        "terminals": np.zeros(n, dtype=bool),
    }


@pytest.mark.parametrize("keep_sidecar", [True, False])
def test_tampered_cached_ensemble_is_retrained(cache, keep_sidecar):
    from opcc_edu.baselines import EnsembleConfig, get_or_train_ensemble

    config = EnsembleConfig(ensemble_size=2, hidden_sizes=(8,), train_steps=3, batch_size=32)
    data = _tiny_training_set()

    def get():
        return get_or_train_ensemble("maze2d-open", "1k", config, device="cpu", progress=False, dataset=data)

    first = get()
    path = Path(first.info["path"])
    assert get().info["cache_hit"]  # the control: an intact file is reused
    _flip_last_byte(path)
    if not keep_sidecar:
        _sidecar(path).unlink()
    edited, _ = load_tensors(path, verify=False)
    with pytest.warns(UserWarning, match="unusable"):
        again = get()
    assert not again.info["cache_hit"]
    trained = first.state_dict()
    assert any(not torch.equal(edited[key], trained[key]) for key in trained)
    for key, value in again.state_dict().items():
        assert torch.equal(value, trained[key])
    load_tensors(path)  # stored again, with a valid checksum


# --------------------------------------------------------------------------------------------
# A modified shipped asset is an error that says how to restore it
# --------------------------------------------------------------------------------------------
@pytest.fixture
def shipped_copy(tmp_path, monkeypatch):
    """A copy of some shipped assets, with the manifest, standing in for the package's own."""
    root = tmp_path / "opcc_edu" / "assets"
    shipped = (
        "MANIFEST.json",
        "paper_results.csv",
        "policies/maze2d-open/level2.safetensors",
        "queries/paper/maze2d-open.npz",
    )
    for rel in shipped:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(io_module.ASSETS_DIR / rel, root / rel)
        if (io_module.ASSETS_DIR / (rel + ".sha256")).exists():
            shutil.copy2(io_module.ASSETS_DIR / (rel + ".sha256"), root / (rel + ".sha256"))
    monkeypatch.setattr(io_module, "ASSETS_DIR", root)
    return root


def _load_policy(root: Path):
    from opcc_edu.policies import load_policy

    return load_policy("maze2d-open", 2, assets_dir=root)


def _load_queries(root: Path):
    from opcc_edu.queries import QuerySet

    return QuerySet.load(root / "queries" / "paper" / "maze2d-open.npz")


@pytest.mark.parametrize(
    ("rel", "load"),
    [("policies/maze2d-open/level2.safetensors", _load_policy), ("queries/paper/maze2d-open.npz", _load_queries)],
)
@pytest.mark.parametrize("keep_sidecar", [True, False])
def test_tampered_shipped_asset_is_a_clear_error(shipped_copy, rel, load, keep_sidecar):
    load(shipped_copy)  # the control: the intact copy loads
    path = shipped_copy / rel
    _flip_last_byte(path)
    if keep_sidecar:
        _sidecar(path).write_text(io_module.sha256_file(path) + "\n")  # even a matching sidecar
    else:
        _sidecar(path).unlink()
    with pytest.raises(AssetIntegrityError, match="modified or damaged") as info:
        load(shipped_copy)
    message = str(info.value)
    assert str(path) in message and "git checkout -- opcc_edu/assets/" + rel in message
    assert "scripts/update_manifest.py" in message


def test_tampered_shipped_table_is_a_clear_error(shipped_copy):
    from opcc_edu.io import read_asset_text

    table = shipped_copy / "paper_results.csv"
    original = table.read_text()
    assert read_asset_text(table) == original  # the control
    table.write_text(original.replace("0.", "9.", 1))
    with pytest.raises(AssetIntegrityError, match="paper_results.csv: shipped asset was modified"):
        read_asset_text(table)


def test_shipped_asset_without_a_manifest_entry_is_refused(shipped_copy):
    (shipped_copy / "MANIFEST.json").write_text('{"files": {}}\n')
    with pytest.raises(AssetIntegrityError, match="not listed"):
        _load_queries(shipped_copy)
    (shipped_copy / "MANIFEST.json").unlink()
    with pytest.raises(AssetIntegrityError, match="manifest .* is missing"):
        _load_queries(shipped_copy)


def test_writing_an_asset_records_it_in_the_manifest(shipped_copy):
    path = save_npz(shipped_copy / "queries" / "extra.npz", {"x": np.arange(3)})
    assert io_module.read_manifest()["queries/extra.npz"] == io_module.sha256_file(path)
    assert load_npz(path)[0]["x"].tolist() == [0, 1, 2]


# --------------------------------------------------------------------------------------------
# Interrupted writes
# --------------------------------------------------------------------------------------------
def test_data_written_without_its_checksum_is_treated_as_missing(cache):
    from opcc_edu import datasets as ds

    expected = ds.load_dataset("maze2d-open", "1k", progress=False)
    path = next(ds.dataset_cache_dir("maze2d-open").glob("*.npz"))
    _sidecar(path).unlink()  # a writer killed after the data, before its checksum
    with pytest.warns(UserWarning, match=r"discarding unusable cached dataset .*checksum file .* is missing"):
        again = ds.load_dataset("maze2d-open", "1k", progress=False)
    for key in expected:
        np.testing.assert_array_equal(again[key], expected[key])
    assert _sidecar(path).exists()
    load_npz(path)


def test_a_crash_between_checksum_and_data_leaves_neither_valid(tmp_path, monkeypatch):
    path = save_npz(tmp_path / "x.npz", {"a": np.zeros(3)})
    real_replace = os.replace

    def crash_on_data(src, dst):
        if Path(dst) == path:
            raise KeyboardInterrupt  # killed after the sidecar was committed
        real_replace(src, dst)

    monkeypatch.setattr(io_module.os, "replace", crash_on_data)
    with pytest.raises(KeyboardInterrupt):
        save_npz(path, {"a": np.ones(3)})
    monkeypatch.undo()
    with pytest.raises(CorruptFileError, match="checksum mismatch"):
        load_npz(path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.npz", "x.npz.sha256"]


def test_a_killed_writers_temporary_file_is_removed_by_the_next_write(tmp_path):
    script = (
        "import os, sys; from pathlib import Path; from opcc_edu.io import _create_temp; "
        "tmp, fd = _create_temp(Path(sys.argv[1])); os.write(fd, b'half'); os._exit(0)"
    )
    subprocess.run([sys.executable, "-c", script, str(tmp_path / "x.npz")], check=True)
    (left,) = tmp_path.glob(".x.npz.*.tmp")
    save_npz(tmp_path / "y.npz", {"a": np.zeros(2)})
    assert not left.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["y.npz", "y.npz.sha256"]


# --------------------------------------------------------------------------------------------
# Unwritable destinations
# --------------------------------------------------------------------------------------------
def test_disk_full_is_a_clear_error_and_leaves_no_partial_file(tmp_path, monkeypatch):
    def fill_the_disk(handle, **arrays):
        handle.write(b"PK\x03\x04 partial")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(io_module.np, "savez_compressed", fill_the_disk)
    target = tmp_path / "data" / "x.npz"
    with pytest.raises(OSError, match="No space left on device") as info:
        save_npz(target, {"a": np.zeros(3)})
    assert info.value.errno == errno.ENOSPC and f"cannot write {target}" in str(info.value)
    assert list(target.parent.iterdir()) == []


def test_disk_full_while_writing_weights(tmp_path, monkeypatch):
    def full(fd: int) -> None:  # a network file system reports a full disk when flushing
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(io_module.os, "fsync", full)
    target = tmp_path / "m.safetensors"
    with pytest.raises(OSError, match=f"cannot write {target}: No space left on device"):
        save_tensors(target, {"w": torch.zeros(2)})
    monkeypatch.undo()
    assert list(tmp_path.iterdir()) == []


def _make_read_only(folder: Path, monkeypatch) -> None:
    """Make ``folder`` unwritable: by its mode, and (the superuser ignores modes) by refusing
    to create anything in it."""
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o555)
    if os.geteuid() != 0:
        return
    real_open, real_mkdir = os.open, Path.mkdir

    def inside(path) -> bool:
        return Path(os.path.abspath(path)).parent == folder

    def refusing_open(path, flags, *args, **kwargs):
        if flags & os.O_CREAT and inside(path):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES))
        return real_open(path, flags, *args, **kwargs)

    def refusing_mkdir(self, *args, **kwargs):
        if inside(self) and not self.exists():
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES))
        return real_mkdir(self, *args, **kwargs)

    monkeypatch.setattr(io_module.os, "open", refusing_open)
    monkeypatch.setattr(Path, "mkdir", refusing_mkdir)


def test_read_only_cache_names_the_path_and_the_variable(cache, monkeypatch):
    cache.mkdir()
    (cache / "datasets").mkdir()
    try:
        _make_read_only(cache, monkeypatch)
        with pytest.raises(PermissionError, match=rf"cannot create folder {cache / 'ensembles'}.*\${CACHE_ENV_VAR}"):
            cache_dir("ensembles")
        _make_read_only(cache / "datasets", monkeypatch)
        target = cache / "datasets" / "x.npz"
        with pytest.raises(PermissionError, match=rf"cannot write {target}.*\${CACHE_ENV_VAR}={cache}"):
            save_npz(target, {"a": np.zeros(3)})
    finally:
        monkeypatch.undo()
        (cache / "datasets").chmod(0o755)
        cache.chmod(0o755)
    assert sorted(p.name for p in cache.iterdir()) == ["datasets"]
    assert list((cache / "datasets").iterdir()) == []


def test_cache_path_that_is_a_file(tmp_path, monkeypatch):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("x")
    monkeypatch.setenv(CACHE_ENV_VAR, str(blocker))
    assert cache_root() == blocker
    with pytest.raises(NotADirectoryError, match=rf"{blocker} is a file, not a folder.*\${CACHE_ENV_VAR}"):
        cache_dir("datasets")
    with pytest.raises(NotADirectoryError, match=rf"cannot write {blocker}/datasets/x.npz.*is a file"):
        save_npz(blocker / "datasets" / "x.npz", {"a": np.zeros(1)})
    from opcc_edu import datasets as ds

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(NotADirectoryError, match=CACHE_ENV_VAR):
            ds.load_dataset("maze2d-open", "1k", size=50, progress=False)
    assert blocker.read_text() == "x"
