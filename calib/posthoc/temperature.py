"""Temperature scaling, ``softmax(z / T)`` with one scalar T fitted on validation logits (Guo et al. 2017): by the
exact NLL, on Mukhoti et al. (2020)'s ECE grid, or by Karandikar et al. (2021)'s soft-binned ECE; the fits read the
logits in row blocks. Estimator protocol and array policy as stated in :mod:`calib.posthoc`.
"""

from __future__ import annotations

import functools
import warnings

import numpy as np
from scipy.optimize import brentq
from scipy.special import softmax

from calib import metrics
from calib._validate import as_logits_labels, check_choice, check_int, check_positive, n_threads
from calib.posthoc._common import (Estimator, as_grid, checked_sample_weight, constant_logits_error, deprecated_alias,
                                   sampling_noise, scaled_softmax, weighted_top_label_ece_rows)
from calib.posthoc.grid import SearchBoundWarning, grid_edge

__all__ = ["MUKHOTI_GRID", "FINE_GRID", "T_RANGE", "fit_temperature_nll", "fit_temperature_grid", "TemperatureScaling",
           "fit_temperature_sb_ece"]

#: Mukhoti et al. (2020)'s temperature grid, 0.1, 0.2, ..., 10.0 (official code, ``temperature_scaling.py``).
#:
#: :meta hide-value:
MUKHOTI_GRID = np.round(np.arange(1, 101) * 0.1, 10)

#: The temperatures 0.01, 0.02, ..., 10.00, Mukhoti et al.'s range at the step of focal temperature scaling's grid.
#: It is the grid of the ``ts-ece`` map of :data:`calib.posthoc.registry.REGISTRY`, so that TS and FTS are compared
#: on grids of one step (the 0.1 steps of :data:`MUKHOTI_GRID` cost FLSD-53 about 0.3 points of ECE; issue 25).
#:
#: :meta hide-value:
FINE_GRID = np.round(np.arange(1, 1001) * 0.01, 10)

#: Bracket for the NLL fit, in temperature. An optimum outside it is reported, never clamped.
T_RANGE = (1e-4, 1e4)

#: Logits are read in row blocks of about this many entries (1 MiB of float64), converted to float64 one block
#: at a time: the fits' extra memory is a few (N,) vectors, not an (N, K) float64 copy (issue 24, item 26).
_FIT_BLOCK_ELEMENTS = 1 << 17


# ----------------------------------------------------------------------------------------------------------
# temperature scaling: the fits, in row blocks
# ----------------------------------------------------------------------------------------------------------

class _RowBlocks:
    """Checked (N, K) logits, float32 or float64 as given, read in float64 one row block at a time.

    ``map(fn)`` calls ``fn(lo, hi, block)`` on each block (float64, rows lo:hi), split over threads (numpy releases
    the GIL); the per-row results are written by ``fn`` into arrays of the caller. The top logit, the runner-up
    and the label's logit of each row are taken in one pass at construction.

    ``w`` holds the frequency weights (None: unweighted) and ``total`` their sum (N unweighted); rows of weight 0
    are left out at construction, so a fit with them equals the fit without those rows.
    """

    def __init__(self, logits, labels, sample_weight=None):
        self.z, self.y = as_logits_labels(logits, labels, dtype=None)
        self.k = self.z.shape[1]                       # the width given, also when rows are left out below
        self.w = checked_sample_weight(sample_weight, self.z.shape[0])
        if self.w is not None and not self.w.all():
            keep = self.w > 0
            self.z, self.y, self.w = self.z[keep], self.y[keep], self.w[keep]
        self.n = self.z.shape[0]
        self.total = float(self.n if self.w is None else self.w.sum())
        self.rows = max(1, _FIT_BLOCK_ELEMENTS // self.k)
        self.top = np.empty(self.n, dtype=np.intp)
        self.z_max, self.z_second, self.z_y = np.empty(self.n), np.empty(self.n), np.empty(self.n)
        self.z_min = np.empty(self.n)

        def extremes(lo, hi, zb):
            rows = np.arange(hi - lo)
            top = zb.argmax(axis=1)
            self.top[lo:hi], self.z_max[lo:hi] = top, zb[rows, top]
            self.z_min[lo:hi] = zb.min(axis=1)
            self.z_y[lo:hi] = zb[rows, self.y[lo:hi]]
            zb[rows, top] = -np.inf
            self.z_second[lo:hi] = zb.max(axis=1)

        self.map(extremes, copy=True)
        if np.array_equal(self.z_max, self.z_min):
            raise constant_logits_error()

    def map(self, fn, copy: bool = False) -> None:
        def span(lo, hi):
            for s in range(lo, hi, self.rows):
                e = min(hi, s + self.rows)
                block = self.z[s:e]
                fn(s, e, np.array(block, dtype=np.float64) if copy or block.dtype != np.float64 else block)

        threads = n_threads(self.z.size)
        if threads == 1:
            span(0, self.n)
            return
        from concurrent.futures import ThreadPoolExecutor

        cuts = np.linspace(0, self.n, threads + 1).astype(int)
        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(span, cuts[:-1], cuts[1:]))


def _nll_slope(data: _RowBlocks, inverse_temperature: float) -> float:
    """d/d(beta) of the mean NLL of softmax(beta * z): E_p[z] - z_y, averaged (weighted by the sample weights;
    increasing in beta).

    ``p`` is ``scipy.special.softmax(beta * z, axis=1)`` to the bit, computed in place with scipy's operations
    (``e = exp(x - max x)``, ``e / sum(e)``) but for the row maximum, which is ``beta * max z`` exactly (rounding is
    monotone and beta > 0): one (N, K) array a row block, no reduction for the maximum. Cost: a few passes over
    the logits per call; Brent's method makes about 20 calls.
    """
    expected = np.empty(data.n)

    def rows(lo, hi, zb):
        p = zb * inverse_temperature
        p -= (data.z_max[lo:hi] * inverse_temperature)[:, None]
        np.exp(p, out=p)
        p /= p.sum(axis=1, keepdims=True)
        expected[lo:hi] = np.einsum("nk,nk->n", p, zb)

    data.map(rows)
    if data.w is not None:
        return float(np.dot(data.w, expected - data.z_y) / data.total)
    return float(np.mean(expected - data.z_y))


def fit_temperature_nll(logits, labels) -> float:
    """The temperature minimising the mean NLL of ``softmax(logits / T)`` (Guo et al. 2017, Sec. 4.2).

    The NLL is convex in beta = 1/T (a log-sum-exp of functions linear in beta minus a linear term), so
    its minimiser is the unique root of the derivative E_p[z] - z_y, found by Brent's method on log beta to
    machine precision. This is exact, unlike the usual fixed-step LBFGS (gpleiss/temperature_scaling: lr
    0.01, 50 iterations, T initialised at 1.5), which users report stopping early or diverging. The logits
    are read in row blocks (float32 input is never copied whole to float64), so the extra memory is a few
    (N,) vectors.

    Raises
    ------
    ValueError
        When every row of logits is constant (no temperature is better than another), or the NLL keeps
        decreasing beyond the bracket ``T_RANGE``: every validation sample is correct (the NLL tends to 0 as
        T -> 0) or the logits are anti-correlated with the labels (T < 0 would help).
    """
    return _fit_temperature_nll(_RowBlocks(logits, labels))


def _fit_temperature_nll(data: _RowBlocks) -> float:
    lo, hi = np.log(1 / T_RANGE[1]), np.log(1 / T_RANGE[0])
    f_lo, f_hi = _nll_slope(data, np.exp(lo)), _nll_slope(data, np.exp(hi))
    if f_hi <= 0:
        raise ValueError(
            f"labels: the validation NLL still decreases at T = {T_RANGE[0]:g}, so no finite temperature minimises "
            f"it (the logits classify every validation sample correctly with a margin). Fit on validation data "
            f"with errors, or use objective='ece'."
        )
    if f_lo >= 0:
        raise ValueError(
            f"labels: the validation NLL still decreases at T = {T_RANGE[1]:g}: the logits carry no information "
            f"about the labels (or are anti-correlated with them). Check that logits and labels are aligned."
        )
    log_beta = brentq(lambda u: _nll_slope(data, np.exp(u)), lo, hi, xtol=1e-13, rtol=4 * np.finfo(float).eps)
    return float(np.exp(-log_beta))


#: Up to this many classes, the ECE grid computes each temperature's row sums class by class
#: (:func:`_pairwise_sum_rows`); beyond it, numpy's sum along the rows is as fast (measured on 2000 rows, the whole
#: grid: 1.4 times faster at K = 10, 1.15 at K = 32, equal at 64, 0.95 at 100).
_BY_CLASS_MAX_K = 64


def _pairwise_sum_rows(x: np.ndarray) -> np.ndarray:
    """The sums over the second-to-last axis of x (..., K, n) >= 0 as numpy sums the rows of the C-ordered (n, K)
    arrays ``x[...].T``, bit for bit (what ``softmax(..., axis=1)`` does), in K - 1 additions of (..., n) arrays (fast
    for small K and long n).

    numpy sums a row of K contiguous floats pairwise (``pairwise_sum`` in its ``loops_utils.h``): fewer than 8 terms
    one by one; up to 128, eight interleaved partial sums ``r_j = x_j + x_{j+8} + ...``, combined as
    ``((r_0 + r_1) + (r_2 + r_3)) + ((r_4 + r_5) + (r_6 + r_7))``, then the remaining terms one by one; beyond,
    the two halves, split at a multiple of 8. This does the same additions on whole arrays
    (:func:`_pairwise_sum_matches_numpy` checks it against the numpy at hand). Cost: about K n additions.
    """
    k = x.shape[-2]
    if k < 8:
        res = x[..., 0, :].copy()
        for j in range(1, k):
            res += x[..., j, :]
        return res
    if k > 128:
        half = k // 2 - (k // 2) % 8
        return _pairwise_sum_rows(x[..., :half, :]) + _pairwise_sum_rows(x[..., half:, :])
    r = x[..., :8, :]
    end = k - k % 8
    if end > 8:
        r = r.copy()
        for i in range(8, end, 8):
            r += x[..., i:i + 8, :]
    pairs = r[..., 0::2, :] + r[..., 1::2, :]          # r0 + r1, r2 + r3, r4 + r5, r6 + r7
    res = (pairs[..., 0, :] + pairs[..., 1, :]) + (pairs[..., 2, :] + pairs[..., 3, :])
    for j in range(end, k):
        res += x[..., j, :]
    return res


@functools.lru_cache(maxsize=None)
def _pairwise_sum_matches_numpy(k: int) -> bool:
    """Whether :func:`_pairwise_sum_rows` gives numpy's row sums for K = ``k`` on a probe whose terms span 16 decades
    (a numpy that summed in another order would differ there); the grid then falls back to numpy's sum."""
    probe = np.random.default_rng(k).standard_exponential((2, k, 128)) * 10.0 ** np.linspace(-8, 8, k)[:, None]
    return bool(np.array_equal(_pairwise_sum_rows(probe), np.ascontiguousarray(probe.transpose(0, 2, 1)).sum(axis=2)))


def _grid_ece_scores(data: _RowBlocks, grid: np.ndarray, n_bins: int) -> np.ndarray:
    """The 15-bin (``n_bins``) equal-width ECE of ``softmax(z / t)`` for every t of ``grid``, without (N, K) arrays.

    Only the top-label confidence and whether the argmax is the label enter the ECE. For ``p = softmax(x)``,
    ``x = z / t``, scipy computes ``e = exp(x - max x)`` and ``p = e / sum(e)``, so the top probability is
    ``1 / sum(e)``, the same float. The argmax of ``p`` is that of ``z`` unless two logits are so close that
    their probabilities round to the same float; such near-tied rows (a gap below ``1e-13 (|z_max| + max t)``,
    far wider than the rounding needs) are redone with the whole row. The scores equal, bit for bit,
    ``metrics.ece(softmax(z / t), y, n_bins)`` (the tests check it). With sample weights, each is the weighted ECE
    (:func:`~calib.posthoc._common.weighted_top_label_ece`).

    Up to :data:`_BY_CLASS_MAX_K` classes, a row block is laid out class by class, (K, n), and a few temperatures
    are done at once, (c, K, n), so that ``sum(e)`` is numpy's pairwise row sum done as K - 1 additions of whole
    arrays (:func:`_pairwise_sum_rows`) rather than a reduction along rows of K. The ECEs of all temperatures come
    from one ``np.bincount`` over ``t M + bin`` (:func:`calib.metrics.equal_width_ece_rows
    <calib.metrics.binned.equal_width_ece_rows>`, :func:`~calib.posthoc._common.weighted_top_label_ece_rows`), not
    one call per temperature. Cost: about five passes over the N K logits per temperature (divide, subtract, exp,
    sum), a few over the N confidences, and the near-tied rows' G scipy softmaxes each; chapter 08's 451
    temperatures on 1000 x 10 logits take about 20-40 ms on one shared core, 1.5-1.9 times less than with one ECE
    call per temperature (``tests/benchmarks/temperature_grid_ece.py``).
    """
    conf = np.empty((len(grid), data.n))
    tied = data.z_max - data.z_second <= 1e-13 * (np.abs(data.z_max) + float(grid.max()))
    correct = np.broadcast_to(data.top == data.y, (len(grid), data.n))   # a view; copied where rows are redone
    if tied.any():
        correct = correct.copy()
    by_class = data.k <= _BY_CLASS_MAX_K and _pairwise_sum_matches_numpy(data.k)

    def rows(lo, hi, zb):
        if not by_class:
            z_max = data.z_max[lo:hi, None]
            x = np.empty_like(zb)
            for i, t in enumerate(grid):
                np.divide(zb, t, out=x)
                x -= z_max / t                         # the row maximum of x, exactly
                np.exp(x, out=x)
                conf[i, lo:hi] = 1.0 / x.sum(axis=1)
            return
        # (K, n), for a few temperatures at once: (c, K, n); the rows' sums are K - 1 additions of (c, n) arrays
        zb, z_max = np.ascontiguousarray(zb.T), data.z_max[lo:hi]
        step = max(1, _FIT_BLOCK_ELEMENTS // zb.size)
        for i in range(0, len(grid), step):
            t = grid[i:i + step, None]
            x = np.divide(zb, t[:, :, None])
            x -= (z_max / t)[:, None, :]               # the row maximum of x, exactly
            np.exp(x, out=x)
            conf[i:i + step, lo:hi] = 1.0 / _pairwise_sum_rows(x)

    data.map(rows)
    for r in np.flatnonzero(tied):                     # rare: recompute as metrics.ece sees softmax(z / t)
        zr = np.asarray(data.z[r], dtype=np.float64)
        for i, t in enumerate(grid):
            p = softmax(zr / t)
            j = int(p.argmax())
            conf[i, r], correct[i, r] = p[j], j == data.y[r]
    if data.w is not None:
        return weighted_top_label_ece_rows(conf, correct, data.w, n_bins)
    return metrics.equal_width_ece_rows(conf, correct, n_bins=n_bins, check=False)



def fit_temperature_grid(logits, labels, grid=None, score=None, n_bins: int = 15) -> tuple[float, np.ndarray]:
    """The grid temperature with the lowest ``score(probs, labels)`` (first one on ties) and all scores.

    With the defaults this is Mukhoti et al. (2020)'s protocol (official code): T = 0.1, 0.2, ..., 10.0,
    scored by ``n_bins``-bin (15) equal-width ECE on the validation set, computed from the logits in row blocks
    without forming (N, K) probabilities. A custom ``score`` gets the probabilities ``softmax(logits / T)`` of
    each grid point.

    A best temperature at or near an end of the grid warns (:class:`~calib.posthoc.grid.GridEdgeWarning`, as
    :class:`TemperatureScaling` with ``objective="ece"``; the default ECE allows for its sampling noise
    1 / (2 sqrt(N)), a custom ``score`` does not): the optimum may lie beyond the grid.
    """
    grid = MUKHOTI_GRID if grid is None else as_grid(grid, "grid")
    n_bins = check_int(n_bins, "n_bins")
    data = _RowBlocks(logits, labels)
    if score is None:
        scores = _grid_ece_scores(data, grid, n_bins)
    else:
        z = np.asarray(data.z, dtype=np.float64)
        scores = np.array([score(softmax(z / t, axis=1), data.y) for t in grid])
    temperature, _ = _best_on_grid(grid, scores, sampling_noise(data.total) if score is None else 0.0,
                                   "fit_temperature_grid(logits, labels, grid={})", "fit_temperature_nll")
    return temperature, scores


def _best_on_grid(grid: np.ndarray, scores: np.ndarray, noise: float, call: str, nll_fit: str):
    """The grid temperature of lowest score (the first in the grid's order on ties) and its edge, warned (the one
    choice of :func:`fit_temperature_grid` and :class:`TemperatureScaling`'s "ece" objective; ``call`` and
    ``nll_fit`` name the wider search that the warning advises)."""
    temperature = float(grid[int(np.argmin(scores))])
    edge = grid_edge(grid, scores, noise, _wider_grid(grid, temperature, call, nll_fit), stacklevel=4)
    return temperature, edge


def _wider_grid(grid: np.ndarray, temperature: float, call: str, nll_fit: str):
    """``widen(edge)`` of :func:`~calib.posthoc.grid.grid_edge`: ``call`` with a geometric grid 100 times wider on
    the side of the edge, or the NLL fit ``nll_fit``."""
    def widen(edge):
        lo, hi = (temperature / 100, float(grid.max())) if edge == "low" else (float(grid.min()), temperature * 100)
        return (call.format(f"np.geomspace({lo:.3g}, {hi:.3g}, 200)") + f", or compare with the NLL fit ({nll_fit}), "
                "which has no grid")
    return widen



class TemperatureScaling(Estimator):
    """Temperature scaling: ``softmax(z / T)`` with one scalar T fitted on validation logits (Guo et al. 2017).

    Parameters
    ----------
    objective : {"nll", "ece", "sb-ece"}
        "nll": T minimises the validation NLL, found exactly (:func:`fit_temperature_nll`).
        "ece": Mukhoti et al. (2020)'s protocol, the grid T = 0.1, 0.2, ..., 10.0 scored by validation ECE
        with ``n_bins`` equal-width bins (their published "(T)" columns use it). It is also a form of the
        search over T for hard-binned ECE that Karandikar et al. (2021), App. C, propose (TS-HB-ECE).
        "sb-ece": TS-SB-ECE of Karandikar et al. (2021), Secs. 4.1 and 5.2: T minimises the soft-binned ECE
        of the validation set by gradient descent (:func:`fit_temperature_sb_ece`).
    n_bins : int
        Bins of the ECE and SB-ECE objectives.
    grid : array-like, optional
        Temperatures searched by the "ece" objective (default :data:`MUKHOTI_GRID`).
    sb_temperature : float
        Soft-binning temperature of the "sb-ece" objective (not the fitted T).
    sb_norm : {"l1", "l2"}
        p of the SB-ECE objective (the paper evaluates with l2).
    sb_estimator : {"bin", "label"}
        SB-ECE_bin (Eq. 11) or SB-ECE_lb (Eq. 12). The paper does not say which one TS-SB-ECE uses.

    Attributes
    ----------
    temperature_ : float
        The fitted T (> 1 softens over-confident logits).
    grid_scores_ : ndarray or None
        For the grid objective, the validation score at each grid temperature.
    at_edge_ : {"low", "high"} or None
        For the grid objective, whether the best temperature is at or near the grid's smallest ("low") or largest
        ("high") end (within :data:`~calib.posthoc.grid.EDGE_SHARE` of its points, or matched there within the
        ECE's sampling noise 1 / (2 sqrt(N))): the optimum may then lie outside the grid, and :meth:`fit` warns
        (:class:`~calib.posthoc.grid.GridEdgeWarning`) with a grid to try instead. For "sb-ece", whether T ended
        on the lower ("low") or upper ("high") bound of :data:`T_RANGE` (:meth:`fit` warns
        :class:`~calib.posthoc.grid.SearchBoundWarning`). None for "nll", which raises instead.
    optimizer_result_ : scipy.optimize.OptimizeResult or None
        For "sb-ece", the optimiser's report (``fun`` is the validation SB-ECE at the fitted T).
    n_features_in_ : int
        K, the number of classes (columns of the logits) it was fitted on; logits of another width are refused.
    classes_ : ndarray of int, shape (K,)
        ``0, ..., K-1``: column j of the logits and of :meth:`predict_proba` is class j.

    A fit that raises leaves the estimator unfitted (its fitted attributes are deleted first and assigned only
    at the end), so :meth:`predict_proba` then raises rather than answer with an earlier fit.

    It is a scikit-learn estimator that declares itself a classifier: it is fitted on (logits, labels) and returns
    class probabilities, and scikit-learn's scorers of probabilities (``scoring="neg_log_loss"``) and classifier
    tools (stratified ``cross_val_score``, ``CalibrationDisplay``) take classifiers only. Column j of the logits is
    class j, so ``classes_`` is ``0, ..., K-1`` and the labels are those indices. ``predict`` is the argmax of the
    logits: a calibrator learns confidences, not decisions, so its accuracy is the model's, and it has no ``score``
    method (the accuracy would not tell two fits apart; pass ``scoring="neg_log_loss"``). calib does not import
    scikit-learn (:class:`~calib.posthoc._common.Estimator`); ``tests/test_sklearn_contract.py`` runs scikit-learn's
    ``check_estimator`` suite on it.

    **Sample weights** (``fit(X, y, sample_weight)``) are frequency weights, as in scikit-learn: an integer
    weight counts its row that many times, a weight of 0 leaves the row out, and all weights 1 are the unweighted
    fit. "nll" minimises the weighted mean NLL ``sum_i w_i NLL_i / sum_i w_i`` (still convex in 1/T, solved
    exactly); "ece" scores each grid temperature by the weighted equal-width ECE (a sample counts ``w_i`` times in
    its bin's count, confidence and accuracy); "sb-ece" weights each sample's soft memberships by ``w_i`` in the
    bin masses and averages (Karandikar et al. 2021, Eqs. 8-12 with sample weights, as
    :func:`calib.soft_binning.soft_binned_ece`). The three are invariant to scaling all weights; the sampling noise
    of the grid's edge check counts ``sum_i w_i`` samples.
    """

    OBJECTIVES = ("nll", "ece", "sb-ece")

    def __init__(self, objective: str = "nll", n_bins: int = 15, grid=None, sb_temperature: float = 0.01,
                 sb_norm: str = "l2", sb_estimator: str = "bin"):
        self.objective = objective
        self.n_bins = n_bins
        self.grid = grid
        self.sb_temperature = sb_temperature
        self.sb_norm = sb_norm
        self.sb_estimator = sb_estimator

    temperature = deprecated_alias("temperature", "temperature_")
    grid_scores = deprecated_alias("grid_scores", "grid_scores_")
    at_edge = deprecated_alias("at_edge", "at_edge_")
    optimizer_result = deprecated_alias("optimizer_result", "optimizer_result_")

    def fit(self, X, y, sample_weight=None) -> "TemperatureScaling":
        """Fit T on validation logits X (N, K) and integer labels y (N,) by ``objective``; returns self.

        Parameters
        ----------
        X : array_like or torch.Tensor, shape (N, K)
            Validation logits, one column per class (named ``logits`` in error messages); computed in float64,
            float32 read in row blocks.
        y : array_like or torch.Tensor of int, shape (N,)
            Validation labels, class indices 0..K-1 (named ``labels`` in error messages).
        sample_weight : array_like, shape (N,), optional
            Non-negative frequency weights with a positive sum (see the class docstring); None: every row once.

        Raises
        ------
        ValueError
            For bad settings or input, for logits whose every row is constant (no temperature fits better than
            another; see :func:`fit_temperature_sb_ece` for why this raises rather than warns), and, for "nll",
            when no finite temperature minimises the NLL (:func:`fit_temperature_nll`). The estimator is then
            unfitted, whatever an earlier fit gave.
        """
        self._forget_fit()
        objective = check_choice(self.objective, "objective", self.OBJECTIVES)
        n_bins = check_int(self.n_bins, "n_bins")
        grid = MUKHOTI_GRID if self.grid is None else as_grid(self.grid, "grid")
        sb_temperature = check_positive(self.sb_temperature, "sb_temperature")
        check_choice(self.sb_norm, "sb_norm", ("l1", "l2"))
        check_choice(self.sb_estimator, "sb_estimator", ("bin", "label"))
        data = _RowBlocks(X, y, sample_weight)
        scores, edge, result = None, None, None
        if objective == "sb-ece":
            temperature, result, edge = _fit_temperature_sb_ece(
                data, n_bins=n_bins, sb_temperature=sb_temperature, norm=self.sb_norm, estimator=self.sb_estimator)
        elif objective == "nll":
            temperature = _fit_temperature_nll(data)
        else:
            scores = _grid_ece_scores(data, grid, n_bins)
            temperature, edge = _best_on_grid(grid, scores, sampling_noise(data.total),
                                              "TemperatureScaling('ece', grid={})", "objective='nll'")
        self.temperature_, self.grid_scores_, self.at_edge_, self.optimizer_result_ = temperature, scores, edge, result
        self._record_width(data.k)
        return self

    def predict_logits(self, X):
        """The scaled logits ``z / T`` of logits X (N, K) of the fitted K (a float64 ndarray, or a tensor for a
        tensor: see the module's policy)."""
        return self._checked_logits(X) / self.temperature_

    def predict_proba(self, X):
        """The calibrated probabilities ``softmax(z / T)`` of logits X (N, K) with the fitted K: float64 for a numpy
        input, a tensor of the input's dtype and device for a tensor (module docstring).

        Raises
        ------
        NotFittedError
            Before a successful :meth:`fit` (:class:`calib.posthoc.NotFittedError`, a ValueError).
        ValueError
            For logits that are not a finite (N, K) array, or of another K than the fit's (``n_features_in_``).
        """
        return super().predict_proba(X)

    def predict_log_proba(self, X):
        """``log_softmax(z / T)``, the logarithms of :meth:`predict_proba` (finite where a probability underflows)."""
        return super().predict_log_proba(X)

    def predict(self, X):
        """The class of largest calibrated probability of each row, ``classes_[argmax]``: the argmax of the logits
        (an int64 array, or tensor for a tensor)."""
        return super().predict(X)

    def _apply(self, z, log: bool):
        return scaled_softmax(z, self.temperature_, log=log)


def fit_temperature_sb_ece(logits, labels, n_bins: int = 15, sb_temperature: float = 0.01, norm: str = "l2",
                           estimator: str = "bin", start: float | None = None, max_iter: int = 200):
    r"""TS-SB-ECE: the temperature minimising the soft-binned ECE of ``softmax(logits / T)``.

    Karandikar et al. (2021), Sec. 4.1 (end) and Sec. 5.2: temperature scaling with the SB-ECE objective
    (:func:`calib.losses.batch.soft_binned_ece_loss`: M = ``n_bins``, soft-binning temperature ``sb_temperature``,
    ``norm``, ``estimator``) instead of the NLL. The paper trains T "by gradient descent for a small constant
    number of epochs" and states neither the SB-ECE variant nor the optimiser; the book's choice is
    deterministic and full-batch:

    - the variable is u = log T (so T stays positive), bounded to log ``T_RANGE``;
    - the optimiser is L-BFGS-B (scipy) with the exact gradient dSB-ECE/du from torch autograd in float64;
    - it starts from the NLL temperature (:func:`fit_temperature_nll`; from T = 1 when that has no finite
      optimum) or from ``start``;
    - it stops when the projected gradient is below 1e-10, the relative decrease of the objective in an
      iteration is below 1e-14, or after ``max_iter`` iterations.

    SB-ECE is not convex in T, so the result is the local minimiser reached from the start. The
    correctness a_i does not depend on T (the argmax is unchanged), so the objective is smooth in u.

    A search that ends on a bound of ``T_RANGE`` warns (:class:`~calib.posthoc.grid.SearchBoundWarning`): the
    SB-ECE still decreases there, so its minimiser lies beyond the bound or does not exist, and the returned T
    is the bound, not a fitted value. At T = 1e4 the probabilities are nearly uniform, which is calibrated when
    the logits carry no information about the labels (shuffled or misaligned labels); at T = 1e-4 they are
    one-hot.

    Returns
    -------
    temperature : float
    result : scipy.optimize.OptimizeResult
        ``fun``: the validation SB-ECE at the fitted temperature; ``nit``, ``message``, ``success``.

    Raises
    ------
    ValueError
        For bad settings or input, and when every row of logits is constant. Such logits raise rather than
        warn, as for the NLL and grid fits: every T then gives the same uniform probabilities, so any returned
        T (the start, T = 1, before) would be an arbitrary number that later code reads as a fitted
        calibration, while the usual cause (a dead or untrained last layer, a placeholder array) is a bug to fix
        before calibrating.
    """
    n_bins = check_int(n_bins, "n_bins")
    sb_temperature = check_positive(sb_temperature, "sb_temperature")
    check_choice(norm, "norm", ("l1", "l2"))
    check_choice(estimator, "estimator", ("bin", "label"))
    max_iter = check_int(max_iter, "max_iter")
    if start is not None:
        start = check_positive(start, "start")
    temperature, result, _ = _fit_temperature_sb_ece(_RowBlocks(logits, labels), n_bins=n_bins,
                                                     sb_temperature=sb_temperature, norm=norm, estimator=estimator,
                                                     start=start, max_iter=max_iter)
    return temperature, result


def _fit_temperature_sb_ece(data: _RowBlocks, n_bins: int = 15, sb_temperature: float = 0.01, norm: str = "l2",
                            estimator: str = "bin", start: float | None = None, max_iter: int = 200):
    """:func:`fit_temperature_sb_ece` on checked logits and settings; also returns the bound of ``T_RANGE`` it
    ended on ("low", "high" or None), having warned."""
    import torch
    from scipy.optimize import minimize

    from calib.losses import soft_binned_ece_loss

    if start is None:
        try:
            start = _fit_temperature_nll(data)
        except ValueError:
            start = 1.0
    u0 = np.log(start)
    # copies (torch.tensor), not views: torch warns on a read-only array (the caller's logits, unchanged)
    zt = torch.tensor(np.asarray(data.z, dtype=np.float64))
    yt = torch.tensor(data.y, dtype=torch.long)
    wt = None if data.w is None else torch.tensor(data.w)

    def objective(u):
        ut = torch.tensor(float(u[0]), dtype=torch.float64, requires_grad=True)
        if wt is None:
            value = soft_binned_ece_loss(zt * torch.exp(-ut), yt, n_bins=n_bins, temperature=sb_temperature,
                                         norm=norm, estimator=estimator)
        else:
            value = _weighted_soft_binned_ece(zt * torch.exp(-ut), yt, wt, n_bins=n_bins,
                                              temperature=sb_temperature, norm=norm, estimator=estimator)
        (grad,) = torch.autograd.grad(value, ut)
        return value.item(), np.array([grad.item()])

    bounds = [(np.log(T_RANGE[0]), np.log(T_RANGE[1]))]
    result = minimize(objective, np.array([u0]), jac=True, method="L-BFGS-B", bounds=bounds,
                      options={"maxiter": max_iter, "gtol": 1e-10, "ftol": 1e-14})
    temperature = float(np.exp(result.x[0]))
    edge = _bound_reached(float(result.x[0]), bounds[0])
    if edge is not None:
        what = ("nearly uniform: the logits carry almost no information about the labels (shuffled or misaligned "
                "labels?), and a uniform prediction is calibrated" if edge == "high" else
                "one-hot, as when every validation sample is classified correctly with a margin")
        warnings.warn(
            f"TS-SB-ECE ended on the {'upper' if edge == 'high' else 'lower'} bound of its search, T = "
            f"{temperature:g} (T_RANGE = {T_RANGE}), where the soft-binned ECE ({result.fun:.4g}) still decreases: "
            f"its minimiser lies {'beyond' if edge == 'high' else 'below'} the bound or does not exist, and T is "
            f"the bound, not a fitted value. The probabilities there are {what}. Check that logits and labels are "
            f"aligned and come from a trained model, and compare with objective='nll', which raises when no finite "
            f"temperature is optimal.", SearchBoundWarning, stacklevel=3)
    return temperature, result, edge


def _weighted_soft_binned_ece(logits, targets, weight, n_bins: int, temperature: float, norm: str, estimator: str):
    r"""The soft-binned ECE of :func:`calib.losses.soft_binned_ece_loss <calib.losses.batch.soft_binned_ece_loss>`
    (Karandikar et al. 2021, Eqs. 8-12) with frequency weights :math:`w_i > 0` (torch, float64, differentiable):
    :math:`S_j = \sum_i w_i u_{ij}`, :math:`A_j, C_j` the means over the samples with weights :math:`w_i u_{ij} / S_j`,
    and :math:`(\sum_j \frac{S_j}{W} |A_j - C_j|^p)^{1/p}` (Eq. 11) or
    :math:`(\frac1W \sum_i w_i \sum_j u_{ij} |A_j - c_i|^p)^{1/p}` (Eq. 12), W = :math:`\sum_i w_i`: integer
    weights give the value of the rows repeated, as in :func:`calib.soft_binning.soft_binned_ece` (``weights``), which
    the tests compare it with. Computed in log space as the unweighted loss is (its Notes)."""
    import torch

    log_p = torch.log_softmax(logits, dim=1)
    log_c, pred = log_p.max(dim=1)
    conf, correct = log_c.exp(), (pred == targets).to(logits.dtype)
    centres = (torch.arange(n_bins, dtype=conf.dtype) + 0.5) / n_bins
    log_u = torch.log_softmax(-(conf[:, None] - centres) ** 2 / temperature, dim=1)    # (N, M) log memberships
    log_wu = log_u + torch.log(weight)[:, None]
    within = torch.softmax(log_wu, dim=0)                                 # w_i u_ij / S_j, columns sum to 1
    total = weight.sum()
    p = 1 if norm == "l1" else 2
    if estimator == "bin":
        share = torch.exp(torch.logsumexp(log_wu, dim=0)) / total          # S_j / W
        value = (share * (within.T @ (correct - conf)).abs() ** p).sum()
    else:
        acc = within.T @ correct                                           # A_j
        value = (log_wu.exp() * (acc[None, :] - conf[:, None]).abs() ** p).sum() / total
    if p == 1:
        return value
    positive = value > 0                                                   # gradient 0, not nan, at 0
    return torch.where(positive, torch.where(positive, value, torch.ones_like(value)) ** 0.5,
                       torch.zeros_like(value))


def _bound_reached(u: float, bounds: tuple[float, float]) -> str | None:
    """"low" or "high" when log T = ``u`` lies on a bound of the search (within 1e-6 in log T), else None."""
    lo, hi = bounds
    return "low" if u <= lo + 1e-6 else "high" if u >= hi - 1e-6 else None
