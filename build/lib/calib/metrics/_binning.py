"""The binning kernels of the binned metrics: equal-width and equal-mass bins, ties, the per-bin sums.

Private to :mod:`calib.metrics`: :mod:`calib.metrics.binned` and :mod:`calib.metrics.scores` import it, nothing
outside ``calib.metrics`` does. The conventions they implement (right-closed equal-width bins on the floats
``i / M``, equal-mass cuts of ``np.array_split`` sizes, tied confidences counted with their group's mean outcome)
are stated in :mod:`calib.metrics.binned`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from calib._validate import check_choice, check_int

BINNINGS = ("uniform", "quantile")
NORMS = ("l1", "l2", "max")
ESTIMATORS = ("bin", "label")

#: Row blocks of this many entries (256 KiB of float64) for the (N, K)-sized loops: the temporaries of a
#: block stay in the L2 cache (measured: 2**15 is about 1.6x faster than 2**18 for classwise_ece).
BLOCK_ELEMENTS = 1 << 15


def uniform_edges(n_bins: int) -> np.ndarray:
    """Edges ``i / M`` for i = 0..M, each the correctly rounded float (not ``i * (1/M)`` as linspace gives)."""
    return np.arange(n_bins + 1) / n_bins


def uniform_bin(x: np.ndarray, n_bins: int, edges: np.ndarray) -> np.ndarray:
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


def sorted_pairs(x: np.ndarray, flag: np.ndarray):
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


def tie_mean(x: np.ndarray, flag: np.ndarray, row_len: int | None = None) -> np.ndarray:
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


def quantile_sizes(n: int, n_bins: int) -> np.ndarray:
    """Bin sizes of ``np.array_split(range(n), n_bins)``: the first ``n % n_bins`` one larger."""
    q, r = divmod(n, n_bins)
    sizes = np.full(n_bins, q, dtype=np.int64)
    sizes[:r] += 1
    return sizes


def quantile_edges(x_sorted: np.ndarray, sizes: np.ndarray) -> np.ndarray:
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


def sorted_rows_tie_mean(key: np.ndarray, n_bins: int):
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
    hit = tie_mean(x.ravel(), hit.ravel(), row_len=n).reshape(r, n)
    sizes = quantile_sizes(n, n_bins)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])[sizes > 0]
    return x, hit, starts



@dataclass(frozen=True)
class Bins:
    counts: np.ndarray     # (M,) samples per bin
    conf_sum: np.ndarray   # (M,) sum of confidences per bin
    hits: np.ndarray       # (M,) number of correct predictions (positive outcomes) per bin; with equal-mass
                           # bins, tied samples count with their group's mean outcome (module docstring)
    member_x: np.ndarray   # (N,) confidence of each sample, in the order of member_bin
    member_bin: np.ndarray  # (N,) bin of each sample
    edges: np.ndarray      # (M + 1,)


def bin_top_label(conf: np.ndarray, correct: np.ndarray, n_bins: int, binning: str) -> Bins:
    if binning == "uniform":
        edges = uniform_edges(n_bins)
        idx = uniform_bin(conf, n_bins, edges)
        counts = np.bincount(idx, minlength=n_bins)
        conf_sum = np.bincount(idx, weights=conf, minlength=n_bins)
        hits = np.bincount(idx[correct], minlength=n_bins)
        return Bins(counts, conf_sum, hits, conf, idx, edges)
    x, flag = sorted_pairs(conf, correct)
    sizes = quantile_sizes(x.shape[0], n_bins)
    idx = np.repeat(np.arange(n_bins), sizes)
    conf_sum = np.bincount(idx, weights=x, minlength=n_bins)
    hits = np.bincount(idx, weights=tie_mean(x, flag), minlength=n_bins)
    return Bins(sizes, conf_sum, hits, x, idx, quantile_edges(x, sizes))


def binned_error(b: Bins, norm: str, estimator: str) -> float:
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


def check_binning_args(n_bins, binning, norm=None, estimator=None) -> int:
    n_bins = check_int(n_bins, "n_bins", minimum=1)
    check_choice(binning, "binning", BINNINGS)
    if norm is not None:
        check_choice(norm, "norm", NORMS)
    if estimator is not None:
        check_choice(estimator, "estimator", ESTIMATORS)
    return n_bins
