"""calib.focal.calibration_map: the focal calibration map Psi^gamma and its comparison with temperature scaling.

Psi^gamma in numpy and torch, float32 and gamma in [-1, inf) (Charoenphakdee et al. 2021, Thm. 11); its binary
logit form, the TS bounds and the closest temperature (Komisarenko & Kull 2024, Props. 2-5, Figs. 2-7).
"""

import numpy as np
import pytest
import torch
from scipy.special import expit, logit, softmax

from calib.focal import (closest_temperature, effective_inverse_temperature, focal_calibration_logit, focal_map,
                         focal_prediction_target, gradient_factor, log_f_gamma, log_focal_map, log_focal_weight,
                         threshold, top_label_gain, ts_bounds, ts_distance)

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
    from calib.focal.calibration_map import _sorted_logit_grid

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


# ---------------------------------------------------------------------------------------- extreme inputs

@pytest.mark.parametrize("gamma", [-1.0, -0.5, 0.5, 3.0, 1e4, 1e15])
def test_ties_stay_ties_and_every_finite_logit_gives_a_finite_map(gamma):
    """Equal logits map to equal probabilities for any gamma (the top class used to be evaluated by another
    formula, which gamma = 1e15 amplified: [0.376, 0.312, 0.312]); logits beyond the float range of each other
    (differences overflow to -inf) give the vertex, the map's limit; numpy and torch agree."""
    rows = np.array([[0.0, 0.0, 0.0], [2.0, 2.0, -1.0], [1e308, -1e308, 0.0], [-1e308, 1e308, 1e308],
                     [40.0, 0.0, 0.0], [800.0, 0.0, -5.0], [0.0, 0.0, -1e300]])
    out = focal_map(rows, gamma)
    via_torch = focal_map(torch.tensor(rows, dtype=torch.float64), gamma).numpy()
    assert np.isfinite(out).all() and np.isfinite(via_torch).all()
    np.testing.assert_allclose(out.sum(axis=1), 1.0, rtol=1e-15)
    np.testing.assert_allclose(out, via_torch, atol=1e-12)
    assert np.all(out[0] == out[0, 0]) and out[1, 0] == out[1, 1] and out[3, 1] == out[3, 2] and out[6, 0] == out[6, 1]
    np.testing.assert_array_equal(out[2], [1.0, 0.0, 0.0])
    assert np.isfinite(log_focal_map(rows[[0, 1, 4]], gamma)).all()


def _layouts(z):
    """The same logits in every memory layout a caller can hand over: C, Fortran (a pandas ``to_numpy()``),
    a strided column slice, a transposed copy's transpose, negative strides, read-only."""
    wide = np.repeat(z, 2, axis=1)
    frozen = z.copy()
    frozen.flags.writeable = False
    reversed_rows = np.ascontiguousarray(z[::-1])[::-1]
    return {"C": np.ascontiguousarray(z), "F": np.asfortranarray(z), "strided": wide[:, ::2],
            "transposed": np.ascontiguousarray(z.T).T, "negative-stride": reversed_rows, "read-only": frozen}


@pytest.mark.parametrize("gamma", [-0.5, 1.0, 3.0])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_every_memory_layout_gives_the_same_map(gamma, dtype):
    """Issue 43, item 1: focal_map and log_focal_map wrote through ``a.reshape(-1)[i] = ...``, a copy for a
    Fortran-ordered or strided array, and returned wrong rows that still summed to 1 (up to 0.059 in p). Every layout
    now gives the C-ordered result exactly; the case with saturated rows (S = 0, v_top > 1/2) is in the logits."""
    z = random_logits(300, 7, 12.0, seed=11, dtype=dtype)
    z[:5, 0] += 800 if dtype == np.float64 else 60       # saturated rows: the special cases' flat writes
    for fn in (focal_map, log_focal_map):
        expected = fn(np.ascontiguousarray(z), gamma)
        for name, arr in _layouts(z).items():
            got = fn(arr, gamma)
            assert np.array_equal(got, expected), (fn.__name__, name, float(np.nanmax(np.abs(got - expected))))
    assert not np.allclose(focal_map(z, gamma), focal_map(z[:, ::-1], gamma))        # the control: layout vs order


def test_every_memory_layout_gives_the_same_fitted_maps():
    """The maps that reach focal_map, FocalTemperatureScaling and the registry's 'fts' and 'psi', fitted on C-ordered
    logits, predict the same probabilities for every layout of the same logits."""
    from calib.posthoc import FocalTemperatureScaling, get_map

    rng = np.random.default_rng(3)
    z = random_logits(400, 5, 8.0, seed=12)
    y = rng.integers(0, 5, 400)
    fts = FocalTemperatureScaling(temperatures=np.geomspace(0.05, 50, 60)).fit(z, y)
    maps = {"fts-estimator": fts.predict_proba, "fts": get_map("fts")(z, y).proba,
            "fts-log": get_map("fts")(z, y).log_proba, "psi": get_map("psi")(z, y, loss="fl-3").proba}
    for name, predict in maps.items():
        expected = np.asarray(predict(np.ascontiguousarray(z)))
        for layout, arr in _layouts(z).items():
            assert np.array_equal(np.asarray(predict(arr)), expected), (name, layout)


# --------------------------------------------------------------- mutation sample B: behaviour the sample found untested

def test_float32_logits_of_a_bad_shape_get_the_standard_message_naming_logits():
    """float32 logits keep float32 and take their own path; a bad shape there raises as_scores' message, naming
    logits, as float64 logits do."""
    for bad, message in ((np.zeros(3), r"^logits must be 2-D of shape \(N, K\); got 1-D shape \(3,\)"),
                         (np.zeros((2, 3, 1)), r"^logits must be 2-D of shape \(N, K\); got shape \(2, 3, 1\)"),
                         (np.zeros((0, 3)), r"^logits is empty \(shape \(0, 3\)\)"),
                         (np.zeros((4, 1)), r"^logits has 1 column\(s\)")):
        for dtype in (np.float32, np.float64):
            with pytest.raises(ValueError, match=message):
                focal_map(bad.astype(dtype), 2.0)


# --------------------------------------------------------------- mutation sample C: behaviour the sample found untested

def test_the_grid_size_guard_divides_by_the_orderings_so_a_small_ten_class_grid_runs():
    """The guard estimates the sorted grid as (R / h)^(K-1) / (K-1)!: for K = 10, R / h = 5 that is 5^9 / 9! ~ 5
    rows (not 5^9 * 9!, which would refuse it). The distance over that grid is the brute-force maximum over the sorted
    logit vectors (0, d_2, ..., d_10), 0 >= d_2 >= ... > -1 on the ticks 0, -0.2, ..., -0.8."""
    from itertools import combinations_with_replacement

    ticks = -0.2 * np.arange(5)
    rows = np.array([(0.0, *c) for c in combinations_with_replacement(ticks, 9)])
    expected = np.abs(focal_map(rows, 1.0) - softmax(rows / 0.5, axis=1)).max()
    assert ts_distance(1.0, 0.5, n_classes=10, logit_range=1.0, step=0.2) == pytest.approx(expected, rel=1e-12)


def test_sharp_upper_temperature_finds_a_minimum_of_beta_at_the_end_of_its_search_grid():
    """The sharp T_high = 1 / min_s beta(s) searches s in [0, 12]; for gamma = 76900 the minimum lies at s ~ 11.9985,
    in the last grid cell (11.995, 12], and must be found there (a grid that stops at 11.995 refines the cell before
    it and misses it by ~7e-13 relative). The reference minimum is scipy's bounded search."""
    from scipy.optimize import minimize_scalar

    g = 76900.0
    best = minimize_scalar(lambda s: effective_inverse_temperature(s, g), bounds=(11.0, 13.0), method="bounded",
                           options={"xatol": 1e-10})
    assert 11.995 < best.x < 12.0
    assert 1 / ts_bounds(g, sharp=True)[1] == pytest.approx(best.fun, rel=1e-13, abs=0)


def test_non_finite_logit_differences_are_refused_naming_s():
    for f in (effective_inverse_temperature, log_f_gamma):
        with pytest.raises(ValueError, match=r"^s contains NaN or infinity"):
            f([1.0, np.nan], 2.0)


def test_ragged_or_missing_logits_are_refused_naming_logits():
    with pytest.raises(ValueError, match=r"^logits could not be read as an array"):
        focal_map([[1.0, 2.0], [3.0]], 1.0)
    with pytest.raises(ValueError, match=r"^logits is None"):
        focal_map(None, 1.0)
    with pytest.raises(ValueError, match=r"^logits must be 2-D"):
        top_label_gain(np.zeros(3), 1.0)


def test_the_sharp_upper_temperature_is_the_minimum_of_beta_for_gammas_whose_minimiser_lies_beyond_s_12():
    """ts_bounds(sharp=True)'s 1/T_high is min over s of beta(s). Its search stopped at s = 12, but the minimiser
    grows with gamma (s near 12.3 at gamma = 1e5, 14.6 at 1e6, 19.3 at 1e8), so it returned beta(12), above the
    minimum (at gamma = 1e6: 1000000.20820 against 1000000.19321). Now a minimum at the grid's end extends the search;
    the reference is scipy's bounded minimisation of beta on (0, 60)."""
    from scipy.optimize import minimize_scalar

    for gamma, where in ((1e5, 12.27), (1e6, 14.63), (1e8, 19.33)):
        reference = minimize_scalar(lambda s: float(effective_inverse_temperature(s, gamma)), bounds=(1e-3, 60.0),
                                    method="bounded", options={"xatol": 1e-10})
        assert reference.x == pytest.approx(where, abs=0.01)
        _, t_high = ts_bounds(gamma, sharp=True)
        assert 1.0 / t_high == pytest.approx(reference.fun, rel=1e-14)
        assert 1.0 / t_high < float(effective_inverse_temperature(12.0, gamma))
