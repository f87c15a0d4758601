"""Tests of the minimal training loop (calib.train)."""

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

from calib_book.timeouts import scaled  # a subprocess's time limit, scaled by the machine's load

from calib import cli
from calib.data import make_linear_toy
from calib.focal import gradient_factor
from calib.losses import focal_loss
from calib.models import mlp
from calib.train import (CorruptRunError, DiskFullError, RunConfigError, RunLockedError, TrainConfig, Trainer, load_run,
                         logistic_gradient_descent, paper_milestones, resolve_device, train, train_classifier)

torch.set_num_threads(1)


def separable(n=400, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 2)).astype(np.float32)
    y = (x[:, 0] + 0.5 * x[:, 1] > 0).astype(np.int64)
    return x, y


@pytest.mark.parametrize("batch_size, optimizer, lr", [(None, "adam", 0.05), (64, "sgd", 0.1)])
def test_training_decreases_the_loss_and_fits(batch_size, optimizer, lr):
    x, y = separable()
    net = mlp(2, 2, hidden=(16,), seed=0)
    net, history = train_classifier(net, x, y, "ce", epochs=60, lr=lr, batch_size=batch_size,
                                    optimizer=optimizer, progress=False)
    assert len(history) == 60
    assert history[-1] < 0.25 * history[0]
    assert not net.training
    with torch.no_grad():
        acc = (net(torch.as_tensor(x)).argmax(dim=1).numpy() == y).mean()
    assert acc > 0.97


def test_training_is_reproducible_and_accepts_callables():
    x, y = separable(200, seed=1)
    runs = []
    for _ in range(2):
        net = mlp(2, 2, hidden=(8,), seed=3)
        _, hist = train_classifier(net, torch.as_tensor(x), y, lambda z, t: torch.nn.functional.cross_entropy(z, t),
                                   epochs=5, lr=0.01, batch_size=32, seed=5, progress=False)
        runs.append(hist)
    assert runs[0] == runs[1]


def test_focal_loss_by_name_and_progress_bar():
    x, y = separable(100)
    _, hist = train_classifier(mlp(2, 2, hidden=(8,), seed=0), x, y, "fl-2", epochs=3, lr=0.01, progress=True)
    assert len(hist) == 3 and all(np.isfinite(hist))


def test_a_step_schedule_of_the_learning_rate_is_the_loop_of_chapter_00():
    """Issue 43, item 7: the answer key trained chapter 00's exercises with a loop of its own, because
    train_classifier had no learning-rate schedule. With ``milestones`` (torch's MultiStepLR, ``lr_decay``) it is
    that loop: the same weights, to the bit, as SGD with momentum and weight decay, mini-batches in a seeded order
    and the rate dropped tenfold after epochs 2 and 3."""
    x, y = separable(300, seed=2)
    net, _ = train_classifier(mlp(2, 2, hidden=(8,), seed=4), x, y, "ce", epochs=4, lr=0.1, batch_size=64, seed=9,
                              optimizer="sgd", momentum=0.9, weight_decay=5e-4, milestones=(2, 3), progress=False)
    reference = mlp(2, 2, hidden=(8,), seed=4)
    optimiser = torch.optim.SGD(reference.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4)
    schedule = torch.optim.lr_scheduler.MultiStepLR(optimiser, milestones=[2, 3], gamma=0.1)
    order, xt, yt = torch.Generator().manual_seed(9), torch.as_tensor(x), torch.as_tensor(y)
    for _ in range(4):
        for batch in torch.randperm(len(y), generator=order).split(64):
            optimiser.zero_grad()
            F.cross_entropy(reference(xt[batch]), yt[batch]).backward()
            optimiser.step()
        schedule.step()
    assert all(torch.equal(a, b) for a, b in zip(net.state_dict().values(), reference.state_dict().values()))
    constant, _ = train_classifier(mlp(2, 2, hidden=(8,), seed=4), x, y, "ce", epochs=4, lr=0.1, batch_size=64, seed=9,
                                   optimizer="sgd", momentum=0.9, weight_decay=5e-4, progress=False)
    assert not torch.equal(constant[0].weight, net[0].weight)           # the schedule changes the run
    with pytest.raises(ValueError, match="milestones must be a sequence of epochs"):
        train_classifier(mlp(2, 2), x, y, "ce", epochs=2, lr=0.1, milestones=2, progress=False)
    with pytest.raises(ValueError, match="milestones must be an integer >= 1; got 0"):
        train_classifier(mlp(2, 2), x, y, "ce", epochs=2, lr=0.1, milestones=(0,), progress=False)
    with pytest.raises(ValueError, match="lr_decay must be > 0"):
        train_classifier(mlp(2, 2), x, y, "ce", epochs=2, lr=0.1, milestones=(1,), lr_decay=0.0, progress=False)


def test_an_epoch_scheduled_loss_is_told_each_epoch():
    """train_classifier never called ``set_epoch``: FLSc (``"flsc-531"``) trained with its first gamma throughout.
    Each epoch now tells the loss its number (1-based) and the run's length before it starts, as calib.train does."""
    from calib.losses import get_loss

    x, y = separable(64)
    told = []

    class Recording(torch.nn.Module):
        def set_epoch(self, epoch, total):
            told.append((epoch, total))

        def forward(self, z, t):
            return F.cross_entropy(z, t)

    train_classifier(mlp(2, 2, hidden=(4,), seed=0), x, y, Recording(), epochs=3, lr=0.01, progress=False)
    assert told == [(1, 3), (2, 3), (3, 3)]
    flsc = get_loss("flsc-531")
    train_classifier(mlp(2, 2, hidden=(4,), seed=0), x, y, flsc, epochs=7, lr=0.01, progress=False)
    assert (flsc.epoch, flsc.total_epochs, flsc.switch_epochs(), flsc.gamma) == (7, 7, (2, 5), 1.0)


def test_errors():
    x, y = separable(50)
    with pytest.raises(ValueError, match="epochs"):
        train_classifier(mlp(2, 2), x, y, "ce", epochs=0, lr=0.1, progress=False)
    with pytest.raises(ValueError, match="optimizer"):
        train_classifier(mlp(2, 2), x, y, "ce", epochs=1, lr=0.1, optimizer="lbfgs", progress=False)
    with pytest.raises(ValueError, match="one label per row"):
        train_classifier(mlp(2, 2), x, y[:-1], "ce", epochs=1, lr=0.1, progress=False)
    with pytest.raises(ValueError, match="unknown loss"):
        train_classifier(mlp(2, 2), x, y, "hinge", epochs=1, lr=0.1, progress=False)
    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_device("auto").type in ("cpu", "cuda")
    with pytest.raises(ValueError, match="device"):
        resolve_device("gpu0")


ROOT = Path(__file__).resolve().parent.parent


TINY = dict(data="fashion-mnist", model="small-cnn-w4", loss="ce", epochs=3, seed=3, batch_size=64, lr=0.05,
            train_subset=384, val_subset=64, test_subset=128)


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
            assert s["nll"] == pytest.approx(((s["n"] - s["n_wrong"]) * s["nll_correct"]
                                              + s["n_wrong"] * s["nll_wrong"]) / s["n"])
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
    import urllib.error

    import calib.dataset_files as data

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
    args = [sys.executable, "-m", "calib", "train", "--data", cfg["data"], "--model", cfg["model"],
            "--loss", cfg["loss"],
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


SMALL = dict(data="digits", model="mlp-32-32", epochs=3, lr=0.1, batch_size=64, augment="none")


def _history(run):
    return [{k: v for k, v in ep.items() if k not in ("train_seconds", "images_per_s")} for ep in run.epochs]


def test_same_seed_same_history_different_seed_different(tmp_path):
    a = train(out=tmp_path / "a", progress=False, loss="ce", seed=4, **SMALL)
    b = train(out=tmp_path / "b", progress=False, loss="ce", seed=4, **SMALL)
    c = train(out=tmp_path / "c", progress=False, loss="ce", seed=5, **SMALL)
    assert _history(a) == _history(b)
    np.testing.assert_array_equal(a.logits()["test_logits"], b.logits()["test_logits"])
    assert a.series("test", "nll")[-1] != c.series("test", "nll")[-1]


def test_losses_on_one_seed_share_the_initial_weights(tmp_path):
    """Pairing CE and focal-loss runs by seed pairs identical starting points (the same initial network)."""
    from calib.data import load_dataset
    from calib.models import build_model

    ds = load_dataset("digits")
    nets = [build_model("mlp-32-32", ds.input_shape, ds.n_classes, seed=7) for _ in range(2)]
    for p, q in zip(nets[0].parameters(), nets[1].parameters()):
        torch.testing.assert_close(p, q, rtol=0, atol=0)


def test_linear_toy_runs_are_reproducible():
    toys = [make_linear_toy(noise=0.1, seed=s, n_train=400, n_test=100) for s in (0, 0, 1)]
    fits = [logistic_gradient_descent(t.x_train, t.y_train, gamma=1.0, iterations=50)["final_w"] for t in toys]
    np.testing.assert_array_equal(fits[0], fits[1])
    assert not np.allclose(fits[0], fits[2])


# ------------------------------------------------------------------------------- hostile use of calib train

def _cli(argv):
    """``calib ARGV`` in this process: (exit status, what it wrote to stderr)."""
    import contextlib
    import io

    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        rc = cli.main(argv)
    return rc, err.getvalue()


def _cli_args(cfg, out):
    return [sys.executable, "-m", "calib", "train", "--data", cfg["data"], "--model", cfg["model"],
            "--loss", cfg["loss"],
            "--epochs", str(cfg["epochs"]), "--seed", str(cfg["seed"]), "--batch-size", str(cfg["batch_size"]),
            "--lr", str(cfg["lr"]), "--train-subset", str(cfg["train_subset"]), "--val-subset", str(cfg["val_subset"]),
            "--test-subset", str(cfg["test_subset"]), "--out", str(out), "--no-progress"]


def _wait_for_epochs(proc, out, n, seconds=120):
    deadline, history = time.monotonic() + seconds, out / "history.json"
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if history.is_file() and len(json.loads(history.read_text())["epochs"]) >= n:
                return True
        except (json.JSONDecodeError, KeyError):
            pass
        time.sleep(0.005)
    return False


def test_a_second_train_on_the_same_directory_is_refused_and_a_killed_run_leaves_no_stale_lock(tiny_fashion, tmp_path):
    """Two `calib train` on one --out: the second refuses at once, naming the first; the first's files stay its
    own. After SIGKILL the kernel has released the lock, and --resume finishes the run."""
    cfg = {**TINY, "epochs": 20, "train_subset": 5600}
    out = tmp_path / "run"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    first = subprocess.Popen(_cli_args(cfg, out), env=env, cwd=str(tmp_path), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
    try:
        assert _wait_for_epochs(first, out, 1), first.stderr.read().decode()[-2000:]
        rc, err = _cli(_cli_args({**cfg, "loss": "fl-3"}, out)[3:])          # at once, in this process
        assert rc == 1 and err.startswith("calib: error:") and err.count("\n") == 1, err
        assert f"is being written by another calib train (pid {first.pid}" in err
        with pytest.raises(RunLockedError):
            train(TrainConfig(**cfg), out, resume=True, progress=False)      # the same config is refused too
        assert first.poll() is None and json.loads((out / "meta.json").read_text())["config"]["loss"] == "ce"
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()
    assert (out / ".calib-train.lock").exists()                 # left behind by the kill, but not locked
    (out / ".checkpoint.pt.tmp999999").write_bytes(b"half-written")   # a temporary a kill could leave
    run = train(TrainConfig(**cfg), out, resume=True, progress=False)
    assert run.finished and sorted(p.name for p in out.iterdir()) == [
        "checkpoint.pt", "history.json", "logits.npz", "meta.json"]     # no lock, no temporaries


def test_ctrl_c_exits_130_with_the_resume_command_and_leaves_nothing_half_written(tiny_fashion, tmp_path):
    cfg = {**TINY, "epochs": 20, "train_subset": 5600}
    out = tmp_path / "run"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    # a shell that starts pytest in the background ignores SIGINT, and a child inherits that (Python then installs
    # no KeyboardInterrupt handler): give the child the default disposition, as a terminal's Ctrl-C finds it
    proc = subprocess.Popen(_cli_args(cfg, out), env=env, cwd=str(tmp_path), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert _wait_for_epochs(proc, out, 1)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=scaled(120))
    assert proc.returncode == 130, err[-2000:]
    assert "Traceback" not in err and f"--from-meta {out / 'meta.json'} --out {out} --resume" in err
    assert not list(out.glob(".*.tmp*"))
    load_run(out)                                                # meta.json and history.json are whole
    torch.load(out / "checkpoint.pt", weights_only=False)         # and so is the checkpoint


@pytest.mark.parametrize("damage", ["garbage", "truncated", "empty"])
def test_a_corrupted_checkpoint_names_the_file_and_restart_starts_over(tiny_fashion, tmp_path, damage):
    out = tmp_path / "run"
    trainer = Trainer(TrainConfig(**{**TINY, "epochs": 2}), out, progress=False)
    trainer.run()
    meta = json.loads((out / "meta.json").read_text())
    meta["finished"] = False                                     # an interrupted run, to be resumed
    (out / "meta.json").write_text(json.dumps(meta))
    ckpt = out / "checkpoint.pt"
    ckpt.write_bytes({"garbage": b"not a checkpoint" * 10, "truncated": ckpt.read_bytes()[:1000], "empty": b""}[damage])
    with pytest.raises(CorruptRunError, match=f"{ckpt} is corrupted or truncated.*--restart"):
        train(TrainConfig(**{**TINY, "epochs": 2}), out, resume=True, progress=False)
    rc, err = _cli(["train", "--from-meta", str(out / "meta.json"), "--out", str(out), "--resume", "--no-progress"])
    assert rc == 1 and err.startswith(f"calib: error: {ckpt} is corrupted") and err.count("\n") == 1
    run = train(TrainConfig(**{**TINY, "epochs": 2}), out, restart=True, progress=False)
    assert run.finished and len(run.epochs) == 2


def test_broken_files_and_bad_arguments_end_in_one_error_line(tiny_fashion, tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    base = ["train", "--data", "fashion-mnist", "--model", "small-cnn-w4", "--loss", "ce", "--epochs", "1",
            "--no-progress", "--out"]
    for text, what in (("{", "is not valid JSON"), ("[]", "holds a JSON list")):
        (out / "meta.json").write_text(text)
        rc, err = _cli(base + [str(out)])
        assert rc == 1 and err == f"calib: error: {out / 'meta.json'} {what}" + err.split(what, 1)[1], err
        assert err.count("\n") == 1 and "--restart" in err
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    for target, what in ((a_file, "is a file"), (a_file / "below", "lies under a file"), ("", "out is empty")):
        rc, err = _cli(base + [str(target)])
        assert rc == 1 and what in err and err.count("\n") == 1, err
    if not torch.cuda.is_available():
        rc, err = _cli(base + [str(tmp_path / "gpu"), "--device", "cuda"])
        assert rc == 1 and "device='cuda'" in err and "'cpu' or 'auto'" in err, err
    rc, err = _cli(base + [str(tmp_path / "w"), "--secondary-weight", "0.5"])
    assert rc == 1 and "--secondary-weight 0.5 needs --secondary" in err


def test_a_full_disk_is_reported_as_such_and_the_last_epoch_is_kept(tiny_fashion, tmp_path, monkeypatch):
    """torch.save reports a full device as a RuntimeError from its zip writer, json as OSError(ENOSPC); both
    become DiskFullError naming the directory, and the previous checkpoint stays intact."""
    import errno

    import calib.runs as runs_module

    out = tmp_path / "run"
    trainer = Trainer(TrainConfig(**{**TINY, "epochs": 3}), out, progress=False)
    real_save = torch.save
    calls = {"n": 0}

    def failing_save(obj, path, *a, **k):
        calls["n"] += 1
        if calls["n"] == 2:                                      # the second epoch's checkpoint
            Path(path).write_bytes(b"partial")
            raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 1234 vs 1200")
        return real_save(obj, path, *a, **k)

    monkeypatch.setattr(torch, "save", failing_save)
    monkeypatch.setattr(runs_module.shutil, "disk_usage", lambda p: type("U", (), {"free": 1024})())
    with pytest.raises(DiskFullError, match=f"no space left on the device of {out} while writing checkpoint.pt"):
        trainer.run()
    assert torch.load(out / "checkpoint.pt", weights_only=False)["epoch"] == 1
    assert not list(out.glob(".*.tmp*"))

    def no_space(self, *a, **k):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(Path, "write_text", no_space)
    with pytest.raises(DiskFullError, match="meta.json"):
        runs_module.write_json(out / "meta.json", {"x": 1})


# -------------------------------------------------------------------------- issue 24: calib train's flags

_BASE = ["train", "--data", "fashion-mnist", "--model", "small-cnn-w4", "--loss", "ce", "--epochs", "2",
         "--no-progress"]


@pytest.mark.parametrize("flags, message", [
    (["--momentum", "5"], "--momentum: momentum must lie in [0, 1); got 5"),       # trained to accuracy 0.11, rc 0
    (["--lr", "0"], "--lr: lr must be > 0"), (["--lr", "nan"], "--lr: lr must be a finite number"),
    (["--weight-decay", "-1"], "--weight-decay: weight_decay must be >= 0"),
    (["--lr-decay", "2"], "--lr-decay: lr_decay must lie in (0, 1]"),
    (["--batch-size", "0"], "--batch-size: batch_size must be an integer >= 1"),
    (["--seed", "-1"], "--seed: seed must be an integer >= 0"),
    (["--seed", str(2 ** 32)], "--seed: seed must be at most 4294967295"),
    (["--pool", "0"], "--pool: pool must be an integer >= 1"),
    (["--train-subset", "0"], "--train-subset: train_subset must be an integer >= 1"),
    (["--grad-clip", "-2"], "--grad-clip: grad_clip must be > 0"),
    (["--secondary", "sb-ece", "--secondary-weight", "0"], "--secondary-weight: secondary_weight must be > 0"),
    (["--milestones", "2", "1"], "--milestones: milestones must be increasing epochs in [1, epochs=2]"),
    (["--milestones", "5"], "--milestones: milestones must be increasing epochs in [1, epochs=2]; got [5]"),
])
def test_every_numeric_flag_is_range_checked(tmp_path, capsys, flags, message):
    """Issue 24, 10: out-of-range numbers trained (or failed deep inside torch); now one line naming the flag,
    before anything is read or written."""
    out = tmp_path / "run"
    rc, err = _cli([*_BASE, "--out", str(out), *flags])
    assert rc == 1 and message in err and err.count("\n") == 1, err
    assert not out.exists()


def _stored_meta(tmp_path, config):
    path = tmp_path / "stored" / "meta.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"config": config, "versions": {}}))
    return path


def test_from_meta_refuses_flags_that_would_change_the_run(tmp_path):
    """Issue 24, 8: `--from-meta base/meta.json --loss fl-3 --epochs 9` trained the stored config and ignored
    both flags."""
    config = TrainConfig(**TINY).identity()
    meta = _stored_meta(tmp_path, config)
    rc, err = _cli(["train", "--from-meta", str(meta), "--loss", "fl-3", "--epochs", "9", "--out",
                    str(tmp_path / "o"), "--no-progress"])
    assert rc == 1 and f"--loss, --epochs cannot be combined with --from-meta {meta}" in err, err
    from calib.cli import _parser, _train_config

    args = _parser().parse_args(["train", "--from-meta", str(meta), "--device", "cpu", "--diagnostics", "eval",
                                 "--out", "x"])
    assert _train_config(args) == TrainConfig(**{**config, "device": "cpu", "diagnostics": "eval"})


@pytest.mark.parametrize("content, message", [
    ({"config": {}}, "the config lacks data, model, loss, epochs"),                                    # 13
    ({"config": {k: v for k, v in TrainConfig(**TINY).identity().items() if k != "loss"}}, "the config lacks loss"),
    ({"config": {**TrainConfig(**TINY).identity(), "milestones": 5}}, "milestones must be a list of epochs"),  # 14
    (b"\xff\xfe{\x00", "is not valid JSON (UnicodeDecodeError"),                                        # 17
])
def test_a_broken_from_meta_names_the_file(tmp_path, content, message):
    """Issue 24, 13, 14, 17: a meta.json without loss, with an empty config or with `"milestones": 5` ended in a
    TypeError; a non-UTF-8 one in a UnicodeDecodeError traceback."""
    meta = tmp_path / "meta.json"
    meta.write_bytes(content if isinstance(content, bytes) else json.dumps(content).encode())
    rc, err = _cli(["train", "--from-meta", str(meta), "--out", str(tmp_path / "o"), "--no-progress"])
    assert rc == 1 and err.startswith(f"calib: error: {meta}") and message in err and err.count("\n") == 1, err
