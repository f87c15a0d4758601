"""Forward + backward time of the secondary calibration losses next to cross-entropy, batch 512 and 1024, K = 100.

    python tests/benchmarks/losses.py [--batches 512 1024] [--k 100] [--repeats 20] [--threads N] [--device cpu]

Each entry times ``loss(logits, targets).backward()`` on float32 logits of shape (batch, K) that require a
gradient (standard normal times 3, labels uniform; seed 0): the loss alone, without a network, so that the
table shows what a secondary loss adds to a training step on top of the primary loss. Entries:

- cross-entropy (``calib.losses.cross_entropy``), the reference;
- torch's ``F.cross_entropy`` alone and ``get_loss("ce")`` (a module): the difference to the reference is what
  calib's input checks (shapes, target range, finite logits: one ``amax`` per row on CPU tensors, none on
  CUDA, where it would cost a host synchronisation per step) and the module call cost a training step;
- SB-ECE_bin,2 and SB-ECE_lb,2 (M = 15, T = 0.01): O(N M) memberships;
- S-AvUC (kappa = 0.5, T = 0.1): O(N K), an entropy per sample;
- AvUC (kappa = log(K) / 2): O(N K);
- MMCE_m and MMCE_w (Laplacian kernel, width 0.4): an N x N kernel matrix, so quadratic in the batch size;
- cross-entropy + 0.5 SB-ECE_lb,2 (``get_loss("ce", secondary="sb-ece", secondary_weight=0.5)``), what a
  training step computes.

A second table times FLSD-53 (``get_loss("flsd-53")``, one ``torch.bucketize`` for the per-sample gamma)
against the official per-sample Python loop of torrvision/focal_calibration, batch 1024 and 100 classes, in
the same run, and checks that the two give equal losses and gradients (the official loss is a sum, calib's a
mean, so calib's is multiplied by the batch size).

Times are the median of ``--repeats`` runs after two warm-up runs (time.perf_counter; on CUDA each run is
synchronised); the repeats of all entries are interleaved, so that a change in machine load hits every
entry alike. The last columns are the ratio to cross-entropy at the same batch size and, per entry, the
ratio of its time at the largest to the smallest batch (2 for linear cost, 4 for quadratic when the
batch doubles). Not collected by pytest; the numbers depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.nn.functional as F

from calib.losses import avuc, cross_entropy, get_loss, mmce, s_avuc, soft_binned_ece_loss


def entries(k: int):
    return [
        ("cross-entropy", cross_entropy),
        ("torch F.cross_entropy, unchecked", F.cross_entropy),
        ('get_loss("ce"), a module', get_loss("ce")),
        ("SB-ECE_bin,2 (M=15, T=0.01)", lambda z, y: soft_binned_ece_loss(z, y, 15, 0.01, "l2", "bin")),
        ("SB-ECE_lb,2 (M=15, T=0.01)", lambda z, y: soft_binned_ece_loss(z, y, 15, 0.01, "l2", "label")),
        ("S-AvUC (kappa=0.5, T=0.1)", lambda z, y: s_avuc(z, y, 0.5, 0.1)),
        ("AvUC (kappa=log(K)/2)", lambda z, y: avuc(z, y, 0.5 * torch.log(torch.tensor(float(k))).item())),
        ("MMCE_m (width 0.4)", lambda z, y: mmce(z, y)),
        ("MMCE_w (width 0.4)", lambda z, y: mmce(z, y, weighted=True)),
        ("CE + 0.5 SB-ECE_lb,2", get_loss("ce", secondary="sb-ece", secondary_weight=0.5)),
    ]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, nargs="+", default=[512, 1024])
    parser.add_argument("--k", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: torch's)")
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    gen = torch.Generator().manual_seed(0)
    data = {}
    for n in args.batches:
        z = (torch.randn(n, args.k, generator=gen) * 3).to(device)
        y = torch.randint(0, args.k, (n,), generator=gen).to(device)
        data[n] = (z, y)
    table = entries(args.k)
    times = {(name, n): [] for name, _ in table for n in args.batches}

    def run(fn, n):
        z, y = data[n]
        zg = z.detach().requires_grad_(True)
        sync()
        t0 = time.perf_counter()
        fn(zg, y).backward()
        sync()
        return time.perf_counter() - t0

    for _ in range(2):  # warm-up
        for name, fn in table:
            for n in args.batches:
                run(fn, n)
    for _ in range(args.repeats):
        for name, fn in table:
            for n in args.batches:
                times[name, n].append(run(fn, n))

    med = {key: statistics.median(v) for key, v in times.items()}
    lo, hi = min(args.batches), max(args.batches)
    print(f"forward + backward, float32 logits ({', '.join(map(str, args.batches))}) x {args.k}, device {device}, "
          f"{torch.get_num_threads()} threads, torch {torch.__version__}; median of {args.repeats}")
    head = f"{'loss':<30}" + "".join(f"{f'ms @ {n}':>11}{'x CE':>7}" for n in args.batches)
    head += f"{f'  time {hi}/{lo}':>14}" if hi != lo else ""
    print(head)
    for name, _ in table:
        row = f"{name:<30}"
        for n in args.batches:
            row += f"{1e3 * med[name, n]:>11.3f}{med[name, n] / med['cross-entropy', n]:>7.1f}"
        if hi != lo:
            row += f"{med[name, hi] / med[name, lo]:>14.2f}"
        print(row)


# ---------------------------------------------------------------------------------------------------------
# FLSD-53 (Mukhoti et al. 2020): calib's vectorised sample-dependent gamma against the official per-sample
# loop (torrvision/focal_calibration Losses/focal_loss_adaptive_gamma.py, which picks each gamma with .item()
# in a Python loop over the batch and sums the loss), in the same run, on the same logits.
# ---------------------------------------------------------------------------------------------------------

def official_flsd53(logits, target, gamma_high=3.0):
    """FocalLossAdaptive.forward of the official code (ps = [0.2, 0.5], gammas = [5, 3], --gamma 3), summed."""
    logpt = torch.nn.functional.log_softmax(logits, dim=1).gather(1, target.view(-1, 1)).view(-1)
    pt = logpt.exp()
    gamma_list = []
    for i in range(pt.shape[0]):
        p = pt[i].item()
        if p >= 0.5:
            gamma_list.append(gamma_high)
            continue
        for key, gamma in ((0.2, 5.0), (0.5, 3.0)):
            if p < key:
                gamma_list.append(gamma)
                break
    gamma = torch.tensor(gamma_list).to(logits.device)
    return (-1 * (1 - pt) ** gamma * logpt).sum()


def flsd53_comparison(n: int = 1024, k: int = 100, repeats: int = 20, device: str = "cpu"):
    """Forward + backward of FLSD-53, vectorised (calib) vs the official per-sample loop; equal values."""
    dev = torch.device(device)
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    gen = torch.Generator().manual_seed(1)
    z = (torch.randn(n, k, generator=gen) * 3).to(dev)
    y = torch.randint(0, k, (n,), generator=gen).to(dev)
    ours = get_loss("flsd-53")
    fns = {"calib flsd-53 (vectorised, x N)": lambda zg: ours(zg, y) * n,
           "official per-sample loop (sum)": lambda zg: official_flsd53(zg, y)}
    values, grads, times = {}, {}, {name: [] for name in fns}
    for rep in range(repeats + 2):
        for name, fn in fns.items():
            zg = z.detach().requires_grad_(True)
            sync()
            t0 = time.perf_counter()
            value = fn(zg)
            value.backward()
            sync()
            if rep >= 2:
                times[name].append(time.perf_counter() - t0)
            values[name], grads[name] = value.item(), zg.grad
    (a, b) = fns
    med = {name: statistics.median(v) for name, v in times.items()}
    print(f"\nFLSD-53 forward + backward, batch {n} x {k} classes, float32, device {dev}; median of {repeats}")
    for name in fns:
        print(f"{name:<34}{1e3 * med[name]:>10.3f} ms   loss {values[name]:.6f}")
    print(f"speed-up {med[b] / med[a]:.1f}x; |loss difference| {abs(values[a] - values[b]):.2e}, "
          f"max |gradient difference| {(grads[a] - grads[b]).abs().max().item():.2e}")
    torch.testing.assert_close(grads[a], grads[b], rtol=1e-5, atol=1e-6)
    assert abs(values[a] - values[b]) <= 1e-5 * abs(values[b])


if __name__ == "__main__":
    main()
    flsd53_comparison()
