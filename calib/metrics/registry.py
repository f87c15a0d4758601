"""The registry of metrics: every metric of the book's tables by name, one table (:data:`REGISTRY`) behind
:func:`get_metric`, :func:`metric_names`, ``calib.experiments.score_probabilities`` and the API reference.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from calib._validate import as_float_array, as_labels
from calib.metrics.binned import adaptive_ece, classwise_ece, ece, mce
from calib.metrics.risk_coverage import aurc
from calib.metrics.scores import accuracy, brier, ks_error, mean_confidence, nll

__all__ = ["MetricSpec", "REGISTRY", "get_metric", "metric_names"]


# ----------------------------------------------------------------------------------------------------------
# the registry: every metric of the book's tables by name
# ----------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class MetricSpec:
    """One metric in the registry; calling it scores: ``spec(probs, labels, n_bins=15) -> float``.

    Attributes
    ----------
    name : str
        The metric's name in chapter 10's long-format rows (``"adaece"``).
    takes : str
        Its arguments beyond ``probs`` and ``labels`` (``"n_bins"`` or ``""``).
    summary : str
        What it is, with its paper and equation.
    compute : callable
        ``compute(probs, labels, n_bins) -> float``.
    from_log_probs : callable or None
        ``from_log_probs(log_probs, labels) -> float``, the same metric from log-probabilities, where it exists
        (the NLL, finite where a probability underflowed to 0).
    """

    name: str
    takes: str
    summary: str
    compute: Callable[..., float]
    from_log_probs: Callable[..., float] | None

    def __call__(self, probs, labels, n_bins: int = 15) -> float:
        return float(self.compute(probs, labels, n_bins))


def _nll_from_log_probs(log_probs, labels) -> float:
    z = as_float_array(log_probs, "log_probs", ndim=2, finite=False)   # a tensor on any device, with grad, too
    # -inf is a log-probability (of a probability 0: the NLL is then infinite, as it is); NaN and +inf are not, and
    # gave a NaN or -inf NLL without a word
    bad = np.isnan(z) | (z == np.inf)
    if bad.any():
        at = tuple(int(i) for i in np.argwhere(bad)[0])
        raise ValueError(f"log_probs contains NaN or +infinity (first at index {at}); log-probabilities are at most "
                         f"0 (-inf for a probability 0): pass log_softmax of the logits.")
    y = as_labels(labels, "labels", n=z.shape[0], n_classes=z.shape[1])
    return float(-np.mean(z[np.arange(len(y)), y]))


#: Every metric of the book's tables, in chapter 10's order (15 bins for the binned ones by default);
#: :func:`get_metric`, :func:`metric_names`, ``calib.experiments.score_probabilities`` and the list in
#: :func:`get_metric`'s docstring are generated from it. A new metric is its function and one new row.
#:
#: :meta hide-value:
REGISTRY: tuple[MetricSpec, ...] = (
    MetricSpec("accuracy", "", "share of argmax predictions equal to the label", lambda p, y, m: accuracy(p, y), None),
    MetricSpec("ece", "n_bins", "equal-width top-label ECE (Guo et al. 2017; Mukhoti et al. 2020, Eq. 1)",
               lambda p, y, m: ece(p, y, n_bins=m), None),
    MetricSpec("adaece", "n_bins", "equal-mass top-label ECE, AdaECE (Mukhoti et al. 2020, Eq. 3; Komisarenko & "
               "Kull 2024's ECE)", lambda p, y, m: adaptive_ece(p, y, n_bins=m), None),
    MetricSpec("ece_em_l2", "n_bins", "equal-mass l2 top-label ECE (Karandikar et al. 2021, Eq. 6 with p = 2)",
               lambda p, y, m: ece(p, y, n_bins=m, binning="quantile", norm="l2"), None),
    MetricSpec("classwise_ece", "n_bins", "class-wise ECE (Zhou et al. 2025, Def. A.1, Eq. 18)",
               lambda p, y, m: classwise_ece(p, y, n_bins=m), None),
    MetricSpec("mce", "n_bins", "maximum calibration error (Naeini et al. 2015; Mukhoti et al. 2020, Eq. 2)",
               lambda p, y, m: mce(p, y, n_bins=m), None),
    MetricSpec("nll", "", "negative log-likelihood", lambda p, y, m: nll(p, y), _nll_from_log_probs),
    MetricSpec("brier", "", "multiclass Brier score (Brier 1950)", lambda p, y, m: brier(p, y), None),
    MetricSpec("ks_error", "", "top-label Kolmogorov-Smirnov calibration error (Gupta et al. 2021, Sec. 4)",
               lambda p, y, m: ks_error(p, y), None),
    MetricSpec("aurc", "", "area under the risk-coverage curve, MSP (Geifman et al. 2019; Zhou et al. 2025, "
               "Def. 3.3)", lambda p, y, m: aurc(p, y), None),
    MetricSpec("mean_confidence", "", "mean top-label confidence (with accuracy: Zhou et al. 2025, Fig. 3)",
               lambda p, y, m: mean_confidence(p, y), None),
)

_METRICS = {spec.name: spec for spec in REGISTRY}


def metric_names() -> tuple[str, ...]:
    """The registered metric names, in :data:`REGISTRY` order."""
    return tuple(_METRICS)


def get_metric(name: str) -> MetricSpec:
    """The metric called ``name``, a :class:`MetricSpec`: ``get_metric("adaece")(probs, labels)`` scores.

    Raises
    ------
    ValueError
        For an unknown name, listing the registered ones.
    """
    if not isinstance(name, str) or name not in _METRICS:
        raise ValueError(f"unknown metric {name!r}; choose from {', '.join(metric_names())}.")
    return _METRICS[name]


if get_metric.__doc__:  # python -OO strips docstrings
    get_metric.__doc__ += "\n    Notes\n    -----\n    The metrics, generated from :data:`REGISTRY`:\n\n" + "\n".join(
        f"    - ``{s.name}``: {s.summary}{'; takes ' + s.takes if s.takes else ''}." for s in REGISTRY) + "\n"
