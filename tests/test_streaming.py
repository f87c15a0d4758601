"""Streaming metrics (calib.metrics.streaming) against the one-shot functions: random splits into batches, and
two gloo ranks (also when one saw no batch, and when their settings differ)."""

import os
import time
import tracemalloc
from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest
import torch

from calib import metrics
from calib.metrics import streaming
from calib.metrics import (StreamingAccuracy, StreamingAURC, StreamingBrier, StreamingClasswiseECE, StreamingECE,
                           StreamingNLL)
from calib_book.timeouts import scaled  # a subprocess's time limit, scaled by the machine's load

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


@pytest.mark.parametrize("case", range(len(CASES)))
def test_a_batch_of_another_class_count_is_refused_and_changes_nothing(case):
    """Every metric, the O(1) ones included (issue 45, item 7), refuses a batch of K=3 after K=7."""
    make, one_shot = CASES[case]
    p, y = _data()
    metric = make()
    metric.update(p[:2000], y[:2000])
    before = metric.compute()
    other, other_y = _data(n=50, k=3)
    with pytest.raises(ValueError, match="probs has 3 columns but the earlier batches had 7; every batch must"):
        metric.update(other, other_y)
    assert metric.compute() == before and metric.n_classes == 7
    metric.update(p[2000:], y[2000:])                              # the state is whole: the rest still adds up
    assert abs(metric.compute() - one_shot(p, y)) <= TOL
    metric.reset()
    metric.update(other, other_y)                                  # reset forgets K
    assert metric.compute() == pytest.approx(one_shot(other, other_y), abs=TOL)


@pytest.mark.parametrize("block_rows", [1, 3, 64])
def test_per_sample_metrics_read_in_blocks_count_ties_across_block_edges(block_rows, monkeypatch):
    """compute() of the per-sample metrics reads the sorted keys in blocks; runs of tied confidences that cross a
    block's edge (few distinct rows, tiny blocks) still count with their whole group's mean outcome."""
    monkeypatch.setattr(streaming, "KEY_BLOCK_ROWS", block_rows)
    rng = np.random.default_rng(5)
    distinct = rng.dirichlet(np.ones(4), size=6)
    p = distinct[rng.integers(0, 6, 500)]                          # 6 confidences, each ~80 times
    y = rng.integers(0, 4, 500)
    for make, one_shot in [CASES[3], CASES[4], CASES[-1],
                           (lambda: StreamingECE(7, binning="quantile", estimator="label", norm="max"),
                            lambda p, y: metrics.ece(p, y, 7, binning="quantile", estimator="label", norm="max"))]:
        metric = make()
        for rows in np.array_split(np.arange(500), 4):
            metric.update(p[rows], y[rows])
        assert abs(metric.compute() - one_shot(p, y)) <= TOL


@pytest.mark.parametrize("make", [StreamingAURC, lambda: StreamingECE(15, binning="quantile")],
                         ids=["aurc", "adaptive-ece"])
def test_per_sample_metrics_keep_8_bytes_a_row_and_peak_at_16(make):
    """The documented memory (module docstring): 8 bytes a row kept, one sorted copy more at compute() (plus
    under 1 MiB of blocks), measured with tracemalloc on 10**6 rows. Before issue 45 they kept 9 bytes a row and
    compute() allocated 50 to 65 more (argsort, gathers, float copies; more with the import of torch it did)."""
    n = 10 ** 6
    rng = np.random.default_rng(0)
    conf = np.round(rng.uniform(0.5, 1.0, n), 4)                  # ties too
    p = np.column_stack([conf, 1.0 - conf])
    y = (rng.random(n) >= conf).astype(np.int64)                  # class 0, the top one, with probability conf
    metric = make()
    tracemalloc.start()
    try:
        for lo in range(0, n, 100_000):
            metric.update(p[lo:lo + 100_000], y[lo:lo + 100_000])
        state, _ = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        value = metric.compute()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak <= 16 * n + 2 ** 20, peak / n
    assert state <= 8 * n + 2 ** 16, state / n
    one_shot = metrics.aurc(p, y) if make is StreamingAURC else metrics.adaptive_ece(p, y, 15)
    assert abs(value - one_shot) <= TOL


def test_compute_in_a_numpy_program_does_not_import_torch():
    """compute() asks calib.distributed whether a process group is up; that no longer imports torch (seconds, and
    the bulk of what tracemalloc counted at a first compute()) where nothing else did."""
    import subprocess
    import sys

    code = ("import sys, numpy as np; from calib.metrics import StreamingAURC; m = StreamingAURC(); "
            "m.update(np.array([[0.9, 0.1], [0.4, 0.6]]), np.array([0, 0])); "
            "print(m.compute(), 'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=scaled(120),
                         cwd=str(Path(__file__).resolve().parents[1]))
    assert out.stdout.split() == ["0.25", "False"], out.stderr[-2000:]


#: The edge cases of two ranks: name, rank 0's metric, rank 1's, and the K of the batch each rank adds (None: no
#: batch).
EDGE_CASES = [
    ("bins", lambda: StreamingECE(15), lambda: StreamingECE(10), 7, 7),
    ("binning", lambda: StreamingECE(15), lambda: StreamingECE(15, binning="quantile"), 7, 7),
    ("norm", lambda: StreamingClasswiseECE(8), lambda: StreamingClasswiseECE(8, norm=3.0), 7, 7),
    ("metric", StreamingNLL, StreamingBrier, 7, 7),
    ("classes-nll", StreamingNLL, StreamingNLL, 7, 5),
    ("classes-classwise", StreamingClasswiseECE, StreamingClasswiseECE, 7, 5),
    ("nothing-anywhere", StreamingClasswiseECE, StreamingClasswiseECE, None, None),
]


def _rank(rank, world, path, results):
    """What rank ``rank`` of ``world`` computes for the tests below, into ``results[rank]``."""
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{path}", rank=rank, world_size=world,
                            timeout=timedelta(seconds=scaled(30)))                  # a hang fails, after 30 s
    try:
        p, y = _data()
        out = {}
        shard = np.array_split(np.arange(len(y)), world)[rank]     # unequal shards
        for i, (make, _) in enumerate(CASES):
            metric = make()
            for rows in np.array_split(shard, 3):
                metric.update(p[rows], y[rows])
            out[f"shared-{i}"] = metric.compute()
        local = StreamingECE()
        local.update(p[shard], y[shard])
        out["local"] = local.compute(sync=False)
        for i, (make, _) in enumerate(CASES):                   # rank 1 sees no batch
            metric = make()
            if rank == 0:
                for rows in np.array_split(np.arange(len(y)), 3):
                    metric.update(p[rows], y[rows])
            out[f"empty-rank-{i}"] = ("value", metric.compute())
        for name, *makes, k0, k1 in EDGE_CASES:
            metric, k = makes[rank](), (k0, k1)[rank]
            if k is not None:
                metric.update(*_data(n=200, k=k, seed=rank))
            try:
                out[name] = ("value", metric.compute())
            except ValueError as exc:
                out[name] = ("error", str(exc))
        results[rank] = out
    finally:
        dist.destroy_process_group()


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory):
    """What each of two gloo ranks computed in :func:`_rank` (one launch for every test of two ranks)."""
    import torch.multiprocessing as mp

    manager = mp.Manager()
    results = manager.dict()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    path = tmp_path_factory.mktemp("ranks") / "rendezvous"
    context = mp.start_processes(_rank, args=(2, str(path), results), nprocs=2, join=False)
    deadline = time.monotonic() + 300
    try:
        while not context.join(timeout=2):
            assert time.monotonic() < deadline, "the two ranks hung"
    finally:
        for process in context.processes:
            if process.is_alive():
                process.kill()
    return {rank: dict(results[rank]) for rank in (0, 1)}


def test_two_gloo_ranks_give_the_one_shot_value(two_ranks):
    p, y = _data()
    expected = [one_shot(p, y) for _, one_shot in CASES]
    for rank in (0, 1):
        got = [two_ranks[rank][f"shared-{i}"] for i in range(len(CASES))]
        np.testing.assert_allclose(got, expected, rtol=0, atol=TOL)
        shard = np.array_split(np.arange(len(y)), 2)[rank]
        assert two_ranks[rank]["local"] == pytest.approx(metrics.ece(p[shard], y[shard]), abs=TOL)  # sync=False


def test_a_rank_that_saw_no_batch_takes_part_with_an_empty_state(two_ranks):
    """Issue 45, item 3: StreamingClasswiseECE aborted gloo (its empty state had no (class, bin) arrays); every
    metric now gives the one-shot value of rank 0's rows on both ranks, and with no rows anywhere both raise."""
    p, y = _data()
    for rank in (0, 1):
        got = [two_ranks[rank][f"empty-rank-{i}"] for i in range(len(CASES))]
        assert [kind for kind, _ in got] == ["value"] * len(CASES)
        np.testing.assert_allclose([v for _, v in got], [one_shot(p, y) for _, one_shot in CASES], rtol=0, atol=TOL)
        kind, message = two_ranks[rank]["nothing-anywhere"]
        assert kind == "error" and "StreamingClasswiseECE.compute() before any row" in message


def test_ranks_with_other_settings_or_classes_raise_one_clear_error(two_ranks):
    """Issue 45, item 3: other n_bins or norm aborted gloo, another binning hung, another K went unnoticed; each now
    raises the same ValueError on both ranks, naming the setting and each rank's value."""
    expected = {
        "bins": "StreamingECE.compute(): the ranks' settings differ (n_bins: 15 on rank 0, 10 on rank 1); construct",
        "binning": "the ranks' settings differ (binning: 'uniform' on rank 0, 'quantile' on rank 1)",
        "norm": "settings differ (norm: 'l1' on rank 0, 3.0 on rank 1)",
        "metric": "compute() was called on different metrics across the ranks ('StreamingNLL' on rank 0, "
                  "'StreamingBrier' on rank 1)",
        "classes-nll": "StreamingNLL.compute(): the ranks' batches have different numbers of classes (7 on rank 0, "
                       "5 on rank 1)",
        "classes-classwise": "different numbers of classes (7 on rank 0, 5 on rank 1); every rank must score",
    }
    for name, text in expected.items():
        for rank in (0, 1):
            kind, message = two_ranks[rank][name]
            assert kind == "error" and text in message, (name, rank, message)
