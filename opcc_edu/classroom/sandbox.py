"""Run a student's code in a sandbox of its own, with limits that hold, and leave nothing behind.

One :class:`Sandbox` per submission starts its processes (:mod:`runner
<opcc_edu.classroom.runner>`) in the batch's backend (:mod:`opcc_edu.classroom.isolation`):

* ``bwrap``: each process in a bubblewrap sandbox (own PID, network, IPC and UTS namespaces, a
  read-only system and Python, a private ``/tmp`` of bounded size holding its ``HOME``,
  ``IPYTHONDIR``, working folder and a copy of the package cache when it fits in a quarter of
  that ``/tmp``; a uid that is not the grader's). Nothing of the grader's is mounted, so nothing
  of it can be read, changed or signalled, and the namespace's processes all die with its first.
* ``unsafe-local``: its own fresh ``HOME``, ``IPYTHONDIR``, ``TMPDIR``, working folder and
  package cache in a temporary folder deleted by :meth:`Sandbox.close`, as the grader's user.

In both, processes start in their own session with resource limits (address space, processes,
file size, no core dumps) set before ``exec``, so they bind the sandbox's uid; stdout is thrown
away, stderr and the message channel are read with a deadline and a size cap; at the end or at
the time limit the whole process tree is killed: every descendant of the runner, and every
process that escaped it (a double fork or ``setsid`` reparents it to the grading process, made
a *child subreaper* while a batch runs, see :func:`reaping`).
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
        processes: processes and threads the submission may run (RLIMIT_NPROC, which counts a
            uid: under ``bwrap`` as root each sandbox has a uid of its own, so this is its
            allowance; otherwise the limit is set to the uid's processes running now plus this).
        file_mb: the largest file it may write (RLIMIT_FSIZE).
        tmp_mb: size of the sandbox's private ``/tmp`` (``bwrap`` only; it holds every file the
            submission can write).
    """

    memory_mb: int = 4096
    processes: int = 128
    file_mb: int = 512
    tmp_mb: int = 1024

    def __post_init__(self) -> None:
        from ..utils import check_positive_int

        for name in ("memory_mb", "processes", "file_mb", "tmp_mb"):
            check_positive_int(getattr(self, name), f"Limits.{name}")


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


def _fits(folder: Path, budget: int) -> bool:
    """Whether ``folder`` exists and its files add up to at most ``budget`` bytes (a sandbox copies
    a cache that fits in a quarter of its /tmp; a larger one is left out and rebuilt as needed)."""
    if not folder.is_dir():
        return False
    total = 0
    for parent, _, files in os.walk(folder):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(parent, name)).st_size
            if total > budget:
                return False
    return True


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
    """Private folders and processes of one submission (a context manager that cleans up).

    Args:
        deadline: ``time.monotonic()`` past which its processes are stopped.
        limits: resource limits of each of its processes.
        env: environment variables added for its processes.
        backend: ``"bwrap"`` or ``"unsafe-local"`` (see :mod:`opcc_edu.classroom.isolation`).
    """

    def __init__(
        self,
        deadline: float,
        limits: Limits | None = None,
        env: dict[str, str] | None = None,
        backend: str = "bwrap",
    ):
        from .isolation import acquire_uid, check_backend

        self.deadline = deadline
        self.limits = limits or Limits()
        self.backend = check_backend(backend)
        self._env = env or {}
        self._children: list[Child] = []
        self.uid: int | None = None
        self.root: Path | None = None
        if self.backend == "bwrap":
            self.as_root = os.geteuid() == 0
            if self.as_root:
                self.uid = acquire_uid()
        else:
            self.root = Path(tempfile.mkdtemp(prefix="opcc-sandbox-"))
            for name in ("home", "ipython", "tmp", "work", "cache"):
                (self.root / name).mkdir()
            self.copy_cache()

    @property
    def work(self) -> Path:
        """The working folder of its processes (as they see it)."""
        return self.root / "work" if self.root is not None else Path("/tmp/work")

    def copy_cache(self) -> None:
        """A private copy of the package cache (trained ensembles), so that no submission
        changes what another one loads (under ``bwrap`` the runner copies it into its /tmp)."""
        source = cache_root()
        if self.root is not None and source.is_dir():
            shutil.copytree(source, self.root / "cache", dirs_exist_ok=True, ignore=shutil.ignore_patterns("locks"))

    def environment(self) -> dict[str, str]:
        if self.root is not None:
            home, ipython, tmp, cache = (str(self.root / n) for n in ("home", "ipython", "tmp", "cache"))
            path = os.environ.get("PATH", "/usr/bin:/bin")
        else:
            home, ipython, tmp, cache = "/tmp/home", "/tmp/ipython", "/tmp", "/tmp/cache"
            path = f"{os.path.dirname(sys.executable)}:/usr/local/bin:/usr/bin:/bin"
        env = {
            "PATH": path,
            "LANG": "C.UTF-8",
            "HOME": home,
            "USER": "student",
            "LOGNAME": "student",
            "IPYTHONDIR": ipython,
            "TMPDIR": tmp,
            "MPLCONFIGDIR": os.path.join(tmp, "matplotlib"),
            "OPCC_EDU_CACHE": cache,
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
        from .isolation import CACHE_MOUNT, processes_of

        read_end, write_end = os.pipe()
        counted = self.uid if self.uid is not None else os.getuid()
        user_processes = len(processes_of(counted)) + self.limits.processes
        request = {**request, "workdir": str(self.work)}
        if self.root is None and _fits(Path(os.path.realpath(cache_root())), self.limits.tmp_mb * 2**20 // 4):
            request["cache_source"] = CACHE_MOUNT  # the runner copies it into its /tmp
        with _spawn_lock:
            try:
                process = self._popen(mode, write_end, user_processes)
            except BaseException:
                os.close(read_end)
                raise
            finally:
                os.close(write_end)
            with _lock:
                _launched.add(process.pid)
        child = Child(process, read_end)
        self._children.append(child)
        child.send(request)
        return child

    def command(self, mode: str, write_end: int) -> list[str]:
        """The command line of one runner process."""
        runner = [sys.executable, "-I", str(_RUNNER), mode, str(write_end)]
        if self.backend == "unsafe-local":
            return runner
        from .isolation import bwrap_arguments

        drop = ["--uid", str(self.uid)] if self.uid is not None else []
        return [*bwrap_arguments(self.limits.tmp_mb * 2**20, self.as_root), "--", *runner, *drop]

    def _popen(self, mode: str, write_end: int, user_processes: int) -> subprocess.Popen:
        return subprocess.Popen(
            self.command(mode, write_end),
            cwd=self.work if self.root is not None else "/",
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
        from .isolation import processes_of, release_uid

        for child in self._children:
            if child.process.returncode is None or child.process.pid in _launched:
                self.stop(child)
        kill_escaped()
        if self.uid is not None:  # nothing may outlive the sandbox under its uid
            for _ in range(50):
                left = set(processes_of(self.uid))
                if not left:
                    release_uid(self.uid)
                    break
                _kill_and_reap(left)
                time.sleep(0.02)
            self.uid = None
        if self.root is None:
            return
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
