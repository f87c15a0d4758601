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
