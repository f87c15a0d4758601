"""Intervals of an effect over seeds: the seed is the unit of replication, and the test set's own sampling variance
can be added to every interval (:mod:`calib.stats.test_set` estimates it). Part of :mod:`calib.stats`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
from scipy import stats as _scipy_stats

from calib._validate import as_labels, as_scores, to_numpy

__all__ = ["Interval", "seed_interval", "paired_seed_interval", "paired_bootstrap", "check_level", "seed_values",
           "DIRECTIONS", "ALTERNATIVES"]

#: The sides a claimed effect can lie on ("the effect is greater / less than the threshold").
DIRECTIONS = ("greater", "less")
#: The alternatives of a test that may also be two-sided (:func:`calib.stats.effects.sign_test`).
ALTERNATIVES = ("greater", "less", "two-sided")


@dataclass(frozen=True)
class Interval:
    """An estimate with a two-sided confidence interval; ``se`` and ``df`` are the standard error and degrees of
    freedom of a t-interval (None for a percentile bootstrap), from which :meth:`p_value` gives one-sided p-values."""

    estimate: float
    low: float
    high: float
    level: float
    n: int
    method: str
    se: float | None = None
    df: float | None = None

    def __str__(self) -> str:
        return (f"{self.estimate:.4g} [{self.low:.4g}, {self.high:.4g}] "
                f"({self.level:.0%} {self.method}, n = {self.n})")

    def brief(self, digits: int = 3, scale: float = 1.0) -> str:
        """``estimate [low, high]`` with ``digits`` decimals, each multiplied by ``scale`` (100: percent)."""
        return (f"{scale * self.estimate:.{digits}f} [{scale * self.low:.{digits}f}, "
                f"{scale * self.high:.{digits}f}]")

    def p_value(self, direction: str = "greater", threshold: float = 0.0) -> float | None:
        """One-sided p-value of "the effect is ``direction`` than ``threshold``" (the null hypothesis is the other
        side), from the t distribution the interval was built with; None for an interval without ``se`` (a percentile
        bootstrap). ``p <= (1 - level) / 2`` exactly when the interval lies wholly beyond ``threshold``."""
        if direction not in DIRECTIONS:
            raise ValueError(f"direction={direction!r} is not supported; choose 'greater' or 'less'.")
        if self.se is None or self.df is None:
            return None
        gap = (self.estimate - float(threshold)) * (1.0 if direction == "greater" else -1.0)
        if self.se == 0.0:
            return 0.0 if gap > 0 else 1.0
        return float(_scipy_stats.t.sf(gap / self.se, self.df))


def check_level(level) -> float:
    """``level`` as a float in (0, 1), or a ValueError saying so (0.95 is the book's level)."""
    level = float(level)
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must lie in (0, 1), e.g. 0.95; got {level}.")
    return level


def seed_values(values, name: str) -> np.ndarray:
    """``values`` as a float64 array of one finite number per seed, at least 2; a ValueError naming ``name``
    otherwise (a diverged run's NaN is refused: it must be rerun or reported, not averaged)."""
    arr = np.asarray(to_numpy(values, name), dtype=np.float64)   # a tensor on any device, with grad, too
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one number per seed (a 1-D sequence); got shape {arr.shape}.")
    if arr.size < 2:
        raise ValueError(f"{name} has {arr.size} value(s); an interval over seeds needs at least 2 seeds "
                         "(run 3 or more).")
    if not np.isfinite(arr).all():
        raise ValueError(f"{name} holds NaN or infinite values (at positions {np.flatnonzero(~np.isfinite(arr))}); "
                         "a diverged run must be rerun or reported, not averaged.")
    return arr


def seed_interval(values: Sequence[float] | np.ndarray, level: float = 0.95, test_variance: float = 0.0) -> Interval:
    """Student-t interval of the mean of ``values`` (one per seed).

    ``mean ± t_{(1+level)/2, n-1} · se`` with ``se = sqrt(s² / n + test_variance)``, ``s`` the sample standard
    deviation over seeds (ddof = 1) and ``test_variance`` the variance of the seed mean that the test set's own
    sampling adds (:func:`calib.stats.test_set.seed_test_interval` estimates it; 0: the test set is taken as fixed).
    With ``test_variance = 0`` it is ``scipy.stats.t.interval(level, n - 1, mean, sem)``; with zero spread and no test
    variance the interval is the point.
    """
    level = check_level(level)
    arr = seed_values(values, "values")
    test_variance = _check_test_variance(test_variance)
    n = arr.size
    mean = float(arr.mean())
    se = float(np.sqrt(arr.var(ddof=1) / n + test_variance))
    half = float(_scipy_stats.t.ppf(0.5 + level / 2, n - 1) * se)
    method = "t-interval over seeds" + (" and test samples" if test_variance > 0 else "")
    return Interval(mean, mean - half, mean + half, level, n, method, se, float(n - 1))


def paired_seed_interval(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray, level: float = 0.95,
                         test_variance: float = 0.0) -> Interval:
    """Student-t interval of the mean of ``a[i] - b[i]``: two settings run on the same seeds (and, with
    ``test_variance``, the test set's sampling variance of the mean difference added, as in :func:`seed_interval`)."""
    a = seed_values(a, "a")
    b = seed_values(b, "b")
    if a.shape != b.shape:
        raise ValueError(f"a and b must hold one value per seed for the same seeds; got {a.size} and {b.size}.")
    out = seed_interval(a - b, level, test_variance)
    method = "paired t-interval over seeds" + (" and test samples" if test_variance > 0 else "")
    return Interval(out.estimate, out.low, out.high, out.level, out.n, method, out.se, out.df)


def _check_test_variance(value) -> float:
    value = float(value)
    if not np.isfinite(value) or value < 0:
        raise ValueError(f"test_variance must be a finite variance >= 0 (0: the test set taken as fixed); got {value}.")
    return value


def paired_bootstrap(metric: Callable, probs_a, probs_b, labels, n_resamples: int = 2000, level: float = 0.95,
                     seed: int = 0) -> Interval:
    """Percentile bootstrap interval of ``metric(probs_a, labels) - metric(probs_b, labels)`` over test samples.

    Each resample draws N indices with replacement and evaluates both models on the same indices, so the
    interval is that of the *difference* on one test set. ``metric`` is any ``(probs, labels) -> float`` of
    :mod:`calib.metrics`; the estimate is the difference on the full test set.
    """
    level = check_level(level)
    if int(n_resamples) != n_resamples or n_resamples < 100:
        raise ValueError(f"n_resamples must be an integer >= 100 (2000 is usual); got {n_resamples}.")
    # checked as calib's metrics check them (tensors on any device, with grad, too): finite probabilities whose rows
    # sum to 1, integer labels in [0, K); a NaN gave a NaN interval, and a label -1 indexed the last class
    probs_a = as_scores(probs_a, "probs_a", kind="probs")
    probs_b = as_scores(probs_b, "probs_b", kind="probs")
    if probs_a.shape != probs_b.shape:
        raise ValueError(f"probs_a and probs_b must both have shape (N, K); got {probs_a.shape} and {probs_b.shape}.")
    labels = to_numpy(labels, "labels")
    if labels.shape != (probs_a.shape[0],):
        raise ValueError(f"labels must have shape ({probs_a.shape[0]},) to match probs; got {labels.shape}.")
    labels = as_labels(labels, "labels", n=probs_a.shape[0], n_classes=probs_a.shape[1])
    rng = np.random.default_rng(seed)
    n = labels.size
    diffs = np.empty(int(n_resamples))
    for i in range(int(n_resamples)):
        idx = rng.integers(0, n, n)
        diffs[i] = metric(probs_a[idx], labels[idx]) - metric(probs_b[idx], labels[idx])
    estimate = float(metric(probs_a, labels) - metric(probs_b, labels))
    if not (np.isfinite(estimate) and np.isfinite(diffs).all()):
        where = "on the whole test set" if not np.isfinite(estimate) else \
            f"on {int((~np.isfinite(diffs)).sum())} of the {int(n_resamples)} resamples"
        raise ValueError(f"metric's difference between the two models is not finite {where} (a metric that is "
                         f"infinite or NaN, e.g. the NLL of a label given probability 0); an interval of it has no "
                         f"meaning. Check the probabilities, or bound the metric.")
    low, high = np.quantile(diffs, [0.5 - level / 2, 0.5 + level / 2])
    return Interval(estimate, float(low), float(high), level, n, f"paired bootstrap over test samples, "
                                                                 f"{int(n_resamples)} resamples")
