"""Where a student's code runs: a bubblewrap sandbox (the default), or, only when asked, unisolated.

One backend is chosen per batch (:func:`require_backend`):

* ``bwrap`` (`bubblewrap <https://github.com/containers/bubblewrap>`_): each runner process gets
  new PID, network, IPC, UTS (and, where possible, cgroup) namespaces; a file system that holds
  only the system (``/usr``, ``/etc``, ...), the Python environment and the package's own folder,
  read-only, plus a private ``/tmp`` (tmpfs of bounded size) that holds its home and working
  folder; a uid that is not the grader's: when the grader runs as root, a uid of its own per
  sandbox (:data:`SANDBOX_UID_BASE` and up, which no account uses, so that the process limit
  binds and counts that sandbox alone), dropped by the runner before it reads anything; else
  ``65534`` in a user namespace. It dies with the grader (``--die-with-parent``), runs in its
  own session (``--new-session``), and all capabilities are gone before the student's code runs.
  Nothing of the grader's files, the autograder zip, the other submissions or the sheet is
  mounted: the expected values never enter it.
* ``unsafe-local``: the former design (private folders, limits, process-tree kills) as the
  grader's user; every row of the sheet says so (:data:`UNSAFE_NOTE`).

Containers (``--docker``) are :mod:`opcc_edu.classroom.containers`.

Why bubblewrap rather than hand-written namespaces (``unshare(2)`` and ``mount(2)`` through
ctypes) or a container runtime: setting up mounts, a PID 1 that reaps and dies with its parent,
and user-namespace maps correctly is what bubblewrap does in a small, audited setuid-free
program that distributions ship (``apt-get install bubblewrap``); a container runtime needs a
daemon and an image, which ``--docker`` already covers.
"""

from __future__ import annotations

import contextlib
import functools
import os
import pwd
import shutil
import stat
import subprocess
import sys
import sysconfig
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path

from ..utils import check_choice

#: The isolation backends of local grading (``--docker`` is separate: it hands the batch to Otter).
BACKENDS: tuple[str, ...] = ("bwrap", "unsafe-local")

#: Added to the review column of every row graded without isolation.
UNSAFE_NOTE = "UNISOLATED: graded with --unsafe-local (the notebook ran as the grader's user)"

#: What to do when no sandbox can start (the end of the one-line error).
REMEDY = (
    "install bubblewrap ('apt-get install bubblewrap', and allow user namespaces if you are not root), "
    "or grade with --docker, or with --unsafe-local on a machine and account you can afford to expose"
)

#: The first uid given to a sandbox when the grader runs as root (one uid per live sandbox).
SANDBOX_UID_BASE = 1_900_000_000

#: The uid (and gid) a sandbox sees itself as when the grader is not root (a user namespace maps it
#: to the grader's uid).
NOBODY = 65534

#: Where the grader's package cache is mounted read-only (the runner copies it into its /tmp).
CACHE_MOUNT = "/opcc-cache"

_ROOT_LINKS = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")
_SYSTEM = ("/usr", "/etc")


class SandboxUnavailable(RuntimeError):
    """No sandbox of the chosen backend can start here (the message is one line with the remedy)."""


def check_backend(backend: str) -> str:
    """``backend`` if it is one of :data:`BACKENDS`; else ValueError naming the choices."""
    return check_choice(backend, BACKENDS, "backend")


def _covered(path: Path, roots: Iterable[Path]) -> bool:
    return any(path == root or root in path.parents for root in roots)


def python_folders() -> list[Path]:
    """Folders (real paths) the runner needs besides ``/usr`` and ``/etc``: the Python installation,
    the virtual environment and the package's own folder (never the folder around it)."""
    import opcc_edu

    candidates = [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix]
    candidates += [sysconfig.get_paths()[key] for key in ("stdlib", "platstdlib", "purelib", "platlib")]
    candidates += [os.path.dirname(os.path.realpath(sys.executable)), os.path.dirname(opcc_edu.__file__)]
    folders: list[Path] = []
    system = [Path(p) for p in _SYSTEM]
    for candidate in sorted({Path(os.path.realpath(c)) for c in candidates if c}, key=lambda p: len(p.parts)):
        if candidate == Path("/") or not candidate.is_dir() or _covered(candidate, [*system, *folders]):
            continue
        folders.append(candidate)
    return folders


def exposed(paths: Iterable[str | os.PathLike]) -> list[str]:
    """Those of ``paths`` that a sandbox would see (inside a folder it mounts)."""
    roots = [*(Path(p) for p in _SYSTEM), *python_folders()]
    cache = _cache_folder()
    if cache is not None:
        roots.append(cache)
    seen = []
    for path in paths:  # the folder resolved, the name not (a symbolic link is refused, not followed)
        absolute = os.path.abspath(path)
        where = Path(os.path.realpath(os.path.dirname(absolute))) / os.path.basename(absolute)
        if _covered(where, roots):
            seen.append(str(path))
    return seen


def _cache_folder() -> Path | None:
    from ..utils import cache_root

    root = Path(os.path.realpath(cache_root()))
    return root if root.is_dir() else None


def _parents(path: Path) -> list[Path]:
    return [p for p in reversed(path.parents) if p != Path("/")]


def bwrap_arguments(tmp_bytes: int, as_root: bool) -> list[str]:
    """The ``bwrap`` options of one sandbox (everything before ``--`` and the command)."""
    args = ["bwrap"]
    for name in _ROOT_LINKS:
        path = Path("/") / name
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), str(path)]
        elif path.is_dir():
            args += ["--ro-bind", str(path), str(path)]
    for folder in _SYSTEM:
        args += ["--ro-bind", folder, folder]
    # the private /tmp first: a Python or a package that lives under /tmp (a checkout there) is
    # mounted on top of it below, where a later tmpfs would hide it
    args += ["--perms", "1777", "--size", str(int(tmp_bytes)), "--tmpfs", "/tmp"]
    made: set[Path] = {Path(p) for p in _SYSTEM} | {Path("/tmp")}
    mounts = [(folder, folder) for folder in python_folders()]
    cache = _cache_folder()
    if cache is not None:
        mounts.append((cache, Path(CACHE_MOUNT)))
    for source, target in mounts:
        for parent in _parents(target):
            if parent not in made and not _covered(parent, [Path(p) for p in _SYSTEM]):
                args += ["--perms", "0755", "--dir", str(parent)]  # bwrap would make them 0700
                made.add(parent)
        args += ["--ro-bind", str(source), str(target)]
    args += ["--proc", "/proc", "--dev", "/dev"]
    args += ["--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
    args += ["--hostname", "sandbox", "--die-with-parent", "--new-session", "--chdir", "/tmp"]
    if as_root:  # the runner changes to the sandbox's uid with these two, then holds no capability
        args += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
    else:
        args += ["--unshare-user", "--uid", str(NOBODY), "--gid", str(NOBODY)]
    return args


# --------------------------------------------------------------------------------------------
# Uids of sandboxes (grader running as root)
# --------------------------------------------------------------------------------------------
_uid_lock = threading.Lock()
_held: dict[int, int] = {}  # uid -> the descriptor of its lock file (closing it releases the uid)


def processes_of(uid: int) -> list[int]:
    """Pids of the processes whose real uid is ``uid``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status", encoding="utf-8", errors="replace") as handle:
                for line in handle:
                    if line.startswith("Uid:"):
                        if int(line.split()[1]) == uid:
                            found.append(int(entry))
                        break
        except (OSError, ValueError, IndexError):
            continue
    return found


def uid_lock_folder() -> Path:
    """Where sandbox uids are reserved across grading processes (one lock file per uid)."""
    base = Path("/run/lock") if os.path.isdir("/run/lock") else Path("/var/tmp")
    folder = base / "opcc-edu-sandbox-uids"
    with contextlib.suppress(FileExistsError):
        folder.mkdir(mode=0o700)
    info = folder.lstat()
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o022:
        raise SandboxUnavailable(f"{folder} is not a private folder of this user: remove it and grade again")
    return folder


def acquire_uid() -> int:
    """A uid for one sandbox, held until :func:`release_uid`: no account has it, no process runs
    as it, and no other sandbox (of this or another grading process: a lock file) holds it."""
    import fcntl

    folder = uid_lock_folder()
    with _uid_lock:
        for uid in range(SANDBOX_UID_BASE, SANDBOX_UID_BASE + 4096):
            if uid in _held:
                continue
            with contextlib.suppress(KeyError):
                pwd.getpwuid(uid)
                continue
            fd = os.open(folder / str(uid), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
                continue
            if processes_of(uid):  # left by a grader that died: not ours to reuse
                os.close(fd)
                continue
            _held[uid] = fd
            return uid
    raise SandboxUnavailable(f"no free sandbox uid from {SANDBOX_UID_BASE}: stop the leftover sandbox processes")


def release_uid(uid: int) -> None:
    """Give back a uid from :func:`acquire_uid` (once none of its processes is left)."""
    with _uid_lock:
        fd = _held.pop(uid, None)
    if fd is not None:
        os.close(fd)


# --------------------------------------------------------------------------------------------
# Can a sandbox start here?
# --------------------------------------------------------------------------------------------
def _probe_bwrap() -> str | None:
    """None when a bwrap sandbox starts and isolates (non-root uid, own PID namespace, no
    capability); else why not. Runs the runner's ``probe`` mode in the sandbox every grade uses."""
    import json

    if shutil.which("bwrap") is None:
        return "the bwrap command was not found"
    as_root = os.geteuid() == 0
    try:
        uid = acquire_uid() if as_root else None
    except SandboxUnavailable as exc:
        return str(exc)
    read_end, write_end = os.pipe()
    runner = [sys.executable, "-I", str(Path(__file__).with_name("runner.py")), "probe", str(write_end)]
    command = [*bwrap_arguments(64 * 2**20, as_root), "--", *runner, *(["--uid", str(uid)] if uid else [])]
    try:
        with os.fdopen(read_end, "rb") as channel:
            try:
                done = subprocess.run(
                    command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                    pass_fds=(write_end,), timeout=60, check=False, env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"},
                )  # fmt: skip
            finally:
                os.close(write_end)
            answer = channel.read(65536).decode("utf-8", "replace").strip()
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bwrap could not start a sandbox ({type(exc).__name__}: {exc})"
    finally:
        if uid is not None:
            release_uid(uid)
    try:
        probe = json.loads(answer.splitlines()[0])["probe"]
    except (ValueError, KeyError, IndexError, TypeError):
        last = (done.stderr.decode("utf-8", "replace").strip().splitlines() or [f"exit status {done.returncode}"])[-1]
        return f"bwrap could not start a sandbox ({last[:200]})"
    if probe.get("uid") == 0 or probe.get("euid") == 0:
        return "the sandbox still ran as root"
    if probe.get("pid", 0) > 10:
        return "the sandbox did not get its own PID namespace"
    if int(str(probe.get("capabilities", "0")), 16) != 0:
        return "the sandbox kept capabilities"
    return None


@functools.lru_cache(maxsize=1)
def bwrap_problem() -> str | None:
    """Why bwrap cannot sandbox here (cached for the process), or None when it can."""
    return _probe_bwrap()


def bwrap_version() -> str:
    try:
        out = subprocess.run(["bwrap", "--version"], capture_output=True, text=True, timeout=10, check=False).stdout
    except (OSError, subprocess.TimeoutExpired):
        return "bwrap"
    return out.strip() or "bwrap"


def require_backend(backend: str) -> str:
    """Check ``backend`` and that it can run here; a one-line description of it.

    Raises:
        ValueError: not one of :data:`BACKENDS`.
        SandboxUnavailable: ``bwrap`` cannot start a sandbox (the message says how to get one).
    """
    check_backend(backend)
    if backend == "unsafe-local":
        return "no isolation (--unsafe-local): each notebook runs as your user and could read or change your files"
    problem = bwrap_problem()
    if problem is not None:
        raise SandboxUnavailable(f"cannot grade in a sandbox: {problem}; {REMEDY}")
    who = "a uid of its own" if os.geteuid() == 0 else f"uid {NOBODY} in a user namespace"
    return f"isolation: {bwrap_version()} (own PID, network and IPC namespaces, read-only system, private /tmp, {who})"


def refuse_exposed(paths: Sequence[str | os.PathLike], backend: str) -> None:
    """Raise :class:`SandboxUnavailable` when a bwrap sandbox would see one of ``paths``."""
    if backend != "bwrap":
        return
    seen = exposed(paths)
    if seen:
        raise SandboxUnavailable(
            f"a sandbox would see {seen[0]} (it lies in the Python environment or a system folder it "
            "mounts read-only): move it elsewhere before grading"
        )
