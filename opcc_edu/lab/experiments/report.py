"""Reports: every ablation's table, ours next to the paper's, as Markdown or LaTeX.

:func:`format_table` renders one :func:`~opcc_edu.lab.experiments.paper.compare_with_paper` (the
paper's four metrics, ours beside the paper's); :func:`format_tie_fair_table` renders our
tie-fair metrics of the same cells (:data:`opcc_edu.names.TIE_FAIR_METRICS`; the paper has
none). :func:`report_text` gathers every ablation of every profile found under a results root
and :func:`write_report` saves it as ``report.md`` or ``report.tex``. :func:`info_lines` is the
ablation section of ``opcc-edu info``.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ...config import PROFILES
from ...display import Table
from ...metrics import format_mean_ci
from ...names import METRIC_NAMES, METRICS, QUERY_RECIPES, TIE_FAIR_METRICS
from ...utils import check_choice
from .analysis import aggregate, dataset_order
from .paper import compare_with_paper
from .reading import (
    find_results_root,
    grid_compute_text,
    has_results,
    load_results,
    read_meta,
    results_recipe,
    results_sizes,
)
from .records import atomic_write
from .registry import ABLATIONS
from .store import ResultsStore

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "format_table",
    "format_tie_fair_table",
    "report_text",
    "report_chunks",
    "write_report",
    "profile_directories",
    "info_lines",
    "TIE_FAIR_EXPLANATION",
    "COMPARABILITY_EXPLANATION",
    "TABLE_CAPTION",
    "TIE_FAIR_CAPTION",
    "BESIDE_PAPER_METRICS",
]

#: The caption of every results table in notebooks and on the book's pages (not in the text).
TABLE_CAPTION = (
    "Each cell: mean ± half-width of the 95% Student-t interval over runs. Every metric is a "
    "fraction of the query set (0 to 1, no unit); ↓ lower is better, ↑ higher is better. "
    "Bold: the best level of its column within an environment."
)

#: The caption of every tie-fair table (selective gain and AUROC are scores, not fractions).
TIE_FAIR_CAPTION = (
    "Each cell: mean ± half-width of the 95% Student-t interval over runs; no metric has a unit. "
    "↓ lower is better, ↑ higher is better. Bold: the best level of its column within an environment."
)

#: How the report decides which of the paper's cells a cell of ours is compared with.
COMPARABILITY_EXPLANATION = (
    "Like with like: each row names the data behind our cell (profile, query recipe, datasets and the "
    "number of transitions the profile keeps of each) and the paper's cell it is compared with. A locomotion "
    "cell is compared with the paper's five-dataset mean only when all five dataset types are behind it; "
    "a cell on one dataset is compared with the paper's Table 1 cell of that dataset when its level is the "
    "paper's default model (EV, the full ensemble, every horizon, the default configuration), and is "
    "otherwise not comparable. Maze cells are compared on the 1m recipe, whose size the profile caps. Cells "
    "on another recipe's query sets than the paper's are not comparable. The paper's columns of a cell "
    "that is not comparable show –."
)

#: What the tie-fair tables are, in one paragraph (printed above them in reports and the book).
TIE_FAIR_EXPLANATION = (
    "Tie-fair metrics (ours only; the paper reports none) score each confidence as if its tied values were "
    "ordered at random, so ties earn no discount: a constant confidence scores what a random one does. "
    "Selective gain is 1 for a perfect ordering, 0 for no better than random (and for a constant "
    "confidence), negative for worse; AUROC is 0.5 for no separation."
)


def _fmt(mean: float, half: float, digits: int = 3, bound: bool = False) -> str:
    if mean is None or (isinstance(mean, float) and math.isnan(mean)):
        return "–"
    if bound:  # the paper printed "(<0.001)": keep it, do not pretend to know the half-width
        return f"{float(mean):.{digits}f} ± (<{float(half):.{digits}f})"
    return format_mean_ci(float(mean), float(half), digits=digits)


#: The tie-fair metrics shown beside the paper's in :func:`format_table` (``tie_fair=``): the
#: tie-fair counterparts of AURCC and RPP, and the selective gain.
BESIDE_PAPER_METRICS: tuple[str, ...] = ("expected_aurcc", "expected_rpp", "selective_gain")


def format_table(
    comparison: pd.DataFrame,
    metrics: Sequence[str] = METRICS,
    fmt: str = "markdown",
    titles: Mapping[str, str] | None = None,
    tie_fair: pd.DataFrame | None = None,
    tie_fair_metrics: Sequence[str] = BESIDE_PAPER_METRICS,
) -> str:
    """Render :func:`compare_with_paper` as a table: per environment and level, each metric as
    "ours" and "paper" columns.

    When the comparison judged each cell like with like (its ``comparable`` column is set:
    :func:`~opcc_edu.lab.experiments.paper_counterpart`), two columns follow the level: the data
    behind our cell (profile, query recipe, datasets and their transitions) and the paper's cell
    it is compared with, or why it is not comparable (the paper's columns then show "–").

    Args:
        comparison: output of :func:`compare_with_paper`.
        metrics: metric columns to show.
        fmt: ``"markdown"`` or ``"latex"``.
        titles: display names of the levels.
        tie_fair: an :func:`~opcc_edu.lab.experiments.aggregate` of the same cells holding
            ``tie_fair_metrics``: they are shown beside the paper's metrics (ours only).
        tie_fair_metrics: the tie-fair columns shown when ``tie_fair`` is given.

    Returns:
        The table as text: for ``"markdown"`` a :class:`opcc_edu.display.Table`, which a
        notebook shows as an HTML table with :data:`TABLE_CAPTION` and the best level of each
        column within an environment in bold.
    """
    check_choice(fmt, ("markdown", "latex"), "format")
    for metric in metrics:
        check_choice(metric, METRICS, "metric (the paper reports only these)")
    extra = list(tie_fair_metrics) if tie_fair is not None else []
    for metric in extra:
        check_choice(metric, TIE_FAIR_METRICS, "tie-fair metric")
    context = "comparable" in comparison.columns and bool(comparison["comparable"].notna().any())
    header = ["environment", "level", *(("data", "paper's cell") if context else ())]
    for metric in metrics:
        header += [f"{METRIC_NAMES[metric]} ours", f"{METRIC_NAMES[metric]} paper"]
    header += [METRIC_NAMES[metric] for metric in extra]
    body: list[list[str]] = []
    values: list[list[float | None]] = []
    columns = (comparison["environment"], comparison["level"], comparison["paper_level"])
    keys = list(dict.fromkeys(zip(*columns, strict=True)))
    for env, lv, plv in keys:
        cells = [env, (titles or {}).get(lv, lv) + (f" (paper {plv})" if plv != lv else "")]
        part = comparison[
            (comparison["environment"] == env) & (comparison["level"] == lv) & (comparison["paper_level"] == plv)
        ]
        if context:
            matched = part[part["comparable"].astype(bool)] if part["comparable"].notna().all() else part.iloc[0:0]
            first = (matched if len(matched) else part).iloc[0]
            cells += [str(first["data"]), str(first["paper_cell"])]
        numbers: list[float | None] = [None] * len(cells)
        for metric in metrics:
            row = part[part["metric"] == metric]
            if len(row):
                r = row.iloc[0]
                bound = bool(r["paper_ci_is_bound"]) if r["paper_ci_is_bound"] == r["paper_ci_is_bound"] else False
                cells += [_fmt(r["ours_mean"], r["ours_ci"]), _fmt(r["paper_mean"], r["paper_ci"], bound=bound)]
                numbers += [_shown(r["ours_mean"]), _shown(r["paper_mean"])]
            else:
                cells += ["–", "–"]
                numbers += [None, None]
        if extra:
            here = tie_fair[(tie_fair["environment"] == env) & (tie_fair["level"] == lv)].drop_duplicates("metric")
            here = here.set_index("metric")
            for metric in extra:
                known = metric in here.index
                cells.append(_fmt(here.loc[metric, "mean"], here.loc[metric, "ci"]) if known else "–")
                numbers.append(_shown(here.loc[metric, "mean"]) if known else None)
        body.append(cells)
        values.append(numbers)
    text_columns = 4 if context else 2
    if fmt == "latex":
        return _render(header, body, fmt, text_columns=text_columns)
    better = [None] * text_columns
    better += [_better(metric) for metric in metrics for _ in ("ours", "paper")]
    better += [_better(metric) for metric in extra]
    spans = [("", text_columns), *((METRIC_NAMES[metric], 2) for metric in metrics)]
    if extra:
        spans.append(("tie-fair (ours; the paper has none)", len(extra)))
    return Table(
        header,
        body,
        values=values,
        better=better,
        group=0,
        caption=TABLE_CAPTION,
        spans=spans,
        merge=range(text_columns) if context else (0,),
    )


def format_tie_fair_table(
    table: pd.DataFrame,
    metrics: Sequence[str] = TIE_FAIR_METRICS,
    fmt: str = "markdown",
    titles: Mapping[str, str] | None = None,
) -> str:
    """Render the tie-fair metrics of an :func:`~opcc_edu.lab.experiments.aggregate` (ours only: the
    paper reports none): per environment and level, each metric's mean ± half-width.

    A cell whose metric was not computed for every run (results recorded before the tie-fair
    metrics and upgraded without their member values) shows "–".

    Args:
        table: an aggregate holding ``metrics`` (e.g. ``aggregate(results, ablation,
            metrics=TABLE_METRICS)``); other metrics in it are ignored.
        metrics: the columns, of :data:`opcc_edu.names.TIE_FAIR_METRICS` by default.
        fmt: ``"markdown"`` or ``"latex"``.
        titles: display names of the levels.

    Returns:
        The table as text (for ``"markdown"`` a :class:`opcc_edu.display.Table`, as
        :func:`format_table`).
    """
    check_choice(fmt, ("markdown", "latex"), "format")
    for metric in metrics:
        check_choice(metric, METRIC_NAMES, "metric")
    header = ["environment", "level", *(METRIC_NAMES[metric] for metric in metrics)]
    part = table[table["metric"].isin(list(metrics))]
    body: list[list[str]] = []
    values: list[list[float | None]] = []
    for env, lv in dict.fromkeys(zip(part["environment"], part["level"], strict=True)):
        cells = [env, (titles or {}).get(lv, lv)]
        numbers: list[float | None] = [None, None]
        here = part[(part["environment"] == env) & (part["level"] == lv)].set_index("metric")
        for metric in metrics:
            cells.append(_fmt(here.loc[metric, "mean"], here.loc[metric, "ci"]) if metric in here.index else "–")
            numbers.append(_shown(here.loc[metric, "mean"]) if metric in here.index else None)
        body.append(cells)
        values.append(numbers)
    if fmt == "latex":
        return _render(header, body, fmt)
    better = [None, None, *(_better(metric) for metric in metrics)]
    return Table(header, body, values=values, better=better, group=0, caption=TIE_FAIR_CAPTION, merge=(0,))


def _shown(mean: float | None, digits: int = 3) -> float | None:
    """A mean as its cell shows it (the best cell is the best one a reader sees)."""
    return None if mean is None or mean != mean else round(float(mean), digits)


def _better(metric: str) -> str | None:
    """The better direction of a metric, read from the arrow of its display name."""
    name = METRIC_NAMES.get(metric, "")
    return "lower" if "(↓)" in name else "higher" if "(↑)" in name else None


def _render(header: Sequence[str], body: Sequence[Sequence[str]], fmt: str, text_columns: int = 2) -> str:
    """A Markdown or LaTeX (booktabs) table: ``text_columns`` text columns, then numbers."""
    if fmt == "markdown":
        return str(Table(header, body))

    def tex(text: str) -> str:
        return (
            text.replace("\\", "\\textbackslash{}")
            .replace("_", "\\_")
            .replace("%", "\\%")
            .replace("&", "\\&")
            .replace("±", "$\\pm$")
            .replace("↓", "$\\downarrow$")
            .replace("↑", "$\\uparrow$")
            .replace("<", "$<$")
            .replace("–", "--")
        )

    lines = [
        "\\begin{tabular}{" + "l" * text_columns + "r" * (len(header) - text_columns) + "}",
        "\\toprule",
        " & ".join(tex(h) for h in header) + " \\\\",
        "\\midrule",
    ]
    lines += [" & ".join(tex(c) for c in cells) + " \\\\" for cells in body]
    lines += ["\\bottomrule", "\\end{tabular}"]
    return "\n".join(lines)


def report_text(
    out: str | os.PathLike | None = None, fmt: str = "markdown", profiles: Sequence[str] | None = None
) -> str:
    """Every ablation with results under ``out`` (one directory per profile), ours vs paper.

    Args:
        out: root of the results (default ``results/ablations``).
        fmt: ``"markdown"`` or ``"latex"``.
        profiles: profile directories to include (default: every one found).

    Returns:
        The report text.

    Raises:
        FileNotFoundError: when no results exist under ``out``.
        ValueError: for an unknown format, or a profile without results (naming those with).
    """
    chunks = report_chunks(out, fmt=fmt, profiles=profiles)
    separator = "\n\n"
    text = separator.join(chunks) + "\n"
    if fmt != "markdown":
        text = text.replace("95%", "95\\%").replace("×", "$\\times$").replace("±", "$\\pm$")
    return text


def report_chunks(
    out: str | os.PathLike | None = None, fmt: str = "markdown", profiles: Sequence[str] | None = None
) -> list[str]:
    """The paragraphs of :func:`report_text` in order: headings (``#`` lines in Markdown),
    text, and tables (:class:`opcc_edu.display.Table` in Markdown), so that a notebook can show
    each table as a table (:func:`opcc_edu.lab.findings.show_report`).

    Args and Raises: as :func:`report_text`. LaTeX chunks come before the replacements that
    :func:`report_text` makes in the joined text (``%``, ``×``, ``±``).
    """
    check_choice(fmt, ("markdown", "latex"), "format")
    root = Path(out if out is not None else "results/ablations")
    found = profile_directories(root)
    if not found:
        raise FileNotFoundError(
            f"no results under {root} (expected {root}/<recipe>/<profile>/records/); run `opcc-edu ablation NAME` first"
        )
    if profiles is not None:
        names = found + sorted({p.rsplit("/", 1)[-1] for p in found})
        for name in profiles:
            check_choice(name, names, f"profile (results under {root})")
        found = [p for p in found if p in set(profiles) or p.rsplit("/", 1)[-1] in set(profiles)]
    chunks: list[str] = []
    md = fmt == "markdown"

    def heading(level: int, text: str) -> str:
        if md:
            return "#" * level + " " + text
        command = {1: "section", 2: "subsection", 3: "subsubsection"}[level]
        return f"\\{command}*{{{text}}}"

    chunks.append(heading(1, "Ablations: ours next to Koul et al."))
    chunks.append(
        "Each cell is mean ± half-width of the 95% Student-t interval over the runs "
        "(seeds × datasets) of that environment and level. The paper's cells are over 5 seeds per "
        "dataset: its locomotion tables average over the five dataset types (5 × 5 = 25 runs, "
        "although their captions say 50 samples), its maze tables use the 1m data."
    )
    chunks.append(COMPARABILITY_EXPLANATION)
    chunks.append(TIE_FAIR_EXPLANATION)
    if not any(name.rsplit("/", 1)[-1] == "paper" for name in found):
        chunks.append(
            "Still open: no run of the paper profile (100 members, the full datasets, on a GPU) is "
            "committed; every grid below is a scaled-down profile."
        )
    for profile_name in found:
        directory = root / profile_name
        results = load_results(directory)
        meta = read_meta(directory)
        recipe = results_recipe(directory)
        sizes = results_sizes(directory)
        dataset_size = (sizes or {}).get("dataset_size")
        chunks.append(heading(2, f"Profile {profile_name.rsplit('/', 1)[-1]}, {recipe} query sets"))
        if results.empty:
            chunks.append(f"No finished run yet in `{profile_name}`." if md else "No finished run yet.")
            continue
        if sizes:
            chunks.append(sizes_text(profile_name.rsplit("/", 1)[-1], sizes))
        sessions = meta.get("sessions", [])
        if sessions:
            machines = sorted({s.get("machine", "") for s in sessions})
            chunks.append(
                f"{len(results['run_id'].unique())} runs; {grid_compute_text(meta)}; machine: {' | '.join(machines)}."
            )
            used = results.groupby("environment")["dataset"].agg(lambda d: ", ".join(dataset_order(d)))
            chunks.append("Datasets: " + "; ".join(f"{env}: {names}" for env, names in used.items()) + ".")
            commands = list(dict.fromkeys(s.get("command", "") for s in sessions))
            chunks.append(
                ("Commands: " if md else "Commands: ")
                + "; ".join(f"`{c}`" if md else f"\\texttt{{{c}}}" for c in commands)
            )
        for ablation in ABLATIONS.values():
            ours = aggregate(results, ablation)
            if ours.empty:
                continue
            tables = ", ".join(str(t) for t in ablation.paper_tables) or "none"
            chunks.append(heading(3, f"{ablation.title} (paper tables: {tables})"))
            titles = {level.label: level.display for level in ablation.levels}
            tie_fair = aggregate(results, ablation, metrics=TIE_FAIR_METRICS)
            comparison = compare_with_paper(ours, ablation, recipe=recipe, dataset_size=dataset_size)
            chunks.append(format_table(comparison, fmt=fmt, titles=titles, tie_fair=tie_fair))
            chunks.append("Tie-fair metrics of the same cells (ours; the paper has none):")
            chunks.append(format_tie_fair_table(tie_fair, fmt=fmt, titles=titles))
    return chunks


def sizes_text(profile: str, sizes: Mapping[str, int]) -> str:
    """What a directory's runs read (``meta.json``'s ``sizes``), and where that is not the
    profile's own."""
    text = (
        f"Data and queries: up to {int(sizes['dataset_size']):,} transitions per dataset (all of a smaller "
        f"recipe), {int(sizes['queries_per_env']):,} queries per environment."
    )
    own = PROFILES.get(profile)
    if own is not None and (own.dataset_size, own.queries_per_env) != (
        int(sizes["dataset_size"]),
        int(sizes["queries_per_env"]),
    ):
        text += (
            f" These are not the {profile} profile's sizes ({own.dataset_size:,} transitions, "
            f"{own.queries_per_env:,} queries): the runs read the data and queries of the profile that was "
            f"active where they ran; the ensembles have the {profile} profile's members, widths and steps."
        )
    return text


def write_report(
    out: str | os.PathLike | None = None, fmt: str = "markdown", profiles: Sequence[str] | None = None
) -> Path:
    """Write :func:`report_text` to ``<out>/report.md`` or ``<out>/report.tex`` (atomically).

    Args:
        out: root of the results (default ``results/ablations``).
        fmt: ``"markdown"`` or ``"latex"``.
        profiles: profile directories to include (default: every one found).

    Returns:
        The path written; the report's text is its content.

    Raises:
        FileNotFoundError, ValueError: as :func:`report_text`.
    """
    root = Path(out if out is not None else "results/ablations")
    text = report_text(root, fmt=fmt, profiles=profiles)
    path = root / ("report.md" if fmt == "markdown" else "report.tex")
    atomic_write(path, text.encode())
    return path


def profile_directories(root: str | os.PathLike) -> list[str]:
    """Results directories under ``root``, relative to it: ``<recipe>/<profile>``
    (:func:`~opcc_edu.lab.experiments.results_dir`), and ``<profile>`` directly under ``root``;
    recipe by recipe (``paper`` first), the largest profile first."""
    root = Path(root)
    if not root.is_dir():
        return []
    found = [p.name for p in root.iterdir() if p.is_dir() and has_results(p)]
    for recipe in QUERY_RECIPES:
        if (root / recipe).is_dir():
            found += [f"{recipe}/{p.name}" for p in (root / recipe).iterdir() if p.is_dir() and has_results(p)]
    sizes = ("paper", "classroom", "tiny")

    def order(name: str) -> tuple[int, int, str]:
        recipe, _, profile = name.rpartition("/")
        base = profile.split("-", 1)[0]
        return (
            QUERY_RECIPES.index(recipe) if recipe in QUERY_RECIPES else -1,
            sizes.index(base) if base in sizes else len(sizes),
            name,
        )

    return sorted(found, key=order)


def info_lines() -> list[str]:
    """The section of ``opcc-edu info``: registered ablations and committed results."""
    lines = ["Ablations (opcc-edu ablation NAME; paper Section 7, Appendix B):"]
    for ablation in ABLATIONS.values():
        tables = ", ".join(map(str, ablation.paper_tables)) or "-"
        lines.append(f"  {ablation.name:<15} factor {ablation.factor:<15} paper tables {tables}")
    root = find_results_root()
    if root is not None:
        for name in profile_directories(root):
            count = len(ResultsStore(root / name).records())
            lines.append(f"  committed results: {root / name} ({count} runs)")
    return lines
