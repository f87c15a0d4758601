"""calib_book.browser: each check finds the problem it is for, on small pages written here, and passes a clean one."""

import base64

import pytest

from calib_book import browser

# a 1x1 PNG
PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5Er"
                       "kJggg==")

CLEAN_BODY = """
<article>
<p>The error is <span class="math notranslate nohighlight"><mjx-container>x</mjx-container></span>.</p>
<div class="cell docutils container"><div class="cell_input docutils container"><pre>x = 1
print(x)</pre></div></div>
<div class="cell tag_hide-input docutils container"><details class="hide above-input"><summary>Show code</summary>
<div class="cell_input docutils container"><pre>claim("p/x", "s", passed=True)</pre></div></details></div>
<table><tr><td>a</td><td>b</td></tr></table>
<img src="fig.png" alt="Reliability diagram: accuracy against confidence in 15 bins"/>
<a href="other.html#sec">other</a> <a href="https://example.org">out</a>
</article>"""


def page(body: str, head: str = "") -> str:
    return f"<html><head>{head}</head><body>{body}</body></html>"


@pytest.fixture
def site(tmp_path):
    (tmp_path / "fig.png").write_bytes(PNG)
    (tmp_path / "other.html").write_text(page('<h1 id="sec">Other</h1>'))
    (tmp_path / "index.html").write_text(page(CLEAN_BODY))
    return tmp_path


def static_problems(site, html):
    target = site / "page.html"
    target.write_text(html)
    report = browser.PageReport("page.html")
    browser._check_static(report, target, site, browser._ids_reader())
    return report


def rendered_problems(dom):
    report = browser.PageReport("page.html")
    browser._check_rendered(report, dom)
    return report


def test_a_clean_page_passes_and_is_counted(site):
    report = static_problems(site, page(CLEAN_BODY, '<script src="_static/local.js"></script>'))
    assert report.ok, report.problems
    assert (report.images, report.links, report.visible_code_lines) == (1, 1, 2)
    rendered = rendered_problems(page(CLEAN_BODY))
    assert rendered.ok, rendered.problems
    assert (rendered.formulas, rendered.math_errors) == (1, 0)


ALT = 'alt="Reliability diagram: accuracy against confidence in 15 bins"'


@pytest.mark.parametrize("old, new, expected", [
    ('src="fig.png"', 'src="missing.png"', "does not exist"),
    (ALT, 'alt=""', "no alt text"),
    (ALT, 'alt="../_images/6b0534f66d943c1c9598ab5b35baff068cfeee646bdaedcf848c15d7f049da1d.png"', "no alt text"),
    ('href="other.html#sec"', 'href="other.html#nowhere"', "no element with id 'nowhere'"),
    ('href="other.html#sec"', 'href="gone.html"', "leads nowhere"),
])
def test_static_checks_find_broken_images_and_links(site, old, new, expected):
    assert old in CLEAN_BODY
    report = static_problems(site, page(CLEAN_BODY.replace(old, new)))
    assert any(expected in p for p in report.problems), report.problems


def test_an_image_that_does_not_decode_is_reported(site):
    (site / "fig.png").write_bytes(b"not a png")
    report = static_problems(site, page(CLEAN_BODY))
    assert any("does not decode" in p for p in report.problems), report.problems


def test_a_script_or_stylesheet_from_the_network_is_reported(site):
    head = ('<script src="https://cdn.jsdelivr.net/npm/mathjax@3/es5/tex-chtml.js"></script>'
            '<link rel="stylesheet" href="//fonts.example.org/a.css">')
    report = static_problems(site, page(CLEAN_BODY, head))
    assert sum("from the network" in p for p in report.problems) == 2


@pytest.mark.parametrize("body, expected", [
    ('<p>Raw <span class="math">\\(x^2\\)</span></p>', "not typeset"),
    ('<p><span class="math"><mjx-container><mjx-merror data-mjx-error="Undefined control sequence \\foo">'
     '</mjx-merror></mjx-container></span></p>', "MathJax error"),
    ("<p>where \\(p\\) is the confidence</p>", "raw TeX"),
    ("<table><tr><th>$\\gamma$</th><th>ECE</th></tr></table>", "raw TeX"),
    ("<p>| loss | ECE |</p><p>|---|---|</p>", "Markdown table"),
    ('<div class="cell docutils container"><div class="cell_input docutils container"><pre>'
     'claim("p/x", "s", passed=True)</pre></div></div>', "call claim()"),
])
def test_rendered_checks_find_what_a_reader_would_see(body, expected):
    report = rendered_problems(page(f"<article>{body}</article>"))
    assert any(expected in p for p in report.problems), report.problems


def test_text_inside_code_or_a_closed_toggle_is_not_the_reader_s_text():
    body = ("<article><pre>| a | b |\n|---|---|</pre><code>\\(x\\)</code>"
            "<details><summary>Show</summary><p>| a | b |</p><p>\\(y\\)</p></details></article>")
    assert rendered_problems(page(body)).ok


def test_a_norm_is_not_a_table_and_a_solution_s_code_is_not_in_view(site):
    assert rendered_problems(page("<article><p>||w_CE|| grows</p></article>")).ok
    solution = ('<div class="solution dropdown admonition"><div class="cell docutils container">'
                '<div class="cell_input docutils container"><pre>x = 1\ny = 2</pre></div></div></div>')
    assert static_problems(site, page(CLEAN_BODY + solution)).visible_code_lines == 2     # the clean body's only


def test_check_book_refuses_a_folder_without_a_book(tmp_path):
    with pytest.raises(FileNotFoundError, match="no built book"):
        browser.check_book(tmp_path)


@pytest.mark.skipif(browser.find_chromium() is None, reason="no chromium on the PATH")
def test_chromium_runs_the_page_scripts_offline(site):
    script = ("<script>document.body.insertAdjacentHTML('beforeend', '<p id=done>ran</p>')</script>"
              '<script src="https://example.org/never.js"></script>')
    (site / "js.html").write_text(page("<article><p>x</p></article>" + script))
    dom = browser.rendered_dom(site / "js.html", browser.find_chromium(), budget_ms=2000)
    assert 'id="done"' in dom


# --- the claims' text: statements, quotes, corrections and remarks typeset, never raw TeX or ASCII math ---------

def claim_entry(paragraph: str) -> str:
    return (f'<article><div class="claim-entry verdict-false"><p><span class="claim-badge">false</span> '
            f'<strong>Prop. 5</strong></p><p>{paragraph}</p>'
            '<p class="claim-evidence"><span>Evidence:</span> <span class="math notranslate nohighlight">'
            '<mjx-container>\\hat p_j \\geq q_j</mjx-container></span> fails at n = 4</p></div></article>')


@pytest.mark.parametrize("paragraph, expected", [
    ("\\operatorname{ECE}(f)\\geq\\sup_{B}", "raw TeX"),                           # issue 26: the errata page
    ("the focal map never lowers the top class, p_hat_j >= q_j", "ASCII math"),
    ("the step needs f'(s) <= c e^{cs}", "ASCII math"),
    ("K^(1/rho) cwECE_rho", "ASCII math"),
    ("n^{1/rho} sqrt(BS)", "ASCII math"),
    ("g = (1-p)^gamma - gamma p (1-p)^(gamma-1) log p", "ASCII math"),
    ("the abstract truncates (82.7 -> 82)", "ASCII math"),
    ("for gamma = 1, p0 is approximately 0.4", "ASCII math"),                   # issue 47: spelled-out Greek
    ("NLL-fitted T_CE per seed", "ASCII math"),                                 # a subscript without braces
    ("10 Psi^gamma", "ASCII math"),
])
def test_a_claim_with_raw_tex_or_ascii_math_is_reported(paragraph, expected):
    report = rendered_problems(page(claim_entry(paragraph)))
    assert any(expected in p for p in report.problems), report.problems


def test_claim_math_in_math_or_code_is_not_reported():
    typeset = ('the focal map never lowers the top class, <span class="math notranslate nohighlight">'
               '<mjx-container>\\hat p_j \\ge q_j</mjx-container></span>; run <code>calib --gamma=3</code>')
    report = rendered_problems(page(claim_entry(typeset)))
    assert report.ok and (report.raw_tex, report.ascii_math) == (0, 0), report.problems
    line = ('<article><div class="claim-line"><p class="claim-statement">p_hat_j >= q_j</p></div></article>')
    assert rendered_problems(page(line)).ascii_math == 1                       # a chapter's claim block too
    for field in ("claim-premise", "claim-evidence"):                           # issue 47: every field is read
        entry = claim_entry(typeset).replace(
            "</div>", f'<p class="{field}"><span>Premise:</span> T_CE >= 1.5 (measured 2.51) (holds here)</p></div>')
        assert rendered_problems(page(entry)).ascii_math == 1
    heading = claim_entry(typeset).replace("<strong>Prop. 5</strong>",
                                           "<strong>charoenphakdee2021/gap-with-gamma</strong>")
    assert rendered_problems(page(heading)).ascii_math == 0                    # a claim's id is a name, not math


def test_ascii_math_in_a_chapters_prose_is_a_problem_but_not_in_the_api_reference():
    """Issue 47, item 3: the prose of the chapters and the book's pages writes math as math (a title "A larger
    gamma", a literal "Psi^gamma" in a caption, "kappa" in a table's cell, "×10^2" in a transcribed caption are
    problems); the API reference names arguments such as ``gamma``, and a claim's id is a name."""
    body = ("<article><h2>Exercise 4.5 (A larger gamma)</h2><p>the map Ψ^γ, see <a>prop46-beta</a></p>"
            "<table><tr><td>kappa</td><td>mean ×10^2</td></tr></table></article>")
    report = browser.PageReport("chapters/04-linear-toy.html")
    browser._check_rendered(report, page(body))
    assert report.prose_ascii_math == 4, report
    assert report.problems == ["4 line(s) of prose, a table or a caption with ASCII math, e.g. 'gamma' in "
                               "'Exercise 4.5 (A larger gamma)': write it as $...$ math (a name as `code`)"]
    for name in ("book/api/calib.losses.html", "genindex.html"):
        report = browser.PageReport(name)
        browser._check_rendered(report, page(body))
        assert report.prose_ascii_math == 0 and report.ok, report
    report = browser.PageReport("chapters/04-linear-toy.html")
    browser._check_rendered(report, page("<article><p>a larger <span class='math'><mjx-container>\\gamma"
                                         "</mjx-container></span>, see <a>prop46-beta</a>, <code>p_y</code></p>"
                                         "</article>"))
    assert report.prose_ascii_math == 0 and report.ok, report


# --- layout in Chromium: width at a phone and a desktop, contrast in both themes, console errors -------------

needs_chromium = pytest.mark.skipif(browser.find_chromium() is None, reason="no chromium on the PATH")

STATIC = __import__("pathlib").Path(__file__).resolve().parents[1] / "book" / "_static"
LAYOUT_HEAD = ("<style>body{margin:0;background:#fff;color:#222} article{width:360px;margin:0 auto}"
               'html[data-theme="dark"] body{background:#121212;color:#ddd}'
               ".pink{color:#e83e8c;background:#e0e0e0}"
               'html[data-theme="dark"] .fades{color:#333}</style>')


def audited(site, body, head=LAYOUT_HEAD, width=412):
    (site / "lay.html").write_text(page(f"<article>{body}</article>", head))
    report = browser.PageReport("lay.html")
    _, audit = browser.audit_page(site / "lay.html", browser.find_chromium(), width, budget_ms=3000)
    browser._check_audit(report, audit)
    return report


@needs_chromium
def test_a_clean_layout_passes_at_both_widths(site):
    body = '<div class="claim-line"><p class="claim-statement">holds: the computation confirms the verdict</p></div>'
    for width in browser.WIDTHS:
        report = audited(site, body, width=width)
        assert report.ok, report.problems
        assert report.overflowing == {width: 0}
    assert report.min_contrast["light"] > 10 and report.min_contrast["dark"] > 10       # #222 on #fff, #ddd on #121212


WIDE_TABLE = '<div style="overflow-x:auto"><table><tr><td style="min-width:900px">wide</td></tr></table></div>'


@needs_chromium
@pytest.mark.parametrize("body, expected", [
    ('<div style="width:900px">a line of text too long</div>', "the page pans sideways"),
    ('<div style="width:900px">a line of text too long</div>', "wider than its column"),
    (WIDE_TABLE, "scrolls sideways with no cue"),
    ('<pre style="overflow-x:hidden">' + "x" * 300 + "</pre>", "is cut"),
    # a formula is measured by its own boxes, not its glyphs (which the audit skips)
    ('<mjx-container style="display:block"><mjx-math style="display:inline-block;width:900px"><mjx-c>x</mjx-c>'
     "</mjx-math></mjx-container>", "mjx-math 'x' is wider than its column"),
])
def test_content_wider_than_its_column_is_reported(site, body, expected):
    report = audited(site, body)
    assert any(expected in p for p in report.problems), report.problems
    assert report.overflowing[412] >= 1


@needs_chromium
def test_a_scroll_box_with_the_book_s_cue_passes(site):
    head = (LAYOUT_HEAD + f"<script>{(STATIC / 'scroll-cue.js').read_text()}</script>"
            f"<style>{(STATIC / 'claims.css').read_text()}</style>")
    report = audited(site, WIDE_TABLE, head=head)
    assert report.ok, report.problems


@needs_chromium
def test_a_page_made_narrower_after_it_loads_runs_its_resize_handlers(site, monkeypatch):
    """Issue 30: audit_pages loads a page once, at the widest width, and then makes its frame narrower. A box that
    scrolls only at 412 px gets its cue there from scroll-cue.js's resize handler, as in a window a reader narrows;
    without scroll-cue.js the same box is reported at 412 px and not at 1280 px. "resize" events that the browser
    fires late (here 100, 200 and 300 ms after the audit's own, each of which postpones scroll-cue.js's marking, to
    450 ms in the end) postpone the audit too, which measured 400 ms after its own "resize" before (and reported
    the box)."""
    fluid = "<style>body{margin:0} article{margin:0 26px}</style>"
    cue = (f"<script>{(STATIC / 'scroll-cue.js').read_text()}</script>"
           f"<style>{(STATIC / 'claims.css').read_text()}</style>")
    late = ("<script>var lateResize = false; window.addEventListener('resize', function () { if (!lateResize) "
            "{ lateResize = true; [100, 200, 300].forEach(function (ms) { setTimeout(function () "
            "{ window.dispatchEvent(new Event('resize')); }, ms); }); } });</script>")
    table = '<div style="overflow-x:auto"><table><tr><td style="min-width:600px">wide</td></tr></table></div>'
    path = site / "narrowed.html"
    # what the frame made narrower measured, without the confirmation by a page loaded at 412 px (tested below)
    monkeypatch.setattr(browser, "_confirmed_at", lambda page, width, narrowed, *args: narrowed)
    for head, cued in ((fluid, False), (fluid + cue, True), (fluid + cue + late, True)):
        path.write_text(page(f"<article>{table}</article>", head))
        audits = browser.audit_pages([path], browser.find_chromium(), budget_ms=3000)
        assert [audits[path, w][1]["width"] for w in browser.WIDTHS] == list(browser.WIDTHS)
        assert audits[path, 1280][1]["overflow"] == []
        narrow = audits[path, 412][1]["overflow"]
        if cued:
            assert narrow == [], narrow
        else:
            assert len(narrow) == 1 and "scrolls sideways with no cue" in narrow[0] and "in 360 px" in narrow[0], narrow


@needs_chromium
def test_what_only_a_narrowed_page_shows_too_wide_is_confirmed_by_loading_the_page_at_that_width(site, monkeypatch):
    """A box too wide at 412 px in the page made narrower counts only if the page loaded at 412 px shows it too (what
    a phone shows; browser._confirmed_at): here a resize handler widens a box that is narrow as loaded."""
    box = '<div id="box" style="overflow-x:auto"><div style="width:300px">box</div></div>'
    widen = ("<script>window.addEventListener('resize', function () "
             "{ document.querySelector('#box > div').style.width = '900px'; });</script>")
    path = site / "widened.html"
    path.write_text(page(f"<article>{box}</article>", "<style>body{margin:0} article{margin:0 26px}</style>" + widen))
    chromium = browser.find_chromium()
    confirmed = browser.audit_pages([path], chromium, budget_ms=3000)
    assert confirmed[path, 412][1]["overflow"] == [], confirmed[path, 412][1]
    # the control: the frame made narrower measured the box too wide, and the page loaded at 412 px did not
    monkeypatch.setattr(browser, "_confirmed_at", lambda page, width, narrowed, *args: narrowed)
    narrowed = browser.audit_pages([path], chromium, budget_ms=3000)[path, 412][1]["overflow"]
    assert len(narrowed) == 1 and "div 'box' scrolls sideways with no cue (" in narrowed[0], narrowed


@needs_chromium
@pytest.mark.parametrize("classes, theme", [("pink", "light"), ("fades", "dark")])
def test_claim_text_below_4_5_to_1_is_reported_in_each_theme(site, classes, theme):
    body = f'<div class="claim-line {classes}"><p class="claim-statement">[claim ok] p/x</p></div>'
    report = audited(site, body)
    assert any(f"in the {theme} theme" in p for p in report.problems), report.problems
    assert report.min_contrast[theme] < browser.MIN_CONTRAST


@needs_chromium
def test_a_console_error_is_reported(site):
    """Issue 26: every page logged "Uncaught SyntaxError: Identifier 'THEBE_JS_URL' has already been declared"."""
    twice = '<script>const THEBE_JS_URL = "a"</script><script>const THEBE_JS_URL = "a"</script>'
    report = audited(site, "<p>x</p>", head=LAYOUT_HEAD + twice)
    assert report.console_errors == 1
    assert any("THEBE_JS_URL" in p and "console error" in p for p in report.problems), report.problems


def test_a_redirect_page_is_checked_for_its_target_not_rendered(tmp_path):
    """The build's index.html only redirects (a meta refresh, no text): in the audit's frame it navigates away
    before the audit runs, so the check confirms its target exists instead, and flags a target that does not."""
    from calib_book import browser

    (tmp_path / "book").mkdir()
    (tmp_path / "book" / "intro.html").write_text("<html><body><p>Intro</p></body></html>")
    page = tmp_path / "index.html"
    page.write_text('<meta http-equiv="Refresh" content="0; url=book/intro.html" />\n')
    assert browser.redirect_target(page) == "book/intro.html"
    assert browser.check_page(page, tmp_path, chromium="/nonexistent/chromium").problems == []
    page.write_text('<meta http-equiv="Refresh" content="0; url=book/gone.html" />\n')
    assert browser.check_page(page, tmp_path, chromium="/nonexistent/chromium").problems == \
        ["redirects to book/gone.html, which does not exist"]
    assert browser.redirect_target(tmp_path / "book" / "intro.html") is None          # an ordinary page


@needs_chromium
def test_pages_sharing_a_launch_get_their_own_audit_at_each_width(site):
    """Issue 30, item 3: check_book renders several pages, each at both widths, in one Chromium launch; each
    frame's audit reaches its own page and width (the same as a launch of its own), and a redirect is not
    rendered."""
    (site / "sub").mkdir()
    bodies = {site / "wide.html": '<div style="width:900px">a line of text too long</div>',
              site / "sub" / "clean.html": "<p>a short line</p>",
              site / "error.html": '<p>x</p><script>console.error("only here")</script>'}
    for path, body in bodies.items():
        path.write_text(page(f"<article>{body}</article>", LAYOUT_HEAD))
    chromium = browser.find_chromium()
    shared = browser.audit_pages(list(bodies), chromium, budget_ms=3000)
    assert set(shared) == {(p, w) for p in bodies for w in browser.WIDTHS}
    for (path, width), (dom, audit) in shared.items():
        alone = browser.audit_page(path, chromium, width, budget_ms=3000)[1]
        assert audit["width"] == width
        if width == max(browser.WIDTHS):            # the page's DOM comes back from the widest frame only
            assert audit == alone, (path, width)
            assert ("too long" in dom) == (path.name == "wide.html")
        else:                                       # and the claims' contrast is measured at the loaded width only
            assert dom is None and audit["contrast"] == audit["themes"] == {}
            assert set(alone["contrast"]) == set(alone["themes"]) == {"light", "dark"}
            assert {**audit, "contrast": alone["contrast"], "themes": alone["themes"]} == alone, (path, width)
        assert bool(audit["overflow"]) == (path.name == "wide.html"), (path, width, audit)   # a 360 px column
        assert audit["errors"] == (["only here"] if path.name == "error.html" else [])
    assert not list(site.rglob(".audit-*"))                                         # the copies are removed
    (site / "index.html").write_text('<html><head><meta http-equiv="refresh" content="0; url=sub/clean.html">'
                                     "</head><body></body></html>")
    reports = browser.check_book(site, chromium, workers=2, pages_per_launch=2, progress=False)
    assert [r.page for r in reports] == [str(p.relative_to(site)) for p in browser.book_pages(site)]
    wide = next(r for r in reports if r.page == "wide.html")
    assert any("wider than its column" in p for p in wide.problems) and wide.overflowing[412] >= 1


def test_the_lighter_dom_keeps_what_the_checks_read():
    """Issue 30: the rendered checks parse the DOM without the glyphs of typeset formulas and without the token spans
    of code (a tenth of chapter 08's nodes). A formula stays a container (typeset or not is still seen), a MathJax
    error stays whole, code keeps its text, and nothing outside a formula or a code block changes."""
    dom = ('<p>x <span class="math"><mjx-container class="MathJax" jax="CHTML"><mjx-math><mjx-mi><mjx-c class="c1">'
           '</mjx-c></mjx-mi></mjx-math></mjx-container></span> and <span class="math">\\(y\\)</span></p>'
           '<mjx-container jax="CHTML"><mjx-merror data-mjx-error="Undefined control sequence \\foo">'
           '</mjx-merror></mjx-container>'
           '<pre><span class="n">claim</span><span class="p">(</span>"a", passed=True)</pre>'
           '<span class="x">kept</span>')
    light = browser._lighter(dom)
    assert '<mjx-container class="MathJax" jax="CHTML"></mjx-container>' in light and "<mjx-math" not in light
    assert 'data-mjx-error="Undefined control sequence' in light
    assert '<pre>claim("a", passed=True)</pre><span class="x">kept</span>' in light
    report_full, report_light = browser.PageReport("full"), browser.PageReport("light")
    browser._check_rendered(report_full, dom)
    browser._check_rendered(report_light, light)
    # untypeset, raw TeX, error
    assert report_full.problems == report_light.problems and len(report_light.problems) == 3
    assert (report_full.formulas, report_full.math_errors) == (report_light.formulas, report_light.math_errors) \
        == (2, 1)


# ------------------------------------------------------------------ issue 45, item 2: a slow machine is given time

def test_timeouts_scale_with_the_load(monkeypatch):
    """A timeout measured on an idle machine is multiplied by the load average per core, at least 1 and at most
    MAX_FACTOR; the error message says what the load was."""
    import os

    from calib_book import timeouts

    cores = os.cpu_count() or 1
    monkeypatch.setattr(os, "getloadavg", lambda: (14.0 * cores / 2, 0.0, 0.0))
    assert timeouts.scaled(120) == pytest.approx(120 * 7.0)
    assert "load average" in timeouts.describe_load() and f"on {cores} cores" in timeouts.describe_load()
    monkeypatch.setattr(os, "getloadavg", lambda: (0.1, 0.0, 0.0))
    assert timeouts.scaled(120) == 120                                    # never less than measured idle
    monkeypatch.setattr(os, "getloadavg", lambda: (1e6, 0.0, 0.0))
    assert timeouts.scaled(1) == timeouts.MAX_FACTOR


def _slow_chromium(tmp_path, chromium, stalls: int):
    """A chromium that stalls (sleeps past any test timeout) on its first ``stalls`` launches, then runs."""
    count = tmp_path / "launches"
    script = tmp_path / "slow-chromium"
    script.write_text(f"""#!/bin/sh
n=$(cat {count} 2>/dev/null || echo 0); n=$((n + 1)); echo $n > {count}
if [ $n -le {stalls} ]; then exec sleep 60; fi
exec {chromium} "$@"
""")
    script.chmod(0o755)
    return script, count


@pytest.mark.skipif(browser.find_chromium() is None, reason="no chromium on the PATH")
def test_a_launch_that_runs_out_of_time_is_retried_alone_with_more_time(site, tmp_path, monkeypatch):
    """Under load a Chromium launch of several pages ran past its fixed 120 s and the whole-book check failed. Now the
    launch's time scales with the load, and a launch that still runs out of it is retried once, each page alone with
    RETRY_FACTOR times as long: here the first launch stalls, and the pages are checked all the same."""
    from calib_book import timeouts

    (site / "second.html").write_text(page(CLEAN_BODY))
    slow, count = _slow_chromium(tmp_path, browser.find_chromium(), stalls=1)
    monkeypatch.setattr(browser, "RENDER_TIMEOUT_S", 3)
    monkeypatch.setattr(timeouts, "RETRY_FACTOR", 10)
    monkeypatch.setattr(timeouts, "load_factor", lambda: 1.0)
    reports = browser.check_pages([site / "index.html", site / "second.html"], site, str(slow))
    assert [r.ok for r in reports] == [True, True], [r.problems for r in reports]
    assert int(count.read_text()) == 3                  # the stalled launch, then each page alone


@pytest.mark.skipif(browser.find_chromium() is None, reason="no chromium on the PATH")
def test_a_page_that_never_renders_is_named_with_the_time_it_had(site, tmp_path, monkeypatch):
    from calib_book import timeouts

    slow, _ = _slow_chromium(tmp_path, browser.find_chromium(), stalls=99)
    monkeypatch.setattr(browser, "RENDER_TIMEOUT_S", 1)
    monkeypatch.setattr(timeouts, "RETRY_FACTOR", 2)
    monkeypatch.setattr(timeouts, "load_factor", lambda: 1.0)
    with pytest.raises(browser.RenderTimeout, match=r"the audit of \S*index\.html at 1280, 412 px within 2 s of wall "
                                                    r"time \(load average .*\), retried alone after a launch of 1 "
                                                    r"page\(s\) had run out of 1 s"):
        browser.check_pages([site / "index.html"], site, str(slow))


# ------------------------------------------------- issue 47: the reader's book, round 3 (phone, figures, code, site)

def _theme_file(package: str, relative: str):
    """A file of an installed theme (the book extra's pydata-sphinx-theme and sphinx-book-theme), or None."""
    import importlib.util
    from pathlib import Path

    spec = importlib.util.find_spec(package)
    if spec is None or spec.origin is None:
        return None
    path = Path(spec.origin).parent / relative
    return path if path.is_file() else None


PYDATA_JS = _theme_file("pydata_sphinx_theme", "theme/pydata_sphinx_theme/static/scripts/pydata-sphinx-theme.js")
BOOK_THEME_JS = _theme_file("sphinx_book_theme", "theme/sphinx_book_theme/static/scripts/sphinx-book-theme.js")
PYDATA_CSS = _theme_file("pydata_sphinx_theme", "theme/pydata_sphinx_theme/static/styles/pydata-sphinx-theme.css")
needs_themes = pytest.mark.skipif(None in (PYDATA_JS, BOOK_THEME_JS, PYDATA_CSS),
                                  reason="the book's themes are not installed")

#: The two toggles of each sidebar as pydata-sphinx-theme 0.17 and sphinx-book-theme 1.3 write them: one in the top
#: bar, which sphinx-book-theme hides, then the one a reader sees in the article's header.
THEME_SIDEBARS = """
<div class="bd-header"><button class="pst-navbar-icon sidebar-toggle primary-toggle">=</button>
<button class="pst-navbar-icon sidebar-toggle secondary-toggle">-</button></div>
<dialog id="pst-primary-sidebar-modal"></dialog>
<div id="pst-primary-sidebar" class="bd-sidebar-primary"><a href="#a">1. Measuring calibration</a></div>
<dialog id="pst-secondary-sidebar-modal"></dialog>
<div id="pst-secondary-sidebar" class="bd-sidebar-secondary"><a href="#b">1.1 The runs</a></div>
<article class="bd-article"><div class="bd-header-article">
<button class="sidebar-toggle primary-toggle btn">=</button>
<button class="sidebar-toggle secondary-toggle btn">-</button></div><p>The chapter's text.</p></article>"""


def _audits(site, name, body, head, widths=browser.WIDTHS):
    path = site / name
    path.write_text(page(body, head))
    return browser.audit_pages([path], browser.find_chromium(), widths, budget_ms=4000)


def _script(name):
    return f"<script>{(STATIC / name).read_text()}</script>"


def _style(name):
    return f"<style>{(STATIC / name).read_text()}</style>"


@needs_chromium
@needs_themes
def test_the_contents_buttons_open_their_drawers_with_the_book_s_script(site):
    """Issue 47, item 1: the theme's scripts bind the first .primary-toggle and .secondary-toggle of the page, the top
    bar's, which sphinx-book-theme hides: the buttons a reader sees did nothing, on a phone (no drawer) and on a desktop
    (the sidebar did not fold). The check clicks each visible button; book/_static/sidebar-toggles.js passes the click
    on to the bound one. The themes' own scripts run here."""
    head = ("<style>body{margin:0} .bd-header .sidebar-toggle{display:none} article{margin:0 26px}</style>"
            f'<script src="{PYDATA_JS.as_uri()}"></script><script src="{BOOK_THEME_JS.as_uri()}"></script>')
    before = _audits(site, "theme.html", THEME_SIDEBARS, head)
    for width in browser.WIDTHS:
        toggles = before[site / "theme.html", width][1]["toggles"]
        assert any("the contents button" in t and "does nothing" in t for t in toggles), (width, toggles)
    assert any("in-page contents button" in t and "does nothing" in t
               for t in before[site / "theme.html", 412][1]["toggles"])
    after = _audits(site, "theme.html", THEME_SIDEBARS, head + _script("sidebar-toggles.js"))
    for width in browser.WIDTHS:
        report = browser.PageReport("theme.html")
        browser._check_audit(report, after[site / "theme.html", width][1], errors=False)
        assert report.dead_buttons == {width: 0}, report.problems


FIGURE_SVG = ('<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink" width="{w}pt" '
              'height="200pt" viewBox="0 0 {w} 200"><defs><path id="g" d="M 0 0 L 50 70 L 60 0 z"/></defs>'
              '<g id="text_1"><g transform="translate(10 150) scale(0.11 -0.11)"><use xlink:href="#g"/></g></g></svg>')


def test_the_smallest_text_of_a_matplotlib_svg_is_read_from_its_glyph_groups(tmp_path):
    """matplotlib draws text as paths, a group scaled by size / 100 per run of text; text kept as text has a size."""
    (tmp_path / "paths.svg").write_text(FIGURE_SVG.format(w=720))
    assert browser.svg_text_size(tmp_path / "paths.svg") == (pytest.approx(11.0), 720.0)
    (tmp_path / "text.svg").write_text('<svg viewBox="0 0 300 100"><text style="font: 9px sans-serif">a</text>'
                                       '<text style="font-size: 12px">b</text></svg>')
    assert browser.svg_text_size(tmp_path / "text.svg") == (9.0, 300.0)
    (tmp_path / "none.svg").write_text('<svg viewBox="0 0 300 100"><path d="M 0 0 L 1 1"/></svg>')
    assert browser.svg_text_size(tmp_path / "none.svg") is None


@needs_chromium
def test_a_figure_whose_text_is_too_small_on_a_phone_is_reported_unless_a_tap_opens_it_full_size(site):
    """Issue 47, item 4: a 10-inch figure shrunk to a phone's column shows its 11 pt tick labels at 4-6 px. It
    passes when a tap opens it full-size (book/_static/figure-zoom.js: its natural 960 px, labels at 14.7 px); a
    figure small enough to read where it is passes without."""
    (site / "wide.svg").write_text(FIGURE_SVG.format(w=720))
    (site / "narrow.svg").write_text(FIGURE_SVG.format(w=200))
    body = ('<article><figure><img src="wide.svg" alt="ten-inch figure"><figcaption>Wide.</figcaption></figure>'
            '<div class="cell_output"><img src="narrow.svg" alt="small figure"></div></article>')
    head = "<style>body{margin:0} article{margin:0 26px} img{max-width:100%}</style>"
    path = site / "figures.html"
    before = _audits(site, "figures.html", body, head)
    report = browser.PageReport("figures.html")
    browser._check_audit(report, before[path, 412][1])
    assert report.small_figures[412] == 1, report.problems
    # 720 pt (960 px) in a <figure>'s 280 px (the 360 px column less its 40 px margins): 11 pt text at 4.3 px
    assert any("figure 'Wide.': its smallest text is 4.3 px on screen, and a tap does not open it full-size" in p
               for p in report.problems), report.problems
    after = _audits(site, "figures.html", body, head + _style("claims.css") + _script("figure-zoom.js"))
    for width in browser.WIDTHS:
        figures = after[path, width][1]["figures"]
        assert [f["full"] for f in figures] == [960, pytest.approx(266.67, abs=1)], figures     # natural width
        report = browser.PageReport("figures.html")
        browser._check_audit(report, after[path, width][1])
        assert report.small_figures == {width: 0}, report.problems


CODE_CELL = ('<div class="cell docutils container"><div class="cell_input docutils container"><div class="highlight">'
             "<pre>def f(x):\n    if x:\n        return some_function_with_a_long_name(x, another_argument=1, "
             "yet_another_argument=2, and_one_more=3)\n</pre></div></div></div>")


@needs_chromium
def test_code_that_wraps_its_lines_is_reported_and_the_book_s_code_scrolls_with_a_cue(site):
    """Issue 47, item 6: claims.css wrapped code (white-space: pre-wrap), so a long line came back at column 0 and
    lost Python's indentation. Code now keeps its lines and scrolls in its block, with scroll-cue.js's cue."""
    wrapping = "<style>body{margin:0} article{margin:0 26px} pre{white-space:pre-wrap}</style>"
    report = audited(site, CODE_CELL, head=wrapping)
    assert any("wraps its long lines (white-space: pre-wrap)" in p for p in report.problems), report.problems
    book = "<style>body{margin:0} article{margin:0 26px}</style>" + _style("claims.css") + _script("scroll-cue.js")
    for width in browser.WIDTHS:
        report = audited(site, CODE_CELL, head=book, width=width)
        assert report.ok, report.problems


INLINE_CODE = ('<p>The map <code class="docutils literal notranslate"><span class="pre">'
               'calib.posthoc.focal_temperature.FocalTemperatureScaling.calibration_map</span></code> is fitted.</p>')


@needs_chromium
def test_inline_code_broken_inside_a_word_is_reported_and_the_book_breaks_it_between_its_parts(site):
    """Issue 47, item 11: inline code broke anywhere (overflow-wrap: anywhere), in the middle of a name. Now
    code-breaks.js lets it break after a dot, a slash or an underscore, and claims.css inside a part only when the part
    alone is wider than a line."""
    anywhere = ("<style>body{margin:0} article{margin:0 26px} code{overflow-wrap:anywhere}</style>")
    report = audited(site, INLINE_CODE, head=anywhere)
    assert any("inline code broken inside a word" in p for p in report.problems), report.problems
    book = "<style>body{margin:0} article{margin:0 26px}</style>" + _style("claims.css") + _script("code-breaks.js")
    path = site / "code.html"
    path.write_text(page(f'<article class="bd-article">{INLINE_CODE}</article>', book))
    audit = browser.audit_page(path, browser.find_chromium(), 412, budget_ms=3000)[1]
    assert audit["code"] == [] and audit["overflow"] == [], audit


MAIN_TABLE = ('<div class="cell_output"><table><thead><tr><th>loss (by ECE pre-T)</th><th>ECE pre-T (%)</th>'
              "<th>minus CE, 95% CI (Holm p)</th><th>ECE post-T (%)</th><th>minus CE post-T, 95% CI (Holm p)</th></tr>"
              "</thead><tbody>"
              + "<tr><td>flsc-532</td><td>1.48 ± 0.14</td><td>-5.92 [-7.03, -4.80], Holm p &lt; 0.001</td>"
                "<td>1.44 ± 0.35</td><td>-0.69 [-1.50, 0.12], Holm p = 0.548</td></tr>" * 3
              + "</tbody></table></div>")


@needs_chromium
def test_a_short_table_cell_broken_over_many_lines_is_reported_and_the_book_keeps_cells_on_two(site):
    """Issue 47, item 7: chapter 10's main table, shrunk to a phone's column, broke each interval over four lines. The
    check reports a cell of at most 40 characters on more than two lines; table-cells.js gives each cell a minimum
    width (the table then scrolls in its box, with the cue)."""
    head = "<style>body{margin:0} article{margin:0 26px}</style>" + _style("claims.css")
    before = _audits(site, "table.html", f'<article class="bd-article">{MAIN_TABLE}</article>', head, (412,))
    cells = before[site / "table.html", 412][1]["cells"]
    assert any("'-5.92 [-7.03, -4.80], Holm p < 0.001' over" in c for c in cells), cells
    head += _script("table-cells.js") + _script("scroll-cue.js")
    path = site / "table.html"
    path.write_text(page(f'<article class="bd-article">{MAIN_TABLE}</article>', head))
    report = browser.PageReport("table.html")
    _, audit = browser.audit_page(path, browser.find_chromium(), 412, budget_ms=3000)
    browser._check_audit(report, audit)
    assert audit["cells"] == [] and report.ok, report.problems


def _ledger_summary_fits(site, css: str) -> bool:
    """Whether the ledger's summary table (9 columns, as calib_book.pages writes it) fits the article's column at
    1280 px (688 px), with the theme's CSS and ``css``."""
    verdicts = ["holds", "imprecise", "typo", "false", "not-reproduced", "inconclusive", "untested", "total"]
    head_row = '<tr><th class="head"><p>paper</p></th>' + "".join(
        f'<th class="head text-right"><p>{v}</p></th>' for v in verdicts) + "</tr>"
    rows = "".join(f"<tr><td><p>{paper}</p></td>" + "".join(f'<td class="text-right"><p><a href="#x">{n}</a></p></td>'
                                                            for n in (41, 8, 4, 1, 2, 4, 1, 61)) + "</tr>"
                   for paper in ("mukhoti2020", "charoenphakdee2021", "all"))
    table = (f'<section id="summary"><div class="pst-scrollable-table-container"><table class="table"><thead>'
             f"{head_row}</thead><tbody>{rows}</tbody></table></div></section>")
    measure = ("<script>window.addEventListener('load', function () { var t = document.querySelector('table');"
               "document.body.setAttribute('data-fits', t.scrollWidth <= t.clientWidth + 1); });</script>")
    head = f'<link rel="stylesheet" href="{PYDATA_CSS.as_uri()}">{css}<style>article{{width:688px}}</style>'
    (site / "summary.html").write_text(page(f'<article class="bd-article">{table}</article>{measure}', head))
    dom = browser.rendered_dom(site / "summary.html", browser.find_chromium(), width=1280, budget_ms=3000)
    return 'data-fits="true"' in dom


@needs_chromium
@needs_themes
def test_the_ledger_summary_fits_a_desktop_column(site):
    """Issue 47, item 7: the summary of the claims ledger needed a sideways scroll at 1280 px; its verdicts' headers
    now read bottom to top (claims.css), so that each column is as wide as its counts."""
    old = "<style>section#summary table { display: block; overflow-x: auto; max-width: 100%; }</style>"
    assert not _ledger_summary_fits(site, old)
    assert _ledger_summary_fits(site, _style("claims.css"))


CLAIM_OUTPUT = ('<div class="bd-content"><div class="cell_output docutils container"><div class="output text_html">'
                '<div class="claim-line verdict-holds"><p class="claim-statement">the computation confirms it</p></div>'
                "</div></div></div>")


@needs_chromium
@needs_themes
def test_a_claim_block_framed_in_the_dark_theme_is_reported(site):
    """Issue 47, item 7: pydata-sphinx-theme draws a cell's HTML output on a light box in the dark theme, a grey frame
    around every claim; claims.css's rule to undo it was less specific than the theme's."""
    theme = f'<link rel="stylesheet" href="{PYDATA_CSS.as_uri()}">'
    report = audited(site, CLAIM_OUTPUT, head=theme)
    assert any("claim block(s) drawn in a box of another colour in the dark theme" in p for p in report.problems), \
        report.problems
    report = audited(site, CLAIM_OUTPUT, head=theme + _style("claims.css"))
    assert report.ok, report.problems


@needs_chromium
def test_links_in_note_boxes_read_at_4_5_to_1_in_both_themes(site):
    """Issue 47, item 11: a link in an exercise's box read at 4.3:1, the theme's link blue (#176de8, sphinx-book-theme's
    primary colour) on sphinx-exercise's 10% blue tint; the check measures the links of every admonition in both
    themes, and claims.css gives them a darker blue of the same hue in the light theme."""
    box = ('<div class="exercise admonition"><p class="admonition-title">Exercise 5.1</p><p><em>Objective:</em> '
           '<a class="reference internal" href="#x"><span class="std std-ref">O2.1</span></a></p></div>')
    theme = ("<style>html[data-theme=light] a{color:#176de8} html[data-theme=dark] a{color:#528fe4}"
             ".admonition{background:rgba(68,138,255,.1)}</style>")
    report = audited(site, box, head=LAYOUT_HEAD + theme)
    assert report.problems == ["a link in a note box with contrast 4.3:1 in the light theme (below 4.5:1): "
                               "span.std.std-ref 'O2.1'"], report.problems
    assert audited(site, box, head=LAYOUT_HEAD + theme + _style("claims.css")).ok


def test_a_path_of_the_building_machine_in_a_page_or_its_notebook_is_reported(tmp_path):
    """Issue 47, item 5: chapter 05 printed where its stored runs are on the machine that built it
    (/.../book/results/...). Every page and the notebook downloaded from it are searched for the checkout's folder and
    for paths under /tmp, /work, /root and home folders."""
    checkout = tmp_path / "checkout"
    (checkout / "_build" / "html" / "chapters").mkdir(parents=True)
    (checkout / "_toc.yml").write_text("root: intro\n")
    html = checkout / "_build" / "html"
    chapter = html / "chapters" / "05.html"
    assert browser.machine_paths("read from book/results/05 and https://example.org/tmp/x, file/tmp/y") == []
    assert browser.machine_paths("/tmp/ipykernel_751/3108670509.py:5: GridEdgeWarning") == \
        ["/tmp/ipykernel_751/3108670509.py:5:"]
    assert browser.machine_paths(f"runs in {checkout}/book/results/05.", [checkout]) == \
        [f"{checkout}/book/results/05."]
    assert browser.machine_paths("/home/ada/calib/x and /root/calib and /work/main/y") == \
        ["/home/ada/calib/x", "/root/calib", "/work/main/y"]
    for text, found in ((f"<p>read from <code>{checkout}/book/results/05</code></p>", 1),
                        ("<p>read from <code>book/results/05</code></p>", 0)):
        chapter.write_text(page(text))
        report = static_problems(html, chapter.read_text())        # written as page.html beside the site's root
        assert sum("path(s) of the building machine in the page" in p for p in report.problems) == found
    (html / "_sources" / "chapters").mkdir(parents=True)
    (html / "_sources" / "chapters" / "05.ipynb").write_text('{"metadata": {"papermill": {"input_path": '
                                                             f'"{checkout}/_build/notebooks/05.ipynb"}}}}}}')
    report = browser.PageReport("chapters/05.html")
    browser._check_static(report, chapter, html, browser._ids_reader())
    assert any("in its download _sources/chapters/05.ipynb" in p for p in report.problems), report.problems


BOOK_PAGE = ('<html data-content_root="./"><head>{head}</head><body><article><p>x</p></article>'
             '<footer>{footer}</footer></body></html>')


def test_every_page_of_the_book_has_an_icon_the_book_s_pdf_the_citation_file_and_a_date(site):
    """Issue 47, items 10 and 11: a page of the book's theme (data-content_root) links a favicon, the whole book's PDF
    (or says that this build has none), CITATION.cff, and shows the date of the build."""
    bare = static_problems(site, BOOK_PAGE.format(head="", footer=""))
    assert bare.problems == ["no favicon (a <link rel=\"icon\"> to a file of the site)",
                             "no link to the whole book's PDF (nor a note that this build has none)",
                             "no link to CITATION.cff", "no date of the build (last updated)"]
    for name in ("favicon.svg", "book.pdf", "CITATION.cff"):
        (site / name).write_text("x")
    footer = ('<p class="calib-downloads">The whole book: <a class="calib-book-pdf" href="book.pdf">book.pdf</a>. '
              '<a class="calib-citation" href="CITATION.cff">CITATION.cff</a></p><p class="last-updated">Last updated '
              "on 2026-11-29.</p>")
    assert static_problems(site, BOOK_PAGE.format(head='<link rel="icon" href="favicon.svg">', footer=footer)).ok
    missing = footer.replace('<a class="calib-book-pdf" href="book.pdf">book.pdf</a>',
                             '<span class="calib-book-pdf-missing">not part of this build</span>')
    assert static_problems(site, BOOK_PAGE.format(head='<link rel="icon" href="favicon.svg">', footer=missing)).ok
    assert static_problems(site, page("<article><p>not a page of the book's theme</p></article>")).ok


@needs_chromium
def test_the_search_ranks_the_book_s_pages_above_the_api_reference(site):
    """Issue 47, item 11: Sphinx scores a match in an object's name (an attribute of the API reference) above a match
    in a chapter's title; book/_static/search-scorer.js moves the reference's results below the book's pages."""
    results = ('[["book/api/posthoc", "calib.posthoc.TemperatureScaling.temperature_", "#x", "Python attribute", 16, '
               '"book/api/posthoc.md"], ["chapters/07-focal-calibration-map", "7. The focal calibration map and '
               'temperature scaling", "", null, 15, "chapters/07.ipynb"], ["chapters/01-measuring-calibration", '
               '"1. Measuring calibration", "", null, 5, "chapters/01.ipynb"], ["_modules/calib/posthoc", '
               '"calib.posthoc", "", null, 7, "_modules/calib/posthoc.html"]]')
    sort = ("<script>var r = " + results + "; r.forEach(function (x) { x[4] = Scorer.score(x); });"
            "r.sort(function (a, b) { return b[4] - a[4]; });"
            "document.body.setAttribute('data-order', r.map(function (x) { return x[0]; }).join(','));</script>")
    (site / "search.html").write_text(page("<p>search</p>" + _script("search-scorer.js") + sort))
    dom = browser.rendered_dom(site / "search.html", browser.find_chromium(), budget_ms=2000)
    assert ('data-order="chapters/07-focal-calibration-map,chapters/01-measuring-calibration,book/api/posthoc,'
            '_modules/calib/posthoc"') in dom


def test_check_book_refuses_a_page_it_does_not_have_by_name(tmp_path):
    """``check_book(only=...)`` (the pages `make test` opens): a path that is not a page of the build is named, with
    the form it wants, before any Chromium starts (the executable given here does not exist)."""
    (tmp_path / "book").mkdir()
    for name in ("index.html", "book/intro.html"):
        (tmp_path / name).write_text("<html><body>page</body></html>")
    with pytest.raises(ValueError, match=r"only=\['book/nope\.html'\]: no such page .* e\.g\. 'book/intro\.html'"):
        browser.check_book(tmp_path, "/nonexistent/chromium", only=["book/intro.html", "book/nope.html"])
