"""The process group of a ``torchrun`` launch: who this process is, the group's set-up, and the few collectives
calib uses (a barrier, a broadcast of a Python object, a gather of one, a sum).

``torchrun --standalone --nproc_per_node N -m calib train ...`` starts N processes with ``RANK``, ``LOCAL_RANK``
and ``WORLD_SIZE`` in their environment; :func:`launch` reads them and :func:`process_group` initialises the
group (gloo on the CPU, NCCL on CUDA, where rank r drives GPU ``LOCAL_RANK``) unless it already is, and destroys
the group it made. Without those variables, or with ``WORLD_SIZE=1``, everything here is a no-op, so a single
process runs as before. :mod:`calib.train` trains one run across the processes; :mod:`calib.metrics.streaming`
reduces its accumulators over them.
"""

from __future__ import annotations

import contextlib
import os
import sys
from dataclasses import dataclass

__all__ = ["Launch", "launch", "process_group", "world_size", "barrier", "broadcast_object", "gather_object",
           "local_rows"]


@dataclass(frozen=True)
class Launch:
    """This process's place in the launch: ``rank`` in [0, ``world_size``), ``local_rank`` on its machine."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def distributed(self) -> bool:
        """More than one process."""
        return self.world_size > 1

    @property
    def main(self) -> bool:
        """Whether this is rank 0, the process that writes files."""
        return self.rank == 0


def _env_int(name: str, default: int) -> int:
    text = os.environ.get(name)
    if text is None or not text.strip():
        return default
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"the environment variable {name}={text!r} is not an integer; launch with torchrun "
                         f"(which sets it) or unset it.") from None


def launch() -> Launch:
    """The :class:`Launch` of this process from ``RANK``, ``WORLD_SIZE`` and ``LOCAL_RANK`` (torchrun's), or
    rank 0 of 1 without them. Raises ValueError naming the variable when they are inconsistent."""
    world = _env_int("WORLD_SIZE", 1)
    rank = _env_int("RANK", 0)
    local = _env_int("LOCAL_RANK", rank)
    if world < 1:
        raise ValueError(f"WORLD_SIZE={world} must be at least 1; launch with torchrun --nproc_per_node N.")
    if not 0 <= rank < world:
        raise ValueError(f"RANK={rank} must lie in [0, WORLD_SIZE={world}); launch with torchrun, which sets both.")
    if local < 0:
        raise ValueError(f"LOCAL_RANK={local} must be >= 0; launch with torchrun, which sets it.")
    return Launch(rank, world, local)


def world_size() -> int:
    """The number of processes of the initialised ``torch.distributed`` group; 1 when there is none (also when
    torch is not imported, which it then is not: a numpy-only caller, as a streaming metric, does not load it)."""
    dist = sys.modules.get("torch.distributed")
    if dist is None:                              # no group can have been initialised without importing it
        return 1
    return dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1


@contextlib.contextmanager
def process_group(where: Launch, device_type: str):
    """Initialise the default process group for ``where`` (gloo for ``device_type`` "cpu", NCCL for "cuda") from
    torchrun's environment (``MASTER_ADDR``, ``MASTER_PORT``), and destroy it on exit. A single process, or a
    group that is already initialised (by the caller), is left alone."""
    import torch
    import torch.distributed as dist

    if not where.distributed or dist.is_initialized():
        yield
        return
    if device_type == "cuda":
        torch.cuda.set_device(where.local_rank)
    dist.init_process_group("nccl" if device_type == "cuda" else "gloo", rank=where.rank,
                            world_size=where.world_size)
    try:
        yield
    finally:
        dist.destroy_process_group()


def barrier() -> None:
    """Wait for every rank (nothing to do in a single process)."""
    import torch.distributed as dist

    if world_size() > 1:
        dist.barrier()


def broadcast_object(value, src: int = 0):
    """``value`` as rank ``src`` has it, on every rank (pickled; a single process gets its own back)."""
    import torch.distributed as dist

    if world_size() == 1:
        return value
    box = [value]
    dist.broadcast_object_list(box, src=src)
    return box[0]


def gather_object(value) -> list:
    """Every rank's ``value`` (pickled), in rank order, on every rank; ``[value]`` in a single process. A
    collective: every rank must call it."""
    import torch.distributed as dist

    if world_size() == 1:
        return [value]
    box = [None] * dist.get_world_size()
    dist.all_gather_object(box, value)
    return box


def local_rows(batch: int, where: Launch) -> slice:
    """The rows of a global batch of ``batch`` rows that rank ``where.rank`` takes: contiguous shares whose sizes
    differ by at most one (``np.array_split`` sizes), the larger ones first."""
    q, r = divmod(batch, where.world_size)
    start = where.rank * q + min(where.rank, r)
    return slice(start, start + q + (where.rank < r))
