"""The answer key of chapter 04 (Weight magnification in a linear model). Chapter 04's exercises: the linear toy of
App. B rerun at the exercises' settings, its separable limit and the stationary point of the focal risk.
"""

from __future__ import annotations

import functools

from calib_book.answers.common import as_in_the_notebook, sympy_module
from calib_book.answers.registry import Expected, parameter, register


@functools.lru_cache(maxsize=None)
def _linear_toy_rerun(noise=0.1, gamma=1.0, half_side=2.0, seeds=tuple(range(5))):
    """Chapter 04 at one setting, as its solutions rerun it (App. B toy, 500 full-batch steps of 0.5 from 0)."""
    from calib_book.linear_toy import rerun_linear_toy

    return rerun_linear_toy(noise=noise, gamma=gamma, half_side=half_side, seeds=seeds)


def _toy_ratio(**setting):
    return float(_linear_toy_rerun(**setting)["ratio"].mean())


def _toy_above_90(loss, **setting):
    return float(_linear_toy_rerun(**setting)[f"above_{loss}"].mean())


def _toy_median(loss, **setting):
    return float(_linear_toy_rerun(**setting)[f"median_{loss}"].mean())


@functools.lru_cache(maxsize=None)
def _separable_margin():
    from calib.data import make_linear_toy, separability_through_origin

    sep = make_linear_toy(noise=0.0, seed=0, margin=1.0)
    return separability_through_origin(sep.x_train, sep.y_train)[1]


@functools.lru_cache(maxsize=None)
def _stationary_gradients():
    """Autograd gradients of the focal (gamma = 1) and cross-entropy risks at focal loss's solution on the seed-0
    draw, computed under the notebook's torch kernels (:func:`as_in_the_notebook`)."""
    return as_in_the_notebook(_compute_stationary_gradients)


def _compute_stationary_gradients():
    """:func:`_stationary_gradients`, in this process."""
    import torch

    from calib.data import make_linear_toy
    from calib.train import logistic_gradient_descent

    d = make_linear_toy(noise=0.1, seed=0)
    w_fl = logistic_gradient_descent(d.x_train[None], d.y_train[None], gamma=[1.0], lr=0.5, iterations=500,
                                     record_every=500)["final_w"][0]
    x, y = torch.as_tensor(d.x_train, dtype=torch.float64), torch.as_tensor(d.y_train, dtype=torch.float64)
    w = torch.tensor(w_fl, dtype=torch.float64, requires_grad=True)
    log_p = torch.nn.functional.logsigmoid((2 * y - 1) * (x @ w))           # log of the true label's probability
    (grad_fl,) = torch.autograd.grad(-((1 - log_p.exp()) * log_p).mean(), w)
    (grad_ce,) = torch.autograd.grad(torch.nn.functional.binary_cross_entropy_with_logits(x @ w, y), w)
    return grad_fl.numpy(), float(grad_ce @ w.detach() / w.detach().norm())


register("ch04-ex-log-growth", "04-linear-toy",
         margin=Expected(_separable_margin, rtol=1e-4,
                         hint="the maximum-margin separator through the origin"),
         per_decade=Expected(lambda: float(sympy_module().log(10)) / _separable_margin(), rtol=1e-4,
                             hint="the implicit bias of gradient descent on separable data"))
register("ch04-ex-stationary", "04-linear-toy",
         fl_gradient=Expected(lambda: _stationary_gradients()[0], rtol=0, atol=1e-8,
                              hint="the stationarity of the focal risk"),
         ce_along_w=Expected(lambda: _stationary_gradients()[1], rtol=1e-6, atol=1e-12,
                             hint="the cross-entropy gradient at focal loss's solution"))
#: 15 % of labels flipped in the book (the chapter's table has 0, 5, 10 and 20 %); a course draws another level above
#: the chapter's 10 % (the solution compares with it) and off the table
_NOISE_WORDS = {0.125: "five quarters of", 0.15: "one and a half times", 0.175: "seven quarters of",
                0.25: "two and a half times", 0.3: "three times"}
MORE_NOISE = parameter(
    "ch04-ex-more-noise", "noise", 0.15, lambda rng: float(rng.choice([0.125, 0.175, 0.25, 0.3])),
    shown=(("with {} the paper's label noise", _NOISE_WORDS.get), "-p noise {}`", "rerun_toy(noise={})",
           ("at {}% of labels flipped", lambda n: f"{100 * n:g}"),
           ("(\"{}% flipped\", noisier)", lambda n: f"{100 * n:g}")),
    text=repr)
#: gamma = 2 in the book; a course draws another above the chapter's 1 (the solution compares with it)
TOY_GAMMA = parameter(
    "ch04-ex-gamma", "gamma", 2.0, lambda rng: float(rng.choice([1.5, 2.5, 3.0])),
    shown=("at $\\gamma = {}$, `calib", ("-p gamma {}`", repr), ("rerun_toy(gamma={})", repr),
           "(\"gamma = {}\", sharper)",
           "with $\\gamma = {}$ down-weights", "($g(p, {}) < g(p, 1)$"),
    text=lambda g: f"{g:g}")
#: seeds 100 to 102 in the book; a course draws three other consecutive seeds
OTHER_DRAWS = parameter(
    "ch04-ex-other-draws", "first_seed", 100, lambda rng: int(rng.integers(103, 998)),
    shown=("-p seed {}`", ("(seeds {})", lambda s: f"{s}\nto {s + 2}"), ("on seeds {}:", lambda s: f"{s} to {s + 2}"),
           ("range({}))", lambda s: f"{s}, {s + 3}"), ("seeds {}\"", lambda s: f"{s}-{s + 2}")),
    text=str)

register("ch04-ex-noise", "04-linear-toy",
         ratio=Expected(lambda: _toy_ratio(half_side=4.0), rtol=1e-4,
                        hint="weight magnification, averaged over the exercise's seeds"),
         above_90_ce=Expected(lambda: _toy_above_90("ce", half_side=4.0), rtol=1e-4, atol=0,
                              hint="a share in [0, 1]: how often the model is very confident"))
register("ch04-ex-more-noise", "04-linear-toy",        # 15 % flipped: the chapter's table has 0, 5, 10 and 20 %
         ratio=Expected(lambda: _toy_ratio(noise=MORE_NOISE()), rtol=1e-4,
                        hint="weight magnification, averaged over the exercise's seeds"),
         above_90_ce=Expected(lambda: _toy_above_90("ce", noise=MORE_NOISE()), rtol=1e-4, atol=0,
                              hint="a share in [0, 1]: how often the model is very confident"),
         above_90_fl=Expected(lambda: _toy_above_90("fl", noise=MORE_NOISE()), rtol=1e-4, atol=0,
                              hint="a share in [0, 1]: how often the model is very confident"))


def _toy_ratio_interval(seeds):
    from calib.stats import seed_interval

    return seed_interval(_linear_toy_rerun(seeds=tuple(seeds))["ratio"])


register("ch04-ex-other-draws", "04-linear-toy",        # three draws: five give an interval near the chapter's
         low=Expected(lambda: _toy_ratio_interval(range(OTHER_DRAWS(), OTHER_DRAWS() + 3)).low, rtol=1e-4,
                      hint="a t interval over seeds"),
         high=Expected(lambda: _toy_ratio_interval(range(OTHER_DRAWS(), OTHER_DRAWS() + 3)).high, rtol=1e-4,
                       hint="a t interval over seeds"))
register("ch04-ex-gamma", "04-linear-toy",
         ratio=Expected(lambda: _toy_ratio(gamma=TOY_GAMMA()), rtol=1e-4,
                        hint="weight magnification, averaged over the exercise's seeds"),
         median_fl=Expected(lambda: _toy_median("fl", gamma=TOY_GAMMA()), rtol=1e-4,
                            hint="how confident the wrong predictions are"))
