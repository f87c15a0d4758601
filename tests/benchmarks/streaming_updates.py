"""The streaming metrics' ``update`` on torch tensors: host transfers and time per update.

    python tests/benchmarks/streaming_updates.py [--batch 10000] [--k 100] [--updates 50] [--device cpu]
                                                 [--device-kernels] [--no-validate]

For each metric of :mod:`calib.metrics.streaming`, fed ``--updates`` batches of softmax probabilities (float32,
``--batch`` rows, ``--k`` classes) as tensors on ``--device``: the calls that bring tensor data to the host per update
(``Tensor.cpu``, ``Tensor.numpy``, ``Tensor.item``, ``Tensor.tolist``, ``Tensor.__bool__``, ``Tensor.__float__``,
``Tensor.__int__``, counted by patching them; on a GPU each ``cpu()`` of a batch is a copy of it and each of the
others a synchronisation), and the median time of an update (after a warm-up update). On the CPU a tensor state is
updated by numpy's kernels through views of the batch (``numpy()`` of a CPU tensor shares its memory: no copy);
``--device-kernels`` runs the torch kernels that any other device runs (``DEVICE_KERNELS_ON_CPU``), and
``--no-validate`` passes ``validate_args=False``. Not collected by pytest; the times depend on the machine and its
load.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections import Counter

import torch

from calib.metrics import streaming
from calib.metrics import (StreamingAccuracy, StreamingAURC, StreamingBrier, StreamingClasswiseECE, StreamingECE,
                           StreamingNLL)

METRICS = {
    "ECE (uniform, bin)": lambda **o: StreamingECE(**o),
    "ECE (quantile)": lambda **o: StreamingECE(binning="quantile", **o),
    "ECE (label)": lambda **o: StreamingECE(estimator="label", **o),
    "classwise ECE (uniform)": lambda **o: StreamingClasswiseECE(**o),
    "classwise ECE (quantile)": lambda **o: StreamingClasswiseECE(binning="quantile", **o),
    "NLL": lambda **o: StreamingNLL(**o),
    "Brier": lambda **o: StreamingBrier(**o),
    "accuracy": lambda **o: StreamingAccuracy(**o),
    "AURC": lambda **o: StreamingAURC(**o),
}
WATCHED = ("cpu", "numpy", "item", "tolist", "__bool__", "__float__", "__int__")


def count_host_calls():
    """Patch the Tensor methods of :data:`WATCHED` to count their calls; returns (counter, undo)."""
    calls = Counter()
    originals = {name: getattr(torch.Tensor, name) for name in WATCHED}

    def wrap(name, original):
        def counted(self, *args, **kwargs):
            calls[name] += 1
            return original(self, *args, **kwargs)
        return counted

    for name, original in originals.items():
        setattr(torch.Tensor, name, wrap(name, original))

    def undo():
        for name, original in originals.items():
            setattr(torch.Tensor, name, original)
    return calls, undo


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=10_000)
    parser.add_argument("--k", type=int, default=100)
    parser.add_argument("--updates", type=int, default=50)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--device-kernels", action="store_true")
    parser.add_argument("--no-validate", action="store_true")
    args = parser.parse_args()
    streaming.DEVICE_KERNELS_ON_CPU = args.device_kernels
    options = {"validate_args": False} if args.no_validate else {}
    gen = torch.Generator().manual_seed(0)
    batches = []
    for _ in range(4):
        probs = torch.softmax(torch.randn(args.batch, args.k, generator=gen) * 2, dim=1).to(args.device)
        batches.append((probs, torch.randint(0, args.k, (args.batch,), generator=gen).to(args.device)))
    sync = torch.cuda.synchronize if args.device.startswith("cuda") else (lambda: None)
    print(f"{'metric':26s} {'host calls / update':40s} ms / update")
    for label, make in METRICS.items():
        metric = make(**options)
        metric.update(*batches[0])                                # warm-up (and the state's creation)
        calls, undo = count_host_calls()
        try:
            metric.update(*batches[1])
        finally:
            undo()
        times = []
        for i in range(args.updates):
            sync()
            start = time.perf_counter()
            metric.update(*batches[i % 4])
            sync()
            times.append(time.perf_counter() - start)
        shown = ", ".join(f"{name} {count}" for name, count in sorted(calls.items())) or "none"
        print(f"{label:26s} {shown:40s} {1e3 * statistics.median(times):8.3f}", flush=True)
        metric.compute()


if __name__ == "__main__":
    main()
