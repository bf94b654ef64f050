"""Write every chapter's Colab cell from the one configuration place, ``_config.yml``.

``repository.url`` and ``repository.branch`` (a branch, a tag or a commit) name where Colab
readers get the package and the committed results; the book's launch and repository buttons
read the same two values. Publishing means setting them and running::

    python scripts/sync_colab.py            # rewrite the chapters
    python scripts/sync_colab.py --check    # exit 1 if a chapter is out of date

For each chapter under ``book/`` this

* puts a Colab badge below the title (:func:`colab_address`, the same address as the page's
  launch button); the notebook names Colab's image of the badge, which the book's pages show
  from their own files (``book/_ext/colab_badge.py`` swaps in ``book/_ext/colab-badge.svg``);
* puts the install cell right below the title cell, tagged ``remove-cell`` (the page does not
  show it), with the source of :func:`install_cell_source`: on Colab it fetches the repository
  at the configured revision (git checks every object against its hash, so a commit id pins the
  results byte for byte), installs the package from it without extras, and points
  ``$OPCC_EDU_RESULTS`` at its committed results; everywhere it makes the hidden checks skip
  themselves outside the test suite (:func:`opcc_edu.display.skip_hidden_checks`);
* marks hidden checks: a cell tagged ``remove-cell`` that asserts something and binds no name a
  later cell reads gets :data:`opcc_edu.display.CHECK_MARKER` as its first line.
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

import nbformat
import yaml

ROOT = Path(__file__).resolve().parents[1]
CHECK_MARKER = "# hidden check: runs in the test suite only"  # = opcc_edu.display.CHECK_MARKER
INSTALL_TAG = "remove-cell"
CLONE = "/content/opcc_edu"


def repository(config_path: Path = ROOT / "_config.yml") -> tuple[str, str]:
    """``(url, revision)`` from ``repository.url`` and ``repository.branch`` of the book's config."""
    config = yaml.safe_load(config_path.read_text())
    repo = config.get("repository") or {}
    url, ref = repo.get("url"), repo.get("branch", "main")
    if not url or not str(url).startswith("https://"):
        raise ValueError(f"{config_path}: repository.url must be an https URL, got {url!r}")
    return str(url).rstrip("/"), str(ref)


def colab_url(chapter: str, config_path: Path = ROOT / "_config.yml") -> str:
    """The Colab address of a chapter (``book/<chapter>.ipynb``) at the configured revision."""
    return colab_address(*repository(config_path), chapter)


def colab_address(url: str, ref: str, chapter: str) -> str:
    path = url.removeprefix("https://github.com/")
    return f"https://colab.research.google.com/github/{path}/blob/{ref}/book/{chapter}.ipynb"


#: Colab's image of the badge (= ``COLAB_BADGE_URL`` of ``book/_ext/colab_badge.py``).
BADGE_IMAGE = "https://colab.research.google.com/assets/colab-badge.svg"
BADGE = f"[![Open In Colab]({BADGE_IMAGE})]"


def with_badge(title_source: str, address: str) -> str:
    """The title cell with one Colab badge line right below its heading."""
    lines = [line for line in title_source.split("\n") if not line.startswith(BADGE)]
    heading = next(i for i, line in enumerate(lines) if line.startswith("# "))
    rest = lines[heading + 1 :]
    while rest and not rest[0].strip():
        rest.pop(0)
    return "\n".join([*lines[: heading + 1], "", f"{BADGE}({address})", *([""] + rest if rest else [])])


def install_cell_source(url: str, ref: str) -> str:
    """The first code cell of every chapter (see the module docstring)."""
    # at most 88 columns, the width of the book's code (book/ruff.toml)
    return f"""# Colab: fetch the book's repository at {ref} and install the package from it (no
# extras, nothing upgraded that Colab brings). Everywhere: hidden checks run in the test
# suite only.
import os
import sys

if "google.colab" in sys.modules and not os.path.isdir("{CLONE}"):
    !git init -q {CLONE}
    !git -C {CLONE} fetch -q --depth 1 {url} {ref}
    !git -C {CLONE} checkout -q FETCH_HEAD
    %pip install -q {CLONE}
if "google.colab" in sys.modules:  # the results stored with the book
    os.environ["OPCC_EDU_RESULTS"] = "{CLONE}/results/ablations"

from opcc_edu.display import skip_hidden_checks

skip_hidden_checks()"""


def is_install_cell(cell: nbformat.NotebookNode) -> bool:
    return cell.cell_type == "code" and '"google.colab" in sys.modules' in cell.source


def _bound_names(tree: ast.AST) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
    return names


def _loaded_names(source: str) -> set[str]:
    try:
        tree = ast.parse(_without_magics(source))
    except SyntaxError:
        return set(source.replace("(", " ").replace(")", " ").split())  # be conservative
    return {node.id for node in ast.walk(tree) if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)}


def _without_magics(source: str) -> str:
    return "\n".join("pass" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines())


def is_hidden_check(cells: list[nbformat.NotebookNode], index: int) -> bool:
    """A ``remove-cell`` code cell that asserts and binds nothing a later cell reads."""
    cell = cells[index]
    if cell.cell_type != "code" or "remove-cell" not in cell.metadata.get("tags", []) or is_install_cell(cell):
        return False
    source = cell.source.removeprefix(CHECK_MARKER + "\n")
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return False
    asserts = any(
        isinstance(node, ast.Assert)
        or (isinstance(node, ast.Call) and "assert" in ast.unparse(node.func).rsplit(".", 1)[-1])
        for node in ast.walk(tree)
    )
    later = set().union(*(_loaded_names(c.source) for c in cells[index + 1 :] if c.cell_type == "code"))
    return asserts and not (_bound_names(tree) & later)


def sync_notebook(path: Path, url: str, ref: str) -> nbformat.NotebookNode:
    """The chapter with its install cell and hidden-check markers up to date (not written)."""
    nb = nbformat.read(path, as_version=4)
    cells = list(nb.cells)
    installs = [i for i, c in enumerate(cells) if is_install_cell(c)]
    if len(installs) > 1:
        raise ValueError(f"{path}: {len(installs)} install cells, expected one")
    install = cells.pop(installs[0]) if installs else nbformat.v4.new_code_cell(id="colab-install")
    install.source = install_cell_source(url, ref)
    install.metadata["tags"] = [INSTALL_TAG]
    install.outputs, install.execution_count = [], None
    title = next(
        (i for i, c in enumerate(cells) if c.cell_type == "markdown" and c.source.lstrip().startswith("# ")), None
    )
    if title is None:
        raise ValueError(f"{path}: no title cell (a markdown cell starting with '# ')")
    cells[title].source = with_badge(cells[title].source, colab_address(url, ref, chapter_name(path)))
    cells.insert(title + 1, install)
    for i, cell in enumerate(cells):
        marked = cell.cell_type == "code" and cell.source.startswith(CHECK_MARKER + "\n")
        if is_hidden_check(cells, i) and not marked:
            cell.source = f"{CHECK_MARKER}\n{cell.source}"
    nb.cells = cells
    return nb


def chapter_name(path: Path, root: Path = ROOT) -> str:
    """A chapter's path under ``book/`` without its suffix (``lab_notes/x`` for a lab-notes page)."""
    try:
        return path.resolve().relative_to((root / "book").resolve()).with_suffix("").as_posix()
    except ValueError:
        return path.stem


def chapters(root: Path = ROOT) -> list[Path]:
    """Every notebook under ``book/`` (lab-notes pages included), not checkpoints or build output."""
    return sorted(
        p for p in (root / "book").rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts and "_build" not in p.parts
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="report chapters out of date; write nothing")
    parser.add_argument("paths", nargs="*", type=Path, help="chapters (default: every one under book/)")
    args = parser.parse_args(argv)
    url, ref = repository()
    stale = []
    for path in args.paths or chapters():
        fresh = nbformat.writes(sync_notebook(path, url, ref))
        fresh = fresh if fresh.endswith("\n") else fresh + "\n"
        if fresh != path.read_text():
            stale.append(path)
            if not args.check:
                path.write_text(fresh)
    verb = "out of date" if args.check else "rewritten"
    for path in stale:
        print(f"{verb}: {path.relative_to(ROOT) if path.is_absolute() else path}")
    return 1 if (args.check and stale) else 0


if __name__ == "__main__":
    sys.exit(main())
