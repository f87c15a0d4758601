"""The key of a chapter's execution: what :mod:`calib_book.runner` compares to reuse an executed chapter.

A chapter's execution is keyed on its source, its parameters, the library it runs (every file of ``calib/`` and
of this package: chapters reach the library also through imports inside functions and ``calib train``
subprocesses, which the kernel's ``sys.modules`` never shows), the stored results and data it reads, the
environment variables that choose them (:data:`INPUT_VARIABLES`) and a fingerprint of the dataset files it loads
(:func:`dataset_fingerprints`), the versions of the packages that compute its numbers, the CPU instruction set its
torch is pinned to and the number of threads its numerical libraries use (:func:`kernel_environment`: float32 sums
split over threads round differently, so a count is part of what a chapter's numbers are computed with).

Runs a chapter trains at parameters of no stored result (chapter 05's quick runs at other epochs, images or seeds)
are kept under ``_build/runs`` in a folder keyed on their configuration *and* the library
(:func:`library_keyed_folder`): ``calib.train.train`` returns a finished run of the same configuration as it is,
so a folder keyed on the configuration alone would serve a run of an earlier library after the library changed.

jupyter-cache is not used: its hash covers a notebook's code cells and kernelspec only, so a library or results
change would reuse a stale notebook (the runner's docstring says more).
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
           "KEYED_PACKAGES", "THREAD_VARIABLES", "INPUT_VARIABLES", "kernel_environment", "versions",
           "fingerprint_file", "dataset_fingerprints", "chapter_key", "library_keyed_folder"]


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
    """The stored results and data a chapter reads, relative to ``root``: ``book/data/published`` (the papers'
    tables; ``book/data/coverage`` is read by the coverage page, not by a chapter), ``book/results/NAME`` and every
    ``book/results/OTHER`` the chapter's source names (whether or not they exist)."""
    source = (Path(root) / "chapters" / f"{name}.md").read_text(encoding="utf-8")
    named = {f"book/results/{m}" for m in _RESULTS_NAMED.findall(source)}
    folders = {Path(p).parts[2] for p in named} | {name}
    return [Path("book/data/published"), *(Path("book/results") / f for f in sorted(folders))]


#: The packages whose version is part of a chapter's key, with Python's; those that compute the book's numbers
#: (sympy and mpmath: the derivations of chapters 02, 03, 06 and 07, ``calib.symbolic``).
KEYED_PACKAGES = ("torch", "numpy", "scipy", "scikit-learn", "matplotlib", "papermill", "sympy", "mpmath")


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


#: The environment variables that choose what a chapter reads, the dataset cache (``calib.dataset_files.data_home``)
#: and the book's root, where ``calib_book.paths.book_file`` finds the stored results. Their values are part of the
#: key; the files they lead to are digested (:func:`chapter_key`).
INPUT_VARIABLES = ("CALIB_DATA", "CALIB_BOOK_ROOT")

#: How much of each end of a dataset file :func:`fingerprint_file` hashes.
FINGERPRINT_BYTES = 1 << 20


def fingerprint_file(path: Path) -> str:
    """A cheap fingerprint of a large, rarely changed file: its path, size and modification time (ns) and the
    SHA-256 of its first and last ``FINGERPRINT_BYTES``: 1.5 ms for a file of any size, where a full digest of
    Fashion-MNIST's four files (30 MB) takes 60 ms and CIFAR's archives (170 MB) six times that, at every key. A
    file replaced or rewritten changes its time or size; a compressed file edited in place changes its end."""
    path = Path(path)
    stat = path.stat()
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        digest.update(fh.read(FINGERPRINT_BYTES))
        if stat.st_size > FINGERPRINT_BYTES:
            fh.seek(max(FINGERPRINT_BYTES, stat.st_size - FINGERPRINT_BYTES))
            digest.update(fh.read())
    return f"{path.resolve()} {stat.st_size} {stat.st_mtime_ns} {digest.hexdigest()}"


def dataset_fingerprints(source: str) -> dict:
    """For each dataset with files (``calib.dataset_files.SOURCES``) that the chapter's ``source`` names (e.g.
    ``"fashion-mnist"``): :func:`fingerprint_file` of each file loading it reads now
    (``calib.dataset_files.installed_files``: the cache ``$CALIB_DATA``, else Debian's package), or ``"absent"``
    when they are not installed (the chapter would download them, checked against their published MD5)."""
    from calib.dataset_files import SOURCES, installed_files

    out = {}
    for dataset in SOURCES:
        if re.search(rf"(?<![\w-]){re.escape(dataset)}(?![\w-])", source):
            files = installed_files(dataset)
            out[dataset] = ("absent" if files is None else
                            {name: fingerprint_file(path) for name, path in sorted(files.items())})
    return out


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
        :func:`chapter_inputs`, under the book's root and, when ``$CALIB_BOOK_ROOT`` names another folder, under
        it too: ``book_file`` reads from there), ``environment`` (the values of :data:`INPUT_VARIABLES`),
        ``datasets`` (:func:`dataset_fingerprints`), ``versions``, ``cpu_isa`` (the instruction set the kernel's
        torch is pinned to) and ``threads`` (:func:`kernel_environment`); the module's docstring says why these.
    """
    root = Path(root)
    kernel_env = {**os.environ, **kernel_environment(parameters.get("profile", "quick"))}
    source_path = root / "chapters" / f"{name}.md"
    folders = chapter_inputs(root, name)
    inputs = {folder.as_posix(): digest_tree(root / folder) for folder in folders}
    named_root = kernel_env.get("CALIB_BOOK_ROOT")
    if named_root and Path(named_root).expanduser().resolve() != root.resolve():
        inputs.update({f"$CALIB_BOOK_ROOT/{folder.as_posix()}": digest_tree(Path(named_root).expanduser() / folder)
                       for folder in folders})
    components = {
        "source": digest_file(source_path),
        "parameters": json.dumps({"strict": bool(strict), **parameters}, sort_keys=True, default=repr),
        "library": library_digest(root),
        "inputs": inputs,
        "environment": {k: kernel_env.get(k) for k in INPUT_VARIABLES},
        "datasets": dataset_fingerprints(source_path.read_text(encoding="utf-8")),
        "versions": versions(),
        "cpu_isa": {k: kernel_env.get(k) for k in (*CPU_ISA_VARIABLES, "CALIB_CPU_ISA")},
        "threads": {k: kernel_env.get(k) for k in THREAD_VARIABLES},
    }
    return hashlib.sha256(json.dumps(components, sort_keys=True).encode()).hexdigest(), components


def answers_key(root: Path) -> str:
    """The key under which the answer key's computed values are stored (``calib_book.answers.expected_value``):
    SHA-256 of the library (:func:`library_digest`, which holds the key's code), the stored results and data the
    exercises read (``book/results``, ``book/data/published``), the versions (:func:`versions`) and this process's CPU
    instruction-set settings (some values come from a short training run, whose float32 sums depend on them)."""
    root = Path(root)
    components = {
        "library": library_digest(root),
        "inputs": {folder: digest_tree(root / folder) for folder in ("book/data/published", "book/results")},
        "versions": versions(),
        "cpu_isa": {k: os.environ.get(k) for k in (*CPU_ISA_VARIABLES, "CALIB_CPU_ISA")},
    }
    return hashlib.sha256(json.dumps(components, sort_keys=True).encode()).hexdigest()


def library_keyed_folder(parent: str | os.PathLike, config: dict, prefix: str = "runs") -> Path:
    """The folder under ``parent`` for the runs a chapter trains at ``config`` (those no stored result holds):
    ``parent/<prefix>-<tag>``, the tag a SHA-256 of ``config`` and of the library that trains them
    (:func:`library_digest` of the checkout the imported ``calib`` comes from).

    ``calib.train.train`` returns a finished run of the same configuration without training it again, so runs
    kept under a folder keyed on the configuration alone would be served after the library changed; keyed on the
    library too, an edited library trains them again. Folders of the same ``prefix`` under ``parent`` made for
    another library (named in their ``library.sha256``) or before folders were keyed on it (without that file) are
    removed: no run of this library reads them.

    Parameters
    ----------
    parent : path
        Where the chapter keeps its trained runs, e.g. ``_build/runs/05-miscalibration-dynamics``.
    config : dict
        Everything that makes a run (JSON-serialisable; tuples are read as lists).
    prefix : str
        The start of the folder's name, e.g. ``"quick"``.

    Returns
    -------
    Path
        The folder (created, with its ``library.sha256``).
    """
    import calib

    if not isinstance(config, dict):
        raise ValueError(f"config must be a dict of the runs' settings; got {type(config).__name__}.")
    if not isinstance(prefix, str) or not re.fullmatch(r"[A-Za-z0-9][\w.-]*", prefix):
        raise ValueError(f"prefix={prefix!r} must be a folder-name word such as 'quick' (letters, digits, . _ -).")
    library = library_digest(Path(calib.__file__).resolve().parent.parent)
    tag = hashlib.sha256(json.dumps({"config": config, "library": library}, sort_keys=True, default=repr)
                         .encode()).hexdigest()[:12]
    parent = Path(parent)
    folder = parent / f"{prefix}-{tag}"
    if parent.is_dir():
        import shutil

        for other in parent.glob(f"{prefix}-*"):
            marker = other / "library.sha256"
            if other != folder and other.is_dir() and (not marker.is_file() or marker.read_text().strip() != library):
                shutil.rmtree(other)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "library.sha256").write_text(library + "\n")
    return folder
