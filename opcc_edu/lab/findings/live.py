"""A live run of an ablation in the active profile, in a temporary directory that is cleaned up."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import time
from pathlib import Path

from ...config import Profile, get_profile
from ...names import METRICS, TIE_FAIR_METRICS
from .. import experiments as ex
from .results import AblationResults, display_markdown, show_tie_fair
from .rule import with_runs
from .verdicts import level_titles

_LIVE_PREFIX = "opcc_live_"
_OWNER_FILE = "owner.pid"


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, but another user's
        return True
    return True


def remove_stale_live_directories(temp_dir: str | os.PathLike | None = None) -> list[Path]:
    """Remove the live-run directories of processes that no longer run; returns what was removed.

    A live run writes into a private temporary directory that records its owner's process id.
    The owner removes it when it exits normally (``atexit``). A kernel that was killed cannot,
    so every later live run sweeps up after it: only directories of this user whose owner is gone.
    """
    removed = []
    for root in Path(temp_dir or tempfile.gettempdir()).glob(_LIVE_PREFIX + "*"):
        try:
            if root.stat().st_uid != os.getuid() or not root.is_dir():
                continue
            pid = int((root / _OWNER_FILE).read_text())
        except (OSError, ValueError):
            continue  # not ours, not finished being created, or not a live directory
        if not _process_alive(pid):
            shutil.rmtree(root, ignore_errors=True)
            removed.append(root)
    return removed


def live_directory(temp_dir: str | os.PathLike | None = None) -> Path:
    """A new private temporary directory for a live run, removed when this process exits.

    The results are read from it until then (e.g. by :func:`draw_rccs`). Directories left by
    killed processes are removed first (:func:`remove_stale_live_directories`), so the temporary
    folder of a classroom server does not fill up over a term.
    """
    remove_stale_live_directories(temp_dir)
    root = Path(tempfile.mkdtemp(prefix=_LIVE_PREFIX, dir=temp_dir))
    (root / _OWNER_FILE).write_text(str(os.getpid()))
    atexit.register(shutil.rmtree, root, True)
    return root


def run_live(
    ablation: str | ex.Ablation,
    profile: Profile | str | None = None,
    seeds: int = 1,
    directory: str | Path | None = None,
) -> AblationResults:
    """Run an ablation now (ensembles come from the cache when trained before) and show its table.

    Args:
        ablation: registry key or :class:`~opcc_edu.lab.experiments.Ablation`.
        profile: the profile (default: the active one).
        seeds: seeds per run.
        directory: where results go (default: a new temporary directory, removed at exit).

    Returns:
        The results, named ``"live"``.
    """
    ablation = ex.get_ablation(ablation)
    profile = get_profile(profile)
    out = live_directory() / profile.name if directory is None else Path(directory)
    grid = ex.plan_ablation(ablation, profile, seeds=seeds)
    start = time.perf_counter()
    results = ex.run_grid(grid, out, progress=False, label=ablation.name)
    seconds = time.perf_counter() - start
    table = with_runs(ex.aggregate(results, ablation, grid=grid), results, ablation, grid)
    print(f"{len(grid)} run(s) in {seconds:.1f} s")
    comparison = ex.compare_with_paper(table, ablation)
    display_markdown(ex.format_table(comparison, titles=level_titles(ablation)))
    tie_fair = with_runs(ex.aggregate(results, ablation, metrics=TIE_FAIR_METRICS, grid=grid), results, ablation, grid)
    live = AblationResults(
        "live", ablation, out, results, table, comparison, grid=grid, seconds=seconds, tie_fair=tie_fair
    )
    show_tie_fair(live)
    return live


def live_run_problems(live: AblationResults) -> list[str]:
    """The facts every live run must satisfy that it violates (empty when all hold).

    Every metric lies in [0, 1]; CR_K is at least 0.2 (the zero-coverage point and full coverage
    fill two of ten bins); every tie-fair metric is computed (not NaN), the selective gain at
    most 1 and the others in [0, 1]; every level has a row; the samples of a cell are seeds x datasets
    (seeds only when the level is the dataset).
    """
    if live.grid is None:
        raise ValueError("live must come from run_live (it has no grid)")
    problems = []
    if live.table.empty or live.table["level"].nunique() < 1:
        problems.append("no level was aggregated")
    outside = [m for m in METRICS if not live.results[m].between(0, 1).all()]
    if outside:
        problems.append(f"metrics outside [0, 1]: {', '.join(outside)}")
    present = [m for m in TIE_FAIR_METRICS if m in live.results.columns]  # all of them in a real run
    tie_fair_outside = [
        m
        for m in present
        if not (live.results[m] <= 1 + 1e-12).all() or (m != "selective_gain" and not (live.results[m] >= 0).all())
    ]
    if tie_fair_outside:
        problems.append(f"tie-fair metrics missing or out of range: {', '.join(tie_fair_outside)}")
    if not (live.results["cr_k"] >= 0.2 - 1e-12).all():
        problems.append("CR_K below 0.2: the zero-coverage point and full coverage fill two of ten bins")
    for env, part in live.table.groupby("environment"):
        datasets = 1 if live.ablation.factor == "dataset" else len(live.grid.datasets[env])
        expected = len(live.grid.seeds) * datasets
        if not (part["n_samples"] == expected).all():
            problems.append(f"{env}: cells must hold {expected} samples (seeds x datasets)")
    return problems
