"""The run directory: the one module that reads and writes it (``calib.train`` writes runs through it,
``calib.experiments`` reads the store through it).

A run directory holds

``meta.json``      config, versions, device, CPU instruction set, git commit, wall time, ``finished``
``history.json``   per-epoch diagnostics (:meth:`calib.train.Trainer.diagnose`)
``logits.npz``     ``val_logits``, ``val_labels``, ``test_logits``, ``test_labels`` of the final model
``checkpoint.pt``  model, optimiser, scheduler and random states after the last finished epoch

and, while a process writes it, the lock ``.calib-train.lock``. Every file is written through a temporary
file of its own (``.<name>.<pid>.<random>.tmp``) and ``os.replace``, so a crash leaves the previous file, and
two writers never share a temporary. Each damaged file is reported by a named error that names the file and
what to do (:class:`CorruptRunError`); a logits file is read without pickles (``allow_pickle=False``), so a
store can never run code. The provenance that ``meta.json`` records (:func:`git_commit`, :func:`git_dirty`,
:func:`device_name`) is taken here too.
"""

from __future__ import annotations

import errno
import json
import os
import platform
import secrets
import shutil
import subprocess
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

__all__ = ["META", "HISTORY", "LOGITS", "CHECKPOINT", "RUN_FILES", "DISCARDABLE", "LOGIT_KEYS", "Run", "load_run",
           "read_json_object", "read_logits", "read_checkpoint", "write_atomic", "write_json", "write_logits", "RunLock",
           "remove_temporaries", "run_owner", "RunLockedError", "CorruptRunError", "DiskFullError",
           "RunConfigError", "ReadOnlyRunError", "RunFolderMovedError", "git_commit", "git_dirty", "device_name"]

#: The run's metadata (config, versions, device, CPU instruction set, git commit, wall time, ``finished``).
META = "meta.json"
#: The per-epoch diagnostics.
HISTORY = "history.json"
#: The final model's validation and test logits and labels.
LOGITS = "logits.npz"
#: Everything an exact resume needs, after the last finished epoch.
CHECKPOINT = "checkpoint.pt"
#: The files of a run, in the order a run writes them.
RUN_FILES = (META, HISTORY, CHECKPOINT, LOGITS)
#: Files of a run directory that may be deleted once the run has finished (``discard``).
DISCARDABLE = (CHECKPOINT, LOGITS)
#: The arrays of ``logits.npz``.
LOGIT_KEYS = ("val_logits", "val_labels", "test_logits", "test_labels")
#: Temporaries of :func:`write_atomic` (``.<name>.<pid>.<random>.tmp``), removed when a run starts.
_TMP_GLOB = ".*.tmp*"


class RunLockedError(ValueError):
    """Another process is writing to the run directory; ``holder`` is what its lock file says (pid, host, since
    when), or empty."""

    def __init__(self, message: str = "", holder: str = ""):
        super().__init__(message)
        self.holder = holder


class CorruptRunError(ValueError):
    """A file of the run directory cannot be read (truncated, garbage or not what calib wrote)."""


class DiskFullError(OSError):
    """The device of the run directory is full: nothing of the last complete epoch was lost."""


class RunConfigError(ValueError):
    """A run directory holds a run of another configuration (or an unfinished one without ``resume``)."""


class ReadOnlyRunError(ValueError):
    """The run directory cannot be written (permissions, a read-only file system)."""


class RunFolderMovedError(ValueError):
    """The run directory was moved, renamed or deleted while a run was writing it: the run stops, writing nothing
    more, and the folder keeps every epoch completed before the move."""


def _moved_message(old: Path, now: Path | None) -> str:
    """What :class:`RunFolderMovedError` says: the old path, where the folder went (when known) and how to go on."""
    where = (f"it is now {now}" if now is not None
             else "this process cannot tell where it went, or whether it was deleted")
    return (f"the run folder {old} was moved, renamed or deleted while this run was writing it ({where}); the run "
            f"stopped and wrote nothing more. A moved folder keeps every epoch completed before that (meta.json, "
            f"history.json, checkpoint.pt; the epoch in progress is trained again). To go on, move it back to {old} "
            f"and resume: calib train ... --out {old} --resume (or the same calib sweep again).")


def _open_path(fd: int) -> Path | None:
    """The path the open file ``fd`` has now (it follows a rename of its folder), where the system says
    (Linux's ``/proc/self/fd``); None when unknown or deleted."""
    try:
        target = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return None
    return None if target.endswith(" (deleted)") else Path(target)


@dataclass
class Run:
    """A run directory read back: its config, metadata and history; :meth:`logits` loads ``logits.npz``."""

    out: Path
    meta: dict
    history: dict
    config: dict = field(default_factory=dict)

    @property
    def finished(self) -> bool:
        """Whether the run completed all its epochs (``finished`` in ``meta.json``)."""
        return bool(self.meta.get("finished"))

    @property
    def epochs(self) -> list:
        """The per-epoch records of ``history.json``."""
        return self.history.get("epochs", [])

    def series(self, *keys) -> np.ndarray:
        """One diagnostic over the epochs, e.g. ``run.series("test", "nll_wrong")`` (None becomes NaN)."""
        out = []
        for rec in self.epochs:
            value = rec
            for k in keys:
                value = value[k]
            out.append(np.nan if value is None else value)
        return np.asarray(out, dtype=np.float64)

    def logits(self) -> dict:
        """``val_logits``, ``val_labels``, ``test_logits``, ``test_labels`` (numpy arrays), checked
        (:func:`read_logits`)."""
        return read_logits(self.out / LOGITS)


def load_run(out) -> Run:
    """Read the run directory ``out`` (``meta.json`` and ``history.json``)."""
    out = Path(out)
    if not (out / META).is_file():
        raise FileNotFoundError(f"{out} holds no run (no meta.json); train one with `calib train ... --out {out}`.")
    meta = read_json_object(out / META)
    history = read_json_object(out / HISTORY) if (out / HISTORY).is_file() else {}
    config = meta.get("config", {})
    if not isinstance(config, dict):
        raise CorruptRunError(f"{out / META}: 'config' is a {type(config).__name__}, not the object calib writes; "
                              f"restore the file, or train the run again into another --out.")
    return Run(out, meta, history, config)


def read_json_object(path, fix: str | None = None) -> dict:
    """A JSON object written by calib (meta.json, history.json), or :class:`CorruptRunError` naming the file.

    ``fix`` is what the message advises (default: restore the file or start the run over with ``--restart``).
    """
    path = Path(path)
    fix = fix or "restore it, or start the run over with --restart (calib train) / restart=True"
    try:
        obj = json.loads(path.read_bytes().decode("utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise CorruptRunError(f"{path} is not valid JSON ({type(exc).__name__}: {str(exc)[:80]}); it is damaged. "
                              f"{fix[0].upper()}{fix[1:]}.") from None
    if not isinstance(obj, dict):
        raise CorruptRunError(f"{path} holds a JSON {type(obj).__name__}, not the object calib writes; {fix}.")
    return obj


def read_logits(path, check_only: bool = False, splits: tuple = ("val", "test")) -> dict:
    """The arrays of a ``logits.npz`` (:data:`LOGIT_KEYS`), checked: a zip of plain arrays (never a pickle),
    float logits of shape (N, K) and integer labels of shape (N,) for each split, labels in [0, K).

    ``splits`` names the splits required and returned: ``("val",)`` reads a run stored with its validation
    logits only (chapter 10's tuning runs keep nothing else, so that no test number can enter a choice).

    ``check_only`` reads only the archive's directory and array headers (no decompression of the data: the cost
    of a directory listing), and returns ``{}``. A damaged file raises :class:`CorruptRunError` naming it and
    saying to rerun the run or delete it.
    """
    path = Path(path)
    fix = (f"the run's logits are lost. Train it again (calib train --from-meta {path.parent / META} --out "
           f"{path.parent} --restart), or delete {path.parent} if the run is not needed")

    def damaged(why: str) -> CorruptRunError:
        return CorruptRunError(f"{path} is damaged ({why}); {fix}.")

    try:
        npz = np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
        if isinstance(exc, FileNotFoundError):
            raise
        raise damaged(f"not a numpy .npz archive: {type(exc).__name__}") from None
    if not isinstance(npz, np.lib.npyio.NpzFile):
        raise damaged("a single array, not the .npz archive calib writes")
    splits = tuple(splits)
    if not splits or any(split not in ("val", "test") for split in splits):
        raise ValueError(f"splits={splits!r}: name 'val', 'test' or both, e.g. splits=('val',).")
    keys = [k for k in LOGIT_KEYS if k.split("_")[0] in splits]
    with npz:
        missing = [k for k in keys if k not in npz.files]
        if missing:
            raise damaged(f"no {', '.join(missing)}")
        if check_only:
            return {}
        try:
            arrays = {k: npz[k] for k in keys}
        except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:   # pickled object arrays, bad data
            why = ("it holds pickled Python objects, which calib never loads from a store" if "pickle" in str(exc)
                   else f"{type(exc).__name__}: {str(exc)[:80]}")
            raise damaged(why) from None
    for split in splits:
        z, y = arrays[f"{split}_logits"], arrays[f"{split}_labels"]
        if z.ndim != 2 or z.dtype.kind != "f" or y.ndim != 1 or y.dtype.kind not in "iu" or len(y) != len(z):
            raise damaged(f"{split}_logits {z.dtype}{z.shape} and {split}_labels {y.dtype}{y.shape} are not float "
                          f"logits (N, K) with integer labels (N,)")
        if y.size and (y.min() < 0 or y.max() >= z.shape[1]):
            raise damaged(f"{split}_labels outside [0, {z.shape[1]})")
    return arrays


def read_checkpoint(path, device, fix: str = "start the run over with --restart (restart=True), or restore the "
                                             "file") -> dict:
    """``checkpoint.pt`` as :meth:`calib.train.Trainer.save_checkpoint` wrote it, or :class:`CorruptRunError`
    naming the file."""
    import torch

    path = Path(path)
    try:
        state = torch.load(path, map_location=device, weights_only=False)
    except Exception as exc:  # torch.load raises UnpicklingError, EOFError, RuntimeError, ... on a damaged file
        raise CorruptRunError(f"{path} is corrupted or truncated ({type(exc).__name__}: {str(exc)[:120]}); it cannot "
                              f"be resumed. {fix[0].upper()}{fix[1:]}.") from None
    if not isinstance(state, dict) or not {"config", "epoch", "model", "optimizer"} <= set(state):
        raise CorruptRunError(f"{path} is not a calib checkpoint; {fix}.")
    return state


def run_owner(out, identity: dict) -> tuple[str, str]:
    """Whose files ``out`` holds, as ``(owner, why)``: ``"none"`` (no file of a run), ``"same"`` (a run of the
    configuration ``identity``, proved by its readable ``meta.json`` or, that one damaged, by its checkpoint),
    ``"other"`` (a run of another configuration) or ``"unknown"`` (files calib did not write or whose run it
    cannot tell). ``--restart`` deletes only what is ``"same"``, or a lone damaged ``meta.json``."""
    out = Path(out)
    present = [name for name in RUN_FILES if (out / name).is_file()]
    if not present:
        return "none", ""
    meta_damage = ""
    if (out / META).is_file():
        try:
            meta = read_json_object(out / META)
        except CorruptRunError as exc:
            meta_damage = str(exc).split(";")[0]
        else:
            config = meta.get("config")
            if not isinstance(config, dict) or "versions" not in meta:
                return "unknown", f"{out / META} was not written by calib train (no config and versions)"
            return ("same", "") if config == identity else ("other", f"{out} holds a run of another configuration")
    if (out / CHECKPOINT).is_file():
        try:
            config = read_checkpoint(out / CHECKPOINT, "cpu")["config"]
        except CorruptRunError as exc:
            return "unknown", f"{meta_damage + ', and ' if meta_damage else ''}{str(exc).split(';')[0]}"
        return ("same", "") if config == identity else ("other", f"{out / CHECKPOINT} is of another configuration")
    if present == [META]:
        return "same", ""                                # a lone damaged meta.json: nothing else to lose
    others = ", ".join(n for n in present if n != META)
    return "unknown", f"{meta_damage or f'{out} has no meta.json'}, so the run of {others} cannot be told"


def write_atomic(path, write) -> None:
    """Write a file through a temporary of this writer's own in the same folder and ``os.replace``: a crash
    leaves the old file, and concurrent writers never touch each other's temporaries.

    A full device raises :class:`DiskFullError` naming the directory (the temporary is removed and the previous
    file is untouched); torch reports it as a RuntimeError from its zip writer, numpy and json as OSError. A
    directory that cannot be written raises :class:`ReadOnlyRunError` naming the directory (not the temporary);
    one that no longer exists (moved, renamed or deleted while a run writes it) :class:`RunFolderMovedError`.
    """
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException as exc:                       # also Ctrl-C: no temporary is left behind
        try:
            tmp.unlink(missing_ok=True)
        except OSError:
            pass
        if not isinstance(exc, (OSError, RuntimeError)):
            raise
        if not path.parent.is_dir():                 # torch: "Parent directory ... does not exist" (RuntimeError)
            raise RunFolderMovedError(_moved_message(path.parent, None)) from None
        if isinstance(exc, PermissionError) or getattr(exc, "errno", None) == errno.EROFS:
            raise ReadOnlyRunError(f"cannot write {path.name} into {path.parent} ({exc.strerror or exc}); choose a "
                                   f"writable --out, or make the directory writable.") from None
        full = getattr(exc, "errno", None) == errno.ENOSPC
        if not full:
            try:
                full = shutil.disk_usage(path.parent).free < 64 * 2 ** 20
            except OSError:
                pass
        if full:
            raise DiskFullError(errno.ENOSPC, f"no space left on the device of {path.parent} while writing {path.name}; "
                                f"the files of the last complete epoch are intact. Free some space and continue with "
                                f"--resume.") from None
        raise


def write_json(path, obj) -> None:
    """Write ``obj`` as JSON (no NaN: write None for a missing number) through :func:`write_atomic`."""
    write_atomic(path, lambda p: p.write_text(json.dumps(obj, indent=1, allow_nan=False)))


def write_logits(path, arrays: dict) -> None:
    """Write the arrays of :data:`LOGIT_KEYS` as a compressed ``.npz`` through :func:`write_atomic`."""
    def write(tmp: Path) -> None:
        with open(tmp, "wb") as fh:                    # a file object: numpy would add ".npz" to a path
            np.savez_compressed(fh, **{k: arrays[k] for k in LOGIT_KEYS})

    write_atomic(path, write)


def remove_temporaries(out) -> None:
    """Remove the temporaries a killed writer left in ``out`` (call it holding the :class:`RunLock`)."""
    for leftover in Path(out).glob(_TMP_GLOB):
        try:
            leftover.unlink()
        except OSError:
            pass


def _same_file(fd: int, path: Path) -> bool:
    """The open file ``fd`` is the file at ``path`` (not one removed from it since it was opened)."""
    try:
        here = os.stat(path)
    except FileNotFoundError:
        return False
    there = os.fstat(fd)
    return (here.st_dev, here.st_ino) == (there.st_dev, there.st_ino)


class RunLock:
    """An exclusive lock on a run directory (``flock`` on ``.calib-train.lock``) for the lifetime of a run.

    A second process on the same directory is refused at once, naming the holder. The kernel releases the lock
    when its process dies, so a run killed with SIGKILL leaves no stale lock. Where ``fcntl`` does not exist
    (Windows) there is no lock.

    The lock's open file follows its folder: :meth:`check_in_place` tells a writer that the folder was moved,
    renamed or deleted since it was locked (a new folder at the old path is not the locked one), before it writes
    into whatever is at the path now.
    """

    NAME = ".calib-train.lock"

    def __init__(self, out):
        self.path = Path(out) / self.NAME
        self.fd: int | None = None

    def __enter__(self) -> "RunLock":
        try:
            import fcntl
        except ImportError:
            return self
        while True:
            try:
                self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            except OSError:                        # a read-only directory: nobody can write to it, nothing to lock
                return self
            try:
                fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.read(self.fd, 200).decode(errors="replace").strip() or "a process"
                os.close(self.fd)
                self.fd = None
                raise RunLockedError(f"{self.path.parent} is being written by another calib train ({holder}); wait "
                                     f"for it to finish, or choose another --out.", holder=holder) from None
            # The holder before us removes the lock file as it releases it: a lock taken on that removed file
            # locks nothing a third process can see, so take it again on the file now at the path.
            if _same_file(self.fd, self.path):
                break
            os.close(self.fd)
            self.fd = None
        os.ftruncate(self.fd, 0)
        os.write(self.fd, f"pid {os.getpid()} on {platform.node()}, since {time.strftime('%H:%M:%S')}".encode())
        return self

    def check_in_place(self) -> None:
        """Raise :class:`RunFolderMovedError` when the locked folder is no longer at its path (moved, renamed or
        deleted since it was locked), naming the old path, where it went (when the system says) and how to resume;
        nothing when it is in place or there is no lock (no ``fcntl``, a read-only folder)."""
        if self.fd is None or _same_file(self.fd, self.path):
            return
        now = _open_path(self.fd)
        raise RunFolderMovedError(_moved_message(self.path.parent, None if now is None else now.parent))

    def release(self, remove: bool = False) -> None:
        """Release the lock (closing its file); ``remove`` deletes the lock file first: the one this lock holds,
        wherever its folder was moved (a lock file now at the path, another's, is left alone)."""
        if self.fd is not None:
            if remove:
                held = self.path if _same_file(self.fd, self.path) else _open_path(self.fd)
                if held is not None:
                    held.unlink(missing_ok=True)
            os.close(self.fd)                      # closing releases the lock
            self.fd = None

    def __exit__(self, *exc) -> None:
        self.release(remove=True)                  # also after an error: no lock file is left in the directory


# ----------------------------------------------------------------------------------------------------------
# provenance: where a run was computed (meta.json's device_name, git_commit, git_dirty)
# ----------------------------------------------------------------------------------------------------------

def git_commit() -> str | None:
    """The commit of the git checkout that holds calib (``git rev-parse HEAD``); None outside a checkout or
    without git."""
    here = Path(__file__).resolve().parent.parent
    try:
        out = subprocess.run(["git", "-C", str(here), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def git_dirty() -> bool | None:
    """Whether the library's files differ from the recorded commit (uncommitted changes under calib/)."""
    here = Path(__file__).resolve().parent.parent
    try:
        out = subprocess.run(["git", "-C", str(here), "status", "--porcelain", "--untracked-files=no", "--", "calib"],
                             capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return bool(out.stdout.strip()) if out.returncode == 0 else None


def device_name(device) -> str:
    """The name of a ``torch.device``: the GPU's name for CUDA, the CPU's model and core count otherwise."""
    if device.type == "cuda":
        import torch

        return torch.cuda.get_device_name(device)
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return f"CPU: {line.split(':', 1)[1].strip()} ({os.cpu_count()} cores)"
    except OSError:
        pass
    return f"CPU: {platform.processor() or platform.machine()} ({os.cpu_count()} cores)"
