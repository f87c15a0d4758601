"""The metrics as statistics of the test samples, for the test set's bootstrap of :mod:`calib.stats.test_set`.

:func:`statistic` gives one model's metric on one test set in the form the book's intervals resample: an
:class:`~calib.stats.test_set.AdditiveStatistic` where the metric is a function of sums over the samples (accuracy,
error, NLL, Brier, mean confidence, equal-width top-label ECE: one matrix product evaluates hundreds of resamples),
a :class:`~calib.stats.test_set.ResampledStatistic` otherwise (equal-mass ECE, whose bins move with the resample;
class-wise ECE; any metric of the registry). Its ``value`` is the metric of :mod:`calib.metrics` on the whole test
set (to rounding: sums in another order).
"""

from __future__ import annotations

import numpy as np

from calib._validate import as_probs_labels, check_int
from calib.metrics._binning import uniform_bin, uniform_edges
from calib.metrics.binned import top_label_ece, top_label_outcomes
from calib.metrics.registry import get_metric, metric_names
from calib.metrics.scores import label_log_probability
from calib.stats.test_set import AdditiveStatistic, ResampledStatistic

__all__ = ["statistic", "ADDITIVE_METRICS"]

#: The metrics :func:`statistic` gives as sums over the samples (the others are recomputed resample by resample).
ADDITIVE_METRICS = ("accuracy", "error", "nll", "brier", "mean_confidence", "ece")


#: The binned top-label metrics of the registry whose resamples read only each sample's confidence and outcome (the
#: (N, 2) rows of :func:`calib.metrics.top_label_outcomes`, not the (N, K) probabilities): name -> (binning, norm).
_TOP_LABEL_BINNED = {"adaece": ("quantile", "l1"), "mce": ("uniform", "max"), "ece_em_l2": ("quantile", "l2")}


def _mean_of_column(sums: np.ndarray, total: np.ndarray) -> np.ndarray:
    return sums[:, 0] / total


def _ece_from_bins(n_bins: int):
    def finish(sums: np.ndarray, total: np.ndarray) -> np.ndarray:
        conf, correct = sums[:, :n_bins], sums[:, n_bins:]
        return np.abs(conf - correct).sum(axis=1) / total
    return finish


def statistic(probs, labels, metric: str = "ece", n_bins: int = 15):
    """One model's ``metric`` on one test set, as a statistic of the test samples (module docstring).

    Parameters
    ----------
    probs : array_like or torch.Tensor, shape (N, K)
        The model's probabilities on the test set.
    labels : array_like, shape (N,)
        The test labels.
    metric : str
        ``"accuracy"``, ``"error"`` (1 - accuracy), ``"nll"``, ``"brier"``, ``"mean_confidence"``, ``"ece"``
        (equal-width top-label ECE, l1, ``n_bins`` bins, as :func:`calib.metrics.ece`), or any other name of
        :func:`calib.metrics.get_metric` (recomputed on each resample).
    n_bins : int
        Bins of the binned metrics.
    """
    n_bins = check_int(n_bins, "n_bins", minimum=1)
    if metric not in ADDITIVE_METRICS and metric not in metric_names():
        raise ValueError(f"metric={metric!r} is not a metric of calib.metrics; choose one of "
                         f"{', '.join(sorted(set(ADDITIVE_METRICS) | set(metric_names())))}.")
    outcomes = top_label_outcomes(probs, labels)                 # (N, 2): confidence, correct; checks the inputs
    conf, correct = outcomes[:, 0], outcomes[:, 1]
    if metric in ("accuracy", "error"):
        column = correct if metric == "accuracy" else 1.0 - correct
        return AdditiveStatistic(column[:, None], _mean_of_column)
    if metric == "mean_confidence":
        return AdditiveStatistic(conf[:, None], _mean_of_column)
    if metric == "nll":
        return AdditiveStatistic(-label_log_probability(probs, labels)[:, None], _mean_of_column)
    if metric == "brier":
        p, y = as_probs_labels(probs, labels)                   # checked: float64, C-contiguous
        squared = np.square(p).sum(axis=1) - 2 * p[np.arange(len(y)), y] + 1.0
        return AdditiveStatistic(squared[:, None], _mean_of_column)
    if metric == "ece":
        bins = uniform_bin(conf, n_bins, uniform_edges(n_bins))
        onehot = np.zeros((conf.size, n_bins))
        onehot[np.arange(conf.size), bins] = 1.0
        return AdditiveStatistic(np.hstack([onehot * conf[:, None], onehot * correct[:, None]]),
                                 _ece_from_bins(n_bins))
    if metric in _TOP_LABEL_BINNED:
        binning, norm = _TOP_LABEL_BINNED[metric]
        return ResampledStatistic(outcomes, lambda rows: top_label_ece(rows[:, 0], rows[:, 1] > 0, n_bins, binning,
                                                                       norm, check=False))
    spec = get_metric(metric)
    p, y = as_probs_labels(probs, labels)
    k = p.shape[1]
    return ResampledStatistic(np.column_stack([p, y]), lambda rows: spec(rows[:, :k], rows[:, k].astype(np.int64),
                                                                         n_bins))
