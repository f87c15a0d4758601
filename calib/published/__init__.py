"""The papers' result tables: as data, and compared with the book's runs (a package of two modules).

- :mod:`calib.published.tables` reads the tables transcribed from the papers, ``book/data/published/<paper>.csv``
  (one row per printed number, exactly as printed) and ``<paper>.tables.csv`` (each table's printed shape), checks
  them and puts them in the long format of chapter 10's results (:func:`~calib.published.tables.published_rows`);
  it says where the files live (:func:`~calib.published.tables.published_dir`: the checkout's folder, or the copy
  an installed wheel carries), reduces a printed label to what identifies it across tables
  (:func:`~calib.published.tables.label_key`) and gives Zhou et al. (2025)'s tables as arrays
  (:func:`~calib.published.tables.zhou2025_tables`, chapter 09).
- :mod:`calib.published.compare` is chapter 11's analysis of the printed numbers: a table in the paper's layout,
  the checks of a paper's tables against each other, a paper's summary sentence recounted over its own table, and
  the comparison with the book's runs (rank and direction agreement, the reproduction summary).

``compare`` imports from ``tables``, never the other way. Every public name of both is importable from here,
``from calib.published import read_published, recount``; the API reference documents each in its module.
"""

from calib.published.compare import (LOSS_ALIASES, REPRODUCTION_STATUS, Recount, agree_as_printed, canonical_loss,
                                     cell_text, coinciding_rows, grid_label, kendall_by_seed, majority_verdict,
                                     paired_cells, paper_layout, paper_losses, pre_post_pairs,
                                     printed_difference_interval, printed_row_values, printed_unit, recount,
                                     reproduction_rows, same_direction, select, setting_values, temperature_lookup)
from calib.published.tables import (PUBLISHED_COLUMNS, PUBLISHED_TABLE_COLUMNS, STAGE_MAPS, ZHOU2025_METHODS,
                                    ZHOU2025_NU, ZHOU2025_ROWS, label_key, published_dir, published_rows,
                                    read_published, read_published_tables, zhou2025_tables)

__all__ = [
    # calib.published.tables
    "PUBLISHED_COLUMNS", "PUBLISHED_TABLE_COLUMNS", "STAGE_MAPS", "published_dir", "read_published",
    "read_published_tables", "published_rows", "label_key", "ZHOU2025_ROWS", "ZHOU2025_METHODS", "ZHOU2025_NU",
    "zhou2025_tables",
    # calib.published.compare
    "printed_unit", "agree_as_printed", "printed_difference_interval", "cell_text", "select", "paper_layout",
    "paired_cells", "temperature_lookup", "pre_post_pairs", "printed_row_values", "coinciding_rows", "Recount",
    "recount", "kendall_by_seed", "same_direction", "REPRODUCTION_STATUS", "reproduction_rows", "LOSS_ALIASES",
    "canonical_loss", "setting_values", "grid_label", "paper_losses", "majority_verdict",
]
