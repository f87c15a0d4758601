"""The training engine (calib.train.Trainer, `calib train`), Mukhoti et al.'s losses (FLSD, FLSc, Brier,
label smoothing), the App. B toy and its gradient-descent trainer, and the SIGKILL/--resume fault test."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from calib import cli
from calib.data import make_linear_toy
from calib.focal import FLSD_53, FLSD_532, gradient_factor, schedule_gamma
from calib.losses import (EpochScheduledFocalLoss, brier_loss, focal_loss, get_loss, label_smoothing_loss,
                          sample_dependent_focal_loss)
from calib.train import (RunConfigError, TrainConfig, Trainer, load_run, logistic_gradient_descent,
                         paper_milestones, train)

torch.set_num_threads(1)
ROOT = Path(__file__).resolve().parent.parent


# ------------------------------------------------------------------------------------------ the losses

def official_flsd_loop(logits, targets, gamma_high=3.0):
    """torrvision/focal_calibration Losses/focal_loss_adaptive_gamma.py: a per-sample Python loop, summed."""
    logpt = F.log_softmax(logits, dim=1).gather(1, targets.view(-1, 1)).view(-1)
    pt = logpt.exp()
    gammas = []
    for i in range(len(pt)):
        p = pt[i].item()
        gammas.append(gamma_high if p >= 0.5 else (5.0 if p < 0.2 else 3.0))
    return (-(1 - pt) ** torch.tensor(gammas) * logpt).sum()


@pytest.mark.parametrize("schedule, gamma_high", [(FLSD_53, 3.0), (FLSD_532, 2.0)])
def test_flsd_equals_the_official_per_sample_loop(schedule, gamma_high):
    gen = torch.Generator().manual_seed(0)
    logits = 3 * torch.randn(512, 10, generator=gen, dtype=torch.float64)
    targets = torch.randint(0, 10, (512,), generator=gen)
    name = "flsd-53" if schedule is FLSD_53 else "flsd-532"
    ours = get_loss(name)(logits, targets)
    torch.testing.assert_close(ours * 512, official_flsd_loop(logits, targets, gamma_high), rtol=1e-12, atol=0)
    # the gamma each sample gets is calib.focal.schedule_gamma of its true-class probability
    p = F.softmax(logits, 1).gather(1, targets[:, None]).squeeze(1).numpy()
    per_sample = sample_dependent_focal_loss(logits, targets, schedule, reduction="none")
    expected = focal_loss(logits, targets, torch.as_tensor(schedule_gamma(schedule, p)), reduction="none")
    torch.testing.assert_close(per_sample, expected, rtol=0, atol=0)
    # gamma is a constant of the step: the gradient is that of FL at the chosen gamma
    z = logits.clone().requires_grad_(True)
    sample_dependent_focal_loss(z, targets, schedule).backward()
    z2 = logits.clone().requires_grad_(True)
    focal_loss(z2, targets, torch.as_tensor(schedule_gamma(schedule, p))).backward()
    torch.testing.assert_close(z.grad, z2.grad)


def test_flsd_bin_edges_follow_the_schedule_convention():
    # p exactly at the edge 0.2: [0, 0.2) -> 5, [0.2, 1] -> 3 (Sec. 4); logits log(p) for two classes
    p = torch.tensor([0.2, 0.19999, 0.5, 0.49999], dtype=torch.float64)
    logits = torch.stack([torch.log(p), torch.log1p(-p)], dim=1)
    targets = torch.zeros(4, dtype=torch.long)
    for schedule in (FLSD_53, FLSD_532):
        got = sample_dependent_focal_loss(logits, targets, schedule, reduction="none")
        expected = focal_loss(logits, targets, torch.as_tensor(schedule_gamma(schedule, p.numpy())), reduction="none")
        torch.testing.assert_close(got, expected, rtol=1e-13, atol=0)
    assert list(schedule_gamma(FLSD_532, p.numpy())) == [3.0, 5.0, 2.0, 3.0]


def test_flsc_epoch_schedule():
    loss = get_loss("flsc-531")
    assert isinstance(loss, EpochScheduledFocalLoss) and loss.switch_epochs() == (100, 250)
    gammas = {}
    for epoch in (1, 100, 101, 250, 251, 350):
        loss.set_epoch(epoch, 350)
        gammas[epoch] = loss.gamma
    assert gammas == {1: 5.0, 100: 5.0, 101: 3.0, 250: 3.0, 251: 1.0, 350: 1.0}
    loss532 = get_loss("flsc-532")
    loss532.set_epoch(35, 35)
    assert loss532.switch_epochs() == (10, 25) and loss532.gamma == 2.0
    z, t = torch.randn(6, 4), torch.randint(0, 4, (6,))
    torch.testing.assert_close(loss532(z, t), focal_loss(z, t, 2.0))
    with pytest.raises(ValueError, match="'flsc-531', 'flsc-532'"):
        get_loss("flsc-99")


def test_brier_and_label_smoothing_values():
    gen = torch.Generator().manual_seed(1)
    z = torch.randn(7, 5, generator=gen, dtype=torch.float64)
    t = torch.randint(0, 5, (7,), generator=gen)
    p = F.softmax(z, 1).numpy()
    onehot = np.eye(5)[t.numpy()]
    assert get_loss("brier")(z, t).item() == pytest.approx(((p - onehot) ** 2).sum(1).mean(), rel=1e-13)
    alpha = 0.05
    smooth = (1 - alpha) * onehot + alpha * (1 - onehot) / 4
    assert get_loss("ls-0.05")(z, t).item() == pytest.approx(-(smooth * np.log(p)).sum(1).mean(), rel=1e-13)
    # Mukhoti's alpha/(K-1) is torch's label_smoothing alpha' = alpha K / (K-1) (which spreads alpha'/K)
    torch.testing.assert_close(label_smoothing_loss(z, t, alpha), F.cross_entropy(z, t, label_smoothing=alpha * 5 / 4))
    torch.testing.assert_close(get_loss("ls-0")(z, t), F.cross_entropy(z, t))
    with pytest.raises(ValueError, match="ls-<alpha>"):
        get_loss("ls-1.5")
    with pytest.raises(ValueError, match="takes no parameter"):
        get_loss("brier-2")
    with pytest.raises(ValueError, match="flsd-53', 'flsd-532'"):
        get_loss("flsd-5")


@pytest.mark.parametrize("name", ["fl-0.5", "fl-3", "flsd-53", "flsd-532", "flsc-531", "brier", "ls-0.05", "ce"])
def test_losses_finite_near_p_one_and_in_bf16(name):
    loss = get_loss(name)
    for dtype in (torch.float32, torch.bfloat16):
        for scale in (1.0, 30.0, 300.0):          # up to a saturated softmax (p_y == 1 in float32)
            z = (scale * torch.tensor([[1.0, 0.0, -1.0], [0.0, 1.0, 0.5], [0.3, 0.2, 0.1]])).to(dtype).requires_grad_(True)
            t = torch.tensor([0, 1, 2])
            value = loss(z, t)
            value.backward()
            assert torch.isfinite(value.float()) and torch.isfinite(z.grad.float()).all(), (name, dtype, scale)


# ------------------------------------------------------------------------------------- App. B toy

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


def test_logistic_gradient_descent_matches_autograd():
    toy = make_linear_toy(n_train=300, n_test=10, noise=0.1, seed=0)
    x, y = toy.x_train.astype(np.float64), toy.y_train
    for gamma in (0.0, 1.0):
        res = logistic_gradient_descent(x, y, gamma=gamma, lr=0.5, iterations=5, record_every=1)
        w = torch.zeros(2, dtype=torch.float64, requires_grad=True)
        xt, yt = torch.as_tensor(x), torch.as_tensor(y)
        for step in range(5):
            z = xt @ w
            logits = torch.stack([torch.zeros_like(z), z], 1)     # sigma(z) as a two-class softmax
            loss = focal_loss(logits, yt, gamma)
            (g,) = torch.autograd.grad(loss, w)
            with torch.no_grad():
                w -= 0.5 * g
            np.testing.assert_allclose(res["w"][step + 1], w.detach().numpy(), rtol=1e-10, atol=1e-14)
    batched = logistic_gradient_descent(np.stack([x, x]), np.stack([y, y]), gamma=[0.0, 1.0], lr=0.5,
                                        iterations=50, record_every=25)
    assert batched["w"].shape == (2, 3, 2) and list(batched["iteration"]) == [0, 25, 50]
    single = logistic_gradient_descent(x, y, gamma=1.0, lr=0.5, iterations=50, record_every=25)
    np.testing.assert_allclose(batched["w"][1], single["w"], rtol=1e-12)
    assert np.all(batched["weight_norm"][0, 1:] > batched["weight_norm"][1, 1:])     # CE grows faster


# ------------------------------------------------------------------------------------- the trainer

TINY = dict(data="fashion-mnist", model="small-cnn-w4", loss="ce", epochs=3, seed=3, batch_size=64, lr=0.05,
            train_subset=384, val_subset=64, test_subset=128)


def test_paper_milestones():
    assert paper_milestones(350) == (150, 250)
    assert paper_milestones(7) == (3, 5)
    assert TrainConfig("cifar10", "resnet50", "ce", 350).resolved().milestones == (150, 250)


def test_run_directory_history_logits_and_meta(tiny_fashion, tmp_path):
    run = train(out=tmp_path / "run", progress=False, **{**TINY, "loss": "fl-2"})
    assert run.finished and len(run.epochs) == 3
    assert {p.name for p in run.out.iterdir()} >= {"meta.json", "history.json", "logits.npz", "checkpoint.pt"}
    meta = run.meta
    assert meta["config"]["model"] == "small-cnn-w4" and meta["config"]["milestones"] == [1, 2]
    assert meta["versions"]["torch"] == torch.__version__ and meta["device"] == "cpu"
    assert meta["dataset"]["n_train"] == 384 and meta["wall_time_s"] > 0 and "git_commit" in meta
    rec = run.epochs[-1]
    assert [e["lr"] for e in run.epochs] == pytest.approx([0.05, 0.005, 0.0005])
    for split in ("train", "val", "test"):
        s = rec[split]
        assert 0 <= s["ece"] <= 1 and 0 <= s["adaece"] <= 1 and s["n"] == {"train": 384, "val": 64, "test": 128}[split]
        if s["n_wrong"]:
            assert s["nll"] == pytest.approx(((s["n"] - s["n_wrong"]) * s["nll_correct"] + s["n_wrong"] * s["nll_wrong"]) / s["n"])
    tr = rec["train"]
    assert sum(tr["grad_norm"]["histogram"]) == 384 and len(tr["reliability"]["counts"]) == 25
    assert tr["feature_norm"] > 0 and rec["weight_norm"] > rec["last_layer_weight_norm"] > 0
    logits = run.logits()
    assert logits["val_logits"].shape == (64, 10) and logits["test_logits"].shape == (128, 10)
    assert logits["test_labels"].dtype == np.int64
    # the stored logits are those of the final model, and give the last epoch's test accuracy
    acc = (logits["test_logits"].argmax(1) == logits["test_labels"]).mean()
    assert acc == pytest.approx(rec["test"]["accuracy"])
    assert run.series("test", "ece").shape == (3,)


def test_last_layer_gradient_norms_are_per_sample_gradients(tiny_fashion, tmp_path):
    trainer = Trainer(TrainConfig(**{**TINY, "loss": "fl-3", "train_subset": 40}), tmp_path / "g", progress=False)
    trainer._setup()
    res = trainer._evaluate("train", with_grads=True)
    model = trainer.model
    model.eval()
    xs, ys = next(trainer.eval_loaders["train"].epoch())
    head = model.head
    for i in range(0, 40, 13):
        model.zero_grad()
        focal_loss(model(xs[i:i + 1]), ys[i:i + 1], 3.0).backward()
        brute = torch.sqrt(head.weight.grad.pow(2).sum() + head.bias.grad.pow(2).sum()).item()
        assert res["grad_norm"][i] == pytest.approx(brute, rel=1e-4)
        # Prop. 1: the FL gradient is g(p_y, 3) times the CE gradient
        model.zero_grad()
        F.cross_entropy(model(xs[i:i + 1]), ys[i:i + 1]).backward()
        ce = torch.sqrt(head.weight.grad.pow(2).sum() + head.bias.grad.pow(2).sum()).item()
        p = F.softmax(torch.as_tensor(res["logits"][i:i + 1]), 1)[0, ys[i]].item()
        assert res["grad_norm"][i] == pytest.approx(gradient_factor(p, 3.0) * ce, rel=1e-4)


def test_finished_run_is_not_retrained_and_other_configs_are_refused(tiny_fashion, tmp_path, capsys):
    out = tmp_path / "run"
    first = train(out=out, progress=False, **{**TINY, "epochs": 1})
    stamp = (out / "logits.npz").stat().st_mtime_ns
    again = train(out=out, progress=False, **{**TINY, "epochs": 1})
    assert (out / "logits.npz").stat().st_mtime_ns == stamp and again.meta == first.meta
    with pytest.raises(RunConfigError, match=r"another configuration \(loss: 'ce' there, 'fl-3' here\)"):
        train(out=out, progress=False, resume=True, **{**TINY, "epochs": 1, "loss": "fl-3"})
    # through the command line: exit status 1 and the reason
    code = cli.main(["train", "--data", "fashion-mnist", "--model", "small-cnn-w4", "--loss", "ce", "--epochs", "1",
                     "--seed", "4", "--out", str(out), "--resume", "--no-progress"])
    err = capsys.readouterr().err
    assert code == 1 and "refusing to resume" in err and "seed: 3 there, 4 here" in err


def test_bad_names_list_the_valid_ones(tmp_path, capsys):
    base = ["train", "--epochs", "1", "--out", str(tmp_path / "x"), "--no-progress"]
    assert cli.main([*base, "--data", "imagenet", "--model", "resnet20", "--loss", "ce"]) == 1
    assert "unknown dataset 'imagenet'; choose from 'fashion-mnist', 'cifar10'" in capsys.readouterr().err
    assert cli.main([*base, "--data", "digits", "--model", "vgg16", "--loss", "ce"]) == 1
    assert "unknown model 'vgg16'; choose from 'linear'" in capsys.readouterr().err
    assert cli.main([*base, "--data", "digits", "--model", "mlp", "--loss", "hinge"]) == 1
    err = capsys.readouterr().err
    assert "unknown loss 'hinge'; choose from 'ce'" in err and "'flsd-53'" in err
    assert not (tmp_path / "x").exists()


def test_missing_fashion_mnist_through_the_command_line(tmp_path, monkeypatch, capsys):
    import calib.data as data
    import urllib.error

    monkeypatch.setenv("CALIB_DATA", str(tmp_path / "empty"))
    monkeypatch.setattr(data, "DEBIAN_FASHION_MNIST", tmp_path / "none")

    def offline(url, timeout=None):
        raise urllib.error.URLError("network unreachable")

    monkeypatch.setattr(data.urllib.request, "urlopen", offline)
    code = cli.main(["train", "--data", "fashion-mnist", "--model", "mlp", "--loss", "ce", "--epochs", "1",
                     "--out", str(tmp_path / "r"), "--no-progress"])
    err = capsys.readouterr().err
    assert code == 1 and "apt-get install dataset-fashion-mnist" in err and "network unreachable" in err


def test_unfinished_run_needs_resume(tiny_fashion, tmp_path):
    out = tmp_path / "run"
    trainer = Trainer(TrainConfig(**TINY), out, progress=False)
    trainer._setup()
    out.mkdir()
    trainer.save_checkpoint()
    with pytest.raises(RunConfigError, match="unfinished run of this configuration; pass --resume"):
        train(out=out, progress=False, **TINY)


def test_sigkill_after_the_second_epoch_then_resume_is_exact(tiny_fashion, tmp_path):
    """Fault test: `calib train` killed with SIGKILL after its second epoch's checkpoint, restarted with
    --resume, ends with the test logits of an uninterrupted run (CPU)."""
    cfg = {**TINY, "epochs": 6, "train_subset": 1536, "loss": "flsd-53"}
    reference = train(out=tmp_path / "uninterrupted", progress=False, **cfg).logits()
    out = tmp_path / "killed"
    args = [sys.executable, "-m", "calib", "train", "--data", cfg["data"], "--model", cfg["model"], "--loss", cfg["loss"],
            "--epochs", str(cfg["epochs"]), "--seed", str(cfg["seed"]), "--batch-size", str(cfg["batch_size"]),
            "--lr", str(cfg["lr"]), "--train-subset", str(cfg["train_subset"]), "--val-subset", str(cfg["val_subset"]),
            "--test-subset", str(cfg["test_subset"]), "--out", str(out), "--no-progress"]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(args, env=env, cwd=str(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    history = out / "history.json"
    while time.monotonic() < deadline and proc.poll() is None:
        if history.is_file():
            try:
                if len(json.loads(history.read_text())["epochs"]) >= 2:
                    break
            except (json.JSONDecodeError, KeyError):
                pass
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    meta = json.loads((out / "meta.json").read_text())
    done = torch.load(out / "checkpoint.pt", weights_only=False)["epoch"]
    assert proc.returncode == -signal.SIGKILL and not meta["finished"], proc.stderr.read().decode()[-2000:]
    assert 2 <= done < cfg["epochs"] and not (out / "logits.npz").exists()
    resumed = subprocess.run([*args, "--resume"], env=env, cwd=str(tmp_path), capture_output=True, text=True)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    run = load_run(out)
    assert run.finished and [e["epoch"] for e in run.epochs] == list(range(1, 7))
    got = run.logits()
    np.testing.assert_array_equal(got["test_labels"], reference["test_labels"])
    np.testing.assert_allclose(got["test_logits"], reference["test_logits"], rtol=0, atol=1e-5)
    np.testing.assert_allclose(got["val_logits"], reference["val_logits"], rtol=0, atol=1e-5)


def test_binary_gradient_factor_matches_the_closed_form_where_p_is_representable():
    from scipy.special import expit

    from calib.train import _binary_gradient_factor

    s = np.linspace(-40, 30, 4001)
    for gamma in (0.0, 0.5, 1.0, 3.0):
        np.testing.assert_allclose(_binary_gradient_factor(s, gamma), gradient_factor(expit(s), gamma), rtol=5e-3)
    # far out, where p rounds to 1 in float64, it keeps the tail (g ~ (1 + gamma) e^{-gamma s}) instead of 0
    assert _binary_gradient_factor(np.array([60.0]), 1.0)[0] == pytest.approx(2 * np.exp(-60.0), rel=1e-12)
    assert _binary_gradient_factor(np.array([-800.0, 800.0]), 2.0).tolist() == [1.0, 0.0]


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


def test_secondary_loss_from_the_config_and_the_command_line(tiny_fashion, tmp_path, capsys):
    from calib.cli import main
    from calib.losses import get_loss, get_secondary_loss

    trainer = Trainer(TrainConfig(**{**TINY, "secondary": "SB-ECE", "secondary_weight": 0.5}), tmp_path / "s",
                      progress=False)
    trainer._setup()
    logits, targets = torch.randn(32, 10, generator=torch.Generator().manual_seed(0)), torch.arange(32) % 10
    expected = get_loss("ce")(logits, targets) + 0.5 * get_secondary_loss("sb-ece")(logits, targets)
    assert trainer.loss_fn(logits, targets).item() == pytest.approx(expected.item(), rel=1e-6)
    assert trainer.config.secondary == "sb-ece"
    code = main(["train", "--data", "fashion-mnist", "--model", "small-cnn-w4", "--loss", "ce", "--secondary",
                 "calibration", "--epochs", "1", "--out", str(tmp_path / "bad")])
    assert code == 1 and "sb-ece" in capsys.readouterr().err
