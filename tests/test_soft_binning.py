"""calib.soft_binning: soft bin membership, SB-ECE and soft uncertainty in numpy against loops and closed forms
(Karandikar et al. 2021, Secs. 4.1-4.2, App. H).
"""

from __future__ import annotations


import numpy as np
import pytest
from references import brute_membership, brute_sbece

from calib import soft_binning as sb


def test_membership_against_loop_and_closed_forms():
    rng = np.random.default_rng(0)
    c = rng.random(50)
    for t in (1e-1, 1e-2, 1e-3):
        u = sb.soft_membership(c, 15, t)
        np.testing.assert_allclose(u, [brute_membership(ci, 15, t) for ci in c], rtol=1e-12, atol=1e-300)
        np.testing.assert_allclose(u.sum(1), 1, atol=1e-14)
        # log(u_j / u_{j+1}) = 2 (j/M - c) / (M T), j = 1..M-1
        j = np.arange(1, 15)
        lhs = np.diff(-sb.log_soft_membership(c, 15, t), axis=1)
        np.testing.assert_allclose(lhs, 2 * (j / 15 - c[:, None]) / (15 * t), rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(sb.bin_centres(4), [0.125, 0.375, 0.625, 0.875])


def test_membership_never_underflows():
    u = sb.soft_membership(np.array([0.0, 2 / 15, 1.0]), 15, 1e-9)
    assert np.all(np.isfinite(u)) and np.allclose(u.sum(1), 1)
    assert u[1, 1] == pytest.approx(0.5) and u[1, 2] == pytest.approx(0.5)   # on the edge 2/15: split evenly


def test_membership_derivative_and_modes():
    c = np.linspace(0.01, 0.99, 97)
    h = 1e-7
    for t in (0.1, 0.01):
        fd = (sb.soft_membership(c + h, 15, t) - sb.soft_membership(c - h, 15, t)) / (2 * h)
        np.testing.assert_allclose(sb.membership_derivative(c, 15, t), fd, rtol=1e-5, atol=1e-6)
    xi = sb.bin_centres(15)
    for t in (0.1, 0.01, 1e-3):
        modes = sb.membership_modes(15, t)
        assert np.isnan(modes[0]) and np.isnan(modes[-1])          # edge bins are monotone on [0, 1]
        inside = ~np.isnan(modes)
        xi_bar = sb.soft_membership(modes[inside], 15, t) @ xi
        np.testing.assert_allclose(xi_bar, xi[inside], atol=1e-12)
    assert np.isnan(sb.membership_modes(15, 0.1)[:3]).all() and np.isnan(sb.membership_modes(15, 0.1)[-3:]).all()
    shifts = sb.membership_modes(15, 0.01) - xi
    assert shifts[1] == pytest.approx(-0.0150, abs=5e-5) and shifts[2] == pytest.approx(-0.001557, abs=1e-6)
    assert np.nanmax(np.abs(sb.membership_modes(15, 1e-3)[2:-2] - xi[2:-2])) < 1e-4


@pytest.mark.parametrize("norm", ["l1", "l2"])
@pytest.mark.parametrize("estimator", ["bin", "label"])
def test_numpy_sbece_against_loops(norm, estimator):
    rng = np.random.default_rng(1)
    c = rng.uniform(0.1, 1, 60)
    a = (rng.random(60) < c ** 1.5).astype(float)
    p = 1 if norm == "l1" else 2
    for t in (0.1, 0.01, 1e-3):
        ref = brute_sbece(list(c), list(a), 15, t, p, estimator)
        assert sb.soft_binned_ece(c, a, 15, t, norm, estimator) == pytest.approx(ref, rel=1e-11)


def test_sbece_limits_and_ordering():
    rng = np.random.default_rng(2)
    c = rng.uniform(0.2, 1, 1000)
    a = (rng.random(1000) < c).astype(float)
    # T -> infinity: one bin (C25)
    assert sb.soft_binned_ece(c, a, temperature=1e6) == pytest.approx(abs(a.mean() - c.mean()), rel=1e-9)
    for p, norm in ((1, "l1"), (2, "l2")):
        lb = np.mean(np.abs(a.mean() - c) ** p) ** (1 / p)
        assert sb.soft_binned_ece(c, a, temperature=1e6, norm=norm, estimator="label") == pytest.approx(lb, rel=1e-9)
    # SB-ECE_lb >= SB-ECE_bin (Jensen within each soft bin)
    for t in (1e-3, 1e-2, 1e-1):
        for norm in ("l1", "l2"):
            for s in range(5):
                cc = rng.uniform(0, 1, 100)
                aa = (rng.random(100) < rng.uniform(0, 1)).astype(float)
                assert (sb.soft_binned_ece(cc, aa, temperature=t, norm=norm, estimator="label")
                        >= sb.soft_binned_ece(cc, aa, temperature=t, norm=norm) - 1e-12)


def test_population_values_of_app_h():
    c, a, w = sb.uniform_calibrated_population(0.5, 1.0)
    assert sb.soft_binned_ece(c, a, temperature=1e-2, norm="l2", weights=w) < 1e-15
    assert sb.soft_binned_ece(c, a, temperature=1e-2, norm="l2", estimator="label", weights=w) == \
        pytest.approx(0.062553, abs=1e-6)
    assert sb.soft_binned_ece(c, a, temperature=1e-3, norm="l2", estimator="label", weights=w) == \
        pytest.approx(0.022711, abs=1e-6)
    h = 1e-4
    nll_slope = (sb.binary_tempered_nll(1 + h) - sb.binary_tempered_nll(1 - h)) / (2 * h)
    assert abs(nll_slope) < 1e-8

    def lb2(tau):
        cc, aa, ww = sb.binary_tempered_population(tau)
        return sb.soft_binned_ece(cc, aa, temperature=1e-2, norm="l2", estimator="label", weights=ww) ** 2

    assert (lb2(1 + h) - lb2(1 - h)) / (2 * h) == pytest.approx(8.77e-4, abs=1e-6)
    cc, aa, ww = sb.binary_tempered_population(1.0)
    assert np.array_equal(cc, aa) and ww.sum() == pytest.approx(1)


def test_gradient_closed_form_against_finite_differences():
    rng = np.random.default_rng(3)
    c = rng.uniform(0.3, 0.99, 40)
    a = (rng.random(40) < c).astype(float)
    g = sb.soft_binned_ece_gradient(c, a, 15, 0.02)
    h = 1e-6
    fd = np.empty_like(c)
    for i in range(len(c)):
        up, dn = c.copy(), c.copy()
        up[i] += h
        dn[i] -= h
        fd[i] = (sb.soft_binned_ece(up, a, 15, 0.02, "l2") ** 2
                 - sb.soft_binned_ece(dn, a, 15, 0.02, "l2") ** 2) / (2 * h)
    np.testing.assert_allclose(g, fd, rtol=1e-5, atol=1e-9)


def test_soft_uncertainty():
    h = np.linspace(0, 1, 101)
    np.testing.assert_allclose(sb.soft_uncertainty(h, 0.5, 1.0), h, atol=1e-15)
    assert sb.soft_uncertainty(0.3, 0.3, 0.05) == pytest.approx(0.5)
    grid = np.array([1e-9, 0.1, 0.29, 0.3, 0.31, 0.6, 1 - 1e-9])
    np.testing.assert_allclose(sb.soft_uncertainty(grid, 0.3, 1.0), [0, 0.2059, 0.4880, 0.5, 0.5118, 0.7778, 1],
                               atol=1e-4)
    np.testing.assert_allclose(sb.soft_uncertainty(grid, 0.3, 0.01), [0, 0, 0.0081, 0.5, 0.9911, 1, 1], atol=1e-4)
    x = np.linspace(0.05, 0.95, 19)
    e = 1e-7
    fd = (sb.soft_uncertainty(x + e, 0.3, 0.4) - sb.soft_uncertainty(x - e, 0.3, 0.4)) / (2 * e)
    np.testing.assert_allclose(sb.soft_uncertainty_derivative(x, 0.3, 0.4), fd, rtol=1e-6)
    assert np.all(sb.soft_uncertainty_derivative(x, 0.3, 0.4) > 0)
    assert sb.soft_uncertainty(0.0, 0.3, 2.0) == 0 and sb.soft_uncertainty(1.0, 0.3, 2.0) == 1


def test_edge_distance_and_hard_limit_temperature():
    np.testing.assert_allclose(sb.edge_distance([0.0, 1 / 15 + 0.01, 0.5, 1.0], 15),
                               [1 / 15, 0.01, 0.5 - 7 / 15, 1 / 15])
    t = sb.hard_limit_temperature(1e-3, 15, 1e-6)
    u = sb.soft_membership(np.array([2 / 15 + 1e-3]), 15, float(t))[0]
    assert u[2] / (u[1] + u[2]) == pytest.approx(1 - 1e-6, abs=1e-12)


def test_soft_binning_input_checks():
    with pytest.raises(ValueError, match="conf must lie in"):
        sb.soft_membership([0.5, 1.2])
    with pytest.raises(ValueError, match="temperature must be > 0"):
        sb.soft_membership([0.5], temperature=0)
    with pytest.raises(ValueError, match="correct has 2 entries"):
        sb.soft_binned_ece([0.5, 0.6, 0.7], [1, 0])
    with pytest.raises(ValueError, match="kappa must be in"):
        sb.soft_uncertainty([0.5], kappa=1.5)
