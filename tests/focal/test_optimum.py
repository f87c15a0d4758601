"""calib.focal.optimum: the focal risk, its minimiser and inverse, the entropy bound, and tau_oc.

Mukhoti et al. (2020), App. A (Eq. 4, Eq. 5, Fig. 6); Charoenphakdee et al. (2021), Thms. 5, 8 and 11 (the
minimiser found by direct minimisation).
"""

import numpy as np
import pytest
from scipy.optimize import brentq, minimize, minimize_scalar
from scipy.special import lambertw, softmax

from calib import focal
from calib.focal import (focal_map, focal_optimal_prediction, focal_risk, gradient_factor, minimise_focal_risk, tau_oc,
                         threshold)

# gamma: (tau_oc, tau_uc), Charoenphakdee et al. (2021), Thm. 8 (values computed for the book's inventory)
TAU_TABLE = {0.001: (0.2030771102, 0.4998043811), 0.01: (0.2020868290, 0.4980526847),
             0.03: (0.1999275585, 0.4942162325), 0.1: (0.1927892517, 0.4813662349),
             0.5: (0.1612879085, 0.4214574615), 1: (0.1353352832, 0.3678794412),
             2: (0.1040576580, 0.2976365550), 3: (0.0854605118, 0.2525839887),
             4: (0.0729474779, 0.2207329029), 5: (0.0638764183, 0.1968027389),
             10: (0.0402512353, 0.1307479022), 50: (0.0111954574, 0.0400248275)}


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


def test_focal_loss_and_the_entropy_bound():
    rng = np.random.default_rng(1)
    p = rng.dirichlet(np.ones(3), size=2000)
    q = rng.dirichlet(np.ones(3), size=2000)
    gam = 2.5
    np.testing.assert_allclose(focal.focal_risk(p, q, gam), -np.sum((1 - p) ** gam * q * np.log(p), axis=1),
                               rtol=1e-14)
    kl = np.sum(q * np.log(q / p), axis=1)
    hq, hp = -np.sum(q * np.log(q), axis=1), -np.sum(p * np.log(p), axis=1)
    np.testing.assert_allclose(focal.entropy_regularised_bound(p, q, gam), kl + hq - gam * hp, rtol=1e-12, atol=1e-12)
    onehot = np.eye(3)[rng.integers(3, size=2000)]
    pt = np.sum(p * onehot, axis=1)
    np.testing.assert_allclose(focal.focal_risk(p, onehot, gam), -(1 - pt) ** gam * np.log(pt), rtol=1e-14)
    np.testing.assert_allclose(focal.focal_risk(p, onehot, 0.0), -np.log(pt), rtol=1e-14)
    for g in (0.1, 0.5, 0.9, 1.0, 3.0):                                  # the bound, also for gamma < 1
        assert np.min(focal.focal_risk(p, q, g) - focal.entropy_regularised_bound(p, q, g)) >= -1e-12


def test_tau_table():
    gammas = np.array(list(TAU_TABLE))
    ref = np.array(list(TAU_TABLE.values()))
    np.testing.assert_allclose(tau_oc(gammas), ref[:, 0], atol=1e-10, rtol=0)
    np.testing.assert_allclose(threshold(gammas), ref[:, 1], atol=1e-10, rtol=0)
    assert np.all((0 < tau_oc(gammas)) & (tau_oc(gammas) < threshold(gammas)) & (threshold(gammas) < 0.5))


def test_tau_oc_closed_forms_and_limits():
    assert tau_oc(1) == pytest.approx(np.exp(-2), abs=1e-16)
    # the peak is where phi' = 0: (gamma v - 1) log v = 2 (1 - v)
    for g in [0.3, 2.5, 7, 200]:
        t = tau_oc(g)
        assert (g * t - 1) * np.log(t) == pytest.approx(2 * (1 - t), rel=1e-13)
        assert gradient_factor(t, g) > max(gradient_factor(t * (1 - 1e-6), g), gradient_factor(t * (1 + 1e-6), g))
    # gamma -> 0: the root of log v = 2v - 2 other than 1, -W0(-2 e^-2) / 2
    assert tau_oc(1e-10) == pytest.approx(float(-lambertw(-2 * np.exp(-2)).real / 2), abs=1e-9)


def test_tau_oc_is_vectorised_and_checks_its_domain():
    g = np.array([[1.0, 2.0], [3.0, 5.0]])
    assert tau_oc(g).shape == (2, 2)
    assert isinstance(tau_oc(1.0), np.floating)
    for bad in [0, -1, [1, 0], np.nan]:
        with pytest.raises(ValueError, match="gamma"):
            tau_oc(bad)


def test_thm5_counterexample_numbers():
    cases = {(1, 0.8): (0.685831, 0.253599, 0.293213), (1, 0.7): (0.617230, 0.307106, 0.327736),
             (2, 0.8): (0.626615, 0.129496, 0.213149), (3, 0.9): (0.647056, 0.045439, 0.167953),
             (5, 0.9): (0.597400, 0.011827, 0.135966)}
    for (g, e1), (q1, w_star, w_eta) in cases.items():
        eta = np.array([e1, 1 - e1])
        q = minimise_focal_risk(eta, g)
        assert q[0] == pytest.approx(q1, abs=1e-6)
        assert focal_risk(q, eta, g) == pytest.approx(w_star, abs=1e-6)
        assert focal_risk(eta, eta, g) == pytest.approx(w_eta, abs=1e-6)
        # an independent 1-D minimisation of W over q_1
        brute = minimize_scalar(lambda t: focal_risk(np.array([t, 1 - t]), eta, g), bounds=(1e-9, 1 - 1e-9),
                                method="bounded", options={"xatol": 1e-12})
        assert brute.x == pytest.approx(q[0], abs=1e-7)
    # the slope of W at q = eta along e1 - e2 is phi(eta2) - phi(eta1)
    assert gradient_factor(0.2, 1) - gradient_factor(0.8, 1) == pytest.approx(0.743373, abs=1e-6)


def test_thm11_recovery_by_direct_minimisation():
    rng = np.random.default_rng(0)
    for k in [2, 3, 10]:
        for g in [0.5, 2, 5]:
            eta = rng.dirichlet(np.ones(k), size=3)
            eta = np.clip(eta, 1e-4, None)
            eta /= eta.sum(axis=1, keepdims=True)
            q = minimise_focal_risk(eta, g)
            np.testing.assert_allclose(focal_map(np.log(q), g), eta, atol=1e-12, rtol=0)
            np.testing.assert_allclose(focal_optimal_prediction(eta, g), q, atol=1e-10, rtol=0)


def test_minimise_focal_risk_edge_cases():
    eta = np.array([0.6, 0.0, 0.4])
    q = minimise_focal_risk(eta, 2)
    assert q[1] == 0 and q.sum() == pytest.approx(1)
    np.testing.assert_allclose(q[[0, 2]], focal_optimal_prediction(np.array([0.6, 0.4]), 2), atol=1e-10)
    np.testing.assert_array_equal(minimise_focal_risk(np.array([0.7, 0.3]), 0), [0.7, 0.3])
    np.testing.assert_array_equal(minimise_focal_risk(np.eye(3)[1], 3), np.eye(3)[1])


def test_a_bad_input_is_named_by_its_argument():
    """The focal optimum's functions name the argument that is not a distribution (a 3-D array, a text)."""
    with pytest.raises(ValueError, match="^q must be 1-D or 2-D"):
        focal.focal_optimal_prediction(np.ones((2, 2, 2)) / 2, 1.0)
    with pytest.raises(ValueError, match="^probs must be 1-D or 2-D"):
        focal.focal_prediction_target(np.ones((2, 2, 2)) / 2, 1.0)
    with pytest.raises(ValueError, match="^target must be 1-D or 2-D"):
        focal.focal_risk(np.full(3, 1 / 3), np.ones((1, 1, 3)), 1.0)


# --------------------------------------------------------------- mutation sample B: behaviour the sample found untested

def test_the_optimum_functions_refuse_rows_that_are_not_distributions():
    """q (focal_optimal_prediction) and probs (focal_prediction_target): entries in [0, 1], rows summing to 1; the
    ValueError names the argument."""
    for function, name in ((focal_optimal_prediction, "q"), (focal.focal_prediction_target, "probs")):
        with pytest.raises(ValueError, match=rf"^rows of {name} must sum to 1; row 0 sums to 1.2"):
            function([0.5, 0.7], 2.0)
        with pytest.raises(ValueError, match=rf"^{name} has values outside \[0, 1\] \(min -0.2, max 1.2\)"):
            function([[1.2, -0.2]], 2.0)


# --------------------------------------------------------------- mutation sample C: behaviour the sample found untested

def test_minimise_focal_risk_solves_every_row_after_a_one_hot_or_gamma_zero_row():
    """A row with one nonzero class (q = eta) or gamma = 0 (q = eta) takes a shortcut; the rows after it are still
    minimised (the closed form focal_optimal_prediction is the reference)."""
    eta = np.array([[0.0, 1.0, 0.0], [0.5, 0.3, 0.2], [0.1, 0.1, 0.8]])
    q = minimise_focal_risk(eta, 2.0)
    np.testing.assert_array_equal(q[0], [0.0, 1.0, 0.0])
    np.testing.assert_allclose(q[1:], focal_optimal_prediction(eta[1:], 2.0), atol=1e-10, rtol=0)
    np.testing.assert_array_equal(minimise_focal_risk(eta[1:], 0.0), eta[1:])
