"""Tests of the focal calibration map's relation to temperature scaling (Komisarenko & Kull 2024, chapter 07).

Reference values are the book's inventory of the paper (`shared/inventories/komisarenko2024.md`, Secs. 3, 5
and 8: exact logit-space evaluation, minimax fits on the stated grids, mpmath counterexamples for Prop. 5).
"""

import numpy as np
import pytest
import sympy as sp
from scipy.special import expit, logit, softmax

from calib import symbolic
from calib.focal import (closest_temperature, effective_inverse_temperature, focal_calibration_logit, focal_map,
                         log_f_gamma, threshold, top_label_gain, ts_bounds, ts_distance)

# gamma: (1/(gamma+1), 1/(gamma+1-log(gamma+1)/2), 1/beta(0)), inventory Sec. 5 "Fig. 3 reference values"
BOUNDS = {0.5: (0.6667, 0.7709, 0.7372), 1: (0.5000, 0.6048, 0.5644), 2: (0.3333, 0.4080, 0.3737),
          3: (0.2500, 0.3024, 0.2760), 4: (0.2000, 0.2384, 0.2178), 5: (0.1667, 0.1959, 0.1796),
          7: (0.1250, 0.1437, 0.1327), 10: (0.0909, 0.1020, 0.0951)}

# binary minimax 1/T (inventory Sec. 5, Fig. 2 L)
BINARY_INV_T = {0.5: 1.3676, 1: 1.7810, 2: 2.6801, 3: 3.6252, 4: 4.5910, 5: 5.5676, 9: 9.5195}
# three-class minimax 1/T and max error (inventory Sec. 5, Fig. 6; logits in (-5, 5), step 0.01)
THREE_CLASS = {0.05: (1.0220, 0.0025), 0.5: (1.2413, 0.0211), 1: (1.5203, 0.0349), 2: (2.1522, 0.0488),
               3: (2.8062, 0.0570)}


def fc_paper(s, gamma):
    """FC(s) as printed in Prop. 3 (probability space)."""
    return 1 / (1 + np.exp(-gamma * s) * (np.exp(-s) + gamma * np.log1p(np.exp(-s)))
                / (1 + gamma * np.exp(-s) * np.log1p(np.exp(s))))


def p_hat_paper(q, gamma):
    """The binary map p_hat(q) of Prop. 2 as printed."""
    return 1 / (1 + ((1 - q) / q) ** gamma * ((1 - q) - gamma * q * np.log(q)) / (q - gamma * (1 - q) * np.log(1 - q)))


# ---------------------------------------------------------------------------------- FC on logits

def test_identity_at_gamma_zero():
    s = np.linspace(-800, 800, 4001)
    np.testing.assert_array_equal(focal_calibration_logit(s, 0), s)
    np.testing.assert_array_equal(log_f_gamma(s, 0), 0)
    z = np.random.default_rng(0).normal(size=(200, 6)) * 5
    np.testing.assert_allclose(focal_map(z, 0), softmax(z, axis=1), atol=1e-16, rtol=0)
    assert ts_bounds(0) == (1.0, 1.0)
    assert closest_temperature(0) == (1.0, 0.0)


def test_fc_matches_the_paper_forms_and_focal_map():
    s = np.linspace(-15, 15, 301)
    for g in [0.3, 0.5, 1, 2, 3, 7]:
        fc = expit(focal_calibration_logit(s, g))
        np.testing.assert_allclose(fc, fc_paper(s, g), rtol=1e-13, atol=1e-15)
        np.testing.assert_allclose(fc, p_hat_paper(expit(s), g), rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(fc, focal_map(np.column_stack([s, np.zeros_like(s)]), g)[:, 0], atol=1e-15)
        # the f_gamma form of App. A.3
        f = (g * np.exp(s) * np.log1p(np.exp(-s)) + 1) / (1 + g * np.exp(-s) * np.log1p(np.exp(s)))
        np.testing.assert_allclose(np.exp(log_f_gamma(s, g)), f, rtol=1e-13)


def test_fc_is_odd_monotone_and_finite_far_out():
    s = np.logspace(-3, 3, 300)
    s = np.concatenate([-s[::-1], [0.0], s])
    for g in [-0.9, -0.5, 0.05, 1, 5, 100]:
        z = focal_calibration_logit(s, g)
        assert np.all(np.isfinite(z)) and np.all(np.diff(z) > 0)
        np.testing.assert_allclose(z, -z[::-1], rtol=1e-14, atol=0)
        assert focal_calibration_logit(0.0, g) == 0.0
    # log f tends to +-log(gamma + 1)
    np.testing.assert_allclose(log_f_gamma([-1e4, 1e4], 3), [-np.log(4), np.log(4)], rtol=1e-12)


def test_negative_gamma_values_of_fig1():
    """Fig. 1 right: for gamma in (-1, 0) the map lies below the diagonal for q > 1/2 (inventory Sec. 5)."""
    for g, expected in [(-0.25, 0.8644), (-0.5, 0.8326)]:
        assert expit(focal_calibration_logit(logit(0.9), g)) == pytest.approx(expected, abs=1e-4)


def test_fc_vectorised_and_validated():
    out = focal_calibration_logit(np.ones((3, 1)), np.array([0.5, 1, 2]))
    assert out.shape == (3, 3)
    assert isinstance(focal_calibration_logit(1.0, 1.0), np.floating)
    for bad in [-1.5, -1 - 1e-9, -2, np.nan]:
        with pytest.raises(ValueError, match="gamma"):
            focal_calibration_logit(1.0, bad)
    with pytest.raises(ValueError, match=r">= -1"):
        ts_distance(-1.5, 1.0)
    with pytest.raises(ValueError, match="s"):
        focal_calibration_logit([np.inf], 1)


def test_fc_at_gamma_minus_one():
    """gamma = -1 is in the domain: logit FC(s) = -log f_{-1}(s) -> s + log 2 as s -> inf (mpmath reference)."""
    import mpmath

    mpmath.mp.dps = 150                                   # 1 - sigmoid(200) = 1e-87 must stay representable

    def logit_fc(s, g):
        q = 1 / (1 + mpmath.exp(-mpmath.mpf(s)))
        h = lambda v: v / ((1 - v) ** g * (1 - g * v * mpmath.log(v) / (1 - v)))      # noqa: E731
        return float(mpmath.log(h(q) / h(1 - q)))

    for g in [-1.0, -1 + 1e-9, -0.5]:
        for s in [1e-3, 0.5, 5.0, 30.0, 200.0]:
            assert focal_calibration_logit(s, g) == pytest.approx(logit_fc(s, g), rel=1e-13)
            assert focal_calibration_logit(-s, g) == -focal_calibration_logit(s, g)
    s = np.array([40.0, 700.0, 1e5])
    np.testing.assert_allclose(focal_calibration_logit(s, -1.0), s + np.log(2), rtol=1e-15)
    np.testing.assert_allclose(expit(focal_calibration_logit(s[:1] - 35, -1.0)),
                               focal_map(np.array([[5.0, 0.0]]), -1.0)[:, 0], rtol=1e-14)
    z = focal_calibration_logit(np.linspace(-50, 50, 2001), -1.0)
    assert np.all(np.isfinite(z)) and np.all(np.diff(z) > 0)


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
    assert np.all(np.isfinite(fts.grid_scores))
    for bad in [[-1.5, 1.0], [-1.0000001]]:
        with pytest.raises(ValueError, match=r">= -1"):
            FocalTemperatureScaling(gammas=bad)
        with pytest.raises(ValueError, match=r">= -1"):
            focal_temperature_scores(z, y, bad, temps)


# ---------------------------------------------------------------------------------- Prop. 3

def test_ts_bounds_against_the_inventory():
    g = np.array(list(BOUNDS))
    ref = np.array(list(BOUNDS.values()))
    low, high = ts_bounds(g)
    np.testing.assert_allclose(low, ref[:, 0], atol=5e-5)
    np.testing.assert_allclose(high, ref[:, 1], atol=5e-5)
    assert ts_bounds(4)[1] == pytest.approx(0.238363, abs=1e-6)       # "T = 0.238" in Sec. 3.2
    np.testing.assert_allclose(1 / effective_inverse_temperature(0.0, g), ref[:, 2], atol=5e-5)


def test_ts_bounds_sharp():
    g = np.array([0.01, 0.5, 1, 2, 3, 4, 5, 6, 7, 10, 20])
    low, high = ts_bounds(g, sharp=True)
    np.testing.assert_array_equal(low, 1 / (g + 1))
    beta0 = effective_inverse_temperature(0.0, g)
    small = g <= 5
    np.testing.assert_allclose(high[small], 1 / beta0[small], rtol=1e-12)
    # for gamma >= 6, beta dips below beta(0): gamma = 10, min 10.5078 at s ~ 1.9 (inventory Sec. 3)
    assert np.all(high[~small] > 1 / beta0[~small])
    assert 1 / ts_bounds(10, sharp=True)[1] == pytest.approx(10.5078, abs=1e-4)
    # the sharp band lies inside the closed-form one
    assert np.all(high <= ts_bounds(g)[1])


def test_prop3_corrected_holds_and_printed_fails():
    s = np.arange(-20000, 20001) / 1000.0
    s = s[s != 0]
    for g in [0.01, 0.1, 0.5, 1, 2, 3, 4, 5, 7, 10, 20, 50, 100]:
        low, high = ts_bounds(g)
        beta = effective_inverse_temperature(s, g)
        assert np.all((beta > 1 / high) & (beta < 1 / low))
        fc = expit(focal_calibration_logit(s, g))
        pos = s > 0
        # printed: sigmoid(s / (gamma + 1)) < FC(s) < sigmoid(s / (gamma + 1 - c)) for s >= 0
        printed_upper = expit(s / (g + 1 - np.log1p(g) / 2))
        assert not np.any(fc[pos] < printed_upper[pos])


def test_fig3_experimental_bounds_gamma_4():
    """Sec. 3.2: 'experimental' T bounds 0.206 and 0.218 for gamma = 4 come from logits in (-10, 10)."""
    for r, t_lo in [(20, 0.203), (10, 0.206)]:
        s = np.arange(1, r * 1000 + 1) / 1000.0
        beta = effective_inverse_temperature(s, 4)
        grid = np.round(np.arange(1, 1001) * 0.001, 10)
        lower = grid[grid <= 1 / beta.max()].max()           # largest grid T whose TS map stays above FC
        upper = grid[grid >= 1 / beta.min()].min()           # smallest grid T whose TS map stays below FC
        assert (lower, upper) == (t_lo, 0.218)


def test_ts_bounds_validation():
    with pytest.raises(ValueError, match="gamma"):
        ts_bounds(-0.5)
    assert ts_bounds(np.array([[1.0, 2.0]]))[0].shape == (1, 2)


# ----------------------------------------------------------------------------- closest temperatures

def test_binary_closest_temperature():
    g = np.array(list(BINARY_INV_T))
    t, err = closest_temperature(g)
    np.testing.assert_allclose(1 / t, list(BINARY_INV_T.values()), atol=1e-4)
    # Fig. 2 right: minimax T = 0.731 (gamma 0.5) and 0.276 (gamma 3), not the printed 0.76 and 0.36
    assert t[0] == pytest.approx(0.7312, abs=1e-4) and t[3] == pytest.approx(0.2759, abs=1e-4)
    # the optimum is inside the Prop. 3 band and beats both band edges
    low, high = ts_bounds(g)
    assert np.all((low < t) & (t < high))
    assert np.all(err < 1.21e-3)
    # the largest minimax error is about 1.208e-3 near gamma = 0.4 (the paper's "< 1e-3" fails there)
    assert closest_temperature(0.4)[1] == pytest.approx(1.208e-3, abs=5e-6)


def test_binary_minimax_is_optimal():
    """Brute force: no temperature on a fine grid does better than the returned one."""
    g = 2.0
    t, err = closest_temperature(g, step=0.01)
    s = np.arange(0, 20.0001, 0.01)
    fc = expit(focal_calibration_logit(s, g))
    temps = np.linspace(t - 0.01, t + 0.01, 2001)
    brute = np.abs(expit(s[None, :] / temps[:, None]) - fc).max(axis=1)
    assert err <= brute.min() + 1e-12
    assert temps[np.argmin(brute)] == pytest.approx(t, abs=2e-5)


def test_three_class_closest_temperature():
    g = np.array(list(THREE_CLASS))
    t, err = closest_temperature(g, n_classes=3, step=0.05)
    ref = np.array(list(THREE_CLASS.values()))
    np.testing.assert_allclose(1 / t, ref[:, 0], atol=1e-3)
    np.testing.assert_allclose(err, ref[:, 1], atol=3e-4)
    assert np.all(t < 1)
    # Fig. 5's printed T = 0.81 and 0.46 are the minimax T of gamma = 0.5 and 2, not of gamma = 1 and 3
    t_fig5, _ = closest_temperature([0.5, 2], n_classes=3, step=0.05)
    np.testing.assert_allclose(t_fig5, [0.806, 0.465], atol=2e-3)


def test_ts_distance():
    # Fig. 2 right: the printed T = 0.76 (gamma 0.5) and 0.36 (gamma 3) are 0.0081 and 0.0593 from FC
    np.testing.assert_allclose(ts_distance([0.5, 3], [0.76, 0.36]), [0.0081, 0.0593], atol=1e-4)
    # Fig. 7 pairs (0.5, 0.8), (2, 0.46): 0.0220 and 0.0500 (inventory C24, logits in (-5, 5), step 0.01)
    np.testing.assert_allclose(ts_distance([0.5, 2], [0.8, 0.46], n_classes=3, step=0.05), [0.0220, 0.0500], atol=2e-4)
    # it is the quantity closest_temperature minimises
    t, err = closest_temperature([1.0, 4.0])
    np.testing.assert_allclose(ts_distance([1.0, 4.0], t), err, rtol=1e-12)
    assert ts_distance(0, 1) < 1e-15 and ts_distance(np.ones((2, 1)), [1.0, 2.0]).shape == (2, 2)
    with pytest.raises(ValueError, match="temperature"):
        ts_distance(1, 0)


def test_sorted_grid_equals_full_grid():
    """Permutation symmetry: the maximum over sorted logit vectors is the maximum over all of them."""
    from calib.focal import _sorted_logit_grid

    rows = _sorted_logit_grid(3, 2.0, 0.25)
    assert np.all(np.diff(rows, axis=1) <= 0) and np.all(rows[:, -1] > -2.0)
    ticks = np.arange(-7, 8) * 0.25                       # pairwise differences below 2 (logits in (-1, 1))
    full = np.array(np.meshgrid(ticks, ticks, ticks)).reshape(3, -1).T
    full = full[np.ptp(full, axis=1) < 2.0 - 1e-12]
    for g, beta in [(1.0, 1.6), (3.0, 2.9)]:
        def worst(z):
            return np.abs(focal_map(z, g) - softmax(z * beta, axis=1)).max()
        assert worst(rows) == pytest.approx(worst(full), rel=1e-12)
    assert len(_sorted_logit_grid(2, 20.0, 0.001)) == 20001


def test_closest_temperature_validation():
    with pytest.raises(ValueError, match="step"):
        closest_temperature(1, step=5, logit_range=1)
    with pytest.raises(ValueError, match="larger step"):
        closest_temperature(1, n_classes=5, step=0.01)
    with pytest.raises(ValueError, match="n_classes"):
        closest_temperature(1, n_classes=1)
    with pytest.raises(ValueError, match="gamma"):
        closest_temperature(-0.5)


# ------------------------------------------------------------------------------------------ Prop. 5

@pytest.mark.parametrize("q, gamma, expected", [
    ((0.13,) + (0.87 / 9,) * 9, 1, 0.12939833),
    ((0.16,) + (0.84 / 99,) * 99, 2, 0.1445972),
    ((0.2,) + (0.8 / 199,) * 199, 2, 0.18318752),
    ((0.325, 0.324, 0.324, 0.027), 0.25, 0.32493764),
])
def test_prop5_counterexamples(q, gamma, expected):
    q = np.array([q])
    gain = top_label_gain(np.log(q), gamma)[0]
    assert gain < 0
    assert q[0, 0] + gain == pytest.approx(expected, abs=2e-8)


def test_prop5_holds_above_the_threshold():
    rng = np.random.default_rng(1)
    for g in [0.25, 1, 3, 5]:
        p0 = threshold(g)
        for k in [2, 3, 4, 10, 100]:
            q = rng.dirichlet(np.full(k, 1.0 if k <= 3 else 0.3 if k <= 10 else 0.03), size=4000)
            gain = top_label_gain(np.log(np.maximum(q, 1e-300)), g)
            above = q.max(axis=1) >= p0
            assert above.any() and np.all(gain[above] >= -1e-15)
            if k <= 3:
                assert np.all(gain >= -1e-12)      # binary and three-class: always (inventory C17)


# ------------------------------------------------------------------------------------------ sympy

def test_symbolic_prop1():
    d = symbolic.focal_convexity()
    for key in ["d1_residual", "d2_residual", "quadratic_residual", "a1_residual", "a1_bracket_at_1"]:
        assert d[key] == 0, key
    assert sp.simplify(d["d2_gamma_one"] - (symbolic.p + 1) / symbolic.p ** 2) == 0
    assert sp.simplify(d["a1_bracket_dp"] - (sp.log(symbolic.p) - 1)) == 0
    # numerically positive on a grid (C2)
    f = sp.lambdify((symbolic.p, symbolic.gamma), d["d2"], "numpy")
    p = np.linspace(1e-6, 1 - 1e-6, 2001)
    for g in [0.0, 0.3, 1, 2.5, 7, 20]:
        assert np.all(f(p, g) > 0)


def test_symbolic_prop2_and_prop4():
    d = symbolic.binary_focal_decomposition()
    for key in ["p_of_q_residual", "paper_residual", "g_residual", "dl1_g"]:
        assert d[key] == 0, key
    assert d["p_hat_gamma_zero"] == symbolic.q and d["p_hat_at_half"] == sp.Rational(1, 2)
    m = symbolic.multiclass_focal_decomposition()
    for key in ["dL_residual", "g_residual", "binary_residual"]:
        assert m[key] == 0, key
    # the sympy map agrees with focal_map numerically
    f = sp.lambdify((symbolic.q, symbolic.gamma), d["p_hat"], "numpy")
    q = np.linspace(0.01, 0.99, 99)
    np.testing.assert_allclose(f(q, 2.0), focal_map(np.log(np.column_stack([q, 1 - q])), 2.0)[:, 0], rtol=1e-12)


def test_symbolic_fc_on_logits_and_prop3_algebra():
    d = symbolic.focal_calibration_on_logits()
    g = symbolic.gamma
    assert d["FC_paper_residual"] == 0 and d["FC_f_residual"] == 0 and d["symmetry"] == 0
    assert d["f_at_0"] == 1 and sp.simplify(d["f_at_plus_inf"] - (g + 1)) == 0
    assert sp.simplify(d["f_at_minus_inf"] - 1 / (g + 1)) == 0
    beta0 = sp.lambdify(g, d["beta_at_0"], "numpy")
    np.testing.assert_allclose(beta0(np.array([0.5, 3.0])), effective_inverse_temperature(0.0, [0.5, 3.0]), rtol=1e-14)
    a = symbolic.ts_bound_proof_algebra()
    assert sp.simplify(a["paper_slip"] + g) == 0
    assert float(a["discriminant"]) == pytest.approx(0.22026, abs=1e-5)
    assert float(a["discriminant_paper"]) == pytest.approx(-0.00715, abs=1e-5)
    assert sorted(float(r) for r in a["roots"]) == pytest.approx([-13.8515, -1.8467], abs=1e-4)
    assert a["identity"] == 0 and float(a["identity_paper"].subs(symbolic.s, 1)) != 0


def test_symbolic_prop5_derivative():
    d = symbolic.prop5_proof_derivative()
    assert d["df_residual"] == 0 and d["ratio_residual"] == 0
    assert float(d["sign_slip"]) != 0 and d["f_sign"] == -1
