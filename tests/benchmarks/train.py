"""Training speed of calib.train: images per second of the quick models on the CPU and, when a CUDA GPU is
present, ResNet-20 and ResNet-50 on the whole of Fashion-MNIST with and without bf16 autocast and channels-last.

    python tests/benchmarks/train.py [--threads N] [--cpu-images 2048] [--gpu-epochs 2] [--skip-gpu]

Every entry is a real ``calib.train.Trainer`` run (SGD, batch 128, the loader that keeps the data on the
device) in a temporary directory; the time is that of the training steps of the last epoch (``train_seconds``
in ``history.json``, measured before the per-epoch diagnostics, after a ``cuda.synchronize``), so the first
epoch's one-off costs (cuDNN autotuning, lazy imports) are left out when there are two epochs or more.

- CPU: the models of the quick profiles (linear, MLP, small CNN, ResNet-8 width 16 on Fashion-MNIST pooled
  to 14x14 as chapter 05's quick run uses it, ResNet-8/20 at full size) on the first ``--cpu-images``
  Fashion-MNIST training images, no augmentation, float32, deterministic.
- GPU: ResNet-20 (He et al.) and ResNet-50 (focal_calibration) on all 55,000 training images with random crop
  and flip, for each of (fp32, NCHW), (bf16, NCHW), (fp32, channels-last), (bf16, channels-last): epoch time,
  images per second and peak memory (``torch.cuda.max_memory_allocated``).

Fashion-MNIST must be installed (see calib.data). Not collected by pytest; the numbers depend on the machine
and its load.
"""

from __future__ import annotations

import argparse
import tempfile
import time

import torch

from calib.data import load_dataset
from calib.models import build_model, count_parameters
from calib.train import TrainConfig, Trainer

CPU_MODELS = [("linear", 1), ("mlp", 1), ("small-cnn", 1), ("resnet8-w16", 2), ("resnet8-w16", 1), ("resnet20", 1)]
GPU_MODELS = ["resnet20", "resnet50"]


def one_run(dataset, epochs: int, **fields) -> dict:
    with tempfile.TemporaryDirectory() as out:
        cfg = TrainConfig(data="fashion-mnist", loss="ce", epochs=epochs, milestones=(epochs + 1,), **fields)
        start = time.perf_counter()
        run = Trainer(cfg, out, progress=False, dataset=dataset).run()
        wall = time.perf_counter() - start
    last = run.epochs[-1]
    return {"train_seconds": last["train_seconds"], "images_per_s": last["images_per_s"],
            "peak_memory_mb": last.get("peak_memory_mb"), "wall": wall, "n": run.meta["dataset"]["n_train"],
            "n_parameters": run.meta["n_parameters"]}


def cpu_table(dataset, images: int) -> None:
    print(f"CPU ({torch.get_num_threads()} threads), Fashion-MNIST, first {images} training images, batch 128, "
          f"fp32, one epoch after a warm-up epoch")
    print(f"{'model':<16}{'input':>8}{'parameters':>12}{'images/s':>11}{'epoch (s)':>11}")
    for model, pool in CPU_MODELS:
        res = one_run(dataset, 2, model=model, device="cpu", train_subset=images, val_subset=64, test_subset=64,
                      augment="none", pool=pool)
        side = 28 // pool
        print(f"{model:<16}{f'{side}x{side}':>8}{res['n_parameters']:>12,}{res['images_per_s']:>11.0f}"
              f"{res['train_seconds']:>11.2f}")


def gpu_table(dataset, epochs: int) -> None:
    name = torch.cuda.get_device_name()
    print(f"\nGPU {name}: Fashion-MNIST, all {len(dataset.y_train):,} training images, batch 128, random crop and "
          f"flip; the last of {epochs} epochs")
    print(f"{'model':<10}{'bf16':>6}{'ch-last':>9}{'epoch (s)':>11}{'images/s':>11}{'peak MB':>10}{'vs fp32':>9}")
    for model in GPU_MODELS:
        base = None
        for amp in (False, True):
            for channels_last in (False, True):
                torch.cuda.reset_peak_memory_stats()
                res = one_run(dataset, epochs, model=model, device="cuda", amp=amp, channels_last=channels_last)
                base = base or res["train_seconds"]
                print(f"{model:<10}{str(amp):>6}{str(channels_last):>9}{res['train_seconds']:>11.2f}"
                      f"{res['images_per_s']:>11.0f}{res['peak_memory_mb'] or 0:>10.0f}"
                      f"{base / res['train_seconds']:>8.2f}x")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: torch's)")
    parser.add_argument("--cpu-images", type=int, default=2048)
    parser.add_argument("--gpu-epochs", type=int, default=2)
    parser.add_argument("--skip-gpu", action="store_true")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    dataset = load_dataset("fashion-mnist")
    print(f"torch {torch.__version__}; parameters for 10 classes, 1 input channel: "
          + ", ".join(f"{m} {count_parameters(build_model(m, (1, 28, 28), 10)):,}" for m in GPU_MODELS))
    cpu_table(dataset, args.cpu_images)
    if args.skip_gpu:
        return
    if torch.cuda.is_available():
        gpu_table(dataset, args.gpu_epochs)
    else:
        print("\nno CUDA GPU: the GPU table (ResNet-20 and ResNet-50, bf16 and channels-last) was not run")


if __name__ == "__main__":
    main()
