"""Every figure of the book is a numbered MyST-NB figure: caption, unique name, alt text, collapsed input.

The chapters are parsed with jupytext, as the book runner reads them; nothing is executed. A code cell that
draws a matplotlib figure (it calls ``plt.show()``, ``plt.subplots``, ``plt.figure`` or a ``plot_*`` /
``reliability_diagram`` helper) must carry

- ``mystnb.figure.caption``: what the reader should see, in words (at least one sentence);
- ``mystnb.figure.name``: ``fig-...``, unique over the whole book, so that the text can ``{numref}`` it;
- ``mystnb.image.alt``: a description of the picture (not a file name or an image hash);
- the ``hide-input`` tag (plotting code is plumbing);

and show at most one figure. Titles and captions do not borrow a paper's figure numbers without saying whose
they are ("after Fig. 3 of Mukhoti et al. (2020)").
"""

import re
from pathlib import Path

import jupytext
import pytest

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = sorted((ROOT / "chapters").glob("[0-9][0-9]-*.md"))

DRAWS = re.compile(r"plt\.(show|subplots|figure)\(|\bplot_\w+\(|\breliability_diagram\(")
# a paper's figure number ("Fig. 3", "Fig. 4(a)") in a title or caption must say whose it is
BORROWED = re.compile(r"\bFig\.\s*\d")
ATTRIBUTED = re.compile(r"\bFig\.\s*\d+(\([a-z, -]+\))?\s+of\s+[A-Z][\w &.-]+\(\d{4}\)|paper's Fig\.")
TITLE_CALL = re.compile(r"""(?:set_title|suptitle|title\s*=)\s*\(?\s*r?f?(["'])(.*?)\1""")


def figure_problems(path: Path) -> tuple[list[str], list[str]]:
    """(problems, figure names) of one chapter file."""
    problems, names = [], []
    notebook = jupytext.read(path)
    for index, cell in enumerate(notebook.cells):
        if cell.cell_type != "code" or not DRAWS.search(cell.source):
            continue
        where = f"{path.name} cell {index} ({cell.source.strip().splitlines()[0][:50]!r})"
        meta = cell.metadata.get("mystnb", {})
        figure, image = meta.get("figure", {}), meta.get("image", {})
        caption = " ".join(str(figure.get("caption", "")).split())
        name = str(figure.get("name", ""))
        alt = " ".join(str(image.get("alt", "")).split())
        if len(caption) < 40 or "." not in caption:
            problems.append(f"{where}: no figure caption (mystnb: figure: caption:)")
        if not re.fullmatch(r"fig-[a-z0-9-]+", name):
            problems.append(f"{where}: no figure name fig-... (mystnb: figure: name:)")
        else:
            names.append(name)
        if len(alt) < 30 or re.search(r"\.(png|svg|jpe?g)\b|[0-9a-f]{32}", alt):
            problems.append(f"{where}: no alt text describing the figure (mystnb: image: alt:)")
        if "hide-input" not in cell.metadata.get("tags", []):
            problems.append(f"{where}: a figure cell must be tagged hide-input")
        if cell.source.count("plt.show()") > 1:
            problems.append(f"{where}: shows {cell.source.count('plt.show()')} figures; one figure per cell")
        if BORROWED.search(caption) and not ATTRIBUTED.search(caption):
            problems.append(f"{where}: the caption borrows a paper's figure number without saying whose")
        for _, title in TITLE_CALL.findall(cell.source):
            if BORROWED.search(title) and not ATTRIBUTED.search(title) and not re.search(r"\bof\b", title):
                problems.append(f"{where}: the title {title!r} borrows a paper's figure number")
    return problems, names


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_every_figure_is_numbered_captioned_and_described(path):
    problems, _ = figure_problems(path)
    assert not problems, "\n".join(problems)


def test_figure_names_are_unique_book_wide():
    names = [n for path in CHAPTERS for n in figure_problems(path)[1]]
    assert len(names) > 30
    assert len(names) == len(set(names)), sorted({n for n in names if names.count(n) > 1})


def test_numref_targets_exist():
    names = {n for path in CHAPTERS for n in figure_problems(path)[1]}
    for path in CHAPTERS:
        for target in re.findall(r"\{numref\}`(?:[^`<]*<)?(fig-[a-z0-9-]+)>?`", path.read_text()):
            assert target in names, f"{path.name}: {{numref}} to unknown figure {target}"


def test_the_check_catches_a_bare_figure(tmp_path):
    bad = tmp_path / "99-bad.md"
    bad.write_text(
        "---\njupytext:\n  text_representation:\n    extension: .md\n    format_name: myst\n"
        "    format_version: 0.13\nkernelspec:\n  display_name: Python 3\n  language: python\n  name: python3\n"
        "---\n\n# Bad\n\n"
        "```{code-cell} ipython3\nfig, ax = plt.subplots()\nax.set_title('Fig. 3: curves')\nplt.show()\n"
        "plt.plot([1, 2])\nplt.show()\n```\n\n"
        "```{code-cell} ipython3\n---\nmystnb:\n  figure:\n    caption: |\n      Curves after the paper, Fig. 2.\n"
        "    name: fig-ok\n  image:\n"
        "    alt: ../_images/3beae1da67d121f2eaecb3af5d8ff913ee79538d8c32fd725cee8a355cb18b86.png\n"
        "tags: [hide-input]\n---\nfig, ax = plt.subplots()\nplt.show()\n```\n")
    problems, names = figure_problems(bad)
    text = "\n".join(problems)
    for expected in ("no figure caption", "no figure name", "no alt text", "hide-input", "shows 2 figures",
                     "title 'Fig. 3: curves'", "caption borrows"):
        assert expected in text, expected
    assert names == ["fig-ok"]


SETUP_CALL = re.compile(r"^use_web_figures\(\)", re.M)


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_every_chapter_that_draws_sets_the_web_figure_formats_first(path):
    """SVG (sharp at a phone's width) and a 2x PNG (for the PDF), with fonts that read on a phone, set up before
    the chapter's first figure."""
    cells = [c for c in jupytext.read(path).cells if c.cell_type == "code"]
    drawing = [i for i, c in enumerate(cells) if DRAWS.search(c.source)]
    if not drawing:
        pytest.skip(f"{path.stem} draws no figure")
    setup = [i for i, c in enumerate(cells) if SETUP_CALL.search(c.source)]
    assert setup and setup[0] < drawing[0], (
        f"{path.stem}: call calib.plots.use_web_figures() in the setup cell, before the first figure (cell "
        f"{drawing[0]})")


def test_use_web_figures_writes_svg_and_a_2x_png_with_larger_fonts():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from IPython.core.interactiveshell import InteractiveShell
    from matplotlib.figure import Figure

    from calib.plots import WEB_FIGURE_DPI, use_web_figures

    shell = InteractiveShell.instance()
    formatters = shell.display_formatter.formatters
    with plt.rc_context():
        before = plt.rcParams["xtick.labelsize"]
        use_web_figures()
        assert before == "medium" and plt.rcParams["xtick.labelsize"] == 11.0          # 11 pt, from 10 pt
        assert min(plt.rcParams[k] for k in ("font.size", "legend.fontsize", "ytick.labelsize")) >= 10.0
        fig, ax = plt.subplots(figsize=(4, 3))
        ax.plot([0, 1], [0, 1])
        svg = formatters["image/svg+xml"](fig)
        png = formatters["image/png"](fig)
        plt.close(fig)
    assert Figure in formatters["image/svg+xml"].type_printers and svg.lstrip().startswith(("<?xml", "<svg"))
    width = int.from_bytes(png[16:20], "big") if isinstance(png, bytes) else None
    if width is None:                                       # base64 text in some IPython versions
        import base64
        raw = base64.b64decode(png)
        width = int.from_bytes(raw[16:20], "big")
    assert WEB_FIGURE_DPI == 200 and abs(width - 4 * WEB_FIGURE_DPI) <= 4 * WEB_FIGURE_DPI * 0.2   # bbox tight


MESHES = re.compile(r"\.(tripcolor|pcolormesh|pcolor|imshow|hexbin)\((?:[^()]|\([^()]*\))*\)", re.S)


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_dense_meshes_are_rasterized_inside_the_svg(path):
    """A mesh drawn as SVG is one path per cell (chapter 07's gouraud simplex: 70 MB); rasterized=True embeds it as
    one image inside the SVG, with the axes, labels and text still vector."""
    bare = [m.group(0)[:60] for m in MESHES.finditer(path.read_text(encoding="utf-8"))
            if "rasterized=True" not in m.group(0)]
    assert not bare, f"{path.stem}: pass rasterized=True to {bare}"
