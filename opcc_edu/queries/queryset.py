"""The query-set contract: a typed dataclass of NumPy arrays, its validation and its file format.

A policy-comparison query (PCQ) ``q = (s, pi, s_hat, pi_hat, h)`` asks whether
``V^pi(s, h) < V^pi_hat(s_hat, h)`` (paper Section 3.1). Here, as in the original benchmark,
each side also carries a first action: side a starts in ``state_a``, takes ``action_a``, then
follows policy ``policy_a`` for the remaining ``h - 1`` steps (a Q-value), and likewise for b.

A :class:`QuerySet` is saved as ``.npz`` without pickle, next to a checksum file, and is
validated when it is loaded.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..envs import EnvSpec, get_spec
from ..io import load_npz, save_npz
from ..utils import check_choice

if TYPE_CHECKING:
    import pandas as pd

ARRAY_FIELDS: dict[str, type[np.generic]] = {
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
"""The arrays of a :class:`QuerySet` and their dtypes, in the order they are stored."""

_FINITE_FIELDS = (
    "obs_a",
    "obs_b",
    "action_a",
    "action_b",
    "value_a",
    "value_b",
    "returns_a",
    "returns_b",
    "state_a",
    "state_b",
)


def _policy_levels() -> tuple[int, ...]:
    from ..policies import POLICY_LEVELS

    return POLICY_LEVELS


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
    """Provenance: command, seed, package versions, filter rule, counts, policy checksums."""

    def __post_init__(self) -> None:
        for name, dtype in ARRAY_FIELDS.items():
            setattr(self, name, np.asarray(getattr(self, name), dtype=dtype))

    def __len__(self) -> int:
        return int(self.horizon.shape[0])

    @property
    def spec(self) -> EnvSpec:
        """The environment's :class:`~opcc_edu.envs.EnvSpec`: the one the set was loaded with, else
        looked up once by :attr:`env_name` (a subset keeps its set's)."""
        if getattr(self, "_spec", None) is None:
            self._spec = get_spec(self.env_name)
        return self._spec

    # ----------------------------------------------------------------------------------------
    def validate(self, spec: EnvSpec | None = None) -> QuerySet:
        """Check shapes, dtypes and the internal consistency of the labels.

        Args:
            spec: the environment's spec when the caller holds it (used if it names
                :attr:`env_name`; otherwise the name is looked up).

        Returns:
            ``self``.

        Raises:
            ValueError: naming the offending field.
        """
        if spec is not None and spec.name == self.env_name:
            self._spec = spec
        self._check_shapes(self.spec)
        self._check_ranges()
        self._check_labels()
        return self

    def _check_shapes(self, spec: EnvSpec) -> None:
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
                raise ValueError(
                    f"{name} must have shape {shape} for {n} queries of {self.env_name}, "
                    f"got {getattr(self, name).shape}"
                )
        if r < 1:
            raise ValueError(f"returns_a must hold at least one run, got shape {self.returns_a.shape}")

    def _check_ranges(self) -> None:
        levels = _policy_levels()
        for name in ("policy_a", "policy_b"):
            bad = ~np.isin(getattr(self, name), levels)
            if bad.any():
                raise ValueError(
                    f"{name} must hold policy levels {levels}, got {np.unique(getattr(self, name)[bad]).tolist()}"
                )
        if len(self) and self.horizon.min() < 1:
            raise ValueError(f"horizon must be >= 1, got minimum {self.horizon.min()}")
        if np.any((self.gamma < 0) | (self.gamma > 1)):
            raise ValueError("gamma must lie in [0, 1]")
        for name in _FINITE_FIELDS:
            if not np.all(np.isfinite(getattr(self, name))):
                raise ValueError(f"{name} holds non-finite entries")
        for name in ("action_a", "action_b"):
            if np.any(np.abs(getattr(self, name)) > 1.0):
                raise ValueError(f"{name} must lie in [-1, 1]")

    def _check_labels(self) -> None:
        for side in ("a", "b"):
            mean = getattr(self, f"returns_{side}").mean(axis=1)
            if not np.allclose(getattr(self, f"value_{side}"), mean, rtol=0.0, atol=1e-9):
                raise ValueError(f"value_{side} must equal the mean of returns_{side} over runs")
        if not np.array_equal(self.target, (self.value_a < self.value_b).astype(np.int8)):
            raise ValueError("target must be 1 exactly where value_a < value_b")
        same = self.same_state
        if not np.array_equal(self.state_a[same], self.state_b[same]):
            raise ValueError("same_state queries must have state_a == state_b")

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
            raise ValueError(
                f"indices_or_mask must be a 1-D integer index array or a boolean mask, got {key.dtype} {key.shape}"
            )
        if key.size and (key.min() < -len(self) or key.max() >= len(self)):
            raise ValueError(f"indices must lie in [0, {len(self)}), got range [{key.min()}, {key.max()}]")
        fields = {name: getattr(self, name)[key] for name in ARRAY_FIELDS}
        subset = QuerySet(env_name=self.env_name, metadata=dict(self.metadata), **fields)
        subset._spec = getattr(self, "_spec", None)
        return subset

    def by_horizon(self, h: int) -> QuerySet:
        """The queries of horizon ``h``; ValueError lists the horizons present."""
        check_choice(int(h), self.horizons, "horizon")
        return self.select(self.horizon == int(h))

    def policy_pairs(self) -> Iterator[tuple[tuple[int, int], QuerySet]]:
        """Iterate over ``((policy_a, policy_b), queries)`` for each ordered pair present."""
        pairs = sorted({(int(a), int(b)) for a, b in zip(self.policy_a, self.policy_b, strict=True)})
        for a, b in pairs:
            yield (a, b), self.select((self.policy_a == a) & (self.policy_b == b))

    def to_frame(self) -> pd.DataFrame:
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
        arrays = {name: getattr(self, name) for name in ARRAY_FIELDS}
        arrays["env_name"] = np.asarray(self.env_name)
        return save_npz(path, arrays, self.metadata)

    @classmethod
    def load(cls, path: str | Path, spec: EnvSpec | None = None) -> QuerySet:
        """Load a file written by :meth:`save` and validate it (against ``spec``, when given and
        it names the set's environment: see :meth:`validate`).

        Raises:
            FileNotFoundError: no such file.
            opcc_edu.io.CorruptFileError: checksum mismatch or unreadable file.
            ValueError: a missing or inconsistent field.
        """
        arrays, metadata = load_npz(path)
        missing = sorted((set(ARRAY_FIELDS) | {"env_name"}) - set(arrays))
        if missing:
            raise ValueError(f"{path}: missing fields {missing}")
        fields = {name: arrays[name] for name in ARRAY_FIELDS}
        return cls(env_name=str(arrays["env_name"]), metadata=metadata, **fields).validate(spec)
