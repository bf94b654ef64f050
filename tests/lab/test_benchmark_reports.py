"""Reports under benchmarks/results re-derive from their committed raw data, number for number."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results"


def _module(name: str):
    path = ROOT / "benchmarks" / f"{name}.py"
    if not path.is_file():
        pytest.skip(f"no {path.name}")
    sys.path.insert(0, str(path.parent))
    try:
        spec = importlib.util.spec_from_file_location(f"_report_{name}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(path.parent))
    return module


def test_locomotion_clip_report_is_its_json():
    module = _module("locomotion_clip")
    data = json.loads((RESULTS / "locomotion_clip.json").read_text())
    assert module.render(data, []) == (RESULTS / "locomotion_clip.md").read_text()
    # and a moved number would show: the rendering reads the JSON, it types nothing
    data["clip"][0]["modes"]["health"]["loss"] += 0.5
    assert module.render(data, []) != (RESULTS / "locomotion_clip.md").read_text()


def test_original_gaps_report_is_its_json():
    module = _module("original_gaps")
    records = [
        json.loads(p.read_text())
        for p in (RESULTS / "original_gaps.json", ROOT / "benchmarks/original_device/gaps/classroom_gaps.json")
    ]
    assert module.render(records) == (RESULTS / "original_gaps.md").read_text()
