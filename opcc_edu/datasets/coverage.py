"""How well does a dataset cover the queries? Nearest-neighbour distances and visitation plots.

For every policy-comparison query (paper Section 3) each side starts at a state and takes a
first action. :func:`query_dataset_distances` measures how far that (state, first action) pair
is from the closest (state, action) pair in a dataset: exact nearest neighbours from scipy's
``cKDTree`` in low dimension (mazes) and from blocked matrix products in high dimension
(locomotion, where a kd-tree is several times slower; ``benchmarks/results/datasets.md``).

Normalisation (``normalize="standard"``, the default): every coordinate of the joint vector
``[observation, action]`` is standardised by the *dataset's* mean and standard deviation (a
coordinate the dataset never varies keeps scale 1), and the Euclidean distance is divided by
``sqrt(D + A)``. The result is a root-mean-square distance per coordinate in units of the
dataset's own spread: 0 means the query's pair occurs in the data, 1 means it is on average
one standard deviation away in every coordinate. This keeps large-range coordinates (velocities)
from drowning small ones (angles) and makes environments of different sizes comparable. To
compare *datasets* with each other, measure all of them in one unit: ``reference=`` the pooled
datasets (:func:`pooled_dataset`), otherwise a widely spread dataset looks closer merely because
its own standard deviations are larger.
``"range"`` scales by the dataset's min-max range instead; ``"none"`` uses raw units.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol

import numpy as np

from ..envs import MazeGeometry, get_spec
from ..utils import check_choice

if TYPE_CHECKING:
    import pandas as pd

NORMALIZATIONS = ("standard", "range", "none")
NEAREST_METHODS = ("auto", "kdtree", "brute")
KDTREE_MAX_DIM = 12
"""``method="auto"`` uses the kd-tree up to this many coordinates K and brute force above."""


class QueryLike(Protocol):
    """What coverage needs from a :class:`opcc_edu.queries.QuerySet`."""

    obs_a: np.ndarray  # (N, D)
    obs_b: np.ndarray  # (N, D)
    action_a: np.ndarray  # (N, A)
    action_b: np.ndarray  # (N, A)


@dataclasses.dataclass(frozen=True)
class CoverageResult:
    """Distances from each query side to its nearest dataset pair (N queries, T transitions)."""

    distance_a: np.ndarray
    """(N,) float64: normalised distance of ``(obs_a, action_a)`` to the nearest data pair."""
    distance_b: np.ndarray
    """(N,) float64: the same for side b."""
    nearest_a: np.ndarray
    """(N,) int64: index of the nearest transition for side a."""
    nearest_b: np.ndarray
    """(N,) int64: index of the nearest transition for side b."""
    center: np.ndarray
    """(D + A,) offset subtracted before scaling."""
    scale: np.ndarray
    """(D + A,) per-coordinate divisor."""
    normalize: str
    """``standard``, ``range`` or ``none``."""
    dataset_size: int
    """T."""

    @property
    def distance(self) -> np.ndarray:
        """(N,) the worse-covered side of each query: ``max(distance_a, distance_b)``."""
        return np.maximum(self.distance_a, self.distance_b)

    def summary(self) -> dict[str, float]:
        """Mean, median, 90th percentile and maximum of :attr:`distance`."""
        d = self.distance
        return {
            "mean": float(d.mean()),
            "median": float(np.median(d)),
            "p90": float(np.quantile(d, 0.9)),
            "max": float(d.max()),
        }


def normalizer(points: np.ndarray, normalize: str = "standard") -> tuple[np.ndarray, np.ndarray]:
    """``(center, scale)`` of shape (K,) for data points (T, K) under a normalisation."""
    check_choice(normalize, NORMALIZATIONS, "normalize")
    points = np.asarray(points, dtype=np.float64)
    k = points.shape[1]
    if normalize == "none":
        return np.zeros(k), np.ones(k)
    if normalize == "standard":
        center, scale = points.mean(axis=0), points.std(axis=0)
    else:
        center, scale = points.min(axis=0), points.max(axis=0) - points.min(axis=0)
    # A coordinate the data never varies is left in raw units instead of dividing by zero.
    scale = np.where(scale > 1e-8, scale, 1.0)
    return center, scale


def _brute_force_nearest(
    queries: np.ndarray, points: np.ndarray, block_bytes: int = 64 * 2**20
) -> tuple[np.ndarray, np.ndarray]:
    # ||q - p||^2 = ||q||^2 - 2 q.p + ||p||^2: one matrix product per block of queries, blocks
    # sized so that the (block, T) distance matrix stays within `block_bytes`.
    chunk = max(1, block_bytes // (8 * max(1, len(points))))
    sq = np.einsum("ij,ij->i", points, points)
    dist = np.empty(len(queries))
    index = np.empty(len(queries), dtype=np.int64)
    for start in range(0, len(queries), chunk):
        block = queries[start : start + chunk]
        d2 = sq[None, :] - 2.0 * block @ points.T
        best = d2.argmin(axis=1)
        index[start : start + chunk] = best
        # Recompute the winners exactly: the expanded form loses digits when q is close to p.
        dist[start : start + chunk] = np.linalg.norm(block - points[best], axis=1)
    return dist, index


def nearest_distances(
    queries: np.ndarray,
    points: np.ndarray,
    normalize: str = "standard",
    workers: int = 1,
    method: str = "auto",
    reference: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Normalised distance from each query (N, K) to its nearest point (T, K).

    Args:
        queries: (N, K) query points.
        points: (T, K) data points.
        normalize: ``standard``, ``range`` or ``none`` (see the module docstring).
        workers: threads for the kd-tree queries (``-1``: all cores).
        method: ``kdtree`` (scipy's cKDTree; fast for small K such as the mazes' 6),
            ``brute`` (blocked matrix products; faster for large K such as HalfCheetah's 23,
            where kd-trees lose their pruning power -- see ``benchmarks/results/datasets.md``),
            or ``auto`` (kd-tree up to :data:`KDTREE_MAX_DIM` coordinates). All are exact.
        reference: (T', K) points whose statistics set the units (default: ``points``). Pass
            the pooled points of several datasets to compare distances across them in one unit.

    Returns:
        ``(distance (N,), index (N,), center (K,), scale (K,))``; distances are divided by
        ``sqrt(K)`` (see the module docstring).
    """
    from scipy.spatial import cKDTree

    check_choice(method, NEAREST_METHODS, "method")
    queries = np.asarray(queries, dtype=np.float64)
    points = np.asarray(points, dtype=np.float64)
    if queries.ndim != 2 or points.ndim != 2 or queries.shape[1] != points.shape[1]:
        raise ValueError(f"queries (N, K) and points (T, K) must agree in K, got {queries.shape} and {points.shape}")
    if points.shape[0] == 0:
        raise ValueError("points must hold at least one row")
    center, scale = normalizer(points if reference is None else np.asarray(reference, dtype=np.float64), normalize)
    z_points, z_queries = (points - center) / scale, (queries - center) / scale
    if method == "auto":
        method = "kdtree" if points.shape[1] <= KDTREE_MAX_DIM else "brute"
    if method == "kdtree":
        dist, index = cKDTree(z_points).query(z_queries, k=1, workers=workers)
    else:
        dist, index = _brute_force_nearest(z_queries, z_points)
    return dist / np.sqrt(points.shape[1]), index.astype(np.int64), center, scale


def query_dataset_distances(
    queries: QueryLike,
    data: Mapping[str, np.ndarray],
    normalize: str = "standard",
    workers: int = 1,
    method: str = "auto",
    reference: Mapping[str, np.ndarray] | None = None,
) -> CoverageResult:
    """Distance of every query's (state, first action) pairs to the dataset's (state, action) pairs.

    Args:
        queries: a :class:`opcc_edu.queries.QuerySet` (or any object with ``obs_a``,
            ``obs_b`` (N, D) and ``action_a``, ``action_b`` (N, A)).
        data: a D4RL-format dataset (T transitions).
        normalize: ``standard`` (default), ``range`` or ``none``; see the module docstring.
        workers: threads for the tree queries (``-1``: all cores).
        method: ``auto`` (default), ``kdtree`` or ``brute``; see :func:`nearest_distances`.
        reference: a dataset whose (state, action) statistics set the units (default: ``data``).
            Distances to *different* datasets are only comparable in a common unit: pass the
            pooled datasets (see :func:`pooled_dataset`).

    Returns:
        A :class:`CoverageResult`.
    """
    points = _pairs(data)
    side_a = np.concatenate([np.asarray(queries.obs_a), np.asarray(queries.action_a)], axis=1)
    side_b = np.concatenate([np.asarray(queries.obs_b), np.asarray(queries.action_b)], axis=1)
    if side_a.shape[1] != points.shape[1]:
        raise ValueError(
            f"queries have state+action size {side_a.shape[1]} but the dataset has {points.shape[1]}; "
            "are they from the same environment?"
        )
    n = side_a.shape[0]
    ref = None if reference is None else _pairs(reference)
    dist, index, center, scale = nearest_distances(
        np.concatenate([side_a, side_b]), points, normalize, workers, method, reference=ref
    )
    return CoverageResult(
        distance_a=dist[:n],
        distance_b=dist[n:],
        nearest_a=index[:n],
        nearest_b=index[n:],
        center=center,
        scale=scale,
        normalize=normalize,
        dataset_size=int(points.shape[0]),
    )


def _pairs(data: Mapping[str, np.ndarray]) -> np.ndarray:
    """(T, D + A) joint ``[observation, action]`` rows of a dataset."""
    return np.concatenate([np.asarray(data["observations"]), np.asarray(data["actions"])], axis=1)


def pooled_dataset(datasets: Mapping[str, Mapping[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """Observations and actions of several datasets stacked: a common ``reference`` for units."""
    return {
        "observations": np.concatenate([np.asarray(d["observations"]) for d in datasets.values()]),
        "actions": np.concatenate([np.asarray(d["actions"]) for d in datasets.values()]),
    }


def coverage_table(
    queries: QueryLike, datasets: Mapping[str, Mapping[str, np.ndarray]], normalize: str = "standard"
) -> pd.DataFrame:
    """One row per dataset: size and summary of the query distances (a pandas DataFrame).

    Distances are measured in the units of the pooled datasets, so rows are comparable.
    """
    import pandas as pd

    reference = pooled_dataset(datasets)
    rows = []
    for name, data in datasets.items():
        result = query_dataset_distances(queries, data, normalize, reference=reference)
        rows.append({"dataset": name, "transitions": result.dataset_size, **result.summary()})
    return pd.DataFrame(rows)


def visitation_histogram(
    data: Mapping[str, np.ndarray], env_name: str, bins_per_cell: int = 8, weights: np.ndarray | None = None
) -> tuple[np.ndarray, tuple[float, float, float, float]]:
    """2-D histogram of a maze dataset's visited (x, y) positions.

    Args:
        data: ``observations`` (T, D), x and y first.
        env_name: the maze.
        bins_per_cell: bins per maze cell and axis.
        weights: (T,) weight of each position (default: 1 each, a count).

    Returns:
        ``(counts (rows * bins_per_cell, cols * bins_per_cell), extent)`` with row 0 at the top
        (``imshow(counts, extent=extent)`` draws it in the environment's frame, metres).
    """
    spec = get_spec(env_name)
    if not spec.is_maze:
        raise ValueError(f"env_name must be a maze for a position heat map, got {env_name!r}")
    geometry = MazeGeometry(spec.maze_map)
    x0, x1, y0, y1 = geometry.extent()
    h, w = geometry.shape
    xy = np.asarray(data["observations"])[:, :2]
    if weights is not None and np.shape(weights) != (len(xy),):
        raise ValueError(f"weights must have shape ({len(xy)},), one per position, got {np.shape(weights)}")
    counts, _, _ = np.histogram2d(
        xy[:, 1], xy[:, 0], bins=(h * bins_per_cell, w * bins_per_cell), range=((y0, y1), (x0, x1)), weights=weights
    )
    return counts[::-1], (x0, x1, y0, y1)


def principal_components(
    datasets: Mapping[str, Mapping[str, np.ndarray]], n_components: int = 2
) -> dict[str, np.ndarray]:
    """Project every dataset's standardised observations on the principal axes of all of them.

    Returns:
        name -> (T, n_components) projections (a shared basis, so plots are comparable).
    """
    stacked = np.concatenate([np.asarray(d["observations"], dtype=np.float64) for d in datasets.values()])
    center, scale = normalizer(stacked, "standard")
    z = (stacked - center) / scale
    _, _, vt = np.linalg.svd(z - z.mean(axis=0), full_matrices=False)
    basis = vt[:n_components].T
    return {
        name: ((np.asarray(d["observations"], dtype=np.float64) - center) / scale) @ basis
        for name, d in datasets.items()
    }
