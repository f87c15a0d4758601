"""calib.selective (Zhou et al. 2025): the selective-classification bounds and counterexamples against
brute-force references, closed forms and the paper's quoted numbers, and the transcription of its tables.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest
from scipy.integrate import quad
from scipy.optimize import minimize_scalar
from scipy.special import softmax

from calib import metrics, selective
from calib.simulate import random_population


def random_probs(seed, n, k, scale=2.0):
    rng = np.random.default_rng(seed)
    p = softmax(rng.normal(size=(n, k)) * scale, axis=1)
    return p, rng.integers(0, k, n)


def binned_ece_of_partition(conf, correct, parts):
    return sum(abs(np.sum(correct[idx] - conf[idx])) for idx in parts) / conf.size


PAPER_TEXT = Path("/work/shared/papers/zhou2025-reweighted-risk-aurc.txt")


def test_sup_binned_ece_is_attained_by_singletons():
    rng = np.random.default_rng(0)
    p, y = random_probs(0, 40, 3)
    conf, correct = p.max(axis=1), (p.argmax(axis=1) == y).astype(float)
    sup = selective.sup_binned_ece(p, y)
    assert sup == pytest.approx(binned_ece_of_partition(conf, correct, [[i] for i in range(40)]), rel=1e-13)
    for _ in range(200):  # random partitions of the indices never exceed it
        labels = rng.integers(0, rng.integers(1, 40), 40)
        parts = [np.flatnonzero(labels == b) for b in np.unique(labels)]
        assert binned_ece_of_partition(conf, correct, parts) <= sup + 1e-15
    assert metrics.ece(p, y, n_bins=15) <= sup + 1e-15


def test_lemma41_second_inequality_and_prop43_on_random_sets():
    rng = np.random.default_rng(0)
    for _ in range(300):
        k, n = int(rng.integers(2, 20)), int(rng.integers(5, 300))
        p, y = random_probs(int(rng.integers(1 << 30)), n, k, scale=rng.uniform(0.5, 4))
        err = np.mean(p.argmax(axis=1) != y)
        assert selective.sup_binned_ece(p, y) >= err / k - 1e-15
        assert selective.sup_binned_cwece(p, y) >= err / k - 1e-15


def test_lemma41_first_inequality_fails_for_a_calibrated_model():
    """Inventory P1: f = (0.7, 0.3) on data with P(y=0) = 0.7 is calibrated (population ECE 0), yet err/k > 0."""
    rng = np.random.default_rng(0)
    n = 100_000
    p = np.tile([0.7, 0.3], (n, 1))
    y = (rng.random(n) >= 0.7).astype(int)
    err = np.mean(y != 0)
    assert err / 2 == pytest.approx(0.15, abs=0.005)
    assert selective.sup_binned_ece(p, y) == pytest.approx(0.42, abs=0.005)
    assert metrics.ece(p, y) < 0.01 < err / 2


def test_abstain_maps_reach_the_bounds():
    rng = np.random.default_rng(0)
    for _ in range(200):
        k, n = int(rng.integers(2, 10)), int(rng.integers(5, 100))
        p, y = random_probs(int(rng.integers(1 << 30)), n, k, scale=rng.uniform(0.5, 4))
        correct = p.argmax(axis=1) == y  # a CSF that separates correct from wrong perfectly
        err = 1 - correct.mean()
        q, pred = selective.ece_abstain_map(p, correct)
        np.testing.assert_allclose(q.sum(axis=1), 1)
        np.testing.assert_array_equal(pred, p.argmax(axis=1))
        assert selective.sup_binned_ece(q, y, predictions=pred) == pytest.approx(err / k, abs=1e-14)
        assert selective.sup_binned_ece(q, y, predictions=pred) <= selective.sup_binned_ece(p, y) + 1e-14
        r = selective.cwece_abstain_map(p, correct)
        np.testing.assert_allclose(r.sum(axis=1), 1, atol=1e-14)
        assert r.min() >= 0 and np.all(r[~correct].max(axis=1) <= 0.5 + 1e-12)
        assert selective.sup_binned_cwece(r, y) <= selective.sup_binned_cwece(p, y) + 1e-14


def test_cwece_abstain_map_on_a_one_hot_wrong_row():
    r = selective.cwece_abstain_map(np.array([[1.0, 0.0, 0.0]]), np.array([False]))
    np.testing.assert_allclose(r, [[0.5, 0.25, 0.25]])


def test_prop45_corrected_hierarchy_holds_on_random_populations():
    rng = np.random.default_rng(0)
    printed_violations = 0
    for case in range(400):
        k = int(rng.integers(2, 6))
        w, f, eta = random_population(int(rng.integers(1, 6)), k, rng, n_predictions=int(rng.integers(1, 4)))
        rho = float(rng.uniform(1, 2))
        h = selective.calibration_hierarchy(w, f, eta, rho)
        assert h.holds_corrected, (case, h)
        printed_violations += h.printed_lower_fails
        h1 = selective.calibration_hierarchy(w, f, eta, 1.0)  # at rho = 1 the printed k is right
        assert h1.ce >= h1.lower_printed - 1e-12 and h1.lower_printed == pytest.approx(h1.lower_corrected)
    assert printed_violations > 300  # the printed factor k fails for almost every rho > 1


def test_prop45_counterexample():
    """k = 2, f = (0.7, 0.3), truth (0.5, 0.5), rho = 2: CE_2 = 0.2828 < k cwECE_2 = 0.4 (Zhou et al. 2025,
    Prop. 4.5)."""
    h = selective.calibration_hierarchy([1.0], [[0.7, 0.3]], [[0.5, 0.5]], 2.0)
    assert h.ce == pytest.approx(0.2 * math.sqrt(2), rel=1e-12)
    assert h.lower_printed == pytest.approx(0.4, rel=1e-12)
    assert h.lower_corrected == pytest.approx(h.ce, rel=1e-12)  # the corrected bound is tight here
    assert h.printed_lower_fails and h.holds_corrected
    with pytest.raises(ValueError, match="rho"):
        selective.calibration_hierarchy([1.0], [[0.7, 0.3]], [[0.5, 0.5]], 3.0)


@pytest.mark.parametrize("kappa", [0.2, 0.4, 0.8, 0.9])
def test_beta_population_matches_eq11_by_quadrature(kappa):
    """Eq. 11 under the conditional P_X_tau (uniform G) is -ln(1 - min(u, kappa)) / kappa: Eq. 12 times 1/kappa."""
    for u in (0.05, 0.3, kappa, 0.95):
        eq11 = quad(lambda t: (u >= t) / (1 - t), 0, kappa, points=[min(u, kappa)])[0] / kappa
        assert selective.beta_population(u, kappa) == pytest.approx(eq11, rel=1e-10)
        assert selective.beta_population(u, kappa, normalize=False) * (1 / kappa) == pytest.approx(eq11, rel=1e-10)
    mean12 = quad(lambda u: selective.beta_population(u, kappa, normalize=False), 0, 1, points=[kappa])[0]
    assert mean12 == pytest.approx(kappa, rel=1e-10)


def test_smoothed_cdf_matches_eq15_and_its_complement():
    rng = np.random.default_rng(0)
    s = rng.beta(6, 1, 128)
    at = np.linspace(-0.1, 1.1, 50)
    for k, nu in [(15, 0.1), (10, 0.01), (50, 1.0)]:
        g, upper = selective.smoothed_cdf(s, at, n_bins=k, nu=nu)
        edges = np.linspace(0, 1, k + 1)
        h = np.histogram(s, edges)[0] / 128  # np.histogram closes the last bin, as Eq. 14 here
        c = (edges[:-1] + edges[1:]) / 2
        want = np.array([np.sum(h / (1 + np.exp(-(x - c) / nu))) for x in at])
        np.testing.assert_allclose(g, want, rtol=1e-12, atol=1e-300)
        np.testing.assert_allclose(g + upper, 1.0, rtol=1e-13)


def test_smoothed_cdf_coarse_at_paper_nu():
    """Inventory A2: n = 128 Beta(6, 1) scores, K = 15: sup error about 0.22 at nu = 0.1 (max G about 0.77)."""
    s = np.random.default_rng(0).beta(6, 1, 128)
    grid = np.linspace(0, 1, 2001)
    emp = np.searchsorted(np.sort(s), grid, side="right") / 128
    g01, _ = selective.smoothed_cdf(s, grid, n_bins=15, nu=0.1)
    g001, _ = selective.smoothed_cdf(s, grid, n_bins=15, nu=0.01)
    g0001, _ = selective.smoothed_cdf(s, grid, n_bins=15, nu=0.001)
    assert 0.18 < np.max(np.abs(g01 - emp)) < 0.28 and g01.max() < 0.8
    assert np.max(np.abs(g001 - emp)) < 0.1 < np.max(np.abs(g0001 - emp))  # smaller nu is not always better


def test_inverse_focal_dp_matches_finite_differences_and_the_printed_sign_is_wrong():
    p = np.linspace(0.01, 0.99, 99)
    for gamma in (0.5, 2.0, 5.0):
        loss = lambda q: -(1 + q) ** gamma * np.log(q)  # noqa: E731
        fd = (loss(p + 1e-6) - loss(p - 1e-6)) / 2e-6
        np.testing.assert_allclose(selective.inverse_focal_dp(p, gamma), fd, rtol=1e-6)
        np.testing.assert_allclose(selective.inverse_focal_dp(p, gamma) - selective.inverse_focal_dp_printed(p, gamma),
                                   -2 * gamma * (1 + p) ** (gamma - 1) * np.log(p), rtol=1e-12)
    assert selective.inverse_focal_dp_printed(np.linspace(1e-4, 1, 10001), 5).max() == pytest.approx(-29.06, abs=0.01)
    assert selective.inverse_focal_dp(1.0, 3.0) == pytest.approx(-8.0)


def test_inverse_focal_threshold_and_intervals():
    gamma_star, p_star = selective.inverse_focal_gamma_threshold()
    assert gamma_star == pytest.approx(3.5911214767, abs=1e-9) and p_star == pytest.approx(0.2784645428, abs=1e-9)
    res = minimize_scalar(lambda q: (1 + q) / (-q * np.log(q)), bounds=(1e-6, 1 - 1e-6), method="bounded",
                          options={"xatol": 1e-12})
    assert res.fun == pytest.approx(gamma_star, rel=1e-10) and res.x == pytest.approx(p_star, abs=1e-5)
    lo, hi = selective.inverse_focal_positive_interval([3.5, 3.59, 3.6, 4.0, 5.0])
    assert np.isnan(lo[:2]).all() and np.isnan(hi[:2]).all()
    np.testing.assert_allclose(lo[2:], [0.2568, 0.1546, 0.0911], atol=1e-4)
    np.testing.assert_allclose(hi[2:], [0.3011, 0.4428, 0.5799], atol=1e-4)
    for g, a, b in zip([3.6, 4.0, 5.0], lo[2:], hi[2:]):
        inside = np.linspace(a, b, 101)[1:-1]
        assert np.all(selective.inverse_focal_dp(inside, g) > 0)
        assert selective.inverse_focal_dp(a * 0.999, g) < 0 < selective.inverse_focal_dp(a * 1.001, g)
    assert np.all(selective.inverse_focal_dp(np.linspace(1e-4, 1, 20001), 3.59) < 0)


def test_dual_focal_weight_readings():
    p, y = np.array([[0.5, 0.3, 0.2]]), np.array([1])
    ce = -np.log(0.3)
    assert selective.dual_focal_weight(p, y, 3, "official")[0] * ce == pytest.approx(0.8777, abs=1e-4)
    assert selective.dual_focal_weight(p, y, 3, "printed")[0] * ce == pytest.approx(0.4130, abs=1e-4)
    rng = np.random.default_rng(0)
    for _ in range(50):
        k = int(rng.integers(2, 6))
        q = rng.dirichlet(np.ones(k), size=30)
        lab = rng.integers(0, k, 30)
        off, comp, pr = (selective.dual_focal_weight(q, lab, 2.0, v) for v in selective.DUAL_FOCAL_VARIANTS)
        p_y = q[np.arange(30), lab]
        smallest = p_y == q.min(axis=1)
        np.testing.assert_allclose(off[smallest], pr[smallest], rtol=1e-13)  # agree where p_y is the minimum
        top = p_y == q.max(axis=1)
        np.testing.assert_allclose(off[top], comp[top], rtol=1e-13)  # and Eq. 24 where p_y is the maximum
        if k == 2:
            np.testing.assert_allclose(off, pr, rtol=1e-13)


def test_properness_toy_detached_weights_keep_the_posterior():
    torch = pytest.importorskip("torch")
    torch.set_num_threads(1)
    res = selective.properness_toy(n=200, steps=200, detach=True, seed=0)
    assert res.mean_abs_gap < 1e-6 and res.flipped == 0
    moved = selective.properness_toy(n=200, steps=200, detach=False, seed=0)
    assert moved.mean_abs_gap > 0.01 and moved.end_low > moved.start_low


def test_paper_tables_transcription():
    t = selective.paper_tables()
    m = {name: j for j, name in enumerate(selective.TABLE_METHODS)}
    r = {name: i for i, name in enumerate(selective.TABLE_ROWS)}
    assert t["ece"][r["CIFAR-10/PreResNet56"], m["AU"]] == 0.88
    assert t["acc"][r["CIFAR-100/ResNet50"], m["XE"]] == 74.37
    assert t["cwece_ts"][r["Tiny-ImageNet/Swin-Tiny"], m["FL-53"]] == 0.197
    assert t["T"][r["CIFAR-10/PreResNet56"], m["FL-53"]] == 0.9
    assert t["metaacc_acc"][r["CIFAR-100/WRN"], m["AU"]] == 34.6
    np.testing.assert_array_equal(t["T"], t["ecea_T"])  # the temperatures agree cell for cell
    best = np.argmin(t["ece"], axis=1)
    assert np.sum(best == m["AU"]) == 7 and np.sum(best == m["Dual"]) == 3
    assert np.sum(t["ecea_ts"][:, m["Dual"]] < t["ecea"][:, m["Dual"]]) == 0
    assert np.max(t["gamma_ifl"]) == 3.0
    with pytest.raises(ValueError):
        t["ece"][0, 0] = 1.0


def test_module_exports_exist():
    for name in selective.__all__:
        assert hasattr(selective, name), name


def test_gaussian_mixture_posterior_is_bayes_rule():
    from calib.data import gaussian_mixture_means, make_gaussian_mixture

    means = gaussian_mixture_means(4, 3, spread=0.8, seed=5)
    assert means.shape == (4, 3)
    np.testing.assert_array_equal(means, gaussian_mixture_means(4, 3, spread=0.8, seed=5))
    x, y, eta = make_gaussian_mixture(500, means, scale=1.3, priors=[0.1, 0.2, 0.3, 0.4], seed=1)
    assert x.dtype == np.float32 and x.shape == (500, 3) and y.dtype == np.int64
    dens = np.array([[0.1, 0.2, 0.3, 0.4][k] * np.exp(-np.sum((xi.astype(float) - means[k]) ** 2) / (2 * 1.3 ** 2))
                     for xi in x for k in range(4)]).reshape(500, 4)
    np.testing.assert_allclose(eta, dens / dens.sum(axis=1, keepdims=True), rtol=1e-10)
    with pytest.raises(ValueError, match="priors"):
        make_gaussian_mixture(10, means, priors=[0.5, 0.5])
    with pytest.raises(ValueError, match="means"):
        make_gaussian_mixture(10, means[:1])


def test_set_partitions_are_counted_by_the_bell_numbers():
    bell = [1, 1, 2, 5, 15, 52, 203]
    for n, b in enumerate(bell):
        parts = list(selective._set_partitions(list(range(n))))
        assert len(parts) == b
        # each is a partition: every index exactly once
        for part in parts:
            assert sorted(i for block in part for i in block) == list(range(n))


def test_brute_force_suprema_equal_the_singleton_values():
    rng = np.random.default_rng(3)
    for _ in range(25):
        n, k = int(rng.integers(1, 7)), int(rng.integers(2, 5))
        p = softmax(rng.normal(size=(n, k)) * 3, axis=1)
        y = rng.integers(0, k, n)
        sup_ece, sup_cw = selective.sup_binned_brute_force(p, y)
        assert sup_ece == pytest.approx(selective.sup_binned_ece(p, y), abs=1e-12)
        assert sup_cw == pytest.approx(selective.sup_binned_cwece(p, y), abs=1e-12)


def test_brute_force_by_hand():
    # two samples, k = 2: one correct at confidence 0.6, one wrong at confidence 0.7.
    p = np.array([[0.6, 0.4], [0.7, 0.3]])
    y = np.array([0, 1])
    sup_ece, sup_cw = selective.sup_binned_brute_force(p, y)
    # singletons: (|1 - 0.6| + |0 - 0.7|) / 2 = 0.55; one bin: |1 - 1.3| / 2 = 0.15
    assert sup_ece == pytest.approx(0.55)
    # class-wise singletons: (1/2) * [(|1-0.6| + |0-0.7|) + (|0-0.4| + |1-0.3|)] / 2 = 0.55
    assert sup_cw == pytest.approx(0.55)


def test_brute_force_refuses_large_n():
    with pytest.raises(ValueError, match="Bell"):
        selective.sup_binned_brute_force(np.full((9, 2), 0.5), np.zeros(9, dtype=int))


def test_paper_tables_are_the_numbers_once_transcribed_in_selective():
    """Issue 31, item 3: the tables were held twice, as strings in selective.py and in zhou2025.csv. They are now
    read from the CSV by calib.published; the digest is that of the 1,020 numbers of the old strings."""
    import hashlib

    from calib import published

    t = selective.paper_tables()
    digest = hashlib.sha256()
    for key in sorted(t):
        digest.update(key.encode())
        digest.update(np.ascontiguousarray(t[key], dtype=np.float64).tobytes())
    assert digest.hexdigest() == "c087a7a13a79f7b278a847f6be541646813874a3570df12f5e21c2bfb4e9aa5f"
    assert sum(v.size for v in t.values()) == 1020
    assert selective.TABLE_ROWS is published.ZHOU2025_ROWS and selective.TABLE_METHODS is published.ZHOU2025_METHODS
    source = Path(selective.__file__).read_text(encoding="utf-8")
    assert "94.51 93.58" not in source and "_TABLE1" not in source


def test_a_damaged_zhou_csv_is_named(tmp_path):
    from calib import published

    folder = tmp_path / "book" / "data" / "published"
    folder.mkdir(parents=True)
    lines = (published.published_dir() / "zhou2025.csv").read_text(encoding="utf-8").splitlines(keepends=True)
    # the last App. Table 4 accuracy cell (rows of other tables, such as Fig. 3's labels, may follow it)
    last = max(i for i, line in enumerate(lines) if ",App. Table 4," in line and ",Accuracy,MetaAcc," in line)
    (folder / "zhou2025.csv").write_text("".join(lines[:last] + lines[last + 1:]), encoding="utf-8")
    with pytest.raises(ValueError, match=r"zhou2025\.csv: metaacc_acc lacks 1 cell"):
        published.zhou2025_tables(tmp_path)
    (folder / "zhou2025.csv").write_text("".join(lines + lines[last:last + 1]), encoding="utf-8")
    with pytest.raises(ValueError, match="given twice"):
        published.zhou2025_tables(tmp_path)


@pytest.mark.skipif(not PAPER_TEXT.is_file(), reason="the paper's text is not available here")
def test_tables_occur_in_the_paper_in_order():
    """Each printed line of Tables 1, 2 and App. Table 4, rebuilt from the CSV, occurs in the paper's text in
    order; so do App. Tables 2 and 3."""
    from calib.published import read_published

    text = re.sub(r"\s+", " ", PAPER_TEXT.read_text(encoding="utf-8"))
    lines: dict[tuple, list[str]] = {}
    for r in read_published("zhou2025"):
        key = (r["table"], r["dataset"], r["model"], r["stage"], r["method"] if r["table"] == "App. Table 2" else "")
        cells = lines.setdefault(key, [])
        t = f" ({r['temperature']:.1f})" if r["temperature"] is not None else ""
        if r["table"] == "App. Table 4" and r["metric"] == "Accuracy":
            cells[-1] = cells[-1].replace(" (", f" [{r['value_text']}] (", 1) if "(" in cells[-1] else \
                f"{cells[-1]} [{r['value_text']}]"
        else:
            cells.append(r["value_text"] + t)
    printed: dict[str, list[str]] = {}
    for (table, dataset, model, stage, method), cells in lines.items():
        if table in ("App. Table 2", "App. Table 3"):
            printed.setdefault(f"{table} {method}", []).extend(cells)
        else:
            printed.setdefault(table, []).append(" ".join(cells))
    for table in ("Table 1", "Table 2", "App. Table 4"):
        position = 0
        for line in printed[table]:
            found = text.find(line, position)
            assert found >= 0, f"{table}: {line!r} not found after position {position}"
            position = found + len(line)
    for key in ("App. Table 2 Dual", "App. Table 2 Inv. FL", "App. Table 3 "):
        assert " ".join(printed[key]) in text, key


def test_temperature_scaling_counts_from_app_table4():
    t = selective.paper_tables()
    col = {m: j for j, m in enumerate(selective.TABLE_METHODS)}
    better = (t["ecea_ts"] < t["ecea"]).sum(axis=0)
    assert better[col["XE"]] == 9
    assert better[col["Dual"]] == 0
    tin = [selective.TABLE_ROWS.index("Tiny-ImageNet/ViT-Small"), selective.TABLE_ROWS.index("Tiny-ImageNet/Swin-Tiny")]
    assert int((t["ecea_ts"][tin] > t["ecea"][tin]).sum()) == 12
    # TS preserves accuracy: App. Table 4 prints the same accuracy before and after
    assert np.array_equal(t["ecea_ts_acc"], t["ecea_acc"])


def test_minus_log_one_minus_G_is_the_large_n_limit_of_the_weights():
    """Inventory C7: the population weight -ln(1 - G) approximates the exact AURC (within 0.3 % at n = 1000)."""
    p, y = random_probs(0, 1000, 5)
    loss = np.random.default_rng(1).random(1000)
    rc = metrics.risk_coverage_curve(p, y, loss=loss)
    rank_desc = np.empty(1000, dtype=int)
    rank_desc[np.argsort(-p.max(axis=1))] = np.arange(1, 1001)
    g = 1 - (rank_desc - 0.5) / 1000  # mid-rank CDF
    approx = np.mean(-np.log(1 - g) * loss)
    assert abs(approx / rc.risk.mean() - 1) < 3e-3


def test_sup_binned_cwece_formula():
    p, y = random_probs(1, 50, 4)
    onehot = np.eye(4)[y]
    assert selective.sup_binned_cwece(p, y) == pytest.approx(np.abs(onehot - p).sum() / (50 * 4), rel=1e-13)
    assert metrics.classwise_ece(p, y, n_bins=15) <= selective.sup_binned_cwece(p, y) + 1e-15
