"""Text that names what the code holds stays true to it (issue 43, item 6): ``calib train --help`` names every loss,
secondary loss, dataset, network and augmentation of the registries (it is generated from them), README.md's module
list and ARCHITECTURE.md's layer table name every module of calib, and every module docstring renders whole (no
paragraph cut mid-sentence, no reStructuredText problem).

Each check is a function that returns what it finds wrong, run on the repository (nothing) and on a planted text
(what it must find)."""

from __future__ import annotations

import ast
import pkgutil
import re
import subprocess
import sys
from pathlib import Path

import pytest
from calib_book.timeouts import scaled  # a subprocess's time limit, scaled by the machine's load

from tests.test_layers import _layers

REPO = Path(__file__).resolve().parent.parent
CALIB = REPO / "calib"

# ------------------------------------------------------------------------------------------------ the CLI's help


def _flat(text: str) -> str:
    """``text`` on one line, unwrapped: argparse wraps help lines, after a hyphen too (``fashion-`` / ``mnist``)."""
    return " ".join(re.sub(r"-\s*\n\s*", "-", text).split())


def unnamed(text: str, names) -> list[str]:
    """Those of ``names`` that ``text`` does not name as a whole item (``mmce`` is not named by ``mmce-<lambda>``,
    ``avuc`` not by ``s-avuc``, ``ce`` not by ``sb-ece``)."""
    flat = _flat(text)
    return [name for name in names
            if not re.search(rf"(?<![\w<>=.-]){re.escape(_flat(name))}(?![\w<>=.-])", flat)]


def missing_loss_families(text: str, kind: str) -> list[str]:
    """The keys of :data:`calib.losses.REGISTRY`'s rows of ``kind`` of which ``text`` names no form and not the
    example."""
    from calib.losses import REGISTRY

    return [spec.key for spec in REGISTRY if spec.kind == kind and len(unnamed(text, (*spec.forms, spec.example)))
            == len(spec.forms) + 1]


def _help(capsys, *argv) -> str:
    """What ``calib <argv> --help`` prints."""
    from calib import cli

    with pytest.raises(SystemExit) as done:
        cli.main([*argv, "--help"])
    assert done.value.code == 0
    return capsys.readouterr().out


def test_train_help_names_every_loss_of_the_registry(capsys):
    """Issue 43, item 6: ``--loss``'s help was written by hand ("loss, e.g. ce, fl-3, flsd-53, flsc-531, brier,
    ls-0.05") and left out four families of the registry; it is generated from it now, every form and example."""
    from calib.losses import REGISTRY

    shown = _help(capsys, "train")
    assert missing_loss_families(shown, "primary") == [] and missing_loss_families(shown, "secondary") == []
    from calib.cli import _loss_help, _secondary_help

    assert _flat(_loss_help()) in _flat(shown) and _flat(_secondary_help()) in _flat(shown)
    for kind, text in (("primary", _loss_help()), ("secondary", _secondary_help())):
        specs = [spec for spec in REGISTRY if spec.kind == kind]
        assert len(specs) >= 6 and missing_loss_families(text, kind) == []
        assert unnamed(text, [name for spec in specs for name in (*spec.forms, spec.example)]) == []
    # the check can fail: the hand-written help of before
    assert missing_loss_families("loss, e.g. ce, fl-3, flsd-53, flsc-531, brier, ls-0.05", "primary") == [
        "mmce", "inverse", "dual", "aurc"]
    assert missing_loss_families("sb-ece, s-avuc, avuc-gs, mmce-w", "secondary") == ["avuc", "mmce"]


def test_train_help_names_every_dataset_network_and_augmentation(capsys):
    """``--data``, ``--model`` and ``--augment`` are generated from calib.data.DATASETS, calib.models.MODEL_NAMES
    and calib.run_config's AUGMENTATIONS and DEFAULT_AUGMENT (``--model`` named 5 of 10 forms); the choices of
    ``--diagnostics`` and ``--discard``, which argparse checks before anything is imported, are those of
    calib.run_config.DIAGNOSTICS and calib.runs.DISCARDABLE."""
    from calib.data import DATASETS
    from calib.models import MODEL_NAMES
    from calib.run_config import AUGMENTATIONS, DEFAULT_AUGMENT, DIAGNOSTICS
    from calib.runs import DISCARDABLE

    text = _help(capsys, "train")
    assert unnamed(text, [*DATASETS, *MODEL_NAMES, *AUGMENTATIONS]) == []
    from calib.cli import _augment_help, _data_help, _model_help

    for generated in (_data_help(), _model_help(), _augment_help()):
        assert _flat(generated) in _flat(text)
    assert unnamed(_data_help(), DATASETS) == [] and unnamed(_model_help(), MODEL_NAMES) == []
    assert unnamed(_augment_help(), [*AUGMENTATIONS, *DEFAULT_AUGMENT]) == []
    defaults = re.search(r"\(default: (.*), none otherwise\)", _augment_help()).group(1)
    shown = {data: choice for choice, datasets in re.findall(r"(\S+) for (.*?)(?=, \S+ for |\Z)", defaults)
             for data in re.split(r", | and ", datasets)}
    assert shown == DEFAULT_AUGMENT
    usage = _flat(text)
    assert re.search(r"--diagnostics \{([^}]*)\}", usage).group(1).split(",") == list(DIAGNOSTICS)
    assert re.search(r"--discard \{([^}]*)\}", usage).group(1).split(",") == list(DISCARDABLE)
    # the check can fail: the hand-written help of before
    assert unnamed("network, e.g. resnet20, resnet50, wrn-26-10, small-cnn, mlp", MODEL_NAMES) == [
        "linear", "linear-nobias", "resnet<d>", "preresnet<d>", "resnet110-bottleneck", "wrn-<d>-<k>", "densenet121"]


def test_book_run_help_names_every_profile(capsys):
    """``--profile``'s help describes each profile of calib_book.runner.PROFILES (the book's machinery is loaded only
    by ``calib book``, so the help cannot be generated from it before parsing)."""
    from calib_book.runner import PROFILES

    assert unnamed(_help(capsys, "book", "run"), PROFILES) == []


def test_parsing_a_command_loads_no_registry():
    """The help is generated when it is shown: parsing ``calib book run`` or ``calib train ...`` imports neither
    torch, numpy nor a registry (``calib book`` stays quick)."""
    code = ("import sys\nfrom calib import cli\nparser = cli._parser()\nparser.parse_args(['book', 'run'])\n"
            "parser.parse_args(['train', '--loss', 'fl-3', '--out', 'x'])\n"
            "print(sorted(m for m in ('torch', 'numpy', 'calib.losses', 'calib.data', 'calib.models', "
            "'calib.run_config') if m in sys.modules))\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                          timeout=scaled(120))
    assert done.returncode == 0 and done.stdout.strip() == "[]", done.stdout + done.stderr


# --------------------------------------------------------------------------------- README's and ARCHITECTURE's lists


def calib_modules(root: Path = CALIB) -> set[str]:
    """Every module and package under ``root`` by dotted name (``pkgutil``, nothing imported), but ``__main__``."""
    def walk(path: Path, prefix: str):
        for module in pkgutil.iter_modules([str(path)]):
            yield prefix + module.name
            if module.ispkg:
                yield from walk(path / module.name, f"{prefix}{module.name}.")

    return {name for name in walk(root, "calib.") if name != "calib.__main__"}


def _is_public(module: str) -> bool:
    return not any(part.startswith("_") for part in module.split(".")[1:])


def readme_modules(text: str) -> dict[str, int]:
    """``calib.<module>`` -> layer, from the ``calib/`` entry of README.md's Layout block: lines ``layer N: a,
    pkg/ (x, y), b`` (a package's submodules in parentheses), continued on indented lines."""
    block = text.split("## Layout", 1)[1].split("```", 2)[1]
    entry = re.search(r"^calib/.*?(?=^\S)", block, re.S | re.M).group(0)
    listed = {}
    for layer, names in re.findall(r"layer (\d+): (.*?)(?=layer \d+:|\Z)", " ".join(entry.split()), re.S):
        for package, submodules, module in re.findall(r"(\w+)/ \(([^)]*)\)|(\w+)", names):
            if package:
                listed[f"calib.{package}"] = int(layer)
                listed.update({f"calib.{package}.{s.strip()}": int(layer) for s in submodules.split(",")})
            else:
                listed[f"calib.{module}"] = int(layer)
    return listed


def readme_problems(text: str, modules: set[str], layers: dict[str, int]) -> list[str]:
    """What README.md's module list gets wrong: a public module it leaves out, a module it names that does not exist,
    a top-level module in another layer than calib's docstring puts it."""
    listed = readme_modules(text)
    problems = [f"{m} is not in README.md's list" for m in sorted(m for m in modules if _is_public(m))
                if m not in listed]
    problems += [f"README.md lists {m}, which does not exist" for m in sorted(set(listed) - modules)]
    problems += [f"README.md puts {m} in layer {layer}, calib/__init__.py in layer {layers.get(m)}"
                 for m, layer in sorted(listed.items()) if m.count(".") == 1 and m in modules
                 and layers.get(m) != layer]
    return problems


def test_the_readme_lists_every_module():
    """Issue 43, item 6: README.md's list lacked 28 of calib's 53 public modules (calib.corruptions, the five of
    calib.stats, calib.metrics.resampling, calib.losses.modules, calib.runs, ...) and named calib.focal._numerics,
    which is gone."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    modules = calib_modules()
    assert {"calib.corruptions", "calib.stats.effects", "calib.metrics.resampling"} <= modules
    assert readme_problems(readme, modules, _layers()) == []
    # the check can fail: a module left out, one that is gone, one in the wrong layer
    planted = (readme.replace("corruptions, ", "").replace("(intervals, ", "(intervals, gone, ")
               .replace("layer 4: plots, cli", "layer 4: plots\n                        layer 3: cli"))
    assert readme_problems(planted, modules, _layers()) == [
        "calib.corruptions is not in README.md's list", "README.md lists calib.stats.gone, which does not exist",
        "README.md puts calib.cli in layer 3, calib/__init__.py in layer 4"]


def architecture_problems(text: str, modules: set[str]) -> list[str]:
    """Public submodules of a package that ARCHITECTURE.md's layer table does not name (in backticks) in the row of
    the package's layer."""
    table = text.split("## The library's layers", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| \d \| ([^|]+) \| ([^|]+) \|", table, re.M)
    problems = []
    for module in sorted(m for m in modules if _is_public(m) and m.count(".") == 2):
        package, name = module.rsplit(".", 1)
        jobs = [job for names, job in rows if f"`{package}`" in names]
        if not jobs or f"`{name}`" not in jobs[0]:
            problems.append(f"ARCHITECTURE.md's layer table does not name {module}")
    return problems


def test_the_architecture_table_names_every_submodule():
    text = (REPO / "ARCHITECTURE.md").read_text(encoding="utf-8")
    assert architecture_problems(text, calib_modules()) == []
    planted = text.replace(", `resampling`", "")
    assert architecture_problems(planted, calib_modules()) == [
        "ARCHITECTURE.md's layer table does not name calib.metrics.resampling"]


# ------------------------------------------------------------------------------------------- the module docstrings

#: Docstrings that do not render whole yet, with what is wrong: the lead fixes them (another helper is editing the
#: module); the test fails once one renders whole, so that the entry goes.
NOT_WHOLE_YET = {
    "calib.runs": "'A run directory holds' ends a paragraph: the file table below it is no reStructuredText table "
                  "and renders as one run-on paragraph",
}


def _sphinx_role(name, rawtext, text, lineno, inliner, options=None, content=None):
    """A Sphinx cross-reference role (``:func:``, ``:mod:``, ...) as the literal text Sphinx shows."""
    from docutils import nodes, utils

    text = utils.unescape(text)
    titled = re.match(r"(.*?)\s*<.*>$", text, re.S)
    shown = titled.group(1) if titled else text.lstrip("!")
    return [nodes.literal(rawtext, shown.rsplit(".", 1)[-1] if shown.startswith("~") else shown)], []


SPHINX_ROLES = ("func", "mod", "class", "data", "meth", "attr", "obj", "exc", "doc", "ref", "numref", "term")


def docstring_problems(docstring: str) -> list[str]:
    """What keeps a docstring from rendering whole, read by docutils with Sphinx's cross-reference roles: a problem
    docutils reports (warning or worse: unexpected indentation, a list or block quote that ends without a blank
    line, an unknown role), and a paragraph that ends in the middle of a sentence (on a word, outside a table)."""
    from docutils import nodes
    from docutils.core import publish_doctree
    from docutils.parsers.rst import roles
    from sphinx.util.docutils import docutils_namespace

    with docutils_namespace():                     # the roles are registered for this parse only
        for role in SPHINX_ROLES:
            roles.register_local_role(role, _sphinx_role)
        tree = publish_doctree(docstring, settings_overrides={"report_level": 2, "halt_level": 5,
                                                              "warning_stream": False})
    problems = [" ".join(m.astext().split()) for m in tree.findall(nodes.system_message) if m["level"] >= 2]
    for paragraph in tree.findall(nodes.paragraph):
        last = paragraph.children[-1] if paragraph.children else None
        inside = (nodes.entry, nodes.system_message)
        if isinstance(last, nodes.Text) and re.search(r"\w\Z", last.astext()) and not isinstance(paragraph.parent,
                                                                                                   inside):
            problems.append(f"a paragraph ends mid-sentence: ...{' '.join(paragraph.astext().split())[-60:]!r}")
    return problems


def module_docstrings(root: Path = CALIB) -> dict[str, str]:
    """The docstring of calib and of every public module, as autodoc shows it (``inspect.cleandoc``)."""
    out = {}
    for module in sorted(m for m in calib_modules(root) | {"calib"} if _is_public(m)):
        path = root.parent.joinpath(*module.split("."))
        path = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
        out[module] = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")), clean=True) or ""
    return out


def test_every_module_docstring_renders_whole():
    """Issue 43, item 6: calib.metrics.binned's docstring stopped at "With distinct confidences" on the API page:
    splitting calib.metrics into a package had dropped its last two lines from the source."""
    docstrings = module_docstrings()
    assert len(docstrings) > 50 and not [m for m, doc in docstrings.items() if not doc.strip()]
    problems = {module: docstring_problems(doc) for module, doc in docstrings.items()}
    assert {m: p for m, p in problems.items() if p and m not in NOT_WHOLE_YET} == {}
    assert [m for m in NOT_WHOLE_YET if not problems[m]] == [], "renders whole now: remove it from NOT_WHOLE_YET"


def test_the_docstring_check_can_fail():
    cut = "Conventions:\n\n- **Equal-mass bins** are cut by position. With distinct confidences\n"
    assert docstring_problems(cut) == ["a paragraph ends mid-sentence: ...'ual-mass bins are cut by position. "
                                       "With distinct confidences'"]
    assert docstring_problems("Text.\n\n  quoted.\nnot quoted.\n") == [
        "<string>:4: (WARNING/2) Block quote ends without a blank line; unexpected unindent."]
    assert docstring_problems(":unknown:`x` is shown.") != []
    whole = ("The bins of :func:`ece <calib.metrics.binned.ece>` and :mod:`~calib.metrics`:\n\n- a list item;\n"
             "- ends with ``code``\n\n.. math::\n\n   x = 1\n\n===  ===\na    b\n===  ===\n")
    assert docstring_problems(whole) == []
