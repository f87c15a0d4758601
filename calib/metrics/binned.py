"""Binned calibration errors of predicted probabilities and the data of a reliability diagram.

Top-label ECE in its variants (:func:`ece`, :func:`adaptive_ece`, :func:`mce`, the l2 and label-binned
estimators), the class-wise ECE (:func:`classwise_ece`), torrvision's AdaECE transcribed for comparison
(:func:`adaptive_ece_torrvision`), and the per-bin statistics of :func:`reliability`. Inputs and outputs
as stated in :mod:`calib.metrics`.

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

from calib._validate import as_float_array, as_probs_labels_top, check_int, check_length, to_numpy
from calib.metrics import _binning  # BLOCK_ELEMENTS is read at call time (the tests shrink it)
from calib.metrics._binning import (NORMS, bin_top_label, binned_error, check_binning_args,
                                    quantile_sizes, sorted_rows_tie_mean, uniform_bin, uniform_edges)

__all__ = ["ece", "top_label_ece", "top_label_outcomes", "top_label_bins", "adaptive_ece", "adaptive_ece_torrvision",
           "mce", "classwise_ece", "Reliability", "reliability"]


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
        correct = np.asarray(to_numpy(correct, "correct"), dtype=bool)   # a tensor on any device, too
        check_length(correct, conf.shape[1], "correct", of="columns of conf")
        n_bins = check_int(n_bins, "n_bins")
    key = (conf + 0.0).view(np.int64) << 1
    key |= correct.astype(np.int64)[None, :]
    x, hit, starts = sorted_rows_tie_mean(key, n_bins)
    gap = np.add.reduceat(hit - x, starts, axis=1)
    return np.abs(gap).sum(axis=1) / conf.shape[1]


def equal_width_ece_rows(conf, correct, n_bins: int = 15, check: bool = True) -> np.ndarray:
    """Equal-width top-label ECE of each row of ``conf`` (G, N), bit for bit :func:`top_label_ece` of each row.

    Row g gives ``top_label_ece(conf[g], correct[g], n_bins)``, i.e. :func:`ece` (Guo et al. 2017; Mukhoti et al.
    2020, Eq. 1) with the same right-closed bins on the floats ``i / M``, the same per-bin sums in the same order and
    the same final sum over the non-empty bins, so the same float: the bins of all rows are counted and summed by
    one ``np.bincount`` on the indices ``g M + bin`` (temperature scaling scores a whole grid of temperatures this
    way; one call of :func:`top_label_ece` per row costs about 40 us of Python besides the arithmetic). The rows
    are taken in blocks of about ``BLOCK_ELEMENTS`` confidences, so the extra memory is a few blocks, and the cost
    is a few passes over the G N confidences plus one small sum per row.

    Parameters
    ----------
    conf : numpy.ndarray, shape (G, N)
        Top-label confidences in [0, 1], float64.
    correct : numpy.ndarray of bool, shape (N,) or (G, N)
        The outcomes, the same for every row or one row each.
    n_bins : int
    check : bool
        Check the inputs (float64 confidences in [0, 1], outcomes of a matching shape). ``False`` skips the checks
        for arrays calib computed itself.

    Returns
    -------
    numpy.ndarray, shape (G,)
    """
    if check:
        conf = as_float_array(conf, "conf", ndim=2)
        if conf.size == 0 or conf.min() < 0 or conf.max() > 1:
            raise ValueError("conf must be a non-empty (G, N) array of confidences in [0, 1].")
        correct = np.asarray(to_numpy(correct, "correct"), dtype=bool)   # a tensor on any device, too
        if correct.shape not in (conf.shape[1:], conf.shape):
            raise ValueError(f"correct must have shape (N,) or (G, N) = {conf.shape}; got {correct.shape}.")
        n_bins = check_int(n_bins, "n_bins")
        conf = conf + 0.0  # -0.0 -> +0.0, as top_label_ece
    g, n = conf.shape
    correct = np.broadcast_to(correct, conf.shape)
    edges = uniform_edges(n_bins)
    out = np.empty(g)
    step = max(1, _binning.BLOCK_ELEMENTS // n)
    for lo in range(0, g, step):
        x = np.ascontiguousarray(conf[lo:lo + step]).ravel()
        rows = x.shape[0] // n
        idx = uniform_bin(x, n_bins, edges)
        idx.reshape(rows, n)[:] += (np.arange(rows) * n_bins)[:, None]  # row r's bins are r M .. r M + M - 1
        size = rows * n_bins
        conf_sum = np.bincount(idx, weights=x, minlength=size).reshape(rows, n_bins)
        idx <<= 1                                       # (bin, outcome) pairs: the misses and the hits of each bin
        idx |= np.ascontiguousarray(correct[lo:lo + step]).ravel()
        pairs = np.bincount(idx, minlength=2 * size).reshape(rows, n_bins, 2)
        hits, counts = pairs[:, :, 1], pairs.sum(axis=2)
        out[lo:lo + rows] = _sum_full_bins(np.abs(hits - conf_sum), counts > 0) / n
    return out


def _sum_full_bins(values: np.ndarray, full: np.ndarray) -> np.ndarray:
    """``values[r][full[r]].sum()`` for each row r (at least one bin full): the full bins of the rows with the same
    number of them are gathered into one (R, m) array, whose sum along its last axis is, row by row, numpy's
    (pairwise) sum of those m values, as :func:`~calib.metrics._binning.binned_error` sums them; a sum with the
    empty bins' zeros in place would group the terms otherwise and could differ in the last bit."""
    m = full.sum(axis=1)
    out = np.empty(values.shape[0])
    for k in np.unique(m):
        same = m == k
        out[same] = values[same][full[same]].reshape(-1, k).sum(axis=1)
    return out



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
      its "max" the same maximum (empty bins have gap 0 there), so away from edges and from 1.0 it is the
      same estimator, computed in float32: its per-bin sums (``scatter_add_`` in float32) put it 3e-8 to
      1.2e-7 from this function's float64 value at N = 10^3 to 10^5 (10 classes, l1), while rounding the
      confidences to float32 alone moves the value by 1e-10 or less.
    - netcal's ``ECE`` clips confidences to [eps, 1 - eps], bins with ``np.histogramdd`` (``[lo, hi)``,
      last bin closed) and defaults to 10 bins. Given ``y`` with at most two distinct values it switches to a
      binary mode (netcal issue #25): with two columns it scores the second, ``p_1``, against ``1[y = 1]``,
      the positive class's calibration (for K = 2 the class-wise ECE of :func:`classwise_ece`), not the
      top-label confidence this function scores; with more columns it raises. With more than two classes
      and labels, away from edges, it agrees.
    - scikit-learn has no ECE; ``calibration_curve`` is binary (positive-class probability, not top-label),
      defaults to 5 bins and drops empty bins.
    """
    n_bins = check_binning_args(n_bins, binning, norm, estimator)
    _, y, pred, conf = as_probs_labels_top(probs, labels, dtype=None)
    return binned_error(bin_top_label(conf, pred == y, n_bins, binning), norm, estimator)


def top_label_ece(conf, correct, n_bins: int = 15, binning: str = "uniform", norm: str = "l1",
                  estimator: str = "bin", check: bool = True) -> float:
    """:func:`ece` of given top-label confidences ``conf`` (N,) and outcomes ``correct`` (N,), the same bins.

    ``ece(probs, labels, ...)`` is ``top_label_ece(probs.max(1), probs.argmax(1) == labels, ...)``; this entry
    point serves callers that get the confidences without forming the probabilities (temperature scaling's
    grid search in :mod:`calib.posthoc`). ``check=False`` skips the input checks for arrays calib computed
    itself (float64 confidences in [0, 1], boolean outcomes).
    """
    if check:
        n_bins = check_binning_args(n_bins, binning, norm, estimator)
        conf = as_float_array(conf, "conf", ndim=1)
        if conf.size == 0 or conf.min() < 0 or conf.max() > 1:
            raise ValueError("conf must be a non-empty 1-D array of confidences in [0, 1].")
        correct = np.asarray(to_numpy(correct, "correct"), dtype=bool)   # a tensor on any device, too
        check_length(correct, conf.shape[0], "correct", of="confidences")
        conf = conf + 0.0  # -0.0 -> +0.0
    return binned_error(bin_top_label(conf, correct, n_bins, binning), norm, estimator)


def top_label_outcomes(probs, labels) -> np.ndarray:
    """What every top-label metric reads of each sample: an (N, 2) float64 array of the top-label confidence and
    the outcome (1.0 when the top class is the label; the first maximum on ties, as :func:`ece`).

    ``ece(probs, labels, ...)`` is ``top_label_ece(s[:, 0], s[:, 1] > 0, ...)`` of ``s = top_label_outcomes(probs,
    labels)``, and so are the AdaECE and the MCE with their binning and norm; the error is ``1 - s[:, 1].mean()``.
    A bootstrap over test samples resamples these rows instead of the (N, K) probabilities
    (:func:`calib.stats.kendall_tau_bootstrap`'s ``per_sample``; chapter 11).
    """
    _, y, pred, conf = as_probs_labels_top(probs, labels, dtype=None)
    return np.column_stack([conf, pred == y]).astype(np.float64)


def top_label_bins(conf, n_bins: int = 15, binning: str = "uniform") -> np.ndarray:
    """The bin of each top-label confidence, as :func:`ece`, :func:`top_label_ece` and :func:`reliability` bin it.

    Equal-width bins are right-closed, ``((i-1)/M, i/M]`` with a confidence of 0 in the first, decided against the
    float edges ``i / M``; equal-mass bins cut the sorted confidences by position into the sizes of
    ``np.array_split`` (module docstring). Of equal confidences that straddle an equal-mass cut, the earlier rows
    go to the lower bin; which ones do cannot change a statistic of the confidences per bin (the bins' counts and
    sums are those of :func:`ece`). :func:`calib.simulate.calibrated_ece_bias` computes the exact expected ECE of
    a calibrated model from these bins.

    Parameters
    ----------
    conf : array_like or torch.Tensor, shape (N,)
        Top-label confidences in [0, 1] (``probs.max(1)``), N >= 1.
    n_bins : int, default 15
        M >= 1.
    binning : {"uniform", "quantile"}, default "uniform"
        Equal-width or equal-mass bins.

    Returns
    -------
    numpy.ndarray of int64, shape (N,)
        The bin of ``conf[i]``, in 0 .. M - 1 (an equal-mass bin is empty when N < M).
    """
    n_bins = check_binning_args(n_bins, binning)
    conf = as_float_array(conf, "conf", ndim=1)
    if conf.size == 0 or conf.min() < 0 or conf.max() > 1:
        raise ValueError("conf must be a non-empty 1-D array of confidences in [0, 1]; pass probs.max(1).")
    conf = conf + 0.0  # -0.0 -> +0.0
    if binning == "uniform":
        return uniform_bin(conf, n_bins, uniform_edges(n_bins)).astype(np.int64)
    bins = np.empty(conf.shape[0], dtype=np.int64)
    bins[np.argsort(conf, kind="stable")] = np.repeat(np.arange(n_bins), quantile_sizes(conf.shape[0], n_bins))
    return bins


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

    :math:`\max_b |A_b - C_b|` over the non-empty equal-width bins. torchmetrics (``norm="max"``, to its
    float32 sums) and netcal's ``MCE`` (with more than two classes) agree away from bin edges and from
    confidence 1.0 (see :func:`ece` for how they bin).

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
    n_bins = check_binning_args(n_bins, binning, norm if rho is None else None)
    p, y, _, _ = as_probs_labels_top(probs, labels, dtype=None)  # float32 stays float32; blocks go to float64
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
    edges = uniform_edges(n_bins)
    offset = np.arange(k) * n_bins  # flat index = class * M + bin
    size = k * n_bins
    counts = np.zeros(size, dtype=np.int64)
    conf_sum = np.zeros(size)
    hits = np.zeros(size, dtype=np.int64)
    rows = max(1, _binning.BLOCK_ELEMENTS // k)
    for s in range(0, n, rows):
        block = p[s:s + rows].astype(np.float64, copy=False)
        flat = uniform_bin(block, n_bins, edges)
        flat += offset
        counts += np.bincount(flat.ravel(), minlength=size)
        conf_sum += np.bincount(flat.ravel(), weights=block.ravel(), minlength=size)
        hits += np.bincount(flat[np.arange(block.shape[0]), y[s:s + rows]], minlength=size)
    return counts, conf_sum, hits


def _classwise_quantile(p: np.ndarray, y: np.ndarray, n_bins: int):
    n, k = p.shape
    sizes = quantile_sizes(n, n_bins)
    full = sizes > 0
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])[full]
    counts = np.tile(sizes, k)
    conf_sum = np.zeros((k, n_bins))
    hits = np.zeros((k, n_bins))
    per_block = max(1, (4 * _binning.BLOCK_ELEMENTS) // n)  # classes sorted together
    by_class = np.argsort(y, kind="stable")
    class_start = np.searchsorted(y[by_class], np.arange(k + 1))
    for k0 in range(0, k, per_block):
        k1 = min(k, k0 + per_block)
        x = p[:, k0:k1].T.astype(np.float64, order="C")  # (classes, N), always a copy: sorted in place below
        x += 0.0  # -0.0 -> +0.0, so that the bit patterns sort as the values
        key = x.view(np.int64)
        key <<= 1
        mine = by_class[class_start[k0]:class_start[k1]]  # the samples whose label is in this block
        key[y[mine] - k0, mine] |= 1  # the outcome 1[y = k] in the lowest bit
        x, hit, _ = sorted_rows_tie_mean(key, n_bins)
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
    n_bins = check_binning_args(n_bins, binning)
    _, y, pred, conf = as_probs_labels_top(probs, labels, dtype=None)
    b = bin_top_label(conf, pred == y, n_bins, binning)
    full = b.counts > 0
    mean_conf = np.full(n_bins, np.nan)
    mean_acc = np.full(n_bins, np.nan)
    mean_conf[full] = b.conf_sum[full] / b.counts[full]
    mean_acc[full] = b.hits[full] / b.counts[full]
    arrays = (np.asarray(b.edges, dtype=np.float64), np.asarray(b.counts, dtype=np.int64), mean_conf, mean_acc)
    for a in arrays:
        a.flags.writeable = False
    return Reliability(*arrays, n=int(conf.shape[0]))
