"""calib.focal against closed forms, high-precision references (mpmath), autograd and the paper's numbers."""

import math

import mpmath as mp
import numpy as np
import pytest
from scipy.optimize import brentq, minimize
from scipy.special import softmax

from calib import focal

# ------------------------------------------------------------------------------------------ references


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


# ------------------------------------------------------------------------------------- g(p, gamma)

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


# -------------------------------------------------------------------------------- gamma* and p0(gamma)

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
    assert focal.gamma_star(p0) == pytest.approx(_gamma_star_reference(p0), rel=2e-14)


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


# ------------------------------------------------------------------------------------------ schedules

def test_flsd_schedules_as_data():
    p = np.array([0.0, 0.1999, 0.2, 0.3, 0.4999, 0.5, 1.0])
    np.testing.assert_array_equal(focal.schedule_gamma(focal.FLSD_53, p), [5, 5, 3, 3, 3, 3, 3])
    np.testing.assert_array_equal(focal.schedule_gamma(focal.FLSD_53_TABLE4, p), [5, 5, 5, 3, 3, 3, 3])
    np.testing.assert_array_equal(focal.schedule_gamma(focal.FLSD_532, p), [5, 5, 3, 3, 3, 2, 2])
    assert focal.SCHEDULES["flsd-53"] is focal.FLSD_53
    g_eff = focal.effective_gradient_factor(focal.FLSD_53, np.array([0.19, 0.199, 0.2, 0.25, 0.26]))
    np.testing.assert_allclose(g_eff, [_g_printed(0.19, 5), _g_printed(0.199, 5), _g_printed(0.2, 3),
                                       _g_printed(0.25, 3), _g_printed(0.26, 3)], rtol=1e-13)


def test_flsd53_upweights_two_intervals_not_one():
    (lo1, hi1), (lo2, hi2) = focal.upweighted_intervals(focal.FLSD_53)
    assert (lo1, lo2) == (0.0, 0.2)
    assert hi1 == pytest.approx(0.19680273893699807, abs=1e-15)       # p0(5)
    assert hi2 == pytest.approx(0.2525839887160048, abs=1e-15)        # p0(3)
    # brute force on a grid: g_eff > 1 exactly on these intervals
    p = np.linspace(1e-6, 1 - 1e-6, 200_001)
    up = focal.effective_gradient_factor(focal.FLSD_53, p) > 1
    inside = ((p < hi1) | ((p >= lo2) & (p < hi2)))
    assert np.array_equal(up, inside)


def test_schedule_from_prop2_has_a_single_crossing():
    sched = focal.schedule_from_prop2([0.2], 0.25)
    np.testing.assert_allclose(sched.gammas, [4.850554445506035, 3.070227101505456], rtol=1e-13)
    ((lo, hi),) = focal.upweighted_intervals(sched)
    assert lo == 0 and hi == pytest.approx(0.25, abs=1e-15)
    three = focal.schedule_from_prop2([0.1, 0.3, 0.6], 0.2)
    assert three.gammas[:3] == pytest.approx([focal.gamma_star(0.1), focal.gamma_star(0.2), focal.gamma_star(0.3)])
    assert three.gammas[3] == three.gammas[2]                          # above 1/2: any gamma works, keep the last
    ((lo, hi),) = focal.upweighted_intervals(three)
    assert hi == pytest.approx(0.2, abs=1e-15)
    with pytest.raises(ValueError, match=r"\(0, 1/2\)"):
        focal.schedule_from_prop2([0.2], 0.6)
    with pytest.raises(ValueError, match="gammas"):
        focal.GammaSchedule("bad", (0.2,), (5.0,))
    with pytest.raises(ValueError, match="increase"):
        focal.GammaSchedule("bad", (0.5, 0.2), (5.0, 3.0, 2.0))


# ------------------------------------------------------------------------- focal-optimal prediction

def test_focal_optimal_prediction_reproduces_fig6():
    q = np.array([0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99])
    table = {  # inventory Sec. 5, computed by brute-force minimisation of Eq. 5
        1: [0.1616, 0.2256, 0.3142, 0.3828, 0.4430, 0.5, 0.5570, 0.6172, 0.6858, 0.7744, 0.8384, 0.9270],
        2: [0.2502, 0.3058, 0.3734, 0.4215, 0.4622, 0.5, 0.5378, 0.5785, 0.6266, 0.6942, 0.7498, 0.8464],
        3: [0.3075, 0.3529, 0.4055, 0.4418, 0.4721, 0.5, 0.5279, 0.5582, 0.5945, 0.6471, 0.6925, 0.7800],
        5: [0.3708, 0.4026, 0.4381, 0.4620, 0.4818, 0.5, 0.5182, 0.5380, 0.5619, 0.5974, 0.6292, 0.6953],
    }
    rows = np.column_stack([1 - q, q])
    np.testing.assert_allclose(focal.focal_optimal_prediction(rows, 0.0), rows, atol=1e-15)   # CE: p = q
    for gam, expected in table.items():
        p_hat = focal.focal_optimal_prediction(rows, gam)[:, 1]
        np.testing.assert_allclose(p_hat, expected, atol=5.1e-5)
        # against a bounded scalar minimisation of Eq. 5 itself
        for qi, pi in zip(q[::3], p_hat[::3]):
            risk = lambda x: -(1 - x) ** gam * qi * np.log(x) - x ** gam * (1 - qi) * np.log(1 - x)  # noqa: E731
            ref = brentq(lambda x: (risk(x + 1e-7) - risk(x - 1e-7)), 1e-3, 1 - 1e-3, xtol=1e-14)
            assert pi == pytest.approx(ref, abs=1e-7)


def test_focal_optimal_prediction_multiclass_and_inverse():
    q = np.array([0.6, 0.3, 0.1])
    gam = 2.0
    ref = minimize(lambda z: -np.sum((1 - softmax(z)) ** gam * q * np.log(softmax(z))), np.zeros(3),
                   method="BFGS", options={"gtol": 1e-12}).x
    np.testing.assert_allclose(focal.focal_optimal_prediction(q, gam), softmax(ref), atol=1e-7)
    rng = np.random.default_rng(3)
    rows = rng.dirichlet(np.ones(4), size=500)
    gams = rng.uniform(0.1, 8, size=500)
    p_hat = focal.focal_optimal_prediction(rows, gams)
    np.testing.assert_allclose(p_hat.sum(axis=1), 1.0, atol=1e-14)
    np.testing.assert_allclose(focal.focal_prediction_target(p_hat, gams), rows, atol=1e-12)
    # the argmax is kept (p / g(p, gamma) increases) ...
    assert np.array_equal(p_hat.argmax(axis=1), rows.argmax(axis=1))
    # ... but for K > 2 the prediction need not have higher entropy than q: a small class can shrink
    q = np.array([0.3488, 0.339, 0.2798, 0.0324])
    p_hat = focal.focal_optimal_prediction(q, 0.17)
    assert p_hat[3] < q[3] and -np.sum(p_hat * np.log(p_hat)) < -np.sum(q * np.log(q))


def test_binary_focal_prediction_is_pulled_towards_one_half():
    q = np.linspace(0.001, 0.999, 999)
    for gam in (0.5, 1.0, 2.0, 3.0, 5.0):
        p_hat = focal.focal_optimal_prediction(np.column_stack([1 - q, q]), gam)[:, 1]
        off = np.abs(q - 0.5) > 1e-9
        assert np.all(np.abs(p_hat - 0.5)[off] < np.abs(q - 0.5)[off])
        np.testing.assert_allclose(p_hat + p_hat[::-1], 1.0, atol=1e-14)      # symmetry


def test_one_hot_targets_are_fixed_points():
    q = np.array([[1.0, 0.0, 0.0], [0.0, 0.0, 1.0], [0.5, 0.5, 0.0]])
    out = focal.focal_optimal_prediction(q, 3.0)
    np.testing.assert_array_equal(out[:2], q[:2])
    np.testing.assert_allclose(out[2], [0.5, 0.5, 0.0], atol=1e-15)
    np.testing.assert_array_equal(focal.focal_prediction_target(q[:2], 3.0), q[:2])


# ------------------------------------------------------------------------------------------ Eq. 4

def test_focal_loss_and_the_entropy_bound():
    rng = np.random.default_rng(1)
    p = rng.dirichlet(np.ones(3), size=2000)
    q = rng.dirichlet(np.ones(3), size=2000)
    gam = 2.5
    np.testing.assert_allclose(focal.focal_loss(p, q, gam), -np.sum((1 - p) ** gam * q * np.log(p), axis=1),
                               rtol=1e-14)
    kl = np.sum(q * np.log(q / p), axis=1)
    hq, hp = -np.sum(q * np.log(q), axis=1), -np.sum(p * np.log(p), axis=1)
    np.testing.assert_allclose(focal.entropy_regularised_bound(p, q, gam), kl + hq - gam * hp, rtol=1e-12, atol=1e-12)
    onehot = np.eye(3)[rng.integers(3, size=2000)]
    pt = np.sum(p * onehot, axis=1)
    np.testing.assert_allclose(focal.focal_loss(p, onehot, gam), -(1 - pt) ** gam * np.log(pt), rtol=1e-14)
    np.testing.assert_allclose(focal.focal_loss(p, onehot, 0.0), -np.log(pt), rtol=1e-14)
    for g in (0.1, 0.5, 0.9, 1.0, 3.0):                                  # the bound, also for gamma < 1
        assert np.min(focal.focal_loss(p, q, g) - focal.entropy_regularised_bound(p, q, g)) >= -1e-12


# ------------------------------------------------------------------------------ per-batch gradients

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
