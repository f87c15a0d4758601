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
