"""calib.focal.gradient: g(p, gamma), the threshold p0(gamma) and gamma*(p0) (Mukhoti et al. 2020, Props. 1-2).

Against the printed formulas, mpmath references and the quoted values; both Lambert-W branches as printed.
"""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest
import torch
from scipy.optimize import brentq

from calib import focal
from calib.focal import gradient_factor


def _gamma_star_reference(p0: float) -> float:
    """gamma* by root finding on log g(p0, gamma) = 0 in 80-digit arithmetic (no Lambert W)."""
    with mp.workdps(80):
        p = mp.mpf(p0)
        a, nb = 1 - p, -p * mp.log(p)           # nb = -b > 0
        f = lambda g: g * mp.log1p(-p) + mp.log1p(g * nb / a)  # noqa: E731
        lo, hi = mp.mpf(0), mp.mpf(1)
        while f(hi) > 0:
            hi *= 2
        lo = hi / 2
        while f(lo) < 0:                         # f > 0 on (0, gamma*), < 0 beyond
            lo /= 2
        return float(mp.findroot(f, (lo, hi), solver="anderson"))


def _threshold_reference(gam: float) -> float:
    """p0(gamma) in 80-digit arithmetic, solving log g(p, gamma) = 0 in the logit s."""
    with mp.workdps(80):
        g = mp.mpf(gam)
        f = lambda s: -g * mp.log1p(mp.exp(s)) + mp.log1p(g * mp.exp(s) * mp.log1p(mp.exp(-s)))  # noqa: E731
        s0 = mp.log(focal.threshold(gam)) if gam > 1 else mp.mpf(-0.5)
        s = mp.findroot(f, s0)
        return float(1 / (1 + mp.exp(-s)))


def _g_printed(p, gam):
    return (1 - p) ** gam - gam * p * (1 - p) ** (gam - 1) * np.log(p)


def test_gradient_factor_matches_the_printed_formula_and_its_limits():
    p = np.linspace(0.001, 0.999, 999)
    for gam in (0.25, 0.5, 1.0, 2.0, 3.0, 5.0, 10.0):
        np.testing.assert_allclose(focal.gradient_factor(p, gam), _g_printed(p, gam), rtol=1e-12, atol=1e-300)
    gams = np.array([0.1, 0.5, 1.0, 3.0, 7.0])
    np.testing.assert_array_equal(focal.gradient_factor(0.0, gams), 1.0)          # g(0, gamma) = 1
    np.testing.assert_array_equal(focal.gradient_factor(1.0, gams), 0.0)          # g(1, gamma) = 0
    np.testing.assert_array_equal(focal.gradient_factor(np.array([0.0, 0.3, 1.0]), 0.0), 1.0)   # CE
    # near p = 1, g ~ (1-p)^gamma (1 + gamma), finite also for gamma < 1 (the printed form is 0 * inf at p = 1)
    assert focal.gradient_factor(1 - 2.0 ** -40, 0.5) == pytest.approx(2.0 ** -20 * 1.5, rel=1e-11)


def test_gradient_factor_reference_values():
    # Mukhoti et al. (2020) Sec. 4: g(0.2, 5) ~ 1, g(0.25, 3) ~ 1; "for gamma >= 7, g ~ 0 around 0.5"
    assert focal.gradient_factor(0.2, 5) == pytest.approx(0.9869057689330075, abs=1e-14)
    assert focal.gradient_factor(0.25, 3) == pytest.approx(1.006717933597454, abs=1e-14)
    assert focal.gradient_factor(0.5, 7) == pytest.approx(2 ** -7 * (1 + 7 * math.log(2)), rel=1e-14)
    assert focal.gradient_factor(0.4, 1) == pytest.approx(0.6 - 0.4 * math.log(0.4), rel=1e-14)
    # gamma = 1: maximum 1 + e^-2 at p = e^-2
    assert focal.gradient_factor(math.exp(-2), 1) == pytest.approx(1 + math.exp(-2), rel=1e-15)
    # broadcasting: (3, 1) gammas against (4,) probabilities
    out = focal.gradient_factor(np.array([0.1, 0.2, 0.3, 0.4]), np.array([[1.0], [2.0], [3.0]]))
    assert out.shape == (3, 4)
    assert isinstance(focal.gradient_factor(0.3, 2.0), float)


def test_gradient_factor_dp_is_the_derivative():
    p = np.linspace(0.02, 0.98, 49)
    h = 1e-6
    for gam in (0.5, 1.0, 2.5, 6.0):
        numeric = (_g_printed(p + h, gam) - _g_printed(p - h, gam)) / (2 * h)
        np.testing.assert_allclose(focal.gradient_factor_dp(p, gam), numeric, rtol=1e-6, atol=1e-8)


def test_prop1_holds_on_every_parameter_by_autograd():
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(5, 8), torch.nn.Tanh(), torch.nn.Linear(8, 4)).double()
    x = torch.randn(6, 5, dtype=torch.float64)
    y = torch.randint(4, (6,))
    for gam in (0.5, 2.0, 4.5):
        for i in range(6):
            def grads(loss_fn):
                model.zero_grad()
                pt = torch.softmax(model(x[i:i + 1]), dim=1)[0, y[i]]
                loss_fn(pt).backward()
                return [prm.grad.clone() for prm in model.parameters()], float(pt.detach())

            g_ce, pt = grads(lambda pt: -torch.log(pt))
            g_fl, _ = grads(lambda pt: -(1 - pt) ** gam * torch.log(pt))
            factor = focal.gradient_factor(pt, gam)
            for a, b in zip(g_fl, g_ce):                       # all layers, not only the last
                torch.testing.assert_close(a, factor * b, rtol=1e-10, atol=1e-14)


def test_gamma_star_quoted_values():
    assert focal.gamma_star(0.2) == pytest.approx(4.850554445506035, rel=1e-13)
    assert focal.gamma_star(0.25) == pytest.approx(3.070227101505456, rel=1e-13)
    assert focal.gamma_star(math.exp(-1)) == pytest.approx(1.0, rel=1e-14)
    # the table of shared/inventories/mukhoti2020.md Sec. 3.3 (7 decimals)
    p0 = np.array([0.05, 0.10, 0.15, 0.20, 0.25, 0.30, 0.40, 0.45, 0.49])
    expected = [37.8447794, 14.9239926, 8.0320478, 4.8505544, 3.0702271, 1.9571698, 0.6805076, 0.2926571, 0.0524473]
    np.testing.assert_allclose(focal.gamma_star(p0), expected, atol=6e-8)


@pytest.mark.parametrize("p0", [1e-300, 1e-100, 1e-6, 0.01, 0.1, 0.2499999, 0.25, 0.3, 0.45, 0.49, 0.499,
                                0.4999, 0.49999, 0.4999999, 0.5 - 1e-12])
def test_gamma_star_is_accurate_over_the_whole_domain(p0):
    assert focal.gamma_star(p0) == pytest.approx(_gamma_star_reference(p0), rel=2e-14, abs=0)


def test_gamma_star_solves_g_equals_one_and_matches_the_printed_formula():
    p0 = np.linspace(0.001, 0.499, 4991)
    gs = focal.gamma_star(p0)
    np.testing.assert_allclose(focal.gradient_factor(p0, gs), 1.0, atol=2e-15)
    assert np.all(np.diff(gs) < 0)                                     # decreasing in p0
    mid = (p0 > 0.02) & (p0 < 0.45)                                     # where the printed form is accurate
    np.testing.assert_allclose(focal.lambert_gamma(p0[mid], -1), gs[mid], rtol=1e-11)
    assert focal.gamma_star(p0.reshape(-1, 7)).shape == (713, 7)


def test_threshold_values():
    assert focal.threshold(1.0) == pytest.approx(math.exp(-1), rel=1e-15)
    assert round(float(focal.threshold(3.0)), 6) == 0.252584
    assert round(float(focal.threshold(5.0)), 6) == 0.196803
    gams = [0.5, 1, 2, 3, 4, 5, 6, 7, 8, 10]                           # inventory Sec. 3.2
    expected = [0.421457, 0.367879, 0.297637, 0.252584, 0.220733, 0.196803, 0.178053, 0.162902, 0.150366, 0.130748]
    np.testing.assert_allclose(focal.threshold(np.array(gams)), expected, atol=5e-7)
    for gam in gams:                                                    # an independent root finder
        ref = brentq(lambda p: _g_printed(p, gam) - 1, 1e-9, 0.5, xtol=1e-15, rtol=1e-15)
        assert focal.threshold(gam) == pytest.approx(ref, abs=1e-13)


@pytest.mark.parametrize("gam", [1e-12, 1e-6, 1e-3, 0.7, 30.0, 1e3, 1e6, 1e12, 1e100])
def test_threshold_is_accurate_for_small_and_large_gamma(gam):
    assert focal.threshold(gam) == pytest.approx(_threshold_reference(gam), rel=2e-13)


def test_threshold_inverts_gamma_star():
    rng = np.random.default_rng(0)
    p0 = np.concatenate([rng.uniform(0, 0.5, 100_000), [1e-6, 1e-3, 0.4999, 0.499999, 0.5 - 1e-9]])
    p0 = p0[p0 > 0]
    back = focal.threshold(focal.gamma_star(p0))
    np.testing.assert_allclose(back, p0, rtol=1e-12, atol=0)
    assert np.max(np.abs(back - p0)) < 1e-10
    gams = np.logspace(-6, 6, 1001)
    np.testing.assert_allclose(focal.gamma_star(focal.threshold(gams)), gams, rtol=1e-9)


def test_threshold_separates_up_and_down_weighting():
    for gam in (0.3, 1.0, 3.0, 9.0):
        p0 = focal.threshold(gam)
        assert focal.gradient_factor(p0 * (1 - 1e-6), gam) > 1 > focal.gradient_factor(p0 * (1 + 1e-6), gam)


def test_domain_errors():
    for bad in (0.5, 0.6, 1.0, 0.0, -0.1):
        with pytest.raises(ValueError, match=r"\(0, 1/2\)"):
            focal.gamma_star(bad)
    with pytest.raises(ValueError, match="no positive gamma"):
        focal.gamma_star(np.array([0.1, 0.7]))
    with pytest.raises(ValueError, match="NaN"):
        focal.gamma_star(np.nan)
    with pytest.raises(ValueError, match="no threshold"):
        focal.threshold(0.0)
    with pytest.raises(ValueError, match="> 0"):
        focal.threshold(np.array([1.0, -2.0]))
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        focal.gradient_factor(1.5, 2.0)
    with pytest.raises(ValueError, match=">= 0"):
        focal.gradient_factor(0.5, -1.0)
    with pytest.raises(ValueError, match="open interval"):
        focal.gradient_factor_dp(0.0, 2.0)
    with pytest.raises(ValueError, match="branch"):
        focal.lambert_gamma(0.3, branch=1)


def test_lambert_branches_as_printed():
    p0 = np.linspace(0.05, 0.49, 45)
    # W_0 (Eq. 13) gives the trivial root gamma = 0, not a negative gamma
    assert np.max(np.abs(focal.lambert_gamma(p0, 0))) < 1e-13
    # beyond 1/2 the roles swap: W_{-1} gives 0 and W_0 a negative gamma
    above = np.array([0.55, 0.6, 0.8])
    assert np.max(np.abs(focal.lambert_gamma(above, -1))) < 1e-13
    assert np.all(focal.lambert_gamma(above, 0) < 0)
    # z = w0 exp(w0) >= -1/e, with equality at p0 = 1/2
    grid = np.linspace(0.01, 0.99, 99)
    z = focal.lambert_argument(grid)
    a, b = 1 - grid, grid * np.log(grid)
    np.testing.assert_allclose(z, -(a ** (1 - a / b) / b) * np.log(a), rtol=1e-12)
    assert np.all(z >= -math.exp(-1)) and focal.lambert_argument(0.5) == pytest.approx(-math.exp(-1), rel=1e-15)


def test_random_linear_softmax_batches_and_the_batch_counterexample():
    torch = pytest.importorskip("torch")
    data = focal.random_linear_softmax_batches(400, batch_size=2, n_features=3, n_classes=3, seed=0)
    W, h, y = (torch.tensor(data[k]) for k in ("weights", "features", "labels"))
    b = 7
    w = W[b].clone().requires_grad_(True)
    for i in range(2):
        loss = torch.nn.functional.cross_entropy((h[b, i] @ w.T)[None], y[b, i:i + 1])
        (grad,) = torch.autograd.grad(loss, w)
        np.testing.assert_allclose(grad.numpy(), data["ce_grads"][b, i], rtol=1e-12, atol=1e-15)
    g = focal.gradient_factor(data["p_true"], 2.0)
    batch_ce = np.linalg.norm(data["ce_grads"].sum(axis=1), axis=(1, 2))
    batch_fl = np.linalg.norm((g[..., None, None] * data["ce_grads"]).sum(axis=1), axis=(1, 2))
    per_sample = np.linalg.norm(data["ce_grads"], axis=(2, 3))
    assert np.all(per_sample * np.minimum(g, 1) <= per_sample + 1e-15)
    both_down = np.all(g <= 1, axis=1)
    assert np.any(both_down & (batch_fl > batch_ce))                    # the batch inequality can fail


def test_focal_gradient_factor_link():
    """-p dFL/dp = g(p, gamma) (Zhou et al. 2025, App. C.1 / Mukhoti et al. 2020, Prop. 1), through autograd."""
    p = torch.linspace(0.01, 0.99, 50, dtype=torch.float64, requires_grad=True)
    (-(1 - p) ** 3 * torch.log(p)).sum().backward()
    np.testing.assert_allclose((-p * p.grad).detach().numpy(), gradient_factor(p.detach().numpy(), 3.0), rtol=1e-12)


def test_random_batches_refuse_a_size_below_one_and_spread_their_logits_by_the_scale():
    """Sizes are integers >= 1 (classes >= 2); the weights' spread is logit_scale / sqrt(n_features): with the same
    seed, scaling logit_scale scales the weights by the same factor."""
    for kw in ({"n_batches": 0}, {"batch_size": 0}, {"n_features": 0}, {"n_classes": 1}, {"batch_size": 1.5}):
        with pytest.raises(ValueError, match=next(iter(kw))):
            focal.random_linear_softmax_batches(**{"n_batches": 2, **kw})
    one = focal.random_linear_softmax_batches(3, n_features=4, logit_scale=1.0, seed=4)
    five = focal.random_linear_softmax_batches(3, n_features=4, logit_scale=5.0, seed=4)
    np.testing.assert_allclose(five["weights"], 5.0 * one["weights"], rtol=1e-12)
    big = focal.random_linear_softmax_batches(200, n_features=4, logit_scale=5.0, seed=1)["weights"]
    assert np.std(big) == pytest.approx(5.0 / 2.0, rel=0.05)


# --------------------------------------------------------------- mutation sample B: behaviour the sample found untested

@pytest.mark.parametrize("p0", [0.4936, 0.493729969, 0.49395238, 0.4941])
def test_gamma_star_is_accurate_just_above_the_series_region(p0):
    """eps = 1 - m just above 0.01 (p0 ~ 0.494), where Lambert W_{-1} starts x near its branch point with about
    1e-12 of error: the Newton step (derivative x / (1 + x) - eps) polishes it to full precision. (abs=0: gamma* is
    about 0.03 here, and approx's default abs of 1e-12 would allow a relative error of 3e-11.)"""
    assert focal.gamma_star(p0) == pytest.approx(_gamma_star_reference(p0), rel=2e-14, abs=0)


def test_lambert_gamma_is_nan_where_scipy_gives_a_non_real_w_and_warns_nothing():
    """Near p0 = 1/2, z can round below -1/e (here by one ulp): scipy's W is then not real (imaginary part about
    1e-8, small but not 0), and the printed formula's value is nan on both branches, as at p0 = 1/2 itself (where
    scipy gives nan); at p0 = 1e-300 the printed form overflows (W_{-1} gives -inf, W_0 nan), without a warning."""
    import warnings

    from scipy.special import lambertw

    for p0 in (0.499999995, 0.500000004):
        a, b = 1 - p0, p0 * math.log(p0)
        z = -(a ** (1 - a / b) / b) * np.log(a)
        assert z < -math.exp(-1) and 0 < abs(lambertw(z, -1).imag) < 1e-7          # below the branch point
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for p0 in (0.5, 0.499999995, 0.500000004):
            assert math.isnan(focal.lambert_gamma(p0, -1)) and math.isnan(focal.lambert_gamma(p0, 0)), p0
        assert focal.lambert_gamma(1e-300, -1) == -math.inf
        assert math.isnan(focal.lambert_gamma(1e-300, 0))
        values = focal.lambert_gamma(np.array([1e-300, 0.3, 0.5]), 0)
    assert math.isnan(values[0]) and abs(values[1]) < 1e-13 and math.isnan(values[2])
