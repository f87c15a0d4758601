"""The answer key of chapter 08 (Soft calibration objectives). Chapter 08's exercises: soft binning, small
full-batch trainings with SB-ECE on the digits data, coarsening and AvUC at initialisation.
"""

from __future__ import annotations

import functools

from calib_book.answers.common import OneTorchThread, as_in_the_notebook
from calib_book.answers.registry import (VERDICTS, Expected, choice, interval_claim, parameter, register, verdict_claim,
                                         verdict_of)


def _ch08_membership(c, m=15, t=1e-2):
    from calib.soft_binning import soft_membership

    return soft_membership(c, m, t)


def _ch08_mode(j, m=15, t=1e-2):
    from calib.soft_binning import membership_modes

    return float(membership_modes(m, t)[j - 1])


_CH08_CONF = (0.95, 0.85, 0.75, 0.65, 0.55)
#: the outcomes 1, 1, 0, 1, 0 in the book; a course draws others, with one, two or four right (both limits depend on
#: the outcomes through their mean only, so three right would give the book's answers)
_OUTCOMES = [o for o in (tuple(int(b) for b in f"{k:05b}") for k in range(1, 31)) if sum(o) != 3]
LARGE_T_OUTCOMES = parameter(
    "ch08-ex-large-t", "outcomes", (1, 1, 0, 1, 0), lambda rng: _OUTCOMES[int(rng.integers(len(_OUTCOMES)))],
    shown=("with outcomes ${}$, give", "np.array([{}])\n"), text=lambda o: ", ".join(str(v) for v in o))
#: delta = 2e-3 in the book; a course draws another distance from an edge, 1e-3 to 5e-3
EDGE_DELTA = parameter(
    "ch08-ex-temperature", "delta", 2e-3, lambda rng: float(rng.choice([1e-3, 3e-3, 4e-3, 5e-3])),
    shown=("$\\delta = {}$ away", ("15, {}, 0.99, 1e-2", lambda d: f"{d * 1e3:g}e-3")),
    text=lambda d: f"{d * 1e3:g}\\cdot10^{{-3}}")
#: 10 cells in the book (the chapter itself uses 5); a course draws another count from 6 to 20
COARSEN_CELLS = parameter(
    "ch08-ex-coarsen", "cells", 10, lambda rng: int(rng.choice([6, 8, 12, 15, 20])),
    shown=("into **{}** equal-width", ("$\\min(\\lfloor {})$", lambda n: f"{2 * n}(c - 0.5)\\rfloor, {n - 1}"),
           ("((c_b - 0.5) * {})", lambda n: f"{2 * n}).astype(int), {n - 1}"),
           "w_b * a_b, {0}) / np.bincount(cell10, w_b, {0})", "print(f\"{} cells:"), text=str)


def _ch08_large_t(estimator):
    from calib.soft_binning import soft_binned_ece

    norm, power = ("l1", 1) if estimator == "bin" else ("l2", 2)
    return soft_binned_ece(_CH08_CONF, LARGE_T_OUTCOMES(), 15, 1e9, norm, estimator) ** power


register("ch08-ex-temperature", "08-soft-calibration-objectives",
         temperature=Expected(lambda: float(__import__("calib.soft_binning", fromlist=["x"])
                                            .hard_limit_temperature(EDGE_DELTA(), 15, 0.01)),
                              hint="soft binning approaches hard binning as its temperature falls"),
         ratio=Expected(lambda: float(_ch08_membership(0.5, t=5e-3)[8] / _ch08_membership(0.5, t=5e-3)[7]),
                        hint="a soft-bin membership is a softmax over the bins"),
         own_share=Expected(lambda: float(_ch08_membership(0.5, t=5e-3)[7]),
                            hint="a softmax normalises over every bin, not only the neighbours"))


@functools.lru_cache(maxsize=None)
def _ch08_digits_probs(beta, seeds, steps=120):
    """The test probabilities, per seed, of the small networks of ch08-ex-sbece-train and ch08-ex-beta: an MLP
    64-32-10 on the standardised digits data, full-batch Adam (lr 1e-2) on NLL + beta SB-ECE, ``steps`` steps, one
    torch thread (:class:`OneTorchThread`), under the notebook's torch kernels (:func:`as_in_the_notebook`)."""
    return as_in_the_notebook(_train_digits_probs, beta, seeds, steps)


def _train_digits_probs(beta, seeds, steps):
    """:func:`_ch08_digits_probs`, in this process."""
    import numpy as np
    import torch

    from calib.data import load_dataset
    from calib.losses import get_secondary_loss
    from calib.small_training import train_classifier

    digits = load_dataset("digits")
    flat = lambda x: x.reshape(len(x), -1).astype(np.float32)        # noqa: E731
    x_train, x_test = flat(digits.x_train), flat(digits.x_test)
    mu, sd = x_train.mean(0), x_train.std(0) + 1e-6
    x_train, x_test = torch.as_tensor((x_train - mu) / sd), torch.as_tensor((x_test - mu) / sd)
    y_train, secondary = torch.as_tensor(digits.y_train), get_secondary_loss("sb-ece")

    def nll_and_sb_ece(z, y):                       # the chapter's solution's objective, term for term
        loss = torch.nn.functional.cross_entropy(z, y)
        return loss + beta * secondary(z, y) if beta > 0 else loss

    probs = []
    with OneTorchThread():
        for seed in seeds:
            torch.manual_seed(seed)
            net = torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.ReLU(), torch.nn.Linear(32, 10))
            net, _ = train_classifier(net, x_train, y_train, nll_and_sb_ece, epochs=steps, lr=1e-2, progress=False)
            with torch.no_grad():
                probs.append(torch.softmax(net(x_test).double(), 1).numpy())
    return probs, digits.y_test


def _ch08_sbece_runs(beta_values=(0.0, 1.0), seeds=(0, 1, 2), steps=120):
    """The test ECE (15 equal-width bins) of ch08-ex-sbece-train's networks, per beta and seed."""
    import numpy as np

    from calib import metrics

    out = {}
    for beta in beta_values:
        probs, labels = _ch08_digits_probs(beta, seeds, steps)
        out[beta] = np.array([metrics.ece(p, labels, n_bins=15) for p in probs])
    return out


def _ch08_sbece_interval():
    from calib.stats import paired_seed_interval

    runs = _ch08_sbece_runs()
    interval = paired_seed_interval(runs[1.0], runs[0.0])
    return (interval.low, interval.high)


register("ch08-ex-edge-bins", "08-soft-calibration-objectives",
         mode_2=Expected(lambda: _ch08_mode(2), rtol=1e-8, hint="where a soft bin's membership peaks"),
         mode_8=Expected(lambda: _ch08_mode(8), rtol=1e-8, hint="the symmetry of the bins about 1/2"))
register("ch08-ex-sbece-train", "08-soft-calibration-objectives",
         interval=interval_claim(_ch08_sbece_interval,
                                 hint="a paired interval over seeds of the difference ECE(beta = 1) - ECE(beta = 0)"),
         verdict=verdict_claim(lambda: verdict_of(_ch08_sbece_interval()),
                               hint="which side of zero the interval lies on"))
register("ch08-ex-large-t", "08-soft-calibration-objectives",
         bin_limit=Expected(lambda: _ch08_large_t("bin"), rtol=1e-6, hint="what every soft bin becomes as T grows"),
         lb_limit=Expected(lambda: _ch08_large_t("label"), rtol=1e-6,
                           hint="the label-binned estimator as T grows"))


def _ch08_coarsen(part, cells=None):
    """ch08-ex-coarsen: the chapter's binary population (truth sigma(z), z ~ N(0, 3^2), quadrature nodes of
    ``binary_tempered_population(1.0)``) against its coarsening into ``cells`` equal-width cells of [0.5, 1]
    (each confidence replaced by the cell's mean accuracy): the coarse model's SB-ECE_lb,2^2 (M = 15, T = 1e-2)
    and NLL, and the beta above which NLL + beta SB-ECE_lb,2^2 prefers the coarse model."""
    import numpy as np

    from calib import soft_binning

    cells = COARSEN_CELLS() if cells is None else cells
    conf, acc, weight = soft_binning.binary_tempered_population(1.0)
    cell = np.minimum(((conf - 0.5) * 2 * cells).astype(int), cells - 1)
    coarse = (np.bincount(cell, weight * acc, cells) / np.bincount(cell, weight, cells))[cell]
    lb_sq = {name: soft_binning.soft_binned_ece(q, acc, 15, 1e-2, "l2", "label", weights=weight) ** 2
             for name, q in (("truth", conf), ("coarse", coarse))}
    nll = {name: float(-(weight @ (acc * np.log(q) + (1 - acc) * np.log1p(-q))))
           for name, q in (("truth", conf), ("coarse", coarse))}
    if part == "lb_coarse":
        return float(lb_sq["coarse"])
    if part == "nll_coarse":
        return nll["coarse"]
    return float((nll["coarse"] - nll["truth"]) / (lb_sq["truth"] - lb_sq["coarse"]))


def _ch08_avuc_init(part):
    """ch08-ex-avuc-init on 200 near-uniform logits (0.05 x standard normal, float64, and labels, both from
    ``torch.Generator().manual_seed(0)``), kappa = log(10) / 2: AvUC's value, or the verdict on the mean change of
    the correctly classified samples' confidence after one step of 0.1 along the gradient scaled to max-norm 1."""
    return _ch08_avuc_init_parts(AVUC_SEED())[part]


#: the logits' and labels' generator seed, 0 in the book; a course draws another
AVUC_SEED = parameter("ch08-ex-avuc-init", "seed", 0, lambda rng: int(rng.integers(1, 1000)),
                      shown=("gen = torch.Generator().manual_seed({})", "gen_ex = torch.Generator().manual_seed({})"),
                      text=str)


@functools.lru_cache(maxsize=None)
def _ch08_avuc_init_parts(seed=0):
    """:func:`_ch08_avuc_init`'s three parts, computed in one process under the notebook's torch kernels
    (:func:`as_in_the_notebook`)."""
    return as_in_the_notebook(_compute_avuc_init_parts, ("avuc", "confidence_avuc", "confidence_gs"), seed)


def _compute_avuc_init_parts(parts, seed=0):
    """:func:`_ch08_avuc_init_parts`, in this process."""
    return {part: _compute_avuc_init(part, seed) for part in parts}


def _compute_avuc_init(part, seed=0):
    """:func:`_ch08_avuc_init` of ``part``, in this process."""
    import numpy as np
    import torch

    from calib.losses import avuc

    gen = torch.Generator().manual_seed(seed)
    logits = 0.05 * torch.randn(200, 10, dtype=torch.float64, generator=gen)
    labels = torch.randint(0, 10, (200,), generator=gen)
    kappa = 0.5 * np.log(10)
    if part == "avuc":
        return float(avuc(logits, labels, kappa))
    probs = torch.softmax(logits, 1)
    right = probs.argmax(1) == labels
    z = logits.clone().requires_grad_()
    avuc(z, labels, kappa, stop_gradient=part == "confidence_gs").backward()
    stepped = torch.softmax(logits - 0.1 * z.grad / z.grad.abs().max(), 1)
    change = float((stepped.max(1).values - probs.max(1).values)[right].mean())
    return "lower" if change < 0 else "higher" if change > 0 else "no difference"


def _ch08_beta_accuracy(beta, seeds=(0, 1, 2, 3, 4), steps=120):
    """The test accuracy per seed of ch08-ex-beta's networks (those of ch08-ex-sbece-train), seeds 0 to 4."""
    import numpy as np

    from calib import metrics

    probs, labels = _ch08_digits_probs(beta, seeds, steps)
    return np.array([metrics.accuracy(p, labels) for p in probs])


def _ch08_beta_interval():
    from calib.stats import paired_seed_interval

    interval = paired_seed_interval(_ch08_beta_accuracy(10.0), _ch08_beta_accuracy(0.0))
    return (interval.low, interval.high)


register("ch08-ex-coarsen", "08-soft-calibration-objectives",
         lb_coarse=Expected(lambda: _ch08_coarsen("lb_coarse"), rtol=1e-4, close_digits=3,
                            hint="the label-binned soft estimator of a model whose confidences take few values"),
         nll_coarse=Expected(lambda: _ch08_coarsen("nll_coarse"), rtol=1e-4, close_digits=3,
                             hint="the log loss of a calibrated but coarser predictor"),
         beta_flip=Expected(lambda: _ch08_coarsen("beta_flip"), rtol=1e-4, close_digits=3,
                            hint="where the combined objective ranks the two calibrated models equally"))
register("ch08-ex-avuc-init", "08-soft-calibration-objectives",
         avuc=Expected(lambda: _ch08_avuc_init("avuc"), rtol=1e-6, close_digits=3,
                       hint="which AvUC groups a near-uniform prediction falls into"),
         confidence_avuc=choice(lambda: _ch08_avuc_init("confidence_avuc"), VERDICTS,
                                hint="the gradient through the confidence"),
         confidence_gs=choice(lambda: _ch08_avuc_init("confidence_gs"), VERDICTS,
                              hint="the gradient through the entropy alone"))
register("ch08-ex-beta", "08-soft-calibration-objectives",
         accuracy=interval_claim(_ch08_beta_interval,
                                 hint="a paired interval over seeds of the difference accuracy(beta = 10) - "
                                      "accuracy(beta = 0)"),
         verdict=verdict_claim(lambda: verdict_of(_ch08_beta_interval()),
                               hint="which side of zero the interval lies on", on="accuracy"))
