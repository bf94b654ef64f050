"""Students who try to game the grader or use it against each other, graded with ``--unsafe-local``.

Without a sandbox the notebooks run as the grader's user, so these attacks reach the grader's
files; what is checked here is what the design guarantees even then (and that every row says it
was not isolated). The same attacks against the default bwrap sandbox, where they reach
nothing, are in ``test_sandbox_attacks.py``.

One batch (``--unsafe-local``, ``--jobs 2``, ``--timeout 90``) grades, beside honest submissions,
notebooks that plant an IPython start-up file, leave a detached process that rewrites the sheet, rewrite the next
submission and the autograder zip, hang with ``os._exit`` disabled and processes in their own
sessions, snoop for the hidden tests, kill their own process with a misleading message, change
folder, lack Otter's metadata, share a student name, or are named like a spreadsheet formula.
Every honest submission keeps its honest score, every attack is flagged or scored honestly, and
nothing is left running or on disk.
"""

from __future__ import annotations

import csv
import os
import tempfile
import time
from pathlib import Path

import nbformat
import pytest

pytest.importorskip("otter", reason="the 'teach' extra (otter-grader) is not installed")

from opcc_edu.classroom.grading import (  # noqa: E402
    DockerUnavailable,
    docker_command,
    grade_submission,
    require_docker,
)
from opcc_edu.classroom.isolation import UNSAFE_NOTE  # noqa: E402
from opcc_edu.classroom.review import extract_functions, review_flags  # noqa: E402
from opcc_edu.classroom.sheet import QuestionGrade, read_grades, write_grades  # noqa: E402
from opcc_edu.classroom.teaching import question_points  # noqa: E402
from opcc_edu.cli import main  # noqa: E402

NAME = "risk_coverage_metrics"


@pytest.fixture(scope="module")
def built(built_risk):
    return built_risk


def _notebook(base: Path, path: Path, first: str = "", last: str = "", drop_metadata: bool = False) -> Path:
    notebook = nbformat.read(base, as_version=4)
    if first:
        notebook.cells.insert(0, nbformat.v4.new_code_cell(first))
    if last:
        notebook.cells.append(nbformat.v4.new_code_cell(last))
    if drop_metadata:
        notebook.metadata = {}
        for cell in notebook.cells:
            cell.metadata = {}
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(notebook, path)
    return path


def _wrong(solution: Path, path: Path) -> Path:
    notebook = nbformat.read(solution, as_version=4)
    for cell in notebook.cells:
        cell.source = cell.source.replace("above.sum() / confidence.size**2", "above.sum() / confidence.size")
    nbformat.write(notebook, path)
    return path


def _sleeper(pids: Path) -> str:
    """Python code that records its pid in ``pids`` and sleeps 15 minutes."""
    return f"import os, time; open(os.path.join({str(pids)!r}, str(os.getpid())), 'w').close(); time.sleep(900)"


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_one_batch_of_attacks_changes_no_other_grade_and_leaves_nothing(built, tmp_path, capsys, monkeypatch):
    solution = built.autograder_zip.parent / f"{NAME}.ipynb"
    blank = built.student_notebook
    subs, pids, spy = tmp_path / "subs", tmp_path / "pids", tmp_path / "spy.txt"
    subs.mkdir()
    pids.mkdir()
    out = tmp_path / "grades.csv"
    zip_path = tmp_path / "autograder.zip"
    zip_path.write_bytes(built.autograder_zip.read_bytes())
    zip_bytes = zip_path.read_bytes()
    startup = (
        "import os\n"
        "folder = os.path.join(os.environ['IPYTHONDIR'], 'profile_default', 'startup')\n"
        "os.makedirs(folder, exist_ok=True)\n"
        "open(os.path.join(folder, '00.py'), 'w').write('import numpy\\nnumpy.isclose = lambda *a, **k: True\\n')\n"
        "open(os.path.expanduser('~/.bashrc'), 'w').write('echo owned')\n"
    )
    daemon = (
        "import os, time\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        f"        open({str(pids)!r} + '/' + str(os.getpid()), 'w').close()\n"
        "        time.sleep(4)\n"
        f"        open({str(out)!r}, 'w').write('student,points\\nmallory,100\\n')\n"
        "        time.sleep(600)\n"
        "    os._exit(0)\n"
    )
    zed = subs / "zed.ipynb"  # an honest student graded after the one who rewrites it
    rewriter = f"open({str(zed)!r}, 'w').write('{{}}')\nopen({str(zip_path)!r}, 'wb').write(b'garbage')\n"
    hang = (
        "import os, subprocess, sys\n"
        f"p = subprocess.Popen([sys.executable, '-c', {_sleeper(pids)!r}], start_new_session=True)\n"
        "os._exit = lambda *args: None\n"
        "while True:\n"
        "    pass\n"
    )
    snoop = (
        "import os, sys\n"
        "found = []\n"
        "for top in (os.getcwd(), os.environ['HOME'], os.environ['TMPDIR']):\n"
        "    for folder, dirs, files in os.walk(top):\n"
        "        found += [os.path.join(folder, f) for f in files + dirs]\n"
        f"open({str(spy)!r}, 'w').write(repr(found) + repr(dict(os.environ)) + repr(sys.argv))\n"
        "try:\n"
        "    hog = bytearray(64 * 2**30)\n"
        "except MemoryError:\n"
        "    pass\n"
    )
    dies = (
        "print('Kernel died before replying to kernel_info')\nimport os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n"
    )
    submissions = [
        _notebook(blank, subs / "ivan.ipynb", last=startup),  # plants a start-up file; blank: 0
        _wrong(solution, subs / "wendy.ipynb"),  # graded after the start-up file: loses q3
        _notebook(blank, subs / "dan.ipynb", first=daemon),  # a detached process rewrites the sheet
        _notebook(blank, subs / "rita.ipynb", first=rewriter),  # rewrites zed and the autograder zip
        _notebook(solution, zed),
        _notebook(blank, subs / "hugo.ipynb", first=hang),  # hangs past --timeout
        _notebook(solution, subs / "sam.ipynb", first=snoop),  # looks for the hidden tests
        _notebook(solution, subs / "kim.ipynb", last=dies),  # kills its own process at the end
        _notebook(solution, subs / "carl.ipynb", last="import os\nos.chdir('/')\n"),
        _notebook(solution, subs / "meg.ipynb", drop_metadata=True),  # no Otter metadata
        _notebook(solution, subs / "twin" / f"{NAME}.ipynb"),
        _notebook(blank, subs / "twin.ipynb"),  # a second file for student "twin"
        _notebook(solution, subs / "=HYPERLINK(1).ipynb"),
    ]
    # a private temp directory, so that other programs' temporary files cannot be taken for ours
    private_tmp = tmp_path / "tmp"
    private_tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(private_tmp))
    monkeypatch.setattr(tempfile, "tempdir", str(private_tmp))
    before = set(os.listdir(tempfile.gettempdir()))
    argv = ["assignments", "grade", "--unsafe-local", "--assignment", NAME, "--autograder", str(zip_path)]
    argv += ["--out", str(out)]
    start = time.monotonic()
    # 90 s: an honest notebook takes a few seconds, and well under 90 on a loaded machine
    assert main([*argv, "--jobs", "2", "--timeout", "90", *map(str, submissions)]) == 0
    elapsed = time.monotonic() - start
    time.sleep(5)  # the detached process would have rewritten the sheet by now
    err = capsys.readouterr().err

    rows = read_grades(out)
    assert len(rows) == len(submissions) * len(question_points(built.autograder_zip))
    assert all(UNSAFE_NOTE in row.review for row in rows)
    assert "warning: no isolation (--unsafe-local)" in err
    by = {}
    for row in rows:
        by.setdefault(row.submission, {})[row.question] = row
    full = sum(question_points(built.autograder_zip).values())

    def total(path: Path) -> float:
        return sum(r.points for r in by[str(path)].values())

    def review(path: Path) -> str:
        return next(iter(by[str(path)].values())).review

    ivan, wendy, dan, rita, zed_, hugo, sam, kim, carl, meg, twin_a, twin_b, formula = submissions
    assert total(ivan) == 0 and "IPython start-up" in review(ivan)
    assert total(wendy) == full - 2 and by[str(wendy)]["q3"].points == 0  # the start-up file did nothing
    assert total(dan) == 0 and "subprocesses" in review(dan)
    assert total(rita) == 0 and "files outside the notebook" in review(rita)
    assert total(zed_) == full, by[str(zed_)]  # graded as first read
    assert f"{zed} changed during grading" in err and f"{zip_path} changed during grading" in err
    assert total(hugo) == 0 and {r.reason for r in by[str(hugo)].values()} == {"timed out after 90 s"}
    assert total(sam) == full and "/proc" not in spy.read_text()
    snooped = spy.read_text()
    assert "tests" not in snooped and "expected" not in snooped and str(zip_path) not in snooped
    assert total(kim) == full - 2, by[str(kim)]  # q5's values were lost with the process
    assert "ended during code cell" in by[str(kim)]["q5"].reason and "failed to start" not in by[str(kim)]["q5"].reason
    assert total(carl) == full and total(meg) == full
    assert total(twin_a) == full and total(twin_b) == 0
    assert "2 submissions for student 'twin'" in err and "2 submissions" in review(twin_a)
    assert total(formula) == full
    with open(out, newline="") as handle:
        raw = [row for row in csv.DictReader(handle) if row["submission"].endswith("=HYPERLINK(1).ipynb")]
    assert raw and all(row["student"] == "'=HYPERLINK(1)" for row in raw)

    assert elapsed < 90 + 240, f"the batch took {elapsed:.0f} s"  # the hang cost its time limit, no more
    assert zip_path.read_bytes() == b"garbage" and built.autograder_zip.read_bytes() == zip_bytes
    recorded = [int(p.name) for p in pids.iterdir()]
    assert len(recorded) == 2, recorded  # the daemon and the hanging notebook's child started
    assert not [pid for pid in recorded if _alive(pid)], "a submission's process survived the batch"
    left = {n for n in set(os.listdir(tempfile.gettempdir())) - before if n.startswith(("opcc-", "tmp"))}
    assert not left, left
    assert not (Path.home() / ".bashrc").exists() or "owned" not in (Path.home() / ".bashrc").read_text()


def test_a_submission_past_its_time_limit_is_killed_with_its_sessions(built, tmp_path):
    pids = tmp_path / "pids"
    pids.mkdir()
    hang = (
        "import os, subprocess, sys, time\n"
        f"subprocess.Popen([sys.executable, '-c', {'import os; os.setsid(); ' + _sleeper(pids)!r}])\n"
        "time.sleep(1)\n"
        "while True:\n"
        "    pass\n"
    )
    path = _notebook(built.autograder_zip.parent / f"{NAME}.ipynb", tmp_path / "slow.ipynb", first=hang)
    start = time.monotonic()
    rows = grade_submission(path, NAME, built.autograder_zip, timeout=5, backend="unsafe-local")
    assert time.monotonic() - start < 5 + 30
    assert {row.reason for row in rows} == {"timed out after 5 s"}
    time.sleep(0.5)
    assert [p.name for p in pids.iterdir()] and not [p for p in pids.iterdir() if _alive(int(p.name))]


def test_a_runner_that_fails_to_start_is_retried(built, tmp_path, monkeypatch):
    import opcc_edu.classroom.sandbox as sandbox

    counter = tmp_path / "starts"
    fake = tmp_path / "runner.py"
    fake.write_text(
        "import os, runpy, sys\n"
        f"counter = {str(counter)!r}\n"
        "n = len(open(counter).read()) if os.path.exists(counter) else 0\n"
        "open(counter, 'a').write('x')\n"
        "if n < 2:\n"
        "    sys.exit('Kernel died before replying to kernel_info')\n"
        f"sys.argv = [{str(sandbox._RUNNER)!r}, *sys.argv[1:]]\n"
        f"runpy.run_path({str(sandbox._RUNNER)!r}, run_name='__main__')\n"
    )
    monkeypatch.setattr(sandbox, "_RUNNER", fake)
    solution = built.autograder_zip.parent / f"{NAME}.ipynb"
    rows = grade_submission(solution, NAME, built.autograder_zip, timeout=120, backend="unsafe-local")
    assert all(r.points == r.max_points for r in rows), rows
    assert counter.read_text() == "xxxx"  # the notebook runner three times, then the functions' process
    counter.write_text("")  # every start fails: a grader error that says so
    fake.write_text("import sys\nsys.exit('Kernel died before replying to kernel_info')\n")
    rows = grade_submission(solution, NAME, built.autograder_zip, timeout=120, backend="unsafe-local")
    assert all(r.points == 0 for r in rows)
    assert rows[0].reason.startswith("grader error: the notebook runner failed to start 3 times (Kernel died")


def test_missing_and_directory_submissions_are_reported(built, tmp_path):
    missing = grade_submission(tmp_path / "nobody.ipynb", NAME, built.autograder_zip)
    assert {row.reason for row in missing} == {"file not found"}
    assert {row.reason for row in grade_submission(tmp_path, NAME, built.autograder_zip)} == {"not a file"}


def test_only_imports_literals_and_plain_defs_are_graded():
    notebook = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_code_cell("import numpy as np\nK = 3\nx = np.ones(2)\nnp.isclose = lambda *a: True"),
            nbformat.v4.new_code_cell(
                "@staticmethod\ndef a(): pass\ndef b(x=len([])): pass\ndef c(x=1, *, y=(1, 2)): pass"
            ),
            nbformat.v4.new_code_cell("%matplotlib inline\ndef d(): return K"),
        ]
    )
    source, functions, refused = extract_functions(notebook)
    assert sorted(functions) == ["c", "d"] and "K = 3" in source
    assert "np.ones" not in source and "isclose" not in source
    assert refused == ["a: decorated functions are not graded", "b: default values must be literals"]
    flags = review_flags(notebook, assignment=NAME)
    assert "patches np.isclose" in flags


def test_review_flags_a_function_that_computes_a_graded_answer_outright():
    given = ["from opcc_edu.classroom.assignments import baseline_selective_gains, design_task_data"]
    for cell in (
        "gains = baseline_selective_gains(data)",
        "from opcc_edu.classroom import assignments as a\ngains = a.baseline_selective_gains(data)",
        "f = globals()['baseline_selective_gains']",
    ):
        flags = review_flags([cell], given, assignment="design_confidence")
        assert "uses reference functions (baseline_selective_gains)" in flags, cell
    # the handed-out cell itself, another assignment, and a cell without the helper are not flagged
    assert review_flags(given, given, assignment="design_confidence") == []
    assert review_flags(["gains = baseline_selective_gains(data)"], given, assignment="ensemble_confidence") == []
    assert review_flags(["data = design_task_data()"], given, assignment="design_confidence") == []


def test_sheet_escapes_formulas_and_reads_back(tmp_path):
    row = QuestionGrade("=cmd|' /C calc'!A0", NAME, "q1", 1.0, 2.0, "-1 is wrong", "@review", "ab", "+x.ipynb")
    path = write_grades([row], tmp_path / "g.csv")
    text = path.read_text()
    assert "'=cmd" in text and "'-1 is wrong" in text and "'@review" in text and "'+x.ipynb" in text
    assert read_grades(path) == [row]


def test_docker_command_and_message(tmp_path, monkeypatch, capsys):
    command = docker_command(NAME, "a.zip", "subs", "out", 12.5, jobs=2)
    assert command[:2] == ["otter", "grade"] and "--no-network" in command
    assert command[command.index("--timeout") + 1] == "13" and command[command.index("--containers") + 1] == "2"
    monkeypatch.setenv("PATH", str(tmp_path))  # no docker here
    with pytest.raises(DockerUnavailable, match="docker command was not found"):
        require_docker()
    fake = tmp_path / "docker"
    fake.write_text("#!/bin/sh\nexit 1\n")
    fake.chmod(0o755)
    with pytest.raises(DockerUnavailable, match="running Docker daemon"):
        require_docker()
    argv = ["assignments", "grade", "--assignment", NAME, "--docker", "--out", str(tmp_path / "g.csv"), "x.ipynb"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "running Docker daemon" in err[0]
    assert not (tmp_path / "g.csv").exists()
