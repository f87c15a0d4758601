"""The answer key of chapter 05 (Miscalibration during training). Chapter 05's exercises: Prop. 1 by autograd and
the stored runs of chapter 10's grid in the papers' regime (the quick profile's CE, FL-3 and FLSD-53 runs, seeds 0
to 4).
"""

from __future__ import annotations

import functools

from calib_book.answers.common import BENCHMARK_MODEL, BENCHMARK_STORE, as_in_the_notebook
from calib_book.answers.registry import Expected, interval_claim, parameter, register, verdict_claim, verdict_of


#: the input's generator seed (0) and its label (7) in the book; a course draws others (the network stays the
#: chapter's, at its seed-0 initial weights)
PROP1_INPUT_SEED = parameter("ch05-ex-prop1-check", "input_seed", 0, lambda rng: int(rng.integers(1, 1000)),
                             shown=("Generator().manual_seed({}), dtype=torch.float64)",), text=str)
PROP1_LABEL = parameter("ch05-ex-prop1-check", "label", 7, lambda rng: int(rng.choice([0, 1, 2, 3, 4, 5, 6, 8, 9])),
                        shown=("with label {},", "torch.tensor([{}])", "prob[{}].item()"), text=str)


def _last_layer_gradient_norm():
    """Autograd's norm of the focal-loss (gamma = 3) gradient with respect to the last layer (weights and bias) of
    the chapter's MLP at its seed-0 initial weights, in float64, for the exercise's standard-normal input and label
    (seed 0 and 7 in the book), computed under the notebook's torch kernels (:func:`as_in_the_notebook`)."""
    return _last_layer_gradient_norm_of(PROP1_INPUT_SEED(), PROP1_LABEL())


@functools.lru_cache(maxsize=None)
def _last_layer_gradient_norm_of(input_seed, label):
    return as_in_the_notebook(_compute_last_layer_gradient_norm, input_seed, label)


def _compute_last_layer_gradient_norm(input_seed=0, label=7):
    """:func:`_last_layer_gradient_norm`, in this process."""
    import torch

    from calib.losses import get_loss
    from calib.models import build_model, split_last_layer

    net = build_model("mlp-256-256", (1, 28, 28), 10, seed=0).double().eval()
    x = torch.randn(1, 1, 28, 28, generator=torch.Generator().manual_seed(input_seed), dtype=torch.float64)
    get_loss("fl-3")(net(x), torch.tensor([label])).backward()
    head = split_last_layer(net)[1]
    return float(torch.sqrt(head.weight.grad.pow(2).sum() + head.bias.grad.pow(2).sum()))


register("ch05-ex-prop1-check", "05-miscalibration-dynamics",
         norm=Expected(_last_layer_gradient_norm, rtol=1e-9,
                       hint="Prop. 1: the last layer's gradient factorises"))


# ch05-ex-temperature and ch05-ex-flsd read the quick profile's stored runs at the chapter's default parameters:
# the CE, FL-3 and FLSD-53 runs of chapter 10's grid in the papers' regime, seeds 0 to 4.
_CH05_SEEDS = (0, 1, 2, 3, 4)


@functools.lru_cache(maxsize=None)
def _ch05_run(loss, seed):
    from calib.runs import load_run

    return load_run(BENCHMARK_STORE / BENCHMARK_MODEL / loss / f"seed{seed}")


def _ch05_ts_against_drop(reference):
    """The paired 95 % interval over seeds of the test ECE (15 equal-width bins) of the final CE model after
    temperature scaling (T by validation NLL) minus its ECE at the first epoch after the first learning-rate drop
    (``reference="after"``) or at the last epoch before it (``"before"``)."""
    from calib import metrics
    from calib.posthoc import TemperatureScaling
    from calib.stats import paired_seed_interval

    scaled, at_drop = [], []
    for seed in _CH05_SEEDS:
        run = _ch05_run("ce", seed)
        drop, logits = run.config["milestones"][0], run.logits()
        fitted = TemperatureScaling("nll").fit(logits["val_logits"], logits["val_labels"])
        scaled.append(metrics.ece(fitted.predict_proba(logits["test_logits"]), logits["test_labels"]))
        at_drop.append(run.series("test", "ece")[drop if reference == "after" else drop - 1])
    interval = paired_seed_interval(scaled, at_drop)
    return (interval.low, interval.high)


def _ch05_flsd_against_fl3(key):
    """The paired 95 % interval over seeds of FLSD-53's final ``key`` (test ECE or last-layer weight norm) minus
    FL-3's."""
    from calib.stats import paired_seed_interval

    def last(loss, seed):
        epoch = _ch05_run(loss, seed).epochs[-1]
        return epoch["test"]["ece"] if key == "ece" else epoch["last_layer_weight_norm"]

    interval = paired_seed_interval([last("flsd-53", s) for s in _CH05_SEEDS], [last("fl-3", s) for s in _CH05_SEEDS])
    return (interval.low, interval.high)


def _ch05_flsd_gamma3_share():
    """The share of test samples whose true-class probability under the final seed-0 FLSD-53 model is at least 0.2."""
    import numpy as np
    from scipy.special import softmax

    logits = _ch05_run("flsd-53", 0).logits()
    probs = softmax(logits["test_logits"].astype(np.float64), axis=1)
    return float(np.mean(probs[np.arange(len(probs)), logits["test_labels"]] >= 0.2))


register("ch05-ex-temperature", "05-miscalibration-dynamics",
         interval=interval_claim(lambda: _ch05_ts_against_drop("after"),
                                 hint="a paired interval over seeds of the difference ECE(end, after TS) - ECE(first "
                                      "epoch after the drop)"),
         verdict=verdict_claim(lambda: verdict_of(_ch05_ts_against_drop("after")),
                               hint="which side of zero the interval lies on"),
         verdict_before=verdict_claim(lambda: verdict_of(_ch05_ts_against_drop("before")),
                                      hint="the same comparison against the last epoch before the drop", on=None))
register("ch05-ex-flsd", "05-miscalibration-dynamics",
         share=Expected(_ch05_flsd_gamma3_share, rtol=1e-4, close_digits=3,
                        hint="the samples FLSD-53 treats with gamma = 3, as a fraction of the test set"),
         ece=interval_claim(lambda: _ch05_flsd_against_fl3("ece"),
                            hint="a paired interval over seeds of the difference ECE(FLSD-53) - ECE(FL-3)"),
         ece_verdict=verdict_claim(lambda: verdict_of(_ch05_flsd_against_fl3("ece")),
                                   hint="which side of zero the interval lies on", on="ece"),
         norm=interval_claim(lambda: _ch05_flsd_against_fl3("norm"),
                             hint="a paired interval over seeds of the difference of the last-layer weight norms, "
                                  "FLSD-53 - FL-3"))
