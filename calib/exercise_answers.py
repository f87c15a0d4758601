"""The expected answers behind :func:`calib.exercises.check`, one ``register`` call per exercise.

Each expected value is computed by the library from the exercise's data (a closed form in sympy, or the
function the chapter teaches), so an answer key cannot drift from what the chapters compute. The chapter's
solution checks its own answer against the same entry with ``check(..., strict=True)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

__all__ = ["Expected", "Exercise", "EXERCISES", "register"]


@dataclass(frozen=True)
class Expected:
    """One part's expected answer: a function that computes it, and how strictly to compare.

    Parameters
    ----------
    compute : callable
        Called once with no arguments; returns the expected value (number, array, sympy expression, bool, str).
    rtol, atol : float
        Tolerances for a ``right`` numeric answer.
    close_factor : float
        An answer within ``close_factor`` times the tolerances is ``close``.
    hint : str
        Shown with a ``wrong`` or ``close`` answer (never the answer itself).
    """

    compute: Callable[[], Any]
    rtol: float = 1e-6
    atol: float = 1e-12
    close_factor: float = 1e3
    hint: str = ""


@dataclass(frozen=True)
class Exercise:
    """An exercise's self-check: its label, its chapter, and the expected answer of each named part."""

    label: str
    chapter: str
    parts: dict[str, Expected]


#: Every exercise with a self-check, by label (filled by the ``register`` calls below).
EXERCISES: dict[str, Exercise] = {}


def register(label: str, chapter: str, **parts: Expected) -> Exercise:
    """Add an exercise's self-check: ``register("ex-x", "02-focal-gradient", threshold=Expected(...))``."""
    if not parts:
        raise ValueError(f"register({label!r}): give at least one part, e.g. threshold=Expected(lambda: ...).")
    if label in EXERCISES:
        raise ValueError(f"exercise {label!r} is registered twice; labels are unique book-wide.")
    exercise = Exercise(label, chapter, dict(parts))
    EXERCISES[label] = exercise
    return exercise


def _sympy():
    import sympy

    return sympy


# --- 00 Using calib in your own training -------------------------------------------------------------------------

# (the chapter's exercises are registered here)


# --- 01 Measuring calibration ------------------------------------------------------------------------------------

# (the chapter's exercises are registered here)


# --- 02 The focal-loss gradient ----------------------------------------------------------------------------------

register("ex-g-gamma-one", "02-focal-gradient",
         threshold=Expected(lambda: _sympy().exp(-1), hint="solve g(p, 1) = 1 on (0, 1/2)"),
         argmax=Expected(lambda: _sympy().exp(-2), hint="where does dg/dp vanish?"),
         maximum=Expected(lambda: 1 + _sympy().exp(-2), hint="g at its argmax"))
register("ex-g-near-one", "02-focal-gradient",
         limit=Expected(lambda: 1 + _sympy().Symbol("gamma", nonnegative=True),
                        hint="the limit of g(p, gamma)/(1-p)^gamma as p -> 1, in terms of gamma"))


# --- 03 Choosing gamma -------------------------------------------------------------------------------------------

def _gamma_star(p0):
    from calib.focal import gamma_star

    return float(gamma_star(p0))


def _near_half_slope():
    sp = _sympy()
    return 8 * (1 - sp.log(2)) / sp.log(2) ** 2


register("ex-gamma-star-point-three", "03-choosing-gamma",
         gamma=Expected(lambda: _gamma_star(0.3), rtol=1e-8, hint="the lower branch (k = -1) of Lambert W"),
         principal=Expected(lambda: 0.0, atol=1e-8, hint="evaluate Eq. 12 with branch k = 0"))
register("ex-gamma-star-near-half", "03-choosing-gamma",
         slope=Expected(_near_half_slope, hint="the limit of gamma*(p0)/(1/2 - p0) as p0 -> 1/2"))


# --- 04 Weight magnification in a linear model -------------------------------------------------------------------

import functools  # noqa: E402  (the answer key of chapter 04 caches its reruns)


@functools.lru_cache(maxsize=None)
def _linear_toy_rerun(noise=0.1, gamma=1.0, half_side=2.0, seeds=tuple(range(5))):
    """Chapter 04 at one setting (App. B toy, 500 full-batch steps of 0.5 from 0), per draw: CE/FL weight-norm
    ratio and the confidences of each loss's misclassified test points."""
    import numpy as np
    from scipy.special import expit

    from calib.data import make_linear_toy
    from calib.train import logistic_gradient_descent

    data = [make_linear_toy(noise=noise, seed=s, half_side=half_side) for s in seeds]
    ratio, conf = [], {0: [], 1: []}
    for d in data:
        w = logistic_gradient_descent(np.stack([d.x_train] * 2), np.stack([d.y_train] * 2), gamma=[0.0, gamma],
                                      lr=0.5, iterations=500, record_every=500)["final_w"]
        ratio.append(np.linalg.norm(w[0]) / np.linalg.norm(w[1]))
        for k in (0, 1):
            z = d.x_test @ w[k]
            conf[k].append(expit(np.abs(z))[(z > 0) != d.y_test])
    return np.array(ratio), conf


def _toy_ratio(**setting):
    import numpy as np

    return float(_linear_toy_rerun(**setting)[0].mean())


def _toy_above_90(loss, **setting):
    import numpy as np

    return float(np.mean([(c > 0.9).mean() for c in _linear_toy_rerun(**setting)[1][loss]]))


def _toy_median(loss, **setting):
    import numpy as np

    return float(np.mean([np.median(c) for c in _linear_toy_rerun(**setting)[1][loss]]))


@functools.lru_cache(maxsize=None)
def _separable_margin():
    from calib.data import make_linear_toy, separability_through_origin

    sep = make_linear_toy(noise=0.0, seed=0, margin=1.0)
    return separability_through_origin(sep.x_train, sep.y_train)[1]


@functools.lru_cache(maxsize=None)
def _stationary_gradients():
    """Autograd gradients of the focal (gamma = 1) and cross-entropy risks at focal loss's solution on the seed-0 draw."""
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
         margin=Expected(_separable_margin, rtol=1e-4, close_factor=100,
                         hint="the largest, over unit vectors u, of the smallest margin (2y - 1) u.x"),
         per_decade=Expected(lambda: float(_sympy().log(10)) / _separable_margin(), rtol=1e-4, close_factor=100,
                             hint="||w_hat|| log 10, with ||w_hat|| = 1 / (max-margin)"))
register("ch04-ex-stationary", "04-linear-toy",
         fl_gradient=Expected(lambda: _stationary_gradients()[0], rtol=0, atol=1e-8,
                              hint="g(p, 1) times the cross-entropy gradient, averaged over the training points"),
         ce_along_w=Expected(lambda: _stationary_gradients()[1], rtol=1e-6, atol=1e-12,
                             hint="(1/n) sum (sigma(z) - y) x, projected on w / ||w||"))
register("ch04-ex-noise", "04-linear-toy",
         ratio=Expected(lambda: _toy_ratio(half_side=4.0), rtol=1e-4, hint="the mean over seeds 0-4 of ||w_CE|| / ||w_FL||"),
         above_90_ce=Expected(lambda: _toy_above_90(0, half_side=4.0), rtol=0, atol=1e-3,
                              hint="a share in [0, 1], the mean over seeds 0-4"))
register("ch04-ex-more-noise", "04-linear-toy",
         ratio=Expected(lambda: _toy_ratio(noise=0.2), rtol=1e-4, hint="the mean over seeds 0-4 of ||w_CE|| / ||w_FL||"),
         above_90_ce=Expected(lambda: _toy_above_90(0, noise=0.2), rtol=0, atol=1e-3,
                              hint="a share in [0, 1], the mean over seeds 0-4"),
         above_90_fl=Expected(lambda: _toy_above_90(1, noise=0.2), rtol=0, atol=1e-3,
                              hint="a share in [0, 1], the mean over seeds 0-4"))
def _toy_ratio_interval(seeds):
    from calib.stats import seed_interval

    return seed_interval(_linear_toy_rerun(seeds=tuple(seeds))[0])


register("ch04-ex-other-draws", "04-linear-toy",
         low=Expected(lambda: _toy_ratio_interval(range(100, 105)).low, rtol=1e-4,
                      hint="mean - t(0.975, 4) s / sqrt(5), s with ddof = 1"),
         high=Expected(lambda: _toy_ratio_interval(range(100, 105)).high, rtol=1e-4,
                       hint="mean + t(0.975, 4) s / sqrt(5), s with ddof = 1"))
register("ch04-ex-gamma", "04-linear-toy",
         ratio=Expected(lambda: _toy_ratio(gamma=2.0), rtol=1e-4, hint="the mean over seeds 0-4 of ||w_CE|| / ||w_FL||"),
         median_fl=Expected(lambda: _toy_median(1, gamma=2.0), rtol=1e-4,
                            hint="the median confidence of focal loss's mistakes, averaged over seeds 0-4"))


# --- 05 Miscalibration during training ---------------------------------------------------------------------------

def _last_layer_gradient_norm():
    """Autograd's norm of the focal-loss (gamma = 3) gradient with respect to the last layer (weights and bias) of
    the chapter's MLP at its seed-0 initial weights, in float64, for the seed-0 standard-normal input labelled 3."""
    import torch

    from calib.losses import get_loss
    from calib.models import build_model, split_last_layer

    net = build_model("mlp-256-256", (1, 28, 28), 10, seed=0).double().eval()
    x = torch.randn(1, 1, 28, 28, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    get_loss("fl-3")(net(x), torch.tensor([3])).backward()
    head = split_last_layer(net)[1]
    return float(torch.sqrt(head.weight.grad.pow(2).sum() + head.bias.grad.pow(2).sum()))


register("ch05-ex-prop1-check", "05-miscalibration-dynamics",
         norm=Expected(_last_layer_gradient_norm, rtol=1e-9,
                       hint="||delta|| sqrt(||h||^2 + 1), delta = g(p, 3) (softmax(z) - e_y)"))


# --- 06 What focal loss estimates --------------------------------------------------------------------------------

# (the chapter's exercises are registered here)


# --- 07 The focal calibration map --------------------------------------------------------------------------------

# (the chapter's exercises are registered here)


# --- 08 Soft calibration objectives ------------------------------------------------------------------------------

# (the chapter's exercises are registered here)


# --- 09 Reweighted risk ------------------------------------------------------------------------------------------

# (the chapter's exercises are registered here)


# --- 10 The benchmark --------------------------------------------------------------------------------------------

# (the chapter's exercises are registered here)


# --- 11 The papers' tables ---------------------------------------------------------------------------------------

# (the chapter's exercises are registered here)
