"""Streaming metrics (calib.metrics.streaming) against the one-shot functions at N = 10^6, K = 100: time and the
largest difference.

    python tests/benchmarks/streaming.py [--n 1000000] [--k 100] [--batch 10000] [--repeats 3] [--dtype float32]

The data are those of ``tests/benchmarks/metrics.py`` (seed 0). For each metric: the one-shot function on the whole
array, and the streaming class fed batches of ``--batch`` rows (``update`` on each, then ``compute``); the time is
the best of ``--repeats`` interleaved runs, the ratio streaming / one-shot, and |streaming - one-shot|. Not
collected by pytest; the numbers depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from calib import metrics

sys.path.insert(0, str(Path(__file__).resolve().parent))
from metrics import make_data  # noqa: E402  (the benchmark data of tests/benchmarks/metrics.py)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10**6)
    parser.add_argument("--k", type=int, default=100)
    parser.add_argument("--batch", type=int, default=10**4)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--dtype", choices=("float64", "float32"), default="float64")
    args = parser.parse_args()
    probs, labels = make_data(args.n, args.k)
    probs = probs.astype(args.dtype, copy=False)
    starts = range(0, args.n, args.batch)

    def streamed(make):
        def run():
            metric = make()
            for s in starts:
                metric.update(probs[s:s + args.batch], labels[s:s + args.batch])
            return metric.compute()
        return run

    pairs = [
        ("ece (uniform, l1, 15 bins)", lambda: metrics.ece(probs, labels), metrics.StreamingECE),
        ("ece (l2)", lambda: metrics.ece(probs, labels, norm="l2"), lambda: metrics.StreamingECE(norm="l2")),
        ("mce", lambda: metrics.mce(probs, labels), lambda: metrics.StreamingECE(norm="max")),
        ("adaptive_ece (keeps the arrays)", lambda: metrics.adaptive_ece(probs, labels),
         lambda: metrics.StreamingECE(binning="quantile")),
        ("classwise_ece (uniform)", lambda: metrics.classwise_ece(probs, labels), metrics.StreamingClasswiseECE),
        ("nll", lambda: metrics.nll(probs, labels), metrics.StreamingNLL),
        ("brier", lambda: metrics.brier(probs, labels), metrics.StreamingBrier),
        ("accuracy", lambda: metrics.accuracy(probs, labels), metrics.StreamingAccuracy),
        ("aurc (keeps the arrays)", lambda: metrics.aurc(probs, labels), metrics.StreamingAURC),
    ]
    times = {name: ([], []) for name, _, _ in pairs}
    values = {}
    for _ in range(args.repeats):
        for name, one_shot, make in pairs:
            for slot, fn in enumerate((one_shot, streamed(make))):
                t0 = time.perf_counter()
                value = fn()
                times[name][slot].append(time.perf_counter() - t0)
                values.setdefault(name, [None, None])[slot] = value
    print(f"N = {args.n:,}, K = {args.k}, {args.dtype}, batches of {args.batch:,} rows, best of {args.repeats} "
          f"interleaved runs; {os.cpu_count()} CPUs")
    width = max(len(name) for name, _, _ in pairs)
    print(f"{'':{width}}  {'one-shot s':>10}  {'stream s':>9}  {'ratio':>6}  |difference|")
    largest = 0.0
    for name, _, _ in pairs:
        a, b = (min(t) for t in times[name])
        diff = abs(values[name][0] - values[name][1])
        largest = max(largest, diff)
        print(f"{name:{width}}  {a:10.4f}  {b:9.4f}  {b / a:6.2f}  {diff:.1e}")
    print(f"largest |streaming - one-shot| = {largest:.1e}")


if __name__ == "__main__":
    main()
