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

from ..utils import lazy_exports

# Loaded on first use, so that importing one drawing module does not load them all.
_LAZY: dict[str, str] = {
    "ANSWER_COLORS": "benchmark",
    "SIDE_COLORS": "benchmark",
    "draw_maze": "benchmark",
    "maze_geometry": "benchmark",
    "plot_gap_histogram": "benchmark",
    "plot_query": "benchmark",
    "plot_start_frames": "benchmark",
    "plot_value_scatter": "benchmark",
    "query_explorer": "benchmark",
    "query_trajectories": "benchmark",
    "render_states": "benchmark",
    "plot_coverage_curve": "calibration",
    "plot_reliability": "calibration",
    "MAX_PANELS": "check",
    "FigureProblem": "check",
    "assert_figures_readable": "check",
    "check_every_figure": "check",
    "check_figure": "check",
    "figure_problems": "check",
    "place_legend": "check",
    "plot_maze_visitation": "data",
    "plot_query_distances": "data",
    "plot_state_visitation": "data",
    "plot_reward_map": "diagnose",
    "plot_value_error": "diagnose",
    "plot_answers": "selective",
    "plot_comparison": "selective",
    "plot_level_risk_coverage": "selective",
    "plot_risk_coverage": "selective",
    "plot_voting_prefix": "selective",
    "BOOK_STYLE": "style",
    "MIN_FONT_SIZE": "style",
    "PAGE_WIDTH": "style",
    "figure_size": "style",
    "new_axes": "style",
    "use_book_style": "style",
}
__getattr__, __dir__ = lazy_exports(__name__, globals(), _LAZY)

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
