"""Figures of selective prediction: risk-coverage curves, level curves, ours against the paper.

Every function takes ``ax=None`` (a new figure sized for the page) and returns the Axes it drew
on. Data come from :mod:`opcc_edu.metrics` and :mod:`opcc_edu.lab.experiments`; nothing here
computes a metric of its own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..confidence import ensemble_voting
from ..metrics import evaluate, risk_coverage_curve, trapezoid_area
from ..names import CONFIDENCE_NAMES, METRIC_NAMES, METRICS
from ..utils import check_choice
from .check import place_legend
from .style import new_axes

if TYPE_CHECKING:
    from matplotlib.axes import Axes

    from ..scoring import MemberValues


_COVERAGE_LABEL = "coverage (fraction of queries answered)"
_RISK_LABEL = "selective risk (fraction wrong)"


def plot_risk_coverage(
    prediction: Any, target: Any, confidence: Any, ax: Axes | None = None, label: str | None = None, **plot_kwargs: Any
) -> Axes:
    """Plot the exact risk-coverage curve (operating points as markers, linear in between).

    Args:
        prediction: (N,) 0/1 predictions.
        target: (N,) 0/1 true answers.
        confidence: (N,) finite confidences.
        ax: matplotlib Axes to draw on; a new figure when ``None``.
        label: legend label; the AURCC is appended to it.
        **plot_kwargs: passed to ``Axes.plot`` (color, linestyle, ...).

    Returns:
        The Axes.
    """
    coverage, risk, _ = risk_coverage_curve(prediction, target, confidence)
    if ax is None:
        ax = new_axes()
    area = trapezoid_area(coverage, risk)
    text = f"AURCC = {area:.3f}" if label is None else f"{label} (AURCC = {area:.3f})"
    plot_kwargs.setdefault("marker", "o" if coverage.size <= 60 else None)
    plot_kwargs.setdefault("markersize", 3)
    ax.plot(coverage, risk, label=text, **plot_kwargs)
    ax.set_xlim(0.0, 1.0)
    # Fixed limits stop autoscaling, so widen them to every curve drawn so far on this Axes.
    highest = max((float(np.max(line.get_ydata(), initial=0.0)) for line in ax.get_lines()), default=0.0)
    ax.set_ylim(0.0, max(highest * 1.05, 0.01))
    ax.set_xlabel(_COVERAGE_LABEL)
    ax.set_ylabel(_RISK_LABEL)
    place_legend(ax)
    return ax


def plot_level_risk_coverage(
    curves: Mapping[str, Mapping[str, np.ndarray]],
    ax: Axes | None = None,
    title: str | None = None,
    titles: Mapping[str, str] | None = None,
    legend: bool = True,
) -> Axes:
    """Plot :func:`opcc_edu.lab.experiments.level_risk_coverage` curves: one line and 95% band per level.

    Args:
        curves: level -> ``{"coverage", "risk", "ci", "n_runs"}`` (a band is drawn where every
            ``ci`` is finite, that is with at least two runs).
        ax: matplotlib Axes to draw on; a new figure when ``None``.
        title: Axes title.
        titles: display names of the levels (default: the level labels).
        legend: place a legend on the Axes (``False``: the figure has one for all its panels).

    Returns:
        The Axes.
    """
    if ax is None:
        ax = new_axes()
    for level, curve in curves.items():
        name = (titles or {}).get(level, level)
        (line,) = ax.plot(curve["coverage"], curve["risk"], label=f"{name} (n={int(curve['n_runs'])})")
        if np.all(np.isfinite(curve["ci"])):
            low, high = curve["risk"] - curve["ci"], curve["risk"] + curve["ci"]
            ax.fill_between(curve["coverage"], low, high, color=line.get_color(), alpha=0.2)
    ax.set(xlim=(0.0, 1.0), xlabel=_COVERAGE_LABEL, ylabel=_RISK_LABEL, title=title or "")
    ax.set_ylim(bottom=0.0)
    if legend:
        place_legend(ax)
    return ax


def plot_comparison(
    comparison: Any, metric: str = "aurcc", ax: Axes | None = None, titles: Mapping[str, str] | None = None
) -> Axes:
    """Bars of ours and the paper's mean +- 95% interval per (environment, level), one metric.

    Args:
        comparison: :func:`opcc_edu.lab.experiments.compare_with_paper` output.
        metric: one of :data:`opcc_edu.names.METRICS`.
        ax: matplotlib Axes to draw on; a new figure when ``None``.
        titles: display names of the levels (default: the level labels).

    Returns:
        The Axes.
    """
    check_choice(metric, METRICS, "metric")
    part = comparison[comparison["metric"] == metric].reset_index(drop=True)
    if ax is None:
        import matplotlib.pyplot as plt

        from .style import PAGE_WIDTH

        _, ax = plt.subplots(figsize=(min(PAGE_WIDTH, max(4.0, 0.9 * len(part) + 1.5)), 3.5))
    x = np.arange(len(part))
    ours_err = np.nan_to_num(part["ours_ci"].to_numpy(dtype=float))
    paper_err = np.nan_to_num(part["paper_ci"].to_numpy(dtype=float))
    ax.bar(x - 0.2, part["ours_mean"], width=0.4, yerr=ours_err, capsize=3, label="ours")
    ax.bar(x + 0.2, part["paper_mean"].fillna(0.0), width=0.4, yerr=paper_err, capsize=3, label="paper", alpha=0.8)
    names = [(titles or {}).get(level, level) for level in part["level"]]
    multi_env = part["environment"].nunique() > 1
    labels = [f"{env}\n{name}" if multi_env else name for env, name in zip(part["environment"], names, strict=True)]
    ax.set_xticks(x, labels)
    if multi_env:  # one tick label per (environment, level): turn them so they stay readable
        ax.tick_params(axis="x", labelrotation=90)
    ax.set_ylabel(f"{METRIC_NAMES[metric]} (fraction)")
    ax.set_xlabel("environment and ablation level" if multi_env else "ablation level")
    place_legend(ax)
    return ax


def plot_voting_prefix(values: MemberValues, members: int, ax: Axes | None = None) -> Axes:
    """The RCC of ensemble voting (EV) with the first ``members`` members of one run.

    With m members EV's confidence takes at most ``m // 2 + 1`` values; the title counts them.

    Args:
        values: one run's :class:`~opcc_edu.scoring.MemberValues` (N queries, M members), or
            what reads the same (``values_a``, ``values_b``, ``target``, ``ensemble_size``), such
            as :class:`~opcc_edu.baselines.Answers`.
        members: how many of the first members vote, 1 to M.
        ax: matplotlib Axes to draw on; a new figure when ``None``.

    Returns:
        The Axes.
    """
    if isinstance(members, bool) or not 1 <= int(members) <= values.ensemble_size:
        raise ValueError(f"members must lie in [1, {values.ensemble_size}], got {members!r}")
    m = int(members)
    prediction, confidence = ensemble_voting(values.values_a[:, :m], values.values_b[:, :m])
    cr_k = evaluate(prediction, values.target, confidence)["cr_k"]
    ax = plot_risk_coverage(prediction, values.target, confidence, ax=ax, label=f"EV, m = {m}")
    ax.set_title(f"{np.unique(confidence).size} distinct confidences (at most {m // 2 + 1}); CR_K = {cr_k:.1f}")
    return ax


def plot_answers(answers: Any, ax: Axes | None = None, confidences: Sequence[str] | None = None) -> Axes:
    """Risk-coverage curves of the confidence functions on one Axes (returned).

    Each curve is drawn by :func:`opcc_edu.plotting.plot_risk_coverage` (a new Axes when
    ``ax`` is None), labelled with the confidence's display name and its AURCC.
    """
    for name in confidences or list(answers.predictions):
        label = CONFIDENCE_NAMES.get(name, name)
        ax = plot_risk_coverage(
            answers.predictions[name], answers.target, answers.confidences[name], ax=ax, label=label
        )
    if answers.config is None:
        ax.set_title(f"{answers.env_name}: {answers.baseline} (no model)")
    else:
        ax.set_title(f"{answers.env_name} / {answers.dataset_name}, M = {answers.ensemble_size}")
    return ax
