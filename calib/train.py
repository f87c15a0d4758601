"""Training: one run of a network on a dataset with per-epoch diagnostics, checkpoints and exact resume.

:func:`train` (and ``calib train``) runs the recipe of Mukhoti et al. (2020), App. D by default (SGD, momentum
0.9, weight decay 5e-4 (their code), batch 128, learning rate 0.1 divided by 10 at 150/350 and 250/350 of the
run) and writes a run directory (:mod:`calib.runs` owns its format: ``meta.json``, ``history.json``,
``logits.npz``, ``checkpoint.pt``, the lock and the atomic writes). :func:`calib.runs.load_run` reads a run
back (the chapters read committed GPU runs from ``book/results``). The small in-memory trainings of the chapters
(the linear toy's gradient descent, a minimal loop) are :mod:`calib.small_training`; their names stay
importable from here.

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

import numpy as np
import torch

from calib import distributed, runs
from calib._reproducible import cpu_kernel_setting, kernel_fingerprint
from calib._validate import check_choice
from calib.runs import (DISCARDABLE, CorruptRunError, DiskFullError, ReadOnlyRunError, Run,  # noqa: F401 (re-exported)
                        RunConfigError, RunLockedError, load_run)
from calib.run_config import (AUGMENTATIONS, DEFAULT_AUGMENT, DIAGNOSTICS, MAX_SEED, TrainConfig,  # noqa: F401
                               check_world_size, config_from_meta, paper_milestones)
from calib.small_training import logistic_gradient_descent, resolve_device, train_classifier  # noqa: F401

#: (TrainConfig, config_from_meta, paper_milestones and the constants of a config are :mod:`calib.run_config`'s,
#: importable from here as well.)
__all__ = ["Trainer", "train", "torch_flags", "GRAD_NORM_EDGES", "split_statistics"]

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


def _epoch_seed(seed: int, epoch: int) -> int:
    """The seed of epoch ``epoch``'s data order and augmentation: independent of any state, so a resumed
    run replays exactly the batches an uninterrupted one would have seen."""
    return int(np.random.SeedSequence([int(seed), int(epoch), 0x0CA1]).generate_state(1, dtype=np.uint64)[0] >> 1)


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
        self.launch = distributed.launch()
        if out is None or not str(out).strip():
            raise ValueError(f"out is {'empty' if out is not None else 'missing'}; name the run directory (e.g. "
                             f"--out _build/runs/demo).")
        self.out = Path(out)
        self.progress = progress and self.launch.main
        self._dataset = dataset
        self._lock = None                   # rank 0's RunLock while it runs (checks the folder was not moved)
        self.found = None                   # what run() found under the lock: "new", "resume" or "done"

    # ------------------------------------------------------------------------------------------ set-up
    def _setup(self):
        from calib.data import TensorLoader, load_dataset
        from calib.losses import get_loss
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
        runs.write_atomic(self.out / runs.CHECKPOINT, lambda p: torch.save(state, p))

    def load_checkpoint(self) -> None:
        """Restore the model, optimiser, scheduler, history and random states from ``checkpoint.pt``."""
        state = runs.read_checkpoint(self.out / runs.CHECKPOINT, self.device)
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        self.history = state["history"]
        self.epoch = int(state["epoch"])
        self.wall_time = float(state.get("wall_time", 0.0))
        self._set_rng_state(state["rng"])

    def _check_out(self, resume: bool) -> str:
        """``"new"``, ``"resume"`` or ``"done"`` for the run directory; RunConfigError when it holds a
        different run (or an unfinished one and ``resume`` is off, or one begun under another CPU instruction
        set or by another number of processes); CorruptRunError when a file it needs is damaged."""
        meta_path, ckpt = self.out / runs.META, self.out / runs.CHECKPOINT
        if not meta_path.is_file() and not ckpt.is_file():
            return "new"
        meta = {}
        if meta_path.is_file():
            try:
                meta = runs.read_json_object(meta_path)
            except CorruptRunError:
                runs.read_json_object(meta_path, fix=self._restart_advice())     # the same error, safe advice
            if not isinstance(meta.get("config"), dict) or "versions" not in meta:
                raise RunConfigError(f"{meta_path} was not written by calib train (it has no config and versions); "
                                     f"refusing to touch {self.out}. Choose another --out.")
        old = meta.get("config") or runs.read_checkpoint(ckpt, "cpu", fix=self._restart_advice())["config"]
        new = self.config.identity()
        diff = {k: (old.get(k), v) for k, v in new.items() if old.get(k) != v}
        if diff:
            what = "; ".join(f"{k}: {a!r} there, {b!r} here" for k, (a, b) in diff.items())
            raise RunConfigError(f"{self.out} holds a run of another configuration ({what}); refusing to "
                                 f"{'resume' if resume else 'overwrite'} it. Choose another --out or delete that "
                                 f"directory.")
        if meta.get("finished"):
            if (self.out / runs.LOGITS).is_file():
                runs.read_logits(self.out / runs.LOGITS)          # a finished run is done only with whole logits
            return "done"
        if not resume:
            raise RunConfigError(f"{self.out} holds an unfinished run of this configuration; pass --resume "
                                 f"(resume=True) to continue it, or delete the directory to start over.")
        if not ckpt.is_file():
            return "new"
        self._check_cpu_kernels(meta)
        check_world_size(meta, self.launch.world_size, f"{self.out} holds",
                         f"calib train --from-meta {self.out / runs.META} --out {self.out} --resume",
                         ", or start it over with --restart")
        return "resume"

    def _restart_advice(self) -> str:
        """What a damaged file's message advises: ``--restart`` only where it cannot delete another run."""
        owner, why = runs.run_owner(self.out, self.config.identity())
        if owner in ("same", "none"):
            return "restore it, or start the run over with --restart (restart=True)"
        return (f"restore it, or choose another --out ({why}, and --restart deletes only a run of this "
                f"configuration)")

    def _check_cpu_kernels(self, meta: dict) -> None:
        """Refuse to resume on the CPU under another instruction set than the run began with (float32 SGD does not
        continue bit for bit across AVX2 and AVX-512 kernels: the logits of chapter 10's grid differ by a
        logit and more), naming both settings."""
        if resolve_device(self.config.device).type != "cpu" or not str(meta.get("device", "cpu")).startswith("cpu"):
            return
        now = cpu_kernel_setting()
        then = {"capability": meta.get("cpu_capability", now["capability"]),
                "variables": meta.get("cpu_kernels", now["variables"])}
        if then != now:
            def text(setting):
                set_vars = ", ".join(f"{k}={v}" for k, v in setting["variables"].items() if v is not None)
                return set_vars or "no variable set"

            if then["capability"] == now["capability"]:    # one instruction set for torch, other variables
                what = (f"this process runs {now['capability']} too but under other variables ({text(now)}), which "
                        f"also choose MKL's and oneDNN's kernels; a resume is refused unless they match, since float32 "
                        f"training continues bit for bit only under the setting it began with")
            else:
                what = (f"this process runs {now['capability']} ({text(now)}); float32 training does not continue "
                        f"bit for bit across instruction sets, so a run resumed here would match neither")
            raise RunConfigError(f"{self.out} was begun with torch's CPU kernels on {then['capability']} "
                                 f"({text(then)}), and {what}. Resume it under the variables it began with, or start "
                                 f"it over with --restart.")
        recorded = (meta.get("cpu_fingerprint") or {}).get("torch")
        here = kernel_fingerprint()
        if recorded and meta["cpu_fingerprint"].get("version") == here["version"] and recorded != here["torch"]:
            raise RunConfigError(f"{self.out} was begun on a CPU whose float32 kernels compute otherwise than this "
                                 f"one's under the same setting (kernel fingerprint {recorded} then, {here['torch']} "
                                 f"here: MKL also picks its kernels by the CPU's vendor, calib._reproducible), so a run "
                                 f"resumed here would continue neither run bit for bit. Resume it on a machine like "
                                 f"the one it began on ({meta.get('device_name')}), or start it over with --restart.")

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
        world = self.launch.world_size
        for xb, yb in self.train_loader.epoch(generator):
            batch = yb.shape[0]
            if world > 1:                      # this rank's share of the global batch
                rows = distributed.local_rows(batch, self.launch)
                xb, yb = xb[rows], yb[rows]
            self.optimizer.zero_grad(set_to_none=True)
            with amp:
                logits = self.train_model(xb)
            value = self.loss_fn(logits.float(), yb)
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
        mean_loss = float(total) / self.train_loader.n
        if not np.isfinite(mean_loss):
            raise FloatingPointError(f"the training loss became {mean_loss} in epoch {epoch}; lower --lr or set "
                                     f"--grad-clip.")
        return mean_loss

    def _meta(self, finished: bool, discarded=()) -> dict:
        import scipy

        import calib

        kernels = cpu_kernel_setting()
        return {"config": self.config.identity(), "diagnostics": self.config.diagnostics, "device": str(self.device), "device_name": runs.device_name(self.device),
                "finished": finished, "epochs_done": self.epoch, "wall_time_s": round(self.wall_time, 3),
                "n_parameters": self.n_parameters, "dataset": {"name": self.dataset.name, "source": self.dataset.source,
                "n_train": len(self.dataset.y_train), "n_val": len(self.dataset.y_val), "n_test": len(self.dataset.y_test)},
                "versions": {"calib": getattr(calib, "__version__", "0.1.0"), "torch": torch.__version__,
                             "numpy": np.__version__, "scipy": scipy.__version__, "python": sys.version.split()[0]},
                "git_commit": runs.git_commit(), "git_dirty": runs.git_dirty(), "threads": torch.get_num_threads(),
                "world_size": self.launch.world_size,
                "cpu_capability": kernels["capability"], "cpu_kernels": kernels["variables"],
                **({"cpu_fingerprint": kernel_fingerprint()} if self.device.type == "cpu" else {}),
                "written": time.strftime("%Y-%m-%d %H:%M:%S"), **({"discarded": list(discarded)} if finished else {})}

    def _final_logits(self) -> None:
        arrays = {}
        for split in ("val", "test"):
            arrays[f"{split}_logits"] = self._evaluate(split, with_grads=False)["logits"].astype(np.float32)
            arrays[f"{split}_labels"] = self.eval_loaders[split].y.cpu().numpy().astype(np.int64)
        runs.write_logits(self.out / runs.LOGITS, arrays)

    def run(self, resume: bool = False, discard=(), restart: bool = False) -> Run:
        """Train (or resume, or skip a finished run of the same config) and return the run directory.

        ``discard`` names files of :data:`~calib.runs.DISCARDABLE` to delete once the run has finished: a stored run needs
        no ``checkpoint.pt``, and a tuning run whose validation history is all that is read needs no
        ``logits.npz`` either. ``restart`` starts a run of the same configuration over (a corrupted checkpoint).
        The directory is locked while the run writes to it (a second process is refused,
        ``calib.train.RunLockedError``); temporaries left by a killed run are removed first. Across processes
        (module docstring) rank 0 holds the lock and decides; every rank raises its error."""
        if isinstance(discard, str):
            raise ValueError(f"discard must be a list of file names, e.g. [{discard!r}]; got the string {discard!r}.")
        discard = tuple(discard)
        for name in discard:
            check_choice(name, "discard", DISCARDABLE)
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
                self._make_out()
                lock = self._lock = runs.RunLock(self.out).__enter__()
            except BaseException as exc:
                distributed.broadcast_object(exc)
                raise
            run = None
            try:
                try:
                    state = self._check_state(resume, restart)
                except BaseException as exc:
                    distributed.broadcast_object(exc)
                    raise
                distributed.broadcast_object(state)
                if state != "done":
                    with torch_flags(device_type):
                        run = self._run(state, discard)
            finally:
                lock.release(remove=True)
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

    def _check_state(self, resume: bool, restart: bool) -> str:
        """Under the lock: remove a killed run's temporaries, clear for ``restart``, and return ``"new"``,
        ``"resume"`` or ``"done"`` (:meth:`_check_out`), refusing a directory that cannot be written."""
        runs.remove_temporaries(self.out)              # temporaries of a killed run
        if restart:
            self._clear_for_restart()
        state = self._check_out(resume)
        if state != "done" and not os.access(self.out, os.W_OK):
            raise ReadOnlyRunError(f"out {self.out} is not writable; choose a writable --out, or make the "
                                   f"directory writable.")
        self.found = state
        return state

    def _make_out(self) -> None:
        if (self.out / runs.META).is_file():
            return                                      # an existing run (maybe read-only, e.g. a stored one)
        try:
            self.out.mkdir(parents=True, exist_ok=True)
        except FileExistsError:
            if self.out.is_symlink() and not self.out.exists():
                raise ValueError(f"out {self.out} is a dangling symlink (to {os.readlink(self.out)}, which does not "
                                 f"exist); remove the link, or point it at a folder.") from None
            raise ValueError(f"out {self.out} is a file, not a directory; choose another --out.") from None
        except NotADirectoryError:
            raise ValueError(f"out {self.out} lies under a file; choose another --out.") from None
        except PermissionError:
            raise ReadOnlyRunError(f"out {self.out} cannot be created (permission denied); choose a writable "
                                   f"--out.") from None
        if not self.out.is_dir():
            raise ValueError(f"out {self.out} is not a directory; choose another --out.")

    def _clear_for_restart(self) -> None:
        """``restart``: remove the run's files when they are a run of this configuration written by calib (its
        readable ``meta.json`` or, that one damaged, its checkpoint says so) or a lone damaged ``meta.json``;
        refuse otherwise, deleting nothing (:func:`calib.runs.run_owner`)."""
        owner, why = runs.run_owner(self.out, self.config.identity())
        if owner not in ("same", "none"):
            raise RunConfigError(f"{why}; --restart only starts over a run of this configuration written by calib "
                                 f"train, and deletes nothing else. Choose another --out, or move that directory "
                                 f"away yourself.")
        for name in runs.RUN_FILES:
            (self.out / name).unlink(missing_ok=True)

    def _run(self, state: str, discard: tuple) -> Run:
        self._setup()
        if state == "resume":
            self.load_checkpoint()
        cfg = self.config
        main = self.launch.main
        if main:
            runs.write_json(self.out / runs.META, self._meta(finished=False))
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
                if main:                       # rank 0 evaluates and writes; the others wait at the barrier
                    record.update(self.diagnose())
                    if self.device.type == "cuda":
                        record["peak_memory_mb"] = round(torch.cuda.max_memory_allocated(self.device) / 2 ** 20, 1)
                self.history["epochs"].append(record)
                self.epoch = epoch
                self.wall_time += time.perf_counter() - start
                if main:
                    self._lock.check_in_place()        # moved or renamed meanwhile: stop, write nothing more
                    self.save_checkpoint()
                    runs.write_json(self.out / runs.HISTORY, self.history)
                distributed.barrier()
                if batch_bar is not None:
                    batch_bar.close()
                if epoch_bar is not None:
                    epoch_bar.update(1)
                    epoch_bar.set_postfix(loss=f"{train_loss:.4f}", test_acc=f"{record['test']['accuracy']:.3f}",
                                          test_ece=f"{record['test']['ece']:.3f}")
            if not main:
                return None
            self._lock.check_in_place()
            self._final_logits()
            runs.write_json(self.out / runs.META, self._meta(finished=True, discarded=discard))
            for name in discard:
                (self.out / name).unlink(missing_ok=True)
        finally:
            if epoch_bar is not None:
                epoch_bar.close()
        return load_run(self.out)


def train(config: TrainConfig | None = None, out=None, resume: bool = False, progress: bool = True, dataset=None,
          discard=(), restart: bool = False, **fields) -> Run:
    """Run :class:`Trainer` for ``config`` (or a config built from keyword ``fields``) into ``out``.

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
    return Trainer(config, out, progress=progress, dataset=dataset).run(resume=resume, discard=discard,
                                                                         restart=restart)
