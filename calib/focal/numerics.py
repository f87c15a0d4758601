"""The numerical kernels of the focal family, shared by every module that evaluates it.

One implementation each of the quantities that the focal gradient factor, the focal calibration map, focal
temperature scaling (:mod:`calib.posthoc`) and the training diagnostics (:mod:`calib.train`) are built from:

- ``r(p) = -p log p / (1 - p)`` (so that ``g(p, gamma) = (1-p)^gamma (1 + gamma r(p))``, Mukhoti et al. 2020,
  Eq. 7) in p (:func:`r_of_p`) and in the logit (:func:`logit_terms`, :func:`log_g_logit`);
- at the top class of a softmax, where ``p_top`` can round to 1, everything from ``S = (1 - p_top) / p_top``
  and ``log S`` (the log-sum-exp of the other classes relative to the top one): ``r`` (:func:`r_top`),
  ``log(1 - r)`` (:func:`log_one_minus_r`) and ``log(1 + gamma r)`` for gamma in [-1, 0)
  (:func:`log1p_gamma_r_negative`);
- one bracketed Newton root solver (:func:`solve_increasing`) and one golden-section search
  (:func:`golden_section_minimise`);
- one check of the focal parameter for each of its domains (:func:`check_gamma`): >= 0 for focal loss, > 0
  where a threshold or peak must exist, >= -1 for the focal calibration map.

Everything is numpy float64 unless said; :func:`log_one_minus_r`, :func:`log1p_gamma_r_negative` and
:func:`r_top` also take ``xp=torch`` so that the numpy and torch paths of the map share one kernel.
"""

from __future__ import annotations

import numbers

import numpy as np
from scipy.special import expit, xlogy

from calib._validate import as_float_array, as_scores

#: Why the focal calibration map needs gamma >= -1 (the message of every domain check of the map).
MAP_DOMAIN = ("The map weighs class j by v_j / g(v_j, gamma), with g(v, gamma) = (1-v)^gamma (1 + gamma r(v)) and "
              "r(v) = -v log v / (1 - v) increasing from 0 to 1 on (0, 1). For gamma >= -1, 1 + gamma r > 0 on [0, 1) "
              "and the weight is positive and finite (at gamma = -1 it tends to 2 as v -> 1); for gamma < -1, "
              "1 + gamma r changes sign at r = -1/gamma < 1, so v / g is negative for v near 1 and is not a "
              "probability weight. (Komisarenko & Kull 2024 use gamma_ev in {-0.5, -0.25}; their released code "
              "also gamma = -1.)")

#: The domains of the focal parameter, name -> (lower bound, bound excluded, why the bound).
GAMMA_DOMAINS = {
    "focal": (0.0, False, "gamma = 0 is cross-entropy; focal loss needs gamma >= 0."),
    "positive": (0.0, True, ""),
    "map": (-1.0, False, MAP_DOMAIN),
}


# ------------------------------------------------------------------------------------------ input checks

def check_gamma(gamma, name: str = "gamma", *, domain: str = "focal", scalar: bool = False, ndim=None,
                why: str = ""):
    """The focal parameter ``gamma`` as a float64 array (or a float with ``scalar=True``), checked.

    Parameters
    ----------
    gamma : array_like or float
        Finite values.
    name : str
        The argument's name in the error message.
    domain : {"focal", "positive", "map"}
        ``"focal"``: gamma >= 0 (focal loss, the gradient factor); ``"positive"``: gamma > 0 (where a threshold
        or a peak of g must exist); ``"map"``: gamma >= -1 (the focal calibration map, :data:`MAP_DOMAIN`).
    scalar : bool
        Require one real number (not an array, not a bool) and return it as a float.
    ndim : int, optional
        Require this many dimensions (``ndim=1`` also requires at least one value).
    why : str
        Appended to the message when the bound is violated (overrides the domain's own reason).

    Raises
    ------
    ValueError
        Naming ``name``, the bound, the offending value and the reason.
    """
    if domain not in GAMMA_DOMAINS:
        raise ValueError(f"domain={domain!r} is not supported; choose one of {', '.join(map(repr, GAMMA_DOMAINS))}.")
    low, strict, reason = GAMMA_DOMAINS[domain]
    bound = f"> {low:g}" if strict else f">= {low:g}"
    if scalar:
        if isinstance(gamma, np.ndarray) and gamma.ndim == 0:
            gamma = gamma.item()
        if isinstance(gamma, (bool, np.bool_)) or not isinstance(gamma, numbers.Real):
            raise ValueError(f"{name} must be a single real number {bound}; got {gamma!r}. Pass one float (call once "
                             f"per {name}).")
        if not np.isfinite(float(gamma)):
            raise ValueError(f"{name} must be a finite number {bound}; got {gamma!r}.")
    arr = as_float_array(gamma, name, ndim=ndim)
    if ndim is not None and arr.size == 0:
        raise ValueError(f"{name} must hold at least one value {bound}; got an empty array.")
    bad = (arr <= low) if strict else (arr < low)
    if np.any(bad):
        value = float(arr[bad].ravel()[0])
        text = why or reason
        raise ValueError(f"{name} must be {bound}; found {value!r}.{(' ' + text) if text else ''}")
    return float(arr) if scalar else arr


def as_probability(p, name: str) -> np.ndarray:
    """``p`` as a float64 array of probabilities in [0, 1], or a ValueError naming ``name``."""
    arr = as_float_array(p, name)
    if arr.size and (arr.min() < 0 or arr.max() > 1):
        bad = arr[(arr < 0) | (arr > 1)].ravel()[0]
        raise ValueError(f"{name} must lie in [0, 1]; found {float(bad)!r}. Pass probabilities, e.g. a softmax output.")
    return arr


def as_distributions(x, name: str):
    """Rows of distributions (K >= 2, rows summing to 1) as an (N, K) array, and whether ``x`` was one row."""
    arr = as_float_array(x, name, ndim=(1, 2))
    one = arr.ndim == 1
    rows = as_scores(arr.reshape(1, -1) if one else arr, name, kind="probs")
    return rows, one


def scalar_or_array(x: np.ndarray):
    """A 0-d result as a numpy float64 scalar, anything else unchanged."""
    return x[()] if isinstance(x, np.ndarray) and x.ndim == 0 else x


# ------------------------------------------------------------------------- g(p, gamma) in p and in logit

def r_of_p(p: np.ndarray) -> np.ndarray:
    """r(p) = -p log(p) / (1 - p), continued by r(0) = 0 and r(1) = 1, so that g = (1-p)^gamma (1 + gamma r)."""
    q = 1.0 - p
    with np.errstate(divide="ignore", invalid="ignore"):
        r = -xlogy(p, p) / q
    return np.where(q > 0, r, 1.0)


def log_gradient_factor(p: np.ndarray, gamma: np.ndarray) -> np.ndarray:
    """log g(p, gamma) = gamma log(1 - p) + log(1 + gamma r(p)); -inf at p = 1 (gamma > 0), 0 for gamma = 0."""
    with np.errstate(divide="ignore", invalid="ignore"):
        out = gamma * np.log1p(-p) + np.log1p(gamma * r_of_p(p))
    return np.where(gamma == 0, 0.0, out)


def logit_terms(s: np.ndarray):
    """``(r, softplus(s))`` at p = expit(s), from one exp and one log1p, accurate for p near 0 and near 1.

    ``r(p) = e^s softplus(-s)``: for s >= 0 it is ``log1p(e^-s) / e^-s`` (1 where e^-s underflows), for s < 0
    ``e^s (log1p(e^s) - s)``; ``softplus(s) = max(s, 0) + log1p(e^-|s|) = -log(1 - p)``.
    """
    u = np.exp(-np.abs(s))                                   # in (0, 1], never overflows
    log1p_u = np.log1p(u)
    with np.errstate(divide="ignore", invalid="ignore", under="ignore"):
        r = np.where(s >= 0, np.where(u > 0, log1p_u / u, 1.0), u * (log1p_u - s))
    return r, np.maximum(s, 0) + log1p_u


def r_of_logit(s: np.ndarray) -> np.ndarray:
    """r(p) at p = expit(s) (see :func:`logit_terms`)."""
    return logit_terms(s)[0]


def softplus(s: np.ndarray) -> np.ndarray:
    """log(1 + e^s), without overflow."""
    return np.logaddexp(0.0, s)


def gradient_factor_of_logit(s: np.ndarray, gamma) -> np.ndarray:
    """g(p, gamma) at p = expit(s), without input checks: ``exp(-gamma softplus(s)) (1 + gamma r)``.

    The same value as :func:`calib.focal.gradient_factor <calib.focal.gradient.gradient_factor>`, accurate when p
    rounds to 1 (the logistic model of :func:`calib.small_training.logistic_gradient_descent` evaluates it every
    step).
    """
    r, sp = logit_terms(s)
    return np.exp(-gamma * sp) * (1 + gamma * r)


def log_g_logit(s: np.ndarray, gamma: np.ndarray):
    """log g at p = expit(s) and its derivative in s: (-gamma softplus(s) + log1p(gamma r), ...)."""
    p = expit(s)
    r, sp = logit_terms(s)
    gr = gamma * r
    value = -gamma * sp + np.log1p(gr)
    slope = -gamma * p + gamma * (r - p) / (1.0 + gr)   # uses dr/ds = r - p
    return value, slope


def log_phi_logit(s: np.ndarray, gamma: np.ndarray):
    """psi(s) = log(p / g(p, gamma)) at p = expit(s) and d psi / ds (> 0)."""
    p = expit(s)
    r, sp = logit_terms(s)
    gr = gamma * r
    value = -softplus(-s) + gamma * sp - np.log1p(gr)
    slope = (1.0 - p) + gamma * p - gamma * (r - p) / (1.0 + gr)
    return value, slope


# ---------------------------------------------------------- the top class of a softmax, from S and log S

def r_top(rest, log_rest, log1p_rest, xp=np):
    """r at p_top = 1 / (1 + S), from S = ``rest`` >= 0, log S = ``log_rest`` and log(1 + S) = ``log1p_rest``.

    ``r = log1p(S) / S``; for S < 1e-8 (p_top > 1 - 1e-8) the series ``1 - S/2`` (the next term, S^2/3, is
    below the rounding of 1). ``xp`` is ``numpy`` or ``torch``; in torch, no branch produces inf or nan, so
    the gradient stays finite.
    """
    small = rest < 1e-8
    if xp is np:
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            return np.where(small, 1.0 - 0.5 * rest, log1p_rest * np.exp(-log_rest))
    safe = xp.where(small, xp.zeros_like(log_rest), log_rest)
    return xp.where(small, 1.0 - 0.5 * rest, log1p_rest * xp.exp(-safe))


def log_one_minus_r(rest, log_rest, xp=np):
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


def log1p_gamma_r_negative(gamma, log_one_minus_r, xp=np):
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


# ------------------------------------------------------------------------------------------ solvers

def solve_increasing(fun, x0, lo, hi, *, xtol=4e-16, newton_tol=None, maxiter=200):
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


def golden_section_minimise(fun, lo, hi, *, xtol: float | None = None, iterations: int | None = None):
    """Minimise a unimodal ``fun`` on [lo, hi] element-wise by golden-section search.

    ``fun(x)`` takes an array of points (one per element of ``lo``) and returns their values. Each step
    narrows every bracket by the golden ratio and evaluates ``fun`` once, at the one new interior point. Stops
    after ``iterations`` steps, or when every bracket is narrower than ``xtol * max(1, hi)``.

    Returns
    -------
    (c, fc, d, fd)
        The two final interior points and their values (the minimum is the smaller of fc and fd).
    """
    if (xtol is None) == (iterations is None):
        raise ValueError("pass exactly one of xtol (a bracket width) and iterations (a number of steps).")
    ratio = (np.sqrt(5.0) - 1) / 2
    a = np.array(lo, dtype=float, copy=True).ravel()
    b = np.array(hi, dtype=float, copy=True).ravel()
    c, d = b - ratio * (b - a), a + ratio * (b - a)
    fc, fd = np.asarray(fun(c), dtype=float), np.asarray(fun(d), dtype=float)
    step = 0
    while (step < iterations) if iterations is not None else bool(np.any(b - a > xtol * np.maximum(1.0, b))):
        left = fc < fd                                 # the minimum lies in [a, d]: d becomes the new b
        b = np.where(left, d, b)
        a = np.where(left, a, c)
        keep = np.where(left, c, d)                    # the interior point that stays, and its value
        fkeep = np.where(left, fc, fd)
        new = np.where(left, b - ratio * (b - a), a + ratio * (b - a))
        fnew = np.asarray(fun(new), dtype=float)
        c, fc = np.where(left, new, keep), np.where(left, fnew, fkeep)
        d, fd = np.where(left, keep, new), np.where(left, fkeep, fnew)
        step += 1
    return c, fc, d, fd
