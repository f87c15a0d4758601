"""The answer key of chapter 10 (The benchmark). Chapter 10's exercises: paired against unpaired intervals on the
stored grid, and a new loss trained by chapter 10's recipe scaled down.
"""

from __future__ import annotations

import functools

from calib_book.answers.common import OneTorchThread, as_in_the_notebook, benchmark_runs
from calib_book.answers.registry import Expected, choice, interval_claim, register, verdict_claim, verdict_of


# Chapter 10's exercises read the store through benchmark_runs() (common.BENCHMARK_STORE), so that they follow the
# grid in the papers' regime once it is trained.

@functools.lru_cache(maxsize=None)
def _ch10_test_ece(loss):
    """Per-seed test ECE (15 equal-width bins, no post-hoc map) of one loss of chapter 10's stored grid."""
    from calib.experiments import evaluate_store, metric_values

    runs = [r for r in benchmark_runs() if r.loss == loss]
    rows = evaluate_store(runs, maps=("none",), progress=False, write_cache=False)
    return tuple(metric_values(rows, loss, "none", "ece"))


def _ch10_paired(kind):
    import numpy as np
    from scipy import stats as st

    from calib.stats import paired_seed_interval

    a, b = np.array(_ch10_test_ece("ce")), np.array(_ch10_test_ece("brier"))
    paired = paired_seed_interval(a, b)
    welch = st.ttest_ind(a, b, equal_var=False).confidence_interval(0.95)
    if kind == "paired":
        return (paired.low, paired.high)
    if kind == "welch":
        return (float(welch.low), float(welch.high))
    return "paired" if paired.high - paired.low < welch.high - welch.low else "welch"


#: ch10-ex-new-loss's runs: chapter 10's recipe in the papers' regime (MLP 256-256, SGD with momentum 0.9, lr 0.1,
#: batch 128, no weight decay or augmentation) scaled down so that the key can rerun them: 10 epochs (lr divided by
#: 10 after epochs 5 and 8) on 2,000 training images, the first 1,000 validation and 2,000 test images, one thread.
_CH10_SMALL = dict(data="fashion-mnist", model="mlp-256-256", epochs=10, milestones=(5, 8), lr=0.1, batch_size=128,
                   weight_decay=0.0, augment="none", train_subset=2000, val_subset=1000, test_subset=2000,
                   device="cpu", diagnostics="eval")


@functools.lru_cache(maxsize=None)
def _ch10_small_ece(loss, seeds=(0, 1, 2)):
    """Per seed, the test ECE (15 equal-width bins) of ``loss`` on ch10-ex-new-loss's small recipe, without a map and
    after temperature scaling fitted by validation NLL (``ts-nll``): ``{"none": [...], "ts-nll": [...]}``; trained
    under the notebook's torch kernels (:func:`as_in_the_notebook`)."""
    return as_in_the_notebook(_train_small_ece, loss, seeds)


def _train_small_ece(loss, seeds):
    """:func:`_ch10_small_ece`, in this process."""
    import tempfile

    from calib import metrics
    from calib.data import load_dataset
    from calib.experiments import fit_posthoc
    from calib.run_config import TrainConfig
    from calib.train import train

    dataset, out = load_dataset("fashion-mnist"), {"none": [], "ts-nll": []}
    with OneTorchThread(), tempfile.TemporaryDirectory() as folder:
        for seed in seeds:
            run = train(TrainConfig(loss=loss, seed=seed, **_CH10_SMALL), f"{folder}/{loss}/seed{seed}",
                        progress=False, dataset=dataset)
            logits = run.logits()
            for name in out:
                fitted = fit_posthoc(name, logits["val_logits"], logits["val_labels"], loss=loss)
                out[name].append(metrics.ece(fitted.proba(logits["test_logits"]), logits["test_labels"]))
    return out


def _ch10_fl4_against_fl3(map_name):
    from calib.stats import paired_seed_interval

    interval = paired_seed_interval(_ch10_small_ece("fl-4")[map_name], _ch10_small_ece("fl-3")[map_name])
    return (interval.low, interval.high)


register("ch10-ex-paired", "10-benchmark",
         paired=Expected(lambda: _ch10_paired("paired"), rtol=1e-6, atol=1e-9, points=2,
                         hint="a paired interval rests on the per-seed differences"),
         welch=Expected(lambda: _ch10_paired("welch"), rtol=1e-6, atol=1e-9, points=2,
                        hint="an unpaired interval treats the two samples as independent, variances unequal"),
         narrower=choice(lambda: _ch10_paired("narrower"), ("paired", "welch"), hint="compare the widths"))
register("ch10-ex-verify", "10-benchmark",
         dominant=Expected(lambda: "fts", close_digits=None,
                           hint="the map name as calib.posthoc.REGISTRY spells it; think of how many fits it makes"))
register("ch10-ex-new-loss", "10-benchmark",
         ece=interval_claim(lambda: _ch10_fl4_against_fl3("none"),
                            hint="a paired interval over seeds of the difference ECE(FL-4) - ECE(FL-3), no map"),
         ece_verdict=verdict_claim(lambda: verdict_of(_ch10_fl4_against_fl3("none")),
                                   hint="which side of zero the interval lies on", on="ece"),
         ece_ts=interval_claim(lambda: _ch10_fl4_against_fl3("ts-nll"),
                               hint="the same paired difference after temperature scaling fitted by validation NLL"),
         ece_ts_verdict=verdict_claim(lambda: verdict_of(_ch10_fl4_against_fl3("ts-nll")),
                                      hint="which side of zero the interval after temperature scaling lies on",
                                      on="ece_ts"))
