"""Test-session setup shared by unit tests and nbval notebook runs.

The book's chapters run in the ``tiny`` profile under CI; notebook kernels inherit this
process's environment, so the profile is set before any kernel starts. MuJoCo writes
MUJOCO_LOG.TXT into the working directory on errors; keep caches out of the user's home.

The hidden checks run here (``OPCC_EDU_CHECKS=1``): every chapter under nbval asserts what it
teaches. CI builds the book with them off, as a reader's kernel runs it, so that each chapter is
executed once in each mode.

The tests marked ``cluster`` run first. Ray starts its processes with a fork of this one (its
launcher runs code between fork and exec), and late in the suite this process maps far more
address space than it uses; a kernel that accounts private mappings at fork may then refuse it
(``OSError: [Errno 12] Cannot allocate memory``) on a machine with less memory than that. The
address space at the start of each cluster test is printed at the end of the session.
"""

import os
import tempfile

import pytest

os.environ.setdefault("OPCC_EDU_PROFILE", "tiny")
os.environ.setdefault("MPLBACKEND", "Agg")
# Hidden check cells run in the test suite; a reader's notebook skips them (opcc_edu.display).
os.environ.setdefault("OPCC_EDU_CHECKS", "1")
os.environ.setdefault("OPCC_EDU_CACHE", os.path.join(tempfile.gettempdir(), "opcc_edu_test_cache"))

CLUSTER_STARTS = pytest.StashKey[list]()


def address_space() -> tuple[int, int]:
    """This process's mapped address space and resident memory, in bytes (VmSize and VmRSS of
    ``/proc/self/status``; zeros where there is no such file)."""
    sizes = {"VmSize": 0, "VmRSS": 0}
    try:
        with open("/proc/self/status") as status:
            for line in status:
                key, _, value = line.partition(":")
                if key in sizes:
                    sizes[key] = int(value.split()[0]) * 1024
    except OSError:
        pass
    return sizes["VmSize"], sizes["VmRSS"]


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    """The ``cluster`` tests first, in their own order, while this process is still small."""
    cluster = [item for item in items if item.get_closest_marker("cluster") is not None]
    if cluster:
        items[:] = cluster + [item for item in items if item.get_closest_marker("cluster") is None]


def pytest_runtest_setup(item):
    if item.get_closest_marker("cluster") is not None:
        item.config.stash.setdefault(CLUSTER_STARTS, []).append((item.name, *address_space()))


def pytest_terminal_summary(terminalreporter, config):
    for name, mapped, resident in config.stash.get(CLUSTER_STARTS, []):
        terminalreporter.write_line(
            f"{name} started in a process of {mapped / 2**30:.1f} GiB address space "
            f"({resident / 2**30:.1f} GiB resident)"
        )
