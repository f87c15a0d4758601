"""The split of the suite between `make test` and `make test-all` (tests/conftest.py, SLOW_TESTS): every entry names
a test that exists, the mark goes where the table says, and the Makefile runs the two tiers as the README says."""

import ast
import re
from pathlib import Path

import pytest

from conftest import KEPT_FROM_SLOW_FILES, SLOW_TESTS, slow_reason

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent


def _test_functions(file: str) -> set[str]:
    paths = [p for p in TESTS.rglob(file) if "benchmarks" not in p.parts]
    assert len(paths) == 1, f"{file}: {len(paths)} files of that name under tests/"
    tree = ast.parse(paths[0].read_text(encoding="utf-8"))
    return {node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef) and node.name.startswith("test_")}


@pytest.mark.parametrize("entry", [*SLOW_TESTS, *KEPT_FROM_SLOW_FILES])
def test_each_entry_names_a_test_that_exists(entry):
    file, _, name = entry.partition("::")
    functions = _test_functions(file)
    assert functions, f"{file} holds no test"
    if name:
        assert name in functions, f"{entry}: no such test (renamed? update SLOW_TESTS)"


def test_the_mark_follows_the_table():
    assert slow_reason("tests/test_distributed.py::test_anything[a-b]")                          # a whole file
    assert slow_reason("tests/test_train.py::test_sigkill_after_the_second_epoch_then_resume_is_exact")   # a test
    assert slow_reason("tests/test_train.py::test_fit_one_epoch") is None                                # not its file
    assert slow_reason("tests/test_browser.py::test_content_wider_than_its_column_is_reported[x]") is None  # kept
    assert slow_reason("tests/test_browser.py::test_a_clean_layout_passes_at_both_widths")
    assert slow_reason("tests/test_metrics.py::test_x") is None


def test_make_test_leaves_the_slow_tests_and_make_test_all_runs_them():
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    rules = dict(re.findall(r"^(test|test-all): test-clock setup\n\t(.+)$", makefile, re.M))
    assert rules["test"].endswith('-m "not slow"') and "-m" not in rules["test-all"].split("PYTEST_RUN)")[1]
    assert "slow:" in (ROOT / "pyproject.toml").read_text(encoding="utf-8")       # the mark is declared
