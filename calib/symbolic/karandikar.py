"""Karandikar et al. (2021), *Soft Calibration Objectives for Neural Networks*: the soft bin membership and the
gradient of SB-ECE (Sec. 4.1), the soft uncertainty t_{kappa,T} (Sec. 4.2), and AvUC = -log AvU."""

from __future__ import annotations

from functools import lru_cache

import sympy as sp

from calib.symbolic.base import Derivation

__all__ = ["soft_binning", "soft_uncertainty", "avuc_identity"]


@lru_cache(maxsize=None)
def soft_binning() -> Derivation:
    r"""Karandikar et al. (2021), Sec. 4.1: closed forms of the soft bin membership and of SB-ECE's gradient.

    The membership is :math:`u_j(c) = \mathrm{softmax}_j(g_j)`, :math:`g_j = -(c - \xi_j)^2/T`, with centres
    :math:`\xi_j = (j - 1/2)/M` (the paper does not give them). Keys:
    ``g`` (g_j); ``log_odds`` (g_j - g_{j+1}, log(u_j / u_{j+1})), ``log_odds_form`` (2 (j/M - c) / (M T)) and
    ``log_odds_residual`` (0: linear in the signed distance to the edge j/M); ``centre_log_ratio`` (the log
    odds at c = xi_j: 1 / (M^2 T)); ``hard_limit`` (lim_{T -> 0+} exp(-2 delta / (M T)) = 0: the membership
    of the farther bin vanishes at any fixed distance delta > 0 from the edge, not uniformly in delta);
    ``du1`` (du_1/dc for M = 3 and symbolic centres x_1..x_3), ``du_form`` ((2/T) u_1 (x_1 - sum_k u_k x_k))
    and ``du_residual`` (0); ``sbece`` (SB-ECE_bin,2^2 = sum_j (sum_i u_ij (a_i - c_i))^2 / (N S_j) for N = 2
    samples and M = 2 generic membership functions), ``dsbece`` (its derivative in c_1), ``dsbece_form``
    ((1/N) sum_j [-2 u_1j G_j + u'_1j (2 G_j (a_1 - c_1) - G_j^2)], G_j = A_j - C_j) and ``dsbece_residual``
    (0); ``dhard`` (the same with u' = 0, hard bins: -2 G_b / N, not zero).
    """
    d = Derivation("Karandikar et al. (2021): soft bin membership")
    c, T, M = sp.symbols("c T M", positive=True)
    j = sp.Symbol("j", positive=True, integer=True)
    xi = lambda k: (k - sp.Rational(1, 2)) / M  # noqa: E731
    g = lambda k: -(c - xi(k)) ** 2 / T  # noqa: E731
    d.add("g", g(j), r"g_{M,T,j}(c)", "the soft-binning logits (Sec. 4.1)")
    lo = d.add("log_odds", sp.expand(g(j) - g(j + 1)), r"\log\frac{u_j(c)}{u_{j+1}(c)}", "adjacent bins")
    form = d.add("log_odds_form", 2 * (j / M - c) / (M * T), r"\frac{2}{MT}\left(\frac{j}{M} - c\right)",
                 "linear in the signed distance to the edge j/M")
    d.add("log_odds_residual", sp.simplify(lo - form), r"\log\frac{u_j}{u_{j+1}} - \frac{2}{MT}(j/M - c)", "0")
    d.add("centre_log_ratio", sp.simplify(lo.subs(c, xi(j))), r"\log\frac{u_j(\xi_j)}{u_{j+1}(\xi_j)}",
          "so u_j / u_{j+1} = exp(1 / (M^2 T)) at a bin centre")
    delta = sp.Symbol("delta", positive=True)
    d.add("hard_limit", sp.limit(sp.exp(-2 * delta / (M * T)), T, 0, "+"),
          r"\lim_{T\to0^+} e^{-2\delta/(MT)}", "0 for every fixed delta > 0: hard binning in the limit")
    x1, x2, x3 = sp.symbols("x_1 x_2 x_3", real=True)
    e = [sp.exp(-(c - x) ** 2 / T) for x in (x1, x2, x3)]
    total = sum(e)
    u = [ek / total for ek in e]
    du1 = d.add("du1", sp.diff(u[0], c), r"\frac{\partial u_1}{\partial c}", "M = 3, symbolic centres")
    du_form = d.add("du_form", 2 / T * u[0] * (x1 - sum(uk * xk for uk, xk in zip(u, (x1, x2, x3)))),
                    r"\frac{2}{T}u_1(c)\left(\xi_1 - \bar\xi(c)\right)", r"\bar\xi = \sum_k u_k \xi_k")
    d.add("du_residual", sp.simplify(du1 - du_form), r"\frac{\partial u_1}{\partial c} - \frac2T u_1(\xi_1 - \bar\xi)",
          "0: the sign of du_j/dc is that of xi_j - xi_bar(c)")
    c1, c2, a1, a2 = sp.symbols("c_1 c_2 a_1 a_2", real=True)
    U = [sp.Function("u_1"), sp.Function("u_2")]
    n = 2
    G = [(Uj(c1) * (a1 - c1) + Uj(c2) * (a2 - c2)) / (Uj(c1) + Uj(c2)) for Uj in U]
    E = d.add("sbece", sum((Uj(c1) * (a1 - c1) + Uj(c2) * (a2 - c2)) ** 2 / (n * (Uj(c1) + Uj(c2))) for Uj in U),
              r"\text{SB-ECE}_{bin,2}^2", "Eq. 11 with p = 2, squared: N = 2 samples, M = 2 bins")
    dE = d.add("dsbece", sp.diff(E, c1), r"\frac{\partial\,\text{SB-ECE}_{bin,2}^2}{\partial c_1}", "")
    dform = d.add("dsbece_form", sum(-2 * Uj(c1) * Gj + sp.diff(Uj(c1), c1) * (2 * Gj * (a1 - c1) - Gj ** 2)
                                     for Uj, Gj in zip(U, G)) / n,
                  r"\frac1N\sum_j\left[-2u_{1j}G_j + u'_{1j}\left(2G_j(a_1 - c_1) - G_j^2\right)\right]",
                  "G_j = A_j - C_j")
    d.add("dsbece_residual", sp.simplify(dE - dform), r"\frac{\partial\,\text{SB-ECE}^2}{\partial c_1} - (\dots)", "0")
    d.add("dhard", sp.simplify(dform.subs({sp.Derivative(Uj(c1), c1): 0 for Uj in U})
                                .subs({U[0](c1): 1, U[1](c1): 0, U[0](c2): 1, U[1](c2): 0})),
          r"\frac{\partial\,\text{ECE}_{bin,2}^2}{\partial c_1}\Big|_{\text{hard, both in bin 1}}",
          "-2 (A_1 - C_1) / N: hard binning leaves a non-zero gradient through C_j")
    return d


@lru_cache(maxsize=None)
def soft_uncertainty() -> Derivation:
    r"""Karandikar et al. (2021), Sec. 4.2: the soft uncertainty :math:`t_{\kappa,T}(h)` and its desiderata.

    Keys: ``t`` (logistic((1/T) log(h (1 - kappa) / ((1 - h) kappa)))); ``identity_residual`` (t_{1/2,1}(h) - h:
    0); ``at_kappa`` (t(kappa): 1/2); ``dt`` (dt/dh), ``dt_form`` (t (1 - t) / (T h (1 - h)), positive on (0, 1))
    and ``dt_residual`` (0); ``limit_0`` and ``limit_1`` (h -> 0+ and h -> 1-: 0 and 1, for every T > 0);
    ``step_above`` and ``step_below`` (T -> 0+ at h = 3/5 and h = 1/5 with kappa = 2/5: 1 and 0, the hard
    threshold 1{h > kappa}).
    """
    d = Derivation("Karandikar et al. (2021): soft uncertainty")
    h, kappa, T = sp.symbols("h kappa T", positive=True)
    t = d.add("t", 1 / (1 + sp.exp(-sp.log(h * (1 - kappa) / ((1 - h) * kappa)) / T)), r"t_{\kappa,T}(h^*)",
              "Sec. 4.2, h* = h / log K")
    d.add("identity_residual", sp.simplify(t.subs({kappa: sp.Rational(1, 2), T: 1}) - h), r"t_{1/2,1}(h) - h",
          "0: the identity is the member kappa = 1/2, T = 1")
    d.add("at_kappa", sp.simplify(t.subs(h, kappa)), r"t_{\kappa,T}(\kappa)", "the soft threshold")
    dt = d.add("dt", sp.diff(t, h), r"\frac{\partial t}{\partial h}", "")
    dt_form = d.add("dt_form", t * (1 - t) / (T * h * (1 - h)), r"\frac{t(1-t)}{T\,h(1-h)}", "> 0 on (0, 1)")
    x = sp.Symbol("x", positive=True)
    # with x = h (1 - kappa) / ((1 - h) kappa), t = x^(1/T) / (1 + x^(1/T)); simplify in that form
    res = sp.simplify(sp.powsimp(sp.expand_log((dt - dt_form), force=True), force=True))
    d.add("dt_residual", res, r"\frac{\partial t}{\partial h} - \frac{t(1-t)}{T h(1-h)}", "0")
    tx = x ** (1 / T) / (1 + x ** (1 / T))
    d.add("limit_0", sp.limit(tx, x, 0, "+"), r"\lim_{h^*\to 0^+} t", "x -> 0 as h* -> 0")
    d.add("limit_1", sp.limit(tx, x, sp.oo), r"\lim_{h^*\to 1^-} t", "x -> infinity as h* -> 1")
    k0 = sp.Rational(2, 5)
    d.add("step_above", sp.limit(t.subs({kappa: k0, h: sp.Rational(3, 5)}), T, 0, "+"),
          r"\lim_{T\to0^+} t_{2/5,T}(3/5)", "above the threshold")
    d.add("step_below", sp.limit(t.subs({kappa: k0, h: sp.Rational(1, 5)}), T, 0, "+"),
          r"\lim_{T\to0^+} t_{2/5,T}(1/5)", "below the threshold")
    return d


@lru_cache(maxsize=None)
def avuc_identity() -> Derivation:
    r"""AvUC (Karandikar et al. 2021, Eq. 13) is -log AvU of Krishnan & Tickoo (2020) with the relaxed counts.

    Keys: ``avuc`` (log(1 + (n_AU + n_IC) / (n_AC + n_IU))), ``avu`` ((n_AC + n_IU) / (n_AC + n_AU + n_IC + n_IU))
    and ``residual`` (avuc + log avu: 0).
    """
    d = Derivation("AvUC = -log AvU")
    nac, nau, nic, niu = sp.symbols("n_AC n_AU n_IC n_IU", positive=True)
    a = d.add("avuc", sp.log(1 + (nau + nic) / (nac + niu)), r"\mathrm{AvUC}", "Eq. 13")
    b = d.add("avu", (nac + niu) / (nac + nau + nic + niu), r"\mathrm{AvU}", "Krishnan & Tickoo (2020)")
    d.add("residual", sp.simplify(sp.expand_log(a + sp.log(b), force=True)), r"\mathrm{AvUC} + \log\mathrm{AvU}", "0")
    return d
