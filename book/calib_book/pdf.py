"""The whole book as one PDF (``make pdf``): jupyter-book's LaTeX builder on the executed, staged book.

``calib book run`` and ``calib book build`` leave the executed chapters and the generated back matter in
``_build/src`` (see :mod:`calib_book.runner`); :func:`build_pdf` renders that same source with Sphinx's LaTeX
builder and latexmk (XeLaTeX, set in ``_config.yml``, so that the book's Unicode, γ, ≈, ±, typesets) into
``_build/latex/book.pdf``. Figures come from each notebook's 2x PNG (LaTeX does not read the SVG the HTML shows;
:func:`calib.plots.use_web_figures` writes both), the bibliography from ``book/references.bib``.

:func:`pdf_report` says what a reader of the PDF would miss: its page count (``pdfinfo``), the characters its
fonts lacked (the LaTeX log's ``Missing character`` lines), fonts not embedded (``pdffonts``), what runs off the
page (:func:`overfull_boxes`, the log's ``Overfull \\hbox`` lines over :data:`OVERFULL_PT`: a table or an equation
cut at the margin) and references no label defines (:func:`undefined_references`, printed "??").

The layout that makes the PDF print what the site shows (parts and chapters, no folded code, claim blocks, tables and
equations that fit) is the Sphinx extension ``book/_ext/pdf_layout.py``; :func:`build_pdf` brings the staged book's
copy of ``book/_ext`` up to date, as it does ``_config.yml``.

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

__all__ = ["TEX_TOOLS", "OVERFULL_PT", "PdfToolsMissing", "OverfullBox", "PdfReport", "missing_tools", "build_pdf",
           "overfull_boxes", "undefined_references", "pdf_report", "main"]

#: The programs the PDF needs, latexmk and XeLaTeX (Debian's latexmk and texlive-xetex), and pdfinfo and
#: pdffonts (poppler-utils) for :func:`pdf_report`.
TEX_TOOLS = ("latexmk", "xelatex", "pdfinfo", "pdffonts")

# XeTeX's log line: "Missing character: There is no ☃ (U+2603) in font [lmroman10-regular]:mapping=tex-text;!"
_MISSING_CHARACTER = re.compile(r"Missing character: There is no (\S+)(?: \(U\+[0-9A-F]+\))? in font ([^!\n]+)")
# TeX's log line for a line too wide: "Overfull \hbox (12.3pt too wide) in paragraph at lines 120--124" (text, or the
# cell of a table's wrapping column), "... in alignment at lines 80--96" (a table's row), "... detected at line 88"
# (a box built whole, such as a display equation).
_OVERFULL = re.compile(r"^Overfull \\hbox \((\d+(?:\.\d+)?)pt too wide\) "
                       r"(?:in (paragraph|alignment) at lines (\d+)--(\d+)|(detected) at line (\d+))", re.M)

# LaTeX's warning for a cross-reference that no label defines ("Exercise ??" in the PDF): "LaTeX Warning: Reference
# `chapters/01:ex-a' on page 3 undefined on input line 9" (or "Hyper reference"); the log wraps lines at 79 characters.
_UNDEFINED_REFERENCE = re.compile(r"LaTeX Warning: (?:Hyper r|R)eference `([^']+)' on page")

#: Overfull boxes wider than this many points past the margin (of a text 469pt wide) are reported. Less is a
#: hyphen or a comma in the margin; more is a table's numbers or an equation's terms cut off.
OVERFULL_PT = 20.0


class PdfToolsMissing(RuntimeError):
    """A program the PDF build needs is not installed (see :data:`TEX_TOOLS`)."""


@dataclass(frozen=True)
class OverfullBox:
    """One ``Overfull \\hbox`` of the LaTeX log: how far past the margin, in what, at which lines of the ``.tex``."""

    points: float
    kind: str             # "paragraph" (text, a wrapping table cell), "alignment" (a table's row) or "detected"
    first_line: int
    last_line: int

    def text(self) -> str:
        """``"49.8pt too wide (paragraph, lines 120--124)"``."""
        lines = (f"line {self.first_line}" if self.first_line == self.last_line
                 else f"lines {self.first_line}--{self.last_line}")
        return f"{self.points:.1f}pt too wide ({self.kind}, {lines})"


def overfull_boxes(log: str, threshold: float = OVERFULL_PT) -> tuple[OverfullBox, ...]:
    """The ``Overfull \\hbox`` entries of a LaTeX log (its text) more than ``threshold`` points too wide, widest
    first; a longtable reports each of its chunks, so one table may give several."""
    found = []
    for m in _OVERFULL.finditer(log):
        points = float(m.group(1))
        if points > threshold:
            if m.group(2):
                found.append(OverfullBox(points, m.group(2), int(m.group(3)), int(m.group(4))))
            else:
                found.append(OverfullBox(points, m.group(5), int(m.group(6)), int(m.group(6))))
    return tuple(sorted(found, key=lambda box: (-box.points, box.first_line)))


def undefined_references(log: str) -> tuple[str, ...]:
    """The labels the PDF refers to and no label defines, from the LaTeX log's warnings (its lines of 79 characters
    joined back), sorted, each once."""
    lines, joined = log.split("\n"), []
    for line in lines:
        if joined and len(joined[-1]) >= 79:          # TeX's max_print_line: a longer line went on in the next one
            joined[-1] += line
        else:
            joined.append(line)
    return tuple(sorted(set(_UNDEFINED_REFERENCE.findall("\n".join(joined)))))


@dataclass(frozen=True)
class PdfReport:
    """What :func:`pdf_report` found in a built PDF and its LaTeX log."""

    path: Path
    pages: int
    size_bytes: int
    missing_characters: tuple[str, ...]       # "γ in font [lmroman10-regular]...", one per (character, font)
    unembedded_fonts: tuple[str, ...]
    overfull: tuple[OverfullBox, ...] = ()    # the log's overfull boxes over OVERFULL_PT, widest first
    undefined: tuple[str, ...] = ()           # labels referred to and never defined ("Exercise ??")

    def text(self) -> str:
        """One line for the console: path, pages, size, the first missing characters, unembedded fonts, the widest
        overfull boxes, the first undefined references."""
        return (f"{self.path}: {self.pages} pages, {self.size_bytes / 1e6:.1f} MB; "
                f"{len(self.missing_characters)} missing characters"
                + (f" ({', '.join(self.missing_characters[:5])})" if self.missing_characters else "")
                + f"; {len(self.unembedded_fonts)} fonts not embedded"
                + f"; {len(self.overfull)} overfull boxes over {OVERFULL_PT:g}pt"
                + (f" ({', '.join(box.text() for box in self.overfull[:3])})" if self.overfull else "")
                + f"; {len(self.undefined)} undefined references"
                + (f" ({', '.join(self.undefined[:3])})" if self.undefined else ""))


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
    # the PDF's own settings and Sphinx extensions are read now, not as `make book` staged them
    for name in ("_config.yml", "_toc.yml", *(p.relative_to(root).as_posix() for p in sorted(
            (root / "book" / "_ext").glob("*")) if p.is_file())):
        if not (src / name).is_file() or (root / name).read_bytes() != (src / name).read_bytes():
            (src / name).parent.mkdir(parents=True, exist_ok=True)
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
    """Page count and size of ``pdf``, the characters missing from its fonts, the boxes too wide for the page and
    the undefined references (from the LaTeX log beside it, same name with ``.log``), and its fonts that are not
    embedded."""
    pdf = Path(pdf)
    info = subprocess.run(["pdfinfo", str(pdf)], capture_output=True, text=True, check=True).stdout
    pages = int(re.search(r"^Pages:\s+(\d+)", info, re.M).group(1))
    log = pdf.with_suffix(".log")
    text = log.read_text(encoding="utf-8", errors="replace") if log.is_file() else ""
    missing = tuple(sorted({f"{m.group(1)} in font {m.group(2)}" for m in _MISSING_CHARACTER.finditer(text)}))
    fonts = subprocess.run(["pdffonts", str(pdf)], capture_output=True, text=True, check=True).stdout.splitlines()
    # pdffonts: name, type, encoding, emb, sub, uni, object ID; the columns after the name are fixed words
    unembedded = tuple(line.split()[0] for line in fonts[2:] if len(line.split()) >= 7 and line.split()[-5] == "no")
    return PdfReport(pdf, pages, pdf.stat().st_size, missing, unembedded, overfull_boxes(text),
                     undefined_references(text))


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
