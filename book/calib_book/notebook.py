"""Helpers the chapters share for presentation: glued numbers, Markdown tables, number and interval text, timing.

A chapter computes its results with the library and shows them with these helpers, so that every chapter
glues, tabulates and words its numbers the same way (and none keeps a private copy that drifts):

- :func:`glue_number` puts a computed number into the prose (``{glue:text}`name:.3f```);
- :func:`markdown_table` shows rows as a Markdown table, with the cells escaped for it;
- :func:`number_text`, :func:`per_seed_text` and :func:`seed_interval_text` turn numbers into the text of a table
  cell or of a claim's evidence; :func:`truncate_text` shortens a long cell at a word boundary;
- :func:`best_cpu_ms` and :func:`cpu_time_exponent` time a computation the way a chapter's cost claims need:
  CPU time of this process, best of several repeats, so that other load on the machine hardly moves it.

Part of the book's machinery (:mod:`calib_book`), beside :mod:`calib_book.runner` (the runner) and
:mod:`calib_book.pages` (the back-matter pages). It imports :mod:`calib.stats` only; ``myst_nb`` and ``IPython``
are imported when a helper needs them, so that it imports without the book's extras.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import numpy as np

from calib import stats

__all__ = ["glue_number", "markdown_table", "number_text", "per_seed_text", "seed_interval_text", "truncate_text",
           "best_cpu_ms", "cpu_time_exponent"]


def glue_number(name: str, value) -> None:
    """Glue a computed number for the prose, as a Python int or float.

    MyST-NB's ``{glue:text}`name:.3f``` formats the glued value with the format spec after the colon, which
    needs a Python number: a numpy scalar or a 0-d array would be glued as its ``repr``. Integers (Python or
    numpy) stay ``int``, so that ``{glue:text}`name:,``` prints thousands separators; anything else becomes
    ``float``. Nothing is displayed in the cell.

    Parameters
    ----------
    name : str
        The glue key the prose refers to.
    value : int, float, numpy scalar or 0-d array
        The number.
    """
    from myst_nb import glue

    glue(name, int(value) if isinstance(value, (int, np.integer)) else float(value), display=False)


def _table_cell(value) -> str:
    """``str(value)`` with its pipes escaped, so that a cell such as ``|x|`` stays one cell of the table."""
    return str(value).replace("|", "\\|")


def markdown_table(header: Sequence, rows: Sequence[Sequence]):
    """A Markdown table of ``rows`` under ``header``, as an IPython display object.

    Every cell is ``str``-ed and its ``|`` escaped as ``\\|`` (a pipe would otherwise split the cell). Other
    Markdown in a cell (emphasis, math, code) is kept, so cells can be formatted on purpose.

    Parameters
    ----------
    header : sequence
        The column titles.
    rows : sequence of sequences
        One sequence of cells per row, each as long as ``header``.

    Returns
    -------
    IPython.display.Markdown
        Its ``data`` is the table's Markdown source; ending a cell with it (or ``display``-ing it) renders the
        table in the notebook and, through MyST-NB, in the book.
    """
    from IPython.display import Markdown

    lines = ["| " + " | ".join(map(_table_cell, header)) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(map(_table_cell, row)) + " |" for row in rows]
    return Markdown("\n".join(lines))


def number_text(value, spec: str = ".6f", missing: str = "–") -> str:
    """The text of one table cell that holds a number, a number with its spread, text, or nothing.

    Parameters
    ----------
    value : None, str, number, or (number, number or None)
        ``None`` gives ``missing``; a string is returned as it is (a message in place of a number, such as the
        error another library raised); a number is formatted with ``spec``; a pair ``(estimate, spread)``
        gives ``"estimate ± spread"`` (a mean and standard deviation as a paper prints them), or the estimate
        alone when the spread is None.
    spec : str
        Format spec of the numbers, e.g. ``".6f"`` or ``"g"``.
    missing : str
        Text for a missing value.

    Examples
    --------
    >>> number_text(0.1234567), number_text(None, missing="not installed"), number_text((95.1, 0.2), "g")
    ('0.123457', 'not installed', '95.1 ± 0.2')
    """
    if value is None:
        return missing
    if isinstance(value, str):
        return value
    if isinstance(value, (tuple, list)):
        estimate, spread = value
        return format(estimate, spec) if spread is None else f"{estimate:{spec}} ± {spread:{spec}}"
    return format(value, spec)


def per_seed_text(values, spec: str = ".3f") -> str:
    """``"per seed v1, v2, ..."``: one value per seed, for a claim's evidence beside its interval over seeds.

    Parameters
    ----------
    values : iterable of numbers
        One value per seed, in seed order.
    spec : str
        Format spec of each value (``"+.3f"`` shows the sign of a change).

    Examples
    --------
    >>> per_seed_text([0.1, -0.25], "+.2f")
    'per seed +0.10, -0.25'
    """
    return "per seed " + ", ".join(format(v, spec) for v in values)


def seed_interval_text(values, digits: int = 3, scale: float = 1.0) -> str:
    """The mean over seeds and its 95% interval as brief text, ``"mean [low, high]"``.

    The interval is :func:`calib.stats.seed_interval` (Student t over seeds), the one every chapter's verdicts
    use; the text is :meth:`calib.stats.Interval.brief`.

    Parameters
    ----------
    values : sequence of float
        One value per seed (at least two).
    digits : int
        Decimals shown.
    scale : float
        Factor applied before formatting (100 shows a fraction in percent).
    """
    return stats.seed_interval(values).brief(digits, scale)


def truncate_text(text: str, width: int = 70) -> str:
    """``text`` cut to at most ``width`` characters at a word boundary, with ``" …"`` added when it was cut.

    For a table cell that quotes a long description; text that fits is returned unchanged.

    Examples
    --------
    >>> truncate_text("the expected calibration error of the model", 20)
    'the expected …'
    """
    return text if len(text) <= width else text[:width].rsplit(" ", 1)[0] + " …"


def best_cpu_ms(fn: Callable[[], object], repeats: int = 7) -> float:
    """The best CPU time of ``fn()`` over ``repeats`` calls, in milliseconds.

    CPU time of this process (``time.process_time``), so that other processes sharing the machine hardly
    change it, and the best of several calls, the usual estimate of a computation's cost (the other calls are
    slowed by caches and interruptions, not sped up).

    Parameters
    ----------
    fn : callable
        Called with no arguments; its result is discarded.
    repeats : int
        Number of calls, >= 1.
    """
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1; got {repeats}.")
    best = float("inf")
    for _ in range(repeats):
        start = time.process_time()
        fn()
        best = min(best, time.process_time() - start)
    return 1e3 * best


def cpu_time_exponent(sizes: Sequence[float], calls: Sequence[Callable[[], object]], repeats: int = 7) -> float:
    """The slope of log CPU time against log size: the empirical exponent ``a`` of a cost growing as size^a.

    ``calls[j]`` computes the problem of size ``sizes[j]``. Within each repeat the sizes are timed in turn, so
    that a change in the machine's load hits all of them alike, and each size keeps its best CPU time (as in
    :func:`best_cpu_ms`); the exponent is the least-squares slope of log time on log size.

    Parameters
    ----------
    sizes : sequence of float
        Problem sizes, at least two distinct values.
    calls : sequence of callables
        One call per size, each with no arguments.
    repeats : int
        Rounds of timing, >= 1.
    """
    if len(sizes) != len(calls) or len(set(sizes)) < 2:
        raise ValueError(f"give one call per size and at least two distinct sizes; got {len(sizes)} sizes and "
                         f"{len(calls)} calls.")
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1; got {repeats}.")
    best = np.full(len(sizes), np.inf)
    for _ in range(repeats):
        for j, fn in enumerate(calls):
            start = time.process_time()
            fn()
            best[j] = min(best[j], time.process_time() - start)
    return float(np.polyfit(np.log(sizes), np.log(best), 1)[0])
