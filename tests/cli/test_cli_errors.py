"""Every bad command line ends in one line on stderr, a non-zero status, and no file changed.

Each case runs ``main(argv)`` in-process inside a sandbox: the working directory, the output
directories and ``$OPCC_EDU_CACHE`` all lie under a temporary directory whose every file is
snapshotted before and after. Nothing here trains: every case fails before any work starts.
"""

from __future__ import annotations

import contextlib
import errno
import os
import select
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from opcc_edu.cli import COMMANDS, main

# --------------------------------------------------------------------------------------------
# The sandbox
# --------------------------------------------------------------------------------------------


class Sandbox:
    """Paths of one test: ``file`` is a plain file, ``locked`` a directory nobody may write."""

    def __init__(self, root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.root = root
        self.monkeypatch = monkeypatch
        self.file = root / "afile"
        self.file.write_text("not a directory\n")
        self.empty = root / "empty"
        self.empty.mkdir()
        self.locked = root / "locked"
        self.locked.mkdir()
        self.cache = root / "cache"
        self.cache.mkdir()
        monkeypatch.setenv("OPCC_EDU_CACHE", str(self.cache))
        monkeypatch.chdir(root)

    def fill(self, argv: list[str]) -> list[str]:
        return [a.format(file=self.file, empty=self.empty, locked=self.locked, cache=self.cache) for a in argv]

    def lock(self) -> None:
        """Make ``locked`` unwritable (root ignores modes, so ask os.access instead)."""
        if os.geteuid() == 0:
            real = os.access
            locked = str(self.locked)

            def access(path, mode, *args, **kwargs):
                if str(path) == locked and mode & os.W_OK:
                    return False
                return real(path, mode, *args, **kwargs)

            self.monkeypatch.setattr(os, "access", access)
        else:
            self.locked.chmod(0o500)

    def snapshot(self) -> dict[str, tuple]:
        out = {}
        for path in sorted(self.root.rglob("*")):
            stat = path.lstat()
            out[str(path.relative_to(self.root))] = (
                path.is_dir(),
                stat.st_size,
                stat.st_mtime_ns,
                path.read_bytes() if path.is_file() else None,
            )
        return out


@pytest.fixture
def sandbox(tmp_path, monkeypatch):
    box = Sandbox(tmp_path, monkeypatch)
    yield box
    box.locked.chmod(0o700)


def run_main(argv: list[str], capsys) -> tuple[int, str, str]:
    """``main(argv)`` -> (status, stdout, stderr); argparse's SystemExit counts as a status."""
    try:
        status = main(argv)
    except SystemExit as exc:
        status = exc.code if isinstance(exc.code, int) else 1
    captured = capsys.readouterr()
    return status, captured.out, captured.err


# --------------------------------------------------------------------------------------------
# Setups of cases that need more than a command line
# --------------------------------------------------------------------------------------------
def cache_is_a_file(box: Sandbox) -> None:
    box.monkeypatch.setenv("OPCC_EDU_CACHE", str(box.file))


def cache_under_a_file(box: Sandbox) -> None:
    box.monkeypatch.setenv("OPCC_EDU_CACHE", str(box.file / "cache"))


def cache_unwritable(box: Sandbox) -> None:
    box.monkeypatch.setenv("OPCC_EDU_CACHE", str(box.locked / "cache"))
    box.lock()


def no_train_extra(box: Sandbox) -> None:
    box.monkeypatch.setitem(sys.modules, "stable_baselines3", None)  # `import stable_baselines3` fails


def bad_profile_variable(box: Sandbox) -> None:
    box.monkeypatch.setenv("OPCC_EDU_PROFILE", "huge")


Setup = Callable[[Sandbox], None]

# (id, argv, text the error line must contain, setup)
BAD: list[tuple[str, list[str], str, Setup | None]] = [
    # the command line itself
    ("no-command", [], "required: COMMAND", None),
    ("unknown-command", ["bogus"], "invalid choice: 'bogus'", None),
    ("unknown-profile", ["--profile", "huge", "info"], "invalid choice: 'huge'", None),
    ("unknown-profile-after", ["info", "--profile", "huge"], "choose from 'tiny', 'classroom', 'paper'", None),
    ("profile-variable", ["mdp-demo"], "unknown OPCC_EDU_PROFILE 'huge'", bad_profile_variable),
    ("threads-zero", ["--threads", "0", "info"], "--threads: must be an integer >= 1, got 0", None),
    ("threads-negative", ["mdp-demo", "--threads", "-2"], "--threads: must be an integer >= 1", None),
    ("threads-text", ["--threads", "many", "info"], "--threads: must be an integer >= 1, got 'many'", None),
    # run
    ("run-unknown-env", ["run", "maze3d"], "unknown environment 'maze3d'; valid choices: maze2d-open", None),
    ("run-unknown-dataset", ["run", "maze2d-umaze", "2m"], "valid choices: 1k, 10k, 100k, 1m", None),
    ("run-out-is-file", ["run", "--out", "{file}"], "is a file, not a directory", None),
    ("run-out-under-file", ["run", "--out", "{file}/runs"], "which is a file", None),
    ("run-out-unwritable", ["run", "--out", "{locked}/runs"], "is not writable", lambda box: box.lock()),
    ("run-ensemble-size-zero", ["run", "--ensemble-size", "0"], "--ensemble-size: must be an integer >= 1", None),
    (
        "run-train-steps-negative",
        ["run", "--train-steps", "-5"],
        "--train-steps: must be an integer >= 1, got -5",
        None,
    ),
    ("run-prior-scale-negative", ["run", "--prior-scale", "-1"], "--prior-scale: must be a number >= 0", None),
    ("run-prior-scale-nan", ["run", "--prior-scale", "nan"], "--prior-scale: must be a finite number", None),
    ("run-model-type", ["run", "--model-type", "rnn"], "invalid choice: 'rnn'", None),
    ("run-termination", ["run", "--termination", "sometimes"], "invalid choice: 'sometimes'", None),
    ("run-device", ["run", "--device", "tpu"], "device 'tpu'", None),
    ("run-seed-negative", ["run", "--seed", "-1"], "--seed: must be an integer >= 0", None),
    ("run-cache-is-file", ["run"], "is a file, not a directory; set OPCC_EDU_CACHE", cache_is_a_file),
    ("run-cache-under-file", ["run"], "which is a file; set OPCC_EDU_CACHE", cache_under_a_file),
    ("run-cache-unwritable", ["run"], "is not writable; set OPCC_EDU_CACHE", cache_unwritable),
    # mdp-demo
    ("mdp-states-zero", ["mdp-demo", "--states", "0"], "--states: must be an integer >= 1, got 0", None),
    ("mdp-actions-zero", ["mdp-demo", "--actions", "0"], "--actions: must be an integer >= 1", None),
    ("mdp-horizon-negative", ["mdp-demo", "--horizon", "-5"], "--horizon: must be an integer >= 1, got -5", None),
    ("mdp-gamma-above-one", ["mdp-demo", "--gamma", "1.5"], "--gamma: must be a number in [0, 1]", None),
    ("mdp-states-text", ["mdp-demo", "--states", "six"], "--states: must be an integer >= 1, got 'six'", None),
    # build
    ("build-no-target", ["build"], "required: TARGET", None),
    ("build-unknown-target", ["build", "models"], "invalid choice: 'models'", None),
    (
        "policies-steps-negative",
        ["build", "policies", "hopper", "--steps", "-5"],
        "--steps: must be an integer >= 1, got -5",
        None,
    ),
    (
        "policies-checkpoints-zero",
        ["build", "policies", "hopper", "--checkpoints", "0"],
        "--checkpoints: must be",
        None,
    ),
    ("policies-unknown-env", ["build", "policies", "ant"], "unknown environment 'ant'", None),
    (
        "policies-behavior-maze",
        ["build", "policies", "maze2d-open", "--behavior"],
        "needs a locomotion environment",
        None,
    ),
    (
        "policies-stop-after-end",
        ["build", "policies", "hopper", "--steps", "1000", "--stop-at", "2000"],
        "--stop-at 2000",
        None,
    ),
    ("policies-out-is-file", ["build", "policies", "hopper", "--out", "{file}"], "--out", None),
    ("policies-assets-dir-is-file", ["build", "policies", "hopper", "--assets-dir", "{file}"], "is a file", None),
    ("policies-work-dir-is-file", ["build", "policies", "hopper", "--work-dir", "{file}"], "--work-dir", None),
    (
        "policies-no-train-extra",
        ["build", "policies", "hopper", "--out", "{empty}"],
        "needs the 'train' extra",
        no_train_extra,
    ),
    ("queries-unknown-env", ["build", "queries", "ant"], "unknown environment 'ant'; valid choices", None),
    ("queries-n-queries-zero", ["build", "queries", "hopper", "--n-queries", "0"], "--n-queries: must be", None),
    ("queries-out-is-file", ["build", "queries", "hopper", "--out", "{file}"], "is a file, not a directory", None),
    ("datasets-unknown-env", ["build", "datasets", "ant"], "unknown environment 'ant'", None),
    ("datasets-unknown-name", ["build", "datasets", "hopper", "1m"], "valid choices: random, medium", None),
    ("datasets-size-zero", ["build", "datasets", "maze2d-open", "1k", "--size", "0"], "--size: must be", None),
    ("datasets-cache-is-file", ["build", "datasets", "maze2d-open", "1k"], "set OPCC_EDU_CACHE", cache_is_a_file),
    # ablation
    ("ablation-unknown", ["ablation", "temperature"], "unknown ablation 'temperature'; valid choices", None),
    (
        "ablation-max-runs-negative",
        ["ablation", "horizon", "--max-runs", "-1"],
        "--max-runs: must be an integer >= 0",
        None,
    ),
    ("ablation-seeds-zero", ["ablation", "horizon", "--seeds", "0"], "--seeds: must be an integer >= 1, got 0", None),
    ("ablation-dry-run-unknown-dataset", ["ablation", "horizon", "--dry-run", "--datasets", "2m"], "'2m'", None),
    (
        "ablation-unknown-env",
        ["ablation", "horizon", "--dry-run", "--environments", "ant"],
        "unknown environment",
        None,
    ),
    ("ablation-unknown-profile", ["ablation", "horizon", "--profile", "huge"], "invalid choice: 'huge'", None),
    ("ablation-out-is-file", ["ablation", "horizon", "--dry-run", "--out", "{file}"], "is a file", None),
    ("ablation-cache-is-file", ["ablation", "horizon", "--out", "{empty}"], "set OPCC_EDU_CACHE", cache_is_a_file),
    # report
    ("report-unknown-profile", ["report", "--profiles", "bogus"], "choose from 'tiny', 'classroom', 'paper'", None),
    ("report-unknown-format", ["report", "--format", "html"], "invalid choice: 'html'", None),
    ("report-out-is-file", ["report", "--out", "{file}"], "is a file, not a directory", None),
    ("report-no-results", ["report", "--out", "{empty}"], "no results under", None),
]


@pytest.mark.parametrize(("argv", "expected", "setup"), [case[1:] for case in BAD], ids=[case[0] for case in BAD])
def test_bad_command_line_is_one_line_and_changes_nothing(sandbox, capsys, argv, expected, setup):
    if setup is not None:
        setup(sandbox)
    argv = sandbox.fill(argv)
    before = sandbox.snapshot()
    status, _, err = run_main(argv, capsys)
    after = sandbox.snapshot()
    assert status != 0
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    assert lines[0].startswith("opcc-edu") and ": error: " in lines[0], lines[0]
    assert expected in lines[0], lines[0]
    assert "%%" not in lines[0]
    assert after == before


def test_the_table_is_large_and_its_ids_unique():
    assert len(BAD) >= 40
    assert len({case[0] for case in BAD}) == len(BAD)


def test_a_missing_extra_names_the_command_and_the_install_line(sandbox, capsys):
    no_train_extra(sandbox)
    status, out, err = run_main(["build", "policies", "hopper", "--out", str(sandbox.empty)], capsys)
    assert status == 2 and out == ""
    assert err == "opcc-edu build: error: this command needs the 'train' extra: pip install \"opcc_edu[train]\"\n"


def test_global_options_work_before_and_after_the_command(sandbox, capsys):
    for argv in (
        ["--profile", "classroom", "ablation", "horizon", "--dry-run"],
        ["ablation", "horizon", "--dry-run", "--profile", "classroom"],
    ):
        status, out, err = run_main(argv, capsys)
        assert status == 0 and err == ""
        assert "in profile classroom" in out
    assert list(sandbox.root.glob("results")) == []  # a dry run writes nothing


# --------------------------------------------------------------------------------------------
# Failures while a command runs
# --------------------------------------------------------------------------------------------
def _raise(exc: BaseException) -> Callable[..., None]:
    def fail(*args, **kwargs):
        raise exc

    return fail


@pytest.mark.parametrize(
    ("exc", "status", "expected"),
    [
        (KeyboardInterrupt(), 130, "interrupted"),
        (MemoryError("cannot allocate 80 GiB"), 1, "out of memory: cannot allocate 80 GiB"),
        (OSError(errno.ENOSPC, "No space left on device", "/data/x.npz"), 1, "No space left on device: /data/x.npz"),
        (PermissionError(errno.EACCES, "Permission denied", "/data/x.npz"), 2, "choose a writable location"),
        (IsADirectoryError(errno.EISDIR, "Is a directory", "/data/x.npz"), 2, "Is a directory: /data/x.npz"),
        (NotADirectoryError(errno.ENOTDIR, "Not a directory", "/data/x.npz"), 2, "a part of the path is a file"),
        (FileNotFoundError("query set missing; build it with `opcc-edu build queries hopper`"), 2, "build it with"),
        (KeyError("no such column 'aurcc'"), 2, "no such column 'aurcc'"),
        (ValueError("first line\nsecond line"), 2, "first line; second line"),
        (ImportError("reading hdf5 files needs h5py: pip install 'opcc_edu[data]'"), 2, "needs the 'data' extra"),
    ],
    ids=[
        "interrupt",
        "memory",
        "no-space",
        "permission",
        "is-a-directory",
        "not-a-directory",
        "missing-file",
        "key",
        "multiline",
        "extra",
    ],
)
def test_runtime_failures_are_one_line_with_their_status(sandbox, capsys, monkeypatch, exc, status, expected):
    from opcc_edu.cli import mdp

    monkeypatch.setattr(mdp, "mdp_demo_lines", _raise(exc))
    code, _, err = run_main(["mdp-demo"], capsys)
    assert code == status
    assert err.count("\n") == 1 and err.startswith("opcc-edu mdp-demo: error: ")
    assert expected in err


def test_a_bug_keeps_its_traceback(sandbox, monkeypatch):
    from opcc_edu.cli import mdp

    monkeypatch.setattr(mdp, "mdp_demo_lines", _raise(ZeroDivisionError("a bug")))
    with pytest.raises(ZeroDivisionError):
        main(["mdp-demo"])


# --------------------------------------------------------------------------------------------
# The installed entry point
# --------------------------------------------------------------------------------------------
def _entry_point() -> str:
    path = Path(sys.executable).with_name("opcc-edu")
    found = str(path) if path.exists() else shutil.which("opcc-edu")
    if found is None:
        pytest.skip("the opcc-edu entry point is not installed")
    return found


HELP_COMMANDS = [[], *([name] for name in COMMANDS), ["build", "policies"], ["build", "queries"], ["build", "datasets"]]


def test_every_help_exits_zero_without_percent_artefacts():
    exe = _entry_point()
    for words in HELP_COMMANDS:
        proc = subprocess.run([exe, *words, "--help"], capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, (words, proc.stderr)
        assert proc.stdout.startswith("usage: opcc-edu" + "".join(f" {w}" for w in words))
        assert "%%" not in proc.stdout and proc.stderr == ""


def test_entry_point_reports_a_bad_value_in_one_line():
    proc = subprocess.run(
        [_entry_point(), "build", "policies", "hopper", "--steps", "-5"], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr == "opcc-edu build policies: error: argument --steps: must be an integer >= 1, got -5\n"


@pytest.mark.skipif(not hasattr(select, "poll"), reason="needs select.poll")
def test_a_closed_output_pipe_ends_quietly(sandbox, capsys, monkeypatch):
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader went away, as `opcc-edu info | head` leaves it
    with open(write_end, "w", buffering=1) as closed:  # line-buffered, as on a terminal
        monkeypatch.setattr(sys, "stdout", closed)
        status = main(["mdp-demo", "--states", "2"])
        monkeypatch.setattr(sys, "stdout", sys.__stdout__)
        with contextlib.suppress(BrokenPipeError):
            closed.close()
    assert status == 141 and capsys.readouterr().err == ""


def test_a_broken_pipe_elsewhere_is_an_error(sandbox, capsys, monkeypatch):
    from opcc_edu.cli import mdp

    monkeypatch.setattr(mdp, "mdp_demo_lines", _raise(BrokenPipeError(errno.EPIPE, "Broken pipe")))
    status, _, err = run_main(["mdp-demo"], capsys)
    assert status == 2 and err == "opcc-edu mdp-demo: error: Broken pipe\n"
