"""Bad input is refused with a ValueError that names the argument at fault, for every public callable of the core.

The API's contract (DESIGN.md): bad input gets a ValueError naming the argument, the problem and the fix. A message
that names another argument (``labels`` where ``probs`` holds the NaN, ``grid`` where ``n_bins`` is 0) sends the
reader to the wrong array. The callables are enumerated from the ``__all__`` of :data:`PACKAGES` and the entries of
the metric and post-hoc registries (a class is constructed and then fitted, updated or called; calib.runs is left
out: it takes paths and run folders); each parameter whose name is in :data:`BAD` gets, one at a time, each of the
bad values listed there (:data:`BAD_FOR` where a callable's parameter takes others) while the other arguments stay
good (:data:`GOOD`, by parameter name, with :data:`GOOD_FOR` where a callable reads a name differently). Every bad
value must raise ValueError, and its message must begin with the parameter's name (or a name of :data:`ALIASES`) as
a word (not ``XXsXX``, ``S`` or ``None``), or with two names of which it is the second (:func:`_named`). A public
callable whose required arguments have no good value fails :func:`test_every_public_callable_is_enumerated` unless
:data:`NOT_CALLED` says why it is left out. The post-hoc estimators' ``predict_proba`` is called on fitted ones.

A name passed to a checker (``as_float_array(s, "s")``) was seen by no other test: mutmut's mutants of those names
(``"XXsXX"``, ``"S"``, ``None``) survived. Found by it: ``StreamingNLL`` and ``StreamingBrier`` took ``len(labels)``
before checking them (``labels=None`` was a TypeError), and ``EqualMassStatistic`` let a NaN confidence through
(sorted anywhere, a silent result).
"""

from __future__ import annotations

import importlib
import inspect
import re
import warnings

import numpy as np
import pytest
import torch

from calib import focal, losses, metrics, posthoc

PACKAGES = ("calib.metrics", "calib.losses", "calib.posthoc", "calib.stats", "calib.focal")

N, K = 12, 4


def _problem():
    rng = np.random.default_rng(3)
    logits = rng.normal(size=(N, K)) * 2.0
    logits[0, 0] += 1.0
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    probs = e / e.sum(axis=1, keepdims=True)
    labels = probs.argmax(axis=1)
    labels[:3] = (labels[:3] + 1) % K                      # some errors
    return logits, probs, labels


LOGITS, PROBS, LABELS = _problem()
CONF = PROBS.max(axis=1)
CORRECT = PROBS.argmax(axis=1) == LABELS
SEEDS_A, SEEDS_B = np.array([0.10, 0.12, 0.09, 0.11]), np.array([0.08, 0.09, 0.07, 0.10])
STATS_A = [metrics.statistic(PROBS, LABELS, "nll") for _ in range(3)]
STATS_B = [metrics.statistic(PROBS[::-1].copy(), LABELS, "nll") for _ in range(3)]

#: A good value of each parameter, by name (numpy for calib.metrics, .posthoc, .stats, .focal; torch for .losses).
GOOD = {
    "probs": PROBS, "labels": LABELS, "logits": LOGITS, "conf": CONF, "correct": CORRECT, "confidence": CONF,
    "loss": (CONF < 0.5).astype(np.float64), "q": PROBS, "target": PROBS[::-1].copy(), "eta": PROBS[:2],
    "p": np.linspace(0.05, 0.95, N), "p0": np.linspace(0.05, 0.45, N), "s": np.linspace(-3.0, 3.0, N),
    "gamma": 2.0, "edges": (0.2, 0.5), "temperature": 1.5, "schedule": focal.FLSD_53,
    "a": SEEDS_A, "b": SEEDS_B, "values": SEEDS_A, "probs_a": PROBS, "probs_b": PROBS[::-1].copy(),
    "metric": metrics.nll, "n_batches": 2, "kind": "msp", "n_classes": K, "mean_a": 1.0, "sd_a": 1.0,
    "mean_b": 0.5, "sd_b": 1.0, "log_probs": LOGITS - np.log(np.exp(LOGITS).sum(axis=1, keepdims=True)),
    "val_logits": LOGITS, "val_labels": LABELS, "X": LOGITS, "y": LABELS, "sd": 1.0, "n": 5,
    "sample_weight": np.full(N, 1.0),
}

#: Where a callable reads a parameter name differently from :data:`GOOD`.
GOOD_FOR = {
    "calib.losses": {"logits": torch.from_numpy(LOGITS), "targets": torch.from_numpy(LABELS), "kappa": 0.5,
                     "alpha": 0.1, "scores": torch.from_numpy(CONF)},
    "calib.posthoc": {"loss": "fl-3"},                                     # the maps' fits take a loss's name
    "calib.stats.seed_test_interval": {"a": STATS_A, "b": STATS_B},
    "calib.stats.sampling_variance": {"a": STATS_A, "b": STATS_B},
    "calib.stats.power_line": {"paper_effect": 0.01},
    "calib.stats.margin": {"kind": "sign"},
    "calib.metrics.statistic": {"metric": "nll"},
    "calib.metrics.outcome_statistic": {"metric": "ece", "confidence": CONF},
    "calib.losses.confidence_incentive": {"loss": losses.cross_entropy},
    "calib.focal.schedule_from_prop2": {"p0": 0.3},
    "calib.stats.sd_upper_bound": {"confidence": 0.8},
    "calib.stats.rank_agreement_test": {"reference": SEEDS_A, "values": SEEDS_B},
    "calib.stats.kendall_tau_bootstrap": {"reference": {"x": 0.1, "y": 0.2, "z": 0.3},
                                          "probs": {"x": [PROBS, PROBS], "y": [PROBS[::-1].copy()] * 2,
                                                    "z": [PROBS, PROBS[::-1].copy()]},
                                          "metric": metrics.nll, "n_resamples": 100},
    "calib.stats.paired_bootstrap": {"metric": metrics.nll, "n_resamples": 100},
    "calib.metrics.EqualMassStatistic": {"conf": CONF},
    "calib.metrics.equal_mass_ece_rows": {"conf": np.stack([CONF, CONF ** 2])},     # (G, N)
    "calib.focal.minimise_focal_risk": {"gamma": 2.0},
    "calib.focal.closest_temperature": {"gamma": 2.0, "n_classes": 2, "step": 0.05, "xtol": 1e-6},   # a coarse grid
    "calib.focal.ts_distance": {"gamma": 2.0, "temperature": 1.5, "n_classes": 2, "step": 0.05},
}


def _nan(x):
    """``x`` with its first entry NaN (a float copy)."""
    arr = np.array(x.numpy() if isinstance(x, torch.Tensor) else x, dtype=np.float64, copy=True)
    arr.flat[0] = np.nan
    return torch.from_numpy(arr) if isinstance(x, torch.Tensor) else arr


def _short(x):
    """``x`` with one row fewer than the other arrays."""
    return x[:-1]


def _label_outside(x):
    """A label of no class (K)."""
    arr = np.array(x.numpy() if isinstance(x, torch.Tensor) else x, copy=True)
    arr[0] = K
    return torch.from_numpy(arr) if isinstance(x, torch.Tensor) else arr


def _const(value):
    return lambda good: value


NONE = ("None", _const(None))
NAN = ("a NaN", _nan)
SHORT = ("one row short", _short)

#: The bad values of each parameter, by name: ``(what, make(good value) -> bad value)``.
BAD = {
    **{name: (NONE, NAN) for name in ("probs", "logits", "log_probs", "conf", "q", "target", "eta", "p", "p0", "s",
                                      "probs_a", "probs_b")},
    "confidence": (NONE, NAN, SHORT, ("an unknown score name", _const("bogus"))),   # an array or a CSF's name
    "loss": (NONE, NAN, SHORT),
    "correct": (NONE, SHORT),
    "labels": (NONE, ("a label outside the classes", _label_outside), SHORT),
    "targets": (("a label outside the classes", _label_outside), SHORT),
    # None is the default (no weights): a ragged list is what reaches the reading of the array by name
    "sample_weight": (NAN, SHORT, ("negative", _const(-np.ones(N))), ("ragged", _const([[1.0], [1.0, 2.0]]))),
    **{name: (NONE, ("one value", _const([0.1])), NAN) for name in ("a", "b", "values")},
    "X": (NONE, NAN),
    "val_logits": (NONE, NAN),
    "val_labels": (NONE, ("a label outside the classes", _label_outside), SHORT),
    "y": (NONE, ("a label outside the classes", _label_outside), SHORT),
    **{name: (("0", _const(0)), ("-1", _const(-1))) for name in ("n_bins", "max_iter", "n_batches", "batch_size",
                                                               "n_features")},
    "n_classes": (("1", _const(1)), ("-1", _const(-1))),
    **{name: (("0", _const(0.0)), ("-1", _const(-1.0)), ("NaN", _const(float("nan"))))
       for name in ("temperature", "sb_temperature", "bandwidth", "logit_range", "step")},
    "kappa": (("-1", _const(-1.0)), ("NaN", _const(float("nan")))),
    "start": (("0", _const(0.0)), ("-1", _const(-1.0))),
    **{name: (("an unknown name", _const("bogus")),)
       for name in ("binning", "norm", "estimator", "objective", "search", "sb_norm", "sb_estimator", "kind")},
    **{name: (("empty", _const(np.array([]))), ("a negative value", _const(np.array([1.0, -1.0]))),
              ("a NaN", _const(np.array([1.0, np.nan]))))
       for name in ("grid", "temperatures")},
    "gammas": (("a NaN", _const(np.array([1.0, np.nan]))),),
    **{name: (("NaN", _const(float("nan"))),) for name in ("gamma", "alpha")},
    "edges": (("a NaN", _const(np.array([0.2, np.nan]))),),
}

#: Where a callable's parameter takes other bad values than :data:`BAD`'s (by callable or package).
BAD_FOR = {
    "calib.losses": {"logits": (NAN,)},                     # a tensor's None is torch's TypeError, as in torch
    **{f"calib.stats.{fn}": {name: (("empty", _const([])),) for name in ("a", "b")}
       for fn in ("seed_test_interval", "sampling_variance")},   # sequences of statistics
    "calib.stats.sd_upper_bound": {"confidence": (("1.5", _const(1.5)),)},
    "calib.metrics.outcome_statistic": {"confidence": (NONE, NAN)},         # the array the others are counted by
    "calib.losses.confidence_incentive": {"loss": ()},                     # a loss function
    "calib.posthoc": {"loss": ()},                                         # a loss's name (the maps' fits)
    # a registry's metric without bins takes n_bins and ignores it (one signature for every metric)
    **{f"calib.metrics.REGISTRY[{spec.name!r}]": {"n_bins": ()} for spec in metrics.REGISTRY if not spec.takes},
    "calib.metrics.REGISTRY['mean_confidence']": {"n_bins": (), "labels": BAD["labels"][1:]},   # labels optional
    "calib.stats.kendall_tau_bootstrap": {"probs": (),                     # a dict: item -> the seeds' probs
                                          "labels": BAD["labels"][:2]},   # a length is probs' (its arrays' N)
    "calib.focal.schedule_from_prop2": {
        "p0": (NONE, NAN, ("0.5", _const(0.5)), ("two numbers", _const([0.2, 0.3]))),
        "edges": (NAN, ("decreasing", _const([0.4, 0.2])), ("an edge at 1", _const([1.0])))},
    # a differentiable building block of the losses, which check their logits: no check of its own on the way
    "calib.losses.confidence_scores": {"logits": ()},
}

#: Other names a message may give a parameter (a function that hands it on under the name its callee documents).
ALIASES = {
    **{(f"calib.posthoc.REGISTRY[{spec.name!r}]", f"val_{name}"): (name,) for spec in posthoc.REGISTRY
       for name in ("logits", "labels")},
    **{(f"calib.posthoc.{cls}{method}", x): (name,) for cls in ("TemperatureScaling", "FocalTemperatureScaling")
       for method in ("", ".predict_proba") for x, name in (("X", "logits"), ("y", "labels"))},
}

#: Public callables not called here, and why.
NOT_CALLED = {
    "calib.metrics.Reliability": "a result (reliability returns it)",
    "calib.losses.LossSpec": "a registry record", "calib.losses.RegisteredLoss": "a registry's wrapper (get_loss)",
    "calib.losses.CombinedLoss": "made by combined_loss", "calib.focal.GammaSchedule": "a schedule's tuples",
    "calib.metrics.StreamingMetric": "the streaming metrics' base class",
    "calib.stats.MultipleDecision": "a result (decide_every and decide_any return it)",
    "calib.posthoc.focal_loss_gamma": "a loss name",
    "calib.posthoc.REGISTRY['none']": "the identity: fits nothing, reads no argument",
    "calib.posthoc.REGISTRY['psi']": "Psi^gamma of the loss's gamma: fits nothing, reads no argument",
}

#: A class is constructed with its own parameters, then this method is called with the array parameters.
METHODS = ("fit", "update", "forward")


def _public():
    """``(qualified name, object, package)`` of every public callable of :data:`PACKAGES`, of the registries' entries
    (a metric's spec and its ``from_log_probs``, a post-hoc map's fit) and of a fitted estimator's ``predict_proba``."""
    for spec in metrics.REGISTRY:
        yield f"calib.metrics.REGISTRY[{spec.name!r}]", spec, "calib.metrics"
        if spec.from_log_probs is not None:
            yield f"calib.metrics.REGISTRY[{spec.name!r}].from_log_probs", spec.from_log_probs, "calib.metrics"
    for spec in posthoc.REGISTRY:
        yield f"calib.posthoc.REGISTRY[{spec.name!r}]", spec, "calib.posthoc"
    # re-exported for calib.posthoc (not in __all__), with its checks on by default
    yield "calib.metrics.equal_mass_ece_rows", metrics.equal_mass_ece_rows, "calib.metrics"
    for cls in (posthoc.TemperatureScaling, posthoc.FocalTemperatureScaling):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")                           # a grid-edge warning of 12 rows
            fitted = cls().fit(LOGITS, LABELS)
        yield f"calib.posthoc.{cls.__name__}.predict_proba", fitted.predict_proba, "calib.posthoc"
    for package in PACKAGES:
        module = importlib.import_module(package)
        for name in module.__all__:
            obj = getattr(module, name)
            if callable(obj) and not (inspect.isclass(obj) and issubclass(obj, BaseException)):
                yield f"{package}.{name}", obj, package


def _parameters(obj):
    """The constructor's (or function's) parameters, and the method's for a class with one of :data:`METHODS`."""
    def names(fn):
        return [p for p in inspect.signature(fn).parameters.values()
                if p.name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    if not inspect.isclass(obj):
        return names(obj), None, []
    method = next((m for m in METHODS if callable(getattr(obj, m, None))), None)
    return names(obj), method, names(getattr(obj, method)) if method else []


def _good(qualname: str, package: str, param: str):
    for table in (GOOD_FOR.get(qualname, {}), GOOD_FOR.get(package, {}), GOOD):
        if param in table:
            return table[param]
    raise KeyError(param)


def _bad(qualname: str, package: str, param: str) -> tuple:
    for table in (BAD_FOR.get(qualname, {}), BAD_FOR.get(package, {}), BAD):
        if param in table:
            return table[param]
    return ()


def _entries():
    """``(qualname, call(args), parameters with their good values)`` of every callable with a parameter in BAD."""
    out, missing = [], []
    for qualname, obj, package in _public():
        if qualname in NOT_CALLED:
            continue
        own, method, of_method = _parameters(obj)
        params = own + of_method
        if not any(p.name in BAD for p in params):
            continue
        good = {}
        for p in params:
            try:
                good[p.name] = _good(qualname, package, p.name)
            except KeyError:
                if p.default is p.empty:
                    missing.append(f"{qualname}({p.name})")
        own_names = {p.name for p in own}

        def call(args, obj=obj, method=method, own_names=own_names):
            if method is None:
                return obj(**args)
            made = obj(**{k: v for k, v in args.items() if k in own_names})
            return getattr(made, method)(**{k: v for k, v in args.items() if k not in own_names})
        required = {p.name for p in params if p.default is p.empty}
        out.append((qualname, call, good, [(p.name, _bad(qualname, package, p.name), p.name in required)
                                           for p in params]))
    return out, missing


ENTRIES, MISSING = _entries()


def test_every_public_callable_is_enumerated():
    """A public callable with a parameter checked by name is called here: its required arguments have good values."""
    assert not MISSING, f"no good value for {MISSING}: add one to GOOD or GOOD_FOR, or the callable to NOT_CALLED"
    assert len(ENTRIES) >= 100                                       # 112 when written


def _named(message: str, names) -> list:
    """The names of ``names`` that ``message`` is about: it begins with the name as a word (``labels must ...``,
    ``n_bins=0 ...``, ``a's ...``), or with two names of which it is the second (``reference and values must ...``).
    A name further on does not count: a checker's fix text can hold the default name whatever it was given ("Re-index
    the labels to 0..K-1"), and "a" is also an article."""
    return [name for name in names if re.match(rf"(\w+ and )?{re.escape(name)}(?![\w(])", message)]


@pytest.mark.parametrize("qualname, call, good, params", ENTRIES, ids=[e[0] for e in ENTRIES])
def test_bad_input_is_refused_naming_the_argument(qualname, call, good, params):
    """For each parameter with bad values in BAD, each bad value (the others good): a ValueError whose message names
    that parameter."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")                              # a grid-edge warning of 12 rows
        call(dict(good))                                             # the good arguments are accepted
    problems = []
    names = [name for name, _, _ in params]
    for param, bad, required in params:
        for what, make in bad:
            if make is NONE[1] and not required:                      # None is the default
                continue
            args = dict(good)
            args[param] = make(good.get(param))
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    call(args)
            except ValueError as exc:
                message = str(exc)
                if not _named(message, [param, *ALIASES.get((qualname, param), ())]):
                    problems.append(f"{param} = {what}: the message names {_named(message, names)}, not {param}: "
                                    f"{message[:160]}")
            except Exception as exc:                                 # noqa: BLE001 (every other kind is wrong)
                problems.append(f"{param} = {what}: {type(exc).__name__}, not ValueError: {str(exc)[:160]}")
            else:
                problems.append(f"{param} = {what}: accepted")
    assert not problems, f"{qualname}:\n  " + "\n  ".join(problems)
