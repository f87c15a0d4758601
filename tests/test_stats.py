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
    ref = scipy_stats.bootstrap((np.arange(n),),
                                lambda i: metrics.nll(pa[i], labels[i]) - metrics.nll(pb[i], labels[i]),
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
    (lambda: paired_bootstrap(metrics.nll, np.ones((3, 2)) / 2, np.ones((3, 2)) / 2, [0, 1], n_resamples=200),
     "labels"),
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


def test_decide_every_is_an_intersection_union_test_and_holm_corrects_the_other_side():
    """Issue 41, item 1: "lower than every baseline" holds when every comparison holds at the unadjusted level
    (intersection-union, Berger 1982): two comparisons at p = 0.02 each hold (Holm would have made them 0.04 and the
    claim inconclusive). That some comparison fails is a union: Holm over the other side."""
    a, b = np.array([0.10, 0.12, 0.11, 0.13]), np.array([0.12, 0.135, 0.13, 0.14])
    one = stats.decide_every({"vs ce": (a, b)}, "less")
    assert one.verdict == stats.decide(stats.paired_seed_interval(a, b), "less").verdict == "holds"
    # p = 0.02 each: each interval alone excludes 0 at 95 % (p <= 0.025)
    d = np.array([-1.0, -0.5, -1.2, -0.2])
    d = d - d.mean() + scipy_stats.t.ppf(0.98, 3) * d.std(ddof=1) / 2         # mean chosen so that p = 0.02
    pair = (d, np.zeros(4))
    p = stats.paired_t_p_value(*pair, "greater")
    assert p == pytest.approx(0.02, rel=1e-6)
    assert stats.decide(stats.paired_seed_interval(*pair), "greater").verdict == "holds"
    two = stats.decide_every({"x": pair, "y": pair}, "greater")
    assert two.verdict == "holds" and two.p_claimed["x"] == pytest.approx(0.02) and "no correction" in str(two)
    assert two.p_claimed_holm["x"] == pytest.approx(0.04) and two.holding == ("x", "y")
    # y on the other side at p = 0.02: alone that fails the claim; with a second comparison at p = 0.02 on the other
    # side too, Holm over the two makes each 0.04 ... one at 0.02 and one at 1: Holm gives 0.04 > 0.025
    assert stats.decide_every({"y": (np.zeros(4), pair[0])}, "greater").verdict == "not-reproduced"
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


def test_kendall_tau_bootstrap_all_resamples_at_once_equals_one_at_a_time_to_the_last_bit():
    """The resampled taus are scipy's tau-b, computed for every resample at once (integers of pairs, then scipy's
    float operations): equal to the last bit to calling scipy per resample, with ties in the reference and in our
    values, undefined taus (every value tied: 0), NaN and infinite values; and the interval equals the one of the
    first, one-resample-at-a-time version (tests/references.py) on the same draws."""
    from references import kendall_bootstrap_taus

    from calib.stats.ranks import _kendall, _kendall_rows

    rng = np.random.default_rng(11)
    for m in (3, 5, 9):
        reference = np.round(rng.normal(size=m), 1)
        values = np.round(rng.normal(size=(40, m)), rng.integers(0, 3))
        values[0], values[1, 0], values[2, 1], values[3] = 1.0, np.nan, np.inf, reference
        got = _kendall_rows(reference, values)
        expected = np.array([_kendall(reference, row) for row in values])
        assert np.array_equal(got.view(np.int64), expected.view(np.int64))     # bits: signed zeros too
    labels = rng.integers(0, 2, 300)
    level_of = {"a": 0.4, "b": 0.45, "c": 0.5, "d": 0.55}
    probs = {k: np.stack([np.clip(m + 0.05 * rng.normal(size=(3, 1)) + 0.05 * rng.normal(size=(3, 300)), 0, 1)] * 2,
                         axis=2) for k, m in level_of.items()}
    taus = kendall_bootstrap_taus(level_of, probs, labels, _first_column_mean, 120, seed=4)
    out = stats.kendall_tau_bootstrap(level_of, probs, labels, _first_column_mean, n_resamples=120, seed=4)
    assert (out.interval.low, out.interval.high) == tuple(np.quantile(taus, [0.025, 0.975]))
    assert len(set(taus)) > 2                            # the control: the resampled taus differ


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


# --------------------------------------------------------------- issue 41: the procedure, on data whose answer is known

def _null_family(rng, m=14, n_seeds=5):
    """m comparisons with no effect: paired per-seed differences drawn around 0."""
    return {f"c{i}": (rng.normal(0, 1, n_seeds), np.zeros(n_seeds)) for i in range(m)}


def test_holm_keeps_the_family_wise_error_of_a_null_family_and_unadjusted_intervals_do_not():
    """Issue 41, item 1: 14 losses compared with cross-entropy, none better. Over 1,000 null families, "at least one
    beats it" by 14 unadjusted one-sided tests at 2.5 % comes out about 1 - 0.975^14 = 30 % of the time; with Holm
    (decide_any), at most 2.5 %."""
    rng = np.random.default_rng(0)
    unadjusted = holm_any = 0
    for _ in range(1000):
        family = _null_family(rng)
        decision = stats.decide_any(family, "greater")
        holm_any += decision.verdict == "holds"
        unadjusted += any(p <= 0.025 for p in decision.p_claimed.values())
    assert 0.22 < unadjusted / 1000 < 0.38
    assert holm_any / 1000 <= 0.035


def test_intersection_union_keeps_its_level_without_correction():
    """"Lower than every baseline" at the boundary (every comparison's true effect 0) is declared at most alpha of the
    time without any correction (Berger 1982), and far less when most comparisons have a real effect but one does
    not."""
    rng = np.random.default_rng(1)
    false_every = false_one_null = 0
    for _ in range(1000):
        false_every += stats.decide_every(_null_family(rng, m=5), "greater").verdict == "holds"
        family = {f"c{i}": (rng.normal(3, 1, 5), np.zeros(5)) for i in range(4)}
        family["null"] = (rng.normal(0, 1, 5), np.zeros(5))
        false_one_null += stats.decide_every(family, "greater").verdict == "holds"
    assert false_every / 1000 <= 0.03 and false_one_null / 1000 <= 0.035


def test_rank_agreement_against_chance_exact_p_values():
    """Issue 41, item 3: Kendall's tau = 0.40 over 5 items has an exact permutation p of 0.24 (the share of the 120
    orderings with tau >= 0.4 is 29/120), tau = 1 has 1/120; at chance the p-values are roughly uniform, and a
    perfect reversal is an agreement's p of 1 and a reversal's 1/120."""
    ref = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    test = stats.rank_agreement_test(ref, [2.0, 1.0, 3.0, 5.0, 4.0])     # two discordant pairs of 10: tau = 0.6
    assert test.tau == pytest.approx(0.6) and test.exact and test.n_permutations == 120
    assert test.p_value == pytest.approx(sum(1 for t in _all_taus(5) if t >= 0.6 - 1e-12) / 120)
    point_four = stats.rank_agreement_test(ref, [3.0, 1.0, 2.0, 5.0, 4.0])
    assert point_four.tau == pytest.approx(0.4) and point_four.p_value == pytest.approx(29 / 120)
    assert stats.rank_agreement_test(ref, ref).p_value == pytest.approx(1 / 120)
    assert stats.rank_agreement_test(ref, ref[::-1]).p_value == 1.0
    assert stats.rank_agreement_test(ref, ref[::-1], alternative="less").p_value == pytest.approx(1 / 120)
    rng = np.random.default_rng(2)
    ps = np.array([stats.rank_agreement_test(rng.normal(size=7), rng.normal(size=7)).p_value for _ in range(400)])
    assert 0.02 < np.mean(ps <= 0.05) < 0.08                                    # about 5 % at chance
    big = stats.rank_agreement_test(np.arange(12.0), np.arange(12.0) + rng.normal(0, 2, 12), n_permutations=5000)
    assert not big.exact and big.p_value >= 1 / 5001 and "Monte Carlo" in str(big)
    x, y = rng.normal(size=12), rng.normal(size=12)
    x[3] = x[4]                                                                # a tie: tau-b, as scipy's
    assert stats.rank_agreement_test(x, y, n_permutations=1000).tau == pytest.approx(
        scipy_stats.kendalltau(x, y).statistic, abs=1e-12)


def _all_taus(n):
    import itertools

    ref = np.arange(n)
    return [scipy_stats.kendalltau(ref, perm).statistic for perm in itertools.permutations(range(n))]


def test_smaller_than_the_papers_effect_decides_what_the_interval_excludes():
    """Issue 41, item 4: an interval [-0.60, 0.36] against a paper's effect of -1.41 (lower is better) contains 0
    but excludes the paper's effect: not-reproduced, smaller than the paper's effect, where it was inconclusive. An
    interval that reaches the paper's effect stays inconclusive; one beyond 0 still holds."""
    interval = stats.Interval(-0.12, -0.60, 0.36, 0.95, 5, "paired t-interval over seeds", se=0.173, df=4)
    plain = stats.decide(interval, "less", 0.0)
    assert plain.verdict == "inconclusive"
    against_paper = stats.decide(interval, "less", 0.0, paper_effect=-1.41)
    assert against_paper.verdict == "not-reproduced" and against_paper.smaller_than_paper
    assert "as large as the paper's (-1.41) is excluded" in str(against_paper)
    wide = stats.Interval(-0.5, -1.6, 0.6, 0.95, 5, "paired t-interval over seeds", se=0.4, df=4)
    assert stats.decide(wide, "less", 0.0, paper_effect=-1.41).verdict == "inconclusive"
    better = stats.Interval(-0.9, -1.2, -0.6, 0.95, 5, "paired t-interval over seeds", se=0.1, df=4)
    decision = stats.decide(better, "less", 0.0, paper_effect=-1.41)
    assert decision.verdict == "holds" and decision.smaller_than_paper            # the direction holds, smaller
    with pytest.raises(ValueError, match="paper_effect"):
        stats.decide(interval, "less", 0.0, paper_effect=+1.0)
    # an equivalence that holds and one that does not, over many draws: a true effect of 0 against a paper's 1.0
    rng = np.random.default_rng(5)
    excluded = [stats.decide(stats.seed_interval(rng.normal(0.0, 0.3, 5)), "greater", 0.0, paper_effect=1.0)
                .smaller_than_paper for _ in range(500)]
    at_paper = [stats.decide(stats.seed_interval(rng.normal(1.0, 0.3, 5)), "greater", 0.0, paper_effect=1.0)
                .smaller_than_paper for _ in range(500)]
    assert np.mean(excluded) > 0.95 and np.mean(at_paper) <= 0.03


def test_combine_corrects_the_side_that_fails_and_not_the_side_that_holds():
    """Issue 41, item 1: a claim of two parts holds when both hold, unadjusted; it is not-reproduced only when a
    part fails after Holm over the parts (two parts each against the claim at p = 0.02 fail together: 0.04 for the
    first but ... the smallest, 0.02 * 2 = 0.04 > 0.025, so neither alone decides)."""
    def part(p_other, claimed_holds=False):
        # an interval whose p on the "less" side is p_other for the claim "greater than 0"
        se = 1.0
        estimate = scipy_stats.t.ppf(p_other, 4) * se
        half = scipy_stats.t.ppf(0.975, 4) * se
        return stats.decide(stats.Interval(estimate, estimate - half, estimate + half, 0.95, 5, "t", se, 4.0),
                            "greater", 0.0)
    one_fails = part(0.02)
    assert one_fails.verdict == "not-reproduced"
    assert stats.combine([one_fails]) == "not-reproduced"
    assert stats.combine([part(0.02), part(0.5)]) == "inconclusive"                 # Holm: 0.04 > 0.025
    assert stats.combine([part(0.001), part(0.5)]) == "not-reproduced"              # Holm: 0.002
    holding = stats.decide(stats.Interval(3.0, 1.0, 5.0, 0.95, 5, "t", 0.72, 4.0), "greater", 0.0)
    assert stats.combine([holding, holding]) == "holds"


def test_the_test_sets_noise_widens_a_paired_interval_and_matches_a_fresh_test_set():
    """Issue 41, item 2: seeds scored on one fixed test set. Two settings whose true ECEs are equal: a paired interval
    over seeds alone misses the test set's sampling error, and over 200 fresh test sets the seed-only interval covers
    the true difference (0) less often than the seeds x test interval, which covers it at about its level."""
    from calib import metrics

    rng = np.random.default_rng(11)
    n, k, n_seeds = 2000, 4, 5

    def model(seed_shift, sharpness):
        z = rng.normal(size=(n, k))
        return z, sharpness

    covered_seeds = covered_both = 0
    trials = 120
    for _ in range(trials):
        # a fresh test set of n points whose true class probabilities are known; each "seed" perturbs the logits
        base = rng.normal(size=(n, k)) * 1.5
        eta = np.exp(base) / np.exp(base).sum(1, keepdims=True)
        labels = np.array([rng.choice(k, p=row) for row in eta])
        a, b = [], []
        for s in range(n_seeds):
            noise = rng.normal(0, 0.05, size=(n, k))
            pa = np.exp(base + noise)
            pa /= pa.sum(1, keepdims=True)
            pb = np.exp(base - noise)
            pb /= pb.sum(1, keepdims=True)
            a.append(metrics.statistic(pa, labels, "nll"))
            b.append(metrics.statistic(pb, labels, "nll"))
        seeds_only = stats.paired_seed_interval([x.value for x in a], [x.value for x in b])
        both = stats.seed_test_interval(a, b, n_resamples=200, seed=1)
        assert both.high - both.low >= seeds_only.high - seeds_only.low
        covered_seeds += seeds_only.low <= 0 <= seeds_only.high
        covered_both += both.low <= 0 <= both.high
    assert covered_both / trials >= 0.9
    assert covered_both >= covered_seeds


def test_statistics_give_the_metrics_and_resample_them():
    """calib.metrics.statistic: the value is the metric of calib.metrics on the whole test set, and a resample of
    counts gives the metric of the resampled rows."""
    from calib import metrics

    rng = np.random.default_rng(4)
    labels = rng.integers(0, 5, 600)
    probs = scipy_stats.dirichlet.rvs(np.ones(5), size=600, random_state=7)
    counts = stats.bootstrap_counts(600, 60, seed=3)
    assert counts.shape == (60, 600) and np.all(counts.sum(axis=1) == 600)
    index = np.repeat(np.arange(600), counts[0].astype(int))
    for name, fn in (("accuracy", metrics.accuracy), ("nll", metrics.nll), ("brier", metrics.brier),
                     ("mean_confidence", metrics.mean_confidence), ("ece", metrics.ece),
                     ("adaece", metrics.adaptive_ece), ("classwise_ece", metrics.classwise_ece)):
        s = metrics.statistic(probs, labels, name)
        assert s.value == pytest.approx(fn(probs, labels), rel=1e-12, abs=1e-15), name
        assert s.resampled(counts)[0] == pytest.approx(fn(probs[index], labels[index]), rel=1e-12, abs=1e-15), name
    assert metrics.statistic(probs, labels, "error").value == pytest.approx(1 - metrics.accuracy(probs, labels))
    with pytest.raises(ValueError, match="not a metric of calib.metrics"):
        metrics.statistic(probs, labels, "auc")
    with pytest.raises(ValueError, match="test sets of different sizes"):
        stats.seed_test_interval([metrics.statistic(probs, labels)], [metrics.statistic(probs[:10], labels[:10])])


@pytest.mark.parametrize("n, n_bins, tied", [(600, 15, False), (600, 15, True), (10, 15, True), (97, 4, False)])
@pytest.mark.parametrize("norm", ["l1", "l2"])
def test_equal_mass_resamples_are_the_ece_of_the_resampled_rows(n, n_bins, tied, norm):
    """calib.metrics.EqualMassStatistic cuts every resample's equal-mass bins from one sort; each resample gives the
    ECE of its rows (each repeated as often as drawn), ties (confidences of exactly 1, rounded ones) and fewer
    samples than bins included."""
    from calib import metrics

    rng = np.random.default_rng(n + n_bins)
    conf = rng.uniform(0.2, 1.0, n)
    if tied:
        conf = np.round(conf, 1)
        conf[rng.random(n) < 0.3] = 1.0
    correct = (rng.random(n) < conf).astype(float)
    stat = metrics.EqualMassStatistic(conf, correct, n_bins, norm)
    ece = lambda c, y: metrics.top_label_ece(c, y > 0, n_bins, "quantile", norm)   # noqa: E731
    assert stat.value == pytest.approx(ece(conf, correct), rel=1e-12, abs=1e-15)
    counts = stats.bootstrap_counts(n, 50, seed=1)
    index = np.arange(n)
    expected = [ece(conf[np.repeat(index, c.astype(int))], correct[np.repeat(index, c.astype(int))]) for c in counts]
    assert np.allclose(stat.resampled(counts), expected, rtol=1e-12, atol=1e-15)
    with pytest.raises(ValueError, match="the same number"):
        stat.resampled(np.vstack([np.ones(n), np.r_[2.0, np.ones(n - 1)]]))
    with pytest.raises(ValueError, match=f"counts must be \\(B, {n}\\)"):
        stat.resampled(np.ones((2, n + 1)))


def test_resampled_variance_is_the_sampling_variance_of_values_computed_elsewhere():
    from calib import metrics

    rng = np.random.default_rng(2)
    labels = rng.integers(0, 4, 500)
    seeds = [scipy_stats.dirichlet.rvs(np.ones(4), size=500, random_state=s) for s in range(3)]
    stat = [metrics.statistic(p, labels, "ece_em_l2") for p in seeds]
    counts = stats.bootstrap_counts(500, 80, seed=0)
    replicates = np.stack([s.resampled(counts) for s in stat])
    assert stats.resampled_variance(replicates) == pytest.approx(stats.sampling_variance(stat, n_resamples=80),
                                                                 rel=1e-12)
    with pytest.raises(ValueError, match="at least 50 resamples"):
        stats.resampled_variance(replicates[:, :10])
    with pytest.raises(ValueError, match="NaN"):
        stats.resampled_variance(np.full((2, 60), np.nan))


def test_power_lines_account_for_the_sd_estimated_from_few_seeds():
    """Issue 41, item 4: an SD from 5 seeds has 4 degrees of freedom; its 80 % upper bound is 1.56 times the
    estimate (sqrt(4 / chi2_0.2(4))), and the power line reports what the seeds detect at it too."""
    assert stats.sd_upper_bound(1.0, 5, 0.8) == pytest.approx(np.sqrt(4 / scipy_stats.chi2.ppf(0.2, 4)))
    assert stats.sd_upper_bound(1.0, 5, 0.8) == pytest.approx(1.56, abs=0.01)
    a = np.array([0.10, 0.13, 0.11, 0.16, 0.12])
    line = stats.power_line(a, a - np.array([0.01, -0.02, 0.015, 0.0, 0.005]), paper_effect=0.05)
    assert line.sd_high > line.sd and line.detectable_high > line.detectable
    assert line.seeds_high >= line.seeds_for_paper_effect and "upper bound" in str(line)


def test_bootstrap_counts_are_drawn_once_and_read_only():
    """A chapter's intervals on one test set share its resamples: the same arguments give the same (read-only) array,
    other arguments another."""
    a = stats.bootstrap_counts(1000, 60, seed=2)
    assert stats.bootstrap_counts(1000, 60, seed=2) is a and not a.flags.writeable
    assert not np.array_equal(stats.bootstrap_counts(1000, 60, seed=3), a)
    with pytest.raises(ValueError, match="seed must be an integer"):
        stats.bootstrap_counts(1000, 60, seed=0.5)


# ----------------------------------------------------------------------------------------------------------
# issue 43, item 5: the decision rule at its boundaries (tests that kill the mutants the suite let live)
# ----------------------------------------------------------------------------------------------------------

def _t_interval(estimate, se=1.0, df=4.0, level=0.95):
    half = scipy_stats.t.ppf(0.5 + level / 2, df) * se
    return Interval(estimate, estimate - half, estimate + half, level, int(df) + 1, "t", se, df)


def _with_p(greater, less, level=0.95):
    """An interval whose one-sided p-values are exactly ``greater`` and ``less`` whatever the threshold: the
    decision rules compare them with alpha = (1 - level) / 2, "at most" by their docstrings."""
    class Fixed(Interval):
        def p_value(self, direction="greater", threshold=0.0):
            return greater if direction == "greater" else less

    return Fixed(0.0, -1.0, 1.0, level, 5, "t", 1.0, 4.0)


@pytest.mark.parametrize("low, high, direction, verdict", [
    (0.0, 0.03, "greater", "inconclusive"),      # touches the threshold: not wholly beyond it
    (-0.03, 0.0, "greater", "inconclusive"),
    (-0.03, 0.0, "less", "inconclusive"),
    (0.0, 0.03, "less", "inconclusive"),
    (0.01, 0.03, "greater", "inconclusive"),     # against a threshold of 0.01
])
def test_decide_wants_the_interval_strictly_beyond_the_threshold(low, high, direction, verdict):
    threshold = 0.01 if low == 0.01 else 0.0
    assert decide(_iv(low, high), direction, threshold).verdict == verdict


def test_decide_records_its_claim_p_values_and_paper_effect():
    interval = _t_interval(0.4, se=0.1)
    for direction, other in (("greater", "less"), ("less", "greater")):
        d = decide(interval, direction, 0.3)
        assert (d.direction, d.threshold) == (direction, 0.3)
        assert d.p_claimed == interval.p_value(direction, 0.3) != interval.p_value(direction, 0.0)
        assert d.p_against == interval.p_value(other, 0.3) and d.p_claimed + d.p_against == pytest.approx(1.0)
        assert d.smaller_than_paper is False and d.paper_effect is None
    assert str(decide(interval, "greater", 0.3)).startswith("inconclusive: effect 0.4 [")
    assert str(decide(interval, "greater", 0.3)).endswith("; claimed > 0.3")
    assert str(decide(_iv(-3, -1), "less")).endswith("; claimed < 0")
    text = str(decide(_t_interval(0.1, se=0.1), "greater", 0.0, paper_effect=1.0))
    assert text.startswith("not-reproduced: effect 0.1 [") and text.endswith("(1) is excluded")
    # the paper's effect must lie beyond the threshold on the claimed side: equal to it, or short of it, is refused
    for direction, threshold, paper in (("greater", 0.3, 0.3), ("greater", 1.0, 0.5), ("less", -0.3, -0.3),
                                        ("less", -1.0, -0.5)):
        with pytest.raises(ValueError, match="paper_effect"):
            decide(interval, direction, threshold, paper_effect=paper)
    at_paper = decide(_iv(-0.5, 1.0), "greater", 0.0, paper_effect=1.0)     # reaches the paper's effect exactly
    assert at_paper.verdict == "inconclusive" and not at_paper.smaller_than_paper


def test_a_claim_of_parts_is_decided_at_one_level():
    """combine took the level of its first part for all: parts decided at other levels are refused."""
    with pytest.raises(ValueError, match="levels 0.95 and 0.9"):
        combine([decide(_t_interval(3.0)), decide(_t_interval(3.0, level=0.9))])


def test_combine_reads_a_part_smaller_than_the_papers_effect_on_the_side_of_the_paper():
    """A part that is smaller than the paper's effect but whose interval contains the threshold (p against the claim
    > alpha) counts with its p-value against "the effect is at least the paper's"; a part that holds and is smaller
    than the paper's effect does not fail the claim."""
    for direction, sign in (("greater", 1.0), ("less", -1.0)):
        smaller = decide(_t_interval(sign * 0.5, se=0.5), direction, 0.0, paper_effect=sign * 8.0)
        assert smaller.verdict == "not-reproduced" and smaller.smaller_than_paper and smaller.p_against > 0.025
        holding = decide(_t_interval(sign * 5.0, se=0.5), direction, 0.0)
        assert combine([smaller, holding]) == "not-reproduced"
        open_part = decide(_t_interval(sign * 0.5, se=0.5), direction, 0.0)
        holds_but_smaller = decide(_t_interval(sign * 5.0, se=0.5), direction, 0.0, paper_effect=sign * 50.0)
        assert holds_but_smaller.verdict == "holds" and holds_but_smaller.smaller_than_paper
        assert combine([holds_but_smaller, open_part]) == "inconclusive"


def test_combine_fails_a_claim_at_a_holm_p_of_exactly_alpha():
    alpha = (1 - 0.95) / 2
    part = stats.Decision("not-reproduced", _with_p(0.9, alpha), "greater", 0.0, 0.9, alpha)
    other = stats.Decision("inconclusive", _with_p(0.5, 0.5), "greater", 0.0, 0.5, 0.5)
    assert combine([part, other]) == "inconclusive"                      # Holm: 2 alpha
    half = stats.Decision("not-reproduced", _with_p(0.9, alpha / 2), "greater", 0.0, 0.9, alpha / 2)
    assert combine([half, other]) == "not-reproduced"                    # Holm: exactly alpha
    smaller = stats.Decision("not-reproduced", _with_p(0.9, 1e-6), "greater", 0.0, 0.9, alpha, 1.0, True)
    assert combine([smaller, other]) == "inconclusive"      # p against = alpha: its own p counts, not the paper's


def test_decide_every_and_any_give_their_verdicts_at_p_of_exactly_alpha():
    alpha = (1 - 0.95) / 2
    at, above, low = _with_p(alpha, 1 - alpha), _with_p(0.5, 0.5), _with_p(1 - alpha / 2, alpha / 2)
    every = stats.decide_every({"x": at, "y": at}, "greater")
    assert every.verdict == "holds" and every.holding == ("x", "y")       # "at most alpha", unadjusted
    assert stats.decide_every({"x": at, "y": low}, "greater").verdict == "not-reproduced"   # Holm: alpha
    assert stats.decide_every({"x": above, "y": _with_p(1 - alpha, alpha)}, "greater").verdict == "inconclusive"
    anyone = stats.decide_any({"x": _with_p(alpha / 2, 0.9), "y": above}, "greater")
    assert anyone.verdict == "holds" and anyone.holding == ("x",)        # Holm: exactly alpha
    none = stats.decide_any({"x": at, "y": above}, "greater")
    assert none.verdict == "inconclusive" and none.holding == ()
    against = stats.decide_any({"x": low, "y": low}, "greater")
    assert against.verdict == "not-reproduced" and against.holding == ()   # every one on the other side (Holm)
    assert stats.decide_any({"x": low, "y": above}, "greater").verdict == "inconclusive"
    assert stats.decide_any({"x": low, "y": _with_p(1 - alpha / 2, 2 * alpha)}, "greater").verdict == "inconclusive"


def test_decide_every_and_any_use_the_threshold_the_level_and_the_claimed_side():
    a, b = [0.30, 0.35, 0.32, 0.31], [0.10, 0.12, 0.09, 0.11]             # a - b is about 0.215
    for rule in (stats.decide_every, stats.decide_any):
        assert rule({"x": (a, b)}, "greater", 0.2).verdict == "inconclusive"     # 0.2 is inside the interval
        assert rule({"x": (a, b)}, "greater", 0.0).verdict == "holds"
        assert rule({"x": (a, b)}, "less", 0.3).verdict == "holds"
        assert rule({"x": (b, a)}, "greater", 0.0).verdict == "not-reproduced"
        out = rule({"x": (a, b)}, "less", 0.2)
        interval = paired_seed_interval(a, b)
        assert out.p_claimed["x"] == interval.p_value("less", 0.2)
        assert out.p_against["x"] == interval.p_value("greater", 0.2)
        assert rule({"x": (a, b)}, "greater", 0.2, level=0.5).intervals["x"].level == 0.5
        assert rule({"x": interval}, "greater", 0.2).intervals["x"] is interval
        with pytest.raises(ValueError, match="without a standard error"):
            rule({"x": stats.Interval(0.2, 0.1, 0.3, 0.95, 4, "bootstrap")}, "greater")
    every = stats.decide_every({"first": (a, b), "second": (a, b)}, "less", 0.3)
    text = str(every)
    assert text.startswith("holds (every one < 0.3: 2 one-sided tests at 0.025, intersection-union, no correction): ")
    assert f"first: {interval.brief(4)}, p = " in text and "; second: " in text
    anyone = str(stats.decide_any({"first": (a, b), "second": (b, a)}, "greater"))
    assert anyone.startswith("holds (1 of 2 > 0 with Holm's correction over the 2 at 0.025): first: ")
    assert f"first: {interval.brief(4)}, Holm p = " in anyone and "; second: " in anyone


def test_paired_t_p_value_at_its_edges():
    a = np.array([1.0, 2.0, 3.0])
    assert np.std(a - 0.0, ddof=1) == 1.0                                 # a spread of exactly 1 is a spread
    assert stats.paired_t_p_value(a, np.zeros(3)) == pytest.approx(
        scipy_stats.ttest_1samp(a, 0.0, alternative="greater").pvalue, rel=1e-12)
    assert stats.paired_t_p_value(a, a) == 1.0                            # no spread, no difference: not greater
    assert stats.paired_t_p_value(a, a, "less") == 1.0
    assert stats.paired_t_p_value(a + 1, a) == 0.0
    with pytest.raises(ValueError, match=r"^a holds NaN"):
        stats.paired_t_p_value([1.0, np.nan], [1.0, 2.0])
    with pytest.raises(ValueError, match=r"^b has 1 value"):
        stats.paired_t_p_value([1.0, 2.0], [1.0])


def test_holm_caps_at_one_accepts_zero_names_bad_values_and_computes_in_float64():
    np.testing.assert_array_equal(stats.holm([0.6, 0.7]), [1.0, 1.0])
    np.testing.assert_array_equal(stats.holm([0.0, 0.5]), [0.0, 0.5])
    with pytest.raises(ValueError, match=r"got \[1\.5\]\.$"):
        stats.holm([0.0, 0.5, 1.0, 1.5])
    p32 = np.array([0.011, 0.02, 0.03], dtype=np.float32)
    p = p32.astype(np.float64)
    np.testing.assert_array_equal(stats.holm(p32), [3 * p[0], 2 * p[1], 2 * p[1]])


def test_an_intervals_p_values_and_brief_form():
    interval = _t_interval(0.4, se=0.1)
    assert interval.p_value() == interval.p_value("greater", 0.0) == pytest.approx(scipy_stats.t.sf(4.0, 4), rel=1e-12)
    assert interval.p_value("greater", 0.3) == pytest.approx(scipy_stats.t.sf(1.0, 4), rel=1e-12)
    assert interval.p_value("less", 0.3) == pytest.approx(scipy_stats.t.sf(-1.0, 4), rel=1e-12)
    assert Interval(0.4, 0.3, 0.5, 0.95, 5, "t", se=0.1, df=None).p_value() is None
    assert Interval(0.4, 0.3, 0.5, 0.95, 5, "bootstrap").p_value("less") is None
    point = Interval(1.0, 1.0, 1.0, 0.95, 3, "t", se=0.0, df=2.0)        # no spread: the interval is the point
    assert [point.p_value("greater", t) for t in (0.5, 1.0, 1.5)] == [0.0, 1.0, 1.0]
    assert [point.p_value("less", t) for t in (0.5, 1.0, 1.5)] == [1.0, 1.0, 0.0]
    assert _iv(1, 2).brief() == "1.500 [1.000, 2.000]" and _iv(0.01, 0.02).brief(1, 100) == "1.5 [1.0, 2.0]"


# --- cases the mutation test found untested (README, Contributing: tests/mutation_sample.py) -------------------------

def test_a_sign_test_of_ties_only_has_p_value_one():
    """No win and no loss: nothing leans either way, p = 1 (not a binomial test of 0 trials)."""
    result = stats.sign_test([0.0, 0.0, 0.0])
    assert (result.wins, result.losses, result.ties, result.p_value) == (0, 0, 3, 1.0)
    paired = stats.sign_test([1.0, -1.0], units=["net", "net"])          # one unit better and worse: a tie
    assert (paired.wins, paired.losses, paired.ties, paired.p_value) == (0, 0, 1, 1.0)


def test_a_sampled_rank_test_counts_the_observed_ordering_in():
    """Beyond EXACT_UP_TO items the p-value is (hits + 1) / (permutations + 1): a perfect agreement of 12 items, which
    no random ordering of 1,999 reaches (one in 12! does), has p = 1/2000, and every p is a multiple of 1/2000."""
    reference = np.arange(12.0)
    perfect = stats.rank_agreement_test(reference, reference, n_permutations=1999, seed=3)
    assert not perfect.exact and perfect.n_permutations == 1999 and perfect.p_value == 1 / 2000
    noisy = stats.rank_agreement_test(reference, np.random.default_rng(1).permutation(12) * 1.0,
                                       n_permutations=1999)
    assert noisy.p_value * 2000 == pytest.approx(round(noisy.p_value * 2000), abs=1e-9) and noisy.p_value > 1 / 2000


def test_the_power_line_takes_the_sd_bound_at_the_confidence_asked():
    """sd_confidence sets the SD's upper bound the second line uses: 0.95 gives a higher bound than the default 0.8,
    and the bound is sd_upper_bound's at that confidence."""
    rng = np.random.default_rng(0)
    a, b = rng.normal(1.0, 0.3, 5), rng.normal(0.8, 0.3, 5)
    default, strict = stats.power_line(a, b, 0.5), stats.power_line(a, b, 0.5, sd_confidence=0.95)
    assert default.sd == strict.sd and strict.sd_high > default.sd_high
    assert strict.sd_high == pytest.approx(stats.sd_upper_bound(strict.sd, 5, 0.95), rel=1e-12)
    assert default.sd_high == pytest.approx(stats.sd_upper_bound(default.sd, 5, 0.8), rel=1e-12)
    assert strict.detectable_high > default.detectable_high


# --------------------------------------------------------------- mutation sample B: behaviour the sample found untested

def test_seed_intervals_name_their_method_and_add_test_samples_only_for_a_positive_test_variance():
    """The method names the test samples whenever test_variance > 0 (a small one, below 1, too) and is the bare
    t-interval otherwise; the paired interval says it is paired."""
    values, other = [0.10, 0.12, 0.11, 0.15], [0.09, 0.10, 0.12, 0.11]
    assert seed_interval(values).method == "t-interval over seeds"
    assert seed_interval(values, test_variance=0.5).method == "t-interval over seeds and test samples"
    assert seed_interval(values, test_variance=1e-6).method == "t-interval over seeds and test samples"
    assert paired_seed_interval(values, other).method == "paired t-interval over seeds"
    assert paired_seed_interval(values, other, test_variance=1e-6).method == \
        "paired t-interval over seeds and test samples"


def test_seed_interval_names_values_when_they_cannot_be_read_as_an_array():
    """seed_values names the argument in the errors of reading it, not only in those of its shape."""
    with pytest.raises(ValueError, match=r"^values is None"):
        seed_interval(None)
    with pytest.raises(ValueError, match=r"^values could not be read as an array"):
        seed_interval([[0.1, 0.2], [0.3]])
    with pytest.raises(ValueError, match=r"^b is None"):
        paired_seed_interval([0.1, 0.2], None)


def test_paired_bootstrap_draws_2000_resamples_by_default_and_hands_the_metric_float64_rows():
    seen = []

    def metric(p, y):
        seen.append((p.dtype, y.dtype))
        return float(p[np.arange(len(y)), y].mean())

    probs = np.array([[0.7, 0.3], [0.2, 0.8], [0.6, 0.4], [0.1, 0.9]], dtype=np.float32)
    labels = np.array([0, 1, 1, 1])
    out = paired_bootstrap(metric, probs, probs[:, ::-1].copy(), labels)
    assert out.method == "paired bootstrap over test samples, 2000 resamples"
    assert len(seen) == 2 * 2000 + 2
    assert {dtype for dtype, _ in seen} == {np.dtype(np.float64)}
    # the estimate in float64: (0.7 + 0.8 + 0.4 + 0.9) / 4 - (0.3 + 0.2 + 0.6 + 0.1) / 4 of the float32 values
    f = probs.astype(np.float64)
    assert out.estimate == (f[[0, 1, 2, 3], [0, 1, 1, 1]].mean() - f[[0, 1, 2, 3], [1, 0, 0, 0]].mean())


def test_power_of_one_half_is_accepted_and_gives_the_critical_value_over_root_n():
    """power lies in [0.5, 1): at 0.5 the detectable difference of many seeds is z_0.975 sd / sqrt(n) (the normal
    limit with z_0.5 = 0), and seeds_needed accepts it too."""
    assert stats.detectable_difference(1.0, 4000, power=0.5) == pytest.approx(
        scipy_stats.norm.ppf(0.975) / np.sqrt(4000), rel=1e-3)
    assert stats.seeds_needed(1.0, 1.0, power=0.5) < stats.seeds_needed(1.0, 1.0, power=0.8)
    with pytest.raises(ValueError, match="power must lie in"):
        stats.detectable_difference(1.0, 10, power=0.4999)


def test_a_rank_test_against_a_reversal_says_so_in_its_text():
    ref = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    text = str(stats.rank_agreement_test(ref, ref[::-1], alternative="less"))
    assert "(reversal, exact over all 120 orderings)" in text
    assert "(agreement, " in str(stats.rank_agreement_test(ref, ref))
    assert "(either, " in str(stats.rank_agreement_test(ref, ref, alternative="two-sided"))


def test_seed_test_interval_resamples_with_seed_0_by_default():
    rng = np.random.default_rng(5)
    labels = rng.integers(0, 3, 200)
    seeds = [metrics.statistic(scipy_stats.dirichlet.rvs(np.ones(3), size=200, random_state=s), labels, "nll")
             for s in range(3)]
    default = stats.seed_test_interval(seeds, n_resamples=100)
    assert default == stats.seed_test_interval(seeds, n_resamples=100, seed=0)
    assert default.se != stats.seed_test_interval(seeds, n_resamples=100, seed=1).se


def test_an_additive_statistic_gives_float64_resamples_whatever_its_finish_computes_in():
    from calib.stats.test_set import AdditiveStatistic

    stat = AdditiveStatistic(np.array([[1.0], [2.0], [4.0]]),
                             lambda sums, total: (sums[:, 0] / total).astype(np.float32))
    out = stat.resampled(np.array([[3.0, 0.0, 0.0], [1.0, 1.0, 1.0]]))
    assert out.dtype == np.float64
    assert out.tolist() == [1.0, np.float64(np.float32(7 / 3))]


def test_paired_bootstrap_checks_its_probabilities_and_labels_as_the_metrics_do_and_refuses_an_infinite_metric():
    """Before: a NaN in probs gave the interval nan [nan, nan] without a word, and a label -1 indexed the last class
    (a user metric such as the mean probability of the label then scored it). Now probs_a and probs_b are checked as
    calib's metrics check probabilities and labels as class indices, each named; and a metric whose difference is
    not finite (the NLL of a label given probability 0) is refused, since its interval would mean nothing."""
    rng = np.random.default_rng(0)
    pa, pb = rng.dirichlet(np.ones(3), 12), rng.dirichlet(np.ones(3), 12)
    y = rng.integers(0, 3, 12)

    def label_probability(p, labels):
        return float(p[np.arange(len(labels)), labels].mean())

    nan_a = pa.copy()
    nan_a[0, 0] = np.nan
    with pytest.raises(ValueError, match="probs_a contains NaN"):
        paired_bootstrap(label_probability, nan_a, pb, y, n_resamples=100)
    with pytest.raises(ValueError, match="probs_b"):
        paired_bootstrap(label_probability, pa, pb * 2, y, n_resamples=100)
    minus_one = y.copy()
    minus_one[0] = -1
    with pytest.raises(ValueError, match="labels"):
        paired_bootstrap(label_probability, pa, pb, minus_one, n_resamples=100)
    zero = pa.copy()
    zero[0] = 0.0
    zero[0, (y[0] + 1) % 3] = 1.0                     # the label of row 0 gets probability 0: its NLL is infinite

    def raw_nll(p, labels):                           # the NLL without calib's check (metrics.nll refuses a 0)
        with np.errstate(divide="ignore"):
            return float(-np.log(p[np.arange(len(labels)), labels]).mean())

    with pytest.raises(ValueError, match="not finite on the whole test set"):
        paired_bootstrap(raw_nll, zero, pb, y, n_resamples=100)
    ok = paired_bootstrap(label_probability, pa, pb, y, n_resamples=100)
    assert ok.estimate == pytest.approx(label_probability(pa, y) - label_probability(pb, y), abs=1e-15)


# --------------------------------------------------------------- mutation sample C: behaviour the sample found untested

def test_sign_test_with_as_many_wins_as_losses_has_the_binomial_p_value():
    """Two wins, two losses (and a tie, left out): the one-sided p-value is P(X >= 2) for X ~ Bin(4, 1/2) = 11/16, as
    scipy's binomtest gives it; only no win and no loss at all gives p = 1 by convention."""
    out = stats.sign_test([0.1, -0.2, 0.3, -0.1, 0.0])
    assert (out.wins, out.losses, out.ties) == (2, 2, 1)
    assert out.p_value == pytest.approx(11 / 16, rel=1e-12)
    assert out.p_value == pytest.approx(scipy_stats.binomtest(2, 4, 0.5, "greater").pvalue, rel=1e-12)
    assert stats.sign_test([0.0, 0.0]).p_value == 1.0


def test_power_line_detects_at_its_level_and_power():
    """power_line's detectable difference is detectable_difference at the line's level and power: the delta with
    P(T > t_{(1+level)/2, n-1}) = power, T noncentral t (n - 1 df, noncentrality delta sqrt(n) / sd), solved here with
    scipy's nct and brentq."""
    from scipy.optimize import brentq

    a = np.array([0.10, 0.13, 0.11, 0.16, 0.12])
    b = a - np.array([0.01, -0.02, 0.015, 0.0, 0.005])
    sd, n = float(np.std(a - b, ddof=1)), 5
    for level, power in ((0.95, 0.8), (0.9, 0.9)):
        line = stats.power_line(a, b, paper_effect=0.05, level=level, power=power)
        critical = scipy_stats.t.ppf((1 + level) / 2, n - 1)
        delta = brentq(lambda d: scipy_stats.nct.sf(critical, n - 1, d * np.sqrt(n) / sd) - power, 1e-9, 10 * sd,
                       xtol=1e-15)
        assert (line.level, line.power) == (level, power)
        assert line.detectable == pytest.approx(delta, rel=1e-7)


def test_seeds_needed_can_be_two():
    """An effect 100 times the paired SD is detected by 2 seeds (the fewest a t-interval takes) with power ~1: the
    power at n = 2, computed with scipy's nct, is above 0.8."""
    critical = scipy_stats.t.ppf(0.975, 1)
    assert scipy_stats.nct.sf(critical, 1, 100 * np.sqrt(2)) > 0.8
    assert stats.seeds_needed(1.0, 100.0) == 2


def test_kendall_tau_of_all_tied_values_counts_as_zero():
    """A metric that gives every item the same value ties them all: Kendall's tau is undefined, counted as 0 (no
    agreement), in the estimate, every resample and every leave-one-out tau."""
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 2, 50)
    probs = {k: np.full((2, 50, 2), 0.5) for k in "abcd"}
    out = stats.kendall_tau_bootstrap({"a": 0.1, "b": 0.2, "c": 0.3, "d": 0.4}, probs, labels,
                                      lambda p, y: 0.25, n_resamples=100)
    assert (out.tau, out.interval.low, out.interval.high) == (0.0, 0.0, 0.0)
    assert out.leave_one_out == {"a": 0.0, "b": 0.0, "c": 0.0, "d": 0.0}


def test_bootstrap_counts_default_to_seed_0():
    """The default resamples are those of numpy's default_rng(0): draws of the n indices per resample, counted."""
    draws = np.random.default_rng(0).integers(0, 10, size=(60, 10))
    expected = np.array([np.bincount(row, minlength=10) for row in draws], dtype=np.float64)
    np.testing.assert_array_equal(stats.bootstrap_counts(10, 60), expected)


def test_seed_test_interval_says_paired_for_two_arms():
    rng = np.random.default_rng(1)
    labels = rng.integers(0, 3, 200)
    arms = [[metrics.statistic(softmax(rng.normal(size=(200, 3)), axis=1), labels) for _ in range(3)]
            for _ in range(2)]
    one = stats.seed_test_interval(arms[0], n_resamples=100)
    both = stats.seed_test_interval(arms[0], arms[1], n_resamples=100)
    assert one.method == "t-interval over seeds and test samples (100 test-set resamples)"
    assert both.method == "paired t-interval over seeds and test samples (100 test-set resamples)"
