"""Reweighted risks and selective classification: the checks behind chapter 09 (numpy, float64).

Zhou, Gruber, Popordanoska & Blaschko (2025), *Revisiting Reweighted Risk for Calibration: AURC, Focal and
Inverse Focal Loss*. The losses themselves are in ``calib.losses`` (torch: ``inverse_focal_loss``,
``dual_focal_loss``, ``selective_au_loss``, ``au_weights``) and the selective-classification metrics in
:mod:`calib.metrics` (``confidence_score``, ``risk_coverage_curve``, ``aurc``). This module holds what the
chapter needs to check the paper's statements:

- the supremum over binning schemes of the binned ECE and cwECE (Lemma 4.1, Prop. 4.3), attained by
  singleton bins, and the "abstain" maps of Props. 4.2 and 4.4;
- the hierarchy of Prop. 4.5 on a discrete population, printed and corrected;
- the population weight beta of Prop. 4.6 with and without the 1/kappa the proof drops, and the smoothed
  histogram CDF of Eq. 15 in numpy;
- the inverse-focal gradient (App. C.2, sign corrected), its positive-gradient threshold 1/W(1/e), and
  the three readings of the dual focal weight (App. C.3);
- a free-logit toy showing that the AU loss is proper with detached weights and not with the gradient of
  Eq. 27;
- the paper's Tables 1, 2 and App. Tables 2-4, transcribed, for the consistency checks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.special import lambertw, log_expit

from calib._validate import (
    as_float_array,
    as_labels,
    as_probs_labels_top,
    as_scores,
    check_choice,
    check_int,
    check_length,
    check_positive,
    to_numpy,
)
from calib.focal.numerics import check_gamma
from calib.published.tables import ZHOU2025_METHODS, ZHOU2025_ROWS, zhou2025_tables

__all__ = [
    "DUAL_FOCAL_VARIANTS",
    "Hierarchy",
    "PropernessToy",
    "beta_population",
    "calibration_hierarchy",
    "cwece_abstain_map",
    "dual_focal_weight",
    "ece_abstain_map",
    "inverse_focal_dp",
    "inverse_focal_dp_printed",
    "inverse_focal_gamma_threshold",
    "inverse_focal_positive_interval",
    "paper_tables",
    "properness_toy",
    "smoothed_cdf",
    "sup_binned_brute_force",
    "sup_binned_cwece",
    "sup_binned_ece",
]


# ----------------------------------------------------------------------------------------------------------
# Lemma 4.1 and Props. 4.2-4.4: the supremum over binning schemes and the "abstain" maps
# ----------------------------------------------------------------------------------------------------------

def sup_binned_ece(probs, labels, predictions=None) -> float:
    r"""The supremum of the binned top-label ECE over all partitions of the samples (Zhou et al. 2025, Lemma 4.1).

    A binning scheme B of Def. 3.6 is a partition of the sample *indices* into bins. By the triangle
    inequality, :math:`|\sum_{i \in I}(a_i - c_i)| \le \sum_{i \in I} |a_i - c_i|`, so splitting a bin never
    lowers the ECE and the supremum is attained by singleton bins:

    .. math:: \sup_B \widehat{\mathrm{ECE}}_B = \frac1n \sum_i |1[\hat y_i = y_i] - \max_c p_{ic}|.

    Parameters
    ----------
    probs : array_like, shape (N, K)
    labels : array_like, shape (N,)
    predictions : array_like of int, shape (N,), optional
        The predicted classes; default the argmax (first maximum). Needed when a row is a tie, e.g. the
        uniform rows of :func:`ece_abstain_map`, whose prediction is kept from the original model.

    Returns
    -------
    float
    """
    p, y, pred, conf = as_probs_labels_top(probs, labels)
    if predictions is not None:
        pred = as_labels(predictions, "predictions", n=p.shape[0], n_classes=p.shape[1])
    return float(np.mean(np.abs((pred == y) - conf)))


def sup_binned_cwece(probs, labels) -> float:
    r"""The supremum of the binned class-wise ECE over all class-wise partitions (Zhou et al. 2025, Prop. 4.3).

    As for :func:`sup_binned_ece`, singleton bins attain it (Eqs. 20-21):
    :math:`\frac{1}{nk} \sum_i \sum_c |1[y_i = c] - p_{ic}| = \frac{1}{nk}\sum_i 2(1 - p_{i, y_i})`.
    """
    p, y, _, _ = as_probs_labels_top(probs, labels)
    n, k = p.shape
    return float(2.0 * np.sum(1.0 - p[np.arange(n), y]) / (n * k))


def _set_partitions(items: list):
    """Every partition of ``items`` into non-empty blocks (Bell(n) of them; for small n only)."""
    if not items:
        yield []
        return
    first, rest = items[0], items[1:]
    for part in _set_partitions(rest):
        for j in range(len(part)):
            yield part[:j] + [[first] + part[j]] + part[j + 1:]
        yield [[first]] + part


def sup_binned_brute_force(probs, labels, max_n: int = 8) -> tuple[float, float]:
    r"""The suprema of Lemma 4.1 and Prop. 4.3 by enumerating every binning scheme (small n only).

    A reference for :func:`sup_binned_ece` and :func:`sup_binned_cwece` that does not use the singleton
    argument: the top-label ECE of Def. 3.6, :math:`\sum_b \frac{n_b}{n}|\mathrm{acc}_b - \mathrm{conf}_b|`, is
    maximised over all partitions of the sample indices, and the class-wise ECE of Eq. 18 over a partition per
    class (the classes' terms are independent, so each is maximised on its own). Predictions are the argmax
    (first maximum).

    Returns
    -------
    (sup_ece, sup_cwece) : tuple of float
    """
    p, y, pred, conf = as_probs_labels_top(probs, labels)
    n, k = p.shape
    if n > max_n:
        raise ValueError(f"brute force enumerates Bell(n) partitions; n = {n} exceeds max_n = {max_n}.")
    parts = list(_set_partitions(list(range(n))))
    correct = (pred == y).astype(np.float64)

    def best(a, c):  # max over partitions of sum_b |sum_{i in b} (a_i - c_i)| / n
        d = (a - c).tolist()
        return max(sum(abs(sum(d[i] for i in b)) for b in part) for part in parts) / n

    sup_ece = best(correct, conf)
    sup_cw = sum(best((y == c).astype(np.float64), p[:, c]) for c in range(k)) / k
    return sup_ece, sup_cw


def ece_abstain_map(probs, accept):
    r"""Prop. 4.2's map: one-hot where the CSF accepts (:math:`g \ge \tau`), uniform :math:`1/k` where it abstains.

    "Apart from this modification, f' is identical to f" cannot hold on the simplex: a maximum of 1 forces
    the one-hot vector and a maximum of 1/k the uniform one. The predicted class is kept (the one-hot
    vector sits on the original argmax; the uniform row keeps the original prediction, which breaks the tie
    as Prop. 4.2 needs: with the first-index argmax a uniform row could become "correct").

    Parameters
    ----------
    probs : array_like, shape (N, K)
    accept : array_like of bool, shape (N,)
        :math:`g(x_i) \ge \tau`.

    Returns
    -------
    probs_new : ndarray, shape (N, K)
    predictions : ndarray of int, shape (N,)
        The original argmax, to pass to :func:`sup_binned_ece`.
    """
    p = as_scores(probs, "probs", kind="probs")
    acc = np.asarray(to_numpy(accept, "accept"), dtype=bool)
    check_length(acc, p.shape[0], "accept")
    n, k = p.shape
    pred = p.argmax(axis=1)
    out = np.full((n, k), 1.0 / k)
    out[acc] = 0.0
    out[np.flatnonzero(acc), pred[acc]] = 1.0
    return out, pred


def cwece_abstain_map(probs, accept):
    r"""Prop. 4.4's map: one-hot where the CSF accepts; elsewhere the largest probability capped at 1/2.

    "All other components are the same as in f" would leave the simplex; the removed mass
    :math:`(\max_c p_c - 1/2)^+` is put on the other classes in proportion to their probabilities. No
    non-maximal probability decreases, so for a misclassified sample the singleton term
    :math:`2(1 - p_{y})` does not increase.

    Returns
    -------
    ndarray, shape (N, K)
    """
    p = as_scores(probs, "probs", kind="probs")
    acc = np.asarray(to_numpy(accept, "accept"), dtype=bool)
    check_length(acc, p.shape[0], "accept")
    n, k = p.shape
    rows = np.arange(n)
    pred = p.argmax(axis=1)
    top = p[rows, pred]
    out = p.copy()
    out[rows, pred] = 0.0
    rest = out.sum(axis=1)  # the mass off the top class, summed (not 1 - top, which cancels)
    capped = top > 0.5
    new_top = np.where(capped, 0.5, top)
    factor = np.divide(1.0 - new_top, rest, out=np.ones(n), where=capped & (rest > 0))
    out *= factor[:, None]
    spread = capped & (rest == 0)  # a one-hot row: share the removed mass equally
    out[spread] = 0.5 / (k - 1)
    out[rows, pred] = new_top
    out[acc] = 0.0
    out[np.flatnonzero(acc), pred[acc]] = 1.0
    return out


# ----------------------------------------------------------------------------------------------------------
# Prop. 4.5: the hierarchy of calibration errors on a discrete population
# ----------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Hierarchy:
    """The terms of Prop. 4.5 for one population and one rho (see :func:`calibration_hierarchy`)."""

    rho: float
    k: int
    ce: float                # CE_rho (Def. 3.5)
    ece: float               # top-label ECE
    cwece: float             # cwECE_rho (Def. 3.7, mean over classes inside the root)
    brier: float             # BS (Def. A.2)
    upper: float             # k^(1/rho - 1/2) sqrt(BS): the printed upper bound with n := k
    lower_printed: float     # k cwECE_rho, as printed
    lower_corrected: float   # k^(1/rho) cwECE_rho

    @property
    def holds_corrected(self) -> bool:
        """upper >= CE_rho >= max(k^(1/rho) cwECE_rho, ECE), up to 1e-12."""
        tol = 1e-12
        return (self.upper >= self.ce - tol and self.ce >= self.lower_corrected - tol
                and self.ce >= self.ece - tol)

    @property
    def printed_lower_fails(self) -> bool:
        """Whether the printed lower bound CE_rho >= k cwECE_rho is violated (by more than 1e-12)."""
        return self.ce < self.lower_printed - 1e-12


def calibration_hierarchy(weights, probs, posterior, rho: float) -> Hierarchy:
    r"""Prop. 4.5 of Zhou et al. (2025) (Gruber & Buettner 2022, Thm. 3.1) on a discrete population.

    Printed: :math:`n^{1/\rho - 1/2}\sqrt{\mathrm{BS}} \ge \mathrm{CE}_\rho \ge \{k\,\mathrm{cwECE}_\rho,
    \mathrm{ECE}\} \ge 0` for :math:`1 \le \rho \le 2`, with n undefined (n is the sample size elsewhere in
    the paper). What holds:

    - upper bound with n := k: :math:`\|v\|_\rho \le k^{1/\rho - 1/2}\|v\|_2` for :math:`\rho \le 2`,
      Lyapunov, and :math:`\mathrm{CE}_2^2 \le \mathrm{BS}` (the Brier decomposition);
    - :math:`\mathrm{CE}_\rho \ge k^{1/\rho}\,\mathrm{cwECE}_\rho`: conditioning on :math:`f_c` is coarser
      than on f (Jensen), and Def. 3.7 averages over the classes, so the factor is :math:`k^{1/\rho}`; the
      printed k is right only at :math:`\rho = 1`;
    - :math:`\mathrm{CE}_\rho \ge \mathrm{ECE}`: one coordinate, Jensen, Lyapunov.

    The population errors come from :func:`calib.simulate.population_errors` (input a has probability
    ``weights[a]``, prediction ``probs[a]`` and true posterior ``posterior[a]``).
    """
    from calib.simulate import population_errors

    rho = float(rho)
    if not 1 <= rho <= 2:
        raise ValueError(f"rho must be in [1, 2] (Prop. 4.5); got {rho}.")
    e = population_errors(weights, probs, posterior, rho=rho)
    k = np.shape(probs)[1]              # not np.asarray: a tensor that requires grad, or on a GPU, has no __array__
    return Hierarchy(rho=rho, k=k, ce=e.ce, ece=e.ece, cwece=e.cwece, brier=e.brier,
                     upper=k ** (1 / rho - 0.5) * math.sqrt(e.brier), lower_printed=k * e.cwece,
                     lower_corrected=k ** (1 / rho) * e.cwece)


# ----------------------------------------------------------------------------------------------------------
# Prop. 4.6 and Eq. 15: the weight beta and the smoothed histogram CDF
# ----------------------------------------------------------------------------------------------------------

def beta_population(u, kappa, normalize: bool = True):
    r"""The AU weight of Prop. 4.6 as a function of the CDF value :math:`u = G(x)` (continuous G).

    Eq. 11 takes the expectation over :math:`\tilde x \sim P_{\mathcal X_\tau}`, the distribution
    *conditional* on :math:`g < \tau`, which has mass :math:`\kappa = G(g^{-1}(\tau))`:

    .. math:: \beta(u) = \frac1\kappa \int_0^{\min(u, \kappa)} \frac{dt}{1 - t}
              = -\frac1\kappa \ln(1 - \min(u, \kappa)).

    ``normalize=True`` gives this value of Eq. 11; ``normalize=False`` gives Eq. 12 as printed, which drops
    the :math:`1/\kappa` (the proof integrates against the unconditional P). Vectorised in u and kappa.
    """
    u = as_float_array(u, "u")
    kappa = as_float_array(kappa, "kappa")
    if np.any((u < 0) | (u > 1)) or np.any((kappa <= 0) | (kappa > 1)):
        raise ValueError("u must lie in [0, 1] and kappa in (0, 1].")
    with np.errstate(divide="ignore"):
        beta = -np.log1p(-np.minimum(u, kappa))
    return beta / kappa if normalize else beta


def smoothed_cdf(scores, at=None, n_bins: int = 15, nu: float = 0.1, edges=(0.0, 1.0)):
    r"""The smoothed histogram CDF :math:`\widehat G_\nu` of Zhou et al. (2025), Eqs. 13-15, in numpy.

    :math:`\widehat G_\nu(s) = \frac1n \sum_{k=0}^{K-1} h_k\, \sigma((s - c_k)/\nu)` with counts :math:`h_k`
    of the equal-width bins :math:`[e_k, e_{k+1})` on ``edges`` (the last bin also takes :math:`e_K`; a
    score outside the edges counts in the nearest end bin) and centres :math:`c_k`. The same estimator as
    :func:`calib.losses.batch.au_weights` (``cdf="bins"``).

    Parameters
    ----------
    scores : array_like, shape (n,)
        The CSF values that define the histogram.
    at : array_like, optional
        Where to evaluate; default at ``scores``.
    n_bins : int
    nu : float > 0
    edges : (lo, hi) or sequence of K + 1 increasing floats

    Returns
    -------
    G : ndarray
        :math:`\widehat G_\nu` at ``at``.
    one_minus_G : ndarray
        :math:`1 - \widehat G_\nu`, computed as :math:`\frac1n\sum_k h_k \sigma((c_k - s)/\nu)` without
        cancellation (what :math:`-\ln(1 - \widehat G_\nu)` needs).
    """
    s = as_float_array(scores, "scores", ndim=1)
    n_bins = check_int(n_bins, "n_bins")
    nu = check_positive(nu, "nu")
    e = as_float_array(edges, "edges").ravel()
    if e.size == 2:
        e = np.linspace(e[0], e[1], n_bins + 1)
    if e.size < 2 or np.any(np.diff(e) <= 0):
        raise ValueError("edges must be (lo, hi) with lo < hi, or K + 1 increasing bin edges.")
    k = e.size - 1
    idx = np.clip(np.searchsorted(e, s, side="right") - 1, 0, k - 1)
    h = np.bincount(idx, minlength=k) / s.size
    c = (e[:-1] + e[1:]) / 2
    x = s if at is None else as_float_array(at, "at")
    flat = x.ravel()
    lower = np.empty(flat.shape[0])
    upper = np.empty(flat.shape[0])
    rows = max(1, (1 << 16) // k)  # blocks of about 2**16 (point, bin) pairs
    for a in range(0, flat.shape[0], rows):
        t = (flat[a:a + rows, None] - c) / nu
        lower[a:a + rows] = np.exp(log_expit(t)) @ h
        upper[a:a + rows] = np.exp(log_expit(-t)) @ h
    return lower.reshape(x.shape), upper.reshape(x.shape)


# ----------------------------------------------------------------------------------------------------------
# App. C.2 and C.3: the inverse focal gradient and the dual focal weight
# ----------------------------------------------------------------------------------------------------------

def inverse_focal_dp(p, gamma):
    r"""The derivative of the inverse focal loss :math:`-(1+p)^\gamma \log p` in p, correctly signed.

    .. math:: \frac{\partial}{\partial p}\big[-(1+p)^\gamma \log p\big]
              = -\gamma (1+p)^{\gamma-1}\log p - \frac{(1+p)^\gamma}{p}
              = -\frac{(1+p)^{\gamma-1}}{p}\,\big(1 + p + \gamma p \log p\big).

    Zhou et al. (2025), App. C.2 print the first term as :math:`+\gamma(1+p)^{\gamma-1}\log p`
    (:func:`inverse_focal_dp_printed`). The logit gradient :math:`\partial\ell/\partial z_y = p(1-p)\,
    \partial\ell/\partial p` has the same sign. Vectorised in p and gamma.
    """
    p = as_float_array(p, "p")
    gamma = as_float_array(gamma, "gamma")
    return -((1 + p) ** (gamma - 1)) / p * (1 + p + gamma * p * np.log(p))


def inverse_focal_dp_printed(p, gamma):
    r"""App. C.2's printed derivative :math:`\gamma(1+p)^{\gamma-1}\log p - (1+p)^\gamma/p` (wrong sign in
    the first term; negative for every p and gamma, so it could never show the positive region the paper
    describes next)."""
    p = as_float_array(p, "p")
    gamma = as_float_array(gamma, "gamma")
    return gamma * (1 + p) ** (gamma - 1) * np.log(p) - (1 + p) ** gamma / p


def inverse_focal_gamma_threshold() -> tuple[float, float]:
    r"""The smallest gamma for which the inverse focal gradient turns positive somewhere, and where.

    The derivative is positive iff :math:`1 + p + \gamma p \log p < 0`, i.e. :math:`\gamma > (1+p)/(-p\log
    p)`. The right side is smallest where :math:`p + \log p + 1 = 0`, i.e. :math:`p^* = W(1/e)`, where it
    equals :math:`1/p^*`. So :math:`\gamma^* = 1/W(1/e) = 3.5911\ldots` at :math:`p^* = 0.27846\ldots`
    (principal branch of Lambert W). The paper says "greater than 4" (App. C.2), "> 3.5" (Sec. 5) and
    ":math:`\gamma \ge 4` underperform" (App. E.1).

    Returns
    -------
    gamma_star, p_star : float
    """
    w = float(lambertw(math.exp(-1)).real)
    return 1.0 / w, w


def inverse_focal_positive_interval(gamma):
    r"""The interval (lo, hi) of p on which the inverse focal gradient is positive; NaN where there is none.

    :math:`f(p) = 1 + p + \gamma p \log p` decreases on :math:`(0, e^{-1-1/\gamma})` and increases after
    it, with :math:`f(0^+) = 1` and :math:`f(1) = 2`; the gradient is positive where f < 0, an interval
    around :math:`p_m = e^{-1-1/\gamma}` that exists iff :math:`f(p_m) = 1 - \gamma p_m < 0`, i.e.
    :math:`\gamma > 1/W(1/e)`. Both ends by vectorised bisection to machine precision.

    Parameters
    ----------
    gamma : float or array_like

    Returns
    -------
    lo, hi : float or ndarray
    """
    g = check_gamma(gamma)
    gg = np.maximum(g, 1e-300)
    pm = np.exp(-1.0 - 1.0 / gg)
    exists = 1.0 - g * pm < 0

    def f(p):
        return 1 + p + gg * p * np.log(p)

    def bisect(a, b, decreasing):
        for _ in range(200):
            mid = 0.5 * (a + b)
            neg = f(mid) < 0
            if decreasing:  # f(a) > 0 > f(b)
                a, b = np.where(neg, a, mid), np.where(neg, mid, b)
            else:           # f(a) < 0 < f(b)
                a, b = np.where(neg, mid, a), np.where(neg, b, mid)
        return 0.5 * (a + b)

    lo = bisect(np.full_like(pm, 1e-300), pm.copy(), decreasing=True)
    hi = bisect(pm.copy(), np.ones_like(pm), decreasing=False)
    lo = np.where(exists, lo, np.nan)
    hi = np.where(exists, hi, np.nan)
    if g.ndim == 0:
        return float(lo), float(hi)
    return lo, hi


#: The readings of the dual focal weight (Zhou et al. 2025, App. C.3; Tao et al. 2023).
DUAL_FOCAL_VARIANTS = ("official", "competitor", "printed")


def dual_focal_weight(probs, labels, gamma, variant: str = "official"):
    r"""The weight :math:`(1 - p_y + p_j)^\gamma` that the dual focal loss puts on :math:`-\log p_y`.

    - ``"official"``: Tao et al. (2023)'s code (and definition, "the highest logit ranked after the ground
      truth"): :math:`p_j` is the largest probability strictly below :math:`p_y`, 0 if none. This is
      :func:`calib.losses.functional.dual_focal_loss`.
    - ``"competitor"``: Zhou et al. (2025), Eq. 24, the "intended" form: :math:`p_j = \max_{c \ne y} p_c`.
    - ``"printed"``: Zhou et al.'s description of the code, Eqs. 25-26: Eq. 24 when :math:`p_y \ge p_j`,
      plain focal :math:`(1 - p_y)^\gamma` when :math:`p_y < p_j`. It agrees with the code only where
      :math:`p_y` is the smallest probability.

    Returns
    -------
    ndarray, shape (N,)
    """
    check_choice(variant, "variant", DUAL_FOCAL_VARIANTS)
    p, y, _, _ = as_probs_labels_top(probs, labels)
    gamma = check_gamma(gamma, scalar=True)
    rows = np.arange(p.shape[0])
    p_y = p[rows, y]
    others = p.copy()
    others[rows, y] = -np.inf
    best_other = np.maximum(others.max(axis=1), 0.0)
    if variant == "official":
        below = np.where(p < p_y[:, None], p, 0.0)
        p_j = below.max(axis=1)
    elif variant == "competitor":
        p_j = best_other
    else:
        p_j = np.where(p_y >= best_other, best_other, 0.0)
    return (1.0 - p_y + p_j) ** gamma


# ----------------------------------------------------------------------------------------------------------
# beyond the paper: properness of the AU loss with and without the gradient through beta
# ----------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class PropernessToy:
    """Result of :func:`properness_toy`. Arrays are per sample."""

    q: np.ndarray              # true probability of the Bayes class, in (1/2, 1)
    bayes_prob: np.ndarray     # final predicted probability of the Bayes class (< 1/2: the argmax flipped)
    confidence: np.ndarray     # final MSP of the fitted prediction
    start_low: float           # share of samples with MSP < low_threshold at the start (= at the posterior)
    end_low: float             # ... at the end
    mean_abs_gap: float        # mean |P(Bayes class) under the fit - q|
    flipped: float             # share of samples whose argmax is no longer the Bayes class
    low_threshold: float


def properness_toy(n: int = 2000, steps: int = 4000, lr: float = 0.5, kappa: float = 0.9, nu: float = 0.1,
                   n_bins: int = 15, detach: bool = False, seed: int = 0, low_threshold: float = 0.55,
                   dtype=None) -> PropernessToy:
    r"""Is the AU loss proper? Minimise its expected value over free logits, starting at the true posterior.

    n binary inputs with true posteriors :math:`\boldsymbol\eta_i = (q_i, 1 - q_i)` or its mirror (random
    side), :math:`q_i \sim U(1/2, 1)`. Each input has its own free logits :math:`\mathbf z_i`, initialised at
    :math:`\log \boldsymbol\eta_i`, so any prediction is reachable. The objective is the label-averaged AU
    loss :math:`\sum_i \widehat\beta_i\, \mathrm{CE}(\boldsymbol\eta_i, \mathrm{softmax}(\mathbf z_i))`
    (:math:`\widehat\beta` depends only on the prediction, so the expectation over :math:`y \sim
    \boldsymbol\eta_i` passes through it), with MSP as CSF and K bins on [1/2, 1]; gradient descent with step
    ``lr`` (a sum over samples, so that each sample's step does not shrink with n).

    With ``detach=True`` the weights are constants and each sample's stationarity condition is
    :math:`\widehat\beta_i(\mathbf p_i - \boldsymbol\eta_i) = 0`: the posterior is a fixed point (proper).
    With the gradient of Eq. 27 the extra term :math:`\mathrm{CE}_i\, \partial\widehat\beta_i/\partial
    g_i \ge 0` pushes low-confidence predictions towards uniform ("abstain", Prop. 4.2), and past it.
    """
    import torch

    from calib.losses import au_weights

    n = check_int(n, "n", minimum=2)
    steps = check_int(steps, "steps", minimum=0)
    lr = check_positive(lr, "lr")
    dtype = dtype or torch.float64
    rng = np.random.default_rng(seed)
    q = rng.uniform(0.5, 1.0, size=n)
    side = rng.integers(0, 2, size=n)
    eta = np.where(side[:, None] == 0, np.column_stack([q, 1 - q]), np.column_stack([1 - q, q]))
    target = torch.as_tensor(eta, dtype=dtype)
    z = torch.log(target).clone().requires_grad_(True)
    start_low = float(np.mean(q < low_threshold))
    for _ in range(steps):
        log_p = torch.log_softmax(z, dim=1)
        scores = log_p.exp().max(dim=1).values
        beta = au_weights(scores, kappa=kappa, nu=nu, n_bins=n_bins, edges=(0.5, 1.0))
        if detach:
            beta = beta.detach()
        loss = (beta * -(target * log_p).sum(dim=1)).sum()
        (grad,) = torch.autograd.grad(loss, z)
        with torch.no_grad():
            z -= lr * grad
    p = torch.softmax(z.detach(), dim=1).numpy()
    bayes = side  # column of the Bayes class: eta = (q, 1 - q) when side == 0
    p_bayes = p[np.arange(n), bayes]
    conf = p.max(axis=1)
    return PropernessToy(q=q, bayes_prob=p_bayes, confidence=conf, start_low=start_low,
                         end_low=float(np.mean(conf < low_threshold)), mean_abs_gap=float(np.mean(np.abs(p_bayes - q))),
                         flipped=float(np.mean(p.argmax(axis=1) != bayes)), low_threshold=low_threshold)


# ----------------------------------------------------------------------------------------------------------
# the paper's tables, read from book/data/published/zhou2025.csv by calib.published.tables
# ----------------------------------------------------------------------------------------------------------

#: Rows of every table (dataset / model): :data:`calib.published.tables.ZHOU2025_ROWS`.
TABLE_ROWS = ZHOU2025_ROWS
#: Columns of every table: :data:`calib.published.tables.ZHOU2025_METHODS`.
TABLE_METHODS = ZHOU2025_METHODS


def paper_tables() -> dict[str, np.ndarray]:
    """Zhou et al. (2025)'s result tables as arrays of shape (10, 7): rows ``TABLE_ROWS``, columns
    ``TABLE_METHODS``; calibration errors x 100 and accuracies in %, as printed. The keys are those of
    :func:`calib.published.tables.zhou2025_tables`, which reads them from ``book/data/published/zhou2025.csv``.
    """
    return zhou2025_tables()
