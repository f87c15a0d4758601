"""The runner on a tiny book made by the test: parameters, ledger, timings, and failures that name the cell."""

import json
import textwrap

import pytest

from calib import book
from calib.claims import Claim

HEADER = textwrap.dedent("""\
    ---
    jupytext:
      text_representation:
        extension: .md
        format_name: myst
        format_version: 0.13
    kernelspec:
      display_name: Python 3
      language: python
      name: python3
    ---
    """)


def _chapter(body: str) -> str:
    return HEADER + textwrap.dedent("""
        # A chapter

        ```{code-cell} ipython3
        :tags: [parameters]
        profile = "quick"
        device = "auto"
        seed = 0
        ```
        """) + textwrap.dedent(body)


@pytest.fixture
def tiny_book(tmp_path):
    (tmp_path / "calib").mkdir()
    (tmp_path / "book").mkdir()
    (tmp_path / "chapters").mkdir()
    (tmp_path / "_config.yml").write_text("title: tiny\n")
    (tmp_path / "_toc.yml").write_text(textwrap.dedent("""\
        format: jb-book
        root: book/intro
        chapters:
          - file: chapters/01-good
          - file: chapters/02-bad
        """))
    (tmp_path / "book" / "intro.md").write_text("# Intro\n")
    (tmp_path / "chapters" / "01-good.md").write_text(_chapter("""
        ```{code-cell} ipython3
        from calib.claims import claim
        claim("paper/seed", "the seed parameter arrives", passed=seed == 7, evidence=f"seed={seed}, profile={profile}")
        ```
        """))
    (tmp_path / "chapters" / "02-bad.md").write_text(_chapter("""
        ```{code-cell} ipython3
        x = 1
        ```

        ```{code-cell} ipython3
        from calib.claims import claim
        claim("paper/false", "one is two", passed=x == 2, evidence=f"x={x}")
        ```
        """))
    return tmp_path


def test_toc_order(tiny_book):
    assert book.chapters_in_toc(tiny_book) == ["01-good", "02-bad"]


def test_run_injects_parameters_records_claims_and_names_the_failing_cell(tiny_book):
    with pytest.raises(book.ChapterError) as info:
        book.run_book(tiny_book, only=None, parameters={"seed": 7}, keep_going=True)
    message = str(info.value)
    assert "chapter 02-bad failed in cell" in message and "ClaimError" in message and "paper/false" in message
    executed = tiny_book / "_build" / "src" / "chapters" / "01-good.ipynb"
    nb = json.loads(executed.read_text())
    assert any("injected-parameters" in c["metadata"].get("tags", []) for c in nb["cells"])
    lines = [json.loads(line) for line in (tiny_book / "_build" / "claims.jsonl").read_text().splitlines()]
    assert [(r["id"], r["chapter"], r["passed"]) for r in lines] == [("paper/seed", "01-good", True),
                                                                    ("paper/false", "02-bad", False)]
    assert "seed=7, profile=quick" in lines[0]["evidence"]
    timings = json.loads((tiny_book / "_build" / "timings.json").read_text())
    assert timings["01-good"]["ok"] and not timings["02-bad"]["ok"]


def test_rerunning_one_chapter_replaces_only_its_records(tiny_book):
    book.run_book(tiny_book, only=["01-good"], parameters={"seed": 7})
    book.run_book(tiny_book, only=["01-good"], parameters={"seed": 7})
    lines = (tiny_book / "_build" / "claims.jsonl").read_text().splitlines()
    assert len(lines) == 1


def test_unknown_chapter_and_profile_are_errors(tiny_book):
    with pytest.raises(ValueError, match="not a chapter"):
        book.run_book(tiny_book, only=["03-missing"])
    with pytest.raises(ValueError, match="profile"):
        book.run_chapter(tiny_book, "01-good", profile="huge")


def test_build_refuses_unexecuted_chapters(tiny_book):
    with pytest.raises(book.ChapterError, match="not executed yet"):
        book.build_book(tiny_book)


def _rec(**kw):
    base = dict(id="mukhoti2020/x", paper="mukhoti2020", where="§4", statement="a | b * c", verdict="holds",
                passed=True, evidence="err 1e-16", chapter="02-focal-gradient")
    base.update(kw)
    return Claim(**base)


SCALE = dict(data="Fashion-MNIST 10k", model="MLP", epochs=20, seeds=3, n=10000)
RECORDS = [
    _rec(),
    _rec(id="mukhoti2020/y", verdict="false", quote="p0 = 0.5", correction="p0 = 1/e"),
    _rec(id="mukhoti2020/t", verdict="typo", quote="Eq. 3", correction="Eq. 4"),
    _rec(id="zhou2025/z", paper="zhou2025", verdict="imprecise", quote="about 4", correction="3.59",
         chapter="09-reweighted-risk"),
    _rec(id="zhou2025/code", paper="zhou2025", verdict="false", about="code", correction="bins by centre",
         chapter="09-reweighted-risk"),
    _rec(id="zhou2025/book", paper="zhou2025", about="book", chapter="09-reweighted-risk"),
    _rec(id="mukhoti2020/nr", verdict="not-reproduced", quote="rises", scale=SCALE),
    _rec(id="mukhoti2020/inc", verdict="inconclusive", quote="rises", scale=SCALE),
    _rec(id="mukhoti2020/u", verdict="untested", passed=None, quote="on CIFAR",
         scale={**SCALE, "command": "calib train --data cifar10 --model resnet50"}),
]


def test_ledger_page_explains_the_vocabulary_counts_and_filters():
    ledger = book.ledger_page(RECORDS, ["02-focal-gradient", "09-reweighted-risk"])
    assert "**9 claims**" in ledger and "**8** were confirmed" in ledger and "**1** are untested" in ledger
    assert "a \\| b \\* c" in ledger
    assert all(f"| *{v}* |" in ledger for v in book.VERDICT_MEANINGS)
    assert "[claim ok]" in ledger                              # what the line under a cell means
    assert ledger.index("### Mukhoti") < ledger.index("### Zhou")
    # the summary table: paper x verdict, each count a link that sets the filter
    row = next(line for line in ledger.splitlines() if line.startswith("| mukhoti2020 |"))
    header = next(line for line in ledger.splitlines() if line.startswith("| paper |"))
    cols = [c.strip() for c in header.strip("|").split("|")]
    cells = dict(zip(cols, (c.strip() for c in row.strip("|").split("|"))))
    assert cells["false"] == '<a href="?paper=mukhoti2020&verdict=false#claims-list">1</a>'
    assert cells["imprecise"] == "0" and cells["total"].endswith(">6</a>")
    assert 'id="claim-filter-paper"' in ledger and '<option value="untested">' in ledger
    assert "```{container} claim-entry paper-zhou2025 verdict-imprecise about-paper" in ledger
    assert '<a href="../chapters/09-reweighted-risk.html#claim-zhou2025-z">' in ledger
    assert "`calib train --data cifar10 --model resnet50`" in ledger


def test_errata_lists_only_the_papers_errors_false_first():
    errata = book.errata_page(RECORDS)
    for absent in ("mukhoti2020/x", "zhou2025/code", "zhou2025/book", "mukhoti2020/nr", "mukhoti2020/u"):
        assert absent not in errata
    assert errata.index("## False") < errata.index("## Imprecise") < errata.index("## Typos")
    assert "> p0 = 0.5" in errata and "p0 = 1/e" in errata
    assert "3 in all (1 false, 1 imprecise, 1 typo)" in errata
    assert '<a href="../chapters/02-focal-gradient.html#claim-mukhoti2020-y">' in errata


def test_reproduction_and_released_code_pages():
    repro = book.reproduction_page(RECORDS)
    assert repro.index("mukhoti2020/nr") < repro.index("mukhoti2020/inc") < repro.index("mukhoti2020/u")
    assert "seeds: 3" in repro and "N: 10000" in repro and "calib train --data cifar10" in repro
    assert "mukhoti2020/y" not in repro
    assert "{doc}`chapter 11 </chapters/11-paper-tables>`" in repro           # the table-by-table summary
    code = book.released_code_page(RECORDS)
    assert "zhou2025/code" in code and "(1 note)" in code
    assert "mukhoti2020/y" not in code


def test_markdown_table_escapes_pipes_and_glue_number_keeps_numbers():
    table = book.markdown_table(["a", "b|c"], [[1, "x|y"], [2.5, "z"]])
    lines = table.data.splitlines()
    assert lines[0] == "| a | b\\|c |" and lines[1] == "|---|---|" and lines[2] == "| 1 | x\\|y |"
    assert len(lines) == 4


def test_quotes_keep_their_math_and_escape_the_rest():
    assert book._md_with_math(r"show $\max_s f'(s) < c$ for *all* s") == r"show $\max_s f'(s) < c$ for \*all\* s"
    assert book._md_with_math("costs $5 or more") == r"costs \$5 or more"      # an unpaired dollar stays text
