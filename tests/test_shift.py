"""Issue 42, section 1 (chapter 12, calibration under dataset shift): a run keeps its final network (weights.npz),
the network is rebuilt from a run folder and gives the run's logits back, a grid asks for the weights, the shift
evaluation scores each stored network on the corrupted test sets with maps fitted on clean validation and is
keyed by the weights it was computed from, and the error bar of Karandikar et al.'s figures."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from calib import runs
from calib.data import DEBIAN_FASHION_MNIST, load_dataset
from calib.runs import CorruptRunError, RunConfigError, read_logits, read_weights, write_weights

ROOT = Path(__file__).resolve().parents[1]
STORE = ROOT / "book" / "results" / "12-dataset-shift"
MODEL = "mlp-256-256-n20k-e40"


@pytest.fixture(scope="module")
def digits_uint8():
    """scikit-learn's digits as uint8 8 x 8 images (the corruptions take pixels 0-255), under the name "digits"."""
    ds = load_dataset("digits")
    to_uint8 = lambda x: np.round(x * 255).astype(np.uint8)               # noqa: E731
    x_tr = to_uint8(ds.x_train)
    mean = np.array([x_tr.mean() / 255], np.float32)
    std = np.array([x_tr.std() / 255], np.float32)
    return dataclasses.replace(ds, x_train=x_tr, x_val=to_uint8(ds.x_val), x_test=to_uint8(ds.x_test), mean=mean,
                               std=std)


@pytest.fixture(scope="module")
def tiny_runs(tmp_path_factory, digits_uint8):
    """Two runs of a tiny MLP on digits, one keeping float32 weights, one float16, in a store's layout."""
    from calib.train import train

    store = tmp_path_factory.mktemp("store")
    out = {}
    for loss, dtype in (("ce", "float32"), ("fl-3", "float16")):
        path = store / "mlp-16" / loss / "seed0"
        train(data="digits", model="mlp-16", loss=loss, epochs=2, out=path, progress=False, weights=dtype,
              diagnostics="eval", dataset=digits_uint8, discard=["checkpoint.pt"])
        out[loss] = path
    return store, out


# ------------------------------------------------------------------------------------------- weights.npz

def test_weights_are_stored_in_the_type_asked_and_read_back_without_pickles(tmp_path):
    import torch

    state = {"0.weight": torch.tensor([[0.1, -2.5e-3], [3.0, 1e-9]]), "0.bias": torch.tensor([1 / 3, 7.0]),
             "1.num_batches_tracked": torch.tensor(12)}
    write_weights(tmp_path / "a.npz", state, "float16")
    back = read_weights(tmp_path / "a.npz")
    assert back["0.weight"].dtype == np.float16 and back["1.num_batches_tracked"].dtype == np.int64
    assert np.array_equal(back["0.weight"], state["0.weight"].numpy().astype(np.float16))
    assert back["0.bias"][0] == np.float16(1 / 3) and back["0.bias"][0] != np.float32(1 / 3)
    write_weights(tmp_path / "b.npz", state, "float32")
    assert np.array_equal(read_weights(tmp_path / "b.npz")["0.bias"], state["0.bias"].numpy())


def test_bad_weights_are_refused_naming_the_tensor_and_the_fix(tmp_path):
    with pytest.raises(ValueError, match=r"state\['big'\].*beyond float16's range.*float32"):
        write_weights(tmp_path / "w.npz", {"big": np.array([7e4])}, "float16")
    with pytest.raises(ValueError, match=r"state\['w'\] holds non-finite"):
        write_weights(tmp_path / "w.npz", {"w": np.array([np.nan])}, "float32")
    with pytest.raises(ValueError, match="dtype='bfloat16' is not a weight type"):
        write_weights(tmp_path / "w.npz", {"w": np.ones(2)}, "bfloat16")
    assert not (tmp_path / "w.npz").exists()
    (tmp_path / "bad.npz").write_bytes(b"PK\x03\x04 not a zip")
    with pytest.raises(CorruptRunError, match="bad.npz is damaged"):
        read_weights(tmp_path / "bad.npz")
    with open(tmp_path / "obj.npz", "wb") as fh:
        np.savez(fh, w=np.array([{"a": 1}], dtype=object))
    with pytest.raises(CorruptRunError, match="obj.npz is damaged"):
        read_weights(tmp_path / "obj.npz")
    with pytest.raises(FileNotFoundError, match="trained without --weights"):
        read_weights(tmp_path / "none.npz")


def test_a_network_rebuilt_from_its_run_folder_gives_the_runs_logits(tiny_runs, digits_uint8):
    """float32 weights give the stored test logits bit for bit; float16 weights give the network whose every weight
    is rounded to float16: logits near the float32 run's, not equal to them."""
    from calib.train import load_network, network_logits

    _, paths = tiny_runs
    model, ds = load_network(paths["ce"], dataset=digits_uint8)
    stored = read_logits(paths["ce"] / runs.LOGITS)
    assert np.array_equal(network_logits(model, ds.x_test, ds), stored["test_logits"])
    assert np.array_equal(network_logits(model, ds.x_val, ds), stored["val_logits"])
    other_batches = network_logits(model, ds.x_val, ds, batch_size=7)        # another matrix product: the last bits
    assert np.allclose(other_batches, stored["val_logits"], rtol=0, atol=1e-5)
    assert sorted(p.name for p in paths["ce"].iterdir()) == ["history.json", "logits.npz", "meta.json", "weights.npz"]

    half, ds = load_network(paths["fl-3"], dataset=digits_uint8)
    assert all(np.array_equal(p.detach().numpy(), p.detach().numpy().astype(np.float16)) for p in half.parameters())
    z16 = network_logits(half, ds.x_test, ds)
    z32 = read_logits(paths["fl-3"] / runs.LOGITS)["test_logits"]
    assert 0 < np.abs(z16 - z32).max() < 0.05
    with pytest.raises(ValueError, match=r"images must be of the dataset's shape and type, \(N, 1, 8, 8\) uint8"):
        network_logits(half, ds.x_test.astype(np.float32), ds)


def test_a_finished_run_without_its_weights_is_refused_when_they_are_asked_for(tmp_path, digits_uint8):
    from calib.train import train

    kwargs = dict(data="digits", model="mlp-16", loss="ce", epochs=1, out=tmp_path / "r", progress=False,
                  diagnostics="eval", dataset=digits_uint8, discard=["checkpoint.pt"])
    train(**kwargs)
    assert not (tmp_path / "r" / runs.WEIGHTS).exists()
    train(**kwargs)                                   # without weights: the finished run is read back
    with pytest.raises(RunConfigError, match=r"stored without its network \(weights.npz\).*--restart"):
        train(**kwargs, weights="float16")
    with pytest.raises(ValueError, match="weights"):
        train(**{**kwargs, "out": tmp_path / "s"}, weights="half")
    train(**kwargs, weights="float16", restart=True)
    assert read_weights(tmp_path / "r" / runs.WEIGHTS)


def test_a_grid_asks_each_run_to_keep_its_weights(tmp_path):
    from calib.experiments import load_grid, train_commands

    text = ('seeds = [0]\nmodels = ["mlp-16"]\nlosses = ["ce"]\n{weights}\n[train]\ndata = "digits"\nepochs = 1\n')
    (tmp_path / "g.toml").write_text(text.format(weights='weights = "float16"'))
    grid = load_grid(tmp_path / "g.toml")
    assert grid.weights == "float16"
    assert train_commands(grid)[0].split()[-2:] == ["--weights", "float16"]
    (tmp_path / "h.toml").write_text(text.format(weights=""))
    assert load_grid(tmp_path / "h.toml").weights is None
    assert "--weights" not in train_commands(load_grid(tmp_path / "h.toml"))[0]
    (tmp_path / "b.toml").write_text(text.format(weights='weights = "int8"'))
    with pytest.raises(ValueError, match=r"b.toml: 'weights' must be one of 'float16', 'float32'.*got 'int8'"):
        load_grid(tmp_path / "b.toml")


# ------------------------------------------------------------------------------------------- the evaluation

def test_the_shift_evaluation_scores_each_network_with_maps_fitted_on_clean_validation(tiny_runs, digits_uint8):
    from calib.corruptions import corrupt_images
    from calib.metrics import ece
    from calib.posthoc import get_map
    from calib.shift import evaluate_shift_runs
    from calib.train import load_network, network_logits

    _, paths = tiny_runs
    sets = ["clean", "gaussian_noise/5", "contrast/2"]
    out = evaluate_shift_runs({"fl": paths["fl-3"]}, sets, maps=["none", "ts-nll", "psi"],
                              metrics=["accuracy", "ece_em_l2"], seed=3, dataset=digits_uint8, losses={"fl": "fl-3"})
    entry = out["fl"]
    assert set(entry["values"]) == {"none", "ts-nll", "psi"} and entry["params"]["psi"] == {"gamma": 3.0}
    # by hand: the float16 network, T fitted on its validation logits, applied to the contrast-corrupted test set
    model, ds = load_network(paths["fl-3"], dataset=digits_uint8)
    fitted = get_map("ts-nll")(network_logits(model, ds.x_val, ds), ds.y_val)
    assert entry["params"]["ts-nll"] == pytest.approx(fitted.params, rel=1e-12)
    z = network_logits(model, corrupt_images(ds.x_test, "contrast", 2, seed=3), ds)
    assert entry["values"]["ts-nll"]["ece_em_l2"][2] == ece(fitted.proba(z), ds.y_test, binning="quantile", norm="l2")
    assert entry["values"]["none"]["accuracy"][2] == np.mean(z.argmax(1) == ds.y_test)
    noisy = entry["values"]["none"]["accuracy"][1]
    assert noisy < entry["values"]["none"]["accuracy"][0]             # severe noise costs accuracy on 8 x 8 digits
    check = entry["float16_check"]
    assert 0 < check["max_abs_logit_difference"] < 0.05 and check["changed_predictions"] <= 0.01
    with pytest.raises(ValueError, match="test set 'fog/6' is neither"):
        evaluate_shift_runs({"fl": paths["fl-3"]}, ["fog/6"], dataset=digits_uint8)


def test_a_stored_shift_evaluation_is_used_only_for_the_weights_it_was_computed_from(tiny_runs, digits_uint8,
                                                                                     monkeypatch, tmp_path):
    from calib import shift
    from calib.experiments import StoredRun

    store, paths = tiny_runs
    stored = [StoredRun("mlp-16", loss, 0, path, {}) for loss, path in paths.items()]
    cache = tmp_path / "shift.json"
    kwargs = dict(cache=cache, corruptions=["brightness"], severities=(1, 5), maps=["none", "ts-sb-ece"],
                  metrics=["ece_em_l2", "accuracy"], dataset=digits_uint8)
    first = shift.evaluate_shift(stored, **kwargs)
    assert first.sets == ["clean", "brightness/1", "brightness/5"]
    assert first.values("fl-3", "ts-sb-ece", "accuracy").shape == (1, 3)
    calls = []
    real = shift.evaluate_shift_runs
    monkeypatch.setattr(shift, "evaluate_shift_runs", lambda dirs, *a, **k: calls.append(sorted(dirs)) or real(
        dirs, *a, **k))
    again = shift.evaluate_shift(stored, **kwargs)
    assert calls == [] and again.entries == first.entries
    assert shift.read_shift_evaluation(cache).entries == json.loads(json.dumps(first.entries))
    # another network in one run's weights.npz: that run alone is evaluated again
    weights = read_weights(paths["ce"] / runs.WEIGHTS)
    weights["0.bias" if "0.bias" in weights else next(iter(weights))] += 1
    saved = (paths["ce"] / runs.WEIGHTS).read_bytes()
    try:
        write_weights(paths["ce"] / runs.WEIGHTS, weights, "float32")
        changed = shift.evaluate_shift(stored, **kwargs)
    finally:
        (paths["ce"] / runs.WEIGHTS).write_bytes(saved)
    assert calls == [["mlp-16/ce/seed0"]]
    assert changed.entries["mlp-16/fl-3/seed0"] == first.entries["mlp-16/fl-3/seed0"]
    # another definition (another seed of the corruptions): every run again
    shift.evaluate_shift(stored, **{**kwargs, "write_cache": False}, seed=1)
    assert calls[-1] == ["mlp-16/ce/seed0", "mlp-16/fl-3/seed0"]


def test_the_test_sets_resamples_are_shared_by_every_run_and_map_and_averaged_per_severity(tiny_runs, digits_uint8,
                                                                                           monkeypatch, tmp_path):
    """calib.shift.resample_shift_runs: each run's equal-mass l2 ECE and over-confidence at the same bootstrap
    resamples of the test images under every map and set, averaged per severity like by_severity; the .npz cache of
    evaluate_shift_resamples is keyed by the weights and refused by read_shift_evaluation for other networks."""
    from calib import shift
    from calib.corruptions import corrupt_images
    from calib.experiments import StoredRun
    from calib.metrics import EqualMassStatistic, top_label_outcomes
    from calib.posthoc import get_map
    from calib.stats import bootstrap_counts
    from calib.train import load_network, network_logits

    store, paths = tiny_runs
    sets = ["clean", "fog/2", "contrast/2", "fog/4"]
    out = shift.resample_shift_runs({"fl": paths["fl-3"]}, sets, maps=["none", "ts-nll"], n_resamples=60,
                                    resample_seed=5, seed=3, dataset=digits_uint8, losses={"fl": "fl-3"})
    ece, over = out["fl"]["ts-nll"]["ece_em_l2"], out["fl"]["ts-nll"]["overconfidence"]
    assert ece.shape == over.shape == (6, 60)
    assert np.isnan(ece[[1, 3, 5]]).all() and np.isfinite(ece[[0, 2, 4]]).all()   # severities 1, 3, 5 not asked
    # by hand: severity 2 is the mean over fog and contrast of the ECE at the same resamples
    model, ds = load_network(paths["fl-3"], dataset=digits_uint8)
    fitted = get_map("ts-nll")(network_logits(model, ds.x_val, ds), ds.y_val)
    counts = bootstrap_counts(ds.y_test.size, 60, 5)
    by_hand = []
    for kind in ("fog", "contrast"):
        o = top_label_outcomes(fitted.proba(network_logits(model, corrupt_images(ds.x_test, kind, 2, seed=3), ds)),
                               ds.y_test)
        by_hand.append(EqualMassStatistic(o[:, 0], o[:, 1], 15, "l2").resampled(counts))
    assert np.allclose(ece[2], np.mean(by_hand, axis=0), rtol=1e-12, atol=0)
    o = top_label_outcomes(fitted.proba(network_logits(model, ds.x_test, ds)), ds.y_test)
    assert np.allclose(over[0], counts @ (o[:, 0] - o[:, 1]) / ds.y_test.size, rtol=1e-12, atol=1e-15)

    stored = [StoredRun("mlp-16", loss, 0, path, {}) for loss, path in paths.items()]
    kwargs = dict(corruptions=["brightness"], severities=(1,), maps=["none", "ts-nll"], n_resamples=50,
                  dataset=digits_uint8)
    first = shift.evaluate_shift_resamples(stored, cache=tmp_path / "rs.npz", **kwargs)
    assert set(first) == {"mlp-16/ce/seed0", "mlp-16/fl-3/seed0"}
    monkeypatch.setattr(shift, "resample_shift_runs", lambda *a, **k: pytest.fail("the cache was not used"))
    again = shift.evaluate_shift_resamples(stored, cache=tmp_path / "rs.npz", **kwargs)
    assert np.array_equal(again["mlp-16/ce/seed0"]["none"]["ece_em_l2"],
                          first["mlp-16/ce/seed0"]["none"]["ece_em_l2"].astype(np.float32), equal_nan=True)
    evaluation = shift.evaluate_shift(stored, cache=tmp_path / "shift.json", corruptions=["brightness"],
                                      severities=(1,), maps=["none", "ts-nll"], metrics=["ece_em_l2"],
                                      dataset=digits_uint8)
    read = shift.read_shift_evaluation(tmp_path / "shift.json", resamples=tmp_path / "rs.npz")
    assert read.resampled_by_severity("ce", "ts-nll", "ece_em_l2").shape == (1, 6, 50)
    with pytest.raises(ValueError, match="was not resampled; choose one of ece_em_l2, overconfidence"):
        read.resampled_by_severity("ce", "ts-nll", "accuracy")
    with pytest.raises(ValueError, match="read without its resamples"):
        evaluation.resampled_by_severity("ce", "ts-nll", "ece_em_l2")
    data = json.loads((tmp_path / "shift.json").read_text())
    data["runs"]["mlp-16/ce/seed0"]["sha256"] = "0" * 64                   # as if evaluated from another network
    (tmp_path / "shift.json").write_text(json.dumps(data))
    with pytest.raises(ValueError, match=r"runs \['mlp-16/ce/seed0'\] were resampled from other networks"):
        shift.read_shift_evaluation(tmp_path / "shift.json", resamples=tmp_path / "rs.npz")


def test_a_runs_logits_may_keep_one_split_and_the_store_still_reads_it(tmp_path):
    from calib.runs import stored_splits

    rng = np.random.default_rng(0)
    arrays = {"test_logits": rng.normal(size=(5, 3)).astype(np.float32), "test_labels": np.array([0, 1, 2, 0, 1])}
    np.savez_compressed(tmp_path / "t.npz", **arrays)
    assert stored_splits(tmp_path / "t.npz") == ("test",)
    assert set(read_logits(tmp_path / "t.npz", splits=("test",))) == set(arrays)
    with pytest.raises(CorruptRunError, match="no val_logits"):
        read_logits(tmp_path / "t.npz")
    np.savez_compressed(tmp_path / "bad.npz", test_logits=arrays["test_logits"])
    with pytest.raises(CorruptRunError, match="bad.npz is damaged \\(no logits and labels of a split\\)"):
        stored_splits(tmp_path / "bad.npz")
    (tmp_path / "text.npz").write_text("not an archive")
    with pytest.raises(CorruptRunError, match="text.npz is damaged"):
        stored_splits(tmp_path / "text.npz")


def test_values_by_severity_average_the_corruption_types():
    from calib.shift import ShiftEvaluation, shift_sets

    sets = shift_sets(["fog", "snow"], (1, 2, 3, 4, 5))
    assert sets[:3] == ["clean", "fog/1", "fog/2"] and len(sets) == 11
    rng = np.random.default_rng(0)
    vals = {s: rng.random(len(sets)).tolist() for s in (0, 1)}
    entries = {f"m/ce/seed{s}": {"model": "m", "loss": "ce", "seed": s, "values": {"none": {"ece": vals[s]}}}
               for s in (0, 1)}
    ev = ShiftEvaluation(sets, entries, {})
    table = ev.by_severity("ce", "none", "ece")
    assert table.shape == (2, 6) and table[1, 0] == vals[1][0]
    assert table[0, 3] == pytest.approx((vals[0][sets.index("fog/3")] + vals[0][sets.index("snow/3")]) / 2)
    kinds, by_type = ev.by_corruption("ce", "none", "ece", 4, seeds=[1])
    assert kinds == ["fog", "snow"] and by_type.tolist() == [[vals[1][4], vals[1][9]]]
    with pytest.raises(ValueError, match="map 'psi' was not evaluated"):
        ev.values("ce", "psi", "ece")
    with pytest.raises(ValueError, match="corruptions \\['frost'\\] are not of calib.corruptions"):
        shift_sets(["frost"])


def test_the_error_bar_removes_each_corruption_types_own_level():
    """corruption_sem against its formula; a shift of one corruption type leaves it unchanged, a run that is worse
    on every type widens it."""
    from calib.shift import corruption_sem

    x = np.array([[0.05, 0.10, 0.20], [0.07, 0.11, 0.26], [0.06, 0.15, 0.23], [0.04, 0.12, 0.25]])
    r, c = x.shape
    resid = x - x.mean(axis=0)
    assert corruption_sem(x) == pytest.approx(np.sqrt((resid ** 2).sum() / (c * (r - 1)) / r), rel=1e-14)
    assert corruption_sem(x + np.array([0.0, 0.3, -0.1])) == pytest.approx(corruption_sem(x), rel=1e-12)
    # without the correction the types' own levels dominate: the plain SEM of the 12 values is far larger
    assert x.std(ddof=1) / np.sqrt(x.size) > 2 * corruption_sem(x)
    assert corruption_sem(x + np.array([[0.0], [0.0], [0.0], [0.05]])) > corruption_sem(x)
    with pytest.raises(ValueError, match="at least 2 runs"):
        corruption_sem(x[:1])


# ------------------------------------------------------------------------------------------- the stored grid

def _stored(loss, seed):
    return STORE / MODEL / loss / f"seed{seed}"


@pytest.mark.skipif(not (_stored("ce", 0) / runs.WEIGHTS).is_file() or not DEBIAN_FASHION_MNIST.is_dir(),
                    reason="needs chapter 12's stored CE run and Fashion-MNIST")
def test_a_stored_shift_run_retrains_and_keeps_the_network_of_its_logits(tmp_path):
    """Chapter 12's CE run of seed 0, retrained from its meta.json with the threads it records (one) for its first
    epochs, gives its per-epoch records bit for bit (under the same torch kernels; the first epoch within bounds
    otherwise, as chapter 05's test does); its stored float16 network gives logits within 0.05 of its float32 test
    logits with at most 0.5 % of the predictions changed; and it is chapter 10's regime run of the same recipe and seed,
    whose float32 logits it gives bit for bit where both were trained under this machine's kernels (chapter 10's were
    trained on an AMD EPYC, chapter 12's on an Intel Xeon: MKL's kernels differ by vendor, and SGD amplifies it)."""
    import torch

    from calib._reproducible import kernels_match
    from calib.train import config_from_meta, load_network, load_run, network_logits, train
    from test_chapters import first_epoch_differences, run_record_differences

    stored = load_run(_stored("ce", 0))
    kernels = kernels_match(stored.meta)
    epochs = 3 if kernels["torch"] else 1
    threads = torch.get_num_threads()
    torch.set_num_threads(stored.meta["threads"])
    try:
        config = dataclasses.replace(config_from_meta(stored.out), device="cpu", epochs=epochs, milestones=())
        rerun = train(config, tmp_path / "rerun", progress=False, discard=["checkpoint.pt"])
    finally:
        torch.set_num_threads(threads)

    def results(run):
        return [{k: v for k, v in e.items() if k not in ("train_seconds", "images_per_s")} for e in run.epochs]

    if kernels["torch"]:
        differences = run_record_differences(results(rerun), results(stored)[:epochs],
                                             exact_float64=bool(kernels["numpy"]))
    else:
        differences = first_epoch_differences(rerun.epochs[0], stored.epochs[0])
    assert not differences, f"{kernels['why']}: " + "; ".join(differences[:8])

    model, ds = load_network(stored.out)
    z16 = network_logits(model, ds.x_test, ds)
    z32 = read_logits(stored.out / runs.LOGITS, splits=("test",))["test_logits"]
    assert 0 < np.abs(z16 - z32).max() < 0.05 and np.mean(z16.argmax(1) != z32.argmax(1)) <= 0.005
    chapter10 = load_run(ROOT / "book" / "results" / "10-benchmark" / "regime" / MODEL / "ce" / "seed0")
    assert chapter10.config == stored.config
    if kernels_match(chapter10.meta)["torch"] and kernels["torch"]:      # both trained under this machine's kernels
        assert np.array_equal(read_logits(chapter10.out / runs.LOGITS, splits=("test",))["test_logits"], z32)


def test_the_command_keeps_the_weights_and_refuses_a_shift_evaluation_without_them(tmp_path, capsys):
    """`calib train --weights float16` writes weights.npz; `calib sweep GRID --shift` on a grid that keeps no network
    exits 1 naming the grid's missing `weights` key (after training it), instead of failing on a missing file."""
    from calib.cli import main

    out = tmp_path / "run"
    assert main(["train", "--data", "digits", "--model", "mlp-16", "--loss", "ce", "--epochs", "1", "--out", str(out),
                 "--weights", "float16", "--diagnostics", "eval", "--no-progress"]) == 0
    assert {a.dtype for a in read_weights(out / runs.WEIGHTS).values()} == {np.dtype(np.float16)}
    (tmp_path / "g.toml").write_text('seeds = [0]\nmodels = ["mlp-16"]\nlosses = ["ce"]\n[train]\ndata = "digits"\n'
                                     'epochs = 1\ndiagnostics = "eval"\n')
    capsys.readouterr()
    assert main(["sweep", str(tmp_path / "g.toml"), "--shift", "--no-progress"]) == 1
    assert 'keeps no network (no weights = "float16" in the grid)' in capsys.readouterr().err
