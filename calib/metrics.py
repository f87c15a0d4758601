"""Calibration and accuracy metrics of a classifier's predicted probabilities (numpy, float64).

Every metric takes ``probs`` of shape (N, K), rows summing to 1, and integer ``labels`` of shape (N,) in
[0, K); numpy arrays and torch tensors (on any device) are both accepted, and the result is a Python float
(array-valued results, such as :func:`confidence_score`, are float64 numpy arrays). Inputs are checked by
``calib._validate``, which raises a ValueError naming the argument, the problem and the fix. float32 input is
checked and its top label taken in float32 (no float64 copy); per-row and per-bin quantities are accumulated in
float64, so the results equal those of the float64 copy. Half-precision probabilities (float16, bfloat16) are
refused with a message saying to cast them when their rows miss 1 by more than the tolerance.
The metrics of the book's tables are registered by name in :data:`REGISTRY` (:func:`get_metric`).

Conventions shared by the binned metrics (the peer libraries differ on each; see the docstrings):

- **Equal-width bins** ("uniform") are right-closed, :math:`B_i = ((i-1)/M, i/M]`, as in Guo et al. (2017)
  and Mukhoti et al. (2020, Eq. 1), with a confidence of exactly 0 put in the first bin. The edges are the
  floats ``i / M`` (correctly rounded; ``np.linspace`` gives ``i * (1/M)``, e.g. 0.30000000000000004 for
  3/10), and membership is decided by comparing with those floats, not by rounding ``c * M``: a confidence
  equal to ``0.07`` with M = 100 is in bin (0.06, 0.07] although ``0.07 * 100`` is ``7.000000000000001``;
  the float just below ``0.9`` is in bin (0.8, 0.9] with M = 10 although its product with 10 rounds to
  ``9.0``; the float just above ``11/15`` is in bin (11/15, 12/15] although its product with 15 rounds
  to ``11.0``. The index is computed in O(N), with no sort or search, as ``floor(c * M)`` and then
  corrected by one comparison with each of the two neighbouring float edges (a value on an edge, or
  rounding near one, moves ``floor`` by at most one bin).
- **Equal-mass bins** ("quantile") cut the confidences, sorted in increasing order, by position into M
  parts whose sizes are those of ``np.array_split`` (the first ``N % M`` parts one larger), so the counts
  differ by at most one and every sample is in exactly one bin. Equal confidences may straddle a cut:
  keeping ties together cannot keep the counts equal (with all confidences equal there would be one bin).
  Which of the tied samples fall on which side is not decided by their order: the binning cannot tell
  them apart, so each sample of a group of equal confidences counts with the group's mean outcome
  (accuracy). The bin counts and mean confidences are unchanged, the bin accuracies are the expected ones
  under a uniformly random order of the tied samples, the result does not depend on the order of the rows
  (a stable sort would make it depend on it), and a constant confidence c with accuracy a gives
  ``|a - c|`` for any number of bins (splitting the tie by outcome would not). With distinct confidences
  this is the plain equal-mass ECE.
- Empty bins carry no weight; the "max" norm is the maximum over non-empty bins.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass

import numpy as np

from calib._validate import (
    as_float_array,
    as_probs_labels_top,
    as_scores,
    check_choice,
    check_int,
    check_length,
)

__all__ = [
    "CSFS",
    "REGISTRY",
    "MetricSpec",
    "Reliability",
    "RiskCoverage",
    "accuracy",
    "adaptive_ece",
    "adaptive_ece_torrvision",
    "aurc",
    "brier",
    "classwise_ece",
    "confidence_range",
    "confidence_score",
    "ece",
    "get_metric",
    "ks_error",
    "top_label_ece",
    "mce",
    "mean_confidence",
    "metric_names",
    "nll",
    "reliability",
    "risk_coverage_curve",
]

BINNINGS = ("uniform", "quantile")
NORMS = ("l1", "l2", "max")
ESTIMATORS = ("bin", "label")

#: Row blocks of this many entries (256 KiB of float64) for the (N, K)-sized loops: the temporaries of a
#: block stay in the L2 cache (measured: 2**15 is about 1.6x faster than 2**18 for classwise_ece).
_BLOCK_ELEMENTS = 1 << 15


# ----------------------------------------------------------------------------------------------------------
# binning kernels
# ----------------------------------------------------------------------------------------------------------

def _uniform_edges(n_bins: int) -> np.ndarray:
    """Edges ``i / M`` for i = 0..M, each the correctly rounded float (not ``i * (1/M)`` as linspace gives)."""
    return np.arange(n_bins + 1) / n_bins


def _uniform_bin(x: np.ndarray, n_bins: int, edges: np.ndarray) -> np.ndarray:
    """Index of the bin ``(edges[i], edges[i+1]]`` holding each ``x`` in [0, 1]; x = 0 goes to bin 0.

    ``floor(x * M)`` (clipped to M - 1) is the right index except on an edge, where it is one too high,
    and within a few ulps of an edge, where rounding of ``x * M`` can move it by one either way; the two
    comparisons with the float edges put it back. (Same result as ``ceil(x * M) - 1`` plus the corrections,
    one pass fewer.)
    """
    idx = (x * n_bins).astype(np.intp)  # truncation = floor, as x >= 0
    np.minimum(idx, n_bins - 1, out=idx)
    lower = edges[:-1].copy()
    lower[0] = -1.0  # x = 0 stays in the first bin
    idx -= x <= lower.take(idx)
    idx += x > edges[1:].take(idx)
    return idx


def _sorted_pairs(x: np.ndarray, flag: np.ndarray):
    """Sort the pairs (x, flag), x >= 0 and flag boolean, by x (and by flag among equal x).

    One integer sort on ``bits(x) << 1 | flag`` (no argsort, no gathers): for non-negative floats the bit
    patterns, read as integers, are ordered as the values, and bits(1.0) < 2**62 leaves room for the shift.
    """
    key = (x + 0.0).view(np.int64) << 1  # + 0.0 turns -0.0 into +0.0
    key |= flag
    key.sort()
    flag_sorted = key & 1
    key >>= 1
    return key.view(np.float64), flag_sorted


def _tie_mean(x: np.ndarray, flag: np.ndarray, row_len: int | None = None) -> np.ndarray:
    """``flag`` as floats, each run of equal values of the sorted ``x`` replaced by its mean.

    ``x`` and ``flag`` are flat; with ``row_len`` they are rows of that length laid end to end, and runs
    also end at each row end.
    """
    n = x.shape[0]
    new = np.empty(n, dtype=bool)
    new[0] = True
    np.not_equal(x[1:], x[:-1], out=new[1:])
    if row_len is not None:
        new[::row_len] = True
    starts = np.flatnonzero(new)
    if starts.shape[0] == n:  # no ties
        return flag.astype(np.float64)
    sizes = np.diff(np.append(starts, n))
    return np.repeat(np.add.reduceat(flag, starts) / sizes, sizes)


def _quantile_sizes(n: int, n_bins: int) -> np.ndarray:
    """Bin sizes of ``np.array_split(range(n), n_bins)``: the first ``n % n_bins`` one larger."""
    q, r = divmod(n, n_bins)
    sizes = np.full(n_bins, q, dtype=np.int64)
    sizes[:r] += 1
    return sizes


def _quantile_edges(x_sorted: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """Edges for plotting equal-mass bins: 0, the midpoints between neighbouring parts, 1."""
    n = x_sorted.shape[0]
    starts = np.cumsum(sizes)[:-1]
    edges = np.empty(sizes.shape[0] + 1)
    edges[0], edges[-1] = 0.0, 1.0
    inner = starts < n
    s = starts[inner]
    edges[1:-1][inner] = 0.5 * (x_sorted[s - 1] + x_sorted[s])
    edges[1:-1][~inner] = 1.0  # empty trailing bins (N < n_bins) have zero width at 1
    return edges


def _sorted_rows_tie_mean(key: np.ndarray, n_bins: int):
    """Sort rows of keys ``bits(x) << 1 | flag`` (in place) and cut them into equal-mass bins.

    ``key`` is an (R, N) int64 array made from non-negative floats x (``(x + 0.0).view(np.int64) << 1``) with
    the outcome in the lowest bit. Returns the sorted x (R, N), the outcomes with each run of tied x replaced
    by its mean (R, N), and the start of each non-empty bin (``np.array_split`` sizes): the one row-wise
    equal-mass binning behind :func:`classwise_ece` (quantile) and :func:`equal_mass_ece_rows`.
    """
    r, n = key.shape
    key.sort(axis=1)
    hit = key & 1
    key >>= 1
    x = key.view(np.float64)
    hit = _tie_mean(x.ravel(), hit.ravel(), row_len=n).reshape(r, n)
    sizes = _quantile_sizes(n, n_bins)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])[sizes > 0]
    return x, hit, starts


def equal_mass_ece_rows(conf, correct, n_bins: int = 15, check: bool = True) -> np.ndarray:
    """Equal-mass top-label ECE of each row of ``conf`` (G, N) with the same outcomes ``correct`` (N,).

    Row g gives ``ece(..., binning="quantile")`` (:func:`adaptive_ece`) of the confidences ``conf[g]`` with
    outcomes ``correct``: the same bins, tied confidences counted with their group's mean outcome, for G
    confidence vectors in one sort (focal temperature scaling scores a whole grid of maps this way).

    Parameters
    ----------
    conf : numpy.ndarray, shape (G, N)
        Top-label confidences in [0, 1], float64.
    correct : numpy.ndarray of bool, shape (N,)
    n_bins : int
    check : bool
        Check the inputs (finite float64 confidences, one outcome per column). ``False`` skips the checks for
        arrays calib computed itself, where they would cost as much as the sort (focal temperature scaling).

    Returns
    -------
    numpy.ndarray, shape (G,)
    """
    if check:
        conf = as_float_array(conf, "conf", ndim=2)
        correct = np.asarray(correct, dtype=bool)
        check_length(correct, conf.shape[1], "correct", of="columns of conf")
        n_bins = check_int(n_bins, "n_bins")
    key = (conf + 0.0).view(np.int64) << 1
    key |= correct.astype(np.int64)[None, :]
    x, hit, starts = _sorted_rows_tie_mean(key, n_bins)
    gap = np.add.reduceat(hit - x, starts, axis=1)
    return np.abs(gap).sum(axis=1) / conf.shape[1]


@dataclass(frozen=True)
class _Bins:
    counts: np.ndarray     # (M,) samples per bin
    conf_sum: np.ndarray   # (M,) sum of confidences per bin
    hits: np.ndarray       # (M,) number of correct predictions (positive outcomes) per bin; with equal-mass
                           # bins, tied samples count with their group's mean outcome (module docstring)
    member_x: np.ndarray   # (N,) confidence of each sample, in the order of member_bin
    member_bin: np.ndarray  # (N,) bin of each sample
    edges: np.ndarray      # (M + 1,)


def _bin_top_label(conf: np.ndarray, correct: np.ndarray, n_bins: int, binning: str) -> _Bins:
    if binning == "uniform":
        edges = _uniform_edges(n_bins)
        idx = _uniform_bin(conf, n_bins, edges)
        counts = np.bincount(idx, minlength=n_bins)
        conf_sum = np.bincount(idx, weights=conf, minlength=n_bins)
        hits = np.bincount(idx[correct], minlength=n_bins)
        return _Bins(counts, conf_sum, hits, conf, idx, edges)
    x, flag = _sorted_pairs(conf, correct)
    sizes = _quantile_sizes(x.shape[0], n_bins)
    idx = np.repeat(np.arange(n_bins), sizes)
    conf_sum = np.bincount(idx, weights=x, minlength=n_bins)
    hits = np.bincount(idx, weights=_tie_mean(x, flag), minlength=n_bins)
    return _Bins(sizes, conf_sum, hits, x, idx, _quantile_edges(x, sizes))


def _binned_error(b: _Bins, norm: str, estimator: str) -> float:
    n = b.member_x.shape[0]
    full = b.counts > 0
    if estimator == "bin":
        diff = b.hits[full] - b.conf_sum[full]  # n_b (A_b - C_b)
        if norm == "l1":
            return float(np.abs(diff).sum() / n)
        if norm == "l2":
            return float(np.sqrt((diff * diff / b.counts[full]).sum() / n))
        return float(np.max(np.abs(diff) / b.counts[full]))
    acc = np.zeros(b.counts.shape[0])
    acc[full] = b.hits[full] / b.counts[full]
    gap = np.abs(acc[b.member_bin] - b.member_x)  # |A_{b_i} - c_i|
    if norm == "l1":
        return float(gap.mean())
    if norm == "l2":
        return float(np.sqrt(np.mean(gap * gap)))
    return float(gap.max())


def _check_binning_args(n_bins, binning, norm=None, estimator=None) -> int:
    n_bins = check_int(n_bins, "n_bins", minimum=1)
    check_choice(binning, "binning", BINNINGS)
    if norm is not None:
        check_choice(norm, "norm", NORMS)
    if estimator is not None:
        check_choice(estimator, "estimator", ESTIMATORS)
    return n_bins


# ----------------------------------------------------------------------------------------------------------
# top-label calibration error
# ----------------------------------------------------------------------------------------------------------

def ece(probs, labels, n_bins: int = 15, binning: str = "uniform", norm: str = "l1",
        estimator: str = "bin") -> float:
    r"""Top-label expected calibration error, binned.

    The confidence of a sample is its largest probability :math:`c_i = \max_k p_{ik}` and its outcome is
    whether the argmax (first maximum on ties, as ``np.argmax``) equals the label. With bins
    :math:`B_1..B_M`, accuracy :math:`A_b` and mean confidence :math:`C_b` in bin b:

    - ``estimator="bin"``, the usual ECE (Naeini et al. 2015; Guo et al. 2017; Mukhoti et al. 2020, Eq. 1;
      Karandikar et al. 2021, Eq. 6; Zhou et al. 2025, Def. 3.6):
      :math:`\mathrm{ECE}_{bin,p} = (\sum_b \frac{|B_b|}{N} |A_b - C_b|^p)^{1/p}`.
    - ``estimator="label"``, the label-binned ECE (Karandikar et al. 2021, Eq. 7):
      :math:`\mathrm{ECE}_{lb,p} = (\frac1N \sum_i |A_{b(i)} - c_i|^p)^{1/p}`, never below
      :math:`\mathrm{ECE}_{bin,p}` (Jensen's inequality in each bin).

    ``norm`` is p: "l1" (the ECE), "l2" (the RMS calibration error, the square root of the count-weighted
    mean squared gap) or "max" (the MCE, Mukhoti et al. 2020, Eq. 2: the largest gap over non-empty bins;
    for ``estimator="label"`` the largest :math:`|A_{b(i)} - c_i|`).

    Parameters
    ----------
    probs : array_like or torch.Tensor, shape (N, K)
        Predicted probabilities; rows sum to 1.
    labels : array_like or torch.Tensor, shape (N,)
        Integer class labels in [0, K).
    n_bins : int, default 15
        Number of bins M.
    binning : {"uniform", "quantile"}, default "uniform"
        Equal-width bins ((i-1)/M, i/M] (confidence 0 in the first bin), or equal-mass bins (the sorted
        confidences cut by position into parts whose sizes differ by at most one; tied samples count
        with their group's mean accuracy, see the module docstring). "quantile" is the adaptive ECE of
        Mukhoti et al. (2020, Eq. 3).
    norm : {"l1", "l2", "max"}, default "l1"
    estimator : {"bin", "label"}, default "bin"

    Returns
    -------
    float
        In [0, 1].

    Notes
    -----
    How other code differs (the same data can give different numbers):

    - torrvision/focal_calibration (``ECELoss``; also gpleiss' ``_ECELoss``) uses ``linspace`` edges,
      ``(lo, hi]`` bins and drops a confidence of exactly 0; its ``AdaptiveECELoss`` places edges with
      ``np.interp`` and, with ``(lo, hi]`` membership, leaves the minimum-confidence sample out of every
      bin while still dividing by N; tied confidences at an edge give unequal counts.
    - torchmetrics' ``multiclass_calibration_error`` casts the confidences to float32, uses ``[lo, hi)``
      bins (``bucketize(right=True)``) and puts a confidence of exactly 1.0 in a hidden (M+1)-th bin
      (torchmetrics issue #3510). Its "l2" is the same square root of the weighted mean squared gap and
      its "max" the same maximum (empty bins have gap 0 there), so away from edges and from 1.0 it agrees.
    - netcal's ``ECE`` clips confidences to [eps, 1 - eps], bins with ``np.histogramdd`` (``[lo, hi)``,
      last bin closed), defaults to 10 bins and treats ``y`` with at most two distinct values as
      correctness flags (netcal issue #25); away from edges, with labels, it agrees.
    - scikit-learn has no ECE; ``calibration_curve`` is binary (positive-class probability, not top-label),
      defaults to 5 bins and drops empty bins.
    """
    n_bins = _check_binning_args(n_bins, binning, norm, estimator)
    _, y, pred, conf = as_probs_labels_top(probs, labels, dtype=None)
    return _binned_error(_bin_top_label(conf, pred == y, n_bins, binning), norm, estimator)


def top_label_ece(conf, correct, n_bins: int = 15, binning: str = "uniform", norm: str = "l1",
                  estimator: str = "bin", check: bool = True) -> float:
    """:func:`ece` of given top-label confidences ``conf`` (N,) and outcomes ``correct`` (N,), the same bins.

    ``ece(probs, labels, ...)`` is ``top_label_ece(probs.max(1), probs.argmax(1) == labels, ...)``; this entry
    point serves callers that get the confidences without forming the probabilities (temperature scaling's
    grid search in :mod:`calib.posthoc`). ``check=False`` skips the input checks for arrays calib computed
    itself (float64 confidences in [0, 1], boolean outcomes).
    """
    if check:
        n_bins = _check_binning_args(n_bins, binning, norm, estimator)
        conf = as_float_array(conf, "conf", ndim=1)
        if conf.size == 0 or conf.min() < 0 or conf.max() > 1:
            raise ValueError("conf must be a non-empty 1-D array of confidences in [0, 1].")
        correct = np.asarray(correct, dtype=bool)
        check_length(correct, conf.shape[0], "correct", of="confidences")
        conf = conf + 0.0  # -0.0 -> +0.0
    return _binned_error(_bin_top_label(conf, correct, n_bins, binning), norm, estimator)


def adaptive_ece(probs, labels, n_bins: int = 15) -> float:
    r"""Adaptive ECE with equal-mass bins (Mukhoti et al. 2020, Eq. 3); ``ece(..., binning="quantile")``.

    The sorted top-label confidences are cut by position into ``n_bins`` parts whose sizes differ by at
    most one (``np.array_split`` sizes). Ties may straddle a cut; each tied sample then counts with the
    mean accuracy of its group, so the result does not depend on the order of the rows. Unlike
    torrvision/focal_calibration's ``AdaptiveECELoss`` (``np.interp`` edges, ``(lo, hi]`` membership), no
    sample is left out and the counts stay equal when confidences tie. netcal's ``ECE(equal_intervals=False)``
    takes ``np.quantile`` edges (ends forced to 0 and 1); torch-uncertainty's ``AdaptiveCalibrationError``
    splits a sort (``sort`` + ``tensor_split``), so its tied samples fall into bins by sort order.

    Parameters
    ----------
    probs : array_like or torch.Tensor, shape (N, K)
    labels : array_like or torch.Tensor, shape (N,)
    n_bins : int, default 15

    Returns
    -------
    float
    """
    return ece(probs, labels, n_bins=n_bins, binning="quantile", norm="l1")


def adaptive_ece_torrvision(probs, labels, n_bins: int = 15, return_counts: bool = False):
    """AdaECE exactly as torrvision/focal_calibration computes it, for comparison with published numbers.

    A transcription of ``AdaptiveECELoss`` (``Metrics/metrics.py``), which Mukhoti et al. (2020) and the
    repositories derived from it (AdaFocal, focal temperature scaling) report: edges from ``np.interp`` over
    the sorted confidences, membership ``(lo, hi]``, bin weights divided by N. Its quirks are kept on
    purpose: the least confident sample lies on the first edge and so in no bin, and tied confidences at an
    edge make the counts unequal. Use :func:`adaptive_ece` for the equal-mass ECE itself.

    Parameters
    ----------
    probs, labels : as for :func:`ece`
    n_bins : int, default 15
    return_counts : bool, default False
        Also return the number of samples in each of the code's bins.

    Returns
    -------
    float, or (float, ndarray of int) when ``return_counts``
    """
    n_bins = check_int(n_bins, "n_bins")
    _, y, pred, conf = as_probs_labels_top(probs, labels, dtype=None)
    correct = (pred == y).astype(np.float64)
    n = conf.shape[0]
    edges = np.interp(np.linspace(0, n, n_bins + 1), np.arange(n), np.sort(conf))
    total, counts = 0.0, np.zeros(n_bins, dtype=np.int64)
    for b, (lo, hi) in enumerate(zip(edges[:-1], edges[1:])):
        inside = (conf > lo) & (conf <= hi)
        counts[b] = int(inside.sum())
        if counts[b]:
            total += counts[b] / n * abs(conf[inside].mean() - correct[inside].mean())
    return (float(total), counts) if return_counts else float(total)


def mce(probs, labels, n_bins: int = 15) -> float:
    r"""Maximum calibration error (Naeini et al. 2015; Mukhoti et al. 2020, Eq. 2): ``ece(..., norm="max")``.

    :math:`\max_b |A_b - C_b|` over the non-empty equal-width bins. torchmetrics (``norm="max"``) and
    netcal's ``MCE`` agree away from bin edges and from confidence 1.0 (see :func:`ece` for how they bin).

    Parameters
    ----------
    probs : array_like or torch.Tensor, shape (N, K)
    labels : array_like or torch.Tensor, shape (N,)
    n_bins : int, default 15

    Returns
    -------
    float
    """
    return ece(probs, labels, n_bins=n_bins, binning="uniform", norm="max")


# ----------------------------------------------------------------------------------------------------------
# class-wise calibration error
# ----------------------------------------------------------------------------------------------------------

def classwise_ece(probs, labels, n_bins: int = 15, binning: str = "uniform", norm: str = "l1") -> float:
    r"""Class-wise calibration error: every column :math:`p_k` binned against the outcome :math:`1[y = k]`.

    For norm "l1" this is the binned cwECE of Zhou et al. (2025, Def. A.1, Eq. 18), the mean over the K
    classes of each class's binned ECE (as torrvision/focal_calibration's ``ClasswiseECELoss``):

    .. math:: \mathrm{cwECE} = \frac1K \sum_{k=1}^K \sum_b \frac{n_{kb}}{N} |\mathrm{acc}_{kb} - \mathrm{conf}_{kb}|.

    For "l2" it is :math:`(\frac1K \sum_k \sum_b \frac{n_{kb}}{N} |\mathrm{acc}_{kb} -
    \mathrm{conf}_{kb}|^2)^{1/2}`, the binned :math:`\mathrm{cwECE}_\rho` with :math:`\rho = 2`
    (Zhou et al. 2025, Def. 3.7); for "max", the largest gap over all classes and non-empty bins. A number
    :math:`\rho \ge 1` gives the binned :math:`\mathrm{cwECE}_\rho` for that :math:`\rho` (the mean over
    classes inside the root, as Def. 3.7): ``norm=1`` is "l1" and ``norm=2`` is "l2".

    Parameters
    ----------
    probs : array_like or torch.Tensor, shape (N, K)
    labels : array_like or torch.Tensor, shape (N,)
    n_bins : int, default 15
    binning : {"uniform", "quantile"}, default "uniform"
        As for :func:`ece`, per class: a probability of exactly 0 is in the first equal-width bin;
        equal-mass bins cut each column separately (tied probabilities count with the mean outcome of
        their group).
    norm : {"l1", "l2", "max"} or float >= 1, default "l1"

    Returns
    -------
    float
        In [0, 1].

    Notes
    -----
    Equal-width binning uses one ``bincount`` over the flattened (class, bin) index (in row blocks, to
    bound memory), not a loop over classes. Unlike torrvision/focal_calibration, K is the number of
    columns of ``probs`` (not ``max(labels) + 1``, which is wrong when the last class is absent from the
    labels), and a probability of exactly 0 is counted (there it falls into no bin). torchmetrics and
    netcal have no class-wise ECE; Kumar et al.'s ``get_calibration_error(mode="marginal")`` uses
    equal-mass bins, p = 2 and a debiased estimator by default.
    """
    rho = _as_rho(norm)
    n_bins = _check_binning_args(n_bins, binning, norm if rho is None else None)
    p, y, _, _ = as_probs_labels_top(probs, labels)
    n, k = p.shape
    if binning == "uniform":
        counts, conf_sum, hits = _classwise_uniform(p, y, n_bins)
    else:
        counts, conf_sum, hits = _classwise_quantile(p, y, n_bins)
    full = counts > 0
    diff = hits[full] - conf_sum[full]  # n_kb (acc_kb - conf_kb)
    if rho is not None:  # sum_b n_kb/N |diff/n_kb|^rho
        return float(((np.abs(diff) ** rho / counts[full] ** (rho - 1)).sum() / (n * k)) ** (1 / rho))
    if norm == "l1":
        return float(np.abs(diff).sum() / (n * k))
    if norm == "l2":
        return float(np.sqrt((diff * diff / counts[full]).sum() / (n * k)))
    return float(np.max(np.abs(diff) / counts[full]))


def _as_rho(norm):
    """None for a norm name; a float rho >= 1 for a number (raising otherwise)."""
    if isinstance(norm, str):
        return None
    if isinstance(norm, bool) or not isinstance(norm, numbers.Real) or not np.isfinite(norm) or norm < 1:
        raise ValueError(f"norm must be one of {', '.join(map(repr, NORMS))} or a number rho >= 1; got {norm!r}.")
    return float(norm)


def _classwise_uniform(p: np.ndarray, y: np.ndarray, n_bins: int):
    n, k = p.shape
    edges = _uniform_edges(n_bins)
    offset = np.arange(k) * n_bins  # flat index = class * M + bin
    size = k * n_bins
    counts = np.zeros(size, dtype=np.int64)
    conf_sum = np.zeros(size)
    hits = np.zeros(size, dtype=np.int64)
    rows = max(1, _BLOCK_ELEMENTS // k)
    for s in range(0, n, rows):
        block = p[s:s + rows]
        flat = _uniform_bin(block, n_bins, edges)
        flat += offset
        counts += np.bincount(flat.ravel(), minlength=size)
        conf_sum += np.bincount(flat.ravel(), weights=block.ravel(), minlength=size)
        hits += np.bincount(flat[np.arange(block.shape[0]), y[s:s + rows]], minlength=size)
    return counts, conf_sum, hits


def _classwise_quantile(p: np.ndarray, y: np.ndarray, n_bins: int):
    n, k = p.shape
    sizes = _quantile_sizes(n, n_bins)
    full = sizes > 0
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])[full]
    counts = np.tile(sizes, k)
    conf_sum = np.zeros((k, n_bins))
    hits = np.zeros((k, n_bins))
    per_block = max(1, (4 * _BLOCK_ELEMENTS) // n)  # classes sorted together
    by_class = np.argsort(y, kind="stable")
    class_start = np.searchsorted(y[by_class], np.arange(k + 1))
    for k0 in range(0, k, per_block):
        k1 = min(k, k0 + per_block)
        x = p[:, k0:k1].T.copy()  # (classes, N), always a copy: it is sorted in place below
        x += 0.0  # -0.0 -> +0.0, so that the bit patterns sort as the values
        key = x.view(np.int64)
        key <<= 1
        mine = by_class[class_start[k0]:class_start[k1]]  # the samples whose label is in this block
        key[y[mine] - k0, mine] |= 1  # the outcome 1[y = k] in the lowest bit
        x, hit, _ = _sorted_rows_tie_mean(key, n_bins)
        conf_sum[k0:k1, full] = np.add.reduceat(x, starts, axis=1)
        hits[k0:k1, full] = np.add.reduceat(hit, starts, axis=1)
    return counts, conf_sum.ravel(), hits.ravel()


# ----------------------------------------------------------------------------------------------------------
# reliability diagram data
# ----------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Reliability:
    """Per-bin statistics of the top-label confidence, for a reliability diagram (Guo et al. 2017, Fig. 1).

    Attributes
    ----------
    edges : ndarray, shape (n_bins + 1,)
        Bin edges. Equal-width: ``i / n_bins``. Equal-mass: 0, the midpoints between the largest confidence
        of one part and the smallest of the next, 1 (a tied confidence that straddles a cut is itself the
        edge; trailing empty bins when N < n_bins have zero width at 1).
    counts : ndarray of int, shape (n_bins,)
        Samples per bin, :math:`|B_b|`.
    confidence : ndarray, shape (n_bins,)
        Mean confidence :math:`C_b`; NaN for an empty bin (the only place where calib returns NaN, so that
        a plot leaves the bin out).
    accuracy : ndarray, shape (n_bins,)
        Accuracy :math:`A_b`; NaN for an empty bin. (Equal-mass bins: a confidence tied across a cut
        counts with its group's mean accuracy, see :mod:`calib.metrics`.)
    n : int
        Number of samples N.
    """

    edges: np.ndarray
    counts: np.ndarray
    confidence: np.ndarray
    accuracy: np.ndarray
    n: int


def reliability(probs, labels, n_bins: int = 15, binning: str = "uniform") -> Reliability:
    """Bin the top-label confidences and return the per-bin counts, mean confidence and accuracy.

    The bins are those of :func:`ece` (same ``n_bins`` and ``binning``), so
    ``sum(counts / n * |accuracy - confidence|)`` over non-empty bins is ``ece(probs, labels, n_bins,
    binning)``. Unlike scikit-learn's ``calibration_curve`` (binary, positive-class probability), empty
    bins are kept (with NaN statistics), so the arrays always have ``n_bins`` entries.

    Parameters
    ----------
    probs : array_like or torch.Tensor, shape (N, K)
    labels : array_like or torch.Tensor, shape (N,)
    n_bins : int, default 15
    binning : {"uniform", "quantile"}, default "uniform"

    Returns
    -------
    Reliability
    """
    n_bins = _check_binning_args(n_bins, binning)
    _, y, pred, conf = as_probs_labels_top(probs, labels, dtype=None)
    b = _bin_top_label(conf, pred == y, n_bins, binning)
    full = b.counts > 0
    mean_conf = np.full(n_bins, np.nan)
    mean_acc = np.full(n_bins, np.nan)
    mean_conf[full] = b.conf_sum[full] / b.counts[full]
    mean_acc[full] = b.hits[full] / b.counts[full]
    arrays = [np.asarray(b.edges, dtype=np.float64), np.asarray(b.counts, dtype=np.int64), mean_conf, mean_acc]
    for a in arrays:
        a.flags.writeable = False
    return Reliability(*arrays, n=int(conf.shape[0]))


# ----------------------------------------------------------------------------------------------------------
# proper scores and accuracy
# ----------------------------------------------------------------------------------------------------------

def nll(probs, labels) -> float:
    r"""Negative log-likelihood, :math:`-\frac1N \sum_i \log p_{i, y_i}` (natural log).

    Parameters
    ----------
    probs : array_like or torch.Tensor, shape (N, K)
    labels : array_like or torch.Tensor, shape (N,)

    Returns
    -------
    float

    Raises
    ------
    ValueError
        If a true class has probability exactly 0: the NLL is then infinite. calib neither returns inf
        (a silent non-finite number in a table) nor clips (scikit-learn's ``log_loss`` clips to machine
        epsilon, which silently turns the infinite term into about 36). A 0 usually comes from a float32
        softmax that underflowed: compute the probabilities in float64, compute the NLL from the logits
        with a log-softmax, or clip explicitly if a finite penalty is what you want.
    """
    p, y, _, _ = as_probs_labels_top(probs, labels)
    py = p[np.arange(p.shape[0]), y]
    zero = np.flatnonzero(py == 0)
    if zero.size:
        i = int(zero[0])
        raise ValueError(
            f"probs gives probability 0 to the true class of {zero.size} sample(s) (first: row {i}, label "
            f"{int(y[i])}), so the NLL is infinite. Compute the probabilities in float64 (e.g. "
            f"scipy.special.softmax(logits.astype(np.float64), axis=1)), compute the NLL from the logits with "
            f"a log-softmax, or clip explicitly (np.clip(probs, eps, 1)) if a finite penalty is what you want."
        )
    return float(-np.mean(np.log(py)))


def brier(probs, labels) -> float:
    r"""Multiclass Brier score (Brier 1950): :math:`\frac1N \sum_i \sum_k (p_{ik} - 1[y_i = k])^2`, in [0, 2].

    scikit-learn's ``brier_score_loss`` with a 1-D positive-class probability is the binary Brier score,
    half of this value for K = 2; recent versions (1.7+) also accept (N, K) probabilities and then return
    this multiclass score. The squared distance is summed after subtracting the one-hot target (in row
    blocks), not expanded as :math:`\sum_k p_k^2 - 2 p_y + 1`, which cancels to rounding noise for
    confident correct predictions.

    Parameters
    ----------
    probs : array_like or torch.Tensor, shape (N, K)
    labels : array_like or torch.Tensor, shape (N,)

    Returns
    -------
    float
    """
    p, y, _, _ = as_probs_labels_top(probs, labels)
    n, k = p.shape
    rows = max(1, _BLOCK_ELEMENTS // k)
    total = 0.0
    for s in range(0, n, rows):
        d = p[s:s + rows].copy()
        d[np.arange(d.shape[0]), y[s:s + rows]] -= 1.0
        total += float(np.vdot(d, d))
    return total / n


def mean_confidence(probs, labels=None) -> float:
    """Mean top-label confidence, :math:`\\frac1N \\sum_i \\max_k p_{ik}`; with :func:`accuracy`, the over- or
    under-confidence that Zhou et al. (2025) read from their Fig. 3. ``labels``, when given, are checked only.

    Parameters
    ----------
    probs : array_like or torch.Tensor, shape (N, K)
    labels : array_like or torch.Tensor, shape (N,), optional

    Returns
    -------
    float
    """
    if labels is None:
        conf = as_probs_labels_top(probs, np.zeros(len(probs), dtype=np.int64), dtype=None)[3]
    else:
        conf = as_probs_labels_top(probs, labels, dtype=None)[3]
    return float(conf.mean())


def accuracy(probs, labels) -> float:
    """Share of samples whose argmax equals the label (ties: the first maximum, as ``np.argmax``).

    Parameters
    ----------
    probs : array_like or torch.Tensor, shape (N, K)
    labels : array_like or torch.Tensor, shape (N,)

    Returns
    -------
    float
    """
    _, y, pred, _ = as_probs_labels_top(probs, labels, dtype=None)
    return float(np.mean(pred == y))


# ----------------------------------------------------------------------------------------------------------
# binning-free calibration error and selective classification
# ----------------------------------------------------------------------------------------------------------

def ks_error(probs, labels) -> float:
    r"""Top-label Kolmogorov-Smirnov calibration error (Gupta et al. 2021, Sec. 4).

    With the samples sorted by top-label confidence :math:`c`, outcome :math:`a_j = 1[\hat y_j = y_j]`:

    .. math:: \mathrm{KS} = \max_i \Big| \frac1N \sum_{j \le i} (a_j - c_j) \Big|,

    the largest distance between the cumulative accuracy and cumulative confidence curves. Ties: the
    partial sums are taken only at the end of each group of equal confidences (the curves are functions
    of the confidence value), so the result does not depend on the order of tied rows. No binning.
    None of torchmetrics, netcal or scikit-learn implements it.

    Parameters
    ----------
    probs : array_like or torch.Tensor, shape (N, K)
    labels : array_like or torch.Tensor, shape (N,)

    Returns
    -------
    float
        In [0, 1].
    """
    _, y, pred, conf = as_probs_labels_top(probs, labels, dtype=None)
    x, hit = _sorted_pairs(conf, pred == y)
    n = x.shape[0]
    walk = np.cumsum(hit - x) / n
    ends = np.flatnonzero(np.append(x[1:] != x[:-1], True))
    return float(np.max(np.abs(walk[ends])))


def aurc(probs, labels, confidence=None, loss=None) -> float:
    r"""Area under the risk-coverage curve (Geifman et al. 2019; Zhou et al. 2025, Def. 3.3).

    Samples are sorted by confidence, highest first; the selective risk at coverage i/N is the mean loss
    of the first i, and the AURC is their mean:

    .. math:: \mathrm{AURC} = \frac1N \sum_{i=1}^N \frac1i \sum_{j \le i} \ell_{(j)}
              = \frac1N \sum_i \ell_i (H_N - H_{r_i - 1}),

    where :math:`r_i` is the descending rank and :math:`H` the harmonic numbers (Zhou et al. 2025, the
    reweighted-risk form; its population limit is :math:`-\mathbb E[\ln(1 - G(x))\,\ell]`). Ties: every
    sample of a group of equal confidences gets the group's mean loss. As the AURC is linear in the sorted
    losses, this is exactly the mean AURC over all orders of the tied samples (random tie-breaking), and it
    does not depend on the order of the rows; a stable sort would instead reward or penalise the input
    order. :func:`risk_coverage_curve` returns the whole curve; this is the mean of its ``risk``.

    Parameters
    ----------
    probs : array_like or torch.Tensor, shape (N, K)
    labels : array_like or torch.Tensor, shape (N,)
    confidence : str, array_like or torch.Tensor of shape (N,), optional
        The confidence score function (CSF) g: a name from :data:`CSFS` (computed from ``probs`` by
        :func:`confidence_score`), or the scores themselves, any finite reals with higher meaning more
        confident. Default: the maximum softmax probability (MSP) of ``probs``.
    loss : array_like or torch.Tensor, shape (N,), optional
        Per-sample loss :math:`\ell_i` (finite). Default: the 0/1 error of the argmax of ``probs`` (first
        maximum on ties), the usual selective-classification AURC.

    Returns
    -------
    float
        Lower is better; in [0, 1] for the 0/1 loss.
    """
    return float(_selective(probs, labels, confidence, loss, with_weights=False)[1].mean())


# ----------------------------------------------------------------------------------------------------------
# selective classification: confidence score functions and the risk-coverage curve (Zhou et al. 2025)
# ----------------------------------------------------------------------------------------------------------

#: The confidence score functions (CSFs) of :func:`confidence_score`. The first three are Zhou et al. (2025),
#: App. Table 1 (negative entropy written correctly, on probabilities); "neg_gini" is the negative Gini
#: impurity of the anchor code (han678/AsymptoticAURC).
CSFS = ("msp", "margin", "negative_entropy", "neg_gini")


def _csf(p: np.ndarray, kind: str, conf: np.ndarray) -> np.ndarray:
    """The CSF ``kind`` of checked float64 probabilities ``p`` whose row maxima are ``conf``."""
    if kind == "msp":
        return conf.copy()
    if kind == "margin":
        if p.shape[1] == 2:
            return np.abs(p[:, 0] - p[:, 1])
        top2 = -np.partition(-p, 1, axis=1)[:, :2]
        return top2[:, 0] - top2[:, 1]
    if kind == "negative_entropy":
        logp = np.zeros_like(p)
        np.log(p, out=logp, where=p > 0)  # 0 log 0 = 0
        return np.einsum("nk,nk->n", p, logp)
    return np.einsum("nk,nk->n", p, p) - 1.0  # neg_gini


def confidence_range(kind: str, n_classes: int) -> tuple[float, float]:
    """The range [lo, hi] that the CSF ``kind`` takes on the simplex with ``n_classes`` classes.

    MSP: [1/K, 1]; margin: [0, 1]; negative entropy: [-ln K, 0]; negative Gini impurity: [1/K - 1, 0]. Zhou et
    al. (2025) do not state the bin edges of their smoothed CDF (Eqs. 13-15) for any CSF; equal-width bins on
    this range are the book's choice (:func:`calib.losses.batch.au_weights`).
    """
    check_choice(kind, "kind", CSFS)
    k = check_int(n_classes, "n_classes", minimum=2)
    return {"msp": (1.0 / k, 1.0), "margin": (0.0, 1.0), "negative_entropy": (-float(np.log(k)), 0.0),
            "neg_gini": (1.0 / k - 1.0, 0.0)}[kind]


def confidence_score(probs, kind: str = "msp") -> np.ndarray:
    r"""A confidence score function (CSF) g(p) of each row of ``probs``: higher means more confident.

    Zhou et al. (2025), App. Table 1, with the negative entropy corrected:

    - ``"msp"``, maximum softmax probability (Hendrycks & Gimpel): :math:`g(\mathbf p) = \max_i p_i`, in [1/K, 1];
    - ``"margin"``, softmax margin: :math:`g(\mathbf p) = p_{(1)} - p_{(2)}`, the largest minus the second
      largest probability, in [0, 1];
    - ``"negative_entropy"``: :math:`g(\mathbf p) = \sum_i p_i \log p_i` (with :math:`0 \log 0 = 0`), in
      :math:`[-\ln K, 0]`. The paper's table writes :math:`\sum_i z_i \log z_i` on the *logits* z, which is
      undefined for a negative logit (NaN for z = (2, -1, 0.5)); its citation (Liu et al. 2020) is the
      energy score :math:`T \log \sum_i e^{z_i / T}`, a different CSF.
    - ``"neg_gini"``, negative Gini impurity: :math:`g(\mathbf p) = \sum_i p_i^2 - 1`, in [1/K - 1, 0].

    Parameters
    ----------
    probs : array_like or torch.Tensor, shape (N, K)
        Rows on the simplex.
    kind : {"msp", "margin", "negative_entropy", "neg_gini"}, default "msp"

    Returns
    -------
    numpy.ndarray of float64, shape (N,)
    """
    check_choice(kind, "kind", CSFS)
    p = as_scores(probs, "probs", kind="probs")
    return _csf(p, kind, p.max(axis=1))


@dataclass(frozen=True)
class RiskCoverage:
    """The empirical risk-coverage curve of a selective classifier (see :func:`risk_coverage_curve`).

    Attributes
    ----------
    coverage : ndarray, shape (N,)
        i / N for i = 1..N: the share of samples accepted.
    risk : ndarray, shape (N,)
        The selective risk at that coverage (Zhou et al. 2025, Eq. 5, empirical): the mean loss of the i
        most confident samples, tied samples counting with their group's mean loss.
    threshold : ndarray, shape (N,)
        The i-th largest confidence, the threshold tau that accepts them (Eq. 4: accept if g(x) >= tau).
    weights : ndarray, shape (N,)
        The AURC weight of each sample, in the input order: :math:`H_N - H_{r_i - 1}` for descending rank
        :math:`r_i`, averaged over a group of tied confidences, so that ``mean(weights * loss) == mean(risk)``
        (the reweighted-risk form of the AURC). The weights average to 1.
    """

    coverage: np.ndarray
    risk: np.ndarray
    threshold: np.ndarray
    weights: np.ndarray


def risk_coverage_curve(probs, labels, confidence=None, loss=None) -> RiskCoverage:
    r"""The selective risk at every coverage i/N, sorting by a confidence score (Geifman et al. 2019).

    Parameters and tie rule as :func:`aurc` (whose value is ``risk.mean()``): samples are sorted by
    confidence, highest first, and each group of equal confidences contributes its mean loss at every
    position it occupies, which is the curve averaged over the orders of the tied samples.

    Parameters
    ----------
    probs : array_like or torch.Tensor, shape (N, K)
    labels : array_like or torch.Tensor, shape (N,)
    confidence : str, array_like or torch.Tensor of shape (N,), optional
        A CSF name from :data:`CSFS` or the scores; default MSP.
    loss : array_like or torch.Tensor, shape (N,), optional
        Per-sample loss; default the 0/1 error of the argmax.

    Returns
    -------
    RiskCoverage

    Notes
    -----
    The weights come from the identity :math:`\frac1N\sum_{i}\frac1i\sum_{j\le i}\ell_{(j)} =
    \frac1N\sum_j \ell_{(j)} \sum_{i \ge j} \frac1i` (exchange the sums), which is exact for every N; the
    :math:`-\ln(1 - G)` weight of Zhou et al. (2025, Def. 3.3) is its large-N limit. One sort, O(N log N).
    """
    coverage, risk, threshold, weights = _selective(probs, labels, confidence, loss, with_weights=True)
    arrays = [coverage, risk, threshold, weights]
    for a in arrays:
        a.flags.writeable = False
    return RiskCoverage(*arrays)


def _selective(probs, labels, confidence, loss, with_weights: bool):
    """Coverage, selective risk, thresholds and (optionally) AURC weights; see :func:`risk_coverage_curve`."""
    p, y, pred, conf = as_probs_labels_top(probs, labels, dtype=None)
    n = conf.shape[0]
    if confidence is None:
        score = conf
    elif isinstance(confidence, str):
        check_choice(confidence, "confidence", CSFS)
        score = _csf(p.astype(np.float64, copy=False), confidence, conf)
    else:
        score = as_float_array(confidence, "confidence", ndim=1)
        check_length(score, n, "confidence")
    if loss is None:
        ell = (pred != y).astype(np.float64)
    else:
        ell = as_float_array(loss, "loss", ndim=1)
        check_length(ell, n, "loss")
    order = np.argsort(score)[::-1]  # any order inside a tie: tied losses are replaced by their mean
    s, ell = score[order], ell[order]
    starts = np.flatnonzero(np.concatenate([[True], s[1:] != s[:-1]]))
    sizes = np.diff(np.append(starts, n))
    ell = np.repeat(np.add.reduceat(ell, starts) / sizes, sizes)
    positions = np.arange(1, n + 1)
    risk = np.cumsum(ell) / positions
    if not with_weights:
        return None, risk, None, None
    tail = np.cumsum((1.0 / positions)[::-1])[::-1]  # H_N - H_{r-1} at descending rank r
    tail = np.repeat(np.add.reduceat(tail, starts) / sizes, sizes)
    weights = np.empty(n)
    weights[order] = tail
    return positions / n, risk, s, weights


# ----------------------------------------------------------------------------------------------------------
# the registry: every metric of the book's tables by name
# ----------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class MetricSpec:
    """One metric in the registry; calling it scores: ``spec(probs, labels, n_bins=15) -> float``.

    Attributes
    ----------
    name : str
        The metric's name in chapter 10's long-format rows (``"adaece"``).
    takes : str
        Its arguments beyond ``probs`` and ``labels`` (``"n_bins"`` or ``""``).
    summary : str
        What it is, with its paper and equation.
    compute : callable
        ``compute(probs, labels, n_bins) -> float``.
    from_log_probs : callable or None
        ``from_log_probs(log_probs, labels) -> float``, the same metric from log-probabilities, where it exists
        (the NLL, finite where a probability underflowed to 0).
    """

    name: str
    takes: str
    summary: str
    compute: object
    from_log_probs: object

    def __call__(self, probs, labels, n_bins: int = 15) -> float:
        return float(self.compute(probs, labels, n_bins))


def _nll_from_log_probs(log_probs, labels) -> float:
    y = np.asarray(labels)
    return float(-np.mean(np.asarray(log_probs)[np.arange(len(y)), y]))


#: Every metric of the book's tables, in chapter 10's order (15 bins for the binned ones by default);
#: :func:`get_metric`, :func:`metric_names`, ``calib.experiments.score_probabilities`` and the list in
#: :func:`get_metric`'s docstring are generated from it. A new metric is its function and one new row.
#:
#: :meta hide-value:
REGISTRY: tuple[MetricSpec, ...] = (
    MetricSpec("accuracy", "", "share of argmax predictions equal to the label", lambda p, y, m: accuracy(p, y), None),
    MetricSpec("ece", "n_bins", "equal-width top-label ECE (Guo et al. 2017; Mukhoti et al. 2020, Eq. 1)",
               lambda p, y, m: ece(p, y, n_bins=m), None),
    MetricSpec("adaece", "n_bins", "equal-mass top-label ECE, AdaECE (Mukhoti et al. 2020, Eq. 3; Komisarenko & "
               "Kull 2024's ECE)", lambda p, y, m: adaptive_ece(p, y, n_bins=m), None),
    MetricSpec("ece_em_l2", "n_bins", "equal-mass l2 top-label ECE (Karandikar et al. 2021, Eq. 6 with p = 2)",
               lambda p, y, m: ece(p, y, n_bins=m, binning="quantile", norm="l2"), None),
    MetricSpec("classwise_ece", "n_bins", "class-wise ECE (Zhou et al. 2025, Def. A.1, Eq. 18)",
               lambda p, y, m: classwise_ece(p, y, n_bins=m), None),
    MetricSpec("mce", "n_bins", "maximum calibration error (Naeini et al. 2015; Mukhoti et al. 2020, Eq. 2)",
               lambda p, y, m: mce(p, y, n_bins=m), None),
    MetricSpec("nll", "", "negative log-likelihood", lambda p, y, m: nll(p, y), _nll_from_log_probs),
    MetricSpec("brier", "", "multiclass Brier score (Brier 1950)", lambda p, y, m: brier(p, y), None),
    MetricSpec("ks_error", "", "top-label Kolmogorov-Smirnov calibration error (Gupta et al. 2021, Sec. 4)",
               lambda p, y, m: ks_error(p, y), None),
    MetricSpec("aurc", "", "area under the risk-coverage curve, MSP (Geifman et al. 2019; Zhou et al. 2025, "
               "Def. 3.3)", lambda p, y, m: aurc(p, y), None),
    MetricSpec("mean_confidence", "", "mean top-label confidence (with accuracy: Zhou et al. 2025, Fig. 3)",
               lambda p, y, m: mean_confidence(p, y), None),
)

_METRICS = {spec.name: spec for spec in REGISTRY}


def metric_names() -> tuple[str, ...]:
    """The registered metric names, in :data:`REGISTRY` order."""
    return tuple(_METRICS)


def get_metric(name: str) -> MetricSpec:
    """The metric called ``name``, a :class:`MetricSpec`: ``get_metric("adaece")(probs, labels)`` scores.

    Raises
    ------
    ValueError
        For an unknown name, listing the registered ones.
    """
    if not isinstance(name, str) or name not in _METRICS:
        raise ValueError(f"unknown metric {name!r}; choose from {', '.join(metric_names())}.")
    return _METRICS[name]


if get_metric.__doc__:  # python -OO strips docstrings
    get_metric.__doc__ += "\n    Notes\n    -----\n    The metrics, generated from :data:`REGISTRY`:\n\n" + "\n".join(
        f"    - ``{s.name}``: {s.summary}{'; takes ' + s.takes if s.takes else ''}." for s in REGISTRY) + "\n"
