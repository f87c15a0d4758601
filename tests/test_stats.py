import numpy as np
import pytest
from scipy import stats as scipy_stats

from calib import metrics
from calib.stats import Interval, cohens_d, combine, decide, paired_bootstrap, paired_seed_interval, seed_interval


@pytest.mark.parametrize("values", [[0.1, 0.3, 0.2], [1.0, 2.0, 4.0, 8.0, 3.0], list(np.linspace(-1, 1, 10))])
@pytest.mark.parametrize("level", [0.9, 0.95, 0.99])
def test_seed_interval_matches_scipy_t_interval(values, level):
    got = seed_interval(values, level)
    low, high = scipy_stats.t.interval(level, len(values) - 1, loc=np.mean(values), scale=scipy_stats.sem(values))
    assert got.estimate == pytest.approx(np.mean(values), abs=1e-15)
    assert (got.low, got.high) == pytest.approx((low, high), rel=1e-12)
    assert got.n == len(values)


def test_paired_interval_is_the_interval_of_the_differences():
    a, b = [0.05, 0.07, 0.06, 0.08], [0.03, 0.06, 0.02, 0.05]
    got = paired_seed_interval(a, b)
    ref = scipy_stats.ttest_rel(a, b).confidence_interval(0.95)
    assert (got.low, got.high) == pytest.approx((ref.low, ref.high), rel=1e-12)


def test_paired_bootstrap_agrees_with_scipy_bootstrap():
    rng = np.random.default_rng(1)
    n, k = 3000, 4
    labels = rng.integers(0, k, n)
    logits = rng.normal(size=(n, k))
    logits[np.arange(n), labels] += 1.0
    pa = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    pb = np.exp(0.5 * logits) / np.exp(0.5 * logits).sum(1, keepdims=True)
    ours = paired_bootstrap(metrics.nll, pa, pb, labels, n_resamples=2000, seed=0)
    ref = scipy_stats.bootstrap((np.arange(n),), lambda i: metrics.nll(pa[i], labels[i]) - metrics.nll(pb[i], labels[i]),
                                vectorized=False, n_resamples=2000, method="percentile", random_state=0)
    width = ref.confidence_interval.high - ref.confidence_interval.low
    assert ours.estimate == pytest.approx(metrics.nll(pa, labels) - metrics.nll(pb, labels))
    assert ours.low == pytest.approx(ref.confidence_interval.low, abs=0.1 * width)
    assert ours.high == pytest.approx(ref.confidence_interval.high, abs=0.1 * width)


def test_t_interval_covers_the_mean_at_its_level():
    rng = np.random.default_rng(0)
    covered = 0
    for _ in range(4000):
        iv = seed_interval(rng.normal(1.0, 2.0, 4), 0.9)
        covered += iv.low < 1.0 < iv.high
    assert covered / 4000 == pytest.approx(0.9, abs=0.015)


def _iv(low, high):
    return Interval((low + high) / 2, low, high, 0.95, 5, "test")


@pytest.mark.parametrize("low, high, direction, threshold, verdict", [
    (0.01, 0.03, "greater", 0.0, "holds"),
    (-0.01, 0.03, "greater", 0.0, "inconclusive"),
    (-0.03, -0.01, "greater", 0.0, "not-reproduced"),
    (0.001, 0.003, "greater", 0.005, "not-reproduced"),   # real but smaller than the estimator's bias
    (-0.03, -0.01, "less", 0.0, "holds"),
    (0.01, 0.03, "less", 0.0, "not-reproduced"),
    (-0.01, 0.01, "less", 0.0, "inconclusive"),
])
def test_decide_turns_an_interval_into_a_verdict(low, high, direction, threshold, verdict):
    assert decide(_iv(low, high), direction, threshold).verdict == verdict


def test_combine():
    h, n, i = (decide(_iv(*b)) for b in [(1, 2), (-2, -1), (-1, 1)])
    assert combine([h, h]) == "holds"
    assert combine([h, i]) == "inconclusive"
    assert combine([h, i, n]) == "not-reproduced"


@pytest.mark.parametrize("call, match", [
    (lambda: seed_interval([0.1]), "at least 2 seeds"),
    (lambda: seed_interval([[0.1, 0.2]]), "1-D"),
    (lambda: seed_interval([0.1, np.nan]), "NaN"),
    (lambda: seed_interval([0.1, 0.2], level=95), "level"),
    (lambda: paired_seed_interval([1, 2, 3], [1, 2]), "same seeds"),
    (lambda: decide(_iv(0, 1), "up"), "direction"),
    (lambda: combine([]), "empty"),
    (lambda: paired_bootstrap(metrics.nll, np.ones((3, 2)) / 2, np.ones((3, 2)) / 2, [0, 1], n_resamples=200), "labels"),
])
def test_bad_input_is_named(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_brief_format_scales_and_rounds():
    assert _iv(0.01234, 0.05678).brief(2, scale=100) == "3.46 [1.23, 5.68]"
    assert str(_iv(1, 2)).startswith("1.5 [1, 2] (95% test, n = 5)")


def test_cohens_d_from_summary_statistics():
    # pooled sd sqrt((3^2 + 4^2) / 2) = sqrt(12.5)
    assert cohens_d(10.0, 3.0, 5.0, 4.0) == pytest.approx(5 / np.sqrt(12.5), rel=1e-15)
    assert isinstance(cohens_d(1.0, 1.0, 0.0, 1.0), float) and cohens_d(1.0, 1.0, 0.0, 1.0) == 1.0
    np.testing.assert_allclose(cohens_d([2.0, 0.0], [1.0, 2.0], [1.0, 1.0], [1.0, 2.0]), [1.0, -0.5])
    # equal groups' samples: the d of their means and sds (ddof = 1) is the textbook d
    rng = np.random.default_rng(5)
    a, b = rng.normal(1.0, 2.0, 50), rng.normal(0.0, 2.0, 50)
    pooled = np.sqrt(((a.size - 1) * a.var(ddof=1) + (b.size - 1) * b.var(ddof=1)) / (a.size + b.size - 2))
    assert cohens_d(a.mean(), a.std(ddof=1), b.mean(), b.std(ddof=1)) == pytest.approx((a.mean() - b.mean()) / pooled)
    with pytest.raises(ValueError, match=">= 0"):
        cohens_d(1.0, -1.0, 0.0, 1.0)
    with pytest.raises(ValueError, match="undefined"):
        cohens_d(1.0, 0.0, 0.0, 0.0)
