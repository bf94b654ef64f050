"""The ``opcc-edu`` command line: commands, shared options, hidden aliases, thin handlers.

Bad command lines are tested in ``test_cli_errors.py``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from opcc_edu.cli import COMMANDS, build_parser, command_name, main


def _choices(parser, dest: str) -> dict:
    return next(a for a in parser._actions if a.dest == dest).choices


def test_every_command_and_build_target_has_help(capsys):
    parser = build_parser()
    commands = _choices(parser, "command")
    assert set(COMMANDS) == set(commands) == {"info", "run", "mdp-demo", "build", "ablation", "report", "assignments"}
    assert set(_choices(commands["build"], "target")) == {"policies", "queries", "datasets"}
    for words in [[name] for name in commands] + [["build", t] for t in ("policies", "queries", "datasets")]:
        with pytest.raises(SystemExit) as exc:
            main([*words, "--help"])
        assert exc.value.code == 0
        out = capsys.readouterr().out
        assert out.startswith("usage: opcc-edu " + " ".join(words))
        for option in ("--profile", "--no-progress", "--threads"):
            assert option in out
        assert "%%" not in out and "--quiet" not in out and "--output" not in out


def test_command_name_skips_the_global_options():
    assert command_name(["--profile", "tiny", "run", "hopper"]) == "run"
    assert command_name(["--prof", "tiny", "--threads=2", "info"]) == "info"
    assert command_name(["--no-progress", "--threads", "3", "build", "datasets"]) == "build"
    assert command_name(["--", "report"]) == "report"
    assert command_name(["--help"]) is None and command_name([]) is None


def test_help_imports_no_command_module():
    code = (
        "import sys\n"
        "from opcc_edu.cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "heavy = ('opcc_edu.cli.run', 'opcc_edu.cli.build', 'opcc_edu.envs', 'torch')\n"
        "loaded = [m for m in heavy if m in sys.modules]\n"
        "print('LOADED', loaded)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert "LOADED []" in proc.stdout, proc.stdout + proc.stderr


def test_hidden_aliases_keep_old_spellings():
    parser = build_parser()
    args = parser.parse_args(["build", "datasets", "maze2d-open", "1k", "--quiet"])
    assert args.no_progress is True
    args = parser.parse_args(["build", "policies", "hopper", "--assets-dir", "x"])
    assert args.out == "x"
    args = parser.parse_args(["build", "queries", "hopper", "--output", "x.npz"])
    assert args.output_file == "x.npz" and args.out is None


def test_global_options_before_and_after_the_command_mean_the_same():
    parser = build_parser()
    before = parser.parse_args(["--profile", "paper", "--threads", "2", "--no-progress", "ablation", "horizon"])
    after = parser.parse_args(["ablation", "horizon", "--profile", "paper", "--threads", "2", "--no-progress"])
    for args in (before, after):
        assert (args.profile, args.threads, args.no_progress) == ("paper", 2, True)
    plain = parser.parse_args(["ablation", "horizon"])
    assert not hasattr(plain, "profile") and not hasattr(plain, "threads")


def test_info_lists_environments(capsys):
    assert main(["info"]) == 0
    out = capsys.readouterr().out
    for name in ("maze2d-open", "maze2d-large", "halfcheetah", "hopper", "walker2d"):
        assert name in out


def test_mdp_demo_prints_exact_and_monte_carlo(capsys):
    assert main(["mdp-demo", "--states", "4", "--horizon", "5"]) == 0
    out = capsys.readouterr().out
    assert "Exact V" in out and "RMSE" in out and "95% CI" in out


def test_profile_and_threads_hold_during_the_command_only(monkeypatch, capsys):
    import torch

    from opcc_edu.cli import mdp
    from opcc_edu.config import get_profile

    seen = {}

    def record(*args, **kwargs):
        seen.update(profile=get_profile().name, threads=torch.get_num_threads(), omp=os.environ.get("OMP_NUM_THREADS"))
        return []

    monkeypatch.setenv("OPCC_EDU_PROFILE", "tiny")
    monkeypatch.setattr(mdp, "mdp_demo_lines", record)
    threads, omp = torch.get_num_threads(), os.environ.get("OMP_NUM_THREADS")
    for argv in (
        ["--profile", "classroom", "mdp-demo", "--threads", "3"],
        ["mdp-demo", "--profile", "classroom", "--threads", "3"],
    ):
        seen.clear()
        assert main(argv) == 0
        assert seen == {"profile": "classroom", "threads": 3, "omp": "3"}
        assert get_profile().name == "tiny" and torch.get_num_threads() == threads
        assert os.environ.get("OMP_NUM_THREADS") == omp
    capsys.readouterr()


def test_bad_profile_is_a_one_line_error():
    proc = subprocess.run(
        [sys.executable, "-m", "opcc_edu.cli", "--profile", "huge", "info"], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1
    assert "invalid choice: 'huge'" in proc.stderr and "tiny" in proc.stderr


# --------------------------------------------------------------------------------------------
# Handlers pass the options to the library, and nothing else happens
# --------------------------------------------------------------------------------------------
def test_run_passes_its_options_to_the_library(tmp_path, monkeypatch, capsys):
    from opcc_edu import baselines

    calls = []
    monkeypatch.setenv("OPCC_EDU_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(baselines, "run_end_to_end", lambda *args, **kwargs: calls.append((args, kwargs)))
    out = tmp_path / "runs"
    argv = ["run", "hopper", "random", "--out", str(out), "--seed", "3", "--ensemble-size", "4", "--train-steps", "7"]
    assert (
        main([*argv, "--model-type", "ar", "--prior-scale", "2.5", "--no-cache", "--no-progress", "--device", "cpu"])
        == 0
    )
    (env, dataset, out_arg, config), kwargs = calls[0]
    assert (env, dataset, out_arg) == ("hopper", "random", str(out))
    assert (config.seed, config.ensemble_size, config.train_steps, config.model_type, config.prior_scale) == (
        3,
        4,
        7,
        "ar",
        2.5,
    )
    assert kwargs["cache"] is False and kwargs["progress"] is False and str(kwargs["device"]) == "cpu"
    assert not out.exists() and not (tmp_path / "cache").exists()  # the checks create nothing


def test_run_without_its_subsystem_fails_instead_of_running_another_command(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "opcc_edu.baselines", None)
    assert main(["run"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1 and captured.err.startswith("opcc-edu run: error: ")


def test_build_queries_passes_only_given_options(tmp_path, monkeypatch, capsys):
    from opcc_edu import build, queries

    calls = []

    def fake(env_name, out=None, progress=True, **kwargs):
        calls.append((env_name, out, progress, kwargs))
        return queries.query_set_path(env_name)

    monkeypatch.setattr(build, "build_and_save_query_set", fake)
    out = tmp_path / "sets"
    assert main(["build", "queries", "hopper", "--out", str(out), "--n-queries", "30", "--no-progress"]) == 0
    assert calls == [("hopper", str(out), False, {"recipe": "paper", "queries_per_pair": 5})]
    assert out.is_dir() and "hopper: 1500 queries" in capsys.readouterr().out
    calls.clear()
    argv = ["build", "queries", "hopper", "--out", str(out), "--recipe", "hard", "--n-queries", "30", "--quiet"]
    assert main(argv) == 0
    assert calls == [("hopper", str(out), False, {"recipe": "hard", "n_queries": 30})]
    calls.clear()
    assert main(["build", "queries", "hopper", "--output", str(tmp_path / "one.npz"), "--seed", "4"]) == 0
    assert calls == [("hopper", str(tmp_path / "one.npz"), True, {"recipe": "paper", "seed": 4})]
    calls.clear()
    capsys.readouterr()
    # options of the other recipe, and a paper size that does not split over the 6 policy pairs
    assert main(["build", "queries", "hopper", "--out", str(out), "--candidates", "10"]) == 2
    assert "--candidates does not apply to --recipe paper" in capsys.readouterr().err
    assert main(["build", "queries", "hopper", "--out", str(out), "--recipe", "hard", "--max-candidates", "9"]) == 2
    assert "--max-candidates does not apply to --recipe hard" in capsys.readouterr().err
    assert main(["build", "queries", "hopper", "--out", str(out), "--n-queries", "31"]) == 2
    assert "multiple of the 6 policy pairs" in capsys.readouterr().err
    assert calls == []


def test_build_policies_passes_its_options(tmp_path, monkeypatch, capsys):
    from opcc_edu.build import policies as builders
    from opcc_edu.cli import build

    calls = []
    row = {"env": "hopper", "level": 1, "mean_return": 1.0, "std_return": 0.5, "train_step": 10}
    monkeypatch.setattr(build, "require_extra", lambda extra: None)
    monkeypatch.setattr(builders, "build_query_policies", lambda env, **kwargs: calls.append((env, kwargs)) or [row])
    argv = ["build", "policies", "hopper", "--steps", "512", "--stop-at", "256", "--out", str(tmp_path / "assets")]
    assert main([*argv, "--work-dir", str(tmp_path / "work"), "--no-reuse", "--profile", "tiny"]) == 0
    env, kwargs = calls[0]
    assert env == "hopper" and "seed" not in kwargs and "episodes" not in kwargs
    assert kwargs["total_steps"] == 512 and kwargs["stop_step"] == 256 and kwargs["reuse"] is False
    assert kwargs["assets_dir"] == str(tmp_path / "assets") and kwargs["work_dir"] == str(tmp_path / "work")
    assert "hopper level 1: 1.0 ± 0.5 (step 10)" in capsys.readouterr().out


def test_build_datasets_generates_into_the_cache(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("OPCC_EDU_CACHE", str(tmp_path / "cache"))
    assert main(["build", "datasets", "maze2d-open", "1k", "--quiet", "--size", "500"]) == 0
    assert "maze2d-open 1k: 500 transitions" in capsys.readouterr().out
    assert list((tmp_path / "cache").rglob("*.npz"))


def test_ablation_dry_run_lists_runs_and_writes_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["ablation", "horizon", "--dry-run", "--profile", "tiny", "--seeds", "3"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("horizon: 3 runs in profile tiny (0 done) -> " + str(Path("results/ablations/paper/tiny")))
    assert "todo  maze2d-umaze/1m/seed2/default" in out
    assert list(tmp_path.iterdir()) == []


def test_ablation_runs_resumes_and_reports(tmp_path, monkeypatch, capsys):
    from opcc_edu.lab.experiments import runner, synthetic_answer_function

    monkeypatch.setattr(
        runner, "baseline_answer_function", lambda profile=None, queries=None: synthetic_answer_function(n_queries=50)
    )
    monkeypatch.setenv("OPCC_EDU_CACHE", str(tmp_path / "cache"))
    root = tmp_path / "ablations"
    common = ["--profile", "tiny", "--out", str(root), "--datasets", "1m", "--no-progress"]
    assert main(["ablation", "prior-scale", "--dry-run", *common]) == 0
    assert "prior-scale: 4 runs in profile tiny (0 done)" in capsys.readouterr().out
    assert not root.exists()
    assert main(["ablation", "prior-scale", "--max-runs", "3", *common]) == 0
    assert "Randomized constant prior" in capsys.readouterr().out
    assert main(["ablation", "prior-scale", "--dry-run", *common]) == 0
    assert "(3 done)" in capsys.readouterr().out
    meta = (root / "paper" / "tiny" / "meta.json").read_text()
    assert "opcc-edu ablation prior-scale --max-runs 3 --profile tiny" in meta and '"queries": "paper"' in meta
    assert main(["report", "--out", str(root), "--format", "latex"]) == 0
    captured = capsys.readouterr()
    assert "\\section*" in captured.out and (root / "report.tex").exists()
    assert main(["report", "--out", str(root), "--profiles", "paper"]) == 2
    # the no-model heuristic on the hard sets: its own directory, its own confidence name
    assert main(["ablation", "horizon", "--baseline", "heuristic", "--queries", "hard", "--seeds", "1", *common]) == 0
    table = (root / "hard" / "tiny-heuristic" / "results.csv").read_text()
    assert ",heuristic,1,1," in table and ",ev," not in table
    assert "tiny" in capsys.readouterr().err


def test_info_queries_describes_a_set(capsys):
    assert main(["info", "queries", "maze2d-umaze", "--recipe", "hard"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Query set maze2d-umaze (recipe hard): 1500 queries")
    assert "same-state 50.0%" in out and "no-model heuristic error: 0.267" in out
    assert main(["info", "queries", "hopper"]) == 0
    assert "(recipe paper)" in capsys.readouterr().out
    with pytest.raises(SystemExit):  # an environment without the topic: argparse names the choices
        main(["info", "maze2d-umaze"])
    assert "invalid choice: 'maze2d-umaze' (choose from 'queries')" in capsys.readouterr().err


def test_run_with_the_heuristic_trains_nothing(tmp_path, capsys):
    import json

    argv = ["run", "maze2d-umaze", "--baseline", "heuristic", "--queries", "hard", "--out", str(tmp_path), "--quiet"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "hard query set, no-model heuristic" in out and "nothing trained" in out and "heuristic" in out
    summary = json.loads((tmp_path / "maze2d-umaze" / "heuristic" / "hard-queries" / "results.json").read_text())
    assert summary["baseline"] == "heuristic" and summary["queries_recipe"] == "hard" and summary["config"] is None
    assert summary["n_queries"] == 300 and 0.15 < summary["metrics"]["heuristic"]["all"]["loss"] < 0.4


@pytest.mark.parametrize("env_name", ["maze2d-umaze", "hopper"])
def test_run_answers_the_original_benchmark(tmp_path, capsys, env_name):
    """The original queries, answered with the original policies, print EV, PCI and U-PCI."""
    import json

    argv = ["run", env_name, "--queries", "original", "--ensemble-size", "2", "--train-steps", "20"]
    assert main([*argv, "--out", str(tmp_path), "--quiet", "--no-progress"]) == 0
    out = capsys.readouterr().out
    name = f"{env_name}-d4rl-goal" if env_name.startswith("maze") else env_name
    assert f"opcc-edu run: {name} /" in out and "original query set" in out
    for confidence in ("EV", "PCI", "U-PCI"):
        assert any(line.strip().startswith(f"{confidence} ") and " all " in line for line in out.splitlines())
    (path,) = (tmp_path / name).glob("*/original-queries/results.json")
    summary = json.loads(path.read_text())
    assert summary["queries_recipe"] == "original" and summary["n_queries"] == 300


def test_ablation_answers_the_original_benchmark(tmp_path, capsys):
    """An ablation on the original queries: its own results folder, the original set's query count."""
    argv = ["ablation", "horizon", "--baseline", "heuristic", "--queries", "original", "--seeds", "1"]
    assert main([*argv, "--profile", "tiny", "--out", str(tmp_path), "--no-progress"]) == 0
    assert "original query sets" in capsys.readouterr().out
    table = (tmp_path / "original" / "tiny-heuristic" / "results.csv").read_text().splitlines()
    rows = [line.split(",") for line in table[1:]]
    header = table[0].split(",")
    assert rows and {row[header.index("environment")] for row in rows} == {"maze2d-umaze"}
    total = [row for row in rows if row[header.index("horizon")] == "all"]
    assert len(total) == 1 and total[0][header.index("n")] == "300"
