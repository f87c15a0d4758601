"""Networks (torch): small classifiers for the toy problems; the CIFAR networks come later.

A model maps inputs of shape (N, ...) to logits of shape (N, K); it never applies the softmax.
"""

from __future__ import annotations

import torch
from torch import nn

from calib._validate import check_int

__all__ = ["mlp"]


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

    if seed is None:
        return build()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return build()
