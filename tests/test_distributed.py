"""Training across processes (calib.distributed, calib.train with torchrun): 2 gloo ranks on the CPU give the
logits of one process, a killed 2-rank run resumes, rank 0's errors reach every rank, ranks given different
configurations are refused, and a run trains (resumes, reruns from its meta) only on its number of processes."""

import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from calib_book.timeouts import scaled  # a subprocess's time limit, scaled by the machine's load

from calib import distributed
from calib.train import RunConfigError, Trainer, TrainConfig, config_from_meta, load_run, train

ROOT = Path(__file__).resolve().parent.parent

#: An MLP (no batch normalisation, whose statistics are per rank on the CPU) on the tiny Fashion-MNIST stand-in.
TINY = dict(data="fashion-mnist", model="mlp", loss="fl-3", epochs=4, seed=3, batch_size=64, lr=0.3,
            train_subset=1536, val_subset=64, test_subset=256)
#: The largest |logit difference| of 2 gloo ranks against one process: measured 9.5e-7 on logits up to 5
#: (float32 gradients summed in another order); the bound leaves a factor of 10.
LOGIT_TOLERANCE = 1e-5


def _args(cfg, out, *extra):
    flags = []
    for name in ("data", "model", "loss", "epochs", "seed", "batch_size", "lr", "train_subset", "val_subset",
                 "test_subset"):
        flags += [f"--{name.replace('_', '-')}", str(cfg[name])]
    return ["train", *flags, "--out", str(out), "--no-progress", *extra]


def _torchrun(n=2):
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(n), "-m", "calib"]


def _env():
    return {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}


def test_local_rows_share_a_batch_in_contiguous_parts():
    parts = [distributed.local_rows(7, distributed.Launch(r, 3)) for r in range(3)]
    assert [(p.start, p.stop) for p in parts] == [(0, 3), (3, 5), (5, 7)]           # np.array_split sizes
    assert distributed.local_rows(64, distributed.Launch(1, 2)) == slice(32, 64)


def test_launch_reads_torchrun_variables_and_names_a_bad_one(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("LOCAL_RANK", "1")
    assert distributed.launch() == distributed.Launch(1, 2, 1)
    monkeypatch.setenv("RANK", "2")
    with pytest.raises(ValueError, match=r"RANK=2 must lie in \[0, WORLD_SIZE=2\)"):
        distributed.launch()
    monkeypatch.setenv("WORLD_SIZE", "two")
    with pytest.raises(ValueError, match="WORLD_SIZE='two' is not an integer"):
        distributed.launch()


def test_a_batch_that_leaves_a_rank_without_rows_is_refused(tiny_fashion, tmp_path, monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "0")
    trainer = Trainer(TrainConfig(**TINY), tmp_path / "r", progress=False)
    trainer._check_shares(1536)                                     # 24 full batches of 64
    trainer._check_shares(1538)                                     # a last batch of 2: one row each
    with pytest.raises(ValueError, match="a global batch of 1 rows .* cannot be shared by 2 processes"):
        trainer._check_shares(1537)


def test_two_gloo_ranks_give_the_logits_of_one_process(tiny_fashion, tmp_path, monkeypatch, capsys):
    """2 gloo ranks train the logits of one process. The 2-rank run is launched, as it is, by the torchrun line that
    `calib sweep --list --nproc-per-node 2` prints for a grid of that one run (issue 30, item 2); launched again,
    it finds the run finished, and with another learning rate rank 0's refusal reaches both ranks."""
    from calib import cli

    one = train(out=tmp_path / "one", progress=False, **TINY)
    grid = tmp_path / "grid.toml"
    train_table = {k: v for k, v in TINY.items() if k not in ("seed", "model", "loss")}   # JSON values read as TOML
    grid.write_text(f"seeds = [{TINY['seed']}]\nmodels = [{json.dumps(TINY['model'])}]\n"
                    f"losses = [{json.dumps(TINY['loss'])}]\n\n[train]\n"
                    + "".join(f"{k} = {json.dumps(v)}\n" for k, v in {**train_table, "device": "cpu"}.items()))
    monkeypatch.chdir(tmp_path)
    assert cli.main(["sweep", str(grid), "--list", "--nproc-per-node", "2"]) == 0
    (line,) = capsys.readouterr().out.strip().splitlines()
    argv = shlex.split(line)
    assert argv[:6] == ["torchrun", "--standalone", "--nproc_per_node", "2", "-m", "calib"]
    command = [sys.executable, "-m", "torch.distributed.run", *argv[1:]]
    proc = subprocess.run(command, env=_env(), cwd=str(tmp_path), capture_output=True, text=True, timeout=scaled(300))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.count("calib: run in") == 1                 # rank 0 reports, once
    out = tmp_path / TINY["model"] / TINY["loss"] / f"seed{TINY['seed']}"
    two = load_run(out)
    assert two.finished and two.meta["world_size"] == 2 and one.meta["world_size"] == 1
    assert two.meta["epochs_done"] == TINY["epochs"]
    assert not (out / ".calib-train.lock").exists()
    assert not (out / "checkpoint.pt").exists()                      # the grid's discard, applied by rank 0
    a, b = one.logits(), two.logits()
    for split in ("val", "test"):
        np.testing.assert_array_equal(a[f"{split}_labels"], b[f"{split}_labels"])
        diff = np.abs(a[f"{split}_logits"] - b[f"{split}_logits"]).max()
        assert 0 <= diff <= LOGIT_TOLERANCE, diff
        assert np.abs(a[f"{split}_logits"]).max() > 1                # the network has moved away from its start
    np.testing.assert_allclose(two.series("train_loss"), one.series("train_loss"), rtol=1e-5)
    # the same line again: rank 0 finds the run finished and no rank trains
    again = subprocess.run(command, env=_env(), cwd=str(tmp_path), capture_output=True, text=True, timeout=scaled(300))
    assert again.returncode == 0 and json.loads((out / "meta.json").read_text())["written"] == two.meta["written"]
    # another config there: rank 0's RunConfigError reaches both ranks, and the run is left alone
    lr = command.index("--lr") + 1
    other = subprocess.run([*command[:lr], "0.1", *command[lr + 1:]], env=_env(), cwd=str(tmp_path),
                           capture_output=True, text=True, timeout=scaled(300))
    assert other.returncode != 0
    assert other.stderr.count("holds a run of another configuration (lr: 0.3 there, 0.1 here)") == 2, \
        other.stderr[-3000:]


def test_a_killed_two_rank_run_resumes_and_finishes(tiny_fashion, tmp_path):
    """Killed (SIGKILL to the launcher and both ranks, each in a session of its own) after its first epoch's
    checkpoint and resumed with 2 ranks, the run ends with the logits of an uninterrupted 2-rank run, to the bit
    (gloo sums 2 numbers in one order)."""
    cfg = {**TINY, "epochs": 6, "train_subset": 5600, "model": "mlp-256-256"}
    whole = subprocess.run([*_torchrun(), *_args(cfg, tmp_path / "whole")], env=_env(), cwd=str(tmp_path),
                           capture_output=True, text=True, timeout=scaled(300))
    assert whole.returncode == 0, whole.stderr[-3000:]
    reference = load_run(tmp_path / "whole").logits()
    out = tmp_path / "killed"
    proc = subprocess.Popen([*_torchrun(), *_args(cfg, out)], env=_env(), cwd=str(tmp_path),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if len(json.loads((out / "history.json").read_text())["epochs"]) >= 1:
                break
        except (OSError, json.JSONDecodeError, KeyError):
            pass
        time.sleep(0.005)
    _kill_tree(proc.pid)                                            # the launcher and both ranks
    proc.wait()
    meta = json.loads((out / "meta.json").read_text())
    done = len(json.loads((out / "history.json").read_text())["epochs"])
    assert not meta["finished"] and 1 <= done < 6 and not (out / "logits.npz").exists(), \
        proc.stderr.read().decode()[-3000:]
    resumed = subprocess.run([*_torchrun(), *_args(cfg, out, "--resume")], env=_env(), cwd=str(tmp_path),
                             capture_output=True, text=True, timeout=scaled(300))
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    run = load_run(out)
    assert run.finished and [e["epoch"] for e in run.epochs] == list(range(1, 7))
    got = run.logits()
    for split in ("val", "test"):
        np.testing.assert_array_equal(got[f"{split}_logits"], reference[f"{split}_logits"])


def _descendants(pid: int) -> list[int]:
    """The processes below ``pid``, read from /proc (each one's parent is the 4th field of its stat line)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _kill_tree(pid: int) -> None:
    """SIGKILL a launcher and every process under it, and wait until all are gone. torchrun starts each rank in
    a session of its own, so killing the launcher's process group leaves the ranks running: on a quiet machine
    they finished the run between the kill and the test's reading of ``meta.json``."""
    victims = _descendants(pid)
    for target in [pid, *victims]:
        try:
            os.kill(target, signal.SIGKILL)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and any(Path(f"/proc/{v}").exists() and
                                              "Z" not in _state(v) for v in victims):
        time.sleep(0.01)


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "Z"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_ranks_given_different_configurations_are_refused_by_name(tiny_fashion, tmp_path):
    """Issue 45, item 3: two ranks of one launch given another --seed, --lr and --loss trained silently (meta.json
    showing rank 0's), another --epochs hung and another --batch-size aborted gloo. Both ranks now stop at once
    with one error naming each field and its value on each rank, and write nothing."""
    port, out = _free_port(), tmp_path / "run"
    flags = [{}, {"seed": 4, "lr": 0.1, "loss": "ce", "epochs": 5, "batch_size": 32}]
    procs = []
    for rank in (0, 1):
        env = {**_env(), "WORLD_SIZE": "2", "RANK": str(rank), "LOCAL_RANK": str(rank), "MASTER_ADDR": "127.0.0.1",
               "MASTER_PORT": str(port)}
        procs.append(subprocess.Popen([sys.executable, "-m", "calib", *_args({**TINY, **flags[rank]}, out)], env=env,
                                      cwd=str(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                      start_new_session=True))
    try:
        results = [proc.communicate(timeout=scaled(120)) for proc in procs]
    finally:
        for proc in procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
    expected = ("calib: error: the 2 processes of this launch were given different configurations (loss: 'fl-3' on "
                "rank 0, 'ce' on rank 1; epochs: 4 on rank 0, 5 on rank 1; seed: 3 on rank 0, 4 on rank 1; lr: 0.3 "
                "on rank 0, 0.1 on rank 1; milestones: (2, 3) on rank 0, (2, 4) on rank 1; batch_size: 64 on rank 0, "
                "32 on rank 1); every process must train the same run. Launch them with one command line: torchrun")
    for proc, (_, err) in zip(procs, results):
        assert proc.returncode == 1 and expected in err, err[-3000:]
    assert not out.exists()                                         # checked before rank 0 made the folder


def test_a_run_resumes_only_on_the_number_of_processes_it_began_with(tiny_fashion, tmp_path, monkeypatch):
    """Issue 45, item 3: a run begun by 2 ranks resumed in one process (and the reverse) without a word, and
    continued with other float sums. The world size is now part of the run's identity, as the instruction set is."""
    cfg = {**TINY, "epochs": 1, "diagnostics": "eval"}
    out = tmp_path / "run"
    train(out=out, progress=False, **cfg)
    meta = json.loads((out / "meta.json").read_text())
    (out / "meta.json").write_text(json.dumps({**meta, "finished": False, "world_size": 2}))   # as a killed 2-rank run
    before = (out / "meta.json").read_text()
    fix = (f"Launch it with 2 processes: torchrun --standalone --nproc_per_node 2 -m calib train --from-meta "
           f"{out / 'meta.json'} --out {out} --resume, or start it over with --restart.")
    with pytest.raises(RunConfigError, match=re.escape(f"{out} holds a run trained by 2 processes (torchrun "
                                                       f"--nproc_per_node 2), and this launch has one process")) as err:
        train(out=out, progress=False, resume=True, **cfg)
    assert str(err.value).endswith(fix)
    assert (out / "meta.json").read_text() == before               # nothing trained, nothing written
    (out / "meta.json").write_text(json.dumps({**meta, "finished": False}))                    # begun by one
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "0")
    with pytest.raises(RunConfigError, match=re.escape("a run trained by one process, and this launch has 2 processes "
                                                       "(torchrun --nproc_per_node 2)")):
        Trainer(TrainConfig(**cfg), out, progress=False).folder.check(resume=True, device_type="cpu")  # rank 0's
    monkeypatch.setenv("WORLD_SIZE", "1")
    assert Trainer(TrainConfig(**cfg), out, progress=False).folder.check(resume=True, device_type="cpu") == "resume"


def test_from_meta_of_a_two_process_run_asks_for_two_processes(tiny_fashion, tmp_path, capsys):
    """Issue 45, item 3: `calib train --from-meta` of a 2-rank run retrained it in one process (logits 13.6 apart
    after 30 epochs). It now names the number of processes and the torchrun line that reruns it."""
    from calib import cli
    from calib.runs import CorruptRunError

    meta = tmp_path / "stored" / "meta.json"
    meta.parent.mkdir()
    record = {"config": TrainConfig(**TINY).identity(), "world_size": 2, "finished": True}
    meta.write_text(json.dumps(record))
    out = tmp_path / "again"
    assert cli.main(["train", "--from-meta", str(meta), "--out", str(out), "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert (f"calib: error: {meta} records a run trained by 2 processes (torchrun --nproc_per_node 2), and this launch "
            f"has one process") in err
    assert err.strip().endswith(f"Launch it with 2 processes: torchrun --standalone --nproc_per_node 2 -m calib train "
                                f"--from-meta {meta} --out DIR.")
    assert not out.exists()
    assert config_from_meta(meta).seed == TINY["seed"]              # reading a stored run checks nothing
    assert config_from_meta(meta, world_size=2).lr == TINY["lr"]    # under torchrun --nproc_per_node 2
    meta.write_text(json.dumps({**record, "world_size": "2"}))
    with pytest.raises(CorruptRunError, match="records world_size='2', which is not a number of processes"):
        config_from_meta(meta, world_size=2)
