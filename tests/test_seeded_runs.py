"""Seeded training runs are reproducible: what chapters 04 and 05 rely on to print the same numbers in every build
and to pair runs of different losses on the same seeds."""

import numpy as np
import torch

from calib.data import make_linear_toy
from calib.train import logistic_gradient_descent, train

SMALL = dict(data="digits", model="mlp-32-32", epochs=3, lr=0.1, batch_size=64, augment="none")


def _history(run):
    return [{k: v for k, v in ep.items() if k not in ("train_seconds", "images_per_s")} for ep in run.epochs]


def test_same_seed_same_history_different_seed_different(tmp_path):
    a = train(out=tmp_path / "a", progress=False, loss="ce", seed=4, **SMALL)
    b = train(out=tmp_path / "b", progress=False, loss="ce", seed=4, **SMALL)
    c = train(out=tmp_path / "c", progress=False, loss="ce", seed=5, **SMALL)
    assert _history(a) == _history(b)
    np.testing.assert_array_equal(a.logits()["test_logits"], b.logits()["test_logits"])
    assert a.series("test", "nll")[-1] != c.series("test", "nll")[-1]


def test_losses_on_one_seed_share_the_initial_weights(tmp_path):
    """Pairing CE and focal-loss runs by seed pairs identical starting points (the same initial network)."""
    from calib.data import load_dataset
    from calib.models import build_model

    ds = load_dataset("digits")
    nets = [build_model("mlp-32-32", ds.input_shape, ds.n_classes, seed=7) for _ in range(2)]
    for p, q in zip(nets[0].parameters(), nets[1].parameters()):
        torch.testing.assert_close(p, q, rtol=0, atol=0)


def test_linear_toy_runs_are_reproducible():
    toys = [make_linear_toy(noise=0.1, seed=s, n_train=400, n_test=100) for s in (0, 0, 1)]
    fits = [logistic_gradient_descent(t.x_train, t.y_train, gamma=1.0, iterations=50)["final_w"] for t in toys]
    np.testing.assert_array_equal(fits[0], fits[1])
    assert not np.allclose(fits[0], fits[2])
