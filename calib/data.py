"""Datasets: scikit-learn's bundled data, Fashion-MNIST, CIFAR-10/100, SVHN and the papers' toy problems as
:class:`Dataset` objects with fixed seeded train/validation/test splits, and a loader that keeps the data on the
training device.

The toy problems' generators are :mod:`calib.toy_data`, the image datasets' files (where they are found,
their checked download, calib's own readers) :mod:`calib.dataset_files` and the corrupted images of
Fashion-MNIST-C (:func:`~calib.corruptions.corrupt_images`) :mod:`calib.corruptions`; all are importable from
here as well (``from calib.data import make_linear_toy, corrupt_images``). Image datasets are found in this order:

1. the folder passed as ``root``;
2. ``$CALIB_DATA/<name>`` (default ``~/.cache/calib/<name>``), the download cache;
3. for Fashion-MNIST only, Debian's ``dataset-fashion-mnist`` package (``/usr/share/datasets/fashion-mnist``);
4. a download from the official location into the cache, checked against the MD5 checksum the dataset's
   authors publish (:data:`calib.dataset_files.SOURCES`).

:func:`load_dataset` turns any of them into a :class:`Dataset`: fixed splits (CIFAR 45k/5k/10k as Mukhoti
et al. 2020, App. D; Fashion-MNIST 55k/5k/10k), the validation part drawn from the training files with the
same seeded shuffle as the focal_calibration code (``numpy.random.seed(1)``, the first 10% of a shuffled
index). :class:`TensorLoader` serves mini-batches from tensors held on the training device, doing the random
crop and flip there.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np

from calib._validate import check_int
from calib.corruptions import CORRUPTIONS, corrupt_images  # noqa: F401 (re-exported: Fashion-MNIST-C)
from calib.dataset_files import (DEBIAN_FASHION_MNIST, SOURCES, DatasetNotFoundError,  # noqa: F401 (re-exported)
                                 data_home, load_cifar, load_fashion_mnist, load_svhn, read_cifar_archive, read_idx,
                                 read_svhn_mat)
from calib.toy_data import (THREE_CLASS_1D, LinearToy, gaussian_1d_joint, gaussian_1d_posterior,  # noqa: F401
                            gaussian_mixture_means, make_gaussian_1d, make_gaussian_mixture, make_linear_toy,
                            separability_through_origin)

__all__ = ["Dataset", "DATASETS", "SPLITS", "load_dataset", "dataset_names", "validation_split", "TensorLoader"]

# ------------------------------------------------------------------------------------ splits, Dataset

def validation_split(n: int, n_val: int, seed: int = 1):
    """``(train_index, val_index)``: a shuffled index of ``range(n)`` whose first ``n_val`` entries are the
    validation set, as in torrvision/focal_calibration ``Data/cifar10.py`` (``np.random.seed(1)``, then
    ``np.random.shuffle``; with ``seed=1`` this reproduces their CIFAR 45k/5k split)."""
    n, n_val = check_int(n, "n"), check_int(n_val, "n_val", minimum=0)
    if n_val >= n:
        raise ValueError(f"n_val={n_val} must be smaller than the number of training samples n={n}.")
    index = np.arange(n)
    np.random.RandomState(seed).shuffle(index)
    return index[n_val:], index[:n_val]


@dataclass(frozen=True)
class Dataset:
    """Fixed train / validation / test splits of one dataset.

    Images are uint8 of shape (N, C, H, W) (the loader scales them by 1/255); feature vectors and the digits
    are float32. ``mean`` and ``std`` (per channel for images, per feature otherwise, computed on the
    training split) are what the loader normalises with.
    """

    name: str
    x_train: np.ndarray
    y_train: np.ndarray
    x_val: np.ndarray
    y_val: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    n_classes: int
    mean: np.ndarray
    std: np.ndarray
    source: str = ""
    classes: tuple = field(default=())

    @property
    def input_shape(self) -> tuple:
        """The shape of one input, e.g. (3, 32, 32) for CIFAR or (d,) for tabular data."""
        return tuple(self.x_train.shape[1:])

    @property
    def is_image(self) -> bool:
        """Whether the inputs are images, of shape (N, C, H, W)."""
        return self.x_train.ndim == 4

    def subset(self, n_train: int | None = None, n_val: int | None = None, n_test: int | None = None,
               seed: int = 1) -> "Dataset":
        """A smaller copy: the first ``n_train`` training and ``n_val`` validation samples (both splits are
        already in a random order) and a seeded random ``n_test`` of the test set (kept in file order)."""
        x_tr, y_tr, x_va, y_va, x_te, y_te = (self.x_train, self.y_train, self.x_val, self.y_val,
                                               self.x_test, self.y_test)
        if n_train is not None:
            x_tr, y_tr = x_tr[:check_int(n_train, "n_train")], y_tr[:n_train]
        if n_val is not None:
            x_va, y_va = x_va[:check_int(n_val, "n_val")], y_va[:n_val]
        if n_test is not None and check_int(n_test, "n_test") < len(y_te):
            keep = np.sort(np.random.RandomState(seed).permutation(len(y_te))[:n_test])
            x_te, y_te = x_te[keep], y_te[keep]
        return replace(self, x_train=x_tr, y_train=y_tr, x_val=x_va, y_val=y_va, x_test=x_te, y_test=y_te)


    def long_tailed(self, ratio: float, splits=("train", "val")) -> "Dataset":
        """A class-imbalanced copy: in each split of ``splits``, class c of K keeps the first
        :math:`\\lfloor n_{\\max}\\, \\rho^{-c/(K-1)} \\rfloor` of its samples (at least one), :math:`n_{\\max}` the
        split's smallest class count and :math:`\\rho` = ``ratio`` the largest over the smallest class size: the
        exponential profile of the long-tailed CIFAR of Cui et al. (2019, "Class-balanced loss based on effective
        number of samples") with class 0 the most frequent. The splits are already in a random order, so the first
        samples of a class are a random draw of it; the kept samples stay in split order, and the normalisation is
        recomputed on the new training split. The other splits (by default the test split) are unchanged, balanced
        as they were; pass ``splits=("train", "val", "test")`` to shift the test prior too.
        """
        ratio = float(ratio)
        if not np.isfinite(ratio) or ratio < 1:
            raise ValueError(f"ratio must be a finite number >= 1 (the largest class over the smallest; 1 keeps the "
                             f"classes balanced); got {ratio}.")
        splits = tuple(splits)
        unknown = [s for s in splits if s not in ("train", "val", "test")]
        if unknown or not splits:
            raise ValueError(f"splits must name some of 'train', 'val', 'test'; got {splits!r}.")
        k = self.n_classes
        fractions = ratio ** (-np.arange(k) / max(k - 1, 1))
        out = {}
        for split in splits:
            y = getattr(self, f"y_{split}")
            counts = np.bincount(y, minlength=k)
            if counts.min() == 0:
                raise ValueError(f"the {split} split has no sample of class {int(np.argmin(counts))}; a long-tailed "
                                 f"copy needs every class.")
            keep_n = np.maximum(np.floor(counts.min() * fractions).astype(np.int64), 1)
            rank = np.zeros(y.size, dtype=np.int64)                 # the position of each sample within its class
            for c in range(k):
                rank[y == c] = np.arange(counts[c])
            keep = rank < keep_n[y]
            out[f"x_{split}"], out[f"y_{split}"] = getattr(self, f"x_{split}")[keep], y[keep]
        copy = replace(self, **out)
        if "train" in splits:
            mean, std = _normalisation(copy.x_train)
            copy = replace(copy, mean=mean, std=std)
        return copy

    def pooled(self, factor: int) -> "Dataset":
        """The images average-pooled over ``factor`` x ``factor`` blocks (e.g. 2: Fashion-MNIST at 14x14), with
        the normalisation recomputed; a cheaper problem for CPU runs. ``factor=1`` returns the dataset itself."""
        factor = check_int(factor, "factor")
        if factor == 1:
            return self
        if not self.is_image:
            raise ValueError(f"pooling needs images; {self.name} holds feature vectors of shape {self.input_shape}.")
        _, h, w = self.input_shape
        if h % factor or w % factor:
            raise ValueError(f"factor={factor} does not divide the image size {h}x{w}.")

        def pool(x):
            n, c = x.shape[:2]
            out = x.reshape(n, c, h // factor, factor, w // factor, factor).mean(axis=(3, 5), dtype=np.float32)
            return np.round(out).astype(np.uint8) if x.dtype == np.uint8 else out

        x_tr = pool(self.x_train)
        mean, std = _normalisation(x_tr)
        return replace(self, x_train=x_tr, x_val=pool(self.x_val), x_test=pool(self.x_test), mean=mean, std=std)

    def padded(self, size: int) -> "Dataset":
        """The images zero-padded (black, before normalisation) to ``size`` x ``size``, centred (an odd margin puts
        the extra pixel below and to the right), with the normalisation recomputed: Fashion-MNIST's 28x28 at the
        32x32 of the CIFAR networks (2 pixels on each side), as torchvision's ``Pad(2)`` would give. The dataset
        itself when its images already have that size."""
        size = check_int(size, "size")
        if not self.is_image:
            raise ValueError(f"padding needs images; {self.name} holds feature vectors of shape {self.input_shape}.")
        _, h, w = self.input_shape
        if size < max(h, w):
            raise ValueError(f"size={size} is smaller than the {h}x{w} images; give a size of at least {max(h, w)} "
                             f"(padding never crops).")
        if (h, w) == (size, size):
            return self
        top, left = (size - h) // 2, (size - w) // 2
        margins = ((0, 0), (0, 0), (top, size - h - top), (left, size - w - left))

        def pad(x):
            return np.pad(x, margins, mode="constant", constant_values=0)

        x_tr = pad(self.x_train)
        mean, std = _normalisation(x_tr)
        return replace(self, x_train=x_tr, x_val=pad(self.x_val), x_test=pad(self.x_test), mean=mean, std=std)


def _normalisation(x: np.ndarray):
    if x.ndim == 4:
        scale = 255.0 if x.dtype == np.uint8 else 1.0
        mean = np.array([x[:, c].mean(dtype=np.float64) / scale for c in range(x.shape[1])])
        std = np.array([x[:, c].std(dtype=np.float64) / scale for c in range(x.shape[1])])
    else:
        mean, std = x.mean(axis=0, dtype=np.float64), x.std(axis=0, dtype=np.float64)
    return mean.astype(np.float32), np.where(std > 0, std, 1.0).astype(np.float32)


def _from_train_test(name, x_train, y_train, x_test, y_test, n_val, n_classes, source, classes=(),
                     normalise=True, split_seed: int = 1) -> Dataset:
    tr, va = validation_split(len(y_train), n_val, split_seed)
    x_tr, y_tr = x_train[tr], y_train[tr]
    if normalise:
        mean, std = _normalisation(x_tr)
    else:
        shape = x_tr.shape[1:2] if x_tr.ndim == 4 else x_tr.shape[1:]
        mean, std = np.zeros(shape, np.float32), np.ones(shape, np.float32)
    return Dataset(name, x_tr, y_tr, x_train[va], y_train[va], x_test, y_test, n_classes, mean, std, source,
                   tuple(classes))


FASHION_MNIST_CLASSES = ("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker",
                         "Bag", "Ankle boot")
CIFAR10_CLASSES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")


def _sklearn(loader_name: str):
    try:
        import sklearn.datasets as skd
    except ImportError:  # pragma: no cover - sklearn is in the dev extra
        raise ImportError("this dataset ships with scikit-learn; install it (pip install scikit-learn, or the "
                          "project's dev extra: pip install -e '.[dev]').") from None
    return getattr(skd, loader_name)()


def _load_fashion_mnist(root, download, seed):
    x_tr, y_tr, x_te, y_te = load_fashion_mnist(root, download)
    return _from_train_test("fashion-mnist", x_tr, y_tr, x_te, y_te, 5000, 10, "Fashion-MNIST (Xiao et al. 2017)",
                            FASHION_MNIST_CLASSES)


def _load_fashion_mnist_32(root, download, seed):
    """Fashion-MNIST zero-padded to 32x32 (:meth:`Dataset.padded`), the input size of the papers' CIFAR networks;
    the same splits as ``"fashion-mnist"``."""
    padded = _load_fashion_mnist(root, download, seed).padded(32)
    return replace(padded, name="fashion-mnist-32", source="Fashion-MNIST (Xiao et al. 2017), zero-padded to 32x32")


def _load_cifar10(root, download, seed):
    return _from_train_test("cifar10", *load_cifar(10, root, download), 5000, 10, "CIFAR-10 (Krizhevsky 2009)",
                            CIFAR10_CLASSES)


def _load_cifar100(root, download, seed):
    return _from_train_test("cifar100", *load_cifar(100, root, download), 5000, 100, "CIFAR-100 (Krizhevsky 2009)")


def _load_svhn(root, download, seed):
    return _from_train_test("svhn", *load_svhn(root, download), 5000, 10, "SVHN (Netzer et al. 2011)",
                            tuple(str(d) for d in range(10)))


def _tabular(name, x, y, n_classes, source, images=False, classes=()):
    """Seeded 70/10/20 train/validation/test split of a small bundled dataset."""
    n = len(y)
    order = np.random.RandomState(1).permutation(n)
    n_test = int(round(0.2 * n))
    test, rest = order[:n_test], order[n_test:]
    x_rest, y_rest = x[rest], y[rest]
    return _from_train_test(name, x_rest, y_rest, x[test], y[test], int(round(0.1 * n)), n_classes, source, classes)


def _load_digits(root, download, seed):
    bunch = _sklearn("load_digits")
    x = (bunch.images[:, None] / 16.0).astype(np.float32)
    return _tabular("digits", x, bunch.target.astype(np.int64), 10, "scikit-learn's digits (8x8, 1797 images)",
                    classes=tuple(str(d) for d in range(10)))


def _load_breast_cancer(root, download, seed):
    bunch = _sklearn("load_breast_cancer")
    return _tabular("breast-cancer", bunch.data.astype(np.float32), bunch.target.astype(np.int64), 2,
                    "scikit-learn's breast cancer (Wisconsin diagnostic, 569 x 30)", classes=tuple(bunch.target_names))


def _load_linear_toy(root, download, seed):
    toy = make_linear_toy(n_train=4500, n_test=1000, noise=0.1, seed=seed)
    return _from_train_test("linear-toy", toy.x_train, toy.y_train, toy.x_test, toy.y_test, 500, 2,
                            "Mukhoti et al. (2020), App. B toy (10% of labels flipped)", normalise=False)


def _load_gaussian_1d(root, download, seed):
    x, y, _ = make_gaussian_1d(6000, seed=seed)
    return _from_train_test("gaussian-1d", x[:5000], y[:5000], x[5000:], y[5000:], 500, 3,
                            "three-class 1-D Gaussian mixture", normalise=False)


#: The datasets :func:`load_dataset` knows, by name.
#:
#: :meta hide-value:
DATASETS = {
    "fashion-mnist": _load_fashion_mnist, "cifar10": _load_cifar10, "cifar100": _load_cifar100,
    "svhn": _load_svhn, "digits": _load_digits, "breast-cancer": _load_breast_cancer,
    "linear-toy": _load_linear_toy, "gaussian-1d": _load_gaussian_1d, "fashion-mnist-32": _load_fashion_mnist_32,
}

#: Split sizes (train / validation / test) of each dataset.
SPLITS = {"fashion-mnist": (55000, 5000, 10000), "cifar10": (45000, 5000, 10000), "cifar100": (45000, 5000, 10000),
          "svhn": (68257, 5000, 26032), "digits": (1258, 180, 359), "breast-cancer": (398, 57, 114),
          "linear-toy": (4000, 500, 1000), "gaussian-1d": (4500, 500, 1000), "fashion-mnist-32": (55000, 5000, 10000)}


def dataset_names() -> str:
    """The accepted dataset names, for error messages and ``--help``."""
    return ", ".join(repr(n) for n in DATASETS)


def load_dataset(name: str, root=None, download: bool = True, seed: int = 0) -> Dataset:
    """The dataset called ``name`` with its fixed train / validation / test splits (``calib.data.SPLITS``).

    Parameters
    ----------
    name : str
        One of :data:`DATASETS`: ``"fashion-mnist"``, ``"cifar10"``, ``"cifar100"``, ``"svhn"`` (files, see
        the module docstring), ``"digits"``, ``"breast-cancer"`` (bundled with scikit-learn),
        ``"linear-toy"``, ``"gaussian-1d"`` (synthetic, drawn with ``seed``), ``"fashion-mnist-32"``
        (Fashion-MNIST zero-padded to 32x32, :meth:`Dataset.padded`; the same files and splits).
    root : path, optional
        Folder holding the dataset's files (skips the cache, Debian's files and the download).
    download : bool
        Allow a download from the official location when the files are nowhere on disk.
    seed : int
        Seed of the synthetic datasets (the splits of the real ones are fixed).

    Raises
    ------
    ValueError
        For an unknown name, listing the valid ones.
    DatasetNotFoundError
        When the files are missing and cannot be downloaded; the message says how to install them.
    """
    key = name.strip().lower() if isinstance(name, str) else name
    if key not in DATASETS:
        raise ValueError(f"unknown dataset {name!r}; choose from {dataset_names()}.")
    return DATASETS[key](root, download, seed)


# ------------------------------------------------------------------------------------------- the loader

class TensorLoader:
    """Mini-batches from tensors held on the training device, with random crop and flip done there.

    The data are moved to ``device`` once (images stay uint8 there, 1 byte a pixel); each batch is
    cropped, flipped, scaled to [0, 1] and normalised by ``(x - mean) / std`` on the device. An epoch's
    randomness (the order and every crop offset and flip) is drawn up front on the CPU from a generator seeded
    by the caller, so the batches are identical on every device and an epoch can be replayed exactly.

    Parameters
    ----------
    x, y : numpy.ndarray
        Inputs (uint8 images (N, C, H, W), or float32) and int64 labels.
    batch_size : int
    mean, std : array_like, optional
        Per-channel (images) or per-feature normalisation; none by default.
    device : str or torch.device
    augment : bool
        Random crop with ``pad`` zero pixels on each side (none for ``pad=0``) and, with ``flip``, random
        horizontal flip (images only): the CIFAR recipe of Mukhoti et al. (2020), App. D, with the padding
        of 4 of their code.
    channels_last : bool
        Return images in ``torch.channels_last`` memory format (faster convolutions on recent GPUs).
    """

    def __init__(self, x, y, batch_size: int, mean=None, std=None, device="cpu", augment: bool = False,
                 pad: int = 4, flip: bool = True, channels_last: bool = False):
        import torch

        self.batch_size = check_int(batch_size, "batch_size")
        self.device = torch.device(device)
        x = np.asarray(x)
        self.n = len(x)
        if len(y) != self.n:
            raise ValueError(f"y has {len(y)} labels for {self.n} inputs; pass one label per input.")
        self.is_image = x.ndim == 4
        self.scale = 1.0 / 255.0 if x.dtype == np.uint8 else 1.0
        self.x = torch.as_tensor(np.ascontiguousarray(x)).to(self.device)
        self.y = torch.as_tensor(np.asarray(y, dtype=np.int64)).to(self.device)
        stat_shape = (1, -1, 1, 1) if self.is_image else (1, -1)
        self.mean = (None if mean is None
                     else torch.as_tensor(np.asarray(mean, np.float32)).reshape(stat_shape).to(self.device))
        self.std = (None if std is None
                    else torch.as_tensor(np.asarray(std, np.float32)).reshape(stat_shape).to(self.device))
        self.augment = bool(augment) and self.is_image
        self.pad = check_int(pad, "pad", minimum=0)
        self.flip = bool(flip)
        self.channels_last = bool(channels_last) and self.is_image

    def __len__(self) -> int:
        return math.ceil(self.n / self.batch_size)

    def _prepare(self, xb):
        import torch

        xb = xb.to(torch.float32)
        if self.scale != 1.0:
            xb = xb * self.scale
        if self.mean is not None:
            xb = (xb - self.mean) / self.std
        if self.channels_last:
            xb = xb.contiguous(memory_format=torch.channels_last)
        return xb

    def _crop_flip(self, xb, dy, dx, flip):
        import torch
        import torch.nn.functional as F

        b, _, h, w = xb.shape
        p = self.pad
        if p:
            padded = F.pad(xb, (p, p, p, p))
            rows = (dy[:, None] + torch.arange(h, device=xb.device))[:, :, None]     # (B, H, 1)
            cols = (dx[:, None] + torch.arange(w, device=xb.device))[:, None, :]     # (B, 1, W)
            xb = padded[torch.arange(b, device=xb.device)[:, None, None], :, rows, cols].permute(0, 3, 1, 2)
        if not self.flip:
            return xb
        return torch.where(flip[:, None, None, None], xb.flip(3), xb)

    def epoch(self, generator=None, shuffle: bool = True):
        """Iterate over one epoch: ``(x_batch, y_batch)`` on the device.

        ``generator`` (a CPU ``torch.Generator``) draws the order, crops and flips; without one, or with
        ``shuffle=False`` and no augmentation, the data come in order, untouched.
        """
        import torch

        randomise = generator is not None
        if randomise and shuffle:
            order = torch.randperm(self.n, generator=generator)
        else:
            order = torch.arange(self.n)
        augment = self.augment and randomise
        if augment:
            shifts = torch.randint(0, 2 * self.pad + 1, (self.n, 2), generator=generator)
            flips = torch.rand(self.n, generator=generator) < 0.5
        order_dev = order.to(self.device)
        for start in range(0, self.n, self.batch_size):
            idx = order_dev[start:start + self.batch_size]
            xb = self.x[idx]
            if augment:
                sl = slice(start, start + self.batch_size)
                xb = self._crop_flip(xb, shifts[sl, 0].to(self.device), shifts[sl, 1].to(self.device),
                                     flips[sl].to(self.device))
            yield self._prepare(xb), self.y[idx]
