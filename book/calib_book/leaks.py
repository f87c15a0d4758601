"""The leak scan: does a file a student gets hold the answer key, an expected value or a solution?

:func:`key_needles` lists what must not reach a student, three kinds:

- ``key``: the text of the key's package ``book/calib_book/answers/``, each line of its modules of 40 characters or
  more (stripped) that no chapter shows outside its solutions (an exercise's statement may give the code that builds
  its data, which the key repeats), and an import of it (``from calib_book.answers import``, ``EXERCISES[``);
- ``value``: every expected number of every part, printed as it could be at its precision: rounded to each
  number of significant digits from the part's precision (at least 4) to 17, fixed, general and scientific, and
  truncated from 6 digits on; a number with fewer than 4 significant digits (0.5, an integer) is too common to
  scan for, and is counted apart; a symbolic part as ``str`` of its expression (15 characters or more);
- ``solution``: each line of 40 characters or more of a solution that the chapter does not show elsewhere.

:func:`scan` reads every text file given (a zip's or wheel's members too) and returns the hits: file, kind,
needle and where. Numbers are compared as printed numbers, not substrings: a rounded form must be a whole number of
the text (trailing zeros and sign aside), a truncated one its start (``1.23456`` in ``1.2345678``).
"""

from __future__ import annotations

import inspect
import math
import re
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = ["Needle", "Hit", "key_needles", "number_forms", "scan", "scan_text"]

MIN_LINE = 40
MIN_DIGITS = 4
#: A truncated form (the start of a longer printed number) counts from this many significant digits: with fewer,
#: the stored runs' thousands of numbers hold the start of any value by chance.
MIN_TRUNCATED_DIGITS = 6
#: A symbolic answer is scanned for as text from this length (``gamma + 1`` is everywhere in the chapters).
MIN_EXPRESSION = 15


@dataclass(frozen=True)
class Needle:
    """Something a student file must not hold: its kind (``key``, ``value``, ``solution``), its text, and where it
    comes from (the part's label, the file)."""

    kind: str
    text: str
    source: str
    number: str | None = None           # "rounded": a whole number of the text; "truncated": its start; None: text


@dataclass(frozen=True)
class Hit:
    """A needle found in a file."""

    file: str
    needle: Needle
    context: str


def number_forms(value: float, min_digits: int) -> dict[str, str]:
    """The ways ``abs(value)`` could be printed with ``min_digits`` to 17 significant digits: ``{text: "rounded"}``
    (a whole printed number: fixed, general or scientific) or ``{text: "truncated"}`` (the start of a longer one)."""
    forms: dict[str, str] = {}
    value = abs(value)
    if not math.isfinite(value) or value == 0:
        return forms
    exponent = math.floor(math.log10(value))
    for digits in range(min_digits, 18):
        decimals = max(0, digits - 1 - exponent)
        for text in (f"{value:.{digits}g}", f"{value:.{decimals}f}", f"{value:.{digits - 1}e}"):
            forms.setdefault(_normal(text), "rounded")
        scale = 10.0 ** (digits - 1 - exponent)
        truncated = _normal(f"{math.trunc(value * scale) / scale:.{decimals}f}")
        if _significant(truncated) >= MIN_TRUNCATED_DIGITS:
            forms.setdefault(truncated, "truncated")
    return {text: how for text, how in forms.items() if _significant(text) >= min_digits}


def _normal(text: str) -> str:
    """A printed number without sign and trailing zeros after its point (``-0.36790`` -> ``0.3679``)."""
    mantissa, _, exponent = text.lstrip("+-").lower().partition("e")
    if "." in mantissa:
        mantissa = mantissa.rstrip("0").rstrip(".")
    return mantissa + (f"e{int(exponent)}" if exponent else "")


def _significant(text: str) -> int:
    return len(text.split("e")[0].replace(".", "").lstrip("0"))


_NUMBER = re.compile(r"(?<![\w.])[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")


def _significant_digits(value: float) -> int:
    """How many significant digits ``value`` has as a short decimal (0.5 -> 1, 0.125 -> 3, 1/3 -> 16)."""
    text = repr(float(value)).split("e")[0].replace("-", "").replace(".", "").lstrip("0").rstrip("0")
    return len(text)


def _solution_blocks(source: str) -> list[str]:
    from calib_book.exercises import exercises_in, solution_text

    return [solution_text(source, entry.label) for entry in exercises_in("", source)]


def key_needles(root: Path) -> tuple[list[Needle], dict[str, int]]:
    """What must not reach a student, and counts: ``values`` scanned, ``values_too_short`` not scanned."""
    import sympy

    from calib_book.course import key_parts

    root = Path(root)
    chapters = sorted((root / "chapters").glob("*.md"))
    public_text = ""
    solution_lines: dict[str, str] = {}
    for path in chapters:
        source = path.read_text(encoding="utf-8")
        blocks = _solution_blocks(source)
        for block in blocks:
            source = source.replace(block, "\n")
            for line in block.splitlines():
                if len(line.strip()) >= MIN_LINE:
                    solution_lines[line.strip()] = path.stem
        public_text += source
    key = root / "book" / "calib_book" / "answers"         # the key's package: every module of it
    shipped = [*(root / "calib").rglob("*.py"),
               *(p for p in (root / "book" / "calib_book").rglob("*.py") if key not in p.parents)]
    library = "".join(p.read_text(encoding="utf-8") for p in sorted(shipped))
    # a line the public library (calib, and the book's helpers a student's bundle carries) holds tells nothing:
    # an import, a call a solution shares with the library
    needles = [Needle("solution", line, chapter) for line, chapter in solution_lines.items()
               if line not in public_text and line not in library]
    parts = key_parts()
    # a construction's property is public: the course's test files carry its source, and it reveals no answer
    public_text += "".join(inspect.getsource(p.spec.accept) for p in parts if p.rule == "construction")
    # the grading rule is public too: every course test file carries calib_book/course_check.py, which holds no key
    public_text += (root / "book" / "calib_book" / "course_check.py").read_text(encoding="utf-8")
    for module in sorted(key.rglob("*.py")):
        needles += [Needle("key", line.strip(), f"answers/{module.relative_to(key).as_posix()}")
                    for line in module.read_text(encoding="utf-8").splitlines()
                    if len(line.strip()) >= MIN_LINE and line.strip() not in public_text
                    and line.strip() not in library]   # a line the public library holds tells nothing
    needles += [Needle("key", name, "answers") for name in ("from calib_book.answers import",
                                                            "import calib_book.answers", "EXERCISES[")]
    counts = {"values": 0, "values_too_short": 0}
    for part in parts:
        where = f"{part.label} {part.part}"
        if isinstance(part.value, (bool, np.bool_)) or part.rule == "construction":   # an example is no secret
            continue
        if isinstance(part.value, str):            # a verdict word ("lower", "no difference"): too common to scan
            counts["values_too_short"] += 1
            continue
        if isinstance(part.value, sympy.Basic) and not part.value.is_number:
            text = str(part.value)
            counts["values" if len(text) >= MIN_EXPRESSION else "values_too_short"] += 1
            if len(text) >= MIN_EXPRESSION:
                needles.append(Needle("value", text, where))
            continue
        precision = max(MIN_DIGITS, math.ceil(-math.log10(max(part.spec.rtol, 1e-17))) if part.spec.rtol else 0)
        values = [part.value, *part.spec.alternatives()] if part.rule == "any-of" else [part.value]
        for element in np.concatenate([np.asarray(v, dtype=float).reshape(-1) for v in values]):
            if _significant_digits(element) < MIN_DIGITS:
                counts["values_too_short"] += 1
                continue
            counts["values"] += 1
            for text, how in number_forms(float(element), min(precision, 17)).items():
                needles.append(Needle("value", text, where, how))
    return needles, counts


def _texts(path: Path):
    """(name, text) of a file, or of each member of a zip or wheel; binary content is skipped; a notebook's text is
    its cells' sources and outputs (not its JSON, which escapes quotes)."""
    if path.suffix == ".ipynb":
        import json

        def strings(node):
            if isinstance(node, str):
                yield node
            elif isinstance(node, dict):
                for value in node.values():
                    yield from strings(value)
            elif isinstance(node, list):
                for value in node:
                    yield from strings(value)

        yield str(path), "\n".join(strings(json.loads(path.read_text(encoding="utf-8"))))
        return
    if path.suffix in (".zip", ".whl"):
        with zipfile.ZipFile(path) as archive:
            for member in archive.namelist():
                data = archive.read(member)
                if b"\0" not in data[:4096]:
                    yield f"{path}!{member}", data.decode("utf-8", errors="replace")
        return
    data = path.read_bytes()
    if b"\0" in data[:4096]:
        return
    yield str(path), data.decode("utf-8", errors="replace")


class _Matcher:
    """The needles of one scan, ready to look for in many texts: the numbers by their printed form, the other texts
    with one Aho-Corasick automaton (pyahocorasick, from the ``course`` extra: one pass over a text, where a search per
    needle took 17 of the 22 s that a scan of the student edition took), or one search per needle without it."""

    def __init__(self, needles: list[Needle], min_digits: int):
        needles = [n for n in needles if n.number is None or _significant(n.text) >= min_digits]
        self.rounded = {n.text: n for n in needles if n.number == "rounded"}
        self.truncated = {n.text: n for n in needles if n.number == "truncated"}
        self.texts = [n for n in needles if n.number is None]
        self.automaton = None
        try:
            import ahocorasick
        except ImportError:
            return
        if self.texts:
            self.automaton = ahocorasick.Automaton()
            for i, needle in enumerate(self.texts):
                self.automaton.add_word(needle.text, i)
            self.automaton.make_automaton()

    def find(self, text: str) -> list[tuple[Needle, int]]:
        """Each needle found in ``text``, with where it first occurs."""
        found: list[tuple[Needle, int]] = []
        if self.rounded or self.truncated:
            numbers: dict[str, int] = {}
            for match in _NUMBER.finditer(text):
                numbers.setdefault(_normal(match.group()), match.start())
            for number, at in numbers.items():
                if number in self.rounded:
                    found.append((self.rounded[number], at))
                mantissa = number.split("e")[0]
                for end in range(len(mantissa), 0, -1):
                    if mantissa[:end] in self.truncated:
                        found.append((self.truncated[mantissa[:end]], at))
                        break
        if self.automaton is not None:
            first: dict[int, int] = {}
            for end, i in self.automaton.iter(text):
                first.setdefault(i, end - len(self.texts[i].text) + 1)
            found += [(self.texts[i], at) for i, at in sorted(first.items())]
        else:
            found += [(needle, at) for needle in self.texts if (at := text.find(needle.text)) >= 0]
        return found


def scan_text(name: str, text: str, needles: list[Needle], min_digits: int = MIN_DIGITS,
              matcher: _Matcher | None = None) -> list[Hit]:
    """The needles found in one text; numbers of fewer than ``min_digits`` significant digits are not compared
    (``matcher``: the needles already prepared for ``min_digits``, when many texts are scanned)."""
    matcher = matcher or _Matcher(needles, min_digits)
    return [Hit(name, needle, text[max(0, at - 60): at + len(needle.text) + 60].replace("\n", " "))
            for needle, at in matcher.find(text)]


DATA_DIGITS = 8


def scan(paths: list[Path], needles: list[Needle]) -> tuple[list[Hit], int]:
    """Every needle found in the files (and archive members) given; returns the hits and the texts scanned."""
    hits, scanned = [], 0
    matchers: dict[int, _Matcher] = {}
    for path in paths:
        digits = DATA_DIGITS if "results" in Path(path).parts else MIN_DIGITS
        matcher = matchers.get(digits) or matchers.setdefault(digits, _Matcher(needles, digits))
        for name, text in _texts(Path(path)):
            scanned += 1
            hits += scan_text(name, text, needles, digits, matcher)
    return hits, scanned
