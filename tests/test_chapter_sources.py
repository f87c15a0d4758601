"""The chapters' sources keep plumbing out of the reader's way: claim calls, plotting, imports and glue sit in
collapsed cells (``hide-input``), so the code a reader sees is the code that teaches."""

import ast
import re

import jupytext
import pytest

from calib_book import runner

ROOT = runner.repo_root(__file__)
HIDDEN = {"hide-input", "remove-input", "remove-cell", "parameters"}
PLOTTING = re.compile(r"\bplt\.|\.subplots\(|\bax\.|\bfig\.")


def plumbing(source: str) -> str | None:
    """Why a cell's code is plumbing (a reason), or None when it may stay visible."""
    try:
        statements = ast.parse(source).body
    except SyntaxError:
        return None
    if not statements:
        return None
    if "claim(" in source:
        return "calls claim()"
    if PLOTTING.search(source):
        return "plots"
    if all(isinstance(s, (ast.Import, ast.ImportFrom)) for s in statements):
        return "only imports"
    if all(isinstance(s, ast.Expr) and isinstance(s.value, ast.Call) and getattr(s.value.func, "id", "") in
           ("gl", "glue", "glue_number") for s in statements):
        return "only glues"
    return None


def test_the_rule_tells_plumbing_from_teaching():
    assert plumbing('claim("p/x", "s", passed=True)') == "calls claim()"
    assert plumbing("fig, ax = plt.subplots()\nax.plot([1], [2])") == "plots"
    assert plumbing("import numpy as np\nfrom calib import metrics") == "only imports"
    assert plumbing('gl("n", 3)\ngl("m", 4)') == "only glues"
    assert plumbing("x = metrics.ece(p, y)\nprint(x)") is None


@pytest.mark.parametrize("name", runner.chapters_in_toc(ROOT))
def test_plumbing_cells_are_collapsed(name):
    notebook = jupytext.read(ROOT / "chapters" / f"{name}.md")
    exposed = []
    for index, cell in enumerate(notebook.cells):
        if cell.cell_type != "code" or HIDDEN & set(cell.metadata.get("tags", [])):
            continue
        reason = plumbing(cell.source)
        if reason:
            exposed.append(f"cell {index} {reason}: {cell.source.splitlines()[0][:70]!r}")
    assert not exposed, (f"{name}: tag these cells hide-input (or split the teaching code off into its own "
                         f"cell):\n" + "\n".join(exposed))


def _is_prose(cell) -> bool:
    """A Markdown cell with more than headings and labels: text a reader reads."""
    return cell.cell_type == "markdown" and any(
        line.strip() and not line.lstrip().startswith(("#", "(")) for line in cell.source.splitlines())


def opening_order(notebook) -> str | None:
    """Why the chapter's parameters cell is out of place (a reason), or None when it follows the opening prose,
    is collapsed (``hide-input``) and has the one-line "rerun with other parameters" note above it."""
    index = next((i for i, c in enumerate(notebook.cells) if "parameters" in c.metadata.get("tags", [])), None)
    if index is None:
        return "has no cell tagged parameters"
    cell, before = notebook.cells[index], notebook.cells[:index]
    if not any(_is_prose(c) for c in before):
        return "opens with its parameters cell before any prose"
    if any(c.cell_type == "code" for c in before):
        return "runs code before its parameters cell (papermill's values would come too late)"
    if "hide-input" not in cell.metadata.get("tags", []):
        return "shows its parameters cell: tag it [parameters, hide-input]"
    if "*Rerun with other parameters:* `calib book run --only" not in before[-1].source:
        return "lacks the note 'Rerun with other parameters: `calib book run --only NN-slug -p seed 3`' above it"
    return None


def test_the_opening_rule_fails_on_a_parameters_cell_first():
    import nbformat

    params = nbformat.v4.new_code_cell("seed = 0", metadata={"tags": ["parameters", "hide-input"]})
    title = nbformat.v4.new_markdown_cell("# A chapter")
    prose = nbformat.v4.new_markdown_cell("# A chapter\n\nWhat it does.\n\n*Rerun with other parameters:* "
                                          "`calib book run --only 01-x -p seed 3`")
    assert opening_order(nbformat.v4.new_notebook(cells=[title, params, prose])) == (
        "opens with its parameters cell before any prose")
    assert opening_order(nbformat.v4.new_notebook(cells=[prose, params])) is None
    shown = nbformat.v4.new_code_cell("seed = 0", metadata={"tags": ["parameters"]})
    assert "hide-input" in opening_order(nbformat.v4.new_notebook(cells=[prose, shown]))


@pytest.mark.parametrize("name", runner.chapters_in_toc(ROOT))
def test_every_chapter_opens_with_prose_then_its_collapsed_parameters(name):
    reason = opening_order(jupytext.read(ROOT / "chapters" / f"{name}.md"))
    assert reason is None, f"{name} {reason}"
