"""Chapter 04's experiment rerun at one setting: the numbers behind its three conclusions, per draw of the data.

The chapter's exercises rerun it at another label noise, gamma, square or set of draws; their solutions and the
answer key (``calib_book.answers``) both call :func:`rerun_linear_toy`, so the key checks what the solutions
compute, one implementation for both.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
from scipy.special import expit

from calib.data import make_linear_toy
from calib.train import logistic_gradient_descent

__all__ = ["rerun_linear_toy"]


def rerun_linear_toy(noise: float = 0.1, gamma: float = 1.0, half_side: float = 2.0, seeds: Iterable[int] = range(5),
                     lr: float = 0.5, iterations: int = 500) -> dict[str, np.ndarray]:
    """Cross-entropy and focal loss trained by full-batch gradient descent on the linear toy problem of Mukhoti
    et al. (2020), App. B, once per draw, and the numbers each of chapter 04's conclusions rests on.

    Parameters
    ----------
    noise, half_side
        As for :func:`calib.toy_data.make_linear_toy`: the share of labels flipped, and half the side of the square
        of cluster centres (the paper's: 0.1 and 2).
    gamma : float
        Focal loss's gamma (the paper's: 1); cross-entropy is gamma = 0.
    seeds : iterable of int
        One draw of the data per seed.
    lr, iterations
        Step size and number of steps of :func:`calib.small_training.logistic_gradient_descent`, from w = 0.

    Returns
    -------
    dict of str to ndarray, each of shape (draws,) except ``change``
        ``ratio`` ||w_CE|| / ||w_FL||; ``cosine`` between w_CE and w_FL; ``change`` the largest relative change of
        a weight norm over the second half of the steps (a float: near 0 when the runs have converged);
        ``above_ce``, ``above_fl`` the share of each loss's misclassified test points with confidence above
        0.9; ``median_ce``, ``median_fl`` their median confidence.
    """
    data = [make_linear_toy(noise=noise, seed=s, half_side=half_side) for s in seeds]
    fit = logistic_gradient_descent(np.stack([d.x_train for d in data for _ in range(2)]),
                                    np.stack([d.y_train for d in data for _ in range(2)]),
                                    gamma=[0.0, gamma] * len(data), lr=lr, iterations=iterations,
                                    record_every=iterations // 2)
    w = fit["final_w"].reshape(len(data), 2, 2)                  # (draw, CE/FL, weight)
    norms = fit["weight_norm"]                                   # (problem, record): start, half-way, end
    out = dict(ratio=np.linalg.norm(w[:, 0], axis=1) / np.linalg.norm(w[:, 1], axis=1),
               cosine=np.einsum("ij,ij->i", w[:, 0], w[:, 1]) / np.linalg.norm(w, axis=2).prod(axis=1),
               change=np.abs(norms[:, -1] - norms[:, -2]).max() / norms[:, -1].min())
    for k, name in enumerate(("ce", "fl")):
        conf = [_mistake_confidences(d, w[i, k]) for i, d in enumerate(data)]
        out[f"above_{name}"] = np.array([(c > 0.9).mean() for c in conf])
        out[f"median_{name}"] = np.array([np.median(c) for c in conf])
    return out


def _mistake_confidences(data, w: np.ndarray) -> np.ndarray:
    """The confidence sigma(|w.x|) of each misclassified test point of ``data``."""
    z = data.x_test @ w
    return expit(np.abs(z))[(z > 0) != data.y_test]
