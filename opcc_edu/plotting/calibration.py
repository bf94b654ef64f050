"""Calibration figures: reliability diagrams and interval coverage curves (:mod:`opcc_edu.calibration`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..calibration import expected_calibration_error, miscalibration_area, reliability_curve

if TYPE_CHECKING:
    from matplotlib.axes import Axes


def plot_reliability(
    probability: Any, correct: Any, n_bins: int = 10, ax: Axes | None = None, label: str | None = None, **style: Any
) -> Axes:
    """Reliability diagram: accuracy against mean probability per bin, with the diagonal.

    Marker areas grow with the bin's share of answers; empty bins are not drawn. Returns the Axes
    (a new one when ``ax`` is None).
    """
    import matplotlib.pyplot as plt

    curve = reliability_curve(probability, correct, n_bins)
    if ax is None:
        _, ax = plt.subplots()
    used = curve.count > 0
    ece = expected_calibration_error(probability, correct, n_bins)
    text = f"ECE {ece:.3f}" if label is None else f"{label} (ECE {ece:.3f})"
    line = ax.plot(curve.mean_probability[used], curve.accuracy[used], marker="", label=text, **style)[0]
    share = curve.count[used] / curve.count.sum()
    ax.scatter(curve.mean_probability[used], curve.accuracy[used], s=12 + 200 * share, color=line.get_color())
    ax.plot([0, 1], [0, 1], color="k", lw=0.8, ls=":")
    # a margin around [0, 1]: the largest markers, at 0 or 1, stay whole inside the axes
    pad = 0.05
    ax.set(
        xlim=(-pad, 1 + pad),
        ylim=(-pad, 1 + pad),
        xlabel="P(right answer), mean in bin",
        ylabel="share right in bin",
    )
    return ax


def plot_coverage_curve(
    expected: Any, observed: Any, ax: Axes | None = None, label: str | None = None, **style: Any
) -> Axes:
    """Calibration curve of intervals: observed against expected coverage, with the diagonal.

    The legend entry carries the miscalibration area. Returns the Axes (a new one when ``ax`` is
    None).
    """
    import matplotlib.pyplot as plt

    area = miscalibration_area(expected, observed)
    if ax is None:
        _, ax = plt.subplots()
    text = f"area {area:.3f}" if label is None else f"{label} (area {area:.3f})"
    ax.plot(expected, observed, label=text, **style)
    ax.plot([0, 1], [0, 1], color="k", lw=0.8, ls=":")
    ax.set(xlim=(0, 1), ylim=(0, 1.02), xlabel="nominal coverage of the interval")
    ax.set_ylabel("observed coverage (share of sides)")
    return ax
