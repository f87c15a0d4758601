"""Sample-dependent focal parameters as data: FLSD-53 and FLSD-532 (Mukhoti et al. 2020, Sec. 4, App. E).

A :class:`GammaSchedule` maps the predicted probability of the true class to a gamma; the schedules of the
paper, what they do to the gradient factor, the intervals of p they up-weight, and a schedule designed from
Prop. 2. The epoch-scheduled FLSc losses are training losses: :class:`calib.losses.functional.EpochScheduledFocalLoss`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from calib._validate import as_float_array
from calib.focal.numerics import as_probability, scalar_or_array
from calib.focal.gradient import gamma_star, gradient_factor, threshold

__all__ = ["GammaSchedule", "FLSD_53", "FLSD_53_TABLE4", "FLSD_532", "SCHEDULES", "schedule_gamma",
           "effective_gradient_factor", "upweighted_intervals", "schedule_from_prop2"]


@dataclass(frozen=True)
class GammaSchedule:
    """A sample-dependent focal parameter: gamma = gammas[i] when p_hat_{i, y_i} falls in bin i.

    The bins are cut at ``edges`` (increasing, inside (0, 1)): with ``closed="left"`` they are
    [0, e1), [e1, e2), ..., [ek, 1] (Mukhoti et al. 2020, Sec. 4 and 5.1); with ``closed="right"`` they are
    [0, e1], (e1, e2], ..., (ek, 1] (the Table 4 caption's convention).
    """

    name: str
    edges: tuple
    gammas: tuple
    closed: str = "left"
    where: str = ""

    def __post_init__(self):
        edges = tuple(float(e) for e in self.edges)
        gammas = tuple(float(g) for g in self.gammas)
        if len(gammas) != len(edges) + 1:
            raise ValueError(f"a schedule with {len(edges)} edges needs {len(edges) + 1} gammas; got {len(gammas)}.")
        if any(not 0 < e < 1 for e in edges) or any(b <= a for a, b in zip(edges, edges[1:])):
            raise ValueError(f"edges must increase strictly inside (0, 1); got {edges}.")
        if any(not (np.isfinite(g) and g >= 0) for g in gammas):
            raise ValueError(f"gammas must be finite and >= 0; got {gammas}.")
        if self.closed not in ("left", "right"):
            raise ValueError(f"closed={self.closed!r} is not supported; choose 'left' ([e_i, e_i+1)) or 'right'.")
        object.__setattr__(self, "edges", edges)
        object.__setattr__(self, "gammas", gammas)


#: FLSD-53, gamma = 5 for p in [0, 0.2) and 3 for p in [0.2, 1] (Mukhoti et al. 2020, Sec. 4 and 5.1).
FLSD_53 = GammaSchedule("FLSD-53", (0.2,), (5.0, 3.0), "left", "Mukhoti et al. (2020), Sec. 4, Sec. 5.1")
#: FLSD-53 as the Table 4 caption writes it, gamma = 5 on [0, 0.2] and 3 on (0.2, 1].
FLSD_53_TABLE4 = GammaSchedule("FLSD-53 (Table 4 caption)", (0.2,), (5.0, 3.0), "right",
                               "Mukhoti et al. (2020), Table 4 caption")
#: FLSD-532, gamma = 5 on [0, 0.2), 3 on [0.2, 0.5) and 2 on [0.5, 1] (Mukhoti et al. 2020, App. E).
FLSD_532 = GammaSchedule("FLSD-532", (0.2, 0.5), (5.0, 3.0, 2.0), "left", "Mukhoti et al. (2020), App. E")
#: The schedules by their loss names.
#:
#: :meta hide-value:
SCHEDULES = {"flsd-53": FLSD_53, "flsd-532": FLSD_532}


def schedule_gamma(schedule: GammaSchedule, p):
    """The gamma a sample-dependent schedule assigns to each true-class probability p (in [0, 1])."""
    p = as_probability(p, "p")
    side: Literal["left", "right"] = "right" if schedule.closed == "left" else "left"
    index = np.searchsorted(np.asarray(schedule.edges), p, side=side)
    return scalar_or_array(np.asarray(schedule.gammas)[index])


def effective_gradient_factor(schedule: GammaSchedule, p):
    """g_eff(p) = g(p, gamma(p)): the gradient factor of focal loss under a sample-dependent schedule.

    FL with gamma chosen per sample from p (treated as a constant, no gradient through the choice) has
    per-sample gradient g(p, gamma(p)) times the cross-entropy gradient (Mukhoti et al. 2020, Prop. 1, Sec. 4).
    """
    p = as_probability(p, "p")
    return gradient_factor(p, schedule_gamma(schedule, p))


def upweighted_intervals(schedule: GammaSchedule) -> tuple:
    """The intervals of p where the schedule's effective gradient factor exceeds 1 (hard samples up-weighted).

    On bin i with gamma_i > 0, g(p, gamma_i) > 1 exactly for p < threshold(gamma_i); adjacent pieces are
    merged (pieces that meet within 1e-12, as when gamma_i = gamma*(edge)). Elsewhere in (0, 1] g_eff < 1, apart
    from the single points p = threshold(gamma_i) where g = 1 (and bins with gamma = 0, where g = 1). End points are
    reported as numbers, not as open or closed.

    Returns
    -------
    tuple of (lo, hi) pairs of floats, increasing.
    """
    bounds = (0.0, *schedule.edges, 1.0)
    pieces = []
    for lo, hi, gam in zip(bounds[:-1], bounds[1:], schedule.gammas):
        if gam == 0:
            continue
        p0 = float(threshold(gam))
        if p0 - lo > 1e-12:          # a piece shorter than that is rounding, as when gamma = gamma*(lo)
            pieces.append([lo, min(hi, p0)])
    merged: list[list[float]] = []
    for lo, hi in pieces:
        if merged and abs(merged[-1][1] - lo) <= 1e-12:   # adjacent up to rounding of threshold(gamma*(edge))
            merged[-1][1] = hi
        else:
            merged.append([lo, hi])
    return tuple((lo, hi) for lo, hi in merged)


def schedule_from_prop2(edges, p0: float, name: str | None = None) -> GammaSchedule:
    """A piecewise-constant schedule whose effective g crosses 1 exactly once, at p0 (Prop. 2 design).

    Since g(p, gamma) > 1 exactly when 0 < gamma < gamma*(p) (for p < 1/2), and gamma* decreases:

    - on a bin [lo, hi) entirely below p0, g_eff > 1 throughout iff gamma <= gamma*(hi); the largest such
      gamma, gamma*(hi), is chosen (strongest up-weighting of hard samples);
    - on the bin holding p0, gamma = gamma*(p0) makes g cross 1 at p0;
    - on a bin [lo, hi) above p0, g_eff < 1 iff gamma >= gamma*(lo) (any gamma > 0 when lo >= 1/2); the
      smallest such gamma, gamma*(lo), is chosen (mildest down-weighting), or, when lo >= 1/2, the gamma of
      the bin before.

    FLSD-53 is close to ``schedule_from_prop2([0.2], 0.25)`` (gammas 4.85 and 3.07) rounded to integers.

    Parameters
    ----------
    edges : sequence of float
        Increasing bin edges inside (0, 1); bins are closed on the left.
    p0 : float
        Target threshold in (0, 1/2), not equal to an edge.
    """
    edges = tuple(float(e) for e in np.atleast_1d(as_float_array(edges, "edges", ndim=(0, 1))))
    if not (0 < edges[0] and edges[-1] < 1 and all(a < b for a, b in zip(edges, edges[1:]))):
        raise ValueError(f"edges must increase strictly inside (0, 1); got {list(edges)}.")
    p0 = float(as_float_array(p0, "p0", ndim=0))
    if not 0 < p0 < 0.5:
        raise ValueError(f"p0 must lie in (0, 1/2) (Prop. 2 has no positive gamma* elsewhere); got {p0!r}.")
    if p0 in edges:
        raise ValueError(f"p0={p0} coincides with an edge; move it inside a bin.")
    bounds = (0.0, *edges, 1.0)
    gammas: list[float] = []
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        if hi < p0:
            gammas.append(float(gamma_star(hi)))
        elif lo < p0:
            gammas.append(float(gamma_star(p0)))
        elif lo < 0.5:
            gammas.append(float(gamma_star(lo)))
        else:
            gammas.append(gammas[-1])
    label = name or f"Prop. 2 schedule (p0 = {p0:g}, edges {', '.join(f'{e:g}' for e in edges)})"
    return GammaSchedule(label, edges, tuple(gammas), "left", "designed from Mukhoti et al. (2020), Prop. 2")
