"""calib.losses.functional: the per-sample losses against per-sample loops and closed forms.

Cross-entropy, focal loss (Lin et al. 2017), FLSD, inverse focal loss (Wang et al. 2021) and dual focal loss
(Tao et al. 2023's code); gradients, saturation and input checks.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from references import batch, probs_of

from calib import selective
from calib.focal import FLSD_53, FLSD_532, gradient_factor, schedule_gamma
from calib.losses import (EpochScheduledFocalLoss, cross_entropy, dual_focal_loss, focal_loss, get_loss,
                          inverse_focal_loss, label_smoothing_loss, sample_dependent_focal_loss)


def reference_focal(logits, targets, gamma):
    """-(1 - p_y)^gamma log p_y sample by sample, in float64 from a plain softmax."""
    out = []
    for i in range(len(targets)):
        z = logits[i].double().numpy()
        p = np.exp(z - z.max())
        p /= p.sum()
        g = gamma[i] if np.ndim(gamma) else gamma
        py = p[int(targets[i])]
        out.append(-(1 - py) ** g * np.log(py))
    return np.array(out)


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


@pytest.mark.parametrize("gamma", [0.0, 0.5, 1.0, 2.0, 5.0])
def test_focal_matches_per_sample_loop(gamma):
    logits, targets = batch()
    ref = reference_focal(logits, targets, gamma)
    assert focal_loss(logits, targets, gamma).item() == pytest.approx(ref.mean(), rel=1e-12)
    np.testing.assert_allclose(focal_loss(logits, targets, gamma, reduction="none").numpy(), ref, rtol=1e-12)
    assert focal_loss(logits, targets, gamma, reduction="sum").item() == pytest.approx(ref.sum(), rel=1e-12)


def test_per_sample_gamma():
    logits, targets = batch(n=40)
    gamma = torch.linspace(0, 5, 40, dtype=torch.float64)
    ref = reference_focal(logits, targets, gamma.numpy())
    assert focal_loss(logits, targets, gamma).item() == pytest.approx(ref.mean(), rel=1e-12)


def test_gamma_zero_is_cross_entropy():
    logits, targets = batch(dtype=torch.float32)
    expected = F.cross_entropy(logits, targets)
    assert focal_loss(logits, targets, 0).item() == pytest.approx(expected.item(), rel=1e-6)
    assert cross_entropy(logits, targets).item() == pytest.approx(expected.item(), rel=1e-7)
    assert get_loss("ce")(logits, targets).item() == pytest.approx(expected.item(), rel=1e-7)


def test_gradient_is_g_times_the_cross_entropy_gradient():
    """d loss / d z = -g(p_y, gamma) (e_y - p) (Mukhoti et al. 2020, Prop. 1)."""
    logits, targets = batch(n=16)
    for gamma in [0.5, 1.0, 3.0]:
        z = logits.clone().requires_grad_(True)
        focal_loss(z, targets, gamma, reduction="sum").backward()
        p = torch.softmax(logits, dim=1).numpy()
        py = p[np.arange(16), targets.numpy()]
        onehot = np.eye(5)[targets.numpy()]
        expected = -gradient_factor(py, gamma)[:, None] * (onehot - p)
        np.testing.assert_allclose(z.grad.numpy(), expected, atol=1e-12)


@pytest.mark.parametrize("gamma", [0.0, 0.3, 0.5, 1.0, 2.0])
def test_finite_at_saturation(gamma):
    logits = torch.tensor([[200.0, 0.0, 0.0], [30.0, 0.0, -1.0], [0.0, 90.0, 0.0], [1.0, 2.0, 3.0]],
                          requires_grad=True)
    targets = torch.tensor([0, 0, 0, 2])
    loss = focal_loss(logits, targets, gamma)
    loss.backward()
    assert torch.isfinite(loss) and torch.isfinite(logits.grad).all()
    # the saturated, correct row contributes (almost) nothing; the confidently wrong one a lot
    per = focal_loss(logits.detach(), targets, gamma, reduction="none")
    assert per[0].item() == 0.0 and per[2].item() == pytest.approx(90.0, rel=1e-6)


def test_input_errors():
    logits, targets = batch()
    with pytest.raises(ValueError, match="integer class indices"):
        focal_loss(logits, targets.double(), 2)
    with pytest.raises(ValueError, match="one class index per row"):
        focal_loss(logits, targets[:-1], 2)
    with pytest.raises(ValueError, match=">= 0"):
        focal_loss(logits, targets, -1)
    with pytest.raises(ValueError, match=">= 0"):
        focal_loss(logits, targets, torch.full((64,), -0.5, dtype=torch.float64))
    with pytest.raises(ValueError, match="one value per sample"):
        focal_loss(logits, targets, torch.ones(3))
    with pytest.raises(ValueError, match="reduction"):
        focal_loss(logits, targets, 1, reduction="avg")
    with pytest.raises(ValueError, match="torch tensors"):
        focal_loss(logits.numpy(), targets, 1)


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
        fd = (dual_focal_loss(zp, targets, 2.0, reduction="sum")
              - dual_focal_loss(zm, targets, 2.0, reduction="sum")) / (2 * eps)
        assert z.grad[i, c].item() == pytest.approx(fd.item(), rel=1e-5, abs=1e-8)
    sat = torch.tensor([[300.0, 0.0, -5.0]], dtype=torch.float32, requires_grad=True)
    for gamma in (0.5, 3.0):
        loss = dual_focal_loss(sat, torch.tensor([0]), gamma)
        loss.backward()
        assert torch.isfinite(loss) and torch.isfinite(sat.grad).all()


def official_flsd_loop(logits, targets, gamma_high=3.0):
    """torrvision/focal_calibration Losses/focal_loss_adaptive_gamma.py: a per-sample Python loop, summed."""
    logpt = F.log_softmax(logits, dim=1).gather(1, targets.view(-1, 1)).view(-1)
    pt = logpt.exp()
    gammas = []
    for i in range(len(pt)):
        p = pt[i].item()
        gammas.append(gamma_high if p >= 0.5 else (5.0 if p < 0.2 else 3.0))
    return (-(1 - pt) ** torch.tensor(gammas) * logpt).sum()


@pytest.mark.parametrize("schedule, gamma_high", [(FLSD_53, 3.0), (FLSD_532, 2.0)])
def test_flsd_equals_the_official_per_sample_loop(schedule, gamma_high):
    gen = torch.Generator().manual_seed(0)
    logits = 3 * torch.randn(512, 10, generator=gen, dtype=torch.float64)
    targets = torch.randint(0, 10, (512,), generator=gen)
    name = "flsd-53" if schedule is FLSD_53 else "flsd-532"
    ours = get_loss(name)(logits, targets)
    torch.testing.assert_close(ours * 512, official_flsd_loop(logits, targets, gamma_high), rtol=1e-12, atol=0)
    # the gamma each sample gets is calib.focal.schedule_gamma of its true-class probability
    p = F.softmax(logits, 1).gather(1, targets[:, None]).squeeze(1).numpy()
    per_sample = sample_dependent_focal_loss(logits, targets, schedule, reduction="none")
    expected = focal_loss(logits, targets, torch.as_tensor(schedule_gamma(schedule, p)), reduction="none")
    torch.testing.assert_close(per_sample, expected, rtol=0, atol=0)
    # gamma is a constant of the step: the gradient is that of FL at the chosen gamma
    z = logits.clone().requires_grad_(True)
    sample_dependent_focal_loss(z, targets, schedule).backward()
    z2 = logits.clone().requires_grad_(True)
    focal_loss(z2, targets, torch.as_tensor(schedule_gamma(schedule, p))).backward()
    torch.testing.assert_close(z.grad, z2.grad)


def test_flsd_bin_edges_follow_the_schedule_convention():
    # p exactly at the edge 0.2: [0, 0.2) -> 5, [0.2, 1] -> 3 (Sec. 4); logits log(p) for two classes
    p = torch.tensor([0.2, 0.19999, 0.5, 0.49999], dtype=torch.float64)
    logits = torch.stack([torch.log(p), torch.log1p(-p)], dim=1)
    targets = torch.zeros(4, dtype=torch.long)
    for schedule in (FLSD_53, FLSD_532):
        got = sample_dependent_focal_loss(logits, targets, schedule, reduction="none")
        expected = focal_loss(logits, targets, torch.as_tensor(schedule_gamma(schedule, p.numpy())), reduction="none")
        torch.testing.assert_close(got, expected, rtol=1e-13, atol=0)
    assert list(schedule_gamma(FLSD_532, p.numpy())) == [3.0, 5.0, 2.0, 3.0]


def test_flsc_epoch_schedule():
    loss = get_loss("flsc-531")
    assert isinstance(loss, EpochScheduledFocalLoss) and loss.switch_epochs() == (100, 250)
    gammas = {}
    for epoch in (1, 100, 101, 250, 251, 350):
        loss.set_epoch(epoch, 350)
        gammas[epoch] = loss.gamma
    assert gammas == {1: 5.0, 100: 5.0, 101: 3.0, 250: 3.0, 251: 1.0, 350: 1.0}
    loss532 = get_loss("flsc-532")
    loss532.set_epoch(35, 35)
    assert loss532.switch_epochs() == (10, 25) and loss532.gamma == 2.0
    z, t = torch.randn(6, 4), torch.randint(0, 4, (6,))
    torch.testing.assert_close(loss532(z, t), focal_loss(z, t, 2.0))
    with pytest.raises(ValueError, match="'flsc-531', 'flsc-532'"):
        get_loss("flsc-99")


def test_brier_and_label_smoothing_values():
    gen = torch.Generator().manual_seed(1)
    z = torch.randn(7, 5, generator=gen, dtype=torch.float64)
    t = torch.randint(0, 5, (7,), generator=gen)
    p = F.softmax(z, 1).numpy()
    onehot = np.eye(5)[t.numpy()]
    assert get_loss("brier")(z, t).item() == pytest.approx(((p - onehot) ** 2).sum(1).mean(), rel=1e-13)
    alpha = 0.05
    smooth = (1 - alpha) * onehot + alpha * (1 - onehot) / 4
    assert get_loss("ls-0.05")(z, t).item() == pytest.approx(-(smooth * np.log(p)).sum(1).mean(), rel=1e-13)
    # Mukhoti's alpha/(K-1) is torch's label_smoothing alpha' = alpha K / (K-1) (which spreads alpha'/K)
    torch.testing.assert_close(label_smoothing_loss(z, t, alpha), F.cross_entropy(z, t, label_smoothing=alpha * 5 / 4))
    torch.testing.assert_close(get_loss("ls-0")(z, t), F.cross_entropy(z, t))
    with pytest.raises(ValueError, match="ls-<alpha>"):
        get_loss("ls-1.5")
    with pytest.raises(ValueError, match="takes no parameter"):
        get_loss("brier-2")
    with pytest.raises(ValueError, match="flsd-53', 'flsd-532'"):
        get_loss("flsd-5")


@pytest.mark.parametrize("name", ["fl-0.5", "fl-3", "flsd-53", "flsd-532", "flsc-531", "brier", "ls-0.05", "ce"])
def test_losses_finite_near_p_one_and_in_bf16(name):
    loss = get_loss(name)
    for dtype in (torch.float32, torch.bfloat16):
        for scale in (1.0, 30.0, 300.0):          # up to a saturated softmax (p_y == 1 in float32)
            z = scale * torch.tensor([[1.0, 0.0, -1.0], [0.0, 1.0, 0.5], [0.3, 0.2, 0.1]])
            z = z.to(dtype).requires_grad_(True)
            t = torch.tensor([0, 1, 2])
            value = loss(z, t)
            value.backward()
            assert torch.isfinite(value.float()) and torch.isfinite(z.grad.float()).all(), (name, dtype, scale)


def test_label_smoothing_focal_loss_values():
    # Charoenphakdee et al.'s LS paradigm: -sum_i s_i (1 - p_i)^gamma log p_i on the smoothed target s
    from calib.losses.functional import focal_loss, label_smoothing_focal_loss

    gen = torch.Generator().manual_seed(3)
    z = 3 * torch.randn(9, 6, generator=gen, dtype=torch.float64)
    t = torch.randint(0, 6, (9,), generator=gen)
    p = F.softmax(z, 1).numpy()
    onehot = np.eye(6)[t.numpy()]
    for alpha, gamma in [(0.1, 1.0), (0.1, 2.0), (0.3, 3.0), (0.1, 0.5)]:
        smooth = (1 - alpha) * onehot + alpha * (1 - onehot) / 5
        expected = -(smooth * (1 - p) ** gamma * np.log(p)).sum(1).mean()
        assert label_smoothing_focal_loss(z, t, gamma, alpha).item() == pytest.approx(expected, rel=1e-12)
        assert get_loss(f"ls-{alpha:g}-fl-{gamma:g}")(z, t).item() == pytest.approx(expected, rel=1e-12)
    # the two ends: gamma = 0 is label smoothing, alpha = 0 is focal loss
    torch.testing.assert_close(label_smoothing_focal_loss(z, t, 0.0, 0.1), label_smoothing_loss(z, t, 0.1))
    torch.testing.assert_close(label_smoothing_focal_loss(z, t, 2.0, 0.0), focal_loss(z, t, 2.0))
    # finite value and gradient where the float32 softmax saturates (p_y rounds to 1)
    big = torch.tensor([[60.0, 0.0, -5.0]], requires_grad=True)
    value = label_smoothing_focal_loss(big, torch.tensor([0]), 2.0, 0.1)
    value.backward()
    assert torch.isfinite(value) and torch.isfinite(big.grad).all()


@pytest.mark.parametrize("name, match", [("ls-0.1-fl-", "ls-<alpha>-fl-<gamma>"), ("ls-0.1-fl-x", "not a number"),
                                         ("ls-0.1-fl--1", "gamma must be >= 0"), ("ls-1.5-fl-2", "0 <= alpha < 1"),
                                         ("ls-0.1-foo", "ls-<alpha>")])
def test_label_smoothing_focal_names_refuse_bad_input(name, match):
    with pytest.raises(ValueError, match=match):
        get_loss(name)


def test_label_smoothing_focal_loss_refuses_bad_arguments():
    from calib.losses.functional import label_smoothing_focal_loss

    z, t = torch.zeros(2, 3), torch.tensor([0, 1])
    with pytest.raises(ValueError, match="gamma must be"):
        label_smoothing_focal_loss(z, t, -1.0, 0.1)
    with pytest.raises(ValueError, match="gamma must be a number"):
        label_smoothing_focal_loss(z, t, "2", 0.1)
    with pytest.raises(ValueError, match="alpha must be a number in"):
        label_smoothing_focal_loss(z, t, 2.0, 1.0)
    with pytest.raises(ValueError, match="-inf entries"):
        label_smoothing_focal_loss(torch.tensor([[0.0, float("-inf"), 1.0]]), torch.tensor([0]), 2.0, 0.1)


# --------------------------------------------------------------- mutation sample B: behaviour the sample found untested

def test_half_precision_logits_give_the_losses_of_their_float32_values():
    """brier_loss, label_smoothing_loss and label_smoothing_focal_loss promote float16 / bfloat16 logits to float32
    (upcast): the loss is that of the same values in float32, to the bit, and a float32 tensor."""
    from calib.losses.functional import brier_loss, label_smoothing_focal_loss

    gen = torch.Generator().manual_seed(3)
    z = torch.randn(6, 4, generator=gen) * 3
    t = torch.tensor([0, 1, 2, 3, 0, 1])
    for dtype in (torch.float16, torch.bfloat16):
        half = z.to(dtype)
        for loss in (brier_loss, lambda a, b: label_smoothing_loss(a, b, 0.1),
                     lambda a, b: label_smoothing_focal_loss(a, b, 2.0, 0.1)):
            got = loss(half, t)
            assert got.dtype == torch.float32
            assert torch.equal(got, loss(half.float(), t)), dtype


def test_label_smoothing_loss_names_the_class_dimension_and_warns_nothing():
    """The log-softmax is taken over the classes (dim=1) by name: torch warns about an implicit dimension."""
    import warnings

    gen = torch.Generator().manual_seed(2)
    z, t = torch.randn(5, 3, generator=gen, dtype=torch.float64), torch.tensor([0, 1, 2, 1, 0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = label_smoothing_loss(z, t, 0.1)
    p = F.softmax(z, 1).numpy()
    smooth = 0.9 * np.eye(3)[t.numpy()] + 0.05 * (1 - np.eye(3)[t.numpy()])
    assert got.item() == pytest.approx(-(smooth * np.log(p)).sum(1).mean(), rel=1e-13)


# --------------------------------------------------------------- mutation sample C: behaviour the sample found untested

def test_inverse_focal_class_weights_enter_as_torch_weights_its_mean():
    """weight=w: the mean is sum_i w_{y_i} l_i / sum_i w_{y_i} (torch's cross-entropy convention), l_i the
    per-sample loss computed by the loop."""
    logits, targets = batch(n=32, k=4)
    w = torch.tensor([0.5, 2.0, 1.0, 3.0], dtype=torch.float64)
    p = probs_of(logits)
    ell = np.array([-(1 + p[i, t]) ** 2 * math.log(p[i, t]) for i, t in enumerate(targets.tolist())])
    wy = w.numpy()[targets.numpy()]
    assert inverse_focal_loss(logits, targets, 2.0, weight=w).item() == pytest.approx((wy * ell).sum() / wy.sum(),
                                                                                       rel=1e-12)
    np.testing.assert_allclose(inverse_focal_loss(logits, targets, 2.0, "none", weight=w).numpy(), wy * ell,
                               rtol=1e-12)
