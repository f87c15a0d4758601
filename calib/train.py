"""Training: one run of a network on a dataset with per-epoch diagnostics, checkpoints and exact resume;
full-batch gradient descent for the linear toy; and a minimal loop for the small chapters.

- :func:`train` (and ``calib train``) runs the recipe of Mukhoti et al. (2020), App. D by default (SGD,
  momentum 0.9, weight decay 5e-4 (their code), batch 128, learning rate 0.1 divided by 10 at 150/350 and
  250/350 of the run) and writes a run directory (see :class:`Trainer`):

  ``meta.json``      config, versions, device, git commit, wall time, ``finished``
  ``history.json``   per-epoch diagnostics (:meth:`Trainer.diagnose`)
  ``logits.npz``     ``val_logits``, ``val_labels``, ``test_logits``, ``test_labels`` of the final model
  ``checkpoint.pt``  model, optimiser, scheduler and random states after the last finished epoch

- :func:`load_run` reads a run directory back (the chapters read committed GPU runs from ``book/results``).
- :func:`logistic_gradient_descent`: full-batch gradient descent on bias-free logistic regression with
  cross-entropy or focal loss (Mukhoti et al. 2020, App. B), vectorised over several problems at once.
- :func:`train_classifier`: a minimal loop (full-batch or mini-batch, Adam or SGD) returning the loss
  history, for the chapters that train small models in memory.
"""

from __future__ import annotations

import dataclasses
import errno
import json
import os
import platform
import random
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from calib._validate import check_choice, check_int, check_positive, to_numpy

__all__ = ["resolve_device", "train_classifier", "TrainConfig", "Trainer", "Run", "train", "load_run",
           "RunConfigError", "logistic_gradient_descent", "paper_milestones", "GRAD_NORM_EDGES", "DIAGNOSTICS",
           "DISCARDABLE", "config_from_meta"]

OPTIMIZERS = ("adam", "sgd")
AUGMENTATIONS = ("crop-flip", "crop", "flip", "none")
#: Default augmentation by dataset, the CIFAR recipe (random crop with 4 pixels of padding and horizontal
#: flip, Mukhoti et al. 2020, App. D) for natural images, crop only for digits in photographs (SVHN).
DEFAULT_AUGMENT = {"cifar10": "crop-flip", "cifar100": "crop-flip", "fashion-mnist": "crop-flip", "svhn": "crop"}
#: log10-spaced edges of the per-sample last-layer gradient-norm histograms (Fig. 4b-d); norms outside
#: [1e-8, 1e2] are counted in the first or last bin.
#:
#: :meta hide-value:
GRAD_NORM_EDGES = np.logspace(-8, 2, 61)
_QUANTILES = (0.05, 0.25, 0.5, 0.75, 0.95)
#: Config fields that may differ between a run and its resumption (they do not change what is computed).
_NON_IDENTITY = ("device", "progress", "diagnostics")
#: What :meth:`Trainer.diagnose` records each epoch, "full" (train, validation and test, with the
#: last-layer gradient norms and reliability tables of Mukhoti et al.'s Figs. 1-4) or "eval" (validation and
#: test only: about half the cost of an epoch for a small network, for grids that need only the final logits).
DIAGNOSTICS = ("full", "eval")
#: Files of a run directory that may be deleted once the run has finished (``discard``).
DISCARDABLE = ("checkpoint.pt", "logits.npz")


def resolve_device(device: str = "auto") -> torch.device:
    """``"auto"``: the first CUDA GPU if there is one, else the CPU; any other value is passed to torch."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        resolved = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise ValueError(f"device={device!r} is not a torch device ({exc}); use 'auto', 'cpu' or 'cuda'.") from None
    if resolved.type == "cuda" and not torch.cuda.is_available():
        why = ("this torch is a CPU build" if torch.version.cuda is None else "no CUDA GPU is visible")
        raise ValueError(f"device={device!r}: {why}; use 'cpu' or 'auto', or install a CUDA build of torch.")
    return resolved


def paper_milestones(epochs: int) -> tuple:
    """The epochs after which the learning rate drops: Mukhoti et al.'s 150 and 250 of 350 (Sec. 3, App. D),
    scaled to a run of ``epochs`` epochs (``round(150 E / 350)``, ``round(250 E / 350)``)."""
    return tuple(sorted({max(1, round(150 * epochs / 350)), max(1, round(250 * epochs / 350))}))


class RunLockedError(ValueError):
    """Another process is writing to the run directory."""


class CorruptRunError(ValueError):
    """A file of the run directory cannot be read (truncated, garbage or not what calib wrote)."""


class DiskFullError(OSError):
    """The device of the run directory is full: nothing of the last complete epoch was lost."""


class RunConfigError(ValueError):
    """A run directory holds a run of another configuration (or an unfinished one without ``resume``)."""


@dataclass
class TrainConfig:
    """Everything that determines a training run (and so its results).

    ``milestones=None`` means :func:`paper_milestones`; ``augment=None`` means ``calib.train.DEFAULT_AUGMENT``
    (none for datasets not listed); ``amp`` and ``channels_last`` (``None``: on for CUDA, off on the CPU)
    are bf16 autocast for the training steps and the channels-last memory format. ``train_subset``,
    ``val_subset`` and ``test_subset`` keep the first n samples of a split (:meth:`calib.data.Dataset.subset`);
    ``pool`` average-pools the images by that factor (:meth:`calib.data.Dataset.pooled`; a CPU economy).
    ``grad_clip`` is the max-norm of the gradient (the official code clips at 2 with a *summed* loss; the
    paper does not mention it, and the book's losses are means, so none by default). ``diagnostics`` is
    one of :data:`DIAGNOSTICS`; it changes what ``history.json`` records, not the trained network, so a run
    may be resumed with another value.
    """

    data: str
    model: str
    loss: str
    epochs: int
    seed: int = 0
    secondary: str | None = None
    secondary_weight: float = 1.0
    lr: float = 0.1
    momentum: float = 0.9
    weight_decay: float = 5e-4
    milestones: tuple | None = None
    lr_decay: float = 0.1
    batch_size: int = 128
    augment: str | None = None
    train_subset: int | None = None
    val_subset: int | None = None
    test_subset: int | None = None
    pool: int = 1
    grad_clip: float | None = None
    amp: bool | None = None
    channels_last: bool | None = None
    device: str = "auto"
    diagnostics: str = "full"

    def resolved(self) -> "TrainConfig":
        """A copy with the defaults that depend on the data and the device filled in, checked."""
        from calib.data import DATASETS, dataset_names
        from calib.losses import get_loss
        from calib.models import check_model_name

        get_loss(self.loss, self.secondary, self.secondary_weight)   # unknown names list the valid ones
        data = self.data.strip().lower() if isinstance(self.data, str) else self.data
        if data not in DATASETS:
            raise ValueError(f"unknown dataset {self.data!r}; choose from {dataset_names()}.")
        model = check_model_name(self.model)
        epochs = check_int(self.epochs, "epochs")
        check_int(self.seed, "seed", minimum=0)
        check_positive(self.lr, "lr")
        check_positive(self.momentum, "momentum", allow_zero=True)
        check_positive(self.weight_decay, "weight_decay", allow_zero=True)
        check_positive(self.lr_decay, "lr_decay")
        check_int(self.batch_size, "batch_size")
        milestones = paper_milestones(epochs) if self.milestones is None else tuple(
            check_int(m, "milestones") for m in self.milestones)
        augment = self.augment if self.augment is not None else DEFAULT_AUGMENT.get(data, "none")
        check_choice(augment, "augment", AUGMENTATIONS)
        for name in ("train_subset", "val_subset", "test_subset"):
            if getattr(self, name) is not None:
                check_int(getattr(self, name), name)
        check_int(self.pool, "pool")
        check_choice(self.diagnostics, "diagnostics", DIAGNOSTICS)
        if self.grad_clip is not None:
            check_positive(self.grad_clip, "grad_clip")
        cuda = resolve_device(self.device).type == "cuda"
        amp = cuda if self.amp is None else bool(self.amp)
        channels_last = cuda if self.channels_last is None else bool(self.channels_last)
        secondary = self.secondary.strip().lower() if isinstance(self.secondary, str) else self.secondary
        return dataclasses.replace(self, data=data, model=model, loss=self.loss.strip().lower(), secondary=secondary,
                                   milestones=milestones, augment=augment, amp=amp, channels_last=channels_last)

    def identity(self) -> dict:
        """The fields that must agree for two runs to be the same run."""
        d = dataclasses.asdict(self)
        d["milestones"] = list(d["milestones"]) if d["milestones"] is not None else None
        return {k: v for k, v in d.items() if k not in _NON_IDENTITY}


@dataclass
class Run:
    """A run directory read back: its config, metadata and history; :meth:`logits` loads ``logits.npz``."""

    out: Path
    meta: dict
    history: dict
    config: dict = field(default_factory=dict)

    @property
    def finished(self) -> bool:
        """Whether the run completed all its epochs (``finished`` in ``meta.json``)."""
        return bool(self.meta.get("finished"))

    @property
    def epochs(self) -> list:
        """The per-epoch records of ``history.json``."""
        return self.history.get("epochs", [])

    def series(self, *keys) -> np.ndarray:
        """One diagnostic over the epochs, e.g. ``run.series("test", "nll_wrong")`` (None becomes NaN)."""
        out = []
        for rec in self.epochs:
            value = rec
            for k in keys:
                value = value[k]
            out.append(np.nan if value is None else value)
        return np.asarray(out, dtype=np.float64)

    def logits(self) -> dict:
        """``val_logits``, ``val_labels``, ``test_logits``, ``test_labels`` (numpy arrays)."""
        with np.load(self.out / "logits.npz") as f:
            return {k: f[k] for k in f.files}


def load_run(out) -> Run:
    """Read the run directory ``out`` (``meta.json`` and ``history.json``)."""
    out = Path(out)
    if not (out / "meta.json").is_file():
        raise FileNotFoundError(f"{out} holds no run (no meta.json); train one with `calib train ... --out {out}`.")
    meta = _read_json_object(out / "meta.json")
    history = _read_json_object(out / "history.json") if (out / "history.json").is_file() else {}
    return Run(out, meta, history, meta.get("config", {}))


def _read_json_object(path: Path) -> dict:
    """A JSON object written by calib (meta.json, history.json), or CorruptRunError naming the file."""
    try:
        obj = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise CorruptRunError(f"{path} is not valid JSON ({exc}); it is damaged. Restore it, or start the run over "
                              f"with --restart (calib train) / restart=True.") from None
    if not isinstance(obj, dict):
        raise CorruptRunError(f"{path} holds a JSON {type(obj).__name__}, not the object calib writes; restore it, or "
                              f"start the run over with --restart.")
    return obj


#: Temporary files of :func:`_write_atomic`: ``.<name>.tmp<pid>``, removed when a run starts.
_TMP_GLOB = ".*.tmp*"


def _write_atomic(path: Path, write) -> None:
    """Write a file through a temporary in the same folder and ``os.replace``: a crash leaves the old file.

    A full device raises :class:`DiskFullError` naming the directory (the temporary is removed and the previous
    file is untouched); torch reports it as a RuntimeError from its zip writer, numpy and json as OSError.
    """
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException as exc:                       # also Ctrl-C: no temporary is left behind
        tmp.unlink(missing_ok=True)
        if not isinstance(exc, (OSError, RuntimeError)):
            raise
        full = getattr(exc, "errno", None) == errno.ENOSPC
        if not full:
            try:
                full = shutil.disk_usage(path.parent).free < 64 * 2 ** 20
            except OSError:
                pass
        if full:
            raise DiskFullError(errno.ENOSPC, f"no space left on the device of {path.parent} while writing {path.name}; "
                                f"the files of the last complete epoch are intact. Free some space and continue with "
                                f"--resume.") from None
        raise


def _write_json(path: Path, obj) -> None:
    _write_atomic(path, lambda p: p.write_text(json.dumps(obj, indent=1, allow_nan=False)))


def _json_float(x) -> float | None:
    x = float(x)
    return x if np.isfinite(x) else None


def _git_commit() -> str | None:
    here = Path(__file__).resolve().parent.parent
    try:
        out = subprocess.run(["git", "-C", str(here), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def _git_dirty() -> bool | None:
    """Whether the library's files differ from the recorded commit (uncommitted changes under calib/)."""
    here = Path(__file__).resolve().parent.parent
    try:
        out = subprocess.run(["git", "-C", str(here), "status", "--porcelain", "--untracked-files=no", "--", "calib"],
                             capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return bool(out.stdout.strip()) if out.returncode == 0 else None


def _device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return f"CPU: {line.split(':', 1)[1].strip()} ({os.cpu_count()} cores)"
    except OSError:
        pass
    return f"CPU: {platform.processor() or platform.machine()} ({os.cpu_count()} cores)"


def _cpu_capability() -> str:
    """The vector instruction set torch's CPU kernels dispatch to (e.g. "AVX512", "AVX2"); float32 training is
    bit-reproducible only between machines with the same one (and the same number of threads)."""
    try:
        return str(torch.backends.cpu.get_cpu_capability())
    except AttributeError:  # torch < 2.0
        return "unknown"


def _epoch_seed(seed: int, epoch: int) -> int:
    """The seed of epoch ``epoch``'s data order and augmentation: independent of any state, so a resumed
    run replays exactly the batches an uninterrupted one would have seen."""
    return int(np.random.SeedSequence([int(seed), int(epoch), 0x0CA1]).generate_state(1, dtype=np.uint64)[0] >> 1)


def _split_stats(logits: np.ndarray, labels: np.ndarray, reliability_bins: int | None = None) -> dict:
    """NLL, entropy, accuracy, ECE and AdaECE (15 bins) of one split, overall and split into correctly and
    wrongly classified samples (Mukhoti et al. 2020, Sec. 3, Figs. 2-3)."""
    from scipy.special import log_softmax

    from calib import metrics

    logp = log_softmax(logits.astype(np.float64), axis=1)
    p = np.exp(logp)
    nll = -logp[np.arange(len(labels)), labels]
    entropy = -(p * logp).sum(axis=1)
    correct = p.argmax(axis=1) == labels

    def mean(a, mask=None):
        a = a if mask is None else a[mask]
        return _json_float(a.mean()) if a.size else None

    stats = {"n": int(len(labels)), "n_wrong": int((~correct).sum()), "accuracy": float(correct.mean()),
             "nll": mean(nll), "nll_correct": mean(nll, correct), "nll_wrong": mean(nll, ~correct),
             "entropy": mean(entropy), "entropy_correct": mean(entropy, correct),
             "entropy_wrong": mean(entropy, ~correct), "confidence": float(p.max(axis=1).mean()),
             "ece": metrics.ece(p, labels, n_bins=15), "adaece": metrics.adaptive_ece(p, labels, n_bins=15)}
    if reliability_bins:
        rel = metrics.reliability(p, labels, n_bins=reliability_bins)
        stats["reliability"] = {"counts": rel.counts.tolist(),
                                "accuracy": [_json_float(a) for a in rel.accuracy],
                                "confidence": [_json_float(c) for c in rel.confidence]}
    return stats


class _RunLock:
    """An exclusive lock on a run directory (``flock`` on ``.calib-train.lock``) for the lifetime of a run.

    A second process on the same directory is refused at once, naming the holder. The kernel releases the lock
    when its process dies, so a run killed with SIGKILL leaves no stale lock. Where ``fcntl`` does not exist
    (Windows) there is no lock.
    """

    NAME = ".calib-train.lock"

    def __init__(self, out: Path):
        self.path = out / self.NAME
        self.fd: int | None = None

    def __enter__(self) -> "_RunLock":
        try:
            import fcntl
        except ImportError:
            return self
        try:
            self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError:                            # a read-only directory: nobody can write to it, nothing to lock
            return self
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(self.fd, 200).decode(errors="replace").strip() or "a process"
            os.close(self.fd)
            self.fd = None
            raise RunLockedError(f"{self.path.parent} is being written by another calib train ({holder}); wait for "
                                 f"it to finish, or choose another --out.") from None
        os.ftruncate(self.fd, 0)
        os.write(self.fd, f"pid {os.getpid()} on {platform.node()}, since {time.strftime('%H:%M:%S')}".encode())
        return self

    def release(self, remove: bool = False) -> None:
        if self.fd is not None:
            if remove:
                self.path.unlink(missing_ok=True)
            os.close(self.fd)                      # closing releases the lock
            self.fd = None

    def __exit__(self, *exc) -> None:
        self.release()


def _read_checkpoint(path: Path, device) -> dict:
    """``checkpoint.pt`` as :meth:`Trainer.save_checkpoint` wrote it, or CorruptRunError naming the file."""
    try:
        state = torch.load(path, map_location=device, weights_only=False)
    except Exception as exc:  # torch.load raises UnpicklingError, EOFError, RuntimeError, ... on a damaged file
        raise CorruptRunError(f"{path} is corrupted or truncated ({type(exc).__name__}: {str(exc)[:120]}); it cannot "
                              f"be resumed. Start the run over with --restart (restart=True), or restore the "
                              f"file.") from None
    if not isinstance(state, dict) or not {"config", "epoch", "model", "optimizer"} <= set(state):
        raise CorruptRunError(f"{path} is not a calib checkpoint; start the run over with --restart (restart=True).")
    return state


class Trainer:
    """One training run with per-epoch diagnostics, an atomic checkpoint every epoch and exact resume.

    Parameters
    ----------
    config : TrainConfig
    out : path
        The run directory.
    progress : bool
        Show tqdm progress bars (epochs and batches).
    dataset : calib.data.Dataset, optional
        Use this dataset instead of loading ``config.data`` (its name must match; the subsets of the config
        are still applied).

    Notes
    -----
    Reproducibility: the initial weights come from ``seed``; the order and augmentation of epoch e from
    ``(seed, e)`` alone (``_epoch_seed``); the global torch, numpy and Python random states are saved
    in the checkpoint and restored on resume. On the CPU, ``torch.use_deterministic_algorithms`` is on
    during the run, so a run killed after epoch k and resumed gives the same weights, to the last bit, as
    an uninterrupted one (with the same number of threads). On CUDA, bf16 autocast (``amp``), channels-last
    tensors and cuDNN autotuning trade that bit-exactness for speed; the diagnostics and the stored logits
    are computed in float32 (no autocast).
    """

    def __init__(self, config: TrainConfig, out, progress: bool = True, dataset=None):
        self.config = config.resolved()
        if out is None or not str(out).strip():
            raise ValueError(f"out is {'empty' if out is not None else 'missing'}; name the run directory (e.g. "
                             f"--out _build/runs/demo).")
        self.out = Path(out)
        self.progress = progress
        self._dataset = dataset

    # ------------------------------------------------------------------------------------------ set-up
    def _setup(self):
        from calib.data import TensorLoader, load_dataset
        from calib.losses import get_loss
        from calib.models import build_model, count_parameters

        cfg = self.config
        self.device = resolve_device(cfg.device)
        ds = self._dataset if self._dataset is not None else load_dataset(cfg.data, seed=cfg.seed)
        if ds.name != cfg.data:
            raise ValueError(f"the dataset passed is {ds.name!r} but the config says data={cfg.data!r}.")
        self.dataset = ds = ds.subset(cfg.train_subset, cfg.val_subset, cfg.test_subset).pooled(cfg.pool)
        self.model = build_model(cfg.model, ds.input_shape, ds.n_classes, seed=cfg.seed).to(self.device)
        if cfg.channels_last and ds.is_image:
            self.model = self.model.to(memory_format=torch.channels_last)
        self.n_parameters = count_parameters(self.model)
        self.loss_fn = get_loss(cfg.loss, cfg.secondary, cfg.secondary_weight)
        flip = cfg.augment in ("crop-flip", "flip")
        pad = 4 if cfg.augment in ("crop-flip", "crop") else 0
        common = dict(mean=ds.mean, std=ds.std, device=self.device, channels_last=cfg.channels_last)
        self.train_loader = TensorLoader(ds.x_train, ds.y_train, cfg.batch_size, augment=cfg.augment != "none",
                                         pad=pad, flip=flip, **common)
        eval_bs = max(cfg.batch_size, 500)
        self.eval_loaders = {"train": TensorLoader(ds.x_train, ds.y_train, eval_bs, **common),
                             "val": TensorLoader(ds.x_val, ds.y_val, eval_bs, **common),
                             "test": TensorLoader(ds.x_test, ds.y_test, eval_bs, **common)}
        decay, no_decay = [], []
        for p in self.model.parameters():
            (decay if p.requires_grad else no_decay).append(p)
        self.optimizer = torch.optim.SGD(decay, lr=cfg.lr, momentum=cfg.momentum, weight_decay=cfg.weight_decay)
        self.scheduler = torch.optim.lr_scheduler.MultiStepLR(self.optimizer, milestones=list(cfg.milestones),
                                                              gamma=cfg.lr_decay)
        self.history: dict = {"grad_norm_edges": GRAD_NORM_EDGES.tolist(), "reliability_bins": 25, "epochs": []}
        self.epoch = 0
        self.wall_time = 0.0

    # ----------------------------------------------------------------------------------- checkpointing
    def _rng_state(self) -> dict:
        state = {"torch": torch.get_rng_state(), "numpy": np.random.get_state(), "python": random.getstate()}
        if torch.cuda.is_available():
            state["cuda"] = torch.cuda.get_rng_state_all()
        return state

    def _set_rng_state(self, state: dict) -> None:
        torch.set_rng_state(state["torch"])
        np.random.set_state(state["numpy"])
        random.setstate(state["python"])
        if "cuda" in state and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(state["cuda"])

    def save_checkpoint(self) -> None:
        """Write ``checkpoint.pt`` (atomically) with everything :meth:`load_checkpoint` needs."""
        state = {"config": self.config.identity(), "epoch": self.epoch, "model": self.model.state_dict(),
                 "optimizer": self.optimizer.state_dict(), "scheduler": self.scheduler.state_dict(),
                 "history": self.history, "rng": self._rng_state(), "wall_time": self.wall_time}
        _write_atomic(self.out / "checkpoint.pt", lambda p: torch.save(state, p))

    def load_checkpoint(self) -> None:
        """Restore the model, optimiser, scheduler, history and random states from ``checkpoint.pt``."""
        state = _read_checkpoint(self.out / "checkpoint.pt", self.device)
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        self.history = state["history"]
        self.epoch = int(state["epoch"])
        self.wall_time = float(state.get("wall_time", 0.0))
        self._set_rng_state(state["rng"])

    def _check_out(self, resume: bool) -> str:
        """``"new"``, ``"resume"`` or ``"done"`` for the run directory; RunConfigError when it holds a
        different run (or an unfinished one and ``resume`` is off)."""
        meta_path, ckpt = self.out / "meta.json", self.out / "checkpoint.pt"
        if not meta_path.is_file() and not ckpt.is_file():
            return "new"
        old = {}
        if meta_path.is_file():
            meta = _read_json_object(meta_path)
            old = meta.get("config", {})
            finished = bool(meta.get("finished"))
        else:
            finished = False
        if not old and ckpt.is_file():
            old = _read_checkpoint(ckpt, "cpu")["config"]
        new = self.config.identity()
        diff = {k: (old.get(k), v) for k, v in new.items() if old.get(k) != v}
        if diff:
            what = "; ".join(f"{k}: {a!r} there, {b!r} here" for k, (a, b) in diff.items())
            raise RunConfigError(f"{self.out} holds a run of another configuration ({what}); refusing to "
                                 f"{'resume' if resume else 'overwrite'} it. Choose another --out or delete that "
                                 f"directory.")
        if finished:
            return "done"
        if not resume:
            raise RunConfigError(f"{self.out} holds an unfinished run of this configuration; pass --resume "
                                 f"(resume=True) to continue it, or delete the directory to start over.")
        return "resume" if ckpt.is_file() else "new"

    # ------------------------------------------------------------------------------------- diagnostics
    def _evaluate(self, split: str, with_grads: bool):
        """Float32 logits of one split (eval mode, no augmentation), plus per-sample feature norms and,
        with ``with_grads``, last-layer gradient norms."""
        from calib.models import split_last_layer

        features, head = split_last_layer(self.model)
        bias = 1.0 if head.bias is not None else 0.0
        logits, feat_norms, grad_norms = [], [], []
        self.model.eval()
        for xb, yb in self.eval_loaders[split].epoch():
            with torch.no_grad():
                h = features(xb).flatten(1).float()
                z = head(h)
            feat_norms.append(h.norm(dim=1))
            logits.append(z)
            if with_grads:
                zz = z.detach().requires_grad_(True)
                with torch.enable_grad():
                    (g,) = torch.autograd.grad(self.loss_fn(zz, yb) * zz.shape[0], zz)
                # d loss_i / d W = g_i h_i^T (and g_i for the bias): a rank-one matrix, whose norm is
                # ||g_i|| * sqrt(||h_i||^2 + 1)
                grad_norms.append(g.norm(dim=1) * torch.sqrt(h.pow(2).sum(dim=1) + bias))
        out = {"logits": torch.cat(logits).cpu().numpy(), "feature_norm": torch.cat(feat_norms).cpu().numpy()}
        if with_grads:
            out["grad_norm"] = torch.cat(grad_norms).cpu().numpy()
        return out

    def diagnose(self) -> dict:
        """The diagnostics of the current model, as recorded each epoch in ``history.json``.

        For ``train`` (all training samples, eval mode, no augmentation), ``val`` and ``test``: NLL,
        softmax entropy and their means over correctly and wrongly classified samples, accuracy, mean
        confidence, ECE and AdaECE (15 bins) (Mukhoti et al. 2020, Figs. 2-3). For ``train`` also: the
        25-bin reliability table (Fig. 1), the mean L2 norm of the features entering the last linear layer
        (Fig. 10), and the per-sample norms of the gradient of the training loss with respect to the last
        layer's weights and bias (Fig. 4b-d; the gradient of the loss of the sample's evaluation batch times
        its size, which is the per-sample gradient for every per-sample loss) as a histogram on
        :data:`GRAD_NORM_EDGES`, with quantiles. Weight norms: all parameters, and the last linear
        layer's weight matrix (Fig. 3e).
        """
        from calib.models import split_last_layer

        record: dict = {}
        splits = ("train", "val", "test") if self.config.diagnostics == "full" else ("val", "test")
        for split in splits:
            res = self._evaluate(split, with_grads=split == "train")
            labels = self.eval_loaders[split].y.cpu().numpy()
            stats = _split_stats(res["logits"], labels, reliability_bins=25 if split == "train" else None)
            if split == "train":
                gn = res["grad_norm"].astype(np.float64)
                counts, _ = np.histogram(np.clip(gn, GRAD_NORM_EDGES[0], GRAD_NORM_EDGES[-1]), bins=GRAD_NORM_EDGES)
                stats["feature_norm"] = float(res["feature_norm"].mean())
                stats["grad_norm"] = {"mean": float(gn.mean()), "histogram": counts.tolist(),
                                      "quantiles": dict(zip(map(str, _QUANTILES), np.quantile(gn, _QUANTILES).tolist()))}
            record[split] = stats
        _, head = split_last_layer(self.model)
        with torch.no_grad():
            record["weight_norm"] = float(torch.sqrt(sum(p.float().pow(2).sum() for p in self.model.parameters())))
            record["last_layer_weight_norm"] = float(head.weight.float().norm())
        return record

    # ---------------------------------------------------------------------------------------- training
    def _train_epoch(self, epoch: int, bar=None) -> float:
        cfg = self.config
        if hasattr(self.loss_fn, "set_epoch"):
            self.loss_fn.set_epoch(epoch, cfg.epochs)
        self.model.train()
        generator = torch.Generator().manual_seed(_epoch_seed(cfg.seed, epoch))
        total = torch.zeros((), dtype=torch.float64, device=self.device)
        amp = torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=bool(cfg.amp))
        for xb, yb in self.train_loader.epoch(generator):
            self.optimizer.zero_grad(set_to_none=True)
            with amp:
                logits = self.model(xb)
            value = self.loss_fn(logits.float(), yb)
            value.backward()
            if cfg.grad_clip is not None:
                torch.nn.utils.clip_grad_norm_(self.model.parameters(), cfg.grad_clip)
            self.optimizer.step()
            total += value.detach().double() * yb.shape[0]
            if bar is not None:
                bar.update(1)
        mean_loss = float(total) / self.train_loader.n
        if not np.isfinite(mean_loss):
            raise FloatingPointError(f"the training loss became {mean_loss} in epoch {epoch}; lower --lr or set "
                                     f"--grad-clip.")
        return mean_loss

    def _meta(self, finished: bool) -> dict:
        import scipy

        import calib

        return {"config": self.config.identity(), "diagnostics": self.config.diagnostics, "device": str(self.device), "device_name": _device_name(self.device),
                "finished": finished, "epochs_done": self.epoch, "wall_time_s": round(self.wall_time, 3),
                "n_parameters": self.n_parameters, "dataset": {"name": self.dataset.name, "source": self.dataset.source,
                "n_train": len(self.dataset.y_train), "n_val": len(self.dataset.y_val), "n_test": len(self.dataset.y_test)},
                "versions": {"calib": getattr(calib, "__version__", "0.1.0"), "torch": torch.__version__,
                             "numpy": np.__version__, "scipy": scipy.__version__, "python": sys.version.split()[0]},
                "git_commit": _git_commit(), "git_dirty": _git_dirty(), "threads": torch.get_num_threads(),
                "cpu_capability": _cpu_capability(), "written": time.strftime("%Y-%m-%d %H:%M:%S")}

    def _final_logits(self) -> None:
        arrays = {}
        for split in ("val", "test"):
            arrays[f"{split}_logits"] = self._evaluate(split, with_grads=False)["logits"].astype(np.float32)
            arrays[f"{split}_labels"] = self.eval_loaders[split].y.cpu().numpy().astype(np.int64)
        _write_atomic(self.out / "logits.npz", lambda p: np.savez_compressed(open(p, "wb"), **arrays))

    def run(self, resume: bool = False, discard=(), restart: bool = False) -> Run:
        """Train (or resume, or skip a finished run of the same config) and return the run directory.

        ``discard`` names files of :data:`DISCARDABLE` to delete once the run has finished: a stored run needs
        no ``checkpoint.pt``, and a tuning run whose validation history is all that is read needs no
        ``logits.npz`` either. ``restart`` starts a run of the same configuration over (a corrupted checkpoint).
        The directory is locked while the run writes to it (a second process is refused,
        ``calib.train.RunLockedError``); temporaries left by a killed run are removed first."""
        discard = tuple(discard)
        for name in discard:
            check_choice(name, "discard", DISCARDABLE)
        self._make_out()
        with _RunLock(self.out) as lock:
            for leftover in self.out.glob(_TMP_GLOB):     # temporaries of a killed run
                try:
                    leftover.unlink()
                except OSError:
                    pass
            if restart:
                self._clear_for_restart()
            state = self._check_out(resume)
            if state == "done":
                lock.release(remove=True)
                return load_run(self.out)
            run = self._run(state, discard)
            lock.release(remove=True)
            return run

    def _make_out(self) -> None:
        if (self.out / "meta.json").is_file():
            return                                      # an existing run (maybe read-only, e.g. a stored one)
        try:
            self.out.mkdir(parents=True, exist_ok=True)
        except FileExistsError:
            raise ValueError(f"out {self.out} is a file, not a directory; choose another --out.") from None
        except NotADirectoryError:
            raise ValueError(f"out {self.out} lies under a file; choose another --out.") from None
        if not self.out.is_dir():
            raise ValueError(f"out {self.out} is not a directory; choose another --out.")

    def _clear_for_restart(self) -> None:
        """``restart``: remove the run's files, unless they belong to a run of another configuration."""
        meta_path = self.out / "meta.json"
        try:
            old = load_run(self.out).config if meta_path.is_file() else None
        except CorruptRunError:
            old = None                                  # a damaged meta.json: restarting is what it needs
        if old and old != self.config.identity():
            raise RunConfigError(f"{self.out} holds a run of another configuration; --restart only starts over a "
                                 f"run of the same configuration. Choose another --out or delete that directory.")
        for name in ("meta.json", "history.json", "logits.npz", "checkpoint.pt"):
            (self.out / name).unlink(missing_ok=True)

    def _run(self, state: str, discard: tuple) -> Run:
        self._setup()
        if state == "resume":
            self.load_checkpoint()
        cfg = self.config
        deterministic = self.device.type == "cpu"
        previous = torch.are_deterministic_algorithms_enabled()
        if deterministic:
            torch.use_deterministic_algorithms(True)
        elif self.device.type == "cuda":
            torch.backends.cudnn.benchmark = True
            torch.backends.cuda.matmul.allow_tf32 = True
            torch.backends.cudnn.allow_tf32 = True
        _write_json(self.out / "meta.json", self._meta(finished=False))
        epoch_bar = batch_bar = None
        if self.progress:
            from tqdm.auto import tqdm

            epoch_bar = tqdm(total=cfg.epochs, initial=self.epoch, desc=f"{cfg.model} {cfg.loss}", unit="epoch")
        try:
            while self.epoch < cfg.epochs:
                epoch = self.epoch + 1
                start = time.perf_counter()
                if self.progress:
                    batch_bar = tqdm(total=len(self.train_loader), desc=f"epoch {epoch}", unit="batch", leave=False)
                lr = self.optimizer.param_groups[0]["lr"]
                train_loss = self._train_epoch(epoch, batch_bar)
                if self.device.type == "cuda":
                    torch.cuda.synchronize()
                train_seconds = time.perf_counter() - start
                self.scheduler.step()
                record = {"epoch": epoch, "lr": lr, "train_loss": train_loss,
                          "gamma": _json_float(getattr(self.loss_fn, "gamma", np.nan)),
                          "train_seconds": round(train_seconds, 4),
                          "images_per_s": round(self.train_loader.n / train_seconds, 1)}
                record.update(self.diagnose())
                if self.device.type == "cuda":
                    record["peak_memory_mb"] = round(torch.cuda.max_memory_allocated(self.device) / 2 ** 20, 1)
                self.history["epochs"].append(record)
                self.epoch = epoch
                self.wall_time += time.perf_counter() - start
                self.save_checkpoint()
                _write_json(self.out / "history.json", self.history)
                if batch_bar is not None:
                    batch_bar.close()
                if epoch_bar is not None:
                    epoch_bar.update(1)
                    epoch_bar.set_postfix(loss=f"{train_loss:.4f}", test_acc=f"{record['test']['accuracy']:.3f}",
                                          test_ece=f"{record['test']['ece']:.3f}")
            self._final_logits()
            _write_json(self.out / "meta.json", self._meta(finished=True))
            for name in discard:
                (self.out / name).unlink(missing_ok=True)
        finally:
            if epoch_bar is not None:
                epoch_bar.close()
            if deterministic:
                torch.use_deterministic_algorithms(previous)
        return load_run(self.out)


def train(config: TrainConfig | None = None, out=None, resume: bool = False, progress: bool = True, dataset=None,
          discard=(), restart: bool = False, **fields) -> Run:
    """Run :class:`Trainer` for ``config`` (or a config built from keyword ``fields``) into ``out``.

    ``out`` holding a finished run of the same config returns it without training; holding a run of
    another config raises :class:`RunConfigError` (saying which fields differ).

    Examples
    --------
    >>> run = train(data="digits", model="mlp", loss="fl-3", epochs=3, out="_build/runs/demo")  # doctest: +SKIP
    >>> run.series("test", "ece")                                                                # doctest: +SKIP
    """
    if config is None:
        config = TrainConfig(**fields)
    elif fields:
        config = dataclasses.replace(config, **fields)
    if out is None:
        raise ValueError("out is required: the run directory to write (e.g. out='_build/runs/demo').")
    return Trainer(config, out, progress=progress, dataset=dataset).run(resume=resume, discard=discard,
                                                                         restart=restart)


def config_from_meta(path) -> TrainConfig:
    """The :class:`TrainConfig` of a stored run, read from its ``meta.json`` (the file or its run directory):
    ``calib train --from-meta RUN/meta.json --out DIR`` reruns it with exactly this config.

    The device is not part of a run's identity and is left at ``"auto"``; ``diagnostics`` is taken from the
    meta when it records one.
    """
    path = Path(path)
    if path.is_dir():
        path = path / "meta.json"
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist; pass the meta.json of a run directory (RUN/meta.json).")
    try:
        meta = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path} is not valid JSON ({exc}); pass the meta.json that `calib train` wrote.") from None
    config = meta.get("config") if isinstance(meta, dict) else None
    if not isinstance(config, dict):
        raise ValueError(f"{path} has no 'config' object; pass the meta.json that `calib train` wrote.")
    known = {f.name for f in dataclasses.fields(TrainConfig)}
    unknown = sorted(set(config) - known)
    if unknown:
        raise ValueError(f"{path}: config fields {unknown} are not fields of TrainConfig (a run written by another "
                         f"version of calib?); remove them or upgrade calib.")
    fields_ = dict(config)
    if fields_.get("milestones") is not None:
        fields_["milestones"] = tuple(fields_["milestones"])
    if "diagnostics" in meta:
        fields_["diagnostics"] = meta["diagnostics"]
    return TrainConfig(**fields_)


# ---------------------------------------------------------------- App. B: the linear model, full batch

def logistic_gradient_descent(x, y, gamma=0.0, lr: float = 0.5, iterations: int = 20000, record_every: int = 100,
                              w0=None) -> dict:
    r"""Full-batch gradient descent on bias-free logistic regression ``p = sigma(w . x)`` with cross-entropy
    (gamma = 0) or focal loss (Mukhoti et al. 2020, App. B), for several problems at once.

    The gradient of the focal loss with respect to the logit z is ``g(p_t, gamma)`` times that of
    cross-entropy, ``sigma(z) - y`` (Prop. 1, exact for any parameter), where ``p_t`` is the probability of
    the true label and ``g`` is :func:`calib.focal.gradient.gradient_factor` (computed from the logit); the step is
    ``w <- w - lr * mean_i g_i (sigma(z_i) - y_i) x_i``.

    Parameters
    ----------
    x : array_like, shape (N, d) or (R, N, d)
        Inputs of one problem or of R problems of the same size (e.g. noise levels x losses).
    y : array_like of {0, 1}, shape (N,) or (R, N)
    gamma : float or array_like, shape (R,)
        Focal parameter of each problem (0: cross-entropy).
    lr : float
        Step size (the paper does not give it).
    iterations : int
    record_every : int
        Record ``w`` every this many iterations (and at 0 and the end).
    w0 : array_like, shape (d,) or (R, d), optional
        Starting weights; zero by default.

    Returns
    -------
    dict
        ``iteration`` (T,), ``w`` (R, T, d) (or (T, d) for one problem), ``weight_norm``, ``logit_norm``
        (the mean ``|z_i|`` over the training points) and ``gradient_norm`` (of the risk) with the same leading
        shape, and ``final_w``.
    """
    from scipy.special import expit

    from calib.focal.numerics import gradient_factor_of_logit

    x = np.asarray(to_numpy(x, "x"), dtype=np.float64)
    single = x.ndim == 2
    if single:
        x = x[None]
    if x.ndim != 3:
        raise ValueError(f"x must have shape (N, d) or (R, N, d); got {x.shape}.")
    r, n, d = x.shape
    y = np.asarray(to_numpy(y, "y"), dtype=np.float64).reshape(r, n)
    if not np.isin(y, (0, 1)).all():
        raise ValueError("y must hold binary labels 0 and 1.")
    gamma = np.broadcast_to(np.asarray(gamma, dtype=np.float64), (r,)).reshape(r, 1)
    lr = check_positive(lr, "lr")
    iterations = check_int(iterations, "iterations")
    record_every = check_int(record_every, "record_every")
    w = np.zeros((r, d)) if w0 is None else np.broadcast_to(np.asarray(w0, dtype=np.float64), (r, d)).copy()
    sign = 2 * y - 1
    steps = set(range(0, iterations + 1, record_every)) | {iterations}
    recorded, grads = [], []
    for t in range(iterations + 1):
        z = np.matmul(x, w[:, :, None])[:, :, 0]
        dz = gradient_factor_of_logit(sign * z, gamma) * (expit(z) - y)
        grad = np.matmul(dz[:, None, :], x)[:, 0, :] / n
        if t in steps:
            recorded.append(w.copy())
            grads.append(np.linalg.norm(grad, axis=1))
        if t == iterations:
            break
        w -= lr * grad
    steps = sorted(steps)
    ws = np.stack(recorded, axis=1)                                    # (R, T, d)
    logit_norm = np.abs(np.einsum("rnd,rtd->rtn", x, ws)).mean(axis=2)
    out = {"iteration": np.array(steps), "w": ws, "weight_norm": np.linalg.norm(ws, axis=2),
           "logit_norm": logit_norm, "gradient_norm": np.stack(grads, axis=1), "final_w": ws[:, -1]}
    if single:
        out = {k: (v[0] if k != "iteration" else v) for k, v in out.items()}
    return out


# ------------------------------------------------------------------------------------ the minimal loop

def _as_tensor(a, name: str, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    if isinstance(a, torch.Tensor):
        return a.detach().to(device=device, dtype=dtype)
    return torch.as_tensor(np.ascontiguousarray(to_numpy(a, name)), dtype=dtype, device=device)


def train_classifier(model: torch.nn.Module, x, y, loss, epochs: int, lr: float, batch_size: int | None = None,
                     seed: int = 0, device: str = "cpu", progress: bool = True, optimizer: str = "adam",
                     momentum: float = 0.9, weight_decay: float = 0.0):
    """Fit ``model`` to (x, y) by minimising ``loss`` for a number of epochs.

    Parameters
    ----------
    model : torch.nn.Module
        Maps x (N, ...) to logits (N, K); trained in place.
    x : array_like or torch.Tensor
        Inputs (converted to float32).
    y : array_like or torch.Tensor
        Integer class labels, shape (N,).
    loss : callable or str
        ``loss(logits, targets) -> scalar tensor`` (mean over the batch), or a name for
        :func:`calib.losses.registry.get_loss`.
    epochs : int
        Passes over the data.
    lr : float
        Learning rate.
    batch_size : int, optional
        Mini-batch size (the data are reshuffled every epoch); None: full-batch, one step per epoch.
    seed : int
        Seed of the shuffling (a private torch generator; the global random state is not touched).
    device : str
        ``"cpu"``, ``"cuda"``, ``"auto"`` (see :func:`resolve_device`).
    progress : bool
        Show a tqdm progress bar over the epochs.
    optimizer : {"adam", "sgd"}
        Adam (default betas) or SGD with ``momentum``.
    momentum, weight_decay : float
        Optimizer settings (momentum only for SGD).

    Returns
    -------
    model : torch.nn.Module
        The trained model (the same object), in eval mode, on ``device``.
    history : list of float
        The mean training loss of each epoch (averaged over its mini-batches, weighted by their size;
        computed during the epoch, before each step).
    """
    from calib.losses import get_loss

    epochs = check_int(epochs, "epochs")
    lr = check_positive(lr, "lr")
    check_choice(optimizer, "optimizer", OPTIMIZERS)
    loss_fn = get_loss(loss) if isinstance(loss, str) else loss
    if not callable(loss_fn):
        raise ValueError(f"loss must be a callable (logits, targets) -> scalar tensor or a loss name; got {loss!r}.")
    dev = resolve_device(device)
    xt = _as_tensor(x, "x", torch.float32, dev)
    yt = _as_tensor(y, "y", torch.long, dev)
    if yt.ndim != 1 or yt.shape[0] != xt.shape[0]:
        raise ValueError(f"y must have shape ({xt.shape[0]},), one label per row of x; got {tuple(yt.shape)}.")
    n = xt.shape[0]
    if batch_size is not None:
        batch_size = min(check_int(batch_size, "batch_size"), n)
    model.to(dev).train()
    params = [p for p in model.parameters() if p.requires_grad]
    if optimizer == "adam":
        opt = torch.optim.Adam(params, lr=lr, weight_decay=weight_decay)
    else:
        opt = torch.optim.SGD(params, lr=lr, momentum=momentum, weight_decay=weight_decay)
    gen = torch.Generator(device="cpu").manual_seed(int(seed))
    history: list[float] = []
    epoch_iter = range(epochs)
    if progress:
        from tqdm.auto import tqdm

        epoch_iter = tqdm(epoch_iter, desc="training", unit="epoch", leave=False)
    for _ in epoch_iter:
        if batch_size is None:
            batches = [None]
        else:
            order = torch.randperm(n, generator=gen).to(dev)
            batches = torch.split(order, batch_size)
        total = 0.0
        for idx in batches:
            xb, yb = (xt, yt) if idx is None else (xt[idx], yt[idx])
            opt.zero_grad(set_to_none=True)
            value = loss_fn(model(xb), yb)
            if not torch.isfinite(value):
                raise FloatingPointError(f"the training loss became {value.item()} at epoch {len(history) + 1}; "
                                         f"lower the learning rate.")
            value.backward()
            opt.step()
            total += value.item() * yb.shape[0]
        history.append(total / n)
        if progress:
            epoch_iter.set_postfix(loss=f"{history[-1]:.4f}")
    model.eval()
    return model, history
