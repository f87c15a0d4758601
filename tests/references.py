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
