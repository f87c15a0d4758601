"""Training images per second of the ResNet grid's step on one device (issue 44), in the same session:

- **calib's loop**: the whole training split as one uint8 tensor on the device, the random crop and flip done there
  per batch (``calib.data.TensorLoader``), the step of ``calib.train.Trainer._train_epoch`` (autocast to bf16 or
  not, channels-last on CUDA, the loss on float32 logits, SGD with momentum 0.9 and weight decay 5e-4);
- **a plain PyTorch loop** as a user would write it: the images on the host, a per-sample transform (crop with 4
  pixels of zero padding, flip, scale, normalise) in a ``torch.utils.data.Dataset``, a ``DataLoader`` with worker
  processes and pinned memory, the batch copied to the device, float32, the default memory format;

in float32 and bf16, one run alone and k runs at once (k processes on the one device, each its own run, as
``gpu_grid.py`` trains the grid). Every measurement is a window of fixed length in which each active process
steps as fast as it can after a warm-up (cuDNN autotuning, the loader's workers); the processes of a window
start together (a file barrier). ``images/s`` sums the active processes' rates.

    python tests/benchmarks/gpu_throughput.py --out throughput.json                  # on the GPU (~30-40 s)
    python tests/benchmarks/gpu_throughput.py --device cpu --tiny --out t.json     # the CPU dry run (seconds)

Prints a markdown table and writes it, with the choice of k (the number of runs at once whose summed rate is
highest, a larger k only when it gains 10 %) and whether bf16 helps, as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: A larger number of runs at once is chosen only when it raises the summed images/s by this fraction.
K_GAIN = 0.10


def _steppers(plan: dict):
    """The step functions this process measures, by (loop, amp): each returns the images it trained on."""
    import numpy as np
    import torch

    from calib.data import TensorLoader, load_dataset
    from calib.losses import get_loss
    from calib.models import build_model

    device = torch.device(plan["device"])
    ds = load_dataset(plan["data"]).subset(plan["train_subset"])
    loss_fn = get_loss("ce")
    cuda = device.type == "cuda"

    def optimiser(model):
        return torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4)

    def calib_loop(amp: bool):
        model = build_model(plan["model"], ds.input_shape, ds.n_classes, seed=0).to(device)
        if cuda:
            model = model.to(memory_format=torch.channels_last)
        model.train()
        opt = optimiser(model)
        loader = TensorLoader(ds.x_train, ds.y_train, plan["batch_size"], mean=ds.mean, std=ds.std, device=device,
                              augment=True, pad=4, flip=True, channels_last=cuda)
        state = {"batches": iter(()), "epoch": 0}
        total = torch.zeros((), dtype=torch.float64, device=device)

        def step() -> int:
            try:
                xb, yb = next(state["batches"])
            except StopIteration:
                state["epoch"] += 1
                state["batches"] = loader.epoch(torch.Generator().manual_seed(state["epoch"]))
                xb, yb = next(state["batches"])
            opt.zero_grad(set_to_none=True)
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=amp):
                logits = model(xb)
            value = loss_fn(logits.float(), yb)
            value.backward()
            opt.step()
            total.add_(value.detach().double() * yb.shape[0])
            return int(yb.shape[0])

        return step

    class PlainDataset(torch.utils.data.Dataset):
        """What a user writes: uint8 images on the host, a per-sample random crop (4 pixels of zero padding) and
        flip, scaled to [0, 1] and normalised, as torchvision's RandomCrop, RandomHorizontalFlip, ToTensor and
        Normalize do."""

        def __init__(self, x, y, mean, std):
            self.x, self.y = torch.from_numpy(np.ascontiguousarray(x)), torch.from_numpy(y.astype(np.int64))
            self.mean = torch.as_tensor(mean, dtype=torch.float32).reshape(-1, 1, 1)
            self.std = torch.as_tensor(std, dtype=torch.float32).reshape(-1, 1, 1)

        def __len__(self):
            return len(self.y)

        def __getitem__(self, i):
            img = torch.nn.functional.pad(self.x[i].float() / 255.0, (4, 4, 4, 4))
            dy, dx = (int(v) for v in torch.randint(0, 9, (2,)))
            img = img[:, dy:dy + self.x.shape[2], dx:dx + self.x.shape[3]]
            if torch.rand(()) < 0.5:
                img = img.flip(2)
            return (img - self.mean) / self.std, self.y[i]

    def plain_loop(amp: bool):
        model = build_model(plan["model"], ds.input_shape, ds.n_classes, seed=0).to(device)
        model.train()
        opt = optimiser(model)
        workers = plan["loader_workers"]
        loader = torch.utils.data.DataLoader(PlainDataset(ds.x_train, ds.y_train, ds.mean, ds.std),
                                             batch_size=plan["batch_size"], shuffle=True, num_workers=workers,
                                             pin_memory=cuda, persistent_workers=workers > 0)
        state = {"batches": iter(())}
        criterion = torch.nn.CrossEntropyLoss()

        def step() -> int:
            try:
                xb, yb = next(state["batches"])
            except StopIteration:
                state["batches"] = iter(loader)
                xb, yb = next(state["batches"])
            xb, yb = xb.to(device, non_blocking=True), yb.to(device, non_blocking=True)
            opt.zero_grad()
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=amp):
                loss = criterion(model(xb), yb)
            loss.backward()
            opt.step()
            return int(yb.shape[0])

        return step

    builders = {"calib": calib_loop, "dataloader": plain_loop}
    return {(w["loop"], w["amp"]): (lambda w=w: builders[w["loop"]](w["amp"])) for w in plan["windows"]}


def _child(plan_path: str, index: int) -> None:
    """One measuring process: build and warm up its loops, wait at the barrier, measure its windows."""
    import torch

    from calib.train import torch_flags

    plan = json.loads(Path(plan_path).read_text())
    folder = Path(plan_path).parent
    device_type = plan["device"].split(":")[0]
    sync = torch.cuda.synchronize if device_type == "cuda" else (lambda: None)
    torch.set_num_threads(plan["windows"][0]["threads"] if plan["windows"] else 1)
    with torch_flags(device_type):
        mine = [w for w in plan["windows"] if index < w["procs"]]
        steppers, failed = {}, {}
        for key, build in _steppers({**plan, "windows": mine}).items():
            try:                                            # built and warmed up: cuDNN autotuning, the workers
                step = build()
                for _ in range(plan["warmup_steps"]):
                    step()
                sync()
                steppers[key] = step
            except Exception as exc:  # noqa: BLE001 - a loop that fails here is reported, the others measured
                failed[key] = f"{type(exc).__name__}: {exc}"[:300]
                print(f"throughput: the {key[0]} loop ({'bf16' if key[1] else 'fp32'}) failed: {failed[key]}",
                      file=sys.stderr, flush=True)
        (folder / f"ready-{index}").write_text("ready")
        go = folder / "go.json"
        while not go.is_file():
            time.sleep(0.02)
        t0 = json.loads(go.read_text())["t0"]
        results = []
        for w_index, window in enumerate(plan["windows"]):
            start = t0 + w_index * (plan["window_s"] + plan["gap_s"])
            end = start + plan["window_s"]
            time.sleep(max(0.0, start - time.time()))
            if index >= window["procs"]:
                continue
            key = (window["loop"], window["amp"])
            if key in failed:
                results.append({"window": w_index, "error": failed[key]})
                continue
            torch.set_num_threads(window["threads"])
            step, images, steps = steppers[key], 0, 0
            began = time.perf_counter()
            while steps < plan["max_steps"] and (steps == 0 or time.time() < end):   # a late window: one step
                images += step()
                steps += 1
            sync()
            results.append({"window": w_index, "images": images, "steps": steps,
                            "seconds": time.perf_counter() - began})
    if index == 0:                        # what the table names; the launcher itself imports no torch (seconds of CPU)
        device_name = torch.cuda.get_device_name(0) if device_type == "cuda" else "cpu"
        (folder / "torch.json").write_text(json.dumps({"torch": torch.__version__, "cuda": torch.version.cuda,
                                                       "device_name": device_name}))
    (folder / f"result-{index}.json").write_text(json.dumps(results))


def _launch(plan: dict, n_procs: int, timeout: float) -> list:
    """Run ``n_procs`` measuring processes on ``plan``; the windows' summed images/s, in plan order (None for a
    window whose loop failed in a process, with the error in ``errors``), the errors by window, and torch's version,
    its CUDA's and the device's name as the first process saw them."""
    with tempfile.TemporaryDirectory(prefix="gpu-throughput-") as tmp:
        folder = Path(tmp)
        (folder / "plan.json").write_text(json.dumps(plan))
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
        procs = [subprocess.Popen([sys.executable, __file__, "--child", str(folder / "plan.json"), str(i)], env=env)
                 for i in range(n_procs)]
        deadline = time.time() + timeout
        try:
            while sum((folder / f"ready-{i}").is_file() for i in range(n_procs)) < n_procs:
                if any(p.poll() not in (None, 0) for p in procs):
                    raise RuntimeError(f"a measuring process failed (exit codes {[p.poll() for p in procs]}).")
                if time.time() > deadline:
                    raise TimeoutError(f"the measuring processes were not ready within {timeout:.0f} s.")
                time.sleep(0.02)
            (folder / "go.json").write_text(json.dumps({"t0": time.time() + 0.2}))
            for p in procs:
                p.wait(timeout=max(1.0, deadline - time.time()))
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
        if any(p.returncode != 0 for p in procs):
            raise RuntimeError(f"a measuring process failed (exit codes {[p.returncode for p in procs]}).")
        rates, errors = [0.0] * len(plan["windows"]), {}
        for i in range(n_procs):
            for r in json.loads((folder / f"result-{i}.json").read_text()):
                if "error" in r:
                    errors[r["window"]] = r["error"]
                else:
                    rates[r["window"]] += r["images"] / r["seconds"] if r["seconds"] > 0 else 0.0
        torch_info = json.loads((folder / "torch.json").read_text())
        return [None if w in errors else rate for w, rate in enumerate(rates)], errors, torch_info


def measure(device: str = "cuda", model: str = "resnet20", batch_size: int = 128, data: str = "fashion-mnist-32",
            ks=(2, 4, 8), window_s: float = 2.0, max_steps: int = 10 ** 9, warmup_steps: int = 15,
            train_subset: int | None = None, loader_workers: int = 4, timeout: float = 180.0,
            threads: int | None = None) -> dict:
    """The throughput table (see the module docstring) and the choice of k; ``train_subset`` keeps the first n
    training images and ``threads`` sets each process's threads (the CPU dry run). Only the measuring processes
    import torch."""
    cpus = os.cpu_count() or 1
    base = {"device": device, "model": model, "batch_size": batch_size, "data": data, "window_s": window_s,
            "gap_s": 0.3, "max_steps": max_steps, "warmup_steps": warmup_steps, "train_subset": train_subset,
            "loader_workers": loader_workers}
    alone = [{"loop": "dataloader", "amp": False, "procs": 1}, {"loop": "calib", "amp": False, "procs": 1},
             {"loop": "calib", "amp": True, "procs": 1}]
    ks = sorted({int(k) for k in ks if int(k) > 1})
    together = [{"loop": "calib", "amp": amp, "procs": k} for k in ks for amp in (True, False)]
    for window in alone:
        window["threads"] = threads or max(1, cpus - loader_workers)
    for window in together:
        window["threads"] = threads or max(1, cpus // window["procs"])
    windows = alone + together
    began = time.perf_counter()
    # one launch: the first process measures the windows of one run alone while the others wait, then all of them
    rates, errors, torch_info = _launch({**base, "windows": windows}, max([1, *ks]), timeout)
    reference = rates[0]
    rows = [{"loop": w["loop"], "precision": "bf16" if w["amp"] else "fp32", "runs": w["procs"],
             "images_per_s": None if r is None else round(r, 1),
             "per_run": None if r is None else round(r / w["procs"], 1),
             "vs_dataloader": round(r / reference, 2) if r is not None and reference else None,
             **({"error": errors[i]} if i in errors else {})} for i, (w, r) in enumerate(zip(windows, rates))]
    calib_rows = {(row["runs"], row["precision"]): row["images_per_s"] or 0.0 for row in rows if row["loop"] == "calib"}
    best_k = 1
    for k in [1, *ks]:
        if calib_rows.get((k, "bf16"), 0) >= (1 + K_GAIN) * calib_rows.get((best_k, "bf16"), 0):
            best_k = k
    return {"device": device, "device_name": torch_info["device_name"], "torch": torch_info["torch"],
            "cuda": torch_info["cuda"],
            "model": model, "batch_size": batch_size, "data": data, "augment": "crop-flip", "window_s": window_s,
            "rows": rows, "k": best_k,
            "bf16_helps": calib_rows.get((best_k, "bf16"), 0) >= calib_rows.get((best_k, "fp32"), 0),
            "per_run_images_per_s": round(calib_rows.get((best_k, "bf16"), 0) / best_k, 1),
            "seconds": round(time.perf_counter() - began, 1)}


def markdown(table: dict) -> str:
    """The table as markdown, with the choice under it."""
    lines = [f"Throughput: {table['model']}, batch {table['batch_size']}, {table['data']} ({table['augment']}), "
             f"{table['device_name']}, torch {table['torch']}, CUDA {table['cuda']}; windows of {table['window_s']} s",
             "", "| loop | precision | runs at once | images/s (all runs) | images/s per run | vs DataLoader fp32 |",
             "|---|---|---|---|---|---|"]
    for r in table["rows"]:
        if r["images_per_s"] is None:
            lines.append(f"| {r['loop']} | {r['precision']} | {r['runs']} | failed: {r.get('error', '?')} | | |")
        else:
            lines.append(f"| {r['loop']} | {r['precision']} | {r['runs']} | {r['images_per_s']:.0f} | "
                         f"{r['per_run']:.0f} | {r['vs_dataloader']} |")
    lines += ["", f"chosen: {table['k']} run(s) at once, {table['per_run_images_per_s']:.0f} images/s per run in bf16; "
              f"bf16 {'helps' if table['bf16_helps'] else 'does NOT help: consider amp = false for the grids'} at "
              f"that k ({table['seconds']} s measured)"]
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--child", nargs=2, metavar=("PLAN", "INDEX"), help=argparse.SUPPRESS)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--model", default="resnet20")
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--ks", default="2,4,8", help="numbers of runs at once to measure (comma-separated)")
    parser.add_argument("--window-s", type=float, default=2.0)
    parser.add_argument("--tiny", action="store_true", help="the CPU dry run: a small net, a few steps a window")
    parser.add_argument("--out", help="write the table as JSON here")
    args = parser.parse_args(argv)
    if args.child:
        _child(args.child[0], int(args.child[1]))
        return 0
    options = dict(device=args.device, model=args.model, batch_size=args.batch_size,
                   ks=[int(k) for k in args.ks.split(",") if k], window_s=args.window_s)
    if args.tiny:
        options.update(model="resnet8-w4", batch_size=16, ks=[2], window_s=0.3, max_steps=2, warmup_steps=1,
                       train_subset=256, loader_workers=0, threads=1)
    table = measure(**options)
    print(markdown(table), flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps(table, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
