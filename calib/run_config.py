"""The configuration of a training run: :class:`TrainConfig` (every field that determines a run and its
results, checked), the papers' learning-rate milestones, and :func:`config_from_meta`, which reads a stored run's
configuration back from its ``meta.json`` (:mod:`calib.runs` owns that file). :mod:`calib.train` runs a
configuration; ``calib train`` and ``calib sweep`` build one from flags or a grid file.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from calib import runs
from calib._validate import check_choice, check_int, check_positive
from calib.runs import CorruptRunError, check_world_size
from calib.small_training import resolve_device

#: (check_world_size is :mod:`calib.runs`'s, importable from here as well.)
__all__ = ["TrainConfig", "config_from_meta", "paper_milestones", "AUGMENTATIONS", "DEFAULT_AUGMENT", "DIAGNOSTICS",
           "MAX_SEED", "NON_IDENTITY"]

#: The training augmentations, random crop with 4 pixels of padding and/or horizontal flip, or none.
AUGMENTATIONS = ("crop-flip", "crop", "flip", "none")
#: Default augmentation by dataset, the CIFAR recipe (random crop with 4 pixels of padding and horizontal
#: flip, Mukhoti et al. 2020, App. D) for natural images, crop only for digits in photographs (SVHN).
DEFAULT_AUGMENT = {"cifar10": "crop-flip", "cifar100": "crop-flip", "fashion-mnist": "crop-flip", "svhn": "crop",
                   "fashion-mnist-32": "crop-flip"}
#: Config fields that may differ between a run and its resumption (they do not change what is computed).
NON_IDENTITY = ("device", "progress", "diagnostics")
#: What :meth:`calib.train.Trainer.diagnose` records each epoch, "full" (train, validation and test, with the
#: last-layer gradient norms and reliability tables of Mukhoti et al.'s Figs. 1-4) or "eval" (validation and
#: test only: about half the cost of an epoch for a small network, for grids that need only the final logits).
DIAGNOSTICS = ("full", "eval")
#: The largest seed, which every random generator of a run (numpy's legacy ``RandomState`` among them) accepts.
MAX_SEED = 2 ** 32 - 1


def paper_milestones(epochs: int) -> tuple:
    """The epochs after which the learning rate drops: Mukhoti et al.'s 150 and 250 of 350 (Sec. 3, App. D),
    scaled to a run of ``epochs`` epochs (``round(150 E / 350)``, ``round(250 E / 350)``)."""
    return tuple(sorted({max(1, round(150 * epochs / 350)), max(1, round(250 * epochs / 350))}))


@dataclass
class TrainConfig:
    """Everything that determines a training run (and so its results).

    ``milestones=None`` means :func:`paper_milestones`; ``augment=None`` means :data:`DEFAULT_AUGMENT`
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
    interleave: float | None = None
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
        """A copy with the defaults that depend on the data and the device filled in, checked: names are known,
        every number is of its type and in its range (:meth:`check_numbers`)."""
        from calib.data import DATASETS, dataset_names
        from calib.losses import get_loss
        from calib.models import check_model_name

        for name in ("data", "loss", "device", "diagnostics"):
            if not isinstance(getattr(self, name), str):
                raise ValueError(f"{name} must be a name (a string); got {getattr(self, name)!r}.")
        if self.secondary is not None and not isinstance(self.secondary, str):
            raise ValueError(f"secondary must be a loss name or None; got {self.secondary!r}.")
        self.check_numbers()
        get_loss(self.loss, self.secondary, self.secondary_weight)   # unknown names list the valid ones
        data = self.data.strip().lower()
        if data not in DATASETS:
            raise ValueError(f"unknown dataset {self.data!r}; choose from {dataset_names()}.")
        model = check_model_name(self.model)
        milestones = paper_milestones(self.epochs) if self.milestones is None else tuple(self.milestones)
        augment = self.augment if self.augment is not None else DEFAULT_AUGMENT.get(data, "none")
        check_choice(augment, "augment", AUGMENTATIONS)
        check_choice(self.diagnostics, "diagnostics", DIAGNOSTICS)
        for name in ("amp", "channels_last"):
            if getattr(self, name) is not None and not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be true, false or None (on for CUDA); got {getattr(self, name)!r}.")
        cuda = resolve_device(self.device).type == "cuda"
        amp = cuda if self.amp is None else self.amp
        channels_last = cuda if self.channels_last is None else self.channels_last
        secondary = self.secondary.strip().lower() if isinstance(self.secondary, str) else self.secondary
        return dataclasses.replace(self, data=data, model=model, loss=self.loss.strip().lower(), secondary=secondary,
                                   milestones=milestones, augment=augment, amp=amp, channels_last=channels_last)

    def check_numbers(self) -> None:
        """Raise ValueError naming the field unless every number is of its type and in its range: ``epochs``,
        ``batch_size``, ``pool`` and the subsets integers >= 1; ``seed`` an integer in [0, :data:`MAX_SEED`];
        ``lr`` > 0; ``momentum`` in [0, 1) (SGD's heavy ball diverges at 1 and beyond); ``weight_decay`` >= 0;
        ``lr_decay`` in (0, 1]; ``secondary_weight`` > 0, and 1 unless there is a ``secondary`` loss;
        ``interleave`` in (0, 1) and only with a ``secondary`` loss; ``grad_clip`` > 0; ``milestones`` increasing
        epochs in [1, ``epochs``]. Every real is finite."""
        epochs = check_int(self.epochs, "epochs")
        seed = check_int(self.seed, "seed", minimum=0)
        if seed > MAX_SEED:
            raise ValueError(f"seed must be at most {MAX_SEED} (2**32 - 1, what every random generator of a run "
                             f"accepts); got {seed}.")
        for name in ("batch_size", "pool", "train_subset", "val_subset", "test_subset"):
            if getattr(self, name) is not None or name in ("batch_size", "pool"):
                check_int(getattr(self, name), name)
        check_positive(self.lr, "lr")
        for name, low, high, closed in (("momentum", 0.0, 1.0, "[0, 1)"), ("lr_decay", 0.0, 1.0, "(0, 1]")):
            value = check_positive(getattr(self, name), name, allow_zero=True)
            if not (low <= value < high if name == "momentum" else low < value <= high):
                raise ValueError(f"{name} must lie in {closed}; got {value:g}.")
        check_positive(self.weight_decay, "weight_decay", allow_zero=True)
        weight = check_positive(self.secondary_weight, "secondary_weight")
        if self.secondary is None and weight != 1.0:
            raise ValueError(f"secondary_weight={weight:g} needs a secondary loss (e.g. secondary='sb-ece'): it "
                             f"weighs the secondary loss, and there is none.")
        if self.interleave is not None:
            fraction = self.interleave
            if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not 0 < fraction < 1:
                raise ValueError(f"interleave must be the held-out fraction of the training set, a number in (0, 1) "
                                 f"(e.g. interleave=0.1), or None for joint training; got {fraction!r}.")
            if self.secondary is None:
                raise ValueError(f"interleave={fraction:g} needs a secondary loss (e.g. secondary='sb-ece'): the "
                                 f"held-out part is trained on the secondary loss alone (Karandikar et al. 2021, App. "
                                 f"B); set secondary, or drop interleave.")
        if self.grad_clip is not None:
            check_positive(self.grad_clip, "grad_clip")
        if self.milestones is not None:
            if isinstance(self.milestones, (str, bytes)) or not isinstance(self.milestones, (list, tuple)):
                raise ValueError(f"milestones must be a list of epochs, e.g. [5, 8]; got {self.milestones!r}.")
            steps = [check_int(m, "milestones") for m in self.milestones]
            if any(b <= a for a, b in zip(steps, steps[1:])) or (steps and steps[-1] > epochs):
                raise ValueError(f"milestones must be increasing epochs in [1, epochs={epochs}]; got {steps}.")

    def identity(self) -> dict:
        """The fields that must agree for two runs to be the same run (``interleave`` only when it is set: a run
        stored before the option existed is the same run as one of its configuration without it)."""
        d = dataclasses.asdict(self)
        d["milestones"] = list(d["milestones"]) if d["milestones"] is not None else None
        return {k: v for k, v in d.items() if k not in NON_IDENTITY and not (k == "interleave" and v is None)}


def config_from_meta(path, world_size: int | None = None) -> TrainConfig:
    """The :class:`TrainConfig` of a stored run, read from its ``meta.json`` (the file or its run directory):
    ``calib train --from-meta RUN/meta.json --out DIR`` reruns it with exactly this config.

    The device is not part of a run's identity and is left at ``"auto"``; ``diagnostics`` is taken from the
    meta when it records one. With ``world_size`` (the processes that will train it; ``calib train`` passes its
    launch's) the run must have been trained by as many (the meta's ``world_size``, 1 when it records none), or
    :func:`~calib.runs.check_world_size`'s RunConfigError (a ValueError) says how to launch it: the gradient of N
    processes is summed in another order than one process's, and training amplifies the difference (README,
    "Training across processes"), so a 2-process run retrained in one process does not give its logits. ``None``
    (reading a stored run) checks nothing.
    """
    path = Path(path)
    if path.is_dir():
        path = path / runs.META
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist; pass the meta.json of a run directory (RUN/meta.json).")
    meta = runs.read_json_object(path, fix="pass the meta.json that `calib train` wrote, or restore this one")
    config = meta.get("config")
    if not isinstance(config, dict):
        raise CorruptRunError(f"{path} has no 'config' object; pass the meta.json that `calib train` wrote.")
    fields_ = {f.name: f for f in dataclasses.fields(TrainConfig)}
    unknown = sorted(set(config) - set(fields_))
    if unknown:
        raise CorruptRunError(f"{path}: config fields {unknown} are not fields of TrainConfig (a run written by "
                              f"another version of calib?); remove them or upgrade calib.")
    required = [name for name, f in fields_.items() if f.default is dataclasses.MISSING]
    missing = [name for name in required if name not in config]
    if missing:
        raise CorruptRunError(f"{path}: the config lacks {', '.join(missing)} (every run records {', '.join(required)}"
                              f"); the file is damaged or was not written by calib train. Restore it.")
    if world_size is not None:
        check_world_size(meta, world_size, f"{path} records", f"calib train --from-meta {path} --out DIR")
    values = dict(config)
    if "diagnostics" in meta:
        values["diagnostics"] = meta["diagnostics"]
    config = TrainConfig(**values)
    try:
        config.check_numbers()
    except ValueError as exc:
        raise CorruptRunError(f"{path}: {exc} The file is damaged or was not written by calib train.") from None
    if config.milestones is not None:
        config = dataclasses.replace(config, milestones=tuple(config.milestones))
    return config
