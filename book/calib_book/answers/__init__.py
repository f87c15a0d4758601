"""The expected answers behind :func:`calib_book.exercises.check`: the answer key, one ``register`` call per
exercise, in one module per chapter (``ch00_using_calib`` to ``ch12_dataset_shift``, each registering its exercises
when this package is imported); :mod:`~calib_book.answers.registry` holds the registry and the grading rules,
:mod:`~calib_book.answers.common` what several chapters share.

Each expected value is computed by the library from the exercise's data (a closed form in sympy, or the
function the chapter teaches), so an answer key cannot drift from what the chapters compute. The chapter's
solution checks its own answer against the same entry with ``check(..., strict=True)``.
"""

from __future__ import annotations

from calib_book.answers.common import BENCHMARK_MODEL, BENCHMARK_STORE, benchmark_runs
from calib_book.answers.registry import (_VALUES, ACCEPT_RULES, EXERCISES, PARAMETERS,  # noqa: F401 (_VALUES)
                                         SEED_VARIABLE, VERDICTS, Exercise, Expected, Parameter, accepted, choice,
                                         construction, course_seed, expected_value, graded_form, interval_claim,
                                         interval_right, parameter, parse_seed, register, using_seed, verdict_claim,
                                         verdict_of)

# each chapter's module registers its exercises in EXERCISES when it is imported
from calib_book.answers import (ch00_using_calib, ch01_measuring_calibration, ch02_focal_gradient,  # noqa: E402, F401
                                ch03_choosing_gamma, ch04_linear_toy, ch05_miscalibration_dynamics,
                                ch06_focal_loss_is_not_proper, ch07_focal_calibration_map,
                                ch08_soft_calibration_objectives, ch09_reweighted_risk, ch10_benchmark,
                                ch11_paper_tables, ch12_dataset_shift)

__all__ = ["Expected", "Exercise", "EXERCISES", "ACCEPT_RULES", "register", "interval_claim", "construction",
           "accepted", "expected_value", "interval_right", "verdict_of", "verdict_claim", "choice", "VERDICTS",
           "graded_form", "Parameter", "PARAMETERS", "parameter", "course_seed", "using_seed", "parse_seed",
           "SEED_VARIABLE", "benchmark_runs",
           "BENCHMARK_STORE", "BENCHMARK_MODEL"]
