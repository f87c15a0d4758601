"""Speed of temperature scaling's ECE grid: the batched scores against the per-temperature loop they replaced.

    python tests/benchmarks/temperature_grid_ece.py [--n 1000] [--k 10] [--fits 20] [--weighted]

The grid is chapter 08's, T = 0.50, 0.51, ..., 5.00 (451 temperatures), scored by the 15-bin equal-width ECE of
``softmax(z / T)`` on N x K validation logits (synthetic, a network-like mix of confident and unsure rows, labels
agreeing with the argmax about 70% of the time), as ``TemperatureScaling("ece", grid=...)`` and
``fit_temperature_grid`` compute them (``calib.posthoc.temperature._grid_ece_scores``).

Measured in the same run, each on the same ``--fits`` draws of the logits:

- **loop**: the previous implementation, kept below as ``loop_grid_ece_scores``: per temperature, the row sums
  ``exp(z / T - max / T).sum(axis=1)`` on the (N, K) block and one call of ``metrics.top_label_ece`` (or of the
  weighted ECE) per temperature;
- **batched**: the current one: the row sums class by class on the (K, N) block and the ECEs of all temperatures
  from one ``np.bincount`` (``metrics.equal_width_ece_rows``).

The scores of the two are compared with ``np.array_equal`` (they must be equal bit for bit). It prints the times
and the ratio loop / batched; they depend on the machine and its load, the ratio less so.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from scipy.special import softmax

from calib import metrics
from calib.posthoc._common import weighted_top_label_ece
from calib.posthoc.temperature import _grid_ece_scores, _RowBlocks
from focal_temperature_scaling import network_like_logits  # this folder (run as a script)

GRID = np.round(np.arange(50, 501) * 0.01, 2)


def loop_grid_ece_scores(data: _RowBlocks, grid: np.ndarray, n_bins: int) -> np.ndarray:
    """The implementation before the batched one (commit 862ebf4), verbatim but for names."""
    conf = np.empty((len(grid), data.n))
    tied = data.z_max - data.z_second <= 1e-13 * (np.abs(data.z_max) + float(grid.max()))
    correct = np.broadcast_to(data.top == data.y, (len(grid), data.n)).copy()

    def rows(lo, hi, zb):
        z_max = data.z_max[lo:hi, None]
        x = np.empty_like(zb)
        for i, t in enumerate(grid):
            np.divide(zb, t, out=x)
            x -= z_max / t
            np.exp(x, out=x)
            conf[i, lo:hi] = 1.0 / x.sum(axis=1)

    data.map(rows)
    for r in np.flatnonzero(tied):
        zr = np.asarray(data.z[r], dtype=np.float64)
        for i, t in enumerate(grid):
            p = softmax(zr / t)
            j = int(p.argmax())
            conf[i, r], correct[i, r] = p[j], j == data.y[r]
    if data.w is not None:
        return np.array([weighted_top_label_ece(conf[i], correct[i], data.w, n_bins) for i in range(len(grid))])
    return np.array([metrics.top_label_ece(conf[i], correct[i], n_bins=n_bins, check=False)
                     for i in range(len(grid))])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--fits", type=int, default=20)
    parser.add_argument("--weighted", action="store_true", help="with random frequency weights in [0.5, 2]")
    args = parser.parse_args()

    draws = []
    for seed in range(args.fits):
        z, y = network_like_logits(args.n, args.k, seed)
        w = np.random.default_rng(seed).uniform(0.5, 2.0, args.n) if args.weighted else None
        draws.append(_RowBlocks(z, y, w))
    times = {"loop": 0.0, "batched": 0.0}
    equal = True
    for data in draws:
        t0 = time.perf_counter()
        old = loop_grid_ece_scores(data, GRID, 15)
        t1 = time.perf_counter()
        new = _grid_ece_scores(data, GRID, 15)
        t2 = time.perf_counter()
        times["loop"] += t1 - t0
        times["batched"] += t2 - t1
        equal &= bool(np.array_equal(old, new))
    print(f"logits {args.n} x {args.k}{' weighted' if args.weighted else ''}, grid of {len(GRID)} temperatures, "
          f"{args.fits} fits")
    for name, seconds in times.items():
        print(f"  {name:8s} {seconds:7.3f} s ({1e3 * seconds / args.fits:6.2f} ms per fit)")
    print(f"  ratio loop / batched: {times['loop'] / times['batched']:.2f}; scores equal bit for bit: {equal}")


if __name__ == "__main__":
    main()
