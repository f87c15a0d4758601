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
- **offline**: no script or stylesheet is loaded from another host;
- **claims** (the ledger, errata, reproduction and released-code pages, and the claim blocks under the chapters'
  cells): no TeX command left as text and no ASCII math (``<=``, ``>=``, ``!=``, ``^{``, ``p_hat``,
  ``sqrt(``...) outside math and code in a statement, quote, correction or remark (the evidence, measured numbers
  as the chapter printed them, is not judged); the text of each claim has a WCAG contrast of at least 4.5:1
  against its background in the light and the dark theme (pydata-sphinx-theme's ``html[data-theme="dark"]``);
- **width**: at 412 px (a phone) and 1280 px (a desktop) the page does not pan sideways, and nothing in the
  article is wider than its column unless it scrolls in a box with a visible cue (``scroll-cue.js``); the page is
  loaded and typeset at 1280 px and then made narrower, as a reader narrows a window (the page's resize handlers
  run; on the whole book, the same findings as pages loaded at 412 px, in about a fifth less time);
- **console**: no error is logged (an uncaught exception, a script that does not parse, ``console.error``);
- **contents buttons**: each sidebar button a reader sees (the theme's ``.primary-toggle`` and ``.secondary-toggle``)
  does something when clicked, at every width: opens its drawer on a phone, folds the sidebar on a desktop;
- **figures**: the smallest text of each figure (an SVG's, read from the file) is at least 9 px on screen, or a tap
  on the figure opens it full-size (``figure-zoom.js``, or a link to the image file) where it is;
- **lines**: no code block wraps its lines (Python's indentation is lost), no inline code breaks between two letters,
  and on a phone no table cell of at most 40 characters takes more than two lines; links in note boxes have a
  contrast of at least 4.5:1 in both themes, and no claim block sits in a box of another colour;
- **the site**: no page, nor its downloadable notebook, names a folder of the machine that built it (the checkout,
  /tmp, /work, /root, a home folder); every page of the book links its favicon, the whole book's PDF (or says that the
  build has none), CITATION.cff, and shows the date of the build.

The static checks (images, links, network, the site) read the HTML files; the rendered ones (math, tables, code,
claims) read the DOM after Chromium has run the page's scripts; the layout ones (claims' contrast, width, console,
buttons, figures, lines) run ``AUDIT_SCRIPT`` in the page, which writes what it measured into the DOM.
"""

from __future__ import annotations

import functools
import html as html_module
import json
import os
import re
import shutil
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlsplit

from calib_book import claims, timeouts

__all__ = ["PageReport", "RenderTimeout", "find_chromium", "rendered_dom", "audit_page", "audit_pages", "check_page",
           "check_pages", "book_pages", "check_book", "visible_code_lines", "redirect_target", "machine_paths",
           "svg_text_size", "MIN_CONTRAST", "MIN_FIGURE_TEXT_PX", "WIDTHS"]

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "chrome")
_RAW_TABLE_ROW = re.compile(r"^\s*\|[^|]*\S[^|]*(\|[^|]*\S[^|]*)+\|\s*$")   # | a | b |: two cells or more
_TABLE_RULE = re.compile(r"\|\s*:?-{3,}:?\s*\|")
_TEX_DELIMITER = re.compile(r"\\\(|\\\)|\\\[|\\\]|\$\$")
_DOLLAR_MATH = re.compile(r"(?<![\w$])\$(?!\s)[^$\n]+?(?<!\s)\$(?![\w$])")   # $x$ left as text
_HASH_NAME = re.compile(r"(^|/)[0-9a-f]{16,}\.(png|jpe?g|svg|gif)$")
_TEX_COMMAND = re.compile(r"\\[A-Za-z]+")
#: The smallest WCAG contrast a claim's text may have against its background (WCAG 2 AA for body text).
MIN_CONTRAST = 4.5
#: The window widths the layout is checked at, a phone and a desktop.
WIDTHS = (412, 1280)


@dataclass
class PageReport:
    """What the checks found on one page: counts, and a list of problems (empty when the page reads well)."""

    page: str
    formulas: int = 0
    math_errors: int = 0
    images: int = 0
    links: int = 0
    visible_code_lines: int = 0
    raw_tex: int = 0
    ascii_math: int = 0
    prose_ascii_math: int = 0
    overflowing: dict = field(default_factory=dict)
    min_contrast: dict = field(default_factory=dict)
    console_errors: int = 0
    dead_buttons: dict = field(default_factory=dict)
    small_figures: dict = field(default_factory=dict)
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


#: Seconds one Chromium launch may take on an idle machine (scaled by the load, calib_book.timeouts): about 20 times
#: what a launch of four pages takes on 2 idle cores.
RENDER_TIMEOUT_S = 120


class RenderTimeout(RuntimeError):
    """Chromium did not finish rendering within its time: the message names the page and how long it had
    (``seconds``)."""

    def __init__(self, message: str, seconds: float | None = None):
        super().__init__(message)
        self.seconds = seconds


def rendered_dom(page: Path, chromium: str, width: int = 1280, budget_ms: int = 20000,
                 timeout: float | None = None) -> str:
    """The DOM of ``page`` after headless Chromium has run its scripts, with the network unreachable.

    ``timeout`` (seconds of wall time) defaults to RENDER_TIMEOUT_S scaled by the machine's load; past it
    :class:`RenderTimeout` is raised, naming the page, the time it had and the load."""
    timeout = timeouts.scaled(RENDER_TIMEOUT_S) if timeout is None else timeout
    cmd = [chromium, "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-extensions",
           "--disable-background-networking", "--no-first-run", "--mute-audio",
           "--host-resolver-rules=MAP * ~NOTFOUND",     # every host name fails: the page gets nothing from outside
           f"--window-size={max(width, 500)},2000", f"--virtual-time-budget={budget_ms}", "--dump-dom",
           page.resolve().as_uri()]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise RenderTimeout(f"chromium did not finish rendering {page} within {timeout:.0f} s of wall time "
                            f"({timeouts.describe_load()})", timeout) from None
    if proc.returncode != 0 or "<html" not in proc.stdout:
        raise RuntimeError(f"chromium could not render {page} (exit {proc.returncode}): {proc.stderr.strip()[-500:]}")
    return proc.stdout


#: Injected first in the page's <head>: records every error the page logs (uncaught exceptions, scripts that do not
#: parse, rejected promises, console.error) in window.__calibErrors.
ERROR_RECORDER = """<script>
window.__calibErrors = [];
window.addEventListener("error", function (e) {
  window.__calibErrors.push(String(e.message || (e.target && (e.target.src || e.target.href)) || e));
}, true);
window.addEventListener("unhandledrejection", function (e) { window.__calibErrors.push("Unhandled: " + e.reason); });
(function () {
  var original = console.error;
  console.error = function () {
    window.__calibErrors.push(Array.prototype.map.call(arguments, String).join(" "));
    return original.apply(console, arguments);
  };
})();
</script>"""

#: Injected at the end of the page's <body>: once the page has loaded and MathJax has typeset, measures the width
#: (does the page pan sideways; which elements stick out of the article's column, or scroll with no cue) and the
#: contrast of the claims' text in the light and the dark theme, and posts it with the page's DOM, as JSON, to the
#: frame around the page (``AUDIT_FRAME``).
AUDIT_SCRIPT = """<script>
(function () {
  function rgba(text) {
    var m = text.match(/rgba?\\(([^)]+)\\)/);
    if (!m) { return [0, 0, 0, 0]; }
    var v = m[1].split(/[ ,\\/]+/).filter(Boolean).map(parseFloat);
    return [v[0], v[1], v[2], v.length > 3 ? v[3] : 1];
  }
  function over(top, bottom) {                       // top composited over an opaque bottom
    var a = top[3];
    return [0, 1, 2].map(function (i) { return top[i] * a + bottom[i] * (1 - a); }).concat([1]);
  }
  function background(el) {                          // the layers up to the first opaque one, composited
    var layers = [];
    for (var e = el; e; e = e.parentElement) {
      var c = rgba(getComputedStyle(e).backgroundColor);
      if (c[3] > 0) { layers.push(c); }
      if (c[3] >= 1) { break; }
    }
    var result = [255, 255, 255, 1];
    for (var i = layers.length - 1; i >= 0; i--) { result = over(layers[i], result); }
    return result;
  }
  function luminance(c) {
    var l = c.slice(0, 3).map(function (v) {
      v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4);
    });
    return 0.2126 * l[0] + 0.7152 * l[1] + 0.0722 * l[2];
  }
  function contrast(el) {
    var bg = background(el), fg = over(rgba(getComputedStyle(el).color), bg);
    var a = luminance(fg), b = luminance(bg);
    return (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
  }
  function label(el) {
    var text = (el.textContent || "").trim().replace(/\\s+/g, " ").slice(0, 60);
    return el.tagName.toLowerCase() + (el.className && typeof el.className === "string" ?
      "." + el.className.trim().split(/\\s+/).slice(0, 2).join(".") : "") + (text ? " '" + text + "'" : "");
  }
  function ownText(el) {
    return Array.prototype.some.call(el.childNodes, function (n) { return n.nodeType === 3 && n.data.trim(); });
  }
  function claimContrast() {
    var worst = null;
    document.querySelectorAll(".claim-line, .claim-line *, .claim-entry, .claim-entry *").forEach(function (el) {
      if (!ownText(el) || !el.getClientRects().length || getComputedStyle(el).visibility === "hidden") { return; }
      var ratio = contrast(el);
      if (!worst || ratio < worst.ratio) { worst = {ratio: ratio, element: label(el)}; }
    });
    return worst;
  }
  function scrolls(style) { return style.overflowX === "auto" || style.overflowX === "scroll"; }
  function clips(style) { return style.overflowX !== "visible"; }
  // every element of the article but the glyphs of a typeset formula (the parts of mjx-math and of its hidden
  // MathML copy, most of a chapter's elements): the formula's own boxes, mjx-container and mjx-math, are measured
  var INSIDE_FORMULA_SKIPPED = "*:not(mjx-math *):not(mjx-assistive-mml *)";
  function overflow() {
    var article = document.querySelector("article.bd-article") || document.querySelector("article") ||
      document.body;
    var column = article.getBoundingClientRect(), found = [];
    article.querySelectorAll(INSIDE_FORMULA_SKIPPED).forEach(function (el) {
      if (!el.getClientRects().length) { return; }
      var style = getComputedStyle(el);
      if (style.position === "fixed" || style.position === "absolute") { return; }
      if (el.scrollWidth > el.clientWidth + 1 && el.clientWidth > 0) {
        if (scrolls(style) && !el.classList.contains("calib-scrolls")) {
          found.push(label(el) + " scrolls sideways with no cue (" + el.scrollWidth + " px in " +
                     el.clientWidth + " px)");
          return;
        }
        if (style.overflowX === "hidden" && /^(TABLE|PRE|MJX-CONTAINER)$/.test(el.tagName)) {
          found.push(label(el) + " is cut (" + el.scrollWidth + " px in " + el.clientWidth + " px)");
          return;
        }
      }
      var rect = el.getBoundingClientRect();
      if (rect.right > column.right + 1 || rect.left < column.left - 1) {
        for (var a = el.parentElement; a && a !== article; a = a.parentElement) {
          if (clips(getComputedStyle(a))) { return; }
          var r = a.getBoundingClientRect();
          if (r.right > column.right + 1 || r.left < column.left - 1) { return; }   // its parent is reported
        }
        found.push(label(el) + " is wider than its column (" + Math.round(rect.width) + " px in " +
                   Math.round(column.width) + " px)");
      }
    });
    var page = document.documentElement.scrollWidth, view = window.innerWidth;
    if (page > view + 1) { found.unshift("the page pans sideways (" + page + " px in a " + view + " px window)"); }
    return found;
  }
  function visible(el) {
    return el.getClientRects().length > 0 && getComputedStyle(el).visibility !== "hidden";
  }
  // the lowest contrast of the text of the elements ``selector`` finds (those with text of their own, shown)
  function worstContrast(selector) {
    var worst = null;
    document.querySelectorAll(selector).forEach(function (el) {
      if (!ownText(el) || !visible(el)) { return; }
      var ratio = contrast(el);
      if (!worst || ratio < worst.ratio) { worst = {ratio: ratio, element: label(el)}; }
    });
    return worst;
  }
  // claim blocks that a cell's output box draws in a colour of its own (the theme's light box in the dark theme)
  function framedClaims() {
    var framed = 0;
    document.querySelectorAll(".claim-line").forEach(function (line) {
      var box = line.parentElement;
      if (!box || !box.parentElement || !visible(line)) { return; }
      var own = rgba(getComputedStyle(box).backgroundColor), behind = background(box.parentElement);
      var drawn = over(own, behind);
      if (own[3] > 0 && [0, 1, 2].some(function (i) { return Math.abs(drawn[i] - behind[i]) > 8; })) { framed += 1; }
    });
    return framed;
  }
  // the contents buttons: each one a reader sees changes its sidebar when clicked: opens its drawer (the theme's
  // <dialog>, below 992 px) or folds the sidebar away (sphinx-book-theme on a desktop); what it changed is undone
  function toggles() {
    var found = [];
    var KINDS = [["primary", "the contents button (\\u2630)"], ["secondary", "the in-page contents button"]];
    KINDS.forEach(function (kind) {
      var dialog = document.getElementById("pst-" + kind[0] + "-sidebar-modal");
      var sidebar = document.getElementById("pst-" + kind[0] + "-sidebar");
      document.querySelectorAll("." + kind[0] + "-toggle").forEach(function (button) {
        if (!visible(button)) { return; }
        var wasOpen = !!(dialog && dialog.open), classes = sidebar ? sidebar.className : "";
        var errors = (window.__calibErrors || []).length;
        button.click();
        var raised = (window.__calibErrors || []).slice(errors);
        if (raised.length) { found.push(kind[1] + " raised an error when clicked: " + raised[0].slice(0, 120)); }
        if (dialog && dialog.open && !wasOpen) {
          if (dialog.getBoundingClientRect().width < 50 || !dialog.textContent.trim()) {
            found.push(kind[1] + " opens an empty drawer");
          }
          dialog.close();
        } else if (sidebar && sidebar.className !== classes) {
          sidebar.className = classes;
        } else if (!raised.length) {
          found.push(kind[1] + " (" + label(button) + ") does nothing when clicked");
        }
      });
    });
    return found;
  }
  function sameFile(a, b) {
    try { return new URL(a, document.baseURI).pathname === new URL(b, document.baseURI).pathname; }
    catch (e) { return false; }
  }
  // each figure of the article: its file, its width on screen and natural width (CSS px), and the width at which a
  // tap shows it (a viewer of the page's own, or the image file itself where the figure links it; 0: no tap)
  function figures() {
    var shown = [];
    document.querySelectorAll("article figure img, article div.cell_output img").forEach(function (img) {
      if (!visible(img) || img.closest("dialog")) { return; }
      var src = img.currentSrc || img.src, link = img.closest("a[href]"), full = 0;
      if (link && sameFile(link.href, src)) {
        full = img.naturalWidth;                   // a browser shows the file at its natural size
        var stay = function (e) { e.preventDefault(); };
        window.addEventListener("click", stay);    // after the page's handlers: the frame stays on the page
        link.click();
        window.removeEventListener("click", stay);
        var viewer = document.querySelector("dialog[open]");
        if (viewer) {
          var big = viewer.querySelector("img");
          full = big && sameFile(big.currentSrc || big.src, src) ? big.getBoundingClientRect().width : 0;
          viewer.close();
        }
      }
      var caption = img.closest("figure") && img.closest("figure").querySelector("figcaption");
      var name = ((caption && caption.textContent) || img.alt || "").trim().replace(/\\s+/g, " ").slice(0, 60);
      shown.push({src: src, width: img.getBoundingClientRect().width, natural: img.naturalWidth, full: full,
                  label: name});
    });
    return shown;
  }
  // code blocks that wrap their long lines (the indentation of the continuation is lost)
  function wrappedCode(article) {
    var found = [];
    article.querySelectorAll("pre").forEach(function (pre) {
      var space = getComputedStyle(pre).whiteSpace;
      if (!visible(pre) || space === "pre" || space === "nowrap") { return; }
      var inline = pre.style.whiteSpace;
      pre.style.whiteSpace = "pre";
      var wide = pre.scrollWidth > pre.clientWidth + 1;
      pre.style.whiteSpace = inline;
      if (wide) {
        found.push(label(pre) + " wraps its long lines (white-space: " + space + "), losing their indentation");
      }
    });
    return found;
  }
  // inline code that a line ends inside a word of (between two letters or digits)
  function brokenCode(article) {
    var found = [], range = document.createRange(), WORD = /[A-Za-z0-9]/;
    article.querySelectorAll("code").forEach(function (code) {
      if (code.closest("pre") || code.getClientRects().length < 2) { return; }
      var walker = document.createTreeWalker(code, NodeFilter.SHOW_TEXT), before = null, text = code.textContent;
      for (var at = 0; walker.nextNode();) {
        var node = walker.currentNode;
        for (var i = 0; i < node.data.length; i++, at++) {
          range.setStart(node, i);
          range.setEnd(node, i + 1);
          var rects = range.getClientRects(), ch = node.data[i];
          if (/\\s/.test(ch)) { before = {ch: " ", bottom: before ? before.bottom : 0}; continue; }  // a space breaks
          if (!rects.length) { continue; }
          var r = rects[0];
          if (before && r.top >= before.bottom - 2 && WORD.test(before.ch) && WORD.test(ch)) {
            found.push("inline code broken inside a word: '" + text.slice(Math.max(0, at - 20), at) + "|" +
                       text.slice(at, at + 20) + "'");
            return;
          }
          before = {ch: ch, bottom: r.bottom};
        }
      }
    });
    return found;
  }
  // on a phone (below 768 px), table cells of at most 40 characters that take more than two lines
  function tallCells(article) {
    var found = [], range = document.createRange();
    if (window.innerWidth >= 768) { return found; }
    article.querySelectorAll("table:not(.indextable) td, table:not(.indextable) th").forEach(function (cell) {
      var text = (cell.textContent || "").replace(/\\s+/g, " ").trim();
      if (!text || text.length > 40 || !visible(cell)) { return; }
      var style = getComputedStyle(cell), line = parseFloat(style.lineHeight) || 1.2 * parseFloat(style.fontSize);
      range.selectNodeContents(cell);
      var tops = [];
      Array.prototype.forEach.call(range.getClientRects(), function (r) {
        if (r.width > 0 && r.height > 0 && !tops.some(function (t) { return Math.abs(t - r.top) < line / 2; })) {
          tops.push(r.top);
        }
      });
      if (tops.length > 2) { found.push("'" + text + "' over " + tops.length + " lines"); }
    });
    return found;
  }
  function audit() {
    var html = document.documentElement, result = {width: window.innerWidth, overflow: overflow(), contrast: {},
                                                   themes: {}};
    var article = document.querySelector("article.bd-article") || document.querySelector("article") || document.body;
    result.errors = (window.__calibErrors || []).slice();          // the page's own, before the theme is switched
    result.code = wrappedCode(article).concat(brokenCode(article));
    result.cells = tallCells(article);
    if (loadedWidth === null) { loadedWidth = result.width; }
    // the contrast at the width the page was loaded at only: no colour of a claim's text or background depends on
    // the window's width (the theme's width rules colour its sidebars), and each switch of the theme restyles the
    // whole page (a fifth of the audit of the book's largest pages)
    if (result.width === loadedWidth) {
      var theme = html.getAttribute("data-theme");
      ["light", "dark"].forEach(function (t) {
        html.setAttribute("data-theme", t);
        result.contrast[t] = claimContrast();
        result.themes[t] = {links: worstContrast(".admonition a, .admonition a *"), framed: framedClaims()};
      });
      if (theme === null) { html.removeAttribute("data-theme"); } else { html.setAttribute("data-theme", theme); }
      result.dom = "<!DOCTYPE html>" + html.outerHTML;
    }
    // last: they click, and open and close dialogs (the DOM above is the page as loaded)
    result.toggles = toggles();
    result.figures = figures();
    window.parent.postMessage({width: result.width, audit: JSON.stringify(result)}, "*");
  }
  var loadedWidth = null;
  window.addEventListener("load", function () {
    var typeset = window.MathJax && window.MathJax.startup && window.MathJax.startup.promise;
    (typeset || Promise.resolve()).then(function () { setTimeout(audit, 300); });
  });
  // AUDIT_FRAME made the frame narrower: once the page has the new width, fire "resize" (headless Chromium under
  // virtual time seldom runs a rendering step, where a browser fires it), so that the page's own handlers run as
  // they would for a reader who narrows the window, and measure again 400 ms after the last "resize", ours or the
  // browser's (scroll-cue.js marks what scrolls 150 ms after the last one; timers run in the order of their
  // deadlines): a "resize" the browser fires late postpones the page's handlers, and the audit with them
  var settling = null;
  window.addEventListener("resize", function () {
    if (settling === null) { return; }
    clearTimeout(settling);
    settling = setTimeout(function () { settling = null; audit(); }, 400);
  });
  window.addEventListener("message", function (e) {
    if (e.source !== window.parent || !e.data || !e.data.calibWidth) { return; }
    (function resized() {
      if (window.innerWidth !== e.data.calibWidth) { setTimeout(resized, 20); return; }
      settling = 0;
      window.dispatchEvent(new Event("resize"));
    })();
  });
})();
</script>"""


#: The page that holds the audited pages in frames side by side, one per page (``AUDIT_FRAME_ONE``; headless Chromium
#: will not make its window narrower than 500 px). Each frame loads its page at the widest width; when the frame's
#: audit posts what it measured at one width, it is written into <textarea id="calib-audit-{{i}}-{{width}}"> and the
#: frame is made as narrow as the next width of its ``data-widths`` and told so, and the page measures again. A page
#: is loaded and typeset once for all widths (MathJax's typesetting is most of the cost of a page), as a reader who
#: narrows the window sees it. One Chromium launch audits several pages at every width.
AUDIT_FRAME = """<!DOCTYPE html><html><head><meta charset="utf-8"></head><body style="margin:0;white-space:nowrap">
{frames}
<script>window.addEventListener("message", function (e) {{
  var frames = document.getElementsByTagName("iframe");
  for (var i = 0; i < frames.length; i++) {{
    if (frames[i].contentWindow !== e.source) {{ continue; }}
    var id = "calib-audit-" + i + "-" + e.data.width, out = document.getElementById(id);
    if (!out) {{ out = document.createElement("textarea"); out.id = id; document.body.appendChild(out); }}
    out.textContent = e.data.audit;
    var widths = frames[i].getAttribute("data-widths").split(",").map(Number), at = widths.indexOf(e.data.width);
    if (at >= 0 && at + 1 < widths.length) {{
      frames[i].style.width = widths[at + 1] + "px";
      frames[i].contentWindow.postMessage({{calibWidth: widths[at + 1]}}, "*");
    }}
  }}
}});</script></body></html>"""
#: One frame of ``AUDIT_FRAME``: a page loaded ``{width}`` px wide, then made as narrow as each of ``{widths}`` in turn.
AUDIT_FRAME_ONE = ('<iframe src="{src}" data-widths="{widths}" '
                   'style="border:0;width:{width}px;height:1800px;vertical-align:top"></iframe>')


def audit_page(page: Path, chromium: str, width: int, budget_ms: int = 20000) -> tuple[str, dict]:
    """The DOM of ``page`` rendered ``width`` px wide, and what ``AUDIT_SCRIPT`` measured there (``overflow``:
    a list of descriptions; ``contrast``: per theme the claim text with the lowest ratio, or None; ``errors``).
    :func:`audit_pages` for one page and one width."""
    return audit_pages([page], chromium, (width,), budget_ms)[page, width]


def audit_pages(pages, chromium: str, widths=WIDTHS, budget_ms: int = 20000, timeout: float | None = None) -> dict:
    """``{(page, width): (dom, audit)}``: :func:`audit_page` of every page of ``pages`` at every width of
    ``widths``, in one Chromium launch; ``dom`` only at the widest width (None at the others).

    Each page is copied beside itself with the two scripts added (so that its relative links still resolve),
    all are shown in one frame per page, loaded at the widest width and made narrower in turn (``AUDIT_FRAME``),
    and the copies removed. Launching Chromium costs about as much as rendering a short page, so pages share
    launches."""
    pages, widths = [Path(p) for p in pages], tuple(widths)
    copies = []
    try:
        for page in pages:
            source = page.read_text(encoding="utf-8", errors="replace")
            head = re.search(r"<head[^>]*>(\s*<meta charset[^>]*>)?", source)
            at = head.end() if head else 0
            body_end = source.rfind("</body>")
            body_end = body_end if body_end >= 0 else len(source)
            copies.append(_write_beside(page, source[:at] + ERROR_RECORDER + source[at:body_end] + AUDIT_SCRIPT
                                        + source[body_end:]))
        # widest first: the page is loaded there, and its DOM comes back from there only (the checks of the
        # rendered page read it there)
        order = sorted(set(widths), reverse=True)
        frames = "\n".join(AUDIT_FRAME_ONE.format(src=copy.resolve().as_uri(), width=order[0],
                                                  widths=",".join(map(str, order))) for copy in copies)
        copies.append(_write_beside(pages[0], AUDIT_FRAME.format(frames=frames)))
        try:
            frame = rendered_dom(copies[-1], chromium, width=len(pages) * order[0] + 40, budget_ms=budget_ms,
                                 timeout=timeout)
        except RenderTimeout as exc:
            names = ", ".join(str(p) for p in pages)
            raise RenderTimeout(f"chromium did not finish the audit of {names} at {', '.join(map(str, order))} px "
                                f"within {exc.seconds:.0f} s of wall time ({timeouts.describe_load()})",
                                exc.seconds) from None
    finally:
        for copy in copies:
            copy.unlink(missing_ok=True)
    posted = {(int(m.group(1)), int(m.group(2))): m.group(3) for m in _AUDIT_TEXTAREA.finditer(frame)}
    results = {}
    for i, page in enumerate(pages):
        for width in widths:
            if (i, width) not in posted:
                raise RenderTimeout(f"the audit of {page} at {width} px did not finish within {budget_ms} ms of "
                                    f"virtual time ({timeouts.describe_load()})")
            audit = json.loads(html_module.unescape(posted[i, width]))
            results[page, width] = (audit.pop("dom", None), audit)
            if width != order[0] and audit["overflow"]:
                results[page, width] = (None, _confirmed_at(page, width, audit, chromium, budget_ms, timeout))
    return results


def _confirmed_at(page: Path, width: int, narrowed: dict, chromium: str, budget_ms: int,
                  timeout: float | None = None) -> dict:
    """The audit of ``page`` narrowed to ``width`` that found something too wide (``narrowed``), with the overflow
    that the page loaded at ``width`` in a launch of its own finds as well: what a phone shows. A page made narrower
    is measured once its handlers have run after the last "resize", but a timer of the page's that the browser runs
    late under load can still leave a box unmarked then (once, in a cold `make test`, every wide box of chapter
    05 at 412 px); a box that truly lacks its cue lacks it in both."""
    _, loaded = audit_pages([page], chromium, (width,), budget_ms, timeout)[page, width]
    return {**narrowed, "overflow": [o for o in narrowed["overflow"] if o in loaded["overflow"]]}


#: What the i-th frame's audit posted at one width, as Chromium serialises it in the frame page's DOM (a textarea's
#: text).
_AUDIT_TEXTAREA = re.compile(r'<textarea id="calib-audit-(\d+)-(\d+)">(.*?)</textarea>', re.S)


def _write_beside(page: Path, text: str) -> Path:
    """Write ``text`` to a new hidden file ``.audit-*.html`` in the folder of ``page``; return its path."""
    fd, name = tempfile.mkstemp(prefix=".audit-", suffix=".html", dir=page.parent)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
    return Path(name)


def _soup(html: str):
    """``html`` parsed by BeautifulSoup with lxml's parser (the book's dependency), or Python's where lxml is
    missing (the same tree for the pages Sphinx writes, five times slower on a chapter)."""
    from bs4 import BeautifulSoup, FeatureNotFound

    try:
        return BeautifulSoup(html, "lxml")
    except FeatureNotFound:                         # pragma: no cover - lxml is a dependency of the book
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


def _visible_text_lines(dom: str) -> list[str]:
    """The text a reader sees, line by line: no code, no script, nothing inside a collapsed toggle, no math source.
    ``dom``: the page's HTML (parsed here into a tree of its own, which this takes apart)."""
    soup = _soup(dom)
    for tag in soup(["script", "style", "noscript", "pre", "code", "mjx-assistive-mml", "math", "svg"]):
        tag.decompose()
    for details in soup.find_all("details"):
        if not details.has_attr("open"):
            for child in list(details.children):
                if getattr(child, "name", None) != "summary":
                    child.extract()
    body = soup.find("article") or soup.find("main") or soup.body or soup
    return [line for line in body.get_text("\n").splitlines() if line.strip()]


def _claim_paragraphs(soup) -> list[str]:
    """The text of every claim field a reader sees (statement, quote, correction, remark, premise and evidence, in
    the ledger pages' entries and the blocks under the chapters' cells), paragraph by paragraph, without math or
    code. ``soup``: the page's parsed tree, which this takes apart (the last to read it)."""
    blocks = soup.select(".claim-entry, .claim-line")
    for block in blocks:
        for badge in block.select("p > .claim-badge"):          # a ledger entry's heading: the claim's id, links
            badge.parent.decompose()
        for tag in block.select(".claim-head, .claim-scale, code, pre, script, mjx-container, .math, math, svg"):
            tag.decompose()
    texts = []
    for block in blocks:
        paragraphs = block.select("p") or [block]
        texts += [" ".join(p.get_text(" ").split()) for p in paragraphs]
    return [t for t in texts if t]


def _check_claims(report: PageReport, soup) -> None:
    paragraphs = _claim_paragraphs(soup)
    tex = [t for t in paragraphs if _TEX_COMMAND.search(t)]
    ascii_math = [t for t in paragraphs if claims.ASCII_MATH.search(t)]
    report.raw_tex, report.ascii_math = len(tex), len(ascii_math)
    if tex:
        example = _TEX_COMMAND.search(tex[0])
        report.problems.append(f"{len(tex)} claim paragraph(s) with raw TeX, e.g. {example.group()!r} in "
                               f"{_context(tex[0], example.start())!r}")
    if ascii_math:
        example = claims.ASCII_MATH.search(ascii_math[0])
        report.problems.append(f"{len(ascii_math)} claim paragraph(s) with ASCII math, e.g. {example.group()!r} in "
                               f"{_context(ascii_math[0], example.start())!r}")


def _context(text: str, at: int, width: int = 40) -> str:
    return text[max(0, at - width):at + width]


def _check_audit(report: PageReport, audit: dict, errors: bool = True) -> None:
    """Turn what ``AUDIT_SCRIPT`` measured at one width into counts and problems; ``errors``: count the
    console errors too (once a page: each width logs the same)."""
    width = audit["width"]
    report.overflowing[width] = len(audit["overflow"])
    if audit["overflow"]:
        report.problems.append(f"at {width} px, {len(audit['overflow'])} element(s) too wide: "
                               + "; ".join(audit["overflow"][:3]))
    for theme, worst in audit["contrast"].items():
        if worst is None:
            continue
        ratio = round(worst["ratio"], 2)
        report.min_contrast[theme] = min(ratio, report.min_contrast.get(theme, ratio))
        if worst["ratio"] < MIN_CONTRAST:
            report.problems.append(f"claim text with contrast {ratio}:1 in the {theme} theme (below "
                                   f"{MIN_CONTRAST}:1): {worst['element']}")
    for theme, measured in audit.get("themes", {}).items():
        links = measured["links"]
        if links is not None and links["ratio"] < MIN_CONTRAST:
            report.problems.append(f"a link in a note box with contrast {round(links['ratio'], 2)}:1 in the {theme} "
                                   f"theme (below {MIN_CONTRAST}:1): {links['element']}")
        if measured["framed"]:
            report.problems.append(f"{measured['framed']} claim block(s) drawn in a box of another colour in the "
                                   f"{theme} theme (a frame around the claim)")
    toggles = audit.get("toggles", [])
    report.dead_buttons[width] = len(toggles)
    if toggles:
        report.problems.append(f"at {width} px, {'; '.join(toggles)}")
    for kind, found in (("code", audit.get("code", [])), ("table cells", audit.get("cells", []))):
        if found:
            report.problems.append(f"at {width} px, {len(found)} {kind} broken over lines: " + "; ".join(found[:3]))
    _check_figures(report, width, audit.get("figures", []))
    if errors:
        report.console_errors = len(audit["errors"])
        if audit["errors"]:
            report.problems.append(f"{len(audit['errors'])} console error(s), e.g. {audit['errors'][0][:160]!r}")


#: The smallest text (CSS px on screen) a figure may show, its tick labels included, unless a tap opens it full-size.
MIN_FIGURE_TEXT_PX = 9.0
_SVG_VIEWBOX = re.compile(r'<svg\b[^>]*?\bviewBox="\s*[-\d.]+[\s,]+[-\d.]+[\s,]+([\d.]+)', re.S)
#: matplotlib's text drawn as paths (its default for SVG): each run of text is a group scaled by size / 100 (the glyphs
#: are stored at 100 units an em, ``matplotlib.textpath.TextToPath.FONT_SCALE``); text kept as text has a font size.
_SVG_GLYPH_SCALE = re.compile(r"scale\(([\d.]+) -\1\)")
_SVG_FONT_SIZE = re.compile(r"font(?:-size)?:\s*(?:[a-z]+\s+)*([\d.]+)(?:px|pt)?\b")


@functools.lru_cache(maxsize=512)
def svg_text_size(path: Path) -> tuple[float, float] | None:
    """The smallest font size of an SVG figure's text and the width of its view box, both in the SVG's user units
    (points for matplotlib's figures); None when the file has no text (or no view box)."""
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    box = _SVG_VIEWBOX.search(text)
    sizes = [100 * float(m.group(1)) for m in _SVG_GLYPH_SCALE.finditer(text)]
    sizes += [float(m.group(1)) for m in _SVG_FONT_SIZE.finditer(text)]
    sizes = [size for size in sizes if size > 0]
    if box is None or not sizes or float(box.group(1)) <= 0:
        return None
    return min(sizes), float(box.group(1))


def _check_figures(report: PageReport, width: int, figures: list) -> None:
    """Every figure readable at ``width``: its smallest text (an SVG's) at least MIN_FIGURE_TEXT_PX on screen, or a tap
    that shows it where it is (full-size); a raster figure shown at under half its pixels (a 2x PNG at its size is
    half) needs the tap as well."""
    small = []
    for figure in figures:
        parts = urlsplit(figure["src"])
        path = Path(unquote(parts.path)) if parts.scheme in ("file", "") else None
        shown, full, name = figure["width"], figure["full"], figure["label"] or figure["src"].rsplit("/", 1)[-1]
        if path is not None and path.suffix.lower() == ".svg":
            measured = svg_text_size(path)
            if measured is None:
                continue
            size, view_width = measured
            on_screen, at_full = size * shown / view_width, size * full / view_width
            if on_screen >= MIN_FIGURE_TEXT_PX or at_full >= MIN_FIGURE_TEXT_PX:
                continue
            small.append(f"figure '{name}': its smallest text is {on_screen:.1f} px on screen"
                         + (f" and {at_full:.1f} px full-size" if full else ", and a tap does not open it full-size"))
        elif figure["natural"] and shown < figure["natural"] / 2 - 1 and full < figure["natural"] / 2 - 1:
            small.append(f"figure '{name}': shown at {shown:.0f} px of its {figure['natural']} px, and a tap does not "
                         f"open it full-size")
    report.small_figures[width] = len(small)
    if small:
        report.problems.append(f"at {width} px, {len(small)} figure(s) unreadable (text below {MIN_FIGURE_TEXT_PX:g} "
                               f"px): " + "; ".join(small[:3]))


#: A formula MathJax typeset, with the elements it drew (hundreds a formula), and a block of code, with the span
#: Pygments wraps around each token (18,000 on chapter 08): nodes for the parser that no check reads.
_MJX_CONTAINER = re.compile(r"(<mjx-container\b[^>]*>)(.*?)(</mjx-container>)", re.S)
_PRE = re.compile(r"(<pre\b[^>]*>)(.*?)(</pre>)", re.S)
_SPAN_TAG = re.compile(r"</?span\b[^>]*>")


def _lighter(html: str) -> str:
    """``html`` with each typeset formula emptied, unless it holds a MathJax error, and the token spans of code
    blocks removed (their text stays). The checks read of a formula that it is there (its container) or that it
    failed (``mjx-merror``); its text, for a reader, is drawn by CSS, not held in the DOM. They read of code its
    text. So they find the same in a tree a tenth the size, which parses that much faster."""
    html = _MJX_CONTAINER.sub(lambda m: m.group(0) if "<mjx-merror" in m.group(2) else m.group(1) + m.group(3),
                              html)
    return _PRE.sub(lambda m: m.group(1) + _SPAN_TAG.sub("", m.group(2)) + m.group(3), html)


def _is_prose_page(page: str) -> bool:
    """Whether a page (its path in the build) is the book's prose, whose text writes math as math: the chapters and
    the book's own pages, not the API reference (whose docstrings name arguments such as ``gamma``) or Sphinx's
    index pages."""
    parts = Path(page).parts
    return len(parts) == 2 and parts[0] in ("chapters", "book")


def _check_rendered(report: PageReport, dom: str) -> None:
    dom = _lighter(dom)
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
    lines = _visible_text_lines(dom)
    tex = [line for line in lines if _TEX_DELIMITER.search(line) or _DOLLAR_MATH.search(line)]
    if tex:
        report.problems.append(f"raw TeX in the text: {tex[0].strip()[:100]!r}")
    if _is_prose_page(report.page):                 # issue 47, item 3: the prose writes math as math too
        prose_ascii = [line for line in lines if claims.ascii_math(line)]
        report.prose_ascii_math = len(prose_ascii)
        if prose_ascii:
            found = claims.ascii_math(prose_ascii[0])
            report.problems.append(f"{len(prose_ascii)} line(s) of prose, a table or a caption with ASCII math, e.g. "
                                   f"{', '.join(map(repr, found[:3]))} in {prose_ascii[0].strip()[:100]!r}: write it "
                                   "as $...$ math (a name as `code`)")
    tables = [line for line in lines if _TABLE_RULE.search(line) or _RAW_TABLE_ROW.match(line)]
    if tables:
        report.problems.append(f"a Markdown table left as text: {tables[0].strip()[:100]!r}")
    code = _visible_code_cells(soup)
    calls = [c for c in code if "claim(" in c.get_text()]
    if calls:
        first = next(line for line in calls[0].get_text().splitlines() if "claim(" in line)
        report.problems.append(f"{len(calls)} visible code cell(s) call claim(), e.g. {first.strip()[:80]!r}")
    _check_claims(report, soup)                     # last: it takes the claims' blocks of the tree apart


def _target(page: Path, href: str, html_root: Path) -> tuple[Path | None, str]:
    parts = urlsplit(href)
    if parts.scheme or parts.netloc:
        return None, ""
    path = (page.parent / unquote(parts.path)).resolve() if parts.path else page.resolve()
    if path.is_dir():
        path = path / "index.html"
    return path, unquote(parts.fragment)


def _check_static(report: PageReport, page: Path, html_root: Path, ids_of) -> None:
    text = page.read_text(encoding="utf-8", errors="replace")
    _check_machine_paths(report, page, html_root, text)
    soup = _soup(_lighter(text))
    if soup.html is not None and soup.html.has_attr("data-content_root"):     # a page of the book's theme
        _check_book_page(report, soup, page, html_root)
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


#: A path of the machine that built the book: under /tmp, /work, /root or a home folder (a page names the repository's
#: files as the repository does, ``book/results/...``, never as one machine's folders).
_MACHINE_PATH = re.compile(r"(?<![\w.~/-])/(?:tmp|work|root|home/[^/\s\"'<>]+|Users/[^/\s\"'<>]+)/[^\s\"'<>]*")


def machine_paths(text: str, roots=()) -> list[str]:
    """The paths of the building machine in ``text``: those under ``roots`` (the checkout the book was built from,
    wherever it is), and any under /tmp, /work, /root or a home folder; each once, in order."""
    found = [m.group(0) for m in _MACHINE_PATH.finditer(text)]
    for root in roots:
        found += [m.group(0) for m in re.finditer(re.escape(str(root)) + r"(?![\w.-])[^\s\"'<>]*", text)]
    return list(dict.fromkeys(found))


def _checkout_of(html_root: Path) -> list[Path]:
    """The folder the book was built from (the nearest above the site holding ``_toc.yml``), as given and resolved."""
    for folder in Path(html_root).resolve().parents:
        if (folder / "_toc.yml").is_file():
            return [folder] + ([Path(os.path.realpath(folder))] if os.path.realpath(folder) != str(folder) else [])
    return []


def _check_machine_paths(report: PageReport, page: Path, html_root: Path, text: str) -> None:
    """No page, nor the notebook a reader downloads from it (``_sources/<page>.ipynb``), names a folder of the
    machine that built it."""
    roots = _checkout_of(html_root)
    found = machine_paths(text, roots)
    if found:
        report.problems.append(f"{len(found)} path(s) of the building machine in the page, e.g. {found[0][:100]!r}")
    relative = page.resolve().relative_to(Path(html_root).resolve()).with_suffix(".ipynb")
    download = Path(html_root) / "_sources" / relative
    if download.is_file():
        found = machine_paths(download.read_text(encoding="utf-8", errors="replace"), roots)
        if found:
            report.problems.append(f"{len(found)} path(s) of the building machine in its download "
                                   f"_sources/{relative.as_posix()}, e.g. {found[0][:100]!r}")


def _check_book_page(report: PageReport, soup, page: Path, html_root: Path) -> None:
    """What every page of the book offers: an icon, the whole book's PDF (or a note that this build has none), the
    citation file and the date of the build."""
    icon = soup.find("link", rel=lambda rel: rel and "icon" in rel)
    target = _target(page, icon.get("href", ""), html_root)[0] if icon is not None else None
    if target is None or not target.is_file():
        report.problems.append("no favicon (a <link rel=\"icon\"> to a file of the site)")
    pdf = soup.select_one("a.calib-book-pdf")
    pdf_file = _target(page, pdf.get("href", ""), html_root)[0] if pdf is not None else None
    if not (pdf_file is not None and pdf_file.is_file()) and soup.select_one(".calib-book-pdf-missing") is None:
        report.problems.append("no link to the whole book's PDF (nor a note that this build has none)")
    if not any(a["href"].endswith("CITATION.cff") for a in soup.find_all("a", href=True)):
        report.problems.append("no link to CITATION.cff")
    if soup.select_one(".last-updated") is None:
        report.problems.append("no date of the build (last updated)")


_REDIRECT = re.compile(r'<meta\s+http-equiv="refresh"\s+content="\d+;\s*url=([^"]+)"', re.I)


def redirect_target(page: Path) -> str | None:
    """The target of a page that only redirects (``<meta http-equiv="Refresh" content="0; url=...">`` and no
    body text), as Sphinx-external-toc writes the build's ``index.html``; None for any other page. In a frame such
    a page navigates away before an audit script could run."""
    text = page.read_text(encoding="utf-8", errors="replace")
    found = _REDIRECT.search(text)
    if found is None or len(re.sub(r"<[^>]*>", "", text).strip()) > 0:
        return None
    return found.group(1)


def check_page(page: Path, html_root: Path, chromium: str, ids_of=None, audits=None) -> PageReport:
    """Check one built page, statically and as rendered by Chromium; see the module docstring for what.

    ``audits``: the page's ``{(page, width): (dom, audit)}`` from :func:`audit_pages`, when a launch shared by
    several pages made them (else this page gets a launch of its own)."""
    ids_of = ids_of or _ids_reader()
    report = PageReport(str(page.relative_to(html_root)))
    redirect = redirect_target(page)
    if redirect is not None:              # a redirect (the build's index.html): its target exists, nothing to render
        if not (page.parent / redirect).is_file():
            report.problems.append(f"redirects to {redirect}, which does not exist")
        return report
    _check_static(report, page, html_root, ids_of)
    audits = audits or audit_pages([page], chromium, WIDTHS)
    for width in sorted(WIDTHS, reverse=True):
        dom, audit = audits[page, width]
        if width == max(WIDTHS):
            _check_rendered(report, dom)
        _check_audit(report, audit, errors=width == max(WIDTHS))
    return report


def check_pages(pages, html_root: Path, chromium: str, ids_of=None) -> list[PageReport]:
    """:func:`check_page` of each page, the pages that are not redirects rendered in one Chromium launch."""
    rendered = [p for p in pages if redirect_target(p) is None]
    audits = _audits_with_one_retry(rendered, chromium) if rendered else {}
    return [check_page(p, html_root, chromium, ids_of, audits) for p in pages]


def _audits_with_one_retry(pages: list[Path], chromium: str, budget_ms: int = 20000) -> dict:
    """:func:`audit_pages` of ``pages``, and where the launch runs out of time (wall or virtual), once more for each
    page alone with RETRY_FACTOR times the time (calib_book.timeouts): a machine that is slow is given time, and a
    page that never finishes is named, with the time it had."""
    try:
        return audit_pages(pages, chromium, WIDTHS, budget_ms)
    except RenderTimeout as first:
        audits = {}
        for page in pages:
            try:
                audits.update(audit_pages([page], chromium, WIDTHS, budget_ms * 2,
                                          timeouts.scaled(RENDER_TIMEOUT_S) * timeouts.RETRY_FACTOR))
            except RenderTimeout as again:
                raise RenderTimeout(f"{again}, retried alone after a launch of {len(pages)} page(s) had run out of "
                                    f"{first.seconds or budget_ms / 1000:.0f} s", again.seconds) from None
        return audits


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
    return sorted(p for p in html_root.rglob("*.html") if not skip & set(p.relative_to(html_root).parts)
                  and not p.name.startswith("."))            # the audit's copies, .audit-*.html, and any hidden file


def check_book(html_root: Path, chromium: str | None = None, workers: int = 2, pages_per_launch: int = 4,
               progress: bool = True, only: list[str] | None = None) -> list[PageReport]:
    """Check every page of the built book in headless Chromium; one :class:`PageReport` per page.

    ``workers`` Chromium processes run at once, each rendering up to ``pages_per_launch`` pages at every width (the
    pages dealt to the launches largest first, so that they take about as long). ``only``: the pages to check, by
    their path below ``html_root`` (e.g. ``"book/intro.html"``), instead of every page; the links they hold are
    checked against every page."""
    html_root = Path(html_root)
    if not (html_root / "index.html").is_file():
        raise FileNotFoundError(f"html_root={str(html_root)!r} holds no built book (no index.html); "
                                f"run `calib book build` first.")
    chromium = chromium or find_chromium()
    if chromium is None:
        raise FileNotFoundError("no chromium on the PATH; install Debian's chromium (apt-get install chromium) "
                                "or set CALIB_CHROMIUM to a Chromium or Chrome executable.")
    pages = book_pages(html_root)
    if only is not None:
        known = {p.relative_to(html_root).as_posix(): p for p in pages}
        missing = sorted(set(only) - set(known))
        if missing:
            raise ValueError(f"only={missing!r}: no such page in {html_root}; give paths below it, e.g. "
                             f"'book/intro.html'.")
        pages = [known[name] for name in only]
    ids_of = _ids_reader()
    from tqdm.auto import tqdm

    # launches of about equal work: the pages dealt largest first, one to each launch in turn
    by_size = sorted(pages, key=lambda p: p.stat().st_size, reverse=True)
    launches = -(-len(pages) // max(1, pages_per_launch))
    groups = [by_size[i::launches] for i in range(launches)]
    reports = {}
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        jobs = pool.map(lambda group: check_pages(group, html_root, chromium, ids_of), groups)
        with tqdm(total=len(pages), desc="pages", unit="page", disable=not progress) as bar:
            for group, group_reports in zip(groups, jobs):
                reports.update(zip(group, group_reports))
                bar.update(len(group_reports))
    return [reports[p] for p in pages]
