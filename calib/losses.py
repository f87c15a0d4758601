"""Training losses (torch) and a registry that builds them from a name.

Every loss takes ``logits`` of shape (N, K) and integer ``targets`` of shape (N,) and returns a scalar tensor,
the mean over the batch (``reduction="none"`` gives the per-sample values). Losses are computed from
``log_softmax``, never from rounded probabilities, so that they and their gradients stay finite when a
float32 softmax saturates.

``get_loss(name)`` parses the names used across the book and by ``calib train``:

- ``"ce"``: cross-entropy;
- ``"fl-<gamma>"``: focal loss with a fixed gamma >= 0, e.g. ``"fl-3"``, ``"fl-0.5"`` (Lin et al. 2017).

Later issues add their names to :data:`LOSSES`.
"""

from __future__ import annotations

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
    return "'ce', 'fl-<gamma>' (e.g. 'fl-3', 'fl-0.5')"


def get_loss(name: str) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    """The loss called ``name``, as a callable ``(logits, targets) -> scalar tensor`` (mean over the batch).

    Parameters
    ----------
    name : str
        ``"ce"`` or ``"fl-<gamma>"`` (e.g. ``"fl-3"``, ``"fl-0.5"``); case-insensitive.

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
    return factory(name, arg if sep else None)
