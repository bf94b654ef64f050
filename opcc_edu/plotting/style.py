"""The book's matplotlib style: one set of font sizes and one page width for every figure.

A figure wider than the page is shrunk to fit it, and its text with it. The book's pages show
:data:`PAGE_WIDTH` inches of figure at full size, so a figure at most that wide keeps the font
sizes set here (all at least 9 pt). Plot functions of :mod:`opcc_edu.plotting` that open their
own figure size it with :func:`figure_size`; chapters call :func:`use_book_style` once.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from matplotlib.axes import Axes

#: Width, in inches, of a figure shown at full size on a page of the book.
PAGE_WIDTH = 7.0

#: Smallest font size, in points, of any text in a figure of the book.
MIN_FONT_SIZE = 9.0

#: rcParams of the book's figures: every text at least :data:`MIN_FONT_SIZE` points.
BOOK_STYLE: dict[str, Any] = {
    "font.size": 10.0,
    "axes.titlesize": 10.0,
    "axes.labelsize": 10.0,
    "xtick.labelsize": 9.0,
    "ytick.labelsize": 9.0,
    "legend.fontsize": 9.0,
    "legend.title_fontsize": 9.0,
    "figure.titlesize": 11.0,
    "figure.dpi": 100,
    "savefig.dpi": 150,
    "figure.figsize": (PAGE_WIDTH * 0.7, PAGE_WIDTH * 0.5),
    "axes.grid": False,
    "axes.spines.top": False,
    "axes.spines.right": False,
}


def use_book_style() -> None:
    """Set matplotlib's global rcParams to :data:`BOOK_STYLE` (call once per chapter)."""
    import matplotlib as mpl

    mpl.rcParams.update(BOOK_STYLE)


def figure_size(
    columns: int = 1, rows: int = 1, panel_aspect: float = 0.72, width: float | None = None
) -> tuple[float, float]:
    """Size (width, height) in inches of a grid of panels that fits the page.

    Args:
        columns: panels side by side.
        rows: panels stacked.
        panel_aspect: height / width of one panel.
        width: total width (default and maximum: :data:`PAGE_WIDTH`).

    Returns:
        ``(width, height)`` for ``plt.subplots(figsize=...)``.
    """
    for name, value in (("columns", columns), ("rows", rows)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    if not (math.isfinite(panel_aspect) and panel_aspect > 0):
        raise ValueError(f"panel_aspect must be a positive number, got {panel_aspect!r}")
    total = PAGE_WIDTH if width is None else min(float(width), PAGE_WIDTH)
    if total <= 0:
        raise ValueError(f"width must be positive, got {width!r}")
    return total, total / columns * panel_aspect * rows


def new_axes(figsize: tuple[float, float] | None = None) -> Axes:
    """One new Axes in a new figure (``figsize`` default: :func:`figure_size`, 70% of the page)."""
    import matplotlib.pyplot as plt

    _, ax = plt.subplots(figsize=figsize or figure_size(width=0.7 * PAGE_WIDTH))
    return ax
