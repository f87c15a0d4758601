"""Focal temperature scaling, ``p_hat_gamma(softmax(z / T))`` with (gamma, T) chosen on validation logits
(Komisarenko & Kull 2024, Secs. 4.2 and 5): the paper's grid search, vectorised over the grid
(:func:`focal_temperature_scores`), and the line search it proposes. Estimator protocol and array policy as stated
in :mod:`calib.posthoc`.
"""

from __future__ import annotations

from typing import cast

import numpy as np
from scipy.special import expit

from calib import metrics
from calib._validate import as_logits_labels, check_choice, check_int, n_threads
from calib.focal.numerics import check_gamma, log1p_gamma_r_negative, log_one_minus_r, r_top
from calib.posthoc._common import (Estimator, as_grid, checked_sample_weight, constant_logits_error, deprecated_alias,
                                   sampling_noise, scaled_focal_map, weighted_equal_mass_ece_rows)
from calib.posthoc.grid import grid_edge

__all__ = ["KOMISARENKO_GAMMAS", "KOMISARENKO_TEMPERATURES", "focal_temperature_scores", "FocalTemperatureScaling"]

#: The gamma_ev grid of focal temperature scaling (Komisarenko & Kull 2024, Sec. 5.1); 0 is not in it.
KOMISARENKO_GAMMAS = np.array([-0.5, -0.25, 0.05, 0.25, 0.37, 0.5, 0.75, 1.0, 5.0])
#: The temperature grid of focal temperature scaling (Komisarenko & Kull 2024, Sec. 5.1), T = 0.01, 0.02,
#: ..., 5.00 (500 values).
#:
#: :meta hide-value:
KOMISARENKO_TEMPERATURES = np.round(np.arange(1, 501) * 0.01, 10)

#: Rows of a block of the grid kernel: about this many logits per block, so that its temporaries stay in cache.
_FTS_BLOCK_ELEMENTS = 1 << 15

#: exp(x) rounds to 0 in float64 below about -745.13; numpy's vectorised exp takes a slow path for such x (about
#: 20 times slower per element), which small temperatures (beta d far below -745) hit on most logits.
_EXP_ZERO = -745.2


def _exp(x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """``np.exp(x)``, bit for bit, without numpy's slow path where the result is 0 (x < -745.2: written directly)."""
    if out is None:
        out = np.empty_like(x)
    zero = x < _EXP_ZERO
    if zero.any():
        out.fill(0.0)
        np.exp(x, out=out, where=~zero)
    else:
        np.exp(x, out=out)
    return out


class _FTSData:
    """Logits rearranged once for the grid kernel: each row's top class apart, the others as (N, K-1) shifts.

    ``w``: the frequency weights (positive; None: unweighted), ``total`` their sum (N unweighted)."""

    def __init__(self, z: np.ndarray, y: np.ndarray, w: np.ndarray | None = None):
        n, k = z.shape
        self.n, self.k = n, k
        self.w, self.total = w, float(n if w is None else w.sum())
        top = np.argmax(z, axis=1)
        rows = np.arange(n)
        z_top = z[rows, top][:, None]
        # the shifts z_j - z_top (<= 0) of the columns other than the top, in order: column j of d is column j of
        # z left of the top, j + 1 from it on (an elementwise choice between two views of z, ~15 times faster than
        # a boolean-mask gather, and without an (N, K) array of shifts beside it)
        self.d = np.where(np.arange(k - 1)[None, :] < top[:, None], z[:, :-1], z[:, 1:])
        self.d -= z_top
        self.d_min = self.d.min(axis=1)                      # so that a block knows whether exp can underflow
        self.correct = (top == y)
        self.y_other = np.where(self.correct, 0, y - (y > top))   # column of the label among the others
        self.d_y = z[rows, y] - z_top[:, 0]                   # the label's shift (0 where it is the top class)


class _Workspace:
    """The (rows, K-1) scratch arrays of :func:`_fts_block`, allocated once per temperature and reused by every
    block (a fresh array per operation and block cost about a quarter of the kernel's time)."""

    def __init__(self, rows: int, k_other: int):
        self.u, self.q, self.one_minus, self.log_1mq, self.b, self.den = (np.empty((rows, k_other)) for _ in range(6))


def _fts_block(data: _FTSData, lo: int, hi: int, beta: float, gammas: np.ndarray, row: "_RowTerms",
               total: np.ndarray, work: _Workspace) -> None:
    """The sums S of the non-top weights of FTS_{gamma, 1/beta} (rows lo:hi, every gamma), and the row terms.

    The focal calibration map (Eq. 1; :func:`calib.focal.calibration_map.focal_map`) gives class j the weight
    ``w_j = q_j / g(q_j, gamma) = (1 - q_j)^-gamma / (1/q_j + gamma b_j)`` with ``b = -log q / (1 - q)``
    (``g = (1-q)^gamma (1 + gamma r)``, ``r = q b``) and ``q = softmax(beta z)``. Everything that does not
    depend on gamma (1/q, b, log(1 - q)) is computed once per temperature and shared by the gammas; at
    gamma = 0, ``w_j = q_j`` and ``S = R / (1 + R)`` in closed form (``R = sum_{j != top} q_j / q_top``), and a
    temperature whose gammas are all 0 computes nothing else. The non-top classes (q_j <= 1/2) are summed in
    linear space, ``S = sum_{j != top} w_j``, into ``total[:, lo:hi]``; the top class, whose q can round to 1, is
    kept in log space (log(1 - q_top) is the log-sum-exp of the others), as in focal_map, through the per-row
    terms stored in ``row`` (see :func:`_fts_top_confidence`; those of every row at once by :func:`_fts_row_terms`).
    Called under ``np.errstate`` that ignores overflow, division by zero and invalid values.
    """
    n_rows = hi - lo
    u = work.u[:n_rows]
    np.multiply(data.d[lo:hi], beta, out=u)            # log(q_j / q_top)
    q = work.q[:n_rows]
    if beta * data.d_min[lo:hi].min() < _EXP_ZERO:     # small T: part of the block underflows to 0
        _exp(u, out=q)
    else:
        np.exp(u, out=q)
    ratio = q.sum(axis=1)                              # R = (1 - q_top) / q_top
    lse = np.log1p(ratio)                              # -log q_top
    row.ratio[lo:hi], row.lse[lo:hi] = ratio, lse
    if not gammas.any():                               # gamma = 0 only: w_j = q_j, and the label's terms vanish
        total[:, lo:hi] = ratio / (1.0 + ratio)
        row.log_1mq_y[lo:hi], row.r_y[lo:hi] = 0.0, 0.0
        return
    q *= (1.0 / (1.0 + ratio))[:, None]                # q_j, j != top (each <= 1/2)
    one_minus = work.one_minus[:n_rows]
    np.subtract(1.0, q, out=one_minus)                 # in [1/2, 1]: exact enough for (1 - q)^-gamma
    rows = np.arange(n_rows)
    yo = data.y_other[lo:hi]
    if np.all((gammas == 0) | (gammas == 1)):          # the line search's default anchors: gamma = 1 needs no power
        _fts_gamma_one(ratio, lse, u, q, one_minus, rows, yo, gammas, row, total, lo, hi, work.b[:n_rows])
        return
    log_1mq = work.log_1mq[:n_rows]
    np.log(one_minus, out=log_1mq)
    b = work.b[:n_rows]
    np.subtract(lse[:, None], u, out=b)                # -log q_j
    b /= one_minus                                     # b_j = -log q_j / (1 - q_j)
    row.log_1mq_y[lo:hi] = log_1mq[rows, yo]
    row.r_y[lo:hi] = q[rows, yo] * b[rows, yo]
    inv_q = np.reciprocal(q, out=u)                    # inf where q underflows: that class then weighs 0
    t, den = one_minus, work.den[:n_rows]              # (1 - q is no longer needed)
    for i, gam in enumerate(gammas):                   # out of range at large gamma: redone in log space
        if gam == 0:
            np.divide(ratio, 1.0 + ratio, out=total[i, lo:hi])
            continue
        np.multiply(log_1mq, -gam, out=t)
        np.exp(t, out=t)                               # (1 - q)^-gamma
        np.multiply(b, gam, out=den)
        den += inv_q                                   # (1 + gamma r) / q
        t /= den
        np.sum(t, axis=1, out=total[i, lo:hi])         # S = sum_{j != top} w_j


def _fts_gamma_one(ratio, lse, u, q, one_minus, rows, yo, gammas, row, total, lo, hi, minus_log_q) -> None:
    """:func:`_fts_block`'s sums for gammas that are all 0 or 1 (the line search's default anchors). At gamma = 1,
    ``(1 - q)^-1`` needs no logarithm and power: ``w_j = q_j / ((1 - q_j) - q_j log q_j)`` (one division instead
    of three, no exp or log), equal to the general form within a few units of rounding (~4e-16 relative)."""
    np.subtract(lse[:, None], u, out=minus_log_q)      # -log q_j
    q_y, one_minus_y = q[rows, yo], one_minus[rows, yo]
    row.log_1mq_y[lo:hi] = np.log(one_minus_y)
    row.r_y[lo:hi] = q_y * (minus_log_q[rows, yo] / one_minus_y)
    den = minus_log_q
    den *= q
    den += one_minus                                   # (1 - q) - q log q = (1 - q) (1 + r)
    np.divide(q, den, out=den)                         # w_j at gamma = 1
    s_one = den.sum(axis=1)
    for i, gam in enumerate(gammas):
        total[i, lo:hi] = s_one if gam == 1 else ratio / (1.0 + ratio)


def _fts_row_terms(data: _FTSData, beta: float, row: "_RowTerms") -> None:
    """The per-row terms of the top class and the label that :func:`_fts_block` leaves to be done for every row at
    once (from R and log(1 + R) of each row): log R, log(1 - q_top), r_top and log q_label."""
    with np.errstate(divide="ignore"):
        row.log_ratio[:] = np.log(row.ratio)
    small = row.ratio < np.finfo(float).tiny * 1024    # R subnormal or 0: log R by a shifted log-sum-exp
    if small.any():
        us = data.d[small] * beta
        m = us.max(axis=1)
        row.log_ratio[small] = m + np.log(_exp(us - m[:, None]).sum(axis=1))
    row.log_1mq_top[:] = row.log_ratio - row.lse
    row.r_top[:] = r_top(row.ratio, row.log_ratio, row.lse)   # r at q_top = 1 / (1 + R)
    row.log_q_y[:] = data.d_y * beta - row.lse


class _RowTerms:
    """Per-row quantities of one temperature that do not depend on gamma (filled block by block)."""

    lse: np.ndarray
    log_1mq_top: np.ndarray
    r_top: np.ndarray
    ratio: np.ndarray
    log_ratio: np.ndarray
    log_q_y: np.ndarray
    log_1mq_y: np.ndarray
    r_y: np.ndarray

    def __init__(self, n: int):
        for name in ("lse", "log_1mq_top", "r_top", "ratio", "log_ratio", "log_q_y", "log_1mq_y", "r_y"):
            setattr(self, name, np.empty(n))


def _fts_log_rest_exact(data: _FTSData, rows: np.ndarray, beta: float, gammas: np.ndarray,
                        lse: np.ndarray) -> np.ndarray:
    """log S = log sum_{j != top} w_j in log space, for the (gamma, row) pairs where the linear-space sum of
    :func:`_fts_block` overflowed or underflowed ((1 - q)^-gamma beyond the float range at large |gamma|)."""
    u = data.d[rows] * beta
    log_q = u - lse[:, None]                           # log q_j, j != top
    q = _exp(log_q)
    log_1mq = np.log1p(-q)
    b = -log_q / (1.0 - q)                             # -log q / (1 - q)
    gam = gammas[:, None]
    with np.errstate(divide="ignore", over="ignore"):
        log_den = np.log(np.reciprocal(q) + gam * b)   # log((1 + gamma r) / q); inf where q underflows: weight 0
    a = -gam * log_1mq - log_den                       # log w_j
    top = a.max(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = top + np.log(_exp(a - top[:, None]).sum(axis=1))
    return np.where(np.isneginf(top), -np.inf, out)


def _fts_log_top_weight(row: _RowTerms, gammas: np.ndarray) -> np.ndarray:
    """log w_top (G, N), the top class's weight in the focal map's sum (its log-space form, :func:`_fts_block`)."""
    gam = gammas[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):   # gamma = -1 and r_top = 1: replaced just below
        log1p_gr_top = np.log1p(gam * row.r_top)
    negative = gammas < 0
    if negative.any():                                 # 1 + gamma r_top -> 1 + gamma as q_top -> 1: no cancellation
        log_1mr = log_one_minus_r(row.ratio, row.log_ratio)
        log1p_gr_top[negative] = log1p_gamma_r_negative(gam[negative], log_1mr[None, :])
    return -row.lse - gam * row.log_1mq_top - log1p_gr_top


def _fts_top_confidence(row: _RowTerms, log_total: np.ndarray, gammas: np.ndarray) -> np.ndarray:
    """From log S, S = sum of the non-top weights (G, N): the top-label confidence ``w_top / (w_top + S)``, all that
    the ECE objective reads (the label's terms of :func:`_fts_label_log_probability` are left out: they took about a
    quarter of a temperature's time)."""
    gap = log_total - _fts_log_top_weight(row, gammas)   # log(S / w_top); -inf when every other class underflows
    return expit(-gap)


def _fts_label_log_probability(data: _FTSData, row: _RowTerms, log_total: np.ndarray,
                               gammas: np.ndarray) -> np.ndarray:
    """From log S, S = sum of the non-top weights (G, N): the label's log-probability, all that the NLL objective
    reads."""
    gam = gammas[:, None]
    log_w_top = _fts_log_top_weight(row, gammas)
    gap = log_total - log_w_top                        # log(S / w_top); -inf when every other class underflows
    log_w_y = np.where(data.correct, log_w_top, row.log_q_y - gam * row.log_1mq_y - np.log1p(gam * row.r_y))
    return log_w_y - log_w_top - np.logaddexp(0.0, gap)    # log w_y - log(w_top + S)


def _fts_scores_one_temperature(data: _FTSData, temperature: float, gammas: np.ndarray, objective: str,
                                n_bins: int) -> np.ndarray:
    n = data.n
    total = np.empty((len(gammas), n))
    row = _RowTerms(n)
    step = min(n, max(1, _FTS_BLOCK_ELEMENTS // max(1, data.k - 1)))
    work = _Workspace(step, data.k - 1)
    beta = 1.0 / temperature
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        for lo in range(0, n, step):
            _fts_block(data, lo, min(n, lo + step), beta, gammas, row, total, work)
    _fts_row_terms(data, beta, row)
    with np.errstate(divide="ignore"):
        log_total = np.log(total)
    redo = ~(total >= np.finfo(float).tiny) | np.isinf(total)   # out of the float range: sum in log space
    if redo.any():
        g_idx, n_idx = np.nonzero(redo)
        log_total[g_idx, n_idx] = _fts_log_rest_exact(data, n_idx, beta, gammas[g_idx], row.lse[n_idx])
    if objective == "nll":                             # the label's log-probabilities, (G, N)
        log_py = _fts_label_log_probability(data, row, log_total, gammas)
        return -(log_py @ data.w) / data.total if data.w is not None else -log_py.mean(axis=1)
    conf = _fts_top_confidence(row, log_total, gammas)
    if data.w is not None:                             # frequency weights (FocalTemperatureScaling's docstring)
        return weighted_equal_mass_ece_rows(conf, data.correct, data.w, n_bins)
    return metrics.equal_mass_ece_rows(conf, data.correct, n_bins, check=False)   # checked by the caller


def _fts_grid(data: _FTSData, gammas: np.ndarray, temperatures: np.ndarray, objective: str, n_bins: int,
              pairs: bool = False) -> np.ndarray:
    """Scores of every (gamma, T) of the grid, shape (G, n_T); with ``pairs``, of the pairs (gammas[i], T[i]).

    Pairs that share a temperature (a line search whose two anchors chose the same T) share its gamma-free work,
    as the gammas of a grid do; the scores do not depend on that grouping."""
    if pairs:
        temps, group = np.unique(temperatures, return_inverse=True)
        members = [np.flatnonzero(group == i) for i in range(len(temps))]
    else:
        temps, members = temperatures, None

    def run(index):
        if pairs:
            return [_fts_scores_one_temperature(data, temps[i], gammas[members[i]], objective, n_bins) for i in index]
        return [_fts_scores_one_temperature(data, temps[i], gammas, objective, n_bins) for i in index]

    work = data.n * data.k * (len(temperatures) if pairs else len(temperatures) * len(gammas))
    threads = n_threads(work, min_work=1 << 20)
    chunks = [c for c in np.array_split(np.arange(len(temps)), threads) if c.size]
    if len(chunks) == 1:
        out = run(chunks[0])
    else:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(len(chunks)) as pool:
            out = [s for part in pool.map(run, chunks) for s in part]
    if not pairs:
        return np.stack(out, axis=1)
    scores = np.empty(len(temperatures))
    for index, group_scores in zip(cast(list, members), out):     # a list when pairs
        scores[index] = group_scores
    return scores


def _as_gamma_grid(gammas) -> np.ndarray:
    return check_gamma(gammas, "gammas", domain="map", ndim=1)


def _as_temperature_grid(temperatures) -> np.ndarray:
    return as_grid(temperatures, "temperatures")


def focal_temperature_scores(logits, labels, gammas=None, temperatures=None, objective: str = "ece",
                             n_bins: int = 15) -> np.ndarray:
    """The validation score of focal temperature scaling at every point of a (gamma, T) grid.

    ``FTS_{gamma, T}(z) = p_hat_gamma(softmax(z / T))`` (Komisarenko & Kull 2024, Sec. 4.2), scored by the
    equal-mass ECE with ``n_bins`` bins (``objective="ece"``, :func:`calib.metrics.adaptive_ece
    <calib.metrics.binned.adaptive_ece>`) or by the NLL (``"nll"``, :func:`calib.metrics.nll
    <calib.metrics.scores.nll>`); the paper's Sec. 5.1 protocol takes the argmin over the grid
    :data:`KOMISARENKO_GAMMAS` x :data:`KOMISARENKO_TEMPERATURES`.

    Parameters
    ----------
    logits : array_like or torch.Tensor, shape (N, K)
    labels : array_like or torch.Tensor, shape (N,)
    gammas : array_like, optional
        1-D, each >= -1 (gamma = 0 is plain temperature scaling). Default :data:`KOMISARENKO_GAMMAS`.
    temperatures : array_like, optional
        1-D, positive. Default :data:`KOMISARENKO_TEMPERATURES`.
    objective : {"ece", "nll"}
    n_bins : int

    Returns
    -------
    numpy.ndarray, shape (len(gammas), len(temperatures))
        Equal, up to rounding, to scoring ``calib.focal.focal_map(logits / T, gamma)`` with the metric at each
        grid point (the tests check it), but computed without forming the (N, K) probabilities: only the
        top-label confidence and the label's log-probability enter the scores, everything that does not depend
        on gamma is shared across the gammas of a temperature, rows are processed in cache-sized blocks, and
        temperatures are split over threads (up to 8). The cost is about 10 ns per logit, gamma and temperature
        on one core, 5-7 times less than the per-point loop: the paper's 9 x 500 grid on 10^4 x 100 logits takes
        about 50 s on two shared cores (``tests/benchmarks/focal_temperature_scaling.py``).
    """
    z, y = as_logits_labels(logits, labels)
    check_choice(objective, "objective", FocalTemperatureScaling.OBJECTIVES)
    n_bins = check_int(n_bins, "n_bins")
    g = KOMISARENKO_GAMMAS if gammas is None else _as_gamma_grid(gammas)
    t = KOMISARENKO_TEMPERATURES if temperatures is None else _as_temperature_grid(temperatures)
    return _fts_grid(_FTSData(z, y), g, t, objective, n_bins)


class FocalTemperatureScaling(Estimator):
    r"""Focal temperature scaling: ``p_hat_gamma(softmax(z / T))`` with (gamma, T) chosen on validation logits.

    Komisarenko & Kull (2024), Sec. 4.2: temperature scaling followed by the focal calibration map of Eq. 1
    (:func:`calib.focal.calibration_map.focal_map`) with an "evaluation" gamma that may differ from the training gamma
    and may be negative (gamma >= -1). Sec. 5.1's protocol: choose (gamma, T) minimising the validation ECE (15
    equal-mass bins) for the ECE column, or the validation NLL for the log-loss column.

    Parameters
    ----------
    objective : {"ece", "nll"}
        "ece": equal-mass top-label ECE with ``n_bins`` bins (:func:`calib.metrics.adaptive_ece
        <calib.metrics.binned.adaptive_ece>`); "nll": NLL.
    n_bins : int
        Bins of the ECE objective (the paper: 15).
    gammas : array_like, optional
        The gamma grid (>= -1). Default :data:`KOMISARENKO_GAMMAS`, the paper's nine values, which leave out
        gamma = 0 (plain TS), so FTS does not contain TS; pass a grid with 0 to nest it.
    temperatures : array_like, optional
        The T grid (> 0). Default :data:`KOMISARENKO_TEMPERATURES`, 0.01, ..., 5.00.
    search : {"grid", "line"}
        "grid": every (gamma, T) pair, ``len(gammas) * len(temperatures)`` evaluations (the paper's protocol).
        "line": the cheaper search the paper proposes in Sec. 5.2 but did not run: find the best T on the T grid
        for each of the two ``anchors`` gammas (2m evaluations, m = ``len(temperatures)``), draw the line
        T(gamma) through the two optima, and evaluate m points on it with gamma evenly spaced from
        ``min(gammas)`` to ``max(gammas)`` (points with T <= 0 are skipped): 3m evaluations in all. The best of
        all evaluated points is chosen. Each evaluation reads every logit (every class enters the normaliser of
        the map), so the cost is linear in N K and in m: a point of the line costs about 9 ns per logit on one
        core, the two default anchors at one T about half that together (gamma = 0 in closed form, gamma = 1
        without a power); a shorter T grid is the way to a faster search at large K.
    anchors : pair of float
        The two gammas of the line search. Default (0, 1): gamma = 0 is plain TS, so the line search contains
        TS on the same T grid.

    Attributes
    ----------
    n_features_in_ : int
        K, the number of classes (columns of the logits) it was fitted on; logits of another width are refused.
    classes_ : ndarray of int, shape (K,)
        ``0, ..., K-1``: column j of the logits and of :meth:`predict_proba` is class j.
    gamma_, temperature_ : float
        The chosen evaluation gamma and temperature (first minimum on ties: gammas in the given order, then T).
    score_ : float
        The validation objective at (``gamma_``, ``temperature_``).
    grid_scores_ : ndarray, shape (len(gammas), len(temperatures)), or None
        "grid" search: the validation objective at every grid point.
    path_ : dict or None
        "line" search: ``anchor_temperatures`` (the T of each anchor), ``gammas``, ``temperatures`` and
        ``scores`` of the points on the line, ``n_evaluations``, ``anchor_edges`` (each anchor's T edge, as
        ``at_edge_``) and ``gamma_edge`` ("low", "high" or None: whether the chosen point is the line's point of
        smallest or largest gamma, the line's own edge check).
    at_edge_ : {"low", "high"} or None
        "grid" search: whether the best T of the chosen gamma is at or near an end of the T grid, as for
        :class:`~calib.posthoc.temperature.TemperatureScaling` (the ECE objective allows for its sampling noise,
        the NLL does not): the optimum may then lie outside the grid, and :meth:`fit` warns
        (:class:`~calib.posthoc.grid.GridEdgeWarning`). "line" search: the same check of each anchor's search over
        the T grid (the first anchor at an edge), since the line is drawn through the anchors' best T; and when the
        chosen point lies on the line, whether it is the line's first or last point (``path_["gamma_edge"]``; no
        allowance for sampling noise there, as the ECE is flat within it over wide ranges of gamma along the line;
        an end at gamma = -1, or where the line's T reaches 0, is a bound of the map's domain and is not
        reported). Each edge found warns (:class:`~calib.posthoc.grid.GridEdgeWarning`).

    It is a scikit-learn estimator that declares itself a classifier: it is fitted on (logits, labels) and returns
    class probabilities, and scikit-learn's scorers of probabilities (``scoring="neg_log_loss"``) and classifier
    tools (stratified ``cross_val_score``, ``CalibrationDisplay``) take classifiers only. Column j of the logits is
    class j, so ``classes_`` is ``0, ..., K-1`` and the labels are those indices. ``predict`` is the argmax of the
    probabilities, which keeps the top class of the logits wherever the tests look: a calibrator learns confidences,
    not decisions, so its accuracy is the model's, and it has no ``score`` method (the accuracy would not tell two
    fits apart; pass ``scoring="neg_log_loss"``). calib does not import scikit-learn
    (:class:`~calib.posthoc._common.Estimator`); ``tests/test_sklearn_contract.py`` runs scikit-learn's
    ``check_estimator`` suite on it, with the grid search and the line search.

    **Sample weights** (``fit(X, y, sample_weight)``) are frequency weights, as in scikit-learn: an integer
    weight counts its row that many times, a weight of 0 leaves the row out, and all weights 1 are the unweighted
    fit. The "nll" objective is the weighted mean NLL; the "ece" objective is the equal-mass ECE of the rows each
    counted ``w_i`` times (:func:`~calib.posthoc._common.weighted_equal_mass_ece_rows`: the bins cut the total
    weight as ``np.array_split`` cuts that many rows). Like the unweighted equal-mass ECE of repeated rows, the
    latter is not invariant to scaling all weights (W rows split into bins as 2W rows do not, by a bin's rounding),
    nor is the edge check's sampling noise, which counts ``sum_i w_i`` samples: give weights that count rows.

    Examples
    --------
    >>> fts = FocalTemperatureScaling(objective="ece").fit(val_logits, val_labels)   # doctest: +SKIP
    >>> probs = fts.predict_proba(test_logits)                                         # doctest: +SKIP
    """

    OBJECTIVES = ("ece", "nll")
    SEARCHES = ("grid", "line")

    def __init__(self, objective: str = "ece", n_bins: int = 15, gammas=None, temperatures=None,
                 search: str = "grid", anchors=(0.0, 1.0)):
        self.objective = objective
        self.n_bins = n_bins
        self.gammas = gammas
        self.temperatures = temperatures
        self.search = search
        self.anchors = anchors

    gamma = deprecated_alias("gamma", "gamma_")
    temperature = deprecated_alias("temperature", "temperature_")
    # no alias "score" of score_: scikit-learn's tools take an attribute "score" for the scoring method (a float there
    # broke GridSearchCV and check_estimator)
    grid_scores = deprecated_alias("grid_scores", "grid_scores_")
    path = deprecated_alias("path", "path_")
    grid_scores_: np.ndarray | None

    def fit(self, X, y, sample_weight=None) -> "FocalTemperatureScaling":
        """Choose (gamma, T) on validation logits X (N, K) and integer labels y (N,); returns self.

        A fit that raises leaves the estimator unfitted: the fitted attributes are deleted first and assigned
        only at the end.

        Parameters
        ----------
        X : array_like or torch.Tensor, shape (N, K)
            Validation logits, one column per class (named ``logits`` in error messages).
        y : array_like or torch.Tensor of int, shape (N,)
            Validation labels, class indices 0..K-1 (named ``labels`` in error messages).
        sample_weight : array_like, shape (N,), optional
            Non-negative frequency weights with a positive sum (see the class docstring); None: every row once.

        Raises
        ------
        ValueError
            For bad settings or input, and for logits whose every row is constant: every (gamma, T) then gives the
            uniform distribution and the same score, so the "best" point would be the grid's first (reported, before,
            as an optimum below the grid's smallest T).
        """
        self._forget_fit()
        objective = check_choice(self.objective, "objective", self.OBJECTIVES)
        n_bins = check_int(self.n_bins, "n_bins")
        gammas = KOMISARENKO_GAMMAS if self.gammas is None else _as_gamma_grid(self.gammas)
        temps = KOMISARENKO_TEMPERATURES if self.temperatures is None else _as_temperature_grid(self.temperatures)
        search = check_choice(self.search, "search", self.SEARCHES)
        anchors = _as_gamma_grid(self.anchors)
        if anchors.shape != (2,) or anchors[0] == anchors[1]:
            raise ValueError(f"anchors must be two different gammas (>= -1), e.g. (0.0, 1.0); got {anchors!r}.")
        z, labels = as_logits_labels(X, y)
        n_classes = z.shape[1]
        w = checked_sample_weight(sample_weight, z.shape[0])
        if w is not None and not w.all():              # a weight of 0 leaves its row out
            keep = w > 0
            z, labels, w = z[keep], labels[keep], w[keep]
        data = _FTSData(z, labels, w)
        if not data.d_min.any():                       # every row constant: all shifts are 0
            raise constant_logits_error()
        noise = sampling_noise(data.total) if objective == "ece" else 0.0

        def widen(temperature, line=False):
            def example(edge):
                lo, hi = ((temperature / 100, float(temps.max())) if edge == "low" else
                          (float(temps.min()), temperature * 100))
                return (f"FocalTemperatureScaling({'search=' + repr('line') + ', ' if line else ''}"
                        f"temperatures=np.geomspace({lo:.3g}, {hi:.3g}, 500))")
            return example

        if search == "grid":
            scores = _fts_grid(data, gammas, temps, objective, n_bins)
            i, j = np.unravel_index(int(np.argmin(scores)), scores.shape)
            gamma, temperature, score = float(gammas[i]), float(temps[j]), float(scores[i, j])
            edge = grid_edge(temps, scores[i], noise, widen(temperature))
            self.gamma_, self.temperature_, self.score_ = gamma, temperature, score
            self.grid_scores_, self.path_, self.at_edge_ = scores, None, edge
            self._record_width(n_classes)
            return self
        anchor_scores = _fts_grid(data, anchors, temps, objective, n_bins)
        best = np.argmin(anchor_scores, axis=1)
        t_a, t_b = temps[best]
        (g_a, g_b) = anchors
        # the line search's two grid searches over T: an anchor's best T at an end of the T grid may not be its
        # optimum, and the line is drawn through it; warned as the grid search warns
        anchor_edges = tuple(grid_edge(temps, anchor_scores[a], noise, widen(float(temps[best[a]]), line=True),
                                       warn=False) for a in range(2))
        if any(anchor_edges):                          # one warning, about the first anchor at an edge
            a = 0 if anchor_edges[0] else 1
            also = (f" (and anchor gamma = {anchors[1]:g}, at the {anchor_edges[1]} end too)" if a == 0 and
                    anchor_edges[1] else "")
            grid_edge(temps, anchor_scores[a], noise, widen(float(temps[best[a]]), line=True),
                      subject=f"line search, anchor gamma = {anchors[a]:g}{also}: ")
        line_g = np.linspace(gammas.min(), gammas.max(), len(temps))
        line_t = t_a + (t_b - t_a) * (line_g - g_a) / (g_b - g_a)
        keep = line_t > 0
        line_g, line_t = line_g[keep], line_t[keep]
        line_s = (_fts_grid(data, line_g, line_t, objective, n_bins, pairs=True) if line_g.size
                  else np.empty(0))
        candidates = [(float(anchor_scores[0, best[0]]), float(g_a), float(t_a)),
                      (float(anchor_scores[1, best[1]]), float(g_b), float(t_b))]
        gamma_edge = None
        if line_s.size:
            k = int(np.argmin(line_s))
            candidates.append((float(line_s[k]), float(line_g[k]), float(line_t[k])))
            if min(candidates, key=lambda c: c[0]) is candidates[-1]:
                # the line's own ends: its gamma range, unless an end is a bound of the domain (gamma = -1, or
                # where the line's T reaches 0 and the points beyond were skipped). Only the end points count, with
                # no allowance for the ECE's sampling noise: along the line T follows gamma, and the ECE stays
                # within its noise over wide ranges of gamma, so the allowance would report most fits
                open_ends = tuple(e for e, inside in (("low", line_g[0] == gammas.min() and line_g[0] > -1),
                                                      ("high", line_g[-1] == gammas.max())) if inside)

                def wider_gammas(edge):
                    lo, hi = float(gammas.min()), float(gammas.max())
                    lo, hi = (max(-1.0, lo - (hi - lo)), hi) if edge == "low" else (lo, hi + (hi - lo))
                    return f"FocalTemperatureScaling(search='line', gammas=[{lo:.3g}, {hi:.3g}])"

                gamma_edge = grid_edge(line_g, line_s, 0.0, wider_gammas, parameter="gamma", symbol="gamma",
                                       search="line", subject="line search: ", edges=open_ends,
                                       widen_what="the gammas it spans (min(gammas) to max(gammas))")
        score, gamma, temperature = min(candidates, key=lambda c: c[0])
        self.gamma_, self.temperature_, self.score_ = gamma, temperature, score
        self.grid_scores_, self.at_edge_ = None, next((e for e in anchor_edges if e is not None), None)
        self.path_ = {"anchor_temperatures": (float(t_a), float(t_b)), "gammas": line_g, "temperatures": line_t,
                      "scores": line_s, "n_evaluations": 2 * len(temps) + line_g.size, "anchor_edges": anchor_edges,
                      "gamma_edge": gamma_edge}
        self._record_width(n_classes)
        return self

    def predict_proba(self, X):
        """The calibrated probabilities ``focal_map(z / T, gamma)`` of logits X (N, K) with the fitted K, rows summing
        to 1: float64 for a numpy input, a tensor of the input's dtype and device for a tensor (module docstring).

        Raises
        ------
        NotFittedError
            Before a successful :meth:`fit` (:class:`calib.posthoc.NotFittedError`, a ValueError).
        ValueError
            For logits that are not a finite (N, K) array, or of another K than the fit's (``n_features_in_``).
        """
        return super().predict_proba(X)

    def predict_log_proba(self, X):
        """The logarithms of :meth:`predict_proba` (:func:`~calib.focal.calibration_map.log_focal_map`, finite where
        a probability underflows; for a tensor, computed by numpy in float64, without gradient)."""
        return super().predict_log_proba(X)

    def predict(self, X):
        """The class of largest calibrated probability of each row, ``classes_[argmax]`` (an int64 array, or tensor
        for a tensor)."""
        return super().predict(X)

    def _apply(self, z, log: bool):
        return scaled_focal_map(z, self.temperature_, self.gamma_, log=log)
