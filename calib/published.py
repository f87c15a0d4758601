"""The papers' result tables as data: ``book/data/published/<paper>.csv`` (one row per printed number, exactly
as printed) and ``<paper>.tables.csv`` (each table's printed shape), read, checked and put in the long format of
chapter 10's results (:func:`published_rows`), so that a paper's table and a rerun compare with one function.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["PUBLISHED_COLUMNS", "PUBLISHED_TABLE_COLUMNS", "STAGE_MAPS", "published_dir", "read_published",
           "read_published_tables", "published_rows"]

#: Columns of ``book/data/published/<paper>.csv``: one row per printed number (DESIGN.md, "Data and stored
#: results"). ``value``, ``temperature`` and ``std`` are the printed text; ``bold`` and ``unreadable`` are
#: ``true``/``false``; an unreadable cell (garbled in the paper's text) has an empty value and a note.
PUBLISHED_COLUMNS = ("paper", "table", "dataset", "model", "method", "metric", "stage", "value", "temperature",
                     "std", "bold", "unreadable", "note")
#: Columns of ``<paper>.tables.csv``: one row per table with its printed shape.
PUBLISHED_TABLE_COLUMNS = ("paper", "table", "caption", "section", "n_rows", "n_cols", "n_cells", "garbled",
                           "comment")
#: The printed stage labels and the post-hoc map of :data:`POSTHOC_MAPS` (or other label) each stands for.
STAGE_MAPS = {"pre-T": "none", "post-T": "ts", "": "none", "original": "none", "TS": "ts", "FTS": "fts",
              "TS-SB-ECE": "ts-sb-ece", "Dirichlet": "dirichlet", "MetaMis": "meta-mis", "MetaAcc": "meta-acc"}


def published_dir(root=None) -> Path:
    """``book/data/published`` of the repository ``root`` (default: the checkout this calib is imported from)."""
    root = Path(__file__).resolve().parent.parent if root is None else Path(root)
    return root / "book" / "data" / "published"


def _read_csv(path: Path, columns: tuple) -> list:
    import csv

    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist.")
    with path.open(newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        if tuple(reader.fieldnames or ()) != columns:
            raise ValueError(f"{path}: columns {reader.fieldnames} are not {list(columns)}.")
        return list(reader)


def _flag(text: str, path: Path, column: str) -> bool:
    if text not in ("true", "false"):
        raise ValueError(f"{path}: column {column!r} holds {text!r}; write true or false.")
    return text == "true"


def _number(text: str):
    return float(text) if text.strip() else None


def read_published(paper: str, root=None) -> list:
    """The printed numbers of ``paper``'s result tables (``book/data/published/<paper>.csv``), one dict per
    number with the printed text kept (``value_text``) and parsed (``value``, ``temperature``, ``std``: floats
    or None; ``bold``, ``unreadable``: bools). Raises ValueError, naming the file and row, for a malformed file."""
    path = published_dir(root) / f"{paper}.csv"
    rows = []
    for i, raw in enumerate(_read_csv(path, PUBLISHED_COLUMNS), start=2):
        try:
            row = dict(raw, value_text=raw["value"], bold=_flag(raw["bold"], path, "bold"),
                       unreadable=_flag(raw["unreadable"], path, "unreadable"))
            row["value"] = _number(raw["value"])
            row["temperature"], row["std"] = _number(raw["temperature"]), _number(raw["std"])
        except ValueError as exc:
            raise ValueError(f"{path}, line {i}: {exc}") from None
        if row["paper"] != paper:
            raise ValueError(f"{path}, line {i}: paper {row['paper']!r} in the file of {paper!r}.")
        if (row["value"] is None) != row["unreadable"]:
            raise ValueError(f"{path}, line {i}: a readable cell needs a value and an unreadable one none.")
        rows.append(row)
    return rows


def read_published_tables(paper: str, root=None) -> list:
    """The tables of ``paper`` with their printed shapes (``<paper>.tables.csv``); counts are ints."""
    path = published_dir(root) / f"{paper}.tables.csv"
    out = []
    for raw in _read_csv(path, PUBLISHED_TABLE_COLUMNS):
        out.append(dict(raw, n_rows=int(raw["n_rows"]), n_cols=int(raw["n_cols"]), n_cells=int(raw["n_cells"]),
                        garbled=_flag(raw["garbled"], path, "garbled")))
    return out


def published_rows(paper: str, root=None) -> list:
    """``paper``'s readable printed numbers in the long format of :func:`evaluate_run` (``model``, ``loss``,
    ``seed``, ``map``, ``metric``, ``value``, ``temperature``), with ``source``, ``paper``, ``table`` and
    ``dataset`` added. ``loss`` and ``metric`` are the printed labels and ``map`` the post-hoc map the printed
    stage stands for (:data:`STAGE_MAPS`); ``seed`` is None (the papers print means)."""
    return [{"source": "published", "paper": paper, "table": r["table"], "dataset": r["dataset"], "model": r["model"],
             "loss": r["method"], "seed": None, "map": STAGE_MAPS.get(r["stage"], r["stage"]), "metric": r["metric"],
             "value": r["value"], "temperature": r["temperature"], "std": r["std"], "gamma": None}
            for r in read_published(paper, root) if not r["unreadable"]]
