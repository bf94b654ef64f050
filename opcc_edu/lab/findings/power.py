"""What a set of runs can decide: paired differences between levels, and the seeds a margin needs.

The levels of an ablation share their seeds and datasets, so each run of one level has a twin in
the other: the verdicts (:mod:`opcc_edu.lab.findings.rule`) judge the *paired* difference (level
minus reference, run by run; :func:`~opcc_edu.lab.findings.rule.paired_differences`), whose
interval can be far narrower or wider than the two levels' own combined as ``sqrt(a^2 + b^2)``,
depending on how the twins' errors co-vary. :func:`paired_power` measures, per environment and
level, on one set of committed runs:

* the paired mean difference and its 95% t half-width (``n - 1`` degrees of freedom);
* the combined half-width (the unpaired fallback), for comparison;
* the **minimum detectable difference** -- the true difference these runs would show as separated
  from zero with 80% power at the 95% level, ``(t_0.975 + t_0.8) * sd / sqrt(n)``;
* the **seeds for the margin** -- the number of paired runs whose expected half-width falls to
  the metric's equivalence margin (scaled to the two levels' size,
  :func:`~opcc_edu.lab.findings.rule.equivalence_margin`), the fewest that could show a finding of
  no difference (at the
  observed spread; a discrete metric such as CR_K whose twins all agree has no spread to read,
  and gets none).

The t quantiles come from scipy; the statistics are a few lines and written out here.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ...metrics import mean_confidence_interval
from ...names import TABLE_METRICS
from ...utils import check_choice
from .. import experiments as ex
from ..experiments.analysis import level_order
from .rule import difference_half_width, equivalence_margin, twin_runs

__all__ = ["paired_power", "power_summary", "seeds_for_half_width"]

#: The most paired runs :func:`seeds_for_half_width` looks for.
MAX_SEEDS = 1000


def _t(q: float, dof: int) -> float:
    from scipy import stats

    return float(stats.t.ppf(q, dof))


def seeds_for_half_width(sd: float, target: float) -> int | None:
    """The fewest paired runs ``n >= 2`` whose 95% t half-width ``t_0.975(n-1) * sd / sqrt(n)``
    is at most ``target``; ``None`` when ``sd`` is not positive or above :data:`MAX_SEEDS` runs.

    Args:
        sd: standard deviation of the paired differences.
        target: the half-width wanted (e.g. an equivalence margin), positive.
    """
    if not (target > 0):
        raise ValueError(f"target must be positive, got {target!r}")
    if not (math.isfinite(sd) and sd > 0):
        return None
    n = max(2, math.ceil((1.96 * sd / target) ** 2))  # the normal approximation: a lower bound
    n = min(n, MAX_SEEDS)
    while n > 2 and _t(0.975, n - 2) * sd / math.sqrt(n - 1) <= target:
        n -= 1
    while n <= MAX_SEEDS and _t(0.975, n - 1) * sd / math.sqrt(n) > target:
        n += 1
    return n if n <= MAX_SEEDS else None


def paired_power(entry: ex.AblationResults | object, metric: str = "aurcc") -> pd.DataFrame:
    """Paired differences of every level against the reference level, per environment.

    Args:
        entry: one set of committed runs (:class:`~opcc_edu.lab.findings.AblationResults`).
        metric: of :data:`opcc_edu.names.TABLE_METRICS`.

    Returns:
        One row per (environment, level): reference, n (paired runs: shared dataset and seed),
        difference (paired mean), paired_half_width, combined_half_width (what the verdict
        reads where runs cannot be paired), margin (scaled to the levels' means), detectable
        (minimum detectable difference, 80% power), seeds_for_margin
        (``nan``: no spread to read, or more than :data:`MAX_SEEDS`).
    """
    check_choice(metric, TABLE_METRICS, "metric")
    ablation = entry.ablation
    rows = ex.ablation_rows(entry.results, ablation)
    table = entry.table[entry.table["metric"] == metric]
    cells = zip(table["environment"], table["level"].astype(str), table["ci"], table["mean"], strict=True)
    combined = {(e, lv): float(c) for e, lv, c, _ in cells}
    means = dict(zip(zip(table["environment"], table["level"].astype(str), strict=True), table["mean"], strict=True))
    records = []
    for env in dict.fromkeys(rows["environment"]):
        runs = twin_runs(rows, env, metric)
        order = level_order(ablation, runs.columns)
        if len(order) < 2:
            continue
        reference = order[0]
        for level in order[1:]:
            d = (runs[level] - runs[reference]).dropna().to_numpy(dtype=float)
            n = len(d)
            mean, half = mean_confidence_interval(d) if n else (float("nan"), float("nan"))
            sd = float(np.std(d, ddof=1)) if n >= 2 else float("nan")
            detectable = half * (1 + _t(0.8, n - 1) / _t(0.975, n - 1)) if n >= 2 else float("nan")
            margin = equivalence_margin(metric, means.get((env, reference), np.nan), means.get((env, level), np.nan))
            seeds = seeds_for_half_width(sd, margin) if n >= 2 else None
            records.append(
                {
                    "environment": env,
                    "reference": reference,
                    "level": level,
                    "n": n,
                    "difference": mean,
                    "paired_half_width": half,
                    "combined_half_width": difference_half_width(
                        combined.get((env, reference), np.nan), combined.get((env, level), np.nan)
                    ),
                    "margin": margin,
                    "detectable": detectable,
                    "seeds_for_margin": float("nan") if seeds is None else seeds,
                }
            )
    return pd.DataFrame(records)


def power_summary(entries: dict[str, object], metric: str = "aurcc") -> pd.DataFrame:
    """:func:`paired_power` of several findings, one row per finding: level differences judged,
    median combined and paired half-widths, how often pairing narrows the interval, and the
    paired runs the margin needs (median and largest; differences with no spread left out).

    Args:
        entries: finding (ablation key) -> its set of runs (e.g. :func:`~opcc_edu.lab.findings.lesson_results`).
        metric: of :data:`opcc_edu.names.TABLE_METRICS`.
    """
    rows = []
    for name, entry in entries.items():
        power = paired_power(entry, metric)
        spread = power[power["paired_half_width"] > 0]
        if spread.empty:
            continue
        seeds = spread["seeds_for_margin"].dropna()
        paired, combined = spread["paired_half_width"], spread["combined_half_width"]
        rows.append(
            {
                "finding": name,
                "runs per level": int(spread["n"].min()),
                "differences": len(spread),
                "combined half-width (median)": float(spread["combined_half_width"].median()),
                "paired half-width (median)": float(spread["paired_half_width"].median()),
                "paired narrower": f"{int((paired < combined).sum())} of {len(spread)}",
                "within the margin now": f"{int((paired <= spread['margin']).sum())} of {len(spread)}",
                "runs for the margin (median)": float(seeds.median()) if len(seeds) else float("nan"),
                "runs for the margin (largest)": float(seeds.max()) if len(seeds) else float("nan"),
            }
        )
    return pd.DataFrame(rows)
