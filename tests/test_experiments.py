"""Grids of runs, the store and the tables across runs (calib.experiments, `calib sweep`, `calib train
--from-meta`), and the reproducibility of the committed chapter-10 store."""

import json
import os
import shlex
from pathlib import Path

import numpy as np
import pytest
import torch
from scipy.special import softmax

from calib import cli, metrics
from calib.data import DEBIAN_FASHION_MNIST
from calib.experiments import (POSTHOC_MAPS, evaluate_store, fit_posthoc, load_grid, load_store, loss_gamma,
                               matching_run, paired_difference, run_path, summarise, sweep, train_commands)
from calib.stats import paired_seed_interval
from calib.train import Trainer, TrainConfig, config_from_meta, load_run, train

ROOT = Path(__file__).resolve().parent.parent
STORE = ROOT / "book" / "results" / "10-benchmark"
REGIME = STORE / "regime"          # chapter 10's grid in the papers' regime

TINY_GRID = """
description = "two losses, two seeds"
seeds = [0, 1]
models = ["small-cnn-w4"]
losses = ["ce", {label = "ce+s-avuc", loss = "ce", secondary = "s-avuc", secondary_weight = 0.5}]

[train]
data = "fashion-mnist"
epochs = 2
batch_size = 64
lr = 0.05
train_subset = 256
val_subset = 64
test_subset = 96
diagnostics = "eval"
device = "cpu"
"""

#: Four one-epoch MLP runs: the grid of the tests of concurrent sweeps, cheap (a fraction of a second a run).
CHEAP_GRID = """
seeds = [0, 1]
models = ["mlp-32"]
losses = ["ce", "fl-3"]

[train]
data = "fashion-mnist"
epochs = 1
batch_size = 64
train_subset = 1024
val_subset = 64
test_subset = 96
diagnostics = "eval"
device = "cpu"
"""


def write_grid(folder: Path, text: str = TINY_GRID) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "grid.toml").write_text(text)
    return folder / "grid.toml"


def test_grid_expands_models_losses_seeds(tmp_path):
    grid = load_grid(write_grid(tmp_path / "g"))
    assert [(r.model, r.loss, r.seed) for r in grid.runs] == [
        ("small-cnn-w4", "ce", 0), ("small-cnn-w4", "ce", 1), ("small-cnn-w4", "ce+s-avuc", 0),
        ("small-cnn-w4", "ce+s-avuc", 1)]
    run = grid.runs[3]
    assert run.out == (tmp_path / "g" / "small-cnn-w4" / "ce+s-avuc" / "seed1").resolve()
    assert (run.config.loss, run.config.secondary, run.config.secondary_weight) == ("ce", "s-avuc", 0.5)
    assert run.config.epochs == 2 and run.config.diagnostics == "eval" and grid.discard == ("checkpoint.pt",)


@pytest.mark.parametrize("edit, message", [
    (lambda t: t.replace("seeds = [0, 1]", "seeds = []"), "'seeds' must be a non-empty list"),
    (lambda t: t.replace("epochs = 2", "epochs = 2\nepoch = 3"), "not TrainConfig fields"),
    (lambda t: t.replace('"ce", {label', '"CE/../x", {label'), "is not a folder name"),
    (lambda t: t.replace('"ce", {label', '"fl-x", {label'), "is not a number"),
    (lambda t: t.replace('"ce", {label', '"ce", "ce", {label'), "appears twice"),
    (lambda t: t + "\n[extra]\n", "unknown keys"),
    (lambda t: "discard = ['model.pt']\n" + t, "is not one of"),
    (lambda t: t.replace("seeds = [0, 1]", "seeds = [0, 1"), "not valid TOML"),
    (lambda t: "nproc_per_node = 0\n" + t, r"'nproc_per_node' must be an integer >= 1 .*got 0"),
    (lambda t: "nproc_per_node = '2'\n" + t, r"'nproc_per_node' must be an integer >= 1 .*got '2'"),
])
def test_bad_grid_files_say_what_is_wrong(tmp_path, edit, message):
    with pytest.raises(ValueError, match=message):
        load_grid(write_grid(tmp_path, edit(TINY_GRID)))


def test_listed_commands_rebuild_each_runs_config(tmp_path):
    grid = load_grid(write_grid(tmp_path / "g"))
    lines = train_commands(grid, relative_to=tmp_path)
    assert len(lines) == 4
    for line, run in zip(lines, grid.runs):
        argv = shlex.split(line)
        assert argv[:2] == ["calib", "train"] and "--resume" in argv and argv[-2:] == ["--discard", "checkpoint.pt"]
        args = cli._parser().parse_args(argv[1:])
        assert cli._train_config(args) == run.config
        assert (tmp_path / args.out).resolve() == run.out


def test_listed_commands_under_torchrun(tmp_path, capsys, monkeypatch):
    """Issue 30, item 2: `calib sweep --list` for a scheduler under torchrun, from the flag or the grid file."""
    path = write_grid(tmp_path / "g")
    grid = load_grid(path)
    monkeypatch.chdir(tmp_path)
    assert cli.main(["sweep", str(path), "--list", "--nproc-per-node", "2"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 4
    for line, run in zip(lines, grid.runs):
        argv = shlex.split(line)
        assert argv[:7] == ["torchrun", "--standalone", "--nproc_per_node", "2", "-m", "calib", "train"]
        args = cli._parser().parse_args(argv[6:])
        assert cli._train_config(args) == run.config and (tmp_path / args.out).resolve() == run.out
        assert args.resume
    in_grid = write_grid(tmp_path / "h", "nproc_per_node = 3\n" + TINY_GRID)
    assert load_grid(in_grid).nproc_per_node == 3
    assert cli.main(["sweep", str(in_grid), "--list"]) == 0
    assert all(line.startswith("torchrun --standalone --nproc_per_node 3 -m calib train ")
               for line in capsys.readouterr().out.strip().splitlines())
    assert cli.main(["sweep", str(in_grid), "--list", "--nproc-per-node", "1"]) == 0    # the flag wins
    assert all(line.startswith("calib train ") for line in capsys.readouterr().out.strip().splitlines())
    assert cli.main(["sweep", str(path), "--nproc-per-node", "2"]) == 1
    assert "--nproc-per-node 2 needs --list" in capsys.readouterr().err
    assert cli.main(["sweep", str(path), "--list", "--nproc-per-node", "0"]) == 1
    assert "--nproc-per-node must be an integer >= 1" in capsys.readouterr().err


def test_sweep_trains_skips_and_resumes_exactly(tiny_fashion, tmp_path, monkeypatch):
    grid = load_grid(write_grid(tmp_path / "g"))
    lines = []
    runs = sweep(grid, progress=False, log=lines.append)
    assert len(runs) == 4 and all(r.finished for r in runs)
    assert all(not (r.out / "checkpoint.pt").exists() and (r.out / "logits.npz").is_file() for r in runs)
    assert lines[-1].startswith("[4/4] small-cnn-w4/ce+s-avuc/seed1: trained in") and "left" in lines[-1]
    reference = {r.out: r.logits()["test_logits"] for r in runs}
    stamps = {r.out: (r.out / "logits.npz").stat().st_mtime_ns for r in runs}

    # a second sweep trains nothing
    lines.clear()
    sweep(grid, progress=False, log=lines.append)
    assert all("done before" in line for line in lines)
    assert {r.out: (r.out / "logits.npz").stat().st_mtime_ns for r in runs} == stamps

    # a run killed after its first epoch is resumed by the next sweep, to the same logits
    victim = grid.runs[2]
    for f in victim.out.iterdir():
        f.unlink()
    real_epoch = Trainer._train_epoch

    def dies_in_epoch_two(self, epoch, bar=None):
        if epoch == 2:
            raise KeyboardInterrupt
        return real_epoch(self, epoch, bar)

    monkeypatch.setattr(Trainer, "_train_epoch", dies_in_epoch_two)
    with pytest.raises(KeyboardInterrupt):
        sweep(grid, progress=False, log=lines.append)
    assert (victim.out / "checkpoint.pt").is_file() and not victim.finished
    monkeypatch.setattr(Trainer, "_train_epoch", real_epoch)
    lines.clear()
    sweep(grid, progress=False, log=lines.append)
    assert sum("trained in" in line for line in lines) == 1
    np.testing.assert_array_equal(load_run(victim.out).logits()["test_logits"], reference[victim.out])


def test_from_meta_reruns_a_stored_run_exactly(tiny_fashion, tmp_path, capsys):
    first = train(TrainConfig(data="fashion-mnist", model="mlp-32", loss="fl-3", epochs=2, seed=4, batch_size=64,
                              train_subset=300, val_subset=50, test_subset=80, diagnostics="eval", device="cpu"),
                  tmp_path / "a", progress=False, discard=("checkpoint.pt",))
    assert config_from_meta(first.out) == TrainConfig(**{**first.meta["config"], "diagnostics": "eval",
                                                         "milestones": tuple(first.meta["config"]["milestones"])})
    code = cli.main(["train", "--from-meta", str(first.out / "meta.json"), "--out", str(tmp_path / "b"),
                     "--no-progress", "--device", "cpu"])
    assert code == 0 and "calib: run in" in capsys.readouterr().out
    np.testing.assert_array_equal(load_run(tmp_path / "b").logits()["test_logits"], first.logits()["test_logits"])
    assert json.loads((tmp_path / "b" / "meta.json").read_text())["config"] == first.meta["config"]


def test_train_needs_its_flags_or_a_meta(tmp_path, capsys):
    assert cli.main(["train", "--data", "digits", "--out", str(tmp_path / "x")]) == 1
    assert "needs --model, --loss, --epochs (or --from-meta" in capsys.readouterr().err
    (tmp_path / "bad.json").write_text("{not json")
    assert cli.main(["train", "--from-meta", str(tmp_path / "bad.json"), "--out", str(tmp_path / "y")]) == 1
    assert "is not valid JSON" in capsys.readouterr().err
    (tmp_path / "meta.json").write_text(json.dumps({"config": {"data": "digits", "colour": "red"}}))
    assert cli.main(["train", "--from-meta", str(tmp_path / "meta.json"), "--out", str(tmp_path / "z")]) == 1
    assert "['colour'] are not fields of TrainConfig" in capsys.readouterr().err


def test_sweep_skips_a_run_another_process_is_training(tiny_fashion, tmp_path):
    """Two sweeps of one grid (say on two machines sharing the store) do not collide: a run whose directory is
    locked is skipped, said so, and left to its owner; the sweep then ends with RunsHeldError naming it and
    carrying the other runs (issue 45, 4.7: it returned them as if the grid were done)."""
    from calib.runs import RunLock

    grid = load_grid(write_grid(tmp_path / "g", CHEAP_GRID))
    busy = grid.runs[1]
    busy.out.mkdir(parents=True)
    lines = []
    held = "mlp-32/ce/seed1 \\(pid .*\\); the other 3 are finished"
    with RunLock(busy.out), pytest.raises(ValueError, match=held) as exc:     # another worker holds this run
        sweep(grid, progress=False, log=lines.append)
    assert type(exc.value).__name__ == "RunsHeldError"
    runs = exc.value.runs
    assert len(runs) == 3 and busy.out not in {r.out for r in runs} and not busy.finished
    assert exc.value.held == [busy]
    assert any(f"{busy.model}/{busy.loss}/seed{busy.seed}: being trained by another process (pid " in line
               and line.endswith("), skipped") for line in lines)
    assert len(sweep(grid, progress=False, log=lambda line: None)) == 4     # once free, it is trained


def test_sweep_command_lists_and_filters(tiny_fashion, tmp_path, capsys, monkeypatch):
    path = write_grid(tmp_path / "g")
    monkeypatch.chdir(tmp_path)
    assert cli.main(["sweep", str(path), "--list", "--only", "s-avuc/seed1"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1 and "--out g/small-cnn-w4/ce+s-avuc/seed1" in out[0]
    assert cli.main(["sweep", str(path), "--only", "nothing"]) == 1
    assert "no run of" in capsys.readouterr().err
    assert cli.main(["sweep", str(path), "--only", "ce/seed0", "--no-progress", "--evaluate"]) == 0
    stored = json.loads((tmp_path / "g" / "posthoc.json").read_text())["runs"]
    assert list(stored) == ["small-cnn-w4/ce/seed0"] and stored["small-cnn-w4/ce/seed0"]["maps"] == list(POSTHOC_MAPS)


# ------------------------------------------------------------------------------- the store and tables

def fake_store(root: Path, losses=("ce", "fl-3"), seeds=(0, 1, 2), n=400, k=4):
    """Stored runs with synthetic logits z, labels drawn from softmax(z) (a calibrated model), stored as 2 z for
    'ce' (overconfident) and z / 2 for 'fl-3' (underconfident)."""
    for loss in losses:
        for seed in seeds:
            rng = np.random.default_rng(seed)
            out = root / "mlp" / loss / f"seed{seed}"
            out.mkdir(parents=True)
            arrays = {}
            for split in ("val", "test"):
                z = 2.0 * rng.normal(size=(n, k))
                p = np.exp(z - z.max(1, keepdims=True))
                p /= p.sum(1, keepdims=True)
                y = (rng.random((n, 1)) > p.cumsum(1)).sum(1)
                arrays[f"{split}_logits"] = (z * (0.5 if loss == "fl-3" else 2.0)).astype(np.float32)
                arrays[f"{split}_labels"] = y
            np.savez_compressed(out / "logits.npz", **arrays)
            (out / "meta.json").write_text(json.dumps({"finished": True, "config": {"loss": loss, "seed": seed}}))
    (root / "mlp" / "ce" / "seed9").mkdir()
    (root / "mlp" / "ce" / "seed9" / "meta.json").write_text(json.dumps({"finished": False}))


def test_store_rows_summaries_and_paired_intervals(tmp_path):
    fake_store(tmp_path)
    runs = load_store(tmp_path)
    assert [(r.loss, r.seed) for r in runs] == [("ce", 0), ("ce", 1), ("ce", 2), ("fl-3", 0), ("fl-3", 1), ("fl-3", 2)]
    rows = evaluate_store(runs, cache=tmp_path / "cache.json", progress=False)
    maps = {(r["loss"], r["map"]) for r in rows}
    assert ("fl-3", "psi") in maps and ("ce", "psi") not in maps and len(maps) == 2 * len(POSTHOC_MAPS) - 1
    # the cache gives the same rows without refitting
    assert evaluate_store(runs, cache=tmp_path / "cache.json", progress=False) == rows
    # ... unless a map's definition changed (issue 25: ts-ece moved to a 0.01 grid and the cache kept the old fits):
    # one run's entry given the old definition and stale values is fitted again (each entry is checked on its own,
    # so one stands for all of them and the test refits one run, not six)
    cache = json.loads((tmp_path / "cache.json").read_text())
    entry = cache["runs"]["mlp/fl-3/seed1"]
    entry["definitions"][entry["maps"].index("ts-ece")] = "temperature scaling, T on the grid 0.1, ..., 10"
    for row in entry["rows"]:
        row["value"] = -1.0 if row["map"] == "ts-ece" else row["value"]
    (tmp_path / "cache.json").write_text(json.dumps(cache))
    assert evaluate_store(runs, cache=tmp_path / "cache.json", progress=False) == rows
    # the rows are the metrics of the fitted maps on the test logits
    arrays = runs[0].logits()
    fitted = fit_posthoc("ts-nll", arrays["val_logits"], arrays["val_labels"])
    from calib.metrics import ece

    row = next(r for r in rows if (r["loss"], r["seed"], r["map"], r["metric"]) == ("ce", 0, "ts-nll", "ece"))
    assert row["value"] == pytest.approx(ece(fitted.proba(arrays["test_logits"]), arrays["test_labels"]))
    assert row["temperature"] == fitted.params["temperature"] > 1     # CE's logits were doubled: T > 1 undoes it
    summary = summarise(rows, "ece")
    values = [r["value"] for r in rows if (r["loss"], r["map"], r["metric"]) == ("ce", "none", "ece")]
    assert summary["ce"] == pytest.approx((np.mean(values), np.std(values, ddof=1), 3))
    interval = paired_difference(rows, "ece", ("ce", "none"), ("ce", "ts-nll"))
    after = [r["value"] for r in rows if (r["loss"], r["map"], r["metric"]) == ("ce", "ts-nll", "ece")]
    assert interval == paired_seed_interval(values, after)
    assert interval.low > 0                                            # TS lowers the ECE of the doubled logits


def test_posthoc_and_store_errors(tmp_path):
    z, y = np.zeros((4, 3)), np.array([0, 1, 2, 0])
    with pytest.raises(ValueError, match="needs a fixed-gamma focal loss"):
        fit_posthoc("psi", z, y, "flsd-53")
    with pytest.raises(ValueError, match="unknown post-hoc map"):
        fit_posthoc("platt", z, y)
    with pytest.raises(FileNotFoundError, match="calib sweep"):
        load_store(tmp_path / "nowhere")
    assert loss_gamma("fl-3") == 3.0 and loss_gamma("fl-0.5") == 0.5 and loss_gamma("flsd-53") is None
    with pytest.raises(ValueError, match="at least 2 seeds"):
        paired_difference([], "ece", ("ce", "none"), ("fl-3", "none"))


# ------------------------------------------------------------------------ the committed chapter-10 store

def test_committed_store_is_complete_and_small():
    """The grid in the papers' regime is stored whole (logits included); the 20-epoch grid keeps each run's
    meta.json and history.json and, for every run, its post-hoc evaluation, its logits having been dropped."""
    grid = load_grid(REGIME / "grid-cpu.toml")
    missing = [str(r.out.relative_to(REGIME)) for r in grid.runs if not r.finished]
    assert not missing, f"runs of regime/grid-cpu.toml missing from the store: {missing}"
    assert len(grid.runs) == 90
    for run in grid.runs:
        names = {p.name for p in run.out.iterdir()}
        assert names == {"meta.json", "history.json", "logits.npz"}, (run.out, names)
        arrays = load_run(run.out).logits()
        assert arrays["test_logits"].dtype == np.float32 and arrays["test_logits"].shape == (10000, 10)
        assert arrays["val_logits"].shape == (5000, 10)
    short = load_grid(STORE / "grid-cpu.toml")
    evaluated = {key.split("/", 1)[1] for key in json.loads((STORE / "posthoc.json").read_text())["runs"]}
    for run in short.runs:
        assert {p.name for p in run.out.iterdir()} == {"meta.json", "history.json"}, run.out
        assert f"{run.loss}/seed{run.seed}" in evaluated, run.out
    size = sum(p.stat().st_size for p in STORE.rglob("*") if p.is_file())
    assert size < 60 * 2 ** 20, f"the chapter-10 store holds {size / 2 ** 20:.1f} MB (limit 60 MB)"


@pytest.mark.skipif(not DEBIAN_FASHION_MNIST.is_dir(), reason="needs Fashion-MNIST (Debian's dataset-fashion-mnist)")
def test_cheapest_stored_run_retrains_to_its_logits(tmp_path):
    """``--from-meta`` reproduces a stored run: to 1e-4 in the logits under the torch kernels the run was trained
    with (``calib._reproducible.kernels_match``: the tests pin torch's CPU kernels to AVX2, and MKL also picks its
    kernels by CPU vendor; float32 kernels round differently, and SGD amplifies it); under other kernels (an Intel
    CPU for the AMD-trained store, an ARM CPU, CALIB_CPU_ISA=native) to the run's test accuracy (0.5 points) and NLL
    (3 %), far inside the spread between seeds."""
    from calib._reproducible import kernels_match

    runs = load_store(REGIME)
    cheapest = min(runs, key=lambda r: r.meta["wall_time_s"])
    threads = torch.get_num_threads()
    torch.set_num_threads(int(cheapest.meta.get("threads", threads)))
    try:
        rerun = train(config_from_meta(cheapest.path), tmp_path / "rerun", progress=False)
    finally:
        torch.set_num_threads(threads)
    stored, fresh = cheapest.logits(), rerun.logits()
    assert rerun.meta["config"] == cheapest.meta["config"]
    np.testing.assert_array_equal(fresh["test_labels"], stored["test_labels"])
    kernels = kernels_match(cheapest.meta)
    if kernels["torch"]:
        assert np.max(np.abs(fresh["test_logits"] - stored["test_logits"])) < 1e-4, kernels["why"]
    else:
        print(f"other torch kernels ({kernels['why']}): comparing accuracy and NLL")
        y = stored["test_labels"]
        acc = [float((a["test_logits"].argmax(1) == y).mean()) for a in (fresh, stored)]
        nll = [metrics.nll(softmax(a["test_logits"].astype(np.float64), axis=1), y) for a in (fresh, stored)]
        assert abs(acc[0] - acc[1]) < 0.005, acc
        assert abs(nll[0] - nll[1]) < 0.03 * nll[1], nll


def test_validation_choice_rule():
    from calib.experiments import validation_choice

    candidates = {"a": (0.90, 0.030), "b": (0.895, 0.010), "c": (0.85, 0.001)}
    assert validation_choice(candidates) == "b"                       # c is more than 1 point below a
    assert validation_choice(candidates, accuracy_tolerance=0.1) == "c"
    assert validation_choice({"x": (0.5, 0.2)}) == "x"
    with pytest.raises(ValueError, match="at least one candidate"):
        validation_choice({})


def test_per_seed_values_text_and_pooled_probabilities(tmp_path):
    from calib.experiments import mean_std_text, metric_values, pooled_test_probabilities

    fake_store(tmp_path)
    runs = load_store(tmp_path)
    rows = evaluate_store(runs, maps=("none", "ts-nll", "psi"), progress=False)
    ece = metric_values(rows, "ce", "none", "ece")
    assert ece.shape == (3,) and np.all(ece == [r["value"] for r in sorted(
        (r for r in rows if (r["loss"], r["map"], r["metric"]) == ("ce", "none", "ece")), key=lambda r: r["seed"])])
    assert np.all(np.isnan(metric_values(rows, "ce", "none", "ece", key="temperature")))
    assert np.all(metric_values(rows, "fl-3", "psi", "ece", key="gamma") == 3.0)
    with pytest.raises(ValueError, match="no rows for loss='fl-3', map='ts-ece'"):
        metric_values(rows, "fl-3", "ts-ece", "ece")
    assert mean_std_text([0.01, 0.03]) == "2.00 ± 1.41"
    p, y = pooled_test_probabilities(runs, "fl-3")
    assert p.shape == (1200, 4) and y.shape == (1200,) and np.allclose(p.sum(1), 1)
    with pytest.raises(ValueError, match="no stored run"):
        pooled_test_probabilities(runs, "brier")


@pytest.mark.parametrize("name, loss", [("none", "ce"), ("ts-nll", "ce"), ("ts-ece", "ce"), ("fts", "ce"),
                                        ("psi", "fl-3"), ("ts-sb-ece", "ce")])
def test_fitted_maps_log_probabilities_and_underflow(name, loss):
    rng = np.random.default_rng(0)
    z = rng.normal(size=(300, 5)) * 3
    y = rng.integers(0, 5, 300)
    fitted = fit_posthoc(name, z, y, loss)
    p, logp = fitted.proba(z), fitted.log_proba(z)
    np.testing.assert_allclose(np.exp(logp), p, rtol=1e-10, atol=1e-300)
    # logits so far apart that the true class's probability is exactly 0 in float64: the NLL stays finite
    wide = z.copy()
    wide[0] = [0.0, 2000.0 * fitted.params.get("temperature", 1.0), 0, 0, 0]
    y = y.copy()
    y[0] = 0
    assert fitted.proba(wide)[0, 0] == 0.0 and fitted.log_proba(wide)[0, 0] < -1000
    from calib.experiments import score_probabilities

    with pytest.raises(ValueError, match="NLL is infinite"):
        score_probabilities(fitted.proba(wide), y)
    scores = score_probabilities(fitted.proba(wide), y, log_probs=fitted.log_proba(wide))
    assert np.isfinite(scores["nll"]) and scores["nll"] > 1000 / 300


def test_run_path_and_matching_run(tmp_path):
    path = run_path(tmp_path, "resnet50", "fl-3", 2)
    assert path == tmp_path / "resnet50" / "fl-3" / "seed2"
    recipe = {"model": "resnet50", "loss": "fl-3", "seed": 2, "epochs": 350, "milestones": (150, 250)}
    assert matching_run(path, recipe) is None                                   # nothing stored there
    path.mkdir(parents=True)
    meta = {"finished": False, "config": {**recipe, "milestones": [150, 250], "lr": 0.1}}
    (path / "meta.json").write_text(json.dumps(meta))
    assert matching_run(path, recipe) is None                                   # interrupted
    (path / "meta.json").write_text(json.dumps({**meta, "finished": True}))
    run = matching_run(path, recipe)
    assert run is not None and run.out == path and run.config["lr"] == 0.1     # tuples compared as lists
    assert matching_run(path, {**recipe, "epochs": 20}) is None                 # another recipe
    assert matching_run(path, {**recipe, "data": "cifar10"}) is None            # a key the run does not record


# ------------------------------------------------------------------------------ issue 24: grids read strictly

@pytest.mark.parametrize("edit, message", [
    # 7: a loss table's secondary_weight without a secondary loss trained and was ignored
    (lambda t: t.replace('losses = ["ce", {',
                         'losses = ["ce", {label = "ce-w", loss = "ce", secondary_weight = 0.5}, {'),
     "run small-cnn-w4/ce-w/seed0: secondary_weight=0.5 needs a secondary loss"),
    # 9: seeds that are not distinct integers, a loss table's seed and model
    (lambda t: t.replace("seeds = [0, 1]", "seeds = [1.7]"),
     "'seeds' must hold integers in \\[0, 4294967295\\]; got 1.7"),
    (lambda t: t.replace("seeds = [0, 1]", "seeds = [0, 0]"), "'seeds' lists \\[0\\] more than once"),
    (lambda t: t.replace('loss = "ce", secondary', 'loss = "ce", seed = 5, secondary'),
     "sets seed, which a loss table"),
    (lambda t: t.replace('loss = "ce", secondary', 'loss = "ce", model = "small-cnn", secondary'),
     "sets model, which a loss table"),
    # 10: numeric grid keys are range-checked
    (lambda t: t.replace("lr = 0.05", "lr = 0.05\nmomentum = 5"), "seed0: momentum must lie in \\[0, 1\\); got 5"),
    (lambda t: t.replace("epochs = 2", "epochs = 0"), "epochs must be an integer >= 1; got 0"),
    (lambda t: t.replace("batch_size = 64", "batch_size = -3"), "batch_size must be an integer >= 1"),
    # 14, 15, 20, 21: wrong types named, not a traceback
    (lambda t: t.replace("epochs = 2", "epochs = 2\nmilestones = 5"), "milestones must be a list of epochs"),
    (lambda t: "store = 5\n" + t, "'store' must be a string"),
    (lambda t: "train = 3\n" + t.replace("[train]", "[other]"), "unknown keys \\['other'\\]"),
    (lambda t: t.split("[train]")[0] + "train = 3\n", "'train' must be a table"),
    (lambda t: 'discard = "checkpoint.pt"\n' + t, "'discard' must be a list of file names"),
    (lambda t: t.replace("seeds = [0, 1]", 'seeds = ["a"]'), "'seeds' must hold integers .*; got 'a'"),
])
def test_grid_keys_and_types_are_checked_when_read(tmp_path, edit, message):
    path = write_grid(tmp_path / "g", edit(TINY_GRID))
    with pytest.raises(ValueError, match=message) as exc:
        load_grid(path)
    assert str(exc.value).startswith(str(path))


def _finished_store(tiny_fashion, tmp_path):
    grid = load_grid(write_grid(tmp_path / "g", TINY_GRID.replace("seeds = [0, 1]", "seeds = [0]").replace(
        "epochs = 2", "epochs = 1")))
    grid.runs = grid.runs[:1]
    sweep(grid, progress=False, log=lambda line: None)
    return grid


def test_a_damaged_store_names_the_file_and_the_fix(tiny_fashion, tmp_path, capsys):
    """Issue 24, 11, 18, 19: a garbage logits.npz was reported as done by `calib sweep` and `--evaluate` suggested
    allow_pickle; a damaged meta.json in the store gave a bare JSONDecodeError."""
    grid = _finished_store(tiny_fashion, tmp_path)
    run = grid.runs[0]
    good = (run.out / "logits.npz").read_bytes()
    (run.out / "logits.npz").write_bytes(b"garbage" * 64)
    assert cli.main(["sweep", str(grid.path), "--only", "ce/seed0", "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert f"{run.out / 'logits.npz'} is damaged" in err and "allow_pickle" not in err and "--restart" in err
    with pytest.raises(ValueError, match=f"{run.out / 'logits.npz'} is damaged.*delete"):
        load_store(grid.store)
    (run.out / "logits.npz").write_bytes(good)
    assert len(load_store(grid.store)) == 1
    (run.out / "meta.json").write_text('{"finished": tru')
    with pytest.raises(ValueError, match=f"{run.out / 'meta.json'} is not valid JSON.*calib sweep"):
        load_store(grid.store)



def test_overconfidence_profile_matches_an_independent_fit_and_the_nll_trace():
    """The regime premise (issue 25): the NLL-fitted temperature equals a direct minimisation of the validation
    NLL; the rise is read off the history with the stated margin; test logits are never read (tuning runs keep
    validation logits only)."""
    from scipy.optimize import minimize_scalar
    from scipy.special import log_softmax

    from calib.experiments import NLL_RISE_FRACTION, overconfidence_profile
    from calib.runs import read_logits

    run = REGIME / "tuning" / "mlp-256-256-n55k-e40-wd5e-4" / "ce" / "seed100"
    with pytest.raises(Exception, match="test_logits"):
        read_logits(run / "logits.npz")                         # stored without test logits
    profile = overconfidence_profile(run)
    z = read_logits(run / "logits.npz", splits=("val",))
    logits, labels = z["val_logits"].astype(np.float64), z["val_labels"]
    nll = lambda t: -log_softmax(logits / t, axis=1)[np.arange(len(labels)), labels].mean()   # noqa: E731
    best = minimize_scalar(nll, bounds=(0.05, 20), method="bounded", options={"xatol": 1e-8})
    assert profile.temperature == pytest.approx(best.x, rel=1e-3)
    history = [e["val"]["nll"] for e in load_run(run).epochs]
    drop = load_run(run).config["milestones"][0]
    assert profile.nll_at_drop == history[drop - 1] and profile.nll_final == history[-1]
    assert profile.nll_min_after_drop == min(history[drop:])
    assert profile.nll_rises == (history[-1] > (1 + NLL_RISE_FRACTION) * min(history[drop:]))
    assert not profile.nll_rises                                # weight decay: the NLL barely moves (1 %)
    assert profile.accuracy == pytest.approx((logits.argmax(1) == labels).mean())
    assert profile.overconfident == (profile.confidence > profile.accuracy)
    with pytest.raises(ValueError, match="split='train'"):
        overconfidence_profile(run, split="train")
    with pytest.raises(ValueError, match="splits="):
        read_logits(run / "logits.npz", splits=("train",))


def test_stored_evaluation_reads_rows_without_logits_and_refuses_other_files(tmp_path):
    from calib.experiments import stored_evaluation

    rows = stored_evaluation(STORE / "posthoc.json")
    keys = {(r["loss"], r["seed"]) for r in rows}
    assert len(keys) == 56 and {r["map"] for r in rows} == set(POSTHOC_MAPS)
    bad = tmp_path / "posthoc.json"
    bad.write_text(json.dumps({"runs": {"a/b/seed0": {"sha256": "x"}}}))
    with pytest.raises(ValueError, match="evaluate_store"):
        stored_evaluation(bad)
    with pytest.raises(FileNotFoundError, match="--evaluate"):
        stored_evaluation(tmp_path / "missing.json")


# ------------------------------------------------------------------- issue 45, 4.7: grids and concurrent sweeps


@pytest.mark.parametrize("edit, message", [
    # a [train] without data or epochs gave TrainConfig's TypeError
    (lambda t: t.replace('data = "fashion-mnist"\n', ""),
     r"\[train\] has no data, which every run needs, .*; add `data = \"fashion-mnist\"` under \[train\]"),
    (lambda t: t.replace("epochs = 2\n", ""), r"\[train\] has no epochs, .*; add `epochs = 20` under \[train\]"),
    (lambda t: t.replace('data = "fashion-mnist"\n', "").replace("epochs = 2\n", ""),
     r"\[train\] has no data and no epochs, .* add `data = \"fashion-mnist\"` and `epochs = 20` under \[train\]"),
    (lambda t: t.split("[train]")[0], r"has no data and no epochs, .* under a \[train\] table at the end of the file"),
    # the other required keys: named, with an example of their own (each said "e.g. seeds = [0, 1, 2]")
    (lambda t: t.replace('models = ["small-cnn-w4"]\n', ""),
     r"the grid has no 'models', which it needs; add a line such as `models = \[\"mlp-256-256\"\]` above \[train\]"),
    (lambda t: t.replace('models = ["small-cnn-w4"]', "models = []"),
     r"'models' must be a non-empty list, e.g. `models = \[\"mlp-256-256\"\]`; got \[\]"),
    (lambda t: t.replace('models = ["small-cnn-w4"]\n', "") + 'models = ["small-cnn-w4"]\n',
     r"'models' is inside the \[train\] table .*; move the line `models = ...` above \[train\]"),
    # a training setting written above [train]: an unknown key, and where it goes
    (lambda t: "epochs = 3\n" + t, (r"unknown keys \['epochs'\] \(epochs: a training setting; write it under "
                                    r"\[train\]\); a grid has \['description', 'discard', 'losses', 'models'")),
])
def test_a_grid_missing_a_required_key_names_it_with_an_example(tmp_path, edit, message):
    path = write_grid(tmp_path / "g", edit(TINY_GRID))
    with pytest.raises(ValueError, match=message) as exc:
        load_grid(path)
    assert str(exc.value).startswith(str(path))


def test_a_grid_entry_may_supply_what_train_lacks(tmp_path):
    """data and epochs are required of every run, not of [train]: a model or loss entry may set them."""
    text = TINY_GRID.replace("epochs = 2\n", "").replace('losses = ["ce", {label',
                                                          'losses = [{label = "ce", epochs = 3}, {label')
    with pytest.raises(ValueError, match="run small-cnn-w4/ce\\+s-avuc sets it"):
        load_grid(write_grid(tmp_path / "g", text))
    text = text.replace('secondary_weight = 0.5}', 'secondary_weight = 0.5, epochs = 1}')
    assert [r.config.epochs for r in load_grid(write_grid(tmp_path / "h", text)).runs] == [3, 3, 1, 1]


def test_sweep_of_a_folder_says_it_is_one_and_lists_its_grid_files(tmp_path, capsys):
    """`calib sweep /tmp` said the grid "does not exist"."""
    write_grid(tmp_path / "g")
    (tmp_path / "g" / "other.toml").write_text("")
    assert cli.main(["sweep", str(tmp_path / "g")]) == 1
    err = capsys.readouterr().err
    assert f"grid {tmp_path / 'g'} is a folder, not a grid file: calib sweep expects a grid TOML file" in err
    assert f"it holds grid.toml, other.toml: e.g. calib sweep {tmp_path / 'g' / 'grid.toml'}" in err
    (tmp_path / "empty").mkdir()
    assert cli.main(["sweep", str(tmp_path / "empty")]) == 1
    assert "is a folder, not a grid file" in (err := capsys.readouterr().err) and "it holds no .toml file" in err


def test_a_sweep_ends_naming_the_runs_another_process_holds_and_evaluates_nothing(tiny_fashion, tmp_path, capsys):
    """Two `calib sweep`s of one store each said "run the sweep again", then "4 runs finished" with exit 0, and
    `--evaluate` evaluated the 3 runs it could see. Now a sweep that leaves runs to their holders names them and
    their holders, exits 3 and evaluates nothing."""
    from calib.runs import RunLock

    path = write_grid(tmp_path / "g", CHEAP_GRID)
    grid = load_grid(path)
    busy = grid.runs[1]
    busy.out.mkdir(parents=True)
    with RunLock(busy.out):                                     # another process holds this run
        code = cli.main(["sweep", str(path), "--no-progress", "--evaluate"])
    captured = capsys.readouterr()
    assert code == 3 and "4 runs finished" not in captured.out
    assert (f"calib: not finished: 1 of the 4 runs of {path} was being trained by another process and not trained "
            f"here: mlp-32/ce/seed1 (pid {os.getpid()} on ") in captured.err
    assert "the other 3 are finished" in captured.err and "calib sweep --wait" in captured.err
    assert "Nothing was evaluated" in captured.err and not (grid.store / "posthoc.json").exists()
    assert [r.finished for r in grid.runs] == [True, False, True, True]


def test_a_run_held_then_finished_by_its_holder_is_read_back_and_wait_waits(tiny_fashion, tmp_path):
    """The library's sweep: a run its holder finishes while the sweep trains the others is read back ("done
    before", not reported as held, not trained again); with wait=True a run whose holder lets go is trained here
    once the sweep sees it free; without wait, RunsHeldError carries the held runs and the finished ones."""
    from calib.runs import RunLock

    grid = load_grid(write_grid(tmp_path / "g", CHEAP_GRID))
    held_run = grid.runs[0]
    held_run.out.mkdir(parents=True)
    lock = RunLock(held_run.out).__enter__()
    lines = []

    def holder_finishes(line):                  # the holder ends its run while this sweep trains run 2
        lines.append(line)
        if line.startswith("[2/4]"):
            lock.release(remove=True)
            train(held_run.config, held_run.out, progress=False, discard=("checkpoint.pt",))

    runs = sweep(grid, progress=False, log=holder_finishes)
    assert [r.out for r in runs] == [r.out for r in grid.runs] and all(r.finished for r in runs)
    assert lines[0].startswith("[1/4] mlp-32/ce/seed0: being trained by another process (pid ")
    assert lines[-1].startswith("[1/4] mlp-32/ce/seed0: done before")
    stamp = (held_run.out / "logits.npz").stat().st_mtime_ns

    other = grid.runs[3]
    for f in other.out.iterdir():
        f.unlink()
    lock = RunLock(other.out).__enter__()
    with pytest.raises(ValueError, match="1 of the 4 runs") as exc:         # RunsHeldError
        sweep(grid, progress=False, log=lambda line: None)
    assert exc.value.held == [other] and "pid" in exc.value.holders[0] and len(exc.value.runs) == 3
    lines = []

    def holder_dies(line):                      # the holder dies (its lock is released) while this sweep waits
        lines.append(line)
        if line.startswith("waiting for 1 run"):
            lock.release()

    runs = sweep(grid, progress=False, log=holder_dies, wait=True, poll_seconds=0.01)
    assert len(runs) == 4 and other.finished
    assert lines[-2] == "waiting for 1 run that other processes hold: mlp-32/fl-3/seed1 (checked every 0.01 s)"
    assert lines[-1].startswith("[4/4] mlp-32/fl-3/seed1: trained in")
    assert (held_run.out / "logits.npz").stat().st_mtime_ns == stamp            # trained once, by its holder


def test_evaluate_names_the_runs_of_the_grid_it_skipped(tiny_fashion, tmp_path, capsys):
    """--evaluate said "post-hoc maps of 3 stored runs" of a grid of 4 without saying which one it left out."""
    path = write_grid(tmp_path / "g", CHEAP_GRID.replace("seeds = [0, 1]", "seeds = [0]"))
    grid = load_grid(path)
    sweep(grid, progress=False, log=lambda line: None)
    (grid.runs[1].out / "logits.npz").unlink()
    assert cli.main(["sweep", str(path), "--no-progress", "--evaluate"]) == 0
    out = capsys.readouterr().out
    assert (f"post-hoc maps of 1 stored runs in {grid.store / 'posthoc.json'}: 1 of the 2 runs of the grid; "
            f"skipped, stored without logits.npz (the grid's discard removes it): mlp-32/fl-3/seed0") in out


def test_the_evaluation_cache_is_written_through_a_temporary_of_its_own(tmp_path):
    """Two sweeps evaluating one store shared the temporary posthoc.json.tmp: one moved the other's half-written
    file into place, and the other's replace then failed."""
    fake_store(tmp_path, losses=("ce",), seeds=(0,))
    cache = tmp_path / "posthoc.json"
    other = tmp_path / "posthoc.json.tmp"
    other.write_text("another writer's file, being written")
    rows = evaluate_store(load_store(tmp_path), maps=("none",), cache=cache, progress=False)
    assert other.read_text() == "another writer's file, being written"
    assert len(json.loads(cache.read_text())["runs"]["mlp/ce/seed0"]["rows"]) == len(rows) > 0


# ------------------------------------------------------------ chapter 10's intervals with the test set's noise

def test_grid_statistics_rebuild_the_stored_metrics_and_add_the_test_sets_noise(tmp_path):
    """Issue 41: chapter 10's paired intervals carry the test set's noise. GridStatistics rebuilds each run's test
    probabilities from the stored fitted parameters (no refit) and gives the stored metric values; its intervals are
    calib.stats.seed_test_interval's, the remembered resamples change nothing, and other resamples are not served
    from the memory."""
    from calib.experiments import CONFIDENCE_GAP, GridStatistics
    from calib.stats import bootstrap_counts, seed_test_interval

    fake_store(tmp_path)
    runs = load_store(tmp_path)
    rows = evaluate_store(runs, maps=("none", "ts-ece", "fts", "psi"), progress=False)
    grid = GridStatistics(runs, rows)
    for loss, map_ in (("ce", "none"), ("ce", "ts-ece"), ("fl-3", "fts"), ("fl-3", "psi")):
        for metric in ("ece", "adaece", "ece_em_l2", "classwise_ece", "accuracy", "nll", "brier"):
            stored = next(r["value"] for r in rows if (r["loss"], r["seed"], r["map"], r["metric"]) ==
                          (loss, 1, map_, metric))
            assert grid.statistic(loss, 1, map_, metric).value == pytest.approx(stored, abs=1e-12), (loss, map_, metric)
    gap = grid.statistic("ce", 0, "none", CONFIDENCE_GAP).value
    stored = {r["metric"]: r["value"] for r in rows if (r["loss"], r["seed"], r["map"]) == ("ce", 0, "none")}
    assert gap == pytest.approx(stored["mean_confidence"] - stored["accuracy"], abs=1e-12) and gap > 0
    # the interval is the procedure's, on probabilities recomputed from the logits and the fitted temperature
    fresh = {}
    for loss in ("ce", "fl-3"):
        for seed in (0, 1, 2):
            arrays = next(r for r in runs if (r.loss, r.seed) == (loss, seed)).logits()
            t = next(r["temperature"] for r in rows if (r["loss"], r["seed"], r["map"]) == (loss, seed, "ts-ece"))
            fresh[(loss, seed)] = metrics.statistic(softmax(arrays["test_logits"].astype(np.float64) / t, axis=1),
                                                    arrays["test_labels"], "adaece")
    expected = seed_test_interval([fresh[("ce", s)] for s in (0, 1, 2)], [fresh[("fl-3", s)] for s in (0, 1, 2)])
    for _ in range(2):                                   # the second time from the remembered resamples
        got = grid.interval("adaece", ("ce", "ts-ece"), ("fl-3", "ts-ece"))
        assert got.estimate == pytest.approx(expected.estimate, abs=1e-12)
        assert (got.low, got.high) == pytest.approx((expected.low, expected.high), abs=1e-12)
        assert "test samples" in got.method
    over_seeds = paired_seed_interval([fresh[("ce", s)].value for s in (0, 1, 2)],
                                      [fresh[("fl-3", s)].value for s in (0, 1, 2)])
    assert got.se > over_seeds.se                        # the test set's noise is added
    other = bootstrap_counts(400, 60, seed=5)            # not the remembered resamples: computed afresh
    assert np.allclose(grid.statistic("ce", 0, "ts-ece", "adaece").resampled(other),
                       fresh[("ce", 0)].resampled(other), atol=1e-12)
    with pytest.raises(ValueError, match="no stored run of loss 'ls'"):
        grid.statistic("ls", 0, "none", "ece")


@pytest.mark.parametrize("n", [3, 15, 97, 1237])
def test_resampling_equal_mass_and_classwise_ece_at_once_matches_calib_metrics(n):
    """GridStatistics evaluates AdaECE, the equal-mass l2 ECE and the class-wise ECE on every resample at once; each
    gives calib.metrics.statistic's values, resample by resample, with tied confidences straddling the bins' cuts,
    fewer samples than bins, and a number of samples no block size divides."""
    from calib.experiments import _ClasswiseECE, _EqualMassECE
    from calib.stats import bootstrap_counts

    rng = np.random.default_rng(n)
    probs = rng.dirichlet(np.full(4, 0.5), size=n)
    probs[: n // 2] = np.round(probs[: n // 2], 1)       # ties in the top-label confidence
    probs /= probs.sum(axis=1, keepdims=True)
    probs[1:max(2, n // 3)] = probs[0]
    labels = rng.integers(0, 4, size=n)
    counts = bootstrap_counts(n, 60, seed=1)
    outcomes = metrics.top_label_outcomes(probs, labels)
    for name, fast in (("adaece", _EqualMassECE(outcomes[:, 0], outcomes[:, 1] > 0, 15, "l1")),
                       ("ece_em_l2", _EqualMassECE(outcomes[:, 0], outcomes[:, 1] > 0, 15, "l2")),
                       ("classwise_ece", _ClasswiseECE(probs, labels, 15))):
        reference = metrics.statistic(probs, labels, name)
        assert fast.value == pytest.approx(reference.value, abs=1e-13), name
        assert np.allclose(fast.resampled(counts), reference.resampled(counts), rtol=0, atol=1e-13), name
    assert len(np.unique(outcomes[:, 0])) < n


@pytest.mark.parametrize("n", [3, 15, 97, 1237, 4000])
def test_equal_mass_ece_in_chunks_of_one_byte_counts_equals_the_straightforward_version_exactly(n, monkeypatch):
    """_EqualMassECE.resampled gathers one-byte counts and works in chunks of rows with exact running sums of the
    counts and hits; it gives the values of the one-pass float64 version (tests/references.py) to the last bit, for
    every chunking (a last chunk of one row is joined to the one before: the bins' sum of a one-row array runs in
    another order), read-only or writable counts, and counts no byte holds."""
    from references import BlockEqualMassECE

    import calib.experiments as experiments
    from calib.stats import bootstrap_counts

    rng = np.random.default_rng(n)
    probs = rng.dirichlet(np.full(4, 0.5), size=n)
    probs[: n // 2] = np.round(probs[: n // 2], 1)       # ties in the top-label confidence
    probs /= probs.sum(axis=1, keepdims=True)
    probs[1:max(2, n // 3)] = probs[0]
    outcomes = metrics.top_label_outcomes(probs, rng.integers(0, 4, size=n))
    conf, correct = outcomes[:, 0], outcomes[:, 1] > 0
    wide = np.array(bootstrap_counts(n, 51, seed=3))
    wide[:, 0] += 300                                    # a count above 255 in every row: not narrowed to bytes
    for chunk in (1, 3 * n, 1 << 17):                    # chunks of 2 rows, 3 rows (a last row joined), all rows
        monkeypatch.setattr(experiments, "_CHUNK", chunk)
        for norm in ("l1", "l2"):
            fast = experiments._EqualMassECE(conf, correct, 15, norm)
            reference = BlockEqualMassECE(conf, correct, 15, norm)
            assert fast.value == reference.value
            for counts in (bootstrap_counts(n, 61, seed=1), np.array(bootstrap_counts(n, 60, seed=2)), wide):
                assert np.array_equal(fast.resampled(counts), reference.resampled(counts)), (chunk, norm)


def test_classwise_ece_from_sample_major_counts_equals_the_product_with_the_transposed_view_exactly():
    """_ClasswiseECE reads a shared read-only counts array through one (N, B) copy made once (and the row sums made
    once): the same values, to the last bit, as its two sparse products with ``counts.T``, and as a writable array
    that is copied afresh."""
    import calib.experiments as experiments
    from calib.stats import bootstrap_counts

    rng = np.random.default_rng(4)
    probs = rng.dirichlet(np.full(5, 0.4), size=700)
    labels = rng.integers(0, 5, size=700)
    stat = experiments._ClasswiseECE(probs, labels, 15)
    counts = bootstrap_counts(700, 80, seed=6)
    conf, hits = (stat._conf.T @ counts.T).T, (stat._hits.T @ counts.T).T
    expected = np.abs(hits - conf).sum(axis=1) / (counts.sum(axis=1) * 5)
    for _ in range(2):                                   # the second time from the kept copy
        assert np.array_equal(stat.resampled(counts), expected)
    assert np.array_equal(stat.resampled(np.array(counts)), expected)
    assert experiments._SAMPLE_MAJOR[0] is counts and experiments._SAMPLE_MAJOR[1].flags.c_contiguous


def test_combined_statistic_resamples_the_combination_as_a_whole():
    """The spread of several losses' ECE on one seed is a statistic of the one test set: every part sees the same
    resample."""
    from calib.experiments import CombinedStatistic
    from calib.stats import bootstrap_counts

    rng = np.random.default_rng(0)
    labels = rng.integers(0, 3, size=200)
    parts = [metrics.statistic(rng.dirichlet(np.ones(3), size=200), labels, "ece") for _ in range(4)]
    spread = CombinedStatistic(parts, lambda x: x.std(axis=0, ddof=1))
    assert spread.value == pytest.approx(np.std([p.value for p in parts], ddof=1))
    counts = bootstrap_counts(200, 50, seed=2)
    assert np.allclose(spread.resampled(counts), np.std([p.resampled(counts) for p in parts], axis=0, ddof=1))
    with pytest.raises(ValueError, match="different sizes"):
        CombinedStatistic([parts[0], metrics.statistic(np.full((5, 3), 1 / 3), np.zeros(5, int), "ece")], np.mean)
    with pytest.raises(ValueError, match="parts is empty"):
        CombinedStatistic([], np.mean)


def test_grid_edges_mark_fitted_parameters_at_an_end_of_their_search():
    """Chapter 10's tables mark a fitted temperature (or gamma) at an end of its map's search: the AU loss's
    TS-ECE temperature was 0.01, the grid's lower end, on every seed, unmarked."""
    from calib.experiments import grid_edges

    assert grid_edges("ts-ece", 0.01) == {"temperature": "low"}
    assert grid_edges("ts-ece", 10.0) == {"temperature": "high"}
    assert grid_edges("ts-ece", 2.28) == {}
    assert grid_edges("fts", 0.01, 5.0) == {"temperature": "low", "gamma": "high"}
    assert grid_edges("fts", 1.72, -0.5) == {"gamma": "low"}
    assert grid_edges("ts-nll", 1e-4) == {"temperature": "low"} and grid_edges("ts-nll", 2.5) == {}
    assert grid_edges("psi", None, 3.0) == {} and grid_edges("none") == {}
    with pytest.raises(ValueError, match="not a post-hoc map"):
        grid_edges("platt", 1.0)
    with pytest.raises(ValueError, match="not a fitted value"):
        grid_edges("ts-ece", float("nan"))


def test_a_blinded_copy_keeps_every_validation_number_and_replaces_every_test_number(tmp_path):
    """Chapter 10 checks that its regime choice reads no test number by recomputing it on copies whose test numbers
    are noise (issue 41: the tuning histories hold per-epoch test metrics). The copy keeps the validation split and
    the config, replaces every test number, and a selection that read one would change."""
    from calib.experiments import blinded_copy, overconfidence_profile
    from calib.runs import read_logits

    run = REGIME / "tuning" / "mlp-256-256-n20k-e40-wd0" / "ce" / "seed100"
    copy = blinded_copy(run, tmp_path / "copy")
    original, blind = load_run(run), load_run(copy)
    assert blind.config == original.config
    assert [e["val"] for e in blind.epochs] == [e["val"] for e in original.epochs]
    assert all(b["test"]["nll"] != o["test"]["nll"] and b["test"]["accuracy"] != o["test"]["accuracy"]
               for b, o in zip(blind.epochs, original.epochs))
    z, zb = read_logits(run / "logits.npz", splits=("val",)), read_logits(copy / "logits.npz")
    assert np.array_equal(z["val_logits"], zb["val_logits"]) and np.array_equal(z["val_labels"], zb["val_labels"])
    assert zb["test_logits"].shape == z["val_logits"].shape          # noise where the run stored no test logits
    assert overconfidence_profile(copy) == overconfidence_profile(run)
    assert overconfidence_profile(copy, split="test") != overconfidence_profile(run, split="test")
    with pytest.raises(FileExistsError, match="not empty"):
        blinded_copy(run, tmp_path / "copy")
    with pytest.raises(FileNotFoundError, match="holds no run"):
        blinded_copy(tmp_path, tmp_path / "other")
