"""calib.experiments.subset_mean_statistic (a mean over some test samples as a statistic of the whole test set, for
the intervals of chapter 11's redrawn figures) and calib.experiments.fit_temperature_focal (Charoenphakdee et al.'s
TS_FL: T by the validation focal loss)."""

import numpy as np
import pytest
from scipy.special import log_softmax

from calib.experiments import SUBSET_MIN_SAMPLES, fit_temperature_focal, subset_mean_statistic
from calib.posthoc import TemperatureScaling
from calib.stats import bootstrap_counts, seed_test_interval


def test_subset_mean_is_the_mean_over_the_subset_in_every_resample():
    rng = np.random.default_rng(0)
    values, mask = rng.normal(size=200), rng.random(200) < 0.3
    stat = subset_mean_statistic(values, mask)
    assert stat.n == 200
    assert stat.value == pytest.approx(values[mask].mean(), rel=1e-12)
    counts = bootstrap_counts(200, 60, seed=1)
    expected = [(c * values)[mask].sum() / c[mask].sum() for c in counts]
    np.testing.assert_allclose(stat.resampled(counts), expected, rtol=1e-12)
    # without a mask: the plain mean; booleans count as 0 and 1 (a share, as |S99| of Mukhoti et al.'s App. F)
    assert subset_mean_statistic(values).value == pytest.approx(values.mean(), rel=1e-12)
    assert subset_mean_statistic(values > 0.5).value == pytest.approx(np.mean(values > 0.5), rel=1e-12)


def test_subsets_that_differ_by_seed_give_one_interval():
    rng = np.random.default_rng(2)
    a = [subset_mean_statistic(rng.normal(1.0, 1.0, 500), rng.random(500) < 0.4) for _ in range(4)]
    b = [subset_mean_statistic(rng.normal(0.0, 1.0, 500), rng.random(500) < 0.4) for _ in range(4)]
    iv = seed_test_interval(a, b, n_resamples=100, seed=0)
    assert iv.estimate == pytest.approx(np.mean([x.value - y.value for x, y in zip(a, b)]), rel=1e-12)
    assert iv.low < iv.estimate < iv.high and iv.low > 0.5      # a difference of 1 in means of ~200 samples


@pytest.mark.parametrize("values, mask, words", [
    (np.ones(50), np.ones(49, dtype=bool), "boolean array of the 50 test samples"),
    (np.ones(50), np.ones(50), "boolean array"),
    (np.ones(50), np.arange(50) < SUBSET_MIN_SAMPLES - 1, "at least 20"),
    (np.r_[np.ones(49), np.nan], None, "values"),
    (np.ones((5, 10)), None, "values"),
])
def test_subset_mean_refuses_bad_input(values, mask, words):
    with pytest.raises(ValueError, match=words):
        subset_mean_statistic(values, mask)


def _temperature_data(n=4000, k=6, temperature=2.0, seed=0):
    """Logits z whose labels are drawn from softmax(z / temperature): over-confident by ``temperature``."""
    rng = np.random.default_rng(seed)
    z = 3.0 * rng.normal(size=(n, k))
    p = np.exp(log_softmax(z / temperature, axis=1))
    y = (p.cumsum(axis=1) > rng.random((n, 1))).argmax(axis=1)
    return z, y


def _focal(z, y, gamma, t):
    log_p = log_softmax(z / t, axis=1)[np.arange(len(y)), y]
    return np.mean(-((-np.expm1(log_p)) ** gamma) * log_p)


def test_ts_by_the_focal_loss_is_the_nll_fit_at_gamma_0_and_softer_above():
    z, y = _temperature_data()
    t_nll = TemperatureScaling(objective="nll").fit(z, y).temperature_
    assert fit_temperature_focal(z, y, 0.0) == pytest.approx(t_nll, rel=1e-3)
    assert 1.8 < t_nll < 2.2
    t3 = fit_temperature_focal(z, y, 3.0)
    # the focal minimiser is under-confident (Charoenphakdee et al., Thm. 5): its temperature exceeds the NLL's
    assert t3 > 1.1 * t_nll
    # and it is the minimum of the validation focal loss
    assert _focal(z, y, 3.0, t3) < min(_focal(z, y, 3.0, 0.98 * t3), _focal(z, y, 3.0, 1.02 * t3))


@pytest.mark.parametrize("kwargs, words", [
    (dict(gamma=-0.5), "gamma"),
    (dict(gamma=1.0, bounds=(2.0, 1.0)), "0 < low < high"),
    (dict(gamma=1.0, bounds=(0.0, 3.0)), "0 < low < high"),
    (dict(gamma=1.0, bounds="wide"), "two temperatures"),
    (dict(gamma=1.0, bounds=(0.05, 0.5)), "widen the bounds"),
])
def test_ts_by_the_focal_loss_refuses_bad_input(kwargs, words):
    z, y = _temperature_data(n=500)
    with pytest.raises(ValueError, match=words):
        fit_temperature_focal(z, y, **kwargs)
