"""The back-matter pages built from the ledger: ledger, errata, reproduction, released code (calib_book.pages)."""

import re
from pathlib import Path

import pytest

from calib_book import pages
from calib_book.claims import Claim


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
    ledger = pages.ledger_page(RECORDS, ["02-focal-gradient", "09-reweighted-risk"])
    assert "**9 claims**" in ledger and "**8** were confirmed" in ledger and "**1** are untested" in ledger
    assert "a \\| b \\* c" in ledger
    assert all(f"| *{v}* |" in ledger for v in pages.VERDICT_MEANINGS)
    assert "the computation confirms the verdict" in ledger and "[claim ok]" not in ledger    # the block under a cell
    assert '<span class="claim-badge verdict-imprecise">imprecise</span> **zhou2025/z**' in ledger
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
    errata = pages.errata_page(RECORDS)
    for absent in ("mukhoti2020/x", "zhou2025/code", "zhou2025/book", "mukhoti2020/nr", "mukhoti2020/u"):
        assert absent not in errata
    assert errata.index("## False") < errata.index("## Imprecise") < errata.index("## Typos")
    assert "> p0 = 0.5" in errata and "p0 = 1/e" in errata
    assert "3 in all (1 false, 1 imprecise, 1 typo)" in errata
    assert '<a href="../chapters/02-focal-gradient.html#claim-mukhoti2020-y">' in errata


def test_reproduction_and_released_code_pages():
    repro = pages.reproduction_page(RECORDS)
    assert repro.index("mukhoti2020/nr") < repro.index("mukhoti2020/inc") < repro.index("mukhoti2020/u")
    assert "seeds: 3" in repro and "N: 10000" in repro and "calib train --data cifar10" in repro
    assert "mukhoti2020/y" not in repro
    assert "{doc}`chapter 11 </chapters/11-paper-tables>`" in repro           # the table-by-table summary
    code = pages.released_code_page(RECORDS)
    assert "zhou2025/code" in code and "(1 note)" in code
    assert "mukhoti2020/y" not in code


def test_quotes_keep_their_math_and_escape_the_rest():
    assert pages._md_with_math(r"show $\max_s f'(s) < c$ for *all* s") == r"show $\max_s f'(s) < c$ for \*all\* s"
    assert pages._md_with_math("costs $5 or more") == r"costs \$5 or more"      # an unpaired dollar stays text


def test_remarks_and_corrections_keep_their_math_too():
    rec = _rec(id="komisarenko2024/r", verdict="imprecise", quote="0.96 \\pm 0.00",
               correction="s.d. 0.004 at $\\gamma_{ev} = 0.05$",
               remark="row + $\\gamma_{ev} = 0.05$ of Table 1; a lone $ stays text")
    for page in (pages.ledger_page([rec], ["02-focal-gradient"]), pages.errata_page([rec])):
        assert "at $\\gamma_{ev} = 0.05$" in page                 # paired dollars: math
        assert r"row + \$\\gamma" in page                        # an unpaired dollar in the text: all escaped


def test_status_page_and_unlinked_summary():
    timings = {"02-focal-gradient": {"seconds": 11.04, "claims": 7, "ok": True, "profile": "quick",
                                     "finished": "2025-01-01 12:00:00"}}
    page = pages.status_page(timings, ["01-measuring-calibration", "02-focal-gradient"])
    assert "| {doc}`/chapters/02-focal-gradient` | quick | 11.0 | 7 | 2025-01-01 12:00:00 |" in page
    assert "01-measuring-calibration" not in page and "| total | | 11.0 | | |" in page
    table = pages.summary_table(RECORDS, link=False)
    assert table[0] == "| paper | holds | imprecise | typo | false | not-reproduced | inconclusive | untested | total |"
    assert table[-1] == "| **all** | 2 | 1 | 1 | 2 | 1 | 1 | 1 | 9 |"


def test_every_entry_has_its_badge_statement_math_and_evidence_block():
    rec = _rec(id="komisarenko2024/p5", paper="komisarenko2024", verdict="false",
               statement="Prop. 5: $\\hat p_j \\ge q_j$",
               quote="Then $\\hat p_\\gamma(\\mathbf q)_j \\ge q_j$", correction="true for $n \\le 3$",
               evidence="p_hat_j - q_j = -0.01 < 0 at n = 4")
    for page in (pages.ledger_page([rec], ["02-focal-gradient"]), pages.errata_page([rec])):
        assert '<span class="claim-badge verdict-false">false</span>' in page
        assert "\nProp. 5: $\\hat p_j \\ge q_j$\n" in page                     # the statement's math kept
        assert "*What holds:* true for $n \\le 3$" in page
        assert ('<p class="claim-evidence"><span class="claim-label">Evidence:</span> p_hat_j - q_j = -0.01 &lt; 0'
                in page)


@pytest.mark.parametrize("quote, shown", [
    # issue 26: a formula the paper's text gives as TeX without dollars is one formula, whole
    (r"\text{CE}_{\rho}(f)\geq\begin{cases}k\cdot\operatorname{cwECE}_{\rho}(f),\\ \operatorname{ECE}(f),"
     r"\end{cases}\geq 0",
     r"$\text{CE}_{\rho}(f)\geq\begin{cases}k\cdot\operatorname{cwECE}_{\rho}(f),\\ \operatorname{ECE}(f),"
     r"\end{cases}\geq 0$"),
    (r"\forall s \geq 0 : \frac{1}{1 + e^{-s}} < FC(s)", r"$\forall s \geq 0 : \frac{1}{1 + e^{-s}} < FC(s)$"),
    ("Apart from this modification, ff^{\\prime} is identical to ff.",
     "Apart from this modification, $ff^{\\prime}$ is identical to ff."),
    (r"+ $\gamma_{ev} = 0.25$ 77.5 \pm 0.3", r"+ $\gamma_{ev} = 0.25$ $77.5 \pm 0.3$"),
    ("on the *test* set", r"on the \*test\* set"),                             # no TeX: text, escaped
])
def test_a_quote_s_tex_is_shown_as_math_never_cut(quote, shown):
    assert pages._quote_md(quote) == shown


def test_a_long_statement_is_never_cut():
    long = "a " * 400 + "$\\begin{cases} x \\\\ y \\end{cases}$"
    assert pages._md_with_math(long).endswith("$\\begin{cases} x \\\\ y \\end{cases}$")


def test_the_ledger_links_claims_jsonl_where_the_build_keeps_it(tmp_path):
    ledger = pages.ledger_page(RECORDS, ["02-focal-gradient"])
    assert "{download}`claims.jsonl <../../claims.jsonl>`" in ledger
    # the ledger page is _build/src/book/claims.md; the link resolves to _build/claims.jsonl, the runner's ledger
    page = tmp_path / "_build" / "src" / "book" / "claims.md"
    assert (page.parent / pages.CLAIMS_DOWNLOAD).resolve() == (tmp_path / "_build" / "claims.jsonl").resolve()


def test_csv_text_quotes_cells_and_refuses_a_ragged_row():
    text = pages.csv_text(["loss", "note"], [["fl-3", "a, b"], ["ce", 'say "x"']])
    assert text == 'loss,note\nfl-3,"a, b"\nce,"say ""x"""\n'
    with pytest.raises(ValueError, match=r"row 1 has 1 cells but the header has 2"):
        pages.csv_text(["loss", "note"], [["fl-3", "x"], ["ce"]])


def test_a_chapter_download_lands_beside_its_executed_notebook(tmp_path):
    path = pages.write_chapter_download("10-benchmark-main-table.csv", "a,b\n1,2\n", root=tmp_path)
    assert path == tmp_path / "_build" / "src" / "chapters" / "10-benchmark-main-table.csv"
    assert path.read_text() == "a,b\n1,2\n"
    with pytest.raises(ValueError, match="plain file name"):
        pages.write_chapter_download("../escape.csv", "x", root=tmp_path)


def test_every_download_a_chapter_links_exists_in_the_staged_book():
    """Chapter 11 links the published tables, chapter 10 the CSV it writes, the intro points at both."""
    from calib_book import runner

    root = runner.repo_root(__file__)
    links = {}
    for chapter in ("10-benchmark", "11-paper-tables"):
        source = (root / "chapters" / f"{chapter}.md").read_text(encoding="utf-8")
        links[chapter] = re.findall(r"\{download\}`(?:[^`<]*<)?([^`>]+)>?`", source)
    published = sorted(p.name for p in (root / "book" / "data" / "published").glob("*.csv"))
    assert sorted(Path(p).name for p in links["11-paper-tables"]) == published and len(published) == 10
    for target in links["11-paper-tables"]:            # relative to the chapter, in the repository as when staged
        assert (root / "chapters" / target).is_file(), target
    assert links["10-benchmark"] == ["10-benchmark-main-table.csv"]
    source = (root / "chapters" / "10-benchmark.md").read_text(encoding="utf-8")
    assert 'write_chapter_download("10-benchmark-main-table.csv"' in source


def test_an_empirical_entry_shows_its_premise_with_math_on_the_ledger_and_reproduction_pages():
    rec = _rec(id="mukhoti2020/bench", verdict="untested", passed=None, quote="lowest", scale={**SCALE, "command": "c"},
               statement="FLSD-53 has the lowest ECE", premise="$T_{CE} \\ge 1.5$ (measured 1.25 [1.10, 1.40])",
               premise_holds=False)
    for page in (pages.ledger_page([rec], ["02-focal-gradient"]), pages.reproduction_page([rec])):
        assert ('<p class="claim-premise"><span class="claim-label">Premise:</span> <span class="math notranslate '
                'nohighlight">\\(T_{CE} \\ge 1.5\\)</span> (measured 1.25 [1.10, 1.40]) (fails here)</p>') in page
    held = _rec(id="mukhoti2020/b2", verdict="inconclusive", quote="q", scale=SCALE, premise="T_CE = 2.5 >= 1.5",
                premise_holds=True)
    assert "Premise:</span> T_CE = 2.5 &gt;= 1.5 (holds here)</p>" in pages.ledger_page([held], ["02-focal-gradient"])
    assert "Premise:" not in pages.ledger_page([_rec()], ["02-focal-gradient"])
