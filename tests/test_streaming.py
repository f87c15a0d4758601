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
        streaming.DEVICE_KERNELS_ON_CPU = True                   # the kernels and collectives of a GPU's state
        for i, (make, _) in enumerate(CASES):
            metric = make()
            for rows in np.array_split(shard, 3):
                metric.update(torch.from_numpy(p[rows]), torch.from_numpy(y[rows]))
            out[f"tensor-{i}"] = metric.compute()
            metric = make()                                       # rank 1 sees no batch
            if rank == 0:
                metric.update(torch.from_numpy(p), torch.from_numpy(y))
            out[f"tensor-empty-rank-{i}"] = metric.compute()
        streaming.DEVICE_KERNELS_ON_CPU = False
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
    """What each of two gloo ranks computed in :func:`_rank` (one launch for every test of two ranks): rank 0 in this
    process, rank 1 in another. Rank 0 here is what lets the mutation test (README, Contributing) reach the
    collectives (all_gather of rows, all_reduce of sums, the ranks' agreement on settings): its mutants do not reach
    another process."""
    import torch.multiprocessing as mp

    manager = mp.Manager()
    results = manager.dict()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    path = str(tmp_path_factory.mktemp("ranks") / "rendezvous")
    other = mp.start_processes(_other_rank, args=(path, results), nprocs=1, join=False)
    mine: dict = {}
    try:
        _rank(0, 2, path, mine)
        deadline = time.monotonic() + 300
        while not other.join(timeout=2):
            assert time.monotonic() < deadline, "rank 1 hung"
    finally:
        streaming.DEVICE_KERNELS_ON_CPU = False
        for process in other.processes:
            if process.is_alive():
                process.kill()
    return {0: mine[0], 1: dict(results[1])}


def _other_rank(_, path, results):
    """Rank 1 of two for the fixture above (mp.start_processes passes its index first)."""
    _rank(1, 2, path, results)


def test_two_gloo_ranks_give_the_one_shot_value(two_ranks):
    p, y = _data()
    expected = [one_shot(p, y) for _, one_shot in CASES]
    for rank in (0, 1):
        got = [two_ranks[rank][f"shared-{i}"] for i in range(len(CASES))]
        np.testing.assert_allclose(got, expected, rtol=0, atol=TOL)
        shard = np.array_split(np.arange(len(y)), 2)[rank]
        assert two_ranks[rank]["local"] == pytest.approx(metrics.ece(p[shard], y[shard]), abs=TOL)  # sync=False


def test_two_gloo_ranks_of_tensor_states_give_the_one_shot_value(two_ranks):
    """Issue 43, item 4: states of tensors (updated by the device kernels) reduced with all_reduce and a padded
    all_gather, also when one rank saw no batch."""
    p, y = _data()
    expected = [one_shot(p, y) for _, one_shot in CASES]
    for rank in (0, 1):
        for prefix in ("tensor", "tensor-empty-rank"):
            got = [two_ranks[rank][f"{prefix}-{i}"] for i in range(len(CASES))]
            np.testing.assert_allclose(got, expected, rtol=0, atol=TOL, err_msg=f"{prefix} on rank {rank}")


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


# ------------------------------------------------------------------------- tensor states (issue 43, item 4)

@pytest.fixture(params=["numpy kernels", "device kernels"])
def kernels(request, monkeypatch):
    """A CPU tensor state updated by numpy's kernels through views (the default), or by the torch kernels that any
    other device runs."""
    monkeypatch.setattr(streaming, "DEVICE_KERNELS_ON_CPU", request.param == "device kernels")
    return request.param


def _state(metric) -> list:
    return [*metric._sums.values(), *(part for parts in metric._rows.values() for part in parts)]


@pytest.mark.parametrize("float32", [False, True])
def test_tensor_batches_keep_a_tensor_state_and_give_the_one_shot_value(kernels, float32):
    p, y = _data(float32=float32)
    for make, one_shot in CASES:
        metric = make()
        for rows in _batches(len(y), 2):
            metric.update(torch.from_numpy(p[rows]), torch.from_numpy(y[rows]))
        assert _state(metric) and all(isinstance(t, torch.Tensor) for t in _state(metric))
        assert metric.device == torch.device("cpu")
        assert abs(metric.compute() - one_shot(p, y)) <= TOL


#: The Tensor methods that bring a tensor's data to the host (a copy, or a synchronisation on a GPU).
HOST_CALLS = ("cpu", "numpy", "item", "tolist", "__bool__", "__float__", "__int__", "__index__", "__array__")


def _count_host_calls(monkeypatch) -> dict:
    calls = {}

    def counting(name, original):
        def counted(self, *args, **kwargs):
            calls[name] = calls.get(name, 0) + 1
            return original(self, *args, **kwargs)
        return counted

    for name in HOST_CALLS:
        monkeypatch.setattr(torch.Tensor, name, counting(name, getattr(torch.Tensor, name)))
    return calls


@pytest.mark.parametrize("case", range(len(CASES)))
def test_an_update_of_device_tensors_reads_one_boolean_and_copies_nothing(case, monkeypatch):
    """Issue 43, item 4: every update copied its tensors to the host (Tensor.cpu() and numpy() of probs and labels:
    on a GPU two copies of the batch). The device kernels (what a GPU runs, here on the CPU) read one boolean, the
    verdict of the checks, and with validate_args=False nothing."""
    monkeypatch.setattr(streaming, "DEVICE_KERNELS_ON_CPU", True, raising=False)   # raising: the old module had none
    make, _ = CASES[case]
    p, y = (torch.from_numpy(a) for a in _data(n=500))
    for validate, expected in ((True, {"__bool__": 1}), (False, {})):
        metric = make()
        metric.validate_args = validate
        metric.update(p[:250], y[:250])                                   # creates the state
        with monkeypatch.context() as patch:
            calls = _count_host_calls(patch)
            metric.update(p[250:], y[250:])
        assert calls == expected, (validate, calls)


def test_a_device_without_float64_keeps_float32_sums_int64_counts_and_exact_keys(monkeypatch):
    """MPS has no float64: the sums are float32 there (exact to float32 rounding), the counts int64 and the
    per-sample keys exact (float32 bits widened to float64's), simulated on the CPU."""
    monkeypatch.setattr(streaming, "DEVICE_KERNELS_ON_CPU", True)
    monkeypatch.setattr(streaming, "_float_dtype", lambda device: torch.float32)
    p, y = _data(float32=True)
    for make, one_shot in CASES:
        metric = make()
        for rows in _batches(len(y), 3):
            metric.update(torch.from_numpy(p[rows]), torch.from_numpy(y[rows]))
        floats = [t for t in _state(metric) if t.is_floating_point()]
        assert all(t.dtype == torch.float32 for t in floats)
        assert all(metric._sums[name].dtype == torch.int64 for name in metric._counts if name in metric._sums)
        want, got = one_shot(p, y), metric.compute()
        assert abs(got - want) <= (1e-6 * abs(want) if metric.exact_streaming else TOL), (make, got, want)


def test_float32_confidences_widen_to_the_float64_keys_exactly():
    rng = np.random.default_rng(3)
    conf = np.concatenate([rng.uniform(1e-3, 1.0, 1000), [1.0, 0.5, 1 / 3, 2.0 ** -126, 0.1, 0.0]]).astype(np.float32)
    conf = np.concatenate([conf, np.nextafter(conf, np.float32(1)), np.nextafter(conf, np.float32(0))])
    flag = rng.random(conf.shape[0]) < 0.5
    got = streaming._tensor_keys(torch.from_numpy(conf), torch.from_numpy(flag))
    np.testing.assert_array_equal(got.numpy(), streaming._keys(conf.astype(np.float64), flag))


def test_float32_confidences_on_the_edges_fall_in_the_one_shot_bins():
    """A float32 confidence within rounding of an edge i / M: the float32 edges are rounded down, so the bin is that
    of the float64 comparison (with the edges merely rounded to float32, float32(1/3) > 1/3 went a bin down)."""
    from calib.metrics._binning import uniform_bin, uniform_edges

    for m in (3, 10, 15, 17):
        x = (np.arange(m + 1) / m).astype(np.float32)
        x = np.concatenate([x, np.nextafter(x, np.float32(0)), np.nextafter(x, np.float32(2))]).clip(0, 1)
        want = uniform_bin(x.astype(np.float64), m, uniform_edges(m))
        t = torch.from_numpy(x)
        assert np.array_equal(streaming._uniform_bin_tensor(t, m, streaming._edges_like(t, m)).numpy(), want)
        rounded = torch.from_numpy(uniform_edges(m).astype(np.float32))
        assert m == 10 or not np.array_equal(streaming._uniform_bin_tensor(t, m, rounded).numpy(), want)  # control


def test_to_state_dict_and_load_state_dict_continue_where_the_metric_was(tmp_path):
    p, y = _data()
    for make, one_shot in CASES:
        first = make()
        first.update(p[:1700], y[:1700])                                   # a numpy state
        torch.save(first.state_dict(), tmp_path / "metric.pt")
        second = make()
        second.load_state_dict(torch.load(tmp_path / "metric.pt", weights_only=True))
        assert second.n_classes == 7 and second.device == torch.device("cpu")
        second.update(torch.from_numpy(p[1700:]), torch.from_numpy(y[1700:]))
        assert abs(second.compute() - one_shot(p, y)) <= TOL
        third = make()
        third.update(p[:1700], y[:1700])
        assert third.to("cpu") is third and all(isinstance(t, torch.Tensor) for t in _state(third))
        third.update(p[1700:], y[1700:])                                   # numpy batches follow the state
        assert abs(third.compute() - one_shot(p, y)) <= TOL
        third.reset()
        assert third.device == torch.device("cpu") and third.n_classes is None
    source = StreamingECE()
    source.update(torch.from_numpy(p[:100]), torch.from_numpy(y[:100]))
    before = source.compute()
    copy = StreamingECE()
    copy.load_state_dict(source.state_dict())                              # a live metric's state: copied
    copy.update(torch.from_numpy(p[100:]), torch.from_numpy(y[100:]))
    assert source.compute() == before and copy.compute() == pytest.approx(metrics.ece(p, y), abs=TOL)
    with pytest.raises(ValueError, match=r"the state is that of StreamingECE with settings \{'n_bins': 15.*this metric "
                                         r"is StreamingECE with \{'n_bins': 10"):
        StreamingECE(10).load_state_dict(StreamingECE(15).state_dict())
    with pytest.raises(ValueError, match="the state is that of StreamingNLL"):
        StreamingBrier().load_state_dict(StreamingNLL().state_dict())


@pytest.mark.parametrize("case", ["rows", "nan", "labels", "shape", "float labels", "nll zero"])
def test_tensor_batches_are_refused_with_the_one_shot_message(case, kernels):
    p, y = _data(n=40)
    metric, one_shot = (StreamingNLL(), metrics.nll) if case == "nll zero" else (StreamingECE(), metrics.ece)
    if case == "rows":
        p = p * 2
    elif case == "nan":
        p = p.copy()
        p[3, 2] = np.nan
    elif case == "labels":
        y = y + 7
    elif case == "shape":
        p = p[:, 0]
    elif case == "float labels":
        y = y.astype(np.float64)
    else:
        p = p.copy()
        p[5] = 0.0
        p[5, (y[5] + 1) % 7] = 1.0
    with pytest.raises(ValueError) as expected:
        one_shot(p, y)
    with pytest.raises(ValueError) as got:
        metric.update(torch.from_numpy(p), torch.from_numpy(y))
    assert str(got.value) == str(expected.value)
    assert metric.n_classes is None and not metric._sums                   # nothing was added


def test_without_validate_args_the_device_kernels_check_only_shapes(monkeypatch):
    monkeypatch.setattr(streaming, "DEVICE_KERNELS_ON_CPU", True)
    p, y = _data(n=40)
    metric = StreamingAccuracy(validate_args=False)
    metric.update(torch.from_numpy(p * 2), torch.from_numpy(y))            # not checked: the caller's choice
    assert metric.compute() == metrics.accuracy(p, y)
    with pytest.raises(ValueError, match="probs must be 2-D"):
        metric.update(torch.from_numpy(p[:, 0]), torch.from_numpy(y))


def test_the_brier_of_tensors_in_blocks_equals_the_one_shot_and_leaves_the_batch_alone(monkeypatch):
    """StreamingBrier's device kernel (here on the CPU) sums a tensor batch in blocks of TENSOR_BLOCK_ELEMENTS
    elements: with blocks of 3 rows, 10 rows give brier's value, and a float64 batch (which the block's cast would
    not copy) is not changed in place."""
    monkeypatch.setattr(streaming, "DEVICE_KERNELS_ON_CPU", True)
    monkeypatch.setattr(streaming, "TENSOR_BLOCK_ELEMENTS", 3 * 4)
    rng = np.random.default_rng(2)
    p = rng.dirichlet(np.ones(4), size=10)
    y = rng.integers(4, size=10)
    batch = torch.from_numpy(p.copy())
    metric = streaming.StreamingBrier()
    metric.update(batch, torch.from_numpy(y))
    assert metric.compute() == pytest.approx(metrics.brier(p, y), rel=1e-12)
    assert torch.equal(batch, torch.from_numpy(p))


# --------------------------------------------------------------- mutation sample B: behaviour the sample found untested

def test_a_tensor_state_on_a_device_takes_numpy_batches_too(monkeypatch):
    """The device kernels (here on the CPU): after a tensor batch, numpy batches are checked on the host and added
    to the tensor state; the value is the one-shot function's of all rows."""
    monkeypatch.setattr(streaming, "DEVICE_KERNELS_ON_CPU", True)
    p, y = _data(n=300)
    for make, one_shot in CASES:
        metric = make()
        metric.update(torch.from_numpy(p[:100]), torch.from_numpy(y[:100]))
        metric.update(p[100:200], y[100:200])
        metric.update(p[200:].tolist(), y[200:].tolist())
        assert all(isinstance(t, torch.Tensor) for t in _state(metric))
        assert abs(metric.compute() - one_shot(p, y)) <= TOL, make
        with pytest.raises(ValueError, match="rows of probs must sum to 1"):
            metric.update(p[:5] * 0.9, y[:5])


def test_the_device_kernels_refuse_rows_that_do_not_sum_to_one_whatever_the_labels(monkeypatch):
    """Rows in [0, 1] that sum to 0.9, with valid labels: the one boolean read says the batch is bad, and the host's
    check raises the one-shot function's message; nothing is added."""
    monkeypatch.setattr(streaming, "DEVICE_KERNELS_ON_CPU", True)
    p, y = _data(n=50)
    for make, _ in CASES:
        metric = make()
        with pytest.raises(ValueError, match="rows of probs must sum to 1"):
            metric.update(torch.from_numpy(p * 0.9), torch.from_numpy(y))
        assert metric.n_classes is None and not metric._sums


def test_the_label_estimator_with_empty_bins_warns_nothing():
    """Equal-width bins with estimator="label": bins without rows have no accuracy, and none is computed for them
    (no 0 / 0)."""
    import warnings

    p = np.array([[0.95, 0.05], [0.9, 0.1], [0.55, 0.45], [0.35, 0.65]])
    y = np.array([0, 1, 0, 1])
    for norm in ("l1", "l2", "max"):
        metric = StreamingECE(15, norm=norm, estimator="label")
        metric.update(p, y)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            got = metric.compute()
        assert got == pytest.approx(metrics.ece(p, y, 15, norm=norm, estimator="label"), abs=TOL)


def test_the_ece_settings_name_its_estimator():
    assert StreamingECE().settings() == {"n_bins": 15, "binning": "uniform", "norm": "l1", "estimator": "bin"}
    assert StreamingECE(10, estimator="label").settings()["estimator"] == "label"


def test_a_state_with_fewer_than_two_classes_or_a_fractional_count_is_refused():
    p, y = _data(n=40)
    metric = StreamingNLL()
    metric.update(p, y)
    state = metric.state_dict()
    for k in (1, 0, 2.5, True):
        fresh = StreamingNLL()
        with pytest.raises(ValueError, match=rf"the state's n_classes \({k!r}\)"):
            fresh.load_state_dict({**state, "n_classes": k})
        assert fresh.n_classes is None


def test_ranks_with_other_numbers_of_classes_name_a_rank_that_saw_no_batch(monkeypatch):
    """Three ranks (gathered by a stand-in for gather_object): K = 7, no batch, K = 5; the message names each."""
    metric = StreamingNLL()
    metric.update(*_data(n=20))
    monkeypatch.setattr(streaming, "world_size", lambda: 3)
    monkeypatch.setattr(streaming, "gather_object",
                        lambda obj: [("StreamingNLL", {}, 7), ("StreamingNLL", {}, None), ("StreamingNLL", {}, 5)])
    with pytest.raises(ValueError, match=r"different numbers of classes \(7 on rank 0, no batch on rank 1, 5 on "
                                         r"rank 2\)"):
        metric.compute()


# --------------------------------------------------------------- mutation sample C: behaviour the sample found untested

def test_a_state_of_several_batches_saves_each_row_list_joined_and_loads_back():
    """The metrics that keep rows (equal-mass ECE and class-wise ECE, AURC) hold one array a batch; state_dict joins
    each list into one tensor, and a metric loaded from it computes the one-shot value of all the rows."""
    p, y = _data(n=600)
    for make, one_shot in ((lambda: StreamingECE(15, binning="quantile"), metrics.adaptive_ece),
                           (lambda: StreamingClasswiseECE(8, binning="quantile"),
                            lambda p, y: metrics.classwise_ece(p, y, 8, binning="quantile")),
                           (StreamingAURC, metrics.aurc)):
        first = make()
        for rows in np.array_split(np.arange(600), 3):
            first.update(p[rows], y[rows])
        state = first.state_dict()
        assert state["rows"] and all(t.shape[0] == 600 for t in state["rows"].values())
        second = make()
        second.load_state_dict(state)
        assert abs(second.compute() - one_shot(p, y)) <= TOL


def test_a_binary_state_loads_and_anything_but_a_state_dict_is_refused_by_the_message():
    """Two classes are a state (K >= 2); a dict without the state's keys, or no dict at all, gets the message that
    says what to pass (not a KeyError or TypeError from inside)."""
    p, y = _data(n=50, k=2)
    metric = StreamingNLL()
    metric.update(p, y)
    fresh = StreamingNLL()
    fresh.load_state_dict(metric.state_dict())
    assert fresh.n_classes == 2 and fresh.compute() == pytest.approx(metrics.nll(p, y), rel=1e-14)
    for bad in ({"metric": "StreamingNLL"}, {**metric.state_dict(), "extra": 1}, None):
        with pytest.raises(ValueError, match=r"^StreamingNLL.load_state_dict: pass what state_dict\(\) gave"):
            StreamingNLL().load_state_dict(bad)


def test_classwise_ece_takes_rho_one_as_a_number():
    """norm = rho >= 1: rho = 1 itself is allowed (the l1 class-wise ECE), as classwise_ece allows it."""
    p, y = _data(n=400)
    metric = StreamingClasswiseECE(10, norm=1)
    metric.update(p, y)
    assert metric.compute() == pytest.approx(metrics.classwise_ece(p, y, 10, norm=1), abs=TOL)
    assert metric.compute() == pytest.approx(metrics.classwise_ece(p, y, 10), abs=TOL)
    with pytest.raises(ValueError, match=r"^norm must be one of .* or a number rho >= 1; got 0.5"):
        StreamingClasswiseECE(10, norm=0.5)
