"""The registry of post-hoc maps: every map of the book by name, one table (:data:`REGISTRY`) of :class:`MapSpec`
rows behind :func:`get_map`, :func:`map_names`, ``calib.experiments.fit_posthoc``, chapter 10 and the API reference;
a fitted map is a :class:`FittedMap`.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Callable

from calib.posthoc._common import scaled_focal_map, scaled_softmax
from calib.posthoc.focal_temperature import FocalTemperatureScaling
from calib.posthoc.temperature import FINE_GRID, TemperatureScaling

__all__ = ["MapSpec", "FittedMap", "REGISTRY", "get_map", "map_names", "focal_loss_gamma"]


@dataclass(frozen=True)
class FittedMap:
    """A post-hoc map fitted on validation logits: ``softmax(z / T)``, or ``focal_map(z / T, gamma)``
    (Komisarenko & Kull 2024, Eq. 1) when ``params`` has a ``gamma``; ``T = params.get("temperature", 1)``.

    A plain record of the map's name and fitted ``params`` (``temperature``, ``gamma``), so it pickles (to a
    worker process, or to disk) and compares by value. :meth:`proba` and :meth:`log_proba` follow the estimators'
    array policy (:mod:`calib.posthoc`): a numpy array in gives float64 out, a torch tensor in gives a tensor of
    its dtype on its device; logits that are not a finite (N, K) array raise ValueError naming ``logits``.
    """

    name: str
    params: dict

    def __post_init__(self):
        unknown = set(self.params) - {"temperature", "gamma"}
        if unknown:
            raise ValueError(f"params of FittedMap {self.name!r} has unknown key(s) {sorted(unknown)}; a fitted map "
                             f"has a 'temperature' and/or a 'gamma'.")

    def proba(self, logits):
        """The map's probabilities of ``logits`` (N, K), rows summing to 1 (a tensor is computed by torch and is
        differentiable, as the estimators' ``predict_proba``)."""
        return self._apply(logits, log=False)

    def log_proba(self, logits):
        """The logarithms of :meth:`proba`, exact where a probability underflows to 0 (a log-softmax, or
        :func:`calib.focal.calibration_map.log_focal_map`; the latter, for a tensor, is computed by numpy in
        float64 and carries no gradient)."""
        return self._apply(logits, log=True)

    def _apply(self, logits, log: bool):
        t = self.params.get("temperature", 1.0)
        if "gamma" in self.params:
            return scaled_focal_map(logits, t, self.params["gamma"], log=log)
        return scaled_softmax(logits, t, log=log)


def focal_loss_gamma(loss: str | None) -> float | None:
    """The fixed gamma of a focal-loss name (``"fl-3"`` -> 3.0), asked of the loss registry
    (:func:`calib.losses.focal_gamma <calib.losses.registry.focal_gamma>`); None for any other loss, or for a name
    the registry does not know (a grid's own label, ``"ce-w"``)."""
    if not isinstance(loss, str):
        return None
    from calib.losses import focal_gamma

    try:
        return focal_gamma(loss)
    except ValueError:
        return None


def _fit_none(val_logits, val_labels, loss=None) -> FittedMap:
    return FittedMap("none", {})


def _fit_ts(objective: str, val_logits, val_labels, loss=None, grid=None) -> FittedMap:
    ts = TemperatureScaling(objective=objective, grid=grid).fit(val_logits, val_labels)
    return FittedMap(f"ts-{objective}", {"temperature": ts.temperature_})


def _fit_fts(val_logits, val_labels, loss=None) -> FittedMap:
    fts = FocalTemperatureScaling(objective="ece").fit(val_logits, val_labels)
    return FittedMap("fts", {"temperature": fts.temperature_, "gamma": fts.gamma_})


def _fit_psi(val_logits, val_labels, loss=None) -> FittedMap:
    g = focal_loss_gamma(loss)
    if g is None:
        raise ValueError(f"post-hoc map 'psi' (Psi^gamma) needs a fixed-gamma focal loss 'fl-<gamma>'; got "
                         f"loss={loss!r}.")
    return FittedMap("psi", {"gamma": g})


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


def _fixed_gamma_loss(loss: str | None) -> bool:
    return focal_loss_gamma(loss) is not None


#: Every post-hoc map of the book, in chapter 10's order; :func:`get_map`, :func:`map_names`,
#: ``calib.experiments.fit_posthoc`` and the list in :func:`get_map`'s docstring are generated from it. A new map
#: is one new row (and its fit function).
#:
#: :meta hide-value:
REGISTRY: tuple[MapSpec, ...] = (
    MapSpec("none", "nothing", "softmax of the logits as they are", _fit_none, _any_loss),
    MapSpec("ts-nll", _VAL, "temperature scaling, T by the exact validation NLL (Guo et al. 2017, Sec. 4.2)",
            partial(_fit_ts, "nll"), _any_loss),
    MapSpec("ts-ece", _VAL, "temperature scaling, T on the grid 0.01, ..., 10 (FINE_GRID: Mukhoti et al.'s range "
            "at FTS's step) by the 15-bin validation ECE (Mukhoti et al. 2020, Sec. 5.1, Eq. 1)",
            partial(_fit_ts, "ece", grid=FINE_GRID), _any_loss),
    MapSpec("fts", _VAL, "focal temperature scaling, (gamma, T) on the paper's grid by the 15-bin equal-mass "
            "validation ECE (Komisarenko & Kull 2024, Sec. 5.1, Eq. 1)", _fit_fts, _any_loss),
    MapSpec("psi", "the training loss 'fl-<gamma>' (no fit)", "the focal calibration map Psi^gamma with the "
            "training gamma (Komisarenko & Kull 2024, Sec. 3.3, Eq. 1)", _fit_psi,
            _fixed_gamma_loss),
    MapSpec("ts-sb-ece", _VAL, "temperature scaling, T by the soft-binned validation ECE (Karandikar et al. "
            "2021, Secs. 4.1 and 5.2, Eq. 11)", partial(_fit_ts, "sb-ece"), _any_loss),
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
