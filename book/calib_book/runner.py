"""Running and building the book: papermill executes the chapters, jupyter-book renders them.

One execution, by papermill; jupyter-book only renders (``execute_notebooks: "off"`` in ``_config.yml``).
The layout under ``_build/``:

===========================  =================================================================================
``_build/src/``              the staged book source: ``_config.yml``, ``_toc.yml``, ``book/`` and the executed
                             chapters as ``chapters/NN-slug.ipynb``, plus the generated ledger, errata and
                             execution-statistics pages
``_build/claims.jsonl``      the claims ledger, one JSON object per claim (see :mod:`calib_book.claims`): each
                             chapter's records from its last successful run, replaced chapter by chapter (never
                             emptied first, so an interrupted run leaves every chapter's last records)
``_build/timings.json``      wall time of each chapter's last execution, and whether this run reused it
``_build/cache/``            per chapter, the key of its last successful execution (``NAME.json``) and the
                             claims it recorded (``NAME.claims.jsonl``): see "Executing only what changed"
``_build/notebooks/``        the chapters as notebooks before execution, and each kernel's log
``_build/html/``             the rendered book
``_build/.calib-book.lock``  held by the process that runs or builds the book (:class:`BuildLock`)
===========================  =================================================================================

Executing only what changed
---------------------------
A chapter is executed again only when something its output depends on changed. Its key
(:func:`~calib_book.cache.chapter_key`) is a SHA-256 of:

- its source, ``chapters/NAME.md``;
- its parameters: the profile, the overrides (``-p``) and ``strict``;
- the library's source: every file under ``calib/`` and under this package's folder (``calib_book/``), byte for
  byte (:func:`~calib_book.cache.library_digest`);
- the stored results and data it reads (:func:`~calib_book.cache.chapter_inputs`): ``book/data/``,
  ``book/results/NAME/`` and every ``book/results/OTHER`` its source names (chapters 07 and 11 read chapter 10's
  runs);
- the environment variables that choose what it reads (``CALIB_DATA``, ``CALIB_BOOK_ROOT``:
  :data:`~calib_book.cache.INPUT_VARIABLES`) and a fingerprint of the dataset files it loads (path, size,
  modification time and the digest of each file's first and last MB, :func:`~calib_book.cache.dataset_fingerprints`);
- the versions of Python and of the numerical packages (``KEYED_PACKAGES``), the CPU instruction set the kernel's
  torch is pinned to (``calib._reproducible``) and its thread count, one in the quick profile
  (:func:`~calib_book.cache.kernel_environment`).

The whole library, not the modules a chapter imports: a chapter also reaches the library through lazy imports
inside functions and through subprocesses (``calib train``) that its kernel's ``sys.modules`` never shows, and
the book's machinery decides how a chapter is executed; a digest of every file is simple and cannot miss one,
at the price that an edit to any module executes every chapter again (hashing takes well under a second a
chapter, the stored results included: 0.15 s for chapter 05, of which 0.01 s for Fashion-MNIST's fingerprint).
The datasets a chapter loads are fingerprinted, not hashed whole (30 MB for Fashion-MNIST, 0.06 s): a file
replaced or rewritten changes its modification time or size. The digits come with scikit-learn, whose version is
in the key. Runs that a chapter trains at parameters of no stored result are keyed on the library too
(:func:`~calib_book.cache.library_keyed_folder`).

A chapter whose key equals the one stored after its last successful execution, whose executed notebook is the
one that execution wrote (its SHA-256 is stored) and whose claims file reads back whole is *reused*: its
notebook stays where it is (its modification time too, so that Sphinx's incremental build skips it), its claims
go back into the ledger exactly as recorded, and the timings record its last execution's wall time with
``reused: true``. ``force=True`` (``calib book run --force``, ``make book FORCE=1``) executes it anyway. A chapter
that fails or is interrupted has its entry removed before it starts, so a failed run is never reused; a missing
or damaged entry, notebook or claims file means the chapter is executed.

jupyter-cache (myst-nb's cache) is not used because it cannot key correctly here: its hash covers only the
notebook's code cells and its ``kernelspec`` metadata (``create_hashed_notebook``), nothing outside the notebook,
so an edit to ``calib/`` or to a stored result would reuse a stale notebook. It also executes with its own
nbclient executors, without papermill's injected parameters or the environment that routes the claims into the
ledger, and the claims are not notebook outputs, so it could not restore them: it would be a key-to-notebook
store around a key computed here, which two files per chapter in ``_build/cache/`` are.

This module is the runner only. The back-matter pages it writes come from :mod:`calib_book.pages`; the helpers
that chapters share for presentation (glue, tables, number text) are in :mod:`calib_book.notebook`.
``repo_root`` is :func:`calib_book.claims.repo_root`.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path

import yaml

from calib_book import claims as claims_module
from calib_book import timeouts
from calib_book.cache import (chapter_inputs, chapter_key, digest_file, kernel_environment,  # noqa: F401 (re-exported)
                              library_digest)
from calib_book.claims import repo_root
from calib_book.coverage import COVERAGE_FOLDER, coverage_page
from calib_book.exercises import exercises_in
from calib_book.pages import (errata_page, exercises_page, ledger_page, released_code_page, reproduction_page,
                              status_page)
from calib_book.student import add_starter_cells, strip_solutions  # noqa: F401 (re-exported)

__all__ = ["PROFILES", "ParameterRange", "PARAMETER_RANGES", "ChapterError", "BuildLockedError", "BuildLock",
           "ChapterRun", "repo_root", "build_dir", "book_path", "chapters_in_toc", "run_chapter", "chapter_parameters",
           "check_parameters", "run_book", "timing_table", "build_book"]

#: The execution profiles, ``quick`` (CPU, seconds to a few minutes a chapter) or ``full`` (paper scale, GPU
#: if present).
PROFILES = ("quick", "full")


@dataclass(frozen=True)
class ParameterRange:
    """The values a chapter parameter may take, ``low <= value <= high`` (or ``<`` where a bound is open), and
    why; None is no bound."""

    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    why: str = ""

    def __contains__(self, value) -> bool:
        return ((self.low is None or (value > self.low if self.low_open else value >= self.low))
                and (self.high is None or (value < self.high if self.high_open else value <= self.high)))

    def text(self, name: str) -> str:
        """The range as a reader writes it, e.g. ``0 <= seed <= 2147483647``."""
        low = f"{self.low!r} {'<' if self.low_open else '<='} " if self.low is not None else ""
        high = f" {'<' if self.high_open else '<='} {self.high!r}" if self.high is not None else ""
        return f"{low}{name}{high}"


#: The range of each numeric parameter the chapters declare, checked with the types before any chapter runs
#: (a value out of range would fail minutes into a chapter, or overflow in numpy or torch).
PARAMETER_RANGES = {
    "seed": ParameterRange(0, 2**31 - 1, why="numpy's RandomState (the data splits) takes seeds 0 to 2**32 - 1, and "
                                               "the chapters add offsets to the seed"),
    "n_seeds": ParameterRange(2, why="an interval over seeds needs at least two"),
    "noise": ParameterRange(0, 0.5, high_open=True, why="the share of labels flipped"),
    "gamma": ParameterRange(0, why="focal loss's gamma; 0 is cross-entropy"),
    "half_side": ParameterRange(0, low_open=True, why="half the side of the square of cluster centres"),
    "quick_epochs": ParameterRange(4, why="epochs of the quick profile; chapter 05 compares the first epoch, the "
                                          "first learning-rate drop (after half of them), the epoch after it and the "
                                          "last, four different epochs"),
    "quick_train": ParameterRange(1, why="training images of the quick profile"),
    "beta": ParameterRange(0, why="the weight of the secondary loss"),
    "verify_runs": ParameterRange(0, why="a number of runs"),
}


class ChapterError(RuntimeError):
    """A chapter failed to execute; the message names the chapter and the failing cell."""


#: Seconds a chapter's kernel may take to start on an idle machine (papermill's ``start_timeout``, 60 by default),
#: scaled by the machine's load (:mod:`calib_book.timeouts`): under a load of 16 on 2 cores a start takes 8 times as
#: long.
KERNEL_START_TIMEOUT_S = 60


class BuildLockedError(RuntimeError):
    """Another process is running or building the book in the same ``_build/``."""


def build_dir(root: Path) -> Path:
    """The build folder of the book at ``root``: ``root / "_build"``."""
    return root / "_build"


def book_path() -> Path:
    """The folder that holds this package (a checkout's ``book/``): the kernels and Sphinx get it on their path."""
    return Path(__file__).resolve().parent.parent


class BuildLock:
    """An exclusive lock on the book's build folder (``flock`` on ``_build/.calib-book.lock``) while a process
    runs or builds the book.

    Two runs on one ``_build/`` would write one ledger and lose each other's claims, so a second process is
    refused at once with :class:`BuildLockedError`, naming the holder (its pid, command and start time, which the
    holder writes into the lock file). The kernel releases the lock when its process dies, so a killed run
    leaves no stale lock (the file stays, unlocked). Re-entrant within a process: :func:`run_book` holds it while
    :func:`run_chapter` takes it again. Where ``fcntl`` does not exist (Windows) there is no lock.
    """

    NAME = ".calib-book.lock"
    _depth: dict[str, int] = {}                     # lock file -> how often this process holds it
    _fds: dict[str, int] = {}
    _guard = threading.RLock()                      # the chapters of one run may execute in threads (``jobs``)

    def __init__(self, root: Path):
        self.path = build_dir(Path(root)).absolute() / self.NAME
        self.key = str(self.path)

    def __enter__(self) -> "BuildLock":
        with self._guard:
            #: whether this ``with`` took the lock (no run or build of this process holds it already)
            self.outermost = self._depth.get(self.key, 0) == 0
            if self.outermost:
                self._acquire()
            self._depth[self.key] = self._depth.get(self.key, 0) + 1
        return self

    def _acquire(self) -> None:
        try:
            import fcntl
        except ImportError:                         # pragma: no cover - Windows
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 300).decode(errors="replace").strip() or "a process that has just started"
            os.close(fd)
            raise BuildLockedError(f"{self.path.parent} is in use by another calib book run or build ({holder}); "
                                   f"wait for it to finish (two runs on one _build/ lose each other's claims), or "
                                   f"run from another clone.") from None
        command = "calib " + " ".join(sys.argv[1:]) if Path(sys.argv[0]).parent.name == "calib" else sys.argv[0]
        os.ftruncate(fd, 0)
        os.write(fd, f"pid {os.getpid()}, `{command}` on {platform.node()}, since "
                     f"{time.strftime('%H:%M:%S')}".encode())
        self._fds[self.key] = fd

    def __exit__(self, *exc) -> None:
        with self._guard:
            self._depth[self.key] -= 1
            if self._depth[self.key] == 0:
                fd = self._fds.pop(self.key, None)
                if fd is not None:
                    os.close(fd)                    # closing releases the lock


def chapters_in_toc(root: Path) -> list[str]:
    """Names (``NN-slug``) of the executable chapters, in the order ``_toc.yml`` lists them."""
    toc = yaml.safe_load((root / "_toc.yml").read_text(encoding="utf-8"))
    names: list[str] = []

    def walk(node):
        if isinstance(node, dict):
            file = node.get("file")
            if isinstance(file, str) and file.startswith("chapters/"):
                names.append(Path(file).name.removesuffix(".md").removesuffix(".ipynb"))
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(toc)
    return names


@dataclass
class ChapterRun:
    """One chapter's turn in a run: its wall time (for a reused chapter, that of its last execution), the claims it
    recorded, whether it succeeded, and whether its last execution was reused (:func:`~calib_book.cache.chapter_key`)
    or, when it was executed, why (``"forced"``, ``"no earlier successful execution"``,
    ``"changed: source, library"``)."""

    name: str
    seconds: float
    claims: int
    ok: bool
    error: str = ""
    reused: bool = False
    why: str = ""


def _chapter_title(source: Path) -> str:
    """The chapter's title: its first level-1 heading."""
    match = re.search(r"^# (.+)$", source.read_text(encoding="utf-8"), re.M)
    return match.group(1).strip() if match else source.stem


#: The pages :func:`build_book` writes into the staged ``book/`` folder (the back matter of :mod:`calib_book.pages`,
#: and :mod:`calib_book.coverage`'s page).
GENERATED_PAGES = ("claims.md", "errata.md", "reproduction.md", "released-code.md", "status.md", "exercises.md",
                   "coverage.md")


def _stage_static(root: Path, src: Path) -> None:
    """Copy the non-executable sources into the staged book (executed chapters are written there by run).

    Only what changed is copied, and every copy keeps its source's modification time, so that Sphinx's
    incremental build reads again only the pages that changed (:func:`_mirror`)."""
    src.mkdir(parents=True, exist_ok=True)
    for name in ("_config.yml", "_toc.yml"):
        _copy_if_changed(root / name, src / name)
    # the machinery (this package) is no page of the book: Sphinx imports it from the checkout (build_book)
    _mirror(root / "book", src / "book", skip={"results", "calib_book", "__pycache__"}, keep=set(GENERATED_PAGES))


def _copy_if_changed(source: Path, target: Path) -> None:
    """Copy ``source`` to ``target`` with its modification time, unless ``target`` has its size and time."""
    here, there = source.stat(), target.stat() if target.exists() else None
    if there is None or (here.st_size, here.st_mtime_ns) != (there.st_size, there.st_mtime_ns):
        shutil.copy2(source, target)


def _mirror(source: Path, target: Path, skip: set[str], keep: set[str]) -> None:
    """Make the folder ``target`` a copy of ``source`` without the names in ``skip``: files whose size and
    modification time already agree stay as they are, the others are copied with their time, and what
    ``source`` lacks is removed, except the files of ``target``'s top level named in ``keep``."""
    wanted: set[Path] = set()
    for folder, subfolders, files in os.walk(source):
        subfolders[:] = sorted(d for d in subfolders if d not in skip)
        relative = Path(folder).relative_to(source)
        (target / relative).mkdir(parents=True, exist_ok=True)
        wanted.add(relative)
        for file in files:
            if file not in skip:
                _copy_if_changed(Path(folder) / file, target / relative / file)
                wanted.add(relative / file)
    for path in sorted(target.rglob("*"), key=lambda p: len(p.parts), reverse=True):
        relative = path.relative_to(target)
        if relative in wanted or (len(relative.parts) == 1 and relative.name in keep):
            continue
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()


def _write_if_changed(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` unless it holds it already (its modification time then stays, for Sphinx)."""
    if not path.is_file() or path.read_text(encoding="utf-8") != text:
        path.write_text(text, encoding="utf-8")


def _markdown_to_notebook(path: Path):
    import jupytext

    nb = jupytext.read(path)
    for cell in nb.cells:
        # The defaults are not shown: papermill's injected cell after it shows the parameters actually used.
        tags = cell.metadata.get("tags", [])
        if "parameters" in tags and "remove-cell" not in tags:
            cell.metadata["tags"] = [*tags, "remove-cell"]
    nb.metadata.setdefault("kernelspec", {"name": "python3", "display_name": "Python 3", "language": "python"})
    nb.metadata["kernelspec"]["name"] = "python3"
    return nb


def run_chapter(root: Path, name: str, profile: str = "quick", parameters: dict | None = None,
                timeout: int | None = None, strict: bool = True, force: bool = False) -> ChapterRun:
    """Execute one chapter with papermill into ``_build/src/chapters/<name>.ipynb``, or reuse its last execution.

    The kernel gets ``CALIB_LEDGER`` and ``CALIB_CHAPTER`` so that its claims land in the ledger, tagged
    with the chapter, and this package's folder on its ``PYTHONPATH`` (:func:`book_path`). Raises
    :class:`ChapterError` naming the failing cell. With ``strict=False`` a claim the computation does not confirm
    is recorded as not confirmed and the chapter goes on (``$CALIB_STRICT=0``). A chapter whose
    :func:`~calib_book.cache.chapter_key` is that of its last successful execution is not executed: its notebook and
    claims are reused (the module's docstring says when), unless ``force``. Holds the :class:`BuildLock`.
    """
    with BuildLock(root) as lock:
        if lock.outermost:
            _remove_stale_running_files(root)
        return _run_chapter(root, name, profile, parameters, timeout, strict, force)


def _remove_stale_running_files(root: Path) -> None:
    """Delete the ``claims.<chapter>.*.running.jsonl`` files of ``_build/`` (a chapter's records while it executes)
    that a killed run left behind. Called only by the process that has just taken the :class:`BuildLock`, before
    it starts a chapter: no other run on this ``_build/`` can be going (the lock), and this one has not started
    one, so each such file is a dead run's."""
    build = build_dir(root)
    if build.is_dir():
        for path in build.glob("claims.*.running.jsonl"):
            path.unlink(missing_ok=True)


def _run_chapter(root: Path, name: str, profile: str, parameters: dict | None, timeout: int | None,
                 strict: bool, force: bool) -> ChapterRun:
    import nbformat
    import papermill
    from nbclient.exceptions import DeadKernelError
    from papermill.exceptions import PapermillExecutionError

    profile = (parameters or {}).get("profile", profile)      # -p profile full is the same as --profile full
    if profile not in PROFILES:
        raise ValueError(f"profile={profile!r} is not supported; choose one of {', '.join(PROFILES)}.")
    source = root / "chapters" / f"{name}.md"
    if not source.is_file():
        raise FileNotFoundError(f"chapter {name!r} is listed in _toc.yml but {source} does not exist.")
    out_dir = build_dir(root) / "src" / "chapters"
    out_dir.mkdir(parents=True, exist_ok=True)
    declared = chapter_parameters(source)
    check_parameters(name, declared, {"profile": profile, **(parameters or {})})
    # every parameter the chapter declares goes into papermill's injected cell, so the page shows the values used
    params = {**{k: v for k, v in declared.items() if v is not None}, "profile": profile, **(parameters or {})}
    cache_key, components = chapter_key(root, name, params, strict)
    why = "forced"
    if not force:
        earlier = _reuse(root, name, cache_key, components, profile)
        if isinstance(earlier, ChapterRun):
            return earlier
        why = earlier                               # why it cannot be reused
    _forget(root, name)                             # a run that fails or is interrupted leaves nothing to reuse
    raw = build_dir(root) / "notebooks" / f"{name}.ipynb"
    raw.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(_markdown_to_notebook(source), raw)
    ledger = build_dir(root) / "claims.jsonl"
    fd, running = tempfile.mkstemp(prefix=f"claims.{name}.", suffix=".running.jsonl", dir=build_dir(root))
    os.close(fd)                                    # this run's records, until it succeeds: a file of its own
    running = Path(running)
    # the kernel's own environment (this process's is left alone: chapters may execute in threads side by side)
    kernel_env = {**os.environ, "CALIB_LEDGER": str(running), "CALIB_CHAPTER": name,
                  "CALIB_STRICT": "1" if strict else "0", "MPLBACKEND": "module://matplotlib_inline.backend_inline",
                  "PYTHONPATH": _python_path()}
    # the kernel's torch: AVX2 kernels (bit-reproducible runs) and, in the quick profile, one thread
    kernel_env.update(kernel_environment(profile, kernel_env))
    kernel_log = raw.with_suffix(".kernel.log")
    executed = out_dir / f"{name}.ipynb"
    # papermill writes the executed notebook once, at the end (with the failing cell's error when one fails), not
    # twice per cell: chapter 08's 200 writes of a notebook of several MB took 5 s of this process's CPU. A run that
    # does not end (interrupted, or its kernel died) leaves no executed notebook, not an earlier run's.
    executed.unlink(missing_ok=True)
    start = time.perf_counter()
    error = ""
    try:
        # the kernel starts in the book's root: its launch is given the folder (papermill's cwd= changes this whole
        # process's working directory while it starts the kernel, which two chapters starting at once undo for each
        # other: a kernel then ran in the test process's folder, and that process was left in the book's)
        papermill.execute_notebook(str(raw), str(executed), parameters=params, kernel_name="python3",
                                   progress_bar=False, log_output=False, execution_timeout=timeout,
                                   start_timeout=math.ceil(timeouts.scaled(KERNEL_START_TIMEOUT_S)),
                                   request_save_on_cell_execute=False,
                                   kernel_manager_class=_kernel_manager_logging_to(kernel_log, kernel_env,
                                                                                   Path(root).resolve()))
        if _STOP.is_set():                          # interrupted while its last cell finished: not a whole run
            raise KeyboardInterrupt
    except PapermillExecutionError as exc:
        error = (f"chapter {name} failed in cell {exc.cell_index} (execution count {exc.exec_count}): "
                 f"{exc.ename}: {exc.evalue}")
    except DeadKernelError:
        error = f"chapter {name}: its kernel died (out of memory, or killed); its log is {kernel_log}"
    except BaseException:                           # Ctrl-C: the notebook is partial, and the build must say so
        running.unlink(missing_ok=True)
        with _BOOKKEEPING:
            _record_timing(root, ChapterRun(name, time.perf_counter() - start, 0, False, "interrupted"), profile)
        raise
    if error and _STOP.is_set():                    # its kernel was stopped because the run was interrupted
        running.unlink(missing_ok=True)
        with _BOOKKEEPING:
            _record_timing(root, ChapterRun(name, time.perf_counter() - start, 0, False, "interrupted"), profile)
        raise KeyboardInterrupt
    result = ChapterRun(name, time.perf_counter() - start, len(claims_module.read_ledger(running)), not error, error,
                        why=why)
    with _BOOKKEEPING:                              # the ledger and timings.json are shared by the chapters of a run
        if not error:                               # the ledger keeps the last successful run's records
            claims_module.replace_chapter(ledger, name, running)
            _remember(root, result, profile, cache_key, components, running, out_dir / f"{name}.ipynb")
        _record_timing(root, result, profile)
    running.unlink(missing_ok=True)
    if error:
        raise ChapterError(error + " (the ledger keeps the claims of this chapter's last successful run)")
    return result


def _kernel_manager_logging_to(log: Path, env: dict, cwd: Path):
    """The kernel manager class for papermill whose kernel starts in ``cwd`` with the environment ``env`` and writes
    its own log (its stderr) to ``log`` instead of the terminal: an interrupted run then ends in one line, not in the
    kernel's traceback of a closed socket. The kernel's process is in ``_KERNELS`` while it runs, so that an interrupted
    run can stop the kernels of the chapters executing beside the one that got the Ctrl-C."""
    from jupyter_client.manager import AsyncKernelManager

    class KernelManagerLoggingToFile(AsyncKernelManager):
        async def _async_launch_kernel(self, kernel_cmd, **kw):
            with open(log, "wb") as stderr:         # the kernel holds its own copy of the file once launched
                await super()._async_launch_kernel(kernel_cmd, **{**kw, "stderr": stderr, "cwd": str(cwd),
                                                                  "env": {**kw.get("env", {}), **env}})
            process = getattr(self.provisioner, "process", None)
            if process is not None:
                with _BOOKKEEPING:
                    _KERNELS.add(process)
                if _STOP.is_set():
                    process.kill()

        async def _async_cleanup_resources(self, *args, **kw):
            process = getattr(self.provisioner, "process", None)
            with _BOOKKEEPING:
                _KERNELS.discard(process)
            await super()._async_cleanup_resources(*args, **kw)

    return KernelManagerLoggingToFile


#: Held while a chapter's records go into the shared files of a run (the ledger, ``timings.json``).
_BOOKKEEPING = threading.RLock()
#: The kernels of the chapters executing now (their ``Popen``), and the event that stops a run on Ctrl-C.
_KERNELS: set = set()
_STOP = threading.Event()


def chapter_parameters(source: Path) -> dict:
    """The parameters a chapter declares: ``name -> default`` from its cell tagged ``parameters``."""
    import ast

    for cell in _markdown_to_notebook(source).cells:
        if "parameters" in cell.metadata.get("tags", []):
            out = {}
            for node in ast.parse(cell.source).body:
                if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                    try:
                        out[node.targets[0].id] = ast.literal_eval(node.value)
                    except ValueError:
                        out[node.targets[0].id] = None        # not a literal: any value
            return out
    return {}


def check_parameters(chapter: str, declared: dict, given: dict) -> None:
    """Refuse parameters the chapter does not declare, values of another type than the default's, numbers out of
    their :data:`PARAMETER_RANGES` (or not finite, or an integer beyond 64 bits), and a profile other than quick
    or full; the message names the parameter and lists what the chapter accepts or the range."""
    accepted = ", ".join(f"{k} ({type(v).__name__}, default {v!r})" for k, v in declared.items())
    for key, value in given.items():
        if key not in declared:
            raise ValueError(f"chapter {chapter} has no parameter {key!r}; it accepts: {accepted}.")
        default = declared[key]
        if default is None:
            continue
        kind = type(default)
        ok = (isinstance(value, bool) if kind is bool else
              isinstance(value, int) and not isinstance(value, bool) if kind is int else
              isinstance(value, (int, float)) and not isinstance(value, bool) if kind is float else
              isinstance(value, kind))
        if not ok:
            raise ValueError(f"chapter {chapter}: parameter {key}={value!r} is a {type(value).__name__}, but its "
                             f"default {default!r} is a {kind.__name__}; pass a {kind.__name__} (-p {key} VALUE).")
        if kind in (int, float):
            _check_range(chapter, key, value)
    if given.get("profile", "quick") not in PROFILES:
        raise ValueError(f"chapter {chapter}: profile={given['profile']!r} is not supported; choose one of "
                         f"{', '.join(PROFILES)}.")


def _check_range(chapter: str, key: str, value: int | float) -> None:
    """ValueError naming the parameter and its range when ``value`` is out of it (see :data:`PARAMETER_RANGES`)."""
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"chapter {chapter}: parameter {key}={value!r} is not a finite number; pass one "
                         f"(-p {key} VALUE).")
    allowed = PARAMETER_RANGES.get(key)
    if allowed is None and isinstance(value, int):
        allowed = ParameterRange(-2**63, 2**63 - 1, why="numpy and torch hold integers in 64 bits")
    if allowed is not None and value not in allowed:
        raise ValueError(f"chapter {chapter}: parameter {key}={value!r} is out of range: it takes "
                         f"{allowed.text(key)} ({allowed.why}); pass a value in that range (-p {key} VALUE).")


def _record_timing(root: Path, run: ChapterRun, profile: str, finished: str | None = None) -> None:
    """The chapter's entry of ``timings.json``: for a reused chapter, the wall time and end (``finished``) of the
    execution reused, with ``reused: true``."""
    path = build_dir(root) / "timings.json"
    data = json.loads(path.read_text()) if path.is_file() else {}
    data[run.name] = {"seconds": round(run.seconds, 2), "claims": run.claims, "ok": run.ok, "profile": profile,
                      "finished": finished or time.strftime("%Y-%m-%d %H:%M:%S"), "reused": run.reused}
    claims_module.write_atomic(path, json.dumps(data, indent=1))


def _cache_files(root: Path, name: str) -> tuple[Path, Path]:
    """The chapter's cache entry (``_build/cache/NAME.json``) and the claims of its last execution."""
    cache = build_dir(root) / "cache"
    return cache / f"{name}.json", cache / f"{name}.claims.jsonl"


def _forget(root: Path, name: str) -> None:
    for path in _cache_files(root, name):
        path.unlink(missing_ok=True)


def _remember(root: Path, run: ChapterRun, profile: str, key: str, components: dict, claims_file: Path,
              notebook: Path) -> None:
    """Store a successful execution for reuse: its claims, then its entry (key, what the key was made of, the
    executed notebook's SHA-256, wall time, claims): the entry is written last, so it exists only when all is."""
    entry, claims = _cache_files(root, run.name)
    entry.parent.mkdir(parents=True, exist_ok=True)
    claims_module.write_atomic(claims, claims_file.read_text(encoding="utf-8"))
    record = {"key": key, "components": components, "notebook": digest_file(notebook),
              "seconds": round(run.seconds, 2), "claims": run.claims, "profile": profile,
              "finished": time.strftime("%Y-%m-%d %H:%M:%S")}
    claims_module.write_atomic(entry, json.dumps(record, indent=1))


def _reuse(root: Path, name: str, key: str, components: dict, profile: str) -> ChapterRun | str:
    """The chapter's last execution, put back into the ledger and the timings, when it can be reused; otherwise
    why it cannot (the reason the chapter is executed)."""
    entry_path, claims_path = _cache_files(root, name)
    notebook = build_dir(root) / "src" / "chapters" / f"{name}.ipynb"
    if not entry_path.is_file():
        return "no earlier successful execution"
    try:
        entry = json.loads(entry_path.read_text(encoding="utf-8"))
        if entry["key"] != key:
            changed = [part for part, value in components.items() if entry["components"].get(part) != value]
            return f"changed: {', '.join(changed) or 'its key'}"
        if not claims_path.is_file():
            return "its claims file is missing"
        records = claims_module.read_ledger(claims_path)
        if len(records) != entry["claims"] or any(r.chapter != name for r in records):
            return "its claims file is damaged"
        if digest_file(notebook) != entry["notebook"]:
            return "its executed notebook changed"
    except OSError:
        return "its executed notebook is missing"
    except (ValueError, TypeError, KeyError, AttributeError):
        return "its cache entry or claims file is damaged"
    run = ChapterRun(name, entry["seconds"], entry["claims"], True, reused=True)
    with _BOOKKEEPING:
        claims_module.replace_chapter(build_dir(root) / "claims.jsonl", name, claims_path)
        _record_timing(root, run, profile, finished=entry["finished"])
    return run


def _python_path() -> str:
    """``PYTHONPATH`` for a kernel or Sphinx: this package's folder (:func:`book_path`) before what was there."""
    return os.pathsep.join(p for p in (str(book_path()), os.environ.get("PYTHONPATH")) if p)


def run_book(root: Path, profile: str = "quick", only: list[str] | None = None, parameters: dict | None = None,
             keep_going: bool = False, strict: bool = True, force: bool = False, jobs: int = 1) -> list[ChapterRun]:
    """Execute the chapters of ``_toc.yml`` (or those named in ``only``); print a time table.

    A chapter whose inputs have not changed since its last successful execution is reused, not executed, unless
    ``force`` (:func:`~calib_book.cache.chapter_key`). Every parameter is checked before the first chapter runs; the
    :class:`BuildLock` is held throughout. ``jobs`` chapters execute at once, each in its own kernel (no chapter
    reads what another writes: each reads the library, the stored results and the data); the longest first, by
    their last recorded times, and the ledger is written in the order of ``_toc.yml`` whatever the order they end
    in. The returned runs are in that order too."""
    if not isinstance(jobs, int) or isinstance(jobs, bool) or jobs < 1:
        raise ValueError(f"jobs={jobs!r}: the number of chapters executed at once must be a whole number of at "
                         f"least 1 (e.g. jobs=2 on two cores).")
    names = chapters_in_toc(root)
    if only:
        unknown = [n for n in only if n not in names]
        if unknown:
            raise ValueError(f"--only {', '.join(unknown)}: not a chapter of _toc.yml; choose from {', '.join(names)}.")
        names = [n for n in names if n in only]
    declared = {n: chapter_parameters(root / "chapters" / f"{n}.md") for n in names}
    nowhere = [k for k in (parameters or {}) if not any(k in d for d in declared.values())]
    if nowhere:
        raise ValueError(f"-p {', '.join(nowhere)}: no chapter run here declares it; "
                         + "; ".join(f"{n} accepts {', '.join(d)}" for n, d in declared.items()) + ".")
    for name in names:                              # every check before the first chapter runs
        check_parameters(name, declared[name], {"profile": profile, **{k: v for k, v in (parameters or {}).items()
                                                                        if k in declared[name]}})
    ledger = build_dir(root) / "claims.jsonl"
    with BuildLock(root) as lock, _quiet_when_interrupted():
        if lock.outermost:
            _remove_stale_running_files(root)
        # the ledger is never emptied first: each chapter's records are replaced when it succeeds or is reused, so an
        # interrupted run leaves every chapter's last successful records; those of chapters no longer in _toc.yml go
        claims_module.keep_chapters(ledger, chapters_in_toc(root))
        _stage_static(root, build_dir(root) / "src")
        try:
            runs = _run_chapters(root, names, declared, profile, parameters, keep_going, strict, force, jobs)
        finally:
            _order_ledger(ledger, chapters_in_toc(root))
    print(timing_table(runs))
    if any(not run.ok for run in runs):
        raise ChapterError("; ".join(run.error for run in runs if not run.ok))
    return runs


@contextlib.contextmanager
def _quiet_when_interrupted():
    """While chapters run in the main thread: a Ctrl-C first silences logging, then interrupts as Python does.
    The kernels stopped because of it make papermill and nbclient log "Kernel died while waiting for execute
    reply." and asyncio "Task exception was never retrieved" with a traceback, before and after the runner could
    catch the KeyboardInterrupt (which of them depends on timing, e.g. under a loaded CPU); the interrupted run
    ends in the one line that ``calib book run`` prints."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGINT)

    def interrupted(signum, frame):
        logging.disable(logging.CRITICAL)               # the process ends with the run; nothing else logs after
        _STOP.set()
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, interrupted)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _order_ledger(path: Path, names: list[str]) -> None:
    """Put the ledger's records in the order of the chapters in ``_toc.yml`` (a chapter's own in the order it
    recorded them): chapters executed side by side end, and write their records, in any order."""
    if not path.is_file():
        return
    lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    rank = {name: i for i, name in enumerate(names)}
    ordered = sorted(lines, key=lambda line: rank.get(json.loads(line).get("chapter"), len(rank)))
    if ordered != lines:
        claims_module.write_atomic(path, "".join(line + "\n" for line in ordered))


def _run_chapters(root: Path, names: list[str], declared: dict, profile: str, parameters: dict | None,
                  keep_going: bool, strict: bool, force: bool, jobs: int = 1) -> list[ChapterRun]:
    """The chapters ``names`` executed (or reused), ``jobs`` at a time, up to the first failure unless
    ``keep_going`` (the chapters running then finish; none starts after it). In the order of ``names``."""
    _STOP.clear()

    def one(name: str) -> ChapterRun:
        print(f"[book] {name} ({profile} profile) ...", flush=True)
        try:
            own = {k: v for k, v in (parameters or {}).items() if k in declared[name]}
            run = run_chapter(root, name, profile, own, strict=strict, force=force)
        except ChapterError as exc:
            print(f"[book] FAILED: {exc}", flush=True)
            return ChapterRun(name, json.loads((build_dir(root) / "timings.json").read_text())[name]["seconds"],
                              0, False, str(exc))
        print(f"[book] {name}: " + (f"reused (its last execution took {run.seconds:.1f} s)" if run.reused else
                                     f"executed ({run.why}) in {run.seconds:.1f} s") + f", {run.claims} claims",
              flush=True)
        return run

    if jobs == 1 or len(names) < 2:
        runs: list[ChapterRun] = []
        for name in names:
            runs.append(one(name))
            if not runs[-1].ok and not keep_going:
                break
        return runs
    # longest first (their last recorded times; a chapter never timed goes first), so that the last to end is short
    timings = build_dir(root) / "timings.json"
    last = json.loads(timings.read_text()) if timings.is_file() else {}
    queue = sorted(names, key=lambda n: -last.get(n, {}).get("seconds", math.inf))
    done: dict[str, ChapterRun] = {}
    with ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="chapter") as pool:
        running = {}
        try:
            while queue or running:
                while queue and len(running) < jobs and (keep_going or all(r.ok for r in done.values())):
                    name = queue.pop(0)
                    running[pool.submit(one, name)] = name
                if not running:
                    break
                finished, _ = wait(running, return_when=FIRST_COMPLETED)
                for future in finished:
                    done[running.pop(future)] = future.result()
        except BaseException:                       # Ctrl-C (or a failure of the runner itself): stop every kernel
            _STOP.set()
            import logging

            log = logging.getLogger("papermill")        # not "Kernel died ..." for each kernel stopped here
            was_disabled, log.disabled = log.disabled, True
            with _BOOKKEEPING:
                for process in list(_KERNELS):
                    try:
                        process.kill()
                    except OSError:
                        pass
            wait(running)
            log.disabled = was_disabled
            raise
    return [done[n] for n in names if n in done]


def timing_table(runs: list[ChapterRun]) -> str:
    """A plain-text table of chapter runs (name, seconds, claims, status), as the runner prints it: a reused
    chapter's status is ``reused`` and its seconds are those of the execution reused."""
    lines = ["", f"{'chapter':<40} {'seconds':>9} {'claims':>7}  status", "-" * 66]
    for run in runs:
        status = "FAILED" if not run.ok else "reused" if run.reused else "ok"
        lines.append(f"{run.name:<40} {run.seconds:>9.1f} {run.claims:>7}  {status}")
    lines.append("-" * 66)
    lines.append(f"{'total':<40} {sum(r.seconds for r in runs):>9.1f} {sum(r.claims for r in runs):>7}")
    reused = [r for r in runs if r.reused]
    if reused:
        lines.append(f"{len(reused)} of {len(runs)} chapters reused (seconds of their last execution); executed now: "
                     f"{sum(r.seconds for r in runs if not r.reused):.1f} s")
    return "\n".join(lines)


def build_book(root: Path, strict: bool = True, student: bool = False, with_student: bool = False) -> Path:
    """Render the executed chapters with jupyter-book into ``_build/html``; return the index page.

    With ``student=True`` the book is rendered without the exercises' solutions into
    ``_build/student/_build/html``, and the chapters are also written, solutions removed and unexecuted, as
    notebooks for students to work in, under ``_build/student/notebooks`` (see
    :func:`~calib_book.student.strip_solutions`).
    With ``with_student=True`` both editions are rendered, by two jupyter-book processes at once, and the full
    edition's index is returned. Holds the :class:`BuildLock`.

    Sphinx builds incrementally: it reads again only the pages whose files changed (a reused chapter's notebook
    keeps its modification time). Its warnings come only from the pages it reads, so a strict build after a
    build that failed or was not strict reads every page again (jupyter-book's ``--all``): a warning that made
    the last build fail is never skipped. ``html/.calib-strict-build-ok`` marks a strict build that succeeded.
    """
    with BuildLock(root):
        return _build_book(root, strict, student, with_student)


def _build_book(root: Path, strict: bool, student: bool, with_student: bool = False) -> Path:
    build = build_dir(root)
    src = build / "src"
    names = chapters_in_toc(root)
    missing = [n for n in names if not (src / "chapters" / f"{n}.ipynb").is_file()]
    if missing:
        raise ChapterError(f"chapters not executed yet: {', '.join(missing)}; run `calib book run` first.")
    timings = json.loads((build / "timings.json").read_text()) if (build / "timings.json").is_file() else {}
    failed = [n for n in names if not timings.get(n, {}).get("ok", False)]
    if failed:
        plural = len(failed) > 1
        raise ChapterError(f"chapter{'s' if plural else ''} {', '.join(failed)} ha{'ve' if plural else 's'} "
                           f"no successful run (its notebook is partial or missing, and its claims would be missing "
                           f"from the ledger); fix and run `calib book run --only {failed[0]}`, then build.")
    records = claims_module.read_ledger(build / "claims.jsonl")
    _check_ledger(records, names, timings)
    _stage_static(root, src)
    _write_if_changed(src / "book" / "claims.md", ledger_page(records, names))
    _write_if_changed(src / "book" / "errata.md", errata_page(records))
    _write_if_changed(src / "book" / "reproduction.md", reproduction_page(records))
    if (root / COVERAGE_FOLDER).is_dir():              # what each paper states, and the claims that decide it
        _write_if_changed(src / "book" / "coverage.md", coverage_page(records, root=root))
    _write_if_changed(src / "book" / "released-code.md", released_code_page(records))
    _write_if_changed(src / "book" / "status.md", status_page(timings, names))
    entries = [e for n in names for e in exercises_in(n, (root / "chapters" / f"{n}.md").read_text(encoding="utf-8"))]
    titles = {n: _chapter_title(root / "chapters" / f"{n}.md") for n in names}
    _write_if_changed(src / "book" / "exercises.md", exercises_page(entries, names, titles))
    editions = [(src, root, build / "html")]        # (staged source, --path-output, html folder)
    if student or with_student:
        editions.append((_stage_student(root, src, names), build / "student", build / "student" / "_build" / "html"))
        if student:
            editions = editions[1:]
    # The API reference (book/api/) imports calib with autodoc: this checkout's calib, whichever one is installed,
    # and this package (the machinery page), which no installation holds.
    env = {**os.environ, "PYTHONPATH": os.pathsep.join((str(Path(root).resolve()), _python_path()))}
    start = time.perf_counter()
    builds = []
    for staged, output, html in editions:
        cmd = [sys.executable, "-c", "from jupyter_book.cli.main import main; main()", "build", str(staged),
               "--path-output", str(output), "--builder", "html"]
        passed = html / ".calib-strict-build-ok"
        if strict:
            cmd += ["-W", "-n", "--keep-going"] + ([] if passed.is_file() else ["--all"])
        passed.unlink(missing_ok=True)
        builds.append((subprocess.Popen(cmd, cwd=root, env=env), html, passed))
    try:
        codes = [process.wait() for process, _, _ in builds]
    except BaseException:
        for process, _, _ in builds:
            process.kill()
        raise
    print(f"[book] jupyter-book build{'s' if len(builds) > 1 else ''}: {time.perf_counter() - start:.1f} s")
    for code, (_, html, passed) in zip(codes, builds):
        if code != 0:
            edition = " of the student edition" if "student" in html.relative_to(build).parts else ""
            raise ChapterError(f"jupyter-book build{edition} failed (exit {code}); see the warnings above.")
        if strict:
            passed.touch()
    index = builds[0][1] / "index.html"
    if timings:
        print(timing_table([ChapterRun(n, timings[n]["seconds"], timings[n]["claims"], timings[n]["ok"],
                                       reused=timings[n].get("reused", False)) for n in names if n in timings]))
    print(f"[book] {index}")
    return index


def _check_ledger(records: list, names: list[str], timings: dict) -> None:
    """Refuse to publish a ledger that is not each chapter's last successful run: a chapter of ``_toc.yml`` whose
    records in ``_build/claims.jsonl`` are not as many as that run recorded (``timings.json``; none at all after
    a run interrupted by an earlier version, which emptied the ledger first), or records of a chapter not in
    ``_toc.yml`` (a removed chapter, or a notebook run outside the runner)."""
    counts: dict[str, int] = {}
    for record in records:
        counts[record.chapter] = counts.get(record.chapter, 0) + 1
    short = [f"{n} ({counts.get(n, 0)} of the {timings[n]['claims']} claims its last successful run recorded)"
             for n in names if counts.get(n, 0) != timings[n]["claims"]]
    strays = sorted(set(counts) - set(names))
    if short or strays:
        problems = ([f"the ledger lacks the claims of chapter{'s' if len(short) > 1 else ''} {', '.join(short)}"]
                    if short else []) + ([f"it holds claims of {', '.join(strays)}, not a chapter of _toc.yml"]
                                         if strays else [])
        raise ChapterError(f"_build/claims.jsonl is not the chapters' last successful runs: {'; '.join(problems)}. "
                           f"Run `calib book run` (it reuses every unchanged chapter and puts its claims back), then "
                           f"build.")


def _stage_student(root: Path, src: Path, names: list[str]) -> Path:
    """Copy the staged book to ``_build/student/src`` with the solutions removed; write the student notebooks."""
    import nbformat

    student = build_dir(root) / "student"
    staged = student / "src"
    if staged.exists():
        shutil.rmtree(staged)
    shutil.copytree(src, staged)
    # the ledger page links the ledger two folders above its staged source (pages.CLAIMS_DOWNLOAD): put it there too
    shutil.copy2(build_dir(root) / "claims.jsonl", student / "claims.jsonl")
    notebooks = student / "notebooks"
    notebooks.mkdir(parents=True, exist_ok=True)
    for name in names:
        executed = staged / "chapters" / f"{name}.ipynb"
        nbformat.write(strip_solutions(nbformat.read(executed, as_version=4)), executed)
        blank = add_starter_cells(strip_solutions(_markdown_to_notebook(root / "chapters" / f"{name}.md")))
        nbformat.write(blank, notebooks / f"{name}.ipynb")
    return staged
