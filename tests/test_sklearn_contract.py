"""calib.posthoc's calibrators as scikit-learn estimators (issue 43, item 3).

scikit-learn's own suite (``sklearn.utils.estimator_checks``, the checks ``check_estimator`` runs) on
TemperatureScaling (nll, ece, sb-ece) and FocalTemperatureScaling (grid, line search), with the checks that a
calibrator of logits cannot pass declared one by one with their reason (expected failures, strict: a check that
starts to pass fails the test, so the list stays true). The suite feeds its own data, which are feature matrices, not
logits with labels that index their columns; the properties those checks would have tested are tested here on logits
(``test_what_the_suite_cannot_check_on_its_data``). Then: sample weights as frequency weights (integer weights equal
repeated rows, for every objective), the not-fitted error, the fitted width, pickling, and scikit-learn's model
selection with a scorer of probabilities.
"""

from __future__ import annotations

import pickle
import re
import subprocess
import sys
import warnings
from functools import partial

import numpy as np
import pytest
import torch
from scipy.special import log_softmax, softmax

# a development dependency of calib; estimator tags (__sklearn_tags__) are read from 1.6, and the checks' generator
# takes xfail_strict from 1.8
pytest.importorskip("sklearn", minversion="1.8")

from sklearn.utils.estimator_checks import estimator_checks_generator  # noqa: E402

from calib import metrics  # noqa: E402
from calib.posthoc import (FocalTemperatureScaling, GridEdgeWarning, NotFittedError,  # noqa: E402
                           SearchBoundWarning, TemperatureScaling)
from calib.soft_binning import soft_binned_ece  # noqa: E402

#: A shorter T grid for FocalTemperatureScaling under the suite: the default 9 x 500 grid makes the suite take
#: about 15 s per search (each check fits several times), this one about 1.5 s; the code paths are the same.
SUITE_TEMPERATURES = np.geomspace(0.05, 20, 40)

ESTIMATORS = {
    "ts-nll": lambda: TemperatureScaling("nll"),
    "ts-ece": lambda: TemperatureScaling("ece"),
    "ts-sb-ece": lambda: TemperatureScaling("sb-ece"),
    "fts-grid": lambda: FocalTemperatureScaling(temperatures=SUITE_TEMPERATURES),
    "fts-line": lambda: FocalTemperatureScaling(search="line", temperatures=SUITE_TEMPERATURES),
}

#: TS-SB-ECE fits by L-BFGS with torch autograd, 0.1-1 s a fit on the suite's data (the whole suite took 45-75 s on
#: two shared cores, all of it passing but the expected failures), so it runs the checks of what its objective does
#: differently (sample weights, determinism, pickling of its optimiser's report, the fitted width); the protocol around
#: the objective is the one the other estimators run in full.
SB_ECE_CHECKS = {"check_estimator_cloneable", "check_sample_weight_equivalence_on_dense_data",
                 "check_all_zero_sample_weights_error", "check_fit_idempotent", "check_estimators_pickle",
                 "check_fit_check_is_fitted", "check_n_features_in", "check_estimators_unfitted"}

_LABELS_INDEX_COLUMNS = ("labels are the column indices 0..K-1 of the logits (column j is class j); the check's "
                         "labels {}, so fit raises ValueError ({}); tested on logits in "
                         "test_what_the_suite_cannot_check_on_its_data")
_OUT_OF_RANGE = "'labels must lie in [0, 2)'"

#: The checks that fail for every calibrator, by reason. None of them is a defect of the estimators' protocol: the
#: suite's data are not logits whose columns the labels index, or the check asks for scikit-learn's wording of an error
#: that calib raises in its own words (a ValueError naming the argument, the problem and the fix).
EXPECTED_FAILURES = {
    "check_estimators_overwrite_params": _LABELS_INDEX_COLUMNS.format("are 0, 1, 2 on 2 columns", _OUT_OF_RANGE),
    "check_estimators_fit_returns_self": _LABELS_INDEX_COLUMNS.format("are 0, 1, 2 on 2 columns", _OUT_OF_RANGE),
    "check_readonly_memmap_input": _LABELS_INDEX_COLUMNS.format("are 0, 1, 2 on 2 columns", _OUT_OF_RANGE),
    "check_classifiers_train": _LABELS_INDEX_COLUMNS.format("are 0, 1, 2 on 2 columns", _OUT_OF_RANGE) + (
        "; and predict is the argmax of the logits, so its accuracy would be that of the check's features (tag "
        "poor_score)"),
    "check_classifier_data_not_an_array": _LABELS_INDEX_COLUMNS.format("are 1, 2 on 2 columns", _OUT_OF_RANGE),
    "check_sample_weights_pandas_series": _LABELS_INDEX_COLUMNS.format("are 1, 2 on 2 columns", _OUT_OF_RANGE),
    "check_sample_weights_not_an_array": _LABELS_INDEX_COLUMNS.format("are 1, 2 on 2 columns", _OUT_OF_RANGE),
    "check_sample_weights_shape": _LABELS_INDEX_COLUMNS.format("are 1, 2 on 2 columns", _OUT_OF_RANGE),
    "check_sample_weights_not_overwritten": _LABELS_INDEX_COLUMNS.format("are 1, 2 on 2 columns", _OUT_OF_RANGE),
    "check_classifiers_classes": _LABELS_INDEX_COLUMNS.format("are strings", "'labels has dtype <U3, not integers'"),
    "check_estimators_nan_inf": ("its labels are floats 0.0, 1.0, which calib refuses ('labels has dtype float64, "
                                 "not integers; convert them with labels.astype(int)'); NaN and infinite logits raise "
                                 "ValueError ('logits contains NaN or infinity'), tested in test_posthoc.py"),
    "check_classifiers_regression_target": ("continuous labels raise calib's ValueError 'labels has dtype float64, "
                                            "not integers', not scikit-learn's wording 'Unknown label type'"),
    "check_supervised_y_2d": "labels of shape (N, 1) raise ValueError ('must be 1-D'); they are not raveled with a "
                             "warning",
    "check_classifiers_one_label": ("a calibrator fits on a one-class validation set, and its predict is the argmax of "
                                    "the logits, not the one label it saw (a calibrator learns confidences, not "
                                    "decisions)"),
    "check_complex_data": "complex logits raise calib's ValueError 'logits is complex; pass a real array.', not "
                          "scikit-learn's wording 'Complex data not supported'",
    "check_dtype_object": "object arrays raise ValueError ('logits has dtype object; pass a numeric array.'); they "
                          "are not converted",
    "check_estimators_empty_data_messages": ("logits of 0 columns raise calib's ValueError 'logits has 0 column(s); "
                                             "pass one column per class, at least 2.', not scikit-learn's wording "
                                             "'0 feature(s) ... while a minimum of ... is required'"),
    "check_fit2d_1feature": ("one column of logits is one class, which a calibrator cannot fit: calib's ValueError "
                             "'logits has 1 column(s); pass one column per class, at least 2.', not scikit-learn's "
                             "wording '1 feature(s)'"),
    "check_fit2d_predict1d": ("1-D logits raise calib's ValueError 'logits must be 2-D of shape (N, K)' with the fix "
                              "for a binary problem, not scikit-learn's wording 'Reshape your data'"),
    "check_requires_y_none": ("y=None raises calib's ValueError 'labels is None; pass an array or a torch tensor.', "
                              "not scikit-learn's wording"),
}

_NO_FINITE_NLL_TEMPERATURE = ("the check's random logits carry no information about its labels, so the validation NLL "
                              "decreases up to T = 1e4 and fit raises ValueError ('no finite temperature', by design: "
                              "test_no_finite_temperature_is_reported_not_clamped); the same check passes for "
                              "objective='ece', which shares everything but the objective")

#: The checks that fail for objective "nll" only, on top of EXPECTED_FAILURES.
EXPECTED_NLL_FAILURES = {name: _NO_FINITE_NLL_TEMPERATURE for name in (
    "check_dont_overwrite_parameters", "check_n_features_in_after_fitting", "check_estimators_dtypes",
    "check_f_contiguous_array_estimator", "check_methods_sample_order_invariance", "check_methods_subset_invariance",
    "check_dict_unchanged", "check_fit2d_predict1d")}
EXPECTED_NLL_FAILURES["check_classifiers_train"] = (EXPECTED_FAILURES["check_classifiers_train"] + "; for 'nll' its "
                                                    "binary part raises too: " + _NO_FINITE_NLL_TEMPERATURE)


def expected_failed_checks(estimator) -> dict[str, str]:
    """The checks expected to fail for ``estimator``, each with its reason."""
    if getattr(estimator, "objective", None) == "nll" and isinstance(estimator, TemperatureScaling):
        return {**EXPECTED_FAILURES, **EXPECTED_NLL_FAILURES}
    return EXPECTED_FAILURES


def check_name(check) -> str:
    base = check.func if isinstance(check, partial) else check
    return getattr(base, "__wrapped__", base).__name__


def _suite():
    """(id, estimator, check) of every check the suite runs, the expected failures marked xfail (strict)."""
    cases = []
    with warnings.catch_warnings():     # the suite warns that the estimators do not inherit BaseEstimator (on purpose)
        warnings.filterwarnings("ignore", message=".*does not inherit from `sklearn.base.BaseEstimator`")
        for key, make in ESTIMATORS.items():
            estimator = make()
            seen = {}
            for case in estimator_checks_generator(estimator, expected_failed_checks=expected_failed_checks(estimator),
                                                   mark="xfail", xfail_strict=True):
                values = case.values if hasattr(case, "values") else case
                name = check_name(values[1])
                if key == "ts-sb-ece" and name not in SB_ECE_CHECKS:
                    continue
                seen[name] = seen.get(name, 0) + 1
                suffix = f"-{seen[name]}" if seen[name] > 1 else ""
                marks = case.marks if hasattr(case, "marks") else ()
                cases.append(pytest.param(*values, marks=marks, id=f"{key}-{name}{suffix}"))
    return cases


@pytest.mark.parametrize("estimator, check", _suite())
def test_scikit_learn_estimator_checks(estimator, check):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", GridEdgeWarning)      # the suite's data put optima at the grids' edges
        warnings.simplefilter("ignore", SearchBoundWarning)
        check(estimator)


def test_every_expected_failure_is_a_check_of_the_suite():
    """A renamed or removed check of a new scikit-learn would leave a stale entry: each name must be generated."""
    names = set()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for make in ESTIMATORS.values():
            names |= {check_name(check) for _, check in estimator_checks_generator(make())}
    assert set(EXPECTED_FAILURES) | set(EXPECTED_NLL_FAILURES) <= names
    assert SB_ECE_CHECKS <= names


# ----------------------------------------------------------------------------------------------------------
# the same properties on logits
# ----------------------------------------------------------------------------------------------------------

def calibrated_logits(n, k=4, scale=2.5, seed=0):
    """Logits z of a calibrated model (labels drawn from softmax(z)), returned multiplied by ``scale``."""
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(n, k)) * 1.5
    y = (softmax(z, axis=1).cumsum(axis=1) > rng.random((n, 1))).argmax(axis=1)
    return z * scale, y


FIT_CASES = {
    "ts-nll": lambda: TemperatureScaling("nll"),
    "ts-ece": lambda: TemperatureScaling("ece"),
    "ts-sb-ece": lambda: TemperatureScaling("sb-ece"),
    "fts-grid-ece": lambda: FocalTemperatureScaling("ece", temperatures=np.geomspace(0.5, 8, 60)),
    "fts-grid-nll": lambda: FocalTemperatureScaling("nll", temperatures=np.geomspace(0.5, 8, 60)),
    "fts-line-ece": lambda: FocalTemperatureScaling("ece", search="line", temperatures=np.geomspace(0.5, 8, 60)),
}


def fitted_values(estimator) -> dict:
    out = {"temperature_": estimator.temperature_}
    for name in ("gamma_", "grid_scores_", "score_"):
        if getattr(estimator, name, None) is not None:
            out[name] = getattr(estimator, name)
    return out


@pytest.mark.parametrize("key", FIT_CASES)
def test_integer_weights_equal_repeated_rows(key):
    """sample_weight did not exist; now they are frequency weights for every objective: weights 0..3 give the fit of
    the rows repeated that many times (a row of weight 0 left out), and weights all 1 give the unweighted fit. The
    exact fits agree to rounding; TS-SB-ECE's L-BFGS stops at a relative decrease of 1e-14 of its objective, so the
    two runs (whose objectives differ by rounding) agree to about 1e-8 in T."""
    make, rtol = FIT_CASES[key], (1e-6 if key == "ts-sb-ece" else 1e-9)
    z, y = calibrated_logits(200, seed=1)
    w = np.random.default_rng(2).integers(0, 4, size=200)
    rows = np.repeat(np.arange(200), w)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", GridEdgeWarning)
        weighted = make().fit(z, y, sample_weight=w)
        repeated = make().fit(z[rows], y[rows])
        unit = make().fit(z, y, sample_weight=np.ones(200))
        plain = make().fit(z, y)
    for name, value in fitted_values(repeated).items():
        np.testing.assert_allclose(getattr(weighted, name), value, rtol=rtol, atol=1e-12, err_msg=name)
        np.testing.assert_array_equal(getattr(unit, name), getattr(plain, name), err_msg=name)
    np.testing.assert_allclose(weighted.predict_proba(z), repeated.predict_proba(z), rtol=rtol, atol=1e-15)
    assert any(not np.array_equal(value, getattr(plain, name))   # the weights changed the fit
               for name, value in fitted_values(weighted).items())


@pytest.mark.parametrize("objective", ["nll", "ece", "sb-ece"])
def test_temperature_scaling_weights_are_scale_free(objective):
    """TS's three objectives are weighted means: scaling every weight by 0.37 gives the same T."""
    z, y = calibrated_logits(300, seed=3)
    w = np.random.default_rng(4).random(300) + 0.1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", GridEdgeWarning)
        a = TemperatureScaling(objective).fit(z, y, sample_weight=w)
        b = TemperatureScaling(objective).fit(z, y, sample_weight=0.37 * w)
    np.testing.assert_allclose(a.temperature_, b.temperature_, rtol=1e-7)


@pytest.mark.parametrize("norm", ["l1", "l2"])
@pytest.mark.parametrize("estimator", ["bin", "label"])
def test_weighted_sb_ece_objective_equals_the_numpy_soft_binned_ece(norm, estimator):
    """TS-SB-ECE's weighted objective (torch) against calib.soft_binning.soft_binned_ece (numpy, its own weights)."""
    from calib.posthoc.temperature import _weighted_soft_binned_ece

    z, y = calibrated_logits(200, seed=5)
    w = np.random.default_rng(6).random(200) * 3
    p = softmax(z / 1.7, axis=1)
    torch_value = _weighted_soft_binned_ece(torch.tensor(z / 1.7), torch.tensor(y), torch.tensor(w), n_bins=15,
                                            temperature=0.01, norm=norm, estimator=estimator)
    numpy_value = soft_binned_ece(p.max(axis=1), p.argmax(axis=1) == y, 15, 0.01, norm, estimator, weights=w)
    np.testing.assert_allclose(float(torch_value), numpy_value, rtol=1e-12)


def test_weighted_binned_eces_equal_the_metrics_on_repeated_rows():
    """The weighted equal-width and equal-mass ECEs of the fits, against calib.metrics on the rows repeated: ties,
    fewer rows than bins, integer weights."""
    from calib.posthoc._common import weighted_equal_mass_ece_rows, weighted_top_label_ece

    rng = np.random.default_rng(7)
    for n, n_bins in ((40, 15), (7, 15), (60, 4)):
        conf = np.round(rng.random((3, n)), 1)                 # many ties
        correct = rng.random(n) < 0.6
        w = rng.integers(1, 5, size=n).astype(float)
        rows = np.repeat(np.arange(n), w.astype(int))
        np.testing.assert_allclose(weighted_equal_mass_ece_rows(conf, correct, w, n_bins),
                                   metrics.equal_mass_ece_rows(conf[:, rows], correct[rows], n_bins), atol=1e-15)
        for g in range(3):
            assert weighted_top_label_ece(conf[g], correct, w, n_bins) == pytest.approx(
                metrics.top_label_ece(conf[g, rows], correct[rows], n_bins=n_bins), abs=1e-15)


@pytest.mark.parametrize("make", [FIT_CASES["ts-nll"], FIT_CASES["fts-grid-ece"]], ids=["ts", "fts"])
def test_bad_sample_weights_are_named(make):
    z, y = calibrated_logits(50, seed=8)
    for weights, match in ((np.ones(49), "sample_weight has 49 entries but there are 50 rows"),
                           (np.ones((50, 1)), r"sample_weight must be 1-D.*\(50, 1\)"),
                           (2.0, "sample_weight must be a 1-D array of 50 weights"),
                           (-np.ones(50), "sample_weight has negative entries"),
                           (np.zeros(50), "every weight is zero"),
                           (np.r_[np.nan, np.ones(49)], "sample_weight contains NaN")):
        with pytest.raises(ValueError, match=match):
            make().fit(z, y, sample_weight=weights)


# ----------------------------------------------------------------------------------------------------------
# fitted or not, the fitted width, pickling
# ----------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("make", FIT_CASES.values(), ids=FIT_CASES.keys())
def test_not_fitted_error_and_check_is_fitted(make):
    """check_is_fitted raised AttributeError (no __sklearn_tags__), and predict_proba a plain ValueError; now
    scikit-learn's NotFittedError (also calib's, and a ValueError) until a fit succeeds."""
    from sklearn.exceptions import NotFittedError as SklearnNotFittedError
    from sklearn.utils.validation import check_is_fitted

    z, y = calibrated_logits(200, seed=9)
    estimator = make()
    with pytest.raises(SklearnNotFittedError):
        check_is_fitted(estimator)
    for method in ("predict_proba", "predict_log_proba", "predict"):
        with pytest.raises(SklearnNotFittedError, match="is not fitted yet; call fit") as error:
            getattr(estimator, method)(z)
        assert isinstance(error.value, NotFittedError) and isinstance(error.value, ValueError)
        again = pickle.loads(pickle.dumps(error.value))     # an error sent back from a worker process
        assert type(again) is type(error.value) and str(again) == str(error.value)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", GridEdgeWarning)
        estimator.fit(z, y)
    check_is_fitted(estimator)
    assert estimator.n_features_in_ == 4 and estimator.classes_.tolist() == [0, 1, 2, 3]


def test_the_not_fitted_error_needs_no_scikit_learn():
    """Without scikit-learn imported, the error is calib's NotFittedError and scikit-learn stays unimported."""
    code = ("import sys, numpy as np\nfrom calib.posthoc import TemperatureScaling, NotFittedError\n"
            "try:\n    TemperatureScaling().predict_proba(np.zeros((2, 3)))\nexcept NotFittedError as e:\n"
            "    print(type(e).__name__, isinstance(e, ValueError), 'sklearn' in sys.modules)")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert run.stdout.split() == ["NotFittedError", "True", "False"], run.stdout + run.stderr


@pytest.mark.parametrize("make", FIT_CASES.values(), ids=FIT_CASES.keys())
def test_logits_of_another_width_are_refused(make):
    """Logits of 3 columns were accepted by a calibrator fitted on 4 (probabilities of another model, silently); now
    ValueError in scikit-learn's words, for every method, numpy or torch."""
    z, y = calibrated_logits(200, seed=10)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", GridEdgeWarning)
        estimator = make().fit(z, y)
    name = type(estimator).__name__
    methods = ["predict_proba", "predict_log_proba", "predict"] + (["predict_logits"] if name == "TemperatureScaling"
                                                                   else [])
    for narrow in (z[:, :3], torch.tensor(z[:, :3]), z[:, :1]):
        for method in methods:
            with pytest.raises(ValueError, match=re.escape(f"logits: X has {narrow.shape[1]} features, but {name} is "
                                                           f"expecting 4 features as input")):
                getattr(estimator, method)(narrow)
    assert estimator.predict_proba(z).shape == (200, 4)


def test_sparse_logits_are_refused_by_name():
    """A scipy sparse matrix raised 'logits has dtype object; pass a numeric array.' (np.asarray makes a 0-D object
    array of it); now the error says that it is sparse and how to make it dense."""
    import scipy.sparse

    z, y = calibrated_logits(100, seed=16)
    estimator = TemperatureScaling().fit(z, y)
    for sparse in (scipy.sparse.csr_matrix(z), scipy.sparse.csr_array(z)):
        kind = type(sparse).__name__
        with pytest.raises(ValueError, match=f"logits is a scipy sparse {kind}; calib takes dense arrays: pass "
                                             r"logits.toarray\(\)"):
            TemperatureScaling().fit(sparse, y)
        with pytest.raises(ValueError, match=f"logits is a scipy sparse {kind}"):
            estimator.predict_proba(sparse)


@pytest.mark.parametrize("make", FIT_CASES.values(), ids=FIT_CASES.keys())
def test_classifier_methods_and_pickling(make):
    """predict is classes_[argmax], predict_log_proba the log of predict_proba (numpy and torch); a pickled fitted
    estimator gives the same probabilities bit for bit."""
    z, y = calibrated_logits(200, seed=11)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", GridEdgeWarning)
        estimator = make().fit(z, y)
    p = estimator.predict_proba(z)
    np.testing.assert_array_equal(estimator.predict(z), np.argmax(p, axis=1))
    np.testing.assert_array_equal(estimator.predict(z), np.argmax(z, axis=1))     # the maps keep the top class
    np.testing.assert_allclose(estimator.predict_log_proba(z), np.log(p), rtol=1e-12, atol=1e-12)
    zt = torch.tensor(z)
    assert torch.equal(estimator.predict(zt), torch.tensor(np.argmax(z, axis=1)))
    copy = pickle.loads(pickle.dumps(estimator))
    np.testing.assert_array_equal(copy.predict_proba(z), p)
    assert copy.n_features_in_ == 4 and repr(copy) == repr(estimator)


@pytest.mark.parametrize("make", [FIT_CASES["ts-ece"], FIT_CASES["fts-line-ece"]], ids=["ts", "fts"])
def test_what_the_suite_cannot_check_on_its_data(make):
    """The checks expected to fail because the suite's labels do not index its columns, on logits: fit returns self
    and changes no parameter; read-only, list and pandas inputs and weights give the same fit; the weights are not
    written to."""
    import joblib
    import pandas as pd

    z, y = calibrated_logits(200, seed=12)
    w = np.random.default_rng(13).integers(0, 3, size=200).astype(float)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", GridEdgeWarning)
        estimator = make()
        params = joblib.hash(estimator.get_params())
        reference = estimator.fit(z, y, sample_weight=w)
        assert reference is estimator and joblib.hash(estimator.get_params()) == params
        expected = reference.predict_proba(z)
        frozen = [a.copy() for a in (z, y, w)]
        for a in frozen:
            a.setflags(write=False)
        for X, labels, weights in (frozen, (z.tolist(), y.tolist(), w.tolist()),
                                   (pd.DataFrame(z), pd.Series(y), pd.Series(w))):
            np.testing.assert_array_equal(make().fit(X, labels, sample_weight=weights).predict_proba(X), expected)
        w_before = w.copy()
        make().fit(z, y, sample_weight=w)
        np.testing.assert_array_equal(w, w_before)


def test_model_selection_with_a_scorer_of_probabilities():
    """As a classifier, a calibrator goes into cross_val_score with scoring='neg_log_loss' (which takes classifiers
    only) and into GridSearchCV with sample weights; the scores are those computed by hand."""
    from sklearn.base import is_classifier
    from sklearn.model_selection import GridSearchCV, StratifiedKFold, cross_val_score

    z, y = calibrated_logits(600, seed=14, scale=3.0)
    assert is_classifier(TemperatureScaling()) and is_classifier(FocalTemperatureScaling())
    folds = list(StratifiedKFold(3).split(z, y))
    scores = cross_val_score(TemperatureScaling(), z, y, scoring="neg_log_loss", cv=folds)
    by_hand = [np.mean(log_softmax(z[test] / TemperatureScaling().fit(z[train], y[train]).temperature_,
                                   axis=1)[np.arange(len(test)), y[test]]) for train, test in folds]
    np.testing.assert_allclose(scores, by_hand, rtol=1e-12)
    w = np.random.default_rng(15).integers(1, 3, size=600)
    search = GridSearchCV(TemperatureScaling(), {"objective": ["nll", "ece"]}, scoring="neg_log_loss", cv=folds)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", GridEdgeWarning)
        search.fit(z, y, sample_weight=w)
    assert search.best_estimator_.temperature_ == TemperatureScaling(
        search.best_params_["objective"]).fit(z, y, sample_weight=w).temperature_


# --------------------------------------------------------------- mutation sample C: behaviour the sample found untested

def test_the_tags_say_a_multi_class_single_label_classifier_of_poor_score():
    """predict is the argmax of the logits, so its accuracy is the logits' (poor_score: scikit-learn's classifier
    checks must not demand a good score); one label per sample among K classes (multi-class, not multi-label)."""
    for make in ESTIMATORS.values():
        tags = make().__sklearn_tags__()
        assert tags.estimator_type == "classifier"
        assert tags.classifier_tags.poor_score is True
        assert tags.classifier_tags.multi_class is True and tags.classifier_tags.multi_label is False


def test_a_refit_forgets_public_fitted_attributes_only():
    """fit first deletes the fitted attributes (public names with a trailing underscore); a private attribute that
    happens to end in an underscore is not one of them and is kept, a stale public one is not."""
    z, y = calibrated_logits(200, seed=3)
    est = TemperatureScaling()
    est._note_ = "kept"
    est.stale_ = "dropped"
    est.fit(z, y)
    assert est._note_ == "kept"
    assert not hasattr(est, "stale_")
