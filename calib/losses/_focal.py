"""The focal family's computations, for arguments already checked: what :mod:`calib.losses.functional` (which
checks its arguments at every call) and :mod:`calib.losses.modules` (which checks its options once, when a loss is
built) share. Private to the package.

Nothing here branches on a tensor's value, and the checks of :func:`~calib.losses._common.check_inputs` that read
values run only in eager mode on the CPU (:func:`~calib.losses._common.values_are_checked`), so that
``torch.compile`` traces a loss into one graph. Half-precision logits are computed in float32.

Speed (``tests/benchmarks/losses_focal_family.py``): a loss costs what the official formula costs. At gamma = 0
every loss of the family is ``F.cross_entropy`` itself (torch's fused kernel); the guards of a base ``1 - p_y``
that is exactly 0 run only for a gamma in (0, 1), the one range where ``x^gamma`` has an infinite derivative
at 0 (for gamma >= 1 it is finite and the plain power is exact); the masks of ignored targets run only when
some target may be ignored; the finiteness of the logits is read from the loss itself, which a NaN row makes
NaN (or, where rows are masked, from the N log-probabilities the loss reads), and the logits are passed over
only when it is not finite; dual focal loss picks p_j without gradient and differentiates only the two
log-probabilities it reads.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from calib.focal import FLSD_53, GammaSchedule
from calib.focal.numerics import check_gamma
from calib.losses._common import (check_class_weight, check_finite_logits, check_finite_rows, check_ignore_index,
                                  check_inputs, check_reduction, check_target_values, counted_targets,
                                  reduce_counted, values_are_checked)

__all__ = ["FocalFamilyLoss", "check_gamma_fits", "upcast_dtype", "upcast", "scalar_gamma", "check_schedule",
           "needs_zero_guard", "focal_terms", "focal_loss_checked", "inverse_focal_loss_checked",
           "dual_focal_loss_checked", "sample_dependent_focal_loss_checked"]


def check_gamma_fits(gamma: float, dtype: torch.dtype, largest_weight_log: float | None = None,
                     given: torch.dtype | None = None) -> None:
    """Refuse a gamma that the loss's dtype cannot hold, or whose largest weight ``exp(largest_weight_log)``
    overflows it (the loss would be inf and its gradient nan). ``given``: the logits' own dtype, when they were
    promoted to ``dtype`` (:func:`upcast`), named in the message too."""
    info = torch.finfo(dtype)
    held = f"{dtype}" if given is None or given == dtype else f"{dtype} (the precision {given} logits are computed in)"
    if gamma > info.max:
        raise ValueError(f"gamma={gamma:g} does not fit in {held} (largest {info.max:.3g}); pass a smaller gamma or "
                         f"float64 logits.")
    if largest_weight_log is not None and largest_weight_log > math.log(info.max):
        raise ValueError(f"gamma={gamma:g}: the largest weight, e^{largest_weight_log:.4g}, overflows {held} "
                         f"(largest {info.max:.3g}), so the loss would be inf; pass a smaller gamma or float64 logits.")


#: The dtypes promoted to float32 before a loss is computed (:func:`upcast`).
_HALF = (torch.float16, torch.bfloat16)


def upcast_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype a loss of ``dtype`` logits is computed in: float32 for float16 and bfloat16, else ``dtype``."""
    return torch.float32 if dtype in _HALF else dtype


def upcast(logits: torch.Tensor) -> torch.Tensor:
    """float16 / bfloat16 logits (e.g. from autocast) are promoted to float32 before the loss is computed, as
    autocast computes torch's own losses (a half-precision log-softmax keeps about 3 digits)."""
    return logits.to(upcast_dtype(logits.dtype))


class FocalFamilyLoss(torch.nn.Module):
    """What the focal family's modules share with ``torch.nn.CrossEntropyLoss``: the class weights (a buffer,
    so that ``.to(device)`` moves them and ``state_dict`` keeps them), ``ignore_index`` and ``reduction``, checked
    once, here."""

    def __init__(self, *, weight=None, ignore_index: int = -100, reduction: str = "mean"):
        super().__init__()
        self.reduction = check_reduction(reduction)
        self.ignore_index = check_ignore_index(ignore_index)
        self.register_buffer("weight", check_class_weight(weight))
        self.weight: torch.Tensor | None            # the buffer, for type checkers (as torch's _WeightedLoss)

    def extra_repr(self) -> str:
        """The options that differ from torch's defaults, and the reduction."""
        shown = [f"reduction={self.reduction!r}"]
        if self.ignore_index != -100:
            shown.append(f"ignore_index={self.ignore_index}")
        if self.weight is not None:
            shown.append(f"weight={self.weight.tolist() if self.weight.numel() <= 10 else 'tensor'}")
        return ", ".join(shown)


def scalar_gamma(gamma, name: str = "gamma") -> float:
    """``gamma`` as a float, checked >= 0 and finite: in plain Python for a Python number (nothing that
    ``torch.compile`` would have to trace), else by :func:`calib.focal.numerics.check_gamma`, whose message
    says what is wrong."""
    if isinstance(gamma, (int, float)) and not isinstance(gamma, bool) and math.isfinite(gamma) and gamma >= 0:
        return float(gamma)
    return check_gamma(gamma, name, scalar=True)


def check_schedule(schedule) -> GammaSchedule:
    """``schedule`` if it is a :class:`calib.focal.GammaSchedule` (FLSD-53 for None), else a ValueError."""
    schedule = FLSD_53 if schedule is None else schedule
    if not isinstance(schedule, GammaSchedule):
        raise ValueError(f"schedule must be a calib.focal.GammaSchedule (e.g. calib.focal.FLSD_532); got {schedule!r}.")
    return schedule


def needs_zero_guard(gammas) -> bool:
    """Whether ``(1 - p)^gamma`` needs :func:`focal_terms`'s guards at a base of exactly 0 (p_y = 1, a saturated
    softmax) for one of ``gammas``: only for 0 < gamma < 1, whose derivative ``gamma x^(gamma - 1)`` is infinite
    at 0 (the loss's gradient would be 0 * inf = nan). At gamma = 0 torch's power has derivative 0 there (and
    the weight 1, so that the loss is cross-entropy), at gamma >= 1 a finite one (1 at gamma = 1, else 0)."""
    return any(0.0 < float(g) < 1.0 for g in gammas)


def _cross_entropy(logits: torch.Tensor, targets: torch.Tensor, reduction: str, weight: torch.Tensor | None,
                   ignore_index: int | None) -> torch.Tensor:
    """The family at gamma = 0, checked: torch's ``F.cross_entropy`` with the same options (its fused kernel;
    half-precision logits in float32).

    Where no target can be ignored, every row enters the result, so a NaN, a +inf or a row of -inf makes it
    NaN: the logits are checked (:func:`~calib.losses._common.check_finite_logits`) only when it is not finite.
    Where some can, an ignored row would hide them, and the logits are checked first, as every loss does."""
    may_ignore = check_inputs(logits, targets, reduction, ignore_index, weight, finite_logits=False)
    eager = values_are_checked(logits)
    if may_ignore and eager:
        check_finite_logits(logits)
    if logits.dtype in _HALF:
        logits = logits.float()
    loss = F.cross_entropy(logits, targets.long(), weight=weight,
                           ignore_index=-100 if ignore_index is None else ignore_index, reduction=reduction)
    if eager and not may_ignore and not math.isfinite(loss.item() if loss.ndim == 0
                                                      else float(loss.detach().sum(dtype=torch.float64))):
        check_finite_logits(logits)
    return loss


def _focal_family(logits: torch.Tensor, targets: torch.Tensor, reduction: str, weight: torch.Tensor | None,
                  ignore_index: int | None, terms, gamma, largest_weight_log: float | None = None,
                  guard: bool = False) -> torch.Tensor:
    """The focal family's one path: check, promote, ``log softmax``, read ``log p_y``, compute the per-sample
    ``terms(log_p, log_probs, index, gamma, guard)`` (``w log p_y``, <= 0), reduce as torch reduces and negate
    (negation is exact: the reduction of ``-w log p_y`` to the bit, with one operation on N values fewer).

    It is written as one function, with the tensors' own methods, because in eager mode every layer of Python
    between the kernels costs (``tests/benchmarks/losses_focal_family.py``: a path split into helpers ran about
    8 % slower than the official formula, this one as fast). How the values are checked, where
    :func:`~calib.losses._common.values_are_checked` (eager, CPU):

    - the targets: when ``ignore_index`` cannot be a class (None, or outside [0, K), as torch's default -100),
      every valid target lies in [0, K) and any other, ``ignore_index`` included, makes the gather of
      ``log p_y`` fail; the gather reads them, and only its failure reads them again
      (:func:`~calib.losses._common.check_target_values`), to raise the ValueError or to mask the ignored rows.
      Otherwise they are read first, and the ignored rows, if any, are masked;
    - the logits: where no row is masked every row enters the loss, and a row with a NaN, a +inf or -inf in every
      class makes it NaN, so the loss is read once and the logits are checked only when it is not finite (after
      the targets: class weights that sum to 0 make a mean NaN too). Where rows are masked a NaN of theirs would
      not reach the loss: ``log p_y`` is read before the mask
      (:func:`~calib.losses._common.check_finite_rows`).

    Compiled, or off the CPU, nothing is read, and rows whose target may be ``ignore_index`` are masked.
    """
    check_inputs(logits, targets, reduction, ignore_index, weight, finite_logits=False, target_values=False)
    given = logits.dtype
    if given in _HALF:
        logits = logits.float()
    if isinstance(gamma, torch.Tensor):
        gamma = gamma.detach().to(device=logits.device, dtype=logits.dtype)
    elif isinstance(gamma, float):
        check_gamma_fits(gamma, logits.dtype, largest_weight_log, given)
    k = logits.shape[1]
    log_probs = logits.log_softmax(1)
    eager = values_are_checked(targets)
    deferred = eager and (ignore_index is None or not 0 <= ignore_index < k)
    masked = None if deferred else ignore_index
    if eager and not deferred and not check_target_values(targets, k, reduction, ignore_index, weight):
        masked = None
    log_p = counted = None
    index = targets.long()
    if deferred:
        try:
            log_p = log_probs.gather(1, index.unsqueeze(1)).squeeze(1)
        except (RuntimeError, IndexError):          # a target outside [0, K): raise, or mask the ignored ones
            if not check_target_values(targets, k, reduction, ignore_index, weight):
                raise
            masked = ignore_index
    if log_p is None:
        index, counted = counted_targets(targets, masked)
        log_p = log_probs.gather(1, index.unsqueeze(1)).squeeze(1)
        if counted is not None:
            check_finite_rows(logits, log_p)
            log_p = torch.where(counted, log_p, 0.0)
    values = terms(log_p, log_probs, index, gamma, guard)
    if counted is None and weight is None and reduction == "mean":
        loss = values.mean().neg()
    else:
        loss = reduce_counted(values, index, counted, weight, reduction).neg()
    if eager and counted is None and not math.isfinite(loss.item() if loss.ndim == 0
                                                       else float(loss.detach().sum(dtype=torch.float64))):
        if deferred:
            check_target_values(targets, k, reduction, ignore_index, weight)
        check_finite_logits(logits)
    return loss


def focal_terms(log_p: torch.Tensor, gamma, guard: bool = True) -> torch.Tensor:
    """``(1 - p)^gamma log p`` (minus the focal loss) from ``log p`` (N,) and gamma (a float, a 0-d tensor, or one
    value a row), with ``1 - p = -expm1(log p)``.

    ``guard``: where ``1 - p`` is exactly 0 the weight is set to its limit (0 for gamma > 0, 1 for gamma = 0)
    without differentiating ``x^gamma`` at 0; needed only for a gamma in (0, 1) (:func:`needs_zero_guard`),
    elsewhere the plain power gives the same value and gradient. See
    :func:`calib.losses.functional.focal_loss`'s notes.
    """
    one_minus_p = torch.expm1(log_p).neg()
    if not guard:
        return one_minus_p.pow(gamma).mul(log_p)
    gamma = torch.as_tensor(gamma, dtype=log_p.dtype, device=log_p.device)
    positive = one_minus_p > 0
    base = torch.where(positive, one_minus_p, torch.ones_like(one_minus_p))
    weight = torch.where(positive, base.pow(gamma), (gamma == 0).to(log_p.dtype).expand_as(log_p))
    return weight.mul(log_p)


def _focal(log_p, log_probs, index, gamma, guard):
    """The focal loss's terms (:func:`_focal_family`'s ``terms``)."""
    return focal_terms(log_p, gamma, guard)


def _inverse_focal(log_p, log_probs, index, gamma, guard):
    """Inverse focal loss's terms ``(1 + p_y)^gamma log p_y``: the base lies in [1, 2], no guard is needed."""
    return log_p.exp().add(1.0).pow(gamma).mul(log_p)


def _dual_focal(log_p, log_probs, index, gamma, guard):
    """Dual focal loss's terms ``(1 - p_y + p_j)^gamma log p_y`` (see :func:`dual_focal_loss_checked`)."""
    with torch.no_grad():
        probs = log_probs.exp()
        p_y = probs.gather(1, index.unsqueeze(1))
        below, j = torch.where(probs < p_y, probs, 0.0).max(dim=1)
    p_j = torch.where(below > 0, log_probs.gather(1, j.unsqueeze(1)).squeeze(1).exp(), 0.0)
    base = torch.expm1(log_p).neg().add(p_j)
    if not guard:
        return base.pow(gamma).mul(log_p)
    positive = base > 0
    safe = torch.where(positive, base, torch.ones_like(base))
    return torch.where(positive, safe.pow(gamma), torch.zeros_like(base)).mul(log_p)


def _scheduled_focal(log_p, log_probs, index, schedule, guard):
    """FLSD's terms: the focal terms at the gamma the schedule gives each ``p_y`` (a constant of the step)."""
    with torch.no_grad():
        p = log_p.detach().exp()
        gamma = torch.full_like(p, schedule.gammas[-1])
        for edge, below in zip(reversed(schedule.edges), reversed(schedule.gammas[:-1])):
            gamma = torch.where(p < edge if schedule.closed == "left" else p <= edge, below, gamma)
    return focal_terms(log_p, gamma, guard)


def focal_loss_checked(logits: torch.Tensor, targets: torch.Tensor, gamma, reduction: str,
                       weight: torch.Tensor | None, ignore_index: int | None,
                       guard: bool | None = None) -> torch.Tensor:
    """:func:`calib.losses.functional.focal_loss` for a gamma and class weights already checked (a float >= 0
    or a tensor of them; a floating 1-D tensor or None): the modules check theirs once, when they are built, so
    that a call runs no check of a value that ``torch.compile`` would have to break its graph for.

    ``guard``: whether :func:`focal_terms` guards a base of 0; by default, for a float gamma, when it lies in
    (0, 1), and always for a tensor gamma (whose values are not read). A float gamma of 0 is ``F.cross_entropy``.
    """
    if isinstance(gamma, torch.Tensor):
        guard = True if guard is None else guard
    elif gamma == 0:
        return _cross_entropy(logits, targets, reduction, weight, ignore_index)
    else:
        gamma = float(gamma)
        guard = 0.0 < gamma < 1.0 if guard is None else guard
    return _focal_family(logits, targets, reduction, weight, ignore_index, _focal, gamma, None, guard)


def inverse_focal_loss_checked(logits: torch.Tensor, targets: torch.Tensor, gamma: float, reduction: str,
                               weight: torch.Tensor | None, ignore_index: int | None) -> torch.Tensor:
    """:func:`calib.losses.functional.inverse_focal_loss` for a checked gamma and class weights (see
    :func:`focal_loss_checked`). The base ``1 + p_y`` lies in [1, 2], so no guard is needed, but its largest
    weight 2^gamma must fit the dtype; gamma = 0 is ``F.cross_entropy``."""
    if gamma == 0:
        return _cross_entropy(logits, targets, reduction, weight, ignore_index)
    gamma = float(gamma)
    return _focal_family(logits, targets, reduction, weight, ignore_index, _inverse_focal, gamma,
                         gamma * math.log(2.0))


def dual_focal_loss_checked(logits: torch.Tensor, targets: torch.Tensor, gamma: float, reduction: str,
                            weight: torch.Tensor | None, ignore_index: int | None) -> torch.Tensor:
    """:func:`calib.losses.functional.dual_focal_loss` for a checked gamma and class weights (see
    :func:`focal_loss_checked`).

    ``p_j``, the largest probability strictly below ``p_y``, is located without gradient (a pass over the
    probabilities, as the official code's mask and top-k), then read as ``exp(log_softmax(z)[j])``: the gradient
    flows through the two log-probabilities read, ``log p_y`` and ``log p_j``, as the official code's flows
    through ``p_j`` (0 where no probability lies below ``p_y``). The base ``1 - p_y + p_j`` is 0 only where
    ``p_y = 1`` and ``p_j = 0``; it is guarded for a gamma in (0, 1) only (:func:`needs_zero_guard`).
    """
    if gamma == 0:
        return _cross_entropy(logits, targets, reduction, weight, ignore_index)
    gamma = float(gamma)
    return _focal_family(logits, targets, reduction, weight, ignore_index, _dual_focal, gamma, None,
                         0.0 < gamma < 1.0)


def sample_dependent_focal_loss_checked(logits: torch.Tensor, targets: torch.Tensor, schedule: GammaSchedule,
                                        reduction: str, weight: torch.Tensor | None,
                                        ignore_index: int | None) -> torch.Tensor:
    """:func:`calib.losses.functional.sample_dependent_focal_loss` for a checked schedule and class weights.

    ``p_y`` is read from the same ``log_softmax`` as the loss, detached: gamma is a constant of the step. A
    ``torch.where`` per edge picks it (``closed="left"``: bins [e_i, e_i+1), so p == e_i goes up; ``"right"``:
    (e_i, e_i+1]), the edges compared in the logits' dtype. A schedule whose gammas are all 0 is
    ``F.cross_entropy``."""
    if not any(schedule.gammas):
        return _cross_entropy(logits, targets, reduction, weight, ignore_index)
    return _focal_family(logits, targets, reduction, weight, ignore_index, _scheduled_focal, schedule, None,
                         needs_zero_guard(schedule.gammas))
