"""Self-checks for the book's exercises: ``check("ex-label", part=answer)`` says right, close or wrong, and never
shows the expected answer.

A student works an exercise in the chapter's notebook and checks each part::

    from calib_book.exercises import check
    check("ex-g-gamma-one", half=0.7298, maximum=1.1353)

prints one line per part, e.g. ``ex-g-gamma-one half: right`` or ``maximum: close (agrees to 1e-3, not to
1e-9: carry more digits)``. The expected values are computed by the library from the exercise's data when
first asked (nothing here is a typed-in number that could drift from the library), and are never printed.

The book's own solutions end with ``check(..., strict=True)``: a solution whose answer is not right raises
:class:`ExerciseError`, so the book does not build with a wrong solution.

Answers are graded by the rule the course's public and hidden tests apply (:mod:`calib_book.course_check`), so that
a ``right`` here is a point there:

- numbers and arrays: ``right`` to the precision the question asks for (``rtol = 1e-6``: six significant digits),
  within half a unit of the last digit asked, so that a correct rounding is right; ``close`` when the answer is
  the expected value correctly rounded to at least ``close_digits`` significant digits (an error that rounding
  explains: carry more digits), else ``wrong``; a shape that differs is ``wrong``. A part with several valid answers
  (a bound) is ``right`` for any of them. ``rule(label)`` states each part's rule. ``close`` is feedback: the
  course gives it no points;
- closed forms: ``right`` for a sympy expression in exact numbers whose value agrees with the expected one to 20
  significant digits; a decimal is at best ``close``; an expression in symbols is compared by its values at a few
  points of its symbols, to 12 significant digits;
- booleans and words: equal or not (words ignore case and surrounding blanks).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from calib_book import course_check
from calib_book.answers import (_VALUES, EXERCISES, Exercise, Expected, accepted, expected_value,  # noqa: F401
                                graded_form, register)  # register: for new keys

__all__ = ["ExerciseError", "PartResult", "CheckResult", "check", "labels", "parts_of", "rule", "LEVELS",
           "ExerciseEntry", "exercises_in", "solution_text"]


class ExerciseError(AssertionError):
    """A solution's answer is not right (raised by ``check(..., strict=True)``)."""


_CACHE: dict[tuple[str, str], Any] = _VALUES      # the expected values computed so far (calib_book.answers)


def labels(chapter: str | None = None) -> list[str]:
    """The labels of the exercises that have a self-check (those of one chapter when ``chapter`` is given)."""
    _load()
    return sorted(label for label, e in EXERCISES.items() if chapter is None or e.chapter == chapter)


def parts_of(label: str) -> list[str]:
    """The names of the parts ``check(label, ...)`` accepts."""
    return list(_exercise(label).parts)


def rule(label: str) -> dict[str, str]:
    """How ``check`` grades each part of exercise ``label``, in words (part name -> rule); never the answer."""
    return {name: _rule_text(spec) for name, spec in _exercise(label).parts.items()}


def _rule_text(spec: Expected) -> str:
    if spec.exact:
        return ("right: the closed form, a sympy expression in exact numbers (its value agrees to "
                f"{course_check.EXACT_DIGITS} significant digits); a decimal is not a closed form")
    if spec.accept is not None:
        return f"right: {spec.accepts}"
    if spec.choices:
        return "right: the word the question asks for, one of " + ", ".join(repr(c) for c in spec.choices)
    if spec.rtol == 0:
        right = "right: the whole number" if spec.atol >= 0.5 else \
            f"right: to {10.0 ** math.ceil(math.log10(spec.atol)):.0e} absolute, within half a unit (a correct " \
            "rounding is right)"
    else:
        right = (f"right: {_digits(spec.rtol)} significant digits, within half a unit of the last (a correct "
                 f"rounding is right)")
    if spec.close_digits is None or spec.rtol == 0 or spec.close_digits >= _digits(spec.rtol):
        return right
    return right + f"; close (feedback, no points): correctly rounded to {spec.close_digits} or more significant digits"


def _digits(rtol: float) -> int:
    return max(1, int(round(-np.log10(rtol)))) if rtol > 0 else 16


@dataclass
class PartResult:
    """The verdict on one part of an answer, and a detail that never contains the expected value."""

    part: str
    verdict: str            # "right", "close" or "wrong"
    detail: str = ""

    def line(self, label: str) -> str:
        """The printed line, e.g. ``ex-g-gamma-one half: right``."""
        return f"{label} {self.part}: {self.verdict}" + (f" ({self.detail})" if self.detail else "")


@dataclass
class CheckResult:
    """What ``check`` found, part by part; true when every part given is right."""

    label: str
    parts: list[PartResult] = field(default_factory=list)

    @property
    def right(self) -> bool:
        """True when every part given is right."""
        return all(p.verdict == "right" for p in self.parts)

    def __bool__(self) -> bool:
        return self.right

    def __str__(self) -> str:
        return "\n".join(p.line(self.label) for p in self.parts)

    def _ipython_display_(self) -> None:      # check() has printed its lines; a cell ending with it adds nothing
        pass


def check(label: str, answer=None, /, *, strict: bool = False, quiet: bool = False, **parts) -> CheckResult:
    """Check answers to an exercise without revealing the expected ones.

    Parameters
    ----------
    label : str
        The exercise's label, as in the book (``labels()`` lists them).
    answer : optional
        The answer, for an exercise with a single part (named ``answer``).
    strict : bool
        Raise :class:`ExerciseError` unless every part given is right (the book's solutions use it).
    quiet : bool
        Print nothing.
    **parts
        The answer to each named part (``parts_of(label)`` lists them). Parts not given are not checked.

    Returns
    -------
    CheckResult
        ``right``/``close``/``wrong`` per part; true when all are right.
    """
    exercise = _exercise(label)
    if answer is not None:
        if "answer" in parts:
            raise ValueError("give the answer either positionally or as answer=..., not both.")
        parts["answer"] = answer
    if not parts:
        raise ValueError(f"check({label!r}) was given no answer; its parts are: {', '.join(exercise.parts)}.")
    unknown = [name for name in parts if name not in exercise.parts]
    if unknown:
        raise ValueError(f"exercise {label!r} has no part {unknown[0]!r}; its parts are: "
                         f"{', '.join(exercise.parts)}.")
    result = CheckResult(label)
    for name, given in parts.items():
        expected = exercise.parts[name]
        result.parts.append(_compare(name, given, expected_value(label, name), expected, f"{label} {name}"))
    if not quiet:
        print(result)
    if strict and not result.right:
        raise ExerciseError(f"the solution to {label} is not right: "
                            + "; ".join(p.line(label) for p in result.parts if p.verdict != "right"))
    return result


def _exercise(label: str) -> Exercise:
    _load()
    if not isinstance(label, str) or label not in EXERCISES:
        raise ValueError(f"label={label!r} is not an exercise with a self-check; calib_book.exercises.labels() lists "
                         f"them (the label is the one under the exercise's title in the book).")
    return EXERCISES[label]


def _compare(name: str, given, expected, spec: Expected, where: str = "") -> PartResult:
    """One part's verdict under the course's rule (:func:`calib_book.answers.graded_form`,
    :func:`calib_book.course_check.hidden_verdict`), with ``close`` and a detail as feedback."""
    hint = spec.hint
    if spec.accept is not None and spec.accept not in ("any-of", "interval"):      # a construction: its property
        right = accepted(spec, expected, given)
        return PartResult(name, "right" if right else "wrong", "" if right else hint)
    form = graded_form(spec, expected, where or name)
    try:
        if form["kind"] in ("text", "bool"):
            right = course_check.choice_verdict(given, form)
        else:
            first = form["options"][0] if form["kind"] == "any-of" else form
            course_check.element_integers(given, {**first, "exponents": [b[0] for b in first["bands"]]})  # its form
            right = course_check.hidden_verdict(given, form)
    except AssertionError as exc:
        if spec.exact and str(exc).startswith(("a decimal", "the expression holds a decimal")):
            return _decimal_for_closed_form(name, given, expected, spec, hint)
        return PartResult(name, "wrong", str(exc) if str(exc) != course_check.NOT_ANSWERED else hint)
    if right:
        return PartResult(name, "right")
    if form["kind"] == "number" and spec.close_digits is not None and spec.rtol > 0:
        agreed = _significant_digits_agreed(np.asarray(given, dtype=float), np.asarray(expected, dtype=float))
        if spec.close_digits <= agreed < _digits(spec.rtol):
            return PartResult(name, "close", f"right to {agreed} significant digits, the check asks for "
                                             f"{_digits(spec.rtol)}: carry more digits or compute in float64"
                                             + (f"; {hint}" if hint else ""))
    return PartResult(name, "wrong", hint)


def _significant_digits_agreed(given: np.ndarray, expected: np.ndarray) -> int:
    """The most significant digits k (up to 15) such that every entry of ``given`` is within half a unit in the
    k-th significant digit of ``expected`` (a correct rounding of it to k digits); 0 when none."""
    scale = 10.0 ** np.floor(np.log10(np.where(expected == 0, 1.0, np.abs(expected))))
    error = np.abs(given - expected) / scale               # in units of the leading digit
    k = 0
    while k < 15 and np.all(error <= 0.5 * 10.0 ** (-k) * (1 + 1e-9)):
        k += 1
    return k


def _decimal_for_closed_form(name, given, expected, spec, hint) -> PartResult:
    """A decimal (or an expression holding one) for a part that asks for a closed form: at best close."""
    import sympy

    try:
        value = float(sympy.N(sympy.sympify(given), 30))
    except (TypeError, ValueError, sympy.SympifyError):
        return PartResult(name, "wrong", hint)
    if _significant_digits_agreed(np.array(value), np.array(float(sympy.N(expected, 30)))) >= (spec.close_digits or 3):
        return PartResult(name, "close", "the value agrees; the question asks for the closed form (a sympy expression "
                                         "in exact numbers)")
    return PartResult(name, "wrong", hint)


def _load() -> None:
    """The answer key is ``calib_book.answers``, registered when it is imported (above)."""
    return None


# --- The exercises of the chapters, as the course layer lists them ------------------------------------------------

#: The levels an exercise may carry in its tag line.
LEVELS = ("easy", "medium", "hard")

_EXERCISE = re.compile(r"^(?P<fence>`{3,}|:{3,})\{exercise\}[ \t]*(?P<title>[^\n]*)\n(?P<body>.*?)^(?P=fence)[ \t]*$",
                       re.M | re.S)
_LABEL = re.compile(r"^:label:\s*(\S+)", re.M)
_TAGS = re.compile(r"^\*Level:\* (?P<level>\w+) · \*Time:\* (?P<minutes>\d+) min · \*Objective:\* "
                   r"\{ref\}`(?P<objective>O\d+\.\d+) <(?P<target>obj-\d+-\d+)>` · \*Self-check:\* (?P<check>yes|no)$",
                   re.M)


@dataclass
class ExerciseEntry:
    """One exercise of a chapter, as its source declares it.

    ``level``, ``minutes``, ``objective`` and ``self_check`` come from the tag line that opens the exercise,
    ``*Level:* medium · *Time:* 20 min · *Objective:* {ref}`O2.1 <obj-2-1>` · *Self-check:* yes``;
    ``asserts`` is whether its solution checks its own answer (``check(..., strict=True)`` or an ``assert``).
    They are None when the exercise has no tag line.
    """

    chapter: str
    label: str
    title: str
    level: str | None = None
    minutes: int | None = None
    objective: str | None = None
    objective_target: str | None = None
    self_check: bool | None = None
    asserts: bool = False


def exercises_in(chapter: str, source: str) -> list[ExerciseEntry]:
    """The exercises of a chapter's MyST source, in order, with their tags and whether their solutions assert."""
    entries = []
    for match in _EXERCISE.finditer(source):
        label = _LABEL.search(match.group("body"))
        if label is None:
            raise ValueError(f"chapter {chapter}: the exercise {match.group('title')!r} has no :label:; give every "
                             f"exercise a label so that its solution and self-check can name it.")
        entry = ExerciseEntry(chapter, label.group(1), match.group("title").strip())
        tags = _TAGS.search(match.group("body"))
        if tags:
            entry.level, entry.minutes = tags.group("level"), int(tags.group("minutes"))
            entry.objective, entry.objective_target = tags.group("objective"), tags.group("target")
            entry.self_check = tags.group("check") == "yes"
        entry.asserts = _solution_asserts(source, entry.label)
        entries.append(entry)
    return entries


def solution_text(source: str, label: str) -> str:
    """The text of the solution to exercise ``label`` (a ``{solution}`` block or ``{solution-start}`` ...
    ``{solution-end}``), or "" when it has none."""
    start = re.search(r"^(`{3,}|:{3,})\{solution(-start)?\}[ \t]*" + re.escape(label) + r"[ \t]*$", source, re.M)
    if start is None:
        return ""
    if start.group(2):
        end = re.compile(r"^(`{3,}|:{3,})\{solution-end\}", re.M).search(source, start.end())
        return source[start.end(): end.start() if end else len(source)]
    end = re.compile(r"^" + re.escape(start.group(1)) + r"[ \t]*$", re.M).search(source, start.end())
    return source[start.end(): end.start() if end else len(source)]


def _solution_asserts(source: str, label: str) -> bool:
    text = solution_text(source, label)
    # the call's arguments may hold parentheses of their own, e.g. interval=(low, high)
    strict_check = re.search(r"check\(\s*[\"']" + re.escape(label) + r"[\"'](?:[^()]|\([^()]*\))*?strict\s*=\s*True",
                             text, re.S)
    return bool(strict_check or re.search(r"^\s*assert\b", text, re.M))
