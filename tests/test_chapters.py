"""Execute every chapter of _toc.yml once (quick profile) through the book runner, then build the book.

This is the same runner as `make book`; no chapter runs twice. The ledger must hold no failed claim and
every chapter must record at least one claim.
"""

import pytest

from calib import book
from calib.claims import read_ledger

ROOT = book.repo_root(__file__)


@pytest.mark.chapters
def test_every_chapter_runs_and_the_book_builds():
    names = book.chapters_in_toc(ROOT)
    runs = book.run_book(ROOT, profile="quick")
    assert [r.name for r in runs] == names
    records = read_ledger(ROOT / "_build" / "claims.jsonl")
    failed = [r.id for r in records if not r.passed]
    assert not failed, f"claims not confirmed: {failed}"
    silent = [n for n in names if not any(r.chapter == n for r in records)]
    assert not silent, f"chapters that record no claim: {silent}"
    index = book.build_book(ROOT)
    assert index.is_file()
    html = ROOT / "_build" / "html"
    for page in ["book/claims.html", "book/errata.html", *(f"chapters/{n}.html" for n in names)]:
        assert (html / page).is_file(), page
    ledger_html = (html / "book" / "claims.html").read_text()
    assert all(r.id in ledger_html for r in records)
