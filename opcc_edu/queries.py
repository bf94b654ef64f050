"""Policy-comparison queries: the typed query set, its construction recipe, the shipped sets.

A policy-comparison query (PCQ) ``q = (s, pi, s_hat, pi_hat, h)`` asks whether
``V^pi(s, h) < V^pi_hat(s_hat, h)`` (paper Section 3.1). Here, as in the original benchmark,
each side also carries a first action: side a starts in ``state_a``, takes ``action_a``, then
follows policy ``policy_a`` for the remaining ``h - 1`` steps (a Q-value), and likewise for b.

:class:`QuerySet` is the data contract (NumPy arrays, saved as ``.npz`` without pickle and
validated on load). :func:`build_query_set` follows the paper's recipe (Section 4.2, steps 2-4):

1. Candidate start states: every state visited by episodes of the random policy, of each
   query policy, of each query policy mixed with random actions (half of the steps), and of
   each query policy with Gaussian action noise (:func:`collect_start_states`).
2. Candidate queries for each horizon in :data:`HORIZONS`: half of the form
   ``(s, pi, s, pi_hat, h)`` and half ``(s, pi, s_hat, pi_hat, h)``, with a random policy pair
   and random first actions.
3. Monte-Carlo labels in the simulator (:func:`opcc_edu.simulate.monte_carlo_returns`).
4. Ambiguous queries are dropped (:func:`gap_threshold`): a value gap below 10 for locomotion
   (the paper's rule); for mazes, where the sparse reward bounds a value by ``h``, a gap below
   ``0.1 * h``, i.e. one side spends at least a tenth of the horizon more steps in the goal.
   Then queries are drawn at random, the same number per horizon and, where possible, per
   form; rounds of fresh candidates are added until every horizon has enough survivors.

The seven shipped sets (``opcc_edu/assets/queries/<env>.npz``) were built with
``opcc-edu build queries ENV``; their metadata records the command, seed, package versions,
the filter rule and the counts of every step.
"""

from __future__ import annotations

import dataclasses
import hashlib
import shlex
import sys
import time
import zlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .envs import ENV_NAMES, get_spec, make_env, get_state
from .io import load_npz, save_npz
from .utils import check_choice, check_positive_int

HORIZONS: tuple[int, ...] = (10, 20, 30, 40, 50)
"""Query horizons of the benchmark (paper Section 4.2, step 3)."""
LOCOMOTION_MIN_GAP = 10.0
"""Smallest kept value gap for locomotion queries (paper Section 4.2, step 4)."""
MAZE_MIN_GAP_FRACTION = 0.1
"""Smallest kept value gap for maze queries, as a fraction of the horizon."""
QUERIES_DIR = Path(__file__).resolve().parent / "assets" / "queries"
DEFAULT_N_QUERIES = 1500
"""Queries per shipped set (the paper's count, Table 8)."""
DEFAULT_SEED = 0
MIXED_RANDOM_FRACTION = 0.5
"""Mixed behaviour: each step takes a uniform random action with this probability."""
NOISY_ACTION_STD = 0.3
"""Noisy behaviour: standard deviation of the Gaussian noise added to the policy's action."""

_ARRAY_FIELDS: dict[str, Any] = {
    "obs_a": np.float32,
    "obs_b": np.float32,
    "action_a": np.float32,
    "action_b": np.float32,
    "policy_a": np.int64,
    "policy_b": np.int64,
    "horizon": np.int64,
    "gamma": np.float64,
    "target": np.int8,
    "value_a": np.float64,
    "value_b": np.float64,
    "returns_a": np.float64,
    "returns_b": np.float64,
    "state_a": np.float64,
    "state_b": np.float64,
    "same_state": np.bool_,
}


def _policy_levels() -> tuple[int, ...]:
    from .policies import POLICY_LEVELS

    return POLICY_LEVELS


# --------------------------------------------------------------------------------------------
# The query set
# --------------------------------------------------------------------------------------------


@dataclasses.dataclass
class QuerySet:
    """Labelled policy-comparison queries of one environment.

    Shapes: N queries, D observation size, A action size, S simulator state size
    (``concat(qpos, qvel)``), R Monte-Carlo runs. Side a of query i starts in ``state_a[i]``,
    takes ``action_a[i]``, then follows policy level ``policy_a[i]`` for ``horizon[i] - 1``
    steps; side b likewise. ``target[i]`` is 1 iff ``value_a[i] < value_b[i]``.
    """

    env_name: str
    """Environment of the queries."""
    obs_a: np.ndarray
    """(N, D) float32 observation of the start state of side a."""
    obs_b: np.ndarray
    """(N, D) float32 observation of the start state of side b."""
    action_a: np.ndarray
    """(N, A) float32 first action of side a."""
    action_b: np.ndarray
    """(N, A) float32 first action of side b."""
    policy_a: np.ndarray
    """(N,) int64 policy level (1 = best ... 4 = worst) of side a."""
    policy_b: np.ndarray
    """(N,) int64 policy level of side b."""
    horizon: np.ndarray
    """(N,) int64 horizon h (steps, the first action included)."""
    gamma: np.ndarray
    """(N,) float64 discount."""
    target: np.ndarray
    """(N,) int8 answer: 1 iff value_a < value_b."""
    value_a: np.ndarray
    """(N,) float64 value of side a (mean of returns_a)."""
    value_b: np.ndarray
    """(N,) float64 value of side b (mean of returns_b)."""
    returns_a: np.ndarray
    """(N, R) float64 Monte-Carlo returns of side a."""
    returns_b: np.ndarray
    """(N, R) float64 Monte-Carlo returns of side b."""
    state_a: np.ndarray
    """(N, S) float64 simulator state of side a."""
    state_b: np.ndarray
    """(N, S) float64 simulator state of side b."""
    same_state: np.ndarray
    """(N,) bool: the query has the form (s, pi, s, pi_hat, h)."""
    metadata: dict[str, Any] = dataclasses.field(default_factory=dict)
    """Provenance: command, seed, package versions, filter rule, counts."""

    def __post_init__(self) -> None:
        for name, dtype in _ARRAY_FIELDS.items():
            setattr(self, name, np.asarray(getattr(self, name), dtype=dtype))

    def __len__(self) -> int:
        return int(self.horizon.shape[0])

    # ----------------------------------------------------------------------------------------
    def validate(self) -> QuerySet:
        """Check shapes, dtypes and the internal consistency of the labels.

        Returns:
            ``self``.

        Raises:
            ValueError: naming the offending field.
        """
        spec = get_spec(self.env_name)
        n = len(self)
        if self.horizon.ndim != 1:
            raise ValueError(f"horizon must have shape (N,), got {self.horizon.shape}")
        s = self.state_a.shape[1] if self.state_a.ndim == 2 else -1
        r = self.returns_a.shape[1] if self.returns_a.ndim == 2 else -1
        expected = {
            "obs_a": (n, spec.obs_dim),
            "obs_b": (n, spec.obs_dim),
            "action_a": (n, spec.act_dim),
            "action_b": (n, spec.act_dim),
            "policy_a": (n,),
            "policy_b": (n,),
            "gamma": (n,),
            "target": (n,),
            "value_a": (n,),
            "value_b": (n,),
            "returns_a": (n, r),
            "returns_b": (n, r),
            "state_a": (n, s),
            "state_b": (n, s),
            "same_state": (n,),
        }
        for name, shape in expected.items():
            if getattr(self, name).shape != shape or -1 in shape:
                raise ValueError(f"{name} must have shape {shape} for {n} queries of {self.env_name}, got {getattr(self, name).shape}")
        if r < 1:
            raise ValueError(f"returns_a must hold at least one run, got shape {self.returns_a.shape}")
        levels = _policy_levels()
        for name in ("policy_a", "policy_b"):
            bad = ~np.isin(getattr(self, name), levels)
            if bad.any():
                raise ValueError(f"{name} must hold policy levels {levels}, got {np.unique(getattr(self, name)[bad]).tolist()}")
        if n and self.horizon.min() < 1:
            raise ValueError(f"horizon must be >= 1, got minimum {self.horizon.min()}")
        if np.any((self.gamma < 0) | (self.gamma > 1)):
            raise ValueError("gamma must lie in [0, 1]")
        for name in ("obs_a", "obs_b", "action_a", "action_b", "value_a", "value_b", "returns_a", "returns_b", "state_a", "state_b"):
            if not np.all(np.isfinite(getattr(self, name))):
                raise ValueError(f"{name} holds non-finite entries")
        for name in ("action_a", "action_b"):
            if np.any(np.abs(getattr(self, name)) > 1.0):
                raise ValueError(f"{name} must lie in [-1, 1]")
        for side in ("a", "b"):
            mean = getattr(self, f"returns_{side}").mean(axis=1)
            if not np.allclose(getattr(self, f"value_{side}"), mean, rtol=0.0, atol=1e-9):
                raise ValueError(f"value_{side} must equal the mean of returns_{side} over runs")
        if not np.array_equal(self.target, (self.value_a < self.value_b).astype(np.int8)):
            raise ValueError("target must be 1 exactly where value_a < value_b")
        same = self.same_state
        if not np.array_equal(self.state_a[same], self.state_b[same]):
            raise ValueError("same_state queries must have state_a == state_b")
        return self

    # ----------------------------------------------------------------------------------------
    @property
    def horizons(self) -> list[int]:
        """Sorted distinct horizons."""
        return sorted(int(h) for h in np.unique(self.horizon))

    @property
    def gap(self) -> np.ndarray:
        """(N,) value gap |value_a - value_b|, the paper's measure of a query's difficulty."""
        return np.abs(self.value_a - self.value_b)

    @property
    def runs(self) -> int:
        """Monte-Carlo runs R per side."""
        return int(self.returns_a.shape[1])

    def select(self, indices_or_mask: np.ndarray | Sequence[int] | Sequence[bool]) -> QuerySet:
        """A new query set with the chosen queries (an index array or an (N,) boolean mask)."""
        key = np.asarray(indices_or_mask)
        if key.dtype == np.bool_:
            if key.shape != (len(self),):
                raise ValueError(f"a boolean mask must have shape ({len(self)},), got {key.shape}")
            key = np.flatnonzero(key)
        elif key.size == 0:
            key = key.astype(np.int64)
        elif not np.issubdtype(key.dtype, np.integer) or key.ndim != 1:
            raise ValueError(f"indices_or_mask must be a 1-D integer index array or a boolean mask, got {key.dtype} {key.shape}")
        if key.size and (key.min() < -len(self) or key.max() >= len(self)):
            raise ValueError(f"indices must lie in [0, {len(self)}), got range [{key.min()}, {key.max()}]")
        fields = {name: getattr(self, name)[key] for name in _ARRAY_FIELDS}
        return QuerySet(env_name=self.env_name, metadata=dict(self.metadata), **fields)

    def by_horizon(self, h: int) -> QuerySet:
        """The queries of horizon ``h``; ValueError lists the horizons present."""
        check_choice(int(h), self.horizons, "horizon")
        return self.select(self.horizon == int(h))

    def policy_pairs(self) -> Iterator[tuple[tuple[int, int], QuerySet]]:
        """Iterate over ``((policy_a, policy_b), queries)`` for each ordered pair present."""
        pairs = sorted({(int(a), int(b)) for a, b in zip(self.policy_a, self.policy_b)})
        for a, b in pairs:
            yield (a, b), self.select((self.policy_a == a) & (self.policy_b == b))

    def to_frame(self):
        """A ``pandas.DataFrame`` with one row per query (no states or observations)."""
        import pandas as pd

        return pd.DataFrame(
            {
                "horizon": self.horizon,
                "policy_a": self.policy_a,
                "policy_b": self.policy_b,
                "same_state": self.same_state,
                "value_a": self.value_a,
                "value_b": self.value_b,
                "gap": self.gap,
                "target": self.target,
            }
        )

    # ----------------------------------------------------------------------------------------
    def save(self, path: str | Path) -> Path:
        """Validate and save to ``path`` (``.npz`` without pickle, with a checksum file)."""
        self.validate()
        arrays = {name: getattr(self, name) for name in _ARRAY_FIELDS}
        arrays["env_name"] = np.asarray(self.env_name)
        return save_npz(path, arrays, self.metadata)

    @classmethod
    def load(cls, path: str | Path) -> QuerySet:
        """Load a file written by :meth:`save` and validate it.

        Raises:
            FileNotFoundError: no such file.
            opcc_edu.io.CorruptFileError: checksum mismatch or unreadable file.
            ValueError: a missing or inconsistent field.
        """
        arrays, metadata = load_npz(path)
        missing = sorted((set(_ARRAY_FIELDS) | {"env_name"}) - set(arrays))
        if missing:
            raise ValueError(f"{path}: missing fields {missing}")
        fields = {name: arrays[name] for name in _ARRAY_FIELDS}
        return cls(env_name=str(arrays["env_name"]), metadata=metadata, **fields).validate()


def query_set_path(env_name: str) -> Path:
    """Where the shipped query set of ``env_name`` lives."""
    return QUERIES_DIR / f"{get_spec(env_name).name}.npz"


def load_queries(env_name: str) -> QuerySet:
    """The shipped query set of an environment (validated).

    Raises:
        ValueError: unknown environment (lists the valid names).
        FileNotFoundError: the set has not been built (``opcc-edu build queries ENV``).
    """
    path = query_set_path(env_name)
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing; build it with `opcc-edu build queries {env_name}`")
    return QuerySet.load(path)


# --------------------------------------------------------------------------------------------
# Construction recipe
# --------------------------------------------------------------------------------------------


def gap_threshold(env_name: str, horizon: int) -> float:
    """Smallest value gap a query of this environment and horizon must have to be kept.

    Locomotion: 10, the paper's rule (Section 4.2, step 4). Mazes: ``0.1 * h``. A maze value is
    the number of steps spent inside the goal radius, so it lies in [0, h] and a fixed 10 would
    remove every query of horizon 10; a tenth of the horizon asks one policy to spend clearly
    more of the horizon in the goal than the other, at every horizon alike.
    """
    horizon = check_positive_int(horizon, "horizon")
    if get_spec(env_name).is_maze:
        return MAZE_MIN_GAP_FRACTION * horizon
    return LOCOMOTION_MIN_GAP


def gap_rule(env_name: str) -> str:
    """The filter rule of an environment in words (recorded in the metadata)."""
    if get_spec(env_name).is_maze:
        return f"keep |value_a - value_b| >= {MAZE_MIN_GAP_FRACTION} * horizon (maze values lie in [0, horizon])"
    return f"keep |value_a - value_b| >= {LOCOMOTION_MIN_GAP} (paper Section 4.2)"


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


def collect_start_states(
    env_name: str,
    policies: Sequence[Any],
    episodes_per_behavior: int = 8,
    episode_steps: int | None = None,
    seed: int = 0,
    progress: bool = True,
) -> StartStates:
    """Run episodes of random, learned, mixed and noisy behaviour and keep every state visited.

    Behaviours: ``random`` (uniform actions); for each policy level k: ``policy-k`` (the policy
    itself), ``mixed-k`` (a uniform random action with probability
    :data:`MIXED_RANDOM_FRACTION` per step, else the policy's) and ``noisy-k`` (the policy's
    action plus Gaussian noise of std :data:`NOISY_ACTION_STD`). Episodes start from the
    environment's reset distribution and run for ``episode_steps`` steps or until termination;
    all of them are stepped together in one :class:`opcc_edu.simulate.BatchSimulator`.

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

    from .simulate import BatchSimulator, _policy_actions, stacked_policy

    spec = get_spec(env_name)
    episodes_per_behavior = check_positive_int(episodes_per_behavior, "episodes_per_behavior")
    steps = spec.max_episode_steps if episode_steps is None else check_positive_int(episode_steps, "episode_steps")
    names = ["random"] + [f"{kind}-{k + 1}" for kind in ("policy", "mixed", "noisy") for k in range(len(policies))]
    behavior = np.repeat(np.arange(len(names)), episodes_per_behavior)
    n = len(behavior)
    rng = np.random.default_rng(seed)
    env = make_env(env_name)
    starts = []
    for episode_seed in rng.integers(2**31 - 1, size=n):
        env.reset(seed=int(episode_seed))
        starts.append(get_state(env))
    env.close()
    # Row -> (uses a policy?, policy index, noise kind)
    policy_of = np.array([-1] + [k for _ in range(3) for k in range(len(policies))])[behavior]
    kind_of = np.array(["random"] + [kind for kind in ("policy", "mixed", "noisy") for _ in range(len(policies))])[behavior]
    stacked = stacked_policy(policies)
    sim = BatchSimulator(env_name, n)
    sim.reset_to(np.asarray(starts))
    collected_states = [sim.states()]
    collected_behavior = [behavior.copy()]
    alive = np.ones(n, dtype=bool)
    obs = sim.observations()
    uses_policy = policy_of >= 0
    for _ in tqdm(range(steps), desc=f"start states {env_name}", disable=not progress, leave=False):
        live = np.flatnonzero(alive)
        if live.size == 0:
            break
        actions = rng.uniform(-1.0, 1.0, size=(live.size, spec.act_dim)).astype(np.float32)
        with_policy = uses_policy[live]
        if with_policy.any():
            rows = live[with_policy]
            policy_actions = _policy_actions(stacked, obs[rows], policy_of[rows])
            noisy = kind_of[rows] == "noisy"
            noise = rng.normal(0.0, NOISY_ACTION_STD, size=policy_actions.shape)
            policy_actions[noisy] = np.clip(policy_actions[noisy] + noise[noisy], -1.0, 1.0)
            keep_random = (kind_of[rows] == "mixed") & (rng.random(rows.size) < MIXED_RANDOM_FRACTION)
            policy_actions[keep_random] = actions[with_policy][keep_random]
            actions[with_policy] = policy_actions
        next_obs, _, terminated = sim.step(actions, rows=live)
        obs[live] = next_obs
        alive[live[terminated]] = False
        kept = live[~terminated]
        collected_states.append(sim.states(kept))
        collected_behavior.append(behavior[kept])
    sim.close()
    return StartStates(np.concatenate(collected_states), np.concatenate(collected_behavior), names)


@dataclasses.dataclass
class _Candidates:
    """Unlabelled candidate queries (C rows)."""

    index_a: np.ndarray  # (C,) into the start states
    index_b: np.ndarray
    policy_a: np.ndarray  # (C,) levels
    policy_b: np.ndarray
    action_a: np.ndarray  # (C, A) float32
    action_b: np.ndarray
    horizon: np.ndarray  # (C,)
    same_state: np.ndarray  # (C,) bool

    @staticmethod
    def concat(parts: Sequence[_Candidates]) -> _Candidates:
        return _Candidates(*[np.concatenate([getattr(p, f.name) for p in parts]) for f in dataclasses.fields(_Candidates)])


def _draw_candidates(
    starts: StartStates, n: int, horizon: int, same_state: bool, levels: Sequence[int], act_dim: int, rng: np.random.Generator
) -> _Candidates:
    index_a = starts.sample(n, rng)
    index_b = index_a.copy() if same_state else starts.sample(n, rng)
    levels = np.asarray(levels)
    return _Candidates(
        index_a=index_a,
        index_b=index_b,
        policy_a=levels[rng.integers(len(levels), size=n)],
        policy_b=levels[rng.integers(len(levels), size=n)],
        action_a=rng.uniform(-1.0, 1.0, size=(n, act_dim)).astype(np.float32),
        action_b=rng.uniform(-1.0, 1.0, size=(n, act_dim)).astype(np.float32),
        horizon=np.full(n, horizon, dtype=np.int64),
        same_state=np.full(n, same_state, dtype=bool),
    )


def _open_cells(horizons, share, kept, rate, balanced: bool) -> list[tuple[tuple[int, bool], int]]:
    """``((horizon, same_state), missing)`` for the cells that need candidates next round.

    Balanced rounds ask each form for its own share. Later rounds ask, per horizon, only the
    form that passes the filter more often, for everything the horizon still lacks.
    """
    out = []
    for h in horizons:
        if balanced:
            out += [((h, same), share[(h, same)] - kept((h, same))) for same in (True, False) if kept((h, same)) < share[(h, same)]]
            continue
        missing = share[(h, True)] + share[(h, False)] - kept((h, True)) - kept((h, False))
        if missing > 0:
            out.append(((h, rate((h, True)) >= rate((h, False))), missing))
    return out


def _env_seed(seed: int, env_name: str) -> np.random.SeedSequence:
    # Different environments get unrelated streams from one user-facing seed.
    return np.random.SeedSequence([int(seed), zlib.crc32(env_name.encode())])


def _versions() -> dict[str, str]:
    from importlib import metadata

    out = {}
    for name in ("opcc_edu", "numpy", "torch", "mujoco", "gymnasium", "gymnasium-robotics"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


def _policy_checksums(env_name: str) -> dict[str, str]:
    from .policies import ASSETS_DIR, POLICY_LEVELS

    out = {}
    for level in POLICY_LEVELS:
        path = ASSETS_DIR / "policies" / env_name / f"level{level}.safetensors"
        if path.exists():
            out[str(level)] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def build_query_set(
    env_name: str,
    n_queries: int = DEFAULT_N_QUERIES,
    seed: int = DEFAULT_SEED,
    runs: int | None = None,
    horizons: Sequence[int] = HORIZONS,
    candidates_per_round: int = 2000,
    max_rounds: int = 20,
    episodes_per_behavior: int = 8,
    episode_steps: int | None = None,
    policies: Sequence[Any] | None = None,
    gamma: float = 1.0,
    progress: bool = True,
    command: str | None = None,
) -> QuerySet:
    """Construct a labelled query set by the paper's recipe (Section 4.2, steps 2-4).

    Args:
        env_name: environment.
        n_queries: queries to select, spread evenly over ``horizons`` (and over the two forms
            of each horizon where enough candidates survive the filter).
        seed: the one seed of the construction; the result is a deterministic function of it.
        runs: Monte-Carlo runs R per side (default: the active profile's ``mc_runs``).
        horizons: query horizons.
        candidates_per_round: candidates drawn per horizon and round, half of each form (the
            paper draws 2000 per horizon once). A form whose candidates rarely pass the filter
            draws more (up to 8 times as many) in later rounds, in proportion to its pass rate.
        max_rounds: rounds of fresh candidates before giving up on a horizon that lacks
            survivors.
        episodes_per_behavior: episodes per behaviour for the start states
            (:func:`collect_start_states`).
        episode_steps: length of those episodes (default: the environment's limit).
        policies: the four query policies (default: the shipped ones, ``load_policies``).
        gamma: discount of every query.
        progress: show progress bars.
        command: the command line to record (default: this process's).

    Returns:
        A validated :class:`QuerySet` whose metadata records the command, seed, versions, the
        filter rule and per-step counts.

    Raises:
        RuntimeError: some horizon has fewer than its share of queries after ``max_rounds``.
    """
    from tqdm.auto import tqdm

    from .config import get_profile
    from .simulate import monte_carlo_returns

    spec = get_spec(env_name)
    env_name = spec.name
    n_queries = check_positive_int(n_queries, "n_queries")
    runs = get_profile().mc_runs if runs is None else check_positive_int(runs, "runs")
    candidates_per_round = check_positive_int(candidates_per_round, "candidates_per_round", minimum=2)
    max_rounds = check_positive_int(max_rounds, "max_rounds")
    horizons = tuple(check_positive_int(h, "horizons entry") for h in horizons)
    if len(set(horizons)) != len(horizons) or not horizons:
        raise ValueError(f"horizons must be distinct positive integers, got {horizons!r}")
    if not 0.0 <= gamma <= 1.0:
        raise ValueError(f"gamma must lie in [0, 1], got {gamma!r}")
    shipped_policies = policies is None
    if shipped_policies:
        from .policies import load_policies

        policies = load_policies(env_name)
    levels = tuple(range(1, len(policies) + 1))

    seeds = _env_seed(seed, env_name).spawn(3)
    starts = collect_start_states(
        env_name, policies, episodes_per_behavior, episode_steps, seed=int(seeds[0].generate_state(1)[0]), progress=progress
    )
    rng = np.random.default_rng(seeds[1])

    # Share of each horizon, then of each form inside it (same-state first).
    per_horizon = np.full(len(horizons), n_queries // len(horizons))
    per_horizon[: n_queries % len(horizons)] += 1
    cells = [(h, same) for h in horizons for same in (True, False)]
    share = {}
    for h, total in zip(horizons, per_horizon):
        share[(h, True)], share[(h, False)] = (total + 1) // 2, total // 2
    survivors: dict[tuple[int, bool], list[_Candidates]] = {c: [] for c in cells}
    labelled: dict[tuple[int, bool], list[np.ndarray]] = {c: [] for c in cells}
    counts = {f"{h}-{'same' if same else 'different'}": {"candidates": 0, "kept": 0} for h, same in cells}

    def kept(cell):
        return sum(len(p.horizon) for p in survivors[cell])

    def rate(cell):
        # Laplace-smoothed pass rate of the filter in this cell so far.
        c = counts[f"{cell[0]}-{'same' if cell[1] else 'different'}"]
        return (c["kept"] + 1) / (c["candidates"] + 2)

    rounds = 0
    # The first half of the rounds insists on both forms; later rounds let one form make up
    # for the other (short-horizon same-state queries rarely have a gap of 10).
    balance_rounds = (max_rounds + 1) // 2
    half = candidates_per_round // 2
    bar = tqdm(total=max_rounds, desc=f"query rounds {env_name}", disable=not progress, leave=False)
    while rounds < max_rounds:
        open_cells = _open_cells(horizons, share, kept, rate, balanced=rounds < balance_rounds)
        if not open_cells:
            break
        parts = []
        for (h, same), missing in open_cells:
            # Draw about 1.5 times what the observed pass rate suggests is still missing, so a
            # rarely passing cell (short horizons) needs few rounds; bounded both ways.
            size = int(np.clip(np.ceil(1.5 * missing / rate((h, same))), half, 16 * half))
            parts.append(_draw_candidates(starts, size, h, same, levels, spec.act_dim, rng))
        batch = _Candidates.concat(parts)
        m = len(batch.horizon)
        returns = monte_carlo_returns(
            env_name,
            np.concatenate([starts.states[batch.index_a], starts.states[batch.index_b]]),
            policies,
            np.concatenate([batch.policy_a, batch.policy_b]) - 1,
            np.concatenate([batch.horizon, batch.horizon]),
            np.concatenate([batch.action_a, batch.action_b]),
            gamma,
            runs=runs,
            seed=int(rng.integers(2**31 - 1)),
            progress=progress,
        )
        value = returns.mean(axis=1)
        gap = np.abs(value[:m] - value[m:])
        threshold = np.array([gap_threshold(env_name, int(h)) for h in batch.horizon])
        keep = gap >= threshold
        for (h, same), _ in open_cells:
            in_cell = (batch.horizon == h) & (batch.same_state == same)
            counts[f"{h}-{'same' if same else 'different'}"]["candidates"] += int(in_cell.sum())
            counts[f"{h}-{'same' if same else 'different'}"]["kept"] += int((in_cell & keep).sum())
            rows = np.flatnonzero(in_cell & keep)
            part = _Candidates(*[getattr(batch, f.name)[rows] for f in dataclasses.fields(_Candidates)])
            survivors[(h, same)].append(part)
            labelled[(h, same)].append(np.stack([returns[:m][rows], returns[m:][rows]], axis=0))  # (2, k, R)
        rounds += 1
        bar.update(1)
    bar.close()

    # Selection: a random subset of each cell's survivors; a cell short of survivors is made up
    # from the other form of the same horizon.
    chosen_parts, chosen_returns, shortfall = [], [], {}
    for h in horizons:
        pools = {}
        for same in (True, False):
            cand = _Candidates.concat(survivors[(h, same)]) if survivors[(h, same)] else None
            ret = np.concatenate(labelled[(h, same)], axis=1) if labelled[(h, same)] else np.zeros((2, 0, runs))
            pools[same] = (cand, ret)
        sizes = {same: 0 if pools[same][0] is None else len(pools[same][0].horizon) for same in (True, False)}
        take = {same: min(share[(h, same)], sizes[same]) for same in (True, False)}
        for same in (True, False):
            extra = share[(h, not same)] - take[not same]
            if extra > 0:
                take[same] = min(sizes[same], take[same] + extra)
        missing = share[(h, True)] + share[(h, False)] - take[True] - take[False]
        if missing > 0:
            shortfall[h] = int(missing)
        for same in (True, False):
            cand, ret = pools[same]
            if take[same] == 0:
                continue
            rows = np.sort(rng.choice(sizes[same], size=take[same], replace=False))
            chosen_parts.append(_Candidates(*[getattr(cand, f.name)[rows] for f in dataclasses.fields(_Candidates)]))
            chosen_returns.append(ret[:, rows])
    if shortfall:
        raise RuntimeError(
            f"{env_name}: after {rounds} rounds of {candidates_per_round} candidates per horizon, horizons "
            f"{sorted(shortfall)} lack {shortfall} queries that pass the filter ({gap_rule(env_name)}); "
            f"raise max_rounds or candidates_per_round. Counts: {counts}"
        )
    chosen = _Candidates.concat(chosen_parts)
    chosen_ret = np.concatenate(chosen_returns, axis=1)
    order = np.lexsort((~chosen.same_state, chosen.horizon))
    chosen = _Candidates(*[getattr(chosen, f.name)[order] for f in dataclasses.fields(_Candidates)])
    returns_a, returns_b = chosen_ret[0][order], chosen_ret[1][order]
    state_a, state_b = starts.states[chosen.index_a], starts.states[chosen.index_b]
    obs_a, obs_b = _observations(env_name, state_a), _observations(env_name, state_b)
    value_a, value_b = returns_a.mean(axis=1), returns_b.mean(axis=1)

    if command is None:
        argv = list(sys.argv)
        command = shlex.join(["opcc-edu", *argv[1:]]) if argv and argv[0].endswith("opcc-edu") else shlex.join(argv)
    metadata = {
        "env_name": env_name,
        "command": command,
        "seed": int(seed),
        "versions": _versions(),
        "n_queries": int(n_queries),
        "runs": int(runs),
        "gamma": float(gamma),
        "horizons": list(horizons),
        "filter_rule": gap_rule(env_name),
        "gap_thresholds": {str(h): gap_threshold(env_name, h) for h in horizons},
        "candidates_per_round": int(candidates_per_round),
        "rounds": int(rounds),
        "counts": counts,
        "start_states": {
            "total": int(len(starts.states)),
            "episodes_per_behavior": int(episodes_per_behavior),
            "episode_steps": int(spec.max_episode_steps if episode_steps is None else episode_steps),
            "behaviors": starts.behavior_names,
            "mixed_random_fraction": MIXED_RANDOM_FRACTION,
            "noisy_action_std": NOISY_ACTION_STD,
        },
        "policy_sha256": _policy_checksums(env_name) if shipped_policies else "policies supplied by the caller",
        "semantics": "target = 1 iff V^{policy_a}(state_a, action_a, horizon) < V^{policy_b}(state_b, action_b, horizon); "
        "each side takes its first action, then follows its policy for horizon - 1 steps",
    }
    queries = QuerySet(
        env_name=env_name,
        obs_a=obs_a,
        obs_b=obs_b,
        action_a=chosen.action_a,
        action_b=chosen.action_b,
        policy_a=chosen.policy_a,
        policy_b=chosen.policy_b,
        horizon=chosen.horizon,
        gamma=np.full(len(chosen.horizon), gamma),
        target=(value_a < value_b).astype(np.int8),
        value_a=value_a,
        value_b=value_b,
        returns_a=returns_a,
        returns_b=returns_b,
        state_a=state_a,
        state_b=state_b,
        same_state=chosen.same_state,
        metadata=metadata,
    )
    return queries.validate()


def _observations(env_name: str, states: np.ndarray) -> np.ndarray:
    from .simulate import BatchSimulator

    if len(states) == 0:
        return np.zeros((0, get_spec(env_name).obs_dim), dtype=np.float32)
    sim = BatchSimulator(env_name, len(states))
    sim.reset_to(states)
    obs = sim.observations().astype(np.float32)
    sim.close()
    return obs


def recompute_values(queries: QuerySet, policies: Sequence[Any] | None = None, progress: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Recompute both values of every query from its stored states in the simulator.

    Args:
        queries: the query set.
        policies: the policies of its levels (default: the shipped ones).
        progress: show a progress bar.

    Returns:
        ``(value_a (N,), value_b (N,))`` float64.
    """
    from .simulate import monte_carlo_returns

    if policies is None:
        from .policies import load_policies

        policies = load_policies(queries.env_name)
    n = len(queries)
    returns = monte_carlo_returns(
        queries.env_name,
        np.concatenate([queries.state_a, queries.state_b]),
        policies,
        np.concatenate([queries.policy_a, queries.policy_b]) - 1,
        np.concatenate([queries.horizon, queries.horizon]),
        np.concatenate([queries.action_a, queries.action_b]),
        np.concatenate([queries.gamma, queries.gamma]),
        runs=queries.runs,
        progress=progress,
    )
    value = returns.mean(axis=1)
    return value[:n], value[n:]


# --------------------------------------------------------------------------------------------
# Command line and `opcc-edu info`
# --------------------------------------------------------------------------------------------


def add_build_parser(subparsers) -> None:
    """Register ``opcc-edu build queries ENV``."""
    p = subparsers.add_parser(
        "queries",
        help="construct and label the policy-comparison query set of one environment",
        description="Collect candidate start states, draw candidate queries for horizons 10-50 in both "
        "forms, label them by simulation with the shipped policies, drop ambiguous ones and select "
        "the query set (paper Section 4.2). Deterministic given --seed.",
    )
    p.add_argument("env", choices=[*ENV_NAMES, "all"], help="environment, or 'all'")
    p.add_argument("--seed", type=int, default=DEFAULT_SEED, help=f"construction seed (default {DEFAULT_SEED})")
    p.add_argument("--n-queries", type=int, default=DEFAULT_N_QUERIES, help=f"queries to select (default {DEFAULT_N_QUERIES})")
    p.add_argument("--runs", type=int, default=None, help="Monte-Carlo runs per side (default: the profile's mc_runs)")
    p.add_argument("--candidates", type=int, default=2000, help="candidates per horizon and round (default 2000)")
    p.add_argument("--max-rounds", type=int, default=20, help="rounds of candidates before giving up (default 20)")
    p.add_argument(
        "--output",
        default=None,
        help="output file, or directory for 'all' (default: the package's shipped location)",
    )
    p.add_argument("--no-progress", action="store_true", help="hide progress bars")
    p.set_defaults(handler=_build_handler)


def _build_handler(args) -> int:
    import torch

    torch.set_num_threads(1)
    names = list(ENV_NAMES) if args.env == "all" else [args.env]
    for name in names:
        started = time.perf_counter()
        command = shlex.join(
            ["opcc-edu", "build", "queries", name, "--seed", str(args.seed), "--n-queries", str(args.n_queries)]
            + ([] if args.runs is None else ["--runs", str(args.runs)])
            + ["--candidates", str(args.candidates), "--max-rounds", str(args.max_rounds)]
        )
        queries = build_query_set(
            name,
            n_queries=args.n_queries,
            seed=args.seed,
            runs=args.runs,
            candidates_per_round=args.candidates,
            max_rounds=args.max_rounds,
            progress=not args.no_progress,
            command=command,
        )
        if args.output is None:
            path = query_set_path(name)
        elif args.env == "all":
            path = Path(args.output) / f"{name}.npz"
        else:
            path = Path(args.output)
        # Wall time is provenance only (the arrays do not depend on it).
        queries.metadata["build_seconds"] = round(time.perf_counter() - started, 1)
        queries.save(path)
        same = int(queries.same_state.sum())
        print(
            f"{name}: {len(queries)} queries ({same} same-state, {len(queries) - same} two-state), "
            f"horizons {queries.horizons}, {queries.metadata['rounds']} rounds, "
            f"{time.perf_counter() - started:.0f} s -> {path}"
        )
    return 0


def info_lines() -> list[str]:
    """Lines for ``opcc-edu info``: the shipped query sets."""
    lines = ["Query sets (paper Table 8: 1500 queries per environment; horizons 10-50):"]
    lines.append(f"  {'env':<15} {'queries':>7} {'same-state':>10} {'V_a<V_b':>8} {'median gap':>10}  filter")
    for name in ENV_NAMES:
        path = query_set_path(name)
        if not path.exists():
            lines.append(f"  {name:<15} {'not built':>7}")
            continue
        try:
            queries = QuerySet.load(path)
        except (ValueError, OSError) as exc:
            lines.append(f"  {name:<15} unreadable ({exc})")
            continue
        lines.append(
            f"  {name:<15} {len(queries):>7} {int(queries.same_state.sum()):>10} {queries.target.mean():>8.2f} "
            f"{np.median(queries.gap):>10.2f}  {gap_rule(name)}"
        )
    return lines
