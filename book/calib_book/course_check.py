"""The one rule that grades a course answer, with no answer key in it: ``calib_book.exercises.check``, a course
notebook's public tests and its hidden tests all decide through it, and the course's test files carry its source.

**A number** is right when it is within half a unit of the last digit the question asks for (a correct rounding is
right; a rounding to one digit fewer, or an answer a unit off, is not). Each element ``e`` of the expected answer has
a unit ``u`` (the last of the significant digits asked, ``rtol = 1e-6`` asking for 6, or the absolute precision
``atol`` where the value is 0 or the question gives one), and every grader compares the integer
``k = round(x / (u / 10))`` of the answer ``x`` with the centre ``K = round(e / (u / 10))``: right when
``|k - K| <= 5``. A count is a whole number, and only that number is right (``|k - K| <= 0`` with ``u = 1``). So the
three graders cannot disagree (:func:`element_integers` gives the integers to all three):

- the hidden test holds the exponents, the centres and the slacks, and compares the integers;
- the public test holds, per element, the exponent, the slack, the phase ``(K - slack) mod (2 slack + 1)`` and the
  salted, slow (PBKDF2) digest of the block ``(k - phase) // (2 slack + 1)`` that the accepted integers
  ``K - slack .. K + slack`` make up: the answer's block has that digest exactly when the answer is right, and the
  test holds no readable value (the phase tells the centre modulo 11);
- ``check`` computes the same integers from the expected value.

**A closed form** (a part that asks for an exact expression) is right when it is a sympy expression without
floating-point numbers whose value agrees, to 20 significant digits (evaluated with 40), with the key's; a decimal,
however many digits it has, is not a closed form. **An expression in symbols** is compared through its values at a
few points of its symbols, stored with the test, to 12 significant digits. Both go through the same integers.

**A part with several valid answers** is graded by a rule that needs no secret to state: ``any-of`` (right when
right for one of the valid values; the public test holds the digests of each), ``interval`` (a 95 % interval from
runs the question fixes, which are bit-reproducible: each end is a number whose unit is the 3rd significant digit of
the key's interval's width), and a construction (an example or counterexample, right when
the exercise's property holds: the test file carries the property's own source).

**A word or a truth value** (a verdict, a choice between named options) is graded by the hidden test only; the
public test checks its form (one of the options) and, for a verdict on an interval of the same exercise, that it
follows from that interval, so that the public test is no oracle that a few tries would read.

This module imports only the standard library, numpy and sympy: the course's test files carry its source.
"""

from __future__ import annotations

import hashlib
import math

import numpy as np

#: The number of PBKDF2 iterations per digest. A public test checks an answer in milliseconds, while trying every
#: rounding of a value to six digits takes hours.
DIGEST_ITERATIONS = 20_000

NOT_ANSWERED = "not answered yet: replace the ... with your answer"

#: The significant digits to which a closed form's value must agree with the key's (it is evaluated with twice as
#: many), and an expression in symbols' values at the stored points.
EXACT_DIGITS = 20
SYMBOLIC_DIGITS = 12
#: The significant digits of an interval's width to which each of its ends is graded.
INTERVAL_DIGITS = 3


def digest(salt: str, index: int, token: str) -> str:
    """The salted PBKDF2-SHA256 digest of one rounded element (``token``) at position ``index``."""
    return hashlib.pbkdf2_hmac("sha256", f"{index}|{token}".encode(), salt.encode(), DIGEST_ITERATIONS).hex()


def rounded(value: float, exponent: int) -> int:
    """``value`` in units of ``10**exponent``, rounded half up (monotone in ``value``)."""
    scaled = value * 10.0 ** -exponent if exponent < 0 else value / 10.0 ** exponent
    return math.floor(scaled + 0.5)


def significant_exponent(value: float, digits: int) -> int:
    """The exponent of the last of ``digits`` significant digits of ``value`` (``value`` not 0)."""
    return math.floor(math.log10(abs(value))) - digits + 1


#: A number's integers count tenths of the unit of its last digit asked, and half a unit is right.
SUBDIVISIONS, NUMBER_SLACK = 10, 5


def bands(expected, rtol: float, atol: float, count: bool = False) -> list[list[int]]:
    """Per element of ``expected`` (a number or an array), ``[exponent, centre, slack]``: the exponent of a tenth of
    the unit of the last digit asked (the ``-log10(rtol)``-th significant digit; ``atol`` rounded up to a power of
    ten where the element is 0 or ``atol`` is the coarser), the expected value in those tenths, and the slack, 5
    (half a unit). A count (``count``, or a tolerance of half a unit or more with no relative one) asks for the whole
    number: exponent 0, slack 0."""
    out = []
    for e in np.asarray(expected, dtype=float).reshape(-1):
        e = float(e)
        if count or (rtol == 0 and atol >= 0.5):
            out.append([0, int(round(e)), 0])
            continue
        if rtol > 0 and e != 0:
            exponent = significant_exponent(e, max(1, round(-math.log10(rtol))))
            if atol > 10.0 ** exponent:
                exponent = math.ceil(math.log10(atol))
        else:
            exponent = math.ceil(math.log10(atol)) if atol > 0 else -12
        exponent -= round(math.log10(SUBDIVISIONS))
        out.append([exponent, rounded(e, exponent), NUMBER_SLACK])
    return out


def interval_bands(reference) -> list[list[int]]:
    """The bands of an interval ``(low, high)`` whose runs the question fixes: each end a number whose unit is the
    :data:`INTERVAL_DIGITS`-th significant digit of the width (in tenths, half a unit of slack)."""
    low, high = (float(v) for v in np.asarray(reference, dtype=float).ravel())
    width = high - low
    exponent = (significant_exponent(width, INTERVAL_DIGITS) if width > 0 else -12) - round(math.log10(SUBDIVISIONS))
    return [[exponent, rounded(low, exponent), NUMBER_SLACK], [exponent, rounded(high, exponent), NUMBER_SLACK]]


def block(integer: int, phase: int, slack: int) -> int:
    """The block of ``2 slack + 1`` consecutive integers, starting at ``phase`` modulo its size, that holds
    ``integer``: the integers ``K - slack .. K + slack`` of a band are one block when ``phase = (K - slack) mod
    (2 slack + 1)``."""
    return (integer - phase) // (2 * slack + 1)


def band_block(centre: int, slack: int) -> tuple[int, int]:
    """The phase and the block of the band ``centre - slack .. centre + slack`` (what a public test holds, the
    block as a digest)."""
    phase = (centre - slack) % (2 * slack + 1)
    return phase, block(centre, phase, slack)


def _expression(given, symbolic: bool):
    """``given`` as a sympy expression: a closed form (``symbolic`` False: numbers only, no decimal) or an expression
    in symbols; AssertionError saying what is wrong with its form."""
    import sympy

    if given is Ellipsis:
        raise AssertionError(NOT_ANSWERED)
    if isinstance(given, (float, np.floating)) and not symbolic:
        raise AssertionError("a decimal: the question asks for the closed form, a sympy expression "
                             "(e.g. sympy.exp(-1), sympy.Rational(1, 3)), not its value")
    if isinstance(given, (bool, np.bool_)) or not isinstance(given, (sympy.Basic, str, int, float, np.number)):
        raise AssertionError(f"expected a sympy expression, got {type(given).__name__}")
    try:
        expression = sympy.sympify(given)
    except (sympy.SympifyError, TypeError, ValueError, SyntaxError):
        raise AssertionError("not an expression sympy can read") from None
    if not isinstance(expression, sympy.Expr):
        raise AssertionError(f"expected a sympy expression, got {type(expression).__name__}")
    if not symbolic:
        if expression.atoms(sympy.Float):
            raise AssertionError("the expression holds a decimal number: the question asks for the closed form, "
                                 "in exact numbers (sympy.Rational(1, 2), not 0.5)")
        if expression.free_symbols:
            raise AssertionError("the closed form is a number: the expression should have no symbols")
    return expression


def expression_integers(given, exponents: list[int], symbols: dict[str, list[float]] | None) -> list[int]:
    """A closed form's value (``symbols`` None) or an expression's values at the stored points of its symbols
    (matched by name), each as the integer ``round(value / 10**exponent)``, computed with twice
    :data:`EXACT_DIGITS` significant digits; AssertionError saying what is wrong with the answer's form."""
    import sympy

    expression = _expression(given, symbols is not None)
    names = {s.name: s for s in expression.free_symbols}
    unknown = sorted(set(names) - set(symbols or {}))
    if unknown:
        raise AssertionError(f"the expression uses {', '.join(unknown)}, which the question does not")
    points = [{}] if symbols is None else [
        {names[n]: sympy.Rational(repr(float(v[i]))) for n, v in symbols.items() if n in names}
        for i in range(len(exponents))]
    integers = []
    for point, exponent in zip(points, exponents):
        try:
            real, imaginary = sympy.N(expression.subs(point), 2 * EXACT_DIGITS).as_real_imag()
            finite = bool(real.is_finite) and bool(imaginary.is_finite)
        except (TypeError, ValueError, AttributeError):
            finite = False
        if not finite or not real.is_number:
            raise AssertionError("the expression has no finite value at the question's values")
        if abs(imaginary) > sympy.Integer(10) ** (exponent - 2):
            raise AssertionError("the expression is not real at the question's values")
        integers.append(int(sympy.floor(real * sympy.Integer(10) ** -exponent + sympy.Rational(1, 2))))
    return integers


def element_integers(given, spec: dict) -> list[int]:
    """The answer's integers ``round(x / unit)``, one per element, that every grader compares (``spec``: the part's
    ``kind`` and, per element, its ``exponents``; ``shape``; the ``symbols`` of an expression in symbols);
    AssertionError saying what is wrong with the answer's form when it cannot be compared (not answered, not a
    number, a decimal for a closed form, a shape that differs, a nan)."""
    if given is Ellipsis:
        raise AssertionError(NOT_ANSWERED)
    kind = spec["kind"]
    if kind in ("exact", "symbolic"):
        return expression_integers(given, spec["exponents"], spec.get("symbols") if kind == "symbolic" else None)
    if kind == "interval":
        interval_form(given)
    if isinstance(given, (str, bytes)) or _is_expression(given):
        raise AssertionError(f"expected a number or an array of numbers, got {type(given).__name__}")
    try:
        values = np.asarray(given, dtype=float)
    except (TypeError, ValueError):
        raise AssertionError(f"expected a number or an array of numbers, got {type(given).__name__}") from None
    if list(values.shape) != list(spec["shape"]):
        raise AssertionError(f"shape {tuple(values.shape)}, expected shape {tuple(spec['shape'])}")
    flat = values.reshape(-1)
    if not np.all(np.isfinite(flat)):
        raise AssertionError("the answer holds a nan or an infinity")
    return [rounded(float(x), exponent) for x, exponent in zip(flat, spec["exponents"])]


def _is_expression(value) -> bool:
    import sys

    sympy = sys.modules.get("sympy")
    return sympy is not None and isinstance(value, sympy.Basic) and not value.is_number


def normal_text(text: str) -> str:
    """A text answer as every grader compares it: case and surrounding blanks ignored."""
    return " ".join(text.strip().lower().split())


def public_verdict(given, spec: dict) -> bool:
    """The public test's verdict: True when the block of every element's integer (:func:`element_integers`,
    :func:`block`) has the digest the test holds; AssertionError with the reason when the answer cannot be compared.
    A word or a truth value is graded by the hidden test only: :func:`choice_form` checks its form."""
    if spec["kind"] == "any-of":
        errors = []
        for option in spec["options"]:
            try:
                if public_verdict(given, option):
                    return True
            except AssertionError as exc:
                errors.append(exc)
        if len(errors) == len(spec["options"]):
            raise errors[0]
        return False
    integers = element_integers(given, spec)
    return all(digest(spec["salt"], i, str(block(k, phase, slack))) == expected
               for i, (k, phase, slack, expected) in enumerate(zip(integers, spec["phases"], spec["slacks"],
                                                                    spec["digests"])))


def hidden_verdict(given, spec: dict) -> bool:
    """The hidden test's verdict under the same rule: every element's integer within its slack of its centre
    (``spec``: kind, shape, symbols and, per element, ``bands``); False for an answer that cannot be compared."""
    if spec["kind"] == "any-of":
        return any(hidden_verdict(given, option) for option in spec["options"])
    if spec["kind"] in ("text", "bool"):
        return choice_verdict(given, spec)
    try:
        integers = element_integers(given, {**spec, "exponents": [b[0] for b in spec["bands"]]})
    except AssertionError:
        return False
    return all(abs(k - centre) <= slack for k, (_, centre, slack) in zip(integers, spec["bands"]))


def choice_verdict(given, spec: dict) -> bool:
    """A word (case and blanks ignored) or a truth value, equal to the expected one."""
    if spec["kind"] == "bool":
        return isinstance(given, (bool, np.bool_)) and bool(given) == spec["expected"]
    return isinstance(given, str) and normal_text(given) == normal_text(spec["expected"])


def choice_form(given, spec: dict) -> None:
    """The public check of a word or a truth value: its form only (one of the options, when the question names
    them); AssertionError saying what is wrong."""
    if given is Ellipsis:
        raise AssertionError(NOT_ANSWERED)
    if spec["kind"] == "bool":
        if not isinstance(given, (bool, np.bool_)):
            raise AssertionError(f"expected True or False, got {type(given).__name__}")
        return
    if not isinstance(given, str):
        raise AssertionError(f"expected a word or phrase, got {type(given).__name__}")
    options = spec.get("choices")
    if options and normal_text(given) not in [normal_text(o) for o in options]:
        raise AssertionError("expected one of " + ", ".join(repr(o) for o in options))


def verdict_of(interval) -> str:
    """'lower', 'higher' or 'no difference': which side of 0 a 95 % interval of a difference lies on."""
    low, high = (float(v) for v in interval_form(interval))
    return "lower" if high < 0 else "higher" if low > 0 else "no difference"


def verdict_follows(verdict, interval) -> None:
    """The public check of a verdict on one's own interval: AssertionError unless ``verdict`` is what the interval
    says (the interval's own form is checked, and graded, by its part)."""
    try:
        side = verdict_of(interval)
    except AssertionError:
        return                  # the interval's part says what is wrong with it
    if normal_text(verdict) != side:
        raise AssertionError(f"your verdict does not follow from your interval ({side!r} does)")


def interval_form(given) -> np.ndarray:
    """``given`` as an interval ``(low, high)`` of finite numbers with low <= high; AssertionError saying what is
    wrong with its form otherwise."""
    if given is Ellipsis:
        raise AssertionError(NOT_ANSWERED)
    try:
        values = np.asarray(given, dtype=float).ravel()
    except (TypeError, ValueError):
        raise AssertionError(f"expected an interval (low, high), got {type(given).__name__}") from None
    if values.shape != (2,) or not np.all(np.isfinite(values)) or values[0] > values[1]:
        raise AssertionError("expected an interval (low, high): two finite numbers, low <= high")
    return values


def _holds(verify, given) -> bool:
    """A construction's property on ``given``; an answer of the wrong form (the property raises) does not hold."""
    if given is Ellipsis:
        raise AssertionError(NOT_ANSWERED)
    try:
        return bool(verify(given))
    except Exception:
        return False
