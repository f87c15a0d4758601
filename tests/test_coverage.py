"""The coverage table (book/data/coverage/) and its page, "What each paper states, and where the book decides it"
(calib_book.coverage).

The table is checked against the claim ids the chapters' sources record (calib_book.coverage.chapter_claim_ids),
which needs no built book: a test file other than test_chapters.py cannot rely on running after the build. The
page is rendered here from records made of those ids; the verdicts it shows come from the ledger when the book is
built (calib_book.runner.build_book refuses a table that names a claim the ledger lacks).
"""

import re
from pathlib import Path

import pytest
import yaml

from calib_book import coverage, runner
from calib_book.claims import Claim

ROOT = Path(__file__).resolve().parents[1]

HEADER = ",".join(coverage.COLUMNS)
GOOD = [
    "mukhoti2020,prop2,proposition,\"Sec. 4, Prop. 2\",\"$g(p_0, \\gamma^*) = 1$\",mukhoti2020/prop2-closed-form,,",
    "mukhoti2020,table3,table,Table 3,BLEU and ECE of a Transformer,,needs the paper's GPU networks,WMT 2014",
]


def _table(*rows: str) -> list:
    return coverage.parse_coverage("\n".join([HEADER, *rows]) + "\n", source="mukhoti2020.csv")


@pytest.fixture(scope="module")
def items():
    return coverage.read_coverage(ROOT)


@pytest.fixture(scope="module")
def chapter_ids():
    return coverage.chapter_claim_ids(ROOT)


def test_every_claim_the_table_names_is_recorded_by_a_chapter(items, chapter_ids):
    assert coverage.unknown_ids(items, chapter_ids) == []
    named = {i for it in items for i in it.ids}
    assert len(named) > 200 and {"mukhoti2020/prop2-closed-form", "komisarenko2024/prop5", "zhou2025/prop46-beta",
                                 "charoenphakdee2021/thm11-recovery", "karandikar2021/app-h-proper-lb"} <= named


def test_every_item_has_claims_or_a_reason_from_the_vocabulary_and_its_own_id(items):
    assert coverage.table_problems(items) == []
    assert all(it.ids or it.reason for it in items)
    assert {it.reason for it in items} - {""} <= set(coverage.REASONS)
    keys = [(it.paper, it.item) for it in items]
    assert len(keys) == len(set(keys))
    # every paper is covered, by items of many kinds, from its own file
    by_paper = {p: [it for it in items if it.paper == p] for p in coverage.COVERED_PAPERS}
    assert all(len(mine) >= 40 for mine in by_paper.values()), {p: len(m) for p, m in by_paper.items()}
    assert all(Path(it.source).stem == it.paper for it in items)
    assert {it.kind for it in items} == set(coverage.KINDS)
    # the items about dataset shift name chapter 12's claims; none waits for the chapter any more
    assert not [it.item for it in items if it.reason == "chapter 12 (dataset shift), not yet in the ledger"]
    shift = [it for it in items if any("/shift-" in i for i in it.ids)]
    assert {it.paper for it in shift} == {"karandikar2021"} and len(shift) >= 6


def test_the_chapters_claim_ids_are_read_from_their_sources(chapter_ids, tmp_path):
    assert chapter_ids["mukhoti2020/prop2-closed-form"] == "03-choosing-gamma"      # an f-string of PAPER
    assert chapter_ids["book/ch10-regime-chosen-on-validation"] == "10-benchmark"     # a literal id
    assert not any("{" in i for i in chapter_ids)
    (tmp_path / "chapters").mkdir()
    chapter = tmp_path / "chapters" / "01-x.md"
    chapter.write_text('PAPER = "p1"\nclaim(f"{PAPER}/a", "s")\nclaim("q2/b",\n      "t")\n')
    assert coverage.chapter_claim_ids(tmp_path) == {"p1/a": "01-x", "q2/b": "01-x"}
    chapter.write_text('claim(f"{OTHER}/a", "s")\n')                   # the control: a name no line assigns
    with pytest.raises(ValueError, match=r"01-x.md: the claim id f\"\{OTHER\}/a\" uses \{OTHER\}, which no line"):
        coverage.chapter_claim_ids(tmp_path)


def test_a_sound_table_passes_and_each_broken_one_fails_its_check():
    good = _table(*GOOD)
    assert coverage.table_problems(good, "mukhoti2020") == []
    assert good[0].ids == ("mukhoti2020/prop2-closed-form",) and good[1].decided is False
    assert coverage.unknown_ids(good, {"mukhoti2020/prop2-closed-form"}) == []
    broken = {
        "names no claim and gives no reason": GOOD[1].replace("needs the paper's GPU networks", ""),
        "is not in the vocabulary": GOOD[1].replace("needs the paper's GPU networks", "too hard"),
        "repeats line 2": GOOD[1].replace("table3", "prop2"),
        "kind 'lemma2' is none of": GOOD[1].replace(",table,", ",lemma2,"),
        "holds '|'": GOOD[1].replace("BLEU and", "BLEU | and"),
        "unpaired '$'": GOOD[1].replace("BLEU", "$BLEU"),
        "writes math as text ('gamma')": GOOD[1].replace("BLEU and", "BLEU at gamma = 3 and"),    # issue 47, item 3
        "is not a claim id 'paper/name'": GOOD[1].replace(",,needs", ",prop2-closed-form,needs"),
        "in the file of 'mukhoti2020'": GOOD[1].replace("mukhoti2020,table3", "zhou2025,table3"),
        "is not a lower-case id": GOOD[1].replace("table3", "Table 3"),
        "the where column is empty": GOOD[1].replace("Table 3,BLEU", ",BLEU"),
    }
    for problem, row in broken.items():
        problems = coverage.table_problems(_table(GOOD[0], row), "mukhoti2020")
        assert len(problems) == 1 and problem in problems[0] and problems[0].startswith("mukhoti2020.csv:3 ("), \
            (problem, problems)
    # a claim the ledger does not hold
    assert coverage.unknown_ids(good, {"mukhoti2020/prop2"}) == [
        "mukhoti2020.csv:2 (prop2): names 'mukhoti2020/prop2-closed-form', which the ledger does not hold; use the "
        "id its chapter records (or give a reason instead)."]
    # a file whose columns or cells are off
    with pytest.raises(ValueError, match="the header is .*write those columns in that order"):
        coverage.parse_coverage("paper,item\nx,y\n", "x.csv")
    with pytest.raises(ValueError, match=r"x.csv:2: the row has 9 cells but the table has 8 columns"):
        coverage.parse_coverage(HEADER + "\n" + GOOD[1] + ",extra\n", "x.csv")


def test_reading_the_table_refuses_a_broken_or_missing_file(tmp_path):
    folder = tmp_path / coverage.COVERAGE_FOLDER
    folder.mkdir(parents=True)
    (folder / "mukhoti2020.csv").write_text("\n".join([HEADER, *GOOD]) + "\n")
    assert [it.item for it in coverage.read_coverage(tmp_path, papers=("mukhoti2020",))] == ["prop2", "table3"]
    with pytest.raises(ValueError, match=r"zhou2025.csv: missing"):
        coverage.read_coverage(tmp_path, papers=("mukhoti2020", "zhou2025"))
    (folder / "mukhoti2020.csv").write_text("\n".join([HEADER, GOOD[0], GOOD[1].replace("needs the paper's GPU "
                                                                                           "networks", "")]) + "\n")
    with pytest.raises(ValueError, match=r"1 problem: .*mukhoti2020.csv:3 \(table3\): the item names no claim"):
        coverage.read_coverage(tmp_path, papers=("mukhoti2020",))


def _records(chapter_ids, verdict_of=None):
    verdict_of = verdict_of or {}
    return [Claim(id=i, paper=i.split("/")[0], where="", statement="s", verdict=verdict_of.get(i, "holds"),
                  passed=True, evidence="", chapter=chapter) for i, chapter in chapter_ids.items()]


def _row_cells(line: str) -> list:
    """A Markdown table row's cells (a '|' escaped as '\\|' stays in its cell)."""
    return [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]


def test_the_page_shows_each_item_with_its_claims_verdicts_and_counts(items, chapter_ids):
    records = _records(chapter_ids, {"komisarenko2024/prop5": "false", "komisarenko2024/prop5-concavity": "false"})
    page = coverage.coverage_page(records, items)
    lines = page.splitlines()
    assert lines[:2] == ["(coverage)=", "# What each paper states, and where the book decides it"]
    # the counts: items, decided, in part and open per paper, as the table says
    counts = coverage.coverage_counts(items, records)
    for paper in coverage.COVERED_PAPERS:
        row = next(line for line in lines if line.startswith(f"| {{ref}}`{paper} <coverage-{paper}>`"))
        mine = [it for it in items if it.paper == paper]
        expected = [len(mine), sum(bool(it.ids) for it in mine), sum(bool(it.ids and it.reason) for it in mine),
                    sum(not it.ids for it in mine)]
        assert [int(c) for c in _row_cells(row)[1:]] == expected == [counts[paper][k] for k in
                                                                    ("items", "decided", "in_part", "open")]
        verdicts = _row_cells(next(line for line in lines if line.startswith(f"| {paper} |")))
        assert sum(map(int, verdicts[1:])) == len({i for it in mine for i in it.ids})
    assert counts["komisarenko2024"]["verdicts"]["false"] == 2
    # every item is a row of its paper's table, with its anchor and four cells
    rows = [line for line in lines if line.startswith('| <span id="coverage-')]
    assert len(rows) == len(items)
    assert all(len(_row_cells(r)) == 4 for r in rows)
    assert all(r.count("$") % 2 == 0 for r in rows)
    prop5 = next(r for r in rows if 'id="coverage-komisarenko2024-prop5"' in r)
    assert ('<span class="claim-badge verdict-false">false</span> <a href="../chapters/07-focal-calibration-map.html'
            '#claim-komisarenko2024-prop5">komisarenko2024/prop5</a>') in prop5
    open_row = next(r for r in rows if 'id="coverage-mukhoti2020-fig5"' in r)
    assert _row_cells(open_row)[3].startswith("*open:* needs the paper's GPU networks (")
    partly = next(r for r in rows if 'id="coverage-mukhoti2020-table1"' in r)
    assert "*rest open:* needs the paper's GPU networks" in partly and "verdict-holds" in partly
    assert page.index("## Mukhoti") < page.index("## Komisarenko") < page.index("## Zhou")
    assert "{download}`zhou2025.csv <data/coverage/zhou2025.csv>`" in page


def test_the_page_refuses_a_table_that_names_a_claim_the_ledger_lacks(items, chapter_ids):
    records = [r for r in _records(chapter_ids) if r.id != "mukhoti2020/prop2-closed-form"]
    with pytest.raises(ValueError, match=r"names 1 claim the ledger lacks, in 3 rows: .*mukhoti2020.csv:\d+ \(prop2\): "
                                         r"names 'mukhoti2020/prop2-closed-form'"):
        coverage.coverage_page(records, items)
    records = [r for r in _records(chapter_ids) if r.id != "zhou2025/complexity-claim"]
    with pytest.raises(ValueError, match=r"names 1 claim the ledger lacks, in 1 row: book/data/coverage/zhou2025.csv:"
                                         r"\d+ \(abstract-complexity\): names 'zhou2025/complexity-claim', which"):
        coverage.coverage_page(records, items)


def test_the_page_lists_the_claims_of_a_paper_no_item_names(items, chapter_ids):
    extra = Claim(id="zhou2025/new-claim", paper="zhou2025", where="", statement="s", verdict="holds", passed=True,
                  evidence="", chapter="09-reweighted-risk")
    page = coverage.coverage_page([*_records(chapter_ids), extra], items)
    assert ("Claims filed under this paper that no item names (1): <span class=\"claim-badge verdict-holds\">holds"
            "</span> <a href=\"../chapters/09-reweighted-risk.html#claim-zhou2025-new-claim\">zhou2025/new-claim</a>."
            ) in page


def test_the_build_writes_the_page_into_the_back_matter():
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    back = next(part for part in toc["parts"] if part["caption"] == "Back matter")
    files = [c["file"] for c in back["chapters"]]
    assert files.index("book/coverage") == files.index("book/reproduction") + 1
    assert "coverage.md" in runner.GENERATED_PAGES            # staging keeps the page the build writes
    assert not (ROOT / "book" / "coverage.md").exists()       # generated, never a source
