"""Issue 44: chapter 10's ResNet grid on one GPU, in the minutes of a device session, resumable across sessions.

``bash tests/benchmarks/gpu_grid.sh OUT`` (the wrapper sets the environment, then calls ``run``) does, in order:

1. **throughput**: the table of ``gpu_throughput.py`` (calib's loop against a plain DataLoader loop, fp32 and bf16,
   one run and k runs at once), which chooses k, the number of runs trained at once (processes on the one GPU);
2. **tune**: the cross-entropy runs of ``gpu/grid-gpu-tune.toml`` (longest first), then the choice of the recipe by
   the validation rule of :func:`apply_rule`;
3. **grid**: the runs of ``gpu/grid-gpu.toml`` under the chosen label, in :func:`grid_order` (CE, FL-3 and FLSD-53
   on seeds 0-2, the other losses on seeds 0-2, every loss on seeds 3 and 4).

k worker processes take the runs in order; a run is claimed through its folder's lock (``calib.runs.RunLock``, as
``calib sweep`` shares a grid), a finished run is skipped, and a run is started only when the time left before
the budget's end covers its estimated time (:func:`estimate_seconds`: measured runs of this session, else the
throughput table). Every finished run is packed into ``OUT/runs-<i>.tar.gz`` at once (meta.json, history.json,
logits.npz; at most 15 MiB an archive, 5 archives), so a session cut short returns what it finished. The end:
``OUT/summary.md`` and ``OUT/summary.json`` (throughput, choice, every run's status, wall time, validation
accuracy, NLL-fitted temperature, test ECE).

The session side (README, "The ResNet grid on a GPU"): ``prepare`` builds ``.gpu-carry/`` (Fashion-MNIST, the stored
runs a device session must skip, the commit) before the device call; ``import FOLDER`` puts the returned runs into
the store (``book/results/10-benchmark/resnet/``) after it, checked by ``check`` (:func:`check_run`: the provenance
of a stored GPU run, and that its logits reproduce the metrics its history recorded).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
TUNE_GRID = HERE / "gpu" / "grid-gpu-tune.toml"
MAIN_GRID = HERE / "gpu" / "grid-gpu.toml"
#: The store of the GPU runs: the grid's runs, and the tuning runs under tuning/.
STORE = ROOT / "book" / "results" / "10-benchmark" / "resnet"
CARRY = ROOT / ".gpu-carry"
#: The losses of the grid's first stage, trained on the first three seeds before any other.
PRIORITY = ("ce", "fl-3", "flsd-53")
#: The files of a stored run (never the checkpoint).
KEPT = ("meta.json", "history.json", "logits.npz")
#: An archive of OUT holds runs up to this size (the device returns files of at most 16 MiB, 8 files).
ARCHIVE_BYTES = 15 * 2 ** 20
MAX_ARCHIVES = 5
#: The dry run's changes to every config: a small net that learns the stand-in of tests/conftest.py in a second.
TINY = {"model": "resnet8-w4", "epochs": 3, "milestones": (2,), "train_subset": 256, "val_subset": 48,
        "test_subset": 48, "batch_size": 16, "lr": 0.05}
#: Estimates: an epoch with every diagnostic costs this much more than one with the evaluation's only (the train
#: split evaluated, 55,000 images forward and the last layer's gradients); the estimate is multiplied by SAFETY.
FULL_DIAGNOSTICS_COST = 1.5
SAFETY = 1.15
#: What an epoch costs beyond its training steps (validation and test evaluation, metrics, checkpoint).
EVAL_OVERHEAD = 1.3
_RUN_PATH = re.compile(r"(tuning/)?[a-z0-9][a-z0-9.+=,_-]*/[a-z0-9][a-z0-9.+=,_-]*/seed\d+")


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


# ------------------------------------------------------------------------------------------------ the plan

def plan_items(grid_path: Path, stage: str, store: Path | None, device: str | None, tiny: bool) -> list:
    """The runs of a grid file as plain dicts (what a worker needs): stage, name, model label, loss label, seed,
    config (TrainConfig fields), out, note, discard. ``store`` replaces the grid's store folder; ``device`` and
    ``tiny`` (:data:`TINY`) change every config."""
    from calib.experiments import load_grid, run_path

    grid = load_grid(grid_path)
    items = []
    for run in grid.runs:
        config = run.config
        if device is not None:
            config = dataclasses.replace(config, device=device)
        if tiny:
            config = dataclasses.replace(config, **TINY)
        config.resolved()
        fields = dataclasses.asdict(config)
        fields["milestones"] = list(fields["milestones"]) if fields["milestones"] is not None else None
        out = run_path(store, run.model, run.loss, run.seed) if store is not None else run.out
        items.append({"stage": stage, "name": f"{run.model}/{run.loss}/seed{run.seed}", "model": run.model,
                      "loss": run.loss, "seed": run.seed, "config": fields, "out": str(out),
                      "note": grid.note or None, "discard": list(grid.discard)})
    return items


def tuning_order(items: list) -> list:
    """The tuning runs, longest first (so that the k workers finish together), grid order among equals."""
    return sorted(items, key=lambda item: -item["config"]["epochs"])


def grid_order(items: list, chosen: str) -> list:
    """The grid's runs of the chosen model label in the order they are trained: :data:`PRIORITY` on the first three
    seeds, seed by seed (so that a session cut short leaves CE, FL-3 and FLSD-53 on the same seeds); the other losses
    on those seeds, loss by loss (each loss complete on three seeds before the next); then every loss on the later
    seeds, the priority losses first."""
    mine = [item for item in items if item["model"] == chosen]
    if not mine:
        raise ValueError(f"the grid has no model labelled {chosen!r}; its labels are "
                         f"{sorted({item['model'] for item in items})}.")
    seeds = sorted({item["seed"] for item in mine})
    first = set(seeds[:3])
    losses = list(dict.fromkeys(item["loss"] for item in mine))
    rank = {loss: (PRIORITY.index(loss) if loss in PRIORITY else len(PRIORITY) + losses.index(loss)) for loss in losses}
    stage1 = sorted((i for i in mine if i["loss"] in PRIORITY and i["seed"] in first),
                    key=lambda i: (i["seed"], rank[i["loss"]]))
    stage2 = sorted((i for i in mine if i["loss"] not in PRIORITY and i["seed"] in first),
                    key=lambda i: (rank[i["loss"]], i["seed"]))
    stage3 = sorted((i for i in mine if i["seed"] not in first), key=lambda i: (rank[i["loss"]], i["seed"]))
    return stage1 + stage2 + stage3


def finished(out) -> bool:
    """A finished run is stored at ``out`` (its meta.json says so; a carried meta.json alone is enough)."""
    meta = Path(out) / "meta.json"
    try:
        return meta.is_file() and bool(json.loads(meta.read_text()).get("finished"))
    except (OSError, ValueError):
        return False


# ------------------------------------------------------------------------------------------- the budget

def estimate_seconds(item: dict, trained: list, guess: dict) -> float:
    """The time run ``item`` will take, with :data:`SAFETY`: ``trained`` are the records of the runs this session
    trained (``epochs``, ``wall_time_s`` of their epochs, ``elapsed_s`` in all, ``diagnostics``), which give the cost
    of an epoch (those of the same diagnostics first) and of a run's set-up; without any, ``guess`` does
    (``epoch_s``: an epoch with the evaluation's diagnostics, ``overhead_s``: a run's set-up)."""
    import statistics

    config = item["config"]
    epochs, full = config["epochs"], config["diagnostics"] == "full"

    def per_epoch(record):
        cost = record["wall_time_s"] / record["epochs"]
        return cost / FULL_DIAGNOSTICS_COST if record["diagnostics"] == "full" else cost

    if trained:
        same = [r for r in trained if r["diagnostics"] == config["diagnostics"]]
        if same:
            epoch_s = statistics.median(r["wall_time_s"] / r["epochs"] for r in same)
        else:
            epoch_s = statistics.median(per_epoch(r) for r in trained) * (FULL_DIAGNOSTICS_COST if full else 1.0)
        overhead_s = statistics.median(max(0.0, r["elapsed_s"] - r["wall_time_s"]) for r in trained)
    else:
        epoch_s = guess["epoch_s"] * (FULL_DIAGNOSTICS_COST if full else 1.0)
        overhead_s = guess["overhead_s"]
    return SAFETY * (overhead_s + epochs * epoch_s)


def stored_epoch_seconds(root: Path, device: str) -> float | None:
    """The median seconds an epoch took in the finished runs stored under ``root`` (their meta.json: ``wall_time_s``
    over ``epochs_done``, evaluation diagnostics only) that trained on a device of ``device``'s kind (``cuda``,
    ``cpu``); None without any. They were measured with as many runs at once as their session's throughput table
    chose, so they overestimate a session that trains fewer at once."""
    import statistics

    kind = device.split(":")[0]
    costs = []
    for meta in sorted(Path(root).glob("**/meta.json")):
        try:
            record = json.loads(meta.read_text())
        except (OSError, ValueError):
            continue
        if (record.get("finished") and record.get("diagnostics") == "eval" and record.get("epochs_done")
                and str(record.get("device", "")).split(":")[0] == kind and record.get("wall_time_s")):
            costs.append(float(record["wall_time_s"]) / int(record["epochs_done"]))
    return statistics.median(costs) if costs else None


def first_guess(device: str, table: dict | None, k: int, n_train: int, stored_epoch_s: float | None = None) -> dict:
    """The cost of an epoch and a run's set-up before any run of this session has finished: the stored runs'
    measured epoch (:func:`stored_epoch_seconds`) where there are any, else the throughput table's images/s per run at
    ``k`` runs at once (bf16), else a conservative default (1.5 s an epoch on CUDA for one or two runs at once, more
    for more). The table alone guessed 846 s for a 60-epoch ResNet-20 at 8 runs at once on an H200, which took
    290-459 s (issue 44's tuning session): twice too slow, so that a session's default budget planned no grid run."""
    rate = None
    if table:
        rows = {(r["runs"], r["precision"]): r["per_run"] for r in table["rows"] if r["loop"] == "calib"}
        rate = rows.get((k, "bf16")) or rows.get((k, "fp32"))
    cuda = device.startswith("cuda")
    if stored_epoch_s is not None:
        epoch_s = stored_epoch_s
    else:
        epoch_s = EVAL_OVERHEAD * n_train / rate if rate else (1.5 * max(1.0, k / 2) if cuda else 5.0)
    return {"epoch_s": epoch_s, "overhead_s": 12.0 if cuda else 3.0}


# ------------------------------------------------------------------------------------------ the archives

def pack(run_dir: Path, rel: str, out: Path, work: Path) -> str | None:
    """Add a finished run to OUT's archives at once (under a lock: the workers pack in turn): the archive of the runs
    packed so far is rewritten to a temporary and renamed, so OUT holds whole archives only. The archive's name, or
    None when OUT is full (:data:`MAX_ARCHIVES` of :data:`ARCHIVE_BYTES`)."""
    import fcntl

    files = [run_dir / name for name in KEPT if (run_dir / name).is_file()]
    size = sum(f.stat().st_size for f in files)
    with open(work / "pack.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        manifest_path = work / "packed.json"
        manifest = json.loads(manifest_path.read_text()) if manifest_path.is_file() else []
        current = manifest[-1]["archive"] if manifest else 1
        if manifest and sum(m["bytes"] for m in manifest if m["archive"] == current) + size > ARCHIVE_BYTES:
            current += 1
        if current > MAX_ARCHIVES:
            return None
        manifest.append({"rel": rel, "archive": current, "bytes": size, "path": str(run_dir)})
        name = f"runs-{current}.tar.gz"
        tmp = out / f".{name}.tmp"
        with tarfile.open(tmp, "w:gz", compresslevel=1) as tar:
            for member in manifest:
                if member["archive"] == current:
                    for f in KEPT:
                        if (Path(member["path"]) / f).is_file():
                            tar.add(Path(member["path"]) / f, arcname=f"{member['rel']}/{f}")
        os.replace(tmp, out / name)
        manifest_path.write_text(json.dumps(manifest))
        return name


def _record(work: Path, record: dict) -> None:
    import fcntl

    with open(work / "events.jsonl", "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        fh.write(json.dumps(record) + "\n")


def _events(work: Path) -> list:
    path = work / "events.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.is_file() else []


# ---------------------------------------------------------------------------------------------- a worker

def work(plan: dict, worker: int) -> None:
    """Train the plan's runs in order, as one of k workers: skip the finished ones and those another worker holds,
    start a run only when the time left covers its estimate, pack each run into OUT once it has finished."""
    import torch

    from calib.data import load_dataset
    from calib.runs import RunLockedError
    from calib.train import Trainer, TrainConfig

    torch.set_num_threads(plan["threads"])
    work_dir, out, store = Path(plan["work"]), Path(plan["out"]), Path(plan["store_root"])
    datasets = {}
    for item in plan["runs"]:
        run_dir = Path(item["out"])
        if finished(run_dir):
            continue
        trained = [e for e in _events(work_dir) if e["status"] == "trained"]
        estimate = estimate_seconds(item, trained, plan["guess"])
        left = plan["deadline"] - time.time()
        if estimate > left:
            log(f"w{worker} {item['name']}: not started, it needs about {estimate:.0f} s and {max(0, left):.0f} s "
                f"are left")
            continue
        config = TrainConfig(**item["config"])
        if config.data not in datasets:
            datasets[config.data] = load_dataset(config.data)
        began = time.time()
        try:
            trainer = Trainer(config, run_dir, progress=False, dataset=datasets[config.data], note=item["note"])
            trainer.run(resume=True, discard=tuple(item["discard"]))
        except RunLockedError:
            continue                                   # another worker trains it
        except Exception as exc:  # noqa: BLE001 - one failed run must not stop the session
            _record(work_dir, {"name": item["name"], "out": item["out"], "status": "failed",
                               "error": f"{type(exc).__name__}: {exc}"})
            log(f"w{worker} {item['name']}: FAILED, {type(exc).__name__}: {exc}")
            continue
        if trainer.found == "done":
            continue
        elapsed = time.time() - began
        meta = json.loads((run_dir / "meta.json").read_text())
        archive = pack(run_dir, run_dir.relative_to(store).as_posix(), out, work_dir)
        _record(work_dir, {"name": item["name"], "out": item["out"], "stage": item["stage"], "status": "trained",
                           "worker": worker,
                           "epochs": config.epochs, "diagnostics": config.diagnostics,
                           "wall_time_s": meta["wall_time_s"], "elapsed_s": round(elapsed, 2), "archive": archive})
        log(f"w{worker} {item['name']}: trained in {elapsed:.0f} s ({meta['wall_time_s']:.0f} s of epochs, estimate "
            f"{estimate:.0f} s); " + (f"packed into {archive}" if archive else "OUT is full: kept on the device only"))


def execute(items: list, k: int, plan_base: dict, work_dir: Path, in_process: bool, hard_stop: float) -> None:
    """Train ``items`` with ``k`` workers (in this process when k is 1 and ``in_process``); stop the workers at
    ``hard_stop`` (SIGINT, then SIGKILL), which the budget keeps them from reaching."""
    pending = [item for item in items if not finished(item["out"])]
    if not pending:
        return
    k = max(1, min(k, len(pending)))
    plan = {**plan_base, "runs": items, "threads": plan_base.get("threads") or max(1, (os.cpu_count() or 1) // k)}
    if k == 1 and in_process:
        work(plan, 0)
        return
    plan_path = work_dir / f"plan-{items[0]['stage']}.json"
    plan_path.write_text(json.dumps(plan))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    procs = [subprocess.Popen([sys.executable, __file__, "worker", str(plan_path), str(i)], env=env) for i in range(k)]
    try:
        while any(p.poll() is None for p in procs):
            if time.time() > hard_stop:
                log(f"the hard stop passed: interrupting {sum(p.poll() is None for p in procs)} worker(s)")
                for p in procs:
                    if p.poll() is None:
                        p.send_signal(signal.SIGINT)
                try:
                    for p in procs:
                        p.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    pass
                break
            time.sleep(0.5)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()


# -------------------------------------------------------------------------------------------- the choice

def apply_rule(candidates: dict) -> dict:
    """The tuning rule (``gpu/grid-gpu-tune.toml``'s header) on validation numbers only. ``candidates`` maps a label
    to ``{"cost": epochs x images, "temperature": [...], "ece": [...], "overconfident": [...], "nll_rises": [...],
    "accuracy": [...]}`` (one entry a seed). Eligible: median temperature >= 1.5; in every seed ECE >= 3 % with
    confidence above accuracy, and the NLL rising after the first drop; median accuracy within 3 points of the best
    candidate's. The cheapest eligible candidate is chosen; with none eligible, the one meeting the most criteria
    (then the highest median temperature), and ``regime_reached`` is False."""
    import numpy as np

    if not candidates:
        raise ValueError("apply_rule needs at least one candidate.")
    best_accuracy = max(float(np.nan_to_num(np.median(c["accuracy"]), nan=-1.0)) for c in candidates.values())
    table = {}
    for label, c in candidates.items():
        t = float(np.median(c["temperature"]))
        criteria = {"T >= 1.5": t >= 1.5,
                    "ECE >= 3 %, over-confident": all(e >= 0.03 and o for e, o in zip(c["ece"], c["overconfident"])),
                    "NLL rises": all(c["nll_rises"]),
                    "accuracy within 3 points": float(np.median(c["accuracy"])) >= best_accuracy - 0.03}
        table[label] = {**c, "median_temperature": t, "criteria": criteria, "eligible": all(criteria.values())}
    eligible = [label for label in table if table[label]["eligible"]]
    if eligible:
        chosen = min(eligible, key=lambda label: table[label]["cost"])
    else:
        chosen = max(table, key=lambda label: (sum(table[label]["criteria"].values()),
                                               float(np.nan_to_num(table[label]["median_temperature"], nan=-1.0))))
    return {"chosen": chosen, "regime_reached": bool(eligible), "candidates": table}


def choose_recipe(items: list) -> dict | None:
    """:func:`apply_rule` on the finished tuning runs of ``items`` (their validation logits and history only);
    None while a tuning run is unfinished (``missing`` says which)."""
    from calib.experiments import overconfidence_profile

    labels = list(dict.fromkeys(item["model"] for item in items))
    missing = [item["name"] for item in items if not finished(item["out"])]
    if missing:
        return {"chosen": None, "missing": missing}
    nan = float("nan")
    candidates = {}
    for label in labels:
        runs = [item for item in items if item["model"] == label]
        meta = json.loads((Path(runs[0]["out"]) / "meta.json").read_text())
        epochs = runs[0]["config"]["epochs"]
        entry = {"cost": epochs * meta["dataset"]["n_train"], "epochs": epochs,
                 "temperature": [], "ece": [], "overconfident": [], "nll_rises": [], "nll_rise": [], "accuracy": [],
                 "errors": []}
        for item in runs:
            try:
                p = overconfidence_profile(item["out"], split="val")
            except ValueError as exc:      # e.g. logits that carry no information: no temperature to fit
                entry["errors"].append(f"{item['name']}: {exc}")
                values = (nan, nan, False, False, nan, nan)
            else:
                values = (p.temperature, p.ece, p.overconfident, p.nll_rises, p.nll_final / p.nll_min_after_drop - 1,
                          p.accuracy)
            for key, value in zip(("temperature", "ece", "overconfident", "nll_rises", "nll_rise", "accuracy"), values):
                entry[key].append(value)
        candidates[label] = entry
    return apply_rule(candidates)


# ------------------------------------------------------------------------------------------- the summary

def run_summary(item: dict) -> dict:
    """Validation accuracy, ECE and NLL-fitted temperature of a finished run and, for a grid run, its test accuracy
    and ECE (the history's last epoch, which its logits reproduce) and whether its test NLL rose after the drop."""
    from calib.experiments import overconfidence_profile
    from calib.runs import load_run

    run = load_run(item["out"])
    last = run.epochs[-1]
    row = {"name": item["name"], "stage": item["stage"], "epochs": run.config["epochs"],
           "wall_time_s": run.meta["wall_time_s"], "val_accuracy": last["val"]["accuracy"],
           "val_ece": last["val"]["ece"], "temperature": None}
    if item["stage"] == "grid":
        row.update(test_accuracy=last["test"]["accuracy"], test_ece=last["test"]["ece"], test_nll_rises=None)
    try:
        row["temperature"] = overconfidence_profile(item["out"], split="val").temperature
        if item["stage"] == "grid":
            row["test_nll_rises"] = overconfidence_profile(item["out"], split="test").nll_rises
    except ValueError as exc:          # e.g. logits that carry no information: no temperature to fit
        row["error"] = str(exc)
    return row


def markdown_summary(summary: dict) -> str:
    lines = [f"# GPU session: {summary['device_name']}, torch {summary['torch']}, CUDA {summary['cuda']}",
             "", f"budget {summary['budget_s']:.0f} s, used {summary['used_s']:.0f} s; {summary['k']} run(s) at once; "
             f"{len(summary['trained'])} run(s) trained, {summary['stored_before']} stored before, "
             f"{len(summary['not_finished'])} not finished, {len(summary['failed'])} failed", ""]
    if summary.get("throughput_md"):
        lines += [summary["throughput_md"], ""]
    choice = summary.get("choice")
    if choice and choice.get("chosen"):
        lines += ["## Tuning (validation split only)", "",
                  "| candidate | epochs | T (NLL) | val. ECE (%) | val. acc. (%) | NLL rise after the drop (%) "
                  "| criteria |",
                  "|---|---|---|---|---|---|---|"]
        for label, c in choice["candidates"].items():
            met = sum(c["criteria"].values())
            lines.append(f"| {'**' + label + '** (chosen)' if label == choice['chosen'] else label} | {c['epochs']} | "
                         + ", ".join(f"{t:.2f}" for t in c["temperature"]) + " | "
                         + ", ".join(f"{100 * e:.1f}" for e in c["ece"]) + " | "
                         + ", ".join(f"{100 * a:.1f}" for a in c["accuracy"]) + " | "
                         + ", ".join(f"{100 * r:+.0f}" for r in c["nll_rise"]) + f" | {met} of 4 |")
        short = "" if choice["regime_reached"] else " (NO candidate meets every criterion: short of the regime)"
        lines += ["", f"chosen: {choice['chosen']}{short}", ""]
    elif choice:
        lines += [f"tuning unfinished ({len(choice.get('missing', []))} run(s) missing): no grid run started", ""]
    if summary["trained"]:
        lines += ["## Runs trained in this session", "",
                  "| run | stage | epochs | wall (s) | val. acc. (%) | T (NLL, val.) | test ECE (%) | test NLL rises |",
                  "|---|---|---|---|---|---|---|---|"]
        for r in summary["trained"]:
            test_ece = f"{100 * r['test_ece']:.2f}" if "test_ece" in r else "(tuning: no test set)"
            temperature = "none fitted" if r["temperature"] is None else f"{r['temperature']:.2f}"
            lines.append(f"| {r['name']} | {r['stage']} | {r['epochs']} | {r['wall_time_s']:.0f} | "
                         f"{100 * r['val_accuracy']:.2f} | {temperature} | {test_ece} | "
                         f"{r.get('test_nll_rises', '')} |")
        ce = [r for r in summary["trained"] if r["stage"] == "grid" and r["name"].split("/")[1] == "ce"]
        fitted = sorted(r["temperature"] for r in ce if r["temperature"] is not None)
        if ce:
            lines += ["", f"T_CE (median over {len(fitted)} seed(s) of this session): "
                      f"{fitted[len(fitted) // 2] if fitted else float('nan'):.2f}; test ECE >= 3 % in "
                      f"{sum(r['test_ece'] >= 0.03 for r in ce)}, test NLL rising in "
                      f"{sum(bool(r['test_nll_rises']) for r in ce)} of {len(ce)}"]
    if summary["not_finished"]:
        lines += ["", f"Not finished (budget; the next session trains them): {', '.join(summary['not_finished'])}"]
    if summary["failed"]:
        lines += ["", "Failed: " + "; ".join(f"{f['name']} ({f['error']})" for f in summary["failed"])]
    lines += ["", "Archives: " + (", ".join(f"{a} ({n} runs)" for a, n in summary["archives"].items()) or "none")]
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------------------------ run

def restore_carried(carried: Path, store: Path) -> int:
    """Copy the runs a session carried (``prepare``: a finished grid run's meta.json, a tuning run's files) into the
    store where no run is; the number copied."""
    count = 0
    for meta in sorted(carried.rglob("meta.json")):
        rel = meta.parent.relative_to(carried)
        target = store / rel
        if _RUN_PATH.fullmatch(rel.as_posix()) and not (target / "meta.json").exists():
            target.mkdir(parents=True, exist_ok=True)
            for f in KEPT:
                if (meta.parent / f).is_file():
                    shutil.copy2(meta.parent / f, target / f)
            count += 1
    return count


def run(args) -> int:
    import numpy
    import torch

    began = time.time()
    deadline = began + args.budget_s
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    work_dir = Path(tempfile.mkdtemp(prefix="gpu-grid-"))
    cuda = args.device.startswith("cuda")
    store = Path(args.store) if args.store else STORE
    stages = [s for s in args.stages.split(",") if s]
    device_name = torch.cuda.get_device_name(0) if cuda else "cpu"
    log(f"{device_name}, torch {torch.__version__}, CUDA {torch.version.cuda}, numpy {numpy.__version__}; "
        f"budget {args.budget_s:.0f} s; store {store}; stages {', '.join(stages)}")
    carried = Path(args.carried) if args.carried else (CARRY / "stored" if not args.store else None)
    if carried is not None and carried.is_dir():
        log(f"{restore_carried(carried, store)} stored run(s) carried in from {carried}")
    summary = {"device": args.device, "device_name": device_name, "torch": torch.__version__,
               "cuda": torch.version.cuda, "budget_s": args.budget_s, "started": time.strftime("%Y-%m-%d %H:%M:%S"),
               "git_commit": os.environ.get("CALIB_GIT_COMMIT"), "tiny": args.tiny}

    table = None
    if "throughput" in stages:
        need = 75.0 if cuda else 10.0
        if deadline - time.time() < need:
            log(f"throughput: skipped, it needs about {need:.0f} s")
        else:
            command = [sys.executable, str(HERE / "gpu_throughput.py"), "--device", args.device,
                       "--out", str(work_dir / "throughput.json")] + (["--tiny"] if args.tiny else [])
            if args.bench_ks:
                command += ["--ks", args.bench_ks]
            try:
                subprocess.run(command, check=True, timeout=max(10.0, deadline - time.time()))
                table = json.loads((work_dir / "throughput.json").read_text())
            except (subprocess.SubprocessError, OSError, ValueError) as exc:
                log(f"throughput: FAILED ({exc}); going on with {args.workers} run(s) at once")
    earlier = Path(args.throughput) if args.throughput else (CARRY / "throughput.json" if not args.store else None)
    if table is None and earlier is not None and earlier.is_file():
        table = {**json.loads(earlier.read_text()), "carried": str(earlier)}
        log(f"throughput: the table of an earlier session ({earlier}), k = {table['k']}")
    if table:
        from gpu_throughput import markdown  # noqa: E402 - beside this file
        summary["throughput"], summary["throughput_md"] = table, markdown(table)
    k = int(args.workers) if args.workers != "auto" else (table["k"] if table else (4 if cuda else 1))
    summary["k"] = k
    tune = tuning_order(plan_items(TUNE_GRID, "tune", store / "tuning" if args.store else None, args.device, args.tiny))
    grid = plan_items(MAIN_GRID, "grid", store if args.store else None, args.device, args.tiny)
    if args.tiny:                                    # the dry run: the first seed's tuning, a few grid runs
        tune = [item for item in tune if item["seed"] == min(i["seed"] for i in tune)]
    stored_root = Path(grid[0]["out"]).parents[2]
    n_train = int(tune[0]["config"]["train_subset"] or 55000)
    measured = stored_epoch_seconds(stored_root, args.device)
    guess = first_guess(args.device, table, k, n_train, measured)
    log(f"first guess: {guess['epoch_s']:.2f} s an epoch, from "
        + ("the stored runs' measured epochs" if measured is not None else "the throughput table or the default"))
    plan_base = {"deadline": deadline, "work": str(work_dir), "out": str(out), "store_root": str(stored_root),
                 "guess": guess, "threads": 1 if args.tiny else None}
    hard_stop = deadline + args.grace_s
    everything, stored_before = [], 0
    try:
        if "tune" in stages or "grid" in stages:
            stored_before += sum(finished(item["out"]) for item in tune)
            everything += tune
            if "tune" in stages:
                execute(tune, k, plan_base, work_dir, args.workers_in_process, hard_stop)
            choice = choose_recipe(tune)
            summary["choice"] = choice
            if choice["chosen"]:
                log(f"tuning: {choice['chosen']} chosen" + ("" if choice["regime_reached"] else
                                                           " (no candidate meets every criterion)"))
            else:
                log(f"tuning: {len(choice['missing'])} run(s) unfinished, no choice, no grid run")
            if "grid" in stages and choice["chosen"]:
                ordered = grid_order(grid, choice["chosen"])
                max_runs = args.max_runs or (3 if args.tiny else None)
                if max_runs:
                    ordered = ordered[:max_runs]
                stored_before += sum(finished(item["out"]) for item in ordered)
                everything += ordered
                execute(ordered, k, plan_base, work_dir, args.workers_in_process, hard_stop)
    except KeyboardInterrupt:
        log("interrupted: writing the summary of what finished")
    events = _events(work_dir)
    elapsed = {e["out"]: e["elapsed_s"] for e in events if e["status"] == "trained"}
    summary["trained"] = [{**run_summary(item), "elapsed_s": elapsed[item["out"]]} for item in everything
                          if item["out"] in elapsed]
    summary["failed"] = [e for e in events if e["status"] == "failed"]
    failed = {e["out"] for e in summary["failed"]}
    summary["not_finished"] = [item["name"] for item in everything
                               if not finished(item["out"]) and item["out"] not in failed]
    summary["stored_before"] = stored_before
    manifest = json.loads((work_dir / "packed.json").read_text()) if (work_dir / "packed.json").is_file() else []
    summary["archives"] = {f"runs-{a}.tar.gz": sum(m["archive"] == a for m in manifest)
                           for a in sorted({m["archive"] for m in manifest})}
    summary["used_s"] = time.time() - began
    (out / "summary.json").write_text(json.dumps(summary, indent=1, default=str))
    text = markdown_summary(summary)
    (out / "summary.md").write_text(text)
    print(text, flush=True)
    shutil.rmtree(work_dir, ignore_errors=True)
    return 0


# ------------------------------------------------------------------------------------- the session side

def stored_runs(store: Path = STORE) -> list:
    """The run folders of a store of GPU runs: the grid's (``<model>/<loss>/seed<k>``) and the tuning's."""
    store = Path(store)
    found = sorted(store.glob("*/*/seed*/meta.json")) + sorted(store.glob("tuning/*/*/seed*/meta.json"))
    return [meta.parent for meta in found if _RUN_PATH.fullmatch(meta.parent.relative_to(store).as_posix())]


def collect_carried(store: Path, dest: Path) -> int:
    """What a device session must find stored: each finished grid run's meta.json (it is skipped, nothing more is
    read of it there) and each tuning run's files (the choice reads its validation logits and history)."""
    count = 0
    for run_dir in stored_runs(store):
        if not finished(run_dir):
            continue
        rel = run_dir.relative_to(store)
        target = dest / rel
        target.mkdir(parents=True, exist_ok=True)
        for f in (KEPT if rel.parts[0] == "tuning" else ("meta.json",)):
            if (run_dir / f).is_file():
                shutil.copy2(run_dir / f, target / f)
        count += 1
    return count


def _travelling_bytes() -> tuple[int, int]:
    """(bytes of the tracked and untracked-not-ignored files outside book/results/, bytes under book/results/)."""
    listed = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            capture_output=True, check=True).stdout.split(b"\0")
    rest = results = 0
    for name in filter(None, listed):
        path = ROOT / os.fsdecode(name)
        if path.is_file():
            size = path.stat().st_size
            if os.fsdecode(name).startswith("book/results/"):
                results += size
            else:
                rest += size
    return rest, results


def prepare(args) -> int:
    """Build .gpu-carry/ and say what will travel."""
    from calib.dataset_files import DEBIAN_FASHION_MNIST, data_home

    carry = Path(args.carry)
    (carry / "fashion-mnist").mkdir(parents=True, exist_ok=True)
    names = ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz", "t10k-images-idx3-ubyte.gz",
             "t10k-labels-idx1-ubyte.gz")
    for folder in [Path(args.data)] if args.data else [data_home() / "fashion-mnist", Path(DEBIAN_FASHION_MNIST)]:
        if all((folder / n).is_file() for n in names):
            for n in names:
                if not (carry / "fashion-mnist" / n).is_file() or (carry / "fashion-mnist" / n).stat().st_size != \
                        (folder / n).stat().st_size:
                    shutil.copy2(folder / n, carry / "fashion-mnist" / n)
            break
    else:
        print("Fashion-MNIST's four .gz files were found nowhere (give --data FOLDER).", file=sys.stderr)
        return 1
    shutil.rmtree(carry / "stored", ignore_errors=True)
    n = collect_carried(Path(args.store), carry / "stored") if Path(args.store).is_dir() else 0
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    status = ["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no", "--", "calib"]
    dirty = bool(subprocess.run(status, capture_output=True, text=True).stdout.strip())
    (carry / "provenance.json").write_text(json.dumps({"git_commit": head, "git_dirty": dirty}))
    sessions = Path(args.store) / "sessions.jsonl"
    tables = [json.loads(line).get("throughput") for line in sessions.read_text().splitlines() if line.strip()] \
        if sessions.is_file() else []
    (carry / "throughput.json").unlink(missing_ok=True)
    if any(tables):
        (carry / "throughput.json").write_text(json.dumps([t for t in tables if t][-1]))
    carried = sum(f.stat().st_size for f in carry.rglob("*") if f.is_file())
    rest, results = _travelling_bytes()
    limit = 64 * 2 ** 20
    print(f".gpu-carry/: {carried / 2 ** 20:.1f} MiB (Fashion-MNIST, {n} stored run(s) to skip, commit {head[:12]}"
          f"{' with uncommitted changes under calib/' if dirty else ''})")
    print(f"the working tree without book/results/: {rest / 2 ** 20:.1f} MiB; book/results/: "
          f"{results / 2 ** 20:.1f} MiB")
    total = rest + carried
    print(f"travels without book/results/: {total / 2 ** 20:.1f} MiB of 64 MiB "
          f"({'fits' if total <= limit else 'TOO LARGE'}); with it: {(total + results) / 2 ** 20:.1f} MiB")
    print("next: move book/results/ out of the checkout for the call (README), e.g.\n"
          "  mv book/results ../calib-results-aside\n"
          "  run(command='bash tests/benchmarks/gpu_grid.sh $OUT', carry=['.gpu-carry'], timeout_s=600)\n"
          "  mv ../calib-results-aside book/results\n"
          "  python tests/benchmarks/gpu_grid.py import FILES_AT")
    return 0 if total <= limit else 1


def refresh_evaluation(store: Path) -> int:
    """Fit every post-hoc map on each grid run of ``store`` that ``<store>/posthoc.json`` lacks (or holds for other
    logits) and rewrite it (:func:`calib.experiments.evaluate_store`, about 6 s a run on 2 CPU cores): chapter 10 reads
    that file and would otherwise refit the new runs at every build. The tuning runs (``tuning/``, validation logits
    only) are not part of it. Returns the number of runs the file describes."""
    from calib.experiments import evaluate_store, load_store

    runs = load_store(store)                        # <model>/<loss>/seed<k>: tuning/<label>/... is deeper
    evaluate_store(runs, cache=store / "posthoc.json", progress=True)
    print(f"{store / 'posthoc.json'}: the post-hoc maps of {len(runs)} stored run(s)")
    return len(runs)


def import_runs(args) -> int:
    """Put the runs of a device session's archives into the store (a run already stored is left as it is, one of
    another configuration refused), copy its grid files beside them, append the session's summary to the store's
    sessions.jsonl, check every imported run (:func:`check_run`) and bring the store's post-hoc evaluation up to date
    (:func:`refresh_evaluation`). Each run's logits are stored as float16
    (:func:`calib.runs.compact_logits`: half the file; :func:`check_run`'s tolerance covers the rounding)."""
    from calib.runs import compact_logits

    folder, store = Path(args.folder), Path(args.store)
    archives = sorted(folder.glob("runs-*.tar.gz"))
    imported, skipped, problems = [], [], {}
    with tempfile.TemporaryDirectory(prefix="gpu-import-") as tmp:
        for archive in archives:
            with tarfile.open(archive) as tar:
                for member in tar.getmembers():
                    parent, _, name = member.name.rpartition("/")
                    if not (member.isfile() and name in KEPT and _RUN_PATH.fullmatch(parent)):
                        raise ValueError(f"{archive}: member {member.name!r} is not a run's file "
                                         f"(<model>/<loss>/seed<k>/{{{','.join(KEPT)}}}); refusing the archive.")
                tar.extractall(tmp, filter="data")
        for run_dir in stored_runs(Path(tmp)):
            rel = run_dir.relative_to(tmp)
            target = store / rel
            if (target / "meta.json").is_file():
                here = json.loads((target / "meta.json").read_text()).get("config")
                there = json.loads((run_dir / "meta.json").read_text()).get("config")
                if here != there:
                    raise ValueError(f"{target} holds a run of another configuration than the one returned; "
                                     f"move it away first.")
                if finished(target):
                    skipped.append(rel.as_posix())
                    continue
            target.mkdir(parents=True, exist_ok=True)
            for f in KEPT:
                if (run_dir / f).is_file():
                    shutil.copy2(run_dir / f, target / f)
            if (target / "logits.npz").is_file():
                compact_logits(target / "logits.npz")     # float16: the store's 100 MB (README, the ResNet grid)
            imported.append(rel.as_posix())
            problems[rel.as_posix()] = check_run(target)
    for grid, store_line in ((MAIN_GRID, 'store = "."'), (TUNE_GRID, 'store = "tuning"')):
        text = re.sub(r'^store = ".*"$', store_line, grid.read_text(), count=1, flags=re.M)
        (store / grid.name).write_text(text)
    if (folder / "summary.json").is_file():
        with open(store / "sessions.jsonl", "a") as fh:
            fh.write(json.dumps(json.loads((folder / "summary.json").read_text())) + "\n")
    print(f"{len(imported)} run(s) imported into {store}, {len(skipped)} already stored")
    if imported:
        refresh_evaluation(store)
    bad = {k: v for k, v in problems.items() if v}
    for rel, found in bad.items():
        print(f"  {rel}: " + "; ".join(found))
    return 1 if bad else 0


# --------------------------------------------------------------------------------------------- provenance

def check_run(path) -> list:
    """What is wrong with a stored GPU run (an empty list: nothing): it finished on a CUDA device whose name, torch
    and CUDA versions, wall time, commit and the note that its schedule is compressed its meta.json records; it keeps
    no checkpoint; its history has its epochs; and its logits reproduce the accuracy, NLL, ECE and AdaECE its
    history recorded for the last epoch, on both splits (to 1e-3: the last epoch's evaluation and the stored logits
    are two evaluations of the same network, and the stored ones are rounded to float16 by :func:`import_runs`)."""
    from calib.runs import read_logits
    from calib.train import split_statistics

    path = Path(path)
    try:
        meta = json.loads((path / "meta.json").read_text())
        history = json.loads((path / "history.json").read_text())
    except (OSError, ValueError) as exc:
        return [f"meta.json or history.json unreadable ({type(exc).__name__})"]
    problems = []
    config, versions = meta.get("config") or {}, meta.get("versions") or {}
    if not meta.get("finished"):
        problems.append("not finished")
    if not str(meta.get("device", "")).startswith("cuda"):
        problems.append(f"device {meta.get('device')!r} is not a CUDA device")
    if not meta.get("device_name") or str(meta.get("device_name")).startswith("CPU"):
        problems.append(f"device_name {meta.get('device_name')!r} names no GPU")
    for key in ("torch", "cuda"):
        if not versions.get(key):
            problems.append(f"versions.{key} missing")
    if not isinstance(meta.get("wall_time_s"), (int, float)) or not meta["wall_time_s"] > 0:
        problems.append(f"wall_time_s {meta.get('wall_time_s')!r} is not a time")
    if "compressed" not in str(meta.get("note", "")):
        problems.append("no note that the schedule is compressed")
    if not isinstance(meta.get("git_commit"), str) or not meta["git_commit"]:
        problems.append("no git_commit")
    if config.get("data") != "fashion-mnist-32":
        problems.append(f"data {config.get('data')!r} is not the recipe's fashion-mnist-32")
    if (path / "checkpoint.pt").exists():
        problems.append("checkpoint.pt is stored (no checkpoint goes into git)")
    epochs = history.get("epochs") or []
    if not epochs or len(epochs) != config.get("epochs") or meta.get("epochs_done") != config.get("epochs"):
        problems.append(f"{len(epochs)} epochs in history.json, epochs_done {meta.get('epochs_done')}, config "
                        f"{config.get('epochs')}")
    if not (path / "logits.npz").is_file():
        return problems + ["no logits.npz"]
    try:
        arrays = read_logits(path / "logits.npz")
    except ValueError as exc:
        return problems + [str(exc)]
    for split in ("val", "test"):
        z, y = arrays[f"{split}_logits"], arrays[f"{split}_labels"]
        expected = (meta.get("dataset") or {}).get(f"n_{split}")
        if len(y) != expected:
            problems.append(f"{split}: {len(y)} logits, meta.json says {expected}")
        if not epochs:
            continue
        recorded, now = epochs[-1].get(split) or {}, split_statistics(z, y)
        for key in ("accuracy", "nll", "ece", "adaece"):
            a, b = recorded.get(key), now[key]
            if a is None or abs(a - b) > 1e-3 * max(1.0, abs(b)):
                problems.append(f"{split} {key}: history {a}, its logits give {b:.6g}")
    return problems


def check(args) -> int:
    runs = stored_runs(Path(args.store))
    bad = {str(r): check_run(r) for r in runs}
    bad = {k: v for k, v in bad.items() if v}
    for name, found in bad.items():
        print(f"{name}: " + "; ".join(found))
    print(f"{len(runs)} stored GPU run(s) checked, {len(bad)} with problems")
    return 1 if bad else 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="throughput, tuning and grid on this machine's device, into OUT")
    r.add_argument("out")
    r.add_argument("--device", default="cuda")
    r.add_argument("--tiny", action="store_true", help="the CPU dry run: a small net on a few images (TINY)")
    r.add_argument("--budget-s", type=float, default=520.0, help="start no run that would end after this (s)")
    r.add_argument("--grace-s", type=float, default=40.0, help="after the budget, interrupt the workers (s)")
    r.add_argument("--workers", default="auto", help="runs at once: a number, or auto (the throughput's choice)")
    r.add_argument("--stages", default="throughput,tune,grid")
    r.add_argument("--store", help="the store folder (default: book/results/10-benchmark/resnet, tuning/ in it)")
    r.add_argument("--carried", default=None, help="stored runs carried in (prepare; default: .gpu-carry/stored "
                   "when the store is the default one)")
    r.add_argument("--max-runs", type=int, default=None, help="the grid's first N runs only (--tiny: 3)")
    r.add_argument("--bench-ks", default=None, help="runs at once measured by the throughput table (e.g. 2,4,8)")
    r.add_argument("--workers-in-process", action="store_true", help="one worker: train in this process")
    r.add_argument("--throughput", help="an earlier session's table (JSON) when this one measures none (default: "
                   ".gpu-carry/throughput.json, which prepare writes, when the store is the default one)")
    w = sub.add_parser("worker", help=argparse.SUPPRESS)
    w.add_argument("plan")
    w.add_argument("index", type=int)
    p = sub.add_parser("prepare", help="session side: build .gpu-carry/ before the device call")
    p.add_argument("--carry", default=str(CARRY))
    p.add_argument("--store", default=str(STORE))
    p.add_argument("--data", help="the folder of Fashion-MNIST's .gz files (default: calib's cache or Debian's)")
    i = sub.add_parser("import", help="session side: put the returned runs into the store, checked")
    i.add_argument("folder")
    i.add_argument("--store", default=str(STORE))
    c = sub.add_parser("check", help="the provenance check of every stored GPU run")
    c.add_argument("--store", default=str(STORE))
    args = parser.parse_args(argv)
    if args.command == "worker":
        work(json.loads(Path(args.plan).read_text()), args.index)
        return 0
    return {"run": run, "prepare": prepare, "import": import_runs, "check": check}[args.command](args)


if __name__ == "__main__":
    sys.path.insert(0, str(HERE))
    sys.exit(main())
