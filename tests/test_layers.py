"""calib's layers, as its package docstring states them: every import goes to the same or a lower layer, the
modules import each other without cycles, and every module of calib is in the table."""

import ast
import re
from pathlib import Path

import calib

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


def _imports() -> dict[str, set[str]]:
    """Top-level module -> the calib top-level modules it imports (anywhere in its files, also inside functions)."""
    out: dict[str, set[str]] = {}
    for path in ROOT.rglob("*.py"):
        rel = path.relative_to(ROOT.parent).with_suffix("")
        if rel.parts[-1] == "__init__":
            rel = rel.parent
        module = ".".join(rel.parts)
        if module in ("calib", "calib.__main__"):
            continue
        deps = out.setdefault(_top(module), set())
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([node.module] if isinstance(node, ast.ImportFrom) and node.module else
                     [a.name for a in node.names] if isinstance(node, ast.Import) else [])
            if isinstance(node, ast.ImportFrom) and node.module == "calib":
                names = [f"calib.{a.name}" for a in node.names]
            deps.update(_top(n) for n in names if n.startswith("calib.") and _top(n) != _top(module))
    return out


def test_every_module_is_in_the_layer_table():
    assert set(_imports()) - set(_layers()) == set(), "add the module to the layer list of calib/__init__.py"


def test_imports_only_go_down_or_sideways():
    layers = _layers()
    upward = [(m, d, layers[m], layers[d]) for m, deps in _imports().items() for d in deps if layers[d] > layers[m]]
    assert upward == [], f"imports from a higher layer (module, import, its layer, the import's layer): {upward}"


def test_no_import_cycles():
    graph = _imports()
    state: dict[str, int] = {}

    def visit(node, path):
        state[node] = 1
        for dep in graph.get(node, ()):
            if state.get(dep) == 1:
                raise AssertionError(f"import cycle: {' -> '.join(path + [node, dep])}")
            if dep not in state:
                visit(dep, path + [node])
        state[node] = 2

    for node in graph:
        if node not in state:
            visit(node, [])


def test_the_table_is_read():
    layers = _layers()
    assert layers["calib._validate"] == 0 and layers["calib.cli"] == 4 and layers["calib.losses"] == 1
