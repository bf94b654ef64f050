"""Findings at a glance: one row per finding of the paper, our verdict per set of committed results.

:data:`FINDINGS` holds, per ablation of :data:`opcc_edu.lab.experiments.ABLATIONS`, the paper's
finding in a few words and how a verdict function of :mod:`opcc_edu.lab.findings.verdicts` judges
an aggregate of ours against it. :func:`judge_finding` applies it to one table;
:func:`findings_at_a_glance` applies it to every committed results directory
(``results/ablations/<recipe>/<profile>``) and :func:`glance_table` shows the result as a table,
each finding linked to its chapter.
"""

from __future__ import annotations

import html
import os
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from ...config import PROFILES
from ...display import Table
from ...names import METRICS
from .. import experiments as ex
from ..experiments.report import profile_directories
from .rule import EQUIVALENCE_MARGINS, equivalence_margin, paper_difference, runs_of, with_runs
from .verdicts import (
    Expectation,
    Verdict,
    contrast_verdict,
    dataset_spread_verdict,
    ensemble_size_verdict,
    level_difference_verdict,
    paper_claims,
    trend_verdict,
)

__all__ = [
    "Finding",
    "FINDINGS",
    "GLANCE_CAPTION",
    "chapter_name",
    "comparability_notes",
    "paper_margin_agreement",
    "judge_finding",
    "findings_at_a_glance",
    "glance_table",
    "results_label",
]

#: The caption of the findings-at-a-glance table.
GLANCE_CAPTION = (
    "One row per finding of the paper; per set of committed results (profile, query recipe), our verdict: "
    "reproduced, reversed or inconclusive, for a majority of the environments judged (the counts in brackets), "
    "read from each difference's 95% interval, paired by seed (a finding of no difference is reproduced only when "
    "that interval lies inside the metric's equivalence margin, e.g. ±0.01 AURCC, less where the metric is "
    "small); an environment enters once every cell has two runs "
    "or more (one run has no interval). A note in square brackets marks a verdict not comparable with the paper's: "
    "locomotion cells on fewer datasets than the five the paper averages, or one environment only. "
    "– : no result of that ablation in that set."
)

#: The D4RL locomotion datasets that each locomotion cell of the paper's tables averages.
PAPER_LOCOMOTION_DATASETS = 5


@dataclass(frozen=True)
class Finding:
    """One finding of the paper and how a verdict function judges it.

    Attributes:
        ablation: registry key of :data:`opcc_edu.lab.experiments.ABLATIONS`.
        words: the paper's finding in a few words.
        judge: the verdict on an aggregate of ours (:func:`opcc_edu.lab.experiments.aggregate`
            with :data:`opcc_edu.names.TABLE_METRICS`); ``None`` for an ablation the paper
            states no finding about.
        levels: the level labels the verdict reads, where it reads fewer than all of the
            ablation's (``None``: all of them). A set of results holding these levels is judged
            even without the others.
    """

    ablation: str
    words: str
    judge: Callable[[pd.DataFrame], Verdict] | None
    levels: tuple[str, ...] | None = None


def _both(first: Verdict, second: Verdict) -> Verdict:
    """Two parts of one finding: every line, and per environment the two outcomes combined."""
    from .verdicts import combine_outcomes

    keys = list(dict.fromkeys([*first.outcomes, *second.outcomes]))
    outcomes = {key: combine_outcomes([v.outcomes[key] for v in (first, second) if key in v.outcomes]) for key in keys}
    sizes = {key: ", ".join(v.sizes[key] for v in (first, second) if key in v.sizes) for key in keys}
    return Verdict([*first, *second], outcomes, {key: words for key, words in sizes.items() if words})


def _paper_table_verdict(ablation: str, metrics: Sequence[str]) -> Callable[[pd.DataFrame], Verdict]:
    """Every level against the reference, per environment, judged against the paper's own cell
    of that environment (:func:`~opcc_edu.lab.findings.verdicts.paper_claims`), metric by metric."""

    def judge(table: pd.DataFrame) -> Verdict:
        verdict = level_difference_verdict(table, ablation, metric=metrics[0])
        for metric in metrics[1:]:
            verdict = _both(verdict, level_difference_verdict(table, ablation, metric=metric))
        return verdict

    return judge


def _worse_without(ablation: str) -> Callable[[pd.DataFrame], Verdict]:
    """A switch the paper calls important without a table: every other level has a higher AURCC."""
    return lambda table: level_difference_verdict(table, ablation, metric="aurcc", claims="higher")


def _worse_unclipped(table: pd.DataFrame) -> Verdict:
    """The clipping finding: the unclipped level (``none``) against the default box. The other
    boxes are not part of the paper's claim (it names no box), so they are shown, not judged."""
    claims = {env: {"none": "higher"} for env in dict.fromkeys(table["environment"])}
    return level_difference_verdict(table, "clipping", metric="aurcc", claims=claims)


def _terminating(table: pd.DataFrame) -> pd.DataFrame:
    """The rows of environments whose episodes can end early (a predefined termination rule
    other than ``"none"``: Hopper and Walker2d). Elsewhere no rule can fire -- the mazes and
    HalfCheetah never terminate -- so the levels differ by training noise alone and say nothing
    about the finding."""
    from ...envs import ENV_NAMES, get_spec

    can_end = [env for env in ENV_NAMES if get_spec(env).termination != "none"]
    return table[table["environment"].isin(can_end)]


def _termination(table: pd.DataFrame) -> Verdict:
    """The termination finding, judged where an episode can end early (:func:`_terminating`)."""
    return _worse_without("termination")(_terminating(table))


def _horizon(table: pd.DataFrame) -> Verdict:
    """AURCC from the shortest to the longest horizon, with the paper's change over the same
    horizons (Tables 3 and 17) for the size."""
    part = table[table["metric"] == "aurcc"]
    paper = {}
    for env, cells in part.groupby("environment", sort=False):
        levels = cells["level"].astype(str)
        paper[env] = paper_difference("horizon", env, "aurcc", min(levels, key=int), max(levels, key=int))
    return trend_verdict(table, level_prefix="h=", paper={env: d for env, d in paper.items() if d == d})


def _ensemble_count(table: pd.DataFrame) -> Verdict:
    """From the smallest to the full ensemble, with the paper's CR_K growth over the same levels
    (Table 5: prefixes of 10 and 100 members) for the size."""
    paper = {}
    for env, cells in table[table["metric"] == "cr_k"].groupby("environment", sort=False):
        levels = cells["level"].astype(str)
        paper[env] = paper_difference("ensemble-count", env, "cr_k", min(levels, key=int), max(levels, key=int))
    return ensemble_size_verdict(table, paper={env: d for env, d in paper.items() if d == d})


def _confidence(table: pd.DataFrame) -> Verdict:
    """PCI against EV: AURCC and CR_K judged against the paper's cell of each environment."""
    pci = table[table["level"].isin(["ev", "pci"])]
    claims = {metric: paper_claims("confidence", metric) for metric in ("aurcc", "cr_k")}
    parts = []
    for env in dict.fromkeys(pci["environment"]):
        if env not in claims["aurcc"]:
            continue
        expectations = [
            Expectation(
                metric,
                "lower",
                claim=claims[metric][env]["pci"],
                digits=3 if metric == "aurcc" else 2,
                paper_difference=paper_difference("confidence", env, metric, "ev", "pci"),
            )
            for metric in ("aurcc", "cr_k")
        ]
        parts.append(contrast_verdict(pci[pci["environment"] == env], "pci", "ev", expectations))
    return sum(parts[1:], parts[0]) if parts else Verdict()


#: The paper's findings, one per ablation, in the registry's order.
FINDINGS: tuple[Finding, ...] = (
    Finding(
        "dataset-type",
        "Environments differ far more than dataset types within one",
        dataset_spread_verdict,
    ),
    Finding("horizon", "AURCC grows with the query horizon", _horizon),
    Finding(
        "confidence",
        "PCI vs EV: AURCC lower or higher by environment (Tables 4, 16); CR_K much lower",
        _confidence,
    ),
    Finding(
        "ensemble-count",
        "From the smallest to the full ensemble AURCC barely changes, CR_K grows",
        _ensemble_count,
    ),
    Finding(
        "prior-scale",
        "A randomized prior brings no significant improvement (large maze aside)",
        _paper_table_verdict("prior-scale", ("aurcc",)),
    ),
    Finding(
        "stochastic",
        "Stochastic and deterministic members differ little",
        _paper_table_verdict("stochastic", ("aurcc",)),
    ),
    Finding(
        "model-type",
        "Autoregressive models: no AURCC gain; a higher CR_K on locomotion",
        _paper_table_verdict("model-type", ("aurcc", "cr_k")),
    ),
    Finding(
        "normalization",
        "Without normalization AURCC rises on Walker2d, the large and open mazes, falls on Hopper and the "
        "U-maze (Tables 14, 15)",
        _paper_table_verdict("normalization", ("aurcc",)),
    ),
    Finding(
        "clipping",
        "Clipping matters: unclipped rollouts do worse (no table)",
        _worse_unclipped,
        levels=("health", "none"),
    ),
    Finding(
        "termination",
        "A predefined termination function matters: the others do worse (no table; judged on Hopper and "
        "Walker2d, the environments whose episodes can end early)",
        _termination,
    ),
    Finding("reward", "Not studied by the paper (it learns the reward)", None),
    Finding("mixture", "An option of the reference code, without a finding", None),
)


def chapter_name(ablation: str | ex.Ablation) -> str:
    """The chapter of an ablation: ``ablation_<name>`` (``-`` becomes ``_``), under ``book/``."""
    return "ablation_" + ex.get_ablation(ablation).name.replace("-", "_")


def _book_dir() -> Path | None:
    """The book's chapters next to the package's source tree (an editable install), if present."""
    folder = Path(__file__).resolve().parents[3] / "book"
    return folder if folder.is_dir() else None


def judge_finding(finding: Finding | str, table: pd.DataFrame) -> Verdict | None:
    """The verdict of one finding on an aggregate of ours (``None`` for a finding not judged).

    Args:
        finding: a :class:`Finding` or an ablation's registry key.
        table: :func:`opcc_edu.lab.experiments.aggregate` of that ablation, with the metrics the
            verdict reads (the paper's four; ``aggregate``'s default), carrying its runs
            (:attr:`AblationResults.table <opcc_edu.lab.findings.AblationResults>` does;
            :func:`~opcc_edu.lab.findings.rule.with_runs`) so that twins are paired.

    Warns:
        UserWarning: when ``table`` carries no runs: every difference is then judged on the two
            levels' combined intervals, not paired (the rule's fallback, said rather than silent).
    """
    if isinstance(finding, str):
        finding = next(f for f in FINDINGS if f.ablation == ex.get_ablation(finding).name)
    if finding.judge is None or table.empty:
        return None
    if runs_of(table) is None:
        warnings.warn(
            f"judge_finding({finding.ablation!r}): the table carries no runs, so no difference is paired "
            "by seed; pass an aggregate with its runs (AblationResults.table, findings.rule.with_runs)",
            stacklevel=2,
        )
    return finding.judge(table)


def _with_intervals(table: pd.DataFrame) -> pd.DataFrame:
    """The environments of an aggregate whose every cell rests on at least two runs.

    A cell of one run has no interval, and every verdict reads intervals: such an environment
    (a level with one seed so far) is left out of the glance rather than judged on a point.
    """
    if table.empty or "n_samples" not in table:
        return table
    enough = table.groupby("environment")["n_samples"].min() >= 2
    return table[table["environment"].isin(enough[enough].index)]


def paper_margin_agreement() -> pd.DataFrame:
    """How the margins sort the paper's own level differences (the check behind
    :func:`~opcc_edu.lab.findings.rule.equivalence_margin`).

    Returns:
        One row per metric of :data:`opcc_edu.names.METRICS`: the absolute margin
        (:data:`~opcc_edu.lab.findings.rule.EQUIVALENCE_MARGINS`), ``not_significant`` and
        ``inside`` (the paper's differences with overlapping intervals, and how many of them are
        at most the margin scaled to the two levels' means), ``significant`` and ``outside``
        (those with disjoint intervals, and how many exceed it). Read from
        :func:`opcc_edu.lab.experiments.paper_results` (locomotion's five-dataset means, the mazes'
        ``1m`` cells).
    """
    parts = []
    for name in ex.ABLATIONS:
        paper = ex.paper_results(name)
        paper = paper[paper["dataset"].isin(["all", "1m"])]
        if len(paper):
            d = ex.level_differences(paper, name)
            cells = paper.assign(level=paper["level"].astype(str)).drop_duplicates(["environment", "metric", "level"])
            mean = cells.set_index(["environment", "metric", "level"])["mean"]
            keys = zip(d["environment"], d["metric"], d["reference"].astype(str), d["level"].astype(str), strict=True)
            d["margin"] = [equivalence_margin(m, mean[(e, m, r)], mean[(e, m, lv)]) for e, m, r, lv in keys]
            parts.append(d)
    d = pd.concat(parts, ignore_index=True)
    rows = []
    for metric in METRICS:
        part = d[d["metric"] == metric]
        size = part["difference"].astype(float).abs()
        separated = part["separated"].astype(bool)
        margin = part["margin"]
        rows.append(
            {
                "metric": metric,
                "margin": EQUIVALENCE_MARGINS[metric],
                "not_significant": int((~separated).sum()),
                "inside": int(((size <= margin + 1e-9) & ~separated).sum()),
                "significant": int(separated.sum()),
                "outside": int(((size > margin + 1e-9) & separated).sum()),
            }
        )
    return pd.DataFrame(rows)


def comparability_notes(table: pd.DataFrame, verdict: Verdict, ablation: str | ex.Ablation) -> list[str]:
    """What makes a verdict not comparable with the paper's finding, each with its count.

    * locomotion environments whose cells rest on fewer datasets than the five the paper's
      locomotion cells average (an ablation with a paper table, other than the dataset-type one,
      whose level is the dataset): ``"3 of 7 environments on medium data only; paper: 5
      datasets"``;
    * a verdict resting on one environment: ``"1 environment only (hopper)"``.

    Args:
        table: the aggregate the verdict was read from (with ``datasets``, as
            :func:`opcc_edu.lab.experiments.aggregate` gives it).
        verdict: its verdict.
        ablation: registry key or :class:`~opcc_edu.lab.experiments.Ablation`.
    """
    ablation = ex.get_ablation(ablation)
    judged = [env for env in verdict.outcomes if env in set(table["environment"])]
    if not judged and verdict.outcomes:  # a finding about all environments
        judged = list(dict.fromkeys(table["environment"]))
    notes = []
    if ablation.paper_tables and ablation.factor != "dataset" and "datasets" in table.columns:
        few: dict[str, list[str]] = {}
        for env in judged:
            if env.startswith("maze2d"):
                continue
            cells = table.loc[table["environment"] == env, "datasets"]
            used = {d.strip() for cell in cells for d in str(cell).split(",")}
            if len(used) < PAPER_LOCOMOTION_DATASETS:
                few.setdefault(", ".join(sorted(used)), []).append(env)
        for datasets, envs in few.items():
            where = "" if len(judged) == 1 else f"{len(envs)} of {len(judged)} environments "
            notes.append(f"{where}on {datasets} data only; paper: {PAPER_LOCOMOTION_DATASETS} datasets")
    if len(judged) == 1:
        notes.insert(0, f"1 environment only ({judged[0]})")
    return notes


def findings_at_a_glance(
    root: str | os.PathLike | None = None, also: Sequence[str | os.PathLike] | None = None
) -> pd.DataFrame:
    """One row per finding of the paper, our verdict per set of committed results.

    Reads the committed results only (no run): every directory ``<recipe>/<profile>`` under
    ``root`` (:func:`opcc_edu.lab.experiments.report.profile_directories`, paper recipe first, the
    largest profile first), then those under each root of ``also``. A directory holds a
    configuration ablation only with all its levels, and an environment enters a verdict only
    when every cell of it rests on two runs or more (one run has no interval).

    Args:
        root: the ``results/ablations`` directory (default: the repository's,
            :func:`opcc_edu.lab.experiments.find_results_root`).
        also: further results roots (default: with ``root`` not given, the repository's other
            roots beside it, ``results/ablations-*``, such as ``results/ablations-classroom``;
            with ``root`` given, none).

    Returns:
        DataFrame with ablation, title, finding (the paper's, in words), paper_tables, one
        column per results directory (:func:`results_label`: ``"<profile> (<recipe> queries)"``,
        saying so where the runs read another profile's data and queries; the verdict's
        :meth:`~opcc_edu.lab.findings.verdicts.Verdict.summary` followed by its
        :func:`comparability_notes` in square brackets, ``"–"`` without results, ``"not
        judged"`` for a finding the paper does not state), chapter (a MyST ``{doc}`` link, empty
        when the chapter does not exist) and chapter_name. ``attrs["verdicts"]`` maps
        (ablation, column) to the :class:`~opcc_edu.lab.findings.verdicts.Verdict`.
    """
    root_path = Path(root) if root is not None else ex.find_results_root()
    if also is None:
        also = sorted(root_path.parent.glob(f"{root_path.name}-*")) if root is None and root_path is not None else []
    roots = ([root_path] if root_path is not None else []) + [Path(extra) for extra in also]
    columns: dict[str, pd.DataFrame] = {}
    for base in roots:
        for name in profile_directories(base):
            results = ex.load_results(base / name)
            if results.empty:
                continue
            label = results_label(base / name)
            if label in columns:
                raise ValueError(f"two results directories give the column {label!r}; the second is {base / name}")
            columns[label] = results
    book = _book_dir()
    rows, verdicts = [], {}
    for finding in FINDINGS:
        ablation = ex.get_ablation(finding.ablation)
        chapter = chapter_name(ablation)
        exists = book is None or (book / f"{chapter}.ipynb").exists()
        row = {
            "ablation": ablation.name,
            "title": ablation.title,
            "finding": finding.words,
            "paper_tables": ", ".join(map(str, ablation.paper_tables)) or "none",
        }
        for column, results in columns.items():
            table = _with_intervals(with_runs(ex.aggregate(results, ablation), results, ablation))
            present = set(table["level"].astype(str)) if not table.empty else set()
            if finding.levels is not None:
                complete = set(finding.levels) <= present
            else:
                complete = len(present) >= (1 if ablation.is_selection else len(ablation.levels))
            if not complete:
                row[column] = "–"
                continue
            verdict = judge_finding(finding, table)
            row[column] = "not judged" if verdict is None else verdict.summary()
            if verdict is not None:
                verdicts[(ablation.name, column)] = verdict
                notes = comparability_notes(table, verdict, ablation) if verdict.outcomes else []
                if notes:
                    row[column] += " [" + "; ".join(notes) + "]"
        row["chapter"] = f"{{doc}}`{chapter}`" if exists else ""
        row["chapter_name"] = chapter if exists else ""
        rows.append(row)
    frame = pd.DataFrame(
        rows, columns=["ablation", "title", "finding", "paper_tables", *columns, "chapter", "chapter_name"]
    )
    frame.attrs["verdicts"] = verdicts
    return frame


def results_label(directory: str | os.PathLike) -> str:
    """A results directory's column name: ``"<profile> (<recipe> queries)"``, where the
    profile is the directory's name. Where the runs read the data and queries of another
    profile (``meta.json``'s ``sizes``, e.g. ``paper/classroom``: classroom ensembles on the
    tiny profile's 20,000 transitions and 300 queries), the label says so:
    ``"classroom models, tiny data (paper queries)"``, or names the sizes when no profile has
    them."""
    directory = Path(directory)
    recipe = ex.results_recipe(directory)
    name = directory.name
    label = f"{name} ({recipe} queries)"
    sizes = ex.results_sizes(directory)
    profile = PROFILES.get(name.split("-", 1)[0])
    if sizes is None or profile is None:
        return label
    own = (profile.dataset_size, profile.queries_per_env)
    read = (sizes["dataset_size"], sizes["queries_per_env"])
    if read == own:
        return label
    match = [p.name for p in PROFILES.values() if (p.dataset_size, p.queries_per_env) == read]
    data = f"{match[0]} data" if match else f"{read[0]:,} transitions and {read[1]:,} queries"
    return f"{name} models, {data} ({recipe} queries)"


class _LinkedTable(Table):
    """A :class:`~opcc_edu.display.Table` whose MyST ``{doc}`` links in its Markdown text
    (``{doc}`Title <chapter>```) are HTML links to the chapters' pages (``<chapter>.html``,
    beside this one)."""

    links: Sequence[tuple[str, str]] = ()

    def to_html(self) -> str:
        text = super().to_html()
        for title, chapter in self.links:
            link = html.escape(f"{{doc}}`{title} <{chapter}>`")
            text = text.replace(link, f'<a href="{chapter}.html">{html.escape(title)}</a>')
        return text


def glance_table(frame: pd.DataFrame) -> Table:
    """:func:`findings_at_a_glance` as a table: the finding (the ablation's title, linked to its
    chapter, and the paper's words), the paper's tables and one column per set of results. Its
    text (``str``) is Markdown with MyST ``{doc}`` links; in a notebook and on the book's page it
    is an HTML table whose titles link to the chapters' pages."""
    fixed = ("ablation", "title", "finding", "paper_tables", "chapter", "chapter_name")
    results = [c for c in frame.columns if c not in fixed]
    header = ["finding", "paper tables", *results]
    rows, links = [], []
    for _, row in frame.iterrows():
        title = row["title"]
        if row["chapter_name"]:
            links.append((title, row["chapter_name"]))
            title = f"{{doc}}`{title} <{row['chapter_name']}>`"
        rows.append([f"{title}: {row['finding']}", row["paper_tables"], *(row[c] for c in results)])
    table = _LinkedTable(header, rows, caption=GLANCE_CAPTION)
    table.links = links
    return table
