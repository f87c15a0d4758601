"""Tests of the synthetic data generators (calib.data)."""

import gzip
import hashlib
import io
import os
import pickle
import struct
import tarfile
import urllib.error

import numpy as np
import pytest
import torch
from scipy.integrate import trapezoid
from scipy.io import savemat
from scipy.stats import norm

from calib import data, dataset_files
from calib.data import (THREE_CLASS_1D, DatasetNotFoundError, TensorLoader, gaussian_1d_joint, gaussian_1d_posterior,
                        load_cifar, load_dataset, load_fashion_mnist, load_svhn, make_gaussian_1d, make_linear_toy,
                        read_cifar_archive, read_idx, read_svhn_mat, validation_split)


def test_shapes_dtypes_and_seeding():
    x, y, eta = make_gaussian_1d(1000, seed=3)
    assert x.shape == (1000, 1) and x.dtype == np.float32
    assert y.shape == (1000,) and y.dtype == np.int64 and set(np.unique(y)) == {0, 1, 2}
    assert eta.shape == (1000, 3) and eta.dtype == np.float64
    np.testing.assert_allclose(eta.sum(axis=1), 1, atol=1e-15)
    x2, y2, eta2 = make_gaussian_1d(1000, seed=3)
    np.testing.assert_array_equal(x, x2)
    np.testing.assert_array_equal(y, y2)
    assert not np.array_equal(make_gaussian_1d(1000, seed=4)[0], x)
    gen = np.random.default_rng(3)
    np.testing.assert_array_equal(make_gaussian_1d(1000, seed=gen)[1], y)   # same stream as seed=3


def test_posterior_is_bayes_rule():
    x = np.array([-4.0, -1.5, 0.0, 0.7, 3.0])
    mu = np.array(THREE_CLASS_1D["means"])
    dens = norm.pdf(x[:, None], loc=mu, scale=1.0) / 3
    np.testing.assert_allclose(gaussian_1d_joint(x), dens, rtol=1e-13)
    np.testing.assert_allclose(gaussian_1d_posterior(x), dens / dens.sum(axis=1, keepdims=True), rtol=1e-13)
    # the sampled eta is the posterior at the sampled x
    xs, _, eta = make_gaussian_1d(50, seed=0)
    np.testing.assert_allclose(eta, gaussian_1d_posterior(xs), rtol=1e-13)
    # accurate far in the tails, where the densities underflow
    assert gaussian_1d_posterior(np.array([-60.0]))[0, 0] == 1.0
    assert gaussian_1d_posterior(np.array([60.0]))[0, 1] > 0


def test_marginal_integrates_to_one_and_bayes_error():
    grid = np.linspace(-12, 12, 200_001)
    joint = gaussian_1d_joint(grid)
    assert trapezoid(joint.sum(axis=1), grid) == pytest.approx(1.0, abs=1e-9)
    bayes_error = 1 - trapezoid(joint.max(axis=1), grid)
    # equal priors, unit variance, means 1.5 apart: 1 - [2 Phi(0.75) - 1 + 2 Phi(0.75)] / 3
    assert bayes_error == pytest.approx(1 - (4 * norm.cdf(0.75) - 1) / 3, abs=1e-9)


def test_labels_follow_the_posterior():
    """Within bins of x, the label frequencies match the mean posterior (a calibrated generator)."""
    x, y, eta = make_gaussian_1d(200_000, seed=1)
    bins = np.digitize(x[:, 0], np.linspace(-3, 3, 13))
    for b in np.unique(bins):
        m = bins == b
        freq = np.bincount(y[m], minlength=3) / m.sum()
        se = np.sqrt(0.25 / m.sum())
        np.testing.assert_allclose(freq, eta[m].mean(axis=0), atol=5 * se)
    assert np.bincount(y) / len(y) == pytest.approx([1 / 3] * 3, abs=0.005)


def test_other_mixtures_and_errors():
    x, y, eta = make_gaussian_1d(10, means=(0, 2), scale=0.5, priors=(0.9, 0.1), seed=0)
    assert eta.shape == (10, 2)
    with pytest.raises(ValueError, match="priors"):
        make_gaussian_1d(10, priors=(0.5, 0.5))
    with pytest.raises(ValueError, match="scale"):
        make_gaussian_1d(10, scale=0)
    with pytest.raises(ValueError, match="means"):
        make_gaussian_1d(10, means=(1.0,))
    with pytest.raises(ValueError, match="n must be"):
        make_gaussian_1d(0)


def test_linear_toy_flips_the_stated_share_and_is_reproducible():
    toy = make_linear_toy(n_train=4000, n_test=1000, noise=0.1, seed=4)
    assert toy.x_train.shape == (4000, 2) and toy.x_test.shape == (1000, 2)
    assert toy.flipped_train.sum() + toy.flipped_test.sum() == 500          # exactly 10% of 5000
    # the two clusters of a class sit on adjacent vertices: a line through the origin separates the centres
    same = toy.centres[toy.cluster_class == 0]
    assert np.abs(same[0] - same[1]).sum() == pytest.approx(4.0)            # one side of the square of side 4
    again = make_linear_toy(n_train=4000, n_test=1000, noise=0.1, seed=4)
    np.testing.assert_array_equal(toy.y_train, again.y_train)
    clean = make_linear_toy(noise=0.0, seed=4, margin=0.5)
    assert not clean.flipped_train.any()
    with pytest.raises(ValueError, match="share of flipped labels"):
        make_linear_toy(noise=0.6)


def test_separability_through_origin():
    from calib.data import separability_through_origin

    x = np.array([[1.0, 2.0], [2.0, 1.0], [-1.0, -2.0], [-2.0, -0.5]])
    y = np.array([1, 1, 0, 0])
    errors, margin = separability_through_origin(x, y)
    # the best direction bisects the two positive points: margin = |(1,2).(1,1)/sqrt 2| ... limited by (-2,-0.5)
    assert errors == 0 and margin > 0
    u = np.array([1.0, 1.0]) / np.sqrt(2)
    assert margin >= min((x @ u) * np.where(y == 1, 1, -1)) - 1e-9
    errors, margin = separability_through_origin(np.vstack([x, [[3.0, 3.0]]]), np.append(y, 0))
    assert errors == 1 and margin < 0
    toy = make_linear_toy(noise=0.0, seed=1, margin=0.5)
    assert separability_through_origin(toy.x_train, toy.y_train)[1] >= 0.5


def test_pooled_dataset(tiny_fashion):
    from calib.data import load_dataset

    ds = load_dataset("fashion-mnist", download=False).subset(n_train=20, n_val=10, n_test=10)
    half = ds.pooled(2)
    assert half.input_shape == (1, 4, 4) and half.x_train.dtype == np.uint8
    expected = ds.x_train.reshape(20, 1, 4, 2, 4, 2).mean(axis=(3, 5))
    np.testing.assert_array_equal(half.x_train, np.round(expected).astype(np.uint8))
    assert ds.pooled(1) is ds
    with pytest.raises(ValueError, match="does not divide"):
        ds.pooled(3)


def test_a_long_tailed_copy_keeps_the_exponential_profile_of_cui_et_al():
    """Dataset.long_tailed: class c keeps floor(n_min * ratio^(-c/(K-1))) of its first samples in the splits asked,
    the others unchanged; the normalisation follows the new training split; bad arguments are refused."""
    from calib.data import load_dataset

    ds = load_dataset("digits")
    lt = ds.long_tailed(10)
    n_min = np.bincount(ds.y_train, minlength=10).min()
    assert np.bincount(lt.y_train, minlength=10).tolist() == [int(np.floor(n_min * 10 ** (-c / 9))) for c in
                                                             range(10)]
    assert np.bincount(lt.y_train)[0] / np.bincount(lt.y_train)[9] == pytest.approx(10, rel=0.1)
    assert np.array_equal(lt.y_test, ds.y_test) and lt.x_val.shape[0] < ds.x_val.shape[0]
    first_nines = np.flatnonzero(ds.y_train == 9)[:np.bincount(lt.y_train)[9]]
    assert np.array_equal(lt.x_train[lt.y_train == 9], ds.x_train[first_nines])      # the first of each class
    assert not np.allclose(lt.mean, ds.mean)
    assert ds.long_tailed(1).y_train.size == 10 * n_min                          # ratio 1: balanced at n_min
    both = ds.long_tailed(10, splits=("train", "val", "test"))
    assert np.bincount(both.y_test)[0] > np.bincount(both.y_test)[9]
    with pytest.raises(ValueError, match="ratio must be a finite number >= 1"):
        ds.long_tailed(0.5)
    with pytest.raises(ValueError, match="splits must name some of 'train', 'val', 'test'"):
        ds.long_tailed(10, splits=("training",))


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
        names = [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]
        folder, key, k = "cifar-10-batches-py", "labels", 10
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


def test_an_idx_file_is_decompressed_once_a_process_and_again_when_it_changes(tmp_path, monkeypatch):
    import calib.dataset_files as files

    reads = []
    real = files._read_idx_file
    monkeypatch.setattr(files, "_read_idx_file", lambda path: reads.append(path) or real(path))
    path = tmp_path / "images.gz"
    with gzip.open(path, "wb") as fh:
        fh.write(idx_bytes(np.arange(24, dtype=np.uint8).reshape(2, 3, 4)))
    first = read_idx(path)
    first[0, 0, 0] = 99                                   # each call returns its own array
    np.testing.assert_array_equal(read_idx(path), np.arange(24).reshape(2, 3, 4))
    assert len(reads) == 1
    with gzip.open(path, "wb") as fh:                     # a new file at the same path is read again
        fh.write(idx_bytes(np.full((2, 3, 4), 7, dtype=np.uint8)))
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 10 ** 9))
    np.testing.assert_array_equal(read_idx(path), np.full((2, 3, 4), 7))
    assert len(reads) == 2


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
    monkeypatch.setattr(dataset_files, "DEBIAN_FASHION_MNIST", tmp_path / "no-debian")

    def no_network(url, timeout=None):
        raise urllib.error.URLError("Temporary failure in name resolution")

    monkeypatch.setattr(dataset_files.urllib.request, "urlopen", no_network)
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
    monkeypatch.setattr(dataset_files, "SOURCES", sources)
    monkeypatch.setattr(dataset_files.urllib.request, "urlopen",
                        lambda url, timeout=None: io.BytesIO(payload[url.rsplit("/", 1)[1]]))
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
