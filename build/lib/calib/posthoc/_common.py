"""What the calibrators of :mod:`calib.posthoc` share: scikit-learn's parameter protocol, the deprecated
pre-protocol attribute names, the check of tensor logits and of a temperature grid, and the sampling noise of a
binned ECE. Private to the package: :mod:`calib.posthoc.temperature` and :mod:`calib.posthoc.focal_temperature`
import it, nothing outside ``calib.posthoc`` does.
"""

from __future__ import annotations

import inspect
import math
import warnings

import numpy as np

from calib._validate import as_float_array


class Estimator:
    """scikit-learn's parameter protocol, without depending on scikit-learn: the parameters are the arguments
    of ``__init__``, stored under their own names."""

    @classmethod
    def _param_names(cls) -> list[str]:
        return [p for p in inspect.signature(cls.__init__).parameters if p != "self"]

    def get_params(self, deep: bool = True) -> dict:
        """The parameters given to ``__init__`` (or set since), by name (scikit-learn's protocol)."""
        return {name: getattr(self, name) for name in self._param_names()}

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


def as_grid(grid, name: str) -> np.ndarray:
    arr = as_float_array(grid, name, ndim=1)
    if arr.size == 0 or np.any(arr <= 0):
        raise ValueError(f"{name} must be a non-empty 1-D array of positive temperatures; got {arr!r}.")
    return arr



def sampling_noise(n: int) -> float:
    """1 / (2 sqrt(N)): the largest standard error of an accuracy measured on N samples, the scale below which
    two binned ECEs of one validation set cannot be told apart."""
    return 0.5 / math.sqrt(n)
