"""Book hygiene: every chapter is stored stripped, listed in the TOC and follows the standard."""

import json
import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted(p for p in (ROOT / "book").rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts and "_build" not in p.parts)


def _toc_files():
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = [toc["root"]]
    for part in toc.get("parts", []):
        for chapter in part.get("chapters", []):
            files.append(chapter["file"])
            files.extend(section["file"] for section in chapter.get("sections", []))
    return files


def _load(path):
    return json.loads(path.read_text())


def test_there_are_chapters():
    assert len(NOTEBOOKS) >= 2


def test_toc_lists_existing_chapters_only_and_all_of_them():
    listed = _toc_files()
    for entry in listed:
        assert (ROOT / f"{entry}.ipynb").exists() or (ROOT / f"{entry}.md").exists(), f"_toc.yml lists missing {entry}"
    stems = {str(p.relative_to(ROOT).with_suffix("")) for p in NOTEBOOKS}
    assert stems <= set(listed), f"chapters missing from _toc.yml: {sorted(stems - set(listed))}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_outputs_are_stripped(path):
    for cell in _load(path)["cells"]:
        if cell["cell_type"] == "code":
            assert cell.get("outputs", []) == [], f"{path.name} has stored outputs"
            assert cell.get("execution_count") is None, f"{path.name} has execution counts"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_first_cell_installs_on_colab_from_the_configured_repository(path):
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    url = config["repository"]["url"]
    first = _load(path)["cells"][0]
    source = "".join(first["source"])
    assert first["cell_type"] == "code"
    assert "hide-output" in first.get("metadata", {}).get("tags", [])
    assert '"google.colab" in sys.modules' in source
    assert f"git+{url}" in source, f"{path.name}: install URL must be {url} (from _config.yml)"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_chapter_standard(path):
    cells = _load(path)["cells"]
    markdown = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    assert re.search(r"^## Summary", markdown, re.M), f"{path.name}: no Summary section"
    assert re.search(r"^## Exercises", markdown, re.M), f"{path.name}: no Exercises section"
    assert "{exercise}" in markdown and "{solution}" in markdown, f"{path.name}: exercises need solutions"
    assert "{cite}" in markdown, f"{path.name}: cite the paper section it covers"
    hidden_asserts = [
        c for c in cells if c["cell_type"] == "code" and "remove-cell" in c.get("metadata", {}).get("tags", []) and "assert" in "".join(c["source"])
    ]
    assert hidden_asserts, f"{path.name}: assert the facts it teaches in hidden cells"


def test_citations_exist_in_bibliography():
    keys = set(re.findall(r"@\w+\{([^,]+),", (ROOT / "references.bib").read_text()))
    for path in NOTEBOOKS:
        text = path.read_text()
        for group in re.findall(r"\{cite[^}]*\}`([^`]+)`", text):
            for key in group.split(","):
                assert key.strip() in keys, f"{path.name} cites unknown key {key.strip()!r}"
