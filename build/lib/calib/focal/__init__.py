"""The focal family as numpy functions of the predicted probability p (torch too for :func:`focal_map`).

Focal loss (Lin et al. 2017) for a sample whose true class gets probability p is
``L_f = -(1 - p)**gamma * log(p)``; gamma = 0 is cross-entropy. Everything here is float64, vectorised (array
inputs broadcast) and accepts numpy arrays or torch tensors; torch is imported only by :func:`focal_map`, which
computes a torch input in torch (differentiably) and keeps float32 input in float32.

One module per concept; every public name is importable from ``calib.focal``:

- :mod:`calib.focal.gradient`: the gradient factor g(p, gamma) of Mukhoti et al. (2020), Prop. 1 / Eqs. 7-8,
  the threshold p0(gamma) where g = 1 and the Lambert-W closed form gamma*(p0) of Prop. 2;
- :mod:`calib.focal.schedules`: FLSD-53 / FLSD-532 as data (Sec. 4, App. E);
- :mod:`calib.focal.optimum`: the focal risk and its minimiser (App. A; Charoenphakdee et al. 2021, Thms. 8
  and 11), tau_oc;
- :mod:`calib.focal.calibration_map`: the focal calibration map Psi^gamma (Charoenphakdee et al. 2021, Thm. 11;
  Komisarenko & Kull 2024, Eq. 1) and its comparison with temperature scaling (Komisarenko & Kull, Props. 3
  and 5, Figs. 2 and 5-7);
- :mod:`calib.focal.numerics`: the shared kernels (r(p) and log(1 - p_top) in log space, the root solver,
  golden-section search, the checks of gamma), used by the modules above and, being public, by
  :mod:`calib.losses`, :mod:`calib.posthoc`, :mod:`calib.selective` and :mod:`calib.train`; its names are
  imported from it, not re-exported here.

``calib.focal.focal_loss`` (numpy, probabilities against a target distribution) is now :func:`focal_risk`;
the old name still works and warns. The torch training loss is :func:`calib.losses.focal_loss`.
"""

from __future__ import annotations

import warnings

from calib.focal.calibration_map import (CLOSEST_T_GRID_MANY, CLOSEST_T_GRIDS, closest_temperature,
                                         effective_inverse_temperature, focal_calibration_logit, focal_map,
                                         log_f_gamma, log_focal_map, log_focal_weight, top_label_gain, ts_bounds,
                                         ts_distance)
from calib.focal.gradient import (gamma_star, gradient_factor, gradient_factor_dp, lambert_argument, lambert_gamma,
                                  random_linear_softmax_batches, threshold)
from calib.focal.optimum import (entropy_regularised_bound, focal_optimal_prediction, focal_prediction_target,
                                 focal_risk, minimise_focal_risk, tau_oc)
from calib.focal.schedules import (FLSD_53, FLSD_53_TABLE4, FLSD_532, SCHEDULES, GammaSchedule,
                                   effective_gradient_factor, schedule_from_prop2, schedule_gamma,
                                   upweighted_intervals)

__all__ = [
    "gradient_factor", "gradient_factor_dp", "threshold", "gamma_star", "lambert_gamma", "lambert_argument",
    "random_linear_softmax_batches",
    "GammaSchedule", "FLSD_53", "FLSD_53_TABLE4", "FLSD_532", "SCHEDULES", "schedule_gamma",
    "effective_gradient_factor", "upweighted_intervals", "schedule_from_prop2",
    "focal_optimal_prediction", "focal_prediction_target", "focal_risk", "entropy_regularised_bound", "tau_oc",
    "minimise_focal_risk",
    "focal_map", "log_focal_map", "log_focal_weight", "log_f_gamma", "focal_calibration_logit",
    "effective_inverse_temperature", "ts_bounds", "closest_temperature", "ts_distance", "top_label_gain",
    "CLOSEST_T_GRIDS", "CLOSEST_T_GRID_MANY",
]

#: Old names that still work, with a DeprecationWarning: old name -> (new name, object).
_RENAMED = {"focal_loss": ("focal_risk", focal_risk)}


def __getattr__(name: str):
    if name in _RENAMED:
        new, obj = _RENAMED[name]
        warnings.warn(f"calib.focal.{name} is now calib.focal.{new} (numpy: probabilities against a target "
                      f"distribution); the torch training loss is calib.losses.focal_loss.", DeprecationWarning,
                      stacklevel=2)
        return obj
    raise AttributeError(f"module 'calib.focal' has no attribute {name!r}")
