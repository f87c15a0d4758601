"""ARCHITECTURE.md stays true: every module it names exists, its layer table is the one calib's docstring states
(and tests/test_layers.py enforces), and the docstrings cite it rather than a design card the repository lacks."""

import importlib
import re
from pathlib import Path

import pytest

from tests.test_layers import _layers, _modules

REPO = Path(__file__).resolve().parent.parent
ARCHITECTURE = REPO / "ARCHITECTURE.md"


def _module_names(text: str) -> set[str]:
    """Every ``calib...`` or ``calib_book...`` dotted name in backticks in ``text``."""
    return set(re.findall(r"`((?:calib|calib_book)(?:\.\w+)+)`", text))


def _defined(dotted: str) -> bool:
    """A module, or a name defined in a module (``calib.metrics.REGISTRY``, ``calib_book.runner.PARAMETER_RANGES``)."""
    try:
        importlib.import_module(dotted)
        return True
    except ImportError:
        pass
    module, _, name = dotted.rpartition(".")
    try:
        return hasattr(importlib.import_module(module), name)
    except ImportError:
        return False


def test_every_module_and_name_the_architecture_names_exists():
    names = _module_names(ARCHITECTURE.read_text(encoding="utf-8"))
    assert len(names) > 30
    missing = sorted(n for n in names if not _defined(n))
    assert not missing, f"ARCHITECTURE.md names what does not exist: {missing}"


def test_the_check_finds_a_module_that_does_not_exist():
    assert not _defined("calib.no_such_module") and not _defined("calib.metrics.NO_SUCH_NAME")
    assert _defined("calib.metrics") and _defined("calib.metrics.REGISTRY")


def _architecture_layers() -> dict[str, int]:
    table = ARCHITECTURE.read_text(encoding="utf-8").split("## The library's layers", 1)[1].split("\n## ", 1)[0]
    layers = {}
    for row in re.findall(r"^\| (\d) \| ([^|]+) \|", table, re.M):
        for name in re.findall(r"`(calib\.\w+)`", row[1]):
            layers[name] = int(row[0])
    return layers


def test_the_layer_table_is_the_one_the_layer_test_enforces():
    assert _architecture_layers() == _layers()


def test_every_top_level_module_of_calib_is_in_the_architecture():
    top = {".".join(m.split(".")[:2]) for m in _modules()}
    assert top - {"calib.__main__"} <= set(_architecture_layers())


@pytest.mark.parametrize("folder", ["calib", "book/calib_book"])
def test_docstrings_cite_the_architecture_not_an_absent_design_card(folder):
    citing = [str(p.relative_to(REPO)) for p in (REPO / folder).rglob("*.py") if "DESIGN.md" in p.read_text()]
    assert not citing, f"cite ARCHITECTURE.md (DESIGN.md is not in the repository): {citing}"


def test_the_test_files_conftest_orders_for_make_test_exist():
    """tests/conftest.py hands pytest-xdist the longest files first by name: a renamed file would drop out of the
    order unnoticed (it would still run, among the short ones)."""
    import conftest

    tests = Path(__file__).resolve().parent
    named = [*conftest.LONGEST_FILES, conftest.WAITS_BEHIND_THE_BOOK]
    assert [name for name in named if not (tests / name).is_file()] == []
    assert conftest.LONGEST_FILES[0] == "test_chapters.py"
