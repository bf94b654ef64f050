import os
import stat
import subprocess
import sys
import time

import numpy as np
import pytest
import torch

import opcc_edu.io as io_module
from opcc_edu.build import manifest
from opcc_edu.io import (
    CorruptFileError,
    atomic_write_text,
    load_npz,
    load_tensors,
    remove_stale_temp_files,
    save_npz,
    save_tensors,
)
from opcc_edu.utils import cache_dir, check_choice, get_device, seed_everything


def test_npz_round_trip_with_metadata(tmp_path):
    arrays = {"a": np.arange(5, dtype=np.float32), "b": np.eye(3, dtype=np.int64)}
    path = save_npz(tmp_path / "x.npz", arrays, {"seed": 3, "command": "opcc-edu build"})
    loaded, meta = load_npz(path)
    assert set(loaded) == {"a", "b"}
    np.testing.assert_array_equal(loaded["a"], arrays["a"])
    assert loaded["b"].dtype == np.int64
    assert meta == {"seed": 3, "command": "opcc-edu build"}
    assert not list(tmp_path.glob("*.tmp")), "temporary files must not remain"


def test_npz_refuses_object_arrays(tmp_path):
    with pytest.raises(ValueError, match="dtype object"):
        save_npz(tmp_path / "x.npz", {"bad": np.array([{"a": 1}], dtype=object)})


def test_truncated_npz_is_detected(tmp_path):
    path = save_npz(tmp_path / "x.npz", {"a": np.random.default_rng(0).normal(size=1000)})
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(CorruptFileError, match="checksum"):
        load_npz(path)
    with pytest.raises(CorruptFileError, match="cannot be read"):
        load_npz(path, verify=False)


def test_missing_checksum_is_an_error(tmp_path):
    path = save_npz(tmp_path / "x.npz", {"a": np.zeros(3)})
    (tmp_path / "x.npz.sha256").unlink()
    with pytest.raises(CorruptFileError, match="missing"):
        load_npz(path)


def test_tensors_without_checksum_are_not_loaded(tmp_path):
    path = save_tensors(tmp_path / "m.safetensors", {"w": torch.ones(2)})
    (tmp_path / "m.safetensors.sha256").unlink()
    with pytest.raises(CorruptFileError, match="checksum file m.safetensors.sha256 is missing"):
        load_tensors(path)
    assert torch.equal(load_tensors(path, verify=False)[0]["w"], torch.ones(2))


def test_tensors_round_trip(tmp_path):
    tensors = {"w": torch.randn(3, 4), "b": torch.zeros(4)}
    path = save_tensors(tmp_path / "m.safetensors", tensors, {"level": 2})
    loaded, meta = load_tensors(path)
    assert torch.equal(loaded["w"], tensors["w"]) and meta == {"level": 2}
    path.write_bytes(path.read_bytes()[:-8])
    with pytest.raises(CorruptFileError):
        load_tensors(path)


def test_seed_everything_is_reproducible():
    a = seed_everything(7).normal(size=3), torch.rand(2)
    b = seed_everything(7).normal(size=3), torch.rand(2)
    np.testing.assert_array_equal(a[0], b[0])
    assert torch.equal(a[1], b[1])
    with pytest.raises(ValueError, match="seed"):
        seed_everything(-1)


def test_device_and_choices(monkeypatch, tmp_path):
    assert get_device("cpu").type == "cpu"
    with pytest.raises(ValueError, match="not a torch device"):
        get_device("tpu-ish")
    monkeypatch.setenv("OPCC_EDU_CACHE", str(tmp_path / "c"))
    assert cache_dir("datasets") == tmp_path / "c" / "datasets"
    assert (tmp_path / "c" / "datasets").is_dir()
    with pytest.raises(ValueError, match=r"unknown color 'red'; valid choices: blue, green"):
        check_choice("red", ["blue", "green"], "color")


def test_dataclass_from_dict_round_trip_and_errors():
    import dataclasses

    from opcc_edu.utils import dataclass_from_dict

    @dataclasses.dataclass(frozen=True)
    class Spec:
        width: int
        hidden_sizes: tuple[int, ...] = (8, 8)

    assert dataclass_from_dict(Spec, {"width": 3, "hidden_sizes": [4, 5]}) == Spec(3, (4, 5))
    with pytest.raises(
        ValueError, match=r"unknown Spec field\(s\) \['depth'\]; valid fields: \['hidden_sizes', 'width'\]"
    ):
        dataclass_from_dict(Spec, {"width": 3, "depth": 2})


# --------------------------------------------------------------------------------------------
# File modes
# --------------------------------------------------------------------------------------------
def _mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.mark.parametrize(("umask", "expected"), [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_new_files_get_the_mode_open_would_give(tmp_path, umask, expected):
    old = os.umask(umask)
    try:
        npz = save_npz(tmp_path / "x.npz", {"a": np.zeros(2)})
        weights = save_tensors(tmp_path / "m.safetensors", {"w": torch.zeros(2)})
        text = atomic_write_text(tmp_path / "t.txt", "hello")
        with open(tmp_path / "reference", "w") as handle:
            handle.write("x")
    finally:
        os.umask(old)
    assert _mode(tmp_path / "reference") == expected
    for path in (npz, weights, text, tmp_path / "x.npz.sha256", tmp_path / "m.safetensors.sha256"):
        assert _mode(path) == expected, path


def test_a_rewrite_keeps_the_files_mode(tmp_path):
    old = os.umask(0o022)
    try:
        path = save_npz(tmp_path / "x.npz", {"a": np.zeros(2)})
        os.chmod(path, 0o640)
        os.chmod(tmp_path / "x.npz.sha256", 0o604)
        save_npz(path, {"a": np.ones(2)})
        text = atomic_write_text(tmp_path / "t.txt", "one")
        os.chmod(text, 0o600)
        atomic_write_text(text, "two")
    finally:
        os.umask(old)
    assert _mode(path) == 0o640 and _mode(tmp_path / "x.npz.sha256") == 0o604
    assert _mode(text) == 0o600 and text.read_text() == "two"
    np.testing.assert_array_equal(load_npz(path)[0]["a"], np.ones(2))


# --------------------------------------------------------------------------------------------
# Temporary files of killed writers
# --------------------------------------------------------------------------------------------
def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_only_leftover_temporary_files_are_removed(tmp_path):
    host = io_module._HOST
    dead = tmp_path / f".a.npz.{_dead_pid()}.{host}.0123abcd.tmp"
    live = tmp_path / f".b.npz.{os.getpid()}.{host}.0123abcd.tmp"  # a writer of this process
    elsewhere = tmp_path / f".c.npz.{os.getpid()}.ffffffff.0123abcd.tmp"  # a live writer elsewhere
    old_elsewhere = tmp_path / f".d.npz.{os.getpid()}.ffffffff.0123abcd.tmp"
    unnamed_old = tmp_path / ".e.npz.k3j4_x.tmp"
    unnamed_new = tmp_path / ".f.npz.k3j4_y.tmp"
    keep = tmp_path / "notes.tmp"  # not hidden: not a temporary file of this module
    for path in (dead, live, elsewhere, old_elsewhere, unnamed_old, unnamed_new, keep):
        path.write_bytes(b"partial")
    two_minutes_ago = time.time() - 120
    for path in (old_elsewhere, unnamed_old, keep):
        os.utime(path, (two_minutes_ago, two_minutes_ago))
    assert remove_stale_temp_files(tmp_path) == 3
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.name for p in (live, elsewhere, unnamed_new, keep))


# --------------------------------------------------------------------------------------------
# The asset manifest
# --------------------------------------------------------------------------------------------
def test_manifest_lists_every_shipped_asset_with_its_digest():
    recorded = io_module.read_manifest()
    files = manifest.asset_files()
    assert sorted(recorded) == files, "run `python scripts/update_manifest.py`"
    assert any(f.endswith(".safetensors") for f in files) and any(f.endswith(".npz") for f in files)
    assert "paper_results.csv" in files and "policies/policy_table.json" in files
    assert manifest.manifest_problems() == []
    for rel, digest in recorded.items():
        assert io_module.sha256_file(io_module.ASSETS_DIR / rel) == digest, rel
        sidecar = io_module.ASSETS_DIR / (rel + ".sha256")
        if sidecar.exists():  # the sidecars shipped with the assets agree with the manifest
            assert sidecar.read_text().split()[0] == digest, rel


def test_manifest_problems_and_rewrite(tmp_path):
    root = tmp_path / "assets"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "a.json").write_text("{}")
    (root / "sub" / "a.json.sha256").write_text("x")
    (root / ".hidden.tmp").write_text("x")
    assert "missing" in manifest.manifest_problems(root)[0]
    manifest.write_manifest(root)
    assert io_module.read_manifest(root) == {"sub/a.json": io_module.sha256_file(root / "sub" / "a.json")}
    assert manifest.manifest_problems(root) == []
    (root / "sub" / "a.json").write_text("[]")
    (root / "b.csv").write_text("x")
    assert manifest.manifest_problems(root) == [
        "b.csv: not listed in the manifest",
        f"sub/a.json: sha256 {io_module.sha256_file(root / 'sub' / 'a.json')} differs from the manifest's "
        f"{io_module.read_manifest(root)['sub/a.json']}",
    ]


def test_update_manifest_script_checks_the_shipped_assets():
    script = io_module.ASSETS_DIR.parent.parent / "scripts" / "update_manifest.py"
    result = subprocess.run([sys.executable, str(script), "--check"], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "manifest matches every asset file" in result.stdout
