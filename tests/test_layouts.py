"""Every public function that takes arrays gives the same result for every memory layout of the same data (issue 43).

The same numbers are passed as a C-ordered array (the reference) and as a Fortran-ordered array, a column slice of a
wider array, a strided view, a view with negative strides, a read-only array, a big-endian array, pandas'
``DataFrame.to_numpy()`` (Fortran-ordered), and as torch tensors: contiguous, a transposed copy transposed back
(non-contiguous), a column slice (storage offset), a strided view, one that requires grad, and one that stands for a
CUDA tensor (:class:`FakeCudaTensor`: ``numpy()`` and ``__array__`` raise as on a GPU, so a path that skips ``.cpu()``
fails; it is also a subclass defined outside torch). The result must be the reference's bit for bit, except where a
tensor is computed by torch instead of numpy (stated in :data:`TORCH_COMPUTED`, with its tolerance); the warnings must
be the same; a tensor may give a tensor where the array gives an array; and no input may change.

The functions are enumerated from the modules' ``__all__`` (:data:`MODULES`): each public name is either called by a
case of :data:`CASES` or listed in :data:`NOT_ARRAYS` with the reason it takes no array, and
:func:`test_every_public_name_is_covered` fails for a name that is neither. calib.stats's functions that read probs
are cases too. Data come from hypothesis (sizes, seed, tied values): two explicit examples (one with K >= 8, where a
layout changes numpy's order of summation) and two drawn, derandomized. The dtype and tensor-type defects found with
it are the tests at the end.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import re
import warnings

import numpy as np
import pandas as pd
import pytest
import torch
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from calib import focal, metrics, posthoc, selective, simulate, soft_binning, stats
from calib.stats.test_set import bootstrap_counts

MODULES = ("calib.metrics", "calib.focal", "calib.posthoc", "calib.soft_binning", "calib.simulate", "calib.selective")


# --------------------------------------------------------------------------------------------- the layouts

def _wide(a: np.ndarray, pad: int = 3) -> np.ndarray:
    """``a`` as a view into a wider array: for 2-D, columns 1..K of a (N, K + pad) array; for 1-D, an offset slice."""
    if a.ndim == 1:
        w = np.zeros(a.shape[0] + pad, a.dtype)
        w[1:a.shape[0] + 1] = a
        return w[1:a.shape[0] + 1]
    w = np.zeros((a.shape[0], a.shape[1] + pad), a.dtype)
    w[:, 1:a.shape[1] + 1] = a
    return w[:, 1:a.shape[1] + 1]


def _strided(a: np.ndarray) -> np.ndarray:
    """Every other element along every axis of a twice larger array (non-contiguous in every axis)."""
    w = np.zeros(tuple(2 * s for s in a.shape), a.dtype)
    every_other = tuple(slice(None, None, 2) for _ in a.shape)
    w[every_other] = a
    return w[every_other]


def _negative(a: np.ndarray) -> np.ndarray:
    """The same values through negative strides along every axis."""
    back = tuple(slice(None, None, -1) for _ in a.shape)
    return a[back].copy()[back]


def _read_only(a: np.ndarray) -> np.ndarray:
    b = a.copy()
    b.flags.writeable = False
    return b


def _pandas(a: np.ndarray) -> np.ndarray:
    return (pd.DataFrame(a) if a.ndim == 2 else pd.Series(a)).to_numpy()


#: numpy layouts of the same values; "C" is the reference.
NUMPY_LAYOUTS = {
    "C": np.ascontiguousarray,
    "F": np.asfortranarray,
    "column_slice": _wide,
    "strided": _strided,
    "negative_strides": _negative,
    "read_only": _read_only,
    "big_endian": lambda a: a.astype(a.dtype.newbyteorder(">")),
    "pandas": _pandas,
}


class FakeCudaTensor(torch.Tensor):
    """A CPU tensor that converts to numpy as a CUDA tensor does: ``numpy()`` and ``__array__`` raise (so does
    ``np.asarray(t)``) until the tensor is moved with ``.cpu()`` or ``.to("cpu")``, which give a plain tensor.

    Its ``device`` is still the CPU (a CUDA device would be unusable here), so code that calls ``numpy()`` after
    checking ``t.device.type == "cpu"`` fails with it: call ``t.cpu()`` (no copy on the CPU) instead."""

    @staticmethod
    def __new__(cls, data):
        return torch.Tensor._make_subclass(cls, data, data.requires_grad)

    def _refuse(self, *args, **kwargs):
        raise TypeError("can't convert cuda:0 device type tensor to numpy. Use Tensor.cpu() to copy the tensor to "
                        "host memory first.")

    numpy = _refuse
    __array__ = _refuse

    def cpu(self, *args, **kwargs):
        return torch.Tensor.cpu(self, *args, **kwargs).as_subclass(torch.Tensor)

    def to(self, *args, **kwargs):
        out = torch.Tensor.to(self, *args, **kwargs)
        moved = any(str(a) == "cpu" for a in args) or str(kwargs.get("device")) == "cpu"
        return out.as_subclass(torch.Tensor) if moved else out


def _tensor(a: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(a).copy())


def _tensor_transposed(a: np.ndarray) -> torch.Tensor:
    if a.ndim == 2:
        return torch.from_numpy(np.ascontiguousarray(a.T)).T      # a transpose's transpose: not contiguous
    return torch.from_numpy(np.repeat(a, 2))[::2]


def _tensor_slice(a: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(_wide(a).base)[(slice(None), slice(1, a.shape[1] + 1)) if a.ndim == 2
                                          else slice(1, a.shape[0] + 1)]


def _tensor_strided(a: np.ndarray) -> torch.Tensor:
    w = _strided(a).base
    return torch.from_numpy(w)[tuple(slice(None, None, 2) for _ in a.shape)]


def _tensor_grad(a: np.ndarray) -> torch.Tensor:
    t = _tensor(a)
    return t.requires_grad_(True) if t.is_floating_point() else t


#: torch layouts of the same values.
TORCH_LAYOUTS = {
    "torch": _tensor,
    "torch_transposed": _tensor_transposed,
    "torch_slice": _tensor_slice,
    "torch_strided": _tensor_strided,
    "torch_requires_grad": _tensor_grad,
    "torch_fake_cuda": lambda a: FakeCudaTensor(_tensor(a)),
}

LAYOUTS = {**NUMPY_LAYOUTS, **TORCH_LAYOUTS}


# ------------------------------------------------------------------------------------------------ the data

def _softmax(z):
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def problem(n: int, k: int, seed: int, ties: bool) -> dict:
    """Reference arrays (C-ordered, native byte order) of one classification problem and the quantities the
    functions take; ``ties`` rounds the logits so that confidences repeat and rows tie."""
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(n, k)) * rng.uniform(0.5, 4.0, size=(n, 1))
    if ties:
        logits = np.round(logits * 2) / 2
    logits[0, 0] += 1.0                                  # not every row constant (a fit would refuse that)
    logits[1] = np.linspace(0.3, 0.0, k)                 # a sure error (label 1) with a small margin
    probs = _softmax(logits)
    # informative labels with errors, so that every temperature fit has a finite optimum: the argmax, some other
    # classes where that keeps the NLL's slope in 1/T negative at T -> inf
    labels = probs.argmax(axis=1)
    other = np.where(rng.uniform(size=n) < 0.2, rng.integers(0, k, n), labels)
    if np.mean(logits.mean(axis=1) - logits[np.arange(n), other]) < 0:
        labels = other
    labels[1] = 1
    conf = probs.max(axis=1)
    correct = probs.argmax(axis=1) == labels
    p = np.clip(probs[:, 0], 1e-9, 1 - 1e-9)
    weights = rng.uniform(0.1, 1.0, n)
    small = probs[:5]
    entropy = -(probs * np.log(probs)).sum(axis=1) / np.log(k)
    return {
        "logits": logits, "probs": probs, "labels": labels, "conf": conf, "correct": correct,
        "loss": -np.log(probs[np.arange(n), labels]), "scores": conf - 0.1 * rng.uniform(size=n),
        "p": p, "p0": np.clip(0.5 * p, 1e-6, 0.499), "s": logits[:, 0] - logits[:, -1],
        "gamma": rng.uniform(0.05, 5.0, 4), "gamma_rows": rng.uniform(0.0, 3.0, n),
        "weights": weights / weights.sum(), "posterior": _softmax(rng.normal(size=(n, k))),
        "accept": rng.uniform(size=n) < 0.5, "h_star": np.clip(entropy, 0.0, 1.0),
        "small_probs": small, "small_labels": labels[:5], "temps": np.array([0.5, 1.0, 2.0, 4.0]),
        "fts_gammas": np.array([-0.5, 0.0, 1.0]), "centres": (np.arange(7) + 0.5) / 7,
        "edges": np.array([0.2, 0.5]), "bin_edges": np.linspace(0.0, 1.0, 6), "at": np.linspace(0.0, 1.0, 9),
        "sizes": np.array([3, n]), "predictions": probs.argmax(axis=1), "u": rng.uniform(size=n),
        "kappa": np.full(n, 0.7), "counts": rng.integers(1, 4, n).astype(np.float64),
        "seeds_a": rng.normal(size=5), "seeds_b": rng.normal(size=5),
    }


#: N rows, K classes (K >= 8 matters: numpy then sums a row of a C-ordered array in another order than a column-wise
#: walk of a Fortran-ordered one, which is how a layout changes the last bits), a seed, tied values or not.
problems = st.builds(problem, n=st.integers(4, 30), k=st.integers(2, 11), seed=st.integers(0, 2**32 - 1),
                     ties=st.booleans())


# ------------------------------------------------------------------------------------------------ the cases

@dataclasses.dataclass(frozen=True)
class Case:
    """``call(**arrays)`` with the arrays named by its parameters; ``covers`` the public names it exercises."""
    group: str
    covers: tuple
    call: object

    @property
    def keys(self) -> tuple:
        return tuple(inspect.signature(self.call).parameters)

    @property
    def name(self) -> str:
        return f"{self.group}:{'+'.join(self.covers)}:{inspect.getsource(self.call).strip()[:80]}"


def _fitted(estimator, predict_with):
    """What a fit produced (its fitted attributes), and its predictions on ``predict_with``."""
    out = {k: v for k, v in vars(estimator).items() if k.endswith("_") and not k.startswith("_")}
    methods = ("predict_proba", "predict_log_proba", "predict")
    return out, [getattr(estimator, m)(predict_with) for m in methods if hasattr(estimator, m)]


def _statistic(stat):
    """A statistic's value and per-sample data; the resamples of an additive one (one product; a resampled one
    calls the metric on rows of its data, compared already, 50 times)."""
    if hasattr(stat, "columns"):
        return stat.value, stat.columns, stat.resampled(bootstrap_counts(stat.n, 50, seed=1))
    if isinstance(stat, M.EqualMassStatistic):                # its bins are cut from the counts, no rows
        return stat.value, stat.resampled(bootstrap_counts(stat.n, 50, seed=1))
    return stat.value, stat.rows


def _streaming(metric, probs, labels):
    half = probs.shape[0] // 2
    metric.update(probs[:half], labels[:half])
    metric.update(probs[half:], labels[half:])
    return metric.compute()


def _mean_label_probability(probs, labels) -> float:
    return float(probs[np.arange(len(labels)), labels].mean())


M, F, P, SB, SIM, SEL, S = metrics, focal, posthoc, soft_binning, simulate, selective, stats
_rng = np.random.default_rng

CASES = [
    # calib.metrics
    Case("metrics", ("ece",), lambda probs, labels: [M.ece(probs, labels, n_bins=b, binning=binning, norm=norm,
                                                           estimator=e)
                                                     for b in (1, 7) for binning in ("uniform", "quantile")
                                                     for norm in ("l1", "l2", "max") for e in ("bin", "label")]),
    Case("metrics", ("adaptive_ece", "mce", "accuracy", "nll", "brier", "ks_error", "mean_confidence"),
         lambda probs, labels: [M.adaptive_ece(probs, labels, 6), M.mce(probs, labels, 6), M.accuracy(probs, labels),
                                M.nll(probs, labels), M.brier(probs, labels), M.ks_error(probs, labels),
                                M.mean_confidence(probs), M.mean_confidence(probs, labels)]),
    Case("metrics", ("adaptive_ece_torrvision",),
         lambda probs, labels: M.adaptive_ece_torrvision(probs, labels, 5, return_counts=True)),
    Case("metrics", ("classwise_ece",), lambda probs, labels: [M.classwise_ece(probs, labels, 5, binning, norm)
                                                               for binning in ("uniform", "quantile")
                                                               for norm in ("l1", "l2", "max", 1.5)]),
    Case("metrics", ("top_label_ece",), lambda conf, correct: [M.top_label_ece(conf, correct, 5, binning, norm, e)
                                                               for binning in ("uniform", "quantile")
                                                               for norm in ("l1", "max") for e in ("bin", "label")]),
    Case("metrics", ("top_label_outcomes", "label_log_probability"),
         lambda probs, labels: [M.top_label_outcomes(probs, labels), M.label_log_probability(probs, labels)]),
    Case("metrics", ("top_label_bins",), lambda conf: [M.top_label_bins(conf, b, binning) for b in (1, 7)
                                                       for binning in ("uniform", "quantile")]),
    Case("metrics", ("reliability",), lambda probs, labels: [M.reliability(probs, labels, 6, b)
                                                             for b in ("uniform", "quantile")]),
    Case("metrics", ("confidence_score",), lambda probs: [M.confidence_score(probs, kind) for kind in M.CSFS]),
    Case("metrics", ("aurc", "risk_coverage_curve"),
         lambda probs, labels, scores, loss: [M.aurc(probs, labels), M.aurc(probs, labels, "margin"),
                                              M.aurc(probs, labels, scores, loss),
                                              M.risk_coverage_curve(probs, labels),
                                              M.risk_coverage_curve(probs, labels, scores, loss)]),
    Case("metrics", ("statistic", "ADDITIVE_METRICS", "EqualMassStatistic"),
         lambda probs, labels: [_statistic(M.statistic(probs, labels, name, 5))
                                for name in (*M.ADDITIVE_METRICS, *M.metric_names())]),
    Case("metrics", ("outcome_statistic", "TOP_LABEL_METRICS"),
         lambda conf, correct: [_statistic(M.outcome_statistic(conf, correct, name, 5))
                                for name in M.TOP_LABEL_METRICS]),
    Case("metrics", ("REGISTRY", "get_metric", "MetricSpec"),
         lambda probs, labels, logits: [M.get_metric(s.name)(probs, labels, 5) for s in M.REGISTRY]
         + [M.get_metric("nll").from_log_probs(logits, labels)]),
    Case("metrics", ("StreamingECE", "StreamingClasswiseECE", "StreamingNLL", "StreamingBrier", "StreamingAccuracy",
                     "StreamingAURC", "StreamingMetric"),
         lambda probs, labels: [_streaming(m, probs, labels) for m in (
             M.StreamingECE(5), M.StreamingECE(5, "quantile", "l2", "label"), M.StreamingClasswiseECE(5),
             M.StreamingClasswiseECE(5, "quantile"), M.StreamingNLL(), M.StreamingBrier(), M.StreamingAccuracy(),
             M.StreamingAURC())]),
    # calib.focal
    Case("focal", ("gradient_factor", "gradient_factor_dp"),
         lambda p, gamma_rows: [F.gradient_factor(p, gamma_rows), F.gradient_factor(p, 2.0),
                                F.gradient_factor_dp(p, gamma_rows)]),
    Case("focal", ("threshold", "tau_oc", "ts_bounds"),
         lambda gamma: [F.threshold(gamma), F.tau_oc(gamma), F.ts_bounds(gamma), F.ts_bounds(gamma, sharp=True)]),
    Case("focal", ("gamma_star", "lambert_gamma", "lambert_argument"),
         lambda p0, p: [F.gamma_star(p0), F.lambert_gamma(p0), F.lambert_gamma(p, 0), F.lambert_argument(p)]),
    Case("focal", ("schedule_gamma", "effective_gradient_factor", "schedule_from_prop2"),
         lambda p, edges: [F.schedule_gamma(F.FLSD_532, p), F.effective_gradient_factor(F.FLSD_53, p),
                           F.schedule_from_prop2(edges, 0.3)]),
    Case("focal", ("focal_optimal_prediction", "focal_prediction_target", "focal_risk", "entropy_regularised_bound"),
         lambda probs, posterior, gamma_rows: [F.focal_optimal_prediction(probs, gamma_rows),
                                               F.focal_optimal_prediction(probs[0], 2.0),
                                               F.focal_prediction_target(probs, gamma_rows),
                                               F.focal_risk(probs, posterior, gamma_rows),
                                               F.entropy_regularised_bound(probs, posterior, 1.5)]),
    Case("focal", ("minimise_focal_risk",), lambda small_probs: F.minimise_focal_risk(small_probs[:2], 2.0)),
    Case("focal", ("focal_map", "log_focal_map", "top_label_gain"),
         lambda logits: [f(logits, g) for f in (F.focal_map, F.log_focal_map, F.top_label_gain)
                         for g in (-1.0, -0.5, 0.0, 3.0)]),
    Case("focal", ("log_focal_weight", "log_f_gamma", "focal_calibration_logit", "effective_inverse_temperature"),
         lambda p, s, gamma_rows: [F.log_focal_weight(p, gamma_rows), F.log_f_gamma(s, gamma_rows - 1.0),
                                   F.focal_calibration_logit(s, gamma_rows),
                                   F.effective_inverse_temperature(s, gamma_rows)]),
    Case("focal", ("closest_temperature", "ts_distance"),
         lambda gamma: [F.closest_temperature(gamma[:2], step=0.05, xtol=1e-6),
                        F.ts_distance(gamma[:2], gamma[2:], step=0.05)]),
    # calib.posthoc
    Case("posthoc", ("TemperatureScaling",),
         lambda logits, labels, temps, counts: [
             _fitted(P.TemperatureScaling(o, 5, grid=temps).fit(logits, labels, w), logits)
             for o in P.TemperatureScaling.OBJECTIVES for w in ((counts,) if o == "sb-ece" else (None, counts))]
         + [P.TemperatureScaling().fit(logits, labels).predict_logits(logits)]),
    Case("posthoc", ("fit_temperature_nll", "fit_temperature_grid", "fit_temperature_sb_ece"),
         lambda logits, labels, temps: [P.fit_temperature_nll(logits, labels),
                                        P.fit_temperature_grid(logits, labels, temps),
                                        P.fit_temperature_grid(logits, labels, temps, score=M.brier),
                                        P.fit_temperature_sb_ece(logits, labels, 5, max_iter=2)[0]]),
    Case("posthoc", ("FocalTemperatureScaling", "focal_temperature_scores"),
         lambda logits, labels, temps, fts_gammas, counts: [
             _fitted(P.FocalTemperatureScaling(o, 5, fts_gammas, temps, search).fit(logits, labels, w), logits)
             for o in P.FocalTemperatureScaling.OBJECTIVES for search in P.FocalTemperatureScaling.SEARCHES
             for w in (None, counts)]
         + [P.focal_temperature_scores(logits, labels, fts_gammas, temps, o) for o in ("ece", "nll")]),
    # the maps of the registry: fitted on the layout where the fit is cheap; the grid and soft-binned fits (the
    # estimators above, with short grids) are given their parameters, which FittedMap applies to the layout
    Case("posthoc", ("get_map", "REGISTRY", "MapSpec", "FittedMap"),
         lambda logits, labels: [
             (fitted.params, fitted.proba(logits), fitted.log_proba(logits))
             for fitted in (P.get_map(spec.name)(logits, labels, "fl-3") if spec.name in ("none", "ts-nll", "psi")
                            else P.FittedMap(spec.name, {"temperature": 1.7, "gamma": 0.5} if spec.name == "fts"
                                             else {"temperature": 1.7}) for spec in P.REGISTRY)]),
    # calib.soft_binning
    Case("soft_binning", ("log_soft_membership", "soft_membership", "membership_derivative", "edge_distance",
                          "hard_limit_temperature"),
         lambda conf, centres: [SB.log_soft_membership(conf, 7, 0.05), SB.soft_membership(conf, 7, 0.05, centres),
                                SB.membership_derivative(conf, 7, 0.05), SB.edge_distance(conf, 7),
                                SB.hard_limit_temperature(SB.edge_distance(conf, 7), 7),
                                SB.hard_limit_temperature(conf, 7)]),
    Case("soft_binning", ("soft_binned_ece", "soft_binned_ece_gradient"),
         lambda conf, correct, weights, centres: [SB.soft_binned_ece(conf, correct, 7, 0.05, norm, e)
                                                  for norm in ("l1", "l2") for e in ("bin", "label")]
         + [SB.soft_binned_ece(conf, correct, 7, 0.05, weights=weights, centres=centres),
            SB.soft_binned_ece_gradient(conf, correct, 7, 0.05)]),
    Case("soft_binning", ("soft_uncertainty", "soft_uncertainty_derivative"),
         lambda h_star: [SB.soft_uncertainty(h_star, 0.4, 0.5), SB.soft_uncertainty_derivative(h_star, 0.4, 0.5)]),
    # calib.simulate
    Case("simulate", ("softmax", "sample_labels", "nudge_edge_confidences", "calibrated_ece_bias"),
         lambda logits, probs: [SIM.softmax(logits), SIM.sample_labels(probs, _rng(5)),
                                SIM.nudge_edge_confidences(probs, 4), SIM.calibrated_ece_bias(probs, 5),
                                SIM.calibrated_ece_bias(probs, 5, "quantile")]),
    Case("simulate", ("expected_ece_exact",),
         lambda small_probs, p: [SIM.expected_ece_exact(small_probs, 4), SIM.expected_ece_exact(small_probs, 4,
                                                                                                 p_correct=p[:5])]),
    Case("simulate", ("population_errors", "ideal_top_label_ece"),
         lambda weights, probs, posterior, conf, p: [SIM.population_errors(weights, probs, posterior, 1.5),
                                                     SIM.ideal_top_label_ece(weights, conf, p),
                                                     SIM.ideal_top_label_ece(weights, conf, p, 2.0, "sample")]),
    Case("simulate", ("ece_sampling_table",),
         lambda sizes: SIM.ece_sampling_table(sizes, sizes[:1], _rng(2), n_reps=2, n_classes=3).values),
    # calib.selective
    Case("selective", ("sup_binned_ece", "sup_binned_cwece"),
         lambda probs, labels, predictions: [SEL.sup_binned_ece(probs, labels),
                                             SEL.sup_binned_ece(probs, labels, predictions),
                                             SEL.sup_binned_cwece(probs, labels)]),
    Case("selective", ("sup_binned_brute_force",),
         lambda small_probs, small_labels: SEL.sup_binned_brute_force(small_probs, small_labels)),
    Case("selective", ("ece_abstain_map", "cwece_abstain_map"),
         lambda probs, accept: [SEL.ece_abstain_map(probs, accept), SEL.cwece_abstain_map(probs, accept)]),
    Case("selective", ("calibration_hierarchy",),
         lambda weights, probs, posterior: SEL.calibration_hierarchy(weights, probs, posterior, 1.5)),
    Case("selective", ("beta_population", "smoothed_cdf"),
         lambda u, kappa, scores, at, bin_edges: [SEL.beta_population(u, kappa), SEL.beta_population(u, 0.5, False),
                                                  SEL.smoothed_cdf(scores, None, 5), SEL.smoothed_cdf(scores, at, 5),
                                                  SEL.smoothed_cdf(scores, at, edges=bin_edges)]),
    Case("selective", ("inverse_focal_dp", "inverse_focal_dp_printed", "inverse_focal_positive_interval"),
         lambda p, gamma_rows, gamma: [SEL.inverse_focal_dp(p, gamma_rows), SEL.inverse_focal_dp_printed(p, 2.0),
                                       SEL.inverse_focal_positive_interval(gamma * 2)]),
    Case("selective", ("dual_focal_weight", "DUAL_FOCAL_VARIANTS"),
         lambda probs, labels: [SEL.dual_focal_weight(probs, labels, 2.0, v) for v in SEL.DUAL_FOCAL_VARIANTS]),
    # calib.stats (not enumerated: its other functions take per-seed numbers through the same seed_values)
    Case("stats", ("seed_interval", "paired_seed_interval", "paired_t_p_value"),
         lambda seeds_a, seeds_b: [S.seed_interval(seeds_a), S.paired_seed_interval(seeds_a, seeds_b, 0.9, 1e-4),
                                   S.paired_t_p_value(seeds_a, seeds_b)]),
    Case("stats", ("paired_bootstrap", "kendall_tau_bootstrap"),      # a cheap metric: 100 resamples each
         lambda probs, posterior, labels: [
             S.paired_bootstrap(_mean_label_probability, probs, posterior, labels, n_resamples=100),
             S.kendall_tau_bootstrap({"a": 0.1, "b": 0.2, "c": 0.3},
                                     {"a": [probs, posterior], "b": [posterior, probs], "c": [probs, probs]},
                                     labels, _mean_label_probability, n_resamples=100)]),
]

#: Public names that take no array, and why (a new public name must be covered by a case or listed here).
NOT_ARRAYS = {
    "calib.metrics": {
        "CSFS": "a tuple of names", "Reliability": "a result (reliability returns it; compared there)",
        "RiskCoverage": "a result (risk_coverage_curve returns it)", "confidence_range": "a name and a number",
        "metric_names": "no argument",
    },
    "calib.focal": {
        "random_linear_softmax_batches": "sizes and a seed", "GammaSchedule": "a schedule's tuples of floats",
        "FLSD_53": "a schedule", "FLSD_53_TABLE4": "a schedule", "FLSD_532": "a schedule",
        "SCHEDULES": "a dict of schedules", "upweighted_intervals": "a schedule",
        "CLOSEST_T_GRIDS": "a dict of grid settings", "CLOSEST_T_GRID_MANY": "a grid setting",
    },
    "calib.posthoc": {
        "NotFittedError": "an exception class", "GridEdgeWarning": "a warning class",
        "SearchBoundWarning": "a warning class",
        "MUKHOTI_GRID": "a constant grid", "FINE_GRID": "a constant grid", "KOMISARENKO_GAMMAS": "a constant grid",
        "KOMISARENKO_TEMPERATURES": "a constant grid", "T_RANGE": "a pair of numbers", "EDGE_SHARE": "a number",
        "map_names": "no argument", "focal_loss_gamma": "a loss name",
    },
    "calib.soft_binning": {
        "bin_centres": "a number of bins", "binary_tempered_nll": "numbers", "binary_tempered_population": "numbers",
        "membership_modes": "numbers", "uniform_calibrated_population": "numbers",
    },
    "calib.simulate": {
        "CalibratedBias": "a result", "ECESamplingTable": "a result", "PopulationErrors": "a result",
        "calibrated_logits": "sizes and a Generator", "dirichlet_logits": "numbers and a Generator",
        "random_population": "sizes and a Generator",
    },
    "calib.selective": {
        "Hierarchy": "a result", "PropernessToy": "a result", "inverse_focal_gamma_threshold": "no argument",
        "paper_tables": "no argument", "properness_toy": "numbers and a seed",
    },
}

#: Functions whose tensor input is computed by torch, not by the numpy code of the reference: their results for a
#: tensor agree with the reference to rounding only (torch's softmax and log-sum-exp round differently from scipy's;
#: the focal map's torch path is a separate, differentiable implementation; the streaming metrics add a tensor
#: batch into sums on its device, in torch's order of summation). Compared with TORCH_RTOL, TORCH_ATOL.
TORCH_COMPUTED = {"focal_map", "TemperatureScaling", "FocalTemperatureScaling", "get_map", "StreamingMetric"}
TORCH_RTOL, TORCH_ATOL = 1e-13, 1e-15


def test_every_public_name_is_covered():
    """Every name in a module's ``__all__`` is called by a case of CASES or listed in NOT_ARRAYS with a reason."""
    covered = {name for case in CASES for name in case.covers}
    missing = []
    for module_name in MODULES:
        module = importlib.import_module(module_name)
        listed = NOT_ARRAYS[module_name]
        missing += [f"{module_name}.{name}" for name in module.__all__ if name not in covered and name not in listed]
        stale = [name for name in listed if name not in module.__all__ or name in covered]
        assert not stale, f"{module_name}: NOT_ARRAYS lists {stale}, which are not public or are covered by a case"
    assert not missing, f"public names neither covered by a case of tests/test_layouts.py nor listed in NOT_ARRAYS: " \
                        f"{missing}"


# ------------------------------------------------------------------------------------------- the comparison

def _leaves(result, path="result"):
    """``(path, kind, value)`` of every number in a result: arrays, scalars, tensors, dataclasses, fitted
    estimators' dicts, statistics. ``kind`` is the container type (a tensor in gives a tensor out)."""
    if isinstance(result, torch.Tensor):
        yield path, "tensor", result.detach().cpu().numpy()
    elif isinstance(result, np.ndarray):
        yield path, "ndarray", result
    elif isinstance(result, (bool, int, float, np.generic)):
        yield path, type(result).__name__, np.asarray(result)
    elif result is None or isinstance(result, str):
        yield path, "other", np.asarray(str(result))
    elif isinstance(result, dict):
        for key in sorted(result, key=str):
            if key not in ("hess_inv", "message"):        # scipy's OptimizeResult: an operator and its text
                yield from _leaves(result[key], f"{path}[{key!r}]")
    elif isinstance(result, (list, tuple)):
        for i, item in enumerate(result):
            yield from _leaves(item, f"{path}[{i}]")
    elif dataclasses.is_dataclass(result):
        for field in dataclasses.fields(result):
            yield from _leaves(getattr(result, field.name), f"{path}.{field.name}")
    else:
        raise TypeError(f"{path}: cannot compare a {type(result).__name__}; add it to _leaves")


def _native(a: np.ndarray) -> np.ndarray:
    return a.astype(a.dtype.newbyteorder("="), copy=False)


def _call(case: Case, arrays: dict):
    """The case's result and the warnings it raised (compared too: a grid-edge warning names a temperature)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = case.call(**arrays)
    return result, [f"{w.category.__name__}: {w.message}" for w in caught]


def _snapshot(x):
    return x.detach().clone() if isinstance(x, torch.Tensor) else x.tobytes(order="A")


def _unchanged(before, x) -> bool:
    return torch.equal(before, x.detach()) if isinstance(x, torch.Tensor) else before == x.tobytes(order="A")


def _differences(case: Case, data: dict, layouts=LAYOUTS):
    """Every way the case's result for a layout differs from the C-ordered reference: a list of
    ``(layout, where, what, max |diff|)``."""
    reference_arrays = {key: np.ascontiguousarray(data[key]) for key in case.keys}
    expected, expected_warnings = _call(case, reference_arrays)
    expected = list(_leaves(expected))
    torch_computed = any(name in TORCH_COMPUTED for name in case.covers)
    found = []
    for layout, make in layouts.items():
        if layout == "C":
            continue
        arrays = {key: make(value) for key, value in reference_arrays.items()}
        before = {key: _snapshot(value) for key, value in arrays.items()}
        try:
            got, got_warnings = _call(case, arrays)
        except Exception as exc:                              # noqa: BLE001 (every failure is a difference)
            found.append((layout, "call", f"{type(exc).__name__}: {str(exc)[:300]}", np.inf))
            continue
        for key, value in arrays.items():
            if not _unchanged(before[key], value):
                found.append((layout, key, "the input was modified", np.inf))
        if got_warnings != expected_warnings:
            found.append((layout, "warnings", f"{got_warnings} != {expected_warnings}", np.inf))
        got = list(_leaves(got))
        if [p for p, _, _ in got] != [p for p, _, _ in expected]:
            found.append((layout, "structure", f"{[p for p, _, _ in got]}", np.inf))
            continue
        is_tensor = layout.startswith("torch")
        for (where, kind, value), (_, want_kind, want) in zip(got, expected):
            if kind != want_kind and not (is_tensor and (kind, want_kind) == ("tensor", "ndarray")):
                found.append((layout, where, f"{kind} returned where the reference is {want_kind}", np.inf))
            value = _native(value)
            if value.shape != want.shape or (value.dtype != want.dtype and not is_tensor):
                found.append((layout, where, f"shape/dtype {value.shape} {value.dtype} != {want.shape} "
                                             f"{want.dtype}", np.inf))
                continue
            if value.dtype.kind in "fc":
                same = (np.allclose(value, want, rtol=TORCH_RTOL, atol=TORCH_ATOL, equal_nan=True)
                        if is_tensor and torch_computed else
                        value.astype(want.dtype).tobytes() == want.tobytes())
                if not same:
                    with np.errstate(invalid="ignore"):
                        diff = np.abs(value.astype(np.float64) - want)
                    found.append((layout, where, "values differ", float(np.nanmax(diff)) if diff.size else 0.0))
            elif not np.array_equal(value, want):
                found.append((layout, where, "values differ", np.inf))
    return found


def _check(group: str, data: dict):
    report = []
    for case in (c for c in CASES if c.group == group):
        report += [f"{case.name}\n    {layout} {where}: {what} (max |diff| {diff:.3g})"
                   for layout, where, what, diff in _differences(case, data)]
    assert not report, f"{len(report)} difference(s) from the C-ordered result:\n" + "\n".join(report[:40])


# ----------------------------------------------------------------------------------------------- the tests

@pytest.fixture(autouse=True)
def _one_torch_thread():
    """The arrays are tiny: torch's threads only wait on each other (on a loaded machine, 20 ms per operation, which
    made the soft-binned ECE fits 30 times slower)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


#: Few examples (every case runs under each of the 14 layouts): two drawn besides the two explicit ones; no deadline
#: (the first call imports and caches); derandomized, so that a run is reproducible.
LAYOUT_SETTINGS = settings(max_examples=2, deadline=None, derandomize=True, database=None,
                           suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@pytest.mark.parametrize("group", sorted({case.group for case in CASES}))
@LAYOUT_SETTINGS
@given(data=problems)
@example(data=problem(n=23, k=10, seed=7, ties=False))     # always a wide problem (K >= 8) and one with ties
@example(data=problem(n=12, k=3, seed=8, ties=True))
def test_every_layout_gives_the_reference_result(group, data):
    """For every case of the group and every layout of its arrays: the C-ordered result, bit for bit (tensors the
    functions compute by torch: to TORCH_RTOL), the same warnings, the same output types (a tensor may give a
    tensor where an array gives an array), and no input modified."""
    _check(group, data)


# ------------------------------------------------------------------------------- dtypes and tensor types

class OtherLibraryTensor(torch.Tensor):
    """A tensor subclass defined outside torch (as MONAI's ``MetaTensor``): ``type(t).__module__`` is not torch's."""


def test_a_tensor_subclass_is_a_tensor():
    """calib told a tensor by its type's module name, so a subclass from another library went the numpy way: the
    focal map and the post-hoc maps returned an ndarray for it (the policy: a tensor in, a tensor out), and a CUDA or
    grad-requiring one failed in np.asarray. It is now ``isinstance(x, torch.Tensor)``."""
    data = problem(20, 4, seed=1, ties=False)
    z = torch.from_numpy(data["logits"])
    sub = z.clone().as_subclass(OtherLibraryTensor).requires_grad_(True)
    for apply in (lambda t: focal.focal_map(t, 2.0), posthoc.FittedMap("fts", {"temperature": 1.5, "gamma": 0.5}).proba,
                  posthoc.FittedMap("ts-nll", {"temperature": 1.5}).proba):
        out = apply(sub)
        assert isinstance(out, torch.Tensor), type(out)
        assert torch.equal(out.detach().as_subclass(torch.Tensor), apply(z))
    expected = metrics.ece(_softmax(data["logits"]), data["labels"])
    assert metrics.ece(torch.softmax(sub, dim=1), data["labels"]) == expected


def test_big_endian_float32_stays_float32():
    """A big-endian float32 array was not ``== np.float32`` (the byte order differs), so the focal map computed it in
    float64 and returned float64 where the same numbers in native order give float32. Arrays are now read in native
    byte order first; the result is the native array's, bit for bit."""
    z = problem(30, 5, seed=3, ties=False)["logits"].astype(np.float32)
    for fn in (focal.focal_map, lambda a, g: focal.focal_map(a, g).sum(axis=1)):
        got, want = fn(z.astype(">f4"), 2.0), fn(z, 2.0)
        assert got.dtype == want.dtype == np.float32
        assert got.tobytes() == want.tobytes()


def test_float32_and_integer_input_give_the_float64_copys_result():
    """The documented promise of calib.metrics (float32 is checked in float32, accumulated in float64: the results equal
    those of the float64 copy), and integer logits equal float ones, bit for bit."""
    data = problem(40, 9, seed=4, ties=True)
    p32 = data["probs"].astype(np.float32)
    p32 /= p32.sum(axis=1, keepdims=True)
    for spec in metrics.REGISTRY:
        assert spec(p32, data["labels"]) == spec(p32.astype(np.float64), data["labels"]), spec.name
    z = np.round(data["logits"] * 3).astype(np.int32)
    for fn in (simulate.softmax, lambda a: focal.focal_map(a, 1.5), lambda a: focal.log_focal_map(a, -0.5)):
        assert fn(z).tobytes() == fn(z.astype(np.float64)).tobytes()


@pytest.mark.parametrize("make, message", [(lambda t: t.to_sparse(), r"sparse_coo torch tensor.*to_dense\(\)"),
                                           (lambda t: t.to("meta"), "meta device")])
def test_a_tensor_without_dense_values_is_refused_by_name(make, message):
    """A sparse or meta tensor failed deep inside torch (TypeError, NotImplementedError); it is a ValueError naming the
    argument and the fix."""
    data = problem(6, 3, seed=5, ties=False)
    with pytest.raises(ValueError, match=f"probs is a .*{message}"):
        metrics.ece(make(torch.from_numpy(data["probs"])), data["labels"])


# ------------------------------------------------------------------------------------------------ bad input

#: The arrays a NaN is planted in (one at a time), and the names a function's message may give them where its parameter
#: is not named as the case's argument (``aurc(probs, labels, confidence)`` gets the case's ``scores``, ...).
NAN_ROLES = ("logits", "probs", "conf", "s", "p", "p0", "scores", "loss", "weights", "posterior")
MESSAGE_NAMES = {"scores": ("confidence",), "conf": ("confidence",), "p": ("p0", "p_correct"),
                 "probs": ("q", "probs_a"), "posterior": ("target", "probs_b"), "logits": ("log_probs",)}


def test_every_case_refuses_a_nan_and_a_label_outside_the_classes_naming_the_array():
    """The API's promise for bad input (a ValueError naming the argument, never a silent NaN), over every public
    function the layout cases call: a NaN planted in each float array a case passes, and a label -1, each raise
    ValueError naming that array. Found by it: the NLL from log-probabilities (nan) and paired_bootstrap (an interval
    nan [nan, nan]; a label -1 indexed the last class) let them through."""
    data = problem(n=12, k=4, seed=8, ties=False)
    unnamed, silent = [], []
    for case in CASES:
        for role in case.keys:
            if role not in NAN_ROLES and role != "labels":
                continue
            args = {k: np.array(data[k], copy=True) for k in case.keys}
            if role == "labels":
                args[role][0] = -1
            else:
                args[role] = args[role].astype(np.float64)
                args[role].flat[0] = np.nan
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    case.call(**args)
            except ValueError as exc:
                names = (role, *MESSAGE_NAMES.get(role, ()))
                if not any(re.search(rf"\b{name}\b", str(exc)) for name in names):
                    unnamed.append((case.name, role, str(exc)[:120]))
            else:
                silent.append((case.name, role))
    assert silent == [] and unnamed == [], (silent, unnamed)
