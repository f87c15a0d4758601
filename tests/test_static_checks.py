"""The static checks of the code base, at no finding: ``ruff check calib book tests`` (pyflakes and pycodestyle,
``[tool.ruff]`` in pyproject.toml) and ``mypy`` over ``calib`` (``[tool.mypy]``), each run from the checkout as a
developer runs it. Both are in the ``dev`` extra; a test is skipped, saying so, where its tool is not installed.

mypy keeps its incremental cache in ``.mypy_cache`` of the checkout (git ignores it), the folder a plain ``mypy``
there uses too: a first run analyses calib and the stubs of numpy, torch and matplotlib (a minute or two on 2
cores), a later one only what changed (seconds)."""

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _run(tool: str, *args: str) -> subprocess.CompletedProcess:
    """``python -m <tool> <args>`` in the checkout's root, with this interpreter; skips when ``tool`` is missing."""
    if importlib.util.find_spec(tool) is None:
        pytest.skip(f"{tool} is not installed in {sys.prefix}: pip install -e '.[dev]' installs it")
    return subprocess.run([sys.executable, "-m", tool, *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=900)


def test_ruff_finds_nothing():
    done = _run("ruff", "check", "calib", "book", "tests")
    assert done.returncode == 0, f"ruff check calib book tests (exit {done.returncode}):\n{done.stdout}{done.stderr}"


def test_mypy_finds_nothing():
    done = _run("mypy", "--cache-dir", str(ROOT / ".mypy_cache"))
    assert done.returncode == 0, f"mypy ([tool.mypy]: calib) (exit {done.returncode}):\n{done.stdout}{done.stderr}"
