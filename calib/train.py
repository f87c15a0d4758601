"""Training: one run of a network on a dataset with per-epoch diagnostics, checkpoints and exact resume.

:func:`train` (and ``calib train``) runs the recipe of Mukhoti et al. (2020), App. D by default (SGD, momentum
0.9, weight decay 5e-4 (their code), batch 128, learning rate 0.1 divided by 10 at 150/350 and 250/350 of the
run) and writes a run directory; :mod:`calib.runs` owns it (its format, ``meta.json``, ``history.json``,
``logits.npz``, ``checkpoint.pt``, the lock, the atomic writes, and the checks of what a folder holds before a run
writes it, :class:`calib.runs.RunFolder`), and :func:`calib.runs.load_run` reads a run back (the chapters read
committed GPU runs from ``book/results``). The small in-memory trainings of the chapters
(the linear toy's gradient descent, a minimal loop) are :mod:`calib.small_training`; their names stay
importable from here.

**Interleaved training.** With ``interleave`` (:class:`~calib.run_config.TrainConfig`), Karandikar et al.'s
remedy for a primary loss that memorises the training set (2021, App. B): a fraction of the training set is held
out once (:func:`interleave_split`), and each epoch is split in two, the primary loss alone over the rest, then the
weighted secondary loss alone over the held-out part. ``history.json`` records the first part's mean loss as
``train_loss`` and the second's as ``heldout_loss``.

**Across processes.** Launched by ``torchrun --standalone --nproc_per_node N -m calib train ...`` (``WORLD_SIZE``
> 1, :mod:`calib.distributed`), one run trains with ``DistributedDataParallel`` (gloo on the CPU, NCCL on CUDA,
one GPU per process). ``batch_size`` is the *global* batch: every rank draws the epoch's order, crops and flips
from the same seed (the role of a seeded ``DistributedSampler`` with ``set_epoch``) and takes its contiguous
share of each global batch (sizes differing by at most one), so N processes see exactly the batches of one. Each
rank's loss is weighted by its share of the batch (times N, which DDP's gradient mean divides out), so the
all-reduced gradient is that of the mean loss over the global batch, for any split. Rank 0 alone holds the run
lock, evaluates (the diagnostics, on the whole splits) and writes ``meta.json``, ``history.json``,
``logits.npz`` and ``checkpoint.pt``; the other ranks wait at a barrier. Every rank must be given the same
configuration (checked first: a launch whose ranks differ is refused, naming the fields). ``resume`` works as
for one process, on the number of processes the run began with (``meta.json``'s ``world_size``, part of the
run's identity as its CPU instruction set is): every rank loads the checkpoint. What differs from one process:

- batch objectives (SB-ECE, S-AvUC, MMCE, the AURC losses; :mod:`calib.losses.batch`) are computed on each
  rank's share of the batch, not on the whole batch: with N ranks their bins, pairs or ranks come from B / N
  samples, a noisier (and for the binned ones, differently biased) estimate, and the training loss recorded is
  the share-weighted mean of the ranks' values. Gathering the logits would keep them exact but would
  need a differentiable all-gather in every step; per-sample losses are exact either way;
- batch normalisation uses each rank's share on the CPU (as plain DDP does; its running statistics are rank 0's,
  broadcast each step), and the global batch's statistics on CUDA (``SyncBatchNorm``, as one process);
- the float sums of the gradient are taken in another order: 2 gloo ranks stay within about 1e-6 of one
  process's logits for a few epochs of a small MLP (``tests/test_distributed.py`` measures it), and SGD then
  amplifies the difference into another run of the same recipe (logits several units apart and over a tenth of the
  predictions changed after 12 epochs of a 256-256 MLP on Fashion-MNIST; README).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import random
import sys
import time
from pathlib import Path
from typing import cast

import numpy as np
import torch

from calib import distributed, runs
from calib._reproducible import cpu_kernel_setting, kernel_fingerprint
from calib._validate import check_choice
from calib.runs import (DISCARDABLE, CorruptRunError, DiskFullError, ReadOnlyRunError, Run,  # noqa: F401 (re-exported)
                        RunConfigError, RunLockedError, load_run)
from calib.run_config import (AUGMENTATIONS, DEFAULT_AUGMENT, DIAGNOSTICS, MAX_SEED, TrainConfig,  # noqa: F401
                               config_from_meta, paper_milestones)
from calib.small_training import logistic_gradient_descent, resolve_device, train_classifier  # noqa: F401

#: (TrainConfig, config_from_meta, paper_milestones and the constants of a config are :mod:`calib.run_config`'s,
#: importable from here as well.)
__all__ = ["Trainer", "train", "torch_flags", "GRAD_NORM_EDGES", "split_statistics", "interleave_split"]

#: log10-spaced edges of the per-sample last-layer gradient-norm histograms (Fig. 4b-d); norms outside
#: [1e-8, 1e2] are counted in the first or last bin.
#:
#: :meta hide-value:
GRAD_NORM_EDGES = np.logspace(-8, 2, 61)
_QUANTILES = (0.05, 0.25, 0.5, 0.75, 0.95)
def _json_float(x) -> float | None:
    x = float(x)
    return x if np.isfinite(x) else None


@contextlib.contextmanager
def torch_flags(device_type: str):
    """Set torch's global flags for a run on ``device_type`` and restore each one afterwards, also after an error.

    On the CPU, ``torch.use_deterministic_algorithms(True)`` (a resumed run equals an uninterrupted one to the
    bit); on CUDA, cuDNN autotuning and TF32 matmuls and convolutions (speed over bit-exactness). A chapter that
    trains a run and then computes anything else in the same process sees the flags it had before.
    """
    cudnn, matmul = torch.backends.cudnn, torch.backends.cuda.matmul
    saved = (torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled(),
             cudnn.benchmark, matmul.allow_tf32, cudnn.allow_tf32)
    try:
        if device_type == "cpu":
            torch.use_deterministic_algorithms(True)
        elif device_type == "cuda":
            cudnn.benchmark = matmul.allow_tf32 = cudnn.allow_tf32 = True
        yield
    finally:
        torch.use_deterministic_algorithms(saved[0], warn_only=saved[1])
        cudnn.benchmark, matmul.allow_tf32, cudnn.allow_tf32 = saved[2:]


def _source_commit() -> dict:
    """``git_commit`` and ``git_dirty`` of the code that trains: the checkout's (:func:`calib.runs.git_commit`), or,
    where the code runs from a copy without ``.git`` (a GPU machine sent the working tree only), what the copy's
    sender recorded in ``CALIB_GIT_COMMIT`` and ``CALIB_GIT_DIRTY`` (``1`` or ``0``; tests/benchmarks/gpu_grid.sh
    sets them); None where neither says."""
    commit, dirty = runs.git_commit(), runs.git_dirty()
    if commit is None and os.environ.get("CALIB_GIT_COMMIT", "").strip():
        commit = os.environ["CALIB_GIT_COMMIT"].strip()
        flag = os.environ.get("CALIB_GIT_DIRTY", "").strip()
        dirty = {"1": True, "0": False}.get(flag)
    return {"git_commit": commit, "git_dirty": dirty}


def _epoch_seed(seed: int, epoch: int, phase: int = 0) -> int:
    """The seed of epoch ``epoch``'s data order and augmentation: independent of any state, so a resumed
    run replays exactly the batches an uninterrupted one would have seen. ``phase`` 1 is the second part of an
    interleaved epoch (:func:`interleave_split`); phase 0 is every other epoch's (and the first part's)."""
    entropy = [int(seed), int(epoch), 0x0CA1] + ([int(phase)] if phase else [])
    return int(np.random.SeedSequence(entropy).generate_state(1, dtype=np.uint64)[0] >> 1)


def interleave_split(n: int, fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The two parts of a training set of ``n`` samples for interleaved training (Karandikar et al. 2021, App. B):
    the *majority* part, on which each epoch first optimises the primary loss, and the *held-out* part, ``round(
    fraction * n)`` samples drawn at random from ``seed`` (the same for the whole run, and for a resumed one), on
    which it then optimises the secondary loss. Returns the sorted indices of both parts, which partition
    ``range(n)``.

    Raises
    ------
    ValueError
        Unless ``fraction`` lies in (0, 1) and leaves at least one sample in each part.
    """
    if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not 0 < fraction < 1:
        raise ValueError(f"interleave must be a fraction in (0, 1), e.g. 0.1; got {fraction!r}.")
    held = int(round(fraction * n))
    if not 0 < held < n:
        raise ValueError(f"interleave={fraction:g} of {n} training samples leaves {held} held out and {n - held} in "
                         f"the majority part; each part needs at least one sample: choose a fraction nearer 1/2 or "
                         f"train on more samples.")
    order = np.random.default_rng(np.random.SeedSequence([int(seed), 0x1E4F])).permutation(n)
    return np.sort(order[held:]), np.sort(order[:held])


def split_statistics(logits: np.ndarray, labels: np.ndarray, reliability_bins: int | None = None) -> dict:
    """NLL, entropy, accuracy, ECE and AdaECE (15 bins) of one split, overall and split into correctly and
    wrongly classified samples (Mukhoti et al. 2020, Sec. 3, Figs. 2-3): a record of ``history.json``, computed in
    float64 from a split's float32 logits (the last epoch's records recompute from ``logits.npz``)."""
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
    note : str, optional
        A sentence recorded as ``note`` in ``meta.json`` (a grid's ``note``: e.g. that its schedule compresses the
        papers'); it is no part of the run's identity.

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

    def __init__(self, config: TrainConfig, out, progress: bool = True, dataset=None, note: str | None = None):
        if note is not None and (not isinstance(note, str) or not note.strip()):
            raise ValueError(f"note must be a non-empty sentence or None; got {note!r}.")
        self.note = note
        self.config = config.resolved()
        self.launch = distributed.launch()
        if out is None or not str(out).strip():
            raise ValueError(f"out is {'empty' if out is not None else 'missing'}; name the run directory (e.g. "
                             f"--out _build/runs/demo).")
        self.out = Path(out)
        self.progress = progress and self.launch.main
        self._dataset = dataset
        # the folder: made, locked (by rank 0 while it runs), checked against this configuration, written
        self.folder = runs.RunFolder(self.out, self.config.identity(), self.launch.world_size)
        self.found: str | None = None       # what run() found under the lock: "new", "resume" or "done"

    # ------------------------------------------------------------------------------------------ set-up
    def _setup(self):
        from calib.data import TensorLoader, load_dataset
        from calib.losses import get_loss, get_secondary_loss
        from calib.models import build_model, count_parameters

        cfg = self.config
        self.device = resolve_device(cfg.device)
        if self.launch.distributed and self.device.type == "cuda":
            self.device = torch.device("cuda", self.launch.local_rank)
        ds = self._dataset if self._dataset is not None else load_dataset(cfg.data, seed=cfg.seed)
        if ds.name != cfg.data:
            raise ValueError(f"the dataset passed is {ds.name!r} but the config says data={cfg.data!r}.")
        self.dataset = ds = ds.subset(cfg.train_subset, cfg.val_subset, cfg.test_subset).pooled(cfg.pool)
        self.model = build_model(cfg.model, ds.input_shape, ds.n_classes, seed=cfg.seed).to(self.device)
        if cfg.channels_last and ds.is_image:
            self.model = self.model.to(memory_format=torch.channels_last)
        self.n_parameters = count_parameters(self.model)
        self.train_model = self.model
        if self.launch.distributed:
            self._check_shares(len(ds.y_train))
            if self.device.type == "cuda":
                self.model = torch.nn.SyncBatchNorm.convert_sync_batchnorm(self.model)
            ids = [self.device.index] if self.device.type == "cuda" else None
            self.train_model = torch.nn.parallel.DistributedDataParallel(self.model, device_ids=ids)
        self.loss_fn = get_loss(cfg.loss, cfg.secondary, cfg.secondary_weight)
        flip = cfg.augment in ("crop-flip", "flip")
        pad = 4 if cfg.augment in ("crop-flip", "crop") else 0
        common = dict(mean=ds.mean, std=ds.std, device=self.device, channels_last=cfg.channels_last)
        self.train_loader = TensorLoader(ds.x_train, ds.y_train, cfg.batch_size, augment=cfg.augment != "none",
                                         pad=pad, flip=flip, **common)
        self.phases = [(self.train_loader, self.loss_fn)]
        if cfg.interleave is not None:             # Karandikar et al. (2021), App. B: two parts of each epoch
            majority, held_out = self.interleave_parts()
            if self.launch.distributed:
                for part in (majority, held_out):
                    self._check_shares(len(part))
            primary = get_loss(cfg.loss)
            secondary = get_secondary_loss(cast(str, cfg.secondary))
            weight = float(cfg.secondary_weight)

            def weighted(logits, targets):
                return weight * secondary(logits, targets)

            self.phases = [(TensorLoader(ds.x_train[idx], ds.y_train[idx], cfg.batch_size,
                                         augment=cfg.augment != "none", pad=pad, flip=flip, **common), fn)
                           for idx, fn in ((majority, primary), (held_out, weighted))]
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

    def interleave_parts(self) -> tuple[np.ndarray, np.ndarray]:
        """The indices into the (subset) training set of the majority and held-out parts of interleaved training
        (``config.interleave``; :func:`interleave_split`). ValueError when the run does not interleave."""
        if self.config.interleave is None:
            raise ValueError("interleave_parts: this run trains jointly (interleave=None); set interleave, e.g. 0.1.")
        return interleave_split(len(self.dataset.y_train), self.config.interleave, self.config.seed)

    def _check_shares(self, n_train: int) -> None:
        """Refuse a global batch that leaves a rank without rows (a batch, or the epoch's last one, smaller
        than the number of processes)."""
        world, batch = self.launch.world_size, self.config.batch_size
        last = n_train % batch
        if batch < world or 0 < last < world:
            size = batch if batch < world else last
            raise ValueError(f"a global batch of {size} rows (batch_size={batch}, {n_train} training samples) "
                             f"cannot be shared by {world} processes; choose batch_size >= {world} whose last batch "
                             f"(n_train % batch_size) is 0 or >= {world}, or fewer processes.")

    # ----------------------------------------------------------------------------------- checkpointing
    def _rng_state(self) -> dict:
        """The global random states, as tensors, numbers and strings (numpy's key as an int64 tensor), which
        ``torch.load(weights_only=True)`` reads back."""
        name, key, pos, has_gauss, cached_gaussian = cast("tuple[str, np.ndarray, int, int, float]",
                                                          np.random.get_state(legacy=True))
        numpy_state = {"bit_generator": name, "key": torch.from_numpy(key.astype(np.int64)), "pos": int(pos),
                       "has_gauss": int(has_gauss), "cached_gaussian": float(cached_gaussian)}
        state = {"torch": torch.get_rng_state(), "numpy": numpy_state, "python": random.getstate()}
        if torch.cuda.is_available():
            state["cuda"] = torch.cuda.get_rng_state_all()
        return state

    def _set_rng_state(self, state: dict) -> None:
        torch.set_rng_state(state["torch"])
        numpy_state = state["numpy"]
        if isinstance(numpy_state, dict):
            numpy_state = (numpy_state["bit_generator"], numpy_state["key"].cpu().numpy().astype(np.uint32),
                           numpy_state["pos"], numpy_state["has_gauss"], numpy_state["cached_gaussian"])
        np.random.set_state(numpy_state)              # a tuple: a checkpoint written before the dictionary
        random.setstate(state["python"])
        if "cuda" in state and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(state["cuda"])

    def save_checkpoint(self) -> None:
        """Write ``checkpoint.pt`` (atomically) with everything :meth:`load_checkpoint` needs."""
        state = {"config": self.config.identity(), "epoch": self.epoch, "model": self.model.state_dict(),
                 "optimizer": self.optimizer.state_dict(), "scheduler": self.scheduler.state_dict(),
                 "history": self.history, "rng": self._rng_state(), "wall_time": self.wall_time}
        self.folder.write_checkpoint(state)

    def load_checkpoint(self) -> None:
        """Restore the model, optimiser, scheduler, history and random states from ``checkpoint.pt``."""
        state = self.folder.read_checkpoint(self.device)
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        self.history = state["history"]
        self.epoch = int(state["epoch"])
        self.wall_time = float(state.get("wall_time", 0.0))
        self._set_rng_state(state["rng"])

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
            stats = split_statistics(res["logits"], labels, reliability_bins=25 if split == "train" else None)
            if split == "train":
                gn = res["grad_norm"].astype(np.float64)
                counts, _ = np.histogram(np.clip(gn, GRAD_NORM_EDGES[0], GRAD_NORM_EDGES[-1]), bins=GRAD_NORM_EDGES)
                stats["feature_norm"] = float(res["feature_norm"].mean())
                stats["grad_norm"] = {"mean": float(gn.mean()), "histogram": counts.tolist(),
                                      "quantiles": dict(zip(map(str, _QUANTILES),
                                                            np.quantile(gn, _QUANTILES).tolist()))}
            record[split] = stats
        _, head = split_last_layer(self.model)
        with torch.no_grad():
            record["weight_norm"] = float(torch.sqrt(sum(p.float().pow(2).sum() for p in self.model.parameters())))
            record["last_layer_weight_norm"] = float(head.weight.float().norm())
        return record

    # ---------------------------------------------------------------------------------------- training
    def _train_epoch(self, epoch: int, bar=None) -> float:
        """One epoch; the mean training loss. Interleaved (``config.interleave``, Karandikar et al. 2021, App. B):
        the primary loss alone over the majority part, then the weighted secondary loss alone over the held-out
        part, each in its own order (:func:`_epoch_seed`'s phases 0 and 1); the mean returned is the primary's over
        the majority part, and the secondary's over the held-out part is kept in ``self.heldout_loss``."""
        cfg = self.config
        for fn in {id(f): f for f in (self.loss_fn, *(f for _, f in self.phases))}.values():
            if hasattr(fn, "set_epoch"):
                fn.set_epoch(epoch, cfg.epochs)
        self.model.train()
        means = []
        for phase, (loader, loss_fn) in enumerate(self.phases):
            generator = torch.Generator().manual_seed(_epoch_seed(cfg.seed, epoch, phase))
            means.append(self._train_pass(loader, loss_fn, generator, bar) / loader.n)
        self.heldout_loss = means[1] if len(means) > 1 else None
        for mean_loss in means:
            if not np.isfinite(mean_loss):
                raise FloatingPointError(f"the training loss became {mean_loss} in epoch {epoch}; lower --lr or set "
                                         f"--grad-clip.")
        return means[0]

    def _train_pass(self, loader, loss_fn, generator, bar=None) -> float:
        """One pass of ``loss_fn`` over ``loader``'s batches in ``generator``'s order; the summed loss."""
        cfg = self.config
        total = torch.zeros((), dtype=torch.float64, device=self.device)
        amp = torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=bool(cfg.amp))
        world = self.launch.world_size
        for xb, yb in loader.epoch(generator):
            batch = yb.shape[0]
            if world > 1:                      # this rank's share of the global batch
                rows = distributed.local_rows(batch, self.launch)
                xb, yb = xb[rows], yb[rows]
            self.optimizer.zero_grad(set_to_none=True)
            with amp:
                logits = self.train_model(xb)
            value = loss_fn(logits.float(), yb)
            # DDP averages the ranks' gradients: weighting each by world * share gives the global batch's mean
            (value * (world * yb.shape[0] / batch) if world > 1 else value).backward()
            if cfg.grad_clip is not None:
                torch.nn.utils.clip_grad_norm_(self.model.parameters(), cfg.grad_clip)
            self.optimizer.step()
            total += value.detach().double() * yb.shape[0]
            if bar is not None:
                bar.update(1)
        if world > 1:
            torch.distributed.all_reduce(total)
        return float(total)

    def _meta(self, finished: bool, discarded=()) -> dict:
        import scipy

        import calib

        kernels = cpu_kernel_setting()
        return {"config": self.config.identity(), "diagnostics": self.config.diagnostics, "device": str(self.device),
                "device_name": runs.device_name(self.device),
                "finished": finished, "epochs_done": self.epoch, "wall_time_s": round(self.wall_time, 3),
                "n_parameters": self.n_parameters,
                "dataset": {"name": self.dataset.name, "source": self.dataset.source,
                            "n_train": len(self.dataset.y_train), "n_val": len(self.dataset.y_val),
                            "n_test": len(self.dataset.y_test)},
                "versions": {"calib": getattr(calib, "__version__", "0.1.0"), "torch": torch.__version__,
                             "numpy": np.__version__, "scipy": scipy.__version__, "python": sys.version.split()[0],
                             "cuda": torch.version.cuda,
                             **({"cudnn": torch.backends.cudnn.version()} if self.device.type == "cuda" else {})},
                **_source_commit(), "threads": torch.get_num_threads(),
                **({"note": self.note} if self.note else {}),
                "world_size": self.launch.world_size,
                "cpu_capability": kernels["capability"], "cpu_kernels": kernels["variables"],
                **({"cpu_fingerprint": kernel_fingerprint()} if self.device.type == "cpu" else {}),
                "written": time.strftime("%Y-%m-%d %H:%M:%S"), **({"discarded": list(discarded)} if finished else {})}

    def _final_logits(self) -> None:
        arrays = {}
        for split in ("val", "test"):
            arrays[f"{split}_logits"] = self._evaluate(split, with_grads=False)["logits"].astype(np.float32)
            arrays[f"{split}_labels"] = self.eval_loaders[split].y.cpu().numpy().astype(np.int64)
        self.folder.write_logits(arrays)

    def run(self, resume: bool = False, discard=(), restart: bool = False, weights: str | None = None) -> Run:
        """Train (or resume, or skip a finished run of the same config) and return the run directory.

        ``weights`` (one of :data:`~calib.runs.WEIGHT_DTYPES`, e.g. ``"float16"``) also keeps the final network in
        ``weights.npz`` (:func:`calib.runs.write_weights`; :func:`load_network` reads it back); a finished run
        stored without it is refused (RunConfigError: retrain it with ``restart``), since its network is gone.

        ``discard`` names files of :data:`~calib.runs.DISCARDABLE` to delete once the run has finished: a stored run
        needs no ``checkpoint.pt``, and a tuning run whose validation history is all that is read needs no
        ``logits.npz`` either. ``restart`` starts a run of the same configuration over (a corrupted checkpoint).
        The directory is locked while the run writes to it (a second process is refused,
        ``calib.train.RunLockedError``); temporaries left by a killed run are removed first. Across processes
        (module docstring) rank 0 holds the lock and decides; every rank raises its error."""
        if isinstance(discard, str):
            raise ValueError(f"discard must be a list of file names, e.g. [{discard!r}]; got the string {discard!r}.")
        discard = tuple(discard)
        for name in discard:
            check_choice(name, "discard", DISCARDABLE)
        if weights is not None:
            check_choice(weights, "weights", runs.WEIGHT_DTYPES)
        self.weights = weights
        device_type = resolve_device(self.config.device).type
        with distributed.process_group(self.launch, device_type):
            self._check_ranks_agree()
            if not self.launch.main:
                state = distributed.broadcast_object(None)
                if isinstance(state, BaseException):
                    raise state
                if state != "done":
                    with torch_flags(device_type):
                        self._run(state, discard)
                distributed.barrier()                      # rank 0 has written every file
                return load_run(self.out)
            try:
                self.folder.acquire()                      # made and locked
            except BaseException as exc:
                distributed.broadcast_object(exc)
                raise
            run = None
            try:
                try:
                    state = self.found = self.folder.prepare(resume, restart, device_type)
                    if state == "done" and weights and not (self.out / runs.WEIGHTS).is_file():
                        raise runs.RunConfigError(
                            f"{self.out} holds a finished run stored without its network ({runs.WEIGHTS}), which "
                            f"weights={weights!r} asks for; retrain it with --restart (restart=True), or drop weights.")
                except BaseException as exc:
                    distributed.broadcast_object(exc)
                    raise
                distributed.broadcast_object(state)
                if state != "done":
                    with torch_flags(device_type):
                        run = self._run(state, discard)
            finally:
                self.folder.release()
            distributed.barrier()
            return run or load_run(self.out)

    def _check_ranks_agree(self) -> None:
        """Refuse a launch whose processes were given different configurations (another seed, lr or loss would
        train with rank 0's recorded in ``meta.json``, another epochs hang, another batch_size abort): every rank
        gathers every rank's :class:`TrainConfig` and raises the same ValueError, naming each field that differs
        from rank 0's and its value on every rank. A collective; nothing in a single process."""
        if not self.launch.distributed:
            return
        mine = dataclasses.asdict(self.config)
        everyone = distributed.gather_object(mine)
        differ = [f"{name}: " + ", ".join(f"{config.get(name)!r} on rank {rank}"
                                          for rank, config in enumerate(everyone))
                  for name in mine if any(config.get(name) != everyone[0].get(name) for config in everyone)]
        if differ:
            raise ValueError(f"the {len(everyone)} processes of this launch were given different configurations "
                             f"({'; '.join(differ)}); every process must train the same run. Launch them with one "
                             f"command line: torchrun --standalone --nproc_per_node {len(everyone)} -m calib train "
                             f"... (the same flags for every rank).")

    def _run(self, state: str, discard: tuple) -> Run | None:
        self._setup()
        if state == "resume":
            self.load_checkpoint()
        cfg = self.config
        main = self.launch.main
        if main:
            self.folder.write_meta(self._meta(finished=False))
        epoch_bar = batch_bar = None
        if self.progress:
            from tqdm.auto import tqdm

            epoch_bar = tqdm(total=cfg.epochs, initial=self.epoch, desc=f"{cfg.model} {cfg.loss}", unit="epoch")
        try:
            while self.epoch < cfg.epochs:
                epoch = self.epoch + 1
                start = time.perf_counter()
                if self.progress:
                    batch_bar = tqdm(total=sum(len(loader) for loader, _ in self.phases), desc=f"epoch {epoch}",
                                     unit="batch", leave=False)
                lr = self.optimizer.param_groups[0]["lr"]
                train_loss = self._train_epoch(epoch, batch_bar)
                if self.device.type == "cuda":
                    torch.cuda.synchronize()
                train_seconds = time.perf_counter() - start
                self.scheduler.step()
                record = {"epoch": epoch, "lr": lr, "train_loss": train_loss,
                          **({"heldout_loss": self.heldout_loss} if self.heldout_loss is not None else {}),
                          "gamma": _json_float(getattr(self.loss_fn, "gamma", np.nan)),
                          "train_seconds": round(train_seconds, 4),
                          "images_per_s": round(self.train_loader.n / train_seconds, 1)}
                if main:                       # rank 0 evaluates and writes; the others wait at the barrier
                    record.update(self.diagnose())
                    if self.device.type == "cuda":
                        record["peak_memory_mb"] = round(torch.cuda.max_memory_allocated(self.device) / 2 ** 20, 1)
                self.history["epochs"].append(record)
                self.epoch = epoch
                self.wall_time += time.perf_counter() - start
                if main:
                    self.folder.check_in_place()       # moved or renamed meanwhile: stop, write nothing more
                    self.save_checkpoint()
                    self.folder.write_history(self.history)
                distributed.barrier()
                if batch_bar is not None:
                    batch_bar.close()
                if epoch_bar is not None:
                    epoch_bar.update(1)
                    epoch_bar.set_postfix(loss=f"{train_loss:.4f}", test_acc=f"{record['test']['accuracy']:.3f}",
                                          test_ece=f"{record['test']['ece']:.3f}")
            if not main:
                return None
            self.folder.check_in_place()
            self._final_logits()
            if getattr(self, "weights", None):
                self.folder.write_weights(self.model.state_dict(), cast(str, self.weights))
            self.folder.write_meta(self._meta(finished=True, discarded=discard))
            self.folder.discard(discard)
        finally:
            if epoch_bar is not None:
                epoch_bar.close()
        return load_run(self.out)


def train(config: TrainConfig | None = None, out=None, resume: bool = False, progress: bool = True, dataset=None,
          discard=(), restart: bool = False, note: str | None = None, weights: str | None = None, **fields) -> Run:
    """Run :class:`Trainer` for ``config`` (or a config built from keyword ``fields``) into ``out``.

    ``weights`` ("float16" or "float32") also keeps the final network (``weights.npz``, :meth:`Trainer.run`).

    ``out`` holding a finished run of the same config returns it without training; holding a run of
    another config raises :class:`~calib.runs.RunConfigError` (saying which fields differ).

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
    return Trainer(config, out, progress=progress, dataset=dataset, note=note).run(resume=resume, discard=discard,
                                                                                    restart=restart, weights=weights)


# ------------------------------------------------------------------------------------------ a stored network

__all__ += ["load_network", "network_logits"]


def load_network(path, dataset=None, device="cpu"):
    """The final network of the stored run in ``path``, rebuilt from its ``meta.json`` and ``weights.npz`` (a run
    trained with ``weights``, :meth:`Trainer.run`), in eval mode, with the dataset it was trained on.

    The weights are loaded as stored, then held in float32: a float16 file gives the float32 network whose every
    weight is the float16 value (the network a chapter scores, consistently, wherever it reads the file).

    Parameters
    ----------
    path : path
        A run directory.
    dataset : calib.data.Dataset, optional
        The run's dataset as :func:`calib.data.load_dataset` gives it (passed to save reading it again); the run's
        ``train_subset``, ``val_subset``, ``test_subset`` and ``pool`` are applied here, as training did.
    device : str
        Where the network is put.

    Returns
    -------
    (torch.nn.Module, calib.data.Dataset)
        The network, and the dataset whose splits and normalisation (``mean``, ``std``) it was trained with:
        :func:`network_logits` feeds it images as training evaluated them.
    """
    from calib.data import load_dataset
    from calib.models import build_model

    path = Path(path)
    config = config_from_meta(path)
    arrays = runs.read_weights(path / runs.WEIGHTS)
    ds = dataset if dataset is not None else load_dataset(config.data, seed=config.seed)
    if ds.name != config.data:
        raise ValueError(f"the dataset passed is {ds.name!r} but the run in {path} was trained on {config.data!r}.")
    ds = ds.subset(config.train_subset, config.val_subset, config.test_subset).pooled(config.pool)
    model = build_model(config.model, ds.input_shape, ds.n_classes, seed=config.seed)
    expected = model.state_dict()
    if set(arrays) != set(expected) or any(arrays[k].shape != tuple(v.shape) for k, v in expected.items()):
        raise runs.CorruptRunError(f"{path / runs.WEIGHTS} does not hold the parameters of {config.model} for "
                                   f"inputs {ds.input_shape} and {ds.n_classes} classes (the run's meta.json); the "
                                   f"file is of another run. Restore it, or retrain the run with --weights.")
    model.load_state_dict({k: torch.from_numpy(np.asarray(arrays[k]).astype(v.detach().cpu().numpy().dtype))
                           for k, v in expected.items()})
    return model.to(torch.device(device)).eval(), ds


def network_logits(model, images, dataset, batch_size: int = 500, device="cpu") -> np.ndarray:
    """Float32 logits of ``model`` on ``images`` (uint8, shaped as the dataset's, e.g. (N, 1, 28, 28)), each batch
    scaled to [0, 1] and normalised by the dataset's ``mean`` and ``std`` exactly as training evaluated its splits
    (:class:`calib.data.TensorLoader`, no augmentation), in eval mode and without gradients.

    ``batch_size`` 500 is the batch a run's evaluation uses (``max(batch_size, 500)`` for the default training batch
    of 128): a matrix product's last bits depend on the rows it is given at once, so another batch size gives
    logits equal to about 1e-6, not bit for bit."""
    from calib.data import TensorLoader

    images = np.asarray(images)
    if images.shape[1:] != tuple(dataset.x_test.shape[1:]) or images.dtype != dataset.x_test.dtype:
        shape = ", ".join(map(str, dataset.x_test.shape[1:]))
        raise ValueError(f"images must be of the dataset's shape and type, (N, {shape}) {dataset.x_test.dtype}; got "
                         f"{images.shape} {images.dtype}.")
    loader = TensorLoader(images, np.zeros(len(images), dtype=np.int64), batch_size, mean=dataset.mean,
                          std=dataset.std, device=device)
    model.eval()
    with torch.no_grad():
        out = [model(xb).float().cpu() for xb, _ in loader.epoch()]
    return torch.cat(out).numpy().astype(np.float32)
