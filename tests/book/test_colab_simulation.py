"""Chapters run as on a fresh Colab kernel (scripts/simulate_colab.py).

The full simulation builds a clean virtual environment (pip, minutes) and runs one maze chapter,
one ablation chapter and one widget chapter; it runs when ``OPCC_EDU_COLAB_SIMULATION=1``.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def simulate():
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        spec = importlib.util.spec_from_file_location("simulate_colab", ROOT / "scripts" / "simulate_colab.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.path.remove(str(ROOT / "scripts"))


def test_colab_notebook_stubs_colab_and_fetches_from_the_given_repository(simulate, tmp_path):
    nb = simulate.colab_notebook(ROOT / "book" / "mdp_background.ipynb", "file:///somewhere/repo", "abc123", tmp_path)
    assert nb.cells[0].source == simulate.STUB
    (install,) = [c for c in nb.cells if simulate.is_install_cell(c)]
    assert "fetch -q --depth 1 file:///somewhere/repo abc123" in install.source
    assert f"%pip install -q {tmp_path}" in install.source and "/content/" not in install.source


def test_colab_notebook_needs_one_colab_cell(simulate, tmp_path):
    path = tmp_path / "bare.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# T")]), path)
    with pytest.raises(ValueError, match="expected one Colab cell, found 0"):
        simulate.colab_notebook(path, "file:///r", "main", tmp_path)


@pytest.mark.skipif(
    os.environ.get("OPCC_EDU_COLAB_SIMULATION") != "1",
    reason="the Colab simulation installs a clean environment (minutes); set OPCC_EDU_COLAB_SIMULATION=1",
)
def test_three_chapters_run_as_on_a_fresh_colab_kernel(simulate, tmp_path):
    chapters = [ROOT / "book" / f"{name}.ipynb" for name in ("answering_pcqs", "ablation_horizon", "mdp_background")]
    seconds = simulate.run_chapters(chapters, f"file://{ROOT}", "HEAD", tmp_path)
    assert set(seconds) == {c.stem for c in chapters}
    ablation = nbformat.read(tmp_path / "run" / "ablation_horizon" / "ablation_horizon.ipynb", as_version=4)
    text = "".join(o.get("text", "") for c in ablation.cells if c.cell_type == "code" for o in c.outputs)
    assert "No committed results" not in text, "the committed results did not reach the Colab kernel"
