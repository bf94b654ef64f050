"""Benchmark of opcc_edu.metrics and opcc_edu.confidence against naive formulations.

Every timing is reported as a ratio to a baseline measured in the same run, so the numbers
compare across machines: the baseline is the n x n reverse-pair-proportion matrix at
n = 7,500 (the formulation of the public reference code), plus a 0.01 threshold-grid AURCC
and a 101-level alpha loop for the interval confidences.

Usage::

    OMP_NUM_THREADS=1 nice -n 10 python benchmarks/bench_metrics.py \
        --output benchmarks/results/metrics.md

Checks that the fast and naive versions agree before timing them.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")  # one core, as stated in the results

import argparse
import platform
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import scipy
from scipy import stats

from opcc_edu import confidence as cf
from opcc_edu import metrics

BASELINE_N = 7_500
LARGE_N = 1_000_000


def best_time(function: Callable[[], object], repeats: int) -> float:
    """Smallest wall time of ``repeats`` calls (the least disturbed by other processes)."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return min(times)


def matrix_rpp(loss: np.ndarray, confidence: np.ndarray) -> float:
    """Reverse pair proportion from the full N x N pair matrix: O(N**2) time and memory."""
    reversed_pairs = (loss[:, None] < loss[None, :]) & (confidence[:, None] < confidence[None, :])
    return float(reversed_pairs.sum() / loss.size**2)


def grid_aurcc(loss: np.ndarray, confidence: np.ndarray) -> float:
    """AURCC from a 0.01 threshold sweep (exact only for confidences on that grid)."""
    points = [(0.0, 0.0)]
    for tau in np.arange(0, 101) / 100:
        covered = confidence >= tau
        count = int(covered.sum())
        if count:
            points.append((count / loss.size, float(loss[covered].sum()) / count))
    coverage, risk = np.array(sorted(points)).T
    return float(np.sum(np.diff(coverage) * (risk[1:] + risk[:-1]) / 2))


def loop_interval_confidence(values_a: np.ndarray, values_b: np.ndarray, paired: bool) -> np.ndarray:
    """Largest alpha in {0, 0.01, ..., 1} whose interval(s) separate, by trying every level."""
    members = values_a.shape[1]
    confidence = np.zeros(values_a.shape[0])
    for alpha in np.arange(1, 100) / 100:
        quantile = stats.t.ppf((1 + alpha) / 2, df=members - 1) / np.sqrt(members)
        if paired:
            difference = values_a - values_b
            half = quantile * difference.std(axis=1, ddof=1)
            separated = np.abs(difference.mean(axis=1)) > half
        else:
            half_a = quantile * values_a.std(axis=1, ddof=1)
            half_b = quantile * values_b.std(axis=1, ddof=1)
            separated = np.abs(values_a.mean(axis=1) - values_b.mean(axis=1)) > half_a + half_b
        confidence = np.where(separated, alpha, confidence)
    return confidence


def synthetic_answers(n: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Predictions with ~30% errors and confidences on the 0.01 grid (so the grid is exact)."""
    rng = np.random.default_rng(seed)
    prediction = rng.integers(0, 2, n)
    wrong = rng.random(n) < 0.3
    target = np.where(wrong, 1 - prediction, prediction)
    # Wrong answers tend to get lower confidence, as with a useful confidence function.
    confidence = np.clip(np.round(rng.beta(np.where(wrong, 2, 4), 2) * 100), 0, 100) / 100
    return prediction, target, confidence


def machine_description() -> str:
    try:
        lscpu = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
        lscpu = "\n".join(lscpu.splitlines()[:10])
    except (OSError, subprocess.CalledProcessError):
        lscpu = platform.processor() or platform.machine()
    return (
        f"```\n{lscpu}\n```\n\n"
        f"python {platform.python_version()}, numpy {np.__version__}, scipy {scipy.__version__}, "
        f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')}"
    )


def run(repeats: int) -> list[tuple[str, float, str]]:
    rows: list[tuple[str, float, str]] = []

    prediction, target, confidence = synthetic_answers(BASELINE_N, seed=0)
    loss = (prediction != target).astype(np.int8)
    assert abs(matrix_rpp(loss, confidence) - metrics.reverse_pair_proportion(prediction, target, confidence)) < 1e-15
    baseline = best_time(lambda: matrix_rpp(loss, confidence), repeats)
    rows.append((f"RPP, n x n matrix, n = {BASELINE_N:,} (baseline)", baseline, "1"))
    fast = best_time(lambda: metrics.reverse_pair_proportion(prediction, target, confidence), repeats)
    rows.append((f"RPP, sort + binary search, n = {BASELINE_N:,}", fast, f"speed-up {baseline / fast:,.0f}x"))

    prediction, target, confidence = synthetic_answers(LARGE_N, seed=1)
    loss = (prediction != target).astype(np.int8)
    assert abs(grid_aurcc(loss, confidence) - metrics.aurcc(prediction, target, confidence)) < 1e-12
    for label, function in (
        ("RPP", lambda: metrics.reverse_pair_proportion(prediction, target, confidence)),
        ("AURCC (exact)", lambda: metrics.aurcc(prediction, target, confidence)),
        ("evaluate (all metrics)", lambda: metrics.evaluate(prediction, target, confidence)),
    ):
        seconds = best_time(function, repeats)
        rows.append((f"{label}, n = {LARGE_N:,}", seconds, f"{seconds / baseline:.2f} x baseline"))
    quadratic = baseline * (LARGE_N / BASELINE_N) ** 2
    rows.append(
        (
            f"RPP, n x n matrix, n = {LARGE_N:,} (extrapolated; needs {2 * LARGE_N**2 / 1e12:.0f} TB)",
            quadratic,
            f"{quadratic / baseline:,.0f} x baseline",
        )
    )
    exact = best_time(lambda: metrics.aurcc(prediction, target, confidence), repeats)
    grid = best_time(lambda: grid_aurcc(loss, confidence), max(1, repeats // 2))
    rows.append((f"AURCC, 0.01 threshold grid, n = {LARGE_N:,}", grid, f"exact is {grid / exact:.1f}x faster"))
    continuous = np.random.default_rng(2).random(LARGE_N)
    seconds = best_time(lambda: metrics.aurcc(prediction, target, continuous), repeats)
    rows.append((f"AURCC, {LARGE_N:,} distinct confidences", seconds, f"{seconds / baseline:.2f} x baseline"))

    rng = np.random.default_rng(3)
    values_a = rng.normal(0, 1, (1_500, 100)) + rng.normal(0, 0.3, (1_500, 1))
    values_b = rng.normal(0, 1, (1_500, 100))
    for name, paired, function in (
        ("PCI", True, cf.paired_confidence_interval),
        ("U-PCI", False, cf.unpaired_confidence_interval),
    ):
        closed = function(values_a, values_b)[1]
        looped = loop_interval_confidence(values_a, values_b, paired)
        assert np.all((looped <= closed + 1e-12) & (closed < looped + 0.01 + 1e-12))
        fast = best_time(lambda f=function: f(values_a, values_b), repeats)
        slow = best_time(lambda p=paired: loop_interval_confidence(values_a, values_b, p), max(1, repeats // 2))
        rows.append((f"{name}, 101-level alpha loop, N = 1,500, M = 100", slow, "1"))
        rows.append((f"{name}, closed form, N = 1,500, M = 100", fast, f"speed-up {slow / fast:,.0f}x"))
    return rows


def to_markdown(rows: list[tuple[str, float, str]]) -> str:
    lines = [
        "# Metrics benchmark",
        "",
        "Produced by `benchmarks/bench_metrics.py` (best of several runs, one CPU thread). Ratios",
        "are against baselines measured in the same run; absolute seconds depend on the machine.",
        "",
        "| what | seconds | ratio |",
        "|---|---:|---:|",
    ]
    lines += [f"| {label} | {seconds:.4f} | {ratio} |" for label, seconds, ratio in rows]
    lines += ["", "## Machine", "", machine_description(), ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="timed repetitions per case (best is kept)")
    parser.add_argument("--output", type=Path, default=None, help="also write the markdown table here")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error(f"--repeats must be >= 1, got {args.repeats}")
    text = to_markdown(run(args.repeats))
    print(text)
    if args.output is not None:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
