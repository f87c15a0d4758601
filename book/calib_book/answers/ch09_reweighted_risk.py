"""The answer key of chapter 09 (Reweighted risk). Chapter 09's exercises: the AURC weights, the calibration
hierarchy, inverse and dual focal loss, and small full-batch trainings with inverse focal loss.
"""

from __future__ import annotations

import functools

from calib_book.answers.common import OneTorchThread, as_in_the_notebook
from calib_book.answers.registry import Expected, interval_claim, parameter, register, verdict_claim, verdict_of


#: kappa = 0.4 (m = 4 of 10) in the book; a course draws another clipping level, 0.2 to 0.7
HARMONIC_KAPPA = parameter("ex-ch09-harmonic", "kappa", 0.4, lambda rng: float(rng.choice([0.2, 0.3, 0.5, 0.6, 0.7])),
                           shown=(("$\\kappa = {}$), write out", lambda k: f"{k:g}$ ($m = {round(10 * k)}"),
                                  "exact_weights(10, {})", ("w_h.mean(), {} / 10,", lambda k: str(round(10 * k)))),
                           text=str)
#: the prediction (0.7, 0.3) in the book (the chapter's counterexample); a course draws another first probability
HIERARCHY_P = parameter(
    "ex-ch09-rho", "p", 0.7, lambda rng: float(rng.choice([0.6, 0.65, 0.8, 0.9])),
    shown=("constant prediction $({})$ when", "np.abs(np.array([{}])",
           "calibration_hierarchy([1.0], [[{}]], [[0.5, 0.5]], rho)",
           ("off by ${}$, so", lambda p: f"{abs(p - 0.5):g}"),
           ("(2 \\cdot {0}^\\rho)^{{1/\\rho}} = 2^{{1/\\rho}}\\,{0}$", lambda p: f"{abs(p - 0.5):g}"),
           ("\\cdot 2 \\cdot {0}^\\rho)^{{1/\\rho}} = {0}$", lambda p: f"{abs(p - 0.5):g}")),
    text=lambda p: f"{p:g}, {1 - p:.2g}")


def _ch09_au_exact(n=10, kappa=None):
    """The AU loss's weights (``cdf="exact"``) of ``n`` descending scores, computed under the notebook's torch
    kernels (:func:`as_in_the_notebook`), once a process (a fresh copy each call)."""
    return _ch09_au_exact_once(n, HARMONIC_KAPPA() if kappa is None else kappa).copy()


@functools.lru_cache(maxsize=None)
def _ch09_au_exact_once(n, kappa):
    """:func:`_ch09_au_exact`'s weights, kept for the process."""
    return as_in_the_notebook(_compute_au_exact, n, kappa)


def _compute_au_exact(n, kappa):
    """:func:`_ch09_au_exact`, in this process."""
    import torch

    from calib.losses import au_weights

    scores = torch.linspace(1.0, 0.1, n, dtype=torch.float64)          # descending: rank r is entry r - 1
    return au_weights(scores, kappa=kappa, cdf="exact").numpy()


def _ch09_hierarchy(rho):
    from calib.selective import calibration_hierarchy

    p = HIERARCHY_P()
    return calibration_hierarchy([1.0], [[p, 1 - p]], [[0.5, 0.5]], rho)


def _ch09_printed_bound_holds_only_at():
    import numpy as np

    rhos = np.linspace(1.0, 2.0, 101)
    holds = [r for r in rhos if _ch09_hierarchy(r).ce >= _ch09_hierarchy(r).lower_printed - 1e-12]
    return float(holds[0]) if len(holds) == 1 else float("nan")


#: gamma = 6 in the book; a course draws 5, 7 or 8 (for each, p = 0.3 lies where the gradient is positive, which the
#: solution's autograd check uses)
IFL_GAMMA = parameter("ex-ch09-ifl", "gamma", 6, lambda rng: int(rng.choice([5, 7, 8])),
                      shown=("$\\gamma = {}$", "1 + p_s + {} * p_s", "dl_dp.subs(g_s, {})", "np.exp(-1 - 1 / {})",
                             ("inverse_focal_positive_interval({})", lambda g: f"{g}.0")), text=str)
#: p = (0.65, 0.35) in the book; a course draws the first probability from 0.55 to 0.8
DUAL_P = parameter("ex-ch09-dual-binary", "p", 0.65, lambda rng: float(rng.choice([0.55, 0.6, 0.7, 0.75, 0.8])),
                   shown=("\\mathbf p = ({})$", "np.array([{}])"), text=lambda p: f"{p:g}, {1 - p:.2g}")


def _ch09_ifl(part, gamma=None):
    gamma = float(IFL_GAMMA()) if gamma is None else gamma
    from scipy.optimize import minimize_scalar

    from calib.selective import inverse_focal_dp, inverse_focal_positive_interval

    lo, hi = (float(v) for v in inverse_focal_positive_interval(gamma))
    if part == "low":
        return lo
    if part == "high":
        return hi
    res = minimize_scalar(lambda p: -inverse_focal_dp(p, gamma), bounds=(lo, hi), method="bounded",
                          options={"xatol": 1e-12})
    return float(-res.fun)


def _ch09_dual(variant):
    from calib.selective import dual_focal_weight

    p = DUAL_P()
    return float(dual_focal_weight([[p, 1 - p]], [1], 3.0, variant)[0])


def _ch09_smallest_k_code_differs_from_eq24():
    import numpy as np

    from calib.selective import dual_focal_weight

    rng = np.random.default_rng(0)
    for k in range(2, 6):
        p = rng.dirichlet(np.ones(k), size=200)
        y = rng.integers(0, k, 200)
        if not np.allclose(dual_focal_weight(p, y, 3.0, "official"), dual_focal_weight(p, y, 3.0, "competitor")):
            return k
    return -1


register("ex-ch09-harmonic", "09-reweighted-risk",
         weights=Expected(_ch09_au_exact, rtol=1e-10, hint="the exact AURC weights by rank"),
         mean=Expected(lambda: float(_ch09_au_exact().mean()), rtol=1e-10, hint="the mean weight of the AURC loss"))
register("ex-ch09-rho", "09-reweighted-risk",
         ce=Expected(lambda: _ch09_hierarchy(1.5).ce, rtol=1e-8, hint="the l_rho calibration error of Def. 3.6"),
         cwece=Expected(lambda: _ch09_hierarchy(1.5).cwece, rtol=1e-8,
                        hint="the class-wise calibration error of Def. 3.7"),
         holds_only_at=Expected(_ch09_printed_bound_holds_only_at, rtol=1e-9,
                                hint="the constant of the printed bound"))
register("ex-ch09-ifl", "09-reweighted-risk",
         low=Expected(lambda: _ch09_ifl("low"), rtol=1e-8, hint="where the inverse-focal gradient changes sign"),
         high=Expected(lambda: _ch09_ifl("high"), rtol=1e-8, hint="where the inverse-focal gradient changes sign"),
         maximum=Expected(lambda: _ch09_ifl("maximum"), rtol=1e-7,
                          hint="the largest positive gradient of the inverse focal loss"))
register("ex-ch09-dual-binary", "09-reweighted-risk",
         code=Expected(lambda: _ch09_dual("official"), rtol=1e-10,
                       hint="the released code's reading of the dual focal loss"),
         eq24=Expected(lambda: _ch09_dual("competitor"), rtol=1e-10, hint="the paper's Eq. 24"),
         smallest_k=Expected(_ch09_smallest_k_code_differs_from_eq24,
                             hint="when ties and ranks differ between the two readings"))


@functools.lru_cache(maxsize=None)
def _ch09_ifl_runs(gamma, seeds=(0, 1, 2), steps=100):
    """ex-ch09-ifl-train's runs: per seed, the test ECE (15 equal-width bins) and over-confidence (mean confidence
    minus accuracy) of an MLP 20-32-10 trained by full-batch Adam (lr 1e-2, 100 steps) with inverse focal loss
    (gamma = 0: cross-entropy) on the first 1,000 of the stand-in problem's 4,000 training points (the chapter's quick
    profile), scored on the first 5,000 of its 10,000 test points; trained under the notebook's torch kernels
    (:func:`as_in_the_notebook`)."""
    return as_in_the_notebook(_train_ifl_runs, gamma, seeds, steps)


def _train_ifl_runs(gamma, seeds, steps):
    """:func:`_ch09_ifl_runs`, in this process."""
    import numpy as np
    import torch

    from calib import metrics
    from calib.data import gaussian_mixture_means, make_gaussian_mixture
    from calib.losses import inverse_focal_loss
    from calib.small_training import train_classifier

    rows = []
    with OneTorchThread():
        for seed in seeds:
            means = gaussian_mixture_means(10, 20, spread=0.5, seed=seed)
            x, y, _ = make_gaussian_mixture(4_000, means, seed=seed + 1)
            x_test, y_test, _ = make_gaussian_mixture(10_000, means, seed=seed + 3)
            x, y = torch.as_tensor(x[:1_000], dtype=torch.float32), torch.as_tensor(y[:1_000])
            torch.manual_seed(seed)
            net = torch.nn.Sequential(torch.nn.Linear(20, 32), torch.nn.ReLU(), torch.nn.Linear(32, 10))
            net, _ = train_classifier(net, x, y, lambda z, t: inverse_focal_loss(z, t, gamma), epochs=steps, lr=1e-2,
                                      progress=False)
            with torch.no_grad():
                probs = torch.softmax(net(torch.as_tensor(x_test[:5_000], dtype=torch.float32)).double(), 1).numpy()
            rows.append((metrics.ece(probs, y_test[:5_000], n_bins=15),
                         probs.max(1).mean() - metrics.accuracy(probs, y_test[:5_000])))
    return np.array(rows)


#: seeds 0, 1 and 2 in the book; a course draws three other consecutive seeds (each its own stand-in problem)
IFL_FIRST_SEED = parameter("ex-ch09-ifl-train", "first_seed", 0, lambda rng: int(rng.integers(3, 1000)),
                           shown=(("on seeds {}. Compare", lambda k: f"{k}, {k + 1} and {k + 2}"),
                                  ("seeds_ifl = [{}]", lambda k: f"{k}, {k + 1}, {k + 2}")), text=str)


def _ch09_ifl_interval(column):
    from calib.stats import paired_seed_interval

    seeds = tuple(range(IFL_FIRST_SEED(), IFL_FIRST_SEED() + 3))
    interval = paired_seed_interval(_ch09_ifl_runs(2.0, seeds)[:, column], _ch09_ifl_runs(0.0, seeds)[:, column])
    return (interval.low, interval.high)


register("ex-ch09-ifl-train", "09-reweighted-risk",
         ece=interval_claim(lambda: _ch09_ifl_interval(0),
                            hint="a paired interval over seeds of the difference ECE(inverse FL) - ECE(CE)"),
         overconfidence=interval_claim(lambda: _ch09_ifl_interval(1),
                                       hint="a paired interval over seeds of the difference of the over-confidences, "
                                            "inverse FL - CE"),
         verdict=verdict_claim(lambda: verdict_of(_ch09_ifl_interval(1)),
                               hint="which side of zero the over-confidence interval lies on", on="overconfidence"))
