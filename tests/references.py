"""Reference computations and test data shared by several test files (brute-force loops, seeded batches)."""

import math

import numpy as np
import torch


def batch(n=64, k=5, scale=3.0, seed=0, dtype=torch.float64):
    gen = torch.Generator().manual_seed(seed)
    logits = torch.randn(n, k, generator=gen, dtype=dtype) * scale
    targets = torch.randint(0, k, (n,), generator=gen)
    return logits, targets


def calibration_batch(n=200, k=10, scale=3.0, seed=0, dtype=torch.float64, frac_correct=0.6):
    gen = torch.Generator().manual_seed(seed)
    logits = torch.randn(n, k, generator=gen, dtype=dtype) * scale
    targets = torch.randint(0, k, (n,), generator=gen)
    m = int(frac_correct * n)
    targets[:m] = logits[:m].argmax(1)
    return logits, targets


def probs_of(logits):
    z = logits.double().numpy()
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def entropy(p):
    return -(p * np.log(p)).sum(1)


def brute_membership(c, m, t):
    """u_j(c) for one confidence, one bin at a time (max subtracted before exp)."""
    g = [-(c - (j + 0.5) / m) ** 2 / t for j in range(m)]
    top = max(g)
    e = [math.exp(x - top) for x in g]
    return [x / sum(e) for x in e]


def brute_sbece(conf, correct, m, t, p, estimator):
    """Eqs. 8-12 as printed (corrected indices), with Python loops over samples and bins."""
    n = len(conf)
    u = [brute_membership(c, m, t) for c in conf]
    S = [sum(u[i][j] for i in range(n)) for j in range(m)]
    C = [sum(u[i][j] * conf[i] for i in range(n)) / S[j] for j in range(m)]
    A = [sum(u[i][j] * correct[i] for i in range(n)) / S[j] for j in range(m)]
    if estimator == "bin":
        total = sum(S[j] / n * abs(A[j] - C[j]) ** p for j in range(m))
    else:
        total = sum(u[i][j] * abs(A[j] - conf[i]) ** p for i in range(n) for j in range(m)) / n
    return total ** (1 / p)


class BlockEqualMassECE:
    """calib.experiments._EqualMassECE as it was first written (one pass over all resamples, float64 counts): the
    straightforward version its faster one must equal to the last bit, and the baseline of
    tests/benchmarks/grid_statistics.py."""

    def __init__(self, conf: np.ndarray, correct: np.ndarray, n_bins: int, norm: str):
        order = np.argsort(conf, kind="stable")
        x = np.asarray(conf, dtype=np.float64)[order] + 0.0
        n = x.size
        new = np.empty(n, dtype=bool)
        new[0] = True
        np.not_equal(x[1:], x[:-1], out=new[1:])
        starts = np.flatnonzero(new)
        group = np.cumsum(new) - 1                      # each sorted sample's group of equal confidences
        self._block = next((b for b in range(128, 31, -1) if n % b == 0), 128)
        pad = -n % self._block                          # samples of zero weight that close the last block
        self._order, self.n, self._n_bins, self._norm = order, n, n_bins, norm
        self._x = np.concatenate([x, np.full(pad, x[-1])]).reshape(-1, self._block)
        self._flag = np.concatenate([np.asarray(correct, dtype=np.float64)[order], np.zeros(pad)]).reshape(
            -1, self._block)
        self._first = starts[group]                     # the first and last sample of each sample's group
        self._last = np.append(starts[1:], n)[group] - 1
        self.value = float(self.resampled(np.ones((1, n)))[0])

    def resampled(self, counts: np.ndarray) -> np.ndarray:
        """The metric at each row of ``counts`` (B, N)."""
        counts = np.asarray(counts, dtype=np.float64)
        rows, n = counts.shape
        totals = counts.sum(axis=1)
        total = int(round(totals[0]))
        if n != self.n or not np.all(totals == total) or total < 1:
            raise ValueError(f"counts must be bootstrap counts of the {self.n} test samples: whole numbers with one "
                             "positive total per resample.")
        sizes = np.full(self._n_bins, total // self._n_bins)
        sizes[:total % self._n_bins] += 1               # np.array_split's bin sizes
        cuts = np.cumsum(sizes).astype(np.float64)
        width, blocks = self._block, self._x.shape[0]
        drawn = np.take(counts, self._order, axis=1)     # (np.take: a third of fancy indexing's time here)
        if blocks * width > n:
            drawn = np.concatenate([drawn, np.zeros((rows, blocks * width - n))], axis=1)
        drawn = drawn.reshape(rows, blocks, width)
        # cumulative count, confidence and hits at the end of each block (0 before the first)
        ends = [np.concatenate([np.zeros((rows, 1)), np.cumsum(s, axis=1)], axis=1) for s in
                (drawn.sum(axis=2), np.einsum("rbw,bw->rb", drawn, self._x),
                 np.einsum("rbw,bw->rb", drawn, self._flag))]
        row = np.arange(rows)[:, None]
        lanes = np.arange(width)

        def prefix(q):
            """Count, confidence and hits of the first q + 1 sorted samples (q >= -1), per resample and cut."""
            q = np.asarray(q)
            block, lane = np.maximum(q, 0) // width, np.maximum(q, 0) % width
            part = drawn[row, block] * (lanes <= lane[..., None])
            out = [ends[0][row, block] + part.sum(axis=2),
                   ends[1][row, block] + np.einsum("rcw,rcw->rc", part, self._x[block]),
                   ends[2][row, block] + np.einsum("rcw,rcw->rc", part, self._flag[block])]
            return [np.where(q >= 0, v, 0.0) for v in out]

        # the block, then the sample, holding each cut's last position
        shift = np.arange(rows)[:, None] * float(total + 1)
        block = np.searchsorted((ends[0][:, 1:] + shift).ravel(), (cuts[None, :] + shift).ravel(), side="left")
        block = np.minimum(block.reshape(rows, -1) - np.arange(rows)[:, None] * blocks, blocks - 1)
        within = np.cumsum(drawn[row, block], axis=2) + ends[0][row, block][..., None]
        j = np.minimum(block * width + (within < cuts[None, :, None]).sum(axis=2), n - 1)
        n_before, conf_before, hits_before = prefix(self._first[j] - 1)
        n_last, _, hits_last = prefix(self._last[j])
        in_group = n_last - n_before
        taken = cuts[None, :] - n_before                 # the group's drawn samples up to the cut
        conf_to = conf_before + taken * self._x.ravel()[j]
        hits_to = hits_before + taken * (hits_last - hits_before) / np.where(in_group > 0, in_group, 1.0)
        full = sizes > 0
        diff = (np.diff(hits_to, axis=1, prepend=0.0) - np.diff(conf_to, axis=1, prepend=0.0))[:, full]
        if self._norm == "l1":
            return np.abs(diff).sum(axis=1) / total
        return np.sqrt((diff ** 2 / sizes[full]).sum(axis=1) / total)


def kendall_bootstrap_taus(reference, probs, labels, metric, n_resamples, seed=0):
    """The resampled taus of calib.stats.kendall_tau_bootstrap as it was first written: one resample at a time,
    scipy's tau-b of each (0 where undefined). The straightforward version the vectorised one must equal."""
    from scipy import stats as scipy_stats

    items = list(reference)
    ref = np.array([reference[k] for k in items], dtype=np.float64)
    stacks = [np.asarray(probs[k], dtype=np.float64) for k in items]
    n_seeds, n = stacks[0].shape[:2]
    rng = np.random.default_rng(seed)
    taus = np.empty(n_resamples)
    for r in range(n_resamples):
        idx, seeds = rng.integers(0, n, n), rng.integers(0, n_seeds, n_seeds)
        cache, values = {}, []
        for stack in stacks:
            for s in np.unique(seeds):
                cache[s] = metric(stack[s].take(idx, axis=0), labels.take(idx))
            values.append(np.mean([cache[s] for s in seeds]))
        tau = scipy_stats.kendalltau(ref, np.array(values)).statistic
        taus[r] = float(tau) if np.isfinite(tau) else 0.0
    return taus
