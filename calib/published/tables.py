"""The papers' result tables as data: ``book/data/published/<paper>.csv`` (one row per printed number, exactly
as printed) and ``<paper>.tables.csv`` (each table's printed shape), read, checked and put in the long format of
chapter 10's results (:func:`published_rows`), so that a paper's table and a rerun compare with one function; the
printed label that identifies a row or a column across tables and papers (:func:`label_key`); and Zhou et al.
(2025)'s tables as arrays (:func:`zhou2025_tables`, chapter 09).

The files have one copy, ``book/data/published`` of the repository; an installed calib reads the copy its wheel
carries as ``calib/published_tables`` (pyproject.toml). :func:`published_dir` says which folder is read.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["PUBLISHED_COLUMNS", "PUBLISHED_TABLE_COLUMNS", "STAGE_MAPS", "published_dir", "read_published",
           "read_published_tables", "published_rows", "label_key", "ZHOU2025_ROWS", "ZHOU2025_METHODS",
           "ZHOU2025_NU", "zhou2025_tables"]

#: Columns of ``book/data/published/<paper>.csv``, one row per printed number (ARCHITECTURE.md, "Stored
#: data"). ``value``, ``temperature`` and ``std`` are the printed text; ``bold`` and ``unreadable`` are
#: ``true``/``false``; an unreadable cell (garbled in the paper's text) has an empty value and a note.
PUBLISHED_COLUMNS = ("paper", "table", "dataset", "model", "method", "metric", "stage", "value", "temperature",
                     "std", "bold", "unreadable", "note")
#: Columns of ``<paper>.tables.csv``, one row per table with its printed shape.
PUBLISHED_TABLE_COLUMNS = ("paper", "table", "caption", "section", "n_rows", "n_cols", "n_cells", "garbled",
                           "comment")
#: The printed stage labels and the post-hoc map of :data:`calib.experiments.POSTHOC_MAPS` (or other label)
#: each stands for.
#:
#: :meta hide-value:
STAGE_MAPS = {"pre-T": "none", "post-T": "ts", "": "none", "original": "none", "TS": "ts", "FTS": "fts",
              "TS-SB-ECE": "ts-sb-ece", "Dirichlet": "dirichlet", "MetaMis": "meta-mis", "MetaAcc": "meta-acc"}


def published_dir(root=None) -> Path:
    """The folder of the papers' tables: ``book/data/published`` of the repository ``root``; by default the copy
    an installed calib carries (``calib/published_tables``, which the wheel maps from that folder:
    pyproject.toml), else that folder of the checkout this calib is imported from."""
    if root is not None:
        return Path(root) / "book" / "data" / "published"
    from importlib.resources import files

    installed = files("calib") / "published_tables"
    if isinstance(installed, Path) and installed.is_dir():
        return installed
    return Path(__file__).resolve().parents[2] / "book" / "data" / "published"    # calib/published/tables.py


def _read_csv(path: Path, columns: tuple) -> list:
    import csv

    if not path.is_file():
        papers = sorted(p.name.removesuffix(".tables.csv") for p in path.parent.glob("*.tables.csv"))
        raise FileNotFoundError(f"{path} does not exist; the papers with tables there: {papers or 'none'}.")
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
    """``paper``'s readable printed numbers in the long format of :func:`calib.experiments.evaluate_run` (``model``,
    ``loss``, ``seed``, ``map``, ``metric``, ``value``, ``temperature``), with ``source``, ``paper``, ``table`` and
    ``dataset`` added. ``loss`` and ``metric`` are the printed labels and ``map`` the post-hoc map the printed
    stage stands for (:data:`STAGE_MAPS`); ``seed`` is None (the papers print means)."""
    return [{"source": "published", "paper": paper, "table": r["table"], "dataset": r["dataset"], "model": r["model"],
             "loss": r["method"], "seed": None, "map": STAGE_MAPS.get(r["stage"], r["stage"]), "metric": r["metric"],
             "value": r["value"], "temperature": r["temperature"], "std": r["std"], "gamma": None}
            for r in read_published(paper, root) if not r["unreadable"]]


def label_key(text) -> str:
    """A printed label reduced to what identifies it across tables and papers: lower case, "(Ours)" dropped,
    only letters and digits kept. "Tiny-ImageNet", "Tiny Imagenet" and "TinyImageNet" give ``"tinyimagenet"``;
    "FLSD-53 (Ours)" and "FLSD-53" give ``"flsd53"``; "CIFAR10" and "CIFAR-10" give ``"cifar10"``."""
    import re

    text = re.sub(r"\(ours\)", "", str(text), flags=re.IGNORECASE)
    return re.sub(r"[^0-9a-z]", "", text.lower())


# Zhou et al. (2025)'s tables as arrays (chapter 09), read from book/data/published/zhou2025.csv.

#: The rows of Zhou et al. (2025)'s tables (dataset / model), in the printed order.
ZHOU2025_ROWS = ("CIFAR-10/ResNet50", "CIFAR-10/ResNet110", "CIFAR-10/WRN", "CIFAR-10/PreResNet56",
                 "CIFAR-100/ResNet50", "CIFAR-100/ResNet110", "CIFAR-100/WRN", "CIFAR-100/PreResNet56",
                 "Tiny-ImageNet/ViT-Small", "Tiny-ImageNet/Swin-Tiny")
#: The columns (methods), in the printed order; ``"AU"`` is the paper's AU_{P_{X_tau}} loss.
ZHOU2025_METHODS = ("XE", "FL-53", "Inv.FL", "Dual", "KDE-XE", "AURC", "AU")
#: nu of the AU loss for each row of :data:`ZHOU2025_ROWS` (App. E.2's text, not a table, so not in the CSV).
ZHOU2025_NU = (0.1, 0.1, 0.1, 0.1, 0.01, 0.01, 0.1, 0.01, 0.05, 0.1)

#: Each (10, 7) array of :func:`zhou2025_tables`: (table, metric, stage, the column of the CSV it takes).
_ZHOU2025_GRIDS = {
    "acc": ("Table 1", "Accuracy", "", "value"), "ece": ("Table 1", "ECE", "", "value"),
    "cwece": ("Table 2", "cwECE", "pre-T", "value"), "cwece_ts": ("Table 2", "cwECE", "post-T", "value"),
    "T": ("Table 2", "cwECE", "post-T", "temperature"),
    "ecea": ("App. Table 4", "ECEa", "pre-T", "value"), "ecea_acc": ("App. Table 4", "Accuracy", "pre-T", "value"),
    "ecea_ts": ("App. Table 4", "ECEa", "post-T", "value"),
    "ecea_ts_acc": ("App. Table 4", "Accuracy", "post-T", "value"),
    "ecea_T": ("App. Table 4", "ECEa", "post-T", "temperature"),
    "metamis": ("App. Table 4", "ECEa", "MetaMis", "value"),
    "metamis_acc": ("App. Table 4", "Accuracy", "MetaMis", "value"),
    "metaacc": ("App. Table 4", "ECEa", "MetaAcc", "value"),
    "metaacc_acc": ("App. Table 4", "Accuracy", "MetaAcc", "value"),
}
#: Each (10,) array: (table, method, metric).
_ZHOU2025_ROWS_OF = {"gamma_dual": ("App. Table 2", "Dual", "γ"), "gamma_ifl": ("App. Table 2", "Inv. FL", "γ"),
                     "kappa": ("App. Table 3", "AU_{P_{X_τ}}", "low confidence coverage")}


def zhou2025_tables(root=None) -> dict:
    """Zhou et al. (2025)'s result tables as read-only numpy arrays: rows :data:`ZHOU2025_ROWS`, columns
    :data:`ZHOU2025_METHODS`; calibration errors x 100 and accuracies in %, as printed.

    Keys (shape (10, 7)): Table 1 ``acc``, ``ece``; Table 2 ``cwece``, ``cwece_ts``, ``T`` (the temperatures);
    App. Table 4 ``ecea``, ``ecea_acc``, ``ecea_ts``, ``ecea_ts_acc``, ``ecea_T``, ``metamis``, ``metamis_acc``,
    ``metaacc``, ``metaacc_acc``. Keys (shape (10,)): App. Table 2 ``gamma_dual``, ``gamma_ifl``, App. Table 3
    ``kappa``, and App. E.2's ``nu`` (:data:`ZHOU2025_NU`). Read from ``book/data/published/zhou2025.csv``
    (:func:`read_published`); a cell missing or given twice there is a ValueError naming the file.
    """
    import numpy as np

    path = published_dir(root) / "zhou2025.csv"
    row_of = {label_key(r): i for i, r in enumerate(ZHOU2025_ROWS)}
    col_of = {label_key(m): j for j, m in enumerate(ZHOU2025_METHODS)} | {label_key("AU_{P_{X_τ}}"): 6}
    out: dict[str, np.ndarray] = {key: np.full((len(ZHOU2025_ROWS), len(ZHOU2025_METHODS)), np.nan)
                                  for key in _ZHOU2025_GRIDS}
    out |= {key: np.full(len(ZHOU2025_ROWS), np.nan) for key in _ZHOU2025_ROWS_OF}
    filled = set()
    for r in read_published("zhou2025", root):
        i = row_of[label_key(f"{r['dataset']}/{r['model']}")]
        where: list[tuple[str, tuple[int, ...], str]] = [(key, (i, col_of[label_key(r["method"])]), column)
                 for key, (table, metric, stage, column) in _ZHOU2025_GRIDS.items()
                 if (r["table"], r["metric"], r["stage"]) == (table, metric, stage)]
        where += [(key, (i,), "value") for key, spec in _ZHOU2025_ROWS_OF.items()
                  if (r["table"], r["method"], r["metric"]) == spec]
        for key, cell, column in where:
            if (key, cell) in filled:
                raise ValueError(f"{path}: {key} {ZHOU2025_ROWS[i]} is given twice; keep one row per printed cell.")
            filled.add((key, cell))
            out[key][cell] = r[column]
    for key, values in out.items():
        if np.isnan(values).any():
            raise ValueError(f"{path}: {key} lacks {int(np.isnan(values).sum())} cell(s); restore the file from git.")
    out["nu"] = np.array(ZHOU2025_NU)
    for values in out.values():
        values.flags.writeable = False
    return out
