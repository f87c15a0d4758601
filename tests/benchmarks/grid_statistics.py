"""Chapter 10's intervals over a stored grid (calib.experiments.GridStatistics): the equal-mass ECE of every resample
at once against the first, one-pass float64 version it replaced (tests/references.py, kept as the baseline), with
the largest difference (0: equal to the last bit), and optionally the whole interval workload of the chapter's
grid.

    python tests/benchmarks/grid_statistics.py [--n 10000] [--resamples 400] [--repeats 5]
                                               [--grid book/results/10-benchmark/regime] [--intervals 0]

Data (seed 0): confidences ~ U(0.1, 1) rounded to 3 decimals (ties straddle the bins' cuts), outcomes ~
Bernoulli(confidence), 15 bins, l2 and l1; counts from calib.stats.bootstrap_counts (the read-only array every
interval shares). Each time is the best of ``--repeats`` runs of process CPU time. ``--intervals K`` also times
the first K of chapter 10's paired intervals (every loss against cross-entropy, ECE, AdaECE, the l2 equal-mass
ECE, accuracy, class-wise ECE and the confidence gap, none and TS-ECE) on the stored grid, wall time of one run.
Not collected by pytest; timings depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))   # tests/, for the reference implementation

from references import BlockEqualMassECE  # noqa: E402

from calib.experiments import _EqualMassECE  # noqa: E402
from calib.stats import bootstrap_counts  # noqa: E402


def best_time(fn, repeats):
    best, out = float("inf"), None
    for _ in range(repeats):
        start = time.process_time()
        out = fn()
        best = min(best, time.process_time() - start)
    return best, out


def equal_mass(n: int, resamples: int, repeats: int) -> None:
    rng = np.random.default_rng(0)
    conf = np.round(rng.uniform(0.1, 1.0, n), 3)
    correct = rng.random(n) < conf
    counts = bootstrap_counts(n, resamples, seed=0)
    print(f"equal-mass ECE, n = {n}, {resamples} resamples, 15 bins; CPU seconds, best of {repeats}")
    print(f"{'norm':5} {'before':>9} {'now':>9} {'ratio':>7} {'max |diff|':>11}")
    for norm in ("l2", "l1"):
        before = BlockEqualMassECE(conf, correct, 15, norm)
        now = _EqualMassECE(conf, correct, 15, norm)
        t_before, a = best_time(lambda: before.resampled(counts), repeats)
        t_now, b = best_time(lambda: now.resampled(counts), repeats)
        print(f"{norm:5} {t_before:9.4f} {t_now:9.4f} {t_before / t_now:7.2f} {np.abs(a - b).max():11.1e}")


def chapter_intervals(grid_dir: Path, count: int) -> None:
    from calib.experiments import CONFIDENCE_GAP, GridStatistics, evaluate_store, load_grid, load_store

    grid = load_grid(grid_dir / "grid-cpu.toml")
    model = next(m for m in grid.models if grid.complete(m))
    runs = load_store(grid.store, model=model)
    rows = evaluate_store(runs, cache=grid.store / "posthoc.json", write_cache=False, progress=False)
    calls = [(metric, (loss, map_), ("ce", map_))
             for metric in ("ece", "adaece", "ece_em_l2", "accuracy", "classwise_ece", CONFIDENCE_GAP)
             for map_ in ("none", "ts-ece") for loss in grid.losses(model) if loss != "ce"][:count]
    statistics = GridStatistics(runs, rows)
    start = time.perf_counter()
    for metric, a, b in calls:
        statistics.interval(metric, a, b)
    print(f"\n{len(calls)} of chapter 10's intervals on {model} ({len(runs)} runs): "
          f"{time.perf_counter() - start:.1f} s wall")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--resamples", type=int, default=400)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--grid", default="book/results/10-benchmark/regime")
    parser.add_argument("--intervals", type=int, default=0, help="time this many of chapter 10's intervals (0: none)")
    args = parser.parse_args(argv)
    equal_mass(args.n, args.resamples, args.repeats)
    if args.intervals:
        chapter_intervals(Path(args.grid), args.intervals)


if __name__ == "__main__":
    main()
