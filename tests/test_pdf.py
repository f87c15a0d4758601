"""The book as one PDF (calib_book.pdf, `make pdf`): built with XeLaTeX when TeX Live is installed, with every
character in its fonts and every font embedded, nothing too wide for the page, no reference undefined, and the site's
parts and chapter numbers (book/_ext/pdf_layout.py, the layout that prints what the site shows).

`make test` does not build the whole book's PDF (minutes of LaTeX): `test_the_book_pdf` builds it when
``CALIB_BUILD_PDF=1`` is set, and otherwise checks the ``_build/latex/book.pdf`` that `make pdf` left, if any. The
other tests compile a one-page document, so they run wherever XeLaTeX is, and skip with the reason elsewhere.
"""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from docutils import nodes
from docutils.utils import new_document

from calib_book import pdf, runner
from calib_book.timeouts import scaled  # a subprocess's time limit, scaled by the machine's load

ROOT = runner.repo_root(__file__)
sys.path.insert(0, str(ROOT / "book" / "_ext"))
try:
    import pdf_layout
finally:
    sys.path.remove(str(ROOT / "book" / "_ext"))
LACKING = pdf.missing_tools()
needs_tex = pytest.mark.skipif(bool(LACKING), reason=f"TeX tools not installed: {', '.join(LACKING)} "
                                                     "(`make pdf` installs them on Debian as root)")


def test_a_missing_tool_is_named(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))                       # nothing on PATH
    with pytest.raises(pdf.PdfToolsMissing, match=r"latexmk, xelatex, pdfinfo, pdffonts, not found on PATH"):
        pdf.build_pdf(tmp_path)


@needs_tex
def test_an_unbuilt_book_is_refused(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"run `make book`"):
        pdf.build_pdf(tmp_path)


def _xelatex(tmp_path: Path, body: str, preamble: str = "") -> Path:
    tex = tmp_path / "doc.tex"
    tex.write_text("\\documentclass{article}\n" + preamble + "\n\\begin{document}\n" + body + "\n\\end{document}\n",
                   encoding="utf-8")
    subprocess.run(["xelatex", "-interaction=nonstopmode", "-halt-on-error", tex.name], cwd=tmp_path,
                   capture_output=True, check=True, timeout=scaled(120))
    return tmp_path / "doc.pdf"


@needs_tex
def test_the_report_finds_a_glyph_the_font_lacks(tmp_path):
    """Latin Modern has no snowman: the log says so, and the report lists it; plain text gives a clean report."""
    clean = pdf.pdf_report(_xelatex(tmp_path, "Calibration, plain text."))
    assert clean.pages == 1 and clean.missing_characters == () and clean.unembedded_fonts == ()
    lost = tmp_path / "lost"
    lost.mkdir()
    report = pdf.pdf_report(_xelatex(lost, "A snowman \u2603 here."))
    assert len(report.missing_characters) == 1 and report.missing_characters[0].startswith("\u2603 in font")


@needs_tex
def test_the_book_pdf():
    """The whole book: over a hundred pages, no character missing from its fonts, every font embedded."""
    book = ROOT / "_build" / "latex" / "book.pdf"
    if os.environ.get("CALIB_BUILD_PDF") == "1":
        if not (ROOT / "_build" / "src" / "book" / "claims.md").is_file():
            pytest.skip("CALIB_BUILD_PDF=1 but the book is not built: run `make book` first")
        book = pdf.build_pdf(ROOT)
    elif not book.is_file():
        pytest.skip("no _build/latex/book.pdf: run `make pdf`, or set CALIB_BUILD_PDF=1 to build it here")
    report = pdf.pdf_report(book)
    assert report.pages > 100, report.text()
    assert report.missing_characters == (), report.text()
    assert report.unembedded_fonts == (), report.text()
    assert report.undefined == (), report.text()                     # no "Exercise ??"
    assert report.overfull == (), (f"{len(report.overfull)} boxes over {pdf.OVERFULL_PT:g}pt, the widest: "
                                   + "; ".join(box.text() for box in report.overfull[:10]))
    _chapters_are_the_site_s(book.with_suffix(".toc"))


def _chapters_are_the_site_s(toc: Path) -> None:
    """PDF item 3: chapter N of the PDF (its table of contents) is chapter N of the site, the Nth chapter of the
    parts _toc.yml numbers; the other chapters have no number."""
    def words(tex: str) -> str:
        return re.sub(r"\W|\d|_", "", re.sub(r"\\[a-zA-Z]+", "", tex)).lower()

    numbered = [item["file"] for part in yaml.safe_load((ROOT / "_toc.yml").read_text())["parts"]
                if part.get("numbered") for item in part["chapters"]]
    titles = [next(line[2:] for line in (ROOT / f"{name}.md").read_text(encoding="utf-8").splitlines()
                   if line.startswith("# ")) for name in numbered]
    entries = re.findall(r"\\contentsline \{chapter\}\{(\\numberline \{(\d+)\})?(.*?)\}\{\d+\}",
                         toc.read_text(encoding="utf-8"))
    pdf_numbered = [(int(number), words(title)) for _, number, title in entries if number]
    assert pdf_numbered == [(n, words(title)) for n, title in enumerate(titles, 1)]
    assert len(entries) > len(pdf_numbered)                    # the introduction, getting started, the back matter


SYNTHETIC_LOG = """\
Overfull \\hbox (825.71866pt too wide) detected at line 20907
 []
Overfull \\hbox (2.1pt too wide) in paragraph at lines 10--12
[]\\TU/FreeSerif(0)/m/n/10 text
Underfull \\hbox (badness 10000) in paragraph at lines 30--31
Overfull \\hbox (49.8pt too wide) in paragraph at lines 32529--32529
Overfull \\vbox (68.4pt too high) detected at line 14259
Overfull \\hbox (810.73172pt too wide) in alignment at lines 41723--41778
LaTeX Warning: Hyper reference `chapters/00-using-calib:ch00-ex-focal-3' on page 593
 undefined on input line 66138.
LaTeX Warning: Reference `chapters/00-using-calib:ch00-ex-focal-3' on page 593 un
defined on input line 66138.
"""


def test_overfull_boxes_and_undefined_references_are_read_from_the_log():
    """Issue "the reader's book", PDF item 2: the log's overfull boxes over the threshold, widest first, with the
    lines of the .tex; a box a few points over (a comma in the margin), an underfull one and a \\vbox are not
    reported. The references no label defines are read across the log's wrapped lines."""
    boxes = pdf.overfull_boxes(SYNTHETIC_LOG)
    assert [(b.points, b.kind, b.first_line, b.last_line) for b in boxes] == [
        (825.71866, "detected", 20907, 20907), (810.73172, "alignment", 41723, 41778),
        (49.8, "paragraph", 32529, 32529)]
    assert boxes[0].text() == "825.7pt too wide (detected, line 20907)"
    assert [b.points for b in pdf.overfull_boxes(SYNTHETIC_LOG, threshold=1.0)][-1] == 2.1
    assert pdf.overfull_boxes(SYNTHETIC_LOG, threshold=1000.0) == ()
    assert pdf.undefined_references(SYNTHETIC_LOG) == ("chapters/00-using-calib:ch00-ex-focal-3",)
    assert pdf.undefined_references("LaTeX Warning: There were undefined references.") == ()


@needs_tex
def test_the_report_finds_a_box_too_wide_for_the_page(tmp_path):
    report = pdf.pdf_report(_xelatex(tmp_path, "\\noindent\\hbox{\\vrule width 500pt height 1pt}"))
    assert len(report.overfull) == 1 and report.overfull[0].kind == "paragraph"
    assert report.overfull[0].points > 100 and "overfull boxes over 20pt (" in report.text()


# ------------------------------------------------------------------------- the layout: book/_ext/pdf_layout.py

def _cell(tags, source=True, output=True):
    cell = nodes.container(nb_element="cell_code", cell_metadata={"tags": tags})
    if source:
        cell += nodes.container(nb_element="cell_code_source")
    if output:
        cell += nodes.container(nb_element="cell_code_output")
    return cell


def test_code_the_site_folds_is_not_printed():
    """PDF item 1: the code of a hide-input cell (and of papermill's parameters cell, folded on the site) is left
    out, its outputs printed; a hide-output cell's outputs are printed too (a PDF cannot fold); other cells stay."""
    document = new_document("test")
    cells = [_cell(["hide-input"]), _cell(["injected-parameters"], output=False), _cell(["hide-input", "hide-output"]),
             _cell([]), _cell(["hide-output"])]
    document.extend(cells)
    pdf_layout.FoldedCodeLeftOut(document).run()
    shown = [[c["nb_element"] for c in cell.children] for cell in document.children]
    assert shown == [["cell_code_output"], ["cell_code_output"], ["cell_code_source", "cell_code_output"],
                     ["cell_code_source", "cell_code_output"]]


def test_a_long_equation_breaks_before_its_top_level_operators():
    """PDF item 2: sympy's long right-hand sides break before a relation or a binary + or -, never inside a group,
    a fraction or a \\left ... \\right pair; a sign after a relation is not a break."""
    math = r"\frac{a + b}{2} = - \frac{x - y}{z} + \left(a - b\right) u_{1}{\left(c_{1} \right)} - c\le 0"
    assert pdf_layout.break_points(math) == [r"\frac{a + b}{2} ", r"{}= - \frac{x - y}{z} ",
                                             r"{}+ \left(a - b\right) u_{1}{\left(c_{1} \right)} ", "{}- c", r"{}\le 0"]
    assert pdf_layout.break_points(r"\log\Big(1 + x\Big)") == [r"\log\Big(1 + x\Big)"]
    # inline math in a table's narrow column: cut after its top-level commas, never inside a group or \left \right
    assert pdf_layout.comma_pieces(r"\gamma \in \{-0.5, 0.05, 5\}") == [r"\gamma \in \{-0.5,", " 0.05,", r" 5\}"]
    assert pdf_layout.comma_pieces(r"\left(a, b\right) f_{x,y}") == [r"\left(a, b\right) f_{x,y}"]
    assert pdf_layout.math_words(r"\gamma \in \{-0.5, 0.05\}") == ["", "-0.5,", "0.05"]


def _columns(header, rows):
    return [pdf_layout.Column([header[i]], [r[i] for r in rows]) for i in range(len(header))]


def test_a_wide_table_is_set_smaller_split_or_turned_so_that_it_fits():
    """PDF item 2: a table of values too wide for the page is set smaller with columns as wide as their numbers
    (never squeezed below them); one too wide even so is split into tables that repeat the columns naming a row;
    a table of text wraps its text columns; a narrow one is left alone."""
    narrow = _columns(["loss", "ECE"], [["CE", "1.23"], ["FL-3", "0.98"]])
    assert pdf.OVERFULL_PT and pdf_layout.natural_pt(narrow) <= pdf_layout.TEXT_WIDTH_PT
    header = ["dataset", "model", "stage"] + [f"M{i} Accuracy" for i in range(14)]
    rows = [["CIFAR-100", f"ResNet-{n}", "pre-T"] + [f"{90 + i / 10:.2f}" for i in range(14)] for n in (50, 110)]
    wide = _columns(header, rows)
    how, groups = pdf_layout.plan(wide)
    assert how == "split" and len(groups) in (2, 3)
    assert all(keep[:3] == [0, 1, 2] for keep, _ in groups)                     # the row's name in every part
    assert sorted(i for keep, _ in groups for i in keep[3:]) == list(range(3, 17))
    assert len({fit[0] for _, fit in groups}) == 1                               # one size for all parts
    for keep, (size, pt, widths) in groups:
        columns = [wide[i] for i in keep]
        assert all(w >= c.least_em() - 1e-9 for w, c in zip(widths, columns))
        assert sum(widths) * pt + 2 * pdf_layout.TABCOLSEP_PT * len(columns) <= pdf_layout.TEXT_WIDTH_PT + 1e-6
    text = _columns(["item", "what it states", "decided by"],
                    [["def-1", "a definition " * 12, "holds, in chapter 1 " * 4]] * 40)
    how, [(keep, (size, pt, widths))] = pdf_layout.plan(text)
    assert how == "portrait" and size in ("normalsize", "small") and text[1].wraps
    spec = pdf_layout.colspec(text, widths)
    assert spec.count("p{") == 3 and r"\raggedright" in spec


@needs_tex
def test_the_layout_s_latex_fits_a_long_equation_and_a_wide_table(tmp_path):
    """calibpdf.sty: a display equation too wide for the text breaks into lines at its break points, one that fits
    stays whole; the parts' and chapters' numbering commands compile. No overfull box over the threshold."""
    (tmp_path / "calibpdf.sty").write_bytes((ROOT / "book" / "_ext" / "calibpdf.sty").read_bytes())
    gauss = r"e^{-(c - x_{1})^2} + e^{-(c - x_{2})^2}"
    long_sum = " + ".join(rf"\frac{{x_{{{i}}} e^{{-(c - x_{{{i}}})^2}}}}{{{gauss}}}" for i in range(1, 9))
    pieces = "".join(rf"\calibpiece{{{p}}}" for p in pdf_layout.break_points(f"u = {long_sum}"))
    body = "\n".join((r"\calibunnumbered\section{Unnumbered}\calibnumbered\section{Numbered}",
                      rf"\calibdisplay{{u = {long_sum}}}{{{pieces}}}",
                      r"\calibdisplay{a = b}{\calibpiece{a}\calibpiece{{}= b}}"))
    report = pdf.pdf_report(_xelatex(tmp_path, body, preamble=r"\usepackage{amsmath}\usepackage{calibpdf}"))
    assert report.overfull == (), report.text()
    text = subprocess.run(["pdftotext", str(tmp_path / "doc.pdf"), "-"], capture_output=True, text=True).stdout
    assert text.startswith("Unnumbered") and re.search(r"\b1\s+Numbered", text)
