import json

import numpy as np
import pytest

from calib import claims
from calib.claims import ClaimError, claim, drop_chapter, read_ledger


@pytest.fixture
def ledger(tmp_path, monkeypatch):
    path = tmp_path / "claims.jsonl"
    monkeypatch.setenv("CALIB_LEDGER", str(path))
    monkeypatch.setenv("CALIB_CHAPTER", "99-test")
    return path


def test_claim_appends_one_json_object_with_the_contract_keys(ledger):
    err = abs(np.exp(1.0) - 2.718281828459045)
    rec = claim("paper/x", "e is e", passed=err < 1e-15, evidence=f"err {err:.1e}", where="§1")
    data = [json.loads(line) for line in ledger.read_text().splitlines()]
    assert len(data) == 1
    assert {"id", "paper", "where", "statement", "verdict", "passed", "evidence", "chapter"} <= set(data[0])
    assert data[0]["paper"] == "paper" and data[0]["chapter"] == "99-test" and data[0]["passed"] is True
    assert rec.verdict == "holds"


def test_a_claim_that_is_not_confirmed_raises_but_is_still_recorded(ledger):
    with pytest.raises(ClaimError, match="paper/wrong"):
        claim("paper/wrong", "1 + 1 = 3", passed=(1 + 1 == 3), evidence="1 + 1 = 2")
    (rec,) = read_ledger(ledger)
    assert rec.passed is False


@pytest.mark.parametrize("bad, match", [
    (dict(id="noslash"), "paper/name"),
    (dict(verdict="true"), "verdict"),
    (dict(passed="yes"), "passed must be a boolean"),
    (dict(passed=np.array([True, False])), "single boolean"),
])
def test_bad_claim_arguments_are_named(ledger, bad, match):
    kwargs = dict(id="paper/x", statement="s", passed=True)
    kwargs.update(bad)
    with pytest.raises(ValueError, match=match):
        claim(**kwargs)


def test_numpy_bools_are_accepted(ledger):
    rec = claim("paper/np", "numpy bool", passed=np.all(np.ones(3) > 0))
    assert rec.passed is True


def test_drop_chapter_and_latest_record_wins(ledger, monkeypatch):
    claim("paper/a", "first", passed=True, evidence="1")
    claim("paper/a", "again", passed=True, evidence="2")
    monkeypatch.setenv("CALIB_CHAPTER", "98-other")
    claim("paper/b", "other chapter", passed=True)
    recs = read_ledger(ledger)
    assert sorted(r.id for r in recs) == ["paper/a", "paper/b"]
    assert [r.evidence for r in recs if r.id == "paper/a"] == ["2"]
    drop_chapter(ledger, "99-test")
    assert [r.id for r in read_ledger(ledger)] == ["paper/b"]


def test_ledger_path_defaults_to_the_repository_build_folder(monkeypatch, tmp_path):
    monkeypatch.delenv("CALIB_LEDGER", raising=False)
    (tmp_path / "_toc.yml").write_text("format: jb-book\n")
    (tmp_path / "calib").mkdir()
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path / "sub")
    assert claims.ledger_path() == tmp_path / "_build" / "claims.jsonl"
