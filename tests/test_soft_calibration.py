"""Soft calibration objectives (Karandikar et al. 2021): calib.soft_binning, the secondary losses of calib.losses,
TS-SB-ECE in calib.posthoc and the derivations of calib.symbolic, against brute-force loops and closed forms."""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from scipy.special import softmax

from calib import metrics, soft_binning as sb
from calib.losses import (SECONDARY_LOSSES, avuc, avuc_gs, combined_loss, confidence_incentive, cross_entropy,
                          get_loss, get_secondary_loss, mmce, s_avuc, soft_binned_ece)
from calib.posthoc import TemperatureScaling, fit_temperature_sb_ece

torch.set_num_threads(1)


def batch(n=200, k=10, scale=3.0, seed=0, dtype=torch.float64, frac_correct=0.6):
    gen = torch.Generator().manual_seed(seed)
    logits = torch.randn(n, k, generator=gen, dtype=dtype) * scale
    targets = torch.randint(0, k, (n,), generator=gen)
    m = int(frac_correct * n)
    targets[:m] = logits[:m].argmax(1)
    return logits, targets


def top_label(logits, targets):
    p = softmax(logits.double().numpy(), axis=1)
    return p, p.max(1), (p.argmax(1) == targets.numpy()).astype(float)


# ------------------------------------------------------------------------------------- brute-force references

def brute_membership(c, m, t):
    """u_j(c) for one confidence, one bin at a time (max subtracted before exp)."""
    g = [-(c - (j + 0.5) / m) ** 2 / t for j in range(m)]
    top = max(g)
    e = [math.exp(x - top) for x in g]
    return [x / sum(e) for x in e]


def brute_sbece(conf, correct, m, t, p, estimator):
    """Eqs. 8-12 as printed (corrected indices), with Python loops over samples and bins."""
    n = len(conf)
    u = [brute_membership(c, m, t) for c in conf]
    S = [sum(u[i][j] for i in range(n)) for j in range(m)]
    C = [sum(u[i][j] * conf[i] for i in range(n)) / S[j] for j in range(m)]
    A = [sum(u[i][j] * correct[i] for i in range(n)) / S[j] for j in range(m)]
    if estimator == "bin":
        total = sum(S[j] / n * abs(A[j] - C[j]) ** p for j in range(m))
    else:
        total = sum(u[i][j] * abs(A[j] - conf[i]) ** p for i in range(n) for j in range(m)) / n
    return total ** (1 / p)


def brute_avuc(conf, correct, h, kappa, soft_t=None):
    """Eqs. 13-14 (soft_t None) or Eqs. 15-16 (soft_t = t_i), one sample at a time."""
    n = {"AC": 0.0, "AU": 0.0, "IC": 0.0, "IU": 0.0}
    for c, a, hi, ti in zip(conf, correct, h, soft_t if soft_t is not None else [None] * len(conf)):
        th = math.tanh(hi)
        if soft_t is None:
            cert = hi < kappa
            if a and cert:
                n["AC"] += c * (1 - th)
            elif a:
                n["AU"] += c * th
            elif cert:
                n["IC"] += (1 - c) * (1 - th)
            else:
                n["IU"] += (1 - c) * th
        elif a:
            n["AU"] += ti * th
            n["AC"] += (1 - ti) * (1 - th)
        else:
            n["IC"] += (1 - ti) * (1 - th)
            n["IU"] += ti * th
    return math.log(1 + (n["AU"] + n["IC"]) / (n["AC"] + n["IU"]))


def brute_mmce(conf, correct, width=0.4, weighted=False):
    n = len(conf)
    k = lambda a, b: math.exp(-abs(a - b) / width)  # noqa: E731
    if not weighted:
        total = sum((correct[i] - conf[i]) * (correct[j] - conf[j]) * k(conf[i], conf[j])
                    for i in range(n) for j in range(n))
        return math.sqrt(total / n ** 2)
    ci = [i for i in range(n) if correct[i]]
    wi = [i for i in range(n) if not correct[i]]
    m, q = len(ci), len(wi)
    cc = sum((1 - conf[i]) * (1 - conf[j]) * k(conf[i], conf[j]) for i in ci for j in ci) / m ** 2
    ww = sum(conf[i] * conf[j] * k(conf[i], conf[j]) for i in wi for j in wi) / q ** 2
    cw = sum((1 - conf[i]) * conf[j] * k(conf[i], conf[j]) for i in ci for j in wi) / (m * q)
    return math.sqrt(cc + ww - 2 * cw)


def entropy(p):
    return -(p * np.log(p)).sum(1)


# ------------------------------------------------------------------------------------- calib.soft_binning

def test_membership_against_loop_and_closed_forms():
    rng = np.random.default_rng(0)
    c = rng.random(50)
    for t in (1e-1, 1e-2, 1e-3):
        u = sb.soft_membership(c, 15, t)
        np.testing.assert_allclose(u, [brute_membership(ci, 15, t) for ci in c], rtol=1e-12, atol=1e-300)
        np.testing.assert_allclose(u.sum(1), 1, atol=1e-14)
        # log(u_j / u_{j+1}) = 2 (j/M - c) / (M T), j = 1..M-1
        j = np.arange(1, 15)
        lhs = np.diff(-sb.log_soft_membership(c, 15, t), axis=1)
        np.testing.assert_allclose(lhs, 2 * (j / 15 - c[:, None]) / (15 * t), rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(sb.bin_centres(4), [0.125, 0.375, 0.625, 0.875])


def test_membership_never_underflows():
    u = sb.soft_membership(np.array([0.0, 2 / 15, 1.0]), 15, 1e-9)
    assert np.all(np.isfinite(u)) and np.allclose(u.sum(1), 1)
    assert u[1, 1] == pytest.approx(0.5) and u[1, 2] == pytest.approx(0.5)   # on the edge 2/15: split evenly


def test_membership_derivative_and_modes():
    c = np.linspace(0.01, 0.99, 97)
    h = 1e-7
    for t in (0.1, 0.01):
        fd = (sb.soft_membership(c + h, 15, t) - sb.soft_membership(c - h, 15, t)) / (2 * h)
        np.testing.assert_allclose(sb.membership_derivative(c, 15, t), fd, rtol=1e-5, atol=1e-6)
    xi = sb.bin_centres(15)
    for t in (0.1, 0.01, 1e-3):
        modes = sb.membership_modes(15, t)
        assert np.isnan(modes[0]) and np.isnan(modes[-1])          # edge bins are monotone on [0, 1]
        inside = ~np.isnan(modes)
        xi_bar = sb.soft_membership(modes[inside], 15, t) @ xi
        np.testing.assert_allclose(xi_bar, xi[inside], atol=1e-12)
    assert np.isnan(sb.membership_modes(15, 0.1)[:3]).all() and np.isnan(sb.membership_modes(15, 0.1)[-3:]).all()
    shifts = sb.membership_modes(15, 0.01) - xi
    assert shifts[1] == pytest.approx(-0.0150, abs=5e-5) and shifts[2] == pytest.approx(-0.001557, abs=1e-6)
    assert np.nanmax(np.abs(sb.membership_modes(15, 1e-3)[2:-2] - xi[2:-2])) < 1e-4


@pytest.mark.parametrize("norm", ["l1", "l2"])
@pytest.mark.parametrize("estimator", ["bin", "label"])
def test_numpy_sbece_against_loops(norm, estimator):
    rng = np.random.default_rng(1)
    c = rng.uniform(0.1, 1, 60)
    a = (rng.random(60) < c ** 1.5).astype(float)
    p = 1 if norm == "l1" else 2
    for t in (0.1, 0.01, 1e-3):
        ref = brute_sbece(list(c), list(a), 15, t, p, estimator)
        assert sb.soft_binned_ece(c, a, 15, t, norm, estimator) == pytest.approx(ref, rel=1e-11)


def test_sbece_limits_and_ordering():
    rng = np.random.default_rng(2)
    c = rng.uniform(0.2, 1, 1000)
    a = (rng.random(1000) < c).astype(float)
    # T -> infinity: one bin (C25)
    assert sb.soft_binned_ece(c, a, temperature=1e6) == pytest.approx(abs(a.mean() - c.mean()), rel=1e-9)
    for p, norm in ((1, "l1"), (2, "l2")):
        lb = np.mean(np.abs(a.mean() - c) ** p) ** (1 / p)
        assert sb.soft_binned_ece(c, a, temperature=1e6, norm=norm, estimator="label") == pytest.approx(lb, rel=1e-9)
    # SB-ECE_lb >= SB-ECE_bin (Jensen within each soft bin)
    for t in (1e-3, 1e-2, 1e-1):
        for norm in ("l1", "l2"):
            for s in range(5):
                cc = rng.uniform(0, 1, 100)
                aa = (rng.random(100) < rng.uniform(0, 1)).astype(float)
                assert (sb.soft_binned_ece(cc, aa, temperature=t, norm=norm, estimator="label")
                        >= sb.soft_binned_ece(cc, aa, temperature=t, norm=norm) - 1e-12)


def test_population_values_of_app_h():
    c, a, w = sb.uniform_calibrated_population(0.5, 1.0)
    assert sb.soft_binned_ece(c, a, temperature=1e-2, norm="l2", weights=w) < 1e-15
    assert sb.soft_binned_ece(c, a, temperature=1e-2, norm="l2", estimator="label", weights=w) == \
        pytest.approx(0.062553, abs=1e-6)
    assert sb.soft_binned_ece(c, a, temperature=1e-3, norm="l2", estimator="label", weights=w) == \
        pytest.approx(0.022711, abs=1e-6)
    h = 1e-4
    nll_slope = (sb.binary_tempered_nll(1 + h) - sb.binary_tempered_nll(1 - h)) / (2 * h)
    assert abs(nll_slope) < 1e-8

    def lb2(tau):
        cc, aa, ww = sb.binary_tempered_population(tau)
        return sb.soft_binned_ece(cc, aa, temperature=1e-2, norm="l2", estimator="label", weights=ww) ** 2

    assert (lb2(1 + h) - lb2(1 - h)) / (2 * h) == pytest.approx(8.77e-4, abs=1e-6)
    cc, aa, ww = sb.binary_tempered_population(1.0)
    assert np.array_equal(cc, aa) and ww.sum() == pytest.approx(1)


def test_gradient_closed_form_against_finite_differences():
    rng = np.random.default_rng(3)
    c = rng.uniform(0.3, 0.99, 40)
    a = (rng.random(40) < c).astype(float)
    g = sb.soft_binned_ece_gradient(c, a, 15, 0.02)
    h = 1e-6
    fd = np.empty_like(c)
    for i in range(len(c)):
        up, dn = c.copy(), c.copy()
        up[i] += h
        dn[i] -= h
        fd[i] = (sb.soft_binned_ece(up, a, 15, 0.02, "l2") ** 2
                 - sb.soft_binned_ece(dn, a, 15, 0.02, "l2") ** 2) / (2 * h)
    np.testing.assert_allclose(g, fd, rtol=1e-5, atol=1e-9)


def test_soft_uncertainty():
    h = np.linspace(0, 1, 101)
    np.testing.assert_allclose(sb.soft_uncertainty(h, 0.5, 1.0), h, atol=1e-15)
    assert sb.soft_uncertainty(0.3, 0.3, 0.05) == pytest.approx(0.5)
    grid = np.array([1e-9, 0.1, 0.29, 0.3, 0.31, 0.6, 1 - 1e-9])
    np.testing.assert_allclose(sb.soft_uncertainty(grid, 0.3, 1.0), [0, 0.2059, 0.4880, 0.5, 0.5118, 0.7778, 1],
                               atol=1e-4)
    np.testing.assert_allclose(sb.soft_uncertainty(grid, 0.3, 0.01), [0, 0, 0.0081, 0.5, 0.9911, 1, 1], atol=1e-4)
    x = np.linspace(0.05, 0.95, 19)
    e = 1e-7
    fd = (sb.soft_uncertainty(x + e, 0.3, 0.4) - sb.soft_uncertainty(x - e, 0.3, 0.4)) / (2 * e)
    np.testing.assert_allclose(sb.soft_uncertainty_derivative(x, 0.3, 0.4), fd, rtol=1e-6)
    assert np.all(sb.soft_uncertainty_derivative(x, 0.3, 0.4) > 0)
    assert sb.soft_uncertainty(0.0, 0.3, 2.0) == 0 and sb.soft_uncertainty(1.0, 0.3, 2.0) == 1


def test_edge_distance_and_hard_limit_temperature():
    np.testing.assert_allclose(sb.edge_distance([0.0, 1 / 15 + 0.01, 0.5, 1.0], 15),
                               [1 / 15, 0.01, 0.5 - 7 / 15, 1 / 15])
    t = sb.hard_limit_temperature(1e-3, 15, 1e-6)
    u = sb.soft_membership(np.array([2 / 15 + 1e-3]), 15, float(t))[0]
    assert u[2] / (u[1] + u[2]) == pytest.approx(1 - 1e-6, abs=1e-12)


def test_soft_binning_input_checks():
    with pytest.raises(ValueError, match="conf must lie in"):
        sb.soft_membership([0.5, 1.2])
    with pytest.raises(ValueError, match="temperature must be > 0"):
        sb.soft_membership([0.5], temperature=0)
    with pytest.raises(ValueError, match="correct has 2 entries"):
        sb.soft_binned_ece([0.5, 0.6, 0.7], [1, 0])
    with pytest.raises(ValueError, match="kappa must be in"):
        sb.soft_uncertainty([0.5], kappa=1.5)


# -------------------------------------------------------------------------------- calib.losses: SB-ECE

@pytest.mark.parametrize("norm", ["l1", "l2"])
@pytest.mark.parametrize("estimator", ["bin", "label"])
def test_torch_sbece_against_numpy_and_loops(norm, estimator):
    z, y = batch(n=80)
    _, c, a = top_label(z, y)
    p = 1 if norm == "l1" else 2
    for t in (0.05, 0.01, 1e-3):
        value = soft_binned_ece(z, y, temperature=t, norm=norm, estimator=estimator).item()
        assert value == pytest.approx(sb.soft_binned_ece(c, a, 15, t, norm, estimator), rel=1e-12)
        assert value == pytest.approx(brute_sbece(list(c), list(a), 15, t, p, estimator), rel=1e-11)


@pytest.mark.parametrize("seed", range(10))
def test_sbece_tends_to_hard_ece(seed):
    """T = 1e-6: SB-ECE equals calib.metrics.ece (equal-width, 15 bins) within 1e-4 (both estimators, p = 1, 2)."""
    z, y = batch(n=2000, seed=seed)
    p, _, _ = top_label(z, y)
    for norm in ("l1", "l2"):
        for est in ("bin", "label"):
            soft = soft_binned_ece(z, y, temperature=1e-6, norm=norm, estimator=est).item()
            assert abs(soft - metrics.ece(p, y.numpy(), n_bins=15, norm=norm, estimator=est)) < 1e-4


def test_float32_small_temperature_has_no_nan():
    z, y = batch(n=512, k=100, scale=5, dtype=torch.float32)
    # rows whose confidence lies exactly on bin edges 9/15 and 1/2 (binary-like logits in the first 2 columns)
    z[:2] = -1e4
    z[0, :2] = torch.tensor([math.log(0.6), math.log(0.4)])
    z[1, :2] = 0.0
    z.requires_grad_(True)
    for t in (1e-6, 1e-5):
        for est in ("bin", "label"):
            for norm in ("l1", "l2"):
                value = soft_binned_ece(z, y, temperature=t, norm=norm, estimator=est)
                (grad,) = torch.autograd.grad(value, z)
                assert torch.isfinite(value) and torch.isfinite(grad).all()
    # the naive exp-then-normalise of the released code is 0/0 in float32 for a confidence on an edge
    c = torch.tensor([0.6], dtype=torch.float32)
    centres = (torch.arange(15, dtype=torch.float32) + 0.5) / 15
    naive = torch.exp(-(c[:, None] - centres) ** 2 / 1e-5)
    assert torch.isnan(naive / naive.sum(1, keepdim=True)).all()


def test_sbece_gradient_finite_and_nonzero_at_t001():
    z, y = batch(n=512, k=100, scale=5, dtype=torch.float32)
    z.requires_grad_(True)
    for est in ("bin", "label"):
        (grad,) = torch.autograd.grad(soft_binned_ece(z, y, temperature=0.01, norm="l2", estimator=est), z)
        assert torch.isfinite(grad).all() and grad.abs().max() > 0


def test_autograd_matches_closed_form_gradient():
    """d SB-ECE_bin,2^2 / d c_i from autograd (through logits) equals the closed form times dc/dz."""
    z, y = batch(n=60)
    z.requires_grad_(True)
    value = soft_binned_ece(z, y, temperature=0.02, norm="l2") ** 2
    (grad,) = torch.autograd.grad(value, z)
    p, c, a = top_label(z.detach(), y)
    g = sb.soft_binned_ece_gradient(c, a, 15, 0.02)
    top = p.argmax(1)
    dc_dz = -p * c[:, None]
    dc_dz[np.arange(60), top] += c
    np.testing.assert_allclose(grad.numpy(), g[:, None] * dc_dz, rtol=1e-8, atol=1e-14)


def test_gradcheck_secondary_losses():
    z, y = batch(n=24, k=5, scale=1.5)
    z.requires_grad_(True)
    fns = [lambda x: soft_binned_ece(x, y, temperature=0.05, norm="l2", estimator="bin"),
           lambda x: soft_binned_ece(x, y, temperature=0.05, norm="l2", estimator="label"),
           lambda x: s_avuc(x, y, kappa=0.4, temperature=0.5),
           lambda x: avuc(x, y, kappa=0.8),
           lambda x: mmce(x, y), lambda x: mmce(x, y, weighted=True)]
    for f in fns:
        assert torch.autograd.gradcheck(f, (z,), eps=1e-6, atol=1e-6)


# ------------------------------------------------------------------------------------ AvUC, S-AvUC, MMCE

def test_avuc_and_s_avuc_against_loops():
    z, y = batch(n=100, k=10, scale=2)
    p, c, a = top_label(z, y)
    h = entropy(p)
    kappa = float(np.median(h))
    assert avuc(z, y, kappa).item() == pytest.approx(brute_avuc(c, a, h, kappa), rel=1e-12)
    assert avuc_gs(z, y, kappa).item() == pytest.approx(brute_avuc(c, a, h, kappa), rel=1e-12)
    for k_soft, t in ((0.5, 1.0), (0.3, 0.1)):
        ts = sb.soft_uncertainty(h / np.log(10), k_soft, t)
        assert s_avuc(z, y, k_soft, t).item() == pytest.approx(brute_avuc(c, a, h, None, soft_t=ts), rel=1e-12)
    # T -> 0: S-AvUC is AvUC with the confidence multiplicands deleted (inventory P8), not AvUC
    ones = dict(AC=0.0, AU=0.0, IC=0.0, IU=0.0)
    for hi, ai in zip(h, a):
        th = math.tanh(hi)
        cert = hi < kappa
        ones[("A" if ai else "I") + ("C" if cert else "U")] += (1 - th) if cert else th
    unweighted = math.log(1 + (ones["AU"] + ones["IC"]) / (ones["AC"] + ones["IU"]))
    assert s_avuc(z, y, kappa / np.log(10), 1e-5).item() == pytest.approx(unweighted, rel=1e-9)
    assert abs(unweighted - avuc(z, y, kappa).item()) > 0.01


def test_avuc_gs_stops_the_confidence_gradient():
    z, y = batch(n=50, k=10, scale=2)
    kappa = 1.0
    zg = z.clone().requires_grad_(True)
    (g_gs,) = torch.autograd.grad(avuc_gs(zg, y, kappa), zg)
    (g_full,) = torch.autograd.grad(avuc(zg, y, kappa), zg)
    assert not torch.allclose(g_gs, g_full)
    # manual: the same counts with c replaced by a constant copy
    log_p = F.log_softmax(zg, 1)
    h = -(log_p.exp() * log_p).sum(1)
    c = log_p.max(1).values.exp().detach()
    acc = (zg.argmax(1) == y)
    cert = h < kappa
    th = torch.tanh(h)
    n_ac = (c * (1 - th))[acc & cert].sum()
    n_au = (c * th)[acc & ~cert].sum()
    n_ic = ((1 - c) * (1 - th))[~acc & cert].sum()
    n_iu = ((1 - c) * th)[~acc & ~cert].sum()
    (g_ref,) = torch.autograd.grad(torch.log1p((n_au + n_ic) / (n_ac + n_iu)), zg)
    torch.testing.assert_close(g_gs, g_ref, rtol=1e-12, atol=1e-14)


def test_s_avuc_finite_at_saturation_and_uniform():
    z = torch.zeros(6, 4, dtype=torch.float32)
    z[:3, 0] = 200.0                            # one-hot softmax in float32: entropy exactly 0
    y = torch.tensor([0, 1, 0, 1, 2, 3])
    z.requires_grad_(True)                      # rows 3..5 are uniform: h* = 1
    value = s_avuc(z, y, 0.5, 0.1)
    (grad,) = torch.autograd.grad(value, z)
    assert torch.isfinite(value) and torch.isfinite(grad).all()


def test_mmce_against_loops():
    z, y = batch(n=40, k=5, scale=2)
    _, c, a = top_label(z, y)
    assert mmce(z, y).item() == pytest.approx(brute_mmce(c, a), rel=1e-12)
    assert mmce(z, y, weighted=True).item() == pytest.approx(brute_mmce(c, a, weighted=True), rel=1e-12)
    assert mmce(z, y, bandwidth=0.2).item() == pytest.approx(brute_mmce(c, a, width=0.2), rel=1e-12)
    y_all = z.argmax(1)                            # every prediction correct: the weighted form is 0
    assert mmce(z, y_all, weighted=True).item() == 0.0


def test_confidence_incentive_of_avuc():
    """Karandikar et al., Sec. 4.2 / App. F: AvUC pushes inaccurate-certain samples towards more confidence;
    AvUC-GS and S-AvUC push them the other way (the inventory's toy, C8)."""
    gen = torch.Generator().manual_seed(0)
    z = torch.randn(64, 10, generator=gen, dtype=torch.float64) * 3
    y = torch.randint(0, 10, (64,), generator=gen)
    y[:32] = z[:32].argmax(1)
    p, c, a = top_label(z, y)
    h = entropy(p)
    kappa = float(np.median(h))
    ic = (a == 0) & (h < kappa)
    au = (a == 1) & (h >= kappa)
    up = confidence_incentive(lambda zz, yy: avuc(zz, yy, kappa), z, y).numpy()
    up_gs = confidence_incentive(lambda zz, yy: avuc_gs(zz, yy, kappa), z, y).numpy()
    up_s = confidence_incentive(lambda zz, yy: s_avuc(zz, yy, 0.5, 1.0), z, y).numpy()
    assert np.mean(up[ic] > 0) > 0.8 and np.mean(up[au] < 0) > 0.8
    assert np.all(up_gs[ic] < 0) and np.all(up_gs[au] > 0)
    assert np.all(up_s[a == 0] < 0) and np.all(up_s[a == 1] > 0)
    ce_up = confidence_incentive(cross_entropy, z, y).numpy()
    assert np.all(ce_up[a == 1] > 0)


# ---------------------------------------------------------------------------------------------- registry

def test_registry_and_combination():
    z, y = batch(n=64)
    assert set(SECONDARY_LOSSES) >= {"sb-ece", "s-avuc", "avuc", "avuc-gs", "mmce"}
    for name in SECONDARY_LOSSES:
        value = get_secondary_loss(name)(z, y)
        assert value.ndim == 0 and torch.isfinite(value)
    combo = get_loss("ce", secondary="sb-ece", secondary_weight=0.5)
    expected = F.cross_entropy(z, y) + 0.5 * soft_binned_ece(z, y, temperature=0.01, norm="l2", estimator="label")
    assert combo(z, y).item() == pytest.approx(expected.item(), rel=1e-14)
    assert combo.weight == 0.5
    assert combo.parts(z, y)[1].item() == pytest.approx(2 * (expected - F.cross_entropy(z, y)).item())
    same = combined_loss("ce", "sb-ece", 0.5)
    assert same(z, y).item() == combo(z, y).item()
    mm = get_loss("mmce-2")
    assert mm(z, y).item() == pytest.approx((F.cross_entropy(z, y) + 2 * mmce(z, y, weighted=True)).item(), rel=1e-14)
    assert get_secondary_loss("sb-ece", temperature=1e-3)(z, y).item() == pytest.approx(
        soft_binned_ece(z, y, temperature=1e-3, norm="l2", estimator="label").item())
    assert get_secondary_loss("avuc")(z, y).item() == pytest.approx(avuc(z, y, 0.5 * math.log(10)).item())
    with pytest.raises(ValueError, match="unknown secondary loss"):
        get_secondary_loss("sbece")
    with pytest.raises(ValueError, match="secondary loss 'sb-ece'"):
        get_secondary_loss("sb-ece", kappa=1)
    with pytest.raises(ValueError, match="secondary_weight"):
        get_loss("ce", secondary="mmce", secondary_weight=-1)
    with pytest.raises(ValueError, match="mmce-<lambda>"):
        get_loss("mmce")


def test_loss_argument_checks():
    z, y = batch(n=8)
    with pytest.raises(ValueError, match="temperature must be"):
        soft_binned_ece(z, y, temperature=0)
    with pytest.raises(ValueError, match="norm="):
        soft_binned_ece(z, y, norm="max")
    with pytest.raises(ValueError, match="kappa must be in"):
        s_avuc(z, y, kappa=1.0)
    with pytest.raises(ValueError, match="targets"):
        mmce(z, y.float())


# -------------------------------------------------------------------------------------------- TS-SB-ECE

def test_ts_sb_ece_is_a_stationary_point_and_deterministic():
    rng = np.random.default_rng(5)
    z = rng.normal(size=(3000, 10)) * 3
    p = 0.92 * softmax(z, axis=1) + 0.008
    y = (p.cumsum(1) > rng.random((3000, 1))).argmax(1)
    ts = TemperatureScaling("sb-ece").fit(z, y)
    again = TemperatureScaling("sb-ece").fit(z, y)
    assert ts.temperature == again.temperature
    t = ts.temperature

    def f(temp):
        return soft_binned_ece(torch.tensor(z / temp), torch.tensor(y), temperature=0.01, norm="l2").item()

    assert ts.optimizer_result.fun == pytest.approx(f(t), rel=1e-12)
    h = 1e-5
    assert abs((f(t * (1 + h)) - f(t * (1 - h))) / (2 * h)) < 1e-6           # d/d log T = 0
    grid = np.exp(np.linspace(np.log(0.5), np.log(3), 200))
    assert f(t) <= min(f(g) for g in grid) + 1e-9                              # the global minimum here
    nll_t = TemperatureScaling("nll").fit(z, y).temperature
    assert t < nll_t                                                           # label noise: NLL over-softens
    np.testing.assert_allclose(ts.predict_proba(z), softmax(z / t, axis=1))


def test_ts_sb_ece_options_and_errors():
    rng = np.random.default_rng(6)
    z = rng.normal(size=(500, 5)) * 2
    y = (softmax(z, axis=1).cumsum(1) > rng.random((500, 1))).argmax(1)
    t_lb, res = fit_temperature_sb_ece(z * 2, y, sb_temperature=0.02, estimator="label", norm="l1", start=1.0)
    assert res.success and 1.0 < t_lb < 4.0
    with pytest.raises(ValueError, match="objective="):
        TemperatureScaling("sbece")
    with pytest.raises(ValueError, match="sb_temperature"):
        TemperatureScaling("sb-ece", sb_temperature=-1)


# -------------------------------------------------------------------------------------------- symbolic

def test_symbolic_derivations():
    import sympy

    from calib import symbolic

    d = symbolic.soft_binning()
    for key in ("log_odds_residual", "du_residual", "dsbece_residual", "hard_limit"):
        assert d[key] == 0, key
    t = symbolic.soft_uncertainty()
    assert t["identity_residual"] == 0 and t["dt_residual"] == 0 and t["at_kappa"] == sympy.Rational(1, 2)
    assert (t["limit_0"], t["limit_1"], t["step_above"], t["step_below"]) == (0, 1, 1, 0)
    assert symbolic.avuc_identity()["residual"] == 0
