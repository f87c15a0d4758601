"""Cross-references to the names a package re-exports: ``calib.stats.decide`` resolves to
``calib.stats.decisions.decide``, where the API reference documents it (book/api/ documents each submodule of a
package in its own section, and a docstring names the package's public name, as users import it). An unqualified
name (``decide`` in a docstring of ``calib.stats.effects``) is looked up in the module of the docstring first.

Sphinx emits ``missing-reference`` for a Python reference it cannot resolve; this handler imports the named object,
reads where it is defined (``__module__`` and ``__qualname__``; a module's data by the module that holds it) and
resolves the reference to that name when the reference documents it. Anything else stays unresolved and warns, so a
reference to a name the API reference does not document still fails the build.
"""

from __future__ import annotations

import importlib


def _locate(name: str):
    """The object ``name`` (dotted) names, and the module that holds its last part; None when it does not import."""
    parts = name.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        try:
            module = importlib.import_module(".".join(parts[:cut]))
        except Exception:                                     # noqa: BLE001 (not a module: try a shorter prefix)
            continue
        holder, obj = module, module
        try:
            for part in parts[cut:]:
                holder, obj = obj, getattr(obj, part)
        except AttributeError:
            return None
        return obj, holder, parts[-1]
    return None


def _defined_name(name: str) -> str | None:
    """Where the object ``name`` is defined, as a dotted name, when that differs from ``name``."""
    found = _locate(name)
    if found is None:
        return None
    obj, holder, last = found
    module = getattr(obj, "__module__", None)
    qualname = getattr(obj, "__qualname__", None)
    if isinstance(module, str) and isinstance(qualname, str) and not isinstance(obj, type(importlib)):
        real = f"{module}.{qualname}"
    elif isinstance(holder, type(importlib)):                  # a module's data: defined where the module holds it
        import sys

        owners = [m for m in list(sys.modules.values()) if getattr(m, "__name__", "").startswith(
            holder.__name__ + ".") and getattr(m, last, object()) is obj and last in vars(m)]
        real = f"{owners[0].__name__}.{last}" if owners else None
    else:
        real = None
    return real if real and real != name else None


def resolve_reexport(app, env, node, contnode):
    if node.get("refdomain") != "py":
        return None
    target = node.get("reftarget", "")
    module = node.get("py:module")
    candidates = [target] + ([f"{module}.{target}"] if module and not target.startswith(module) else [])
    domain = env.get_domain("py")
    for candidate in candidates:
        real = _defined_name(candidate) if "." in candidate else None
        names = [real] if real else []
        if real and "._" in real:                 # defined in a private module: documented under its package's name
            package, _, rest = real.partition("._")
            names.append(f"{package}.{rest.split('.', 1)[-1]}")
        for name in names + ([candidate] if candidate != target else []):
            resolved = domain.resolve_xref(env, node["refdoc"], app.builder, node["reftype"], name, node, contnode)
            if resolved is None and node["reftype"] in ("func", "class", "exc", "data", "meth"):
                resolved = domain.resolve_any_xref(env, node["refdoc"], app.builder, name, node, contnode)
                resolved = resolved[0][1] if resolved else None
            if resolved is not None:
                return resolved
    return None


def setup(app):
    app.connect("missing-reference", resolve_reexport)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
