"""What the loss modules of :mod:`calib.losses` share: the check of (logits, targets), the reduction and
``p log p``. Private to the package: :mod:`calib.losses.functional` and :mod:`calib.losses.batch` import it,
nothing outside ``calib.losses`` does.
"""

from __future__ import annotations

import math
import numbers

import torch

REDUCTIONS = ("mean", "sum", "none")


def values_are_checked(tensor: torch.Tensor) -> bool:
    """Whether the checks that read a tensor's values run: in eager mode on the CPU only.

    On another device such a check costs a host synchronisation per training step, and under ``torch.compile``
    it would break the graph (a Python branch on a tensor's value), so both skip it: torch asserts on targets
    out of range itself, and :mod:`calib.train` refuses a non-finite epoch loss. The checks of shapes, dtypes
    and options read no value and always run (``torch.compile`` evaluates them once, while tracing).
    """
    return tensor.device.type == "cpu" and not torch.compiler.is_compiling()


def check_reduction(reduction) -> str:
    """``reduction`` if it is one of :data:`REDUCTIONS`, else a ValueError listing them."""
    if reduction not in REDUCTIONS:
        raise ValueError(f"reduction={reduction!r} is not supported; choose one of {', '.join(map(repr, REDUCTIONS))}.")
    return reduction


def check_ignore_index(ignore_index) -> int:
    """``ignore_index`` as an int (torch's convention: targets equal to it are left out; default -100)."""
    if isinstance(ignore_index, bool) or not isinstance(ignore_index, numbers.Integral):
        raise ValueError(f"ignore_index must be an integer (the target value to leave out, -100 by default, as in "
                         f"torch.nn.CrossEntropyLoss); got {ignore_index!r}.")
    return int(ignore_index)


def check_class_weight(weight) -> torch.Tensor | None:
    """The class weights as a floating 1-D tensor (a copy, detached), checked finite and >= 0; None stays None.

    torch's convention (``torch.nn.CrossEntropyLoss(weight=...)``): sample i counts with ``weight[y_i]``, and
    ``reduction="mean"`` divides by the sum of the counted samples' weights.
    """
    if weight is None:
        return None
    try:
        w = torch.as_tensor(weight).detach().clone()
    except (TypeError, ValueError, RuntimeError) as exc:
        raise ValueError(f"weight must be a 1-D tensor of K class weights; could not read it ({exc}).") from None
    if w.ndim != 1 or w.shape[0] == 0:
        raise ValueError(f"weight must be a 1-D tensor of K class weights (one per column of logits); got shape "
                         f"{tuple(w.shape)}.")
    if w.dtype == torch.bool or w.is_complex():
        raise ValueError(f"weight has dtype {w.dtype}; pass real class weights (e.g. torch.tensor([1.0, 2.0])).")
    if not w.is_floating_point():
        w = w.to(torch.get_default_dtype())         # integer weights, as torch's default float
    if not bool(torch.isfinite(w).all()) or bool((w < 0).any()):
        raise ValueError(f"weight must hold finite class weights >= 0; got {w.tolist() if w.numel() <= 10 else w}.")
    return w


def check_inputs(logits: torch.Tensor, targets: torch.Tensor, reduction: str, ignore_index: int | None = None,
                 weight: torch.Tensor | None = None, *, finite_logits: bool = True, target_values: bool = True) -> bool:
    """Refuse, with a ValueError that says what to change, (logits, targets) that no loss can score.

    Shapes, dtypes, the reduction, an empty batch, the class weights' length, and where
    :func:`values_are_checked` (eager, CPU) also targets outside [0, K) (other than ``ignore_index``), a mean
    over a batch whose targets are all ``ignore_index``, and logits that are NaN, +inf, or -inf in a whole row
    (:func:`check_finite_logits`; with ``finite_logits=False`` the caller checks them later, from the rows'
    log-probabilities, with :func:`check_finite_rows`). With ``target_values=False`` the targets' values are
    not read here either: the caller reads them with :func:`check_target_values` when its computation fails.

    Returns whether a target may equal ``ignore_index``: False only when the targets' values were read and none
    can (``ignore_index`` None or outside their range), so that a loss can skip the masks of ignored rows.
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
    check_reduction(reduction)
    if logits.shape[0] == 0:
        raise ValueError("logits has no rows (an empty batch): a mean over no samples is undefined; skip empty "
                         "batches (e.g. drop_last=True, or test len(batch) before the loss).")
    if logits.shape[1] == 0:
        raise ValueError("logits has no columns (K = 0): there is no class to score; check the model's output layer.")
    if not logits.is_floating_point():
        raise ValueError(f"logits has dtype {logits.dtype}; pass floating-point scores (logits.float()).")
    if weight is not None and (weight.ndim != 1 or weight.shape[0] != logits.shape[1]):
        raise ValueError(f"weight has shape {tuple(weight.shape)} but logits has {logits.shape[1]} classes; pass one "
                         f"weight per class, shape ({logits.shape[1]},).")
    may_ignore = ignore_index is not None
    if target_values and values_are_checked(targets):
        may_ignore = check_target_values(targets, logits.shape[1], reduction, ignore_index, weight)
    if finite_logits and values_are_checked(logits):
        check_finite_logits(logits)
    return may_ignore


def check_target_values(targets: torch.Tensor, k: int, reduction: str, ignore_index: int | None,
                        weight: torch.Tensor | None) -> bool:
    """Targets in [0, K) or equal to ``ignore_index``, and for a mean a positive total weight of the counted ones
    (at least one target that is not ignored; with class weights, one whose class weighs more than 0). Returns
    whether ``ignore_index`` lies within the targets' range (so that some may equal it)."""
    low, high = (int(x) for x in torch.aminmax(targets))
    ignored = ignore_index is not None and low <= ignore_index <= high
    if ignored:                                   # the bounds of the targets that count
        counted = targets[targets != ignore_index]
        if counted.numel() == 0:
            if reduction == "mean":
                raise ValueError(f"every target of the batch is ignore_index={ignore_index}: a mean over no "
                                 f"samples is undefined (torch would return nan); skip such batches, or use "
                                 f"reduction='sum'.")
            return True
        low, high = (int(x) for x in torch.aminmax(counted))
    else:
        counted = targets
    if low < 0 or high >= k:
        also = "" if ignore_index is None else f" or equal ignore_index={ignore_index}"
        raise ValueError(f"targets must lie in [0, {k}) (one index per class of logits){also}; found "
                         f"{low if low < 0 else high}. Check the label encoding and the number of outputs of "
                         f"the model.")
    if weight is not None and reduction == "mean" and not bool(weight.to(counted.device)[counted.long()].sum() > 0):
        raise ValueError("the batch's targets all have class weight 0: reduction='mean' divides by their total "
                         "weight, 0 (torch would return nan); give those classes a weight > 0, or use "
                         "reduction='sum'.")
    return ignored


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


def check_finite_rows(logits: torch.Tensor, row_log_probs: torch.Tensor, also=None) -> None:
    """:func:`check_finite_logits`, read from values that every row enters (one log-probability a row, its
    log-softmax at any column, before an ignored row is masked; or a loss over all rows), where
    :func:`values_are_checked`: one read of at most N values instead of a pass over N x K.

    A row with a NaN or a +inf, or -inf in every class, has a NaN log-softmax in every column, so the values are
    not finite when one of them occurs; only then (or when a masked class is the one read, -inf, or the sum
    overflows) are the logits themselves checked, with the same messages, after ``also()`` (another check that
    explains a value that is not finite, e.g. class weights that sum to 0), if given.
    """
    if not values_are_checked(row_log_probs):
        return
    values = row_log_probs.detach()
    # a 0-d loss is read as it is (no new tensor: the check costs one read); N values are summed in float64
    total = values.item() if values.ndim == 0 else float(values.sum(dtype=torch.float64))
    if not math.isfinite(total):
        if also is not None:
            also()
        check_finite_logits(logits)


def reduce(values: torch.Tensor, reduction: str) -> torch.Tensor:
    """The per-sample ``values`` reduced as ``reduction`` says: their mean, their sum, or themselves."""
    if reduction == "mean":
        return values.mean()
    if reduction == "sum":
        return values.sum()
    return values


def counted_targets(targets: torch.Tensor, ignore_index: int | None) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``(index, counted)``: the targets as int64 with ``ignore_index`` replaced by class 0 (an index every row
    has, so that a gather reads a real entry), and the mask of the targets that count (None when no index is
    ignored)."""
    index = targets.long()
    if ignore_index is None:
        return index, None
    counted = index != ignore_index
    return torch.where(counted, index, 0), counted


def reduce_counted(values: torch.Tensor, index: torch.Tensor, counted: torch.Tensor | None,
                   weight: torch.Tensor | None, reduction: str) -> torch.Tensor:
    """Per-sample ``values`` reduced as ``torch.nn.functional.cross_entropy`` reduces its terms.

    Sample i counts with the class weight ``weight[y_i]`` (1 without weights) and not at all when its target is
    ``ignore_index`` (``counted`` False: its value becomes 0, whatever it was). ``"none"``: the weighted values;
    ``"sum"``: their sum; ``"mean"``: their sum over the sum of the counted samples' weights (their number
    without weights), torch's weighted mean. Without weights and ignored targets this is :func:`reduce`'s
    ``mean()``, to the bit (both divide the sum by N).
    """
    if weight is not None:
        w = weight.to(device=values.device, dtype=values.dtype)[index]
        if counted is not None:
            w = torch.where(counted, w, 0.0)
        values = values * w
    if counted is not None:
        values = torch.where(counted, values, 0.0)
    if reduction == "none":
        return values
    total = values.sum()
    if reduction == "sum":
        return total
    if weight is not None:
        return total / w.sum()
    if counted is not None:
        return total / counted.sum()
    return total / values.shape[0]


def p_log_p(probs: torch.Tensor, log_probs: torch.Tensor) -> torch.Tensor:
    """p log p with 0 log 0 = 0 and a finite gradient where p = 0 (a masked class, log p = -inf).

    log p is raised to -1000 where it is lower (-inf for a masked class). Below about -745, p = exp(log p) is 0
    in every float dtype, so the product is 0 either way, and its gradient is 0 instead of 0 * inf = nan; a
    modest bound, unlike the dtype's lowest value, keeps the chain rule's intermediate products finite."""
    return probs * log_probs.clamp(min=-1000.0)
