"""Speed of focal temperature scaling's grid search: the vectorised kernel against a per-(gamma, T) loop.

    python tests/benchmarks/focal_temperature_scaling.py [--n 10000] [--k 100] [--loop-pairs 24] [--threads 0]

The grid is Komisarenko & Kull (2024)'s (Sec. 5.1): 9 values of gamma_ev times T = 0.01, ..., 5.00, i.e.
4500 evaluations of ``focal_map(z / T, gamma)`` and of the objective (15-bin equal-mass ECE, or NLL) on
validation logits of N = 10^4 samples and K = 100 classes (TinyImageNet's validation set has 10^4 images; the
logits here are synthetic, a network-like mix of confident and unsure rows).

Measured in the same run:

- **vectorised**: :func:`calib.posthoc.focal_temperature_scores` on the whole grid, with the default threads
  and with one thread;
- **loop**: the obvious implementation, ``metrics.adaptive_ece(focal_map(z / T, gamma), y)`` (or
  ``metrics.nll``) for each grid point, timed on ``--loop-pairs`` random grid points and extrapolated to 4500;
  the scores of those points are compared with the vectorised ones.

It prints the times and the ratios; they depend on the machine and its load, the ratios less so.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from calib import metrics
from calib.posthoc import focal_temperature as fts_module   # its n_threads is patched to time one thread
from calib.focal import focal_map
from calib.posthoc import KOMISARENKO_GAMMAS, KOMISARENKO_TEMPERATURES, focal_temperature_scores


def network_like_logits(n: int, k: int, seed: int = 0):
    """Logits with a spread of confidences, labels agreeing with the argmax about 70% of the time."""
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(n, k)) * 2.0
    pred = rng.integers(0, k, n)
    z[np.arange(n), pred] += rng.gamma(2.0, 3.0, size=n)
    y = np.where(rng.uniform(size=n) < 0.7, pred, rng.integers(0, k, n))
    return z, y


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--k", type=int, default=100)
    parser.add_argument("--loop-pairs", type=int, default=24)
    parser.add_argument("--objectives", default="ece,nll")
    parser.add_argument("--threads", type=int, default=0, help="threads of the vectorised run (0: the default)")
    args = parser.parse_args()

    z, y = network_like_logits(args.n, args.k)
    gammas, temps = KOMISARENKO_GAMMAS, KOMISARENKO_TEMPERATURES
    n_points = len(gammas) * len(temps)
    default_threads = fts_module.n_threads(z.size * n_points, min_work=1 << 20)
    print(f"logits {args.n} x {args.k}, grid {len(gammas)} gammas x {len(temps)} temperatures = {n_points} points; "
          f"{os.cpu_count()} CPUs, default threads {default_threads}")
    rng = np.random.default_rng(1)
    pairs = [(int(rng.integers(len(gammas))), int(rng.integers(len(temps)))) for _ in range(args.loop_pairs)]
    original = fts_module.n_threads
    for objective in args.objectives.split(","):
        score = metrics.adaptive_ece if objective == "ece" else metrics.nll
        if args.threads:
            fts_module.n_threads = lambda work, **kw: args.threads
        t0 = time.perf_counter()
        scores = focal_temperature_scores(z, y, gammas, temps, objective=objective)
        t_vec = time.perf_counter() - t0
        fts_module.n_threads = lambda work, **kw: 1
        sub = temps[::10]
        t0 = time.perf_counter()
        focal_temperature_scores(z, y, gammas, sub, objective=objective)
        t_one = (time.perf_counter() - t0) * len(temps) / len(sub)
        fts_module.n_threads = original
        t0 = time.perf_counter()
        loop = [score(focal_map(z / temps[j], float(gammas[i])), y) for i, j in pairs]
        t_loop = (time.perf_counter() - t0) / len(pairs) * n_points
        diff = max(abs(loop[m] - scores[i, j]) for m, (i, j) in enumerate(pairs))
        i, j = np.unravel_index(int(np.argmin(scores)), scores.shape)
        print(f"\n[{objective}] argmin gamma = {gammas[i]:g}, T = {temps[j]:.2f}, score = {scores[i, j]:.6f}")
        print(f"  vectorised, full grid ({'%d' % (args.threads or default_threads)} thread(s)): {t_vec:8.2f} s "
              f"({1e3 * t_vec / n_points:.2f} ms per grid point)")
        print(f"  vectorised, one thread (50 of 500 T, scaled):    {t_one:8.2f} s")
        print(f"  loop focal_map + metric ({len(pairs)} points, scaled):   {t_loop:8.2f} s")
        print(f"  ratio loop / vectorised: {t_loop / t_vec:.1f} (one thread: {t_loop / t_one:.1f}); "
              f"max |score difference| at the sampled points: {diff:.1e}")


if __name__ == "__main__":
    main()
