"""What ``calib.metrics.ece``'s notes say of torchmetrics and netcal (issue 48): the differences are the ones named.

torchmetrics computes the same estimator in float32, and its distance from calib's float64 value comes from its
float32 per-bin sums, not from rounding the confidences; netcal, given two columns and labels in {0, 1}, scores the
positive class's probability p_1 against 1[y = 1] (calib's class-wise ECE for K = 2), not the top label.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import softmax

from calib import metrics


def test_torchmetrics_differs_by_its_float32_sums():
    torch = pytest.importorskip("torch")
    tm = pytest.importorskip("torchmetrics.functional.classification")
    rng = np.random.default_rng(0)
    for n in (1_000, 30_000):
        p = softmax(rng.normal(size=(n, 10)) * 2, axis=1)
        y = rng.integers(0, 10, n)
        ours = metrics.ece(p, y, n_bins=15)
        theirs = float(tm.multiclass_calibration_error(torch.tensor(p), torch.tensor(y), num_classes=10, n_bins=15))
        # the confidences rounded to float32 (as torchmetrics rounds them), the sums kept in float64
        top = p.max(axis=1)
        rounded = p.copy()
        rounded[np.arange(n), p.argmax(axis=1)] = top.astype(np.float32).astype(np.float64)
        cast_only = abs(metrics.ece(rounded, y, n_bins=15) - ours)
        assert 1e-9 < abs(theirs - ours) <= 2e-7
        assert cast_only <= 1e-9 < abs(theirs - ours) / 10


def test_netcal_scores_the_positive_class_for_two_classes():
    netcal = pytest.importorskip("netcal.metrics")
    rng = np.random.default_rng(1)
    p1 = rng.beta(2.0, 2.0, 20_000)
    y = (rng.random(20_000) < p1 ** 1.5).astype(int)
    p = np.column_stack([1 - p1, p1])
    theirs = netcal.ECE(bins=15).measure(p, y)
    edges = np.linspace(0, 1, 16)
    b = np.clip(np.searchsorted(edges, p1, side="right") - 1, 0, 14)        # netcal's [lo, hi) bins
    positive = np.abs(np.bincount(b, y, 15) - np.bincount(b, p1, 15)).sum() / len(y)
    assert theirs == pytest.approx(positive, abs=1e-12)
    assert theirs == pytest.approx(metrics.classwise_ece(p, y, n_bins=15), abs=1e-9)
    assert abs(theirs - metrics.ece(p, y, n_bins=15)) > 0.05               # the top-label ECE is another number
