"""The expected answers behind :func:`calib_book.exercises.check`, one ``register`` call per exercise.

Each expected value is computed by the library from the exercise's data (a closed form in sympy, or the
function the chapter teaches), so an answer key cannot drift from what the chapters compute. The chapter's
solution checks its own answer against the same entry with ``check(..., strict=True)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

__all__ = ["Expected", "Exercise", "EXERCISES", "register", "interval_claim", "interval_within_seed_noise",
           "verdict_of", "benchmark_runs", "BENCHMARK_STORE", "BENCHMARK_MODEL"]


@dataclass(frozen=True)
class Expected:
    """One part's expected answer: a function that computes it, and the rule that grades an answer to it.

    A numeric answer is ``right`` within ``rtol``/``atol`` (the precision the question asks for: ``rtol = 1e-6``
    asks for six significant digits), ``close`` when it is the expected value correctly rounded to at least
    ``close_digits`` significant digits (an error that rounding explains, so 25 ln 2 for 24 ln 2, 4 % off, is
    ``wrong``), and ``wrong`` beyond. :func:`calib_book.exercises.rule` states the rule of each part in words.

    Parameters
    ----------
    compute : callable
        Called once with no arguments; returns the expected value (number, array, sympy expression, bool, str).
    rtol, atol : float
        Tolerances for a ``right`` numeric answer.
    close_digits : int or None
        An answer that agrees with the expected value to this many significant digits (but not to ``rtol``) is
        ``close``; None for a count or any part where a near miss is a wrong answer.
    hint : str
        Shown with a ``wrong`` or ``close`` answer: the concept the part tests, never the method or the answer.
    points : int
        What a right answer to this part earns in the course's grading (the syllabus and the autograder read it).
    accept : callable or None
        For a question with several valid answers (a bound): called with the expected value and the answer, true
        when the answer is one of the valid ones; the expected value is then the reference the rule names.
    accepts : str
        The valid answers in words, for :func:`calib_book.exercises.rule` (with ``accept``).
    exact : bool
        The part asks for a closed form: only a sympy expression equal to the expected one is ``right``; a decimal
        number (which the chapter may print) is at best ``close``.
    """

    compute: Callable[[], Any]
    rtol: float = 1e-6
    atol: float = 1e-12
    close_digits: int | None = 3
    hint: str = ""
    points: int = 1
    accept: Callable[[Any, Any], bool] | None = None
    accepts: str = ""
    exact: bool = False


@dataclass(frozen=True)
class Exercise:
    """An exercise's self-check: its label, its chapter, and the expected answer of each named part."""

    label: str
    chapter: str
    parts: dict[str, Expected]


#: Every exercise with a self-check, by label (filled by the ``register`` calls below).
#:
#: :meta hide-value:
EXERCISES: dict[str, Exercise] = {}


def register(label: str, chapter: str, **parts: Expected) -> Exercise:
    """Add an exercise's self-check: ``register("ex-x", "02-focal-gradient", threshold=Expected(...))``."""
    if not parts:
        raise ValueError(f"register({label!r}): give at least one part, e.g. threshold=Expected(lambda: ...).")
    if label in EXERCISES:
        raise ValueError(f"exercise {label!r} is registered twice; labels are unique book-wide.")
    exercise = Exercise(label, chapter, dict(parts))
    EXERCISES[label] = exercise
    return exercise


def interval_within_seed_noise(reference, given) -> bool:
    """The rule for an interval a training exercise claims: ``given = (low, high)`` is right when its centre lies
    within a quarter of the reference interval's width of the reference centre (what seed noise and another
    machine's arithmetic explain) and its width is within a factor 1.5 of the reference width. The reference is
    the key's own rerun of the exercise's runs (or the stored runs)."""
    import numpy as np

    low, high = (float(v) for v in np.asarray(given, dtype=float).ravel()[:2])
    ref_low, ref_high = (float(v) for v in np.asarray(reference, dtype=float).ravel())
    if not low <= high:
        return False
    width = ref_high - ref_low
    centred = abs((low + high) / 2 - (ref_low + ref_high) / 2) <= width / 4
    return bool(centred and width / 1.5 <= high - low <= 1.5 * width)


def interval_claim(reference: Callable[[], Any], hint: str, points: int = 2) -> Expected:
    """An Expected for a training exercise's 95 % interval ``(low, high)``, graded by
    :func:`interval_within_seed_noise` against ``reference()``."""
    return Expected(reference, rtol=1e-6, atol=1e-9, close_digits=None, hint=hint, points=points,
                    accept=interval_within_seed_noise,
                    accepts="an interval (low, high) whose centre is within seed noise (a quarter of the reference "
                            "interval's width) of the runs' and whose width is within a factor 1.5 of theirs")


def verdict_of(interval) -> str:
    """'lower', 'higher' or 'no difference': which side of 0 a 95 % interval of a difference lies on."""
    low, high = (float(v) for v in interval)
    return "lower" if high < 0 else "higher" if low > 0 else "no difference"


def _sympy():
    import sympy

    return sympy


# --- 00 Using calib in your own training -------------------------------------------------------------------------

# (the chapter's exercises are registered here)


# --- 01 Measuring calibration ------------------------------------------------------------------------------------

# Chapter 01's exercises build their data from seeded generators, as the exercise texts say, so that the key can
# rebuild exactly the student's data.

def _ch01_two_sample_ece(n):
    """The expected 15-bin ECE of n samples of a calibrated model that always predicts with confidence 0.45 (the
    chapter works the same example at 0.3)."""
    import numpy as np

    from calib import simulate

    return float(simulate.expected_ece_exact(np.array([[0.45, 0.25, 0.2, 0.1]] * n)))


def _ch01_debias_data():
    import numpy as np

    from calib import simulate

    z, y = simulate.calibrated_logits(1000, 10, np.random.default_rng(1), scale=2.0)
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

    rng = np.random.default_rng(5)
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

    z, y = simulate.calibrated_logits(20_000, 10, np.random.default_rng(2), scale=2.0)
    z = np.where(np.arange(20_000) % 2 == 0, 2.5, 0.4)[:, None] * z
    ts = TemperatureScaling("nll").fit(z, y)
    if part == "temperature":
        return ts.temperature_
    return metrics.ece(ts.predict_proba(z), y) if part == "ece_after" else metrics.ece(simulate.softmax(z), y)


def _ch01_hidden_bin(part):
    import numpy as np

    from calib import metrics

    p, y = np.array([[0.97, 0.03], [1.0, 0.0]]), np.array([0, 1])
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


# --- 02 The focal-loss gradient ----------------------------------------------------------------------------------

register("ex-g-gamma-one", "02-focal-gradient",
         threshold=Expected(lambda: _sympy().exp(-1), exact=True, hint="where focal loss's gradient equals cross-entropy's"),
         argmax=Expected(lambda: _sympy().exp(-2), exact=True, hint="the peak of the gradient factor"),
         maximum=Expected(lambda: 1 + _sympy().exp(-2), exact=True, hint="the peak of the gradient factor"))
register("ex-g-near-one", "02-focal-gradient",
         limit=Expected(lambda: 1 + _sympy().Symbol("gamma", nonnegative=True),
                        hint="how fast the gradient factor vanishes near p = 1"))


def _entropy_bound_part(part):
    import numpy as np

    from calib import focal, metrics, symbolic

    p_hat, eta = np.array([0.6, 0.3, 0.1]), np.array([1.0, 0.0, 0.0])
    if part == "focal_loss":
        return float(focal.focal_risk(p_hat, eta, 2.0))
    if part == "kl":                                 # one-hot eta: KL(eta || p_hat) is the cross-entropy
        return metrics.nll(p_hat[None], [0])
    if part == "entropy":                            # L_c - gamma H[p_hat] at gamma = 0 and 1
        return float(focal.entropy_regularised_bound(p_hat, eta, 0.0) - focal.entropy_regularised_bound(p_hat, eta, 1.0))
    if part == "bound":
        return float(focal.entropy_regularised_bound(p_hat, eta, 2.0))
    d = symbolic.entropy_bound()
    if part == "bernoulli_gap":
        return float(d["bernoulli_gap"].subs({symbolic.p: 0.6, symbolic.gamma: 0.5}))
    return d["dD_at_0"]


register("ex-entropy-bound", "02-focal-gradient",
         focal_loss=Expected(lambda: _entropy_bound_part("focal_loss"), hint="the focal loss of one prediction"),
         kl=Expected(lambda: _entropy_bound_part("kl"), hint="the KL divergence from a one-hot target"),
         entropy=Expected(lambda: _entropy_bound_part("entropy"), hint="the entropy of the prediction"),
         bound=Expected(lambda: _entropy_bound_part("bound"), hint="Mukhoti et al.'s bound, Eq. 2"),
         bernoulli_gap=Expected(lambda: _entropy_bound_part("bernoulli_gap"),
                                hint="Bernoulli's inequality"),
         slope=Expected(lambda: _entropy_bound_part("slope"),
                        hint="the first-order effect of gamma"))


# --- 03 Choosing gamma -------------------------------------------------------------------------------------------

def _gamma_star(p0):
    from calib.focal import gamma_star

    return float(gamma_star(p0))


def _near_half_slope():
    sp = _sympy()
    return 8 * (1 - sp.log(2)) / sp.log(2) ** 2


register("ex-gamma-star-point-three", "03-choosing-gamma",        # p0 = 0.35: the chapter tabulates 0.3
         gamma=Expected(lambda: _gamma_star(0.35), rtol=1e-8,
                        hint="the branch of Lambert W that gives a positive gamma"),
         principal=Expected(lambda: 0.0, atol=1e-8, hint="the other branch of Lambert W"))
register("ex-gamma-star-near-half", "03-choosing-gamma",
         slope=Expected(_near_half_slope, exact=True, hint="the behaviour of gamma* near p0 = 1/2"))


def _design_schedule(part):
    from calib import focal

    schedule = focal.schedule_from_prop2([0.1, 0.2], 0.15)
    if part == "gammas":
        import numpy as np

        return np.asarray(schedule.gammas, dtype=float)
    return focal.upweighted_intervals(schedule)[-1][1]


def _flsd532(part):
    import numpy as np

    from calib import focal

    if part == "intervals":
        return np.asarray(focal.upweighted_intervals(focal.FLSD_532), dtype=float)
    return focal.upweighted_intervals(focal.FLSD_532) == focal.upweighted_intervals(focal.FLSD_53)


register("ex-design-schedule", "03-choosing-gamma",
         gammas=Expected(lambda: _design_schedule("gammas"), rtol=1e-8,
                         hint="Prop. 2's gamma for each bin"),
         upweighted_to=Expected(lambda: _design_schedule("upweighted_to"), rtol=1e-8,
                                hint="the samples a schedule up-weights"))
register("ex-flsd532", "03-choosing-gamma",
         intervals=Expected(lambda: _flsd532("intervals"), rtol=1e-8,
                            hint="the samples each part of a schedule up-weights, as (lo, hi) rows"),
         same_as_flsd53=Expected(lambda: _flsd532("same"), hint="what FLSD-53 already up-weights"))


# --- 04 Weight magnification in a linear model -------------------------------------------------------------------

import functools  # noqa: E402  (the answer key of chapter 04 caches its reruns)


@functools.lru_cache(maxsize=None)
def _linear_toy_rerun(noise=0.1, gamma=1.0, half_side=2.0, seeds=tuple(range(5))):
    """Chapter 04 at one setting, as its solutions rerun it (App. B toy, 500 full-batch steps of 0.5 from 0)."""
    from calib_book.linear_toy import rerun_linear_toy

    return rerun_linear_toy(noise=noise, gamma=gamma, half_side=half_side, seeds=seeds)


def _toy_ratio(**setting):
    return float(_linear_toy_rerun(**setting)["ratio"].mean())


def _toy_above_90(loss, **setting):
    return float(_linear_toy_rerun(**setting)[f"above_{loss}"].mean())


def _toy_median(loss, **setting):
    return float(_linear_toy_rerun(**setting)[f"median_{loss}"].mean())


@functools.lru_cache(maxsize=None)
def _separable_margin():
    from calib.data import make_linear_toy, separability_through_origin

    sep = make_linear_toy(noise=0.0, seed=0, margin=1.0)
    return separability_through_origin(sep.x_train, sep.y_train)[1]


@functools.lru_cache(maxsize=None)
def _stationary_gradients():
    """Autograd gradients of the focal (gamma = 1) and cross-entropy risks at focal loss's solution on the seed-0 draw."""
    import torch

    from calib.data import make_linear_toy
    from calib.train import logistic_gradient_descent

    d = make_linear_toy(noise=0.1, seed=0)
    w_fl = logistic_gradient_descent(d.x_train[None], d.y_train[None], gamma=[1.0], lr=0.5, iterations=500,
                                     record_every=500)["final_w"][0]
    x, y = torch.as_tensor(d.x_train, dtype=torch.float64), torch.as_tensor(d.y_train, dtype=torch.float64)
    w = torch.tensor(w_fl, dtype=torch.float64, requires_grad=True)
    log_p = torch.nn.functional.logsigmoid((2 * y - 1) * (x @ w))           # log of the true label's probability
    (grad_fl,) = torch.autograd.grad(-((1 - log_p.exp()) * log_p).mean(), w)
    (grad_ce,) = torch.autograd.grad(torch.nn.functional.binary_cross_entropy_with_logits(x @ w, y), w)
    return grad_fl.numpy(), float(grad_ce @ w.detach() / w.detach().norm())


register("ch04-ex-log-growth", "04-linear-toy",
         margin=Expected(_separable_margin, rtol=1e-4,
                         hint="the maximum-margin separator through the origin"),
         per_decade=Expected(lambda: float(_sympy().log(10)) / _separable_margin(), rtol=1e-4,
                             hint="the implicit bias of gradient descent on separable data"))
register("ch04-ex-stationary", "04-linear-toy",
         fl_gradient=Expected(lambda: _stationary_gradients()[0], rtol=0, atol=1e-8,
                              hint="the stationarity of the focal risk"),
         ce_along_w=Expected(lambda: _stationary_gradients()[1], rtol=1e-6, atol=1e-12,
                             hint="the cross-entropy gradient at focal loss's solution"))
register("ch04-ex-noise", "04-linear-toy",
         ratio=Expected(lambda: _toy_ratio(half_side=4.0), rtol=1e-4,
                        hint="weight magnification, averaged over the exercise's seeds"),
         above_90_ce=Expected(lambda: _toy_above_90("ce", half_side=4.0), rtol=1e-4, atol=0,
                              hint="a share in [0, 1]: how often the model is very confident"))
register("ch04-ex-more-noise", "04-linear-toy",        # 15 % flipped: the chapter's table has 0, 5, 10 and 20 %
         ratio=Expected(lambda: _toy_ratio(noise=0.15), rtol=1e-4,
                        hint="weight magnification, averaged over the exercise's seeds"),
         above_90_ce=Expected(lambda: _toy_above_90("ce", noise=0.15), rtol=1e-4, atol=0,
                              hint="a share in [0, 1]: how often the model is very confident"),
         above_90_fl=Expected(lambda: _toy_above_90("fl", noise=0.15), rtol=1e-4, atol=0,
                              hint="a share in [0, 1]: how often the model is very confident"))


def _toy_ratio_interval(seeds):
    from calib.stats import seed_interval

    return seed_interval(_linear_toy_rerun(seeds=tuple(seeds))["ratio"])


register("ch04-ex-other-draws", "04-linear-toy",        # three draws: five give an interval near the chapter's
         low=Expected(lambda: _toy_ratio_interval(range(100, 103)).low, rtol=1e-4,
                      hint="a t interval over seeds"),
         high=Expected(lambda: _toy_ratio_interval(range(100, 103)).high, rtol=1e-4,
                       hint="a t interval over seeds"))
register("ch04-ex-gamma", "04-linear-toy",
         ratio=Expected(lambda: _toy_ratio(gamma=2.0), rtol=1e-4,
                        hint="weight magnification, averaged over the exercise's seeds"),
         median_fl=Expected(lambda: _toy_median("fl", gamma=2.0), rtol=1e-4,
                            hint="how confident the wrong predictions are"))


# --- 05 Miscalibration during training ---------------------------------------------------------------------------

def _last_layer_gradient_norm():
    """Autograd's norm of the focal-loss (gamma = 3) gradient with respect to the last layer (weights and bias) of
    the chapter's MLP at its seed-0 initial weights, in float64, for the seed-0 standard-normal input labelled 7."""
    import torch

    from calib.losses import get_loss
    from calib.models import build_model, split_last_layer

    net = build_model("mlp-256-256", (1, 28, 28), 10, seed=0).double().eval()
    x = torch.randn(1, 1, 28, 28, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    get_loss("fl-3")(net(x), torch.tensor([7])).backward()
    head = split_last_layer(net)[1]
    return float(torch.sqrt(head.weight.grad.pow(2).sum() + head.bias.grad.pow(2).sum()))


register("ch05-ex-prop1-check", "05-miscalibration-dynamics",
         norm=Expected(_last_layer_gradient_norm, rtol=1e-9,
                       hint="Prop. 1: the last layer's gradient factorises"))


# --- 06 What focal loss estimates --------------------------------------------------------------------------------

def _tau_oc(gamma):
    from calib.focal import tau_oc

    return tau_oc(gamma)


def _phi_peak(gamma):
    from calib.focal import gradient_factor, tau_oc

    return float(gradient_factor(tau_oc(gamma), gamma))


def _tau_uc(gamma):
    from calib.focal import threshold

    return float(threshold(gamma))


def _float32_thresholds(runner_up):
    """The d from which a float32 softmax of the logits (d, runner_up, 0) has a top entry of exactly 1, and from which
    it is exactly (1, 0, 0): the largest small term, exp(runner_up - d), decides both (the chapter takes (d, 0, 0))."""
    import numpy as np

    fmt = np.finfo(np.float32)      # 1 + x rounds to 1 for x <= eps/2; a float32 rounds to 0 below half a subnormal
    return runner_up - np.log(float(fmt.eps) / 2), runner_up - np.log(float(fmt.smallest_subnormal) / 2)


register("ch06-ex-thresholds", "06-focal-loss-is-not-proper",
         tau_oc=Expected(lambda: float(_tau_oc(2.5)), rtol=1e-8,
                         hint="the over-confidence threshold: where the gradient factor phi peaks"),
         peak=Expected(lambda: _phi_peak(2.5), rtol=1e-8, hint="the largest value the gradient factor takes"),
         tau_uc=Expected(lambda: _tau_uc(2.5), rtol=1e-8,
                         hint="the under-confidence threshold: where focal loss's gradient equals cross-entropy's"))
register("ch06-ex-minimal-k", "06-focal-loss-is-not-proper",
         k_min=Expected(lambda: __import__("numpy").floor(1 / _tau_oc([1.0, 2.0, 3.0, 4.0, 5.0])) + 1, rtol=0,
                        atol=0.5, close_digits=None,
                        hint="the uniform prediction against the over-confidence threshold"))
register("ch06-ex-float32", "06-focal-loss-is-not-proper",
         d_top=Expected(lambda: _float32_thresholds(1.0)[0], rtol=1e-4, hint="the machine epsilon of float32"),
         d_zero=Expected(lambda: _float32_thresholds(1.0)[1], rtol=1e-4,
                         hint="the smallest float32 and underflow"))


# --- Chapter 10's stored grid, which the exercises of chapters 07 and 10 read ---------------------------------------

from pathlib import Path  # noqa: E402

#: Chapter 10's grid in the papers' regime, ``<store>/<model>/<loss>/seed<k>`` (the exercises' one store).
BENCHMARK_STORE = Path(__file__).resolve().parents[1] / "results" / "10-benchmark" / "regime"
#: The model label of that grid.
BENCHMARK_MODEL = "mlp-256-256-n20k-e40"


def benchmark_runs():
    """The stored runs of chapter 10's grid in the papers' regime, with their logits."""
    from calib.experiments import load_store

    return load_store(BENCHMARK_STORE, model=BENCHMARK_MODEL)


# --- 07 The focal calibration map --------------------------------------------------------------------------------

def _focal_logit_inflection():
    """The logit s* where d^2/ds^2 of -(1 - sigmoid(s))^3 log sigmoid(s) changes sign (sympy, by bisection)."""
    sp = _sympy()
    s = sp.Symbol("s", real=True)
    p = 1 / (1 + sp.exp(-s))
    return float(sp.nsolve(sp.diff(-(1 - p) ** 3 * sp.log(p), s, 2), s, (-4, -1), solver="bisect", tol=1e-20))


def _eighty_twenty():
    import numpy as np

    from calib.focal import focal_optimal_prediction

    return float(focal_optimal_prediction(np.array([0.7, 0.3]), 3.0)[0])


def _inverse_beta0(gamma):
    from calib.focal import effective_inverse_temperature

    return 1 / float(effective_inverse_temperature(0.0, gamma))


def _line_search_evaluations():
    import numpy as np

    from calib.posthoc import FocalTemperatureScaling

    rng = np.random.default_rng(0)
    fts = FocalTemperatureScaling(objective="nll", search="line").fit(2 * rng.normal(size=(300, 3)),
                                                                      rng.integers(0, 3, size=300))
    return fts.path_["n_evaluations"]


def _grid_evaluations():
    from calib.posthoc import KOMISARENKO_GAMMAS, KOMISARENKO_TEMPERATURES

    return len(KOMISARENKO_GAMMAS) * len(KOMISARENKO_TEMPERATURES)


def _stored_focal_scores():
    """Chapter 10's fl-3 run, seed 0: test ECE (15 equal-mass bins, calib's and the official code's), NLL and
    accuracy of the softmax, Psi^3 and FTS (ECE criterion, line search) fitted on validation."""
    import numpy as np
    from scipy.special import log_softmax

    from calib import metrics
    from calib.experiments import fit_posthoc
    from calib.focal import log_focal_map
    from calib.posthoc import FocalTemperatureScaling

    run = next(r for r in benchmark_runs() if r.loss == "fl-3" and r.seed == 0)
    arrays = run.logits()
    z, y = np.asarray(arrays["test_logits"], dtype=np.float64), arrays["test_labels"]
    fts = FocalTemperatureScaling(objective="ece", search="line").fit(arrays["val_logits"], arrays["val_labels"])
    psi = fit_posthoc("psi", arrays["val_logits"], arrays["val_labels"], run.loss)
    logs = [log_softmax(z, axis=1), psi.log_proba(z), log_focal_map(z / fts.temperature_, fts.gamma_)]
    scores = {"ece": [], "ece_official": [], "nll": [], "accuracy": []}
    for log_p in logs:
        scores["ece"].append(metrics.adaptive_ece(np.exp(log_p), y))
        scores["ece_official"].append(metrics.adaptive_ece_torrvision(np.exp(log_p), y))
        scores["nll"].append(float(-np.mean(log_p[np.arange(len(y)), y])))
        scores["accuracy"].append(metrics.accuracy(np.exp(log_p), y))
    return {metric: np.array(values) for metric, values in scores.items()}


def _official_equal_mass_bins(expected, given) -> bool:
    """The three ECEs with the official code's equal-mass bins (edges interpolated between sorted confidences)."""
    import numpy as np

    return bool(np.allclose(np.asarray(given, dtype=float), _stored_focal("ece_official"), rtol=1e-6, atol=1e-9))


_STORED_FOCAL: dict = {}


def _stored_focal(metric):
    if not _STORED_FOCAL:
        _STORED_FOCAL.update(_stored_focal_scores())
    return _STORED_FOCAL[metric]


register("ch07-ex-prop1-logit", "07-focal-calibration-map",
         s_star=Expected(_focal_logit_inflection, rtol=1e-8, hint="convexity of the loss as a function of the logit"))
register("ch07-ex-prop2-eighty", "07-focal-calibration-map",
         q_star=Expected(_eighty_twenty, rtol=1e-8, hint="the focal-optimal prediction for a known posterior"))
register("ch07-ex-beta0", "07-focal-calibration-map",
         df0=Expected(lambda: __import__("calib.symbolic", fromlist=["x"]).focal_calibration_on_logits()["df_at_0"],
                      hint="the slope of the focal calibration map at the decision boundary"),
         inv_beta0=Expected(lambda: _inverse_beta0(1.0), rtol=1e-8,
                            hint="the effective temperature at the decision boundary"))
register("ch07-ex-line-cost", "07-focal-calibration-map",
         grid=Expected(_grid_evaluations, rtol=0, atol=0.5, close_digits=None, hint="the size of a grid search"),
         line=Expected(_line_search_evaluations, rtol=0, atol=0.5, close_digits=None,
                       hint="the cost of a line search against a grid"))
register("ch07-ex-planted", "07-focal-calibration-map",
         gamma=Expected(lambda: 1.0, atol=1e-9, hint="identifiability of the focal temperature map"),
         temperature=Expected(lambda: 0.5, atol=1e-9, hint="identifiability of the focal temperature map"))
register("ch07-ex-stored-focal", "07-focal-calibration-map",
         ece=Expected(lambda: _stored_focal("ece"), rtol=1e-6, atol=1e-9, accept=_official_equal_mass_bins,
                      accepts="6 significant digits, with calib's 15 equal-mass bins (sorted confidences cut into "
                              "15 parts whose sizes differ by at most 1) or the official code's (edges interpolated "
                              "between sorted confidences)",
                      hint="top-label ECE with equal-mass bins; order softmax, Psi^3, FTS (line search)"),
         nll=Expected(lambda: _stored_focal("nll"), rtol=1e-6, atol=1e-9,
                      hint="the negative log-likelihood, order softmax, Psi^3, FTS"),
         accuracy=Expected(lambda: _stored_focal("accuracy"), rtol=0, atol=1e-9,
                           hint="the negative log-likelihood, order softmax, Psi^3, FTS"))


# --- 08 Soft calibration objectives ------------------------------------------------------------------------------

def _ch08_membership(c, m=15, t=1e-2):
    from calib.soft_binning import soft_membership

    return soft_membership(c, m, t)


def _ch08_mode(j, m=15, t=1e-2):
    from calib.soft_binning import membership_modes

    return float(membership_modes(m, t)[j - 1])


_CH08_CONF, _CH08_CORRECT = (0.95, 0.85, 0.75, 0.65, 0.55), (1, 1, 0, 1, 0)


def _ch08_large_t(estimator):
    from calib.soft_binning import soft_binned_ece

    norm, power = ("l1", 1) if estimator == "bin" else ("l2", 2)
    return soft_binned_ece(_CH08_CONF, _CH08_CORRECT, 15, 1e9, norm, estimator) ** power


register("ch08-ex-temperature", "08-soft-calibration-objectives",
         temperature=Expected(lambda: float(__import__("calib.soft_binning", fromlist=["x"])
                                            .hard_limit_temperature(2e-3, 15, 0.01)),
                              hint="soft binning approaches hard binning as its temperature falls"),
         ratio=Expected(lambda: float(_ch08_membership(0.5, t=5e-3)[8] / _ch08_membership(0.5, t=5e-3)[7]),
                        hint="a soft-bin membership is a softmax over the bins"),
         own_share=Expected(lambda: float(_ch08_membership(0.5, t=5e-3)[7]),
                            hint="a softmax normalises over every bin, not only the neighbours"))
@functools.lru_cache(maxsize=None)
def _ch08_sbece_runs(beta_values=(0.0, 1.0), seeds=(0, 1, 2), steps=120):
    """The test ECE (15 equal-width bins) of ch08-ex-sbece-train's small networks: an MLP 64-32-10 on the
    standardised digits data, full-batch Adam (lr 1e-2) on NLL + beta SB-ECE, per beta and seed."""
    import numpy as np
    import torch

    from calib import metrics
    from calib.data import load_dataset
    from calib.losses import get_secondary_loss

    digits = load_dataset("digits")
    flat = lambda x: x.reshape(len(x), -1).astype(np.float32)        # noqa: E731
    x_train, x_test = flat(digits.x_train), flat(digits.x_test)
    mu, sd = x_train.mean(0), x_train.std(0) + 1e-6
    x_train, x_test = torch.as_tensor((x_train - mu) / sd), torch.as_tensor((x_test - mu) / sd)
    y_train, secondary = torch.as_tensor(digits.y_train), get_secondary_loss("sb-ece")
    out = {}
    for beta in beta_values:
        eces = []
        for seed in seeds:
            torch.manual_seed(seed)
            net = torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.ReLU(), torch.nn.Linear(32, 10))
            opt = torch.optim.Adam(net.parameters(), lr=1e-2)
            for _ in range(steps):
                opt.zero_grad()
                z = net(x_train)
                loss = torch.nn.functional.cross_entropy(z, y_train)
                if beta > 0:
                    loss = loss + beta * secondary(z, y_train)
                loss.backward()
                opt.step()
            with torch.no_grad():
                eces.append(metrics.ece(torch.softmax(net(x_test).double(), 1).numpy(), digits.y_test, n_bins=15))
        out[beta] = np.array(eces)
    return out


def _ch08_sbece_interval():
    from calib.stats import paired_seed_interval

    runs = _ch08_sbece_runs()
    interval = paired_seed_interval(runs[1.0], runs[0.0])
    return (interval.low, interval.high)


register("ch08-ex-edge-bins", "08-soft-calibration-objectives",
         mode_2=Expected(lambda: _ch08_mode(2), rtol=1e-8, hint="where a soft bin's membership peaks"),
         mode_8=Expected(lambda: _ch08_mode(8), rtol=1e-8, hint="the symmetry of the bins about 1/2"))
register("ch08-ex-sbece-train", "08-soft-calibration-objectives",
         interval=interval_claim(_ch08_sbece_interval,
                                 hint="a paired interval over seeds of the difference ECE(beta = 1) - ECE(beta = 0)"),
         verdict=Expected(lambda: verdict_of(_ch08_sbece_interval()), close_digits=None,
                          hint="which side of zero the interval lies on: 'lower', 'higher' or 'no difference'"))
register("ch08-ex-large-t", "08-soft-calibration-objectives",
         bin_limit=Expected(lambda: _ch08_large_t("bin"), rtol=1e-6, hint="what every soft bin becomes as T grows"),
         lb_limit=Expected(lambda: _ch08_large_t("label"), rtol=1e-6,
                           hint="the label-binned estimator as T grows"))


# --- 09 Reweighted risk ------------------------------------------------------------------------------------------

def _ch09_au_exact(n=10, kappa=0.4):
    import torch

    from calib.losses import au_weights

    scores = torch.linspace(1.0, 0.1, n, dtype=torch.float64)          # descending: rank r is entry r - 1
    return au_weights(scores, kappa=kappa, cdf="exact").numpy()


def _ch09_hierarchy(rho):
    from calib.selective import calibration_hierarchy

    return calibration_hierarchy([1.0], [[0.7, 0.3]], [[0.5, 0.5]], rho)


def _ch09_printed_bound_holds_only_at():
    import numpy as np

    rhos = np.linspace(1.0, 2.0, 101)
    holds = [r for r in rhos if _ch09_hierarchy(r).ce >= _ch09_hierarchy(r).lower_printed - 1e-12]
    return float(holds[0]) if len(holds) == 1 else float("nan")


def _ch09_ifl(part, gamma=6.0):
    from scipy.optimize import minimize_scalar

    from calib.selective import inverse_focal_dp, inverse_focal_positive_interval

    lo, hi = (float(v) for v in inverse_focal_positive_interval(gamma))
    if part == "low":
        return lo
    if part == "high":
        return hi
    res = minimize_scalar(lambda p: -inverse_focal_dp(p, gamma), bounds=(lo, hi), method="bounded",
                          options={"xatol": 1e-12})
    return float(-res.fun)


def _ch09_dual(variant):
    from calib.selective import dual_focal_weight

    return float(dual_focal_weight([[0.65, 0.35]], [1], 3.0, variant)[0])


def _ch09_smallest_k_code_differs_from_eq24():
    import numpy as np

    from calib.selective import dual_focal_weight

    rng = np.random.default_rng(0)
    for k in range(2, 6):
        p = rng.dirichlet(np.ones(k), size=200)
        y = rng.integers(0, k, 200)
        if not np.allclose(dual_focal_weight(p, y, 3.0, "official"), dual_focal_weight(p, y, 3.0, "competitor")):
            return k
    return -1


register("ex-ch09-harmonic", "09-reweighted-risk",
         weights=Expected(_ch09_au_exact, rtol=1e-10, hint="the exact AURC weights by rank"),
         mean=Expected(lambda: float(_ch09_au_exact().mean()), rtol=1e-10, hint="the mean weight of the AURC loss"))
register("ex-ch09-rho", "09-reweighted-risk",
         ce=Expected(lambda: _ch09_hierarchy(1.5).ce, rtol=1e-8, hint="the l_rho calibration error of Def. 3.6"),
         cwece=Expected(lambda: _ch09_hierarchy(1.5).cwece, rtol=1e-8,
                        hint="the class-wise calibration error of Def. 3.7"),
         holds_only_at=Expected(_ch09_printed_bound_holds_only_at, rtol=1e-9,
                                hint="the constant of the printed bound"))
register("ex-ch09-ifl", "09-reweighted-risk",
         low=Expected(lambda: _ch09_ifl("low"), rtol=1e-8, hint="where the inverse-focal gradient changes sign"),
         high=Expected(lambda: _ch09_ifl("high"), rtol=1e-8, hint="where the inverse-focal gradient changes sign"),
         maximum=Expected(lambda: _ch09_ifl("maximum"), rtol=1e-7,
                          hint="the largest positive gradient of the inverse focal loss"))
register("ex-ch09-dual-binary", "09-reweighted-risk",
         code=Expected(lambda: _ch09_dual("official"), rtol=1e-10,
                       hint="the released code's reading of the dual focal loss"),
         eq24=Expected(lambda: _ch09_dual("competitor"), rtol=1e-10, hint="the paper's Eq. 24"),
         smallest_k=Expected(_ch09_smallest_k_code_differs_from_eq24,
                             hint="when ties and ranks differ between the two readings"))


# --- 10 The benchmark --------------------------------------------------------------------------------------------

# Chapter 10's exercises read the store through benchmark_runs() (BENCHMARK_STORE above), so that they follow the
# grid in the papers' regime once it is trained.

@functools.lru_cache(maxsize=None)
def _ch10_test_ece(loss):
    """Per-seed test ECE (15 equal-width bins, no post-hoc map) of one loss of chapter 10's stored grid."""
    from calib.experiments import evaluate_store, metric_values

    runs = [r for r in benchmark_runs() if r.loss == loss]
    rows = evaluate_store(runs, maps=("none",), progress=False, write_cache=False)
    return tuple(metric_values(rows, loss, "none", "ece"))


def _ch10_paired(kind):
    import numpy as np
    from scipy import stats as st

    from calib.stats import paired_seed_interval

    a, b = np.array(_ch10_test_ece("ce")), np.array(_ch10_test_ece("brier"))
    paired = paired_seed_interval(a, b)
    welch = st.ttest_ind(a, b, equal_var=False).confidence_interval(0.95)
    if kind == "paired":
        return (paired.low, paired.high)
    if kind == "welch":
        return (float(welch.low), float(welch.high))
    return "paired" if paired.high - paired.low < welch.high - welch.low else "welch"


register("ch10-ex-paired", "10-benchmark",
         paired=Expected(lambda: _ch10_paired("paired"), rtol=1e-6, atol=1e-9, points=2,
                         hint="a paired interval rests on the per-seed differences"),
         welch=Expected(lambda: _ch10_paired("welch"), rtol=1e-6, atol=1e-9, points=2,
                        hint="an unpaired interval treats the two samples as independent, variances unequal"),
         narrower=Expected(lambda: _ch10_paired("narrower"), close_digits=None,
                           hint="'paired' or 'welch': compare the widths"))
register("ch10-ex-verify", "10-benchmark",
         dominant=Expected(lambda: "fts", close_digits=None,
                           hint="the map name as calib.posthoc.REGISTRY spells it; think of how many fits it makes"))


# --- 11 The papers' tables ---------------------------------------------------------------------------------------

# (the chapter's exercises are registered here)


def _rows_compared(min_cells: int = 5, complete: bool = False) -> dict[str, list[int]]:
    """Chapter 11's search for coinciding rows: the length (printed cells) of each row of each paper with at least
    ``min_cells`` readable cells (and no unreadable one, with ``complete``), as ``{paper: [lengths]}``."""
    from calib.published import printed_row_values, read_published

    row_by = {"mukhoti2020": ("table", "dataset", "model"), "komisarenko2024": ("table", "dataset", "stage"),
              "karandikar2021": ("table", "dataset"), "zhou2025": ("table", "dataset", "model", "stage")}
    out = {}
    for paper, by in row_by.items():
        lengths = [len(values) for values in printed_row_values(read_published(paper), by).values()
                   if sum(v is not None for v in values) >= min_cells and not (complete and None in values)]
        out[paper] = lengths
    return out


def _chance_coincidence_bound(p_cell: float = 1 / 50, min_cells: int = 5) -> float:
    """Row pairs compared by chapter 11's search for coinciding rows, times p_cell ** min_cells."""
    return sum(len(n) * (len(n) - 1) // 2 for n in _rows_compared(min_cells).values()) * p_cell ** min_cells


def _chance_coincidence_expectation(p_cell: float = 1 / 50, min_cells: int = 5) -> float:
    """The expected number of chance coincidences itself: only rows of one length can agree cell for cell, a pair
    of length m with probability p_cell ** m (the tightest valid bound)."""
    import collections

    total = 0.0
    for lengths in _rows_compared(min_cells, complete=True).values():
        for m, n in collections.Counter(lengths).items():
            total += n * (n - 1) // 2 * p_cell ** m
    return total


def _valid_coincidence_bound(union_bound, given) -> bool:
    """Either valid bound on the expected chance coincidences: the union bound over the pairs compared,
    pairs x (1/50)^5, or the tighter one that counts only pairs of rows of one length, each with (1/50)^m (the
    expectation itself); to three significant digits."""
    value = float(given)
    return any(abs(value - bound) <= 5e-3 * bound for bound in (float(union_bound), _chance_coincidence_expectation()))


register("ch11-ex-coincidence", "11-paper-tables",
         expected_coincidences=Expected(_chance_coincidence_bound, rtol=1e-6, atol=0, accept=_valid_coincidence_bound,
                                        accepts="either valid bound to 3 significant digits: the union bound over "
                                                "the pairs compared, or the tighter one that counts only the pairs "
                                                "that can agree cell for cell",
                                        hint="linearity of expectation over the pairs compared"))
