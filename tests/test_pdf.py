"""The book as one PDF (calib_book.pdf, `make pdf`): built with XeLaTeX when TeX Live is installed, with every
character in its fonts and every font embedded.

`make test` does not build the whole book's PDF (minutes of LaTeX): `test_the_book_pdf` builds it when
``CALIB_BUILD_PDF=1`` is set, and otherwise checks the ``_build/latex/book.pdf`` that `make pdf` left, if any. The
other tests compile a one-page document, so they run wherever XeLaTeX is, and skip with the reason elsewhere.
"""

import os
import subprocess
from pathlib import Path

import pytest

from calib_book import pdf, runner
from calib_book.timeouts import scaled  # a subprocess's time limit, scaled by the machine's load

ROOT = runner.repo_root(__file__)
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


def _xelatex(tmp_path: Path, body: str) -> Path:
    tex = tmp_path / "doc.tex"
    tex.write_text("\\documentclass{article}\n\\begin{document}\n" + body + "\n\\end{document}\n", encoding="utf-8")
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
