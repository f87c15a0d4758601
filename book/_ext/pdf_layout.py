"""The PDF's layout (``make pdf``, :mod:`calib_book.pdf`): what Sphinx's LaTeX builder needs to print what the site
shows. Every transform here runs for the LaTeX builder only; the site's HTML is untouched.

- **Code the site folds away is not printed.** The site shows a cell tagged ``hide-input`` (or ``hide-cell``, and
  papermill's ``injected-parameters`` cell, which ``parameters-cell.js`` folds the same way) with its code folded
  under a "Show code cell source" button: the reader sees the outputs, its claim blocks and tables. A PDF cannot
  fold, so the code is left out; its outputs are printed. ``hide-output`` outputs are printed too, unfolded (the
  transcribed tables of chapter 11: the PDF is where a reader looks them up). ``remove-*`` tags are myst-nb's, for
  every builder.
- **Exercise references.** sphinx-exercise labels an exercise ``exercise:LABEL`` in LaTeX and rewrites only the
  references it finds by ``refid``; in the one document the LaTeX builder assembles, a reference to another chapter
  has a ``refuri`` instead, and Sphinx printed it as ``Exercise \\ref{chapter:LABEL}``, a label nobody defines
  ("Exercise ??"). Every reference to an exercise links ``exercise:LABEL`` here, with the site's text ("Exercise
  2.3", the number sphinx-exercise prints in the exercise's title).
- **Parts and chapters as on the site.** The introduction's sections were the PDF's chapters 1-4, so the PDF's
  chapter N was the site's chapter N-6 and the hand-written "chapter 10" of the text, and the numbers of the
  definitions and propositions (the site's), did not match it. The introduction becomes one unnumbered chapter,
  each caption of ``_toc.yml`` a ``\\part``, and only the parts the site numbers have numbered chapters.
- **Wide tables fit the page.** A table too wide for the text at its natural size is set smaller, with columns
  wide enough for their numbers (Sphinx's ``tabulary`` squeezed them until the numbers were cut, its ``longtable``
  ran long text off the page); text columns wrap; a table too wide even at scriptsize is split into two or
  three tables that repeat its leading text columns (the row's name), or else turned to a landscape page. A table
  of more rows than a page holds is a longtable, which breaks across pages, with columns as wide as laid out here.
- **Long equations fit the page.** A display equation wider than the text is broken before its top-level
  relations and binary operators (sympy's long right-hand sides), greedily, one part a line; a part still too
  wide is scaled to the text width. ``calibpdf.sty`` measures in TeX; this module only marks the break points.
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

from docutils import nodes
from sphinx import addnodes
from sphinx.transforms.post_transforms import SphinxPostTransform
from sphinx.util.texescape import escape as tex_escape

#: Tags of a code cell whose code the site shows folded (myst-nb's hide-input and hide-cell; papermill's cell of
#: the parameters a chapter ran with, folded by book/_static/parameters-cell.js).
FOLDED_CODE_TAGS = frozenset({"hide-input", "hide-cell", "injected-parameters"})
#: The title of the introduction's chapter in the PDF (the site's first page, whose title is the book's).
INTRODUCTION = "Introduction"
#: The LaTeX package of this layout, beside this module.
PACKAGE = "calibpdf"

# ---------------------------------------------------------------------------------------------------- code cells


class FoldedCodeLeftOut(SphinxPostTransform):
    """Drop the source of every code cell whose tags fold it on the site; a cell left empty goes too."""

    default_priority = 100
    formats = ("latex",)

    def run(self, **kwargs) -> None:
        for cell in list(self.document.findall(nodes.container)):
            if cell.get("nb_element") != "cell_code":
                continue
            if FOLDED_CODE_TAGS & set(cell.get("cell_metadata", {}).get("tags", ())):
                for child in list(cell.children):
                    if child.get("nb_element") == "cell_code_source":
                        cell.remove(child)
            if not cell.children:
                cell.parent.remove(cell)

# ------------------------------------------------------------------------------------------------------ exercises


class exercise_link(nodes.Inline, nodes.TextElement):
    """A link to an exercise in LaTeX: ``\\hyperref[exercise:LABEL]{text}``, the label sphinx-exercise writes."""


def visit_exercise_link(self, node: exercise_link) -> None:
    self.body.append(r"\hyperref[exercise:%s]{" % node["label"])


def depart_exercise_link(self, node: exercise_link) -> None:
    self.body.append("}")


def _target_label(ref: nodes.reference) -> str | None:
    """The label a resolved internal reference points to: its ``refid``, or the anchor of its ``%docname#label``."""
    if ref.get("refid"):
        return ref["refid"]
    uri = ref.get("refuri", "")
    return uri.partition("#")[2] or None if uri.startswith("%") else None


class ExerciseReferences(SphinxPostTransform):
    """Every resolved reference to an exercise (``{numref}``, ``{ref}``) links sphinx-exercise's LaTeX label."""

    default_priority = 21          # after Sphinx resolves the references (10), before sphinx-exercise's pass (22)
    formats = ("latex",)

    def run(self, **kwargs) -> None:
        registry = getattr(self.env, "sphinx_exercise_registry", {})
        for ref in list(self.document.findall(nodes.reference)):
            label = _target_label(ref)
            if label is None or label not in registry or type(registry[label].get("node")).__name__ not in (
                    "exercise_node", "exercise_enumerable_node"):
                continue
            text = ref.astext()
            lead = text[:len(text) - len(text.lstrip())]
            if lead:                  # "Solution to" + " Exercise 1": the space before the link, where TeX keeps it
                first = next(ref.findall(nodes.Text))
                first.parent.replace(first, nodes.Text(str(first).lstrip()))
            link = exercise_link("", "", *ref.children, label=label)
            ref.replace_self([nodes.Text(lead), link] if lead else link)

# ------------------------------------------------------------------------------------------- parts and chapters


def _raw(latex: str) -> nodes.raw:
    return nodes.raw("", "\n" + latex + "\n", format="latex")


class PartsAndChapters(SphinxPostTransform):
    """The introduction as an unnumbered chapter, a ``\\part`` a caption of ``_toc.yml``, chapters numbered in the
    parts the site numbers (``numbered: true``) and only there, in the one document the LaTeX builder assembles."""

    default_priority = 900
    formats = ("latex",)

    def run(self, **kwargs) -> None:
        sitemap = getattr(self.config, "external_site_map", None)
        top = next((child for child in self.document.children if isinstance(child, nodes.section)), None)
        if sitemap is None or top is None:
            return
        wrappers = [child for child in top.children
                    if isinstance(child, nodes.compound) and "toctree-wrapper" in child["classes"]]
        if not wrappers:
            return
        parts = list(sitemap.root.subtrees)
        # The introduction: the root page's text and sections, before its toctrees, as one unnumbered chapter.
        intro = nodes.section("", nodes.title("", INTRODUCTION), ids=["calib-pdf-introduction"])
        for child in list(top.children[1:]):
            if child in wrappers:
                break
            top.remove(child)
            intro.append(child)
        top.insert(1, intro)
        top.insert(1, _raw(r"\calibunnumbered"))
        for wrapper in wrappers:
            docnames = [sof["docname"] for sof in wrapper.findall(addnodes.start_of_file)]
            part = next((p for p in parts if docnames and docnames[0] in p.files()), None)
            if part is None:
                continue
            caption = tex_escape(part.caption or "", latex_engine=self.config.latex_engine)
            numbering = r"\calibnumbered" if part.numbered else r"\calibunnumbered"
            wrapper.parent.insert(wrapper.parent.index(wrapper), _raw(rf"\calibpart{{{caption}}}{numbering}"))

# --------------------------------------------------------------------------------------------------------- tables

#: The body font of the PDF (Sphinx's default, 10pt) and the sizes a table may be set in, with their point sizes.
BODY_PT = 10.0
SIZES = (("normalsize", 10.0), ("small", 9.0), ("footnotesize", 8.0), ("scriptsize", 7.0))
#: The text block of Sphinx's default letter paper with 1in margins, in points: its width, and its height (the
#: width of a landscape page), less the running head and foot.
TEXT_WIDTH_PT, LANDSCAPE_WIDTH_PT = 469.0, 620.0
#: The space between columns of a table set smaller here (each side of a column).
TABCOLSEP_PT = 3.0
#: A cell longer than this (in characters) is text, which may wrap; a shorter one is a value, kept on one line.
TEXT_CELL = 28
#: A table with more rows than this may not fit a page: it is a longtable, which breaks across pages (Sphinx makes
#: one of a table over 30 rows only, and a shorter table of wrapped text ran off the foot of the page).
PAGE_ROWS = 15
#: The narrowest a wrapping column gets, in ems, and the longest word it is made wide enough for.
MIN_TEXT_EM, LONG_WORD_EM = 9.0, 14.0


def char_em(char: str) -> float:
    """An upper estimate of a character's width in ems in the PDF's serif font (FreeSerif, as Sphinx's XeLaTeX
    sets it), generous so that a column is never narrower than its numbers."""
    if char == " ":
        return 0.25
    if char.isdigit():
        return 0.5
    if char in ".,:;'!|()[]{}":
        return 0.33
    if char.isupper():
        return 0.72
    if char.islower():
        return 0.5
    if unicodedata.category(char).startswith(("M", "C")):
        return 0.0
    return 0.62


def text_em(text: str) -> float:
    return sum(char_em(c) for c in text)


def _cell_text(entry: nodes.Element) -> str:
    """The text of a table cell as printed, roughly: math as the pieces a line may break between
    (:func:`math_words`), raw HTML (an anchor, a link of the site) not at all."""
    parts = []
    for node in entry.findall(lambda n: isinstance(n, (nodes.Text, nodes.math))):
        if isinstance(node, nodes.math):
            parts.extend(math_words(node.astext()))
        elif not any(isinstance(a, (nodes.math, nodes.raw)) for a in _ancestors(node)):
            parts.append(node.astext())
    return " ".join(" ".join(parts).split())


def comma_pieces(math: str) -> list[str]:
    """``math`` cut after each comma outside braces and ``\\left ... \\right``: pieces that are math of their own,
    so that a line may break between them (``$\\{-0.5, -0.25, ..., 5\\}$`` in a table's narrow column)."""
    pieces, current, depth = [], "", 0
    for tok in _TOKEN.findall(math):
        depth += (tok in ("{", r"\left")) - (tok in ("}", r"\right"))
        current += tok
        if tok == "," and depth == 0:
            pieces.append(current)
            current = ""
    return [p for p in pieces + [current] if p.strip()]


def math_words(math: str) -> list[str]:
    """Inline math as the pieces TeX may break a line between (after a relation or a binary operator, and after a
    comma once :func:`breakable_math` has cut it), each as plain text with the commands dropped, for measuring."""
    return [re.sub(r"\\[a-zA-Z]+|\\.|[{}_^$\s]", "", p) for piece in break_points(math) for p in comma_pieces(piece)]


def breakable_math(math: nodes.math) -> None:
    """Cut inline math at its top-level commas (:func:`comma_pieces`), with a thin space and a break allowed after
    each, as the comma's own spacing is in math."""
    pieces = comma_pieces(math.astext())
    if len(pieces) > 1 and isinstance(math.parent, nodes.TextElement):
        new = []
        for piece in pieces:
            new += [nodes.math(piece, piece), nodes.raw("", r"\,\allowbreak{}", format="latex")]
        math.replace_self(new[:-1])


#: A cell that holds a number: digits, signs, a spread or an interval, a percent sign ("95.1 ± 0.2", "[-1.2, 0.4]").
_NUMBER = re.compile(r"[\d\s.,±%()\[\]+\-–−/×eE*]*\d[\d\s.,±%()\[\]+\-–−/×eE*]*")


class Column:
    """What a table's column needs: the width of its widest value, of its longest text and header words."""

    def __init__(self, header: list[str], body: list[str]):
        self.wraps = any(len(c) > TEXT_CELL for c in body)
        words = [w for cell in header + body for w in cell.split()] or [""]
        # headers are bold: a tenth wider; in a wrapping column a long word (a name in code) may stick out a little
        self.word_em = min(max(text_em(w) for w in words) * 1.1, LONG_WORD_EM if self.wraps else 1e9) + 0.3
        values = [c for c in body if len(c) <= TEXT_CELL]
        self.value_em = max((text_em(c) for c in values), default=0.0) + 0.3
        self.text_em = max((text_em(c) for c in body), default=0.0) + 0.3
        self.numeric = sum(bool(_NUMBER.fullmatch(c)) for c in body if c) > len(body) / 2 if body else False

    def least_em(self) -> float:
        """The narrowest the column may be: its values on one line, its words unbroken, text columns at least
        :data:`MIN_TEXT_EM` (or their whole text)."""
        least = max(self.word_em, self.value_em)
        return max(least, min(MIN_TEXT_EM, self.text_em)) if self.wraps else least

    def natural_em(self) -> float:
        return max(self.least_em(), self.text_em)


def _rows(table: nodes.table) -> tuple[list[list[str]], list[list[str]], int]:
    """The table's header rows and body rows as text, and its number of columns (no spans: None when any)."""
    group = next(table.findall(nodes.tgroup))
    ncols = int(group["cols"])
    head, body = [], []
    for part, rows in ((nodes.thead, head), (nodes.tbody, body)):
        for section in group.findall(part):
            for row in section.findall(nodes.row):
                cells = [_cell_text(e) for e in row.findall(nodes.entry)]
                if len(cells) != ncols or any(e.get("morecols") or e.get("morerows") for e in row.findall(
                        nodes.entry)):
                    return [], [], 0
                rows.append(cells)
    return head, body, ncols


def layout(columns: list[Column], width_pt: float, smallest: str = "scriptsize", largest: str = "normalsize"
           ) -> tuple[str, float, list[float]] | None:
    """The largest size of :data:`SIZES` from ``largest`` down to ``smallest`` at which the columns fit
    ``width_pt``, with each column's width in ems, or None. A text column gets what the others leave, in proportion
    to its text."""
    sizes = [name for name, _ in SIZES]
    for name, pt in SIZES[sizes.index(largest):sizes.index(smallest) + 1]:
        room_em = (width_pt - 2 * TABCOLSEP_PT * len(columns)) / pt
        least = [c.least_em() for c in columns]
        if sum(least) > room_em:
            continue
        spare = room_em - sum(least)
        want = [c.natural_em() - lo if c.wraps else 0.0 for c, lo in zip(columns, least)]
        share = min(1.0, spare / sum(want)) if sum(want) else 0.0
        return name, pt, [lo + w * share for lo, w in zip(least, want)]
    return None


def colspec(columns: list[Column], widths: list[float]) -> str:
    """Columns as wide as given, in ems of the table's size: text flush left, numbers flush right."""
    specs = []
    for column, em in zip(columns, widths):
        align = r"\raggedleft" if column.numeric and not column.wraps else r"\raggedright"
        specs.append(rf">{{{align}\arraybackslash}}p{{{em:.2f}em}}")
    return "".join(specs)


def natural_pt(columns: list[Column]) -> float:
    """The table's width at the body size with every cell on one line and Sphinx's column space (6pt a side)."""
    return sum(max(c.word_em, c.text_em) for c in columns) * BODY_PT + 12.0 * len(columns)


def _key_columns(columns: list[Column]) -> int:
    """How many leading columns name a row (text, not numbers): the columns a split table repeats."""
    keys = 0
    for column in columns:
        if column.numeric:
            break
        keys += 1
    return max(1, min(keys, len(columns) - 1))


def _subtable(table: nodes.table, keep: list[int]) -> nodes.table:
    """A copy of ``table`` with only the columns ``keep``."""
    copy = table.deepcopy()
    group = next(copy.findall(nodes.tgroup))
    specs = [c for c in group.children if isinstance(c, nodes.colspec)]
    for i, spec in enumerate(specs):
        if i not in keep:
            group.remove(spec)
    group["cols"] = len(keep)
    for row in list(copy.findall(nodes.row)):
        for i, entry in enumerate([e for e in row.children if isinstance(e, nodes.entry)]):
            if i not in keep:
                row.remove(entry)
    return copy


def split_layouts(columns: list[Column], smallest: str = "scriptsize", most: int | None = None
                  ) -> list[tuple[list[int], tuple[str, float, list[float]]]] | None:
    """Column groups, each with the leading key columns, that fit the portrait page at ``smallest`` or larger: as
    few groups as possible (at most ``most``), of as even a count of columns as possible; None when none do."""
    keys = _key_columns(columns)
    rest = list(range(keys, len(columns)))
    for groups in range(2, min(len(rest), most or len(rest)) + 1):
        size = -(-len(rest) // groups)
        chunks = [rest[i:i + size] for i in range(0, len(rest), size)]
        fits = [layout([columns[i] for i in list(range(keys)) + chunk], TEXT_WIDTH_PT, smallest) for chunk in chunks]
        if all(fits):           # the tables of one split in one size, the smallest one of them needs
            size = min(fits, key=lambda fit: fit[1])[0]
            return [(list(range(keys)) + chunk, layout([columns[i] for i in list(range(keys)) + chunk],
                                                       TEXT_WIDTH_PT, size, largest=size)) for chunk in chunks]
    return None


def plan(columns: list[Column]) -> tuple[str, list[tuple[list[int], tuple[str, float, list[float]]]]] | None:
    """How a table too wide for the page is set: ``("portrait" | "landscape" | "split", [(columns, fit), ...])``.
    In order of preference: upright, at the largest size that fits down to scriptsize (one table reads best); split
    in two or three tables at footnotesize or larger; turned to a landscape page; split in more tables. None when
    nothing fits."""
    everything = list(range(len(columns)))
    for how, width, smallest in (("portrait", TEXT_WIDTH_PT, "scriptsize"), ("split", None, "footnotesize"),
                                 ("landscape", LANDSCAPE_WIDTH_PT, "scriptsize"), ("split", None, "scriptsize")):
        if how == "split":
            groups = split_layouts(columns, smallest, most=3 if smallest == "footnotesize" else None)
            if groups:
                return how, groups
            continue
        fit = layout(columns, width, smallest)
        if fit is not None:
            return how, [(everything, fit)]
    return None


class WideTables(SphinxPostTransform):
    """Set each table too wide for the page so that it fits (see the module's docstring)."""

    default_priority = 910
    formats = ("latex",)

    def run(self, **kwargs) -> None:
        for table in list(self.document.findall(nodes.table)):
            if any(isinstance(p, nodes.table) for p in _ancestors(table)) or table.parent is None:
                continue
            head, body, ncols = _rows(table)
            if not ncols:
                continue
            long = len(head) + len(body) > 30                 # Sphinx's longtable, its columns `l` (one line)
            if len(body) > PAGE_ROWS and not any(isinstance(a, nodes.Admonition) for a in _ancestors(table)):
                table["classes"].append("longtable")          # Sphinx's tabulary cannot break across pages
                long = True
            columns = [Column([r[i] for r in head], [r[i] for r in body]) for i in range(ncols)]
            if natural_pt(columns) <= TEXT_WIDTH_PT and not long:
                continue
            for math in list(table.findall(nodes.math)):
                breakable_math(math)
            chosen = plan(columns)
            if chosen is None:
                continue                     # nothing fits: left as Sphinx sets it (the log reports it)
            how, groups = chosen
            parent, index = table.parent, table.parent.index(table)
            parent.remove(table)
            for n, (keep, fit) in enumerate(groups):
                part = table if how != "split" else _subtable(table, keep)
                if n:
                    part["ids"] = []
                parent.insert(index, part)
                self.set(part, [columns[i] for i in keep], fit, landscape=how == "landscape")
                index = parent.index(part) + 2

    @staticmethod
    def set(table: nodes.table, columns: list[Column], fit: tuple[str, float, list[float]],
            landscape: bool = False) -> None:
        size, _, widths = fit
        parent, index = table.parent, table.parent.index(table)
        before = (r"\begin{landscape}" if landscape else "") + (
            rf"\begingroup\{size}\setlength{{\tabcolsep}}{{{TABCOLSEP_PT:g}pt}}")
        parent.insert(index, _raw(before))
        parent.insert(index + 1, addnodes.tabular_col_spec(spec=colspec(columns, widths)))
        parent.insert(index + 3, _raw(r"\endgroup" + (r"\end{landscape}" if landscape else "")))


def _ancestors(node: nodes.Node):
    node = node.parent
    while node is not None:
        yield node
        node = node.parent

# ------------------------------------------------------------------------------------------------------ equations

_RELATIONS = ("=", "<", ">", r"\le", r"\ge", r"\leq", r"\geq", r"\approx", r"\neq", r"\ne", r"\equiv", r"\sim",
              r"\in", r"\notin", r"\propto", r"\to", r"\mapsto", r"\subset", r"\subseteq")
_OPEN, _CLOSE = ("(", "[", r"\{", r"\langle", r"\lvert", r"\lVert"), (")", "]", r"\}", r"\rangle", r"\rvert",
                                                                         r"\rVert")
_TOKEN = re.compile(r"\\[a-zA-Z]+|\\.|.", re.S)


def break_points(math: str) -> list[str]:
    """``math`` cut before each relation and each binary ``+`` or ``-`` outside every group, brace, ``\\left ...
    \\right`` and bracket pair: the pieces of a display that may start a new line. A piece after the first starts
    with ``{}``, so that its operator keeps the spacing of a binary one."""
    tokens = _TOKEN.findall(math)
    pieces, current, depth, previous = [], [], 0, ""
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if tok in ("{",):
            depth += 1
        elif tok in ("}",):
            depth -= 1
        elif tok == r"\left" or tok in _OPEN:
            depth += 1
        elif tok == r"\right" or tok in _CLOSE:
            depth -= 1
        if tok in (r"\left", r"\right") and i + 1 < len(tokens):       # the delimiter belongs to \left, \right
            current.append(tok)
            i += 1
            tok = tokens[i]
        elif depth == 0 and current and (tok in _RELATIONS or (tok in "+-" and previous not in (
                "", "=", "+", "-", "(", "[", "{", ",", "^", "_", "&") and previous not in _RELATIONS)):
            pieces.append("".join(current))
            current = ["{}"]
        current.append(tok)
        if not tok.isspace():
            previous = tok
        i += 1
    pieces.append("".join(current))
    return [p for p in pieces if p.strip() and p.strip() != "{}"]


class LongEquations(SphinxPostTransform):
    """Each one-line display equation (no label, no ``\\\\``, no ``&``) is written as ``\\calibdisplay``, which
    typesets it as it is when it fits and breaks it at :func:`break_points` when it does not."""

    default_priority = 920
    formats = ("latex",)

    def run(self, **kwargs) -> None:
        for block in list(self.document.findall(nodes.math_block)):
            text = block.astext().strip()
            if (block.get("label") or block.get("nowrap") or block.get("number") or not text
                    or any(s in text for s in ("\\\\", "&", r"\begin", "\n\n", r"\label", r"\tag"))):
                continue
            text = re.sub(r"^\\displaystyle\s*", "", text)
            pieces = "".join(rf"\calibpiece{{{p}}}" for p in break_points(text))
            ids = "".join(rf"\phantomsection\label{{{i}}}" for i in block.get("ids", ()))   # none in the book
            block.replace_self(_raw(ids + rf"\calibdisplay{{{text}}}{{{pieces}}}"))

# ---------------------------------------------------------------------------------------------------------- setup


def _add_package(app) -> None:
    if app.builder.format != "latex":
        return
    from sphinx.util.fileutil import copy_asset_file

    copy_asset_file(str(Path(__file__).with_name(PACKAGE + ".sty")), app.builder.outdir)
    app.add_latex_package(PACKAGE)


def setup(app):
    app.add_node(exercise_link, latex=(visit_exercise_link, depart_exercise_link))
    for transform in (FoldedCodeLeftOut, ExerciseReferences, PartsAndChapters, WideTables, LongEquations):
        app.add_post_transform(transform)
    app.connect("builder-inited", _add_package)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
