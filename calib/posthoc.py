"""Post-hoc calibrators: a map fitted on validation logits and applied to test logits.

Follows scikit-learn's conventions: ``fit(logits, labels)`` returns the fitted calibrator, fitted
quantities are attributes, ``predict_proba(logits)`` applies the map. Logits are (N, K) arrays or torch
tensors; labels are integer class indices.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import brentq
from scipy.special import log_softmax, softmax

from calib import metrics
from calib._validate import as_float_array, as_logits_labels, as_scores, check_choice, check_int

#: Mukhoti et al. (2020)'s temperature grid (official code, ``temperature_scaling.py``): 0.1, 0.2, ..., 10.0.
MUKHOTI_GRID = np.round(np.arange(1, 101) * 0.1, 10)

#: Bracket for the NLL fit, in temperature. An optimum outside it is reported, never clamped.
T_RANGE = (1e-4, 1e4)


def _nll_slope(logits: np.ndarray, labels: np.ndarray, inverse_temperature: float) -> float:
    """d/d(beta) of the mean NLL of softmax(beta * z): E_p[z] - z_y, averaged (increasing in beta)."""
    p = softmax(logits * inverse_temperature, axis=1)
    expected = np.einsum("nk,nk->n", p, logits)
    return float(np.mean(expected - logits[np.arange(len(labels)), labels]))


def fit_temperature_nll(logits, labels) -> float:
    """The temperature minimising the mean NLL of ``softmax(logits / T)`` (Guo et al. 2017, Sec. 4.2).

    The NLL is convex in beta = 1/T (a log-sum-exp of functions linear in beta minus a linear term), so
    its minimiser is the unique root of the derivative E_p[z] - z_y, found by Brent's method on log beta to
    machine precision. This is exact, unlike the usual fixed-step LBFGS (gpleiss/temperature_scaling: lr
    0.01, 50 iterations, T initialised at 1.5), which users report stopping early or diverging.

    Raises
    ------
    ValueError
        When the NLL keeps decreasing beyond the bracket ``T_RANGE``: every validation sample is correct
        (the NLL tends to 0 as T -> 0) or the logits are anti-correlated with the labels (T < 0 would help).
    """
    z, y = as_logits_labels(logits, labels)
    lo, hi = np.log(1 / T_RANGE[1]), np.log(1 / T_RANGE[0])
    f_lo, f_hi = _nll_slope(z, y, np.exp(lo)), _nll_slope(z, y, np.exp(hi))
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
    log_beta = brentq(lambda u: _nll_slope(z, y, np.exp(u)), lo, hi, xtol=1e-13, rtol=4 * np.finfo(float).eps)
    return float(np.exp(-log_beta))


def fit_temperature_grid(logits, labels, grid=None, score=None) -> tuple[float, np.ndarray]:
    """The grid temperature with the lowest ``score(probs, labels)`` (first one on ties) and all scores.

    With the defaults this is Mukhoti et al. (2020)'s protocol (official code): T = 0.1, 0.2, ..., 10.0,
    scored by 15-bin equal-width ECE on the validation set.
    """
    z, y = as_logits_labels(logits, labels)
    grid = MUKHOTI_GRID if grid is None else as_float_array(grid, "grid", ndim=1)
    if grid.size == 0 or np.any(grid <= 0):
        raise ValueError("grid must be a non-empty 1-D array of positive temperatures.")
    score = score or (lambda p, labels_: metrics.ece(p, labels_, n_bins=15))
    scores = np.array([score(softmax(z / t, axis=1), y) for t in grid])
    return float(grid[int(np.argmin(scores))]), scores


class TemperatureScaling:
    """Temperature scaling: ``softmax(z / T)`` with one scalar T fitted on validation logits (Guo et al. 2017).

    Parameters
    ----------
    objective : {"nll", "ece"}
        "nll": T minimises the validation NLL, found exactly (:func:`fit_temperature_nll`).
        "ece": Mukhoti et al. (2020)'s protocol, the grid T = 0.1, 0.2, ..., 10.0 scored by validation ECE
        with ``n_bins`` equal-width bins (their published "(T)" columns use it).
    n_bins : int
        Bins of the ECE objective.
    grid : array-like, optional
        Temperatures searched by the "ece" objective (default :data:`MUKHOTI_GRID`).

    Attributes
    ----------
    temperature : float
        The fitted T (> 1 softens over-confident logits).
    grid_scores : ndarray or None
        For the grid objective, the validation score at each grid temperature.
    """

    OBJECTIVES = ("nll", "ece")

    def __init__(self, objective: str = "nll", n_bins: int = 15, grid=None):
        self.objective = check_choice(objective, "objective", self.OBJECTIVES)
        self.n_bins = check_int(n_bins, "n_bins")
        self.grid = None if grid is None else as_float_array(grid, "grid", ndim=1)
        self.temperature: float | None = None
        self.grid_scores: np.ndarray | None = None

    def fit(self, logits, labels) -> "TemperatureScaling":
        if self.objective == "nll":
            self.temperature = fit_temperature_nll(logits, labels)
        else:
            n_bins = self.n_bins
            self.temperature, self.grid_scores = fit_temperature_grid(
                logits, labels, self.grid, score=lambda p, y: metrics.ece(p, y, n_bins=n_bins))
        return self

    def _check_fitted(self) -> float:
        if self.temperature is None:
            raise ValueError("this TemperatureScaling is not fitted yet; call fit(logits, labels) first.")
        return self.temperature

    def predict_logits(self, logits) -> np.ndarray:
        """The scaled logits ``z / T``."""
        t = self._check_fitted()
        return as_scores(logits, "logits", kind="logits") / t

    def predict_proba(self, logits) -> np.ndarray:
        """The calibrated probabilities ``softmax(z / T)`` (float64)."""
        return softmax(self.predict_logits(logits), axis=1)

    def __repr__(self) -> str:
        fitted = f", temperature={self.temperature:.4g}" if self.temperature is not None else ""
        return f"TemperatureScaling(objective={self.objective!r}{fitted})"


__all__ = ["TemperatureScaling", "fit_temperature_nll", "fit_temperature_grid", "MUKHOTI_GRID"]
