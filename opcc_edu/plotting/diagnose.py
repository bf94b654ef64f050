"""Figures of the value-error diagnostics (:mod:`opcc_edu.lab.diagnose`).

They take the diagnostics' results by their attributes (duck-typed), so this core module never
imports the lab.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from .benchmark import MAP_ZORDER, draw_maze
from .style import figure_size

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def plot_reward_map(reward_map: Any, fig: Figure | None = None) -> Figure:
    """The mean reward error per patch where queries go, beside the dataset's visits."""
    import matplotlib.pyplot as plt
    from matplotlib.colors import LogNorm, TwoSlopeNorm

    panels = 2 if reward_map.data_visits is not None else 1
    fig = fig or plt.figure(figsize=figure_size(columns=panels, panel_aspect=0.9), layout="constrained")
    axes = np.atleast_1d(fig.subplots(1, panels))
    bias = np.ma.masked_invalid(reward_map.bias)
    limit = max(float(np.nanmax(np.abs(reward_map.bias))) if np.isfinite(reward_map.bias).any() else 0.0, 1e-6)
    for ax in axes:
        draw_maze(reward_map.env_name, ax=ax)
        for patch in [p for p in ax.patches if p.get_label() == "goal region"]:  # an outline above the map
            patch.set(facecolor="none", edgecolor="black", linestyle="--", zorder=3)
    shared = dict(extent=reward_map.extent, origin="upper", zorder=MAP_ZORDER)
    image = axes[0].imshow(bias, cmap="RdBu_r", norm=TwoSlopeNorm(0.0, -limit, limit), **shared)
    fig.colorbar(image, ax=axes[0], label="learned - true reward (per step)")
    axes[0].set_title("reward error, query steps")
    if reward_map.data_visits is not None:
        shown = np.ma.masked_equal(reward_map.data_visits, 0)
        norm = LogNorm(vmin=1, vmax=max(2.0, float(reward_map.data_visits.max())))
        image = axes[1].imshow(shown, cmap="viridis", norm=norm, **shared)
        fig.colorbar(image, ax=axes[1], label="dataset transitions per patch (count)")
        axes[1].set_title("dataset transitions")
    return fig


def plot_value_error(decomposition: Any, fig: Figure | None = None) -> Figure:
    """Two panels: value error by horizon per variant, and open-loop error by step."""
    import matplotlib.pyplot as plt

    fig = fig or plt.figure(figsize=figure_size(columns=2, panel_aspect=0.8), layout="constrained")
    left, right = fig.subplots(1, 2)
    horizons = sorted(set(decomposition.horizon.tolist()))
    for name, members in decomposition.variants().items():
        mae = [np.abs(members.mean(1) - decomposition.true)[decomposition.horizon == h].mean() for h in horizons]
        left.plot(horizons, mae, marker="o", label=name)
    left.set_xlabel("horizon h")
    left.set_ylabel("mean |value error|")
    left.set_title(f"{decomposition.env_name}:\nvalue error by source")
    fig.set_layout_engine(fig.get_layout_engine() or "constrained")  # room for the legend below
    fig.legend(*left.get_legend_handles_labels(), loc="outside lower center", ncols=2)
    steps = sorted(decomposition.open_loop)
    right.plot(steps, [decomposition.open_loop[s] for s in steps], marker="o", color="C3")
    right.set_xlabel("steps replayed open loop")
    right.set_ylabel("mean |observation error|")
    right.set_title("prediction error along\ntrue trajectories")
    return fig
