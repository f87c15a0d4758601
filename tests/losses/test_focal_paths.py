"""The focal family's fast path (issue 48, part 2): what it skips and what it keeps.

At gamma = 0 every loss is ``F.cross_entropy`` itself, to the bit; the logits' finiteness is read from the loss (no
pass over N x K logits when they are finite), with the same errors when they are not, ignored rows included; the
targets are read by the gather, with the same errors and the same masked values when some are ``ignore_index``; the
log-space weight ``-expm1(log p_y)`` keeps its accuracy near p_y = 1, checked against 50-digit mpmath on float32
logits whose softmax rounds p_y to 1. The speed is ``tests/benchmarks/losses_focal_family.py``.
"""

from __future__ import annotations

import itertools

import mpmath
import numpy as np
import pytest
import torch
import torch.nn.functional as F

import calib.losses._common as common
import calib.losses._focal as focal_paths
from calib.focal import FLSD_532, GammaSchedule
from calib.losses import DualFocalLoss, FLSD53Loss, FLSDLoss, FocalLoss, InverseFocalLoss

#: Every module of the family at gamma > 0, with torch's default options.
FAMILY = {"fl-0.5": lambda **o: FocalLoss(0.5, **o), "fl-3": lambda **o: FocalLoss(3.0, **o),
          "flsd-53": lambda **o: FLSD53Loss(**o), "flsd-532": lambda **o: FLSDLoss(FLSD_532, **o),
          "inverse-2": lambda **o: InverseFocalLoss(2.0, **o), "dual-2": lambda **o: DualFocalLoss(2.0, **o),
          "dual-0.5": lambda **o: DualFocalLoss(0.5, **o)}


def _batch(n=40, k=6, dtype=torch.float32, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return (torch.randn(n, k, generator=gen) * 3).to(dtype), torch.randint(0, k, (n,), generator=gen)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_gamma_zero_is_torch_cross_entropy_to_the_bit(dtype):
    """Before, the float32 mean and sum differed from torch's in the last bits (the focal path at gamma = 0)."""
    logits, targets = _batch(dtype=dtype)
    weight = torch.linspace(0.5, 2.0, 6, dtype=dtype)
    ignored = targets.clone()
    ignored[::3] = -100
    for reduction, w, t in itertools.product(("mean", "sum", "none"), (None, weight), (targets, ignored)):
        want = F.cross_entropy(logits, t, weight=w, reduction=reduction)
        options = {"weight": w, "reduction": reduction}
        for loss in (FocalLoss(0.0, **options), InverseFocalLoss(0.0, **options), DualFocalLoss(0.0, **options),
                     FLSDLoss(GammaSchedule("flat", (0.5,), (0.0, 0.0)), **options)):
            assert torch.equal(loss(logits, t), want), (type(loss).__name__, reduction, w is None)


def test_finite_logits_are_not_passed_over(monkeypatch):
    """The finiteness of finite logits is read from the loss: check_finite_logits (a pass over N x K) never runs.
    Before, every call ran it."""
    calls = []
    original = common.check_finite_logits

    def counting(logits):
        calls.append(tuple(logits.shape))
        return original(logits)

    monkeypatch.setattr(common, "check_finite_logits", counting)
    monkeypatch.setattr(focal_paths, "check_finite_logits", counting, raising=False)
    logits, targets = _batch()
    for name, make in {**FAMILY, "fl-0": lambda **o: FocalLoss(0.0, **o)}.items():
        for reduction in ("mean", "sum", "none"):
            make(reduction=reduction)(logits, targets)
    assert calls == []


@pytest.mark.parametrize("name", [*FAMILY, "fl-0"])
def test_non_finite_logits_raise_as_before(name):
    """A NaN, a +inf, or a row of -inf, in any row and column (an ignored row too), raises check_finite_logits's
    ValueError; a -inf in some classes (a masked class) is allowed."""
    make = FAMILY.get(name, lambda **o: FocalLoss(0.0, **o))
    logits, targets = _batch(n=12, k=5)
    ignored = targets.clone()
    ignored[4] = -100
    cases = [(float("nan"), 3, 0, "NaN in 1 row"), (float("inf"), 7, 4, r"\+inf in 1 row"),
             (float("nan"), 4, 2, "NaN in 1 row")]                       # row 4 is ignored in the second batch
    for (value, row, col, message), t, reduction in itertools.product(cases, (targets, ignored), ("mean", "none")):
        bad = logits.clone()
        bad[row, col] = value
        with pytest.raises(ValueError, match=message + rf"\(s\) \(first: row {row}\)"):
            make(reduction=reduction)(bad, t)
    bad = logits.clone()
    bad[9] = -float("inf")
    with pytest.raises(ValueError, match=r"-inf in every class in 1 row\(s\) \(first: row 9\)"):
        make()(bad, targets)
    masked = logits.clone()
    masked[2, (targets[2].item() + 1) % 5] = -float("inf")
    assert torch.isfinite(make()(masked, targets))


@pytest.mark.parametrize("name", list(FAMILY))
def test_targets_are_read_by_the_gather_with_the_same_errors_and_masks(name):
    make = FAMILY[name]
    logits, targets = _batch(n=20, k=5, dtype=torch.float64)
    for bad, found in ((7, "found 7"), (-1, "found -1"), (5, "found 5")):
        t = targets.clone()
        t[3] = bad
        with pytest.raises(ValueError, match=rf"targets must lie in \[0, 5\) .*{found}"):
            make()(logits, t)
    t = targets.clone()
    t[::4] = -100
    counted = t != -100
    per_sample = make(reduction="none")(logits[counted], targets[counted])
    torch.testing.assert_close(make()(logits, t), per_sample.mean(), rtol=1e-13, atol=0)
    torch.testing.assert_close(make(reduction="sum")(logits, t), per_sample.sum(), rtol=1e-13, atol=0)
    got = make(reduction="none")(logits, t)
    assert torch.equal(got[~counted], torch.zeros(int((~counted).sum()), dtype=got.dtype))
    with pytest.raises(ValueError, match="every target of the batch is ignore_index=-100"):
        make()(logits, torch.full_like(t, -100))
    with pytest.raises(ValueError, match="the batch's targets all have class weight 0"):
        make(weight=torch.tensor([0.0, 1.0, 1.0, 1.0, 1.0], dtype=torch.float64))(logits, torch.zeros_like(t))


# ------------------------------------------------------------------ accuracy near p_y = 1 against mpmath

#: Margins of the target's logit over a fixed row of 9 others: p_y from 0.99 to 1 - 1e-11; from 19 on (18 on some
#: paths), float32's softmax rounds p_y to 1.
MARGINS = (8.0, 10.0, 12.0, 14.0, 16.0, 17.0, 18.0, 19.0, 20.0, 25.0)
OTHERS = (0.0, -1.0, 0.5, 0.25, -2.0, 1.0, 0.0, -0.5, 0.75)


def _mpmath_focal(row, gamma):
    """Focal loss of one row (target 0) and its gradient in the logits, at 50 digits, from the exact float32
    values: log p_y = -log1p(sum_(k != y) e^(z_k - z_y)), 1 - p_y = -expm1(log p_y)."""
    with mpmath.workdps(50):
        z = [mpmath.mpf(v) for v in row]
        e = [mpmath.exp(v - z[0]) for v in z]
        log_p = -mpmath.log1p(mpmath.fsum(e[1:]))
        p = [v / mpmath.fsum(e) for v in e]
        q = -mpmath.expm1(log_p)
        loss = -q ** gamma * log_p
        d_log_p = -(q ** gamma - log_p * gamma * q ** (gamma - 1) * (1 - q))   # dL / d log p_y
        grad = [d_log_p * ((1 if k == 0 else 0) - p[k]) for k in range(len(z))]
        return float(loss), np.array([float(g) for g in grad])


def _official(z, y, gamma):
    """torrvision/focal_calibration@6f4c3c7, Losses/focal_loss.py: -(1 - pt)^gamma log pt, pt = exp(log pt)."""
    logpt = F.log_softmax(z, dim=1).gather(1, y.view(-1, 1)).view(-1)
    return -1 * (1 - logpt.exp()) ** gamma * logpt


@pytest.mark.parametrize("gamma", [0.5, 1.0, 3.0])
def test_accuracy_near_p_one_against_mpmath(gamma):
    """float32 logits whose softmax gives p_y from 0.99 to 1 (rounded to 1 from a margin of 19 on).

    Given the log p_y that ``log_softmax`` returns, calib's loss ``-(-expm1(log p))^gamma log p`` is exact to a few
    roundings (relative error <= (gamma + 3) 2^-24 against 50 digits; 1.5e-7 at most here), where the official
    ``1 - exp(log p)`` is off by up to 2e-4 (at gamma = 3); end to end both are bounded by ``log_softmax``'s own
    error in log p_y (about 2^-23 in absolute terms: a relative error of the loss up to (gamma + 1) 2^-22 /
    |log p_y|), and where p_y rounds to 1 ``log_softmax`` returns log p_y = 0 and both return 0, off by the true
    value (1e-10 or less). The gradient stays finite there, also for gamma < 1, where the official one is
    0 * inf = nan."""
    z = torch.tensor([[m, *OTHERS] for m in MARGINS], dtype=torch.float32)
    y = torch.zeros(len(MARGINS), dtype=torch.long)
    saturated = (torch.softmax(z, 1)[:, 0] == 1).numpy()                    # float32 p_y rounds to 1
    assert all(saturated[i] == (m >= 19) for i, m in enumerate(MARGINS) if m != 18)
    reference = [_mpmath_focal(row, gamma) for row in z.double().tolist()]
    ref_loss = np.array([r[0] for r in reference])
    ref_grad = np.stack([r[1] for r in reference])
    ours_z = z.clone().requires_grad_(True)
    ours = FocalLoss(gamma, reduction="none")(ours_z, y)
    ours.sum().backward()
    theirs_z = z.clone().requires_grad_(True)
    theirs = _official(theirs_z, y, gamma)
    theirs.sum().backward()
    log_p = torch.log_softmax(z, 1)[:, 0].double().numpy()                   # what both read
    with mpmath.workdps(50):                                                  # the loss exactly, given that log p_y
        given = np.array([float(-(-mpmath.expm1(mpmath.mpf(v))) ** gamma * mpmath.mpf(v)) for v in log_p])
    read = log_p != 0
    ours_given = np.abs(ours.detach().double().numpy()[read] / given[read] - 1)
    theirs_given = np.abs(theirs.detach().double().numpy()[read] / given[read] - 1)
    print(f"gamma = {gamma}: relative error given log p_y, calib {ours_given.max():.1e}, official "
          f"{theirs_given.max():.1e}")
    assert ours_given.max() <= (gamma + 3) * 2.0 ** -24 < theirs_given.max()
    # end to end: bounded by log_softmax's error in log p_y, for both
    true_log_p = np.array([float(-mpmath.log1p(mpmath.fsum(mpmath.exp(mpmath.mpf(v) - mpmath.mpf(row[0]))
                                                           for v in row[1:]))) for row in z.double().tolist()])
    bound = (gamma + 1) * 2.0 ** -22 * ref_loss / np.abs(true_log_p)
    for values in (ours, theirs):
        err = np.abs(values.detach().double().numpy() - ref_loss)
        assert (err[~saturated] <= bound[~saturated]).all()
    assert (ours.detach()[torch.from_numpy(saturated)] == 0).all() and ref_loss[saturated].max() < 1e-10
    grad_err = np.abs(ours_z.grad.double().numpy() - ref_grad).max(axis=1)
    grad_scale = np.abs(ref_grad).max(axis=1)
    assert np.isfinite(grad_err).all()
    grad_bound = (gamma + 2) * 2.0 ** -22 * grad_scale / np.abs(true_log_p)
    assert (grad_err[~saturated] <= grad_bound[~saturated]).all()
    assert (grad_err[saturated] <= grad_scale[saturated]).all() and grad_scale[saturated].max() < 1e-9
    if gamma < 1:
        assert torch.isnan(theirs_z.grad[torch.from_numpy(saturated)]).any()


# --------------------------------------------------------------- mutation sample B: behaviour the sample found untested

@pytest.mark.parametrize("gamma", [0.5, 2.0])
def test_an_ignore_index_within_the_classes_still_refuses_a_mean_over_class_weight_zero(gamma):
    """ignore_index = 0, a class: the targets are read first (not by the gather); the counted targets (class 1) all
    weigh 0, so a mean would divide by 0, and the ValueError says so instead of returning nan."""
    from calib.losses import focal_loss

    logits = torch.tensor([[0.1, 0.2, 0.3], [1.0, -1.0, 0.0], [0.5, 0.5, 0.0], [2.0, 1.0, 0.0]], dtype=torch.float64)
    targets = torch.tensor([1, 1, 0, 1])
    weight = torch.tensor([1.0, 0.0, 1.0], dtype=torch.float64)
    with pytest.raises(ValueError, match="the batch's targets all have class weight 0"):
        focal_loss(logits, targets, gamma=gamma, weight=weight, ignore_index=0)
    assert focal_loss(logits, targets, gamma=gamma, weight=weight, ignore_index=0, reduction="sum").item() == 0.0
