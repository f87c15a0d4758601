"""The focal family as numpy functions of the predicted probability p.

Focal loss (Lin et al. 2017) for a sample whose true class gets probability p is
``L_f = -(1 - p)**gamma * log(p)``; gamma = 0 is cross-entropy ``L_c = -log(p)``. Everything here is float64,
vectorised (array inputs broadcast) and accepts numpy arrays or torch tensors; torch is never imported, except
by :func:`focal_map`, which computes a torch input in torch (differentiably) and keeps float32 input in float32.

Contents, by the paper result they implement (Mukhoti et al. 2020 unless said otherwise):

- the gradient factor g(p, gamma) of Prop. 1 / Eq. 7, with its p-derivative (Eq. 8):
  :func:`gradient_factor`, :func:`gradient_factor_dp`;
- the threshold p0(gamma) where g crosses 1 (Sec. 4) and its inverse, the Lambert-W closed form gamma*(p0)
  of Prop. 2 / Eq. 12: :func:`threshold`, :func:`gamma_star`, with the paper's printed expressions for both
  Lambert-W branches (Eqs. 12, 13) in :func:`lambert_gamma` and :func:`lambert_argument`;
- sample-dependent gamma schedules as data (FLSD-53, FLSD-532; Sec. 4, App. E) and what they do to g:
  :class:`GammaSchedule`, :func:`schedule_gamma`, :func:`effective_gradient_factor`,
  :func:`upweighted_intervals`, :func:`schedule_from_prop2`;
- the minimiser of the focal risk for a target distribution q (App. A, Eq. 5, Fig. 6, footnote 1) and its
  closed-form inverse q proportional to p / g(p, gamma): :func:`focal_optimal_prediction`,
  :func:`focal_prediction_target`;
- the general focal loss and the entropy-regularised bound of Eq. 4 (App. A): :func:`focal_loss`,
  :func:`entropy_regularised_bound`;
- random linear-softmax batches for per-sample versus per-batch gradient comparisons (Prop. 1):
  :func:`random_linear_softmax_batches`;
- Charoenphakdee et al. (2021): the map Psi^gamma of Thm. 11 applied to logits, in log space (float32-safe;
  numpy or torch, differentiable), which is also Komisarenko & Kull (2024)'s focal calibration map:
  :func:`focal_map`; the over-confidence threshold tau_oc of Thm. 8 (tau_uc is :func:`threshold`):
  :func:`tau_oc`; log h^gamma (Eq. 13): :func:`log_focal_weight`; and a direct minimiser of the focal risk
  that checks Thm. 11 and :func:`focal_optimal_prediction` (which is the inverse of Psi^gamma):
  :func:`minimise_focal_risk`;
- Komisarenko & Kull (2024): the binary focal calibration map on logits, logit FC(s) = (gamma+1) s - log
  f_gamma(s) (Prop. 3, App. A.3): :func:`focal_calibration_logit`, :func:`log_f_gamma`,
  :func:`effective_inverse_temperature`; the temperature-scaling bounds of Prop. 3 as corrected, and the sharp
  band: :func:`ts_bounds`; the closest temperature by the paper's minimax criterion (Figs. 2, 5-7) and the
  distance it minimises: :func:`closest_temperature`, :func:`ts_distance`; the top-label change of Prop. 5:
  :func:`top_label_gain`.

Later sections (the focal calibration map, temperature bounds) build on the same private helpers
(:func:`_log_gradient_factor`, the logit-space forms and :func:`_solve_increasing`).
"""

from __future__ import annotations

import numbers
import warnings
from dataclasses import dataclass

import numpy as np
from scipy.optimize import minimize
from scipy.special import expit, lambertw, softmax, xlogy

from calib._validate import as_float_array, as_scores, check_finite, check_int, check_positive, to_numpy

__all__ = [
    "gradient_factor", "gradient_factor_dp", "threshold", "gamma_star", "lambert_gamma", "lambert_argument",
    "GammaSchedule", "FLSD_53", "FLSD_53_TABLE4", "FLSD_532", "SCHEDULES", "schedule_gamma",
    "effective_gradient_factor", "upweighted_intervals", "schedule_from_prop2",
    "focal_optimal_prediction", "focal_prediction_target", "focal_loss", "entropy_regularised_bound",
    "random_linear_softmax_batches",
]


# ------------------------------------------------------------------------------------------ input checks

def _as_probability(p, name: str) -> np.ndarray:
    arr = as_float_array(p, name)
    if arr.size and (arr.min() < 0 or arr.max() > 1):
        bad = arr[(arr < 0) | (arr > 1)].ravel()[0]
        raise ValueError(f"{name} must lie in [0, 1]; found {bad!r}. Pass probabilities, e.g. a softmax output.")
    return arr


def _as_gamma(gamma, name: str = "gamma", *, positive: bool = False, why: str = "") -> np.ndarray:
    arr = as_float_array(gamma, name)
    bad = (arr <= 0) if positive else (arr < 0)
    if np.any(bad):
        value = arr[bad].ravel()[0]
        bound = "> 0" if positive else ">= 0"
        raise ValueError(f"{name} must be {bound}; found {value!r}.{(' ' + why) if why else ''}")
    return arr


def _scalar_or_array(x: np.ndarray):
    """A 0-d result as a numpy float64 scalar, anything else unchanged."""
    return x[()] if isinstance(x, np.ndarray) and x.ndim == 0 else x


# ------------------------------------------------------------------------- g(p, gamma) in p and in logit

def _r_of_p(p: np.ndarray) -> np.ndarray:
    """r(p) = -p log(p) / (1 - p), continued by r(0) = 0 and r(1) = 1, so that g = (1-p)^gamma (1 + gamma r)."""
    q = 1.0 - p
    with np.errstate(divide="ignore", invalid="ignore"):
        r = -xlogy(p, p) / q
    return np.where(q > 0, r, 1.0)


def _log_gradient_factor(p: np.ndarray, gamma: np.ndarray) -> np.ndarray:
    """log g(p, gamma) = gamma log(1 - p) + log(1 + gamma r(p)); -inf at p = 1 (gamma > 0), 0 for gamma = 0."""
    with np.errstate(divide="ignore", invalid="ignore"):
        out = gamma * np.log1p(-p) + np.log1p(gamma * _r_of_p(p))
    return np.where(gamma == 0, 0.0, out)


def _softplus(s: np.ndarray) -> np.ndarray:
    return np.logaddexp(0.0, s)


def _r_of_logit(s: np.ndarray) -> np.ndarray:
    """r(p) at p = expit(s): e^s softplus(-s), accurate for p near 0 and near 1."""
    with np.errstate(over="ignore", under="ignore", invalid="ignore", divide="ignore"):
        u = np.exp(-np.abs(s))                        # <= 1, never overflows
        right = np.where(u > 0, np.log1p(u) / u, 1.0)  # s >= 0: log1p(e^-s) / e^-s
        left = u * _softplus(-s)                       # s < 0: e^s softplus(-s)
    return np.where(s >= 0, right, left)


def _log_g_logit(s: np.ndarray, gamma: np.ndarray):
    """log g at p = expit(s) and its derivative in s: (-gamma softplus(s) + log1p(gamma r), ...)."""
    p = expit(s)
    r = _r_of_logit(s)
    gr = gamma * r
    value = -gamma * _softplus(s) + np.log1p(gr)
    slope = -gamma * p + gamma * (r - p) / (1.0 + gr)   # uses dr/ds = r - p
    return value, slope


def gradient_factor(p, gamma):
    """The focal-loss gradient factor g(p, gamma) of Proposition 1.

    ``g(p, gamma) = (1 - p)**gamma - gamma * p * (1 - p)**(gamma - 1) * log(p)``, so that
    ``dL_f/dp = g(p, gamma) * dL_c/dp`` for L_f = -(1-p)^gamma log p and L_c = -log p; by the chain rule the
    same factor relates the gradients with respect to every parameter that p depends on.

    Mukhoti et al. (2020), Prop. 1 and Eq. 7.

    Parameters
    ----------
    p : array_like
        Probability of the true class, in [0, 1] (``p_hat_{i, y_i}`` in the paper).
    gamma : array_like
        Focal parameter, >= 0; broadcasts against ``p``. gamma = 0 gives g = 1 (cross-entropy).

    Returns
    -------
    numpy.ndarray or numpy.float64
        g(p, gamma) >= 0, with the limits g(0, gamma) = 1 and g(1, gamma) = 0 for gamma > 0.

    Notes
    -----
    Computed as ``exp(gamma * log1p(-p)) * (1 + gamma * r(p))`` with ``r(p) = -p log p / (1 - p)`` (r(1) = 1),
    which is finite at p = 1 for every gamma, including gamma < 1 where the printed form is 0 * inf, and keeps
    its relative precision for large gamma.
    """
    p = _as_probability(p, "p")
    gamma = _as_gamma(gamma)
    p, gamma = np.broadcast_arrays(p, gamma)
    with np.errstate(divide="ignore", invalid="ignore"):
        power = np.where(gamma == 0, 1.0, np.exp(gamma * np.log1p(-p)))   # (1-p)^gamma, 0^0 = 1
        out = power * (1.0 + gamma * _r_of_p(p))
    return _scalar_or_array(out)


def gradient_factor_dp(p, gamma):
    """The derivative dg/dp of the gradient factor, Eq. 8 of Mukhoti et al. (2020), App. C.

    ``dg/dp = gamma (1-p)**(gamma-2) [-2(1-p) - (1-p) log p + (gamma-1) p log p]`` for p in (0, 1); it tends
    to +inf as p -> 0 (for gamma > 0) and, as p -> 1, to 0 (gamma > 1), -2 (gamma = 1) or -inf (gamma < 1).

    Parameters
    ----------
    p : array_like
        Probabilities in (0, 1).
    gamma : array_like
        Focal parameter, >= 0.
    """
    p = _as_probability(p, "p")
    if np.any((p == 0) | (p == 1)):
        raise ValueError("p must lie in the open interval (0, 1) for dg/dp; it is unbounded at p = 0 "
                         "(and at p = 1 when gamma < 1). Drop the end points.")
    gamma = _as_gamma(gamma)
    p, gamma = np.broadcast_arrays(p, gamma)
    lp = np.log(p)
    bracket = -2 * (1 - p) - (1 - p) * lp + (gamma - 1) * p * lp        # Eq. 9
    return _scalar_or_array(gamma * (1 - p) ** (gamma - 2) * bracket)


# ----------------------------------------------------------------------- a vectorised bracketed Newton

def _solve_increasing(fun, x0, lo, hi, *, xtol=4e-16, newton_tol=None, maxiter=200):
    """Solve f(x) = 0 element-wise, for f with f < 0 left of the root and f > 0 right of it on [lo, hi].

    ``fun(x, index)`` returns ``(f, df)`` at the points ``x`` of the elements ``index``. Newton steps are
    taken when they move towards the root and stay strictly inside the current bracket; bisection otherwise.
    An element stops when its Newton step is below ``xtol * max(1, |x|)`` (that step is taken) or its
    bracket is that narrow; with ``newton_tol``, also after a Newton step below ``newton_tol * max(1, |x|)``
    (for smooth f, quadratic convergence then leaves an error of order newton_tol**2).
    """
    x = np.array(x0, dtype=float, copy=True).ravel()
    lo = np.array(lo, dtype=float, copy=True).ravel()
    hi = np.array(hi, dtype=float, copy=True).ravel()
    active = np.arange(x.size)
    for _ in range(maxiter):
        if active.size == 0:
            break
        xa = x[active]
        f, df = fun(xa, active)
        la = np.where(f < 0, xa, lo[active])
        ha = np.where(f > 0, xa, hi[active])
        lo[active], hi[active] = la, ha
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            step = f / df
        xn = xa - step
        scale = np.maximum(1.0, np.abs(xa))
        converged = (f == 0) | (np.isfinite(step) & (np.abs(step) <= xtol * scale))
        bad = ~converged & (~np.isfinite(xn) | (xn <= la) | (xn >= ha) | ((f < 0) & (xn <= xa))
                            | ((f > 0) & (xn >= xa)))
        xn = np.where(bad, 0.5 * (la + ha), np.where(f == 0, xa, xn))
        x[active] = xn
        done = converged | (ha - la <= xtol * scale)
        if newton_tol is not None:
            done |= ~bad & (np.abs(step) <= newton_tol * scale)
        active = active[~done]
    return x


# ------------------------------------------------------------------------- Prop. 2: gamma* and p0(gamma)

def _log1pmx(x: np.ndarray, log1p_x: np.ndarray | None = None) -> np.ndarray:
    """x - log(1 + x) for x >= 0, accurate near 0 (a series below 0.1); ``log1p_x`` if already computed."""
    out = x - (np.log1p(x) if log1p_x is None else log1p_x)
    small = np.flatnonzero(x < 0.1)
    if small.size:
        xs = x[small]
        # sum_{k>=2} (-1)^k x^k / k by Horner, 18 terms: error < 0.1**18 relative to x^2 / 2
        acc = np.zeros_like(xs)
        for k in range(19, 1, -1):
            acc = acc * xs + (-1.0) ** k / k
        out[small] = acc * xs * xs
    return out


#: x(eps) = 2 eps + 8/3 eps^2 + ... solves (x - log1p(x)) / x = eps (series reversion, exact rationals)
_X_OF_EPS = (2.0, 8 / 3, 28 / 9, 464 / 135, 1496 / 405, 11072 / 2835, 173728 / 42525)


def _prop2_m_and_eps(p0: np.ndarray):
    """m = (1-p0) log(1-p0) / (p0 log p0) = -w0 and eps = 1 - m, each to full relative precision."""
    b = p0 * np.log(p0)
    m = (1 - p0) * np.log1p(-p0) / b
    eps = 1.0 - m
    # near p0 = 1/2, 1 - m cancels; with u = 1 - 2 p0 (exact for p0 >= 1/4) the numerator
    # p0 log p0 - (1-p0) log(1-p0) equals u log 2 - atanh(u) - (u/2) log(1 - u^2), without cancellation.
    upper = np.flatnonzero((p0 >= 0.25) & (p0 < 0.75))
    if upper.size:
        u = 1.0 - 2.0 * p0[upper]
        eps[upper] = (u * np.log(2.0) - np.arctanh(u) - 0.5 * u * np.log1p(-u * u)) / b[upper]
    return m, eps, b


def gamma_star(p0):
    """gamma*(p0): the gamma > 0 with g(p0, gamma) = 1, by the Lambert-W closed form of Proposition 2.

    ``gamma* = a/b + W_{-1}(z) / log(a)``, with ``a = 1 - p0``, ``b = p0 log p0`` and
    ``z = -(a**(1 - a/b) / b) log(a)``; for every gamma >= gamma*, g(p, gamma) <= 1 on [p0, 1]. It is the
    inverse of :func:`threshold`: ``threshold(gamma_star(p0)) == p0``.

    Mukhoti et al. (2020), Prop. 2 and Eq. 12 (App. C); W_{-1} is the lower real branch of Lambert W
    (Corless et al. 1996).

    Parameters
    ----------
    p0 : array_like
        Thresholds in the open interval (0, 1/2).

    Returns
    -------
    numpy.ndarray or numpy.float64
        gamma* > 0, decreasing from +inf (p0 -> 0) to 0 (p0 -> 1/2); gamma*(1/e) = 1.

    Raises
    ------
    ValueError
        If some p0 is outside (0, 1/2): for p0 >= 1/2, g(p0, gamma) < 1 for every gamma > 0, so the only
        root is the trivial gamma = 0 (the printed W_{-1} expression returns 0, or nan at p0 = 1/2).

    Notes
    -----
    With ``w0 = -(a/b) log a`` one has ``z = w0 exp(w0)``: w0 is the W_0 root (it gives gamma = 0) and
    ``W_{-1}(z) = w0 (1 + x)`` with x > 0 solving ``log(1 + x) = m x``, ``m = -w0``. So
    ``gamma* = x * a / |b|``. x is computed from ``scipy.special.lambertw(z, -1)`` with z formed as
    ``-m exp(-m)`` (not from the printed form, which overflows for small p0), and, near the branch point
    z = -1/e (p0 -> 1/2, where lambertw loses about half the digits), from a series in ``1 - m``; a Newton
    step on ``x - log(1 + x) = (1 - m) x`` then polishes it to full precision.
    """
    p0 = as_float_array(p0, "p0")
    bad = ~((p0 > 0) & (p0 < 0.5))
    if np.any(bad):
        value = p0[bad].ravel()[0]
        raise ValueError(
            f"p0 must lie in the open interval (0, 1/2); found {value!r}. For p0 >= 1/2, g(p0, gamma) < 1 for "
            f"every gamma > 0, so no positive gamma* exists (the only root is gamma = 0; Prop. 2's W_{{-1}} "
            f"formula returns 0 there, or nan at p0 = 1/2), and p0 <= 0 is not a probability threshold. "
            f"Pass thresholds strictly between 0 and 0.5.")
    shape = p0.shape
    p0 = p0.ravel()
    m, eps, b = _prop2_m_and_eps(p0)
    x = np.empty_like(p0)
    # initial x: Lambert W_{-1} away from the branch point, series reversion near it
    far = eps >= 0.01
    mm = m[far]
    x[far] = -lambertw(-mm * np.exp(-mm), -1).real / mm - 1.0
    near = ~far
    if np.any(near):
        e = eps[near]
        xs = np.zeros_like(e)
        for c in reversed(_X_OF_EPS):
            xs = (xs + c) * e
        x[near] = xs
    # one Newton step on h(x) = x - log1p(x) - eps x = m x - log1p(x), in whichever form keeps precision
    # (both initial values are accurate to ~1e-13 or better, so one step reaches full precision)
    log1p_x = np.log1p(x)
    h = m * x - log1p_x
    idx = np.flatnonzero(eps < 0.5)
    if idx.size:
        xe = x[idx]
        h[idx] = _log1pmx(xe, log1p_x[idx]) - eps[idx] * xe
    x = x - h / (x / (1.0 + x) - eps)
    gamma = x * (1.0 - p0) / (-b)
    return _scalar_or_array(gamma.reshape(shape))


def lambert_argument(p0):
    """z(p0) = -(a**(1 - a/b) / b) log(a), the right-hand side of Eq. 11 (App. C, Mukhoti et al. 2020).

    Computed as ``z = w0 exp(w0)`` with ``w0 = -(a/b) log a`` (an identity, see :func:`gamma_star`), which
    shows ``z >= -1/e`` with equality exactly at p0 = 1/2 (w0 = -1). Defined for p0 in (0, 1).
    """
    p0 = as_float_array(p0, "p0")
    if np.any((p0 <= 0) | (p0 >= 1)):
        raise ValueError("p0 must lie in the open interval (0, 1) for the Lambert-W argument of Eq. 11 (log p0 and "
                         "log(1 - p0) are needed); pass values strictly between 0 and 1.")
    m, _, _ = _prop2_m_and_eps(p0.ravel())
    return _scalar_or_array((-m * np.exp(-m)).reshape(p0.shape))


def lambert_gamma(p0, branch: int = -1):
    """The paper's Eq. 12 (branch -1) or Eq. 13 (branch 0) evaluated as printed, with scipy's Lambert W.

    ``gamma = a/b + W_k(z) / log(a)``, ``a = 1 - p0``, ``b = p0 log p0``,
    ``z = -(a**(1 - a/b) / b) log(a)`` (Mukhoti et al. 2020, App. C). No domain check beyond 0 < p0 < 1 and
    no polishing: this is the formula as printed, for examining what each branch gives (for p0 < 1/2,
    branch -1 gives gamma* and branch 0 the trivial root gamma = 0; for p0 > 1/2 the roles swap and
    branch -1 gives 0). Where scipy returns a non-real value (z below -1/e by rounding, e.g. at p0 = 1/2)
    the result is nan. Use :func:`gamma_star` for the accurate, checked value.

    Parameters
    ----------
    p0 : array_like
        Values in the open interval (0, 1).
    branch : {-1, 0}
        Lambert-W branch.
    """
    if branch not in (-1, 0):
        raise ValueError(f"branch must be -1 (Eq. 12) or 0 (Eq. 13); got {branch!r}.")
    p0 = as_float_array(p0, "p0")
    if np.any((p0 <= 0) | (p0 >= 1)):
        raise ValueError("p0 must lie in the open interval (0, 1): at 0 and 1 the expression divides by zero; "
                         "pass values strictly between 0 and 1.")
    a = 1.0 - p0
    b = p0 * np.log(p0)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        z = -(a ** (1.0 - a / b) / b) * np.log(a)
        w = lambertw(z, branch)
        out = a / b + w.real / np.log(a)
    out = np.where(np.abs(w.imag) > 0, np.nan, out)
    return _scalar_or_array(out)


_THRESHOLD_TABLE: tuple[np.ndarray, np.ndarray] | None = None


def _threshold_table():
    """(log gamma*(p), logit p) on a grid of p from e^-700 to 1/2 - 1e-9, increasing in log gamma*."""
    global _THRESHOLD_TABLE
    if _THRESHOLD_TABLE is None:
        s = np.concatenate([np.linspace(-700.0, -12.0, 600), np.linspace(-12.0, -4e-9, 1401)[1:]])
        log_gamma = np.log(gamma_star(expit(s)))
        _THRESHOLD_TABLE = (log_gamma[::-1].copy(), s[::-1].copy())
    return _THRESHOLD_TABLE


def threshold(gamma):
    """p0(gamma): the p in (0, 1/2) where the gradient factor crosses 1, g(p0, gamma) = 1.

    g(p, gamma) > 1 for 0 < p < p0 (focal loss up-weights the sample relative to cross-entropy) and < 1 for
    p0 < p <= 1 (it down-weights it). p0 decreases from 1/2 (gamma -> 0) to 0 (gamma -> inf); p0(1) = 1/e,
    p0(3) = 0.252584, p0(5) = 0.196803. The inverse of :func:`gamma_star`.

    Mukhoti et al. (2020), Sec. 4 ("for every gamma there exists a (different) threshold p0"), Fig. 4(a);
    App. C (the shape of g).

    Parameters
    ----------
    gamma : array_like
        Focal parameters, > 0 (at gamma = 0, g is identically 1 and there is no threshold).

    Returns
    -------
    numpy.ndarray or numpy.float64
        p0 in (0, 1/2), accurate to about 1e-15 relative.

    Notes
    -----
    Solves log g(p, gamma) = 0 in the logit s = log(p / (1 - p)), where both terms of
    ``log g = -gamma softplus(s) + log1p(gamma r)`` keep full relative precision even when p0 is tiny (large
    gamma): a vectorised Newton iteration with bisection safeguard on s in [-745, 0], started from an
    interpolation of the closed form :func:`gamma_star`.
    """
    gamma = _as_gamma(gamma, positive=True,
                      why="At gamma = 0 focal loss is cross-entropy, g(p, 0) = 1 for every p, and there is no "
                          "threshold; pass gamma > 0.")
    flat = gamma.ravel()
    log_g_tab, s_tab = _threshold_table()
    s0 = np.interp(np.log(flat), log_g_tab, s_tab)

    def fun(s, index):
        value, slope = _log_g_logit(s, flat[index])
        return -value, -slope          # -log g increases through the root

    s = _solve_increasing(fun, s0, np.full_like(s0, -745.0), np.zeros_like(s0), newton_tol=1e-9)
    return _scalar_or_array(expit(s).reshape(gamma.shape))


# ---------------------------------------------------------------------- sample-dependent gamma schedules

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


#: FLSD-53: gamma = 5 for p in [0, 0.2), 3 for p in [0.2, 1] (Mukhoti et al. 2020, Sec. 4 and 5.1).
FLSD_53 = GammaSchedule("FLSD-53", (0.2,), (5.0, 3.0), "left", "Mukhoti et al. (2020), Sec. 4, Sec. 5.1")
#: FLSD-53 as the Table 4 caption writes it: gamma = 5 on [0, 0.2], 3 on (0.2, 1].
FLSD_53_TABLE4 = GammaSchedule("FLSD-53 (Table 4 caption)", (0.2,), (5.0, 3.0), "right",
                               "Mukhoti et al. (2020), Table 4 caption")
#: FLSD-532: gamma = 5 on [0, 0.2), 3 on [0.2, 0.5), 2 on [0.5, 1] (Mukhoti et al. 2020, App. E).
FLSD_532 = GammaSchedule("FLSD-532", (0.2, 0.5), (5.0, 3.0, 2.0), "left", "Mukhoti et al. (2020), App. E")
#: The schedules by their loss names.
SCHEDULES = {"flsd-53": FLSD_53, "flsd-532": FLSD_532}


def schedule_gamma(schedule: GammaSchedule, p):
    """The gamma a sample-dependent schedule assigns to each true-class probability p (in [0, 1])."""
    p = _as_probability(p, "p")
    side = "right" if schedule.closed == "left" else "left"
    index = np.searchsorted(np.asarray(schedule.edges), p, side=side)
    return _scalar_or_array(np.asarray(schedule.gammas)[index])


def effective_gradient_factor(schedule: GammaSchedule, p):
    """g_eff(p) = g(p, gamma(p)): the gradient factor of focal loss under a sample-dependent schedule.

    FL with gamma chosen per sample from p (treated as a constant, no gradient through the choice) has
    per-sample gradient g(p, gamma(p)) times the cross-entropy gradient (Mukhoti et al. 2020, Prop. 1, Sec. 4).
    """
    p = _as_probability(p, "p")
    return gradient_factor(p, schedule_gamma(schedule, p))


def upweighted_intervals(schedule: GammaSchedule) -> tuple:
    """The intervals of p where the schedule's effective gradient factor exceeds 1 (hard samples up-weighted).

    On bin i with gamma_i > 0, g(p, gamma_i) > 1 exactly for p < threshold(gamma_i); adjacent pieces are
    merged (pieces that meet within 1e-12, as when gamma_i = gamma*(edge)). Elsewhere in (0, 1] g_eff < 1, apart from the single points p = threshold(gamma_i) where g = 1
    (and bins with gamma = 0, where g = 1). End points are reported as numbers, not as open or closed.

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
    edges = tuple(float(e) for e in np.atleast_1d(as_float_array(edges, "edges")))
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


# ------------------------------------------------------------------ focal-optimal prediction (Eq. 5, Fig. 6)

def _log_phi_logit(s: np.ndarray, gamma: np.ndarray):
    """psi(s) = log(p / g(p, gamma)) at p = expit(s) and d psi / ds (> 0)."""
    p = expit(s)
    r = _r_of_logit(s)
    gr = gamma * r
    value = -_softplus(-s) + gamma * _softplus(s) - np.log1p(gr)
    slope = (1.0 - p) + gamma * p - gamma * (r - p) / (1.0 + gr)
    return value, slope


def _as_distributions(x, name: str):
    arr = as_float_array(x, name, ndim=(1, 2))
    one = arr.ndim == 1
    rows = as_scores(arr.reshape(1, -1) if one else arr, name, kind="probs")
    return rows, one


def focal_optimal_prediction(q, gamma):
    """The prediction p_hat that minimises the expected focal loss when the label is drawn from q.

    ``p_hat = argmin_p  -sum_y q_y (1 - p_y)**gamma log p_y`` over the probability simplex; for K = 2 this is
    Eq. 5 of Mukhoti et al. (2020), App. A, plotted in their Fig. 6. The stationarity condition gives
    ``q_y proportional to p_y / g(p_y, gamma)`` (inverted by :func:`focal_prediction_target`); since
    p / g(p, gamma) increases strictly, p_hat is found by solving for the normalising constant. One-hot q
    gives p_hat = q (footnote 1); otherwise, for gamma > 0, p_hat is pulled towards the uniform distribution.

    Parameters
    ----------
    q : array_like, shape (K,) or (N, K)
        Target distributions (rows sum to 1), K >= 2.
    gamma : array_like
        Focal parameter >= 0, a scalar or one per row.

    Returns
    -------
    numpy.ndarray
        p_hat with the shape of ``q``; zero where q is zero.
    """
    rows, one = _as_distributions(q, "q")
    n, k = rows.shape
    gam = _as_gamma(gamma)
    try:
        gam = np.broadcast_to(gam, (n,) if gam.ndim <= 1 else gam.shape).astype(float)
    except ValueError:
        raise ValueError(f"gamma must be a scalar or have one value per row of q ({n}); got shape {gam.shape}.")
    if gam.shape != (n,):
        raise ValueError(f"gamma must be a scalar or have one value per row of q ({n}); got shape {gam.shape}.")
    out = np.zeros_like(rows)
    support = rows > 0
    n_support = support.sum(axis=1)
    trivial = (gam == 0) | (n_support == 1)
    out[trivial] = rows[trivial] / rows[trivial].sum(axis=1, keepdims=True)
    todo = np.flatnonzero(~trivial)
    if todo.size == 0:
        return out[0] if one else out
    qs, gs, sup = rows[todo], gam[todo], support[todo]
    log_q = np.where(sup, np.log(np.where(sup, qs, 1.0)), 0.0)
    g_cells = np.broadcast_to(gs[:, None], qs.shape)

    def invert_psi(target, gcell):
        """s with psi(s) = target, element-wise (psi increases from -inf to +inf)."""
        guess = np.clip(np.where(target < 0, target, target / (1.0 + gcell)), -740.0, 740.0)

        def fun(s, index):
            value, slope = _log_phi_logit(s, gcell[index])
            return value - target[index], slope
        return _solve_increasing(fun, guess, np.full_like(guess, -745.0), np.full_like(guess, 745.0))

    # bracket the log normaliser t: p_y = expit(psi^{-1}(t + log q_y)), sum over the support increases in t
    psi_uniform, _ = _log_phi_logit(np.full(len(todo), -np.log(k - 1.0)), gs)      # psi at p = 1/K
    psi_half, _ = _log_phi_logit(np.zeros(len(todo)), gs)                           # psi at p = 1/2
    t_lo = psi_uniform - np.log(qs.max(axis=1))
    t_hi = psi_half - np.min(np.where(sup, log_q, np.inf), axis=1)

    cells = np.flatnonzero(sup.ravel())
    row_of_cell = np.repeat(np.arange(len(todo)), k)[cells]
    log_q_cells = log_q.ravel()[cells]
    g_cells_flat = g_cells.ravel()[cells]
    last_s: dict[str, np.ndarray] = {}

    def outer(t, index):
        chosen = np.isin(row_of_cell, index)
        rows_here = row_of_cell[chosen]
        position = np.searchsorted(index, rows_here)
        target = t[position] + log_q_cells[chosen]
        s = invert_psi(target, g_cells_flat[chosen])
        _, slope = _log_phi_logit(s, g_cells_flat[chosen])
        prob = expit(s)
        total = np.bincount(position, weights=prob, minlength=len(index)) - 1.0
        d_total = np.bincount(position, weights=prob * (1.0 - prob) / slope, minlength=len(index))
        last_s["s"], last_s["chosen"] = s, chosen
        return total, d_total

    t0 = np.clip(np.zeros(len(todo)), t_lo, t_hi)
    t = _solve_increasing(outer, t0, t_lo, t_hi)
    target = t[row_of_cell] + log_q_cells
    s = invert_psi(target, g_cells_flat)
    solved = np.zeros(qs.size)
    solved[cells] = expit(s)
    solved = solved.reshape(qs.shape)
    out[todo] = solved / solved.sum(axis=1, keepdims=True)
    return out[0] if one else out


def focal_prediction_target(probs, gamma):
    """The target distribution q for which ``probs`` is the focal-optimal prediction: q proportional to p / g(p, gamma).

    The closed-form inverse of :func:`focal_optimal_prediction`, from the stationarity condition of the
    expected focal loss (Mukhoti et al. 2020, App. A, Eq. 5 and Fig. 6; footnote 1). Computed in log space;
    a row with an entry equal to 1 maps to that one-hot vector.

    Parameters
    ----------
    probs : array_like, shape (K,) or (N, K)
        Predicted distributions.
    gamma : array_like
        Focal parameter >= 0, a scalar or one per row.
    """
    rows, one = _as_distributions(probs, "probs")
    gam = _as_gamma(gamma)
    gam = np.asarray(gam, dtype=float)
    gcol = gam.reshape(-1, 1) if gam.ndim == 1 else gam
    with np.errstate(divide="ignore"):
        log_phi = np.log(rows) - _log_gradient_factor(rows, np.broadcast_to(gcol, rows.shape))
    certain = np.isposinf(log_phi)
    finite = np.where(np.isfinite(log_phi), log_phi, -np.inf)
    top = finite.max(axis=1, keepdims=True)
    with np.errstate(invalid="ignore"):          # rows holding a 1 are all -inf here; replaced below
        weights = np.exp(finite - top)
        out = weights / weights.sum(axis=1, keepdims=True)
    hit = certain.any(axis=1)
    out[hit] = certain[hit].astype(float)
    return out[0] if one else out


# ---------------------------------------------------------------------------------- Eq. 4 (App. A)

def focal_loss(probs, target, gamma):
    """The general focal loss of App. A, ``L_f = -sum_y (1 - p_y)**gamma q_y log p_y``, one value per row.

    Mukhoti et al. (2020), App. A (for one-hot q it is the focal loss of Sec. 4, Lin et al. 2017).

    Parameters
    ----------
    probs : array_like, shape (K,) or (N, K)
        Predicted distributions p_hat.
    target : array_like, same shape
        Target distributions q.
    gamma : array_like
        Focal parameter >= 0, a scalar or one per row.
    """
    p, one = _as_distributions(probs, "probs")
    q, _ = _as_distributions(target, "target")
    if q.shape != p.shape:
        raise ValueError(f"target has shape {q.shape} but probs has {p.shape}; pass one target row per prediction.")
    gcol = np.asarray(_as_gamma(gamma), dtype=float)
    gcol = gcol.reshape(-1, 1) if gcol.ndim == 1 else gcol
    with np.errstate(divide="ignore"):
        out = -np.sum((1 - p) ** gcol * xlogy(q, p), axis=1)
    return _scalar_or_array(out[0]) if one else out


def entropy_regularised_bound(probs, target, gamma):
    """The right-hand side of Eq. 4 in its App. A form, ``L_c - gamma H[p_hat] = KL(q || p_hat) + H[q] - gamma H[p_hat]``.

    Mukhoti et al. (2020), Eq. 4 and App. A: ``focal_loss(p, q, gamma) >= entropy_regularised_bound(p, q, gamma)``
    (proved there for gamma >= 1; it holds for every gamma >= 0, see chapter 02).
    """
    p, one = _as_distributions(probs, "probs")
    q, _ = _as_distributions(target, "target")
    if q.shape != p.shape:
        raise ValueError(f"target has shape {q.shape} but probs has {p.shape}; pass one target row per prediction.")
    gam = np.asarray(_as_gamma(gamma), dtype=float)
    with np.errstate(divide="ignore"):
        cross_entropy = -np.sum(xlogy(q, p), axis=1)
    entropy = -np.sum(xlogy(p, p), axis=1)
    out = cross_entropy - gam * entropy
    return _scalar_or_array(out[0]) if one else out


# ------------------------------------------------------------- per-sample vs per-batch gradients (Prop. 1)

def random_linear_softmax_batches(n_batches: int, batch_size: int = 2, n_features: int = 3, n_classes: int = 3,
                                  logit_scale: float = 3.0, seed: int = 0) -> dict:
    """Random mini-batches for a linear softmax layer z = W h, with each sample's cross-entropy gradient in W.

    For sample i the gradient of L_c = -log p_{y_i} with respect to W is ``(p_i - e_{y_i}) h_i^T``; by
    Prop. 1 of Mukhoti et al. (2020) the focal-loss gradient is ``g(p_{i, y_i}, gamma)`` times it. Summing
    over the batch compares batch gradient norms, where Prop. 1's norm inequality need not hold.

    Parameters
    ----------
    n_batches, batch_size, n_features, n_classes : int
        Sizes; weights W ~ N(0, logit_scale^2 / n_features), features h ~ N(0, 1), labels uniform.
    logit_scale : float
        Spread of the logits.
    seed : int

    Returns
    -------
    dict with ``weights`` (B, K, D), ``features`` (B, n, D), ``labels`` (B, n), ``probs`` (B, n, K),
    ``p_true`` (B, n) and ``ce_grads`` (B, n, K, D).
    """
    for name, value in (("n_batches", n_batches), ("batch_size", batch_size), ("n_features", n_features),
                        ("n_classes", n_classes)):
        if int(value) != value or value < (2 if name == "n_classes" else 1):
            raise ValueError(f"{name} must be a positive integer{' >= 2' if name == 'n_classes' else ''}; got {value!r}.")
    rng = np.random.default_rng(seed)
    weights = rng.normal(size=(n_batches, n_classes, n_features)) * logit_scale / np.sqrt(n_features)
    features = rng.normal(size=(n_batches, batch_size, n_features))
    labels = rng.integers(n_classes, size=(n_batches, batch_size))
    logits = np.einsum("bkd,bnd->bnk", weights, features)
    logits -= logits.max(axis=-1, keepdims=True)
    probs = np.exp(logits)
    probs /= probs.sum(axis=-1, keepdims=True)
    onehot = np.eye(n_classes)[labels]
    ce_grads = (probs - onehot)[..., :, None] * features[..., None, :]
    p_true = np.take_along_axis(probs, labels[..., None], axis=-1)[..., 0]
    return {"weights": weights, "features": features, "labels": labels, "probs": probs, "p_true": p_true,
            "ce_grads": ce_grads}


# ====================================================================================================
# Charoenphakdee et al. (2021): what focal loss estimates. The map Psi^gamma (= Komisarenko & Kull's
# focal calibration map) on logits, float32-safe and differentiable in torch; the over-confidence
# threshold tau_oc (tau_uc is `threshold`); log h^gamma; and a direct minimiser of the focal risk that
# cross-checks `focal_optimal_prediction` (the inverse of Psi^gamma) and Thm. 11.
# ====================================================================================================

__all__ += ["focal_map", "log_focal_map", "tau_oc", "log_focal_weight", "minimise_focal_risk"]


def _check_map_gamma(gamma) -> float:
    if isinstance(gamma, np.ndarray) and gamma.ndim == 0:
        gamma = gamma.item()
    if isinstance(gamma, (bool, np.bool_)) or not isinstance(gamma, numbers.Real):
        raise ValueError(f"gamma must be a single real number >= -1; got {gamma!r}. Call focal_map once per gamma.")
    value = float(gamma)
    if not np.isfinite(value) or value < -1:
        raise ValueError(f"gamma must be a finite number >= -1; got {gamma!r}. {_MAP_DOMAIN}")
    return value


def _log_one_minus_r(rest, log_rest, xp=np):
    """log(1 - r) at p = 1 / (1 + S), for S = ``rest`` = (1 - p) / p >= 0 with log S = ``log_rest``.

    There r = log1p(S) / S, so ``1 - r = (S - log1p(S)) / S``: for S < 0.1 (p > 0.91, where 1 - r ~ S / 2
    would cancel) it is ``S * (1/2 - S/3 + S^2/4 - ...)`` by Horner (18 terms, error < 0.1^18), in log space,
    so that it stays exact as p -> 1 and S underflows; above, ``log1p(-r)`` with 1 - r >= 0.047.
    ``xp`` is ``numpy`` or ``torch`` (one kernel for the numpy and torch paths of the map).
    """
    rest = xp.asarray(rest) if xp is np else rest
    small = rest < 0.1
    s_small = xp.where(small, rest, xp.zeros_like(rest))
    acc = xp.zeros_like(s_small)
    for k in range(19, 1, -1):
        acc = acc * s_small + (-1.0) ** k / k
    s_big = xp.where(small, xp.ones_like(rest), rest)
    return xp.where(small, log_rest + xp.log(acc), xp.log1p(-xp.log1p(s_big) / s_big))


def _log1p_gamma_r_negative(gamma, log_one_minus_r, xp=np):
    """log(1 + gamma r) for gamma in [-1, 0), as ``log((1 + gamma) + (-gamma)(1 - r))``.

    Both terms are >= 0, so nothing cancels when r -> 1 (p -> 1); at gamma = -1 it is log(1 - r), which
    tends to -inf like log((1 - p) / 2), and the weight p / g stays finite (it tends to 2). ``gamma`` is a
    float or (numpy only) an array broadcasting against ``log_one_minus_r``.
    """
    if xp is np:
        with np.errstate(divide="ignore"):
            return np.logaddexp(np.log1p(gamma), np.log(-gamma) + log_one_minus_r)
    constant = xp.full_like(log_one_minus_r, float(np.log1p(gamma)) if gamma > -1 else -float("inf"))
    return xp.logaddexp(constant, float(np.log(-gamma)) + log_one_minus_r)


#: Why the focal calibration map needs gamma >= -1 (the message of every domain check of the map).
_MAP_DOMAIN = ("The map weighs class j by v_j / g(v_j, gamma), with g(v, gamma) = (1-v)^gamma (1 + gamma r(v)) and "
               "r(v) = -v log v / (1 - v) increasing from 0 to 1 on (0, 1). For gamma >= -1, 1 + gamma r > 0 on [0, 1) "
               "and the weight is positive and finite (at gamma = -1 it tends to 2 as v -> 1); for gamma < -1, "
               "1 + gamma r changes sign at r = -1/gamma < 1, so v / g is negative for v near 1 and is not a "
               "probability weight. (Komisarenko & Kull 2024 use gamma_ev in {-0.5, -0.25}; their released code "
               "also gamma = -1.)")


#: Rows of focal_map are processed in blocks of about this many entries, so that the temporaries stay in cache.
_MAP_BLOCK_ELEMENTS = 1 << 16


def _focal_map_block(z: np.ndarray, gamma: float, out: np.ndarray, log: bool = False) -> None:
    """Write Psi^gamma(softmax(z)) (or, with ``log``, its logarithm) into ``out`` for a finite (n, K) float
    block, in z's dtype (see focal_map)."""
    n, k = z.shape
    top = np.argmax(z, axis=1)
    row_start = np.arange(0, n * k, k)
    flat = top + row_start                            # flat index of each row's top class
    u = z - z.reshape(-1)[flat][:, None]              # log(v_j / v_top) <= 0, exactly 0 at the top class
    v = np.exp(u)
    v.reshape(-1)[flat] = 0
    ones = np.ones(k, dtype=z.dtype)
    rest = v @ ones                                   # S = sum_{j != top} v_j / v_top = (1 - v_top) / v_top
    with np.errstate(divide="ignore"):
        log_rest = np.log(rest)
    under = rest < np.finfo(z.dtype).tiny * 1024      # S subnormal or 0: log S again, with a max shift
    if under.any():
        u_rest = u[under]
        u_rest.reshape(-1)[top[under] + np.arange(0, u_rest.size, k)] = -np.inf
        second = u_rest.max(axis=1)
        log_rest[under] = second + np.log(np.exp(u_rest - second[:, None]) @ ones)
    lse = np.log1p(rest)                              # -log v_top
    v *= (1 / (1 + rest))[:, None]                    # v_j (0 at the top)
    log_v = u
    log_v -= lse[:, None]                             # log v_j, accurate for every j
    log_1mv = np.negative(v)
    np.log1p(log_1mv, out=log_1mv)                    # log(1 - v_j): accurate for v_j <= 1/2, i.e. every j != top
    log_1mv.reshape(-1)[flat] = log_rest - lse        # log(1 - v_top) = log S - log(1 + S)
    r = v * log_v                                     # r = -v log v / (1 - v), in [0, 1]
    v -= 1
    r /= v
    small = log_rest < -20                            # r_top = log1p(S) / S = 1 - S/2 + ..., S < 2e-9
    with np.errstate(over="ignore"):
        r.reshape(-1)[flat] = np.where(small, 1.0, lse * np.exp(-np.where(small, 0.0, log_rest)))
    r *= gamma
    with np.errstate(divide="ignore", invalid="ignore"):   # gamma = -1, r_top = 1 (or 1 + ulp): replaced below
        np.log1p(r, out=r)                            # log(1 + gamma r)
    if gamma < 0:                                     # 1 + gamma r_top -> 1 + gamma as v_top -> 1: without cancellation
        r.reshape(-1)[flat] = _log1p_gamma_r_negative(gamma, _log_one_minus_r(rest, log_rest))
    log_1mv *= gamma
    log_h = log_v                                     # log h = log v - log g, log g = gamma log(1-v) + log(1 + gamma r)
    log_h -= log_1mv
    log_h -= r
    shift = log_h.reshape(-1)[flat] if gamma >= 0 else log_h.max(axis=1)   # the top class has the largest h
    log_h -= shift[:, None]
    np.exp(log_h, out=out)
    total = out @ ones
    if log:
        np.subtract(log_h, np.log(total)[:, None], out=out)
    else:
        out *= (1 / total)[:, None]


def _focal_map_numpy(z: np.ndarray, gamma: float, log: bool = False) -> np.ndarray:
    """Psi^gamma(softmax(z)) (or its logarithm) row-wise for a finite float (N, K) array, in blocks of rows."""
    n, k = z.shape
    out = np.empty_like(z)
    step = max(1, _MAP_BLOCK_ELEMENTS // k)
    for start in range(0, n, step):
        _focal_map_block(z[start:start + step], gamma, out[start:start + step], log=log)
    return out


def log_focal_map(logits, gamma) -> np.ndarray:
    """``log Psi^gamma(softmax(logits))``, row-wise, in float64 (numpy): :func:`focal_map` in log space, finite
    where the probabilities themselves underflow to 0 (a log-loss of a focal-calibrated model needs it).

    Komisarenko & Kull (2024), Eq. 1. ``gamma = 0`` gives ``log_softmax(logits)``.
    """
    from scipy.special import log_softmax

    gamma = _check_map_gamma(gamma)
    z = as_scores(to_numpy(logits, "logits"), "logits", kind="logits").astype(np.float64)
    return log_softmax(z, axis=1) if gamma == 0 else _focal_map_numpy(z, gamma, log=True)


def _focal_map_torch(z, gamma: float):
    """The same computation in torch, differentiable, with no inf or nan in any branch (see focal_map)."""
    import torch

    top = z.argmax(dim=1, keepdim=True)
    is_top = torch.zeros_like(z, dtype=torch.bool).scatter_(1, top, True)
    u = z - z.gather(1, top)
    log_rest = torch.logsumexp(u.masked_fill(is_top, float("-inf")), dim=1, keepdim=True)
    lse = torch.nn.functional.softplus(log_rest)   # log(1 + S) = -log v_top
    log_v = u - lse
    v = torch.where(is_top, torch.full_like(z, 0.5), log_v.exp())  # 0.5 is a placeholder, never used
    log_1mv = torch.where(is_top, log_rest - lse, torch.log1p(-v))
    small = log_rest < -20
    safe = torch.where(small, torch.zeros_like(log_rest), log_rest)
    r_top = torch.where(small, torch.ones_like(log_rest), torch.nn.functional.softplus(safe) * torch.exp(-safe))
    r = torch.where(is_top, r_top, -v * log_v / (1 - v))
    if gamma >= 0:
        log1p_gr = torch.log1p(gamma * r)
    else:                                          # as in _focal_map_block: 1 + gamma r_top without cancellation
        top_term = _log1p_gamma_r_negative(gamma, _log_one_minus_r(torch.exp(log_rest), log_rest, xp=torch), xp=torch)
        log1p_gr = torch.where(is_top, top_term, torch.log1p(gamma * torch.where(is_top, torch.zeros_like(r), r)))
    log_h = log_v - gamma * log_1mv - log1p_gr
    return torch.softmax(log_h, dim=1)


def focal_map(logits, gamma):
    r"""The focal calibration map Psi^gamma applied to softmax(logits).

    ``Psi^gamma_i(v) = h(v_i) / sum_l h(v_l)`` with ``h(v) = v / phi^gamma(v)`` and
    ``phi^gamma(v) = (1-v)^gamma - gamma (1-v)^(gamma-1) v log v``, where phi^gamma is the focal gradient
    factor g(v, gamma) of :func:`gradient_factor`. For gamma >= 0 it maps the focal risk minimiser back to
    the class posterior, ``eta = Psi^gamma(q^{gamma,*})`` (Charoenphakdee et al. 2021, Thm. 11, Eqs. 11-13);
    it is Komisarenko & Kull (2024)'s focal calibration map (Eq. 1), ``p_k`` proportional to
    ``1 / FL'(q_k)``, which they also use with gamma in [-1, 0) for focal temperature scaling.

    Parameters
    ----------
    logits : array_like or torch.Tensor, shape (N, K)
        Finite scores; ``v = softmax(logits)`` is the network's output (pass ``log(v)`` for probabilities
        without zeros).
    gamma : float
        Focal parameter, >= -1. ``gamma = 0`` gives softmax(logits) (Psi^0 is the identity). For gamma < -1 the
        weight v / phi^gamma(v) turns negative near v = 1, and the map does not exist.

    Returns
    -------
    numpy.ndarray or torch.Tensor, shape (N, K)
        Rows in the simplex, summing to 1. A numpy float32 input gives float32 (within 1e-6 of the float64
        result, see the tests); any other numpy input gives float64. A torch input gives a tensor of its
        dtype and device (half precision is computed in float32), differentiable in ``logits``.

    Raises
    ------
    ValueError
        For logits that are not a finite (N, K) array with K >= 2, or gamma < -1.

    Notes
    -----
    Evaluated in log space from the logits, never from the rounded probabilities: ``log h_i = log v_i - gamma log(1 - v_i) - log(1 + gamma r_i)`` with
    ``r = -v log v / (1 - v)`` in [0, 1] (so ``g = (1-v)^gamma (1 + gamma r)``), ``log v`` from the shifted
    logits and ``log(1 - v_top)`` as the log-sum-exp of the other classes relative to the top one. So a
    saturated output (float32 softmax of logits (20, 0, 0) is exactly (1, 0, 0), where the printed formula
    gives nan) still maps to finite probabilities summing to 1, and a numerically one-hot row stays
    one-hot (the paper's convention). Since h is increasing (gamma >= 0; Prop. 12), the argmax is kept; for
    gamma in [-1, 0), h is not monotone, but the argmax is still kept (the tests check it). For gamma < 0 the
    top class's ``log(1 + gamma r)`` is evaluated as ``log((1 + gamma) + (-gamma)(1 - r))`` with ``1 - r`` from a
    series, so gamma = -1, where ``1 + gamma r_top -> 0`` as v_top -> 1, stays exact.
    The inverse map (from eta back to q^{gamma,*}) is :func:`focal_optimal_prediction`.
    """
    gamma = _check_map_gamma(gamma)
    if type(logits).__module__.startswith("torch"):
        import torch

        if logits.ndim != 2 or logits.shape[1] < 2 or logits.shape[0] == 0:
            raise ValueError(f"logits must have shape (N, K) with N >= 1 and K >= 2; got {tuple(logits.shape)}.")
        if not logits.is_floating_point():
            logits = logits.double()
        if not bool(torch.isfinite(logits).all()):
            raise ValueError("logits contains NaN or infinity; remove or repair those entries before calling.")
        low = logits.dtype in (torch.float16, torch.bfloat16)
        z = logits.float() if low else logits
        out = torch.softmax(z, dim=1) if gamma == 0 else _focal_map_torch(z, gamma)
        return out.to(logits.dtype) if low else out
    arr = to_numpy(logits, "logits")
    if arr.dtype == np.float32:
        if arr.ndim != 2 or arr.shape[0] == 0 or arr.shape[1] < 2:
            as_scores(arr, "logits", kind="logits")      # raises the standard message
        check_finite(arr, "logits")
        z = arr
    else:
        z = as_scores(arr, "logits", kind="logits")
    if gamma == 0:
        return softmax(z, axis=1)
    return _focal_map_numpy(z, gamma)


def tau_oc(gamma):
    r"""tau_oc^gamma = argmax_v phi^gamma(v): where the gradient factor peaks; below it focal loss can over-estimate.

    Charoenphakdee et al. (2021), Thm. 8: if ``max_y q^{gamma,*}_y <= tau_oc`` (and q is not uniform on a
    subset of classes) the focal risk minimiser is eta-over-confident; if ``max_y q >= tau_uc``
    (:func:`threshold`, where phi = 1) it is eta-under-confident; ``0 < tau_oc < tau_uc < 1/2``. The peak of
    phi = g is also the peak of Mukhoti et al.'s gradient factor (their Eq. 8 vanishes there).

    Parameters
    ----------
    gamma : array_like
        Focal parameters, > 0.

    Returns
    -------
    numpy.ndarray or numpy.float64
        tau_oc in (0, 0.2032): tau_oc(1) = e^-2; it decreases in gamma and tends to
        ``-W_0(-2 e^-2) / 2 = 0.2031878700`` as gamma -> 0.

    Notes
    -----
    phi' = gamma (1-v)^(gamma-2) [-2(1-v) + (gamma v - 1) log v] (Mukhoti et al., Eq. 8), so tau_oc is the
    root in (0, 1/2) of ``k(v) = (gamma v - 1) log v - 2(1 - v)``, which changes sign once there. It is
    found in x = log v by a vectorised Newton iteration with bisection safeguard on [-745, -log 2].
    """
    gamma = _as_gamma(gamma, positive=True,
                      why="At gamma = 0, phi is identically 1 and has no peak (the limit gamma -> 0+ of tau_oc "
                          "is 0.2031878700); pass gamma > 0.")
    flat = np.asarray(gamma, dtype=float).ravel()

    def fun(x, index):
        g = flat[index]
        v = np.exp(x)
        k = (g * v - 1) * x - 2 * (1 - v)
        dk = g * v * x + (g * v - 1) + 2 * v
        return -k, -dk                               # -k < 0 left of the root, > 0 right of it

    lo = np.full_like(flat, -745.0)
    hi = np.full_like(flat, -np.log(2.0))
    x0 = np.log(np.minimum(0.2, 1.0 / (1.0 + flat)))
    x = _solve_increasing(fun, x0, lo, hi, xtol=1e-16)
    return _scalar_or_array(np.exp(x).reshape(np.shape(gamma)))


def _as_eta_rows(eta, name="eta"):
    arr = as_scores(np.atleast_2d(to_numpy(eta, name)), name, kind="probs")
    return arr, np.ndim(to_numpy(eta, name)) == 1


def minimise_focal_risk(eta, gamma, *, gtol: float = 1e-14):
    r"""The focal risk minimiser q^{gamma,*}(eta) by direct minimisation: a cross-check, independent of Psi.

    Minimises the pointwise focal risk ``W(q; eta) = -sum_i eta_i (1 - q_i)^gamma log q_i``
    (Charoenphakdee et al. 2021, Eqs. 5 and 7; :func:`focal_loss` with target eta) over q = softmax(z) by a
    trust-region Newton method (``scipy.optimize.minimize(method="trust-exact")``) with the exact gradient
    and Hessian in z, one row at a time. It uses only the derivative of the loss, ``d/dv [-(1-v)^g log v]
    = -phi(v) / v``, never the map Psi, so ``focal_map(log q, gamma)`` returning eta checks Thm. 11.
    :func:`focal_optimal_prediction` computes the same q from the closed form and is much faster.

    Parameters
    ----------
    eta : array_like, shape (K,) or (N, K)
        Class posteriors; the entries where eta is 0 get q = 0 (the risk does not depend on them).
    gamma : float
        Focal parameter, >= 0.
    gtol : float
        Gradient tolerance of the trust-region phase; a few Newton steps on the gradient then polish the
        result until the gradient stops decreasing (about 1e-17).

    Returns
    -------
    numpy.ndarray
        q with the shape of ``eta``.
    """
    rows, one = _as_eta_rows(eta)
    g = float(_as_gamma(gamma))
    out = np.zeros_like(rows)
    for n, row in enumerate(rows):
        support = np.flatnonzero(row > 0)
        e = row[support] / row[support].sum()
        if support.size == 1 or g == 0:
            out[n, support] = e
            continue
        ref = int(np.argmax(e))
        free = np.delete(np.arange(e.size), ref)

        def unpack(w):
            z = np.zeros(e.size)
            z[free] = w
            q = np.exp(z - z.max())
            return q / q.sum()

        def fun(w):
            q = unpack(w)
            return float(focal_loss(q, e, g))

        def jac(w):
            q = unpack(w)
            a = -e * gradient_factor(q, g)                # eta_i * dl/dq_i * q_i
            return (a - q * a.sum())[free]

        def hess(w):
            q = unpack(w)
            a = -e * gradient_factor(q, g)
            b = -e * gradient_factor_dp(q, g) * q
            s, bs = a.sum(), b.sum()
            h = (np.diag(b - q * s) - np.outer(b, q) - np.outer(q, b) + np.outer(q, q) * (s + bs))
            return h[np.ix_(free, free)]

        w = np.log(e[free]) - np.log(e[ref])
        with warnings.catch_warnings():      # near the optimum the risk stops decreasing in float64
            warnings.simplefilter("ignore")
            w = minimize(fun, w, jac=jac, hess=hess, method="trust-exact", options={"gtol": gtol}).x
        grad = jac(w)
        for _ in range(20):                  # plain Newton steps on the gradient: quadratic convergence
            step = np.linalg.solve(hess(w), grad)
            grad_new = jac(w - step)
            if not np.linalg.norm(grad_new) < np.linalg.norm(grad):
                break
            w, grad = w - step, grad_new
        out[n, support] = unpack(w)
    return out[0] if one else out


def log_focal_weight(p, gamma):
    r"""log h^gamma(p) = log p - log phi^gamma(p): the log of the weight that Psi^gamma normalises (Eq. 13).

    Charoenphakdee et al. (2021), Eq. 13: ``h(p) = p / phi^gamma(p)`` with phi^gamma the gradient factor
    :func:`gradient_factor`; Psi^gamma_i(v) = h(v_i) / sum_l h(v_l). Evaluated in log space, so it stays
    finite where h itself overflows (h(p) ~ (1-p)^-gamma / (1 + gamma) as p -> 1); +inf at p = 1 for gamma > 0.

    Parameters
    ----------
    p : array_like
        Probabilities in (0, 1].
    gamma : array_like
        Focal parameter, >= 0; broadcasts against ``p``.
    """
    p = _as_probability(p, "p")
    if np.any(p == 0):
        raise ValueError("p must be > 0: log h(0) = log 0 = -inf. Drop the zeros (Psi gives them weight 0).")
    gamma = _as_gamma(gamma)
    p, gamma = np.broadcast_arrays(p, gamma)
    return _scalar_or_array(np.log(p) - _log_gradient_factor(p, gamma))


# ====================================================================================================
# Komisarenko & Kull (2024): the binary focal calibration map on logits, FC(s) = p_hat(sigmoid(s)), its
# temperature-scaling bounds (Prop. 3, corrected), the closest temperature by the paper's minimax criterion
# (binary and multiclass, Figs. 2 and 6), and the top-label change of Prop. 5. The multiclass map itself is
# `focal_map` above (Eq. 1 of the paper is Charoenphakdee et al.'s Psi^gamma); nothing here re-implements it.
# ====================================================================================================

__all__ += ["log_f_gamma", "focal_calibration_logit", "effective_inverse_temperature", "ts_bounds",
            "closest_temperature", "ts_distance", "top_label_gain"]


def _as_map_gammas(gamma, name: str = "gamma") -> np.ndarray:
    """gamma as a float array, every value >= -1 (the domain of the focal calibration map)."""
    arr = as_float_array(gamma, name)
    if np.any(arr < -1):
        bad = arr[arr < -1].ravel()[0]
        raise ValueError(f"{name} must be >= -1; found {bad!r}. {_MAP_DOMAIN}")
    return arr


def log_f_gamma(s, gamma):
    r"""log f_gamma(s), the factor that separates focal calibration from temperature scaling (App. A.3).

    Komisarenko & Kull (2024), Prop. 3 and App. A.3: ``FC(s) = 1 / (1 + exp(-(gamma+1) s) f_gamma(s))`` with

    ``f_gamma(s) = (gamma e^s log(1 + e^-s) + 1) / (1 + gamma e^-s log(1 + e^s))``.

    Since ``e^s log(1 + e^-s) = r(sigmoid(s))`` with ``r(p) = -p log p / (1 - p)`` (the factor of
    :func:`gradient_factor`, ``g = (1-p)^gamma (1 + gamma r)``), it is computed as
    ``log1p(gamma r(s)) - log1p(gamma r(-s))``, accurate for every finite s.

    Parameters
    ----------
    s : array_like
        Logits (finite).
    gamma : array_like
        Focal parameters, >= -1; broadcasts against ``s``.

    Returns
    -------
    numpy.ndarray or numpy.float64
        log f_gamma(s): odd in s (exactly, as computed), 0 at s = 0, increasing for gamma > 0, tending to
        +-log(gamma + 1) as s -> +-inf.
    """
    s = as_float_array(s, "s")
    gamma = _as_map_gammas(gamma)
    s, gamma = np.broadcast_arrays(s, gamma)
    a = np.abs(s)                                 # log f is odd: evaluate at |s| so that the result is exactly odd
    with np.errstate(divide="ignore", invalid="ignore"):   # gamma = -1 and r(a) = 1: replaced just below
        up = np.log1p(gamma * _r_of_logit(a))     # log(1 + gamma r(|s|)), r(|s|) in [log 2, 1)
    negative = gamma < 0
    if np.any(negative):                          # 1 + gamma r(|s|) -> 1 + gamma: without cancellation
        safe = np.where(negative, gamma, -0.5)
        up = np.where(negative, _log1p_gamma_r_negative(safe, _log_one_minus_r(np.exp(-a), -a)), up)
    return _scalar_or_array(np.sign(s) * (up - np.log1p(gamma * _r_of_logit(-a))))


def focal_calibration_logit(s, gamma):
    r"""logit FC(s): the binary focal calibration map on logits, ``(gamma + 1) s - log f_gamma(s)``.

    ``FC(s) = p_hat_gamma(sigmoid(s))`` (Komisarenko & Kull 2024, Prop. 3), where p_hat_gamma is the binary
    focal calibration map of Prop. 2, ``p_hat(q) = 1 / (1 + ((1-q)/q)^gamma ((1-q) - gamma q log q) /
    (q - gamma (1-q) log(1-q)))``. It is the two-class case of :func:`focal_map`:
    ``focal_map([[s, 0]], gamma)[0, 0] == expit(focal_calibration_logit(s, gamma))``. Returning the logit
    (the inventory's algorithm A1) keeps the map exact where FC(s) rounds to 1 (``|s| > 37 / (gamma + 1)``
    in float64).

    Parameters
    ----------
    s : array_like
        Logits (finite).
    gamma : array_like
        Focal parameters, >= -1 (gamma = 0 gives the identity); broadcasts against ``s``.

    Returns
    -------
    numpy.ndarray or numpy.float64
        The logit of FC(s); odd in s (``FC(-s) = 1 - FC(s)``).
    """
    s = as_float_array(s, "s")
    gamma = _as_map_gammas(gamma)
    s, gamma = np.broadcast_arrays(s, gamma)
    return _scalar_or_array((gamma + 1) * s - log_f_gamma(s, gamma))


def effective_inverse_temperature(s, gamma):
    r"""beta(s) = logit FC(s) / s: the inverse temperature of the TS map that agrees with FC at the logit s.

    ``beta(s) = gamma + 1 - log f_gamma(s) / s`` (Komisarenko & Kull 2024, App. A.3), even in s, with the limit
    ``beta(0) = gamma + 1 - gamma (2 log 2 - 1) / (1 + gamma log 2)`` (the slope f'_gamma(0); the book's
    derivation, :func:`calib.symbolic.focal_calibration_on_logits`). Prop. 3, corrected, says
    ``gamma + 1 - log(gamma + 1) / 2 < beta(s) < gamma + 1`` for gamma > 0 and s != 0.

    Parameters
    ----------
    s : array_like
        Logits; s = 0 returns the limit.
    gamma : array_like
        Focal parameters, >= -1; broadcasts against ``s``.

    Notes
    -----
    For 0 < |s| << 1 the quotient loses relative precision like eps / |s| (about 1e-13 at |s| = 1e-3).
    """
    s = as_float_array(s, "s")
    gamma = _as_map_gammas(gamma)
    s, gamma = np.broadcast_arrays(s, gamma)
    log2 = np.log(2.0)
    at_zero = gamma + 1 - gamma * (2 * log2 - 1) / (1 + gamma * log2)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = gamma + 1 - log_f_gamma(s, gamma) / s
    return _scalar_or_array(np.where(s == 0, at_zero, out))


def _min_beta(gammas: np.ndarray, s_max: float = 12.0, step: float = 0.005) -> np.ndarray:
    """min over s > 0 of beta(s) for each gamma: a grid search refined by golden-section search."""
    s = np.arange(0.0, s_max + step / 2, step)
    beta = effective_inverse_temperature(s[None, :], gammas[:, None])
    i = np.argmin(beta, axis=1)
    lo = s[np.maximum(i - 1, 0)]
    hi = s[np.minimum(i + 1, s.size - 1)]
    ratio = (np.sqrt(5.0) - 1) / 2
    a, b = lo.copy(), hi.copy()
    c, d = b - ratio * (b - a), a + ratio * (b - a)
    fc, fd = effective_inverse_temperature(c, gammas), effective_inverse_temperature(d, gammas)
    for _ in range(60):
        left = fc < fd
        b = np.where(left, d, b)
        a = np.where(left, a, c)
        c_new = b - ratio * (b - a)
        d_new = a + ratio * (b - a)
        c, d = c_new, d_new
        fc, fd = effective_inverse_temperature(c, gammas), effective_inverse_temperature(d, gammas)
    # a grid minimum at s = 0 is the minimum (beta is even and smooth); refining there would only measure the
    # rounding of log f(s) / s, which grows like eps / s
    return np.where(i == 0, beta[:, 0], np.minimum(np.minimum(fc, fd), beta.min(axis=1)))


def ts_bounds(gamma, sharp: bool = False):
    r"""The temperatures between whose TS maps the binary focal calibration map lies: (T_low, T_high).

    Komisarenko & Kull (2024), Prop. 3, **as corrected** (the printed display has the exponents inverted,
    -s / (gamma + 1), i.e. T = gamma + 1, and the order reversed; the abstract's "1/T = gamma + 1 and
    1/T = gamma + 1 - log(gamma + 1)/2" is right). With ``c = log(gamma + 1) / 2``, for gamma > 0:

    - ``s > 0``: sigmoid(s / T_high) < FC(s) < sigmoid(s / T_low);
    - ``s < 0``: sigmoid(s / T_low) < FC(s) < sigmoid(s / T_high);
    - FC(0) = 1/2,

    where ``T_low = 1 / (gamma + 1)`` and ``T_high = 1 / (gamma + 1 - c)``. Equivalently the effective inverse
    temperature :func:`effective_inverse_temperature` stays in ``(1/T_high, 1/T_low)``.

    Parameters
    ----------
    gamma : array_like
        Focal parameters, >= 0 (gamma = 0 gives (1, 1): FC is the identity).
    sharp : bool
        False: the closed forms above. True: the tightest band, ``T_low = 1 / (gamma + 1)`` (the supremum of
        beta, approached as |s| -> inf, never attained) and ``T_high = 1 / min_s beta(s)``, found numerically;
        for gamma <= 5 the minimum is at s = 0, so ``T_high = 1 / beta(0)`` in closed form.

    Returns
    -------
    (T_low, T_high) : tuple of numpy.ndarray or numpy.float64
        ``T_low <= T_high``, each shaped like ``gamma``.
    """
    gamma = _as_gamma(gamma, why="Prop. 3 is stated for gamma > 0 (at gamma = 0, FC is the identity, T = 1).")
    low = 1.0 / (gamma + 1.0)
    if not sharp:
        high = 1.0 / (gamma + 1.0 - 0.5 * np.log1p(gamma))
    else:
        flat = gamma.ravel()
        high = (1.0 / _min_beta(flat)).reshape(gamma.shape)
    return _scalar_or_array(low), _scalar_or_array(high)


#: Default grids of the closest-temperature search: (logit range R, step), by number of classes.
#: Binary: s in [0, 20] step 0.001 (the inventory's algorithm A3). Three classes: logits in (-5, 5), step
#: 0.01, as Sec. 3.3 states, i.e. sorted differences 0 >= d_2 >= d_3 > -10. Four or more: the paper gives no
#: grid; step 0.1 (the inventory's choice).
CLOSEST_T_GRIDS = {2: (20.0, 0.001), 3: (10.0, 0.01)}
CLOSEST_T_GRID_MANY = (10.0, 0.1)


def _sorted_logit_grid(n_classes: int, logit_range: float, step: float) -> np.ndarray:
    """Rows (0, d_2, ..., d_n) with 0 >= d_2 >= ... >= d_n > -logit_range on a grid of the given step.

    Both maps are permutation-equivariant and shift-invariant, so the maximum difference over all logit vectors
    with pairwise differences below ``logit_range`` is its maximum over these sorted rows.
    """
    m = int(np.floor(logit_range / step + 1e-9))
    ticks = -step * np.arange(m + 1)
    ticks = ticks[ticks > -logit_range + 1e-12 * logit_range] if n_classes > 2 else ticks
    rows = ticks[:, None]
    for _ in range(n_classes - 2):            # append d_{k+1} <= d_k
        k = len(ticks)
        idx_prev = np.rint(-rows[:, -1] / step).astype(int)
        counts = k - idx_prev
        start = np.repeat(idx_prev, counts)
        offs = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
        rows = np.column_stack([np.repeat(rows, counts, axis=0), ticks[start + offs]])
    return np.column_stack([np.zeros(len(rows)), rows])


def _max_ts_error(rows: np.ndarray, target: np.ndarray, beta: float) -> float:
    if rows.shape[1] == 2:                   # rows (0, d): class 0 gets sigmoid(-beta d); class 1 mirrors it
        return float(np.max(np.abs(expit(rows[:, 1] * -beta) - target[:, 0])))
    return float(np.max(np.abs(softmax(rows * beta, axis=1) - target)))


def _grid_settings(n_classes, logit_range, step):
    n_classes = check_int(n_classes, "n_classes", minimum=2)
    default_r, default_h = CLOSEST_T_GRIDS.get(n_classes, CLOSEST_T_GRID_MANY)
    logit_range = default_r if logit_range is None else check_positive(logit_range, "logit_range")
    step = default_h if step is None else check_positive(step, "step")
    if step >= logit_range:
        raise ValueError(f"step ({step}) must be smaller than logit_range ({logit_range}); use e.g. step = "
                         f"logit_range / 100.")
    n_rows = (logit_range / step) ** (n_classes - 1) / np.prod(np.arange(1, n_classes))
    if n_rows > 2e7:
        raise ValueError(f"the grid would hold about {n_rows:.2g} logit vectors; pass a larger step (or a smaller "
                         f"logit_range) for n_classes = {n_classes}.")
    return _sorted_logit_grid(n_classes, logit_range, step)


def ts_distance(gamma, temperature, n_classes: int = 2, *, logit_range: float | None = None,
                step: float | None = None):
    r"""The largest difference between the focal calibration map and the TS map with temperature T.

    ``max_s max_j |p_hat_gamma(softmax(s))_j - softmax(s / T)_j|`` over the logit grid of
    :func:`closest_temperature` (same defaults): the error that Komisarenko & Kull (2024) minimise over T
    (Sec. 3.2, Fig. 2; Sec. 3.3, Figs. 6-7).

    Parameters
    ----------
    gamma : array_like
        Focal parameters, >= -1.
    temperature : array_like
        Temperatures, > 0; broadcasts against ``gamma``.
    n_classes, logit_range, step
        As for :func:`closest_temperature`.

    Returns
    -------
    numpy.ndarray or numpy.float64
        The maximum absolute difference, shaped like the broadcast of ``gamma`` and ``temperature``.
    """
    gamma = _as_map_gammas(gamma)
    temperature = as_float_array(temperature, "temperature")
    if np.any(temperature <= 0):
        raise ValueError("temperature must be > 0; pass positive temperatures.")
    gamma, temperature = np.broadcast_arrays(gamma, temperature)
    rows = _grid_settings(n_classes, logit_range, step)
    out = np.empty(gamma.shape)
    targets: dict[float, np.ndarray] = {}
    for index in np.ndindex(gamma.shape):
        gam = float(gamma[index])
        if gam not in targets:
            targets[gam] = focal_map(rows, gam)
        out[index] = _max_ts_error(rows, targets[gam], 1.0 / float(temperature[index]))
    return _scalar_or_array(out)


def closest_temperature(gamma, n_classes: int = 2, *, logit_range: float | None = None, step: float | None = None,
                        xtol: float = 1e-9):
    r"""The temperature whose TS map is closest to the focal calibration map, by the paper's minimax criterion.

    ``T*(gamma) = argmin_T  max_s max_j |p_hat_gamma(softmax(s))_j - softmax(s / T)_j|`` over a grid of logit
    vectors s: Komisarenko & Kull (2024), Sec. 3.2 ("minimising the maximum absolute difference between
    these calibration maps", Fig. 2) for two classes and Sec. 3.3 (Figs. 5-7) for three; the paper's
    "1/T ~ 0.95 gamma + 0.85" (binary) and "0.64 gamma + 0.91" (three classes) are linear fits of 1/T*.

    Parameters
    ----------
    gamma : array_like
        Focal parameters, >= 0.
    n_classes : int
        Number of classes n >= 2.
    logit_range : float, optional
        Largest logit difference R on the grid (pairwise differences of the logits below R); defaults in
        :data:`CLOSEST_T_GRIDS` (binary R = 20; three classes R = 10, the paper's logits in (-5, 5)).
    step : float, optional
        Grid step of the logit differences (defaults: 0.001 binary, 0.01 three classes, 0.1 for n >= 4).
    xtol : float
        Tolerance of the search in 1/T.

    Returns
    -------
    temperature, max_error : numpy.ndarray or numpy.float64
        T* and the attained maximum absolute difference, each shaped like ``gamma``.

    Notes
    -----
    Both maps commute with permutations of the classes and ignore shifts of the logits, so the grid holds the
    sorted rows ``0 >= d_2 >= ... >= d_n > -R`` only (a sixth of the three-class grid). The focal side is
    :func:`focal_map`. The error is a maximum of smooth functions of beta = 1/T; it is minimised by a scan of
    41 values of beta followed by golden-section search on the bracket around the best one. For two classes
    the optimum lies in the band of :func:`ts_bounds` (a TS map outside it is farther from FC at every s), which
    is where the scan looks; for n >= 3 the scan covers beta in [1/2, gamma + 2].
    """
    gamma = _as_gamma(gamma)
    rows = _grid_settings(n_classes, logit_range, step)
    flat = gamma.ravel()
    temps, errors = np.empty_like(flat), np.empty_like(flat)
    ratio = (np.sqrt(5.0) - 1) / 2
    for i, gam in enumerate(flat):
        if gam == 0:
            temps[i], errors[i] = 1.0, 0.0
            continue
        target = focal_map(rows, float(gam))
        if rows.shape[1] == 2:
            lo, hi = gam + 1 - 0.5 * np.log1p(gam), gam + 1
        else:
            lo, hi = 0.5, gam + 2
        scan = np.linspace(lo, hi, 41)
        vals = np.array([_max_ts_error(rows, target, b) for b in scan])
        j = int(np.argmin(vals))
        a, b = scan[max(j - 1, 0)], scan[min(j + 1, len(scan) - 1)]
        c, d = b - ratio * (b - a), a + ratio * (b - a)
        fc, fd = _max_ts_error(rows, target, c), _max_ts_error(rows, target, d)
        while b - a > xtol * max(1.0, b):
            if fc < fd:
                b, d, fd = d, c, fc
                c = b - ratio * (b - a)
                fc = _max_ts_error(rows, target, c)
            else:
                a, c, fc = c, d, fd
                d = a + ratio * (b - a)
                fd = _max_ts_error(rows, target, d)
        best = min((fc, c), (fd, d), (vals[j], scan[j]))
        errors[i], temps[i] = best[0], 1.0 / best[1]
    return _scalar_or_array(temps.reshape(gamma.shape)), _scalar_or_array(errors.reshape(gamma.shape))


def top_label_gain(logits, gamma):
    r"""p_hat_j - q_j at the top class j: how much the focal calibration map raises the top-label confidence.

    ``q = softmax(logits)``, ``p_hat = focal_map(logits, gamma)`` and j the argmax of q (first on ties).
    Komisarenko & Kull (2024), Prop. 5, claim ``p_hat_j >= q_j`` for every q and gamma > 0; this is false for
    n >= 4 classes (e.g. n = 10, gamma = 1, q = (0.13, 0.87/9, ..., 0.87/9) gives -6.0e-4). It holds when
    ``q_j >= threshold(gamma)``, the p0 where Mukhoti et al.'s g(p0, gamma) = 1: then 1/g(q_j) >= 1 >= the
    q-weighted mean of 1/g over the classes (the book's chapter 07).

    Parameters
    ----------
    logits : array_like, shape (N, K)
    gamma : float
        Focal parameter, >= -1.

    Returns
    -------
    numpy.ndarray, shape (N,)
    """
    z = as_scores(logits, "logits", kind="logits")
    top = np.argmax(z, axis=1)
    rows = np.arange(z.shape[0])
    q = softmax(z, axis=1)
    return focal_map(z, gamma)[rows, top] - q[rows, top]
