"""The claims ledger: every checkable statement a chapter makes, with the verdict the book asserts.

A chapter records a claim with :func:`claim`. ``passed`` is computed in the chapter and says whether the
computation confirms the verdict:

- ``verdict="holds"``: the paper's statement is true; ``passed`` is the check of the statement.
- ``verdict="fails"``: the statement is false as printed; ``passed`` is the check that exhibits the
  failure (a counterexample found, a value off by more than the tolerance).
- ``verdict="holds-as-corrected"``: the printed statement is wrong but a corrected one (``correction``)
  holds; ``passed`` is the check of the corrected statement (and, where useful, of the failure).

A claim whose ``passed`` is False raises :class:`ClaimError`, so a chapter run fails as soon as the book
stops being true. Each record is appended as one JSON line to the ledger file: ``$CALIB_LEDGER`` when the
book runner sets it, else ``_build/claims.jsonl`` under the repository root found from the working
directory, else nowhere (the record is still returned and kept in :data:`RECORDS`).
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

VERDICTS = ("holds", "fails", "holds-as-corrected")

#: Claims recorded in this process, in order.
RECORDS: list["Claim"] = []


class ClaimError(AssertionError):
    """A claim's computed outcome contradicts the verdict the book asserts."""


@dataclass(frozen=True)
class Claim:
    id: str
    paper: str
    where: str
    statement: str
    verdict: str
    passed: bool
    evidence: str
    chapter: str
    correction: str = ""


def _repo_root(start: Path) -> Path | None:
    for folder in (start, *start.parents):
        if (folder / "_toc.yml").is_file() and (folder / "calib").is_dir():
            return folder
    return None


def ledger_path() -> Path | None:
    """Where :func:`claim` appends its records (None: keep them in memory only)."""
    env = os.environ.get("CALIB_LEDGER")
    if env:
        return Path(env)
    root = _repo_root(Path.cwd().resolve())
    return root / "_build" / "claims.jsonl" if root else None


def current_chapter() -> str:
    """The chapter being executed: ``$CALIB_CHAPTER`` (set by the book runner), else ``"interactive"``."""
    return os.environ.get("CALIB_CHAPTER", "interactive")


def claim(id: str, statement: str, *, verdict: str = "holds", passed, evidence: str = "", paper: str | None = None,
          where: str = "", correction: str = "") -> Claim:
    """Record a checkable statement and fail loudly if the computation does not confirm its verdict.

    Parameters
    ----------
    id : str
        ``"<paper>/<short-name>"``, e.g. ``"mukhoti2020/prop2"``; unique within the book.
    statement : str
        The paper's statement, in the paper's words where possible.
    verdict : {"holds", "fails", "holds-as-corrected"}
        What the book asserts about the statement.
    passed : bool
        Computed in the chapter: True when the computation confirms the verdict. Never typed in.
    evidence : str
        The measured numbers behind ``passed`` (errors, counts, counterexamples).
    paper : str, optional
        Paper key; defaults to the part of ``id`` before the first ``/``.
    where : str
        Location in the paper (section, equation, proposition, table).
    correction : str
        For ``"fails"`` and ``"holds-as-corrected"``: what is true instead.
    """
    if not isinstance(id, str) or "/" not in id:
        raise ValueError(f"id must look like 'paper/name'; got {id!r}.")
    if verdict not in VERDICTS:
        raise ValueError(f"verdict={verdict!r} is not supported; choose one of {', '.join(map(repr, VERDICTS))}.")
    if isinstance(passed, (np.ndarray,)) and passed.shape != ():
        raise ValueError("passed must be a single boolean; reduce the array with .all() or .any() first.")
    if not isinstance(passed, (bool, np.bool_)):
        raise ValueError(f"passed must be a boolean computed by the chapter; got {type(passed).__name__}.")
    record = Claim(id=id, paper=paper or id.split("/", 1)[0], where=where, statement=statement, verdict=verdict,
                   passed=bool(passed), evidence=evidence, chapter=current_chapter(), correction=correction)
    RECORDS.append(record)
    path = ledger_path()
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(asdict(record)) + "\n")
    mark = "ok" if record.passed else "FAILED"
    print(f"[claim {mark}] {id} ({verdict}): {evidence}")
    if not record.passed:
        raise ClaimError(
            f"claim {id!r} asserts {verdict!r} but the computation does not confirm it: {evidence or statement}"
        )
    return record


def read_ledger(path: str | os.PathLike) -> list[Claim]:
    """Read a ledger file; a later record with the same id and chapter replaces an earlier one."""
    path = Path(path)
    if not path.is_file():
        return []
    latest: dict[tuple[str, str], Claim] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            data = json.loads(line)
            data.setdefault("correction", "")
            rec = Claim(**data)
            latest[(rec.id, rec.chapter)] = rec
    return list(latest.values())


def drop_chapter(path: str | os.PathLike, chapter: str) -> None:
    """Remove a chapter's earlier records from the ledger before the chapter runs again."""
    path = Path(path)
    if not path.is_file():
        return
    keep = [line for line in path.read_text(encoding="utf-8").splitlines()
            if line.strip() and json.loads(line).get("chapter") != chapter]
    path.write_text("".join(line + "\n" for line in keep), encoding="utf-8")
