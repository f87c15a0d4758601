"""The answer key of chapter 11 (The papers' tables). Chapter 11's exercises: the yardstick of a printed difference
and the chance of coinciding rows.
"""

from __future__ import annotations

from calib_book.answers.registry import Expected, choice, parameter, register


def _ch11_yardstick(part):
    """ch11-ex-yardstick: rows of Komisarenko & Kull's Table 1 (ECE) whose FTS gain over TS exceeds
    sqrt(s_TS^2 + s_FTS^2), or 2 s / sqrt(5) with s the larger printed standard deviation."""
    import numpy as np

    from calib.published import read_published, recount, select

    rows = select(read_published("komisarenko2024"), metric="ECE")
    cells = recount(rows, "FTS", ["TS"], field="stage", cell_by=("dataset", "method")).cells
    stds = {(r["dataset"], r["method"], r["stage"]): r["std"] for r in rows}
    if part == "independent":
        return int(sum(c["margin"] > np.hypot(stds[(*c["key"], "TS")], stds[(*c["key"], "FTS")]) for c in cells))
    return int(sum(c["margin"] > 2 * c["std"] / np.sqrt(5) for c in cells))


register("ch11-ex-yardstick", "11-paper-tables",
         independent=Expected(lambda: _ch11_yardstick("independent"), rtol=0, atol=0.5, close_digits=None,
                              hint="the spread of a difference of two independent means"),
         two_standard_errors=Expected(lambda: _ch11_yardstick("two_standard_errors"), rtol=0, atol=0.5,
                                      close_digits=None, hint="the standard error of a mean over five seeds"),
         fits=choice(lambda: "neither", ("independent", "two standard errors", "neither"),
                     hint="what the two maps share"))


def _rows_compared(min_cells: int = 5, complete: bool = False) -> dict[str, list[int]]:
    """Chapter 11's search for coinciding rows: the length (printed cells) of each row of each paper with at least
    ``min_cells`` readable cells (and no unreadable one, with ``complete``), as ``{paper: [lengths]}``."""
    from calib.published import printed_row_values, read_published

    row_by = {"mukhoti2020": ("table", "dataset", "model"), "komisarenko2024": ("table", "dataset", "stage"),
              "karandikar2021": ("table", "dataset"), "zhou2025": ("table", "dataset", "model", "stage")}
    out = {}
    for paper, by in row_by.items():
        lengths = [len(values) for values in printed_row_values(read_published(paper), by).values()
                   if sum(v is not None for v in values) >= min_cells and not (complete and None in values)]
        out[paper] = lengths
    return out


#: a cell agrees by chance with probability 1/50 in the book; a course draws another 1/N
CHANCE_DENOMINATOR = parameter("ch11-ex-coincidence", "denominator", 50, lambda rng: int(rng.choice([20, 25, 40, 100])),
                               shown=("probability 1/{} (two", "$(1/{0})^m \\le (1/{0})^5$", "times $(1/{})^5$",
                                      "(1 / {}) ** 5"), text=str)


def _chance_coincidence_bound(p_cell: float | None = None, min_cells: int = 5) -> float:
    """Row pairs compared by chapter 11's search for coinciding rows, times p_cell ** min_cells."""
    p_cell = 1 / CHANCE_DENOMINATOR() if p_cell is None else p_cell
    return sum(len(n) * (len(n) - 1) // 2 for n in _rows_compared(min_cells).values()) * p_cell ** min_cells


def _chance_coincidence_expectation(p_cell: float | None = None, min_cells: int = 5) -> float:
    """The expected number of chance coincidences itself: only rows of one length can agree cell for cell, a pair
    of length m with probability p_cell ** m (the tightest valid bound)."""
    import collections

    p_cell = 1 / CHANCE_DENOMINATOR() if p_cell is None else p_cell
    total = 0.0
    for lengths in _rows_compared(min_cells, complete=True).values():
        for m, n in collections.Counter(lengths).items():
            total += n * (n - 1) // 2 * p_cell ** m
    return total


register("ch11-ex-coincidence", "11-paper-tables",
         expected_coincidences=Expected(_chance_coincidence_bound, rtol=5e-3, atol=0, accept="any-of",
                                        alternatives=lambda: [_chance_coincidence_expectation()],
                                        accepts="either valid bound to 3 significant digits: the union bound over "
                                                "the pairs compared, or the tighter one that counts only the pairs "
                                                "that can agree cell for cell",
                                        hint="linearity of expectation over the pairs compared"))
