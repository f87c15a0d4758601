"""The focal family as ``torch.nn`` modules, built as ``torch.nn.CrossEntropyLoss`` is: ``FocalLoss(gamma=3)``.

Each takes its own parameter (gamma, a schedule) and torch's three options, ``weight`` (class weights, a buffer),
``ignore_index`` (targets left out, -100 by default) and ``reduction`` ("mean", "sum", "none"), with torch's
meaning: sample i counts with ``weight[y_i]``, an ignored sample not at all, and the mean divides by the sum of
the counted samples' weights. At gamma = 0 every one of them is ``torch.nn.functional.cross_entropy`` with the
same options (``tests/losses/test_modules.py`` checks every combination). They are the functions of
:mod:`calib.losses.functional` as modules, and the registry builds them (``get_loss("fl-3")`` is
``FocalLoss(3.0)``); the epoch-scheduled FLSc is :class:`calib.losses.functional.EpochScheduledFocalLoss`,
which takes the same options.

Every option is checked once, when the module is built; a call checks only shapes and dtypes, and the values
of its inputs (targets in range, finite logits) in eager mode on the CPU, so that ``torch.compile`` traces each
loss into one graph without a break (``tests/losses/test_compile.py`` counts them). Half-precision logits are
computed in float32, as autocast computes torch's own losses.
"""

from __future__ import annotations

import torch

from calib.focal import FLSD_53, SCHEDULES, GammaSchedule
from calib.losses._focal import (FocalFamilyLoss, check_schedule, dual_focal_loss_checked, focal_loss_checked,
                                 inverse_focal_loss_checked, sample_dependent_focal_loss_checked, scalar_gamma)

__all__ = ["FocalLoss", "FLSDLoss", "FLSD53Loss", "InverseFocalLoss", "DualFocalLoss"]


class _FixedGammaLoss(FocalFamilyLoss):
    """A loss of one gamma >= 0, checked when it is built."""

    def __init__(self, gamma: float = 2.0, *, weight=None, ignore_index: int = -100, reduction: str = "mean"):
        super().__init__(weight=weight, ignore_index=ignore_index, reduction=reduction)
        self.gamma = scalar_gamma(gamma)

    def extra_repr(self) -> str:
        """gamma and the options, for ``repr(loss)``: ``FocalLoss(gamma=3.0, reduction='mean')``."""
        return f"gamma={self.gamma!r}, {super().extra_repr()}"


class FocalLoss(_FixedGammaLoss):
    r"""Focal loss ``-(1 - p_y)^gamma log p_y`` (Lin et al. 2017, Eq. 5; Mukhoti et al. 2020, Sec. 4) as a module.

    Parameters
    ----------
    gamma : float
        The focal parameter, >= 0 (0 is cross-entropy).
    weight : torch.Tensor of shape (K,), optional
        Class weights (Lin et al.'s alpha per class), as ``torch.nn.CrossEntropyLoss``'s.
    ignore_index : int
        Targets equal to it are left out (of the mean's denominator too); -100 by default.
    reduction : {"mean", "sum", "none"}

    Examples
    --------
    >>> loss = FocalLoss(gamma=3.0)
    >>> loss(torch.tensor([[2.0, 0.0, -1.0]]), torch.tensor([0])).item()  # doctest: +ELLIPSIS
    0.000647...

    See :func:`calib.losses.functional.focal_loss` for the numerics (``log_softmax``, ``expm1``, the limit at
    p_y = 1).
    """

    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """The loss of ``logits`` (N, K) against integer ``targets`` (N,), reduced as ``reduction`` says."""
        return focal_loss_checked(logits, targets, self.gamma, self.reduction, self.weight, self.ignore_index)


class InverseFocalLoss(_FixedGammaLoss):
    r"""Inverse focal loss ``-(1 + p_y)^gamma log p_y`` (Wang et al. 2021; Zhou et al. 2025, Eq. 3) as a module.

    Parameters as :class:`FocalLoss`; see :func:`calib.losses.functional.inverse_focal_loss`.
    """

    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """The loss of ``logits`` (N, K) against integer ``targets`` (N,), reduced as ``reduction`` says."""
        return inverse_focal_loss_checked(logits, targets, self.gamma, self.reduction, self.weight,
                                          self.ignore_index)


class DualFocalLoss(_FixedGammaLoss):
    r"""Dual focal loss ``-(1 - p_y + p_j)^gamma log p_y`` as in Tao et al. (2023)'s official code, as a module.

    Parameters as :class:`FocalLoss`; see :func:`calib.losses.functional.dual_focal_loss` (which :math:`p_j`, and
    how Zhou et al. 2025 describe it differently).
    """

    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """The loss of ``logits`` (N, K) against integer ``targets`` (N,), reduced as ``reduction`` says."""
        return dual_focal_loss_checked(logits, targets, self.gamma, self.reduction, self.weight, self.ignore_index)


class FLSDLoss(FocalFamilyLoss):
    r"""Sample-dependent focal loss (FLSD; Mukhoti et al. 2020, Sec. 4, App. E) as a module.

    Parameters
    ----------
    schedule : calib.focal.GammaSchedule or str
        The bins of p_y and their gammas, or a name of :data:`calib.focal.schedules.SCHEDULES` (``"flsd-53"``,
        ``"flsd-532"``); FLSD-53 by default.
    weight, ignore_index, reduction
        As in :class:`FocalLoss`.

    See :func:`calib.losses.functional.sample_dependent_focal_loss`.
    """

    def __init__(self, schedule: GammaSchedule | str = FLSD_53, *, weight=None, ignore_index: int = -100,
                 reduction: str = "mean"):
        super().__init__(weight=weight, ignore_index=ignore_index, reduction=reduction)
        if isinstance(schedule, str):
            if schedule.strip().lower() not in SCHEDULES:
                raise ValueError(f"schedule={schedule!r} is not a schedule's name; choose one of "
                                 f"{', '.join(map(repr, SCHEDULES))}, or pass a calib.focal.GammaSchedule.")
            schedule = SCHEDULES[schedule.strip().lower()]
        self.schedule = check_schedule(schedule)

    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """The loss of ``logits`` (N, K) against integer ``targets`` (N,), reduced as ``reduction`` says."""
        return sample_dependent_focal_loss_checked(logits, targets, self.schedule, self.reduction, self.weight,
                                                   self.ignore_index)

    def extra_repr(self) -> str:
        """The schedule's name and the options, for ``repr(loss)``."""
        return f"schedule={self.schedule.name!r}, {super().extra_repr()}"


class FLSD53Loss(FLSDLoss):
    """FLSD-53 (Mukhoti et al. 2020, Sec. 4): gamma = 5 where p_y < 0.2, else 3; :class:`FLSDLoss` with
    :data:`calib.focal.schedules.FLSD_53`. Parameters as :class:`FocalLoss`, without gamma."""

    def __init__(self, *, weight=None, ignore_index: int = -100, reduction: str = "mean"):
        super().__init__(FLSD_53, weight=weight, ignore_index=ignore_index, reduction=reduction)
