"""Scores of predicted probabilities that need no bins: NLL, Brier score, accuracy, mean confidence and the
Kolmogorov-Smirnov calibration error (Gupta et al. 2021). Inputs and outputs as stated in :mod:`calib.metrics`.
"""

from __future__ import annotations

import numpy as np

from calib._validate import as_probs_labels_top, as_probs_top
from calib.metrics import _binning  # BLOCK_ELEMENTS is read at call time (the tests shrink it)
from calib.metrics._binning import sorted_pairs

__all__ = ["nll", "label_log_probability", "brier", "mean_confidence", "accuracy", "ks_error"]


# ----------------------------------------------------------------------------------------------------------
# proper scores and accuracy
# ----------------------------------------------------------------------------------------------------------

def nll(probs, labels) -> float:
    r"""Negative log-likelihood, :math:`-\frac1N \sum_i \log p_{i, y_i}` (natural log).

    Parameters
    ----------
    probs : array_like or torch.Tensor, shape (N, K)
    labels : array_like or torch.Tensor, shape (N,)

    Returns
    -------
    float

    Raises
    ------
    ValueError
        If a true class has probability exactly 0: the NLL is then infinite. calib neither returns inf
        (a silent non-finite number in a table) nor clips (scikit-learn's ``log_loss`` clips to machine
        epsilon, which silently turns the infinite term into about 36). A 0 usually comes from a float32
        softmax that underflowed: compute the probabilities in float64, compute the NLL from the logits
        with a log-softmax, or clip explicitly if a finite penalty is what you want.
    """
    return float(-np.mean(label_log_probability(probs, labels)))


def label_log_probability(probs, labels) -> np.ndarray:
    r"""Each sample's log-probability of its label, :math:`\log p_{i, y_i}`: a float64 array (N,) whose mean is
    minus :func:`nll`.

    What the NLL reads of each sample: a bootstrap over test samples resamples these values instead of the (N, K)
    probabilities (:func:`calib.stats.kendall_tau_bootstrap`'s ``per_sample``; chapter 11).

    Raises
    ------
    ValueError
        If a true class has probability exactly 0 (its log is -inf), with the fixes :func:`nll` gives.
    """
    p, y, _, _ = as_probs_labels_top(probs, labels, dtype=None)
    py = p[np.arange(p.shape[0]), y].astype(np.float64)
    zero = np.flatnonzero(py == 0)
    if zero.size:
        i = int(zero[0])
        raise ValueError(
            f"probs gives probability 0 to the true class of {zero.size} sample(s) (first: row {i}, label "
            f"{int(y[i])}), so the NLL is infinite. Compute the probabilities in float64 (e.g. "
            f"scipy.special.softmax(logits.astype(np.float64), axis=1)), compute the NLL from the logits with "
            f"a log-softmax, or clip explicitly (np.clip(probs, eps, 1)) if a finite penalty is what you want."
        )
    return np.log(py)


def brier(probs, labels) -> float:
    r"""Multiclass Brier score (Brier 1950): :math:`\frac1N \sum_i \sum_k (p_{ik} - 1[y_i = k])^2`, in [0, 2].

    scikit-learn's ``brier_score_loss`` with a 1-D positive-class probability is the binary Brier score,
    half of this value for K = 2; recent versions (1.7+) also accept (N, K) probabilities and then return
    this multiclass score. The squared distance is summed after subtracting the one-hot target (in row
    blocks), not expanded as :math:`\sum_k p_k^2 - 2 p_y + 1`, which cancels to rounding noise for
    confident correct predictions.

    Parameters
    ----------
    probs : array_like or torch.Tensor, shape (N, K)
    labels : array_like or torch.Tensor, shape (N,)

    Returns
    -------
    float
    """
    p, y, _, _ = as_probs_labels_top(probs, labels, dtype=None)
    n, k = p.shape
    rows = max(1, _binning.BLOCK_ELEMENTS // k)
    total = 0.0
    for s in range(0, n, rows):
        d = p[s:s + rows].astype(np.float64)  # a copy in float64, also of float32 input
        d[np.arange(d.shape[0]), y[s:s + rows]] -= 1.0
        total += float(np.vdot(d, d))
    return total / n


def mean_confidence(probs, labels=None) -> float:
    """Mean top-label confidence, :math:`\\frac1N \\sum_i \\max_k p_{ik}`; with :func:`accuracy`, the over- or
    under-confidence that Zhou et al. (2025) read from their Fig. 3. ``labels``, when given, are checked only.

    Parameters
    ----------
    probs : array_like or torch.Tensor, shape (N, K)
    labels : array_like or torch.Tensor, shape (N,), optional

    Returns
    -------
    float
    """
    if labels is None:
        conf = as_probs_top(probs, dtype=None)[2]
    else:
        conf = as_probs_labels_top(probs, labels, dtype=None)[3]
    return float(conf.mean())


def accuracy(probs, labels) -> float:
    """Share of samples whose argmax equals the label (ties: the first maximum, as ``np.argmax``).

    Parameters
    ----------
    probs : array_like or torch.Tensor, shape (N, K)
    labels : array_like or torch.Tensor, shape (N,)

    Returns
    -------
    float
    """
    _, y, pred, _ = as_probs_labels_top(probs, labels, dtype=None)
    return float(np.mean(pred == y))



# ----------------------------------------------------------------------------------------------------------
# binning-free calibration error
# ----------------------------------------------------------------------------------------------------------

def ks_error(probs, labels) -> float:
    r"""Top-label Kolmogorov-Smirnov calibration error (Gupta et al. 2021, Sec. 4).

    With the samples sorted by top-label confidence :math:`c`, outcome :math:`a_j = 1[\hat y_j = y_j]`:

    .. math:: \mathrm{KS} = \max_i \Big| \frac1N \sum_{j \le i} (a_j - c_j) \Big|,

    the largest distance between the cumulative accuracy and cumulative confidence curves. Ties: the
    partial sums are taken only at the end of each group of equal confidences (the curves are functions
    of the confidence value), so the result does not depend on the order of tied rows. No binning.
    None of torchmetrics, netcal or scikit-learn implements it.

    Parameters
    ----------
    probs : array_like or torch.Tensor, shape (N, K)
    labels : array_like or torch.Tensor, shape (N,)

    Returns
    -------
    float
        In [0, 1].
    """
    _, y, pred, conf = as_probs_labels_top(probs, labels, dtype=None)
    x, hit = sorted_pairs(conf, pred == y)
    n = x.shape[0]
    walk = np.cumsum(hit - x) / n
    ends = np.flatnonzero(np.append(x[1:] != x[:-1], True))
    return float(np.max(np.abs(walk[ends])))
