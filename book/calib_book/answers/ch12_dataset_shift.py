"""The answer key of chapter 12 (Calibration under dataset shift). Chapter 12's exercises: the error bar of the
papers' shift figures against the seeds' interval, and one temperature for sixteen shifts; both read the stored
shift evaluation (``book/results/12-dataset-shift/shift.json``) as the chapter does.
"""

from __future__ import annotations

from pathlib import Path

from calib_book.answers.registry import Expected, choice, parameter, register

#: Chapter 12's store: the grid's runs and their shift evaluation.
SHIFT_STORE = Path(__file__).resolve().parents[2] / "results" / "12-dataset-shift"


#: severity 5 in the book; a course draws another of the store's severities, 2 to 4 (for ch12-ex-worst-corruption 2 or
#: 3: at severity 4 its answers are the book's), each exercise its own
ERROR_BARS_SEVERITY = parameter("ch12-ex-error-bars", "severity", 5, lambda rng: int(rng.choice([2, 3, 4])),
                                shown=("at severity {}, compute", "\"ts-nll\", \"ece_em_l2\", {})"), text=str)
WORST_SEVERITY = parameter("ch12-ex-worst-corruption", "severity", 5, lambda rng: int(rng.choice([2, 3])),
                           shown=("At severity {}, list", "\"ts-nll\", \"ece_em_l2\", {})",
                                  ", {}, seeds=TRAINED_SEEDS[\"ce\"])"), text=str)


def _ce_ts_at(metric: str, severity: int = 5):
    """Cross-entropy with TS (NLL-fitted) at ``severity``: the corruption types and the (seeds, types) values of
    ``metric``, every seed of the store, as the exercises ask (``EV.by_corruption("ce", "ts-nll", metric, 5)``)."""
    from calib.shift import read_shift_evaluation

    return read_shift_evaluation(SHIFT_STORE / "shift.json").by_corruption("ce", "ts-nll", metric, severity)


def _ch12_error_bars(part: str) -> float:
    """ch12-ex-error-bars, in points: the plain SEM over every (seed, corruption) value, the corrected SEM of
    calib.shift.corruption_sem, and the SEM of the seeds' means over the corruptions."""
    import numpy as np

    from calib.shift import corruption_sem

    _, x = _ce_ts_at("ece_em_l2", ERROR_BARS_SEVERITY())
    if part == "plain":
        return float(100 * x.std(ddof=1) / np.sqrt(x.size))
    if part == "corrected":
        return 100 * corruption_sem(x)
    return float(100 * x.mean(axis=1).std(ddof=1) / np.sqrt(x.shape[0]))


register("ch12-ex-error-bars", "12-dataset-shift",
         plain=Expected(lambda: _ch12_error_bars("plain"), rtol=1e-3, close_digits=2,
                        hint="the standard error of a mean of all the values, as if they were independent"),
         corrected=Expected(lambda: _ch12_error_bars("corrected"), rtol=1e-3, close_digits=2,
                            hint="each corruption type's own mean removed before the spread is taken"),
         over_seeds=Expected(lambda: _ch12_error_bars("over_seeds"), rtol=1e-3, close_digits=2,
                             hint="one number per seed first, then the standard error of those numbers"),
         compare=choice(lambda: "paired interval", ("error bars", "paired interval"),
                        hint="what two maps fitted to the same network share"))


def _ch12_under_confident() -> int:
    """ch12-ex-worst-corruption: the corruptions under which CE + TS is under-confident at severity 5 (mean
    confidence below accuracy, means over the seeds; a course's severity)."""
    _, confidence = _ce_ts_at("mean_confidence", WORST_SEVERITY())
    _, accuracy = _ce_ts_at("accuracy", WORST_SEVERITY())
    return int(((confidence - accuracy).mean(axis=0) < 0).sum())


def _ch12_worst() -> str:
    """ch12-ex-worst-corruption: the corruption with the largest ECE of CE + TS at severity 5 (mean over seeds)."""
    kinds, ece = _ce_ts_at("ece_em_l2", WORST_SEVERITY())
    return str(kinds[int(ece.mean(axis=0).argmax())])


def _corruption_names() -> tuple[str, ...]:
    from calib.corruptions import CORRUPTIONS

    return tuple(CORRUPTIONS)


register("ch12-ex-worst-corruption", "12-dataset-shift",
         n_under=Expected(_ch12_under_confident, rtol=0, atol=0.5, close_digits=None,
                          hint="the sign of mean confidence minus accuracy, corruption by corruption"),
         worst=choice(_ch12_worst, _corruption_names(), hint="the ECE with the map, averaged over the seeds"),
         one_temperature=choice(lambda: "no", ("yes", "no"),
                                hint="what dividing every logit by one number can and cannot do"))
