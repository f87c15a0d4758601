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

# (the chapter's exercises are registered here)


# --- 07 The focal calibration map --------------------------------------------------------------------------------

# (the chapter's exercises are registered here)


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
                                            .hard_limit_temperature(1e-3, 15, 0.01)),
                              hint="solve 1/(1 + exp(-2 delta/(M T))) = 0.99 for T"),
         ratio=Expected(lambda: float(_ch08_membership(0.5)[8] / _ch08_membership(0.5)[7]),
                        hint="u_9/u_8 at c = xi_8 = 1/2: the g_j differ by 1/(M^2 T)"),
         own_share=Expected(lambda: float(_ch08_membership(0.5)[7]),
                            hint="u_8(1/2): the own bin's g over all M bins, not only the two neighbours"))
register("ch08-ex-edge-bins", "08-soft-calibration-objectives",
         mode_2=Expected(lambda: _ch08_mode(2), rtol=1e-8, hint="solve xi_bar(c) = xi_2 by bisection or brentq"),
         mode_8=Expected(lambda: _ch08_mode(8), rtol=1e-8, hint="the centre bin: use the symmetry c -> 1 - c"))
register("ch08-ex-large-t", "08-soft-calibration-objectives",
         bin_limit=Expected(lambda: _ch08_large_t("bin"), rtol=1e-6, hint="|mean accuracy - mean confidence|"),
         lb_limit=Expected(lambda: _ch08_large_t("label"), rtol=1e-6,
                           hint="the squared calibration-in-the-large plus the variance of the confidences"))


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

    return float(dual_focal_weight([[0.7, 0.3]], [1], 3.0, variant)[0])


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
         weights=Expected(_ch09_au_exact, rtol=1e-10, hint="H_n - H_(max(r, n-m+1) - 1), by descending rank r"),
         mean=Expected(lambda: float(_ch09_au_exact().mean()), rtol=1e-10, hint="m/n"))
register("ex-ch09-rho", "09-reweighted-risk",
         ce=Expected(lambda: _ch09_hierarchy(1.5).ce, rtol=1e-8, hint="the l_rho norm of the error vector, K = 2"),
         cwece=Expected(lambda: _ch09_hierarchy(1.5).cwece, rtol=1e-8,
                        hint="Def. 3.7 averages |error|^rho over the classes before the root"),
         holds_only_at=Expected(_ch09_printed_bound_holds_only_at, rtol=1e-9,
                                hint="compare 2^(1/rho) with 2"))
register("ex-ch09-ifl", "09-reweighted-risk",
         low=Expected(lambda: _ch09_ifl("low"), rtol=1e-8, hint="the smaller root of 1 + p + gamma p log p"),
         high=Expected(lambda: _ch09_ifl("high"), rtol=1e-8, hint="the larger root of 1 + p + gamma p log p"),
         maximum=Expected(lambda: _ch09_ifl("maximum"), rtol=1e-7, hint="maximise dl/dp between the roots"))
register("ex-ch09-dual-binary", "09-reweighted-risk",
         code=Expected(lambda: _ch09_dual("official"), rtol=1e-10,
                       hint="the largest probability strictly below p_y; 0 if there is none"),
         eq24=Expected(lambda: _ch09_dual("competitor"), rtol=1e-10, hint="the largest other probability"),
         smallest_k=Expected(_ch09_smallest_k_code_differs_from_eq24, hint="does K = 2 already allow it?"))


# --- 10 The benchmark --------------------------------------------------------------------------------------------

# (the chapter's exercises are registered here)


# --- 11 The papers' tables ---------------------------------------------------------------------------------------

# (the chapter's exercises are registered here)


def _chance_coincidence_bound(p_cell: float = 1 / 50, min_cells: int = 5) -> float:
    """Row pairs compared by chapter 11's search for coinciding rows, times p_cell ** min_cells."""
    from calib.published import printed_row_values, read_published

    row_by = {"mukhoti2020": ("table", "dataset", "model"), "komisarenko2024": ("table", "dataset", "stage"),
              "karandikar2021": ("table", "dataset"), "zhou2025": ("table", "dataset", "model", "stage")}
    rows = {p: sum(sum(v is not None for v in values) >= min_cells
                   for values in printed_row_values(read_published(p), by).values()) for p, by in row_by.items()}
    return sum(n * (n - 1) // 2 for n in rows.values()) * p_cell ** min_cells


register("ch11-ex-coincidence", "11-paper-tables",
         expected_coincidences=Expected(_chance_coincidence_bound, rtol=1e-6, atol=0,
                                        hint="the number of row pairs compared, times the chance that five cells "
                                             "agree"))
