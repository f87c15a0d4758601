"""Calibration under dataset shift: stored networks scored on the corrupted test sets, with post-hoc maps fitted on
the clean validation split only, and the error bars of the papers' shift figures.

The protocol of Ovadia et al. (2019, "Can you trust your model's uncertainty?") that Karandikar et al. (2021, Secs.
5.2-5.3, Figs. 2, 7-9) follow on CIFAR-10-C: train on clean data, fit every post-hoc map on the clean validation
split, then score the clean test set (severity 0) and each corruption of it at severities 1-5, and plot the ECE
against the severity, averaged over the corruption types. Here the corruptions are :mod:`calib.corruptions`'
Fashion-MNIST-C (16 of CIFAR-10-C's 19 types), applied to the whole test set of the run's dataset with one seed; the
networks are the runs' stored final weights (``weights.npz``, :func:`calib.train.load_network`), so every number of
a run (its validation logits, the maps fitted on them, every shifted score) comes from one network, the one the
file holds. The maps are :mod:`calib.posthoc`'s registry (:data:`calib.experiments.POSTHOC_MAPS`); the metrics
:data:`SHIFT_METRICS`, from :mod:`calib.metrics`'s registry.

:func:`evaluate_shift` evaluates a store's runs and keeps the result in a JSON file keyed, run by run, by the SHA-256
of its ``weights.npz``, with the definitions of the corruptions, the maps and the metrics, so that a stored
evaluation is used only for the networks and the definitions it was computed from (as
:func:`calib.experiments.evaluate_store` keys chapter 10's post-hoc evaluation by the logits);
:func:`evaluate_shift_runs` computes any part of it afresh (chapter 12 recomputes a run's sets to check the file).
:func:`evaluate_shift_resamples` adds the test set's own noise: the metrics the claims compare at 400 bootstrap
resamples of the test images, the same resamples for every run (an ``.npz`` keyed the same way).
:class:`ShiftEvaluation` reads both back by loss, map, metric, seed and severity; :func:`corruption_sem` is the error
bar of the papers' figures.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from calib import runs as run_files
from calib.corruptions import CORRUPTIONS, corrupt_images
from calib.metrics import get_metric
from calib.posthoc import get_map, map_names

__all__ = ["CLEAN", "SEVERITIES", "SHIFT_METRICS", "RESAMPLED_METRICS", "RESAMPLED_MAPS", "shift_sets",
           "shifted_images", "shift_definitions", "evaluate_shift_runs", "evaluate_shift", "resample_shift_runs",
           "evaluate_shift_resamples", "computed_with", "ShiftEvaluation", "corruption_sem", "read_shift_evaluation"]

#: The name of the uncorrupted test set (severity 0) among :func:`shift_sets`.
CLEAN = "clean"
#: The severities of Hendrycks & Dietterich's corruptions, 1 (mild) to 5 (severe).
SEVERITIES = (1, 2, 3, 4, 5)
#: What each (run, test set, map) is scored with (15 bins where binned), names of :mod:`calib.metrics`' registry: the
#: accuracy, the equal-width ECE (Mukhoti et al. 2020), AdaECE (equal mass, l1), the equal-mass l2 ECE that
#: Karandikar et al. (2021) report, the NLL and the mean top-label confidence (minus the accuracy: the
#: over-confidence).
SHIFT_METRICS = ("accuracy", "ece", "adaece", "ece_em_l2", "nll", "mean_confidence")
_N_BINS = 15


def shift_sets(corruptions=None, severities=SEVERITIES) -> list[str]:
    """The test sets of a shift evaluation, in order: :data:`CLEAN`, then ``"<corruption>/<severity>"`` for each
    corruption of ``corruptions`` (default: all of :data:`calib.corruptions.CORRUPTIONS`, in its order) and each
    severity of ``severities``."""
    corruptions = list(CORRUPTIONS) if corruptions is None else list(corruptions)
    unknown = [c for c in corruptions if c not in CORRUPTIONS]
    if unknown:
        raise ValueError(f"corruptions {unknown} are not of calib.corruptions; choose from {', '.join(CORRUPTIONS)}.")
    bad = [s for s in severities if isinstance(s, bool) or not isinstance(s, (int, np.integer)) or not 1 <= s <= 5]
    if bad:
        raise ValueError(f"severities must be integers from 1 to 5; got {bad}.")
    return [CLEAN] + [f"{c}/{int(s)}" for c in corruptions for s in severities]


def _parse_set(name: str) -> tuple[str, int]:
    if name == CLEAN:
        return CLEAN, 0
    kind, _, severity = str(name).partition("/")
    if kind not in CORRUPTIONS or severity not in {"1", "2", "3", "4", "5"}:
        raise ValueError(f"test set {name!r} is neither {CLEAN!r} nor '<corruption>/<severity>' with a corruption of "
                         f"calib.corruptions and a severity 1-5, e.g. 'fog/3'.")
    return kind, int(severity)


def shifted_images(images, name: str, seed: int = 0) -> np.ndarray:
    """The test set ``name`` of :func:`shift_sets` made from uint8 ``images``: the images themselves for
    :data:`CLEAN`, else :func:`calib.corruptions.corrupt_images` of the whole batch (an image's corruption depends
    on the batch it is drawn with, so a set is always made from the whole test set)."""
    kind, severity = _parse_set(name)
    return np.asarray(images) if kind == CLEAN else corrupt_images(images, kind, severity, seed=seed)


def shift_definitions(sets, maps, metrics=SHIFT_METRICS, seed: int = 0) -> dict:
    """What a stored evaluation must have been computed with to be used: the corruptions' constants at each
    severity of ``sets`` and their seed, each map's definition (its registry summary, which states its grid), the
    metrics and their bins."""
    corruptions = {}
    for name in sets:
        kind, severity = _parse_set(name)
        if kind != CLEAN:
            corruptions[name] = repr(CORRUPTIONS[kind][severity - 1])
    return {"sets": list(sets), "corruptions": corruptions, "seed": int(seed),
            "maps": {m: get_map(m).summary for m in maps}, "metrics": list(metrics), "n_bins": _N_BINS}


def _sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _keyed_runs(runs):
    """(key, run, SHA-256 of its weights.npz) of each stored run; FileNotFoundError naming a run without weights."""
    for run in runs:
        weights = Path(run.path) / run_files.WEIGHTS
        if not weights.is_file():
            raise FileNotFoundError(f"{run.path} has no {run_files.WEIGHTS}: it was trained without weights; retrain "
                                    f"it (its grid's weights = \"float16\") to score it under shift.")
        yield f"{run.model}/{run.loss}/seed{run.seed}", run, _sha256(weights)


def _score(fitted, logits, labels, metrics) -> dict:
    probs, log_probs = fitted.proba(logits), fitted.log_proba(logits)
    out = {}
    for name in metrics:
        spec = get_metric(name)
        value = spec.from_log_probs(log_probs, labels) if spec.from_log_probs else spec(probs, labels, _N_BINS)
        out[name] = float(value)
    return out


def evaluate_shift_runs(run_dirs: dict, sets, maps=None, metrics=SHIFT_METRICS, seed: int = 0, dataset=None,
                        losses: dict | None = None, progress: bool = False) -> dict:
    """Score the stored networks of ``run_dirs`` on the test sets ``sets``, every map fitted on clean validation.

    Parameters
    ----------
    run_dirs : dict
        Key (e.g. ``"model/loss/seed0"``) -> run directory holding ``meta.json``, ``logits.npz`` and
        ``weights.npz``; the runs must share one dataset.
    sets : list of str
        Test sets of :func:`shift_sets` (any subset, in any order).
    maps : sequence of str, optional
        Post-hoc maps of :mod:`calib.posthoc`'s registry (default: all); a map that does not apply to a run's loss
        (``psi`` without a fixed-gamma focal loss) is left out of that run's entry.
    metrics : sequence of str
        Metric names of :mod:`calib.metrics`' registry (15 bins).
    seed : int
        The corruptions' seed.
    dataset : calib.data.Dataset, optional
        The runs' dataset as :func:`calib.data.load_dataset` gives it (read once when not given).
    losses : dict, optional
        Key -> the loss label the maps' ``applies`` is asked about (default: the run folder's parent's name, the
        store's loss label).

    Returns
    -------
    dict
        Key -> ``{"params": {map: fitted parameters}, "values": {map: {metric: [one float per set]}},
        "float16_check": {...}}``: the fitted temperature and gamma of each map, the scores in the order of
        ``sets``, and how far this network's clean test logits are from the run's stored float32 ones (the largest
        absolute difference, the share of changed predictions, and the ECE of each, equal-mass l2).
    """
    from scipy.special import softmax

    maps = list(map_names() if maps is None else maps)
    for m in maps:
        get_map(m)                                    # unknown names list the registered ones
    for m in metrics:
        get_metric(m)
    sets = list(sets)
    for name in sets:
        _parse_set(name)
    entries: dict[str, dict]
    networks, entries, fitted_maps = {}, {}, {}
    for key, (model, run_ds, loss, stored, val, clean) in _load_networks(run_dirs, dataset, losses).items():
        fitted = {m: get_map(m)(val, run_ds.y_val, loss) for m in maps if get_map(m).applies(loss)}
        z32 = stored["test_logits"].astype(np.float64)
        ece = get_metric("ece_em_l2")
        check = {"max_abs_logit_difference": float(np.abs(clean.astype(np.float64) - z32).max()),
                 "changed_predictions": float(np.mean(clean.argmax(1) != stored["test_logits"].argmax(1))),
                 "ece_em_l2_float32": ece(softmax(z32, axis=1), run_ds.y_test),
                 "ece_em_l2_stored_weights": ece(softmax(clean.astype(np.float64), axis=1), run_ds.y_test)}
        networks[key] = (model, run_ds)
        fitted_maps[key] = fitted
        entries[key] = {"params": {m: dict(f.params) for m, f in fitted.items()},
                        "values": {m: {metric: [] for metric in metrics} for m in fitted}, "float16_check": check}
    for _, key, logits, labels in _shifted_logits(networks, sets, seed, progress):
        for m, f in fitted_maps[key].items():
            for metric, value in _score(f, logits, labels, metrics).items():
                entries[key]["values"][m][metric].append(value)
    return entries


def _load_networks(run_dirs: dict, dataset, losses) -> dict:
    """Key -> (network, its dataset, loss label, stored test logits, its validation and clean test logits)."""
    from calib.data import load_dataset
    from calib.train import load_network, network_logits

    if not isinstance(run_dirs, dict) or not run_dirs:
        raise ValueError("run_dirs must be a non-empty dict: key -> run directory with weights.npz.")
    out, ds = {}, dataset
    for key, path in run_dirs.items():
        path = Path(path)
        if ds is None:
            from calib.run_config import config_from_meta

            ds = load_dataset(config_from_meta(path).data)
        model, run_ds = load_network(path, dataset=ds)
        stored = run_files.read_logits(path / run_files.LOGITS, splits=("test",))   # chapter 12 keeps no val logits
        if not np.array_equal(stored["test_labels"], run_ds.y_test):
            raise ValueError(f"{path}: the stored labels are not those of the dataset passed; pass the run's dataset.")
        loss = (losses or {}).get(key, path.parent.name)
        out[key] = (model, run_ds, loss, stored, network_logits(model, run_ds.x_val, run_ds),
                    network_logits(model, run_ds.x_test, run_ds))
    return out


def _shifted_logits(networks: dict, sets, seed: int, progress: bool):
    """(set index, key, logits, labels) of every network (key -> (model, dataset)) on every test set, each set
    corrupted once."""
    from calib.train import network_logits

    iterator = list(enumerate(sets))
    if progress:
        from tqdm.auto import tqdm

        iterator = tqdm(iterator, desc="shifted test sets", unit="set")
    for i, name in iterator:
        images = None
        for key, (model, run_ds) in networks.items():
            if images is None:
                images = shifted_images(run_ds.x_test, name, seed=seed)
            yield i, key, network_logits(model, images, run_ds), run_ds.y_test


#: What :func:`resample_shift_runs` resamples: the equal-mass l2 ECE and the over-confidence (mean top-label
#: confidence minus accuracy), the two quantities chapter 12's claims compare.
RESAMPLED_METRICS = ("ece_em_l2", "overconfidence")
#: The maps :func:`evaluate_shift_resamples` resamples by default, by loss label (``"*"``: any other loss): those
#: chapter 12's claims compare. No map for every loss (Fig. 7's losses against each other and against CE + TS);
#: TS and TS-SB-ECE for cross-entropy (Fig. 2) and for the focal and MSE primaries (Fig. 9).
RESAMPLED_MAPS = {"*": ("none",), "ce": ("none", "ts-nll", "ts-sb-ece"), "fl-3": ("none", "ts-nll", "ts-sb-ece"),
                  "brier": ("none", "ts-nll", "ts-sb-ece")}


def _maps_for(maps: Sequence[str] | dict[str, Sequence[str]], loss: str) -> list:
    """The maps of ``maps`` (a sequence for every loss, or a dict of :data:`RESAMPLED_MAPS`' form) for ``loss``."""
    if isinstance(maps, dict):
        return list(maps.get(loss, maps.get("*", ())))
    return list(maps)


def _check_maps(maps):
    """``maps`` as JSON (a list, or a dict of lists), each name checked against the registry."""
    as_json = {k: list(v) for k, v in maps.items()} if isinstance(maps, dict) else list(maps)
    for names in (as_json.values() if isinstance(as_json, dict) else [as_json]):
        for m in names:
            get_map(m)                                    # unknown names list the registered ones
    return as_json


def _resampled_values(probs, labels, counts) -> dict:
    from calib.metrics import top_label_outcomes
    from calib.metrics.resampling import EqualMassStatistic

    outcomes = top_label_outcomes(probs, labels)
    over = counts.astype(np.float64, copy=False) @ (outcomes[:, 0] - outcomes[:, 1]) / counts.shape[1]
    return {"ece_em_l2": EqualMassStatistic(outcomes[:, 0], outcomes[:, 1], _N_BINS, "l2").resampled(counts),
            "overconfidence": over}


def resample_shift_runs(run_dirs: dict, sets, maps=RESAMPLED_MAPS, n_resamples: int | None = None,
                        resample_seed: int = 0, seed: int = 0, dataset=None, losses: dict | None = None,
                        progress: bool = False) -> dict:
    """The test set's own noise of a shift evaluation: each run's :data:`RESAMPLED_METRICS` under each map, at
    every bootstrap resample of the test images, averaged per severity as :meth:`ShiftEvaluation.by_severity`
    averages the values.

    The resamples (:func:`calib.stats.bootstrap_counts` of the test set's size, ``n_resamples`` of them, seed
    ``resample_seed``) are the same for every run, map and test set: a corrupted set is a corruption of the same
    images, so a resample draws the same images from each, and a difference of two runs or maps taken resample by
    resample keeps their pairing (:func:`calib.stats.resampled_variance`). ``run_dirs``, ``sets``, ``seed``,
    ``dataset`` and ``losses`` are those of :func:`evaluate_shift_runs`; ``sets`` must hold :data:`CLEAN` and each
    severity it averages. ``maps``: a sequence for every run, or a dict by loss label as :data:`RESAMPLED_MAPS`.

    Returns
    -------
    dict
        Key -> ``{map: {metric: float array (6, n_resamples)}}``: row 0 the clean test set, row s the mean over the
        corruption types of severity s (NaN for a severity not in ``sets``).
    """
    from calib.stats import bootstrap_counts
    from calib.stats.test_set import N_RESAMPLES

    _check_maps(maps)
    sets = list(sets)
    severity = np.array([_parse_set(name)[1] for name in sets])
    per_severity = np.bincount(severity, minlength=6).astype(np.float64)
    networks, fitted_maps, out, counts = {}, {}, {}, None
    for key, (model, run_ds, loss, _, val, _) in _load_networks(run_dirs, dataset, losses).items():
        networks[key] = (model, run_ds)
        fitted_maps[key] = {m: get_map(m)(val, run_ds.y_val, loss) for m in _maps_for(maps, loss)
                            if get_map(m).applies(loss)}
        if counts is None:                            # float32 holds the counts exactly, in half the memory traffic
            counts = bootstrap_counts(run_ds.y_test.size, N_RESAMPLES if n_resamples is None else n_resamples,
                                      resample_seed).astype(np.float32)
        out[key] = {m: {metric: np.zeros((6, counts.shape[0])) for metric in RESAMPLED_METRICS}
                    for m in fitted_maps[key]}
    for i, key, logits, labels in _shifted_logits(networks, sets, seed, progress):
        for m, f in fitted_maps[key].items():
            for metric, values in _resampled_values(f.proba(logits), labels, counts).items():
                out[key][m][metric][severity[i]] += values / per_severity[severity[i]]
    for entry in out.values():
        for by_metric in entry.values():
            for values in by_metric.values():
                values[per_severity == 0] = np.nan
    return out


def evaluate_shift_resamples(runs, cache=None, corruptions=None, severities=SEVERITIES, maps=RESAMPLED_MAPS,
                             n_resamples: int | None = None, seed: int = 0, dataset=None, write_cache: bool = True,
                             progress: bool = False) -> dict:
    """:func:`resample_shift_runs` of every run of ``runs`` (as :func:`evaluate_shift` takes them), each run's
    arrays read from ``cache`` (an ``.npz``) when they were computed from the same ``weights.npz`` (SHA-256) and
    definitions, computed otherwise; the cache is rewritten (float32) when ``write_cache`` and something was
    computed. Returns key -> ``{map: {metric: (6, B) array}}``, the ``resamples`` of :class:`ShiftEvaluation`."""
    from calib.stats.test_set import N_RESAMPLES

    as_json = _check_maps(maps)
    b = N_RESAMPLES if n_resamples is None else int(n_resamples)
    every_map = sorted(set(sum(as_json.values(), [])) if isinstance(as_json, dict) else set(as_json))
    definitions = {**shift_definitions(shift_sets(corruptions, severities), every_map, RESAMPLED_METRICS, seed),
                   "resampled_maps": as_json, "n_resamples": b, "resample_seed": 0}
    cached, index = {}, {}
    if cache is not None and Path(cache).is_file():
        cached, index, _ = _read_resamples(cache, definitions)
    out, todo = {}, {}
    for key, run, digest in _keyed_runs(runs):
        if key in cached and index.get(key) == digest:
            out[key] = cached[key]
        else:
            todo[key] = (run, digest)
    if todo:
        fresh = resample_shift_runs({k: r.path for k, (r, _) in todo.items()}, definitions["sets"], maps, b, 0, seed,
                                    dataset, losses={k: r.loss for k, (r, _) in todo.items()}, progress=progress)
        out.update(fresh)
        index.update({k: d for k, (_, d) in todo.items()})
        if cache is not None and write_cache:
            arrays = {f"{k}|{m}|{metric}": np.asarray(v, dtype=np.float32) for k, by_map in out.items()
                      for m, by_metric in by_map.items() for metric, v in by_metric.items()}
            meta = json.dumps({"definitions": definitions, "sha256": {k: index[k] for k in out},
                               "computed_with": computed_with()}, sort_keys=True)
            Path(cache).parent.mkdir(parents=True, exist_ok=True)
            def write(tmp):
                with open(tmp, "wb") as fh:               # a file object: savez would add ".npz" to a path
                    np.savez_compressed(fh, __meta__=np.array(meta), **arrays)

            run_files.write_atomic(cache, write)
    return out


def computed_with() -> dict:
    """The floating-point kernels this process computes with (``calib._reproducible.kernel_fingerprint()``) and
    torch's thread count: a resample cache records them, since the post-hoc maps fitted again under other kernels
    move its values in the 4th digit (TS-SB-ECE's objective is not convex), and a check that recomputes it says
    which tolerance applies (chapter 12)."""
    import torch

    from calib._reproducible import kernel_fingerprint

    return {"kernels": kernel_fingerprint(), "threads": int(torch.get_num_threads())}


def _read_resamples(cache, definitions=None) -> tuple:
    """The arrays of a resample cache as key -> {map: {metric: float64 array}}, key -> SHA-256, and what it was
    computed with (:func:`computed_with`); no arrays when its definitions differ from ``definitions`` (when
    given)."""
    path = Path(cache)
    try:
        with np.load(path, allow_pickle=False) as z:
            meta = json.loads(str(z["__meta__"]))
            arrays = {name: z[name].astype(np.float64) for name in z.files if name != "__meta__"}
    except (OSError, ValueError, KeyError, json.JSONDecodeError) as err:
        raise ValueError(f"{path} is not a resample cache written by calib.shift.evaluate_shift_resamples ({err}); "
                         f"delete it and write it again.") from None
    if definitions is not None and meta.get("definitions") != definitions:
        return {}, {}, {}
    out: dict = {}
    for name, values in arrays.items():
        key, m, metric = name.rsplit("|", 2)
        out.setdefault(key, {}).setdefault(m, {})[metric] = values
    return out, dict(meta.get("sha256", {})), dict(meta.get("computed_with", {}))


def evaluate_shift(runs, cache=None, corruptions=None, severities=SEVERITIES, maps=None, metrics=SHIFT_METRICS,
                   seed: int = 0, dataset=None, write_cache: bool = True, progress: bool = False) -> "ShiftEvaluation":
    """The shift evaluation of every run of ``runs`` (:class:`calib.experiments.StoredRun`, from
    :func:`calib.experiments.load_store`), each run's entry read from ``cache`` (a JSON file) when it was computed
    from the same ``weights.npz`` (SHA-256) and definitions (:func:`shift_definitions`), computed otherwise
    (:func:`evaluate_shift_runs`, on every set of :func:`shift_sets`); the cache is rewritten when ``write_cache``
    and something was computed. A run without ``weights.npz`` raises FileNotFoundError naming it."""
    maps = list(map_names() if maps is None else maps)
    sets = shift_sets(corruptions, severities)
    definitions = shift_definitions(sets, maps, metrics, seed)
    cached = {}
    if cache is not None and Path(cache).is_file():
        try:
            data = json.loads(Path(cache).read_text())
        except (json.JSONDecodeError, UnicodeDecodeError):
            data = {}
        if isinstance(data, dict) and data.get("definitions") == definitions:
            cached = data.get("runs", {})
    entries, todo = {}, {}
    for key, run, digest in _keyed_runs(runs):
        entry = cached.get(key)
        if isinstance(entry, dict) and entry.get("sha256") == digest:
            entries[key] = entry
        else:
            todo[key] = (run, digest)
    if todo:
        fresh = evaluate_shift_runs({k: r.path for k, (r, _) in todo.items()}, sets, maps, metrics, seed, dataset,
                                    losses={k: r.loss for k, (r, _) in todo.items()}, progress=progress)
        for key, (run, digest) in todo.items():
            entries[key] = {"model": run.model, "loss": run.loss, "seed": run.seed, "sha256": digest, **fresh[key]}
        if cache is not None and write_cache:
            keep = {k: v for k, v in cached.items() if k not in entries}
            text = json.dumps({"about": "calib.shift.evaluate_shift: each run's stored network (weights.npz, keyed by "
                                        "its SHA-256) on the clean and corrupted test sets, every post-hoc map fitted "
                                        "on the clean validation split", "definitions": definitions,
                               "runs": {**keep, **entries}}, sort_keys=True, separators=(",", ":"))
            Path(cache).parent.mkdir(parents=True, exist_ok=True)
            run_files.write_atomic(cache, lambda tmp: Path(tmp).write_text(text))
    return ShiftEvaluation(sets, entries, definitions)


def read_shift_evaluation(cache, resamples=None) -> "ShiftEvaluation":
    """A stored shift evaluation (the ``cache`` of :func:`evaluate_shift`) as it is, without its networks: nothing
    is recomputed, so nothing here checks it against any weights (:func:`evaluate_shift` does, and chapter 12
    recomputes a run's sets). ``resamples``: the ``cache`` of :func:`evaluate_shift_resamples` for the same
    networks, read into :attr:`ShiftEvaluation.resamples` (ValueError when one of its runs was resampled from
    another ``weights.npz`` than the evaluation's)."""
    evaluation = _read_evaluation(cache)
    if resamples is not None:
        arrays, digests, evaluation.resamples_computed_with = _read_resamples(resamples)
        stale = sorted(k for k in arrays if k not in evaluation.entries
                       or digests.get(k) != evaluation.entries[k].get("sha256"))
        if stale:
            raise ValueError(f"{resamples}: runs {stale[:3]} were resampled from other networks than {cache} "
                             f"evaluated; write both again (calib.shift.evaluate_shift, evaluate_shift_resamples).")
        evaluation.resamples = arrays
    return evaluation


def _read_evaluation(cache) -> "ShiftEvaluation":
    path = Path(cache)
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: no stored shift evaluation; write one with calib.shift.evaluate_shift "
                                f"(chapter 12's full profile).") from None
    except (json.JSONDecodeError, UnicodeDecodeError):
        data = None
    if not isinstance(data, dict) or not isinstance(data.get("runs"), dict) or "definitions" not in data:
        raise ValueError(f"{path} is not a shift evaluation written by calib.shift.evaluate_shift (an object with "
                         f"'definitions' and 'runs'); write it again.")
    definitions = data["definitions"]
    return ShiftEvaluation(list(definitions["sets"]), data["runs"], definitions)


@dataclass
class ShiftEvaluation:
    """A shift evaluation: ``sets`` (:func:`shift_sets`), ``entries`` (run key -> its ``model``, ``loss``,
    ``seed``, ``sha256``, fitted ``params``, ``values`` and ``float16_check``) and the ``definitions`` it was
    computed with. Its methods read the values as arrays of (seeds, sets)."""

    sets: list
    entries: dict
    definitions: dict
    #: The test set's bootstrap of :func:`evaluate_shift_resamples`, by run key, map and metric, each a (6, B)
    #: array; None when not read.
    resamples: dict | None = None
    #: What the resamples were computed with (:func:`computed_with`; empty when not recorded).
    resamples_computed_with: dict | None = None

    def losses(self) -> list:
        """The loss labels evaluated, in the order first met."""
        return list(dict.fromkeys(e["loss"] for e in self.entries.values()))

    def seeds(self, loss: str) -> list:
        """The seeds evaluated for ``loss``, sorted."""
        return sorted(e["seed"] for e in self.entries.values() if e["loss"] == loss)

    def entry(self, loss: str, seed: int, model: str | None = None) -> dict:
        """The entry of one run; ValueError when there is none or several (give ``model``)."""
        found = [e for e in self.entries.values() if e["loss"] == loss and e["seed"] == seed
                 and (model is None or e["model"] == model)]
        if len(found) != 1:
            raise ValueError(f"{len(found)} evaluated runs of loss={loss!r}, seed={seed!r}"
                             + (f", model={model!r}" if model else "") + "; there must be exactly one.")
        return found[0]

    def values(self, loss: str, map: str, metric: str, seeds=None, model: str | None = None) -> np.ndarray:
        """The metric of ``loss`` under ``map`` on every set, one row per seed of ``seeds`` (default: every seed
        evaluated), shape (seeds, sets)."""
        seeds = self.seeds(loss) if seeds is None else list(seeds)
        rows = []
        for s in seeds:
            by_map = self.entry(loss, s, model)["values"]
            if map not in by_map:
                raise ValueError(f"map {map!r} was not evaluated for loss {loss!r} (it applies to "
                                 f"{', '.join(by_map)}).")
            rows.append(by_map[map][metric])
        return np.asarray(rows, dtype=np.float64).reshape(len(seeds), len(self.sets))

    def by_severity(self, loss: str, map: str, metric: str, seeds=None, model: str | None = None) -> np.ndarray:
        """The metric per seed and severity, shape (seeds, 6): column 0 the clean test set, column s the mean over
        the corruption types at severity s (Karandikar et al.'s curves, Figs. 2, 7-9)."""
        v = self.values(loss, map, metric, seeds, model)
        parsed = [_parse_set(name) for name in self.sets]
        cols = [v[:, [i for i, (_, s) in enumerate(parsed) if s == severity]].mean(axis=1) for severity in range(6)]
        return np.stack(cols, axis=1)

    def resampled_by_severity(self, loss: str, map: str, metric: str, seeds=None,
                              model: str | None = None) -> np.ndarray:
        """:meth:`by_severity` at every test-set resample (:func:`evaluate_shift_resamples`), shape (seeds, 6, B):
        the same resamples for every run and map, so differences taken resample by resample stay paired
        (:func:`calib.stats.resampled_variance`). ``metric`` is one of :data:`RESAMPLED_METRICS`."""
        if self.resamples is None:
            raise ValueError("this evaluation was read without its resamples; pass resamples= to "
                             "read_shift_evaluation (the .npz of evaluate_shift_resamples).")
        if metric not in RESAMPLED_METRICS:
            raise ValueError(f"metric={metric!r} was not resampled; choose one of {', '.join(RESAMPLED_METRICS)}.")
        seeds = self.seeds(loss) if seeds is None else list(seeds)
        rows = []
        for s in seeds:
            entry = self.entry(loss, s, model)
            key = f"{entry['model']}/{entry['loss']}/seed{entry['seed']}"
            by_map = self.resamples.get(key)
            if by_map is None or map not in by_map:
                raise ValueError(f"run {key} under map {map!r} was not resampled (resampled maps: "
                                 f"{', '.join(by_map or {}) or 'none'}).")
            rows.append(by_map[map][metric])
        return np.stack(rows)

    def by_corruption(self, loss: str, map: str, metric: str, severity: int, seeds=None,
                      model: str | None = None) -> tuple[list, np.ndarray]:
        """The corruption types and the metric per seed and type at ``severity`` (1-5), shape (seeds, types)."""
        v = self.values(loss, map, metric, seeds, model)
        picked = [(i, name.split("/")[0]) for i, name in enumerate(self.sets) if _parse_set(name)[1] == severity]
        if not picked:
            raise ValueError(f"no test set of severity {severity} was evaluated.")
        return [k for _, k in picked], v[:, [i for i, _ in picked]]


def corruption_sem(values) -> float:
    """The error bar of Karandikar et al.'s shift figures (Figs. 2, 7, 9): one standard error of the mean over runs,
    "corrected for intrinsic variability due to type of corruption" (Masson & Loftus 2003), read as the
    within-subject standard error with the corruption types as the subjects:

    .. math:: \\mathrm{SEM} = \\frac{1}{\\sqrt R}\\sqrt{\\frac{1}{C(R-1)}\\sum_{r=1}^R\\sum_{c=1}^C
              (x_{rc} - \\bar x_{\\cdot c})^2}

    for ``values`` :math:`x_{rc}` of shape (R runs, C corruption types): each type's own mean over the runs is
    removed, and what is left is the spread of the runs, pooled over the types. (The paper states no formula; this
    is the reading chapter 12 states.) Needs R >= 2.
    """
    x = np.asarray(values, dtype=np.float64)
    if x.ndim != 2 or x.shape[0] < 2 or x.shape[1] < 1 or not np.all(np.isfinite(x)):
        raise ValueError(f"values must be a finite (runs, corruption types) array with at least 2 runs; got shape "
                         f"{x.shape}.")
    r, c = x.shape
    return float(np.sqrt(((x - x.mean(axis=0)) ** 2).sum() / (c * (r - 1))) / np.sqrt(r))
