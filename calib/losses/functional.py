"""Per-sample training losses in torch: each takes ``logits`` (N, K) and integer ``targets`` (N,).

Every loss here is a mean (or, with ``reduction``, a sum or the per-sample values) of a function of one
sample's logits and label: cross-entropy, focal loss (Lin et al. 2017; Mukhoti et al. 2020, Sec. 4) and its
sample-dependent and epoch-scheduled variants FLSD and FLSc (Mukhoti et al. 2020, Sec. 4, App. E), inverse
focal loss (Wang et al. 2021) and dual focal loss (Tao et al. 2023), the Brier score and label smoothing
(Mukhoti et al.'s baselines, Sec. 5.1), and the confidence score functions of Zhou et al. (2025).

Losses are computed from ``log_softmax``, never from rounded probabilities, so that they and their gradients
stay finite when a float32 softmax saturates. Batch statistics (SB-ECE, AvUC, MMCE, the selective AURC loss)
are in :mod:`calib.losses.batch`; names such as ``"fl-3"`` are turned into losses by
:mod:`calib.losses.registry`. The numpy focal risk of a prediction against a target distribution is
:func:`calib.focal.optimum.focal_risk`.
"""

from __future__ import annotations

import math
import numbers

import torch
import torch.nn.functional as F

from calib.focal import FLSD_53, GammaSchedule
from calib.focal.numerics import check_gamma
from calib.losses._common import check_inputs, p_log_p, reduce
from calib.metrics import CSFS

__all__ = ["cross_entropy", "focal_loss", "inverse_focal_loss", "dual_focal_loss", "sample_dependent_focal_loss",
           "EpochScheduledFocalLoss", "FLSC_SCHEDULES", "brier_loss", "label_smoothing_loss", "confidence_scores"]


def _check_gamma_fits(gamma: float, dtype: torch.dtype, largest_weight_log: float | None = None) -> None:
    """Refuse a gamma that the loss's dtype cannot hold, or whose largest weight ``exp(largest_weight_log)``
    overflows it (the loss would be inf and its gradient nan)."""
    info = torch.finfo(dtype)
    if gamma > info.max:
        raise ValueError(f"gamma={gamma:g} does not fit in {dtype} (largest {info.max:.3g}); pass a smaller gamma or "
                         f"float64 logits.")
    if largest_weight_log is not None and largest_weight_log > math.log(info.max):
        raise ValueError(f"gamma={gamma:g}: the largest weight, e^{largest_weight_log:.4g}, overflows {dtype} "
                         f"(largest {info.max:.3g}), so the loss would be inf; pass a smaller gamma or float64 logits.")


def _upcast(logits: torch.Tensor) -> torch.Tensor:
    """float16 / bfloat16 logits (e.g. from autocast) are promoted to float32 before the loss is computed."""
    return logits.float() if logits.dtype in (torch.float16, torch.bfloat16) else logits



# ------------------------------------------------------------------ cross-entropy and focal loss

def cross_entropy(logits: torch.Tensor, targets: torch.Tensor, reduction: str = "mean") -> torch.Tensor:
    """Cross-entropy ``-log softmax(logits)[y]`` (focal loss with gamma = 0); mean over the batch by default."""
    check_inputs(logits, targets, reduction)
    return F.cross_entropy(logits, targets.long(), reduction=reduction)


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
    check_inputs(logits, targets, reduction)
    if isinstance(gamma, torch.Tensor):
        gamma = gamma.detach().to(device=logits.device, dtype=logits.dtype)
        if gamma.ndim not in (0, 1) or (gamma.ndim == 1 and gamma.shape[0] != logits.shape[0]):
            raise ValueError(f"gamma must be a scalar or have one value per sample ({logits.shape[0]}); "
                             f"got shape {tuple(gamma.shape)}.")
        if not bool(torch.isfinite(gamma).all()) or bool((gamma < 0).any()):
            raise ValueError("gamma must be finite and >= 0 (gamma = 0 is cross-entropy).")
    else:
        gamma = check_gamma(gamma, scalar=True)
        _check_gamma_fits(gamma, logits.dtype)
        gamma = torch.tensor(gamma, device=logits.device, dtype=logits.dtype)
    log_p = F.log_softmax(logits, dim=1).gather(1, targets.long().unsqueeze(1)).squeeze(1)
    one_minus_p = -torch.expm1(log_p)
    positive = one_minus_p > 0
    base = torch.where(positive, one_minus_p, torch.ones_like(one_minus_p))
    weight = torch.where(positive, base ** gamma, (gamma == 0).to(log_p.dtype).expand_as(log_p))
    return reduce(-weight * log_p, reduction)



# ------------------------------------ Zhou et al. (2025): inverse and dual focal loss, confidence scores

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
    check_inputs(logits, targets, reduction)
    gamma = check_gamma(gamma, scalar=True)
    _check_gamma_fits(gamma, logits.dtype, largest_weight_log=gamma * math.log(2.0))   # (1 + p)^gamma <= 2^gamma
    log_p = F.log_softmax(logits, dim=1).gather(1, targets.long().unsqueeze(1)).squeeze(1)
    weight = torch.exp(gamma * torch.log1p(torch.exp(log_p)))  # (1 + p)^gamma
    return reduce(-weight * log_p, reduction)


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
    check_inputs(logits, targets, reduction)
    gamma = check_gamma(gamma, scalar=True)
    _check_gamma_fits(gamma, logits.dtype)                      # the base 1 - p_y + p_j is at most 1
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
    return reduce(-weight * log_p, reduction)


def confidence_scores(logits: torch.Tensor, csf: str = "msp") -> torch.Tensor:
    r"""A confidence score function g of softmax(logits), differentiable (torch twin of
    :func:`calib.metrics.confidence_score <calib.metrics.risk_coverage.confidence_score>`).

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
        if probs.shape[1] < 2:
            raise ValueError(f"csf='margin' needs at least 2 classes (p_(1) - p_(2)); logits has K = {probs.shape[1]}.")
        top = probs.topk(2, dim=1).values
        return top[:, 0] - top[:, 1]
    if csf == "negative_entropy":
        return p_log_p(probs, log_probs).sum(dim=1)
    return (probs * probs).sum(dim=1) - 1.0



# --------------------------------------------- Mukhoti et al. (2020): FLSD, FLSc and the baselines

def sample_dependent_focal_loss(logits: torch.Tensor, targets: torch.Tensor, schedule=None,
                                reduction: str = "mean") -> torch.Tensor:
    r"""Focal loss whose gamma is chosen per sample from the predicted true-class probability (FLSD).

    ``gamma_i = schedule.gammas[j]`` when ``p_i = softmax(logits_i)[y_i]`` lies in bin j of the schedule;
    FLSD-53 (the default, :data:`calib.focal.schedules.FLSD_53`) is gamma = 5 for p in [0, 0.2) and 3 for p in
    [0.2, 1] (Mukhoti et al. 2020, Sec. 4); FLSD-532 (:data:`calib.focal.schedules.FLSD_532`) adds gamma = 2 on
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
    schedule = FLSD_53 if schedule is None else schedule
    if not isinstance(schedule, GammaSchedule):
        raise ValueError(f"schedule must be a calib.focal.GammaSchedule (e.g. calib.focal.FLSD_532); got {schedule!r}.")
    check_inputs(logits, targets, reduction)
    logits = _upcast(logits)
    with torch.no_grad():
        p = F.log_softmax(logits, dim=1).gather(1, targets.long().unsqueeze(1)).squeeze(1).exp()
        edges = torch.tensor(schedule.edges, dtype=p.dtype, device=p.device)
        gammas = torch.tensor(schedule.gammas, dtype=p.dtype, device=p.device)
        # closed="left": bins [e_i, e_i+1), i.e. p == e_i goes up (torch's right=True)
        gamma = gammas[torch.bucketize(p, edges, right=schedule.closed == "left")]
    return focal_loss(logits, targets, gamma, reduction=reduction)


#: FLSc schedules of Mukhoti et al. (2020), App. E, for their 350-epoch CIFAR runs, gamma = 5 for epochs
#: 1-100, 3 for epochs 101-250, then 1 (FLSc-531) or 2 (FLSc-532) for epochs 251-350.
FLSC_SCHEDULES = {"flsc-531": ((5.0, 3.0, 1.0), (100, 250), 350), "flsc-532": ((5.0, 3.0, 2.0), (100, 250), 350)}


class EpochScheduledFocalLoss(torch.nn.Module):
    """Focal loss whose gamma follows the training epoch (FLSc; Mukhoti et al. 2020, App. E).

    Call :meth:`set_epoch` at the start of every epoch (``calib.train`` does). The paper gives the switch
    epochs for a 350-epoch run (100 and 250); for a run of E epochs they are scaled to
    ``round(100 E / 350)`` and ``round(250 E / 350)`` (the book's choice; the paper gives no rule, and the
    official code uses 30 and 70 for its 100-epoch Tiny-ImageNet runs). The epoch and the run's length are part
    of ``state_dict()`` (``_extra_state``), so a loop that checkpoints the loss with the model resumes the
    schedule where it stopped.

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
        super().__init__()
        self.gammas = tuple(float(g) for g in check_gamma(gammas, "gammas", ndim=1))
        self.boundaries = tuple(int(b) for b in boundaries)
        if len(self.gammas) != len(self.boundaries) + 1:
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

    def get_extra_state(self) -> dict:
        """The schedule's position, which ``state_dict()`` keeps: ``{"epoch": ..., "total_epochs": ...}``."""
        return {"epoch": self.epoch, "total_epochs": self.total_epochs}

    def set_extra_state(self, state) -> None:
        """Restore :meth:`get_extra_state`'s epoch and run length (``load_state_dict``), checked."""
        if not isinstance(state, dict) or set(state) != {"epoch", "total_epochs"}:
            raise ValueError(f"{self.__name__}: the loss's state must be {{'epoch': e, 'total_epochs': E}} as "
                             f"state_dict() gives it; got {state!r}.")
        for name in ("epoch", "total_epochs"):
            value = state[name]
            if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
                raise ValueError(f"{self.__name__}: the state's {name} must be an integer >= 1; got {value!r}.")
        self.set_epoch(int(state["epoch"]), int(state["total_epochs"]))

    def switch_epochs(self) -> tuple:
        """The last epoch of each phase but the final one, scaled to the run length."""
        return tuple(round(b * self.total_epochs / self.reference_epochs) for b in self.boundaries)

    @property
    def gamma(self) -> float:
        """The gamma of the current epoch."""
        phase = sum(self.epoch > b for b in self.switch_epochs())
        return self.gammas[phase]

    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Focal loss with the gamma of the current epoch, mean over the batch."""
        return focal_loss(_upcast(logits), targets, self.gamma)

    def __repr__(self) -> str:
        return f"EpochScheduledFocalLoss({self.__name__!r}, epoch={self.epoch}/{self.total_epochs}, gamma={self.gamma:g})"


def brier_loss(logits: torch.Tensor, targets: torch.Tensor, reduction: str = "mean") -> torch.Tensor:
    """Brier score ``sum_k (softmax(logits)_k - 1[k = y])^2`` (Brier 1950), mean over the batch by default.

    Mukhoti et al. (2020), Sec. 5.1: "the squared error between the predicted softmax vector and the one-hot
    ground truth encoding"; summed over the classes as in the official ``Losses/brier_score.py``.
    """
    check_inputs(logits, targets, reduction)
    p = F.softmax(_upcast(logits), dim=1)
    onehot = F.one_hot(targets.long(), p.shape[1]).to(p.dtype)
    return reduce(((p - onehot) ** 2).sum(dim=1), reduction)


def label_smoothing_loss(logits: torch.Tensor, targets: torch.Tensor, alpha: float,
                         reduction: str = "mean") -> torch.Tensor:
    r"""Cross-entropy against smoothed targets ``s = (1 - alpha) q + alpha (1 - q) / (K - 1)``.

    Mukhoti et al. (2020), Sec. 5.1 (LS-0.05 in their tables): the true class gets 1 - alpha and each other
    class alpha / (K - 1). This is **not** the convention of Mueller et al. (2019) and of
    ``torch.nn.functional.cross_entropy(label_smoothing=alpha)``, which give every class alpha / K.
    """
    check_inputs(logits, targets, reduction)
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0 <= alpha < 1:
        raise ValueError(f"alpha must be a number in [0, 1); got {alpha!r}.")
    log_p = F.log_softmax(_upcast(logits), dim=1)
    k = log_p.shape[1]
    if alpha > 0 and k < 2:
        raise ValueError(f"label smoothing with alpha={alpha:g} needs at least 2 classes (it gives alpha / (K - 1) to "
                         f"each other class); logits has K = {k}.")
    if alpha > 0 and bool(torch.isneginf(logits).any()):
        raise ValueError("logits has -inf entries (masked classes): label smoothing gives every other class alpha / "
                         "(K - 1) of the target, so its loss there is infinite; drop the masked columns first, or "
                         "use alpha = 0.")
    onehot = F.one_hot(targets.long(), k).to(log_p.dtype)
    smooth = (1 - alpha) * onehot + alpha * (1 - onehot) / (k - 1)
    return reduce(-(smooth * log_p).sum(dim=1), reduction)


