"""Fixtures of the classroom tests: a bwrap sandbox (or a skip), and one assignment built once."""

from __future__ import annotations

import pytest
from classroom_backend import require_sandbox


@pytest.fixture()
def sandbox():
    """Skip (or fail, with OPCC_EDU_REQUIRE_SANDBOX) where no bwrap sandbox starts."""
    return require_sandbox()


@pytest.fixture(scope="session")
def built_risk(tmp_path_factory):
    """The risk-coverage assignment, built once for the session (an ``otter assign`` run)."""
    pytest.importorskip("otter", reason="the 'teach' extra (otter-grader) is not installed")
    from opcc_edu.classroom.teaching import build_assignment

    return build_assignment("risk_coverage_metrics", tmp_path_factory.mktemp("risk_autograder"))
