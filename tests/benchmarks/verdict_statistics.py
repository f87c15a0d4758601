"""The statistics behind the book's verdicts, against the first versions they replaced (tests/references.py, kept as
the baselines), with the largest difference (0: equal to the last bit):

- chapter 10's intervals over a stored grid (calib.experiments.GridStatistics): the equal-mass ECE of every
  resample at once, the class-wise ECE's sparse products, and optionally the whole interval workload of the
  chapter's grid;
- chapter 11's ranking bootstrap (calib.stats.kendall_tau_bootstrap): scipy's tau-b of every resample at once
  against one scipy call per resample (the taus alone, and the whole bootstrap with the chapter's cheapest metric,
  the error, where the taus weigh most).

    python tests/benchmarks/verdict_statistics.py [--n 10000] [--resamples 400] [--repeats 5]
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

from references import BlockEqualMassECE, kendall_bootstrap_taus  # noqa: E402

from calib.experiments import _ClasswiseECE, _EqualMassECE  # noqa: E402
from calib.stats import bootstrap_counts, kendall_tau_bootstrap  # noqa: E402
from calib.stats.ranks import _kendall, _kendall_rows  # noqa: E402
from equal_mass_resamples import best_time  # noqa: E402  (this folder: the best of a few runs' CPU time)


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
    probs = rng.dirichlet(np.full(10, 0.3), size=n)
    classwise = _ClasswiseECE(probs, rng.integers(0, 10, n), 15)

    def first_version():                                 # products with the transposed view, as first written
        conf, hits = (classwise._conf.T @ counts.T).T, (classwise._hits.T @ counts.T).T
        return np.abs(hits - conf).sum(axis=1) / (counts.sum(axis=1) * 10)

    t_before, a = best_time(first_version, repeats)
    t_now, b = best_time(lambda: classwise.resampled(counts), repeats)
    print(f"{'classwise':5} {t_before:9.4f} {t_now:9.4f} {t_before / t_now:7.2f} {np.abs(a - b).max():11.1e}")


def kendall(n: int, repeats: int) -> None:
    rng = np.random.default_rng(0)
    items, seeds, resamples = 8, 5, 100                       # chapter 11's tables: up to 8 losses, 5 seeds, 100
    reference = {f"loss{i}": float(i) for i in range(items)}
    values = rng.normal(size=(resamples, items))
    t_before, a = best_time(lambda: np.array([_kendall(np.arange(items, dtype=float), v) for v in values]), repeats)
    t_now, b = best_time(lambda: _kendall_rows(np.arange(items, dtype=float), values), repeats)
    print(f"\nKendall's tau-b of {resamples} resamples of {items} items; CPU seconds, best of {repeats}")
    print(f"{'what':26} {'before':>9} {'now':>9} {'ratio':>7} {'max |diff|':>11}")
    print(f"{'taus':26} {t_before:9.4f} {t_now:9.4f} {t_before / t_now:7.2f} {np.abs(a - b).max():11.1e}")
    labels = rng.integers(0, 10, n)
    outcomes = {k: np.stack([np.column_stack([rng.uniform(0.5, 1, n), rng.random((n,)) < 0.8 + 0.01 * i])
                             for _ in range(seeds)]).astype(float) for i, k in enumerate(reference)}

    def error(s, _):
        return 1.0 - s[:, 1].mean()

    t_before, taus = best_time(lambda: kendall_bootstrap_taus(reference, outcomes, labels, error, resamples), 1)
    t_now, out = best_time(lambda: kendall_tau_bootstrap(reference, outcomes, labels, error, resamples), 1)
    low, high = np.quantile(taus, [0.025, 0.975])
    diff = max(abs(low - out.interval.low), abs(high - out.interval.high))
    print(f"{'bootstrap, error, n=' + str(n):26} {t_before:9.4f} {t_now:9.4f} {t_before / t_now:7.2f} {diff:11.1e}")


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
    kendall(args.n, args.repeats)
    if args.intervals:
        chapter_intervals(Path(args.grid), args.intervals)


if __name__ == "__main__":
    main()
