"""Reading a grid's stored evaluation back for the book's intervals (issue 41): which runs failed, the fitted map of
each run, and the test-sample statistics of Karandikar et al.'s ECE."""

from pathlib import Path

import numpy as np
import pytest

from calib import metrics
from calib.experiments import failed_runs, fitted_map, load_store, stored_evaluation
from calib.metrics import statistic
from calib.stats import bootstrap_counts

REGIME = Path(__file__).resolve().parents[1] / "book" / "results" / "10-benchmark" / "regime"
MODEL = "mlp-256-256-n20k-e40"


def _rows(loss, accuracies, model="m"):
    return [{"model": model, "loss": loss, "seed": s, "map": "none", "metric": "accuracy", "value": v,
             "temperature": None, "gamma": None} for s, v in enumerate(accuracies)]


def test_failed_runs_are_those_more_than_5_points_below_ce_on_the_same_seed():
    rows = (_rows("ce", [0.88, 0.80, 0.88]) + _rows("ok", [0.84, 0.76, 0.90]) + _rows("bad", [0.87, 0.30, 0.82])
            + _rows("diverged", [None, 0.80, 0.88]) + _rows("ce", [0.1, 0.1, 0.1], model="other"))
    out = failed_runs(rows, model="m")
    assert set(out) == {"bad", "diverged"}
    assert out["bad"] == {1: 0.30, 2: 0.82}                     # 0.82 < 0.88 - 0.05: seed 2 fails too
    assert list(out["diverged"]) == [0] and np.isnan(out["diverged"][0])
    lenient = failed_runs(rows, model="m", tolerance=0.6)
    assert list(lenient) == ["diverged"] and list(lenient["diverged"]) == [0]      # a NaN fails at any tolerance
    with pytest.raises(ValueError, match="reference='xe'"):
        failed_runs(rows, reference="xe", model="m")
    with pytest.raises(ValueError, match="tolerance"):
        failed_runs(rows, tolerance=5, model="m")
    with pytest.raises(ValueError, match="reference 'diverged' diverged on seed"):
        failed_runs(rows, reference="diverged", model="m")


def test_failed_runs_of_the_regime_grid():
    out = failed_runs(stored_evaluation(REGIME / "posthoc.json"), model=MODEL)
    # CE + S-AvUC at the registry's kappa 0.5 failed on seed 2; at its validation-tuned kappa 0.8 (issue 42,
    # grid-savuc-tuning.toml) it trains on every seed
    assert set(out) == {"aurc"}
    assert sorted(out["aurc"]) == [0, 1, 2, 3, 4] and max(out["aurc"].values()) < 0.5


def test_fitted_map_gives_back_the_stored_test_metrics():
    rows = stored_evaluation(REGIME / "posthoc.json")
    for loss, seed, name in (("ce", 0, "ts-ece"), ("ce", 0, "none"), ("fl-3", 1, "fts"), ("fl-3", 1, "psi"),
                             ("brier", 2, "ts-sb-ece")):
        run = next(r for r in load_store(REGIME, model=MODEL) if (r.loss, r.seed) == (loss, seed))
        arrays = run.logits()
        fitted = fitted_map(rows, loss, seed, name, model=MODEL)
        stored = {r["metric"]: r["value"] for r in rows if (r["loss"], r["seed"], r["map"]) == (loss, seed, name)}
        probs = fitted.proba(arrays["test_logits"])
        assert metrics.ece(probs, arrays["test_labels"]) == pytest.approx(stored["ece"], abs=1e-12)
        assert metrics.adaptive_ece(probs, arrays["test_labels"]) == pytest.approx(stored["adaece"], abs=1e-12)
    assert set(fitted_map(rows, "fl-3", 1, "fts", model=MODEL).params) == {"temperature", "gamma"}
    assert fitted_map(rows, "ce", 0, "none", model=MODEL).params == {}
    with pytest.raises(ValueError, match="not a post-hoc map"):
        fitted_map(rows, "ce", 0, "platt")
    with pytest.raises(ValueError, match="no evaluation rows"):
        fitted_map(rows, "ce", 99, "ts-ece")
    twice = rows + [dict(r, model="other", temperature=9.0) for r in rows if r["loss"] == "ce"]
    with pytest.raises(ValueError, match="disagree"):
        fitted_map(twice, "ce", 0, "ts-ece")


def test_statistic_of_karandikar_ece_resamples_confidences_and_outcomes():
    # the equal-mass l2 ECE reads only each sample's confidence and outcome, sorted once: every resample's bins are
    # cut from cumulative sums (calib.metrics.EqualMassStatistic), not by sorting the (N, K) probabilities again
    rng = np.random.default_rng(0)
    probs = rng.dirichlet(np.ones(10) * 0.3, size=600)
    labels = rng.integers(0, 10, 600)
    stat = statistic(probs, labels, "ece_em_l2")
    assert isinstance(stat, metrics.EqualMassStatistic) and stat.norm == "l2"
    assert stat.value == pytest.approx(metrics.get_metric("ece_em_l2")(probs, labels), abs=1e-15)
    counts = bootstrap_counts(600, 50, seed=1)[:3]
    index = np.arange(600)
    expected = [metrics.ece(probs[np.repeat(index, c.astype(int))], labels[np.repeat(index, c.astype(int))],
                            binning="quantile", norm="l2") for c in counts]
    assert np.allclose(stat.resampled(counts), expected, rtol=0, atol=1e-15)
