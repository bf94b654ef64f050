"""Names resolved once at the boundary: :func:`resolve_task`, and the lookups below it counted."""

from __future__ import annotations

import collections
import contextlib
import sys

import pytest

from opcc_edu import envs
from opcc_edu.baselines import EnsembleConfig, run_end_to_end
from opcc_edu.baselines.task import Task, resolve_task
from opcc_edu.config import get_profile
from opcc_edu.datasets import DatasetRecipe, load_dataset
from opcc_edu.dynamics import build_ensemble


@contextlib.contextmanager
def name_lookups():
    """Count :func:`opcc_edu.envs.get_spec` calls handed a name (not a spec), by calling function."""
    counts: collections.Counter[str] = collections.Counter()
    code = envs.get_spec.__code__

    def profile(frame, event, arg):
        if event == "call" and frame.f_code is code and isinstance(frame.f_locals.get("name"), str):
            counts[frame.f_back.f_code.co_name] += 1

    previous = sys.getprofile()
    sys.setprofile(profile)
    try:
        yield counts
    finally:
        sys.setprofile(previous)


def test_the_counter_counts_names_and_not_specs():
    spec = envs.get_spec("hopper")
    with name_lookups() as counts:
        assert envs.get_spec(spec) is spec
        envs.base_env_name(spec)
    assert sum(counts.values()) == 0
    with name_lookups() as counts:
        envs.base_env_name("hopper")
        envs.termination_fn("hopper")
    assert counts == {"base_env_name": 1, "termination_fn": 1}


def test_the_default_run_looks_the_environment_up_once(tmp_path):
    # The path: the ensemble baseline, the paper's queries, no cached model (cache=False
    # trains and stores nothing); the dataset is read from (or written to) the test cache.
    config = EnsembleConfig.from_profile(ensemble_size=2, train_steps=20)
    load_dataset("maze2d-umaze", progress=False)  # generated outside the counted call if missing
    with name_lookups() as counts:
        answers, _ = run_end_to_end(out=tmp_path, config=config, cache=False, progress=False, echo=lambda line: None)
    assert dict(counts) == {"resolve_task": 1}
    assert answers.env_name == envs.DEFAULT_ENV and len(answers.target) > 0


def test_the_heuristic_and_the_original_sets_look_up_once(tmp_path):
    for kwargs in ({"baseline": "heuristic", "env_name": "hopper"}, {"baseline": "heuristic", "queries": "original"}):
        with name_lookups() as counts:
            run_end_to_end(out=tmp_path, progress=False, echo=lambda line: None, **kwargs)
        assert dict(counts) == {"resolve_task": 1}, kwargs


def test_resolve_task_gives_objects_and_the_original_mazes_their_variant():
    task = resolve_task("maze2d-umaze", "1k", "original", "tiny")
    assert isinstance(task, Task) and isinstance(task.dataset, DatasetRecipe)
    assert task.spec.name == "maze2d-umaze-d4rl-goal" and task.dataset.env_name == task.spec.name
    assert task.profile is get_profile("tiny") and task.dataset_size == 1_000
    queries = task.queries()
    assert queries.spec == task.spec and 0 < len(queries) <= max(task.profile.queries_per_env, 10**6)
    default = resolve_task()
    assert default.spec.name == envs.DEFAULT_ENV and default.recipe == "paper"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"env_name": "no-such-env"}, "unknown environment 'no-such-env'; valid choices: maze2d-open"),
        ({"env_name": "hopper", "dataset_name": "1k"}, "dataset name for hopper"),
        ({"queries": "easy"}, "queries"),
        ({"profile": "huge"}, "huge"),
    ],
)
def test_resolve_task_names_the_bad_argument(kwargs, message):
    with pytest.raises(ValueError, match=message):
        resolve_task(**kwargs)


def test_a_model_takes_the_environment_it_is_handed_and_refuses_another():
    hopper, walker = envs.get_spec("hopper"), envs.get_spec("walker2d")
    spec = EnsembleConfig(ensemble_size=2, hidden_sizes=(8,)).model_spec(hopper)
    with name_lookups() as counts:
        model = build_ensemble(spec, seed=0, env=hopper)
        model.select_members(slice(0, 1))  # a block of members keeps the environment
    assert sum(counts.values()) == 0
    with name_lookups() as counts:
        build_ensemble(spec, seed=0)  # a model read from a file: the name it records is looked up
    assert counts == {"termination_fn": 1}
    with pytest.raises(ValueError, match="walker2d"):
        build_ensemble(spec, seed=0, env=walker)
