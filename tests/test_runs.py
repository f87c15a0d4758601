"""The run directory (calib.runs) and what `calib train` may do to one: atomic writes with a temporary per
writer, a named error for each damaged file, --restart that deletes only its own run, resume only under the
instruction set a run began with, and the torch flags a run sets restored afterwards."""

import errno
import json
import os
import pickle
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from calib_book.timeouts import scaled  # a subprocess's time limit, scaled by the machine's load

from calib import cli, runs
from calib.runs import CorruptRunError, ReadOnlyRunError, RunConfigError, read_json_object, read_logits, run_owner
from calib.train import TrainConfig, train, torch_flags

torch.set_num_threads(1)
ROOT = Path(__file__).resolve().parent.parent
TINY = dict(data="fashion-mnist", model="small-cnn-w4", loss="ce", epochs=1, seed=3, batch_size=64, lr=0.05,
            train_subset=384, val_subset=64, test_subset=128)


def _cli(argv, capsys):
    rc = cli.main(argv)
    return rc, capsys.readouterr().err


def _logits(n=6, k=3):
    rng = np.random.default_rng(0)
    return {"val_logits": rng.normal(size=(n, k)).astype(np.float32), "val_labels": np.arange(n) % k,
            "test_logits": rng.normal(size=(n, k)).astype(np.float32), "test_labels": np.arange(n) % k}


# ------------------------------------------------------------------------------------------------- the files

def test_concurrent_writers_never_share_a_temporary(tmp_path):
    """Each writer writes through a temporary of its own: 4 threads x 50 writes of one file raise nothing, and the
    file is always one writer's whole text (a shared `.meta.json.tmp<pid>` lost writes before)."""
    target, errors = tmp_path / "meta.json", []

    def writer(i):
        try:
            for j in range(50):
                runs.write_json(target, {"writer": i, "n": j, "pad": "x" * 5000})
        except Exception as exc:                         # noqa: BLE001 (collected, asserted below)
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert json.loads(target.read_text())["n"] == 49 and not list(tmp_path.glob(".*.tmp*"))


def test_logits_round_trip_and_every_damage_is_named(tmp_path):
    path = tmp_path / "logits.npz"
    arrays = _logits()
    runs.write_logits(path, arrays)
    got = read_logits(path)
    for k in runs.LOGIT_KEYS:
        np.testing.assert_array_equal(got[k], arrays[k])
    assert read_logits(path, check_only=True) == {}
    damages = {"garbage": lambda: path.write_bytes(b"\x00garbage" * 50),
               "a pickle": lambda: path.write_bytes(pickle.dumps({"val_logits": 1})),
               "an object array": lambda: np.savez(open(path, "wb"), **{**arrays, "val_logits": np.array([{}, 1])}),
               "a missing key": lambda: np.savez(open(path, "wb"), val_logits=arrays["val_logits"]),
               "labels out of range": lambda: np.savez(open(path, "wb"),
                                                       **{**arrays, "test_labels": arrays["test_labels"] + 7})}
    for what, damage in damages.items():
        damage()
        with pytest.raises(CorruptRunError) as exc:
            read_logits(path)
        message = str(exc.value)
        assert message.startswith(f"{path} is damaged") and "--restart" in message and "delete" in message, what
        assert "allow_pickle" not in message, what


def test_compacted_logits_are_float16_on_disk_and_read_back_as_float32(tmp_path):
    """Issue 42: chapter 10 keeps some runs' logits as float16 to fit the store; every reader gets float32 arrays
    (numpy would otherwise do softmaxes and metrics in half precision), equal to the float16 rounding."""
    path = tmp_path / "logits.npz"
    arrays = _logits(n=500, k=10)
    runs.write_logits(path, arrays)
    before = path.stat().st_size
    runs.compact_logits(path)
    with np.load(path) as raw:
        assert raw["val_logits"].dtype == np.float16 and raw["test_logits"].dtype == np.float16
        np.testing.assert_array_equal(raw["test_labels"], arrays["test_labels"])
    got = read_logits(path)
    for split in ("val", "test"):
        assert got[f"{split}_logits"].dtype == np.float32
        np.testing.assert_array_equal(got[f"{split}_logits"],
                                      arrays[f"{split}_logits"].astype(np.float16).astype(np.float32))
    assert path.stat().st_size < before
    runs.compact_logits(path)                           # twice is once
    np.testing.assert_array_equal(read_logits(path)["val_logits"], got["val_logits"])
    with pytest.raises(ValueError, match="dtype='float8'.*float16"):
        runs.compact_logits(path, dtype="float8")
    runs.write_logits(path, {**arrays, "val_logits": arrays["val_logits"] * 1e5})
    with pytest.raises(ValueError, match="beyond float16's range"):
        runs.compact_logits(path)
    assert read_logits(path)["val_logits"].dtype == arrays["val_logits"].dtype      # left as it was


def test_json_damage_names_the_file(tmp_path):
    path = tmp_path / "meta.json"
    for data, what in ((b"\xff\xfe{", "is not valid JSON (UnicodeDecodeError"), (b"{", "is not valid JSON"),
                       (b"[1]", "holds a JSON list")):
        path.write_bytes(data)
        with pytest.raises(CorruptRunError) as exc:
            read_json_object(path)
        assert str(exc.value).startswith(f"{path} {what}")


def test_run_owner(tmp_path):
    ident = {"loss": "ce"}
    out = tmp_path / "r"
    out.mkdir()
    assert run_owner(out, ident)[0] == "none"
    (out / "meta.json").write_text("{")
    assert run_owner(out, ident)[0] == "same"                  # a lone damaged meta.json: nothing to lose
    (out / "history.json").write_text("{}")
    assert run_owner(out, ident)[0] == "unknown"               # whose history is this? nobody can tell
    (out / "meta.json").write_text(json.dumps({"config": {"loss": "fl-3"}, "versions": {}}))
    assert run_owner(out, ident)[0] == "other"
    (out / "meta.json").write_text(json.dumps({"config": ident, "versions": {}}))
    assert run_owner(out, ident)[0] == "same"
    (out / "meta.json").write_text(json.dumps({"experiment": "mine"}))
    assert run_owner(out, ident)[0] == "unknown"


def test_an_unwritable_directory_is_named_not_a_temporary(tmp_path):
    """Issue 24, 23: a read-only --out named `.meta.json.tmp<pid>`; now the directory and the fix."""
    def denied(tmp):
        raise PermissionError(errno.EACCES, "Permission denied", str(tmp))

    with pytest.raises(ReadOnlyRunError) as exc:
        runs.write_atomic(tmp_path / "meta.json", denied)
    assert f"cannot write meta.json into {tmp_path}" in str(exc.value) and ".tmp" not in str(exc.value)


def test_a_read_only_out_is_refused_before_training(tiny_fashion, tmp_path, capsys, monkeypatch):
    out = tmp_path / "ro"
    out.mkdir()
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda p, mode: False if Path(p) == out else real_access(p, mode))
    rc, err = _cli(["train", *_flags(TINY), "--out", str(out), "--no-progress"], capsys)
    assert rc == 1 and f"out {out} is not writable; choose a writable --out" in err and ".tmp" not in err


# ----------------------------------------------------------------------------------------- restart and resume

def _flags(cfg):
    return ["--data", cfg["data"], "--model", cfg["model"], "--loss", cfg["loss"], "--epochs", str(cfg["epochs"]),
            "--seed", str(cfg["seed"]), "--batch-size", str(cfg["batch_size"]), "--lr", str(cfg["lr"]),
            "--train-subset", str(cfg["train_subset"]), "--val-subset", str(cfg["val_subset"]),
            "--test-subset", str(cfg["test_subset"])]


def test_restart_does_not_delete_a_meta_json_calib_did_not_write(tmp_path, capsys):
    """Issue 24, 2: --restart deleted another program's meta.json and the history.json beside it."""
    out = tmp_path / "experiment"
    out.mkdir()
    (out / "meta.json").write_text('{"experiment": "not calib"}')
    (out / "history.json").write_text('{"mine": 1}')
    rc, err = _cli(["train", *_flags(TINY), "--out", str(out), "--restart", "--no-progress"], capsys)
    assert rc == 1 and "was not written by calib train" in err and "deletes nothing else" in err
    assert (out / "meta.json").read_text() == '{"experiment": "not calib"}'
    assert (out / "history.json").read_text() == '{"mine": 1}'


def test_a_damaged_meta_beside_another_run_is_not_restarted_away(tiny_fashion, tmp_path, capsys):
    """Issue 24, 3: a damaged meta.json beside another configuration's checkpoint and logits: the resume error
    advised --restart, which deleted the other run. Now it advises another --out, and --restart refuses."""
    out = tmp_path / "run"
    train(TrainConfig(**{**TINY, "loss": "fl-3"}), out, progress=False)
    (out / "meta.json").write_text("{ damaged")
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    rc, err = _cli(["train", *_flags(TINY), "--out", str(out), "--resume", "--no-progress"], capsys)
    assert rc == 1 and f"{out / 'meta.json'} is not valid JSON" in err
    assert "choose another --out" in err and "checkpoint.pt is of another configuration" in err
    assert "start the run over with --restart" not in err
    rc, err = _cli(["train", *_flags(TINY), "--out", str(out), "--restart", "--no-progress"], capsys)
    assert rc == 1 and "deletes nothing else" in err
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    # the same configuration's checkpoint proves the run is this one: --restart may start it over
    rc, err = _cli(["train", *_flags({**TINY, "loss": "fl-3"}), "--out", str(out), "--restart", "--no-progress"],
                   capsys)
    assert rc == 0, err
    assert json.loads((out / "meta.json").read_text())["finished"]


def test_a_finished_run_with_garbage_logits_is_not_done(tiny_fashion, tmp_path):
    """Issue 24, 11: calib train reported a finished run whose logits.npz is garbage as done."""
    out = tmp_path / "run"
    train(TrainConfig(**TINY), out, progress=False)
    (out / "logits.npz").write_bytes(b"garbage" * 100)
    with pytest.raises(CorruptRunError, match=f"{out / 'logits.npz'} is damaged.*--restart"):
        train(TrainConfig(**TINY), out, progress=False)
    run = train(TrainConfig(**TINY), out, progress=False, restart=True)
    assert run.logits()["test_logits"].shape == (128, 10)


def test_resume_across_cpu_instruction_sets_is_refused(tiny_fashion, tmp_path):
    """Issue 24, 4: a run begun with CALIB_CPU_ISA=native, interrupted (a real Ctrl-C after its first epoch) and
    resumed under the default (AVX2) silently mixed two instruction sets (logits up to 2.33 apart). Now the
    setting is recorded at the start and the resume refused, naming both; under the run's own setting it
    resumes."""
    cfg = {**TINY, "epochs": 20, "train_subset": 5600}
    out = tmp_path / "run"
    base = {k: v for k, v in os.environ.items()
            if k not in ("CALIB_CPU_ISA", "ATEN_CPU_CAPABILITY", "MKL_ENABLE_INSTRUCTIONS", "ONEDNN_MAX_CPU_ISA")}
    base.update(OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT))
    native = {**base, "CALIB_CPU_ISA": "native"}
    args = [sys.executable, "-m", "calib", "train", *_flags(cfg), "--out", str(out), "--no-progress"]
    proc = subprocess.Popen(args, env=native, cwd=str(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    history = out / "history.json"
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if history.is_file() and json.loads(history.read_text())["epochs"]:
                break
        except (json.JSONDecodeError, KeyError):
            pass
        time.sleep(0.01)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=scaled(120))
    assert proc.returncode == 130, err[-2000:]
    meta = json.loads((out / "meta.json").read_text())
    assert meta["cpu_kernels"]["CALIB_CPU_ISA"] == "native" and meta["cpu_kernels"]["ATEN_CPU_CAPABILITY"] is None
    resumed = subprocess.run([*args, "--resume"], env=base, cwd=str(tmp_path), capture_output=True, text=True)
    assert resumed.returncode == 1 and "was begun with torch's CPU kernels on" in resumed.stderr
    assert "CALIB_CPU_ISA=native" in resumed.stderr and "ATEN_CPU_CAPABILITY=avx2" in resumed.stderr
    assert json.loads((out / "meta.json").read_text()) == meta                    # nothing was touched
    resumed = subprocess.run([*args, "--resume"], env=native, cwd=str(tmp_path), capture_output=True, text=True)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert json.loads((out / "meta.json").read_text())["finished"]


# ------------------------------------------------------------------------------------------------ torch flags

def test_torch_flags_are_restored_after_a_run(tiny_fashion, tmp_path):
    """Issue 31: a run set cuDNN autotuning and TF32 (CUDA) or deterministic algorithms (CPU) for the whole
    process and never restored them."""
    cudnn, matmul = torch.backends.cudnn, torch.backends.cuda.matmul
    before = (torch.are_deterministic_algorithms_enabled(), cudnn.benchmark, matmul.allow_tf32, cudnn.allow_tf32)
    assert before[0] is False
    with torch_flags("cuda"):
        assert (cudnn.benchmark, matmul.allow_tf32, cudnn.allow_tf32) == (True, True, True)
    assert (torch.are_deterministic_algorithms_enabled(), cudnn.benchmark, matmul.allow_tf32,
            cudnn.allow_tf32) == before
    with pytest.raises(KeyError):
        with torch_flags("cpu"):
            assert torch.are_deterministic_algorithms_enabled()
            raise KeyError("an error inside a run")
    assert torch.are_deterministic_algorithms_enabled() is False
    train(TrainConfig(**TINY), tmp_path / "run", progress=False)                  # a real run on the CPU
    assert (torch.are_deterministic_algorithms_enabled(), cudnn.benchmark, matmul.allow_tf32,
            cudnn.allow_tf32) == before


def test_a_lock_taken_on_a_lock_file_removed_meanwhile_is_taken_again(tmp_path, monkeypatch):
    """The holder before us removes the lock file as it releases it; a process that opened that file before the
    removal and locks it afterwards must not believe it holds the run (a third process would lock a new file at
    the same path, and two writers would run at once)."""
    import calib.runs as runs

    path = tmp_path / runs.RunLock.NAME
    path.write_text("pid 1")
    stale = os.open(path, os.O_RDWR)             # opened before the previous holder removed the file ...
    path.unlink()                                # ... which it then removed as it released its lock
    real_open, calls = os.open, []

    def open_stale_first(*args, **kwargs):
        calls.append(args[0])
        return stale if len(calls) == 1 else real_open(*args, **kwargs)

    monkeypatch.setattr(runs.os, "open", open_stale_first)
    lock = runs.RunLock(tmp_path).__enter__()
    monkeypatch.setattr(runs.os, "open", real_open)
    try:
        assert len(calls) == 2 and path.is_file()              # it noticed, and locked the file at the path
        with pytest.raises(runs.RunLockedError, match="being written by another calib train"):
            runs.RunLock(tmp_path).__enter__()                   # so a third process is refused
    finally:
        lock.release(remove=True)


# ------------------------------------------------------------------------ a run folder moved while it is written

def _moves_the_folder_in_epoch_two(monkeypatch, out, moved, replace=False):
    """Make epoch 2 of the next run rename ``out`` to ``moved`` (and, with ``replace``, create a new empty folder
    at ``out``, as another process starting a run there would) once its training steps are done."""
    from calib.train import Trainer

    real_epoch = Trainer._train_epoch

    def epoch_then_move(self, epoch, bar=None):
        loss = real_epoch(self, epoch, bar)
        if epoch == 2:
            out.rename(moved)
            if replace:
                out.mkdir()
        return loss

    monkeypatch.setattr(Trainer, "_train_epoch", epoch_then_move)
    return real_epoch


def test_a_run_folder_moved_during_a_run_stops_it_with_the_way_back(tiny_fashion, tmp_path, capsys, monkeypatch):
    """Issue 45, 4.7: renaming the run folder in the middle of a run ended in torch's RuntimeError ("Parent
    directory ... does not exist") at the next checkpoint. Now the run stops with one line naming the old path,
    where the folder is now and how to go on; the moved folder keeps the completed epoch, moved back it resumes."""
    out, moved = tmp_path / "run", tmp_path / "renamed"
    cfg = {**TINY, "epochs": 2}
    real_epoch = _moves_the_folder_in_epoch_two(monkeypatch, out, moved)
    rc, err = _cli(["train", *_flags(cfg), "--out", str(out), "--no-progress"], capsys)
    assert rc == 1 and "Traceback" not in err
    assert (f"the run folder {out} was moved, renamed or deleted while this run was writing it "
            f"(it is now {moved})") in err
    assert f"move it back to {out} and resume: calib train ... --out {out} --resume" in err
    assert not out.exists()                                              # nothing was written at the old path
    assert sorted(p.name for p in moved.iterdir()) == ["checkpoint.pt", "history.json", "meta.json"]   # no lock left
    assert len(json.loads((moved / "history.json").read_text())["epochs"]) == 1
    assert runs.read_checkpoint(moved / "checkpoint.pt", "cpu")["epoch"] == 1

    monkeypatch.setattr("calib.train.Trainer._train_epoch", real_epoch)
    moved.rename(out)                                                    # the way back the message gives
    rc, err = _cli(["train", *_flags(cfg), "--out", str(out), "--resume", "--no-progress"], capsys)
    assert rc == 0, err
    meta = json.loads((out / "meta.json").read_text())
    assert meta["finished"] and meta["epochs_done"] == 2


def test_a_new_folder_at_a_moved_runs_path_is_not_written_into(tiny_fashion, tmp_path, monkeypatch):
    """A folder moved away and replaced by a new one at its path (another process starting a run there) took the
    rest of the run: its checkpoint and history went into the new folder, under the other process's lock. The
    run's lock tells the folder it holds from the one at the path now."""
    out, moved = tmp_path / "run", tmp_path / "renamed"
    _moves_the_folder_in_epoch_two(monkeypatch, out, moved, replace=True)
    with pytest.raises(ValueError, match=f"it is now {moved}") as exc:
        train(TrainConfig(**{**TINY, "epochs": 3}), out, progress=False)
    assert type(exc.value).__name__ == "RunFolderMovedError"
    assert list(out.iterdir()) == []
    assert len(json.loads((moved / "history.json").read_text())["epochs"]) == 1


def test_a_write_into_a_vanished_folder_is_named_not_a_torch_error(tmp_path):
    """Without a lock to ask (a write outside a run): torch's zip writer raised RuntimeError for a folder that
    no longer exists."""
    gone = tmp_path / "gone"
    gone.mkdir()
    gone.rmdir()
    with pytest.raises(ValueError, match=f"the run folder {gone} was moved, renamed or deleted") as exc:
        runs.write_atomic(gone / "checkpoint.pt", lambda p: torch.save({"epoch": 1}, p))
    assert type(exc.value).__name__ == "RunFolderMovedError" and "move it back" in str(exc.value)


def test_a_dangling_out_symlink_is_named_as_one(tmp_path, capsys):
    """Issue 45, 4.7: a dangling --out symlink was reported as "a file"."""
    link = tmp_path / "out"
    link.symlink_to(tmp_path / "nowhere")
    rc, err = _cli(["train", *_flags(TINY), "--out", str(link), "--no-progress"], capsys)
    assert rc == 1
    assert f"out {link} is a dangling symlink (to {tmp_path / 'nowhere'}, which does not exist); remove the link, " \
           f"or point it at a folder" in err and "is a file" not in err
    assert link.is_symlink() and not (tmp_path / "nowhere").exists()          # nothing created


# ---------------------------------------------------------------------- the resume refusal across CPU settings

def test_the_cpu_kernel_refusal_says_what_differs(tmp_path, monkeypatch):
    """Issue 45, 4.7: a resume refused under the same instruction set (other variables) said "a run resumed across
    instruction sets matches neither", naming one instruction set twice. Each case now says what differs."""
    from calib._reproducible import cpu_kernel_setting
    from calib.runs import RunFolder

    for name in ("ATEN_CPU_CAPABILITY", "MKL_ENABLE_INSTRUCTIONS", "ONEDNN_MAX_CPU_ISA"):
        monkeypatch.setenv(name, {"ATEN_CPU_CAPABILITY": "avx2"}.get(name, "AVX2"))
    monkeypatch.delenv("CALIB_CPU_ISA", raising=False)
    now = cpu_kernel_setting()["capability"]
    folder = RunFolder(tmp_path / "run", TrainConfig(**TINY, device="cpu").resolved().identity())
    native = {"CALIB_CPU_ISA": "native", "ATEN_CPU_CAPABILITY": None, "MKL_ENABLE_INSTRUCTIONS": None,
              "ONEDNN_MAX_CPU_ISA": None}

    with pytest.raises(RunConfigError) as same:
        folder.check_cpu_kernels({"device": "cpu", "cpu_capability": now, "cpu_kernels": native}, "cpu")
    message = str(same.value)
    assert f"begun with torch's CPU kernels on {now} (CALIB_CPU_ISA=native), and this process runs {now} too but " \
           f"under other variables (ATEN_CPU_CAPABILITY=avx2" in message
    assert "across instruction sets" not in message and "Resume it under the variables it began with" in message

    other = "AVX512" if now != "AVX512" else "AVX2"
    with pytest.raises(RunConfigError) as across:
        folder.check_cpu_kernels({"device": "cpu", "cpu_capability": other, "cpu_kernels": native}, "cpu")
    message = str(across.value)
    assert f"begun with torch's CPU kernels on {other} (CALIB_CPU_ISA=native), and this process runs {now} " \
           f"(ATEN_CPU_CAPABILITY=avx2" in message \
        and "does not continue bit for bit across instruction sets" in message
    folder.check_cpu_kernels({"device": "cpu", "cpu_capability": now,            # the same setting: resumed
                              "cpu_kernels": cpu_kernel_setting()["variables"]}, "cpu")
    folder.check_cpu_kernels({"device": "cpu", "cpu_capability": other, "cpu_kernels": native}, "cuda")  # no CPU


def test_a_resume_on_a_cpu_whose_kernels_compute_otherwise_is_refused(tmp_path):
    """Issue 45, item 1: the instruction set does not decide the float32 kernels alone (MKL picks them by vendor too:
    an Intel Xeon under ATEN_CPU_CAPABILITY=avx2 retrains the AMD EPYC runs 1 prediction in 20,000 apart after one
    epoch). A run records its kernel fingerprint, and a resume under another is refused, naming both; the same
    fingerprint resumes, and a run that records none (written before it existed) is judged by its setting alone."""
    from calib._reproducible import cpu_kernel_setting, kernel_fingerprint
    from calib.runs import RunFolder

    folder = RunFolder(tmp_path / "run", TrainConfig(**TINY, device="cpu").resolved().identity())
    setting = cpu_kernel_setting()
    meta = {"device": "cpu", "cpu_capability": setting["capability"], "cpu_kernels": setting["variables"],
            "device_name": "CPU: Some Other (2 cores)"}
    here = kernel_fingerprint()
    with pytest.raises(RunConfigError, match=rf"kernel fingerprint 0123456789abcdef then, {here['torch']} here.*"
                                             r"Some Other"):
        folder.check_cpu_kernels({**meta, "cpu_fingerprint": {**here, "torch": "0123456789abcdef"}}, "cpu")
    folder.check_cpu_kernels({**meta, "cpu_fingerprint": here}, "cpu")                # the same kernels: resumed
    folder.check_cpu_kernels(meta, "cpu")                                             # none recorded: the setting
    run = train(TrainConfig(**TINY, device="cpu"), tmp_path / "fresh", progress=False)
    assert run.meta["cpu_fingerprint"] == here                                       # a run records it


def test_kernels_match_decides_by_fingerprint_and_else_by_the_recorded_setting():
    """What the retraining tests compare exactly and what within tolerance: fingerprints decide where the run
    records them; else the same instruction set, torch and CPU vendor count as the same kernels."""
    import torch

    from calib._reproducible import cpu_kernel_setting, cpu_vendor, kernel_fingerprint, kernels_match

    here = kernel_fingerprint()
    same = kernels_match({"device": "cpu", "cpu_fingerprint": here})
    assert (same["torch"], same["numpy"]) == (True, True) and here["torch"] in same["why"]
    assert kernels_match({"device": "cpu", "cpu_fingerprint": {**here, "numpy": "x"}})["numpy"] is False
    assert kernels_match({"device": "cpu", "cpu_fingerprint": {**here, "torch": "x"}})["torch"] is False
    name = {"GenuineIntel": "CPU: Intel(R) Xeon(R) (2 cores)", "AuthenticAMD": "CPU: AMD EPYC (2 cores)"}
    legacy = {"device": "cpu", "cpu_capability": cpu_kernel_setting()["capability"],
              "versions": {"torch": torch.__version__}, "device_name": name.get(cpu_vendor(), "CPU: ? (2 cores)")}
    assert kernels_match(legacy)["torch"] is (cpu_vendor() in name) and kernels_match(legacy)["numpy"] is None
    other = "CPU: AMD EPYC (2 cores)" if cpu_vendor() != "AuthenticAMD" else "CPU: Intel(R) Xeon(R) (2 cores)"
    mismatch = kernels_match({**legacy, "device_name": other})
    assert mismatch["torch"] is False and "CPU vendor" in mismatch["why"]
    assert kernels_match({**legacy, "device": "cuda:0"})["torch"] is False


# ------------------------------------------------------------------------- durability (issue 43, item 7)

def _record_fsyncs_and_replaces(monkeypatch):
    """Record, in order, every os.fsync (what it flushes: a file's name and size then, or a folder) and every
    os.replace, calling the real functions."""
    import stat

    calls, real_fsync, real_replace = [], os.fsync, os.replace

    def fsync(fd):
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            calls.append(("fsync folder", os.readlink(f"/proc/self/fd/{fd}")))
        else:
            calls.append(("fsync file", Path(os.readlink(f"/proc/self/fd/{fd}")).name, info.st_size))
        return real_fsync(fd)

    def replace(src, dst, *a, **k):
        calls.append(("replace", Path(src).name, Path(dst).name))
        return real_replace(src, dst, *a, **k)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    return calls


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="names an open file through /proc/self/fd (Linux)")
def test_write_atomic_flushes_the_file_before_the_rename_and_the_folder_after(tmp_path, monkeypatch):
    """Issue 43, item 7: write_atomic wrote a temporary and renamed it, with no fsync: after a power cut, ext4 and
    XFS may keep the rename and lose the data (an empty meta.json or checkpoint.pt under the name). The temporary's
    whole content is now flushed before os.replace, and the folder (the rename) after it; each file of a run
    (meta.json, logits.npz, checkpoint.pt) is written so."""
    calls = _record_fsyncs_and_replaces(monkeypatch)
    runs.write_json(tmp_path / "meta.json", {"x": 1})
    text = (tmp_path / "meta.json").read_bytes()
    assert len(calls) == 3, calls
    (kind, flushed, size), (_, src, dst), folder = calls
    assert kind == "fsync file" and flushed == src and src.startswith(".meta.json.") and size == len(text)
    assert dst == "meta.json" and folder == ("fsync folder", str(tmp_path))
    calls.clear()
    folder = runs.RunFolder(tmp_path, {"loss": "ce"})
    folder.write_logits(_logits())
    folder.write_checkpoint({"config": {"loss": "ce"}, "epoch": 1, "model": {}, "optimizer": {}})
    assert [c[0] for c in calls] == ["fsync file", "replace", "fsync folder"] * 2
    assert [c[2] for c in calls if c[0] == "replace"] == ["logits.npz", "checkpoint.pt"]


def test_a_failing_flush_keeps_the_old_file_and_says_the_disk_is_full(tmp_path, monkeypatch):
    """A flush that finds the device full (ENOSPC from fsync: delayed allocation, network file systems) is a full
    disk like any other: DiskFullError, the temporary removed, the previous file intact (before, nothing was
    flushed and the error came, if at all, after the rename)."""
    runs.write_json(tmp_path / "meta.json", {"epoch": 1})

    def no_space(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", no_space)
    with pytest.raises(runs.DiskFullError, match="no space left on the device"):
        runs.write_json(tmp_path / "meta.json", {"epoch": 2})
    assert json.loads((tmp_path / "meta.json").read_text()) == {"epoch": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["meta.json"]


class _Planted:
    """An object whose unpickling opens (creates) a file: what a planted checkpoint could run instead."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return (open, (self.path, "w"))


def test_a_planted_checkpoint_runs_no_code_when_its_config_is_read(tmp_path, capsys):
    """Issue 43, item 7: a checkpoint was read with torch.load(weights_only=False), for its config too (run_owner,
    --restart, a resume's check): a checkpoint.pt planted in a folder could run any code. It is now read with
    weights_only=True: the object is refused, nothing runs, and the error names the file and the object."""
    out, marker = tmp_path / "run", tmp_path / "ran"
    out.mkdir()
    torch.save({"config": {"loss": "ce"}, "epoch": 1, "model": {}, "optimizer": {}, "payload": _Planted(marker)},
               out / "checkpoint.pt")
    owner, why = run_owner(out, {"loss": "ce"})
    assert (owner, marker.exists()) == ("unknown", False)
    assert "holds a Python object (io.open) that no calib checkpoint holds" in why
    with pytest.raises(CorruptRunError, match=r"checkpoint.pt holds a Python object \(io.open\).*weights_only=True"):
        runs.read_checkpoint(out / "checkpoint.pt", "cpu")
    rc, err = _cli(["train", *sum(([f"--{k.replace('_', '-')}", str(v)] for k, v in TINY.items()), []),
                    "--out", str(out), "--resume", "--no-progress"], capsys)
    assert rc == 1 and "io.open" in err and not marker.exists()


def test_a_checkpoint_holds_only_what_weights_only_loading_reads_and_restores_the_random_states(tmp_path):
    """Issue 43, item 7: a checkpoint held numpy's random state as a numpy array, which torch.load(weights_only=True)
    refuses. It now holds tensors, dicts, lists, numbers and strings only (numpy's key as an int64 tensor): torch's
    restricted loader reads it without any allowed global, and the random states it restores draw what they would
    have drawn. A checkpoint written before (numpy's state as its tuple) is still read and restored."""
    import random

    from calib.train import Trainer

    trainer = Trainer(TrainConfig(**TINY), tmp_path / "run", progress=False)
    trainer.history, trainer.epoch, trainer.wall_time = {"epochs": [{"lr": 0.05, "test": None}]}, 1, 0.5
    model = torch.nn.Linear(3, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    model(torch.ones(1, 3)).sum().backward()
    optimizer.step()                                        # a momentum buffer in the optimiser's state
    trainer.model, trainer.optimizer = model, optimizer
    trainer.scheduler = torch.optim.lr_scheduler.MultiStepLR(optimizer, milestones=[1], gamma=0.1)
    trainer.device = torch.device("cpu")
    (tmp_path / "run").mkdir()
    np.random.seed(7), random.seed(7), torch.manual_seed(7)
    trainer.save_checkpoint()
    expected = (np.random.random(3), random.random(), torch.rand(3))
    state = torch.load(tmp_path / "run" / "checkpoint.pt", weights_only=True)        # no global allowed
    assert isinstance(state["rng"]["numpy"]["key"], torch.Tensor) and state["epoch"] == 1
    for save_as_before in (False, True):
        if save_as_before:                                  # numpy's state as numpy gives it, as calib wrote it
            np.random.seed(7)
            state["rng"]["numpy"] = np.random.get_state()
            torch.save(state, tmp_path / "run" / "checkpoint.pt")
        np.random.seed(0), random.seed(0), torch.manual_seed(0)
        trainer.load_checkpoint()
        drawn = (np.random.random(3), random.random(), torch.rand(3))
        assert np.array_equal(drawn[0], expected[0]) and drawn[1] == expected[1] and torch.equal(drawn[2], expected[2])
        assert torch.equal(trainer.optimizer.state_dict()["state"][0]["momentum_buffer"],
                           optimizer.state_dict()["state"][0]["momentum_buffer"])


# --- cases the mutation test found untested (README, Contributing: tests/mutation_sample.py) -----------------------

def test_the_world_size_a_run_records_is_the_one_it_resumes_under():
    """check_world_size reads meta.json's world_size (1 where absent), refuses another count with the command that
    launches the recorded one, and calls a count that is not an integer >= 1 damage."""
    runs.check_world_size({}, 1, "m records", "calib train --resume")
    runs.check_world_size({"world_size": 2}, 2, "m records", "calib train --resume")
    with pytest.raises(RunConfigError, match=r"torchrun --standalone --nproc_per_node 2 -m calib train --resume"):
        runs.check_world_size({"world_size": 2}, 1, "m records", "calib train --resume")
    with pytest.raises(RunConfigError, match=r"trained by one process.*has 2 processes.*: calib train --resume"):
        runs.check_world_size({}, 2, "m records", "calib train --resume")
    for bad in (True, 0, 1.0, "2"):
        with pytest.raises(CorruptRunError, match="world_size"):
            runs.check_world_size({"world_size": bad}, 1, "m records", "calib train --resume")


def test_weights_are_float16_unless_asked_and_an_empty_state_is_refused(tmp_path):
    """write_weights' default type is float16 (the counters stay integers); a state that is empty or not a dict is
    refused; read_weights takes integer and boolean arrays as numbers and refuses text."""
    runs.write_weights(tmp_path / "w.npz", {"w": torch.ones(2, 3), "n": torch.tensor(7), "b": np.array([True])})
    back = runs.read_weights(tmp_path / "w.npz")
    assert {k: a.dtype for k, a in back.items()} == {"w": np.float16, "n": np.int64, "b": np.bool_}
    for state in ({}, [("w", torch.ones(1))]):
        with pytest.raises(ValueError, match="non-empty state_dict"):
            runs.write_weights(tmp_path / "x.npz", state)
    np.savez(tmp_path / "text.npz", w=np.array(["a"]))
    with pytest.raises(CorruptRunError, match="no arrays of numbers"):
        runs.read_weights(tmp_path / "text.npz")


def test_an_empty_folder_is_a_new_run_and_the_cpu_is_named_from_cpuinfo(tmp_path):
    """RunFolder.check calls a folder without meta.json or checkpoint "new" (prepare returns the same); a CPU device's
    name is /proc/cpuinfo's model name with the core count, where Linux has one."""
    folder = runs.RunFolder(tmp_path / "run", {"loss": "ce"})
    (tmp_path / "run").mkdir()
    assert folder.check(resume=False, device_type="cpu") == "new"
    assert folder.prepare(resume=True, restart=False, device_type="cpu") == "new"
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        model = next((line.split(":", 1)[1].strip() for line in cpuinfo.read_text().splitlines()
                      if line.startswith("model name")), None)
        if model is not None:
            assert runs.device_name(torch.device("cpu")) == f"CPU: {model} ({os.cpu_count()} cores)"


# --------------------------------------------------------------- mutation sample B: behaviour the sample found untested

def test_run_owner_names_both_damages_when_meta_json_and_the_checkpoint_are_damaged(tmp_path):
    out = tmp_path / "r"
    out.mkdir()
    (out / "meta.json").write_text("{")
    (out / "checkpoint.pt").write_bytes(b"garbage" * 10)
    owner, why = run_owner(out, {"loss": "ce"})
    meta_why = str(pytest.raises(CorruptRunError, read_json_object, out / "meta.json").value).split(";")[0]
    assert owner == "unknown"
    assert why.startswith(f"{meta_why}, and {out / 'checkpoint.pt'}")


def test_write_weights_refuses_a_name_that_is_empty_or_starts_with_an_underscore(tmp_path):
    for name in ("", "_meta", "a/b", 3):
        with pytest.raises(ValueError, match=f"state has the key {name!r}; a state_dict's names"):
            runs.write_weights(tmp_path / "w.npz", {"w": np.ones(2), name: np.ones(2)})
    assert not (tmp_path / "w.npz").exists()


def test_write_weights_refuses_a_weight_beyond_float16_without_an_overflow_warning(tmp_path):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")                       # numpy's "overflow encountered in cast" would raise
        with pytest.raises(ValueError, match=r"state\['w'\] holds values beyond float16's range"):
            runs.write_weights(tmp_path / "w.npz", {"w": np.array([1.0, 1e6], dtype=np.float32)})


def test_a_runs_logits_are_those_of_the_splits_it_keeps(tmp_path):
    """Run.logits reads the splits logits.npz holds: a grid run keeps the test split alone."""
    logits, labels = np.arange(12, dtype=np.float32).reshape(4, 3), np.array([0, 2, 1, 2])
    np.savez(tmp_path / "logits.npz", test_logits=logits, test_labels=labels)
    got = runs.Run(tmp_path, {}, {}).logits()
    assert sorted(got) == ["test_labels", "test_logits"]
    np.testing.assert_array_equal(got["test_logits"], logits)
    np.testing.assert_array_equal(got["test_labels"], labels)


def test_the_cpu_is_named_by_everything_after_the_first_colon_of_its_model_name(monkeypatch):
    class Cpuinfo:
        def __init__(self, path):
            assert str(path) == "/proc/cpuinfo"

        def read_text(self):
            return "processor\t: 0\nmodel name\t: Acme CPU: rev 2 @ 3.0GHz\nflags\t: fpu\n"

    monkeypatch.setattr(runs, "Path", Cpuinfo)
    assert runs.device_name(torch.device("cpu")) == f"CPU: Acme CPU: rev 2 @ 3.0GHz ({os.cpu_count()} cores)"


def test_git_dirty_tells_uncommitted_changes_of_the_library_in_a_git_checkout():
    """git_dirty is True or False in a git checkout (None only where git cannot tell): whether `git diff HEAD`
    lists a file under calib/."""
    here = Path(runs.__file__).resolve().parent.parent
    try:
        inside = subprocess.run(["git", "-C", str(here), "rev-parse", "--is-inside-work-tree"], capture_output=True,
                                text=True, timeout=10)
        diff = subprocess.run(["git", "-C", str(here), "diff", "--name-only", "HEAD", "--", "calib"],
                              capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        pytest.skip("no git")
    if inside.returncode != 0 or inside.stdout.strip() != "true" or diff.returncode != 0:
        pytest.skip("not a git checkout")
    assert runs.git_dirty() is bool(diff.stdout.strip())


def test_a_lock_that_cannot_open_the_file_again_after_a_stale_one_holds_nothing(tmp_path, monkeypatch):
    """The first file opened was removed meanwhile (a stale lock file); when the second open fails (the folder made
    read-only), the lock holds no file: release and check_in_place do nothing."""
    path = tmp_path / runs.RunLock.NAME
    path.write_text("pid 1")
    stale = os.open(path, os.O_RDWR)
    path.unlink()
    calls = []

    def open_stale_then_fail(*args, **kwargs):
        calls.append(args[0])
        if len(calls) == 1:
            return stale
        raise PermissionError(errno.EACCES, "read-only", str(args[0]))

    monkeypatch.setattr(runs.os, "open", open_stale_then_fail)
    lock = runs.RunLock(tmp_path).__enter__()
    assert len(calls) == 2 and lock.fd is None
    lock.check_in_place()
    lock.release(remove=True)


# --------------------------------------------------------------- mutation sample C: behaviour the sample found untested

def test_git_dirty_counts_changed_tracked_files_of_calib_not_untracked_ones(tmp_path, monkeypatch):
    """In a checkout (here a repository made for the test, where git_dirty looks through the module's path): a new
    untracked file under calib/ (a scratch file, a build product) does not make the library dirty; a change to a
    tracked file does."""
    repo = tmp_path / "repo"
    (repo / "calib").mkdir(parents=True)
    (repo / "calib" / "a.py").write_text("x = 1\n")

    def git(*args):
        done = subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
                              capture_output=True, text=True, timeout=10)
        assert done.returncode == 0, done.stderr

    try:
        git("init", "-q")
    except (OSError, subprocess.SubprocessError):
        pytest.skip("no git")
    git("add", "calib/a.py")
    git("commit", "-q", "-m", "one file")
    monkeypatch.setattr(runs, "__file__", str(repo / "calib" / "runs.py"))
    assert runs.git_dirty() is False
    (repo / "calib" / "scratch.py").write_text("y = 2\n")
    assert runs.git_dirty() is False
    (repo / "calib" / "a.py").write_text("x = 2\n")
    assert runs.git_dirty() is True


def test_a_damaged_checkpoint_without_meta_json_advises_what_cannot_delete_another_run(tmp_path):
    """A folder with only a damaged checkpoint.pt: whose run it was cannot be read, so the advice is to restore it or
    choose another --out (restart_advice), not --restart, which would delete it."""
    from calib.runs import RunFolder

    out = tmp_path / "run"
    out.mkdir()
    (out / "checkpoint.pt").write_bytes(b"\x00damaged" * 20)
    folder = RunFolder(out, TrainConfig(**TINY, device="cpu").resolved().identity())
    with pytest.raises(CorruptRunError) as exc:
        folder.check(True, "cpu")
    message = str(exc.value)
    assert "checkpoint.pt is corrupted or truncated" in message
    assert message.endswith(f"{folder.restart_advice()[0].upper()}{folder.restart_advice()[1:]}.")
    assert "Restore it, or choose another --out" in message


def test_the_cpu_kernel_refusal_says_no_variable_set_for_a_run_begun_without_any(tmp_path, monkeypatch):
    from calib._reproducible import cpu_kernel_setting
    from calib.runs import RunFolder

    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "avx2")
    now = cpu_kernel_setting()
    folder = RunFolder(tmp_path / "run", TrainConfig(**TINY, device="cpu").resolved().identity())
    unset = {name: None for name in now["variables"]}
    with pytest.raises(RunConfigError, match=rf"begun with torch's CPU kernels on {now['capability']} \(no variable "
                                             r"set\), and this process runs"):
        folder.check_cpu_kernels({"device": "cpu", "cpu_capability": now["capability"], "cpu_kernels": unset}, "cpu")


def test_the_lock_file_is_created_readable_by_all_and_writable_by_its_owner(tmp_path):
    """.calib-train.lock is created with mode 0o644 (less the umask): others may read who holds it, not write."""
    umask = os.umask(0o022)
    try:
        with runs.RunLock(tmp_path):
            mode = (tmp_path / runs.RunLock.NAME).stat().st_mode & 0o777
    finally:
        os.umask(umask)
    assert mode == 0o644
