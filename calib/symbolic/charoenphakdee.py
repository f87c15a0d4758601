"""Charoenphakdee et al. (2021), *On Focal Loss for Class-Posterior Probability Estimation*: the lemmas behind
Thms. 3, 5, 8, 11, Cor. 9 and Prop. 12 (the book's reconstruction; the paper's appendix is not available)."""

from __future__ import annotations

from functools import lru_cache

import sympy as sp

from calib.symbolic.base import Derivation, gamma, gradient_factor_expr, simplify_in_u

__all__ = ["v", "eta1", "eta2", "posterior_recovery"]


#: a probability in Charoenphakdee et al.'s notation (phi^gamma(v), h^gamma(v))
v = sp.Symbol("v", positive=True)
#: the class posterior of a binary problem (Thm. 5)
eta1, eta2 = sp.symbols("eta_1 eta_2", positive=True)
_t = sp.Symbol("t", real=True)


@lru_cache(maxsize=None)
def posterior_recovery() -> Derivation:
    """Charoenphakdee et al. (2021): the lemmas behind Thms. 3, 5, 8, 11, Cor. 9 and Prop. 12.

    The paper's proofs are in an appendix that the book does not have; these are the book's reconstruction.
    phi^gamma(v) (Eq. 10) is Mukhoti et al.'s gradient factor g(v, gamma).

    Keys:
    ``phi`` (Eq. 10); ``ell`` (-(1-v)^gamma log v, the loss of a class with prediction v) and ``dell``;
    ``L1_residual`` (dell + phi / v: 0, where phi comes from);
    ``d2ell``, ``B`` ((1-v)^2 + 2 gamma v (1-v) - gamma (gamma-1) v^2 log v), ``L2_residual``
    (v^2 ell'' - (1-v)^(gamma-2) B: 0, so ell is strictly convex when B > 0), ``B_lower_gap``
    (B - (1-v)((1-v) + gamma (1+gamma) v) = gamma (1-gamma) v (v log v + 1 - v), >= 0 for gamma <= 1);
    ``h`` (v / phi, Eq. 13), ``L3_residual`` (phi - v phi' - v^2 ell'': 0, so h' = v^2 ell'' / phi^2 > 0);
    ``dphi``, ``dphi_form`` (gamma (1-v)^(gamma-2) [-2(1-v) + (gamma v - 1) log v]), ``L4_residual`` (0);
    ``phi_half`` (phi(1/2)), ``phi_half_form`` (2^-gamma (1 + gamma log 2)), ``L5_residual`` (0),
    ``t_bound`` (e^-t (1 + t)) and ``t_bound_dt`` (-t e^-t < 0: so phi(1/2) < 1 for gamma > 0, Cor. 9);
    ``W2`` (the binary pointwise risk W(q; eta), Eq. 7), ``thm5_slope`` (d/dt W(eta + t(e1 - e2); eta) at
    t = 0), ``thm5_residual`` (thm5_slope - (phi(eta2) - phi(eta1)): 0);
    ``kkt`` (the stationarity condition eta_i phi(q_i) / q_i = lambda solved for eta_i: lambda h(q_i)).
    """
    d = Derivation("Charoenphakdee et al. (2021): lemmas")
    phi = d.add("phi", gradient_factor_expr(v, gamma), r"\varphi^\gamma(v)", "Eq. 10 (= Mukhoti et al.'s g)")
    ell = d.add("ell", -(1 - v) ** gamma * sp.log(v), r"\ell^\gamma(v)", "focal loss of a class predicted v")
    dell = d.add("dell", sp.diff(ell, v), r"\frac{d\ell^\gamma}{dv}", "")
    d.add("L1_residual", simplify_in_u(dell + phi / v, v), r"\frac{d\ell^\gamma}{dv} + \frac{\varphi^\gamma(v)}{v}",
          "0: phi is -v times the derivative of the loss (Sec. 4.2, 'how phi was derived')")
    d2 = d.add("d2ell", sp.diff(ell, v, 2), r"\frac{d^2\ell^\gamma}{dv^2}", "")
    B = d.add("B", (1 - v) ** 2 + 2 * gamma * v * (1 - v) - gamma * (gamma - 1) * v ** 2 * sp.log(v), r"B_\gamma(v)",
              "> 0 on (0, 1) for every gamma >= 0")
    d.add("L2_residual", simplify_in_u((v ** 2 * d2 - (1 - v) ** (gamma - 2) * B) / (1 - v) ** (gamma - 2), v),
          r"\left(v^2 \frac{d^2\ell^\gamma}{dv^2} - (1-v)^{\gamma-2} B_\gamma(v)\right) / (1-v)^{\gamma-2}",
          "0: the pointwise focal risk is strictly convex")
    d.add("B_lower_gap", sp.factor(sp.expand(B - (1 - v) * ((1 - v) + gamma * (1 + gamma) * v))),
          r"B_\gamma(v) - (1-v)\left((1-v) + \gamma(1+\gamma)v\right)",
          "gamma (1 - gamma) v (v log v + 1 - v) >= 0 for gamma <= 1 (log v >= 1 - 1/v)")
    d.add("h", v / phi, r"h^\gamma(v)", "Eq. 13")
    dphi = d.add("dphi", sp.diff(phi, v), r"\frac{d\varphi^\gamma}{dv}", "")
    dphi_form = d.add("dphi_form", gamma * (1 - v) ** (gamma - 2) * (-2 * (1 - v) + (gamma * v - 1) * sp.log(v)),
                      r"\gamma(1-v)^{\gamma-2}\left[-2(1-v) + (\gamma v - 1)\log v\right]",
                      "zero at tau_oc: (gamma v - 1) log v = 2 (1 - v)")
    d.add("L4_residual", simplify_in_u((dphi - dphi_form) / (1 - v) ** (gamma - 2), v),
          r"\left(\frac{d\varphi^\gamma}{dv} - (\dots)\right) / (1-v)^{\gamma-2}", "0")
    d.add("L3_residual", simplify_in_u((phi - v * dphi_form - v ** 2 * d2) / (1 - v) ** (gamma - 2), v),
          r"\left(\varphi - v\varphi' - v^2 \ell''\right) / (1-v)^{\gamma-2}",
          "0: h' = (phi - v phi') / phi^2 = v^2 ell'' / phi^2 > 0, h increases (Prop. 12)")
    half = d.add("phi_half", sp.simplify(phi.subs(v, sp.Rational(1, 2))), r"\varphi^\gamma(1/2)", "")
    half_form = d.add("phi_half_form", 2 ** (-gamma) * (1 + gamma * sp.log(2)), r"2^{-\gamma}(1 + \gamma\log 2)", "")
    d.add("L5_residual", sp.simplify(sp.expand_log(half - half_form, force=True)), r"\varphi^\gamma(1/2) - (\dots)",
          "0")
    tt = sp.Symbol("t", positive=True)
    tb = d.add("t_bound", sp.exp(-tt) * (1 + tt), r"e^{-t}(1+t)", "phi(1/2) with t = gamma log 2; equals 1 at t = 0")
    d.add("t_bound_dt", sp.simplify(sp.diff(tb, tt)), r"\frac{d}{dt}e^{-t}(1+t)", "-t e^-t < 0: so phi(1/2) < 1")
    q1 = sp.Symbol("q_1", positive=True)
    W2 = d.add("W2", -eta1 * (1 - q1) ** gamma * sp.log(q1) - eta2 * q1 ** gamma * sp.log(1 - q1),
               r"W(\mathbf{q}; \boldsymbol\eta)", "Eq. 7, K = 2, q = (q_1, 1 - q_1)")
    slope = d.add("thm5_slope", sp.diff(W2.subs(q1, eta1 + _t), _t).subs(_t, 0).subs(eta2, 1 - eta1),
                  r"\frac{d}{dt} W(\boldsymbol\eta + t(\mathbf{e}_1 - \mathbf{e}_2); \boldsymbol\eta)\Big|_{t=0}", "")
    d.add("thm5_residual", simplify_in_u(sp.expand(slope - (gradient_factor_expr(1 - eta1, gamma)
                                                              - gradient_factor_expr(eta1, gamma))), eta1),
          r"\text{slope} - (\varphi^\gamma(\eta_2) - \varphi^\gamma(\eta_1))",
          "0: nonzero unless phi(eta1) = phi(eta2)")
    lam = sp.Symbol("lambda", positive=True)
    qi, ei = sp.symbols("q_i eta_i", positive=True)
    d.add("kkt", sp.solve(sp.Eq(ei * gradient_factor_expr(qi, gamma) / qi, lam), ei)[0], r"\eta_i",
          "KKT: eta_i phi(q_i) / q_i = lambda, so eta_i is proportional to h(q_i) (Thm. 11)")
    return d
