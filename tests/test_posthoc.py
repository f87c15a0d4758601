"""calib.posthoc: temperature scaling (NLL, ECE grid, SB-ECE) and focal temperature scaling (Komisarenko & Kull 2024,
Secs. 4.2, 5.1 and 5.2): fits against brute force, the grid kernel against the per-point loop, input checks."""

from __future__ import annotations

import contextlib
import re
from pathlib import Path

import numpy as np
import pytest
import torch
from scipy.optimize import minimize_scalar
from scipy.special import log_softmax, softmax

from calib import metrics
from calib.focal import focal_map, focal_optimal_prediction, log_focal_map
from calib.losses import soft_binned_ece_loss
from calib.posthoc import (KOMISARENKO_GAMMAS, KOMISARENKO_TEMPERATURES, MUKHOTI_GRID, FocalTemperatureScaling,
                           GridEdgeWarning, TemperatureScaling, fit_temperature_grid, fit_temperature_nll,
                           fit_temperature_sb_ece,
                           focal_temperature_scores)


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
    assert ts.temperature_ == pytest.approx(2.5, abs=0.05)
    assert np.array_equal(ts.predict_proba(z).argmax(1), z.argmax(1))
    grid = TemperatureScaling("ece").fit(z, y)
    assert grid.temperature_ == pytest.approx(2.5, abs=0.2)
    assert grid.temperature_ in MUKHOTI_GRID


def test_ece_grid_picks_the_first_minimum_of_the_validation_ece():
    from calib.metrics import ece

    z, y = calibrated_logits(3000, seed=3)
    ts = TemperatureScaling("ece").fit(z, y)
    brute = [ece(softmax(z / t, axis=1), y, n_bins=15) for t in MUKHOTI_GRID]
    assert ts.temperature_ == MUKHOTI_GRID[int(np.argmin(brute))]
    np.testing.assert_allclose(ts.grid_scores_, brute, rtol=0, atol=1e-15)
    assert np.allclose(MUKHOTI_GRID[[0, 9, -1]], [0.1, 1.0, 10.0])


def test_custom_grid_and_torch_input():
    torch = pytest.importorskip("torch")
    z, y = calibrated_logits(2000, seed=4)
    ts = TemperatureScaling("ece", grid=[1.0, 2.5, 4.0]).fit(torch.tensor(z, dtype=torch.float32), torch.tensor(y))
    assert ts.temperature_ in (1.0, 2.5, 4.0)
    probs = ts.predict_proba(torch.tensor(z))
    np.testing.assert_allclose(probs.sum(1), 1, atol=1e-12)


def test_predicted_logits_are_divided_by_t():
    z, y = calibrated_logits(500, seed=5)
    ts = TemperatureScaling().fit(z, y)
    np.testing.assert_allclose(ts.predict_logits(z), z / ts.temperature_)
    assert "temperature_=" in repr(ts)


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
    z, y = calibrated_logits(50, seed=5)
    with pytest.raises(ValueError, match="objective"):
        TemperatureScaling("brier").fit(z, y)                  # parameters are checked in fit (scikit-learn)
    with pytest.raises(ValueError, match="n_bins"):
        TemperatureScaling("ece", n_bins=0).fit(z, y)
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


def test_fts_grid_at_gamma_minus_one():
    """FocalTemperatureScaling accepts gamma_ev = -1 (the released code's grid has it) and refuses gamma < -1."""
    from calib import metrics
    from calib.posthoc import FocalTemperatureScaling, focal_temperature_scores

    rng = np.random.default_rng(5)
    z = rng.normal(size=(600, 5)) * rng.uniform(0.3, 8.0, size=(600, 1))
    z[:10] *= 30                                                   # saturated rows: 1 + gamma r_top -> 0
    y = rng.integers(0, 5, 600)
    temps = np.array([0.3, 1.0, 2.0])
    for objective, metric, rows in [("ece", metrics.adaptive_ece, slice(None)), ("nll", metrics.nll, slice(10, None))]:
        grid = focal_temperature_scores(z[rows], y[rows], [-1.0], temps, objective=objective)[0]
        loop = [metric(focal_map(z[rows] / t, -1.0), y[rows]) for t in temps]
        np.testing.assert_allclose(grid, loop, rtol=1e-11)
    assert np.all(np.isfinite(focal_temperature_scores(z, y, [-1.0], temps, objective="nll")))   # log space
    fts = FocalTemperatureScaling(gammas=[-1.0, 0.0, 1.0], temperatures=temps, objective="nll").fit(z, y)
    assert np.all(np.isfinite(fts.grid_scores_))
    for bad in [[-1.5, 1.0], [-1.0000001]]:
        with pytest.raises(ValueError, match=r">= -1"):
            FocalTemperatureScaling(gammas=bad).fit(z, y)
        with pytest.raises(ValueError, match=r">= -1"):
            focal_temperature_scores(z, y, bad, temps)


torch.set_num_threads(1)

#: a T grid around the planted T = 0.5, with the paper's step 0.01 (the full grid is tested on small data)
TEMPS = np.round(np.arange(25, 101) * 0.01, 10)


def random_logits(n, k, seed, scale=6.0):
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(n, k)) * rng.uniform(0.3, scale, size=(n, 1))
    return z, rng.integers(0, k, n)


def loop_scores(z, y, gammas, temps, objective):
    """The reference: form focal_map(z / T, gamma) at every grid point and score it with calib.metrics."""
    def score(p):
        if objective == "ece":
            return metrics.adaptive_ece(p, y)
        if p[np.arange(len(y)), y].min() < 1e-290:       # the log of a subnormal probability is inexact
            return np.nan
        return metrics.nll(p, y)

    return np.array([[score(focal_map(z / t, float(g))) for t in temps] for g in gammas])


def log_softmax_nll(z, y, t):
    return float(-np.mean(log_softmax(z / t, axis=1)[np.arange(len(y)), y]))


@pytest.fixture(scope="module")
def planted():
    """Labels drawn from eta, logits whose FTS with (gamma, T) = (1, 0.5) returns eta exactly."""
    rng = np.random.default_rng(7)
    eta = rng.dirichlet(np.full(5, 0.6), size=20_000)
    y = (rng.uniform(size=(len(eta), 1)) > np.cumsum(eta, axis=1)).sum(axis=1)
    q = focal_optimal_prediction(eta, 1.0)                 # Psi^1(q) = eta
    z = 0.5 * np.log(q)                                    # softmax(z / 0.5) = q
    return z, y, eta


# ------------------------------------------------------------------------------------- the grid kernel

@pytest.mark.parametrize("objective", ["ece", "nll"])
def test_grid_scores_equal_the_loop(objective):
    z, y = random_logits(2000, 10, 0, scale=6.0 if objective == "ece" else 3.0)
    gammas = np.array([-0.9, -0.5, 0.0, 0.05, 1.0, 5.0, 20.0])
    temps = np.array([0.2, 0.7, 1.0, 3.3])
    fast = focal_temperature_scores(z, y, gammas, temps, objective=objective)
    assert fast.shape == (7, 4)
    ref = loop_scores(z, y, gammas, temps, objective)
    assert np.isfinite(ref).sum() >= 26
    np.testing.assert_allclose(fast[np.isfinite(ref)], ref[np.isfinite(ref)], rtol=1e-11, atol=1e-14)


def test_nll_is_exact_where_probabilities_underflow():
    """Against 60-digit arithmetic, at labels whose FTS probability is below 1e-300 (focal_map's output is 0)."""
    mp = pytest.importorskip("mpmath")
    mp.mp.dps = 60
    z = np.array([[3.1, -2.0, 0.4, -5.5], [0.0, 1.0, -60.0, 2.0], [10.0, -140.0, 0.0, 1.0]])
    y = np.array([3, 2, 1])
    for g, t in [(20.0, 0.2), (5.0, 0.1), (-0.5, 0.05), (1.0, 1.0)]:
        expected = 0
        for row, lab in zip(z, y):
            zz = [mp.mpf(float(v)) / mp.mpf(t) for v in row]
            top = int(np.argmax(row))
            e = [mp.e ** (v - zz[top]) for v in zz]
            others = sum(e[:top] + e[top + 1:])                         # (1 - q_top) / q_top
            log_q = [v - zz[top] - mp.log1p(others) for v in zz]
            q = [mp.e ** v for v in log_q]
            rest = [others / (1 + others) if j == top else 1 - q[j] for j in range(len(q))]   # 1 - q_j
            log_w = [lq - g * mp.log(rj) - mp.log(1 - g * qj * lq / rj) for lq, qj, rj in zip(log_q, q, rest)]
            expected -= (log_w[lab] - mp.log(sum(mp.e ** (v - log_w[top]) for v in log_w)) - log_w[top]) / len(y)
        got = focal_temperature_scores(z, y, [g], [t], objective="nll")[0, 0]
        assert got == pytest.approx(float(expected), rel=1e-13)


def test_grid_scores_with_saturated_rows():
    z, y = random_logits(1500, 7, 1)
    z[:100, 0] += 2000.0                      # top class with probability 1 - e^-2000
    z[100:200, 1] += 40.0
    z[200:300, 2] -= 3000.0                   # a class with probability e^-3000
    y[:50] = 3                                # labels on classes of probability ~ e^-2000
    gammas, temps = np.array([-0.5, 0.0, 0.5, 5.0]), np.array([0.05, 0.5, 2.0])
    ece = focal_temperature_scores(z, y, gammas, temps, objective="ece")
    np.testing.assert_allclose(ece, loop_scores(z, y, gammas, temps, "ece"), rtol=1e-12, atol=1e-15)
    # the NLL stays finite and exact where focal_map's probabilities underflow to 0
    nll = focal_temperature_scores(z, y, gammas, temps, objective="nll")
    assert np.all(np.isfinite(nll))
    # at gamma = 0 it is the NLL of softmax(z / T), computed from the log-softmax
    np.testing.assert_allclose(nll[1], [log_softmax_nll(z, y, t) for t in temps], rtol=1e-12)


def test_ece_rows_handle_ties_like_metrics():
    """Equal confidences (repeated rows, saturated rows) are split as calib.metrics splits them."""
    z, y = random_logits(1000, 4, 2)
    z = np.repeat(z[:250], 4, axis=0)         # every row four times, with different labels
    z[:300, 0] += 200.0                       # confidence exactly 1.0 for 300 rows
    gammas, temps = np.array([0.0, 1.0]), np.array([0.5, 1.0])
    np.testing.assert_allclose(focal_temperature_scores(z, y, gammas, temps), loop_scores(z, y, gammas, temps, "ece"),
                               rtol=1e-12, atol=1e-15)


def test_defaults_are_the_papers_grid():
    assert KOMISARENKO_GAMMAS.tolist() == [-0.5, -0.25, 0.05, 0.25, 0.37, 0.5, 0.75, 1, 5]
    assert len(KOMISARENKO_TEMPERATURES) == 500
    assert KOMISARENKO_TEMPERATURES[0] == 0.01 and KOMISARENKO_TEMPERATURES[-1] == 5.0
    assert KOMISARENKO_TEMPERATURES[122] == 1.23
    z, y = random_logits(300, 3, 3)
    assert focal_temperature_scores(z, y).shape == (9, 500)


def test_threads_give_the_same_scores(monkeypatch):
    import calib.posthoc as posthoc

    z, y = random_logits(800, 6, 4)
    temps = np.linspace(0.1, 3, 13)
    one = focal_temperature_scores(z, y, temperatures=temps)
    monkeypatch.setattr(posthoc.focal_temperature, "n_threads", lambda work, **kw: 3)
    np.testing.assert_array_equal(focal_temperature_scores(z, y, temperatures=temps), one)


# ------------------------------------------------------------------------------ FocalTemperatureScaling

def test_recovers_a_planted_gamma_and_temperature(planted):
    z, y, eta = planted
    fts = FocalTemperatureScaling(objective="nll", temperatures=TEMPS).fit(z, y)
    assert fts.gamma_ == 1.0
    assert fts.temperature_ == pytest.approx(0.5, abs=0.02)
    # the fitted map is (close to) the truth, far closer than the raw softmax
    p = fts.predict_proba(z)
    assert np.abs(p - eta).max() < 0.02 < np.abs(softmax(z, axis=1) - eta).max()
    # the best plain TS on the same grid cannot reach it
    ts = FocalTemperatureScaling(objective="nll", gammas=[0.0], temperatures=TEMPS).fit(z, y)
    assert ts.score_ > fts.score_ + 1e-3


def test_ece_objective_on_planted_logits(planted):
    z, y, eta = planted
    fts = FocalTemperatureScaling(objective="ece", temperatures=TEMPS).fit(z, y)
    assert fts.grid_scores_.shape == (9, len(TEMPS))
    assert fts.score_ == fts.grid_scores_.min() == pytest.approx(metrics.adaptive_ece(fts.predict_proba(z), y),
                                                                 abs=1e-14)
    # the chosen map is calibrated against the true posterior
    p = fts.predict_proba(z)
    top = p.argmax(axis=1)
    assert np.mean(np.abs(p.max(axis=1) - eta[np.arange(len(y)), top])) < 0.02


def test_line_search(planted):
    z, y, _ = planted
    grid = FocalTemperatureScaling(objective="nll", temperatures=TEMPS).fit(z, y)
    line = FocalTemperatureScaling(objective="nll", search="line", temperatures=TEMPS).fit(z, y)
    assert line.grid_scores_ is None and line.path_["n_evaluations"] <= 3 * len(TEMPS)
    ts = FocalTemperatureScaling(objective="nll", gammas=[0.0], temperatures=TEMPS).fit(z, y)
    assert line.path_["anchor_temperatures"][0] == ts.temperature_      # the gamma = 0 anchor is TS
    assert line.score_ <= ts.score_                                        # so the line search contains TS
    assert line.score_ <= grid.score_ + 2e-3
    assert line.gamma_ == pytest.approx(1.0, abs=0.1) and line.temperature_ == pytest.approx(0.5, abs=0.05)
    # the points on the line lie on the line through the anchors' optima
    (t_a, t_b), g_line, t_line = line.path_["anchor_temperatures"], line.path_["gammas"], line.path_["temperatures"]
    np.testing.assert_allclose(t_line, t_a + (t_b - t_a) * g_line, rtol=1e-12)


def test_line_search_scores_are_the_pairs():
    z, y = random_logits(1500, 5, 5)
    fts = FocalTemperatureScaling(objective="ece", search="line", temperatures=np.linspace(0.2, 3, 15)).fit(z, y)
    g, t, s = fts.path_["gammas"], fts.path_["temperatures"], fts.path_["scores"]
    assert len(s) == len(g) == len(t) > 0 and np.all(t > 0)
    expected = [focal_temperature_scores(z, y, [gi], [ti])[0, 0] for gi, ti in zip(g, t)]
    np.testing.assert_allclose(s, expected, rtol=1e-13)


def test_gamma_zero_is_temperature_scaling():
    z, y = random_logits(2000, 4, 6)
    temps = np.round(np.arange(1, 301) * 0.01, 10)
    fts = FocalTemperatureScaling(objective="nll", gammas=[0.0], temperatures=temps).fit(z, y)
    nlls = [log_softmax_nll(z, y, t) for t in temps]
    assert fts.temperature_ == temps[int(np.argmin(nlls))]
    np.testing.assert_allclose(fts.predict_proba(z), softmax(z / fts.temperature_, axis=1), atol=1e-15)


def test_predict_proba_keeps_accuracy_and_accepts_torch():
    z, y = random_logits(3000, 10, 8)
    for obj in ["ece", "nll"]:
        fts = FocalTemperatureScaling(objective=obj, temperatures=np.linspace(0.5, 3, 11)).fit(torch.tensor(z), y)
        p = fts.predict_proba(z)
        assert isinstance(p, np.ndarray) and p.dtype == np.float64
        np.testing.assert_allclose(p.sum(axis=1), 1, atol=1e-12)
        np.testing.assert_array_equal(p.argmax(axis=1), z.argmax(axis=1))
        np.testing.assert_allclose(p, focal_map(z / fts.temperature_, fts.gamma_), atol=1e-15)
        p32 = fts.predict_proba(torch.tensor(z, dtype=torch.float32))   # a tensor in: a tensor of its dtype out
        assert isinstance(p32, torch.Tensor) and p32.dtype == torch.float32
        np.testing.assert_allclose(p32.numpy(), p, atol=1e-6)
    assert "gamma_=" in repr(fts)


def test_errors():
    z, y = random_logits(50, 3, 9)
    with pytest.raises(ValueError, match="not fitted"):
        FocalTemperatureScaling().predict_proba(z)
    with pytest.raises(ValueError, match="objective"):
        FocalTemperatureScaling(objective="brier").fit(z, y)
    with pytest.raises(ValueError, match="search"):
        FocalTemperatureScaling(search="random").fit(z, y)
    with pytest.raises(ValueError, match="gammas"):
        FocalTemperatureScaling(gammas=[-1.5, 1.0]).fit(z, y)          # the map exists for gamma >= -1 only
    with pytest.raises(ValueError, match="temperatures"):
        FocalTemperatureScaling(temperatures=[0.0, 1.0]).fit(z, y)
    with pytest.raises(ValueError, match="anchors"):
        FocalTemperatureScaling(anchors=(1.0, 1.0)).fit(z, y)
    with pytest.raises(ValueError, match="labels"):
        FocalTemperatureScaling().fit(z, y[:-1])
    with pytest.raises(ValueError, match="NaN"):
        FocalTemperatureScaling().fit(np.where(z > 1, np.nan, z), y)
    with pytest.raises(ValueError, match="n_bins"):
        focal_temperature_scores(z, y, n_bins=0)


def test_ts_sb_ece_is_a_stationary_point_and_deterministic():
    rng = np.random.default_rng(5)
    z = rng.normal(size=(3000, 10)) * 3
    p = 0.92 * softmax(z, axis=1) + 0.008
    y = (p.cumsum(1) > rng.random((3000, 1))).argmax(1)
    ts = TemperatureScaling("sb-ece").fit(z, y)
    again = TemperatureScaling("sb-ece").fit(z, y)
    assert ts.temperature_ == again.temperature_
    t = ts.temperature_

    def f(temp):
        return soft_binned_ece_loss(torch.tensor(z / temp), torch.tensor(y), temperature=0.01, norm="l2").item()

    assert ts.optimizer_result_.fun == pytest.approx(f(t), rel=1e-12)
    h = 1e-5
    assert abs((f(t * (1 + h)) - f(t * (1 - h))) / (2 * h)) < 1e-6           # d/d log T = 0
    grid = np.exp(np.linspace(np.log(0.5), np.log(3), 200))
    assert f(t) <= min(f(g) for g in grid) + 1e-9                              # the global minimum here
    nll_t = TemperatureScaling("nll").fit(z, y).temperature_
    assert t < nll_t                                                           # label noise: NLL over-softens
    np.testing.assert_allclose(ts.predict_proba(z), softmax(z / t, axis=1))


def test_ts_sb_ece_options_and_errors():
    rng = np.random.default_rng(6)
    z = rng.normal(size=(500, 5)) * 2
    y = (softmax(z, axis=1).cumsum(1) > rng.random((500, 1))).argmax(1)
    t_lb, res = fit_temperature_sb_ece(z * 2, y, sb_temperature=0.02, estimator="label", norm="l1", start=1.0)
    assert res.success and 1.0 < t_lb < 4.0
    with pytest.raises(ValueError, match="objective="):
        TemperatureScaling("sbece").fit(z, y)
    with pytest.raises(ValueError, match="sb_temperature"):
        TemperatureScaling("sb-ece", sb_temperature=-1).fit(z, y)


@pytest.mark.parametrize("gamma", [-1.0, 1.0, 50.0, 1e4, 1e8])
def test_fts_grid_agrees_with_the_map_at_any_gamma(gamma):
    """The grid kernel sums the non-top weights in linear space for speed; where (1 - q)^-gamma leaves the float
    range (gamma = 1e4: 0.61 against the map's 0.355 before) it redoes those rows in log space."""
    rng = np.random.default_rng(0)
    z = rng.normal(size=(500, 5)) * 3
    y = rng.integers(0, 5, 500)
    for temperature in (0.5, 2.0):
        ece = focal_temperature_scores(z, y, [gamma], [temperature], objective="ece")[0, 0]
        nll = focal_temperature_scores(z, y, [gamma], [temperature], objective="nll")[0, 0]
        assert ece == pytest.approx(metrics.adaptive_ece(focal_map(z / temperature, gamma), y), abs=1e-12)
        log_p = log_focal_map(z / temperature, gamma)[np.arange(500), y]
        assert np.isfinite(nll) and nll == pytest.approx(-log_p.mean(), rel=1e-12)


def test_ts_on_a_grid_warns_and_reports_an_optimum_at_the_edge():
    rng = np.random.default_rng(0)
    z = rng.normal(size=(2000, 10))
    y = np.array([rng.choice(10, p=np.exp(r) / np.exp(r).sum()) for r in z])
    with pytest.warns(GridEdgeWarning, match=r"T = 10 .*at the grid's largest temperature.*"
                                             r"grid=np.geomspace\(0.1, 1e\+03, 200\)"):
        ts = TemperatureScaling("ece").fit(z * 50, y)
    assert ts.temperature_ == 10.0 and ts.at_edge_ == "high"
    with pytest.warns(GridEdgeWarning, match="at the grid's smallest temperature"):
        assert TemperatureScaling("ece").fit(z / 50, y).at_edge_ == "low"
    wide = TemperatureScaling("ece", grid=np.geomspace(0.1, 1e3, 200)).fit(z * 50, y)
    assert wide.at_edge_ is None and 20 < wide.temperature_ < 100              # the NLL fit gives about 50
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert TemperatureScaling("ece").fit(z, y).at_edge_ is None           # an inner optimum: no warning


# ----------------------------------------------------------------------------------------------------------
# the estimator protocol and the array policy (issue 31, item 5)
# ----------------------------------------------------------------------------------------------------------

def test_scikit_learn_clone_get_params_and_set_params():
    from sklearn.base import clone

    grid = np.array([1.0, 2.0])
    ts = TemperatureScaling("ece", grid=grid, n_bins=10)
    assert ts.get_params()["grid"] is grid and ts.get_params()["n_bins"] == 10   # stored as given
    copy = clone(ts)                                  # raised TypeError before (checks in __init__)
    assert copy.get_params()["objective"] == "ece" and not hasattr(copy, "temperature_")
    fts = clone(FocalTemperatureScaling(objective="nll", gammas=[0.0, 1.0]))
    assert fts.get_params()["gammas"] == [0.0, 1.0] and fts.get_params()["search"] == "grid"
    assert ts.set_params(objective="nll") is ts and ts.objective == "nll"
    with pytest.raises(ValueError, match="no parameter 'temperature'"):
        ts.set_params(temperature=2.0)
    z, y = calibrated_logits(2000, seed=11)
    assert clone(ts).fit(z, y).temperature_ == TemperatureScaling("nll").fit(z, y).temperature_


def test_old_attribute_names_are_deprecated_aliases():
    z, y = calibrated_logits(2000, seed=12)
    ts = TemperatureScaling("ece").fit(z, y)
    for old in ("temperature", "grid_scores", "at_edge", "optimizer_result"):
        with pytest.warns(DeprecationWarning, match=rf"TemperatureScaling.{old} is deprecated; use .*{old}_"):
            value = getattr(ts, old)
        assert value is getattr(ts, old + "_")
    fts = FocalTemperatureScaling(temperatures=np.linspace(0.5, 4, 8), gammas=[0.0, 1.0]).fit(z, y)
    for old in ("gamma", "temperature", "grid_scores", "path"):
        with pytest.warns(DeprecationWarning, match=f"FocalTemperatureScaling.{old} is deprecated"):
            assert getattr(fts, old) is getattr(fts, old + "_")
    assert not hasattr(fts, "score")       # scikit-learn's name of a scoring method: no alias of score_ (issue 43)
    with pytest.warns(DeprecationWarning):
        ts.temperature = 3.0
    assert ts.temperature_ == 3.0


def test_array_policy_tensor_in_tensor_out_numpy_in_float64_out():
    z, y = calibrated_logits(500, seed=13)
    ts = TemperatureScaling().fit(z, y)
    reference = softmax(z / ts.temperature_, axis=1)
    for dtype, atol in ((torch.float64, 1e-15), (torch.float32, 1e-6), (torch.bfloat16, 1e-2)):
        p = ts.predict_proba(torch.tensor(z, dtype=dtype))
        assert isinstance(p, torch.Tensor) and p.dtype == dtype and p.device.type == "cpu"
        np.testing.assert_allclose(p.double().numpy(), reference, atol=atol)
    assert ts.predict_proba(torch.tensor(z, dtype=torch.float64, requires_grad=True)).requires_grad
    for arr in (z.astype(np.float32), z, z.tolist()):
        p = ts.predict_proba(arr)
        assert isinstance(p, np.ndarray) and p.dtype == np.float64
    assert isinstance(ts.predict_logits(torch.tensor(z)), torch.Tensor)
    p_map = focal_map(torch.tensor(z, dtype=torch.float32), 1.0)       # the same policy for focal_map
    assert isinstance(p_map, torch.Tensor) and p_map.dtype == torch.float32
    assert isinstance(metrics.ece(torch.tensor(reference), torch.tensor(y)), float)   # metrics: a float
    with pytest.raises(ValueError, match="NaN"):
        ts.predict_proba(torch.full((2, 5), float("nan")))           # 5 columns: the K of the fit


# ----------------------------------------------------------------------------------------------------------
# issue 24: grid edges, constant logits, memory
# ----------------------------------------------------------------------------------------------------------

def test_fts_reports_a_temperature_at_the_grid_edge():
    """Item 5: FTS picked T = 5.0, the grid's last point, silently; now it warns like TemperatureScaling."""
    rng = np.random.default_rng(0)
    z = rng.normal(size=(2000, 10))
    y = np.array([rng.choice(10, p=np.exp(r) / np.exp(r).sum()) for r in z])
    with pytest.warns(GridEdgeWarning, match=r"T = 5 .*largest temperature.*temperatures=np.geomspace\(0.01, 500"):
        fts = FocalTemperatureScaling().fit(100 * z, y)
    assert fts.temperature_ == 5.0 and fts.at_edge_ == "high"
    with pytest.warns(GridEdgeWarning, match="smallest temperature"):
        assert FocalTemperatureScaling(objective="nll").fit(z / 100, y).at_edge_ == "low"
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert FocalTemperatureScaling().fit(2.5 * z, y).at_edge_ is None           # inner optimum: silent


def test_noisy_ece_objective_near_the_edge_is_reported():
    """Item 6: the validation ECE is noisy, so its minimum can land a step inside the grid (T = 9.9) while the
    optimum lies beyond it (the NLL fit gives 11.9); the edge check used to look at the last point only."""
    rng = np.random.default_rng(5)
    z = rng.normal(size=(2000, 10))
    y = np.array([rng.choice(10, p=np.exp(r) / np.exp(r).sum()) for r in z])
    with pytest.warns(GridEdgeWarning, match=r"T = 9.9 .*among the grid's 5 highest temperatures"):
        ts = TemperatureScaling("ece").fit(12 * z, y)
    assert ts.temperature_ == 9.9 and ts.at_edge_ == "high"
    assert TemperatureScaling("nll").fit(12 * z, y).temperature_ > 11
    wide = TemperatureScaling("ece", grid=np.geomspace(1, 100, 200)).fit(12 * z, y)
    assert wide.at_edge_ is None and 10 < wide.temperature_ < 15


def test_grid_edge_within_sampling_noise():
    """A best score a few steps inside the grid that the edge region matches within 1 / (2 sqrt(N)) is reported;
    one the edge region does not match is not."""
    from calib.posthoc.grid import grid_edge as _grid_edge

    grid = np.arange(1, 101) * 0.1
    scores = np.linspace(1.0, 0.5, 100)
    scores[80] = 0.49                                  # best at T = 8.1, the edge region's best is 0.0105 above
    with pytest.warns(GridEdgeWarning, match="within 0.011 .* of the best score among the grid's highest 5"):
        assert _grid_edge(grid, scores, 0.5 / np.sqrt(2000), lambda e: "wider") == "high"
    assert _grid_edge(grid, scores, 0.5 / np.sqrt(10 ** 6), lambda e: "wider") is None


def test_constant_logits_say_what_is_wrong():
    """Item 22: constant logits were said to 'classify every validation sample correctly'."""
    y = np.array([0, 1, 2, 1])
    for objective in ("nll", "ece"):
        with pytest.raises(ValueError, match="every row is constant .* carries no information"):
            TemperatureScaling(objective).fit(np.full((4, 3), 2.0), y)


def test_ece_grid_scores_equal_the_probabilities_path_bit_for_bit():
    """The row-block grid (no (N, K) probabilities) gives exactly metrics.ece of softmax(z / t), tied rows too."""
    z, y = calibrated_logits(3000, k=7, seed=14)
    z[:50, 1] = z[:50, 0] = z[:50].max(axis=1) + 1.0    # exact ties for the top class
    z[50:60, 2] = np.nextafter(z[50:60].max(axis=1), np.inf)   # near ties
    z = z.astype(np.float32)
    t, scores = fit_temperature_grid(z, y)
    brute = np.array([metrics.ece(softmax(z.astype(np.float64) / g, axis=1), y) for g in MUKHOTI_GRID])
    np.testing.assert_array_equal(scores, brute)
    assert t == MUKHOTI_GRID[int(np.argmin(brute))]


def _edge_logit_gap(edge: float, t: float) -> float:
    """A gap d with top-label confidence 1 / (1 + exp(-d / t)) of the logits (d, 0) exactly ``edge`` (a float64 edge
    i / M; found by stepping d by ulps from the real solution)."""
    d = t * np.log(edge / (1 - edge))
    for _ in range(10_000):
        if 1.0 / (1.0 + np.exp(0.0 / t - d / t)) == edge:
            return d
        d = np.nextafter(d, np.inf if 1.0 / (1.0 + np.exp(-d / t)) < edge else -np.inf)
    raise AssertionError(f"no gap gives the edge {edge}")


@pytest.mark.parametrize("k", [3, 12, 70])
def test_batched_ece_grid_scores_equal_ece_of_softmax_per_temperature_exactly(k):
    """The grid's scores (class-by-class row sums, all temperatures' ECEs in one bincount) are, to the bit,
    metrics.ece(softmax(z / t), y) at each t, on logits with exact ties, confidences exactly on the edges i / 15
    (three tied top logits: 1/3 = 5/15 on the tied rows' path; constructed gaps: 14/15 and 8/15 at t = 1 on the fast
    path; saturated rows: 1), a near-tied row, float32 input, and K below 8, up to 64 and beyond (numpy's row sums);
    with sample weights, the weighted ECE of the same probabilities at each t."""
    from calib.posthoc._common import weighted_top_label_ece

    rng = np.random.default_rng(k)
    z, y = calibrated_logits(600, k=k, seed=k)
    z[:40, :3] = z[:40].max(axis=1, keepdims=True) + 2.0     # three-way exact ties, the rest far below:
    z[:40, 3:] = -2000.0                                   # confidence 1/3, the edge 5/15, at every t
    z[40:60] = -2000.0                                     # one logit alone: confidence 1.0
    z[40:60, 1] = 5.0
    for row, edge in ((60, 14 / 15), (61, 8 / 15)):        # confidence exactly on an edge at t = 1
        z[row] = -2000.0
        z[row, 0], z[row, 1] = _edge_logit_gap(edge, 1.0), 0.0
    z[62, 0] = z[62].max() + 1.0
    z[62, 1] = np.nextafter(z[62, 0], np.inf)              # near tie: the larger by one ulp
    y[:20], y[62] = 1, 0
    grid = np.round(np.arange(50, 501, 10) * 0.01, 2)     # 0.50, 0.60, ..., 5.00 (and t = 1)
    w = rng.uniform(0.5, 2.0, size=600)
    w[rng.random(600) < 0.1] = 0.0                         # rows of weight 0 are left out
    for logits in (z, z.astype(np.float32)):
        z64 = logits.astype(np.float64)
        probs = [softmax(z64 / t, axis=1) for t in grid]
        assert sum(int((p.max(axis=1) == edge).sum()) for p in probs for edge in (1 / 3, 14 / 15, 8 / 15, 1.0)) > 100
        brute = np.array([metrics.ece(p, y) for p in probs])
        with warnings_recorded():
            np.testing.assert_array_equal(fit_temperature_grid(logits, y, grid=grid)[1], brute)
            fitted = TemperatureScaling("ece", grid=grid).fit(logits, y, sample_weight=w)
        keep = w > 0
        weighted = [weighted_top_label_ece(p[keep].max(axis=1), p[keep].argmax(axis=1) == y[keep], w[keep], 15)
                    for p in probs]
        np.testing.assert_array_equal(fitted.grid_scores_, weighted)
    z, y = calibrated_logits(500, k=k, seed=k + 1)         # no near ties: the outcomes stay one shared row
    probs = [softmax(z / t, axis=1) for t in grid]
    with warnings_recorded():
        np.testing.assert_array_equal(fit_temperature_grid(z, y, grid=grid)[1], [metrics.ece(p, y) for p in probs])
        fitted = TemperatureScaling("ece", grid=grid).fit(z, y, sample_weight=w[:500])
    keep = w[:500] > 0
    np.testing.assert_array_equal(fitted.grid_scores_, [weighted_top_label_ece(
        p[keep].max(axis=1), p[keep].argmax(axis=1) == y[keep], w[:500][keep], 15) for p in probs])


def test_class_by_class_row_sums_are_numpys_row_sums():
    """The grid's row sums of exp (K - 1 additions of rows) are numpy's pairwise sums of each row of K, to the bit,
    for every K up to 300 (fewer than 8 terms, 8 partial sums, the split beyond 128), on terms spanning 30 decades."""
    from calib.posthoc.temperature import _pairwise_sum_matches_numpy, _pairwise_sum_rows

    rng = np.random.default_rng(3)
    for k in range(1, 301):
        x = rng.standard_exponential((3, 41, k)) * 10.0 ** rng.uniform(-15, 15, size=(3, 41, k))
        expected = x.sum(axis=2)
        assert np.array_equal(_pairwise_sum_rows(np.ascontiguousarray(x.transpose(0, 2, 1))), expected), k
        assert np.array_equal(_pairwise_sum_rows(np.ascontiguousarray(x[0].T)), expected[0]), k
        assert _pairwise_sum_matches_numpy(k)


def test_nll_slope_is_that_of_scipys_softmax_bit_for_bit():
    """The NLL fit's slope E_p[z] - z_y, with p formed in place and the row maximum taken as beta * max z, equals the
    slope from scipy's softmax(beta * z) to the bit (so Brent's method takes the same steps), for float32 and float64
    logits, with and without sample weights, at the bracket's ends and between."""
    from calib.posthoc.temperature import _nll_slope, _RowBlocks

    z, y = calibrated_logits(2000, k=9, seed=31)
    z[:10, :2] = z[:10].max(axis=1, keepdims=True) + 1.0                 # exact ties for the top class
    w = np.random.default_rng(31).uniform(0.5, 2.0, size=2000)
    for logits, weight in ((z, None), (z.astype(np.float32), None), (z, w)):
        data = _RowBlocks(logits, y, weight)
        z64 = logits.astype(np.float64)
        for beta in (1e-4, 0.37, 1.0, 2.9, 1e4):
            expected = np.einsum("nk,nk->n", softmax(z64 * beta, axis=1), z64) - z64[np.arange(2000), y]
            reference = np.mean(expected) if weight is None else np.dot(weight, expected) / weight.sum()
            assert _nll_slope(data, beta) == float(reference), beta


def test_nll_fit_on_float32_equals_the_float64_fit():
    z, y = calibrated_logits(3000, seed=15)
    z32 = z.astype(np.float32)
    assert fit_temperature_nll(z32, y) == pytest.approx(fit_temperature_nll(z32.astype(np.float64), y), rel=1e-12)


@pytest.mark.parametrize("objective", ["nll", "ece"])
def test_fit_memory_stays_below_the_input(objective):
    """Item 26: the fits converted the logits to float64 and formed (N, K) float64 probabilities at each step, a
    peak of about 8 inputs on float32 logits; they now read row blocks. numpy reports its allocations to
    tracemalloc."""
    import tracemalloc

    rng = np.random.default_rng(16)
    z = (rng.normal(size=(20_000, 500)) * 3).astype(np.float32)
    y = rng.integers(0, 500, 20_000)
    z[np.arange(20_000), y] += 4
    tracemalloc.start()
    TemperatureScaling(objective).fit(z, y)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < (0.25 if objective == "nll" else 0.6) * z.nbytes, peak / z.nbytes


# ----------------------------------------------------------------------------------------------------------
# the registry (issue 31, item 1)
# ----------------------------------------------------------------------------------------------------------

def test_every_registered_map_fits_and_maps_to_the_simplex():
    from calib import posthoc
    from calib.experiments import POSTHOC_MAPS, fit_posthoc

    z, y = calibrated_logits(400, seed=17)
    assert POSTHOC_MAPS == posthoc.map_names() == tuple(s.name for s in posthoc.REGISTRY)
    for spec in posthoc.REGISTRY:
        fitted = fit_posthoc(spec.name, z, y, "fl-3")
        assert isinstance(fitted, posthoc.FittedMap) and fitted.name == spec.name
        np.testing.assert_allclose(fitted.proba(z).sum(axis=1), 1, atol=1e-12)
        np.testing.assert_allclose(np.exp(fitted.log_proba(z)), fitted.proba(z), atol=1e-12)
        assert f"``{spec.name}``" in posthoc.get_map.__doc__ and spec.summary and spec.takes
    assert fit_posthoc("psi", z, y, "fl-3").params == {"gamma": 3.0}
    assert [posthoc.get_map("psi").applies(loss) for loss in ("fl-3", "FL-0.5", "ce", "flsd-53", "dual-fl-2", None)] \
        == [True, True, False, False, False, False]
    with pytest.raises(ValueError, match="unknown post-hoc map 'platt'; choose from none, ts-nll"):
        posthoc.get_map("platt")


def test_a_calibrator_missing_from_the_registry_fails_loudly():
    """Adding an estimator class to calib.posthoc without a registry row fails here."""
    import inspect

    from calib import posthoc

    estimators = {name for name in posthoc.__all__ if inspect.isclass(getattr(posthoc, name))
                  and hasattr(getattr(posthoc, name), "predict_proba")}
    fitters = " ".join(inspect.getsource(getattr(spec.fit, "func", spec.fit)) for spec in posthoc.REGISTRY)
    assert estimators == {"TemperatureScaling", "FocalTemperatureScaling"}
    assert all(name in fitters for name in estimators)


def test_the_ts_ece_map_picks_the_temperature_on_a_grid_of_0_01():
    """Issue 25: the benchmark's TS-ECE searched 0.1 steps while FTS searched 0.01 steps; both now use one step."""
    from calib.metrics import ece
    from calib.posthoc import FINE_GRID, MUKHOTI_GRID, fit_temperature_grid, get_map
    from scipy.special import softmax

    rng = np.random.default_rng(3)
    y = rng.integers(0, 4, 2000)
    z = rng.normal(size=(2000, 4)) + 2.37 * np.eye(4)[y]
    z *= 2.43                                                                    # over-confident: T near 2.4
    assert FINE_GRID[0] == 0.01 and FINE_GRID[-1] == 10.0 and np.allclose(np.diff(FINE_GRID), 0.01)
    t = get_map("ts-ece").fit(z, y).params["temperature"]
    brute = [ece(softmax(z / s, axis=1), y) for s in FINE_GRID]
    assert t == FINE_GRID[int(np.argmin(brute))] and round(t * 100) != round(t * 10) * 10
    assert min(brute) < fit_temperature_grid(z, y, MUKHOTI_GRID)[1].min()      # the finer grid finds a lower ECE


# ----------------------------------------------------------------------------------------------------------
# issue 45: searches that end on their bound, stale fitted state, the registry's fitted maps
# ----------------------------------------------------------------------------------------------------------

def shuffled_labels(n=300, seed=1):
    """Logits of a calibrated 10-class model with its labels shuffled: the logits say nothing about the labels."""
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(n, 10)) * 3
    y = (softmax(z, axis=1).cumsum(1) > rng.random((n, 1))).argmax(1)
    return z, rng.permutation(y)


def test_ts_sb_ece_warns_when_it_ends_on_its_bound():
    """TS-SB-ECE returned T = 1e4, the bound of its search, silently for shuffled labels; it now warns and says so."""
    from calib.posthoc import T_RANGE, SearchBoundWarning

    z, y = shuffled_labels()
    with pytest.warns(SearchBoundWarning, match=r"TS-SB-ECE ended on the upper bound of its search, T = 10000 .*"
                                                r"nearly uniform.*shuffled or misaligned labels.*objective='nll'"):
        ts = TemperatureScaling("sb-ece").fit(z, y)
    assert ts.temperature_ == pytest.approx(T_RANGE[1], rel=1e-9) and ts.at_edge_ == "high"
    with pytest.warns(SearchBoundWarning, match="upper bound"):
        assert fit_temperature_sb_ece(z, y)[0] == pytest.approx(T_RANGE[1], rel=1e-9)
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")                 # an inner optimum: no warning, no edge
        z_ok, y_ok = calibrated_logits(500, seed=6)
        ts = TemperatureScaling("sb-ece").fit(z_ok, y_ok)
    assert ts.at_edge_ is None and 1.5 < ts.temperature_ < 4


def test_constant_logits_raise_for_every_objective():
    """TS-SB-ECE returned T = 1 (its start) for constant logits, where every T gives the same probabilities, and FTS
    the first point of its grid."""
    y = np.array([0, 1, 2, 1])
    for objective in ("nll", "ece", "sb-ece"):
        with pytest.raises(ValueError, match="every row is constant .* carries no information"):
            TemperatureScaling(objective).fit(np.full((4, 3), 2.0), y)
    with pytest.raises(ValueError, match="every row is constant"):
        fit_temperature_sb_ece(np.full((4, 3), 2.0), y)
    for search in ("grid", "line"):                    # FTS chose the grid's first point, "below T = 0.01"
        with pytest.raises(ValueError, match="every row is constant .* carries no information"):
            FocalTemperatureScaling(search=search).fit(np.full((4, 3), 2.0), y)


def test_fts_line_search_warns_at_the_edges_of_its_temperature_grid():
    """The line search picked T = 5.0, its T grid's last point, without the warning the grid search gives."""
    import warnings

    rng = np.random.default_rng(0)
    z = rng.normal(size=(2000, 10))
    y = np.array([rng.choice(10, p=np.exp(r) / np.exp(r).sum()) for r in z])
    temps = np.linspace(0.1, 5, 50)
    with pytest.warns(GridEdgeWarning) as record:
        fts = FocalTemperatureScaling(search="line", temperatures=temps).fit(100 * z, y)
    assert fts.temperature_ == 5.0 and fts.at_edge_ == "high" and fts.path_["anchor_edges"] == ("high", "high")
    assert re.search(r"^line search, anchor gamma = 0 \(and anchor gamma = 1, at the high end too\): .*T = 5 .*"
                     r"largest temperature.*search='line', temperatures=np.geomspace\(0.1, 500, 500\)",
                     str(record[0].message))
    assert len(record) == 2 and "line's smallest gamma" in str(record[1].message)   # the line's own end, below
    with pytest.warns(GridEdgeWarning) as record:
        fts = FocalTemperatureScaling(objective="nll", search="line", temperatures=temps).fit(z / 100, y)
    assert fts.at_edge_ == "low" and fts.temperature_ == pytest.approx(0.1)
    assert "anchor gamma = 0 (and anchor gamma = 1, at the low end too)" in str(record[0].message)
    assert fts.gamma_ == 5.0 and "line's largest gamma" in str(record[1].message)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fts = FocalTemperatureScaling(search="line", temperatures=temps).fit(2.5 * z, y)   # inner optimum: silent
    assert fts.at_edge_ is None and fts.path_["anchor_edges"] == (None, None) and fts.path_["gamma_edge"] is None


def test_fts_line_search_warns_at_the_ends_of_its_line():
    """A best point at the line's last gamma may have a better one beyond; gamma = -1 ends the map's domain."""
    import warnings

    rng = np.random.default_rng(0)
    z = rng.normal(size=(1000, 5)) * 2.0
    pred = rng.integers(0, 5, 1000)
    z[np.arange(1000), pred] += rng.gamma(2.0, 3.0, size=1000)
    y = np.where(rng.uniform(size=1000) < 0.7, pred, rng.integers(0, 5, 1000))   # network-like, over-confident
    temps = np.linspace(0.2, 5, 25)
    with pytest.warns(GridEdgeWarning, match=r"line search: the best gamma on the line, gamma = -0.5 .*smallest gamma"
                                             r".*gammas=\[-1, 5\]"):
        fts = FocalTemperatureScaling(objective="nll", search="line", gammas=[-0.5, 5.0], temperatures=temps).fit(z, y)
    assert fts.gamma_ == -0.5 and fts.path_["gamma_edge"] == "low" and fts.at_edge_ is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")                 # the line now reaches inside [-1, -0.5]
        fts = FocalTemperatureScaling(objective="nll", search="line", gammas=[-1.0, 5.0], temperatures=temps).fit(z, y)
    assert -1 < fts.gamma_ < -0.5 and fts.path_["gamma_edge"] is None


def _fitted_attributes(estimator):
    return sorted(k for k in vars(estimator) if k.endswith("_") and not k.startswith("_"))


@pytest.mark.parametrize("make", [lambda: TemperatureScaling("nll"), lambda: TemperatureScaling("ece"),
                                  lambda: TemperatureScaling("sb-ece"),
                                  lambda: FocalTemperatureScaling("nll", temperatures=[1.0, 2.0, 2.5, 3.0, 4.0]),
                                  lambda: FocalTemperatureScaling("nll", search="line",
                                                                  temperatures=[1.0, 2.0, 3.0, 4.0])],
                         ids=["ts-nll", "ts-ece", "ts-sb-ece", "fts-grid", "fts-line"])
def test_a_failed_fit_leaves_the_estimator_unfitted(make):
    """A fit that raised kept the previous fit's temperature_, so predict_proba still answered."""
    z, y = calibrated_logits(400, seed=18)
    estimator = make().fit(z, y)
    assert estimator.predict_proba(z).shape == (400, 5) and "temperature_" in _fitted_attributes(estimator)
    with pytest.raises(ValueError, match="logits contains NaN"):
        estimator.fit(np.where(z > 2, np.nan, z), y)
    assert _fitted_attributes(estimator) == []
    with pytest.raises(ValueError, match="not fitted yet"):
        estimator.predict_proba(z)
    assert "temperature_" not in repr(estimator)


def test_a_warning_raised_as_an_error_leaves_the_estimator_unfitted():
    """With warnings as errors, a GridEdgeWarning raised after temperature_ was set; the fit now assigns last."""
    import warnings

    z, y = calibrated_logits(2000, seed=19)
    for estimator in (TemperatureScaling("ece"), FocalTemperatureScaling(temperatures=[1.0, 2.0, 2.5, 3.0, 4.0])):
        assert estimator.fit(z, y).at_edge_ is None
        with warnings.catch_warnings():
            warnings.simplefilter("error", GridEdgeWarning)
            with pytest.raises(GridEdgeWarning):
                estimator.fit(50 * z, y)
        assert _fitted_attributes(estimator) == []
        with pytest.raises(ValueError, match="not fitted yet"):
            estimator.predict_proba(z)


def test_fitted_maps_pickle_and_give_the_same_probabilities():
    """FittedMap held lambdas (AttributeError: Can't pickle local object '_scaled_softmax.<locals>.<lambda>')."""
    import pickle

    from calib import posthoc
    from calib.experiments import fit_posthoc

    z, y = calibrated_logits(400, seed=20)
    for spec in posthoc.REGISTRY:
        fitted = fit_posthoc(spec.name, z, y, "fl-3")
        again = pickle.loads(pickle.dumps(fitted))
        assert again == fitted
        np.testing.assert_array_equal(again.proba(z), fitted.proba(z))
        np.testing.assert_array_equal(again.log_proba(z), fitted.log_proba(z))
        assert pickle.loads(pickle.dumps(spec)).name == spec.name       # so do the registry's rows
    with pytest.raises(ValueError, match=r"unknown key\(s\) \['temp'\]"):
        posthoc.FittedMap("ts-nll", {"temp": 2.0})


@pytest.mark.parametrize("name", ["none", "ts-nll", "fts", "psi"])
def test_fitted_maps_check_their_logits(name):
    """NaN logits gave NaN probabilities, and 1-D logits numpy's AxisError; both now raise a ValueError on logits."""
    from calib.experiments import fit_posthoc

    z, y = calibrated_logits(400, seed=21)
    fitted = fit_posthoc(name, z, y, "fl-3")
    bad = z[:3].copy()
    bad[1, 2] = np.nan
    for method in (fitted.proba, fitted.log_proba):
        with pytest.raises(ValueError, match=r"logits contains NaN or infinity \(first at index \(1, 2\)\)"):
            method(bad)
        with pytest.raises(ValueError, match=r"logits must be 2-D of shape \(N, K\); got 1-D shape \(5,\)"):
            method(z[0])
        with pytest.raises(ValueError, match=r"logits must have shape \(N, K\)"):
            method(torch.tensor(z[0]))
        with pytest.raises(ValueError, match="logits contains NaN"):
            method(torch.tensor(bad))


@pytest.mark.parametrize("name", ["none", "ts-nll", "fts", "psi"])
def test_fitted_maps_follow_the_array_policy(name):
    """A tensor in was returned as an ndarray; now a tensor of its dtype on its device, as predict_proba gives."""
    from calib.experiments import fit_posthoc

    z, y = calibrated_logits(400, seed=22)
    fitted = fit_posthoc(name, z, y, "fl-3")
    t, gamma = fitted.params.get("temperature", 1.0), fitted.params.get("gamma")
    estimator = (TemperatureScaling() if gamma is None else FocalTemperatureScaling())
    estimator.temperature_, estimator.gamma_ = t, gamma      # the same map as an estimator
    estimator.n_features_in_, estimator.classes_ = z.shape[1], np.arange(z.shape[1])   # fitted on K = 5
    assert isinstance(fitted.proba(z), np.ndarray) and fitted.proba(z).dtype == np.float64
    for dtype, atol in ((torch.float64, 1e-15), (torch.float32, 1e-6), (torch.bfloat16, 1e-2)):
        zt = torch.tensor(z, dtype=dtype)
        p, log_p = fitted.proba(zt), fitted.log_proba(zt)
        for out in (p, log_p):
            assert isinstance(out, torch.Tensor) and out.dtype == dtype and out.device == zt.device
        assert torch.equal(p, estimator.predict_proba(zt))
        same_logits = zt.double().numpy()                  # the float64 path on the values the tensor holds
        np.testing.assert_allclose(p.double().numpy(), fitted.proba(same_logits), atol=atol)
        np.testing.assert_allclose(log_p.double().numpy(), fitted.log_proba(same_logits), atol=atol, rtol=atol)
    z64 = torch.tensor(z, requires_grad=True)
    assert fitted.proba(z64).requires_grad                 # computed by torch, as predict_proba
    assert fitted.proba(torch.tensor(np.round(z * 10).astype(np.int64))).dtype == torch.float64


def test_line_points_that_share_a_temperature_score_as_alone():
    """Anchors that choose the same T make a flat line: its points share the temperature's gamma-free work (issue 45,
    item 7), and each score is still that of its (gamma, T) alone."""
    z, y = calibrated_logits(1500, seed=23)
    fts = FocalTemperatureScaling(objective="nll", search="line", temperatures=[0.5, 2.5, 8.0]).fit(z, y)
    g, t, s = fts.path_["gammas"], fts.path_["temperatures"], fts.path_["scores"]
    assert fts.path_["anchor_temperatures"] == (2.5, 2.5) and np.all(t == 2.5) and len(s) == 3
    expected = [focal_temperature_scores(z, y, [gi], [ti], objective="nll")[0, 0] for gi, ti in zip(g, t)]
    np.testing.assert_allclose(s, expected, rtol=1e-15)


def test_fit_temperature_grid_warns_at_the_edge_as_the_estimator_does():
    """fit_temperature_grid returned T = 10, its grid's last point, silently (TemperatureScaling('ece') warned)."""
    import warnings

    rng = np.random.default_rng(0)
    z = rng.normal(size=(2000, 10))
    y = np.array([rng.choice(10, p=np.exp(r) / np.exp(r).sum()) for r in z])
    with pytest.warns(GridEdgeWarning, match=r"T = 10 .*at the grid's largest temperature.*fit_temperature_grid\("
                                             r"logits, labels, grid=np.geomspace\(0.1, 1e\+03, 200\)\)"):
        assert fit_temperature_grid(z * 50, y)[0] == 10.0
    with pytest.warns(GridEdgeWarning, match="smallest temperature"):     # a custom score: no noise allowance
        assert fit_temperature_grid(z / 50, y, score=metrics.nll)[0] == 0.1
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert 0.5 < fit_temperature_grid(z, y)[0] < 2                  # an inner optimum: silent


# ----------------------------------------------------------------------------------------------------------
# issue 43, item 5: tests that kill the mutants the suite let live
# ----------------------------------------------------------------------------------------------------------

def test_ece_grid_redoes_rows_whose_top_logits_differ_by_one_ulp():
    """Two top logits one float64 ulp apart: z / T can round them to one float, and then the argmax of softmax(z / T)
    (the first of the two, what metrics.ece sees) is not the argmax of z. The grid redoes such rows with the whole
    row; without that, 200 rows labelled with the larger column counted as correct. (The older test cast its near
    ties to float32, which made them exact ties, where both argmaxes agree.)"""
    rng = np.random.default_rng(14)
    z = rng.normal(size=(400, 5)) * 2
    top = z.max(axis=1) + 1.0
    z[:, 0], z[:, 3] = top, np.nextafter(top, np.inf)          # column 3 is the larger, by one ulp
    y = rng.integers(0, 5, 400)
    y[:200], y[200:300] = 3, 0
    probs = [softmax(z / t, axis=1) for t in MUKHOTI_GRID]
    assert sum(int((p.argmax(axis=1) == 0).sum()) for p in probs) > 1000     # the rounding does flip the argmax
    brute = np.array([metrics.ece(p, y) for p in probs])
    with pytest.warns(GridEdgeWarning):
        t, scores = fit_temperature_grid(z, y)
    np.testing.assert_array_equal(scores, brute)
    with pytest.warns(GridEdgeWarning):
        np.testing.assert_array_equal(TemperatureScaling("ece").fit(z, y).grid_scores_, brute)


def test_the_grid_fits_take_the_first_of_equal_best_scores_in_the_grids_order():
    """Saturated logits give every temperature the same ECE (confidence 1.0, the error rate): the fit is the grid's
    first temperature in the order given, not the last nor the smallest."""
    z, y = calibrated_logits(300, seed=24)
    z = 1000.0 * (z == z.max(axis=1, keepdims=True))             # confidence exactly 1.0 at every T below
    grid = [2.0, 1.0, 3.0, 2.5]
    with pytest.warns(GridEdgeWarning):
        ts = TemperatureScaling("ece", grid=grid).fit(z, y)
    assert np.ptp(ts.grid_scores_) == 0 and ts.temperature_ == 2.0
    with pytest.warns(GridEdgeWarning):
        assert fit_temperature_grid(z, y, grid=grid)[0] == 2.0
    with pytest.warns(GridEdgeWarning):
        assert fit_temperature_grid(z, y, grid=grid, score=lambda p, labels: 0.5)[0] == 2.0


def test_grid_edge_reports_exactly_the_edge_share_of_points():
    """The edge is the first and last ceil(5 %) of the points with noise (5 of 100), one point without: a best at
    index 4 is at the low edge and one at index 5 is not; at 95 it is at the high edge and at 94 not."""
    from calib.posthoc.grid import grid_edge as _grid_edge

    grid = np.arange(1, 101) * 0.1

    def edge(best_at, noise):
        scores = np.ones(100)
        scores[best_at] = 0.0
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", GridEdgeWarning)
            return _grid_edge(grid, scores, noise, lambda e: "wider")

    import warnings
    assert [edge(i, 0.01) for i in (4, 5, 94, 95)] == ["low", None, None, "high"]
    assert [edge(i, 0.0) for i in (0, 1, 98, 99)] == ["low", None, None, "high"]
    assert _grid_edge(grid[:1], np.zeros(1), 0.01, lambda e: "wider") is None           # one point: no edge


def test_ts_ece_and_fit_temperature_grid_are_one_fit_and_warn_at_the_callers_line():
    """TemperatureScaling('ece') and fit_temperature_grid share their scores, choice and edge check
    (_best_on_grid): the same T, scores and edge on any data, and the edge warning names the caller's file."""
    rng = np.random.default_rng(5)
    z = rng.normal(size=(2000, 10))
    y = np.array([rng.choice(10, p=np.exp(r) / np.exp(r).sum()) for r in z])
    edges = []
    for logits in (z, 40 * z, 12 * z):                 # an inner optimum, one at the edge, one within noise of it
        with warnings_recorded() as first:
            ts = TemperatureScaling("ece").fit(logits, y)
        with warnings_recorded() as second:
            t, scores = fit_temperature_grid(logits, y)
        assert t == ts.temperature_ and np.array_equal(scores, ts.grid_scores_)
        assert [w.category for w in first] == [w.category for w in second] == ([GridEdgeWarning] if ts.at_edge_
                                                                               else [])
        # the caller's file; not under the mutation test (README, Contributing), which runs this file from its
        # mutants/ copy: there mutmut's trampolines are frames between the caller and the library
        assert all(w.filename == __file__ for w in first + second) or Path(__file__).parents[1].name == "mutants"
        edges.append((ts.temperature_, ts.at_edge_))
    assert edges[1:] == [(10.0, "high"), (9.9, "high")] and edges[0][1] is None


@contextlib.contextmanager
def warnings_recorded():
    """Every warning raised inside, in a list (each one, also a repeat from the same line)."""
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield caught


def test_focal_map_and_the_posthoc_maps_check_a_tensor_alike():
    """focal_map had a copy of the post-hoc maps' tensor check (now one function, calib._validate.checked_tensor):
    each bad tensor gets the same ValueError from both, and a tensor on the meta device or a sparse one, which the
    metrics refuse by name, raised torch's RuntimeError or NotImplementedError from both before."""
    from calib.posthoc._common import scaled_softmax        # what every map's predict_proba applies a tensor to

    z, y = calibrated_logits(300, k=3, seed=27)
    ts = TemperatureScaling().fit(z, y)
    bad = {"shape": torch.zeros(3), "rows": torch.zeros((0, 3)), "columns": torch.zeros((4, 1)),
           "finite": torch.tensor([[0.0, float("inf"), 1.0]]), "meta": torch.zeros((4, 3), device="meta"),
           "sparse": torch.eye(3).to_sparse()}
    for what, tensor in bad.items():
        messages = []
        for apply in (lambda t: focal_map(t, 1.0), lambda t: scaled_softmax(t, 2.0),
                      lambda t: metrics.ece(t, torch.zeros(len(t)))):
            with pytest.raises(ValueError, match="logits|probs") as caught:
                apply(tensor)
            messages.append(str(caught.value))
        assert messages[0] == messages[1], what
        if what in ("meta", "sparse"):
            assert messages[2] == messages[0].replace("logits", "probs"), what
    whole = torch.tensor(np.round(z).astype(np.int64))       # integers are read as float64 by both
    assert focal_map(whole, 0.0).dtype == ts.predict_proba(whole).dtype == torch.float64


def test_the_norm_of_an_sb_ece_fit_and_of_a_streaming_classwise_ece_is_checked_by_name():
    """norm='l3' is refused naming norm, by the TS-SB-ECE fit and by StreamingClasswiseECE (whose norms include
    'max'); the NLL from log-probabilities names log_probs."""
    from calib.metrics import get_metric, streaming

    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="^norm='l3' is not supported; choose one of 'l1', 'l2'"):
        fit_temperature_sb_ece(rng.normal(size=(20, 3)), np.arange(20) % 3, norm="l3")
    with pytest.raises(ValueError, match="^norm='l3' is not supported; choose one of 'l1', 'l2', 'max'"):
        streaming.StreamingClasswiseECE(norm="l3")
    with pytest.raises(ValueError, match="log_probs"):
        get_metric("nll").from_log_probs(np.zeros(3), np.zeros(3, dtype=int))


# --------------------------------------------------------------- mutation sample B: behaviour the sample found untested

def test_ts_sb_ece_warns_when_it_ends_on_its_lower_bound():
    """Every sample correct with a small margin: the soft-binned ECE falls towards 0 as T -> 0, and the fit ends on
    T_RANGE's lower bound, where it warns (one-hot probabilities), as on the upper one."""
    from calib.posthoc import T_RANGE, SearchBoundWarning

    rng = np.random.default_rng(0)
    y = np.arange(30) % 3
    z = np.zeros((30, 3))
    z[np.arange(30), y] = 0.01 * (1 + rng.random(30))
    with pytest.warns(SearchBoundWarning, match=r"TS-SB-ECE ended on the lower bound of its search, T = 0.0001 .*"
                                                r"one-hot, as when every validation sample is classified correctly"):
        t, result = fit_temperature_sb_ece(z, y)
    assert t == pytest.approx(T_RANGE[0], rel=1e-9)
    with pytest.warns(SearchBoundWarning, match="lower bound"):
        assert TemperatureScaling("sb-ece").fit(z, y).at_edge_ == "low"


def test_ts_sb_ece_fits_float32_logits_as_their_float64_values():
    """The fit reads float32 logits in float64: the same temperature, to the bit, as the float64 copy's."""
    z, y = calibrated_logits(300, seed=31)
    z32 = z.astype(np.float32)
    t32, r32 = fit_temperature_sb_ece(z32, y)
    t64, r64 = fit_temperature_sb_ece(z32.astype(np.float64), y)
    assert t32 == t64 and r32.fun == r64.fun


def test_ts_sb_ece_names_a_bad_start():
    z, y = calibrated_logits(50, seed=32)
    for start, found in ((0.0, "must be > 0; got 0.0"), (-2.0, "must be > 0; got -2.0"),
                         ("1", "must be a finite number; got '1'")):
        with pytest.raises(ValueError, match=rf"^start {found}"):
            fit_temperature_sb_ece(z, y, start=start)


def test_fts_edge_warnings_are_raised_for_the_caller_of_fit(monkeypatch):
    """Each of FTS's edge warnings (grid search, line search's anchors, the line's own end) is raised with
    stacklevel 3 (grid_edge, fit, the caller of fit), so that it names the caller's line; checked by the warnings'
    file, and, where mutmut's trampolines are frames in between, by the stacklevel passed (a spy)."""
    import types
    import warnings

    from calib.posthoc import grid as grid_module

    levels = []

    def spy(message, category, stacklevel=1):
        levels.append(stacklevel)
        warnings.warn(message, category, stacklevel=stacklevel + 1)      # + 1: the spy's own frame

    monkeypatch.setattr(grid_module, "warnings", types.SimpleNamespace(warn=spy))
    rng = np.random.default_rng(0)
    z = rng.normal(size=(400, 5))
    y = np.array([rng.choice(5, p=np.exp(r) / np.exp(r).sum()) for r in z])
    temps = np.linspace(0.1, 5, 12)
    with warnings_recorded() as caught:
        FocalTemperatureScaling(objective="nll", gammas=[0.0, 1.0], temperatures=temps).fit(z / 100, y)
        FocalTemperatureScaling(objective="nll", search="line", temperatures=temps).fit(z / 100, y)
    assert [w.category for w in caught] == [GridEdgeWarning] * 3
    assert len(levels) == 3 and levels == [3, 3, 3]
    assert all(w.filename == __file__ for w in caught) or Path(__file__).parents[1].name == "mutants"


# --------------------------------------------------------------- mutation sample C: behaviour the sample found untested

def test_sampling_noise_is_the_largest_standard_error_of_an_accuracy():
    """1 / (2 sqrt(N)): the standard error sqrt(a (1 - a) / N) of an accuracy a on N samples at its largest (a = 1/2),
    found here by a grid over a."""
    from calib.posthoc._common import sampling_noise

    a = np.linspace(0.0, 1.0, 10001)
    for n in (1, 100, 2500, 12345.5):
        assert sampling_noise(n) == pytest.approx(np.sqrt(a * (1 - a) / n).max(), rel=1e-15)
    assert sampling_noise(100) == 0.05


def test_fts_scores_of_the_line_anchors_together_are_those_of_each_alone():
    """gamma = 0 and gamma = 1 (the line search's anchors) scored in one call take the path of gamma = 1 alone (no
    power; gamma = 0 in closed form): each row of the pair is, bit for bit, the scores of that gamma alone."""
    rng = np.random.default_rng(0)
    z, y = rng.normal(size=(2000, 10)) * 3, rng.integers(0, 10, 2000)
    t = np.geomspace(0.2, 5, 7)
    for objective in ("nll", "ece"):
        both = focal_temperature_scores(z, y, [0.0, 1.0], t, objective)
        np.testing.assert_array_equal(both[0], focal_temperature_scores(z, y, [0.0], t, objective)[0])
        np.testing.assert_array_equal(both[1], focal_temperature_scores(z, y, [1.0], t, objective)[0])


def test_fts_nll_of_rows_whose_other_classes_underflow_is_the_focal_maps():
    """Rows whose non-top softmax mass R is below 1024 x the smallest normal float (logit gaps of 702 and more) take
    log R by a log-sum-exp of their own row; the NLL of labels that are not the top class (where the focal map's
    top weight, (1 - q_top)^-gamma, brings in log R) is that of log_focal_map, row by row."""
    z = np.array([[0.0, -702.0, -705.0], [0.0, -703.0, -704.0], [1.0, 0.0, -0.5]])
    y = np.array([1, 2, 0])
    for gamma in (1.0, 2.0):
        expected = -log_focal_map(z, gamma)[np.arange(3), y].mean()
        assert focal_temperature_scores(z, y, [gamma], [1.0], "nll")[0, 0] == pytest.approx(expected, rel=1e-13)


def test_fts_line_search_warns_about_the_one_anchor_at_an_edge_alone():
    """When only one anchor's best T is at an end of the T grid, the warning names that anchor and no other (the
    "(and anchor gamma = ..., at the ... end too)" clause is for both anchors at an edge)."""
    import warnings

    z, y = calibrated_logits(2000, seed=1, scale=1.0)
    for temps, edges, start in ((np.linspace(1.0, 3.0, 41), ("low", None), "line search, anchor gamma = 0: the best"),
                                (np.linspace(0.3, 1.2, 41), (None, "high"), "line search, anchor gamma = 1: the best")):
        with warnings.catch_warnings(record=True) as record:
            warnings.simplefilter("always")
            fts = FocalTemperatureScaling(objective="nll", search="line", temperatures=temps).fit(z, y)
        assert fts.path_["anchor_edges"] == edges
        messages = [str(r.message) for r in record if issubclass(r.category, GridEdgeWarning)]
        assert len(messages) == 1 and messages[0].startswith(start), messages


def test_fts_line_search_advice_below_the_smallest_gamma_doubles_the_span_downwards():
    """The line's best gamma at its smallest, 0.5, of gammas [0.5, 1.5]: the advice spans [lo - (hi - lo), hi] =
    [-0.5, 1.5] (clipped at -1, the focal map's bound)."""
    import warnings

    rng = np.random.default_rng(0)
    z = rng.normal(size=(2000, 10))
    y = np.array([rng.choice(10, p=np.exp(r) / np.exp(r).sum()) for r in z])
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        fts = FocalTemperatureScaling(search="line", objective="nll", gammas=[0.5, 1.5],
                                      temperatures=np.geomspace(0.01, 100, 60)).fit(z, y)
    assert fts.gamma_ == 0.5
    assert [str(r.message) for r in record][-1].endswith(
        "e.g. FocalTemperatureScaling(search='line', gammas=[-0.5, 1.5]).")


def test_grid_edge_of_a_two_point_grid_is_its_better_end_and_one_point_has_no_edge():
    """Two points are a grid with two ends: the better one is reported (each end is one point); a single point is no
    search and has no edge."""
    from calib.posthoc.grid import grid_edge as _grid_edge

    def widen(edge):
        return "wider"

    assert _grid_edge(np.array([1.0, 2.0]), np.array([0.1, 0.5]), 0.0, widen, warn=False) == "low"
    assert _grid_edge(np.array([1.0, 2.0]), np.array([0.5, 0.1]), 0.0, widen, warn=False) == "high"
    with pytest.warns(GridEdgeWarning, match=r"T = 2 \(score 0.1\), is at the grid's largest temperature"):
        _grid_edge(np.array([1.0, 2.0]), np.array([0.5, 0.1]), 0.0, widen)
    assert _grid_edge(np.array([1.0]), np.array([0.1]), 0.0, widen) is None
