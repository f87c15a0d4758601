"""Networks (torch): the toy classifiers and the CIFAR-style networks of the papers.

A model maps inputs of shape (N, ...) to logits of shape (N, K); it never applies the softmax. Every network
here ends in one ``nn.Linear`` (the "last linear layer" of Mukhoti et al. 2020, Prop. 1), and
:func:`split_last_layer` returns the map to its input features and the layer itself, which is what the
training diagnostics need (weight norms, per-sample last-layer gradients, feature norms).

Contents:

- toy models: :func:`linear` (logistic / softmax regression, optionally bias-free as in Mukhoti et al.
  2020, App. B), :func:`mlp`, :func:`small_cnn`;
- He et al. (2016)'s CIFAR ResNets (3 stages of BasicBlocks, 16/32/64 channels, option-A shortcuts):
  :func:`cifar_resnet` (``"resnet20"``, ``"resnet56"``, ``"resnet110"``; any depth 6n+2 and base width);
- the pre-activation ResNet of He et al. (2016b): :func:`preact_resnet` (``"preresnet56"``);
- the networks of the focal_calibration repository (Mukhoti et al. 2020; torrvision/focal_calibration,
  ``Net/*.py``, which follow kuangliu/pytorch-cifar): :func:`bottleneck_resnet` (``"resnet50"``, and its
  ``"resnet110"``, here ``"resnet110-bottleneck"``), :func:`wide_resnet` (``"wrn-26-10"``),
  :func:`densenet` (``"densenet121"``);
- :func:`build_model`, the registry used by ``calib train``, and :data:`MODEL_NAMES`.

Every convolutional network takes 1 or 3 input channels (``in_channels``) and any number of classes, and
any input size of at least 8x8: the final pooling is global (``adaptive_avg_pool2d``), which on 32x32
inputs is exactly the fixed-size pooling of the original code.
"""

from __future__ import annotations

import math
import re
from typing import Callable, TypeVar, cast

import torch
import torch.nn.functional as F
from torch import nn

from calib._validate import check_int

__all__ = ["Classifier", "linear", "mlp", "small_cnn", "cifar_resnet", "preact_resnet", "bottleneck_resnet",
           "wide_resnet", "densenet", "build_model", "check_model_name", "model_names", "split_last_layer",
           "count_parameters", "MODEL_NAMES"]


# ----------------------------------------------------------------------------------------------- helpers

class Classifier(nn.Module):
    """``features`` (any module, inputs -> (N, D)) followed by ``head``, the last linear layer (D -> K)."""

    def __init__(self, features: nn.Module, head: nn.Linear):
        super().__init__()
        self.features = features
        self.head = head

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The logits (N, K) of a batch of inputs ``x``: ``head(features(x))``."""
        return self.head(self.features(x))


_M = TypeVar("_M", bound=nn.Module)


def _seeded(build: Callable[[], _M], seed: int | None) -> _M:
    """Build a module, drawing its initial weights from ``seed`` without touching the global random state."""
    if seed is None:
        return build()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        return build()


def count_parameters(model: nn.Module) -> int:
    """The number of trainable parameters."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def split_last_layer(model: nn.Module) -> tuple[Callable[[torch.Tensor], torch.Tensor], nn.Linear]:
    """``(features, head)`` with ``model(x) == head(features(x))``; ``head`` is the last ``nn.Linear``.

    Works for :class:`Classifier` (every network of this module except :func:`mlp`) and for an
    ``nn.Sequential`` that ends in an ``nn.Linear`` (:func:`mlp`, a flattened MLP from :func:`build_model`).
    """
    if isinstance(model, Classifier):
        return model.features, model.head
    if isinstance(model, nn.Sequential) and len(model) and isinstance(model[-1], nn.Linear):
        body = cast(nn.Sequential, model[:-1])
        return (body if len(body) else nn.Identity()), model[-1]
    raise ValueError(f"cannot find the last linear layer of a {type(model).__name__}; pass a calib.models "
                     f"network (a Classifier or an nn.Sequential ending in nn.Linear).")


# ------------------------------------------------------------------------------------------- toy models

def linear(in_features: int, n_classes: int, bias: bool = True, seed: int | None = None) -> Classifier:
    """Softmax (multinomial logistic) regression: flatten, then one linear layer.

    With ``bias=False`` and two classes this is the bias-free logistic regression of Mukhoti et al. (2020),
    App. B (there written with one logit, sigma(w1 x1 + w2 x2); a two-logit softmax is the same family).
    """
    in_features = check_int(in_features, "in_features")
    n_classes = check_int(n_classes, "n_classes", minimum=2)
    return _seeded(lambda: Classifier(nn.Flatten(), nn.Linear(in_features, n_classes, bias=bias)), seed)


def mlp(in_features: int, n_classes: int, hidden=(64, 64), seed: int | None = None) -> nn.Sequential:
    """A multilayer perceptron ``Linear -> ReLU -> ... -> Linear`` returning logits.

    With the default two hidden layers it has three linear layers: the "three-layer multilayered
    perceptron" of Charoenphakdee et al. (2021), Sec. 5.2 (whose widths the paper does not give; 64 is the
    book's choice).

    Parameters
    ----------
    in_features : int
        Input dimension.
    n_classes : int
        Number of classes K (>= 2), the output dimension.
    hidden : sequence of int
        Widths of the hidden layers; ``()`` gives a linear model.
    seed : int, optional
        Seed for the initial weights (PyTorch's default initialisation), drawn without touching the global
        random state; when omitted the global generator is used.
    """
    in_features = check_int(in_features, "in_features")
    n_classes = check_int(n_classes, "n_classes", minimum=2)
    widths = [check_int(h, "hidden width") for h in hidden]
    sizes = [in_features, *widths, n_classes]

    def build() -> nn.Sequential:
        layers: list[nn.Module] = []
        for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
            layers.append(nn.Linear(a, b))
            if i < len(sizes) - 2:
                layers.append(nn.ReLU())
        return nn.Sequential(*layers)

    return _seeded(build, seed)


def _conv_bn_relu(c_in: int, c_out: int) -> list[nn.Module]:
    return [nn.Conv2d(c_in, c_out, 3, padding=1, bias=False), nn.BatchNorm2d(c_out), nn.ReLU(inplace=True)]


def small_cnn(in_channels: int = 1, n_classes: int = 10, width: int = 16, seed: int | None = None) -> Classifier:
    """A small CNN: three 3x3 conv-BN-ReLU stages of width w, 2w, 4w (2x2 max-pool after the first two),
    global average pooling and a linear layer. The book's cheap convolutional model (no paper uses it)."""
    c = _check_channels(in_channels)
    k = check_int(n_classes, "n_classes", minimum=2)
    w = check_int(width, "width")

    def build():
        body = nn.Sequential(*_conv_bn_relu(c, w), nn.MaxPool2d(2), *_conv_bn_relu(w, 2 * w), nn.MaxPool2d(2),
                             *_conv_bn_relu(2 * w, 4 * w), nn.AdaptiveAvgPool2d(1), nn.Flatten())
        return Classifier(body, nn.Linear(4 * w, k))

    return _seeded(build, seed)


def _check_channels(in_channels) -> int:
    c = check_int(in_channels, "in_channels")
    if c not in (1, 3):
        raise ValueError(f"in_channels must be 1 (grey, e.g. Fashion-MNIST) or 3 (colour, e.g. CIFAR); got {c}.")
    return c


# ------------------------------------------------------------------------ He et al. (2016) CIFAR ResNets

class _BasicBlockA(nn.Module):
    """Post-activation BasicBlock with He et al.'s option-A shortcut (identity; when the shape changes,
    stride-2 subsampling and zero-padded channels, so the shortcut has no parameters)."""

    def __init__(self, c_in: int, c_out: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(c_in, c_out, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c_out)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c_out)
        self.stride, self.extra = stride, c_out - c_in

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        short = x
        if self.stride != 1:
            short = short[:, :, ::self.stride, ::self.stride]
        if self.extra:
            short = F.pad(short, (0, 0, 0, 0, self.extra // 2, self.extra - self.extra // 2))
        return F.relu(out + short)


def _he_init(model: nn.Module) -> None:
    for m in model.modules():
        if isinstance(m, nn.Conv2d):
            nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
        elif isinstance(m, nn.BatchNorm2d):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)


def _three_stage_net(c: int, k: int, stem: int, widths, n: int, block) -> Classifier:
    """A 3x3 stem of ``stem`` channels, three stages of ``n`` blocks with ``widths`` channels (the first block
    of stages 2 and 3 has stride 2), global average pooling and a linear layer; He-initialised."""
    layers: list[nn.Module] = [*_conv_bn_relu(c, stem)]
    c_in = stem
    for stage, c_out in enumerate(widths):
        for b in range(n):
            layers.append(block(c_in, c_out, 2 if (b == 0 and stage > 0) else 1))
            c_in = c_out
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten()]
    model = Classifier(nn.Sequential(*layers), nn.Linear(c_in, k))
    _he_init(model)
    return model


def cifar_resnet(depth: int = 20, in_channels: int = 3, n_classes: int = 10, width: int = 16,
                 seed: int | None = None) -> Classifier:
    """He et al. (2016)'s CIFAR ResNet of depth 6n+2: a 3x3 stem, three stages of n BasicBlocks with
    ``width``, 2 ``width``, 4 ``width`` channels (16/32/64 in the paper), option-A (parameter-free)
    shortcuts, global average pooling and a linear layer.

    ResNet-20/56/110 have 0.27 M / 0.85 M / 1.73 M parameters for 10 classes (He et al. 2016, Table 6).
    This is the ResNet-110 of Guo et al. (2017); the focal_calibration repository's "ResNet-110" is a
    different, Bottleneck network (:func:`bottleneck_resnet`, ``"resnet110-bottleneck"``). A smaller
    ``width`` gives the width-reduced nets the book trains on a CPU. Convolutions use He initialisation
    (normal, fan-out).
    """
    depth = check_int(depth, "depth", minimum=8)
    if (depth - 2) % 6:
        raise ValueError(f"depth must be 6n+2 (8, 14, 20, 32, 44, 56, 110, ...); got {depth}.")
    n = (depth - 2) // 6
    c, k, w = _check_channels(in_channels), check_int(n_classes, "n_classes", minimum=2), check_int(width, "width")

    return _seeded(lambda: _three_stage_net(c, k, w, (w, 2 * w, 4 * w), n, _BasicBlockA), seed)


class _PreActBlock(nn.Module):
    """Pre-activation BasicBlock (He et al. 2016b): BN-ReLU-conv-BN-ReLU-conv, 1x1 projection shortcut
    (taken after the first BN-ReLU) when the shape changes."""

    def __init__(self, c_in: int, c_out: int, stride: int):
        super().__init__()
        self.bn1 = nn.BatchNorm2d(c_in)
        self.conv1 = nn.Conv2d(c_in, c_out, 3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c_out)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, padding=1, bias=False)
        self.shortcut = (nn.Conv2d(c_in, c_out, 1, stride=stride, bias=False)
                         if stride != 1 or c_in != c_out else None)

    def forward(self, x):
        out = F.relu(self.bn1(x))
        short = x if self.shortcut is None else self.shortcut(out)
        out = self.conv1(out)
        out = self.conv2(F.relu(self.bn2(out)))
        return out + short


def preact_resnet(depth: int = 56, in_channels: int = 3, n_classes: int = 10, width: int = 16,
                  seed: int | None = None) -> Classifier:
    """The pre-activation CIFAR ResNet of He et al. (2016b, "Identity mappings"), depth 6n+2: three stages of
    n pre-activation BasicBlocks (16/32/64 channels), 1x1 projection shortcuts where the shape changes, a
    final BN-ReLU, global average pooling and a linear layer. ``"preresnet56"`` is Zhou et al. (2025)'s
    PreResNet56 as the book builds it: their code is not public, and some public code (e.g. the SWA
    repository) builds depth >= 44 from Bottleneck blocks instead, so treat the block type as the book's
    choice."""
    depth = check_int(depth, "depth", minimum=8)
    if (depth - 2) % 6:
        raise ValueError(f"depth must be 6n+2 (20, 56, 110, ...); got {depth}.")
    n = (depth - 2) // 6
    c, k, w = _check_channels(in_channels), check_int(n_classes, "n_classes", minimum=2), check_int(width, "width")

    def build():
        layers: list[nn.Module] = [nn.Conv2d(c, w, 3, padding=1, bias=False)]
        c_in = w
        for stage, c_out in enumerate((w, 2 * w, 4 * w)):
            for b in range(n):
                layers.append(_PreActBlock(c_in, c_out, 2 if (b == 0 and stage > 0) else 1))
                c_in = c_out
        layers += [nn.BatchNorm2d(c_in), nn.ReLU(inplace=True), nn.AdaptiveAvgPool2d(1), nn.Flatten()]
        model = Classifier(nn.Sequential(*layers), nn.Linear(c_in, k))
        _he_init(model)
        return model

    return _seeded(build, seed)


# ------------------------------------------------------ the focal_calibration networks (kuangliu style)

class _Bottleneck(nn.Module):
    """The Bottleneck block of torrvision/focal_calibration ``Net/resnet.py`` (1x1, 3x3 with the stride,
    1x1 to 4x planes; a 1x1 conv + BN shortcut when the shape changes)."""

    expansion = 4

    def __init__(self, c_in: int, planes: int, stride: int):
        super().__init__()
        c_out = self.expansion * planes
        self.conv1 = nn.Conv2d(c_in, planes, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = nn.Conv2d(planes, c_out, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(c_out)
        self.shortcut = (nn.Sequential(nn.Conv2d(c_in, c_out, 1, stride=stride, bias=False), nn.BatchNorm2d(c_out))
                         if stride != 1 or c_in != c_out else nn.Identity())

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = F.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return F.relu(out + self.shortcut(x))


def bottleneck_resnet(blocks=(3, 4, 6, 3), in_channels: int = 3, n_classes: int = 10,
                      seed: int | None = None) -> Classifier:
    """The ImageNet-style Bottleneck ResNet for 32x32 inputs of torrvision/focal_calibration ``Net/resnet.py``
    (from kuangliu/pytorch-cifar): a 3x3 stem with 64 channels and no max-pool, four stages of Bottleneck
    blocks with 64/128/256/512 planes (x4 expansion), global average pooling, a linear layer.

    ``blocks=(3, 4, 6, 3)`` is the ResNet-50 of Mukhoti et al. (2020): 23.52 M parameters for 10 classes.
    ``blocks=(3, 4, 26, 3)`` is what that repository calls **"ResNet-110"** (``resnet110``), 45.86 M
    parameters: it is *not* He et al. (2016)'s CIFAR ResNet-110 (BasicBlocks, 16/32/64 channels, 1.73 M
    parameters; :func:`cifar_resnet`), although the paper cites He et al. for it. PyTorch's default
    initialisation, as in the original code (which divides the logits by a temperature ``temp=1``; omitted).
    """
    counts = [check_int(b, "blocks") for b in blocks]
    if len(counts) != 4:
        raise ValueError(f"blocks must give the number of Bottleneck blocks of the 4 stages; got {blocks!r}.")
    c, k = _check_channels(in_channels), check_int(n_classes, "n_classes", minimum=2)

    def build():
        layers: list[nn.Module] = [*_conv_bn_relu(c, 64)]
        c_in = 64
        for stage, (planes, count) in enumerate(zip((64, 128, 256, 512), counts)):
            for b in range(count):
                layers.append(_Bottleneck(c_in, planes, 2 if (b == 0 and stage > 0) else 1))
                c_in = planes * _Bottleneck.expansion
        layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten()]
        return Classifier(nn.Sequential(*layers), nn.Linear(c_in, k))

    return _seeded(build, seed)


class _WideBlock(nn.Module):
    """Post-activation BasicBlock of torrvision/focal_calibration ``Net/wide_resnet.py`` (1x1 conv + BN
    shortcut when the shape changes; no dropout)."""

    def __init__(self, c_in: int, c_out: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(c_in, c_out, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c_out)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c_out)
        self.shortcut = (nn.Sequential(nn.Conv2d(c_in, c_out, 1, stride=stride, bias=False), nn.BatchNorm2d(c_out))
                         if stride != 1 or c_in != c_out else nn.Identity())

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x))


def wide_resnet(depth: int = 26, widen: int = 10, in_channels: int = 3, n_classes: int = 10,
                seed: int | None = None) -> Classifier:
    """Wide-ResNet-depth-widen (Zagoruyko & Komodakis 2016) as in torrvision/focal_calibration
    ``Net/wide_resnet.py``: a 16-channel stem, three stages of (depth-2)/6 post-activation BasicBlocks with
    16k/32k/64k channels, 1x1 projection shortcuts, **no dropout**, global average pooling, a linear layer,
    convolutions initialised N(0, 2/(3*3*out_channels)). WRN-26-10 has 36.48 M parameters (10 classes)."""
    depth = check_int(depth, "depth", minimum=8)
    if (depth - 2) % 6:
        raise ValueError(f"depth must be 6n+2 (e.g. 26, 28); got {depth}.")
    n = (depth - 2) // 6
    kw = check_int(widen, "widen")
    c, k = _check_channels(in_channels), check_int(n_classes, "n_classes", minimum=2)

    return _seeded(lambda: _three_stage_net(c, k, 16, (16 * kw, 32 * kw, 64 * kw), n, _WideBlock), seed)


class _DenseLayer(nn.Module):
    def __init__(self, c_in: int, growth: int):
        super().__init__()
        self.bn1 = nn.BatchNorm2d(c_in)
        self.conv1 = nn.Conv2d(c_in, 4 * growth, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(4 * growth)
        self.conv2 = nn.Conv2d(4 * growth, growth, 3, padding=1, bias=False)

    def forward(self, x):
        out = self.conv1(F.relu(self.bn1(x)))
        out = self.conv2(F.relu(self.bn2(out)))
        return torch.cat([out, x], 1)


class _Transition(nn.Module):
    def __init__(self, c_in: int, c_out: int):
        super().__init__()
        self.bn = nn.BatchNorm2d(c_in)
        self.conv = nn.Conv2d(c_in, c_out, 1, bias=False)

    def forward(self, x):
        return F.avg_pool2d(self.conv(F.relu(self.bn(x))), 2)


def densenet(blocks=(6, 12, 24, 16), growth: int = 32, reduction: float = 0.5, in_channels: int = 3,
             n_classes: int = 10, seed: int | None = None) -> Classifier:
    """DenseNet-BC for 32x32 inputs (Huang et al. 2017) as in torrvision/focal_calibration ``Net/densenet.py``:
    a 3x3 stem with 2k channels, four dense blocks of bottleneck layers (growth k) joined by transitions that
    halve the channels and the resolution, a final BN-ReLU, global average pooling and a linear layer.
    ``blocks=(6, 12, 24, 16)``, ``growth=32`` is DenseNet-121: 6.96 M parameters (10 classes)."""
    counts = [check_int(b, "blocks") for b in blocks]
    g = check_int(growth, "growth")
    c, k = _check_channels(in_channels), check_int(n_classes, "n_classes", minimum=2)

    def build():
        planes = 2 * g
        layers: list[nn.Module] = [nn.Conv2d(c, planes, 3, padding=1, bias=False)]
        for i, count in enumerate(counts):
            for _ in range(count):
                layers.append(_DenseLayer(planes, g))
                planes += g
            if i < len(counts) - 1:
                out = int(math.floor(planes * reduction))
                layers.append(_Transition(planes, out))
                planes = out
        layers += [nn.BatchNorm2d(planes), nn.ReLU(inplace=True), nn.AdaptiveAvgPool2d(1), nn.Flatten()]
        return Classifier(nn.Sequential(*layers), nn.Linear(planes, k))

    return _seeded(build, seed)


# ------------------------------------------------------------------------------------------ the registry

#: Names accepted by :func:`build_model`, with what they build (``<...>`` marks a parameter).
#:
#: :meta hide-value:
MODEL_NAMES = {
    "linear": "softmax regression on the flattened input",
    "linear-nobias": "bias-free softmax regression (Mukhoti et al. 2020, App. B)",
    "mlp": "MLP with two hidden layers of 64 (hidden widths: 'mlp-128-128')",
    "small-cnn": "three conv-BN-ReLU stages of width 16/32/64 ('small-cnn-w<k>' for width k)",
    "resnet<d>": "He et al.'s CIFAR ResNet, d = 6n+2 (resnet8, resnet20, resnet56, resnet110; "
                 "'resnet20-w8' for base width 8)",
    "preresnet<d>": "pre-activation CIFAR ResNet (preresnet56)",
    "resnet50": "focal_calibration's ResNet-50 (Bottleneck [3,4,6,3])",
    "resnet110-bottleneck": "focal_calibration's 'ResNet-110' (Bottleneck [3,4,26,3]; not He et al.'s)",
    "wrn-<d>-<k>": "Wide-ResNet (wrn-26-10)",
    "densenet121": "DenseNet-121 (growth 32)",
}


def model_names() -> str:
    """The accepted model names, for error messages and ``--help``."""
    return "; ".join(f"'{k}' ({v})" for k, v in MODEL_NAMES.items())


_NAME_PATTERNS = (r"linear", r"linear-nobias", r"mlp(?:-\d+)*", r"small-cnn(?:-w\d+)?", r"resnet\d+(?:-w\d+)?",
                  r"preresnet\d+", r"resnet110-bottleneck", r"wrn-\d+-\d+", r"densenet121")


def check_model_name(name) -> str:
    """The normalised (lower-case) model name, or a ValueError listing the valid names."""
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"model name must be a non-empty string; choose from {model_names()}.")
    key = name.strip().lower()
    if not any(re.fullmatch(p, key) for p in _NAME_PATTERNS):
        raise ValueError(f"unknown model {name!r}; choose from {model_names()}.")
    return key


def build_model(name: str, input_shape, n_classes: int, seed: int | None = None) -> nn.Module:
    """The network called ``name`` for inputs of shape ``input_shape`` (without the batch dimension).

    Parameters
    ----------
    name : str
        One of :data:`MODEL_NAMES` (case-insensitive), e.g. ``"resnet20"``, ``"resnet50"``, ``"wrn-26-10"``.
    input_shape : tuple of int
        ``(C, H, W)`` for images (C = 1 or 3) or ``(D,)`` for feature vectors; the linear models and MLPs
        flatten whatever they get, the convolutional ones need images.
    n_classes : int
        Number of classes K >= 2.
    seed : int, optional
        Seed of the initial weights (the global random state is left alone).

    Raises
    ------
    ValueError
        For an unknown name (listing the valid ones) or an input shape the network cannot take.
    """
    key = check_model_name(name)
    shape = tuple(int(s) for s in input_shape)
    n_in = math.prod(shape)
    k = check_int(n_classes, "n_classes", minimum=2)

    def flat(model: nn.Module) -> nn.Module:
        if len(shape) == 1:
            return model
        return nn.Sequential(nn.Flatten(), *model) if isinstance(model, nn.Sequential) else model

    if key in ("linear", "linear-nobias"):
        return linear(n_in, k, bias=key == "linear", seed=seed)
    match = re.fullmatch(r"mlp((?:-\d+)*)", key)
    if match:
        hidden = tuple(int(h) for h in match.group(1).split("-")[1:]) or (64, 64)
        return flat(mlp(n_in, k, hidden=hidden, seed=seed))

    # convolutional networks need (C, H, W)
    if len(shape) != 3 or shape[1] < 8 or shape[2] < 8:
        raise ValueError(f"model {name!r} is convolutional and needs images of shape (C, H, W) with H, W >= 8; "
                         f"got input_shape={shape}. Use 'linear' or 'mlp' for feature vectors.")
    c = shape[0]
    if key == "resnet50":
        return bottleneck_resnet((3, 4, 6, 3), c, k, seed=seed)
    if key == "resnet110-bottleneck":
        return bottleneck_resnet((3, 4, 26, 3), c, k, seed=seed)
    if key == "densenet121":
        return densenet((6, 12, 24, 16), 32, 0.5, c, k, seed=seed)
    if m := re.fullmatch(r"small-cnn(?:-w(\d+))?", key):
        return small_cnn(c, k, width=int(m.group(1) or 16), seed=seed)
    if m := re.fullmatch(r"resnet(\d+)(?:-w(\d+))?", key):
        return cifar_resnet(int(m.group(1)), c, k, width=int(m.group(2) or 16), seed=seed)
    if m := re.fullmatch(r"preresnet(\d+)", key):
        return preact_resnet(int(m.group(1)), c, k, seed=seed)
    m = re.fullmatch(r"wrn-(\d+)-(\d+)", key)
    assert m is not None                       # check_model_name let only the names above and wrn-<d>-<k> through
    return wide_resnet(int(m.group(1)), int(m.group(2)), c, k, seed=seed)
