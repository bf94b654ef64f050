"""What a set of runs can decide (:mod:`opcc_edu.lab.findings.power`): paired differences of the
committed runs recomputed by hand, and the seeds a half-width needs checked against the t quantile."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from opcc_edu.lab import experiments as ex
from opcc_edu.lab import findings
from opcc_edu.lab.findings.power import paired_power, power_summary, seeds_for_half_width


def _half(sd: float, n: int) -> float:
    return stats.t.ppf(0.975, n - 1) * sd / math.sqrt(n)


@pytest.mark.parametrize(("sd", "target"), [(1.0, 0.5), (0.02, 0.01), (0.05, 0.01), (0.3, 0.29)])
def test_seeds_for_half_width_is_the_fewest_runs_that_reach_the_target(sd, target):
    n = seeds_for_half_width(sd, target)
    assert n >= 2 and _half(sd, n) <= target
    assert n == 2 or _half(sd, n - 1) > target


def test_seeds_for_half_width_without_spread_or_with_a_bad_target():
    assert seeds_for_half_width(0.0, 0.01) is None
    assert seeds_for_half_width(float("nan"), 0.01) is None
    assert seeds_for_half_width(100.0, 1e-6) is None  # beyond MAX_SEEDS
    with pytest.raises(ValueError, match="target must be positive"):
        seeds_for_half_width(1.0, 0.0)


def test_paired_power_recomputes_from_the_runs_by_hand():
    entry = findings.lesson_results("normalization")
    power = paired_power(entry).set_index(["environment", "level"])
    rows = ex.ablation_rows(entry.results, "normalization")
    for env in ("hopper", "maze2d-umaze"):
        part = rows[rows["environment"] == env]
        on = part[part["level"].astype(str) == "true"].set_index(["dataset", "seed"])["aurcc"]
        off = part[part["level"].astype(str) == "false"].set_index(["dataset", "seed"])["aurcc"]
        d = (off - on).dropna().to_numpy()
        got = power.loc[(env, "false")]
        assert got["reference"] == "true" and got["n"] == len(d) >= 2
        assert got["difference"] == pytest.approx(d.mean())
        assert got["paired_half_width"] == pytest.approx(_half(np.std(d, ddof=1), len(d)))
        n = got["seeds_for_margin"]
        assert _half(np.std(d, ddof=1), int(n)) <= 0.01
    with pytest.raises(ValueError, match="unknown metric"):
        paired_power(entry, metric="accuracy")


def test_power_summary_counts_what_pairing_changes():
    entries = {name: findings.lesson_results(name) for name in ("normalization", "clipping")}
    summary = power_summary(entries).set_index("finding")
    for name, entry in entries.items():
        power = paired_power(entry)
        spread = power[power["paired_half_width"] > 0]
        narrower = int((spread["paired_half_width"] < spread["combined_half_width"]).sum())
        assert summary.loc[name, "paired narrower"] == f"{narrower} of {len(spread)}"
        assert summary.loc[name, "differences"] == len(spread)
    # identical levels (the clip boxes coincide on the mazes) have no spread and are left out
    clipping = paired_power(entries["clipping"])
    assert (clipping["paired_half_width"] == 0).any() and summary.loc["clipping", "differences"] < len(clipping)
