"""The plotting package: every plot_* returns its Axes, fits the page, and keeps fonts readable."""

import subprocess
import sys

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest

from opcc_edu import metrics, plotting
from opcc_edu.plotting import MIN_FONT_SIZE, PAGE_WIDTH, figure_size, use_book_style
from opcc_edu.scoring import MemberValues

PRED = np.array([1, 0, 1, 1, 0, 1])
TARGET = np.array([1, 1, 1, 0, 0, 1])
CONF = np.array([0.9, 0.8, 0.7, 0.6, 0.5, 0.4])


@pytest.fixture(autouse=True)
def _close_figures():
    with matplotlib.rc_context():
        yield
    plt.close("all")


def _curves(n_runs):
    coverage = np.linspace(0.0, 1.0, 11)
    ci = np.full(11, 0.02) if n_runs > 1 else np.full(11, np.nan)
    return {
        "10": {"coverage": coverage, "risk": 0.1 * coverage, "ci": ci, "n_runs": np.asarray(n_runs)},
        "50": {"coverage": coverage, "risk": 0.3 * coverage, "ci": ci, "n_runs": np.asarray(n_runs)},
    }


def _comparison():
    return pd.DataFrame(
        {
            "environment": ["hopper", "hopper", "hopper", "hopper"],
            "level": ["10", "50", "10", "50"],
            "metric": ["aurcc", "aurcc", "rpp", "rpp"],
            "ours_mean": [0.05, 0.15, 0.01, 0.02],
            "ours_ci": [0.01, np.nan, 0.005, 0.004],
            "paper_mean": [0.017, np.nan, 0.001, 0.047],
            "paper_ci": [0.002, np.nan, 0.001, 0.003],
        }
    )


def _texts(fig):
    """Every visible, non-empty text of a figure (titles, labels, ticks, legends)."""
    return [t for t in fig.findobj(matplotlib.text.Text) if t.get_visible() and t.get_text().strip()]


def test_low_level_modules_do_not_import_matplotlib():
    code = "import sys, opcc_edu.metrics, opcc_edu.confidence, opcc_edu.config; print('matplotlib' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_plot_risk_coverage_labels_the_aurcc_and_reuses_a_given_axes():
    ax = plotting.plot_risk_coverage(PRED, TARGET, CONF, label="hand")
    expected = metrics.aurcc(PRED, TARGET, CONF)
    assert ax.get_legend().get_texts()[0].get_text() == f"hand (AURCC = {expected:.3f})"
    assert ax.figure.get_size_inches()[0] <= PAGE_WIDTH
    _, other = plt.subplots()
    assert plotting.plot_risk_coverage(PRED, TARGET, CONF, ax=other) is other
    coverage, risk, _ = metrics.risk_coverage_curve(PRED, TARGET, CONF)
    np.testing.assert_allclose(other.get_lines()[0].get_xydata(), np.column_stack([coverage, risk]))


def test_metrics_keeps_plot_risk_coverage_as_a_wrapper_of_plotting():
    _, ax = plt.subplots()
    assert plotting.plot_risk_coverage(PRED, TARGET, CONF, ax=ax, label="m") is ax
    ours = plotting.plot_risk_coverage(PRED, TARGET, CONF, label="m")
    np.testing.assert_array_equal(ax.get_lines()[0].get_xydata(), ours.get_lines()[0].get_xydata())
    assert ax.get_legend().get_texts()[0].get_text() == ours.get_legend().get_texts()[0].get_text()


@pytest.mark.parametrize("n_runs, bands", [(1, 0), (3, 2)])
def test_plot_level_risk_coverage_draws_a_band_only_with_an_interval(n_runs, bands):
    ax = plotting.plot_level_risk_coverage(_curves(n_runs), title="t", titles={"10": "h = 10"})
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == [f"h = 10 (n={n_runs})", f"50 (n={n_runs})"]
    assert len(ax.collections) == bands
    assert ax.get_title() == "t"


def test_plot_comparison_draws_ours_and_the_paper_and_rejects_unknown_metrics():
    ax = plotting.plot_comparison(_comparison(), "aurcc", titles={"10": "short"})
    assert [t.get_text() for t in ax.get_xticklabels()] == ["short", "50"]
    heights = [p.get_height() for p in ax.patches]
    assert heights == pytest.approx([0.05, 0.15, 0.017, 0.0])  # a missing paper cell is drawn at zero
    assert ax.figure.get_size_inches()[0] <= PAGE_WIDTH
    with pytest.raises(ValueError, match="metric"):
        plotting.plot_comparison(_comparison(), "auroc")


def test_book_style_keeps_every_text_of_a_page_wide_figure_readable():
    use_book_style()
    fig, axes = plt.subplots(1, 2, figsize=figure_size(columns=2))
    plotting.plot_level_risk_coverage(_curves(2), ax=axes[0], title="level curves")
    plotting.plot_risk_coverage(PRED, TARGET, CONF, ax=axes[1], label="hand")
    fig.canvas.draw()
    sizes = [t.get_fontsize() for t in _texts(fig)]
    assert sizes and min(sizes) >= MIN_FONT_SIZE
    assert fig.get_size_inches()[0] <= PAGE_WIDTH


def test_figure_size_fits_the_page_and_checks_its_arguments():
    assert figure_size(columns=3, rows=2, panel_aspect=0.5) == (PAGE_WIDTH, PAGE_WIDTH / 3 * 0.5 * 2)
    assert figure_size(width=100.0)[0] == PAGE_WIDTH
    for bad in ({"columns": 0}, {"rows": 1.5}, {"panel_aspect": -1.0}, {"width": 0.0}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            figure_size(**bad)


def test_draw_maze_draws_walls_and_the_goal():
    ax = plotting.draw_maze("maze2d-umaze")
    assert ax.get_title() == "maze2d-umaze"
    assert len(ax.patches) > 10
    with pytest.raises(ValueError, match="maze"):
        plotting.draw_maze("hopper")


def test_state_visitation_subsamples_each_dataset_to_max_points():
    rng = np.random.default_rng(0)
    sets = {name: {"observations": rng.normal(size=(200, 4))} for name in ("a", "b")}
    ours = plotting.plot_state_visitation(sets, max_points=50)
    assert [len(c.get_offsets()) for c in ours.collections] == [50, 50]


def test_plot_voting_prefix_counts_the_distinct_confidences():
    rng = np.random.default_rng(0)
    values = MemberValues(rng.normal(size=(40, 7)), rng.normal(size=(40, 7)), rng.integers(0, 2, 40), np.full(40, 10))
    ax = plotting.plot_voting_prefix(values, 3)
    distinct = int(ax.get_title().split()[0])
    assert 1 <= distinct <= 3 // 2 + 1 and "(at most 2)" in ax.get_title()
    for bad in (0, 8, True):
        with pytest.raises(ValueError, match="members"):
            plotting.plot_voting_prefix(values, bad)
