"""Post-hoc calibrators: a map fitted on validation logits and applied to test logits.

The calibrators follow scikit-learn's estimator protocol: ``__init__`` stores its parameters as given (checked in
``fit``), ``get_params`` / ``set_params`` read and change them (so ``sklearn.base.clone`` works), ``fit(logits,
labels)`` returns the fitted calibrator, fitted quantities are attributes with a trailing underscore
(``temperature_``, ``gamma_``), and ``predict_proba(logits)`` applies the map. The names without the underscore
(``temperature``, ``gamma``, ...) are deprecated aliases that warn (DeprecationWarning).

- :class:`TemperatureScaling`: ``softmax(z / T)`` (Guo et al. 2017), T by exact NLL or Mukhoti et al.'s grid;
- :class:`FocalTemperatureScaling`: ``p_hat_gamma(softmax(z / T))`` (Komisarenko & Kull 2024), (gamma, T) by the
  paper's grid search (vectorised: :func:`focal_temperature_scores`) or by its proposed line search.

Every map of the book is also registered by name in :data:`REGISTRY` (:func:`get_map`, :func:`map_names`), the
one table that ``calib.experiments.fit_posthoc``, chapter 10 and the API reference read.

Arrays in and out (one policy for calib's maps, :func:`calib.focal.focal_map` and :mod:`calib.metrics`):
logits are (N, K) numpy arrays, array-likes or torch tensors; labels are integer class indices (N,). ``fit``
computes in float64 whatever the input (a float32 array is read in row blocks, never copied whole to float64).
``predict_proba`` returns the input's kind: a numpy array in gives a float64 numpy array out (``focal_map`` alone
keeps a float32 numpy input in float32, its documented float32-safe path); a torch tensor in
gives a tensor out on the same device, of the input's floating dtype (integer tensors give float64; float16 and
bfloat16 are computed in float32 and returned in their dtype), computed by torch and differentiable.
"""

from __future__ import annotations

import inspect
import math
import warnings
from dataclasses import dataclass
from typing import Callable

import numpy as np
from scipy.optimize import brentq
from scipy.special import expit, log_softmax, softmax

from calib import metrics
from calib._validate import (as_float_array, as_logits_labels, as_scores, check_choice, check_int, check_positive,
                             n_threads)
from calib.focal import focal_map, log_focal_map
from calib.focal.numerics import check_gamma, log1p_gamma_r_negative, log_one_minus_r, r_top

#: Mukhoti et al. (2020)'s temperature grid, 0.1, 0.2, ..., 10.0 (official code, ``temperature_scaling.py``).
#:
#: :meta hide-value:
MUKHOTI_GRID = np.round(np.arange(1, 101) * 0.1, 10)

#: Bracket for the NLL fit, in temperature. An optimum outside it is reported, never clamped.
T_RANGE = (1e-4, 1e4)

#: Share of a grid's points at each end that count as its edge (at least one point): a best score there, or one
#: that the edge matches within sampling noise, means that the optimum may lie beyond the grid (GridEdgeWarning).
EDGE_SHARE = 0.05

#: Logits are read in row blocks of about this many entries (1 MiB of float64), converted to float64 one block
#: at a time: the fits' extra memory is a few (N,) vectors, not an (N, K) float64 copy (issue 24, item 26).
_FIT_BLOCK_ELEMENTS = 1 << 17


# ----------------------------------------------------------------------------------------------------------
# the estimator protocol
# ----------------------------------------------------------------------------------------------------------

class _Estimator:
    """scikit-learn's parameter protocol, without depending on scikit-learn: the parameters are the arguments
    of ``__init__``, stored under their own names."""

    @classmethod
    def _param_names(cls) -> list[str]:
        return [p for p in inspect.signature(cls.__init__).parameters if p != "self"]

    def get_params(self, deep: bool = True) -> dict:
        """The parameters given to ``__init__`` (or set since), by name (scikit-learn's protocol)."""
        return {name: getattr(self, name) for name in self._param_names()}

    def set_params(self, **params):
        """Change parameters by name; returns self. They are checked by the next ``fit``."""
        names = self._param_names()
        for name, value in params.items():
            if name not in names:
                raise ValueError(f"{type(self).__name__} has no parameter {name!r}; its parameters are "
                                 f"{', '.join(names)}.")
            setattr(self, name, value)
        return self

    def __repr__(self) -> str:
        init = inspect.signature(type(self).__init__).parameters
        shown = [f"{k}={v!r}" for k, v in self.get_params().items()
                 if not isinstance(v, np.ndarray) and not (type(v) is type(init[k].default) and v == init[k].default)]
        fitted = [f"{k}={getattr(self, k):.4g}" for k in ("gamma_", "temperature_") if hasattr(self, k)]
        return f"{type(self).__name__}({', '.join(shown + fitted)})"


def _deprecated_alias(old: str, new: str) -> property:
    """The pre-protocol name ``old`` of the fitted attribute ``new``: reads and writes it, with a warning."""
    def warn(self):
        warnings.warn(f"{type(self).__name__}.{old} is deprecated; use {type(self).__name__}.{new} (scikit-learn's "
                      f"trailing underscore for fitted attributes).", DeprecationWarning, stacklevel=3)

    def fget(self):
        warn(self)
        return getattr(self, new, None)

    def fset(self, value):
        warn(self)
        setattr(self, new, value)

    fget.__doc__ = f"Deprecated alias of ``{new}``."
    return property(fget, fset, doc=f"Deprecated alias of ``{new}``.")


def _is_tensor(x) -> bool:
    return type(x).__module__.startswith("torch")


def _checked_tensor(logits, name: str = "logits"):
    """A floating (N, K) torch tensor of finite logits, K >= 2, on its device (integers become float64)."""
    import torch

    if logits.ndim != 2 or logits.shape[0] == 0 or logits.shape[1] < 2:
        raise ValueError(f"{name} must have shape (N, K) with N >= 1 and K >= 2; got {tuple(logits.shape)}.")
    if not logits.is_floating_point():
        logits = logits.double()
    if not bool(torch.isfinite(logits).all()):
        raise ValueError(f"{name} contains NaN or infinity; remove or repair those entries before calling.")
    return logits


# ----------------------------------------------------------------------------------------------------------
# temperature scaling: the fits, in row blocks
# ----------------------------------------------------------------------------------------------------------

class _RowBlocks:
    """Checked (N, K) logits, float32 or float64 as given, read in float64 one row block at a time.

    ``map(fn)`` calls ``fn(lo, hi, block)`` on each block (float64, rows lo:hi), split over threads (numpy releases
    the GIL); the per-row results are written by ``fn`` into arrays of the caller. The top logit, the runner-up
    and the label's logit of each row are taken in one pass at construction.
    """

    def __init__(self, logits, labels):
        self.z, self.y = as_logits_labels(logits, labels, dtype=None)
        self.n, self.k = self.z.shape
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
            raise ValueError(
                "logits: every row is constant (all K logits of a sample are equal), so softmax(z / T) is uniform "
                "for every T and no temperature fits better than another. The model's output carries no "
                "information: check that the logits are the network's last layer on real inputs (not a dead or "
                "untrained layer, or a constant placeholder)."
            )

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
    """d/d(beta) of the mean NLL of softmax(beta * z): E_p[z] - z_y, averaged (increasing in beta)."""
    expected = np.empty(data.n)

    def rows(lo, hi, zb):
        p = softmax(zb * inverse_temperature, axis=1)
        expected[lo:hi] = np.einsum("nk,nk->n", p, zb)

    data.map(rows)
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


def _grid_ece_scores(data: _RowBlocks, grid: np.ndarray, n_bins: int) -> np.ndarray:
    """The 15-bin (``n_bins``) equal-width ECE of ``softmax(z / t)`` for every t of ``grid``, without (N, K) arrays.

    Only the top-label confidence and whether the argmax is the label enter the ECE. For ``p = softmax(x)``,
    ``x = z / t``, scipy computes ``e = exp(x - max x)`` and ``p = e / sum(e)``, so the top probability is
    ``1 / sum(e)``, the same float. The argmax of ``p`` is that of ``z`` unless two logits are so close that
    their probabilities round to the same float; such near-tied rows (a gap below ``1e-13 (|z_max| + max t)``,
    far wider than the rounding needs) are redone with the whole row. The scores equal, bit for bit,
    ``metrics.ece(softmax(z / t), y, n_bins)`` (the tests check it).
    """
    conf = np.empty((len(grid), data.n))
    tied = data.z_max - data.z_second <= 1e-13 * (np.abs(data.z_max) + float(grid.max()))
    correct = np.broadcast_to(data.top == data.y, (len(grid), data.n)).copy()

    def rows(lo, hi, zb):
        z_max = data.z_max[lo:hi, None]
        x = np.empty_like(zb)
        for i, t in enumerate(grid):
            np.divide(zb, t, out=x)
            x -= z_max / t                             # the row maximum of x, exactly
            np.exp(x, out=x)
            conf[i, lo:hi] = 1.0 / x.sum(axis=1)

    data.map(rows)
    for r in np.flatnonzero(tied):                     # rare: recompute as metrics.ece sees softmax(z / t)
        zr = np.asarray(data.z[r], dtype=np.float64)
        for i, t in enumerate(grid):
            p = softmax(zr / t)
            j = int(p.argmax())
            conf[i, r], correct[i, r] = p[j], j == data.y[r]
    return np.array([metrics.top_label_ece(conf[i], correct[i], n_bins=n_bins, check=False)
                     for i in range(len(grid))])


def _as_grid(grid, name: str) -> np.ndarray:
    arr = as_float_array(grid, name, ndim=1)
    if arr.size == 0 or np.any(arr <= 0):
        raise ValueError(f"{name} must be a non-empty 1-D array of positive temperatures; got {arr!r}.")
    return arr


def fit_temperature_grid(logits, labels, grid=None, score=None, n_bins: int = 15) -> tuple[float, np.ndarray]:
    """The grid temperature with the lowest ``score(probs, labels)`` (first one on ties) and all scores.

    With the defaults this is Mukhoti et al. (2020)'s protocol (official code): T = 0.1, 0.2, ..., 10.0,
    scored by ``n_bins``-bin (15) equal-width ECE on the validation set, computed from the logits in row blocks
    without forming (N, K) probabilities. A custom ``score`` gets the probabilities ``softmax(logits / T)`` of
    each grid point.
    """
    grid = MUKHOTI_GRID if grid is None else _as_grid(grid, "grid")
    n_bins = check_int(n_bins, "n_bins")
    data = _RowBlocks(logits, labels)
    if score is None:
        scores = _grid_ece_scores(data, grid, n_bins)
    else:
        z = np.asarray(data.z, dtype=np.float64)
        scores = np.array([score(softmax(z / t, axis=1), data.y) for t in grid])
    return float(grid[int(np.argmin(scores))]), scores


class GridEdgeWarning(UserWarning):
    """A grid search found its best value at or near the grid's first or last point: the optimum may lie beyond."""


def _grid_edge(grid: np.ndarray, scores: np.ndarray, noise: float, widen: Callable[[str], str]) -> str | None:
    """"low" or "high" when the best score is at an end of ``grid`` (warning), else None.

    An end is the first or last ``EDGE_SHARE`` of the grid's points (at least one). It is reported when the best
    score lies there, or when the best score there is within ``noise`` of the best score: for a noisy objective
    (a binned ECE on a finite validation set), a minimum a few steps inside the grid cannot be told apart from
    one at its end. ``widen(edge)`` says how to widen the grid.
    """
    if grid.size < 2:
        return None
    order = np.argsort(grid, kind="stable")
    g, s = grid[order], scores[order]
    m = max(1, math.ceil(EDGE_SHARE * g.size)) if noise > 0 else 1
    best_at = int(np.argmin(s))
    best = float(s[best_at])
    near = {"low": float(s[:m].min()) - best, "high": float(s[-m:].min()) - best}
    edge = ("low" if best_at < m else "high" if best_at >= g.size - m else
            min((e for e in near if near[e] <= noise), key=near.get, default=None))
    if edge is not None:
        t, end = float(g[best_at]), float(g[0] if edge == "low" else g[-1])
        why = (f"at the grid's {'smallest' if edge == 'low' else 'largest'} temperature" if t == end else
               f"within {noise:.2g} (the sampling noise of the objective) of the best score among the grid's "
               f"{'lowest' if edge == 'low' else 'highest'} {m} temperatures (up to T = {end:g})" if best_at >= m
               and best_at < g.size - m else f"among the grid's {m} {'lowest' if edge == 'low' else 'highest'} "
               f"temperatures (the end is T = {end:g})")
        warnings.warn(f"the best temperature on the grid, T = {t:g} (score {best:.4g}), is {why}; the optimum "
                      f"may lie {'below' if edge == 'low' else 'beyond'} T = {end:g}. Widen the grid, e.g. "
                      f"{widen(edge)}.", GridEdgeWarning, stacklevel=3)
    return edge


def _sampling_noise(n: int) -> float:
    """1 / (2 sqrt(N)): the largest standard error of an accuracy measured on N samples, the scale below which
    two binned ECEs of one validation set cannot be told apart."""
    return 0.5 / math.sqrt(n)


class TemperatureScaling(_Estimator):
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
        ("high") end (within :data:`EDGE_SHARE` of its points, or matched there within the ECE's sampling noise
        1 / (2 sqrt(N))): the optimum may then lie outside the grid, and :meth:`fit` warns
        (:class:`GridEdgeWarning`) with a grid to try instead.
    optimizer_result_ : scipy.optimize.OptimizeResult or None
        For "sb-ece", the optimiser's report (``fun`` is the validation SB-ECE at the fitted T).
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

    temperature = _deprecated_alias("temperature", "temperature_")
    grid_scores = _deprecated_alias("grid_scores", "grid_scores_")
    at_edge = _deprecated_alias("at_edge", "at_edge_")
    optimizer_result = _deprecated_alias("optimizer_result", "optimizer_result_")

    def fit(self, logits, labels) -> "TemperatureScaling":
        """Fit T on validation logits (N, K) and integer labels (N,) by ``objective``; returns self."""
        objective = check_choice(self.objective, "objective", self.OBJECTIVES)
        n_bins = check_int(self.n_bins, "n_bins")
        grid = MUKHOTI_GRID if self.grid is None else _as_grid(self.grid, "grid")
        sb_temperature = check_positive(self.sb_temperature, "sb_temperature")
        check_choice(self.sb_norm, "sb_norm", ("l1", "l2"))
        check_choice(self.sb_estimator, "sb_estimator", ("bin", "label"))
        self.grid_scores_, self.at_edge_, self.optimizer_result_ = None, None, None
        if objective == "sb-ece":
            self.temperature_, self.optimizer_result_ = fit_temperature_sb_ece(
                logits, labels, n_bins=n_bins, sb_temperature=sb_temperature, norm=self.sb_norm,
                estimator=self.sb_estimator)
            return self
        data = _RowBlocks(logits, labels)
        if objective == "nll":
            self.temperature_ = _fit_temperature_nll(data)
            return self
        self.grid_scores_ = _grid_ece_scores(data, grid, n_bins)
        self.temperature_ = float(grid[int(np.argmin(self.grid_scores_))])

        def widen(edge):
            lo, hi = (self.temperature_ / 100, float(grid.max())) if edge == "low" else (float(grid.min()),
                                                                                           self.temperature_ * 100)
            return (f"TemperatureScaling('ece', grid=np.geomspace({lo:.3g}, {hi:.3g}, 200)), or compare with the "
                    f"NLL fit (objective='nll'), which has no grid")

        self.at_edge_ = _grid_edge(grid, self.grid_scores_, _sampling_noise(data.n), widen)
        return self

    def _check_fitted(self) -> float:
        if not hasattr(self, "temperature_"):
            raise ValueError("this TemperatureScaling is not fitted yet; call fit(logits, labels) first.")
        return self.temperature_

    def predict_logits(self, logits):
        """The scaled logits ``z / T`` (a float64 ndarray, or a tensor for a tensor: see the module's policy)."""
        t = self._check_fitted()
        if _is_tensor(logits):
            return _checked_tensor(logits) / t
        return as_scores(logits, "logits", kind="logits") / t

    def predict_proba(self, logits):
        """The calibrated probabilities ``softmax(z / T)``: float64 for a numpy input, a tensor of the input's
        dtype and device for a tensor (module docstring)."""
        t = self._check_fitted()
        if _is_tensor(logits):
            import torch

            z = _checked_tensor(logits)
            low = z.dtype in (torch.float16, torch.bfloat16)
            out = torch.softmax((z.float() if low else z) / t, dim=1)
            return out.to(z.dtype) if low else out
        return softmax(as_scores(logits, "logits", kind="logits") / t, axis=1)

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

    Returns
    -------
    temperature : float
    result : scipy.optimize.OptimizeResult
        ``fun``: the validation SB-ECE at the fitted temperature; ``nit``, ``message``, ``success``.
    """
    import torch
    from scipy.optimize import minimize

    from calib.losses import soft_binned_ece_loss

    z, y = as_logits_labels(logits, labels)
    n_bins = check_int(n_bins, "n_bins")
    sb_temperature = check_positive(sb_temperature, "sb_temperature")
    check_choice(norm, "norm", ("l1", "l2"))
    check_choice(estimator, "estimator", ("bin", "label"))
    max_iter = check_int(max_iter, "max_iter")
    if start is None:
        try:
            start = fit_temperature_nll(z, y)
        except ValueError:
            start = 1.0
    u0 = np.log(check_positive(start, "start"))
    zt = torch.as_tensor(z, dtype=torch.float64)
    yt = torch.as_tensor(y, dtype=torch.long)

    def objective(u):
        ut = torch.tensor(float(u[0]), dtype=torch.float64, requires_grad=True)
        value = soft_binned_ece_loss(zt * torch.exp(-ut), yt, n_bins=n_bins, temperature=sb_temperature, norm=norm,
                                estimator=estimator)
        (grad,) = torch.autograd.grad(value, ut)
        return value.item(), np.array([grad.item()])

    bounds = [(np.log(T_RANGE[0]), np.log(T_RANGE[1]))]
    result = minimize(objective, np.array([u0]), jac=True, method="L-BFGS-B", bounds=bounds,
                      options={"maxiter": max_iter, "gtol": 1e-10, "ftol": 1e-14})
    return float(np.exp(result.x[0])), result




# ----------------------------------------------------------------------------------------------------------
# Focal temperature scaling (Komisarenko & Kull 2024, Secs. 4.2 and 5)
# ----------------------------------------------------------------------------------------------------------

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
    return _as_grid(temperatures, "temperatures")


def focal_temperature_scores(logits, labels, gammas=None, temperatures=None, objective: str = "ece",
                             n_bins: int = 15) -> np.ndarray:
    """The validation score of focal temperature scaling at every point of a (gamma, T) grid.

    ``FTS_{gamma, T}(z) = p_hat_gamma(softmax(z / T))`` (Komisarenko & Kull 2024, Sec. 4.2), scored by the
    equal-mass ECE with ``n_bins`` bins (``objective="ece"``, :func:`calib.metrics.adaptive_ece`) or by the NLL
    (``"nll"``, :func:`calib.metrics.nll`); the paper's Sec. 5.1 protocol takes the argmin over the grid
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


class FocalTemperatureScaling(_Estimator):
    r"""Focal temperature scaling: ``p_hat_gamma(softmax(z / T))`` with (gamma, T) chosen on validation logits.

    Komisarenko & Kull (2024), Sec. 4.2: temperature scaling followed by the focal calibration map of Eq. 1
    (:func:`calib.focal.calibration_map.focal_map`) with an "evaluation" gamma that may differ from the training gamma
    and may be negative (gamma >= -1). Sec. 5.1's protocol: choose (gamma, T) minimising the validation ECE (15
    equal-mass bins) for the ECE column, or the validation NLL for the log-loss column.

    Parameters
    ----------
    objective : {"ece", "nll"}
        "ece": equal-mass top-label ECE with ``n_bins`` bins (:func:`calib.metrics.adaptive_ece`); "nll": NLL.
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
        The validation objective at (gamma_, temperature_).
    grid_scores_ : ndarray, shape (len(gammas), len(temperatures)), or None
        "grid" search: the validation objective at every grid point.
    path_ : dict or None
        "line" search: ``anchor_temperatures`` (the T of each anchor), ``gammas``, ``temperatures`` and
        ``scores`` of the points on the line, and ``n_evaluations``.
    at_edge_ : {"low", "high"} or None
        "grid" search: whether the best T of the chosen gamma is at or near an end of the T grid, as for
        :class:`TemperatureScaling` (the ECE objective allows for its sampling noise, the NLL does not): the
        optimum may then lie outside the grid, and :meth:`fit` warns (:class:`GridEdgeWarning`).

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

    gamma = _deprecated_alias("gamma", "gamma_")
    temperature = _deprecated_alias("temperature", "temperature_")
    score = _deprecated_alias("score", "score_")
    grid_scores = _deprecated_alias("grid_scores", "grid_scores_")
    path = _deprecated_alias("path", "path_")

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

            noise = _sampling_noise(data.n) if objective == "ece" else 0.0
            self.at_edge_ = _grid_edge(temps, scores[i], noise, widen)
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
        if _is_tensor(logits):
            return focal_map(_checked_tensor(logits) / t, gam)
        return focal_map(as_scores(logits, "logits", kind="logits") / t, gam)


# ----------------------------------------------------------------------------------------------------------
# the registry: every post-hoc map of the book by name
# ----------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class FittedMap:
    """A post-hoc map fitted on validation logits: ``proba`` and ``log_proba`` map logits (N, K) to float64
    probabilities and their logarithms (exact where a probability underflows to 0); ``params`` holds the
    fitted ``temperature`` and ``gamma``."""

    name: str
    params: dict
    proba: Callable
    log_proba: Callable


def focal_loss_gamma(loss: str | None) -> float | None:
    """The fixed gamma of a focal-loss name (``"fl-3"`` -> 3.0), asked of the loss registry
    (:func:`calib.losses.focal_gamma`); None for any other loss, or for a name the registry does not know (a grid's
    own label, ``"ce-w"``)."""
    if not isinstance(loss, str):
        return None
    from calib.losses import focal_gamma

    try:
        return focal_gamma(loss)
    except ValueError:
        return None


def _as_float64(z) -> np.ndarray:
    return np.asarray(z, dtype=np.float64)


def _scaled_softmax(name: str, params: dict) -> FittedMap:
    t = params.get("temperature", 1.0)
    return FittedMap(name, params, lambda z: softmax(_as_float64(z) / t, axis=1),
                     lambda z: log_softmax(_as_float64(z) / t, axis=1))


def _scaled_focal(name: str, params: dict) -> FittedMap:
    t, g = params.get("temperature", 1.0), params["gamma"]
    return FittedMap(name, params, lambda z: focal_map(_as_float64(z) / t, g),
                     lambda z: log_focal_map(_as_float64(z) / t, g))


def _fit_none(val_logits, val_labels, loss=None) -> FittedMap:
    return _scaled_softmax("none", {})


def _fit_ts(objective: str):
    def fit(val_logits, val_labels, loss=None) -> FittedMap:
        ts = TemperatureScaling(objective=objective).fit(val_logits, val_labels)
        return _scaled_softmax(f"ts-{objective}", {"temperature": ts.temperature_})
    return fit


def _fit_fts(val_logits, val_labels, loss=None) -> FittedMap:
    fts = FocalTemperatureScaling(objective="ece").fit(val_logits, val_labels)
    return _scaled_focal("fts", {"temperature": fts.temperature_, "gamma": fts.gamma_})


def _fit_psi(val_logits, val_labels, loss=None) -> FittedMap:
    g = focal_loss_gamma(loss)
    if g is None:
        raise ValueError(f"post-hoc map 'psi' (Psi^gamma) needs a fixed-gamma focal loss 'fl-<gamma>'; got "
                         f"loss={loss!r}.")
    return _scaled_focal("psi", {"gamma": g})


@dataclass(frozen=True)
class MapSpec:
    """One post-hoc map in the registry; calling it fits it: ``spec(val_logits, val_labels, loss=None)``.

    Attributes
    ----------
    name : str
        The map's name (``"ts-nll"``), as in chapter 10's tables and ``calib sweep --evaluate``.
    takes : str
        What it is fitted on.
    summary : str
        What it is, with its paper and equation.
    fit : callable
        ``fit(val_logits, val_labels, loss) -> FittedMap``.
    applies : callable
        ``applies(loss) -> bool``: whether the map exists for a network trained with ``loss`` (a loss name).
    """

    name: str
    takes: str
    summary: str
    fit: Callable[..., FittedMap]
    applies: Callable[[str | None], bool]

    def __call__(self, val_logits, val_labels, loss: str | None = None) -> FittedMap:
        return self.fit(val_logits, val_labels, loss)


_VAL = "validation logits and labels"


def _any_loss(loss: str | None) -> bool:
    return True

#: Every post-hoc map of the book, in chapter 10's order; :func:`get_map`, :func:`map_names`,
#: ``calib.experiments.fit_posthoc`` and the list in :func:`get_map`'s docstring are generated from it. A new map
#: is one new row (and its fit function).
#:
#: :meta hide-value:
REGISTRY: tuple[MapSpec, ...] = (
    MapSpec("none", "nothing", "softmax of the logits as they are", _fit_none, _any_loss),
    MapSpec("ts-nll", _VAL, "temperature scaling, T by the exact validation NLL (Guo et al. 2017, Sec. 4.2)",
            _fit_ts("nll"), _any_loss),
    MapSpec("ts-ece", _VAL, "temperature scaling, T on the grid 0.1, ..., 10 by the 15-bin validation ECE "
            "(Mukhoti et al. 2020, Sec. 5.1, Eq. 1)", _fit_ts("ece"), _any_loss),
    MapSpec("fts", _VAL, "focal temperature scaling, (gamma, T) on the paper's grid by the 15-bin equal-mass "
            "validation ECE (Komisarenko & Kull 2024, Sec. 5.1, Eq. 1)", _fit_fts, _any_loss),
    MapSpec("psi", "the training loss 'fl-<gamma>' (no fit)", "the focal calibration map Psi^gamma with the "
            "training gamma (Komisarenko & Kull 2024, Sec. 3.3, Eq. 1)", _fit_psi,
            lambda loss: focal_loss_gamma(loss) is not None),
    MapSpec("ts-sb-ece", _VAL, "temperature scaling, T by the soft-binned validation ECE (Karandikar et al. "
            "2021, Secs. 4.1 and 5.2, Eq. 11)", _fit_ts("sb-ece"), _any_loss),
)

_MAPS = {spec.name: spec for spec in REGISTRY}


def map_names() -> tuple[str, ...]:
    """The registered post-hoc map names, in :data:`REGISTRY` order."""
    return tuple(_MAPS)


def get_map(name: str) -> MapSpec:
    """The post-hoc map called ``name``, a :class:`MapSpec`; ``get_map(name)(val_logits, val_labels, loss)``
    fits it and returns a :class:`FittedMap`.

    Raises
    ------
    ValueError
        For an unknown name, listing the registered ones.
    """
    if not isinstance(name, str) or name not in _MAPS:
        raise ValueError(f"unknown post-hoc map {name!r}; choose from {', '.join(map_names())}.")
    return _MAPS[name]


if get_map.__doc__:  # python -OO strips docstrings
    get_map.__doc__ += "\n    Notes\n    -----\n    The maps, generated from :data:`REGISTRY`:\n\n" + "\n".join(
        f"    - ``{s.name}``: {s.summary}; fitted on {s.takes}." for s in REGISTRY) + "\n"


__all__ = ["TemperatureScaling", "FocalTemperatureScaling", "GridEdgeWarning", "fit_temperature_nll",
           "fit_temperature_grid", "fit_temperature_sb_ece", "focal_temperature_scores", "MUKHOTI_GRID",
           "KOMISARENKO_GAMMAS", "KOMISARENKO_TEMPERATURES", "T_RANGE", "EDGE_SHARE", "MapSpec", "FittedMap",
           "REGISTRY", "get_map", "map_names", "focal_loss_gamma"]
