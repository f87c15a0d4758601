"""Fixtures shared by the test modules, and the book's machinery (``book/calib_book``) on the import path."""

import sys
from pathlib import Path

from calib._reproducible import pin_cpu_kernels

pin_cpu_kernels()   # before any test module imports torch: runs retrain bit for bit on any x86 machine

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


#: The tests that execute, build or read the repository's own ``_build/`` (the executed chapters, the ledger, the
#: built site and student site, the PDF), as ``file::test``, or whole files. Under ``make test`` (pytest-xdist,
#: ``--dist loadgroup``) they run in one worker, in file order, so that test_chapters.py has executed and built the
#: book before the others read it, and nothing reads the ledger while a chapter writes it; every other test
#: spreads over the workers meanwhile.
BOOK_GROUP = ("test_chapter_text.py::test_every_chapter_closes_with_what_it_establishes",
              "test_chapters.py::test_every_chapter_runs_and_the_book_builds",
              "test_chapters.py::test_every_built_page_reads_well_in_a_browser",
              "test_chapters.py::test_the_student_book_has_no_solutions_and_a_cell_to_work_in_after_each_exercise",
              "test_course.py::test_the_student_site_holds_no_line_of_the_key_and_no_solution",
              "test_pdf.py", "test_self_answers.py::test_no_chapter_output_glue_or_docstring_answers_an_exercise")
#: Files whose tests share costly module fixtures (the course edition, the wheel, the leak scan's needles): each runs
#: in one worker, so that its fixtures are built once.
SHARED_FIXTURE_FILES = ("test_course.py",)


def pytest_collection_modifyitems(config, items):
    for item in items:
        name = f"{item.path.name}::{getattr(item, 'originalname', item.name)}"
        if name in BOOK_GROUP or item.path.name in BOOK_GROUP:
            item.add_marker(pytest.mark.xdist_group("book"))
        elif item.path.name in SHARED_FIXTURE_FILES:
            item.add_marker(pytest.mark.xdist_group(item.path.stem))
