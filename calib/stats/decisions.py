"""The one rule that turns intervals into verdicts, and its multiple-comparison rules. Part of :mod:`calib.stats`.

- :func:`decide`: one interval against a threshold (0, or a practical margin of :data:`MARGINS`); *holds* when the
  whole interval lies beyond it on the claimed side, *not-reproduced* when the whole interval lies on the other side,
  *inconclusive* otherwise; with the paper's own effect size given, an interval that excludes an effect as large as
  the paper's is *not-reproduced* (smaller than the paper's effect) rather than inconclusive.
- :func:`combine` and :func:`decide_every`: a claim that needs every part ("lower than every baseline", "A and
  B"). It *holds* when every part holds at the unadjusted level: an intersection-union test, which controls the
  error of the claim at that level with no correction (Berger 1982, *Technometrics* 24, 295-300). It is
  *not-reproduced* when some part is shown to fail, and "some part fails" is a union of tests: Holm's correction
  over the parts' p-values on the other side.
- :func:`decide_any`: a claim that some comparison of a family holds ("a loss beats cross-entropy after TS"), or a
  count of how many do: Holm over the family on the claimed side.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
from scipy import stats as _scipy_stats

from calib.stats.intervals import DIRECTIONS, Interval, check_level, paired_seed_interval, seed_values

__all__ = ["MARGINS", "margin", "Decision", "decide", "combine", "paired_t_p_value", "holm", "MultipleDecision",
           "decide_every", "decide_any"]

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
#:   changes a reliability diagram's bin (15 bins of width 0.067);
#: - ``"most-of-the-gap"``: 0.9, "almost zero" / "fixes it" for a map applied to a miscalibrated model: the map removes
#:   at least 90 % of the model's excess over a reference (raw - mapped > 0.9 (raw - reference), paired over seeds).
#:
#: A paper's own effect size is not a margin of this table: it is the reference of :func:`decide`'s
#: ``paper_effect`` (is our effect smaller than the paper's?).
MARGINS = {"sign": 0.0, "calibration-error": 0.0, "calibration-error-parity": 0.005, "accuracy-parity": 0.01,
           "confidence": 0.05, "most-of-the-gap": 0.9}


def margin(kind: str) -> float:
    """The practical margin of ``kind`` from :data:`MARGINS`; a ValueError names the kinds there are."""
    if kind not in MARGINS:
        raise ValueError(f"kind={kind!r} has no stated margin; choose one of {', '.join(map(repr, MARGINS))} "
                         "(calib.stats.MARGINS), or add the kind there before the run.")
    return MARGINS[kind]


@dataclass(frozen=True)
class Decision:
    """The verdict an interval gives a claim "the effect is ``direction`` than ``threshold``".

    ``p_claimed`` and ``p_against`` are the one-sided p-values of the claimed side and of the other (None for an
    interval without a standard error); ``paper_effect`` the paper's effect size when the claim was also read
    against it, and ``smaller_than_paper`` whether the interval excludes an effect that large."""

    verdict: str
    interval: Interval
    direction: str
    threshold: float
    p_claimed: float | None = None
    p_against: float | None = None
    paper_effect: float | None = None
    smaller_than_paper: bool = False

    @property
    def alpha(self) -> float:
        """The one-sided level of the rule, (1 - level) / 2 of the interval's level."""
        return (1 - self.interval.level) / 2

    def __str__(self) -> str:
        sign = ">" if self.direction == "greater" else "<"
        text = f"{self.verdict}: effect {self.interval}; claimed {sign} {self.threshold:.4g}"
        if self.smaller_than_paper:
            text += f"; an effect as large as the paper's ({self.paper_effect:.4g}) is excluded"
        return text


def decide(interval: Interval, direction: str = "greater", threshold: float = 0.0,
           paper_effect: float | None = None) -> Decision:
    """The verdict of the claim "the effect is ``direction`` than ``threshold``", from its interval.

    - ``"holds"``: the whole interval lies beyond the threshold on the claimed side;
    - ``"not-reproduced"``: the whole interval lies on the other side (the effect is absent, reversed, or
      smaller than the threshold that makes it mean something); or, with ``paper_effect`` (the effect the paper
      reports, beyond the threshold on the claimed side), the interval does not reach the paper's effect although
      it contains the threshold: an effect as large as the paper's is excluded at the same one-sided level (the
      "smaller than the paper's effect" reading of an equivalence test, Schuirmann 1987), so the paper's effect is
      not reproduced (``smaller_than_paper``);
    - ``"inconclusive"``: otherwise.
    """
    if direction not in DIRECTIONS:
        raise ValueError(f"direction={direction!r} is not supported; choose 'greater' or 'less'.")
    if not isinstance(interval, Interval):
        raise ValueError(f"interval must be a calib.stats.Interval; got {type(interval).__name__}.")
    threshold = float(threshold)
    if not np.isfinite(threshold):
        raise ValueError(f"threshold must be finite; got {threshold}.")
    sign = 1.0 if direction == "greater" else -1.0
    low, high = sorted((sign * interval.low, sign * interval.high))
    t = sign * threshold
    verdict = "holds" if low > t else ("not-reproduced" if high < t else "inconclusive")
    smaller = False
    if paper_effect is not None:
        paper_effect = float(paper_effect)
        if not np.isfinite(paper_effect) or sign * paper_effect <= t:
            raise ValueError(f"paper_effect={paper_effect} must be an effect beyond the threshold {threshold} on the "
                             f"claimed side ({direction}); it is the size the paper reports.")
        smaller = high < sign * paper_effect
        if verdict == "inconclusive" and smaller:
            verdict = "not-reproduced"
    other = "less" if direction == "greater" else "greater"
    return Decision(verdict, interval, direction, threshold, interval.p_value(direction, threshold),
                    interval.p_value(other, threshold), paper_effect, smaller)


def combine(decisions: Sequence[Decision]) -> str:
    """The verdict of a claim that needs every part: *holds* if every part holds (intersection-union, no
    correction); *not-reproduced* if some part is shown to fail once Holm's correction over the parts is applied to
    their p-values on the other side (a part without p-values, from a percentile bootstrap, counts as failing when
    its interval lies on the other side at the Bonferroni level it would need: its verdict is then taken as is only
    for a single part); *inconclusive* otherwise."""
    decisions = list(decisions)
    if not decisions:
        raise ValueError("decisions is empty; pass the Decision of each part of the claim.")
    if any(not isinstance(d, Decision) for d in decisions):
        raise ValueError("decisions must be calib.stats.Decision objects (from decide).")
    levels = sorted({d.interval.level for d in decisions}, reverse=True)
    if len(levels) > 1:
        raise ValueError(f"decisions: the parts were decided at levels {levels[0]:g} and {levels[1]:g}; decide every "
                         f"part of a claim at the claim's one level, then combine them.")
    if all(d.verdict == "holds" for d in decisions):
        return "holds"
    return "not-reproduced" if _some_part_fails(decisions) else "inconclusive"


def _some_part_fails(decisions: list) -> bool:
    """Holm over the parts' p-values against the claim (a smaller-than-the-paper part with its own p-value)."""
    if len(decisions) == 1:
        return decisions[0].verdict == "not-reproduced"
    p = []
    for d in decisions:
        if d.p_against is None:
            if d.verdict == "not-reproduced":
                return True               # a bootstrap part (no p-value), shown to fail by its own interval
            p.append(1.0)
        elif d.smaller_than_paper and d.verdict == "not-reproduced" and d.p_against > d.alpha:
            other = "greater" if d.direction == "less" else "less"
            p.append(d.interval.p_value(other, d.paper_effect))      # H0: the effect is at least the paper's
        else:
            p.append(d.p_against)
    alpha = decisions[0].alpha
    return bool(np.any(holm(p) <= alpha))


def paired_t_p_value(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray, direction: str = "greater",
                     threshold: float = 0.0) -> float:
    """One-sided p-value of the paired t-test that the mean of ``a[i] - b[i]`` is ``direction`` than ``threshold``.

    The null hypothesis is the other side (``mean <= threshold`` for ``"greater"``); ``p <= (1 - level) / 2``
    exactly when :func:`decide` on :func:`paired_seed_interval` at ``level`` says *holds*. The same p as
    ``scipy.stats.ttest_1samp(a - b - threshold, 0, alternative=direction).pvalue``; with zero spread, 0 when every
    difference lies beyond the threshold and 1 otherwise.
    """
    if direction not in DIRECTIONS:
        raise ValueError(f"direction={direction!r} is not supported; choose 'greater' or 'less'.")
    a, b = seed_values(a, "a"), seed_values(b, "b")
    if a.shape != b.shape:
        raise ValueError(f"a and b must hold one value per seed for the same seeds; got {a.size} and {b.size}.")
    diff = (a - b - float(threshold)) * (1.0 if direction == "greater" else -1.0)
    sd = float(diff.std(ddof=1))
    if sd == 0.0:
        return 0.0 if diff[0] > 0 else 1.0
    t = float(diff.mean() / (sd / np.sqrt(diff.size)))
    return float(_scipy_stats.t.sf(t, diff.size - 1))


def holm(p_values: Sequence[float] | np.ndarray) -> np.ndarray:
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
    """The verdict of a claim decided by several comparisons: the intervals, the one-sided p-values on the claimed
    side (unadjusted and Holm-adjusted) and Holm-adjusted p-values on the other side, the rule (``"every"`` or
    ``"any"``) and the comparisons that hold under it (``holding``)."""

    verdict: str
    intervals: dict
    p_claimed: dict
    p_claimed_holm: dict
    p_against: dict
    alpha: float
    direction: str
    threshold: float
    rule: str = "every"
    holding: tuple = field(default_factory=tuple)

    def __str__(self) -> str:
        sign = ">" if self.direction == "greater" else "<"
        if self.rule == "every":
            parts = [f"{name}: {self.intervals[name].brief(4)}, p = {self.p_claimed[name]:.2g}" for name in
                     self.intervals]
            how = (f"every one {sign} {self.threshold:.4g}: {len(parts)} one-sided tests at {self.alpha:.3g}, "
                   f"intersection-union, no correction")
        else:
            parts = [f"{name}: {self.intervals[name].brief(4)}, Holm p = {self.p_claimed_holm[name]:.2g}" for name in
                     self.intervals]
            how = (f"{len(self.holding)} of {len(parts)} {sign} {self.threshold:.4g} with Holm's correction over the "
                   f"{len(parts)} at {self.alpha:.3g}")
        return f"{self.verdict} ({how}): " + "; ".join(parts)


def _comparison_intervals(pairs, level: float) -> dict:
    if not isinstance(pairs, dict) or not pairs:
        raise ValueError("pairs must be a non-empty dict: comparison name -> an Interval, or (a, b), two settings' "
                         "values on the same seeds.")
    out = {}
    for name, value in pairs.items():
        if isinstance(value, Interval):
            if value.se is None:
                raise ValueError(f"pairs[{name!r}] is an interval without a standard error (a percentile bootstrap); "
                                 "give a t-interval (seed_interval, seed_test_interval) or the two settings' values.")
            out[name] = value
        else:
            a, b = value
            out[name] = paired_seed_interval(a, b, level)
    return out


def _multiple(pairs, direction: str, threshold: float, level: float, rule: str) -> MultipleDecision:
    if direction not in DIRECTIONS:
        raise ValueError(f"direction={direction!r} is not supported; choose 'greater' or 'less'.")
    level = check_level(level)
    intervals = _comparison_intervals(pairs, level)
    names = list(intervals)
    other = "less" if direction == "greater" else "greater"
    raw = np.array([intervals[n].p_value(direction, threshold) for n in names])
    claimed_holm = holm(raw)
    against = holm([intervals[n].p_value(other, threshold) for n in names])
    alpha = (1 - level) / 2
    if rule == "every":
        holding = tuple(n for n, p in zip(names, raw) if p <= alpha)
        verdict = ("holds" if len(holding) == len(names) else "not-reproduced" if np.any(against <= alpha)
                   else "inconclusive")
    else:
        holding = tuple(n for n, p in zip(names, claimed_holm) if p <= alpha)
        verdict = ("holds" if holding else "not-reproduced" if np.all(against <= alpha) else "inconclusive")
    return MultipleDecision(verdict, intervals, dict(zip(names, map(float, raw))),
                            dict(zip(names, map(float, claimed_holm))), dict(zip(names, map(float, against))), alpha,
                            direction, float(threshold), rule, holding)


def decide_every(pairs, direction: str = "greater", threshold: float = 0.0, level: float = 0.95) -> MultipleDecision:
    """The verdict of a claim that needs every comparison ("lowest against every baseline").

    ``pairs`` maps a comparison's name to an :class:`~calib.stats.intervals.Interval` with a standard error (e.g.
    :func:`~calib.stats.test_set.seed_test_interval`), or to ``(a, b)``, two settings' values on the same seeds (a
    paired t-interval over seeds). *holds*: every comparison's one-sided p on the claimed side is at most
    ``alpha = (1 - level) / 2``, unadjusted (intersection-union: the claim is wrong only if some comparison is, and
    each is tested at alpha); *not-reproduced*: some comparison lies on the other side with Holm's correction over
    the comparisons (that one fails is a union of tests); *inconclusive* otherwise.
    """
    return _multiple(pairs, direction, threshold, level, "every")


def decide_any(pairs, direction: str = "greater", threshold: float = 0.0, level: float = 0.95) -> MultipleDecision:
    """The verdict of a claim that some comparison of a family holds, and which do ("a loss beats cross-entropy
    after temperature scaling"; a family of claims drawn from one grid): Holm's step-down correction over the
    family on the claimed side, at ``alpha = (1 - level) / 2`` (family-wise error at most alpha for any dependence).
    *holds*: some comparison holds after the correction (``holding`` names them); *not-reproduced*: every comparison
    lies on the other side after the correction; *inconclusive* otherwise.
    """
    return _multiple(pairs, direction, threshold, level, "any")
