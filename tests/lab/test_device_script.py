"""The prepared device measurement, ``benchmarks/device/run.sh``, in its CPU mode.

One run with ``--device cpu`` (the quick sizes) into a temporary folder, with the test session's
dataset cache: every file is written, every step succeeds, every rate is positive, every ratio
is the quotient of the rates it names, the paper step's extrapolation follows from its runs, and
summary.md reports the numbers of the JSON files. The chapter step executes a two-cell notebook
(a real chapter takes longer than this test may), through the same Jupyter kernel client, and
the paper step makes one ``opcc-edu run`` (``--paper-max-steps`` at the probe's 20 steps); the
two-run extrapolation is checked on its own.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
DEVICE = ROOT / "benchmarks" / "device"
FILES = ("environment.json", "summary.md", "log.txt", "rollout.json", "training.json", "chapter.json", "paper_run.json")


def load_driver():
    spec = importlib.util.spec_from_file_location("device_run", DEVICE / "run.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


driver = load_driver()


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    base = tmp_path_factory.mktemp("device")
    chapter = base / "two_cells.ipynb"
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"display_name": "Python 3", "language": "python", "name": "python3"}
    nb.cells = [
        nbformat.v4.new_code_cell("from opcc_edu import get_profile\nprint('profile', get_profile().name)"),
        nbformat.v4.new_code_cell("import torch\nprint('sum', float(torch.ones(3).sum()))"),
    ]
    nbformat.write(nb, chapter)
    out = base / "out"
    cmd = ["bash", str(DEVICE / "run.sh"), str(out), "--device", "cpu", "--chapter", str(chapter)]
    cmd += ["--paper-max-steps", "20", "--work", str(base / "work")]
    env = {**os.environ, "PYTHON": sys.executable}  # OPCC_EDU_CACHE: the test session's (conftest.py)
    proc = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=1500)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    return out


def read(out: Path, name: str) -> dict:
    return json.loads((out / name).read_text())


def test_usage_and_syntax():
    assert subprocess.run(["bash", "-n", str(DEVICE / "run.sh")]).returncode == 0
    proc = subprocess.run(["bash", str(DEVICE / "run.sh")], capture_output=True, text=True)
    assert proc.returncode == 2 and "usage" in proc.stderr


def test_every_file_and_step(run):
    for name in FILES:
        assert (run / name).stat().st_size > 0, name
    env = read(run, "environment.json")
    assert env["device"] == "cpu" and env["quick"] is True
    assert env["torch"] == torch.__version__
    assert "benchmarks/device/run.sh" in env["command"] and "--device cpu" in env["command"]
    assert env["started"] <= env["ended"] and env["wall_s"] > 0
    assert set(env["steps"]) == set(driver.STEPS)
    for name, step in env["steps"].items():
        assert step["status"] == "ok", (name, step)
        assert 0 < step["seconds"] <= step["budget_s"] + 15
    assert sum(s["seconds"] for s in env["steps"].values()) <= env["wall_s"]
    if (ROOT / ".git").exists():
        assert re.fullmatch(r"[0-9a-f]{40}", env["git_commit"])


def test_rollout_rates_and_ratios(run):
    rollout = read(run, "rollout.json")
    sizes = driver.QUICK
    assert [r["M"] for r in rollout["runs"]] == list(sizes.members)
    for r in rollout["runs"]:
        assert r["sides"] == 2 * sizes.queries
        d = r["designs"]
        assert set(d) == {"member_loop", "naive_bmm", "batched", "reference"}
        for name, design in d.items():
            steps = sizes.reference_steps if name == "reference" else sizes.timed_steps
            assert design["member_steps"] == r["M"] * r["sides"] * steps
            assert design["member_steps_per_s_wall"] > 0 and design["member_steps_per_s_cpu"] > 0
            assert design["member_steps_per_s_wall"] == pytest.approx(design["member_steps"] / design["seconds_wall"])
        floor = r["gemm_floor"]["member_steps_per_s"]
        full = r["batched_full_horizon"]
        assert floor > 0 and full["horizon"] == sizes.horizon
        assert full["member_steps_per_s_wall"] == pytest.approx(full["member_steps"] / full["seconds_wall"])
        b, ratios = d["batched"]["member_steps_per_s_wall"], r["ratios"]
        assert ratios["batched_vs_reference"] == pytest.approx(b / d["reference"]["member_steps_per_s_wall"])
        assert ratios["batched_vs_member_loop"] == pytest.approx(b / d["member_loop"]["member_steps_per_s_wall"])
        assert ratios["batched_vs_naive_bmm"] == pytest.approx(b / d["naive_bmm"]["member_steps_per_s_wall"])
        assert ratios["batched_share_of_gemm_floor"] == pytest.approx(b / floor)
        assert ratios["full_horizon_vs_reference"] == pytest.approx(
            full["member_steps_per_s_wall"] / d["reference"]["member_steps_per_s_wall"]
        )


def test_training_rates(run):
    training = read(run, "training.json")
    sizes = driver.QUICK
    assert [r["M"] for r in training["runs"]] == list(sizes.train_members)
    for r in training["runs"]:
        assert r["samples"] == r["M"] * sizes.train_batch * sizes.train_steps
        assert set(r["designs"]) == {"batched", "member_loop"}  # the member loop runs on a CPU
        for design in r["designs"].values():
            assert design["seconds"] > 0
            assert design["samples_per_s"] == pytest.approx(r["samples"] / design["seconds"])


def test_chapter_executed(run):
    chapter = read(run, "chapter.json")
    assert chapter["status"] == "ok" and chapter["error"] is None
    assert chapter["profile"] == "tiny" and chapter["wall_s"] > 0 and chapter["code_cells"] == 2
    assert 0 <= chapter["cells_timed_s"] <= chapter["wall_s"]
    nb = nbformat.read(run / chapter["executed_notebook"], as_version=4)
    printed = "".join(o.get("text", "") for c in nb.cells for o in c.outputs)
    assert "profile tiny" in printed and "sum 3.0" in printed


def test_paper_step(run):
    paper = read(run, "paper_run.json")
    assert paper["status"] == "ok" and paper["profile"] == "tiny"
    assert paper["dataset_build"]["transitions"] > 0 and paper["dataset_build"]["seconds"] >= 0
    [probe] = paper["runs"]
    assert probe["train_steps"] == driver.QUICK.paper_probe_steps and "capped at 20" in paper["main_run_skipped"]
    assert probe["command"].startswith("opcc-edu --profile tiny") and "--train-steps 20" in probe["command"]
    assert probe["train_seconds"] > 0 and probe["answer_seconds"] > 0 and probe["n_queries"] > 0
    assert probe["wall_s"] == pytest.approx(probe["train_seconds"] + probe["answer_seconds"] + probe["other_seconds"])
    full = paper["full_train_steps"]
    assert paper["fraction_of_training"] == pytest.approx(20 / full)
    rate, ext = paper["rate"], paper["extrapolated"]
    assert rate["seconds_per_step"] == pytest.approx(probe["train_seconds"] / 20) and rate["intercept_s"] == 0
    assert rate["member_samples_per_s"] == pytest.approx(
        paper["ensemble_size"] * paper["batch_size"] / rate["seconds_per_step"]
    )
    assert ext["training_s"] == pytest.approx(rate["seconds_per_step"] * full)
    assert ext["run_s"] == pytest.approx(ext["training_s"] + ext["answer_s"] + ext["other_s"])
    check = paper["estimate_check"]
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import paper_scale_estimate

    predicted = paper_scale_estimate.run_seconds("tiny", check["rates"], "device")
    assert check["predicted_run_s"] == pytest.approx(predicted["total"]) and predicted["total"] > 0
    training, rollout = read(run, "training.json"), read(run, "rollout.json")
    assert (
        check["rates"]["training_samples_per_s"]["device"]
        == training["runs"][-1]["designs"]["batched"]["samples_per_s"]
    )
    largest = rollout["runs"][-1]["batched_full_horizon"]["member_steps_per_s_wall"]
    assert check["rates"]["rollout_member_steps_per_s"]["device"] == largest


def test_summary_reports_the_json(run):
    summary = (run / "summary.md").read_text()
    numbers = driver.key_numbers(run)
    assert len(numbers) > 30
    for label, value in numbers:
        assert value > 0 and math.isfinite(value), label
        assert f"| {label} | {driver.fmt(value)} |" in summary, label
    # read back independently: the M = 4 ratio, and the step table
    rollout = read(run, "rollout.json")
    m4 = next(r for r in rollout["runs"] if r["M"] == 4)
    shown = re.search(r"\| rollout M=4 batched_vs_reference \| ([0-9.e+-]+) \|", summary).group(1)
    assert float(shown) == pytest.approx(m4["ratios"]["batched_vs_reference"], rel=1e-3)
    for name, step in read(run, "environment.json")["steps"].items():
        assert f"| {name} | ok | {driver.fmt(step['seconds'])} |" in summary
    # on a CPU the GPU targets are reported as not applicable, never as met
    assert "batched >= 30x the reference design" in summary and "n/a: not on a GPU" in summary
    assert "| met |" not in summary and "NOT met" not in summary


def test_extrapolation_from_two_runs():
    runs = [{"train_steps": 1000, "train_seconds": 7.0}, {"train_steps": 11000, "train_seconds": 37.0}]
    fit = driver.extrapolate(runs, 50_000)
    assert fit["seconds_per_step"] == pytest.approx(0.003) and fit["intercept_s"] == pytest.approx(4.0)
    assert fit["training_s"] == pytest.approx(154.0)
    one = driver.extrapolate(runs[:1], 50_000)
    assert one["intercept_s"] == 0 and one["training_s"] == pytest.approx(350.0)
    flat = driver.extrapolate([runs[0], {"train_steps": 2000, "train_seconds": 6.0}], 50_000)
    assert flat["training_s"] == pytest.approx(150.0)  # times that shrink: the last run's rate, no intercept
