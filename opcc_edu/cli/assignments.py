"""``opcc-edu assignments``: build the classroom assignments and grade a batch of submissions."""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from .options import (
    UsageError,
    add_command,
    add_out,
    check_output_dir,
    echo_stderr,
    non_negative_float,
    positive_int,
    progress_of,
)


def register(parser: argparse.ArgumentParser) -> None:
    """Add the ``build`` and ``grade`` subcommands of ``opcc-edu assignments``."""
    from ..classroom.teaching import ASSIGNMENTS, DEFAULT_TIMEOUT

    parser.description = (
        "Autograded assignments (Otter-Grader). 'build' writes, per assignment, student/ (the notebook to "
        "hand out, without solutions, and its public tests) and autograder/ (solutions, every test and the "
        "autograder zip; keep it private). 'grade' grades submitted notebooks and writes one CSV row per "
        "student and question."
    )
    sub = parser.add_subparsers(dest="action", metavar="ACTION", title="actions")
    sub.required = True
    names = list(ASSIGNMENTS)

    build = add_command(
        sub,
        "build",
        "write student/ and autograder/ for every assignment (otter assign)",
        "Run otter assign on each source notebook; write OUT/NAME/student/ (to hand out) and "
        "OUT/NAME/autograder/ (private: solutions, hidden tests, NAME-autograder.zip).",
    )
    add_out(build, "assignments-build", "output directory (default: assignments-build)")
    build.add_argument(
        "--assignment",
        dest="names",
        action="append",
        choices=names,
        metavar="NAME",
        help=f"build only this assignment (repeatable), of {', '.join(names)}",
    )
    build.add_argument("--source", metavar="DIR", default=None, help="folder of the source notebooks")
    build.add_argument(
        "--run-tests",
        action="store_true",
        help="also execute each solution notebook against every test while building (slower)",
    )
    build.set_defaults(handler=_build)

    grade = add_command(
        sub,
        "grade",
        "grade submitted notebooks into a CSV (a bwrap sandbox per submission, or --docker)",
        "Run each submission in its own bubblewrap sandbox (own PID and network namespaces, read-only "
        "system, private /tmp, a uid that is not yours, limits; nothing of your files mounted; every "
        "process killed at the end), then check its functions and values outside the sandbox against "
        "the expected values stored in the autograder. Without a working bwrap the command stops and "
        "says how to get one (or use --docker, or --unsafe-local). One CSV row per student and question "
        "(student, assignment, question, points, max_points, reason, review, sha256, submission). A "
        "submission that is not a notebook, fails or exceeds --timeout scores 0 on the questions it "
        "affects, with the reason; 'review' flags code a teacher should read.",
    )
    grade.add_argument("--assignment", required=True, choices=names, metavar="NAME", help=f"one of {', '.join(names)}")
    grade.add_argument("submissions", nargs="+", metavar="SUBMISSION", help="the students' .ipynb files")
    grade.add_argument("--out", metavar="CSV", default="grades.csv", help="the grade sheet (default: grades.csv)")
    grade.add_argument(
        "--autograder",
        metavar="ZIP",
        default=None,
        help="the autograder zip from 'build' (default: build it from the source notebook first)",
    )
    grade.add_argument("--source", metavar="DIR", default=None, help="folder of the source notebooks")
    grade.add_argument(
        "--timeout",
        type=non_negative_float,
        metavar="SECONDS",
        default=DEFAULT_TIMEOUT,
        help=f"time limit per submission; past it the submission scores 0 (default {DEFAULT_TIMEOUT:g})",
    )
    grade.add_argument(
        "--jobs",
        type=positive_int,
        metavar="N",
        default=1,
        help="submissions graded at the same time, one kernel each (default 1)",
    )
    grade.add_argument(
        "--memory-mb",
        type=positive_int,
        metavar="MB",
        default=None,
        help="address space of each of a submission's processes (default 4096)",
    )
    grade.add_argument(
        "--processes",
        type=positive_int,
        metavar="N",
        default=None,
        help="processes and threads one submission may run (default 128)",
    )
    isolation = grade.add_mutually_exclusive_group()
    isolation.add_argument(
        "--docker",
        action="store_true",
        help="hand the batch to otter grade: one container per submission, no network, the same --timeout",
    )
    isolation.add_argument(
        "--unsafe-local",
        action="store_true",
        help="no sandbox: run each notebook as your user (it could read and change your files); every row "
        "of the sheet says so. Only on a machine and account you can afford to expose",
    )
    grade.set_defaults(handler=_grade)


def _build(args: argparse.Namespace) -> int:
    from ..classroom.teaching import build_assignments, require_otter

    require_otter()
    out = check_output_dir(args.out)

    def report(built) -> None:
        print(f"{built.name}: hand out {built.student_notebook.parent}/, grade with {built.autograder_zip}")

    build_assignments(out, args.names, args.source, args.run_tests, on_built=report)
    echo_stderr(f"written to {out}/ (keep each autograder/ folder private: it holds the solutions)")
    return 0


def _grade(args: argparse.Namespace) -> int:
    from ..classroom.grading import DockerUnavailable, grade_with_docker, require_docker
    from ..classroom.isolation import SandboxUnavailable, require_backend
    from ..classroom.sandbox import Limits
    from ..classroom.sheet import write_grades
    from ..classroom.teaching import build_assignment, grade_submissions, require_otter

    require_otter()
    if args.docker:
        try:
            require_docker()
        except DockerUnavailable as exc:
            raise UsageError(str(exc)) from None
    if args.timeout <= 0:
        raise UsageError(f"--timeout must be a number of seconds > 0, got {args.timeout:g}")
    backend = "unsafe-local" if args.unsafe_local else "bwrap"
    if args.docker and (args.memory_mb or args.processes):
        raise UsageError("--memory-mb and --processes apply to local grading, not to --docker")
    limits = Limits(
        memory_mb=args.memory_mb or Limits.memory_mb,
        processes=args.processes or Limits.processes,
    )
    if not args.docker:
        try:
            described = require_backend(backend)
        except SandboxUnavailable as exc:
            raise UsageError(str(exc)) from None
    out = Path(args.out)
    if out.is_dir():
        raise UsageError(f"--out {out} is a directory; give the path of the CSV file to write")
    check_output_dir(out.parent if str(out.parent) else Path("."), "--out")
    if args.autograder is not None and not Path(args.autograder).is_file():
        raise UsageError(f"--autograder {args.autograder}: no such file (build it with 'opcc-edu assignments build')")
    verbose = progress_of(args)
    if not args.docker:
        echo_stderr(f"{'warning: ' if args.unsafe_local else ''}{described}")

    def report(rows) -> None:
        if verbose:
            got, total = sum(r.points for r in rows), sum(r.max_points for r in rows)
            reasons = {r.reason for r in rows}
            note = f"  ({reasons.pop()})" if len(reasons) == 1 and got == 0 else ""
            echo_stderr(f"{rows[0].student}: {got:g}/{total:g}{note}")

    with tempfile.TemporaryDirectory(prefix="opcc-autograder-") as workdir:
        zip_path = args.autograder
        if zip_path is None:
            zip_path = build_assignment(args.assignment, workdir, args.source).autograder_zip
        if args.docker:
            rows = grade_with_docker(args.assignment, args.submissions, zip_path, args.timeout, args.jobs)
            write_grades(rows, out)
        else:
            try:
                rows = grade_submissions(
                    args.assignment,
                    args.submissions,
                    zip_path,
                    args.timeout,
                    out_csv=out,
                    on_graded=report,
                    jobs=args.jobs,
                    on_warning=lambda message: echo_stderr(f"warning: {message}"),
                    limits=limits,
                    backend=backend,
                )
            except SandboxUnavailable as exc:
                raise UsageError(str(exc)) from None
    students = len({r.submission for r in rows})
    flagged = len({r.submission for r in rows if r.review})
    note = f"; {flagged} flagged for review (column 'review')" if flagged else ""
    echo_stderr(f"{students} submission(s), {len(rows)} rows written to {out}{note}")
    return 0
