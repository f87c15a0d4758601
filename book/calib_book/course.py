"""The course edition (``make course``): student notebooks graded by otter-grader, its autograder, the instructors'.

``build_course(root)`` writes ``_build/course/``:

- ``student/``: what students get, a folder that runs where it is opened. One notebook per chapter
  (``NN-slug.ipynb``, the solutions removed, a cell after each exercise to work in, ending with
  ``grader.check("label")``), the public tests in ``tests/NN-slug/<label>.py``, the library (``calib/``), the
  book's helpers without the key (``calib_book/`` less ``answers/``, ``exercises.py``, ``course.py``), the stored
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
import sys
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from calib_book import course_check, timeouts
from calib_book.answers import EXERCISES, SEED_VARIABLE, Expected, course_seed, expected_value, graded_form, using_seed
from calib_book.paths import BUNDLE_MARKER
from calib_book.student import add_starter_cells, strip_solutions

__all__ = ["KeyPart", "key_parts", "answer_variable", "public_spec", "test_file", "student_notebook",
           "instructor_notebook", "planted_submission", "PLANTED_KINDS", "Mistake", "MISTAKES", "build_course",
           "bundle_environment", "autograder_requirements", "grade", "SelfTestRow", "self_test", "self_test_table",
           "Grade", "CELL_TIMEOUT_S", "NOTEBOOK_TIMEOUT_S", "INTERRUPT_GRACE_S", "COLLECT_TIMEOUT_S", "STUDENT_SKIPS",
           "REQUIREMENTS", "AUTOGRADER_REQUIREMENTS"]

#: What of ``book/calib_book`` stays out of the student bundle: the key (the package ``answers/``; only the folder's
#: own modules are copied), the checker that imports it, this builder and the leak scan, which do too.
STUDENT_SKIPS = ("answers", "exercises.py", "course.py", "leaks.py")

#: The packages a chapter's notebook needs beside torch (the student's and the autograder's environment alike);
#: scikit-learn ships the digits that chapter 08's training exercises load (without it their cells raised
#: ImportError in the autograder's environment and a right submission scored 13 of 19: issue 46).
_PACKAGES = ["numpy>=1.24", "scipy>=1.10", "sympy>=1.12", "mpmath", "matplotlib>=3.7", "tqdm>=4.65", "pillow>=9",
             "pyyaml>=6.0", "myst-nb>=1.1", "ipykernel>=6.29", "scikit-learn>=1.8"]


def _torch_requirement() -> str:
    """torch at the version that computed the key (the training exercises' runs are bit-reproducible with it)."""
    import importlib.metadata

    try:
        return "torch==" + importlib.metadata.version("torch").split("+")[0]
    except importlib.metadata.PackageNotFoundError:         # pragma: no cover - calib needs torch
        return "torch>=2.1"


#: What a student installs with pip (torch from its CPU wheel index first; see the README's course section).
REQUIREMENTS = [*_PACKAGES, "otter-grader>=7,<8", "jupyterlab"]
#: What the autograder's environment installs beside otter-grader (``otter generate`` puts them in its
#: ``environment.yml``): torch's CPU wheels at the key's version, and the packages the notebooks import.
AUTOGRADER_REQUIREMENTS = ["--extra-index-url https://download.pytorch.org/whl/cpu", _torch_requirement(), *_PACKAGES]

_GRADER_CELL = ('# torch\'s CPU kernels with AVX2, as the book and its key ran them (calib._reproducible), '
                'before torch is\n'
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

    @property
    def form(self) -> dict | None:
        """What grades the part (``calib_book.answers.graded_form``, the hidden test's spec); None for a
        construction, which its property grades."""
        if self.rule == "construction":
            return None
        return _graded_form(self.label, self.part, self.spec, self.value)


_FORMS: dict[tuple[str, str, str], dict] = {}


def _graded_form(label: str, part: str, spec: Expected, value) -> dict:
    key = (label, part, repr(value))
    if key not in _FORMS:
        _FORMS[key] = graded_form(spec, value, f"{label} {part}")
    return _FORMS[key]


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


def public_spec(part: KeyPart, salt: str | None = None) -> dict:
    """What a public test holds for ``part``, with no value: per element, the exponent of its unit, its slack, the
    phase of its band and the digest of the band's block (see :mod:`calib_book.course_check`); the digests of each
    valid value of an ``any-of`` part; the form of a word or a truth value (its options, and the interval part a
    verdict follows from), which the hidden test alone grades; only the kind of a construction, whose property the
    test file carries."""
    salt = salt or secrets.token_hex(16)
    if part.rule == "construction":
        return {"kind": "construction"}
    return _public_form(part.form, salt)


def _public_form(form: dict, salt: str) -> dict:
    kind = form["kind"]
    if kind == "any-of":
        return {"kind": "any-of", "options": [_public_form(o, f"{salt}{i}") for i, o in enumerate(form["options"])]}
    if kind in ("text", "bool"):
        return {"kind": kind, "choices": form.get("choices") or [], "verdict_on": form.get("verdict_on")}
    phases, digests = [], []
    for i, (_, centre, slack) in enumerate(form["bands"]):
        phase, block = course_check.band_block(centre, slack)
        phases.append(phase)
        digests.append(course_check.digest(salt, i, str(block)))
    return {"kind": kind, "salt": salt, "shape": form["shape"], "exponents": [b[0] for b in form["bands"]],
            "slacks": [b[2] for b in form["bands"]], "phases": phases, "digests": digests,
            "symbols": form.get("symbols")}


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
                         f"files ({exc}); define it with def in its chapter's module of calib_book/answers/.") from None
    if verify.__name__ == "<lambda>" or not source.startswith("def "):
        raise ValueError(f"{part.label} {part.part}: give the construction's verify as a def function (its source "
                         f"goes into the course's test files), not a lambda.")
    return f"{source.rstrip()}\n\n\n{name} = {verify.__name__}\n"


def test_file(label: str, parts: list[KeyPart], hidden: bool, public: dict | None = None) -> str:
    """The source of the otter test file of exercise ``label``: one public case per part (no points), and with
    ``hidden`` one hidden case per part worth the part's points, holding its graded form (the centres). Both decide
    through :mod:`calib_book.course_check`: a number, an interval, a closed form by the integers of the answer (the
    public case by their digests), a word or a truth value by the hidden case alone (the public case checks its
    form, and that a verdict follows from the student's own interval), a construction by its property. ``public``:
    the parts' public specs (:func:`public_spec`), when the public and the hidden file share them."""
    variable = answer_variable(label)
    public = public or {p.part: public_spec(p) for p in parts}
    lines = [_helper_source(), "", "# --- the tests of exercise " + label + " " + "-" * 40,
             "from otter.test_files import test_case", "", "OK_FORMAT = False", f"name = {label!r}",
             f"PUBLIC = {public!r}", ""]
    for i, p in enumerate(parts):
        if p.rule == "construction":
            lines += ["", _verify_source(p, f"_verify_{i}")]
    if hidden:
        lines += [f"HIDDEN = { {p.part: p.form for p in parts}!r}", ""]
    lines += ["", "def _answers(env):",
              f"    answers = env.get({variable!r})",
              "    return answers if isinstance(answers, dict) else {}", "",
              "", "def _answer(env, part):",
              "    answers = _answers(env)",
              "    if part not in answers:",
              f"        raise AssertionError(f\"{variable}[{{part!r}}] is not given: fill \"",
              f"                             f\"{variable} = dict({{part}}=...) in the exercise's cell\")",
              "    return answers[part]", ""]
    for i, p in enumerate(parts):
        hint = f" ({p.spec.hint})" if p.spec.hint else ""
        wrong = f"{label} {p.part}: wrong{hint}"
        kind = public[p.part]["kind"]
        if p.rule == "construction":
            name, body = f"{label} {p.part}", [f"    if not _holds(_verify_{i}, _answer(env, {p.part!r})):",
                                               f"        raise AssertionError({wrong!r})"]
        elif kind in ("text", "bool"):     # the hidden test grades it: a public right or wrong would be an oracle
            name = f"{label} {p.part} (its form; the hidden tests grade it)"
            body = [f"    choice_form(_answer(env, {p.part!r}), PUBLIC[{p.part!r}])"]
            on = public[p.part].get("verdict_on")
            if on:
                body += [f"    if {on!r} in _answers(env):",
                         f"        verdict_follows(_answer(env, {p.part!r}), _answers(env)[{on!r}])"]
        else:
            name, body = f"{label} {p.part}", [f"    if not public_verdict(_answer(env, {p.part!r}), "
                                               f"PUBLIC[{p.part!r}]):",
                                               f"        raise AssertionError({wrong!r})"]
        lines += ["", f"@test_case(name={name!r}, points=0, hidden=False)", f"def public_{i}(env):", *body, ""]
        if hidden:
            given = f"_answers(env).get({p.part!r}, ...)"
            if p.rule == "construction":
                check = f"    assert _holds(_verify_{i}, {given})"
            else:
                check = f"    assert hidden_verdict({given}, HIDDEN[{p.part!r}])"
            lines += ["", f"@test_case(name={f'{label} {p.part} (graded)'!r}, points={p.points!r}, hidden=True)",
                      f"def hidden_{i}(env):", check, ""]
    return "\n".join(lines).rstrip() + "\n"


def _chapter_notebook(root: Path, chapter: str):
    from calib_book.runner import _markdown_to_notebook

    return _markdown_to_notebook(Path(root) / "chapters" / f"{chapter}.md")


#: A mention of the self-check in an exercise's text, ``check("label", ...``: the course edition names the answer
#: dictionary instead.
_CHECK_MENTION = re.compile(r"""check\(\s*["'](?P<label>[\w-]+)["']\s*(?P<comma>,\s*)?(?P<close>\))?""")


def _exercise_text(text: str, seed: int | None) -> str:
    """``text`` with each exercise's data (within its ``{exercise}`` block) and each solution's prose (after its
    ``{solution-start}``) replaced by the course seed's (the key's :class:`~calib_book.answers.registry.Parameter`)."""
    from calib_book.exercises import _EXERCISE

    def exercise(match):
        block = match.group(0)
        label = re.search(r"^:label:\s*(\S+)", block, re.M)
        return _substitute(block, label.group(1), seed) if label else block

    text = _EXERCISE.sub(exercise, text)
    for label in re.findall(r"\{solution-start\}\s*(\S+)", text):
        text = _substitute(text, label, seed)
    return text


def _course_text(text: str, seed: int | None) -> str:
    """An exercise's text as the course gives it: its data for the course seed, and ``check("label", ...)`` written
    as the cell's answer dictionary."""
    text = _exercise_text(text, seed)
    return _CHECK_MENTION.sub(lambda m: f"{answer_variable(m['label'])} = dict(" + (")" if m["close"] else ""), text)


def _substitute(text: str, label: str, seed: int | None) -> str:
    """``text`` with the book's data of exercise ``label`` replaced by the course seed's."""
    from calib_book.answers import PARAMETERS

    if seed is None:
        return text
    for parameter in PARAMETERS.get(label, ()):
        for old, new in parameter.replacements(seed):
            text = text.replace(old, new)
    return text


def _solution_cells(nb) -> dict[str, list[int]]:
    """The code cells of each exercise's solution (``{solution-start} label`` ... ``{solution-end}``), by label."""
    start, end = re.compile(r"\{solution-start\}\s*(\S+)"), re.compile(r"\{solution-end\}")
    out: dict[str, list[int]] = {}
    current = None
    for index, cell in enumerate(nb.cells):
        if cell.cell_type == "markdown":
            opened = start.search(cell.source)
            if opened:
                current = opened.group(1)
                out.setdefault(current, [])
            if end.search(cell.source[opened.end():] if opened else cell.source):
                current = None
        elif current is not None:
            out[current].append(index)
    return out


def _rule_lines(label: str) -> list[str]:
    """The comment lines of an answer cell that state how each part is graded (``calib_book.exercises.rule``)."""
    from calib_book.exercises import rule

    lines = ["# How each part is graded (the hidden tests give the points; for a number, grader.check says right or "
             "wrong):"]
    for part, text in rule(label).items():
        lines += textwrap.wrap(f"{part}: {text}", 110, initial_indent="#   ", subsequent_indent="#       ")
    return lines


_EXPORT_CELL = ("# Hand in: save this notebook (File > Save), then run this cell. It writes a zip of the notebook with "
                "a PDF of it,\n# from which the written parts are graded by the syllabus's rubric; upload that zip. "
                "The PDF needs LaTeX (xelatex\n# and pandoc): without them, run grader.export(pdf=False) and upload a "
                "PDF printed from your browser beside it.\ngrader.export(pdf=True)")


def student_notebook(root: Path, chapter: str, seed: int | None = None):
    """The chapter for students: solutions removed, the key's import dropped, the grader set up in the first code
    cell, the exercises' data of course seed ``seed`` (None: the book's), after each exercise a cell that states how
    each part is graded, fills its answer dictionary and runs its public tests, and a last cell that exports the
    notebook for hand-in (tagged ``otter_ignore``: no grader runs it)."""
    import nbformat

    with using_seed(seed):
        parts = key_parts_cached(chapter)
        nb = strip_solutions(_chapter_notebook(root, chapter))
        graded = {p.label: [] for p in parts}
        for p in parts:
            graded[p.label].append(p.part)
        cells, grader_added = [], False
        for cell in nb.cells:
            if cell.cell_type == "code":
                cell.source = _KEY_IMPORT.sub("", cell.source)
                if not grader_added:
                    cells.append(nbformat.v4.new_code_cell(_GRADER_CELL.format(chapter=chapter),
                                                           metadata={"tags": ["course-grader"]}))
                    grader_added = True
            else:
                cell.source = _course_text(cell.source, seed)
            cells.append(cell)
        nb.cells = cells

        def answer_lines(label):               # the student edition's cells, with the grader's answer dictionary
            if label not in graded:
                return []
            fields = ", ".join(f"{part}=..." for part in graded[label])
            return [*_rule_lines(label), "", f"{answer_variable(label)} = dict({fields})", "",
                    f"grader.check({label!r})"]

        nb = add_starter_cells(nb, answer_lines)
    nb.cells.append(nbformat.v4.new_code_cell(_EXPORT_CELL, metadata={"tags": ["otter_ignore", "course-export"]}))
    return nb


def instructor_notebook(root: Path, chapter: str, seed: int | None = None):
    """The chapter with its solutions, as instructors get it, with the exercises' data of course seed ``seed``
    (statements and solutions); with a seed, a first cell sets ``$CALIB_COURSE_SEED``, so that the solutions'
    ``check`` calls grade with this term's key."""
    import nbformat

    nb = _chapter_notebook(root, chapter)
    owner = {i: label for label, cells in _solution_cells(nb).items() for i in cells}
    for index, cell in enumerate(nb.cells):
        if cell.cell_type == "markdown":
            cell.source = _exercise_text(cell.source, seed)
        elif index in owner:
            cell.source = _substitute(cell.source, owner[index], seed)
    if seed is not None:
        nb.cells.insert(0, nbformat.v4.new_code_cell(
            f"# This term's exercises: their data and the key are drawn from the course seed.\nimport os\n\n"
            f"os.environ[{SEED_VARIABLE!r}] = {str(seed)!r}", metadata={"tags": ["course-seed"]}))
    return nb


_PARTS_CACHE: dict[tuple[str, int | None], list[KeyPart]] = {}


def key_parts_cached(chapter: str) -> list[KeyPart]:
    """:func:`key_parts` of one chapter for the course seed in force, computed once per process."""
    key = (chapter, course_seed())
    if key not in _PARTS_CACHE:
        _PARTS_CACHE[key] = key_parts(chapter)
    return _PARTS_CACHE[key]


# --- planted submissions: full student notebooks with the students' own code -------------------------------------

#: The planted submissions of the self-test, by kind. ``right`` is the book's solutions as a student's code;
#: ``partly`` the first half of the exercises so; ``mistakes`` the classic mistakes of :data:`MISTAKES`, where the
#: chapter has one; ``cheat-read`` no answer and a cell that reads the hidden tests from disk, where otter run leaves
#: them beside the submission; ``cheat-patch`` wrong answers and a cell that patches the comparisons and otter's
#: runner.
PLANTED_KINDS = ("right", "partly", "mistakes", "cheat-read", "cheat-patch")


@dataclass(frozen=True)
class Mistake:
    """A classic mistake, planted in a solution's code: ``replace`` (the book's text, the mistake's; each must
    occur), and the parts it makes wrong."""

    label: str
    what: str
    replace: tuple[tuple[str, str], ...]
    wrong_parts: tuple[str, ...]


#: The classic mistakes the self-test plants (``mistakes``): per exercise, a student's plausible slip written into the
#: book's solution, and the parts it must make wrong; a grader that gave such a submission points would be too lenient.
MISTAKES = (
    Mistake("ch01-ex-ts-limits", "equal-mass bins (AdaECE) for the 15 equal-width bins asked",
            (("metrics.ece(simulate.softmax(zm_bad), y_m)", "metrics.adaptive_ece(simulate.softmax(zm_bad), y_m)"),
             ("metrics.ece(simulate.softmax(zm_bad / t_m), y_m)",
              "metrics.adaptive_ece(simulate.softmax(zm_bad / t_m), y_m)")),
            ("ece_before", "ece_after")),
    Mistake("ex-entropy-bound", "log base 2 for the natural logarithm asked",
            (("(1 - p_hat_b) ** gm * np.log(p_hat_b)", "(1 - p_hat_b) ** gm * np.log2(p_hat_b)"),
             ("np.log(eta_b[eta_b > 0] / p_hat_b[eta_b > 0])", "np.log2(eta_b[eta_b > 0] / p_hat_b[eta_b > 0])"),
             ("-np.sum(p_hat_b * np.log(p_hat_b))", "-np.sum(p_hat_b * np.log2(p_hat_b))")),
            ("focal_loss", "kl", "entropy", "bound")),
    Mistake("ch05-ex-temperature", "temperature scaling fitted on the test split",
            (('args=(lg["val_logits"], lg["val_labels"])', 'args=(lg["test_logits"], lg["test_labels"])'),),
            ("interval",)),
    Mistake("ch05-ex-flsd", "Welch's unpaired interval for the paired one asked",
            (("flsd_gap = {key: paired_seed_interval(", "flsd_gap = {key: _welch_interval("),
             # the anchor is the start of a solution line, not the whole line: a whole line of a solution here would
             # reach the student site through this module's source (the leak scan looks for whole lines)
             ("if STORED_CONFIGURATION and seed == 0:",
              "def _welch_interval(a, b):\n    from types import SimpleNamespace\n\n    from scipy import stats\n\n"
              "    found = stats.ttest_ind(a, b, equal_var=False).confidence_interval(0.95)\n"
              "    return SimpleNamespace(low=float(found.low), high=float(found.high))\n\n\n"
              "if STORED_CONFIGURATION and seed == 0:")),
            ("ece", "norm")),
    Mistake("ch06-ex-thresholds", "gamma off by one (gamma + 1 in the gradient factor)",
            (("phi_sym.subs(gam_, sp.Rational(5, 2))", "phi_sym.subs(gam_, sp.Rational(5, 2) + 1)"),
             ("k_sym.subs(gam_, sp.Rational(5, 2))", "k_sym.subs(gam_, sp.Rational(5, 2) + 1)")),
            ("tau_oc", "peak", "tau_uc")),
)


def _without_asserts(source: str) -> str:
    """A solution's code without its ``assert`` statements (the book's checks against the library, which a student's
    code does not make): each becomes ``pass`` at its indentation."""
    import ast

    try:
        tree = ast.parse(source)
    except SyntaxError:
        return source
    lines = source.splitlines()
    for node in sorted((n for n in ast.walk(tree) if isinstance(n, ast.Assert)), key=lambda n: -n.lineno):
        indent = lines[node.lineno - 1][:node.col_offset]
        lines[node.lineno - 1: node.end_lineno] = [f"{indent}pass"]
    return "\n".join(lines)


def _as_answers(source: str, label: str) -> str:
    """A solution's code with its ``check(label, ...)`` calls written as the answer dictionary (``strict`` and
    ``quiet`` dropped) and the key's import removed."""
    import ast

    source = _KEY_IMPORT.sub("", source)
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return source
    lines = source.splitlines()
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Expr) and isinstance(n.value, ast.Call)
             and isinstance(n.value.func, ast.Name) and n.value.func.id == "check" and n.value.args
             and isinstance(n.value.args[0], ast.Constant) and n.value.args[0].value == label]
    for node in sorted(calls, key=lambda n: -n.lineno):
        fields = [f"{k.arg}={ast.get_source_segment(source, k.value)}" if k.arg else
                  f"**{ast.get_source_segment(source, k.value)}"
                  for k in node.value.keywords if k.arg not in ("strict", "quiet")]
        if len(node.value.args) > 1:
            fields.insert(0, f"answer={ast.get_source_segment(source, node.value.args[1])}")
        indent = lines[node.lineno - 1][:node.col_offset]
        lines[node.lineno - 1: node.end_lineno] = [f"{indent}{answer_variable(label)} = dict({', '.join(fields)})"]
    return "\n".join(lines)


_CHEAT_READ_CELL = '''# A cheat: read the hidden tests where otter run copies them (tests/ beside the notebook) and
# answer with their expected values.
import glob as _glob, re as _re
import numpy as _np
for _path in sorted(set(_glob.glob("**/tests/**/*.py", recursive=True)
                       + _glob.glob("../**/tests/*.py", recursive=True))):
    _source = open(_path).read()
    if "HIDDEN =" not in _source:
        continue
    _space = {}
    exec(_source, _space)
    _answers = {}
    for _part, _form in _space["HIDDEN"].items():
        if _form is None:
            continue
        if _form["kind"] == "any-of":
            _form = _form["options"][0]
        if _form["kind"] in ("text", "bool"):
            _answers[_part] = _form["expected"]
        elif _form["kind"] in ("number", "interval"):
            _values = [_k * 10.0 ** _x for _x, _k, _s in _form["bands"]]
            _answers[_part] = _np.reshape(_values, _form["shape"]).tolist()
    globals()[_re.sub(r"\\W", "_", _space["name"])] = _answers
'''

_CHEAT_PATCH_CELL = '''# A cheat: make numpy's and sympy's comparisons say "equal", and otter's runner pass every case,
# in this kernel.
import dataclasses as _dataclasses, sys as _sys
import numpy as _np, sympy as _sympy
_np.allclose = lambda *a, **k: True
_sympy.simplify = lambda *a, **k: _sympy.Integer(0)
if "otter" in _sys.modules:
    import otter.test_files.exception_test as _exception_test
    _run = _exception_test.ExceptionTestFile.run
    def _passes(self, env):
        _run(self, env)
        self.test_case_results = [_dataclasses.replace(r, passed=True) for r in self.test_case_results]
    _exception_test.ExceptionTestFile.run = _passes
'''


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


def _literal(value) -> str:
    import sympy

    if isinstance(value, sympy.Basic):
        return f"sympy.sympify({sympy.srepr(value)!r})"
    if isinstance(value, (bool, np.bool_)):
        return repr(bool(value))
    if isinstance(value, str):
        return repr(value)
    return repr(np.asarray(value, dtype=float).tolist())


def planted_submission(root: Path, chapter: str, kind: str, seed: int | None = None):
    """A full student notebook of ``chapter`` for course seed ``seed``, as a student of ``kind``
    (:data:`PLANTED_KINDS`) hands it in, and the points it should earn: ``(notebook, expected_points)``; None for
    ``mistakes`` where the chapter has none of :data:`MISTAKES`.

    The student's code is the book's solution of each exercise, its ``check`` call written as the answer dictionary,
    its assertions (the book's checks against the library) left out, and the course seed's data put in; a mistake
    changes that code as :class:`Mistake` says."""
    import nbformat

    if kind not in PLANTED_KINDS:
        raise ValueError(f"kind={kind!r}: give one of {', '.join(PLANTED_KINDS)}.")
    with using_seed(seed):
        parts = key_parts_cached(chapter)
    nb = student_notebook(root, chapter, seed)
    labels = list(dict.fromkeys(p.label for p in parts))
    points = {label: sum(p.points for p in parts if p.label == label) for label in labels}
    mistakes = [m for m in MISTAKES if m.label in points]
    if kind == "mistakes" and not mistakes:
        return None
    book = _chapter_notebook(root, chapter)
    code = {label: "\n\n".join(book.cells[i].source for i in cells) for label, cells in _solution_cells(book).items()}
    answered = labels if kind in ("right", "mistakes") else labels[:math.ceil(len(labels) / 2)] \
        if kind == "partly" else []
    expected = float(sum(points[label] for label in answered))
    for mistake in mistakes if kind == "mistakes" else ():
        source = code[mistake.label]
        for old, new in mistake.replace:
            if old not in source:
                raise ValueError(f"{mistake.label}: the mistake {mistake.what!r} replaces {old!r}, which its solution "
                                 f"no longer holds: update calib_book.course.MISTAKES.")
            source = source.replace(old, new)
        code[mistake.label] = source
        expected -= sum(p.points for p in parts if p.label == mistake.label and p.part in mistake.wrong_parts)
    for cell in nb.cells:
        header = re.match(r"# Exercise (\S+): your work here", cell.source) if cell.cell_type == "code" else None
        if header is None or header.group(1) not in points:
            continue
        label = header.group(1)
        comments = "\n".join(line for line in cell.source.splitlines() if line.startswith("#"))
        if label in answered:
            body = _substitute(_as_answers(_without_asserts(code.get(label, "")), label), label, seed)
            cell.source = f"{comments}\n\n{body}\n\ngrader.check({label!r})"
        elif kind == "cheat-patch":
            fields = ", ".join(f"{p.part}={_literal(_wrong(p.value))}" for p in parts if p.label == label)
            cell.source = f"{comments}\n\nimport sympy\n\n{answer_variable(label)} = dict({fields})"
    if kind == "cheat-read":
        nb.cells.insert(len(nb.cells) - 1, nbformat.v4.new_code_cell(_CHEAT_READ_CELL))
    if kind == "cheat-patch":
        nb.cells.insert(len(nb.cells) - 1, nbformat.v4.new_code_cell(_CHEAT_PATCH_CELL))
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return nb, (0.0 if kind.startswith("cheat") else expected)


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


def _results_read_by(root: Path, chapter: str) -> list[str]:
    """The folders of ``book/results`` that a chapter names (``book/results/<folder>...``), which its autograder
    carries."""
    source = (Path(root) / "chapters" / f"{chapter}.md").read_text(encoding="utf-8")
    return sorted(name for name in set(re.findall(r"book/results/([\w.-]+)", source))
                  if (Path(root) / "book" / "results" / name).is_dir())


def _autograder_files(root: Path, student: Path, chapter: str, staging: Path) -> list[str]:
    """Lay out in ``staging`` what a chapter's autograder carries beside the submission (otter's support files,
    which it copies into the submission's folder): the library, the book's helpers without the key, the data and
    the stored results the chapter reads, its public tests and the bundle marker; the names to give
    ``otter generate``'s ``files`` (it runs in ``staging``)."""
    staging.mkdir(parents=True)
    shutil.copytree(student / "calib", staging / "calib")
    shutil.copytree(student / "calib_book", staging / "calib_book")
    (staging / "book").mkdir()
    (staging / "book" / "data").symlink_to(student / "book" / "data", target_is_directory=True)
    results = _results_read_by(root, chapter)
    if results:
        (staging / "book" / "results").mkdir()
        for name in results:
            (staging / "book" / "results" / name).symlink_to(student / "book" / "results" / name,
                                                             target_is_directory=True)
    shutil.copytree(student / "tests" / chapter, staging / "tests" / chapter)
    (staging / BUNDLE_MARKER).write_text((student / BUNDLE_MARKER).read_text())
    return ["calib", "calib_book", "book", "tests", BUNDLE_MARKER]


def build_course(root: Path, chapters: list[str] | None = None, out: Path | None = None,
                 seed: int | None = None) -> Path:
    """Write ``_build/course`` (or ``out``): the student bundle, the autograders and the instructors' notebooks, for
    course seed ``seed`` (else ``$CALIB_COURSE_SEED``; unset: the book's own data); returns its path.

    Each autograder carries what grading a student's notebook needs, as otter-grader's support files and
    requirements: the library and the book's helpers (no key), the data and the stored results its chapter reads
    and the chapter's public tests (``files/``, which otter copies beside the submission), and the packages
    (:data:`AUTOGRADER_REQUIREMENTS`, which otter installs with its own, on the Python that computed the key)."""
    import contextlib

    import nbformat
    from otter.generate import main as otter_generate

    from calib_book.answers import parse_seed
    from calib_book.runner import build_dir

    root = Path(root).resolve()
    seed = course_seed() if seed is None else parse_seed(seed)
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
    (autograder / "requirements.txt").write_text("\n".join(AUTOGRADER_REQUIREMENTS) + "\n")
    chapters = chapters or _chapters(root)
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    with using_seed(seed):
        for chapter in chapters:
            nbformat.write(student_notebook(root, chapter, seed), student / f"{chapter}.ipynb")
            nbformat.write(instructor_notebook(root, chapter, seed), instructor / f"{chapter}.ipynb")
            by_label: dict[str, list[KeyPart]] = {}
            for p in key_parts_cached(chapter):
                by_label.setdefault(p.label, []).append(p)
            public_dir, hidden_dir = student / "tests" / chapter, autograder / "tests" / chapter
            public_dir.mkdir(parents=True)
            hidden_dir.mkdir(parents=True)
            for label, parts in by_label.items():
                public = {p.part: public_spec(p) for p in parts}
                (public_dir / f"{label}.py").write_text(test_file(label, parts, hidden=False, public=public))
                (hidden_dir / f"{label}.py").write_text(test_file(label, parts, hidden=True, public=public))
            if not by_label:
                continue
            config = autograder / f"{chapter}.json"
            config.write_text(json.dumps({"lang": "python", "show_hidden": False}))
            staging = autograder / "files" / chapter
            files = _autograder_files(root, student, chapter, staging)
            with contextlib.chdir(staging):
                otter_generate(tests_dir=str(hidden_dir), output_path=str(autograder / f"{chapter}.zip"),
                               config=str(config), requirements=str(autograder / "requirements.txt"),
                               no_environment=True, files=files, python_version=python)
            shutil.rmtree(staging)
    shutil.rmtree(autograder / "files", ignore_errors=True)
    (course / "course.json").write_text(json.dumps({"root": str(root), "seed": seed, "chapters": chapters}, indent=1))
    print(f"[course] {course} ({len(chapters)} chapters, course seed {seed if seed is not None else 'none: the book'}"
          f", {time.perf_counter() - start:.1f} s)")
    from calib_book.answers.seeded import coverage_line
    from calib_book.exercises import labels

    print(f"[course] {coverage_line(seed, [label for chapter in chapters for label in labels(chapter)])}")
    return course


# --- the environment otter builds from an autograder ----------------------------------------------------------------

def _machine_pip_options() -> list[str]:
    """The local wheel folders and constraints of this machine's pip configuration (``pip config list``), as uv's
    options, as the Makefile passes them."""
    import subprocess

    try:
        listed = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True,
                                timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    options = []
    for key, values in re.findall(r"^[^.\n]*\.(find-links|constraint)='(.*)'$", listed, re.M):
        for value in values.split():
            options += [f"--{key}", value]
    return options


def autograder_requirements(autograder_zip: Path) -> tuple[str, list[str]]:
    """The Python version and the pip requirements of the environment otter builds from ``autograder_zip`` (its
    ``environment.yml``: conda's ``python=X.Y``, ``pip`` and ``jupyter_server``, and the pip packages, otter's and
    the course's)."""
    import zipfile

    import yaml

    with zipfile.ZipFile(autograder_zip) as archive:
        environment = yaml.safe_load(archive.read("environment.yml"))
    python, pip = None, []
    for dependency in environment["dependencies"]:
        if isinstance(dependency, dict):
            pip += dependency.get("pip", [])
        elif dependency.startswith("python="):
            python = dependency.split("=", 1)[1]
        elif dependency == "jupyter_server":
            pip.append(dependency)
    if python is None:
        raise ValueError(f"autograder_zip={str(autograder_zip)!r}: its environment.yml names no python=X.Y.")
    return python, pip


def bundle_environment(autograder_zip: Path, cache: Path | None = None) -> Path:
    """The Python of an environment built as otter builds the autograder's (its ``environment.yml``: that Python,
    and the pip requirements, otter-grader's and the course's :data:`AUTOGRADER_REQUIREMENTS`), with nothing else:
    not this checkout's ``calib`` or ``calib_book``, which the submission imports from the support files beside it.
    Built once per set of requirements under ``cache`` (default ``_build/cache/course-env``) with uv (pip where uv
    cannot be had); the index options of the requirements (torch's CPU wheels) are left to this machine's pip
    configuration (its local wheel folders and constraints), as the Makefile's setup does."""
    import hashlib
    import subprocess

    python, requirements = autograder_requirements(autograder_zip)
    packages = [r for r in requirements if not r.startswith("-")]
    digest = hashlib.sha256(json.dumps([python, sorted(packages)]).encode()).hexdigest()[:16]
    cache = (Path(cache) if cache is not None
             else Path(__file__).resolve().parents[2] / "_build" / "cache" / "course-env")
    folder = cache / digest
    interpreter = folder / "bin" / "python"
    if (folder / "built").is_file() and interpreter.is_file():
        return interpreter
    shutil.rmtree(folder, ignore_errors=True)
    folder.parent.mkdir(parents=True, exist_ok=True)
    uv = shutil.which("uv") or str(Path(sys.executable).with_name("uv"))
    try:
        subprocess.run([uv, "venv", "-q", "--python", python, str(folder)], check=True, capture_output=True, text=True)
        subprocess.run([uv, "pip", "install", "-q", "--python", str(interpreter), *_machine_pip_options(), *packages],
                       check=True, capture_output=True, text=True)
    except (OSError, subprocess.CalledProcessError) as exc:
        detail = getattr(exc, "stderr", "") or str(exc)
        shutil.rmtree(folder, ignore_errors=True)
        base = shutil.which(f"python{python}")
        if base is None:
            raise RuntimeError(f"the autograder's environment (Python {python}) could not be built with uv "
                               f"({detail[-2000:]}) and no python{python} is on PATH for pip: install uv or that "
                               f"Python.") from None
        subprocess.run([base, "-m", "venv", str(folder)], check=True)
        subprocess.run([str(interpreter), "-m", "pip", "install", "-q", *packages], check=True)
    (folder / "built").write_text("\n".join([python, *packages]) + "\n")
    return interpreter


# --- the self-test: planted full notebooks graded with the bundle in its environment ------------------------------

@dataclass(frozen=True)
class SelfTestRow:
    """The points a planted submission earned from a chapter's autograder (:func:`grade`, in the environment otter
    builds from it; and otter's own runner there, ``otter_points``, None where not run), and the points it should
    earn."""

    chapter: str
    kind: str
    points: float
    expected: float
    possible: float
    otter_points: float | None = None
    notes: tuple[str, ...] = ()

    @property
    def as_expected(self) -> bool:
        """Whether the autograder gave the points the key says."""
        return math.isclose(self.points, self.expected, abs_tol=1e-9)


def _otter_run(autograder_zip: Path, submission: Path, python: Path, folder: Path) -> float:
    """The points otter's own runner (``otter run``, no Docker) gives ``submission`` in the environment of
    ``python``: it copies the hidden tests beside the submission and runs them in its kernel. otter runs in a
    process group of its own, with its temporary files in ``folder`` (which the caller removes): past
    :data:`NOTEBOOK_TIMEOUT_S` (or on any error while it waits) the group is killed and ``subprocess.TimeoutExpired``
    (or the error) is raised; otter's kernel, in a session of its own, ends within a second of otter (ipykernel
    watches its parent)."""
    import os
    import signal
    import subprocess

    out = folder / "otter-out"
    out.mkdir(parents=True, exist_ok=True)
    environment = {k: v for k, v in os.environ.items() if k not in _KERNEL_ENVIRONMENT_DROPPED}
    environment["PATH"] = f"{Path(python).parent}{os.pathsep}{environment.get('PATH', '')}"
    # otter's temporary folder (and its kernel's connection file) inside ``folder``, which its caller removes: a
    # killed otter removes neither
    scratch = folder / "otter-tmp"
    scratch.mkdir(exist_ok=True)
    environment["TMPDIR"] = str(scratch)
    command = [str(python), "-m", "otter", "run", "-a", str(autograder_zip), "-o", str(out), str(submission)]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=folder,
                          env=environment, start_new_session=True) as otter:
        try:
            otter.communicate(timeout=NOTEBOOK_TIMEOUT_S)
        except BaseException:
            # otter is not reaped yet, so its group id is still its own: the kill reaches no other process
            os.killpg(otter.pid, signal.SIGKILL)
            raise
    results = json.loads((out / "results.json").read_text())
    return float(sum(test.get("score", 0) or 0 for test in results.get("tests", [])))


def self_test(course: Path, kinds: tuple[str, ...] = PLANTED_KINDS, chapters: list[str] | None = None,
              otter: bool = True, workers: int = 2, python: Path | None = None) -> list[SelfTestRow]:
    """Grade the planted full notebooks (:func:`planted_submission`, of ``kinds``) of every chapter with an
    autograder in ``course`` (``_build/course``; ``chapters`` to choose) with :func:`grade`, in the environment otter
    builds from the autograder (:func:`bundle_environment`, or ``python``), and with ``otter`` otter's own runner there
    too; ``workers`` notebooks at a time. The course's seed and checkout are those ``build_course`` recorded."""
    import tempfile
    from concurrent.futures import ThreadPoolExecutor

    import nbformat

    course = Path(course)
    recorded = json.loads((course / "course.json").read_text())
    root, seed = Path(recorded["root"]), recorded["seed"]
    bundles = [b for b in sorted((course / "autograder").glob("*.zip")) if chapters is None or b.stem in chapters]
    if not bundles:
        return []
    python = Path(python) if python is not None else bundle_environment(bundles[0])
    jobs = []
    with tempfile.TemporaryDirectory(prefix="calib-self-test-") as tmp:
        for bundle in bundles:
            with using_seed(seed):
                possible = float(sum(p.points for p in key_parts_cached(bundle.stem)))
            for kind in kinds:
                planted = planted_submission(root, bundle.stem, kind, seed)
                if planted is None:
                    continue
                folder = Path(tmp) / f"{bundle.stem}-{kind}"
                folder.mkdir()
                nbformat.write(planted[0], folder / f"{bundle.stem}.ipynb")
                jobs.append((bundle, kind, folder / f"{bundle.stem}.ipynb", planted[1], possible))

        def one(job):
            bundle, kind, submission, expected, possible = job
            graded = grade(bundle, submission, python=python)
            by_otter = _otter_run(bundle, submission, python, submission.parent) if otter else None
            return SelfTestRow(bundle.stem, kind, graded.total, expected, possible, by_otter, graded.notes)

        with ThreadPoolExecutor(max(1, workers)) as pool:
            return list(pool.map(one, jobs))


def self_test_table(rows: list[SelfTestRow]) -> str:
    """The self-test as a text table, one line per chapter and planted submission."""
    lines = [f"{'chapter':32s} {'submission':12s} {'points':>8s} {'expected':>8s} {'of':>5s} {'otter run':>9s}"]
    lines += [f"{r.chapter:32s} {r.kind:12s} {r.points:8g} {r.expected:8g} {r.possible:5g} "
              f"{'-' if r.otter_points is None else format(r.otter_points, 'g'):>9s}"
              + ("" if r.as_expected else "   <- not as the key says") for r in rows]
    return "\n".join(lines)


#: Seconds one cell of a submission may run (``grade``'s ``cell_timeout``; the hidden tests get as long): a training
#: cell of a chapter's quick profile takes a few minutes.
CELL_TIMEOUT_S = 600
#: Seconds all the cells of a submission may run together (``grade``'s ``timeout``).
NOTEBOOK_TIMEOUT_S = 3600
#: Seconds a cell interrupted at its time limit has to stop before its kernel is killed, on an idle machine; scaled
#: by the load (calib_book.timeouts) like COLLECT_TIMEOUT_S, where the student's own limits are not.
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
    grader rebuilds a node from; runs in the submission's kernel, as ``_encode_answer`` does."""
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
    """An answer the grader could not read back (a type ``_encode_answer`` does not encode): no comparison of
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
    """The answer ``_encode_answer`` encoded, rebuilt from data only; anything else raises (ValueError, or the
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
    ``_encode_answer`` in the submission's kernel."""
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


#: What of the grader's environment a submission's kernel does not inherit: a path to this checkout's packages, the
#: book's root, the grader's virtual environment.
_KERNEL_ENVIRONMENT_DROPPED = ("PYTHONPATH", "PYTHONHOME", "CALIB_BOOK_ROOT", "VIRTUAL_ENV", "CALIB_COURSE_SEED",
                               "JUPYTER_PATH")


def _kernel_manager(python: Path | None):
    """A kernel manager that starts ``python -m ipykernel_launcher`` (the environment's own Python), or this
    process's Python for None. Asynchronous, as nbclient's own: with a blocking client, nbclient's wait for an
    interrupted cell's last output (``iopub_timeout``) blocks the event loop that would end it, and never returns."""
    from jupyter_client import AsyncKernelManager
    from jupyter_client.kernelspec import KernelSpec, KernelSpecManager

    argv = [str(python or sys.executable), "-m", "ipykernel_launcher", "-f", "{connection_file}"]

    class OneKernel(KernelSpecManager):
        def get_kernel_spec(self, kernel_name, *args, **kwargs):
            return KernelSpec(argv=argv, display_name="Python 3", language="python", name="python3")

    return AsyncKernelManager(kernel_name="python3", kernel_spec_manager=OneKernel())


def _support_files(autograder_zip: Path, folder: Path) -> None:
    """Put the autograder's support files (``files/`` in the zip) into ``folder``, as otter does beside the
    submission; never its tests."""
    import zipfile

    with zipfile.ZipFile(autograder_zip) as archive:
        for name in archive.namelist():
            if not name.startswith("files/") or name.endswith("/"):
                continue
            target = folder / name.removeprefix("files/")
            if ".." in Path(name).parts:
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(archive.read(name))


def _execute_submission(submission: Path, variables: list[str], folder: Path, cell_timeout: float,
                        timeout: float, python: Path | None = None) -> tuple[dict | None, list[str]]:
    """Run the submission's code cells (but those tagged ``otter_ignore``, the hand-in export) in a kernel of its
    own, started with ``python`` (the environment's; None: this process's), in ``folder`` (the autograder's support
    files, no test), each within ``cell_timeout`` and all within ``timeout`` seconds, then encode the answers
    ``variables`` as data; returns them (None where the submission scores 0: its kernel died or would not stop) and
    the notes on what went wrong."""
    import os
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
    client = NotebookClient(nb, km=_kernel_manager(python), allow_errors=True, shutdown_kernel="immediate",
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
    environment = {k: v for k, v in os.environ.items() if k not in _KERNEL_ENVIRONMENT_DROPPED}
    if python is not None:
        environment["PATH"] = f"{Path(python).parent}{os.pathsep}{environment.get('PATH', '')}"
    # cleanup_kc: nbclient shuts down only a kernel whose manager it made itself, and this one is given its manager
    # (_kernel_manager); without it every grading left its kernel alive, a sleeping child of the grader, on every
    # path (answers collected, a timeout, an exception), and a dead kernel's connection file. The shutdown kills the
    # kernel's process group (a live kernel's: what a dead one started is out of reach, as grade() says).
    with client.setup_kernel(stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=environment, cwd=str(folder),
                             cleanup_kc=True):
        code = [(index, cell) for index, cell in enumerate(nb.cells) if cell.cell_type == "code"
                and "otter_ignore" not in cell.get("metadata", {}).get("tags", [])]
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
                grace = timeouts.scaled(INTERRUPT_GRACE_S)         # the machine's time, not the student's
                if run(nbformat.v4.new_code_cell("pass"), index, grace, interrupt=False) is not None:
                    return None, notes + [f"code cell {number} did not stop within {grace:g} s of the "
                                          f"interrupt: its kernel was killed, the submission scores 0"]
        collect = nbformat.v4.new_code_cell(_collect_source(variables, answers_file))
        nb.cells.append(collect)
        outcome = run(collect, len(nb.cells) - 1, timeouts.scaled(COLLECT_TIMEOUT_S), interrupt=False)
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
          timeout: float = NOTEBOOK_TIMEOUT_S, python: Path | None = None) -> Grade:
    """Grade the notebook ``submission`` with the hidden tests of ``autograder_zip``, here, without Docker; the hidden
    tests never run in the submission's kernel.

    The submission runs in a Jupyter kernel of its own, started with ``python`` (the environment otter builds from
    the autograder, :func:`bundle_environment`; default: this process's Python), in a temporary folder that holds
    the autograder's support files, as otter lays them beside a submission (the library, the book's helpers without
    the key, the data and stored results the chapter reads, its public tests); the hidden tests are read into memory
    beforehand and are never written where that kernel runs, and the kernel inherits no path to this checkout. Each code
    cell may run ``cell_timeout`` seconds and all of them ``timeout`` seconds: a cell past its limit is interrupted and
    its answers are missing (the rest of the notebook runs on); a cell that does not stop within
    :data:`INTERRUPT_GRACE_S` of the interrupt, and a kernel that dies (``os._exit``, ``exit()``, a crash), end the run,
    and the submission scores 0. Then a cell encodes the answer dictionaries (``ex_label = dict(...)``, the only names
    the tests read) as JSON data (``_encode_answer``), the kernel is shut down, and the hidden tests run in a fresh
    ``python -I`` process that gets the answers as data, within ``cell_timeout`` seconds: what the submission patched in
    its kernel (numpy, sympy, otter) is not there, and the answers carry no code. ``otter run`` instead copies the
    hidden tests next to the submission and runs them in its kernel, where a submission can read or patch them.

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
    python : Path, optional
        The Python of the environment to run the submission in (it must have ipykernel).

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
    if python is not None and not Path(python).is_file():
        raise ValueError(f"python={str(python)!r} is not a file: give the Python of the environment to grade in (e.g. "
                         f"bundle_environment(autograder_zip)), or None for this one.")
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
        _support_files(autograder_zip, Path(folder))
        answers, notes = _execute_submission(submission, variables, Path(folder), cell_timeout, timeout, python)
    graded = _apply_hidden_tests(tests, answers or {}, cell_timeout)
    results = graded["results"]
    return Grade({label: results[label]["score"] for label in sorted(results)},
                 {label: results[label]["possible"] for label in sorted(results)}, tuple(notes + graded["notes"]))
