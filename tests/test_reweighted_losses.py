"""Tests of the reweighted losses of calib.losses (Zhou et al. 2025): inverse focal, dual focal (against a
per-sample transcription of Tao et al.'s official code), the AU weights (against the exact harmonic weights, the
numpy smoothed CDF and finite differences) and the selective AURC loss (against calib.metrics.aurc)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy.special import log_expit, logsumexp

from calib import metrics, selective
from calib.focal import gradient_factor
from calib.losses import (AURC_DEFAULTS, CSFS, au_weights, confidence_scores, cross_entropy, dual_focal_loss,
                          focal_loss, get_loss, inverse_focal_loss, selective_au_loss)
from calib.models import mlp
from calib.train import train_classifier

torch.set_num_threads(1)


def batch(n=64, k=5, scale=3.0, seed=0, dtype=torch.float64):
    gen = torch.Generator().manual_seed(seed)
    logits = torch.randn(n, k, generator=gen, dtype=dtype) * scale
    targets = torch.randint(0, k, (n,), generator=gen)
    return logits, targets


def probs_of(logits):
    z = logits.double().numpy()
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


# ------------------------------------------------------------------------------------------------------
# inverse focal loss
# ------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("gamma", [0.0, 0.5, 1.0, 2.0, 5.0])
def test_inverse_focal_matches_per_sample_loop(gamma):
    logits, targets = batch()
    p = probs_of(logits)
    ref = np.array([-(1 + p[i, t]) ** gamma * math.log(p[i, t]) for i, t in enumerate(targets.tolist())])
    np.testing.assert_allclose(inverse_focal_loss(logits, targets, gamma, reduction="none").numpy(), ref, rtol=1e-12)
    assert inverse_focal_loss(logits, targets, gamma).item() == pytest.approx(ref.mean(), rel=1e-12)
    assert get_loss(f"inverse-fl-{gamma:g}")(logits, targets).item() == pytest.approx(ref.mean(), rel=1e-12)


def test_inverse_focal_gamma_zero_is_cross_entropy_and_gradient_matches_closed_form():
    logits, targets = batch(n=32, k=4)
    assert inverse_focal_loss(logits, targets, 0.0).item() == pytest.approx(cross_entropy(logits, targets).item(),
                                                                            rel=1e-13)
    for gamma in (1.0, 3.0, 5.0):
        z = logits.clone().requires_grad_(True)
        inverse_focal_loss(z, targets, gamma, reduction="sum").backward()
        p = probs_of(logits)
        py = p[np.arange(32), targets.numpy()]
        dldp = selective.inverse_focal_dp(py, gamma)  # chain rule: dl/dz_c = dl/dp_y * p_y (1[c = y] - p_c)
        want = dldp[:, None] * py[:, None] * (np.eye(4)[targets.numpy()] - p)
        np.testing.assert_allclose(z.grad.numpy(), want, rtol=1e-10, atol=1e-14)


def test_inverse_focal_finite_at_saturation():
    logits = torch.tensor([[200.0, 0.0, -200.0], [0.0, 200.0, -200.0]], dtype=torch.float32, requires_grad=True)
    targets = torch.tensor([0, 0])
    loss = inverse_focal_loss(logits, targets, 3.0)
    loss.backward()
    assert torch.isfinite(loss) and torch.isfinite(logits.grad).all()


# ------------------------------------------------------------------------------------------------------
# dual focal loss
# ------------------------------------------------------------------------------------------------------

def official_dual_focal(logits, targets, gamma):
    """Linwei94/ICML2023-DualFocalLoss, dual_focal_loss.py, one sample at a time (per-sample values)."""
    out = []
    for z, t in zip(logits.double().numpy(), targets.tolist()):
        logp = z - z.max() - math.log(np.exp(z - z.max()).sum())
        p = np.exp(logp)
        p_k = p[t]  # the code exponentiates the same log-probabilities for both
        below = [v for v in p if v < p_k]  # torch.lt(softmax, p_k) * softmax, then topk
        p_j = max(below) if below else 0.0
        out.append(-((1 - p_k + p_j) ** gamma) * logp[t])
    return np.array(out)


@pytest.mark.parametrize("gamma", [0.0, 1.0, 2.6, 5.0])
@pytest.mark.parametrize("k", [2, 3, 10])
def test_dual_focal_matches_per_sample_loop(gamma, k):
    logits, targets = batch(n=80, k=k, seed=k)
    ref = official_dual_focal(logits, targets, gamma)
    # rtol 1e-10: the loss takes 1 - p_y as -expm1(log p_y), the loop as 1 - p_y (cancellation near p_y = 1)
    np.testing.assert_allclose(dual_focal_loss(logits, targets, gamma, reduction="none").numpy(), ref, rtol=1e-10)
    assert dual_focal_loss(logits, targets, gamma, reduction="sum").item() == pytest.approx(ref.sum(), rel=1e-12)
    assert get_loss(f"dual-fl-{gamma:g}")(logits, targets).item() == pytest.approx(ref.mean(), rel=1e-12)
    weights = selective.dual_focal_weight(probs_of(logits), targets.numpy(), gamma, "official")
    np.testing.assert_allclose(weights * -np.log(probs_of(logits)[np.arange(80), targets.numpy()]), ref, rtol=1e-10)


def test_dual_focal_paper_example_and_when_it_is_focal():
    p = torch.tensor([[0.5, 0.3, 0.2]], dtype=torch.float64)
    assert dual_focal_loss(p.log(), torch.tensor([1]), 3.0).item() == pytest.approx(0.8777, abs=1e-4)
    logits, targets = batch(n=200, k=4, seed=3)
    p = probs_of(logits)
    smallest = torch.as_tensor(p[np.arange(200), targets.numpy()] == p.min(axis=1))
    dual = dual_focal_loss(logits, targets, 2.0, reduction="none")
    focal = focal_loss(logits, targets, 2.0, reduction="none")
    torch.testing.assert_close(dual[smallest], focal[smallest], rtol=1e-12, atol=0)
    assert not torch.allclose(dual[~smallest], focal[~smallest])


def test_dual_focal_gradient_and_saturation():
    logits, targets = batch(n=16, k=4, seed=5)
    z = logits.clone().requires_grad_(True)
    dual_focal_loss(z, targets, 2.0, reduction="sum").backward()
    eps = 1e-6
    for i, c in [(0, 0), (3, 2), (7, 1), (11, 3)]:
        zp, zm = logits.clone(), logits.clone()
        zp[i, c] += eps
        zm[i, c] -= eps
        fd = (dual_focal_loss(zp, targets, 2.0, reduction="sum") - dual_focal_loss(zm, targets, 2.0, reduction="sum")) / (2 * eps)
        assert z.grad[i, c].item() == pytest.approx(fd.item(), rel=1e-5, abs=1e-8)
    sat = torch.tensor([[300.0, 0.0, -5.0]], dtype=torch.float32, requires_grad=True)
    for gamma in (0.5, 3.0):
        loss = dual_focal_loss(sat, torch.tensor([0]), gamma)
        loss.backward()
        assert torch.isfinite(loss) and torch.isfinite(sat.grad).all()


# ------------------------------------------------------------------------------------------------------
# AU weights
# ------------------------------------------------------------------------------------------------------

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
    assert au_weights(s, kappa=kappa, cdf="exact", normalize=True).mean().item() == pytest.approx(m / n / kappa, rel=1e-12)


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
        fd = (au_weights(s0 + e, 0.7, 0.1, 15, (0.0, 1.0))[i] - au_weights(s0 - e, 0.7, 0.1, 15, (0.0, 1.0))[i]) / (2 * eps)
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


# ------------------------------------------------------------------------------------------------------
# the selective AURC loss and the registry
# ------------------------------------------------------------------------------------------------------

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


def test_registry_names_and_options():
    logits, targets = batch(n=64, k=5, seed=10)
    assert get_loss("aurc").options == {"kappa": AURC_DEFAULTS["kappa"], "nu": AURC_DEFAULTS["nu"],
                                        "n_bins": AURC_DEFAULTS["bins"], "csf": "msp", "cdf": "bins",
                                        "detach": False, "normalize": False}
    loss = get_loss("aurc-kappa=0.8,nu=0.01,bins=20,csf=margin,detach,normalize=1")
    assert loss.options == {"kappa": 0.8, "nu": 0.01, "n_bins": 20, "csf": "margin", "cdf": "bins", "detach": True,
                            "normalize": True}
    want = selective_au_loss(logits, targets, kappa=0.8, nu=0.01, n_bins=20, csf="margin", detach=True, normalize=True)
    assert loss(logits, targets).item() == pytest.approx(want.item(), rel=1e-14)
    assert get_loss("AURC-kappa=1,cdf=exact")(logits, targets).item() == pytest.approx(
        selective_au_loss(logits, targets, kappa=1.0, cdf="exact").item(), rel=1e-14)
    for bad, match in [("inverse-2", "inverse-fl"), ("dual", "dual-fl"), ("dual-fl-x", "not a number"),
                       ("inverse-fl--1", "gamma"), ("aurc-foo=1", "unknown option"), ("aurc-kappa=2", "kappa"),
                       ("aurc-csf=energy", "csf"), ("aurc-bins=x", "bad value"), ("aurc-detach=maybe", "bad value")]:
        with pytest.raises(ValueError, match=match):
            get_loss(bad)


@pytest.mark.parametrize("name", ["inverse-fl-2", "dual-fl-3", "aurc", "aurc-detach", "aurc-kappa=1,cdf=exact"])
def test_losses_train_a_small_model(name):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(300, 4)).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.int64) + (x[:, 1] > 0)
    model, history = train_classifier(mlp(4, 3, hidden=(16,), seed=0), x, y, name, epochs=3, lr=1e-2, batch_size=64,
                                      progress=False)
    assert len(history) == 3 and np.all(np.isfinite(history))


def test_focal_gradient_factor_link():
    """-p dFL/dp = g(p, gamma) (Zhou et al. 2025, App. C.1 / Mukhoti et al. 2020, Prop. 1), through autograd."""
    p = torch.linspace(0.01, 0.99, 50, dtype=torch.float64, requires_grad=True)
    (-(1 - p) ** 3 * torch.log(p)).sum().backward()
    np.testing.assert_allclose((-p * p.grad).detach().numpy(), gradient_factor(p.detach().numpy(), 3.0), rtol=1e-12)
