"""pyproject.toml and environment.yml must list the same packages with the same pins; the wheel of calib is the
library, without the book's machinery."""

import ast
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
# PyPI name -> conda-forge name, where they differ.
CONDA_NAME = {"torch": "pytorch"}


def _split(requirement: str) -> tuple[str, str]:
    name, spec = re.match(r"^\s*([A-Za-z0-9_.\-]+)\s*(.*)$", requirement).groups()
    return name.lower().replace("_", "-"), spec.replace(" ", "")


def _pyproject_requirements() -> dict[str, str]:
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = list(meta["dependencies"])
    for extra in meta["optional-dependencies"].values():
        reqs += extra
    return dict(_split(r) for r in reqs)


def _environment_requirements() -> dict[str, str]:
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    out = {}
    for dep in env["dependencies"]:
        if isinstance(dep, dict):
            for pip_dep in dep["pip"]:
                name, spec = _split(pip_dep)
                out[name] = spec
        else:
            name, spec = _split(dep)
            if name not in ("python", "pip"):
                out[name] = spec
    return out


def test_environment_yml_matches_pyproject():
    py = {CONDA_NAME.get(k, k): v for k, v in _pyproject_requirements().items()}
    env = _environment_requirements()
    assert sorted(py) == sorted(env), f"only in pyproject: {set(py) - set(env)}; only in environment.yml: {set(env) - set(py)}"
    mismatched = {k: (py[k], env[k]) for k in py if py[k] != env[k]}
    assert not mismatched, f"pins differ (pyproject, environment.yml): {mismatched}"


def test_python_floor_matches():
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    assert f"python{meta['requires-python']}" in env["dependencies"]


def _declared_minimum() -> tuple[int, int]:
    spec = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    major, minor = re.fullmatch(r">=\s*(\d+)\.(\d+)", spec).groups()
    return int(major), int(minor)


def _sources():
    return sorted([*(ROOT / "calib").rglob("*.py"), *(ROOT / "book" / "calib_book").rglob("*.py")])


def _stdlib_imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names & set(sys.stdlib_module_names)


def test_the_declared_minimum_python_parses_every_module():
    """requires-python is what the code needs: every module parses with the declared minimum's grammar (3.12's
    type-parameter syntax or nested f-string quotes would fail here), and the running interpreter meets it."""
    minimum = _declared_minimum()
    assert sys.version_info[:2] >= minimum
    for path in _sources():
        ast.parse(path.read_text(encoding="utf-8"), filename=str(path), feature_version=minimum)
    with pytest.raises(SyntaxError):                      # the control: newer syntax is caught
        ast.parse("type Pair[T] = tuple[T, T]", feature_version=minimum)


def test_the_declared_minimum_python_has_every_standard_module_we_import():
    """Issue 24, item 27: calib imported ``tomllib`` (3.11) while declaring 3.10. Where the declared minimum's
    interpreter is on the PATH, every standard-library module the code imports must exist in it; and the
    interpreter one minor version older must lack one of them, or the floor could be lower."""
    major, minor = _declared_minimum()
    used = set().union(*(_stdlib_imports(p) for p in _sources()))

    def stdlib_of(version):
        name = f"python{version[0]}.{version[1]}"
        pyenv = sorted(Path.home().glob(f".pyenv/versions/{version[0]}.{version[1]}.*/bin/{name}"))
        for exe in [shutil.which(name), *map(str, pyenv)]:       # (a pyenv shim fails for a version not selected)
            if exe is None:
                continue
            out = subprocess.run([exe, "-c", "import sys; print(' '.join(sorted(sys.stdlib_module_names)))"],
                                 capture_output=True, text=True, timeout=60)
            if out.returncode == 0:
                return set(out.stdout.split())
        return None

    floor = stdlib_of((major, minor))
    if floor is None:
        pytest.skip(f"no python{major}.{minor} on the PATH to check the declared minimum against")
    assert used <= floor, f"python{major}.{minor} lacks {sorted(used - floor)}"
    older = stdlib_of((major, minor - 1))
    if older is not None:
        assert not used <= older, f"everything also exists in python{major}.{minor - 1}: lower requires-python"


def test_jupyter_book_is_pinned_below_2():
    # jupyter-book 2.x is the mystmd rewrite with no _config.yml / Sphinx: the book needs 1.x.
    assert _pyproject_requirements()["jupyter-book"] == ">=1.0.4.post1,<2"


def _wheel_files(tree: Path, out: Path) -> list[str]:
    """The files of the wheel that ``pip wheel`` builds from ``tree`` (offline, no dependencies)."""
    import subprocess
    import sys
    import zipfile

    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q",
                    "-w", str(out), str(tree)], check=True, capture_output=True)
    (wheel,) = out.glob("calib-*.whl")
    return zipfile.ZipFile(wheel).namelist()


def _book_machinery(files: list[str]) -> list[str]:
    """The files of a wheel that belong to the book's machinery or its answer key."""
    return [f for f in files if f.startswith("calib_book/") or "answers" in f or "exercise" in f or "/book" in f]


def test_the_wheel_holds_the_library_and_nothing_of_the_book(tmp_path):
    """Issue 31, item 3: the installed calib is the library; the book's runner, pages, browser check, notebook
    helpers, claims ledger, exercise checker and answer key ship in no wheel. Control: the same build with the
    answer key put back into calib/ ships it, and the check names it."""
    import shutil

    tree = tmp_path / "tree"
    tree.mkdir()
    skip = shutil.ignore_patterns("__pycache__", "*.egg-info", "results", "_static", "data")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, tree / name)
    shutil.copytree(ROOT / "calib", tree / "calib", ignore=skip)
    shutil.copytree(ROOT / "book", tree / "book", ignore=skip)
    assert (tree / "book" / "calib_book" / "answers.py").is_file()     # the machinery is in the tree built from
    files = _wheel_files(tree, tmp_path / "wheel")
    assert {"calib/__init__.py", "calib/metrics/binned.py", "calib/cli.py", "calib/losses/registry.py"} <= set(files)
    assert _book_machinery(files) == []
    shutil.copy2(tree / "book" / "calib_book" / "answers.py", tree / "calib" / "exercise_answers.py")
    shutil.rmtree(tree / "build", ignore_errors=True)
    assert _book_machinery(_wheel_files(tree, tmp_path / "control")) == ["calib/exercise_answers.py"]


def test_importing_the_library_imports_nothing_of_the_book():
    """Issue 31, item 3: calib.metrics, calib.losses, calib.posthoc and calib.train import no module of the book's
    machinery (calib_book, or the former calib.book ...) nor the book's tools, even with calib_book importable.
    Control: importing calib_book.exercises shows up in the same probe."""
    import os
    import subprocess
    import sys

    probe = ("import sys, {imports}; print(sorted(m for m in sys.modules if m.split('.')[0] in "
             "('calib_book', 'papermill', 'nbformat', 'jupyter_book', 'myst_nb', 'sphinx', 'bs4') or m in "
             "('calib.book', 'calib.claims', 'calib.pages', 'calib.browser', 'calib.notebook', 'calib.exercises', "
             "'calib.exercise_answers')))")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join((str(ROOT), str(ROOT / "book")))}

    def imported(imports: str) -> str:
        return subprocess.run([sys.executable, "-c", probe.format(imports=imports)], env=env, cwd=ROOT, check=True,
                              capture_output=True, text=True).stdout.strip()

    assert imported("calib.metrics, calib.losses, calib.posthoc, calib.train") == "[]"
    assert imported("calib.metrics, calib_book.exercises") == "['calib_book', 'calib_book.answers', " \
                                                            "'calib_book.exercises']"
