"""Timeouts that scale with the machine's load: the book's checks give a slow or shared machine more time instead of
failing because it is slow (issue 45, item 2: on 2 cores at a load average of 13-16, a Chromium launch of the browser
check was killed at its fixed 120 s).

:func:`load_factor` is how many times slower than when idle the machine is likely to run a process now: the
one-minute load average per core (``os.getloadavg``), at least 1. :func:`scaled` multiplies a timeout by it. A check
that still runs out of time retries once with :data:`RETRY_FACTOR` times as long, and its error says what it was
doing, how long it had and the load it saw (:func:`describe_load`).
"""

from __future__ import annotations

import os

__all__ = ["load_factor", "scaled", "describe_load", "RETRY_FACTOR", "MAX_FACTOR"]

#: How much longer the one retry of a check that ran out of time gets.
RETRY_FACTOR = 4
#: The largest factor a load can give (a load average of 64 on 2 cores is a machine to wait for, not to give a day).
MAX_FACTOR = 32


def load_factor() -> float:
    """The one-minute load average per core, at least 1 and at most MAX_FACTOR (1 where the platform has no load
    average)."""
    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):          # Windows
        return 1.0
    cores = os.cpu_count() or 1
    return min(MAX_FACTOR, max(1.0, load / cores))


def scaled(seconds: float) -> float:
    """``seconds`` times :func:`load_factor`: a timeout measured on an idle machine, for this machine now."""
    return seconds * load_factor()


def describe_load() -> str:
    """The machine's load in words, for an error message: "load average 13.2 on 2 cores"."""
    try:
        load = f"{os.getloadavg()[0]:.1f}"
    except (AttributeError, OSError):
        load = "unknown"
    return f"load average {load} on {os.cpu_count()} cores"
