"""Peak memory and time of ``TemperatureScaling().fit`` on large float32 logits (issue 24, item 26).

    python tests/benchmarks/ts_memory.py [--n 1000000] [--k 1000] [--objectives nll,ece]

Each fit runs in a fresh subprocess, so that one fit's memory does not hide another's. The subprocess draws
float32 logits (N, K) of an over-confident network-like model (labels agreeing with the argmax about 70% of the
time, the logits multiplied by 2.5) in row blocks, then resets the kernel's peak-RSS counter (``VmHWM``, by
writing 5 to ``/proc/self/clear_refs``) and fits. Printed per objective: the input's size, the process's RSS
before the fit, its peak RSS during the fit, the peak's excess over the RSS before the fit as a multiple of
the input, the fit's wall time, and the fitted temperature.

The goal (issue 24): peak RSS within about twice the input (so the excess within about one input). Linux only
(``/proc``); not collected by pytest; times depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

CHILD = r"""
import json, sys, time
import numpy as np
from calib.posthoc import TemperatureScaling

n, k, objective = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]


def rss(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024


rng = np.random.default_rng(0)
z = np.empty((n, k), dtype=np.float32)
y = np.empty(n, dtype=np.int64)
step = 50_000
for lo in range(0, n, step):
    hi = min(n, lo + step)
    block = rng.standard_normal((hi - lo, k), dtype=np.float32) * 2.0
    pred = rng.integers(0, k, hi - lo)
    block[np.arange(hi - lo), pred] += rng.gamma(2.0, 3.0, size=hi - lo).astype(np.float32)
    y[lo:hi] = np.where(rng.uniform(size=hi - lo) < 0.7, pred, rng.integers(0, k, hi - lo))
    z[lo:hi] = 2.5 * block
before = rss("VmRSS")
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")
start = time.perf_counter()
ts = TemperatureScaling(objective).fit(z, y)
seconds = time.perf_counter() - start
print(json.dumps({"input": z.nbytes, "before": before, "peak": rss("VmHWM"), "seconds": seconds,
                  "temperature": ts.temperature_}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--k", type=int, default=1000)
    parser.add_argument("--objectives", default="nll,ece")
    args = parser.parse_args()
    gib = 2.0 ** 30
    print(f"TemperatureScaling().fit on {args.n:,} x {args.k:,} float32 logits ({args.n * args.k * 4 / gib:.2f} GiB), "
          f"{os.cpu_count()} CPUs")
    print(f"{'objective':>9}  {'input GiB':>9}  {'RSS before':>10}  {'peak RSS':>9}  {'excess/input':>12}  "
          f"{'time s':>8}  T")
    for objective in args.objectives.split(","):
        start = time.perf_counter()
        out = subprocess.run([sys.executable, "-c", CHILD, str(args.n), str(args.k), objective], capture_output=True,
                             text=True, env=dict(os.environ))
        if out.returncode != 0:
            print(f"{objective:>9}  failed after {time.perf_counter() - start:.0f} s (rc {out.returncode}): "
                  f"{out.stderr.strip().splitlines()[-1] if out.stderr.strip() else 'killed'}")
            continue
        r = json.loads(out.stdout.strip().splitlines()[-1])
        print(f"{objective:>9}  {r['input'] / gib:9.2f}  {r['before'] / gib:9.2f}G  {r['peak'] / gib:8.2f}G  "
              f"{(r['peak'] - r['before']) / r['input']:12.2f}  {r['seconds']:8.1f}  {r['temperature']:.6g}")


if __name__ == "__main__":
    main()
