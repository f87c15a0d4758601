"""The student edition of the book: the exercises' solutions removed, a cell to work in after each exercise."""

from __future__ import annotations

import re

__all__ = ["strip_solutions", "add_starter_cells"]

_SOLUTION_BLOCK = re.compile(r"^(?P<fence>`{3,}|:{3,})\{solution\}.*?^(?P=fence)[ \t]*$\n?", re.M | re.S)
_SOLUTION_START = re.compile(r"^(`{3,}|:{3,})\{solution-start\}", re.M)
_SOLUTION_END = re.compile(r"^(`{3,}|:{3,})\{solution-end\}[^\n]*\n\1[ \t]*$\n?", re.M)


def strip_solutions(nb):
    """The notebook without its exercises' solutions: every ``{solution}`` block, and everything from a
    ``{solution-start}`` to its ``{solution-end}`` (Markdown and code cells alike), removed in place; returns it."""
    cells, inside = [], False
    for cell in nb.cells:
        if cell.cell_type != "markdown":
            if not inside:
                cells.append(cell)
            continue
        kept, text = [], cell.source
        while text:
            if inside:
                end = _SOLUTION_END.search(text)
                if end is None:
                    text = ""
                    break
                inside, text = False, text[end.end():]
            else:
                start = _SOLUTION_START.search(text)
                if start is None:
                    kept.append(text)
                    break
                kept.append(text[:start.start()])
                inside, text = True, text[start.start():]
                first_line_end = text.find("\n")
                text = "" if first_line_end < 0 else text[first_line_end + 1:]
        source = _SOLUTION_BLOCK.sub("", "".join(kept)).strip("\n")
        if source.strip():
            cell.source = source
            cells.append(cell)
    if inside:
        raise ValueError("a {solution-start} has no {solution-end} after it; close every solution before building "
                         "the student book.")
    nb.cells = cells
    return nb


_EXERCISE_LABEL = re.compile(r"^(?:`{3,}|:{3,})\{exercise\}[^\n]*\n(?::[^\n]*\n)*?:label:\s*(\S+)", re.M)


def add_starter_cells(nb, answer_lines=None):
    """After each exercise, a code cell for the student's work (tagged ``student-work``), in place; returns it.

    The cell is ``# Exercise <label>: your work here`` followed by ``answer_lines(label)``. The default is the
    book's self-check call (``check("ex-...", part=..., ...)``, the parts from ``calib_book.answers``); the course
    edition (:func:`calib_book.course.student_notebook`) passes its answer dictionary and ``grader.check`` instead,
    so that both editions put the same cells in the same places.
    """
    import nbformat

    if answer_lines is None:
        from calib_book import exercises

        known = set(exercises.labels())

        def answer_lines(label):
            if label not in known:
                return []
            parts = ", ".join(f"{part}=..." for part in exercises.parts_of(label))
            return ["", "from calib_book.exercises import check", "", f"check({label!r}, {parts})"]

    cells = []
    for cell in nb.cells:
        cells.append(cell)
        if cell.cell_type != "markdown":
            continue
        for label in _EXERCISE_LABEL.findall(cell.source):
            lines = [f"# Exercise {label}: your work here", *answer_lines(label)]
            cells.append(nbformat.v4.new_code_cell("\n".join(lines), metadata={"tags": ["student-work"]}))
    nb.cells = cells
    return nb
