"""Batch-level training objectives in torch: one scalar for the whole batch, not a sum over samples.

- the selective AURC loss of Zhou et al. (2025), Eq. 17, whose per-sample weights come from the CDF of the
  batch's confidence scores (:func:`au_weights`, :func:`selective_au_loss`);
- the soft calibration objectives of Karandikar et al. (2021): SB-ECE (Eqs. 11-12,
  :func:`soft_binned_ece_loss`), AvUC and AvUC-GS (Eqs. 13-14, App. F), S-AvUC (Eqs. 15-16);
- MMCE (Kumar et al. 2018), Mukhoti et al. (2020)'s baseline;
- :func:`confidence_incentive`, how a loss moves each sample's confidence (Karandikar et al., Sec. 4.2).

The correctness a_i = 1[argmax = y_i] is a constant (it has no gradient); gradients flow through the
confidences, the memberships and the entropies. Secondary losses are added to a primary one, PL + beta * SL,
by :func:`calib.losses.registry.combined_loss`. The numpy float64 references of the soft binning are in
:mod:`calib.soft_binning` (``soft_binning.soft_binned_ece`` takes confidences and correctness; this module's
:func:`soft_binned_ece_loss` takes logits and targets).
"""

from __future__ import annotations

import math
import numbers
from typing import cast

import torch
import torch.nn.functional as F

from calib._validate import check_positive
from calib.losses._common import check_inputs, p_log_p, reduce
from calib.losses.functional import confidence_scores
from calib.metrics import confidence_range

__all__ = ["au_weights", "selective_au_loss", "soft_binned_ece_loss", "avuc", "avuc_gs", "s_avuc", "mmce",
           "confidence_incentive", "AVUC_EPS", "check_au_args"]

_CDFS = ("bins", "exact")

# ----------------------------------------------------------------- Zhou et al. (2025): the selective AURC loss

def check_au_args(kappa, nu, n_bins, cdf) -> None:
    """Refuse options of the selective AURC loss outside their domains (:func:`au_weights` lists them), with a
    ValueError naming the option; the registry checks a name such as ``"aurc-kappa=0.8"`` with it when it
    builds the loss, before any batch is seen."""
    if isinstance(kappa, bool) or not isinstance(kappa, numbers.Real) or not 0 < cast(float, kappa) <= 1:
        raise ValueError(f"kappa (the low-confidence coverage) must be in (0, 1]; got {kappa!r}. kappa = 1 is the "
                         f"full AURC.")
    if isinstance(nu, bool) or not isinstance(nu, numbers.Real) or not 0 < cast(float, nu) < float("inf"):
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
      :math:`\kappa = 1` case is the identity of
      :func:`calib.metrics.risk_coverage_curve <calib.metrics.risk_coverage.risk_coverage_curve>`); equal scores
      share their mean weight. Piecewise constant in the scores: no gradient. Cost O(n log n).

    Parameters
    ----------
    scores : torch.Tensor, shape (n,)
        CSF values, e.g. from :func:`~calib.losses.functional.confidence_scores`.
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
    check_au_args(kappa, nu, n_bins, cdf)
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
    check_inputs(logits, targets, reduction)
    log_p = F.log_softmax(logits, dim=1).gather(1, targets.long().unsqueeze(1)).squeeze(1)
    scores = confidence_scores(logits, csf)
    rng = edges if edges is not None else confidence_range(csf, logits.shape[1])
    beta = au_weights(scores, kappa=kappa, nu=nu, n_bins=n_bins, edges=rng, cdf=cdf, normalize=normalize)
    if detach:
        beta = beta.detach()
    return reduce(-beta * log_p, reduction)



# ------------------------------------------ Karandikar et al. (2021) and Kumar et al. (2018): SB-ECE, AvUC, MMCE

_SB_NORMS = {"l1": 1, "l2": 2}
_SB_ESTIMATORS = ("bin", "label")
#: Floor of the AvUC / S-AvUC denominator n_AC + n_IU, as in the released code (it is 0 only when no sample of
#: the batch is accurate-and-certain or inaccurate-and-uncertain).
AVUC_EPS = 1e-5



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


def soft_binned_ece_loss(logits: torch.Tensor, targets: torch.Tensor, n_bins: int = 15, temperature: float = 0.01,
                    norm: str = "l1", estimator: str = "bin") -> torch.Tensor:
    r"""Soft-binned ECE of a batch as a differentiable training loss, SB-ECE\ :sub:`bin,p` (Eq. 11) or
    SB-ECE\ :sub:`lb,p` (Eq. 12).

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
    and c on a bin edge. The bin averages :math:`A_j, C_j` are means with weights :math:`u_{ij} / S_j`, computed
    as a softmax of :math:`\log u_{ij}` over the samples, so no mass :math:`S_j` is ever divided by: a far bin's
    :math:`S_j` underflows in float32 once every confidence of the batch is above about 0.98, and dividing by it
    made the gradient NaN. Such a bin's share :math:`S_j / N` underflows to 0 and it carries no weight; the 1/p-th
    root has gradient 0 where its argument is exactly 0. The released code's training loss differs in
    details the book does not copy: centres on [1/K, 1], memberships smoothed by 1e-5, and the squared
    SB-ECE\ :sub:`lb,2` without its root.
    """
    check_inputs(logits, targets, "mean")
    if isinstance(n_bins, bool) or not isinstance(n_bins, numbers.Integral) or n_bins < 1:
        raise ValueError(f"n_bins must be an integer >= 1; got {n_bins!r}.")
    temperature = check_positive(temperature, "temperature")
    if norm not in _SB_NORMS:
        raise ValueError(f"norm={norm!r} is not supported; choose 'l1' or 'l2'.")
    if estimator not in _SB_ESTIMATORS:
        raise ValueError(f"estimator={estimator!r} is not supported; choose 'bin' or 'label'.")
    p = _SB_NORMS[norm]
    n = logits.shape[0]
    _, conf, correct = _top_label(logits, targets)
    centres = (torch.arange(n_bins, device=logits.device, dtype=conf.dtype) + 0.5) / n_bins
    log_u = F.log_softmax(-(conf[:, None] - centres) ** 2 / temperature, dim=1)   # (N, M) log memberships
    # The per-bin averages A_j, C_j are weighted means over the samples with weights u_ij / S_j, i.e. a softmax of
    # log u over the samples: no division by a mass S_j that can underflow (in float32 its gradient was nan).
    weights = torch.softmax(log_u, dim=0)                                      # (N, M), columns sum to 1
    if estimator == "bin":
        share = torch.exp(torch.logsumexp(log_u, dim=0) - math.log(n))         # S_j / N
        gap = weights.T @ (correct - conf)                                     # A_j - C_j
        value = (share * gap.abs() ** p).sum()
    else:
        acc = weights.T @ correct                                              # A_j
        value = (log_u.exp() * (acc[None, :] - conf[:, None]).abs() ** p).sum() / n
    return _safe_root(value, p)


def _entropy(log_p: torch.Tensor) -> torch.Tensor:
    """Shannon entropy in nats from log-probabilities, finite and differentiable at a saturated softmax and where
    a class is masked (log p = -inf: 0 log 0 = 0)."""
    return -p_log_p(log_p.exp(), log_p).sum(dim=1)


def _avuc_ratio(n_au, n_ic, n_ac, n_iu):
    return torch.log1p((n_au + n_ic) / torch.clamp(n_ac + n_iu, min=AVUC_EPS))


def avuc(logits: torch.Tensor, targets: torch.Tensor, kappa: float, stop_gradient: bool = False) -> torch.Tensor:
    r"""AvUC loss of Krishnan & Tickoo (2020), Karandikar et al. (2021) Eqs. 13-14.

    Each sample is accurate (A) or inaccurate (I), and certain (C) or uncertain (U) according to whether its
    entropy :math:`h_i` (nats) is below the threshold :math:`\kappa` (a hard split, no gradient). With
    confidence :math:`c_i`:

    .. math::

        \begin{aligned}
        \mathrm{AvUC} &= \log\Big(1 + \frac{n_{AU} + n_{IC}}{n_{AC} + n_{IU}}\Big), \\
        n_{AU} &= \sum_{AU} c_i\tanh h_i, & n_{IC} &= \sum_{IC}(1-c_i)(1-\tanh h_i), \\
        n_{AC} &= \sum_{AC} c_i(1-\tanh h_i), & n_{IU} &= \sum_{IU}(1-c_i)\tanh h_i.
        \end{aligned}

    ``stop_gradient=True`` is AvUC-GS (App. F): the multiplicands :math:`c_i` and :math:`1 - c_i` are constants,
    so only the entropies carry gradient. It equals :math:`-\log\mathrm{AvU}` with the relaxed counts. The
    denominator is floored at :data:`AVUC_EPS` as in the released code. The entropy is that of the prediction
    itself, from ``log_softmax``, as Eqs. 13-14 print it: the released ``get_avuc_loss`` takes the entropy of
    :math:`(1 - 10^{-5})p + 10^{-5}/K` instead (its guard against log 0), which moves the loss by 1e-5 to 2e-5
    on chapter 08's batches; without that line it gives this function's value to 1e-16 (chapter 08,
    ``code-avuc-entropy``).

    Parameters
    ----------
    logits : torch.Tensor, shape (N, K)
    targets : torch.Tensor of int, shape (N,)
    kappa : float
        Entropy threshold in nats, in (0, log K) to be useful (tuned in the paper).
    stop_gradient : bool
        AvUC-GS.
    """
    check_inputs(logits, targets, "mean")
    if logits.shape[1] < 2:
        raise ValueError(f"avuc needs at least 2 classes (with one, every entropy is 0); logits has K = "
                         f"{logits.shape[1]}.")
    kappa = check_positive(kappa, "kappa")
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

    The entropy :math:`h_i` is that of softmax(z) itself, from ``log_softmax`` (finite at a saturated softmax),
    as Eqs. 15-16 print it, and this is the loss the book trains. The released ``get_soft_avuc_loss`` differs
    in that one line: it takes the entropy of :math:`(1 - 10^{-5})p + 10^{-5}/K`, its guard against log 0,
    which moves the loss by 1.4e-5 (64 x 10 logits) to 2.4e-4 (512 sharp predictions over 100 classes) in
    chapter 08; without it the released formula gives this function's value to 1e-16 (``code-avuc-entropy``).

    Parameters
    ----------
    kappa : float
        Threshold on the normalised entropy, in (0, 1) (the released code calls it ``theta``).
    temperature : float
        T > 0; T = 1 with kappa = 1/2 makes t the identity.
    """
    check_inputs(logits, targets, "mean")
    kappa = check_positive(kappa, "kappa")
    if kappa >= 1:
        raise ValueError(f"kappa must be in (0, 1) (a threshold on entropy / log K); got {kappa}.")
    temperature = check_positive(temperature, "temperature")
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
    check_inputs(logits, targets, "mean")
    bandwidth = check_positive(bandwidth, "bandwidth")
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


