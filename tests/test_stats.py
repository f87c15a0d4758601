import numpy as np
import pytest
from scipy import stats as scipy_stats
from scipy.special import softmax

from calib import metrics, stats
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


# --- the one decision rule: margins, Holm, Kendall's tau, sign tests, power (issue 25, section 3) ---------------

def test_margins_are_stated_by_kind_and_an_unknown_kind_is_named():
    assert stats.margin("calibration-error") == 0.0 and stats.margin("sign") == 0.0
    assert stats.MARGINS["accuracy-parity"] == 0.01
    with pytest.raises(ValueError, match="kind='ece-bias' has no stated margin"):
        stats.margin("ece-bias")


def test_paired_t_p_value_is_scipy_s_and_agrees_with_the_interval_rule():
    rng = np.random.default_rng(1)
    for _ in range(50):
        a, b = rng.normal(0.3, 1, 5), rng.normal(0, 1, 5)
        for direction in ("greater", "less"):
            p = stats.paired_t_p_value(a, b, direction, 0.1)
            ref = scipy_stats.ttest_1samp(a - b - 0.1, 0.0, alternative=direction).pvalue
            assert p == pytest.approx(ref, rel=1e-10)
            verdict = stats.decide(stats.paired_seed_interval(a, b), direction, 0.1).verdict
            assert (p <= 0.025) == (verdict == "holds")
    assert stats.paired_t_p_value([2, 2, 2], [1, 1, 1]) == 0.0 and stats.paired_t_p_value([1, 1], [2, 2]) == 1.0


def test_holm_adjusted_p_values_match_the_closed_form_and_the_step_down_procedure():
    np.testing.assert_allclose(stats.holm([0.01, 0.04, 0.03, 0.005]), [0.03, 0.06, 0.06, 0.02])
    rng = np.random.default_rng(2)
    for _ in range(200):
        p = rng.uniform(0, 0.2, rng.integers(1, 7))
        alpha = 0.05
        rejected, order = set(), np.argsort(p)                  # Holm's procedure, step by step
        for step, i in enumerate(order):
            if p[i] > alpha / (p.size - step):
                break
            rejected.add(int(i))
        assert set(np.flatnonzero(stats.holm(p) <= alpha).tolist()) == rejected
    for bad in ([], [0.5, 1.2], [[0.1]]):
        with pytest.raises(ValueError, match="p_values"):
            stats.holm(bad)


def test_decide_every_is_decide_for_one_comparison_and_holm_corrects_several():
    a, b = np.array([0.10, 0.12, 0.11, 0.13]), np.array([0.12, 0.135, 0.13, 0.14])
    one = stats.decide_every({"vs ce": (a, b)}, "less")
    assert one.verdict == stats.decide(stats.paired_seed_interval(a, b), "less").verdict == "holds"
    # p = 0.02 each: each interval alone excludes 0 at 95 % (p <= 0.025), but not after Holm over two
    d = np.array([-1.0, -0.5, -1.2, -0.2])
    d = d - d.mean() + scipy_stats.t.ppf(0.98, 3) * d.std(ddof=1) / 2         # mean chosen so that p = 0.02
    pair = (d, np.zeros(4))
    p = stats.paired_t_p_value(*pair, "greater")
    assert p == pytest.approx(0.02, rel=1e-6)
    assert stats.decide(stats.paired_seed_interval(*pair), "greater").verdict == "holds"
    two = stats.decide_every({"x": pair, "y": pair}, "greater")
    assert two.verdict == "inconclusive" and two.p_claimed["x"] == pytest.approx(0.04) and "Holm" in str(two)
    assert stats.decide_every({"x": pair, "y": (np.zeros(4), pair[0])}, "greater").verdict == "inconclusive"
    assert stats.decide_every({"x": (a, b), "y": (b, a)}, "less").verdict == "not-reproduced"
    with pytest.raises(ValueError, match="pairs must be a non-empty dict"):
        stats.decide_every({}, "less")


def _brute_tau(x, y):
    pairs = [(i, j) for i in range(len(x)) for j in range(i + 1, len(x))]
    return sum(np.sign(x[i] - x[j]) * np.sign(y[i] - y[j]) for i, j in pairs) / len(pairs)


def _first_column_mean(p, y):
    return float(p[:, 0].mean())


def test_kendall_tau_bootstrap_is_bounded_and_reports_the_item_that_makes_a_reversal():
    rng = np.random.default_rng(3)
    n, seeds = 400, 4
    labels = rng.integers(0, 2, n)
    level_of = {"a": 0.1, "b": 0.3, "c": 0.5, "d": 0.7, "e": 0.9}
    probs = {}
    for k, m in level_of.items():
        first = np.clip(m + 0.02 * rng.normal(size=(seeds, n)), 0, 1)
        probs[k] = np.stack([first, 1 - first], axis=2)
    same = stats.kendall_tau_bootstrap(level_of, probs, labels, _first_column_mean, n_resamples=200)
    assert (same.tau, same.interval.low, same.interval.high) == pytest.approx((1.0, 1.0, 1.0))
    # the reference puts "e" first: a reversal made by one item
    reference = {"a": 0.2, "b": 0.3, "c": 0.4, "d": 0.5, "e": 0.0}
    out = stats.kendall_tau_bootstrap(reference, probs, labels, _first_column_mean, n_resamples=200)
    ours = [np.mean([_first_column_mean(p, labels) for p in probs[k]]) for k in reference]
    assert out.tau == pytest.approx(_brute_tau(list(reference.values()), ours)) == pytest.approx(0.2)
    assert -1 <= out.interval.low <= out.tau <= out.interval.high <= 1
    assert out.most_influential == ("e", pytest.approx(1.0)) and out.leave_one_out["a"] == pytest.approx(_brute_tau(
        [0.3, 0.4, 0.5, 0.0], ours[1:]))
    assert "without e: +1.00" in str(out)
    # noisy values: every resampled tau stays in [-1, 1], so does the interval (a t-interval gave [0.54, 1.08])
    noisy = {k: np.stack([np.full((seeds, n), 0.5) + 0.3 * rng.normal(size=(seeds, 1)),
                          np.full((seeds, n), 0.5)], axis=2) for k in level_of}
    wide = stats.kendall_tau_bootstrap(level_of, noisy, labels, _first_column_mean, n_resamples=300)
    assert -1 <= wide.interval.low < wide.interval.high <= 1
    with pytest.raises(ValueError, match="probs has no runs for"):
        stats.kendall_tau_bootstrap({**level_of, "z": 1.0}, probs, labels, _first_column_mean)
    with pytest.raises(ValueError, match="at least 3 items"):
        stats.kendall_tau_bootstrap({"a": 1, "b": 2}, probs, labels, _first_column_mean)
    with pytest.raises(ValueError, match="same number of"):
        stats.kendall_tau_bootstrap(level_of, {**probs, "a": probs["a"][:2]}, labels, _first_column_mean)


def test_kendall_tau_bootstrap_of_per_sample_statistics_gives_the_same_interval():
    """Issue 30: resampling what a metric reads of each sample (a top-label metric: the confidence and the outcome;
    the NLL: the log-probability of the label) gives exactly the tau, interval and leave-one-out taus of resampling
    the probabilities, for the ECE, the adaptive ECE, the MCE, the error and the NLL."""
    rng = np.random.default_rng(5)
    n, seeds, k = 600, 3, 4
    labels = rng.integers(0, k, n)
    reference = {"a": 0.05, "b": 0.02, "c": 0.09, "d": 0.04}
    probs = {item: [softmax(rng.normal(size=(n, k)) * (1 + 0.03 * i) + np.eye(k)[labels], axis=1) for _ in range(seeds)]
             for i, item in enumerate(reference)}

    top_label = metrics.top_label_outcomes
    cases = [(metrics.ece, top_label, lambda s, _: metrics.top_label_ece(s[:, 0], s[:, 1] > 0)),
             (metrics.adaptive_ece, top_label,
              lambda s, _: metrics.top_label_ece(s[:, 0], s[:, 1] > 0, binning="quantile")),
             (metrics.mce, top_label, lambda s, _: metrics.top_label_ece(s[:, 0], s[:, 1] > 0, norm="max")),
             (lambda p, y: 1.0 - metrics.accuracy(p, y), top_label, lambda s, _: 1.0 - s[:, 1].mean()),
             (metrics.nll, metrics.label_log_probability, lambda s, _: -s.mean())]
    for metric, per_sample, of_samples in cases:
        whole = stats.kendall_tau_bootstrap(reference, probs, labels, metric, n_resamples=150, seed=2)
        fast = stats.kendall_tau_bootstrap(reference, probs, labels, of_samples, n_resamples=150, seed=2,
                                           per_sample=per_sample)
        assert (fast.tau, fast.interval.low, fast.interval.high) == (whole.tau, whole.interval.low,
                                                                     whole.interval.high)
        assert fast.leave_one_out == whole.leave_one_out
        assert whole.interval.low < whole.interval.high          # the control: the resamples differ
    with pytest.raises(ValueError, match="per_sample must return"):
        stats.kendall_tau_bootstrap(reference, probs, labels, of_samples, n_resamples=100,
                                    per_sample=lambda p, y: p.max(axis=1)[:-1])


def test_sign_test_counts_each_unit_once_and_labels_its_sides():
    out = stats.sign_test([0.1, 0.2, -0.1, 0.3, 0.0])
    assert (out.wins, out.losses, out.ties, out.n) == (3, 1, 1, 4)
    assert out.p_value == pytest.approx(5 / 16) and out.sided == "one-sided" and "one-sided sign test" in str(out)
    assert stats.sign_test([1, 1, 1, -1], alternative="two-sided").p_value == pytest.approx(10 / 16)
    assert stats.sign_test([1, 1, 1, -1], alternative="two-sided").sided == "two-sided"
    # a network printed in Tables 1 and 2 counts once: 8 cells of 4 networks are 4 flips, not 8
    cells = [0.1, 0.2, 0.1, 0.3, 0.2, 0.1, -0.1, 0.1]
    units = ["rn50", "rn50", "rn110", "rn110", "wrn", "wrn", "dn", "dn"]
    by_unit = stats.sign_test(cells, units)
    assert (by_unit.wins, by_unit.ties, by_unit.n) == (3, 1, 3) and by_unit.p_value == pytest.approx(1 / 8)
    assert stats.sign_test(cells).p_value == pytest.approx(scipy_stats.binomtest(7, 8, 0.5, "greater").pvalue)
    with pytest.raises(ValueError, match="alternative='one-sided'"):
        stats.sign_test([1.0], alternative="one-sided")
    with pytest.raises(ValueError, match="units must label every difference"):
        stats.sign_test([1.0, 2.0], ["a"])
    with pytest.raises(ValueError, match="NaN"):
        stats.sign_test([1.0, np.nan])


def test_detectable_difference_has_its_power_by_simulation_and_the_normal_limit():
    sd, n = 0.004, 5
    delta = stats.detectable_difference(sd, n)
    rng = np.random.default_rng(4)
    diffs = rng.normal(delta, sd, size=(20000, n))
    half = scipy_stats.t.ppf(0.975, n - 1) * diffs.std(axis=1, ddof=1) / np.sqrt(n)
    assert np.mean(diffs.mean(axis=1) - half > 0) == pytest.approx(0.8, abs=0.01)      # interval wholly above 0
    big = stats.detectable_difference(1.0, 4000)
    assert big == pytest.approx((scipy_stats.norm.ppf(0.975) + scipy_stats.norm.ppf(0.8)) / np.sqrt(4000), rel=1e-3)
    need = stats.seeds_needed(sd, delta)
    assert need == n and stats.seeds_needed(sd, 2 * delta) < n < stats.seeds_needed(sd, delta / 2)
    line = stats.power_line([0.030, 0.034, 0.029, 0.031], [0.031, 0.033, 0.031, 0.030], paper_effect=-0.01)
    assert line.n == 4 and line.detectable > 0 and line.seeds_for_paper_effect <= 4 and "our seeds suffice" in str(line)
    small = stats.power_line([0.030, 0.034, 0.029, 0.031], [0.031, 0.033, 0.031, 0.030], paper_effect=0.0005)
    assert small.seeds_for_paper_effect > 4 and f"{small.seeds_for_paper_effect} seeds would detect it" in str(small)
    for kwargs, match in ((dict(sd=0, n=4), "sd must be a positive"), (dict(sd=1, n=1), "n must be an integer"),
                          (dict(sd=1, n=4, power=1.0), "power must lie")):
        with pytest.raises(ValueError, match=match):
            stats.detectable_difference(**kwargs)
    with pytest.raises(ValueError, match="effect must be a finite non-zero"):
        stats.seeds_needed(1.0, 0.0)
