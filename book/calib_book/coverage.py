"""What each paper states, and where the book decides it: the coverage table and its back-matter page.

The table is data, one CSV file a paper, ``book/data/coverage/<paper>.csv``, written from the papers' text: one
row per checkable *item* (a definition, proposition, theorem, corollary, lemma, equation, algorithm, figure,
table or statement in the text), with the columns of :data:`COLUMNS`:

==============  ==================================================================================================
``paper``       the paper's key, the file's name (``mukhoti2020``)
``item``        the item's stable id within its paper (``prop2``, ``fig3e``, ``table1``, ``sec5.2-...``)
``kind``        one of :data:`KINDS`
``where``       where the paper prints it (section, figure, table, equation)
``statement``   what it states, in the book's words (MyST math between dollars)
``ids``         the ledger claims that decide it, separated by semicolons (``mukhoti2020/prop2-closed-form``)
``reason``      why it is not decided, one of :data:`REASONS`: required without ``ids``; beside ``ids`` it says
                what the claims leave undecided
``detail``      free text: which data, which network, what the claims leave out
==============  ==================================================================================================

An item is *decided* when it names at least one claim; the verdicts are the ledger's, read when the page is
built (:func:`coverage_page`), never copied into the table. :func:`read_coverage` reads and checks the table
(:func:`table_problems`), :func:`unknown_ids` lists the claims it names that a ledger lacks, and
:func:`chapter_claim_ids` finds every claim id in the chapters' sources without executing them (so that a test
can check the table without a built book). :func:`calib_book.runner.build_book` writes the page,
``book/coverage.md``, beside the ledger's pages (:mod:`calib_book.pages`).

Part of the book's machinery (:mod:`calib_book`); it reads :mod:`calib_book.claims` and :mod:`calib_book.pages`.
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass
from pathlib import Path

from calib_book import claims as claims_module
from calib_book import pages

__all__ = ["COLUMNS", "KINDS", "REASONS", "COVERED_PAPERS", "COVERAGE_FOLDER", "Item", "parse_coverage",
           "table_problems", "read_coverage", "unknown_ids", "chapter_claim_ids", "coverage_counts",
           "coverage_page"]

#: The table's columns, in the order of each file's header.
COLUMNS = ("paper", "item", "kind", "where", "statement", "ids", "reason", "detail")
#: What an item can be.
KINDS = ("definition", "proposition", "theorem", "corollary", "lemma", "equation", "algorithm", "figure", "table",
         "statement")
#: Why an item is not decided (the ``reason`` column holds the phrase exactly), with what it means on the page.
#:
#: :meta hide-value:
REASONS = {
    "needs the paper's GPU networks": "its evidence is the paper's deep networks (ResNets, Transformers on CIFAR, "
                                      "Tiny-ImageNet, SVHN, WMT), trained at a scale the book's CPU runs do not "
                                      "reach",
    "needs the paper's datasets": "its evidence needs data the book cannot load here (ImageNet, its shifted sets, "
                                  "20 Newsgroups, SST)",
    "chapter 12 (dataset shift), not yet in the ledger": "a statement about calibration under dataset shift, which "
                                                         "chapter 12 is to decide on corrupted Fashion-MNIST",
    "not checkable as stated (no number or direction)": "a definition, a convention or an interpretation: nothing "
                                                        "in it can come out true or false",
    "extraction garbled": "the text of the paper available here lost it (a figure's labels, a table's rows)",
    "not in the text available here": "the paper puts it where the text available here does not reach (an "
                                      "appendix not included, numbers printed only inside a figure)",
    "checkable here, not yet decided": "the book could decide it on CPU (from the paper's text, its printed "
                                       "tables or a toy) and has no claim on it yet",
}
#: The papers the table covers, in the order of the page (that of :data:`calib_book.pages.PAPERS`).
COVERED_PAPERS = ("mukhoti2020", "komisarenko2024", "charoenphakdee2021", "karandikar2021", "zhou2025")
#: The table's folder, relative to the book's root.
COVERAGE_FOLDER = Path("book") / "data" / "coverage"

_ITEM_ID = re.compile(r"^[a-z0-9][a-z0-9.\-]*$")
_CLAIM_ID = re.compile(r"^[a-z0-9]+/[A-Za-z0-9][A-Za-z0-9.\-_]*$")
_CLAIM_CALL = re.compile(r"""\bclaim\(\s*(f?)(["'])(.*?)\2""")
_ASSIGNED = re.compile(r"""^([A-Z_][A-Z0-9_]*)\s*=\s*(["'])([^"'{}]*)\2\s*(?:#.*)?$""", re.M)


@dataclass(frozen=True)
class Item:
    """One row of the coverage table (:data:`COLUMNS`); ``ids`` is a tuple, ``line`` the row's line in its file."""

    paper: str
    item: str
    kind: str
    where: str
    statement: str
    ids: tuple = ()
    reason: str = ""
    detail: str = ""
    source: str = ""
    line: int = 0

    @property
    def decided(self) -> bool:
        """True when at least one ledger claim decides the item."""
        return bool(self.ids)

    @property
    def anchor(self) -> str:
        """The item's HTML id on the page, ``coverage-<paper>-<item>`` (a run of other characters than a-z and 0-9
        made one hyphen)."""
        return "coverage-" + re.sub(r"[^a-z0-9]+", "-", f"{self.paper}-{self.item}".lower()).strip("-")

    def label(self) -> str:
        """``file:line (item)``, how a problem names the row."""
        return f"{self.source or self.paper}:{self.line} ({self.item or 'no item id'})"


def parse_coverage(text: str, source: str = "<text>") -> list[Item]:
    """The rows of one coverage file's text, unchecked (:func:`table_problems` checks them).

    Raises
    ------
    ValueError
        When the header is not :data:`COLUMNS` or a row has another number of cells (the CSV would shift its
        columns): the message names ``source`` and the line.
    """
    reader = csv.reader(io.StringIO(text))
    try:
        header = next(reader)
    except StopIteration:
        raise ValueError(f"{source}: the coverage table is empty; its first line must be the header "
                         f"{','.join(COLUMNS)}.") from None
    if tuple(h.strip() for h in header) != COLUMNS:
        raise ValueError(f"{source}: the header is {','.join(header)!r}, but a coverage table's header is "
                         f"{','.join(COLUMNS)!r}; write those columns in that order.")
    items = []
    for cells in reader:
        line = reader.line_num
        if not any(c.strip() for c in cells):
            continue
        if len(cells) != len(COLUMNS):
            raise ValueError(f"{source}:{line}: the row has {len(cells)} cells but the table has {len(COLUMNS)} "
                             f"columns ({', '.join(COLUMNS)}); quote a cell that holds a comma.")
        row = dict(zip(COLUMNS, (c.strip() for c in cells)))
        ids = tuple(i.strip() for i in row["ids"].split(";") if i.strip())
        items.append(Item(row["paper"], row["item"], row["kind"], row["where"], row["statement"], ids, row["reason"],
                          row["detail"], source, line))
    return items


def table_problems(items: list[Item], paper: str | None = None) -> list[str]:
    """Every problem of form in ``items`` (one paper's rows when ``paper`` is given), one string each naming the
    row, the problem and the fix; empty when the table is sound. A claim id is checked for its form here, and
    against a ledger by :func:`unknown_ids`."""
    problems, seen = [], {}
    for it in items:
        where = it.label()
        if paper is not None and it.paper != paper:
            problems.append(f"{where}: paper {it.paper!r} in the file of {paper!r}; a row belongs in its paper's "
                            f"file, book/data/coverage/{it.paper}.csv.")
        if not _ITEM_ID.match(it.item):
            problems.append(f"{where}: item id {it.item!r} is not a lower-case id of letters, digits, dots and "
                            "hyphens; name it like 'prop2', 'fig3e' or 'sec5.2-ts-under-shift'.")
        elif (it.paper, it.item) in seen:
            problems.append(f"{where}: item id {it.item!r} repeats line {seen[it.paper, it.item]}; give each item "
                            "its own id (merge the rows or rename one).")
        else:
            seen[it.paper, it.item] = it.line
        if it.kind not in KINDS:
            problems.append(f"{where}: kind {it.kind!r} is none of {', '.join(KINDS)}; use one of them.")
        for column in ("where", "statement"):
            if not getattr(it, column):
                fix = "where the paper prints it" if column == "where" else "what the item states"
                problems.append(f"{where}: the {column} column is empty; say {fix}.")
        for column in ("where", "statement", "detail"):
            text = getattr(it, column)
            if "|" in text:
                problems.append(f"{where}: the {column} column holds '|', which splits a Markdown table's cell on "
                                "the page; write \\lvert x \\rvert, \\Vert or 'abs' instead.")
            if text.count("$") % 2:
                problems.append(f"{where}: the {column} column has an unpaired '$'; close its math.")
            elif claims_module.ascii_math(text):
                problems.append(f"{where}: the {column} column writes math as text "
                                f"({', '.join(map(repr, claims_module.ascii_math(text)))}); write it as $...$ "
                                "(e.g. $\\gamma = 3$) or a name as `code`.")
        bad = [i for i in it.ids if not _CLAIM_ID.match(i)]
        if bad:
            problems.append(f"{where}: {', '.join(map(repr, bad))} {'is' if len(bad) == 1 else 'are'} not a claim "
                            "id 'paper/name'; separate ids with semicolons.")
        if len(set(it.ids)) != len(it.ids):
            problems.append(f"{where}: an id is named twice in ids; name each claim once.")
        if it.reason and it.reason not in REASONS:
            problems.append(f"{where}: reason {it.reason!r} is not in the vocabulary; use one of: "
                            + "; ".join(repr(r) for r in REASONS) + " (and say more in the detail column).")
        if not it.ids and not it.reason:
            problems.append(f"{where}: the item names no claim and gives no reason; name the ledger claims that "
                            "decide it, or give the reason it is not decided.")
    return problems


def read_coverage(root: str | Path | None = None, papers=COVERED_PAPERS) -> list[Item]:
    """Every item of the coverage table under ``root`` (the book's root, by default the repository's), in the
    order of ``papers``, checked (:func:`table_problems`).

    Raises
    ------
    ValueError
        When a paper's file is missing, or the table has a problem of form: every problem is named, with its fix.
    """
    folder = Path(root if root is not None else claims_module.repo_root()) / COVERAGE_FOLDER
    items, problems = [], []
    for paper in papers:
        path = folder / f"{paper}.csv"
        if not path.is_file():
            problems.append(f"{path}: missing; every covered paper has its table ({', '.join(papers)}).")
            continue
        mine = parse_coverage(path.read_text(encoding="utf-8"), source=f"{COVERAGE_FOLDER / path.name}")
        problems += table_problems(mine, paper)
        items += mine
    if problems:
        raise ValueError(f"the coverage table has {len(problems)} problem{'s' if len(problems) > 1 else ''}: "
                         + " | ".join(problems))
    return items


def unknown_ids(items: list[Item], known) -> list[str]:
    """The claims ``items`` name that ``known`` (claim ids, or a mapping keyed on them) lacks, one string each
    naming the row: empty when every named claim exists."""
    known = set(known)
    return [f"{it.label()}: names {i!r}, which the ledger does not hold; use the id its chapter records (or give "
            f"a reason instead)." for it in items for i in it.ids if i not in known]


def chapter_claim_ids(root: str | Path | None = None) -> dict[str, str]:
    """Every claim id the chapters' sources record, ``{id: chapter}``, read from their ``claim("...")`` calls
    without executing them: an f-string's ``{NAME}`` is the value of the chapter's ``NAME = "..."`` line (as
    ``PAPER = "mukhoti2020"``).

    Raises
    ------
    ValueError
        When a claim's id is an f-string with a name no line of its chapter assigns a literal to (the id cannot be
        read without running the chapter): write the id as a literal, or assign the name a literal.
    """
    folder = Path(root if root is not None else claims_module.repo_root()) / "chapters"
    found: dict[str, str] = {}
    for source in sorted(folder.glob("*.md")):
        text = source.read_text(encoding="utf-8")
        names = {m.group(1): m.group(3) for m in _ASSIGNED.finditer(text)}
        for is_f, _, claim_id in _CLAIM_CALL.findall(text):
            if is_f:
                try:
                    claim_id = re.sub(r"\{([A-Za-z_]\w*)\}", lambda m: names[m.group(1)], claim_id)
                except KeyError as exc:
                    raise ValueError(f"{source.name}: the claim id f\"{claim_id}\" uses {{{exc.args[0]}}}, which no "
                                     f"line '{exc.args[0]} = \"...\"' of the chapter assigns; write the id as a "
                                     "literal or assign the name a literal.") from None
            if "{" in claim_id:
                raise ValueError(f"{source.name}: the claim id f\"{claim_id}\" holds an expression; write the id as "
                                 "a literal, or as an f-string of names assigned a literal.")
            found.setdefault(claim_id, source.stem)
    return found


def coverage_counts(items: list[Item], records: list) -> dict[str, dict]:
    """Per paper: ``items``, ``decided`` (naming a claim), ``in_part`` (naming claims and giving a reason),
    ``open`` (no claim), ``verdicts`` (the distinct claims named, by their verdict in ``records``) and ``reasons``
    (the open items by reason)."""
    verdict = {r.id: r.verdict for r in records}
    out = {}
    for paper in dict.fromkeys(it.paper for it in items):
        mine = [it for it in items if it.paper == paper]
        named = dict.fromkeys(i for it in mine for i in it.ids)
        out[paper] = {
            "items": len(mine),
            "decided": sum(it.decided for it in mine),
            "in_part": sum(it.decided and bool(it.reason) for it in mine),
            "open": sum(not it.decided for it in mine),
            "verdicts": {v: sum(verdict.get(i) == v for i in named) for v in claims_module.VERDICTS},
            "reasons": {r: sum(not it.decided and it.reason == r for it in mine) for r in REASONS},
        }
    return out


def _claim_cell(record) -> str:
    """A claim as a verdict badge and its id, linked to its line in its chapter."""
    link = (f'<a href="../chapters/{record.chapter}.html#{record.anchor}">{record.id}</a>'
            if record.chapter != "interactive" else record.id)
    return f"{pages._badge(record.verdict)} {link}"


def _item_row(it: Item, by_id: dict) -> str:
    cells = [f'<span id="{it.anchor}"></span>**{pages._md(it.item)}** · {it.kind}', pages._md_with_math(it.where),
             pages._md_with_math(it.statement)]
    decided = "<br>".join(_claim_cell(by_id[i]) for i in it.ids)
    left = ""
    if it.reason:
        left = f"*{'rest open' if it.ids else 'open'}:* {pages._md(it.reason)}"
        if it.detail:
            left += f" ({pages._md_with_math(it.detail)})"
    elif it.detail:
        left = pages._md_with_math(it.detail)
    cells.append("<br>".join(c for c in (decided, left) if c))
    return "| " + " | ".join(cells) + " |"


def coverage_page(records: list, items: list[Item] | None = None, root: str | Path | None = None) -> str:
    """MyST source of the coverage page: per paper, every item of the coverage table with the ledger claims that
    decide it (their verdicts from ``records``, linked to their cells) or the reason it is not decided, and the
    counts (:func:`coverage_counts`).

    Raises
    ------
    ValueError
        When an item names a claim ``records`` lack (a renamed claim, a chapter not executed): the page would
        show a claim the ledger does not hold.
    """
    items = read_coverage(root) if items is None else items
    known = {r.id for r in records}
    missing = unknown_ids(items, known)
    if missing:
        absent = {i for it in items for i in it.ids if i not in known}
        raise ValueError(f"the coverage table names {len(absent)} claim{'s' if len(absent) > 1 else ''} the "
                         f"ledger lacks, in {len(missing)} row{'s' if len(missing) > 1 else ''}: "
                         + " | ".join(missing))
    by_id = {r.id: r for r in records}
    counts = coverage_counts(items, records)
    papers = list(counts)
    total = {k: sum(c[k] for c in counts.values()) for k in ("items", "decided", "in_part", "open")}
    out = ["(coverage)=", "# What each paper states, and where the book decides it", "",
           f"Every checkable item of the five papers (definitions, propositions, theorems, equations, algorithms, "
           f"figures, tables and statements in the text), written from the papers and kept as data, with the "
           f"claims of the {{doc}}`claims ledger <claims>` that decide it and their verdicts as the run that built "
           f"this page recorded them, or the reason it is not decided: **{total['items']} items**, of which "
           f"**{total['decided']}** are decided by at least one claim ({total['in_part']} of them in part) and "
           f"**{total['open']}** are open.", "",
           "An item is *decided* when a claim names it; *in part* when its claims leave something of it open (the "
           "numbers of a table that need the paper's networks, beside the consistency the book checks). A verdict "
           "judges the claim's statement, as the ledger explains; an item can be decided by several claims with "
           "different verdicts (a proposition that holds, and a proof step that does not).", "",
           "**Download** the table: " + ", ".join(
               f"{{download}}`{p}.csv <data/coverage/{p}.csv>`" for p in papers) + " (columns: "
           + ", ".join(COLUMNS) + ").", "",
           "## Counts", "", "Items by paper:", "",
           "| paper | items | decided | in part | open |", "|---|---:|---:|---:|---:|"]
    out += [f"| {{ref}}`{p} <{_paper_anchor(p)}>` | {c['items']} | {c['decided']} | {c['in_part']} | {c['open']} |"
            for p, c in counts.items()]
    out += [f"| **all** | {total['items']} | {total['decided']} | {total['in_part']} | {total['open']} |", "",
            "The claims the items name, by verdict (a claim is counted once per paper, however many items name "
            "it):", ""]
    verdicts = [v for v in claims_module.VERDICTS if any(c["verdicts"][v] for c in counts.values())]
    out += ["| paper | " + " | ".join(verdicts) + " |", "|---|" + "---:|" * len(verdicts)]
    out += [f"| {p} | " + " | ".join(str(c["verdicts"][v]) for v in verdicts) + " |" for p, c in counts.items()]
    out += ["", "The open items, by reason:", "",
            "| reason | meaning | " + " | ".join(papers) + " |", "|---|---|" + "---:|" * len(papers)]
    out += [f"| *{r}* | {m} | " + " | ".join(str(counts[p]["reasons"][r]) for p in papers) + " |"
            for r, m in REASONS.items()]
    for paper in papers:
        mine = [it for it in items if it.paper == paper]
        c = counts[paper]
        named = {i for it in mine for i in it.ids}
        unnamed = [r for r in records if r.paper == paper and r.id not in named]
        out += ["", f"({_paper_anchor(paper)})=", f"## {pages.PAPERS.get(paper, paper)}", "",
                f"{c['items']} items: {c['decided']} decided ({c['in_part']} in part), {c['open']} open.", "",
                "| item | where | what it states | decided by |", "|---|---|---|---|"]
        out += [_item_row(it, by_id) for it in mine]
        if unnamed:
            out += ["", f"Claims filed under this paper that no item names ({len(unnamed)}): "
                    + ", ".join(_claim_cell(r) for r in unnamed) + "."]
    return "\n".join(out) + "\n"


def _paper_anchor(paper: str) -> str:
    return f"coverage-{paper}"
