"""The assignments' catalogue: their names and titles, and facts both the build and the grader read.

Shared by :mod:`opcc_edu.classroom.teaching` (the build) and :mod:`opcc_edu.classroom.grading`,
so neither imports the other.
"""

from __future__ import annotations

import ast

#: The assignments, in teaching order: name (the source notebook's stem) -> title.
ASSIGNMENTS: dict[str, str] = {
    "finite_horizon_values": "Finite-horizon values",
    "risk_coverage_metrics": "Risk-coverage metrics from scratch",
    "ensemble_confidence": "Confidence from an ensemble",
    "design_confidence": "Design a confidence function",
    "mini_ablation": "Mini-research: one ablation",
}

#: Seconds one submission may take to be graded (each assignment runs in well under 5 minutes).
DEFAULT_TIMEOUT = 600.0

#: Member of the autograder zip holding the expected values (written by the build).
EXPECTED_MEMBER = "opcc/expected.json"


def question_order(name: str) -> tuple[int, str]:
    """Sort key of a question name: its number, then the name (``q2`` before ``q10``)."""
    digits = "".join(ch for ch in name if ch.isdigit())
    return (int(digits) if digits else 0, name)


def declared_constants(source: str) -> dict[str, object]:
    """The module-level ``NAME = <literal>`` assignments of a cell's source, evaluated as literals."""
    constants = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                constants[node.targets[0].id] = ast.literal_eval(node.value)
            except ValueError:
                continue
    return constants
