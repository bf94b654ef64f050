"""Every figure of the package: one ``plot_*(..., ax=None) -> Axes`` function per picture.

* :mod:`.style` -- the book's style (:func:`use_book_style`) and page-sized figures.
* :mod:`.benchmark` -- maze drawings, query value scatter, value gaps, one query's two sides,
  the query explorer.
* :mod:`.selective` -- risk-coverage curves, per-level curves of an ablation, ours against the
  paper, ensemble voting with the first m members.
* :mod:`.data` -- offline datasets: query-to-dataset distances, maze visitation, state scatter.
* :mod:`.calibration` -- reliability diagrams and interval coverage curves.
* :mod:`.diagnose` -- the value-error diagnostics: error by source and horizon, the reward map.
* :mod:`.check` -- whether a drawn figure reads at a glance (legends off the data, texts apart,
  at most a dozen panels), and the hook that checks every figure a chapter draws.

Every function that draws takes ``ax=None`` (or ``axes=None``) and returns what it drew on, so
figures compose in notebooks. matplotlib is imported by the functions, not by this package, and
no low-level module (metrics, confidence, config) imports this package.
"""

from .benchmark import (
    ANSWER_COLORS,
    SIDE_COLORS,
    draw_maze,
    maze_geometry,
    plot_gap_histogram,
    plot_query,
    plot_start_frames,
    plot_value_scatter,
    query_explorer,
    query_trajectories,
    render_states,
)
from .calibration import plot_coverage_curve, plot_reliability
from .check import (
    MAX_PANELS,
    FigureProblem,
    assert_figures_readable,
    check_every_figure,
    check_figure,
    figure_problems,
    place_legend,
)
from .data import plot_maze_visitation, plot_query_distances, plot_state_visitation
from .diagnose import plot_reward_map, plot_value_error
from .selective import plot_answers, plot_comparison, plot_level_risk_coverage, plot_risk_coverage, plot_voting_prefix
from .style import BOOK_STYLE, MIN_FONT_SIZE, PAGE_WIDTH, figure_size, new_axes, use_book_style

__all__ = [
    "ANSWER_COLORS",
    "FigureProblem",
    "MAX_PANELS",
    "assert_figures_readable",
    "check_every_figure",
    "check_figure",
    "figure_problems",
    "BOOK_STYLE",
    "MIN_FONT_SIZE",
    "PAGE_WIDTH",
    "SIDE_COLORS",
    "draw_maze",
    "figure_size",
    "maze_geometry",
    "new_axes",
    "place_legend",
    "plot_answers",
    "plot_comparison",
    "plot_value_error",
    "plot_reward_map",
    "plot_reliability",
    "plot_coverage_curve",
    "plot_gap_histogram",
    "plot_level_risk_coverage",
    "plot_maze_visitation",
    "plot_query",
    "plot_query_distances",
    "plot_risk_coverage",
    "plot_start_frames",
    "plot_state_visitation",
    "plot_value_scatter",
    "plot_voting_prefix",
    "query_explorer",
    "query_trajectories",
    "render_states",
    "use_book_style",
]
