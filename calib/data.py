"""Datasets: the papers' toy problems (numpy, seeded), scikit-learn's bundled data, Fashion-MNIST, CIFAR-10/100
and SVHN, with fixed seeded train/validation/test splits, and a loader that keeps the data on the training
device.

Synthetic generators return numpy arrays: inputs ``x`` (float32, shape (n, d)), integer labels ``y`` (int64,
shape (n,)) and, where the truth is known, the true class posterior ``eta`` (float64, shape (n, K)) or the
mask of flipped labels.

Image datasets are read by calib's own readers from the files their authors publish (torchvision is not a
dependency), found in this order:

1. the folder passed as ``root``;
2. ``$CALIB_DATA/<name>`` (default ``~/.cache/calib/<name>``), the download cache;
3. for Fashion-MNIST only, Debian's ``dataset-fashion-mnist`` package (``/usr/share/datasets/fashion-mnist``);
4. a download from the official location into the cache, checked against the MD5 checksum the dataset's
   authors publish (:data:`SOURCES`).

:func:`load_dataset` turns any of them into a :class:`Dataset`: fixed splits (CIFAR 45k/5k/10k as Mukhoti
et al. 2020, App. D; Fashion-MNIST 55k/5k/10k), the validation part drawn from the training files with the
same seeded shuffle as the focal_calibration code (``numpy.random.seed(1)``, the first 10% of a shuffled
index). :class:`TensorLoader` serves mini-batches from tensors held on the training device, doing the random
crop and flip there.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import math
import os
import pickle
import tarfile
import urllib.request
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
from scipy.special import softmax

from calib._validate import as_float_array, check_int, check_positive

__all__ = [
    "THREE_CLASS_1D", "gaussian_1d_joint", "gaussian_1d_posterior", "make_gaussian_1d",
    "LinearToy", "make_linear_toy", "separability_through_origin",
    "Dataset", "DatasetNotFoundError", "DATASETS", "SOURCES", "load_dataset", "dataset_names", "data_home",
    "read_idx", "read_cifar_archive", "read_svhn_mat", "load_fashion_mnist", "load_cifar", "load_svhn",
    "validation_split", "TensorLoader",
]

#: The 1-D, three-class problem of the book's reconstruction of Charoenphakdee et al. (2021), Sec. 5.2 and
#: Fig. 3 (the paper shows its distribution only as a figure): equal priors, x | y ~ N(mu_y, 1).
THREE_CLASS_1D = {"means": (-1.5, 0.0, 1.5), "scale": 1.0, "priors": (1 / 3, 1 / 3, 1 / 3)}


def _check_mixture(means, scale, priors):
    mu = as_float_array(means, "means", ndim=1)
    if mu.size < 2:
        raise ValueError(f"means must hold one mean per class, at least 2; got {mu.size}.")
    sigma = check_positive(scale, "scale")
    if priors is None:
        pi = np.full(mu.size, 1.0 / mu.size)
    else:
        pi = as_float_array(priors, "priors", ndim=1)
        if pi.shape != mu.shape or np.any(pi <= 0) or abs(pi.sum() - 1) > 1e-9:
            raise ValueError(f"priors must be {mu.size} positive numbers summing to 1 (one per mean); got {pi}.")
    return mu, sigma, pi


def _log_joint(x: np.ndarray, mu: np.ndarray, sigma: float, pi: np.ndarray) -> np.ndarray:
    x = x.reshape(-1, 1).astype(np.float64)
    return np.log(pi) - 0.5 * ((x - mu) / sigma) ** 2 - np.log(sigma * np.sqrt(2 * np.pi))


def gaussian_1d_joint(x, means=THREE_CLASS_1D["means"], scale=THREE_CLASS_1D["scale"], priors=None) -> np.ndarray:
    """The joint density p(x, y) = pi_y N(x; mu_y, scale^2) at the points ``x``, shape (n, K).

    Summing over the columns gives the marginal p(x) (Fig. 3a of Charoenphakdee et al. 2021).
    """
    mu, sigma, pi = _check_mixture(means, scale, priors)
    return np.exp(_log_joint(as_float_array(x, "x"), mu, sigma, pi))


def gaussian_1d_posterior(x, means=THREE_CLASS_1D["means"], scale=THREE_CLASS_1D["scale"], priors=None) -> np.ndarray:
    """The class posterior eta_y(x) = p(y | x) of the 1-D Gaussian mixture at the points ``x``, shape (n, K).

    Computed by Bayes' rule in log space (a softmax of the log joint), so it is accurate far in the tails.
    """
    mu, sigma, pi = _check_mixture(means, scale, priors)
    return softmax(_log_joint(as_float_array(x, "x"), mu, sigma, pi), axis=1)


def make_gaussian_1d(n: int, means=THREE_CLASS_1D["means"], scale=THREE_CLASS_1D["scale"], priors=None, seed=0):
    """Sample n points of a 1-D Gaussian mixture classification problem, with their true posteriors.

    ``y ~ Categorical(priors)`` (uniform by default), ``x | y ~ N(means[y], scale^2)``. The defaults are
    :data:`THREE_CLASS_1D`, the book's reconstruction of the synthetic problem of Charoenphakdee et al.
    (2021), Sec. 5.2 / Fig. 3, whose exact distribution the paper gives only as a plot.

    Parameters
    ----------
    n : int
        Number of samples.
    means : sequence of float
        One mean per class (K = len(means)).
    scale : float
        Common standard deviation, > 0.
    priors : sequence of float, optional
        Class probabilities; uniform when omitted.
    seed : int or numpy.random.Generator
        Seed of ``numpy.random.default_rng`` (or a generator, which is advanced).

    Returns
    -------
    x : numpy.ndarray of float32, shape (n, 1)
    y : numpy.ndarray of int64, shape (n,)
    eta : numpy.ndarray of float64, shape (n, K)
        The Bayes posterior p(y | x) at each sampled x.
    """
    n = check_int(n, "n")
    mu, sigma, pi = _check_mixture(means, scale, priors)
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    y = rng.choice(mu.size, size=n, p=pi).astype(np.int64)
    x = (mu[y] + sigma * rng.standard_normal(n)).astype(np.float32)
    eta = softmax(_log_joint(x, mu, sigma, pi), axis=1)
    return x.reshape(-1, 1), y, eta


# ----------------------------------------------------------------------------------------------------------
# a K-class isotropic Gaussian mixture in d dimensions (chapter 09's CPU stand-in for the image benchmarks)
# ----------------------------------------------------------------------------------------------------------

__all__ += ["gaussian_mixture_means", "make_gaussian_mixture"]


def gaussian_mixture_means(n_classes: int = 10, dim: int = 20, spread: float = 1.0, seed: int = 0) -> np.ndarray:
    """Class means ``mu_k ~ N(0, spread^2 I_d)``, shape (n_classes, dim), from their own seed (so that training,
    validation and test sets drawn with different seeds share them).

    With unit class covariance, ``spread`` sets the overlap: the expected squared distance between two means
    is ``2 d spread^2``. The book's stand-in for Zhou et al. (2025)'s image benchmarks uses K = 10, d = 20.
    """
    k = check_int(n_classes, "n_classes", minimum=2)
    d = check_int(dim, "dim")
    s = check_positive(spread, "spread")
    return np.random.default_rng(seed).standard_normal((k, d)) * s


def make_gaussian_mixture(n: int, means, scale: float = 1.0, priors=None, seed=0):
    """Sample n points of an isotropic Gaussian mixture, ``x | y ~ N(means[y], scale^2 I)``, with true posteriors.

    Parameters
    ----------
    n : int
    means : array_like, shape (K, d)
        Class means, e.g. from :func:`gaussian_mixture_means`.
    scale : float
        Common standard deviation, > 0.
    priors : sequence of float, optional
        Class probabilities; uniform when omitted.
    seed : int or numpy.random.Generator

    Returns
    -------
    x : numpy.ndarray of float32, shape (n, d)
    y : numpy.ndarray of int64, shape (n,)
    eta : numpy.ndarray of float64, shape (n, K)
        The Bayes posterior p(y | x), a softmax of the log joint (exact in the tails).
    """
    n = check_int(n, "n")
    mu = as_float_array(means, "means", ndim=2)
    k = mu.shape[0]
    if k < 2:
        raise ValueError(f"means must have one row per class, at least 2; got shape {mu.shape}.")
    sigma = check_positive(scale, "scale")
    if priors is None:
        pi = np.full(k, 1.0 / k)
    else:
        pi = as_float_array(priors, "priors", ndim=1)
        if pi.shape != (k,) or np.any(pi <= 0) or abs(pi.sum() - 1) > 1e-9:
            raise ValueError(f"priors must be {k} positive numbers summing to 1 (one per class); got {pi}.")
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    y = rng.choice(k, size=n, p=pi).astype(np.int64)
    x = (mu[y] + sigma * rng.standard_normal((n, mu.shape[1]))).astype(np.float32)
    x64 = x.astype(np.float64)
    sq = np.stack([((x64 - m) ** 2).sum(axis=1) for m in mu], axis=1)  # (n, K), one class at a time
    eta = softmax(np.log(pi) - 0.5 * sq / sigma ** 2, axis=1)
    return x, y, eta


# ------------------------------------------------------------------ Mukhoti et al. (2020), App. B toy

@dataclass(frozen=True)
class LinearToy:
    """The two-class, two-dimensional problem of Mukhoti et al. (2020), App. B (see :func:`make_linear_toy`)."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    flipped_train: np.ndarray
    flipped_test: np.ndarray
    centres: np.ndarray
    cluster_class: np.ndarray
    noise: float


def make_linear_toy(n_train: int = 4000, n_test: int = 1000, noise: float = 0.1, half_side: float = 2.0,
                    seed=0, margin: float | None = None) -> LinearToy:
    """Sample the linear-model toy problem of Mukhoti et al. (2020), App. B.

    "Each class [gets] two normally distributed clusters such that the mean of the clusters are linearly
    separable. The mean of the clusters are situated on the vertices of a two-dimensional hypercube of side
    length 4. The standard deviation for each cluster is 1 and the samples are randomly linearly combined
    within each cluster in order to add covariance. Further, for 10% of the data points, the labels were
    flipped. 4000 samples are used for training and 1000 samples are used for testing."

    The wording is that of scikit-learn's ``make_classification`` (``class_sep=2``, ``n_clusters_per_class=2``),
    which this reimplements in numpy: cluster centres at (+-2, +-2), each class on two *adjacent* vertices
    (a side of the square chosen at random, so that the classes are separable by a line through the origin,
    as the bias-free model sigma(w1 x1 + w2 x2) needs), points ``z A_c + centre`` with ``z ~ N(0, I)`` and
    one random matrix ``A_c`` (entries uniform on [-1, 1]) per cluster.

    One difference is deliberate: ``noise`` is the share of labels **actually flipped** (exactly
    ``round(noise * n)`` labels of the n = n_train + n_test points, chosen at random). scikit-learn's
    ``flip_y`` instead re-draws a share of labels at random, so ``flip_y=0.1`` changes only about 5%.

    Parameters
    ----------
    n_train, n_test : int
        Sizes of the two sets (paper: 4000 and 1000).
    noise : float
        Share of flipped labels, in [0, 1/2) (paper: 0.1).
    half_side : float
        Half the side of the square of cluster centres (paper: side 4, so 2).
    seed : int or numpy.random.Generator
    margin : float, optional
        Redraw every point closer than ``margin`` to the line through the origin that separates the two
        classes' centres, or on its wrong side, so that (before any flip) the classes are separable with that
        margin by a model without bias. The paper's Gaussian clusters overlap that line, so even with
        ``noise=0`` its data are not separable and the cross-entropy weights stay finite; this variant
        (not in the paper) shows the unbounded growth.

    Returns
    -------
    LinearToy
        ``x_*`` float32 (n, 2), ``y_*`` int64 in {0, 1}, ``flipped_*`` bool masks, the four ``centres`` and
        the class of each centre.
    """
    n_train, n_test = check_int(n_train, "n_train"), check_int(n_test, "n_test")
    if isinstance(noise, bool) or not isinstance(noise, (int, float)) or not 0 <= noise < 0.5:
        raise ValueError(f"noise is the share of flipped labels and must lie in [0, 0.5); got {noise!r}.")
    s = check_positive(half_side, "half_side")
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    n = n_train + n_test
    centres = np.array([[-s, -s], [-s, s], [s, s], [s, -s]])        # the square, counter-clockwise
    side = int(rng.integers(4))                                      # class 0 = vertices side, side + 1
    cluster_class = np.ones(4, dtype=np.int64)
    cluster_class[[side, (side + 1) % 4]] = 0
    sizes = np.full(4, n // 4)
    sizes[: n % 4] += 1
    if margin is not None:
        margin = check_positive(margin, "margin", allow_zero=True)
        if margin >= s:
            raise ValueError(f"margin must be smaller than half_side={s} (the centres' distance to the line); got {margin}.")
    normal = centres[cluster_class == 1].mean(axis=0) - centres[cluster_class == 0].mean(axis=0)
    normal /= np.linalg.norm(normal)
    xs, ys = [], []
    for c in range(4):
        a = 2 * rng.uniform(size=(2, 2)) - 1
        pts = rng.standard_normal((sizes[c], 2)) @ a + centres[c]
        side = 1 if cluster_class[c] == 1 else -1
        while margin is not None and (bad := (pts @ normal) * side <= margin).any():
            pts[bad] = rng.standard_normal((int(bad.sum()), 2)) @ a + centres[c]
        xs.append(pts)
        ys.append(np.full(sizes[c], cluster_class[c]))
    order = rng.permutation(n)
    x = np.concatenate(xs)[order].astype(np.float32)
    y = np.concatenate(ys)[order].astype(np.int64)
    flipped = np.zeros(n, dtype=bool)
    flipped[rng.choice(n, size=int(round(noise * n)), replace=False)] = True
    y = np.where(flipped, 1 - y, y)
    return LinearToy(x[:n_train], y[:n_train], x[n_train:], y[n_train:], flipped[:n_train], flipped[n_train:],
                     centres, cluster_class, float(noise))


def separability_through_origin(x, y, refine: int = 2001):
    """How separable two-class 2-D data are by a line through the origin (a model without bias).

    Returns ``(errors, margin)``: the fewest training points any line through the origin misclassifies
    (exact: the count changes only where the direction crosses the perpendicular of a point, so it is
    evaluated between consecutive such angles), and the largest smallest signed margin
    ``max_u min_i (2 y_i - 1) u . x_i`` over unit vectors u (> 0 exactly when the data are separable; found
    among those angles and refined on a fine grid around the best).
    """
    x = as_float_array(x, "x", ndim=2)
    if x.shape[1] != 2:
        raise ValueError(f"x must have two columns (2-D points); got shape {x.shape}.")
    sign = np.where(np.asarray(y) == 1, 1.0, -1.0)
    sx = x * sign[:, None]
    phi = np.arctan2(sx[:, 1], sx[:, 0])
    events = np.sort(np.mod(np.concatenate([phi - np.pi / 2, phi + np.pi / 2]), 2 * np.pi))
    gaps = np.diff(np.concatenate([events, events[:1] + 2 * np.pi]))
    mids = events + gaps / 2
    units = np.stack([np.cos(mids), np.sin(mids)], axis=1)
    errors, best_margin, best_angle = len(x), -np.inf, 0.0
    for start in range(0, len(mids), 2048):
        m = sx @ units[start:start + 2048].T                     # (n, chunk) margins
        errors = min(errors, int((m <= 0).sum(axis=0).min()))
        lo = m.min(axis=0)
        if lo.max() > best_margin:
            best_margin, best_angle = float(lo.max()), float(mids[start + int(lo.argmax())])
    fine = best_angle + np.linspace(-np.pi / 90, np.pi / 90, refine)
    local = (sx @ np.stack([np.cos(fine), np.sin(fine)])).min(axis=0)
    return errors, max(best_margin, float(local.max()))


# ----------------------------------------------------------------------------- files, caches, downloads

class DatasetNotFoundError(FileNotFoundError):
    """A dataset's files are neither on disk nor downloadable; the message says how to get them."""


#: Official download locations and the MD5 checksums their authors publish (Fashion-MNIST, the README of
#: zalandoresearch/fashion-mnist; CIFAR: https://www.cs.toronto.edu/~kriz/cifar.html; SVHN: the checksums
#: of http://ufldl.stanford.edu/housenumbers/ as listed in torchvision's ``datasets/svhn.py``).
#:
#: :meta hide-value:
SOURCES = {
    "fashion-mnist": {
        "train-images-idx3-ubyte.gz": (
            "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/train-images-idx3-ubyte.gz",
            "8d4fb7e6c68d591d4c3dfef9ec88bf0d"),
        "train-labels-idx1-ubyte.gz": (
            "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/train-labels-idx1-ubyte.gz",
            "25c81989df183df01b3e8a0aad5dffbe"),
        "t10k-images-idx3-ubyte.gz": (
            "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/t10k-images-idx3-ubyte.gz",
            "bef4ecab320f06d8554ea6380940ec79"),
        "t10k-labels-idx1-ubyte.gz": (
            "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/t10k-labels-idx1-ubyte.gz",
            "bb300cfdad3c16e7a12a480ee83cd310"),
    },
    "cifar10": {"cifar-10-python.tar.gz": ("https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz",
                                           "c58f30108f718f92721af3b95e74349a")},
    "cifar100": {"cifar-100-python.tar.gz": ("https://www.cs.toronto.edu/~kriz/cifar-100-python.tar.gz",
                                             "eb9058c3a382ffc7106e4002c42a8d85")},
    "svhn": {"train_32x32.mat": ("http://ufldl.stanford.edu/housenumbers/train_32x32.mat",
                                 "e26dedcc434d2e4c54c9b2d4a06d8373"),
             "test_32x32.mat": ("http://ufldl.stanford.edu/housenumbers/test_32x32.mat",
                                "eb5a983be6a315427106f1b164d9cef3")},
}

#: Where Debian's ``dataset-fashion-mnist`` package puts the four files (recompressed, so their MD5s differ
#: from the official ones; they are checked by their headers and sizes instead).
DEBIAN_FASHION_MNIST = Path("/usr/share/datasets/fashion-mnist")

_INSTALL_HINTS = {
    "fashion-mnist": ("install Debian's package (sudo apt-get install dataset-fashion-mnist, or `make data` as "
                      "root), or download the four .gz files listed at https://github.com/zalandoresearch/"
                      "fashion-mnist into {cache}"),
    "cifar10": "download cifar-10-python.tar.gz from https://www.cs.toronto.edu/~kriz/cifar.html into {cache}",
    "cifar100": "download cifar-100-python.tar.gz from https://www.cs.toronto.edu/~kriz/cifar.html into {cache}",
    "svhn": ("download train_32x32.mat and test_32x32.mat from http://ufldl.stanford.edu/housenumbers/ "
             "into {cache}"),
}


def data_home() -> Path:
    """The download cache: ``$CALIB_DATA``, else ``~/.cache/calib``."""
    return Path(os.environ.get("CALIB_DATA") or Path.home() / ".cache" / "calib")


def _md5(path: Path) -> str:
    digest = hashlib.md5()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _download(url: str, dest: Path, md5: str, timeout: float = 60.0) -> None:
    """Download ``url`` to ``dest`` (atomically), raising unless its MD5 is ``md5``."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(dest.name + ".part")
    with urllib.request.urlopen(url, timeout=timeout) as response, open(tmp, "wb") as out:
        for block in iter(lambda: response.read(1 << 20), b""):
            out.write(block)
    got = _md5(tmp)
    if got != md5:
        tmp.unlink()
        raise OSError(f"{url} downloaded with MD5 {got}, not the published {md5}; the file was discarded.")
    os.replace(tmp, dest)


def _locate(name: str, root, extra_dirs=(), download: bool = True) -> dict[str, Path]:
    """The paths of the files of ``SOURCES[name]``: from ``root``, the cache, ``extra_dirs``, or downloaded."""
    files = SOURCES[name]
    cache = data_home() / name
    candidates = [Path(root)] if root is not None else [cache, *map(Path, extra_dirs)]
    for folder in candidates:
        found = {f: folder / f for f in files if (folder / f).is_file()}
        if len(found) == len(files):
            return found
    if root is not None:
        missing = [f for f in files if not (Path(root) / f).is_file()]
        raise DatasetNotFoundError(f"{name}: {', '.join(missing)} not found in root={str(root)!r}; "
                                   f"{_INSTALL_HINTS[name].format(cache=root)}.")
    reason = "downloads are switched off (download=False)"
    if download:
        try:
            for fname, (url, md5) in files.items():
                if not (cache / fname).is_file():
                    _download(url, cache / fname, md5)
            return {f: cache / f for f in files}
        except OSError as exc:      # URLError, timeouts, checksum mismatch
            reason = f"the download failed ({exc})"
    looked = ", ".join(str(c) for c in candidates)
    raise DatasetNotFoundError(f"{name} is not installed (looked in {looked}) and {reason}. To get it, "
                               f"{_INSTALL_HINTS[name].format(cache=cache)}.")


# ---------------------------------------------------------------------------------------------- readers

def read_idx(path) -> np.ndarray:
    """Read an IDX file (the MNIST / Fashion-MNIST format; gzip-compressed when the name ends in ``.gz``).

    The header is two zero bytes, a type byte (0x08 = unsigned byte), the number of dimensions and one
    big-endian uint32 per dimension; the data follow in C order.
    """
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as fh:
        raw = fh.read()
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] != 0x08:
        raise ValueError(f"{path} is not an unsigned-byte IDX file (header {raw[:4]!r}).")
    ndim = raw[3]
    dims = tuple(int.from_bytes(raw[4 + 4 * i: 8 + 4 * i], "big") for i in range(ndim))
    offset = 4 + 4 * ndim
    if len(raw) - offset != math.prod(dims):
        raise ValueError(f"{path}: the header announces shape {dims} ({math.prod(dims)} bytes) but "
                         f"{len(raw) - offset} bytes follow; the file is truncated or corrupt.")
    return np.frombuffer(raw, dtype=np.uint8, offset=offset).reshape(dims).copy()


class _ArrayUnpickler(pickle.Unpickler):
    """Unpickles only what the CIFAR batches hold (dicts, lists, bytes and numpy arrays)."""

    _ALLOWED = {("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
                ("numpy", "ndarray"), ("numpy", "dtype"), ("numpy.core.multiarray", "scalar"),
                ("numpy._core.multiarray", "scalar"), ("_codecs", "encode")}   # bytes in protocol-2 pickles

    def find_class(self, module, name):
        if (module, name) in self._ALLOWED:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"refusing to unpickle {module}.{name} from a CIFAR batch.")


def _unpickle(data: bytes) -> dict:
    batch = _ArrayUnpickler(io.BytesIO(data), encoding="bytes").load()
    return {(k.decode() if isinstance(k, bytes) else k): v for k, v in batch.items()}


def read_cifar_archive(path, label_key: str | None = None):
    """Read the python version of CIFAR-10 or CIFAR-100 straight from its ``.tar.gz`` (Krizhevsky 2009).

    CIFAR-10 holds ``cifar-10-batches-py/data_batch_1..5`` and ``test_batch``; CIFAR-100 holds
    ``cifar-100-python/train`` and ``test``. Each is a pickled dict with ``data`` (uint8, N x 3072: the red,
    green and blue 32x32 planes, row-major) and ``labels`` (CIFAR-10) or ``fine_labels`` (CIFAR-100).

    Returns
    -------
    x_train, y_train, x_test, y_test : numpy.ndarray
        Images uint8 (N, 3, 32, 32), labels int64.
    """
    path = Path(path)
    with tarfile.open(path, "r:gz") as tar:
        members = {Path(m.name).name: m for m in tar.getmembers() if m.isfile()}
        if "data_batch_1" in members:
            train_names, test_names, key = [f"data_batch_{i}" for i in range(1, 6)], ["test_batch"], "labels"
        elif "train" in members:
            train_names, test_names, key = ["train"], ["test"], "fine_labels"
        else:
            raise ValueError(f"{path} holds neither CIFAR-10 (data_batch_1..5) nor CIFAR-100 (train, test) batches.")
        key = label_key or key

        def read(names):
            xs, ys = [], []
            for n in names:
                if n not in members:
                    raise ValueError(f"{path} lacks the batch {n!r}; the archive is incomplete.")
                batch = _unpickle(tar.extractfile(members[n]).read())
                xs.append(np.asarray(batch["data"], dtype=np.uint8).reshape(-1, 3, 32, 32))
                ys.append(np.asarray(batch[key], dtype=np.int64))
            return np.concatenate(xs), np.concatenate(ys)

        x_train, y_train = read(train_names)
        x_test, y_test = read(test_names)
    return x_train, y_train, x_test, y_test


def read_svhn_mat(path):
    """Read an SVHN "cropped digits" file (``train_32x32.mat``, ``test_32x32.mat``; Netzer et al. 2011).

    The MATLAB file holds ``X`` (uint8, 32 x 32 x 3 x N) and ``y`` (N x 1, digits 1..10 where 10 is the
    digit 0). Returns images uint8 (N, 3, 32, 32) and labels int64 in 0..9 (10 mapped to 0).
    """
    from scipy.io import loadmat

    mat = loadmat(str(path))
    x = np.ascontiguousarray(np.transpose(mat["X"], (3, 2, 0, 1)), dtype=np.uint8)
    y = np.asarray(mat["y"], dtype=np.int64).reshape(-1) % 10
    return x, y


def load_fashion_mnist(root=None, download: bool = True):
    """Fashion-MNIST (Xiao et al. 2017) as ``x_train (60000, 1, 28, 28) uint8, y_train, x_test, y_test``.

    Looked for in ``root``, else the cache and Debian's ``/usr/share/datasets/fashion-mnist``, else
    downloaded from the official location (checked by MD5). Raises :class:`DatasetNotFoundError`, saying how
    to install it, when none works.
    """
    paths = _locate("fashion-mnist", root, extra_dirs=[DEBIAN_FASHION_MNIST], download=download)
    x_train = read_idx(paths["train-images-idx3-ubyte.gz"])[:, None]
    y_train = read_idx(paths["train-labels-idx1-ubyte.gz"]).astype(np.int64)
    x_test = read_idx(paths["t10k-images-idx3-ubyte.gz"])[:, None]
    y_test = read_idx(paths["t10k-labels-idx1-ubyte.gz"]).astype(np.int64)
    if len(x_train) != len(y_train) or len(x_test) != len(y_test):
        raise ValueError("Fashion-MNIST: the image and label files disagree on the number of samples.")
    return x_train, y_train, x_test, y_test


def load_cifar(n_classes: int = 10, root=None, download: bool = True):
    """CIFAR-10 or CIFAR-100 (Krizhevsky 2009; fine labels) as ``x_train (50000, 3, 32, 32) uint8, ...``."""
    if n_classes not in (10, 100):
        raise ValueError(f"n_classes must be 10 (CIFAR-10) or 100 (CIFAR-100); got {n_classes!r}.")
    name = f"cifar{n_classes}"
    (path,) = _locate(name, root, download=download).values()
    return read_cifar_archive(path)


def load_svhn(root=None, download: bool = True):
    """SVHN cropped digits (Netzer et al. 2011), train and test (no "extra"), labels 0..9."""
    paths = _locate("svhn", root, download=download)
    return (*read_svhn_mat(paths["train_32x32.mat"]), *read_svhn_mat(paths["test_32x32.mat"]))


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
    "linear-toy": _load_linear_toy, "gaussian-1d": _load_gaussian_1d,
}

#: Split sizes (train / validation / test) of each dataset.
SPLITS = {"fashion-mnist": (55000, 5000, 10000), "cifar10": (45000, 5000, 10000), "cifar100": (45000, 5000, 10000),
          "svhn": (68257, 5000, 26032), "digits": (1258, 180, 359), "breast-cancer": (398, 57, 114),
          "linear-toy": (4000, 500, 1000), "gaussian-1d": (4500, 500, 1000)}


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
        ``"linear-toy"``, ``"gaussian-1d"`` (synthetic, drawn with ``seed``).
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
        self.mean = None if mean is None else torch.as_tensor(np.asarray(mean, np.float32)).reshape(stat_shape).to(self.device)
        self.std = None if std is None else torch.as_tensor(np.asarray(std, np.float32)).reshape(stat_shape).to(self.device)
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
