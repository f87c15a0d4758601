"""The course edition (``make course``): student notebooks graded by otter-grader, its autograder, the instructors'.

``build_course(root)`` writes ``_build/course/``:

- ``student/``: what students get, a folder that runs where it is opened. One notebook per chapter
  (``NN-slug.ipynb``, the solutions removed, a cell after each exercise to work in, ending with
  ``grader.check("label")``), the public tests in ``tests/NN-slug/<label>.py``, the library (``calib/``), the
  book's helpers without the key (``calib_book/`` less ``answers.py``, ``exercises.py``, ``course.py``), the stored
  results and the papers' tables the chapters read (``book/``), ``requirements.txt`` and the
  :data:`calib_book.paths.BUNDLE_MARKER`;
- ``autograder/NN-slug.zip``: otter-grader's autograder for the chapter (``otter generate``): the public and the
  hidden tests, each exercise part worth its points in the key (``getattr(part, "points", 1)``);
- ``instructor/NN-slug.ipynb``: the chapters with their solutions.

A student answers exercise ``ex-label`` by filling the dictionary ``ex_label = dict(part=...)`` of its cell. The
public tests (:mod:`calib_book.course_check`) say right or wrong from salted digests of the rounded answer,
with the part's hint, which names the concept; the hidden tests hold the expected values and tolerances and
give the points. ``grade(chapter, submission)`` runs the autograder here, without Docker (``otter run``).
"""

from __future__ import annotations

import inspect
import json
import math
import re
import secrets
import shutil
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from calib_book import course_check
from calib_book.answers import EXERCISES, Expected, expected_value
from calib_book.paths import BUNDLE_MARKER
from calib_book.student import _EXERCISE_LABEL, strip_solutions

__all__ = ["KeyPart", "key_parts", "answer_variable", "public_spec", "test_file", "student_notebook",
           "instructor_notebook", "planted_submission", "expected_points", "build_course", "grade",
           "SelfTestRow", "self_test", "self_test_table", "STUDENT_SKIPS",
           "REQUIREMENTS"]

#: The files of ``book/calib_book`` that stay out of the student bundle: the key, the checker that imports it,
#: this builder and the leak scan, which do too.
STUDENT_SKIPS = ("answers.py", "exercises.py", "course.py", "leaks.py")

#: What a student installs with pip (torch from its CPU wheel index first; see the README's course section).
REQUIREMENTS = ["numpy>=1.24", "scipy>=1.10", "sympy>=1.12", "mpmath", "matplotlib>=3.7", "tqdm>=4.65",
                "pyyaml>=6.0", "myst-nb>=1.1", "ipykernel>=6.29", "otter-grader>=6", "jupyterlab"]

_GRADER_CELL = ('# torch\'s CPU kernels with AVX2, as the book and its key ran them (calib._reproducible), before torch is\n'
                '# imported: a training exercise\'s runs then match the key\'s within seed noise on any x86 machine.\n'
                'from calib._reproducible import pin_cpu_kernels\n\npin_cpu_kernels()\n\n'
                '# The self-checks of this notebook (otter-grader): grader.check("label") after each exercise.\n'
                'import otter\n\ngrader = otter.Notebook(tests_dir="tests/{chapter}")')
_KEY_IMPORT = re.compile(r"^[ \t]*from calib_book\.exercises import [^\n]*\n?", re.M)


@dataclass(frozen=True)
class KeyPart:
    """One part of a self-checked exercise, with its expected value computed from the key."""

    chapter: str
    label: str
    part: str
    spec: Expected
    value: Any

    @property
    def points(self) -> int | float:
        """The part's points in the key (1 where the key gives none)."""
        return getattr(self.spec, "points", 1)

    @property
    def rule(self) -> str:
        """The rule that grades the part, ``"value"`` (one right value), ``"any-of"``, ``"interval"`` or
        ``"construction"`` (the ``accept`` of its ``Expected`` in the answer key)."""
        accept = getattr(self.spec, "accept", None)
        return "value" if accept is None else accept if isinstance(accept, str) else "construction"

    @property
    def symbolic(self) -> bool:
        """Whether the expected value is a sympy expression with free symbols."""
        import sympy

        return isinstance(self.value, sympy.Basic) and not self.value.is_number


def key_parts(chapter: str | None = None) -> list[KeyPart]:
    """Every part of every self-checked exercise (of one chapter), in the key's order, its value computed. Every
    part is graded by the autograder: a part with several valid answers by its ``accept`` rule, which its public and
    hidden tests apply (see :mod:`calib_book.course_check`)."""
    return [KeyPart(ex.chapter, label, name, spec, expected_value(label, name))
            for label, ex in EXERCISES.items() if chapter is None or ex.chapter == chapter
            for name, spec in ex.parts.items()]


def answer_variable(label: str) -> str:
    """The name of the dictionary a student fills for exercise ``label``: ``ch06-ex-float32`` -> ``ch06_ex_float32``."""
    name = re.sub(r"\W", "_", label)
    return name if name.isidentifier() else f"ex_{name}"


def _symbol_points(part: KeyPart, salt: str, count: int = 3) -> dict[str, list[float]]:
    """Points in (0.15, 0.85) for each symbol of a symbolic part where the expected expression is real and finite."""
    rng = np.random.default_rng(int(salt[:12], 16))
    names = sorted(s.name for s in part.value.free_symbols)
    for _ in range(100):
        points = {n: [float(round(v, 6)) for v in rng.uniform(0.15, 0.85, count)] for n in names}
        try:
            values = course_check.symbol_values(part.value, points)
        except (AssertionError, TypeError, ValueError):
            continue
        if np.all(np.isfinite(values)):
            return points
    raise ValueError(f"{part.label} {part.part}: the expected expression is not real and finite at any of 100 draws "
                     f"of its symbols in (0.15, 0.85); give the part numeric data.")


def public_spec(part: KeyPart, salt: str | None = None) -> dict:
    """What a public test holds for ``part``: per element, the decimal exponent of the rounding step and the digests
    of the roundings of the tolerance band (see :mod:`calib_book.course_check`); no value. A part with several
    valid answers holds the digests of each (``any-of``), or only its kind where its rule needs no value (an
    interval's form, a construction's property, which the test file carries)."""
    salt = salt or secrets.token_hex(16)
    if part.rule == "any-of":
        values = [part.value, *part.spec.alternatives()]
        return {"kind": "any-of", "options": [_value_spec(v, part, f"{salt}{i}") for i, v in enumerate(values)]}
    if part.rule in ("interval", "construction"):
        return {"kind": part.rule}
    return _value_spec(part.value, part, salt)


def _value_spec(value, part: KeyPart, salt: str) -> dict:
    if isinstance(value, (bool, np.bool_)):
        return {"kind": "bool", "salt": salt, "digests": [[course_check.digest(salt, 0, str(bool(value)))]]}
    if isinstance(value, str):
        return {"kind": "text", "salt": salt,
                "digests": [[course_check.digest(salt, 0, course_check.normal_text(value))]]}
    symbols = _symbol_points(part, salt) if part.symbolic else None
    values = course_check.as_numbers(value, symbols)
    exponents, digests = [], []
    for i, e in enumerate(values.reshape(-1)):
        tol = part.spec.atol + part.spec.rtol * abs(e)
        integral = float(e).is_integer() and (tol == 0 or 0.5 <= tol < 1)     # a count: the whole number itself
        exponent = 0 if integral else math.ceil(math.log10(2 * tol))
        low, high = (round(e), round(e)) if integral else \
            (course_check.rounded(e - tol, exponent), course_check.rounded(e + tol, exponent))
        exponents.append(exponent)
        digests.append([course_check.digest(salt, i, str(k)) for k in range(low, high + 1)])
    return {"kind": "number", "salt": salt, "shape": list(values.shape), "exponents": exponents, "digests": digests,
            "symbols": symbols}


def _hidden_value(part: KeyPart):
    import sympy

    if part.rule == "any-of":
        return [np.asarray(v, dtype=float).tolist() for v in (part.value, *part.spec.alternatives())]
    if part.rule == "construction":
        return None                     # the property decides; the test file carries it
    if isinstance(part.value, (bool, np.bool_)):
        return bool(part.value)
    if isinstance(part.value, str):
        return part.value
    if part.symbolic:
        return sympy.srepr(part.value)
    return np.asarray(part.value, dtype=float).tolist()


def _helper_source() -> str:
    source = inspect.getsource(course_check)
    return source.replace("from __future__ import annotations\n", "")


def _verify_source(part: KeyPart, name: str) -> str:
    """The source of a construction's property, bound to ``name`` in the test file."""
    verify = part.spec.accept
    try:
        source = textwrap.dedent(inspect.getsource(verify))
    except (OSError, TypeError) as exc:
        raise ValueError(f"{part.label} {part.part}: the construction's verify has no source to copy into the test "
                         f"files ({exc}); define it with def in calib_book/answers.py.") from None
    if verify.__name__ == "<lambda>" or not source.startswith("def "):
        raise ValueError(f"{part.label} {part.part}: give the construction's verify as a def function (its source "
                         f"goes into the course's test files), not a lambda.")
    return f"{source.rstrip()}\n\n\n{name} = {verify.__name__}\n"


def test_file(label: str, parts: list[KeyPart], hidden: bool) -> str:
    """The source of the otter test file of exercise ``label``: one public case per part (no points), and with
    ``hidden`` one hidden case per part worth the part's points, holding the expected value and tolerances. A part
    with several valid answers is decided by its rule (:class:`KeyPart`'s ``rule``), in both cases."""
    variable = answer_variable(label)
    public = {p.part: public_spec(p) for p in parts}
    lines = [_helper_source(), "", "# --- the tests of exercise " + label + " " + "-" * 40,
             "from otter.test_files import test_case", "", "OK_FORMAT = False", f"name = {label!r}",
             f"PUBLIC = {public!r}", ""]
    for i, p in enumerate(parts):
        if p.rule == "construction":
            lines += ["", _verify_source(p, f"_verify_{i}")]
    if hidden:
        key = {p.part: {"rule": p.rule, "expected": _hidden_value(p), "rtol": p.spec.rtol, "atol": p.spec.atol,
                        "symbols": public[p.part].get("symbols")} for p in parts}
        lines += [f"HIDDEN = {key!r}", ""]
    lines += ["", "def _answer(env, part):",
              f"    answers = env.get({variable!r})",
              "    if not isinstance(answers, dict) or part not in answers:",
              f"        raise AssertionError(f\"{variable}[{{part!r}}] is not given: fill \"",
              f"                             f\"{variable} = dict({{part}}=...) in the exercise's cell\")",
              "    return answers[part]", ""]
    for i, p in enumerate(parts):
        hint = f" ({p.spec.hint})" if p.spec.hint else ""
        wrong = f"{label} {p.part}: wrong{hint}"
        if p.rule == "interval":         # the key's interval is not public: the public test checks the form only
            name, body = f"{label} {p.part} (its form; the interval is graded)", \
                [f"    interval_form(_answer(env, {p.part!r}))"]
        elif p.rule == "construction":
            name, body = f"{label} {p.part}", [f"    if not _holds(_verify_{i}, _answer(env, {p.part!r})):",
                                               f"        raise AssertionError({wrong!r})"]
        else:
            name, body = f"{label} {p.part}", [f"    if not public_verdict(_answer(env, {p.part!r}), "
                                               f"PUBLIC[{p.part!r}]):",
                                               f"        raise AssertionError({wrong!r})"]
        lines += ["", f"@test_case(name={name!r}, points=0, hidden=False)", f"def public_{i}(env):", *body, ""]
        if hidden:
            given = f"env.get({variable!r}, {{}}).get({p.part!r}, ...)"
            if p.rule == "construction":
                check = f"    assert _holds(_verify_{i}, {given})"
            else:
                check = f"    assert graded_verdict({given}, HIDDEN[{p.part!r}])"
            lines += ["", f"@test_case(name={f'{label} {p.part} (graded)'!r}, points={p.points!r}, hidden=True)",
                      f"def hidden_{i}(env):", check, ""]
    return "\n".join(lines).rstrip() + "\n"


def _chapter_notebook(root: Path, chapter: str):
    from calib_book.runner import _markdown_to_notebook

    return _markdown_to_notebook(Path(root) / "chapters" / f"{chapter}.md")


def student_notebook(root: Path, chapter: str):
    """The chapter for students: solutions removed, the key's import dropped, the grader set up in the first code
    cell, and after each exercise a cell that fills its answer dictionary and runs its public tests."""
    import nbformat

    nb = strip_solutions(_chapter_notebook(root, chapter))
    graded = {p.label: [] for p in key_parts_cached(chapter)}
    for p in key_parts_cached(chapter):
        graded[p.label].append(p.part)
    cells, grader_added = [], False
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.source = _KEY_IMPORT.sub("", cell.source)
            if not grader_added:
                cells.append(nbformat.v4.new_code_cell(_GRADER_CELL.format(chapter=chapter),
                                                       metadata={"tags": ["course-grader"]}))
                grader_added = True
        cells.append(cell)
        if cell.cell_type != "markdown":
            continue
        for label in _EXERCISE_LABEL.findall(cell.source):
            lines = [f"# Exercise {label}: your work here"]
            if label in graded:
                fields = ", ".join(f"{part}=..." for part in graded[label])
                lines += ["", f"{answer_variable(label)} = dict({fields})", "", f"grader.check({label!r})"]
            cells.append(nbformat.v4.new_code_cell("\n".join(lines), metadata={"tags": ["student-work"]}))
    nb.cells = cells
    return nb


def instructor_notebook(root: Path, chapter: str):
    """The chapter with its solutions, as instructors get it."""
    return _chapter_notebook(root, chapter)


_PARTS_CACHE: dict[str, list[KeyPart]] = {}


def key_parts_cached(chapter: str) -> list[KeyPart]:
    """:func:`key_parts` of one chapter, computed once per process."""
    if chapter not in _PARTS_CACHE:
        _PARTS_CACHE[chapter] = key_parts(chapter)
    return _PARTS_CACHE[chapter]


def _wrong(value):
    import sympy

    if isinstance(value, (bool, np.bool_)):
        return not bool(value)
    if isinstance(value, str):
        return value + " (not this)"
    if isinstance(value, sympy.Basic):
        return value + 1
    array = np.asarray(value, dtype=float)
    return (array + 2.0 * (1.0 + np.abs(array))).tolist()


def planted_submission(chapter: str, kind: str):
    """A submission for the chapter: ``"right"`` (every part the key's value), ``"wrong"`` (every part far off) or
    ``"first-right"`` (each exercise's first part right, the others wrong); a notebook of answer cells."""
    import nbformat
    import sympy

    if kind not in ("right", "wrong", "first-right"):
        raise ValueError(f"kind={kind!r}: give 'right', 'wrong' or 'first-right'.")
    cells = [nbformat.v4.new_code_cell("import numpy as np\nimport sympy\nfrom sympy import *")]
    by_label: dict[str, list[KeyPart]] = {}
    for p in key_parts_cached(chapter):
        by_label.setdefault(p.label, []).append(p)
    for label, parts in by_label.items():
        fields = []
        for i, p in enumerate(parts):
            right = kind == "right" or (kind == "first-right" and i == 0)
            value = p.value if right else _wrong(p.value)
            if isinstance(value, sympy.Basic):
                text = f"sympify({sympy.srepr(value)!r})"
            elif isinstance(value, (bool, np.bool_)):
                text = repr(bool(value))
            elif isinstance(value, str):
                text = repr(value)
            else:
                text = f"np.array({np.asarray(value, dtype=float).tolist()!r})"
            fields.append(f"{p.part}={text}")
        cells.append(nbformat.v4.new_code_cell(f"{answer_variable(label)} = dict({', '.join(fields)})"))
    nb = nbformat.v4.new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return nb


def expected_points(chapter: str, kind: str) -> float:
    """The points a planted submission of ``kind`` earns: all, none, or each exercise's first part."""
    parts = key_parts_cached(chapter)
    if kind == "right":
        return float(sum(p.points for p in parts))
    if kind == "wrong":
        return 0.0
    seen, total = set(), 0.0
    for p in parts:
        if p.label not in seen:
            seen.add(p.label)
            total += p.points
    return total


def _chapters(root: Path) -> list[str]:
    from calib_book.runner import chapters_in_toc

    return chapters_in_toc(root)


def _copy_student_library(root: Path, student: Path) -> None:
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(root / "calib", student / "calib", ignore=ignore)
    helpers = student / "calib_book"
    helpers.mkdir()
    for path in sorted((root / "book" / "calib_book").glob("*.py")):
        if path.name not in STUDENT_SKIPS:
            shutil.copy2(path, helpers / path.name)
    for folder in ("results", "data"):
        shutil.copytree(root / "book" / folder, student / "book" / folder, ignore=ignore)


def build_course(root: Path, chapters: list[str] | None = None, out: Path | None = None) -> Path:
    """Write ``_build/course`` (or ``out``: student bundle, autograders, instructor notebooks); returns its path."""
    import nbformat
    from otter.generate import main as otter_generate

    from calib_book.runner import build_dir

    root = Path(root).resolve()
    start = time.perf_counter()
    course = Path(out) if out is not None else build_dir(root) / "course"
    if course.exists():
        shutil.rmtree(course)
    student, autograder, instructor = course / "student", course / "autograder", course / "instructor"
    for folder in (student, autograder, instructor):
        folder.mkdir(parents=True)
    _copy_student_library(root, student)
    (student / BUNDLE_MARKER).write_text("The top of the course bundle: calib_book.paths.book_root finds it.\n")
    (student / "requirements.txt").write_text("\n".join(REQUIREMENTS) + "\n")
    chapters = chapters or _chapters(root)
    for chapter in chapters:
        nbformat.write(student_notebook(root, chapter), student / f"{chapter}.ipynb")
        nbformat.write(instructor_notebook(root, chapter), instructor / f"{chapter}.ipynb")
        by_label: dict[str, list[KeyPart]] = {}
        for p in key_parts_cached(chapter):
            by_label.setdefault(p.label, []).append(p)
        public_dir, hidden_dir = student / "tests" / chapter, autograder / "tests" / chapter
        public_dir.mkdir(parents=True)
        hidden_dir.mkdir(parents=True)
        for label, parts in by_label.items():
            (public_dir / f"{label}.py").write_text(test_file(label, parts, hidden=False))
            (hidden_dir / f"{label}.py").write_text(test_file(label, parts, hidden=True))
        if by_label:
            (autograder / f"{chapter}.json").write_text(json.dumps({"lang": "python", "show_hidden": False}))
            otter_generate(tests_dir=str(hidden_dir), output_path=str(autograder / f"{chapter}.zip"),
                           config=str(autograder / f"{chapter}.json"), no_requirements=True, no_environment=True)
    print(f"[course] {course} ({len(chapters)} chapters, {time.perf_counter() - start:.1f} s)")
    return course


@dataclass(frozen=True)
class SelfTestRow:
    """The points a planted submission earned from a chapter's autograder, and the points it should earn."""

    chapter: str
    kind: str
    points: float
    expected: float
    possible: float

    @property
    def as_expected(self) -> bool:
        """Whether the autograder gave the points the key says."""
        return math.isclose(self.points, self.expected, abs_tol=1e-9)


def self_test(course: Path, kinds: tuple[str, ...] = ("right", "wrong")) -> list[SelfTestRow]:
    """Grade planted submissions of every chapter that has an autograder in ``course`` (``_build/course``)."""
    import tempfile

    import nbformat

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for bundle in sorted((Path(course) / "autograder").glob("*.zip")):
            chapter = bundle.stem
            for kind in kinds:
                submission = Path(tmp) / f"{chapter}-{kind}.ipynb"
                nbformat.write(planted_submission(chapter, kind), submission)
                points = sum(grade(bundle, submission).values())
                rows.append(SelfTestRow(chapter, kind, points, expected_points(chapter, kind),
                                        expected_points(chapter, "right")))
    return rows


def self_test_table(rows: list[SelfTestRow]) -> str:
    """The self-test as a text table, one line per chapter and submission."""
    lines = [f"{'chapter':32s} {'submission':12s} {'points':>8s} {'expected':>8s} {'of':>5s}"]
    lines += [f"{r.chapter:32s} {r.kind:12s} {r.points:8g} {r.expected:8g} {r.possible:5g}"
              + ("" if r.as_expected else "   <- not as the key says") for r in rows]
    return "\n".join(lines)


def grade(autograder_zip: Path, submission: Path) -> dict[str, float]:
    """Grade ``submission`` with ``autograder_zip`` here, without Docker (``otter run``): points per exercise."""
    import contextlib
    import io

    from otter.run import main as otter_run

    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        results = otter_run(str(submission), autograder=str(autograder_zip), output_dir=None, no_logo=True)
    return {name: float(results.get_score(name)) for name in results.results if name != "Public Tests"}
