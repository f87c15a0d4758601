"""The answer key of chapter 01 (Measuring calibration). Chapter 01's exercises: the ECE of small samples, debiased
estimators, ties in equal-mass bins, the limits of temperature scaling, binning conventions and a
top-label-calibrated counterexample.
"""

from __future__ import annotations

from calib_book.answers.registry import Expected, construction, parameter, register


# Chapter 01's exercises build their data from seeded generators, as the exercise texts say, so that the key can
# rebuild exactly the student's data.

def _ch01_two_sample_ece(n):
    """The expected 15-bin ECE of n samples of a calibrated model that always predicts with confidence 0.45 in the
    book (the chapter works the same example at 0.3)."""
    import numpy as np

    from calib import simulate

    c = TWO_SAMPLE_CONFIDENCE()
    return float(simulate.expected_ece_exact(np.array([[c, 0.7 - c, 0.2, 0.1]] * n)))


def _two_sample_prose(c) -> str:
    """ch01-ex-two-samples' solution worked by hand for confidence ``c`` in the bin (6/15, 7/15]: the probabilities
    of each fraction correct for N = 2 and 3, the expectations, and the constant of the large-N rate."""
    from fractions import Fraction

    def text(x):
        return f"{float(x):.10g}" if (x * 10 ** 8).denominator == 1 else f"\\frac{{{x.numerator}}}{{{x.denominator}}}"

    f = Fraction(str(c))
    two = [((1 - f) ** 2, f), (2 * f * (1 - f), abs(Fraction(1, 2) - f)), (f ** 2, 1 - f)]
    three = [((1 - f) ** 3, f), (3 * f * (1 - f) ** 2, abs(Fraction(1, 3) - f)),
             (3 * f ** 2 * (1 - f), abs(Fraction(2, 3) - f)), (f ** 3, 1 - f)]
    return (", ".join(text(p) for p, _ in two) + "$, so\n$\\E[\\ECE] = "
            + " + ".join(f"{text(p)} \\cdot {text(g)}" for p, g in two)
            + f" = {text(sum(p * g for p, g in two))}$. For $N = 3$:\n$A \\in \\{{0, \\frac13, \\frac23, 1\\}}$ with "
            + "binomial probabilities $" + ", ".join(text(p) for p, _ in three) + "$, so\n$\\E[\\ECE] = "
            + " + ".join(f"{text(p)}\\cdot{text(g)}" for p, g in three)
            + f"\n= {text(sum(p * g for p, g in three))}$. The expectation is $\\E\\lvert \\bar a - {text(f)}\\rvert$ "
            + f"for a binomial mean, which tends to 0 like\n$\\sqrt{{2 \\cdot {text(f * (1 - f))}")


#: the confidence, 0.45 in the book; a course draws another in the same bin, (6/15, 7/15]
TWO_SAMPLE_CONFIDENCE = parameter(
    "ch01-ex-two-samples", "confidence", 0.45, lambda rng: float(rng.choice([0.42, 0.44, 0.46])),
    shown=("with confidence {}. Compute", "bins, {} lies between", "$\\lvert A - {}\\rvert$ with",
           ("with probabilities ${}/(\\pi N)}}$.", _two_sample_prose), "(n, c={}):", "edges_15[6] < {} <= edges_15[7]",
           ("np.array([[{}]] * n)", lambda c: f"{c:g}, {0.7 - c:.2g}, 0.2, 0.1"),
           ("2 * {} / (", lambda c: f"{c * (1 - c):.6g}")),
    text=lambda c: f"{c:g}")


#: The seeds of the generators that draw the data of ch01-ex-debias (1), ch01-ex-ties (5) and ch01-ex-ts-limits (2)
#: in the book; a course draws others, from 10 to 999.
DEBIAS_SEED = parameter("ch01-ex-debias", "seed", 1, lambda rng: int(rng.integers(10, 1000)),
                        shown=("np.random.default_rng({})",))
TIES_SEED = parameter("ch01-ex-ties", "seed", 5, lambda rng: int(rng.integers(10, 1000)),
                      shown=("np.random.default_rng({})",))
TS_LIMITS_SEED = parameter("ch01-ex-ts-limits", "seed", 2, lambda rng: int(rng.integers(10, 1000)),
                           shown=("np.random.default_rng({})",))


def _ch01_debias_data():
    import numpy as np

    from calib import simulate

    z, y = simulate.calibrated_logits(1000, 10, np.random.default_rng(DEBIAS_SEED()), scale=2.0)
    return simulate.softmax(z), y


def _ch01_debias(part):
    import numpy as np

    from calib import metrics, simulate

    p, y = _ch01_debias_data()
    plugin = metrics.ece(p, y, norm="l2") ** 2
    bias = simulate.calibrated_ece_bias(p).l2_squared
    if part == "plugin":
        return plugin
    if part == "bias":
        return bias
    if part == "debiased":
        return plugin - bias
    # Kumar et al. (2019), as in their code (p-lambda/verified_calibration): per bin with n_b >= 2,
    # (A_b - C_b)^2 - A_b (1 - A_b) / (n_b - 1), weighted by n_b / N; a bin with fewer samples adds 0
    rel = metrics.reliability(p, y)
    n, full = rel.counts.sum(), rel.counts > 1
    a, c, nb = rel.accuracy[full], rel.confidence[full], rel.counts[full]
    return float(np.sum(nb / n * ((a - c) ** 2 - a * (1 - a) / (nb - 1))))


def _ch01_votes():
    import numpy as np

    from calib import simulate

    rng = np.random.default_rng(TIES_SEED())
    z, y = simulate.calibrated_logits(2000, 10, rng, scale=2.0)
    return rng.multinomial(16, simulate.softmax(z)) / 16, y


def _ch01_ties(part):
    import numpy as np

    from calib import metrics

    votes, y = _ch01_votes()
    if part == "calib_ece":
        return metrics.adaptive_ece(votes, y)
    value, counts = metrics.adaptive_ece_torrvision(votes, y, return_counts=True)
    return value if part == "torrvision_ece" else int(np.sum(counts == 0))


def _ch01_ts_limits(part):
    import numpy as np

    from calib import metrics, simulate
    from calib.posthoc import TemperatureScaling

    z, y = simulate.calibrated_logits(20_000, 10, np.random.default_rng(TS_LIMITS_SEED()), scale=2.0)
    z = np.where(np.arange(20_000) % 2 == 0, 2.5, 0.4)[:, None] * z
    ts = TemperatureScaling("nll").fit(z, y)
    if part == "temperature":
        return ts.temperature_
    return metrics.ece(ts.predict_proba(z), y) if part == "ece_after" else metrics.ece(simulate.softmax(z), y)


def _rounded(x) -> str:
    return f"{round(x, 4):g}"


#: the correct prediction's confidence, 0.97 in the book; a course draws another inside the last bin, (14/15, 1), but
#: 0.95 (the chapter's table's case 4b)
HIDDEN_BIN_CONFIDENCE = parameter(
    "ch01-ex-hidden-bin", "confidence", 0.97, lambda rng: float(rng.choice([0.94, 0.96, 0.98, 0.99])),
    shown=("confidence {} (correct)", "np.array([{}, 1.0])",
           ("mean confidence {}.", lambda c: f"{_rounded((c + 1) / 2)}, so the ECE is {_rounded((c + 1) / 2 - 0.5)}"),
           ("torchmetrics: {})", lambda c: f"{c:g} is in the last regular bin (gap {_rounded(1 - c)}"),
           ("so the ECE is {}. Case", lambda c: _rounded(0.5 * (1 - c) + 0.5))),
    text=lambda c: f"{c:g}")


def _ch01_hidden_bin(part):
    import numpy as np

    from calib import metrics

    c = HIDDEN_BIN_CONFIDENCE()
    p, y = np.array([[c, 1 - c], [1.0, 0.0]]), np.array([0, 1])
    if part == "right_closed":
        return metrics.ece(p, y)
    one = p.max(1) == 1.0                            # torchmetrics: confidence 1.0 in a bin of its own
    gap_one = abs(np.mean(p[one].argmax(1) == y[one]) - 1.0)
    return float((1 - one.mean()) * metrics.ece(p[~one], y[~one]) + one.mean() * gap_one)


register("ch01-ex-two-samples", "01-measuring-calibration",
         n2=Expected(lambda: _ch01_two_sample_ece(2),
                     hint="an expectation over the sampling distribution of the accuracy"),
         n3=Expected(lambda: _ch01_two_sample_ece(3),
                     hint="an expectation over the sampling distribution of the accuracy"))
register("ch01-ex-debias", "01-measuring-calibration",
         plugin=Expected(lambda: _ch01_debias("plugin"), hint="the plug-in squared (l2) calibration error"),
         bias=Expected(lambda: _ch01_debias("bias"),
                       hint="what a perfectly calibrated model's binned error is on average"),
         debiased=Expected(lambda: _ch01_debias("debiased"), hint="a bias-corrected estimator"),
         kumar=Expected(lambda: _ch01_debias("kumar"),
                        hint="Kumar et al.'s per-bin correction, which uses the accuracy rather than the confidence"))
register("ch01-ex-ties", "01-measuring-calibration",
         calib_ece=Expected(lambda: _ch01_ties("calib_ece"), hint="equal-mass binning of tied confidences"),
         torrvision_ece=Expected(lambda: _ch01_ties("torrvision_ece"),
                                 hint="the official code's equal-mass binning, quirks included"),
         torrvision_empty=Expected(lambda: _ch01_ties("torrvision_empty"),
                                   hint="what tied confidences do to equal-mass bins"))
register("ch01-ex-ts-limits", "01-measuring-calibration",
         temperature=Expected(lambda: _ch01_ts_limits("temperature"), rtol=1e-4,
                              hint="temperature scaling fitted by likelihood"),
         ece_before=Expected(lambda: _ch01_ts_limits("ece_before"), hint="top-label ECE, equal-width bins"),
         ece_after=Expected(lambda: _ch01_ts_limits("ece_after"), rtol=1e-4, hint="top-label ECE, equal-width bins"))
register("ch01-ex-hidden-bin", "01-measuring-calibration",
         right_closed=Expected(lambda: _ch01_hidden_bin("right_closed"),
                               hint="which bin a confidence of exactly 1 falls into"),
         torchmetrics=Expected(lambda: _ch01_hidden_bin("torchmetrics"), hint="the binning convention of torchmetrics"))


def _ch01_converse_holds(given) -> bool:
    """ch01-ex-converse's property: ``given``, shape (A, 2, 3), is a three-class model on A equally likely inputs
    (row a: the prediction, then the true posterior) that is top-label calibrated (population ECE 0, grouping by
    the confidence) with a positive class-wise ECE (grouping by each class's probability)."""
    import numpy as np

    model = np.asarray(given, dtype=float)
    if model.ndim != 3 or model.shape[1:] != (2, 3) or not np.all(np.isfinite(model)) or np.any(model < 0) \
            or not np.allclose(model.sum(axis=2), 1.0, atol=1e-9):
        return False
    f, eta = model[:, 0], model[:, 1]

    def mean_given(keys, values):          # E[values | keys], inputs equally likely
        _, group = np.unique(keys, return_inverse=True)
        group = group.ravel()
        return (np.bincount(group, weights=values) / np.bincount(group))[group]

    rows = np.arange(len(f))
    top = f.argmax(axis=1)
    confidence, hit = f[rows, top], eta[rows, top]
    top_label_ece = np.mean(np.abs(mean_given(confidence, hit) - confidence))
    classwise_ece = np.mean([np.mean(np.abs(mean_given(f[:, c], eta[:, c]) - f[:, c])) for c in range(3)])
    return bool(top_label_ece < 1e-9 and classwise_ece > 1e-6)


register("ch01-ex-converse", "01-measuring-calibration",
         model=construction(_ch01_converse_holds, lambda: [[[0.6, 0.3, 0.1], [0.6, 0.1, 0.3]]],
                            accepts="any three-class model, as (prediction, posterior) rows of equally likely "
                                    "inputs, with top-label ECE 0 and a positive class-wise ECE",
                            hint="top-label calibration looks only at the largest probability"))
