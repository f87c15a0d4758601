"""Interleaved training (Karandikar et al. 2021, App. B): ``TrainConfig.interleave``,
:func:`calib.train.interleave_split` and the two parts of each epoch in :class:`calib.train.Trainer`."""

import json

import numpy as np
import pytest
import torch

import calib.losses
from calib import cli
from calib.experiments import read_test_outcomes, write_test_outcomes
from calib.run_config import TrainConfig, config_from_meta
from calib.train import Trainer, interleave_split, train

torch.set_num_threads(1)

TINY = dict(data="fashion-mnist", model="small-cnn-w4", loss="ce", epochs=3, seed=3, batch_size=64, lr=0.05,
            train_subset=384, val_subset=64, test_subset=128, augment="none", device="cpu")
INTERLEAVED = dict(TINY, secondary="sb-ece", secondary_weight=0.5, interleave=0.25)


@pytest.mark.parametrize("value, needle", [(0.0, "in \\(0, 1\\)"), (1.0, "in \\(0, 1\\)"), (-0.1, "in \\(0, 1\\)"),
                                           (True, "in \\(0, 1\\)"), ("0.1", "in \\(0, 1\\)"),
                                           (float("nan"), "in \\(0, 1\\)")])
def test_interleave_must_be_a_fraction(value, needle):
    with pytest.raises(ValueError, match=f"interleave must be .*{needle}"):
        TrainConfig(**{**INTERLEAVED, "interleave": value}).resolved()


def test_interleave_needs_a_secondary_loss():
    with pytest.raises(ValueError, match="interleave=0.1 needs a secondary loss.*secondary='sb-ece'"):
        TrainConfig(**{**TINY, "interleave": 0.1}).resolved()


def test_identity_names_interleave_only_when_set():
    """A run stored before the option existed keeps its identity; an interleaved run is another run."""
    joint = TrainConfig(**{**INTERLEAVED, "interleave": None}).identity()
    assert "interleave" not in joint
    assert TrainConfig(**INTERLEAVED).identity() == {**joint, "interleave": 0.25}


def test_interleave_split_partitions_the_training_set_from_the_seed():
    majority, held = interleave_split(1000, 0.1, seed=7)
    assert len(held) == 100 and len(majority) == 900
    assert np.array_equal(np.sort(np.concatenate([majority, held])), np.arange(1000))
    again = interleave_split(1000, 0.1, seed=7)
    assert all(np.array_equal(a, b) for a, b in zip((majority, held), again))
    assert not np.array_equal(held, interleave_split(1000, 0.1, seed=8)[1])
    with pytest.raises(ValueError, match="each part needs at least one sample"):
        interleave_split(4, 0.1, seed=0)


def _row_index(loader) -> dict:
    """Each normalised training image of ``loader`` (no augmentation), as bytes, to its row."""
    return {loader._prepare(loader.x[i:i + 1]).numpy().tobytes(): i for i in range(loader.n)}


def test_each_part_of_an_epoch_sees_its_own_samples_with_its_own_loss(tiny_fashion, tmp_path, monkeypatch):
    """The primary loss alone sees exactly the majority part, then the weighted secondary loss alone sees exactly the
    held-out part, every sample once an epoch, in that order (App. B)."""
    calls = []
    real_get_loss, real_secondary = calib.losses.get_loss, calib.losses.get_secondary_loss

    def recorder(name, fn):
        def record(logits, targets):
            calls.append((name, current["x"]))
            return fn(logits, targets)
        return record

    def get_loss(name, secondary=None, secondary_weight=1.0):
        loss = real_get_loss(name, secondary, secondary_weight)
        return loss if secondary is not None else recorder("primary", loss)

    monkeypatch.setattr(calib.losses, "get_loss", get_loss)
    monkeypatch.setattr(calib.losses, "get_secondary_loss", lambda name: recorder("secondary", real_secondary(name)))
    trainer = Trainer(TrainConfig(**INTERLEAVED), tmp_path / "run", progress=False)
    trainer._setup()
    current = {}
    trainer.model.register_forward_pre_hook(lambda module, args: current.update(x=args[0].detach().clone()))
    trainer._train_epoch(1)
    rows = _row_index(trainer.eval_loaders["train"])
    seen = {"primary": [], "secondary": []}
    for name, x in calls:
        seen[name] += [rows[x[i:i + 1].numpy().tobytes()] for i in range(len(x))]
    majority, held = interleave_split(384, 0.25, seed=3)
    assert sorted(seen["primary"]) == majority.tolist()
    assert sorted(seen["secondary"]) == held.tolist()
    order = [name for name, _ in calls]
    assert order == sorted(order, key=["primary", "secondary"].index)          # the majority part first
    assert trainer.heldout_loss is not None and np.isfinite(trainer.heldout_loss)


def test_second_part_optimises_the_weighted_secondary_loss(tiny_fashion, tmp_path):
    """The held-out part's recorded loss is beta times the secondary loss of its batches (not the joint loss)."""
    run = train(TrainConfig(**{**INTERLEAVED, "epochs": 1}), tmp_path / "run", progress=False)
    record = run.epochs[0]
    assert "heldout_loss" in record
    joint = train(TrainConfig(**{**INTERLEAVED, "epochs": 1, "interleave": None}), tmp_path / "joint",
                  progress=False).epochs[0]
    assert "heldout_loss" not in joint
    assert record["heldout_loss"] < 0.5 and record["train_loss"] > 1.0      # SB-ECE <= 1 weighted by 1/2; CE ~ log 10


def test_interrupted_interleaved_run_resumes_exactly(tiny_fashion, tmp_path, monkeypatch):
    config = TrainConfig(**INTERLEAVED)
    reference = train(config, tmp_path / "whole", progress=False).logits()
    save = Trainer.save_checkpoint

    def killed_after_two(self):
        save(self)
        if self.epoch == 2:
            raise KeyboardInterrupt

    with monkeypatch.context() as patch, pytest.raises(KeyboardInterrupt):    # (undo() would drop CALIB_DATA too)
        patch.setattr(Trainer, "save_checkpoint", killed_after_two)
        train(config, tmp_path / "cut", progress=False)
    resumed = train(config, tmp_path / "cut", resume=True, progress=False)
    assert np.array_equal(resumed.logits()["test_logits"], reference["test_logits"])
    assert config_from_meta(tmp_path / "cut").interleave == 0.25


def test_cli_train_takes_interleave(tiny_fashion, tmp_path):
    args = cli._parser().parse_args(
        ["train", "--data", "fashion-mnist", "--model", "small-cnn-w4", "--loss", "ce", "--epochs", "1",
         "--secondary", "sb-ece", "--interleave", "0.2", "--out", str(tmp_path / "run")])
    assert cli._train_config(args).interleave == 0.2
    bad = cli._parser().parse_args(["train", "--data", "fashion-mnist", "--model", "small-cnn-w4", "--loss",
                                         "ce", "--epochs", "1", "--interleave", "0.2", "--out", str(tmp_path / "r")])
    with pytest.raises(ValueError, match="--interleave: interleave=0.2 needs a secondary loss"):
        cli._train_config(bad)


def test_test_outcomes_round_trip(tiny_fashion, tmp_path):
    """write_test_outcomes keeps each run's top-label test confidence and correctness and its meta.json."""
    from calib.experiments import load_grid

    grid_file = tmp_path / "grid.toml"
    grid_file.write_text(
        'store = "runs"\nseeds = [0, 1]\nmodels = ["small-cnn-w4"]\n'
        'losses = [{label = "ce+sb-ece-il", loss = "ce", secondary = "sb-ece", interleave = 0.25}]\n'
        '[train]\ndata = "fashion-mnist"\nepochs = 1\nbatch_size = 64\ntrain_subset = 384\nval_subset = 64\n'
        'test_subset = 128\naugment = "none"\ndevice = "cpu"\n')
    grid = load_grid(grid_file)
    for run in grid.runs:
        train(run.config, run.out, progress=False)
    path = write_test_outcomes(grid, tmp_path / "outcomes.npz")
    outcomes = read_test_outcomes(path)
    assert sorted(outcomes) == [("ce+sb-ece-il", 0), ("ce+sb-ece-il", 1)]
    for (loss, seed), got in outcomes.items():
        logits = train(grid.runs[seed].config, grid.runs[seed].out, progress=False).logits()
        z = logits["test_logits"].astype(np.float64)
        p = np.exp(z - z.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        assert np.allclose(got.confidence, p.max(axis=1), rtol=0, atol=1e-6)
        assert np.array_equal(got.correct, p.argmax(axis=1) == logits["test_labels"])
        assert got.meta["config"]["interleave"] == 0.25 and got.meta["config"]["seed"] == seed
    json.dumps(outcomes[("ce+sb-ece-il", 0)].meta)


def test_remembered_statistic_resamples_once_per_counts():
    from calib.stats import AdditiveStatistic, RememberedStatistic, bootstrap_counts

    calls = []

    class Counting(AdditiveStatistic):
        def resampled(self, counts):
            calls.append(1)
            return super().resampled(counts)

    base = Counting(np.arange(10.0)[:, None], lambda sums, total: sums[:, 0] / total)
    kept = RememberedStatistic(base)
    counts = bootstrap_counts(10, 60, seed=1)
    first = kept.resampled(counts)
    assert np.array_equal(kept.resampled(counts), first) and len(calls) == 1
    assert np.array_equal(first, base.resampled(counts)) and kept.value == base.value == 4.5
    writable = counts.copy()
    kept.resampled(writable)
    kept.resampled(writable)
    assert len(calls) == 4                                 # a writable array is never trusted to be unchanged
    with pytest.raises(ValueError, match="base must be a statistic"):
        RememberedStatistic(3.0)
