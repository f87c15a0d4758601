"""What calib gained for the ResNet grid on a GPU (issue 44): Fashion-MNIST zero-padded to the 32x32 of the CIFAR
networks, a run's ``meta.json`` that records the CUDA version, a grid's note and the commit a copy without ``.git``
was sent from, and the grid key ``note`` that ``calib sweep`` writes into every run."""

import json

import numpy as np
import pytest
import torch

from calib import data, runs
from calib.experiments import load_grid, sweep
from calib.run_config import TrainConfig
from calib.train import train


def test_padding_centres_the_images_in_black_and_recomputes_the_normalisation(tiny_fashion):
    small = data.load_dataset("fashion-mnist")                  # the stand-in's 8x8 images
    padded = small.padded(32)
    assert padded.input_shape == (1, 32, 32) and padded.x_train.dtype == np.uint8
    assert np.array_equal(padded.x_train[:, :, 12:20, 12:20], small.x_train)
    assert np.array_equal(padded.x_test[:, :, 12:20, 12:20], small.x_test)
    border = padded.x_val.copy()
    border[:, :, 12:20, 12:20] = 0
    assert not border.any()
    assert padded.mean[0] == pytest.approx(small.mean[0] * 64 / 1024, rel=1e-5)
    assert padded.std[0] == pytest.approx(padded.x_train.std(dtype=np.float64) / 255, rel=1e-5)
    assert np.array_equal(padded.y_train, small.y_train) and small.padded(8) is small
    assert small.padded(11).input_shape == (1, 11, 11)                 # an odd margin: the extra pixel below, right
    assert np.array_equal(small.padded(11).x_train[:, :, 1:9, 1:9], small.x_train)
    with pytest.raises(ValueError, match="size=6 is smaller than the 8x8 images"):
        small.padded(6)
    with pytest.raises(ValueError, match="padding needs images"):
        data.load_dataset("breast-cancer").padded(32)


def test_fashion_mnist_32_is_fashion_mnist_padded_with_the_same_splits(tiny_fashion):
    plain, padded = data.load_dataset("fashion-mnist"), data.load_dataset("fashion-mnist-32")
    assert padded.name == "fashion-mnist-32" and padded.input_shape == (1, 32, 32)
    assert "zero-padded to 32x32" in padded.source
    for split in ("train", "val", "test"):
        assert np.array_equal(getattr(padded, f"y_{split}"), getattr(plain, f"y_{split}"))
        assert np.array_equal(getattr(padded, f"x_{split}"), getattr(plain.padded(32), f"x_{split}"))
    assert data.SPLITS["fashion-mnist-32"] == data.SPLITS["fashion-mnist"]
    config = TrainConfig(data="fashion-mnist-32", model="resnet20", loss="ce", epochs=1, device="cpu").resolved()
    assert config.augment == "crop-flip"                     # as Fashion-MNIST's, the CIFAR recipe


def test_meta_records_the_cuda_version_a_note_and_the_commit_a_copy_was_sent_from(tmp_path, monkeypatch):
    common = dict(data="digits", model="linear", loss="ce", epochs=1, device="cpu", progress=False)
    run = train(out=tmp_path / "a", note="Schedule compressed: 1 epoch.", **common)
    assert "cuda" in run.meta["versions"] and run.meta["versions"]["cuda"] == torch.version.cuda
    assert run.meta["note"] == "Schedule compressed: 1 epoch."
    assert "note" not in train(out=tmp_path / "b", **common).meta
    monkeypatch.setattr(runs, "git_commit", lambda: None)       # a copy of the checkout without .git
    monkeypatch.setattr(runs, "git_dirty", lambda: None)
    monkeypatch.setenv("CALIB_GIT_COMMIT", "93db9addcc4c")
    monkeypatch.setenv("CALIB_GIT_DIRTY", "1")
    meta = train(out=tmp_path / "c", **common).meta
    assert (meta["git_commit"], meta["git_dirty"]) == ("93db9addcc4c", True)
    monkeypatch.delenv("CALIB_GIT_COMMIT")
    meta = train(out=tmp_path / "d", **common).meta
    assert (meta["git_commit"], meta["git_dirty"]) == (None, None)
    with pytest.raises(ValueError, match="note must be a non-empty sentence"):
        train(out=tmp_path / "e", note=" ", **common)


GRID = """note = "Schedule compressed: the papers' 350 epochs in 1."
seeds = [0]
models = ["linear"]
losses = ["ce"]

[train]
data = "digits"
epochs = 1
device = "cpu"
"""


def test_a_grid_note_goes_into_the_meta_of_every_run_it_trains(tmp_path):
    (tmp_path / "grid.toml").write_text(GRID)
    grid = load_grid(tmp_path / "grid.toml")
    assert grid.note == "Schedule compressed: the papers' 350 epochs in 1."
    (run,) = sweep(grid, progress=False, log=lambda line: None)
    assert json.loads((run.out / "meta.json").read_text())["note"] == grid.note
    (tmp_path / "g2").mkdir()
    (tmp_path / "g2" / "grid.toml").write_text(GRID.replace('note = "Schedule', 'note = 3\n# "Schedule'))
    with pytest.raises(ValueError, match="'note' must be a string"):
        load_grid(tmp_path / "g2" / "grid.toml")
    (tmp_path / "g3").mkdir()
    (tmp_path / "g3" / "grid.toml").write_text(GRID.split("\n", 1)[1])
    assert load_grid(tmp_path / "g3" / "grid.toml").note == ""
