"""What the keys of several chapters share: chapter 10's stored grid in the papers' regime (the exercises of
chapters 05, 07 and 10 read it), one torch thread for the key's small trainings, and sympy imported on first use.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["BENCHMARK_STORE", "BENCHMARK_MODEL", "benchmark_runs", "OneTorchThread", "sympy_module"]

#: Chapter 10's grid in the papers' regime, ``<store>/<model>/<loss>/seed<k>`` (the exercises' one store).
BENCHMARK_STORE = Path(__file__).resolve().parents[2] / "results" / "10-benchmark" / "regime"
#: The model label of that grid.
BENCHMARK_MODEL = "mlp-256-256-n20k-e40"


def benchmark_runs():
    """The stored runs of chapter 10's grid in the papers' regime, with their logits."""
    from calib.experiments import load_store

    return load_store(BENCHMARK_STORE, model=BENCHMARK_MODEL)


class OneTorchThread:
    """Train with one torch thread, as the chapters' quick profiles do, and restore the count after: a full-batch
    run sums in another order with more threads, and a run that a large secondary weight makes unstable ends
    elsewhere (ch08-ex-beta's seeds move by several points of accuracy), so the key reruns what the exercise states."""

    def __enter__(self):
        import torch

        self.threads = torch.get_num_threads()
        torch.set_num_threads(1)

    def __exit__(self, *exc):
        import torch

        torch.set_num_threads(self.threads)


def sympy_module():
    """sympy, imported on first use (the closed forms of chapters 02, 03, 04, 06 and 07)."""
    import sympy

    return sympy
