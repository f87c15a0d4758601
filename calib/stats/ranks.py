"""How well our ranking of items (losses, methods) agrees with a paper's. Part of :mod:`calib.stats`.

- :func:`rank_agreement_test`: Kendall's tau between the paper's values and ours, tested against chance: the exact
  permutation p-value (every ordering of our values equally likely under "no agreement"; all n! orderings for n <= 8,
  a Monte-Carlo sample beyond). It decides whether an agreement is more than chance: tau = 0.40 over 5 items has
  p = 0.24.
- :func:`kendall_tau_bootstrap`: the stability of our own ranking (a bootstrap over test samples and seeds with the
  paper's order fixed) and the tau left when each item is left out. It says how much our tau could move, not
  whether it beats chance.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Callable

import numpy as np
from scipy import stats as _scipy_stats

from calib._validate import to_numpy
from calib.stats.intervals import Interval, check_level

__all__ = ["RankAgreement", "kendall_tau_bootstrap", "RankTest", "rank_agreement_test", "EXACT_UP_TO"]

#: The number of items up to which :func:`rank_agreement_test` enumerates every ordering (8! = 40,320).
EXACT_UP_TO = 8


@dataclass(frozen=True)
class RankTest:
    """Kendall's tau-b of a reference order and ours, and its one-sided permutation p-value against chance."""

    tau: float
    p_value: float
    n: int
    alternative: str
    exact: bool
    n_permutations: int

    def __str__(self) -> str:
        how = f"exact over all {self.n_permutations} orderings" if self.exact else \
            f"Monte Carlo over {self.n_permutations} orderings"
        side = {"greater": "agreement", "less": "reversal", "two-sided": "either"}[self.alternative]
        return f"Kendall's τ {self.tau:+.2f} over {self.n} items, permutation p = {self.p_value:.2g} ({side}, {how})"


def _pair_signs(values: np.ndarray) -> np.ndarray:
    """sign(v_i - v_j) over the pairs i < j, along the last axis."""
    i, j = np.triu_indices(values.shape[-1], k=1)
    return np.sign(values[..., i] - values[..., j])


def rank_agreement_test(reference, values, alternative: str = "greater", n_permutations: int = 100_000,
                        seed: int = 0) -> RankTest:
    """Kendall's tau-b between ``reference`` and ``values`` (the same items, in the same order), and the permutation
    p-value of the hypothesis that ours agree with the reference's order more than chance (``"greater"``), less
    (``"less"``: a reversal), or either way (``"two-sided"``, by the absolute value of tau).

    Under "no agreement" every assignment of our values to the items is equally likely, so the p-value is the share
    of the n! orderings whose tau is at least ours (ties in the reference or in ours keep their tau-b denominators,
    which do not change with the ordering). For n <= EXACT_UP_TO every ordering is counted; beyond, ``n_permutations``
    random orderings, with the observed one counted in (p >= 1 / (n_permutations + 1)).
    """
    if alternative not in ("greater", "less", "two-sided"):
        raise ValueError(f"alternative={alternative!r} is not supported; choose 'greater', 'less' or 'two-sided'.")
    ref = np.asarray(reference, dtype=np.float64)
    ours = np.asarray(values, dtype=np.float64)
    if ref.ndim != 1 or ref.shape != ours.shape:
        raise ValueError(f"reference and values must be 1-D and of one length (one value per item); got shapes "
                         f"{ref.shape} and {ours.shape}.")
    if ref.size < 3:
        raise ValueError(f"a rank agreement needs at least 3 items; got {ref.size}.")
    if not (np.isfinite(ref).all() and np.isfinite(ours).all()):
        raise ValueError("reference and values hold NaN or infinite values; drop the items that were not printed.")
    n = ref.size
    ref_signs = _pair_signs(ref)
    pairs = ref_signs.size
    denominator = np.sqrt((pairs - np.sum(ref_signs == 0)) * (pairs - np.sum(_pair_signs(ours) == 0)))
    if denominator == 0:
        raise ValueError("every reference value or every one of ours is tied: Kendall's tau is undefined.")
    tau = float(ref_signs @ _pair_signs(ours) / denominator)
    exact = n <= EXACT_UP_TO
    if exact:
        orders = np.array(list(itertools.permutations(range(n))))
    else:
        if int(n_permutations) != n_permutations or n_permutations < 1000:
            raise ValueError(f"n_permutations must be an integer >= 1000; got {n_permutations}.")
        rng = np.random.default_rng(seed)
        orders = np.argsort(rng.random((int(n_permutations), n)), axis=1)
    taus = _pair_signs(ours[orders]) @ ref_signs / denominator
    eps = 1e-12
    if alternative == "greater":
        hits = np.sum(taus >= tau - eps)
    elif alternative == "less":
        hits = np.sum(taus <= tau + eps)
    else:
        hits = np.sum(np.abs(taus) >= abs(tau) - eps)
    p = hits / len(orders) if exact else (hits + 1) / (len(orders) + 1)
    return RankTest(tau, float(min(1.0, p)), n, alternative, exact, int(len(orders)))


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
        return (f"Kendall's τ {self.interval.brief(2)} ({self.interval.level:.0%} percentile bootstrap over test "
                f"samples and seeds); without {item}: {without:+.2f}")


def _kendall(reference: np.ndarray, values: np.ndarray) -> float:
    tau = _scipy_stats.kendalltau(reference, values).statistic
    return float(tau) if np.isfinite(tau) else 0.0


def _kendall_rows(reference: np.ndarray, values: np.ndarray) -> np.ndarray:
    """:func:`_kendall` of ``reference`` (m,) and each row of ``values`` (R, m), all rows at once: Kendall's tau-b
    ``(C - D) / sqrt(n0 - n1) / sqrt(n0 - n2)`` (n0 pairs, n1 and n2 of them tied in the reference and in the row),
    with the integers and the float operations of ``scipy.stats.kendalltau`` (the same values to the last bit),
    clipped to [-1, 1], and 0 where it is undefined (every pair tied on one side, or a NaN). Rows with an infinite
    value go to scipy. Cost O(R m^2), where a call of scipy per row costs about 0.1 ms each."""
    ref = np.asarray(reference, dtype=np.float64)
    values = np.asarray(values, dtype=np.float64)
    out = np.zeros(values.shape[0])
    if not np.isfinite(ref).all():
        for r, row in enumerate(values):
            out[r] = _kendall(ref, row)
        return out
    i, j = np.triu_indices(ref.size, k=1)
    ref_signs = np.sign(ref[i] - ref[j])
    signs = np.sign(values[:, i] - values[:, j])
    pairs = float(i.size)
    ref_untied = pairs - np.count_nonzero(ref_signs == 0)
    untied = pairs - np.count_nonzero(signs == 0, axis=1)
    difference = (signs * ref_signs).sum(axis=1) + 0.0          # C - D: a whole number, exact (NaN with a NaN)
    with np.errstate(invalid="ignore", divide="ignore"):
        tau = np.clip(difference / np.sqrt(ref_untied) / np.sqrt(untied), -1.0, 1.0)
    defined = np.isfinite(tau) & (ref_untied > 0) & (untied > 0)
    out[defined] = tau[defined]
    infinite = np.isinf(values).any(axis=1) & ~np.isnan(values).any(axis=1)
    for row_index in np.flatnonzero(infinite):
        out[row_index] = _kendall(ref, values[row_index])
    return out


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
    level = check_level(level)
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
    labels = to_numpy(labels, "labels")                 # tensors on any device, with grad, too
    stacks: list[np.ndarray] | list[list[np.ndarray]]      # per item: its seeds' probabilities, or per_sample's
    stacks = [np.asarray([to_numpy(p, f"probs[{k!r}]") for p in probs[k]], dtype=np.float64) for k in items]
    shapes = {s.shape for s in stacks}
    if len(shapes) != 1 or stacks[0].ndim != 3 or stacks[0].shape[1] != labels.shape[0] or labels.ndim != 1:
        raise ValueError(f"probs must hold, for every item, the same number of (N, K) arrays with N = {labels.size} "
                         f"(labels' length); got shapes {sorted(shapes)}.")
    n_seeds: int
    n: int
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
    values = np.empty((int(n_resamples), len(items)))        # each resample's mean over its seeds, per item
    for r in range(int(n_resamples)):
        idx, seeds = rng.integers(0, n, n), rng.integers(0, n_seeds, n_seeds)
        resampled_labels = labels.take(idx)
        drawn = np.unique(seeds)
        for i in range(len(items)):
            stack = stacks[i]
            cache = {s: metric(stack[s].take(idx, axis=0), resampled_labels) for s in drawn}   # take: 5x [idx]
            values[r, i] = np.mean([cache[s] for s in seeds])
    taus = _kendall_rows(ref, values)                         # scipy's tau-b of every resample at once
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
