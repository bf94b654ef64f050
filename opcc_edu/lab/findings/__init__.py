"""Reading an ablation against the paper: committed results, level curves, verdicts, a live run.

Every ablation chapter of the book tells the same story in the same order, and these are its
steps:

1. :func:`describe_plan` -- the grid of runs of the active profile and of the paper's;
2. :func:`paper_table` -- the paper's numbers;
3. :func:`show_committed` -- our committed results (``results/ablations/<profile>/``), one
   :class:`AblationResults` per profile, each next to the paper's cells, then our tie-fair
   metrics of the same cells (:func:`show_tie_fair`; the paper has none);
4. :func:`draw_rccs` -- the risk-coverage curve of every level, one panel per environment;
5. a *verdict* -- whether our runs reproduce the paper's finding. The findings differ between
   ablations, so there is one verdict function per kind of finding, each taking the difference
   as a parameter: :func:`trend_verdict` (horizon), :func:`contrast_verdict` (confidence, model
   type), :func:`ensemble_size_verdict`, :func:`dataset_spread_verdict` and, for the other
   ablations, :func:`level_difference_verdict`. :func:`report_findings` prints a verdict next to
   :func:`level_findings`, every level difference of ours beside the paper's;
6. :func:`run_live` -- the same ablation, live, in the active profile;
7. :func:`comparison_explorer` -- ours against the paper, any metric, any set of results.

Verdicts return a :class:`Verdict`: their lines (a list of strings, tested and printed alike)
with the outcome per environment -- reproduced, reversed or inconclusive (:data:`VERDICTS`) --
and :attr:`Verdict.overall`. Every difference is judged by one rule, stated once in
:mod:`opcc_edu.lab.findings.rule`: a 95% interval paired by seed, floored, against zero and
against a margin scaled to the metric. :func:`findings_at_a_glance` judges every finding of the paper
(:data:`FINDINGS`) on every committed set of results; :func:`glance_table` shows it, each
finding linked to its chapter.
"""

from .glance import (
    FINDINGS,
    Finding,
    chapter_name,
    comparability_notes,
    findings_at_a_glance,
    glance_table,
    judge_finding,
    paper_margin_agreement,
    results_label,
)
from .lessons import (
    LESSON_RUN_SETS,
    RUN_SETS,
    lesson_results,
    lesson_verdict,
    margin_statement,
    one_step_errors,
    run_set_label,
    show_all_verdicts,
    show_verdict,
    verdict_statement,
)
from .live import live_directory, live_run_problems, remove_stale_live_directories, run_live
from .power import paired_power, power_summary
from .results import (
    AblationResults,
    comparison_explorer,
    describe_plan,
    display_markdown,
    draw_comparison,
    draw_rccs,
    level_titles,
    load_committed,
    paper_table,
    report_findings,
    run_values,
    show_committed,
    show_report,
    show_tie_fair,
    voting_prefix_explorer,
)
from .rule import (
    SIZE_FACTOR,
    DifferenceInterval,
    concat_tables,
    difference_interval,
    half_width_floor,
    level_differences,
    level_interval,
    paired_differences,
    size_statement,
    twin_runs,
    with_runs,
)
from .verdicts import (
    DATASET_TYPES,
    EQUIVALENCE_MARGINS,
    PAPER_CLAIMS,
    VERDICTS,
    Expectation,
    Verdict,
    agreement_summary,
    combine_outcomes,
    contrast_verdict,
    dataset_spread_scopes,
    dataset_spread_verdict,
    difference_half_width,
    ensemble_size_verdict,
    equivalence_margin,
    judge_difference,
    level_difference_verdict,
    level_findings,
    paper_claims,
    trend_verdict,
)

__all__ = [
    "AblationResults",
    "LESSON_RUN_SETS",
    "RUN_SETS",
    "lesson_results",
    "lesson_verdict",
    "margin_statement",
    "one_step_errors",
    "run_set_label",
    "paired_power",
    "power_summary",
    "show_all_verdicts",
    "show_verdict",
    "verdict_statement",
    "paper_margin_agreement",
    "equivalence_margin",
    "difference_half_width",
    "difference_interval",
    "DifferenceInterval",
    "half_width_floor",
    "paired_differences",
    "size_statement",
    "SIZE_FACTOR",
    "twin_runs",
    "with_runs",
    "concat_tables",
    "comparability_notes",
    "EQUIVALENCE_MARGINS",
    "Expectation",
    "FINDINGS",
    "Finding",
    "PAPER_CLAIMS",
    "VERDICTS",
    "Verdict",
    "agreement_summary",
    "chapter_name",
    "combine_outcomes",
    "comparison_explorer",
    "contrast_verdict",
    "DATASET_TYPES",
    "dataset_spread_scopes",
    "dataset_spread_verdict",
    "describe_plan",
    "display_markdown",
    "draw_comparison",
    "draw_rccs",
    "ensemble_size_verdict",
    "findings_at_a_glance",
    "results_label",
    "glance_table",
    "judge_difference",
    "judge_finding",
    "level_difference_verdict",
    "level_differences",
    "level_findings",
    "level_interval",
    "level_titles",
    "live_directory",
    "live_run_problems",
    "load_committed",
    "paper_claims",
    "paper_table",
    "remove_stale_live_directories",
    "report_findings",
    "run_values",
    "run_live",
    "show_committed",
    "show_report",
    "show_tie_fair",
    "trend_verdict",
    "voting_prefix_explorer",
]
