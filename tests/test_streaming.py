"""Streaming metrics (calib.metrics.streaming) against the one-shot functions: random splits into batches, and
two gloo ranks."""

import os

import numpy as np
import pytest
import torch

from calib import metrics
from calib.metrics import (StreamingAccuracy, StreamingAURC, StreamingBrier, StreamingClasswiseECE, StreamingECE,
                           StreamingNLL)

TOL = 1e-12


def _data(n=3000, k=7, seed=0, float32=False):
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(n, k)) * 2
    logits[: n // 10] = np.round(logits[: n // 10])            # tied confidences: equal-mass cuts and AURC ties
    p = np.exp(logits - logits.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    y = np.where(rng.random(n) < 0.7, p.argmax(1), rng.integers(0, k, n))
    return (p.astype(np.float32) if float32 else p), y


def _batches(n, seed):
    """A random split of range(n) into 1..12 contiguous batches of random sizes (some of one row)."""
    rng = np.random.default_rng(seed)
    cuts = np.sort(rng.choice(np.arange(1, n), size=rng.integers(0, 12), replace=False))
    return np.split(np.arange(n), cuts)


CASES = [
    (lambda: StreamingECE(15), lambda p, y: metrics.ece(p, y, 15)),
    (lambda: StreamingECE(10, norm="l2"), lambda p, y: metrics.ece(p, y, 10, norm="l2")),
    (lambda: StreamingECE(20, norm="max"), lambda p, y: metrics.ece(p, y, 20, norm="max")),
    (lambda: StreamingECE(15, binning="quantile"), lambda p, y: metrics.adaptive_ece(p, y, 15)),
    (lambda: StreamingECE(15, estimator="label", norm="l2"),
     lambda p, y: metrics.ece(p, y, 15, norm="l2", estimator="label")),
    (lambda: StreamingClasswiseECE(15), lambda p, y: metrics.classwise_ece(p, y, 15)),
    (lambda: StreamingClasswiseECE(10, norm="l2"), lambda p, y: metrics.classwise_ece(p, y, 10, norm="l2")),
    (lambda: StreamingClasswiseECE(10, norm=3.0), lambda p, y: metrics.classwise_ece(p, y, 10, norm=3.0)),
    (lambda: StreamingClasswiseECE(10, norm="max"), lambda p, y: metrics.classwise_ece(p, y, 10, norm="max")),
    (lambda: StreamingClasswiseECE(8, binning="quantile"),
     lambda p, y: metrics.classwise_ece(p, y, 8, binning="quantile")),
    (StreamingNLL, metrics.nll),
    (StreamingBrier, metrics.brier),
    (StreamingAccuracy, metrics.accuracy),
    (StreamingAURC, metrics.aurc),
]


@pytest.mark.parametrize("case", range(len(CASES)))
@pytest.mark.parametrize("float32", [False, True])
def test_streaming_equals_one_shot_on_random_batches(case, float32):
    make, one_shot = CASES[case]
    p, y = _data(float32=float32)
    expected = one_shot(p, y)
    metric = make()
    for seed in range(4):
        metric.reset()
        for rows in _batches(len(y), seed):
            torch_input = seed % 2 == 1                          # numpy and torch batches
            metric.update(torch.from_numpy(p[rows]) if torch_input else p[rows], y[rows])
        got = metric.compute()
        assert abs(got - expected) <= TOL, (seed, got, expected)
        assert metric.compute() == got                            # compute does not change the state


def test_a_different_value_after_reset_and_clear_errors():
    p, y = _data()
    metric = StreamingECE()
    metric.update(p, y)
    metric.reset()
    with pytest.raises(ValueError, match=r"compute\(\) before any row: call update"):
        metric.compute()
    metric.update(p[:100], y[:100])
    assert metric.compute() == pytest.approx(metrics.ece(p[:100], y[:100]), abs=TOL)
    assert metric.compute() != pytest.approx(metrics.ece(p, y), abs=1e-6)
    with pytest.raises(ValueError, match="probs"):
        metric.update(p[:3] * 2, y[:3])                            # rows not summing to 1: the one-shot message
    cw = StreamingClasswiseECE()
    cw.update(p, y)
    with pytest.raises(ValueError, match="columns but the earlier batches had 7"):
        cw.update(np.full((2, 3), 1 / 3), np.zeros(2, dtype=int))
    bad = p[:4].copy()
    bad[0] = 0.0
    bad[0, (y[0] + 1) % 7] = 1.0
    with pytest.raises(ValueError, match="NLL is infinite"):
        StreamingNLL().update(bad, y[:4])
    with pytest.raises(ValueError, match="norm"):
        StreamingECE(norm="l3")


def _rank(rank, world, path, results):
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{path}", rank=rank, world_size=world)
    try:
        p, y = _data()
        shard = np.array_split(np.arange(len(y)), world)[rank]     # unequal shards
        values = []
        for make, _ in CASES:
            metric = make()
            for rows in np.array_split(shard, 3):
                metric.update(p[rows], y[rows])
            values.append(metric.compute())
        local = StreamingECE()
        local.update(p[shard], y[shard])
        values.append(local.compute(sync=False))
        results[rank] = values
    finally:
        dist.destroy_process_group()


def test_two_gloo_ranks_give_the_one_shot_value(tmp_path):
    import torch.multiprocessing as mp

    manager = mp.Manager()
    results = manager.dict()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    mp.spawn(_rank, args=(2, str(tmp_path / "rendezvous"), results), nprocs=2, join=True)
    p, y = _data()
    expected = [one_shot(p, y) for _, one_shot in CASES]
    for rank in (0, 1):
        got = results[rank]
        np.testing.assert_allclose(got[:-1], expected, rtol=0, atol=TOL)
        shard = np.array_split(np.arange(len(y)), 2)[rank]
        assert got[-1] == pytest.approx(metrics.ece(p[shard], y[shard]), abs=TOL)   # sync=False: this rank's rows
