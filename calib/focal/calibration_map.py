"""The focal calibration map Psi^gamma and its comparison with temperature scaling.

- Charoenphakdee et al. (2021), Thm. 11 / Eqs. 11-13, which is Komisarenko & Kull (2024)'s focal calibration
  map (Eq. 1): :func:`focal_map` applied to logits, in log space (float32-safe; numpy or torch,
  differentiable), its logarithm :func:`log_focal_map`, and log h^gamma (Eq. 13), :func:`log_focal_weight`.
- Komisarenko & Kull (2024): the binary map on logits, logit FC(s) = (gamma+1) s - log f_gamma(s) (Prop. 3,
  App. A.3): :func:`focal_calibration_logit`, :func:`log_f_gamma`, :func:`effective_inverse_temperature`; the
  temperature-scaling bounds of Prop. 3 as corrected, and the sharp band: :func:`ts_bounds`; the closest
  temperature by the paper's minimax criterion (Figs. 2, 5-7) and the distance it minimises:
  :func:`closest_temperature`, :func:`ts_distance`; the top-label change of Prop. 5: :func:`top_label_gain`.

The inverse of the map (from the posterior back to the focal risk minimiser) is
:func:`calib.focal.optimum.focal_optimal_prediction`.
"""

from __future__ import annotations

import numpy as np
from scipy.special import expit, softmax

from calib._validate import (as_float_array, as_scores, check_finite, check_int, check_positive, checked_tensor,
                             is_tensor, to_numpy)
from calib.focal.numerics import (as_probability, check_gamma, golden_section_minimise,
                                   log1p_gamma_r_negative, log_gradient_factor, log_one_minus_r, r_of_logit,
                                   r_top, scalar_or_array)

__all__ = ["focal_map", "log_focal_map", "log_focal_weight", "log_f_gamma", "focal_calibration_logit",
           "effective_inverse_temperature", "ts_bounds", "closest_temperature", "ts_distance", "top_label_gain",
           "CLOSEST_T_GRIDS", "CLOSEST_T_GRID_MANY"]


#: Rows of focal_map are processed in blocks of about this many entries, so that the temporaries stay in cache.
_MAP_BLOCK_ELEMENTS = 1 << 16


def _focal_map_block(z: np.ndarray, gamma: float, out: np.ndarray, log: bool = False,
                     overflow: bool = False) -> None:
    """Write Psi^gamma(softmax(z)) (or, with ``log``, its logarithm) into ``out`` for a finite (n, K) float
    block, in z's dtype (see focal_map). Rows whose logits lie further apart than the float range (their
    differences overflow to -inf, and r = 0 * -inf is nan) are detected at the end and redone with
    ``overflow``, which sets r(0) = 0 where v_j = 0, so the common case pays nothing for them."""
    if not (z.flags.c_contiguous and out.flags.c_contiguous):   # the flat views below must be views
        raise AssertionError("_focal_map_block needs C-contiguous z and out (see _focal_map_numpy)")
    n, k = z.shape
    top = np.argmax(z, axis=1)
    row_start = np.arange(0, n * k, k)
    flat = top + row_start                            # flat index of each row's top class
    with np.errstate(over="ignore"):                  # logits further apart than the float range: -inf, v_j = 0
        u = z - z.reshape(-1)[flat][:, None]          # log(v_j / v_top) <= 0, exactly 0 at the top class
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
        finite = np.isfinite(second)                  # -inf: every other class is beyond the float range, S = 0
        with np.errstate(divide="ignore"):
            shifted = np.log(np.exp(u_rest[finite] - second[finite][:, None]) @ ones)
        log_rest[np.flatnonzero(under)[finite]] = second[finite] + shifted
        log_rest[np.flatnonzero(under)[~finite]] = -np.inf
    lse = np.log1p(rest)                              # -log v_top
    v_top = 1 / (1 + rest)
    v *= v_top[:, None]                               # v_j
    big = rest < 1                                    # v_top > 1/2, where 1 - v_top cancels: the top class apart
    top_big = flat[big]
    # v_top by the same expression as every other class (ties stay ties); where it is > 1/2, 0 as a placeholder
    # (replaced below), which keeps log1p(-1) and 0/0 out of the vectorised loops: they would slow them down
    v.reshape(-1)[flat] = np.where(big, 0, v_top)
    log_v = u
    log_v -= lse[:, None]                             # log v_j, accurate for every j
    log_1mv = np.negative(v)
    np.log1p(log_1mv, out=log_1mv)                    # log(1 - v_j): accurate for v_j <= 1/2
    log_1mv.reshape(-1)[top_big] = (log_rest - lse)[big]   # log(1 - v_top) = log S - log(1 + S)
    with np.errstate(invalid="ignore"):               # 0 * -inf where a difference overflowed: see below
        r = v * log_v                                 # r = -v log v / (1 - v), in [0, 1]
    if overflow:
        r[v == 0] = 0                                 # r(0) = 0
    v -= 1
    r /= v
    r.reshape(-1)[top_big] = r_top(rest[big], log_rest[big], lse[big])   # r_top = log1p(S) / S
    r *= gamma
    with np.errstate(divide="ignore", invalid="ignore"):   # gamma = -1, r_top = 1 (or 1 + ulp): replaced below
        np.log1p(r, out=r)                            # log(1 + gamma r)
    if gamma < 0 and big.any():                       # 1 + gamma r_top -> 1 + gamma as v_top -> 1: without cancellation
        r.reshape(-1)[top_big] = log1p_gamma_r_negative(gamma, log_one_minus_r(rest[big], log_rest[big]))
    with np.errstate(over="ignore", invalid="ignore"):
        log_1mv *= gamma                              # -inf for the top class when gamma log(1 - v_top) overflows
    log_h = log_v                                     # log h = log v - log g, log g = gamma log(1-v) + log(1 + gamma r)
    with np.errstate(invalid="ignore"):               # S = 0 exactly: inf - inf, replaced just below
        log_h -= log_1mv
        log_h -= r
    shift = log_h.reshape(-1)[flat] if gamma >= 0 else log_h.max(axis=1)   # the top class has the largest h
    vertex = np.isposinf(shift) | np.isneginf(log_rest)
    if vertex.any():
        # S = 0 (every other class beyond the float range) or h_top overflowing (inf, or inf - inf): for every
        # gamma >= -1, h_top / h_j grows without bound as S -> 0, so Psi is the vertex (one-hot), its limit
        log_h[vertex] = -np.inf
        log_h.reshape(-1)[flat[vertex]] = 0
        shift[vertex] = 0
    log_h -= shift[:, None]
    np.exp(log_h, out=out)
    total = out @ ones
    if log:
        np.subtract(log_h, np.log(total)[:, None], out=out)
    else:
        out *= (1 / total)[:, None]
    if not overflow:
        broken = np.flatnonzero(np.isnan(total))
        if broken.size:
            fixed = np.empty((broken.size, k), dtype=out.dtype)
            _focal_map_block(z[broken], gamma, fixed, log=log, overflow=True)
            out[broken] = fixed


def _focal_map_numpy(z: np.ndarray, gamma: float, log: bool = False) -> np.ndarray:
    """Psi^gamma(softmax(z)) (or its logarithm) row-wise for a finite float (N, K) array, in blocks of rows.

    The block writes through flat views (``a.reshape(-1)[i] = ...``), which are views only of C-ordered arrays: a
    Fortran-ordered or strided input (a pandas ``DataFrame.to_numpy()``, a transposed or sliced array) would make
    them copies and the writes would be lost silently. So z is made C-contiguous first (a copy only when it is not),
    and so is the output."""
    z = np.ascontiguousarray(z)
    n, k = z.shape
    out = np.empty(z.shape, dtype=z.dtype)
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

    gamma = check_gamma(gamma, domain="map", scalar=True)
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
    special = is_top & (log_rest < 0)              # v_top > 1/2, where 1 - v_top cancels: the top class apart
    v = torch.where(special, torch.full_like(z, 0.5), log_v.exp())  # 0.5 is a placeholder, never used
    log_1mv = torch.where(special, log_rest - lse, torch.log1p(-v))
    top_r = r_top(torch.exp(log_rest), log_rest, lse, xp=torch)
    positive = v > 0                               # v_j underflowed (log v_j may be -inf): r(0) = 0
    safe_log_v = torch.where(positive, log_v, torch.zeros_like(log_v))
    r = torch.where(special, top_r, torch.where(positive, -v * safe_log_v / (1 - v), torch.zeros_like(v)))
    if gamma >= 0:
        log1p_gr = torch.log1p(gamma * r)
    else:                                          # as in _focal_map_block: 1 + gamma r_top without cancellation
        top_term = log1p_gamma_r_negative(gamma, log_one_minus_r(torch.exp(log_rest), log_rest, xp=torch), xp=torch)
        log1p_gr = torch.where(special, top_term, torch.log1p(gamma * torch.where(special, torch.zeros_like(r), r)))
    log_h = log_v - gamma * log_1mv - log1p_gr
    # S = 0 or h_top overflowing: the vertex, Psi's limit as S -> 0 for every gamma >= -1 (see _focal_map_block)
    saturated = torch.isneginf(log_rest) | (torch.isposinf(log_h) | torch.isnan(log_h)).any(dim=1, keepdim=True)
    if bool(saturated.any()):
        log_h = torch.where(saturated, torch.where(is_top, torch.zeros_like(log_h), torch.full_like(log_h, -torch.inf)),
                            log_h)
    return torch.softmax(log_h, dim=1)


def focal_map(logits, gamma):
    r"""The focal calibration map Psi^gamma applied to softmax(logits).

    ``Psi^gamma_i(v) = h(v_i) / sum_l h(v_l)`` with ``h(v) = v / phi^gamma(v)`` and
    ``phi^gamma(v) = (1-v)^gamma - gamma (1-v)^(gamma-1) v log v``, where phi^gamma is the focal gradient
    factor g(v, gamma) of :func:`~calib.focal.gradient.gradient_factor`. For gamma >= 0 it maps the focal risk minimiser
    back to the class posterior, ``eta = Psi^gamma(q^{gamma,*})`` (Charoenphakdee et al. 2021, Thm. 11, Eqs. 11-13);
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
    Evaluated in log space from the logits, never from the rounded probabilities:
    ``log h_i = log v_i - gamma log(1 - v_i) - log(1 + gamma r_i)`` with ``r = -v log v / (1 - v)`` in [0, 1] (so
    ``g = (1-v)^gamma (1 + gamma r)``), ``log v`` from the shifted logits and ``log(1 - v_top)`` as the log-sum-exp of
    the other classes relative to the top one. So a saturated output (float32 softmax of logits (20, 0, 0) is exactly
    (1, 0, 0), where the printed formula gives nan) still maps to finite probabilities summing to 1, and a numerically
    one-hot row stays one-hot (the paper's convention). Since h is increasing (gamma >= 0; Prop. 12), the argmax is
    kept; for gamma in [-1, 0), h is not monotone, but the argmax is still kept (the tests check it). For gamma < 0 the
    top class's ``log(1 + gamma r)`` is evaluated as ``log((1 + gamma) + (-gamma)(1 - r))`` with ``1 - r`` from a
    series, so gamma = -1, where ``1 + gamma r_top -> 0`` as v_top -> 1, stays exact.
    The inverse map (from eta back to q^{gamma,*}) is :func:`~calib.focal.optimum.focal_optimal_prediction`.
    """
    gamma = check_gamma(gamma, domain="map", scalar=True)
    if is_tensor(logits):
        import torch

        logits = checked_tensor(logits)
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


def log_focal_weight(p, gamma):
    r"""log h^gamma(p) = log p - log phi^gamma(p): the log of the weight that Psi^gamma normalises (Eq. 13).

    Charoenphakdee et al. (2021), Eq. 13: ``h(p) = p / phi^gamma(p)`` with phi^gamma the gradient factor
    :func:`~calib.focal.gradient.gradient_factor`; Psi^gamma_i(v) = h(v_i) / sum_l h(v_l). Evaluated in log space, so it
    stays finite where h itself overflows (h(p) ~ (1-p)^-gamma / (1 + gamma) as p -> 1); +inf at p = 1 for gamma > 0.

    Parameters
    ----------
    p : array_like
        Probabilities in (0, 1].
    gamma : array_like
        Focal parameter, >= 0; broadcasts against ``p``.
    """
    p = as_probability(p, "p")
    if np.any(p == 0):
        raise ValueError("p must be > 0: log h(0) = log 0 = -inf. Drop the zeros (Psi gives them weight 0).")
    gamma = check_gamma(gamma)
    p, gamma = np.broadcast_arrays(p, gamma)
    return scalar_or_array(np.log(p) - log_gradient_factor(p, gamma))


# ====================================================================================================
# Komisarenko & Kull (2024): the binary focal calibration map on logits, FC(s) = p_hat(sigmoid(s)), its
# temperature-scaling bounds (Prop. 3, corrected), the closest temperature by the paper's minimax criterion
# (binary and multiclass, Figs. 2 and 6), and the top-label change of Prop. 5. The multiclass map itself is
# `focal_map` above (Eq. 1 of the paper is Charoenphakdee et al.'s Psi^gamma); nothing here re-implements it.
# ====================================================================================================



def log_f_gamma(s, gamma):
    r"""log f_gamma(s), the factor that separates focal calibration from temperature scaling (App. A.3).

    Komisarenko & Kull (2024), Prop. 3 and App. A.3: ``FC(s) = 1 / (1 + exp(-(gamma+1) s) f_gamma(s))`` with

    ``f_gamma(s) = (gamma e^s log(1 + e^-s) + 1) / (1 + gamma e^-s log(1 + e^s))``.

    Since ``e^s log(1 + e^-s) = r(sigmoid(s))`` with ``r(p) = -p log p / (1 - p)`` (the factor of
    :func:`~calib.focal.gradient.gradient_factor`, ``g = (1-p)^gamma (1 + gamma r)``), it is computed as
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
    gamma = check_gamma(gamma, domain="map")
    s, gamma = np.broadcast_arrays(s, gamma)
    a = np.abs(s)                                 # log f is odd: evaluate at |s| so that the result is exactly odd
    with np.errstate(divide="ignore", invalid="ignore"):   # gamma = -1 and r(a) = 1: replaced just below
        up = np.log1p(gamma * r_of_logit(a))     # log(1 + gamma r(|s|)), r(|s|) in [log 2, 1)
    negative = gamma < 0
    if np.any(negative):                          # 1 + gamma r(|s|) -> 1 + gamma: without cancellation
        safe = np.where(negative, gamma, -0.5)
        up = np.where(negative, log1p_gamma_r_negative(safe, log_one_minus_r(np.exp(-a), -a)), up)
    return scalar_or_array(np.sign(s) * (up - np.log1p(gamma * r_of_logit(-a))))


def focal_calibration_logit(s, gamma):
    r"""logit FC(s): the binary focal calibration map on logits, ``(gamma + 1) s - log f_gamma(s)``.

    ``FC(s) = p_hat_gamma(sigmoid(s))`` (Komisarenko & Kull 2024, Prop. 3), where p_hat_gamma is the binary
    focal calibration map of Prop. 2, ``p_hat(q) = 1 / (1 + ((1-q)/q)^gamma ((1-q) - gamma q log q) /
    (q - gamma (1-q) log(1-q)))``. It is the two-class case of :func:`focal_map`:
    ``focal_map([[s, 0]], gamma)[0, 0] == expit(focal_calibration_logit(s, gamma))``. Returning the logit
    keeps the map exact where FC(s) rounds to 1 (``|s| > 37 / (gamma + 1)``
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
    gamma = check_gamma(gamma, domain="map")
    s, gamma = np.broadcast_arrays(s, gamma)
    return scalar_or_array((gamma + 1) * s - log_f_gamma(s, gamma))


def effective_inverse_temperature(s, gamma):
    r"""beta(s) = logit FC(s) / s: the inverse temperature of the TS map that agrees with FC at the logit s.

    ``beta(s) = gamma + 1 - log f_gamma(s) / s`` (Komisarenko & Kull 2024, App. A.3), even in s, with the limit
    ``beta(0) = gamma + 1 - gamma (2 log 2 - 1) / (1 + gamma log 2)`` (the slope f'_gamma(0); the book's
    derivation, :func:`calib.symbolic.focal_calibration_on_logits
    <calib.symbolic.komisarenko.focal_calibration_on_logits>`). Prop. 3, corrected, says
    ``gamma + 1 - log(gamma + 1) / 2 < beta(s) < gamma + 1`` for gamma > 0 and s != 0.

    Parameters
    ----------
    s : array_like
        Logits; s = 0 returns the limit.
    gamma : array_like
        Focal parameters, >= -1; broadcasts against ``s``.

    Notes
    -----
    For ``0 < |s| << 1`` the quotient loses relative precision like ``eps / |s|`` (about 1e-13 at ``|s| = 1e-3``).
    """
    s = as_float_array(s, "s")
    gamma = check_gamma(gamma, domain="map")
    s, gamma = np.broadcast_arrays(s, gamma)
    log2 = np.log(2.0)
    at_zero = gamma + 1 - gamma * (2 * log2 - 1) / (1 + gamma * log2)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = gamma + 1 - log_f_gamma(s, gamma) / s
    return scalar_or_array(np.where(s == 0, at_zero, out))


def _min_beta(gammas: np.ndarray, s_max: float = 12.0, step: float = 0.005) -> np.ndarray:
    """min over s > 0 of beta(s) for each gamma: a grid search on [0, ``s_max``] refined by golden-section search.

    A gamma whose grid minimum is the grid's last point is searched again on a grid twice as long, until its minimum
    lies inside: the minimiser grows with gamma (s near 12.3 at gamma = 1e5, 14.6 at 1e6), and a search that stopped
    at s = 12 returned beta(12), above the minimum, so T_high was not the tightest (gamma above about 8e4)."""
    out = np.empty(gammas.shape, dtype=np.float64)
    todo = np.arange(gammas.size)
    while todo.size:
        found, at_end = _min_beta_on(gammas[todo], s_max, step)
        last = s_max >= 1536.0                  # s beyond 1536: exp(-s) is far below float64's resolution of beta
        done = ~at_end | last
        out[todo[done]] = found[done]
        todo, s_max = todo[~done], 2.0 * s_max
    return out


def _min_beta_on(gammas: np.ndarray, s_max: float, step: float) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_min_beta` on the grid [0, ``s_max``] and, per gamma, whether the grid minimum is its last point."""
    s = np.arange(0.0, s_max + step / 2, step)
    beta = effective_inverse_temperature(s[None, :], gammas[:, None])
    i = np.argmin(beta, axis=1)
    lo = s[np.maximum(i - 1, 0)]
    hi = s[np.minimum(i + 1, s.size - 1)]
    _, fc, _, fd = golden_section_minimise(lambda x: effective_inverse_temperature(x, gammas), lo, hi,
                                           iterations=60)
    # a grid minimum at s = 0 is the minimum (beta is even and smooth); refining there would only measure the
    # rounding of log f(s) / s, which grows like eps / s
    return np.where(i == 0, beta[:, 0], np.minimum(np.minimum(fc, fd), beta.min(axis=1))), i == s.size - 1


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
        beta, approached as ``|s| -> inf``, never attained) and ``T_high = 1 / min_s beta(s)``, found numerically;
        for gamma <= 5 the minimum is at s = 0, so ``T_high = 1 / beta(0)`` in closed form.

    Returns
    -------
    (T_low, T_high) : tuple of numpy.ndarray or numpy.float64
        ``T_low <= T_high``, each shaped like ``gamma``.
    """
    gamma = check_gamma(gamma, why="Prop. 3 is stated for gamma > 0 (at gamma = 0, FC is the identity, T = 1).")
    low = 1.0 / (gamma + 1.0)
    if not sharp:
        high = 1.0 / (gamma + 1.0 - 0.5 * np.log1p(gamma))
    else:
        flat = gamma.ravel()
        high = (1.0 / _min_beta(flat)).reshape(gamma.shape)
    return scalar_or_array(low), scalar_or_array(high)


#: Default grids of the closest-temperature search, (logit range R, step) by number of classes.
#: Binary: s in [0, 20] step 0.001. Three classes: logits in (-5, 5), step
#: 0.01, as Sec. 3.3 states, i.e. sorted differences 0 >= d_2 >= d_3 > -10. Four or more: the paper gives no
#: grid; step 0.1 (the book's choice).
CLOSEST_T_GRIDS = {2: (20.0, 0.001), 3: (10.0, 0.01)}
#: The grid for four or more classes, (logit range R, step).
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
    gamma = check_gamma(gamma, domain="map")
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
    return scalar_or_array(out)


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
    gamma = check_gamma(gamma)
    rows = _grid_settings(n_classes, logit_range, step)
    flat = gamma.ravel()
    temps, errors = np.empty_like(flat), np.empty_like(flat)
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
        c, fc, d, fd = golden_section_minimise(lambda x: np.array([_max_ts_error(rows, target, b) for b in x]),
                                               scan[max(j - 1, 0)], scan[min(j + 1, len(scan) - 1)], xtol=xtol)
        c, fc, d, fd = float(c[0]), float(fc[0]), float(d[0]), float(fd[0])
        best = min((fc, c), (fd, d), (vals[j], scan[j]))
        errors[i], temps[i] = best[0], 1.0 / best[1]
    return scalar_or_array(temps.reshape(gamma.shape)), scalar_or_array(errors.reshape(gamma.shape))


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
