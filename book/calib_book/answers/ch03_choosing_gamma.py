"""The answer key of chapter 03 (Choosing gamma). Chapter 03's exercises: Prop. 2's gamma* and the schedules built
from it.
"""

from __future__ import annotations

from calib_book.answers.common import sympy_module
from calib_book.answers.registry import Expected, parameter, register


def _gamma_star(p0):
    from calib.focal import gamma_star

    return float(gamma_star(p0))


def _near_half_slope():
    sp = sympy_module()
    return 8 * (1 - sp.log(2)) / sp.log(2) ** 2


#: p0 = 0.35 in the book (the chapter tabulates 0.3); a course draws another from 0.22 to 0.45, two decimals
P0_STAR = parameter("ex-gamma-star-p035", "p0", 0.35,
                    lambda rng: float(rng.choice([v for v in range(22, 46) if v not in (30, 35)])) / 100,
                    shown=("p_0 = {}$", "threshold of $g$ at {}.", "p0v = {}\n", "$\\gamma^*({})$",
                           "whose threshold is {}"), text=str)

register("ex-gamma-star-p035", "03-choosing-gamma",
         gamma=Expected(lambda: _gamma_star(P0_STAR()), rtol=1e-8,
                        hint="the branch of Lambert W that gives a positive gamma"),
         principal=Expected(lambda: 0.0, atol=1e-8, hint="the other branch of Lambert W"))
register("ex-gamma-star-near-half", "03-choosing-gamma",
         slope=Expected(_near_half_slope, exact=True, hint="the behaviour of gamma* near p0 = 1/2"))


#: the schedule (switches 0.12 and 0.22, no row of the chapter's gamma* table) up-weights p < 0.17 in the book; a
#: course draws another target inside the middle bin, none that the chapter's table of gamma* prints (0.15, 0.20)
DESIGN_TARGET = parameter("ex-design-schedule", "target", 0.17,
                          lambda rng: float(rng.choice([0.13, 0.14, 0.16, 0.18, 0.19, 0.21])),
                          shown=("samples with $p < {}$:", "(which holds {})", "$\\gamma^*({})$, and the last",
                                 ", not {}: one", "gamma_star_eq12({}), gamma_star_eq12(0.22)",
                                 "[0.12, 0.22], {})"),
                          text=str)


def _design_schedule(part):
    from calib import focal

    schedule = focal.schedule_from_prop2([0.12, 0.22], DESIGN_TARGET())
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
