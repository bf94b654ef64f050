"""Run a student's code in a private folder, with limits that hold, and leave nothing behind.

One :class:`Sandbox` per submission gives it:

* its own fresh ``HOME``, ``IPYTHONDIR``, ``TMPDIR``, working folder and package cache (a copy
  of the grader's), in a temporary folder deleted by :meth:`Sandbox.close`; the environment
  holds nothing else of the grader's (no paths of the autograder, the submissions or the sheet);
* processes (:func:`runner <opcc_edu.classroom.runner>`) started in their own session with
  resource limits (address space, processes, file size, no core dumps), stdout thrown away,
  stderr and the message channel read with a deadline and a size cap;
* at the end or at the time limit, the whole process tree killed: every descendant of the
  runner, and every process that escaped it (a double fork or ``setsid`` reparents it to the
  grading process, made a *child subreaper* while a batch runs, see :func:`reaping`).

The sandbox runs as the grader's user: it does not stop a student's code from reading or
writing the grader's other files. The grader detects what it can (hashes, the review column)
and the teaching guide says when to use containers instead.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ..utils import cache_root

_RUNNER = Path(__file__).with_name("runner.py")
_PR_SET_CHILD_SUBREAPER = 36

#: Bytes of messages one sandboxed process may send (past it the process is killed).
MESSAGE_CAP = 256 * 2**20

#: Bytes of stderr kept (the rest is read and thrown away).
STDERR_CAP = 64 * 2**10


@dataclass(frozen=True)
class Limits:
    """Resource limits of one submission's processes.

    Attributes:
        memory_mb: address space of each process (RLIMIT_AS).
        processes: processes and threads the submission may add to the grader's user
            (RLIMIT_NPROC counts the whole user, so the limit is set to those running now plus this).
        file_mb: the largest file it may write (RLIMIT_FSIZE).
    """

    memory_mb: int = 8192
    processes: int = 256
    file_mb: int = 512


_lock = threading.Lock()
_spawn_lock = threading.Lock()  # held while a runner is forked and while escaped ones are killed
_launched: set[int] = set()
_known_children: set[int] = set()
_reaping = 0


def _prctl_subreaper(on: bool) -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(_PR_SET_CHILD_SUBREAPER, 1 if on else 0, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _processes() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, state) of every process visible in /proc."""
    table = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8", errors="replace") as handle:
                stat = handle.read()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        table[int(entry)] = (int(fields[1]), fields[0])
    return table


def _children_of(pid: int, table: dict[int, tuple[int, str]]) -> set[int]:
    return {p for p, (parent, _) in table.items() if parent == pid}


@contextlib.contextmanager
def reaping() -> Iterator[None]:
    """While a batch runs, make this process the subreaper of everything its sandboxes start,
    so that no escaped process is lost; on exit kill and reap whatever is left."""
    global _reaping
    with _lock:
        _reaping += 1
        if _reaping == 1:
            _known_children.clear()
            _known_children.update(_children_of(os.getpid(), _processes()))
            _prctl_subreaper(True)
    try:
        yield
    finally:
        kill_escaped()
        with _lock:
            _reaping -= 1
            if _reaping == 0:
                _prctl_subreaper(False)


def escaped() -> set[int]:
    """Processes reparented to this one that it did not start (escaped from a sandbox)."""
    mine = _children_of(os.getpid(), _processes())
    with _lock:
        return mine - _known_children - _launched


def _kill_and_reap(pids: set[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    for pid in pids:
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(pid, os.WNOHANG)


def kill_escaped() -> None:
    """Kill (and reap) every escaped process and its descendants, until none is left."""
    for _ in range(100):
        with _spawn_lock:
            table = _processes()
            mine = _children_of(os.getpid(), table)
            with _lock:
                roots = mine - _known_children - _launched
            targets = set()
            for root in roots:
                targets |= {root} | _descendants(root, table)
            if not targets:
                return
            _kill_and_reap(targets)
        time.sleep(0.02)


def _descendants(pid: int, table: dict[int, tuple[int, str]]) -> set[int]:
    found, frontier = set(), [pid]
    while frontier:
        parent = frontier.pop()
        for child in _children_of(parent, table):
            if child not in found:
                found.add(child)
                frontier.append(child)
    return found


class Child:
    """One sandboxed runner process: send it JSON lines, receive its messages with a deadline."""

    def __init__(self, process: subprocess.Popen, channel: int):
        self.process = process
        self._channel = channel
        self._buffer = b""
        self._received = 0
        self._stderr = bytearray()
        self._drain = threading.Thread(target=self._read_stderr, daemon=True)
        self._drain.start()

    def _read_stderr(self) -> None:
        stream = self.process.stderr
        while True:
            try:
                chunk = stream.read1(65536) if hasattr(stream, "read1") else stream.read(65536)
            except (OSError, ValueError):
                return
            if not chunk:
                return
            if len(self._stderr) < STDERR_CAP:
                self._stderr += chunk[: STDERR_CAP - len(self._stderr)]

    @property
    def stderr(self) -> str:
        return self._stderr.decode("utf-8", "replace")

    def send(self, message: dict) -> bool:
        """Write one request; False when the process no longer reads."""
        try:
            self.process.stdin.write((json.dumps(message) + "\n").encode())
            self.process.stdin.flush()
            return True
        except (BrokenPipeError, OSError, ValueError):
            return False

    def close_input(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            self.process.stdin.close()

    def receive(self, deadline: float) -> dict | str:
        """The next message, or ``"timeout"`` (deadline passed), ``"closed"`` (the channel ended:
        the process exited or closed it) or ``"garbled"`` (not a message, or over the cap)."""
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                return "timeout"
            ready, _, _ = select.select([self._channel], [], [], min(left, 1.0))
            if not ready:
                continue
            chunk = os.read(self._channel, 1 << 20)
            if not chunk:
                return "closed"
            self._received += len(chunk)
            if self._received > MESSAGE_CAP:
                return "garbled"
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        try:
            message = json.loads(line)
        except ValueError:
            return "garbled"
        return message if isinstance(message, dict) else "garbled"


class Sandbox:
    """Private folders and processes of one submission (a context manager that cleans up)."""

    def __init__(self, deadline: float, limits: Limits | None = None, env: dict[str, str] | None = None):
        self.deadline = deadline
        self.limits = limits or Limits()
        self.root = Path(tempfile.mkdtemp(prefix="opcc-sandbox-"))
        for name in ("home", "ipython", "tmp", "work", "cache"):
            (self.root / name).mkdir()
        self.work = self.root / "work"
        self._env = env or {}
        self._children: list[Child] = []
        self.copy_cache()

    def copy_cache(self) -> None:
        """A private copy of the package cache (trained ensembles), so that no submission
        changes what another one loads."""
        source = cache_root()
        if source.is_dir():
            shutil.copytree(source, self.root / "cache", dirs_exist_ok=True, ignore=shutil.ignore_patterns("locks"))

    def environment(self) -> dict[str, str]:
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "LANG": "C.UTF-8",
            "HOME": str(self.root / "home"),
            "IPYTHONDIR": str(self.root / "ipython"),
            "TMPDIR": str(self.root / "tmp"),
            "MPLCONFIGDIR": str(self.root / "tmp"),
            "OPCC_EDU_CACHE": str(self.root / "cache"),
            "MPLBACKEND": "Agg",
            "OMP_NUM_THREADS": "1",
            "OPENBLAS_NUM_THREADS": "1",
            "MKL_NUM_THREADS": "1",
            "PYTHONHASHSEED": "0",
        }
        return {**env, **self._env}

    def _preexec(self, processes: int) -> None:  # runs in the child, before exec
        import resource

        memory = self.limits.memory_mb * 2**20
        for limit, value in (
            (resource.RLIMIT_AS, memory),
            (resource.RLIMIT_NPROC, processes),
            (resource.RLIMIT_FSIZE, self.limits.file_mb * 2**20),
            (resource.RLIMIT_CORE, 0),
        ):
            with contextlib.suppress(ValueError, OSError):
                resource.setrlimit(limit, (value, value))

    def start(self, mode: str, request: dict) -> Child:
        """Start ``runner.py MODE`` and send it ``request``."""
        read_end, write_end = os.pipe()
        user_processes = sum(1 for _ in _processes()) + self.limits.processes
        with _spawn_lock:
            process = self._popen(mode, write_end, user_processes)
            with _lock:
                _launched.add(process.pid)
        os.close(write_end)
        child = Child(process, read_end)
        self._children.append(child)
        child.send(request)
        return child

    def _popen(self, mode: str, write_end: int, user_processes: int) -> subprocess.Popen:
        return subprocess.Popen(
            [sys.executable, "-I", str(_RUNNER), mode, str(write_end)],
            cwd=self.work,
            env=self.environment(),
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            pass_fds=(write_end,),
            start_new_session=True,
            close_fds=True,
            preexec_fn=lambda: self._preexec(user_processes),  # noqa: PLW1509 - setrlimit only
        )

    def stop(self, child: Child) -> int | None:
        """Kill ``child`` and every process it started (escaped ones included); its exit status
        (negative: the signal), or None if it had to be killed."""
        status = child.process.poll()
        table = _processes()
        tree = _descendants(child.process.pid, table)
        if status is None:
            tree.add(child.process.pid)
        for _ in range(50):
            _kill_and_reap(tree)
            table = _processes()
            tree = {p for p in tree if p in table and table[p][1] != "Z"}
            tree |= set().union(*(_descendants(p, table) for p in tree)) if tree else set()
            if not tree:
                break
            time.sleep(0.02)
        with contextlib.suppress(subprocess.TimeoutExpired):
            child.process.wait(timeout=5)
        kill_escaped()
        child.close_input()
        with contextlib.suppress(OSError):
            os.close(child._channel)
        child._drain.join(timeout=2)
        with contextlib.suppress(OSError, ValueError):
            child.process.stderr.close()
        with _lock:
            _launched.discard(child.process.pid)
        return status

    def close(self) -> None:
        """Kill every process of this sandbox and delete its folders."""
        for child in self._children:
            if child.process.returncode is None or child.process.pid in _launched:
                self.stop(child)
        kill_escaped()
        shutil.rmtree(self.root, ignore_errors=True)
        if self.root.exists():  # a folder made read-only inside: make it writable, then delete
            for folder, _, _ in os.walk(self.root):
                with contextlib.suppress(OSError):
                    os.chmod(folder, 0o700)
            shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
