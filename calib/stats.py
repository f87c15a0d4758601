"""Intervals for empirical claims, and the one rule that turns them into a verdict.

One implementation for every chapter (ARCHITECTURE.md, "The library's layers", layer 0). An empirical claim of a
paper ("focal loss lowers the ECE", "the ECE rises after the learning-rate drop") is judged from several seeds,
never from one run.

**The decision rule, one for the whole book.** A paired comparison (two settings run on the same seeds, or
scored on the same test samples) is decided by the 95 % interval of the paired difference, with :func:`decide`:

- against **0** when the claim is a sign ("focal loss lowers the ECE");
- against a **practical margin** when the claim needs an effect that matters: the margin is stated before the run,
  is the same for every claim of its kind, and is read from :data:`MARGINS` (:func:`margin`), never computed from
  the runs being judged.

The claim *holds* when the whole interval lies beyond the threshold on the claimed side, is *not reproduced* when
the whole interval lies on the other side, and is *inconclusive* otherwise. The finite-sample bias of binned ECE
(``calib.simulate.calibrated_ece_bias``, chapter 01) is a floor for a **single** ECE against 0 ("this model is
miscalibrated": its ECE exceeds what a calibrated model shows at that N); it is not a margin for a paired
difference, whose two ECEs carry nearly the same bias. A claim decided by several intervals ("lowest against every
baseline") corrects for multiplicity with Holm's step-down procedure (:func:`holm`, :func:`decide_every`).

The pieces:

- :func:`seed_interval`: Student-t interval of a mean over seeds (one number per seed);
- :func:`paired_seed_interval`: Student-t interval of the mean difference of two settings run on the same
  seeds (the pairing removes the seed-to-seed variation the two share);
- :func:`paired_bootstrap`: percentile bootstrap of ``metric(a) - metric(b)`` over the test samples, with one
  resample of the indices shared by both models (the sampling noise of a single test set);
- :func:`decide`: the rule above; :func:`combine`: the verdict of a claim made of several parts;
- :func:`paired_t_p_value`, :func:`holm`, :func:`decide_every`: one-sided p-values of paired differences, Holm's
  adjusted p-values, and the verdict of a claim that needs every comparison;
- :func:`kendall_tau_bootstrap`: Kendall's tau between our ranking and a paper's, with a percentile bootstrap
  over test samples and seeds and the tau left when each item is left out;
- :func:`sign_test`: an exact sign test over independent units (a unit counted once), one- or two-sided;
- :func:`detectable_difference`, :func:`seeds_needed`, :func:`power_line`: the smallest paired difference our
  seeds detect with 80 % power, and how many seeds a paper's effect would need;
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
ALTERNATIVES = ("greater", "less", "two-sided")

#: The practical margins of the decision rule, by kind of paired difference, stated before any run and the same for
#: every claim of the kind (module docstring). Units are those of the metric (ECE 0.01 = 1 point).
#:
#: - ``"sign"``: 0, a claim about the direction of an effect;
#: - ``"calibration-error"``: 0, a paired difference of ECE, AdaECE, classwise ECE or KLD between two settings on
#:   the same seeds (chapter 10's rule); the binned-ECE bias is not a margin here;
#: - ``"calibration-error-parity"``: 0.005, "as low as": a paired calibration-error excess below half a point of
#:   ECE, about the binned-ECE bias of a calibrated model at N = 10,000 to 20,000 (chapter 01);
#: - ``"accuracy-parity"``: 0.01, "costs no accuracy" / "the loss trains": a paired accuracy loss below 1 point;
#: - ``"confidence"``: 0.05, "less confident": a drop of 5 points of mean or median confidence, the smallest that
#:   changes a reliability diagram's bin (15 bins of width 0.067).
MARGINS = {"sign": 0.0, "calibration-error": 0.0, "calibration-error-parity": 0.005, "accuracy-parity": 0.01,
           "confidence": 0.05}


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


def margin(kind: str) -> float:
    """The practical margin of ``kind`` from :data:`MARGINS`; a ValueError names the kinds there are."""
    if kind not in MARGINS:
        raise ValueError(f"kind={kind!r} has no stated margin; choose one of {', '.join(map(repr, MARGINS))} "
                         "(calib.stats.MARGINS), or add the kind there before the run.")
    return MARGINS[kind]


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


def paired_t_p_value(a: Sequence[float], b: Sequence[float], direction: str = "greater",
                     threshold: float = 0.0) -> float:
    """One-sided p-value of the paired t-test that the mean of ``a[i] - b[i]`` is ``direction`` than ``threshold``.

    The null hypothesis is the other side (``mean <= threshold`` for ``"greater"``); ``p <= (1 - level) / 2``
    exactly when :func:`decide` on :func:`paired_seed_interval` at ``level`` says *holds*. The same p as
    ``scipy.stats.ttest_1samp(a - b - threshold, 0, alternative=direction).pvalue``; with zero spread, 0 when every
    difference lies beyond the threshold and 1 otherwise.
    """
    if direction not in DIRECTIONS:
        raise ValueError(f"direction={direction!r} is not supported; choose 'greater' or 'less'.")
    a, b = _as_values(a, "a"), _as_values(b, "b")
    if a.shape != b.shape:
        raise ValueError(f"a and b must hold one value per seed for the same seeds; got {a.size} and {b.size}.")
    diff = (a - b - float(threshold)) * (1.0 if direction == "greater" else -1.0)
    sd = float(diff.std(ddof=1))
    if sd == 0.0:
        return 0.0 if diff[0] > 0 else 1.0
    t = float(diff.mean() / (sd / np.sqrt(diff.size)))
    return float(_scipy_stats.t.sf(t, diff.size - 1))


def holm(p_values: Sequence[float]) -> np.ndarray:
    """Holm's step-down adjusted p-values (Holm 1979, *Scand. J. Statist.* 6, 65-70), in the order given.

    With the p-values sorted, ``p_(1) <= ... <= p_(m)``, the adjusted ``p~_(i) = max_{j <= i} min(1, (m - j + 1)
    p_(j))``. Rejecting every hypothesis with ``p~ <= alpha`` is Holm's procedure: it controls the family-wise
    error rate at ``alpha`` for any dependence between the tests. Returns adjusted **p-values** (compare them with
    the level yourself, or use :func:`decide_every`).
    """
    p = np.asarray(p_values, dtype=np.float64)
    if p.ndim != 1 or p.size == 0:
        raise ValueError(f"p_values must be a non-empty 1-D sequence; got shape {p.shape}.")
    if not np.all((p >= 0) & (p <= 1)):
        raise ValueError(f"p_values must lie in [0, 1]; got {p[~((p >= 0) & (p <= 1))].tolist()}.")
    order = np.argsort(p, kind="stable")
    m = p.size
    stepped = np.maximum.accumulate(np.minimum(1.0, (m - np.arange(m)) * p[order]))
    adjusted = np.empty(m)
    adjusted[order] = stepped
    return adjusted


@dataclass(frozen=True)
class MultipleDecision:
    """The verdict of a claim decided by several paired comparisons, with Holm's adjustment."""

    verdict: str
    intervals: dict
    p_claimed: dict
    p_against: dict
    alpha: float
    direction: str
    threshold: float

    def __str__(self) -> str:
        sign = ">" if self.direction == "greater" else "<"
        parts = [f"{name}: {self.intervals[name].brief(4)}, Holm p = {self.p_claimed[name]:.2g}" for name in
                 self.intervals]
        return (f"{self.verdict} (each {sign} {self.threshold:.4g}; Holm over {len(parts)} one-sided paired t-tests "
                f"at {self.alpha:.3g}): " + "; ".join(parts))


def decide_every(pairs, direction: str = "greater", threshold: float = 0.0, level: float = 0.95) -> MultipleDecision:
    """The verdict of a claim that needs every comparison ("lowest against every baseline"), Holm-corrected.

    ``pairs`` maps a comparison's name to ``(a, b)``, two settings' values on the same seeds. Each comparison gets
    the one-sided paired t p-value of :func:`paired_t_p_value` for the claimed side and for the other side, both
    adjusted with :func:`holm` over the comparisons, at ``alpha = (1 - level) / 2`` (so that one comparison gets
    the verdict :func:`decide` gives its ``level`` interval). *holds*: every claimed-side adjusted p is at most
    alpha; *not-reproduced*: some comparison lies significantly on the other side; *inconclusive* otherwise.
    """
    level = _check_level(level)
    if not isinstance(pairs, dict) or not pairs:
        raise ValueError("pairs must be a non-empty dict: comparison name -> (a, b), values on the same seeds.")
    names = list(pairs)
    claimed = holm([paired_t_p_value(*pairs[n], direction, threshold) for n in names])
    other = "less" if direction == "greater" else "greater"
    against = holm([paired_t_p_value(*pairs[n], other, threshold) for n in names])
    alpha = (1 - level) / 2
    verdict = ("holds" if np.all(claimed <= alpha) else "not-reproduced" if np.any(against <= alpha)
               else "inconclusive")
    return MultipleDecision(verdict, {n: paired_seed_interval(*pairs[n], level) for n in names},
                            dict(zip(names, map(float, claimed))), dict(zip(names, map(float, against))), alpha,
                            direction, float(threshold))


@dataclass(frozen=True)
class RankAgreement:
    """Kendall's tau between a reference order and ours, its bootstrap interval, and the tau without each item."""

    tau: float
    interval: Interval
    leave_one_out: dict

    @property
    def most_influential(self) -> tuple:
        """The item whose removal moves tau most, and tau without it."""
        item = max(self.leave_one_out, key=lambda k: abs(self.leave_one_out[k] - self.tau))
        return item, self.leave_one_out[item]

    def __str__(self) -> str:
        item, without = self.most_influential
        return (f"Kendall tau {self.interval.brief(2)} ({self.interval.level:.0%} percentile bootstrap over test "
                f"samples and seeds); without {item}: {without:+.2f}")


def _kendall(reference: np.ndarray, values: np.ndarray) -> float:
    tau = _scipy_stats.kendalltau(reference, values).statistic
    return float(tau) if np.isfinite(tau) else 0.0


def kendall_tau_bootstrap(reference, probs, labels, metric: Callable, n_resamples: int = 1000,
                          level: float = 0.95, seed: int = 0, per_sample: Callable | None = None) -> RankAgreement:
    """Kendall's tau-b between ``reference`` (item -> a paper's value) and our values, with a bootstrap interval.

    Our value of an item is the mean over seeds of ``metric(probs[item][s], labels)``. Each bootstrap resample
    draws the test samples (N with replacement, the same indices for every item and seed) and the seeds (with
    replacement, the same draw for every item, which keeps the pairing of seeds), and recomputes tau; the interval
    is the percentile interval of the resampled taus, so it lies in [-1, 1] like tau itself (a t-interval of
    per-seed taus does not: it gave [0.54, 1.08], and a zero-width interval when every seed agreed). A tau that
    is undefined (all values tied) counts as 0. ``leave_one_out`` holds the tau of the full data with each item
    left out: how much of an agreement or a reversal comes from one item.

    Parameters
    ----------
    reference : dict
        item -> the reference value (e.g. a paper's printed ECE); at least 3 items, each in ``probs``.
    probs : dict
        item -> a sequence of (N, K) probability arrays, one per seed, the same seeds and test set for every item.
    labels : array_like
        (N,) test labels.
    metric : callable
        ``(probs, labels) -> float``, e.g. :func:`calib.metrics.ece <calib.metrics.binned.ece>`; with
        ``per_sample``, ``(statistics, labels) -> float`` of the resampled rows of ``per_sample``'s array.
    per_sample : callable, optional
        ``(probs, labels) -> array`` whose first axis is the N test samples: what ``metric`` reads of each sample,
        computed once per item and seed, so that a resample takes its rows instead of those of the (N, K)
        probabilities. For a top-label metric, the confidence and the outcome of each sample (then ``metric`` can
        be :func:`calib.metrics.top_label_ece <calib.metrics.binned.top_label_ece>` of the two columns): the same
        values as ``metric`` of the resampled probabilities, at a fraction of the time (chapter 11's ten tables,
        200 resamples each: 3 s instead of 30 s).
    """
    level = _check_level(level)
    if int(n_resamples) != n_resamples or n_resamples < 100:
        raise ValueError(f"n_resamples must be an integer >= 100 (1000 is usual); got {n_resamples}.")
    if not isinstance(reference, dict) or not isinstance(probs, dict):
        raise ValueError("reference and probs must be dicts keyed by item (e.g. loss name).")
    items = list(reference)
    missing = [k for k in items if k not in probs]
    if missing:
        raise ValueError(f"probs has no runs for {missing}; give every item of reference its per-seed probabilities.")
    if len(items) < 3:
        raise ValueError(f"Kendall's tau needs at least 3 items; got {items}.")
    labels = np.asarray(labels)
    stacks = [np.asarray(probs[k], dtype=np.float64) for k in items]
    shapes = {s.shape for s in stacks}
    if len(shapes) != 1 or stacks[0].ndim != 3 or stacks[0].shape[1] != labels.shape[0] or labels.ndim != 1:
        raise ValueError(f"probs must hold, for every item, the same number of (N, K) arrays with N = {labels.size} "
                         f"(labels' length); got shapes {sorted(shapes)}.")
    n_seeds, n = stacks[0].shape[:2]
    if n_seeds < 2:
        raise ValueError("probs holds 1 seed per item; a bootstrap over seeds needs at least 2.")
    if per_sample is not None:
        stacks = [[np.asarray(per_sample(stack[s], labels)) for s in range(n_seeds)] for stack in stacks]
        first = stacks[0][0]
        if first.ndim == 0 or first.shape[0] != n or any(x.shape != first.shape for st in stacks for x in st):
            raise ValueError(f"per_sample must return, for every item and seed, an array of the same shape whose "
                             f"first axis is the {n} test samples; got shape {first.shape} for the first.")
    ref = np.array([reference[k] for k in items], dtype=np.float64)
    full = np.array([[metric(stack[s], labels) for s in range(n_seeds)] for stack in stacks])     # items x seeds
    tau = _kendall(ref, full.mean(axis=1))
    rng = np.random.default_rng(seed)
    taus = np.empty(int(n_resamples))
    for r in range(int(n_resamples)):
        idx, seeds = rng.integers(0, n, n), rng.integers(0, n_seeds, n_seeds)
        resampled_labels = labels.take(idx)
        cache = {}
        values = []
        for stack in stacks:
            for s in np.unique(seeds):
                cache[s] = metric(stack[s].take(idx, axis=0), resampled_labels)     # take: 5x faster than [idx]
            values.append(np.mean([cache[s] for s in seeds]))
        taus[r] = _kendall(ref, np.array(values))
    low, high = np.quantile(taus, [0.5 - level / 2, 0.5 + level / 2])
    keep = np.ones(len(items), bool)
    leave_one_out = {}
    for i, item in enumerate(items):
        keep[:] = True
        keep[i] = False
        leave_one_out[item] = _kendall(ref[keep], full.mean(axis=1)[keep]) if len(items) > 3 else float("nan")
    interval = Interval(tau, float(low), float(high), level, n, f"percentile bootstrap over test samples and "
                                                                f"{n_seeds} seeds, {int(n_resamples)} resamples")
    return RankAgreement(tau, interval, leave_one_out)


@dataclass(frozen=True)
class SignTest:
    """An exact sign test over independent units."""

    wins: int
    losses: int
    ties: int
    p_value: float
    alternative: str

    @property
    def n(self) -> int:
        """The number of units that are not tied (the number of coin flips)."""
        return self.wins + self.losses

    @property
    def sided(self) -> str:
        """``"one-sided"`` or ``"two-sided"``, the label the p-value is printed with."""
        return "two-sided" if self.alternative == "two-sided" else "one-sided"

    def __str__(self) -> str:
        return (f"better in {self.wins} of {self.n} independent units ({self.losses} worse, {self.ties} tied), "
                f"{self.sided} sign test p = {self.p_value:.2g}")


def sign_test(differences: Sequence[float], units: Sequence | None = None,
              alternative: str = "greater") -> SignTest:
    """Exact sign test that the differences lean positive (``"greater"``), negative, or either way.

    ``differences`` are signed so that positive means "better as claimed" (e.g. baseline ECE minus the method's).
    ``units`` labels each difference with the independent unit it comes from (a network on a dataset): the
    differences of one unit count once, by the sign of the sum of their signs (a unit better in one table and
    worse in another is a tie), so that a network printed in two tables is not two coin flips. Ties are dropped.
    The p-value is ``scipy.stats.binomtest(wins, wins + losses, 0.5, alternative)``: one-sided for ``"greater"``
    or ``"less"``, two-sided for ``"two-sided"`` (:attr:`SignTest.sided` says which).
    """
    if alternative not in ALTERNATIVES:
        raise ValueError(f"alternative={alternative!r} is not supported; choose 'greater', 'less' or 'two-sided'.")
    d = np.asarray(differences, dtype=np.float64)
    if d.ndim != 1 or d.size == 0:
        raise ValueError(f"differences must be a non-empty 1-D sequence; got shape {d.shape}.")
    if not np.isfinite(d).all():
        raise ValueError("differences hold NaN or infinite values; drop the cells that were not printed.")
    signs = np.sign(d)
    if units is not None:
        units = list(units)
        if len(units) != d.size:
            raise ValueError(f"units must label every difference; got {len(units)} units for {d.size} differences.")
        by_unit: dict = {}
        for unit, s in zip(units, signs):
            by_unit[unit] = by_unit.get(unit, 0.0) + s
        signs = np.sign(np.array(list(by_unit.values())))
    wins, losses = int((signs > 0).sum()), int((signs < 0).sum())
    ties = int(signs.size - wins - losses)
    p = 1.0 if wins + losses == 0 else float(_scipy_stats.binomtest(wins, wins + losses, 0.5, alternative).pvalue)
    return SignTest(wins, losses, ties, p, alternative)


def _power(delta: float, sd: float, n: int, level: float) -> float:
    """Probability that the paired t-interval at ``level`` lies wholly above 0 when the true mean difference is
    ``delta`` (one side, as :func:`decide` reads it)."""
    critical = _scipy_stats.t.ppf(0.5 + level / 2, n - 1)
    return float(_scipy_stats.nct.sf(critical, n - 1, delta * np.sqrt(n) / sd))


def _check_power_inputs(sd, n, level, power) -> tuple:
    sd = float(sd)
    if not np.isfinite(sd) or sd <= 0:
        raise ValueError(f"sd must be a positive paired standard deviation; got {sd} (zero spread: any "
                         "difference is detected).")
    if int(n) != n or n < 2:
        raise ValueError(f"n must be an integer number of seeds >= 2; got {n}.")
    power = float(power)
    if not 0.5 <= power < 1:
        raise ValueError(f"power must lie in [0.5, 1), e.g. 0.8; got {power}.")
    return sd, int(n), _check_level(level), power


def detectable_difference(sd: float, n: int, level: float = 0.95, power: float = 0.8) -> float:
    """The smallest true paired difference that ``n`` seeds detect with probability ``power``.

    Detected means that the paired t-interval at ``level`` lies wholly on the claimed side of 0 (:func:`decide`),
    with ``sd`` the paired standard deviation over seeds: the ``delta`` with
    ``P(T > t_{(1+level)/2, n-1}) = power`` for ``T`` noncentral t with ``n - 1`` degrees of freedom and
    noncentrality ``delta sqrt(n) / sd`` (Cohen 1988, Ch. 2). For large n it tends to
    ``(z_{(1+level)/2} + z_power) sd / sqrt(n)``.
    """
    sd, n, level, power = _check_power_inputs(sd, n, level, power)
    from scipy.optimize import brentq

    high = sd
    while _power(high, sd, n, level) < power:
        high *= 2
    return float(brentq(lambda delta: _power(delta, sd, n, level) - power, 0.0, high, xtol=1e-12 * sd))


def seeds_needed(sd: float, effect: float, level: float = 0.95, power: float = 0.8, max_seeds: int = 10_000) -> int:
    """The fewest seeds whose paired t-interval detects a true difference ``effect`` with probability ``power``
    (see :func:`detectable_difference`); ValueError when more than ``max_seeds`` would be needed."""
    sd, _, level, power = _check_power_inputs(sd, 2, level, power)
    effect = abs(float(effect))
    if effect == 0 or not np.isfinite(effect):
        raise ValueError(f"effect must be a finite non-zero difference; got {effect}.")
    n = 2
    while _power(effect, sd, n, level) < power:
        n += 1
        if n > max_seeds:
            raise ValueError(f"an effect of {effect:.3g} with paired SD {sd:.3g} needs more than {max_seeds} seeds.")
    return n


@dataclass(frozen=True)
class PowerLine:
    """What our seeds can detect, beside the effect a paper reports."""

    n: int
    sd: float
    detectable: float
    paper_effect: float
    seeds_for_paper_effect: int
    level: float
    power: float

    def __str__(self) -> str:
        more = ("our seeds suffice" if self.seeds_for_paper_effect <= self.n
                else f"{self.seeds_for_paper_effect} seeds would detect it")
        return (f"with {self.n} seeds (paired SD {self.sd:.3g}) the smallest difference detected with "
                f"{self.power:.0%} power at {self.level:.0%} is {self.detectable:.3g}; the paper's effect is "
                f"{abs(self.paper_effect):.3g}: {more}")


def power_line(a: Sequence[float], b: Sequence[float], paper_effect: float, level: float = 0.95,
               power: float = 0.8) -> PowerLine:
    """The power line of an *inconclusive* paired comparison: :func:`detectable_difference` at the observed
    paired SD of ``a - b`` and our number of seeds, beside the paper's effect and :func:`seeds_needed` for it."""
    a, b = _as_values(a, "a"), _as_values(b, "b")
    if a.shape != b.shape:
        raise ValueError(f"a and b must hold one value per seed for the same seeds; got {a.size} and {b.size}.")
    sd = float(np.std(a - b, ddof=1))
    return PowerLine(a.size, sd, detectable_difference(sd, a.size, level, power), float(paper_effect),
                     seeds_needed(sd, paper_effect, level, power), level, power)
