"""Training losses (torch) and a registry that builds them from a name.

Every loss takes ``logits`` of shape (N, K) and integer ``targets`` of shape (N,) and returns a scalar tensor,
the mean over the batch (``reduction="none"`` gives the per-sample values). Losses are computed from
``log_softmax``, never from rounded probabilities, so that they and their gradients stay finite when a
float32 softmax saturates.

``get_loss(name)`` parses the names used across the book and by ``calib train``:

- ``"ce"``: cross-entropy;
- ``"fl-<gamma>"``: focal loss with a fixed gamma >= 0, e.g. ``"fl-3"``, ``"fl-0.5"`` (Lin et al. 2017);
- ``"inverse-fl-<gamma>"``, ``"dual-fl-<gamma>"``: inverse focal loss (Wang et al. 2021) and dual focal loss
  (Tao et al. 2023, as in its official code);
- ``"aurc"`` and ``"aurc-<key>=<value>,..."``: the selective AURC loss of Zhou et al. (2025), Eq. 17, with
  options kappa, nu, bins, csf, cdf, detach, normalize (:data:`AURC_DEFAULTS`); ``"aurc-kappa=1,cdf=exact"``
  is the empirical AURC of the batch as a loss.

- ``"mmce-<lambda>"``: cross-entropy + lambda * MMCE_w (Kumar et al. 2018), Mukhoti et al. (2020)'s baseline.

``get_loss(name, secondary=..., secondary_weight=beta)`` adds a secondary calibration loss, PL + beta * SL
(Karandikar et al. 2021): ``"sb-ece"``, ``"s-avuc"``, ``"avuc"``, ``"avuc-gs"``, ``"mmce"``, ``"mmce-w"``
(:data:`SECONDARY_LOSSES`, :func:`combined_loss`).

Later issues add their names to :data:`LOSSES`.
"""

from __future__ import annotations

import math
import numbers
from typing import Callable

import torch
import torch.nn.functional as F

__all__ = ["cross_entropy", "focal_loss", "get_loss", "LOSSES", "loss_names"]

_REDUCTIONS = ("mean", "sum", "none")


def _check_inputs(logits: torch.Tensor, targets: torch.Tensor, reduction: str) -> None:
    if not isinstance(logits, torch.Tensor) or not isinstance(targets, torch.Tensor):
        raise ValueError("logits and targets must be torch tensors; convert with torch.as_tensor(...).")
    if logits.ndim != 2:
        raise ValueError(f"logits must have shape (N, K); got {tuple(logits.shape)}.")
    if targets.ndim != 1 or targets.shape[0] != logits.shape[0]:
        raise ValueError(f"targets must have shape ({logits.shape[0]},) (one class index per row of logits); "
                         f"got {tuple(targets.shape)}.")
    if targets.dtype.is_floating_point or targets.dtype == torch.bool:
        raise ValueError(f"targets has dtype {targets.dtype}; pass integer class indices (targets.long()).")
    if reduction not in _REDUCTIONS:
        raise ValueError(f"reduction={reduction!r} is not supported; choose one of {', '.join(map(repr, _REDUCTIONS))}.")


def _reduce(values: torch.Tensor, reduction: str) -> torch.Tensor:
    if reduction == "mean":
        return values.mean()
    if reduction == "sum":
        return values.sum()
    return values


def cross_entropy(logits: torch.Tensor, targets: torch.Tensor, reduction: str = "mean") -> torch.Tensor:
    """Cross-entropy ``-log softmax(logits)[y]`` (focal loss with gamma = 0); mean over the batch by default."""
    _check_inputs(logits, targets, reduction)
    return F.cross_entropy(logits, targets, reduction=reduction)


def focal_loss(logits: torch.Tensor, targets: torch.Tensor, gamma, reduction: str = "mean") -> torch.Tensor:
    r"""Focal loss ``-(1 - p_y)^gamma log p_y`` with ``p = softmax(logits)``.

    Lin et al. (2017), Eq. 5 without the class weight alpha; Mukhoti et al. (2020), Sec. 4;
    Charoenphakdee et al. (2021), Eq. 5 with a one-hot target.

    Parameters
    ----------
    logits : torch.Tensor, shape (N, K)
    targets : torch.Tensor of int, shape (N,)
        Class indices in [0, K).
    gamma : float or torch.Tensor
        Focal parameter >= 0; a scalar or one value per sample (shape (N,)), e.g. from a sample-dependent
        schedule. A tensor gamma is treated as a constant (no gradient flows into it).
    reduction : {"mean", "sum", "none"}

    Returns
    -------
    torch.Tensor
        A scalar (or shape (N,) for ``reduction="none"``).

    Notes
    -----
    ``log p_y`` comes from ``log_softmax`` and ``1 - p_y`` from ``-expm1(log p_y)``, accurate when p_y is
    near 1. Where ``1 - p_y`` is exactly 0 (a saturated softmax) the weight ``(1 - p_y)^gamma`` is set to
    its limit (0 for gamma > 0, 1 for gamma = 0) without differentiating ``x^gamma`` at 0, whose derivative
    is infinite for gamma < 1; the true gradient there, ``-g(1, gamma)`` times that of ``log p_y``, is 0 for
    gamma > 0, so nothing is lost.
    """
    _check_inputs(logits, targets, reduction)
    if isinstance(gamma, torch.Tensor):
        gamma = gamma.detach().to(device=logits.device, dtype=logits.dtype)
        if gamma.ndim not in (0, 1) or (gamma.ndim == 1 and gamma.shape[0] != logits.shape[0]):
            raise ValueError(f"gamma must be a scalar or have one value per sample ({logits.shape[0]}); "
                             f"got shape {tuple(gamma.shape)}.")
        if not bool(torch.isfinite(gamma).all()) or bool((gamma < 0).any()):
            raise ValueError("gamma must be finite and >= 0 (gamma = 0 is cross-entropy).")
    else:
        if isinstance(gamma, bool) or not isinstance(gamma, numbers.Real) or not 0 <= gamma < float("inf"):
            raise ValueError(f"gamma must be a finite number >= 0 (gamma = 0 is cross-entropy); got {gamma!r}.")
        gamma = torch.tensor(float(gamma), device=logits.device, dtype=logits.dtype)
    log_p = F.log_softmax(logits, dim=1).gather(1, targets.long().unsqueeze(1)).squeeze(1)
    one_minus_p = -torch.expm1(log_p)
    positive = one_minus_p > 0
    base = torch.where(positive, one_minus_p, torch.ones_like(one_minus_p))
    weight = torch.where(positive, base ** gamma, (gamma == 0).to(log_p.dtype).expand_as(log_p))
    return _reduce(-weight * log_p, reduction)


def _parse_gamma(name: str, text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"loss {name!r}: {text!r} is not a number; write e.g. 'fl-3' or 'fl-0.5'.") from None
    if not (value >= 0) or value == float("inf"):
        raise ValueError(f"loss {name!r}: gamma must be a finite number >= 0; got {value}.")
    return value


def _make_ce(name: str, arg: str | None) -> Callable:
    if arg is not None:
        raise ValueError(f"loss {name!r}: 'ce' takes no parameter; write 'ce'.")
    return cross_entropy


def _make_fl(name: str, arg: str | None) -> Callable:
    if arg is None:
        raise ValueError(f"loss {name!r}: focal loss needs gamma; write e.g. 'fl-3' or 'fl-0.5'.")
    gamma = _parse_gamma(name, arg)

    def loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return focal_loss(logits, targets, gamma)

    loss.__name__ = f"focal_loss_gamma_{arg}"
    loss.__doc__ = f"Focal loss with gamma = {gamma:g}, mean over the batch."
    loss.gamma = gamma
    return loss


#: The loss families by name prefix: ``prefix -> factory(name, arg_or_None)``. Extend by adding entries.
LOSSES: dict[str, Callable] = {"ce": _make_ce, "fl": _make_fl}


def loss_names() -> str:
    """The accepted loss names, for error messages and ``--help``."""
    return ("'ce', 'fl-<gamma>' (e.g. 'fl-3', 'fl-0.5'), 'inverse-fl-<gamma>', 'dual-fl-<gamma>', "
            "'aurc' or 'aurc-<key>=<value>,...' (e.g. 'aurc-kappa=0.8,nu=0.01'), "
            "'flsd-53', 'flsd-532', 'flsc-531', 'flsc-532', 'brier', 'ls-<alpha>' (e.g. 'ls-0.05'), "
            "'mmce-<lambda>' (e.g. 'mmce-2')")


def get_loss(name: str, secondary: str | None = None,
             secondary_weight: float = 1.0) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    """The loss called ``name``, as a callable ``(logits, targets) -> scalar tensor`` (mean over the batch).

    Parameters
    ----------
    name : str
        ``"ce"`` or ``"fl-<gamma>"`` (e.g. ``"fl-3"``, ``"fl-0.5"``); case-insensitive.
    secondary : str, optional
        A secondary (calibration) loss added to it, ``name + secondary_weight * secondary`` (Karandikar et
        al. 2021, Sec. 5.1): one of :data:`SECONDARY_LOSSES` ("sb-ece", "s-avuc", "avuc", "avuc-gs", "mmce",
        "mmce-w"); see :func:`combined_loss`.
    secondary_weight : float
        beta >= 0, the weight of the secondary loss.

    Raises
    ------
    ValueError
        For an unknown family or a malformed parameter, listing the accepted names.
    """
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"loss name must be a non-empty string; choose from {loss_names()}.")
    key = name.strip().lower()
    prefix, sep, arg = key.partition("-")
    factory = LOSSES.get(prefix)
    if factory is None:
        raise ValueError(f"unknown loss {name!r}; choose from {loss_names()}.")
    loss = factory(name, arg if sep else None)
    return loss if secondary is None else combined_loss(loss, secondary, secondary_weight)


# ==========================================================================================================
# Zhou et al. (2025), "Revisiting reweighted risk for calibration": inverse focal loss, dual focal loss and
# the selective AURC loss AU_{P_X_tau}. Each is cross-entropy times a per-sample weight (chapter 09):
# (1 + p_y)^gamma, (1 - p_y + p_j)^gamma and beta(x) = -ln(1 - min(G(x), kappa)).
# Registry names: "inverse-fl-<gamma>", "dual-fl-<gamma>", "aurc" and "aurc-<key>=<value>,...".
# ==========================================================================================================

__all__ += ["AURC_DEFAULTS", "CSFS", "au_weights", "confidence_scores", "dual_focal_loss", "inverse_focal_loss",
            "selective_au_loss"]

#: Confidence score functions of :func:`confidence_scores` (as :data:`calib.metrics.CSFS`).
CSFS = ("msp", "margin", "negative_entropy", "neg_gini")
_CDFS = ("bins", "exact")


def _check_gamma_arg(gamma) -> float:
    if isinstance(gamma, bool) or not isinstance(gamma, numbers.Real) or not 0 <= gamma < float("inf"):
        raise ValueError(f"gamma must be a finite number >= 0 (gamma = 0 is cross-entropy); got {gamma!r}.")
    return float(gamma)


def inverse_focal_loss(logits: torch.Tensor, targets: torch.Tensor, gamma, reduction: str = "mean") -> torch.Tensor:
    r"""Inverse focal loss ``-(1 + p_y)^gamma log p_y`` with ``p = softmax(logits)``.

    Wang et al. (2021); Zhou et al. (2025), Def. 3.2, Eq. 3. The weight :math:`(1 + p_y)^\gamma \in [1,
    2^\gamma]` grows with :math:`p_y`: easy samples are up-weighted, the opposite of focal loss. Its
    derivative in :math:`p_y` is :math:`-(1 + p)^{\gamma - 1}(1 + p + \gamma p \log p)/p`, which is positive
    on an interval of p once :math:`\gamma > 1/W(1/e) \approx 3.5911` (chapter 09; the paper's App. C.2
    prints the first term with the wrong sign).

    Parameters
    ----------
    logits : torch.Tensor, shape (N, K)
    targets : torch.Tensor of int, shape (N,)
    gamma : float
        >= 0; gamma = 0 is cross-entropy.
    reduction : {"mean", "sum", "none"}

    Returns
    -------
    torch.Tensor
        A scalar (or shape (N,) for ``reduction="none"``).
    """
    _check_inputs(logits, targets, reduction)
    gamma = _check_gamma_arg(gamma)
    log_p = F.log_softmax(logits, dim=1).gather(1, targets.long().unsqueeze(1)).squeeze(1)
    weight = torch.exp(gamma * torch.log1p(torch.exp(log_p)))  # (1 + p)^gamma
    return _reduce(-weight * log_p, reduction)


def dual_focal_loss(logits: torch.Tensor, targets: torch.Tensor, gamma, reduction: str = "mean") -> torch.Tensor:
    r"""Dual focal loss ``-(1 - p_y + p_j)^gamma log p_y`` as in Tao et al. (2023)'s official code.

    :math:`p_j` is the largest probability strictly below the true-class probability :math:`p_y` (0 when
    :math:`p_y` is the smallest): "the highest logit ranked after the ground truth logit" (Tao et al. 2023,
    Sec. 4; Linwei94/ICML2023-DualFocalLoss, ``dual_focal_loss.py``: ``p_j = topk((p < p_k) * p)``). The
    gradient flows through :math:`p_j` as in that code.

    Zhou et al. (2025), App. C.3, Eqs. 24-26, describe the code differently: Eq. 24 takes :math:`p_j` as the
    largest *other* probability, and Eq. 26 says the code falls back to plain focal loss
    :math:`-(1 - p_y)^\gamma \log p_y` when :math:`p_y < p_j`. That matches the code only when :math:`p_y` is
    the smallest probability (e.g. K = 2); for p = (0.5, 0.3, 0.2), y = 1, gamma = 3 the code gives 0.8777,
    Eq. 26 gives 0.4130 (chapter 09). :func:`calib.selective.dual_focal_weight` has all three readings.

    Parameters
    ----------
    logits : torch.Tensor, shape (N, K)
    targets : torch.Tensor of int, shape (N,)
    gamma : float
        >= 0.
    reduction : {"mean", "sum", "none"}
        The official code sums over the batch by default (``size_average=False``); calib takes the mean.

    Returns
    -------
    torch.Tensor

    Notes
    -----
    ``1 - p_y`` is computed as ``-expm1(log p_y)``, accurate when p_y is near 1. Where the base
    ``1 - p_y + p_j`` is exactly 0 (a saturated softmax), the weight is set to its limit (0 for gamma > 0)
    without differentiating ``x^gamma`` at 0. Ties :math:`p_c = p_y` (c != y) are not below p_y and are
    skipped, as in the code.
    """
    _check_inputs(logits, targets, reduction)
    gamma = _check_gamma_arg(gamma)
    log_probs = F.log_softmax(logits, dim=1)
    probs = log_probs.exp()
    log_p = log_probs.gather(1, targets.long().unsqueeze(1)).squeeze(1)
    p_y = probs.gather(1, targets.long().unsqueeze(1))
    below = torch.where(probs < p_y, probs, torch.zeros_like(probs))
    p_j = below.max(dim=1).values
    base = -torch.expm1(log_p) + p_j
    positive = base > 0
    safe = torch.where(positive, base, torch.ones_like(base))
    weight = torch.where(positive, safe ** gamma, torch.full_like(base, float(gamma == 0)))
    return _reduce(-weight * log_p, reduction)


def confidence_scores(logits: torch.Tensor, csf: str = "msp") -> torch.Tensor:
    r"""A confidence score function g of softmax(logits), differentiable (torch twin of
    :func:`calib.metrics.confidence_score`).

    ``"msp"``: :math:`\max_i p_i`; ``"margin"``: :math:`p_{(1)} - p_{(2)}`; ``"negative_entropy"``:
    :math:`\sum_i p_i \log p_i` (Zhou et al. 2025, App. Table 1, corrected from logits z to p);
    ``"neg_gini"``: :math:`\sum_i p_i^2 - 1`. Computed from ``log_softmax``.
    """
    if csf not in CSFS:
        raise ValueError(f"csf={csf!r} is not supported; choose one of {', '.join(map(repr, CSFS))}.")
    log_probs = F.log_softmax(logits, dim=1)
    probs = log_probs.exp()
    if csf == "msp":
        return probs.max(dim=1).values
    if csf == "margin":
        top = probs.topk(2, dim=1).values
        return top[:, 0] - top[:, 1]
    if csf == "negative_entropy":
        return (probs * log_probs).sum(dim=1)
    return (probs * probs).sum(dim=1) - 1.0


def _csf_range(csf: str, n_classes: int) -> tuple[float, float]:
    """The range of a CSF on the simplex (as :func:`calib.metrics.confidence_range`)."""
    k = n_classes
    return {"msp": (1.0 / k, 1.0), "margin": (0.0, 1.0), "negative_entropy": (-math.log(k), 0.0),
            "neg_gini": (1.0 / k - 1.0, 0.0)}[csf]


def _check_au_args(kappa, nu, n_bins, cdf):
    if isinstance(kappa, bool) or not isinstance(kappa, numbers.Real) or not 0 < kappa <= 1:
        raise ValueError(f"kappa (the low-confidence coverage) must be in (0, 1]; got {kappa!r}. kappa = 1 is the "
                         f"full AURC.")
    if isinstance(nu, bool) or not isinstance(nu, numbers.Real) or not 0 < nu < float("inf"):
        raise ValueError(f"nu (the sigmoid smoothing of Eq. 15) must be a finite number > 0; got {nu!r}.")
    if isinstance(n_bins, bool) or not isinstance(n_bins, numbers.Integral) or n_bins < 1:
        raise ValueError(f"n_bins must be an integer >= 1; got {n_bins!r}.")
    if cdf not in _CDFS:
        raise ValueError(f"cdf={cdf!r} is not supported; choose 'bins' (the smoothed histogram CDF of Eq. 15) or "
                         f"'exact' (sort-based ranks).")


def _bin_edges(edges, n_bins: int, like: torch.Tensor) -> torch.Tensor:
    e = torch.as_tensor(edges, dtype=like.dtype, device=like.device).flatten()
    if e.numel() == 2:
        e = torch.linspace(float(e[0]), float(e[1]), n_bins + 1, dtype=like.dtype, device=like.device)
    if e.numel() < 2 or not bool(torch.all(e[1:] > e[:-1])) or not bool(torch.isfinite(e).all()):
        raise ValueError("edges must be (lo, hi) with lo < hi, or K + 1 increasing finite bin edges.")
    return e


def au_weights(scores: torch.Tensor, kappa: float = 0.9, nu: float = 0.1, n_bins: int = 15, edges=(0.0, 1.0),
               cdf: str = "bins", normalize: bool = False) -> torch.Tensor:
    r"""The per-sample weights :math:`\widehat\beta_i` of the selective AURC loss (Zhou et al. 2025, Eq. 16).

    With the CDF :math:`\widehat G` of the scores :math:`s_i = g(\mathbf x_i)` in the batch and the threshold
    :math:`\tau` that leaves the bottom :math:`\kappa` fraction below it (App. E.2),

    .. math:: \widehat\beta_i = -\ln\big(1 - \widehat G(\min(s_i, \tau))\big),

    i.e. :math:`-\ln(1 - \widehat G(s_i))` below :math:`\tau` and the constant :math:`-\ln(1 - \widehat
    G(\tau))` above it (Eq. 12 / 16). ``kappa = 1`` (no threshold) is the AURC weight of Def. 3.3.

    - ``cdf="bins"``: the smoothed histogram CDF of Eqs. 13-15, :math:`\widehat G_\nu(s) = \frac1n \sum_k h_k
      \sigma((s - c_k)/\nu)`, with counts :math:`h_k` of the bins :math:`[e_k, e_{k+1})` (the last bin also
      takes :math:`e_K`; a score outside the edges counts in the nearest end bin) and centres
      :math:`c_k`. Differentiable in ``scores`` below :math:`\tau` (Eq. 27); h and tau are constants.
      Computed as :math:`-\log \frac1n \sum_k h_k \sigma((c_k - s)/\nu)` (:math:`1 - \sigma(t) =
      \sigma(-t)`, no cancellation), falling back to a log-sum-exp where that sum underflows, so it is
      finite for every :math:`\nu > 0`. Cost O(nK).
    - ``cdf="exact"``: the exact finite-sample weights from a sort, :math:`H_n - H_{\max(r_i, n - m + 1) - 1}`
      for descending rank :math:`r_i` and m low-confidence samples (harmonic numbers; the
      :math:`\kappa = 1` case is the identity of :func:`calib.metrics.risk_coverage_curve`); equal scores
      share their mean weight. Piecewise constant in the scores: no gradient. Cost O(n log n).

    Parameters
    ----------
    scores : torch.Tensor, shape (n,)
        CSF values, e.g. from :func:`confidence_scores`.
    kappa : float in (0, 1], default 0.9
        Low-confidence coverage :math:`\kappa`: m = floor(kappa n) samples are "low confidence"; tau is the
        (m+1)-th smallest score (a selection, ``torch.kthvalue``), and the samples strictly below it are
        low (fewer than m when scores tie at tau).
    nu : float, default 0.1
        Sigmoid smoothing :math:`\nu` of Eq. 15 (only for ``cdf="bins"``).
    n_bins : int, default 15
        K, the number of equal-width bins on ``edges`` (the paper does not state K).
    edges : (lo, hi) or sequence of K + 1 increasing floats, default (0, 1)
        Bin range or edges (only for ``cdf="bins"``).
    cdf : {"bins", "exact"}
    normalize : bool, default False
        False: Eq. 12 / 16 as printed, whose weights average to about kappa. True: divide by kappa, the
        factor :math:`1/\kappa` that Prop. 4.6 drops; then the loss equals Eq. 9 (mean weight about 1).

    Returns
    -------
    torch.Tensor, shape (n,)
        Non-negative weights, in the dtype of ``scores``.
    """
    _check_au_args(kappa, nu, n_bins, cdf)
    if not isinstance(scores, torch.Tensor) or scores.ndim != 1 or scores.numel() == 0:
        raise ValueError("scores must be a non-empty 1-D torch tensor (one CSF value per sample).")
    n = scores.shape[0]
    m = min(n, int(math.floor(kappa * n + 1e-9)))
    detached = scores.detach()
    tau = detached.kthvalue(m + 1).values if m < n else None
    low = detached < tau if tau is not None else torch.ones(n, dtype=torch.bool, device=scores.device)
    if cdf == "exact":
        weights = _exact_au_weights(detached, m, tau)
    else:
        e = _bin_edges(edges, n_bins, scores)
        k = e.numel() - 1
        with torch.no_grad():
            idx = (torch.bucketize(detached, e, right=True) - 1).clamp_(0, k - 1)
            counts = torch.bincount(idx, minlength=k)
        full = counts > 0
        centres = ((e[:-1] + e[1:]) / 2)[full]
        mass = counts[full].to(scores.dtype) / n
        tiny = torch.finfo(scores.dtype).tiny

        def minus_log_upper(s):  # -log(1 - G_nu(s)) = -log sum_k (h_k / n) sigma((c_k - s) / nu)
            upper = torch.sigmoid((centres - s.unsqueeze(-1)) / nu) @ mass
            bad = ~(upper > 1e6 * tiny)  # the sum underflowed: s far above every occupied bin (tiny nu)
            if bool(bad.any()):
                stable = torch.logsumexp(torch.log(mass) + F.logsigmoid((centres - s[bad].unsqueeze(-1)) / nu), -1)
                out = -torch.log(torch.where(bad, torch.ones_like(upper), upper))
                return out.masked_scatter(bad, -stable)
            return -torch.log(upper)

        weights = minus_log_upper(scores)
        if tau is not None:
            weights = torch.where(low, weights, minus_log_upper(tau.reshape(1)).expand(n))
    if normalize:
        weights = weights / kappa
    return weights


def _exact_au_weights(s: torch.Tensor, m: int, tau) -> torch.Tensor:
    """Sort-based weights H_n - H_{max(r, n-m+1) - 1} (descending rank r), tied scores sharing their mean."""
    n = s.shape[0]
    order = torch.argsort(s, descending=True)
    sorted_s = s[order]
    inv = 1.0 / torch.arange(1, n + 1, dtype=torch.float64, device=s.device)
    tail = torch.flip(torch.cumsum(torch.flip(inv, [0]), 0), [0])  # tail[r-1] = H_n - H_{r-1}
    if m < n:
        cap = tail[n - m] if m > 0 else torch.zeros((), dtype=torch.float64, device=s.device)
        tail = torch.where(torch.arange(n, device=s.device) < n - m, cap, tail)
    if n > 1 and bool((sorted_s[1:] == sorted_s[:-1]).any()):  # ties: share the group's mean weight
        _, group, sizes = torch.unique_consecutive(sorted_s, return_inverse=True, return_counts=True)
        tail = (torch.zeros(sizes.shape[0], dtype=torch.float64, device=s.device).index_add_(0, group, tail)
                / sizes)[group]
    weights = torch.empty(n, dtype=s.dtype, device=s.device)
    weights[order] = tail.to(s.dtype)
    return weights


def selective_au_loss(logits: torch.Tensor, targets: torch.Tensor, kappa: float = 0.9, nu: float = 0.1,
                      n_bins: int = 15, csf: str = "msp", edges=None, cdf: str = "bins", detach: bool = False,
                      normalize: bool = False, reduction: str = "mean") -> torch.Tensor:
    r"""The selective AURC loss :math:`\widehat{\mathrm{AU}}_{P_{\mathcal X_\tau}}` (Zhou et al. 2025, Eq. 17).

    Cross-entropy weighted by :math:`\widehat\beta_i` (:func:`au_weights`) computed from the CSF
    :math:`g(\mathbf p_i)` of the batch: :math:`\frac1n \sum_i \widehat\beta_i\, (-\log p_{i, y_i})`. The base
    loss inside AU is not stated in the paper; cross-entropy is what the official code uses.

    Parameters
    ----------
    logits : torch.Tensor, shape (N, K)
    targets : torch.Tensor of int, shape (N,)
    kappa, nu, n_bins, cdf, normalize
        See :func:`au_weights`. ``kappa = 1`` is the AURC; ``cdf="exact"`` with ``kappa = 1`` is the
        empirical AURC of the batch as a loss (Zhou et al. 2025, Def. 3.3, the "AURC" baseline), with the
        weights of the actual batch size.
    csf : {"msp", "margin", "negative_entropy", "neg_gini"}, default "msp"
    edges : (lo, hi) or K + 1 increasing floats, optional
        Bins of the smoothed CDF; default equal-width bins on the range of the CSF (MSP: [1/K, 1], margin:
        [0, 1], negative entropy: [-ln K, 0]).
    detach : bool, default False
        False: the gradient flows through the weights as in Eq. 27. True: the weights are constants
        (``beta.detach()``), which keeps the loss proper (chapter 09's properness toy).
    reduction : {"mean", "sum", "none"}

    Returns
    -------
    torch.Tensor

    Notes
    -----
    Differences from the official code (han678/CalibWeightedRisk, ``loss/selectAU.py``): there the histogram
    (64 bins on [0, 1] for every CSF, sigma = 0.05) *accumulates* over the batches of an epoch (and the
    validation batches) and is cleared once per epoch, tau is ``torch.quantile`` (interpolated and
    differentiable), G is clamped to [1/(B+1), B/(B+1)] for the configured batch size B, and the default
    reduction is the sum. Here the histogram and tau come from the current batch (Alg. 1), tau is a
    constant, nothing is clamped, and the loss is the batch mean.
    """
    _check_inputs(logits, targets, reduction)
    log_p = F.log_softmax(logits, dim=1).gather(1, targets.long().unsqueeze(1)).squeeze(1)
    scores = confidence_scores(logits, csf)
    rng = edges if edges is not None else _csf_range(csf, logits.shape[1])
    beta = au_weights(scores, kappa=kappa, nu=nu, n_bins=n_bins, edges=rng, cdf=cdf, normalize=normalize)
    if detach:
        beta = beta.detach()
    return _reduce(-beta * log_p, reduction)


def _make_inverse(name: str, arg: str | None) -> Callable:
    if arg is None or not arg.startswith("fl-"):
        raise ValueError(f"loss {name!r}: write 'inverse-fl-<gamma>', e.g. 'inverse-fl-2'.")
    gamma = _parse_gamma(name, arg[3:])

    def loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return inverse_focal_loss(logits, targets, gamma)

    loss.__name__ = f"inverse_focal_loss_gamma_{arg[3:]}"
    loss.__doc__ = f"Inverse focal loss with gamma = {gamma:g}, mean over the batch."
    loss.gamma = gamma
    return loss


def _make_dual(name: str, arg: str | None) -> Callable:
    if arg is None or not arg.startswith("fl-"):
        raise ValueError(f"loss {name!r}: write 'dual-fl-<gamma>', e.g. 'dual-fl-2'.")
    gamma = _parse_gamma(name, arg[3:])

    def loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return dual_focal_loss(logits, targets, gamma)

    loss.__name__ = f"dual_focal_loss_gamma_{arg[3:]}"
    loss.__doc__ = f"Dual focal loss (Tao et al. 2023, official code) with gamma = {gamma:g}, mean over the batch."
    loss.gamma = gamma
    return loss


#: Defaults of the "aurc" loss name: the paper's CIFAR-10 setting (App. E.2, App. Table 3: kappa 0.9 or 0.8,
#: nu = 0.1), MSP, 15 bins (K is not stated), gradient through the weights (Eq. 27), Eq. 16 as printed.
AURC_DEFAULTS = {"kappa": 0.9, "nu": 0.1, "bins": 15, "csf": "msp", "cdf": "bins", "detach": False,
                 "normalize": False}
_AURC_HELP = ("write 'aurc' or 'aurc-<key>=<value>,...' with keys kappa (0 < kappa <= 1), nu (> 0), bins (int), "
              "csf (msp, margin, negative_entropy, neg_gini), cdf (bins or exact), detach and normalize "
              "(0/1/true/false; a bare key means true), e.g. 'aurc-kappa=0.8,nu=0.01' or 'aurc-kappa=1,cdf=exact'")


def _make_aurc(name: str, arg: str | None) -> Callable:
    opts = dict(AURC_DEFAULTS)
    for item in (arg.split(",") if arg else []):
        key, eq, value = item.strip().partition("=")
        if key not in opts:
            raise ValueError(f"loss {name!r}: unknown option {key!r}; {_AURC_HELP}.")
        try:
            if key in ("detach", "normalize"):
                if eq and value not in ("0", "1", "true", "false"):
                    raise ValueError
                opts[key] = (not eq) or value in ("1", "true")
            elif key == "bins":
                opts[key] = int(value)
            elif key in ("kappa", "nu"):
                opts[key] = float(value)
            else:
                opts[key] = value
        except ValueError:
            raise ValueError(f"loss {name!r}: bad value {value!r} for {key}; {_AURC_HELP}.") from None
    _check_au_args(opts["kappa"], opts["nu"], opts["bins"], opts["cdf"])
    if opts["csf"] not in CSFS:
        raise ValueError(f"loss {name!r}: csf {opts['csf']!r} is not one of {', '.join(CSFS)}; {_AURC_HELP}.")
    kw = dict(kappa=opts["kappa"], nu=opts["nu"], n_bins=opts["bins"], csf=opts["csf"], cdf=opts["cdf"],
              detach=opts["detach"], normalize=opts["normalize"])

    def loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return selective_au_loss(logits, targets, **kw)

    loss.__name__ = "selective_au_loss"
    loss.__doc__ = f"Selective AURC loss (Zhou et al. 2025, Eq. 17) with {kw}, mean over the batch."
    loss.options = kw
    return loss


LOSSES.update({"inverse": _make_inverse, "dual": _make_dual, "aurc": _make_aurc})


# ==========================================================================================================
# Mukhoti et al. (2020): the sample-dependent focal losses FLSD-53 and FLSD-532 (Sec. 4, App. E), the epoch
# schedules FLSc-531 and FLSc-532 (App. E), and the baselines Brier score and label smoothing (Sec. 5.1).
# Registry names: "flsd-53", "flsd-532", "flsc-531", "flsc-532", "brier", "ls-<alpha>".
# Epoch-dependent losses have a method set_epoch(epoch, total_epochs) that calib.train calls at the start of
# every epoch (1-based); every other loss is a plain function of (logits, targets).
# ==========================================================================================================

__all__ += ["sample_dependent_focal_loss", "EpochScheduledFocalLoss", "FLSC_SCHEDULES", "brier_loss",
            "label_smoothing_loss"]


def _upcast(logits: torch.Tensor) -> torch.Tensor:
    """float16 / bfloat16 logits (e.g. from autocast) are promoted to float32 before the loss is computed."""
    return logits.float() if logits.dtype in (torch.float16, torch.bfloat16) else logits


def sample_dependent_focal_loss(logits: torch.Tensor, targets: torch.Tensor, schedule=None,
                                reduction: str = "mean") -> torch.Tensor:
    r"""Focal loss whose gamma is chosen per sample from the predicted true-class probability (FLSD).

    ``gamma_i = schedule.gammas[j]`` when ``p_i = softmax(logits_i)[y_i]`` lies in bin j of the schedule;
    FLSD-53 (the default, :data:`calib.focal.FLSD_53`) is gamma = 5 for p in [0, 0.2) and 3 for p in
    [0.2, 1] (Mukhoti et al. 2020, Sec. 4); FLSD-532 (:data:`calib.focal.FLSD_532`) adds gamma = 2 on
    [0.5, 1] (App. E). gamma is a constant of the step: no gradient flows through the choice, as in the
    official code (``Losses/focal_loss_adaptive_gamma.py``, which picks it with ``.item()`` in a Python loop
    over the batch). Here the choice is one ``torch.bucketize`` over the batch.

    Parameters
    ----------
    logits : torch.Tensor, shape (N, K)
    targets : torch.Tensor of int, shape (N,)
    schedule : calib.focal.GammaSchedule, optional
        The bins and their gammas; FLSD-53 by default.
    reduction : {"mean", "sum", "none"}
        The official code sums over the batch; the book's losses take the mean.
    """
    from calib.focal import FLSD_53, GammaSchedule

    schedule = FLSD_53 if schedule is None else schedule
    if not isinstance(schedule, GammaSchedule):
        raise ValueError(f"schedule must be a calib.focal.GammaSchedule (e.g. calib.focal.FLSD_532); got {schedule!r}.")
    _check_inputs(logits, targets, reduction)
    logits = _upcast(logits)
    with torch.no_grad():
        p = F.log_softmax(logits, dim=1).gather(1, targets.long().unsqueeze(1)).squeeze(1).exp()
        edges = torch.tensor(schedule.edges, dtype=p.dtype, device=p.device)
        gammas = torch.tensor(schedule.gammas, dtype=p.dtype, device=p.device)
        # closed="left": bins [e_i, e_i+1), i.e. p == e_i goes up (torch's right=True)
        gamma = gammas[torch.bucketize(p, edges, right=schedule.closed == "left")]
    return focal_loss(logits, targets, gamma, reduction=reduction)


#: FLSc schedules of Mukhoti et al. (2020), App. E, for their 350-epoch CIFAR runs: gamma = 5 for epochs
#: 1-100, 3 for epochs 101-250, then 1 (FLSc-531) or 2 (FLSc-532) for epochs 251-350.
FLSC_SCHEDULES = {"flsc-531": ((5.0, 3.0, 1.0), (100, 250), 350), "flsc-532": ((5.0, 3.0, 2.0), (100, 250), 350)}


class EpochScheduledFocalLoss:
    """Focal loss whose gamma follows the training epoch (FLSc; Mukhoti et al. 2020, App. E).

    Call :meth:`set_epoch` at the start of every epoch (``calib.train`` does). The paper gives the switch
    epochs for a 350-epoch run (100 and 250); for a run of E epochs they are scaled to
    ``round(100 E / 350)`` and ``round(250 E / 350)`` (the book's choice; the paper gives no rule, and the
    official code uses 30 and 70 for its 100-epoch Tiny-ImageNet runs).

    Parameters
    ----------
    gammas : sequence of float
        The gamma of each phase, e.g. (5, 3, 1).
    boundaries : sequence of int
        The last epoch of each phase but the final one, for a run of ``reference_epochs`` epochs.
    reference_epochs : int
        The run length the boundaries refer to (350 in the paper).
    """

    def __init__(self, gammas=(5.0, 3.0, 1.0), boundaries=(100, 250), reference_epochs: int = 350,
                 name: str = "flsc"):
        self.gammas = tuple(float(g) for g in gammas)
        self.boundaries = tuple(int(b) for b in boundaries)
        if len(self.gammas) != len(self.boundaries) + 1 or any(g < 0 for g in self.gammas):
            raise ValueError(f"{name}: need one gamma >= 0 per phase ({len(self.boundaries) + 1}); got {gammas}.")
        self.reference_epochs = int(reference_epochs)
        self.total_epochs = self.reference_epochs
        self.epoch = 1
        self.__name__ = name

    def set_epoch(self, epoch: int, total_epochs: int | None = None) -> None:
        """Set the current epoch (1-based) and, optionally, the length of the run."""
        if total_epochs is not None:
            self.total_epochs = int(total_epochs)
        self.epoch = int(epoch)

    def switch_epochs(self) -> tuple:
        """The last epoch of each phase but the final one, scaled to the run length."""
        return tuple(round(b * self.total_epochs / self.reference_epochs) for b in self.boundaries)

    @property
    def gamma(self) -> float:
        """The gamma of the current epoch."""
        phase = sum(self.epoch > b for b in self.switch_epochs())
        return self.gammas[phase]

    def __call__(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return focal_loss(_upcast(logits), targets, self.gamma)

    def __repr__(self) -> str:
        return f"EpochScheduledFocalLoss({self.__name__!r}, epoch={self.epoch}/{self.total_epochs}, gamma={self.gamma:g})"


def brier_loss(logits: torch.Tensor, targets: torch.Tensor, reduction: str = "mean") -> torch.Tensor:
    """Brier score ``sum_k (softmax(logits)_k - 1[k = y])^2`` (Brier 1950), mean over the batch by default.

    Mukhoti et al. (2020), Sec. 5.1: "the squared error between the predicted softmax vector and the one-hot
    ground truth encoding"; summed over the classes as in the official ``Losses/brier_score.py``.
    """
    _check_inputs(logits, targets, reduction)
    p = F.softmax(_upcast(logits), dim=1)
    onehot = F.one_hot(targets.long(), p.shape[1]).to(p.dtype)
    return _reduce(((p - onehot) ** 2).sum(dim=1), reduction)


def label_smoothing_loss(logits: torch.Tensor, targets: torch.Tensor, alpha: float,
                         reduction: str = "mean") -> torch.Tensor:
    r"""Cross-entropy against smoothed targets ``s = (1 - alpha) q + alpha (1 - q) / (K - 1)``.

    Mukhoti et al. (2020), Sec. 5.1 (LS-0.05 in their tables): the true class gets 1 - alpha and each other
    class alpha / (K - 1). This is **not** the convention of Mueller et al. (2019) and of
    ``torch.nn.functional.cross_entropy(label_smoothing=alpha)``, which give every class alpha / K.
    """
    _check_inputs(logits, targets, reduction)
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0 <= alpha < 1:
        raise ValueError(f"alpha must be a number in [0, 1); got {alpha!r}.")
    log_p = F.log_softmax(_upcast(logits), dim=1)
    k = log_p.shape[1]
    onehot = F.one_hot(targets.long(), k).to(log_p.dtype)
    smooth = (1 - alpha) * onehot + alpha * (1 - onehot) / (k - 1)
    return _reduce(-(smooth * log_p).sum(dim=1), reduction)


def _make_flsd(name: str, arg: str | None) -> Callable:
    from calib.focal import SCHEDULES

    key = f"flsd-{arg}"
    if key not in SCHEDULES:
        raise ValueError(f"loss {name!r}: the sample-dependent schedules are {', '.join(map(repr, SCHEDULES))}.")
    schedule = SCHEDULES[key]

    def loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return sample_dependent_focal_loss(logits, targets, schedule)

    loss.__name__ = key.replace("-", "_")
    loss.__doc__ = f"{schedule.name}: focal loss with gamma {schedule.gammas} on the bins cut at {schedule.edges}."
    loss.schedule = schedule
    return loss


def _make_flsc(name: str, arg: str | None) -> Callable:
    key = f"flsc-{arg}"
    if key not in FLSC_SCHEDULES:
        raise ValueError(f"loss {name!r}: the epoch schedules are {', '.join(map(repr, FLSC_SCHEDULES))}.")
    gammas, boundaries, reference = FLSC_SCHEDULES[key]
    return EpochScheduledFocalLoss(gammas, boundaries, reference, name=key)


def _make_brier(name: str, arg: str | None) -> Callable:
    if arg is not None:
        raise ValueError(f"loss {name!r}: 'brier' takes no parameter; write 'brier'.")
    return brier_loss


def _make_ls(name: str, arg: str | None) -> Callable:
    try:
        alpha = float(arg) if arg is not None else None
    except ValueError:
        alpha = None
    if alpha is None or not 0 <= alpha < 1:
        raise ValueError(f"loss {name!r}: write 'ls-<alpha>' with 0 <= alpha < 1, e.g. 'ls-0.05'.")

    def loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return label_smoothing_loss(logits, targets, alpha)

    loss.__name__ = f"label_smoothing_{arg}"
    loss.__doc__ = f"Label smoothing with alpha = {alpha:g} (Mukhoti et al.'s alpha / (K - 1)), mean over the batch."
    loss.alpha = alpha
    return loss


LOSSES.update({"flsd": _make_flsd, "flsc": _make_flsc, "brier": _make_brier, "ls": _make_ls})


# ==========================================================================================================
# Soft calibration objectives and other secondary losses (Karandikar et al. 2021; Kumar et al. 2018)
# ==========================================================================================================
#
# Secondary losses are batch statistics, not sums over samples: each takes (logits, targets) and returns one
# scalar for the whole batch (there is no per-sample reduction). They are added to a primary loss with a
# weight, PL + beta * SL (Karandikar et al. 2021, Sec. 5.1): ``combined_loss`` / ``get_loss(name,
# secondary=..., secondary_weight=...)``; the secondary registry is :data:`SECONDARY_LOSSES`. The correctness
# a_i = 1[argmax = y_i] is a constant (it has no gradient); gradients flow through the confidences, the
# memberships and the entropies. numpy float64 references of the soft binning: :mod:`calib.soft_binning`.

__all__ += ["SECONDARY_LOSSES", "avuc", "avuc_gs", "combined_loss", "confidence_incentive", "get_secondary_loss",
            "mmce", "s_avuc", "secondary_loss_names", "soft_binned_ece"]

_SB_NORMS = {"l1": 1, "l2": 2}
_SB_ESTIMATORS = ("bin", "label")
#: Floor of the AvUC / S-AvUC denominator n_AC + n_IU, as in the released code (it is 0 only when no sample of
#: the batch is accurate-and-certain or inaccurate-and-uncertain).
AVUC_EPS = 1e-5


def _positive_number(value, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0 < value < float("inf"):
        raise ValueError(f"{name} must be a finite number > 0; got {value!r}.")
    return float(value)


def _top_label(logits: torch.Tensor, targets: torch.Tensor):
    """log-probabilities, confidence c = max softmax (from log_softmax, so never above 1) and correctness a."""
    log_p = F.log_softmax(logits, dim=1)
    log_c, pred = log_p.max(dim=1)
    correct = (pred == targets).to(logits.dtype)
    return log_p, log_c.exp(), correct


def _safe_root(x: torch.Tensor, p: int) -> torch.Tensor:
    """x ** (1/p) for x >= 0, with gradient 0 (not inf or nan) where x is exactly 0."""
    if p == 1:
        return x
    positive = x > 0
    return torch.where(positive, torch.where(positive, x, torch.ones_like(x)) ** (1.0 / p), torch.zeros_like(x))


def _safe_divide(num: torch.Tensor, den: torch.Tensor) -> torch.Tensor:
    """num / den where den > 0, else 0 (with zero gradient): an empty soft bin carries no weight."""
    positive = den > 0
    return torch.where(positive, num / torch.where(positive, den, torch.ones_like(den)), torch.zeros_like(num))


def soft_binned_ece(logits: torch.Tensor, targets: torch.Tensor, n_bins: int = 15, temperature: float = 0.01,
                    norm: str = "l1", estimator: str = "bin") -> torch.Tensor:
    r"""Soft-binned ECE of a batch, SB-ECE\ :sub:`bin,p` (Eq. 11) or SB-ECE\ :sub:`lb,p` (Eq. 12).

    Karandikar et al. (2021), Sec. 4.1. From the top-label confidences :math:`c_i = \max_k \mathrm{softmax}(z_i)_k`
    and correctness :math:`a_i`, with soft memberships :math:`u_{ij} = \mathrm{softmax}_j(-(c_i - \xi_j)^2/T)`
    on M equal-width bins with centres :math:`\xi_j = (j - \frac12)/M`: :math:`S_j = \sum_i u_{ij}`,
    :math:`C_j = \sum_i u_{ij} c_i / S_j`, :math:`A_j = \sum_i u_{ij} a_i / S_j` (Eqs. 8-10), and

    - ``estimator="bin"``: :math:`(\sum_j \frac{S_j}{N}|A_j - C_j|^p)^{1/p}` (Eq. 11);
    - ``estimator="label"``: :math:`(\frac1N\sum_i\sum_j u_{ij}|A_j - c_i|^p)^{1/p}` (Eq. 12), the variant
      the paper trains with (App. G).

    As T -> 0 it tends to the hard equal-width ECE (``calib.metrics.ece`` with ``norm`` and
    ``estimator``), but not uniformly: a confidence at distance delta from a bin edge stays split between
    two bins until T << 2 delta / M (``calib.soft_binning.hard_limit_temperature``).

    Parameters
    ----------
    logits : torch.Tensor, shape (N, K)
    targets : torch.Tensor of int, shape (N,)
    n_bins : int
        M (the paper fixes 15).
    temperature : float
        T > 0 (tuned in the paper; grid unstated).
    norm : {"l1", "l2"}
        p = 1 or 2.
    estimator : {"bin", "label"}

    Returns
    -------
    torch.Tensor
        A scalar, differentiable in ``logits``.

    Notes
    -----
    Memberships are a log-softmax over bins, so they never underflow to 0/0: the released code's
    ``exp(-(b - c)^2 / T) / sum`` is NaN in float32 once every exponent is below about -103, e.g. for T = 1e-5
    and c on a bin edge. Bins whose mass :math:`S_j` underflows to exactly 0 carry no weight, and the 1/p-th
    root has gradient 0 where its argument is exactly 0. The released code's training loss differs in
    details the book does not copy: centres on [1/K, 1], memberships smoothed by 1e-5, and the squared
    SB-ECE\ :sub:`lb,2` without its root.
    """
    _check_inputs(logits, targets, "mean")
    if isinstance(n_bins, bool) or not isinstance(n_bins, numbers.Integral) or n_bins < 1:
        raise ValueError(f"n_bins must be an integer >= 1; got {n_bins!r}.")
    temperature = _positive_number(temperature, "temperature")
    if norm not in _SB_NORMS:
        raise ValueError(f"norm={norm!r} is not supported; choose 'l1' or 'l2'.")
    if estimator not in _SB_ESTIMATORS:
        raise ValueError(f"estimator={estimator!r} is not supported; choose 'bin' or 'label'.")
    p = _SB_NORMS[norm]
    n = logits.shape[0]
    _, conf, correct = _top_label(logits, targets)
    centres = (torch.arange(n_bins, device=logits.device, dtype=logits.dtype) + 0.5) / n_bins
    u = F.softmax(-(conf[:, None] - centres) ** 2 / temperature, dim=1)      # (N, M), log-sum-exp inside
    mass = u.sum(dim=0)                                                        # S_j
    if estimator == "bin":
        gap = _safe_divide(u.T @ (correct - conf), mass)                      # A_j - C_j
        value = (mass * gap.abs() ** p).sum() / n
    else:
        acc = _safe_divide(u.T @ correct, mass)                               # A_j
        value = (u * (acc[None, :] - conf[:, None]).abs() ** p).sum() / n
    return _safe_root(value, p)


def _entropy(log_p: torch.Tensor) -> torch.Tensor:
    """Shannon entropy in nats from log-probabilities (finite and differentiable at a saturated softmax)."""
    return -(log_p.exp() * log_p).sum(dim=1)


def _avuc_ratio(n_au, n_ic, n_ac, n_iu):
    return torch.log1p((n_au + n_ic) / torch.clamp(n_ac + n_iu, min=AVUC_EPS))


def avuc(logits: torch.Tensor, targets: torch.Tensor, kappa: float, stop_gradient: bool = False) -> torch.Tensor:
    r"""AvUC loss of Krishnan & Tickoo (2020), Karandikar et al. (2021) Eqs. 13-14.

    Each sample is accurate (A) or inaccurate (I), and certain (C) or uncertain (U) according to whether its
    entropy :math:`h_i` (nats) is below the threshold :math:`\kappa` (a hard split, no gradient). With
    confidence :math:`c_i`:

    .. math:: \mathrm{AvUC} = \log\Big(1 + \frac{n_{AU} + n_{IC}}{n_{AC} + n_{IU}}\Big),\quad
              n_{AU} = \sum_{AU} c_i\tanh h_i,\ n_{IC} = \sum_{IC}(1-c_i)(1-\tanh h_i),\ 
              n_{AC} = \sum_{AC} c_i(1-\tanh h_i),\ n_{IU} = \sum_{IU}(1-c_i)\tanh h_i.

    ``stop_gradient=True`` is AvUC-GS (App. F): the multiplicands :math:`c_i` and :math:`1 - c_i` are constants,
    so only the entropies carry gradient. It equals :math:`-\log\mathrm{AvU}` with the relaxed counts. The
    denominator is floored at :data:`AVUC_EPS` as in the released code.

    Parameters
    ----------
    logits : torch.Tensor, shape (N, K)
    targets : torch.Tensor of int, shape (N,)
    kappa : float
        Entropy threshold in nats, in (0, log K) to be useful (tuned in the paper).
    stop_gradient : bool
        AvUC-GS.
    """
    _check_inputs(logits, targets, "mean")
    kappa = _positive_number(kappa, "kappa")
    log_p, conf, correct = _top_label(logits, targets)
    h = _entropy(log_p)
    c = conf.detach() if stop_gradient else conf
    th = torch.tanh(h)
    acc = correct > 0.5
    cert = (h < kappa).detach()
    zero = torch.zeros_like(c)
    n_ac = torch.where(acc & cert, c * (1 - th), zero).sum()
    n_au = torch.where(acc & ~cert, c * th, zero).sum()
    n_ic = torch.where(~acc & cert, (1 - c) * (1 - th), zero).sum()
    n_iu = torch.where(~acc & ~cert, (1 - c) * th, zero).sum()
    return _avuc_ratio(n_au, n_ic, n_ac, n_iu)


def avuc_gs(logits: torch.Tensor, targets: torch.Tensor, kappa: float) -> torch.Tensor:
    """AvUC with gradient stopping on the confidence multiplicands (Karandikar et al. 2021, App. F)."""
    return avuc(logits, targets, kappa, stop_gradient=True)


def _soft_uncertainty(h_star: torch.Tensor, kappa: float, temperature: float) -> torch.Tensor:
    """t_{kappa,T}(h*) = sigmoid((logit h* - logit kappa) / T); exactly 0 at h* = 0 and 1 at h* >= 1, with
    zero gradient there (the entropy's own gradient vanishes at those points, and inf * 0 would be nan)."""
    inside = (h_star > 0) & (h_star < 1)
    safe = torch.where(inside, h_star, torch.full_like(h_star, 0.5))
    z = (torch.log(safe) - torch.log1p(-safe) - math.log(kappa / (1 - kappa))) / temperature
    return torch.where(inside, torch.sigmoid(z), (h_star >= 1).to(h_star.dtype))


def s_avuc(logits: torch.Tensor, targets: torch.Tensor, kappa: float = 0.5, temperature: float = 0.1) -> torch.Tensor:
    r"""Soft AvUC, Karandikar et al. (2021) Eqs. 15-16.

    The hard certain/uncertain split of :func:`avuc` becomes the soft uncertainty
    :math:`t_i = t_{\kappa,T}(h_i^*)` of the normalised entropy :math:`h^*_i = h_i/\log K` (Sec. 4.2), and it
    *replaces* the confidence multiplicands:

    .. math:: n'_{AU} = \sum_{a_i=1} t_i\tanh h_i,\ n'_{IC} = \sum_{a_i=0}(1-t_i)(1-\tanh h_i),\ 
              n'_{AC} = \sum_{a_i=1}(1-t_i)(1-\tanh h_i),\ n'_{IU} = \sum_{a_i=0} t_i\tanh h_i,

    with :math:`\tanh` of the raw entropy (nats), as printed and as in the released code. As T -> 0 it
    becomes AvUC with the multiplicands :math:`c_i, 1-c_i` deleted, not AvUC or AvUC-GS.

    Parameters
    ----------
    kappa : float
        Threshold on the normalised entropy, in (0, 1) (the released code calls it ``theta``).
    temperature : float
        T > 0; T = 1 with kappa = 1/2 makes t the identity.
    """
    _check_inputs(logits, targets, "mean")
    kappa = _positive_number(kappa, "kappa")
    if kappa >= 1:
        raise ValueError(f"kappa must be in (0, 1) (a threshold on entropy / log K); got {kappa}.")
    temperature = _positive_number(temperature, "temperature")
    if logits.shape[1] < 2:
        raise ValueError("s_avuc needs at least 2 classes (the entropy is normalised by log K).")
    log_p, _, correct = _top_label(logits, targets)
    h = _entropy(log_p)
    t = _soft_uncertainty(h / math.log(logits.shape[1]), kappa, temperature)
    th = torch.tanh(h)
    acc = correct > 0.5
    zero = torch.zeros_like(t)
    n_au = torch.where(acc, t * th, zero).sum()
    n_ac = torch.where(acc, (1 - t) * (1 - th), zero).sum()
    n_ic = torch.where(~acc, (1 - t) * (1 - th), zero).sum()
    n_iu = torch.where(~acc, t * th, zero).sum()
    return _avuc_ratio(n_au, n_ic, n_ac, n_iu)


def mmce(logits: torch.Tensor, targets: torch.Tensor, bandwidth: float = 0.4, weighted: bool = False) -> torch.Tensor:
    r"""Maximum mean calibration error of a batch (Kumar et al. 2018), with a Laplacian kernel.

    With confidences :math:`r_i`, correctness :math:`a_i` and :math:`k(r, r') = \exp(-|r - r'|/w)`, w = 0.4:

    - unweighted, MMCE\ :sub:`m`: :math:`\big(\frac1{N^2}\sum_{i,j}(a_i - r_i)(a_j - r_j)k(r_i, r_j)\big)^{1/2}`;
    - ``weighted=True``, MMCE\ :sub:`w`: the RKHS distance between the mean embeddings of
      :math:`(1 - r)\,k(r, \cdot)` over the correct samples and :math:`r\,k(r, \cdot)` over the incorrect ones,
      :math:`\big(\frac{1}{m^2}\sum_{C\times C}(1-r_i)(1-r_j)k + \frac1{n^2}\sum_{W\times W} r_i r_j k
      - \frac{2}{mn}\sum_{C\times W}(1-r_i) r_j k\big)^{1/2}` with m correct and n incorrect samples; 0 when
      either group is empty (as in the official code).

    The official TensorFlow code (aviralkumar2907/MMCE) and its port in torrvision/focal_calibration return the
    unweighted value squared, and compute each double sum of the weighted one as a mean over its pairs (already
    divided by m^2, n^2, mn) and then divide it by m^2, n^2, mn again; calib divides once, which makes MMCE_w the
    RKHS distance above. The cost is quadratic in the batch size (an N x N kernel matrix). The square root has
    gradient 0 where its argument is exactly 0.

    Parameters
    ----------
    logits : torch.Tensor, shape (N, K)
    targets : torch.Tensor of int, shape (N,)
    bandwidth : float
        Width w of the Laplacian kernel (0.4 in Kumar et al.'s code).
    weighted : bool
        MMCE_w instead of MMCE_m.
    """
    _check_inputs(logits, targets, "mean")
    bandwidth = _positive_number(bandwidth, "bandwidth")
    _, r, a = _top_label(logits, targets)
    kernel = torch.exp(-(r[:, None] - r[None, :]).abs() / bandwidth)
    if not weighted:
        d = a - r
        return _safe_root((d[:, None] * d[None, :] * kernel).sum() / r.shape[0] ** 2, 2)
    m, n = a.sum(), (1 - a).sum()
    if m == 0 or n == 0:
        return (r * 0).sum()                      # 0, keeping the graph
    x = a * (1 - r) / m - (1 - a) * r / n          # signed embedding weights of the two groups
    return _safe_root((x[:, None] * x[None, :] * kernel).sum(), 2)


# -------------------------------------------------------------------------------- the secondary registry

def _sb_ece_secondary(temperature: float = 0.01, n_bins: int = 15, norm: str = "l2", estimator: str = "label"):
    def loss(logits, targets):
        return soft_binned_ece(logits, targets, n_bins=n_bins, temperature=temperature, norm=norm,
                               estimator=estimator)
    loss.__doc__ = f"SB-ECE_{'lb' if estimator == 'label' else 'bin'},{norm[1]} (M = {n_bins}, T = {temperature:g})."
    return loss


def _s_avuc_secondary(kappa: float = 0.5, temperature: float = 0.1):
    def loss(logits, targets):
        return s_avuc(logits, targets, kappa=kappa, temperature=temperature)
    loss.__doc__ = f"S-AvUC (kappa = {kappa:g}, T = {temperature:g})."
    return loss


def _avuc_secondary(kappa: float | None = None, stop_gradient: bool = False):
    def loss(logits, targets):
        k = 0.5 * math.log(logits.shape[1]) if kappa is None else kappa
        return avuc(logits, targets, kappa=k, stop_gradient=stop_gradient)
    label = "half the maximum entropy, log(K) / 2" if kappa is None else f"{kappa:g} nats"
    loss.__doc__ = f"AvUC{'-GS' if stop_gradient else ''} (kappa = {label})."
    return loss


def _mmce_secondary(bandwidth: float = 0.4, weighted: bool = False):
    def loss(logits, targets):
        return mmce(logits, targets, bandwidth=bandwidth, weighted=weighted)
    loss.__doc__ = f"MMCE_{'w' if weighted else 'm'} (Laplacian kernel, width {bandwidth:g})."
    return loss


#: Secondary (calibration) losses by name: ``name -> factory(**params)`` returning ``(logits, targets) -> scalar``.
#: The defaults are the book's (the paper tunes T, kappa and beta and does not report the values):
#:
#: - ``"sb-ece"``: SB-ECE_lb,2 (Eq. 12, the variant App. G trains with), M = 15, T = 0.01;
#: - ``"s-avuc"``: S-AvUC (Eq. 15), kappa = 0.5, T = 0.1;
#: - ``"avuc"``, ``"avuc-gs"``: AvUC (Eq. 13) and AvUC-GS (App. F), kappa = log(K) / 2 nats;
#: - ``"mmce"``, ``"mmce-w"``: MMCE_m and MMCE_w (Kumar et al. 2018), Laplacian kernel of width 0.4.
SECONDARY_LOSSES: dict[str, Callable] = {
    "sb-ece": _sb_ece_secondary,
    "s-avuc": _s_avuc_secondary,
    "avuc": _avuc_secondary,
    "avuc-gs": lambda kappa=None: _avuc_secondary(kappa, stop_gradient=True),
    "mmce": _mmce_secondary,
    "mmce-w": lambda bandwidth=0.4: _mmce_secondary(bandwidth, weighted=True),
}


def secondary_loss_names() -> str:
    """The accepted secondary-loss names, for error messages and ``--help``."""
    return ", ".join(repr(k) for k in SECONDARY_LOSSES)


def get_secondary_loss(name: str, **params) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    """The secondary loss called ``name`` (see :data:`SECONDARY_LOSSES`), with its parameters overridden by
    ``params`` (e.g. ``get_secondary_loss("sb-ece", temperature=1e-3)``).

    Raises
    ------
    ValueError
        For an unknown name or parameter.
    """
    if not isinstance(name, str) or name.strip().lower() not in SECONDARY_LOSSES:
        raise ValueError(f"unknown secondary loss {name!r}; choose from {secondary_loss_names()}.")
    key = name.strip().lower()
    try:
        loss = SECONDARY_LOSSES[key](**params)
    except TypeError as exc:
        raise ValueError(f"secondary loss {key!r}: {exc}; see calib.losses.SECONDARY_LOSSES for its parameters.") \
            from None
    loss.__name__ = key.replace("-", "_")
    loss.secondary_name = key
    return loss


def combined_loss(primary, secondary, weight: float = 1.0) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    r"""The composite training loss PL + beta * SL (Karandikar et al. 2021, Sec. 5.1; the L2 term is the
    optimiser's weight decay).

    Parameters
    ----------
    primary : str or callable
        A name for :func:`get_loss` (``"ce"``, ``"fl-3"``, ...) or a callable ``(logits, targets) -> scalar``.
    secondary : str or callable
        A name for :func:`get_secondary_loss` (``"sb-ece"``, ``"s-avuc"``, ``"avuc"``, ``"avuc-gs"``,
        ``"mmce"``, ``"mmce-w"``) or a callable.
    weight : float
        beta >= 0.

    Returns
    -------
    callable
        ``(logits, targets) -> primary + weight * secondary``, with attributes ``primary``, ``secondary``
        and ``weight``, and a method ``parts(logits, targets)`` returning both terms (for logging).
    """
    if isinstance(weight, bool) or not isinstance(weight, numbers.Real) or not 0 <= weight < float("inf"):
        raise ValueError(f"secondary_weight must be a finite number >= 0; got {weight!r}.")
    weight = float(weight)
    pl = get_loss(primary) if isinstance(primary, str) else primary
    sl = get_secondary_loss(secondary) if isinstance(secondary, str) else secondary
    if not callable(pl) or not callable(sl):
        raise ValueError("primary and secondary must be loss names or callables (logits, targets) -> scalar tensor.")

    def loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return pl(logits, targets) + weight * sl(logits, targets)

    def parts(logits: torch.Tensor, targets: torch.Tensor):
        return pl(logits, targets), sl(logits, targets)

    pname = primary if isinstance(primary, str) else getattr(primary, "__name__", "primary")
    sname = secondary if isinstance(secondary, str) else getattr(secondary, "__name__", "secondary")
    loss.__name__ = f"{pname}+{weight:g}*{sname}"
    loss.__doc__ = f"{pname} + {weight:g} * {sname} (mean over the batch; the secondary is a batch statistic)."
    loss.primary, loss.secondary, loss.weight, loss.parts = pl, sl, weight, parts
    if hasattr(pl, "set_epoch"):                      # epoch-scheduled primaries (FLSc) keep their schedule
        loss.set_epoch = pl.set_epoch
    return loss


def confidence_incentive(loss, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    r"""How gradient descent on ``loss`` moves each sample's confidence: :math:`-\langle \nabla_{z_i} c_i,
    \nabla_{z_i} L\rangle`, shape (N,).

    The rate of change of :math:`c_i = \max\mathrm{softmax}(z_i)` along the negative gradient of the batch loss
    with respect to the logits (the derivative in the step size of one gradient step, at step 0). Positive:
    the loss pushes sample i towards more confidence. Used for the AvUC mis-incentive of Karandikar et al.
    (2021), Sec. 4.2 and App. F.
    """
    z = logits.detach().clone().requires_grad_(True)
    (grad_loss,) = torch.autograd.grad(loss(z, targets), z)
    conf = F.softmax(z, dim=1).max(dim=1).values
    (grad_conf,) = torch.autograd.grad(conf.sum(), z)      # row i: d c_i / d z_i (rows are independent)
    return -(grad_conf * grad_loss).sum(dim=1).detach()


def _make_mmce(name: str, arg: str | None) -> Callable:
    """"mmce-<lambda>": cross-entropy + lambda * MMCE_w, the MMCE baseline of Mukhoti et al. (2020), Sec. 5.1
    (lambda = 2 for images, 8 for text), after Kumar et al. (2018)."""
    try:
        lam = float(arg) if arg is not None else None
    except ValueError:
        lam = None
    if lam is None or not 0 <= lam < float("inf"):
        raise ValueError(f"loss {name!r}: write 'mmce-<lambda>' with lambda >= 0, e.g. 'mmce-2' (cross-entropy + "
                         f"2 * MMCE_w); for MMCE alone as a secondary loss use secondary='mmce' or 'mmce-w'.")
    loss = combined_loss(cross_entropy, _mmce_secondary(weighted=True), lam)
    loss.__name__ = f"mmce_{arg}"
    loss.__doc__ = f"Cross-entropy + {lam:g} * MMCE_w (Kumar et al. 2018; Mukhoti et al. 2020's baseline)."
    return loss


LOSSES.update({"mmce": _make_mmce})
