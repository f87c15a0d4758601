"""The back-matter pages built from the claims ledger and the chapter timings, as MyST Markdown source.

Each function returns the MyST source of one page; :func:`calib_book.runner.build_book` writes them into the
staged book (``_build/src/book/``) before jupyter-book renders it:

- ``claims.md``, :func:`ledger_page`: every claim, with the verdict vocabulary (:func:`vocabulary_table`), a
  paper x verdict summary whose counts set the page's filter (:func:`summary_table`), and one entry per claim;
- ``errata.md``, :func:`errata_page`: the papers' statements judged false, then imprecise, then typos;
- ``reproduction.md``, :func:`reproduction_page`: the empirical claims not reproduced, inconclusive or untested
  here, with the scale of our runs;
- ``released-code.md``, :func:`released_code_page`: notes on the authors' released code (never errata);
- ``status.md``, :func:`status_page`: the wall time of each chapter's last execution.

The data behind the book is downloadable from the pages that use it (Sphinx's ``{download}`` role): the ledger
links ``_build/claims.jsonl`` (:data:`CLAIMS_DOWNLOAD`), chapter 11 the published tables under
``book/data/published/``, and a chapter writes a table of its own beside its executed notebook with
:func:`write_chapter_download` (chapter 10's main table, from :func:`csv_text`).

Part of the book's machinery (:mod:`calib_book`), beside :mod:`calib_book.runner` (the runner, which imports this
module) and :mod:`calib_book.notebook` (the helpers chapters share for presentation); it reads
:mod:`calib_book.claims` only. The verdicts and their meanings are those of ARCHITECTURE.md, "The claim record".
"""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path

from calib_book import claims as claims_module

__all__ = ["PAPERS", "VERDICT_MEANINGS", "ABOUT_MEANINGS", "vocabulary_table", "summary_table", "ledger_page",
           "errata_page", "reproduction_page", "released_code_page", "status_page", "exercises_page",
           "CLAIMS_DOWNLOAD", "csv_text", "write_chapter_download"]

#: The ledger file (``_build/claims.jsonl``) as the ledger page (``_build/src/book/claims.md``) links it.
CLAIMS_DOWNLOAD = "../../claims.jsonl"

#: The papers the ledger files claims under, in the order the pages list them, with their citation text.
#:
#: :meta hide-value:
PAPERS = {
    "mukhoti2020": "Mukhoti et al. (2020), *Calibrating Deep Neural Networks using Focal Loss*",
    "komisarenko2024": "Komisarenko & Kull (2024), *Improving Calibration by Relating Focal Loss, Temperature "
                       "Scaling, and Properness*",
    "charoenphakdee2021": "Charoenphakdee et al. (2021), *On Focal Loss for Class-Posterior Probability Estimation*",
    "karandikar2021": "Karandikar et al. (2021), *Soft Calibration Objectives for Neural Networks*",
    "zhou2025": "Zhou et al. (2025), *Revisiting Reweighted Risk for Calibration: AURC, Focal and Inverse Focal Loss*",
    "guo2017": "Guo et al. (2017), *On Calibration of Modern Neural Networks*",
    "kumar2018": ("Kumar et al. (2018), *Trainable Calibration Measures for Neural Networks from Kernel Mean "
                  "Embeddings*"),
    "kumar2019": "Kumar et al. (2019), *Verified Uncertainty Calibration*",
    "lin2017": "Lin et al. (2017), *Focal Loss for Dense Object Detection*",
}


_ESCAPE = str.maketrans({c: "\\" + c for c in "\\`*_{}[]<>|$#"})


def csv_text(header, rows) -> str:
    """A table as CSV text (RFC 4180 quoting, ``\\n`` line ends): a header row, then one line per row.

    Raises
    ------
    ValueError
        When a row's length is not the header's (the CSV would shift its columns).
    """
    header = [str(h) for h in header]
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(header)
    for i, row in enumerate(rows):
        if len(row) != len(header):
            raise ValueError(f"csv_text: row {i} has {len(row)} cells but the header has {len(header)} "
                             f"({header}); give every row one cell per column.")
        writer.writerow(row)
    return out.getvalue()


def write_chapter_download(filename: str, text: str, root: Path | None = None) -> Path:
    """Write a chapter's downloadable file beside its executed notebook, ``<root>/_build/src/chapters/<filename>``,
    where the chapter's download role (``{download}`` with that file name) finds it when the book is built; return
    its path.

    ``root`` is the book's root, by default the working directory (``calib book run`` executes every chapter
    there). A plain file name only: a path would escape the chapters' folder.
    """
    if Path(filename).name != filename or not filename:
        raise ValueError(f"write_chapter_download: filename {filename!r} must be a plain file name (no folder), "
                         "e.g. '10-benchmark-main-table.csv'.")
    folder = Path.cwd() if root is None else Path(root)
    path = folder / "_build" / "src" / "chapters" / filename
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def _md(text: str) -> str:
    """Escape text for a MyST table cell."""
    return " ".join(str(text).split()).translate(_ESCAPE)


def _md_with_math(text: str) -> str:
    """Escape text for a MyST table cell but keep its ``$...$`` math and its ```...``` code (the book's statements
    and corrections; :func:`calib_book.claims.text_runs`), on one line; the whole text, however long, with no cut:
    a formula is never split."""
    return claims_module.markdown_with_math(" ".join(str(text).split()), escape=lambda part: part.translate(_ESCAPE))


_TEX_COMMAND = re.compile(r"\\[A-Za-z]+|[\^_]\{")
_PROSE_WORD = re.compile(r"^[(\"']?[A-Za-z][a-z]+[.,;:)'\"]?$")       # a word of the prose: 'from', 'identical,'


def _tex_runs(text: str) -> str:
    """A paper's words with its TeX (as the extraction of the paper gives it, without dollars) as MyST math.

    Text without a TeX command stays text. Text with no word of prose (a formula, however long, such as
    ``\\text{CE}_{\\rho}(f)\\geq\\begin{cases}...\\end{cases}``) becomes one formula. Otherwise each run of
    words that are not prose and hold a TeX command (``ff^{\\prime}``, ``77.5 \\pm 0.3``) becomes a formula;
    when a run would split a brace group, the whole text is one formula rather than a cut one.
    """
    if not _TEX_COMMAND.search(text):
        return text.translate(_ESCAPE)
    core = text.strip()
    if core != text:                                # keep the spaces around it, outside the math
        lead, trail = text[:len(text) - len(text.lstrip())], text[len(text.rstrip()):]
        return lead + _tex_runs(core) + trail
    words = text.split(" ")
    if not any(_PROSE_WORD.match(w) for w in words):
        return f"${text}$"
    out, run = [], []

    def flush():
        if run:
            body = " ".join(run)
            out.append(f"${body}$" if _TEX_COMMAND.search(body) else body.translate(_ESCAPE))
            run.clear()

    for word in words:
        if _PROSE_WORD.match(word) or (word.isalpha() and len(word) > 1):
            flush()
            out.append(word.translate(_ESCAPE))
        else:
            run.append(word)
    flush()
    if any(m.count("{") != m.count("}") for m in out if m.startswith("$")):
        return f"${text}$"
    return " ".join(out)


def _quote_md(quote: str) -> str:
    """A paper's exact words as MyST: its ``$...$`` math kept, and its TeX without dollars made math
    (:func:`_tex_runs`), so that no TeX command is left as text."""
    parts = " ".join(str(quote).split()).split("$")
    if len(parts) % 2 == 0:
        return _tex_runs(" ".join(str(quote).split()).replace("$", ""))
    return "".join(_tex_runs(p) if i % 2 == 0 else f"${p}$" for i, p in enumerate(parts) if i % 2 == 0 or p.strip())


def _chapter_link(chapter: str) -> str:
    if chapter == "interactive":
        return "(interactive)"
    return f"{{doc}}`/chapters/{chapter}`"


#: What each verdict means, as the claims page's vocabulary table states it.
#:
#: :meta hide-value:
VERDICT_MEANINGS = {
    "holds": "true as printed (a remark may add precision, such as the exact value behind a rounded number)",
    "imprecise": "true in substance, but a printed number is rounded beyond what its context implies, or a "
                 "needed condition is only implicit",
    "typo": "an evident slip (an index, a sign in an intermediate step, a caption, a label) whose intended "
            "statement holds",
    "false": "false as printed and in substance: a counterexample, or a number wrong beyond rounding",
    "not-reproduced": "an empirical statement our runs do not show at the scale we ran, with the paper's premise "
                      "holding in our runs (its regime, e.g. an over-confident cross-entropy baseline); it says "
                      "nothing about the paper's own runs",
    "inconclusive": "our runs cannot separate the effect from noise at that scale (decided from seeds and an "
                    "interval)",
    "untested": "needs compute or data not available here, or the paper's premise does not hold in our runs (the "
                "entry gives the premise with its numbers, and the command that would test it)",
}
#: What a claim can be about (the paper's text, the authors' released code, or the book's own finding).
#:
#: :meta hide-value:
ABOUT_MEANINGS = {"paper": "the paper's text", "code": "the authors' released code (never an erratum of the paper)",
                  "book": "the book's own finding, extending a paper"}


def _paper_order(records) -> list[str]:
    return sorted({c.paper for c in records},
                  key=lambda p: (p not in PAPERS, list(PAPERS).index(p) if p in PAPERS else 0, p))


def _cell_link(c: claims_module.Claim, text: str = "the computation") -> str:
    """Raw-HTML link from a back-matter page (``book/*.html``) to the claim's line in its chapter."""
    if c.chapter == "interactive":
        return "(recorded interactively)"
    return f'<a href="../chapters/{c.chapter}.html#{c.anchor}">{text}</a>'


def _scale_text(scale: dict) -> str:
    names = {"data": "data", "model": "model", "epochs": "epochs", "seeds": "seeds", "n": "N"}
    parts = [f"{names[k]}: {scale[k]}" for k in names if k in scale]
    parts += [f"{k}: {v}" for k, v in scale.items() if k not in names and k != "command"]
    return "; ".join(parts)


def _badge(verdict: str) -> str:
    """The verdict as a coloured badge (``book/_static/claims.css``), the same as under a chapter's cell."""
    return f'<span class="claim-badge verdict-{verdict}">{verdict}</span>'


def _entry(c: claims_module.Claim, heading: str) -> list[str]:
    """One claim as a MyST block (a container whose classes the ledger's filter reads): a verdict badge and the
    claim's name and links, then the statement, the paper's words, what holds, a remark, the scale of the runs, the
    premise (whether it holds in our runs, with its numbers) and the evidence, each in full with its math typeset."""
    status = {True: "", False: " · **not confirmed by the computation**", None: ""}[c.passed]
    about = "" if c.about == "paper" else f" (about the {'released code' if c.about == 'code' else 'book'})"
    lines = [f"```{{container}} claim-entry paper-{c.paper} verdict-{c.verdict} about-{c.about}",
             f"{_badge(c.verdict)} {heading}{about}{status} · {_chapter_link(c.chapter)} · {_cell_link(c)}", "",
             _md_with_math(c.statement), ""]
    if c.quote:
        lines += [f"> {_quote_md(c.quote)}", ""]
    for label, text in (("What holds", c.correction), ("Remark", c.remark)):
        if text:
            lines += [f"*{label}:* {_md_with_math(text)}", ""]
    if c.scale:
        lines += [f'<p class="claim-scale"><span class="claim-label">Scale of the runs:</span> '
                  f'{claims_module.text_html(_scale_text(c.scale))}</p>', ""]
        if c.scale.get("command"):
            lines += [f"*Command that would test it:* `{c.scale['command']}`" if "`" not in str(c.scale["command"])
                      else f"*Command that would test it:* {_md(c.scale['command'])}", ""]
    if c.premise:
        lines += [claims_module.premise_html(c), ""]
    if c.evidence:
        lines += [claims_module.evidence_html(c), ""]
    return lines + ["```", ""]


def vocabulary_table() -> list[str]:
    """The verdict vocabulary as a Markdown table (the ledger page's head; the intro states it too)."""
    out = ["| verdict | meaning |", "|---|---|"]
    out += [f"| *{v}* | {m} |" for v, m in VERDICT_MEANINGS.items()]
    return out


def summary_table(records: list[claims_module.Claim], link: bool = True) -> list[str]:
    """Paper x verdict counts as a Markdown table; with ``link`` each count sets the ledger's filter."""
    verdicts = [v for v in claims_module.VERDICTS if any(c.verdict == v for c in records)]
    out = ["| paper | " + " | ".join(verdicts) + " | total |", "|---|" + "---:|" * (len(verdicts) + 1)]

    def cell(n, paper, verdict):
        if not n or not link:
            return str(n)
        query = "&".join(f"{k}={v}" for k, v in (("paper", paper), ("verdict", verdict)) if v)
        return f'<a href="?{query}#claims-list">{n}</a>'

    for paper in _paper_order(records):
        mine = [c for c in records if c.paper == paper]
        out.append(f"| {paper} | " + " | ".join(cell(sum(c.verdict == v for c in mine), paper, v) for v in verdicts)
                   + f" | {cell(len(mine), paper, '')} |")
    out.append("| **all** | " + " | ".join(cell(sum(c.verdict == v for c in records), "", v) for v in verdicts)
               + f" | {cell(len(records), '', '')} |")
    return out


def _filter_controls(records) -> list[str]:
    papers = "".join(f'<option value="{p}">{p}</option>' for p in _paper_order(records))
    verdicts = "".join(f'<option value="{v}">{v}</option>' for v in claims_module.VERDICTS
                       if any(c.verdict == v for c in records))
    return ['<div class="claim-filter" id="claims-list">',
            f'<label>Paper <select id="claim-filter-paper"><option value="">all papers</option>{papers}</select>'
            '</label>',
            f'<label>Verdict <select id="claim-filter-verdict"><option value="">all verdicts</option>{verdicts}'
            '</select></label>',
            '<span id="claim-filter-count" aria-live="polite"></span>',
            '</div>', ""]


def ledger_page(records: list[claims_module.Claim], order: list[str]) -> str:
    """MyST source of the claims-ledger page: the vocabulary, a paper x verdict summary, a filter, every claim."""
    rank = {name: i for i, name in enumerate(order)}
    records = sorted(records, key=lambda c: rank.get(c.chapter, len(rank)))
    confirmed = sum(c.passed is True for c in records)
    out = ["(claims-ledger)=", "# Claims ledger", "",
           f"Every checkable statement the chapters make, as recorded when the book was last executed: "
           f"**{len(records)} claims**, of which **{confirmed}** were confirmed by the computation that built this "
           f"page" + (f" and **{sum(c.passed is None for c in records)}** are untested here" if any(
               c.passed is None for c in records) else "") + ".", "",
           "A claim's *verdict* judges the statement as printed, read with its hedges ('about', '≈', 'may') "
           "and the conditions the paper states elsewhere, the way a careful referee would:", "",
           *vocabulary_table(), "",
           "Each claim is *about* the paper's text, the authors' released code (never an erratum of the paper), or "
           "the book's own finding that extends a paper. Claims about a training outcome are judged from several "
           "seeds and an interval, never from one run, by the one procedure of {doc}`methods` (`calib.stats`).", "",
           "**The block under a cell.** When a chapter runs, each claim shows its verdict as a badge, its name "
           "(a permalink: the entries below link to it), what the computation says and the measured evidence; as "
           "text, `[holds] mukhoti2020/prop2, about the paper; the computation confirms the verdict: max |g-1| = "
           "3e-16`. *The computation confirms the verdict* means the cell's computation gave the verdict shown, "
           "whichever it is (*holds*, *false*, *not-reproduced*...); *nothing computed here* marks an untested "
           "claim. A claim that is not confirmed stops the chapter, so every verdict below was checked by the run "
           "that built this page.", "",
           "Pages built from this ledger: the {doc}`errata <errata>` (the papers' false, imprecise and mistyped "
           "statements), {doc}`reproduction <reproduction>` (what our runs could not show or did not test) and "
           "{doc}`released code <released-code>` (notes on the authors' code).", "",
           f"**Download** every claim as data: {{download}}`claims.jsonl <{CLAIMS_DOWNLOAD}>` (one JSON object a "
           "line, with the fields id, paper, where, statement, verdict, about, quote, correction, remark, scale, "
           "premise, premise_holds, passed, evidence and chapter).", "",
           "## Summary", "", "Counts by paper and verdict; a count filters the list below.", "",
           *summary_table(records), "",
           f"A paper's row counts every claim filed under it: {sum(c.about == 'paper' for c in records)} judge the "
           f"papers' text, {sum(c.about == 'code' for c in records)} the authors' released code and "
           f"{sum(c.about == 'book' for c in records)} are the book's own findings.", "",
           "## The claims", "", *_filter_controls(records)]
    for paper in _paper_order(records):
        mine = [c for c in records if c.paper == paper]
        counts = {v: sum(c.verdict == v for c in mine) for v in claims_module.VERDICTS}
        summary = ", ".join(f"{n} {v}" for v, n in counts.items() if n)
        out += [f"### {PAPERS.get(paper, paper)}", "", f"{len(mine)} claims: {summary}.", ""]
        for c in mine:
            where = f" · {_md_with_math(c.where)}" if c.where else ""
            out += _entry(c, f"**{_md(c.id)}**{where}")
    if not records:
        out.append("No claims were recorded: run `calib book run` first.")
    return "\n".join(out) + "\n"


def errata_page(records: list[claims_module.Claim]) -> str:
    """MyST source of the errata page: the papers' statements judged false, then imprecise, then typos."""
    kinds = (("false", "False statements", "False as printed and in substance."),
             ("imprecise", "Imprecise statements", "True in substance; a number is rounded beyond what its context "
                                                   "implies, or a needed condition is only implicit."),
             ("typo", "Typos", "Evident slips whose intended statement holds."))
    wrong = [c for c in records if c.about == "paper" and c.verdict in claims_module.CORRECTED]
    counts = ", ".join(f"{sum(c.verdict == k for c in wrong)} {k}" for k, _, _ in kinds)
    out = ["(errata)=", "# Errata", "",
           f"The statements of the papers that are wrong as printed: {len(wrong)} in all ({counts}). Each entry "
           "quotes the paper, says what holds instead, and links to the cell whose computation shows it. Rounding "
           "that its context allows is not listed, nor are notes on the authors' released code "
           "({doc}`released code <released-code>`) or what our smaller runs could not reproduce "
           "({doc}`reproduction <reproduction>`). All verdicts are in the {doc}`claims ledger <claims>`.", ""]
    for verdict, title, meaning in kinds:
        mine = [c for c in wrong if c.verdict == verdict]
        if not mine:
            continue
        out += [f"## {title}", "", meaning, ""]
        for paper in _paper_order(mine):
            out += [f"### {PAPERS.get(paper, paper)}", ""]
            for c in (c for c in mine if c.paper == paper):
                out += _entry(c, f"**{_md_with_math(c.where) or _md(c.id)}** ({_md(c.id)})")
    if not wrong:
        out.append("No statement has been found wrong so far.")
    return "\n".join(out) + "\n"


def reproduction_page(records: list[claims_module.Claim]) -> str:
    """MyST source of the reproduction page: not-reproduced, inconclusive and untested claims with their scale."""
    kinds = (("not-reproduced", "Not reproduced at our scale",
              "Our runs do not show the effect at the scale given. This says nothing about the paper's own runs."),
             ("inconclusive", "Inconclusive", "The interval over seeds contains the threshold: our runs cannot "
                                              "separate the effect from noise at that scale."),
             ("untested", "Untested here", "These need compute or data not available where the book was built; "
                                           "each entry gives the command that would test it."))
    mine = [c for c in records if c.verdict in claims_module.EMPIRICAL]
    out = ["(reproduction)=", "# Reproduction", "",
           f"The empirical statements that this book's runs could not confirm: {len(mine)} in all. Empirical "
           "verdicts come from several seeds and an interval, by the procedure of {doc}`methods` (`calib.stats`); "
           "each entry states the scale of our "
           "runs, which is usually far smaller than the paper's.", "",
           "Table by table, every empirical result of the five papers with its status here, the scale of our "
           "evidence and the command that would test it at the paper's scale is in the reproduction summary of "
           "{doc}`chapter 11 </chapters/11-paper-tables>`; the runs behind it are chapter 10's "
           "{doc}`benchmark </chapters/10-benchmark>`.", ""]
    for verdict, title, meaning in kinds:
        group = [c for c in mine if c.verdict == verdict]
        if group:
            out += [f"## {title}", "", meaning, ""]
            out += [line for c in group for line in _entry(c, f"**{_md(c.id)}**"
                                                              + (f" · {_md_with_math(c.where)}" if c.where else ""))]
    if not mine:
        out.append("Every empirical statement the chapters test was confirmed.")
    return "\n".join(out) + "\n"


def released_code_page(records: list[claims_module.Claim]) -> str:
    """MyST source of the released-code page: claims about the authors' code, which are never errata."""
    mine = [c for c in records if c.about == "code"]
    out = ["(released-code)=", "# Notes on the released code", "",
           f"What the chapters found in the authors' released code ({len(mine)} note{'s' if len(mine) != 1 else ''}). "
           "The released code is not the paper: a difference between them is reported here, never as an erratum of "
           "the paper.", ""]
    out += [line for c in mine
            for line in _entry(c, f"**{_md(c.id)}**" + (f" · {_md_with_math(c.where)}" if c.where else ""))]
    if not mine:
        out.append("No claim about the released code has been recorded.")
    return "\n".join(out) + "\n"


def status_page(timings: dict, order: list[str]) -> str:
    """MyST source of the execution-statistics page: per chapter, its profile, the wall time and end of its last
    execution, its claims, and whether this build executed it or reused an earlier execution (``reused`` in
    ``timings``; see :mod:`calib_book.runner`)."""
    listed = [name for name in order if timings.get(name)]
    reused = [name for name in listed if timings[name].get("reused", False)]
    out = ["(execution-statistics)=", "# Execution statistics", "",
           "Wall time of each chapter's last execution by papermill, on the machine that built this copy of the "
           "book. A chapter is executed again only when its source, its parameters, the library, the stored "
           "results it reads, the versions of Python and the numerical packages, or the instruction set and the "
           "number of threads its kernel computes with changed; otherwise the last execution's notebook and "
           "claims are *reused*.", "",
           f"This build executed {len(listed) - len(reused)} of the {len(listed)} chapters and reused "
           f"{len(reused)}" + (f" ({', '.join(_chapter_link(n) for n in reused)})." if reused else "."), "",
           "| chapter | profile | seconds | claims | executed | this build |", "|---|---|---|---|---|---|"]
    total = 0.0
    for name in listed:
        t = timings[name]
        total += t["seconds"]
        out.append(f"| {_chapter_link(name)} | {t['profile']} | {t['seconds']:.1f} | {t['claims']} | {t['finished']} "
                   f"| {'reused' if t.get('reused', False) else 'executed'} |")
    out.append(f"| total | | {total:.1f} | | | |")
    return "\n".join(out) + "\n"


def exercises_page(entries, chapters: list[str], titles: dict | None = None) -> str:
    """MyST source of the exercise table: per chapter, each exercise's title (linked), level, time, objective,
    whether it has a self-check and whether its solution checks its own answer
    (:func:`calib_book.exercises.exercises_in` gives the entries); ``titles`` maps a chapter to its title, for the
    section headings."""
    titles = titles or {}
    out = ["(exercise-table)=", "# Exercises", "",
           "Every exercise of the book, with the tags it carries: its level, a time estimate, the learning objective "
           "of the {doc}`syllabus <syllabus>` it serves, whether `calib_book.exercises.check` can check an answer "
           "without revealing it (*self-check*), and whether the book's solution checks its own answer when the "
           "book is built (*solution checked*).", ""]
    total = sum(e.minutes or 0 for e in entries)
    out += [f"{len(entries)} exercises, about {total / 60:.0f} hours in all; "
            f"{sum(bool(e.self_check) for e in entries)} with a self-check, "
            f"{sum(e.asserts for e in entries)} with a solution that checks itself.", ""]
    for chapter in chapters:
        mine = [e for e in entries if e.chapter == chapter]
        if not mine:
            continue
        out += [f"## {_md_with_math(titles.get(chapter, chapter))}", "", f"In {{doc}}`/chapters/{chapter}`.", "",
                "| exercise | title | level | time | objective | self-check | solution checked |",
                "|---|---|---|---:|---|---|---|"]
        for e in mine:
            objective = f"{{ref}}`{e.objective} <{e.objective_target}>`" if e.objective else "–"
            out.append(f"| {{numref}}`{e.label}` | {_md_with_math(e.title) or '–'} | {e.level or '–'} | "
                       f"{f'{e.minutes} min' if e.minutes else '–'} | {objective} | "
                       f"{'yes' if e.self_check else 'no'} | {'yes' if e.asserts else 'no'} |")
        out.append("")
    return "\n".join(out) + "\n"
