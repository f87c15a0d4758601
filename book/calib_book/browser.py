"""The built book as a reader sees it: every page opened in headless Chromium, offline, and checked.

``calib book check`` (and ``tests/test_chapters.py`` after the build) runs :func:`check_book` over
``_build/html``. Each page is loaded by Debian's ``chromium`` with every host name unresolvable, so nothing
can come from the network, and with enough virtual time for MathJax to typeset; the DOM it leaves is then
checked for what a reader would notice:

- **math**: every ``\\(...\\)`` and ``\\[...\\]`` that Sphinx wrote (``span.math``, ``div.math``) became a
  MathJax container, and MathJax reported no error (``mjx-merror``); no TeX delimiter is left in the text;
- **tables**: no Markdown table left as text (a line of ``| ... |`` cells or a ``|---|`` rule);
- **code**: no ``claim(`` call in a code cell the reader sees without opening a toggle;
- **figures**: every image's file exists and decodes, and its ``alt`` text describes it (not empty, not the
  file name);
- **links**: every link inside the book leads to a page that exists, and to an anchor on it when it names one;
- **offline**: no script or stylesheet is loaded from another host.

The static checks (images, links, network) read the HTML files; the rendered ones (math, tables, code) read the
DOM after Chromium has run the page's scripts.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlsplit

__all__ = ["PageReport", "find_chromium", "rendered_dom", "check_page", "book_pages", "check_book",
           "visible_code_lines"]

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "chrome")
_RAW_TABLE_ROW = re.compile(r"^\s*\|[^|]*\S[^|]*(\|[^|]*\S[^|]*)+\|\s*$")   # | a | b |: two cells or more
_TABLE_RULE = re.compile(r"\|\s*:?-{3,}:?\s*\|")
_TEX_DELIMITER = re.compile(r"\\\(|\\\)|\\\[|\\\]|\$\$")
_DOLLAR_MATH = re.compile(r"(?<![\w$])\$(?!\s)[^$\n]+?(?<!\s)\$(?![\w$])")   # $x$ left as text
_HASH_NAME = re.compile(r"(^|/)[0-9a-f]{16,}\.(png|jpe?g|svg|gif)$")


@dataclass
class PageReport:
    """What the checks found on one page: counts, and a list of problems (empty when the page reads well)."""

    page: str
    formulas: int = 0
    math_errors: int = 0
    images: int = 0
    links: int = 0
    visible_code_lines: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when the page has no problem."""
        return not self.problems


def find_chromium() -> str | None:
    """The path of a Chromium (or Chrome) executable, from ``$CALIB_CHROMIUM`` or the PATH; None if there is none."""
    explicit = os.environ.get("CALIB_CHROMIUM")
    if explicit:
        return explicit if Path(explicit).is_file() else None
    for name in CHROMIUM_NAMES:
        found = shutil.which(name)
        if found:
            return found
    return None


def rendered_dom(page: Path, chromium: str, width: int = 1280, budget_ms: int = 20000, timeout: float = 120) -> str:
    """The DOM of ``page`` after headless Chromium has run its scripts, with the network unreachable."""
    cmd = [chromium, "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-extensions",
           "--disable-background-networking", "--no-first-run", "--mute-audio",
           "--host-resolver-rules=MAP * ~NOTFOUND",     # every host name fails: the page gets nothing from outside
           f"--window-size={width},2000", f"--virtual-time-budget={budget_ms}", "--dump-dom", page.resolve().as_uri()]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0 or "<html" not in proc.stdout:
        raise RuntimeError(f"chromium could not render {page} (exit {proc.returncode}): {proc.stderr.strip()[-500:]}")
    return proc.stdout


def _soup(html: str):
    from bs4 import BeautifulSoup

    return BeautifulSoup(html, "html.parser")


def _is_toggled_away(element) -> bool:
    """True when the element sits in a collapsed toggle: a closed ``<details>``, outside its summary, or a
    dropdown admonition (an exercise's solution), which sphinx-togglebutton collapses."""
    for parent in element.parents:
        if parent.name == "div" and "dropdown" in parent.get("class", []):
            return True
        if parent.name == "details" and not parent.has_attr("open"):
            summary = parent.find("summary", recursive=False)
            return summary is None or summary not in element.parents
    return False


def _visible_code_cells(soup):
    """The code-cell inputs a reader sees without opening a toggle."""
    cells = []
    for cell in soup.select("div.cell"):
        classes = set(cell.get("class", []))
        if classes & {"tag_hide-input", "tag_remove-input", "tag_remove-cell"}:
            continue
        source = cell.select_one("div.cell_input")
        if source is not None and not _is_toggled_away(source):
            cells.append(source)
    return cells


def visible_code_lines(html: str) -> int:
    """Lines of code a reader sees on a page without opening a toggle (the built HTML suffices)."""
    return sum(len(cell.get_text().strip("\n").splitlines()) for cell in _visible_code_cells(_soup(html)))


def _visible_text_lines(soup) -> list[str]:
    """The text a reader sees, line by line: no code, no script, nothing inside a collapsed toggle, no math source."""
    soup = _soup(str(soup))
    for tag in soup(["script", "style", "noscript", "pre", "code", "mjx-assistive-mml", "math", "svg"]):
        tag.decompose()
    for details in soup.find_all("details"):
        if not details.has_attr("open"):
            for child in list(details.children):
                if getattr(child, "name", None) != "summary":
                    child.extract()
    body = soup.find("article") or soup.find("main") or soup.body or soup
    return [line for line in body.get_text("\n").splitlines() if line.strip()]


def _check_rendered(report: PageReport, dom: str) -> None:
    soup = _soup(dom)
    math = soup.select("span.math, div.math")
    report.formulas = len(soup.find_all("mjx-container"))
    untypeset = [m for m in math if m.find("mjx-container") is None]
    if untypeset:
        example = untypeset[0].get_text()[:80]
        report.problems.append(f"{len(untypeset)} formula(s) not typeset by MathJax, e.g. {example!r}")
    errors = soup.find_all("mjx-merror")
    report.math_errors = len(errors)
    if errors:
        example = errors[0].get("data-mjx-error", errors[0].get_text())[:120]
        report.problems.append(f"{len(errors)} MathJax error(s), e.g. {example!r}")
    lines = _visible_text_lines(soup)
    tex = [line for line in lines if _TEX_DELIMITER.search(line) or _DOLLAR_MATH.search(line)]
    if tex:
        report.problems.append(f"raw TeX in the text: {tex[0].strip()[:100]!r}")
    tables = [line for line in lines if _TABLE_RULE.search(line) or _RAW_TABLE_ROW.match(line)]
    if tables:
        report.problems.append(f"a Markdown table left as text: {tables[0].strip()[:100]!r}")
    code = _visible_code_cells(soup)
    claims = [c for c in code if "claim(" in c.get_text()]
    if claims:
        first = next(line for line in claims[0].get_text().splitlines() if "claim(" in line)
        report.problems.append(f"{len(claims)} visible code cell(s) call claim(), e.g. {first.strip()[:80]!r}")


def _target(page: Path, href: str, html_root: Path) -> tuple[Path | None, str]:
    parts = urlsplit(href)
    if parts.scheme or parts.netloc:
        return None, ""
    path = (page.parent / unquote(parts.path)).resolve() if parts.path else page.resolve()
    if path.is_dir():
        path = path / "index.html"
    return path, unquote(parts.fragment)


def _check_static(report: PageReport, page: Path, html_root: Path, ids_of) -> None:
    soup = _soup(page.read_text(encoding="utf-8", errors="replace"))
    report.visible_code_lines = sum(len(c.get_text().strip("\n").splitlines()) for c in _visible_code_cells(soup))
    for tag, attr in (("script", "src"), ("link", "href")):
        for element in soup.find_all(tag):
            url = element.get(attr)
            is_style_or_script = (tag == "script" or "stylesheet" in element.get("rel", [])
                                  or element.get("as") == "script")
            if not url or not is_style_or_script:
                continue
            if urlsplit(url).scheme in ("http", "https") or url.startswith("//"):
                report.problems.append(f"<{tag}> loads {url} from the network")
    for img in soup.find_all("img"):
        report.images += 1
        src, alt = img.get("src", ""), (img.get("alt") or "").strip()
        if src.startswith("data:"):
            pass
        else:
            path, _ = _target(page, src, html_root)
            if path is None:
                report.problems.append(f"image {src} comes from the network")
                continue
            if not path.is_file() or path.stat().st_size == 0:
                report.problems.append(f"image {src} does not exist")
                continue
            if path.suffix.lower() in (".png", ".jpg", ".jpeg", ".gif"):
                from PIL import Image

                try:
                    with Image.open(path) as im:
                        im.verify()
                except Exception as exc:    # noqa: BLE001 - any decoding failure is the finding
                    report.problems.append(f"image {src} does not decode: {exc}")
        if not alt or alt == src or _HASH_NAME.search(alt):
            report.problems.append(f"image {src[-60:]} has no alt text (alt={alt[:60]!r})")
    for a in soup.find_all("a", href=True):
        href = a["href"]
        if href.startswith(("mailto:", "javascript:")) or href == "#":
            continue
        path, fragment = _target(page, href, html_root)
        if path is None:
            continue
        report.links += 1
        if not path.exists():
            report.problems.append(f"link to {href} leads nowhere")
        elif fragment and path.suffix == ".html" and fragment not in ids_of(path):
            report.problems.append(f"link to {href}: no element with id {fragment!r} there")


def check_page(page: Path, html_root: Path, chromium: str, ids_of=None) -> PageReport:
    """Check one built page, statically and as rendered by Chromium; see the module docstring for what."""
    ids_of = ids_of or _ids_reader()
    report = PageReport(str(page.relative_to(html_root)))
    _check_static(report, page, html_root, ids_of)
    _check_rendered(report, rendered_dom(page, chromium))
    return report


def _ids_reader():
    cache: dict[Path, set[str]] = {}

    def ids_of(path: Path) -> set[str]:
        if path not in cache:
            text = path.read_text(encoding="utf-8", errors="replace")
            cache[path] = set(re.findall(r'\bid="([^"]+)"', text)) | set(re.findall(r'\bname="([^"]+)"', text))
        return cache[path]

    return ids_of


def book_pages(html_root: Path) -> list[Path]:
    """The pages a reader reaches: every HTML file of the build except Sphinx's sources and search machinery."""
    skip = {"_sources", "_static", "_images", "_modules"}
    return sorted(p for p in html_root.rglob("*.html") if not skip & set(p.relative_to(html_root).parts))


def check_book(html_root: Path, chromium: str | None = None, workers: int = 2,
               progress: bool = True) -> list[PageReport]:
    """Check every page of the built book in headless Chromium; one :class:`PageReport` per page."""
    html_root = Path(html_root)
    if not (html_root / "index.html").is_file():
        raise FileNotFoundError(f"html_root={str(html_root)!r} holds no built book (no index.html); "
                                f"run `calib book build` first.")
    chromium = chromium or find_chromium()
    if chromium is None:
        raise FileNotFoundError("no chromium on the PATH; install Debian's chromium (apt-get install chromium) "
                                "or set CALIB_CHROMIUM to a Chromium or Chrome executable.")
    pages = book_pages(html_root)
    ids_of = _ids_reader()
    from tqdm.auto import tqdm

    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        jobs = pool.map(lambda p: check_page(p, html_root, chromium, ids_of), pages)
        return list(tqdm(jobs, total=len(pages), desc="pages", unit="page", disable=not progress))
