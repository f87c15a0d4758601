"""pyproject.toml and environment.yml must list the same packages with the same pins; the wheel of calib is the
library, without the book's machinery; calib's dependencies are what it imports; and the wheel, installed in a fresh
environment outside the checkout, runs every public module (tests/wheel_smoke.py)."""

import ast
import os
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
    assert sorted(py) == sorted(env), (f"only in pyproject: {set(py) - set(env)}; only in environment.yml: "
                                       f"{set(env) - set(py)}")
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


def _source_tree(tree: Path) -> Path:
    """A copy in ``tree`` of what a wheel of calib is built from (pyproject.toml, README.md, LICENSE, calib/ and
    book/, less the stored runs), so that a build writes nothing into the checkout (``build/``, ``*.egg-info``)."""
    skip = shutil.ignore_patterns("__pycache__", "*.egg-info", "results", "_static", "_build")
    tree.mkdir(parents=True)
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy2(ROOT / name, tree / name)
    shutil.copytree(ROOT / "calib", tree / "calib", ignore=skip)
    shutil.copytree(ROOT / "book", tree / "book", ignore=skip)
    return tree


def _build_wheel(tree: Path, out: Path) -> Path:
    """The wheel that ``pip wheel`` builds from ``tree`` (offline, no dependencies)."""
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q",
                    "-w", str(out), str(tree)], check=True, capture_output=True)
    (wheel,) = out.glob("calib-*.whl")
    return wheel


def _wheel_files(tree: Path, out: Path) -> list[str]:
    """The files of the wheel that ``pip wheel`` builds from ``tree``."""
    import zipfile

    return zipfile.ZipFile(_build_wheel(tree, out)).namelist()


def _book_machinery(files: list[str]) -> list[str]:
    """The files of a wheel that belong to the book's machinery or its answer key."""
    return [f for f in files if f.startswith("calib_book/") or "answers" in f or "exercise" in f or "/book" in f]


def test_the_wheel_holds_the_library_and_nothing_of_the_book(tmp_path):
    """Issue 31, item 3: the installed calib is the library; the book's runner, pages, browser check, notebook
    helpers, claims ledger, exercise checker and answer key ship in no wheel. Control: the same build with the
    answer key put back into calib/ ships it, and the check names it."""
    tree = _source_tree(tmp_path / "tree")
    key = tree / "book" / "calib_book" / "answers.py"                # the key: a module, or a package of them
    key_files = [key] if key.is_file() else sorted(key.with_suffix("").glob("*.py"))
    assert key_files                                                  # the machinery is in the tree built from
    files = _wheel_files(tree, tmp_path / "wheel")
    assert {"calib/__init__.py", "calib/metrics/binned.py", "calib/cli.py", "calib/losses/registry.py"} <= set(files)
    assert _book_machinery(files) == []
    shutil.copy2(key_files[0], tree / "calib" / "exercise_answers.py")
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

    def imported(imports: str) -> list[str]:
        """The modules of the probe's list, the answer key's chapter modules (``calib_book.answers.chNN_...``, where
        the key is a package) counted as the key."""
        out = subprocess.run([sys.executable, "-c", probe.format(imports=imports)], env=env, cwd=ROOT, check=True,
                             capture_output=True, text=True).stdout.strip()
        return sorted({m.split(".answers.")[0] + ".answers" if ".answers." in m else m for m in ast.literal_eval(out)})

    assert imported("calib.metrics, calib.losses, calib.posthoc, calib.train") == []
    assert imported("calib.metrics, calib_book.exercises") == ["calib_book", "calib_book.answers",
                                                               "calib_book.course_check", "calib_book.exercises"]


# --- the installed wheel, outside the checkout (issue 43, item 2) -------------------------------------------------

#: Third-party modules calib imports without declaring them, and why each may be absent.
UNDECLARED_IMPORTS = {
    "sklearn": "calib.posthoc's NotFittedError subclasses scikit-learn's only when the caller has imported it; "
               "calib.data's two scikit-learn toy datasets say to install it",
    "IPython": "calib.plots sets inline SVG figures in a Jupyter kernel, guarded by try/except ImportError",
    "matplotlib_inline": "the same",
    "calib_book": "the book's machinery, which the calib command imports from a checkout (ships in no wheel)",
}


def _third_party_imports(paths) -> set[str]:
    """The top-level names of the modules that ``paths`` import (anywhere, also inside functions), less the standard
    library's, calib's and :data:`UNDECLARED_IMPORTS`."""
    names = set()
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.add(node.module.split(".")[0])
    return names - set(sys.stdlib_module_names) - {"calib"} - set(UNDECLARED_IMPORTS)


def _distributions(modules: set[str]) -> set[str]:
    """The distributions (PyPI names, lower case) that provide ``modules``: ``PIL`` -> ``pillow``."""
    from importlib.metadata import packages_distributions

    provided = packages_distributions()
    missing = sorted(m for m in modules if m not in provided)
    assert not missing, f"no installed distribution provides {missing}"
    return {d.lower() for m in modules for d in provided[m]}


def test_every_package_calib_imports_is_declared_and_every_dependency_is_imported():
    """Issue 43, item 2: pyyaml was declared and never imported, sympy was a dependency though only calib.symbolic
    imports it, and Pillow (calib.corruptions) was imported and not declared. calib's dependencies are exactly the
    distributions its modules outside calib.symbolic import, and the extra "symbolic" adds what calib.symbolic
    imports besides (sympy)."""
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = {_split(r)[0] for r in meta["dependencies"]}
    symbolic_extra = {_split(r)[0] for r in meta["optional-dependencies"].get("symbolic", [])}
    sources = sorted((ROOT / "calib").rglob("*.py"))
    symbolic = [p for p in sources if "symbolic" in p.relative_to(ROOT / "calib").parts]
    rest = _distributions(_third_party_imports([p for p in sources if p not in symbolic]))
    assert sorted(declared) == sorted(rest), (f"declared, never imported: {sorted(declared - rest)}; "
                                              f"imported, not declared: {sorted(rest - declared)}")
    assert sorted(symbolic_extra) == sorted(_distributions(_third_party_imports(symbolic)) - rest) == ["sympy"]


def test_a_package_in_several_groups_has_one_pin_in_all():
    """sympy is in the extras "symbolic" and "book" (which the chapters need): the same requirement in both, so that
    the checks above, which read one pin per name, read the pin of each."""
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pins: dict[str, set[str]] = {}
    for requirement in [*meta["dependencies"], *sum(meta["optional-dependencies"].values(), [])]:
        name, spec = _split(requirement)
        pins.setdefault(name, set()).add(spec)
    assert {name: specs for name, specs in pins.items() if len(specs) > 1} == {}
    assert {"symbolic", "book"} <= {extra for extra, reqs in meta["optional-dependencies"].items()
                                    if any(_split(r)[0] == "sympy" for r in reqs)}


@pytest.fixture(scope="module")
def import_probe() -> dict:
    """What a fresh process that imports the checkout's calib sees: the third-party modules loaded after
    ``import calib`` and after ``calib.metrics``, ``dir(calib)``, an ECE through the attribute, the error of an
    unknown attribute; then, with sympy made unimportable, every public module but calib.symbolic's imported, and the
    error of ``import calib.symbolic.mukhoti``."""
    import json
    import os

    from calib_book.timeouts import scaled

    probe = f"""
import importlib, json, sys
heavy = {{'numpy', 'scipy', 'torch', 'matplotlib', 'sympy', 'tqdm', 'PIL'}}
def loaded():
    return sorted({{m.split('.')[0] for m in sys.modules}} & heavy)
import calib
out = {{'after import calib': loaded(),
        'dir': [n for n in ('metrics', 'losses', 'posthoc', 'symbolic') if n in dir(calib)]}}
out['ece'] = round(calib.metrics.ece([[0.8, 0.2], [0.3, 0.7]], [0, 0]), 9)
out['after calib.metrics'] = loaded()
out['same module'] = calib.metrics is sys.modules['calib.metrics']
try:
    calib.no_such_module
except AttributeError as exc:
    out['unknown'] = str(exc)
sys.modules['sympy'] = None                      # as if sympy were not installed
for name in {sorted(m for m in _public_modules() if not m.startswith('calib.symbolic'))!r}:
    importlib.import_module(name)
out['without sympy'] = 'imported'
try:
    import calib.symbolic.mukhoti
except ImportError as exc:
    out['calib.symbolic without sympy'] = [type(exc).__name__, exc.name, str(exc)]
print(json.dumps(out))
"""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = subprocess.run([sys.executable, "-c", probe], env=env, cwd=ROOT, capture_output=True, text=True,
                         timeout=scaled(120))
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout)


def test_import_calib_is_cheap_and_its_submodules_load_on_first_use(import_probe):
    """Issue 43, item 2: ``import calib; calib.metrics`` raised AttributeError. Now ``import calib`` imports no
    third-party module (no numpy, no torch) and names its submodules in ``dir(calib)``; ``calib.metrics`` imports
    calib.metrics then, which needs numpy and scipy but neither torch nor matplotlib, sympy, tqdm or Pillow; an
    unknown name is still an AttributeError."""
    assert {k: v for k, v in import_probe.items() if "sympy" not in k} == {
        "after import calib": [], "dir": ["metrics", "losses", "posthoc", "symbolic"], "ece": 0.45,
        "after calib.metrics": ["numpy", "scipy"], "same module": True,
        "unknown": "module 'calib' has no attribute 'no_such_module'"}


def test_calib_works_without_sympy_and_calib_symbolic_names_the_extra(import_probe):
    """Issue 43, item 2: sympy is the extra "symbolic". Without it every other public module imports, and
    ``import calib.symbolic`` raises an ImportError that names the extra to install."""
    assert import_probe["without sympy"] == "imported"
    assert import_probe["calib.symbolic without sympy"] == [
        "ImportError", "sympy", "calib.symbolic needs sympy, which is an optional dependency of calib: install the "
        "extra 'symbolic', pip install 'calib[symbolic]' (or pip install 'sympy>=1.12')."]


def _public_modules(packages: bool = False) -> set[str]:
    """calib's public modules in the checkout; without ``packages``, the package roots left out: then
    tests/test_api_reference.py's PUBLIC_MODULES, which that file checks against the same walk."""
    import pkgutil

    return {m.name for m in pkgutil.walk_packages([str(ROOT / "calib")], "calib.")
            if (packages or not m.ispkg) and not any(part.startswith("_") for part in m.name.split(".")[1:])}


@pytest.fixture(scope="module")
def installed_wheel(tmp_path_factory):
    """calib's wheel, built from a copy of the checkout and installed (without dependencies) into a fresh virtual
    environment outside the repository; that environment reads its dependencies (numpy, scipy, torch, ...) from this
    interpreter's site-packages through a ``.pth`` line, which adds the folder to ``sys.path`` after its own
    site-packages and runs none of the ``.pth`` files there: the editable install's import hook for the checkout
    stays off. Returns (the environment's python, the wheel, the seconds each step took)."""
    import site
    import time

    from calib_book.timeouts import scaled

    base = tmp_path_factory.mktemp("installed-wheel")
    assert ROOT not in base.parents
    seconds = {}
    start = time.perf_counter()
    wheel = _build_wheel(_source_tree(base / "tree"), base / "dist")
    seconds["build"] = time.perf_counter() - start
    start = time.perf_counter()
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=scaled(120))
    python = venv / "bin" / "python"
    # without PYTHONPATH & co.: with the checkout on PYTHONPATH pip finds calib 0.1.0 "already installed" and
    # installs nothing (the smoke run below then fails with "No module named 'calib'")
    clean = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-index",
                    "--no-compile", "-q", str(wheel)], check=True, capture_output=True, timeout=scaled(300), env=clean)
    purelib = Path(subprocess.run([str(python), "-I", "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                                  check=True, capture_output=True, text=True).stdout.strip())
    ours = [p for p in site.getsitepackages() if Path(p).is_dir()]
    (purelib / "_calib_test_dependencies.pth").write_text("\n".join(ours) + "\n")
    seconds["install"] = time.perf_counter() - start
    return python, wheel, seconds


def _expected_smoke(purelib_calib: Path) -> dict:
    """What each call of tests/wheel_smoke.py returns (module -> JSON data): hand-computed where the inputs allow."""
    import csv

    def rows(name, nonempty=False):
        with (ROOT / "book" / "data" / "published" / name).open(newline="", encoding="utf-8") as fh:
            return sum(1 for r in csv.DictReader(fh) if not nonempty or int(r["n_cells"]) > 0)

    derivation = "Derivation"
    return {
        "calib.metrics.binned": 0.3,                     # one sample per bin: |1-.8|, |1-.7|, |0-.6|, |1-.9|, mean 0.3
        "calib.metrics.scores": [0.75, 0.400367],        # -mean(log .8, log .7, log .4, log .9)
        "calib.metrics.risk_coverage": 0.0625,           # risks 0, 0, 0, 1/4 at coverages 1/4 ... 1
        "calib.metrics.registry": 0.3,
        "calib.metrics.streaming": 0.3,                  # the same ECE over two batches
        "calib.metrics.resampling": [1.0, 1.0, 0.0, 1.0],
        "calib.stats.intervals": [2.0, -0.484, 4.484],   # 2 +- t(0.975, 2) / sqrt(3)
        "calib.stats.test_set": [[50, 5], [5.0]],
        "calib.stats.decisions": [0.03, 0.06, 0.06],     # Holm: 3 x .01, max(2 x .03, .04 -> .06)
        "calib.stats.ranks": [1.0, 0.041667],            # tau 1, p = 1/24 (exact)
        "calib.stats.effects": 1.0,
        "calib.posthoc.temperature": 2.0,                # logits 2 x calibrated ones
        "calib.posthoc.focal_temperature": [[5, 3], [1.0] * 5],
        "calib.posthoc.grid": [None, True],
        "calib.posthoc.registry": [True, True, True],
        "calib.losses.functional": [1.41, 1.41],         # (log 2 + log(1 + e^2)) / 2, and focal with gamma 0
        "calib.losses.batch": 0.4141,
        "calib.losses.registry": 1.41,
        "calib.losses.modules": 1.41,
        "calib.focal.gradient": 1.0,                     # gamma*(1/e) = 1
        "calib.focal.schedules": [5.0, 3.0],             # FLSD-53: 5 below p = 0.2, 3 above
        "calib.focal.optimum": [0.3, 0.7],               # gamma 0: the prediction is the target
        "calib.focal.calibration_map": [[0.25, 0.75]],   # gamma 0: softmax
        "calib.focal.numerics": [0.693147],              # log 2
        "calib.soft_binning": [0.125, 0.375, 0.625, 0.875],
        "calib.simulate": [[0.25, 0.75]],
        "calib.selective": [3.5911, 0.2785],             # 1 / W(1/e), W(1/e)
        "calib.data": [7, 3, list(range(10))],
        "calib.corruptions": [[2, 28, 28], "uint8", 1],  # a flat grey image survives JPEG within 1 level
        "calib.toy_data": [[10, 2], [5, 2]],
        "calib.dataset_files": [[0, 1, 2], [3, 4, 5]],
        "calib.models": 15,                              # 4 x 3 weights + 3 biases
        "calib.small_training": True,
        "calib.run_config": [150, 250],
        "calib.train": 0.75,
        "calib.distributed": 1,
        "calib.runs": {"a": 1},
        "calib.experiments": "store/mlp/ce/seed3",
        "calib.shift": [["clean", "fog/1", "fog/5"],    # within-type deviations +-.05, +-.1: sqrt(.025 / 2) / sqrt 2
                        0.079057],
        "calib.plots": "Axes",
        "calib.published.tables": {"dir": str(purelib_calib / "published_tables"),
                                   "mukhoti2020": rows("mukhoti2020.csv"),
                                   "mukhoti2020 tables": rows("mukhoti2020.tables.csv"), "zhou2025 acc": [10, 7]},
        # 4.39 and 4.4 agree to half a unit of 0.1, 4.5 does not; one summary line per table that prints numbers
        "calib.published.compare": [True, False, "flsd-53", rows("mukhoti2020.tables.csv", nonempty=True)],
        "calib.cli": [0, True],
        "calib.symbolic.base": [True, "-(1 - p)**gamma*log(p)"],
        "calib.symbolic.mukhoti": derivation, "calib.symbolic.charoenphakdee": derivation,
        "calib.symbolic.zhou": derivation, "calib.symbolic.komisarenko": derivation,
        "calib.symbolic.karandikar": derivation,
    }


def test_the_installed_wheel_runs_every_public_module_outside_the_checkout(installed_wheel, tmp_path):
    """Issue 43, item 2: built and installed elsewhere, calib.published's readers raised FileNotFoundError (the
    papers' tables were not in the wheel). In a fresh environment outside the repository, working in a folder outside
    it, the installed calib imports every public module (from the environment, never from the checkout) and each
    makes one real call with the value it must have (tests/wheel_smoke.py): the papers' tables come from the wheel."""
    import json
    import os
    import time

    from calib_book.timeouts import scaled

    python, wheel, seconds = installed_wheel
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")} | {"MPLBACKEND": "Agg"}
    start = time.perf_counter()
    run = subprocess.run([str(python), "-I", str(ROOT / "tests" / "wheel_smoke.py"), str(tmp_path)], cwd=tmp_path,
                         env=env, capture_output=True, text=True, timeout=scaled(300))
    seconds["smoke"] = time.perf_counter() - start
    assert run.returncode == 0, run.stderr[-3000:]
    out = json.loads(run.stdout.strip().splitlines()[-1])
    purelib_calib = Path(out["calib"]).parent
    venv = python.parent.parent
    assert venv in purelib_calib.parents and ROOT not in purelib_calib.parents
    assert sorted(m for m, f in out["files"].items() if purelib_calib not in Path(f).parents) == []
    assert [p for p in out["sys_path"] if p and Path(p, "calib").is_dir() and Path(p, "calib") != purelib_calib] == []
    assert sorted(out["modules"]) == sorted(_public_modules())             # one call per public module
    assert sorted(out["walked"]) == sorted(_public_modules(packages=True))  # the wheel holds every public module
    assert out["modules"] == _expected_smoke(purelib_calib), run.stderr[-3000:]
    print(f"wheel {wheel.name}: " + ", ".join(f"{k} {v:.1f} s" for k, v in seconds.items()))


def test_the_installed_calib_command_runs(installed_wheel, tmp_path):
    """The console script of the installed wheel starts (``calib --help``) outside the checkout."""
    import os

    from calib_book.timeouts import scaled

    python, _, _ = installed_wheel
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    run = subprocess.run([str(python.parent / "calib"), "--help"], cwd=tmp_path, env=env, capture_output=True,
                         text=True, timeout=scaled(120))
    assert (run.returncode, run.stdout.split()[:2]) == (0, ["usage:", "calib"]), run.stderr[-2000:]
