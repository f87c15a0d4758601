"""Grids of training runs, the store of finished runs, and tables across runs and post-hoc maps.

A *grid* is a TOML file naming models x losses x seeds and the training recipe they share (see
:func:`load_grid`). :func:`sweep` (``calib sweep GRID.toml``) trains every run of a grid with
:func:`calib.train.train` into ``<store>/<model>/<loss>/seed<k>/``: finished runs are skipped, interrupted
runs resume from their checkpoint, and progress over the grid (runs done, time so far, time left) is shown.
:func:`train_commands` (``calib sweep GRID.toml --list``) prints one ``calib train`` command per run instead,
for GNU parallel, a Slurm array or any other scheduler.

The *store* is the folder of stored runs (``book/results/10-benchmark`` for chapter 10): each run keeps
``meta.json``, ``history.json`` and ``logits.npz`` (float32 validation and test logits with their labels) and
no checkpoint. :func:`run_path` says where a run of the store lives; :func:`load_store` reads every finished run
back, and :func:`matching_run` reads one stored run when it is the run a chapter asks for; :func:`evaluate_store` fits every post-hoc map of
:data:`POSTHOC_MAPS` on a run's validation logits and scores the test logits with every metric of
:data:`METRICS`, giving one row per (run, map, metric): the long format that :func:`summarise` and
:func:`paired_difference` turn into the chapter's tables and intervals. The papers' own tables
(:mod:`calib.published`) come in the same long format through :func:`calib.published.published_rows`.
"""

from __future__ import annotations

import json
import re
import shlex
import time
import tomllib
from dataclasses import dataclass, field, fields
from pathlib import Path

import numpy as np

from calib import metrics
from calib import runs as run_files
from calib._validate import check_int
from calib.metrics import metric_names
from calib.posthoc import FittedMap, focal_loss_gamma, get_map, map_names
from calib.published import published_rows, read_published
from calib.runs import DISCARDABLE, RunLockedError, load_run
from calib.train import MAX_SEED, TrainConfig, config_from_meta, train

__all__ = ["GridRun", "Grid", "load_grid", "sweep", "train_commands", "StoredRun", "run_path", "load_store",
           "matching_run", "POSTHOC_MAPS",
           "METRICS", "fit_posthoc", "score_probabilities", "evaluate_run", "evaluate_store", "summarise",
           "paired_difference", "loss_gamma", "validation_choice", "final_validation", "OverconfidenceProfile",
           "overconfidence_profile", "NLL_RISE_FRACTION", "stored_evaluation", "metric_values", "mean_std_text",
           "pooled_test_probabilities", "read_published", "published_rows"]

#: Characters allowed in a model or loss label (they become folder names of the store).
_LABEL = re.compile(r"[a-z0-9][a-z0-9.+=,_-]*")
#: Keys of a grid file outside the shared training recipe.
_GRID_KEYS = {"description", "store", "seeds", "discard", "nproc_per_node", "train", "models", "losses"}
_CONFIG_FIELDS = {f.name for f in fields(TrainConfig)}


@dataclass(frozen=True)
class GridRun:
    """One run of a grid: its model and loss labels, seed, full config and run directory."""

    model: str
    loss: str
    seed: int
    config: TrainConfig
    out: Path

    @property
    def finished(self) -> bool:
        """The run directory holds a finished run (``meta.json`` says so); a damaged ``meta.json`` raises
        :class:`calib.runs.CorruptRunError` naming it."""
        meta = self.out / run_files.META
        return meta.is_file() and bool(run_files.read_json_object(meta).get("finished"))


@dataclass
class Grid:
    """A grid file read back: its description, store folder, files discarded after each run, and runs.

    ``nproc_per_node`` is the processes per run of the commands :func:`train_commands` lists (``torchrun`` for
    more than one); :func:`sweep` trains each run in its own process.
    """

    path: Path
    description: str
    store: Path
    discard: tuple
    runs: list = field(default_factory=list)
    nproc_per_node: int = 1

    @property
    def models(self) -> list:
        """The model labels, in grid order."""
        return list(dict.fromkeys(r.model for r in self.runs))

    def losses(self, model: str | None = None) -> list:
        """The loss labels (of one model), in grid order."""
        return list(dict.fromkeys(r.loss for r in self.runs if model is None or r.model == model))

    def complete(self, model: str) -> bool:
        """Every run of ``model`` is stored, finished and has its logits."""
        runs = [r for r in self.runs if r.model == model]
        return bool(runs) and all(r.finished and (r.out / run_files.LOGITS).is_file() for r in runs)


#: Config fields a model table (``models``) or a loss table (``losses``) may not set: a model table's runs are
#: filed under its label for every loss, a loss table's under its label for every model, and the seeds are the
#: grid's ``seeds``.
_NOT_IN_TABLE = {"models": ("loss", "secondary", "secondary_weight", "seed"), "losses": ("model", "seed")}


def _entry(item, kind: str, path: Path) -> tuple[str, dict]:
    """A model or loss entry: a bare name, or a table with ``label`` (or ``name``) and config overrides."""
    if isinstance(item, str):
        return item.strip().lower(), {}
    if not isinstance(item, dict):
        raise ValueError(f"{path}: each of {kind} must be a name or a table; got {item!r}.")
    item = dict(item)
    label = item.pop("label", None) or item.get("name") or item.get("model" if kind == "models" else "loss")
    item.pop("name", None)
    if not isinstance(label, str):
        raise ValueError(f"{path}: an entry of {kind} needs a 'label' (the folder name), e.g. "
                         f"{{label = 'ce+sb-ece', loss = 'ce', secondary = 'sb-ece'}}; got {item!r}.")
    unknown = sorted(set(item) - _CONFIG_FIELDS)
    if unknown:
        raise ValueError(f"{path}: {kind} entry {label!r} has keys {unknown} that are not TrainConfig fields; "
                         f"choose from {sorted(_CONFIG_FIELDS)}.")
    refused = [k for k in _NOT_IN_TABLE[kind] if k in item]
    if refused:
        singular = {"models": "model", "losses": "loss"}[kind]
        raise ValueError(f"{path}: {kind} entry {label!r} sets {', '.join(refused)}, which a {singular} table may "
                         f"not set: its runs are filed under the label {label!r} for every "
                         f"{'loss' if kind == 'models' else 'model'} and seed. Set it in the "
                         f"{'losses' if kind == 'models' else 'models'} list (seeds: in 'seeds').")
    return label.strip().lower(), item


def _check_grid_keys(spec: dict, path: Path) -> None:
    """The keys and types of a grid file, each error naming the file and the key."""
    unknown = sorted(set(spec) - _GRID_KEYS)
    if unknown:
        raise ValueError(f"{path}: unknown keys {unknown}; a grid has {sorted(_GRID_KEYS)}.")
    for key in ("seeds", "models", "losses"):
        if not isinstance(spec.get(key), list) or not spec[key]:
            raise ValueError(f"{path}: '{key}' must be a non-empty list, e.g. seeds = [0, 1, 2].")
    for key in ("description", "store"):
        if key in spec and not isinstance(spec[key], str):
            raise ValueError(f"{path}: '{key}' must be a string, e.g. {key} = \".\"; got {spec[key]!r}.")
    if "train" in spec and not isinstance(spec["train"], dict):
        raise ValueError(f"{path}: 'train' must be a table ([train] with TrainConfig fields); got {spec['train']!r}.")
    seeds = spec["seeds"]
    bad = [s for s in seeds if isinstance(s, bool) or not isinstance(s, int) or not 0 <= s <= MAX_SEED]
    if bad:
        raise ValueError(f"{path}: 'seeds' must hold integers in [0, {MAX_SEED}]; got {bad[0]!r}.")
    twice = sorted({s for s in seeds if seeds.count(s) > 1})
    if twice:
        raise ValueError(f"{path}: 'seeds' lists {twice} more than once; each seed is one run, list it once.")
    discard = spec.get("discard", ["checkpoint.pt"])
    if not isinstance(discard, list) or not all(isinstance(d, str) for d in discard):
        raise ValueError(f"{path}: 'discard' must be a list of file names, e.g. discard = [\"checkpoint.pt\"]; "
                         f"got {discard!r}.")
    for name in discard:
        if name not in DISCARDABLE:
            raise ValueError(f"{path}: discard={name!r} is not one of {DISCARDABLE}.")
    nproc = spec.get("nproc_per_node", 1)
    if isinstance(nproc, bool) or not isinstance(nproc, int) or nproc < 1:
        raise ValueError(f"{path}: 'nproc_per_node' must be an integer >= 1 (processes per run under torchrun), "
                         f"e.g. nproc_per_node = 2; got {nproc!r}.")


def load_grid(path) -> Grid:
    """Read a grid file (TOML) and expand it into its runs, models x losses x seeds.

    The file::

        description = "Chapter 10's CPU grid"
        store = "."                       # folder of the runs, relative to this file (default: its folder)
        seeds = [0, 1, 2]
        discard = ["checkpoint.pt"]       # files deleted once a run has finished (default: the checkpoint)
        nproc_per_node = 2                # processes per run in `calib sweep --list` (torchrun; default 1)

        [train]                           # TrainConfig fields shared by every run
        data = "fashion-mnist"
        epochs = 20

        models = ["mlp-256-256"]          # (under [train] in TOML terms; write them before [train])
        losses = ["ce", "fl-3", {label = "ce+sb-ece", loss = "ce", secondary = "sb-ece"}]

    A model or loss is a name, or a table with a ``label`` (its folder name) and any TrainConfig fields it
    sets (a loss table without ``loss`` uses its label as the loss name), except those of ``_NOT_IN_TABLE``:
    a loss table sets no ``model`` or ``seed``, a model table no ``loss``, ``secondary``, ``secondary_weight``
    or ``seed``. The runs go to ``<store>/<model label>/<loss label>/seed<k>``. Every key, type and config is
    checked (``TrainConfig.resolved``: names, and every number in its range) when the grid is read, so a typo
    fails before the first run starts, with a message naming the file and the key: unknown keys, seeds that are
    not distinct integers in [0, ``MAX_SEED``], a ``discard`` that is not a list of discardable files, a
    ``secondary_weight`` without a ``secondary`` loss.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"grid file {path} does not exist.")
    try:
        spec = tomllib.loads(path.read_bytes().decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path} is not valid TOML ({exc}); fix the file (TOML is UTF-8 text).") from None
    _check_grid_keys(spec, path)
    shared = dict(spec.get("train", {}))
    bad = sorted(set(shared) - _CONFIG_FIELDS)
    if bad:
        raise ValueError(f"{path}: [train] keys {bad} are not TrainConfig fields; choose from "
                         f"{sorted(_CONFIG_FIELDS)}.")
    if any(k in shared for k in ("model", "loss", "seed")):
        raise ValueError(f"{path}: [train] must not set model, loss or seed; the grid's lists set them.")
    discard = tuple(spec.get("discard", ["checkpoint.pt"]))
    store = (path.parent / spec.get("store", ".")).resolve()
    grid = Grid(path, spec.get("description", ""), store, discard, nproc_per_node=spec.get("nproc_per_node", 1))
    seen = set()
    for model_item in spec["models"]:
        model, model_over = _entry(model_item, "models", path)
        for loss_item in spec["losses"]:
            loss, loss_over = _entry(loss_item, "losses", path)
            for label in (model, loss):
                if not _LABEL.fullmatch(label):
                    raise ValueError(f"{path}: label {label!r} is not a folder name; use lowercase letters, digits "
                                     f"and . + = , _ -")
            if (model, loss) in seen:
                raise ValueError(f"{path}: model {model!r} x loss {loss!r} appears twice.")
            seen.add((model, loss))
            both = sorted(set(model_over) & set(loss_over))
            if both:
                raise ValueError(f"{path}: model {model!r} and loss {loss!r} both set {', '.join(both)}; set it in "
                                 f"one of them (or in [train]).")
            for seed in spec["seeds"]:
                config = TrainConfig(**{**shared, "model": model, "loss": loss, **model_over, **loss_over,
                                        "seed": seed})
                try:
                    config.resolved()
                except ValueError as exc:
                    raise ValueError(f"{path}: run {model}/{loss}/seed{seed}: {exc}") from None
                grid.runs.append(GridRun(model, loss, seed, config, run_path(store, model, loss, seed)))
    return grid


def _cli_flags(config: TrainConfig) -> list[str]:
    """The ``calib train`` flags that reproduce ``config`` (every field that differs from its default)."""
    defaults = TrainConfig(data="", model="", loss="", epochs=1)
    args = []
    for f in fields(TrainConfig):
        value = getattr(config, f.name)
        if f.name not in ("data", "model", "loss", "epochs", "seed") and value == getattr(defaults, f.name):
            continue
        flag = "--" + f.name.replace("_", "-")
        if isinstance(value, bool):
            args.append(flag if value else "--no-" + f.name.replace("_", "-"))
        elif isinstance(value, (tuple, list)):
            args += [flag, *map(str, value)]
        elif value is not None:
            args += [flag, str(value)]
    return args


def train_commands(grid: Grid, relative_to=None, nproc_per_node: int | None = None) -> list[str]:
    """One ``calib train`` command line per run of ``grid`` (with ``--resume``, so a scheduler may rerun an
    interrupted one, and ``--discard`` for the grid's discarded files). Paths are relative to
    ``relative_to`` when given (e.g. the repository root).

    With ``nproc_per_node`` N > 1 (default: the grid's ``nproc_per_node``), each line launches its run across
    N processes of one node, ``torchrun --standalone --nproc_per_node N -m calib train ...``
    (DistributedDataParallel, :mod:`calib.distributed`); N = 1 gives ``calib train ...``.
    """
    nproc = grid.nproc_per_node if nproc_per_node is None else check_int(nproc_per_node, "nproc_per_node")
    launcher = ["calib"] if nproc == 1 else ["torchrun", "--standalone", "--nproc_per_node", str(nproc), "-m", "calib"]
    lines = []
    for run in grid.runs:
        out = run.out if relative_to is None else Path(run.out).relative_to(Path(relative_to).resolve())
        args = [*launcher, "train", *_cli_flags(run.config), "--out", str(out), "--resume", "--no-progress"]
        if grid.discard:
            args += ["--discard", *grid.discard]
        lines.append(shlex.join(args))
    return lines


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    return f"{seconds // 60}m{seconds % 60:02d}s"


def _print_flushed(line: str) -> None:
    print(line, flush=True)


def sweep(grid: Grid, progress: bool = True, only=None, log=None) -> list:
    """Train every run of ``grid`` that is not finished; return the :class:`calib.runs.Run` of each run.

    Finished runs are skipped (read back), interrupted ones resumed from their checkpoint, and runs another
    process is training (their directory is locked) are skipped and not returned. After each run a
    line reports runs done, time so far and the estimated time left (the mean time of the runs trained in
    this sweep times the runs left) through ``log`` (default: print, flushed). ``only`` keeps the runs whose
    ``model/loss/seed<k>`` path contains it.
    """
    if log is None:
        log = _print_flushed
    runs = [r for r in grid.runs if only is None or only in f"{r.model}/{r.loss}/seed{r.seed}"]
    if not runs:
        raise ValueError(f"no run of {grid.path} matches only={only!r}.")
    results, trained_times, start = [], [], time.perf_counter()
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(runs), desc=f"grid {grid.path.name}", unit="run")
    busy = []
    try:
        for i, run in enumerate(runs, 1):
            was_finished = run.finished
            t0 = time.perf_counter()
            resume = (run.out / run_files.CHECKPOINT).is_file() or (run.out / run_files.META).is_file()
            try:
                results.append(train(run.config, run.out, resume=resume, progress=progress, discard=grid.discard))
            except RunLockedError:                        # another worker trains it (e.g. a second sweep)
                busy.append(run)
                if log is not None:
                    log(f"[{i}/{len(runs)}] {run.model}/{run.loss}/seed{run.seed}: being trained by another "
                        f"process, skipped")
                continue
            if not was_finished:
                trained_times.append(time.perf_counter() - t0)
            left = sum(1 for r in runs[i:] if not r.finished)
            eta = (np.mean(trained_times) * left) if trained_times else 0.0
            status = "done before" if was_finished else f"trained in {_duration(trained_times[-1])}"
            if bar is not None:
                bar.update(1)
                bar.set_postfix_str(f"eta {_duration(eta)}")
            if log is not None:
                log(f"[{i}/{len(runs)}] {run.model}/{run.loss}/seed{run.seed}: {status}; "
                    f"elapsed {_duration(time.perf_counter() - start)}, about {_duration(eta)} left")
    finally:
        if bar is not None:
            bar.close()
    if busy and log is not None:
        log(f"{len(busy)} run{'s' if len(busy) > 1 else ''} of the grid {'are' if len(busy) > 1 else 'is'} being "
            f"trained by other processes; run the sweep again once they finish.")
    return results


# ------------------------------------------------------------------------------------------- the store

@dataclass
class StoredRun:
    """A finished run of the store: model and loss labels, seed, directory and ``meta.json``."""

    model: str
    loss: str
    seed: int
    path: Path
    meta: dict

    def logits(self) -> dict:
        """``val_logits``, ``val_labels``, ``test_logits``, ``test_labels`` (float32 logits, int64 labels), read
        without pickles and checked (:func:`calib.runs.read_logits`)."""
        return run_files.read_logits(self.path / run_files.LOGITS)

    @property
    def config(self) -> TrainConfig:
        """The run's training configuration, read back from its ``meta.json``."""
        return config_from_meta(self.path / run_files.META)


def run_path(store, model: str, loss: str, seed: int) -> Path:
    """Where the store keeps one run: ``<store>/<model>/<loss>/seed<seed>`` (ARCHITECTURE.md, "Stored data").

    Parameters
    ----------
    store : path
        The store's folder (e.g. ``book/results/05-miscalibration-dynamics``).
    model, loss : str
        The model and loss labels (folder names).
    seed : int
        The run's seed.
    """
    return Path(store) / model / loss / f"seed{int(seed)}"


def matching_run(path, config: dict):
    """The finished run stored at ``path`` when its config has every value of ``config``, else None.

    A chapter that reads committed runs (and trains the missing ones) asks for the run of a given recipe: the
    run counts only when it finished and was trained with exactly that recipe, so that a stored run of
    another recipe, or an interrupted one, is never read as a result. Values are compared as ``meta.json``
    stores them (a tuple such as ``milestones=(150, 250)`` as a list); keys absent from ``config`` are not
    compared.

    Parameters
    ----------
    path : path
        A run directory (:func:`run_path`).
    config : dict
        :class:`calib.run_config.TrainConfig` fields and their required values, e.g. ``{"model": "resnet50",
        "loss": "fl-3", "seed": 0, "epochs": 350}``.

    Returns
    -------
    calib.runs.Run or None
        The run (:func:`calib.runs.load_run`), or None when ``path`` holds no run, an unfinished one, or a
        run of another config.
    """
    try:
        run = load_run(path)
    except FileNotFoundError:
        return None
    stored = run.config
    same = all(stored.get(k) == (list(v) if isinstance(v, tuple) else v) for k, v in config.items())
    return run if run.finished and same else None


def load_store(root, model: str | None = None) -> list:
    """The finished runs under ``root`` (``<model>/<loss>/seed<k>/`` with meta.json and logits.npz), sorted
    by model, loss and seed. Unfinished runs and runs without logits are left out; a damaged ``meta.json`` or
    ``logits.npz`` of a finished run raises :class:`calib.runs.CorruptRunError` naming the file and the fix
    (:func:`calib.runs.read_logits` checks each logits archive's contents without unpickling anything)."""
    root = Path(root)
    if not root.is_dir():
        raise FileNotFoundError(f"store {root} does not exist; train a grid into it with `calib sweep GRID.toml`.")
    stored = []
    for meta_path in sorted(root.glob(f"*/*/seed*/{run_files.META}")):
        run_dir = meta_path.parent
        m, loss = run_dir.parent.parent.name, run_dir.parent.name
        if model is not None and m != model:
            continue
        if not re.fullmatch(r"seed\d+", run_dir.name):
            continue
        meta = run_files.read_json_object(meta_path, fix=_store_fix(run_dir))
        if not meta.get("finished") or not (run_dir / run_files.LOGITS).is_file():
            continue
        run_files.read_logits(run_dir / run_files.LOGITS, check_only=True)
        stored.append(StoredRun(m, loss, int(run_dir.name[4:]), run_dir, meta))
    return sorted(stored, key=lambda r: (r.model, r.loss, r.seed))


def _store_fix(run_dir: Path) -> str:
    """What to do about a damaged file of a stored run: restore it from git, or delete the run and sweep again."""
    return (f"restore it (git checkout -- {run_dir}), or delete {run_dir} and train it again with `calib sweep "
            f"GRID.toml`")


# ---------------------------------------------------------------------------------- post-hoc and metrics

#: The post-hoc maps of chapter 10, each fitted on the validation logits, in the order of the registry
#: :data:`calib.posthoc.REGISTRY <calib.posthoc.registry.REGISTRY>` (which says what each is, with its paper): none; temperature scaling by
#: validation NLL; by the validation-ECE grid (Mukhoti et al. 2020); focal temperature scaling (Komisarenko & Kull
#: 2024); Psi^gamma with the training gamma (fixed-gamma focal losses only); temperature scaling by SB-ECE
#: (Karandikar et al. 2021).
POSTHOC_MAPS = map_names()
#: The test metrics of chapter 10 (15 bins for the binned ones), in the order of the registry
#: :data:`calib.metrics.REGISTRY <calib.metrics.registry.REGISTRY>` (which says what each is, with its paper). ``ece`` is equal-width (Mukhoti et
#: al.'s ECE), ``adaece`` equal-mass (their AdaECE, and Komisarenko & Kull's ECE), ``ece_em_l2`` the equal-mass
#: l2 ECE that Karandikar et al. (2021) report, ``mean_confidence`` the mean top-label confidence.
METRICS = metric_names()


def loss_gamma(loss: str) -> float | None:
    """The fixed gamma of a focal-loss label (``"fl-3"`` -> 3.0), or None for any other loss; the loss registry
    decides (:func:`calib.posthoc.focal_loss_gamma <calib.posthoc.registry.focal_loss_gamma>`)."""
    return focal_loss_gamma(loss)


def fit_posthoc(name: str, val_logits, val_labels, loss: str | None = None) -> FittedMap:
    """Fit the post-hoc map ``name`` (one of :data:`POSTHOC_MAPS`, :func:`calib.posthoc.get_map <calib.posthoc.registry.get_map>`) on validation
    logits; a :class:`calib.posthoc.FittedMap <calib.posthoc.registry.FittedMap>`.

    ``"psi"`` needs ``loss`` to be a fixed-gamma focal loss (``fl-<gamma>``) and raises ValueError otherwise.
    """
    return get_map(name)(val_logits, val_labels, loss)


def score_probabilities(probs, labels, n_bins: int = 15, log_probs=None) -> dict:
    """Every metric of :data:`METRICS` (:data:`calib.metrics.REGISTRY <calib.metrics.registry.REGISTRY>`) for probabilities (N, K) and labels (N,).
    With ``log_probs`` (the logarithms of ``probs``, e.g. a log-softmax) a metric that can be computed from them
    is (the NLL), so a true-class probability that underflowed to 0 in float64 still has its finite log-loss."""
    return {spec.name: (spec.from_log_probs(log_probs, labels) if log_probs is not None and spec.from_log_probs
                        else spec(probs, labels, n_bins)) for spec in metrics.REGISTRY}


def evaluate_run(run: StoredRun, maps=POSTHOC_MAPS) -> list:
    """Long-format rows ``{model, loss, seed, map, metric, value}`` (plus ``temperature`` and ``gamma`` of
    the fitted map) for one stored run: each map of ``maps`` fitted on validation, scored on test. A map that does
    not apply to the run's loss (the ``applies`` of its :class:`~calib.posthoc.registry.MapSpec`: ``psi`` without a fixed gamma) is skipped."""
    arrays = run.logits()
    rows = []
    for name in maps:
        if not get_map(name).applies(run.loss):
            continue
        fitted = fit_posthoc(name, arrays["val_logits"], arrays["val_labels"], run.loss)
        params, test = fitted.params, arrays["test_logits"]
        scores = score_probabilities(fitted.proba(test), arrays["test_labels"], log_probs=fitted.log_proba(test))
        for metric, value in scores.items():
            rows.append({"model": run.model, "loss": run.loss, "seed": run.seed, "map": name, "metric": metric,
                         "value": float(value), "temperature": params.get("temperature"),
                         "gamma": params.get("gamma")})
    return rows


def _sha256(path: Path) -> str:
    import hashlib

    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def evaluate_store(runs, maps=POSTHOC_MAPS, cache=None, progress: bool = True, write_cache: bool = True) -> list:
    """:func:`evaluate_run` over ``runs`` (from :func:`load_store`), concatenated.

    ``cache`` is a JSON file of earlier results, one entry per run keyed by ``model/loss/seed<k>``, holding
    the SHA-256 of the run's ``logits.npz``, the maps, their definitions (each :class:`~calib.posthoc.registry.MapSpec`'s
    summary, which states its grid) and the rows. An entry is used only when the hash, the maps and their
    definitions match, so a cache can be committed beside the store it describes (chapter 10 does: fitting focal
    temperature scaling on 52 runs takes minutes) and can never describe other logits or an older map. Runs without a
    matching entry are evaluated, and the cache is rewritten when ``write_cache``.
    """
    cached = {}
    if cache is not None and Path(cache).is_file():
        try:
            cached = json.loads(Path(cache).read_text()).get("runs", {})
        except (json.JSONDecodeError, AttributeError):
            cached = {}
    iterator = runs
    if progress:
        from tqdm.auto import tqdm

        iterator = tqdm(runs, desc="post-hoc maps", unit="run")
    rows, entries, n_fresh = [], {}, 0
    definitions = [get_map(name).summary for name in maps]
    for run in iterator:
        key = f"{run.model}/{run.loss}/seed{run.seed}"
        digest = _sha256(run.path / "logits.npz")
        entry = cached.get(key)
        if (not entry or entry.get("sha256") != digest or entry.get("maps") != list(maps)
                or entry.get("definitions") != definitions):
            entry = {"sha256": digest, "maps": list(maps), "definitions": definitions,
                     "rows": evaluate_run(run, maps)}
            n_fresh += 1
        entries[key] = entry
        rows += entry["rows"]
    if cache is not None and write_cache and n_fresh:
        Path(cache).parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(cache).with_name(Path(cache).name + ".tmp")
        tmp.write_text(json.dumps({"about": "calib.experiments.evaluate_store: post-hoc maps fitted on each run's "
                                            "validation logits, scored on its test logits", "runs": entries},
                                  indent=0, sort_keys=True))
        tmp.replace(cache)
    return rows


def validation_choice(candidates: dict, accuracy_tolerance: float = 0.01) -> str:
    """The tuning rule of chapter 10: among ``candidates`` (``label -> (validation accuracy, validation ECE)``),
    the lowest validation ECE among those whose accuracy is within ``accuracy_tolerance`` of the best
    candidate's accuracy (ties: the first label). Test numbers never enter."""
    if not candidates:
        raise ValueError("validation_choice needs at least one candidate (label -> (accuracy, ece)).")
    best_acc = max(acc for acc, _ in candidates.values())
    eligible = {k: ece for k, (acc, ece) in candidates.items() if acc >= best_acc - accuracy_tolerance}
    return min(eligible, key=eligible.get)


def final_validation(path) -> tuple[float, float]:
    """(accuracy, ECE) on the validation split after the last epoch of the run in ``path`` (history.json)."""
    run = load_run(path)
    if not run.epochs:
        raise ValueError(f"{path} has no epochs in history.json; train it first.")
    last = run.epochs[-1]["val"]
    return float(last["accuracy"]), float(last["ece"])


#: The rise of the NLL after the first learning-rate drop that counts as "rising" (Mukhoti et al. 2020, Fig. 1):
#: the last epoch's NLL exceeds the lowest NLL reached after the drop by at least this fraction of it.
NLL_RISE_FRACTION = 0.05


@dataclass(frozen=True)
class OverconfidenceProfile:
    """How over-confident a finished run is: the premise of the papers' empirical claims (chapter 10).

    ``temperature`` is temperature scaling's NLL-fitted temperature on the validation logits (Guo et al. 2017;
    the papers' cross-entropy networks give about 2.0-2.8, Mukhoti et al. 2020, Table 2); ``ece`` (15 bins),
    ``confidence`` and ``accuracy`` are those of the unscaled validation predictions; ``nll_at_drop``,
    ``nll_min_after_drop`` and ``nll_final`` trace the per-epoch NLL of ``split`` around the first learning-rate
    drop, and ``nll_rises`` says whether it rose after it (:data:`NLL_RISE_FRACTION`).
    """

    temperature: float
    ece: float
    confidence: float
    accuracy: float
    nll_at_drop: float
    nll_min_after_drop: float
    nll_final: float
    nll_rises: bool
    split: str

    @property
    def overconfident(self) -> bool:
        """Confidence above accuracy on the validation split."""
        return self.confidence > self.accuracy


def overconfidence_profile(path, split: str = "val") -> OverconfidenceProfile:
    """The :class:`OverconfidenceProfile` of the finished run in ``path``, from its validation logits and the
    per-epoch NLL of ``split`` ("val" or "test") in its history.

    Reads the validation logits only (``calib.runs.read_logits(..., splits=("val",))``), so it applies to a
    tuning run stored without test logits; the NLL trace needs a history recorded with ``diagnostics`` "eval"
    or "full" and a learning-rate schedule with at least one milestone.
    """
    if split not in ("val", "test"):
        raise ValueError(f"split={split!r}: choose 'val' (tuning: no test number enters) or 'test'.")
    run = load_run(path)
    if not run.finished:
        raise ValueError(f"{path}: the run is not finished; finish it (calib train ... --resume) first.")
    milestones = run.config.get("milestones") or []
    if not milestones:
        raise ValueError(f"{path}: the run has no learning-rate milestone, so there is no drop to trace the NLL "
                         "after; train with --milestones.")
    nll = [epoch.get(split, {}).get("nll") for epoch in run.epochs]
    if any(v is None for v in nll):
        raise ValueError(f"{path}: history.json has no per-epoch {split} NLL; train with --diagnostics eval or full.")
    drop = int(milestones[0])
    if not 0 < drop < len(nll):
        raise ValueError(f"{path}: the first milestone ({drop}) is not inside the run's {len(nll)} epochs.")
    arrays = run_files.read_logits(Path(path) / run_files.LOGITS, splits=("val",))
    z, y = arrays["val_logits"].astype(np.float64), arrays["val_labels"]
    fitted = get_map("ts-nll")(z, y)
    z = z - z.max(axis=1, keepdims=True)
    probs = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)
    after = nll[drop:]
    low = float(min(after))
    return OverconfidenceProfile(
        temperature=float(fitted.params["temperature"]), ece=float(metrics.ece(probs, y)),
        confidence=float(probs.max(axis=1).mean()), accuracy=float((probs.argmax(axis=1) == y).mean()),
        nll_at_drop=float(nll[drop - 1]), nll_min_after_drop=low, nll_final=float(nll[-1]),
        nll_rises=bool(nll[-1] > (1 + NLL_RISE_FRACTION) * low), split=split)


def stored_evaluation(cache) -> list:
    """The rows of a committed post-hoc evaluation (the ``cache`` file of :func:`evaluate_store`) without the
    runs' logits: how chapter 10 reads a grid whose logits were dropped to keep the store small. Nothing is
    refitted, so nothing here checks that the rows still describe any logits; :func:`evaluate_store` does,
    where the logits exist."""
    path = Path(cache)
    try:
        entries = json.loads(path.read_text()).get("runs")
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: no stored evaluation; write one with `calib sweep GRID.toml "
                                "--evaluate`.") from None
    except (json.JSONDecodeError, AttributeError, UnicodeDecodeError):
        entries = None
    if not isinstance(entries, dict) or not all(isinstance(e, dict) and isinstance(e.get("rows"), list)
                                                 for e in entries.values()):
        raise ValueError(f"{path} is not an evaluation written by calib.experiments.evaluate_store (an object "
                         "with 'runs': {key: {'rows': [...]}}); rewrite it with `calib sweep GRID.toml --evaluate`.")
    return [row for key in sorted(entries) for row in entries[key]["rows"]]


# -------------------------------------------------------------------------------------- across seeds

def _select(rows, **where) -> list:
    return [r for r in rows if all(r[k] == v for k, v in where.items())]


def metric_values(rows, loss: str, map: str, metric: str, model: str | None = None, key: str = "value") -> np.ndarray:
    """One metric of one loss under one post-hoc map, per seed (sorted by seed): ``key="value"`` for the
    metric, ``"temperature"`` or ``"gamma"`` for the fitted parameter of the map (NaN where it has none)."""
    extra = {} if model is None else {"model": model}
    by_seed = {r["seed"]: r[key] for r in _select(rows, loss=loss, map=map, metric=metric, **extra)}
    if not by_seed:
        raise ValueError(f"no rows for loss={loss!r}, map={map!r}, metric={metric!r}"
                         + (f", model={model!r}" if model else "") + ".")
    return np.array([np.nan if by_seed[s] is None else by_seed[s] for s in sorted(by_seed)], dtype=np.float64)


def mean_std_text(values, scale: float = 100.0, digits: int = 2) -> str:
    """``"mean ± std"`` of per-seed values (std with ddof=1), times ``scale`` (100: percent)."""
    v = np.asarray(values, dtype=np.float64) * scale
    std = np.std(v, ddof=1) if v.size > 1 else float("nan")
    return f"{v.mean():.{digits}f} ± {std:.{digits}f}"


def pooled_test_probabilities(runs, loss: str) -> tuple[np.ndarray, np.ndarray]:
    """Float64 softmax test probabilities and labels of every stored run of ``loss``, stacked over seeds
    (the seeds share one test set, so the stack is that test set seen by each seed's network)."""
    from scipy.special import softmax

    probs, labels = [], []
    for run in runs:
        if run.loss == loss:
            arrays = run.logits()
            probs.append(softmax(arrays["test_logits"].astype(np.float64), axis=1))
            labels.append(arrays["test_labels"])
    if not probs:
        raise ValueError(f"no stored run of loss {loss!r}.")
    return np.concatenate(probs), np.concatenate(labels)


def summarise(rows, metric: str, map: str = "none", model: str | None = None) -> dict:
    """``{loss: (mean, std, n)}`` over seeds of one metric under one post-hoc map (std with ddof=1)."""
    out = {}
    for r in _select(rows, metric=metric, map=map, **({} if model is None else {"model": model})):
        out.setdefault(r["loss"], []).append(r["value"])
    return {loss: (float(np.mean(v)), float(np.std(v, ddof=1)) if len(v) > 1 else float("nan"), len(v))
            for loss, v in out.items()}


def paired_difference(rows, metric: str, a: tuple, b: tuple, model: str | None = None, level: float = 0.95):
    """The seed-paired interval of ``metric(a) - metric(b)``, where ``a`` and ``b`` are ``(loss, map)``
    pairs (:func:`calib.stats.paired_seed_interval`); seeds present in both."""
    from calib.stats import paired_seed_interval

    extra = {} if model is None else {"model": model}
    va = {r["seed"]: r["value"] for r in _select(rows, metric=metric, loss=a[0], map=a[1], **extra)}
    vb = {r["seed"]: r["value"] for r in _select(rows, metric=metric, loss=b[0], map=b[1], **extra)}
    seeds = sorted(set(va) & set(vb))
    if len(seeds) < 2:
        raise ValueError(f"paired_difference needs at least 2 seeds with both {a} and {b} for {metric!r}; "
                         f"found {len(seeds)}.")
    return paired_seed_interval([va[s] for s in seeds], [vb[s] for s in seeds], level=level)
