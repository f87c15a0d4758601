"""Launch buttons that open a file the repository holds.

The book's pages are the executed notebooks ``_build/src/chapters/NN.ipynb``, so sphinx-book-theme links its
"open in a hosted notebook" buttons to ``chapters/NN.ipynb``, which the repository does not hold (the chapters are
MyST Markdown, ``chapters/NN.md``; ``.gitignore`` keeps generated notebooks out). This extension points Binder's
button at the ``.md`` source, which JupyterLab opens as a notebook through jupytext (in ``environment.yml``, which
Binder installs), and drops Colab's: Colab opens only ``.ipynb`` files from GitHub. It runs after the theme's
``add_launch_buttons`` (priority 501).
"""

from __future__ import annotations

COLAB = "colab.research.google.com"


def retarget_launch_buttons(app, pagename, templatename, context, doctree) -> None:
    """Point each launch button of a chapter page at the chapter's ``.md`` source; drop Colab's, which cannot open
    it (and the launch menu when nothing is left in it)."""
    groups = []
    for group in context.get("header_buttons", []):
        buttons = group.get("buttons")
        if isinstance(buttons, list) and buttons:
            buttons = [b for b in buttons if COLAB not in str(b.get("url", ""))]
            for button in buttons:
                url = str(button.get("url", ""))
                # a hosted service's link (Binder, JupyterHub); not a JS button (full screen, print), which has no
                # url, nor the download of the page's own notebook (../_sources/...ipynb), which the build holds
                if url.startswith(("http://", "https://")):
                    button["url"] = url.replace(f"{pagename}.ipynb", f"{pagename}.md")
            if not buttons:
                continue
            group["buttons"] = buttons
        groups.append(group)
    if "header_buttons" in context:
        context["header_buttons"] = groups


def setup(app):
    app.connect("html-page-context", retarget_launch_buttons, priority=502)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
