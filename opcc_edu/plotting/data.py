"""Figures of offline datasets: query-to-dataset distances, maze visitation, state scatter.

The numbers come from :mod:`opcc_edu.datasets.coverage` (distances, histograms, principal
components); these functions only draw them. Each takes ``ax=None`` and returns the Axes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from .benchmark import MAP_ZORDER, draw_maze
from .check import place_legend
from .style import new_axes

if TYPE_CHECKING:
    from matplotlib.axes import Axes


def plot_query_distances(results: Any, ax: Axes | None = None, bins: int = 40, log: bool = False) -> Axes:
    """Histogram of :attr:`~opcc_edu.datasets.coverage.CoverageResult.distance` per dataset.

    Args:
        results: one ``CoverageResult`` or a mapping dataset name -> ``CoverageResult``.
        ax: matplotlib Axes to draw on; a new figure when ``None``.
        bins: number of bins, shared by every dataset (step outlines).
        log: logarithmic distance axis (bins spaced geometrically).

    Returns:
        The Axes.
    """
    from ..datasets.coverage import CoverageResult

    if isinstance(results, CoverageResult):
        results = {"dataset": results}
    if ax is None:
        ax = new_axes()
    values = [r.distance for r in results.values()]
    hi = max(float(v.max()) for v in values) if values else 1.0
    if log:
        lo = max(1e-3, min(float(v[v > 0].min()) for v in values if (v > 0).any()))
        edges = np.geomspace(lo, hi, bins + 1)
    else:
        edges = np.linspace(0.0, hi, bins + 1)
    for name, r in results.items():
        ax.hist(
            r.distance, bins=edges, histtype="step", linewidth=1.5, label=f"{name} (median {np.median(r.distance):.2f})"
        )
    if log:
        ax.set_xscale("log")
    normalize = next(iter(results.values())).normalize if results else "standard"
    unit = {"standard": "standardised units", "range": "range units", "none": "raw units"}[normalize]
    ax.set_xlabel(f"query-to-dataset distance ({unit})")
    ax.set_ylabel("queries (count)")
    place_legend(ax)
    return ax


def plot_maze_visitation(
    data: Mapping[str, np.ndarray], env_name: str, ax: Axes | None = None, bins_per_cell: int = 8, log: bool = True
) -> Axes:
    """Heat map of where a maze dataset's ball has been, over the maze's walls.

    Args:
        data: a maze dataset (``observations`` (T, D), x and y first).
        env_name: the maze.
        ax: matplotlib Axes to draw on; a new figure when ``None``.
        bins_per_cell: histogram bins per maze cell and axis.
        log: logarithmic colour scale.

    Returns:
        The Axes.
    """
    from matplotlib.colors import LogNorm

    from ..datasets.coverage import visitation_histogram

    if ax is None:
        ax = new_axes()
    counts, extent = visitation_histogram(data, env_name, bins_per_cell)
    # The maze goes underneath; unvisited bins are masked, so walls and empty floor show through.
    draw_maze(env_name, ax=ax)
    shown = np.ma.masked_equal(counts, 0)
    norm = LogNorm(vmin=1, vmax=max(2.0, float(counts.max()))) if log else None
    image = ax.imshow(shown, extent=extent, origin="upper", cmap="viridis", norm=norm, zorder=MAP_ZORDER)
    ax.set_xlim(extent[0], extent[1])
    ax.set_ylim(extent[2], extent[3])
    ax.figure.colorbar(image, ax=ax, label="visits per bin (count)")
    return ax


def plot_state_visitation(
    datasets: Mapping[str, Mapping[str, np.ndarray]], ax: Axes | None = None, max_points: int = 5000, seed: int = 0
) -> Axes:
    """Scatter of the observations of several datasets on their shared first two principal components.

    Args:
        datasets: name -> dataset (``observations`` (T, D)).
        ax: matplotlib Axes to draw on; a new figure when ``None``.
        max_points: at most this many points per dataset (a random subset).
        seed: seeds that subset.

    Returns:
        The Axes.
    """
    from ..datasets.coverage import principal_components

    if ax is None:
        ax = new_axes()
    rng = np.random.default_rng(seed)
    for name, proj in principal_components(datasets).items():
        take = rng.choice(len(proj), size=min(max_points, len(proj)), replace=False)
        ax.scatter(proj[take, 0], proj[take, 1], s=2, alpha=0.4, label=name)
    ax.set_xlabel("principal component 1\n(standardised units)")
    ax.set_ylabel("principal component 2\n(standardised units)")
    place_legend(ax, markerscale=5)
    return ax
