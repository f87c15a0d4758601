"""Datasets: synthetic generators for the papers' toy problems (numpy, seeded).

A generator returns numpy arrays: inputs ``x`` (float32, shape (n, d)), integer labels ``y`` (int64, shape
(n,)) and, for synthetic problems, the true class posterior ``eta`` (float64, shape (n, K)), so that an
estimate can be compared with what it estimates.
"""

from __future__ import annotations

import numpy as np
from scipy.special import softmax

from calib._validate import as_float_array, check_int, check_positive

__all__ = ["THREE_CLASS_1D", "gaussian_1d_joint", "gaussian_1d_posterior", "make_gaussian_1d"]

#: The 1-D, three-class problem of the book's reconstruction of Charoenphakdee et al. (2021), Sec. 5.2 and
#: Fig. 3 (the paper shows its distribution only as a figure): equal priors, x | y ~ N(mu_y, 1).
THREE_CLASS_1D = {"means": (-1.5, 0.0, 1.5), "scale": 1.0, "priors": (1 / 3, 1 / 3, 1 / 3)}


def _check_mixture(means, scale, priors):
    mu = as_float_array(means, "means", ndim=1)
    if mu.size < 2:
        raise ValueError(f"means must hold one mean per class, at least 2; got {mu.size}.")
    sigma = check_positive(scale, "scale")
    if priors is None:
        pi = np.full(mu.size, 1.0 / mu.size)
    else:
        pi = as_float_array(priors, "priors", ndim=1)
        if pi.shape != mu.shape or np.any(pi <= 0) or abs(pi.sum() - 1) > 1e-9:
            raise ValueError(f"priors must be {mu.size} positive numbers summing to 1 (one per mean); got {pi}.")
    return mu, sigma, pi


def _log_joint(x: np.ndarray, mu: np.ndarray, sigma: float, pi: np.ndarray) -> np.ndarray:
    x = x.reshape(-1, 1).astype(np.float64)
    return np.log(pi) - 0.5 * ((x - mu) / sigma) ** 2 - np.log(sigma * np.sqrt(2 * np.pi))


def gaussian_1d_joint(x, means=THREE_CLASS_1D["means"], scale=THREE_CLASS_1D["scale"], priors=None) -> np.ndarray:
    """The joint density p(x, y) = pi_y N(x; mu_y, scale^2) at the points ``x``, shape (n, K).

    Summing over the columns gives the marginal p(x) (Fig. 3a of Charoenphakdee et al. 2021).
    """
    mu, sigma, pi = _check_mixture(means, scale, priors)
    return np.exp(_log_joint(as_float_array(x, "x"), mu, sigma, pi))


def gaussian_1d_posterior(x, means=THREE_CLASS_1D["means"], scale=THREE_CLASS_1D["scale"], priors=None) -> np.ndarray:
    """The class posterior eta_y(x) = p(y | x) of the 1-D Gaussian mixture at the points ``x``, shape (n, K).

    Computed by Bayes' rule in log space (a softmax of the log joint), so it is accurate far in the tails.
    """
    mu, sigma, pi = _check_mixture(means, scale, priors)
    return softmax(_log_joint(as_float_array(x, "x"), mu, sigma, pi), axis=1)


def make_gaussian_1d(n: int, means=THREE_CLASS_1D["means"], scale=THREE_CLASS_1D["scale"], priors=None, seed=0):
    """Sample n points of a 1-D Gaussian mixture classification problem, with their true posteriors.

    ``y ~ Categorical(priors)`` (uniform by default), ``x | y ~ N(means[y], scale^2)``. The defaults are
    :data:`THREE_CLASS_1D`, the book's reconstruction of the synthetic problem of Charoenphakdee et al.
    (2021), Sec. 5.2 / Fig. 3, whose exact distribution the paper gives only as a plot.

    Parameters
    ----------
    n : int
        Number of samples.
    means : sequence of float
        One mean per class (K = len(means)).
    scale : float
        Common standard deviation, > 0.
    priors : sequence of float, optional
        Class probabilities; uniform when omitted.
    seed : int or numpy.random.Generator
        Seed of ``numpy.random.default_rng`` (or a generator, which is advanced).

    Returns
    -------
    x : numpy.ndarray of float32, shape (n, 1)
    y : numpy.ndarray of int64, shape (n,)
    eta : numpy.ndarray of float64, shape (n, K)
        The Bayes posterior p(y | x) at each sampled x.
    """
    n = check_int(n, "n")
    mu, sigma, pi = _check_mixture(means, scale, priors)
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    y = rng.choice(mu.size, size=n, p=pi).astype(np.int64)
    x = (mu[y] + sigma * rng.standard_normal(n)).astype(np.float32)
    eta = softmax(_log_joint(x, mu, sigma, pi), axis=1)
    return x.reshape(-1, 1), y, eta
