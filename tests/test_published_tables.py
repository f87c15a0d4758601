"""The papers' result tables as data (book/data/published): schema, printed shapes, and the reader that puts
them in the long format of chapter 10's results (calib.published; calib.experiments re-exports the readers)."""

import csv
from collections import Counter
from pathlib import Path

import pytest

from calib.published import (PUBLISHED_COLUMNS, STAGE_MAPS, published_dir, published_rows, read_published,
                             read_published_tables)

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
