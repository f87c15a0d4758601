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
back, and :func:`matching_run` reads one stored run when it is the run a chapter asks for; :func:`evaluate_store` fits
every post-hoc map of :data:`POSTHOC_MAPS` on a run's validation logits and scores the test logits with every metric of
:data:`METRICS`, giving one row per (run, map, metric): the long format that :func:`summarise` and
:func:`paired_difference` turn into the chapter's tables and intervals. The papers' own tables
(:mod:`calib.published.tables`) come in the same long format through
:func:`calib.published.tables.published_rows`.
"""

from __future__ import annotations

import json
import os
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
from calib.published.tables import published_rows, read_published
from calib.runs import DISCARDABLE, RunLockedError, load_run
from calib.train import MAX_SEED, TrainConfig, Trainer, config_from_meta

__all__ = ["GridRun", "Grid", "load_grid", "sweep", "RunsHeldError", "train_commands", "StoredRun", "run_path",
           "load_store",
           "matching_run", "POSTHOC_MAPS",
           "METRICS", "fit_posthoc", "score_probabilities", "evaluate_run", "evaluate_store", "summarise",
           "paired_difference", "loss_gamma", "validation_choice", "final_validation", "OverconfidenceProfile",
           "overconfidence_profile", "NLL_RISE_FRACTION", "stored_evaluation", "metric_values", "mean_std_text",
           "pooled_test_probabilities", "read_published", "published_rows"]

#: Characters allowed in a model or loss label (they become folder names of the store).
_LABEL = re.compile(r"[a-z0-9][a-z0-9.+=,_-]*")
#: Keys of a grid file outside the shared training recipe.
_GRID_KEYS = {"description", "store", "seeds", "discard", "nproc_per_node", "note", "train", "models", "losses",
              "weights"}
_CONFIG_FIELDS = {f.name for f in fields(TrainConfig)}
#: The keys every grid file needs at its top level, each with an example line.
_REQUIRED_LISTS = {"seeds": "seeds = [0, 1, 2]", "models": 'models = ["mlp-256-256"]',
                   "losses": 'losses = ["ce", "fl-3"]'}
#: The TrainConfig fields every run needs besides its model, loss and seed (in [train], or in a model or loss
#: entry), each with an example line.
_REQUIRED_TRAIN = {"data": 'data = "fashion-mnist"', "epochs": "epochs = 20"}


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
    more than one); :func:`sweep` trains each run in its own process. ``note`` (empty for none) is the sentence
    :func:`sweep` records in each run's ``meta.json`` (e.g. that the grid compresses the papers' schedule).
    ``weights`` (None, "float16" or "float32") makes each run keep its final network (``weights.npz``).
    """

    path: Path
    description: str
    store: Path
    discard: tuple
    runs: list = field(default_factory=list)
    nproc_per_node: int = 1
    note: str = ""
    weights: str | None = None

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
_NOT_IN_TABLE = {"models": ("loss", "secondary", "secondary_weight", "interleave", "seed"), "losses": ("model", "seed")}


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
        fields_here = [k for k in unknown if k in _CONFIG_FIELDS]
        hint = (f" ({', '.join(fields_here)}: a training setting; write it under [train])" if fields_here else "")
        raise ValueError(f"{path}: unknown keys {unknown}{hint}; a grid has {sorted(_GRID_KEYS)}.")
    train = spec.get("train")
    for key, example in _REQUIRED_LISTS.items():
        if key not in spec and isinstance(train, dict) and key in train:
            raise ValueError(f"{path}: '{key}' is inside the [train] table (in TOML every line after [train] belongs "
                             f"to it); move the line `{key} = ...` above [train].")
        if key not in spec:
            raise ValueError(f"{path}: the grid has no '{key}', which it needs; add a line such as `{example}` "
                             f"above [train].")
        if not isinstance(spec[key], list) or not spec[key]:
            raise ValueError(f"{path}: '{key}' must be a non-empty list, e.g. `{example}`; got {spec[key]!r}.")
    for key in ("description", "store", "note"):
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
    weights = spec.get("weights")
    if weights is not None and weights not in run_files.WEIGHT_DTYPES:
        raise ValueError(f"{path}: 'weights' must be one of {', '.join(map(repr, run_files.WEIGHT_DTYPES))} (the "
                         f"float type in which each run keeps its final network, weights.npz); got {weights!r}.")
    nproc = spec.get("nproc_per_node", 1)
    if isinstance(nproc, bool) or not isinstance(nproc, int) or nproc < 1:
        raise ValueError(f"{path}: 'nproc_per_node' must be an integer >= 1 (processes per run under torchrun), "
                         f"e.g. nproc_per_node = 2; got {nproc!r}.")


def load_grid(path) -> Grid:
    """Read a grid file (TOML) and expand it into its runs, models x losses x seeds.

    The file::

        description = "Chapter 10's CPU grid"
        store = "."                       # folder of the runs, relative to this file (default: its folder)
        seeds = [0, 1, 2]                 # required
        models = ["mlp-256-256"]          # required
        losses = ["ce", "fl-3", {label = "ce+sb-ece", loss = "ce", secondary = "sb-ece"}]   # required
        discard = ["checkpoint.pt"]       # files deleted once a run has finished (default: the checkpoint)
        nproc_per_node = 2                # processes per run in `calib sweep --list` (torchrun; default 1)
        weights = "float16"               # each run also keeps its final network, weights.npz (default: not)
        note = "60 epochs: the papers' 350 compressed"   # recorded in each run's meta.json by calib sweep

        [train]                           # TrainConfig fields shared by every run; data and epochs required
        data = "fashion-mnist"
        epochs = 20

    Every top-level key comes before ``[train]``: in TOML, each line after ``[train]`` belongs to that table.

    A model or loss is a name, or a table with a ``label`` (its folder name) and any TrainConfig fields it
    sets (a loss table without ``loss`` uses its label as the loss name), except those of ``_NOT_IN_TABLE``:
    a loss table sets no ``model`` or ``seed``, a model table no ``loss``, ``secondary``, ``secondary_weight``
    or ``seed``. The runs go to ``<store>/<model label>/<loss label>/seed<k>``. Every key, type and config is
    checked (``TrainConfig.resolved``: names, and every number in its range) when the grid is read, so a typo
    fails before the first run starts, with a message naming the file and the key: unknown keys (and the known
    ones), a missing ``seeds``, ``models`` or ``losses`` (or one written under ``[train]``), a ``[train]`` without
    ``data`` or ``epochs`` (unless every model or loss entry sets it), seeds that are not distinct integers in [0,
    ``MAX_SEED``], a ``discard`` that is not a list of discardable files, a ``secondary_weight`` without a
    ``secondary`` loss. A folder given for the file is named as one, with the grid files it holds.
    """
    path = Path(path)
    if path.is_dir():
        found = sorted(p.name for p in path.glob("*.toml") if p.is_file())
        listing = (f"it holds {', '.join(found)}: e.g. calib sweep {path / found[0]}" if found
                   else "it holds no .toml file")
        raise IsADirectoryError(f"grid {path} is a folder, not a grid file: calib sweep expects a grid TOML file "
                                f"(models x losses x seeds, e.g. book/results/10-benchmark/grid-cpu.toml); {listing}.")
    if path.is_symlink() and not path.exists():
        raise FileNotFoundError(f"grid file {path} is a dangling symlink (to {os.readlink(path)}, which does not "
                                f"exist); point it at a grid TOML file, or name the file itself.")
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
    grid = Grid(path, spec.get("description", ""), store, discard, nproc_per_node=spec.get("nproc_per_node", 1),
                note=spec.get("note", "").strip(), weights=spec.get("weights"))
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
            missing = [k for k in _REQUIRED_TRAIN if k not in {**shared, **model_over, **loss_over}]
            if missing:
                lines = " and ".join(f"`{_REQUIRED_TRAIN[k]}`" for k in missing)
                them = "them" if len(missing) > 1 else "it"
                raise ValueError(f"{path}: [train] has no {' and no '.join(missing)}, which every run needs, and "
                                 f"neither the model nor the loss entry of run {model}/{loss} sets {them}; add {lines} "
                                 f"under {'[train]' if 'train' in spec else 'a [train] table at the end of the file'}.")
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
        if grid.weights:
            args += ["--weights", grid.weights]
        lines.append(shlex.join(args))
    return lines


def _duration(seconds: float | np.floating) -> str:
    seconds = int(round(seconds))
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    return f"{seconds // 60}m{seconds % 60:02d}s"


def _print_flushed(line: str) -> None:
    print(line, flush=True)


class RunsHeldError(RunLockedError):
    """:func:`sweep` left runs of its grid untrained because other processes held them (were training them).

    ``held`` lists those runs (each a :class:`GridRun`), ``holders`` the holder of each (its lock file's line: pid,
    host, since when), and ``runs`` the :class:`calib.runs.Run` of every other run of the sweep, all finished.
    """

    def __init__(self, message: str, held=(), holders=(), runs=()):
        super().__init__(message)
        self.held, self.holders, self.runs = list(held), list(holders), list(runs)


def _run_name(run: GridRun) -> str:
    return f"{run.model}/{run.loss}/seed{run.seed}"


def sweep(grid: Grid, progress: bool = True, only=None, log=None, wait: bool = False,
          poll_seconds: float = 10.0) -> list:
    """Train every run of ``grid`` that is not finished; return the :class:`calib.runs.Run` of each run, in grid
    order, every one finished.

    Finished runs are read back, interrupted ones resumed from their checkpoint. Each run is claimed through its
    folder's lock (:class:`calib.runs.RunLock`), so sweeps of one store in several processes (or machines sharing
    it) share the work and never train a run twice: a run another process holds is skipped, said so, and left to
    it. Once every other run is done, those runs either end the sweep with :class:`RunsHeldError` naming them and
    their holders (``wait=False``, the default: nothing is returned as finished that is not), or, with ``wait``,
    are checked every ``poll_seconds`` until each is finished by its holder or free (its holder died), and then
    read back or resumed here. After each run a line reports runs done, time so far and the estimated time left
    (the mean time of the runs trained in this sweep times the runs left) through ``log`` (default: print,
    flushed). ``only`` keeps the runs whose ``model/loss/seed<k>`` path contains it.
    """
    if log is None:
        log = _print_flushed
    runs = [r for r in grid.runs if only is None or only in _run_name(r)]
    if not runs:
        raise ValueError(f"no run of {grid.path} matches only={only!r}.")
    if not isinstance(poll_seconds, (int, float)) or isinstance(poll_seconds, bool) or not poll_seconds > 0:
        raise ValueError(f"poll_seconds must be a number of seconds > 0; got {poll_seconds!r}.")
    results, held, trained_times, start = {}, {}, [], time.perf_counter()
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(runs), desc=f"grid {grid.path.name}", unit="run")

    def attempt(i: int) -> None:
        """Claim run ``i`` (its folder's lock) and train, resume or read it back; note it as held when another
        process holds the lock."""
        run, t0 = runs[i], time.perf_counter()
        trainer = Trainer(run.config, run.out, progress=progress, note=grid.note or None)
        try:                                         # resume: a folder without a run starts a new one
            results[i] = trainer.run(resume=True, discard=grid.discard, weights=grid.weights)
        except RunLockedError as exc:                # another process trains it (e.g. a second sweep)
            if i not in held:
                log(f"[{i + 1}/{len(runs)}] {_run_name(run)}: being trained by another process "
                    f"({exc.holder or 'its lock file says not which'}), skipped")
            held[i] = exc.holder or "another process"
            return
        held.pop(i, None)
        if trainer.found != "done":                  # trained here, not by another process meanwhile
            trained_times.append(time.perf_counter() - t0)
        left = sum(1 for j, r in enumerate(runs) if j not in results and not r.finished)
        eta = (np.mean(trained_times) * left) if trained_times else 0.0
        status = "done before" if trainer.found == "done" else f"trained in {_duration(trained_times[-1])}"
        if bar is not None:
            bar.update(1)
            bar.set_postfix_str(f"eta {_duration(eta)}")
        log(f"[{i + 1}/{len(runs)}] {_run_name(run)}: {status}; elapsed {_duration(time.perf_counter() - start)}, "
            f"about {_duration(eta)} left")

    try:
        for i in range(len(runs)):
            attempt(i)
        for i in sorted(held):                       # finished (or left) by their holders meanwhile?
            attempt(i)
        waiting = None
        while held and wait:
            if waiting != set(held):
                waiting = set(held)
                log(f"waiting for {len(held)} run{'s' if len(held) > 1 else ''} that other processes hold: "
                    f"{', '.join(_run_name(runs[i]) for i in sorted(held))} (checked every {poll_seconds:g} s)")
            time.sleep(poll_seconds)
            for i in sorted(held):
                attempt(i)
    finally:
        if bar is not None:
            bar.close()
    if held:
        names = "; ".join(f"{_run_name(runs[i])} ({held[i]})" for i in sorted(held))
        n = len(held)
        raise RunsHeldError(
            f"{n} of the {len(runs)} runs of {grid.path} {'were' if n > 1 else 'was'} being trained by another "
            f"process and not trained here: {names}; the other {len(runs) - n} are finished. Run the sweep again "
            f"once {'they finish' if n > 1 else 'it finishes'}, or wait for {'them' if n > 1 else 'it'} (calib sweep "
            f"--wait, sweep(..., wait=True)).",
            held=[runs[i] for i in sorted(held)], holders=[held[i] for i in sorted(held)],
            runs=[results[i] for i in sorted(results)])
    return [results[i] for i in sorted(results)]


# ------------------------------------------------------------------------------------------- the store

@dataclass
class StoredRun:
    """A finished run of the store: model and loss labels, seed, directory and ``meta.json``."""

    model: str
    loss: str
    seed: int
    path: Path
    meta: dict

    def logits(self, splits: tuple = ("val", "test")) -> dict:
        """``val_logits``, ``val_labels``, ``test_logits``, ``test_labels`` (float32 logits, int64 labels), read
        without pickles and checked (:func:`calib.runs.read_logits`); ``splits=("test",)`` reads the test arrays
        only."""
        return run_files.read_logits(self.path / run_files.LOGITS, splits=splits)

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
    by model, loss and seed (a run's logits of either split or both: :func:`calib.runs.stored_splits`). Unfinished
    runs and runs without logits are left out; a damaged ``meta.json`` or
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
        logits = run_dir / run_files.LOGITS
        run_files.read_logits(logits, check_only=True, splits=run_files.stored_splits(logits))
        stored.append(StoredRun(m, loss, int(run_dir.name[4:]), run_dir, meta))
    return sorted(stored, key=lambda r: (r.model, r.loss, r.seed))


def _store_fix(run_dir: Path) -> str:
    """What to do about a damaged file of a stored run: restore it from git, or delete the run and sweep again."""
    return (f"restore it (git checkout -- {run_dir}), or delete {run_dir} and train it again with `calib sweep "
            f"GRID.toml`")


# ---------------------------------------------------------------------------------- post-hoc and metrics

#: The post-hoc maps of chapter 10, each fitted on the validation logits, in the order of the registry
#: :data:`calib.posthoc.REGISTRY <calib.posthoc.registry.REGISTRY>` (which says what each is, with its paper): none;
#: temperature scaling by validation NLL; by the validation-ECE grid (Mukhoti et al. 2020); focal temperature scaling
#: (Komisarenko & Kull 2024); Psi^gamma with the training gamma (fixed-gamma focal losses only); temperature scaling by
#: SB-ECE (Karandikar et al. 2021).
POSTHOC_MAPS = map_names()
#: The test metrics of chapter 10 (15 bins for the binned ones), in the order of the registry
#: :data:`calib.metrics.REGISTRY <calib.metrics.registry.REGISTRY>` (which says what each is, with its paper). ``ece``
#: is equal-width (Mukhoti et al.'s ECE), ``adaece`` equal-mass (their AdaECE, and Komisarenko & Kull's ECE),
#: ``ece_em_l2`` the equal-mass l2 ECE that Karandikar et al. (2021) report, ``mean_confidence`` the mean top-label
#: confidence.
METRICS = metric_names()


def loss_gamma(loss: str) -> float | None:
    """The fixed gamma of a focal-loss label (``"fl-3"`` -> 3.0), or None for any other loss; the loss registry
    decides (:func:`calib.posthoc.focal_loss_gamma <calib.posthoc.registry.focal_loss_gamma>`)."""
    return focal_loss_gamma(loss)


def fit_posthoc(name: str, val_logits, val_labels, loss: str | None = None) -> FittedMap:
    """Fit the post-hoc map ``name`` (one of :data:`POSTHOC_MAPS`,
    :func:`calib.posthoc.get_map <calib.posthoc.registry.get_map>`) on validation logits; a
    :class:`calib.posthoc.FittedMap <calib.posthoc.registry.FittedMap>`.

    ``"psi"`` needs ``loss`` to be a fixed-gamma focal loss (``fl-<gamma>``) and raises ValueError otherwise.
    """
    return get_map(name)(val_logits, val_labels, loss)


def score_probabilities(probs, labels, n_bins: int = 15, log_probs=None) -> dict:
    """Every metric of :data:`METRICS` (:data:`calib.metrics.REGISTRY <calib.metrics.registry.REGISTRY>`) for
    probabilities (N, K) and labels (N,).
    With ``log_probs`` (the logarithms of ``probs``, e.g. a log-softmax) a metric that can be computed from them
    is (the NLL), so a true-class probability that underflowed to 0 in float64 still has its finite log-loss."""
    return {spec.name: (spec.from_log_probs(log_probs, labels) if log_probs is not None and spec.from_log_probs
                        else spec(probs, labels, n_bins)) for spec in metrics.REGISTRY}


def evaluate_run(run: StoredRun, maps=POSTHOC_MAPS) -> list:
    """Long-format rows ``{model, loss, seed, map, metric, value}`` (plus ``temperature`` and ``gamma`` of
    the fitted map) for one stored run: each map of ``maps`` fitted on validation, scored on test. A map that does
    not apply to the run's loss (the ``applies`` of its :class:`~calib.posthoc.registry.MapSpec`: ``psi`` without a
    fixed gamma) is skipped."""
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
    the SHA-256 of the run's ``logits.npz``, the maps, their definitions (each
    :class:`~calib.posthoc.registry.MapSpec`'s summary, which states its grid) and the rows. An entry is used only when
    the hash, the maps and their definitions match, so a cache can be committed beside the store it describes (chapter
    10 does: fitting focal temperature scaling on 52 runs takes minutes) and can never describe other logits or an older
    map. Runs without a matching entry are evaluated, and the cache is rewritten when ``write_cache``.
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
        text = json.dumps({"about": "calib.experiments.evaluate_store: post-hoc maps fitted on each run's validation "
                                    "logits, scored on its test logits", "runs": entries}, indent=0, sort_keys=True)
        # a temporary of this writer's own: two sweeps evaluating one store at once each write a whole file
        run_files.write_atomic(cache, lambda tmp: Path(tmp).write_text(text))
    return rows


def validation_choice(candidates: dict, accuracy_tolerance: float = 0.01) -> str:
    """The tuning rule of chapter 10: among ``candidates`` (``label -> (validation accuracy, validation ECE)``),
    the lowest validation ECE among those whose accuracy is within ``accuracy_tolerance`` of the best
    candidate's accuracy (ties: the first label). Test numbers never enter."""
    if not candidates:
        raise ValueError("validation_choice needs at least one candidate (label -> (accuracy, ece)).")
    best_acc = max(acc for acc, _ in candidates.values())
    eligible = {k: ece for k, (acc, ece) in candidates.items() if acc >= best_acc - accuracy_tolerance}
    return min(eligible, key=eligible.__getitem__)


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
    out: dict[str, list[float]] = {}
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


# -------------------------------------------------------------------------------------- failed runs, fitted maps

__all__ += ["TRAINS_WITHIN", "failed_runs", "fitted_map"]

#: How far below the reference loss's test accuracy on the same seed a run may fall and still count as trained
#: (5 points): the book's rule for a failed run (``calib.stats``, point 1; chapters 10 and 11).
TRAINS_WITHIN = 0.05


def failed_runs(rows, reference: str = "ce", tolerance: float = TRAINS_WITHIN, model: str | None = None) -> dict:
    """The runs of an evaluation (:func:`evaluate_store`'s rows) that did not train, by loss and seed.

    A run failed when its test accuracy (map ``"none"``) is more than ``tolerance`` below that of ``reference``
    on the same seed, or is not finite (a diverged run). Failed runs are shown apart and never averaged in; a
    comparison that needs them is untested (the book's procedure, :mod:`calib.stats`, point 1).

    Returns ``{loss: {seed: accuracy}}`` for the losses with at least one failed run (the reference never
    appears: it is the yardstick). Raises ValueError when the reference has no runs, or a finite accuracy on
    fewer seeds than a loss it is compared with.
    """
    tolerance = float(tolerance)
    if not np.isfinite(tolerance) or not 0.0 <= tolerance < 1.0:
        raise ValueError(f"tolerance must be an accuracy gap in [0, 1), e.g. {TRAINS_WITHIN} (5 points); got "
                         f"{tolerance}.")
    extra = {} if model is None else {"model": model}
    accuracy: dict = {}
    for r in _select(rows, map="none", metric="accuracy", **extra):
        value = r["value"]
        accuracy.setdefault(r["loss"], {})[r["seed"]] = float("nan") if value is None else float(value)
    if reference not in accuracy:
        raise ValueError(f"reference={reference!r} has no accuracy rows (map 'none')"
                         + (f" for model={model!r}" if model else "") + "; give a loss of the grid, e.g. 'ce'.")
    ref = accuracy[reference]
    broken = sorted(s for s, v in ref.items() if not np.isfinite(v))
    if broken:
        raise ValueError(f"the reference {reference!r} diverged on seed(s) {broken}: no yardstick for those seeds; "
                         "rerun them or choose another reference.")
    out = {}
    for loss, by_seed in accuracy.items():
        if loss == reference:
            continue
        missing = sorted(set(by_seed) - set(ref))
        if missing:
            raise ValueError(f"loss {loss!r} has runs on seed(s) {missing} that {reference!r} lacks: no yardstick "
                             "for them.")
        failed = {s: v for s, v in sorted(by_seed.items()) if not (np.isfinite(v) and v >= ref[s] - tolerance)}
        if failed:
            out[loss] = failed
    return out


def fitted_map(rows, loss: str, seed: int, map: str, model: str | None = None) -> FittedMap:
    """The post-hoc map ``map`` as it was fitted to the run of ``loss`` and ``seed``, read back from an evaluation
    (:func:`evaluate_store`'s rows, or :func:`stored_evaluation`'s): its stored temperature and gamma, nothing
    refitted. ``fitted_map(...).proba(test_logits)`` gives the test probabilities the stored metrics were computed
    from, per sample, for an interval that carries the test set's noise (:func:`calib.stats.seed_test_interval`).
    """
    if map not in map_names():
        raise ValueError(f"map={map!r} is not a post-hoc map; choose one of {', '.join(map_names())}.")
    extra = {} if model is None else {"model": model}
    found = _select(rows, loss=loss, seed=seed, map=map, **extra)
    if not found:
        raise ValueError(f"no evaluation rows for loss={loss!r}, seed={seed!r}, map={map!r}"
                         + (f", model={model!r}" if model else "") + "; evaluate the run first (calib sweep GRID.toml "
                         "--evaluate).")
    params = {(key, r[key]) for r in found for key in ("temperature", "gamma") if r.get(key) is not None}
    keys = [key for key, _ in params]
    if len(keys) != len(set(keys)):
        raise ValueError(f"the rows of loss={loss!r}, seed={seed!r}, map={map!r} disagree on the fitted parameters "
                         f"{sorted(params)}: they are of more than one run (give model=...).")
    return FittedMap(map, dict(params))


# ------------------------------------------------------------------- the test set's noise across a stored grid

__all__ += ["GridStatistics", "CombinedStatistic", "CONFIDENCE_GAP", "SEARCH_RANGES", "grid_edges", "blinded_copy"]

#: The name :class:`GridStatistics` gives the mean top-label confidence minus the accuracy (the over-confidence of
#: Zhou et al. 2025, Fig. 3), a statistic of sums over the test samples like those of :func:`calib.metrics.statistic`.
CONFIDENCE_GAP = "confidence_minus_accuracy"


#: The equal-mass top-label ECEs of the metric registry that :class:`GridStatistics` resamples all at once, and their
#: norm: AdaECE (Mukhoti et al. 2020, Eq. 3) and Karandikar et al.'s l2 ECE.
_EQUAL_MASS = {"adaece": "l1", "ece_em_l2": "l2"}


class _RememberedStatistic:
    """A statistic of one test set (:func:`calib.metrics.statistic`) that keeps its values on the bootstrap resamples
    it was last asked for, so that the many intervals of a grid evaluate each (run, map, metric) once: the resamples
    of :func:`calib.stats.seed_test_interval` are the same counts at every call (its ``seed``), and the owning
    :class:`GridStatistics` says whether ``counts`` are those (equal arrays), nothing is assumed."""

    _kept: np.ndarray | None

    def __init__(self, base, owner: "GridStatistics"):
        self._base, self._owner, self._kept = base, owner, None
        self.n, self.value = base.n, base.value

    def resampled(self, counts: np.ndarray) -> np.ndarray:
        same = self._owner._known_counts(counts)
        if same and self._kept is None and hasattr(self._base, "columns"):
            self._owner._evaluate_sums(counts)       # every pending sum statistic in one matrix product
        if same and self._kept is not None:
            return self._kept
        values = np.asarray(self._base.resampled(counts), dtype=np.float64)
        if same:
            self._kept = values
        return values


class GridStatistics:
    """Per-seed statistics of a stored grid's test predictions under the post-hoc maps its evaluation fitted, for
    intervals that carry the test set's own noise (the book's procedure, :mod:`calib.stats`, point 2).

    Each run's test probabilities under a map are rebuilt from its stored test logits and the map's stored fitted
    parameters (:func:`fitted_map`: nothing is refitted), and each metric is a statistic of the test samples
    (:func:`calib.metrics.statistic`, or :data:`CONFIDENCE_GAP`). A statistic is built once and remembers its values
    on the bootstrap resamples, so a chapter's many intervals over one grid cost one evaluation per (run, map,
    metric).

    Parameters
    ----------
    runs : list of StoredRun
        The grid's runs (:func:`load_store`), one model.
    rows : list of dict
        Their evaluation (:func:`evaluate_store`), which holds each map's fitted temperature and gamma.
    n_bins : int
        Bins of the binned metrics (15, as the chapter's tables).
    """

    _test: dict[tuple[str, int], tuple[np.ndarray, np.ndarray]]
    _outcomes: dict[tuple[str, int, str], np.ndarray]
    _stats: dict[tuple[str, int, str, str], _RememberedStatistic]
    _counts: np.ndarray | None
    _seen: np.ndarray | None

    def __init__(self, runs, rows, n_bins: int = 15):
        self._runs: dict[tuple[str, int], StoredRun] = {}
        for run in runs:
            key = (run.loss, run.seed)
            if key in self._runs:
                raise ValueError(f"runs holds two runs of loss {run.loss!r}, seed {run.seed} (models "
                                 f"{self._runs[key].model!r} and {run.model!r}); give the runs of one model.")
            self._runs[key] = run
        self._n_bins = check_int(n_bins, "n_bins", minimum=1)
        self._rows: dict[tuple[str, int, str], list[dict]] = {}   # the evaluation's rows by run and map
        for r in rows:
            self._rows.setdefault((r["loss"], r["seed"], r["map"]), []).append(r)
        self._test, self._stats, self._outcomes = {}, {}, {}
        self._counts = self._seen = None

    def seeds(self, loss: str) -> list:
        """The seeds of the stored runs of ``loss``, sorted."""
        seeds = sorted(s for (name, s) in self._runs if name == loss)
        if not seeds:
            raise ValueError(f"no stored run of loss {loss!r}; the grid's losses are "
                             f"{', '.join(sorted({name for name, _ in self._runs}))}.")
        return seeds

    def probabilities(self, loss: str, seed: int, map: str = "none") -> tuple[np.ndarray, np.ndarray]:
        """The float64 test probabilities of the run of ``loss`` and ``seed`` under the stored ``map``, and the test
        labels."""
        if (loss, seed) not in self._runs:
            raise ValueError(f"no stored run of loss {loss!r} with seed {seed!r}; its seeds are {self.seeds(loss)}.")
        run = self._runs[(loss, seed)]
        if (loss, seed) not in self._test:
            arrays = run.logits(splits=("test",))
            self._test[(loss, seed)] = (arrays["test_logits"], arrays["test_labels"])
        logits, labels = self._test[(loss, seed)]
        fitted = (FittedMap("none", {}) if map == "none" else
                  fitted_map(self._rows.get((loss, seed, map), []), loss, seed, map, model=run.model))
        return fitted.proba(logits), labels

    def statistic(self, loss: str, seed: int, map: str, metric: str):
        """One run's ``metric`` on the test set under the stored ``map``, as a statistic of the test samples:
        ``metric`` is a name of :func:`calib.metrics.statistic` or :data:`CONFIDENCE_GAP`."""
        key = (loss, seed, map, metric)
        if key not in self._stats:
            base: object
            if metric == CONFIDENCE_GAP or metric in _EQUAL_MASS or metric in metrics.TOP_LABEL_METRICS:
                outcomes = self._top_label_outcomes(loss, seed, map)
                if metric == CONFIDENCE_GAP:
                    from calib.stats import AdditiveStatistic

                    base = AdditiveStatistic((outcomes[:, 0] - outcomes[:, 1])[:, None], _mean_of_sums)
                elif metric in _EQUAL_MASS:          # every resample at once (calib.metrics recomputes each)
                    base = _EqualMassECE(outcomes[:, 0], outcomes[:, 1] > 0, self._n_bins, _EQUAL_MASS[metric])
                else:                                # calib.metrics.statistic of the probabilities, from their outcomes
                    base = metrics.outcome_statistic(outcomes[:, 0], outcomes[:, 1] > 0, metric, self._n_bins)
            else:
                probs, labels = self.probabilities(loss, seed, map)
                if metric == "classwise_ece":        # sums over the samples per (class, bin): one sparse product
                    base = _ClasswiseECE(probs, labels, self._n_bins)
                else:
                    base = metrics.statistic(probs, labels, metric, self._n_bins)
            self._stats[key] = _RememberedStatistic(base, self)
        return self._stats[key]

    def _top_label_outcomes(self, loss: str, seed: int, map: str) -> np.ndarray:
        """:func:`calib.metrics.top_label_outcomes` of :meth:`probabilities`, computed once per (run, map): the
        top-label metrics of one run and map (ECE, AdaECE, accuracy, the confidence gap) read only these (N, 2)."""
        if (loss, seed, map) not in self._outcomes:
            self._outcomes[(loss, seed, map)] = metrics.top_label_outcomes(*self.probabilities(loss, seed, map))
        return self._outcomes[(loss, seed, map)]

    def statistics(self, loss: str, map: str, metric: str, seeds=None) -> list:
        """:meth:`statistic` for each seed of ``seeds`` (default: every seed of ``loss``), in that order."""
        return [self.statistic(loss, s, map, metric) for s in (self.seeds(loss) if seeds is None else seeds)]

    def interval(self, metric: str, a: tuple, b: tuple | None = None, seeds=None, level: float = 0.95):
        """The book's interval (:func:`calib.stats.seed_test_interval`) of the mean over seeds of ``metric`` of
        ``a``, or of ``metric(a) - metric(b)`` paired seed by seed; ``a`` and ``b`` are ``(loss, map)``. ``seeds``
        defaults to the seeds both losses have."""
        from calib.stats import seed_test_interval

        if seeds is None:
            seeds = sorted(set(self.seeds(a[0])) & (set(self.seeds(b[0])) if b is not None else set(self.seeds(a[0]))))
        seeds = list(seeds)
        return seed_test_interval(self.statistics(a[0], a[1], metric, seeds),
                                  None if b is None else self.statistics(b[0], b[1], metric, seeds), level)

    def _evaluate_sums(self, counts: np.ndarray) -> None:
        """The resampled values of every statistic of sums (:class:`calib.stats.AdditiveStatistic`) not yet
        evaluated at the remembered ``counts``, in matrix products of a few hundred columns: one product reads the
        (B, N) counts once for many statistics, where one product per statistic reads them each time."""
        pending = [s for s in self._stats.values() if s._kept is None and hasattr(s._base, "columns")]
        totals = _narrow_counts(counts)[1]              # counts.sum(axis=1), once per read-only counts
        while pending:
            batch: list[_RememberedStatistic]
            batch, width = [], 0
            while pending and (not batch or width + pending[0]._base.columns.shape[1] <= 512):
                batch.append(pending.pop(0))
                width += batch[-1]._base.columns.shape[1]
            sums = counts @ np.hstack([s._base.columns for s in batch])
            start = 0
            for s in batch:
                stop = start + s._base.columns.shape[1]
                s._kept = np.asarray(s._base.finish(sums[:, start:stop], totals), dtype=np.float64)
                start = stop

    def _known_counts(self, counts: np.ndarray) -> bool:
        """Whether ``counts`` are the resamples this grid's statistics remember (the first ones they were asked
        for): the same object, or an equal array."""
        if self._counts is None:
            self._counts = self._seen = counts
            return True
        if counts is self._seen:
            return True
        if counts.shape == self._counts.shape and np.array_equal(counts, self._counts):
            self._seen = counts
            return True
        return False


class _EqualMassECE:
    """Equal-mass top-label ECE (l1: AdaECE; l2: Karandikar et al.'s ECE) on the test samples that bootstrap counts
    draw, every resample at once: the bins of :mod:`calib.metrics.binned` (``np.array_split`` sizes of the sorted
    confidences; a tied sample counts with its group's mean outcome), from block sums over the confidences sorted
    once, where :func:`calib.metrics.statistic` recomputes the metric resample by resample (a few times slower)."""

    def __init__(self, conf: np.ndarray, correct: np.ndarray, n_bins: int, norm: str):
        order = np.argsort(conf, kind="stable")
        x = np.asarray(conf, dtype=np.float64)[order] + 0.0
        n = x.size
        new = np.empty(n, dtype=bool)
        new[0] = True
        np.not_equal(x[1:], x[:-1], out=new[1:])
        starts = np.flatnonzero(new)
        group = np.cumsum(new) - 1                      # each sorted sample's group of equal confidences
        self._block = next((b for b in range(128, 31, -1) if n % b == 0), 128)
        pad = -n % self._block                          # samples of zero weight that close the last block
        self._order, self.n, self._n_bins, self._norm = order, n, n_bins, norm
        self._x = np.concatenate([x, np.full(pad, x[-1])]).reshape(-1, self._block)
        self._flag = np.concatenate([np.asarray(correct, dtype=np.float64)[order], np.zeros(pad)]).reshape(
            -1, self._block)
        self._first = starts[group]                     # the first and last sample of each sample's group
        self._last = np.append(starts[1:], n)[group] - 1
        self.value = float(self.resampled(np.ones((1, n)))[0])

    def resampled(self, counts: np.ndarray) -> np.ndarray:
        """The metric at each row of ``counts`` (B, N).

        Cost: one gather of the counts into confidence order (from a one-byte copy of them, made once for a shared
        read-only array), block sums over it and a few (B, bins, block) gathers: O(B N), in chunks of rows that stay
        in cache. Each row keeps the arithmetic of the first, one-pass version (tests/references.py, the baseline of
        tests/benchmarks/verdict_statistics.py): the confidences summed in the same order, the counts and hits exactly,
        so the values are equal to the last bit."""
        counts = np.asarray(counts, dtype=np.float64)
        rows, n = counts.shape
        small, totals = _narrow_counts(counts)
        total = int(round(totals[0]))
        if n != self.n or not np.all(totals == total) or total < 1:
            raise ValueError(f"counts must be bootstrap counts of the {self.n} test samples: whole numbers with one "
                             "positive total per resample.")
        sizes = np.full(self._n_bins, total // self._n_bins)
        sizes[:total % self._n_bins] += 1               # np.array_split's bin sizes
        cuts = np.cumsum(sizes).astype(np.float64)
        # chunks of two rows or more: the sums over the bins below add a one-row array's bins in another order
        # (pairwise) than a taller array's (in turn), and each resample keeps the order it had in one piece
        step = max(2, _CHUNK // n)
        starts = list(range(0, rows, step))
        if len(starts) > 1 and rows - starts[-1] == 1:
            starts.pop()
        out = np.empty(rows)
        for lo, hi in zip(starts, starts[1:] + [rows]):
            out[lo:hi] = self._rows(small[lo:hi], total, sizes, cuts)
        return out

    def _rows(self, counts: np.ndarray, total: int, sizes: np.ndarray, cuts: np.ndarray) -> np.ndarray:
        """:meth:`resampled` of a few rows of ``counts`` (uint8 or float64 whole numbers)."""
        rows, n = counts.shape
        width, blocks = self._block, self._x.shape[0]
        small = np.zeros((rows, blocks * width), dtype=counts.dtype)       # sorted counts, zero padding
        small[:, :n] = np.take(counts, self._order, axis=1)
        drawn = small.astype(np.float64).reshape(rows, blocks, width)
        small = small.reshape(rows, blocks, width)
        hit = small * self._flag.astype(small.dtype)
        # counts and hits are whole numbers, whose sums are exact in any order (a block's in 16 bits from bytes);
        # the confidences' sums keep their order: each block's, then the running sum over the blocks
        exact = np.float64 if small.dtype == np.float64 else np.uint16
        ends = [np.concatenate([np.zeros((rows, 1)), np.cumsum(s, axis=1, dtype=np.float64)], axis=1) for s in
                (small.sum(axis=2, dtype=exact), np.einsum("rbw,bw->rb", drawn, self._x), hit.sum(axis=2, dtype=exact))]
        row = np.arange(rows)[:, None]
        lanes = np.arange(width)

        def prefix(q, confidence=True):
            """Count, hits and (if asked) confidence of the first q + 1 sorted samples (q >= -1), per resample and
            cut."""
            block, lane = np.maximum(q, 0) // width, np.maximum(q, 0) % width
            mask = lanes <= lane[..., None]
            out = [ends[0][row, block] + (small[row, block] * mask).sum(axis=2, dtype=exact),
                   ends[2][row, block] + (hit[row, block] * mask).sum(axis=2, dtype=exact)]
            if confidence:
                out.append(ends[1][row, block] + np.einsum("rcw,rcw->rc", drawn[row, block] * mask, self._x[block]))
            return [np.where(q >= 0, v, 0.0) for v in out]

        # the block, then the sample, holding each cut's last position
        shift = np.arange(rows)[:, None] * float(total + 1)
        block = np.searchsorted((ends[0][:, 1:] + shift).ravel(), (cuts[None, :] + shift).ravel(), side="left")
        block = np.minimum(block.reshape(rows, -1) - np.arange(rows)[:, None] * blocks, blocks - 1)
        need = cuts[None, :] - ends[0][row, block]       # the cut's position inside its block
        within = np.cumsum(small[row, block], axis=2, dtype=exact)
        j = np.minimum(block * width + (within < need[..., None]).sum(axis=2), n - 1)
        n_before, hits_before, conf_before = prefix(self._first[j] - 1)
        n_last, hits_last = prefix(self._last[j], confidence=False)
        in_group = n_last - n_before
        taken = cuts[None, :] - n_before                 # the group's drawn samples up to the cut
        conf_to = conf_before + taken * self._x.ravel()[j]
        hits_to = hits_before + taken * (hits_last - hits_before) / np.where(in_group > 0, in_group, 1.0)
        full = sizes > 0
        diff = (np.diff(hits_to, axis=1, prepend=0.0) - np.diff(conf_to, axis=1, prepend=0.0))[:, full]
        if self._norm == "l1":
            return np.abs(diff).sum(axis=1) / total
        return np.sqrt((diff ** 2 / sizes[full]).sum(axis=1) / total)


#: Counts per chunk of rows in :meth:`_EqualMassECE.resampled`: a chunk's sorted counts and their running sums stay in
#: the cache (a few MB).
_CHUNK = 1 << 18

_NARROWED: list = [None, None, None]    # the last read-only counts narrowed, their one-byte copy and row sums


def _narrow_counts(counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``counts`` (B, N) as one byte per count when every count is a whole number up to 255 (a bootstrap's are),
    else ``counts`` itself, and the row sums ``counts.sum(axis=1)``: a gather then reads an eighth of the bytes. A
    read-only array (:func:`calib.stats.bootstrap_counts`) is narrowed once and reused while it is the last one asked
    for."""
    if _NARROWED[0] is counts and not counts.flags.writeable:
        return _NARROWED[1], _NARROWED[2]
    totals = counts.sum(axis=1)
    with np.errstate(invalid="ignore"):                 # NaN or negative: not narrowed (the check below)
        small = counts.astype(np.uint8)
    if not np.array_equal(small, counts):
        small = counts
    if not counts.flags.writeable:
        _NARROWED[:] = [counts, small, totals]
    return small, totals


class _ClasswiseECE:
    """Class-wise ECE with equal-width bins (l1; :func:`calib.metrics.classwise_ece`) on the test samples drawn by
    bootstrap counts, all resamples at once: its per-(class, bin) sums are sums over the samples, one sparse
    product."""

    def __init__(self, probs: np.ndarray, labels: np.ndarray, n_bins: int):
        from scipy import sparse

        p = np.asarray(probs, dtype=np.float64) + 0.0
        n, k = p.shape
        # the bins of calib.metrics: right-closed (i/M, (i+1)/M] on the correctly rounded floats i/M, 0 in the first
        edges = np.arange(n_bins + 1) / n_bins
        bins = np.maximum(np.searchsorted(edges, p, side="left") - 1, 0)
        cell = np.arange(k)[None, :] * n_bins + bins
        rows = np.repeat(np.arange(n), k)
        self._conf = sparse.csr_matrix((p.ravel(), (rows, cell.ravel())), shape=(n, k * n_bins))
        y = np.asarray(labels, dtype=np.int64)
        self._hits = sparse.csr_matrix((np.ones(n), (np.arange(n), cell[np.arange(n), y])), shape=(n, k * n_bins))
        self.n, self._k = n, k
        self.value = float(self.resampled(np.ones((1, n)))[0])

    def resampled(self, counts: np.ndarray) -> np.ndarray:
        """The metric at each row of ``counts`` (B, N).

        Cost: two sparse products of N K nonzeros with the (N, B) counts, read from one sample-major copy of a shared
        read-only counts array (scipy copies a transposed view at every product: a third of the time)."""
        counts = np.asarray(counts, dtype=np.float64)
        by_sample = _sample_major(counts)
        conf = (self._conf.T @ by_sample).T
        hits = (self._hits.T @ by_sample).T
        return np.abs(hits - conf).sum(axis=1) / (_narrow_counts(counts)[1] * self._k)


_SAMPLE_MAJOR: list = [None, None]       # the last read-only counts transposed, and their (N, B) copy


def _sample_major(counts: np.ndarray) -> np.ndarray:
    """``counts.T`` (N, B) as a C-contiguous array, made once for a read-only array while it is the last one asked
    for (the same values as the view: a product reads them in the same order)."""
    if _SAMPLE_MAJOR[0] is counts and not counts.flags.writeable:
        return _SAMPLE_MAJOR[1]
    by_sample = np.ascontiguousarray(counts.T)
    if not counts.flags.writeable:
        _SAMPLE_MAJOR[:] = [counts, by_sample]
    return by_sample


def _mean_of_sums(sums: np.ndarray, total: np.ndarray) -> np.ndarray:
    return sums[:, 0] / total


class CombinedStatistic:
    """A function of several statistics of one test set, itself a statistic of it (the spread of the losses' ECEs on
    one seed, say): ``combine`` maps an array whose first axis runs over ``parts`` to the statistic (axis 0 reduced);
    every part sees the same resample, so the combination is resampled as a whole."""

    def __init__(self, parts, combine):
        self.parts = list(parts)
        if not self.parts:
            raise ValueError("parts is empty; give the statistics (one per item) the combination reads.")
        sizes = {p.n for p in self.parts}
        if len(sizes) != 1:
            raise ValueError(f"parts are statistics of test sets of different sizes {sorted(sizes)}; combine the "
                             "statistics of one test set.")
        if not callable(combine):
            raise ValueError("combine must be a function of an array whose axis 0 runs over the parts.")
        self.combine, self.n = combine, sizes.pop()
        self.value = float(np.asarray(combine(np.array([[p.value] for p in self.parts])))[0])

    def resampled(self, counts: np.ndarray) -> np.ndarray:
        """The combination at each row of ``counts`` (B, N)."""
        return np.asarray(self.combine(np.stack([p.resampled(counts) for p in self.parts])), dtype=np.float64)


def _search_ranges() -> dict:
    from calib.posthoc import FINE_GRID, KOMISARENKO_GAMMAS, KOMISARENKO_TEMPERATURES, T_RANGE

    return {"ts-nll": {"temperature": tuple(map(float, T_RANGE))},
            "ts-ece": {"temperature": (float(FINE_GRID[0]), float(FINE_GRID[-1]))},
            "fts": {"temperature": (float(KOMISARENKO_TEMPERATURES[0]), float(KOMISARENKO_TEMPERATURES[-1])),
                    "gamma": (float(np.min(KOMISARENKO_GAMMAS)), float(np.max(KOMISARENKO_GAMMAS)))},
            "ts-sb-ece": {"temperature": tuple(map(float, T_RANGE))}}


#: The ends of each fitted post-hoc map's search, by parameter (:data:`POSTHOC_MAPS`): TS-NLL and TS-SB-ECE search
#: T within ``calib.posthoc.T_RANGE``, TS-ECE on ``FINE_GRID`` (0.01 to 10), FTS on Komisarenko & Kull's grid (T from
#: 0.01 to 5, gamma from -0.5 to 5). A fitted value at an end may be the end of the search, not the minimum.
SEARCH_RANGES = _search_ranges()


def grid_edges(map: str, temperature: float | None = None, gamma: float | None = None) -> dict:
    """Which fitted parameters of ``map`` lie at an end of its search (:data:`SEARCH_RANGES`): ``{"temperature":
    "low"}``, ``{"gamma": "high"}``, ..., empty when none does (or the map searches nothing: ``none``, ``psi``).
    A stored evaluation keeps the fitted values only, so chapter 10 marks its tables with this."""
    if map not in map_names():
        raise ValueError(f"map={map!r} is not a post-hoc map; choose one of {', '.join(map_names())}.")
    out = {}
    for name, value in (("temperature", temperature), ("gamma", gamma)):
        ends = SEARCH_RANGES.get(map, {}).get(name)
        if ends is None or value is None:
            continue
        value = float(value)
        if not np.isfinite(value):
            raise ValueError(f"{name}={value} is not a fitted value; give the map's stored {name}.")
        if np.isclose(value, ends[0], rtol=1e-9, atol=0.0) or value < ends[0]:
            out[name] = "low"
        elif np.isclose(value, ends[1], rtol=1e-9, atol=0.0) or value > ends[1]:
            out[name] = "high"
    return out


def blinded_copy(path, dest, seed: int = 0) -> Path:
    """A copy of the finished run in ``path`` at ``dest`` in which everything it holds of the test set is noise:
    every number of each epoch's ``test`` diagnostics in ``history.json``, and the test logits and labels of
    ``logits.npz`` (written as noise where the run stored none). ``meta.json`` and the validation data are copied as
    they are.

    A selection computed from the copy equals the one computed from the run exactly when it reads no test number;
    chapter 10 checks its regime choice and its parameter tuning this way. Returns ``dest``.
    """
    src, dest = Path(path), Path(dest)
    if not (src / run_files.META).is_file():
        raise FileNotFoundError(f"{src} holds no run (no {run_files.META}); give a run directory of a store.")
    if dest.exists() and any(dest.iterdir()):
        raise FileExistsError(f"{dest} is not empty; give a new folder for the blinded copy.")
    dest.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    (dest / run_files.META).write_bytes((src / run_files.META).read_bytes())

    def noise(value):
        if isinstance(value, bool) or value is None:
            return value
        if isinstance(value, (int, float)):
            return float(rng.uniform(-10.0, 10.0))
        if isinstance(value, list):
            return [noise(v) for v in value]
        if isinstance(value, dict):
            return {k: noise(v) for k, v in value.items()}
        return value

    history = src / run_files.HISTORY
    if history.is_file():
        data = json.loads(history.read_text())
        for epoch in data.get("epochs", []):
            if "test" in epoch:
                epoch["test"] = noise(epoch["test"])
        (dest / run_files.HISTORY).write_text(json.dumps(data))
    logits = src / run_files.LOGITS
    if logits.is_file():
        arrays = run_files.read_logits(logits, splits=("val",))
        z = arrays["val_logits"]
        arrays["test_logits"] = rng.normal(size=z.shape).astype(z.dtype)
        arrays["test_labels"] = rng.integers(0, z.shape[1], size=z.shape[0]).astype(arrays["val_labels"].dtype)
        run_files.write_logits(dest / run_files.LOGITS, arrays)
    return dest


# ----------------------------------- a mean over some of the test samples, and temperature scaling by the focal loss

__all__ += ["SUBSET_MIN_SAMPLES", "subset_mean_statistic", "fit_temperature_focal"]

#: The fewest test samples :func:`subset_mean_statistic` averages over. A bootstrap resample of N test samples
#: then misses the whole subset with probability (1 - 20/N)^N < e^-20, so no resample leaves the mean undefined.
SUBSET_MIN_SAMPLES = 20


def subset_mean_statistic(values, mask=None):
    """The mean of per-sample ``values`` over the test samples in ``mask`` (all of them without one), as a
    statistic of the whole test set for :func:`calib.stats.seed_test_interval`.

    It is a ratio of two sums over the test samples (the values inside the subset, and its size), so a bootstrap
    resample of the N test samples resamples the subset with them, and seeds whose subsets differ (the samples that
    four models all misclassify on that seed) still share the test set's resamples. Examples: the mean confidence on
    the samples every model gets wrong (Mukhoti et al. 2020, Fig. 9), the share of samples predicted with confidence
    >= 0.99 (their App. F: ``values = confidence >= 0.99``, no mask), a mean entropy (Karandikar et al. 2021,
    Fig. 10), a mean confidence minus accuracy (``values = confidence - correct``).

    Parameters
    ----------
    values : array_like, shape (N,)
        One finite number per test sample (booleans count as 0 and 1).
    mask : array_like of bool, shape (N,), optional
        The subset: at least :data:`SUBSET_MIN_SAMPLES` samples.

    Returns
    -------
    calib.stats.AdditiveStatistic
        ``value`` is ``values[mask].mean()``; ``resampled(counts)`` the mean over each resample's draws of the subset.

    Raises
    ------
    ValueError
        For values that are not a finite 1-d array, a mask that is not boolean or of another length, or a subset
        of fewer than :data:`SUBSET_MIN_SAMPLES` samples.
    """
    from calib._validate import as_float_array
    from calib.stats import AdditiveStatistic

    v = as_float_array(np.asarray(values, dtype=np.float64) if np.asarray(values).dtype == bool else values,
                       "values", ndim=1)
    if mask is None:
        inside = np.ones(v.shape, dtype=np.float64)
    else:
        m = np.asarray(mask)
        if m.dtype != bool or m.shape != v.shape:
            raise ValueError(f"mask must be a boolean array of the {v.size} test samples (one flag each); got dtype "
                             f"{m.dtype} and shape {m.shape}.")
        inside = m.astype(np.float64)
    count = int(inside.sum())
    if count < SUBSET_MIN_SAMPLES:
        raise ValueError(f"the subset holds {count} test sample(s); a bootstrap resample could miss it whole, so "
                         f"its mean needs at least {SUBSET_MIN_SAMPLES}: widen the subset or report its samples one "
                         "by one.")
    return AdditiveStatistic(np.column_stack([v * inside, inside]), _subset_mean)


def _subset_mean(sums: np.ndarray, total: np.ndarray) -> np.ndarray:
    return sums[:, 0] / sums[:, 1]


def fit_temperature_focal(logits, labels, gamma, bounds=(0.05, 20.0)) -> float:
    """The temperature T that minimises the mean focal loss ``-(1 - p_y)^gamma log p_y`` of ``softmax(logits / T)``
    on validation logits and labels: Charoenphakdee et al. (2021)'s TS_FL (Sec. 6.1), temperature scaling "that uses
    the focal loss in the validation objective", with the training gamma (gamma = 0 is Guo et al.'s NLL fit).

    41 temperatures spaced evenly in log T over ``bounds`` bracket the minimum, which a bounded Brent search then
    refines to 1e-4 in log T.

    Parameters
    ----------
    logits : array_like, shape (N, K)
        Validation logits.
    labels : array_like, shape (N,)
        Validation labels.
    gamma : float
        The focal parameter, >= 0.
    bounds : (float, float)
        The range of T searched, 0 < low < high.

    Raises
    ------
    ValueError
        For bad logits, labels or gamma, bounds that are not 0 < low < high, or a minimum at an end of ``bounds``
        (widen them).
    """
    from scipy.optimize import minimize_scalar
    from scipy.special import log_softmax

    from calib._validate import as_logits_labels
    from calib.focal.numerics import check_gamma

    z, y = as_logits_labels(logits, labels)
    gamma = check_gamma(gamma, scalar=True)
    try:
        low, high = (float(b) for b in bounds)
    except (TypeError, ValueError):
        raise ValueError(f"bounds must be two temperatures (low, high); got {bounds!r}.") from None
    if not (np.isfinite(low) and np.isfinite(high) and 0 < low < high):
        raise ValueError(f"bounds must satisfy 0 < low < high; got {bounds!r}.")
    rows = np.arange(len(y))

    def focal(log_t: float) -> float:
        log_p = log_softmax(z / np.exp(log_t), axis=1)[rows, y]
        return float(np.mean(-((-np.expm1(log_p)) ** gamma) * log_p))

    grid = np.linspace(np.log(low), np.log(high), 41)
    scores = [focal(t) for t in grid]
    best = int(np.argmin(scores))
    if best in (0, len(grid) - 1):
        raise ValueError(f"the focal loss is smallest at T = {np.exp(grid[best]):.3g}, an end of bounds={bounds!r}; "
                         "widen the bounds.")
    fit = minimize_scalar(focal, bounds=(grid[best - 1], grid[best + 1]), method="bounded", options={"xatol": 1e-4})
    return float(np.exp(fit.x))


# ------------------------------------------------------------------------ a grid's test outcomes, kept small

__all__ += ["TestOutcomes", "write_test_outcomes", "read_test_outcomes"]


@dataclass(frozen=True)
class TestOutcomes:
    """One run's top-label test outcomes: the confidence (the largest softmax probability, float64, from the stored
    float32 logits) and whether the top label is right, per test sample, with the run's ``meta.json``. Enough for
    the top-label metrics of :func:`calib.metrics.statistic` with the test set's noise (:meth:`statistic`), in a
    tenth of the space of the logits."""

    __test__ = False                   # not a pytest test class

    model: str
    loss: str
    seed: int
    confidence: np.ndarray
    correct: np.ndarray
    meta: dict

    def statistic(self, metric: str, n_bins: int = 15):
        """The run's ``metric`` as a statistic of the test samples (:mod:`calib.stats.test_set`): one of
        :data:`calib.metrics.TOP_LABEL_METRICS` (``"accuracy"``, ``"ece"`` equal-width, ``"ece_em_l2"`` Karandikar
        et al.'s l2 equal-mass ECE, ``"adaece"``, ...), over ``n_bins`` bins."""
        from calib.metrics import outcome_statistic

        return outcome_statistic(self.confidence, self.correct, metric, n_bins)


def write_test_outcomes(grid, path=None) -> Path:
    """Write the top-label test outcomes of every finished run of ``grid`` (a :class:`Grid` or its file) to ``path``
    (default: ``test-outcomes.npz`` beside the grid file), a compressed archive of plain arrays: ``confidence``
    (runs, N) float64, ``correct`` (runs, N) bool, and ``runs``, a JSON list of each run's model, loss, seed and
    ``meta.json``. The store a chapter's claim reads when the runs' logits are too large to commit
    (:func:`read_test_outcomes`). Every run must be finished with its test logits, on one test set."""
    from scipy.special import softmax

    if not isinstance(grid, Grid):
        grid = load_grid(grid)
    path = Path(path) if path is not None else grid.path.parent / "test-outcomes.npz"
    confidence, correct, entries, labels = [], [], [], None
    for run in grid.runs:
        stored = load_run(run.out)
        if not stored.finished:
            raise ValueError(f"{run.out}: the run is not finished; finish the grid first (calib sweep {grid.path}).")
        arrays = run_files.read_logits(run.out / run_files.LOGITS, splits=("test",))
        if labels is not None and not np.array_equal(labels, arrays["test_labels"]):
            raise ValueError(f"{run.out}: its test labels differ from the grid's first run's; every run of the grid "
                             "must be scored on one test set.")
        labels = arrays["test_labels"]
        probs = softmax(arrays["test_logits"].astype(np.float64), axis=1)
        confidence.append(probs.max(axis=1))
        correct.append(probs.argmax(axis=1) == labels)
        meta = json.loads((run.out / run_files.META).read_text())
        entries.append({"model": run.model, "loss": run.loss, "seed": run.seed, "meta": meta})
    if not entries:
        raise ValueError(f"{grid.path} has no runs.")

    def write(tmp: Path) -> None:
        with open(tmp, "wb") as fh:
            np.savez_compressed(fh, confidence=np.stack(confidence), correct=np.stack(correct),
                                runs=np.array(json.dumps(entries)))
    run_files.write_atomic(path, write)
    return path


def read_test_outcomes(path) -> dict:
    """The runs of a :func:`write_test_outcomes` archive, ``{(loss, seed): TestOutcomes}`` (read without pickles);
    a damaged or foreign file raises :class:`calib.runs.CorruptRunError` naming it."""
    path = Path(path)
    try:
        with np.load(path, allow_pickle=False) as npz:
            confidence, correct, entries = npz["confidence"], npz["correct"], json.loads(str(npz["runs"]))
    except FileNotFoundError:
        raise
    except (OSError, ValueError, KeyError, EOFError, TypeError) as exc:
        raise run_files.CorruptRunError(f"{path} is not a test-outcomes archive of calib.experiments."
                                        f"write_test_outcomes ({type(exc).__name__}); rewrite it from its grid's "
                                        "runs.") from None
    if confidence.shape != correct.shape or confidence.ndim != 2 or len(entries) != len(confidence):
        raise run_files.CorruptRunError(f"{path}: confidence {confidence.shape}, correct {correct.shape} and "
                                        f"{len(entries)} runs do not match; rewrite it from its grid's runs.")
    return {(e["loss"], int(e["seed"])): TestOutcomes(e["model"], e["loss"], int(e["seed"]), confidence[i],
                                                        correct[i].astype(bool), e["meta"])
            for i, e in enumerate(entries)}
