"""The papers' printed numbers compared, with each other and with the book's runs (chapter 11), on the rows that
:mod:`calib.published.tables` reads.

A printed table put back in the paper's layout (:func:`paper_layout`); the checks of a paper's tables against
each other: numbers printed twice (:func:`agree_as_printed`, :func:`paired_cells`), before and after temperature
scaling (:func:`pre_post_pairs`), rows printed twice (:func:`coinciding_rows`); a paper's summary sentence
recounted over its own table (:func:`recount`) and the interval of two printed means
(:func:`printed_difference_interval`); and the comparison with our runs: printed loss labels mapped to the
benchmark grid's (:func:`canonical_loss`, :func:`paper_losses`), rank and direction agreement
(:func:`kendall_by_seed`, :func:`same_direction`), the verdict of an "in most cases" statement
(:func:`majority_verdict`) and the reproduction summary (:func:`reproduction_rows`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from calib.published.tables import STAGE_MAPS, label_key
from calib.stats import SignTest

if TYPE_CHECKING:        # the functions import numpy where they use it, so that importing this module stays light
    import numpy as np

__all__ = ["printed_unit", "agree_as_printed", "printed_difference_interval", "cell_text", "select", "paper_layout",
           "paired_cells", "temperature_lookup", "pre_post_pairs", "printed_row_values", "coinciding_rows",
           "Recount", "recount", "kendall_by_seed", "same_direction", "REPRODUCTION_STATUS", "reproduction_rows",
           "LOSS_ALIASES", "canonical_loss", "setting_values", "grid_label", "paper_losses", "majority_verdict"]


def printed_unit(text: str) -> float:
    """One unit of the last printed digit of a number printed as ``text``: ``"4.39"`` -> 0.01, ``"4.5"`` ->
    0.1, ``"78"`` -> 1, ``"2."`` -> 1 (a number printed with a bare point, as Mukhoti et al.'s Table 5 prints
    "2.(1.1)", carries no decimal)."""
    text = str(text).strip()
    if not text:
        raise ValueError("printed_unit needs a printed number; got an empty string.")
    float(text)                                                   # raises ValueError on a non-number
    decimals = len(text.split(".", 1)[1]) if "." in text else 0
    return 10.0 ** (-decimals)


def agree_as_printed(a_text: str, b_text: str, transform=None) -> bool:
    """Whether two printed numbers can be the same quantity rounded: ``|a - b|`` is at most half a unit of the
    coarser one's last digit (``"4.39"`` and ``"4.4"`` agree; ``"4.39"`` and ``"4.5"`` do not). ``transform`` is
    applied to ``b`` first (e.g. ``lambda v: 100 - v`` to compare an error with a top-1 accuracy)."""
    a, b = float(a_text), float(b_text)
    if transform is not None:
        b = transform(b)
    half = max(printed_unit(a_text), printed_unit(b_text)) / 2
    return abs(a - b) <= half * (1 + 1e-9)


def printed_difference_interval(mean_a, sem_a, mean_b, sem_b, runs: int, level: float = 0.95):
    """The interval of ``mean_a - mean_b`` from two printed means and standard errors of the mean, each over
    ``runs`` independent runs (a table of "mean ± SEM over 10 runs", as Karandikar et al. 2021, Table 2): Welch's
    t-interval, ``se = sqrt(sem_a² + sem_b²)`` with the Welch-Satterthwaite degrees of freedom
    ``se⁴ / ((sem_a⁴ + sem_b⁴) / (runs - 1))``, as a :class:`calib.stats.Interval` (so that
    :func:`calib.stats.decide`, ``decide_any`` and ``decide_every`` read it).

    The runs' per-seed values and the test samples are not printed, so the interval is over runs alone; two
    columns of one row (a model before and after a post-hoc map) share their runs, and for them the unpaired
    interval is the conservative one when the two columns are positively correlated across runs.
    """
    import numpy as np
    from scipy import stats as scipy_stats

    from calib.stats import Interval

    values = {"mean_a": mean_a, "sem_a": sem_a, "mean_b": mean_b, "sem_b": sem_b}
    for name, value in values.items():
        if isinstance(value, bool) or not np.isfinite(np.asarray(value, dtype=np.float64)).all() \
                or np.ndim(value) != 0:
            raise ValueError(f"{name} must be one finite printed number; got {value!r}.")
    for name in ("sem_a", "sem_b"):
        if float(values[name]) < 0:
            raise ValueError(f"{name} must be a standard error >= 0; got {values[name]!r}.")
    if isinstance(runs, bool) or int(runs) != runs or runs < 2:
        raise ValueError(f"runs must be the number of runs behind each mean, an integer >= 2; got {runs!r}.")
    level = float(level)
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must lie in (0, 1), e.g. 0.95; got {level}.")
    sa, sb = float(sem_a), float(sem_b)
    se = float(np.hypot(sa, sb))
    df = float(se ** 4 / ((sa ** 4 + sb ** 4) / (int(runs) - 1))) if se > 0 else float(int(runs) - 1)
    estimate = float(mean_a) - float(mean_b)
    half = float(scipy_stats.t.ppf(0.5 + level / 2, df) * se)
    return Interval(estimate, estimate - half, estimate + half, level, int(runs),
                    "Welch t-interval over runs, from the printed means and standard errors", se, df)


def cell_text(row: dict, temperature: bool = True, std: bool = True) -> str:
    """A printed cell as the paper prints it: the value, ``± std`` and ``(T)`` where printed, bold as
    ``**...**``, and ``?`` for a cell the extraction garbled."""
    if row["unreadable"]:
        return "?"
    text = row["value_text"]
    if std and row.get("std") is not None:
        text += f" ± {row['std']:g}"
    if temperature and row.get("temperature") is not None:
        text += f" ({row['temperature']:g})"
    return f"**{text}**" if row.get("bold") else text


def select(rows, **where) -> list:
    """The rows whose fields equal ``where`` (a tuple or set value: any of them), e.g.
    ``select(rows, table="Table 1", stage=("pre-T", "post-T"))``."""
    def ok(r, k, v):
        return r[k] in v if isinstance(v, (tuple, list, set, frozenset)) else r[k] == v
    return [r for r in rows if all(ok(r, k, v) for k, v in where.items())]


def paper_layout(rows, row_by=("dataset", "model"), col_by=("method", "stage"), temperature=True, std=True):
    """A printed table put back in the paper's layout: one line per distinct ``row_by`` label and one column
    per distinct ``col_by`` label, both in printed order (the order of the CSV), each cell :func:`cell_text`.

    Returns ``(header, body)`` for the book's ``calib_book.notebook.markdown_table``. Label fields that are empty in
    every row (e.g. the model of Komisarenko & Kull's Table 1, which prints none) get no column. Raises ValueError when
    two printed numbers fall in the same cell (``row_by``/``col_by`` do not identify a cell)."""
    rows = list(rows)
    if not rows:
        raise ValueError("paper_layout needs at least one printed number.")
    row_by = [k for k in row_by if any(r[k] for r in rows)]
    lines, cols, cells = {}, {}, {}
    for r in rows:
        lk, ck = tuple(r[k] for k in row_by), tuple(r[k] for k in col_by)
        lines.setdefault(lk, None)
        cols.setdefault(ck, None)
        if (lk, ck) in cells:
            raise ValueError(f"two printed numbers in the cell {lk} x {ck}; add a field to row_by or col_by.")
        cells[lk, ck] = cell_text(r, temperature, std)
    header = list(row_by) + [" ".join(x for x in ck if x) for ck in cols]
    body = [list(lk) + [cells.get((lk, ck), "") for ck in cols] for lk in lines]
    return header, body


def _field(row: dict, key: str):
    """A row's field; ``"map"`` is the post-hoc map its printed stage stands for
    (:data:`~calib.published.tables.STAGE_MAPS`), so that "pre-T", "original" and an empty stage meet."""
    if key == "map" and "map" not in row:
        return STAGE_MAPS.get(row["stage"], row["stage"])
    return row[key]


def paired_cells(rows_a, rows_b, keys=("dataset", "model", "method", "stage"), transform=None) -> list:
    """The numbers printed in two places, matched on ``keys`` (labels compared by :func:`label_key`, so "Tiny-ImageNet"
    meets "Tiny Imagenet"), each with whether they agree as printed (:func:`agree_as_printed`, ``transform`` applied to
    the second; the key ``"map"`` matches printed stages by :data:`~calib.published.tables.STAGE_MAPS`). Used for
    Mukhoti et al. Tables 1 vs 5, 2 vs 6 (FLSD-53), 4 vs 7 and 4 vs 8 (error = 100 - top-1), Karandikar et al.
    Tables 1 vs 2, 4, 5, 6.

    Returns a list of dicts ``key, a, b, a_text, b_text, a_temperature, b_temperature, agree,
    temperature_agree`` (the last is None where either table prints no temperature); unreadable cells are
    skipped, as are keys found in one table only."""
    index: dict[tuple, dict] = {}
    for r in rows_b:
        if not r["unreadable"]:
            index.setdefault(tuple(label_key(_field(r, k)) for k in keys), r)
    out = []
    for a in rows_a:
        if a["unreadable"]:
            continue
        b = index.get(tuple(label_key(_field(a, k)) for k in keys))
        if b is None:
            continue
        ta, tb = a.get("temperature"), b.get("temperature")
        out.append({"key": tuple(_field(a, k) for k in keys), "a": a["value"], "b": b["value"],
                    "a_text": a["value_text"], "b_text": b["value_text"], "a_temperature": ta, "b_temperature": tb,
                    "agree": agree_as_printed(a["value_text"], b["value_text"], transform),
                    "temperature_agree": None if ta is None or tb is None else abs(ta - tb) < 1e-9})
    return out


def temperature_lookup(rows, keys=("dataset", "model", "method")) -> dict:
    """The printed temperatures of ``rows`` (their post-T cells) keyed by the :func:`label_key` of ``keys``: the
    temperatures of Mukhoti et al.'s ECE tables (1 and 5), which their NLL and MCE tables (9-12, "cross-validating
    T on ECE") use without printing them."""
    return {tuple(label_key(r[k]) for k in keys): r["temperature"] for r in rows if r.get("temperature") is not None}


def pre_post_pairs(pre_rows, post_rows, keys=("dataset", "model", "method", "metric"), temperatures=None,
                   temperature_keys=("dataset", "model", "method")) -> list:
    """Each number printed before temperature scaling beside the same model's number after it, with the printed
    temperature (from the post-T cell, or from ``temperatures`` (:func:`temperature_lookup`) for tables that do
    not print it).

    With T = 1 temperature scaling is the identity, so pre must equal post; with T != 1 it changes every
    non-degenerate metric, so pre == post there is suspicious. A printed "1" or "1.0" may stand for any T that
    rounds to it (0.95 to 1.05 for "1.0"), so pre != post at a printed T of 1 is no error.

    Returns dicts ``key, pre, post, pre_text, post_text, temperature, equal`` (``temperature`` None where none
    is known)."""
    post = {tuple(label_key(r[k]) for k in keys): r for r in post_rows if not r["unreadable"]}
    out = []
    for a in pre_rows:
        if a["unreadable"]:
            continue
        b = post.get(tuple(label_key(a[k]) for k in keys))
        if b is None:
            continue
        t = b.get("temperature")
        if t is None and temperatures is not None:
            t = temperatures.get(tuple(label_key(a[k]) for k in temperature_keys))
        out.append({"key": tuple(a[k] for k in keys), "pre": a["value"], "post": b["value"],
                    "pre_text": a["value_text"], "post_text": b["value_text"], "temperature": t,
                    "equal": a["value_text"] == b["value_text"] or a["value"] == b["value"]})
    return out


def printed_row_values(rows, row_by=("table", "dataset", "model")) -> dict:
    """The printed rows of a paper: ``row_by`` label -> the tuple of its printed values in printed order
    (temperatures and stds left out; an unreadable cell is None)."""
    out: dict[tuple, list] = {}
    for r in rows:
        out.setdefault(tuple(r[k] for k in row_by), []).append(r["value"])
    return {k: tuple(v) for k, v in out.items()}


def coinciding_rows(rows, row_by=("table", "dataset", "model"), min_cells=5) -> list:
    """Every pair of printed rows, in any two tables of a paper or within one, whose printed values are identical
    cell for cell (at least ``min_cells`` readable cells): a general search for pasted rows, such as Mukhoti et
    al.'s Table 2 CIFAR-100/ResNet 50 row (AdaECE) equal to Table 1's (ECE), or Table 12's 20 Newsgroups row
    (MCE post-T) equal to Table 11's (pre-T).

    Two different models or metrics agreeing to every printed digit in ``min_cells`` cells is improbable by
    chance; a hit is a candidate copy error to be judged (it is expected, e.g., where TS is the identity).
    Returns ``(row_a, row_b, n_cells)`` triples, rows as ``row_by`` labels, in printed order."""
    values = printed_row_values(rows, row_by)
    groups: dict[tuple, list] = {}
    for label, vals in values.items():
        if sum(v is not None for v in vals) >= min_cells and None not in vals:
            groups.setdefault(vals, []).append(label)
    out = []
    for vals, labels in groups.items():
        for i in range(len(labels)):
            for j in range(i + 1, len(labels)):
                out.append((labels[i], labels[j], len(vals)))
    order = list(values)
    return sorted(out, key=lambda t: (order.index(t[0]), order.index(t[1])))


@dataclass(frozen=True)
class Recount:
    """A paper's summary sentence recounted over the cells of its own table (:func:`recount`).

    ``cells``: one dict per compared cell (``key``, ``ours``, ``best_other``, ``best_name``, ``margin`` = best
    other minus ours when lower is better (positive: ours wins), ``std`` = the larger printed std of the two or
    None). ``wins``/``losses``/``ties`` count margins > 0, < 0, = 0; ``beyond_std_wins``/``beyond_std_losses``
    those whose ``|margin|`` exceeds the printed std (None where no std is printed); ``sign``: the one-sided
    :func:`calib.stats.sign_test` over the independent units (each cell, or each network when the cells of one
    network are pooled, :func:`recount`'s ``unit_by``), and ``p_value`` its p."""
    cells: list = field(repr=False)
    wins: int
    losses: int
    ties: int
    beyond_std_wins: int | None
    beyond_std_losses: int | None
    p_value: float
    sign: SignTest | None = None

    @property
    def n(self) -> int:
        """The number of compared cells (wins, losses and ties)."""
        return self.wins + self.losses + self.ties

    def brief(self) -> str:
        """One line for a claim's evidence: the counts, those beyond the printed std, and the sign test."""
        text = f"{self.wins} of {self.n} cells better, {self.losses} worse, {self.ties} tied"
        if self.beyond_std_wins is not None:
            text += (f"; by more than the printed std: {self.beyond_std_wins} better, {self.beyond_std_losses} "
                     "worse")
        if self.sign is None:
            return text + f"; sign test p = {self.p_value:.2g}"
        return text + f"; {self.sign}"


def recount(rows, ours, others, field="method", cell_by=("table", "dataset", "model", "stage"),
            lower_is_better=True, unit_by=None) -> Recount:
    """Recount a "``ours`` beats ``others``" sentence over a printed table: in each cell (the printed numbers
    that share ``cell_by``), compare the entry whose ``field`` is ``ours`` with the best of those whose ``field`` is
    in ``others`` (labels matched by :func:`label_key`).

    Comparing with the best of the others is the statement "outperforms all the baselines" cell by cell; a
    sign test of wins against 1/2 is then conservative (with k equally good competitors ours would be best with
    probability 1/(k+1) < 1/2). Used for Mukhoti et al. Tables 1-2 (FLSD-53 vs CE, Brier, MMCE, LS), Komisarenko
    & Kull Table 1 (FTS vs TS, ``field="stage"``), Karandikar et al. Table 2 (TS-SB-ECE vs TS) and Zhou et al.
    Tables 1-2 (AU vs the other losses). Cells with no readable ``ours`` or no readable other are skipped.

    ``unit_by`` names the fields of ``cell_by`` that make an independent unit (``("dataset", "model")``: a network
    printed in Tables 1 and 2, before and after TS, is one unit): the sign test counts each unit once
    (:func:`calib.stats.sign_test`, one-sided); by default every cell is a unit."""
    from calib.stats import sign_test

    unit_by = tuple(cell_by) if unit_by is None else tuple(unit_by)
    if not set(unit_by) <= set(cell_by):
        raise ValueError(f"unit_by={unit_by} must name fields of cell_by={tuple(cell_by)}.")

    ours_k, others_k = label_key(ours), {label_key(o) for o in others}
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        if not r["unreadable"]:
            groups.setdefault(tuple(r[k] for k in cell_by), []).append(r)
    sign = 1.0 if lower_is_better else -1.0
    cells = []
    for key, group in groups.items():
        mine = [r for r in group if label_key(r[field]) == ours_k]
        rest = [r for r in group if label_key(r[field]) in others_k]
        if not mine or not rest:
            continue
        if len(mine) > 1:
            raise ValueError(f"cell {key} holds {len(mine)} entries for {ours!r}; add a field to cell_by.")
        m = mine[0]
        best = min(rest, key=lambda r: sign * r["value"])
        stds = [s for s in (m.get("std"), best.get("std")) if s is not None]
        cells.append({"key": key, "ours": m["value"], "best_other": best["value"], "best_name": best[field],
                      "margin": round(sign * (best["value"] - m["value"]), 10),
                      "std": max(stds) if len(stds) == 2 else None})
    wins = sum(c["margin"] > 0 for c in cells)
    losses = sum(c["margin"] < 0 for c in cells)
    with_std = [c for c in cells if c["std"] is not None]
    bw = sum(c["margin"] > c["std"] for c in with_std) if with_std else None
    bl = sum(-c["margin"] > c["std"] for c in with_std) if with_std else None
    if not cells:
        return Recount(cells, 0, 0, 0, bw, bl, 1.0, None)
    test = sign_test([c["margin"] for c in cells], [tuple(c["key"][list(cell_by).index(f)] for f in unit_by)
                                                    for c in cells], alternative="greater")
    return Recount(cells, wins, losses, len(cells) - wins - losses, bw, bl, test.p_value, test)


def kendall_by_seed(paper_values: dict, our_values: dict) -> "np.ndarray":
    """Kendall's tau between a paper's ordering of the losses and ours, one tau per seed of our runs.

    ``paper_values``: loss -> the paper's printed value (one dataset/model row, e.g. Mukhoti et al. Table 1
    ECE pre-T); ``our_values``: loss -> our per-seed values (same seeds, same order, for every loss). The losses
    are those in both. Tau is ``scipy.stats.kendalltau`` (tau-b: ties count neither way); +1 is the same
    order, -1 the reverse. Give the returned array to :func:`calib.stats.seed_interval` for an interval over
    seeds. Raises ValueError with fewer than 3 shared losses."""
    import numpy as np
    from scipy.stats import kendalltau

    shared = [loss for loss in paper_values if loss in our_values]
    if len(shared) < 3:
        raise ValueError(f"kendall_by_seed needs at least 3 losses in both; shared: {shared}.")
    ours = np.array([np.asarray(our_values[loss], dtype=float) for loss in shared])     # losses x seeds
    paper = np.array([paper_values[loss] for loss in shared], dtype=float)
    return np.array([kendalltau(paper, ours[:, s]).statistic for s in range(ours.shape[1])])


def same_direction(paper_change: dict, our_decisions: dict) -> list:
    """Whether a post-hoc map moves the same losses the same way in a paper and in our runs.

    ``paper_change``: loss -> the printed change (post minus pre; negative: the map lowers the metric);
    ``our_decisions``: loss -> :class:`calib.stats.Decision` of "our change is below 0" (``direction="less"``).
    Per shared loss: ``paper`` ("lowers", "raises", "unchanged"), ``ours`` (the decision's verdict) and ``agree``:
    True when both lower it (ours *holds*), or the paper's does not and ours is *not-reproduced*; None where ours
    is *inconclusive*; False otherwise."""
    out = []
    for loss, change in paper_change.items():
        if loss not in our_decisions:
            continue
        d = our_decisions[loss]
        paper = "lowers" if change < 0 else ("raises" if change > 0 else "unchanged")
        if d.verdict == "inconclusive":
            agree = None
        else:
            agree = (paper == "lowers") == (d.verdict == "holds")
        out.append({"loss": loss, "paper": paper, "change": change, "ours": d.verdict, "interval": d.interval,
                    "agree": agree})
    return out


#: How a decided check of a printed table reads in the reproduction summary (None when nothing decided it).
REPRODUCTION_STATUS = {"holds": "reproduced in direction", "not-reproduced": "not reproduced",
                       "inconclusive": "inconclusive", None: "untested"}


def reproduction_rows(tables, tests: dict, covered: dict, scale: str, command: str) -> list:
    """The reproduction summary: one line per empirical table (``n_cells > 0``) of
    :func:`~calib.published.tables.read_published_tables`.

    ``tests``: ``(paper, table)`` -> ``(what we compared, verdict)`` with the verdict of :mod:`calib.stats`
    (``holds``/``not-reproduced``/``inconclusive``) or None; ``covered``: ``(paper, table)`` -> whether the GPU
    grid (``command``) would rerun its setting. Returns lines ``[paper, table, caption (first sentence), what,
    status, scale, command]`` where status is :data:`REPRODUCTION_STATUS` of the verdict, scale is ``scale`` for a
    tested table, and command is ``command`` for a covered table, else "no grid here covers it"."""
    out = []
    for t in tables:
        if t["n_cells"] == 0:
            continue
        key = (t["paper"], t["table"])
        what, verdict = tests.get(key, ("", None))
        if verdict not in REPRODUCTION_STATUS:
            raise ValueError(f"{key}: verdict {verdict!r} is none of {list(REPRODUCTION_STATUS)}.")
        caption = t["caption"].split(". ")[0].rstrip(".")
        out.append([t["paper"], t["table"], caption, what or "–", REPRODUCTION_STATUS[verdict],
                    scale if verdict is not None else "–",
                    command if covered.get(key) else "no grid here covers it"])
    return out


#: Printed loss labels of the same training loss in different papers (by :func:`label_key`) -> one name, the
#: chapter 10 label. Zhou et al.'s "FL-53" is FLSD-53 (their App. E.1), "XE" is cross-entropy.
#:
#: :meta hide-value:
LOSS_ALIASES = {"crossentropy": "ce", "xe": "ce", "nll": "ce", "brierloss": "brier", "mmce": "mmce",
                "ls005": "ls-0.05", "fl1": "fl-1", "fl3": "fl-3", "flsd53": "flsd-53", "fl53": "flsd-53",
                "focaltr1": "fl-1", "focaltr3": "fl-3", "focaltr7": "fl-7", "invfl": "inverse", "dual": "dual",
                "aupx": "aurc", "aurc": "aurc-plain", "flsc531": "flsc-531", "adafocal": "adafocal",
                "fl2": "fl-2", "nllmmce": "mmce", "nllsbece": "ce+sb-ece", "nllsavuc": "ce+s-avuc"}


def canonical_loss(label: str) -> str:
    """The chapter-10 name of a printed loss label (:data:`LOSS_ALIASES`), or its :func:`label_key` if unknown:
    "Cross-Entropy", "CROSS-ENTROPY" and "XE" give ``"ce"``; "FLSD-53 (Ours)" and "FL-53" give ``"flsd-53"``; Zhou et
    al.'s "AU_{P_{X_τ}}" gives ``"aurc"`` (chapter 10's AU loss) and their plain "AURC" baseline ``"aurc-plain"``."""
    key = label_key(label)
    return LOSS_ALIASES.get(key, key)


def setting_values(rows, model=None, transform=None) -> dict:
    """A paper's printed numbers keyed by setting: ``(dataset, model, loss)`` with dataset and model by
    :func:`label_key` and loss by :func:`canonical_loss`, so that different papers' rows meet. ``model`` fills an
    empty printed model (Komisarenko & Kull print none: ResNet-50, their Sec. 5.1); ``transform`` maps the value
    (``lambda v: 100 - v`` turns Mukhoti et al.'s Table 4 error into accuracy). Values are ``(value, std)``."""
    out = {}
    for r in rows:
        if r["unreadable"]:
            continue
        key = (label_key(r["dataset"]), label_key(r["model"] or (model or "")), canonical_loss(r["method"]))
        if key in out:
            raise ValueError(f"two printed numbers for the setting {key}; select one metric and stage first.")
        v = r["value"] if transform is None else transform(r["value"])
        out[key] = (v, r["std"])
    return out


def grid_label(loss: str, labels) -> str | None:
    """The label of a benchmark grid (chapter 10) that trains ``loss`` (a :func:`canonical_loss` name): the label
    itself, or the one label that adds a parameter to it (``"mmce"`` -> ``"mmce-0.25"``, ``"inverse"`` ->
    ``"inverse-fl-1"``); None if the grid has none or several."""
    labels = list(labels)
    if loss in labels:
        return loss
    cands = [x for x in labels if x.startswith(loss + "-") and x != loss + "-detach"]
    return cands[0] if len(cands) == 1 else None


def paper_losses(rows, labels, dataset: str, model: str, default_model: str | None = None) -> dict:
    """One printed row of a paper's table as ``{grid label: printed value}`` for the losses a benchmark grid
    (``labels``, chapter 10) also trains: rows of ``dataset``/``model`` (by :func:`label_key`; ``default_model``
    stands for an empty printed model), losses by :func:`canonical_loss` and :func:`grid_label`. Select one metric
    and stage first; raises ValueError if two printed numbers map to one label."""
    out = {}
    for r in rows:
        if r["unreadable"] or label_key(r["dataset"]) != label_key(dataset):
            continue
        if label_key(r["model"] or (default_model or "")) != label_key(model):
            continue
        lab = grid_label(canonical_loss(r["method"]), labels)
        if lab is None:
            continue
        if lab in out:
            raise ValueError(f"two printed numbers for {lab!r}; select one metric and stage first.")
        out[lab] = r["value"]
    return out


def majority_verdict(family) -> str:
    """The verdict of an "in most cases" statement ("TS-SB-ECE beats TS for most losses") from its family of
    comparisons drawn from one grid, decided by :func:`calib.stats.decide_any` (Holm's correction over the family):
    *holds* when more than half hold after the correction (``family.holding``), *not-reproduced* when at least
    half lie on the other side after the correction (Holm on that side: then at most half can hold), else
    *inconclusive*. The parts' unadjusted verdicts are not counted: with six comparisons each at the 2.5 % level, a
    majority of chance wins is far likelier than 2.5 % (issue 41). A statement that needs every part uses
    :func:`calib.stats.decide_every`.
    """
    from calib.stats import MultipleDecision

    if not isinstance(family, MultipleDecision) or family.rule != "any":
        raise ValueError("family must be the MultipleDecision of calib.stats.decide_any over the comparisons (Holm's "
                         "correction over the family); a list of unadjusted Decisions is not counted (issue 41).")
    n = len(family.intervals)
    failing = sum(p <= family.alpha for p in family.p_against.values())
    if 2 * len(family.holding) > n:
        return "holds"
    return "not-reproduced" if 2 * failing >= n else "inconclusive"
