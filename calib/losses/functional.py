"""Per-sample training losses in torch: each takes ``logits`` (N, K) and integer ``targets`` (N,).

Every loss here is a mean (or, with ``reduction``, a sum or the per-sample values) of a function of one
sample's logits and label: cross-entropy, focal loss (Lin et al. 2017; Mukhoti et al. 2020, Sec. 4) and its
sample-dependent and epoch-scheduled variants FLSD and FLSc (Mukhoti et al. 2020, Sec. 4, App. E), inverse
focal loss (Wang et al. 2021) and dual focal loss (Tao et al. 2023), the Brier score and label smoothing
(Mukhoti et al.'s baselines, Sec. 5.1), and the confidence score functions of Zhou et al. (2025).

Losses are computed from ``log_softmax``, never from rounded probabilities, so that they and their gradients
stay finite when a float32 softmax saturates. The focal family takes ``torch.nn.functional.cross_entropy``'s
``weight`` and ``ignore_index`` as well, and is a module in :mod:`calib.losses.modules` (``FocalLoss(gamma)``).
Batch statistics (SB-ECE, AvUC, MMCE, the selective AURC loss) are in :mod:`calib.losses.batch`; names such as
``"fl-3"`` are turned into losses by :mod:`calib.losses.registry`. The numpy focal risk of a prediction against a
target distribution is :func:`calib.focal.optimum.focal_risk`.
"""

from __future__ import annotations

import numbers

import torch
import torch.nn.functional as F

from calib.focal.numerics import check_gamma
from calib.losses._common import check_class_weight, check_inputs, p_log_p, reduce, values_are_checked
from calib.losses._focal import (FocalFamilyLoss, check_gamma_fits, check_schedule, dual_focal_loss_checked,
                                 focal_loss_checked, inverse_focal_loss_checked, needs_zero_guard,
                                 sample_dependent_focal_loss_checked, scalar_gamma, upcast, upcast_dtype)
from calib.metrics import CSFS

__all__ = ["cross_entropy", "focal_loss", "inverse_focal_loss", "dual_focal_loss", "sample_dependent_focal_loss",
           "EpochScheduledFocalLoss", "FLSC_SCHEDULES", "brier_loss", "label_smoothing_loss",
           "label_smoothing_focal_loss", "confidence_scores"]


def _class_weight(weight) -> torch.Tensor | None:
    """A functional loss's ``weight``: checked (:func:`~calib.losses._common.check_class_weight`) where the
    values are (:func:`~calib.losses._common.values_are_checked`), else taken as given."""
    if weight is None or (isinstance(weight, torch.Tensor) and not values_are_checked(weight)):
        return weight
    return check_class_weight(weight)


# ------------------------------------------------------------------ cross-entropy and focal loss

def cross_entropy(logits: torch.Tensor, targets: torch.Tensor, reduction: str = "mean") -> torch.Tensor:
    """Cross-entropy ``-log softmax(logits)[y]`` (focal loss with gamma = 0); mean over the batch by default."""
    check_inputs(logits, targets, reduction)
    return F.cross_entropy(logits, targets.long(), reduction=reduction)


def focal_loss(logits: torch.Tensor, targets: torch.Tensor, gamma, reduction: str = "mean", *, weight=None,
               ignore_index: int = -100) -> torch.Tensor:
    r"""Focal loss ``-(1 - p_y)^gamma log p_y`` with ``p = softmax(logits)``.

    Lin et al. (2017), Eq. 5 without the class weight alpha; Mukhoti et al. (2020), Sec. 4;
    Charoenphakdee et al. (2021), Eq. 5 with a one-hot target. ``weight`` and ``ignore_index`` are those of
    ``torch.nn.functional.cross_entropy``, which this is at gamma = 0.

    Parameters
    ----------
    logits : torch.Tensor, shape (N, K)
        Half-precision logits are computed in float32 (as autocast does; the result is float32).
    targets : torch.Tensor of int, shape (N,)
        Class indices in [0, K), or ``ignore_index``.
    gamma : float or torch.Tensor
        Focal parameter >= 0; a scalar or one value per sample (shape (N,)), e.g. from a sample-dependent
        schedule. A tensor gamma is treated as a constant (no gradient flows into it).
    reduction : {"mean", "sum", "none"}
    weight : torch.Tensor, shape (K,), optional
        Class weights (Lin et al.'s alpha_t, per class): sample i counts with ``weight[y_i]``, and the mean
        divides by the sum of the counted samples' weights, as torch does.
    ignore_index : int
        Targets equal to it count for nothing (their value is 0 with ``reduction="none"``) and are left out of
        the mean's denominator; -100 by default, as in torch.

    Returns
    -------
    torch.Tensor
        A scalar (or shape (N,) for ``reduction="none"``).

    Notes
    -----
    ``log p_y`` comes from ``log_softmax`` and ``1 - p_y`` from ``-expm1(log p_y)``, exact to rounding *given*
    ``log p_y`` (the official ``1 - exp(log p_y)`` loses up to 2e-4 of the loss near p_y = 1). End to end,
    ``log_softmax`` bounds the accuracy: its ``log p_y`` is off by about one float32 rounding of the
    log-sum-exp (2^-24 in absolute terms), a relative error that grows as ``1 - p_y`` shrinks, and where the
    float32 softmax rounds p_y to 1 it returns ``log p_y = 0`` (the loss is then 0, off by its true value, below
    1e-10). Against 50-digit mpmath on float32 logits (N(0, 3^2), K = 100, 2,000 rows), the median relative
    error of the per-sample loss at gamma = 3 is 5.1e-8, as the official formula's (5.1e-8); with the target's
    logit raised by 10 (500 of them, median p_y 0.80), 5.7e-7 against 6.0e-7
    (``tests/losses/test_focal_paths.py`` holds the bounds). Where ``1 - p_y`` is exactly 0 the weight
    ``(1 - p_y)^gamma`` is set to its limit (0 for gamma > 0, 1 for gamma = 0) without differentiating
    ``x^gamma`` at 0, whose derivative is infinite for gamma < 1 (the official code's gradient is nan there);
    the true gradient, ``-g(1, gamma)`` times that of ``log p_y``, is 0 for gamma > 0, so nothing is lost. For
    gamma >= 1 the plain power has the same value and gradient and no guard runs; at gamma = 0 the loss is
    ``torch.nn.functional.cross_entropy`` itself.
    :class:`calib.losses.modules.FocalLoss` is this loss as a module.
    """
    if isinstance(gamma, torch.Tensor):
        if gamma.ndim not in (0, 1) or (gamma.ndim == 1 and gamma.shape[0] != logits.shape[0]):
            raise ValueError(f"gamma must be a scalar or have one value per sample ({logits.shape[0]}); "
                             f"got shape {tuple(gamma.shape)}.")
        if values_are_checked(gamma) and (not bool(torch.isfinite(gamma).all()) or bool((gamma < 0).any())):
            raise ValueError("gamma must be finite and >= 0 (gamma = 0 is cross-entropy).")
    else:
        gamma = scalar_gamma(gamma)
    return focal_loss_checked(logits, targets, gamma, reduction, _class_weight(weight), ignore_index)


# ------------------------------------ Zhou et al. (2025): inverse and dual focal loss, confidence scores

def inverse_focal_loss(logits: torch.Tensor, targets: torch.Tensor, gamma, reduction: str = "mean", *,
                       weight=None, ignore_index: int = -100) -> torch.Tensor:
    r"""Inverse focal loss ``-(1 + p_y)^gamma log p_y`` with ``p = softmax(logits)``.

    Wang et al. (2021); Zhou et al. (2025), Def. 3.2, Eq. 3. The weight :math:`(1 + p_y)^\gamma \in [1,
    2^\gamma]` grows with :math:`p_y`: easy samples are up-weighted, the opposite of focal loss. Its
    derivative in :math:`p_y` is :math:`-(1 + p)^{\gamma - 1}(1 + p + \gamma p \log p)/p`, which is positive
    on an interval of p once :math:`\gamma > 1/W(1/e) \approx 3.5911` (chapter 09; the paper's App. C.2
    prints the first term with the wrong sign).

    Parameters
    ----------
    logits : torch.Tensor, shape (N, K)
        Half-precision logits are computed in float32.
    targets : torch.Tensor of int, shape (N,)
    gamma : float
        >= 0; gamma = 0 is cross-entropy.
    reduction : {"mean", "sum", "none"}
    weight, ignore_index
        Class weights and the ignored target, as in :func:`focal_loss` (and torch's cross-entropy).

    Returns
    -------
    torch.Tensor
        A scalar (or shape (N,) for ``reduction="none"``).
    """
    return inverse_focal_loss_checked(logits, targets, scalar_gamma(gamma), reduction, _class_weight(weight),
                                      ignore_index)


def dual_focal_loss(logits: torch.Tensor, targets: torch.Tensor, gamma, reduction: str = "mean", *, weight=None,
                    ignore_index: int = -100) -> torch.Tensor:
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
        Half-precision logits are computed in float32.
    targets : torch.Tensor of int, shape (N,)
    gamma : float
        >= 0.
    reduction : {"mean", "sum", "none"}
        The official code sums over the batch by default (``size_average=False``); calib takes the mean.
    weight, ignore_index
        Class weights and the ignored target, as in :func:`focal_loss` (and torch's cross-entropy).

    Returns
    -------
    torch.Tensor

    Notes
    -----
    ``1 - p_y`` is computed as ``-expm1(log p_y)``, exact to rounding given ``log p_y`` (whose own error, from
    ``log_softmax``, bounds the accuracy: see :func:`focal_loss`). Where the base ``1 - p_y + p_j`` is exactly 0
    (a saturated softmax), the weight is set to its limit (0 for gamma > 0) without differentiating ``x^gamma``
    at 0 (for gamma in (0, 1); elsewhere the plain power is exact). Ties :math:`p_c = p_y` (c != y) are not
    below p_y and are skipped, as in the code; ``p_j`` is located without gradient and read as
    ``exp(log_softmax(z)[j])``, so the gradient flows through ``p_j`` as in the code.
    """
    return dual_focal_loss_checked(logits, targets, scalar_gamma(gamma), reduction, _class_weight(weight),
                                   ignore_index)


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
                                reduction: str = "mean", *, weight=None, ignore_index: int = -100) -> torch.Tensor:
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
        Half-precision logits are computed in float32.
    targets : torch.Tensor of int, shape (N,)
    schedule : calib.focal.GammaSchedule, optional
        The bins and their gammas; FLSD-53 by default.
    reduction : {"mean", "sum", "none"}
        The official code sums over the batch; the book's losses take the mean.
    weight, ignore_index
        Class weights and the ignored target, as in :func:`focal_loss` (and torch's cross-entropy).
    """
    return sample_dependent_focal_loss_checked(logits, targets, check_schedule(schedule), reduction,
                                               _class_weight(weight), ignore_index)


#: FLSc schedules of Mukhoti et al. (2020), App. E, for their 350-epoch CIFAR runs, gamma = 5 for epochs
#: 1-100, 3 for epochs 101-250, then 1 (FLSc-531) or 2 (FLSc-532) for epochs 251-350.
FLSC_SCHEDULES = {"flsc-531": ((5.0, 3.0, 1.0), (100, 250), 350), "flsc-532": ((5.0, 3.0, 2.0), (100, 250), 350)}


class EpochScheduledFocalLoss(FocalFamilyLoss):
    """Focal loss whose gamma follows the training epoch (FLSc; Mukhoti et al. 2020, App. E).

    Call :meth:`set_epoch` at the start of every epoch (``calib.train`` does). The paper gives the switch
    epochs for a 350-epoch run (100 and 250); for a run of E epochs they are scaled to
    ``round(100 E / 350)`` and ``round(250 E / 350)`` (the book's choice; the paper gives no rule, and the
    official code uses 30 and 70 for its 100-epoch Tiny-ImageNet runs). The epoch and the run's length are part
    of ``state_dict()`` (``_extra_state``), so a loop that checkpoints the loss with the model resumes the
    schedule where it stopped. The current phase is also a buffer (not saved: the epoch decides it), so that a
    loss under ``torch.compile`` reads it as a tensor and a new epoch needs no new graph.

    Parameters
    ----------
    gammas : sequence of float
        The gamma of each phase, e.g. (5, 3, 1).
    boundaries : sequence of int
        The last epoch of each phase but the final one, for a run of ``reference_epochs`` epochs.
    reference_epochs : int
        The run length the boundaries refer to (350 in the paper).
    name : str
        Its name in messages (``"flsc-531"``).
    weight, ignore_index, reduction
        As in ``torch.nn.CrossEntropyLoss`` (:class:`calib.losses.modules.FocalLoss`).
    """

    def __init__(self, gammas=(5.0, 3.0, 1.0), boundaries=(100, 250), reference_epochs: int = 350,
                 name: str = "flsc", *, weight=None, ignore_index: int = -100, reduction: str = "mean"):
        super().__init__(weight=weight, ignore_index=ignore_index, reduction=reduction)
        self.gammas = tuple(float(g) for g in check_gamma(gammas, "gammas", ndim=1))
        self.boundaries = tuple(int(b) for b in boundaries)
        if len(self.gammas) != len(self.boundaries) + 1:
            raise ValueError(f"{name}: need one gamma >= 0 per phase ({len(self.boundaries) + 1}); got {gammas}.")
        self.reference_epochs = int(reference_epochs)
        self.total_epochs = self.reference_epochs
        self.epoch = 1
        self.__name__ = name
        self.register_buffer("phase", torch.zeros((), dtype=torch.long), persistent=False)
        self.phase: torch.Tensor                    # the buffer, for type checkers

    def set_epoch(self, epoch: int, total_epochs: int | None = None) -> None:
        """Set the current epoch (1-based) and, optionally, the length of the run."""
        if total_epochs is not None:
            self.total_epochs = int(total_epochs)
        self.epoch = int(epoch)
        self.phase.fill_(self._phase_of_epoch())

    def _phase_of_epoch(self) -> int:
        return sum(self.epoch > b for b in self.switch_epochs())

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
        return self.gammas[self._phase_of_epoch()]

    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Focal loss with the gamma of the current epoch (read from the ``phase`` buffer)."""
        if not any(self.gammas):                                                  # cross-entropy throughout
            return focal_loss_checked(logits, targets, 0.0, self.reduction, self.weight, self.ignore_index)
        dtype = upcast_dtype(logits.dtype)
        check_gamma_fits(max(self.gammas), dtype, given=logits.dtype)
        gammas = torch.tensor(self.gammas, dtype=dtype, device=logits.device)
        gamma = gammas.index_select(0, self.phase.to(logits.device).reshape(1)).squeeze(0)   # no Python index
        return focal_loss_checked(logits, targets, gamma, self.reduction, self.weight, self.ignore_index,
                                  guard=needs_zero_guard(self.gammas))

    def extra_repr(self) -> str:
        """Name, epoch, gamma and the options, for ``repr(loss)``."""
        return (f"{self.__name__!r}, epoch={self.epoch}/{self.total_epochs}, gamma={self.gamma:g}, "
                f"{super().extra_repr()}")


def brier_loss(logits: torch.Tensor, targets: torch.Tensor, reduction: str = "mean") -> torch.Tensor:
    """Brier score ``sum_k (softmax(logits)_k - 1[k = y])^2`` (Brier 1950), mean over the batch by default.

    Mukhoti et al. (2020), Sec. 5.1: "the squared error between the predicted softmax vector and the one-hot
    ground truth encoding"; summed over the classes as in the official ``Losses/brier_score.py``.
    """
    check_inputs(logits, targets, reduction)
    p = F.softmax(upcast(logits), dim=1)
    onehot = F.one_hot(targets.long(), p.shape[1]).to(p.dtype)
    return reduce(((p - onehot) ** 2).sum(dim=1), reduction)


def _smoothed_targets(logits: torch.Tensor, targets: torch.Tensor, log_p: torch.Tensor,
                      alpha: float) -> torch.Tensor:
    """The label-smoothed targets ``(1 - alpha) e_y + alpha (1 - e_y) / (K - 1)``, in ``log_p``'s dtype; refused
    where they make no sense (one class, or masked classes, whose loss would be infinite)."""
    k = log_p.shape[1]
    if alpha > 0 and k < 2:
        raise ValueError(f"label smoothing with alpha={alpha:g} needs at least 2 classes (it gives alpha / (K - 1) to "
                         f"each other class); logits has K = {k}.")
    if alpha > 0 and bool(torch.isneginf(logits).any()):
        raise ValueError("logits has -inf entries (masked classes): label smoothing gives every other class alpha / "
                         "(K - 1) of the target, so its loss there is infinite; drop the masked columns first, or "
                         "use alpha = 0.")
    onehot = F.one_hot(targets.long(), k).to(log_p.dtype)
    return (1 - alpha) * onehot + alpha * (1 - onehot) / (k - 1)


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
    log_p = F.log_softmax(upcast(logits), dim=1)
    smooth = _smoothed_targets(logits, targets, log_p, alpha)
    return reduce(-(smooth * log_p).sum(dim=1), reduction)


def label_smoothing_focal_loss(logits: torch.Tensor, targets: torch.Tensor, gamma: float, alpha: float,
                               reduction: str = "mean") -> torch.Tensor:
    r"""Focal loss against smoothed targets, ``-sum_i s_i (1 - p_i)^gamma log p_i`` with ``p = softmax(logits)``
    and ``s = (1 - alpha) e_y + alpha (1 - e_y) / (K - 1)``.

    Charoenphakdee et al. (2021), Eq. 5 (the focal loss of a target vector ``v``) with the label-smoothed target of
    their "LS" paradigm (Sec. 6.1, parameter 0.1; the paper does not say how the mass is spread, so this takes the
    book's convention of :func:`label_smoothing_loss`, alpha / (K - 1) to each other class). At ``gamma = 0`` it is
    :func:`label_smoothing_loss`, at ``alpha = 0`` :func:`focal_loss`.

    ``1 - p_i`` is ``-expm1(log p_i)`` from ``log_softmax``, as in :func:`focal_loss`; where it is exactly 0 and
    ``gamma = 0`` the factor is 1 (``0 ** 0``), so the loss stays the smoothed cross-entropy.

    Raises
    ------
    ValueError
        For a gamma that is not a finite number >= 0, an alpha outside [0, 1), fewer than 2 classes with alpha > 0,
        or the input errors of :func:`label_smoothing_loss`.
    """
    check_inputs(logits, targets, reduction)
    if isinstance(gamma, bool) or not isinstance(gamma, numbers.Real):
        raise ValueError(f"gamma must be a number >= 0 (the focal parameter; 0 is label-smoothed cross-entropy); got "
                         f"{gamma!r}.")
    gamma = check_gamma(float(gamma), scalar=True)
    if isinstance(alpha, bool) or not isinstance(alpha, numbers.Real) or not 0 <= alpha < 1:
        raise ValueError(f"alpha must be a number in [0, 1) (the label smoothing; 0.1 in Charoenphakdee et al.); got "
                         f"{alpha!r}.")
    log_p = F.log_softmax(upcast(logits), dim=1)
    smooth = _smoothed_targets(logits, targets, log_p, alpha)
    weight = torch.pow(-torch.expm1(log_p), gamma)
    terms = torch.where(smooth > 0, smooth * weight * log_p, torch.zeros_like(log_p))
    return reduce(-terms.sum(dim=1), reduction)


