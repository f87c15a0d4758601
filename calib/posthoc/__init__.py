"""Post-hoc calibrators: a map fitted on validation logits and applied to test logits.

The calibrators are scikit-learn estimators, probabilistic classifiers of logits
(:class:`~calib.posthoc._common.Estimator`; scikit-learn's ``check_estimator`` runs on them in
``tests/test_sklearn_contract.py``), without calib depending on scikit-learn: ``__init__`` stores its parameters
as given (checked in ``fit``), ``get_params`` / ``set_params`` read and change them (so ``sklearn.base.clone``
works), ``fit(X, y, sample_weight=None)`` fits on validation logits X (N, K), labels y and optional frequency
weights and returns the fitted calibrator, fitted quantities are attributes with a trailing underscore
(``temperature_``, ``gamma_``, ``n_features_in_`` = K, ``classes_``), and ``predict_proba(X)``,
``predict_log_proba(X)`` and ``predict(X)`` apply the map to logits of the same K columns; before a fit they raise
:class:`~calib.posthoc._common.NotFittedError` (a ValueError, and scikit-learn's ``NotFittedError`` once
scikit-learn is imported). The names without the underscore (``temperature``, ``gamma``, ...) are deprecated
aliases that warn (DeprecationWarning).

- :class:`~calib.posthoc.temperature.TemperatureScaling`: ``softmax(z / T)`` (Guo et al. 2017), T by exact NLL or
  Mukhoti et al.'s grid;
- :class:`~calib.posthoc.focal_temperature.FocalTemperatureScaling`: ``p_hat_gamma(softmax(z / T))`` (Komisarenko &
  Kull 2024), (gamma, T) by the paper's grid search (vectorised:
  :func:`~calib.posthoc.focal_temperature.focal_temperature_scores`) or by its proposed line search.

Every map of the book is also registered by name in :data:`~calib.posthoc.registry.REGISTRY`
(:func:`~calib.posthoc.registry.get_map`, :func:`~calib.posthoc.registry.map_names`), the one table that
``calib.experiments.fit_posthoc``, chapter 10 and the API reference read.

Arrays in and out (one policy for calib's maps, :func:`calib.focal.focal_map` and :mod:`calib.metrics`):
logits are (N, K) numpy arrays, array-likes or torch tensors; labels are integer class indices (N,). ``fit``
computes in float64 whatever the input (a float32 array is read in row blocks, never copied whole to float64).
``predict_proba`` returns the input's kind: a numpy array in gives a float64 numpy array out (``focal_map`` alone
keeps a float32 numpy input in float32, its documented float32-safe path); a torch tensor in
gives a tensor out on the same device, of the input's floating dtype (integer tensors give float64; float16 and
bfloat16 are computed in float32 and returned in their dtype), computed by torch and differentiable.

A package; every public name is importable from ``calib.posthoc``:

- :mod:`calib.posthoc.temperature`: temperature scaling and its three fits (NLL, ECE grid, soft-binned ECE);
- :mod:`calib.posthoc.focal_temperature`: focal temperature scaling, its vectorised grid and its line search;
- :mod:`calib.posthoc.grid`: the check that a search's best point is not at the edge of what it searched
  (:class:`~calib.posthoc.grid.GridEdgeWarning`, :class:`~calib.posthoc.grid.SearchBoundWarning`);
- :mod:`calib.posthoc.registry`: the maps by name (:class:`~calib.posthoc.registry.MapSpec`,
  :class:`~calib.posthoc.registry.FittedMap`, the fit functions).
"""

from __future__ import annotations

from calib.posthoc._common import NotFittedError
from calib.posthoc.focal_temperature import (KOMISARENKO_GAMMAS, KOMISARENKO_TEMPERATURES, FocalTemperatureScaling,
                                             focal_temperature_scores)
from calib.posthoc.grid import EDGE_SHARE, GridEdgeWarning, SearchBoundWarning
from calib.posthoc.registry import REGISTRY, FittedMap, MapSpec, focal_loss_gamma, get_map, map_names
from calib.posthoc.temperature import (FINE_GRID, MUKHOTI_GRID, T_RANGE, TemperatureScaling, fit_temperature_grid,
                                       fit_temperature_nll, fit_temperature_sb_ece)

__all__ = ["TemperatureScaling", "FocalTemperatureScaling", "NotFittedError", "GridEdgeWarning", "SearchBoundWarning",
           "fit_temperature_nll", "fit_temperature_grid", "fit_temperature_sb_ece", "focal_temperature_scores",
           "MUKHOTI_GRID", "FINE_GRID", "KOMISARENKO_GAMMAS", "KOMISARENKO_TEMPERATURES", "T_RANGE", "EDGE_SHARE",
           "MapSpec", "FittedMap", "REGISTRY", "get_map", "map_names", "focal_loss_gamma"]
