"""One training epoch of ``calib train`` in one process and across 2 CPU processes (torchrun, gloo), and the ratio.

    python tests/benchmarks/distributed.py [--model small-cnn] [--images 12800] [--batch-size 128] [--repeats 2]

Each entry is a real ``calib train`` command in a temporary run directory, one epoch of ``--images`` Fashion-MNIST
training images (no augmentation, ``--diagnostics eval``): "1 process, 1 thread", "1 process, 2 threads" and
"torchrun, 2 ranks x 1 thread" (the same global batch). The time is ``train_seconds`` of ``history.json`` (rank
0's training steps, before the diagnostics; the gradient all-reduce included) and the command's wall time
(start-up, data loading and evaluation included). Repeats are interleaved and the best is kept. Fashion-MNIST
must be installed (see calib.data). Not collected by pytest; on a machine shared with other work the ratios move.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run(prefix, threads, args, out):
    cmd = [*prefix, "train", "--data", "fashion-mnist", "--model", args.model, "--loss", "ce", "--epochs", "1",
           "--batch-size", str(args.batch_size), "--train-subset", str(args.images), "--val-subset", "1000",
           "--test-subset", "1000", "--augment", "none", "--diagnostics", "eval", "--no-progress", "--out", str(out)]
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "PYTHONPATH": str(ROOT)}
    start = time.perf_counter()
    subprocess.run(cmd, env=env, check=True, capture_output=True, text=True)
    wall = time.perf_counter() - start
    epoch = json.loads((out / "history.json").read_text())["epochs"][-1]
    return epoch["train_seconds"], wall, epoch["test"]["accuracy"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="small-cnn")
    parser.add_argument("--images", type=int, default=12800)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    one = [sys.executable, "-m", "calib"]
    two = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", "-m", "calib"]
    entries = [("1 process, 1 thread", one, 1), ("1 process, 2 threads", one, 2),
               ("torchrun, 2 ranks x 1 thread", two, 1)]
    best = {}
    with tempfile.TemporaryDirectory() as tmp:
        for rep in range(args.repeats):
            for i, (name, prefix, threads) in enumerate(entries):
                got = run(prefix, threads, args, Path(tmp) / f"r{rep}-{i}")
                old = best.get(name)
                best[name] = got if old is None else (min(old[0], got[0]), min(old[1], got[1]), got[2])
    print(f"one epoch of {args.model}, {args.images} images, global batch {args.batch_size}, best of {args.repeats}; "
          f"{os.cpu_count()} CPUs")
    base = best[entries[0][0]]
    print(f"{'':30}  {'train s':>8}  {'ratio':>6}  {'wall s':>7}  {'ratio':>6}  test acc")
    for name, (train_s, wall, acc) in best.items():
        print(f"{name:30}  {train_s:8.2f}  {train_s / base[0]:6.2f}  {wall:7.2f}  {wall / base[1]:6.2f}  {acc:.4f}")


if __name__ == "__main__":
    main()
