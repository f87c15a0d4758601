"""The focal-loss gradient factor g(p, gamma) and where it crosses 1 (Mukhoti et al. 2020, Sec. 4, Prop. 1-2).

Focal loss (Lin et al. 2017) for a sample whose true class gets probability p is
``L_f = -(1 - p)**gamma * log(p)``; its gradient is ``g(p, gamma)`` times that of cross-entropy (Prop. 1,
Eq. 7). This module holds g and its p-derivative (Eq. 8), the threshold p0(gamma) where g = 1 (Sec. 4,
Fig. 4a) and its inverse, the Lambert-W closed form gamma*(p0) of Prop. 2 (Eqs. 12-13, both branches as
printed), and random linear-softmax batches for comparing per-sample and per-batch gradient norms (Prop. 1).
Everything is float64, vectorised, and accepts numpy arrays or torch tensors.
"""

from __future__ import annotations

import numpy as np
from scipy.special import expit, lambertw

from calib._validate import as_float_array
from calib.focal.numerics import (as_probability, check_gamma, log_g_logit, r_of_p, scalar_or_array,
                                   solve_increasing)

__all__ = ["gradient_factor", "gradient_factor_dp", "threshold", "gamma_star", "lambert_gamma", "lambert_argument",
           "random_linear_softmax_batches"]


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
    p = as_probability(p, "p")
    gamma = check_gamma(gamma)
    p, gamma = np.broadcast_arrays(p, gamma)
    with np.errstate(divide="ignore", invalid="ignore"):
        power = np.where(gamma == 0, 1.0, np.exp(gamma * np.log1p(-p)))   # (1-p)^gamma, 0^0 = 1
        out = power * (1.0 + gamma * r_of_p(p))
    return scalar_or_array(out)


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
    p = as_probability(p, "p")
    if np.any((p == 0) | (p == 1)):
        raise ValueError("p must lie in the open interval (0, 1) for dg/dp; it is unbounded at p = 0 "
                         "(and at p = 1 when gamma < 1). Drop the end points.")
    gamma = check_gamma(gamma)
    p, gamma = np.broadcast_arrays(p, gamma)
    lp = np.log(p)
    bracket = -2 * (1 - p) - (1 - p) * lp + (gamma - 1) * p * lp        # Eq. 9
    return scalar_or_array(gamma * (1 - p) ** (gamma - 2) * bracket)


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
    return scalar_or_array(gamma.reshape(shape))


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
    return scalar_or_array((-m * np.exp(-m)).reshape(p0.shape))


def lambert_gamma(p0, branch: int = -1):
    """The paper's Eq. 12 (branch -1) or Eq. 13 (branch 0) evaluated as printed, with scipy's Lambert W.

    ``gamma = a/b + W_k(z) / log(a)``, ``a = 1 - p0``, ``b = p0 log p0``,
    ``z = -(a**(1 - a/b) / b) log(a)`` (Mukhoti et al. 2020, App. C). No domain check beyond 0 < p0 < 1 and
    no polishing: this is the formula as printed, for examining what each branch gives (for p0 < 1/2,
    branch -1 gives gamma* and branch 0 the trivial root gamma = 0; for p0 > 1/2 the roles swap and
    branch -1 gives 0). The result is nan where W is not real: at p0 = 1/2, where z is -1/e exactly and
    scipy returns nan, and at p0 near 1/2 where z rounds below -1/e and scipy's W is complex. Use
    :func:`gamma_star` for the accurate, checked value.

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
    return scalar_or_array(out)


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
    gamma = check_gamma(gamma, domain="positive",
                      why="At gamma = 0 focal loss is cross-entropy, g(p, 0) = 1 for every p, and there is no "
                          "threshold; pass gamma > 0.")
    flat = gamma.ravel()
    log_g_tab, s_tab = _threshold_table()
    s0 = np.interp(np.log(flat), log_g_tab, s_tab)

    def fun(s, index):
        value, slope = log_g_logit(s, flat[index])
        return -value, -slope          # -log g increases through the root

    s = solve_increasing(fun, s0, np.full_like(s0, -745.0), np.zeros_like(s0), newton_tol=1e-9)
    return scalar_or_array(expit(s).reshape(gamma.shape))


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
            raise ValueError(f"{name} must be a positive integer{' >= 2' if name == 'n_classes' else ''}; "
                             f"got {value!r}.")
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
