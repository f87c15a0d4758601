"""Soft binning and soft uncertainty of Karandikar et al. (2021), *Soft Calibration Objectives*, in numpy.

The float64 reference for the torch losses of ``calib.losses`` (``soft_binned_ece``, ``s_avuc``) and the
closed forms the book checks them against:

- :func:`bin_centres`, :func:`log_soft_membership`, :func:`soft_membership`: the soft bin membership
  :math:`u^*_{M,T}(c) = \\mathrm{softmax}_j(-(c - \\xi_j)^2 / T)` (Sec. 4.1, the unnumbered equation before
  Eq. 11) with centres :math:`\\xi_j = (j - 1/2)/M`, computed as a log-softmax so that nothing underflows;
- :func:`membership_derivative` (:math:`\\partial u_j/\\partial c = \\frac2T u_j (\\xi_j - \\bar\\xi(c))`),
  :func:`membership_modes` (where each :math:`u_j` peaks: not at :math:`\\xi_j`, and nowhere inside [0, 1]
  for the edge bins), :func:`edge_distance` and :func:`hard_limit_temperature` (how small T must be for
  soft binning to be hard binning);
- :func:`soft_binned_ece`: SB-ECE\\ :sub:`bin,p` (Eq. 11) and SB-ECE\\ :sub:`lb,p` (Eq. 12) of confidences and
  outcomes, with optional sample weights, so that population values are quadratures;
  :func:`soft_binned_ece_gradient`: its derivative in the confidences, in closed form;
- :func:`soft_uncertainty` and :func:`soft_uncertainty_derivative`: :math:`t_{\\kappa,T}(h^*)` (Sec. 4.2);
- populations for App. H: :func:`uniform_calibrated_population` (c ~ U(lo, hi), E[a | c] = c) and
  :func:`binary_tempered_population` / :func:`binary_tempered_nll` (truth sigma(z), z ~ N(0, s^2), model
  sigma(z / tau)), as quadrature nodes, weights, confidences and conditional accuracies.
"""

from __future__ import annotations

import numpy as np
from scipy.special import expit, log_expit, log_softmax, logit

from calib._validate import as_float_array, check_choice, check_int, check_length, check_positive

__all__ = [
    "bin_centres",
    "binary_tempered_nll",
    "binary_tempered_population",
    "edge_distance",
    "hard_limit_temperature",
    "log_soft_membership",
    "membership_derivative",
    "membership_modes",
    "soft_binned_ece",
    "soft_binned_ece_gradient",
    "soft_membership",
    "soft_uncertainty",
    "soft_uncertainty_derivative",
    "uniform_calibrated_population",
]

NORMS = ("l1", "l2")
ESTIMATORS = ("bin", "label")


def _confidences(conf, name: str = "conf") -> np.ndarray:
    c = as_float_array(conf, name)
    if c.size and (c.min() < 0 or c.max() > 1):
        raise ValueError(f"{name} must lie in [0, 1] (confidences); found values from {c.min():.4g} to {c.max():.4g}.")
    return c


def bin_centres(n_bins: int = 15) -> np.ndarray:
    r"""Centres :math:`\xi_j = (j - \frac12)/M`, j = 1..M, of M equal-width bins on [0, 1].

    The paper never writes them down (Sec. 4.1 says only "equal-width binning"); these are the anchors of
    its released Eq. 11 code, and the only choice whose T -> 0 limit is the equal-width ECE on [0, 1].
    """
    m = check_int(n_bins, "n_bins")
    return (np.arange(m) + 0.5) / m


def log_soft_membership(conf, n_bins: int = 15, temperature: float = 0.01, centres=None) -> np.ndarray:
    r"""log :math:`u^*_{M,T,j}(c)`, shape (..., M): a log-softmax of :math:`g_j(c) = -(c - \xi_j)^2/T`.

    Karandikar et al. (2021), Sec. 4.1. The log-sum-exp form never underflows: a plain ``exp`` of
    :math:`g_j` is 0 in float64 once :math:`(c - \xi_j)^2/T > 745`, for every j when T is small.

    Parameters
    ----------
    conf : array_like
        Confidences in [0, 1], any shape.
    n_bins : int
        Number of bins M.
    temperature : float
        Soft-binning temperature T > 0.
    centres : array_like, optional
        Bin centres (default :func:`bin_centres`); e.g. the released label-binned code's
        ``midpoints(linspace(1/K, 1, M + 1))``.
    """
    c = _confidences(conf)
    t = check_positive(temperature, "temperature")
    xi = bin_centres(n_bins) if centres is None else as_float_array(centres, "centres", ndim=1)
    g = -((c[..., None] - xi) ** 2) / t
    return log_softmax(g, axis=-1)


def soft_membership(conf, n_bins: int = 15, temperature: float = 0.01, centres=None) -> np.ndarray:
    """:math:`u^*_{M,T}(c)`, shape (..., M), rows summing to 1 (see :func:`log_soft_membership`)."""
    return np.exp(log_soft_membership(conf, n_bins, temperature, centres))


def membership_derivative(conf, n_bins: int = 15, temperature: float = 0.01) -> np.ndarray:
    r""":math:`\partial u_j / \partial c = \frac{2}{T} u_j(c)\,(\xi_j - \bar\xi(c))`, shape (..., M).

    :math:`\bar\xi(c) = \sum_k u_k(c)\xi_k` is the membership-weighted mean centre, so the sign of the
    derivative is that of :math:`\xi_j - \bar\xi(c)` (the book's closed form; ``calib.symbolic.soft_binning``).
    """
    u = soft_membership(conf, n_bins, temperature)
    xi = bin_centres(n_bins)
    xi_bar = u @ xi
    return 2.0 / temperature * u * (xi - xi_bar[..., None])


def membership_modes(n_bins: int = 15, temperature: float = 0.01, tol: float = 1e-15) -> np.ndarray:
    r"""Where each :math:`u_j` peaks on [0, 1]: the root of :math:`\bar\xi(c) = \xi_j`, or NaN if none.

    :math:`\bar\xi` increases strictly (:math:`d\bar\xi/dc = \frac2T \mathrm{Var}_u(\xi) > 0`), so
    :math:`u_j` has at most one stationary point, a maximum. It is interior exactly when
    :math:`\bar\xi(0) < \xi_j < \bar\xi(1)`; otherwise :math:`u_j` is monotone on [0, 1] (the edge bins
    always: :math:`\bar\xi(c) > \xi_1` and :math:`< \xi_M` for every c), and the entry is NaN. Desideratum
    (i) of Sec. 4.1 asks for the mode at :math:`\xi_j`. All bins are bisected together (vectorised) to
    ``tol``.

    Returns
    -------
    ndarray, shape (M,)
    """
    m = check_int(n_bins, "n_bins")
    xi = bin_centres(m)

    def xi_bar(c):
        return soft_membership(c, m, temperature) @ xi

    lo, hi = np.zeros(m), np.ones(m)
    inside = (xi_bar(lo) < xi) & (xi < xi_bar(hi))
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        below = xi_bar(mid) < xi
        lo = np.where(below, mid, lo)
        hi = np.where(below, hi, mid)
        if np.max(hi - lo) <= tol:
            break
    return np.where(inside, 0.5 * (lo + hi), np.nan)


def edge_distance(conf, n_bins: int = 15) -> np.ndarray:
    r"""Distance :math:`\delta` of each confidence to the nearest *interior* bin edge j/M, j = 1..M-1.

    For c at distance :math:`\delta` from edge j/M, the two bins next to it have
    :math:`\log(u_j/u_{j+1}) = \frac{2}{MT}(j/M - c)`, so the nearer bin holds at most
    :math:`1/(1 + e^{-2\delta/(MT)})` of the pair's mass (:func:`hard_limit_temperature`).
    """
    c = _confidences(conf)
    m = check_int(n_bins, "n_bins")
    if m == 1:
        return np.full(c.shape, np.inf)
    j = np.clip(np.rint(c * m), 1, m - 1)
    return np.abs(c - j / m)


def hard_limit_temperature(delta, n_bins: int = 15, tol: float = 1e-6) -> np.ndarray:
    r"""The largest T at which a confidence at distance :math:`\delta` from an edge keeps all but ``tol``
    of its two-bin membership in its own bin: :math:`T = 2\delta / (M \log((1 - tol)/tol))`.

    Soft binning converges to hard binning as T -> 0 (Fig. 3) but not uniformly: at every T some
    confidences near an edge are split. On a sample, the hard limit needs
    :math:`T \ll 2\delta_{\min}/M` with :math:`\delta_{\min}` the smallest :func:`edge_distance`.
    """
    d = as_float_array(delta, "delta")
    m = check_int(n_bins, "n_bins")
    if not 0 < tol < 0.5:
        raise ValueError(f"tol must be in (0, 0.5); got {tol}.")
    return 2 * d / (m * np.log((1 - tol) / tol))


def _weights(weights, n: int) -> np.ndarray:
    if weights is None:
        return np.full(n, 1.0 / n)
    w = as_float_array(weights, "weights", ndim=1)
    check_length(w, n, "weights", of="confidences")
    if np.any(w < 0) or not w.sum() > 0:
        raise ValueError("weights must be non-negative with a positive sum (sample or quadrature weights).")
    return w / w.sum()


def _check_pair(conf, correct, weights):
    c = _confidences(conf)
    if c.ndim != 1 or c.size == 0:
        raise ValueError(f"conf must be a non-empty 1-D array of confidences; got shape {c.shape}.")
    a = as_float_array(correct, "correct", ndim=1)
    check_length(a, c.shape[0], "correct", of="confidences")
    if a.min() < 0 or a.max() > 1:
        raise ValueError("correct must hold outcomes 0/1 (or conditional accuracies in [0, 1]).")
    return c, a, _weights(weights, c.shape[0])


def soft_binned_ece(conf, correct, n_bins: int = 15, temperature: float = 0.01, norm: str = "l1",
                    estimator: str = "bin", weights=None, centres=None) -> float:
    r"""Soft-binned ECE of confidences and outcomes (Karandikar et al. 2021, Eqs. 8-12), in float64.

    With soft memberships :math:`u_{ij} = u^*_{M,T,j}(c_i)` and sample weights :math:`w_i` (1/N by default):
    :math:`S_j = \sum_i w_i u_{ij}` (Eq. 8, as a fraction of the sample), :math:`C_j = \sum_i w_i u_{ij} c_i / S_j`
    (Eq. 9), :math:`A_j = \sum_i w_i u_{ij} a_i / S_j` (Eq. 10), and

    - ``estimator="bin"``: :math:`\text{SB-ECE}_{bin,p} = (\sum_j S_j |A_j - C_j|^p)^{1/p}` (Eq. 11);
    - ``estimator="label"``: :math:`\text{SB-ECE}_{lb,p} = (\sum_i w_i \sum_j u_{ij} |A_j - c_i|^p)^{1/p}` (Eq. 12).

    Bins with :math:`S_j = 0` (possible only when the memberships underflow) carry no weight.

    Parameters
    ----------
    conf : array_like, shape (N,)
        Confidences :math:`c_i` in [0, 1].
    correct : array_like, shape (N,)
        Outcomes :math:`a_i` (0/1), or conditional accuracies :math:`E[a \mid c_i]` in [0, 1]: the value
        depends on the :math:`a_i` only through the :math:`A_j`, so with quadrature weights this is the
        population (N -> infinity) value of App. H.
    n_bins, temperature : int, float
        M and T.
    norm : {"l1", "l2"}
        p = 1 or 2.
    estimator : {"bin", "label"}
    weights : array_like, shape (N,), optional
        Non-negative sample (or quadrature) weights, normalised to sum to 1.
    centres : array_like, optional
        Bin centres (default :math:`(j - 1/2)/M`).

    Returns
    -------
    float
    """
    c, a, w = _check_pair(conf, correct, weights)
    check_choice(norm, "norm", NORMS)
    check_choice(estimator, "estimator", ESTIMATORS)
    u = soft_membership(c, n_bins, temperature, centres)
    wu = w[:, None] * u
    s = wu.sum(axis=0)
    full = s > 0
    p = 1 if norm == "l1" else 2
    if estimator == "bin":
        gap = (wu.T @ (a - c))[full] / s[full]            # A_j - C_j
        return float((s[full] @ np.abs(gap) ** p) ** (1 / p))
    acc = np.zeros_like(s)
    acc[full] = (wu.T @ a)[full] / s[full]
    return float(np.sum(wu * np.abs(acc[None, :] - c[:, None]) ** p) ** (1 / p))


def soft_binned_ece_gradient(conf, correct, n_bins: int = 15, temperature: float = 0.01) -> np.ndarray:
    r"""Derivative of :math:`\text{SB-ECE}_{bin,2}^2` in each confidence :math:`c_i` (outcomes fixed), shape (N,).

    With :math:`G_j = A_j - C_j` and :math:`u'_{ij} = \partial u_j/\partial c\,(c_i)`
    (:func:`membership_derivative`), for N equally weighted samples:

    .. math:: \frac{\partial\,\text{SB-ECE}_{bin,2}^2}{\partial c_i}
              = \frac1N \sum_j \Big[-2\,u_{ij} G_j + u'_{ij}\big(2 G_j (a_i - c_i) - G_j^2\big)\Big].

    The first term moves :math:`c_i` towards the accuracies of its bins, as the hard ECE's gradient does
    (:math:`-2 G_{b(i)}/N`); the second moves the sample between bins, and is what soft binning adds.
    (The book's derivation, ``calib.symbolic.soft_binning``.)
    """
    c, a, _ = _check_pair(conf, correct, None)
    n = c.shape[0]
    u = soft_membership(c, n_bins, temperature)
    du = membership_derivative(c, n_bins, temperature)
    s = u.sum(axis=0)
    full = s > 0
    g = np.zeros_like(s)
    g[full] = (u.T @ (a - c))[full] / s[full]
    return (-2 * u @ g + (du * (2 * g[None, :] * (a - c)[:, None] - g[None, :] ** 2)).sum(axis=1)) / n


def soft_uncertainty(h_star, kappa: float = 0.5, temperature: float = 1.0) -> np.ndarray:
    r"""Soft uncertainty :math:`t_{\kappa,T}(h^*) =
    \mathrm{logistic}\big(\frac1T\log\frac{h^*(1-\kappa)}{(1-h^*)\kappa}\big)`.

    Karandikar et al. (2021), Sec. 4.2, of the normalised entropy :math:`h^* = h/\log K \in [0, 1]`. Computed
    as ``expit((logit(h*) - logit(kappa)) / T)``, which gives the limits 0 at h* = 0 and 1 at h* = 1 exactly.
    Equivalently :math:`x^{1/T}/(1 + x^{1/T})` with :math:`x = h^*(1-\kappa)/((1-h^*)\kappa)`.
    """
    h = as_float_array(h_star, "h_star")
    if h.size and (h.min() < 0 or h.max() > 1):
        raise ValueError("h_star must lie in [0, 1] (entropy divided by log K).")
    k = check_positive(kappa, "kappa")
    if k >= 1:
        raise ValueError(f"kappa must be in (0, 1) (a normalised-entropy threshold); got {kappa}.")
    t = check_positive(temperature, "temperature")
    with np.errstate(divide="ignore"):
        return expit((logit(h) - logit(k)) / t)


def soft_uncertainty_derivative(h_star, kappa: float = 0.5, temperature: float = 1.0) -> np.ndarray:
    r""":math:`\partial t_{\kappa,T}/\partial h^* = t(1-t) / (T\,h^*(1-h^*))`, positive on (0, 1)."""
    t = soft_uncertainty(h_star, kappa, temperature)
    h = as_float_array(h_star, "h_star")
    with np.errstate(divide="ignore", invalid="ignore"):
        return t * (1 - t) / (temperature * h * (1 - h))


_ORDER = 8
_GL_X, _GL_W = np.polynomial.legendre.leggauss(_ORDER)


def _composite_gauss(lo: float, hi: float, n_nodes: int):
    """Nodes and weights of composite 8-point Gauss-Legendre quadrature on [lo, hi], about n_nodes nodes.

    (One Gauss-Legendre rule of thousands of nodes costs seconds to set up; panels of 8 cost nothing and are
    as accurate for the smooth integrands here.)
    """
    panels = max(1, check_int(n_nodes, "n_nodes", minimum=2) // _ORDER)
    edges = np.linspace(lo, hi, panels + 1)
    half = np.diff(edges)[:, None] / 2
    x = (edges[:-1, None] + half) + half * _GL_X
    w = half * _GL_W
    return x.ravel(), w.ravel()


def uniform_calibrated_population(lo: float = 0.5, hi: float = 1.0, n_nodes: int = 4000):
    r"""A perfectly calibrated population, c ~ U(lo, hi) and E[a | c] = c, as composite Gauss-Legendre quadrature.

    Returns ``(conf, acc, weights)``: pass them to :func:`soft_binned_ece` (``correct=acc``,
    ``weights=weights``) for the N -> infinity value of App. H, Prop. 1.
    """
    if not 0 <= lo < hi <= 1:
        raise ValueError(f"need 0 <= lo < hi <= 1; got lo={lo}, hi={hi}.")
    c, w = _composite_gauss(lo, hi, n_nodes)
    return c, c.copy(), w / w.sum()


def _half_normal_nodes(scale: float, n_nodes: int):
    """Quadrature nodes and weights for r = |z|, z ~ N(0, scale^2), on [0, 12 scale]."""
    s = check_positive(scale, "scale")
    r, w = _composite_gauss(0.0, 12 * s, n_nodes)
    w = w * np.sqrt(2 / np.pi) / s * np.exp(-0.5 * (r / s) ** 2)
    return r, w / w.sum()


def binary_tempered_population(tau: float, scale: float = 3.0, n_nodes: int = 4000):
    r"""The binary population of the book's App. H checks, for the model :math:`\sigma(z/\tau)`.

    Truth: :math:`P(y = 1 \mid z) = \sigma(z)` with :math:`z \sim N(0, s^2)`; model: :math:`\sigma(z/\tau)`
    (:math:`\tau = 1` is the truth, :math:`\tau < 1` over-confident). The top-label confidence is
    :math:`c = \sigma(|z|/\tau)` and its conditional accuracy :math:`E[a \mid c] = \sigma(|z|)`, whatever
    :math:`\tau`. Returns ``(conf, acc, weights)`` on quadrature nodes of :math:`|z|`.
    """
    t = check_positive(tau, "tau")
    r, w = _half_normal_nodes(scale, n_nodes)
    return expit(r / t), expit(r), w


def binary_tempered_nll(tau: float, scale: float = 3.0, n_nodes: int = 4000) -> float:
    r"""Population NLL of the model :math:`\sigma(z/\tau)` under the truth :math:`\sigma(z)`, z ~ N(0, s^2).

    :math:`E[-\sigma(z)\log\sigma(z/\tau) - \sigma(-z)\log\sigma(-z/\tau)]`, minimised at :math:`\tau = 1`
    (the log loss is strictly proper).
    """
    t = check_positive(tau, "tau")
    r, w = _half_normal_nodes(scale, n_nodes)
    return float(-(w @ (expit(r) * log_expit(r / t) + expit(-r) * log_expit(-r / t))))
