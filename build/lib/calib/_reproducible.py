"""Bit-reproducible CPU training across x86 machines: one instruction set for torch's CPU kernels.

float32 training on the CPU is deterministic on one machine, but torch, MKL and oneDNN pick their kernels by the
CPU's vector instruction set (AVX2, AVX-512, ...), and each rounds differently; SGD amplifies the difference
until two machines end a run with visibly different networks (a logit apart after 20 epochs of chapter 10's
grid), and a verdict decided on three seeds can flip. The book's entry points (the chapter runner, ``calib
train`` and ``calib sweep``, the tests) therefore run torch's CPU kernels with AVX2, which every x86-64 CPU of the
last decade has, before torch is imported: the stored runs were trained that way and retrain bit for bit. Set
``CALIB_CPU_ISA=native`` to let the libraries choose (faster on AVX-512 machines, not bit-reproducible across
them); variables already set in the environment are kept. GPUs and ARM CPUs are unaffected.
"""

from __future__ import annotations

import os
import sys

#: The environment variables that cap the instruction set of torch's own kernels, MKL's BLAS and oneDNN.
CPU_ISA_VARIABLES = {"ATEN_CPU_CAPABILITY": "avx2", "MKL_ENABLE_INSTRUCTIONS": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2"}


def pin_cpu_kernels(environ=None) -> dict:
    """Set the variables of :data:`CPU_ISA_VARIABLES` in ``environ`` (default ``os.environ``) unless
    ``CALIB_CPU_ISA=native`` or they are already set; return those it set.

    Effective only before torch is imported in the process that reads ``environ`` (a kernel or subprocess started
    with it, or this process when torch is not imported yet): a warning says so otherwise.
    """
    environ = os.environ if environ is None else environ
    if environ.get("CALIB_CPU_ISA", "").strip().lower() == "native":
        return {}
    added = {k: v for k, v in CPU_ISA_VARIABLES.items() if k not in environ}
    environ.update(added)
    if added and environ is os.environ and "torch" in sys.modules:
        import warnings

        warnings.warn("torch was imported before calib pinned its CPU kernels to AVX2; this process keeps the "
                      "instruction set it chose (runs may not retrain bit for bit on another machine).", RuntimeWarning,
                      stacklevel=2)
    return added


def cpu_kernel_setting(environ=None) -> dict:
    """The CPU instruction set this process's torch kernels run with: ``capability`` (what torch dispatches to,
    e.g. "AVX2", "AVX512"; "unknown" before torch 2.0) and the variables that chose it (``CALIB_CPU_ISA`` and
    those of :data:`CPU_ISA_VARIABLES`, None where unset). A run records it in ``meta.json`` when it starts and
    refuses to resume under another: float32 training does not continue bit for bit across instruction sets."""
    import torch

    environ = os.environ if environ is None else environ
    try:
        capability = str(torch.backends.cpu.get_cpu_capability())
    except AttributeError:  # torch < 2.0
        capability = "unknown"
    variables = {name: environ.get(name) for name in ("CALIB_CPU_ISA", *CPU_ISA_VARIABLES)}
    return {"capability": capability, "variables": variables}
