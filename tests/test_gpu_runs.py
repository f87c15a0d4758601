"""The stored GPU runs (issue 44, part 3): every run under ``book/results/10-benchmark/resnet/`` (the ResNet grid and
its tuning, imported by ``tests/benchmarks/gpu_grid.py import``) records where and how it was trained, and its
logits reproduce the metrics its history recorded. With no GPU run stored the first test checks nothing; the
control builds a faithful run and tampered copies, so that the check is seen to pass and to fail."""

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("gpu_grid", ROOT / "tests" / "benchmarks" / "gpu_grid.py")
gpu_grid = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gpu_grid)


def test_every_stored_gpu_run_records_its_provenance_and_its_logits_reproduce_its_metrics():
    runs = gpu_grid.stored_runs(gpu_grid.STORE) if gpu_grid.STORE.is_dir() else []
    problems = {str(run.relative_to(ROOT)): gpu_grid.check_run(run) for run in runs}
    assert {name: found for name, found in problems.items() if found} == {}


def _faithful_run(folder: Path, seed: int = 0) -> Path:
    """A run as a GPU session stores it: its history's last epoch computed from the logits it keeps."""
    from calib.runs import write_logits
    from calib.train import split_statistics

    rng = np.random.default_rng(seed)
    arrays = {}
    for split, n in (("val", 200), ("test", 300)):
        y = rng.integers(0, 10, n)
        z = rng.normal(size=(n, 10)).astype(np.float32)
        z[np.arange(n), y] += 3.0                                   # mostly right, over-confident
        arrays[f"{split}_logits"], arrays[f"{split}_labels"] = z, y
    folder.mkdir(parents=True)
    write_logits(folder / "logits.npz", arrays)
    last = {split: split_statistics(arrays[f"{split}_logits"], arrays[f"{split}_labels"]) for split in ("val", "test")}
    (folder / "history.json").write_text(json.dumps({"epochs": [{"epoch": 1, "val": {}, "test": {}},
                                                                {"epoch": 2, **last}]}))
    meta = {"config": {"data": "fashion-mnist-32", "model": "resnet20", "loss": "ce", "epochs": 2, "seed": seed},
            "finished": True, "epochs_done": 2, "device": "cuda:0", "device_name": "NVIDIA H200",
            "wall_time_s": 41.5, "versions": {"torch": "2.11.0+cu130", "cuda": "13.0"}, "git_commit": "93db9ad",
            "note": "Schedule compressed: 2 epochs for the papers' 350.",
            "dataset": {"name": "fashion-mnist-32", "n_train": 55000, "n_val": 200, "n_test": 300}}
    (folder / "meta.json").write_text(json.dumps(meta))
    return folder


def _edit_meta(run: Path, **changes) -> None:
    meta = json.loads((run / "meta.json").read_text())
    for key, value in changes.items():
        if value is None:
            meta.pop(key, None)
        else:
            meta[key] = value
    (run / "meta.json").write_text(json.dumps(meta))


@pytest.mark.parametrize("tamper, problem", [
    (lambda run: _edit_meta(run, device="cpu"), "is not a CUDA device"),
    (lambda run: _edit_meta(run, device_name="CPU: AMD EPYC (2 cores)"), "names no GPU"),
    (lambda run: _edit_meta(run, versions={"torch": "2.11.0"}), "versions.cuda missing"),
    (lambda run: _edit_meta(run, note=None), "no note that the schedule is compressed"),
    (lambda run: _edit_meta(run, git_commit=None), "no git_commit"),
    (lambda run: _edit_meta(run, wall_time_s=0), "is not a time"),
    (lambda run: (run / "checkpoint.pt").write_bytes(b"weights"), "checkpoint.pt is stored"),
    (lambda run: (run / "logits.npz").unlink(), "no logits.npz"),
])
def test_the_check_names_what_a_stored_run_lacks(tmp_path, tamper, problem):
    run = _faithful_run(tmp_path / "store" / "resnet20-e30-none" / "ce" / "seed0")
    assert gpu_grid.check_run(run) == []                                       # the control passes
    assert gpu_grid.stored_runs(tmp_path / "store") == [run]                   # and is found where runs are stored
    tamper(run)
    found = gpu_grid.check_run(run)
    assert len(found) == 1 and problem in found[0], found


def test_logits_of_another_run_do_not_reproduce_the_stored_metrics(tmp_path):
    run = _faithful_run(tmp_path / "a" / "m" / "ce" / "seed0", seed=0)
    other = _faithful_run(tmp_path / "b" / "m" / "ce" / "seed0", seed=1)
    (run / "logits.npz").write_bytes((other / "logits.npz").read_bytes())     # another network's logits
    found = gpu_grid.check_run(run)
    assert found and all("its logits give" in f for f in found)
    assert {f.split(":")[0] for f in found} >= {"val nll", "test nll"}
