"""calib.losses.modules: the focal family as torch modules with torch.nn.CrossEntropyLoss's options (issue 43, item 4).

At gamma = 0 every loss of the family is torch's cross-entropy, for every combination of class weights,
ignore_index and reduction; for gamma > 0 the weights and the ignored targets enter as torch's do (the
per-sample values weighted by weight[y], the mean divided by the counted samples' total weight).
"""

from __future__ import annotations

import copy
import io
import itertools
import pickle

import pytest
import torch
import torch.nn.functional as F
from references import batch

from calib.focal import FLSD_53, FLSD_532, GammaSchedule
from calib.losses import (DualFocalLoss, EpochScheduledFocalLoss, FLSD53Loss, FLSDLoss, FocalLoss, InverseFocalLoss,
                          dual_focal_loss, focal_loss, get_loss, inverse_focal_loss, sample_dependent_focal_loss)

K = 5
#: The class weights of the tests (torch's ``weight``): unequal, one of them 0.
WEIGHT = torch.tensor([0.5, 2.0, 1.0, 0.0, 3.0], dtype=torch.float64)
#: A schedule of gamma 0 in both bins: FLSD at gamma = 0.
FLAT = GammaSchedule("flat", (0.5,), (0.0, 0.0))

AT_GAMMA_ZERO = {
    "FocalLoss": lambda **o: FocalLoss(0.0, **o),
    "InverseFocalLoss": lambda **o: InverseFocalLoss(0.0, **o),
    "DualFocalLoss": lambda **o: DualFocalLoss(0.0, **o),
    "FLSDLoss": lambda **o: FLSDLoss(FLAT, **o),
    "EpochScheduledFocalLoss": lambda **o: EpochScheduledFocalLoss((0.0,), (), 10, **o),
}


def _targets_with(ignored_value, n=64, seed=0):
    """A batch whose targets hold ``ignored_value`` in every 5th row (None: no row is ignored)."""
    logits, targets = batch(n=n, k=K, seed=seed)
    if ignored_value is not None:
        targets = targets.clone()
        targets[::5] = ignored_value
    return logits, targets


#: (ignore_index, the value written into every 5th target): the default -100 present, a real class (2) ignored,
#: and -100 with no target equal to it.
IGNORE_CASES = [(-100, -100), (2, 2), (-100, None)]


@pytest.mark.parametrize("family", AT_GAMMA_ZERO)
def test_every_loss_at_gamma_zero_is_torch_cross_entropy_with_every_option(family):
    largest = 0.0
    for weight, (ignore_index, value), reduction in itertools.product(
            (None, WEIGHT), IGNORE_CASES, ("mean", "sum", "none")):
        logits, targets = _targets_with(value)
        loss = AT_GAMMA_ZERO[family](weight=weight, ignore_index=ignore_index, reduction=reduction)
        got = loss(logits, targets)
        want = F.cross_entropy(logits, targets, weight=weight, ignore_index=ignore_index, reduction=reduction)
        assert got.shape == want.shape and got.dtype == want.dtype
        torch.testing.assert_close(got, want, rtol=1e-13, atol=1e-15)
        largest = max(largest, float((got - want).abs().max()))
    print(f"{family}: largest |loss - torch cross_entropy| = {largest:.1e}")


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_float32_at_gamma_zero_is_torch_cross_entropy(reduction):
    logits, targets = _targets_with(-100)
    logits = logits.float()
    largest = 0.0
    for make, weight in itertools.product(AT_GAMMA_ZERO.values(), (None, WEIGHT.float())):
        got = make(weight=weight, reduction=reduction)(logits, targets)
        want = F.cross_entropy(logits, targets, weight=weight, reduction=reduction)
        torch.testing.assert_close(got, want, rtol=2e-6, atol=1e-7)
        largest = max(largest, float((got - want).abs().max()))
    print(f"float32, {reduction}: largest |loss - torch cross_entropy| = {largest:.1e}")


def _weighted(values, targets, weight, ignore_index, reduction):
    """torch's reduction of per-sample ``values`` (written out): weight[y] times each, 0 where y is ignored,
    the mean over the counted samples' total weight."""
    counted = targets != ignore_index
    w = torch.zeros_like(values)
    safe = torch.where(counted, targets, 0)
    w[counted] = (weight[safe] if weight is not None else torch.ones_like(values))[counted]
    terms = values * w
    return {"none": terms, "sum": terms.sum(), "mean": terms.sum() / w.sum()}[reduction]


@pytest.mark.parametrize("name, module, function", [
    ("focal", lambda **o: FocalLoss(2.5, **o), lambda z, y: focal_loss(z, y, 2.5, reduction="none")),
    ("inverse", lambda **o: InverseFocalLoss(2.0, **o), lambda z, y: inverse_focal_loss(z, y, 2.0, reduction="none")),
    ("dual", lambda **o: DualFocalLoss(3.0, **o), lambda z, y: dual_focal_loss(z, y, 3.0, reduction="none")),
    ("flsd-532", lambda **o: FLSDLoss(FLSD_532, **o),
     lambda z, y: sample_dependent_focal_loss(z, y, FLSD_532, reduction="none")),
])
def test_weights_and_ignored_targets_enter_as_torch_reduces(name, module, function):
    """The per-sample values (checked against loops in test_functional.py) weighted and reduced as torch does."""
    for weight, (ignore_index, value), reduction in itertools.product(
            (None, WEIGHT), IGNORE_CASES, ("mean", "sum", "none")):
        logits, targets = _targets_with(value, seed=1)
        counted = targets != ignore_index
        values = torch.zeros(len(targets), dtype=logits.dtype)
        values[counted] = function(logits[counted], targets[counted])
        want = _weighted(values, targets, weight, ignore_index, reduction)
        got = module(weight=weight, ignore_index=ignore_index, reduction=reduction)(logits, targets)
        torch.testing.assert_close(got, want, rtol=1e-13, atol=1e-15)


def test_an_ignored_row_has_no_gradient_and_its_masked_class_no_nan():
    """An ignored row whose class 0 (the index read in its place) is masked to -inf: value 0, gradient 0, no nan."""
    logits, targets = _targets_with(-100)
    logits[0, 0] = -float("inf")                        # row 0 is ignored
    logits = logits.requires_grad_(True)
    for loss in (FocalLoss(2.0), DualFocalLoss(2.0), InverseFocalLoss(2.0), FLSD53Loss(),
                 FocalLoss(2.0, weight=WEIGHT)):
        logits.grad = None
        values = copy.deepcopy(loss)
        values.reduction = "none"
        per_sample = values(logits, targets)
        assert per_sample[0].item() == 0.0 and torch.isfinite(per_sample).all()
        loss(logits, targets).backward()
        assert torch.isfinite(logits.grad).all() and not logits.grad[0].any()


def test_the_registry_builds_the_modules():
    fl = get_loss("fl-3")
    assert type(fl) is FocalLoss and fl.gamma == 3.0 and fl.reduction == "mean" and fl.ignore_index == -100
    assert fl.weight is None and fl.__name__ == "focal_loss_gamma_3"
    assert type(get_loss("flsd-53")) is FLSD53Loss and get_loss("flsd-53").schedule is FLSD_53
    assert type(get_loss("flsd-532")) is FLSDLoss and get_loss("flsd-532").schedule is FLSD_532
    assert type(get_loss("inverse-fl-2")) is InverseFocalLoss and get_loss("inverse-fl-2").gamma == 2.0
    assert type(get_loss("DUAL-FL-0.5")) is DualFocalLoss and get_loss("DUAL-FL-0.5").gamma == 0.5
    assert type(get_loss("flsc-531")) is EpochScheduledFocalLoss
    logits, targets = batch()
    for name, reference in [("fl-3", focal_loss(logits, targets, 3.0)),
                            ("flsd-53", sample_dependent_focal_loss(logits, targets)),
                            ("inverse-fl-2", inverse_focal_loss(logits, targets, 2.0)),
                            ("dual-fl-2", dual_focal_loss(logits, targets, 2.0))]:
        assert torch.equal(get_loss(name)(logits, targets), reference), name


def test_the_modules_keep_their_weights_as_torch_does():
    loss = FocalLoss(2.0, weight=[1.0, 2.0, 3.0, 4.0, 5.0], ignore_index=3, reduction="sum")
    assert repr(loss) == "FocalLoss(gamma=2.0, reduction='sum', ignore_index=3, weight=[1.0, 2.0, 3.0, 4.0, 5.0])"
    assert list(loss.state_dict()) == ["weight"] and list(FocalLoss(2.0).state_dict()) == []
    assert loss.double().weight.dtype == torch.float64                  # a buffer: .to() moves and casts it
    buffer = io.BytesIO()
    torch.save(loss.state_dict(), buffer)
    buffer.seek(0)
    fresh = FocalLoss(2.0, weight=torch.ones(5), ignore_index=3, reduction="sum")
    fresh.load_state_dict(torch.load(buffer))
    logits, targets = batch()
    assert torch.equal(fresh(logits, targets), loss(logits, targets))
    again = pickle.loads(pickle.dumps(loss))
    assert torch.equal(again(logits, targets), loss(logits, targets)) and again.ignore_index == 3
    assert FocalLoss(1.0, weight=[1, 2, 3, 4, 5]).weight.dtype == torch.get_default_dtype()   # integer weights


def test_bad_options_are_refused_when_the_loss_is_built():
    for make, match in [
        (lambda: FocalLoss(-1.0), r"gamma must be >= 0; found -1\.0"),
        (lambda: FocalLoss(float("nan")), "gamma must be a finite number"),
        (lambda: DualFocalLoss("3"), "gamma must be a single real number"),
        (lambda: FocalLoss(2.0, reduction="avg"), r"reduction='avg' is not supported; choose one of 'mean', 'sum'"),
        (lambda: FocalLoss(2.0, ignore_index=1.5), "ignore_index must be an integer"),
        (lambda: FocalLoss(2.0, weight=[1.0, -1.0]), "weight must hold finite class weights >= 0"),
        (lambda: FocalLoss(2.0, weight=[1.0, float("inf")]), "weight must hold finite class weights >= 0"),
        (lambda: FocalLoss(2.0, weight=torch.ones(2, 2)), r"weight must be a 1-D tensor of K class weights .*\(2, 2\)"),
        (lambda: FLSDLoss("flsd-9"), "schedule='flsd-9' is not a schedule's name; choose one of 'flsd-53'"),
        (lambda: FLSDLoss(3.0), "schedule must be a calib.focal.GammaSchedule"),
    ]:
        with pytest.raises(ValueError, match=match):
            make()


def test_batches_that_the_options_cannot_score_are_refused_by_name():
    logits, targets = batch(n=8, k=K)
    with pytest.raises(ValueError, match=r"weight has shape \(3,\) but logits has 5 classes"):
        FocalLoss(2.0, weight=[1.0, 1.0, 1.0])(logits, targets)
    everything_ignored = torch.full_like(targets, -100)
    with pytest.raises(ValueError, match="every target of the batch is ignore_index=-100: a mean over no samples"):
        FocalLoss(2.0)(logits, everything_ignored)
    assert FocalLoss(2.0, reduction="sum")(logits, everything_ignored).item() == 0.0
    with pytest.raises(ValueError, match="the batch's targets all have class weight 0"):
        FocalLoss(2.0, weight=WEIGHT)(logits, torch.full_like(targets, 3))      # class 3 weighs 0
    with pytest.raises(ValueError, match=r"targets must lie in \[0, 5\) .* or equal ignore_index=-100; found 7"):
        FLSD53Loss()(logits, torch.where(targets == 0, 7, targets))
    with pytest.raises(ValueError, match=r"found -1"):
        DualFocalLoss(1.0)(logits, targets - 1)


def test_half_precision_logits_are_computed_in_float32():
    logits, targets = batch(n=16, k=K, dtype=torch.float32)
    for loss in (FocalLoss(2.0), InverseFocalLoss(2.0), DualFocalLoss(2.0), FLSD53Loss(), get_loss("flsc-531")):
        for dtype in (torch.bfloat16, torch.float16):
            half = logits.to(dtype)
            value = loss(half, targets)
            assert value.dtype == torch.float32
            assert torch.equal(value, loss(half.float(), targets))
    with pytest.raises(ValueError, match=r"overflows torch.float32 \(the precision torch.bfloat16 logits are computed "
                                         r"in\)"):
        InverseFocalLoss(200.0)(logits.bfloat16(), targets)


# --------------------------------------------------------------- mutation sample C: behaviour the sample found untested

def test_the_family_base_module_defaults_to_torch_cross_entropy_options():
    """FocalFamilyLoss, which every module of the family builds on, takes torch.nn.CrossEntropyLoss's defaults:
    reduction "mean", ignore_index -100, no class weights."""
    from calib.losses._focal import FocalFamilyLoss

    base, torch_default = FocalFamilyLoss(), torch.nn.CrossEntropyLoss()
    assert (base.reduction, base.ignore_index, base.weight) == ("mean", -100, None)
    assert (base.reduction, base.ignore_index) == (torch_default.reduction, torch_default.ignore_index)
