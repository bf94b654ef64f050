"""Read a submitted notebook without running it: the graded functions, and what a teacher should review.

* :func:`extract_functions` takes from the notebook's syntax tree only its top-level imports,
  literal constants (``K = 10``) and ``def`` statements; a decorated ``def`` or one with a
  default value that is not a literal is refused (either would run code when defined). The
  grader runs this source, and nothing else of the notebook, in a fresh process to call the
  graded functions.
* :func:`review_flags` lists what the student's own code touches that a teacher should look
  at: the grader, the package's reference functions, ``/proc``, subprocesses, the environment,
  files outside the notebook, IPython's start-up, module patching. Cells identical to the handed-
  out notebook's (the setup the assignment gives) are skipped.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable

#: Per assignment, the modules whose functions its answers are compared against (importing
#: them in a student's own cells is flagged; the handed-out cells are not scanned).
REFERENCE_MODULES: dict[str, tuple[str, ...]] = {
    "finite_horizon_values": ("opcc_edu.mdp",),
    "risk_coverage_metrics": ("opcc_edu.metrics",),
    "ensemble_confidence": ("opcc_edu.confidence",),
    "design_confidence": ("opcc_edu.classroom",),
    "mini_ablation": (),
}

_TEXT_FLAGS: tuple[tuple[str, str], ...] = (
    (r"\botter\b(?!\.Notebook\b)|ExceptionTestFile|\bgrader\s*=|\bTestFile\b|results\.json", "grader"),
    (r"/proc\b|\bpsutil\b|getppid|\bos\.kill\b|\bsignal\b", "/proc or other processes"),
    (
        r"\bsubprocess\b|os\.system|os\.popen|os\.fork|os\.exec|os\.spawn|\bpty\b|multiprocessing|setsid|daemon",
        "subprocesses",
    ),
    (r"os\.environ|getenv|putenv|unsetenv", "the environment"),
    (
        r"\bopen\s*\(|\bPath\b|shutil|os\.(chdir|remove|unlink|rename|replace|mkdir|makedirs|walk|listdir|scandir)|"
        r"write_text|write_bytes|read_text|read_bytes|\bglob\b|__file__|\bio\.",
        "files outside the notebook",
    ),
    (r"IPYTHONDIR|ipython_dir|startup|profile_default|get_ipython|\bregister_magic|atexit", "IPython start-up"),
    (
        r"\bctypes\b|\bgc\.get_objects|sys\.modules|__builtins__|\bbuiltins\b|__import__|\bexec\s*\(|\beval\s*\(|"
        r"\bsetattr\s*\(|importlib|sys\.settrace|sys\.setprofile|\binspect\b",
        "dynamic code or module patching",
    ),
)


def _cells(notebook: dict) -> list[str]:
    cells = []
    for cell in notebook.get("cells", []):
        if isinstance(cell, dict) and cell.get("cell_type") == "code":
            source = cell.get("source", "")
            cells.append("".join(source) if isinstance(source, list) else str(source))
    return cells


def _python(source: str) -> ast.Module | None:
    """The cell's syntax tree (IPython magics turned into plain calls first), or None."""
    try:
        from IPython.core.inputtransformer2 import TransformerManager

        source = TransformerManager().transform_cell(source)
    except Exception:  # noqa: BLE001, S110 - parse it as it is
        pass
    try:
        return ast.parse(source)
    except (SyntaxError, ValueError):
        return None


def _literal(node: ast.AST) -> bool:
    try:
        ast.literal_eval(node)
        return True
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False


def extract_functions(notebook: dict) -> tuple[str, dict[str, str], list[str]]:
    """(source to run, ``{function: its def's text}``, refusals) from the notebook's top level."""
    kept: list[str] = []
    functions: dict[str, str] = {}
    refused: list[str] = []
    for cell in _cells(notebook):
        tree = _python(cell)
        if tree is None:
            continue
        for node in tree.body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                kept.append(ast.unparse(node))
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                defaults = [*node.args.defaults, *(d for d in node.args.kw_defaults if d is not None)]
                if node.decorator_list:
                    refused.append(f"{node.name}: decorated functions are not graded")
                elif not all(_literal(d) for d in defaults):
                    refused.append(f"{node.name}: default values must be literals")
                else:
                    text = ast.unparse(node)
                    kept.append(text)
                    functions[node.name] = text
            elif isinstance(node, ast.Assign) and all(isinstance(t, ast.Name) for t in node.targets):
                if _literal(node.value):
                    kept.append(ast.unparse(node))
    return "\n".join(kept) + "\n", functions, refused


def _attribute_root(node: ast.AST) -> str | None:
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _tree_flags(tree: ast.Module, references: tuple[str, ...]) -> set[str]:
    flags = set()
    imported: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                imported.add((alias.asname or alias.name).split(".")[0])
                if references and alias.name.startswith(references):
                    flags.add(f"imports {alias.name}")
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            for alias in node.names:
                imported.add(alias.asname or alias.name)
            if references and module.startswith(references):
                names = ", ".join(a.name for a in node.names)[:60]
                flags.add(f"uses reference functions ({module}: {names})")
    for node in ast.walk(tree):
        targets = []
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        for target in targets:
            if isinstance(target, ast.Attribute) and _attribute_root(target) in imported | {"np", "numpy"}:
                flags.add(f"patches {ast.unparse(target)[:60]}")
    return flags


def review_flags(notebook: dict, given_cells: Iterable[str] = (), assignment: str = "") -> list[str]:
    """What the student's code touches that a teacher should look at (empty: nothing)."""
    references = REFERENCE_MODULES.get(assignment, ())
    given = {cell.strip() for cell in given_cells}
    flags: set[str] = set()
    for cell in _cells(notebook):
        if cell.strip() in given:
            continue
        code = "\n".join(line for line in cell.splitlines() if not line.lstrip().startswith("#"))
        for pattern, label in _TEXT_FLAGS:
            if re.search(pattern, code):
                flags.add(label)
        tree = _python(cell)
        if tree is not None:
            flags |= _tree_flags(tree, references)
        elif cell.strip():
            flags.add("a cell that is not valid Python")
    return sorted(flags)


def given_cells(notebook: dict) -> list[str]:
    """The code cells of a handed-out notebook (not scanned in submissions)."""
    return _cells(notebook)
