"""Speed and accuracy of calib.focal.focal_map against two baselines, in one run.

    python tests/benchmarks/focal_map.py [--n 1000000] [--k 10] [--gamma 2] [--repeat 5]

Baselines, both on float32 probabilities as a network would produce them:

- **naive**: Eqs. 12-13 of Charoenphakdee et al. (2021) as printed, ``h = v / phi(v)`` normalised;
- **clamp**: slavikkom/focal_temperature_scaling's ``focal_map`` (Komisarenko & Kull 2024) ported to numpy:
  ``p`` clamped to [1e-12, 1 - 1e-12], ``1 / FL'(p)`` with ``FL'(p) = (1-p)^g (g log p / (1-p) - 1/p)``
  normalised, and rows that come out non-finite replaced by 1 - 1e-5 on the argmax (``multi_focal_link``).

It prints the best-of-``repeat`` wall time of each, the ratios, and how far each is from a float64 reference
(``focal_map`` on the float64 logits) on random logits and on saturated ones; then the torch version of
focal_map against the numpy one. Timings depend on the machine; the ratios are what to compare.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from calib.focal import focal_map


def softmax32(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def naive(z: np.ndarray, gamma: float) -> np.ndarray:
    v = softmax32(z)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        phi = (1 - v) ** gamma - gamma * (1 - v) ** (gamma - 1) * v * np.log(v)
        h = v / phi
        return h / h.sum(axis=1, keepdims=True)


def clamp(z: np.ndarray, gamma: float) -> np.ndarray:
    v = np.clip(softmax32(z), 1e-12, 1 - 1e-12)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        deriv = (1 - v) ** gamma * (gamma * np.log(v) / (1 - v) - 1 / v)
        w = 1 / deriv
        out = w / w.sum(axis=1, keepdims=True)
    bad = ~np.isfinite(out).all(axis=1)
    if bad.any():
        k = z.shape[1]
        fix = np.full((bad.sum(), k), 1e-5 / k, dtype=out.dtype)
        fix[np.arange(bad.sum()), z[bad].argmax(axis=1)] = 1 - 1e-5
        out[bad] = fix
    return out


def best_time(fn, *args, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn(*args)
        times.append(time.perf_counter() - start)
    return min(times)


def error_report(name: str, out: np.ndarray, ref: np.ndarray) -> str:
    finite = np.isfinite(out).all(axis=1)
    err = np.abs(out[finite].astype(np.float64) - ref[finite]).max() if finite.any() else np.nan
    return f"{name:<11} non-finite rows {np.count_nonzero(~finite):>8}   max |error| on the others {err:.1e}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--gamma", type=float, default=2.0)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (numpy is single-threaded here)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    rng = np.random.default_rng(0)
    z = (rng.normal(size=(args.n, args.k)) * rng.uniform(0.5, 8, size=(args.n, 1))).astype(np.float32)
    print(f"{args.n} x {args.k} float32 logits, gamma = {args.gamma}, best of {args.repeat}")

    t_map = best_time(focal_map, z, args.gamma, repeat=args.repeat)
    t_naive = best_time(naive, z, args.gamma, repeat=args.repeat)
    t_clamp = best_time(clamp, z, args.gamma, repeat=args.repeat)
    t_softmax = best_time(softmax32, z, repeat=args.repeat)
    print(f"focal_map  {t_map:8.3f} s")
    print(f"naive      {t_naive:8.3f} s   focal_map / naive = {t_map / t_naive:.2f}")
    print(f"clamp      {t_clamp:8.3f} s   focal_map / clamp = {t_map / t_clamp:.2f}")
    print(f"(softmax alone {t_softmax:.3f} s: focal_map / softmax = {t_map / t_softmax:.2f})")

    print("\naccuracy against focal_map on the float64 logits:")
    ref = focal_map(z.astype(np.float64), args.gamma)
    for name, fn in [("focal_map", focal_map), ("naive", naive), ("clamp", clamp)]:
        print("  random     " + error_report(name, fn(z, args.gamma), ref))
    sat = z.copy()
    sat[:, 0] += 40                                    # a saturated float32 softmax: top probability rounds to 1
    ref_sat = focal_map(sat.astype(np.float64), args.gamma)
    for name, fn in [("focal_map", focal_map), ("naive", naive), ("clamp", clamp)]:
        print("  saturated  " + error_report(name, fn(sat, args.gamma), ref_sat))

    zt = torch.from_numpy(z)
    t_torch = best_time(focal_map, zt, args.gamma, repeat=max(1, args.repeat // 2))
    diff = np.abs(focal_map(zt, args.gamma).numpy().astype(np.float64) - focal_map(z, args.gamma)).max()
    diff_ref = np.abs(focal_map(zt, args.gamma).numpy().astype(np.float64) - ref).max()
    print(f"\ntorch (CPU, {args.threads} thread(s)) {t_torch:.3f} s; max |torch - numpy| = {diff:.1e} "
          f"(float32 both), max |torch - float64 reference| = {diff_ref:.1e}")
    zs = torch.from_numpy(sat[:2000]).requires_grad_(True)
    (focal_map(zs, args.gamma) * torch.linspace(0, 1, args.k)).sum().backward()
    print(f"torch gradients on 2000 saturated rows finite: {bool(torch.isfinite(zs.grad).all())}")


if __name__ == "__main__":
    main()
