"""The registry of post-hoc maps: every map of the book by name, one table (:data:`REGISTRY`) of :class:`MapSpec`
rows behind :func:`get_map`, :func:`map_names`, ``calib.experiments.fit_posthoc``, chapter 10 and the API reference;
a fitted map is a :class:`FittedMap`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
from scipy.special import log_softmax, softmax

from calib.focal import focal_map, log_focal_map
from calib.posthoc.focal_temperature import FocalTemperatureScaling
from calib.posthoc.temperature import TemperatureScaling

__all__ = ["MapSpec", "FittedMap", "REGISTRY", "get_map", "map_names", "focal_loss_gamma"]

@dataclass(frozen=True)
class FittedMap:
    """A post-hoc map fitted on validation logits: ``proba`` and ``log_proba`` map logits (N, K) to float64
    probabilities and their logarithms (exact where a probability underflows to 0); ``params`` holds the
    fitted ``temperature`` and ``gamma``."""

    name: str
    params: dict
    proba: Callable
    log_proba: Callable


def focal_loss_gamma(loss: str | None) -> float | None:
    """The fixed gamma of a focal-loss name (``"fl-3"`` -> 3.0), asked of the loss registry
    (:func:`calib.losses.focal_gamma <calib.losses.registry.focal_gamma>`); None for any other loss, or for a name the registry does not know (a grid's
    own label, ``"ce-w"``)."""
    if not isinstance(loss, str):
        return None
    from calib.losses import focal_gamma

    try:
        return focal_gamma(loss)
    except ValueError:
        return None


def _as_float64(z) -> np.ndarray:
    return np.asarray(z, dtype=np.float64)


def _scaled_softmax(name: str, params: dict) -> FittedMap:
    t = params.get("temperature", 1.0)
    return FittedMap(name, params, lambda z: softmax(_as_float64(z) / t, axis=1),
                     lambda z: log_softmax(_as_float64(z) / t, axis=1))


def _scaled_focal(name: str, params: dict) -> FittedMap:
    t, g = params.get("temperature", 1.0), params["gamma"]
    return FittedMap(name, params, lambda z: focal_map(_as_float64(z) / t, g),
                     lambda z: log_focal_map(_as_float64(z) / t, g))


def _fit_none(val_logits, val_labels, loss=None) -> FittedMap:
    return _scaled_softmax("none", {})


def _fit_ts(objective: str):
    def fit(val_logits, val_labels, loss=None) -> FittedMap:
        ts = TemperatureScaling(objective=objective).fit(val_logits, val_labels)
        return _scaled_softmax(f"ts-{objective}", {"temperature": ts.temperature_})
    return fit


def _fit_fts(val_logits, val_labels, loss=None) -> FittedMap:
    fts = FocalTemperatureScaling(objective="ece").fit(val_logits, val_labels)
    return _scaled_focal("fts", {"temperature": fts.temperature_, "gamma": fts.gamma_})


def _fit_psi(val_logits, val_labels, loss=None) -> FittedMap:
    g = focal_loss_gamma(loss)
    if g is None:
        raise ValueError(f"post-hoc map 'psi' (Psi^gamma) needs a fixed-gamma focal loss 'fl-<gamma>'; got "
                         f"loss={loss!r}.")
    return _scaled_focal("psi", {"gamma": g})


@dataclass(frozen=True)
class MapSpec:
    """One post-hoc map in the registry; calling it fits it: ``spec(val_logits, val_labels, loss=None)``.

    Attributes
    ----------
    name : str
        The map's name (``"ts-nll"``), as in chapter 10's tables and ``calib sweep --evaluate``.
    takes : str
        What it is fitted on.
    summary : str
        What it is, with its paper and equation.
    fit : callable
        ``fit(val_logits, val_labels, loss) -> FittedMap``.
    applies : callable
        ``applies(loss) -> bool``: whether the map exists for a network trained with ``loss`` (a loss name).
    """

    name: str
    takes: str
    summary: str
    fit: Callable[..., FittedMap]
    applies: Callable[[str | None], bool]

    def __call__(self, val_logits, val_labels, loss: str | None = None) -> FittedMap:
        return self.fit(val_logits, val_labels, loss)


_VAL = "validation logits and labels"


def _any_loss(loss: str | None) -> bool:
    return True

#: Every post-hoc map of the book, in chapter 10's order; :func:`get_map`, :func:`map_names`,
#: ``calib.experiments.fit_posthoc`` and the list in :func:`get_map`'s docstring are generated from it. A new map
#: is one new row (and its fit function).
#:
#: :meta hide-value:
REGISTRY: tuple[MapSpec, ...] = (
    MapSpec("none", "nothing", "softmax of the logits as they are", _fit_none, _any_loss),
    MapSpec("ts-nll", _VAL, "temperature scaling, T by the exact validation NLL (Guo et al. 2017, Sec. 4.2)",
            _fit_ts("nll"), _any_loss),
    MapSpec("ts-ece", _VAL, "temperature scaling, T on the grid 0.1, ..., 10 by the 15-bin validation ECE "
            "(Mukhoti et al. 2020, Sec. 5.1, Eq. 1)", _fit_ts("ece"), _any_loss),
    MapSpec("fts", _VAL, "focal temperature scaling, (gamma, T) on the paper's grid by the 15-bin equal-mass "
            "validation ECE (Komisarenko & Kull 2024, Sec. 5.1, Eq. 1)", _fit_fts, _any_loss),
    MapSpec("psi", "the training loss 'fl-<gamma>' (no fit)", "the focal calibration map Psi^gamma with the "
            "training gamma (Komisarenko & Kull 2024, Sec. 3.3, Eq. 1)", _fit_psi,
            lambda loss: focal_loss_gamma(loss) is not None),
    MapSpec("ts-sb-ece", _VAL, "temperature scaling, T by the soft-binned validation ECE (Karandikar et al. "
            "2021, Secs. 4.1 and 5.2, Eq. 11)", _fit_ts("sb-ece"), _any_loss),
)

_MAPS = {spec.name: spec for spec in REGISTRY}


def map_names() -> tuple[str, ...]:
    """The registered post-hoc map names, in :data:`REGISTRY` order."""
    return tuple(_MAPS)


def get_map(name: str) -> MapSpec:
    """The post-hoc map called ``name``, a :class:`MapSpec`; ``get_map(name)(val_logits, val_labels, loss)``
    fits it and returns a :class:`FittedMap`.

    Raises
    ------
    ValueError
        For an unknown name, listing the registered ones.
    """
    if not isinstance(name, str) or name not in _MAPS:
        raise ValueError(f"unknown post-hoc map {name!r}; choose from {', '.join(map_names())}.")
    return _MAPS[name]


if get_map.__doc__:  # python -OO strips docstrings
    get_map.__doc__ += "\n    Notes\n    -----\n    The maps, generated from :data:`REGISTRY`:\n\n" + "\n".join(
        f"    - ``{s.name}``: {s.summary}; fitted on {s.takes}." for s in REGISTRY) + "\n"
