import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402

from calib import metrics  # noqa: E402
from calib.plots import reliability_diagram  # noqa: E402


def test_reliability_diagram_draws_the_bins_it_reports():
    rng = np.random.default_rng(0)
    p = rng.dirichlet(np.ones(4) * 0.3, size=2000)
    y = rng.integers(0, 4, size=2000)
    ax = reliability_diagram(p, y, n_bins=10, title="t")
    rel = metrics.reliability(p, y, n_bins=10)
    filled = rel.counts > 0
    # the first len(filled bins) bars are the accuracy bars, at the bins' accuracies
    heights = [bar.get_height() for bar in ax.patches[: int(filled.sum())]]
    np.testing.assert_allclose(heights, rel.accuracy[filled])
    share_ax = ax.figure.axes[-1]
    np.testing.assert_allclose([b.get_height() for b in share_ax.patches], rel.counts / rel.n)
    assert f"{100 * metrics.ece(p, y, n_bins=10):.2f}%" in ax.texts[0].get_text()
    matplotlib.pyplot.close("all")
