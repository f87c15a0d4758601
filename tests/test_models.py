"""Tests of the networks (calib.models)."""

import pytest
import torch

from calib.models import mlp

torch.set_num_threads(1)


def test_mlp_shapes_and_parameter_count():
    net = mlp(1, 3)                    # 1-64-64-3: (1*64 + 64) + (64*64 + 64) + (64*3 + 3)
    assert sum(p.numel() for p in net.parameters()) == 128 + 4160 + 195
    assert [type(m).__name__ for m in net] == ["Linear", "ReLU", "Linear", "ReLU", "Linear"]
    assert net(torch.zeros(7, 1)).shape == (7, 3)
    wide = mlp(5, 10, hidden=(32,))
    assert sum(p.numel() for p in wide.parameters()) == (5 * 32 + 32) + (32 * 10 + 10)
    linear = mlp(4, 2, hidden=())
    assert len(linear) == 1 and linear(torch.zeros(2, 4)).shape == (2, 2)


def test_mlp_seed_is_reproducible_and_leaves_the_global_stream_alone():
    torch.manual_seed(123)
    before = torch.rand(1)
    torch.manual_seed(123)
    a = mlp(1, 3, seed=7)
    assert torch.equal(torch.rand(1), before)
    b = mlp(1, 3, seed=7)
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))
    c = mlp(1, 3, seed=8)
    assert not torch.equal(a[0].weight, c[0].weight)


def test_mlp_errors():
    with pytest.raises(ValueError, match="n_classes"):
        mlp(2, 1)
    with pytest.raises(ValueError, match="hidden width"):
        mlp(2, 3, hidden=(0,))
