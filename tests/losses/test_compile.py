"""The focal family under torch.compile (issue 43, item 4): one graph, no break, and the compiled loss equal to the
eager one.

Before, ``get_loss("fl-3")`` broke its graph 6 times (gamma checked with numpy at every call, the targets' range and
the logits' finiteness read with ``int()`` and ``float()``), FLSD 4 times. Now the options are checked when the
loss is built and the value checks run in eager mode only. The graph breaks are counted with
``torch._dynamo.explain`` and the equality is checked with the ``aot_eager`` backend (AOTAutograd's forward and
backward graphs, run by eager kernels); inductor compiles C++, about a minute for the first loss on a loaded 2-core
machine, so its comparison is the benchmark ``tests/benchmarks/compiled_losses.py``.
"""

from __future__ import annotations

import pytest
import torch
from references import batch

from calib.losses import (REGISTRY, DualFocalLoss, EpochScheduledFocalLoss, FLSD53Loss, FLSDLoss, FocalLoss,
                          InverseFocalLoss, get_loss)

FOCAL_CLASSES = (FocalLoss, FLSDLoss, FLSD53Loss, InverseFocalLoss, DualFocalLoss, EpochScheduledFocalLoss)
#: Names beyond the registry's examples: other gammas and schedules of the same families.
MORE_NAMES = ("fl-0", "fl-0.5", "flsd-532", "flsc-532")


def focal_family_names() -> list[str]:
    """Every primary name of the registry whose loss is of the focal family (found from the table, so that a new
    family is counted too), and :data:`MORE_NAMES`."""
    examples = [spec.example for spec in REGISTRY if spec.kind == "primary"
                and isinstance(get_loss(spec.example), FOCAL_CLASSES)]
    return examples + list(MORE_NAMES)


def with_options(name: str, weight, ignore_index: int):
    """The loss ``name`` built again with class weights and ``ignore_index`` (the registry's have torch's
    defaults)."""
    loss = get_loss(name)
    if isinstance(loss, EpochScheduledFocalLoss):
        return EpochScheduledFocalLoss(loss.gammas, loss.boundaries, loss.reference_epochs, loss.__name__,
                                       weight=weight, ignore_index=ignore_index)
    if isinstance(loss, FLSDLoss):
        return FLSDLoss(loss.schedule, weight=weight, ignore_index=ignore_index)
    return type(loss)(loss.gamma, weight=weight, ignore_index=ignore_index)


def _batch(dtype=torch.float32):
    logits, targets = batch(n=32, k=6, seed=2, dtype=dtype)
    ignored = targets.clone()
    ignored[::4] = -100
    return logits, targets, ignored


def test_the_focal_families_of_the_registry_are_all_counted():
    assert {get_loss(name).__class__ for name in focal_family_names()} == set(FOCAL_CLASSES)


@pytest.mark.parametrize("name", focal_family_names())
def test_no_graph_break_under_torch_compile(name):
    logits, targets, ignored = _batch()
    weight = torch.linspace(0.5, 2.0, 6)
    for loss, y in ((get_loss(name), targets), (with_options(name, weight, -100), ignored)):
        torch._dynamo.reset()
        explanation = torch._dynamo.explain(loss)(logits, y)
        reasons = [str(b.reason).splitlines()[0] for b in explanation.break_reasons]
        assert (explanation.graph_break_count, explanation.graph_count) == (0, 1), (name, reasons)


@pytest.mark.parametrize("name", ["fl-3", "flsd-53", "flsc-531", "inverse-fl-2", "dual-fl-2"])
def test_compiled_equals_eager_in_float32_and_bfloat16(name):
    """Value and gradient, with class weights and ignored targets. bf16 logits are computed in float32 by both."""
    logits, _, ignored = _batch()
    loss = with_options(name, torch.linspace(0.5, 2.0, 6), -100)
    torch._dynamo.reset()
    compiled = torch.compile(loss, backend="aot_eager", fullgraph=True)        # fullgraph: a break is an error
    for dtype in (torch.float32, torch.bfloat16):
        eager_z = logits.to(dtype).clone().requires_grad_(True)
        compiled_z = logits.to(dtype).clone().requires_grad_(True)
        want, got = loss(eager_z, ignored), compiled(compiled_z, ignored)
        want.backward()
        got.backward()
        torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-7)
        torch.testing.assert_close(compiled_z.grad, eager_z.grad, rtol=1e-5, atol=1e-7)


def test_a_new_epoch_of_flsc_needs_no_new_graph():
    """The epoch's phase is a buffer: set_epoch changes a tensor that the one graph reads, not a constant baked
    into it (a guard on the epoch would compile a graph an epoch, and fall back to eager after 8)."""
    graphs = []

    def counting_backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    logits, targets, _ = _batch()
    loss = get_loss("flsc-531")
    torch._dynamo.reset()
    compiled = torch.compile(loss, backend=counting_backend)
    values = []
    for epoch in (1, 50, 100, 101, 200, 251, 350):
        loss.set_epoch(epoch, 350)
        values.append((loss.gamma, compiled(logits, targets).item(), loss(logits, targets).item()))
    assert len(graphs) == 1
    assert [gamma for gamma, _, _ in values] == [5.0, 5.0, 5.0, 3.0, 3.0, 1.0, 1.0]
    assert all(got == want for _, got, want in values)
    assert values[0][1] != values[3][1] != values[5][1]
