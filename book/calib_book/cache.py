"""The key of a chapter's execution: what :mod:`calib_book.runner` compares to reuse an executed chapter.

A chapter's execution is keyed on its source, its parameters, the library it runs (every file of ``calib/`` and
of this package: chapters reach the library also through imports inside functions and ``calib train``
subprocesses, which the kernel's ``sys.modules`` never shows), the stored results and data it reads, the versions
of the packages that compute its numbers, the CPU instruction set its torch is pinned to and the number of threads
its numerical libraries use (:func:`kernel_environment`: float32 sums split over threads round differently, so
a count is part of what a chapter's numbers are computed with). jupyter-cache is
not used: its hash covers a notebook's code cells and kernelspec only, so a library or results change would reuse
a stale notebook (the runner's docstring says more).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import re
import sys
from pathlib import Path

from calib._reproducible import CPU_ISA_VARIABLES, pin_cpu_kernels

__all__ = ["digest_file", "digest_tree", "package_folder", "library_digest", "chapter_inputs", "answers_key",
           "KEYED_PACKAGES", "THREAD_VARIABLES", "kernel_environment", "versions", "chapter_key"]


def digest_file(path: Path) -> str:
    """SHA-256 of a file's bytes (OSError when it cannot be read)."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def digest_tree(folder: Path) -> str:
    """SHA-256 of a folder: every file's path (relative, sorted) and bytes, ``__pycache__`` and ``*.pyc`` left
    out; ``"absent"`` for a folder that does not exist."""
    if not folder.is_dir():
        return "absent"
    digest = hashlib.sha256()
    files = sorted(p for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc")
    for path in files:
        digest.update(f"{path.relative_to(folder).as_posix()}\0{digest_file(path)}\0".encode())
    return digest.hexdigest()


def package_folder() -> Path:
    """The folder of this package, ``calib_book/``, whose files are part of every chapter's key."""
    return Path(__file__).resolve().parent


def library_digest(root: Path) -> str:
    """SHA-256 of the library a chapter's kernel runs: every file of ``calib/`` (the kernel starts in ``root``, so
    the checkout's ``calib`` comes first on its path) and of this package's folder, ``calib_book/``."""
    return hashlib.sha256(f"{digest_tree(Path(root) / 'calib')} {digest_tree(package_folder())}"
                          .encode()).hexdigest()


_RESULTS_NAMED = re.compile(r"book/results/([A-Za-z0-9][\w.-]*)")


def chapter_inputs(root: Path, name: str) -> list[Path]:
    """The stored results and data a chapter reads, relative to ``root``: ``book/data``, ``book/results/NAME`` and
    every ``book/results/OTHER`` the chapter's source names (whether or not they exist)."""
    source = (Path(root) / "chapters" / f"{name}.md").read_text(encoding="utf-8")
    named = {f"book/results/{m}" for m in _RESULTS_NAMED.findall(source)}
    folders = {Path(p).parts[2] for p in named} | {name}
    return [Path("book/data"), *(Path("book/results") / f for f in sorted(folders))]


#: The packages whose version is part of a chapter's key, with Python's; those that compute the book's numbers.
KEYED_PACKAGES = ("torch", "numpy", "scipy", "scikit-learn", "matplotlib", "papermill")


def versions() -> dict:
    """Python's version and each of :data:`KEYED_PACKAGES`' installed version (None where it is not installed)."""
    out = {"python": sys.version}
    for package in KEYED_PACKAGES:
        try:
            out[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            out[package] = None
    return out


#: The variables that set how many threads a kernel's numerical libraries use (torch's and numpy's BLAS).
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def kernel_environment(profile: str, environ=None) -> dict:
    """The variables a chapter's kernel gets on top of ``environ`` (default ``os.environ``) for ``profile``: torch's
    CPU kernels pinned to AVX2 (``calib._reproducible.pin_cpu_kernels``) and, in the quick profile, one thread
    per kernel (:data:`THREAD_VARIABLES` set to 1), unless the environment sets them.

    One thread, so that the quick profile's float32 sums, and so its numbers, do not depend on the machine's core
    count (torch splits a reduction over its threads), and because its networks are small: on 2 cores, the whole
    quick book executed (two kernels at once) in 247 s of CPU with one thread a kernel and 255 s with two, with
    the same claims. The full profile keeps the libraries' defaults: its larger networks use every core.
    """
    environ = dict(os.environ if environ is None else environ)
    added = pin_cpu_kernels(environ)
    if profile == "quick":
        added.update({name: "1" for name in THREAD_VARIABLES if name not in environ})
    return added


def chapter_key(root: Path, name: str, parameters: dict, strict: bool = True) -> tuple[str, dict]:
    """The key of one execution of a chapter, and what it is made of.

    Parameters
    ----------
    root : Path
        The book (the folder of ``_toc.yml``).
    name : str
        The chapter, ``NN-slug``.
    parameters : dict
        Every parameter the kernel gets (the profile included).
    strict : bool
        Whether a claim not confirmed stops the chapter.

    Returns
    -------
    key : str
        SHA-256 of ``components``.
    components : dict
        ``source``, ``parameters``, ``library`` (:func:`library_digest`), ``inputs`` (a digest per folder of
        :func:`chapter_inputs`), ``versions``, ``cpu_isa`` (the instruction set the kernel's torch is pinned to)
        and ``threads`` (:func:`kernel_environment`); the module's docstring says why these.
    """
    root = Path(root)
    kernel_env = {**os.environ, **kernel_environment(parameters.get("profile", "quick"))}
    components = {
        "source": digest_file(root / "chapters" / f"{name}.md"),
        "parameters": json.dumps({"strict": bool(strict), **parameters}, sort_keys=True, default=repr),
        "library": library_digest(root),
        "inputs": {folder.as_posix(): digest_tree(root / folder) for folder in chapter_inputs(root, name)},
        "versions": versions(),
        "cpu_isa": {k: kernel_env.get(k) for k in (*CPU_ISA_VARIABLES, "CALIB_CPU_ISA")},
        "threads": {k: kernel_env.get(k) for k in THREAD_VARIABLES},
    }
    return hashlib.sha256(json.dumps(components, sort_keys=True).encode()).hexdigest(), components


def answers_key(root: Path) -> str:
    """The key under which the answer key's computed values are stored (``calib_book.answers.expected_value``):
    SHA-256 of the library (:func:`library_digest`, which holds the key's code), the stored results and data the
    exercises read (``book/results``, ``book/data``), the versions (:func:`versions`) and this process's CPU
    instruction-set settings (some values come from a short training run, whose float32 sums depend on them)."""
    root = Path(root)
    components = {
        "library": library_digest(root),
        "inputs": {folder: digest_tree(root / folder) for folder in ("book/data", "book/results")},
        "versions": versions(),
        "cpu_isa": {k: os.environ.get(k) for k in (*CPU_ISA_VARIABLES, "CALIB_CPU_ISA")},
    }
    return hashlib.sha256(json.dumps(components, sort_keys=True).encode()).hexdigest()
