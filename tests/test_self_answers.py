"""Issue 27, item 2: no exercise answers itself. Every number a chapter shows a reader (the outputs and glued values
of its executed notebook before its exercises, its prose and the source of its code cells, in print order and down
the columns of its tables) and every number in the library's API docstrings is fed to every numeric part of every
self-check; none may be ``right``. Issue 46: so is every expression the chapter shows (sympy's printed and LaTeX
outputs, the math of its prose, the closed forms of its code cells, fractions and whole numbers over 20), graded as
the grader grades a part that asks for a closed form or an expression in symbols. :func:`self_answer_counts` says
what the scan covers.

The executed notebooks are those ``make book`` leaves in ``_build/src/chapters``; set ``CALIB_BUILD`` to another
build folder (e.g. a main checkout's ``_build``) to scan that one. ``tests/test_chapters.py`` runs the scan
(:func:`scan_executed_chapters`) right after it executes and builds the book; it skips where no chapter has been
executed.
"""

import functools
import importlib
import importlib.util
import inspect
import json
import os
import pkgutil
import re
import warnings
from pathlib import Path

import numpy as np
import pytest

from calib_book import answers, exercises

ROOT = Path(__file__).resolve().parents[1]
BUILD = Path(os.environ.get("CALIB_BUILD", ROOT / "_build"))
EXECUTED = BUILD / "src" / "chapters"

#: A number as printed: 0.475000, -1.2e-05, 12, 6.1 % (read as 0.061 as well).
NUMBER = re.compile(r"(?<![\w.])[-+−]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+−]?\d+)?(?:\s?%)?")
#: Parts a chapter's own numbers still answer, to be reworked (issue 27, item 2), as (chapter, label, part); the test
#: fails on any other, and on one of these once it no longer does, so that the list only shrinks. Empty: every
#: exercise's data differ from what the book prints.
KNOWN_SELF_ANSWERS: set[tuple[str, str, str]] = set()
#: A part whose answer is a small whole number (a count, a K) is left out: such a number is in every text.
SMALL_COUNT = 20


#: A duration the book prints ("30 networks ... in 39.6 s", "fit in 0.012 s"): a clock reading, which no exercise
#: asks for and which differs from run to run (chapter 08's training time once matched ch08-ex-coarsen's 39.6).
DURATION = re.compile(r"(?<![\w.])\d+(?:\.\d+)?\s?(?:s|ms|min|seconds?|minutes?)(?!\w)")


def numbers_in(text: str) -> list[float]:
    """Every number printed in ``text``, in order, but durations; a percentage counts as printed and divided by 100."""
    out = []
    for token in NUMBER.findall(DURATION.sub(" ", text)):
        percent = token.endswith("%")
        value = float(token.rstrip("% ").replace("−", "-"))
        out.extend([value, value / 100] if percent else [value])
    return out


#: A number glued for the prose (calib_book.notebook.glue_number): not shown where it is recorded, but where the prose
#: refers to it, as ``{glue:text}`name:format``` formats it.
GLUE_RECORD = "application/papermill.record/text/plain"
GLUE_TEXT = re.compile(r"\{glue:text\}`([^`:]+)(?::([^`]*))?`")


#: Tags of a code cell whose source the reader does not see (its output may still be shown).
HIDDEN_SOURCE = ("remove-cell", "remove-input")


def chapter_material(notebook: Path) -> list[tuple[str, str]]:
    """What a reader of the chapter sees before its exercises, as ``(kind, text)`` in order: ``"prose"`` (a glued
    number as the prose formats it), ``"code"`` (a code cell's source, unless tagged ``remove-cell`` or
    ``remove-input``: ``hide-input`` shows it on a click), ``"plain"`` (printed text and ``text/plain`` outputs),
    ``"latex"``, ``"html"`` and ``"markdown"`` outputs (glued tables among them)."""
    cells = json.loads(notebook.read_text())["cells"]
    glued = {}
    for cell in cells:
        for output in cell.get("outputs", []):
            name = output.get("metadata", {}).get("scrapbook", {}).get("name")
            if name and GLUE_RECORD in output.get("data", {}):
                glued[name] = output["data"][GLUE_RECORD]

    def shown(match):
        value = glued.get(match.group(1))
        if value is None:
            return match.group(0)
        try:
            return format(json.loads(value), match.group(2) or "")
        except (ValueError, TypeError):         # not a number: shown as recorded
            return value

    out = []
    for cell in cells:
        source = "".join(cell["source"])
        if cell["cell_type"] == "markdown":
            before, heading, _ = source.partition("\n## Exercises") if not source.startswith("## Exercises") \
                else ("", "## Exercises", "")
            out.append(("prose", GLUE_TEXT.sub(shown, before)))
            if heading:
                break
            continue
        if cell["cell_type"] == "code" and not set(HIDDEN_SOURCE) & set(cell.get("metadata", {}).get("tags", [])):
            out.append(("code", source))
        for output in cell.get("outputs", []):
            if "text" in output:
                out.append(("plain", "".join(output["text"])))
            for mime, data in output.get("data", {}).items():
                kind = mime.rpartition("/")[2]
                if mime != GLUE_RECORD and kind in ("plain", "html", "latex", "markdown"):
                    out.append((kind, "".join(data) if isinstance(data, list) else str(data)))
    return out


def chapter_texts(notebook: Path) -> list[str]:
    """The texts a reader of the chapter sees before its exercises, but code: prose (a glued number as the prose
    formats it), outputs, glued tables."""
    return [text for kind, text in chapter_material(notebook) if kind != "code"]


@functools.lru_cache(maxsize=1)
def docstring_texts() -> tuple[str, ...]:
    """Every docstring of every module of calib (what the API reference renders)."""
    import calib

    texts = []
    for info in pkgutil.walk_packages(calib.__path__, "calib."):
        if info.name.endswith("__main__"):         # running it is the command line
            continue
        try:
            module = importlib.import_module(info.name)
        except ImportError:            # an optional dependency (e.g. a distributed backend) is absent
            continue
        texts.append(module.__doc__ or "")
        for _, member in inspect.getmembers(module):
            if getattr(member, "__module__", None) == info.name:
                texts.append(inspect.getdoc(member) or "")
                for _, method in inspect.getmembers(member, inspect.isfunction) if inspect.isclass(member) else []:
                    texts.append(inspect.getdoc(method) or "")
    return tuple(texts)


def _scannable_parts():
    """(label, part, expected as a float array, spec) of every numeric part whose answer is not a round number.

    A small whole number (a count, a K) or a value of two significant digits (1/2, 0.15, 0) is printed in any
    text; such parts are left out, and the exercise must make them worth asking by the reasoning they need."""
    out = []
    for label in exercises.labels():
        for part, spec in exercises.EXERCISES[label].parts.items():
            value = answers.expected_value(label, part)
            if isinstance(value, (bool, np.bool_, str)) or spec.exact:      # a decimal cannot be right
                continue
            if spec.accept is not None and spec.accept != "any-of":
                continue        # an interval claimed from one's own runs (any two small numbers around it, e.g.
                #                 "-0.02 0.0", would match by coincidence) or a construction (its property decides)
            try:
                expected = np.asarray(value, dtype=float)
            except (TypeError, ValueError):          # a symbolic expression: no printed number equals it
                continue
            if np.all(expected == np.round(expected)) and np.all(np.abs(expected) <= SMALL_COUNT):
                continue
            rounded = np.array([float(f"{v:.2g}") for v in expected.ravel()]).reshape(expected.shape)
            if np.allclose(expected, rounded, rtol=spec.rtol, atol=max(spec.atol, 1e-12)):
                continue
            out.append((label, part, expected, spec))
    return out


def table_columns(text: str) -> list[list[float]]:
    """The columns of the tables in ``text``: runs of two or more consecutive lines (an HTML table's rows are lines)
    that print the same number (two or more) of numbers, read down each column."""
    lines = re.sub(r"<[^>]*>", " ", re.sub(r"</tr>", "\n", text)).splitlines()
    rows = [numbers_in(line) for line in lines] + [[]]
    columns, run = [], []
    for row in rows:
        if run and len(row) != len(run[-1]):
            if len(run) > 1 and len(run[-1]) > 1:
                columns.extend(list(column) for column in zip(*run))
            run = []
        if len(row) > 1:
            run.append(row)
    return columns


def self_answers(texts: list[str], parts) -> list[tuple[str, str, tuple]]:
    """The parts that a run of consecutive numbers printed in one of ``texts`` answers ``right``: in the order the
    text prints them, or down a column of a table."""
    lists = [np.array(v) for t in texts for v in (numbers_in(t), *table_columns(t))]
    windows = {}
    for size in {expected.size for _, _, expected, _ in parts}:
        runs = [np.lib.stride_tricks.sliding_window_view(v, size) for v in lists if len(v) >= size]
        windows[size] = np.concatenate(runs) if runs else np.empty((0, size))
    hits = []
    for label, part, expected, spec in parts:
        candidates = windows[expected.size]
        if spec.accept is not None:            # "any-of": the grader decides among those near one valid value
            options = [expected.ravel(), *(np.asarray(v, dtype=float).ravel() for v in spec.alternatives())]
            near = np.zeros(len(candidates), bool)
            for option in options:
                near |= np.isclose(candidates, option, rtol=1e-3, atol=max(spec.atol, 1e-9)).all(axis=1)
            right = np.zeros(len(candidates), bool)
            right[near] = [answers.accepted(spec, expected, w[0] if expected.size == 1 else w)
                           for w in candidates[near]]
        else:
            right = np.isclose(candidates, expected.ravel(), rtol=spec.rtol, atol=spec.atol).all(axis=1)
        if right.any():
            hits.append((label, part, tuple(float(v) for v in candidates[right.argmax()])))
    return hits


# --- the scan of expressions, exact numbers and tables (issue 46) ---------------------------------------------------
#
# A closed form or an expression in symbols that a chapter shows is graded as a student's answer would be: through
# ``calib_book.answers.graded_form`` and ``calib_book.course_check.hidden_verdict`` (the hidden test's and ``check``'s
# rule), after a float comparison that keeps the grader for near matches. sympy's ``parse_latex`` needs antlr4, which
# the book does not install; the scan reads LaTeX through :func:`latex_to_sympy`, a subset (fractions, powers, roots,
# ``e^{x}``, ``\log``/``\ln``/``\exp``, Lambert's ``W`` and ``W_{-1}``, Greek letters, subscripts of letters and
# digits, implicit products; not sums, limits, integrals, ``\text``, evaluation bars or sets by comprehension), and uses
# ``parse_latex`` as well where antlr4 is installed.

#: Names that sympy's parser would read as functions or constants, read as the symbols the book writes (``lambda`` is a
#: Python keyword: a LaTeX ``\lambda`` becomes ``lamda``).
_SYMBOL_NAMES = ("gamma", "beta", "zeta", "eta", "epsilon", "lamda", "alpha", "delta", "theta", "tau", "mu", "nu",
                 "sigma", "rho", "omega", "phi", "psi", "xi", "K", "N", "S", "Q", "O", "C")
_GREEK = ("alpha", "beta", "gamma", "delta", "epsilon", "varepsilon", "zeta", "eta", "theta", "lambda", "mu", "nu",
          "xi", "pi", "rho", "sigma", "tau", "phi", "varphi", "psi", "omega")
#: A piece of plain text that may be an expression: sympy's printed form (``gamma*(1 - p)**2``, ``exp(-1)``, ``3/8``).
_PLAIN_EXPRESSION = re.compile(r"^[\w\s+\-*/().\[\]{},^]+$")
#: A huge power (``10**400``) that evaluating would hang on.
_HUGE_POWER = re.compile(r"(\*\*|\^)\s*[({]?\s*\d{3,}")
#: A fraction of whole numbers as printed: 3/8, \frac{3}{8}, \tfrac{3}{8}.
_FRACTION = re.compile(r"(?<![\w./])(\d+)\s*/\s*(\d+)(?![\w.]|\s*/)|\\[dt]?frac\{\s*(\d+)\s*\}\{\s*(\d+)\s*\}")
#: Top-level separators of an equation or a list in LaTeX (each side is read) and in text.
_LATEX_SPLIT = re.compile(r"=|\\approx|\\le(?:q)?\b|\\ge(?:q)?\b|<|>|\\to\b|\\quad|\\qquad|\\iff|\\Rightarrow|"
                          r"\\implies|\\sim|\\ne(?:q)?\b|\\in\b|;|,")
_TEXT_SPLIT = re.compile(r"==|=|<=|>=|<|>|;|:|,\s")
_MATH = re.compile(r"\$\$(.+?)\$\$|\$([^$\n]+?)\$", re.S)


@functools.lru_cache(maxsize=None)
def _parse_plain(text: str):
    """``text`` read as sympy's printed form (``e`` read as Euler's number), or None; a piece with no operation, call
    or power (a word, a number) is not read (a number is the number scan's)."""
    import sympy
    from sympy.parsing.sympy_parser import (convert_xor, implicit_application, implicit_multiplication, parse_expr,
                                            standard_transformations)

    text = text.strip()
    if (not text or len(text) > 400 or not _PLAIN_EXPRESSION.match(text) or _HUGE_POWER.search(text)
            or not re.search(r"[-+*/^(]", text)):
        return None
    local = {name: sympy.Symbol("lambda" if name == "lamda" else name) for name in _SYMBOL_NAMES}
    local.update(e=sympy.E, Wm1=lambda x: sympy.LambertW(x, -1))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")         # "'set' object is not callable": a set printed before a bracket
            return parse_expr(text, local_dict=local, transformations=standard_transformations
                              + (implicit_multiplication, implicit_application, convert_xor))
    except Exception:                   # noqa: BLE001 - not an expression: prose, a name, a malformed piece
        return None


def _braced(text: str, start: int) -> tuple[str, int]:
    """The group ``{...}`` that opens at ``text[start]`` (or the single character there) and the index after it."""
    while start < len(text) and text[start] == " ":
        start += 1
    if start >= len(text):
        raise ValueError("no group")
    if text[start] != "{":
        word = re.match(r"[A-Za-z]+", text[start:])          # a Greek letter, which the reader has spelt out
        if word and word.group(0) in _GREEK + ("lamda",):
            return word.group(0), start + len(word.group(0))
        return text[start], start + 1
    depth = 0
    for i in range(start, len(text)):
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        if depth == 0:
            return text[start + 1:i], i + 1
    raise ValueError("an unclosed brace")


def _latex_to_plain(tex: str) -> str:
    r"""The subset of LaTeX the scan reads, as sympy's plain syntax; ValueError outside it (``\text``, ``\sum``,
    ``\lim``, ``\mathbb``, an evaluation bar ...)."""
    for old, new in ((r"\displaystyle", " "), (r"\left", " "), (r"\right", " "), (r"\bigl", " "), (r"\bigr", " "),
                     (r"\,", " "), (r"\;", " "), (r"\!", " "), (r"\ ", " "), (r"\cdot", "*"), (r"\times", "*"),
                     (r"\ln", " log"), (r"\log", " log"), (r"\exp", " exp"), (r"\mathrm{e}", "e")):
        tex = tex.replace(old, new)
    # Lambert's W: the lower branch W_{-1}, the principal one W or W_0
    tex = re.sub(r"(?<![A-Za-z])W_\{?-1\}?\s*\(", " Wm1(", tex)
    tex = re.sub(r"(?<![A-Za-z])W(?:_\{?0\}?)?\s*\(", " LambertW(", tex)
    for letter in _GREEK:
        name = {"varepsilon": "epsilon", "varphi": "phi", "lambda": "lamda"}.get(letter, letter)
        tex = re.sub(rf"\\{letter}(?![A-Za-z])", f" {name} ", tex)
    out, i = [], 0
    while i < len(tex):
        ch = tex[i]
        if tex.startswith(("\\frac", "\\tfrac", "\\dfrac"), i):
            i = tex.index("frac", i) + 4
            numerator, i = _braced(tex, i)
            denominator, i = _braced(tex, i)
            out.append(f"(({_latex_to_plain(numerator)})/({_latex_to_plain(denominator)}))")
        elif tex.startswith("\\sqrt", i):
            radicand, i = _braced(tex, i + 5)
            out.append(f" sqrt({_latex_to_plain(radicand)})")
        elif ch == "^":
            exponent, i = _braced(tex, i + 1)
            if out and out[-1] == "e" and (len(out) < 2 or not (out[-2].isalnum() or out[-2] == "_")):
                out[-1] = f" exp({_latex_to_plain(exponent)})"
            else:
                out.append(f"**({_latex_to_plain(exponent)})")
        elif ch == "_":
            index, i = _braced(tex, i + 1)
            if not re.fullmatch(r"[A-Za-z0-9]+", index.strip()):
                raise ValueError("a subscript the scan does not read")
            out.append("_" + index.strip())
        elif ch == "\\":
            raise ValueError("a command the scan does not read")
        else:
            out.append({"{": "(", "}": ")"}.get(ch, ch))
            i += 1
    return "".join(out)


def latex_to_sympy(tex: str):
    """A LaTeX expression as a sympy expression, or None where it is outside the subset the scan reads (and, where
    antlr4 is installed, outside what ``sympy.parsing.latex.parse_latex`` reads)."""
    try:
        return _parse_plain(_latex_to_plain(tex))
    except (ValueError, RecursionError):
        pass
    if _has_antlr():
        from sympy.parsing.latex import parse_latex

        try:
            return parse_latex(tex)
        except Exception:               # noqa: BLE001 - LaTeX that parse_latex does not read either
            return None
    return None


@functools.lru_cache(maxsize=1)
def _has_antlr() -> bool:
    return importlib.util.find_spec("antlr4") is not None


def _top_level_split(text: str, separator: re.Pattern) -> list[str]:
    """``text`` cut at the matches of ``separator`` outside brackets and braces."""
    pieces, depth, start = [], 0, 0
    i = 0
    while i < len(text):
        if text[i] in "([{":
            depth += 1
        elif text[i] in ")]}":
            depth -= 1
        elif depth == 0:
            match = separator.match(text, i)
            if match and match.end() > i:
                pieces.append(text[start:i])
                start = i = match.end()
                continue
        i += 1
    pieces.append(text[start:])
    return pieces


def _flatten(value) -> list:
    """The expressions in what a parse returned: the sides of an equation, the members of a list, tuple or set."""
    import sympy

    if isinstance(value, sympy.Rel):
        return _flatten(value.lhs) + _flatten(value.rhs)
    if isinstance(value, (list, tuple, set, frozenset, sympy.FiniteSet, sympy.Tuple)):
        return [e for v in value for e in _flatten(v)]
    return [value] if isinstance(value, sympy.Expr) else []


def _latex_expressions(tex: str) -> list:
    tex = tex.strip().strip("$").replace(r"\displaystyle", " ")
    tex = re.sub(r"\\left\\\{|\\right\\\}|\\\{|\\\}|\\left\[|\\right\]", " ", tex)      # a set's or a list's braces
    out = []
    for piece in {tex, *_top_level_split(tex, _LATEX_SPLIT)}:
        out.extend(_flatten(latex_to_sympy(piece)) if piece.strip() else [])
    return out


def _plain_expressions(text: str) -> list:
    out = []
    for line in text.splitlines():
        inner = re.fullmatch(r"\s*Eq\((.*)\)\s*", line)
        for piece in {line, *_top_level_split(inner.group(1) if inner else line, _TEXT_SPLIT)}:
            piece = piece.strip().rstrip(".")
            if re.search(r"[A-Za-z/]", piece):
                out.extend(_flatten(_parse_plain(piece)))
    return out


#: Calls in a code cell that the scan reads as sympy functions (``np.exp(-1)``, ``sp.LambertW(z, -1)``), by the
#: name after the last dot.
_CODE_FUNCTIONS = {"exp": "exp", "log": "log", "sqrt": "sqrt", "LambertW": "LambertW", "lambertw": "LambertW",
                   "Rational": "Rational", "Integer": "Integer", "log1p": None, "expm1": None}


def _code_to_sympy(node):
    """A Python expression of a code cell as the closed form it shows (``np.exp(-1)`` is e^{-1}, ``1/3`` is one
    third, ``sp.Symbol("p")`` and a name ``p`` are the symbol p); ValueError for anything else."""
    import ast

    import sympy

    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return sympy.Integer(node.value) if isinstance(node.value, int) else sympy.Float(node.value)
    if isinstance(node, ast.Name):
        return sympy.E if node.id in ("e", "E") else sympy.Symbol(node.id)
    if isinstance(node, ast.Attribute):
        if node.attr in ("e", "E"):
            return sympy.E
        if node.attr == "pi":
            return sympy.pi
        return sympy.Symbol(node.attr)          # S.gamma, symbolic.p: the symbol of that name
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        value = _code_to_sympy(node.operand)
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.BinOp):
        left, right = _code_to_sympy(node.left), _code_to_sympy(node.right)
        if isinstance(node.op, ast.Pow) and (right.is_number and abs(right) > 100):
            raise ValueError("a huge power")
        operations = {ast.Add: sympy.Add, ast.Sub: lambda a, b: a - b, ast.Mult: sympy.Mul,
                      ast.Div: lambda a, b: a / b, ast.Pow: sympy.Pow}
        if type(node.op) not in operations:
            raise ValueError("an operation the scan does not read")
        return operations[type(node.op)](left, right)
    if isinstance(node, ast.Call) and not node.keywords:
        func = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        if func in ("Symbol", "symbols") and node.args and isinstance(node.args[0], ast.Constant):
            return sympy.Symbol(str(node.args[0].value))
        name = _CODE_FUNCTIONS.get(func)
        if name is None:
            raise ValueError("a call the scan does not read")
        return getattr(sympy, name)(*(_code_to_sympy(a) for a in node.args))
    raise ValueError("a form the scan does not read")


def _code_expressions(source: str) -> list:
    """The closed forms a code cell shows: each expression that is not an operand of a larger one (an assignment's
    value, an argument, an element of a list), where :func:`_code_to_sympy` reads it."""
    import ast

    try:
        tree = ast.parse("\n".join(line for line in source.splitlines() if not line.lstrip().startswith(("%", "!"))))
    except SyntaxError:
        return []
    operands = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp):
            operands.update((id(node.left), id(node.right)))
        elif isinstance(node, ast.UnaryOp):
            operands.add(id(node.operand))
        elif isinstance(node, ast.Call):
            operands.update(id(a) for a in node.args if _CODE_FUNCTIONS.get(
                node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.expr) and id(node) not in operands and not isinstance(node, (ast.Constant, ast.Name)):
            try:
                out.append(_code_to_sympy(node))
            except (ValueError, TypeError, ZeroDivisionError, RecursionError):
                continue
    return out


def expressions_in(material: list[tuple[str, str]]) -> list:
    """Every expression the scan reads in a chapter's material (:func:`chapter_material`), once each: sympy's
    printed and LaTeX outputs (each side of an equation, each member of a list or set), the math of the prose and
    of Markdown and HTML outputs (``$...$``), the closed forms of code cells (:func:`_code_expressions`), fractions
    of whole numbers (``3/8``, ``\\frac{3}{8}``) and whole numbers over :data:`SMALL_COUNT` anywhere."""
    import sympy

    found = {}
    for kind, text in material:
        if kind == "latex":
            expressions = _latex_expressions(text)
        elif kind == "plain":
            expressions = _plain_expressions(text)
        elif kind == "code":
            expressions = _code_expressions(text)
        else:
            expressions = []
        if kind in ("prose", "markdown", "html", "docstring"):
            for match in _MATH.finditer(text if kind != "docstring" else re.sub(r":math:`([^`]+)`", r"$\1$", text)):
                expressions.extend(_latex_expressions(match.group(1) or match.group(2)))
        for match in _FRACTION.finditer(text):
            a, b = (match.group(1), match.group(2)) if match.group(1) else (match.group(3), match.group(4))
            if int(b):
                expressions.append(sympy.Rational(int(a), int(b)))
        for token in re.findall(r"(?<![\w.])\d+(?![\w.])", text):
            if SMALL_COUNT < int(token) < 10 ** 30:
                expressions.append(sympy.Integer(int(token)))
        for expression in expressions:
            found.setdefault(expression, None)
    return list(found)


def _expression_parts():
    """(label, part, expected, spec, kind, graded form) of every part that asks for a closed form (``kind``
    ``"exact"``: a sympy number, graded exactly) or an expression in symbols (``"symbolic"``)."""
    import sympy

    out = []
    for label in exercises.labels():
        for part, spec in exercises.EXERCISES[label].parts.items():
            value = answers.expected_value(label, part)
            if not isinstance(value, sympy.Basic) or spec.accept is not None:
                continue
            if value.is_number and not spec.exact:        # a number, scanned as one (_scannable_parts)
                continue
            out.append(expression_part(label, part, value, spec))
    return out


def expression_part(label: str, part: str, value, spec) -> tuple:
    """One part of :func:`_expression_parts`: its kind and the form that grades it."""
    kind = "exact" if value.is_number else "symbolic"
    return label, part, value, spec, kind, answers.graded_form(spec, value, f"{label} {part}")


def _value_at(expression, point: dict) -> complex | None:
    """``expression`` at ``point`` (symbol name -> value), in floats; None where it has no finite value there."""
    try:
        value = complex(expression.subs({s: point[s.name] for s in expression.free_symbols}).evalf(15))
    except (TypeError, ValueError, KeyError, AttributeError, ZeroDivisionError):
        return None
    return value if np.isfinite(value) else None


def expression_self_answers(expressions: list, parts) -> list[tuple[str, str, str]]:
    """The parts (of :func:`_expression_parts`) that one of ``expressions`` answers ``right`` under the grader's rule
    (:func:`calib_book.course_check.hidden_verdict` of the part's graded form), with the expression; a float
    comparison at the part's first point first keeps the grader for near matches."""
    import sympy

    from calib_book import course_check

    hits = []
    for label, part, value, spec, kind, form in parts:
        point = {} if kind == "exact" else {n: v[0] for n, v in form["symbols"].items()}
        target = _value_at(value, point)
        for expression in expressions:
            names = {s.name for s in expression.free_symbols}
            if kind == "exact" and (names or expression.atoms(sympy.Float)):
                continue                        # a decimal is never a closed form; a symbol, not a number
            if kind == "symbolic" and (not names or not names <= set(point)):
                continue
            candidate = _value_at(expression, point)
            if candidate is None or target is None or abs(candidate - target) > 1e-6 * max(abs(target), 1e-12):
                continue
            if course_check.hidden_verdict(expression, form):
                hits.append((label, part, str(expression)))
                break
    return hits


def test_numbers_are_read_as_printed():
    assert numbers_in("ECE 0.475000 0.525000, 6.1 % and -1.2e-05; p_0 = 1/2") == [0.475, 0.525, 6.1, 0.061,
                                                                                 -1.2e-05, 1.0, 2.0]
    assert numbers_in("seed0 x1 mlp256") == []                   # digits inside names are not numbers
    assert numbers_in("30 networks in 39.6 s on cpu; fit 0.012 s, 12 ms, 3 min, 1.5 s/epoch") == [30.0]


def test_the_scan_finds_a_planted_self_answer():
    parts = _scannable_parts()
    label, part, expected, spec = next(p for p in parts if p[2].size == 1 and p[3].accept is None)
    assert self_answers([f"a table row: 1.5 {float(expected):.12g} 7"], [(label, part, expected, spec)])
    assert not self_answers([f"a table row: 1.5 {float(expected) * 1.1:.12g} 7"], [(label, part, expected, spec)])


def self_answer_counts(executed: Path | None = None) -> dict:
    """The scan of the executed chapters in ``executed`` (default ``EXECUTED``) and of the API docstrings: the parts
    it scans by kind (``number`` and ``array``: numbers printed in order or down a table's column, in the prose, the
    outputs and the code cells' source; ``exact``: closed forms; ``symbolic``: expressions in symbols), the numbers
    and expressions it read, the seconds it took, and ``hits``, ``{(where, label, part): what answers it}``."""
    import time

    start = time.perf_counter()
    executed = EXECUTED if executed is None else executed
    numeric, symbolic = _scannable_parts(), _expression_parts()
    sources = [(notebook.stem, chapter_material(notebook)) for notebook in sorted(executed.glob("*.ipynb"))]
    sources.append(("API docstrings", [("docstring", text) for text in docstring_texts()]))
    hits, read_numbers, read_expressions = {}, 0, 0
    for where, material in sources:
        texts = [text for _, text in material]
        read_numbers += sum(len(numbers_in(text)) for text in texts)
        for label, part, values in self_answers(texts, numeric):
            hits[(where, label, part)] = values
        expressions = expressions_in(material)
        read_expressions += len(expressions)
        for label, part, expression in expression_self_answers(expressions, symbolic):
            hits[(where, label, part)] = expression
    parts = {"number": sum(p[2].size == 1 for p in numeric), "array": sum(p[2].size > 1 for p in numeric),
             "exact": sum(p[4] == "exact" for p in symbolic), "symbolic": sum(p[4] == "symbolic" for p in symbolic)}
    counts = {"chapters": len(sources) - 1, "parts": parts, "numbers read": read_numbers,
              "expressions read": read_expressions, "hits": hits, "seconds": round(time.perf_counter() - start, 1)}
    print(f"self-answer scan of {counts['chapters']} chapters and the API docstrings: parts scanned {parts}; "
          f"{read_numbers} numbers and {read_expressions} expressions read; {len(hits)} hits; "
          f"{counts['seconds']} s" + "".join(f"\n  {w}: {label} {part} <- {v}" for (w, label, part), v in hits.items()))
    return counts


def scan_executed_chapters(executed: Path | None = None) -> None:
    """The scan: fails naming each part a number or an expression of the executed chapters in ``executed`` (default
    ``EXECUTED``) or of the API docstrings answers, and each entry of KNOWN_SELF_ANSWERS that none answers any more;
    skips where no chapter has been executed (decided when it runs)."""
    executed = EXECUTED if executed is None else executed
    if not any(executed.glob("*.ipynb")):
        pytest.skip(f"no executed chapters in {executed} (run make book, or set CALIB_BUILD to a build folder)")
    found = self_answer_counts(executed)["hits"]
    new = {key: values for key, values in found.items() if key not in KNOWN_SELF_ANSWERS}
    assert not new, "numbers or expressions the book prints answer these exercises: " + "; ".join(
        f"{where}: {label} {part} <- {values}" for (where, label, part), values in new.items())
    present = {k for k in KNOWN_SELF_ANSWERS if (executed / f"{k[0]}.ipynb").is_file()}
    fixed = present - set(found)
    assert not fixed, f"no longer self-answered, remove from KNOWN_SELF_ANSWERS: {sorted(fixed)}"


def _symbolic_part(kind: str):
    """The first part of the key that asks for an expression in symbols (``kind="symbolic"``) or a closed form."""
    return next(p for p in _expression_parts() if p[4] == kind)


def test_the_latex_the_scan_reads():
    import sympy

    gamma = sympy.Symbol("gamma")
    shown = r"\frac{\gamma \left(-1 + 2 \log{\left(2 \right)}\right)}{\gamma \log{\left(2 \right)} + 1}"
    assert sympy.simplify(latex_to_sympy(shown) - gamma * (2 * sympy.log(2) - 1) / (gamma * sympy.log(2) + 1)) == 0
    assert latex_to_sympy("e^{-2}") == sympy.exp(-2) and latex_to_sympy(r"\tfrac{3}{8}") == sympy.Rational(3, 8)
    assert latex_to_sympy(r"\sqrt{p_{0}} (1 - p_0)^\gamma") == sympy.sqrt(sympy.Symbol("p_0")) * (
        1 - sympy.Symbol("p_0")) ** gamma
    assert latex_to_sympy(r"W_{-1}\left(-e^{-1}\right)") == sympy.LambertW(-sympy.exp(-1), -1)
    assert latex_to_sympy(r"1/W(1/e)") == 1 / sympy.LambertW(sympy.exp(-1))
    assert latex_to_sympy(r"\sum_{y=1}^{K} \eta_y") is None            # outside the subset: not read
    # an equation's sides and a set's members, in LaTeX and as sympy prints them
    assert sympy.exp(-1) in _latex_expressions(r"$\displaystyle \{p : g(p, 1) = 1\} = \left\{e^{-1}\right\}$")
    assert gamma + 1 in _plain_expressions(r"Eq(\lim_{s \to +\infty} f_\gamma(s), gamma + 1)")
    assert sympy.exp(-1) in _code_expressions("p0 = np.array([0.05, np.exp(-1)])\nprint(f(p0))")


def test_the_scan_finds_a_planted_closed_form_and_not_a_wrong_one():
    """Issue 46: chapter 07 displayed f'(0) = gamma (2 log 2 - 1) / (gamma log 2 + 1), ch07-ex-beta0's answer, as a
    LaTeX output, and the scan of numbers could not see it. The scan grades what the chapter shows as the grader
    grades a student's answer."""
    import sympy

    label, part, value, spec, kind, form = symbolic = _symbolic_part("symbolic")
    shown = [("latex", f"$\\displaystyle c = {sympy.latex(value)}$")]
    assert [hit[:2] for hit in expression_self_answers(expressions_in(shown), [symbolic])] == [(label, part)]
    assert expression_self_answers(expressions_in([("plain", str(value))]), [symbolic])
    wrong = [("latex", f"$\\displaystyle {sympy.latex(value * 2)}$"), ("plain", str(value + 1))]
    assert not expression_self_answers(expressions_in(wrong), [symbolic])
    exact = _symbolic_part("exact")                     # a closed form, shown in the prose's math or in code
    assert expression_self_answers(expressions_in([("prose", f"so ${sympy.latex(exact[2])}$.")]), [exact])
    assert expression_self_answers(expressions_in([("code", f"x = sp.{exact[2]!s}")]), [exact])
    assert not expression_self_answers(expressions_in([("plain", f"{float(sympy.N(exact[2])):.15f}")]), [exact])


def test_the_scan_finds_a_planted_fraction():
    import sympy

    spec = answers.Expected(lambda: sympy.Rational(3, 8), exact=True)
    planted = [expression_part("ex-planted", "answer", sympy.Rational(3, 8), spec)]
    for text in ("a share of 3/8 of the samples", r"the mass $\frac{3}{8}$", "6/16"):
        assert expression_self_answers(expressions_in([("prose", text)]), planted), text
    assert not expression_self_answers(expressions_in([("prose", "3/7 and 0.375, a date 3/8/2024")]), planted)
    spec = answers.Expected(lambda: sympy.Integer(1024), exact=True)
    planted = [expression_part("ex-planted", "count", sympy.Integer(1024), spec)]
    assert expression_self_answers(expressions_in([("plain", "1024 samples")]), planted)


def test_the_scan_reads_a_table_down_its_columns_and_code_literals():
    """Issue 46: chapter 03's table of gamma* held ex-design-schedule's three values in three consecutive rows of one
    column, which the scan of numbers in print order did not see."""
    label, part, expected, spec = next(p for p in _scannable_parts() if p[2].ndim == 1 and p[2].size == 3)
    rows = "\n".join(f"| {i} | {v:.12g} | {2 * v:.12g} |" for i, v in enumerate(expected))
    assert table_columns(f"| a | b | c |\n|---|---|---|\n{rows}")[1] == [float(f"{v:.12g}") for v in expected]
    assert self_answers([f"| a | b | c |\n|---|---|---|\n{rows}"], [(label, part, expected, spec)])
    html = "".join(f"<tr><td>{i}</td><td>{v:.12g}</td></tr>" for i, v in enumerate(expected))
    assert self_answers([f"<table>{html}</table>"], [(label, part, expected, spec)])
    literal = f"x = np.array([{', '.join(f'{v:.12g}' for v in expected)}])"
    assert self_answers([literal], [(label, part, expected, spec)])
    assert not self_answers([literal.replace(f"{expected[1]:.12g}", f"{expected[1] * 1.01:.12g}")],
                            [(label, part, expected, spec)])


def test_the_scan_reads_every_kind_of_part_and_counts_them(tmp_path):
    """A notebook with a closed form in a LaTeX output and a number in a code cell's source: the scan names both, and
    counts the parts it scans by kind."""
    import sympy

    label, part, value, *_ = _symbolic_part("symbolic")
    number_label, number_part, expected, _ = next(p for p in _scannable_parts() if p[2].size == 1)
    cells = [{"cell_type": "code", "source": [f"x = {float(expected):.12g}"], "metadata": {}, "outputs": [
        {"output_type": "display_data", "metadata": {},
         "data": {"text/latex": f"$\\displaystyle {sympy.latex(value)}$", "text/plain": "Eq(...)"}}]},
        {"cell_type": "markdown", "source": ["## Exercises"], "metadata": {}},
        {"cell_type": "code", "source": [f"y = {value!s}"], "metadata": {}, "outputs": []}]
    (tmp_path / "99-planted.ipynb").write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4,
                                                          "nbformat_minor": 5}))
    counts = self_answer_counts(tmp_path)
    assert set(counts["hits"]) == {("99-planted", label, part), ("99-planted", number_label, number_part)}
    assert counts["parts"]["number"] >= 50 and counts["parts"]["array"] >= 10
    assert counts["parts"]["exact"] >= 3 and counts["parts"]["symbolic"] >= 4


def test_the_scan_of_a_built_book_runs_after_the_build_in_make_test():
    """The scan of the executed chapters is the test ``test_chapters.py`` runs right after it executes and builds the
    book (the same file, so the same worker, in order, under pytest-xdist's ``--dist loadfile``); before, a skip
    decided at collection skipped it in every ``make test`` from a clean clone."""
    source = (Path(__file__).parent / "test_chapters.py").read_text()
    build = source.index("def test_every_chapter_runs_and_the_book_builds")
    assert source.index("scan_executed_chapters()") > build


def test_the_scan_skips_where_no_chapter_was_executed(tmp_path):
    with pytest.raises(pytest.skip.Exception, match="no executed chapters"):
        scan_executed_chapters(tmp_path)


def test_the_scan_finds_a_self_answer_planted_in_an_executed_notebook(tmp_path):
    parts = _scannable_parts()
    label, part, expected, spec = next(p for p in parts if p[2].size == 1 and p[3].accept is None)
    cell = {"cell_type": "code", "source": ["print(x)"], "metadata": {},
            "outputs": [{"output_type": "stream", "name": "stdout", "text": [f"x = {float(expected):.12g}\n"]}]}
    (tmp_path / "99-planted.ipynb").write_text(json.dumps({"cells": [cell], "metadata": {}, "nbformat": 4,
                                                          "nbformat_minor": 5}))
    with pytest.raises(AssertionError, match=f"99-planted: {label} {part}"):
        scan_executed_chapters(tmp_path)


def test_a_glued_number_is_read_as_the_prose_shows_it(tmp_path):
    """A number glued for the prose is recorded at full precision but shown as the prose formats it: a clock reading
    recorded as 0.944584941009204 and shown as 0.94 (chapter 09's time exponent) once matched, by chance, an answer
    of 0.9446 to within its tolerance. The scan reads what the reader sees."""
    record = {"output_type": "display_data", "data": {GLUE_RECORD: "0.944584941009204"},
              "metadata": {"scrapbook": {"mime_prefix": "application/papermill.record/", "name": "slope"}}}
    cells = [{"cell_type": "code", "source": ["gl('slope', s)"], "metadata": {}, "outputs": [record]},
             {"cell_type": "markdown", "source": ["The slope is {glue:text}`slope:.2f`, in full {glue:text}`slope`; "
                                                 "{glue:text}`missing:.1f` is left as written."], "metadata": {}}]
    path = tmp_path / "99-glued.ipynb"
    path.write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    texts = chapter_texts(path)
    assert texts == ["The slope is 0.94, in full 0.944584941009204; {glue:text}`missing:.1f` is left as written."]
