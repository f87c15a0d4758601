"""Tests of calib.metrics: brute-force references, closed forms, independent libraries, edge conventions,
properties (hypothesis) and bad input for every public metric."""

from __future__ import annotations

import functools
import itertools
import math

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from calib import _validate, metrics

NORMS = ("l1", "l2", "max")
BINNINGS = ("uniform", "quantile")
ESTIMATORS = ("bin", "label")


# ------------------------------------------------------------------------------------------------------
# data
# ------------------------------------------------------------------------------------------------------

def softmax(z, axis=1):
    z = np.asarray(z, dtype=np.float64)
    e = np.exp(z - z.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def random_data(seed, n, k, kind="smooth"):
    """probs (n, k) and labels. "smooth": softmax of Gaussian logits; "grid": probabilities on a grid of
    1/20 (many ties, many values exactly on bin edges i/5, i/10); "onehot": a few exact 0 and 1 entries."""
    rng = np.random.default_rng(seed)
    if kind == "smooth":
        p = softmax(rng.normal(size=(n, k)) * rng.uniform(0.5, 3))
    elif kind == "grid":
        counts = rng.multinomial(20, rng.dirichlet(np.ones(k)), size=n)
        p = counts / 20.0
    else:
        p = softmax(rng.normal(size=(n, k)) * 2)
        rows = rng.choice(n, size=max(1, n // 5), replace=False)
        p[rows] = np.eye(k)[rng.integers(0, k, rows.size)]
    y = rng.integers(0, k, n)
    return p, y


# ------------------------------------------------------------------------------------------------------
# brute-force references (plain Python loops over samples and bins)
# ------------------------------------------------------------------------------------------------------

def ref_top_label(p, y):
    conf, correct = [], []
    for row, label in zip(p.tolist(), y.tolist()):
        best = max(row)
        conf.append(best)
        correct.append(row.index(best) == label)  # first maximum
    return conf, correct


def ref_uniform_bin(v, m):
    for i in range(m):
        lo, hi = i / m, (i + 1) / m
        if lo < v <= hi or (i == 0 and v == 0.0):
            return i
    raise AssertionError(v)


def ref_bins(x, flag, m, binning):
    """Per-bin lists of (x, outcome). Equal-mass: sorted by x, cut by position with np.array_split sizes,
    and each sample of a group of equal x counts with the group's mean outcome."""
    bins = [[] for _ in range(m)]
    if binning == "uniform":
        for v, f in zip(x, flag):
            bins[ref_uniform_bin(v, m)].append((v, float(f)))
    else:
        groups = {}
        for v, f in zip(x, flag):
            groups.setdefault(v, []).append(float(f))
        pairs = sorted((v, sum(groups[v]) / len(groups[v])) for v in x)
        for b, part in enumerate(np.array_split(np.arange(len(pairs)), m)):
            bins[b] = [pairs[j] for j in part]
    return bins


def ref_error(bins, n, norm, estimator):
    terms = []  # (weight, |gap|)
    for members in bins:
        if not members:
            continue
        acc = sum(f for _, f in members) / len(members)
        mean_conf = sum(v for v, _ in members) / len(members)
        if estimator == "bin":
            terms.append((len(members) / n, abs(acc - mean_conf)))
        else:
            terms.extend((1 / n, abs(acc - v)) for v, _ in members)
    if norm == "l1":
        return sum(w * g for w, g in terms)
    if norm == "l2":
        return math.sqrt(sum(w * g * g for w, g in terms))
    return max(g for _, g in terms)


def ref_ece(p, y, m, binning, norm, estimator):
    conf, correct = ref_top_label(p, y)
    return ref_error(ref_bins(conf, correct, m, binning), len(conf), norm, estimator)


def ref_classwise(p, y, m, binning, norm):
    n, k = p.shape
    per_class = []
    for c in range(k):
        bins = ref_bins(p[:, c].tolist(), (y == c).tolist(), m, binning)
        per_class.append([(len(b), abs(sum(f for _, f in b) / len(b) - sum(v for v, _ in b) / len(b)))
                          for b in bins if b])
    if norm == "l1":
        return sum(cnt / n * g for bins in per_class for cnt, g in bins) / k
    if norm == "l2":
        return math.sqrt(sum(cnt / n * g * g for bins in per_class for cnt, g in bins) / k)
    return max(g for bins in per_class for _, g in bins)


def ref_ks(p, y):
    conf, correct = ref_top_label(p, y)
    n = len(conf)
    best = 0.0
    for v in sorted(set(conf)):  # the two cumulative curves, compared at each distinct confidence
        s = sum(f - c for c, f in zip(conf, correct) if c <= v) / n
        best = max(best, abs(s))
    return best


def ref_aurc_sorted(score, loss):
    """Definition with a given order: (1/n) sum_i (1/i) sum_{j<=i} loss_(j), sorted by descending score."""
    order = sorted(range(len(score)), key=lambda i: -score[i])  # Python's sort is stable
    total, run = 0.0, 0.0
    for i, j in enumerate(order, start=1):
        run += loss[j]
        total += run / i
    return total / len(score)


def ref_aurc_mean_over_tie_orders(score, loss):
    """Mean of the sorted definition over every order of the tied samples (small n only)."""
    groups = {}
    for i, s in enumerate(score):
        groups.setdefault(s, []).append(i)
    keys = sorted(groups, reverse=True)
    values = []
    for perms in itertools.product(*(itertools.permutations(groups[s]) for s in keys)):
        order = [i for perm in perms for i in perm]
        run, total = 0.0, 0.0
        for r, j in enumerate(order, start=1):
            run += loss[j]
            total += run / r
        values.append(total / len(score))
    return sum(values) / len(values)


# ------------------------------------------------------------------------------------------------------
# brute-force agreement
# ------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("estimator", ESTIMATORS)
@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("binning", BINNINGS)
@pytest.mark.parametrize("n_bins", [1, 5, 15])
@pytest.mark.parametrize("k", [2, 3, 10])
def test_ece_matches_brute_force(k, n_bins, binning, norm, estimator):
    for seed, kind, n in [(0, "smooth", 150), (1, "smooth", 37), (2, "grid", 120), (3, "onehot", 60), (4, "smooth", 3)]:
        p, y = random_data(seed, n, k, kind)
        got = metrics.ece(p, y, n_bins=n_bins, binning=binning, norm=norm, estimator=estimator)
        want = ref_ece(p, y, n_bins, binning, norm, estimator)
        assert got == pytest.approx(want, rel=1e-12, abs=1e-14), (seed, kind)


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("binning", BINNINGS)
@pytest.mark.parametrize("n_bins", [1, 5, 15])
@pytest.mark.parametrize("k", [2, 3, 10])
def test_classwise_matches_brute_force(k, n_bins, binning, norm):
    for seed, kind, n in [(0, "smooth", 120), (2, "grid", 90), (3, "onehot", 50), (4, "smooth", 4)]:
        p, y = random_data(seed, n, k, kind)
        got = metrics.classwise_ece(p, y, n_bins=n_bins, binning=binning, norm=norm)
        want = ref_classwise(p, y, n_bins, binning, norm)
        assert got == pytest.approx(want, rel=1e-12, abs=1e-14), (seed, kind)


def test_classwise_uniform_across_row_blocks(monkeypatch):
    """Tiny row blocks (many loop iterations, a short last block) give the same result."""
    p, y = random_data(5, 203, 7, "grid")
    want = metrics.classwise_ece(p, y, n_bins=10)
    monkeypatch.setattr(metrics._binning, "BLOCK_ELEMENTS", 7 * 16)
    assert metrics.classwise_ece(p, y, n_bins=10) == pytest.approx(want, rel=1e-13)
    assert metrics.brier(p, y) == pytest.approx(float(np.mean(np.sum((p - np.eye(7)[y]) ** 2, axis=1))), rel=1e-13)


def test_classwise_quantile_across_class_blocks(monkeypatch):
    p, y = random_data(6, 150, 9, "grid")
    want = ref_classwise(p, y, 4, "quantile", "l2")
    monkeypatch.setattr(metrics._binning, "BLOCK_ELEMENTS", 64)  # one class per block
    assert metrics.classwise_ece(p, y, n_bins=4, binning="quantile", norm="l2") == pytest.approx(want, rel=1e-12)


def test_aliases():
    p, y = random_data(0, 300, 4)
    assert metrics.adaptive_ece(p, y, n_bins=7) == metrics.ece(p, y, n_bins=7, binning="quantile")
    assert metrics.mce(p, y, n_bins=7) == metrics.ece(p, y, n_bins=7, norm="max")


@pytest.mark.parametrize("binning", BINNINGS)
def test_reliability_matches_brute_force_and_ece(binning):
    for seed, kind, n, m in [(0, "smooth", 200, 10), (2, "grid", 100, 5), (3, "smooth", 4, 15)]:
        p, y = random_data(seed, n, 4, kind)
        rel = metrics.reliability(p, y, n_bins=m, binning=binning)
        conf, correct = ref_top_label(p, y)
        bins = ref_bins(conf, correct, m, binning)
        assert rel.n == n and rel.edges.shape == (m + 1,)
        assert rel.counts.tolist() == [len(b) for b in bins]
        for b, members in enumerate(bins):
            if members:
                assert rel.confidence[b] == pytest.approx(sum(v for v, _ in members) / len(members), rel=1e-12)
                assert rel.accuracy[b] == pytest.approx(sum(f for _, f in members) / len(members), rel=1e-12)
            else:
                assert np.isnan(rel.confidence[b]) and np.isnan(rel.accuracy[b])
        full = rel.counts > 0
        from_bins = np.sum(rel.counts[full] / n * np.abs(rel.accuracy[full] - rel.confidence[full]))
        assert from_bins == pytest.approx(metrics.ece(p, y, n_bins=m, binning=binning), rel=1e-12)
        assert rel.edges[0] == 0.0 and rel.edges[-1] == 1.0 and np.all(np.diff(rel.edges) >= 0)
        if binning == "uniform":
            assert rel.edges.tolist() == [i / m for i in range(m + 1)]
        else:  # each bin's confidences lie between its edges
            for b, members in enumerate(bins):
                for v, _ in members:
                    assert rel.edges[b] <= v <= rel.edges[b + 1]
        with pytest.raises(ValueError):  # read-only arrays of a frozen dataclass
            rel.counts[0] = 5


def test_nll_brier_accuracy_match_brute_force():
    for seed, kind, k in [(0, "smooth", 3), (1, "grid", 10), (2, "smooth", 2)]:
        p, y = random_data(seed, 80, k, kind)
        p = np.where(p == 0, 1e-3, p)  # nll needs p_y > 0
        p = p / p.sum(axis=1, keepdims=True)
        conf, correct = ref_top_label(p, y)
        assert metrics.accuracy(p, y) == pytest.approx(sum(correct) / len(y), rel=1e-15)
        assert metrics.nll(p, y) == pytest.approx(-sum(math.log(p[i, y[i]]) for i in range(len(y))) / len(y),
                                                  rel=1e-13)
        want = sum((p[i, c] - (y[i] == c)) ** 2 for i in range(len(y)) for c in range(k)) / len(y)
        assert metrics.brier(p, y) == pytest.approx(want, rel=1e-13)


def test_ks_matches_brute_force():
    for seed, kind, n, k in [(0, "smooth", 120, 3), (1, "grid", 100, 4), (2, "onehot", 50, 10), (3, "grid", 7, 2)]:
        p, y = random_data(seed, n, k, kind)
        assert metrics.ks_error(p, y) == pytest.approx(ref_ks(p, y), rel=1e-12, abs=1e-15)


def test_aurc_matches_sorted_definition_and_harmonic_identity():
    for seed in range(4):
        p, y = random_data(seed, 200, 5)
        conf, correct = ref_top_label(p, y)
        loss = [0.0 if c else 1.0 for c in correct]
        assert len(set(conf)) == len(conf)  # distinct: no tie rule involved
        assert metrics.aurc(p, y) == pytest.approx(ref_aurc_sorted(conf, loss), rel=1e-13)
        # Zhou et al. (2025): AURC = (1/n) sum_i loss_i (H_n - H_{r_i - 1}), r_i the descending rank
        n = len(conf)
        harmonic = np.concatenate([[0.0], np.cumsum(1.0 / np.arange(1, n + 1))])
        rank = {i: r for r, i in enumerate(sorted(range(n), key=lambda i: -conf[i]), start=1)}
        identity = sum(loss[i] * (harmonic[n] - harmonic[rank[i] - 1]) for i in range(n)) / n
        assert metrics.aurc(p, y) == pytest.approx(identity, rel=1e-12)
        # a user-supplied score (here: negative entropy, any real)
        score = np.sum(p * np.log(p), axis=1)
        assert metrics.aurc(p, y, confidence=score) == pytest.approx(ref_aurc_sorted(score.tolist(), loss), rel=1e-13)


def test_aurc_ties_are_the_mean_over_tie_orders_and_order_invariant():
    rng = np.random.default_rng(0)
    for trial in range(6):
        n = 7
        p, y = random_data(trial, n, 3)
        score = rng.integers(0, 3, n).astype(float)  # heavy ties
        conf, correct = ref_top_label(p, y)
        loss = [0.0 if c else 1.0 for c in correct]
        got = metrics.aurc(p, y, confidence=score)
        assert got == pytest.approx(ref_aurc_mean_over_tie_orders(score.tolist(), loss), rel=1e-12)
        perm = rng.permutation(n)
        assert metrics.aurc(p[perm], y[perm], confidence=score[perm]) == pytest.approx(got, rel=1e-13)


def test_aurc_all_tied_is_the_error_rate():
    p, y = random_data(1, 50, 4)
    err = 1 - metrics.accuracy(p, y)
    assert metrics.aurc(p, y, confidence=np.zeros(50)) == pytest.approx(err, rel=1e-13)


# ------------------------------------------------------------------------------------------------------
# closed forms
# ------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("binning", BINNINGS)
@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("estimator", ESTIMATORS)
def test_constant_confidence(binning, norm, estimator):
    """Constant confidence c and accuracy a: every bin that is not empty has gap a - c, so ECE = |a - c|."""
    c, n, n_correct = 0.8, 40, 26  # a = 0.65
    p = np.tile([c, 1 - c], (n, 1))
    y = np.r_[np.zeros(n_correct, int), np.ones(n - n_correct, int)]
    for m in (1, 5, 15):
        got = metrics.ece(p, y, n_bins=m, binning=binning, norm=norm, estimator=estimator)
        assert got == pytest.approx(abs(0.65 - c), rel=1e-12)
    # both columns have constant probability and the same |gap|
    assert metrics.classwise_ece(p, y, n_bins=10, binning=binning, norm=norm) == pytest.approx(0.15, rel=1e-12)


def test_calibrated_in_every_bin_gives_zero():
    # confidence 0.75 in 4 rows with 3 correct, 0.6 in 5 rows with 3 correct, 0.9 in 10 rows with 9 correct
    rows, labels = [], []
    for c, n, hits in [(0.75, 4, 3), (0.6, 5, 3), (0.9, 10, 9)]:
        rows += [[c, 1 - c]] * n
        labels += [0] * hits + [1] * (n - hits)
    p, y = np.array(rows), np.array(labels)
    for norm in NORMS:
        assert metrics.ece(p, y, n_bins=10, norm=norm) == pytest.approx(0, abs=1e-15)
        assert metrics.ece(p, y, n_bins=10, norm=norm, estimator="label") == pytest.approx(0, abs=1e-15)
    # equal-mass bins of 19 samples (7, 6, 6) mix confidence levels: each bin's accuracy is the mean
    # confidence of the bin, because tied samples count with their level's accuracy (= its confidence)
    assert metrics.ece(p, y, n_bins=3, binning="quantile") == pytest.approx(0, abs=1e-15)


def test_one_hot_correct_predictions():
    y = np.array([0, 2, 1, 2, 0])
    p = np.eye(3)[y]
    for fn in (metrics.ece, metrics.mce, metrics.adaptive_ece, metrics.classwise_ece, metrics.ks_error,
               metrics.brier, metrics.nll, metrics.aurc):
        assert fn(p, y) == 0.0, fn.__name__
    assert metrics.accuracy(p, y) == 1.0
    assert metrics.ece(p, y, norm="l2", estimator="label") == 0.0
    assert metrics.classwise_ece(p, y, binning="quantile", norm="max") == 0.0


def test_uniform_prediction_brier_and_nll():
    k = 4
    p = np.full((8, k), 1 / k)
    y = np.arange(8) % k
    assert metrics.nll(p, y) == pytest.approx(math.log(k), rel=1e-15)
    assert metrics.brier(p, y) == pytest.approx(1 - 1 / k, rel=1e-15)
    assert metrics.accuracy(p, y) == 0.25  # argmax is class 0 for every row (first maximum)


# ------------------------------------------------------------------------------------------------------
# independent libraries
# ------------------------------------------------------------------------------------------------------

def away_from_edges(seed, n, k, n_bins):
    """Data with no top-label confidence within 1e-5 of a bin edge (float32 rounding, [lo, hi) vs (lo, hi])
    and none equal to 1.0 (torchmetrics' hidden extra bin)."""
    rng = np.random.default_rng(seed)
    p = softmax(rng.normal(size=(3 * n, k)) * 2.5)
    c = p.max(axis=1)
    dist = np.abs(c[:, None] - np.arange(n_bins + 1)[None, :] / n_bins).min(axis=1)
    p = p[(dist > 1e-5) & (c < 1)][:n]
    return p, rng.integers(0, k, p.shape[0])


@pytest.mark.parametrize("n_bins", [5, 15])
@pytest.mark.parametrize("k", [3, 10])
def test_against_torchmetrics(k, n_bins):
    torch = pytest.importorskip("torch")
    tm = pytest.importorskip("torchmetrics.functional.classification")
    p, y = away_from_edges(k + n_bins, 3000, k, n_bins)
    for norm in NORMS:
        # torchmetrics "l2" is sqrt(sum_b prop_b (acc_b - conf_b)^2), the same RMS calibration error;
        # "max" takes the max over all bins, empty ones having gap 0, the same as over non-empty bins.
        want = float(tm.multiclass_calibration_error(torch.tensor(p), torch.tensor(y), num_classes=k,
                                                     n_bins=n_bins, norm=norm))
        assert metrics.ece(p, y, n_bins=n_bins, norm=norm) == pytest.approx(want, abs=1e-6), norm


def test_torchmetrics_differs_only_at_one():
    """A confidence of exactly 1.0 sits in torchmetrics' hidden extra bin; here it is in the last bin.
    (The first case happens to give the same number both ways; the second does not.)"""
    torch = pytest.importorskip("torch")
    tm = pytest.importorskip("torchmetrics.functional.classification")
    p = np.array([[1.0, 0.0], [0.97, 0.03], [0.95, 0.05]])
    y = np.array([0, 1, 0])
    # ours: one bin (0.9333, 1] with mean confidence 0.97333 and accuracy 2/3
    assert metrics.ece(p, y, n_bins=15) == pytest.approx(abs(2 / 3 - (1 + 0.97 + 0.95) / 3), rel=1e-12)
    theirs = float(tm.multiclass_calibration_error(torch.tensor(p), torch.tensor(y), num_classes=2, n_bins=15))
    assert theirs == pytest.approx((abs(0.5 - 0.96) * 2 + 0.0) / 3, abs=1e-6)
    p = np.array([[1.0, 0.0], [1.0, 0.0], [0.95, 0.05]])  # ours: one bin; theirs: {1, 1} hidden, {0.95}
    assert metrics.ece(p, y, n_bins=15) == pytest.approx(abs(2 / 3 - 2.95 / 3), rel=1e-12)
    theirs = float(tm.multiclass_calibration_error(torch.tensor(p), torch.tensor(y), num_classes=2, n_bins=15))
    assert theirs == pytest.approx(2 / 3 * 0.5 + 1 / 3 * 0.05, abs=1e-6)


def test_against_netcal():
    netcal = pytest.importorskip("netcal.metrics")
    p, y = away_from_edges(3, 2000, 4, 15)
    assert len(np.unique(y)) > 2  # netcal reads labels with <= 2 distinct values as correctness flags
    assert metrics.ece(p, y) == pytest.approx(netcal.ECE(bins=15).measure(p, y), abs=1e-10)
    assert metrics.mce(p, y) == pytest.approx(netcal.MCE(bins=15).measure(p, y), abs=1e-10)


def test_against_sklearn():
    sk = pytest.importorskip("sklearn.metrics")
    p, y = random_data(0, 300, 4)
    assert metrics.nll(p, y) == pytest.approx(sk.log_loss(y, p, labels=range(4)), rel=1e-12)
    assert metrics.accuracy(p, y) == pytest.approx(sk.accuracy_score(y, p.argmax(axis=1)), rel=1e-15)
    # the binary Brier score of the positive-class probability is half the two-class multiclass score
    p2, y2 = random_data(1, 300, 2)
    assert metrics.brier(p2, y2) == pytest.approx(2 * sk.brier_score_loss(y2, p2[:, 1]), rel=1e-12)
    try:  # scikit-learn >= 1.7 also takes (N, K) probabilities: then it is the multiclass score
        multiclass = sk.brier_score_loss(y, p, labels=range(4))
    except ValueError:
        return
    assert metrics.brier(p, y) == pytest.approx(multiclass, rel=1e-12)


# ------------------------------------------------------------------------------------------------------
# edge conventions
# ------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("m", [1, 3, 7, 10, 15, 100])
def test_uniform_bin_edges_exact(m):
    edges = metrics._binning.uniform_edges(m)
    on_edge = np.arange(m + 1) / m
    # exactly on edge i/m -> bin i-1 (bins are (lo, hi]); 0 -> bin 0; 1 -> last bin
    assert metrics._binning.uniform_bin(on_edge, m, edges).tolist() == [0] + list(range(m))
    above = np.nextafter(on_edge[:-1], 2.0)
    assert metrics._binning.uniform_bin(above, m, edges).tolist() == list(range(m))
    below = np.nextafter(on_edge[1:], -1.0)
    assert metrics._binning.uniform_bin(below, m, edges).tolist() == list(range(m))


@pytest.mark.parametrize("m", [1, 2, 3, 7, 10, 15, 30, 100, 999, 1000])
def test_uniform_bin_against_searchsorted(m):
    # searchsorted(edges, x, side="left") - 1 is the (lo, hi] bin by definition (binary search on the floats)
    rng = np.random.default_rng(m)
    edges = metrics._binning.uniform_edges(m)
    near = np.concatenate([edges, np.nextafter(edges, 2.0), np.nextafter(edges, -1.0),
                           np.nextafter(np.nextafter(edges, 2.0), 2.0), np.nextafter(np.nextafter(edges, -1.0), -1.0)])
    x = np.concatenate([rng.random(20000), rng.integers(0, m + 1, 2000) / m, near])
    x = x[(x >= 0) & (x <= 1)]
    want = np.maximum(np.searchsorted(edges, x, side="left") - 1, 0)
    assert np.array_equal(metrics._binning.uniform_bin(x, m, edges), want)
    assert np.array_equal(metrics._binning.uniform_bin(x.reshape(1, -1), m, edges)[0], want)  # 2-D, as classwise


def test_the_float_traps_that_the_correction_fixes():
    # on an edge: fl(7/100) * 100 rounds up to 7.000000000000001, so ceil(c*M) - 1 says bin 7, not (0.06, 0.07]
    assert math.ceil(0.07 * 100) == 8
    p = np.array([[0.07] * 14 + [0.02]])  # top-label confidence exactly 0.07
    rel = metrics.reliability(p, np.array([0]), n_bins=100)
    assert rel.counts[6] == 1 and rel.counts.sum() == 1
    # just above an edge: the next float above fl(11/15) times 15 rounds down to 11.0, so ceil says bin 10
    above = np.nextafter(11 / 15, 2.0)
    assert math.ceil(above * 15) == 11
    assert metrics._binning.uniform_bin(np.array([above]), 15, metrics._binning.uniform_edges(15)).tolist() == [11]
    # just below an edge: the float below 0.9 times 10 rounds up to 9.0, so floor(c*M) says bin 9
    below = np.nextafter(0.9, 0.0)
    assert math.floor(below * 10) == 9
    edges = metrics._binning.uniform_edges(10)
    assert metrics._binning.uniform_bin(np.array([below, 0.9]), 10, edges).tolist() == [8, 8]
    # torrvision's linspace edges are i * (1/M), not i / M: its 4th edge for M = 10 is 0.30000000000000004
    assert np.linspace(0, 1, 11)[3] != 3 / 10 == metrics._binning.uniform_edges(10)[3]


def test_edge_conventions_in_the_metrics():
    # top-label confidence exactly 1 -> last bin; exactly on the interior edge 3/5 -> the lower bin (2/5, 3/5]
    p = np.array([[1.0, 0.0], [0.6, 0.4], [0.4, 0.6]])
    rel = metrics.reliability(p, np.array([0, 0, 0]), n_bins=5)
    assert rel.counts.tolist() == [0, 0, 2, 0, 1]
    # class-wise: probability exactly 0 -> first bin (counted, unlike torrvision's ClasswiseECELoss)
    p = np.array([[1.0, 0.0], [1.0, 0.0]])
    y = np.array([0, 1])
    # class 0: both in the last bin, conf 1, acc 1/2; class 1: both in the first bin, conf 0, acc 1/2
    assert metrics.classwise_ece(p, y, n_bins=5) == pytest.approx(0.5, rel=1e-15)
    assert metrics.classwise_ece(p, y, n_bins=5, norm="max") == pytest.approx(0.5, rel=1e-15)


def test_quantile_counts_differ_by_at_most_one_with_ties():
    cases = [np.full(10, 0.7), np.r_[np.full(7, 0.6), np.full(6, 0.9)], np.linspace(0.5, 1, 23)]
    for c in cases:
        p = np.column_stack([c, 1 - c])
        for m in (1, 2, 3, 4, 7, 15, 30):
            counts = metrics.reliability(p, np.zeros(len(c), int), n_bins=m, binning="quantile").counts
            assert counts.sum() == len(c) and counts.max() - counts.min() <= 1
            assert counts.tolist() == [len(a) for a in np.array_split(np.arange(len(c)), m)]


def test_quantile_tie_rule_group_mean_outcome():
    # four samples at confidence 0.7, two correct, two bins of two: each bin has accuracy 1/2, whatever the
    # row order (splitting by outcome would give 0 and 1, i.e. ECE 0.5 instead of 0.2)
    p = np.tile([0.7, 0.3], (4, 1))
    for y in ([0, 1, 0, 1], [0, 0, 1, 1], [1, 1, 0, 0]):
        rel = metrics.reliability(p, np.array(y), n_bins=2, binning="quantile")
        assert rel.accuracy.tolist() == [0.5, 0.5] and rel.counts.tolist() == [2, 2]
        assert metrics.adaptive_ece(p, np.array(y), n_bins=2) == pytest.approx(0.2, rel=1e-14)
        assert rel.edges.tolist() == [0.0, 0.7, 1.0]  # the tied value is itself the edge
    # a tie straddling a cut between distinct values: 0.6 (wrong), 0.8 x3 (2 right), 0.9 (right); 2 bins 3+2
    p = np.array([[0.6, 0.4], [0.8, 0.2], [0.8, 0.2], [0.8, 0.2], [0.9, 0.1]])
    y = np.array([1, 0, 1, 0, 0])
    rel = metrics.reliability(p, y, n_bins=2, binning="quantile")
    assert rel.accuracy == pytest.approx([(0 + 2 / 3 + 2 / 3) / 3, (2 / 3 + 1) / 2], rel=1e-14)


def test_ks_tie_rule():
    # two samples at the same confidence, one correct: order does not matter, partial sum taken after both
    p = np.array([[0.8, 0.2], [0.8, 0.2]])
    for y in ([0, 1], [1, 0]):
        assert metrics.ks_error(p, np.array(y)) == pytest.approx(abs(0.5 - 0.8), rel=1e-14)


def test_threaded_top_label_pass_agrees(monkeypatch):
    p, y = random_data(0, 3001, 6, "onehot")
    want = (metrics.ece(p, y), metrics.accuracy(p, y), metrics.brier(p, y))
    monkeypatch.setattr(_validate, "_THREAD_MIN_ELEMENTS", 1)
    monkeypatch.setattr(_validate, "_BLOCK_ELEMENTS", 6 * 100)
    assert (metrics.ece(p, y), metrics.accuracy(p, y), metrics.brier(p, y)) == want


def test_fast_check_accepts_what_as_scores_accepts():
    p = np.array([[0.5, 0.5, -0.0], [0.2, 0.8, 0.0]])  # -0.0 has its sign bit set
    y = np.array([1, 1])
    assert metrics.accuracy(p, y) == 0.5  # row 0: first maximum is class 0
    assert metrics.ece(p, y, n_bins=4) == pytest.approx(ref_ece(p, y, 4, "uniform", "l1", "bin"), rel=1e-14)


@pytest.mark.parametrize("n", [1, 2, 50])
def test_inputs_are_not_modified(n):
    p, y = random_data(n, n, 4, "onehot")
    p[0] = [1.0, 0.0, 0.0, -0.0]
    p_before, y_before = p.copy(), y.copy()
    for binning in BINNINGS:
        metrics.ece(p, y, binning=binning, estimator="label")
        metrics.classwise_ece(p, y, binning=binning)
        metrics.reliability(p, y, binning=binning)
    for fn in (metrics.brier, metrics.ks_error, metrics.aurc, metrics.accuracy):
        fn(p, y)
    assert np.array_equal(p, p_before) and np.array_equal(np.signbit(p), np.signbit(p_before))
    assert np.array_equal(y, y_before)


def test_torch_and_float32_input():
    torch = pytest.importorskip("torch")
    p, y = random_data(0, 100, 5)
    want = metrics.ece(p, y)
    assert metrics.ece(torch.tensor(p), torch.tensor(y)) == want
    p32 = p.astype(np.float32)
    assert metrics.ece(torch.tensor(p32), torch.tensor(y)) == metrics.ece(p32.astype(np.float64), y)
    assert isinstance(metrics.nll(torch.tensor(p), torch.tensor(y)), float)


# ------------------------------------------------------------------------------------------------------
# properties
# ------------------------------------------------------------------------------------------------------

@st.composite
def prob_data(draw, max_n=30, max_k=5, ties=None):
    n = draw(st.integers(1, max_n))
    k = draw(st.integers(2, max_k))
    tied = draw(st.booleans()) if ties is None else ties
    elements = st.sampled_from([0.0, 1.0, 2.0]) if tied else st.floats(-6, 6)
    logits = draw(arrays(np.float64, (n, k), elements=elements))
    labels = draw(arrays(np.int64, (n,), elements=st.integers(0, k - 1)))
    return softmax(logits), labels


PROPERTY = settings(max_examples=60, deadline=None)


@PROPERTY
@given(prob_data(), st.integers(1, 12), st.sampled_from(BINNINGS), st.sampled_from(ESTIMATORS))
def test_range_and_norm_ordering(data, m, binning, estimator):
    p, y = data
    values = [metrics.ece(p, y, n_bins=m, binning=binning, norm=nm, estimator=estimator) for nm in NORMS]
    assert all(0 <= v <= 1 for v in values)
    assert values[0] <= values[1] + 1e-12 and values[1] <= values[2] + 1e-12  # l1 <= l2 <= max
    cw = [metrics.classwise_ece(p, y, n_bins=m, binning=binning, norm=nm) for nm in NORMS]
    assert all(0 <= v <= 1 for v in cw)
    assert cw[0] <= cw[1] + 1e-12 and cw[1] <= cw[2] + 1e-12
    assert 0 <= metrics.ks_error(p, y) <= 1 and 0 <= metrics.aurc(p, y) <= 1


@PROPERTY
@given(prob_data(), st.integers(1, 12), st.sampled_from(BINNINGS), st.sampled_from(NORMS))
def test_label_binned_is_at_least_bin(data, m, binning, norm):
    p, y = data  # Karandikar et al. (2021): ECE_lb >= ECE_bin (Jensen in each bin)
    lb = metrics.ece(p, y, n_bins=m, binning=binning, norm=norm, estimator="label")
    assert lb >= metrics.ece(p, y, n_bins=m, binning=binning, norm=norm) - 1e-12


@PROPERTY
@given(prob_data(), st.integers(1, 12), st.sampled_from(BINNINGS), st.randoms(use_true_random=False))
def test_invariant_to_row_order(data, m, binning, rnd):
    p, y = data
    perm = list(range(len(y)))
    rnd.shuffle(perm)
    q, z = p[perm], y[perm]
    for norm in NORMS:
        for est in ESTIMATORS:
            assert metrics.ece(q, z, n_bins=m, binning=binning, norm=norm, estimator=est) == pytest.approx(
                metrics.ece(p, y, n_bins=m, binning=binning, norm=norm, estimator=est), rel=1e-12, abs=1e-15)
        assert metrics.classwise_ece(q, z, n_bins=m, binning=binning, norm=norm) == pytest.approx(
            metrics.classwise_ece(p, y, n_bins=m, binning=binning, norm=norm), rel=1e-12, abs=1e-15)
    for fn in (metrics.ks_error, metrics.aurc, metrics.brier, metrics.accuracy):
        assert fn(q, z) == pytest.approx(fn(p, y), rel=1e-12, abs=1e-15)


def off_edges(q, m):
    return bool(np.all(np.abs(q[:, None] - np.arange(m + 1)[None, :] / m) > 1e-9))


# Two classes, p = (q, 1 - q). Column 1 is the mirror of column 0 (p_1 = 1 - p_0, outcome 1 - outcome), so,
# when no probability is on a bin edge, equal-width bin b of column 0 and bin M-1-b of column 1 hold the same
# samples with opposite gaps: both columns have the same error and classwise_ece is the error of column 0.
# The top-label confidence is max(q, 1 - q):
# (a) if q > 1/2 in every row, the top label is column 0, so top-label ECE == classwise ECE for every norm and
#     any M (and for equal-mass bins when N is a multiple of M, so that the parts of column 1 mirror those of
#     column 0 exactly);
# (b) in general, with an even M (1/2 is an edge, so each top-label bin b >= M/2 merges bin b of column 0
#     with its mirror), D_b - D_b' against |D_b| + |D_b'| gives top-label <= classwise for l1, Titu's lemma
#     (x + y)^2/(a + b) <= x^2/a + y^2/b gives it for l2, and the mediant inequality for max. With an odd M
#     the middle bin straddles 1/2 and no order is guaranteed.

@PROPERTY
@given(arrays(np.float64, st.integers(1, 40), elements=st.floats(0.5, 1.0, exclude_min=True)),
       st.integers(1, 15), st.data())
def test_two_classes_equal_when_class_0_is_always_on_top(q, m, data):
    assume(off_edges(q, m))
    y = data.draw(arrays(np.int64, q.shape, elements=st.integers(0, 1)))
    p = np.column_stack([q, 1 - q])
    for norm in NORMS:
        assert metrics.classwise_ece(p, y, n_bins=m, norm=norm) == pytest.approx(
            metrics.ece(p, y, n_bins=m, norm=norm), rel=1e-10, abs=1e-14)


@PROPERTY
@given(st.integers(1, 6), st.integers(1, 5), st.data())
def test_two_classes_equal_mass_equal_when_n_is_a_multiple(m, parts, data):
    n = m * parts
    q = data.draw(arrays(np.float64, n, elements=st.floats(0.5, 1.0, exclude_min=True), unique=True))
    y = data.draw(arrays(np.int64, n, elements=st.integers(0, 1)))
    p = np.column_stack([q, 1 - q])
    for norm in NORMS:
        assert metrics.classwise_ece(p, y, n_bins=m, binning="quantile", norm=norm) == pytest.approx(
            metrics.ece(p, y, n_bins=m, binning="quantile", norm=norm), rel=1e-10, abs=1e-14)


@PROPERTY
@given(arrays(np.float64, st.integers(1, 40), elements=st.floats(0.0, 1.0)), st.sampled_from([2, 4, 6, 10, 14]),
       st.data())
def test_two_classes_top_label_at_most_classwise_for_even_m(q, m, data):
    assume(off_edges(q, m))
    y = data.draw(arrays(np.int64, q.shape, elements=st.integers(0, 1)))
    p = np.column_stack([q, 1 - q])
    for norm in NORMS:
        assert metrics.ece(p, y, n_bins=m, norm=norm) <= metrics.classwise_ece(p, y, n_bins=m, norm=norm) + 1e-12


# ------------------------------------------------------------------------------------------------------
# bad input: every public metric raises a ValueError that names the argument
# ------------------------------------------------------------------------------------------------------

PUBLIC = {
    "ece": metrics.ece, "adaptive_ece": metrics.adaptive_ece, "mce": metrics.mce,
    "classwise_ece": metrics.classwise_ece, "nll": metrics.nll, "brier": metrics.brier,
    "accuracy": metrics.accuracy, "ks_error": metrics.ks_error, "aurc": metrics.aurc,
    "reliability": metrics.reliability,
}
BINNED = ["ece", "adaptive_ece", "mce", "classwise_ece", "reliability"]

GOOD_P = np.array([[0.7, 0.2, 0.1], [0.1, 0.1, 0.8], [0.3, 0.4, 0.3], [0.5, 0.25, 0.25]])
GOOD_Y = np.array([0, 2, 1, 1])


def with_entry(value, at=(2, 1)):
    p = GOOD_P.copy()
    p[at] = value
    return p


BAD_ARRAYS = [
    ("nan", with_entry(np.nan), GOOD_Y, r"probs contains NaN or infinity"),
    ("nan-first", with_entry(np.nan, (0, 0)), GOOD_Y, r"probs contains NaN or infinity"),
    ("inf", with_entry(np.inf), GOOD_Y, r"probs contains NaN or infinity"),
    ("-inf", with_entry(-np.inf), GOOD_Y, r"probs contains NaN or infinity"),
    ("inf-inf", np.array([[np.inf, -np.inf, 0.5]] * 4), GOOD_Y, r"probs contains NaN or infinity"),
    ("huge", np.array([[1e308, 1e308, 0.5]] * 4), GOOD_Y, r"probs has values outside \[0, 1\]"),
    ("3-D", GOOD_P[None], GOOD_Y, r"probs must be 2-D"),
    ("1-D", GOOD_P[:, 0], GOOD_Y, r"probs must be 2-D.*1-D"),
    ("one column", GOOD_P[:, :1], np.zeros(4, int), r"probs has 1 column"),
    ("logits", np.log(GOOD_P) * 3, GOOD_Y, r"probs has values outside \[0, 1\].*softmax"),
    ("negative", with_entry(-0.1, (1, 0)), GOOD_Y, r"probs has values outside \[0, 1\].*softmax"),
    ("row sum", GOOD_P * 0.9, GOOD_Y, r"rows of probs must sum to 1.*softmax"),
    ("strings", np.array([["a", "b"], ["c", "d"]]), np.array([0, 1]), r"probs has dtype"),
    ("none", None, GOOD_Y, r"probs is None"),
    ("empty", np.zeros((0, 3)), np.zeros(0, int), r"probs is empty"),
    ("label range", GOOD_P, np.array([0, 3, 1, 1]), r"labels must lie in \[0, 3\)"),
    ("negative label", GOOD_P, np.array([0, -1, 1, 1]), r"labels must lie in"),
    ("float labels", GOOD_P, GOOD_Y.astype(float), r"labels has dtype float64.*astype\(int\)"),
    ("float labels 2", GOOD_P, GOOD_Y + 0.5, r"labels has dtype float64"),
    ("bool labels", GOOD_P, GOOD_Y > 0, r"labels has dtype bool"),
    ("length", GOOD_P, GOOD_Y[:3], r"labels has 3 entries but there are 4"),
    ("one-hot labels", GOOD_P, np.eye(3)[GOOD_Y].astype(int), r"labels has shape \(4, 3\), which looks one-hot"),
]


@pytest.mark.parametrize("name", list(PUBLIC))
@pytest.mark.parametrize("case", BAD_ARRAYS, ids=[c[0] for c in BAD_ARRAYS])
@pytest.mark.filterwarnings("error")  # the ValueError comes alone, without a RuntimeWarning before it
def test_bad_arrays(name, case):
    _, probs, labels, message = case
    with pytest.raises(ValueError, match=message):
        PUBLIC[name](probs, labels)


@pytest.mark.parametrize("name", BINNED)
@pytest.mark.parametrize("n_bins", [0, -3, 1.5, "15", True, None])
def test_bad_n_bins(name, n_bins):
    with pytest.raises(ValueError, match=r"n_bins must be an integer >= 1"):
        PUBLIC[name](GOOD_P, GOOD_Y, n_bins=n_bins)


@pytest.mark.parametrize("name,arg", [("ece", "binning"), ("ece", "norm"), ("ece", "estimator"),
                                      ("classwise_ece", "binning"), ("classwise_ece", "norm"),
                                      ("reliability", "binning")])
def test_bad_choices(name, arg):
    with pytest.raises(ValueError, match=rf"{arg}='nope' is not supported; choose one of"):
        PUBLIC[name](GOOD_P, GOOD_Y, **{arg: "nope"})


def test_unknown_keyword_for_fixed_metrics():
    with pytest.raises(TypeError):
        metrics.adaptive_ece(GOOD_P, GOOD_Y, binning="uniform")


@pytest.mark.parametrize("confidence,message", [
    (np.ones(3), r"confidence has 3 entries but there are 4 rows in probs"),
    (np.ones(5), r"confidence has 5 entries"),
    (np.zeros(0), r"confidence has 0 entries"),
    (np.ones((4, 1)), r"confidence must be 1-D"),
    (np.array([1.0, np.nan, 0.0, 2.0]), r"confidence contains NaN or infinity"),
    (np.array([1.0, np.inf, 0.0, 2.0]), r"confidence contains NaN or infinity"),
    (np.array(["a", "b", "c", "d"]), r"confidence has dtype"),
])
def test_bad_aurc_confidence(confidence, message):
    with pytest.raises(ValueError, match=message):
        metrics.aurc(GOOD_P, GOOD_Y, confidence=confidence)


def test_nll_zero_probability_on_the_true_class():
    p = np.array([[1.0, 0.0], [0.5, 0.5]])
    with pytest.raises(ValueError, match=r"probs gives probability 0 to the true class of 1 sample.*row 0.*float64"):
        metrics.nll(p, np.array([1, 0]))
    assert metrics.nll(p, np.array([0, 0])) == pytest.approx(math.log(2) / 2, rel=1e-15)


def test_adaptive_ece_torrvision_reproduces_the_official_code_by_hand():
    # N = 4, M = 2: np.interp edges at positions 0, 2, 4 are (c0, c2, c3); bins (c0, c2] and (c2, c3];
    # the least confident sample is in no bin, and the weights are divided by N = 4.
    from calib.metrics import adaptive_ece_torrvision

    conf = np.array([0.55, 0.6, 0.7, 0.9])
    probs = np.column_stack([conf, 1 - conf])
    labels = np.array([0, 1, 0, 0])          # correct, wrong, correct, correct
    value, counts = adaptive_ece_torrvision(probs, labels, n_bins=2, return_counts=True)
    expected = 2 / 4 * abs((0.6 + 0.7) / 2 - 0.5) + 1 / 4 * abs(0.9 - 1.0)
    assert counts.tolist() == [2, 1]
    assert value == pytest.approx(expected, abs=1e-15)
    assert adaptive_ece_torrvision(probs, labels, n_bins=2) == pytest.approx(expected, abs=1e-15)
    with pytest.raises(ValueError, match="n_bins"):
        adaptive_ece_torrvision(probs, labels, n_bins=0)


def random_probs(seed, n, k, scale=2.0):
    rng = np.random.default_rng(seed)
    p = softmax(rng.normal(size=(n, k)) * scale, axis=1)
    return p, rng.integers(0, k, n)


def ref_csf(row, kind):
    row = list(row)
    s = sorted(row, reverse=True)
    if kind == "msp":
        return s[0]
    if kind == "margin":
        return s[0] - s[1]
    if kind == "negative_entropy":
        return sum(v * math.log(v) for v in row if v > 0)
    return sum(v * v for v in row) - 1


def ref_curve(score, loss):
    """Sorted-risk definition: sort by score, highest first (distinct scores), selective risk at each i."""
    order = sorted(range(len(score)), key=lambda i: -score[i])
    risks, total = [], 0.0
    for i, j in enumerate(order, start=1):
        total += loss[j]
        risks.append(total / i)
    return np.array(risks)


@pytest.mark.parametrize("kind", metrics.CSFS)
@pytest.mark.parametrize("k", [2, 3, 10])
def test_confidence_score_matches_loop_and_stays_in_range(kind, k):
    p, _ = random_probs(k, 200, k)
    p[:5] = np.eye(k)[np.arange(5) % k]  # one-hot rows: 0 log 0 = 0, margin 1
    p[5] = 1.0 / k                        # uniform row: the bottom of every range
    got = metrics.confidence_score(p, kind)
    want = np.array([ref_csf(row, kind) for row in p])
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-15)
    lo, hi = metrics.confidence_range(kind, k)
    assert np.all(got >= lo - 1e-12) and np.all(got <= hi + 1e-12)
    assert got[5] == pytest.approx(lo, abs=1e-12) and got[0] == pytest.approx(hi, abs=1e-12)


def test_negative_entropy_is_on_probabilities_not_logits():
    """App. Table 1 prints sum z log z on the logits: NaN for a negative logit (Zhou et al. 2025, App. Table 1)."""
    z = np.array([[2.0, -1.0, 0.5]])
    with np.errstate(invalid="ignore"):
        printed = np.sum(z * np.log(z))
    assert np.isnan(printed)
    assert metrics.confidence_score(softmax(z, axis=1), "negative_entropy")[0] == pytest.approx(-0.6216, abs=1e-4)


def test_confidence_score_rejects_bad_input():
    p, _ = random_probs(0, 10, 3)
    with pytest.raises(ValueError, match="kind"):
        metrics.confidence_score(p, "energy")
    with pytest.raises(ValueError, match="rows of probs must sum to 1"):
        metrics.confidence_score(p * 0.5, "msp")


def test_risk_coverage_curve_matches_sorted_definition_with_any_loss_and_csf():
    for seed in range(5):
        p, y = random_probs(seed, 300, 4)
        rng = np.random.default_rng(seed)
        loss = rng.exponential(size=300)
        for csf in metrics.CSFS:
            score = metrics.confidence_score(p, csf)
            rc = metrics.risk_coverage_curve(p, y, confidence=csf, loss=loss)
            np.testing.assert_allclose(rc.risk, ref_curve(score.tolist(), loss.tolist()), rtol=1e-12)
            np.testing.assert_allclose(rc.coverage, np.arange(1, 301) / 300)
            np.testing.assert_allclose(rc.threshold, np.sort(score)[::-1])
            assert metrics.aurc(p, y, confidence=csf, loss=loss) == pytest.approx(rc.risk.mean(), rel=1e-13)
            assert metrics.aurc(p, y, confidence=score, loss=loss) == pytest.approx(rc.risk.mean(), rel=1e-13)


def test_aurc_harmonic_weight_identity():
    """(1/n) sum_i (1/i) sum_{j<=i} l_(j) = (1/n) sum_i l_i (H_n - H_{r_i - 1}) (Zhou et al. 2025, Sec. 2.3)."""
    for seed in range(5):
        p, y = random_probs(seed, 1000, 5)
        loss = np.random.default_rng(seed).random(1000)
        rc = metrics.risk_coverage_curve(p, y, loss=loss)
        conf = p.max(axis=1)
        rank = np.empty(1000, dtype=int)
        rank[np.argsort(-conf)] = np.arange(1, 1001)
        harmonic = np.concatenate([[0.0], np.cumsum(1.0 / np.arange(1, 1001))])
        weights = harmonic[1000] - harmonic[rank - 1]
        np.testing.assert_allclose(rc.weights, weights, rtol=1e-12)
        assert rc.weights.mean() == pytest.approx(1.0, rel=1e-13)
        assert np.mean(weights * loss) == pytest.approx(metrics.aurc(p, y, loss=loss), rel=1e-12)


def test_aurc_weights_with_ties_give_the_tie_averaged_aurc():
    rng = np.random.default_rng(3)
    p, y = random_probs(3, 120, 3)
    score = rng.integers(0, 6, 120).astype(float)  # many ties
    loss = rng.random(120)
    rc = metrics.risk_coverage_curve(p, y, confidence=score, loss=loss)
    assert np.mean(rc.weights * loss) == pytest.approx(rc.risk.mean(), rel=1e-12)
    for value in np.unique(score):  # tied samples share one weight
        assert np.ptp(rc.weights[score == value]) < 1e-12
    perm = rng.permutation(120)
    assert metrics.aurc(p[perm], y[perm], confidence=score[perm], loss=loss[perm]) == pytest.approx(
        rc.risk.mean(), rel=1e-12)


def test_risk_coverage_rejects_bad_input():
    p, y = random_probs(0, 10, 3)
    with pytest.raises(ValueError, match="loss has 9 entries"):
        metrics.risk_coverage_curve(p, y, loss=np.ones(9))
    with pytest.raises(ValueError, match="confidence"):
        metrics.aurc(p, y, confidence="energy")
    with pytest.raises(ValueError, match="NaN"):
        metrics.aurc(p, y, loss=np.full(10, np.nan))


def test_classwise_ece_rho_matches_l1_l2_and_a_loop():
    p, y = random_probs(0, 400, 4)
    for binning in ("uniform", "quantile"):
        assert metrics.classwise_ece(p, y, binning=binning, norm=1) == pytest.approx(
            metrics.classwise_ece(p, y, binning=binning, norm="l1"), rel=1e-12)
        assert metrics.classwise_ece(p, y, binning=binning, norm=2.0) == pytest.approx(
            metrics.classwise_ece(p, y, binning=binning, norm="l2"), rel=1e-12)
    rho, m = 1.5, 10
    total = 0.0
    for c in range(4):
        col, hit = p[:, c], (y == c)
        idx = np.clip(np.ceil(col * m).astype(int) - 1, 0, m - 1)
        for b in range(m):
            sel = idx == b
            if sel.any():
                total += sel.sum() / 400 * abs(hit[sel].mean() - col[sel].mean()) ** rho
    want = (total / 4) ** (1 / rho)
    assert metrics.classwise_ece(p, y, n_bins=m, norm=rho) == pytest.approx(want, rel=1e-9)


@pytest.mark.parametrize("bad", [0.5, -1, float("nan"), True, "l3"])
def test_classwise_ece_rejects_bad_rho(bad):
    p, y = random_probs(0, 10, 3)
    with pytest.raises(ValueError, match="norm"):
        metrics.classwise_ece(p, y, norm=bad)


def test_equal_mass_ece_rows_is_adaptive_ece_of_each_row():
    rng = np.random.default_rng(11)
    n, g = 997, 6
    correct = rng.random(n) < 0.7
    conf = rng.uniform(0.5, 1.0, size=(g, n))           # >= 1/2: the top label of (c, 1 - c) is class 0
    conf[1] = np.round(conf[1], 2)                     # ties across the bin cuts
    conf[2] = 1.0                                      # one confidence for every sample
    rows = metrics.equal_mass_ece_rows(conf, correct, n_bins=15)
    for i in range(g):
        # a two-class prediction with top-label confidence conf[i] that is right where correct is
        p = np.stack([conf[i], 1 - conf[i]], axis=1)
        labels = np.where(correct, 0, 1)
        assert rows[i] == pytest.approx(metrics.adaptive_ece(p, labels, n_bins=15), abs=1e-15), i
    with pytest.raises(ValueError, match="correct"):
        metrics.equal_mass_ece_rows(conf, correct[:-1])
    with pytest.raises(ValueError, match="conf"):
        metrics.equal_mass_ece_rows(conf[0], correct)


@pytest.mark.parametrize("n_bins", [1, 7, 15, 40])
def test_equal_width_ece_rows_is_top_label_ece_of_each_row_bit_for_bit(n_bins, monkeypatch):
    """One bincount for all rows gives each row's top_label_ece to the bit: confidences exactly on the edges i / M,
    0 and 1, ties, rows with empty bins in different places (the sum over the full bins groups its terms as the
    one-row sum does), outcomes per row or shared, and rows split over blocks (BLOCK_ELEMENTS shrunk)."""
    rng = np.random.default_rng(n_bins)
    g, n = 23, 301
    conf = rng.uniform(size=(g, n)) ** rng.uniform(0.05, 3.0, size=(g, 1))   # rows from flat to crowded near 1
    on_edge = rng.random((g, n)) < 0.25
    conf[on_edge] = rng.integers(0, n_bins + 1, size=int(on_edge.sum())) / n_bins
    conf[3] = np.round(conf[3], 1)                       # ties
    conf[4] = 1.0
    conf[5, :150] = 0.0
    correct = rng.random((g, n)) < 0.7
    shared = correct[0]
    for block in (metrics._binning.BLOCK_ELEMENTS, 2 * n + 5, 1):
        monkeypatch.setattr(metrics._binning, "BLOCK_ELEMENTS", block)
        rows = metrics.equal_width_ece_rows(conf, correct, n_bins=n_bins)
        assert np.array_equal(rows, [metrics.top_label_ece(conf[i], correct[i], n_bins) for i in range(g)])
        rows = metrics.equal_width_ece_rows(conf, shared, n_bins=n_bins)
        assert np.array_equal(rows, [metrics.top_label_ece(conf[i], shared, n_bins) for i in range(g)])
    with pytest.raises(ValueError, match="^correct must have shape"):
        metrics.equal_width_ece_rows(conf, shared[:-1])
    with pytest.raises(ValueError, match="^conf"):
        metrics.equal_width_ece_rows(conf[0], shared)
    with pytest.raises(ValueError, match="^conf must be a non-empty"):
        metrics.equal_width_ece_rows(conf + 1.0, correct)
    with pytest.raises(ValueError, match="n_bins"):
        metrics.equal_width_ece_rows(conf, correct, n_bins=0)


def test_one_rule_for_the_number_of_threads(monkeypatch):
    monkeypatch.setattr(_validate.os, "sched_getaffinity", lambda pid: set(range(64)), raising=False)
    assert _validate.n_threads(10) == 1                        # small work: no threads
    assert _validate.n_threads(1 << 30) == 8                   # capped
    assert _validate.n_threads(1 << 30, cap=4) == 4
    assert _validate.n_threads(1 << 20, min_work=1 << 20) == 8


# ----------------------------------------------------------------------------------------------------------
# the registry (issue 31, item 1), precision (issue 24, item 24), input dtype (issue 30, item 5)
# ----------------------------------------------------------------------------------------------------------

def test_every_registered_metric_scores_and_is_listed():
    import torch

    from calib.experiments import METRICS, score_probabilities

    rng = np.random.default_rng(40)
    p = rng.dirichlet(np.ones(5), size=300)
    y = rng.integers(0, 5, 300)
    assert METRICS == metrics.metric_names() == tuple(s.name for s in metrics.REGISTRY)
    scores = score_probabilities(p, y)
    assert tuple(scores) == METRICS
    assert scores["ece"] == metrics.ece(p, y) and scores["adaece"] == metrics.adaptive_ece(p, y)
    assert scores["ece_em_l2"] == metrics.ece(p, y, binning="quantile", norm="l2")
    assert scores["mean_confidence"] == p.max(axis=1).mean()
    for spec in metrics.REGISTRY:
        assert spec(torch.tensor(p), torch.tensor(y)) == scores[spec.name] == metrics.get_metric(spec.name)(p, y)
        assert f"``{spec.name}``" in metrics.get_metric.__doc__ and spec.summary
    log_p = np.log(p)
    assert score_probabilities(p, y, log_probs=log_p)["nll"] == pytest.approx(metrics.nll(p, y), rel=1e-14)
    with pytest.raises(ValueError, match="unknown metric 'auroc'; choose from accuracy, ece"):
        metrics.get_metric("auroc")


def test_a_scalar_metric_missing_from_the_registry_fails_loudly():
    """Every public (probs, labels) -> float function of calib.metrics is registered, or listed here with why."""
    import inspect

    not_registered = {"adaptive_ece_torrvision": "a transcription of torrvision's AdaECE, for comparison only"}
    scalar = {name for name in metrics.__all__ if inspect.isfunction(getattr(metrics, name))
              and list(inspect.signature(getattr(metrics, name)).parameters)[:2] == ["probs", "labels"]
              and inspect.signature(getattr(metrics, name)).return_annotation in ("float", float)}
    registered = " ".join(inspect.getsource(spec.compute) for spec in metrics.REGISTRY)
    missing = {name for name in scalar - set(not_registered) if f"{name}(" not in registered}
    assert missing == set(), f"register these in calib.metrics.REGISTRY: {missing}"


@pytest.mark.parametrize("half", ["float16", "bfloat16"])
def test_half_precision_probabilities_name_precision_as_the_cause(half):
    """Issue 24, item 24: float16/bf16 softmax rows miss 1 by ~1e-3, and the message said only 'must sum to 1'."""
    import torch

    logits = torch.tensor(np.random.default_rng(41).normal(size=(200, 100)) * 2)
    probs = torch.softmax(logits.to(getattr(torch, half)), dim=1)
    y = torch.randint(0, 100, (200,))
    with pytest.raises(ValueError, match=rf"probs is {half}: half precision .* float32 or float64"):
        metrics.ece(probs, y)
    with pytest.raises(ValueError, match="half precision"):
        metrics.nll(probs, y)
    if half == "float16":
        with pytest.raises(ValueError, match="probs is float16: half precision"):
            metrics.ece(probs.numpy(), y.numpy())
    assert metrics.ece(probs.float() / probs.float().sum(1, keepdim=True), y) >= 0   # the fix works


def test_float32_probabilities_are_not_copied_to_float64_and_give_the_same_values():
    """Issue 30, item 5: the top-label metrics check and bin float32 input in float32 (tracemalloc sees numpy's
    allocations), with results identical to the float64 copy's."""
    import tracemalloc

    rng = np.random.default_rng(42)
    p = rng.dirichlet(np.ones(100) * 0.1, size=20_000).astype(np.float32)
    y = rng.integers(0, 100, 20_000)
    p64 = p.astype(np.float64)
    p_nonzero = (p + np.float32(1e-4)) / np.float32(1.01)  # the NLL refuses a zero on the true class
    # (name, metric, float32 probabilities, peak allocation allowed in input sizes: a float64 copy alone is 2)
    every = [(f.__name__, f, p, 0.5) for f in (metrics.ece, metrics.adaptive_ece, metrics.mce, metrics.ks_error,
                                                metrics.accuracy, metrics.aurc, metrics.brier, metrics.classwise_ece,
                                                metrics.mean_confidence)]
    every += [("nll", metrics.nll, p_nonzero, 0.5),
              # equal-mass class-wise bins sort a float64 block of classes (4 * BLOCK_ELEMENTS values) at a time
              ("classwise quantile", functools.partial(metrics.classwise_ece, binning="quantile", norm="l2"), p, 1.0)]
    for name, f, p32, allowed in every:
        assert f(p32, y) == f(p32.astype(np.float64), y), name
        tracemalloc.start()
        f(p32, y)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert peak < allowed * p32.nbytes, (name, peak / p32.nbytes)
    assert metrics.aurc(p, y, confidence="margin") == metrics.aurc(p64, y, confidence="margin")
    for kind in metrics.CSFS:
        assert np.array_equal(metrics.confidence_score(p, kind), metrics.confidence_score(p64, kind)), kind


@pytest.mark.parametrize("dtype,k", [(np.float32, 3), (np.float32, 100), (np.float32, 5000), (np.float64, 100)])
def test_row_sum_check_in_the_input_dtype_decides_as_the_float64_sum(dtype, k):
    """Issue 30, item 5: the row sums are taken in the input's dtype, with a bound on their rounding; rows near
    the tolerance are summed again in float64, so a row is accepted exactly when its float64 sum (as_scores)
    is within ROW_SUM_ATOL of 1, including rows a float32 sum would misjudge."""
    rng = np.random.default_rng(44)
    rows = []
    for target in (1 - 2e-4, 1 - 1e-4 - 1e-7, 1 - 1e-4 + 1e-7, 1 - 9.5e-5, 1, 1 + 9.5e-5, 1 + 1e-4 - 1e-7,
                   1 + 1e-4 + 1e-7, 1 + 2e-4):
        for _ in range(20):
            row = rng.dirichlet(np.ones(k)).astype(dtype)
            row[row.argmax()] += dtype(target) - row.sum(dtype=np.float64)  # the sum lands near the target
            rows.append(row)
    decided = 0
    for row in rows:
        probs = np.vstack([np.full(k, 1 / k, dtype=dtype), row])
        sum64 = row.sum(dtype=np.float64)
        want_ok = abs(sum64 - 1) <= _validate.ROW_SUM_ATOL
        try:
            metrics.accuracy(probs, np.array([0, 0]))
            ok = True
        except ValueError as exc:
            assert "must sum to 1" in str(exc)
            ok = False
        assert ok == want_ok, (sum64 - 1, float(row.sum(dtype=dtype)) - 1)
        decided += 1
    assert decided == len(rows)


def test_top_label_ece_is_ece_of_the_top_label():
    rng = np.random.default_rng(43)
    p = rng.dirichlet(np.ones(4), size=500)
    y = rng.integers(0, 4, 500)
    for binning in ("uniform", "quantile"):
        assert metrics.top_label_ece(p.max(1), p.argmax(1) == y, binning=binning) == metrics.ece(p, y, binning=binning)
    with pytest.raises(ValueError, match="conf must be"):
        metrics.top_label_ece([1.5], [True])


def test_per_sample_statistics_give_the_metrics_exactly():
    """Issue 30: what a metric reads of each sample (chapter 11's bootstrap resamples these): the top-label
    confidence and outcome give the ECE, AdaECE, MCE and error; the log-probability of the label gives the NLL; the
    same checks as the metrics, float32 kept without a float64 copy of the probabilities."""
    import torch

    rng = np.random.default_rng(3)
    labels = rng.integers(0, 5, 400)
    probs = softmax(rng.normal(size=(400, 5)) * 2 + 2 * np.eye(5)[labels], axis=1)
    probs[0], labels[0] = [0.4, 0.4, 0.1, 0.05, 0.05], 1     # a tie: the first maximum (class 0), as np.argmax
    for p in (probs, probs.astype(np.float32), torch.as_tensor(probs)):
        s = metrics.top_label_outcomes(p, labels)
        assert s.dtype == np.float64 and s.shape == (400, 2) and set(np.unique(s[:, 1])) <= {0.0, 1.0}
        assert s[0, 1] == 0.0 and s[0, 0] == pytest.approx(0.4)            # class 1 would have been right
        conf, correct = s[:, 0], s[:, 1] > 0
        assert metrics.ece(p, labels) == metrics.top_label_ece(conf, correct)
        assert metrics.adaptive_ece(p, labels) == metrics.top_label_ece(conf, correct, binning="quantile")
        assert metrics.mce(p, labels) == metrics.top_label_ece(conf, correct, norm="max")
        assert 1.0 - metrics.accuracy(p, labels) == pytest.approx(1.0 - correct.mean(), abs=1e-15)
        log_p = metrics.label_log_probability(p, labels)
        assert log_p.dtype == np.float64 and log_p.shape == (400,) and -log_p.mean() == metrics.nll(p, labels)
    zero = probs.copy()
    zero[7] = np.eye(5)[(labels[7] + 1) % 5]
    with pytest.raises(ValueError, match="probability 0 to the true class of 1 sample"):
        metrics.label_log_probability(zero, labels)
    with pytest.raises(ValueError, match="labels"):
        metrics.top_label_outcomes(probs, labels[:-1])


def test_the_equal_width_ece_statistic_columns_are_the_one_hot_products_bit_for_bit():
    """outcome_statistic's ECE columns are written in place: the same bits (signed zeros too) as the one-hot bin
    matrix times the confidences and times the outcomes, side by side, with confidences 0 and 1 on the edges."""
    from calib.metrics._binning import uniform_bin, uniform_edges

    rng = np.random.default_rng(12)
    conf = np.concatenate([[0.0, 1.0, 1 / 15, 2 / 15], rng.uniform(0, 1, 200)])
    correct = rng.random(conf.size) < 0.6
    onehot = np.zeros((conf.size, 15))
    onehot[np.arange(conf.size), uniform_bin(conf, 15, uniform_edges(15))] = 1.0
    expected = np.hstack([onehot * conf[:, None], onehot * correct.astype(np.float64)[:, None]])
    got = metrics.outcome_statistic(conf, correct, "ece", 15).columns
    assert np.array_equal(got.view(np.int64), expected.view(np.int64))


def test_the_top_label_outcomes_give_the_statistics_of_the_probabilities():
    """A store that keeps only each sample's top-label confidence and outcome (calib.experiments.TestOutcomes)
    gives every top-label metric with the test set's noise exactly as the probabilities do: the same value and the
    same values on the same resamples; a metric that needs more, or outcomes of two lengths, is refused."""
    from calib.stats.test_set import bootstrap_counts

    rng = np.random.default_rng(11)
    labels = rng.integers(0, 6, 300)
    probs = softmax(rng.normal(size=(300, 6)) * 2 + 2 * np.eye(6)[labels], axis=1)
    conf, correct = probs.max(axis=1), probs.argmax(axis=1) == labels
    counts = bootstrap_counts(300, 50, seed=5)
    for metric in metrics.TOP_LABEL_METRICS:
        a, b = metrics.statistic(probs, labels, metric, n_bins=7), metrics.outcome_statistic(conf, correct, metric, 7)
        assert a.value == b.value, metric
        np.testing.assert_array_equal(a.resampled(counts), b.resampled(counts), err_msg=metric)
    assert metrics.outcome_statistic(conf, correct, "ece").value == metrics.ece(probs, labels)
    with pytest.raises(ValueError, match="needs more than the top-label outcomes"):
        metrics.outcome_statistic(conf, correct, "nll")
    with pytest.raises(ValueError, match="correct"):
        metrics.outcome_statistic(conf, correct[:-1], "ece")
    with pytest.raises(ValueError, match="in \\[0, 1\\]"):
        metrics.outcome_statistic(conf + 1.0, correct, "ece")


def test_top_label_bins_are_the_bins_of_ece():
    """Issue 43, item 6: calib.simulate read ece's bins through a private name (``metrics._bin_top_label``); they are
    public now, ``top_label_bins``, and must be those of ece and reliability: the same counts and mean confidences,
    with confidences on the float edges i / M, at 0 and 1, and tied across an equal-mass cut."""
    rng = np.random.default_rng(8)
    labels = rng.integers(0, 4, 203)
    probs = softmax(rng.normal(size=(203, 4)) * 2, axis=1)
    probs[:7] = [0.7, 0.1, 0.1, 0.1]                               # a tie that straddles an equal-mass cut
    probs[7:10] = [[0.25] * 4, [1.0, 0, 0, 0], [0.4, 0.2, 0.2, 0.2]]  # 1/4, 1 and 2/5: edges of M = 4 and 5
    conf = probs.max(1)
    for n_bins, binning in itertools.product((1, 4, 5, 15, 300), ("uniform", "quantile")):
        bins = metrics.top_label_bins(conf, n_bins, binning)
        r = metrics.reliability(probs, labels, n_bins, binning)
        counts = np.bincount(bins, minlength=n_bins)
        assert bins.dtype == np.int64 and bins.shape == (203,) and counts.tolist() == r.counts.tolist()
        full = counts > 0
        mean_conf = np.bincount(bins, weights=conf, minlength=n_bins)[full] / counts[full]
        np.testing.assert_allclose(mean_conf, r.confidence[full], rtol=1e-14)
        if binning == "uniform":
            assert bins.tolist() == [ref_uniform_bin(c, n_bins) for c in conf]
        else:                                                       # by position in the sorted confidences
            assert np.all(np.diff(bins[np.argsort(conf, kind="stable")]) >= 0)
    assert metrics.top_label_bins(conf, 5).tolist()[7:10] == [1, 4, 1]   # 1/4 in (1/5, 2/5], 1 and 2/5 on edges
    with pytest.raises(ValueError, match="conf must be a non-empty 1-D array of confidences in"):
        metrics.top_label_bins([0.5, 1.2])
    with pytest.raises(ValueError, match="binning"):
        metrics.top_label_bins(conf, 5, "equal")


def test_outcome_statistic_names_the_column_that_is_wrong():
    """A top-label statistic from confidences and outcomes refuses a 2-D confidence and outcomes of another length,
    naming each."""
    with pytest.raises(ValueError, match=r"^confidence must be 1-D; got shape \(2, 2\)"):
        metrics.outcome_statistic(np.full((2, 2), 0.5), np.array([1, 0]))
    with pytest.raises(ValueError, match="^correct has 2 entries but there are 3 confidences"):
        metrics.outcome_statistic(np.array([0.5, 0.6, 0.7]), np.array([1, 0]))


def test_the_nll_from_log_probabilities_refuses_nan_and_plus_infinity_and_keeps_minus_infinity():
    """The registry's NLL from log-probabilities read them with finite=False (a probability 0 is log 0 = -inf) and so
    let a NaN through: the NLL was nan without a word. NaN and +inf are refused, naming log_probs and the first
    index; -inf off the label leaves the NLL finite, on the label makes it infinite, as the NLL of the probabilities."""
    nll = metrics.get_metric("nll").from_log_probs
    y = np.array([0, 1, 2, 0])
    z = np.log(np.full((4, 3), 1 / 3))
    assert nll(z, y) == pytest.approx(np.log(3), rel=1e-15)
    for bad in (np.nan, np.inf):
        zb = z.copy()
        zb[2, 1] = bad
        with pytest.raises(ValueError, match=r"log_probs contains NaN or \+infinity \(first at index \(2, 1\)\)"):
            nll(zb, y)
    off = np.log(np.array([[0.5, 0.5, 0.0]] * 4))
    assert nll(off, np.array([0, 1, 0, 1])) == pytest.approx(np.log(2), rel=1e-15)
    assert nll(off, np.array([0, 1, 2, 1])) == np.inf


# --------------------------------------------------------------- mutation sample C: behaviour the sample found untested

def test_outcomes_of_the_wrong_length_are_refused_saying_what_they_should_match():
    """A ``correct`` that does not match the confidences is refused naming it and what it is counted against: the
    confidences of top_label_ece, the columns of conf (one outcome per sample) of equal_mass_ece_rows."""
    with pytest.raises(ValueError, match=r"^correct has 2 entries but there are 3 confidences"):
        metrics.top_label_ece([0.5, 0.6, 0.7], [True, False])
    with pytest.raises(ValueError, match=r"^correct has 2 entries but there are 3 columns of conf"):
        metrics.equal_mass_ece_rows(np.full((4, 3), 0.5), np.array([True, False]))


def test_top_label_bins_of_a_single_confidence_and_refusal_of_none():
    """One confidence is binned (0.3 lies in (4/15, 5/15], bin 4 of 15; alone it fills equal-mass bin 0); an empty
    array is refused."""
    assert metrics.top_label_bins([0.3]).tolist() == [4]
    assert metrics.top_label_bins([0.3], 3, "quantile").tolist() == [0]
    with pytest.raises(ValueError, match=r"^conf must be a non-empty 1-D array"):
        metrics.top_label_bins(np.zeros(0))


def test_a_bad_loss_of_the_risk_coverage_curve_is_named_loss():
    p, y = random_probs(0, 10, 3)
    with pytest.raises(ValueError, match=r"^loss contains NaN or infinity \(first at index 2\)"):
        metrics.aurc(p, y, loss=np.array([0.0, 1.0, np.nan] + [0.0] * 7))
    with pytest.raises(ValueError, match=r"^loss must be 1-D; got shape \(10, 1\)"):
        metrics.risk_coverage_curve(p, y, loss=np.ones((10, 1)))
