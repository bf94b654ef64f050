"""The paper's ablations: a declarative grid, a results store that never loses a run,
aggregation, the paper's numbers and reports.

Every experiment of the paper (Koul et al., Section 7 and Appendix B) varies one factor of the
baseline -- the dataset, the query horizon, the confidence function, the ensemble size, or one
switch of the dynamics model -- and reports mean +- 95% confidence interval of AURCC, RPP,
CR_K and loss per environment. Our tables add the tie-fair metrics beside them
(:data:`TIE_FAIR_METRICS`: expected AURCC and RPP under random tie-breaking, selective gain,
AUGRC, AUROC; :mod:`opcc_edu.metrics`). One concept per module:

* :mod:`~opcc_edu.lab.experiments.registry` -- :data:`ABLATIONS`: each :class:`Ablation` names its
  factor and :class:`Level` s; a configuration is a set of overrides of
  :data:`BASELINE_DEFAULTS` (the paper's default model) with a canonical label such as
  ``"default"`` or ``"prior_scale=5"``.
* :mod:`~opcc_edu.lab.experiments.grid` -- :func:`plan_ablation` expands an ablation into a
  :class:`GridSpec` (environments x datasets x seeds x configurations) of :class:`RunSpec` s.
* :mod:`~opcc_edu.lab.experiments.answers` -- answer functions return a run's (N, M) member values
  (:class:`~opcc_edu.scoring.MemberValues`; the no-model heuristic its :class:`~opcc_edu.scoring.Scores`);
  :func:`score_run` scores them for every confidence function, every horizon (and all horizons
  together) and every ensemble-count prefix.
* :mod:`~opcc_edu.lab.experiments.records` and :mod:`~opcc_edu.lab.experiments.store` -- one record
  file per finished run, written atomically; ``results.csv`` and ``runs.csv`` are exported
  from the records; concurrent processes claim runs; nothing is deleted silently. Runs
  recorded before the tie-fair metrics are upgraded from their kept member values on the next
  write (:func:`migrate_results`, ``python scripts/upgrade_results.py DIR``).
* :mod:`~opcc_edu.lab.experiments.runner` -- :func:`run_grid` and :func:`run_ablation`: run what is
  unfinished, resume after an interruption, compute runs shared by several ablations once.
* :mod:`~opcc_edu.lab.experiments.executors` -- where runs compute: in this process, in local
  worker processes, or as Ray tasks on a cluster (:func:`make_executor`); the driver alone
  writes the results, retries failed runs, and every executor gives the same rows.
* :mod:`~opcc_edu.lab.experiments.reading` -- :func:`load_results` (every finished run, once),
  one run's values and queries, the results root, a grid's compute.
* :mod:`~opcc_edu.lab.experiments.analysis` -- :func:`aggregate` (mean +-
  half-width of the two-sided 95% Student-t interval over the seeds x datasets runs of each
  environment and level), :func:`level_risk_coverage`, :func:`level_differences`.
* :mod:`~opcc_edu.lab.experiments.paper` and :mod:`~opcc_edu.lab.experiments.report` -- the paper's
  numbers (:func:`paper_results`), ours next to them (:func:`compare_with_paper`) and every
  ablation as Markdown or LaTeX (:func:`report_text`, :func:`write_report`).

The results table has one row per (environment, dataset, seed, configuration, horizon,
confidence, ensemble_count) with the columns of :data:`RESULT_COLUMNS`. ``horizon`` is
``"all"`` for the whole query set; ``ensemble_count`` m < ``ensemble_size`` rows use members
0..m-1 of the trained ensemble, as the paper read its ensemble-count ablation from prefixes of
one 100-member ensemble (Tables 5 and 18).
"""

from __future__ import annotations

from typing import Any

from ...names import ALL_HORIZONS, CONFIDENCES, HORIZONS, METRICS, TABLE_METRICS, TIE_FAIR_METRICS
from ...scoring import MemberValues
from .analysis import (
    ablation_rows,
    aggregate,
    committed_profiles,
    committed_results,
    level_differences,
    level_order,
    level_risk_coverage,
    rescore_on_shared_queries,
)
from .answers import (
    AnswerFunction,
    baseline_answer_function,
    fqe_answer_function,
    heuristic_answer_function,
    run_ensemble_config,
    run_sizes,
    score_run,
    synthetic_answer_function,
)
from .executors import EXECUTORS, Executor, RunFailureWarning, RunsFailedError, make_executor
from .grid import GridSpec, RunSpec, default_datasets, plan_ablation
from .paper import compare_with_paper, paper_results
from .reading import (
    find_results_root,
    load_results,
    load_run_queries,
    load_run_values,
    load_runs,
    read_meta,
    results_recipe,
    results_sizes,
    run_query_indices,
    sibling_results_root,
)
from .records import RESULT_COLUMNS, RUN_COLUMNS, ResultsStoreError, RunRecord, StoreWarning
from .registry import (
    ABLATIONS,
    BASELINE_DEFAULTS,
    PAPER_ENSEMBLE_COUNTS,
    Ablation,
    Level,
    configuration_label,
    ensemble_count_levels,
    get_ablation,
    parse_configuration,
)
from .report import (
    TABLE_CAPTION,
    TIE_FAIR_CAPTION,
    TIE_FAIR_EXPLANATION,
    format_table,
    format_tie_fair_table,
    info_lines,
    report_chunks,
    report_text,
    write_report,
)
from .runner import grid_status, machine_description, results_dir, run_ablation, run_grid
from .store import ResultsStore, migrate_results

#: The former private name of :func:`parse_configuration`.
_parse_configuration = parse_configuration

__all__ = [
    "info_lines",
    "METRICS",
    "TIE_FAIR_METRICS",
    "TABLE_METRICS",
    "RESULT_COLUMNS",
    "RUN_COLUMNS",
    "ALL_HORIZONS",
    "CONFIDENCES",
    "HORIZONS",
    "BASELINE_DEFAULTS",
    "PAPER_ENSEMBLE_COUNTS",
    "Level",
    "Ablation",
    "ABLATIONS",
    "get_ablation",
    "RunSpec",
    "GridSpec",
    "MemberValues",
    "AnswerFunction",
    "configuration_label",
    "parse_configuration",
    "ensemble_count_levels",
    "default_datasets",
    "plan_ablation",
    "score_run",
    "baseline_answer_function",
    "fqe_answer_function",
    "heuristic_answer_function",
    "run_ensemble_config",
    "run_sizes",
    "synthetic_answer_function",
    "run_grid",
    "run_ablation",
    "EXECUTORS",
    "Executor",
    "make_executor",
    "RunFailureWarning",
    "RunsFailedError",
    "grid_status",
    "results_dir",
    "ResultsStore",
    "ResultsStoreError",
    "RunRecord",
    "StoreWarning",
    "migrate_results",
    "find_results_root",
    "sibling_results_root",
    "committed_results",
    "committed_profiles",
    "results_recipe",
    "results_sizes",
    "load_runs",
    "ablation_rows",
    "read_meta",
    "load_results",
    "load_run_queries",
    "rescore_on_shared_queries",
    "run_query_indices",
    "load_run_values",
    "aggregate",
    "level_order",
    "level_risk_coverage",
    "paper_results",
    "compare_with_paper",
    "level_differences",
    "format_table",
    "format_tie_fair_table",
    "report_chunks",
    "TABLE_CAPTION",
    "TIE_FAIR_CAPTION",
    "TIE_FAIR_EXPLANATION",
    "report_text",
    "write_report",
    "machine_description",
]

# The plots of these results live in opcc_edu.plotting; their old names here forward there.
_PLOTS = ("plot_level_risk_coverage", "plot_comparison")


def __getattr__(name: str) -> Any:
    if name in _PLOTS:
        from ... import plotting

        return getattr(plotting, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
