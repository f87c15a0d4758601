"""Speed of calib.focal.gamma_star and calib.focal.threshold on 10^6 values, against baselines timed in the
same run: scipy's lambertw alone (the floor for any closed-form gamma*), the printed Eq. 12 expression,
and a scalar scipy.optimize.brentq per value (timed on a subsample and extrapolated).

Run: ``python tests/benchmarks/focal.py [N]`` (default N = 1_000_000). Prints seconds and ratios; asserts
nothing (accuracy is tested in tests/test_focal.py), except that the round trip stays exact.
"""

from __future__ import annotations

import math
import sys
import time

import numpy as np
from scipy.optimize import brentq
from scipy.special import lambertw

from calib import focal


def best_of(fn, repeats: int = 3) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def g_minus_one(p, gam):
    return (1 - p) ** gam - gam * p * (1 - p) ** (gam - 1) * math.log(p) - 1


def main(n: int = 1_000_000) -> None:
    rng = np.random.default_rng(0)
    p0 = rng.uniform(1e-6, 0.5 - 1e-6, n)
    gams = focal.gamma_star(p0)
    a, b = 1 - p0, p0 * np.log(p0)
    z = -(a ** (1 - a / b) / b) * np.log(a)
    sub = 2000

    rows = []
    t_gs = best_of(lambda: focal.gamma_star(p0))
    t_th = best_of(lambda: focal.threshold(gams))
    t_lw = best_of(lambda: lambertw(z, -1))
    t_printed = best_of(lambda: focal.lambert_gamma(p0, -1))
    t_brentq_gs = best_of(lambda: [brentq(lambda g, q=q: -g_minus_one(q, g), 1e-12, 1e6, xtol=1e-14)
                                   for q in p0[:sub]], 1) * n / sub
    t_brentq_th = best_of(lambda: [brentq(g_minus_one, 1e-300, 0.5, args=(g,), xtol=1e-16)
                                   for g in gams[:sub]], 1) * n / sub
    rows += [("gamma_star (calib)", t_gs, t_gs), ("  scipy lambertw(z, -1) alone", t_lw, t_gs),
             ("  Eq. 12 as printed (lambert_gamma)", t_printed, t_gs),
             ("  brentq per value (extrapolated)", t_brentq_gs, t_gs),
             ("threshold (calib)", t_th, t_th), ("  brentq per value (extrapolated)", t_brentq_th, t_th)]

    back = focal.threshold(gams)
    err = np.max(np.abs(back - p0))
    print(f"calib.focal on {n:,} values (best of 3; brentq on {sub:,} values, scaled up)")
    print(f"{'':42}{'seconds':>10}{'x calib':>10}")
    for name, seconds, ref in rows:
        print(f"{name:42}{seconds:10.3f}{seconds / ref:10.2f}")
    print(f"max |threshold(gamma_star(p0)) - p0| = {err:.2e}")
    assert err < 1e-10


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000)
