"""What every page of the site offers besides itself (book/_ext/site_downloads.py, _config.yml): the whole book's PDF
and CITATION.cff, a downloaded notebook that runs, the repository's buttons once the project has an address, and the
book's own static files, kept up to date."""

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "book" / "_ext"))
try:
    import launch_sources
    import site_downloads
finally:
    sys.path.remove(str(ROOT / "book" / "_ext"))

CONFIG = yaml.safe_load((ROOT / "_config.yml").read_text())


def test_the_site_s_configuration_names_files_that_exist():
    """Issue 47, items 1, 10 and 11: the favicon, the scripts and stylesheets, the search scorer and the extension the
    configuration names are the repository's files."""
    sphinx = CONFIG["sphinx"]["config"]
    static = ROOT / sphinx["html_static_path"][0]
    assert (ROOT / CONFIG["html"]["favicon"]).is_file()
    for name in sphinx["html_js_files"] + sphinx["html_css_files"]:
        assert (static / name).is_file(), name
    assert "sidebar-toggles.js" in sphinx["html_js_files"] and "figure-zoom.js" in sphinx["html_js_files"]
    assert (ROOT / sphinx["html_search_scorer"]).is_file()
    assert CONFIG["sphinx"]["local_extensions"]["site_downloads"] == "book/_ext"
    assert "site_downloads" in sphinx["extensions"]
    assert sphinx["html_last_updated_fmt"]
    assert CONFIG["html"]["home_page_in_navbar"] is False      # the book's title once at the top of the contents


def _page_buttons(config: dict, pagename: str) -> list[dict]:
    """The header buttons a page gets under ``config`` (a _config.yml as a dict): jupyter-book's theme options,
    site_downloads' repository buttons, then the themes' page handlers in their order (pydata-sphinx-theme's edit URL,
    sphinx-book-theme's source buttons), launch_sources' and site_downloads' own."""
    from jupyter_book.config import get_final_config
    from pydata_sphinx_theme.edit_this_page import setup_edit_url
    from sphinx_book_theme.header_buttons import update_context_with_repository_info
    from sphinx_book_theme.header_buttons.source import add_source_buttons

    final, _ = get_final_config(user_yaml=config, cli_config={"latex_individualpages": False}, sourcedir=ROOT)
    theme = dict(final["html_theme_options"])
    app = SimpleNamespace(
        config=SimpleNamespace(html_theme_options=theme, html_context={}, calib_book_pdf="no-such.pdf",
                               calib_repository_buttons=final["calib_repository_buttons"]),
        builder=SimpleNamespace(theme_options=theme, format="html"), srcdir=str(ROOT / "_build" / "src"))
    site_downloads.repository_buttons(app)
    update_context_with_repository_info(app)
    context = {**app.config.html_context, "pagename": pagename, "page_source_suffix": ".ipynb", "header_buttons": [],
               "pathto": lambda name, resource=0: f"../{name}"}
    setup_edit_url(app, pagename, "page.html", context, None)
    add_source_buttons(app, pagename, "page.html", context, doctree=object())
    launch_sources.retarget_launch_buttons(app, pagename, "page.html", context, None)
    site_downloads.add_links(app, pagename, "page.html", context, None)
    return [button for group in context["header_buttons"] for button in group.get("buttons", [group])]


def test_the_repository_s_buttons_are_configured_and_appear_once_the_repository_has_an_address():
    """Issue 47, item 10: the repository, "open an issue" and "suggest edit" buttons are configured in full and shown
    once repository.url is set (jupyter-book refuses them without an address, which the project does not have yet);
    "suggest edit" opens the chapter's .md, the file the repository holds, and a generated page has none."""
    assert set(CONFIG["repository"]) >= {"url", "branch", "path_to_book"}
    assert CONFIG["repository"]["url"] == ""
    assert set(CONFIG["sphinx"]["config"]["calib_repository_buttons"]) == {
        "use_repository_button", "use_issues_button", "use_edit_page_button"}
    assert set(CONFIG["launch_buttons"]) >= {"binderhub_url", "notebook_interface"}
    chapter = "chapters/01-measuring-calibration"
    assert _page_buttons(CONFIG, chapter) == []
    published = {**CONFIG, "repository": {**CONFIG["repository"], "url": "https://github.com/owner/calib"}}
    urls = {b["label"]: b["url"] for b in _page_buttons(published, chapter)}
    assert urls == {"source-repository-button": "https://github.com/owner/calib",
                    "source-edit-button": f"https://github.com/owner/calib/edit/main/{chapter}.md",
                    "source-issues-button": "https://github.com/owner/calib/issues/new?title=Issue%20on%20page%20%2F"
                                            f"{chapter}.html&body=Your%20issue%20content%20here."}
    assert (ROOT / f"{chapter}.md").is_file() and not (ROOT / "book" / "claims.md").exists()
    labels = {b["label"] for b in _page_buttons(published, "book/claims")}   # generated by the build
    assert labels == {"source-repository-button", "source-issues-button"}


def test_the_footer_links_the_whole_book_s_pdf_or_says_that_this_build_has_none():
    """Issue 47, item 10: the download menu's ".pdf" prints the page at hand; every page links the book's PDF, which
    `make pdf` writes, or says how to get it."""
    built = site_downloads.footer_html("../book.pdf", "../CITATION.cff")
    assert '<a class="calib-book-pdf" href="../book.pdf">book.pdf</a>' in built
    assert '<a class="calib-citation" href="../CITATION.cff">CITATION.cff</a>' in built
    missing = site_downloads.footer_html(None, "../CITATION.cff")
    assert 'class="calib-book-pdf-missing"' in missing and "make pdf" in missing and "book.pdf" not in missing


def test_the_download_menu_offers_the_whole_book_when_the_pdf_is_built(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "latex").mkdir()
    app = SimpleNamespace(config=SimpleNamespace(calib_book_pdf="../latex/book.pdf"), srcdir=str(tmp_path / "src"),
                          builder=SimpleNamespace(format="html"))

    def menu():
        download = {"type": "group", "label": "download-buttons", "buttons": [
            {"type": "javascript", "javascript": "window.print()", "text": ".pdf", "label": "download-pdf-button"}]}
        context = {"header_buttons": [download], "pathto": lambda name, resource=0: f"../{name}"}
        site_downloads.add_links(app, "chapters/01", "page.html", context, None)
        return [(b["text"], b.get("url")) for b in download["buttons"]], context["theme_extra_footer"]

    buttons, footer = menu()
    assert buttons == [(".pdf (this page)", None)] and "calib-book-pdf-missing" in footer
    (tmp_path / "latex" / "book.pdf").write_bytes(b"%PDF-1.4\n")
    buttons, footer = menu()
    assert buttons == [(".pdf (this page)", None), (".pdf (whole book)", "../book.pdf")]
    assert 'href="../book.pdf"' in footer
    config = SimpleNamespace(calib_book_pdf="../latex/book.pdf", calib_site_state="")
    site_downloads.record_site_state(app, config)        # a new PDF writes every page again (their footers)
    assert config.calib_site_state.startswith("pdf 9 ")
    (tmp_path / "latex" / "book.pdf").unlink()
    site_downloads.record_site_state(app, config)
    assert config.calib_site_state == "no pdf"


def _notebook(tmp_path) -> dict:
    return {"nbformat": 4, "nbformat_minor": 5, "cells": [
        {"cell_type": "code", "id": "a", "metadata": {}, "execution_count": 1, "source": "import calib_book",
         "outputs": [{"output_type": "execute_result", "execution_count": 1, "metadata": {},
                      "data": {"text/plain": f"PosixPath('{tmp_path}/_build/src/chapters/t.csv')"}}]}],
        "metadata": {"papermill": {"input_path": f"{tmp_path}/_build/notebooks/01.ipynb",
                                   "output_path": f"{tmp_path}/_build/src/chapters/01.ipynb", "duration": 1.5}}}


def test_a_downloaded_notebook_finds_the_book_s_machinery_in_a_checkout(tmp_path):
    """Issue 47, item 10: the .ipynb download imported calib_book, which no package ships, and failed. Its copy in the
    site starts with a note and a setup cell that puts the checkout's book/ folder on the path (added once); the
    paths of the machine that executed it are gone from its metadata and outputs."""
    notebook = site_downloads.with_setup_cell(_notebook(tmp_path), "01-measuring-calibration", "The book")
    again = site_downloads.with_setup_cell(json.loads(json.dumps(notebook)), "01-measuring-calibration", "The book")
    assert again == notebook and len(notebook["cells"]) == 3
    earlier = json.loads(json.dumps(notebook))
    earlier["cells"][1]["source"] = "# an earlier build's setup"                    # replaced, not kept beside
    assert site_downloads.with_setup_cell(earlier, "01-measuring-calibration", "The book") == notebook
    note, setup = notebook["cells"][:2]
    assert "pip install -e '.[book]'" in note["source"] and "calib book run --only 01-measuring-calibration" in \
        note["source"]
    assert notebook["metadata"]["papermill"] == {"duration": 1.5}
    text = site_downloads.without_checkout(json.dumps(_notebook(tmp_path)), tmp_path)
    assert str(tmp_path) not in text and "PosixPath('_build/src/chapters/t.csv')" in text
    checkout = tmp_path / "checkout"
    (checkout / "book" / "calib_book").mkdir(parents=True)
    (checkout / "book" / "calib_book" / "__init__.py").write_text("FOUND = 'yes'\n")
    (checkout / "chapters").mkdir()
    run = [sys.executable, "-c", setup["source"] + "\nimport calib_book; print(calib_book.FOUND)\n"
                                                   "print(os.environ['CALIB_LEDGER'] == os.devnull)"]
    inside = subprocess.run(run, cwd=checkout / "chapters", capture_output=True, text=True, env={"PATH": ""})
    # calib_book found; the chapter's claims kept out of the checkout's ledger, which only the book runner writes
    assert inside.returncode == 0 and inside.stdout.split() == ["yes", "True"], inside.stderr
    outside = subprocess.run(run, cwd=tmp_path, capture_output=True, text=True, env={"PATH": ""})
    assert outside.returncode == 1 and "runs inside a checkout of the book's repository" in outside.stderr
    named = subprocess.run(run, cwd=tmp_path, capture_output=True, text=True,
                           env={"PATH": "", "CALIB_BOOK_ROOT": str(checkout)})
    assert named.returncode == 0 and named.stdout.split() == ["yes", "True"], named.stderr


def test_the_site_gets_the_static_files_that_changed_even_when_no_page_is_rewritten(tmp_path):
    """Sphinx copies html_static_path into the site only when it writes a page: after a change to claims.css alone,
    `calib book build` found no page out of date and left the old stylesheet in the site."""
    (tmp_path / "src" / "book" / "_static").mkdir(parents=True)
    (tmp_path / "html" / "_static").mkdir(parents=True)
    (tmp_path / "src" / "book" / "_static" / "claims.css").write_text("new")
    (tmp_path / "src" / "book" / "_static" / "same.js").write_text("same")
    (tmp_path / "html" / "_static" / "claims.css").write_text("old")
    (tmp_path / "html" / "_static" / "same.js").write_text("same")
    app = SimpleNamespace(outdir=str(tmp_path / "html"), confdir=str(tmp_path / "src"),
                          config=SimpleNamespace(html_static_path=["book/_static"]))
    assert site_downloads.sync_static(app) == [tmp_path / "html" / "_static" / "claims.css"]
    assert (tmp_path / "html" / "_static" / "claims.css").read_text() == "new"
    assert site_downloads.sync_static(app) == []


def test_a_repository_button_the_theme_does_not_have_is_refused():
    app = SimpleNamespace(config=SimpleNamespace(html_theme_options={}, calib_repository_buttons=["use_blog_button"]),
                          builder=None)
    with pytest.raises(ValueError, match=r"calib_repository_buttons=\['use_blog_button'\]: not a repository button"):
        site_downloads.repository_buttons(app)
