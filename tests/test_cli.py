import subprocess
import sys

import pytest

from opcc_edu.cli import COMMANDS, build_parser, main


def test_every_subcommand_has_help(capsys):
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    assert set(COMMANDS) <= set(sub.choices)
    for name in sub.choices:
        with pytest.raises(SystemExit) as exc:
            main([name, "--help"])
        assert exc.value.code == 0
        assert "usage: opcc-edu " + name in capsys.readouterr().out


def test_info_lists_environments(capsys):
    assert main(["info"]) == 0
    out = capsys.readouterr().out
    for name in ("maze2d-open", "maze2d-large", "halfcheetah", "hopper", "walker2d"):
        assert name in out


def test_mdp_demo_prints_exact_and_monte_carlo(capsys):
    assert main(["mdp-demo", "--states", "4", "--horizon", "5"]) == 0
    out = capsys.readouterr().out
    assert "Exact V" in out and "RMSE" in out


def test_bad_profile_is_a_one_line_error():
    proc = subprocess.run(
        [sys.executable, "-m", "opcc_edu.cli", "--profile", "huge", "info"], capture_output=True, text=True
    )
    assert proc.returncode == 2
    assert "invalid choice: 'huge'" in proc.stderr and "tiny" in proc.stderr
