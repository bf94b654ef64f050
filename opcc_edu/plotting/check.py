"""Whether a figure reads at a glance: legends off the data, texts apart, few panels.

:func:`figure_problems` lists what is wrong with a drawn figure, :func:`check_figure` raises
on it. A chapter checks every figure it draws with :func:`check_every_figure`, called once in a
hidden cell: from then on, at the end of every cell, each figure open in pyplot is checked
before the page shows it, and :func:`assert_figures_readable` (in a later hidden cell) fails on
what was found.

What counts, in display coordinates after ``fig.canvas.draw()``:

* **legend over data** -- a legend's box holds a point of a scatter, a vertex of a data line or
  of a step histogram's outline (both sampled every few pixels, so a straight line through a
  legend counts), or covers a
  bar's rectangle (a maze's floor and walls, drawn by :func:`~opcc_edu.plotting.draw_maze`, are
  not bars); a data point counts where its Axes shows it. Reference lines drawn across the
  whole Axes (``axhline``, ``axvline``) and images do not count;
* **text over text** -- two of the figure's titles, axis labels, super-titles and legends
  overlap;
* **too many panels** -- more than :data:`MAX_PANELS` Axes with axes drawn (colour bars aside);
* **wider than the page** -- what is drawn reaches beyond :data:`~.style.PAGE_WIDTH`: the image
  saved around it (``bbox_inches="tight"``) is wider than the page, so shrunk, text included.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any

import numpy as np

from .style import PAGE_WIDTH

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = [
    "MAX_PANELS",
    "FigureProblem",
    "assert_figures_readable",
    "check_every_figure",
    "check_figure",
    "figure_problems",
    "place_legend",
]

#: Most panels a figure of a lesson may hold.
MAX_PANELS = 12

#: Pixels between the points sampled along a data line.
_STEP = 3.0

#: Pixels two boxes may share before they count as overlapping (anti-aliasing, rounding).
_SLACK = 1.0


class FigureProblem(AssertionError):
    """A figure does not read at a glance; the message lists why."""


def _panels(fig: Figure) -> list:
    return [ax for ax in fig.axes if ax.get_visible() and ax.axison and ax.get_label() != "<colorbar>"]


def _legends(fig: Figure) -> list:
    found = [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None] + list(fig.legends)
    return [legend for legend in found if legend.get_visible()]


def _shrunk(box: Any, by: float = _SLACK) -> Any:
    from matplotlib.transforms import Bbox

    return Bbox.from_extents(box.x0 + by, box.y0 + by, box.x1 - by, box.y1 - by)


def _in_data(artist: Any, ax: Any) -> bool:
    """Whether ``artist`` is placed in data coordinates on both axes (not ``axhline``, a frame or a legend's box)."""
    return all(artist.get_transform().contains_branch_seperately(ax.transData))


def _inside(points: np.ndarray, box: Any) -> np.ndarray:
    x, y = points[:, 0], points[:, 1]
    return (x > box.x0) & (x < box.x1) & (y > box.y0) & (y < box.y1)


def _sampled(points: np.ndarray) -> np.ndarray:
    """``points`` (display coordinates) with points added every :data:`_STEP` pixels between them."""
    if len(points) < 2:
        return points
    out = [points[:1]]
    for a, b in zip(points[:-1], points[1:], strict=True):
        length = float(np.hypot(*(b - a)))
        if not np.isfinite(length):
            continue
        n = max(1, int(length // _STEP))
        t = np.linspace(0.0, 1.0, n + 1)[1:, None]
        out.append(a + t * (b - a))
    return np.concatenate(out)


def _data_points(ax: Any) -> np.ndarray:
    """Display coordinates of the points, sampled line vertices and scatter offsets ``ax`` shows."""
    from matplotlib.collections import LineCollection, PathCollection
    from matplotlib.lines import Line2D
    from matplotlib.patches import Polygon

    chunks = []
    for artist in ax.get_children():
        if not artist.get_visible():
            continue
        if isinstance(artist, Line2D):
            if not _in_data(artist, ax):
                continue  # axhline / axvline: a reference line across the Axes, not data
            xy = artist.get_xydata()
            if len(xy) == 0:
                continue
            shown = artist.get_transform().transform(np.asarray(xy, dtype=float))
            shown = shown[np.isfinite(shown).all(axis=1)]
            has_line = artist.get_linestyle() not in ("None", "none", "", " ") and artist.get_linewidth() > 0
            chunks.append(_sampled(shown) if has_line else shown)
        elif isinstance(artist, PathCollection):
            offsets = np.asarray(artist.get_offsets(), dtype=float)
            if len(offsets):
                chunks.append(artist.get_offset_transform().transform(offsets))
        elif isinstance(artist, Polygon) and artist.get_gid() != "maze":  # a step histogram's outline
            if _in_data(artist, ax):
                for ring in artist.get_path().to_polygons(closed_only=False):
                    if len(ring):
                        chunks.append(_sampled(artist.get_transform().transform(np.asarray(ring, dtype=float))))
        elif isinstance(artist, LineCollection):
            for segment in artist.get_segments():
                if len(segment):
                    chunks.append(_sampled(artist.get_transform().transform(np.asarray(segment, dtype=float))))
    if not chunks:
        return np.zeros((0, 2))
    points = np.concatenate(chunks)
    points = points[np.isfinite(points).all(axis=1)]
    return points[_inside(points, _shrunk(ax.get_window_extent(), -_SLACK))]


def _bars(ax: Any) -> list:
    """Display boxes of the bars ``ax`` shows (rectangles of positive area, cut to the Axes)."""
    from matplotlib.patches import Rectangle
    from matplotlib.transforms import Bbox

    frame = ax.get_window_extent()
    boxes = []
    for patch in ax.patches:
        if not (isinstance(patch, Rectangle) and patch.get_visible()) or patch.get_width() == 0:
            continue
        if patch.get_gid() == "maze":  # a maze's floor and walls are the map, not data
            continue
        if patch.get_height() == 0 or not _in_data(patch, ax):
            continue  # a rectangle placed in Axes coordinates (a frame, a legend's box) is no bar
        box = Bbox.intersection(patch.get_window_extent(), frame)
        if box is not None and box.width > _SLACK and box.height > _SLACK:
            boxes.append(box)
    return boxes


def _texts(fig: Figure) -> list[tuple[str, Any]]:
    """(name, display box) of every non-empty title, axis label, super-title and legend."""
    found = []
    for name in ("_suptitle", "_supxlabel", "_supylabel"):
        text = getattr(fig, name, None)
        if text is not None and text.get_visible() and text.get_text().strip():
            found.append((f"figure {name[1:]} {text.get_text()[:30]!r}", text))
    for i, ax in enumerate(fig.axes):
        if not ax.get_visible():
            continue
        where = f"panel {i}"
        for text in (ax.title, ax._left_title, ax._right_title, ax.xaxis.label, ax.yaxis.label):
            if text.get_visible() and text.get_text().strip():
                found.append((f"{where} {text.get_text()[:30]!r}", text))
    for legend in _legends(fig):
        found.append(("legend", legend))
    renderer = fig.canvas.get_renderer()
    return [(name, artist.get_window_extent(renderer)) for name, artist in found]


def _covered(ax: Any, box: Any) -> tuple[int, int]:
    """``(data points, bars)`` of ``ax`` under ``box`` (a legend's display box, shrunk)."""
    return int(_inside(_data_points(ax), box).sum()), sum(1 for bar in _bars(ax) if _shrunk(bar).overlaps(box))


def figure_problems(fig: Figure) -> list[str]:
    """What keeps ``fig`` from reading at a glance (see the module's docstring); empty if nothing.

    Draws the figure first, so that every box is where the page shows it.
    """
    fig.canvas.draw()
    problems = []
    panels = _panels(fig)
    if len(panels) > MAX_PANELS:
        problems.append(f"{len(panels)} panels (at most {MAX_PANELS})")
    for legend in _legends(fig):
        box = _shrunk(legend.get_window_extent())
        for i, ax in enumerate(fig.axes):
            if not ax.get_visible():
                continue
            covered, bars = _covered(ax, box)
            if covered or bars:
                what = ", ".join(
                    part for part in (f"{covered} data points" * bool(covered), f"{bars} bars" * bool(bars)) if part
                )
                title = ax.get_title() or ax.get_ylabel()
                problems.append(f"the legend covers {what} of panel {i} ({title[:30]!r})")
    drawn = fig.get_tightbbox(fig.canvas.get_renderer()).width  # inches
    if drawn > PAGE_WIDTH + 0.01:
        problems.append(f"drawn {drawn:.2f} in wide, beyond the page's {PAGE_WIDTH:g} in")
    texts = _texts(fig)
    for i, (name_a, box_a) in enumerate(texts):
        for name_b, box_b in texts[i + 1 :]:
            if _shrunk(box_a).overlaps(_shrunk(box_b)):
                problems.append(f"{name_a} overlaps {name_b}")
    return problems


def check_figure(fig: Any) -> None:
    """Raise :class:`FigureProblem` when ``fig`` (a Figure, an Axes or an array of Axes) does not
    read at a glance; see :func:`figure_problems`."""
    if not hasattr(fig, "canvas"):
        fig = np.ravel(np.asarray(fig, dtype=object))[0].figure if not hasattr(fig, "figure") else fig.figure
    problems = figure_problems(fig)
    if problems:
        label = fig.texts[0].get_text() if fig.texts else (fig.axes[0].get_title() if fig.axes else "")
        raise FigureProblem(f"figure {label[:40]!r}: " + "; ".join(problems))


#: Problems found by :func:`check_every_figure`'s hook, in the order found.
_FOUND: list[str] = []
#: The figures checked so far (weak references: a closed figure is forgotten).
_CHECKED: weakref.WeakSet = weakref.WeakSet()


def _check_open_figures() -> None:
    import matplotlib.pyplot as plt

    for number in plt.get_fignums():
        fig = plt.figure(number)
        if fig in _CHECKED:
            continue
        _CHECKED.add(fig)
        try:
            check_figure(fig)
        except FigureProblem as problem:
            _FOUND.append(str(problem))


def check_every_figure() -> None:
    """Check every figure the running IPython kernel draws from now on, before it is shown.

    At the end of each cell, each figure open in pyplot that was not checked yet is checked with
    :func:`check_figure` (the hook runs before the inline backend shows and closes the cell's
    figures). Problems are kept, not raised (a hook cannot fail a cell):
    :func:`assert_figures_readable` raises on them. Outside IPython this does nothing.
    """
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - IPython comes with every notebook kernel
        return
    shell = get_ipython()
    if shell is None:
        return
    callbacks = shell.events.callbacks["post_execute"]
    if any(getattr(c, "_opcc_edu_figure_check", False) for c in callbacks):
        return

    def hook() -> None:
        _check_open_figures()

    hook._opcc_edu_figure_check = True  # type: ignore[attr-defined]
    callbacks.insert(0, hook)  # before the inline backend's flush_figures closes them


def assert_figures_readable() -> None:
    """Raise :class:`FigureProblem` listing every figure :func:`check_every_figure` found wanting
    (and also check the figures open now)."""
    _check_open_figures()
    found, _FOUND[:] = list(dict.fromkeys(_FOUND)), []
    if found:
        raise FigureProblem(f"{len(found)} figure(s) do not read at a glance:\n" + "\n".join(found))


#: Places inside the Axes that :func:`place_legend` tries, in order.
_INSIDE = (
    "upper left",
    "upper right",
    "lower right",
    "lower left",
    "center right",
    "center left",
    "upper center",
    "lower center",
)


def _legend_is_clear(fig: Figure, legend: Any) -> bool:
    fig.canvas.draw()
    box = _shrunk(legend.get_window_extent())
    return not any(any(_covered(ax, box)) for ax in fig.axes if ax.get_visible())


def place_legend(ax: Any, *args: Any, outside: str = "right", **kwargs: Any) -> Any:
    """``ax.legend(*args, **kwargs)`` at the first place where it covers no data, else outside
    (a ``loc`` or ``bbox_to_anchor`` given is ignored: the place is chosen here).

    Tries each corner and side of the Axes in turn with :func:`figure_problems`' test of legend
    over data, keeping the first clear one (a fixed place, unlike ``"best"``); else beside the
    Axes (``outside="right"``) or below it (``"below"``), with constrained layout to make room.
    Call it last, once limits and layout are final (no ``tight_layout`` after it). Returns the Legend.
    """
    fig = ax.figure
    kwargs.pop("loc", None)
    kwargs.pop("bbox_to_anchor", None)
    if ax.get_legend() is not None:
        ax.get_legend().remove()
    for loc in _INSIDE:
        legend = ax.legend(*args, loc=loc, **kwargs)
        if _legend_is_clear(fig, legend):
            return legend
    if fig.get_layout_engine() is None:
        fig.set_layout_engine("constrained")
    if outside not in ("right", "below"):
        raise ValueError(f"outside must be 'right' or 'below', got {outside!r}")
    if outside == "below":  # under the tick labels and the x label, at a distance in points
        from matplotlib.transforms import offset_copy

        kwargs.setdefault("ncols", 2)
        fig.canvas.draw()
        frame = ax.get_window_extent()
        depth = (frame.y0 - ax.get_tightbbox().y0) * 72.0 / fig.dpi + 4.0
        below = offset_copy(ax.transAxes, fig=fig, y=-depth, units="points")
        return ax.legend(*args, loc="upper center", bbox_to_anchor=(0.5, 0.0), bbox_transform=below, **kwargs)
    return ax.legend(*args, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0, **kwargs)
