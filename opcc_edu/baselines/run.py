"""The main job end to end: train or load an ensemble, answer the queries, report, save."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from ..names import BASELINES, DEFAULT_QUERY_RECIPE
from ..utils import check_choice
from .answers import Answers
from .config import EnsembleConfig
from .pipeline import answer_queries, heuristic_as_answers
from .report import format_metrics, format_predictor_metrics
from .task import resolve_task

if TYPE_CHECKING:
    import torch

    from .fqe import FQEConfig


def run_end_to_end(
    env_name: str | None = None,
    dataset_name: str | None = None,
    out: str | Path = "runs",
    config: EnsembleConfig | None = None,
    device: torch.device | str | None = None,
    cache: bool = True,
    progress: bool = True,
    echo: Callable[[str], object] = print,
    queries: str = DEFAULT_QUERY_RECIPE,
    baseline: str = "ensemble",
    fqe_config: FQEConfig | None = None,
) -> tuple[Answers, dict[str, Path]]:
    """Train or load the ensemble, answer the environment's query set, report and save. (A recipe, read top to bottom.)

    Writes ``<out>/<env>/<dataset>/results.json`` (setup, timings, every metric, the value
    estimates' own metrics and the calibration of the confidences and intervals),
    ``results.npz`` (member values, predictions, confidences) and ``rcc.png`` (risk-coverage
    curves of EV, PCI and U-PCI). With ``baseline="heuristic"`` nothing is trained: the
    no-model rule answers, and its files go to ``<out>/<env>/heuristic/``. With
    ``baseline="fqe"`` bootstrapped fitted Q evaluation learns the query policies' values from
    the same dataset (:mod:`opcc_edu.baselines.fqe`, never cached), and its files go to
    ``<out>/<env>/<dataset>/fqe/``.

    Args:
        env_name: environment (None: :data:`opcc_edu.envs.DEFAULT_ENV`).
        dataset_name: dataset (None: the environment's default).
        out: output directory.
        config: the baseline (None: :meth:`EnsembleConfig.from_profile`).
        device: torch device.
        cache: use the ensemble cache.
        progress: show progress bars.
        echo: where report lines go (``print`` by default).
        queries: the recipe of the shipped query set answered (``"paper"``, the default, or
            ``"hard"``).
        baseline: ``"ensemble"`` (the paper's), ``"heuristic"`` (no model, no data) or ``"fqe"``
            (model-free).
        fqe_config: the FQE baseline's sizes and seed (None: :meth:`FQEConfig.from_profile`
            with ``config``'s seed).

    Returns:
        ``(answers, paths)`` with keys ``json``, ``npz`` and ``plot``.
    """
    from matplotlib.figure import Figure  # no pyplot: works headless, leaves no open figure

    check_choice(baseline, BASELINES, "baseline")
    # Resolved once here (unknown names fail, listing the valid ones); the objects go down.
    task = resolve_task(env_name, dataset_name, queries)
    env_name, dataset_name, profile = task.spec.name, task.dataset.name, task.profile
    config = EnsembleConfig.from_profile(profile) if config is None else config
    start = time.perf_counter()
    if baseline == "heuristic":
        from .heuristic import heuristic_answers

        query_set = task.queries()
        echo(f"opcc-edu run: {env_name}, {queries} query set, no-model heuristic, profile {profile.name}")
        rule = heuristic_answers(query_set)
        echo(f"  rule: {rule.rule}")
        answers = heuristic_as_answers(query_set, rule=rule)
        echo(f"  {len(answers.target)} queries answered in {answers.answer_seconds:.2f} s (nothing trained)")
        directory = Path(out) / env_name / "heuristic"
    elif baseline == "fqe":
        from .fqe import FQEConfig, answer_queries_fqe

        fqe_config = FQEConfig.from_profile(profile, seed=config.seed) if fqe_config is None else fqe_config
        echo(
            f"opcc-edu run: {env_name} / {dataset_name}, {queries} query set, fitted Q evaluation, "
            f"profile {profile.name}"
        )
        echo(
            f"  FQE: {fqe_config.ensemble_size} bootstrap members per policy, {list(fqe_config.hidden_sizes)}, "
            f"{fqe_config.train_steps} steps, seed {fqe_config.seed}"
        )
        answers = answer_queries_fqe(
            task.spec,
            task.dataset,
            fqe_config,
            queries=task.queries(),
            dataset_size=task.dataset_size,
            device=device,
            progress=progress,
        )
        echo(
            f"  trained in {answers.train_seconds:.1f} s; "
            f"{len(answers.target)} queries answered in {answers.answer_seconds:.1f} s"
        )
        directory = Path(out) / env_name / dataset_name / "fqe"
    else:
        echo(f"opcc-edu run: {env_name} / {dataset_name}, {queries} query set, profile {profile.name}")
        echo(
            f"  ensemble: {config.ensemble_size} x {config.model_type.upper()} {list(config.hidden_sizes)}, "
            f"{'stochastic' if config.stochastic else 'deterministic'}, prior scale {config.prior_scale:g}, "
            f"{config.train_steps} steps, seed {config.seed}"
            + (f", {config.reward} rewards" if config.reward != "learned" else "")
        )
        answers = answer_queries(
            task.spec,
            task.dataset,
            config,
            queries=task.queries(),
            dataset_size=task.dataset_size,
            runs=profile.mc_runs,
            device=device,
            cache=cache,
            progress=progress,
        )
        where = "loaded from the cache" if answers.cache_hit else f"trained in {answers.train_seconds:.1f} s"
        echo(f"  ensemble {where}; {len(answers.target)} queries answered in {answers.answer_seconds:.1f} s")
        directory = Path(out) / env_name / dataset_name
    if queries != DEFAULT_QUERY_RECIPE:  # results of another query set never overwrite the benchmark's
        directory = directory / f"{queries}-queries"
    echo("")
    echo(format_metrics(answers))
    predictor = format_predictor_metrics(answers)
    if predictor:
        echo("")
        echo("  the value estimates alone (DOPE's metrics of the member means):")
        echo(predictor)
    paths = answers.save(directory, stem="results")
    fig = Figure(figsize=(5.5, 4.2), layout="tight")
    answers.plot_risk_coverage(ax=fig.subplots())
    paths["plot"] = directory / "rcc.png"
    fig.savefig(paths["plot"], dpi=120)
    echo("")
    echo(f"  wrote {paths['json']}, {paths['npz']} and {paths['plot']} ({time.perf_counter() - start:.1f} s in total)")
    return answers, paths
