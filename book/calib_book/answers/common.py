"""What the keys of several chapters share: chapter 10's stored grid in the papers' regime (the exercises of
chapters 05, 07 and 10 read it), one torch thread for the key's small trainings and a process whose torch kernels
are the student's notebook's for them, and sympy imported on first use.
"""

from __future__ import annotations

import threading
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
    """``function(*args)`` computed in a Python process whose torch kernels are pinned as the course's notebooks pin
    them (``calib._reproducible.pin_cpu_kernels()`` before torch is imported; the notebook's first cell does the
    same), its result returned through pickle. ``function`` is a module-level function of the key that seeds what it
    draws (each does: ``torch.manual_seed``, a seeded generator or a seeded model).

    A key part that trains a network must get the floats a right submission gets: the process that builds the key
    (a test, ``calib book course``) may run torch's native kernels (AVX-512 here), the student's kernel runs AVX2,
    and a small training then ends elsewhere in the 3rd digit of an interval's width (issue 46: chapter 08's right
    submission scored 13 of 19). Where this process's kernels are already pinned, it calls ``function`` here.
    Otherwise one pinned process serves every call of this process (:class:`_PinnedProcess`): starting Python,
    importing torch and loading the data again for each of the key's nine such parts cost more than their
    computations (chapter 00's twelve trainings take 4 s; their two fresh processes took 30 s)."""
    import os
    import sys

    from calib._reproducible import CPU_ISA_VARIABLES, pin_cpu_kernels

    environ = dict(os.environ)
    pin_cpu_kernels(environ)
    if "torch" in sys.modules and all(os.environ.get(k) == environ.get(k) for k in CPU_ISA_VARIABLES):
        return function(*args)                      # torch here was imported under the same pinned kernels
    environ["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    return _PinnedProcess.serving(environ).call(function, args)


#: The loop of the pinned process: read a call (a length, then the pickle of function and arguments) from stdin,
#: write its outcome (a length, then the pickle of (True, result) or (False, traceback)) to stdout, until stdin ends.
_PINNED_LOOP = """\
import os, pickle, struct, sys, traceback
calls, answers = sys.stdin.buffer, os.fdopen(os.dup(1), "wb")
os.dup2(2, 1)                                      # what the functions print goes to stderr, not into the answers
while True:
    head = calls.read(8)
    if len(head) < 8:
        break
    function, args = pickle.loads(calls.read(struct.unpack("<Q", head)[0]))
    try:
        outcome = (True, function(*args))
    except BaseException:
        outcome = (False, traceback.format_exc())
    body = pickle.dumps(outcome)
    answers.write(struct.pack("<Q", len(body)) + body)
    answers.flush()
"""


class _PinnedProcess:
    """One Python process with the notebooks' pinned torch kernels that computes the calls of
    :func:`as_in_the_notebook` one after another, for as long as this process lives (it ends when its input
    closes, at exit). A call that fails raises RuntimeError with the traceback; one that does not finish within
    :func:`~calib_book.timeouts.scaled` (900 s) kills the process (the next call starts another) and raises
    TimeoutError; a process that died is named with its log's end."""

    _current = None
    _lock = threading.Lock()                       # one pinned process at a time, whichever thread asks first

    @classmethod
    def serving(cls, environ: dict) -> "_PinnedProcess":
        with cls._lock:
            current = cls._current
            if current is None or current.environ != environ or current.process.poll() is not None:
                if current is not None:
                    current.close()
                cls._current = cls(environ)
            return cls._current

    def __init__(self, environ: dict):
        import atexit
        import subprocess
        import sys
        import tempfile
        import threading

        self.environ = environ
        self.log = tempfile.TemporaryFile()               # its stderr: read back when it fails
        self.process = subprocess.Popen([sys.executable, "-c", _PINNED_LOOP], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=self.log, env=environ)
        self.busy = threading.Lock()
        atexit.register(self.close)

    def call(self, function, args):
        import pickle
        import struct

        from calib_book.timeouts import scaled

        body = pickle.dumps((function, args))
        with self.busy:
            try:
                self.process.stdin.write(struct.pack("<Q", len(body)) + body)
                self.process.stdin.flush()
                head = self._read(8, scaled(900), function, args)
                ok, value = pickle.loads(self._read(struct.unpack("<Q", head)[0], scaled(900), function, args))
            except BrokenPipeError:
                raise RuntimeError(self._died(function, args)) from None
        if not ok:
            raise RuntimeError(f"the key's {function.__name__}{args} failed in its pinned process: {value[-2000:]}")
        return value

    def _read(self, n: int, timeout: float, function, args) -> bytes:
        """``n`` bytes of the process's answers within ``timeout`` seconds."""
        import os
        import select
        import time

        fd, chunks, got, deadline = self.process.stdout.fileno(), [], 0, time.monotonic() + timeout
        while got < n:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                self.process.kill()
                self.close()
                raise TimeoutError(f"the key's {function.__name__}{args} did not finish within {timeout:.3g} s in "
                                   f"its pinned process (stopped)")
            chunk = os.read(fd, n - got)
            if not chunk:
                raise RuntimeError(self._died(function, args))
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks)

    def _died(self, function, args) -> str:
        self.close()
        self.log.seek(0)
        return (f"the key's {function.__name__}{args}: its pinned process ended (exit status "
                f"{self.process.returncode}): {self.log.read().decode(errors='replace')[-2000:]}")

    def close(self) -> None:
        """End the process: its input closed (the loop ends), killed if it has not ended within 10 s."""
        import subprocess

        try:
            self.process.stdin.close()
        except OSError:
            pass
        if self.process.poll() is None:
            try:
                self.process.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                self.process.kill()
                self.process.wait()


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
