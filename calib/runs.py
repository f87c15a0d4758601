"""The run directory: the one module that reads and writes it (``calib.train`` trains and writes runs through
:class:`RunFolder`, ``calib.experiments`` reads the store through it).

A run directory holds

``meta.json``      config, versions, device, CPU instruction set, git commit, wall time, ``finished``
``history.json``   per-epoch diagnostics (:meth:`calib.train.Trainer.diagnose`)
``logits.npz``     ``val_logits``, ``val_labels``, ``test_logits``, ``test_labels`` of the final model
``checkpoint.pt``  model, optimiser, scheduler and random states after the last finished epoch
``weights.npz``    the final network's parameters (float16 or float32), only when asked (``--weights``)

and, while a process writes it, the lock ``.calib-train.lock``. :class:`RunFolder` is the folder of one run as
its writer sees it: made, locked, checked against the run's configuration (new, to resume or done: another
configuration, CPU instruction set or number of processes is refused), cleared for a restart, written.

Every file is written through a temporary file of its own (``.<name>.<pid>.<random>.tmp``), flushed to the
device (``os.fsync``), then ``os.replace`` and a flush of the folder, so a crash or a power cut leaves the previous
file or the new one whole, and two writers never share a temporary. Each damaged file is reported by a named
error that names the file and what to do (:class:`CorruptRunError`); a logits file is read without pickles
(``allow_pickle=False``) and a checkpoint with ``torch.load(weights_only=True)``, so a store can never run code.
The provenance that ``meta.json`` records (:func:`git_commit`, :func:`git_dirty`, :func:`device_name`) is taken
here too.
"""

from __future__ import annotations

import errno
import json
import os
import platform
import re
import secrets
import shutil
import subprocess
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

import numpy as np

__all__ = ["META", "HISTORY", "LOGITS", "CHECKPOINT", "RUN_FILES", "DISCARDABLE", "LOGIT_KEYS", "Run", "load_run",
           "read_json_object", "read_logits", "compact_logits", "LOGIT_DTYPES", "stored_splits", "read_checkpoint",
           "write_atomic", "write_json", "write_logits", "RunLock", "RunFolder", "check_world_size",
           "remove_temporaries", "run_owner", "RunLockedError", "CorruptRunError", "DiskFullError",
           "RunConfigError", "ReadOnlyRunError", "RunFolderMovedError", "git_commit", "git_dirty", "device_name"]
__all__ += ["WEIGHTS", "WEIGHT_DTYPES", "write_weights", "read_weights"]

#: The run's metadata (config, versions, device, CPU instruction set, git commit, wall time, ``finished``).
META = "meta.json"
#: The per-epoch diagnostics.
HISTORY = "history.json"
#: The final model's validation and test logits and labels.
LOGITS = "logits.npz"
#: Everything an exact resume needs, after the last finished epoch.
CHECKPOINT = "checkpoint.pt"
#: The final network's parameters and buffers, written only when asked (``calib train --weights float16``).
WEIGHTS = "weights.npz"
#: The float types :func:`write_weights` may store a network's floating-point tensors in.
WEIGHT_DTYPES = ("float16", "float32")
#: The files of a run, in the order a run writes them.
RUN_FILES = (META, HISTORY, CHECKPOINT, LOGITS, WEIGHTS)
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
        """``val_logits``, ``val_labels``, ``test_logits``, ``test_labels`` (numpy arrays) of the splits the run
        keeps (:func:`stored_splits`), checked (:func:`read_logits`)."""
        return read_logits(self.out / LOGITS, splits=stored_splits(self.out / LOGITS))


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


def stored_splits(path) -> tuple:
    """The splits (``"val"``, ``"test"``) whose logits and labels a ``logits.npz`` holds, read from the archive's
    directory alone; a file that is no .npz archive or holds neither split raises :class:`CorruptRunError`.
    Chapter 10's tuning runs keep ``("val",)``; chapter 12's grid runs, which keep their network, ``("test",)``
    (their validation logits are the network's, recomputed)."""
    path = Path(path)
    try:
        with np.load(path, allow_pickle=False) as npz:
            files = set(npz.files) if isinstance(npz, np.lib.npyio.NpzFile) else set()
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
        if isinstance(exc, FileNotFoundError):
            raise
        files = set()
    splits = tuple(s for s in ("val", "test") if {f"{s}_logits", f"{s}_labels"} <= files)
    if not splits:
        raise CorruptRunError(f"{path} is damaged (no logits and labels of a split); train the run again "
                              f"(calib train --from-meta {path.parent / META} --out {path.parent} --restart), or "
                              f"delete {path.parent} if the run is not needed.")
    return splits


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
        if z.dtype == np.float16:                       # compacted (compact_logits): computed on in float32
            arrays[f"{split}_logits"] = z.astype(np.float32)
    return arrays


def _numpy_array_globals() -> list:
    """What unpickling a numpy array of numbers needs (numpy's ``_reconstruct``, ``ndarray``, ``dtype`` and the
    classes of the numeric dtypes): the random state of a checkpoint written before calib stored it as a tensor
    (:meth:`RunFolder.write_checkpoint`)."""
    numeric = {type(np.dtype(code)) for code in "?bBhHiIlLqQefdg"}
    return [np.zeros(1).__reduce__()[0], np.ndarray, np.dtype, *sorted(numeric, key=lambda c: c.__name__)]


def read_checkpoint(path, device, fix: str = "start the run over with --restart (restart=True), or restore the "
                                             "file") -> dict:
    """``checkpoint.pt`` as :meth:`RunFolder.write_checkpoint` wrote it, or :class:`CorruptRunError` naming the file.

    It is loaded with ``torch.load(weights_only=True)``, torch's restricted unpickler, which builds tensors, dicts,
    lists, tuples, numbers and strings (and the ``Counter`` of a scheduler's milestones) and calls nothing else: a
    file planted in a run folder cannot run code when a resume, ``--restart`` or :func:`run_owner` reads it for its
    config. Numpy's plain arrays are allowed as well (``_numpy_array_globals``), for the random state of a
    checkpoint written before calib stored it as a tensor.
    """
    import torch

    path = Path(path)
    try:
        with torch.serialization.safe_globals(_numpy_array_globals()):
            state = torch.load(path, map_location=device, weights_only=True)
    except Exception as exc:  # torch.load raises UnpicklingError, EOFError, RuntimeError, ... on a damaged file
        text = str(exc)
        unsafe = re.search(r"Unsupported global: GLOBAL (\S+)", text)
        if unsafe:
            raise CorruptRunError(f"{path} holds a Python object ({unsafe.group(1)}) that no calib checkpoint holds, "
                                  f"and calib loads checkpoints with torch.load(weights_only=True), which never runs "
                                  f"such code; it was not written by calib train. {fix[0].upper()}{fix[1:]}.") from None
        reason = re.search(r"WeightsUnpickler error:\s*(.+)", text)
        why = reason.group(1).strip() if reason else text
        raise CorruptRunError(f"{path} is corrupted or truncated ({type(exc).__name__}: {why[:120]}); it cannot "
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

    Durable: the temporary is flushed to the device (``os.fsync``) before it replaces the file, and the folder
    after it (its new entry), so that a power cut or a kernel crash leaves the old file or the new one whole: without
    the first, ext4 and XFS may commit the rename before the data, leaving an empty or truncated file under the
    name; without the second, the rename itself may be lost.

    A full device raises :class:`DiskFullError` naming the directory (the temporary is removed and the previous
    file is untouched); torch reports it as a RuntimeError from its zip writer, numpy and json as OSError. A
    directory that cannot be written raises :class:`ReadOnlyRunError` naming the directory (not the temporary);
    one that no longer exists (moved, renamed or deleted while a run writes it) :class:`RunFolderMovedError`.
    """
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    try:
        write(tmp)
        _fsync_file(tmp)
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
            raise ReadOnlyRunError(f"cannot write {path.name} into {path.parent} "
                                   f"({cast(OSError, exc).strerror or exc}); choose a "
                                   f"writable --out, or make the directory writable.") from None
        full = getattr(exc, "errno", None) == errno.ENOSPC
        if not full:
            try:
                full = shutil.disk_usage(path.parent).free < 64 * 2 ** 20
            except OSError:
                pass
        if full:
            raise DiskFullError(errno.ENOSPC, f"no space left on the device of {path.parent} while writing "
                                f"{path.name}; the files of the last complete epoch are intact. Free some space and "
                                f"continue with "
                                f"--resume.") from None
        raise
    _fsync_directory(path.parent)


def _fsync_file(path: Path) -> None:
    """Flush the file ``path``'s data to its device."""
    fd = os.open(path, os.O_RDWR)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_directory(folder: Path) -> None:
    """Flush the folder's entries (a rename into it) to its device, where the system can: not on Windows, whose
    folders cannot be opened, nor on a file system that cannot flush a folder (EINVAL; some network ones)."""
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError as exc:
        if exc.errno not in (errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EBADF):
            raise
    finally:
        os.close(fd)


def write_json(path, obj) -> None:
    """Write ``obj`` as JSON (no NaN: write None for a missing number) through :func:`write_atomic`."""
    write_atomic(path, lambda p: p.write_text(json.dumps(obj, indent=1, allow_nan=False)))


def write_logits(path, arrays: dict) -> None:
    """Write the arrays of :data:`LOGIT_KEYS` as a compressed ``.npz`` through :func:`write_atomic`."""
    def write(tmp: Path) -> None:
        with open(tmp, "wb") as fh:                    # a file object: numpy would add ".npz" to a path
            np.savez_compressed(fh, **{k: arrays[k] for k in LOGIT_KEYS})

    write_atomic(path, write)


#: The float types :func:`compact_logits` stores logits in.
LOGIT_DTYPES = ("float16",)


def compact_logits(path, dtype: str = "float16") -> None:
    """Rewrite the ``logits.npz`` at ``path`` with its logits in ``dtype`` (labels unchanged), through
    :func:`write_atomic`: about half the file of float32 logits. :func:`read_logits` returns them as float32, the
    float16 values exactly, so every reader computes as before on logits rounded to 11 significant bits (a
    logit of 10 moves by at most 0.004). Chapter 10 keeps the logits of the runs it added last this way to fit the
    store. A logit beyond float16's range (65,504) raises ValueError and leaves the file as it was."""
    if dtype not in LOGIT_DTYPES:
        raise ValueError(f"dtype={dtype!r} is not a logits dtype; choose one of {', '.join(LOGIT_DTYPES)}.")
    path = Path(path)
    arrays = read_logits(path, splits=stored_splits(path))
    limit = float(np.finfo(dtype).max)
    for key in [k for k in arrays if k.endswith("_logits")]:
        z = arrays[key]
        if not np.all(np.isfinite(z)) or np.abs(z).max(initial=0.0) > limit:
            raise ValueError(f"{path}: {key} holds values beyond float16's range (|z| <= {limit:g}, finite); keep "
                             f"this run's logits as they are.")
        arrays[key] = z.astype(dtype)

    def write(tmp: Path) -> None:
        with open(tmp, "wb") as fh:
            np.savez_compressed(fh, **arrays)

    write_atomic(path, write)


def write_weights(path, state: dict, dtype: str = "float16") -> None:
    """Write a network's ``state_dict`` as a compressed ``.npz`` of plain arrays through :func:`write_atomic`, its
    floating-point tensors in ``dtype`` (one of :data:`WEIGHT_DTYPES`) and the others (a batch-norm counter) as
    they are. float16 halves the file of float32 (an MLP 256-256 on 784 inputs: 0.5 MB for 269,322 parameters)
    and rounds each weight to 11 significant bits; a weight beyond float16's range (65,504) raises ValueError
    naming it, never an infinity in the file. Read it back with :func:`read_weights`.
    """
    if dtype not in WEIGHT_DTYPES:
        raise ValueError(f"dtype={dtype!r} is not a weight type; choose one of {', '.join(WEIGHT_DTYPES)}.")
    if not isinstance(state, dict) or not state:
        raise ValueError("state must be a network's non-empty state_dict (name -> tensor or array).")
    arrays: dict = {}
    for name, value in state.items():
        if not isinstance(name, str) or not name or name.startswith("_") or "/" in name:
            raise ValueError(f"state has the key {name!r}; a state_dict's names are non-empty strings without '/' "
                             f"that do not start with '_'.")
        array = np.asarray(value.detach().cpu().numpy() if hasattr(value, "detach") else value)
        if array.dtype.kind == "f":
            if not np.all(np.isfinite(array)):
                raise ValueError(f"state[{name!r}] holds non-finite values; a diverged network has no weights to "
                                 f"store.")
            with np.errstate(over="ignore"):
                cast = array.astype(dtype)
            if not np.all(np.isfinite(cast)):
                raise ValueError(f"state[{name!r}] holds values beyond {dtype}'s range (largest |w| = "
                                 f"{np.abs(array).max():.4g}); store the weights as float32.")
            array = cast
        elif array.dtype.kind not in "iub":
            raise ValueError(f"state[{name!r}] is of dtype {array.dtype}, not a number; a state_dict holds tensors.")
        arrays[name] = array

    def write(tmp: Path) -> None:
        with open(tmp, "wb") as fh:
            np.savez_compressed(fh, **arrays)

    write_atomic(path, write)


def read_weights(path) -> dict:
    """The arrays of a ``weights.npz`` (:func:`write_weights`), name -> numpy array in the stored dtype, read
    without pickles (``allow_pickle=False``); a damaged or foreign file raises :class:`CorruptRunError` naming it.
    ``torch.nn.Module.load_state_dict({k: torch.from_numpy(v.astype(np.float32)) ...})`` loads them back."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist: the run was trained without --weights (a grid's "
                                f"weights = \"float16\" keeps them); retrain it with them to read its network.")
    fix = (f"the network is lost; retrain it (calib train --from-meta {path.parent / META} --out DIR --weights "
           f"float16)")
    try:
        with np.load(path, allow_pickle=False) as npz:
            arrays = {k: npz[k] for k in npz.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile, AttributeError) as exc:
        raise CorruptRunError(f"{path} is damaged ({type(exc).__name__}: {str(exc)[:80]}); {fix}.") from None
    if not arrays or any(a.dtype.kind not in "fiub" for a in arrays.values()):
        raise CorruptRunError(f"{path} holds no arrays of numbers, so it is not a weights file calib wrote; {fix}.")
    return arrays


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
# the run directory of one run, as its writer sees it (calib.train.Trainer trains; this owns the folder)
# ----------------------------------------------------------------------------------------------------------

def check_world_size(meta: dict, world_size: int, what: str, command: str, otherwise: str = "") -> None:
    """Refuse to train a run on another number of processes than its ``meta.json`` records (``world_size``, 1 when
    absent: calib recorded none before it trained across processes): the world size is part of a run's identity,
    as its CPU instruction set is. ``what`` begins the message (e.g. "RUN/meta.json records"), ``command`` is the
    ``calib train ...`` command that does it when launched with the recorded number of processes, ``otherwise``
    another way out. Raises :class:`RunConfigError` (a ValueError), or CorruptRunError when the recorded number is
    not an integer >= 1."""
    recorded = meta.get("world_size", 1)
    if isinstance(recorded, bool) or not isinstance(recorded, int) or recorded < 1:
        raise CorruptRunError(f"{what} world_size={recorded!r}, which is not a number of processes (an integer "
                              f">= 1); the file is damaged or was not written by calib train. Restore it.")
    if recorded == world_size:
        return

    def processes(n: int) -> str:
        return "one process" if n == 1 else f"{n} processes (torchrun --nproc_per_node {n})"

    launch = f"torchrun --standalone --nproc_per_node {recorded} -m {command}" if recorded > 1 else command
    raise RunConfigError(
        f"{what} a run trained by {processes(recorded)}, and this launch has {processes(world_size)}: the number "
        f"of processes is part of a run's identity (the gradient is summed in another order, and training "
        f"amplifies the difference into other logits). Launch it with {recorded} "
        f"process{'es' if recorded > 1 else ''}: {launch}{otherwise}.")


class RunFolder:
    """The run directory of one training run, as the process that writes it sees it: made, locked, checked
    against the run's configuration (new, to resume, or done), cleared for a restart, and written file by file
    through :func:`write_atomic`. :class:`calib.train.Trainer` trains; this class owns the folder.

    Parameters
    ----------
    out : path
        The run directory.
    identity : dict
        The run's configuration as ``meta.json`` records it (``TrainConfig.identity()``): a folder that holds
        another is refused, and ``restart`` deletes only a run of this one.
    world_size : int
        The processes of the launch (``torchrun``); a run is resumed only by as many as it began with.
    """

    def __init__(self, out, identity: dict, world_size: int = 1):
        self.out = Path(out)
        self.identity = identity
        self.world_size = int(world_size)
        self.lock: RunLock | None = None            # held between acquire() and release()

    # ------------------------------------------------------------------------------- the folder and its lock
    def make(self) -> None:
        """Create the folder (and its parents), or raise a ValueError naming what is in the way."""
        if (self.out / META).is_file():
            return                                      # an existing run (maybe read-only, e.g. a stored one)
        try:
            self.out.mkdir(parents=True, exist_ok=True)
        except FileExistsError:
            if self.out.is_symlink() and not self.out.exists():
                raise ValueError(f"out {self.out} is a dangling symlink (to {os.readlink(self.out)}, which does not "
                                 f"exist); remove the link, or point it at a folder.") from None
            raise ValueError(f"out {self.out} is a file, not a directory; choose another --out.") from None
        except NotADirectoryError:
            raise ValueError(f"out {self.out} lies under a file; choose another --out.") from None
        except PermissionError:
            raise ReadOnlyRunError(f"out {self.out} cannot be created (permission denied); choose a writable "
                                   f"--out.") from None
        if not self.out.is_dir():
            raise ValueError(f"out {self.out} is not a directory; choose another --out.")

    def acquire(self) -> None:
        """Make the folder and take its :class:`RunLock` (:class:`RunLockedError` when another process holds it)."""
        self.make()
        self.lock = RunLock(self.out).__enter__()

    def release(self) -> None:
        """Release the lock and remove its file (nothing when none is held)."""
        if self.lock is not None:
            self.lock.release(remove=True)
            self.lock = None

    def check_in_place(self) -> None:
        """:class:`RunFolderMovedError` when the locked folder was moved, renamed or deleted
        (:meth:`RunLock.check_in_place`)."""
        if self.lock is not None:
            self.lock.check_in_place()

    # --------------------------------------------------------------------------- what the folder holds
    def prepare(self, resume: bool, restart: bool, device_type: str) -> str:
        """Under the lock: remove a killed run's temporaries, clear for ``restart``, and return ``"new"``,
        ``"resume"`` or ``"done"`` (:meth:`check`), refusing a directory that cannot be written."""
        remove_temporaries(self.out)                   # temporaries of a killed run
        if restart:
            self.clear_for_restart()
        state = self.check(resume, device_type)
        if state != "done" and not os.access(self.out, os.W_OK):
            raise ReadOnlyRunError(f"out {self.out} is not writable; choose a writable --out, or make the "
                                   f"directory writable.")
        return state

    def check(self, resume: bool, device_type: str) -> str:
        """``"new"``, ``"resume"`` or ``"done"`` for the run directory; RunConfigError when it holds a
        different run (or an unfinished one and ``resume`` is off, or one begun under another CPU instruction
        set, on a run trained on ``device_type`` ``"cpu"``, or by another number of processes); CorruptRunError
        when a file it needs is damaged."""
        meta_path, ckpt = self.out / META, self.out / CHECKPOINT
        if not meta_path.is_file() and not ckpt.is_file():
            return "new"
        meta = {}
        if meta_path.is_file():
            try:
                meta = read_json_object(meta_path)
            except CorruptRunError:
                read_json_object(meta_path, fix=self.restart_advice())     # the same error, safe advice
            if not isinstance(meta.get("config"), dict) or "versions" not in meta:
                raise RunConfigError(f"{meta_path} was not written by calib train (it has no config and versions); "
                                     f"refusing to touch {self.out}. Choose another --out.")
        old = meta.get("config") or read_checkpoint(ckpt, "cpu", fix=self.restart_advice())["config"]
        diff = {k: (old.get(k), v) for k, v in self.identity.items() if old.get(k) != v}
        if diff:
            what = "; ".join(f"{k}: {a!r} there, {b!r} here" for k, (a, b) in diff.items())
            raise RunConfigError(f"{self.out} holds a run of another configuration ({what}); refusing to "
                                 f"{'resume' if resume else 'overwrite'} it. Choose another --out or delete that "
                                 f"directory.")
        if meta.get("finished"):
            if (self.out / LOGITS).is_file():
                path = self.out / LOGITS                # a finished run is done only with whole logits
                read_logits(path, splits=stored_splits(path))
            return "done"
        if not resume:
            raise RunConfigError(f"{self.out} holds an unfinished run of this configuration; pass --resume "
                                 f"(resume=True) to continue it, or delete the directory to start over.")
        if not ckpt.is_file():
            return "new"
        self.check_cpu_kernels(meta, device_type)
        check_world_size(meta, self.world_size, f"{self.out} holds",
                         f"calib train --from-meta {self.out / META} --out {self.out} --resume",
                         ", or start it over with --restart")
        return "resume"

    def restart_advice(self) -> str:
        """What a damaged file's message advises: ``--restart`` only where it cannot delete another run."""
        owner, why = run_owner(self.out, self.identity)
        if owner in ("same", "none"):
            return "restore it, or start the run over with --restart (restart=True)"
        return (f"restore it, or choose another --out ({why}, and --restart deletes only a run of this "
                f"configuration)")

    def clear_for_restart(self) -> None:
        """``restart``: remove the run's files when they are a run of this configuration written by calib (its
        readable ``meta.json`` or, that one damaged, its checkpoint says so) or a lone damaged ``meta.json``;
        refuse otherwise, deleting nothing (:func:`run_owner`)."""
        owner, why = run_owner(self.out, self.identity)
        if owner not in ("same", "none"):
            raise RunConfigError(f"{why}; --restart only starts over a run of this configuration written by calib "
                                 f"train, and deletes nothing else. Choose another --out, or move that directory "
                                 f"away yourself.")
        for name in RUN_FILES:
            (self.out / name).unlink(missing_ok=True)

    def check_cpu_kernels(self, meta: dict, device_type: str) -> None:
        """Refuse to resume on the CPU under another instruction set than the run began with (float32 SGD does not
        continue bit for bit across AVX2 and AVX-512 kernels: the logits of chapter 10's grid differ by a
        logit and more), naming both settings; nothing for a run on ``device_type`` other than ``"cpu"``."""
        from calib._reproducible import cpu_kernel_setting, kernel_fingerprint

        if device_type != "cpu" or not str(meta.get("device", "cpu")).startswith("cpu"):
            return
        now = cpu_kernel_setting()
        then = {"capability": meta.get("cpu_capability", now["capability"]),
                "variables": meta.get("cpu_kernels", now["variables"])}
        if then != now:
            def text(setting):
                set_vars = ", ".join(f"{k}={v}" for k, v in setting["variables"].items() if v is not None)
                return set_vars or "no variable set"

            if then["capability"] == now["capability"]:    # one instruction set for torch, other variables
                what = (f"this process runs {now['capability']} too but under other variables ({text(now)}), which "
                        f"also choose MKL's and oneDNN's kernels; a resume is refused unless they match, since float32 "
                        f"training continues bit for bit only under the setting it began with")
            else:
                what = (f"this process runs {now['capability']} ({text(now)}); float32 training does not continue "
                        f"bit for bit across instruction sets, so a run resumed here would match neither")
            raise RunConfigError(f"{self.out} was begun with torch's CPU kernels on {then['capability']} "
                                 f"({text(then)}), and {what}. Resume it under the variables it began with, or start "
                                 f"it over with --restart.")
        recorded = (meta.get("cpu_fingerprint") or {}).get("torch")
        here = kernel_fingerprint()
        if recorded and meta["cpu_fingerprint"].get("version") == here["version"] and recorded != here["torch"]:
            raise RunConfigError(f"{self.out} was begun on a CPU whose float32 kernels compute otherwise than this "
                                 f"one's under the same setting (kernel fingerprint {recorded} then, {here['torch']} "
                                 f"here: MKL also picks its kernels by the CPU's vendor, calib._reproducible), so a "
                                 f"run resumed here would continue neither run bit for bit. Resume it on a machine "
                                 f"like the one it began on ({meta.get('device_name')}), or start it over with "
                                 f"--restart.")

    # ------------------------------------------------------------------------------------------- writing
    def write_meta(self, meta: dict) -> None:
        """Write ``meta.json``."""
        write_json(self.out / META, meta)

    def write_history(self, history: dict) -> None:
        """Write ``history.json``."""
        write_json(self.out / HISTORY, history)

    def write_checkpoint(self, state: dict) -> None:
        """Write ``checkpoint.pt`` (``torch.save`` of ``state``: tensors, dicts, lists, numbers and strings, which
        :func:`read_checkpoint` loads with ``weights_only=True``)."""
        import torch

        write_atomic(self.out / CHECKPOINT, lambda p: torch.save(state, p))

    def read_checkpoint(self, device) -> dict:
        """``checkpoint.pt``, its tensors on ``device`` (:func:`read_checkpoint`)."""
        return read_checkpoint(self.out / CHECKPOINT, device)

    def write_logits(self, arrays: dict) -> None:
        """Write ``logits.npz`` (:func:`write_logits`)."""
        write_logits(self.out / LOGITS, arrays)

    def write_weights(self, state: dict, dtype: str) -> None:
        """Write ``weights.npz`` (:func:`write_weights`)."""
        write_weights(self.out / WEIGHTS, state, dtype)

    def discard(self, names) -> None:
        """Delete the files ``names`` of :data:`DISCARDABLE` (a finished run's checkpoint or logits)."""
        for name in names:
            if name not in DISCARDABLE:
                raise ValueError(f"discard={name!r}: only {', '.join(DISCARDABLE)} may be deleted from a run.")
            (self.out / name).unlink(missing_ok=True)


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
