"""The image datasets' files: where they are found (a folder, the cache ``$CALIB_DATA``, Debian's package),
their checked download, and calib's own readers of the formats their authors publish (IDX, the CIFAR python
archives, SVHN's .mat files; torchvision is not a dependency). :mod:`calib.data` turns them into datasets.
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
from pathlib import Path

import numpy as np

__all__ = ["DatasetNotFoundError", "SOURCES", "DEBIAN_FASHION_MNIST", "data_home", "installed_files", "read_idx",
           "read_cifar_archive", "read_svhn_mat", "load_fashion_mnist", "load_cifar", "load_svhn"]

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
#:
#: :meta hide-value:
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


def _extra_folders(name: str) -> list[Path]:
    """The folders searched after the cache: Debian's package, for Fashion-MNIST only."""
    return [DEBIAN_FASHION_MNIST] if name == "fashion-mnist" else []


def installed_files(name: str) -> dict[str, Path] | None:
    """The files of ``SOURCES[name]`` that loading ``name`` without ``root`` reads now: those in the cache
    (:func:`data_home`), else in Debian's package (Fashion-MNIST); None when no folder holds them all (loading
    would download them). Nothing is downloaded. The book's runner fingerprints them for a chapter's key."""
    if name not in SOURCES:
        raise ValueError(f"name={name!r} is not a dataset with files; choose one of {', '.join(SOURCES)}.")
    try:
        return _locate(name, None, extra_dirs=_extra_folders(name), download=False)
    except DatasetNotFoundError:
        return None


# ---------------------------------------------------------------------------------------------- readers

#: The arrays of the IDX files read in this process, by (path, size, modification time): a process that trains
#: several runs (a sweep, a chapter) decompresses Fashion-MNIST once (0.26 s of each run's start otherwise).
_IDX_READ: dict[tuple[str, int, int], np.ndarray] = {}
_IDX_READ_MAX = 8


def read_idx(path) -> np.ndarray:
    """Read an IDX file (the MNIST / Fashion-MNIST format; gzip-compressed when the name ends in ``.gz``).

    The header is two zero bytes, a type byte (0x08 = unsigned byte), the number of dimensions and one
    big-endian uint32 per dimension; the data follow in C order. The array is a new one at every call; a file
    read before in this process, unchanged since (size and modification time), is not decompressed again.
    """
    path = Path(path)
    stat = path.stat()
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns)
    if key not in _IDX_READ:
        if len(_IDX_READ) >= _IDX_READ_MAX:
            _IDX_READ.pop(next(iter(_IDX_READ)))
        _IDX_READ[key] = _read_idx_file(path)
        _IDX_READ[key].flags.writeable = False
    return _IDX_READ[key].copy()


def _read_idx_file(path: Path) -> np.ndarray:
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
    paths = _locate("fashion-mnist", root, extra_dirs=_extra_folders("fashion-mnist"), download=download)
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
