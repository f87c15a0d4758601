"""Readers of the image datasets (calib.data), tested on small files in the real on-disk formats that the
tests write themselves (nothing is downloaded), and the on-device loader."""

import gzip
import hashlib
import io
import pickle
import struct
import tarfile
import urllib.error

import numpy as np
import pytest
import torch
from scipy.io import savemat

from calib import data
from calib.data import (DatasetNotFoundError, TensorLoader, load_cifar, load_dataset, load_fashion_mnist, load_svhn,
                        read_cifar_archive, read_idx, read_svhn_mat, validation_split)

torch.set_num_threads(1)


# ------------------------------------------------------------------------------------ file writers

def idx_bytes(arr: np.ndarray) -> bytes:
    """The IDX format of MNIST / Fashion-MNIST: 0, 0, type 0x08 (ubyte), ndim, big-endian uint32 dims, data."""
    arr = np.ascontiguousarray(arr, dtype=np.uint8)
    return bytes([0, 0, 8, arr.ndim]) + b"".join(struct.pack(">I", d) for d in arr.shape) + arr.tobytes()


def write_fashion_mnist(folder, n_train=12, n_test=7, side=28, seed=0):
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    arrays = {"train-images-idx3-ubyte.gz": rng.integers(0, 256, (n_train, side, side), dtype=np.uint8),
              "train-labels-idx1-ubyte.gz": rng.integers(0, 10, n_train, dtype=np.uint8),
              "t10k-images-idx3-ubyte.gz": rng.integers(0, 256, (n_test, side, side), dtype=np.uint8),
              "t10k-labels-idx1-ubyte.gz": rng.integers(0, 10, n_test, dtype=np.uint8)}
    for name, arr in arrays.items():
        with gzip.open(folder / name, "wb") as fh:
            fh.write(idx_bytes(arr))
    return arrays


def cifar_batch(rng, n, label_key, n_classes):
    # the python version of CIFAR: a pickled dict with bytes keys (pickled by Python 2's cPickle originally)
    return {b"batch_label": b"testing batch", b"data": rng.integers(0, 256, (n, 3072), dtype=np.uint8),
            label_key.encode(): [int(v) for v in rng.integers(0, n_classes, n)], b"filenames": [b"x.png"] * n}


def write_cifar(path, hundred=False, n=3, seed=0):
    rng = np.random.default_rng(seed)
    if hundred:
        folder, names, key, k = "cifar-100-python", ["train", "test"], "fine_labels", 100
    else:
        folder, names, key, k = "cifar-10-batches-py", [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"], "labels", 10
    batches = {name: cifar_batch(rng, n, key, k) for name in names}
    if hundred:
        for b in batches.values():
            b[b"coarse_labels"] = [0] * n
    with tarfile.open(path, "w:gz") as tar:
        for name, batch in [*batches.items(), ("batches.meta", {b"label_names": [b"a"] * k})]:
            raw = pickle.dumps(batch, protocol=2)
            info = tarfile.TarInfo(f"{folder}/{name}")
            info.size = len(raw)
            tar.addfile(info, io.BytesIO(raw))
    return batches


# ---------------------------------------------------------------------------------------- Fashion-MNIST

def test_fashion_mnist_reader_round_trip(tmp_path):
    arrays = write_fashion_mnist(tmp_path / "fm")
    x_tr, y_tr, x_te, y_te = load_fashion_mnist(root=tmp_path / "fm", download=False)
    assert x_tr.shape == (12, 1, 28, 28) and x_tr.dtype == np.uint8 and y_tr.dtype == np.int64
    np.testing.assert_array_equal(x_tr[:, 0], arrays["train-images-idx3-ubyte.gz"])
    np.testing.assert_array_equal(y_te, arrays["t10k-labels-idx1-ubyte.gz"])
    np.testing.assert_array_equal(x_te[:, 0], arrays["t10k-images-idx3-ubyte.gz"])


def test_idx_reader_rejects_bad_files(tmp_path):
    good = idx_bytes(np.arange(24, dtype=np.uint8).reshape(2, 3, 4))
    (tmp_path / "ok").write_bytes(good)
    np.testing.assert_array_equal(read_idx(tmp_path / "ok"), np.arange(24).reshape(2, 3, 4))
    (tmp_path / "short").write_bytes(good[:-1])
    with pytest.raises(ValueError, match="truncated"):
        read_idx(tmp_path / "short")
    (tmp_path / "float").write_bytes(bytes([0, 0, 0x0D, 1]) + struct.pack(">I", 1) + b"\0\0\0\0")
    with pytest.raises(ValueError, match="unsigned-byte IDX"):
        read_idx(tmp_path / "float")


def test_fashion_mnist_from_the_cache_with_the_papers_style_split(tmp_path, monkeypatch):
    monkeypatch.setenv("CALIB_DATA", str(tmp_path))
    write_fashion_mnist(tmp_path / "fashion-mnist", n_train=5010, n_test=5, side=4)
    ds = load_dataset("fashion-mnist", download=False)
    assert (len(ds.y_train), len(ds.y_val), len(ds.y_test)) == (10, 5000, 5)
    assert ds.input_shape == (1, 4, 4) and ds.is_image and ds.n_classes == 10
    # the split of the focal_calibration code: np.random.seed(1); np.random.shuffle(indices); val = first 10%
    indices = list(range(5010))
    np.random.seed(1)
    np.random.shuffle(indices)
    tr, va = validation_split(5010, 5000, seed=1)
    np.testing.assert_array_equal(va, indices[:5000])
    np.testing.assert_array_equal(tr, indices[5000:])
    x_all, y_all, _, _ = load_fashion_mnist(download=False)
    np.testing.assert_array_equal(ds.x_train, x_all[tr])
    # normalisation from the training split, per channel, in [0, 1] units
    assert ds.mean[0] == pytest.approx(x_all[tr].mean() / 255, rel=1e-6)


def test_missing_fashion_mnist_without_network_says_how_to_install(tmp_path, monkeypatch):
    monkeypatch.setenv("CALIB_DATA", str(tmp_path / "empty"))
    monkeypatch.setattr(data, "DEBIAN_FASHION_MNIST", tmp_path / "no-debian")

    def no_network(url, timeout=None):
        raise urllib.error.URLError("Temporary failure in name resolution")

    monkeypatch.setattr(data.urllib.request, "urlopen", no_network)
    with pytest.raises(DatasetNotFoundError) as err:
        load_dataset("fashion-mnist")
    msg = str(err.value)
    assert "download failed" in msg and "apt-get install dataset-fashion-mnist" in msg
    assert "github.com/zalandoresearch/fashion-mnist" in msg and str(tmp_path / "empty") in msg
    with pytest.raises(DatasetNotFoundError, match="switched off"):
        load_fashion_mnist(download=False)
    assert isinstance(err.value, FileNotFoundError)


def test_download_checks_the_published_md5(tmp_path, monkeypatch):
    """The download path, with a fake server: a right checksum keeps the file, a wrong one discards it."""
    monkeypatch.setenv("CALIB_DATA", str(tmp_path))
    payload = {}
    for name, arr in [("train_32x32.mat", 5), ("test_32x32.mat", 3)]:
        buf = io.BytesIO()
        savemat(buf, {"X": np.full((32, 32, 3, arr), 7, np.uint8), "y": np.full((arr, 1), 10, np.uint8)})
        payload[name] = buf.getvalue()
    sources = {"svhn": {name: (f"http://example.invalid/{name}", hashlib.md5(raw).hexdigest())
                        for name, raw in payload.items()}}
    monkeypatch.setattr(data, "SOURCES", sources)
    monkeypatch.setattr(data.urllib.request, "urlopen", lambda url, timeout=None: io.BytesIO(payload[url.rsplit("/", 1)[1]]))
    x_tr, y_tr, x_te, y_te = load_svhn()
    assert x_tr.shape == (5, 3, 32, 32) and (y_tr == 0).all() and len(y_te) == 3
    assert (tmp_path / "svhn" / "train_32x32.mat").is_file()
    # a corrupted download is refused and removed
    sources["svhn"]["test_32x32.mat"] = ("http://example.invalid/test_32x32.mat", "0" * 32)
    (tmp_path / "svhn" / "test_32x32.mat").unlink()
    with pytest.raises(DatasetNotFoundError, match="not the published"):
        load_svhn()
    assert not (tmp_path / "svhn" / "test_32x32.mat").exists()
    assert not list((tmp_path / "svhn").glob("*.part"))


def test_official_sources_are_the_published_ones():
    assert data.SOURCES["fashion-mnist"]["train-images-idx3-ubyte.gz"][1] == "8d4fb7e6c68d591d4c3dfef9ec88bf0d"
    assert data.SOURCES["cifar10"]["cifar-10-python.tar.gz"] == (
        "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz", "c58f30108f718f92721af3b95e74349a")
    assert data.SOURCES["cifar100"]["cifar-100-python.tar.gz"][1] == "eb9058c3a382ffc7106e4002c42a8d85"
    assert data.SOURCES["svhn"]["test_32x32.mat"][1] == "eb5a983be6a315427106f1b164d9cef3"


# ---------------------------------------------------------------------------------------------- CIFAR

@pytest.mark.parametrize("hundred", [False, True])
def test_cifar_reader_round_trip(tmp_path, hundred):
    name = "cifar-100-python.tar.gz" if hundred else "cifar-10-python.tar.gz"
    batches = write_cifar(tmp_path / name, hundred=hundred)
    x_tr, y_tr, x_te, y_te = load_cifar(100 if hundred else 10, root=tmp_path, download=False)
    train_names = ["train"] if hundred else [f"data_batch_{i}" for i in range(1, 6)]
    key = b"fine_labels" if hundred else b"labels"
    expected = np.concatenate([batches[n][b"data"] for n in train_names]).reshape(-1, 3, 32, 32)
    np.testing.assert_array_equal(x_tr, expected)
    np.testing.assert_array_equal(y_tr, np.concatenate([batches[n][key] for n in train_names]))
    test_name = "test" if hundred else "test_batch"
    np.testing.assert_array_equal(y_te, batches[test_name][key])
    # channel planes: the first 1024 bytes of a row are the red 32x32 image, row-major
    np.testing.assert_array_equal(x_te[0, 0], batches[test_name][b"data"][0, :1024].reshape(32, 32))
    np.testing.assert_array_equal(x_te[0, 2, 5], batches[test_name][b"data"][0, 2048 + 5 * 32: 2048 + 6 * 32])


def test_cifar_reader_refuses_foreign_pickles_and_incomplete_archives(tmp_path):
    class Evil:
        def __reduce__(self):
            return (print, ("pwned",))

    raw = pickle.dumps({b"data": Evil(), b"labels": [0]})
    with tarfile.open(tmp_path / "evil.tar.gz", "w:gz") as tar:
        for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
            info = tarfile.TarInfo(f"cifar-10-batches-py/{name}")
            info.size = len(raw)
            tar.addfile(info, io.BytesIO(raw))
    with pytest.raises(pickle.UnpicklingError, match="refusing"):
        read_cifar_archive(tmp_path / "evil.tar.gz")
    with tarfile.open(tmp_path / "empty.tar.gz", "w:gz"):
        pass
    with pytest.raises(ValueError, match="neither CIFAR-10"):
        read_cifar_archive(tmp_path / "empty.tar.gz")
    with pytest.raises(DatasetNotFoundError, match="cifar-10-python.tar.gz not found"):
        load_cifar(10, root=tmp_path / "nowhere")


# ----------------------------------------------------------------------------------------------- SVHN

def test_svhn_reader_maps_ten_to_zero(tmp_path):
    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, (32, 32, 3, 6), dtype=np.uint8)
    y = np.array([[10], [1], [2], [9], [10], [5]], dtype=np.uint8)
    savemat(tmp_path / "train_32x32.mat", {"X": x, "y": y})
    xs, ys = read_svhn_mat(tmp_path / "train_32x32.mat")
    assert xs.shape == (6, 3, 32, 32)
    np.testing.assert_array_equal(ys, [0, 1, 2, 9, 0, 5])
    np.testing.assert_array_equal(xs[3, 1], x[:, :, 1, 3])     # (H, W, C, N) -> (N, C, H, W)


# ------------------------------------------------------------------------------------ bundled and toy

def test_bundled_and_synthetic_datasets():
    pytest.importorskip("sklearn")
    digits = load_dataset("digits")
    assert (len(digits.y_train), len(digits.y_val), len(digits.y_test)) == data.SPLITS["digits"]
    assert digits.input_shape == (1, 8, 8) and digits.x_train.dtype == np.float32
    bc = load_dataset("breast-cancer")
    assert bc.input_shape == (30,) and bc.n_classes == 2
    np.testing.assert_allclose(((bc.x_train - bc.mean) / bc.std).mean(axis=0), 0, atol=1e-4)
    toy = load_dataset("linear-toy", seed=3)
    assert (len(toy.y_train), len(toy.y_val), len(toy.y_test)) == data.SPLITS["linear-toy"]
    with pytest.raises(ValueError, match="unknown dataset 'mnist'; choose from 'fashion-mnist', 'cifar10'"):
        load_dataset("mnist")


# ---------------------------------------------------------------------------------------------- loader

def reference_crop_flip(x, dy, dx, flip, pad):
    """A per-image loop: zero-pad, take the HxW window at (dy, dx), flip left-right."""
    n, c, h, w = x.shape
    out = np.empty_like(x)
    for i in range(n):
        padded = np.pad(x[i], ((0, 0), (pad, pad), (pad, pad)))
        img = padded[:, dy[i]: dy[i] + h, dx[i]: dx[i] + w]
        out[i] = img[:, :, ::-1] if flip[i] else img
    return out


def test_loader_crop_and_flip_match_a_per_image_loop():
    rng = np.random.default_rng(1)
    x = rng.integers(0, 256, (37, 3, 6, 5), dtype=np.uint8)
    y = rng.integers(0, 4, 37)
    loader = TensorLoader(x, y, batch_size=8, augment=True, pad=2)
    gen = torch.Generator().manual_seed(5)
    order = torch.randperm(37, generator=gen).numpy()
    shifts = torch.randint(0, 5, (37, 2), generator=gen).numpy()
    flips = (torch.rand(37, generator=gen) < 0.5).numpy()
    expected = reference_crop_flip(x[order], shifts[:, 0], shifts[:, 1], flips, 2)
    batches = list(loader.epoch(torch.Generator().manual_seed(5)))
    assert len(batches) == len(loader) == 5
    got = torch.cat([b[0] for b in batches]).numpy()
    np.testing.assert_allclose(got, expected / 255.0, rtol=0, atol=1e-7)
    np.testing.assert_array_equal(torch.cat([b[1] for b in batches]).numpy(), y[order])
    # the same seed replays the epoch; evaluation order is the file order, untouched
    again = torch.cat([b[0] for b in loader.epoch(torch.Generator().manual_seed(5))]).numpy()
    np.testing.assert_array_equal(got, again)
    plain = torch.cat([b[0] for b in loader.epoch()]).numpy()
    np.testing.assert_allclose(plain, x / 255.0, atol=1e-7)


def test_loader_normalises_and_handles_features():
    x = np.arange(12, dtype=np.float32).reshape(6, 2)
    loader = TensorLoader(x, np.zeros(6, np.int64), batch_size=4, mean=[1.0, 2.0], std=[2.0, 4.0], augment=True)
    xb, yb = next(loader.epoch())
    np.testing.assert_allclose(xb.numpy(), (x[:4] - [1, 2]) / [2, 4])
    assert not loader.augment                     # feature vectors are never cropped
    img = np.full((2, 1, 4, 4), 255, np.uint8)
    (xb, _), = TensorLoader(img, [0, 1], 2, mean=[0.5], std=[0.25], channels_last=True).epoch()
    np.testing.assert_allclose(xb.numpy(), 2.0)
    assert xb.is_contiguous(memory_format=torch.channels_last)
    with pytest.raises(ValueError, match="one label per input"):
        TensorLoader(img, [0], 2)
