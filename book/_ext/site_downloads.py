"""What every page of the site offers besides itself: the whole book's PDF, CITATION.cff, a notebook that runs, and
the repository's buttons.

- **The whole book as one PDF.** ``make pdf`` writes ``_build/latex/book.pdf`` (``calib_book.pdf``); the download
  menu's own ".pdf" prints the page at hand. When the PDF is there (``calib_book_pdf``, a path from the book's
  source folder: ``_build/src/../latex/book.pdf``), the HTML build copies it into the site as ``book.pdf`` and every
  page links it, in its footer and in the download menu; when it is not, the footer says so and how to build it.
  The student edition, staged in ``_build/student/src``, finds no PDF there: the book's PDF holds the solutions.
- **CITATION.cff**, the repository's citation file, copied into the site and linked from every page's footer.
- **A notebook that runs.** A chapter's ``.ipynb`` download (``_sources/chapters/NN.ipynb``, the executed notebook)
  imports ``calib_book``, the book's machinery, which no package ships: the site's copy starts with a note and a
  cell that finds the checkout of the repository it is opened in and puts its ``book/`` folder on the path (after
  ``pip install -e '.[book]'`` there, as the README says); papermill's record of the paths of the machine that
  executed it is dropped from its metadata, and an output that shows a path of the checkout names it as the
  repository does.
- **The book's static files** (its CSS and scripts): Sphinx copies them into the site only when it writes a page, so
  a change to a stylesheet alone reached the site only with the next change to a page; they are brought up to date at
  the end of every build.
- **The repository's buttons** (the repository, "open an issue", "suggest edit"; ``calib_repository_buttons``) need
  ``repository.url`` (``_config.yml``): they are turned on here once it is set, and stay off while it is empty, as it
  is until the project has a public address (jupyter-book refuses them without one). A page the build generates (the
  ledger, the errata, ...) has no source in the repository to edit: its "suggest edit" is dropped.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

#: The repository's buttons of sphinx-book-theme, which need ``repository_url``.
REPOSITORY_BUTTONS = ("use_repository_button", "use_issues_button", "use_edit_page_button", "use_source_button")
#: The site's copy of the whole book's PDF and of the citation file, at the site's root.
PDF_NAME, CITATION_NAME = "book.pdf", "CITATION.cff"
#: Marks the setup cell added to a downloaded notebook (in its metadata), so that it is added once.
SETUP_MARK = "calib-download-setup"

SETUP_NOTE = """**Running this notebook.** It is a chapter of the book *{title}*, as the book executed it. It imports
`calib`, the library, and `calib_book`, the book's machinery, which no package ships: open it inside a checkout of
the book's repository, after `pip install -e '.[book]'` there (the README's install; `make book` does the same in a
virtual environment). The cell below puts the checkout's `book/` folder on Python's path; set the environment
variable `CALIB_BOOK_ROOT` to the checkout when the notebook is opened outside it. Its claims are shown here and
not added to the book's ledger; `calib book run --only {name}` executes the chapter as the book does."""

SETUP_CODE = """# Setup for a notebook downloaded from the book's site: calib_book from the checkout's book/ folder.
import os
import sys
from pathlib import Path

_start = Path(os.environ.get("CALIB_BOOK_ROOT") or Path.cwd()).resolve()
_checkout = next((folder for folder in (_start, *_start.parents) if (folder / "book" / "calib_book").is_dir()), None)
if _checkout is None:
    raise RuntimeError("this notebook runs inside a checkout of the book's repository (the folder with _toc.yml and "
                       "book/calib_book/), after `pip install -e '.[book]'` there: open it there, or set "
                       "CALIB_BOOK_ROOT to the checkout.")
if str(_checkout / "book") not in sys.path:
    sys.path.insert(0, str(_checkout / "book"))
# the chapter's claims stay in this notebook: the checkout's ledger, _build/claims.jsonl, is the book runner's
os.environ.setdefault("CALIB_LEDGER", os.devnull)"""


def repository_root(srcdir: Path) -> Path | None:
    """The checkout the book is built from: the nearest folder at or above the book's source folder that holds
    ``_toc.yml`` and the library ``calib/`` (the staged source ``_build/src`` holds the former only)."""
    for folder in (srcdir, *srcdir.parents):
        if (folder / "_toc.yml").is_file() and (folder / "calib").is_dir():
            return folder
    return None


def book_pdf(app) -> Path | None:
    """The whole book's PDF for this build, or None when ``make pdf`` has not written it."""
    pdf = (Path(app.srcdir) / app.config.calib_book_pdf).resolve()
    return pdf if pdf.is_file() else None


def repository_buttons(app) -> None:
    """The repository's buttons named by ``calib_repository_buttons`` (sphinx-book-theme's ``use_*_button``
    options), on when ``repository.url`` is set and off while it is empty: they would point nowhere (jupyter-book
    refuses them in ``html:`` without an address, and sphinx-book-theme stops the build on an empty one)."""
    unknown = sorted(set(app.config.calib_repository_buttons) - set(REPOSITORY_BUTTONS))
    if unknown:
        raise ValueError(f"calib_repository_buttons={unknown}: not a repository button of sphinx-book-theme; name "
                         f"some of {', '.join(REPOSITORY_BUTTONS)}.")
    # the configuration's options, and the builder's copy of them, which the theme reads (pydata-sphinx-theme's
    # get_theme_options_dict)
    for options in (app.config.html_theme_options, getattr(app.builder, "theme_options", None)):
        if isinstance(options, dict):
            has_address = bool(str(options.get("repository_url") or "").strip())
            for key in REPOSITORY_BUTTONS:
                options[key] = has_address and key in app.config.calib_repository_buttons


def footer_html(pdf_url: str | None, citation_url: str | None) -> str:
    """The line every page's footer gets: the whole book's PDF (or why there is none) and the citation file."""
    if pdf_url:
        pdf = (f'The whole book as one PDF: <a class="calib-book-pdf" href="{pdf_url}">{PDF_NAME}</a> '
               f'(the download menu\'s ".pdf" prints this page only).')
    else:
        pdf = ('<span class="calib-book-pdf-missing">The whole book as one PDF is not part of this build: '
               '<code>make pdf</code> writes it, and the next <code>make book</code> links it here.</span>')
    citation = (f' To cite the book: its introduction, or <a class="calib-citation" href="{citation_url}">'
                f'{CITATION_NAME}</a>.' if citation_url else "")
    return f'<p class="calib-downloads">{pdf}{citation}</p>'


def add_links(app, pagename, templatename, context, doctree) -> None:
    """Every page: the footer's line (PDF, citation file) and the whole book's PDF in the download menu; and no
    "suggest edit" for a page whose source the repository does not hold."""
    if app.builder.format != "html" or "pathto" not in context:
        return
    pathto = context["pathto"]
    pdf_url = pathto(PDF_NAME, 1) if book_pdf(app) else None
    root = repository_root(Path(app.srcdir))
    citation_url = pathto(CITATION_NAME, 1) if root and (root / CITATION_NAME).is_file() else None
    context["theme_extra_footer"] = (context.get("theme_extra_footer") or "") + footer_html(pdf_url, citation_url)
    for group in context.get("header_buttons", []):
        buttons = group.get("buttons")
        if not isinstance(buttons, list):
            continue
        if group.get("label") == "download-buttons":
            for button in buttons:
                if button.get("label") == "download-pdf-button":        # window.print(): this page only
                    button["text"] = ".pdf (this page)"
            if pdf_url:
                buttons.append({"type": "link", "url": pdf_url, "text": ".pdf (whole book)", "icon": "fas fa-book",
                                "tooltip": "Download the whole book as one PDF", "label": "download-book-pdf-button"})
        if group.get("label") == "source-buttons" and root is not None:
            suffix = context.get("page_source_suffix") or ""
            held = any((root / f"{pagename}{s}").is_file() for s in (".md", suffix) if s)
            if not held:
                group["buttons"] = [b for b in buttons if b.get("label") != "source-edit-button"]


def with_setup_cell(notebook: dict, name: str, title: str) -> dict:
    """``notebook`` (nbformat 4, as JSON) with the download's note and setup cell first (once: those of an earlier
    build are replaced), and without papermill's input and output paths."""
    cells = [cell for cell in notebook.get("cells", []) if not cell.get("metadata", {}).get(SETUP_MARK)]
    note = {"cell_type": "markdown", "metadata": {SETUP_MARK: True},
            "source": SETUP_NOTE.format(title=title, name=name)}
    code = {"cell_type": "code", "execution_count": None, "metadata": {SETUP_MARK: True}, "outputs": [],
            "source": SETUP_CODE}
    if notebook.get("nbformat", 4) >= 4 and notebook.get("nbformat_minor", 0) >= 5:
        note["id"], code["id"] = "calib-download-note", "calib-download-setup"
    notebook["cells"] = [note, code] + cells
    papermill = notebook.get("metadata", {}).get("papermill")
    if isinstance(papermill, dict):
        for key in ("input_path", "output_path", "cwd"):
            papermill.pop(key, None)
    return notebook


def sync_static(app) -> list[Path]:
    """Copy each file of the book's static folders (``html_static_path``: its CSS and scripts) that the site's
    ``_static`` lacks or holds in another version; return what was copied. Sphinx copies them only when it writes a
    page: after a change to a stylesheet or a script alone, its incremental build finds "no targets out of date" and
    left the site with the old file."""
    copied = []
    target_root = Path(app.outdir) / "_static"
    for folder in app.config.html_static_path:
        source_root = Path(app.confdir) / folder
        for source in sorted(source_root.rglob("*")) if source_root.is_dir() else []:
            target = target_root / source.relative_to(source_root)
            if source.is_file() and (not target.is_file() or target.read_bytes() != source.read_bytes()):
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, target)
                copied.append(target)
    return copied


def finish(app, exception) -> None:
    """Copy the PDF and CITATION.cff into the site (or remove a stale PDF), bring the site's copy of the book's static
    files up to date, and give every downloadable chapter notebook its setup cell."""
    if exception is not None or app.builder.format != "html":
        return
    out = Path(app.outdir)
    sync_static(app)
    pdf = book_pdf(app)
    if pdf is not None:
        shutil.copy2(pdf, out / PDF_NAME)
    else:
        (out / PDF_NAME).unlink(missing_ok=True)
    root = repository_root(Path(app.srcdir))
    if root is not None and (root / CITATION_NAME).is_file():
        shutil.copy2(root / CITATION_NAME, out / CITATION_NAME)
    title = app.config.html_title or app.config.project
    for path in sorted((out / "_sources").rglob("*.ipynb")):
        text = path.read_text(encoding="utf-8")
        notebook = json.loads(without_checkout(text, root)) if root is not None else json.loads(text)
        updated = json.dumps(with_setup_cell(notebook, path.stem, title), ensure_ascii=False, indent=1) + "\n"
        if updated != text:
            path.write_text(updated, encoding="utf-8")


def without_checkout(text: str, root: Path) -> str:
    """``text`` (a notebook as JSON) with the checkout's folder on the building machine written as the repository
    names its files: ``/home/ada/calib/_build/src/x.csv`` becomes ``_build/src/x.csv`` (an output that shows a path
    the chapter wrote to)."""
    for folder in dict.fromkeys((str(root), str(Path(root).resolve()))):
        text = text.replace(folder + "/", "").replace(json.dumps(folder)[1:-1] + "/", "")
    return text


def record_site_state(app, config) -> None:
    """Whether the PDF is there (and which) in a configuration value of the HTML output: a page's footer and download
    menu depend on it, so that a change writes every page again (Sphinx's build info hashes these values), where
    otherwise only the pages whose sources changed would say so."""
    pdf = (Path(app.srcdir) / config.calib_book_pdf).resolve()
    config.calib_site_state = f"pdf {pdf.stat().st_size} {pdf.stat().st_mtime_ns}" if pdf.is_file() else "no pdf"


def setup(app):
    app.add_config_value("calib_book_pdf", "../latex/book.pdf", "html")
    app.add_config_value("calib_site_state", "", "html")
    app.connect("config-inited", record_site_state)
    app.add_config_value("calib_repository_buttons", [], "html")
    app.connect("builder-inited", repository_buttons)
    app.connect("html-page-context", add_links, priority=503)    # after the theme's buttons (501), launch_sources (502)
    app.connect("build-finished", finish)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
