"""The focal family under ``torch.compile`` (inductor) against eager: graph breaks, the largest difference of the
value and of the gradient, and the time of the first (compiling) and of a later call.

    python tests/benchmarks/compiled_losses.py [--n 256] [--k 10] [--device cpu] [--losses fl-3 dual-fl-2 ...]

For every loss (the registry's focal names, with torch's defaults, then with class weights and ignored targets),
in float32 and bfloat16 logits: the count of graph breaks (``torch._dynamo.explain``, and those of the inductor
compilation: a backend that fails on an operation breaks the graph there too), and the compiled loss (inductor)
against the eager one on the same batch. The suite checks the graph breaks and the aot_eager backend
(``tests/losses/test_compile.py``); inductor compiles C++ (about a minute for the first loss on a loaded 2-core
machine), too slow for it. Not collected by pytest; the times depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import time

import torch

from calib.losses import EpochScheduledFocalLoss, get_loss

NAMES = ("fl-3", "fl-0.5", "flsd-53", "flsd-532", "flsc-531", "inverse-fl-2", "dual-fl-2")


def build(name: str, weight=None, ignore_index: int = -100):
    """The registry's loss ``name``, built again with class weights and ``ignore_index``."""
    loss = get_loss(name)
    if isinstance(loss, EpochScheduledFocalLoss):
        fresh = EpochScheduledFocalLoss(loss.gammas, loss.boundaries, loss.reference_epochs, loss.__name__,
                                        weight=weight, ignore_index=ignore_index)
        fresh.set_epoch(120, 350)
        return fresh
    if hasattr(loss, "gamma"):
        return type(loss)(loss.gamma, weight=weight, ignore_index=ignore_index)
    if type(loss).__name__ == "FLSD53Loss":
        return type(loss)(weight=weight, ignore_index=ignore_index)
    return type(loss)(loss.schedule, weight=weight, ignore_index=ignore_index)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=256)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--losses", nargs="*", default=NAMES)
    args = parser.parse_args()
    gen = torch.Generator().manual_seed(0)
    z0 = (torch.randn(args.n, args.k, generator=gen) * 3).to(args.device)
    y = torch.randint(0, args.k, (args.n,), generator=gen).to(args.device)
    ignored = y.clone()
    ignored[::7] = -100
    weight = (torch.rand(args.k, generator=gen) + 0.5).to(args.device)
    print(f"{'loss':14s} {'options':18s} {'dtype':9s} breaks (explain, inductor)  |value diff|  |grad diff|   "
          f"first s  later s")
    worst = {}
    for name in args.losses:
        for label, options, targets in (("defaults", {}, y), ("weight, ignored", {"weight": weight}, ignored)):
            for dtype in (torch.float32, torch.bfloat16):
                loss = build(name, **options).to(args.device)
                z = z0.to(dtype)
                torch._dynamo.reset()
                breaks = torch._dynamo.explain(loss)(z, targets).graph_break_count
                torch._dynamo.reset()
                torch._dynamo.utils.counters.clear()
                compiled = torch.compile(loss)
                eager_z, compiled_z = z.clone().requires_grad_(True), z.clone().requires_grad_(True)
                eager = loss(eager_z, targets)
                eager.backward()
                start = time.perf_counter()
                value = compiled(compiled_z, targets)
                value.backward()
                first = time.perf_counter() - start
                start = time.perf_counter()
                compiled(z.clone().requires_grad_(True), targets).backward()
                later = time.perf_counter() - start
                inductor_breaks = sum(torch._dynamo.utils.counters["graph_break"].values())
                dv = float((value - eager).detach().abs())
                dg = float((compiled_z.grad.float() - eager_z.grad.float()).abs().max())
                key = str(dtype).replace("torch.", "")
                seen = worst.get(key, (0.0, 0.0))
                worst[key] = (max(seen[0], dv), max(seen[1], dg))
                print(f"{name:14s} {label:18s} {key:9s} {breaks:14d} {inductor_breaks:9d}  {dv:11.2e}  {dg:11.2e}  "
                      f"{first:8.1f} {later:8.3f}", flush=True)
    for key, (dv, dg) in worst.items():
        print(f"largest |compiled - eager| in {key}: value {dv:.2e}, gradient {dg:.2e}")


if __name__ == "__main__":
    main()
