"""Speed of calib.metrics at N = 10^6 samples, K = 100 classes, against torchmetrics and a per-bin mask loop.

    python tests/benchmarks/metrics.py [--n 1000000] [--k 100] [--repeats 3] [--dtype float64|float32] [--ece-only]

Data (seed 0): float64 probabilities, the softmax of standard normal logits z times 2, and labels drawn
from softmax(2 z / T) with T = 1.5 for half of the rows and T = 0.75 for the other half (over- and
under-confident, so that the binnings give different values). Each time is the best of ``--repeats`` runs
(time.perf_counter); the repeats of all entries are interleaved, so that a change in machine load hits
every entry alike. calib's times include its input checks (finite, in [0, 1], rows summing to 1, labels
in range). ``probs.max(1)`` reads the array once: it is the floor for any top-label metric. torchmetrics
gets the same float64 tensor (``torch.from_numpy``, no copy) and converts the confidences to float32
internally, hence differences of order 1e-7 to 1e-6. Not collected by pytest; the numbers depend on the
machine and its load. ``--dtype float32`` casts the probabilities to float32 (the top-label metrics then check and
bin them without a float64 copy, issue 30 item 5). Two earlier input checks run beside ``ece`` as baselines, on
the same data in the same run: the float64 copy of the regression issue 30 reports, and the float32 pass that
summed each row in float64 (commit aed1449); the ratios to one read and to torchmetrics are printed for each.
"""

from __future__ import annotations

import argparse
import os
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from calib import _validate, metrics
from calib.metrics._binning import bin_top_label, binned_error


def ece_float64_copy(probs, labels):
    """``metrics.ece`` with the input copied to float64 before the checks (the regression of issue 30, item 5)."""
    _, y, pred, conf = _validate.as_probs_labels_top(probs, labels, dtype=np.float64)
    return binned_error(bin_top_label(conf, pred == y, 15, "uniform"), "l1", "bin")


def ece_float64_row_sums(probs, labels):
    """``metrics.ece`` as of commit aed1449: the pass of the input's dtype summed each row in float64."""
    p = np.ascontiguousarray(probs)
    n, k = p.shape
    bits = p.view(np.uint64 if p.dtype == np.float64 else np.uint32)
    pred, top, sums = np.empty(n, dtype=np.intp), np.empty(n, dtype=p.dtype), np.empty(n)
    rows = max(1, _validate._BLOCK_ELEMENTS // k)

    def span(lo, hi):
        for s in range(lo, hi, rows):
            e = min(hi, s + rows)
            a = bits[s:e].argmax(axis=1)
            pred[s:e] = a
            top[s:e] = p[s:e][np.arange(e - s), a]
            sums[s:e] = p[s:e].sum(axis=1, dtype=np.float64)

    threads = _validate.n_threads(p.size, cap=4)
    cuts = np.linspace(0, n, threads + 1).astype(int)
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(span, cuts[:-1], cuts[1:]))
    one_bits = np.array(1.0, dtype=p.dtype).view(bits.dtype)
    assert top.view(bits.dtype).max() <= one_bits and np.abs(sums - 1).max() <= _validate.ROW_SUM_ATOL
    y = _validate.as_labels(labels, "labels", n=n, n_classes=k)
    return binned_error(bin_top_label(top.astype(np.float64), pred == y, 15, "uniform"), "l1", "bin")


def torrvision_ece(probs, labels, n_bins=15):
    """The per-bin mask loop of torrvision/focal_calibration's ECELoss (numpy port, (lo, hi] bins)."""
    conf = probs.max(axis=1)
    correct = probs.argmax(axis=1) == labels
    edges = np.linspace(0, 1, n_bins + 1)
    total = 0.0
    for lo, hi in zip(edges[:-1], edges[1:]):
        in_bin = (conf > lo) & (conf <= hi)
        share = in_bin.mean()
        if share > 0:
            total += abs(conf[in_bin].mean() - correct[in_bin].mean()) * share
    return total


def make_data(n, k):
    rng = np.random.default_rng(0)
    probs = rng.standard_normal((n, k)) * 2.0
    probs -= probs.max(axis=1, keepdims=True)
    np.exp(probs, out=probs)
    probs /= probs.sum(axis=1, keepdims=True)
    temperature = np.where(np.arange(n) % 2 == 0, 1.5, 0.75)[:, None]
    truth = np.cumsum(probs ** (1 / temperature), axis=1)  # softmax(2 z / T) up to normalisation
    u = rng.random(n) * truth[:, -1]
    labels = np.minimum((truth < u[:, None]).sum(axis=1), k - 1)
    return probs, labels


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10**6)
    parser.add_argument("--k", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--dtype", choices=("float64", "float32"), default="float64")
    parser.add_argument("--ece-only", action="store_true",
                        help="only one read, ece, its two baselines, the mask loop and torchmetrics")
    args = parser.parse_args()
    n, k, r = args.n, args.k, args.repeats
    probs, labels = make_data(n, k)
    probs = probs.astype(args.dtype, copy=False)

    entries = [  # (name, function, repeats)
        ("probs.max(1) (one read of probs: the floor)", lambda: probs.max(1), r),
        ("calib ece (uniform, l1, 15 bins)", lambda: metrics.ece(probs, labels), r),
        ("  before: float64 copy (issue 30's regression)", lambda: ece_float64_copy(probs, labels), r),
        ("  before: float64 row sums (aed1449)", lambda: ece_float64_row_sums(probs, labels), r),
        ("calib adaptive_ece", lambda: metrics.adaptive_ece(probs, labels), r),
        ("calib mce", lambda: metrics.mce(probs, labels), r),
        ("calib ece (l2, label estimator)", lambda: metrics.ece(probs, labels, norm="l2", estimator="label"), r),
        ("calib classwise_ece (uniform)", lambda: metrics.classwise_ece(probs, labels), r),
        ("calib classwise_ece (quantile)", lambda: metrics.classwise_ece(probs, labels, binning="quantile"), 1),
        ("torrvision-style mask loop, ECE (no input checks)", lambda: torrvision_ece(probs, labels), r),
    ]
    if args.ece_only:
        entries = entries[:4] + entries[-1:]
    try:
        import torch
        from torchmetrics.functional.classification import multiclass_calibration_error
    except ImportError as exc:
        print(f"torchmetrics not available ({exc}); skipping it")
    else:
        p_t, y_t = torch.from_numpy(probs), torch.from_numpy(labels)
        entries.append((f"torchmetrics multiclass_calibration_error l1 ({args.dtype}, "
                        f"{torch.get_num_threads()} threads)",
                        lambda: float(multiclass_calibration_error(p_t, y_t, num_classes=k, n_bins=15, norm="l1")),
                        r))

    times = {name: [] for name, _, _ in entries}
    values = {}
    for rep in range(r):
        for name, fn, reps in entries:
            if rep < reps:
                t0 = time.perf_counter()
                out = fn()
                times[name].append(time.perf_counter() - t0)
                values[name] = out if isinstance(out, float) else None
    best = {name: min(t) for name, t in times.items()}

    floor = best[entries[0][0]]
    print(f"N = {n:,}, K = {k}, {args.dtype}, best of {r} interleaved runs (classwise quantile: 1); "
          f"{os.cpu_count()} CPUs, numpy {np.__version__}")
    width = max(len(name) for name in best)
    print(f"{'':{width}}  {'seconds':>8}  {'/ max(1)':>8}  value")
    for name, t in best.items():
        shown = "" if values[name] is None else f"{values[name]:.10f}"
        print(f"{name:{width}}  {t:8.4f}  {t / floor:8.2f}  {shown}")
    print()
    torchmetrics_name = entries[-1][0] if "torchmetrics" in entries[-1][0] else None
    for name in (entries[1][0], entries[2][0], entries[3][0]):
        line = f"{name.strip():48}: {best[name] / floor:5.2f}x one read"
        if torchmetrics_name:
            line += (f", torchmetrics / it = {best[torchmetrics_name] / best[name]:5.2f}x "
                     f"(|difference| {abs(values[torchmetrics_name] - values[name]):.2e})")
        print(line)
    mask_loop = entries[-2 if torchmetrics_name else -1][0]
    print(f"mask loop / calib ece = {best[mask_loop] / best[entries[1][0]]:5.2f}x   "
          f"|difference| = {abs(values[mask_loop] - values[entries[1][0]]):.2e}")

if __name__ == "__main__":
    main()
