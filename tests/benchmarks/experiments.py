"""Cost of chapter 10's benchmark: the grid's wall time per run, and the post-hoc fits on one stored run.

    python tests/benchmarks/experiments.py [--store book/results/10-benchmark] [--run fl-3/seed0]
                                           [--train-epochs 1] [--loop-pairs 24]

Measured, with the baseline of each ratio in the same run:

- **grid**: the wall time of every stored run, read from its meta.json (training and per-epoch evaluation, on
  the machine and thread count the meta names), as the mean per loss and its ratio to cross-entropy's;
- **training now** (``--train-epochs N``, 0 to skip): N epochs of every loss of the grid, trained here on the
  grid's recipe, with the ratio to cross-entropy's time in this same run: the cost of a loss, free of the load
  the stored grid ran under;
- **post-hoc fits** on the validation logits of one stored run (5,000 x 10): each map of
  ``calib.experiments.POSTHOC_MAPS`` and the scoring of the test logits, with the ratio to TS-NLL's fit;
  FTS (Komisarenko & Kull's 9 x 500 grid) also against the obvious loop, ``adaptive_ece(focal_map(z / T,
  gamma))`` per grid point, timed on ``--loop-pairs`` points and extrapolated to the grid.

Times depend on the machine and its load; the ratios less so.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import tempfile
import time
from pathlib import Path

import numpy as np

from calib import metrics
from calib.experiments import POSTHOC_MAPS, fit_posthoc, load_grid, load_store, score_probabilities
from calib.focal import focal_map
from calib.posthoc import KOMISARENKO_GAMMAS, KOMISARENKO_TEMPERATURES
from calib.data import load_dataset
from calib.train import train


def grid_wall_times(store: Path) -> None:
    runs = load_store(store)
    by_loss: dict = {}
    for r in runs:
        by_loss.setdefault(r.loss, []).append(r.meta["wall_time_s"])
    ce = np.mean(by_loss["ce"])
    total = sum(sum(v) for v in by_loss.values())
    meta = runs[0].meta
    print(f"grid: {len(runs)} stored runs, {total / 60:.1f} min in all, mean {total / len(runs):.1f} s per run "
          f"({meta['device_name']}, {meta['threads']} threads, torch {meta['versions']['torch']})")
    print(f"{'loss':<14} {'runs':>4} {'mean s':>8} {'/ CE':>6}")
    for loss, v in sorted(by_loss.items(), key=lambda kv: np.mean(kv[1])):
        print(f"{loss:<14} {len(v):>4} {np.mean(v):>8.1f} {np.mean(v) / ce:>6.2f}")


def training_now(store: Path, epochs: int) -> None:
    grid = load_grid(store / "grid-cpu.toml")
    configs = {r.loss: r.config for r in grid.runs if r.seed == grid.runs[0].seed}
    times = {}
    first = next(iter(configs.values()))
    dataset = load_dataset(first.data, seed=first.seed)          # read once, outside the timings
    with tempfile.TemporaryDirectory() as tmp:
        train(dataclasses.replace(first, epochs=1, milestones=None), Path(tmp) / "warm-up", progress=False,
              dataset=dataset)                                    # first-run costs (allocations, kernels) untimed
        for loss, config in configs.items():
            config = dataclasses.replace(config, epochs=epochs, milestones=None)
            t0 = time.perf_counter()
            run = train(config, Path(tmp) / loss, progress=False, dataset=dataset)
            times[loss] = (time.perf_counter() - t0, run.epochs[-1]["train_seconds"])
    ce = times["ce"]
    print(f"\ntraining now: {epochs} epoch(s) of every loss of grid-cpu.toml (55k images)")
    print(f"{'loss':<14} {'wall s':>8} {'/ CE':>6} {'train s/epoch':>14} {'/ CE':>6}")
    for loss, (wall, step) in sorted(times.items(), key=lambda kv: kv[1][0]):
        print(f"{loss:<14} {wall:>8.1f} {wall / ce[0]:>6.2f} {step:>14.2f} {step / ce[1]:>6.2f}")


def posthoc_costs(store: Path, which: str, loop_pairs: int) -> None:
    loss, seed = which.split("/")
    run = next(r for r in load_store(store) if r.loss == loss and f"seed{r.seed}" == seed)
    a = run.logits()
    zv, yv, zt, yt = a["val_logits"], a["val_labels"], a["test_logits"], a["test_labels"]
    print(f"\npost-hoc fits on {run.model}/{which}: validation {zv.shape}, test {zt.shape}")
    times, score_times, fitted = {}, {}, {}
    for name in POSTHOC_MAPS:
        t0 = time.perf_counter()
        fitted_map = fit_posthoc(name, zv, yv, loss)
        fitted[name] = fitted_map.params
        times[name] = time.perf_counter() - t0
        t0 = time.perf_counter()
        score_probabilities(fitted_map.proba(zt), yt, log_probs=fitted_map.log_proba(zt))
        score_times[name] = time.perf_counter() - t0
    for name in POSTHOC_MAPS:
        print(f"{name:<10} fit {times[name]:8.3f} s ({times[name] / times['ts-nll']:8.1f} x TS-NLL)  score "
              f"{score_times[name]:.3f} s  {json.dumps({k: round(v, 3) for k, v in fitted[name].items()})}")
    gammas, temps = KOMISARENKO_GAMMAS, KOMISARENKO_TEMPERATURES
    rng = np.random.default_rng(0)
    pairs = [(float(gammas[rng.integers(len(gammas))]), float(temps[rng.integers(len(temps))]))
             for _ in range(loop_pairs)]
    z = zv.astype(np.float64)
    t0 = time.perf_counter()
    for g, t in pairs:
        metrics.adaptive_ece(focal_map(z / t, g), yv)
    loop = (time.perf_counter() - t0) / loop_pairs * len(gammas) * len(temps)
    print(f"FTS grid ({len(gammas)} x {len(temps)}): vectorised {times['fts']:.2f} s, per-point loop "
          f"{loop:.1f} s (extrapolated from {loop_pairs} points): {loop / times['fts']:.1f} x faster")
    per_run = sum(times.values()) + sum(score_times.values())
    print(f"all maps of one run: {per_run:.2f} s; a store of {len(load_store(store))} runs: about "
          f"{per_run * len(load_store(store)) / 60:.1f} min (why chapter 10 keeps posthoc.json)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", default="book/results/10-benchmark")
    parser.add_argument("--run", default="fl-3/seed0", help="LOSS/seed<k> whose logits the post-hoc fits use")
    parser.add_argument("--train-epochs", type=int, default=1, help="epochs per loss for 'training now' (0: skip)")
    parser.add_argument("--loop-pairs", type=int, default=24)
    args = parser.parse_args()
    store = Path(args.store)
    grid_wall_times(store)
    if args.train_epochs:
        training_now(store, args.train_epochs)
    posthoc_costs(store, args.run, args.loop_pairs)


if __name__ == "__main__":
    main()
