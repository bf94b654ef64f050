"""Every figure the package draws is readable on the book's page: labelled axes, text of 9 pt or more.

Each plotting function of :mod:`opcc_edu.plotting` (and the ablation figures of
:mod:`opcc_edu.lab.findings.results`) runs on small synthetic inputs in the book's style
(:func:`opcc_edu.plotting.use_book_style`, as every chapter sets it). Then, in the figure as saved:

* every visible Axes (colour bars aside) has a non-empty x and y label -- its own, or the one
  its row (y) or column (x) of panels shares, or the figure's ``supxlabel``/``supylabel``;
* every visible text (titles, labels, tick labels, legends) is at least
  :data:`~opcc_edu.plotting.MIN_FONT_SIZE` points at the size the page shows it: a figure wider
  than :data:`~opcc_edu.plotting.PAGE_WIDTH` is shrunk to the page, and its text with it;
* it reads at a glance (:func:`opcc_edu.plotting.figure_problems`): no legend over the data's
  points, bars or lines, no title, axis label, super-title or legend over another, at most
  :data:`~opcc_edu.plotting.MAX_PANELS` panels;
* on a maze, a colour map lies below the walls and the walls below the paths.

Each check is shown to fail on a figure made bad on purpose (the tests at the end). The
chapters check their own figures with the same function, in a hidden cell
(:func:`opcc_edu.plotting.check_every_figure`).
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import matplotlib.text
import numpy as np
import pandas as pd
import pytest

from opcc_edu import envs, plotting
from opcc_edu.datasets.coverage import CoverageResult
from opcc_edu.plotting import MAX_PANELS, MIN_FONT_SIZE, PAGE_WIDTH, FigureProblem
from opcc_edu.queries import QuerySet
from opcc_edu.scoring import MemberValues


@pytest.fixture(autouse=True)
def _book_style():
    with matplotlib.rc_context():
        plotting.use_book_style()
        yield
    plt.close("all")


def _queries(env_name: str, n: int = 24, seed: int = 0) -> QuerySet:
    """``n`` queries of horizons 10 and 20 whose sides start at random positions of the maze or body."""
    rng = np.random.default_rng(seed)
    spec = envs.get_spec(env_name)
    value_a, value_b = rng.uniform(0, 20, n), rng.uniform(0, 20, n)
    obs_a, obs_b = np.zeros((n, spec.obs_dim)), np.zeros((n, spec.obs_dim))
    if spec.is_maze:  # ball positions in open floor near the maze's centre
        obs_a[:, :2], obs_b[:, :2] = rng.uniform(-0.3, 0.3, (n, 2)), rng.uniform(-0.3, 0.3, (n, 2))
    return QuerySet(
        env_name=env_name,
        obs_a=obs_a,
        obs_b=obs_b,
        action_a=np.zeros((n, spec.act_dim)),
        action_b=np.zeros((n, spec.act_dim)),
        policy_a=rng.integers(1, 5, n),
        policy_b=rng.integers(1, 5, n),
        horizon=np.where(np.arange(n) % 2 == 0, 10, 20),
        gamma=np.ones(n),
        target=(value_a < value_b).astype(np.int8),
        value_a=value_a,
        value_b=value_b,
        returns_a=value_a[:, None],
        returns_b=value_b[:, None],
        state_a=np.zeros((n, 4)),
        state_b=np.zeros((n, 4)),
        same_state=np.zeros(n, dtype=bool),
        metadata={},
    )


def _coverage(seed: int) -> CoverageResult:
    rng = np.random.default_rng(seed)
    return CoverageResult(
        distance_a=rng.gamma(2.0, 1.0, 50),
        distance_b=rng.gamma(2.0, 1.0, 50),
        nearest_a=np.zeros(50, dtype=np.int64),
        nearest_b=np.zeros(50, dtype=np.int64),
        center=np.zeros(6),
        scale=np.ones(6),
        normalize="standard",
        dataset_size=100,
    )


def _curves() -> dict[str, dict[str, np.ndarray]]:
    coverage = np.linspace(0.0, 1.0, 11)
    return {
        level: {"coverage": coverage, "risk": slope * coverage, "ci": np.full(11, 0.02), "n_runs": np.asarray(3)}
        for level, slope in (("10", 0.1), ("50", 0.3))
    }


def _comparison(environments: tuple[str, ...]) -> pd.DataFrame:
    rows = [
        (env, level, metric, 0.1, 0.01, 0.12, 0.02)
        for env in environments
        for level in ("10", "20", "30")
        for metric in ("aurcc", "rpp", "cr_k")
    ]
    columns = ["environment", "level", "metric", "ours_mean", "ours_ci", "paper_mean", "paper_ci"]
    return pd.DataFrame(rows, columns=columns)


def _run_values(seed: int = 0) -> MemberValues:
    rng = np.random.default_rng(seed)
    return MemberValues(rng.normal(size=(40, 7)), rng.normal(size=(40, 7)), rng.integers(0, 2, 40), np.full(40, 10))


PRED = np.array([1, 0, 1, 1, 0, 1, 0, 1])
TARGET = np.array([1, 1, 1, 0, 0, 1, 0, 0])
CONF = np.array([0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2])
MAZE_DATA = {"observations": np.random.default_rng(1).uniform(-1.4, 1.4, (500, 4))}


class _Decomposition:
    """What :func:`opcc_edu.plotting.plot_value_error` reads of a value-error decomposition."""

    env_name = "hopper"
    horizon = np.repeat([10, 20, 30], 8)
    true = np.random.default_rng(3).normal(size=24)
    open_loop = {1: 0.01, 5: 0.04, 10: 0.1, 20: 0.3}

    def variants(self) -> dict[str, np.ndarray]:
        rng = np.random.default_rng(4)
        return {name: self.true[:, None] + scale * rng.normal(size=(24, 5)) for name, scale in (("all", 1), ("one", 2))}


class _RewardMap:
    """What :func:`opcc_edu.plotting.plot_reward_map` reads of a reward map."""

    env_name = "maze2d-umaze"
    extent = (-2.5, 2.5, -2.5, 2.5)
    bias = np.random.default_rng(5).normal(size=(10, 10))
    data_visits = np.random.default_rng(6).integers(0, 50, (10, 10))


class _Answers:
    """What :func:`opcc_edu.plotting.plot_answers` reads of an ``Answers``."""

    predictions = {"ev": PRED, "pci": PRED}
    confidences = {"ev": CONF, "pci": CONF[::-1].copy()}
    target = TARGET
    config = object()
    env_name, dataset_name, ensemble_size = "hopper", "medium", 5


#: name -> a call that draws one figure of the package on synthetic inputs.
FIGURES = {
    "plot_risk_coverage": lambda: plotting.plot_risk_coverage(PRED, TARGET, CONF, label="ensemble voting"),
    "plot_level_risk_coverage": lambda: plotting.plot_level_risk_coverage(_curves(), title="hopper"),
    "plot_comparison (one environment)": lambda: plotting.plot_comparison(_comparison(("hopper",))),
    "plot_comparison (six environments)": lambda: plotting.plot_comparison(
        _comparison(("maze2d-open", "maze2d-umaze", "maze2d-medium", "halfcheetah", "hopper", "walker2d")), "rpp"
    ),
    "plot_voting_prefix": lambda: plotting.plot_voting_prefix(_run_values(), 5),
    "draw_maze": lambda: plotting.draw_maze("maze2d-medium"),
    "plot_value_scatter (maze)": lambda: plotting.plot_value_scatter(_queries("maze2d-open")),
    "plot_value_scatter (locomotion)": lambda: plotting.plot_value_scatter(_queries("hopper")),
    "plot_gap_histogram": lambda: plotting.plot_gap_histogram(_queries("maze2d-umaze")),
    "plot_gap_histogram (log)": lambda: plotting.plot_gap_histogram(_queries("hopper"), log=True),
    "plot_query (maze)": lambda: plotting.plot_query(_queries("maze2d-open"), 0),
    "plot_query_distances": lambda: plotting.plot_query_distances({"random": _coverage(0), "expert": _coverage(1)}),
    "plot_query_distances (log)": lambda: plotting.plot_query_distances(_coverage(2), log=True),
    "plot_maze_visitation": lambda: plotting.plot_maze_visitation(MAZE_DATA, "maze2d-umaze"),
    "plot_state_visitation": lambda: plotting.plot_state_visitation(
        {name: {"observations": np.random.default_rng(i).normal(size=(300, 5))} for i, name in enumerate("ab")}
    ),
    "plot_reliability": lambda: plotting.plot_reliability(
        np.random.default_rng(7).uniform(0.5, 1, 200), np.random.default_rng(8).integers(0, 2, 200), label="EV"
    ),
    "plot_coverage_curve": lambda: plotting.plot_coverage_curve(
        np.linspace(0, 1, 11), np.linspace(0, 1, 11) ** 1.5, label="members"
    ),
    "plot_answers": lambda: plotting.plot_answers(_Answers()),
    "plot_value_error": lambda: plotting.plot_value_error(_Decomposition()),
    "plot_reward_map": lambda: plotting.plot_reward_map(_RewardMap()),
}


def _figure(drawn) -> matplotlib.figure.Figure:
    first = np.ravel(np.asarray(drawn, dtype=object))[0] if not hasattr(drawn, "figure") else drawn
    return first.figure


def _label_of_panels(ax, axis: str) -> str:
    """The label that reads for ``ax``: its own, its row's (y) or column's (x) first, the figure's."""
    own = (ax.get_xlabel() if axis == "x" else ax.get_ylabel()).strip()
    if own:
        return own
    fig = ax.figure
    sup = getattr(fig, f"_sup{axis}label", None)
    if sup is not None and sup.get_visible() and sup.get_text().strip():
        return sup.get_text()
    spec = ax.get_subplotspec()
    if spec is None:
        return ""
    for other in _panels(fig):
        other_spec = other.get_subplotspec()
        if other is ax or other_spec is None:
            continue
        same = other_spec.rowspan == spec.rowspan if axis == "y" else other_spec.colspan == spec.colspan
        label = (other.get_xlabel() if axis == "x" else other.get_ylabel()).strip()
        if same and label:
            return label
    return ""


def _panels(fig) -> list:
    """The visible Axes with axes drawn, colour bars aside."""
    return [ax for ax in fig.axes if ax.get_visible() and ax.axison and ax.get_label() != "<colorbar>"]


def _small_texts(fig) -> list[tuple[str, float]]:
    """Visible texts below the minimum size at the width the page shows the figure."""
    shown = min(1.0, PAGE_WIDTH / fig.get_size_inches()[0])
    return [
        (t.get_text()[:40], round(t.get_fontsize() * shown, 1))
        for t in fig.findobj(matplotlib.text.Text)
        if t.get_visible() and t.get_text().strip() and t.get_fontsize() * shown < MIN_FONT_SIZE
    ]


@pytest.mark.parametrize("name", sorted(FIGURES))
def test_package_figure_is_labelled_and_readable(name):
    fig = _figure(FIGURES[name]())
    fig.canvas.draw()  # tick labels exist once drawn
    panels = _panels(fig)
    assert panels, f"{name}: no Axes drawn"
    unlabelled = [
        (ax.get_title() or f"panel {i}", axis)
        for i, ax in enumerate(panels)
        for axis in "xy"
        if not _label_of_panels(ax, axis)
    ]
    assert not unlabelled, f"{name}: axes without a label: {unlabelled}"
    small = _small_texts(fig)
    assert not small, f"{name}: text below {MIN_FONT_SIZE:g} pt on the page: {small[:5]}"


@pytest.mark.parametrize("name", sorted(FIGURES))
def test_package_figure_reads_at_a_glance(name):
    fig = _figure(FIGURES[name]())
    assert plotting.figure_problems(fig) == [], name


def test_ablation_figures_of_the_committed_results_are_labelled_and_readable():
    from opcc_edu.lab.findings.results import draw_comparison, draw_rccs, load_committed

    committed = load_committed("horizon")
    assert committed, "no committed results of the horizon ablation (results/ablations)"
    entry = committed[min(committed, key=lambda name: len(committed[name].results))]
    for fig in (draw_rccs(entry), draw_comparison(entry).figure):
        fig.canvas.draw()
        unlabelled = [(ax.get_title(), axis) for ax in _panels(fig) for axis in "xy" if not _label_of_panels(ax, axis)]
        assert not unlabelled, f"axes without a label: {unlabelled}"
        small = _small_texts(fig)
        assert not small, f"text below {MIN_FONT_SIZE:g} pt on the page: {small[:5]}"
        assert plotting.figure_problems(fig) == []


def test_the_checks_find_a_missing_label_and_small_text():
    fig, axes = plt.subplots(1, 2, figsize=(PAGE_WIDTH * 2, 3))
    axes[0].set_xlabel("step")
    axes[0].set_ylabel("return")
    axes[1].plot([0, 1])
    fig.canvas.draw()
    assert _label_of_panels(axes[1], "y") == "return"  # the row shares its first panel's y label
    assert _label_of_panels(axes[1], "x") == ""
    assert _small_texts(fig)  # 9 pt text in a figure twice the page's width is 4.5 pt on the page


# --------------------------------------------------------------------------------------------
# Each check of figure_problems fails on a figure made bad on purpose
# --------------------------------------------------------------------------------------------
def _filled_axes():
    """An Axes whose points fill its whole frame: no place inside is free for a legend."""
    fig, ax = plt.subplots(figsize=(5, 3.5))
    grid = np.linspace(0.02, 0.98, 25)
    gx, gy = np.meshgrid(grid, grid)
    ax.scatter(gx.ravel(), gy.ravel(), s=4, label="points")
    ax.set(xlim=(0, 1), ylim=(0, 1), xlabel="x (m)", ylabel="y (m)")
    return fig, ax


def test_a_legend_over_points_is_found():
    fig, ax = _filled_axes()
    ax.legend(loc="center")
    problems = plotting.figure_problems(fig)
    assert len(problems) == 1 and "legend covers" in problems[0] and "data points" in problems[0]
    with pytest.raises(FigureProblem, match="legend covers"):
        plotting.check_figure(fig)


def test_a_legend_over_a_straight_line_or_a_bar_is_found():
    fig, (left, right) = plt.subplots(1, 2, figsize=(7, 3), layout="constrained")
    left.plot([0, 1], [0, 1], label="a line of two vertices")  # no vertex under the legend, the line is
    left.legend(loc="center")
    right.bar([0, 1, 2], [5, 5, 5], width=0.9, label="bars")
    right.legend(loc="center")
    problems = plotting.figure_problems(fig)
    fig2, ax = plt.subplots(figsize=(5, 3))
    ax.hist(np.repeat([0.0, 1.0, 2.0], [10, 10, 10]), bins=3, histtype="step", label="a step histogram")
    ax.legend(loc="upper center")
    assert any("data points" in p for p in plotting.figure_problems(fig2))
    assert any("data points of panel 0" in p for p in problems), problems
    assert any("bars of panel 1" in p for p in problems), problems


def test_reference_lines_and_a_legend_beside_the_data_pass():
    fig, ax = plt.subplots(figsize=(5, 3))
    ax.plot([0, 1], [0, 0.2], label="low line")
    ax.axhline(0.9, color="k", label="reference")  # across the Axes: not data
    ax.set(ylim=(0, 1), xlabel="x", ylabel="y")
    ax.legend(loc="upper left")
    assert plotting.figure_problems(fig) == []


def test_overlapping_titles_and_labels_are_found():
    fig, (left, right) = plt.subplots(1, 2, figsize=(5, 2.5))  # no layout engine: titles collide
    left.set_title("a long title of the left panel that runs on")
    right.set_title("and the right panel's title, as long")
    left.set(xlabel="x", ylabel="y")
    problems = plotting.figure_problems(fig)
    assert any("overlaps" in p and "left panel" in p for p in problems), problems
    fig, ax = plt.subplots(figsize=(5, 2), layout="constrained")
    fig.suptitle("a figure title, at the left", x=0.0, ha="left")
    ax.set_ylabel("a y label far taller than this short panel can hold")
    assert any("suptitle" in p and "overlaps" in p for p in plotting.figure_problems(fig))


def test_a_legend_over_an_axis_label_is_found():
    fig, ax = plt.subplots(figsize=(5, 3), layout="constrained")
    ax.plot([0, 1], [0, 1], label="data")
    ax.set(xlabel="the x label", ylabel="y")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.02))  # below the panel: over its x label
    assert any("legend" in p and "x label" in p for p in plotting.figure_problems(fig))


def test_too_many_panels_are_found():
    fig, axes = plt.subplots(4, 4, figsize=(7, 7), layout="constrained")
    for ax in axes.flat:
        ax.set(xlabel="x", ylabel="y")
    assert MAX_PANELS < 16
    assert f"16 panels (at most {MAX_PANELS})" in plotting.figure_problems(fig)


def test_place_legend_finds_a_free_place_or_goes_outside():
    fig, ax = plt.subplots(figsize=(5, 3))
    ax.plot(np.linspace(0, 1, 50), np.linspace(0, 1, 50), label="rising")  # upper left is free
    ax.set(xlabel="x", ylabel="y")
    legend = plotting.place_legend(ax)
    assert plotting.figure_problems(fig) == []
    assert legend.get_window_extent().x0 < ax.get_window_extent().x0 + ax.get_window_extent().width / 2
    fig, ax = _filled_axes()
    legend = plotting.place_legend(ax)  # nowhere inside: beside the Axes, with room made for it
    assert plotting.figure_problems(fig) == []
    assert legend.get_window_extent().x0 >= ax.get_window_extent().x1


def test_the_chapter_hook_keeps_what_it_finds_and_raises_on_it():
    from opcc_edu.plotting import check

    fig, ax = _filled_axes()
    ax.legend(loc="center")
    check._check_open_figures()  # what the hook does at the end of a cell
    with pytest.raises(FigureProblem, match="1 figure"):
        plotting.assert_figures_readable()
    plotting.assert_figures_readable()  # reported once, then forgotten


def test_on_a_maze_the_map_lies_below_the_walls_and_the_walls_below_the_paths():
    ax = plotting.plot_maze_visitation(MAZE_DATA, "maze2d-umaze")
    ax.plot([-1, 1], [-1, 1], label="a path")
    walls = [p for p in ax.patches if p.get_gid() == "maze" and p.get_facecolor()[:3] != (1.0, 1.0, 1.0)]
    assert walls and ax.images
    image = max(i.get_zorder() for i in ax.images)
    assert min(w.get_zorder() for w in walls) > image
    assert min(line.get_zorder() for line in ax.get_lines()) > max(w.get_zorder() for w in walls)
    # a map drawn over the walls hides them: the check this test makes fails
    ax.imshow(np.ones((4, 4)), extent=(-2.5, 2.5, -2.5, 2.5), zorder=5)
    assert max(i.get_zorder() for i in ax.images) > min(w.get_zorder() for w in walls)


def test_a_figure_drawn_beyond_the_page_is_found():
    # a page-wide figure whose legend sits beside the Axes with no layout to make room for it:
    # the image saved around what is drawn is wider than the page
    fig, ax = plt.subplots(figsize=plotting.figure_size())
    ax.plot([0, 1], [0, 1], label="a line with a long name")
    ax.set_xlabel("x")
    ax.set_ylabel("y")
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0))
    assert any("beyond the page" in p for p in plotting.figure_problems(fig))
    ax.get_legend().remove()
    ax.legend(loc="upper left")
    assert not any("beyond the page" in p for p in plotting.figure_problems(fig))
