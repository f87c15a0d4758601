"""Tests of the synthetic data generators (calib.data)."""

import numpy as np
import pytest
from scipy.integrate import trapezoid
from scipy.stats import norm

from calib.data import THREE_CLASS_1D, gaussian_1d_joint, gaussian_1d_posterior, make_gaussian_1d


def test_shapes_dtypes_and_seeding():
    x, y, eta = make_gaussian_1d(1000, seed=3)
    assert x.shape == (1000, 1) and x.dtype == np.float32
    assert y.shape == (1000,) and y.dtype == np.int64 and set(np.unique(y)) == {0, 1, 2}
    assert eta.shape == (1000, 3) and eta.dtype == np.float64
    np.testing.assert_allclose(eta.sum(axis=1), 1, atol=1e-15)
    x2, y2, eta2 = make_gaussian_1d(1000, seed=3)
    np.testing.assert_array_equal(x, x2)
    np.testing.assert_array_equal(y, y2)
    assert not np.array_equal(make_gaussian_1d(1000, seed=4)[0], x)
    gen = np.random.default_rng(3)
    np.testing.assert_array_equal(make_gaussian_1d(1000, seed=gen)[1], y)   # same stream as seed=3


def test_posterior_is_bayes_rule():
    x = np.array([-4.0, -1.5, 0.0, 0.7, 3.0])
    mu = np.array(THREE_CLASS_1D["means"])
    dens = norm.pdf(x[:, None], loc=mu, scale=1.0) / 3
    np.testing.assert_allclose(gaussian_1d_joint(x), dens, rtol=1e-13)
    np.testing.assert_allclose(gaussian_1d_posterior(x), dens / dens.sum(axis=1, keepdims=True), rtol=1e-13)
    # the sampled eta is the posterior at the sampled x
    xs, _, eta = make_gaussian_1d(50, seed=0)
    np.testing.assert_allclose(eta, gaussian_1d_posterior(xs), rtol=1e-13)
    # accurate far in the tails, where the densities underflow
    assert gaussian_1d_posterior(np.array([-60.0]))[0, 0] == 1.0
    assert gaussian_1d_posterior(np.array([60.0]))[0, 1] > 0


def test_marginal_integrates_to_one_and_bayes_error():
    grid = np.linspace(-12, 12, 200_001)
    joint = gaussian_1d_joint(grid)
    assert trapezoid(joint.sum(axis=1), grid) == pytest.approx(1.0, abs=1e-9)
    bayes_error = 1 - trapezoid(joint.max(axis=1), grid)
    # equal priors, unit variance, means 1.5 apart: 1 - [2 Phi(0.75) - 1 + 2 Phi(0.75)] / 3
    assert bayes_error == pytest.approx(1 - (4 * norm.cdf(0.75) - 1) / 3, abs=1e-9)


def test_labels_follow_the_posterior():
    """Within bins of x, the label frequencies match the mean posterior (a calibrated generator)."""
    x, y, eta = make_gaussian_1d(200_000, seed=1)
    bins = np.digitize(x[:, 0], np.linspace(-3, 3, 13))
    for b in np.unique(bins):
        m = bins == b
        freq = np.bincount(y[m], minlength=3) / m.sum()
        se = np.sqrt(0.25 / m.sum())
        np.testing.assert_allclose(freq, eta[m].mean(axis=0), atol=5 * se)
    assert np.bincount(y) / len(y) == pytest.approx([1 / 3] * 3, abs=0.005)


def test_other_mixtures_and_errors():
    x, y, eta = make_gaussian_1d(10, means=(0, 2), scale=0.5, priors=(0.9, 0.1), seed=0)
    assert eta.shape == (10, 2)
    with pytest.raises(ValueError, match="priors"):
        make_gaussian_1d(10, priors=(0.5, 0.5))
    with pytest.raises(ValueError, match="scale"):
        make_gaussian_1d(10, scale=0)
    with pytest.raises(ValueError, match="means"):
        make_gaussian_1d(10, means=(1.0,))
    with pytest.raises(ValueError, match="n must be"):
        make_gaussian_1d(0)
