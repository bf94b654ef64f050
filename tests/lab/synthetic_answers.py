"""Synthetic answers for the tests of the ablation runner's readers (report, verdicts).

Neither test needs a trained model: they need member values whose scores are reproducible and
differ between runs in a known way. One implementation serves both; the key decides what a run's
values depend on.
"""

from __future__ import annotations

import subprocess
import sys
import zlib

import numpy as np

from opcc_edu.lab import experiments as ex

KEYS = ("run", "environment-seed")


class SyntheticAnswers:
    """Member values around a random normal truth: 60 queries (horizons 20, 30, 40), 4 members.

    Args:
        key: ``"run"`` seeds each run by its ``run_id`` (every configuration gets its own
            values); ``"environment-seed"`` by environment and seed only (every configuration
            of one environment and seed gets the same values, so levels cannot differ).
        child_seconds: CPU seconds burnt in a child process per run (to test CPU-time records).
    """

    def __init__(self, key: str = "run", child_seconds: float = 0.0):
        if key not in KEYS:
            raise ValueError(f"key must be one of {KEYS}, got {key!r}")
        self.key = key
        self.child_seconds = child_seconds

    def __call__(self, run: ex.RunSpec, progress: bool = True) -> ex.MemberValues:
        if self.child_seconds:
            burn = f"import time\nt = time.process_time()\nwhile time.process_time() - t < {self.child_seconds}: pass"
            subprocess.run([sys.executable, "-c", burn], check=True)
        name = run.run_id if self.key == "run" else f"{run.environment}/{run.seed}"
        rng = np.random.default_rng(zlib.crc32(name.encode()))
        n, m = 60, 4
        horizon = np.repeat(np.asarray([20, 30, 40]), n // 3)
        a, b = rng.normal(size=n), rng.normal(size=n)
        values_a = a[:, None] + 0.5 * rng.normal(size=(n, m))
        values_b = b[:, None] + 0.5 * rng.normal(size=(n, m))
        return ex.MemberValues(values_a, values_b, (a < b).astype(np.int8), horizon, info={"seconds": 0.0})
