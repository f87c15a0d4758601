"""Selective-classification metrics: confidence score functions, the risk-coverage curve and its area (AURC),
after Geifman et al. (2019) and Zhou et al. (2025). Inputs and outputs as stated in :mod:`calib.metrics`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from calib._validate import as_float_array, as_probs_labels_top, as_probs_top, check_choice, check_int, check_length

__all__ = ["CSFS", "confidence_range", "confidence_score", "RiskCoverage", "risk_coverage_curve", "aurc"]


# ----------------------------------------------------------------------------------------------------------
# selective classification: confidence score functions and the risk-coverage curve (Zhou et al. 2025)
# ----------------------------------------------------------------------------------------------------------

#: The confidence score functions (CSFs) of :func:`confidence_score`. The first three are Zhou et al. (2025),
#: App. Table 1 (negative entropy written correctly, on probabilities); "neg_gini" is the negative Gini
#: impurity of the anchor code (han678/AsymptoticAURC).
CSFS = ("msp", "margin", "negative_entropy", "neg_gini")


def _csf(p: np.ndarray, kind: str, conf: np.ndarray) -> np.ndarray:
    """The CSF ``kind`` of checked float64 probabilities ``p`` whose row maxima are ``conf``."""
    if kind == "msp":
        return conf.copy()
    if kind == "margin":
        if p.shape[1] == 2:
            return np.abs(p[:, 0] - p[:, 1])
        top2 = -np.partition(-p, 1, axis=1)[:, :2]
        return top2[:, 0] - top2[:, 1]
    if kind == "negative_entropy":
        logp = np.zeros_like(p)
        np.log(p, out=logp, where=p > 0)  # 0 log 0 = 0
        return np.einsum("nk,nk->n", p, logp)
    return np.einsum("nk,nk->n", p, p) - 1.0  # neg_gini


def confidence_range(kind: str, n_classes: int) -> tuple[float, float]:
    """The range [lo, hi] that the CSF ``kind`` takes on the simplex with ``n_classes`` classes.

    MSP: [1/K, 1]; margin: [0, 1]; negative entropy: [-ln K, 0]; negative Gini impurity: [1/K - 1, 0]. Zhou et
    al. (2025) do not state the bin edges of their smoothed CDF (Eqs. 13-15) for any CSF; equal-width bins on
    this range are the book's choice (:func:`calib.losses.batch.au_weights`).
    """
    check_choice(kind, "kind", CSFS)
    k = check_int(n_classes, "n_classes", minimum=2)
    return {"msp": (1.0 / k, 1.0), "margin": (0.0, 1.0), "negative_entropy": (-float(np.log(k)), 0.0),
            "neg_gini": (1.0 / k - 1.0, 0.0)}[kind]


def confidence_score(probs, kind: str = "msp") -> np.ndarray:
    r"""A confidence score function (CSF) g(p) of each row of ``probs``: higher means more confident.

    Zhou et al. (2025), App. Table 1, with the negative entropy corrected:

    - ``"msp"``, maximum softmax probability (Hendrycks & Gimpel): :math:`g(\mathbf p) = \max_i p_i`, in [1/K, 1];
    - ``"margin"``, softmax margin: :math:`g(\mathbf p) = p_{(1)} - p_{(2)}`, the largest minus the second
      largest probability, in [0, 1];
    - ``"negative_entropy"``: :math:`g(\mathbf p) = \sum_i p_i \log p_i` (with :math:`0 \log 0 = 0`), in
      :math:`[-\ln K, 0]`. The paper's table writes :math:`\sum_i z_i \log z_i` on the *logits* z, which is
      undefined for a negative logit (NaN for z = (2, -1, 0.5)); its citation (Liu et al. 2020) is the
      energy score :math:`T \log \sum_i e^{z_i / T}`, a different CSF.
    - ``"neg_gini"``, negative Gini impurity: :math:`g(\mathbf p) = \sum_i p_i^2 - 1`, in [1/K - 1, 0].

    Parameters
    ----------
    probs : array_like or torch.Tensor, shape (N, K)
        Rows on the simplex.
    kind : {"msp", "margin", "negative_entropy", "neg_gini"}, default "msp"

    Returns
    -------
    numpy.ndarray of float64, shape (N,)
    """
    check_choice(kind, "kind", CSFS)
    p, _, conf = as_probs_top(probs, dtype=None)
    return _csf(p.astype(np.float64, copy=False), kind, conf)


@dataclass(frozen=True)
class RiskCoverage:
    """The empirical risk-coverage curve of a selective classifier (see :func:`risk_coverage_curve`).

    Attributes
    ----------
    coverage : ndarray, shape (N,)
        i / N for i = 1..N: the share of samples accepted.
    risk : ndarray, shape (N,)
        The selective risk at that coverage (Zhou et al. 2025, Eq. 5, empirical): the mean loss of the i
        most confident samples, tied samples counting with their group's mean loss.
    threshold : ndarray, shape (N,)
        The i-th largest confidence, the threshold tau that accepts them (Eq. 4: accept if g(x) >= tau).
    weights : ndarray, shape (N,)
        The AURC weight of each sample, in the input order: :math:`H_N - H_{r_i - 1}` for descending rank
        :math:`r_i`, averaged over a group of tied confidences, so that ``mean(weights * loss) == mean(risk)``
        (the reweighted-risk form of the AURC). The weights average to 1.
    """

    coverage: np.ndarray
    risk: np.ndarray
    threshold: np.ndarray
    weights: np.ndarray


def risk_coverage_curve(probs, labels, confidence=None, loss=None) -> RiskCoverage:
    r"""The selective risk at every coverage i/N, sorting by a confidence score (Geifman et al. 2019).

    Parameters and tie rule as :func:`aurc` (whose value is ``risk.mean()``): samples are sorted by
    confidence, highest first, and each group of equal confidences contributes its mean loss at every
    position it occupies, which is the curve averaged over the orders of the tied samples.

    Parameters
    ----------
    probs : array_like or torch.Tensor, shape (N, K)
    labels : array_like or torch.Tensor, shape (N,)
    confidence : str, array_like or torch.Tensor of shape (N,), optional
        A CSF name from :data:`CSFS` or the scores; default MSP.
    loss : array_like or torch.Tensor, shape (N,), optional
        Per-sample loss; default the 0/1 error of the argmax.

    Returns
    -------
    RiskCoverage

    Notes
    -----
    The weights come from the identity :math:`\frac1N\sum_{i}\frac1i\sum_{j\le i}\ell_{(j)} =
    \frac1N\sum_j \ell_{(j)} \sum_{i \ge j} \frac1i` (exchange the sums), which is exact for every N; the
    :math:`-\ln(1 - G)` weight of Zhou et al. (2025, Def. 3.3) is its large-N limit. One sort, O(N log N).
    """
    coverage, risk, threshold, weights = _selective(probs, labels, confidence, loss, with_weights=True)
    arrays = [coverage, risk, threshold, weights]
    for a in arrays:
        a.flags.writeable = False
    return RiskCoverage(*arrays)


def _selective(probs, labels, confidence, loss, with_weights: bool):
    """Coverage, selective risk, thresholds and (optionally) AURC weights; see :func:`risk_coverage_curve`."""
    p, y, pred, conf = as_probs_labels_top(probs, labels, dtype=None)
    n = conf.shape[0]
    if confidence is None:
        score = conf
    elif isinstance(confidence, str):
        check_choice(confidence, "confidence", CSFS)
        score = _csf(p.astype(np.float64, copy=False), confidence, conf)
    else:
        score = as_float_array(confidence, "confidence", ndim=1)
        check_length(score, n, "confidence")
    if loss is None:
        ell = (pred != y).astype(np.float64)
    else:
        ell = as_float_array(loss, "loss", ndim=1)
        check_length(ell, n, "loss")
    order = np.argsort(score)[::-1]  # any order inside a tie: tied losses are replaced by their mean
    s, ell = score[order], ell[order]
    starts = np.flatnonzero(np.concatenate([[True], s[1:] != s[:-1]]))
    sizes = np.diff(np.append(starts, n))
    ell = np.repeat(np.add.reduceat(ell, starts) / sizes, sizes)
    positions = np.arange(1, n + 1)
    risk = np.cumsum(ell) / positions
    if not with_weights:
        return None, risk, None, None
    tail = np.cumsum((1.0 / positions)[::-1])[::-1]  # H_N - H_{r-1} at descending rank r
    tail = np.repeat(np.add.reduceat(tail, starts) / sizes, sizes)
    weights = np.empty(n)
    weights[order] = tail
    return positions / n, risk, s, weights



def aurc(probs, labels, confidence=None, loss=None) -> float:
    r"""Area under the risk-coverage curve (Geifman et al. 2019; Zhou et al. 2025, Def. 3.3).

    Samples are sorted by confidence, highest first; the selective risk at coverage i/N is the mean loss
    of the first i, and the AURC is their mean:

    .. math:: \mathrm{AURC} = \frac1N \sum_{i=1}^N \frac1i \sum_{j \le i} \ell_{(j)}
              = \frac1N \sum_i \ell_i (H_N - H_{r_i - 1}),

    where :math:`r_i` is the descending rank and :math:`H` the harmonic numbers (Zhou et al. 2025, the
    reweighted-risk form; its population limit is :math:`-\mathbb E[\ln(1 - G(x))\,\ell]`). Ties: every
    sample of a group of equal confidences gets the group's mean loss. As the AURC is linear in the sorted
    losses, this is exactly the mean AURC over all orders of the tied samples (random tie-breaking), and it
    does not depend on the order of the rows; a stable sort would instead reward or penalise the input
    order. :func:`risk_coverage_curve` returns the whole curve; this is the mean of its ``risk``.

    Parameters
    ----------
    probs : array_like or torch.Tensor, shape (N, K)
    labels : array_like or torch.Tensor, shape (N,)
    confidence : str, array_like or torch.Tensor of shape (N,), optional
        The confidence score function (CSF) g: a name from :data:`CSFS` (computed from ``probs`` by
        :func:`confidence_score`), or the scores themselves, any finite reals with higher meaning more
        confident. Default: the maximum softmax probability (MSP) of ``probs``.
    loss : array_like or torch.Tensor, shape (N,), optional
        Per-sample loss :math:`\ell_i` (finite). Default: the 0/1 error of the argmax of ``probs`` (first
        maximum on ties), the usual selective-classification AURC.

    Returns
    -------
    float
        Lower is better; in [0, 1] for the 0/1 loss.
    """
    return float(_selective(probs, labels, confidence, loss, with_weights=False)[1].mean())
