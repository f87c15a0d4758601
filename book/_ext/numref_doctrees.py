"""Numbered references (``{numref}``) that read each page's doctree once a build, not once a reference.

Sphinx 7.4 (the version jupyter-book 1.x allows) resolves each ``{numref}`` by unpickling the whole doctree of the
page that holds its target (``StandardDomain._resolve_numref_xref`` calls ``env.get_doctree``): the book's 88
references took 6.0 s of a 46 s build, for each of the two editions ``make test`` renders. Here they read the doctree
of a page from a store kept for the build's resolving phase, filled on the first reference to the page and emptied
when the build ends. The resolver only reads the doctree (the target's node type, then its number from the
environment), so sharing one copy between references changes nothing: the 93 built pages were byte for byte those
of a build without it. With a Sphinx whose domain has no such method, this extension does nothing.
"""

from __future__ import annotations

from sphinx.domains.std import StandardDomain

#: docname -> doctree, for the references of the build under way (emptied when it ends).
_DOCTREES: dict[str, object] = {}


class _DoctreesReadOnce:
    """The build environment, but a page's doctree is unpickled once (for the numref resolver, which reads it)."""

    def __init__(self, env):
        self._env = env

    def __getattr__(self, name):
        return getattr(self._env, name)

    def get_doctree(self, docname: str):
        if docname not in _DOCTREES:
            _DOCTREES[docname] = self._env.get_doctree(docname)
        return _DOCTREES[docname]


def _forget(app, *args) -> None:
    _DOCTREES.clear()


def setup(app):
    resolve = getattr(StandardDomain, "_resolve_numref_xref", None)
    if resolve is not None and not getattr(resolve, "_reads_doctrees_once", False):
        def _resolve_numref_xref(self, env, *args, **kwargs):
            return resolve(self, _DoctreesReadOnce(env), *args, **kwargs)

        _resolve_numref_xref._reads_doctrees_once = True
        StandardDomain._resolve_numref_xref = _resolve_numref_xref
    app.connect("env-updated", _forget)
    app.connect("build-finished", _forget)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
