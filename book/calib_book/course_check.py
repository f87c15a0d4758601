"""The comparison a course notebook's public and hidden tests make, with no answer key: copied into every test file.

A public test must say right or wrong without holding a readable expected value. It holds, for each element of
the expected answer, a decimal step ``10**exponent`` no smaller than the width of the part's tolerance band
``[e - tol, e + tol]`` (``tol = atol + rtol |e|``, the band ``calib_book.exercises.check`` calls right), and the
salted, slow (PBKDF2) digests of every integer ``k = round(x / step)`` that a value ``x`` in the band rounds to:
one or two of them, since the band is at most one step wide. Rounding is monotone, so an answer inside the band
rounds to one of those integers and is never rejected for rounding; an answer more than a step away is rejected.
A symbolic answer is compared through its values at a few points of its symbols, stored with the test.

A hidden test holds the expected value and the tolerances and compares as ``check`` does (``numpy.allclose``,
sympy's ``simplify`` of the difference).

A part with several valid answers is graded by one of three rules that need no secret to state, so the public and
the hidden tests both apply them: ``any-of`` (right when within the tolerances of any of the valid values: two
conventions, two valid bounds; the public test holds the digests of each), ``interval`` (a 95 % interval from one's
own runs, right when it agrees with the key's runs within seed noise, :func:`within_seed_noise`; the public test
checks only its form, the hidden test holds the key's interval), and a construction (an example or counterexample,
right when the exercise's property holds: the test file carries the property's own source).

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


def digest(salt: str, index: int, token: str) -> str:
    """The salted PBKDF2-SHA256 digest of one rounded element (``token``) at position ``index``."""
    return hashlib.pbkdf2_hmac("sha256", f"{index}|{token}".encode(), salt.encode(), DIGEST_ITERATIONS).hex()


def rounded(value: float, exponent: int) -> int:
    """``value`` in units of ``10**exponent``, rounded half up (monotone in ``value``)."""
    return math.floor(value / 10.0 ** exponent + 0.5)


def symbol_values(given, symbols: dict[str, list[float]]) -> np.ndarray:
    """The values of a sympy expression (or a number) at the stored points of its symbols, matched by name."""
    import sympy

    expression = sympy.sympify(given)
    names = {s.name: s for s in expression.free_symbols}
    unknown = sorted(set(names) - set(symbols))
    if unknown:
        raise AssertionError(f"the expression uses {', '.join(unknown)}, which the question does not")
    count = len(next(iter(symbols.values()))) if symbols else 1
    values = []
    for i in range(count):
        point = {names[n]: sympy.Float(v[i], 30) for n, v in symbols.items() if n in names}
        values.append(complex(sympy.N(expression.subs(point), 30)))
    values = np.array(values)
    if np.any(np.abs(values.imag) > 1e-12 * np.maximum(1.0, np.abs(values.real))):
        raise AssertionError("the expression is not real at the question's values")
    return values.real


def as_numbers(given, symbols: dict[str, list[float]] | None) -> np.ndarray:
    """The answer as a float array: evaluated at the stored points when the part is symbolic."""
    if given is Ellipsis:
        raise AssertionError(NOT_ANSWERED)
    if symbols is not None:
        return symbol_values(given, symbols)
    try:
        return np.asarray(given, dtype=float)
    except (TypeError, ValueError):
        raise AssertionError(f"expected a number or an array of numbers, got {type(given).__name__}") from None


def normal_text(text: str) -> str:
    """A text answer as ``calib_book.exercises.check`` compares it: case and surrounding blanks ignored."""
    return " ".join(text.strip().lower().split())


def public_verdict(given, spec: dict) -> bool:
    """True when every element of ``given`` rounds to a digest the public test holds; raises AssertionError with
    the reason when the answer cannot be compared (no answer, wrong shape, not a number)."""
    if spec["kind"] == "any-of":
        return any(public_verdict(given, option) for option in spec["options"])
    if spec["kind"] == "text":
        if given is Ellipsis:
            raise AssertionError(NOT_ANSWERED)
        if not isinstance(given, str):
            raise AssertionError(f"expected a word or phrase, got {type(given).__name__}")
        return digest(spec["salt"], 0, normal_text(given)) in spec["digests"][0]
    if spec["kind"] == "bool":
        if given is Ellipsis:
            raise AssertionError(NOT_ANSWERED)
        if not isinstance(given, (bool, np.bool_)):
            raise AssertionError(f"expected True or False, got {type(given).__name__}")
        return digest(spec["salt"], 0, str(bool(given))) in spec["digests"][0]
    values = as_numbers(given, spec.get("symbols"))
    if list(values.shape) != list(spec["shape"]):
        raise AssertionError(f"shape {tuple(values.shape)}, expected shape {tuple(spec['shape'])}")
    flat = values.reshape(-1)
    if not np.all(np.isfinite(flat)):
        raise AssertionError("the answer holds a nan or an infinity")
    return all(digest(spec["salt"], i, str(rounded(float(x), spec["exponents"][i]))) in spec["digests"][i]
               for i, x in enumerate(flat))


def within_seed_noise(reference, given) -> bool:
    """The rule for an interval a training exercise claims: ``given = (low, high)`` is right when its centre lies
    within a quarter of the reference interval's width of the reference centre (what seed noise and another
    machine's arithmetic explain) and its width is within a factor 1.5 of the reference width."""
    low, high = (float(v) for v in interval_form(given))
    ref_low, ref_high = (float(v) for v in np.asarray(reference, dtype=float).ravel())
    width = ref_high - ref_low
    centred = abs((low + high) / 2 - (ref_low + ref_high) / 2) <= width / 4
    return bool(centred and width / 1.5 <= high - low <= 1.5 * width)


def interval_form(given) -> np.ndarray:
    """``given`` as an interval ``(low, high)`` of finite numbers with low <= high; AssertionError saying what is
    wrong with its form otherwise (the public test of an interval checks only this)."""
    if given is Ellipsis:
        raise AssertionError(NOT_ANSWERED)
    try:
        values = np.asarray(given, dtype=float).ravel()
    except (TypeError, ValueError):
        raise AssertionError(f"expected an interval (low, high), got {type(given).__name__}") from None
    if values.shape != (2,) or not np.all(np.isfinite(values)) or values[0] > values[1]:
        raise AssertionError("expected an interval (low, high): two finite numbers, low <= high")
    return values


def any_of(references, given, rtol: float, atol: float) -> bool:
    """True when ``given`` is within ``atol + rtol |v|`` of one of the valid values ``references``."""
    try:
        values = np.asarray(given, dtype=float)
    except (TypeError, ValueError):
        return False
    for reference in references:
        reference = np.asarray(reference, dtype=float)
        if values.shape == reference.shape and bool(np.all(np.isfinite(values))) \
                and bool(np.allclose(values, reference, rtol=rtol, atol=atol)):
            return True
    return False


def hidden_verdict(given, expected, rtol: float, atol: float, symbols: dict[str, list[float]] | None) -> bool:
    """True when ``given`` is right as ``calib_book.exercises.check`` says: equal booleans, an expression whose
    difference from the expected one simplifies to 0, numbers within ``atol + rtol |expected|``."""
    if given is Ellipsis:
        return False
    if isinstance(expected, bool):
        return isinstance(given, (bool, np.bool_)) and bool(given) == expected
    if symbols is not None:
        import sympy

        try:
            expression = sympy.sympify(given)
            key = sympy.sympify(expected)
            return sympy.simplify(_plain(expression) - _plain(key)) == 0
        except (sympy.SympifyError, TypeError):
            return False
    if isinstance(expected, str):             # a text answer (a symbolic key, also a string, has symbols)
        return isinstance(given, str) and normal_text(given) == normal_text(expected)
    try:
        values = np.asarray(given, dtype=float)
    except (TypeError, ValueError):
        return False
    expected = np.asarray(expected, dtype=float)
    return values.shape == expected.shape and bool(np.all(np.isfinite(values))) \
        and bool(np.allclose(values, expected, rtol=rtol, atol=atol))


def graded_verdict(given, spec: dict) -> bool:
    """The hidden test's verdict on ``given`` under the part's rule (``spec``: rule, expected, rtol, atol,
    symbols)."""
    if given is Ellipsis:
        return False
    if spec["rule"] == "any-of":
        return any_of(spec["expected"], given, spec["rtol"], spec["atol"])
    if spec["rule"] == "interval":
        try:
            return within_seed_noise(spec["expected"], given)
        except AssertionError:
            return False
    return hidden_verdict(given, spec["expected"], spec["rtol"], spec["atol"], spec["symbols"])


def _holds(verify, given) -> bool:
    """A construction's property on ``given``; an answer of the wrong form (the property raises) does not hold."""
    if given is Ellipsis:
        raise AssertionError(NOT_ANSWERED)
    try:
        return bool(verify(given))
    except Exception:
        return False


def _plain(expression):
    """The expression with its symbols compared by name (a student's ``Symbol("gamma")`` is the key's gamma)."""
    import sympy

    return expression.subs({s: sympy.Symbol(s.name) for s in expression.free_symbols})
