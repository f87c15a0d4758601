"""The papers' toy problems as seeded numpy generators: the book's 1-D three-class problem (after
Charoenphakdee et al. 2021), Gaussian mixtures with known posteriors, and Mukhoti et al.'s (2020, App. B)
linear toy, with a separability check.

Generators return numpy arrays: inputs ``x`` (float32, shape (n, d)), integer labels ``y`` (int64, shape (n,))
and, where the truth is known, the true class posterior ``eta`` (float64, shape (n, K)) or the mask of flipped
labels. :mod:`calib.data` re-exports them beside the datasets.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import softmax

from calib._validate import as_float_array, check_int, check_positive

__all__ = ["THREE_CLASS_1D", "gaussian_1d_joint", "gaussian_1d_posterior", "make_gaussian_1d", "LinearToy",
           "make_linear_toy", "separability_through_origin"]

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


# ----------------------------------------------------------------------------------------------------------
# a K-class isotropic Gaussian mixture in d dimensions (chapter 09's CPU stand-in for the image benchmarks)
# ----------------------------------------------------------------------------------------------------------

__all__ += ["gaussian_mixture_means", "make_gaussian_mixture"]


def gaussian_mixture_means(n_classes: int = 10, dim: int = 20, spread: float = 1.0, seed: int = 0) -> np.ndarray:
    """Class means ``mu_k ~ N(0, spread^2 I_d)``, shape (n_classes, dim), from their own seed (so that training,
    validation and test sets drawn with different seeds share them).

    With unit class covariance, ``spread`` sets the overlap: the expected squared distance between two means
    is ``2 d spread^2``. The book's stand-in for Zhou et al. (2025)'s image benchmarks uses K = 10, d = 20.
    """
    k = check_int(n_classes, "n_classes", minimum=2)
    d = check_int(dim, "dim")
    s = check_positive(spread, "spread")
    return np.random.default_rng(seed).standard_normal((k, d)) * s


def make_gaussian_mixture(n: int, means, scale: float = 1.0, priors=None, seed=0):
    """Sample n points of an isotropic Gaussian mixture, ``x | y ~ N(means[y], scale^2 I)``, with true posteriors.

    Parameters
    ----------
    n : int
    means : array_like, shape (K, d)
        Class means, e.g. from :func:`gaussian_mixture_means`.
    scale : float
        Common standard deviation, > 0.
    priors : sequence of float, optional
        Class probabilities; uniform when omitted.
    seed : int or numpy.random.Generator

    Returns
    -------
    x : numpy.ndarray of float32, shape (n, d)
    y : numpy.ndarray of int64, shape (n,)
    eta : numpy.ndarray of float64, shape (n, K)
        The Bayes posterior p(y | x), a softmax of the log joint (exact in the tails).
    """
    n = check_int(n, "n")
    mu = as_float_array(means, "means", ndim=2)
    k = mu.shape[0]
    if k < 2:
        raise ValueError(f"means must have one row per class, at least 2; got shape {mu.shape}.")
    sigma = check_positive(scale, "scale")
    if priors is None:
        pi = np.full(k, 1.0 / k)
    else:
        pi = as_float_array(priors, "priors", ndim=1)
        if pi.shape != (k,) or np.any(pi <= 0) or abs(pi.sum() - 1) > 1e-9:
            raise ValueError(f"priors must be {k} positive numbers summing to 1 (one per class); got {pi}.")
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    y = rng.choice(k, size=n, p=pi).astype(np.int64)
    x = (mu[y] + sigma * rng.standard_normal((n, mu.shape[1]))).astype(np.float32)
    x64 = x.astype(np.float64)
    sq = np.stack([((x64 - m) ** 2).sum(axis=1) for m in mu], axis=1)  # (n, K), one class at a time
    eta = softmax(np.log(pi) - 0.5 * sq / sigma ** 2, axis=1)
    return x, y, eta


# ------------------------------------------------------------------ Mukhoti et al. (2020), App. B toy

@dataclass(frozen=True)
class LinearToy:
    """The two-class, two-dimensional problem of Mukhoti et al. (2020), App. B (see :func:`make_linear_toy`)."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    flipped_train: np.ndarray
    flipped_test: np.ndarray
    centres: np.ndarray
    cluster_class: np.ndarray
    noise: float


def make_linear_toy(n_train: int = 4000, n_test: int = 1000, noise: float = 0.1, half_side: float = 2.0,
                    seed=0, margin: float | None = None) -> LinearToy:
    """Sample the linear-model toy problem of Mukhoti et al. (2020), App. B.

    "Each class [gets] two normally distributed clusters such that the mean of the clusters are linearly
    separable. The mean of the clusters are situated on the vertices of a two-dimensional hypercube of side
    length 4. The standard deviation for each cluster is 1 and the samples are randomly linearly combined
    within each cluster in order to add covariance. Further, for 10% of the data points, the labels were
    flipped. 4000 samples are used for training and 1000 samples are used for testing."

    The wording is that of scikit-learn's ``make_classification`` (``class_sep=2``, ``n_clusters_per_class=2``),
    which this reimplements in numpy: cluster centres at (+-2, +-2), each class on two *adjacent* vertices
    (a side of the square chosen at random, so that the classes are separable by a line through the origin,
    as the bias-free model sigma(w1 x1 + w2 x2) needs), points ``z A_c + centre`` with ``z ~ N(0, I)`` and
    one random matrix ``A_c`` (entries uniform on [-1, 1]) per cluster.

    One difference is deliberate: ``noise`` is the share of labels **actually flipped** (exactly
    ``round(noise * n)`` labels of the n = n_train + n_test points, chosen at random). scikit-learn's
    ``flip_y`` instead re-draws a share of labels at random, so ``flip_y=0.1`` changes only about 5%.

    Parameters
    ----------
    n_train, n_test : int
        Sizes of the two sets (paper: 4000 and 1000).
    noise : float
        Share of flipped labels, in [0, 1/2) (paper: 0.1).
    half_side : float
        Half the side of the square of cluster centres (paper: side 4, so 2).
    seed : int or numpy.random.Generator
    margin : float, optional
        Redraw every point closer than ``margin`` to the line through the origin that separates the two
        classes' centres, or on its wrong side, so that (before any flip) the classes are separable with that
        margin by a model without bias. The paper's Gaussian clusters overlap that line, so even with
        ``noise=0`` its data are not separable and the cross-entropy weights stay finite; this variant
        (not in the paper) shows the unbounded growth.

    Returns
    -------
    LinearToy
        ``x_*`` float32 (n, 2), ``y_*`` int64 in {0, 1}, ``flipped_*`` bool masks, the four ``centres`` and
        the class of each centre.
    """
    n_train, n_test = check_int(n_train, "n_train"), check_int(n_test, "n_test")
    if isinstance(noise, bool) or not isinstance(noise, (int, float)) or not 0 <= noise < 0.5:
        raise ValueError(f"noise is the share of flipped labels and must lie in [0, 0.5); got {noise!r}.")
    s = check_positive(half_side, "half_side")
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    n = n_train + n_test
    centres = np.array([[-s, -s], [-s, s], [s, s], [s, -s]])        # the square, counter-clockwise
    side = int(rng.integers(4))                                      # class 0 = vertices side, side + 1
    cluster_class = np.ones(4, dtype=np.int64)
    cluster_class[[side, (side + 1) % 4]] = 0
    sizes = np.full(4, n // 4)
    sizes[: n % 4] += 1
    if margin is not None:
        margin = check_positive(margin, "margin", allow_zero=True)
        if margin >= s:
            raise ValueError(f"margin must be smaller than half_side={s} (the centres' distance to the line); "
                             f"got {margin}.")
    normal = centres[cluster_class == 1].mean(axis=0) - centres[cluster_class == 0].mean(axis=0)
    normal /= np.linalg.norm(normal)
    xs, ys = [], []
    for c in range(4):
        a = 2 * rng.uniform(size=(2, 2)) - 1
        pts = rng.standard_normal((sizes[c], 2)) @ a + centres[c]
        side = 1 if cluster_class[c] == 1 else -1
        while margin is not None and (bad := (pts @ normal) * side <= margin).any():
            pts[bad] = rng.standard_normal((int(bad.sum()), 2)) @ a + centres[c]
        xs.append(pts)
        ys.append(np.full(sizes[c], cluster_class[c]))
    order = rng.permutation(n)
    x = np.concatenate(xs)[order].astype(np.float32)
    y = np.concatenate(ys)[order].astype(np.int64)
    flipped = np.zeros(n, dtype=bool)
    flipped[rng.choice(n, size=int(round(noise * n)), replace=False)] = True
    y = np.where(flipped, 1 - y, y)
    return LinearToy(x[:n_train], y[:n_train], x[n_train:], y[n_train:], flipped[:n_train], flipped[n_train:],
                     centres, cluster_class, float(noise))


def separability_through_origin(x, y, refine: int = 2001):
    """How separable two-class 2-D data are by a line through the origin (a model without bias).

    Returns ``(errors, margin)``: the fewest training points any line through the origin misclassifies
    (exact: the count changes only where the direction crosses the perpendicular of a point, so it is
    evaluated between consecutive such angles), and the largest smallest signed margin
    ``max_u min_i (2 y_i - 1) u . x_i`` over unit vectors u (> 0 exactly when the data are separable; found
    among those angles and refined on a fine grid around the best).
    """
    x = as_float_array(x, "x", ndim=2)
    if x.shape[1] != 2:
        raise ValueError(f"x must have two columns (2-D points); got shape {x.shape}.")
    sign = np.where(np.asarray(y) == 1, 1.0, -1.0)
    sx = x * sign[:, None]
    phi = np.arctan2(sx[:, 1], sx[:, 0])
    events = np.sort(np.mod(np.concatenate([phi - np.pi / 2, phi + np.pi / 2]), 2 * np.pi))
    gaps = np.diff(np.concatenate([events, events[:1] + 2 * np.pi]))
    mids = events + gaps / 2
    units = np.stack([np.cos(mids), np.sin(mids)], axis=1)
    errors, best_margin, best_angle = len(x), -np.inf, 0.0
    for start in range(0, len(mids), 2048):
        m = sx @ units[start:start + 2048].T                     # (n, chunk) margins
        errors = min(errors, int((m <= 0).sum(axis=0).min()))
        lo = m.min(axis=0)
        if lo.max() > best_margin:
            best_margin, best_angle = float(lo.max()), float(mids[start + int(lo.argmax())])
    fine = best_angle + np.linspace(-np.pi / 90, np.pi / 90, refine)
    local = (sx @ np.stack([np.cos(fine), np.sin(fine)])).min(axis=0)
    return errors, max(best_margin, float(local.max()))
