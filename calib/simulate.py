"""Synthetic models whose calibration is known, to test calibration estimators against the truth (numpy).

Chapter 01 uses these to measure how the binned ECE behaves as an estimator:

- :func:`calibrated_logits` draws a model that is calibrated in every sense (canonically, hence also top-label
  and class-wise): logits ``z`` and labels ``y ~ Categorical(softmax(z))``, so that
  :math:`\\mathbb P(y = k \\mid \\mathrm{softmax}(z)) = \\mathrm{softmax}(z)_k`. Multiplying the logits by
  ``s > 1`` afterwards gives an over-confident model whose miscalibration is exactly undone by temperature
  scaling with ``T = s``.
- :func:`dirichlet_logits` draws logits whose softmax is Dirichlet distributed, sampled in log space so that
  a small concentration never gives an exact zero probability (chapter 06 samples minimisers of the focal
  risk with it).
- :func:`calibrated_ece_bias` gives the expected binned ECE of a calibrated model, exactly for the squared
  l2 norm and by the normal approximation for l1; :func:`expected_ece_exact` enumerates every outcome of a
  small sample; :func:`ece_sampling_table` repeats the estimator over sample sizes and bin counts.
- :func:`population_errors` and :func:`ideal_top_label_ece` compute *population* calibration errors of a
  discrete population (finitely many inputs, each with a prediction and a true class posterior):
  :math:`\\mathrm{CE}_\\rho`, top-label ECE, class-wise :math:`\\mathrm{cwECE}_\\rho` and the Brier score
  (Zhou et al. 2025, Defs. 3.5, 3.7, A.2; Karandikar et al. 2021, Eqs. 1-2), with the conditioning on the
  prediction done by grouping equal predictions.

The binned quantities use the bins of :mod:`calib.metrics` (same edges, same equal-mass cuts).
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import product

import numpy as np

from calib import metrics
from calib._validate import (
    as_float_array,
    as_probs_labels_top,
    as_scores,
    check_choice,
    check_int,
    check_positive,
)

__all__ = [
    "CalibratedBias",
    "ECESamplingTable",
    "PopulationErrors",
    "calibrated_ece_bias",
    "calibrated_logits",
    "dirichlet_logits",
    "ece_sampling_table",
    "expected_ece_exact",
    "ideal_top_label_ece",
    "nudge_edge_confidences",
    "population_errors",
    "random_population",
    "sample_labels",
    "softmax",
]


def _check_rng(rng) -> np.random.Generator:
    if not isinstance(rng, np.random.Generator):
        raise ValueError(f"rng must be a numpy Generator, e.g. np.random.default_rng(seed); got {type(rng).__name__}.")
    return rng


def softmax(logits) -> np.ndarray:
    """Row-wise softmax in float64 (max-subtracted, so large logits do not overflow)."""
    z = as_scores(logits, "logits", kind="logits")
    e = np.exp(z - z.max(axis=1, keepdims=True))
    e /= e.sum(axis=1, keepdims=True)
    return e


def sample_labels(probs, rng: np.random.Generator) -> np.ndarray:
    """Draw one label per row, ``y_i ~ Categorical(probs_i)``, by inverting the row's cumulative sum.

    Parameters
    ----------
    probs : array_like, shape (N, K)
        Rows sum to 1.
    rng : numpy.random.Generator

    Returns
    -------
    ndarray of int64, shape (N,)
    """
    p = as_scores(probs, "probs", kind="probs")
    rng = _check_rng(rng)
    u = rng.random((p.shape[0], 1))
    cdf = np.cumsum(p, axis=1)
    # the first k with u < cdf_k; a row whose cumsum rounds below u everywhere gets the last class
    y = (u >= cdf).sum(axis=1)
    return np.minimum(y, p.shape[1] - 1).astype(np.int64)


def calibrated_logits(n: int, n_classes: int, rng: np.random.Generator, scale: float = 2.0):
    """Logits of a perfectly (canonically) calibrated model and labels drawn from it.

    ``z = scale * G`` with G standard normal of shape (n, n_classes), and ``y_i ~ Categorical(softmax(z_i))``.
    The model ``softmax(z)`` is then calibrated in every sense: :math:`\\mathbb P(y = k \\mid \\hat p) =
    \\hat p_k` for every k (canonical calibration), hence top-label (:math:`\\mathbb P(\\hat y = y \\mid c) = c`,
    Mukhoti et al. 2020, Sec. 2) and class-wise calibrated too. ``scale`` sets how confident the model is
    (with 10 classes, scale 2 gives a mean confidence near 0.5).

    Parameters
    ----------
    n : int
        Number of samples N.
    n_classes : int
        Number of classes K >= 2.
    rng : numpy.random.Generator
    scale : float, default 2.0
        Standard deviation of the logits.

    Returns
    -------
    logits : ndarray, shape (n, n_classes)
    labels : ndarray of int64, shape (n,)
    """
    n = check_int(n, "n")
    k = check_int(n_classes, "n_classes", minimum=2)
    scale = check_positive(scale, "scale")
    rng = _check_rng(rng)
    z = scale * rng.standard_normal((n, k))
    return z, sample_labels(softmax(z), rng)


def dirichlet_logits(alpha: float, n_classes: int, n: int, rng: np.random.Generator) -> np.ndarray:
    """Logits whose softmax rows are Dirichlet(alpha, ..., alpha) distributed, drawn in log space.

    A Dirichlet vector is a vector of independent Gamma(alpha, 1) variates divided by their sum, so the logs
    of the variates are logits of it. For small alpha a Gamma(alpha) variate underflows to 0 (and
    ``rng.dirichlet`` returns exact zeros), so the log is drawn directly with the boosting identity
    ``G_alpha = G_{alpha+1} U^{1/alpha}``, U uniform on (0, 1] (Marsaglia & Tsang 2000, *A simple method for
    generating gamma variables*, ACM TOMS 26(3)):

    ``log G_alpha = log G_{alpha+1} + log(U) / alpha``,

    finite for every alpha > 0. Each call draws the (n, n_classes) Gamma(alpha + 1) variates first, then the
    uniforms, from ``rng``.

    Parameters
    ----------
    alpha : float
        Concentration, > 0 (the same for every class); alpha < 1 puts mass near the simplex's vertices.
    n_classes : int
        Number of classes K >= 2.
    n : int
        Number of rows N.
    rng : numpy.random.Generator

    Returns
    -------
    ndarray, shape (n, n_classes)
        Logits z, finite; ``softmax(z)`` is a Dirichlet(alpha) sample, one per row.
    """
    alpha = check_positive(alpha, "alpha")
    k = check_int(n_classes, "n_classes", minimum=2)
    n = check_int(n, "n")
    rng = _check_rng(rng)
    return np.log(rng.gamma(alpha + 1, size=(n, k))) + np.log1p(-rng.uniform(size=(n, k))) / alpha


def _bins_of(probs, n_bins: int, binning: str) -> tuple[np.ndarray, np.ndarray]:
    """The top-label confidence of each sample and its bin, the bins of :func:`calib.metrics.ece
    <calib.metrics.binned.ece>` (:func:`calib.metrics.top_label_bins <calib.metrics.binned.top_label_bins>`)."""
    _, _, _, conf = as_probs_labels_top(probs, np.zeros(np.shape(probs)[0], dtype=np.int64))
    return conf, metrics.top_label_bins(conf, n_bins, binning)


@dataclass(frozen=True)
class CalibratedBias:
    """Expected binned ECE of a perfectly calibrated model, given its confidences.

    Attributes
    ----------
    l2_squared : float
        :math:`\\mathbb E[\\mathrm{ECE}_2^2 \\mid c] = \\frac1N \\sum_{b:\\,n_b>0} \\bar v_b`, exactly, with
        :math:`\\bar v_b` the mean of :math:`c_i (1 - c_i)` over bin b.
    l1_normal : float
        :math:`\\sqrt{2/\\pi}\\,\\frac1N \\sum_b \\sqrt{n_b \\bar v_b}`: the expected l1 ECE when each
        :math:`A_b - C_b` is replaced by its normal approximation (accurate once bins hold tens of samples).
    n_nonempty : int
        Number of non-empty bins.
    """

    l2_squared: float
    l1_normal: float
    n_nonempty: int


def calibrated_ece_bias(probs, n_bins: int = 15, binning: str = "uniform") -> CalibratedBias:
    """Expected binned ECE when the labels are drawn from ``probs`` (a calibrated model), given ``probs``.

    Given the confidences, each outcome :math:`a_i = 1[\\hat y_i = y_i]` is Bernoulli(:math:`c_i`) and
    independent, so in each bin :math:`A_b - C_b` has mean 0 and variance
    :math:`\\sum_{i \\in b} c_i(1-c_i) / n_b^2`. Summing :math:`\\frac{n_b}{N} \\mathbb E(A_b - C_b)^2` over
    bins gives the exact expectation of the squared l2 ECE (the bins depend on the confidences only); the
    l1 value uses :math:`\\mathbb E|X| = \\sigma\\sqrt{2/\\pi}` for a centred normal X.

    The plug-in ECE of a calibrated model is therefore biased upward by about
    :math:`\\sqrt{M \\bar v / N}` (l2), which is why Kumar et al. (2019, Sec. 5) debias the squared estimate.

    Parameters
    ----------
    probs : array_like, shape (N, K)
    n_bins : int, default 15
    binning : {"uniform", "quantile"}, default "uniform"
        As for :func:`calib.metrics.ece <calib.metrics.binned.ece>` (the same bins,
        :func:`calib.metrics.top_label_bins <calib.metrics.binned.top_label_bins>`).

    Returns
    -------
    CalibratedBias
    """
    n_bins = check_int(n_bins, "n_bins")
    check_choice(binning, "binning", metrics.BINNINGS)
    conf, bins = _bins_of(probs, n_bins, binning)
    n = conf.shape[0]
    v = np.bincount(bins, weights=conf * (1.0 - conf), minlength=n_bins)  # sum c(1-c)
    counts = np.bincount(bins, minlength=n_bins)
    full = counts > 0
    l2_squared = float(np.sum(v[full] / counts[full]) / n)
    l1_normal = float(np.sqrt(2 / np.pi) * np.sum(np.sqrt(v[full])) / n)  # sqrt(n_b * vbar_b) = sqrt(sum v)
    return CalibratedBias(l2_squared=l2_squared, l1_normal=l1_normal, n_nonempty=int(full.sum()))


def expected_ece_exact(probs, n_bins: int = 15, binning: str = "uniform", norm: str = "l1",
                       estimator: str = "bin", p_correct=None, max_samples: int = 16) -> float:
    """Exact expectation of :func:`calib.metrics.ece <calib.metrics.binned.ece>` over every correct/incorrect outcome
    of a small sample.

    Sample i is correct with probability ``p_correct[i]`` (default: its confidence, i.e. a top-label
    calibrated model), independently. All :math:`2^N` outcomes are enumerated, so N is limited by
    ``max_samples``.

    Parameters
    ----------
    probs : array_like, shape (N, K)
    n_bins, binning, norm, estimator
        As for :func:`calib.metrics.ece <calib.metrics.binned.ece>`.
    p_correct : array_like, shape (N,), optional
        Probability that each prediction is correct; default the confidence :math:`\\max_k p_{ik}`.
    max_samples : int, default 16

    Returns
    -------
    float
    """
    p = as_scores(probs, "probs", kind="probs")
    n, k = p.shape
    if n > check_int(max_samples, "max_samples"):
        raise ValueError(f"probs has {n} rows; enumerating 2**{n} outcomes is too many. Pass at most "
                         f"{max_samples} rows or raise max_samples.")
    pred = p.argmax(axis=1)
    q = p[np.arange(n), pred] if p_correct is None else as_float_array(p_correct, "p_correct", ndim=1)
    if q.shape[0] != n or np.any(q < 0) or np.any(q > 1):
        raise ValueError(f"p_correct must hold {n} probabilities in [0, 1].")
    wrong = (pred + 1) % k  # any class other than the prediction
    total = 0.0
    for outcome in product((False, True), repeat=n):
        a = np.array(outcome, dtype=bool)
        weight = float(np.prod(np.where(a, q, 1 - q)))
        if weight == 0.0:
            continue
        labels = np.where(a, pred, wrong)
        total += weight * metrics.ece(p, labels, n_bins=n_bins, binning=binning, norm=norm, estimator=estimator)
    return total


@dataclass(frozen=True)
class ECESamplingTable:
    """Binned ECE estimates over repeated samples (see :func:`ece_sampling_table`).

    ``values[i, j, m, s, r]`` is the estimate with ``binnings[i]``, ``norms[j]``, ``n_bins[m]`` on the
    r-th sample of size ``sizes[s]``.
    """

    values: np.ndarray
    binnings: tuple
    norms: tuple
    n_bins: tuple
    sizes: tuple

    def mean(self, binning: str, norm: str, n_bins: int) -> np.ndarray:
        """Mean over repetitions, one value per sample size."""
        return self.values[self.binnings.index(binning), self.norms.index(norm), self.n_bins.index(n_bins)].mean(-1)

    def std(self, binning: str, norm: str, n_bins: int) -> np.ndarray:
        """Standard deviation over repetitions (ddof=1), one value per sample size."""
        return self.values[self.binnings.index(binning), self.norms.index(norm),
                           self.n_bins.index(n_bins)].std(-1, ddof=1)


def ece_sampling_table(sizes, n_bins, rng: np.random.Generator, n_reps: int = 10, n_classes: int = 10,
                       scale: float = 2.0, overconfidence: float = 1.0, binnings=("uniform", "quantile"),
                       norms=("l1", "l2")) -> ECESamplingTable:
    """Repeat the binned ECE of a synthetic model over sample sizes, bin counts, binnings and norms.

    Each repetition draws ``max(sizes)`` samples from :func:`calibrated_logits` and evaluates the first N of
    them for every N in ``sizes`` (a prefix of an i.i.d. sample is an i.i.d. sample, so each N sees the right
    distribution; estimates at different N within one repetition are correlated). The model evaluated is
    ``softmax(overconfidence * z)``: ``overconfidence=1`` is perfectly calibrated, so every estimate is pure
    estimation error; ``overconfidence > 1`` is over-confident, with a population ECE above 0.

    Parameters
    ----------
    sizes : sequence of int
        Sample sizes N.
    n_bins : sequence of int
        Bin counts M.
    rng : numpy.random.Generator
    n_reps : int, default 10
    n_classes : int, default 10
    scale : float, default 2.0
        Logit scale of the calibrated model (:func:`calibrated_logits`).
    overconfidence : float, default 1.0
        Factor applied to the logits before the metrics see them.
    binnings, norms : sequences of str
        Passed to :func:`calib.metrics.ece <calib.metrics.binned.ece>`.

    Returns
    -------
    ECESamplingTable
    """
    sizes = tuple(check_int(int(s), "sizes") for s in sizes)
    n_bins = tuple(check_int(int(m), "n_bins") for m in n_bins)
    for b in binnings:
        check_choice(b, "binnings", metrics.BINNINGS)
    for q in norms:
        check_choice(q, "norms", metrics.NORMS)
    n_reps = check_int(n_reps, "n_reps")
    overconfidence = check_positive(overconfidence, "overconfidence")
    values = np.empty((len(binnings), len(norms), len(n_bins), len(sizes), n_reps))
    for r in range(n_reps):
        z, y = calibrated_logits(max(sizes), n_classes, rng, scale=scale)
        p = softmax(overconfidence * z) if overconfidence != 1.0 else softmax(z)
        for s, size in enumerate(sizes):
            ps, ys = p[:size], y[:size]
            for i, b in enumerate(binnings):
                for j, q in enumerate(norms):
                    for m, bins in enumerate(n_bins):
                        values[i, j, m, s, r] = metrics.ece(ps, ys, n_bins=bins, binning=b, norm=q)
    return ECESamplingTable(values, tuple(binnings), tuple(norms), n_bins, sizes)


def nudge_edge_confidences(probs, n_bins: int, delta: float = 1e-9) -> np.ndarray:
    """Move every top-label confidence that sits exactly on an interior equal-width edge ``i / n_bins`` up by ``delta``.

    :func:`calib.metrics.ece <calib.metrics.binned.ece>` uses right-closed bins ``(lo, hi]``; torchmetrics and netcal
    use left-closed ``[lo, hi)`` bins. On the nudged probabilities calib's bins group the samples exactly as left-closed
    bins group the original ones (for ``delta`` smaller than the gap to the next confidence value), while every
    confidence moves by at most ``delta``: a way to check that a disagreement is the edge convention and nothing else.
    ``delta`` is taken from the largest other class of the row, so the rows still sum to 1 and the argmax is unchanged.
    Confidences of exactly 0 or 1 are left alone (they sit on the outer edges).

    Parameters
    ----------
    probs : array_like, shape (N, K)
    n_bins : int
    delta : float, default 1e-9

    Returns
    -------
    ndarray, shape (N, K)
        A float64 copy.
    """
    p = as_scores(probs, "probs", kind="probs").copy()
    n_bins = check_int(n_bins, "n_bins")
    delta = check_positive(delta, "delta")
    rows = np.arange(p.shape[0])
    top = p.argmax(axis=1)
    conf = p[rows, top]
    edges = np.arange(1, n_bins) / n_bins  # the floats metrics.ece compares with
    on_edge = np.isin(conf, edges)
    second = p.copy()
    second[rows, top] = -np.inf
    other = second.argmax(axis=1)
    if np.any(p[rows[on_edge], other[on_edge]] < delta):
        raise ValueError("delta is larger than the second-largest probability of a row on an edge; pass a smaller "
                         "delta.")
    p[rows[on_edge], top[on_edge]] += delta
    p[rows[on_edge], other[on_edge]] -= delta
    return p


# ----------------------------------------------------------------------------------------------------------
# discrete populations: exact population calibration errors
# ----------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class PopulationErrors:
    """Population calibration errors of a discrete population (see :func:`population_errors`)."""

    ce: float        # CE_rho (Zhou et al. 2025, Def. 3.5), vector rho-norm
    ece: float       # top-label ECE, E_c |P(correct | c) - c|
    cwece: float     # cwECE_rho (Zhou et al. 2025, Def. 3.7), mean over classes inside the root
    brier: float     # E ||f(x) - y||_2^2 (Zhou et al. 2025, Def. A.2)
    rho: float


def _group_mean(keys: np.ndarray, weights: np.ndarray, values: np.ndarray) -> np.ndarray:
    """For each row, the ``weights``-weighted mean of ``values`` over all rows with the same key (row of keys)."""
    keys = keys.reshape(keys.shape[0], -1)
    _, inverse = np.unique(keys, axis=0, return_inverse=True)
    inverse = inverse.ravel()
    mass = np.bincount(inverse, weights=weights)
    vals = values.reshape(values.shape[0], -1)
    sums = np.stack([np.bincount(inverse, weights=weights * vals[:, j]) for j in range(vals.shape[1])], axis=1)
    return (sums / mass[:, None])[inverse].reshape(values.shape)


def population_errors(weights, probs, posterior, rho: float = 1.0) -> PopulationErrors:
    """Exact population calibration errors of a model on a finite population of inputs.

    Input a has probability ``weights[a]``, the model predicts ``probs[a]`` and the true class posterior is
    ``posterior[a]`` (:math:`\\mathbb P(y \\mid x_a)`). Conditioning on the prediction groups the inputs with
    equal predictions: :math:`\\mathbb E[y \\mid f(x)]` is the weight-averaged posterior over the group.

    - :math:`\\mathrm{CE}_\\rho = (\\mathbb E \\|f(x) - \\mathbb E[y \\mid f(x)]\\|_\\rho^\\rho)^{1/\\rho}`
      (Zhou et al. 2025, Def. 3.5);
    - top-label ECE :math:`\\mathbb E |\\mathbb P(\\hat y = y \\mid c) - c|`, grouping by the confidence c
      (Mukhoti et al. 2020, Sec. 2);
    - :math:`\\mathrm{cwECE}_\\rho
      = (\\frac1k \\sum_c \\mathbb E |f_c(x) - \\mathbb P(y = c \\mid f_c(x))|^\\rho)^{1/\\rho}`, grouping by the
      single probability :math:`f_c` (Zhou et al. 2025, Def. 3.7);
    - Brier score :math:`\\mathbb E \\|f(x) - y\\|_2^2 = \\mathbb E[\\|f - \\eta\\|^2 + \\sum_c \\eta_c(1 - \\eta_c)]`.

    Parameters
    ----------
    weights : array_like, shape (A,)
        Non-negative, summing to 1.
    probs, posterior : array_like, shape (A, K)
        Rows on the simplex.
    rho : float, default 1.0
        :math:`\\rho \\ge 1`.

    Returns
    -------
    PopulationErrors
    """
    w = as_float_array(weights, "weights", ndim=1)
    f = as_scores(probs, "probs", kind="probs")
    eta = as_scores(posterior, "posterior", kind="probs")
    if f.shape != eta.shape or w.shape[0] != f.shape[0]:
        raise ValueError(f"weights {w.shape}, probs {f.shape} and posterior {eta.shape} must describe the same "
                         f"inputs: shapes (A,), (A, K), (A, K).")
    if np.any(w < 0) or abs(w.sum() - 1) > 1e-9:
        raise ValueError("weights must be non-negative and sum to 1.")
    rho = float(rho)
    if not rho >= 1:
        raise ValueError(f"rho must be >= 1; got {rho}.")
    a, k = f.shape
    cond = _group_mean(f, w, eta)                           # E[y | f(x)]
    ce = float(np.sum(w * np.sum(np.abs(f - cond) ** rho, axis=1)) ** (1 / rho))
    pred = f.argmax(axis=1)
    conf = f[np.arange(a), pred]
    hit = eta[np.arange(a), pred]                           # P(correct | x)
    ece = float(np.sum(w * np.abs(_group_mean(conf, w, hit) - conf)))
    cw = 0.0
    for c in range(k):
        cw += np.sum(w * np.abs(_group_mean(f[:, c], w, eta[:, c]) - f[:, c]) ** rho)
    cwece = float((cw / k) ** (1 / rho))
    brier = float(np.sum(w * (np.sum((f - eta) ** 2, axis=1) + np.sum(eta * (1 - eta), axis=1))))
    return PopulationErrors(ce=ce, ece=ece, cwece=cwece, brier=brier, rho=rho)


def random_population(n_atoms: int, n_classes: int, rng: np.random.Generator, n_predictions: int | None = None,
                      concentration: float = 1.0):
    """A random discrete population: weights, predictions and true posteriors.

    Predictions are drawn from ``n_predictions`` distinct Dirichlet vectors (default: one per input), so that
    several inputs can share a prediction and conditioning on it averages their posteriors.

    Returns
    -------
    weights : ndarray, shape (n_atoms,)
    probs : ndarray, shape (n_atoms, n_classes)
    posterior : ndarray, shape (n_atoms, n_classes)
    """
    a = check_int(n_atoms, "n_atoms")
    k = check_int(n_classes, "n_classes", minimum=2)
    m = a if n_predictions is None else check_int(n_predictions, "n_predictions")
    rng = _check_rng(rng)
    alpha = np.full(k, check_positive(concentration, "concentration"))
    weights = rng.dirichlet(np.ones(a))
    predictions = rng.dirichlet(alpha, size=m)
    probs = predictions[rng.integers(0, m, size=a)]
    posterior = rng.dirichlet(alpha, size=a)
    return weights, probs, posterior


def ideal_top_label_ece(weights, confidence, p_correct, p: float = 1.0, over: str = "confidence") -> float:
    """Karandikar et al. (2021)'s ideal top-label calibration errors, Eqs. 1 and 2, on a discrete population.

    Input a has probability ``weights[a]``, confidence ``confidence[a]`` and probability ``p_correct[a]`` of
    being classified correctly. The inner conditional accuracy :math:`\\mathbb E[a \\mid c]` groups inputs
    with equal confidence. The outer expectation is taken

    - ``over="confidence"``: over the distribution of the confidence value (Eq. 1, :math:`\\mathrm{IECE}_{bin,p}`),
      i.e. once per distinct value with its total probability;
    - ``over="sample"``: over the inputs (Eq. 2, :math:`\\mathrm{IECE}_{lb,p}`).

    Returns
    -------
    float
        :math:`(\\mathbb E |\\mathbb E[a \\mid c] - c|^p)^{1/p}`.
    """
    w = as_float_array(weights, "weights", ndim=1)
    c = as_float_array(confidence, "confidence", ndim=1)
    q = as_float_array(p_correct, "p_correct", ndim=1)
    if not (w.shape == c.shape == q.shape):
        raise ValueError("weights, confidence and p_correct must have the same length.")
    check_choice(over, "over", ("confidence", "sample"))
    p = float(p)
    values, inverse = np.unique(c, return_inverse=True)
    mass = np.bincount(inverse, weights=w)
    cond_acc = np.bincount(inverse, weights=w * q) / mass     # E[a | c], one per distinct c
    if over == "confidence":
        total = np.sum(mass * np.abs(cond_acc - values) ** p)
    else:
        total = np.sum(w * np.abs(cond_acc[inverse] - c) ** p)
    return float(total ** (1 / p))
