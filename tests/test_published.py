"""The papers' result tables as data (book/data/published): schema, printed shapes, and the reader that puts
them in the long format of chapter 10's results (calib.published; calib.experiments re-exports the readers)."""

import csv
from collections import Counter

import numpy as np
import pytest
from scipy.stats import binomtest as scipy_binomtest

from calib.published import (PUBLISHED_COLUMNS, STAGE_MAPS, Recount, agree_as_printed, canonical_loss, cell_text,
                             coinciding_rows, grid_label, kendall_by_seed, label_key, paired_cells, paper_layout,
                             pre_post_pairs, printed_unit, published_dir, published_rows, read_published,
                             read_published_tables, recount, reproduction_rows, same_direction, select,
                             setting_values, temperature_lookup)
from calib.stats import decide, seed_interval

PAPERS = ("mukhoti2020", "charoenphakdee2021", "komisarenko2024", "karandikar2021", "zhou2025")


@pytest.mark.parametrize("paper", PAPERS)
def test_every_table_has_the_printed_number_of_cells(paper):
    rows = read_published(paper)
    tables = read_published_tables(paper)
    counts = Counter(r["table"] for r in rows)
    assert len({t["table"] for t in tables}) == len(tables), "a table is listed twice"
    for t in tables:
        assert counts.get(t["table"], 0) == t["n_cells"], (t["table"], counts.get(t["table"], 0), t["n_cells"])
        assert t["n_cells"] <= 2 * t["n_rows"] * t["n_cols"], t["table"]      # at most two numbers in a cell
        if any(r["unreadable"] for r in rows if r["table"] == t["table"]):
            assert t["garbled"], f"{t['table']} has unreadable cells but is not marked garbled"
    assert set(counts) <= {t["table"] for t in tables}, "numbers of a table the shapes file does not list"
    for r in rows:
        assert r["stage"] in STAGE_MAPS, r
        if not r["unreadable"]:
            assert r["value_text"] == r["value_text"].strip() and float(r["value_text"]) == r["value"]


def test_transcribed_papers_and_their_sizes():
    sizes = {paper: len(read_published(paper)) for paper in PAPERS}
    assert sizes["charoenphakdee2021"] == 0                 # its results are figures only
    assert all(sizes[p] > 100 for p in PAPERS if p != "charoenphakdee2021"), sizes
    assert {t["table"] for t in read_published_tables("mukhoti2020")} == {f"Table {i}" for i in range(1, 14)}


def test_known_cells_as_printed():
    rows = read_published("mukhoti2020")
    cell = next(r for r in rows if (r["table"], r["dataset"], r["model"], r["method"], r["stage"])
                == ("Table 1", "CIFAR-10", "ResNet 50", "Cross-Entropy", "post-T"))
    assert (cell["value_text"], cell["temperature"]) == ("1.35", 2.5)
    long = published_rows("mukhoti2020")
    assert {"source", "paper", "table", "model", "loss", "seed", "map", "metric", "value"} <= set(long[0])
    assert {r["map"] for r in long if r["table"] == "Table 1"} == {"none", "ts"}


def test_malformed_files_say_where(tmp_path):
    folder = tmp_path / "book" / "data" / "published"
    folder.mkdir(parents=True)
    good = dict(zip(PUBLISHED_COLUMNS, ["x2020", "Table 1", "", "", "CE", "ECE", "pre-T", "4.35", "", "", "false",
                                        "false", ""]))

    def write(**changes):
        with (folder / "x2020.csv").open("w", newline="") as fh:
            w = csv.DictWriter(fh, PUBLISHED_COLUMNS)
            w.writeheader()
            w.writerow({**good, **changes})

    write()
    assert read_published("x2020", root=tmp_path)[0]["value"] == 4.35
    write(bold="yes")
    with pytest.raises(ValueError, match="line 2: .*'bold' holds 'yes'"):
        read_published("x2020", root=tmp_path)
    write(value="")
    with pytest.raises(ValueError, match="needs a value"):
        read_published("x2020", root=tmp_path)
    write(paper="y2021")
    with pytest.raises(ValueError, match="in the file of 'x2020'"):
        read_published("x2020", root=tmp_path)
    (folder / "x2020.csv").write_text("paper,table\nx2020,Table 1\n")
    with pytest.raises(ValueError, match="columns"):
        read_published("x2020", root=tmp_path)
    with pytest.raises(FileNotFoundError):
        read_published("nobody", root=tmp_path)
    assert published_dir(tmp_path) == folder


# --- the analysis functions of chapter 11 ---------------------------------------------------------------------


def _row(**kw):
    base = dict(paper="x2020", table="Table 1", dataset="D", model="M", method="A", metric="ECE", stage="pre-T",
                value=1.0, value_text="1.0", temperature=None, std=None, bold=False, unreadable=False, note="")
    base.update(kw)
    if "value" in kw and "value_text" not in kw:
        base["value_text"] = str(kw["value"])
    return base


def test_labels_and_printed_units():
    assert label_key("Tiny-ImageNet") == label_key("Tiny Imagenet") == label_key("TinyImageNet") == "tinyimagenet"
    assert label_key("FLSD-53 (Ours)") == label_key("FLSD-53") == "flsd53"
    assert label_key("CIFAR10") == label_key("CIFAR-10")
    assert [canonical_loss(x) for x in ("Cross-Entropy", "CROSS-ENTROPY", "XE", "FL-53", "FLSD-53 (Ours)",
                                        "AU_{P_{X_τ}}", "AURC", "FOCAL γ_tr = 3", "Inv. FL")] == \
        ["ce", "ce", "ce", "flsd-53", "flsd-53", "aurc", "aurc-plain", "fl-3", "inverse"]
    assert printed_unit("4.39") == 0.01 and printed_unit("4.5") == 0.1 and printed_unit("78") == 1.0
    assert printed_unit("2.") == 1.0                                  # Mukhoti Table 5 prints "2.(1.1)"
    assert agree_as_printed("4.39", "4.4") and not agree_as_printed("4.39", "4.5")
    assert agree_as_printed("2.0", "2.")                              # "2." carries no decimal
    assert agree_as_printed("4.95", "95.05", transform=lambda v: 100 - v)
    assert not agree_as_printed("4.95", "95.15", transform=lambda v: 100 - v)
    with pytest.raises(ValueError):
        printed_unit("")
    labels = ["ce", "mmce-0.25", "inverse-fl-1", "aurc", "aurc-detach"]
    assert [grid_label(x, labels) for x in ("ce", "mmce", "inverse", "aurc", "fl-2")] == \
        ["ce", "mmce-0.25", "inverse-fl-1", "aurc", None]


def test_cell_text_and_layout():
    assert cell_text(_row(value_text="1.35", temperature=2.5)) == "1.35 (2.5)"
    assert cell_text(_row(value_text="77.6", std=0.6, bold=True)) == "**77.6 ± 0.6**"
    assert cell_text(_row(value=None, value_text="", unreadable=True)) == "?"
    rows = [_row(dataset="C10", method="CE", stage="pre-T", value_text="4.35"),
            _row(dataset="C10", method="CE", stage="post-T", value_text="1.35", temperature=2.5),
            _row(dataset="C100", method="CE", stage="pre-T", value_text="17.52")]
    header, body = paper_layout(rows)
    assert header == ["dataset", "model", "CE pre-T", "CE post-T"]
    assert body == [["C10", "M", "4.35", "1.35 (2.5)"], ["C100", "M", "17.52", ""]]
    header, _ = paper_layout([dict(r, model="") for r in rows])           # an all-empty label gets no column
    assert header[0] == "dataset" and "model" not in header
    with pytest.raises(ValueError, match="two printed numbers"):
        paper_layout(rows, col_by=("method",))
    # the real Table 1 of Mukhoti et al.: 11 rows, 5 methods x 2 stages, Table 1's first printed cell
    header, body = paper_layout(select(read_published("mukhoti2020"), table="Table 1"))
    assert len(body) == 11 and len(header) == 12 and body[0][2] == "4.35"


def test_paired_cells_match_labels_and_rounding():
    a = [_row(dataset="Tiny-ImageNet", method="FLSD-53 (Ours)", value=4.5), _row(method="B", value=2.0)]
    b = [_row(dataset="Tiny Imagenet", method="FLSD-53", value=4.39), _row(method="C", value=2.0)]
    pairs = paired_cells(a, b)
    assert len(pairs) == 1 and pairs[0]["agree"] is False and pairs[0]["a_text"] == "4.5"
    b[0]["value"], b[0]["value_text"] = 4.46, "4.46"
    assert paired_cells(a, b)[0]["agree"] is True
    # stage labels that stand for the same map meet through "map"
    assert len(paired_cells([_row(stage="")], [_row(stage="pre-T")], keys=("method", "map"))) == 1
    # Mukhoti et al.: Table 2 vs Table 6 disagree in exactly the two FLSD-53 cells of CIFAR-100/ResNet 50
    rows = read_published("mukhoti2020")
    off = [p for p in paired_cells(select(rows, table="Table 2"), select(rows, table="Table 6")) if not p["agree"]]
    assert [(p["key"][:2], p["a_text"], p["b_text"]) for p in off] == [(("CIFAR-100", "ResNet 50"), "4.5", "4.39"),
                                                                      (("CIFAR-100", "ResNet 50"), "2.0", "2.33")]
    # error (Table 4) = 100 - top-1 (Table 8) for all 25 pairs
    t8 = select(rows, table="Table 8", metric="Top-1")
    pairs = paired_cells(select(rows, table="Table 4"), t8, keys=("dataset", "model", "method"),
                         transform=lambda v: 100 - v)
    assert len(pairs) == 25 and all(p["agree"] for p in pairs)


def test_pre_post_pairs_and_temperatures():
    pre = [_row(method="A", value=2.0), _row(method="B", value=3.0), _row(method="C", value=4.0)]
    post = [_row(method="A", stage="post-T", value=2.0, temperature=1.0),
            _row(method="B", stage="post-T", value=3.0, temperature=2.5),
            _row(method="C", stage="post-T", value=3.5)]
    pairs = pre_post_pairs(pre, post, temperatures={("d", "m", "c"): 1.4})
    assert [(p["key"][2], p["temperature"], p["equal"]) for p in pairs] == [("A", 1.0, True), ("B", 2.5, True),
                                                                          ("C", 1.4, False)]
    assert temperature_lookup(post) == {("d", "m", "a"): 1.0, ("d", "m", "b"): 2.5}
    # Mukhoti et al. Tables 11/12 with the ECE tables' temperatures: pre == post at every T = 1, and the only
    # pre == post at T != 1 are the 11 cells of 20 Newsgroups
    rows = read_published("mukhoti2020")
    temps = temperature_lookup(select(rows, table=("Table 1", "Table 5")))
    pairs = pre_post_pairs(select(rows, table="Table 11"), select(rows, table="Table 12"),
                           keys=("dataset", "model", "method"), temperatures=temps)
    assert all(p["equal"] for p in pairs if p["temperature"] == 1)
    odd = [p for p in pairs if p["temperature"] != 1 and p["equal"]]
    assert len(odd) == 11 and {p["key"][0] for p in odd} == {"20 Newsgroups"}


def test_coinciding_rows_finds_pasted_rows_and_nothing_else():
    rows = [_row(table="T1", dataset=d, method=m, value=v) for d, vs in (("a", (1, 2, 3)), ("b", (4, 5, 6)))
            for m, v in zip("xyz", vs)]
    rows += [_row(table="T2", dataset=d, method=m, metric="AdaECE", value=v)
             for d, vs in (("a", (1, 2, 3)), ("b", (4, 5, 7))) for m, v in zip("xyz", vs)]
    assert coinciding_rows(rows, min_cells=3) == [(("T1", "a", "M"), ("T2", "a", "M"), 3)]
    assert coinciding_rows(rows, min_cells=4) == []
    found = coinciding_rows(read_published("mukhoti2020"))
    assert found == [(("Table 1", "CIFAR-100", "ResNet 50"), ("Table 2", "CIFAR-100", "ResNet 50"), 10),
                     (("Table 11", "20 Newsgroups", "Global Pooling CNN"),
                      ("Table 12", "20 Newsgroups", "Global Pooling CNN"), 11)]


def test_recount_counts_and_sign_test():
    rows = []
    for cell, (ours, b1, b2) in enumerate([(1.0, 2.0, 3.0), (1.0, 0.5, 3.0), (2.0, 2.0, 3.0), (1.0, 4.0, 1.5)]):
        rows += [_row(dataset=str(cell), method="Ours", value=ours, std=0.2),
                 _row(dataset=str(cell), method="B1", value=b1, std=0.3), _row(dataset=str(cell), method="B2",
                                                                               value=b2, std=0.1)]
    rc = recount(rows, "ours", ["B1", "B2"])
    assert isinstance(rc, Recount) and (rc.wins, rc.losses, rc.ties, rc.n) == (2, 1, 1, 4)
    assert [c["margin"] for c in rc.cells] == [1.0, -0.5, 0.0, 0.5]
    assert (rc.beyond_std_wins, rc.beyond_std_losses) == (2, 1)     # 1.0 > 0.3, 0.5 > 0.2, |-0.5| > 0.3
    assert rc.p_value == pytest.approx(0.5)                          # P(X >= 2), X ~ Bin(3, 1/2)
    up = recount(rows, "ours", ["B1", "B2"], lower_is_better=False)
    assert (up.wins, up.losses) == (0, 4)                           # higher is better: the best other wins
    # Komisarenko & Kull Table 1: FTS has the lower ECE in all 18 rows; sign test 2^-18
    rc = recount(select(read_published("komisarenko2024"), metric="ECE"), "FTS", ["TS"], field="stage",
                 cell_by=("dataset", "method"))
    assert (rc.wins, rc.n) == (18, 18) and rc.p_value == pytest.approx(0.5 ** 18)
    # Mukhoti et al. Tables 1-2: FLSD-53 lowest in 34 of 44 cells
    rc = recount(select(read_published("mukhoti2020"), table=("Table 1", "Table 2")), "FLSD-53",
                 ["Cross-Entropy", "Brier Loss", "MMCE", "LS-0.05"])
    assert (rc.wins, rc.losses, rc.ties) == (34, 10, 0)
    assert "34 of 44" in rc.brief() and rc.p_value == pytest.approx(scipy_binomtest(34, 44, 0.5, "greater").pvalue)
    # ... but a network printed in Tables 1 and 2, before and after TS, is one unit (issue 25): 11 networks, one tied
    by_net = recount(select(read_published("mukhoti2020"), table=("Table 1", "Table 2")), "FLSD-53",
                     ["Cross-Entropy", "Brier Loss", "MMCE", "LS-0.05"], unit_by=("dataset", "model"))
    assert (by_net.wins, by_net.n) == (34, 44) and (by_net.sign.wins, by_net.sign.losses, by_net.sign.ties) == (8, 2, 1)
    assert by_net.p_value == pytest.approx(56 / 1024) and "one-sided sign test p = 0.055" in by_net.brief()
    with pytest.raises(ValueError, match="unit_by"):
        recount(rows, "ours", ["B1"], unit_by=("network",))


def test_kendall_by_seed_and_same_direction():
    paper = {"a": 1.0, "b": 2.0, "c": 3.0, "d": 4.0, "only-paper": 0.0}
    ours = {"a": [1, 4], "b": [2, 3], "c": [3, 2], "d": [4, 1], "only-ours": [0, 0]}
    assert np.allclose(kendall_by_seed(paper, ours), [1.0, -1.0])
    with pytest.raises(ValueError, match="at least 3"):
        kendall_by_seed({"a": 1, "b": 2}, ours)
    dec = {"a": decide(seed_interval([-2.0, -1.9, -2.1]), "less"), "b": decide(seed_interval([1.0, 1.1, 0.9]), "less"),
           "c": decide(seed_interval([-1.0, 1.0, 0.1]), "less")}
    out = same_direction({"a": -0.5, "b": -0.5, "c": 0.3, "z": 1.0}, dec)
    assert [(o["loss"], o["paper"], o["ours"], o["agree"]) for o in out] == [
        ("a", "lowers", "holds", True), ("b", "lowers", "not-reproduced", False), ("c", "raises", "inconclusive", None)]


def test_setting_values_and_reproduction_rows():
    rows = [_row(dataset="CIFAR-10", model="", method="CROSS-ENTROPY", value=95.0, std=0.1)]
    assert setting_values(rows, model="ResNet-50") == {("cifar10", "resnet50", "ce"): (95.0, 0.1)}
    assert setting_values([_row(dataset="CIFAR-10", model="ResNet 50", method="Cross-Entropy", value=4.95)],
                          transform=lambda v: 100 - v)[("cifar10", "resnet50", "ce")][0] == pytest.approx(95.05)
    with pytest.raises(ValueError, match="two printed numbers"):
        setting_values(rows + rows)
    tables = [dict(paper="p", table="T1", caption="Test ECE. More words", n_cells=3),
              dict(paper="p", table="T2", caption="Formulas", n_cells=0), dict(paper="p", table="T3", caption="Err",
                                                                               n_cells=2)]
    out = reproduction_rows(tables, {("p", "T1"): ("ECE of CE vs FL", "holds")}, {("p", "T1"): True}, "MLP", "cmd")
    assert out == [["p", "T1", "Test ECE", "ECE of CE vs FL", "reproduced in direction", "MLP", "cmd"],
                   ["p", "T3", "Err", "–", "untested", "–", "no grid here covers it"]]
    with pytest.raises(ValueError, match="verdict"):
        reproduction_rows(tables, {("p", "T1"): ("x", "fails")}, {}, "MLP", "cmd")


def test_paper_losses_and_majority():
    from calib.published import majority_verdict, paper_losses

    labels = ["ce", "brier", "mmce-0.25", "ls-0.05", "fl-3", "flsd-53"]
    rows = select(read_published("mukhoti2020"), table="Table 1", stage="pre-T")
    got = paper_losses(rows, labels, "CIFAR-10", "ResNet 50")
    assert got == {"ce": 4.35, "brier": 1.82, "mmce-0.25": 4.56, "ls-0.05": 2.96, "flsd-53": 1.55}
    k = paper_losses(select(read_published("komisarenko2024"), metric="ECE", stage="TS"), labels, "CIFAR-10",
                     "ResNet-50", default_model="ResNet-50")
    assert set(k) == {"ce", "fl-3", "flsd-53"}
    with pytest.raises(ValueError, match="two printed"):
        paper_losses(select(read_published("mukhoti2020"), table="Table 1"), labels, "CIFAR-10", "ResNet 50")
    from calib.stats import decide_any

    h, n, i = (seed_interval(v) for v in ([1, 1.1, 0.9], [-1, -1.1, -0.9], [-1, 1, 0.1]))
    assert majority_verdict(decide_any({"a": h, "b": h, "c": i})) == "holds"
    assert majority_verdict(decide_any({"a": n, "b": n, "c": h})) == "not-reproduced"
    assert majority_verdict(decide_any({"a": h, "b": n, "c": i})) == "inconclusive"
    assert majority_verdict(decide_any({"a": h, "b": n})) == "not-reproduced"      # "most of two" needs both


def _interval_with_p(p, df=4, level=0.95):
    """A t-interval whose one-sided p-value of "greater than 0" is ``p``."""
    from scipy import stats as st

    from calib.stats import Interval

    estimate = float(st.t.isf(p, df))
    half = float(st.t.ppf(0.5 + level / 2, df))
    return Interval(estimate, estimate - half, estimate + half, level, df + 1, "t", 1.0, float(df))


def test_majority_verdict_corrects_for_the_family():
    # three comparisons each holding at the unadjusted 2.5 % level (p = 0.02): counted one by one they made a
    # majority ("holds"); after Holm's correction over the family (3 x 0.02 = 0.06) none holds
    from calib.published import majority_verdict
    from calib.stats import decide, decide_any, decide_every

    family = {name: _interval_with_p(0.02) for name in "abc"}
    assert all(decide(v).verdict == "holds" for v in family.values())
    assert majority_verdict(decide_any(family)) == "inconclusive"
    family["a"] = family["b"] = _interval_with_p(0.001)
    assert majority_verdict(decide_any(family)) == "holds"                # Holm: 0.003, 0.003, 0.02
    with pytest.raises(ValueError, match="decide_any"):
        majority_verdict([decide(v) for v in family.values()])
    with pytest.raises(ValueError, match="decide_any"):
        majority_verdict(decide_every(family))


def test_select_and_printed_row_values():
    from calib.published import printed_row_values

    rows = [_row(method="A", value=1.0), _row(method="B", value=2.0, stage="post-T"),
            _row(dataset="E", method="A", value=None, value_text="", unreadable=True)]
    assert [r["method"] for r in select(rows, stage="pre-T")] == ["A", "A"]
    assert [r["method"] for r in select(rows, stage=("pre-T", "post-T"), dataset="D")] == ["A", "B"]
    assert printed_row_values(rows) == {("Table 1", "D", "M"): (1.0, 2.0), ("Table 1", "E", "M"): (None,)}
    # a row with an unreadable cell never counts as a coincidence
    assert coinciding_rows(rows + [dict(r, table="Table 2") for r in rows], min_cells=1) == \
        [(("Table 1", "D", "M"), ("Table 2", "D", "M"), 2)]


def test_printed_difference_interval_is_welchs_t_test_from_the_printed_sem():
    from scipy import stats as scipy_stats

    from calib.published import printed_difference_interval

    # Karandikar et al. (2021), Table 2, CIFAR-100: NLL 9.10 ± .139 against NLL + SB-ECE 6.86 ± .839 (10 runs)
    iv = printed_difference_interval(9.10, 0.139, 6.86, 0.839, runs=10)
    ref = scipy_stats.ttest_ind_from_stats(9.10, 0.139 * np.sqrt(10), 10, 6.86, 0.839 * np.sqrt(10), 10,
                                           equal_var=False, alternative="greater")
    assert iv.estimate == pytest.approx(2.24, abs=1e-12)
    assert iv.p_value("greater", 0.0) == pytest.approx(ref.pvalue, rel=1e-10)
    assert iv.se == pytest.approx(np.hypot(0.139, 0.839), rel=1e-12)
    assert iv.df == pytest.approx(np.hypot(0.139, 0.839) ** 4 / ((0.139 ** 4 + 0.839 ** 4) / 9), rel=1e-12)
    half = scipy_stats.t.ppf(0.975, iv.df) * iv.se
    assert (iv.low, iv.high) == pytest.approx((2.24 - half, 2.24 + half), rel=1e-12)
    assert iv.n == 10 and "printed means" in iv.method
    # equal SEMs: the Welch degrees of freedom are 2 (runs - 1), those of the pooled t-test
    assert printed_difference_interval(1.0, 0.1, 0.5, 0.1, runs=10).df == pytest.approx(18.0, rel=1e-12)


@pytest.mark.parametrize("kwargs, words", [
    (dict(mean_a=1.0, sem_a=-0.1, mean_b=0.5, sem_b=0.1, runs=10), "sem_a must be a standard error >= 0"),
    (dict(mean_a=float("nan"), sem_a=0.1, mean_b=0.5, sem_b=0.1, runs=10), "mean_a must be one finite"),
    (dict(mean_a=1.0, sem_a=0.1, mean_b=0.5, sem_b=0.1, runs=1), "runs must be the number of runs"),
    (dict(mean_a=1.0, sem_a=0.1, mean_b=0.5, sem_b=0.1, runs=10, level=1.5), "level must lie in (0, 1)"),
])
def test_printed_difference_interval_refuses_bad_input(kwargs, words):
    import re

    from calib.published import printed_difference_interval

    with pytest.raises(ValueError, match=re.escape(words)):
        printed_difference_interval(**kwargs)


def test_the_package_re_exports_its_two_modules_and_tables_imports_nothing_of_compare():
    """calib.published is a package: ``tables`` (the transcribed tables read as data) and ``compare`` (chapter 11's
    analysis of them); every public name of both is importable from calib.published, as from the one module it was,
    and the layering is one way (compare imports tables)."""
    from pathlib import Path

    import calib.published as package
    from calib.published import compare, tables
    from tests.test_layers import _imports

    assert not set(tables.__all__) & set(compare.__all__)
    assert sorted(package.__all__) == sorted(tables.__all__ + compare.__all__) and len(package.__all__) == 35
    assert all(getattr(package, n) is getattr(tables if n in tables.__all__ else compare, n) for n in package.__all__)
    imports = _imports()
    assert "calib.published.compare" not in imports["calib.published.tables"]
    assert "calib.published.tables" in imports["calib.published.compare"]
    # in a checkout, the CSVs are read from the repository's book/data/published (one folder above calib/)
    assert published_dir() == Path(__file__).resolve().parents[1] / "book" / "data" / "published"
