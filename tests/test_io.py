import numpy as np
import pytest
import torch

from opcc_edu.io import CorruptFileError, load_npz, load_tensors, save_npz, save_tensors
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
    with pytest.raises(ValueError, match=r"unknown Spec field\(s\) \['depth'\]; valid fields: \['hidden_sizes', 'width'\]"):
        dataclass_from_dict(Spec, {"width": 3, "depth": 2})
