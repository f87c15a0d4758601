"""What minimising focal loss estimates: the focal risk, its minimiser, and where it over- or under-estimates.

- Mukhoti et al. (2020), App. A: the focal risk of a prediction p for a target distribution q
  (:func:`focal_risk`, Eq. 4's left side) and the entropy-regularised bound of Eq. 4
  (:func:`entropy_regularised_bound`); the minimiser of the risk (Eq. 5, Fig. 6, footnote 1),
  :func:`focal_optimal_prediction`, and its closed-form inverse q proportional to p / g(p, gamma),
  :func:`focal_prediction_target`.
- Charoenphakdee et al. (2021): the over-confidence threshold tau_oc of Thm. 8 (tau_uc is
  :func:`calib.focal.gradient.threshold`), :func:`tau_oc`; and a direct minimiser of the focal risk that checks Thm. 11
  without the map Psi^gamma, :func:`minimise_focal_risk`.

The torch training loss of the same name family is :func:`calib.losses.functional.focal_loss` (logits, integer targets);
:func:`focal_risk` takes probabilities and a target distribution.
"""

from __future__ import annotations

import warnings

import numpy as np
from scipy.optimize import minimize
from scipy.special import expit, xlogy

from calib._validate import as_scores, to_numpy
from calib.focal.numerics import (as_distributions, check_gamma, log_gradient_factor, log_phi_logit,
                                   scalar_or_array, solve_increasing)
from calib.focal.gradient import gradient_factor, gradient_factor_dp

__all__ = ["focal_optimal_prediction", "focal_prediction_target", "focal_risk", "entropy_regularised_bound",
           "tau_oc", "minimise_focal_risk"]


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
    rows, one = as_distributions(q, "q")
    n, k = rows.shape
    gam = check_gamma(gamma)
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
            value, slope = log_phi_logit(s, gcell[index])
            return value - target[index], slope
        return solve_increasing(fun, guess, np.full_like(guess, -745.0), np.full_like(guess, 745.0))

    # bracket the log normaliser t: p_y = expit(psi^{-1}(t + log q_y)), sum over the support increases in t
    psi_uniform, _ = log_phi_logit(np.full(len(todo), -np.log(k - 1.0)), gs)      # psi at p = 1/K
    psi_half, _ = log_phi_logit(np.zeros(len(todo)), gs)                           # psi at p = 1/2
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
        _, slope = log_phi_logit(s, g_cells_flat[chosen])
        prob = expit(s)
        total = np.bincount(position, weights=prob, minlength=len(index)) - 1.0
        d_total = np.bincount(position, weights=prob * (1.0 - prob) / slope, minlength=len(index))
        last_s["s"], last_s["chosen"] = s, chosen
        return total, d_total

    t0 = np.clip(np.zeros(len(todo)), t_lo, t_hi)
    t = solve_increasing(outer, t0, t_lo, t_hi)
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
    rows, one = as_distributions(probs, "probs")
    gam = check_gamma(gamma)
    gam = np.asarray(gam, dtype=float)
    gcol = gam.reshape(-1, 1) if gam.ndim == 1 else gam
    with np.errstate(divide="ignore"):
        log_phi = np.log(rows) - log_gradient_factor(rows, np.broadcast_to(gcol, rows.shape))
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

def focal_risk(probs, target, gamma):
    """The focal risk of a prediction for a target distribution (the general focal loss of App. A),
    ``L_f = -sum_y (1 - p_y)**gamma q_y log p_y``, one value per row.

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
    p, one = as_distributions(probs, "probs")
    q, _ = as_distributions(target, "target")
    if q.shape != p.shape:
        raise ValueError(f"target has shape {q.shape} but probs has {p.shape}; pass one target row per prediction.")
    gcol = np.asarray(check_gamma(gamma), dtype=float)
    gcol = gcol.reshape(-1, 1) if gcol.ndim == 1 else gcol
    with np.errstate(divide="ignore"):
        out = -np.sum((1 - p) ** gcol * xlogy(q, p), axis=1)
    return scalar_or_array(out[0]) if one else out


def entropy_regularised_bound(probs, target, gamma):
    """The right-hand side of Eq. 4 in its App. A form,
    ``L_c - gamma H[p_hat] = KL(q || p_hat) + H[q] - gamma H[p_hat]``.

    Mukhoti et al. (2020), Eq. 4 and App. A: ``focal_risk(p, q, gamma) >= entropy_regularised_bound(p, q, gamma)``
    (proved there for gamma >= 1; it holds for every gamma >= 0, see chapter 02).
    """
    p, one = as_distributions(probs, "probs")
    q, _ = as_distributions(target, "target")
    if q.shape != p.shape:
        raise ValueError(f"target has shape {q.shape} but probs has {p.shape}; pass one target row per prediction.")
    gam = np.asarray(check_gamma(gamma), dtype=float)
    with np.errstate(divide="ignore"):
        cross_entropy = -np.sum(xlogy(q, p), axis=1)
    entropy = -np.sum(xlogy(p, p), axis=1)
    out = cross_entropy - gam * entropy
    return scalar_or_array(out[0]) if one else out


def tau_oc(gamma):
    r"""tau_oc^gamma = argmax_v phi^gamma(v): where the gradient factor peaks; below it focal loss can over-estimate.

    Charoenphakdee et al. (2021), Thm. 8: if ``max_y q^{gamma,*}_y <= tau_oc`` (and q is not uniform on a
    subset of classes) the focal risk minimiser is eta-over-confident; if ``max_y q >= tau_uc``
    (:func:`~calib.focal.gradient.threshold`, where phi = 1) it is eta-under-confident; ``0 < tau_oc < tau_uc < 1/2``.
    The peak of phi = g is also the peak of Mukhoti et al.'s gradient factor (their Eq. 8 vanishes there).

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
    gamma = check_gamma(gamma, domain="positive",
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
    x = solve_increasing(fun, x0, lo, hi, xtol=1e-16)
    return scalar_or_array(np.exp(x).reshape(np.shape(gamma)))


def _as_eta_rows(eta, name="eta"):
    arr = as_scores(np.atleast_2d(to_numpy(eta, name)), name, kind="probs")
    return arr, np.ndim(to_numpy(eta, name)) == 1


def minimise_focal_risk(eta, gamma, *, gtol: float = 1e-14):
    r"""The focal risk minimiser q^{gamma,*}(eta) by direct minimisation: a cross-check, independent of Psi.

    Minimises the pointwise focal risk ``W(q; eta) = -sum_i eta_i (1 - q_i)^gamma log q_i``
    (Charoenphakdee et al. 2021, Eqs. 5 and 7; :func:`focal_risk` with target eta) over q = softmax(z) by a
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
    g = float(check_gamma(gamma))
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
            return float(focal_risk(q, e, g))

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
