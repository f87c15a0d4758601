"""What the calibrators of :mod:`calib.posthoc` share: scikit-learn's parameter protocol (and the reset of the
fitted attributes at the start of a fit), the deprecated pre-protocol attribute names, the check of tensor logits
and of a temperature grid, the two maps under the package's array policy (:func:`scaled_softmax`,
:func:`scaled_focal_map`), and the sampling noise of a binned ECE. Private to the package:
:mod:`calib.posthoc.temperature`, :mod:`calib.posthoc.focal_temperature` and :mod:`calib.posthoc.registry` import it,
nothing outside ``calib.posthoc`` does.
"""

from __future__ import annotations

import inspect
import math
import warnings

import numpy as np

from calib._validate import as_float_array, as_scores
from calib.focal import focal_map, log_focal_map


class Estimator:
    """scikit-learn's parameter protocol, without depending on scikit-learn: the parameters are the arguments
    of ``__init__``, stored under their own names."""

    @classmethod
    def _param_names(cls) -> list[str]:
        return [p for p in inspect.signature(cls.__init__).parameters if p != "self"]

    def get_params(self, deep: bool = True) -> dict:
        """The parameters given to ``__init__`` (or set since), by name (scikit-learn's protocol)."""
        return {name: getattr(self, name) for name in self._param_names()}

    def _forget_fit(self) -> None:
        """Delete every fitted attribute (a public name with a trailing underscore, scikit-learn's convention).

        ``fit`` calls it first and assigns the fitted attributes only once everything has succeeded (a warning
        turned into an error included), so a fit that raises leaves the estimator unfitted: ``predict_proba``
        then raises the not-fitted error instead of answering with the previous fit's values."""
        for name in [k for k in vars(self) if k.endswith("_") and not k.startswith("_")]:
            delattr(self, name)

    def set_params(self, **params):
        """Change parameters by name; returns self. They are checked by the next ``fit``."""
        names = self._param_names()
        for name, value in params.items():
            if name not in names:
                raise ValueError(f"{type(self).__name__} has no parameter {name!r}; its parameters are "
                                 f"{', '.join(names)}.")
            setattr(self, name, value)
        return self

    def __repr__(self) -> str:
        init = inspect.signature(type(self).__init__).parameters
        shown = [f"{k}={v!r}" for k, v in self.get_params().items()
                 if not isinstance(v, np.ndarray) and not (type(v) is type(init[k].default) and v == init[k].default)]
        fitted = [f"{k}={getattr(self, k):.4g}" for k in ("gamma_", "temperature_") if hasattr(self, k)]
        return f"{type(self).__name__}({', '.join(shown + fitted)})"


def deprecated_alias(old: str, new: str) -> property:
    """The pre-protocol name ``old`` of the fitted attribute ``new``: reads and writes it, with a warning."""
    def warn(self):
        warnings.warn(f"{type(self).__name__}.{old} is deprecated; use {type(self).__name__}.{new} (scikit-learn's "
                      f"trailing underscore for fitted attributes).", DeprecationWarning, stacklevel=3)

    def fget(self):
        warn(self)
        return getattr(self, new, None)

    def fset(self, value):
        warn(self)
        setattr(self, new, value)

    fget.__doc__ = f"Deprecated alias of ``{new}``."
    return property(fget, fset, doc=f"Deprecated alias of ``{new}``.")


def is_tensor(x) -> bool:
    return type(x).__module__.startswith("torch")


def checked_tensor(logits, name: str = "logits"):
    """A floating (N, K) torch tensor of finite logits, K >= 2, on its device (integers become float64)."""
    import torch

    if logits.ndim != 2 or logits.shape[0] == 0 or logits.shape[1] < 2:
        raise ValueError(f"{name} must have shape (N, K) with N >= 1 and K >= 2; got {tuple(logits.shape)}.")
    if not logits.is_floating_point():
        logits = logits.double()
    if not bool(torch.isfinite(logits).all()):
        raise ValueError(f"{name} contains NaN or infinity; remove or repair those entries before calling.")
    return logits


def constant_logits_error() -> ValueError:
    """The error of a fit on logits whose every row is constant: every map of the package then gives the uniform
    distribution whatever its parameters, so no fit is better than another (a fit that returned one would return
    an arbitrary number, read later as a fitted calibration)."""
    return ValueError(
        "logits: every row is constant (all K logits of a sample are equal), so softmax(z / T) is uniform "
        "for every T and no temperature fits better than another. The model's output carries no "
        "information: check that the logits are the network's last layer on real inputs (not a dead or "
        "untrained layer, or a constant placeholder)."
    )


def scaled_softmax(logits, temperature: float, log: bool = False):
    """``softmax(logits / T)`` (or its logarithm) under the package's array policy (:mod:`calib.posthoc`).

    A numpy array or array-like gives a float64 ndarray. A torch tensor gives a tensor on its device, of its
    floating dtype (integers give float64; float16 and bfloat16 are computed in float32), computed by torch and
    differentiable. Logits that are not a finite (N, K) array with K >= 2 raise ValueError naming ``logits``.
    """
    if is_tensor(logits):
        import torch

        z = checked_tensor(logits)
        low = z.dtype in (torch.float16, torch.bfloat16)
        scaled = (z.float() if low else z) / temperature
        out = torch.log_softmax(scaled, dim=1) if log else torch.softmax(scaled, dim=1)
        return out.to(z.dtype) if low else out
    from scipy.special import log_softmax, softmax

    z = as_scores(logits, "logits", kind="logits") / temperature
    return log_softmax(z, axis=1) if log else softmax(z, axis=1)


def scaled_focal_map(logits, temperature: float, gamma: float, log: bool = False):
    """``focal_map(logits / T, gamma)`` (:func:`calib.focal.calibration_map.focal_map`; Komisarenko & Kull 2024,
    Eq. 1), or its logarithm (:func:`~calib.focal.calibration_map.log_focal_map`, finite where a probability
    underflows to 0), under the package's array policy (:func:`scaled_softmax`).

    The logarithm of a tensor is computed by numpy in float64 (calib.focal has no torch log-space map) and returned
    as a tensor of the input's dtype on its device: it is exact, and carries no gradient.
    """
    if is_tensor(logits):
        z = checked_tensor(logits)
        if not log:
            return focal_map(z / temperature, gamma)
        import torch

        out = log_focal_map(z.detach().to("cpu", torch.float64).numpy() / temperature, gamma)
        return torch.as_tensor(out).to(device=z.device, dtype=z.dtype)
    z = as_scores(logits, "logits", kind="logits") / temperature
    return log_focal_map(z, gamma) if log else focal_map(z, gamma)


def as_grid(grid, name: str) -> np.ndarray:
    arr = as_float_array(grid, name, ndim=1)
    if arr.size == 0 or np.any(arr <= 0):
        raise ValueError(f"{name} must be a non-empty 1-D array of positive temperatures; got {arr!r}.")
    return arr



def sampling_noise(n: int) -> float:
    """1 / (2 sqrt(N)): the largest standard error of an accuracy measured on N samples, the scale below which
    two binned ECEs of one validation set cannot be told apart."""
    return 0.5 / math.sqrt(n)
