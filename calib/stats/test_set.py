"""The test set's own sampling noise in an interval over seeds. Part of :mod:`calib.stats`.

The seeds of a grid are scored on one fixed test set. The mean over seeds of a metric (or of a paired difference of
two settings' metrics) then carries two errors: the seeds' (training randomness, estimated by the spread of the
per-seed values) and the test set's (which 10,000 images were drawn; common to every seed, so the spread over seeds
does not show it). For a 5-seed mean ECE difference on 10,000 test images the second is about as large as the first
(issue 41). :func:`seed_test_interval` adds both:

    se² = s²_seeds / n + Var_test(mean over seeds),

the second estimated by a bootstrap over the test samples in which every seed and both settings see the same
resample (so the pairing is kept), and builds the Student-t interval with n - 1 degrees of freedom on it
(:func:`calib.stats.intervals.seed_interval`'s ``test_variance``).

A resample is a vector of counts (how often each test sample is drawn), and a metric is given as a *statistic* that
can be evaluated at many count vectors at once:

- :class:`AdditiveStatistic`: a metric that is a function of sums over the samples (accuracy, NLL, Brier, mean
  confidence, equal-width binned ECE): one matrix product evaluates every resample (``calib.metrics.statistic``
  builds them);
- :class:`ResampledStatistic`: any metric of per-sample rows (equal-mass ECE, whose bins move with the resample),
  recomputed resample by resample.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from calib.stats.intervals import Interval, check_level, seed_interval

__all__ = ["AdditiveStatistic", "ResampledStatistic", "RememberedStatistic", "bootstrap_counts", "sampling_variance",
           "seed_test_interval", "resampled_variance", "N_RESAMPLES"]

#: Test-set resamples behind a variance. The variance's own relative error is about sqrt(2 / 400) = 7 %, which moves
#: an interval's half-width by about 2 % when the two variances are equal.
N_RESAMPLES = 400


@dataclass(frozen=True)
class AdditiveStatistic:
    """A metric of the form ``finish(sums, total)``: ``sums`` the per-sample ``columns`` (N, c) summed with each
    resample's counts, ``total`` the number of samples drawn. ``finish`` maps (B, c) sums and (B,) totals to B
    values."""

    columns: np.ndarray
    finish: Callable[[np.ndarray, np.ndarray], np.ndarray]

    @property
    def n(self) -> int:
        """The number of test samples."""
        return int(self.columns.shape[0])

    @property
    def value(self) -> float:
        """The metric on the whole test set."""
        return float(self.finish(self.columns.sum(axis=0)[None, :], np.array([float(self.n)]))[0])

    def resampled(self, counts: np.ndarray) -> np.ndarray:
        """The metric at each row of ``counts`` (B, N): one matrix product."""
        return np.asarray(self.finish(counts @ self.columns, counts.sum(axis=1)), dtype=np.float64)


@dataclass(frozen=True)
class ResampledStatistic:
    """Any metric of per-sample ``rows`` (N, ...): ``metric(rows)`` on the whole test set, and on the rows a resample
    draws (each row repeated as often as it is drawn), one resample at a time."""

    rows: np.ndarray
    metric: Callable[[np.ndarray], float]

    @property
    def n(self) -> int:
        """The number of test samples."""
        return int(len(self.rows))

    @property
    def value(self) -> float:
        """The metric on the whole test set."""
        return float(self.metric(self.rows))

    def resampled(self, counts: np.ndarray) -> np.ndarray:
        """The metric at each row of ``counts`` (B, N), one resample at a time."""
        index = np.arange(self.n)
        return np.array([self.metric(self.rows[np.repeat(index, row.astype(np.int64))]) for row in counts])


class RememberedStatistic:
    """A statistic that keeps its values at the resamples it was last asked for, so that the several intervals one
    run enters (against several others) evaluate it once: the counts of :func:`bootstrap_counts` are one read-only
    array per (n, resamples, seed), and the values are reused only when asked at that same read-only array."""

    def __init__(self, base):
        if not hasattr(base, "resampled") or not hasattr(base, "value"):
            raise ValueError(f"base must be a statistic (AdditiveStatistic, ResampledStatistic or "
                             f"calib.metrics.statistic's); got {type(base).__name__}.")
        self._base, self._counts, self._kept = base, None, None
        self.n, self.value = base.n, base.value

    def resampled(self, counts: np.ndarray) -> np.ndarray:
        """The base statistic at each row of ``counts``, computed once for the same read-only counts."""
        if counts is self._counts and not counts.flags.writeable:
            return self._kept
        values = np.asarray(self._base.resampled(counts), dtype=np.float64)
        if not counts.flags.writeable:
            self._counts, self._kept = counts, values
        return values


def bootstrap_counts(n: int, n_resamples: int = N_RESAMPLES, seed: int = 0) -> np.ndarray:
    """``n_resamples`` bootstrap resamples of ``n`` test samples as counts: a (B, n) float64 array whose rows sum to
    ``n`` (row b counts how often each sample is drawn in resample b). The same arguments give the same array, read
    only and computed once a process (a chapter's intervals share one test set's resamples: 400 x 10,000 counts take
    0.1 s to draw)."""
    if int(n) != n or n < 2:
        raise ValueError(f"n must be a number of test samples >= 2; got {n}.")
    if int(n_resamples) != n_resamples or n_resamples < 50:
        raise ValueError(f"n_resamples must be an integer >= 50 ({N_RESAMPLES} is usual); got {n_resamples}.")
    if int(seed) != seed:
        raise ValueError(f"seed must be an integer; got {seed}.")
    return _counts(int(n), int(n_resamples), int(seed))


@functools.lru_cache(maxsize=4)
def _counts(n: int, b: int, seed: int) -> np.ndarray:
    draws = np.random.default_rng(seed).integers(0, n, size=(b, n))
    draws += (np.arange(b) * n)[:, None]
    counts = np.bincount(draws.ravel(), minlength=b * n).reshape(b, n).astype(np.float64)
    counts.flags.writeable = False
    return counts


def _check_statistics(statistics, name: str) -> list:
    stats = list(statistics)
    if not stats:
        raise ValueError(f"{name} is empty; give one statistic per seed (calib.metrics.statistic).")
    bad = [type(s).__name__ for s in stats if not hasattr(s, "resampled") or not hasattr(s, "value")]
    if bad:
        raise ValueError(f"{name} must hold statistics (calib.metrics.statistic, calib.stats.test_set."
                         f"AdditiveStatistic or ResampledStatistic), one per seed; got {bad[0]}.")
    sizes = {s.n for s in stats}
    if len(sizes) != 1:
        raise ValueError(f"{name}'s statistics are of test sets of different sizes {sorted(sizes)}; every seed must be "
                         "scored on the same test set.")
    return stats


def _check_pair(a, b):
    a = _check_statistics(a, "a")
    if b is None:
        return a, None
    b = _check_statistics(b, "b")
    if len(b) != len(a):
        raise ValueError(f"a and b must hold one statistic per seed for the same seeds; got {len(a)} and {len(b)}.")
    if b[0].n != a[0].n:
        raise ValueError(f"a's and b's statistics are of test sets of different sizes ({a[0].n} and {b[0].n}); both "
                         "settings must be scored on the same test set.")
    return a, b


def sampling_variance(a: Sequence, b: Sequence | None = None, n_resamples: int = N_RESAMPLES, seed: int = 0) -> float:
    """The variance, over bootstrap resamples of the test set, of the mean over seeds of ``a``'s metric (minus
    ``b``'s, seed by seed: the same resample for every seed and both settings, so the pairing is kept).

    ``a`` and ``b`` hold one statistic per seed, all of the same test set."""
    a, b = _check_pair(a, b)
    counts = bootstrap_counts(a[0].n, n_resamples, seed)
    total = np.zeros(counts.shape[0])
    for i, s in enumerate(a):
        total += s.resampled(counts)
        if b is not None:
            total -= b[i].resampled(counts)
    return float(np.var(total / len(a), ddof=1))


def seed_test_interval(a: Sequence, b: Sequence | None = None, level: float = 0.95, n_resamples: int = N_RESAMPLES,
                       seed: int = 0) -> Interval:
    """The book's interval of an effect over seeds on one test set: the mean over seeds of ``a``'s metric (paired:
    minus ``b``'s) with a Student-t interval whose standard error adds the seeds' spread and the test set's
    sampling variance (module docstring). ``a`` (and ``b``) hold one statistic per seed, of the same test set."""
    level = check_level(level)
    a, b = _check_pair(a, b)
    values = np.array([s.value for s in a])
    if b is not None:
        values = values - np.array([s.value for s in b])
    variance = sampling_variance(a, b, n_resamples, seed)
    out = seed_interval(values, level, test_variance=variance)
    method = ("paired " if b is not None else "") + f"t-interval over seeds and test samples ({int(n_resamples)} " \
                                                    "test-set resamples)"
    return Interval(out.estimate, out.low, out.high, out.level, out.n, method, out.se, out.df)


def resampled_variance(replicates) -> float:
    """The test set's sampling variance of a mean over seeds, from the statistic's values at shared resamples:
    ``replicates`` (seeds, B) holds each seed's value (or paired difference) at each of the same B resamples of the
    test set (as :func:`calib.shift.evaluate_shift_resamples` stores them), and the variance over the resamples of
    their mean over seeds is returned: the ``test_variance`` of :func:`calib.stats.seed_interval` and
    :func:`calib.stats.paired_seed_interval`. It is :func:`sampling_variance` for values computed elsewhere."""
    r = np.asarray(replicates, dtype=np.float64)
    if r.ndim != 2 or r.shape[0] < 1 or r.shape[1] < 50:
        raise ValueError(f"replicates must be (seeds, resamples) with at least 50 resamples; got shape {r.shape}.")
    if not np.all(np.isfinite(r)):
        raise ValueError("replicates hold NaN or infinite values; a severity that was not evaluated has none.")
    return float(np.var(r.mean(axis=0), ddof=1))
