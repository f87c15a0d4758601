"""calib's layers, as its package docstring states them: every import of every module, submodules of packages
included (``calib.focal.gradient``, ``calib.losses.batch``), goes to the same or a lower layer, the modules import
each other without cycles, every module of calib is in the table, no private name crosses its boundary, and
every module imports under ``python -OO``."""

import ast
import re
import subprocess
import sys
from pathlib import Path

import calib
from calib_book.timeouts import scaled  # a subprocess's time limit, scaled by the machine's load

ROOT = Path(__file__).resolve().parent.parent / "calib"


def _layers() -> dict[str, int]:
    """``calib.<module>`` -> layer, from the lines ``- layer N: ``calib.x`` (...), ...`` of calib's docstring."""
    layers: dict[str, int] = {}
    for block in re.split(r"\n- (?=layer \d)", calib.__doc__):
        match = re.match(r"layer (\d+):", block)
        if match:
            for name in re.findall(r"``(calib\.\w+)``", block.split("\n\n")[0]):
                layers.setdefault(name, int(match.group(1)))
    return layers


def _top(module: str) -> str:
    """The top-level module of ``calib.a.b``: ``calib.a``."""
    return ".".join(module.split(".")[:2])


def _modules(root: Path = ROOT) -> dict[str, Path]:
    """Every module under ``root`` (a ``calib`` folder) by dotted name (a package by its own name), but the
    package root and ``__main__``."""
    out = {}
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root.parent).with_suffix("")
        if rel.parts[-1] == "__init__":
            rel = rel.parent
        module = ".".join(rel.parts)
        if module not in ("calib", "calib.__main__"):
            out[module] = path
    return out


def _is_module(dotted: str, root: Path) -> bool:
    path = root.parent.joinpath(*dotted.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def _import_statements(path: Path, root: Path) -> list[tuple[str, str]]:
    """``(module, name)`` for every import of a calib module in ``path`` (anywhere, also inside functions):
    ``name`` is "" for ``import calib.x``; ``from calib import x`` gives ``("calib.x", "")``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(a.name, "") for a in node.names if a.name.startswith("calib.")]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "calib":
                found += [(f"calib.{a.name}", "") for a in node.names]
            elif node.module.startswith("calib."):
                for a in node.names:
                    dotted = f"{node.module}.{a.name}"
                    found.append((dotted, "") if _is_module(dotted, root) else (node.module, a.name))
    return found


def _imports(root: Path = ROOT) -> dict[str, set[str]]:
    """Module (submodules included) -> the other calib modules it imports."""
    return {module: {m for m, _ in _import_statements(path, root) if m != module}
            for module, path in _modules(root).items()}


def _is_private(part: str) -> bool:
    return part.startswith("_") and not part.startswith("__")


def private_imports(root: Path = ROOT) -> list[str]:
    """Every import of a private name across its boundary: a private module (``calib.focal._numerics``) from
    outside the package that holds it (``calib.focal``), a private function or constant (``_reduce``) from any
    other module."""
    problems = []
    for module, path in _modules(root).items():
        for target, name in _import_statements(path, root):
            parts = target.split(".")
            for i, part in enumerate(parts[1:], start=1):
                owner = ".".join(parts[:i])
                if _is_private(part) and not (module + ".").startswith(owner + "."):
                    problems.append(f"{module} imports the private module {target} from outside {owner}")
                    break
            if name and _is_private(name):
                problems.append(f"{module} imports the private name {name} of {target}")
    return list(dict.fromkeys(problems))


def _module_names(tree: ast.AST, root: Path) -> dict[str, str]:
    """Name -> the calib module an import of ``tree`` binds it to (anywhere, also inside functions): ``import calib.x``
    binds ``calib``, ``import calib.x as m`` binds ``m``, ``from calib import x`` and ``from calib.x import y`` bind
    ``x`` and ``y`` when they are modules."""
    names = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name == "calib" or a.name.startswith("calib."):
                    names[a.asname or "calib"] = a.name if a.asname else "calib"
        elif (isinstance(node, ast.ImportFrom) and node.level == 0 and node.module
              and (node.module == "calib" or node.module.startswith("calib."))):
            for a in node.names:
                if _is_module(f"{node.module}.{a.name}", root):
                    names[a.asname or a.name] = f"{node.module}.{a.name}"
    return names


def _module_of(node: ast.AST, names: dict[str, str], root: Path) -> str | None:
    """The calib module an expression names: a name bound to one, or a chain of submodules on it
    (``calib.metrics.binned``); None for anything else."""
    if isinstance(node, ast.Name):
        return names.get(node.id)
    if isinstance(node, ast.Attribute):
        owner = _module_of(node.value, names, root)
        if owner is not None and _is_module(f"{owner}.{node.attr}", root):
            return f"{owner}.{node.attr}"
    return None


def private_attributes(root: Path = ROOT) -> list[str]:
    """Every private name reached by attribute access across its boundary, as :func:`private_imports` for imports:
    ``metrics._bin_top_label`` in a module that imported ``calib.metrics`` (a private function or constant of another
    module), ``focal._numerics`` outside ``calib.focal`` (a private module outside its package). Dunder names
    (``metrics.__name__``) are public."""
    problems = []
    for module, path in _modules(root).items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names = _module_names(tree, root)
        attributes = [n for n in ast.walk(tree) if isinstance(n, ast.Attribute) and _is_private(n.attr)]
        for node in sorted(attributes, key=lambda n: (n.lineno, n.col_offset)):
            owner = _module_of(node.value, names, root)
            if owner is None:
                continue
            target = f"{owner}.{node.attr}"
            inside = (module + ".").startswith(owner + ".")
            if _is_module(target, root) and not inside:
                problems.append(f"{module}, line {node.lineno}: {ast.unparse(node)} reaches the private module "
                                f"{target} from outside {owner}")
            elif not _is_module(target, root) and module != owner:
                problems.append(f"{module}, line {node.lineno}: {ast.unparse(node)} reaches the private name "
                                f"{node.attr} of {owner}")
    return list(dict.fromkeys(problems))


def upward_imports(root: Path = ROOT) -> list:
    """(module, import, its layer, the import's layer) for every import of a higher layer; a submodule has the
    layer of its top-level module."""
    layers = _layers()
    return [(m, d, layers[_top(m)], layers[_top(d)]) for m, deps in _imports(root).items() for d in deps
            if layers[_top(d)] > layers[_top(m)]]


def test_every_module_is_in_the_layer_table():
    missing = {_top(m) for m in _imports()} - set(_layers())
    assert missing == set(), "add the module to the layer list of calib/__init__.py"


def test_imports_only_go_down_or_sideways():
    assert upward_imports() == [], "imports from a higher layer (module, import, its layer, the import's layer)"


def _cycle(graph: dict[str, set[str]]) -> list | None:
    """An import cycle of ``graph`` (module -> modules it imports) as a path, or None."""
    state: dict[str, int] = {}

    def visit(node, path):
        state[node] = 1
        for dep in sorted(graph.get(node, ())):
            if state.get(dep) == 1:
                return path + [node, dep]
            found = visit(dep, path + [node]) if dep not in state else None
            if found:
                return found
        state[node] = 2
        return None

    for node in sorted(graph):
        found = visit(node, []) if node not in state else None
        if found:
            return found
    return None


def test_no_import_cycles():
    """No cycle among the top-level modules, nor among the submodules of a package."""
    modules = _imports()
    tops: dict[str, set[str]] = {}
    for m, deps in modules.items():
        tops.setdefault(_top(m), set()).update(_top(d) for d in deps if _top(d) != _top(m))
    assert _cycle(tops) is None and _cycle(modules) is None
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]


def test_no_private_name_crosses_its_boundary():
    """Issue 31, item 4: focal._numerics was imported by losses, posthoc, selective and train, and losses.batch
    imported three private helpers of losses.functional."""
    assert private_imports() == []


def test_no_private_name_is_reached_by_attribute_access():
    """Issue 43, item 6: calib.simulate called ``metrics._bin_top_label`` (a private re-export of calib.metrics),
    which the import check cannot see: the import is ``from calib import metrics``."""
    assert private_attributes() == []


def test_the_attribute_check_can_fail(tmp_path):
    """A planted tree: private names reached through ``from calib import x``, ``import calib.x``, ``import calib.x as
    m`` and ``from calib.x import y`` (a module), inside a function too; and what stays allowed: dunder names,
    public names, a private module used inside its own package, a private attribute of an object that is no module."""
    files = {
        "__init__.py": "", "_validate.py": "", "simulate.py": "",
        "metrics/__init__.py": "", "metrics/_binning.py": "", "metrics/binned.py": "",
        "metrics/scores.py": ("from calib import metrics\nfrom calib.metrics import _binning\n"
                              "x = metrics._binning.BLOCK + _binning.BLOCK\n"),
        "focal/__init__.py": "", "focal/_numerics.py": "",
        "selective.py": ("from calib import metrics\nimport calib.focal\nimport calib.metrics as M\n"
                         "from calib.metrics import binned as B\n\n"
                         "def f(p, self):\n    from calib import simulate\n"
                         "    return (metrics._bin_top_label(p), calib.focal._numerics.r, M._uniform_bin, B._as_rho,\n"
                         "            simulate._check_rng, metrics.__name__, metrics.ece, self._x, p._y,\n"
                         "            calib._validate.check)\n"),
    }
    for name, text in files.items():
        (tmp_path / "calib" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "calib" / name).write_text(text, encoding="utf-8")
    assert private_attributes(tmp_path / "calib") == [
        "calib.selective, line 8: metrics._bin_top_label reaches the private name _bin_top_label of calib.metrics",
        "calib.selective, line 8: calib.focal._numerics reaches the private module calib.focal._numerics from "
        "outside calib.focal",
        "calib.selective, line 8: M._uniform_bin reaches the private name _uniform_bin of calib.metrics",
        "calib.selective, line 8: B._as_rho reaches the private name _as_rho of calib.metrics.binned",
        "calib.selective, line 9: simulate._check_rng reaches the private name _check_rng of calib.simulate"]


def test_the_checks_can_fail(tmp_path):
    """A planted tree: a private module imported from another package, a private function imported from a
    sibling, a submodule importing a higher layer; and what stays allowed."""
    files = {
        "__init__.py": "", "_validate.py": "", "train.py": "",
        "focal/__init__.py": "", "focal/_numerics.py": "", "focal/gradient.py": "from calib.focal._numerics import r\n",
        "focal/optimum.py": "def f():\n    import calib.train\n",
        "losses/__init__.py": "", "losses/_common.py": "", "losses/functional.py": "",
        "losses/batch.py": ("from calib.losses.functional import _reduce, focal_loss\n"
                            "from calib.losses._common import x\nfrom calib._validate import check\n"
                            "from calib.focal import _numerics\n"),
        "posthoc.py": "from calib.focal._numerics import check_gamma\n",
    }
    for name, text in files.items():
        (tmp_path / "calib" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "calib" / name).write_text(text, encoding="utf-8")
    root = tmp_path / "calib"
    assert private_imports(root) == [
        "calib.losses.batch imports the private name _reduce of calib.losses.functional",
        "calib.losses.batch imports the private module calib.focal._numerics from outside calib.focal",
        "calib.posthoc imports the private module calib.focal._numerics from outside calib.focal"]
    assert upward_imports(root) == [("calib.focal.optimum", "calib.train", 0, 3)]
    assert _imports(root)["calib.losses.batch"] == {"calib.losses.functional", "calib.losses._common",
                                                    "calib._validate", "calib.focal._numerics"}


def test_the_table_is_read():
    layers = _layers()
    assert layers["calib._validate"] == 0 and layers["calib.cli"] == 4 and layers["calib.losses"] == 1
    assert {"calib.focal.gradient", "calib.losses.batch", "calib.losses.registry"} <= set(_imports())


def test_every_module_imports_under_python_OO():
    """Issue 24, item 28: under ``python -OO`` docstrings are None, and ``import calib.losses`` raised TypeError
    where one was appended to. One interpreter imports every module of calib and lists those that fail, then builds
    a loss from the registry (``-OO`` needs bytecode of its own, so one interpreter compiles torch's once)."""
    code = ("import importlib, sys\nbad = []\nfor name in sys.argv[1:]:\n    try:\n"
            "        importlib.import_module(name)\n    except Exception as exc:\n"
            "        bad.append(f'{name}: {type(exc).__name__}: {exc}')\nprint(bad)\n"
            "import calib.losses as L\nprint(L.get_loss('fl-3').gamma)\n")
    done = subprocess.run([sys.executable, "-OO", "-c", code, *_modules()], cwd=ROOT.parent, capture_output=True,
                          text=True, timeout=scaled(600))
    assert done.returncode == 0 and done.stdout.split() == ["[]", "3.0"], done.stdout + done.stderr
