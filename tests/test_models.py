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


# ------------------------------------------------------------------ the papers' networks (build_model)

from calib.models import build_model, count_parameters, split_last_layer  # noqa: E402


@pytest.mark.parametrize("name, expected, tol", [
    # He et al. (2016)'s CIFAR ResNets, option A (parameter-free shortcuts): exact counts
    ("resnet20", 269_722, 0), ("resnet56", 853_018, 0), ("resnet110", 1_727_962, 0),
    # the focal_calibration networks, against anchors.md Sec. A1 (analytic counts, 10 classes, to 0.01 M)
    ("resnet50", 23.52e6, 0.005e6), ("resnet110-bottleneck", 45.86e6, 0.005e6),
    ("wrn-26-10", 36.48e6, 0.005e6), ("densenet121", 6.96e6, 0.005e6),
])
def test_parameter_counts_match_the_anchors(name, expected, tol):
    n = count_parameters(build_model(name, (3, 32, 32), 10))
    assert abs(n - expected) <= tol, (name, n)


def test_resnet110_bottleneck_is_not_he_et_al():
    he = count_parameters(build_model("resnet110", (3, 32, 32), 10))
    fc = count_parameters(build_model("resnet110-bottleneck", (3, 32, 32), 10))
    assert fc > 25 * he
    from calib.models import bottleneck_resnet

    assert "*not* He et al." in " ".join(bottleneck_resnet.__doc__.split())


@pytest.mark.parametrize("name", ["linear", "linear-nobias", "mlp", "mlp-32", "small-cnn", "small-cnn-w4", "resnet8-w4",
                                  "resnet20", "preresnet20", "resnet50", "wrn-8-2", "densenet121"])
@pytest.mark.parametrize("shape", [(1, 28, 28), (3, 32, 32)])
def test_any_channels_and_classes_and_the_last_layer(name, shape):
    net = build_model(name, shape, 7, seed=0).eval()
    x = torch.randn(2, *shape)
    with torch.no_grad():
        out = net(x)
        features, head = split_last_layer(net)
        assert torch.allclose(head(features(x).flatten(1)), out, atol=1e-6)
    assert out.shape == (2, 7) and isinstance(head, torch.nn.Linear) and head.out_features == 7
    assert (head.bias is None) == (name == "linear-nobias")


def test_seeded_builds_and_the_head_count():
    a = build_model("resnet8-w4", (1, 14, 14), 10, seed=3)
    b = build_model("resnet8-w4", (1, 14, 14), 10, seed=3)
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))
    # a 1-channel net differs from the 3-channel one only in the stem
    one, three = build_model("resnet20", (1, 32, 32), 10), build_model("resnet20", (3, 32, 32), 10)
    assert count_parameters(three) - count_parameters(one) == 2 * 16 * 9
    assert count_parameters(build_model("resnet20", (3, 32, 32), 100)) - count_parameters(three) == 90 * 65


def test_model_errors_list_the_valid_names():
    with pytest.raises(ValueError, match="unknown model 'vgg16'; choose from 'linear'.*'resnet50'"):
        build_model("vgg16", (3, 32, 32), 10)
    with pytest.raises(ValueError, match="6n\\+2"):
        build_model("resnet21", (3, 32, 32), 10)
    with pytest.raises(ValueError, match="needs images of shape"):
        build_model("resnet20", (30,), 2)
    with pytest.raises(ValueError, match="in_channels must be 1"):
        build_model("resnet20", (2, 32, 32), 10)
    with pytest.raises(ValueError, match="last linear layer"):
        split_last_layer(torch.nn.Conv2d(1, 1, 1))
