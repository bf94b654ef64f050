"""Every exercise solution of the book runs: a renamed column or a missing horizon fails here.

Chapters write a solution as a ``{solution}`` directive in a Markdown cell (usually with
``:class: dropdown``) holding fenced Python (```` ```python ```` or ```` ```{code-cell} ````),
or as code cells between ``{solution-start}`` and ``{solution-end}``; :func:`solution_blocks`
finds both, so a solution added or renamed is picked up without touching this file.

**How a chapter's solutions run.** For each chapter with solution code, one kernel (the tiny
profile, as in the test suite; hidden checks skipped, as a reader's kernel skips them) runs the
chapter's own code cells that the solutions need, in the chapter's order, then each solution
after the other; a solution that raises fails the test, with its label and error.

*Which cells are needed* (:func:`needed_cells`) is read from the code, not listed by hand: the
names a solution reads, then, going back through the chapter, every cell that binds or changes
one of them (an assignment, an import, a ``def``, ``x[...] = ``, ``x.attr = ``, ``x.append(...)``
as a statement), adding the names that cell reads in turn. Running the book again in full would
add the whole book's execution time (about a quarter of an hour on CI's two cores, which already
runs every chapter twice: under nbval and in the book build); the slice runs only what the
exercises read (the ablation chapters' committed results, a chapter's small live grid where a
solution reads it), so this file adds a few minutes. A slice may miss a cell that works by side
effect alone (a seed set, a file written); so when a solution fails in its slice, the chapter is
run again in full (every code cell but the hidden checks) before the solutions, and the test
fails only if the solution fails there too (the message says when the slice alone failed).

**Solutions answer.** A solution with code states its answer in a line it prints itself from the
values it computes, starting with ``Answer:`` (so that every number in it is computed, not
typed). After a chapter's solutions run, each such line is read back from the output: it must be
there, and a verdict it states must agree with the numbers beside it (:func:`answer_problems`:
an interval said to lie inside or outside a margin, a value said to be below a bound or not).
:data:`ANSWERING_CHAPTERS` lists the chapters held to this; :data:`ANSWER_PENDING` the
solutions of theirs that do not yet print their answer (a test fails when one of them does, so
that the list only shrinks).
"""

from __future__ import annotations

import ast
import builtins
import re
import warnings
from dataclasses import dataclass
from pathlib import Path

import nbformat
import pytest

from opcc_edu.display import CHECK_MARKER

ROOT = Path(__file__).resolve().parents[2]
BOOK = ROOT / "book"
#: Terminal colours in a kernel's traceback.
ANSI = re.compile(r"\x1b\[[0-9;]*m")
#: Seconds a cell may run.
CELL_TIMEOUT = 900

#: A ``{solution}`` directive in backticks or colons, closed by a fence of the same length.
SOLUTION = re.compile(
    r"^(?P<fence>`{3,}|:{3,})\{solution\}(?P<label>[^\n]*)\n(?P<body>.*?)\n(?P=fence)[ \t]*$", re.S | re.M
)
#: The gate of a solution written as code cells: ``{solution-start} label`` or ``{solution-end}``.
GATE = re.compile(r"\{solution-(?P<kind>start|end)\}(?P<label>[^\n]*)")
#: A fenced block of Python inside it.
CODE = re.compile(
    r"^(?P<fence>`{3,})[ \t]*(?:\{code-cell\}[ \t]*(?:ipython3?|python3?)?|python3?|py|ipython3?)[ \t]*\n"
    r"(?P<code>.*?)\n(?P=fence)[ \t]*$",
    re.S | re.M,
)
#: MyST options at the top of a ``{code-cell}`` block (``:tags: ...`` lines or a ``---`` block).
OPTION_LINES = re.compile(r"\A(?:---\n.*?\n---\n|(?::[\w-]+:[^\n]*\n)+)", re.S)

#: Chapters whose code solutions print their answer (``Answer: ...``).
ANSWERING_CHAPTERS = frozenset(
    """
    mdp_background policy_comparison_queries benchmark_tour risk_coverage offline_data
    dynamics_ensembles answering_with_confidence answering_pcqs diagnosing_errors ablations_overview
    ablation_dataset_type ablation_horizon ablation_confidence ablation_ensemble_count
    ablation_prior_scale ablation_stochastic ablation_model_type ablation_normalization
    ablation_mixture beyond_coverage_confidence what_aurcc_rewards predictor_and_calibration
    calibrated_confidence model_free_baseline original_benchmark ablation_clipping ablation_termination
    ablation_reward
    """.split()
)
#: Solutions of those chapters (by label) that do not print their answer yet.
ANSWER_PENDING: frozenset[str] = frozenset()
ANSWER = re.compile(r"^Answer: .+$", re.M)
NUMBER = r"[-+−]?\d+(?:\.\d+)?(?:e[-+]?\d+)?"
#: "[low, high] is (not) inside ±margin"
INTERVAL_VERDICT = re.compile(rf"\[({NUMBER}), ({NUMBER})\] is (not inside|inside) ±({NUMBER})")
#: "value, (not) below bound": the value is the last number before the verdict
BOUND_VERDICT = re.compile(rf"({NUMBER})\)?[,;]? (not below|below) ({NUMBER})")


def _number(text: str) -> float:
    return float(text.replace("−", "-"))


def answer_problems(output: str) -> list[str]:
    """What is wrong with the ``Answer:`` lines of a solution's output: none printed, or a verdict
    its own numbers contradict (see the module's docstring)."""
    lines = ANSWER.findall(output)
    if not lines:
        return ["no line starting with 'Answer:' in the output"]
    problems = []
    for line in lines:
        for low, high, verdict, margin in INTERVAL_VERDICT.findall(line):
            inside = -_number(margin) <= _number(low) and _number(high) <= _number(margin)
            if inside != (verdict == "inside"):
                problems.append(f"{line!r}: the interval is {'inside' if inside else 'not inside'}")
        for value, verdict, bound in BOUND_VERDICT.findall(line):
            below = _number(value) < _number(bound)
            if below != (verdict == "below"):
                problems.append(f"{line!r}: {value} is {'below' if below else 'not below'} {bound}")
    return problems


@dataclass(frozen=True)
class Solution:
    """One solution's code."""

    label: str
    code: str


def solution_blocks(nb) -> list[Solution]:
    """The Python code of every solution of a notebook, in the chapter's order."""
    found, gated, label = [], False, ""
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            for match in SOLUTION.finditer(cell.source):
                name = match.group("label").strip() or "solution"
                for block in CODE.finditer(match.group("body")):
                    found.append(Solution(name, OPTION_LINES.sub("", block.group("code"))))
            # a cell may close one solution and open the next: the last marker decides
            for marker in GATE.finditer(cell.source):
                gated = marker.group("kind") == "start"
                if gated:
                    label = marker.group("label").strip() or "solution"
        elif cell.cell_type == "code" and (gated or "solution" in cell.metadata.get("tags", [])):
            found.append(Solution(label or "solution cell", cell.source))
    return found


def _chapters() -> list[Path]:
    return sorted(
        path
        for path in BOOK.rglob("*.ipynb")
        if not any(part.startswith(("_", ".")) for part in path.relative_to(BOOK).parts)
    )


def _python(source: str) -> str:
    """Cell source that ``ast`` can read: IPython's ``%`` and ``!`` lines blanked."""
    return "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines())


@dataclass
class Names:
    """What a cell does with names: reads, binds (anywhere), binds at its top level (overwrites)."""

    reads: set[str]
    binds: set[str]
    overwrites: set[str]


def _base(node) -> str | None:
    while isinstance(node, ast.Attribute | ast.Subscript | ast.Starred):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def cell_names(source: str) -> Names:
    """:class:`Names` of a cell's code (a cell that does not parse reads and binds nothing)."""
    try:
        tree = ast.parse(_python(source))
    except SyntaxError:
        return Names(set(), set(), set())
    imported = {
        (alias.asname or alias.name).split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    }
    reads, binds = set(), set(imported)
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (binds if isinstance(node.ctx, ast.Store | ast.Del) else reads).add(node.id)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            binds.add(node.name)
        elif isinstance(node, ast.Attribute | ast.Subscript) and isinstance(node.ctx, ast.Store | ast.Del):
            if (base := _base(node)) is not None:
                binds.add(base)  # x.a = ..., x[k] = ...: x changed
        elif isinstance(node, ast.AugAssign) and (base := _base(node.target)) is not None:
            binds.add(base)
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            func = node.value.func
            if isinstance(func, ast.Attribute) and (base := _base(func.value)) is not None and base not in imported:
                binds.add(base)  # rows.append(...) as a statement: rows changed (a module's call is not)
    overwrites = set()
    for statement in tree.body:
        if isinstance(statement, ast.Assign | ast.AnnAssign):
            targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
            for target in targets:
                for node in ast.walk(target):
                    if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                        overwrites.add(node.id)
        elif isinstance(statement, ast.Import | ast.ImportFrom):
            overwrites |= {(alias.asname or alias.name).split(".")[0] for alias in statement.names}
        elif isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            overwrites.add(statement.name)
    return Names(reads - set(dir(builtins)), binds, overwrites - reads)


def needed_cells(cells: list[str], solutions: list[str]) -> list[int]:
    """Indices (in order) of the chapter cells that the solutions need, as the module's docstring says."""
    needed: set[str] = set()
    for code in reversed(solutions):  # a solution may read what an earlier one binds: still needed from the chapter
        needed |= cell_names(code).reads
    chosen = []
    for i in reversed(range(len(cells))):
        names = cell_names(cells[i])
        if names.binds & needed:
            chosen.append(i)
            needed = (needed - names.overwrites) | names.reads
    return sorted(chosen)


def _chapter_cells(nb) -> list[str]:
    """The chapter's code cells a reader runs (hidden checks left out)."""
    return [c.source for c in nb.cells if c.cell_type == "code" and not c.source.startswith(CHECK_MARKER)]


def _run(
    chapter: Path, cells: list[str], solutions: list[Solution], printed: dict[str, str] | None = None
) -> tuple[str | None, dict[str, str]]:
    """Run ``cells`` then each solution in one kernel: (the first chapter cell's error or None,
    {label: error} of the solutions that failed); ``printed`` gets each solution's printed text."""
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell(c) for c in cells] + [nbformat.v4.new_code_cell(s.code) for s in solutions]
    client = NotebookClient(
        nb, timeout=CELL_TIMEOUT, kernel_name="python3", resources={"metadata": {"path": str(chapter.parent)}}
    )
    failures: dict[str, str] = {}
    with client.setup_kernel():
        for i, cell in enumerate(nb.cells):
            try:
                client.execute_cell(cell, i)
            except CellExecutionError as error:
                message = ANSI.sub("", str(error)).strip().splitlines()
                short = "\n".join(message[-6:])
                if i < len(cells):
                    return f"chapter cell {i}: {cells[i].strip().splitlines()[:1]}\n{short}", {}
                failures[solutions[i - len(cells)].label] = short
            if i >= len(cells) and printed is not None:
                label = solutions[i - len(cells)].label
                text = "".join(o.get("text", "") for o in cell.get("outputs", []) if o.get("output_type") == "stream")
                printed[label] = printed.get(label, "") + text
    return None, failures


CHAPTERS = {path: found for path in _chapters() if (found := solution_blocks(nbformat.read(path, as_version=4)))}


@pytest.mark.parametrize("chapter", sorted(CHAPTERS), ids=lambda p: str(p.relative_to(BOOK).with_suffix("")))
def test_every_solution_runs_after_the_chapter(chapter):
    solutions = CHAPTERS[chapter]
    cells = _chapter_cells(nbformat.read(chapter, as_version=4))
    chosen = needed_cells(cells, [s.code for s in solutions])
    printed: dict[str, str] = {}
    broken, failures = _run(chapter, [cells[i] for i in chosen], solutions, printed)
    if broken is None and not failures:
        _check_answers(chapter, solutions, printed)
        return
    # the slice may have missed a cell that works by side effect: the whole chapter, then the solutions
    printed.clear()
    full_broken, full_failures = _run(chapter, cells, solutions, printed)
    assert full_broken is None, f"{chapter.name}: the chapter itself fails before its solutions: {full_broken}"
    assert not full_failures, f"{chapter.name}: solutions that fail after the whole chapter: " + "; ".join(
        f"{label}: {error}" for label, error in full_failures.items()
    )
    _check_answers(chapter, solutions, printed)
    missed = ", ".join(failures) or "a chapter cell"
    warnings.warn(
        f"{chapter.name}: {missed} failed after the needed cells only, passed after the whole chapter; "
        "a cell works by side effect (say which in the chapter, or keep it)",
        stacklevel=1,
    )


def _check_answers(chapter: Path, solutions: list[Solution], printed: dict[str, str]) -> None:
    """Every solution of an answering chapter that prints its answer prints a sound one."""
    if chapter.stem not in ANSWERING_CHAPTERS:
        return
    problems = [
        f"{s.label}: {problem}"
        for s in solutions
        if "Answer:" in s.code
        for problem in answer_problems(printed.get(s.label, ""))
    ]
    assert not problems, f"{chapter.name}: " + "; ".join(problems)


@pytest.mark.parametrize("chapter", sorted(ANSWERING_CHAPTERS))
def test_every_code_solution_prints_its_answer(chapter):
    found = solution_blocks(nbformat.read(BOOK / f"{chapter}.ipynb", as_version=4))
    silent = sorted({s.label for s in found if "Answer:" not in s.code} - ANSWER_PENDING)
    assert not silent, f"{chapter}: solutions that print no 'Answer:' line: {silent}"
    answering = sorted({s.label for s in found if "Answer:" in s.code} & ANSWER_PENDING)
    assert not answering, f"{chapter}: these now print their answer; take them off ANSWER_PENDING: {answering}"


def test_answer_problems_finds_a_missing_answer_and_a_wrong_verdict():
    assert answer_problems("3 runs; change +0.0032\n") == ["no line starting with 'Answer:' in the output"]
    good = "Answer: the interval [-0.0178, +0.0114] is not inside ±0.01.\n"
    assert answer_problems(good) == []
    wrong = "Answer: the interval [-0.0178, +0.0114] is inside ±0.01.\n"
    assert answer_problems(wrong) == [
        "'Answer: the interval [-0.0178, +0.0114] is inside ±0.01.': the interval is not inside"
    ]
    assert answer_problems("Answer: their ratio is 3.8, below 10.") == []
    assert len(answer_problems("Answer: their ratio is 12.5, below 10.")) == 1
    assert len(answer_problems("Answer: their ratio is 3.8, not below 10.")) == 1


# --------------------------------------------------------------------------------------------
# The extraction and the slice, on hand-made cells
# --------------------------------------------------------------------------------------------
def test_solution_blocks_finds_fenced_python_and_gated_cells():
    md = nbformat.v4.new_markdown_cell
    code = nbformat.v4.new_code_cell
    nb = nbformat.v4.new_notebook(
        cells=[
            md("```{exercise}\n:label: ex-1\nDo it.\n```\n```python\nprint('not a solution')\n```"),
            md(
                "````{solution} ex-1\n:class: dropdown\n```python\nprint(1)\n```\nText.\n```python\nprint(2)\n```\n````"
            ),
            md("::::{solution} ex-2\n:class: dropdown\n```{code-cell} ipython3\n:tags: [x]\nprint(3)\n```\n::::"),
            md("````{solution} ex-3\nWords only.\n````"),
            md("```{solution-start} ex-4\n```"),
            code("print(4)"),
            md("```{solution-end}\n```\n```{exercise}\n:label: ex-5\n```\n```{solution-start} ex-5\n```"),
            code("print(5)"),  # one cell closed ex-4 and opened ex-5: ex-5's code is found
            md("```{solution-end}\n```"),
            code("print('chapter')"),
        ]
    )
    found = solution_blocks(nb)
    assert [(s.label, s.code) for s in found] == [
        ("ex-1", "print(1)"),
        ("ex-1", "print(2)"),
        ("ex-2", "print(3)"),
        ("ex-4", "print(4)"),
        ("ex-5", "print(5)"),
    ]


def test_needed_cells_follow_the_names_back_through_the_chapter():
    cells = [
        "%matplotlib inline\nimport numpy as np\nimport pandas as pd",  # 0: imports np
        "slow = train_everything()",  # 1: not read by the solution
        "table = pd.DataFrame({'a': [1, 2]})",  # 2: binds table, reads pd
        "table['b'] = table['a'] * 2",  # 3: changes table
        "rows = []\nfor x in range(3):\n    rows.append(x)",  # 4: binds rows
        "table = table.assign(c=1)",  # 5: rebinds table from itself
        "fig, ax = plt.subplots()",  # 6: unrelated
        "scale = 3",  # 7: overwritten below before the solution reads it
        "scale = 4",  # 8
    ]
    assert needed_cells(cells, ["print(table['b'].sum() * np.pi * scale, len(rows))"]) == [0, 2, 3, 4, 5, 8]
    assert needed_cells(cells, ["print(42)"]) == []
    names = cell_names("import opcc_edu.lab.experiments as ex\nex.load('x')\nv.update(1)\nf(y)")
    assert "ex" in names.binds and "v" in names.binds and "y" in names.reads and "f" in names.reads
    assert "print" not in cell_names("print(z)").reads
