"""Zhou et al. (2025), *Revisiting Reweighted Risk for Calibration: AURC, Focal and Inverse Focal Loss*: the
gradients of App. C, the threshold 1/W(1/e), the weight integrals of Fig. 1 and the 1/kappa of Prop. 4.6."""

from __future__ import annotations

from functools import lru_cache

import sympy as sp

from calib.symbolic.base import Derivation, gamma, gradient_factor_expr, limit_at_one, p, simplify_in_u, u

__all__ = ["kappa", "reweighted_risk"]

# ------------------------------------------------------------- Zhou et al. (2025), reweighted risks
# Revisiting Reweighted Risk for Calibration: AURC, Focal and Inverse Focal Loss. App. C's gradients (the
# inverse-focal sign error), the positive-gradient threshold 1/W(1/e), the weight integrals of Fig. 1, and
# the 1/kappa that Prop. 4.6 drops. Integrals of -log(1 - u) are taken with t = 1 - u (sympy otherwise
# takes a complex branch).

#: low-confidence coverage of the AU loss (Zhou et al. 2025, App. E.2)
kappa = sp.Symbol("kappa", positive=True)


@lru_cache(maxsize=None)
def reweighted_risk() -> Derivation:
    """Zhou et al. (2025): focal / inverse focal gradients (App. C.1-C.2), gamma* = 1/W(1/e), the weight
    integrals (Fig. 1), E[beta] = kappa for Eq. 12 and the factor 1/kappa between Eqs. 11 and 12 (Prop. 4.6).

    Keys: ``fl``, ``fl_ce_residual`` (0), ``fl_weight_slope`` (the slope of the weight (1-p)^gamma),
    ``fl_weight_slope_in_u`` (the same at p = 1 - u: -gamma u^(gamma-1), negative for every gamma > 0, Sec. 3.1),
    ``dfl``, ``dfl_printed``, ``dfl_residual`` (0), ``dfl_limit_3`` and ``dfl_limit_half`` (0),
    ``fl_factor_residual`` (-p dFL/dp - g(p, gamma), 0); ``ifl``, ``difl``, ``difl_printed``, ``difl_residual``
    (-2 gamma (1+p)^(gamma-1) log p, not 0), ``difl_at_one`` (-2^gamma), ``ifl_factor`` (-p dIFL/dp),
    ``ifl_factor_residual`` (0), ``threshold_h`` ((1+p)/(-p log p)), ``threshold_numerator`` (p + log p + 1),
    ``p_star`` (W(1/e)), ``p_star_residual`` (W e^W - 1/e to 50 digits),
    ``gamma_star`` (1/W(1/e)), ``gamma_star_value``; ``fl_weight_integral`` (1/(gamma+1)),
    ``ifl_weight_integral``, ``aurc_weight_integral`` (1), ``eq12_mean`` (kappa), ``eq11_low`` and
    ``eq11_over_eq12`` (1/kappa).
    """
    d = Derivation("reweighted risks (Zhou et al. 2025)")
    fl = d.add("fl", -(1 - p) ** gamma * sp.log(p), r"\ell_{FL}", "Def. 3.1, Eq. 2")
    d.add("fl_ce_residual", sp.simplify(fl.subs(gamma, 0) + sp.log(p)), r"\ell_{FL}|_{\gamma=0} + \log p",
          "0: focal loss with gamma = 0 is cross-entropy")
    slope = d.add("fl_weight_slope", sp.diff((1 - p) ** gamma, p), r"\frac{d}{dp}(1-p)^\gamma",
                  "the slope of the focal weight w(p) = (1-p)^gamma (Sec. 3.1)")
    d.add("fl_weight_slope_in_u", sp.simplify(slope.subs(p, 1 - u)), r"\frac{d}{dp}(1-p)^\gamma\Big|_{p=1-u}",
          "-gamma u^(gamma-1): negative for every gamma > 0 and 0 < p < 1 (u = 1 - p > 0), not only gamma >= 1")
    dfl = d.add("dfl", sp.diff(fl, p), r"\frac{\partial \ell_{FL}}{\partial p}", "")
    dfl_printed = d.add("dfl_printed", gamma * (1 - p) ** (gamma - 1) * sp.log(p) - (1 - p) ** gamma / p,
                        r"\left.\frac{\partial \ell_{FL}}{\partial p}\right|_{\text{App. C.1}}", "as printed")
    d.add("dfl_residual", simplify_in_u(dfl - dfl_printed), r"\frac{\partial \ell_{FL}}{\partial p} - (\text{C.1})",
          "0: App. C.1 is right")
    d.add("dfl_limit_3", limit_at_one(dfl.subs(gamma, 3)),
          r"\lim_{p\to1}\frac{\partial \ell_{FL}}{\partial p}\Big|_{\gamma=3}", "0")
    d.add("dfl_limit_half", limit_at_one(dfl.subs(gamma, sp.Rational(1, 2))),
          r"\lim_{p\to1}\frac{\partial \ell_{FL}}{\partial p}\Big|_{\gamma=1/2}", "0")
    d.add("fl_factor_residual", simplify_in_u(-p * dfl - gradient_factor_expr(p, gamma)),
          r"-p\,\frac{\partial \ell_{FL}}{\partial p} - g(p, \gamma)", "0: Mukhoti et al.'s gradient factor")
    ifl = d.add("ifl", -(1 + p) ** gamma * sp.log(p), r"\ell_{IFL}", "Def. 3.2, Eq. 3")
    difl = d.add("difl", sp.diff(ifl, p), r"\frac{\partial \ell_{IFL}}{\partial p}", "")
    difl_printed = d.add("difl_printed", gamma * (1 + p) ** (gamma - 1) * sp.log(p) - (1 + p) ** gamma / p,
                         r"\left.\frac{\partial \ell_{IFL}}{\partial p}\right|_{\text{App. C.2}}", "as printed")
    d.add("difl_residual", sp.simplify(difl - difl_printed), r"\frac{\partial \ell_{IFL}}{\partial p} - (\text{C.2})",
          "not 0: the first term of App. C.2 has the wrong sign")
    d.add("difl_at_one", sp.simplify(difl.subs(p, 1)), r"\frac{\partial \ell_{IFL}}{\partial p}\Big|_{p=1}",
          "-2^gamma: the gradient does not vanish at p = 1")
    fac = d.add("ifl_factor", sp.simplify(-p * difl), r"-p\,\frac{\partial \ell_{IFL}}{\partial p}",
                "negative (a positive gradient) iff 1 + p + gamma p log p < 0")
    d.add("ifl_factor_residual", sp.simplify(fac - (1 + p) ** (gamma - 1) * (1 + p + gamma * p * sp.log(p))),
          r"-p\,\frac{\partial \ell_{IFL}}{\partial p} - (1+p)^{\gamma-1}(1 + p + \gamma p\log p)", "0")
    h = d.add("threshold_h", (1 + p) / (-p * sp.log(p)), r"h(p)",
              "the gradient is positive at p iff gamma > h(p); gamma* = min h")
    d.add("threshold_numerator", sp.factor(sp.numer(sp.together(sp.diff(h, p)))), r"\text{numerator of } h'(p)",
          "p + log p + 1: zero at p* with p* e^p* = 1/e")
    ps = d.add("p_star", sp.LambertW(sp.exp(-1)), r"p^*", "W(1/e), principal branch")
    d.add("p_star_residual", sp.N(ps * sp.exp(ps) - sp.exp(-1), 50), r"p^* e^{p^*} - e^{-1}",
          "0 to 50 digits (sympy does not simplify W(x) e^W(x) to x)")
    # h(p*) with log p* = -1 - p* (from p* e^p* = 1/e): (1 + p*) / (p* (1 + p*)) = 1 / p*
    gs = d.add("gamma_star", sp.simplify(h.subs(sp.log(p), -1 - p).subs(p, ps)), r"\gamma^*", "1/W(1/e)")
    d.add("gamma_star_value", sp.N(gs, 15), r"\gamma^*", "3.5911...: App. C.2 says 4, Sec. 5 says 3.5")
    d.add("fl_weight_integral", sp.integrate((1 - p) ** gamma, (p, 0, 1)), r"\int_0^1 (1-p)^\gamma\,dp", "")
    d.add("ifl_weight_integral", sp.simplify(sp.integrate((1 + p) ** gamma, (p, 0, 1))),
          r"\int_0^1 (1+p)^\gamma\,dp", "")
    t = sp.Symbol("t", positive=True)
    d.add("aurc_weight_integral", sp.integrate(-sp.log(t), (t, 0, 1)), r"\int_0^1 -\ln(1-u)\,du",
          "1: the AURC weights average to 1")
    d.add("eq12_mean", sp.simplify(sp.integrate(-sp.log(t), (t, 1 - kappa, 1)) + (1 - kappa) * (-sp.log(1 - kappa))),
          r"\int_0^1 -\ln(1 - \min(u, \kappa))\,du", "kappa: Eq. 12's weights average to kappa, not 1")
    m = sp.Symbol("m", positive=True)  # min(G(x), kappa) < 1
    low = d.add("eq11_low", sp.integrate(1 / t, (t, 1 - m, 1)) / kappa,
                r"\frac{1}{\kappa}\int_0^{m} \frac{dt}{1-t}", "Eq. 11 with m = min(G(x), kappa): the conditional "
                "expectation over P_X_tau carries 1/kappa")
    d.add("eq11_over_eq12", sp.simplify(low / (-sp.log(1 - m))), r"\beta_{\text{Eq. 11}} / \beta_{\text{Eq. 12}}",
          "1/kappa: Prop. 4.6 drops it")
    return d
