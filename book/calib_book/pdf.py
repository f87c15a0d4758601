"""The whole book as one PDF (``make pdf``): jupyter-book's LaTeX builder on the executed, staged book.

``calib book run`` and ``calib book build`` leave the executed chapters and the generated back matter in
``_build/src`` (see :mod:`calib_book.runner`); :func:`build_pdf` renders that same source with Sphinx's LaTeX
builder and latexmk (XeLaTeX, set in ``_config.yml``, so that the book's Unicode, γ, ≈, ±, typesets) into
``_build/latex/book.pdf``. Figures come from each notebook's 2x PNG (LaTeX does not read the SVG the HTML shows;
:func:`calib.plots.use_web_figures` writes both), the bibliography from ``book/references.bib``.

:func:`pdf_report` says what a reader of the PDF would miss: its page count (``pdfinfo``), the characters its
fonts lacked (the LaTeX log's ``Missing character`` lines) and fonts not embedded (``pdffonts``).

Part of the book's machinery (:mod:`calib_book`); it reads :mod:`calib_book.runner`'s layout only.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

__all__ = ["TEX_TOOLS", "PdfToolsMissing", "PdfReport", "missing_tools", "build_pdf", "pdf_report", "main"]

#: The programs the PDF needs, latexmk and XeLaTeX (Debian's latexmk and texlive-xetex), and pdfinfo and
#: pdffonts (poppler-utils) for :func:`pdf_report`.
TEX_TOOLS = ("latexmk", "xelatex", "pdfinfo", "pdffonts")

# XeTeX's log line: "Missing character: There is no ☃ (U+2603) in font [lmroman10-regular]:mapping=tex-text;!"
_MISSING_CHARACTER = re.compile(r"Missing character: There is no (\S+)(?: \(U\+[0-9A-F]+\))? in font ([^!\n]+)")


class PdfToolsMissing(RuntimeError):
    """A program the PDF build needs is not installed (see :data:`TEX_TOOLS`)."""


@dataclass(frozen=True)
class PdfReport:
    """What :func:`pdf_report` found in a built PDF and its LaTeX log."""

    path: Path
    pages: int
    size_bytes: int
    missing_characters: tuple[str, ...]       # "γ in font [lmroman10-regular]...", one per (character, font)
    unembedded_fonts: tuple[str, ...]

    def text(self) -> str:
        """One line for the console: path, pages, size, the first missing characters, unembedded fonts."""
        return (f"{self.path}: {self.pages} pages, {self.size_bytes / 1e6:.1f} MB; "
                f"{len(self.missing_characters)} missing characters"
                + (f" ({', '.join(self.missing_characters[:5])})" if self.missing_characters else "")
                + f"; {len(self.unembedded_fonts)} fonts not embedded")


def missing_tools() -> list[str]:
    """The programs of :data:`TEX_TOOLS` not on ``PATH``."""
    return [tool for tool in TEX_TOOLS if shutil.which(tool) is None]


def build_pdf(root: Path) -> Path:
    """Render the staged, executed book at ``root`` (``_build/src``) as ``_build/latex/book.pdf``; return its path.

    Raises
    ------
    PdfToolsMissing
        When latexmk, XeLaTeX, pdfinfo or pdffonts is missing (``make pdf`` installs them with apt).
    FileNotFoundError
        When the book has not been run and built yet (``_build/src/book/claims.md`` is written by
        ``calib book build``): run ``make book`` first.
    RuntimeError
        When jupyter-book or latexmk fails; the message names the log to read.
    """
    root = Path(root).resolve()
    src = root / "_build" / "src"
    lacking = missing_tools()
    if lacking:
        raise PdfToolsMissing(f"the PDF needs {', '.join(lacking)}, not found on PATH: on Debian run `make pdf` as "
                              "root (it installs latexmk, texlive-xetex, texlive-latex-extra, "
                              "texlive-fonts-recommended, tex-gyre, fonts-freefont-otf and poppler-utils) or install "
                              "them yourself.")
    if not (src / "book" / "claims.md").is_file():
        raise FileNotFoundError(f"{src} holds no built book (no book/claims.md): run `make book` (or `calib book "
                                "run` then `calib book build`) before `make pdf`.")
    for name in ("_config.yml", "_toc.yml"):      # the PDF's own settings are read now, not as `make book` staged them
        if (root / name).read_bytes() != (src / name).read_bytes():
            shutil.copy2(root / name, src / name)
    cmd = [sys.executable, "-c", "from jupyter_book.cli.main import main; main()", "build", str(src), "--path-output",
           str(root), "--builder", "pdflatex"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join((str(root), str(root / "book"),
                                                        os.environ.get("PYTHONPATH", "")))}
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=root, env=env)
    pdf = root / "_build" / "latex" / "book.pdf"
    print(f"[book] PDF build: {time.perf_counter() - start:.1f} s")
    if proc.returncode != 0 or not pdf.is_file():
        raise RuntimeError(f"the PDF build failed (exit {proc.returncode}); read {pdf.with_suffix('.log')} for the "
                           "first LaTeX error.")
    return pdf


def pdf_report(pdf: Path) -> PdfReport:
    """Page count and size of ``pdf``, the characters missing from its fonts (from the LaTeX log beside it, same
    name with ``.log``) and its fonts that are not embedded."""
    pdf = Path(pdf)
    info = subprocess.run(["pdfinfo", str(pdf)], capture_output=True, text=True, check=True).stdout
    pages = int(re.search(r"^Pages:\s+(\d+)", info, re.M).group(1))
    log = pdf.with_suffix(".log")
    text = log.read_text(encoding="utf-8", errors="replace") if log.is_file() else ""
    missing = tuple(sorted({f"{m.group(1)} in font {m.group(2)}" for m in _MISSING_CHARACTER.finditer(text)}))
    fonts = subprocess.run(["pdffonts", str(pdf)], capture_output=True, text=True, check=True).stdout.splitlines()
    # pdffonts: name, type, encoding, emb, sub, uni, object ID; the columns after the name are fixed words
    unembedded = tuple(line.split()[0] for line in fonts[2:] if len(line.split()) >= 7 and line.split()[-5] == "no")
    return PdfReport(pdf, pages, pdf.stat().st_size, missing, unembedded)


def main(argv: list[str] | None = None) -> int:
    """``python -m calib_book.pdf [ROOT]``: build the PDF of the book at ROOT (default: the working directory)
    and print its report; exit 1 when a character is missing from its fonts."""
    args = sys.argv[1:] if argv is None else argv
    try:
        pdf = build_pdf(Path(args[0]) if args else Path.cwd())
    except (PdfToolsMissing, FileNotFoundError, RuntimeError) as exc:
        print(f"[book] {exc}", file=sys.stderr)
        return 2
    report = pdf_report(pdf)
    print(f"[book] {report.text()}")
    return 1 if report.missing_characters else 0


if __name__ == "__main__":
    sys.exit(main())
