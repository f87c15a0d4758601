"""calib_book.browser: each check finds the problem it is for, on small pages written here, and passes a clean one."""

import base64

import pytest

from calib_book import browser

# a 1x1 PNG
PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==")

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
            '<p class="claim-evidence"><span>Evidence:</span> p_hat_j >= q_j fails at n = 4</p></div></article>')


@pytest.mark.parametrize("paragraph, expected", [
    ("\\operatorname{ECE}(f)\\geq\\sup_{B}", "raw TeX"),                           # issue 26: the errata page
    ("the focal map never lowers the top class, p_hat_j >= q_j", "ASCII math"),
    ("the step needs f'(s) <= c e^{cs}", "ASCII math"),
    ("K^(1/rho) cwECE_rho", "ASCII math"),
    ("n^{1/rho} sqrt(BS)", "ASCII math"),
    ("g = (1-p)^gamma - gamma p (1-p)^(gamma-1) log p", "ASCII math"),
    ("the abstract truncates (82.7 -> 82)", "ASCII math"),
])
def test_a_claim_with_raw_tex_or_ascii_math_is_reported(paragraph, expected):
    report = rendered_problems(page(claim_entry(paragraph)))
    assert any(expected in p for p in report.problems), report.problems


def test_claim_math_in_math_code_or_evidence_is_not_reported():
    typeset = ('the focal map never lowers the top class, <span class="math notranslate nohighlight">'
               '<mjx-container>\\hat p_j \\ge q_j</mjx-container></span>; run <code>calib --gamma=3</code>')
    report = rendered_problems(page(claim_entry(typeset)))
    assert report.ok and (report.raw_tex, report.ascii_math) == (0, 0), report.problems
    line = ('<article><div class="claim-line"><p class="claim-statement">p_hat_j >= q_j</p></div></article>')
    assert rendered_problems(page(line)).ascii_math == 1                       # a chapter's claim block too
    premise = claim_entry(typeset).replace(
        "</div>", '<p class="claim-premise"><span>Premise:</span> T_CE >= 1.5 (measured 2.51) (holds here)</p></div>')
    report = rendered_problems(page(premise))                                  # measured numbers, like the evidence
    assert report.ok and report.ascii_math == 0, report.problems


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
    head = LAYOUT_HEAD + f"<script>{(STATIC / 'scroll-cue.js').read_text()}</script><style>{(STATIC / 'claims.css').read_text()}</style>"
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
            assert dom is None and audit["contrast"] == {} and set(alone["contrast"]) == {"light", "dark"}
            assert {**audit, "contrast": alone["contrast"]} == alone, (path, width)
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
           '<pre><span class="n">claim</span><span class="p">(</span>"a", passed=True)</pre><span class="x">kept</span>')
    light = browser._lighter(dom)
    assert '<mjx-container class="MathJax" jax="CHTML"></mjx-container>' in light and "<mjx-math" not in light
    assert 'data-mjx-error="Undefined control sequence' in light
    assert '<pre>claim("a", passed=True)</pre><span class="x">kept</span>' in light
    report_full, report_light = browser.PageReport("full"), browser.PageReport("light")
    browser._check_rendered(report_full, dom)
    browser._check_rendered(report_light, light)
    assert report_full.problems == report_light.problems and len(report_light.problems) == 3   # untypeset, raw TeX, error
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
