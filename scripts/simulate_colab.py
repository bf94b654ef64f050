"""Run chapters as a fresh Colab kernel would: a clean virtual environment, ``google.colab`` in
``sys.modules``, and the chapter's own Colab cell doing the install.

Colab brings torch, numpy, scipy, pandas, matplotlib, ipywidgets 7 and a kernel; the clean
environment gets only those (:data:`COLAB_BRINGS`). Each chapter's Colab cell then fetches the
repository, installs the package from it and points the ablation chapters at its committed
results, exactly as on Colab, except that it fetches from a local repository (``--repository``,
default: this one, at its ``main``) into a scratch folder instead of ``/content``. Chapters run
headless with the inline backend, in reader mode (hidden checks skip themselves), from a folder
outside the repository, so that nothing is found by accident::

    python scripts/simulate_colab.py book/mdp_background.ipynb book/ablation_horizon.ipynb

It needs the package index (pip) and takes minutes; ``tests/book/test_colab_simulation.py`` runs it
when ``OPCC_EDU_COLAB_SIMULATION=1``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sync_colab import CLONE, ROOT, install_cell_source, is_install_cell  # noqa: E402

#: What a Colab runtime has before a chapter installs anything (Colab pins ipywidgets 7).
COLAB_BRINGS = [
    "torch==2.13.0",
    "numpy",
    "scipy",
    "pandas",
    "matplotlib",
    "ipywidgets>=7.7,<8",
    "ipykernel",
    "nbclient",
    "nbformat",
]

KERNEL = "colab-simulation"

STUB = 'import sys\nimport types\n\nsys.modules["google.colab"] = types.ModuleType("google.colab")  # as on Colab'

RUNNER = """
import sys, nbformat
from nbclient import NotebookClient
nb = nbformat.read(sys.argv[1], as_version=4)
NotebookClient(nb, timeout=900, kernel_name=sys.argv[3], resources={"metadata": {"path": sys.argv[2]}}).execute()
nbformat.write(nb, sys.argv[1])
"""


def colab_notebook(chapter: Path, repository: str, ref: str, clone: Path) -> nbformat.NotebookNode:
    """The chapter with ``google.colab`` stubbed first and its Colab cell fetching from ``repository``."""
    nb = nbformat.read(chapter, as_version=4)
    cells = [c for c in nb.cells if is_install_cell(c)]
    if len(cells) != 1:
        raise ValueError(f"{chapter}: expected one Colab cell, found {len(cells)}")
    cells[0].source = install_cell_source(repository, ref).replace(CLONE, str(clone))
    nb.cells.insert(0, nbformat.v4.new_code_cell(STUB))
    return nb


def make_environment(folder: Path, python: str = sys.executable) -> Path:
    """A clean virtual environment with :data:`COLAB_BRINGS` only; returns its python."""
    subprocess.run([python, "-m", "venv", str(folder)], check=True)
    venv_python = folder / "bin" / "python"
    pip = [str(venv_python), "-m", "pip", "install", "-q"]
    subprocess.run([*pip, "--upgrade", "pip"], check=True)
    index = os.environ.get("OPCC_EDU_TORCH_INDEX")  # e.g. the CPU wheels: a plain index may pull CUDA
    if index:
        subprocess.run([*pip, "--index-url", index, COLAB_BRINGS[0]], check=True)
    subprocess.run([*pip, *COLAB_BRINGS], check=True)
    # its own kernel name, so that no kernel of another environment is picked up
    install = [str(venv_python), "-m", "ipykernel", "install", "--prefix", str(folder), "--name", KERNEL]
    subprocess.run(install, check=True, stdout=subprocess.DEVNULL)
    return venv_python


def run_chapters(chapters: list[Path], repository: str, ref: str, work: Path) -> dict[str, float]:
    """Execute each chapter in one fresh environment; returns seconds per chapter.

    Raises:
        subprocess.CalledProcessError: when a chapter fails (its executed copy stays in ``work``).
    """
    python = make_environment(work / "venv")
    clone = work / "content" / "opcc_edu"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPCC_EDU_", "MPLBACKEND", "VIRTUAL_ENV"))}
    env.update(OPCC_EDU_PROFILE="tiny", OPCC_EDU_CACHE=str(work / "cache"), PATH=f"{python.parent}:{env['PATH']}")
    seconds = {}
    for chapter in chapters:
        folder = work / "run" / chapter.stem  # outside the repository: nothing found by accident
        folder.mkdir(parents=True)
        path = folder / chapter.name
        nbformat.write(colab_notebook(chapter, repository, ref, clone), path)
        start = time.perf_counter()
        runner = [str(python), "-c", RUNNER, str(path), str(folder), KERNEL]
        subprocess.run(runner, check=True, env=env, cwd=folder)
        seconds[chapter.stem] = time.perf_counter() - start
    return seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("chapters", nargs="+", type=Path)
    parser.add_argument("--repository", default=f"file://{ROOT}", help="a git repository to fetch (default: this one)")
    parser.add_argument("--ref", default="main", help="the revision to fetch (default: main)")
    parser.add_argument("--work", type=Path, help="scratch folder (default: a new temporary one)")
    args = parser.parse_args(argv)
    work = args.work or Path(tempfile.mkdtemp(prefix="opcc_colab_"))
    for name, took in run_chapters(args.chapters, args.repository, args.ref, work).items():
        print(f"{name}: ran as on Colab in {took:.0f} s")
    print(f"executed copies in {work / 'run'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
