"""The expected answers behind :func:`calib.exercises.check`, one ``register`` call per exercise.

Each expected value is computed by the library from the exercise's data (a closed form in sympy, or the
function the chapter teaches), so an answer key cannot drift from what the chapters compute. The chapter's
solution checks its own answer against the same entry with ``check(..., strict=True)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

__all__ = ["Expected", "Exercise", "EXERCISES", "register"]


@dataclass(frozen=True)
class Expected:
    """One part's expected answer: a function that computes it, and how strictly to compare.

    Parameters
    ----------
    compute : callable
        Called once with no arguments; returns the expected value (number, array, sympy expression, bool, str).
    rtol, atol : float
        Tolerances for a ``right`` numeric answer.
    close_factor : float
        An answer within ``close_factor`` times the tolerances is ``close``.
    hint : str
        Shown with a ``wrong`` or ``close`` answer (never the answer itself).
    """

    compute: Callable[[], Any]
    rtol: float = 1e-6
    atol: float = 1e-12
    close_factor: float = 1e3
    hint: str = ""


@dataclass(frozen=True)
class Exercise:
    """An exercise's self-check: its label, its chapter, and the expected answer of each named part."""

    label: str
    chapter: str
    parts: dict[str, Expected]


#: Every exercise with a self-check, by label (filled by the ``register`` calls below).
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


def _sympy():
    import sympy

    return sympy


# --- 00 Using calib in your own training -------------------------------------------------------------------------

# (the chapter's exercises are registered here)


# --- 01 Measuring calibration ------------------------------------------------------------------------------------

# (the chapter's exercises are registered here)


# --- 02 The focal-loss gradient ----------------------------------------------------------------------------------

register("ex-g-gamma-one", "02-focal-gradient",
         threshold=Expected(lambda: _sympy().exp(-1), hint="solve g(p, 1) = 1 on (0, 1/2)"),
         argmax=Expected(lambda: _sympy().exp(-2), hint="where does dg/dp vanish?"),
         maximum=Expected(lambda: 1 + _sympy().exp(-2), hint="g at its argmax"))
register("ex-g-near-one", "02-focal-gradient",
         limit=Expected(lambda: 1 + _sympy().Symbol("gamma", nonnegative=True),
                        hint="the limit of g(p, gamma)/(1-p)^gamma as p -> 1, in terms of gamma"))


# --- 03 Choosing gamma -------------------------------------------------------------------------------------------

def _gamma_star(p0):
    from calib.focal import gamma_star

    return float(gamma_star(p0))


def _near_half_slope():
    sp = _sympy()
    return 8 * (1 - sp.log(2)) / sp.log(2) ** 2


register("ex-gamma-star-point-three", "03-choosing-gamma",
         gamma=Expected(lambda: _gamma_star(0.3), rtol=1e-8, hint="the lower branch (k = -1) of Lambert W"),
         principal=Expected(lambda: 0.0, atol=1e-8, hint="evaluate Eq. 12 with branch k = 0"))
register("ex-gamma-star-near-half", "03-choosing-gamma",
         slope=Expected(_near_half_slope, hint="the limit of gamma*(p0)/(1/2 - p0) as p0 -> 1/2"))


# --- 04 Weight magnification in a linear model -------------------------------------------------------------------

# (the chapter's exercises are registered here)


# --- 05 Miscalibration during training ---------------------------------------------------------------------------

# (the chapter's exercises are registered here)


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


def _float32_thresholds():
    import numpy as np

    fmt = np.finfo(np.float32)      # 1 + x rounds to 1 for x <= eps/2; a float32 rounds to 0 below half a subnormal
    return -np.log(float(fmt.eps) / 2), -np.log(float(fmt.smallest_subnormal) / 2)


register("ch06-ex-thresholds", "06-focal-loss-is-not-proper",
         tau_oc=Expected(lambda: float(_tau_oc(2.0)), rtol=1e-8, hint="the root of k_2(v) in (0, 1/2)"),
         peak=Expected(lambda: _phi_peak(2.0), rtol=1e-8, hint="phi^2 evaluated at tau_oc"),
         tau_uc=Expected(lambda: _tau_uc(2.0), rtol=1e-8, hint="the root of phi^2(v) = 1 in (0, 1/2), not v = 0"))
register("ch06-ex-minimal-k", "06-focal-loss-is-not-proper",
         k_min=Expected(lambda: __import__("numpy").floor(1 / _tau_oc([1.0, 2.0, 3.0, 4.0, 5.0])) + 1, rtol=0,
                        atol=0.5, close_factor=1.0, hint="the smallest integer K with 1/K < tau_oc, one per gamma"))
register("ch06-ex-float32", "06-focal-loss-is-not-proper",
         d_top=Expected(lambda: _float32_thresholds()[0], rtol=1e-4, hint="when does 1 + e^-d round to 1 in float32?"),
         d_zero=Expected(lambda: _float32_thresholds()[1], rtol=1e-4,
                         hint="when does e^-d round to 0 in float32 (think of subnormals)?"))


# --- 07 The focal calibration map --------------------------------------------------------------------------------

def _focal_logit_inflection():
    """The logit s* where d^2/ds^2 of -(1 - sigmoid(s))^2 log sigmoid(s) changes sign (sympy, by bisection)."""
    sp = _sympy()
    s = sp.Symbol("s", real=True)
    p = 1 / (1 + sp.exp(-s))
    return float(sp.nsolve(sp.diff(-(1 - p) ** 2 * sp.log(p), s, 2), s, (-4, -2), solver="bisect", tol=1e-20))


def _eighty_twenty():
    import numpy as np

    from calib.focal import focal_optimal_prediction

    return float(focal_optimal_prediction(np.array([0.8, 0.2]), 2.0)[0])


def _inverse_beta0(gamma):
    from calib.focal import effective_inverse_temperature

    return 1 / float(effective_inverse_temperature(0.0, gamma))


def _line_search_evaluations():
    import numpy as np

    from calib.posthoc import FocalTemperatureScaling

    rng = np.random.default_rng(0)
    fts = FocalTemperatureScaling(objective="nll", search="line").fit(2 * rng.normal(size=(300, 3)),
                                                                      rng.integers(0, 3, size=300))
    return fts.path["n_evaluations"]


def _grid_evaluations():
    from calib.posthoc import KOMISARENKO_GAMMAS, KOMISARENKO_TEMPERATURES

    return len(KOMISARENKO_GAMMAS) * len(KOMISARENKO_TEMPERATURES)


def _stored_focal_scores():
    """Chapter 10's fl-3 run, seed 0: test ECE (15 equal-mass bins), NLL and accuracy of the softmax, Psi^3 and
    FTS (ECE criterion, line search) fitted on validation."""
    from pathlib import Path

    import numpy as np
    from scipy.special import log_softmax

    from calib import metrics
    from calib.experiments import fit_posthoc, load_store
    from calib.focal import log_focal_map
    from calib.posthoc import FocalTemperatureScaling

    store = Path(__file__).resolve().parents[1] / "book" / "results" / "10-benchmark"
    run = next(r for r in load_store(store, model="mlp-256-256") if r.loss == "fl-3" and r.seed == 0)
    arrays = run.logits()
    z, y = np.asarray(arrays["test_logits"], dtype=np.float64), arrays["test_labels"]
    fts = FocalTemperatureScaling(objective="ece", search="line").fit(arrays["val_logits"], arrays["val_labels"])
    psi = fit_posthoc("psi", arrays["val_logits"], arrays["val_labels"], run.loss)
    logs = [log_softmax(z, axis=1), psi.log_proba(z), log_focal_map(z / fts.temperature, fts.gamma)]
    scores = {"ece": [], "nll": [], "accuracy": []}
    for log_p in logs:
        scores["ece"].append(metrics.adaptive_ece(np.exp(log_p), y))
        scores["nll"].append(float(-np.mean(log_p[np.arange(len(y)), y])))
        scores["accuracy"].append(metrics.accuracy(np.exp(log_p), y))
    return {metric: np.array(values) for metric, values in scores.items()}


_STORED_FOCAL: dict = {}


def _stored_focal(metric):
    if not _STORED_FOCAL:
        _STORED_FOCAL.update(_stored_focal_scores())
    return _STORED_FOCAL[metric]


register("ch07-ex-prop1-logit", "07-focal-calibration-map",
         s_star=Expected(_focal_logit_inflection, rtol=1e-8, hint="the sign change of d2L/ds2 for gamma = 2"))
register("ch07-ex-prop2-eighty", "07-focal-calibration-map",
         q_star=Expected(_eighty_twenty, rtol=1e-8, hint="the root of p_hat_2(q) = 0.8 in (0.5, 0.8)"))
register("ch07-ex-beta0", "07-focal-calibration-map",
         df0=Expected(lambda: __import__("calib.symbolic", fromlist=["x"]).focal_calibration_on_logits()["df_at_0"],
                      hint="differentiate f_gamma(s) and set s = 0; simplify the logarithms"),
         inv_beta0=Expected(lambda: _inverse_beta0(1.0), rtol=1e-8, hint="1 / (gamma + 1 - f'(0)) at gamma = 1"))
register("ch07-ex-line-cost", "07-focal-calibration-map",
         grid=Expected(_grid_evaluations, rtol=0, atol=0.5, close_factor=1.0, hint="every (gamma, T) pair"),
         line=Expected(_line_search_evaluations, rtol=0, atol=0.5, close_factor=1.0,
                       hint="the two anchors' T searches, then the points on the line"))
register("ch07-ex-planted", "07-focal-calibration-map",
         gamma=Expected(lambda: 1.0, atol=1e-9, hint="the gamma planted in the logits"),
         temperature=Expected(lambda: 0.5, atol=1e-9, hint="the temperature planted in the logits"))
register("ch07-ex-stored-focal", "07-focal-calibration-map",
         ece=Expected(lambda: _stored_focal("ece"), rtol=1e-6, atol=1e-9,
                      hint="top-label ECE, 15 equal-mass bins; order softmax, Psi^3, FTS (line search)"),
         nll=Expected(lambda: _stored_focal("nll"), rtol=1e-6, atol=1e-9, hint="order softmax, Psi^3, FTS"),
         accuracy=Expected(lambda: _stored_focal("accuracy"), rtol=0, atol=1e-9, hint="order softmax, Psi^3, FTS"))


# --- 08 Soft calibration objectives ------------------------------------------------------------------------------

# (the chapter's exercises are registered here)


# --- 09 Reweighted risk ------------------------------------------------------------------------------------------

# (the chapter's exercises are registered here)


# --- 10 The benchmark --------------------------------------------------------------------------------------------

# (the chapter's exercises are registered here)


# --- 11 The papers' tables ---------------------------------------------------------------------------------------

# (the chapter's exercises are registered here)
