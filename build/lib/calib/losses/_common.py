"""What the loss modules of :mod:`calib.losses` share: the check of (logits, targets), the reduction and
``p log p``. Private to the package: :mod:`calib.losses.functional` and :mod:`calib.losses.batch` import it,
nothing outside ``calib.losses`` does.
"""

from __future__ import annotations

import math

import torch

REDUCTIONS = ("mean", "sum", "none")


def check_inputs(logits: torch.Tensor, targets: torch.Tensor, reduction: str) -> None:
    """Refuse, with a ValueError that says what to change, (logits, targets) that no loss can score.

    Shapes, dtypes, the reduction, an empty batch, and on CPU tensors also targets outside [0, K) and logits
    that are NaN, +inf, or -inf in a whole row (:func:`check_finite_logits`). On another device those two
    checks would cost a host synchronisation per training step, so they are skipped there: torch asserts on
    the targets itself, and :mod:`calib.train` refuses a non-finite epoch loss.
    """
    if not isinstance(logits, torch.Tensor) or not isinstance(targets, torch.Tensor):
        raise ValueError("logits and targets must be torch tensors; convert with torch.as_tensor(...).")
    if logits.ndim != 2:
        raise ValueError(f"logits must have shape (N, K); got {tuple(logits.shape)}.")
    if targets.ndim != 1 or targets.shape[0] != logits.shape[0]:
        raise ValueError(f"targets must have shape ({logits.shape[0]},) (one class index per row of logits); "
                         f"got {tuple(targets.shape)}.")
    if targets.dtype.is_floating_point or targets.dtype == torch.bool:
        raise ValueError(f"targets has dtype {targets.dtype}; pass integer class indices (targets.long()).")
    if reduction not in REDUCTIONS:
        raise ValueError(f"reduction={reduction!r} is not supported; choose one of {', '.join(map(repr, REDUCTIONS))}.")
    if logits.shape[0] == 0:
        raise ValueError("logits has no rows (an empty batch): a mean over no samples is undefined; skip empty "
                         "batches (e.g. drop_last=True, or test len(batch) before the loss).")
    if logits.shape[1] == 0:
        raise ValueError("logits has no columns (K = 0): there is no class to score; check the model's output layer.")
    if not logits.is_floating_point():
        raise ValueError(f"logits has dtype {logits.dtype}; pass floating-point scores (logits.float()).")
    if targets.device.type == "cpu":               # on a GPU this would cost a sync per step: torch asserts there
        k = logits.shape[1]
        low, high = (int(x) for x in torch.aminmax(targets))
        if low < 0 or high >= k:
            raise ValueError(f"targets must lie in [0, {k}) (one index per class of logits); found "
                             f"{low if low < 0 else high}. Check the label encoding and the number of outputs of "
                             f"the model.")
    if logits.device.type == "cpu":
        check_finite_logits(logits)


def check_finite_logits(logits: torch.Tensor) -> None:
    """Refuse logits with a NaN, a +inf, or a row that is -inf in every class, naming the first such row.

    A softmax of any of these is NaN, so every loss would be NaN. One reduction decides: the row maxima are
    all finite exactly when none of the three occurs (a NaN or +inf makes its row's maximum non-finite, and
    so does a row of -inf), while a -inf in some classes of a row (a masked class) is allowed; their float64
    sum is finite when they are (about 15 us for 128 x 100 float32 logits on one CPU thread).
    """
    if math.isfinite(float(logits.detach().amax(dim=1).sum(dtype=torch.float64))):
        return
    z = logits.detach()
    for test, what, fix in (
            (torch.isnan(z).any(dim=1), "NaN", "the model's output is already broken: look for a NaN input or "
                                               "weight, lower the learning rate, or clip the gradients"),
            (torch.isposinf(z).any(dim=1), "+inf", "its softmax is NaN; rescale or clamp the logits"),
            (torch.isneginf(z).all(dim=1), "-inf in every class", "its softmax is 0/0; leave at least one class "
                                                                  "unmasked in every row")):
        rows = torch.nonzero(test).flatten()
        if rows.numel():
            raise ValueError(f"logits has {what} in {rows.numel()} row(s) (first: row {int(rows[0])}); {fix}. "
                             f"A loss of them would be NaN.")


def reduce(values: torch.Tensor, reduction: str) -> torch.Tensor:
    """The per-sample ``values`` reduced as ``reduction`` says: their mean, their sum, or themselves."""
    if reduction == "mean":
        return values.mean()
    if reduction == "sum":
        return values.sum()
    return values


def p_log_p(probs: torch.Tensor, log_probs: torch.Tensor) -> torch.Tensor:
    """p log p with 0 log 0 = 0 and a finite gradient where p = 0 (a masked class, log p = -inf).

    log p is raised to -1000 where it is lower (-inf for a masked class). Below about -745, p = exp(log p) is 0
    in every float dtype, so the product is 0 either way, and its gradient is 0 instead of 0 * inf = nan; a
    modest bound, unlike the dtype's lowest value, keeps the chain rule's intermediate products finite."""
    return probs * log_probs.clamp(min=-1000.0)
