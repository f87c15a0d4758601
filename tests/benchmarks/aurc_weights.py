"""Bin-based CDF weights (Zhou et al. 2025, Eqs. 13-16) against exact sort-based weights: error and time.

    python tests/benchmarks/aurc_weights.py [--sizes 1000 10000 100000 1000000] [--repeats 3]
                                            [--threads 1] [--device cpu] [--dtype float32]

Zhou et al. (2025) replace the sort of the AURC by a K-bin histogram of the confidence scores smoothed by
sigmoids, claiming O(nK) "typically lower" than O(n log n) (Sec. 4.2). Both weight computations are the
library's, :func:`calib.losses.au_weights`: ``cdf="exact"`` (one sort, harmonic weights
H_n - H_{max(r, n-m+1) - 1} by descending rank r, ties averaged; piecewise constant, so no backward pass)
and ``cdf="bins"`` (histogram + n x K sigmoids + log-sum-exp, differentiable; the training step also needs
its backward pass, timed separately). Both include the selection of tau (``kthvalue``).

Data (seed 0): MSP-like scores s ~ Beta(6, 1), bins on [0, 1], kappa = 0.9 (the paper's CIFAR-10 value).
Settings: K = 15, nu = 0.1 (the paper's CIFAR-10 nu; K is not stated), K = 15, nu = 0.01 (its CIFAR-100 nu)
and K = 64, nu = 0.05 (the official code's defaults). "argsort" is a bare ``torch.argsort`` of the scores,
the floor of any sort-based method; "sort" is the exact weights. Error: max |G_nu - G_n| over the samples (G_n the
empirical mid-rank CDF), and the mean and max |beta_bins - beta_exact| relative to the mean exact weight.
Each time is the best of ``--repeats`` runs (time.perf_counter), all entries interleaved. The crossover is
the smallest n of the grid from which the bins forward pass is faster than the sort. Not collected by
pytest; timings depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from calib.losses import au_weights
from calib.selective import smoothed_cdf

SETTINGS = [(15, 0.1), (15, 0.01), (64, 0.05)]
KAPPA = 0.9


def best_time(fn, repeats):
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        best = min(best, time.perf_counter() - t0)
    return best


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10**3, 10**4, 10**5, 10**6])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    dtype = getattr(torch, args.dtype)
    dev = torch.device(args.device)
    name = torch.cuda.get_device_name(dev) if dev.type == "cuda" else f"CPU, {args.threads} thread(s)"
    print(f"device: {name}; dtype {args.dtype}; kappa = {KAPPA}; best of {args.repeats}\n")
    head = (f"{'n':>8} {'K':>3} {'nu':>5} | {'sup|G-Gn|':>9} {'mean|db|/b':>10} {'max|db|/b':>9} | "
            f"{'argsort ms':>10} {'sort ms':>8} {'bins ms':>8} {'bins+bw ms':>10} {'sort/bins':>9} {'nK':>9} "
            f"{'n log2 n':>9}")
    print(head)
    print("-" * len(head))
    rows = []
    rng = np.random.default_rng(0)
    for n in args.sizes:
        s_np = rng.beta(6.0, 1.0, size=n)
        s = torch.as_tensor(s_np, dtype=dtype, device=dev)
        exact = au_weights(s.double(), kappa=KAPPA, cdf="exact").cpu().numpy()
        ranks = np.argsort(np.argsort(s_np, kind="stable"), kind="stable") + 0.5  # mid-rank, no ties here
        g_emp = ranks / n
        t_sort = best_time(lambda: au_weights(s, kappa=KAPPA, cdf="exact"), args.repeats)
        t_argsort = best_time(lambda: torch.argsort(s), args.repeats)
        for k, nu in SETTINGS:
            w = au_weights(s.double(), kappa=KAPPA, nu=nu, n_bins=k, cdf="bins").cpu().numpy()
            g_bins, _ = smoothed_cdf(s_np, n_bins=k, nu=nu)
            err_g = float(np.max(np.abs(g_bins - g_emp)))
            rel = np.abs(w - exact) / exact.mean()
            t_bins = best_time(lambda: au_weights(s, kappa=KAPPA, nu=nu, n_bins=k, cdf="bins"), args.repeats)
            sg = s.clone().requires_grad_(True)

            def fwd_bwd():
                au_weights(sg, kappa=KAPPA, nu=nu, n_bins=k, cdf="bins").sum().backward()

            t_bw = best_time(fwd_bwd, args.repeats)
            rows.append((n, k, nu, t_sort, t_bins, t_bw))
            print(f"{n:>8} {k:>3} {nu:>5} | {err_g:>9.3f} {rel.mean():>10.3f} {rel.max():>9.3f} | "
                  f"{1e3 * t_argsort:>10.2f} {1e3 * t_sort:>8.2f} {1e3 * t_bins:>8.2f} {1e3 * t_bw:>10.2f} "
                  f"{t_sort / t_bins:>9.2f} "
                  f"{n * k:>9} {n * np.log2(n):>9.0f}")
    print()
    for k, nu in SETTINGS:
        mine = [r for r in rows if r[1] == k and r[2] == nu]
        faster = [r[0] for r in mine if r[4] < r[3]]
        faster_bw = [r[0] for r in mine if r[5] < r[3]]
        cross = next((n for n in args.sizes if all(m in faster for m in args.sizes if m >= n)), None)
        cross_bw = next((n for n in args.sizes if all(m in faster_bw for m in args.sizes if m >= n)), None)
        print(f"K = {k:>2}, nu = {nu:<5}: bins forward faster than the sort from n = "
              f"{cross or 'never (on this grid)'}; "
              f"with its backward pass from n = {cross_bw or 'never (on this grid)'}")


if __name__ == "__main__":
    main()
