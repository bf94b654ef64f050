"""One ablation's results, committed or live: loading, the paper's table, curves, explorers."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from ...config import Profile, get_profile
from ...display import Table, explore
from ...names import METRICS, TIE_FAIR_METRICS
from ...plotting import figure_size, plot_comparison, plot_level_risk_coverage, plot_voting_prefix
from .. import experiments as ex
from ..experiments.grid import run_slug
from ..experiments.reading import grid_compute_text
from ..experiments.report import report_chunks
from .rule import with_runs
from .verdicts import agreement_summary, level_findings, level_titles

if TYPE_CHECKING:
    from ipywidgets import Widget
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from ...scoring import MemberValues


@dataclass(frozen=True)
class AblationResults:
    """One set of results of one ablation: a committed profile or a live run.

    Attributes:
        name: the profile's name (committed results) or ``"live"``.
        ablation: the ablation.
        directory: the results directory (``results.csv``, ``runs.csv``, ``values/``).
        results: the rows of ``results.csv`` (every run, scored every way).
        table: :func:`opcc_edu.lab.experiments.aggregate` -- mean and 95% interval per cell --
            carrying its runs (:func:`~opcc_edu.lab.findings.rule.with_runs`), so that a verdict
            read from it pairs twin runs.
        comparison: :func:`opcc_edu.lab.experiments.compare_with_paper` of ``table``.
        grid: the grid that was run (live runs; ``None`` for committed results).
        seconds: wall time of the live run (``None`` for committed results).
        tie_fair: :func:`opcc_edu.lab.experiments.aggregate` of the tie-fair metrics
            (:data:`opcc_edu.names.TIE_FAIR_METRICS`; ours only, the paper has none), in the
            same tidy form as ``table``; ``None`` when not computed.
    """

    name: str
    ablation: ex.Ablation
    directory: Path
    results: pd.DataFrame
    table: pd.DataFrame
    comparison: pd.DataFrame
    grid: ex.GridSpec | None = None
    seconds: float | None = None
    tie_fair: pd.DataFrame | None = None


def display_markdown(text: str) -> None:
    """Display Markdown text; a :class:`opcc_edu.display.Table` shows itself (an HTML table)."""
    from IPython.display import Markdown, display

    display(text if isinstance(text, Table) else Markdown(text))


# --------------------------------------------------------------------------------------------
# The plan, the paper's numbers, our committed results
# --------------------------------------------------------------------------------------------
def describe_plan(ablation: str | ex.Ablation, profile: Profile | str | None = None) -> ex.GridSpec:
    """Print an ablation's factor and its grid of runs in ``profile`` and in the paper profile.

    Returns:
        The grid of ``profile`` (default: the active one).
    """
    ablation = ex.get_ablation(ablation)
    profile = get_profile(profile)
    grid = ex.plan_ablation(ablation, profile)
    print(f"{ablation.title}: factor {ablation.factor!r}, confidence function {ablation.confidence.upper()}")
    print(
        f"profile {profile.name}: {len(grid)} runs = {len(grid.environments)} environment(s) x datasets x "
        f"{len(grid.seeds)} seed(s) x {len(grid.configurations)} configuration(s)"
    )
    for run in grid.runs():
        print("  ", run.run_id)
    print(f"the paper profile needs {len(ex.plan_ablation(ablation, 'paper'))} runs")
    return grid


def paper_table(ablation: str | ex.Ablation) -> pd.DataFrame | None:
    """The paper's means of an ablation, one row per (table, environment, level), one column per metric.

    Returns:
        The wide table, or ``None`` (after saying so) when the paper reports no table.
    """
    paper = ex.paper_results(ablation)
    if paper.empty:
        print("The paper reports no table for this ablation.")
        return None
    wide = paper.pivot_table(index=["table", "environment", "paper_level"], columns="metric", values="mean", sort=False)
    return wide[list(METRICS)]


def load_committed(
    ablation: str | ex.Ablation, root: str | Path | None = None, only: str | None = None
) -> dict[str, AblationResults]:
    """Every committed profile that holds ``ablation``, largest first.

    Args:
        ablation: registry key or :class:`~opcc_edu.lab.experiments.Ablation`.
        root: the ``results/ablations`` directory (default: the repository's, if present), or
            another results root (``results/ablations-classroom``); a bare folder name
            ``"ablations-*"`` names the root of that name beside the repository's
            (:func:`opcc_edu.lab.experiments.sibling_results_root`; nothing is loaded when it is absent).

    Returns:
        ``"<recipe>/<profile>"`` (e.g. ``"paper/tiny"``) -> :class:`AblationResults`, recipe by
        recipe (``paper`` first), largest profile first; empty when nothing is committed. Under
        a root other than the repository's ``results/ablations`` the name starts with the root's
        folder (``"ablations-classroom/paper/classroom"``), so that two roots' grids of one
        profile keep apart. Cells on another recipe than ``paper`` are marked not comparable
        with the paper's. With ``only`` (one such name), that set alone (the others not read).
    """
    ablation = ex.get_ablation(ablation)
    if isinstance(root, str) and root.startswith("ablations-") and "/" not in root:
        root = ex.sibling_results_root(root)
        if root is None:
            return {}
    default = ex.find_results_root()
    prefix = ""
    if root is not None and (default is None or Path(root).resolve() != default.resolve()):
        prefix = f"{Path(root).resolve().name}/"
    committed = {}
    for directory in ex.committed_profiles(root, ablation=ablation):
        if only is not None and only != f"{prefix}{ex.results_recipe(directory)}/{directory.name}":
            continue
        results = ex.load_results(directory)
        table = with_runs(ex.aggregate(results, ablation), results, ablation)
        recipe = ex.results_recipe(directory)
        dataset_size = (ex.results_sizes(directory) or {}).get("dataset_size")
        comparison = ex.compare_with_paper(table, ablation, recipe=recipe, dataset_size=dataset_size)
        tie_fair = with_runs(ex.aggregate(results, ablation, metrics=TIE_FAIR_METRICS), results, ablation)
        name = f"{prefix}{recipe}/{directory.name}"
        committed[name] = AblationResults(
            name, ablation, Path(directory), results, table, comparison, tie_fair=tie_fair
        )
    return committed


def run_values(
    entry: AblationResults, environment: str | None = None, level: str | None = None, queries: bool = False
) -> list[tuple]:
    """The saved member values of each run behind an ablation's cells, one run at a time.

    Every cause test of the Ablations chapters reads runs this way: the ablation's rows of one
    environment and level (:func:`opcc_edu.lab.experiments.ablation_rows`), one per run, and each
    run's member values (:func:`opcc_edu.lab.experiments.load_run_values`), with its queries where
    the truth is needed (:func:`opcc_edu.lab.experiments.load_run_queries`, row ``i`` of one is row
    ``i`` of the other).

    Args:
        entry: committed or live results (:func:`load_committed`, :func:`run_live`).
        environment: only this environment's runs (default: every environment).
        level: only this level's runs (default: every level).
        queries: also load each run's queries.

    Returns:
        ``[(run, values)]`` or, with ``queries``, ``[(run, values, queries)]``, in the order of
        the results' rows: ``run`` one row of the ablation's rows (a named tuple with
        ``environment``, ``dataset``, ``seed``, ``configuration``, ``level``, ...), ``values`` a
        :class:`~opcc_edu.scoring.MemberValues` (``values_a``, ``values_b``: (N, M) member values
        of N queries and M members; ``target``, ``horizon``: (N,)), ``queries`` a ``QuerySet`` of N.

    Raises:
        ValueError: ``environment`` or ``level`` is not one of the entry's (the valid ones named).
    """
    rows = ex.ablation_rows(entry.results, entry.ablation)
    for name, value in (("environment", environment), ("level", level)):
        if value is not None and value not in set(rows[name]):
            valid = ", ".join(map(repr, dict.fromkeys(rows[name])))
            raise ValueError(f"{name} {value!r} has no run in {entry.name!r}; choose one of {valid}")
        if value is not None:
            rows = rows[rows[name] == value]
    rows = rows.drop_duplicates("run_id")
    out = []
    for run in rows.itertuples():
        slug = run_slug(run.environment, run.dataset, run.seed, run.configuration)
        values = ex.load_run_values(entry.directory, slug)
        out.append((run, values, ex.load_run_queries(entry.directory, slug)) if queries else (run, values))
    return out


def show_tie_fair(entry: AblationResults) -> None:
    """Show the tie-fair metrics of one set of results (ours only: the paper has none).

    One line on what they are (:data:`opcc_edu.lab.experiments.TIE_FAIR_EXPLANATION`), then
    :func:`opcc_edu.lab.experiments.format_tie_fair_table` of ``entry.tie_fair`` (computed from
    ``entry.results`` when absent).
    """
    table = entry.tie_fair
    if table is None:
        table = ex.aggregate(entry.results, entry.ablation, metrics=TIE_FAIR_METRICS, grid=entry.grid)
    display_markdown(ex.TIE_FAIR_EXPLANATION)
    display_markdown(ex.format_tie_fair_table(table, titles=level_titles(entry.ablation)))


def show_committed(ablation: str | ex.Ablation, root: str | Path | None = None) -> dict[str, AblationResults]:
    """Show every committed profile of an ablation: runs, compute, machine, commands, the table.

    ``root`` as in :func:`load_committed` (``"ablations-classroom"``: the classroom profile's own
    sizes).

    Each table cell is ours next to the paper's (:func:`opcc_edu.lab.experiments.format_table`);
    the tie-fair metrics of the same cells follow (:func:`show_tie_fair`).

    Returns:
        :func:`load_committed`'s mapping.
    """
    committed = load_committed(ablation, root)
    for name, entry in committed.items():
        used = set(ex.ablation_rows(entry.results, entry.ablation)["run_id"])
        runs = ex.load_runs(entry.directory)
        sessions = ex.read_meta(entry.directory).get("sessions", [])
        seconds = runs[runs["run_id"].isin(used)]["seconds"].sum()
        recipe = ex.results_recipe(entry.directory)
        display_markdown(
            f"**Profile `{name}`, `{recipe}` query sets** — {len(used)} runs, {seconds:.0f} s of compute; "
            f"the whole grid: {grid_compute_text(entry.directory)}"
        )
        print("machine:", "; ".join(sorted({s["machine"] for s in sessions})))
        for command in dict.fromkeys(s["command"] for s in sessions if s.get("label") == entry.ablation.name):
            print("  ", command)
        display_markdown(ex.format_table(entry.comparison, titles=level_titles(entry.ablation)))
        show_tie_fair(entry)
    if not committed:
        print("No committed results found (they live in the repository under results/ablations/).")
    return committed


def show_report(root: str | Path | None = None) -> None:
    """Show :func:`opcc_edu.lab.experiments.report_text` of every committed profile in a notebook:
    its headings as bold lines, its tables as tables.

    Args:
        root: the ``results/ablations`` directory (default: the repository's).

    Raises:
        FileNotFoundError: when no results exist under ``root``.
    """
    if root is None:
        root = ex.find_results_root()
        if root is None:
            raise FileNotFoundError("no committed results found (they live in the repository under results/ablations/)")
    for chunk in report_chunks(root):
        if chunk.startswith("#"):
            display_markdown("**" + chunk.lstrip("#").strip() + "**")
        else:
            display_markdown(chunk)


def draw_rccs(entry: AblationResults, title_prefix: str | None = None, columns: int = 2) -> Figure:
    """Risk-coverage curves of every level, averaged over runs, one panel per environment.

    The panels share one legend, below them (every panel has the same levels), and the figure is
    as wide as the book's page, legend included.

    Args:
        entry: the results (their run values are read from ``entry.directory``).
        title_prefix: panel titles are ``"<prefix>: <environment>"`` (default: ``entry.name``),
            with the number of runs per level on a second line.
        columns: panels per row at most.

    Returns:
        The matplotlib Figure.
    """
    import matplotlib.pyplot as plt

    prefix = entry.name if title_prefix is None else title_prefix
    titles = level_titles(entry.ablation)
    envs = list(dict.fromkeys(ex.aggregate(entry.results, entry.ablation)["environment"]))
    cols = max(1, min(columns, len(envs)))
    rows = max(1, -(-len(envs) // cols))
    fig, axes = plt.subplots(
        rows, cols, figsize=figure_size(cols, rows, panel_aspect=0.74), squeeze=False, layout="constrained"
    )
    for ax, env in zip(axes.flat, envs, strict=False):
        curves = ex.level_risk_coverage(entry.directory, entry.ablation, env, results=entry.results)
        runs = sorted({int(curve["n_runs"]) for curve in curves.values()})
        count = "" if not runs else f"{runs[0]}" if len(runs) == 1 else f"{runs[0]}-{runs[-1]}"
        title = f"{prefix}: {env}" + (f"\n{count} runs per level" if count else "")
        plot_level_risk_coverage(curves, ax=ax, title=title, titles=titles, legend=False)
    for ax in list(axes.flat)[len(envs) :]:
        ax.set_visible(False)
    handles, labels = axes.flat[0].get_legend_handles_labels()
    # The run counts are in the panel titles: the shared legend names the levels only.
    labels = [label.rsplit(" (n=", 1)[0] for label in labels]
    fig.legend(handles, labels, loc="outside lower center", ncols=min(3, max(1, len(labels))))
    return fig


def report_findings(entry: AblationResults, verdict: Sequence[str]) -> pd.DataFrame:
    """Show one set of results' verdict, its :func:`level_findings` table and their agreement.

    Args:
        entry: the results.
        verdict: the lines of a verdict function applied to ``entry.table``.

    Returns:
        The :func:`level_findings` table.
    """
    from IPython.display import display

    found = level_findings(entry.table, entry.ablation)
    display_markdown(f"**Profile `{entry.name}`**")
    for line in verdict:
        print(line)
    display(found.round(4))
    for line in agreement_summary(found):
        print(line)
    return found


def draw_comparison(entry: AblationResults, metric: str = "aurcc", ax: Axes | None = None) -> Axes:
    """Bars of ours against the paper for one metric, titled with the ablation and the results' name."""
    ax = plot_comparison(entry.comparison, metric, ax=ax, titles=level_titles(entry.ablation))
    ax.set_title(f"{entry.ablation.title}: ours ({entry.name}) vs paper")
    return ax


def comparison_explorer(sources: Mapping[str, AblationResults]) -> Widget:
    """Show AURCC of the first results against the paper, and return a picker of metric and results
    (:func:`opcc_edu.display.explore`: the static page keeps the first figure).

    Args:
        sources: results by name (committed profiles, ``"live"``); all of one ablation.

    Returns:
        The ``ipywidgets`` widget (display it in a notebook).
    """
    import ipywidgets as widgets
    import matplotlib.pyplot as plt

    if not sources:
        raise ValueError("sources must hold at least one set of results")
    first = next(iter(sources))

    def show(metric: str = "aurcc", source: str = first) -> None:
        draw_comparison(sources[source], metric)
        plt.show()

    return explore(
        show,
        metric=widgets.Dropdown(options=list(METRICS), value="aurcc", description="metric"),
        source=widgets.Dropdown(options=list(sources), value=first, description="results"),
    )


def voting_prefix_explorer(values: MemberValues) -> Widget:
    """Show :func:`opcc_edu.plotting.plot_voting_prefix` for the whole ensemble; return a slider over
    members (:func:`opcc_edu.display.explore`: the static page keeps the first figure)."""
    import ipywidgets as widgets
    import matplotlib.pyplot as plt

    def show(m: int = values.ensemble_size) -> None:
        plot_voting_prefix(values, m)
        plt.show()

    size = values.ensemble_size
    return explore(show, m=widgets.IntSlider(value=size, min=1, max=size, step=1, description="members m"))
