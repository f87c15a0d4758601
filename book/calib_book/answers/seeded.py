"""Which exercises a course seed redraws (issue 46): those that declare a :func:`~calib_book.answers.registry.parameter`
draw their data from ``make course COURSE_SEED=...``, and :data:`FIXED` says, for each of the others, why its data
stay the book's. :func:`seed_coverage` checks that every exercise is in exactly one of the two, and
:func:`coverage_line` is the line ``make course`` prints.

A course seed is one per term, not one per student: the course's hidden tests are computed when the course is built
and are the same for every submission of a chapter (the README's section on teaching from the book says why).
"""

from __future__ import annotations

__all__ = ["FIXED", "seed_coverage", "coverage_line"]

_TRAININGS_00 = ("trains small networks on Fashion-MNIST in a setting the section's introduction states once for its "
                 "three exercises (seeds 0, 1 and 2, outside any exercise, where the course edition's substitution of "
                 "an exercise's data does not reach); a seed per exercise would make their shared training loop "
                 "disagree with the text")
_CONSTRUCTION = ("asks for a construction: any valid example is right, checked by a property whose source the "
                 "course's tests carry and which cannot read a seed; no datum to draw")

#: The exercises whose data a course seed does not redraw, with the reason, by label.
FIXED: dict[str, str] = {
    "ch00-ex-ece-grid": _TRAININGS_00,
    "ch00-ex-focal-3": _TRAININGS_00,
    "ch00-ex-secondary": _TRAININGS_00,
    "ch01-ex-converse": _CONSTRUCTION,
    "ch04-ex-log-growth": "its third part compares the prediction with the growth the chapter itself measured on its "
                          "seed-0 separable draw",
    "ch04-ex-noise": "the clusters at plus and minus 4 are the paper's `class_sep=4`, the reading the exercise tests",
    "ch04-ex-stationary": "the weights are the chapter's own focal-loss solution on its seed-0 draw (`w_fl`)",
    "ch05-ex-flsd": "reads chapter 10's stored grid (its five seeds, all the store holds) and the chapter's own "
                    "seed-0 FLSD-53 run",
    "ch05-ex-temperature": "reads chapter 10's stored grid, all five seeds it holds",
    "ch07-ex-beta0": "a symbolic derivative, and its value at gamma = 1 is checked against the bound Fig. 3 prints "
                     "for gamma = 1",
    "ch07-ex-line-cost": "counts the evaluations of the paper's grid at the paper's m = 500; no datum to draw",
    "ch07-ex-prop5-search": "a construction (a property fixed at gamma = 0.5, whose source the tests carry) and a "
                            "search over the whole simplex; no datum to draw",
    "ch08-ex-beta": "the key reruns ten small trainings (seeds 0 to 4, two weights), about two minutes on one core",
    "ch08-ex-edge-bins": "M = 15 and T = 0.01 are the paper's and the chapter's, shared by the solutions of the "
                         "chapter's other exercises, and the parts are named after the bins (mode_2, mode_8)",
    "ch08-ex-sbece-train": "the key reruns six small trainings, about two minutes on one core",
    "ch10-ex-new-loss": "the key reruns six 10-epoch trainings of chapter 10's recipe on Fashion-MNIST",
    "ch10-ex-paired": "reads chapter 10's stored grid, all five seeds it holds; the chapter's ranking table prints "
                      "every other loss's ECE minus CE with an interval, so another pair of losses would be answered "
                      "there",
    "ch10-ex-verify": "a word answer about what the post-hoc maps cost; no datum to draw",
    "ch11-ex-yardstick": "the data are the paper's printed Table 1",
    "ex-batch-by-hand": _CONSTRUCTION,
    "ex-flsd532": "the schedule is the paper's FLSD-532",
    "ex-g-gamma-one": "gamma = 1 is the case with closed forms (at another gamma the threshold solves a "
                      "transcendental equation, chapter 03's Lambert W)",
    "ex-g-near-one": "a symbolic limit in gamma; no datum",
    "ex-gamma-star-near-half": "a symbolic constant; no datum",
    "ex-multiclass-entropy": _CONSTRUCTION,
}


def seed_coverage(labels: list[str] | None = None) -> tuple[list[str], dict[str, str]]:
    """The exercises that draw their data from a course seed, and the others with the reason (:data:`FIXED`), among
    ``labels`` (default: every exercise with a self-check). Raises ValueError for an exercise in both or in
    neither: a new exercise declares a parameter or says in :data:`FIXED` why it has none."""
    from calib_book import exercises
    from calib_book.answers import PARAMETERS

    labels = exercises.labels() if labels is None else list(labels)
    both = [label for label in labels if label in PARAMETERS and label in FIXED]
    neither = [label for label in labels if label not in PARAMETERS and label not in FIXED]
    if both or neither:
        raise ValueError(f"exercises {both} declare parameters and are in FIXED, and {neither} are in neither: "
                         f"give each exercise a parameter (calib_book.answers.registry.parameter) or a reason in "
                         f"calib_book.answers.seeded.FIXED, not both.")
    return [label for label in labels if label in PARAMETERS], {label: FIXED[label] for label in labels
                                                                if label in FIXED}


def coverage_line(seed: int | None, labels: list[str] | None = None) -> str:
    """``course seed 2031: 31 of 58 exercises draw their data from it`` (for ``labels``, default every exercise)."""
    drawn, fixed = seed_coverage(labels)
    if seed is None:
        return (f"no course seed: the book's own data ({len(drawn)} of {len(drawn) + len(fixed)} exercises would "
                f"draw theirs from one)")
    return f"course seed {seed}: {len(drawn)} of {len(drawn) + len(fixed)} exercises draw their data from it"
