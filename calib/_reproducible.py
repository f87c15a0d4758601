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
from typing import cast

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


#: What :func:`kernel_fingerprint` computes, so that a change of it is a change of the fingerprint's meaning.
FINGERPRINT_VERSION = 1


def kernel_fingerprint() -> dict:
    """Fingerprints of the floating-point kernels this process runs, computed, not inferred from the CPU's name.

    - ``torch``: float32 forward and backward passes, at one thread, of a small network with the layer shapes of the
      book's MLPs (784 -> 256 -> 256 -> 10, a batch of 128: MKL's or OpenBLAS's SGEMM, chosen by the instruction
      set *and* the CPU's vendor) and of a 3 x 3 convolution (oneDNN), then an SGD step. The instruction set alone
      does not decide these kernels: the stored runs were trained on an AMD EPYC under ``ATEN_CPU_CAPABILITY=avx2``
      and an Intel Xeon under the same setting retrains them 1 prediction in 20,000 apart after one epoch (MKL
      dispatches by vendor), while two AMD machines retrain them bit for bit.
    - ``numpy``: float64 ``exp``, ``log``, a matrix-vector product and a sum (numpy's SIMD dispatch, e.g. AVX-512
      or AVX2 exp, and OpenBLAS's core type), which the float64 metrics of a run's history are computed with.

    Each is the first 16 hex digits of a SHA-256 of the results' bits. Two processes with the same ``torch``
    fingerprint train a run's float32 state (weights, logits, counts) bit for bit alike; with the same ``numpy``
    fingerprint they also compute its float64 metrics to the last bit. It takes a few milliseconds, and is computed
    once a process (cached).
    """
    global _FINGERPRINT
    if _FINGERPRINT is None:
        _FINGERPRINT = {"version": FINGERPRINT_VERSION, "torch": _torch_fingerprint(), "numpy": _numpy_fingerprint()}
    return dict(_FINGERPRINT)


_FINGERPRINT: dict[str, object] | None = None


def _digest(arrays) -> str:
    import hashlib

    import numpy as np

    h = hashlib.sha256()
    for a in arrays:
        h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()[:16]


def _torch_fingerprint() -> str:
    import numpy as np
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        rng = np.random.default_rng(20261129)       # inputs from numpy: torch's generator is left untouched
        x = torch.from_numpy(rng.standard_normal((128, 784), dtype=np.float32))
        y = torch.from_numpy(rng.integers(0, 10, 128))
        weights = [torch.from_numpy(rng.standard_normal(shape, dtype=np.float32) * 0.05).requires_grad_()
                   for shape in ((256, 784), (256, 256), (10, 256), (8, 1, 3, 3))]
        w1, w2, w3, k = weights
        h = torch.relu(x @ w1.T)
        h = torch.relu(h @ w2.T)
        loss = torch.nn.functional.cross_entropy(h @ w3.T, y)
        image = x[:16].reshape(16, 1, 28, 28)
        loss = loss + torch.nn.functional.conv2d(image, k, padding=1).square().mean()
        loss.backward()
        with torch.no_grad():
            stepped = [w - 0.1 * cast(torch.Tensor, w.grad) for w in weights]   # set by backward() above
        return _digest([loss.detach().numpy(), *(w.numpy() for w in stepped)])
    finally:
        torch.set_num_threads(threads)


def _numpy_fingerprint() -> str:
    import numpy as np

    rng = np.random.default_rng(20261129)
    x = rng.standard_normal((2000, 10)).astype(np.float32).astype(np.float64)   # float32 logits, as a run has
    return _digest([np.exp(x), np.log(np.abs(x) + 1e-3), x @ np.ones(10), np.array([x.sum(), (x * x).sum()])])


def cpu_vendor() -> str:
    """This CPU's vendor as /proc/cpuinfo gives it ("GenuineIntel", "AuthenticAMD"), or "unknown"."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("vendor_id"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def _vendor_of_name(name: str) -> str:
    """The vendor in a recorded device name ("CPU: AMD EPYC (2 cores)" -> "AuthenticAMD"), or "unknown"."""
    if "AMD" in name:
        return "AuthenticAMD"
    if "Intel" in name:
        return "GenuineIntel"
    return "unknown"


def kernels_match(meta: dict) -> dict:
    """Whether this process runs the floating-point kernels a stored CPU run was computed with.

    Returns ``{"torch": bool, "numpy": bool | None, "why": str}``. ``torch`` says whether retraining the run here
    reproduces its float32 state (weights, logits, counts) bit for bit; ``numpy`` whether its float64 metrics are
    recomputed to the last bit (None: not known, the run records no fingerprint). A run records
    :func:`kernel_fingerprint` in ``meta.json`` (``cpu_fingerprint``), and the fingerprints decide. A run written
    before the fingerprint existed is judged by what it records instead: the same instruction set, torch version and
    thread count, and a CPU of the same vendor (MKL picks its kernels by vendor: an Intel Xeon retrains the stored
    AMD EPYC runs 1 prediction in 20,000 apart after one epoch, under the same AVX2 setting).
    """
    import torch

    recorded = meta.get("cpu_fingerprint")
    if not str(meta.get("device", "cpu")).startswith("cpu"):
        return {"torch": False, "numpy": None, "why": f"the run was computed on {meta.get('device')}, not a CPU"}
    now = kernel_fingerprint()
    if recorded and recorded.get("version") == now["version"]:
        same_torch, same_numpy = recorded.get("torch") == now["torch"], recorded.get("numpy") == now["numpy"]
        why = (f"kernel fingerprints: torch {recorded.get('torch')} (run) vs {now['torch']} (here), numpy "
               f"{recorded.get('numpy')} vs {now['numpy']}")
        return {"torch": same_torch, "numpy": same_numpy, "why": why}
    capability = cpu_kernel_setting()["capability"]
    then_vendor = _vendor_of_name(str(meta.get("device_name", "")))
    checks = {"instruction set": (meta.get("cpu_capability"), capability),
              "torch": (str(meta.get("versions", {}).get("torch")), torch.__version__),
              "CPU vendor": (then_vendor, cpu_vendor())}
    differ = [f"{what} {a} (run) vs {b} (here)" for what, (a, b) in checks.items() if a != b or a == "unknown"]
    if not differ:
        return {"torch": True, "numpy": None,
                "why": f"the run records no kernel fingerprint; same instruction set ({capability}), torch and CPU "
                       f"vendor ({then_vendor})"}
    return {"torch": False, "numpy": None,
            "why": "the run records no kernel fingerprint, and " + "; ".join(differ)}
