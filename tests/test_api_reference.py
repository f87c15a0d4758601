"""The API reference (book/api/*.md) covers every public name of calib and of the book's machinery (calib_book),
once, and names only real modules; the answer key is in none of it.

The pages are MyST files whose ``{eval-rst}`` blocks hold ``.. automodule::`` directives; Sphinx documents what
they select, and with ``undoc-members`` off it silently drops a member that has no docstring. So a name counts
as covered when its module is automodule'd with ``:members:``, the name is not excluded there, and it has a
docstring (functions, classes, their public methods) or a ``#:`` doc comment (constants). A name re-exported
from another module (``calib_book.runner.repo_root``) may be excluded where it is imported, provided it is
covered where it is defined. The build itself (``-W -n``) checks that the docstrings render.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
from pathlib import Path

import yaml
from sphinx.pycode import ModuleAnalyzer

import calib
import calib_book

ROOT = Path(__file__).resolve().parents[1]
API = ROOT / "book" / "api"

#: The public modules of calib (issue 12): the packages calib.metrics, calib.posthoc, calib.losses, calib.focal,
#: calib.stats, calib.symbolic and calib.published only re-export these.
PUBLIC_MODULES = [
    "calib.metrics.binned", "calib.metrics.scores", "calib.metrics.risk_coverage", "calib.metrics.registry",
    "calib.metrics.streaming", "calib.metrics.resampling",
    "calib.stats.intervals", "calib.stats.test_set", "calib.stats.decisions", "calib.stats.ranks",
    "calib.stats.effects",
    "calib.posthoc.temperature", "calib.posthoc.focal_temperature", "calib.posthoc.grid", "calib.posthoc.registry",
    "calib.losses.functional", "calib.losses.modules", "calib.losses.batch", "calib.losses.registry",
    "calib.focal.gradient", "calib.focal.schedules", "calib.focal.optimum", "calib.focal.calibration_map",
    "calib.focal.numerics",
    "calib.soft_binning", "calib.simulate", "calib.selective", "calib.data", "calib.corruptions", "calib.toy_data",
    "calib.dataset_files", "calib.models", "calib.small_training", "calib.run_config", "calib.train",
    "calib.distributed", "calib.runs", "calib.experiments", "calib.shift",
    "calib.plots", "calib.symbolic.base", "calib.symbolic.mukhoti", "calib.symbolic.charoenphakdee",
    "calib.symbolic.zhou", "calib.symbolic.komisarenko", "calib.symbolic.karandikar", "calib.published.tables",
    "calib.published.compare", "calib.cli",
]
#: The modules of the book's machinery (book/calib_book) the machinery page documents: all but the answer key,
#: which no page of the student site may render (autodoc would show its values, viewcode its source).
BOOK_MODULES = ["calib_book.claims", "calib_book.notebook", "calib_book.linear_toy", "calib_book.exercises",
                "calib_book.pages", "calib_book.browser", "calib_book.cache", "calib_book.student", "calib_book.runner",
                "calib_book.pdf", "calib_book.paths", "calib_book.course_check", "calib_book.leaks",
                "calib_book.course", "calib_book.timeouts", "calib_book.coverage"]
#: The answer key: a package, each of whose modules (the registry, one per chapter) counts as the key.
ANSWER_KEY = "calib_book.answers"


def is_answer_key(module: str | None) -> bool:
    """Whether ``module`` is the answer key or one of its submodules."""
    return module is not None and (module == ANSWER_KEY or module.startswith(ANSWER_KEY + "."))

#: Modules that are not documented: the package roots (their names are the submodules' re-exports) and the entry
#: point. Private modules (a name starting with "_") are left out as well.
NOT_DOCUMENTED = {"calib", "calib.metrics", "calib.posthoc", "calib.losses", "calib.focal", "calib.symbolic",
                  "calib.stats", "calib.published", "calib.__main__"}

_BLOCK = re.compile(r"```\{eval-rst\}\n(.*?)```", re.S)
_DIRECTIVE = re.compile(r"^\.\. automodule::\s*(\S+)\s*\n((?:[ \t]+:[^\n]*\n?)*)", re.M)
_OPTION = re.compile(r":([\w-]+):[ \t]*(.*)")


def automodules(pages) -> list[dict]:
    """Every ``.. automodule::`` of the given MyST pages: module, page and options (name -> value)."""
    found = []
    for page in pages:
        text = Path(page).read_text(encoding="utf-8")
        for block in _BLOCK.findall(text):
            for module, options in _DIRECTIVE.findall(block):
                opts = dict(_OPTION.match(line.strip()).groups() for line in options.splitlines() if line.strip())
                found.append({"module": module, "page": Path(page).name, "options": opts})
    return found


def public_names(module) -> list[str]:
    """``__all__``, or the public functions and classes the module defines when it has none."""
    if hasattr(module, "__all__"):
        return list(module.__all__)
    return [name for name, obj in vars(module).items() if not name.startswith("_")
            and (inspect.isfunction(obj) or inspect.isclass(obj)) and obj.__module__ == module.__name__]


def _is_routine_or_class(obj) -> bool:
    return inspect.isclass(obj) or inspect.isroutine(obj)


def undocumented(module_name: str, names) -> list[str]:
    """Those of ``names`` that autodoc would drop for want of a docstring (or of a ``#:`` doc comment)."""
    module = importlib.import_module(module_name)
    attr_docs = ModuleAnalyzer.for_module(module_name).find_attr_docs()
    missing = []
    for name in names:
        obj = getattr(module, name)
        if _is_routine_or_class(obj):
            if not inspect.getdoc(obj):
                missing.append(name)
            if inspect.isclass(obj) and obj.__module__ == module_name:
                for attr, value in vars(obj).items():
                    func = value.fget if isinstance(value, property) else getattr(value, "__func__", value)
                    if not attr.startswith("_") and callable(func) and not getattr(func, "__doc__", None):
                        missing.append(f"{name}.{attr}")
        elif ("", name) not in attr_docs:
            missing.append(name)
    return missing


def coverage_problems(entries, modules) -> list[str]:
    """What keeps the automodule ``entries`` from covering every public name of ``modules``, as messages."""
    problems = []
    by_module: dict[str, dict] = {}
    for entry in entries:
        if entry["module"] in by_module:
            problems.append(f"{entry['module']} is automodule'd twice ({by_module[entry['module']]['page']}, "
                            f"{entry['page']}): Sphinx would report duplicate objects")
        by_module[entry["module"]] = entry
        try:
            importlib.import_module(entry["module"])
        except ImportError:
            problems.append(f"{entry['page']}: .. automodule:: {entry['module']} names no importable module")
    for name in modules:
        entry = by_module.get(name)
        if entry is None or "members" not in entry["options"]:
            problems.append(f"{name} has no '.. automodule:: {name}' with ':members:' in book/api/*.md")
            continue
        module = importlib.import_module(name)
        excluded = {n.strip() for n in entry["options"].get("exclude-members", "").split(",") if n.strip()}
        for member in excluded:
            obj = getattr(module, member, None)
            home = getattr(obj, "__module__", None)
            if home == name or home not in by_module or member not in public_names(importlib.import_module(home)):
                problems.append(f"{name}.{member} is excluded but not documented where it is defined ({home})")
        shown = [n for n in public_names(module) if n not in excluded]
        problems += [f"{name}.{n} has no docstring (autodoc drops it)" for n in undocumented(name, shown)]
    return problems


def test_every_public_module_is_listed():
    """A new public module must be added to PUBLIC_MODULES (and so to the reference)."""
    found = {m.name for m in pkgutil.walk_packages(calib.__path__, "calib.")} | {"calib"}
    public = {m for m in found if not any(part.startswith("_") for part in m.split(".")[1:])}
    assert public - NOT_DOCUMENTED == set(PUBLIC_MODULES)


def test_every_book_module_but_the_answer_key_is_listed():
    found = {m.name for m in pkgutil.walk_packages(calib_book.__path__, "calib_book.")}
    key = {name for name in found if is_answer_key(name)}
    assert ANSWER_KEY in key and len(key) > 1                       # the key's package and its modules
    assert found - key == set(BOOK_MODULES)


def test_api_reference_covers_every_public_name():
    pages = sorted(API.glob("*.md"))
    entries = automodules(pages)
    assert entries, "no automodule directive found in book/api/*.md"
    assert coverage_problems(entries, PUBLIC_MODULES + BOOK_MODULES) == []


def test_the_answer_key_is_neither_documented_nor_linked_to_its_source():
    """No automodule names the key or one of its modules, and no documented module lists one of their objects among
    its members: autodoc would render the key's values and viewcode its source
    (``_modules/calib_book/answers/registry.html``)."""
    entries = automodules(sorted(API.glob("*.md")))
    assert not [e["module"] for e in entries if is_answer_key(e["module"])]
    leaks = [f"{e['module']}.{name}" for e in entries if e["module"] in BOOK_MODULES
             for name in public_names(importlib.import_module(e["module"]))
             if is_answer_key(getattr(getattr(importlib.import_module(e["module"]), name), "__module__", None))]
    assert leaks == []
    # the check can fail: a module that re-exported the key's Expected in __all__ would be reported
    exercises = importlib.import_module("calib_book.exercises")
    assert is_answer_key(exercises.Expected.__module__) and "Expected" not in exercises.__all__
    assert [is_answer_key(m) for m in ("calib_book.answers", "calib_book.answers.ch07_focal_calibration_map",
                                       "calib_book.answers_other", "calib_book.exercises", None)] == [
        True, True, False, False, False]


def test_api_pages_are_in_the_toc():
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    listed = set(re.findall(r"book/api/[\w-]+", str(toc)))
    assert listed == {f"book/api/{p.stem}" for p in API.glob("*.md")}


def test_coverage_check_can_fail(tmp_path):
    """The checker reports a missing module, a name the pages drop, a bogus module and a bad exclusion."""
    page = tmp_path / "x.md"
    page.write_text("# X\n\n```{eval-rst}\n.. automodule:: calib.stats\n   :members:\n   :exclude-members: decide\n\n"
                    ".. automodule:: calib.no_such_module\n   :members:\n\n.. automodule:: calib.plots\n```\n",
                    encoding="utf-8")
    entries = automodules([page])
    assert [e["module"] for e in entries] == ["calib.stats", "calib.no_such_module", "calib.plots"]
    problems = "\n".join(coverage_problems(entries, ["calib.stats", "calib.plots", "calib.metrics"]))
    assert "calib.stats.decide is excluded" in problems
    assert "calib.no_such_module names no importable module" in problems
    assert "calib.plots has no '.. automodule:: calib.plots' with ':members:'" in problems
    assert "calib.metrics has no '.. automodule:: calib.metrics'" in problems


def test_undocumented_names_are_reported(tmp_path, monkeypatch):
    (tmp_path / "api_probe.py").write_text(
        '"""Probe."""\n\nX = 1\n#: Documented.\nY = 2\n\n\ndef f():\n    pass\n\n\ndef g():\n    """Doc."""\n\n\n'
        'class C:\n    """Doc."""\n\n    def m(self):\n        pass\n\n    def _private(self):\n        pass\n',
        encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert undocumented("api_probe", ["X", "Y", "f", "g", "C"]) == ["X", "f", "C.m"]
