import numpy as np
import pytest
from scipy.optimize import minimize_scalar
from scipy.special import log_softmax, softmax

from calib.posthoc import MUKHOTI_GRID, TemperatureScaling, fit_temperature_nll


def calibrated_logits(n, k=5, scale=2.5, seed=0):
    """Logits z of a calibrated model (labels drawn from softmax(z)), returned multiplied by ``scale``."""
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(n, k)) * 1.5
    p = softmax(z, axis=1)
    y = (p.cumsum(axis=1) > rng.random((n, 1))).argmax(axis=1)
    return z * scale, y


def mean_nll(z, y, t):
    return -np.mean(log_softmax(z / t, axis=1)[np.arange(len(y)), y])


def test_nll_fit_is_the_exact_minimiser():
    z, y = calibrated_logits(4000, seed=1)
    t = fit_temperature_nll(z, y)
    ref = minimize_scalar(lambda u: mean_nll(z, y, np.exp(u)), bounds=(-3, 3), method="bounded",
                          options={"xatol": 1e-12}).x
    assert t == pytest.approx(np.exp(ref), rel=1e-6)
    h = 1e-5 * t
    slope = (mean_nll(z, y, t + h) - mean_nll(z, y, t - h)) / (2 * h)
    assert abs(slope) < 1e-8


def test_over_confident_model_recovers_its_scale_and_keeps_accuracy():
    z, y = calibrated_logits(100_000, seed=2)
    ts = TemperatureScaling("nll").fit(z, y)
    assert ts.temperature == pytest.approx(2.5, abs=0.05)
    assert np.array_equal(ts.predict_proba(z).argmax(1), z.argmax(1))
    grid = TemperatureScaling("ece").fit(z, y)
    assert grid.temperature == pytest.approx(2.5, abs=0.2)
    assert grid.temperature in MUKHOTI_GRID


def test_ece_grid_picks_the_first_minimum_of_the_validation_ece():
    from calib.metrics import ece

    z, y = calibrated_logits(3000, seed=3)
    ts = TemperatureScaling("ece").fit(z, y)
    brute = [ece(softmax(z / t, axis=1), y, n_bins=15) for t in MUKHOTI_GRID]
    assert ts.temperature == MUKHOTI_GRID[int(np.argmin(brute))]
    np.testing.assert_allclose(ts.grid_scores, brute, rtol=0, atol=1e-15)
    assert np.allclose(MUKHOTI_GRID[[0, 9, -1]], [0.1, 1.0, 10.0])


def test_custom_grid_and_torch_input():
    torch = pytest.importorskip("torch")
    z, y = calibrated_logits(2000, seed=4)
    ts = TemperatureScaling("ece", grid=[1.0, 2.5, 4.0]).fit(torch.tensor(z, dtype=torch.float32), torch.tensor(y))
    assert ts.temperature in (1.0, 2.5, 4.0)
    probs = ts.predict_proba(torch.tensor(z))
    np.testing.assert_allclose(probs.sum(1), 1, atol=1e-12)


def test_predicted_logits_are_divided_by_t():
    z, y = calibrated_logits(500, seed=5)
    ts = TemperatureScaling().fit(z, y)
    np.testing.assert_allclose(ts.predict_logits(z), z / ts.temperature)
    assert "temperature=" in repr(ts)


@pytest.mark.parametrize("logits, labels, match", [
    (np.full((3, 2), np.nan), np.array([0, 1, 0]), "logits contains NaN"),
    (np.array([[0.0, np.inf], [1.0, 0.0]]), np.array([0, 1]), "logits contains NaN or infinity"),
    (np.zeros(4), np.array([0, 1, 0, 1]), "logits must be 2-D"),
    (np.zeros((4, 3)), np.array([0, 1, 2]), "labels has 3 entries"),
    (np.zeros((4, 3)), np.array([0, 1, 2, 3]), r"labels must lie in \[0, 3\)"),
    (np.zeros((2, 3)), np.array([0.0, 1.0]), "labels has dtype float64"),
    (np.zeros((0, 3)), np.array([], dtype=int), "logits is empty"),
])
def test_bad_input_is_named(logits, labels, match):
    for objective in ("nll", "ece"):
        with pytest.raises(ValueError, match=match):
            TemperatureScaling(objective).fit(logits, labels)


def test_bad_settings_and_unfitted_use():
    with pytest.raises(ValueError, match="objective"):
        TemperatureScaling("brier")
    with pytest.raises(ValueError, match="n_bins"):
        TemperatureScaling("ece", n_bins=0)
    with pytest.raises(ValueError, match="grid"):
        TemperatureScaling("ece", grid=[1.0, -1.0]).fit(np.zeros((2, 2)), np.array([0, 1]))
    with pytest.raises(ValueError, match="not fitted"):
        TemperatureScaling().predict_proba(np.zeros((2, 2)))


def test_no_finite_temperature_is_reported_not_clamped():
    z = np.array([[5.0, 0.0], [0.0, 5.0], [4.0, 1.0]])
    y = np.array([0, 1, 0])  # every sample correct: the NLL falls towards 0 as T -> 0
    with pytest.raises(ValueError, match="no finite temperature"):
        TemperatureScaling("nll").fit(z, y)
    with pytest.raises(ValueError, match="no information"):
        TemperatureScaling("nll").fit(z, 1 - y)
