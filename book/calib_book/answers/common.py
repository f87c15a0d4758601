"""What the keys of several chapters share: chapter 10's stored grid in the papers' regime (the exercises of
chapters 05, 07 and 10 read it), one torch thread for the key's small trainings and a process whose torch kernels
are the student's notebook's for them, and sympy imported on first use.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["BENCHMARK_STORE", "BENCHMARK_MODEL", "benchmark_runs", "OneTorchThread", "as_in_the_notebook",
           "sympy_module"]

#: Chapter 10's grid in the papers' regime, ``<store>/<model>/<loss>/seed<k>`` (the exercises' one store).
BENCHMARK_STORE = Path(__file__).resolve().parents[2] / "results" / "10-benchmark" / "regime"
#: The model label of that grid.
BENCHMARK_MODEL = "mlp-256-256-n20k-e40"


def benchmark_runs():
    """The stored runs of chapter 10's grid in the papers' regime, with their logits."""
    from calib.experiments import load_store

    return load_store(BENCHMARK_STORE, model=BENCHMARK_MODEL)


def as_in_the_notebook(function, *args):
    """``function(*args)`` computed in a fresh Python process whose torch kernels are pinned as the course's
    notebooks pin them (``calib._reproducible.pin_cpu_kernels()`` before torch is imported; the notebook's first
    cell does the same), its result returned through pickle. ``function`` is a module-level function of the key.

    A key part that trains a network must get the floats a right submission gets: the process that builds the key
    (a test, ``calib book course``) may run torch's native kernels (AVX-512 here), the student's kernel runs AVX2,
    and a small training then ends elsewhere in the 3rd digit of an interval's width (issue 46: chapter 08's right
    submission scored 13 of 19). Where this process's kernels are already pinned, it calls ``function`` here."""
    import os
    import pickle
    import subprocess
    import sys

    from calib._reproducible import CPU_ISA_VARIABLES, pin_cpu_kernels

    environ = dict(os.environ)
    pin_cpu_kernels(environ)
    if "torch" in sys.modules and all(os.environ.get(k) == environ.get(k) for k in CPU_ISA_VARIABLES):
        return function(*args)                      # torch here was imported under the same pinned kernels
    environ["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    code = ("import pickle, sys\n"
            "function, args = pickle.loads(sys.stdin.buffer.read())\n"
            "sys.stdout.buffer.write(pickle.dumps(function(*args)))\n")
    from calib_book.timeouts import scaled

    done = subprocess.run([sys.executable, "-c", code], input=pickle.dumps((function, args)), capture_output=True,
                          env=environ, timeout=scaled(900))
    if done.returncode:
        raise RuntimeError(f"the key's {function.__name__}{args} failed in its pinned process: "
                           f"{done.stderr.decode(errors='replace')[-2000:]}")
    return pickle.loads(done.stdout)


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
