"""The ``paper`` recipe: query sets built as the original benchmark built its released sets.

This is the default recipe and the shipped benchmark. It differs from the ``hard`` recipe
(:mod:`opcc_edu.build.queries`) in four ways, each read from the original benchmark's released
query sets and its construction script:

1. **Start states.** Episodes start from the environment's reset distribution and follow one
   query policy, chosen at random per episode, with Gaussian action noise (std 0.2 on the
   mazes, 0.5 on the open maze, 0.1 on locomotion; :data:`PAPER_NOISE_STD`). Each visited
   state is kept with probability 0.4, until the pool holds 2,000 states.
2. **Policy pairs.** Only the 6 unordered pairs of *distinct* query policies, 250 kept queries
   each. A policy is never compared with itself.
3. **Candidates.** One start state for both sides with probability 0.2, otherwise two states
   from the pool; a uniform random first action per side; a horizon drawn uniformly from
   {10, 20, 30, 40, 50} per candidate.
4. **Filter.** A candidate is dropped when ``|V_a - V_b| <= 10`` in every environment, mazes
   included (so no maze query has h = 10: a maze value counts steps in the goal and lies in
   [0, h]). With several Monte-Carlo runs, it is also dropped when the two sides' ranges of
   returns overlap. Policies and simulators are deterministic here, so one run per side gives
   the exact value and is the default.

One deliberate difference from the original script: it always put the first policy of a pair
on side a, so the answer could be read from the pair's order. Here each candidate puts the
pair's policies on sides a and b in a random order (probability 1/2 each).

The original large maze ended with 121 queries because its script gave up on a pair after
1,000 rejected candidates in a row. Here a pair keeps drawing until it has its 250 queries or
has drawn :attr:`PaperRecipe.max_candidates_per_pair` candidates; the metadata records every
count, and a pair that ran out of budget is named there (and in a warning).

The result is a deterministic function of the seed, the recipe and the policies.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..envs import get_spec
from ..names import HORIZONS
from ..provenance import command_line, package_versions
from ..simulate import BatchSimulator, policy_actions_of, stacked_policy
from ..utils import check_positive_int
from .metadata import QUERY_PACKAGES, SEMANTICS
from .pairs import Candidates, label_candidates
from .starts import StartStates, _reset_states

if TYPE_CHECKING:
    import torch

PAPER_MIN_GAP = 10.0
"""The paper's filter (Section 4.2, step 4): a query is kept only if ``|V_a - V_b| > 10``."""
PAPER_NOISE_STD: dict[str, float] = {
    "maze2d-open": 0.5,
    "maze2d-umaze": 0.2,
    "maze2d-medium": 0.2,
    "maze2d-large": 0.2,
    "hopper": 0.1,
    "halfcheetah": 0.1,
    "walker2d": 0.1,
}
"""Std of the Gaussian action noise of the start-state episodes, per environment."""


QUERY_POLICY_COUNT = 4
"""Query policies per environment (paper Table 9)."""


def policy_pairs(env_name: str | None = None, n_policies: int = QUERY_POLICY_COUNT) -> int:
    """Unordered pairs of distinct query policies: 6 for the benchmark's 4 policies per environment.

    ``env_name`` is accepted for symmetry with other per-environment helpers; every environment
    has :data:`QUERY_POLICY_COUNT` query policies.
    """
    if env_name is not None:
        get_spec(env_name)
    return n_policies * (n_policies - 1) // 2


@dataclasses.dataclass(frozen=True)
class PaperRecipe:
    """The knobs of the ``paper`` recipe; the defaults are those of the shipped sets."""

    queries_per_pair: int = 250
    """Kept queries per unordered pair of distinct policies (6 pairs: 1,500 queries)."""
    runs: int = 1
    """Monte-Carlo runs per side (1 is exact: the policies and simulators are deterministic)."""
    horizons: Sequence[int] = HORIZONS
    """Horizons a candidate's horizon is drawn from, uniformly."""
    same_state_probability: float = 0.2
    """Probability that a candidate uses one start state for both sides."""
    keep_probability: float = 0.4
    """Probability that a visited state joins the start-state pool."""
    pool_size: int = 2000
    """States in the start-state pool."""
    noise_std: float | None = None
    """Action noise of the start-state episodes (None: :data:`PAPER_NOISE_STD` of the env)."""
    min_gap: float = PAPER_MIN_GAP
    """Candidates with ``|V_a - V_b| <= min_gap`` are dropped."""
    max_candidates_per_pair: int = 200_000
    """Budget: a pair stops drawing after this many candidates, kept or not."""
    batch_size: int = 512
    """Smallest number of candidates drawn for a pair in one round."""
    episodes_per_batch: int = 8
    """Start-state episodes stepped together."""
    gamma: float = 1.0
    """Discount of every query."""

    def __post_init__(self) -> None:
        check_positive_int(self.queries_per_pair, "queries_per_pair")
        check_positive_int(self.runs, "runs")
        check_positive_int(self.pool_size, "pool_size")
        check_positive_int(self.max_candidates_per_pair, "max_candidates_per_pair")
        check_positive_int(self.batch_size, "batch_size")
        check_positive_int(self.episodes_per_batch, "episodes_per_batch")
        horizons = tuple(check_positive_int(h, "horizons entry") for h in self.horizons)
        if len(set(horizons)) != len(horizons) or not horizons:
            raise ValueError(f"horizons must be distinct positive integers, got {horizons!r}")
        object.__setattr__(self, "horizons", horizons)
        for name in ("same_state_probability", "keep_probability", "gamma"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{name} must lie in [0, 1], got {value!r}")
        if self.keep_probability == 0.0:
            raise ValueError("keep_probability must be above 0, or the start-state pool never fills")
        if self.noise_std is not None and not self.noise_std >= 0.0:
            raise ValueError(f"noise_std must be >= 0 or None, got {self.noise_std!r}")
        if not self.min_gap >= 0.0:
            raise ValueError(f"min_gap must be >= 0, got {self.min_gap!r}")

    @classmethod
    def from_overrides(cls, recipe: PaperRecipe | None = None, **overrides: Any) -> PaperRecipe:
        """``recipe`` (default: the shipped recipe) with some fields replaced.

        Raises:
            ValueError: an unknown field (lists the valid ones) or an invalid value.
        """
        if recipe is not None and not isinstance(recipe, PaperRecipe):
            raise ValueError(f"recipe must be a PaperRecipe or None, got {recipe!r}")
        fields = [f.name for f in dataclasses.fields(cls)]
        unknown = sorted(set(overrides) - set(fields))
        if unknown:
            raise ValueError(f"unknown paper recipe field(s) {unknown}; valid fields: {', '.join(fields)}")
        return dataclasses.replace(recipe or cls(), **overrides)

    def noise_of(self, env_name: str) -> float:
        """The action-noise std used for ``env_name``."""
        return PAPER_NOISE_STD[get_spec(env_name).name] if self.noise_std is None else float(self.noise_std)


def collect_pool_states(
    env_name: str,
    policies: Sequence[torch.nn.Module],
    recipe: PaperRecipe,
    rng: np.random.Generator,
    progress: bool = True,
) -> tuple[StartStates, int]:
    """The start-state pool: states of noisy policy episodes, each kept with some probability.

    Episodes run in batches of ``recipe.episodes_per_batch`` until termination or the
    environment's step limit. A batch's kept states join the pool episode by episode, in the
    order they were visited, and the pool is cut at ``recipe.pool_size``.

    Returns:
        ``(starts, episodes)``: the pool (behaviour ``noisy-k`` names the episode's policy level
        k) and the number of episodes run.
    """
    from tqdm.auto import tqdm

    spec = get_spec(env_name)
    noise = recipe.noise_of(env_name)
    stacked = stacked_policy(policies)
    batch = recipe.episodes_per_batch
    states: list[np.ndarray] = []
    behavior: list[np.ndarray] = []
    held, episodes = 0, 0
    bar = tqdm(total=recipe.pool_size, desc=f"start states {env_name}", disable=not progress, leave=False)
    sim = BatchSimulator(env_name, batch)
    while held < recipe.pool_size:
        policy = rng.integers(len(policies), size=batch)
        sim.reset_to(_reset_states(env_name, batch, rng))
        obs = sim.observations()
        alive = np.ones(batch, dtype=bool)
        kept_states: list[list[np.ndarray]] = [[] for _ in range(batch)]
        for _ in range(spec.max_episode_steps):
            live = np.flatnonzero(alive)
            if live.size == 0:
                break
            keep = rng.random(live.size) < recipe.keep_probability
            current = sim.states(live)
            for row, state in zip(live[keep], current[keep], strict=True):
                kept_states[row].append(state)
            actions = policy_actions_of(stacked, obs[live], policy[live])
            actions = np.clip(actions + rng.normal(0.0, noise, size=actions.shape), -1.0, 1.0).astype(np.float32)
            next_obs, _, terminated = sim.step(actions, rows=live)
            obs[live] = next_obs
            alive[live[terminated]] = False
        for row in range(batch):
            if kept_states[row] and held < recipe.pool_size:
                take = kept_states[row][: recipe.pool_size - held]
                states.append(np.asarray(take))
                behavior.append(np.full(len(take), policy[row], dtype=np.int64))
                held += len(take)
                bar.update(len(take))
        episodes += batch
    sim.close()
    bar.close()
    names = [f"noisy-{k + 1}" for k in range(len(policies))]
    return StartStates(np.concatenate(states), np.concatenate(behavior), names), episodes


def _draw_pair_candidates(
    pool_size: int,
    n: int,
    pair: tuple[int, int],
    recipe: PaperRecipe,
    act_dim: int,
    rng: np.random.Generator,
) -> Candidates:
    """``n`` candidates of one unordered policy pair (levels), sides in random order."""
    same = rng.random(n) < recipe.same_state_probability
    index_a = rng.integers(pool_size, size=n)
    index_b = np.where(same, index_a, rng.integers(pool_size, size=n))
    swap = rng.random(n) < 0.5
    first, second = np.full(n, pair[0], dtype=np.int64), np.full(n, pair[1], dtype=np.int64)
    horizons = np.asarray(recipe.horizons, dtype=np.int64)
    return Candidates(
        index_a=index_a,
        index_b=index_b,
        policy_a=np.where(swap, second, first),
        policy_b=np.where(swap, first, second),
        action_a=rng.uniform(-1.0, 1.0, size=(n, act_dim)).astype(np.float32),
        action_b=rng.uniform(-1.0, 1.0, size=(n, act_dim)).astype(np.float32),
        horizon=horizons[rng.integers(len(horizons), size=n)],
        same_state=same,
    )


def paper_filter(returns: np.ndarray, min_gap: float = PAPER_MIN_GAP) -> np.ndarray:
    """Which labelled candidates the paper's filter keeps.

    Args:
        returns: (2, C, R) Monte-Carlo returns of side a (index 0) and side b (index 1).
        min_gap: the gap a kept candidate must exceed.

    Returns:
        (C,) bool: ``|mean_a - mean_b| > min_gap`` and, with R > 1, the two sides' ranges of
        returns do not overlap.
    """
    returns = np.asarray(returns, dtype=np.float64)
    if returns.ndim != 3 or returns.shape[0] != 2:
        raise ValueError(f"returns must have shape (2, C, R), got {returns.shape}")
    value = returns.mean(axis=2)
    keep = np.abs(value[0] - value[1]) > min_gap
    if returns.shape[2] > 1:
        low, high = returns.min(axis=2), returns.max(axis=2)
        keep &= (high[0] < low[1]) | (high[1] < low[0])
    return keep


@dataclasses.dataclass
class _PairProgress:
    """What one pair has drawn and kept so far."""

    pair: tuple[int, int]
    drawn: int = 0
    passed: int = 0
    kept: list[tuple[Candidates, np.ndarray]] = dataclasses.field(default_factory=list)

    @property
    def n_kept(self) -> int:
        return sum(len(c) for c, _ in self.kept)

    def next_batch(self, recipe: PaperRecipe) -> int:
        """Candidates to draw next: enough for the missing queries at the pass rate so far."""
        missing = recipe.queries_per_pair - self.n_kept
        left = recipe.max_candidates_per_pair - self.drawn
        if missing <= 0 or left <= 0:
            return 0
        rate = (self.n_kept + 1) / (self.drawn + 2)
        wanted = max(recipe.batch_size, math.ceil(1.2 * missing / rate))
        return int(min(left, wanted, 8 * recipe.batch_size if self.drawn == 0 else 64 * recipe.batch_size))


def draw_paper_queries(
    env_name: str,
    starts: StartStates,
    policies: Sequence[torch.nn.Module],
    recipe: PaperRecipe,
    rng: np.random.Generator,
    progress: bool = True,
) -> tuple[Candidates, np.ndarray, dict[str, dict[str, int]], int]:
    """Draw, label and filter candidates of every pair until each has its queries or budget.

    Returns:
        ``(chosen, returns, counts, rounds)``: the kept candidates (pair by pair, in the order
        they were drawn), their (2, N, R) returns, per pair ``{"candidates", "passed", "kept"}``
        (drawn, passing the filter, kept: the first ``queries_per_pair`` that passed), and the
        number of labelling rounds.
    """
    act_dim = get_spec(env_name).act_dim
    levels = range(1, len(policies) + 1)
    pairs = [_PairProgress(pair) for pair in itertools.combinations(levels, 2)]
    rounds = 0
    while True:
        sizes = [p.next_batch(recipe) for p in pairs]
        if not any(sizes):
            break
        parts = [
            _draw_pair_candidates(len(starts.states), n, p.pair, recipe, act_dim, rng)
            for p, n in zip(pairs, sizes, strict=True)
            if n
        ]
        batch = Candidates.concat(parts)
        returns = label_candidates(
            env_name,
            starts,
            batch,
            policies,
            recipe.gamma,
            recipe.runs,
            seed=int(rng.integers(2**31 - 1)),
            progress=progress,
        )
        keep = paper_filter(returns, recipe.min_gap)
        offset = 0
        for p, n in zip(pairs, sizes, strict=True):
            if not n:
                continue
            rows = offset + np.flatnonzero(keep[offset : offset + n])
            p.passed += rows.size
            rows = rows[: recipe.queries_per_pair - p.n_kept]
            p.kept.append((batch.take(rows), returns[:, rows]))
            p.drawn += n
            offset += n
        rounds += 1
    counts = {f"{p.pair[0]}-{p.pair[1]}": {"candidates": p.drawn, "passed": p.passed, "kept": p.n_kept} for p in pairs}
    short = {name: c["kept"] for name, c in counts.items() if c["kept"] < recipe.queries_per_pair}
    if short:
        warnings.warn(
            f"{env_name}: policy pairs {short} kept fewer than {recipe.queries_per_pair} queries within the budget "
            f"of {recipe.max_candidates_per_pair} candidates per pair (raise max_candidates_per_pair)",
            RuntimeWarning,
            stacklevel=2,
        )
    chosen = Candidates.concat([c for p in pairs for c, _ in p.kept])
    returns = np.concatenate([r for p in pairs for _, r in p.kept], axis=1)
    return chosen, returns, counts, rounds


def paper_metadata(
    env_name: str,
    recipe: PaperRecipe,
    seed: int,
    rounds: int,
    counts: dict[str, dict[str, int]],
    starts: StartStates,
    episodes: int,
    policy_sha256: dict[str, str] | str,
    command: str | None = None,
) -> dict[str, Any]:
    """The metadata of a ``paper`` set: command, seed, versions, recipe, every count, checksums."""
    return {
        "env_name": env_name,
        "recipe": "paper",
        "command": command_line() if command is None else command,
        "seed": int(seed),
        "versions": package_versions(QUERY_PACKAGES),
        "n_queries": int(sum(c["kept"] for c in counts.values())),
        "runs": int(recipe.runs),
        "runs_note": "policies and simulator are deterministic, so one run per side is the exact value"
        if recipe.runs == 1
        else f"{recipe.runs} runs per side; a candidate whose sides' return ranges overlap is dropped",
        "gamma": float(recipe.gamma),
        "horizons": list(recipe.horizons),
        "filter_rule": f"keep |value_a - value_b| > {recipe.min_gap:g} (paper Section 4.2, every environment)",
        "min_gap": float(recipe.min_gap),
        "queries_per_pair": int(recipe.queries_per_pair),
        "same_state_probability": float(recipe.same_state_probability),
        "max_candidates_per_pair": int(recipe.max_candidates_per_pair),
        "rounds": int(rounds),
        "counts": counts,
        "sides": "each candidate puts the pair's two policies on sides a and b in random order",
        "start_states": {
            "total": int(len(starts.states)),
            "episodes": int(episodes),
            "keep_probability": float(recipe.keep_probability),
            "pool_size": int(recipe.pool_size),
            "noise_std": recipe.noise_of(env_name),
            "behaviors": list(starts.behavior_names),
        },
        "policy_sha256": policy_sha256 if isinstance(policy_sha256, str) else dict(policy_sha256),
        "semantics": SEMANTICS,
    }
