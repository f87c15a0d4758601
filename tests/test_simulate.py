from itertools import product

import numpy as np
import pytest
from scipy import stats as scipy_stats

from calib import metrics, simulate


def test_sample_labels_follow_the_rows():
    rng = np.random.default_rng(0)
    p = np.array([[0.2, 0.5, 0.3], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])
    y = simulate.sample_labels(np.repeat(p, 20000, axis=0), rng).reshape(3, 20000)
    freq = np.stack([np.bincount(row, minlength=3) / 20000 for row in y])
    np.testing.assert_allclose(freq, p, atol=0.01)
    assert np.all(y[1] == 0) and np.all(y[2] == 2)  # zero-probability classes are never drawn


def test_calibrated_logits_are_canonically_calibrated():
    rng = np.random.default_rng(1)
    z, y = simulate.calibrated_logits(200_000, 4, rng, scale=1.5)
    p = simulate.softmax(z)
    # class-wise: within each decile of p_k, the frequency of y == k matches the mean of p_k
    for k in range(4):
        order = np.argsort(p[:, k])
        for part in np.array_split(order, 10):
            assert abs(np.mean(y[part] == k) - p[part, k].mean()) < 0.01
    # top-label: accuracy matches the mean confidence
    assert abs(metrics.accuracy(p, y) - p.max(1).mean()) < 0.005


@pytest.mark.parametrize("binning", ["uniform", "quantile"])
def test_calibrated_bias_is_the_expected_squared_ece(binning):
    rng = np.random.default_rng(2)
    z, _ = simulate.calibrated_logits(300, 5, rng)
    p = simulate.softmax(z)
    bias = simulate.calibrated_ece_bias(p, n_bins=10, binning=binning)
    draws = np.array([metrics.ece(p, simulate.sample_labels(p, rng), n_bins=10, binning=binning, norm="l2") ** 2
                      for _ in range(4000)])
    se = draws.std() / np.sqrt(draws.size)
    assert abs(draws.mean() - bias.l2_squared) < 4 * se
    assert bias.n_nonempty <= 10


def test_calibrated_bias_by_brute_force_on_a_tiny_sample():
    p = np.array([[0.6, 0.4], [0.7, 0.3], [0.9, 0.1], [0.55, 0.45]])
    # E[ECE_2^2] by enumerating the 16 outcomes (argmax is class 0 in every row)
    c = p.max(1)
    total = 0.0
    for outcome in product((0, 1), repeat=4):
        a = np.array(outcome, bool)
        y = np.where(a, 0, 1)
        total += np.prod(np.where(a, c, 1 - c)) * metrics.ece(p, y, n_bins=3, norm="l2") ** 2
    assert simulate.calibrated_ece_bias(p, n_bins=3).l2_squared == pytest.approx(total, rel=1e-12)


def test_expected_ece_exact_karandikar_two_sample_example():
    p = np.array([[0.3, 0.25, 0.25, 0.2]] * 2)
    assert simulate.expected_ece_exact(p) == pytest.approx(0.294, abs=1e-12)
    with pytest.raises(ValueError, match="too many"):
        simulate.expected_ece_exact(np.full((20, 2), 0.5))


def test_sampling_table_shapes_and_consistency():
    rng = np.random.default_rng(3)
    t = simulate.ece_sampling_table([50, 500], [5, 15], rng, n_reps=3)
    assert t.values.shape == (2, 2, 2, 2, 3)
    assert np.all(t.values >= 0)
    assert t.mean("uniform", "l1", 15).shape == (2,)
    # l2 >= l1 on every sample (power-mean inequality)
    assert np.all(t.values[:, 1] >= t.values[:, 0] - 1e-15)
    over = simulate.ece_sampling_table([5000], [15], np.random.default_rng(4), n_reps=2, overconfidence=2.5,
                                       binnings=("uniform",), norms=("l1",))
    assert over.values.min() > 0.1


def test_nudge_regroups_edge_confidences_only():
    p = np.array([[0.5, 0.3, 0.2], [0.75, 0.25, 0.0], [1.0, 0.0, 0.0], [0.6, 0.4, 0.0]])
    q = simulate.nudge_edge_confidences(p, n_bins=4, delta=1e-9)
    np.testing.assert_allclose(q.sum(1), 1, atol=1e-15)
    assert np.array_equal(q.argmax(1), p.argmax(1))
    np.testing.assert_allclose(q.max(1) - p.max(1), [1e-9, 1e-9, 0, 0], atol=1e-18)
    y = np.array([0, 1, 0, 0])
    # after the nudge, calib's right-closed bins group 0.5 with 0.6 and 0.75 with 1.0
    rel = metrics.reliability(q, y, n_bins=4)
    assert list(rel.counts) == [0, 0, 2, 2]


def test_population_errors_hand_example():
    # Zhou et al. (2025) Prop. 4.5 counterexample: k = 2, f = (0.7, 0.3) everywhere, truth (0.5, 0.5)
    e = simulate.population_errors([1.0], [[0.7, 0.3]], [[0.5, 0.5]], rho=2)
    assert e.ce == pytest.approx(np.sqrt(0.08))
    assert e.cwece == pytest.approx(0.2)
    assert e.ece == pytest.approx(0.2)
    assert e.brier == pytest.approx(0.08 + 0.5)


def test_population_errors_group_equal_predictions():
    # two inputs share a prediction: conditioning averages their posteriors, which can make f calibrated
    w = [0.5, 0.5]
    f = [[0.6, 0.4], [0.6, 0.4]]
    eta = [[0.8, 0.2], [0.4, 0.6]]
    e = simulate.population_errors(w, f, eta)
    assert e.ce == pytest.approx(0.0, abs=1e-15) and e.ece == pytest.approx(0.0, abs=1e-15)
    assert e.brier > 0


def test_population_hierarchy_on_random_populations():
    rng = np.random.default_rng(5)
    for _ in range(200):
        k = int(rng.integers(2, 6))
        w, f, eta = simulate.random_population(int(rng.integers(1, 6)), k, rng, n_predictions=2)
        rho = float(rng.uniform(1, 2))
        e = simulate.population_errors(w, f, eta, rho)
        assert e.ce >= e.ece - 1e-12
        assert e.ce >= k ** (1 / rho) * e.cwece - 1e-12
        assert k ** (1 / rho - 0.5) * np.sqrt(e.brier) >= e.ce - 1e-12


def test_ideal_errors_agree_and_group_confidences():
    w = np.array([0.1, 0.2, 0.3, 0.25, 0.15])
    c = np.array([0.5, 0.7, 0.7, 0.9, 0.95])
    q = np.array([0.4, 0.6, 0.8, 0.85, 0.99])
    for p in (1, 2):
        a = simulate.ideal_top_label_ece(w, c, q, p=p, over="confidence")
        b = simulate.ideal_top_label_ece(w, c, q, p=p, over="sample")
        assert a == pytest.approx(b, abs=1e-15)
    # the two 0.7 inputs pool to accuracy 0.72
    expected = 0.1 * 0.1 + 0.5 * abs(0.72 - 0.7) + 0.25 * 0.05 + 0.15 * 0.04
    assert simulate.ideal_top_label_ece(w, c, q) == pytest.approx(expected)


def test_input_errors():
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="Generator"):
        simulate.calibrated_logits(10, 3, 0)
    with pytest.raises(ValueError, match="sum to 1"):
        simulate.population_errors([0.5, 0.6], [[1, 0], [0, 1]], [[1, 0], [0, 1]])
    with pytest.raises(ValueError, match="rho"):
        simulate.population_errors([1.0], [[1, 0]], [[1, 0]], rho=0.5)
    with pytest.raises(ValueError):
        simulate.sample_labels(np.array([0.5, 0.5]), rng)


def test_dirichlet_logits_give_dirichlet_rows():
    alpha, k, n = 0.3, 5, 40_000
    z = simulate.dirichlet_logits(alpha, k, n, np.random.default_rng(3))
    assert z.shape == (n, k) and np.isfinite(z).all()
    q = simulate.softmax(z)
    # moments of the symmetric Dirichlet: E q_j = 1/K, Var q_j = (K - 1) / (K^2 (K alpha + 1))
    np.testing.assert_allclose(q.mean(axis=0), 1 / k, atol=0.005)
    np.testing.assert_allclose(q.var(axis=0), (k - 1) / (k ** 2 * (k * alpha + 1)), rtol=0.03)
    # each coordinate is Beta(alpha, (K - 1) alpha)
    assert scipy_stats.kstest(q[:, 0], scipy_stats.beta(alpha, (k - 1) * alpha).cdf).pvalue > 0.01


def test_dirichlet_logits_are_the_log_space_gamma_draws():
    alpha, k, n = 0.05, 3, 1000
    rng = np.random.default_rng(4)
    expected = np.log(rng.gamma(alpha + 1, size=(n, k))) + np.log1p(-rng.uniform(size=(n, k))) / alpha
    z = simulate.dirichlet_logits(alpha, k, n, np.random.default_rng(4))
    np.testing.assert_array_equal(z, expected)
    # where a direct draw underflows to an exact 0, the logits stay finite
    assert (np.random.default_rng(4).dirichlet(np.full(k, alpha), size=n) == 0).any()
    assert np.isfinite(z).all()


@pytest.mark.parametrize("args, match", [((0.0, 3, 10), "alpha"), ((1.0, 1, 10), "n_classes"),
                                         ((1.0, 3, 0), "n")])
def test_dirichlet_logits_reject_bad_arguments(args, match):
    with pytest.raises(ValueError, match=match):
        simulate.dirichlet_logits(*args, np.random.default_rng(0))
