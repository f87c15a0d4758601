"""The course layer: every exercise carries its tags, serves an objective of the syllabus, and, when it has a
self-check, its solution checks its own answer against the same key (so a wrong solution fails the build)."""

import re

import pytest

from calib_book import exercises, runner
from calib_book.exercises import exercises_in, solution_text
from calib_book.pages import exercises_page

ROOT = runner.repo_root(__file__)
CHAPTERS = runner.chapters_in_toc(ROOT)
SYLLABUS = (ROOT / "book" / "syllabus.md").read_text(encoding="utf-8")
OBJECTIVES = dict(re.findall(r"^\((obj-\d+-\d+)\)=\n\*\*(O\d+\.\d+)\*\*", SYLLABUS, re.M))


def entries(name):
    return exercises_in(name, (ROOT / "chapters" / f"{name}.md").read_text(encoding="utf-8"))


def test_the_syllabus_defines_objectives_for_six_weeks():
    weeks = {code.split(".")[0] for code in OBJECTIVES.values()}
    assert weeks == {f"O{w}" for w in range(1, 7)}, OBJECTIVES


@pytest.mark.parametrize("name", CHAPTERS)
def test_every_exercise_is_tagged_and_checks_itself_when_it_can(name):
    source = (ROOT / "chapters" / f"{name}.md").read_text(encoding="utf-8")
    registered = set(exercises.labels(name))
    problems = []
    for e in entries(name):
        if e.level is None:
            problems.append(f"{e.label}: no tag line (*Level:* ... · *Time:* N min · *Objective:* ... · "
                            f"*Self-check:* yes|no) as the exercise's first paragraph")
            continue
        if not e.title:
            problems.append(f"{e.label}: no title")
        if e.level not in exercises.LEVELS:
            problems.append(f"{e.label}: level {e.level!r} is not one of {exercises.LEVELS}")
        if not 5 <= e.minutes <= 240:
            problems.append(f"{e.label}: a time of {e.minutes} min")
        if OBJECTIVES.get(e.objective_target) != e.objective:
            problems.append(f"{e.label}: objective {e.objective} <{e.objective_target}> is not in the syllabus")
        if e.self_check != (e.label in registered):
            problems.append(f"{e.label}: says self-check {'yes' if e.self_check else 'no'} but is "
                            f"{'' if e.label in registered else 'not '}in calib_book.answers")
        if e.self_check and not e.asserts:
            problems.append(f"{e.label}: its solution does not end with check({e.label!r}, ..., strict=True)")
        if not solution_text(source, e.label).strip():
            problems.append(f"{e.label}: no solution")
    stray = registered - {e.label for e in entries(name)}
    problems += [f"{label}: registered in calib_book.answers but no such exercise in {name}" for label in stray]
    assert not problems, "\n".join(problems)


def test_labels_are_unique_and_the_table_lists_them_all():
    everything = [e for n in CHAPTERS for e in entries(n)]
    labels = [e.label for e in everything]
    assert len(labels) == len(set(labels))
    page = exercises_page(everything, CHAPTERS)
    assert all(f"{{numref}}`{label}`" in page for label in labels)
    assert set(exercises.labels()) <= set(labels), set(exercises.labels()) - set(labels)


def test_a_strict_check_with_parenthesised_arguments_counts_as_the_solution_asserting():
    """A solution whose only assertion is ``check("x", interval=(a, b), strict=True)`` asserts; the pattern stopped
    at the tuple's closing parenthesis and missed it."""
    from calib_book.exercises import _solution_asserts

    source = ('```{solution-start} ex-x\n```\n```{code-cell} python\nlow, high = 1, 2\n'
              'check("ex-x", interval=(low, high), verdict="lower", strict=True)\n```\n```{solution-end}\n```\n')
    assert _solution_asserts(source, "ex-x")
    assert not _solution_asserts(source.replace("strict=True", "strict=False"), "ex-x")
