"""The metrics as statistics of the test samples, for the test set's bootstrap of :mod:`calib.stats.test_set`.

:func:`statistic` gives one model's metric on one test set in the form the book's intervals resample: an
:class:`~calib.stats.test_set.AdditiveStatistic` where the metric is a function of sums over the samples (accuracy,
error, NLL, Brier, mean confidence, equal-width top-label ECE: one matrix product evaluates hundreds of resamples),
a :class:`~calib.stats.test_set.ResampledStatistic` otherwise (equal-mass ECE, whose bins move with the resample;
class-wise ECE; any metric of the registry). Its ``value`` is the metric of :mod:`calib.metrics` on the whole test
set (to rounding: sums in another order).

The equal-mass top-label ECEs (AdaECE, l1; Karandikar et al.'s l2) are :class:`EqualMassStatistic`: their bins move
with the resample, yet the samples' order by confidence does not, so one sort serves every resample and the bins of
all of them are cut from cumulative sums at once, exactly as :func:`calib.metrics.ece` cuts the resampled rows.
"""

from __future__ import annotations

import numpy as np

from calib._validate import as_float_array, as_probs_labels, check_int, check_length, to_numpy
from calib.metrics._binning import quantile_sizes, uniform_bin, uniform_edges
from calib.metrics.binned import top_label_ece, top_label_outcomes
from calib.metrics.registry import get_metric, metric_names
from calib.metrics.scores import label_log_probability
from calib.stats.test_set import AdditiveStatistic, ResampledStatistic

__all__ = ["statistic", "outcome_statistic", "EqualMassStatistic", "ADDITIVE_METRICS", "TOP_LABEL_METRICS"]

#: The metrics :func:`statistic` gives as sums over the samples (the others are recomputed resample by resample).
ADDITIVE_METRICS = ("accuracy", "error", "nll", "brier", "mean_confidence", "ece")


#: The binned top-label metrics of the registry whose resamples read only each sample's confidence and outcome (the
#: (N, 2) rows of :func:`calib.metrics.top_label_outcomes`, not the (N, K) probabilities): name -> (binning, norm).
_TOP_LABEL_BINNED = {"adaece": ("quantile", "l1"), "mce": ("uniform", "max"), "ece_em_l2": ("quantile", "l2")}


_BLOCK = 64        # groups of sorted samples summed at once by EqualMassStatistic.resampled


class EqualMassStatistic:
    """The equal-mass top-label ECE (``norm`` "l1": AdaECE, Nguyen & O'Connor 2015, Mukhoti et al. 2020 Sec. 5;
    "l2": Karandikar et al. 2021, Sec. 5.1) of confidences ``conf`` and outcomes ``correct`` (N,), as a statistic
    of the test samples whose resamples are evaluated all at once.

    A resample with counts :math:`w_i` is the sorted confidences with sample i repeated :math:`w_i` times; its
    bins are the ``np.array_split`` parts of those N positions and ties keep their mean outcome, as
    :func:`calib.metrics.top_label_ece` bins the repeated rows. The order by confidence is that of the whole set,
    so with cumulative sums :math:`S(p)` of the confidences and outcomes over the first p positions (linear inside
    a sample's run of copies), bin b's sums are :math:`S(e_b) - S(e_{b-1})` at its ends :math:`e_b`, read from
    sums over blocks of 64 sorted samples and the one block each end falls in.
    """

    def __init__(self, conf, correct, n_bins: int = 15, norm: str = "l2"):
        if norm not in ("l1", "l2"):
            raise ValueError(f"norm must be 'l1' or 'l2'; got {norm!r}.")
        conf = as_float_array(conf, "conf", ndim=1) + 0.0          # a NaN confidence would sort anywhere
        correct = as_float_array(correct, "correct", ndim=1)
        check_length(correct, conf.size, "correct", of="confidences in conf")
        if conf.size < 2:
            raise ValueError(f"conf and correct hold {conf.size} sample(s); an equal-mass ECE needs at least 2.")
        order = np.argsort(conf, kind="stable")
        self._x, self._y, self._order = conf[order], correct[order], order
        new = np.empty(conf.size, dtype=bool)
        new[0] = True
        np.not_equal(self._x[1:], self._x[:-1], out=new[1:])
        self._tie_starts = np.flatnonzero(new)                    # the runs of equal confidences
        self.n_bins = check_int(n_bins, "n_bins", minimum=1)
        self.norm = norm

    @property
    def n(self) -> int:
        """The number of test samples."""
        return int(self._x.size)

    @property
    def value(self) -> float:
        """The metric on the whole test set."""
        return float(self.resampled(np.ones((1, self.n)))[0])

    def resampled(self, counts: np.ndarray) -> np.ndarray:
        """The metric at each row of ``counts`` (B, N), every row at once.

        Cost: one gather of the counts into confidence order (``np.take``), block sums and cumulative sums over it,
        and (B, bins, 64) gathers at the bins' ends: O(B N) with a few passes over the (B, N) counts."""
        counts = np.asarray(counts)
        if counts.ndim != 2 or counts.shape[1] != self.n:
            raise ValueError(f"counts must be (B, {self.n}); got shape {counts.shape}.")
        total = counts.sum(axis=1, dtype=np.float64)
        if not np.all(total == total[0]) or total[0] < 1:
            raise ValueError("every row of counts must draw the same number (>= 1) of samples.")
        b, g, size = counts.shape[0], self._tie_starts.size, _BLOCK
        k = -(-g // size)
        w, hits = np.zeros((b, k * size)), np.zeros((b, k * size))          # groups sorted by confidence, padded
        x = np.ones(k * size)
        x[:g] = self._x[self._tie_starts]
        sorted_counts = np.take(counts, self._order, axis=1)  # np.take: a fifth of counts[:, order]'s time
        if g < self.n:                                                      # ties: a run of copies per tie
            w[:, :g] = np.add.reduceat(sorted_counts.astype(np.float64), self._tie_starts, axis=1)
            hits[:, :g] = np.add.reduceat(sorted_counts * self._y, self._tie_starts, axis=1)
        else:
            w[:, :g] = sorted_counts
            np.multiply(sorted_counts, self._y, out=hits[:, :g])
        blocks = [np.concatenate([np.zeros((b, 1)), np.cumsum(a.reshape(b, k, size).sum(axis=2), axis=1)], axis=1)
                  for a in (w, w * x, hits)]                                 # sums before each block, (B, k + 1)
        sizes = quantile_sizes(int(round(float(total[0]))), self.n_bins)
        ends = np.cumsum(sizes)[:-1].astype(np.float64)                      # inner bin ends, as positions
        rows = np.arange(b)[:, None]
        # the block holding each end's position: the last block whose start lies before it
        blk = np.minimum((blocks[0][:, None, 1:] < ends[None, :, None]).sum(axis=2), k - 1)   # (B, M - 1)
        cols = blk[:, :, None] * size + np.arange(size)                      # (B, M - 1, size)
        wi = w[rows[:, :, None], cols]
        inside = ends[None, :, None] - blocks[0][rows, blk][:, :, None]      # positions still to cover in the block
        cum = np.cumsum(wi, axis=2)
        before = cum - wi                                                     # copies before each group in the block
        part = np.clip(inside - before, 0.0, wi)                             # copies of each group before the end
        share = np.divide(hits[rows[:, :, None], cols], wi, out=np.zeros_like(wi), where=wi > 0)
        conf_end = blocks[1][rows, blk] + (part * x[cols]).sum(axis=2)
        hit_end = blocks[2][rows, blk] + (part * share).sum(axis=2)
        conf_all, hit_all = blocks[1][:, -1:], blocks[2][:, -1:]
        zero = np.zeros((b, 1))
        conf_sum = np.diff(np.concatenate([zero, conf_end, conf_all], axis=1), axis=1)
        hit_sum = np.diff(np.concatenate([zero, hit_end, hit_all], axis=1), axis=1)
        diff = hit_sum - conf_sum                                             # n_b (A_b - C_b)
        total = total.astype(np.float64)
        if self.norm == "l1":
            return np.abs(diff).sum(axis=1) / total
        full = sizes > 0
        return np.sqrt((diff[:, full] ** 2 / sizes[full]).sum(axis=1) / total)


def _mean_of_column(sums: np.ndarray, total: np.ndarray) -> np.ndarray:
    return sums[:, 0] / total


def _ece_from_bins(n_bins: int):
    def finish(sums: np.ndarray, total: np.ndarray) -> np.ndarray:
        conf, correct = sums[:, :n_bins], sums[:, n_bins:]
        return np.abs(conf - correct).sum(axis=1) / total
    return finish


#: The metrics that read only each sample's top-label confidence and whether the top label is right.
TOP_LABEL_METRICS = ("accuracy", "error", "mean_confidence", "ece", *_TOP_LABEL_BINNED)


def outcome_statistic(confidence, correct, metric: str = "ece", n_bins: int = 15):
    """A top-label ``metric`` (one of :data:`TOP_LABEL_METRICS`) as a statistic of the test samples, from each
    sample's top-label ``confidence`` and whether its top label is ``correct``: what :func:`statistic` computes from
    the probabilities, for stores that keep only these two columns (:class:`calib.experiments.TestOutcomes`)."""
    n_bins = check_int(n_bins, "n_bins", minimum=1)
    if metric not in TOP_LABEL_METRICS:
        raise ValueError(f"metric={metric!r} needs more than the top-label outcomes; choose one of "
                         f"{', '.join(TOP_LABEL_METRICS)}, or give the probabilities to statistic().")
    conf = np.ascontiguousarray(as_float_array(confidence, "confidence", ndim=1), dtype=np.float64)
    if conf.size == 0 or conf.min() < 0 or conf.max() > 1:
        raise ValueError("confidence must be a non-empty 1-D array of top-label confidences in [0, 1].")
    correct = np.asarray(to_numpy(correct, "correct"), dtype=bool).astype(np.float64)   # a tensor on any device
    check_length(correct, conf.shape[0], "correct", of="confidences")
    conf = conf + 0.0                                                                   # -0.0 -> +0.0
    if metric in ("accuracy", "error"):
        column = correct if metric == "accuracy" else 1.0 - correct
        return AdditiveStatistic(column[:, None], _mean_of_column)
    if metric == "mean_confidence":
        return AdditiveStatistic(conf[:, None], _mean_of_column)
    if metric == "ece":
        bins = uniform_bin(conf, n_bins, uniform_edges(n_bins))
        columns = np.zeros((conf.size, 2 * n_bins))      # [one-hot bin x confidence, one-hot bin x outcome]
        columns[np.arange(conf.size), bins] = conf
        columns[np.arange(conf.size), n_bins + bins] = correct
        return AdditiveStatistic(columns, _ece_from_bins(n_bins))
    if metric in ("adaece", "ece_em_l2"):
        return EqualMassStatistic(conf, correct, n_bins, _TOP_LABEL_BINNED[metric][1])
    binning, norm = _TOP_LABEL_BINNED[metric]
    outcomes = np.column_stack([conf, correct])
    return ResampledStatistic(outcomes, lambda rows: top_label_ece(rows[:, 0], rows[:, 1] > 0, n_bins, binning,
                                                                   norm, check=False))


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
    if metric in TOP_LABEL_METRICS:
        return outcome_statistic(outcomes[:, 0], outcomes[:, 1] > 0, metric, n_bins)
    if metric == "nll":
        return AdditiveStatistic(-label_log_probability(probs, labels)[:, None], _mean_of_column)
    if metric == "brier":
        p, y = as_probs_labels(probs, labels)                   # checked: float64, C-contiguous
        squared = np.square(p).sum(axis=1) - 2 * p[np.arange(len(y)), y] + 1.0
        return AdditiveStatistic(squared[:, None], _mean_of_column)
    spec = get_metric(metric)
    p, y = as_probs_labels(probs, labels)
    k = p.shape[1]
    return ResampledStatistic(np.column_stack([p, y]), lambda rows: spec(rows[:, :k], rows[:, k].astype(np.int64),
                                                                         n_bins))
