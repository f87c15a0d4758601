"""The focal family against the official implementations' formulas: forward + backward, one thread, the ratio of
calib's median time to the fastest correct peer's in the same run.

    python tests/benchmarks/losses_focal_family.py [--n 4096] [--k 100] [--rounds 40] [--block 5] [--threads 1]
                                                   [--dtypes float32 bfloat16] [--losses "FLSD-53" ...]

Every entry times ``loss(logits, targets).backward()`` on logits of shape (n, K) that require a gradient (standard
normal times 3, labels uniform; seed 0), in float32 and in bfloat16. calib's losses are the modules the registry
builds (``FocalLoss``, ``FLSD53Loss``, ``DualFocalLoss``, ``InverseFocalLoss``: input checks included, mean over
the batch). The peers are the official formulas, re-implemented below from the released code (a few lines each,
the commits named; ``torch.nn.Module`` classes as in the released code, so that both sides pay a module call; a
mean, as calib's, where the code sums by default):

- focal loss, gamma = 0, 1, 3: torrvision/focal_calibration@6f4c3c7 ``Losses/focal_loss.py``,
  ``-1 * (1 - pt)**gamma * logpt`` with ``logpt = log_softmax(z).gather(1, y)``, ``pt = logpt.exp()``; at gamma = 0
  ``torch.nn.CrossEntropyLoss`` too;
- FLSD-53: han678/CalibWeightedRisk@9860274 ``loss/focal.py`` with ``gamma=None``, the one-line
  ``torch.where(pt < 0.2, 5.0, 3.0)`` (the official torrvision loop, one ``.item()`` a sample, is
  ``tests/benchmarks/losses.py``'s second table);
- dual focal loss, gamma = 2: Linwei94/ICML2023-DualFocalLoss@7adf771 ``dual_focal_loss.py``;
- inverse focal loss, gamma = 2: han678/CalibWeightedRisk@9860274 ``loss/inverse_focal.py`` (``pt`` clamped to
  [1e-9, 1 - 1e-9]).

In bfloat16 a peer runs twice: on the bfloat16 logits as given (its log-softmax then keeps about 3 digits, so it
is not a correct peer) and on ``logits.float()`` (correct, what calib computes); the ratio is against the faster
*correct* one, and the bfloat16-as-given time is printed beside it. Each peer's value is checked against calib's
(float64 relative difference below 1e-5 in float32), so that a ratio never compares different losses.

Each entry is timed in blocks of ``--block`` runs (CPU time of the process, so that a suspension by the scheduler
does not count); every round times each entry of a loss once, in alternating order, so that a change in machine
load hits calib and its peers alike. The ratio is the median over rounds of calib's block over the fastest
correct peer's block of the same round, printed with its interquartile range (on a loaded machine the
spread of one entry's blocks is far wider than the spread of the paired ratios). Not collected by pytest; the
numbers depend on the machine.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.nn.functional as F

from calib.losses import DualFocalLoss, FLSD53Loss, FocalLoss, InverseFocalLoss


# ------------------------------------------------------------------ the official formulas, re-implemented
# Each is an nn.Module, as in its repository (so that both sides pay a module call), with a mean where the code
# sums by default; the forward is the released lines.

class OfficialFocal(torch.nn.Module):
    """torrvision/focal_calibration@6f4c3c7, Losses/focal_loss.py, FocalLoss (size_average=True: the mean)."""

    def __init__(self, gamma):
        super().__init__()
        self.gamma = gamma

    def forward(self, z, y):
        logpt = F.log_softmax(z, dim=1).gather(1, y.view(-1, 1)).view(-1)
        pt = logpt.exp()
        return (-1 * (1 - pt) ** self.gamma * logpt).mean()


class OfficialFLSD53(torch.nn.Module):
    """han678/CalibWeightedRisk@9860274, loss/focal.py, FocalLoss(gamma=None): FLSD-53 in one line."""

    def forward(self, z, y):
        logpt = F.log_softmax(z, dim=1).gather(1, y.view(-1, 1)).view(-1)
        pt = logpt.exp()
        gamma = torch.where(pt < 0.2, torch.tensor(5.0, device=pt.device), torch.tensor(3.0, device=pt.device))
        return (-1 * (1 - pt) ** gamma * logpt).mean()


class OfficialDual(torch.nn.Module):
    """Linwei94/ICML2023-DualFocalLoss@7adf771, dual_focal_loss.py, DualFocalLoss (size_average=True)."""

    def __init__(self, gamma):
        super().__init__()
        self.gamma = gamma

    def forward(self, z, y):
        logp_k = F.log_softmax(z, dim=1)
        softmax_logits = logp_k.exp()
        logp_k = logp_k.gather(1, y.view(-1, 1)).view(-1)
        p_k = logp_k.exp()
        p_j_mask = torch.lt(softmax_logits, p_k.reshape(p_k.shape[0], 1)) * 1
        p_j = torch.topk(p_j_mask * softmax_logits, 1)[0].squeeze()
        return (-1 * (1 - p_k + p_j) ** self.gamma * logp_k).mean()


class OfficialInverse(torch.nn.Module):
    """han678/CalibWeightedRisk@9860274, loss/inverse_focal.py, InverseFocalLoss (reduction='mean')."""

    def __init__(self, gamma):
        super().__init__()
        self.gamma = gamma

    def forward(self, z, y):
        logpt = F.log_softmax(z, dim=1).gather(1, y.view(-1, 1)).view(-1)
        pt = torch.clamp(logpt.exp(), min=1e-9, max=1 - 1e-9)
        return (-1 * (1 + pt) ** self.gamma * logpt).mean()


class AsFloat32(torch.nn.Module):
    """A peer run on ``logits.float()`` (the gradient flows back to the bfloat16 logits through the cast)."""

    def __init__(self, peer):
        super().__init__()
        self.peer = peer

    def forward(self, z, y):
        return self.peer(z.float(), y)


def cases():
    """(label, calib's loss, {peer label: peer}) for every loss of the family benchmarked."""
    return [
        ("focal, gamma = 0", FocalLoss(0.0), {"official": OfficialFocal(0.0),
                                              "torch.nn.CrossEntropyLoss": torch.nn.CrossEntropyLoss()}),
        ("focal, gamma = 1", FocalLoss(1.0), {"official": OfficialFocal(1.0)}),
        ("focal, gamma = 3", FocalLoss(3.0), {"official": OfficialFocal(3.0)}),
        ("FLSD-53", FLSD53Loss(), {"torch.where one-liner": OfficialFLSD53()}),
        ("dual focal, gamma = 2", DualFocalLoss(2.0), {"official": OfficialDual(2.0)}),
        ("inverse focal, gamma = 2", InverseFocalLoss(2.0), {"official": OfficialInverse(2.0)}),
    ]


def block_time(fn, z, y, n):
    """CPU seconds of one forward + backward of ``fn``, the mean of ``n`` in a row (process time: a run that
    the scheduler suspends does not count the suspension)."""
    t0 = time.process_time()
    for _ in range(n):
        zg = z.detach().requires_grad_(True)
        fn(zg, y).backward()
    return (time.process_time() - t0) / n


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=4096)
    parser.add_argument("--k", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=40, help="alternating rounds (each times every entry once)")
    parser.add_argument("--block", type=int, default=5, help="forward + backward runs per timed block")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--dtypes", nargs="+", default=["float32", "bfloat16"])
    parser.add_argument("--losses", nargs="*", default=None, help="labels to run (default: all)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    gen = torch.Generator().manual_seed(0)
    z32 = torch.randn(args.n, args.k, generator=gen) * 3
    y = torch.randint(0, args.k, (args.n,), generator=gen)
    print(f"forward + backward, {args.n} x {args.k} logits, {torch.get_num_threads()} thread(s), torch "
          f"{torch.__version__}; {args.rounds} rounds of blocks of {args.block} runs, entries alternated")
    print("ms: the median block (CPU ms a run); ratio: the median over rounds of calib's block over the peer's "
          "block of the same round, with its interquartile range")
    for dtype_name in args.dtypes:
        dtype = getattr(torch, dtype_name)
        z = z32.to(dtype)
        print(f"\n{dtype_name} logits")
        print(f"{'loss':<26}{'calib ms':>9}  {'fastest correct peer':<36}{'peer ms':>8}{'ratio':>7}  "
              f"{'IQR':<14} others")
        for label, ours, peers in cases():
            if args.losses and label not in args.losses:
                continue
            entries = {"calib": ours}
            for name, fn in peers.items():
                if dtype == torch.float32:
                    entries[name] = fn
                else:
                    entries[name + " (bf16 as given)"] = fn
                    entries[name + " (on .float())"] = AsFloat32(fn)
            value = float(ours(z, y))
            for name, fn in entries.items():    # a ratio compares the same loss: the correct peers' values agree
                if "as given" not in name:
                    got = float(fn(z, y))
                    assert abs(got - value) <= 1e-5 * abs(value), (label, name, got, value)
            for fn in entries.values():         # warm-up
                block_time(fn, z, y, 2)
            times = {name: [] for name in entries}
            for r in range(args.rounds):
                order = list(entries) if r % 2 == 0 else list(reversed(entries))
                for name in order:
                    times[name].append(block_time(entries[name], z, y, args.block))
            med = {name: statistics.median(v) for name, v in times.items()}
            correct = [name for name in entries if name != "calib" and "as given" not in name]
            best = min(correct, key=lambda name: med[name])
            ratios = [a / b for a, b in zip(times["calib"], times[best])]
            q1, _, q3 = statistics.quantiles(ratios, n=4)
            others = [f"{name} {1e3 * med[name]:.2f}" for name in entries if name not in ("calib", best)]
            print(f"{label:<26}{1e3 * med['calib']:>9.2f}  {best:<36}{1e3 * med[best]:>8.2f}"
                  f"{statistics.median(ratios):>7.2f}  [{q1:.2f}, {q3:.2f}]  {'; '.join(others)}")


if __name__ == "__main__":
    main()
