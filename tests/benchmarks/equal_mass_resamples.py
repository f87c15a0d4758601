"""The test set's bootstrap of an equal-mass ECE: every resample at once (calib.metrics.EqualMassStatistic) against
recomputing the ECE of each resample's rows (calib.stats.ResampledStatistic, what calib.metrics.statistic gave
before): time and the largest difference.

    python tests/benchmarks/equal_mass_resamples.py [--n 10000] [--resamples 400] [--repeats 3]

Data (seed 0): confidences ~ U(0.1, 1), outcomes ~ Bernoulli(confidence), 15 bins, l2 and l1; counts from
calib.stats.bootstrap_counts (float64, and float32 as calib.shift passes them). Each time is the best of
``--repeats`` runs of process CPU time. Not collected by pytest; timings depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from calib.metrics import EqualMassStatistic, top_label_ece
from calib.stats import ResampledStatistic, bootstrap_counts


def best_time(fn, repeats):
    best, out = float("inf"), None
    for _ in range(repeats):
        start = time.process_time()
        out = fn()
        best = min(best, time.process_time() - start)
    return best, out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--resamples", type=int, default=400)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    conf = rng.uniform(0.1, 1.0, args.n)
    correct = (rng.random(args.n) < conf).astype(float)
    counts = bootstrap_counts(args.n, args.resamples, seed=0)
    print(f"n = {args.n}, {args.resamples} resamples, 15 bins; CPU seconds, best of {args.repeats}")
    print(f"{'norm':5} {'per resample':>13} {'all at once':>12} {'float32 counts':>15} {'ratio':>7} {'max |diff|':>11}")
    for norm in ("l2", "l1"):
        slow = ResampledStatistic(np.column_stack([conf, correct]),
                                  lambda rows, norm=norm: top_label_ece(rows[:, 0], rows[:, 1] > 0, 15, "quantile",
                                                                        norm, check=False))
        fast = EqualMassStatistic(conf, correct, 15, norm)
        t_slow, a = best_time(lambda: slow.resampled(counts), 1)
        t_fast, b = best_time(lambda: fast.resampled(counts), args.repeats)
        t_f32, c = best_time(lambda: fast.resampled(counts.astype(np.float32)), args.repeats)
        diff = max(np.abs(a - b).max(), np.abs(a - c).max())
        print(f"{norm:5} {t_slow:13.3f} {t_fast:12.3f} {t_f32:15.3f} {t_slow / t_fast:7.1f} {diff:11.1e}")


if __name__ == "__main__":
    main()
