"""calib.symbolic: every residual simplifies to 0, every limit and solution is the closed form, and the
expressions agree numerically with calib.focal."""

from __future__ import annotations

import math

import numpy as np
import pytest
import sympy as sp

from calib import focal
from calib import symbolic
from calib import symbolic as S
from calib.focal import effective_inverse_temperature, focal_map


def test_prop1_ratio_is_g():
    d = S.prop1()
    assert d["residual"] == 0 and d["eq6_residual"] == 0
    assert d["dL_c"] == -1 / S.p
    f = sp.lambdify((S.p, S.gamma), d["ratio"], "numpy")
    p = np.linspace(0.01, 0.99, 99)
    np.testing.assert_allclose(f(p, 2.7), focal.gradient_factor(p, 2.7), rtol=1e-12)


def test_shape_of_g():
    d = S.shape_of_g()
    for key in ("eq8_residual", "k_residual", "dk_residual", "tangent_gap_at_1"):
        assert d[key] == 0, key
    assert d["k_at_0"] == 1
    assert sp.simplify(d["k_at_1"] + S.gamma + 1) == 0
    assert d["g_at_0"] == 1 and d["g_at_1"] == 0 and d["dg_at_0"] == sp.oo
    assert sp.simplify(d["tangent_gap_dp"] - (S.p - 1) / S.p ** 2) == 0
    # numerically: Eq. 8 equals focal.gradient_factor_dp and k decreases (dk/dp <= -gamma)
    p = np.linspace(0.01, 0.99, 99)
    eq8 = sp.lambdify((S.p, S.gamma), d["eq8"], "numpy")
    dk = sp.lambdify((S.p, S.gamma), d["dk"], "numpy")
    for gam in (0.5, 1.0, 3.0):
        np.testing.assert_allclose(eq8(p, gam), focal.gradient_factor_dp(p, gam), rtol=1e-10)
        assert np.all(dk(p, gam) <= -gam)


def test_eq8_limits_at_one_depend_on_gamma():
    # App. C says gamma (1-p)^(gamma-2) = 0 at p = 1: true only for gamma > 2
    assert S.eq8_prefactor_limit_at_one(1) == sp.oo
    assert S.eq8_prefactor_limit_at_one(2) == 2
    assert S.eq8_prefactor_limit_at_one(3) == 0
    assert [S.eq8_limit_at_one(g) for g in (0.5, 1, 3)] == [-sp.oo, -2, 0]


def test_gamma_one_closed_forms():
    d = S.gamma_one()
    assert d["thresholds"] == sp.FiniteSet(sp.exp(-1))
    assert d["argmax"] == sp.FiniteSet(sp.exp(-2))
    assert sp.simplify(d["max"] - 1 - sp.exp(-2)) == 0


def test_prop2_derivation():
    d = S.prop2()
    for key in ("ab_residual", "substitution_residual", "w0_residual", "gamma_at_w0"):
        assert d[key] == 0, key
    assert d["w0_at_half"] == -1
    assert sp.simplify(d["z_at_half"] + sp.exp(-1)) == 0
    a, b = sp.Symbol("a", positive=True), sp.Symbol("b", negative=True)
    sub = {a: 1 - S.p0, b: S.p0 * sp.log(S.p0)}
    star = sp.lambdify(S.p0, d["gamma_star"].subs(sub), "mpmath")
    assert float(sp.re(star(0.2))) == pytest.approx(focal.gamma_star(0.2), rel=1e-12)
    w0 = sp.lambdify(S.p0, d["gamma_w0"].subs(sub), "mpmath")
    assert abs(float(sp.re(w0(0.3)))) < 1e-12
    assert sp.simplify(d["d2log_g"] + b ** 2 / (a - S.gamma * b) ** 2) == 0          # concave in gamma
    assert sp.simplify(d["dlog_g_at_0"] - (sp.log(a) - b / a)) == 0
    # the sign of dg/dgamma at gamma = 0 changes exactly at p0 = 1/2
    slope = sp.lambdify(S.p0, d["dg_dgamma_at_0"], "numpy")
    assert slope(0.3) > 0 > slope(0.7) and abs(slope(0.5)) < 1e-15


def test_eq11_chain_is_a_chain_of_equivalences():
    d = S.prop2()
    a, b = sp.Symbol("a", positive=True), sp.Symbol("b", negative=True)
    for p0v in (0.1, 0.3, 0.45):
        gs = focal.gamma_star(p0v)
        for gv in (0.5 * gs, 0.9 * gs, 1.1 * gs, 3 * gs):
            sub = {S.p0: p0v, a: 1 - p0v, b: p0v * math.log(p0v), S.gamma: gv}
            truth = [bool(rel.subs(sub)) for rel in d["eq11"]]
            assert truth == [gv > gs] * len(truth), (p0v, gv, truth)


def test_gamma_star_at_inverse_e():
    d = S.gamma_star_at_inverse_e()
    assert d["w1_residual"] == 0 and d["gamma"] == 1 and d["gamma_w0"] == 0
    assert d["w1_value"] < -1 < d["w0_value"]


def test_entropy_bound_pieces():
    d = S.entropy_bound()
    assert d["B_at_0"] == 0 and d["dB_residual"] == 0 and d["D_at_0"] == 0 and d["lemma_symmetry"] == 0
    assert sp.simplify(d["d2D"] + (1 - S.p) ** S.gamma * sp.log(S.p) * sp.log(1 - S.p) ** 2) == 0
    p = np.linspace(1e-6, 1 - 1e-6, 20001)
    B = sp.lambdify((S.p, S.gamma), d["bernoulli_gap"], "numpy")
    assert np.all(B(p, 1.5) >= -1e-15) and np.all(B(p, 0.5) <= 1e-15)  # Bernoulli, and its reversal
    lemma = sp.lambdify(S.p, d["lemma"], "numpy")
    assert np.all(lemma(p) >= 0)
    half = p[p <= 0.5]
    assert np.all(sp.lambdify(S.p, d["lemma_step1"], "numpy")(half) <= 1e-15)
    assert np.all(sp.lambdify(S.p, d["lemma_step2"], "numpy")(half) >= 0)
    D = sp.lambdify((S.p, S.gamma), d["D"], "numpy")
    for gam in (0.05, 0.3, 0.7, 1.0, 4.0):
        assert np.all(D(p, gam) >= -1e-15)


def test_focal_optimum_stationarity():
    d = S.focal_optimum()
    assert d["d_risk_residual"] == 0 and d["q_of_x_residual"] == 0 and d["d_risk_one_hot_residual"] == 0
    q_of_x = sp.lambdify((S.x, S.gamma), d["q_of_x_form"], "numpy")
    x = np.linspace(0.05, 0.95, 19)
    rows = focal.focal_prediction_target(np.column_stack([1 - x, x]), 3.0)
    np.testing.assert_allclose(q_of_x(x, 3.0), rows[:, 1], rtol=1e-12)


def test_derivation_equations():
    d = S.prop1()
    eqs = d.equations("L_f", "g")
    assert all(isinstance(e, sp.Equality) for e in eqs) and eqs[0].rhs == d["L_f"]
    assert len(d.equations()) == len(d)
    with pytest.raises(KeyError, match="nope"):
        d.equations("nope")
    with pytest.raises(TypeError, match="display"):
        S.prop2().equations("eq11")


def test_symbolic_prop1():
    d = symbolic.focal_convexity()
    for key in ["d1_residual", "d2_residual", "quadratic_residual", "a1_residual", "a1_bracket_at_1"]:
        assert d[key] == 0, key
    assert sp.simplify(d["d2_gamma_one"] - (symbolic.p + 1) / symbolic.p ** 2) == 0
    assert sp.simplify(d["a1_bracket_dp"] - (sp.log(symbolic.p) - 1)) == 0
    # numerically positive on a grid (C2)
    f = sp.lambdify((symbolic.p, symbolic.gamma), d["d2"], "numpy")
    p = np.linspace(1e-6, 1 - 1e-6, 2001)
    for g in [0.0, 0.3, 1, 2.5, 7, 20]:
        assert np.all(f(p, g) > 0)


def test_symbolic_prop2_and_prop4():
    d = symbolic.binary_focal_decomposition()
    for key in ["p_of_q_residual", "paper_residual", "g_residual", "dl1_g"]:
        assert d[key] == 0, key
    assert d["p_hat_gamma_zero"] == symbolic.q and d["p_hat_at_half"] == sp.Rational(1, 2)
    m = symbolic.multiclass_focal_decomposition()
    for key in ["dL_residual", "g_residual", "binary_residual"]:
        assert m[key] == 0, key
    # the sympy map agrees with focal_map numerically
    f = sp.lambdify((symbolic.q, symbolic.gamma), d["p_hat"], "numpy")
    q = np.linspace(0.01, 0.99, 99)
    np.testing.assert_allclose(f(q, 2.0), focal_map(np.log(np.column_stack([q, 1 - q])), 2.0)[:, 0], rtol=1e-12)


def test_symbolic_fc_on_logits_and_prop3_algebra():
    d = symbolic.focal_calibration_on_logits()
    g = symbolic.gamma
    assert d["FC_paper_residual"] == 0 and d["FC_f_residual"] == 0 and d["symmetry"] == 0
    assert d["f_at_0"] == 1 and sp.simplify(d["f_at_plus_inf"] - (g + 1)) == 0
    assert sp.simplify(d["f_at_minus_inf"] - 1 / (g + 1)) == 0
    beta0 = sp.lambdify(g, d["beta_at_0"], "numpy")
    np.testing.assert_allclose(beta0(np.array([0.5, 3.0])), effective_inverse_temperature(0.0, [0.5, 3.0]), rtol=1e-14)
    a = symbolic.ts_bound_proof_algebra()
    assert sp.simplify(a["paper_slip"] + g) == 0
    assert float(a["discriminant"]) == pytest.approx(0.22026, abs=1e-5)
    assert float(a["discriminant_paper"]) == pytest.approx(-0.00715, abs=1e-5)
    assert sorted(float(r) for r in a["roots"]) == pytest.approx([-13.8515, -1.8467], abs=1e-4)
    assert a["identity"] == 0 and float(a["identity_paper"].subs(symbolic.s, 1)) != 0


def test_symbolic_prop5_derivative():
    d = symbolic.prop5_proof_derivative()
    assert d["df_residual"] == 0 and d["ratio_residual"] == 0
    assert float(d["sign_slip"]) != 0 and d["f_sign"] == -1


def test_symbolic_derivations():
    import sympy

    from calib import symbolic

    d = symbolic.soft_binning()
    for key in ("log_odds_residual", "du_residual", "dsbece_residual", "hard_limit"):
        assert d[key] == 0, key
    t = symbolic.soft_uncertainty()
    assert t["identity_residual"] == 0 and t["dt_residual"] == 0 and t["at_kappa"] == sympy.Rational(1, 2)
    assert (t["limit_0"], t["limit_1"], t["step_above"], t["step_below"]) == (0, 1, 1, 0)
    assert symbolic.avuc_identity()["residual"] == 0


def _derivations():
    """Every derivation calib.symbolic offers the chapters: the functions of its __all__ that return one."""
    for name in symbolic.__all__:
        obj = getattr(symbolic, name)
        if callable(obj) and not isinstance(obj, type) and name[0].islower() and not name.endswith("_expr"):
            try:
                d = obj()
            except TypeError:                       # needs arguments: not a derivation
                continue
            if isinstance(d, symbolic.Derivation):
                yield name, d


def test_every_displayed_label_prints_as_written():
    """sympy reads a plain symbol's name as base, subscripts and superscripts: the label \\varphi^\\gamma(v)
    printed as \\varphi^{\\gamma(v)}. Every equation a chapter displays now starts with its label verbatim, and
    no symbol inside an expression carries LaTeX in its name."""
    for label, mangled in ((r"\varphi^\gamma(v)", r"\varphi^{\gamma(v)}"),
                           (r"\log g(p_0, \gamma)", r"\log g(p_{0, \gamma)}")):
        assert sp.latex(sp.Symbol(label)) == mangled                   # the failure this prevents
        assert sp.latex(symbolic.Label(label)) == label
    derivations = list(_derivations())
    assert len(derivations) >= 15
    checked = 0
    for name, d in derivations:
        for key, value in d.items():
            steps = value if isinstance(value, list) else [value]
            for step in steps:
                for part in (step if isinstance(step, tuple) else (step,)):
                    for sym in getattr(part, "free_symbols", ()):
                        if isinstance(sym, sp.Symbol) and ("\\" in sym.name or "^" in sym.name):   # LaTeX in the name
                            assert sp.latex(sym) == sym.name, (name, key, sym.name, sp.latex(sym))
            if not isinstance(value, list):
                (eq,) = d.equations(key)
                assert sp.latex(eq).startswith(d.labels[key] + " = "), (name, key, sp.latex(eq)[:80])
                checked += 1
    assert checked > 100


def test_zhou_focal_weight_slope_is_negative_for_every_positive_gamma():
    """Zhou et al. (2025), Sec. 3.1: the focal weight (1-p)^gamma falls in p for every gamma > 0, not only
    gamma >= 1; its slope matches a central difference, and gamma = 0 (cross-entropy) leaves it flat."""
    d = symbolic.reweighted_risk()
    gamma, p, u = symbolic.gamma, symbolic.p, symbolic.u
    assert sp.simplify(d["fl_weight_slope_in_u"] + gamma * u ** (gamma - 1)) == 0
    assert d["fl_weight_slope_in_u"].is_negative
    assert d["fl_weight_slope"].subs(gamma, 0) == 0
    slope = sp.lambdify((p, gamma), d["fl_weight_slope"])
    h = 1e-6
    for g in (0.25, 0.5, 1.0, 3.0):
        for pv in (0.1, 0.5, 0.9):
            central = ((1 - pv - h) ** g - (1 - pv + h) ** g) / (2 * h)
            assert slope(pv, g) == pytest.approx(central, rel=1e-6)
            assert slope(pv, g) < 0
