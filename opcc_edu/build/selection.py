"""Rounds of candidates and the final draw: the same number of queries per horizon and form.

Each horizon gets an equal share of the queries and, inside it, each form (same-state first)
half of that share: a *cell* ``(horizon, same_state)``. Labelled candidates that pass the
ambiguity filter are pooled per cell (:class:`SurvivorPool`) until every cell holds its share;
then a random subset of each cell's survivors is drawn, and a cell short of survivors is made up
from the other form of the same horizon.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from .pairs import Candidates

Cell = tuple[int, bool]
"""``(horizon, same_state)``: the queries of one horizon and one form."""


def cell_name(cell: Cell) -> str:
    """``"<horizon>-same"`` or ``"<horizon>-different"``: the cell's key in the recorded counts."""
    horizon, same = cell
    return f"{horizon}-{'same' if same else 'different'}"


def cell_shares(horizons: Sequence[int], n_queries: int) -> dict[Cell, int]:
    """Queries wanted per cell: ``n_queries`` spread evenly over the horizons, then the forms.

    Earlier horizons, and the same-state form, take the remainders of the divisions.
    """
    per_horizon = np.full(len(horizons), n_queries // len(horizons))
    per_horizon[: n_queries % len(horizons)] += 1
    share: dict[Cell, int] = {}
    for h, total in zip(horizons, per_horizon, strict=True):
        share[(h, True)], share[(h, False)] = int((total + 1) // 2), int(total // 2)
    return share


@dataclasses.dataclass
class SurvivorPool:
    """The candidates that passed the filter so far, with their returns, per cell."""

    horizons: tuple[int, ...]
    """The query horizons, in order."""
    share: dict[Cell, int]
    """Queries wanted per cell (:func:`cell_shares`)."""
    survivors: dict[Cell, list[Candidates]] = dataclasses.field(default_factory=dict)
    """Per cell, the survivors of each round."""
    returns: dict[Cell, list[np.ndarray]] = dataclasses.field(default_factory=dict)
    """Per cell, the (2, k, R) returns of each round's survivors (side a, side b)."""
    counts: dict[str, dict[str, int]] = dataclasses.field(default_factory=dict)
    """Per cell name, the candidates drawn and kept so far (recorded in the metadata)."""

    @classmethod
    def for_queries(cls, horizons: Sequence[int], n_queries: int) -> SurvivorPool:
        """An empty pool for ``n_queries`` queries over ``horizons``."""
        horizons = tuple(horizons)
        cells = [(h, same) for h in horizons for same in (True, False)]
        return cls(
            horizons=horizons,
            share=cell_shares(horizons, n_queries),
            survivors={c: [] for c in cells},
            returns={c: [] for c in cells},
            counts={cell_name(c): {"candidates": 0, "kept": 0} for c in cells},
        )

    def kept(self, cell: Cell) -> int:
        """Survivors of ``cell`` so far."""
        return sum(len(part) for part in self.survivors[cell])

    def pass_rate(self, cell: Cell) -> float:
        """Laplace-smoothed pass rate of the filter in ``cell`` so far."""
        c = self.counts[cell_name(cell)]
        return (c["kept"] + 1) / (c["candidates"] + 2)

    def open_cells(self, balanced: bool) -> list[tuple[Cell, int]]:
        """``(cell, missing)`` for the cells that need candidates next round.

        Balanced rounds ask each form for its own share. Later rounds ask, per horizon, only the
        form that passes the filter more often, for everything the horizon still lacks.
        """
        out = []
        for h in self.horizons:
            if balanced:
                for same in (True, False):
                    if self.kept((h, same)) < self.share[(h, same)]:
                        out.append(((h, same), self.share[(h, same)] - self.kept((h, same))))
                continue
            missing = sum(self.share[(h, same)] - self.kept((h, same)) for same in (True, False))
            if missing > 0:
                out.append(((h, self.pass_rate((h, True)) >= self.pass_rate((h, False))), missing))
        return out

    def draw_size(self, cell: Cell, missing: int, half: int) -> int:
        """Candidates to draw for ``cell``: about 1.5 times what its pass rate says is missing.

        A rarely passing cell (short horizons) so needs few rounds; the size stays within
        ``[half, 16 * half]``.
        """
        return int(np.clip(np.ceil(1.5 * missing / self.pass_rate(cell)), half, 16 * half))

    def add(self, cells: Sequence[Cell], candidates: Candidates, returns: np.ndarray, keep: np.ndarray) -> None:
        """Pool the kept candidates of a labelled round.

        Args:
            cells: the cells the round drew candidates for.
            candidates: the round's C candidates.
            returns: (2, C, R) their returns (side a, side b).
            keep: (C,) bool, which passed the filter.
        """
        for h, same in cells:
            in_cell = (candidates.horizon == h) & (candidates.same_state == same)
            counts = self.counts[cell_name((h, same))]
            counts["candidates"] += int(in_cell.sum())
            counts["kept"] += int((in_cell & keep).sum())
            rows = np.flatnonzero(in_cell & keep)
            self.survivors[(h, same)].append(candidates.take(rows))
            self.returns[(h, same)].append(returns[:, rows])

    def _pool(self, cell: Cell) -> tuple[Candidates, np.ndarray]:
        """All survivors of a non-empty ``cell`` and their (2, k, R) returns."""
        return Candidates.concat(self.survivors[cell]), np.concatenate(self.returns[cell], axis=1)

    def _takes(self, h: int, sizes: dict[bool, int]) -> dict[bool, int]:
        """Survivors to take per form of horizon ``h``; a short form is made up by the other."""
        take = {same: min(self.share[(h, same)], sizes[same]) for same in (True, False)}
        for same in (True, False):
            extra = self.share[(h, not same)] - take[not same]
            if extra > 0:
                take[same] = min(sizes[same], take[same] + extra)
        return take

    def shortfall(self) -> dict[int, int]:
        """``{horizon: queries missing}`` for the horizons that lack survivors (empty when complete)."""
        out = {}
        for h in self.horizons:
            take = self._takes(h, {same: self.kept((h, same)) for same in (True, False)})
            missing = self.share[(h, True)] + self.share[(h, False)] - take[True] - take[False]
            if missing > 0:
                out[h] = int(missing)
        return out

    def select(self, rng: np.random.Generator) -> tuple[Candidates, np.ndarray]:
        """Draw each cell's share at random from its survivors.

        Returns:
            ``(chosen, returns)``: the N chosen candidates sorted by horizon, same-state first
            (within a cell in the order they were labelled), and their (2, N, R) returns.

        Raises:
            RuntimeError: some horizon lacks survivors (see :meth:`shortfall`).
        """
        short = self.shortfall()
        if short:
            raise RuntimeError(f"horizons {sorted(short)} lack {short} queries that pass the filter")
        chosen, chosen_returns = [], []
        for h in self.horizons:
            take = self._takes(h, {same: self.kept((h, same)) for same in (True, False)})
            for same in (True, False):
                if take[same] == 0:
                    continue
                candidates, returns = self._pool((h, same))
                rows = np.sort(rng.choice(self.kept((h, same)), size=take[same], replace=False))
                chosen.append(candidates.take(rows))
                chosen_returns.append(returns[:, rows])
        selected = Candidates.concat(chosen)
        order = np.lexsort((~selected.same_state, selected.horizon))
        return selected.take(order), np.concatenate(chosen_returns, axis=1)[:, order]
