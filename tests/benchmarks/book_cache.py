"""The book's no-change rebuild against a full one (issue 30, item 1): `make book` twice, from a fresh copy.

    python tests/benchmarks/book_cache.py [--edit 02-focal-gradient] [--only NAME ...] [--keep DIR]

Copies the checkout's files (tracked and untracked, not ignored: what a clone with these edits holds) into a
temporary folder and, there, times the two commands of ``make book`` (``calib book run``, then ``calib book
build``) three times: from an empty ``_build/`` (the full build: every chapter executed, every page rendered),
again with nothing changed (every chapter reused, Sphinx's incremental build), and, with ``--edit NAME``, after a
paragraph is added to that chapter (only it executed). Prints each phase's wall time and the ratio of the
no-change rebuild to the full one. ``--only`` times the run of those chapters alone (no build: the book needs
every chapter). Wall times from ``time.perf_counter`` around each subprocess; they depend on the machine and its
load. Not collected by pytest; a full build takes minutes.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def copy_checkout(target: Path) -> None:
    """The checkout's tracked and untracked (not ignored) files, copied into ``target``."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            check=True, capture_output=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        source = ROOT / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)


def timed(copy: Path, *args: str) -> float:
    """Wall time of ``python -m calib ARGS`` in ``copy`` (its output kept in ``copy/_bench.log``)."""
    env = {**os.environ, "PYTHONPATH": str(copy)}
    start = time.perf_counter()
    with open(copy / "_bench.log", "a") as log:
        log.write(f"\n$ calib {' '.join(args)}\n")
        log.flush()
        proc = subprocess.run([sys.executable, "-m", "calib", *args], cwd=copy, env=env, stdout=log,
                              stderr=subprocess.STDOUT)
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"calib {' '.join(args)} failed (exit {proc.returncode}); see {copy / '_bench.log'}")
    return seconds


def make_book(copy: Path, only: list[str]) -> tuple[float, float]:
    """(run, build) wall times of ``make book``'s two commands; no build with ``only``."""
    run = timed(copy, "book", "run", *(a for name in only for a in ("--only", name)))
    return run, (0.0 if only else timed(copy, "book", "build"))


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--edit", metavar="NAME", help="also time a rebuild after adding a paragraph to this chapter")
    parser.add_argument("--only", action="append", default=[], metavar="NAME", help="time the run of this chapter only")
    parser.add_argument("--keep", type=Path, help="build in this (new) folder and keep it")
    args = parser.parse_args(argv)
    folder = args.keep or Path(tempfile.mkdtemp(prefix="book-cache-bench."))
    folder.mkdir(parents=True, exist_ok=True)
    try:
        copy_checkout(folder)
        phases = [("full (empty _build/)", make_book(folder, args.only)),
                  ("no change", make_book(folder, args.only))]
        if args.edit:
            chapter = folder / "chapters" / f"{args.edit}.md"
            chapter.write_text(chapter.read_text(encoding="utf-8") + "\nA paragraph added by the benchmark.\n",
                               encoding="utf-8")
            phases.append((f"{args.edit} edited", make_book(folder, args.only)))
        print(f"{'make book':<40} {'run (s)':>9} {'build (s)':>10} {'total (s)':>10}")
        for name, (run, build) in phases:
            print(f"{name:<40} {run:>9.1f} {build:>10.1f} {run + build:>10.1f}")
        full, same = sum(phases[0][1]), sum(phases[1][1])
        print(f"no-change rebuild / full build: {same / full:.3f} ({full / same:.1f}x faster)")
    finally:
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
