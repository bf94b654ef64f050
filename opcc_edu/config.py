"""Profiles: one switch that scales every expensive knob of the package.

Three profiles exist:

* ``tiny`` -- what the tests and the book's continuous integration use: every chapter runs
  top to bottom in under three minutes on two CPU cores.
* ``classroom`` -- a laptop CPU in minutes.
* ``paper`` -- the scale of the OPCC paper (Koul et al.), meant for a GPU.

The active profile is read from the environment variable ``OPCC_EDU_PROFILE`` (default
``tiny``) and can be changed from Python with :func:`set_profile` or, temporarily, with the
:func:`use_profile` context manager. Code never reads the variable itself: it calls
:func:`get_profile` and uses the returned :class:`Profile`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Iterator

ENV_VAR = "OPCC_EDU_PROFILE"
DEFAULT_PROFILE = "tiny"


@dataclasses.dataclass(frozen=True)
class Profile:
    """Sizes of every expensive step; a smaller profile shrinks sizes, never the algorithm."""

    name: str
    """Profile name: ``tiny``, ``classroom`` or ``paper``."""
    dataset_size: int
    """Transitions generated per offline dataset."""
    ensemble_size: int
    """Members M of a dynamics-model ensemble."""
    hidden_sizes: tuple[int, ...]
    """Hidden layer widths of each dynamics model (MBPO uses four layers of 200)."""
    dynamics_train_steps: int
    """Gradient steps used to train a dynamics ensemble."""
    batch_size: int
    """Minibatch size per member when training a dynamics ensemble."""
    queries_per_env: int
    """Policy-comparison queries evaluated per environment (0 = all of them)."""
    mc_runs: int
    """Monte-Carlo runs R per query side, both in the simulator and in learned models."""
    n_seeds: int
    """Independent seeds per experiment configuration."""
    policy_train_steps: int
    """Environment steps of PPO when training a policy from scratch."""
    mdp_rollouts: int
    """Largest number of Monte-Carlo rollouts in the tabular MDP demonstrations."""
    environments: tuple[str, ...]
    """Environments an experiment grid runs over by default."""


PROFILES: dict[str, Profile] = {
    "tiny": Profile(
        name="tiny",
        dataset_size=20_000,
        ensemble_size=10,
        hidden_sizes=(64, 64),
        dynamics_train_steps=300,
        batch_size=256,
        queries_per_env=300,
        mc_runs=1,
        n_seeds=2,
        policy_train_steps=20_000,
        mdp_rollouts=2_000,
        environments=("maze2d-umaze",),
    ),
    "classroom": Profile(
        name="classroom",
        dataset_size=200_000,
        ensemble_size=20,
        hidden_sizes=(200, 200, 200),
        dynamics_train_steps=3_000,
        batch_size=256,
        queries_per_env=1_500,
        mc_runs=1,
        n_seeds=3,
        policy_train_steps=200_000,
        mdp_rollouts=20_000,
        environments=("maze2d-umaze", "maze2d-medium", "hopper"),
    ),
    "paper": Profile(
        name="paper",
        dataset_size=1_000_000,
        ensemble_size=100,
        hidden_sizes=(200, 200, 200, 200),
        dynamics_train_steps=50_000,
        batch_size=256,
        queries_per_env=0,
        mc_runs=1,
        n_seeds=5,
        policy_train_steps=1_000_000,
        mdp_rollouts=200_000,
        environments=(
            "maze2d-open",
            "maze2d-umaze",
            "maze2d-medium",
            "maze2d-large",
            "halfcheetah",
            "hopper",
            "walker2d",
        ),
    ),
}

_active: str | None = None


def _check_name(name: str, argument: str = "profile") -> str:
    if not isinstance(name, str) or name.strip().lower() not in PROFILES:
        choices = ", ".join(PROFILES)
        raise ValueError(f"unknown {argument} {name!r}; valid choices: {choices}")
    return name.strip().lower()


def get_profile(name: str | Profile | None = None) -> Profile:
    """Return a profile by name, or the active one: the one place a profile is looked up.

    Args:
        name: ``tiny``, ``classroom`` or ``paper``; a :class:`Profile`, returned as it is;
            ``None`` gives the active profile (set by :func:`set_profile`, else
            ``$OPCC_EDU_PROFILE``, else ``tiny``).

    Returns:
        The :class:`Profile`.

    Raises:
        ValueError: for an unknown name, listing the valid choices.
    """
    if isinstance(name, Profile):
        return name
    if name is not None:
        return PROFILES[_check_name(name)]
    if _active is not None:
        return PROFILES[_active]
    return PROFILES[_check_name(os.environ.get(ENV_VAR, DEFAULT_PROFILE), ENV_VAR)]


def set_profile(name: str) -> Profile:
    """Make ``name`` the active profile for this process and return it.

    Also sets ``$OPCC_EDU_PROFILE`` so that subprocesses (workers, notebook kernels) agree.
    """
    global _active
    _active = _check_name(name)
    os.environ[ENV_VAR] = _active
    return PROFILES[_active]


@contextlib.contextmanager
def use_profile(name: str) -> Iterator[Profile]:
    """Temporarily switch the active profile inside a ``with`` block."""
    global _active
    previous_active, previous_env = _active, os.environ.get(ENV_VAR)
    try:
        yield set_profile(name)
    finally:
        _active = previous_active
        if previous_env is None:
            os.environ.pop(ENV_VAR, None)
        else:
            os.environ[ENV_VAR] = previous_env
