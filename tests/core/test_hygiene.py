"""A run leaves nothing in the temp directory: torch's compile cache goes under the package's cache."""

from __future__ import annotations

import os
import subprocess
import sys

TRAIN = """
from opcc_edu.baselines import EnsembleConfig, train_ensemble
from opcc_edu.datasets import load_dataset

data = load_dataset("maze2d-umaze", "1k", size=300, progress=False)
config = EnsembleConfig.from_profile("tiny")
train_ensemble(data, config, "maze2d-umaze", progress=False)
"""


def test_training_leaves_the_temp_directory_empty(tmp_path):
    temp, cache = tmp_path / "tmp", tmp_path / "cache"
    temp.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")}
    env.update(TMPDIR=str(temp), OPCC_EDU_CACHE=str(cache), OPCC_EDU_PROFILE="tiny")
    result = subprocess.run([sys.executable, "-c", TRAIN], env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    assert sorted(os.listdir(temp)) == []
    assert (cache / "torchinductor").is_dir()  # where torch's cache went instead


def test_importing_the_package_leaves_the_environment_alone():
    # the compile caches are redirected by the first optimizer step, not by an import
    code = "import os, opcc_edu, opcc_edu.baselines; print(os.environ.get('TORCHINDUCTOR_CACHE_DIR'))"
    env = {k: v for k, v in os.environ.items() if k not in ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")}
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "None"
