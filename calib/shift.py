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
:class:`ShiftEvaluation` reads it back by loss, map, metric, seed and severity; :func:`corruption_sem` is the error
bar of the papers' figures.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from calib import runs as run_files
from calib.corruptions import CORRUPTIONS, corrupt_images
from calib.metrics import get_metric
from calib.posthoc import get_map, map_names

__all__ = ["CLEAN", "SEVERITIES", "SHIFT_METRICS", "shift_sets", "shifted_images", "shift_definitions",
           "evaluate_shift_runs", "evaluate_shift", "ShiftEvaluation", "corruption_sem", "read_shift_evaluation"]

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

    from calib.data import load_dataset
    from calib.train import load_network, network_logits

    maps = list(map_names() if maps is None else maps)
    for m in maps:
        get_map(m)                                    # unknown names list the registered ones
    for m in metrics:
        get_metric(m)
    sets = list(sets)
    for name in sets:
        _parse_set(name)
    if not isinstance(run_dirs, dict) or not run_dirs:
        raise ValueError("run_dirs must be a non-empty dict: key -> run directory with weights.npz.")
    networks, entries, fitted_maps = {}, {}, {}
    ds = dataset
    for key, path in run_dirs.items():
        path = Path(path)
        if ds is None:
            from calib.run_config import config_from_meta

            ds = load_dataset(config_from_meta(path).data)
        model, run_ds = load_network(path, dataset=ds)
        stored = run_files.read_logits(path / run_files.LOGITS)
        val = network_logits(model, run_ds.x_val, run_ds)
        clean = network_logits(model, run_ds.x_test, run_ds)
        if not np.array_equal(stored["test_labels"], run_ds.y_test) or not np.array_equal(stored["val_labels"],
                                                                                          run_ds.y_val):
            raise ValueError(f"{path}: the stored labels are not those of the dataset passed; pass the run's dataset.")
        loss = (losses or {}).get(key, path.parent.name)
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
    iterator = sets
    if progress:
        from tqdm.auto import tqdm

        iterator = tqdm(sets, desc="shifted test sets", unit="set")
    for name in iterator:
        images = None
        for key, (model, run_ds) in networks.items():
            if images is None:
                images = shifted_images(run_ds.x_test, name, seed=seed)
            logits = network_logits(model, images, run_ds)
            for m, f in fitted_maps[key].items():
                for metric, value in _score(f, logits, run_ds.y_test, metrics).items():
                    entries[key]["values"][m][metric].append(value)
    return entries


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
    for run in runs:
        key = f"{run.model}/{run.loss}/seed{run.seed}"
        weights = Path(run.path) / run_files.WEIGHTS
        if not weights.is_file():
            raise FileNotFoundError(f"{run.path} has no {run_files.WEIGHTS}: it was trained without weights; retrain "
                                    f"it (its grid's weights = \"float16\") to score it under shift.")
        digest = _sha256(weights)
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


def read_shift_evaluation(cache) -> "ShiftEvaluation":
    """A stored shift evaluation (the ``cache`` of :func:`evaluate_shift`) as it is, without its networks: nothing
    is recomputed, so nothing here checks it against any weights (:func:`evaluate_shift` does, and chapter 12
    recomputes a run's sets)."""
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
