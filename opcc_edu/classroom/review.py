"""Read a submitted notebook without running it: the graded functions, and what a teacher should review.

Both work on the code cells the runner executes (:func:`opcc_edu.classroom.intake.parse_notebook`:
the notebook after nbformat's upgrade to version 4), never on the raw file.

* :func:`extract_functions` takes from the notebook's syntax tree only its top-level imports,
  literal constants (``K = 10``) and ``def`` statements; a decorated ``def`` or one with a
  default value that is not a literal is refused (either would run code when defined). The
  grader runs this source, and nothing else of the notebook, in a fresh process to call the
  graded functions.
* :func:`review_flags` lists what the student's own code touches that a teacher should look
  at. It reads the syntax tree (after IPython's own transformation of magics into calls), so
  that a word hidden in a string or built at run time does not escape it: every import of the
  package beyond what the handed-out cells import (or what the assignment asks students to
  build on: :data:`ALLOWED_MODULES`), in any form (``import opcc_edu``, ``from opcc_edu import
  metrics``, ``__import__("opcc_edu")``, ``importlib``); the use of a function that computes a
  graded answer outright (:data:`ANSWER_HELPERS`); ``exec``, ``eval``, ``compile``, and
  ``getattr``/``__import__``/``import_module`` on text that is not a literal; long hex or
  base64 strings (encoded code); the grader, ``/proc``, subprocesses, the environment, files,
  IPython's start-up and module patching. Cells identical to the handed-out notebook's are
  skipped.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable

#: The package (any import of it in a student's own cells is flagged unless allowed).
PACKAGE = "opcc_edu"

#: Per assignment, the modules whose functions its answers are compared against.
REFERENCE_MODULES: dict[str, tuple[str, ...]] = {
    "finite_horizon_values": ("opcc_edu.mdp",),
    "risk_coverage_metrics": ("opcc_edu.metrics",),
    "ensemble_confidence": ("opcc_edu.confidence",),
    "design_confidence": ("opcc_edu.classroom",),
    "mini_ablation": (),
}

#: Per assignment, package modules its questions ask students to build on (besides whatever the
#: handed-out cells import): the design assignment compares with the baselines and their gains.
ALLOWED_MODULES: dict[str, tuple[str, ...]] = {
    "design_confidence": ("opcc_edu.confidence", "opcc_edu.metrics", "opcc_edu.classroom.assignments"),
}

#: Per assignment, functions of an allowed module that compute a graded answer outright: naming
#: one in a student's own cells is flagged (the design assignment's first question asks for the
#: baselines' gains, which ``baseline_selective_gains`` returns).
ANSWER_HELPERS: dict[str, tuple[str, ...]] = {
    "design_confidence": ("baseline_selective_gains",),
}

#: The grader's own modules (importing one is flagged as "grader").
GRADER_MODULES: tuple[str, ...] = tuple(
    f"opcc_edu.classroom.{name}"
    for name in ("checks", "checks_more", "grading", "runner", "sandbox", "review", "intake", "isolation",
                 "containers", "teaching", "sheet", "catalog")
)  # fmt: skip

#: Shortest string taken for an encoded blob when it is all hex digits or base64 characters.
BLOB_LENGTH = 48

_TEXT_FLAGS: tuple[tuple[str, str], ...] = (
    (r"\botter\b(?!\.Notebook\b)|ExceptionTestFile|\bgrader\s*=|\bTestFile\b|results\.json", "grader"),
    (r"/proc\b|\bpsutil\b|getppid|\bos\.kill\b|\bsignal\b|\bkillpg\b", "/proc or other processes"),
    (
        r"\bsubprocess\b|os\.system|os\.popen|os\.fork|os\.exec|os\.spawn|\bpty\b|multiprocessing|setsid|daemon",
        "subprocesses",
    ),
    (r"os\.environ|getenv|putenv|unsetenv", "the environment"),
    (
        r"\bopen\s*\(|\bPath\b|shutil|os\.(chdir|remove|unlink|rename|replace|mkdir|makedirs|walk|listdir|scandir)|"
        r"write_text|write_bytes|read_text|read_bytes|\bglob\b|__file__|\bio\.|\bsocket\b|\burllib\b|\bhttp\b",
        "files outside the notebook",
    ),
    (
        r"IPYTHONDIR|ipython_dir|startup|profile_default|get_ipython|\bregister_magic|atexit|site-packages|"
        r"sitecustomize|usercustomize",
        "IPython start-up",
    ),
    (
        r"\bctypes\b|\bgc\.get_objects|sys\.modules|__builtins__|\bbuiltins\b|__import__|\bexec\s*\(|\beval\s*\(|"
        r"\bsetattr\s*\(|importlib|sys\.settrace|sys\.setprofile|\binspect\b|\bcodecs\b|\bbase64\b|\bbinascii\b|"
        r"\bfromhex\b|\bmarshal\b|\bpickle\b",
        "dynamic code or module patching",
    ),
)

_DYNAMIC_CALLS = {"exec", "eval", "compile"}
_NAME_CALLS = {"getattr": 1, "setattr": 1, "delattr": 1, "hasattr": 1, "__import__": 0, "import_module": 0}
_HEX = re.compile(r"[0-9a-fA-F]+")
_BASE64 = re.compile(r"[A-Za-z0-9+/_-]+={0,2}")


def _cells(notebook: dict | Iterable[str]) -> list[str]:
    if not isinstance(notebook, dict):
        return [str(cell) for cell in notebook]
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


def _imports(tree: ast.AST) -> set[tuple[str, str]]:
    """(module, name) of every import in ``tree``; ``import a.b`` gives ``("a.b", "")``."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {(alias.name, "") for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            module = "." * node.level + (node.module or "")
            found |= {(module, alias.name) for alias in node.names}
    return found


def _in(module: str, prefixes: Iterable[str]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def _package_flag(module: str, name: str, allowed: set[tuple[str, str]], assignment: str) -> str | None:
    """The flag of importing ``name`` from ``module`` (``name`` empty: the module itself), or None."""
    target = f"{module}.{name}" if name and module == PACKAGE else module
    if module.startswith(".") or not _in(target, [PACKAGE]):
        return None
    if (module, name) in allowed or _in(target, ALLOWED_MODULES.get(assignment, ())):
        return None
    if _in(target, GRADER_MODULES):
        return "grader"
    if _in(target, REFERENCE_MODULES.get(assignment, ())):
        return f"uses reference functions ({module}{': ' + name if name else ''})"[:100]
    return f"imports {target}{' (' + name + ')' if name and target == module else ''}"[:100]


def _literal_text(node: ast.AST) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _blob(text: str) -> bool:
    squeezed = "".join(text.split())
    if len(squeezed) < BLOB_LENGTH:
        return False
    if _HEX.fullmatch(squeezed):
        return True
    return bool(_BASE64.fullmatch(squeezed)) and any(c.isdigit() for c in squeezed) and squeezed != squeezed.lower()


def _call_flags(node: ast.Call, allowed: set[tuple[str, str]], assignment: str) -> set[str]:
    func = node.func
    name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
    flags = set()
    if name in _DYNAMIC_CALLS:
        code = _literal_text(node.args[0]) if node.args else None
        flags.add(f"dynamic code ({name} of {'literal' if code is not None else 'computed'} text)")
        if code is not None:
            tree = _python(code)
            flags |= _tree_flags(tree, allowed, assignment) if tree is not None else set()
    elif name in _NAME_CALLS:
        index = _NAME_CALLS[name]
        text = _literal_text(node.args[index]) if len(node.args) > index else None
        if text is None and len(node.args) > index:
            flags.add(f"dynamic code ({name} of a computed name)")
        elif text is not None and name in ("__import__", "import_module"):
            flag = _package_flag(text, "", allowed, assignment)
            flags |= {flag} if flag else set()
    return flags


def _answer_helper(node: ast.AST, assignment: str) -> str | None:
    """The name of :data:`ANSWER_HELPERS` that ``node`` names (a name, attribute, import or text)."""
    helpers = ANSWER_HELPERS.get(assignment, ())
    field = {ast.Name: "id", ast.Attribute: "attr", ast.alias: "name", ast.Constant: "value"}.get(type(node))
    named = getattr(node, field, None) if field else None
    return named if isinstance(named, str) and named in helpers else None


def _tree_flags(tree: ast.AST, allowed: set[tuple[str, str]], assignment: str) -> set[str]:
    flags = set()
    imported: set[str] = set()
    for module, name in _imports(tree):
        imported.add(name or module.split(".")[0])
        flag = _package_flag(module, name, allowed, assignment)
        if flag:
            flags.add(flag)
        if module.startswith("."):
            flags.add("a relative import")
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            flags |= _call_flags(node, allowed, assignment)
        elif isinstance(node, ast.Constant) and isinstance(node.value, (str, bytes)):
            text = node.value.decode("latin-1") if isinstance(node.value, bytes) else node.value
            if _blob(text):
                flags.add("encoded text (a long hex or base64 string)")
        elif isinstance(node, ast.Name) and node.id in ("__builtins__", "importlib", "__loader__", "__spec__"):
            flags.add("dynamic code or module patching")
        helper = _answer_helper(node, assignment)
        if helper:
            flags.add(f"uses reference functions ({helper})")
        targets = []
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        for target in targets:
            if isinstance(target, ast.Attribute) and _attribute_root(target) in imported | {"np", "numpy"}:
                flags.add(f"patches {ast.unparse(target)[:60]}")
    return flags


def review_flags(notebook: dict | Iterable[str], given_cells: Iterable[str] = (), assignment: str = "") -> list[str]:
    """What the student's code touches that a teacher should look at (empty: nothing).

    Args:
        notebook: the code cells the runner executes (or a version 4 notebook as a dict).
        given_cells: the handed-out notebook's code cells (skipped when unchanged; their imports
            of the package are allowed elsewhere too).
        assignment: the assignment's name (its reference and allowed modules).
    """
    given_list = [str(c) for c in given_cells]
    given = {cell.strip() for cell in given_list}
    allowed: set[tuple[str, str]] = set()
    for cell in given_list:
        tree = _python(cell)
        if tree is not None:
            allowed |= _imports(tree)
    flags: set[str] = set()
    for cell in _cells(notebook):
        if cell.strip() in given:
            continue
        tree = _python(cell)
        code = "\n".join(line for line in cell.splitlines() if not line.lstrip().startswith("#"))
        for pattern, label in _TEXT_FLAGS:
            if re.search(pattern, code):
                flags.add(label)
        if tree is not None:
            flags |= _tree_flags(tree, allowed, assignment)
        elif cell.strip():
            flags.add("a cell that is not valid Python")
    return sorted(flags)


def given_cells(notebook: dict) -> list[str]:
    """The code cells of a handed-out notebook (not scanned in submissions)."""
    return _cells(notebook)
