import json

import numpy as np
import pytest

from calib_book import claims
from calib_book.claims import ClaimError, claim, drop_chapter, read_ledger


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
    (dict(verdict="fails"), "verdict"),                        # the old vocabulary is gone
    (dict(verdict="holds-as-corrected"), "verdict"),
    (dict(passed="yes"), "passed must be a boolean"),
    (dict(passed=np.array([True, False])), "single boolean"),
    (dict(passed=None), "passed is required"),
    (dict(about="authors"), "about"),
    (dict(statement=" "), "statement is empty"),
    (dict(verdict="false", quote="q"), "needs correction"),
    (dict(verdict="imprecise", quote="q"), "needs correction"),
    (dict(verdict="typo", quote="q"), "needs correction"),
    (dict(correction="it is 2"), "correction is only for"),
    (dict(verdict="typo", correction="c"), "needs quote"),
    (dict(verdict="not-reproduced", quote="q"), "needs scale"),
    (dict(verdict="inconclusive", quote="q", scale=dict(data="d", model="m", epochs=3, seeds=3), premise="p 1",
          premise_holds=True), "missing n"),
    (dict(verdict="inconclusive", quote="q", scale="small"), "scale must be a dict"),
    (dict(verdict="untested", quote="q", passed=None, scale=dict(data="d", model="m", epochs=3, seeds=3, n=10)),
     "missing command"),
    (dict(verdict="untested", quote="q", passed=True,
          scale=dict(data="d", model="m", epochs=3, seeds=3, n=10, command="calib train ...")), "leave passed=None"),
])
def test_bad_claim_arguments_are_named(ledger, bad, match):
    kwargs = dict(id="paper/x", statement="s", passed=True)
    kwargs.update(bad)
    with pytest.raises(ValueError, match=match):
        claim(**kwargs)
    assert not ledger.exists()


SCALE = dict(data="Fashion-MNIST, 10k images", model="MLP", epochs=20, seeds=3, n=10_000)
PREMISE = dict(premise="cross-entropy is over-confident: T_CE >= 1.5 (measured 2.51 [2.30, 2.70])", premise_holds=True)
FAILED_PREMISE = dict(premise="cross-entropy is over-confident: T_CE >= 1.5 (measured 1.25 [1.10, 1.40])",
                      premise_holds=False)


@pytest.mark.parametrize("bad, match", [
    (dict(verdict="holds"), "with scale needs premise="),
    (dict(verdict="inconclusive", premise_holds=True), "with scale needs premise="),
    (dict(verdict="not-reproduced", premise=PREMISE["premise"]), "needs premise_holds=<bool"),
    (dict(verdict="inconclusive", premise=PREMISE["premise"], premise_holds="yes"), "premise_holds must be a bool"),
    (dict(verdict="holds", premise=PREMISE["premise"], premise_holds=np.array([True, True])), "single boolean"),
    (dict(verdict="holds", premise="cross-entropy is over-confident", premise_holds=True), "states no number"),
    # the premise fails: the paper is judged outside its regime, so only 'untested' is allowed
    (dict(verdict="not-reproduced", **FAILED_PREMISE), "make it verdict='untested'"),
    (dict(verdict="inconclusive", **FAILED_PREMISE), "make it verdict='untested'"),
    (dict(verdict="holds", **FAILED_PREMISE), "make it verdict='untested'"),
    (dict(verdict="untested", passed=True, scale={**SCALE, "command": "c"}, **FAILED_PREMISE), "leave passed=None"),
    (dict(verdict="untested", passed=None, scale={**SCALE, "command": "c"}, premise="T_CE 1.2 < 1.5",
          premise_holds=False, about="paper"), "needs quote"),
    (dict(verdict="holds", scale=None, **PREMISE), "belong to an empirical claim"),
])
def test_an_empirical_claim_states_its_premise_and_a_failed_premise_means_untested(ledger, bad, match):
    kwargs = dict(id="paper/x", statement="s", passed=True, quote="q", scale=SCALE)
    kwargs.update(bad)
    if kwargs["verdict"] == "untested" and "needs quote" in match:
        kwargs.pop("quote")
    with pytest.raises(ValueError, match=match):
        claim(**kwargs)
    assert not ledger.exists()


def test_a_failed_premise_is_recorded_as_untested_with_its_numbers(ledger, capsys):
    rec = claim("paper/regime", "FLSD-53 has the lowest ECE", verdict="untested", quote="lowest",
                scale={**SCALE, "command": "calib sweep grid.toml"}, **FAILED_PREMISE)
    (data,) = [json.loads(line) for line in ledger.read_text().splitlines()]
    assert data["premise"] == FAILED_PREMISE["premise"] and data["premise_holds"] is False
    assert read_ledger(ledger) == [rec]
    assert capsys.readouterr().out.strip().endswith(
        "nothing computed here; premise: cross-entropy is over-confident: T_CE >= 1.5 (measured 1.25 [1.10, 1.40]) "
        "(fails here)")
    block = claims.claim_html(rec)
    assert ('<p class="claim-premise"><span class="claim-label">Premise:</span> cross-entropy is over-confident: '
            "T_CE &gt;= 1.5 (measured 1.25 [1.10, 1.40]) (fails here)</p>") in block
    math = claims.claim_html(claims.Claim(**{**rec.__dict__, "premise": "$T_{CE} \\geq 1.5$ (measured 1.25)"}))
    assert '<span class="math notranslate nohighlight">\\(T_{CE} \\geq 1.5\\)</span> (measured 1.25)' in math


def test_an_untested_claim_whose_runs_are_not_made_here_measures_no_premise(ledger):
    rec = claim("paper/cifar", "s", verdict="untested", about="book", premise="the ResNet-50 trains to 95 % accuracy",
                scale={**SCALE, "command": "calib train --data cifar10"})
    assert rec.premise_holds is None and claims.premise_text(rec).endswith("(not measured here)")


@pytest.mark.parametrize("kwargs", [
    dict(verdict="holds", remark="exactly 0.4005"),
    dict(verdict="imprecise", quote="about 0.4", correction="0.4005"),
    dict(verdict="typo", quote="Eq. 3", correction="Eq. 4"),
    dict(verdict="false", quote="always", correction="not for K = 2"),
    dict(verdict="false", about="code", correction="the code bins by the centre"),
    dict(verdict="holds", about="book"),
    dict(verdict="not-reproduced", quote="rises", scale=SCALE, **PREMISE),
    dict(verdict="inconclusive", quote="rises", scale=SCALE, **PREMISE),
    dict(verdict="untested", quote="rises", passed=None, scale={**SCALE, "command": "calib train --data cifar10"},
         **FAILED_PREMISE),
])
def test_every_verdict_with_its_required_fields_is_recorded(ledger, kwargs):
    kwargs = {"passed": True, **kwargs}
    rec = claim("paper/x", "s", **kwargs)
    (back,) = read_ledger(ledger)
    assert back == rec
    assert back.verdict == kwargs["verdict"]
    assert back.confirmed is (kwargs["passed"] is True)


def test_an_untested_claim_prints_untested_and_does_not_raise(ledger, capsys):
    rec = claim("paper/u", "needs CIFAR", verdict="untested", about="book",
                scale={**SCALE, "command": "calib train --data cifar10 ..."}, premise="a ResNet-50 on CIFAR-10")
    assert rec.passed is None and "[untested] paper/u, about the book; nothing computed here" in capsys.readouterr().out


def test_non_strict_mode_records_a_failed_claim_and_goes_on(ledger, monkeypatch, capsys):
    monkeypatch.setenv("CALIB_STRICT", "0")
    rec = claim("paper/wrong", "1 + 1 = 3", passed=(1 + 1 == 3), evidence="1 + 1 = 2")
    out = capsys.readouterr().out
    assert rec.passed is False and "[holds] paper/wrong, about the paper; the computation does NOT confirm" in out
    (back,) = read_ledger(ledger)
    assert back.passed is False


def test_the_claim_line_reads_as_a_verdict_and_what_the_computation_says(ledger):
    """Issue 26: "[claim ok] ... (not-reproduced ...)" read as a contradiction; the line now shows the verdict as a
    badge and says that the computation confirms it, with the statement (its math typeset) and the evidence."""
    rec = claim("paper/nr", "the ECE rises with $\\gamma$ & falls", verdict="not-reproduced", passed=True,
                quote="rises", evidence="ECE 0.02 < 0.03", scale=SCALE, **PREMISE)
    text = claims.claim_text(rec)
    assert text == ("[not-reproduced] paper/nr, about the paper; the computation confirms the verdict: "
                    "ECE 0.02 < 0.03; premise: " + PREMISE["premise"] + " (holds here)")
    assert "ok" not in text.split(":")[0]
    block = claims.claim_html(rec)
    assert '<div class="claim-line claim-ok verdict-not-reproduced" id="claim-paper-nr">' in block
    assert '<span class="claim-badge verdict-not-reproduced">not-reproduced</span>' in block
    assert '<a class="claim-permalink" href="#claim-paper-nr"' in block          # the anchor, shown on hover
    assert 'rises with <span class="math notranslate nohighlight">\\(\\gamma\\)</span> &amp; falls' in block
    assert "ECE 0.02 &lt; 0.03" in block and "[claim" not in block
    unpaired = claims.claim_html(claims.Claim(**{**rec.__dict__, "statement": "costs $5"}))
    assert "costs $5" in unpaired and "math" not in unpaired.split("claim-statement")[1]


def test_a_fields_text_reads_as_text_math_and_code_the_same_everywhere():
    """One reading of a claim field (``claims.text_runs``) for its block, the ledger's pages, the PDF and the ASCII-math
    check: code spans first (a dollar inside one is code), then paired dollars as math; a number in e-notation inside
    math is a power of ten (TeX would set ``1.1e-16`` as a product with an italic e; issue 47, item 3)."""
    runs = claims.text_runs("gap $\\le 1.1e-16$ and $p = 2e+03$, $x = 1.0e+00$ in `np.sum($x)` at 3e-2")
    assert runs == [("text", "gap "), ("math", "\\le 1.1 \\times 10^{-16}"), ("text", " and "),
                    ("math", "p = 2 \\times 10^{3}"), ("text", ", "), ("math", "x = 1.0"), ("text", " in "),
                    ("code", "np.sum($x)"), ("text", " at 3e-2")]
    assert claims.text_runs("costs $5 `a` more") == [("text", "costs $5 "), ("code", "a"), ("text", " more")]
    assert claims.text_runs("$\\mathrm{e1}_{2e3x}$") == [("math", "\\mathrm{e1}_{2e3x}")]       # names stay names
    html_text = claims.text_html("at $T = 1e-4$, `calib.fit` <b>")
    assert html_text == ('at <span class="math notranslate nohighlight">\\(T = 1 \\times 10^{-4}\\)</span>, '
                         '<code class="docutils literal notranslate"><span class="pre">calib.fit</span></code> '
                         '&lt;b&gt;')
    assert claims.markdown_with_math("a *b*  $x_1$ `c_d`") == "a \\*b\\* $x_1$ `c_d`"
    assert claims.ascii_math("`p_y` $p_y$ and `$gamma` but gamma") == ["gamma"]


def test_claim_anchor_is_a_valid_html_id():
    assert claims.claim_anchor("mukhoti2020/sec3.3-protocol") == "claim-mukhoti2020-sec3-3-protocol"


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


def test_replacing_a_chapter_uses_a_temporary_file_of_its_own(tmp_path):
    """Issue 24, item 1: every writer of the ledger shared ``claims.jsonl.tmp``, and two of them raised
    FileNotFoundError when one renamed it under the other. A file in the way of that shared name (a directory
    here) broke the write; each writer now has a temporary file of its own, and leaves none behind."""
    ledger = tmp_path / "claims.jsonl"
    ledger.write_text("".join(json.dumps(r) + "\n" for r in ({"id": "p/old", "chapter": "01"},
                                                            {"id": "p/keep", "chapter": "02"})))
    ledger.chmod(0o640)
    (tmp_path / "claims.jsonl.tmp").mkdir()                 # the old shared name, taken
    running = tmp_path / "claims.01.x.running.jsonl"
    running.write_text(json.dumps({"id": "p/new", "chapter": "01"}) + "\n")
    claims.replace_chapter(ledger, "01", running)
    assert [json.loads(line)["id"] for line in ledger.read_text().splitlines()] == ["p/keep", "p/new"]
    drop_chapter(ledger, "02")
    assert [json.loads(line)["id"] for line in ledger.read_text().splitlines()] == ["p/new"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["claims.01.x.running.jsonl", "claims.jsonl",
                                                          "claims.jsonl.tmp"]
    assert ledger.stat().st_mode & 0o777 == 0o640           # the ledger keeps its permissions


def test_ledger_path_defaults_to_the_repository_build_folder(monkeypatch, tmp_path):
    monkeypatch.delenv("CALIB_LEDGER", raising=False)
    (tmp_path / "_toc.yml").write_text("format: jb-book\n")
    (tmp_path / "calib").mkdir()
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path / "sub")
    assert claims.ledger_path() == tmp_path / "_build" / "claims.jsonl"


PAPER_TEXT = """We show that focal loss can be in-
terpreted as a trade-off between minimising the KL diver-
gence and increasing the entropy. The ﬁnal layer’s weights
in **TS<sub>FL</sub>**, if  $\\Psi^\\gamma$  is not applied,  $|S99|$  is lower, using calibrationsensitive procedures
"""


@pytest.mark.parametrize("quote, found", [
    ("focal loss can be interpreted as a trade-off", True),          # hyphenation at a line end
    ("minimising the KL divergence and increasing the entropy.", True),
    ("The final layer's weights", True),                            # ligature and typographic apostrophe
    ("We show that focal loss ... increasing the entropy", True),    # an ellipsis stands for omitted words
    ("increasing the entropy ... We show", False),                  # parts out of order
    ("focal loss can be interpreted as a compromise", False),
    ("in TS$_{FL}$, if $\\Psi^\\gamma$ is not applied", True),       # the extraction's bold, <sub> and $ around math
    ("|S99| is lower", True),
    ("using calibration-sensitive procedures", True),               # a hyphen the extraction dropped
    ("in TS$^{FL}$, if", False),                                    # a superscript is not a subscript
    ("if $\\Psi^\\beta$ is not applied", False),
])
def test_quote_in_text(quote, found):
    assert claims.quote_in_text(quote, PAPER_TEXT) is found


def test_under_premise_keeps_the_verdict_where_the_premise_holds_and_is_untested_elsewhere(ledger):
    from calib_book.claims import under_premise

    scale = {"data": "d", "model": "m", "epochs": 1, "seeds": 5, "n": 10}
    gpu = {**scale, "command": "calib sweep grid.toml"}
    held = under_premise("not-reproduced", True, "T_CE = 2.4 >= 1.5", True, scale, gpu)
    assert held == {"verdict": "not-reproduced", "passed": True, "scale": scale, "premise": "T_CE = 2.4 >= 1.5",
                    "premise_holds": True}
    failed = under_premise("not-reproduced", True, "T_CE = 1.2 < 1.5", False, scale, gpu)
    assert (failed["verdict"], failed["passed"], failed["scale"]) == ("untested", None, gpu)
    record = claim("x2020/under-premise", "a statement", quote="q", evidence="e", **failed)
    assert record.verdict == "untested" and record.premise_holds is False


def test_the_claim_block_for_the_pdf_is_myst_with_its_statement_and_verdict(ledger):
    """Issue "the reader's book", PDF item 1: the PDF printed a claim's plain-text line, without its statement;
    the notebook's claim output carries MyST too (Sphinx's LaTeX builder prints text/markdown where the site shows
    text/html): one admonition titled with the id and the verdict, the statement with its math typeset, and the
    evidence and premise as text, whatever Markdown characters they hold."""
    myst = pytest.importorskip("myst_parser.parsers.docutils_", reason="the book's extras (MyST) are not installed")
    from docutils import nodes
    from docutils.core import publish_doctree

    rec = claim("paper/md", "1. the ECE rises with $\\gamma$ & falls * at `K` | [x] ::: end", verdict="not-reproduced",
                passed=True, quote="rises", evidence="ECE_2 = 0.02 < 0.03 ($5, *not* 10%) ~ {x} #1", scale=SCALE,
                **PREMISE)
    source = claims.claim_markdown(rec)
    tree = publish_doctree(source.replace("{doc}`how it is decided </book/methods>`", "how it is decided"),
                           parser=myst.Parser(), settings_overrides={"myst_enable_extensions": ["dollarmath"],
                                                                "report_level": 5})
    (block,) = tree.children
    assert isinstance(block, nodes.admonition) and "verdict-not-reproduced" in block["classes"]
    assert block[0].astext() == "paper/md: not-reproduced"
    about, statement, evidence, premise = block[1:]
    assert about.astext() == "About the paper; the computation confirms the verdict. (how it is decided)"
    assert [m.astext() for m in statement.findall(nodes.math)] == ["\\gamma"]
    assert statement.astext() == "1. the ECE rises with \\gamma & falls * at K | [x] ::: end"
    assert [c.astext() for c in statement.findall(nodes.literal)] == ["K"]                   # a code span is code
    assert evidence.astext() == "Evidence: " + rec.evidence
    assert premise.astext() == "Premise: " + claims.premise_text(rec)
    assert not list(tree.findall(nodes.system_message))


def test_a_quote_is_found_through_the_extractions_markup():
    """The papers' extracted text marks italics with ``*``, bold with ``**``, math with ``$`` and leaves a space
    between a hyphen and the math after it ("ECE- $\\Psi^\\gamma$"); a quote written as the paper prints it is found
    through all of them, and a changed word is not."""
    from calib_book.claims import quote_in_text

    text = ("For **LS**, ECE-raw drastically increases as  $\\gamma$  increases, whereas the value of  $\\gamma$  does "
            "not significantly affect ECE- $\\Psi^\\gamma$ . Apart from this, underconfident bins (*i.e.*, the bins "
            "that align above the diagonal) can be observed.")
    assert quote_in_text("For LS, ECE-raw drastically increases as $\\gamma$ increases, whereas the value of "
                         "$\\gamma$ does not significantly affect ECE-$\\Psi^\\gamma$", text)
    assert quote_in_text("underconfident bins (i.e., the bins that align above the diagonal)", text)
    assert not quote_in_text("underconfident bins (i.e., the bins that lie above the diagonal)", text)
    assert not quote_in_text("does significantly affect ECE-$\\Psi^\\gamma$", text)
