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
from opcc_edu.io import atomic_write_text

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_record import provenance_record, write_json  # noqa: E402

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


def run(repeats: int) -> dict[str, float]:
    """Best seconds of every case, by name (the report's rows and ratios are computed from them)."""
    seconds: dict[str, float] = {}

    prediction, target, confidence = synthetic_answers(BASELINE_N, seed=0)
    loss = (prediction != target).astype(np.int8)
    assert abs(matrix_rpp(loss, confidence) - metrics.reverse_pair_proportion(prediction, target, confidence)) < 1e-15
    seconds["rpp_matrix"] = best_time(lambda: matrix_rpp(loss, confidence), repeats)
    seconds["rpp_fast"] = best_time(lambda: metrics.reverse_pair_proportion(prediction, target, confidence), repeats)

    prediction, target, confidence = synthetic_answers(LARGE_N, seed=1)
    loss = (prediction != target).astype(np.int8)
    assert abs(grid_aurcc(loss, confidence) - metrics.aurcc(prediction, target, confidence)) < 1e-12
    for key, function in (
        ("rpp_large", lambda: metrics.reverse_pair_proportion(prediction, target, confidence)),
        ("aurcc_large", lambda: metrics.aurcc(prediction, target, confidence)),
        ("evaluate_large", lambda: metrics.evaluate(prediction, target, confidence)),
    ):
        seconds[key] = best_time(function, repeats)
    seconds["aurcc_exact"] = best_time(lambda: metrics.aurcc(prediction, target, confidence), repeats)
    seconds["aurcc_grid"] = best_time(lambda: grid_aurcc(loss, confidence), max(1, repeats // 2))
    continuous = np.random.default_rng(2).random(LARGE_N)
    seconds["aurcc_distinct"] = best_time(lambda: metrics.aurcc(prediction, target, continuous), repeats)

    rng = np.random.default_rng(3)
    values_a = rng.normal(0, 1, (1_500, 100)) + rng.normal(0, 0.3, (1_500, 1))
    values_b = rng.normal(0, 1, (1_500, 100))
    for name, paired, function in (
        ("pci", True, cf.paired_confidence_interval),
        ("upci", False, cf.unpaired_confidence_interval),
    ):
        closed = function(values_a, values_b)[1]
        looped = loop_interval_confidence(values_a, values_b, paired)
        assert np.all((looped <= closed + 1e-12) & (closed < looped + 0.01 + 1e-12))
        seconds[f"{name}_closed"] = best_time(lambda f=function: f(values_a, values_b), repeats)
        seconds[f"{name}_loop"] = best_time(
            lambda p=paired: loop_interval_confidence(values_a, values_b, p), max(1, repeats // 2)
        )
    return seconds


def rows(data: dict) -> list[tuple[str, float, str]]:
    """``(what, seconds, ratio)`` of the report, every ratio against a baseline of the same run."""
    t, small, large = data["seconds"], data["baseline_n"], data["large_n"]
    base = t["rpp_matrix"]
    quadratic = base * (large / small) ** 2
    out = [
        (f"RPP, n x n matrix, n = {small:,} (baseline)", base, "1"),
        (f"RPP, sort + binary search, n = {small:,}", t["rpp_fast"], f"speed-up {base / t['rpp_fast']:,.0f}x"),
    ]
    for label, key in (
        ("RPP", "rpp_large"),
        ("AURCC (exact)", "aurcc_large"),
        ("evaluate (all metrics)", "evaluate_large"),
    ):
        out.append((f"{label}, n = {large:,}", t[key], f"{t[key] / base:.2f} x baseline"))
    out.append(
        (
            f"RPP, n x n matrix, n = {large:,} (extrapolated; needs {2 * large**2 / 1e12:.0f} TB)",
            quadratic,
            f"{quadratic / base:,.0f} x baseline",
        )
    )
    out.append(
        (
            f"AURCC, 0.01 threshold grid, n = {large:,}",
            t["aurcc_grid"],
            f"exact is {t['aurcc_grid'] / t['aurcc_exact']:.1f}x faster",
        )
    )
    out.append(
        (f"AURCC, {large:,} distinct confidences", t["aurcc_distinct"], f"{t['aurcc_distinct'] / base:.2f} x baseline")
    )
    for name, key in (("PCI", "pci"), ("U-PCI", "upci")):
        slow, fast = t[f"{key}_loop"], t[f"{key}_closed"]
        out.append((f"{name}, 101-level alpha loop, N = 1,500, M = 100", slow, "1"))
        out.append((f"{name}, closed form, N = 1,500, M = 100", fast, f"speed-up {slow / fast:,.0f}x"))
    return out


def render(data: dict) -> str:
    """The report, from the raw record alone."""
    lines = [
        "# Metrics benchmark",
        "",
        f"Produced by `{data['command']}` at commit `{str(data['git_commit'])[:12]}` (best of "
        f"{data['config']['repeats']} runs, one CPU thread; raw seconds in `metrics.json`). Ratios",
        "are against baselines measured in the same run; absolute seconds depend on the machine.",
        "",
        "| what | seconds | ratio |",
        "|---|---:|---:|",
    ]
    lines += [f"| {label} | {seconds:.4f} | {ratio} |" for label, seconds, ratio in rows(data)]
    lines += ["", "## Machine", "", data["machine_text"], ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="timed repetitions per case (best is kept)")
    parser.add_argument(
        "--output", type=Path, default=None, help="also write the markdown table here (and its raw .json beside it)"
    )
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error(f"--repeats must be >= 1, got {args.repeats}")
    data = {
        **provenance_record(),
        "config": {"repeats": args.repeats},
        "baseline_n": BASELINE_N,
        "large_n": LARGE_N,
        "machine_text": machine_description(),
        "seconds": run(args.repeats),
    }
    text = render(data)
    print(text)
    if args.output is not None:
        write_json(args.output.with_suffix(".json"), data)
        atomic_write_text(args.output, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
