"""Focal temperature scaling, ``p_hat_gamma(softmax(z / T))`` with (gamma, T) chosen on validation logits
(Komisarenko & Kull 2024, Secs. 4.2 and 5): the paper's grid search, vectorised over the grid
(:func:`focal_temperature_scores`), and the line search it proposes. Estimator protocol and array policy as stated
in :mod:`calib.posthoc`.
"""

from __future__ import annotations

import numpy as np
from scipy.special import expit

from calib import metrics
from calib._validate import as_logits_labels, as_scores, check_choice, check_int, n_threads
from calib.focal import focal_map
from calib.focal.numerics import check_gamma, log1p_gamma_r_negative, log_one_minus_r, r_top
from calib.posthoc._common import Estimator, as_grid, checked_tensor, deprecated_alias, is_tensor, sampling_noise
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


class _FTSData:
    """Logits rearranged once for the grid kernel: each row's top class apart, the others as (N, K-1) shifts."""

    def __init__(self, z: np.ndarray, y: np.ndarray):
        n, k = z.shape
        self.n, self.k = n, k
        top = np.argmax(z, axis=1)
        rows = np.arange(n)
        shifted = z - z[rows, top][:, None]                  # <= 0, exactly 0 at the top class
        others = np.arange(k)[None, :] != top[:, None]
        self.d = np.ascontiguousarray(shifted[others].reshape(n, k - 1))
        self.correct = (top == y)
        self.y_other = np.where(self.correct, 0, y - (y > top))   # column of the label among the others
        self.d_y = shifted[rows, y]                           # the label's shift (0 where it is the top class)


def _fts_block(data: _FTSData, lo: int, hi: int, beta: float, gammas: np.ndarray, row: "_RowTerms",
               total: np.ndarray) -> None:
    """The sums S of the non-top weights of FTS_{gamma, 1/beta} (rows lo:hi, every gamma), and the row terms.

    The focal calibration map (Eq. 1; :func:`calib.focal.calibration_map.focal_map`) gives class j the weight
    ``w_j = q_j / g(q_j, gamma) = (1 - q_j)^-gamma / (1/q_j + gamma b_j)`` with ``b = -log q / (1 - q)``
    (``g = (1-q)^gamma (1 + gamma r)``, ``r = q b``) and ``q = softmax(beta z)``. Everything that does not
    depend on gamma (1/q, b, log(1 - q)) is computed once per temperature and shared by the gammas. The non-top
    classes (q_j <= 1/2) are summed in linear space, ``S = sum_{j != top} w_j``, into ``total[:, lo:hi]``; the
    top class, whose q can round to 1, is kept in log space (log(1 - q_top) is the log-sum-exp of the others),
    as in focal_map, through the per-row terms stored in ``row`` (see :func:`_fts_top_and_label`).
    """
    u = data.d[lo:hi] * beta                           # log(q_j / q_top)
    e = np.exp(u)
    ratio = e.sum(axis=1)                              # R = (1 - q_top) / q_top
    with np.errstate(divide="ignore"):
        log_ratio = np.log(ratio)
    small = ratio < np.finfo(float).tiny * 1024        # R subnormal or 0: log R by a shifted log-sum-exp
    if small.any():
        us = u[small]
        m = us.max(axis=1)
        log_ratio[small] = m + np.log(np.exp(us - m[:, None]).sum(axis=1))
    lse = np.log1p(ratio)                              # -log q_top
    q = e
    q *= (1.0 / (1.0 + ratio))[:, None]                # q_j, j != top (each <= 1/2)
    one_minus = 1.0 - q                                # in [1/2, 1]: exact enough for (1 - q)^-gamma
    log_1mq = np.log(one_minus)
    b = u - lse[:, None]                               # log q_j
    b /= one_minus
    np.negative(b, out=b)                              # b_j = -log q_j / (1 - q_j)
    with np.errstate(divide="ignore", over="ignore"):
        inv_q = np.reciprocal(q)                       # inf where q underflows: that class then weighs 0
    top_r = r_top(ratio, log_ratio, lse)               # r at q_top = 1 / (1 + R)
    rows = np.arange(hi - lo)
    yo = data.y_other[lo:hi]
    row.lse[lo:hi], row.log_1mq_top[lo:hi], row.r_top[lo:hi] = lse, log_ratio - lse, top_r
    row.ratio[lo:hi], row.log_ratio[lo:hi] = ratio, log_ratio
    row.log_q_y[lo:hi] = data.d_y[lo:hi] * beta - lse
    row.log_1mq_y[lo:hi] = log_1mq[rows, yo]
    row.r_y[lo:hi] = q[rows, yo] * b[rows, yo]
    t = np.empty_like(q)
    den = np.empty_like(q)
    with np.errstate(over="ignore", invalid="ignore"):   # out of range at large gamma: redone in log space
        for i, gam in enumerate(gammas):
            np.multiply(log_1mq, -gam, out=t)
            np.exp(t, out=t)                           # (1 - q)^-gamma
            np.multiply(b, gam, out=den)
            den += inv_q                               # (1 + gamma r) / q
            t /= den
            np.sum(t, axis=1, out=total[i, lo:hi])     # S = sum_{j != top} w_j


class _RowTerms:
    """Per-row quantities of one temperature that do not depend on gamma (filled block by block)."""

    def __init__(self, n: int):
        for name in ("lse", "log_1mq_top", "r_top", "ratio", "log_ratio", "log_q_y", "log_1mq_y", "r_y"):
            setattr(self, name, np.empty(n))


def _fts_log_rest_exact(data: _FTSData, rows: np.ndarray, beta: float, gammas: np.ndarray,
                        lse: np.ndarray) -> np.ndarray:
    """log S = log sum_{j != top} w_j in log space, for the (gamma, row) pairs where the linear-space sum of
    :func:`_fts_block` overflowed or underflowed ((1 - q)^-gamma beyond the float range at large |gamma|)."""
    u = data.d[rows] * beta
    log_q = u - lse[:, None]                           # log q_j, j != top
    q = np.exp(log_q)
    log_1mq = np.log1p(-q)
    b = -log_q / (1.0 - q)                             # -log q / (1 - q)
    gam = gammas[:, None]
    with np.errstate(divide="ignore", over="ignore"):
        log_den = np.log(np.reciprocal(q) + gam * b)   # log((1 + gamma r) / q); inf where q underflows: weight 0
    a = -gam * log_1mq - log_den                       # log w_j
    top = a.max(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = top + np.log(np.exp(a - top[:, None]).sum(axis=1))
    return np.where(np.isneginf(top), -np.inf, out)


def _fts_top_and_label(data: _FTSData, row: _RowTerms, log_total: np.ndarray, gammas: np.ndarray):
    """From log S, S = sum of the non-top weights (G, N): the top-label confidence and the label's
    log-probability."""
    gam = gammas[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):   # gamma = -1 and r_top = 1: replaced just below
        log1p_gr_top = np.log1p(gam * row.r_top)
    negative = gammas < 0
    if negative.any():                                 # 1 + gamma r_top -> 1 + gamma as q_top -> 1: no cancellation
        log_1mr = log_one_minus_r(row.ratio, row.log_ratio)
        log1p_gr_top[negative] = log1p_gamma_r_negative(gam[negative], log_1mr[None, :])
    log_w_top = -row.lse - gam * row.log_1mq_top - log1p_gr_top
    gap = log_total - log_w_top                        # log(S / w_top); -inf when every other class underflows
    conf = expit(-gap)
    log_w_y = np.where(data.correct, log_w_top, row.log_q_y - gam * row.log_1mq_y - np.log1p(gam * row.r_y))
    log_py = log_w_y - log_w_top - np.logaddexp(0.0, gap)    # log w_y - log(w_top + S)
    return conf, log_py


def _fts_scores_one_temperature(data: _FTSData, temperature: float, gammas: np.ndarray, objective: str,
                                n_bins: int) -> np.ndarray:
    n = data.n
    total = np.empty((len(gammas), n))
    row = _RowTerms(n)
    step = max(1, _FTS_BLOCK_ELEMENTS // max(1, data.k - 1))
    beta = 1.0 / temperature
    for lo in range(0, n, step):
        _fts_block(data, lo, min(n, lo + step), beta, gammas, row, total)
    with np.errstate(divide="ignore"):
        log_total = np.log(total)
    redo = ~(total >= np.finfo(float).tiny) | np.isinf(total)   # out of the float range: sum in log space
    if redo.any():
        g_idx, n_idx = np.nonzero(redo)
        log_total[g_idx, n_idx] = _fts_log_rest_exact(data, n_idx, beta, gammas[g_idx], row.lse[n_idx])
    conf, log_py = _fts_top_and_label(data, row, log_total, gammas)
    if objective == "nll":
        return -log_py.mean(axis=1)
    return metrics.equal_mass_ece_rows(conf, data.correct, n_bins, check=False)   # checked by the caller


def _fts_grid(data: _FTSData, gammas: np.ndarray, temperatures: np.ndarray, objective: str, n_bins: int,
              pairs: bool = False) -> np.ndarray:
    """Scores of every (gamma, T) of the grid, shape (G, n_T); with ``pairs``, of the pairs (gammas[i], T[i])."""
    def run(index):
        if pairs:
            return [_fts_scores_one_temperature(data, temperatures[i], gammas[i:i + 1], objective, n_bins)[0]
                    for i in index]
        return [_fts_scores_one_temperature(data, temperatures[i], gammas, objective, n_bins) for i in index]

    threads = n_threads(data.n * data.k * len(temperatures) * (1 if pairs else len(gammas)), min_work=1 << 20)
    chunks = [c for c in np.array_split(np.arange(len(temperatures)), threads) if c.size]
    if len(chunks) == 1:
        out = run(chunks[0])
    else:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(len(chunks)) as pool:
            out = [s for part in pool.map(run, chunks) for s in part]
    return np.asarray(out) if pairs else np.stack(out, axis=1)


def _as_gamma_grid(gammas) -> np.ndarray:
    return check_gamma(gammas, "gammas", domain="map", ndim=1)


def _as_temperature_grid(temperatures) -> np.ndarray:
    return as_grid(temperatures, "temperatures")


def focal_temperature_scores(logits, labels, gammas=None, temperatures=None, objective: str = "ece",
                             n_bins: int = 15) -> np.ndarray:
    """The validation score of focal temperature scaling at every point of a (gamma, T) grid.

    ``FTS_{gamma, T}(z) = p_hat_gamma(softmax(z / T))`` (Komisarenko & Kull 2024, Sec. 4.2), scored by the
    equal-mass ECE with ``n_bins`` bins (``objective="ece"``, :func:`calib.metrics.adaptive_ece <calib.metrics.binned.adaptive_ece>`) or by the NLL
    (``"nll"``, :func:`calib.metrics.nll <calib.metrics.scores.nll>`); the paper's Sec. 5.1 protocol takes the argmin over the grid
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
        "ece": equal-mass top-label ECE with ``n_bins`` bins (:func:`calib.metrics.adaptive_ece <calib.metrics.binned.adaptive_ece>`); "nll": NLL.
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
        all evaluated points is chosen.
    anchors : pair of float
        The two gammas of the line search. Default (0, 1): gamma = 0 is plain TS, so the line search contains
        TS on the same T grid.

    Attributes
    ----------
    gamma_, temperature_ : float
        The chosen evaluation gamma and temperature (first minimum on ties: gammas in the given order, then T).
    score_ : float
        The validation objective at (``gamma_``, ``temperature_``).
    grid_scores_ : ndarray, shape (len(gammas), len(temperatures)), or None
        "grid" search: the validation objective at every grid point.
    path_ : dict or None
        "line" search: ``anchor_temperatures`` (the T of each anchor), ``gammas``, ``temperatures`` and
        ``scores`` of the points on the line, and ``n_evaluations``.
    at_edge_ : {"low", "high"} or None
        "grid" search: whether the best T of the chosen gamma is at or near an end of the T grid, as for
        :class:`~calib.posthoc.temperature.TemperatureScaling` (the ECE objective allows for its sampling noise,
        the NLL does not): the optimum may then lie outside the grid, and :meth:`fit` warns
        (:class:`~calib.posthoc.grid.GridEdgeWarning`).

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
    score = deprecated_alias("score", "score_")
    grid_scores = deprecated_alias("grid_scores", "grid_scores_")
    path = deprecated_alias("path", "path_")

    def fit(self, logits, labels) -> "FocalTemperatureScaling":
        """Choose (gamma, T) on validation logits (N, K) and integer labels (N,); returns self."""
        objective = check_choice(self.objective, "objective", self.OBJECTIVES)
        n_bins = check_int(self.n_bins, "n_bins")
        gammas = KOMISARENKO_GAMMAS if self.gammas is None else _as_gamma_grid(self.gammas)
        temps = KOMISARENKO_TEMPERATURES if self.temperatures is None else _as_temperature_grid(self.temperatures)
        search = check_choice(self.search, "search", self.SEARCHES)
        anchors = _as_gamma_grid(self.anchors)
        if anchors.shape != (2,) or anchors[0] == anchors[1]:
            raise ValueError(f"anchors must be two different gammas (>= -1), e.g. (0.0, 1.0); got {anchors!r}.")
        z, y = as_logits_labels(logits, labels)
        data = _FTSData(z, y)
        self.grid_scores_, self.path_, self.at_edge_ = None, None, None
        if search == "grid":
            scores = _fts_grid(data, gammas, temps, objective, n_bins)
            i, j = np.unravel_index(int(np.argmin(scores)), scores.shape)
            self.grid_scores_ = scores
            self.gamma_, self.temperature_, self.score_ = float(gammas[i]), float(temps[j]), float(scores[i, j])

            def widen(edge):
                lo, hi = ((self.temperature_ / 100, float(temps.max())) if edge == "low" else
                          (float(temps.min()), self.temperature_ * 100))
                return f"FocalTemperatureScaling(temperatures=np.geomspace({lo:.3g}, {hi:.3g}, 500))"

            noise = sampling_noise(data.n) if objective == "ece" else 0.0
            self.at_edge_ = grid_edge(temps, scores[i], noise, widen)
            return self
        anchor_scores = _fts_grid(data, anchors, temps, objective, n_bins)
        best = np.argmin(anchor_scores, axis=1)
        t_a, t_b = temps[best]
        (g_a, g_b) = anchors
        line_g = np.linspace(gammas.min(), gammas.max(), len(temps))
        line_t = t_a + (t_b - t_a) * (line_g - g_a) / (g_b - g_a)
        keep = line_t > 0
        line_g, line_t = line_g[keep], line_t[keep]
        line_s = (_fts_grid(data, line_g, line_t, objective, n_bins, pairs=True) if line_g.size
                  else np.empty(0))
        candidates = [(float(anchor_scores[0, best[0]]), float(g_a), float(t_a)),
                      (float(anchor_scores[1, best[1]]), float(g_b), float(t_b))]
        if line_s.size:
            k = int(np.argmin(line_s))
            candidates.append((float(line_s[k]), float(line_g[k]), float(line_t[k])))
        self.score_, self.gamma_, self.temperature_ = min(candidates, key=lambda c: c[0])
        self.path_ = {"anchor_temperatures": (float(t_a), float(t_b)), "gammas": line_g, "temperatures": line_t,
                      "scores": line_s, "n_evaluations": 2 * len(temps) + line_g.size}
        return self

    def _check_fitted(self) -> tuple[float, float]:
        if not hasattr(self, "temperature_"):
            raise ValueError("this FocalTemperatureScaling is not fitted yet; call fit(logits, labels) first.")
        return self.gamma_, self.temperature_

    def predict_proba(self, logits):
        """The calibrated probabilities ``focal_map(z / T, gamma)``, rows summing to 1: float64 for a numpy input,
        a tensor of the input's dtype and device for a tensor (module docstring)."""
        gam, t = self._check_fitted()
        if is_tensor(logits):
            return focal_map(checked_tensor(logits) / t, gam)
        return focal_map(as_scores(logits, "logits", kind="logits") / t, gam)
