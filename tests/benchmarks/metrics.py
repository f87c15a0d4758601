"""Speed of calib.metrics at N = 10^6 samples, K = 100 classes, against torchmetrics and a per-bin mask loop.

    python tests/benchmarks/metrics.py [--n 1000000] [--k 100] [--repeats 3] [--dtype float64|float32]

Data (seed 0): float64 probabilities, the softmax of standard normal logits z times 2, and labels drawn
from softmax(2 z / T) with T = 1.5 for half of the rows and T = 0.75 for the other half (over- and
under-confident, so that the binnings give different values). Each time is the best of ``--repeats`` runs
(time.perf_counter); the repeats of all entries are interleaved, so that a change in machine load hits
every entry alike. calib's times include its input checks (finite, in [0, 1], rows summing to 1, labels
in range). ``probs.max(1)`` reads the array once: it is the floor for any top-label metric. torchmetrics
gets the same float64 tensor (``torch.from_numpy``, no copy) and converts the confidences to float32
internally, hence differences of order 1e-7 to 1e-6. Not collected by pytest; the numbers depend on the
machine and its load. ``--dtype float32`` casts the probabilities to float32 (the top-label metrics then check and
bin them without a float64 copy, issue 30 item 5).
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from calib import metrics


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
    args = parser.parse_args()
    n, k, r = args.n, args.k, args.repeats
    probs, labels = make_data(n, k)
    probs = probs.astype(args.dtype, copy=False)

    entries = [  # (name, function, repeats)
        ("probs.max(1) (one read of probs: the floor)", lambda: probs.max(1), r),
        ("calib ece (uniform, l1, 15 bins)", lambda: metrics.ece(probs, labels), r),
        ("calib adaptive_ece", lambda: metrics.adaptive_ece(probs, labels), r),
        ("calib mce", lambda: metrics.mce(probs, labels), r),
        ("calib ece (l2, label estimator)", lambda: metrics.ece(probs, labels, norm="l2", estimator="label"), r),
        ("calib classwise_ece (uniform)", lambda: metrics.classwise_ece(probs, labels), r),
        ("calib classwise_ece (quantile)", lambda: metrics.classwise_ece(probs, labels, binning="quantile"), 1),
        ("torrvision-style mask loop, ECE (no input checks)", lambda: torrvision_ece(probs, labels), r),
    ]
    try:
        import torch
        from torchmetrics.functional.classification import multiclass_calibration_error
    except ImportError as exc:
        print(f"torchmetrics not available ({exc}); skipping it")
    else:
        p_t, y_t = torch.from_numpy(probs), torch.from_numpy(labels)
        entries.append((f"torchmetrics multiclass_calibration_error l1 ({args.dtype}, {torch.get_num_threads()} threads)",
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
    ece_name = entries[1][0]
    for name, label in [(entries[7][0], "mask loop"), (entries[-1][0], "torchmetrics")]:
        if name in best and name != ece_name and "max(1)" not in name:
            print(f"{label:>12} / calib ece = {best[name] / best[ece_name]:5.2f}x   "
                  f"|difference| = {abs(values[name] - values[ece_name]):.2e}")


if __name__ == "__main__":
    main()
