"""Mukhoti et al. (2020), *Calibrating Deep Neural Networks using Focal Loss*: Prop. 1, the shape of g
(App. C, Eqs. 8-10), gamma = 1, Prop. 2 and its Lambert-W branches, gamma*(1/e) = 1, the entropy bound of Eq. 4
(App. A) and the focal optimum of Eq. 5 (Fig. 6)."""

from __future__ import annotations

from functools import lru_cache

import sympy as sp

from calib.symbolic.base import (Derivation, Label, cross_entropy_expr, eta, focal_loss_expr, gamma,
                                 gradient_factor_expr, limit_at_one, p, p0, simplify_in_u, x)

__all__ = ["prop1", "shape_of_g", "eq8_prefactor_limit_at_one", "eq8_limit_at_one", "gamma_one", "prop2",
           "gamma_star_at_inverse_e", "entropy_bound", "focal_optimum"]

_a = sp.Symbol("a", positive=True)          # 1 - p0
_b = sp.Symbol("b", negative=True)          # p0 log p0
_W = sp.Symbol("W")                         # a value of Lambert W
_z = sp.Symbol("z")


# ------------------------------------------------------------------------------------------ Prop. 1

@lru_cache(maxsize=None)
def prop1() -> Derivation:
    """Prop. 1 (Eqs. 6-7): dL_f/dp = g(p, gamma) dL_c/dp, so the ratio of the derivatives is g.

    Keys: ``L_f``, ``L_c``, ``dL_f``, ``dL_c``, ``ratio`` (simplified), ``g`` (Eq. 7 as printed),
    ``residual`` (ratio - g, 0) and ``eq6_residual`` (dL_f - g dL_c, 0).
    """
    d = Derivation("Prop. 1: the focal-loss gradient factor")
    lf = d.add("L_f", focal_loss_expr(), r"\mathcal{L}_f", "focal loss of the true-class probability p")
    lc = d.add("L_c", cross_entropy_expr(), r"\mathcal{L}_c", "cross-entropy")
    dlf = d.add("dL_f", sp.diff(lf, p), r"\frac{\partial \mathcal{L}_f}{\partial p}", "derivative of focal loss")
    dlc = d.add("dL_c", sp.diff(lc, p), r"\frac{\partial \mathcal{L}_c}{\partial p}", "derivative of cross-entropy")
    ratio = sp.factor(sp.powsimp(sp.expand(dlf / dlc), force=True))
    d.add("ratio", ratio, r"\frac{\partial \mathcal{L}_f / \partial p}{\partial \mathcal{L}_c / \partial p}",
          "ratio of the two derivatives")
    g = d.add("g", gradient_factor_expr(), r"g(p, \gamma)", "Eq. 7 as printed")
    d.add("residual", simplify_in_u(ratio - g), r"\text{ratio} - g(p, \gamma)", "0: the ratio is g (Prop. 1)")
    d.add("eq6_residual", simplify_in_u(dlf - dlc * g),
          r"\frac{\partial \mathcal{L}_f}{\partial p} - g \, \frac{\partial \mathcal{L}_c}{\partial p}", "0: Eq. 6")
    return d


# ----------------------------------------------------------------------------- App. C: the shape of g

@lru_cache(maxsize=None)
def shape_of_g() -> Derivation:
    """App. C, Eqs. 8-10: dg/dp, its sign factor k(p, gamma), their limits; the limits of g.

    Keys: ``dg`` (computed), ``eq8`` (printed), ``eq8_residual`` (0), ``eq9``, ``k`` (Eq. 10),
    ``k_residual`` (Eq. 9 / (-log p) - k, 0), ``k_at_0`` (1), ``k_at_1`` (-(1 + gamma)), ``dk``,
    ``dk_form`` (-gamma - 2 (log p - 1 + 1/p) / log^2 p), ``dk_residual`` (0), ``tangent_gap``
    (log p - 1 + 1/p >= 0, the reason dk/dp < 0), ``tangent_gap_dp``, ``tangent_gap_at_1`` (0),
    ``g_at_0`` (1), ``g_at_1`` (0), ``dg_at_0`` (+oo).
    """
    d = Derivation("App. C: the shape of g")
    g = gradient_factor_expr()
    d.add("dg", sp.diff(g, p), r"\frac{\partial g}{\partial p}", "derivative of g, computed")
    eq9 = -2 * (1 - p) - (1 - p) * sp.log(p) + (gamma - 1) * p * sp.log(p)
    eq8 = d.add("eq8", gamma * (1 - p) ** (gamma - 2) * eq9, r"\text{Eq. 8}", "Eq. 8 as printed")
    d.add("eq8_residual", simplify_in_u((d["dg"] - eq8) / (1 - p) ** (gamma - 2)),
          r"\left(\frac{\partial g}{\partial p} - \text{Eq. 8}\right) / (1-p)^{\gamma-2}", "0: Eq. 8 is dg/dp")
    d.add("eq9", eq9, r"\text{Eq. 9}", "the bracket of Eq. 8, which carries its sign")
    k = d.add("k", 2 * (1 - p) / sp.log(p) + 1 - gamma * p, r"k(p, \gamma)", "Eq. 10")
    d.add("k_residual", sp.simplify(eq9 / (-sp.log(p)) - k), r"\text{Eq. 9} / (-\log p) - k",
          "0: Eq. 10 is Eq. 9 divided by -log p > 0")
    d.add("k_at_0", sp.limit(k, p, 0, "+"), r"\lim_{p \to 0^+} k", "1")
    d.add("k_at_1", limit_at_one(k), r"\lim_{p \to 1^-} k", "-(1 + gamma), by l'Hopital")
    dk = d.add("dk", sp.diff(k, p), r"\frac{\partial k}{\partial p}", "")
    dk_form = d.add("dk_form", -gamma - 2 * (sp.log(p) - 1 + 1 / p) / sp.log(p) ** 2,
                    r"-\gamma - \frac{2(\log p - 1 + 1/p)}{\log^2 p}", "the same, rearranged")
    d.add("dk_residual", sp.simplify(dk - dk_form), r"\frac{\partial k}{\partial p} - (\dots)", "0")
    gap = d.add("tangent_gap", sp.log(p) - 1 + 1 / p, r"\log p - 1 + 1/p",
                ">= 0 (log p >= 1 - 1/p), so dk/dp <= -gamma < 0: k decreases")
    d.add("tangent_gap_dp", sp.simplify(sp.diff(gap, p)), r"\frac{d}{dp}(\log p - 1 + 1/p)",
          "negative on (0, 1), positive on (1, oo): the minimum is at p = 1")
    d.add("tangent_gap_at_1", gap.subs(p, 1), r"(\log p - 1 + 1/p)\big|_{p=1}", "0")
    d.add("g_at_0", sp.limit(g, p, 0, "+"), r"\lim_{p \to 0^+} g(p, \gamma)", "1")
    g_factored = (1 - p) ** gamma * (1 - gamma * p * sp.log(p) / (1 - p))
    d.add("g_at_1", limit_at_one(g_factored), r"\lim_{p \to 1^-} g(p, \gamma)", "0 for every gamma > 0")
    d.add("dg_at_0", sp.limit(eq8, p, 0, "+"), r"\lim_{p \to 0^+} \frac{\partial g}{\partial p}",
          "+oo: dg/dp is not 'a positive value at p = 0'")
    return d


def eq8_prefactor_limit_at_one(gamma_value):
    """lim_{p -> 1-} gamma (1-p)^(gamma-2) for a given gamma: 0 only for gamma > 2 (App. C says it is 0)."""
    gv = sp.nsimplify(gamma_value)
    return limit_at_one(gv * (1 - p) ** (gv - 2))


def eq8_limit_at_one(gamma_value):
    """lim_{p -> 1-} dg/dp (Eq. 8) for a given gamma: -oo (gamma < 1), -2 (gamma = 1), 0 (gamma > 1)."""
    gv = sp.nsimplify(gamma_value)
    return limit_at_one(shape_of_g()["eq8"].subs(gamma, gv))


@lru_cache(maxsize=None)
def gamma_one() -> Derivation:
    """gamma = 1: g(p, 1) = 1 - p - p log p, its threshold p0 = 1/e and its maximum 1 + e^-2 at p = e^-2.

    Keys: ``g1``, ``thresholds`` (the set of solutions of g(p, 1) = 1), ``dg1``, ``argmax`` (a set), ``max``.
    """
    d = Derivation("g for gamma = 1")
    g1 = d.add("g1", sp.expand(gradient_factor_expr(p, 1)), r"g(p, 1)", "")
    d.add("thresholds", sp.FiniteSet(*sp.solve(sp.Eq(g1, 1), p)), r"\{p : g(p, 1) = 1\}", "p0(1) = 1/e exactly")
    dg1 = d.add("dg1", sp.diff(g1, p), r"\frac{\partial g(p, 1)}{\partial p}", "")
    arg = sp.solve(sp.Eq(dg1, 0), p)
    d.add("argmax", sp.FiniteSet(*arg), r"\arg\max_p g(p, 1)", "")
    d.add("max", sp.simplify(g1.subs(p, arg[0])), r"\max_p g(p, 1)", "")
    return d


# ------------------------------------------------------------------------------------------ Prop. 2

@lru_cache(maxsize=None)
def prop2() -> Derivation:
    """Prop. 2 (App. C, Eqs. 11-13): solving g(p0, gamma) = 1 for gamma with Lambert W.

    With a = 1 - p0 and b = p0 log p0 (so a > 0 > b), g(p0, gamma) = a^(gamma-1) (a - gamma b), and
    g(p0, gamma) = 1 is equivalent to w e^w = z with w = (gamma - a/b) log a and
    z = -(a^(1 - a/b) / b) log a. Its two real solutions are W_0(z) and W_{-1}(z).

    Keys:
    ``g_p0``, ``g_ab`` (a^(gamma-1)(a - gamma b)), ``ab_residual`` (0);
    ``eq11`` (the printed chain, a list of relations);
    ``w`` ((gamma - a/b) log a), ``z`` (printed r.h.s.), ``substitution_residual`` (g(p0, a/b + W/log a) - 1
    with W e^W = z: 0, so either branch solves g = 1);
    ``gamma_of_w`` (a/b + W/log a), ``gamma_star`` (Eq. 12, W_{-1}), ``gamma_w0`` (Eq. 13, W_0);
    ``w0`` (-(a/b) log a), ``w0_residual`` (w0 e^w0 - z, 0), ``gamma_at_w0`` (a/b + w0/log a: 0);
    ``w0_in_p0``, ``w0_at_half`` (-1), ``z_at_half`` (-1/e);
    ``dg_dgamma_at_0`` (d g(p0, gamma)/d gamma at gamma = 0: positive iff p0 < 1/2);
    ``log_g`` (log g(p0, gamma) in a, b), ``dlog_g_at_0`` (log a - b/a), ``d2log_g`` (-b^2/(a - gamma b)^2 < 0):
    log g is concave in gamma and vanishes at 0, so gamma* is its only positive root, and exists iff p0 < 1/2.
    """
    d = Derivation("Prop. 2: gamma* by Lambert W")
    a, b, W = _a, _b, _W
    g_p0 = d.add("g_p0", gradient_factor_expr(p0, gamma), r"g(p_0, \gamma)", "Eq. 7 at p0")
    g_ab = d.add("g_ab", a ** (gamma - 1) * (a - gamma * b), r"a^{\gamma-1}(a - \gamma b)",
                 "Eq. 11, line 3, with a = 1 - p0 and b = p0 log p0")
    d.add("ab_residual", simplify_in_u(g_ab.subs({a: 1 - p0, b: p0 * sp.log(p0)}) - g_p0, p0),
          r"a^{\gamma-1}(a - \gamma b) - g(p_0, \gamma)", "0")
    rhs = -(a ** (1 - a / b) / b) * sp.log(a)
    d.add("eq11", [
        sp.Le(g_p0, 1),
        sp.Le(g_ab, 1),
        sp.Le((gamma - 1) * sp.log(a) + sp.log(a - gamma * b), 0),
        sp.Le((gamma - a / b) * sp.log(a) + sp.log(a - gamma * b), (1 - a / b) * sp.log(a)),
        sp.Le((a - gamma * b) * sp.exp((gamma - a / b) * sp.log(a)), a ** (1 - a / b)),
        sp.Le((gamma - a / b) * sp.exp((gamma - a / b) * sp.log(a)), -a ** (1 - a / b) / b),
        sp.Ge(((gamma - a / b) * sp.log(a)) * sp.exp((gamma - a / b) * sp.log(a)), rhs),
    ], r"\text{Eq. 11}", "the chain as printed (each line divides or multiplies by b < 0 or log a < 0 where the "
                         "inequality flips)")
    w = d.add("w", (gamma - a / b) * sp.log(a), r"w", "the unknown of w e^w = z")
    z = d.add("z", rhs, r"z", "the right-hand side of Eq. 11")
    gamma_of_w = d.add("gamma_of_w", sp.solve(sp.Eq(w, W), gamma)[0], r"\gamma(w)", "inverting w for gamma")
    lhs = g_ab.subs(gamma, gamma_of_w)
    lhs = sp.simplify(lhs).subs(sp.exp(W), _z / W).subs(_z, z)
    d.add("substitution_residual", sp.simplify(lhs - 1), r"g\left(p_0, \tfrac{a}{b} + \tfrac{W}{\log a}\right) - 1",
          "0 whenever W e^W = z: both real branches solve g(p0, gamma) = 1")
    d.add("gamma_star", gamma_of_w.subs(W, sp.LambertW(z, -1)), r"\gamma^*", "Eq. 12 (branch W_{-1})")
    d.add("gamma_w0", gamma_of_w.subs(W, sp.LambertW(z, 0)), r"\gamma_{W_0}", "Eq. 13 (branch W_0)")
    w0 = d.add("w0", -(a / b) * sp.log(a), r"w_0", "the root of w e^w = z at gamma = 0")
    d.add("w0_residual", sp.simplify(w0 * sp.exp(w0) - z), r"w_0 e^{w_0} - z", "0")
    d.add("gamma_at_w0", sp.simplify(gamma_of_w.subs(W, w0)), r"\gamma(w_0)", "0: the trivial root")
    w0p = d.add("w0_in_p0", w0.subs({a: 1 - p0, b: p0 * sp.log(p0)}), r"w_0(p_0)", "")
    d.add("w0_at_half", sp.simplify(w0p.subs(p0, sp.Rational(1, 2))), r"w_0(1/2)", "-1: the branch point")
    zp = z.subs({a: 1 - p0, b: p0 * sp.log(p0)})
    d.add("z_at_half", sp.simplify(zp.subs(p0, sp.Rational(1, 2))), r"z(1/2)", "-1/e")
    d.add("dg_dgamma_at_0", sp.simplify(sp.diff(g_p0, gamma).subs(gamma, 0)),
          r"\frac{\partial g(p_0, \gamma)}{\partial \gamma}\Big|_{\gamma=0}", "> 0 iff p0 < 1/2")
    log_g = d.add("log_g", (gamma - 1) * sp.log(a) + sp.log(a - gamma * b), r"\log g(p_0, \gamma)",
                  "0 at gamma = 0")
    d.add("dlog_g_at_0", sp.simplify(sp.diff(log_g, gamma).subs(gamma, 0)),
          r"\frac{\partial \log g}{\partial \gamma}\Big|_{\gamma=0}", "log a - b/a: > 0 iff p0 < 1/2")
    d.add("d2log_g", sp.simplify(sp.diff(log_g, gamma, 2)), r"\frac{\partial^2 \log g}{\partial \gamma^2}",
          "< 0: log g is concave in gamma, so it has at most one positive root")
    return d


@lru_cache(maxsize=None)
def gamma_star_at_inverse_e() -> Derivation:
    """gamma*(1/e) = 1: at p0 = 1/e, W_{-1}(z) = e log(1 - 1/e), which gives gamma = 1 exactly.

    Keys: ``a``, ``b``, ``z``, ``w1`` (e log(1 - 1/e)), ``w1_residual`` (w1 e^w1 - z, 0), ``w1_value``
    (numeric, < -1, so w1 is on the W_{-1} branch), ``gamma`` (1), ``w0_value`` (> -1), ``gamma_w0`` (0).
    """
    d = Derivation("gamma* at p0 = 1/e")
    pe = sp.exp(-1)
    a = d.add("a", 1 - pe, r"a", "1 - 1/e")
    b = d.add("b", sp.simplify(pe * sp.log(pe)), r"b", "-1/e")
    z = d.add("z", -(a ** (1 - a / b) / b) * sp.log(a), r"z", "")
    w1 = d.add("w1", sp.E * sp.log(1 - pe), r"W_{-1}(z)", "claimed value")
    d.add("w1_residual", sp.simplify(sp.expand_log(w1 * sp.exp(w1) - z, force=True)), r"w_1 e^{w_1} - z", "0")
    d.add("w1_value", sp.N(w1, 20), r"w_1", "< -1: on the lower branch")
    d.add("gamma", sp.simplify(a / b + w1 / sp.log(a)), r"\gamma^*(1/e)", "1")
    w0 = -(a / b) * sp.log(a)
    d.add("w0_value", sp.N(w0, 20), r"W_0(z)", "> -1: on the principal branch")
    d.add("gamma_w0", sp.simplify(a / b + w0 / sp.log(a)), r"\gamma_{W_0}(1/e)", "0")
    return d


# ------------------------------------------------------------------------------------ Eq. 4, App. A

@lru_cache(maxsize=None)
def entropy_bound() -> Derivation:
    """Eq. 4 / App. A: L_f >= KL(eta || p) - gamma H[p], its Bernoulli step, and a proof for every gamma >= 0.

    Keys:
    ``chain`` (the printed steps, as (expression, justification) pairs over classes y = 1..K);
    ``bernoulli_gap`` B = (1-p)^gamma - (1 - gamma p), ``B_at_0`` (0), ``dB`` (computed), ``dB_form``
    (gamma (1 - (1-p)^(gamma-1))), ``dB_residual`` (0): B >= 0 on [0, 1] iff gamma >= 1 (B <= 0 for gamma <= 1);
    ``gap_linear_in_q`` (L_f - (L_c - gamma H[p]) per class, linear in eta, so its minimum over eta is at a vertex);
    ``D`` (the gap at the vertex eta = e_j with H[p] replaced by the binary entropy h(p_j) <= H[p]),
    ``D_at_0`` (0), ``dD_dgamma``, ``dD_at_0`` (h(p) - log p log(1-p)), ``d2D`` (>= 0: D is convex in gamma),
    ``lemma`` (h(p) - log p log(1 - p)), ``lemma_symmetry`` (lemma(p) - lemma(1-p), 0),
    ``lemma_step1`` (-log(1-p) - p - p^2 / (2(1-p)) <= 0), ``lemma_step2`` (2(1-p)^2 + p log p >= 0 for p <= 1/2).
    """
    d = Derivation("Eq. 4: the entropy-regularised KL bound")
    K = sp.Symbol("K", integer=True, positive=True)
    y, j = sp.symbols("y j", integer=True, positive=True)
    P, Q = sp.IndexedBase(r"\hat{p}"), sp.IndexedBase(r"\eta")
    s = lambda e: sp.Sum(e, (y, 1, K))  # noqa: E731
    d.add("chain", [
        (s(-(1 - P[y]) ** gamma * Q[y] * sp.log(P[y])), "general focal loss L_f"),
        (s(-(1 - gamma * P[y]) * Q[y] * sp.log(P[y])), ">= by Bernoulli's inequality, for gamma >= 1"),
        (s(-Q[y] * sp.log(P[y])) - gamma * sp.Abs(s(Q[y] * P[y] * sp.log(P[y]))), "= since log p_y <= 0"),
        (s(-Q[y] * sp.log(P[y])) - gamma * sp.Max(Q[j]) * s(sp.Abs(P[y] * sp.log(P[y]))), ">= by Hoelder"),
        (s(-Q[y] * sp.log(P[y])) + gamma * s(P[y] * sp.log(P[y])), ">= since eta_j <= 1"),
        (Label(r"\mathcal{L}_c") - gamma * Label(r"\mathbb{H}[\hat{p}]"), "= L_c - gamma H[p]"),
    ], r"\text{App. A}", "the printed chain")
    B = d.add("bernoulli_gap", (1 - p) ** gamma - (1 - gamma * p), r"B(p, \gamma)",
              "Bernoulli: B >= 0 on [0, 1] for gamma >= 1; B <= 0 for 0 <= gamma <= 1")
    d.add("B_at_0", B.subs(p, 0), r"B(0, \gamma)", "0")
    dB = d.add("dB", sp.diff(B, p), r"\frac{\partial B}{\partial p}", "")
    dB_form = d.add("dB_form", gamma * (1 - (1 - p) ** (gamma - 1)), r"\gamma\left(1 - (1-p)^{\gamma-1}\right)",
                    ">= 0 iff (1-p)^(gamma-1) <= 1 iff gamma >= 1")
    d.add("dB_residual", simplify_in_u(dB - dB_form), r"\frac{\partial B}{\partial p} - (\dots)", "0")
    qy = sp.Symbol("eta_y", nonnegative=True)
    d.add("gap_linear_in_q", qy * (-sp.log(p)) * ((1 - p) ** gamma - 1) + gamma * (-p * sp.log(p)),
          r"\text{gap}_y", "class y's share of L_f - (L_c - gamma H[p]); linear in eta, minimal at a vertex eta = e_j")
    h = -p * sp.log(p) - (1 - p) * sp.log(1 - p)
    D = d.add("D", gamma * h - (-sp.log(p)) * (1 - (1 - p) ** gamma), r"D(p, \gamma)",
              "the vertex gap with H[p] >= h(p_j) (grouping the other classes); D >= 0 proves Eq. 4")
    d.add("D_at_0", D.subs(gamma, 0), r"D(p, 0)", "0")
    dD = d.add("dD_dgamma", sp.diff(D, gamma), r"\frac{\partial D}{\partial \gamma}", "")
    d.add("dD_at_0", sp.simplify(dD.subs(gamma, 0)), r"\frac{\partial D}{\partial \gamma}\Big|_{\gamma=0}",
          "h(p) - log p log(1-p) >= 0 (the lemma)")
    d.add("d2D", sp.simplify(sp.diff(D, gamma, 2)), r"\frac{\partial^2 D}{\partial \gamma^2}",
          ">= 0: -log p >= 0, log^2(1-p) >= 0, (1-p)^gamma >= 0, so D is convex in gamma and "
          "D >= D(0) + D'(0) gamma >= 0")
    lemma = d.add("lemma", h - sp.log(p) * sp.log(1 - p), r"h(p) - \log p \log(1-p)", ">= 0 on (0, 1)")
    d.add("lemma_symmetry", sp.simplify(lemma - lemma.subs(p, 1 - p)), r"\ell(p) - \ell(1-p)",
          "0: symmetric, so p <= 1/2 suffices")
    d.add("lemma_step1", -sp.log(1 - p) - p - p ** 2 / (2 * (1 - p)), r"v - p - \frac{p^2}{2(1-p)}",
          "<= 0 with v = -log(1-p) = sum p^k / k")
    d.add("lemma_step2", 2 * (1 - p) ** 2 + p * sp.log(p), r"2(1-p)^2 + p \log p",
          ">= 0 for p <= 1/2 (>= 1/2 - 1/e); with step 1 it gives (1-p) v >= (-log p)(v - p), i.e. the lemma")
    return d


# ------------------------------------------------------------------------------------- Eq. 5, Fig. 6

@lru_cache(maxsize=None)
def focal_optimum() -> Derivation:
    """Eq. 5 (App. A, Fig. 6): the binary focal risk, its stationarity condition and the inverse map.

    Keys: ``risk`` (Eq. 5 objective), ``d_risk`` (computed), ``d_risk_form``
    (-eta g(x, gamma)/x + (1 - eta) g(1 - x, gamma)/(1 - x)), ``d_risk_residual`` (0), ``q_of_x`` (the eta for which
    x is stationary), ``q_of_x_form`` (h(x) / (h(x) + h(1-x)), h = x / g), ``q_of_x_residual`` (0),
    ``d_risk_one_hot`` (eta = 1) and ``d_risk_one_hot_residual`` (it equals -g(x)/x < 0, so the risk decreases
    up to x = 1 and p_hat = eta).
    """
    d = Derivation("Eq. 5: the focal-optimal binary prediction")
    risk = d.add("risk", -(1 - x) ** gamma * eta * sp.log(x) - x ** gamma * (1 - eta) * sp.log(1 - x),
                 r"R(x)", "expected focal loss of predicting x when P(y = 1) = eta")
    dr = d.add("d_risk", sp.diff(risk, x), r"R'(x)", "")
    form = d.add("d_risk_form", -eta * gradient_factor_expr(x, gamma) / x
                 + (1 - eta) * gradient_factor_expr(1 - x, gamma) / (1 - x),
                 r"-\eta \frac{g(x, \gamma)}{x} + (1-\eta) \frac{g(1-x, \gamma)}{1-x}", "")
    d.add("d_risk_residual", simplify_in_u(sp.expand(dr - form), x), r"R'(x) - (\dots)", "0")
    sol = sp.solve(sp.Eq(eta * gradient_factor_expr(x, gamma) / x,
                         (1 - eta) * gradient_factor_expr(1 - x, gamma) / (1 - x)), eta)
    phi = lambda t: t / gradient_factor_expr(t, gamma)  # noqa: E731
    q_of_x = d.add("q_of_x", sol[0], r"\eta(x)", "stationarity solved for eta")
    form_q = d.add("q_of_x_form", phi(x) / (phi(x) + phi(1 - x)), r"\frac{h(x)}{h(x) + h(1-x)}",
                   "h(x) = x / g(x, gamma): eta is proportional to p / g(p, gamma)")
    numerator, _ = sp.fraction(sp.together(q_of_x - form_q))
    numerator = simplify_in_u(sp.expand_log(numerator, force=True), x)
    d.add("q_of_x_residual", sp.simplify(sp.powsimp(sp.expand(numerator), force=True)),
          r"\operatorname{numerator}\left(\eta(x) - \frac{h(x)}{h(x) + h(1-x)}\right)", "0")
    one_hot = d.add("d_risk_one_hot", sp.simplify(dr.subs(eta, 1)), r"R'(x)\big|_{\eta=1}", "= -g(x, gamma)/x < 0")
    d.add("d_risk_one_hot_residual", simplify_in_u(one_hot + gradient_factor_expr(x, gamma) / x, x),
          r"R'(x)\big|_{\eta=1} + \frac{g(x, \gamma)}{x}", "0")
    return d
