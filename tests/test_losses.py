"""Tests of the training losses (calib.losses) against per-sample references and torch's own cross-entropy."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from calib.focal import gradient_factor
from calib.losses import cross_entropy, focal_loss, get_loss

torch.set_num_threads(1)


def batch(n=64, k=5, scale=3.0, seed=0, dtype=torch.float64):
    gen = torch.Generator().manual_seed(seed)
    logits = (torch.randn(n, k, generator=gen, dtype=dtype) * scale)
    targets = torch.randint(0, k, (n,), generator=gen)
    return logits, targets


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


def test_registry():
    logits, targets = batch()
    for name, gamma in [("fl-3", 3.0), ("FL-0.5", 0.5), (" fl-2 ", 2.0), ("fl-0", 0.0)]:
        loss = get_loss(name)
        assert loss.gamma == gamma
        assert loss(logits, targets).item() == pytest.approx(focal_loss(logits, targets, gamma).item(), rel=1e-15)
    for bad in ["", "fl", "fl-", "fl-x", "fl--1", "fl-inf", "ce-1", "focal", "brier-2", None]:
        with pytest.raises(ValueError):
            get_loss(bad)


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
