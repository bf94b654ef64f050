"""Each finding told once: the set of committed runs its lesson judges it on, and the one sentence
that states the verdict, wherever the book states it.

A lesson names the runs its first table reads (:data:`LESSON_RUN_SETS`); :func:`show_verdict`
states the verdict of that run set on the lesson's page, and *What we learned* states it through
the same function from the same run set, so the two pages cannot disagree (a test of the rendered
book compares them). The verdict is :func:`~opcc_edu.lab.findings.judge_finding` -- the rule of
:mod:`opcc_edu.lab.findings.rule` -- on the run set's aggregate, its twin runs paired, every
environment whose cells rest on two runs or more. A lesson that reads another set of runs asks
for it by its word (:data:`RUN_SETS`: ``lesson_results(finding, runs="hard")``,
:func:`run_set_label`, :func:`one_step_errors`), never by a folder, profile or stored key.
"""

from __future__ import annotations

import functools
import html
import json
import re
from pathlib import Path
from typing import Any

from .. import experiments as ex
from .glance import (
    FINDINGS,
    _with_intervals,
    chapter_name,
    comparability_notes,
    judge_finding,
    paper_margin_agreement,
    results_label,
)
from .results import AblationResults, load_committed
from .rule import EQUIVALENCE_MARGINS, SMALLEST_MARGIN
from .verdicts import Verdict

__all__ = [
    "LESSON_RUN_SETS",
    "RUN_SETS",
    "RUN_SET_NAMES",
    "lesson_results",
    "lesson_verdict",
    "margin_statement",
    "one_step_errors",
    "run_set_label",
    "show_all_verdicts",
    "show_verdict",
    "verdict_statement",
]

#: The run set of each finding's lesson, as :func:`~opcc_edu.lab.findings.load_committed` names
#: it: ``"<recipe>/<profile>"`` under ``results/ablations`` (the small runs), or
#: ``"ablations-classroom/<recipe>/<profile>"`` (the larger runs, ensembles of 20 on classroom data).
LESSON_RUN_SETS: dict[str, str] = {
    "dataset-type": "ablations-classroom/paper/classroom",
    "horizon": "ablations-classroom/paper/classroom",
    "confidence": "ablations-classroom/paper/classroom",
    "ensemble-count": "ablations-classroom/paper/classroom",
    "prior-scale": "paper/tiny",
    "stochastic": "paper/tiny",
    "model-type": "paper/tiny",
    "normalization": "paper/tiny",
    "clipping": "paper/tiny",
    "termination": "paper/tiny",
    "reward": "paper/tiny",
    "mixture": "paper/tiny",
}


#: Our sets of runs by the word a lesson uses for them, as :data:`LESSON_RUN_SETS` names them:
#: ``"small"`` (10 members on 20,000 transitions, 300 queries per environment), ``"larger"``
#: (ensembles of 20 on 200,000 transitions, 1,500 queries) and ``"hard"`` (runs of the small
#: runs' sizes, five seeds, on the package's hard queries). A lesson asks for
#: ``lesson_results(finding, runs="hard")`` or :func:`run_set_label`, never for a folder.
RUN_SETS: dict[str, str] = {
    "small": "paper/tiny",
    "larger": "ablations-classroom/paper/classroom",
    "hard": "hard/tiny",
}


def _run_set(runs: str | None, name: str) -> str:
    if runs is None:
        return LESSON_RUN_SETS[name]
    if runs not in RUN_SETS:
        raise ValueError(f"unknown set of runs {runs!r}; valid choices: {', '.join(RUN_SETS)}")
    return RUN_SETS[runs]


def lesson_results(ablation: str | ex.Ablation, runs: str | None = None) -> AblationResults:
    """The committed results a finding's lesson reads (read once per process: committed results
    do not change while a book is built).

    Args:
        ablation: registry key or :class:`~opcc_edu.lab.experiments.Ablation`.
        runs: a set of runs by its word in :data:`RUN_SETS` (``"small"``, ``"larger"``,
            ``"hard"``); by default the lesson's own (:data:`LESSON_RUN_SETS`).

    Raises:
        ValueError: for an unknown ablation or set of runs.
        LookupError: when that run set is not committed (e.g. a checkout without ``results/``).
    """
    name = ex.get_ablation(ablation).name
    return _results(name, _run_set(runs, name))


def lesson_verdict(ablation: str | ex.Ablation) -> Verdict | None:
    """The verdict of a finding on its lesson's run set (``None``: the paper states no finding)."""
    return _lesson(ex.get_ablation(ablation).name)[1]


@functools.cache
def _results(name: str, run_set: str) -> AblationResults:
    root = run_set.split("/", 1)[0] if run_set.startswith("ablations-") else None
    found = load_committed(name, root=root, only=run_set)
    if run_set not in found:
        raise LookupError(f"run set {run_set!r} of {name!r} is not committed; committed: {sorted(found)}")
    return found[run_set]


@functools.cache
def _lesson(name: str) -> tuple[AblationResults, Verdict | None]:
    entry = _results(name, LESSON_RUN_SETS[name])
    return entry, judge_finding(name, _with_intervals(entry.table))


def _run_set_directory(run_set: str) -> Path:
    """The results directory of a run set named as :func:`load_committed` names it."""
    head, _, rest = run_set.partition("/")
    if head.startswith("ablations-"):
        root, relative = ex.sibling_results_root(head), rest
    else:
        root, relative = ex.find_results_root(), run_set
    directory = None if root is None else root / relative
    if directory is None or not directory.is_dir():
        raise LookupError(f"run set {run_set!r} is not committed (a checkout without results/?)")
    return directory


def run_set_label(runs: str) -> str:
    """The column :func:`~opcc_edu.lab.findings.findings_at_a_glance` gives a set of runs
    (:data:`RUN_SETS`: ``"small"``, ``"larger"``, ``"hard"``), e.g.
    ``run_set_label("small") == "tiny (paper queries)"``: a lesson picks its columns by the runs'
    word, not by a folder's.

    Raises:
        ValueError: for an unknown set of runs.
        LookupError: when it is not committed.
    """
    return results_label(_run_set_directory(_run_set(runs, "")))


def one_step_errors(ablation: str | ex.Ablation, runs: str | None = None) -> dict[str, Any]:
    """The held-out one-step error of the ensembles a set of runs trained, as
    ``benchmarks/bench_model_error.py`` measured it for that grid: ``{"<env>/<dataset>": {level:
    [{"seed", "mse", "cache_hit", ...}, ...]}}``, ``mse`` in standardised units, mean over
    members and outputs.

    Args:
        ablation: registry key or :class:`~opcc_edu.lab.experiments.Ablation`.
        runs: a set of runs by its word in :data:`RUN_SETS`; by default the lesson's own.

    Raises:
        FileNotFoundError: when the repository's benchmark reports are not there.
        LookupError: when no one-step error was measured for that set of runs.
    """
    from ..scale import find_benchmark_results

    name = ex.get_ablation(ablation).name
    run_set = _run_set(runs, name)
    head, _, rest = run_set.partition("/")
    root, within = (head, rest) if head.startswith("ablations-") else ("ablations", run_set)
    suffix = "" if root == "ablations" else f"_{root}"
    stem = f"model_error_{name}_{within.rsplit('/', 1)[-1]}{suffix}"
    path = find_benchmark_results() / f"{stem}.json"
    if not path.is_file():
        raise LookupError(f"no one-step error measured for the run set {run_set!r} of {name!r}")
    record = json.loads(path.read_text())
    if record["config"]["results"] != f"results/{root}/{within}":
        raise LookupError(
            f"{stem}.json measured {record['config']['results']!r}, not the run set {run_set!r} of {name!r}"
        )
    return record["results"]


#: How a page names each run set (a lesson speaks of runs, not of folders).
RUN_SET_NAMES: dict[str, str] = {
    "paper/tiny": "small runs",
    "ablations-classroom/paper/classroom": "larger runs",
    "hard/tiny": "small runs on the hard queries",
}


def _describe(entry: AblationResults) -> str:
    sizes = ex.results_sizes(entry.directory) or {}
    members = sorted({int(m) for m in entry.results.get("ensemble_size", [])})
    parts = [f"{'–'.join(map(str, members))} members"] if members else []
    if sizes:
        parts.append(f"{sizes['dataset_size']:,} transitions per dataset, {sizes['queries_per_env']:,} queries")
    parts.append(f"{entry.results['seed'].nunique()} seeds")
    name = RUN_SET_NAMES.get(LESSON_RUN_SETS.get(entry.ablation.name, ""), results_label(entry.directory))
    return f"the {name} ({', '.join(parts)})"


def verdict_statement(ablation: str | ex.Ablation) -> str:
    """One Markdown sentence: the paper's finding, our verdict on the lesson's run set, the
    environments by outcome and the run set in words (:data:`RUN_SET_NAMES`, with its sizes);
    e.g. ``"The paper: ... **Our verdict: inconclusive (4 of 7; 3 reproduced)** (inconclusive: ...;
    reproduced: ...); judged on the small runs (10 members, 20,000 transitions per dataset, 300
    queries, 3 seeds)."``"""
    name = ex.get_ablation(ablation).name
    finding = next(f for f in FINDINGS if f.ablation == name)
    entry = lesson_results(name)
    verdict = lesson_verdict(name)
    if verdict is None:
        return f"{finding.words}: no verdict (the paper states no finding); the lesson reads {_describe(entry)}."
    by_outcome = {}
    for env, outcome in verdict.outcomes.items():
        by_outcome.setdefault(outcome, []).append(env)
    where = "; ".join(f"{outcome}: {', '.join(envs)}" for outcome, envs in sorted(by_outcome.items()))
    notes = comparability_notes(_with_intervals(entry.table), verdict, name) if verdict.outcomes else []
    caveat = f" [{'; '.join(notes)}]" if notes else ""
    # the paper's claim named as the paper's: it is not this page's result, which follows it
    first = finding.words.split()[0]
    claim = finding.words if first[1:] != first[1:].lower() else finding.words[0].lower() + finding.words[1:]
    return f"The paper: {claim}. **Our verdict: {verdict.summary()}**{caveat} ({where}); judged on {_describe(entry)}."


def _verdict_html(name: str) -> str:
    body = re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", html.escape(verdict_statement(name), quote=False))
    body = re.sub(r"`(.+?)`", r"<code>\1</code>", body)
    return f'<p class="opcc-verdict" data-finding="{html.escape(name)}">{body}</p>'


def show_verdict(ablation: str | ex.Ablation) -> Verdict | None:
    """Display :func:`verdict_statement` (a paragraph marked ``opcc-verdict``, so that a test of
    the rendered book can find it on every page) and return the verdict."""
    from IPython.display import HTML, display

    name = ex.get_ablation(ablation).name
    display(HTML(_verdict_html(name)))
    return lesson_verdict(name)


def show_all_verdicts() -> dict[str, Verdict | None]:
    """Display every finding's verdict as its lesson states it: per finding, a link to the lesson
    and :func:`show_verdict`'s paragraph. Returns the verdicts by ablation."""
    from IPython.display import HTML, display

    items, verdicts = [], {}
    for finding in FINDINGS:
        ablation = ex.get_ablation(finding.ablation)
        verdicts[ablation.name] = lesson_verdict(ablation.name)
        link = f'<a href="{chapter_name(ablation)}.html">{html.escape(ablation.title)}</a>'
        items.append(f"<li><em>{link}</em>{_verdict_html(ablation.name)}</li>")
    display(HTML('<ul class="opcc-verdicts">' + "".join(items) + "</ul>"))
    return verdicts


def margin_statement() -> str:
    """The equivalence margins and how they sort the paper's own level differences, as Markdown
    bullets (:func:`~opcc_edu.lab.findings.glance.paper_margin_agreement`; each margin scaled
    to the two levels' size, :func:`~opcc_edu.lab.findings.rule.equivalence_margin`), then the
    selective gain's margin (a metric the paper does not report, so no table checks it)."""
    names = {"aurcc": "AURCC", "loss": "loss", "rpp": "RPP", "cr_k": "CR_K"}
    lines = []
    for _, row in paper_margin_agreement().iterrows():
        if row["metric"] not in names:
            continue
        lines.append(
            f"- **{names[row['metric']]}: ±{row['margin']:g}**, or half the larger level's value where that is "
            f"smaller (at least ±{SMALLEST_MARGIN:g}). Of the paper's own differences between levels, "
            f"{row['inside']} of the {row['not_significant']} it reports as not significant lie inside, "
            f"{row['outside']} of the {row['significant']} it reports as significant outside."
        )
    lines.append(
        f"- **Selective gain: ±{EQUIVALENCE_MARGINS['selective_gain']:g}**, scaled the same way; "
        "the paper reports none."
    )
    return "\n".join(lines)
