"""Figures of calibration for a practitioner's own models (matplotlib): the reliability diagram, and the figure
style for notebooks read on a screen of any width (:func:`use_web_figures`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from calib import metrics

if TYPE_CHECKING:            # matplotlib is imported by the functions that draw
    from matplotlib.typing import RcKeyType

#: Font sizes (points) for figures read on a phone as well as a desktop, up from matplotlib's 10 pt. On a phone a
#: figure keeps at least 560 CSS px (``book/_static/claims.css``): a 10-inch figure (960 px as SVG) is then scaled by
#: 0.58, and its 11 pt tick labels come out at 8.6 px, against 4.8 px for the old 1x PNG shrunk to 349 px.
#:
#: :meta hide-value:
WEB_FIGURE_STYLE: dict[RcKeyType, float] = {"font.size": 12.0, "axes.titlesize": 12.0, "axes.labelsize": 12.0,
                                            "xtick.labelsize": 11.0, "ytick.labelsize": 11.0, "legend.fontsize": 10.0,
                                            "figure.titlesize": 12.0}
#: The formats a notebook's inline figures are written in, SVG which the HTML book shows (sharp at any width, text
#: included), and a 2x PNG (:data:`WEB_FIGURE_DPI`), which the PDF book includes (LaTeX does not read SVG).
WEB_FIGURE_FORMATS = ("svg", "png")
#: The resolution of the PNG copy, 2x a screen's 100 dpi.
WEB_FIGURE_DPI = 200


def use_web_figures() -> None:
    """Set matplotlib up for figures read on a phone and a desktop: :data:`WEB_FIGURE_STYLE`'s font sizes and,
    in a Jupyter kernel, inline figures written as SVG and a 2x PNG (:data:`WEB_FIGURE_FORMATS`).

    Outside a Jupyter kernel only the font sizes and ``savefig.dpi`` apply.
    """
    import matplotlib.pyplot as plt

    plt.rcParams.update(WEB_FIGURE_STYLE)
    plt.rcParams["savefig.dpi"] = WEB_FIGURE_DPI
    try:
        from IPython import get_ipython
        from matplotlib_inline.backend_inline import set_matplotlib_formats
    except ImportError:                                  # no IPython: a script, where savefig's format applies
        pass
    else:
        if get_ipython() is not None:
            set_matplotlib_formats(*WEB_FIGURE_FORMATS, dpi=WEB_FIGURE_DPI)


def reliability_diagram(probs, labels, n_bins: int = 15, binning: str = "uniform", ax=None, title: str | None = None,
                        show_ece: bool = True):
    """Reliability diagram: accuracy per confidence bin against the diagonal, with the share of samples below.

    As in Mukhoti et al. (2020), Fig. 1 (after Guo et al. 2017, Fig. 1): one bar per bin at the bin's
    accuracy A_i; the gap to the bin's mean confidence C_i is shaded (red: over-confident, C_i > A_i; blue:
    under-confident); the lower panel shows ``|B_i| / N``. Empty bins draw nothing.

    Parameters
    ----------
    probs, labels, n_bins, binning
        As for :func:`calib.metrics.reliability <calib.metrics.binned.reliability>`.
    ax : matplotlib Axes, optional
        Where to draw the reliability panel; the share panel is appended below it. A new figure otherwise.
    title : str, optional
    show_ece : bool
        Write the ECE with the same bins in the corner.

    Returns
    -------
    matplotlib Axes
        The reliability panel (the share panel is ``ax.figure.axes[-1]``).
    """
    import matplotlib.pyplot as plt
    from mpl_toolkits.axes_grid1 import make_axes_locatable

    rel = metrics.reliability(probs, labels, n_bins=n_bins, binning=binning)
    if ax is None:
        _, ax = plt.subplots(figsize=(4.2, 4.8))
    share_ax = make_axes_locatable(ax).append_axes("bottom", size="28%", pad=0.12, sharex=ax)

    lo, hi = rel.edges[:-1], rel.edges[1:]
    filled = rel.counts > 0
    width = (hi - lo)[filled]
    left = lo[filled]
    acc, conf = rel.accuracy[filled], rel.confidence[filled]
    ax.bar(left, acc, width=width, align="edge", color="#4c72b0", edgecolor="white", linewidth=0.6,
           label="accuracy $A_i$")
    over = conf > acc
    gap_bottom = np.minimum(acc, conf)
    gap_height = np.abs(conf - acc)
    ax.bar(left[over], gap_height[over], bottom=gap_bottom[over], width=width[over], align="edge",
           color="#dd5555", alpha=0.45, hatch="//", edgecolor="#aa2222", linewidth=0.4,
           label="gap (over-confident)" if over.any() else None)
    ax.bar(left[~over], gap_height[~over], bottom=gap_bottom[~over], width=width[~over], align="edge",
           color="#55aadd", alpha=0.45, hatch="\\\\", edgecolor="#2266aa", linewidth=0.4,
           label="gap (under-confident)" if (~over).any() else None)
    ax.plot([0, 1], [0, 1], color="black", linestyle="--", linewidth=1, label="perfect calibration")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_ylabel("accuracy")
    ax.tick_params(labelbottom=False)
    ax.legend(loc="upper left", fontsize="small", frameon=False)
    if show_ece:
        ece = metrics.ece(probs, labels, n_bins=n_bins, binning=binning)
        ax.text(0.97, 0.04, f"ECE = {100 * ece:.2f}%", transform=ax.transAxes, ha="right", va="bottom",
                fontsize="small")
    if title:
        ax.set_title(title)

    share_ax.bar(lo, rel.counts / rel.n, width=hi - lo, align="edge", color="#888888", edgecolor="white",
                 linewidth=0.5)
    share_ax.set_xlabel("confidence")
    share_ax.set_ylabel("share", fontsize="small")
    share_ax.set_xlim(0, 1)
    return ax
