"""An assignment's page gives nothing away and follows its own rules.

For every source notebook in ``assignments/source``:

* the cells handed out as they are (outside Otter's solution and test blocks) import nothing
  from the modules the grader compares the answers with
  (:data:`opcc_edu.classroom.review.REFERENCE_MODULES`, less the modules its questions build
  on, :data:`~opcc_edu.classroom.review.ALLOWED_MODULES`): the rules forbid the student to call
  them, so the setup must not either;
* the value a hidden test expects (``assert name == <literal>``) appears neither in a public
  test nor in the page's text: a public test checks the answer's form, the hidden one its value.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import nbformat
import pytest

from opcc_edu.classroom.review import ALLOWED_MODULES, REFERENCE_MODULES

ROOT = Path(__file__).resolve().parents[2]
SOURCES = sorted((ROOT / "assignments" / "source").glob("*.ipynb"))


def handed_out_code(nb) -> list[str]:
    """Code cells outside ``# BEGIN SOLUTION``/``# END SOLUTION`` and the test blocks."""
    found, inside = [], None
    for cell in nb.cells:
        source = cell.source.strip()
        if cell.cell_type == "raw":
            if source.startswith(("# BEGIN SOLUTION", "# BEGIN TESTS")):
                inside = source
            elif source.startswith(("# END SOLUTION", "# END TESTS")):
                inside = None
        elif cell.cell_type == "code" and inside is None:
            found.append(cell.source)
    return found


def public_and_hidden_tests(nb) -> tuple[list[str], list[str]]:
    """(public, hidden) test cells."""
    public, hidden, inside = [], [], False
    for cell in nb.cells:
        source = cell.source.strip()
        if cell.cell_type == "raw":
            inside = source.startswith("# BEGIN TESTS") or (inside and not source.startswith("# END TESTS"))
        elif cell.cell_type == "code" and inside:
            (hidden if source.startswith("# HIDDEN") else public).append(cell.source)
    return public, hidden


def imported_modules(source: str) -> set[str]:
    """Modules a cell imports (IPython's ``%``/``!`` lines ignored)."""
    lines = "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines())
    try:
        tree = ast.parse(lines)
    except SyntaxError:
        return set()
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found |= {node.module} | {f"{node.module}.{alias.name}" for alias in node.names}
    return found


def forbidden_imports(cells: list[str], forbidden: tuple[str, ...]) -> list[str]:
    return sorted(
        module
        for cell in cells
        for module in imported_modules(cell)
        if any(module == f or module.startswith(f + ".") for f in forbidden)
    )


def expected_literals(tests: list[str]) -> list[str]:
    """The source of each literal a test compares a name with (``assert x == <literal>``)."""
    found = []
    for source in tests:
        try:
            tree = ast.parse(source)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Compare) and any(isinstance(op, ast.Eq) for op in node.ops):
                for side in [node.left, *node.comparators]:
                    if not isinstance(side, ast.Dict | ast.List | ast.Tuple | ast.Set):
                        continue  # a number or a name: too common to be a give-away
                    try:
                        ast.literal_eval(side)
                    except ValueError:
                        continue
                    found.append(ast.unparse(side))
    return found


def _squeezed(text: str) -> str:
    return re.sub(r"\s+", "", text).replace("'", '"')


def giveaways(nb) -> list[str]:
    """Expected values of hidden tests that a public test or the text shows."""
    public, hidden = public_and_hidden_tests(nb)
    shown = _squeezed("\n".join(public + [c.source for c in nb.cells if c.cell_type == "markdown"]))
    return [literal for literal in expected_literals(hidden) if _squeezed(literal) in shown]


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.stem)
def test_the_setup_imports_only_what_the_rules_allow(path):
    forbidden = REFERENCE_MODULES.get(path.stem, ())
    allowed = ALLOWED_MODULES.get(path.stem, ())
    found = [
        module
        for module in forbidden_imports(handed_out_code(nbformat.read(path, as_version=4)), forbidden)
        if not any(module == a or module.startswith(a + ".") for a in allowed)
    ]
    assert not found, f"{path.stem}: the handed-out cells import what the rules forbid: {found}"


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.stem)
def test_no_hidden_answer_is_shown(path):
    shown = giveaways(nbformat.read(path, as_version=4))
    assert not shown, f"{path.stem}: hidden tests' expected values shown on the page: {shown}"


def test_the_checks_find_a_forbidden_setup_and_a_shown_answer():
    md, code, raw = nbformat.v4.new_markdown_cell, nbformat.v4.new_code_cell, nbformat.v4.new_raw_cell
    nb = nbformat.v4.new_notebook(
        cells=[
            code("import numpy as np\nfrom opcc_edu.confidence import synthetic_ensemble"),
            raw("# BEGIN SOLUTION"),
            code("from opcc_edu.confidence import ensemble_voting  # the solution may"),
            raw("# END SOLUTION"),
            raw("# BEGIN TESTS"),
            code('def test_q(symmetric):\n    assert symmetric == {"EV": False, "PCI": True}'),
            code('# HIDDEN\ndef test_h(symmetric):\n    assert symmetric == {"EV": False, "PCI": True}'),
            raw("# END TESTS"),
            md("## Take away\nEV fails it."),
        ]
    )
    assert forbidden_imports(handed_out_code(nb), ("opcc_edu.confidence",)) == [
        "opcc_edu.confidence",
        "opcc_edu.confidence.synthetic_ensemble",
    ]
    assert giveaways(nb) == ["{'EV': False, 'PCI': True}"]
    nb.cells[5] = code("def test_q(symmetric):\n    assert set(symmetric) == {'EV', 'PCI'}")
    assert giveaways(nb) == []
