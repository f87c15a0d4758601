"""What the calibrators of :mod:`calib.posthoc` share: scikit-learn's estimator protocol (:class:`Estimator`: the
parameters, the reset of the fitted attributes at the start of a fit, the fitted width, ``predict``, the tags and the
not-fitted error), the deprecated pre-protocol attribute names, the check of tensor logits, of a temperature grid and of
sample weights, the two maps under the package's array policy (:func:`scaled_softmax`, :func:`scaled_focal_map`),
and the sampling noise of a binned ECE. Private to the package: :mod:`calib.posthoc.temperature`,
:mod:`calib.posthoc.focal_temperature` and :mod:`calib.posthoc.registry` import it, nothing outside ``calib.posthoc``
does (:class:`NotFittedError` is re-exported by :mod:`calib.posthoc`).
"""

from __future__ import annotations

import functools
import inspect
import math
import sys
import warnings

import numpy as np

from calib import _validate
from calib._validate import as_float_array, as_scores, check_length, checked_tensor, to_numpy
from calib.focal import focal_map, log_focal_map


class NotFittedError(ValueError, AttributeError):
    """A calibrator was used (``predict_proba``, ``predict``, ...) before ``fit``, or after a fit that raised.

    A ValueError (what the calibrators raised before, and calib's error for bad use) and an AttributeError, as
    scikit-learn's ``sklearn.exceptions.NotFittedError``. Once scikit-learn has been imported, the error raised is
    also an instance of scikit-learn's class (``not_fitted_error``), so ``except NotFittedError`` of either
    library catches it; calib never imports scikit-learn itself.
    """


@functools.cache
def _sklearn_not_fitted_class() -> type:
    """calib's :class:`NotFittedError` that is also scikit-learn's (created once, when first needed)."""
    from sklearn.exceptions import NotFittedError as SklearnNotFittedError

    return type("SklearnNotFittedError", (NotFittedError, SklearnNotFittedError),
                {"__module__": __name__, "__qualname__": "SklearnNotFittedError",
                 "__doc__": "calib's NotFittedError, also scikit-learn's (see :class:`NotFittedError`)."})


def __getattr__(name: str):
    # so that a pickled SklearnNotFittedError (an error sent back from a worker process) unpickles where it was not
    # created yet
    if name == "SklearnNotFittedError":
        return _sklearn_not_fitted_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def not_fitted_error(estimator) -> NotFittedError:
    """The error of ``estimator`` used unfitted: a :class:`NotFittedError`, and scikit-learn's too when scikit-learn
    is imported (a caller that catches scikit-learn's class has imported it; calib does not import it for them)."""
    name = type(estimator).__name__
    cls = _sklearn_not_fitted_class() if "sklearn" in sys.modules else NotFittedError
    return cls(f"this {name} is not fitted yet; call fit(X, y) with validation logits X (N, K) and labels y (N,) "
               f"first.")


def checked_sample_weight(sample_weight, n: int) -> np.ndarray | None:
    """Sample weights as frequency weights: None, or a float64 (n,) array of finite non-negative weights with a
    positive sum. Weights that are all 1 give None (the unweighted fit, bit for bit)."""
    if sample_weight is None:
        return None
    w = to_numpy(sample_weight, "sample_weight")
    if w.ndim == 0:
        raise ValueError(f"sample_weight must be a 1-D array of {n} weights, one per row of the logits; got "
                         f"the single number {w.item()!r}.")
    w = as_float_array(w, "sample_weight")
    if w.ndim != 1:
        raise ValueError(f"sample_weight must be 1-D, one weight per row of the logits; got shape {w.shape}.")
    check_length(w, n, "sample_weight", of="rows in the logits")
    if np.any(w < 0):
        raise ValueError(f"sample_weight has negative entries (min {w.min():.4g}); weights count rows and must be "
                         f">= 0.")
    if not w.sum() > 0:
        raise ValueError("sample_weight: every weight is zero, so there is nothing to fit on; give at least one row a "
                         "positive weight.")
    return None if np.all(w == 1) else w


class Estimator:
    """scikit-learn's estimator protocol for a post-hoc calibrator, without depending on scikit-learn.

    - Parameters are the arguments of ``__init__``, stored under their own names and checked in ``fit``
      (``get_params``, ``set_params``; ``sklearn.base.clone`` works).
    - ``fit(X, y, sample_weight=None)`` takes validation logits X (N, K), integer labels y (N,) and optional
      frequency weights, and sets the fitted attributes, public names with a trailing underscore, at its end, among
      them ``n_features_in_`` (K) and ``classes_`` (``0, ..., K-1``).
    - ``predict_proba(X)``, ``predict_log_proba(X)`` and ``predict(X)`` apply the fitted map to logits of the same K
      columns (others raise ValueError); before a fit they raise :class:`NotFittedError`.
    - ``__sklearn_tags__`` and ``__sklearn_is_fitted__`` answer scikit-learn's tools (``check_is_fitted``,
      ``is_classifier``, ``check_estimator``); scikit-learn is imported only when it asks.

    **Why a classifier.** A calibrator is fitted on (logits, labels) and returns class probabilities, as a
    probabilistic classifier does, so it declares itself one (``estimator_type="classifier"``): scikit-learn's
    scorers of probabilities (``scoring="neg_log_loss"``, ``"neg_brier_score"``) and its classifier tools
    (``cross_val_score`` with stratified folds, ``CalibrationDisplay.from_estimator``) accept only classifiers.
    Column j of the logits is class j, so ``classes_`` is ``0, ..., K-1`` (every column, also a class absent from the
    validation labels) and the labels must be those indices. ``predict`` is the argmax of ``predict_proba``; for
    temperature scaling that is the argmax of the logits, and the focal map keeps the top class too wherever the
    tests look. A calibrator learns confidences, not decisions, so its accuracy is the model's (the ``poor_score``
    tag), and it has no ``score`` method (a classifier's default score, the accuracy, would not tell two fits
    apart): pass a scorer of probabilities (``scoring="neg_log_loss"``) to scikit-learn's model selection.

    **Why no base class of scikit-learn.** scikit-learn is a development dependency of calib, not a requirement, and
    importing ``sklearn.base`` loads pandas and joblib, adding about half to the import time of ``calib.posthoc``; the
    protocol above is what scikit-learn's tools read, and its ``check_estimator`` runs on the calibrators. What
    ``BaseEstimator`` would add and this class lacks: the HTML display in notebooks and ``set_fit_request`` (with
    ``sklearn.set_config(enable_metadata_routing=True)``, ``sample_weight`` cannot be routed to ``fit``; without
    metadata routing, the default, ``GridSearchCV(...).fit(X, y, sample_weight=w)`` passes it).
    """

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

    # -- scikit-learn's protocol ------------------------------------------------------------------------------

    def __sklearn_is_fitted__(self) -> bool:
        """Whether :meth:`fit` has succeeded (scikit-learn's ``check_is_fitted`` asks)."""
        return hasattr(self, "n_features_in_")

    def __sklearn_tags__(self):
        """scikit-learn's tags: a classifier (see the class docstring) of dense 2-D float input without NaN, multi-class
        labels 0..K-1 required, whose accuracy is that of the logits (``poor_score``)."""
        from sklearn.utils import ClassifierTags, InputTags, Tags, TargetTags

        return Tags(estimator_type="classifier", target_tags=TargetTags(required=True),
                    classifier_tags=ClassifierTags(poor_score=True, multi_class=True, multi_label=False),
                    input_tags=InputTags(two_d_array=True, sparse=False, allow_nan=False))

    def _record_width(self, n_classes: int) -> None:
        """Set the fitted attributes of the logits' width, ``n_features_in_`` and ``classes_`` (``fit`` calls it last:
        they mark the estimator fitted)."""
        self.n_features_in_, self.classes_ = int(n_classes), np.arange(n_classes)

    def _checked_logits(self, X):
        """X as checked logits of the fitted width: a float64 (N, K) array, or a floating tensor on its device."""
        if not self.__sklearn_is_fitted__():
            raise not_fitted_error(self)
        if not is_tensor(X):
            X = to_numpy(X, "logits")
        if X.ndim == 2 and X.shape[1] != self.n_features_in_:     # before the checks of the values and of K >= 2
            raise ValueError(
                f"logits: X has {X.shape[1]} features, but {type(self).__name__} is expecting {self.n_features_in_} "
                f"features as input: it was fitted on logits of K = {self.n_features_in_} classes (n_features_in_), "
                f"one column per class; pass the logits of the same model (K columns), or fit it again.")
        return checked_tensor(X) if is_tensor(X) else as_scores(X, "logits", kind="logits")

    def _apply(self, z, log: bool):
        """The fitted map of checked logits (or its logarithm); each calibrator defines it."""
        raise NotImplementedError

    def predict_proba(self, X):
        """The calibrated probabilities of logits X (N, K), rows summing to 1: a float64 ndarray for a numpy input,
        a tensor of the input's floating dtype on its device for a tensor (:mod:`calib.posthoc`).

        Raises
        ------
        NotFittedError
            Before a successful :meth:`fit`.
        ValueError
            For logits that are not a finite (N, K) array of the fitted K (``n_features_in_``).
        """
        return self._apply(self._checked_logits(X), log=False)

    def predict_log_proba(self, X):
        """The logarithms of :meth:`predict_proba`, exact where a probability underflows to 0 (same policy)."""
        return self._apply(self._checked_logits(X), log=True)

    def predict(self, X):
        """The class of largest calibrated probability of each row of logits X: ``classes_[argmax]``, an int64
        ndarray (N,), or an int64 tensor for a tensor (see the class docstring)."""
        p = self.predict_proba(X)
        if is_tensor(p):
            return p.argmax(dim=1)
        return self.classes_[np.argmax(p, axis=1)]


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
    return _validate.is_tensor(x)   # a subclass too (another library's tensor type)


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



def weighted_top_label_ece(conf: np.ndarray, correct: np.ndarray, weight: np.ndarray, n_bins: int) -> float:
    """The equal-width top-label ECE with frequency weights: ``sum_b |sum_{i in b} w_i (a_i - c_i)| / sum_i w_i``.

    The bins are those of :func:`calib.metrics.ece <calib.metrics.binned.ece>` (right-closed on the floats
    ``i / M``, a confidence of 0 in the first bin; Guo et al. 2017, Mukhoti et al. 2020, Eq. 1), and each sample
    counts ``w_i`` times in its bin's count, confidence and accuracy: integer weights give the ECE of the rows
    repeated, and weights all equal give the unweighted ECE.
    """
    edges = np.arange(n_bins + 1) / n_bins
    idx = np.searchsorted(edges, conf, side="left") - 1     # c in (edges[j], edges[j + 1]] -> j
    np.maximum(idx, 0, out=idx)                             # c = 0 -> the first bin
    gap = np.bincount(idx, weights=weight * (correct - conf), minlength=n_bins)
    return float(np.abs(gap).sum() / weight.sum())


def weighted_top_label_ece_rows(conf: np.ndarray, correct: np.ndarray, weight: np.ndarray, n_bins: int,
                                block_elements: int = 1 << 15) -> np.ndarray:
    """:func:`weighted_top_label_ece` of each row of ``conf`` (G, N) with outcomes ``correct`` (G, N) and the weights
    ``weight`` (N,), bit for bit: the same bins, the per-bin sums of all rows in one ``np.bincount`` on the indices
    ``g M + bin`` (each bin summed in the samples' order, as the one-row call), and the same sum over the M bins.
    Rows are taken in blocks of about ``block_elements`` confidences; the cost is a few passes over the G N
    confidences, without one Python call per row (temperature scaling's grid)."""
    g, n = conf.shape
    edges = np.arange(n_bins + 1) / n_bins
    total = weight.sum()
    out = np.empty(g)
    step = max(1, block_elements // n)
    for lo in range(0, g, step):
        x = conf[lo:lo + step]
        rows = x.shape[0]
        idx = np.searchsorted(edges, x, side="left") - 1   # c in (edges[j], edges[j + 1]] -> j
        np.maximum(idx, 0, out=idx)                         # c = 0 -> the first bin
        idx += (np.arange(rows) * n_bins)[:, None]          # row r's bins are r M .. r M + M - 1
        gap = np.bincount(idx.ravel(), weights=(weight * (correct[lo:lo + step] - x)).ravel(),
                          minlength=rows * n_bins)
        out[lo:lo + rows] = np.abs(gap).reshape(rows, n_bins).sum(axis=1) / total
    return out


def weighted_equal_mass_ece_rows(conf: np.ndarray, correct: np.ndarray, weight: np.ndarray,
                                 n_bins: int) -> np.ndarray:
    """:func:`calib.metrics.equal_mass_ece_rows <calib.metrics.binned.equal_mass_ece_rows>` with frequency weights
    ``w_i > 0``: the equal-mass (adaptive) top-label ECE of each row of ``conf`` (G, N) (Mukhoti et al. 2020, Eq. 3),
    each sample counted ``w_i`` times.

    The sorted confidences are laid end to end, sample i taking a length ``w_i`` of the total mass W; the M bins
    cut that line where ``np.array_split`` cuts W rows (the first ``W mod M`` bins one unit longer: edges
    ``b q + min(b, r)``, ``q = floor(W / M)``, ``r = W - q M``), a sample split by an edge counts in each bin with
    the length that falls in it, and each group of tied confidences counts with its weighted mean outcome, as in
    :mod:`calib.metrics.binned`. Integer weights give, up to rounding, the unweighted ECE of the rows repeated
    (the edges and the tie groups are the same); all weights 1 give the unweighted ECE. Like the unweighted metric
    on repeated rows, it is not invariant to scaling all weights (W rows do not split as 2W rows do).
    """
    g, n = conf.shape
    total = float(weight.sum())
    q = math.floor(total / n_bins)
    b = np.arange(n_bins + 1)
    edges = b * q + np.minimum(b, total - q * n_bins)      # cumulative mass at the bin edges
    order = np.argsort(conf, axis=1, kind="stable")
    out = np.empty(g)
    for i in range(g):
        x, w = conf[i, order[i]], weight[order[i]]
        hit = w * correct[order[i]]
        new = np.empty(n, dtype=bool)
        new[0] = True
        np.not_equal(x[1:], x[:-1], out=new[1:])
        starts = np.flatnonzero(new)                       # groups of tied confidences
        mass = np.add.reduceat(w, starts)
        excess = np.add.reduceat(hit, starts) - mass * x[starts]   # sum of w (a - c) over the group
        run = np.concatenate([[0.0], np.cumsum(mass)])
        cum = np.concatenate([[0.0], np.cumsum(excess)])
        k = np.clip(np.searchsorted(run, edges, side="right") - 1, 0, mass.size - 1)
        at_edge = cum[k] + (edges - run[k]) * (excess[k] / mass[k])   # the excess up to each edge
        out[i] = np.abs(np.diff(at_edge)).sum() / total
    return out


def sampling_noise(n: float) -> float:
    """1 / (2 sqrt(N)): the largest standard error of an accuracy measured on N samples, the scale below which
    two binned ECEs of one validation set cannot be told apart (with frequency weights, N is their sum)."""
    return 0.5 / math.sqrt(n)
