"""pyproject.toml and environment.yml must list the same packages with the same pins."""

import re
import tomllib
from pathlib import Path

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


def test_jupyter_book_is_pinned_below_2():
    # jupyter-book 2.x is the mystmd rewrite with no _config.yml / Sphinx: the book needs 1.x.
    assert _pyproject_requirements()["jupyter-book"] == ">=1.0.4.post1,<2"
