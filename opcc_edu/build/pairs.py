"""Candidate queries: start states, a random policy pair and random first actions (Section 4.2, step 3).

For each horizon, half of the candidates have the form ``(s, pi, s, pi_hat, h)`` (one shared
start state) and half ``(s, pi, s_hat, pi_hat, h)`` (two start states). Both policies are drawn
uniformly from the query policy levels (a pair may repeat a level: the first actions still
differ), and both first actions uniformly from the action box ``[-1, 1]^A``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from ..queries.labelling import simulate_both_sides
from .starts import StartStates

if TYPE_CHECKING:
    import torch


@dataclasses.dataclass
class Candidates:
    """Unlabelled candidate queries (C rows); states are indices into the start states."""

    index_a: np.ndarray
    """(C,) int64 row of :attr:`StartStates.states` side a starts in."""
    index_b: np.ndarray
    """(C,) int64 row side b starts in (equal to ``index_a`` for same-state candidates)."""
    policy_a: np.ndarray
    """(C,) policy level of side a."""
    policy_b: np.ndarray
    """(C,) policy level of side b."""
    action_a: np.ndarray
    """(C, A) float32 first action of side a."""
    action_b: np.ndarray
    """(C, A) float32 first action of side b."""
    horizon: np.ndarray
    """(C,) int64 horizon."""
    same_state: np.ndarray
    """(C,) bool: the candidate has the form (s, pi, s, pi_hat, h)."""

    def __len__(self) -> int:
        return int(self.horizon.shape[0])

    def take(self, rows: np.ndarray) -> Candidates:
        """The candidates at ``rows`` (an index array or a (C,) boolean mask)."""
        return Candidates(*[getattr(self, f.name)[rows] for f in dataclasses.fields(Candidates)])

    @staticmethod
    def concat(parts: Sequence[Candidates]) -> Candidates:
        """All candidates of ``parts``, in order."""
        return Candidates(
            *[np.concatenate([getattr(p, f.name) for p in parts]) for f in dataclasses.fields(Candidates)]
        )


def draw_candidates(
    starts: StartStates,
    n: int,
    horizon: int,
    same_state: bool,
    levels: Sequence[int],
    act_dim: int,
    rng: np.random.Generator,
) -> Candidates:
    """``n`` candidates of one horizon and one form.

    Args:
        starts: the candidate start states (:func:`opcc_edu.build.collect_start_states`).
        n: candidates to draw.
        horizon: their horizon.
        same_state: the form: one shared start state (True) or two (False).
        levels: the policy levels to draw from.
        act_dim: action size A.
        rng: the construction's generator (the draws consume it in a fixed order).

    Returns:
        :class:`Candidates` with ``n`` rows.
    """
    index_a = starts.sample(n, rng)
    index_b = index_a.copy() if same_state else starts.sample(n, rng)
    levels = np.asarray(levels)
    return Candidates(
        index_a=index_a,
        index_b=index_b,
        policy_a=levels[rng.integers(len(levels), size=n)],
        policy_b=levels[rng.integers(len(levels), size=n)],
        action_a=rng.uniform(-1.0, 1.0, size=(n, act_dim)).astype(np.float32),
        action_b=rng.uniform(-1.0, 1.0, size=(n, act_dim)).astype(np.float32),
        horizon=np.full(n, horizon, dtype=np.int64),
        same_state=np.full(n, same_state, dtype=bool),
    )


def label_candidates(
    env_name: str,
    starts: StartStates,
    candidates: Candidates,
    policies: Sequence[torch.nn.Module],
    gamma: float,
    runs: int,
    seed: int,
    progress: bool = True,
) -> np.ndarray:
    """Monte-Carlo returns of both sides of every candidate.

    Args:
        env_name: environment.
        starts: the start states the candidates index into.
        candidates: C candidates.
        policies: the query policies (index i = level i + 1).
        gamma: discount.
        runs: Monte-Carlo runs R per side.
        seed: seeds the simulation's noise (if any).
        progress: show a progress bar.

    Returns:
        (2, C, R) float64 returns: side a at index 0, side b at index 1.
    """
    return simulate_both_sides(
        env_name,
        starts.states[candidates.index_a],
        starts.states[candidates.index_b],
        policies,
        candidates.policy_a,
        candidates.policy_b,
        candidates.horizon,
        candidates.action_a,
        candidates.action_b,
        gamma,
        runs,
        seed,
        progress,
    )
