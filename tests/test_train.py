"""Tests of the minimal training loop (calib.train)."""

import numpy as np
import pytest
import torch

from calib.models import mlp
from calib.train import resolve_device, train_classifier

torch.set_num_threads(1)


def separable(n=400, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 2)).astype(np.float32)
    y = (x[:, 0] + 0.5 * x[:, 1] > 0).astype(np.int64)
    return x, y


@pytest.mark.parametrize("batch_size, optimizer, lr", [(None, "adam", 0.05), (64, "sgd", 0.1)])
def test_training_decreases_the_loss_and_fits(batch_size, optimizer, lr):
    x, y = separable()
    net = mlp(2, 2, hidden=(16,), seed=0)
    net, history = train_classifier(net, x, y, "ce", epochs=60, lr=lr, batch_size=batch_size,
                                    optimizer=optimizer, progress=False)
    assert len(history) == 60
    assert history[-1] < 0.25 * history[0]
    assert not net.training
    with torch.no_grad():
        acc = (net(torch.as_tensor(x)).argmax(dim=1).numpy() == y).mean()
    assert acc > 0.97


def test_training_is_reproducible_and_accepts_callables():
    x, y = separable(200, seed=1)
    runs = []
    for _ in range(2):
        net = mlp(2, 2, hidden=(8,), seed=3)
        _, hist = train_classifier(net, torch.as_tensor(x), y, lambda z, t: torch.nn.functional.cross_entropy(z, t),
                                   epochs=5, lr=0.01, batch_size=32, seed=5, progress=False)
        runs.append(hist)
    assert runs[0] == runs[1]


def test_focal_loss_by_name_and_progress_bar():
    x, y = separable(100)
    _, hist = train_classifier(mlp(2, 2, hidden=(8,), seed=0), x, y, "fl-2", epochs=3, lr=0.01, progress=True)
    assert len(hist) == 3 and all(np.isfinite(hist))


def test_errors():
    x, y = separable(50)
    with pytest.raises(ValueError, match="epochs"):
        train_classifier(mlp(2, 2), x, y, "ce", epochs=0, lr=0.1, progress=False)
    with pytest.raises(ValueError, match="optimizer"):
        train_classifier(mlp(2, 2), x, y, "ce", epochs=1, lr=0.1, optimizer="lbfgs", progress=False)
    with pytest.raises(ValueError, match="one label per row"):
        train_classifier(mlp(2, 2), x, y[:-1], "ce", epochs=1, lr=0.1, progress=False)
    with pytest.raises(ValueError, match="unknown loss"):
        train_classifier(mlp(2, 2), x, y, "hinge", epochs=1, lr=0.1, progress=False)
    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_device("auto").type in ("cpu", "cuda")
    with pytest.raises(ValueError, match="device"):
        resolve_device("gpu0")
