"""The Colab cell written from _config.yml (scripts/sync_colab.py) and hidden checks that skip
themselves outside the test suite (opcc_edu.display.skip_hidden_checks)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import SimpleNamespace

import nbformat
import pytest

from opcc_edu.display import CHECK_MARKER, skip_hidden_checks

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def sync():
    spec = importlib.util.spec_from_file_location("sync_colab", ROOT / "scripts" / "sync_colab.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _chapter(tmp_path, cells):
    nb = nbformat.v4.new_notebook(cells=cells)
    path = tmp_path / "chapter.ipynb"
    nbformat.write(nb, path)
    return path


def _check(source):
    return nbformat.v4.new_code_cell(source, metadata={"tags": ["remove-cell"]})


def _config(tmp_path, url="https://github.com/someone/book", branch="v1.2"):
    path = tmp_path / "_config.yml"
    path.write_text(f"repository:\n  url: {url}\n  branch: {branch}\n")
    return path


def test_repository_and_colab_url_come_from_the_config(sync, tmp_path):
    config = _config(tmp_path)
    assert sync.repository(config) == ("https://github.com/someone/book", "v1.2")
    assert sync.colab_url("intro", config) == (
        "https://colab.research.google.com/github/someone/book/blob/v1.2/book/intro.ipynb"
    )
    with pytest.raises(ValueError, match="repository.url must be an https URL"):
        sync.repository(_config(tmp_path, url="git@github.com:someone/book"))


def test_install_cell_moves_below_the_title_and_is_rewritten(sync, tmp_path):
    old = nbformat.v4.new_code_cell('import sys\nif "google.colab" in sys.modules:\n    %pip install -q "x[book]"')
    path = _chapter(
        tmp_path,
        [old, nbformat.v4.new_markdown_cell("# Title\n\ntext"), nbformat.v4.new_code_cell("x = 1")],
    )
    nb = sync.sync_notebook(path, "https://github.com/someone/book", "0123abc")
    assert [c.cell_type for c in nb.cells] == ["markdown", "code", "code"]
    install = nb.cells[1]
    assert install.metadata["tags"] == ["remove-cell"]
    assert "fetch -q --depth 1 https://github.com/someone/book 0123abc" in install.source
    assert "%pip install -q /content/opcc_edu\n" in install.source and "[book]" not in install.source
    assert install.source.endswith("skip_hidden_checks()")
    again = sync.sync_notebook(_chapter(tmp_path, nb.cells), "https://github.com/someone/book", "0123abc")
    assert again.cells == nb.cells, "syncing twice changes nothing"


def test_chapter_without_a_title_is_refused(sync, tmp_path):
    path = _chapter(tmp_path, [nbformat.v4.new_markdown_cell("no heading")])
    with pytest.raises(ValueError, match="no title cell"):
        sync.sync_notebook(path, "https://github.com/someone/book", "main")


def test_only_checks_that_bind_nothing_read_later_are_marked(sync, tmp_path):
    cells = [
        nbformat.v4.new_markdown_cell("# Title"),
        _check("assert 1 + 1 == 2"),  # a check
        _check("total = 3\nassert total == 3"),  # binds total, read below: must still run
        _check("np.testing.assert_allclose(0.1 + 0.2, 0.3)"),  # a check
        _check("helper = 4"),  # hidden, but asserts nothing
        nbformat.v4.new_code_cell("print(total, helper)"),
    ]
    nb = sync.sync_notebook(_chapter(tmp_path, cells), "https://github.com/someone/book", "main")
    marked = [c.source.startswith(CHECK_MARKER + "\n") for c in nb.cells if c.cell_type == "code"]
    # install cell, check, binding check, np.testing check, helper, visible cell
    assert marked == [False, True, False, True, False, False]


def test_skip_hidden_checks_registers_a_transformer_unless_checks_are_on(monkeypatch):
    shell = SimpleNamespace(input_transformers_cleanup=[])
    monkeypatch.setenv("OPCC_EDU_CHECKS", "1")
    assert skip_hidden_checks(shell) is False and shell.input_transformers_cleanup == []
    monkeypatch.delenv("OPCC_EDU_CHECKS")
    assert skip_hidden_checks(shell) is True and skip_hidden_checks(shell) is True
    (transform,) = shell.input_transformers_cleanup
    check = [CHECK_MARKER + "\n", "assert False\n"]
    assert transform(check)[0].startswith("pass  # hidden check skipped")
    assert transform(["x = 1\n"]) == ["x = 1\n"]


def test_skip_hidden_checks_outside_ipython_does_nothing(monkeypatch):
    monkeypatch.delenv("OPCC_EDU_CHECKS", raising=False)
    assert skip_hidden_checks() is False  # no IPython shell runs the test suite


def test_readme_colab_badge_and_address_use_the_configured_repository(sync):
    readme = (ROOT / "README.md").read_text()
    badge_target = sync.colab_url("intro")
    assert f"colab-badge.svg)]({badge_target})" in readme
    assert badge_target.replace("/intro.ipynb", "/<chapter>.ipynb") in readme


def test_title_cell_gets_one_colab_badge(sync, tmp_path):
    title = nbformat.v4.new_markdown_cell("# Title\n\n**What you will learn.** text")
    path = _chapter(tmp_path, [title, nbformat.v4.new_code_cell("x = 1")])
    nb = sync.sync_notebook(path, "https://github.com/someone/book", "v2")
    address = "https://colab.research.google.com/github/someone/book/blob/v2/book/chapter.ipynb"
    assert nb.cells[0].source == f"# Title\n\n{sync.BADGE}({address})\n\n**What you will learn.** text"
    again = sync.sync_notebook(_chapter(tmp_path, nb.cells), "https://github.com/someone/book", "v3")
    assert again.cells[0].source.count(sync.BADGE) == 1 and "/blob/v3/" in again.cells[0].source
