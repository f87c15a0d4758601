"""The answer key's registry: :class:`Expected` (one part's expected answer and its grading rule), :func:`register`
(one call per exercise, in the chapter modules of :mod:`calib_book.answers`), :data:`EXERCISES`, and
:func:`expected_value`, which computes each value once and stores it for the other processes of a checkout.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import pickle
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

__all__ = ["Expected", "Exercise", "EXERCISES", "ACCEPT_RULES", "register", "interval_claim", "construction",
           "accepted", "expected_value", "interval_right", "verdict_of", "verdict_claim", "choice",
           "VERDICTS", "graded_form", "symbol_points", "Parameter", "PARAMETERS", "parameter", "course_seed",
           "using_seed", "parse_seed", "SEED_VARIABLE"]


@dataclass(frozen=True)
class Expected:
    """One part's expected answer: a function that computes it, and the rule that grades an answer to it.

    A numeric answer is ``right`` to the precision the question asks for, ``rtol = 1e-6`` asking for six
    significant digits (``atol`` an absolute precision where the value is 0 or the question gives one): within
    half a unit of the last digit asked, so that a correct rounding is right (:mod:`calib_book.course_check`, the rule
    ``check``, the course's public and its hidden tests share); ``close`` (feedback of ``check`` only, worth nothing
    in the course) when it is the expected value correctly rounded to at least ``close_digits`` significant digits
    (an error that rounding explains, so 25 ln 2 for 24 ln 2, 4 % off, is ``wrong``), and ``wrong`` beyond.
    :func:`calib_book.exercises.rule` states the rule of each part in words, and the course's answer cells too.

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
    accept : str, callable or None
        For a question with several valid answers, the rule that decides (:mod:`calib_book.course_check` applies it,
        in ``check`` and in the course's public and hidden tests alike): ``"any-of"`` (within ``rtol``/``atol`` of
        the expected value or of one of ``alternatives()``), ``"interval"`` (the expected value is the key's 95 %
        interval from the runs the question fixes: :func:`interval_right`),
        or a construction's property ``verify(answer) -> bool`` (the expected value is one valid example; see
        :func:`construction`).
    accepts : str
        The valid answers in words, for :func:`calib_book.exercises.rule` (with ``accept``).
    alternatives : callable or None
        With ``accept="any-of"``: returns the list of the other valid values.
    exact : bool
        The part asks for a closed form: only a sympy expression in exact numbers whose value agrees with the
        expected one to :data:`~calib_book.course_check.EXACT_DIGITS` significant digits is ``right``; a decimal
        number (which the chapter may print) is at best ``close``.
    choices : tuple of str or None
        For a word answer (a verdict, a choice between named options): the options the question names. The
        course's public test checks only that the answer is one of them (a public right or wrong would be an oracle
        that a few tries read); the hidden test grades it.
    verdict_on : str or None
        For a verdict on an interval the exercise also asks for: that part's name. The public test checks that the
        verdict follows from the student's own interval.
    """

    compute: Callable[[], Any]
    rtol: float = 1e-6
    atol: float = 1e-12
    close_digits: int | None = 3
    hint: str = ""
    points: int = 1
    accept: str | Callable[[Any], bool] | None = None
    accepts: str = ""
    exact: bool = False
    alternatives: Callable[[], list] | None = None
    choices: tuple[str, ...] | None = None
    verdict_on: str | None = None

    def __post_init__(self):
        if isinstance(self.accept, str) and self.accept not in ACCEPT_RULES:
            raise ValueError(f"accept={self.accept!r}: give one of {', '.join(ACCEPT_RULES)}, a construction's "
                             f"verify(answer) -> bool, or None.")
        if (self.alternatives is not None) != (self.accept == "any-of"):
            raise ValueError("alternatives= goes with accept='any-of' (the other valid values), and only with it.")


#: The rules for a part with several valid answers that need no secret to state (see :class:`Expected`).
ACCEPT_RULES = ("any-of", "interval")


@dataclass(frozen=True)
class Exercise:
    """An exercise's self-check: its label, its chapter, and the expected answer of each named part."""

    label: str
    chapter: str
    parts: dict[str, Expected]


#: Every exercise with a self-check, by label (filled by the ``register`` calls of the chapter modules).
#:
#: :meta hide-value:
EXERCISES: dict[str, Exercise] = {}


#: The expected values computed so far in this process, by ``(label, part)`` (the book's data) or ``(label, part,
#: "seed<k>")`` (a course's): each is computed once, whoever asks (``check``, the course builder, the leak scan);
#: some rerun small trainings.
_VALUES: dict[tuple[str, ...], Any] = {}


# --- the course seed: the data of this term's exercises ------------------------------------------------------------

#: The environment variable that names a course's seed (``make course COURSE_SEED=2031`` sets it): the exercises'
#: data, and so the key, are drawn from it; unset (or empty), the book's own data.
SEED_VARIABLE = "CALIB_COURSE_SEED"

_ACTIVE_SEED: list[int | None] = []          # the seed of a `using_seed` block, innermost last


def course_seed() -> int | None:
    """The course seed in force: that of the innermost :func:`using_seed` block, else ``$CALIB_COURSE_SEED``, else
    None (the book's own data)."""
    if _ACTIVE_SEED:
        return _ACTIVE_SEED[-1]
    return parse_seed(os.environ.get(SEED_VARIABLE, ""), SEED_VARIABLE)


def parse_seed(text, where: str = "seed") -> int | None:
    """A course seed from text or a number: a non-negative integer, or None for "" / None (the book's data)."""
    if text is None or (isinstance(text, str) and not text.strip()):
        return None
    try:
        seed = int(text)
    except (TypeError, ValueError):
        seed = -1
    if isinstance(text, bool) or seed < 0:
        raise ValueError(f"{where}={text!r}: give the course seed as a non-negative integer (e.g. the year, 2031), "
                         f"or leave it unset for the book's own data.")
    return seed


@contextlib.contextmanager
def using_seed(seed: int | None):
    """Compute the key for course seed ``seed`` inside the block (None: the book's data)."""
    _ACTIVE_SEED.append(parse_seed(seed))
    try:
        yield
    finally:
        _ACTIVE_SEED.pop()


@dataclass(frozen=True)
class Parameter:
    """A datum of an exercise that a course seed redraws: its value in the book (``default``), how a course draws
    it (``draw(rng)``), how it is printed (``text(value)``), and where the exercise shows it: each template of
    ``shown`` (or a pair of a template and its own ``text``) holds ``{}`` where the printed value goes, and the
    default's print must occur in the exercise's statement or solution (``tests/test_course.py`` checks), where the
    course edition puts the drawn one."""

    label: str
    name: str
    default: Any
    draw: Callable[[Any], Any]
    shown: tuple
    text: Callable[[Any], str] = repr

    def value(self, seed: int | None = None):
        """The datum for course seed ``seed`` (default: :func:`course_seed`); the book's for None."""
        seed = course_seed() if seed is None else seed
        if seed is None:
            return self.default
        import zlib

        import numpy as np

        return self.draw(np.random.default_rng([seed, zlib.crc32(f"{self.label} {self.name}".encode())]))

    def __call__(self):
        return self.value()

    def replacements(self, seed: int | None) -> list[tuple[str, str]]:
        """``(book's text, course's text)`` for each template of ``shown`` (a template, or a pair of a template and
        the function that prints the value for it)."""
        new = self.value(seed) if seed is not None else self.default
        out = []
        for shown in self.shown:
            template, text = shown if isinstance(shown, tuple) else (shown, self.text)
            out.append((template.format(text(self.default)), template.format(text(new))))
        return out


#: The parameters of each exercise that a course seed redraws, by label.
PARAMETERS: dict[str, list[Parameter]] = {}


def parameter(label: str, name: str, default, draw: Callable[[Any], Any], shown: tuple,
              text: Callable[[Any], str] = repr) -> Parameter:
    """Declare a datum of exercise ``label`` that a course seed redraws (see :class:`Parameter`); the key's
    computation calls the returned object for the value in force."""
    if not shown:
        raise ValueError(f"parameter({label!r}, {name!r}): give shown=, the text(s) of the exercise that show it.")
    made = Parameter(label, name, default, draw, tuple(shown), text)
    PARAMETERS.setdefault(label, []).append(made)
    return made


def expected_value(label: str, part: str, seed: int | None = None):
    """The expected value of ``part`` of exercise ``label`` for the course seed in force (``seed``, else
    :func:`course_seed`; None: the book's data), computed on first use and kept for the process, and stored in a
    checkout's ``_build/cache/answers/KEY/`` (:func:`~calib_book.cache.answers_key`: the library, the stored
    results, the versions) so that another process of the same checkout reads it instead of computing it again
    (``make test`` asks for every value in two processes; ``make course`` after it computes none). An exercise
    without :func:`parameter` has the same value for every seed."""
    seed = course_seed() if seed is None else seed
    compute = EXERCISES[label].parts[part].compute
    if seed is None or label not in PARAMETERS:
        return _computed_once(label, part, compute)
    with using_seed(seed):
        return _computed_once(label, part, compute, f"seed{seed}")


def _computed_once(label: str, part: str, compute: Callable[[], Any], variant: str | None = None):
    """``compute()``, kept for the process under ``(label, part)`` and stored as :func:`expected_value` says. The
    process that computes a value holds its lock meanwhile, and another that asks for it waits and reads it: two
    processes that ask at once (a chapter's kernel and the course build, in `make test`) compute it once."""
    key = (label, part) if variant is None else (label, part, variant)
    if key not in _VALUES:
        stored = _stored_value_file(label, part if variant is None else f"{part}.{variant}")
        with _value_lock(stored):
            if stored is not None and stored.is_file():
                try:
                    _VALUES[key] = pickle.loads(stored.read_bytes())
                    return _VALUES[key]
                except Exception:                   # noqa: BLE001 - damaged or from elsewhere: compute it again
                    pass
            _VALUES[key] = compute()
            if stored is not None:
                try:
                    from calib_book.claims import write_atomic

                    write_atomic(stored, pickle.dumps(_VALUES[key]))
                except Exception:                   # noqa: BLE001 - not picklable, or a read-only checkout
                    pass
    return _VALUES[key]


@contextlib.contextmanager
def _value_lock(stored: Path | None):
    """An exclusive lock on ``stored`` (``<stored>.lock`` beside it, released when the process ends, however it
    ends); none outside a checkout, in a read-only one, or where ``fcntl`` does not exist (Windows)."""
    try:
        import fcntl

        stored.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(stored.with_name(stored.name + ".lock"), os.O_RDWR | os.O_CREAT, 0o644)
    except (ImportError, AttributeError, OSError):  # no fcntl, no store (None), or a read-only checkout
        yield
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


@functools.lru_cache(maxsize=1)
def _value_store() -> Path | None:
    """``_build/cache/answers/KEY`` of the checkout that holds this package, or None outside a checkout."""
    root = Path(__file__).resolve().parents[3]          # <root>/book/calib_book/answers/registry.py
    if not ((root / "calib").is_dir() and (root / "_toc.yml").is_file()):
        return None
    import shutil
    import time

    from calib_book.cache import answers_key

    store, key = root / "_build" / "cache" / "answers", answers_key(root)
    # The stores of other keys untouched for an hour go: an earlier library's values are stale for good. A recent
    # one may be another process's (a chapter's kernel, whose CPU settings are pinned, has a key of its own).
    for other in store.iterdir() if store.is_dir() else ():
        if other.name != key and time.time() - other.stat().st_mtime > 3600:
            shutil.rmtree(other, ignore_errors=True)
    return store / key


def _stored_value_file(label: str, part: str) -> Path | None:
    store = _value_store()
    return None if store is None else store / f"{label}.{part}.pickle"


def register(label: str, chapter: str, **parts: Expected) -> Exercise:
    """Add an exercise's self-check: ``register("ex-x", "02-focal-gradient", threshold=Expected(...))``."""
    if not parts:
        raise ValueError(f"register({label!r}): give at least one part, e.g. threshold=Expected(lambda: ...).")
    if label in EXERCISES:
        raise ValueError(f"exercise {label!r} is registered twice; labels are unique book-wide.")
    # the other valid values of an "any-of" part are computed once and stored too, like the expected value
    parts = {name: spec if spec.alternatives is None else dataclasses.replace(
                 spec, alternatives=functools.partial(_alternatives, label, name, spec.alternatives))
             for name, spec in parts.items()}
    exercise = Exercise(label, chapter, parts)
    EXERCISES[label] = exercise
    return exercise


def _alternatives(label: str, name: str, compute: Callable[[], list]) -> list:
    """The other valid values of an ``any-of`` part, computed once (per course seed) and stored like the value."""
    seed = course_seed()
    variant = None if seed is None or label not in PARAMETERS else f"seed{seed}"
    return _computed_once(label, f"{name}.alternatives", compute, variant)


def interval_right(reference, given) -> bool:
    """The rule for an interval a training exercise claims (:func:`calib_book.course_check.interval_bands`): each end
    within half a unit of the 3rd significant digit of the reference interval's width; false, rather than an error,
    for an answer that is not an interval. The runs a question fixes are bit-reproducible (the notebooks pin torch's
    CPU kernels), so the rule asks for their own interval: it was "within seed noise" (the centre within a quarter
    width, the width within a factor 1.5), which took a reversed difference near 0, Welch's interval for a paired
    one and AdaECE for the equal-width ECE."""
    from calib_book import course_check

    spec = {"kind": "interval", "shape": [2], "bands": course_check.interval_bands(reference)}
    return course_check.hidden_verdict(given, spec)


#: The three verdicts on a 95 % interval of a difference.
VERDICTS = ("lower", "higher", "no difference")


def interval_claim(reference: Callable[[], Any], hint: str, points: int = 2) -> Expected:
    """An Expected for a training exercise's 95 % interval ``(low, high)`` from the runs the question fixes, graded
    by :func:`interval_within_seed_noise` against ``reference()``."""
    return Expected(reference, rtol=1e-6, atol=1e-9, close_digits=None, hint=hint, points=points,
                    accept="interval",
                    accepts="the interval (low, high) of the runs the question fixes (bit-reproducible with the "
                            "notebook's pinned CPU kernels): each end within half a unit of the 3rd significant "
                            "digit of the interval's width")


def verdict_claim(compute: Callable[[], str], hint: str, on: str | None = "interval", points: int = 1) -> Expected:
    """An Expected for a verdict, ``'lower'``, ``'higher'`` or ``'no difference'``, that ``compute()`` returns (the
    chapter's module computes it, e.g. ``lambda: verdict_of(interval())``): the verdict on the interval the
    exercise's part ``on`` asks for (None: on an interval the exercise does not ask for)."""
    return Expected(compute, close_digits=None, hint=hint, points=points, choices=VERDICTS, verdict_on=on)


def choice(compute: Callable[[], str], choices: tuple[str, ...], hint: str, points: int = 1) -> Expected:
    """An Expected for a word answer that ``compute()`` returns, one of ``choices`` (which the question names)."""
    return Expected(compute, close_digits=None, hint=hint, points=points, choices=tuple(choices))


def construction(verify: Callable[[Any], bool], example: Callable[[], Any], accepts: str, hint: str,
                 points: int = 2) -> Expected:
    """An Expected for an exercise that asks for an example or a counterexample: any answer for which
    ``verify(answer)`` is true is right; ``example()`` is one (the course's planted right submission).

    ``verify`` must be self-contained (its imports inside its body; numpy, scipy and sympy only; no module
    globals): the course's test files carry its source, so that students' public tests and the hidden tests apply
    the same property. It returns False (or raises) for an answer of the wrong form."""
    if not callable(verify) or not callable(example):
        raise ValueError("construction(verify, example, ...): give two callables, verify(answer) -> bool and "
                         "example() -> one valid answer.")
    return Expected(example, close_digits=None, hint=hint, points=points, accept=verify, accepts=accepts)


def accepted(spec: Expected, expected, given) -> bool:
    """Whether ``given`` is one of the valid answers of a part with an ``accept`` rule (see :class:`Expected`)."""
    from calib_book import course_check

    if spec.accept in ("interval", "any-of"):
        return course_check.hidden_verdict(given, graded_form(spec, expected, ""))
    try:
        return bool(spec.accept(given))
    except Exception:           # a construction of the wrong form is not a valid one
        return False


def symbol_points(expression, where: str, count: int = 3) -> dict[str, list[float]]:
    """Points in (0.15, 0.85) for each symbol of ``expression``, drawn from a generator seeded by ``where`` (the
    part: ``check``, the public and the hidden tests evaluate at the same points), where it is real and finite."""
    import zlib

    import numpy as np

    from calib_book import course_check

    rng = np.random.default_rng(zlib.crc32(where.encode()))
    names = sorted(s.name for s in expression.free_symbols)
    for _ in range(100):
        points = {n: [float(round(v, 6)) for v in rng.uniform(0.15, 0.85, count)] for n in names}
        exponents = [-30] * count
        try:
            course_check.expression_integers(expression, exponents, points)
        except AssertionError:
            continue
        return points
    raise ValueError(f"{where}: the expected expression is not real and finite at any of 100 draws of its symbols in "
                     f"(0.15, 0.85); give the part numeric data.")


def _is_count(value) -> bool:
    import numpy as np

    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)) or (
        isinstance(value, np.ndarray) and value.dtype.kind in "iu")


def graded_form(spec: Expected, value, where: str) -> dict:
    """What grades a part with the expected ``value`` (``where``: the part, ``"label part"``, which seeds the points
    of an expression in symbols), as the hidden test holds it: :func:`calib_book.course_check.hidden_verdict` applies
    it, ``check`` too; the public test holds the same exponents with digests instead of the centres. A construction
    has none (its property decides)."""
    import numpy as np
    import sympy

    from calib_book import course_check

    if spec.accept == "any-of":
        others = spec.alternatives()
        return {"kind": "any-of", "options": [graded_form(dataclasses.replace(spec, accept=None, alternatives=None),
                                                          v, where) for v in (value, *others)]}
    if spec.accept == "interval":
        return {"kind": "interval", "shape": [2], "bands": course_check.interval_bands(value)}
    if spec.accept is not None:
        raise ValueError(f"{where}: a construction is graded by its property, not a form.")
    if isinstance(value, (bool, np.bool_)):
        return {"kind": "bool", "expected": bool(value)}
    if isinstance(value, str):
        return {"kind": "text", "expected": value, "choices": list(spec.choices or ()), "verdict_on": spec.verdict_on}
    if isinstance(value, sympy.Basic) and not value.is_number:
        points = symbol_points(value, where)
        values = [complex(sympy.N(value.subs({s: sympy.Rational(repr(p[i])) for s in value.free_symbols
                                               for n, p in points.items() if s.name == n}), 30)).real
                  for i in range(len(next(iter(points.values()))))]
        exponents = [course_check.significant_exponent(v, course_check.SYMBOLIC_DIGITS) if v else -30 for v in values]
        centres = course_check.expression_integers(value, exponents, points)
        return {"kind": "symbolic", "shape": [len(values)], "symbols": points,
                "bands": [[x, k, 1] for x, k in zip(exponents, centres)]}
    if spec.exact:
        number = float(sympy.N(value, 30))
        exponent = course_check.significant_exponent(number, course_check.EXACT_DIGITS) if number else -30
        return {"kind": "exact", "shape": [1],
                "bands": [[exponent, course_check.expression_integers(value, [exponent], None)[0], 1]]}
    array = np.asarray(value, dtype=float)
    return {"kind": "number", "shape": list(array.shape),
            "bands": course_check.bands(array, spec.rtol, spec.atol, count=_is_count(value))}


def verdict_of(interval) -> str:
    """'lower', 'higher' or 'no difference': which side of 0 a 95 % interval of a difference lies on."""
    low, high = (float(v) for v in interval)
    return "lower" if high < 0 else "higher" if low > 0 else "no difference"
