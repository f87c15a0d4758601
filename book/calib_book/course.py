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
give the points. ``grade(autograder_zip, submission)`` grades a submission here, without Docker: the submission runs in
a kernel of its own under time limits, and the hidden tests run afterwards in a separate process that gets its answers
as data, never in its kernel (``otter run`` runs them in the submission's kernel).
"""

from __future__ import annotations

import functools
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
           "SelfTestRow", "self_test", "self_test_table", "Grade", "CELL_TIMEOUT_S", "NOTEBOOK_TIMEOUT_S",
           "INTERRUPT_GRACE_S", "COLLECT_TIMEOUT_S", "STUDENT_SKIPS",
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
                points = grade(bundle, submission).total
                rows.append(SelfTestRow(chapter, kind, points, expected_points(chapter, kind),
                                        expected_points(chapter, "right")))
    return rows


def self_test_table(rows: list[SelfTestRow]) -> str:
    """The self-test as a text table, one line per chapter and submission."""
    lines = [f"{'chapter':32s} {'submission':12s} {'points':>8s} {'expected':>8s} {'of':>5s}"]
    lines += [f"{r.chapter:32s} {r.kind:12s} {r.points:8g} {r.expected:8g} {r.possible:5g}"
              + ("" if r.as_expected else "   <- not as the key says") for r in rows]
    return "\n".join(lines)


#: Seconds one cell of a submission may run (``grade``'s ``cell_timeout``; the hidden tests get as long): a training
#: cell of a chapter's quick profile takes a few minutes.
CELL_TIMEOUT_S = 600
#: Seconds all the cells of a submission may run together (``grade``'s ``timeout``).
NOTEBOOK_TIMEOUT_S = 3600
#: Seconds a cell interrupted at its time limit has to stop before its kernel is killed.
INTERRUPT_GRACE_S = 10
#: Seconds the cell that collects the answers may run (it encodes them as data, in the submission's kernel).
COLLECT_TIMEOUT_S = 120


@dataclass(frozen=True)
class Grade:
    """What :func:`grade` gives a submission: the points of each exercise (by label, one per test file of the
    autograder), the points each could give, and the notes that say why points are missing beyond a wrong answer
    (a cell past its time limit, a kernel that died, an answer of a type the grader cannot read)."""

    points: dict[str, float]
    possible: dict[str, float]
    notes: tuple[str, ...] = ()

    @property
    def total(self) -> float:
        """The points of the submission."""
        return float(sum(self.points.values()))


# --- the answers as data: encoded in the submission's kernel, decoded in the process that runs the hidden tests ---

def _encode_answer(value, depth=0, parse=True):
    """``value`` as JSON data that the grader reads back without running any code: numbers, strings, True/False,
    None, ``...``, lists, tuples, dicts, numeric arrays (whatever numpy converts, a torch tensor too) and sympy
    expressions (their tree, :func:`_encode_expression`); any other type as unsupported, with its name. A string
    (with ``parse``) goes with the expression sympy reads from it, parsed here: sympy's parser runs the text as
    code, which the grader never does. It runs in the submission's kernel (its source is copied into the cell that
    collects the answers) and imports what it needs itself."""
    import numbers
    import sys

    if depth > 64:
        return {"type": "unsupported", "value": "a value nested more than 64 levels deep"}
    if value is None or value is Ellipsis:
        return {"type": "none" if value is None else "ellipsis"}
    if isinstance(value, str):
        encoded = {"type": "str", "value": str(value)}
        if parse:
            try:
                import sympy

                encoded["expression"] = _encode_expression(sympy.sympify(str(value)), depth + 1)
            except Exception:                                     # noqa: BLE001 (text that is no expression)
                pass
        return encoded
    sympy, np = sys.modules.get("sympy"), sys.modules.get("numpy")
    if sympy is not None and isinstance(value, sympy.Basic):
        return _encode_expression(value, depth)
    if sympy is not None and isinstance(value, sympy.MatrixBase):
        return {"type": "matrix", "value": [[_encode_expression(value[i, j], depth + 1) for j in range(value.cols)]
                                            for i in range(value.rows)]}
    if isinstance(value, bool) or (np is not None and isinstance(value, np.bool_)):
        return {"type": "bool", "value": bool(value)}
    if isinstance(value, numbers.Integral):
        return {"type": "int", "value": int(value)}
    if isinstance(value, numbers.Real):
        return {"type": "float", "value": float(value)}
    if isinstance(value, numbers.Complex):
        return {"type": "complex", "value": [float(value.real), float(value.imag)]}
    if isinstance(value, (list, tuple)):
        return {"type": "tuple" if isinstance(value, tuple) else "list",
                "value": [_encode_answer(v, depth + 1) for v in value]}
    if isinstance(value, dict):
        return {"type": "dict", "value": [[_encode_answer(k, depth + 1, parse=False), _encode_answer(v, depth + 1)]
                                          for k, v in value.items()]}
    if hasattr(value, "__array__"):
        import numpy as np

        try:
            array = np.asarray(value)
            if array.dtype.kind == "O":
                try:
                    array = array.astype(float)
                except (TypeError, ValueError):
                    array = array.astype(complex)
        except Exception:                                         # noqa: BLE001 (whatever __array__ raises)
            array = None
        if array is not None and array.dtype.kind in "biuf":
            return {"type": "array", "dtype": array.dtype.str, "value": array.tolist()}
        if array is not None and array.dtype.kind == "c":
            return {"type": "array", "dtype": array.dtype.str, "value": array.real.tolist(),
                    "imag": array.imag.tolist()}
    kind = type(value)
    return {"type": "unsupported", "value": f"a {kind.__module__}.{kind.__qualname__}"}


def _encode_expression(expr, depth):
    """A sympy expression as its tree: symbols with their assumptions, exact numbers, floats as decimal text,
    singletons (pi, oo, ...) by name, and every other node by its class in sympy's namespace, the only classes the
    grader rebuilds a node from; runs in the submission's kernel, as :func:`_encode_answer` does."""
    import sympy

    if depth > 64:
        return {"type": "unsupported", "value": "a sympy expression nested more than 64 levels deep"}
    name = type(expr).__name__
    if isinstance(expr, sympy.Symbol):
        assumptions = {k: v for k, v in expr.assumptions0.items() if isinstance(v, bool)}
        return {"type": "symbol", "value": expr.name, "assumptions": assumptions}
    if isinstance(expr, sympy.Integer):
        return {"type": "integer", "value": int(expr)}
    if isinstance(expr, sympy.Rational):
        return {"type": "rational", "value": [int(expr.p), int(expr.q)]}
    if isinstance(expr, sympy.Float):
        return {"type": "sympy-float", "value": str(expr), "precision": int(getattr(expr, "_prec", 53))}
    if not expr.args and getattr(sympy.S, name, None) is expr:
        return {"type": "singleton", "value": name}
    if name == "ExprCondPair" or getattr(sympy, name, None) is type(expr):
        return {"type": "node", "value": name, "args": [_encode_expression(a, depth + 1) for a in expr.args]}
    return {"type": "unsupported", "value": f"the sympy class {name}"}


class _Unreadable:
    """An answer the grader could not read back (a type :func:`_encode_answer` does not encode): no comparison of
    the hidden tests accepts it."""

    def __init__(self, what):
        self.what = what

    def __repr__(self):
        return "<an answer the grader cannot read>"

    def _sympy_(self):
        raise TypeError("an answer the grader cannot read")


class _Text(str):
    """A text answer in the grader: the text, and the sympy expression the submission's kernel read from it, which
    ``sympy.sympify`` returns (``_sympy_``) instead of parsing the text, which would run it as code here."""

    def __new__(cls, text, expression=None):
        self = super().__new__(cls, text)
        self.expression = expression
        return self

    def _sympy_(self):
        if self.expression is None:
            raise TypeError(f"{str(self)[:40]!r} is not an expression sympy reads")
        return self.expression


def _decode_answer(data, depth=0):
    """The answer :func:`_encode_answer` encoded, rebuilt from data only; anything else raises (ValueError, or the
    TypeError of numpy or sympy), and the grader counts that answer as unreadable."""
    import numpy as np

    if depth > 64 or not isinstance(data, dict):
        raise ValueError("not an encoded answer")
    kind, value = data.get("type"), data.get("value")
    if kind in ("none", "ellipsis"):
        return None if kind == "none" else Ellipsis
    if kind == "str" and isinstance(value, str):
        try:
            expression = _decode_expression(data["expression"], depth + 1) if "expression" in data else None
        except Exception:                                         # noqa: BLE001 (an expression it cannot rebuild)
            expression = None
        return _Text(value, expression)
    if kind == "bool" and isinstance(value, bool) or kind == "int" and type(value) is int:
        return value
    if kind == "float" and type(value) in (int, float):
        return float(value)
    if kind == "complex" and isinstance(value, list) and len(value) == 2 \
            and all(type(v) in (int, float) for v in value):
        return complex(*value)
    if kind in ("list", "tuple") and isinstance(value, list):
        items = [_decode_answer(v, depth + 1) for v in value]
        return items if kind == "list" else tuple(items)
    if kind == "dict" and isinstance(value, list):
        return {_decode_answer(k, depth + 1): _decode_answer(v, depth + 1) for k, v in value}
    if kind == "array":
        dtype = np.dtype(str(data.get("dtype")))
        if dtype.kind not in "biufc":
            raise ValueError(f"an array of dtype {dtype}")
        if dtype.kind != "c":
            return np.array(value, dtype=dtype)
        return (np.array(value, dtype=float) + 1j * np.array(data.get("imag"), dtype=float)).astype(dtype)
    if kind == "matrix" and isinstance(value, list):
        import sympy

        return sympy.Matrix([[_decode_expression(e, depth + 1) for e in row] for row in value])
    if kind == "unsupported":
        return _Unreadable(str(value))
    return _decode_expression(data, depth)


def _decode_expression(data, depth):
    """The sympy expression :func:`_encode_expression` encoded, rebuilt from sympy's own classes; ValueError for
    anything else."""
    import re

    import sympy
    from sympy.functions.elementary.piecewise import ExprCondPair

    kind, value = data.get("type"), data.get("value")
    if depth > 64:
        raise ValueError("a sympy expression nested more than 64 levels deep")
    if kind == "symbol" and isinstance(value, str):
        assumptions = data.get("assumptions") or {}
        if isinstance(assumptions, dict) and all(isinstance(k, str) and isinstance(v, bool)
                                                 for k, v in assumptions.items()):
            return sympy.Symbol(value, **assumptions)
    if kind == "integer" and type(value) is int:
        return sympy.Integer(value)
    if kind == "rational" and isinstance(value, list) and len(value) == 2 and all(type(v) is int for v in value):
        return sympy.Rational(*value)
    precision = data.get("precision")
    if kind == "sympy-float" and isinstance(value, str) and re.fullmatch(r"[-+]?(\d+\.?\d*|\.\d+)(e[-+]?\d+)?",
                                                                         value) \
            and type(precision) is int and 1 <= precision <= 10_000:
        return sympy.Float(value, precision=precision)
    if kind == "singleton" and isinstance(value, str) and value.isidentifier() and not value.startswith("_"):
        single = getattr(sympy.S, value, None)
        if isinstance(single, sympy.Basic):
            return single
    if kind == "node" and isinstance(value, str) and not value.startswith("_") and isinstance(data.get("args"), list):
        node = ExprCondPair if value == "ExprCondPair" else getattr(sympy, value, None)
        if isinstance(node, type) and issubclass(node, sympy.Basic):
            return node(*[_decode_expression(a, depth + 1) for a in data["args"]])
    raise ValueError(f"an encoded answer of type {kind!r}")


def _run_hidden_tests(tests, answers):
    """Run the test files ``tests`` (label -> source) on the encoded ``answers`` (variable -> data): the points per
    file, the points it could give, and a note per answer the grader could not read. The process that calls it runs
    no code of the submission: the answers arrive as data (:func:`_decode_answer`). otter's ``test_case``, the one
    name the files import from otter, is defined here (otter's own import takes seconds): a case passes when its
    function returns, and gives its points (otter's rule for the files :func:`test_file` writes)."""
    import inspect
    import sys
    import types

    class test_case:                                              # noqa: N801 (otter's name)
        def __init__(self, name=None, points=None, hidden=False, success_message=None, failure_message=None):
            self.name, self.points, self.hidden = name, points, hidden

        def __call__(self, test_func):
            self.test_func = test_func
            return self

    otter, files = types.ModuleType("otter"), types.ModuleType("otter.test_files")
    files.test_case, otter.test_files = test_case, files
    sys.modules.update({"otter": otter, "otter.test_files": files})
    env, notes = {}, []
    for variable, data in answers.items():
        try:
            if isinstance(data, dict) and data.get("type") == "dict" and isinstance(data.get("value"), list):
                env[variable] = {}
                for key, value in data["value"]:
                    key = _decode_answer(key)
                    try:
                        env[variable][key] = _decode_answer(value)
                    except Exception as exc:                      # noqa: BLE001 (any malformed data)
                        env[variable][key] = _Unreadable(f"malformed data ({exc})")
            else:
                env[variable] = _decode_answer(data)
        except Exception as exc:                                  # noqa: BLE001
            env[variable] = _Unreadable(f"malformed data ({exc})")
        given = env[variable]
        for key, value in (given.items() if isinstance(given, dict) else [(None, given)]):
            if isinstance(value, _Unreadable):
                where = variable if key is None else f"{variable}[{key!r}]"
                notes.append(f"{where}: the grader cannot read {value.what}; give a number, an array, a string, "
                             f"True/False or a sympy expression")
    results = {}
    for label, source in tests.items():
        space = {}
        exec(compile(source, f"tests/{label}.py", "exec"), space)     # noqa: S102 (the autograder's own tests)
        score = possible = 0.0
        for case in [v for v in space.values() if isinstance(v, test_case)]:
            possible += float(case.points)
            arguments = {p: env if p == "env" else env.get(p) for p in inspect.signature(case.test_func).parameters}
            try:
                case.test_func(**arguments)
            except Exception:                                     # noqa: BLE001 (a failed case, as otter counts it)
                continue
            score += float(case.points)
        results[space["name"]] = {"score": score, "possible": possible}
    return {"results": results, "notes": notes}


_HIDDEN_MAIN = '''
if __name__ == "__main__":
    import json
    import sys

    payload = json.load(sys.stdin)
    stdout, sys.stdout = sys.stdout, sys.stderr
    stdout.write(json.dumps(_run_hidden_tests(payload["tests"], payload["answers"])))
'''


@functools.cache
def _hidden_runner_source() -> str:
    """The program that runs the hidden tests in a process of its own (``python -I``, :func:`_run_hidden_tests`)."""
    parts = (_Unreadable, _Text, _decode_answer, _decode_expression, _run_hidden_tests)
    return "\n\n".join(textwrap.dedent(inspect.getsource(p)) for p in parts) + "\n" + _HIDDEN_MAIN


def _collect_source(variables: list[str], path: Path) -> str:
    """The cell that writes the answers the hidden tests read (the variables ``variables``) to ``path``, encoded by
    :func:`_encode_answer` in the submission's kernel."""
    encoders = "\n\n".join(inspect.getsource(f) for f in (_encode_answer, _encode_expression))
    return (f"{encoders}\n\ndef _calib_collect_answers(names, path):\n    import json\n\n"
            f"    space = globals()\n    answers = {{n: _encode_answer(space[n]) for n in names if n in space}}\n"
            f"    with open(path, 'w', encoding='utf-8') as file:\n        json.dump(answers, file)\n\n\n"
            f"_calib_collect_answers({variables!r}, {str(path)!r})\n")


def _hidden_tests(autograder_zip: Path) -> dict[str, str]:
    """The test files of an autograder (``tests/<label>.py`` in the zip ``otter generate`` wrote), read into memory
    before the submission runs: label -> source."""
    import zipfile

    path = Path(autograder_zip)
    if not path.is_file() or not zipfile.is_zipfile(path):
        raise ValueError(f"autograder_zip={str(autograder_zip)!r} is not a zip file: give an autograder that "
                         f"`make course` wrote, _build/course/autograder/NN-slug.zip.")
    with zipfile.ZipFile(path) as archive:
        tests = {Path(name).stem: archive.read(name).decode("utf-8") for name in archive.namelist()
                 if re.fullmatch(r"tests/[^/]+\.py", name)}
    if not tests:
        raise ValueError(f"autograder_zip={str(autograder_zip)!r} holds no tests/*.py: give an autograder that "
                         f"`make course` wrote, _build/course/autograder/NN-slug.zip.")
    return tests


def _execute_submission(submission: Path, variables: list[str], folder: Path, cell_timeout: float,
                        timeout: float) -> tuple[dict | None, list[str]]:
    """Run the submission's code cells in a kernel of its own, in ``folder`` (empty: no test in it), each within
    ``cell_timeout`` and all within ``timeout`` seconds, then encode the answers ``variables`` as data; returns them
    (None where the submission scores 0: its kernel died or would not stop) and the notes on what went wrong."""
    import subprocess

    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellTimeoutError, DeadKernelError

    try:
        nb = nbformat.read(submission, as_version=4)
    except Exception as exc:                                      # noqa: BLE001 (any unreadable file)
        return None, [f"the submission is not a notebook nbformat reads ({type(exc).__name__}): it scores 0"]
    answers_file = folder / f"answers-{secrets.token_hex(8)}.json"
    # A cell past its limit is interrupted by nbclient, which then waits for that cell's last output (a poller left
    # waiting would take the next cells' outputs); the reply it gives such a cell carries this marker.
    marker = f"calib-grade-timeout-{secrets.token_hex(8)}"
    replies: list[dict] = []
    client = NotebookClient(nb, kernel_name="python3", allow_errors=True, shutdown_kernel="immediate",
                            record_timing=False, interrupt_on_timeout=True,
                            error_on_timeout={"ename": "TimeoutError", "evalue": marker, "traceback": []},
                            on_cell_executed=lambda **kw: replies.append(kw["execute_reply"]),
                            resources={"metadata": {"path": str(folder)}})
    notes: list[str] = []
    deadline = time.monotonic() + timeout

    def run(cell, index: int, limit: float, interrupt: bool) -> str | None:
        """Run ``cell``: None when it returned, "interrupted" (past ``limit``, interrupted), "timeout" (past
        ``limit``, without ``interrupt``) or "dead"."""
        client.timeout, client.interrupt_on_timeout = max(1, math.ceil(limit)), interrupt
        replies.clear()
        try:
            client.execute_cell(cell, index)
        except CellTimeoutError:
            return "timeout"
        except DeadKernelError:
            return "dead"
        interrupted = any(r.get("content", {}).get("evalue") == marker for r in replies)
        return "interrupted" if interrupted else None

    dead = ("the kernel died in {where} (os._exit, exit(), a crash or no memory left): the answers are lost, the "
            "submission scores 0")
    with client.setup_kernel(stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL):
        code = [(index, cell) for index, cell in enumerate(nb.cells) if cell.cell_type == "code"]
        for number, (index, cell) in enumerate(code, 1):
            left = deadline - time.monotonic()
            if left <= 0:
                notes.append(f"the notebook's time limit ({timeout:g} s) ran out before code cell {number}: it and "
                             f"the {len(code) - number} after it did not run")
                break
            outcome = run(cell, index, min(cell_timeout, left), interrupt=True)
            if outcome == "dead":
                return None, notes + [dead.format(where=f"code cell {number}")]
            if outcome == "interrupted":
                limit = f"its time limit ({cell_timeout:g} s)" if cell_timeout <= left else \
                    f"the notebook's time limit ({timeout:g} s)"
                notes.append(f"code cell {number} ran past {limit} and was interrupted: the answers it would have "
                             f"given are missing")
                if run(nbformat.v4.new_code_cell("pass"), index, INTERRUPT_GRACE_S, interrupt=False) is not None:
                    return None, notes + [f"code cell {number} did not stop within {INTERRUPT_GRACE_S} s of the "
                                          f"interrupt: its kernel was killed, the submission scores 0"]
        collect = nbformat.v4.new_code_cell(_collect_source(variables, answers_file))
        nb.cells.append(collect)
        outcome = run(collect, len(nb.cells) - 1, COLLECT_TIMEOUT_S, interrupt=False)
        if outcome == "dead":
            return None, notes + [dead.format(where="the cell that collects the answers")]
        if outcome == "timeout":
            return None, notes + [f"the answers could not be collected within {COLLECT_TIMEOUT_S} s: the submission "
                                  f"scores 0"]
    # the kernel is shut down: nothing of the submission runs from here on
    errors = [f"{o.get('ename')}: {o.get('evalue')}" for o in collect.get("outputs", []) if o.output_type == "error"]
    try:
        answers = json.loads(answers_file.read_text(encoding="utf-8"))
        if not isinstance(answers, dict):
            raise ValueError(f"a {type(answers).__name__}, not a dictionary of answers")
    except (OSError, ValueError, RecursionError) as exc:
        why = errors[0] if errors else f"{type(exc).__name__}: {exc}"
        return None, notes + [f"the answers could not be collected ({why}): the submission scores 0"]
    return answers, notes


def _apply_hidden_tests(tests: dict[str, str], answers: dict, limit: float) -> dict:
    """:func:`_run_hidden_tests` in a fresh ``python -I`` process, which gets the tests and the answers as JSON on its
    standard input and ``limit`` seconds; its results, a note added when it ran out of time (the answers count as
    not given)."""
    import subprocess
    import sys
    import tempfile

    payload = json.dumps({"tests": tests, "answers": answers})
    with tempfile.TemporaryDirectory(prefix="calib-hidden-") as folder:
        try:
            done = subprocess.run([sys.executable, "-I", "-c", _hidden_runner_source()], input=payload, text=True,
                                  capture_output=True, timeout=max(1.0, limit), cwd=folder)
        except subprocess.TimeoutExpired:
            result = _apply_hidden_tests(tests, {}, limit) if answers else None
            if result is None:
                raise RuntimeError(f"the hidden tests did not finish within {limit:g} s on no answers") from None
            result["notes"].append(f"the hidden tests ran past the time limit ({limit:g} s) on these answers: the "
                                   f"submission scores 0")
            return result
    if done.returncode != 0:
        raise RuntimeError(f"the hidden tests' process failed (exit status {done.returncode}):\n{done.stderr[-4000:]}")
    return json.loads(done.stdout)


def grade(autograder_zip: Path, submission: Path, *, cell_timeout: float = CELL_TIMEOUT_S,
          timeout: float = NOTEBOOK_TIMEOUT_S) -> Grade:
    """Grade the notebook ``submission`` with the hidden tests of ``autograder_zip``, here, without Docker; the hidden
    tests never run in the submission's kernel.

    The submission runs in a Jupyter kernel of its own, in an empty temporary folder; the hidden tests are read into
    memory beforehand and are never written where that kernel runs. Each code cell may run ``cell_timeout``
    seconds and all of them ``timeout`` seconds: a cell past its limit is interrupted and its answers are missing
    (the rest of the notebook runs on); a cell that does not stop within :data:`INTERRUPT_GRACE_S` of the interrupt,
    and a kernel that dies (``os._exit``, ``exit()``, a crash), end the run, and the submission scores 0. Then a cell
    encodes the answer dictionaries (``ex_label = dict(...)``, the only names the tests read) as JSON data
    (:func:`_encode_answer`), the kernel is shut down, and the hidden tests run in a fresh ``python -I`` process that
    gets the answers as data, within ``cell_timeout`` seconds: what the submission patched in its kernel (numpy,
    sympy, otter) is not there, and the answers carry no code. ``otter run`` instead copies the hidden tests next to
    the submission and runs them in its kernel, where a submission can read or patch them.

    This is not a sandbox: the submission's code runs as the user who grades, with that user's files; a submission
    that searches the disk for the autograder, or leaves a process behind, is kept from it only by an account or a
    container it cannot read the autograder from.

    Parameters
    ----------
    autograder_zip : Path
        An autograder that :func:`build_course` wrote (``autograder/NN-slug.zip``).
    submission : Path
        The student's notebook (``.ipynb``).
    cell_timeout : float
        Seconds one code cell may run (and the hidden tests), :data:`CELL_TIMEOUT_S` by default.
    timeout : float
        Seconds all the code cells may run together, :data:`NOTEBOOK_TIMEOUT_S` by default.

    Returns
    -------
    Grade
        The points per exercise, the points possible and the notes on time limits, a dead kernel and answers the
        grader could not read.
    """
    import tempfile

    for name, value in (("cell_timeout", cell_timeout), ("timeout", timeout)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < math.inf:
            raise ValueError(f"{name}={value!r}: give the seconds as a positive finite number.")
    submission = Path(submission)
    if submission.suffix != ".ipynb" or not submission.is_file():
        raise ValueError(f"submission={str(submission)!r} is not a notebook file: give the student's .ipynb "
                         f"(grade runs notebooks; `otter run` also takes .py and .zip submissions).")
    tests = _hidden_tests(autograder_zip)
    variables = sorted({answer_variable(label) for label in tests})
    # the hidden runner's source, read (and cached) before a kernel runs: a task that nbclient leaves behind a
    # killed kernel, logged while CPython 3.11 parses the source, made ast.parse raise SystemError
    _hidden_runner_source()
    with tempfile.TemporaryDirectory(prefix="calib-grade-", ignore_cleanup_errors=True) as folder:
        answers, notes = _execute_submission(submission, variables, Path(folder), cell_timeout, timeout)
    graded = _apply_hidden_tests(tests, answers or {}, cell_timeout)
    results = graded["results"]
    return Grade({label: results[label]["score"] for label in sorted(results)},
                 {label: results[label]["possible"] for label in sorted(results)}, tuple(notes + graded["notes"]))
