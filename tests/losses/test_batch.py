"""calib.losses.batch: the batch objectives against loops and the numpy references.

The selective AURC loss and its weights (Zhou et al. 2025, Eqs. 12-17), SB-ECE, AvUC, AvUC-GS and S-AvUC
(Karandikar et al. 2021), MMCE (Kumar et al. 2018), and the confidence incentive.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from references import batch, brute_sbece, calibration_batch, entropy, probs_of
from scipy.special import log_expit, logsumexp, softmax

from calib import metrics, selective
from calib import soft_binning as sb
from calib.losses import (CSFS, au_weights, avuc, avuc_gs, confidence_incentive, confidence_scores, cross_entropy, mmce,
                          s_avuc, selective_au_loss, soft_binned_ece_loss)


def top_label(logits, targets):
    p = softmax(logits.double().numpy(), axis=1)
    return p, p.max(1), (p.argmax(1) == targets.numpy()).astype(float)


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


@pytest.mark.parametrize("norm", ["l1", "l2"])
@pytest.mark.parametrize("estimator", ["bin", "label"])
def test_torch_sbece_against_numpy_and_loops(norm, estimator):
    z, y = calibration_batch(n=80)
    _, c, a = top_label(z, y)
    p = 1 if norm == "l1" else 2
    for t in (0.05, 0.01, 1e-3):
        value = soft_binned_ece_loss(z, y, temperature=t, norm=norm, estimator=estimator).item()
        assert value == pytest.approx(sb.soft_binned_ece(c, a, 15, t, norm, estimator), rel=1e-12)
        assert value == pytest.approx(brute_sbece(list(c), list(a), 15, t, p, estimator), rel=1e-11)


@pytest.mark.parametrize("seed", range(10))
def test_sbece_tends_to_hard_ece(seed):
    """T = 1e-6: SB-ECE equals calib.metrics.ece (equal-width, 15 bins) within 1e-4 (both estimators, p = 1, 2)."""
    z, y = calibration_batch(n=2000, seed=seed)
    p, _, _ = top_label(z, y)
    for norm in ("l1", "l2"):
        for est in ("bin", "label"):
            soft = soft_binned_ece_loss(z, y, temperature=1e-6, norm=norm, estimator=est).item()
            assert abs(soft - metrics.ece(p, y.numpy(), n_bins=15, norm=norm, estimator=est)) < 1e-4


def test_float32_small_temperature_has_no_nan():
    z, y = calibration_batch(n=512, k=100, scale=5, dtype=torch.float32)
    # rows whose confidence lies exactly on bin edges 9/15 and 1/2 (binary-like logits in the first 2 columns)
    z[:2] = -1e4
    z[0, :2] = torch.tensor([math.log(0.6), math.log(0.4)])
    z[1, :2] = 0.0
    z.requires_grad_(True)
    for t in (1e-6, 1e-5):
        for est in ("bin", "label"):
            for norm in ("l1", "l2"):
                value = soft_binned_ece_loss(z, y, temperature=t, norm=norm, estimator=est)
                (grad,) = torch.autograd.grad(value, z)
                assert torch.isfinite(value) and torch.isfinite(grad).all()
    # the naive exp-then-normalise of the released code is 0/0 in float32 for a confidence on an edge
    c = torch.tensor([0.6], dtype=torch.float32)
    centres = (torch.arange(15, dtype=torch.float32) + 0.5) / 15
    naive = torch.exp(-(c[:, None] - centres) ** 2 / 1e-5)
    assert torch.isnan(naive / naive.sum(1, keepdim=True)).all()


def test_sbece_gradient_finite_and_nonzero_at_t001():
    z, y = calibration_batch(n=512, k=100, scale=5, dtype=torch.float32)
    z.requires_grad_(True)
    for est in ("bin", "label"):
        (grad,) = torch.autograd.grad(soft_binned_ece_loss(z, y, temperature=0.01, norm="l2", estimator=est), z)
        assert torch.isfinite(grad).all() and grad.abs().max() > 0


def test_autograd_matches_closed_form_gradient():
    """d SB-ECE_bin,2^2 / d c_i from autograd (through logits) equals the closed form times dc/dz."""
    z, y = calibration_batch(n=60)
    z.requires_grad_(True)
    value = soft_binned_ece_loss(z, y, temperature=0.02, norm="l2") ** 2
    (grad,) = torch.autograd.grad(value, z)
    p, c, a = top_label(z.detach(), y)
    g = sb.soft_binned_ece_gradient(c, a, 15, 0.02)
    top = p.argmax(1)
    dc_dz = -p * c[:, None]
    dc_dz[np.arange(60), top] += c
    np.testing.assert_allclose(grad.numpy(), g[:, None] * dc_dz, rtol=1e-8, atol=1e-14)


def test_gradcheck_secondary_losses():
    z, y = calibration_batch(n=24, k=5, scale=1.5)
    z.requires_grad_(True)
    fns = [lambda x: soft_binned_ece_loss(x, y, temperature=0.05, norm="l2", estimator="bin"),
           lambda x: soft_binned_ece_loss(x, y, temperature=0.05, norm="l2", estimator="label"),
           lambda x: s_avuc(x, y, kappa=0.4, temperature=0.5),
           lambda x: avuc(x, y, kappa=0.8),
           lambda x: mmce(x, y), lambda x: mmce(x, y, weighted=True)]
    for f in fns:
        assert torch.autograd.gradcheck(f, (z,), eps=1e-6, atol=1e-6)


def test_avuc_and_s_avuc_against_loops():
    for k in (2, 10):                        # two classes are enough for AvUC (the entropy of a binary prediction > 0)
        z, y = calibration_batch(n=100, k=k, scale=2)
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
    z, y = calibration_batch(n=50, k=10, scale=2)
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
    z, y = calibration_batch(n=40, k=5, scale=2)
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


def test_loss_argument_checks():
    z, y = calibration_batch(n=8)
    with pytest.raises(ValueError, match="temperature must be"):
        soft_binned_ece_loss(z, y, temperature=0)
    with pytest.raises(ValueError, match="norm="):
        soft_binned_ece_loss(z, y, norm="max")
    with pytest.raises(ValueError, match="kappa must be in"):
        s_avuc(z, y, kappa=1.0)
    with pytest.raises(ValueError, match="targets"):
        mmce(z, y.float())


def test_exact_weights_match_the_aurc_identity_with_ties():
    gen = torch.Generator().manual_seed(0)
    s = torch.randint(0, 20, (300,), generator=gen).double() / 20  # many ties
    w = au_weights(s, kappa=1.0, cdf="exact")
    p = np.full((300, 2), 0.5)
    rc = metrics.risk_coverage_curve(p, np.zeros(300, dtype=int), confidence=s.numpy())
    np.testing.assert_allclose(w.numpy(), rc.weights, rtol=1e-12)


@pytest.mark.parametrize("kappa", [0.05, 0.3, 0.9, 1.0])
def test_exact_weights_clipped_match_loop_and_average_m_over_n(kappa):
    n = 257
    s = torch.rand(n, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    w = au_weights(s, kappa=kappa, cdf="exact").numpy()
    m = int(math.floor(kappa * n + 1e-9))
    desc = np.empty(n, dtype=int)
    desc[np.argsort(-s.numpy())] = np.arange(1, n + 1)
    want = np.array([sum(1.0 / i for i in range(max(r, n - m + 1), n + 1)) for r in desc])
    np.testing.assert_allclose(w, want, rtol=1e-12, atol=1e-15)
    assert w.mean() == pytest.approx(m / n, rel=1e-12)
    assert au_weights(s, kappa=kappa, cdf="exact", normalize=True).mean().item() == pytest.approx(m / n / kappa,
                                                                                                   rel=1e-12)


@pytest.mark.parametrize("k,nu", [(15, 0.1), (15, 0.01), (64, 0.05), (5, 1.0)])
def test_bin_weights_match_numpy_smoothed_cdf(k, nu):
    s = np.random.default_rng(2).beta(6, 1, 200)
    w = au_weights(torch.tensor(s), kappa=1.0, nu=nu, n_bins=k, edges=(0.0, 1.0)).numpy()
    _, upper = selective.smoothed_cdf(s, n_bins=k, nu=nu)
    np.testing.assert_allclose(w, -np.log(upper), rtol=1e-12)
    w9 = au_weights(torch.tensor(s), kappa=0.9, nu=nu, n_bins=k, edges=(0.0, 1.0)).numpy()
    tau = np.sort(s)[180]
    _, upper_tau = selective.smoothed_cdf(s, [tau], n_bins=k, nu=nu)
    low = s < tau
    assert low.sum() == 180
    np.testing.assert_allclose(w9[low], w[low], rtol=1e-12)
    np.testing.assert_allclose(w9[~low], -np.log(upper_tau[0]), rtol=1e-12)


def test_bin_weights_gradient_below_tau_only_and_matches_finite_differences():
    s0 = torch.tensor(np.random.default_rng(3).beta(6, 1, 100))
    s = s0.clone().requires_grad_(True)
    au_weights(s, kappa=0.7, nu=0.1, n_bins=15, edges=(0.0, 1.0)).sum().backward()
    tau = torch.sort(s0).values[70]
    low = s0 < tau
    assert torch.all(s.grad[~low] == 0) and torch.all(s.grad[low] > 0)
    eps = 1e-6
    for i in torch.nonzero(low).flatten()[:10].tolist():
        e = torch.zeros(100, dtype=torch.float64)
        e[i] = eps
        fd = (au_weights(s0 + e, 0.7, 0.1, 15, (0.0, 1.0))[i]
              - au_weights(s0 - e, 0.7, 0.1, 15, (0.0, 1.0))[i]) / (2 * eps)
        assert s.grad[i].item() == pytest.approx(fd.item(), rel=1e-6)


def test_bin_weights_finite_for_tiny_nu_and_scores_outside_the_edges():
    s = torch.tensor([-0.5, 0.05, 0.06, 0.99, 1.0, 1.7], dtype=torch.float32, requires_grad=True)
    w = au_weights(s, kappa=1.0, nu=1e-5, n_bins=15, edges=(0.0, 1.0))
    w.sum().backward()
    assert torch.isfinite(w).all() and torch.isfinite(s.grad).all()
    s64 = s.detach().double().numpy()
    edges = np.linspace(0, 1, 16)
    idx = np.clip(np.searchsorted(edges, s64, side="right") - 1, 0, 14)
    h = np.bincount(idx, minlength=15) / 6
    c = (edges[:-1] + edges[1:]) / 2
    full = h > 0
    want = -logsumexp(np.log(h[full]) + log_expit((c[full] - s64[:, None]) / 1e-5), axis=1)  # no underflow
    np.testing.assert_allclose(w.detach().numpy(), want, rtol=1e-5)
    assert want[3] > 1000  # 0.99 lies 0.023 above the centre of its bin: sigma(-2300) underflows without logs


def test_au_weights_rejects_bad_arguments():
    s = torch.rand(10)
    for kw, match in [({"kappa": 0.0}, "kappa"), ({"kappa": 1.5}, "kappa"), ({"nu": 0.0}, "nu"),
                      ({"n_bins": 0}, "n_bins"), ({"cdf": "sort"}, "cdf"), ({"edges": (1.0, 0.0)}, "edges")]:
        with pytest.raises(ValueError, match=match):
            au_weights(s, **kw)
    with pytest.raises(ValueError, match="1-D"):
        au_weights(torch.rand(3, 2))


@pytest.mark.parametrize("csf", CSFS)
def test_exact_loss_at_kappa_one_is_the_batch_aurc_of_cross_entropy(csf):
    logits, targets = batch(n=128, k=6, seed=7)
    p = probs_of(logits)
    ce = -np.log(p[np.arange(128), targets.numpy()])
    want = metrics.aurc(p, targets.numpy(), confidence=csf, loss=ce)
    got = selective_au_loss(logits, targets, kappa=1.0, csf=csf, cdf="exact").item()
    assert got == pytest.approx(want, rel=1e-12)
    np.testing.assert_allclose(confidence_scores(logits, csf).numpy(), metrics.confidence_score(p, csf), rtol=1e-12,
                               atol=1e-14)


def test_detach_changes_the_gradient_not_the_value():
    logits, targets = batch(n=64, k=5, seed=8)
    z1, z2 = logits.clone().requires_grad_(True), logits.clone().requires_grad_(True)
    v1 = selective_au_loss(z1, targets)
    v2 = selective_au_loss(z2, targets, detach=True)
    assert v1.item() == pytest.approx(v2.item(), rel=1e-14)
    v1.backward()
    v2.backward()
    assert not torch.allclose(z1.grad, z2.grad)
    beta = au_weights(confidence_scores(logits, "msp"), 0.9, 0.1, 15, (0.2, 1.0)).detach()
    z3 = logits.clone().requires_grad_(True)
    (cross_entropy(z3, targets, reduction="none") * beta).mean().backward()
    torch.testing.assert_close(z2.grad, z3.grad, rtol=1e-12, atol=1e-15)


def test_normalize_divides_by_kappa_and_float32_saturation_is_finite():
    logits, targets = batch(n=64, k=5, seed=9)
    a = selective_au_loss(logits, targets, kappa=0.8)
    b = selective_au_loss(logits, targets, kappa=0.8, normalize=True)
    assert b.item() == pytest.approx(a.item() / 0.8, rel=1e-12)
    z = (logits.float() * 100).requires_grad_(True)
    for csf in CSFS:
        loss = selective_au_loss(z, targets, csf=csf)
        (grad,) = torch.autograd.grad(loss, z)
        assert torch.isfinite(loss) and torch.isfinite(grad).all()


def test_bin_edges_must_increase_strictly():
    """K + 1 edges with a repeated one leave an empty bin of no width: refused, as decreasing edges are."""
    from calib.losses import au_weights

    scores = torch.linspace(0.05, 0.95, 8)
    au_weights(scores, n_bins=3, edges=(0.0, 0.3, 0.6, 1.0))
    for edges in ((0.0, 0.5, 0.5, 1.0), (0.0, 0.6, 0.3, 1.0)):
        with pytest.raises(ValueError, match="increasing"):
            au_weights(scores, n_bins=3, edges=edges)


def test_weighted_mmce_with_one_correct_sample_is_the_distance_of_the_two_groups():
    """MMCE_w is 0 only when a group is empty: one correct sample among four is a group of one, and the value is the
    RKHS distance computed by hand (m = 1, n = 3)."""
    from calib.losses import mmce

    logits = torch.tensor([[2.0, 0.0], [1.5, 0.0], [0.5, 0.0], [3.0, 0.0]], dtype=torch.float64)
    targets = torch.tensor([0, 1, 1, 1])                     # only the first is right
    r = torch.softmax(logits, 1).max(1).values
    a = torch.tensor([1.0, 0.0, 0.0, 0.0], dtype=torch.float64)
    k = torch.exp(-(r[:, None] - r[None, :]).abs() / 0.4)
    x = a * (1 - r) / 1 - (1 - a) * r / 3
    expected = torch.sqrt((x[:, None] * x[None, :] * k).sum())
    value = mmce(logits, targets, weighted=True)
    assert float(value) > 0.1 and float(value) == pytest.approx(float(expected), rel=1e-12)
    assert float(mmce(logits, torch.ones(4, dtype=torch.long), weighted=True)) == 0.0     # no correct sample


# --------------------------------------------------------------- mutation sample B: behaviour the sample found untested

def test_s_avuc_names_a_bad_temperature_or_kappa():
    z, y = calibration_batch()
    for temperature, found in ((0.0, "must be > 0; got 0.0"), (-1.0, "must be > 0; got -1.0"),
                               (float("nan"), "must be a finite number; got nan")):
        with pytest.raises(ValueError, match=rf"^temperature {found}"):
            s_avuc(z, y, 0.5, temperature)
    with pytest.raises(ValueError, match=r"^kappa must be > 0"):
        s_avuc(z, y, 0.0, 0.1)


# --------------------------------------------------------------- mutation sample C: behaviour the sample found untested

def test_au_weights_of_a_single_score_and_refusal_of_an_empty_batch():
    """One score is a batch: at kappa = 1 its exact weight is H_1 - H_0 = 1, and its smoothed-bin weight is
    -log sigma((c - s) / nu) for the centre c = 0.75 of its bin [0.7, 0.8). An empty batch is refused."""
    s = torch.tensor([0.7], dtype=torch.float64)
    assert au_weights(s, kappa=1.0, cdf="exact").tolist() == [1.0]
    expected = -math.log(1 / (1 + math.exp(-(0.75 - 0.7) / 0.1)))
    assert au_weights(s, kappa=1.0, nu=0.1, n_bins=10).item() == pytest.approx(expected, rel=1e-12)
    with pytest.raises(ValueError, match=r"^scores must be a non-empty 1-D torch tensor"):
        au_weights(torch.zeros(0))
