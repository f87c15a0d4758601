"""Tests of the focal calibration map Psi^gamma and the results of Charoenphakdee et al. (2021) built on it.

Reference values are the book's inventory (mpmath at 30 digits and brentq for the thresholds; bounded 1-D
minimisation for Thm. 5) unless a test says otherwise.
"""

import numpy as np
import pytest
import torch
from scipy.optimize import minimize_scalar
from scipy.special import lambertw, softmax

from calib.focal import (focal_loss, focal_map, focal_optimal_prediction, focal_prediction_target, gradient_factor,
                         log_focal_weight, minimise_focal_risk, tau_oc, threshold)

torch.set_num_threads(1)

# gamma: (tau_oc, tau_uc), Charoenphakdee et al. (2021), Thm. 8 (values computed for the book's inventory)
TAU_TABLE = {0.001: (0.2030771102, 0.4998043811), 0.01: (0.2020868290, 0.4980526847),
             0.03: (0.1999275585, 0.4942162325), 0.1: (0.1927892517, 0.4813662349),
             0.5: (0.1612879085, 0.4214574615), 1: (0.1353352832, 0.3678794412),
             2: (0.1040576580, 0.2976365550), 3: (0.0854605118, 0.2525839887),
             4: (0.0729474779, 0.2207329029), 5: (0.0638764183, 0.1968027389),
             10: (0.0402512353, 0.1307479022), 50: (0.0111954574, 0.0400248275)}

# (q, gamma, Psi^gamma(q)), inventory Sec. 3 "test vectors"
PSI_VECTORS = [((0.6, 0.3, 0.1), 1, (0.695866, 0.231639, 0.072495)),
               ((0.6, 0.3, 0.1), 2, (0.794513, 0.161667, 0.043820)),
               ((0.6, 0.3, 0.1), 3, (0.871011, 0.105204, 0.023785)),
               ((0.6, 0.3, 0.1), 5, (0.954893, 0.039257, 0.005850)),
               ((0.5, 0.25, 0.25), 2, (0.644671, 0.177664, 0.177664)),
               ((0.4, 0.35, 0.25), 5, (0.534148, 0.331879, 0.133972)),
               ((0.9, 0.05, 0.05), 2, (0.997296, 0.001352, 0.001352))]


def random_logits(n, k, scale, seed, dtype=np.float64):
    rng = np.random.default_rng(seed)
    return (rng.normal(size=(n, k)) * rng.uniform(0.1, scale, size=(n, 1))).astype(dtype)


# ---------------------------------------------------------------------------------------- thresholds

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


# ------------------------------------------------------------------------------------ Thm. 5, Thm. 11

def test_thm5_counterexample_numbers():
    cases = {(1, 0.8): (0.685831, 0.253599, 0.293213), (1, 0.7): (0.617230, 0.307106, 0.327736),
             (2, 0.8): (0.626615, 0.129496, 0.213149), (3, 0.9): (0.647056, 0.045439, 0.167953),
             (5, 0.9): (0.597400, 0.011827, 0.135966)}
    for (g, e1), (q1, w_star, w_eta) in cases.items():
        eta = np.array([e1, 1 - e1])
        q = minimise_focal_risk(eta, g)
        assert q[0] == pytest.approx(q1, abs=1e-6)
        assert focal_loss(q, eta, g) == pytest.approx(w_star, abs=1e-6)
        assert focal_loss(eta, eta, g) == pytest.approx(w_eta, abs=1e-6)
        # an independent 1-D minimisation of W over q_1
        brute = minimize_scalar(lambda t: focal_loss(np.array([t, 1 - t]), eta, g), bounds=(1e-9, 1 - 1e-9),
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


# --------------------------------------------------------------------------------------- focal_map

@pytest.mark.parametrize("q, g, expected", PSI_VECTORS)
def test_psi_test_vectors(q, g, expected):
    np.testing.assert_allclose(focal_map(np.log([q]), g)[0], expected, atol=1e-6)


def test_psi_zero_is_softmax():
    z = random_logits(500, 7, 20, 1)
    np.testing.assert_allclose(focal_map(z, 0), softmax(z, axis=1), rtol=0, atol=1e-16)
    z32 = z.astype(np.float32)
    assert focal_map(z32, 0).dtype == np.float32


def test_argmax_never_changes():
    z = random_logits(20_000, 10, 40, 2)
    for g in [-0.99, -0.9, -0.5, -0.1, 0.01, 0.5, 1, 2, 5, 50, 1000]:
        np.testing.assert_array_equal(focal_map(z, g).argmax(axis=1), z.argmax(axis=1))
    z32 = z.astype(np.float32)
    for g in [-0.5, 1, 5]:
        np.testing.assert_array_equal(focal_map(z32, g).argmax(axis=1), z32.argmax(axis=1))


def test_one_hot_stays_one_hot():
    z = np.array([[800.0, 0.0, -5.0], [0.0, 1e6, 3.0]])
    for g in [0.5, 1, 5]:
        np.testing.assert_array_equal(focal_map(z, g), [[1, 0, 0], [0, 1, 0]])
    # and a near-one-hot row maps to a nearer one
    out = focal_map(np.array([[30.0, 0.0, 0.0]]), 2)[0]
    assert out[0] == 1.0 and 0 < out[1] < softmax([30.0, 0.0, 0.0])[1]


def test_float32_saturation():
    z = np.array([[20.0, 0.0, 0.0], [200.0, 0.0, 0.0], [1e4, -3.0, 0.0], [5.0, 5.0, -90.0]], dtype=np.float32)
    assert softmax(z[:1], axis=1).astype(np.float32)[0, 0] == 1.0        # where Eq. 13 as printed gives nan
    for g in [0.5, 2, 5, -0.5]:
        out = focal_map(z, g)
        assert out.dtype == np.float32
        assert np.all(np.isfinite(out))
        np.testing.assert_allclose(out.sum(axis=1), 1, atol=1e-6)
        np.testing.assert_allclose(out, focal_map(z.astype(np.float64), g), atol=1e-6, rtol=0)
    np.testing.assert_allclose(focal_map(z[:1], 2)[0], [1.0, 1.0507838e-25, 1.0507838e-25], rtol=1e-5)


def test_float32_matches_float64():
    z = random_logits(20_000, 10, 30, 3, dtype=np.float32)
    for g in [0.5, 1, 2, 5]:
        np.testing.assert_allclose(focal_map(z, g), focal_map(z.astype(np.float64), g), atol=1e-6, rtol=0)


def test_matches_the_probability_space_form_and_log_weights():
    rng = np.random.default_rng(4)
    q = rng.dirichlet(np.ones(6), size=300)
    for g in [0.5, 1, 3]:
        np.testing.assert_allclose(focal_map(np.log(q), g), focal_prediction_target(q, g), atol=1e-14, rtol=0)
        h = np.exp(log_focal_weight(q, g))
        np.testing.assert_allclose(h, q / gradient_factor(q, g), rtol=1e-13)
        np.testing.assert_allclose(focal_map(np.log(q), g), h / h.sum(axis=1, keepdims=True), atol=1e-14, rtol=0)


def test_log_focal_weight_is_increasing_and_finite():
    v = np.concatenate([np.logspace(-300, np.log10(0.5), 3000), 1 - np.logspace(np.log10(0.5), -12, 3000)[1:]])
    for g in [0.001, 1, 50, 1000]:
        lh = log_focal_weight(v, g)
        assert np.all(np.isfinite(lh)) and np.all(np.diff(lh) > 0)
    with pytest.raises(ValueError, match="p must be > 0"):
        log_focal_weight([0.0, 0.5], 1)


def test_equals_komisarenko_focal_calibration_map():
    """p_k proportional to 1 / FL'(q_k), FL'(q) = (1-q)^g (g log q / (1-q) - 1/q) (slavikkom's focal_derivative)."""
    rng = np.random.default_rng(5)
    q = rng.dirichlet(np.ones(4), size=200)
    for g in [-0.5, -0.25, 0.5, 1, 3, 5]:
        deriv = (1 - q) ** g * (g * np.log(q) / (1 - q) - 1 / q)
        ref = (1 / deriv) / (1 / deriv).sum(axis=1, keepdims=True)
        np.testing.assert_allclose(focal_map(np.log(q), g), ref, atol=1e-13, rtol=0)
    # Komisarenko & Kull (2024), Fig. 1 left, negative gamma (values computed for the book's inventory)
    for g, expected in [(-0.25, 0.8644), (-0.5, 0.8326)]:
        assert focal_map(np.log([[0.9, 0.1]]), g)[0, 0] == pytest.approx(expected, abs=1e-4)


def test_binary_closed_form():
    y = np.linspace(1e-4, 1 - 1e-4, 999)
    for g in [0.5, 1, 2, 5]:
        a0 = y ** g / (1 - y) - g * y ** (g - 1) * np.log(1 - y)
        a1 = gradient_factor(y, g) / y
        np.testing.assert_allclose(focal_map(np.log(np.column_stack([y, 1 - y])), g)[:, 0], a0 / (a0 + a1),
                                   atol=1e-13, rtol=0)


def test_prop6_subset_uniform_vectors_are_fixed():
    for g in [0.5, 2]:
        for k in [2, 5, 17]:
            np.testing.assert_allclose(focal_map(np.zeros((1, k)), g), np.full((1, k), 1 / k), atol=1e-15)


# ------------------------------------------------------------------------------------------- torch

def test_torch_matches_numpy():
    z = random_logits(5000, 10, 30, 6, dtype=np.float32)
    for g in [-0.5, 0.5, 2, 5]:
        out = focal_map(torch.from_numpy(z), g)
        assert isinstance(out, torch.Tensor) and out.dtype == torch.float32
        np.testing.assert_allclose(out.numpy(), focal_map(z.astype(np.float64), g), atol=1e-6, rtol=0)
        z64 = torch.from_numpy(z.astype(np.float64))
        np.testing.assert_allclose(focal_map(z64, g).numpy(), focal_map(z64.numpy(), g), atol=1e-13, rtol=0)


def test_torch_gradients_finite_at_saturation():
    z = torch.tensor([[20.0, 0, 0], [200.0, 0, 0], [1e4, 0, -3], [3.0, 1.0, -2.0], [40.0, 39.0, 0.0]],
                     requires_grad=True)
    weights = torch.linspace(0, 1, 3)
    for g in [-0.5, 0.5, 1, 2, 5]:
        z.grad = None
        (focal_map(z, g) * weights).sum().backward()
        assert torch.isfinite(z.grad).all()


def test_torch_gradcheck():
    z = torch.tensor(random_logits(4, 5, 4, 7), requires_grad=True)
    for g in [-0.5, 0.7, 3]:
        assert torch.autograd.gradcheck(lambda t: focal_map(t, g), (z,))
    z_sat = torch.tensor([[35.0, 0.0, -1.0, 2.0]], dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: focal_map(t, 0.5), (z_sat,))


def test_torch_half_precision():
    z = torch.tensor(random_logits(10, 4, 5, 8), dtype=torch.float16)
    out = focal_map(z, 2)
    assert out.dtype == torch.float16
    np.testing.assert_allclose(out.float().numpy(), focal_map(z.double().numpy(), 2), atol=2e-3)


# ------------------------------------------------------------------------------------------ errors

@pytest.mark.parametrize("gamma", [-1.5, -1 - 1e-9, -2, np.nan, np.inf, [1.0, 2.0], "2", True])
def test_gamma_domain(gamma):
    with pytest.raises(ValueError, match="gamma"):
        focal_map(np.zeros((2, 3)), gamma)


def test_gamma_below_minus_one_says_why():
    """The weight v / g(v, gamma) = v / ((1-v)^gamma (1 + gamma r(v))) turns negative near v = 1 for gamma < -1."""
    with pytest.raises(ValueError, match=r">= -1.*changes sign"):
        focal_map(np.zeros((2, 3)), -1.25)
    with pytest.raises(ValueError, match=r">= -1"):
        focal_map(torch.zeros((2, 3)), -1.01)
    v = 0.99                                             # the sign change the message describes, at gamma = -1.25
    r = -v * np.log(v) / (1 - v)
    assert 1 - 1.25 * r < 0 < 1 - 1.0 * r


def _psi_mpmath(z, gamma, dps=60):
    """Eq. (1) / Psi^gamma in mpmath: weights v / g(v) with g = (1-v)^gamma (1 + gamma r), r = -v log v / (1-v)."""
    import mpmath

    mpmath.mp.dps = dps
    zz = [mpmath.mpf(float(x)) for x in z]
    top = max(zz)
    e = [mpmath.exp(x - top) for x in zz]
    v = [x / sum(e) for x in e]
    w = [x / ((1 - x) ** gamma * (1 - gamma * x * mpmath.log(x) / (1 - x))) for x in v]
    return np.array([float(x / sum(w)) for x in w])


@pytest.mark.parametrize("gamma", [-1.0, -1 + 1e-9, -0.75, -0.5])
def test_gamma_down_to_minus_one(gamma):
    """The map exists on gamma >= -1; at gamma = -1 the top weight tends to 2 as v_top -> 1 (no 0/0)."""
    rows = [[0.0, 0.0, 0.0], [3.0, 1.0, -2.0], [12.0, 0.0, 0.0], [30.0, 29.0, 0.0], [0.1, 0.0, -0.3, 2.0],
            [35.0, 0.0, -1.0, 2.0], [18.0, -4.0, 1.0, 0.5]]
    for z in rows:
        ref = _psi_mpmath(z, gamma)
        got = focal_map(np.array([z]), gamma)[0]
        np.testing.assert_allclose(got, ref, rtol=1e-13, atol=1e-300)
        got_t = focal_map(torch.tensor([z], dtype=torch.float64), gamma)[0].numpy()
        np.testing.assert_allclose(got_t, ref, rtol=1e-13, atol=1e-300)
    z = random_logits(2000, 6, 60, 11)                   # up to saturated rows: finite, in the simplex, argmax kept
    for arr in [z, z.astype(np.float32)]:
        p = focal_map(arr, gamma)
        assert np.all(np.isfinite(p)) and np.all(p >= 0)
        np.testing.assert_allclose(p.sum(axis=1), 1, atol=1e-6 if arr.dtype == np.float32 else 1e-12)
        np.testing.assert_array_equal(p.argmax(axis=1), arr.argmax(axis=1))
    np.testing.assert_allclose(focal_map(z.astype(np.float32), gamma), focal_map(z, gamma), atol=2e-6)


def test_gamma_minus_one_at_the_vertex():
    """gamma = -1: h(v) = v (1 - v) / (1 - r(v)) -> 2 as v -> 1, so a saturated top class keeps a finite weight."""
    for gap in [40.0, 400.0, 700.0]:
        z = np.array([[gap, 0.0, 0.0]])
        p = focal_map(z, -1.0)[0]
        # the others have weights v_j (1 - v_j) / (1 - r(v_j)) ~ v_j = e^-gap / (1 + 2 e^-gap), the top one 2
        assert p[0] == pytest.approx(1.0, abs=1e-15)
        assert np.log(p[1]) == pytest.approx(-gap - np.log(2), rel=1e-14)
    assert np.array_equal(focal_map(np.array([[4000.0, 0.0, 0.0]]), -1.0), [[1.0, 0.0, 0.0]])
    z = torch.tensor([[20.0, 0, 0], [200.0, 0, 0], [1e4, 0, -3], [3.0, 1.0, -2.0], [40.0, 39.0, 0.0]],
                     dtype=torch.float64, requires_grad=True)
    (focal_map(z, -1.0) * torch.linspace(0, 1, 3, dtype=torch.float64)).sum().backward()
    assert torch.isfinite(z.grad).all()
    zc = torch.tensor(random_logits(4, 5, 4, 7), requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: focal_map(t, -1.0), (zc,))
    zs = torch.tensor([[9.0, 0.0, -1.0, 2.0]], dtype=torch.float64, requires_grad=True)   # S < 0.1: the series
    assert torch.autograd.gradcheck(lambda t: focal_map(t, -1.0), (zs,))


def test_logits_must_be_finite_2d():
    bad = np.array([[0.0, np.inf, 1.0]])
    for arr in [bad, bad.astype(np.float32), np.array([[np.nan, 0.0]])]:
        with pytest.raises(ValueError, match="NaN or infinity"):
            focal_map(arr, 1)
    with pytest.raises(ValueError, match="NaN or infinity"):
        focal_map(torch.tensor([[0.0, float("-inf")]]), 1)
    with pytest.raises(ValueError, match="2-D"):
        focal_map(np.zeros(3), 1)
    with pytest.raises(ValueError, match="at least 2"):
        focal_map(np.zeros((4, 1)), 1)
    with pytest.raises(ValueError, match=r"\(N, K\)"):
        focal_map(torch.zeros(3), 1)


@pytest.mark.parametrize("gamma", [-1.0, -0.5, 0.0, 1.0, 3.0, 7.0])
def test_log_focal_map_is_the_log_of_focal_map_and_finite_beyond_underflow(gamma):
    from scipy.special import log_softmax

    from calib.focal import focal_map, log_focal_map

    rng = np.random.default_rng(3)
    z = rng.normal(size=(200, 6)) * 4
    np.testing.assert_allclose(np.exp(log_focal_map(z, gamma)), focal_map(z, gamma), rtol=1e-10, atol=1e-300)
    far = np.array([[0.0, 2000.0, 0.0]])
    assert focal_map(far, gamma)[0, 0] == 0.0
    log_p = log_focal_map(far, gamma)
    assert np.all(np.isfinite(log_p)) and log_p[0, 0] < -800 and abs(np.logaddexp.reduce(log_p[0])) < 1e-12
    if gamma == 0:
        np.testing.assert_array_equal(log_focal_map(z, 0.0), log_softmax(z, axis=1))
    with pytest.raises(ValueError, match="gamma"):
        log_focal_map(z, -2.0)
