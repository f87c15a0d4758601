"""The edge check of a grid search: whether the best temperature lies at or near an end of its grid, where the
optimum may lie beyond it (:class:`GridEdgeWarning`). Temperature scaling's ECE grid and focal temperature scaling's
(gamma, T) grid use it.
"""

from __future__ import annotations

import math
import warnings
from typing import Callable

import numpy as np

__all__ = ["EDGE_SHARE", "GridEdgeWarning", "grid_edge"]

#: The share of a grid's points at each end that count as its edge, at least one point. A best score there, or
#: one that the edge matches within sampling noise, means that the optimum may lie beyond the grid
#: (GridEdgeWarning).
EDGE_SHARE = 0.05


class GridEdgeWarning(UserWarning):
    """A grid search found its best value at or near the grid's first or last point: the optimum may lie beyond."""


def grid_edge(grid: np.ndarray, scores: np.ndarray, noise: float, widen: Callable[[str], str]) -> str | None:
    """"low" or "high" when the best score is at an end of ``grid`` (warning), else None.

    An end is the first or last ``EDGE_SHARE`` of the grid's points (at least one). It is reported when the best
    score lies there, or when the best score there is within ``noise`` of the best score: for a noisy objective
    (a binned ECE on a finite validation set), a minimum a few steps inside the grid cannot be told apart from
    one at its end. ``widen(edge)`` says how to widen the grid.
    """
    if grid.size < 2:
        return None
    order = np.argsort(grid, kind="stable")
    g, s = grid[order], scores[order]
    m = max(1, math.ceil(EDGE_SHARE * g.size)) if noise > 0 else 1
    best_at = int(np.argmin(s))
    best = float(s[best_at])
    near = {"low": float(s[:m].min()) - best, "high": float(s[-m:].min()) - best}
    edge = ("low" if best_at < m else "high" if best_at >= g.size - m else
            min((e for e in near if near[e] <= noise), key=near.get, default=None))
    if edge is not None:
        t, end = float(g[best_at]), float(g[0] if edge == "low" else g[-1])
        why = (f"at the grid's {'smallest' if edge == 'low' else 'largest'} temperature" if t == end else
               f"within {noise:.2g} (the sampling noise of the objective) of the best score among the grid's "
               f"{'lowest' if edge == 'low' else 'highest'} {m} temperatures (up to T = {end:g})" if best_at >= m
               and best_at < g.size - m else f"among the grid's {m} {'lowest' if edge == 'low' else 'highest'} "
               f"temperatures (the end is T = {end:g})")
        warnings.warn(f"the best temperature on the grid, T = {t:g} (score {best:.4g}), is {why}; the optimum "
                      f"may lie {'below' if edge == 'low' else 'beyond'} T = {end:g}. Widen the grid, e.g. "
                      f"{widen(edge)}.", GridEdgeWarning, stacklevel=3)
    return edge
