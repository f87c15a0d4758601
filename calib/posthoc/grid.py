"""The edge check of a search: whether the best value of a one-parameter search lies at or near an end of what was
searched, where the optimum may lie beyond it. A grid search that ends at or near an end of its grid warns
:class:`GridEdgeWarning` (temperature scaling's ECE grid, focal temperature scaling's (gamma, T) grid and the T grids
and the line of its line search); a bounded continuous search that ends on its bound warns
:class:`SearchBoundWarning` (TS-SB-ECE's L-BFGS-B over ``T_RANGE``).
"""

from __future__ import annotations

import math
import warnings
from typing import Callable

import numpy as np

__all__ = ["EDGE_SHARE", "GridEdgeWarning", "SearchBoundWarning", "grid_edge"]

#: The share of a grid's points at each end that count as its edge, at least one point. A best score there, or
#: one that the edge matches within sampling noise, means that the optimum may lie beyond the grid
#: (GridEdgeWarning).
EDGE_SHARE = 0.05


class GridEdgeWarning(UserWarning):
    """A grid search found its best value at or near the grid's first or last point: the optimum may lie beyond."""


class SearchBoundWarning(UserWarning):
    """A bounded continuous search ended on its bound: the objective still decreases there, so its optimum lies
    beyond the bound or does not exist (the sibling of :class:`GridEdgeWarning` for searches without a grid)."""


def grid_edge(grid: np.ndarray, scores: np.ndarray, noise: float, widen: Callable[[str], str], *,
              parameter: str = "temperature", symbol: str = "T", search: str = "grid", subject: str = "",
              edges: tuple[str, ...] = ("low", "high"), widen_what: str | None = None,
              warn: bool = True, stacklevel: int = 3) -> str | None:
    """"low" or "high" when the best score is at an end of ``grid`` (warning), else None.

    An end is the first or last ``EDGE_SHARE`` of the grid's points (at least one). It is reported when the best
    score lies there, or when the best score there is within ``noise`` of the best score: for a noisy objective
    (a binned ECE on a finite validation set), a minimum a few steps inside the grid cannot be told apart from
    one at its end. ``widen(edge)`` says how to widen the grid.

    Parameters
    ----------
    grid, scores : numpy.ndarray
        The searched values of the parameter (any order) and the score at each (lower is better).
    noise : float
        The objective's sampling noise (0 for an exact objective).
    widen : callable
        ``widen(edge)``: an example of a wider search, quoted in the warning.
    parameter, symbol, search : str
        How the warning names the parameter (``"temperature"``, ``"T"``) and the search (``"grid"``, ``"line"``).
    subject : str
        Text put before the warning (which search of several it is about).
    edges : tuple of str
        The ends that may be reported; leave out an end that is a bound of the parameter's domain, where no wider
        search exists (gamma = -1 of the focal map).
    widen_what : str, optional
        What the advice widens (default: "the <search>").
    warn : bool
        False: return the edge without warning (a caller that reports several searches in one warning).
    stacklevel : int
        ``warnings.warn``'s: 3 points at the caller of the function that calls this one.
    """
    if grid.size < 2:
        return None
    order = np.argsort(grid, kind="stable")
    g, s = grid[order], scores[order]
    m = max(1, math.ceil(EDGE_SHARE * g.size)) if noise > 0 else 1
    best_at = int(np.argmin(s))
    best = float(s[best_at])
    near = {"low": float(s[:m].min()) - best, "high": float(s[-m:].min()) - best}
    # an end whose best score is within the noise of the best, the nearer one (0: the best point lies there)
    edge = min((e for e in near if near[e] <= noise), key=near.__getitem__, default=None)
    if edge not in edges:
        return None
    if not warn:
        return edge
    plural = f"{parameter}s"
    t, end = float(g[best_at]), float(g[0] if edge == "low" else g[-1])
    why = (f"at the {search}'s {'smallest' if edge == 'low' else 'largest'} {parameter}" if t == end else
           f"within {noise:.2g} (the sampling noise of the objective) of the best score among the {search}'s "
           f"{'lowest' if edge == 'low' else 'highest'} {m} {plural} (up to {symbol} = {end:g})" if best_at >= m
           and best_at < g.size - m else f"among the {search}'s {m} {'lowest' if edge == 'low' else 'highest'} "
           f"{plural} (the end is {symbol} = {end:g})")
    warnings.warn(f"{subject}the best {parameter} on the {search}, {symbol} = {t:g} (score {best:.4g}), is {why}; "
                  f"the optimum may lie {'below' if edge == 'low' else 'beyond'} {symbol} = {end:g}. Widen "
                  f"{widen_what or 'the ' + search}, e.g. {widen(edge)}.", GridEdgeWarning, stacklevel=stacklevel)
    return edge
