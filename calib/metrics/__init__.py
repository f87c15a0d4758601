"""Calibration and accuracy metrics of a classifier's predicted probabilities (numpy, float64).

Every metric takes ``probs`` of shape (N, K), rows summing to 1, and integer ``labels`` of shape (N,) in
[0, K); numpy arrays and torch tensors (on any device) are both accepted, and the result is a Python float
(array-valued results, such as :func:`~calib.metrics.risk_coverage.confidence_score`, are float64 numpy arrays).
Inputs are checked by ``calib._validate``, which raises a ValueError naming the argument, the problem and the fix.
float32 input is checked and its top label taken in float32 (no float64 copy); per-row and per-bin quantities are
accumulated in float64, so the results equal those of the float64 copy. Half-precision probabilities (float16,
bfloat16) are refused with a message saying to cast them when their rows miss 1 by more than the tolerance.

A package; every public name is importable from ``calib.metrics``:

- :mod:`calib.metrics.binned`: binned calibration errors (top-label ECE and its variants, AdaECE, MCE,
  class-wise ECE) and the data of a reliability diagram, with the binning conventions they share;
- :mod:`calib.metrics.scores`: NLL, Brier score, accuracy, mean confidence, the Kolmogorov-Smirnov error;
- :mod:`calib.metrics.risk_coverage`: selective classification: confidence score functions, the risk-coverage
  curve and the AURC;
- :mod:`calib.metrics.streaming`: the same metrics accumulated over batches and across processes
  (``update`` / ``compute`` / ``reset``, reduced with ``torch.distributed``);
- :mod:`calib.metrics.registry`: the metrics of the book's tables by name, :data:`~calib.metrics.registry.REGISTRY`
  (:func:`~calib.metrics.registry.get_metric`);
- :mod:`calib.metrics.resampling`: a model's metric on a test set as a statistic of the test samples, which the
  book's intervals resample (:func:`~calib.metrics.resampling.statistic`, :mod:`calib.stats.test_set`).
"""

from __future__ import annotations

# Importable from here though not in __all__ (``name as name`` marks a re-export): the binning options of
# calib.metrics._binning, which is private (calib.simulate checks its arguments against them), and the batched
# equal-mass and equal-width ECEs that focal temperature scaling and temperature scaling's grid call.
from calib.metrics._binning import BINNINGS as BINNINGS
from calib.metrics._binning import ESTIMATORS as ESTIMATORS
from calib.metrics._binning import NORMS as NORMS
from calib.metrics.binned import equal_mass_ece_rows as equal_mass_ece_rows
from calib.metrics.binned import equal_width_ece_rows as equal_width_ece_rows
from calib.metrics.binned import (Reliability, adaptive_ece, adaptive_ece_torrvision, classwise_ece, ece, mce,
                                  reliability, top_label_bins, top_label_ece, top_label_outcomes)
from calib.metrics.registry import REGISTRY, MetricSpec, get_metric, metric_names
from calib.metrics.resampling import (ADDITIVE_METRICS, TOP_LABEL_METRICS, EqualMassStatistic, outcome_statistic,
                                     statistic)
from calib.metrics.risk_coverage import (CSFS, RiskCoverage, aurc, confidence_range, confidence_score,
                                         risk_coverage_curve)
from calib.metrics.scores import accuracy, brier, ks_error, label_log_probability, mean_confidence, nll
from calib.metrics.streaming import (StreamingAccuracy, StreamingAURC, StreamingBrier, StreamingClasswiseECE,
                                     StreamingECE, StreamingMetric, StreamingNLL)

__all__ = [
    "ADDITIVE_METRICS",
    "CSFS",
    "REGISTRY",
    "MetricSpec",
    "Reliability",
    "RiskCoverage",
    "StreamingAURC",
    "StreamingAccuracy",
    "StreamingBrier",
    "StreamingClasswiseECE",
    "StreamingECE",
    "StreamingMetric",
    "StreamingNLL",
    "accuracy",
    "adaptive_ece",
    "adaptive_ece_torrvision",
    "aurc",
    "brier",
    "classwise_ece",
    "confidence_range",
    "confidence_score",
    "ece",
    "get_metric",
    "ks_error",
    "top_label_bins",
    "top_label_ece",
    "top_label_outcomes",
    "label_log_probability",
    "mce",
    "mean_confidence",
    "metric_names",
    "nll",
    "reliability",
    "risk_coverage_curve",
    "statistic",
    "outcome_statistic",
    "EqualMassStatistic",
    "TOP_LABEL_METRICS",
]
