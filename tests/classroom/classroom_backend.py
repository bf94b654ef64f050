"""Which isolation backend the classroom tests grade with (imported by their conftest and tests).

Local grading runs in a bubblewrap sandbox by default. Where ``bwrap`` cannot start one (not
installed, or user namespaces disabled) the grading tests fall back to ``--unsafe-local`` and
the sandbox's own tests are skipped, unless ``OPCC_EDU_REQUIRE_SANDBOX=1`` (set by CI after
installing bubblewrap): then they fail, with the reason.
"""

from __future__ import annotations

import os

import pytest

REQUIRE_SANDBOX = os.environ.get("OPCC_EDU_REQUIRE_SANDBOX", "") not in ("", "0")


def sandbox_problem() -> str | None:
    """Why a bwrap sandbox cannot start here (None: it can)."""
    from opcc_edu.classroom.isolation import bwrap_problem

    return bwrap_problem()


def grading_backend() -> str:
    """``"bwrap"`` where a sandbox starts; else ``"unsafe-local"``, or a failure when one is required."""
    problem = sandbox_problem()
    if problem is None:
        return "bwrap"
    if REQUIRE_SANDBOX:
        pytest.fail(f"OPCC_EDU_REQUIRE_SANDBOX is set and {problem}")
    return "unsafe-local"


def require_sandbox() -> str:
    """``"bwrap"``; else skip the test (fail it with OPCC_EDU_REQUIRE_SANDBOX)."""
    problem = sandbox_problem()
    if problem is not None:
        if REQUIRE_SANDBOX:
            pytest.fail(f"OPCC_EDU_REQUIRE_SANDBOX is set and {problem}")
        pytest.skip(f"no bwrap sandbox here: {problem}")
    return "bwrap"
