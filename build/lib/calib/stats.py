"""Intervals for empirical claims, and the rule that turns an interval into a verdict.

One implementation for every chapter (ARCHITECTURE.md, "The library's layers", layer 0). An empirical claim of a
paper ("focal loss lowers the ECE", "the ECE rises after the learning-rate drop") is judged from several seeds,
never from one run:

- :func:`seed_interval`: Student-t interval of a mean over seeds (one number per seed);
- :func:`paired_seed_interval`: Student-t interval of the mean difference of two settings run on the same
  seeds (the pairing removes the seed-to-seed variation the two share);
- :func:`paired_bootstrap`: percentile bootstrap of ``metric(a) - metric(b)`` over the test samples, with one
  resample of the indices shared by both models (the sampling noise of a single test set);
- :func:`decide`: the rule. A claim "the effect exceeds ``threshold``" *holds* when the whole interval lies above
  the threshold, is *not reproduced* when the whole interval lies below it, and is *inconclusive* otherwise.
  The threshold is the smallest effect that means something: zero for a sign, or, for an ECE change, the
  finite-sample bias of binned ECE at that N (chapter 01).
- :func:`combine`: the verdict of a claim made of several parts (an ordering CE > FL-1 > FL-2 > FL-3);
- :func:`cohens_d`: the standardised difference of two means from their summary statistics, the effect size a
  paper reports when it states "a large effect" (Karandikar et al. 2021, Fig. 1).

The verdict words are those of the book's claims ledger (``calib_book.claims``, ARCHITECTURE.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
from scipy import stats as _scipy_stats

DIRECTIONS = ("greater", "less")


@dataclass(frozen=True)
class Interval:
    """An estimate with a two-sided confidence interval."""

    estimate: float
    low: float
    high: float
    level: float
    n: int
    method: str

    def __str__(self) -> str:
        return (f"{self.estimate:.4g} [{self.low:.4g}, {self.high:.4g}] "
                f"({self.level:.0%} {self.method}, n = {self.n})")

    def brief(self, digits: int = 3, scale: float = 1.0) -> str:
        """``estimate [low, high]`` with ``digits`` decimals, each multiplied by ``scale`` (100: percent)."""
        return (f"{scale * self.estimate:.{digits}f} [{scale * self.low:.{digits}f}, "
                f"{scale * self.high:.{digits}f}]")


@dataclass(frozen=True)
class Decision:
    """The verdict an interval gives a claim "the effect is ``direction`` than ``threshold``"."""

    verdict: str
    interval: Interval
    direction: str
    threshold: float

    def __str__(self) -> str:
        sign = ">" if self.direction == "greater" else "<"
        return f"{self.verdict}: effect {self.interval}; claimed {sign} {self.threshold:.4g}"


def _check_level(level) -> float:
    level = float(level)
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must lie in (0, 1), e.g. 0.95; got {level}.")
    return level


def _as_values(values, name: str) -> np.ndarray:
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one number per seed (a 1-D sequence); got shape {arr.shape}.")
    if arr.size < 2:
        raise ValueError(f"{name} has {arr.size} value(s); an interval over seeds needs at least 2 seeds "
                         "(run 3 or more).")
    if not np.isfinite(arr).all():
        raise ValueError(f"{name} holds NaN or infinite values (at positions {np.flatnonzero(~np.isfinite(arr))}); "
                         "a diverged run must be rerun or reported, not averaged.")
    return arr


def seed_interval(values: Sequence[float], level: float = 0.95) -> Interval:
    """Student-t interval of the mean of ``values`` (one per seed).

    ``mean ± t_{(1+level)/2, n-1} · s / sqrt(n)`` with ``s`` the sample standard deviation (ddof = 1); the
    same interval as ``scipy.stats.t.interval(level, n - 1, mean, sem)``. With zero spread the interval is
    the point.
    """
    level = _check_level(level)
    arr = _as_values(values, "values")
    n = arr.size
    mean = float(arr.mean())
    sem = float(arr.std(ddof=1) / np.sqrt(n))
    half = float(_scipy_stats.t.ppf(0.5 + level / 2, n - 1) * sem)
    return Interval(mean, mean - half, mean + half, level, n, "t-interval over seeds")


def paired_seed_interval(a: Sequence[float], b: Sequence[float], level: float = 0.95) -> Interval:
    """Student-t interval of the mean of ``a[i] - b[i]``: two settings run on the same seeds."""
    a = _as_values(a, "a")
    b = _as_values(b, "b")
    if a.shape != b.shape:
        raise ValueError(f"a and b must hold one value per seed for the same seeds; got {a.size} and {b.size}.")
    out = seed_interval(a - b, level)
    return Interval(out.estimate, out.low, out.high, out.level, out.n, "paired t-interval over seeds")


def paired_bootstrap(metric: Callable, probs_a, probs_b, labels, n_resamples: int = 2000, level: float = 0.95,
                     seed: int = 0) -> Interval:
    """Percentile bootstrap interval of ``metric(probs_a, labels) - metric(probs_b, labels)`` over test samples.

    Each resample draws N indices with replacement and evaluates both models on the same indices, so the
    interval is that of the *difference* on one test set. ``metric`` is any ``(probs, labels) -> float`` of
    :mod:`calib.metrics`; the estimate is the difference on the full test set.
    """
    level = _check_level(level)
    if int(n_resamples) != n_resamples or n_resamples < 100:
        raise ValueError(f"n_resamples must be an integer >= 100 (2000 is usual); got {n_resamples}.")
    probs_a = np.asarray(probs_a, dtype=np.float64)
    probs_b = np.asarray(probs_b, dtype=np.float64)
    labels = np.asarray(labels)
    if probs_a.shape != probs_b.shape or probs_a.ndim != 2:
        raise ValueError(f"probs_a and probs_b must both have shape (N, K); got {probs_a.shape} and {probs_b.shape}.")
    if labels.shape != (probs_a.shape[0],):
        raise ValueError(f"labels must have shape ({probs_a.shape[0]},) to match probs; got {labels.shape}.")
    rng = np.random.default_rng(seed)
    n = labels.size
    diffs = np.empty(int(n_resamples))
    for i in range(int(n_resamples)):
        idx = rng.integers(0, n, n)
        diffs[i] = metric(probs_a[idx], labels[idx]) - metric(probs_b[idx], labels[idx])
    low, high = np.quantile(diffs, [0.5 - level / 2, 0.5 + level / 2])
    estimate = float(metric(probs_a, labels) - metric(probs_b, labels))
    return Interval(estimate, float(low), float(high), level, n, f"paired bootstrap over test samples, "
                                                                 f"{int(n_resamples)} resamples")


def decide(interval: Interval, direction: str = "greater", threshold: float = 0.0) -> Decision:
    """The verdict of the claim "the effect is ``direction`` than ``threshold``", from its interval.

    - ``"holds"``: the whole interval lies beyond the threshold on the claimed side;
    - ``"not-reproduced"``: the whole interval lies on the other side (the effect is absent, reversed, or
      smaller than the threshold that makes it mean something);
    - ``"inconclusive"``: the interval contains the threshold.
    """
    if direction not in DIRECTIONS:
        raise ValueError(f"direction={direction!r} is not supported; choose 'greater' or 'less'.")
    if not isinstance(interval, Interval):
        raise ValueError(f"interval must be a calib.stats.Interval; got {type(interval).__name__}.")
    threshold = float(threshold)
    if not np.isfinite(threshold):
        raise ValueError(f"threshold must be finite; got {threshold}.")
    low, high = (interval.low, interval.high) if direction == "greater" else (-interval.high, -interval.low)
    t = threshold if direction == "greater" else -threshold
    verdict = "holds" if low > t else ("not-reproduced" if high < t else "inconclusive")
    return Decision(verdict, interval, direction, threshold)


def combine(decisions: Sequence[Decision]) -> str:
    """The verdict of a claim that needs every part: holds if all hold, not-reproduced if any part is not
    reproduced, inconclusive otherwise."""
    verdicts = [d.verdict for d in decisions]
    if not verdicts:
        raise ValueError("decisions is empty; pass the Decision of each part of the claim.")
    if all(v == "holds" for v in verdicts):
        return "holds"
    if any(v == "not-reproduced" for v in verdicts):
        return "not-reproduced"
    return "inconclusive"


def cohens_d(mean_a, sd_a, mean_b, sd_b):
    """Cohen's d of two groups of equal size from their summary statistics: ``(mean_a - mean_b) / s_pooled``.

    ``s_pooled = sqrt((sd_a**2 + sd_b**2) / 2)``, the pooled standard deviation of two groups of the same size
    (Cohen 1988, *Statistical Power Analysis for the Behavioral Sciences*, Sec. 2.2.1). It is what a paper's
    table of means and standard deviations (or standard errors times sqrt(n)) allows: Karandikar et al. (2021)
    rank their secondary losses by it in Fig. 1. By Cohen's convention d = 0.2 is small, 0.5 medium, 0.8 large.

    Parameters
    ----------
    mean_a, sd_a, mean_b, sd_b : array_like
        Means and standard deviations (ddof = 1) of the two groups; broadcast against each other, so one call
        gives the d of many settings.

    Returns
    -------
    float or numpy.ndarray
        d, positive when group a has the larger mean; a float for scalar inputs.
    """
    mean_a, sd_a, mean_b, sd_b = (np.asarray(x, dtype=np.float64) for x in (mean_a, sd_a, mean_b, sd_b))
    if np.any(sd_a < 0) or np.any(sd_b < 0):
        raise ValueError("sd_a and sd_b are standard deviations and must be >= 0.")
    pooled = np.sqrt((sd_a ** 2 + sd_b ** 2) / 2)
    if np.any(pooled == 0):
        raise ValueError("both standard deviations are 0 for some setting: Cohen's d is undefined there.")
    d = (mean_a - mean_b) / pooled
    return float(d) if d.ndim == 0 else d
