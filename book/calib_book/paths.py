"""Where the book's files are, wherever a notebook is opened: one locator for every chapter.

A chapter names a stored file by its path in the repository, ``book_file("book/results/10-benchmark")``, and
this finds the book's root folder:

1. the folder named by the environment variable ``CALIB_BOOK_ROOT``, when it is set;
2. else the nearest folder at or above the working directory that holds the book (``_toc.yml`` beside ``calib/``,
   :func:`calib_book.claims.find_repo_root`) or a course bundle (a :data:`BUNDLE_MARKER` file, written by
   ``make course`` at the top of ``_build/course/student``);
3. else the folder that holds this package (``<root>/book/calib_book`` in a checkout, ``<root>/calib_book`` in a
   course bundle).

So a chapter runs from the repository root (the runner), from ``chapters/`` (Jupyter opened there), and from a
student's copy of the course bundle alike.
"""

from __future__ import annotations

import os
from pathlib import Path

from calib_book.claims import find_repo_root

__all__ = ["ROOT_VARIABLE", "BUNDLE_MARKER", "book_root", "book_file"]

#: The environment variable that names the book's root folder, overriding every search.
ROOT_VARIABLE = "CALIB_BOOK_ROOT"

#: The file that marks the top of a course bundle (``_build/course/student``).
BUNDLE_MARKER = ".calib-book-root"


def _holds_book(folder: Path) -> bool:
    return (folder / BUNDLE_MARKER).is_file() or ((folder / "_toc.yml").is_file() and (folder / "calib").is_dir())


def book_root(start: str | os.PathLike | None = None) -> Path:
    """The book's root folder: ``$CALIB_BOOK_ROOT``, else the nearest book or course bundle at or above ``start``
    (default: the working directory), else the one that holds this package.

    Raises
    ------
    FileNotFoundError
        ``CALIB_BOOK_ROOT`` names a folder that does not exist, or no book is found; the message says what to set.
    """
    named = os.environ.get(ROOT_VARIABLE)
    if named:
        root = Path(named).expanduser().resolve()
        if not root.is_dir():
            raise FileNotFoundError(f"{ROOT_VARIABLE}={named!r} is not a folder: set it to the book's root (the "
                                    f"folder with _toc.yml, or the course bundle's folder with {BUNDLE_MARKER}), or "
                                    f"unset it.")
        return root
    here = Path(start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / BUNDLE_MARKER).is_file():
            return folder
    found = find_repo_root(here)
    if found is not None:
        return found
    package = Path(__file__).resolve().parent
    for folder in package.parents[:2]:
        if _holds_book(folder):
            return folder
    raise FileNotFoundError(f"no book found at or above {here}, nor around {package}: open the notebook inside the "
                            f"repository or the course bundle, or set {ROOT_VARIABLE} to its folder.")


def book_file(relative: str | os.PathLike, *, must_exist: bool = True) -> Path:
    """The absolute path of ``relative`` (a path in the repository, e.g. ``"book/results/10-benchmark"``).

    Raises
    ------
    ValueError
        ``relative`` is absolute: give the path inside the repository.
    FileNotFoundError
        ``must_exist`` and the file or folder is not there; the message names the root searched and the fix.
    """
    relative = Path(relative)
    if relative.is_absolute():
        raise ValueError(f"book_file({str(relative)!r}): give the path inside the repository, e.g. "
                         f"'book/results/10-benchmark', not an absolute one.")
    root = book_root()
    path = root / relative
    if must_exist and not path.exists():
        raise FileNotFoundError(f"{relative} is not in the book at {root}: run from the repository or the course "
                                f"bundle that holds it, or set {ROOT_VARIABLE} to the folder that does.")
    return path
