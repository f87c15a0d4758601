"""The ResNet grid's device script (issue 44), dry-run on the CPU: ``tests/benchmarks/gpu_grid.sh OUT --device cpu
--tiny`` on the Fashion-MNIST stand-in of conftest.py takes the path it takes on the GPU (throughput table, tuning,
choice, grid, packing, summary) with a small net on a few images. The first invocation trains and writes each run
to OUT; a second skips them; a third, given the first's runs as a session carries them and no budget, skips those
and starts nothing. The order, the rule, the estimates and the archives are checked on their own too."""

import hashlib
import importlib.util
import json
import os
import subprocess
import tarfile
from pathlib import Path
from types import SimpleNamespace

import pytest
from conftest import write_tiny_fashion_mnist

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "tests" / "benchmarks" / "gpu_grid.sh"


def _module(name):
    spec = importlib.util.spec_from_file_location(name, ROOT / "tests" / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


gpu_grid = _module("gpu_grid")


def _script(out, *flags, env):
    """One invocation of the device script, the CPU dry run, one worker in the script's own process."""
    command = ["bash", str(SCRIPT), str(out), "--device", "cpu", "--tiny", "--workers", "1", "--workers-in-process",
               *map(str, flags)]
    proc = subprocess.run(command, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads((Path(out) / "summary.json").read_text()), proc.stdout


@pytest.fixture(scope="module")
def dry_run(tmp_path_factory):
    base = tmp_path_factory.mktemp("gpu-grid")
    write_tiny_fashion_mnist(base / "data" / "fashion-mnist")
    env = {**os.environ, "CALIB_DATA": str(base / "data")}
    env.pop("CALIB_GIT_COMMIT", None)
    summary, log = _script(base / "out", "--store", base / "store", "--bench-ks", "2", env=env)
    return SimpleNamespace(base=base, env=env, out=base / "out", store=base / "store", summary=summary, log=log)


def test_the_dry_run_trains_in_order_and_writes_each_run_to_out_with_its_provenance(dry_run):
    summary = dry_run.summary
    # the throughput table: the DataLoader loop, calib's in fp32 and bf16, alone and two at once
    rows = {(r["loop"], r["precision"], r["runs"]) for r in summary["throughput"]["rows"]}
    assert rows == {("dataloader", "fp32", 1), ("calib", "fp32", 1), ("calib", "bf16", 1), ("calib", "bf16", 2),
                    ("calib", "fp32", 2)}
    assert all(r["images_per_s"] > 0 for r in summary["throughput"]["rows"])
    # the tuning runs longest first (all 3 epochs in the dry run: grid order), the choice, the grid's first stage
    chosen = summary["choice"]["chosen"]
    assert chosen in ("resnet20-e60-cf", "resnet20-e60-none", "resnet20-e30-none")
    assert [r["name"] for r in summary["trained"]] == [
        "resnet20-e60-cf/ce/seed100", "resnet20-e60-none/ce/seed100", "resnet20-e30-none/ce/seed100",
        f"{chosen}/ce/seed0", f"{chosen}/fl-3/seed0", f"{chosen}/flsd-53/seed0"]
    assert summary["stored_before"] == 0 and summary["not_finished"] == [] and summary["failed"] == []
    assert all(r["wall_time_s"] > 0 and 0 <= r["val_accuracy"] <= 1 for r in summary["trained"])
    # OUT: the files the device returns (at most 8, plain names), the runs packed with no checkpoint
    assert sorted(p.name for p in dry_run.out.iterdir()) == ["log.txt", "runs-1.tar.gz", "summary.json", "summary.md"]
    with tarfile.open(dry_run.out / "runs-1.tar.gz") as tar:
        members = sorted(tar.getnames())
        packed_meta = json.loads(tar.extractfile(f"{chosen}/ce/seed0/meta.json").read())
    labels = ("resnet20-e60-cf", "resnet20-e60-none", "resnet20-e30-none")
    prefixes = [f"tuning/{label}/ce/seed100" for label in labels] + [f"{chosen}/{loss}/seed0"
                                                                       for loss in ("ce", "fl-3", "flsd-53")]
    expected = [f"{prefix}/{f}" for prefix in prefixes for f in ("meta.json", "history.json", "logits.npz")]
    assert members == sorted(expected)
    meta = json.loads((dry_run.store / chosen / "ce" / "seed0" / "meta.json").read_text())
    assert packed_meta == meta and meta["finished"]
    assert "compressed" in meta["note"] and "cuda" in meta["versions"] and meta["device_name"]
    assert meta["wall_time_s"] > 0 and meta["config"]["data"] == "fashion-mnist-32"
    assert meta["config"]["model"] == "resnet8-w4" and meta["diagnostics"] == "full"     # CE records every diagnostic
    tuning_meta = json.loads((dry_run.store / "tuning" / chosen / "ce" / "seed100" / "meta.json").read_text())
    assert "16 test images" in tuning_meta["note"]
    assert not list(dry_run.store.rglob("checkpoint.pt"))
    assert "T (NLL)" in (dry_run.out / "summary.md").read_text()


def test_a_second_invocation_skips_the_stored_runs_and_a_spent_budget_starts_none(dry_run):
    before = {p: p.read_bytes() for p in dry_run.store.rglob("meta.json")}
    summary, log = _script(dry_run.base / "out2", "--store", dry_run.store, "--stages", "tune,grid", "--budget-s", "0",
                           "--max-runs", "5", env=dry_run.env)
    chosen = dry_run.summary["choice"]["chosen"]
    assert summary["choice"]["chosen"] == chosen
    assert summary["trained"] == [] and summary["stored_before"] == 6
    assert summary["not_finished"] == [f"{chosen}/ce/seed1", f"{chosen}/fl-3/seed1"]      # the budget: not started
    assert log.count("not started") == 2
    assert not list((dry_run.base / "out2").glob("runs-*")) and not (dry_run.store / chosen / "ce" / "seed1").exists()
    assert {p: p.read_bytes() for p in dry_run.store.rglob("meta.json")} == before


def test_the_runs_a_session_carries_make_a_fresh_store_skip_them_and_choose_again(dry_run):
    carried, store = dry_run.base / "carried", dry_run.base / "store3"
    assert gpu_grid.collect_carried(dry_run.store, carried) == 6
    chosen = dry_run.summary["choice"]["chosen"]
    assert sorted(p.name for p in (carried / chosen / "ce" / "seed0").iterdir()) == ["meta.json"]
    assert gpu_grid.restore_carried(carried, store) == 6
    assert gpu_grid.restore_carried(carried, store) == 0                       # never over a stored run
    tune = [i for i in gpu_grid.plan_items(gpu_grid.TUNE_GRID, "tune", store / "tuning", "cpu", True)
            if i["seed"] == 100]
    grid = gpu_grid.grid_order(gpu_grid.plan_items(gpu_grid.MAIN_GRID, "grid", store, "cpu", True), chosen)
    assert all(gpu_grid.finished(i["out"]) for i in tune + grid[:3]) and not gpu_grid.finished(grid[3]["out"])
    assert gpu_grid.choose_recipe(tune)["chosen"] == chosen


def test_the_grid_order_puts_ce_fl3_flsd53_on_three_seeds_first_then_the_other_losses_then_seeds_3_4():
    items = gpu_grid.plan_items(gpu_grid.MAIN_GRID, "grid", None, "cpu", False)
    assert len(items) == 3 * 17 * 5
    order = [(i["loss"], i["seed"]) for i in gpu_grid.grid_order(items, "resnet20-e30-none")]
    assert len(order) == 85 and len(set(order)) == 85
    assert order[:9] == [(loss, seed) for seed in (0, 1, 2) for loss in ("ce", "fl-3", "flsd-53")]
    assert {seed for _, seed in order[9:51]} == {0, 1, 2} and order[9:12] == [("fl-1", 0), ("fl-1", 1), ("fl-1", 2)]
    assert not {loss for loss, _ in order[9:51]} & {"ce", "fl-3", "flsd-53"}
    assert {seed for _, seed in order[51:]} == {3, 4} and order[51:53] == [("ce", 3), ("ce", 4)]
    with pytest.raises(ValueError, match="no model labelled 'resnet56'"):
        gpu_grid.grid_order(items, "resnet56")
    tune = gpu_grid.tuning_order(gpu_grid.plan_items(gpu_grid.TUNE_GRID, "tune", None, "cpu", False))
    assert [i["config"]["epochs"] for i in tune] == [60, 60, 60, 60, 30, 30]
    assert all(i["config"]["test_subset"] == 16 for i in tune)          # the tuning never sees the test set


def _candidate(cost, t, ece=0.05, over=True, rises=True, acc=0.92):
    return {"cost": cost, "temperature": [t, t], "ece": [ece, ece], "overconfident": [over, over],
            "nll_rises": [rises, rises], "accuracy": [acc, acc]}


def test_the_rule_chooses_the_cheapest_candidate_in_the_regime_and_else_the_nearest():
    choice = gpu_grid.apply_rule({"a": _candidate(60, 2.0), "b": _candidate(30, 1.8), "c": _candidate(10, 1.2)})
    assert choice["chosen"] == "b" and choice["regime_reached"]
    assert choice["candidates"]["c"]["criteria"]["T >= 1.5"] is False
    # accuracy more than 3 points below the best candidate's excludes the cheap one
    choice = gpu_grid.apply_rule({"a": _candidate(60, 2.0, acc=0.93), "b": _candidate(30, 1.8, acc=0.89)})
    assert choice["chosen"] == "a"
    # none in the regime: the one meeting the most criteria, then the highest temperature
    choice = gpu_grid.apply_rule({"a": _candidate(60, 1.3, rises=False), "b": _candidate(30, 1.4, rises=False),
                                  "c": _candidate(10, 1.45, ece=0.01, rises=False)})
    assert choice["chosen"] == "b" and not choice["regime_reached"]


def test_a_run_is_estimated_from_the_runs_of_the_session_and_else_from_the_throughput():
    item = {"config": {"epochs": 30, "diagnostics": "eval"}}
    guess = gpu_grid.first_guess("cuda", {"rows": [{"loop": "calib", "runs": 4, "precision": "bf16",
                                                    "per_run": 27500.0}]}, 4, 55000)
    assert guess["epoch_s"] == pytest.approx(2.0 * gpu_grid.EVAL_OVERHEAD)
    assert gpu_grid.estimate_seconds(item, [], guess) == pytest.approx(
        gpu_grid.SAFETY * (guess["overhead_s"] + 30 * guess["epoch_s"]))
    trained = [{"epochs": 10, "wall_time_s": 20.0, "elapsed_s": 25.0, "diagnostics": "eval"}]
    assert gpu_grid.estimate_seconds(item, trained, guess) == pytest.approx(gpu_grid.SAFETY * (5 + 60))
    full = {"config": {"epochs": 30, "diagnostics": "full"}}
    assert gpu_grid.estimate_seconds(full, trained, guess) == pytest.approx(
        gpu_grid.SAFETY * (5 + 60 * gpu_grid.FULL_DIAGNOSTICS_COST))


def test_runs_are_packed_into_archives_of_bounded_size_and_out_says_when_it_is_full(tmp_path, monkeypatch):
    monkeypatch.setattr(gpu_grid, "ARCHIVE_BYTES", 2500)
    monkeypatch.setattr(gpu_grid, "MAX_ARCHIVES", 2)
    out, work = tmp_path / "out", tmp_path / "work"
    out.mkdir()
    work.mkdir()
    names = []
    for seed in range(4):
        run = tmp_path / "store" / "m" / "ce" / f"seed{seed}"
        run.mkdir(parents=True)
        for f in gpu_grid.KEPT:
            (run / f).write_bytes(os.urandom(400))
        (run / "checkpoint.pt").write_bytes(b"x")
        names.append(gpu_grid.pack(run, f"m/ce/seed{seed}", out, work))
    assert names == ["runs-1.tar.gz", "runs-1.tar.gz", "runs-2.tar.gz", "runs-2.tar.gz"]
    run = tmp_path / "store" / "m" / "ce" / "seed9"
    run.mkdir()
    (run / "meta.json").write_bytes(os.urandom(2000))
    assert gpu_grid.pack(run, "m/ce/seed9", out, work) is None                # a third archive: OUT is full
    with tarfile.open(out / "runs-2.tar.gz") as tar:
        assert sorted(tar.getnames()) == sorted(f"m/ce/seed{s}/{f}" for s in (2, 3) for f in gpu_grid.KEPT)
    assert sorted(p.name for p in out.iterdir()) == ["runs-1.tar.gz", "runs-2.tar.gz"]      # no temporary left


def test_the_first_guess_is_the_stored_runs_measured_epoch_when_there_are_any(tmp_path):
    """Issue 44: the throughput table guessed 846 s for a 60-epoch ResNet-20 that took 290-459 s, so a default
    session planned no grid run; the stored runs' own epochs (of the device's kind, evaluation diagnostics) come
    first."""
    def stored(rel, **meta):
        run = tmp_path / rel
        run.mkdir(parents=True)
        (run / "meta.json").write_text(json.dumps({"finished": True, "diagnostics": "eval", **meta}))

    assert gpu_grid.stored_epoch_seconds(tmp_path, "cuda") is None
    stored("tuning/a/ce/seed100", device="cuda", epochs_done=30, wall_time_s=150.0)
    stored("tuning/a/ce/seed101", device="cuda", epochs_done=60, wall_time_s=420.0)
    stored("tuning/b/ce/seed100", device="cuda", epochs_done=30, wall_time_s=180.0)
    stored("tuning/c/ce/seed100", device="cpu", epochs_done=2, wall_time_s=1000.0)        # another kind
    stored("tuning/d/ce/seed100", device="cuda", epochs_done=2, wall_time_s=1000.0, diagnostics="full")
    stored("tuning/e/ce/seed100", device="cuda", epochs_done=3, wall_time_s=1000.0, finished=False)
    assert gpu_grid.stored_epoch_seconds(tmp_path, "cuda:0") == pytest.approx(6.0)       # median of 5, 7, 6
    table = {"rows": [{"loop": "calib", "runs": 8, "precision": "bf16", "per_run": 5929.0}]}
    assert gpu_grid.first_guess("cuda", table, 8, 55000, 6.0)["epoch_s"] == 6.0
    assert gpu_grid.first_guess("cuda", table, 8, 55000)["epoch_s"] == pytest.approx(
        gpu_grid.EVAL_OVERHEAD * 55000 / 5929.0)


def test_the_stored_resnet_runs_give_a_first_guess_near_their_measured_time():
    """The tuning runs stored in book/results (issue 44's first session): 60 epochs at about 5-8 s an epoch."""
    root = Path(__file__).resolve().parents[1] / "book" / "results" / "10-benchmark" / "resnet"
    epoch_s = gpu_grid.stored_epoch_seconds(root, "cuda")
    assert epoch_s is not None and 3.0 < epoch_s < 9.0
    assert gpu_grid.estimate_seconds({"config": {"epochs": 60, "diagnostics": "eval"}}, [],
                                     gpu_grid.first_guess("cuda", None, 8, 55000, epoch_s)) < 600


def test_import_stores_the_returned_runs_with_float16_logits_and_reports_what_its_check_finds(dry_run, tmp_path):
    """The session side: the dry run's OUT imported into a fresh store. Each run's logits are its packed float32
    logits rounded to float16 (labels unchanged), nothing else is altered, a run already stored is skipped, and
    the check's findings (a CPU run names no GPU) make the command fail."""
    import numpy as np

    from calib.runs import read_logits

    store = tmp_path / "store"
    args = SimpleNamespace(folder=str(dry_run.out), store=str(store))
    assert gpu_grid.import_runs(args) == 1                   # the dry run trained on the CPU: the check says so
    chosen = dry_run.summary["choice"]["chosen"]
    run = store / chosen / "ce" / "seed0"
    with tarfile.open(dry_run.out / "runs-1.tar.gz") as tar:
        tar.extractall(tmp_path / "packed", filter="data")
    packed = tmp_path / "packed" / chosen / "ce" / "seed0"
    with np.load(run / "logits.npz") as stored, np.load(packed / "logits.npz") as original:
        assert stored["test_logits"].dtype == np.float16 and original["test_logits"].dtype == np.float32
        for key in original.files:
            expected = original[key].astype(np.float16) if key.endswith("_logits") else original[key]
            assert np.array_equal(stored[key], expected), key
    assert read_logits(run / "logits.npz")["val_logits"].dtype == np.float32
    for name in ("meta.json", "history.json"):
        assert (run / name).read_bytes() == (packed / name).read_bytes()
    assert "device 'cpu' is not a CUDA device" in gpu_grid.check_run(run)
    # the store's post-hoc evaluation describes the grid's runs (not the tuning runs), keyed by the stored logits
    evaluation = json.loads((store / "posthoc.json").read_text())["runs"]
    assert sorted(evaluation) == [f"{chosen}/{loss}/seed0" for loss in ("ce", "fl-3", "flsd-53")]
    assert evaluation[f"{chosen}/ce/seed0"]["sha256"] == hashlib.sha256((run / "logits.npz").read_bytes()).hexdigest()
    before = {p: p.read_bytes() for p in (run / "logits.npz", store / "posthoc.json")}
    gpu_grid.import_runs(args)                               # again: every run is already stored, left as it is
    assert {p: p.read_bytes() for p in before} == before
