"""Fixtures shared by the test modules, and the book's machinery (``book/calib_book``) on the import path."""

import atexit
import os
import shutil
import sys
import tempfile
from pathlib import Path

from calib._reproducible import pin_cpu_kernels

pin_cpu_kernels()   # before any test module imports torch: runs retrain bit for bit on any x86 machine

# A claim a test records outside a chapter goes to a ledger of the session's own, never into the checkout's
# _build/claims.jsonl, which the book's ledger pages are built from (the runner gives each chapter's kernel its own).
if "CALIB_LEDGER" not in os.environ:
    _LEDGER_FOLDER = tempfile.mkdtemp(prefix="calib-test-ledger-")
    atexit.register(shutil.rmtree, _LEDGER_FOLDER, ignore_errors=True)
    os.environ["CALIB_LEDGER"] = os.path.join(_LEDGER_FOLDER, "claims.jsonl")

#: The folder that holds ``calib_book``, the book's machinery: it ships in no wheel, the tests import it from here.
BOOK = Path(__file__).resolve().parents[1] / "book"
if str(BOOK) not in sys.path:
    sys.path.insert(0, str(BOOK))

import gzip  # noqa: E402
import struct  # noqa: E402

import numpy as np
import pytest


def write_tiny_fashion_mnist(folder: Path, n_train=5600, n_test=300, side=8, seed=0):
    """A learnable stand-in in Fashion-MNIST's on-disk format: class k is a bright stripe at row k // 2 ..."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)

    def images(n):
        y = rng.integers(0, 10, n).astype(np.uint8)
        x = rng.integers(0, 90, (n, side, side)).astype(np.uint8)
        for k in range(10):
            rows = np.flatnonzero(y == k)
            x[rows, (k % 5) + 1, :] = 230 if k < 5 else 120
        return x, y

    def idx(arr):
        arr = np.ascontiguousarray(arr, np.uint8)
        return bytes([0, 0, 8, arr.ndim]) + b"".join(struct.pack(">I", d) for d in arr.shape) + arr.tobytes()

    for prefix, n in (("train", n_train), ("t10k", n_test)):
        x, y = images(n)
        for kind, arr in (("images-idx3", x), ("labels-idx1", y)):
            with gzip.open(folder / f"{prefix}-{kind}-ubyte.gz", "wb") as fh:
                fh.write(idx(arr))


@pytest.fixture
def tiny_fashion(tmp_path, monkeypatch):
    home = tmp_path / "data"
    write_tiny_fashion_mnist(home / "fashion-mnist")
    monkeypatch.setenv("CALIB_DATA", str(home))
    return home


def book_not_built(why: str) -> None:
    """Skip a test that needs the built book when it is not built; under pytest-xdist (``make test``, ``--dist
    loadfile``: each file in one worker, in order) fail instead, since the test that builds it comes first in the
    same file (tests/test_chapters.py) and has then failed or not run."""
    import os

    if os.environ.get("PYTEST_XDIST_WORKER"):
        pytest.fail(f"{why}, though tests/test_chapters.py builds it before this test in the same worker under "
                    f"make test")
    pytest.skip(why)


#: The files of the test suite by the CPU time they took in a cold `make test` (core-seconds, 2 cores, stop 39), the
#: longest first; the files not named here take a few seconds or less.
LONGEST_FILES = ("test_chapters.py", "test_course.py", "test_distributed.py", "test_experiments.py",
                 "test_book.py", "test_browser.py", "test_posthoc.py", "test_train.py", "test_runs.py",
                 "test_layers.py", "test_exercises.py", "test_packaging.py")
#: A short file that pytest-xdist hands to the worker of tests/test_chapters.py with it (each worker holds a second
#: file in advance), which waits until the book is built and checked.
WAITS_BEHIND_THE_BOOK = "test_api_reference.py"


def pytest_collection_modifyitems(config, items):
    """The longest files first, tests/test_chapters.py at their head, and the rest in their order: pytest-xdist
    (``--dist loadfile --no-loadscope-reorder``, as ``make test`` runs it) hands the files out in this order, a file
    to each worker as it asks, so the book is built at once on one worker while the other takes the long files, and
    the short ones come last, which the workers share until both finish (the longest first: the last files end
    within seconds of each other instead of one worker idling while the other runs a long one). The file each worker
    holds in advance is, for the book's worker, a short one, as it waits until the book is built."""
    rank = {name: i for i, name in enumerate(LONGEST_FILES)}
    order = {name: i for i, name in enumerate(dict.fromkeys(item.path.name for item in items))}

    def position(item):
        name = item.path.name
        if name == WAITS_BEHIND_THE_BOOK:
            return (0, 2, 0)                       # third: after the book's file and the longest of the rest
        if name in rank:
            return (0, 0 if rank[name] < 2 else 3, rank[name])
        return (1, 0, order[name])

    items.sort(key=position)
