"""The chapters' text, read without executing anything: what a reader is pointed to must exist in the book.

The book has no inventory of the papers, so a chapter cites the paper's own section, equation, figure or
table, never a code of the notes the book was planned from ("inventory §7 #22", "C11", "P2").
"""

import re

import pytest

from calib_book import runner
from calib_book.claims import claim_anchor, read_ledger

ROOT = runner.repo_root(__file__)
CHAPTERS = sorted((ROOT / "chapters").glob("[0-9][0-9]-*.md"))
NUMBERED = [p for p in CHAPTERS if p.name[:2] != "00"]

#: a planning code: C11, P2, A3 (letter and one or two digits, alone), or "§7 #22"
CODE = re.compile(r"(?<![\w$\\{-])(?:[CPAE]\d{1,2})(?![\w}])|§\s*\d+\s*#\s*\d+")


def _prose(text: str) -> str:
    """The Markdown outside code cells, with inline code and math removed (a dataset called C10 in a table
    row, or a matrix P2 in a formula, is no citation)."""
    out, in_code = [], False
    for line in text.splitlines():
        if line.startswith("```{code-cell}"):
            in_code = True
            continue
        if in_code and line.startswith("```"):
            in_code = False
            continue
        if not in_code:
            out.append(line)
    prose = "\n".join(out)
    prose = re.sub(r"`[^`]*`", "", prose)
    return re.sub(r"\$[^$]*\$", "", prose)


def _claim_strings(text: str) -> list[str]:
    """The ``where=`` and ``evidence=`` strings of the claims a chapter records (what the ledger prints)."""
    found = re.findall(r"""(?:where|evidence)=f?(["'])(.*?)\1""", text)
    return [(q, re.sub(r"\{[^}]*\}", "", s)) for q, s in found]  # an f-string's fields are code


@pytest.mark.parametrize("path", CHAPTERS + sorted((ROOT / "calib").rglob("*.py")), ids=lambda p: p.name)
def test_no_inventory_is_cited(path):
    text = path.read_text()
    assert "inventory" not in text.lower(), f"{path.name} cites an inventory the book does not have"


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_no_planning_codes(path):
    text = path.read_text()
    assert not CODE.findall(_prose(text)), CODE.findall(_prose(text))
    for _, s in _claim_strings(text):
        assert not CODE.search(s), s


def test_the_code_pattern():
    assert CODE.findall("see C11 and P2, or §7 #22") == ["C11", "P2", "§7 #22"]
    assert not CODE.findall("Sec. 4.2, Eq. 10; Table 2; App. C.3; Fig. 4(a); CIFAR-10; $P_2$")


@pytest.mark.parametrize("path", NUMBERED, ids=lambda p: p.stem)
def test_every_chapter_closes_with_what_it_establishes(path):
    """A section "What this chapter establishes", the last before the exercises, whose bullets link claims."""
    text = path.read_text()
    headings = re.findall(r"^## (.+)$", text, flags=re.M)
    assert "What this chapter establishes" in headings, path.name
    i = headings.index("What this chapter establishes")
    assert headings[i + 1:] in ([], ["Exercises"]), headings[i:]
    section = text.split("## What this chapter establishes", 1)[1].split("\n## ", 1)[0]
    assert re.search(r'href="#claim-[a-z0-9-]+"', section), "the summary links no claim"
    ledger = ROOT / "_build" / "claims.jsonl"
    if ledger.is_file():  # after `calib book run`: every link goes to a claim this chapter records
        anchors = {claim_anchor(r.id) for r in read_ledger(ledger) if r.chapter == path.stem}
        if anchors:
            missing = set(re.findall(r'href="#(claim-[a-z0-9-]+)"', section)) - anchors
            assert not missing, f"{path.name} links claims it does not record: {sorted(missing)}"


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_every_exercise_has_a_title(path):
    untitled = [n for n, line in enumerate(path.read_text().splitlines(), 1) if line.strip() == "```{exercise}"]
    assert not untitled, f"{path.name}: exercises without a title at lines {untitled}"


def test_bibliography_is_author_year():
    """The reference list is labelled author-year, like the citations, and every entry links somewhere when it can."""
    import sys

    from pybtex.database import parse_file
    from pybtex.plugin import find_plugin

    sys.path.insert(0, str(ROOT / "book" / "_ext"))
    import authoryear_bibliography

    authoryear_bibliography.setup(None)
    db = parse_file(ROOT / "book" / "references.bib")
    labels = {e.key: e.label for e in find_plugin("pybtex.style.formatting", "authoryear")().format_bibliography(db)}
    assert labels["mukhoti2020"] == "Mukhoti et al., 2020"
    assert labels["komisarenko2024"] == "Komisarenko and Kull, 2024"
    assert labels["brier1950"] == "Brier, 1950"
    assert len(set(labels.values())) == len(labels)
    for key in ("mukhoti2020", "charoenphakdee2021", "karandikar2021", "zhou2025"):
        assert "url" in db.entries[key].fields or "doi" in db.entries[key].fields, key
    assert "bibtex_default_style: authoryear" in (ROOT / "_config.yml").read_text()
