"""Fashion-MNIST-C's speed: images per second of every corruption of :func:`calib.corruptions.corrupt_images`,
against the reference, the PyPI package imagecorruptions, run image by image as its own ``corrupt`` would.

    python tests/benchmarks/corruptions.py [--n 10000] [--severity 3] [--reference-n 200] [--threads 1]

calib corrupts ``--n`` Fashion-MNIST test images (the first ``--n``; synthetic ones when the dataset's files are
not installed) in one call; the reference corrupts the first ``--reference-n`` of them one at a time, each as
three equal channels, with its own (ImageNet-C) constants at the same severity, through its corruption functions
(its ``corrupt`` refuses images under 32 pixels), and with the shims of ``tests/test_corruptions.py`` that let
the 2020 package run today. The ratio is calib's rate over the reference's. Each time is the best of
``--repeats``. ``--threads`` caps BLAS and OpenMP threads (set before numpy loads). Not collected by pytest;
timings depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import os
import sys
import time


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--severity", type=int, default=3)
    parser.add_argument("--reference-n", type=int, default=200, help="0 skips the reference")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[name] = str(args.threads)

    import numpy as np

    from calib.corruptions import CORRUPTIONS, corrupt_images
    from calib.dataset_files import installed_files, read_idx

    files = installed_files("fashion-mnist")
    if files is not None:
        images = read_idx(files["t10k-images-idx3-ubyte.gz"])[:args.n]
        source = "Fashion-MNIST test images"
    else:
        images = np.random.default_rng(0).integers(0, 256, size=(args.n, 28, 28), dtype=np.uint8)
        source = "uniform random images (Fashion-MNIST is not installed)"
    images = np.tile(images, (-(-args.n // len(images)), 1, 1))[:args.n]

    reference = None
    if args.reference_n:
        sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
        try:
            from test_corruptions import REFERENCE_SEVERITIES, load_reference
            reference = load_reference()
        except ImportError as error:
            print(f"reference not run: {error}")

    print(f"{len(images)} {source}, severity {args.severity}, {args.threads} thread(s); best of {args.repeats}")
    print(f"{'corruption':18s} {'calib (img/s)':>14s} {'reference (img/s)':>18s} {'ratio':>8s}")
    for kind in CORRUPTIONS:
        best = min(_seconds(lambda kind=kind: corrupt_images(images, kind, args.severity, seed=0))
                   for _ in range(args.repeats))
        rate = len(images) / best
        line = f"{kind:18s} {rate:14,.0f}"
        if reference is not None:
            sample = images[:args.reference_n]
            severity = args.severity if args.severity in REFERENCE_SEVERITIES[kind] else REFERENCE_SEVERITIES[kind][0]

            def run_reference(kind=kind, sample=sample, severity=severity):
                for i, image in enumerate(sample):
                    reference(kind, image, severity, seed=i)

            ref_rate = len(sample) / min(_seconds(run_reference) for _ in range(args.repeats))
            line += f" {ref_rate:18,.0f} {rate / ref_rate:8.0f}"
        print(line)


def _seconds(call) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


if __name__ == "__main__":
    main()
