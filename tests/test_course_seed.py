"""The course seed (issue 46): ``make course COURSE_SEED=2031`` redraws the data of every exercise that declares a
parameter (calib_book.answers.registry.parameter), and its key with them, so that neither the repository nor a past
term's key answers this term. The exercises that keep the book's data say why (calib_book.answers.seeded.FIXED)."""

import re
from pathlib import Path

import nbformat
import numpy as np
import pytest
import sympy

from calib_book import course, exercises
from calib_book.answers import EXERCISES, PARAMETERS, expected_value
from calib_book.answers.seeded import FIXED, coverage_line, seed_coverage

ROOT = Path(__file__).resolve().parents[1]
#: Two terms' seeds.
SEEDS = (2031, 2032)


def _same(a, b) -> bool:
    """Whether two expected values are the same answer (numbers to 1e-12, arrays, words, expressions)."""
    if isinstance(a, sympy.Basic) or isinstance(b, sympy.Basic):
        return sympy.simplify(sympy.sympify(a) - sympy.sympify(b)) == 0
    if isinstance(a, str) or isinstance(b, str):
        return a == b
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return a.shape == b.shape and bool(np.allclose(a, b, rtol=1e-12, atol=1e-15))


def _exercise_and_solution(label: str) -> tuple[str, str]:
    """The statement (its ``{exercise}`` block) and the solution of exercise ``label``, as its chapter has them."""
    source = (ROOT / "chapters" / f"{EXERCISES[label].chapter}.md").read_text()
    block = next(m.group(0) for m in exercises._EXERCISE.finditer(source)
                 if re.search(rf"^:label:\s*{re.escape(label)}\s*$", m.group(0), re.M))
    return block, exercises.solution_text(source, label)


def test_every_exercise_draws_its_data_from_the_seed_or_says_why():
    """Before issue 46's round 3, 8 of the 58 exercises declared parameters and nothing said why the others did not;
    now each exercise is in exactly one of PARAMETERS and FIXED, and the count is the line `make course` prints."""
    drawn, fixed = seed_coverage()
    labels = exercises.labels()
    assert sorted(drawn + list(fixed)) == sorted(labels)
    assert set(FIXED) <= set(labels), set(FIXED) - set(labels)          # no reason left for a removed exercise
    assert all(len(reason) > 20 for reason in fixed.values())
    assert len(drawn) >= 33
    assert coverage_line(2031) == f"course seed 2031: {len(drawn)} of {len(labels)} exercises draw their data from it"
    with pytest.raises(ValueError, match="neither"):
        seed_coverage([*labels, "ex-not-declared"])                     # a new exercise must declare or explain


@pytest.mark.parametrize("label", sorted(PARAMETERS))
def test_each_parameter_is_shown_where_the_course_redraws_it(label):
    """Every text a parameter replaces occurs in the exercise's statement or solution (else the course would give
    the book's datum with this term's key, or a right submission would compute the book's answer), each seed draws a
    value other than the book's, and the course's text of the exercise shows the drawn value."""
    statement, solution = _exercise_and_solution(label)
    shown = False
    for parameter in PARAMETERS[label]:
        for seed in SEEDS:
            value = parameter.value(seed)
            assert not _same(value, parameter.default), (label, parameter.name, seed)
            replacements = parameter.replacements(seed)
            assert any(old != new for old, new in replacements), (label, parameter.name, seed)
            for old, new in replacements:        # (a text may show one element of a drawn tuple, e.g. a pair's gamma)
                assert old in statement + solution, (label, parameter.name, old)
                if old in statement:                     # what the student notebook states
                    shown = True
                    assert new in course._exercise_text(statement, seed), (label, parameter.name, new)
                if old in solution:                      # what the instructors' notebook and a planted submission run
                    assert new in course._substitute(solution, label, seed), (label, parameter.name, new)
    assert shown, f"{label}: no parameter is shown in the statement, so the student would not see this term's data"


@pytest.mark.parametrize("label", sorted(PARAMETERS))
def test_the_key_of_each_parametrised_exercise_changes_with_the_seed(label):
    """Under each of two course seeds, the key differs from the book's in at least one part: a past key or the
    repository does not answer this term. (The values are stored like the book's, so a second run reads them.)"""
    for seed in SEEDS:
        changed = [part for part in EXERCISES[label].parts
                   if not _same(expected_value(label, part, seed), expected_value(label, part, None))]
        assert changed, (label, seed)


@pytest.fixture(scope="module")
def course_2031(tmp_path_factory):
    """Chapters 03 and 06 of the course edition for seed 2031."""
    return course.build_course(ROOT, chapters=["03-choosing-gamma", "06-focal-loss-is-not-proper"],
                               out=tmp_path_factory.mktemp("course") / "course", seed=2031)


def test_the_student_notebook_shows_the_drawn_data_and_a_right_submission_scores_full(course_2031, capsys):
    """Chapter 03 for seed 2031: the student notebook states the drawn p0 and target, not the book's, and the
    planted right submission for that seed (the book's solutions on the drawn data) earns every point."""
    nb = nbformat.read(course_2031 / "student" / "03-choosing-gamma.ipynb", as_version=4)
    text = "\n".join(cell.source for cell in nb.cells if cell.cell_type == "markdown")
    for label in ("ex-gamma-star-p035", "ex-design-schedule"):
        for parameter in PARAMETERS[label]:
            (old, new), *_ = parameter.replacements(2031)
            assert new in text and old not in text, (label, old, new)
    rows = course.self_test(course_2031, kinds=("right",), chapters=["03-choosing-gamma"], otter=False)
    assert [(r.points, r.possible) for r in rows] == [(rows[0].possible, rows[0].possible)], rows
    assert rows[0].possible == 7


def test_a_submission_on_the_books_data_loses_the_points_of_every_redrawn_exercise(course_2031, tmp_path):
    """Chapter 06, whose five exercises all draw their data: the planted right submission for the book's data (what
    the repository's solutions compute) graded by seed 2031's autograder loses points in every exercise."""
    chapter = "06-focal-loss-is-not-proper"
    assert all(label in PARAMETERS for label in exercises.labels(chapter))
    nb, _ = course.planted_submission(ROOT, chapter, "right", None)
    submission = tmp_path / f"{chapter}.ipynb"
    nbformat.write(nb, submission)
    graded = course.grade(course_2031 / "autograder" / f"{chapter}.zip", submission)
    assert set(graded.possible) == set(exercises.labels(chapter))
    # the notebook ran to its end and every answer was read: the points are lost to wrong values, not to a crash
    assert graded.notes == (), graded.notes
    assert all(graded.points[label] < graded.possible[label] for label in graded.possible), graded.points
