"""Candidate start states: every state visited by episodes of several behaviours (Section 4.2, step 2).

Behaviours: ``random`` (uniform actions); for each policy level k: ``policy-k`` (the policy
itself), ``mixed-k`` (a uniform random action with probability :data:`MIXED_RANDOM_FRACTION`
per step, else the policy's) and ``noisy-k`` (the policy's action plus Gaussian noise of std
:data:`NOISY_ACTION_STD`). States visited by a good policy, a bad one and by perturbations of
both cover the parts of the state space the comparisons are interesting in.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from ..envs import get_spec, get_state, make_env
from ..simulate import BatchSimulator, policy_actions_of, stacked_policy
from ..utils import check_positive_int

if TYPE_CHECKING:
    import torch

MIXED_RANDOM_FRACTION = 0.5
"""Mixed behaviour: each step takes a uniform random action with this probability."""
NOISY_ACTION_STD = 0.3
"""Noisy behaviour: standard deviation of the Gaussian noise added to the policy's action."""
BEHAVIOR_KINDS: tuple[str, ...] = ("policy", "mixed", "noisy")
"""Behaviours derived from each policy level, in the order their episodes are stored."""


@dataclasses.dataclass
class StartStates:
    """Candidate start states and the behaviour whose episode visited them (K states)."""

    states: np.ndarray
    """(K, S) float64 simulator states."""
    behavior: np.ndarray
    """(K,) int64 index into ``behavior_names``."""
    behavior_names: list[str]
    """Names such as ``random``, ``policy-1``, ``mixed-1``, ``noisy-1``."""

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """``n`` indices: a behaviour uniformly at random, then one of its states uniformly.

        Weighting behaviours equally keeps short episodes (a random hopper falls within a few
        dozen steps) as likely a source as long ones.
        """
        groups = [np.flatnonzero(self.behavior == b) for b in range(len(self.behavior_names))]
        groups = [g for g in groups if g.size]
        which = rng.integers(len(groups), size=n)
        out = np.empty(n, dtype=np.int64)
        for g, members in enumerate(groups):
            rows = np.flatnonzero(which == g)
            out[rows] = members[rng.integers(members.size, size=rows.size)]
        return out


@dataclasses.dataclass(frozen=True)
class _Behaviors:
    """What each of the E episodes does: its behaviour, the policy it follows and how."""

    names: list[str]
    behavior: np.ndarray  # (E,) index into names
    policy: np.ndarray  # (E,) policy index, -1 for the random behaviour
    kind: np.ndarray  # (E,) "random", "policy", "mixed" or "noisy"

    @classmethod
    def of(cls, n_policies: int, episodes_per_behavior: int) -> _Behaviors:
        names = ["random"] + [f"{kind}-{k + 1}" for kind in BEHAVIOR_KINDS for k in range(n_policies)]
        behavior = np.repeat(np.arange(len(names)), episodes_per_behavior)
        policy = np.array([-1] + [k for _ in BEHAVIOR_KINDS for k in range(n_policies)])[behavior]
        kind = np.array(["random"] + [kind for kind in BEHAVIOR_KINDS for _ in range(n_policies)])[behavior]
        return cls(names, behavior, policy, kind)


def _reset_states(env_name: str, n: int, rng: np.random.Generator) -> np.ndarray:
    """(n, S) states drawn from the environment's reset distribution, one seed each."""
    env = make_env(env_name)
    states = []
    for episode_seed in rng.integers(2**31 - 1, size=n):
        env.reset(seed=int(episode_seed))
        states.append(get_state(env))
    env.close()
    return np.asarray(states)


def _behavior_actions(
    behaviors: _Behaviors,
    live: np.ndarray,
    obs: np.ndarray,
    stacked: torch.nn.Module,
    act_dim: int,
    rng: np.random.Generator,
) -> np.ndarray:
    """(L, A) float32 actions of the live episodes ``live`` (L,) from their observations ``obs``."""
    actions = rng.uniform(-1.0, 1.0, size=(live.size, act_dim)).astype(np.float32)
    with_policy = behaviors.policy[live] >= 0
    if with_policy.any():
        rows = live[with_policy]
        kind = behaviors.kind[rows]
        policy_actions = policy_actions_of(stacked, obs[rows], behaviors.policy[rows])
        noisy = kind == "noisy"
        noise = rng.normal(0.0, NOISY_ACTION_STD, size=policy_actions.shape)
        policy_actions[noisy] = np.clip(policy_actions[noisy] + noise[noisy], -1.0, 1.0)
        keep_random = (kind == "mixed") & (rng.random(rows.size) < MIXED_RANDOM_FRACTION)
        policy_actions[keep_random] = actions[with_policy][keep_random]
        actions[with_policy] = policy_actions
    return actions


def collect_start_states(
    env_name: str,
    policies: Sequence[torch.nn.Module],
    episodes_per_behavior: int = 8,
    episode_steps: int | None = None,
    seed: int = 0,
    progress: bool = True,
) -> StartStates:
    """Run episodes of random, learned, mixed and noisy behaviour and keep every state visited.

    Episodes start from the environment's reset distribution and run for ``episode_steps`` steps
    or until termination; all of them are stepped together in one
    :class:`opcc_edu.simulate.BatchSimulator`. The behaviours are described in
    :mod:`opcc_edu.build.starts`.

    Args:
        env_name: environment.
        policies: the query policies (index i = level i + 1).
        episodes_per_behavior: episodes per behaviour.
        episode_steps: episode length (default: the environment's limit, Table 8).
        seed: seeds the start states and the random actions.
        progress: show a progress bar.

    Returns:
        :class:`StartStates` (the start state of each episode included; terminal states not).
    """
    from tqdm.auto import tqdm

    spec = get_spec(env_name)
    episodes_per_behavior = check_positive_int(episodes_per_behavior, "episodes_per_behavior")
    steps = spec.max_episode_steps if episode_steps is None else check_positive_int(episode_steps, "episode_steps")
    behaviors = _Behaviors.of(len(policies), episodes_per_behavior)
    n = len(behaviors.behavior)
    rng = np.random.default_rng(seed)
    stacked = stacked_policy(policies)
    sim = BatchSimulator(env_name, n)
    sim.reset_to(_reset_states(env_name, n, rng))
    collected_states = [sim.states()]
    collected_behavior = [behaviors.behavior.copy()]
    alive = np.ones(n, dtype=bool)
    obs = sim.observations()
    for _ in tqdm(range(steps), desc=f"start states {env_name}", disable=not progress, leave=False):
        live = np.flatnonzero(alive)
        if live.size == 0:
            break
        actions = _behavior_actions(behaviors, live, obs, stacked, spec.act_dim, rng)
        next_obs, _, terminated = sim.step(actions, rows=live)
        obs[live] = next_obs
        alive[live[terminated]] = False
        kept = live[~terminated]
        collected_states.append(sim.states(kept))
        collected_behavior.append(behaviors.behavior[kept])
    sim.close()
    return StartStates(np.concatenate(collected_states), np.concatenate(collected_behavior), behaviors.names)
