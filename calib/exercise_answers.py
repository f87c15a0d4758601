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

# (the chapter's exercises are registered here)


# --- 09 Reweighted risk ------------------------------------------------------------------------------------------

# (the chapter's exercises are registered here)


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
