"""The claims ledger: every checkable statement a chapter makes, with the verdict a referee would sign.

A chapter records a claim with :func:`claim`. The *verdict* judges the paper's statement as printed, read with
its hedges ("about", "≈", "may") and the conditions the paper states elsewhere (ARCHITECTURE.md, "The claim record"):

================  ====================================================================  ===================
verdict           meaning                                                               required field
================  ====================================================================  ===================
holds             true as printed (a ``remark`` may add precision)
imprecise         true in substance; a number rounded beyond what its context implies,  ``correction``
                  or a needed condition only implicit
typo              an evident slip (index, sign, caption, label) whose intended          ``correction``
                  statement holds
false             false as printed and in substance                                     ``correction``
not-reproduced    an empirical statement our runs do not show, at the stated scale,     ``scale``,
                  with the paper's premise holding in our runs                          ``premise``
inconclusive      our runs cannot separate the effect from noise (``calib.stats``)      ``scale``, ``premise``
untested          needs compute or data not available here, or the paper's premise      ``scale`` + command,
                  does not hold in our runs (its numbers in ``premise``)                ``premise``
================  ====================================================================  ===================

An empirical claim (one with ``scale``) states its *premise*: the condition under which the paper's statement
applies, with the numbers measured in our runs ("cross-entropy is over-confident: its fitted temperature is at
least 1.5, measured 2.51 [2.3, 2.7]"), and ``premise_holds``, computed in the chapter. Every field writes its math
as MyST math, ``$...$`` (:func:`ascii_math` finds what does not). A verdict on a training outcome means something
only where the premise holds: when it fails, the verdict is *untested* (never *not-reproduced*), and
*not-reproduced* needs the premise to hold. ``premise_holds=None`` is left to an *untested* claim whose runs are
not made here, so that nothing is measured.

``about`` says whose statement is judged: ``"paper"`` (the paper's text), ``"code"`` (the authors' released
code, never an erratum of the paper) or ``"book"`` (the book's own finding that extends a paper). A verdict
other than *holds* on the paper's text carries ``quote``, the paper's exact words.

``passed`` is computed in the chapter and says whether the computation confirms the verdict: for *holds* the
check of the statement; for *false* the counterexample or the value off beyond rounding; for *imprecise* and
*typo* the check of the corrected statement; for *not-reproduced* and *inconclusive* that
:func:`calib.stats.decide` gave that verdict. An *untested* claim computes nothing and takes ``passed=None``.

A claim whose ``passed`` is False raises :class:`ClaimError`, so a chapter run fails as soon as the book
stops being true; with ``$CALIB_STRICT=0`` (``calib book run --no-strict``, for reruns at other parameters) it
is recorded as *not confirmed* and the run goes on. Each record is appended as one JSON line to the ledger
file: ``$CALIB_LEDGER`` when the book runner sets it, else ``_build/claims.jsonl`` under the repository root
found from the working directory (:func:`find_repo_root`; :func:`repo_root`, the one implementation the book
runner uses too, adds a fallback and raises when there is no book), else nowhere (the record is still returned
and kept in :data:`RECORDS`). The ledger is rewritten only through :func:`write_atomic`, each writer with a
temporary file of its own.
"""

from __future__ import annotations

import html
import json
import os
import re
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

#: The graded vocabulary, in the order the pages list it.
VERDICTS = ("holds", "imprecise", "typo", "false", "not-reproduced", "inconclusive", "untested")
#: Verdicts that say the printed statement needs a correction.
CORRECTED = ("imprecise", "typo", "false")
#: Verdicts about an empirical statement that our runs do not confirm.
EMPIRICAL = ("not-reproduced", "inconclusive", "untested")
ABOUT = ("paper", "code", "book")
#: Keys of ``scale``, what our runs (or the runs that would test an untested claim) are made of.
SCALE_KEYS = ("data", "model", "epochs", "seeds", "n")

#: Greek letters spelled out in ASCII, which a claim field writes as math (``$\\gamma$``, not "gamma").
GREEK_NAMES = ("alpha", "beta", "gamma", "delta", "epsilon", "eps", "zeta", "eta", "theta", "kappa", "lambda", "mu",
               "nu", "xi", "pi", "rho", "sigma", "tau", "phi", "chi", "psi", "omega", "Gamma", "Delta", "Theta",
               "Lambda", "Sigma", "Phi", "Psi", "Omega")
#: ASCII stand-ins for math in a claim field's text, outside its ``$...$`` and its code spans (issue 47, item 3): a
#: spelled-out Greek letter ("gamma = 2", not a name such as "gamma-dependent" or a claim's id "fig2-gamma"), a
#: comparison or arrow (``<=``, ``>=``, ``!=``, ``->``, ``=>``), a subscripted name (``p_y``, ``T_CE``,
#: ``ECE_{lb}``), a power (``c^2``, ``e^-s``, ``K^(1/rho)``) and ``sqrt(``.
#:
#: :meta hide-value:
ASCII_MATH = re.compile(r"<=|>=|!=|->|=>|\bsqrt\(|(?<!-)\b(?:" + "|".join(GREEK_NAMES) + r")\b(?!-)"
                        r"|\b[A-Za-z]{1,4}_(?:\{|[A-Za-z0-9]{1,5}(?:\b|_))|[\w)\]]\^[\w({-]")
#: The claim fields a reader sees as prose (the quote is the paper's own words, as its extraction writes them).
PROSE_FIELDS = ("statement", "evidence", "premise", "correction", "remark")


#: A code span of a claim field (its text between two backticks).
_CODE_SPAN = re.compile(r"(`[^`]+`)")
#: A number in e-notation as Python prints it (``1.1e-16``, ``2e+03``), not part of a name or a TeX command.
_E_NOTATION = re.compile(r"(?<![\w\\.])(\d+(?:\.\d+)?)e([-+]?)0*(\d+)\b")


def _times_ten(match: re.Match) -> str:
    mantissa, sign, exponent = match.group(1), match.group(2).replace("+", ""), match.group(3)
    return mantissa if exponent == "0" else f"{mantissa} \\times 10^{{{sign}{exponent}}}"


def text_runs(text: str) -> list[tuple[str, str]]:
    """A claim field's ``text`` as runs ``(kind, text)`` in order, kind ``"text"``, ``"math"`` or ``"code"``: its
    ```...``` code spans first (a dollar inside one is code), then in the rest its ``$...$`` formulas, when the
    dollars outside code pair up; an unpaired dollar leaves all of it outside code as text. A formula's numbers in
    e-notation (``1.1e-16``, which TeX would set as a product with an italic e) are written as powers of ten
    (``1.1 \\times 10^{-16}``); empty formulas are dropped. The one reading of a field's math and code that the
    chapters' blocks, the ledger's pages, the PDF and :func:`ascii_math` share."""
    pieces = _CODE_SPAN.split(text)
    paired = sum(piece.count("$") for piece in pieces[::2]) % 2 == 0
    runs: list[tuple[str, str]] = []
    in_math = False
    for index, piece in enumerate(pieces):
        if index % 2 == 1:                              # a code span (inside a formula it is the formula's text)
            runs.append(("math" if in_math else "code", piece if in_math else piece[1:-1]))
            continue
        parts = piece.split("$") if paired else [piece]
        for number, part in enumerate(parts):
            if number:
                in_math = not in_math
            runs.append(("math" if in_math else "text", part))
    merged: list[tuple[str, str]] = []
    for kind, part in runs:                             # a formula split by a code span is one formula again
        if merged and kind == merged[-1][0] == "math":
            merged[-1] = ("math", merged[-1][1] + part)
        else:
            merged.append((kind, part))
    return [(kind, _E_NOTATION.sub(_times_ten, part) if kind == "math" else part) for kind, part in merged
            if part.strip() or kind == "text" and part]


def ascii_math(text: str) -> list[str]:
    """The ASCII stand-ins for math (:data:`ASCII_MATH`) in a claim field's ``text``, outside its ``$...$`` math and
    its ```code``` spans (:func:`text_runs`), in order; ``[]`` when the text writes its math as math."""
    prose = " ".join(part if kind == "text" else " " for kind, part in text_runs(text))
    return [m.group() for m in ASCII_MATH.finditer(prose)]


#: Claims recorded in this process, in order.
RECORDS: list["Claim"] = []


class ClaimError(AssertionError):
    """A claim's computed outcome contradicts the verdict the book asserts."""


@dataclass(frozen=True)
class Claim:
    id: str
    paper: str
    where: str
    statement: str
    verdict: str
    passed: bool | None
    evidence: str
    chapter: str
    correction: str = ""
    about: str = "paper"
    quote: str = ""
    remark: str = ""
    scale: dict = field(default_factory=dict)
    premise: str = ""
    premise_holds: bool | None = None

    @property
    def anchor(self) -> str:
        """The HTML id of the claim's line in its chapter, ``claim-<paper>-<name>``."""
        return claim_anchor(self.id)

    @property
    def confirmed(self) -> bool:
        """True when the computation confirmed the verdict (an untested claim is never confirmed)."""
        return self.passed is True

    def _ipython_display_(self) -> None:
        """A cell that ends with a claim shows nothing more: claim() has already printed its line."""

    def __repr__(self) -> str:
        return f"Claim({self.id!r}, {self.verdict!r})"


def claim_anchor(claim_id: str) -> str:
    """The HTML id of a claim's line in its chapter, ``claim-<paper>-<name>`` with every run of other characters
    than a-z and 0-9 made one hyphen."""
    return "claim-" + re.sub(r"[^a-z0-9]+", "-", claim_id.lower()).strip("-")


def find_repo_root(start: str | os.PathLike | None = None) -> Path | None:
    """The nearest folder at or above ``start`` (default: the working directory) that holds the book:
    ``_toc.yml`` beside the ``calib/`` package. None when there is none."""
    here = Path(start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / "_toc.yml").is_file() and (folder / "calib").is_dir():
            return folder
    return None


def repo_root(start: str | os.PathLike | None = None) -> Path:
    """The repository root: :func:`find_repo_root` of ``start``, else the checkout that holds this package
    (``<root>/book/calib_book``) when it holds ``_toc.yml``. Raises FileNotFoundError when neither does."""
    found = find_repo_root(start)
    if found is not None:
        return found
    checkout = Path(__file__).resolve().parents[2]
    if (checkout / "_toc.yml").is_file():
        return checkout
    raise FileNotFoundError(f"no book found at or above {Path(start or Path.cwd()).resolve()}: run from the "
                            "repository (the folder with _toc.yml).")


def ledger_path() -> Path | None:
    """Where :func:`claim` appends its records (None: keep them in memory only)."""
    env = os.environ.get("CALIB_LEDGER")
    if env:
        return Path(env)
    root = find_repo_root()
    return root / "_build" / "claims.jsonl" if root else None


def current_chapter() -> str:
    """The chapter being executed: ``$CALIB_CHAPTER`` (set by the book runner), else ``"interactive"``."""
    return os.environ.get("CALIB_CHAPTER", "interactive")


def strict() -> bool:
    """Whether a claim that is not confirmed raises (``$CALIB_STRICT`` is not ``0``)."""
    return os.environ.get("CALIB_STRICT", "1").strip().lower() not in ("0", "false", "no", "off")


def _check_text(name: str, value) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{name} must be a string; got {type(value).__name__}.")
    return value.strip()


def _check_scale(scale, verdict: str) -> dict:
    if scale is None or scale == {}:
        if verdict in EMPIRICAL:
            raise ValueError(f"verdict={verdict!r} needs scale=dict({', '.join(k + '=...' for k in SCALE_KEYS)}"
                             + (", command=...)" if verdict == "untested" else ")")
                             + ": the data, model, epochs, seeds and N of the runs behind it.")
        return {}
    if not isinstance(scale, dict):
        raise ValueError(f"scale must be a dict with keys {', '.join(SCALE_KEYS)}; got {type(scale).__name__}.")
    needed = SCALE_KEYS + (("command",) if verdict == "untested" else ())
    missing = [k for k in needed if k not in scale or scale[k] in (None, "")]
    if missing:
        raise ValueError(f"scale is missing {', '.join(missing)}; a {verdict!r} verdict states "
                         + ("the data, model, epochs, seeds and N it would need and the command that would test it."
                            if verdict == "untested" else "the data, model, epochs, seeds and N of the runs."))
    return {str(k): (v.item() if isinstance(v, np.generic) else v) for k, v in scale.items()}


def _check_premise(premise: str, premise_holds, verdict: str, scaled: bool):
    """The premise of an empirical claim, checked against its verdict (the module docstring has the rules)."""
    if not scaled:
        if premise or premise_holds is not None:
            raise ValueError("premise and premise_holds belong to an empirical claim: give scale=dict(...) too, "
                             "or drop them.")
        return "", None
    if not premise:
        raise ValueError(f"a {verdict!r} claim with scale needs premise=...: the condition under which the paper's "
                         "statement applies, with its numbers measured here, e.g. 'cross-entropy is over-confident: "
                         "T_CE >= 1.5 (measured 2.51 [2.30, 2.70])'.")
    if premise_holds is None:
        if verdict != "untested":
            raise ValueError(f"a {verdict!r} claim needs premise_holds=<bool computed in the chapter>; None is only "
                             "for an 'untested' claim whose runs are not made here.")
        return premise, None
    if isinstance(premise_holds, np.ndarray) and premise_holds.shape != ():
        raise ValueError("premise_holds must be a single boolean; reduce the array with .all() or .any() first.")
    if not isinstance(premise_holds, (bool, np.bool_)):
        raise ValueError("premise_holds must be a boolean computed by the chapter; got "
                         f"{type(premise_holds).__name__}.")
    premise_holds = bool(premise_holds)
    if not re.search(r"\d", premise):
        raise ValueError(f"premise={premise!r} states no number: give the values measured in our runs that make it "
                         f"{'hold' if premise_holds else 'fail'}.")
    if not premise_holds and verdict != "untested":
        raise ValueError(f"the premise fails in our runs ({premise}), so verdict={verdict!r} would judge the paper "
                         "outside its regime: make it verdict='untested' with passed=None.")
    return premise, premise_holds


def claim(id: str, statement: str, *, verdict: str = "holds", passed=None, evidence: str = "",
          about: str = "paper", paper: str | None = None, where: str = "", quote: str = "", correction: str = "",
          remark: str = "", scale: dict | None = None, premise: str = "", premise_holds=None) -> Claim:
    """Record a checkable statement and fail loudly if the computation does not confirm its verdict.

    Parameters
    ----------
    id : str
        ``"<paper>/<short-name>"``, e.g. ``"mukhoti2020/prop2"``; unique within the book and stable: a
        re-judged claim keeps its id.
    statement : str
        What is judged, in the paper's words where possible.
    verdict : {"holds", "imprecise", "typo", "false", "not-reproduced", "inconclusive", "untested"}
        The book's judgement of the statement as printed (the module docstring has the table).
    passed : bool, or None for "untested"
        Computed in the chapter: True when the computation confirms the verdict. Never typed in.
    evidence : str
        The measured numbers behind ``passed`` (errors, counts, counterexamples, intervals).
    about : {"paper", "code", "book"}
        Whose statement: the paper's text, the authors' released code, or the book's own finding.
    paper : str, optional
        Paper key; defaults to the part of ``id`` before the first ``/``.
    where : str
        Location in the paper (section, equation, proposition, table).
    quote : str
        The paper's exact words; required for a verdict other than "holds" about the paper.
    correction : str
        What holds instead; required for "imprecise", "typo" and "false", refused otherwise.
    remark : str
        Precision that does not change the verdict (exact values behind a rounded number, a caveat).
    scale : dict
        ``data``, ``model``, ``epochs``, ``seeds``, ``n`` of the runs behind an empirical verdict
        ("not-reproduced", "inconclusive"); for "untested" the runs it needs and ``command``.
    premise : str
        Required with ``scale``: the condition under which the paper's statement applies, with the numbers
        measured in our runs ("cross-entropy is over-confident: T_CE >= 1.5 (measured 2.51 [2.30, 2.70])").
    premise_holds : bool, or None for an "untested" claim whose runs are not made here
        Computed in the chapter. False forces verdict "untested" (with ``passed=None``); "not-reproduced"
        needs True.
    """
    if not isinstance(id, str) or "/" not in id:
        raise ValueError(f"id must look like 'paper/name'; got {id!r}.")
    if verdict not in VERDICTS:
        raise ValueError(f"verdict={verdict!r} is not supported; choose one of {', '.join(map(repr, VERDICTS))}.")
    if about not in ABOUT:
        raise ValueError(f"about={about!r} is not supported; choose 'paper' (the paper's text), 'code' (the "
                         "authors' released code) or 'book' (the book's own finding).")
    statement, evidence, where, quote, correction, remark, premise = (
        _check_text(n, v) for n, v in (("statement", statement), ("evidence", evidence), ("where", where),
                                        ("quote", quote), ("correction", correction), ("remark", remark),
                                        ("premise", premise)))
    if not statement:
        raise ValueError("statement is empty; say what is judged.")
    if verdict in CORRECTED and not correction:
        raise ValueError(f"verdict={verdict!r} needs correction=...: what holds instead of the printed statement.")
    if verdict not in CORRECTED and correction:
        raise ValueError(f"correction is only for 'imprecise', 'typo' and 'false'; a {verdict!r} claim "
                         "puts added precision in remark=... instead.")
    if about == "paper" and verdict != "holds" and not quote:
        raise ValueError(f"a {verdict!r} verdict on the paper needs quote=...: the paper's exact words.")
    scale = _check_scale(scale, verdict)
    if verdict == "untested":
        if passed is not None:
            raise ValueError("an 'untested' claim computes nothing: leave passed=None.")
    else:
        if passed is None:
            raise ValueError("passed is required: the boolean the chapter computed (None only for 'untested').")
        if isinstance(passed, np.ndarray) and passed.shape != ():
            raise ValueError("passed must be a single boolean; reduce the array with .all() or .any() first.")
        if not isinstance(passed, (bool, np.bool_)):
            raise ValueError(f"passed must be a boolean computed by the chapter; got {type(passed).__name__}.")
        passed = bool(passed)
    premise, premise_holds = _check_premise(premise, premise_holds, verdict, bool(scale))
    record = Claim(id=id, paper=paper or id.split("/", 1)[0], where=where, statement=statement, verdict=verdict,
                   passed=passed, evidence=evidence, chapter=current_chapter(), correction=correction,
                   about=about, quote=quote, remark=remark, scale=scale, premise=premise,
                   premise_holds=premise_holds)
    RECORDS.append(record)
    path = ledger_path()
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(asdict(record)) + "\n")
    _show(record)
    if record.passed is False and strict():
        raise ClaimError(
            f"claim {id!r} asserts {verdict!r} but the computation does not confirm it: {evidence or statement}"
        )
    return record


def under_premise(verdict: str, passed, premise: str, premise_holds: bool, scale: dict,
                  untested_scale: dict) -> dict:
    """The keyword arguments of :func:`claim` for an empirical claim judged only where its premise holds.

    Where ``premise_holds`` the chapter's ``verdict`` and computed ``passed`` stand, with ``scale``; where it
    fails the claim is ``"untested"`` (``passed=None``) with ``untested_scale`` (the runs it would need and the
    ``command``), whatever the intervals said: a statement is not judged outside its regime (issue 25).
    Use as ``claim(id, statement, **under_premise(...), evidence=...)``.
    """
    if premise_holds:
        return {"verdict": verdict, "passed": passed, "scale": scale, "premise": premise,
                "premise_holds": premise_holds}
    return {"verdict": "untested", "passed": None, "scale": untested_scale, "premise": premise,
            "premise_holds": premise_holds}


def status_word(record: Claim) -> str:
    """``ok`` (confirmed), ``FAILED`` (not confirmed) or ``untested`` (nothing computed)."""
    return "untested" if record.passed is None else ("ok" if record.passed else "FAILED")


#: What the computation says about the verdict, by :func:`status_word`: the claim line's words, which never
#: read as a second verdict ("ok" beside "not-reproduced" read as a contradiction).
OUTCOME_WORDS = {"ok": "the computation confirms the verdict",
                 "FAILED": "the computation does NOT confirm the verdict",
                 "untested": "nothing computed here"}


def premise_text(record: Claim) -> str:
    """The premise as one phrase, ``premise (holds here)``, or ``""`` for a claim without one."""
    if not record.premise:
        return ""
    state = {True: "holds here", False: "fails here", None: "not measured here"}[record.premise_holds]
    return f"{record.premise} ({state})"


def claim_text(record: Claim) -> str:
    """The claim line as plain text: ``[verdict] id, about the ...; outcome: evidence; premise: ...``."""
    evidence = f": {record.evidence}" if record.evidence else ""
    premise = f"; premise: {premise_text(record)}" if record.premise else ""
    return (f"[{record.verdict}] {record.id}, about the {record.about}; {OUTCOME_WORDS[status_word(record)]}"
            f"{evidence}{premise}")


def text_html(text: str) -> str:
    """HTML of a claim field's text whose ``$...$`` are math and whose ```...``` are code (:func:`text_runs`): each
    formula becomes the ``span.math`` Sphinx writes, which MathJax typesets, and each code span the
    ``code.literal`` Sphinx writes."""
    code = '<code class="docutils literal notranslate"><span class="pre">{}</span></code>'
    math = '<span class="math notranslate nohighlight">\\({}\\)</span>'
    forms = {"text": html.escape, "code": lambda part: code.format(html.escape(part)),
             "math": lambda part: math.format(html.escape(part))}
    return "".join(forms[kind](part) for kind, part in text_runs(text))


def premise_html(record: Claim) -> str:
    """The premise as a paragraph (``p.claim-premise``, its ``$...$`` typeset), the same under a chapter's cell and
    on the ledger pages; ``""`` for a claim without one. Like the evidence, it is measured numbers, which the
    browser check reads apart from the prose."""
    if not record.premise:
        return ""
    return (f'<p class="claim-premise"><span class="claim-label">Premise:</span> '
            f'{text_html(premise_text(record))}</p>')


def evidence_html(record: Claim) -> str:
    """The evidence as a paragraph (``p.claim-evidence``, its ``$...$`` typeset), the same under a chapter's cell and
    on the ledger pages; ``""`` for a claim without one."""
    if not record.evidence:
        return ""
    return (f'<p class="claim-evidence"><span class="claim-label">Evidence:</span> '
            f'{text_html(record.evidence)}</p>')


#: The methods page, relative to a chapter's page and to the ledger's pages alike, both one folder deep; every
#: empirical claim (one with ``scale``) links to it.
METHODS_PAGE = "../book/methods.html"


def claim_html(record: Claim) -> str:
    """The claim line as a block under its cell: a verdict badge, the claim's id with a permalink (its anchor,
    which the ledger pages link to), what the computation says, the statement and the evidence."""
    status = status_word(record).lower()
    return (f'<div class="claim-line claim-{status} verdict-{record.verdict}" id="{record.anchor}">'
            f'<div class="claim-head"><span class="claim-badge verdict-{record.verdict}">{record.verdict}</span> '
            f'<a class="claim-permalink" href="#{record.anchor}" title="Permalink to this claim">'
            f'<code class="claim-id">{html.escape(record.id)}</code><span class="claim-hash" aria-hidden="true">'
            f' #</span></a> <span class="claim-about">about the {record.about}</span> '
            f'<span class="claim-outcome">{OUTCOME_WORDS[status_word(record)]}</span>'
            + (f' <a class="claim-method" href="{METHODS_PAGE}" title="How the book decides an empirical claim">'
               f'how it is decided</a>' if record.scale else "") + '</div>'
            f'<p class="claim-statement">{text_html(record.statement)}</p>'
            + evidence_html(record) + premise_html(record) + "</div>")


#: What a MyST paragraph would read as markup: escaped in :func:`claim_markdown`'s text (a line that starts "1." or
#: ":::" included), which CommonMark allows for any ASCII punctuation.
_MARKDOWN_MARKUP = re.compile(r"([\\`*_{}\[\]<>#+\-!|~$&%:.)])")


def markdown_with_math(text: str, escape=lambda part: _MARKDOWN_MARKUP.sub(r"\\\1", part)) -> str:
    """MyST of a text whose ``$...$`` are math and ```...``` code (:func:`text_runs`): the math and the code kept, the
    rest escaped by ``escape`` (by default every character MyST could read as markup) and on one line (each run
    of white space one space)."""
    forms = {"text": lambda part: escape(re.sub(r"\s+", " ", part)), "code": lambda part: f"`{part}`",
             "math": lambda part: f"${part}$"}
    return "".join(forms[kind](part) for kind, part in text_runs(text))


def claim_markdown(record: Claim) -> str:
    """The claim block as MyST, for the book's PDF (Sphinx's LaTeX builder prints a notebook's ``text/markdown``
    where the site shows ``text/html``): an admonition titled with the claim's id and verdict, holding whose
    statement it judges, what the computation says, the statement, the evidence and the premise."""
    method = " ({doc}`how it is decided </book/methods>`)" if record.scale else ""
    lines = [f"~~~{{admonition}} `{record.id}`: {record.verdict}",        # a ``` fence's title takes no backtick
             f":class: claim-line claim-{status_word(record).lower()} verdict-{record.verdict}", "",
             f"*About the {record.about}; {OUTCOME_WORDS[status_word(record)]}.*{method}", "",
             markdown_with_math(record.statement)]
    if record.evidence:
        lines += ["", f"**Evidence:** {markdown_with_math(record.evidence)}"]
    if record.premise:
        lines += ["", f"**Premise:** {markdown_with_math(premise_text(record))}"]
    return "\n".join(lines + ["~~~"])


def _show(record: Claim) -> None:
    """Print the claim line (:func:`claim_text`); in a notebook, as the HTML block of :func:`claim_html`, which
    carries the claim's anchor for the ledger pages, with :func:`claim_markdown` for the PDF."""
    text = claim_text(record)
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None and hasattr(ipython, "get_ipython") else None
    if shell is None or "IPKernelApp" not in getattr(shell, "config", {}):
        print(text)
        return
    from IPython.display import display

    display({"text/html": claim_html(record), "text/markdown": claim_markdown(record), "text/plain": text}, raw=True,
            metadata={"claim": record.id})


_FOLD = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"', "\u2013": "-", "\u2014": "-",
                       "\u2212": "-", "\ufb01": "fi", "\ufb02": "fl", "\ufb00": "ff", "\ufb03": "ffi", "\u00a0": " "})


def _normalise(text: str) -> str:
    text = text.translate(_FOLD)
    text = re.sub(r"(\w)-\s*\n\s*(\w)", r"\1\2", text)          # hyphenation at a line end
    text = re.sub(r"<su([bp])>(.*?)</su[bp]>", lambda m: ("_{" if m[1] == "b" else "^{") + m[2] + "}", text)
    text = text.replace("*", "").replace("$", "")         # the extraction's bold and italics, and math delimiters
    return " ".join(text.split())


def _without_inner_hyphens(text: str) -> str:
    return re.sub(r"(\w)- ?([\w\\])", r"\1\2", text)       # also "ECE- $\Psi$": a hyphen before math


def quote_in_text(quote: str, text: str) -> bool:
    """Whether ``quote`` occurs in ``text`` (a paper's extracted text), up to whitespace, hyphens inside a word
    (the extraction keeps or drops them at line ends: "calibrationsensitive"), typographic quotes, ligatures, and the
    extraction's markup: ``$...$`` around math (and a space it leaves after a hyphen), ``**`` and ``*`` for bold and
    italics, ``<sub>``/``<sup>`` for the quote's ``_{}``/``^{}``.
    An ellipsis (``...`` or ``…``) in the quote stands for omitted words: the parts must occur in order."""
    body = _without_inner_hyphens(_normalise(text))
    parts = [_without_inner_hyphens(_normalise(p)) for p in re.split(r"\.\.\.|\u2026", quote)]
    pos = 0
    for part in (p for p in parts if p):
        found = body.find(part, pos)
        if found < 0:
            return False
        pos = found + 1
    return True


def read_ledger(path: str | os.PathLike) -> list[Claim]:
    """Read a ledger file; a later record with the same id and chapter replaces an earlier one."""
    path = Path(path)
    if not path.is_file():
        return []
    latest: dict[tuple[str, str], Claim] = {}
    names = set(Claim.__dataclass_fields__)
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            data = {k: v for k, v in json.loads(line).items() if k in names}
            rec = Claim(**data)
            latest[(rec.id, rec.chapter)] = rec
    return list(latest.values())


def replace_chapter(path: str | os.PathLike, chapter: str, records_path: str | os.PathLike) -> None:
    """Replace a chapter's records in the ledger ``path`` by those of ``records_path`` (a successful run's), in one
    atomic write: a run that fails never touches the ledger."""
    path, records_path = Path(path), Path(records_path)
    keep = []
    if path.is_file():
        keep = [line for line in path.read_text(encoding="utf-8").splitlines()
                if line.strip() and json.loads(line).get("chapter") != chapter]
    new = [line for line in records_path.read_text(encoding="utf-8").splitlines()] if records_path.is_file() else []
    write_atomic(path, "".join(line + "\n" for line in keep + [n for n in new if n.strip()]))


def drop_chapter(path: str | os.PathLike, chapter: str) -> None:
    """Remove a chapter's earlier records from the ledger before the chapter runs again."""
    path = Path(path)
    if not path.is_file():
        return
    keep = [line for line in path.read_text(encoding="utf-8").splitlines()
            if line.strip() and json.loads(line).get("chapter") != chapter]
    write_atomic(path, "".join(line + "\n" for line in keep))


def keep_chapters(path: str | os.PathLike, chapters) -> None:
    """Remove from the ledger ``path`` the records of every chapter not in ``chapters`` (those of ``_toc.yml``):
    a chapter taken out of the book, or claims recorded outside the runner (``"interactive"``). One atomic write,
    and none when there is nothing to remove."""
    path, chapters = Path(path), set(chapters)
    if not path.is_file():
        return
    lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    keep = [line for line in lines if json.loads(line).get("chapter") in chapters]
    if len(keep) != len(lines):
        write_atomic(path, "".join(line + "\n" for line in keep))


def write_atomic(path: str | os.PathLike, text: str | bytes) -> None:
    """Write ``text`` (or bytes) to ``path`` in one step: into a temporary file of this writer's own beside it (a
    unique name, so that two writers never share one), then renamed over ``path``. A reader sees the old file or
    the new one, never a part."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, path.stat().st_mode & 0o777 if path.exists() else 0o644)   # mkstemp's 0600 otherwise
        with (os.fdopen(fd, "wb") if isinstance(text, bytes) else os.fdopen(fd, "w", encoding="utf-8")) as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
