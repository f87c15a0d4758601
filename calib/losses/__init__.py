"""Training losses in torch and the registry that builds them from a name.

Every loss takes ``logits`` of shape (N, K) and integer ``targets`` of shape (N,) and returns a scalar tensor,
the mean over the batch (or, with ``reduction``, the sum or the per-sample values). Losses are computed from
``log_softmax``, never from rounded probabilities, so that they and their gradients stay finite when a float32
softmax saturates.

- :mod:`calib.losses.functional`: per-sample losses (``reduction="none"`` gives the per-sample values):
  cross-entropy, focal loss, FLSD / FLSc, inverse and dual focal loss, Brier score, label smoothing;
- :mod:`calib.losses.modules`: the focal family as ``torch.nn`` modules with ``torch.nn.CrossEntropyLoss``'s
  options (``FocalLoss(gamma, weight=..., ignore_index=..., reduction=...)``, FLSD, inverse and dual focal loss);
- :mod:`calib.losses.batch`: batch statistics: the selective AURC loss (Zhou et al. 2025), SB-ECE, AvUC,
  S-AvUC (Karandikar et al. 2021) and MMCE (Kumar et al. 2018);
- :mod:`calib.losses.registry`: one table of every loss family, from which ``get_loss("fl-3")``,
  ``get_loss("ce", secondary="sb-ece", secondary_weight=0.5)`` and the lists of names are generated; the
  losses it builds are ``torch.nn.Module`` objects that pickle.

Every public name is importable from ``calib.losses``. ``calib.losses.soft_binned_ece`` is now
:func:`soft_binned_ece_loss` (logits and targets; the numpy metric on confidences is
:func:`calib.soft_binning.soft_binned_ece`); the old name still works and warns.
"""

from __future__ import annotations

import warnings

from calib.losses.batch import (AVUC_EPS, au_weights, avuc, avuc_gs, confidence_incentive, mmce, s_avuc,
                                selective_au_loss, soft_binned_ece_loss)
from calib.losses.functional import (FLSC_SCHEDULES, EpochScheduledFocalLoss, brier_loss, confidence_scores,
                                     cross_entropy, dual_focal_loss, focal_loss, inverse_focal_loss,
                                     label_smoothing_loss, sample_dependent_focal_loss)
from calib.losses.modules import DualFocalLoss, FLSD53Loss, FLSDLoss, FocalLoss, InverseFocalLoss
from calib.losses.registry import (AURC_DEFAULTS, LOSSES, REGISTRY, S_AVUC_DEFAULTS, SECONDARY_LOSSES, CombinedLoss,
                                   LossSpec, RegisteredLoss, combined_loss, describe_loss, focal_gamma, get_loss,
                                   get_secondary_loss, loss_names, secondary_loss_names)
from calib.metrics import CSFS

__all__ = [
    "cross_entropy", "focal_loss", "inverse_focal_loss", "dual_focal_loss", "sample_dependent_focal_loss",
    "EpochScheduledFocalLoss", "FLSC_SCHEDULES", "FocalLoss", "FLSDLoss", "FLSD53Loss", "InverseFocalLoss",
    "DualFocalLoss", "brier_loss", "label_smoothing_loss", "confidence_scores", "CSFS",
    "au_weights", "selective_au_loss", "soft_binned_ece_loss", "avuc", "avuc_gs", "s_avuc", "mmce",
    "confidence_incentive", "AVUC_EPS",
    "LossSpec", "REGISTRY", "LOSSES", "SECONDARY_LOSSES", "AURC_DEFAULTS", "S_AVUC_DEFAULTS", "get_loss",
    "get_secondary_loss", "loss_names", "secondary_loss_names", "describe_loss", "combined_loss", "focal_gamma",
    "RegisteredLoss",
    "CombinedLoss",
]

#: Old names that still work, with a DeprecationWarning: old name -> (new name, object).
_RENAMED = {"soft_binned_ece": ("soft_binned_ece_loss", soft_binned_ece_loss)}


def __getattr__(name: str):
    if name in _RENAMED:
        new, obj = _RENAMED[name]
        warnings.warn(f"calib.losses.{name} is now calib.losses.{new} (torch: logits and targets); the numpy metric "
                      f"on confidences is calib.soft_binning.soft_binned_ece.", DeprecationWarning, stacklevel=2)
        return obj
    raise AttributeError(f"module 'calib.losses' has no attribute {name!r}")
