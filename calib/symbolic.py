"""Sympy derivations behind the focal-loss chapters; the chapters display these, they do not retype them.

Each function returns a :class:`Derivation`: an ordered dict of named sympy expressions (the steps), with
a LaTeX label and a note for each, and residuals that simplify to 0 (or limits and solutions) that a
chapter turns into claims. ``Derivation.equations(*keys)`` gives ``sympy.Eq`` objects ready for
``IPython.display.display``.

Mukhoti et al. (2020), *Calibrating Deep Neural Networks using Focal Loss*:

- :func:`prop1`: focal loss, its derivative and the ratio to the cross-entropy derivative, g(p, gamma)
  (Prop. 1, Eqs. 6-7);
- :func:`shape_of_g`: Eqs. 8-10 of App. C, the limits of g and of k, the sign of dk/dp;
- :func:`gamma_one`: g(p, 1), its threshold 1/e and its maximum 1 + e^-2 (Sec. 4, "p0 ~ 0.4");
- :func:`prop2`: the chain of Eq. 11, both Lambert-W branches (Eqs. 12, 13) and what each gives, the
  domain p0 < 1/2;
- :func:`gamma_star_at_inverse_e`: gamma*(1/e) = 1 in closed form;
- :func:`entropy_bound`: the steps of Eq. 4 / App. A, the Bernoulli step and where it needs gamma >= 1,
  and a proof for every gamma >= 0;
- :func:`focal_optimum`: the stationarity condition of Eq. 5 (Fig. 6, footnote 1).

Charoenphakdee et al. (2021), *On Focal Loss for Class-Posterior Probability Estimation*:

- :func:`posterior_recovery`: the lemmas behind Thms. 3, 5, 8, 11, Cor. 9 and Prop. 12 (the paper's
  appendix is not available; the book's reconstruction): where phi comes from, strict convexity, phi',
  phi(1/2), the slope of Thm. 5 and the stationarity condition that gives Psi^gamma.

Karandikar et al. (2021), *Soft Calibration Objectives for Neural Networks*:

- :func:`soft_binning`: the soft bin membership's adjacent log-odds, its derivative, its T -> 0 limit, and
  the gradient of SB-ECE_bin,2^2 in the confidences (Sec. 4.1);
- :func:`soft_uncertainty`: t_{kappa,T} and its desiderata (Sec. 4.2); :func:`avuc_identity`: AvUC = -log AvU.

Sympy often cannot cancel powers of (1 - p) when it only knows p > 0; residuals are therefore simplified
after substituting p = 1 - u with u > 0 (:func:`vanishes`), and limits at p -> 1 are taken as u -> 0+.
"""

from __future__ import annotations

from functools import lru_cache

import sympy as sp

__all__ = [
    "p", "gamma", "p0", "q", "eta", "x", "Label", "Derivation", "vanishes", "focal_loss_expr", "cross_entropy_expr", "gradient_factor_expr",
    "prop1", "shape_of_g", "gamma_one", "prop2", "gamma_star_at_inverse_e", "entropy_bound", "focal_optimum",
    "eq8_prefactor_limit_at_one", "eq8_limit_at_one",
]

#: probability of the true class (0 < p < 1)
p = sp.Symbol("p", positive=True)
#: focal parameter
gamma = sp.Symbol("gamma", positive=True)
#: threshold of Prop. 2
p0 = sp.Symbol("p_0", positive=True)
#: a predicted probability (the argument of Komisarenko & Kull's focal calibration map)
q = sp.Symbol("q", positive=True)
#: target probability of class 1 in the binary problem of Eq. 5 (the posterior P(y = 1 | x); Mukhoti et al.'s q)
eta = sp.Symbol("eta", positive=True)
#: candidate prediction in Eq. 5
x = sp.Symbol("x", positive=True)

_u = sp.Symbol("u", positive=True)          # 1 - p
_a = sp.Symbol("a", positive=True)          # 1 - p0
_b = sp.Symbol("b", negative=True)          # p0 log p0
_W = sp.Symbol("W")                         # a value of Lambert W
_z = sp.Symbol("z")


class Label(sp.Symbol):
    r"""A symbol that prints as its name, verbatim: the LaTeX label of a displayed expression.

    sympy's LaTeX printer reads a plain symbol's name as base, subscripts and superscripts, so a label such as
    ``\varphi^{\gamma}(v)`` printed as ``\varphi^{\gamma(v)}`` and ``\ell_1'(q)`` as ``\ell_{1'(q)}``. A Label
    is printed as written.
    """

    def _latex(self, printer) -> str:
        return self.name


class Derivation(dict):
    """Named sympy expressions of one derivation, in order, with LaTeX labels and notes.

    ``d[key]`` is the expression; ``d.labels[key]`` its LaTeX name; ``d.notes[key]`` a sentence saying what
    it is (with the paper's equation number); ``d.equations(*keys)`` the ``sympy.Eq(label, expr)`` to display.
    """

    def __init__(self, title: str):
        super().__init__()
        self.title = title
        self.labels: dict[str, str] = {}
        self.notes: dict[str, str] = {}

    def add(self, key: str, expr, label: str, note: str = ""):
        """Append the step ``key`` (a sympy expression) with its LaTeX label and note; returns ``expr``."""
        self[key] = expr
        self.labels[key] = label
        self.notes[key] = note
        return expr

    def equations(self, *keys: str) -> list:
        """``sympy.Eq(Symbol(label), expr)`` for the given keys (all non-list keys when none are given)."""
        keys = keys or tuple(k for k in self if not isinstance(self[k], list))
        missing = [k for k in keys if k not in self]
        if missing:
            raise KeyError(f"{', '.join(missing)} not in derivation {self.title!r}; available: {', '.join(self)}.")
        lists = [k for k in keys if isinstance(self[k], list)]
        if lists:
            raise TypeError(f"{', '.join(lists)} hold lists of steps; display their items, e.g. display(*d[{lists[0]!r}]).")
        return [sp.Eq(Label(self.labels[k]), self[k], evaluate=False) for k in keys]


def _simplify_in_u(expr, var=p):
    """Simplify after var = 1 - u (u > 0), so that powers of (1 - var) combine; return in terms of var."""
    e = sp.sympify(expr).subs(var, 1 - _u)
    e = sp.powsimp(sp.expand(sp.powsimp(sp.expand(e), force=True)), force=True)
    return sp.simplify(e).subs(_u, 1 - var)


def vanishes(expr, var=p) -> bool:
    """True when ``expr`` simplifies to exactly 0 (after the substitution var = 1 - u, u > 0)."""
    return sp.simplify(expr) == 0 or _simplify_in_u(expr, var) == 0


def _limit_at_one(expr, var=p):
    """lim_{var -> 1-} expr, taken as u -> 0+ with var = 1 - u."""
    return sp.limit(sp.sympify(expr).subs(var, 1 - _u), _u, 0, "+")


# -------------------------------------------------------------------------------------------- the losses

def focal_loss_expr(prob=p, gam=gamma):
    """L_f = -(1 - p)^gamma log p (Lin et al. 2017; Mukhoti et al. 2020, Sec. 4)."""
    return -(1 - prob) ** gam * sp.log(prob)


def cross_entropy_expr(prob=p):
    """L_c = -log p."""
    return -sp.log(prob)


def gradient_factor_expr(prob=p, gam=gamma):
    """g(p, gamma) = (1-p)^gamma - gamma p (1-p)^(gamma-1) log p, as printed (Mukhoti et al. 2020, Eq. 7)."""
    return (1 - prob) ** gam - gam * prob * (1 - prob) ** (gam - 1) * sp.log(prob)


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
    d.add("residual", _simplify_in_u(ratio - g), r"\text{ratio} - g(p, \gamma)", "0: the ratio is g (Prop. 1)")
    d.add("eq6_residual", _simplify_in_u(dlf - dlc * g),
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
    d.add("eq8_residual", _simplify_in_u((d["dg"] - eq8) / (1 - p) ** (gamma - 2)),
          r"\left(\frac{\partial g}{\partial p} - \text{Eq. 8}\right) / (1-p)^{\gamma-2}", "0: Eq. 8 is dg/dp")
    d.add("eq9", eq9, r"\text{Eq. 9}", "the bracket of Eq. 8, which carries its sign")
    k = d.add("k", 2 * (1 - p) / sp.log(p) + 1 - gamma * p, r"k(p, \gamma)", "Eq. 10")
    d.add("k_residual", sp.simplify(eq9 / (-sp.log(p)) - k), r"\text{Eq. 9} / (-\log p) - k",
          "0: Eq. 10 is Eq. 9 divided by -log p > 0")
    d.add("k_at_0", sp.limit(k, p, 0, "+"), r"\lim_{p \to 0^+} k", "1")
    d.add("k_at_1", _limit_at_one(k), r"\lim_{p \to 1^-} k", "-(1 + gamma), by l'Hopital")
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
    d.add("g_at_1", _limit_at_one(g_factored), r"\lim_{p \to 1^-} g(p, \gamma)", "0 for every gamma > 0")
    d.add("dg_at_0", sp.limit(eq8, p, 0, "+"), r"\lim_{p \to 0^+} \frac{\partial g}{\partial p}",
          "+oo: dg/dp is not 'a positive value at p = 0'")
    return d


def eq8_prefactor_limit_at_one(gamma_value):
    """lim_{p -> 1-} gamma (1-p)^(gamma-2) for a given gamma: 0 only for gamma > 2 (App. C says it is 0)."""
    gv = sp.nsimplify(gamma_value)
    return _limit_at_one(gv * (1 - p) ** (gv - 2))


def eq8_limit_at_one(gamma_value):
    """lim_{p -> 1-} dg/dp (Eq. 8) for a given gamma: -oo (gamma < 1), -2 (gamma = 1), 0 (gamma > 1)."""
    gv = sp.nsimplify(gamma_value)
    return _limit_at_one(shape_of_g()["eq8"].subs(gamma, gv))


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
    d.add("ab_residual", _simplify_in_u(g_ab.subs({a: 1 - p0, b: p0 * sp.log(p0)}) - g_p0, p0),
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
    d.add("dB_residual", _simplify_in_u(dB - dB_form), r"\frac{\partial B}{\partial p} - (\dots)", "0")
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
          ">= 0: -log p >= 0, log^2(1-p) >= 0, (1-p)^gamma >= 0, so D is convex in gamma and D >= D(0) + D'(0) gamma >= 0")
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
    d.add("d_risk_residual", _simplify_in_u(sp.expand(dr - form), x), r"R'(x) - (\dots)", "0")
    sol = sp.solve(sp.Eq(eta * gradient_factor_expr(x, gamma) / x, (1 - eta) * gradient_factor_expr(1 - x, gamma) / (1 - x)), eta)
    phi = lambda t: t / gradient_factor_expr(t, gamma)  # noqa: E731
    q_of_x = d.add("q_of_x", sol[0], r"\eta(x)", "stationarity solved for eta")
    form_q = d.add("q_of_x_form", phi(x) / (phi(x) + phi(1 - x)), r"\frac{h(x)}{h(x) + h(1-x)}",
                   "h(x) = x / g(x, gamma): eta is proportional to p / g(p, gamma)")
    numerator, _ = sp.fraction(sp.together(q_of_x - form_q))
    numerator = _simplify_in_u(sp.expand_log(numerator, force=True), x)
    d.add("q_of_x_residual", sp.simplify(sp.powsimp(sp.expand(numerator), force=True)),
          r"\operatorname{numerator}\left(\eta(x) - \frac{h(x)}{h(x) + h(1-x)}\right)", "0")
    one_hot = d.add("d_risk_one_hot", sp.simplify(dr.subs(eta, 1)), r"R'(x)\big|_{\eta=1}", "= -g(x, gamma)/x < 0")
    d.add("d_risk_one_hot_residual", _simplify_in_u(one_hot + gradient_factor_expr(x, gamma) / x, x),
          r"R'(x)\big|_{\eta=1} + \frac{g(x, \gamma)}{x}", "0")
    return d


# ------------------------------------------------------------- Charoenphakdee et al. (2021), Secs. 3-5

__all__ += ["v", "eta1", "eta2", "posterior_recovery"]

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
    d.add("L1_residual", _simplify_in_u(dell + phi / v, v), r"\frac{d\ell^\gamma}{dv} + \frac{\varphi^\gamma(v)}{v}",
          "0: phi is -v times the derivative of the loss (Sec. 4.2, 'how phi was derived')")
    d2 = d.add("d2ell", sp.diff(ell, v, 2), r"\frac{d^2\ell^\gamma}{dv^2}", "")
    B = d.add("B", (1 - v) ** 2 + 2 * gamma * v * (1 - v) - gamma * (gamma - 1) * v ** 2 * sp.log(v), r"B_\gamma(v)",
              "> 0 on (0, 1) for every gamma >= 0")
    d.add("L2_residual", _simplify_in_u((v ** 2 * d2 - (1 - v) ** (gamma - 2) * B) / (1 - v) ** (gamma - 2), v),
          r"\left(v^2 \frac{d^2\ell^\gamma}{dv^2} - (1-v)^{\gamma-2} B_\gamma(v)\right) / (1-v)^{\gamma-2}",
          "0: the pointwise focal risk is strictly convex")
    d.add("B_lower_gap", sp.factor(sp.expand(B - (1 - v) * ((1 - v) + gamma * (1 + gamma) * v))),
          r"B_\gamma(v) - (1-v)\left((1-v) + \gamma(1+\gamma)v\right)",
          "gamma (1 - gamma) v (v log v + 1 - v) >= 0 for gamma <= 1 (log v >= 1 - 1/v)")
    h = d.add("h", v / phi, r"h^\gamma(v)", "Eq. 13")
    dphi = d.add("dphi", sp.diff(phi, v), r"\frac{d\varphi^\gamma}{dv}", "")
    dphi_form = d.add("dphi_form", gamma * (1 - v) ** (gamma - 2) * (-2 * (1 - v) + (gamma * v - 1) * sp.log(v)),
                      r"\gamma(1-v)^{\gamma-2}\left[-2(1-v) + (\gamma v - 1)\log v\right]",
                      "zero at tau_oc: (gamma v - 1) log v = 2 (1 - v)")
    d.add("L4_residual", _simplify_in_u((dphi - dphi_form) / (1 - v) ** (gamma - 2), v),
          r"\left(\frac{d\varphi^\gamma}{dv} - (\dots)\right) / (1-v)^{\gamma-2}", "0")
    d.add("L3_residual", _simplify_in_u((phi - v * dphi_form - v ** 2 * d2) / (1 - v) ** (gamma - 2), v),
          r"\left(\varphi - v\varphi' - v^2 \ell''\right) / (1-v)^{\gamma-2}",
          "0: h' = (phi - v phi') / phi^2 = v^2 ell'' / phi^2 > 0, h increases (Prop. 12)")
    half = d.add("phi_half", sp.simplify(phi.subs(v, sp.Rational(1, 2))), r"\varphi^\gamma(1/2)", "")
    half_form = d.add("phi_half_form", 2 ** (-gamma) * (1 + gamma * sp.log(2)), r"2^{-\gamma}(1 + \gamma\log 2)", "")
    d.add("L5_residual", sp.simplify(sp.expand_log(half - half_form, force=True)), r"\varphi^\gamma(1/2) - (\dots)", "0")
    tt = sp.Symbol("t", positive=True)
    tb = d.add("t_bound", sp.exp(-tt) * (1 + tt), r"e^{-t}(1+t)", "phi(1/2) with t = gamma log 2; equals 1 at t = 0")
    d.add("t_bound_dt", sp.simplify(sp.diff(tb, tt)), r"\frac{d}{dt}e^{-t}(1+t)", "-t e^-t < 0: so phi(1/2) < 1")
    q1 = sp.Symbol("q_1", positive=True)
    W2 = d.add("W2", -eta1 * (1 - q1) ** gamma * sp.log(q1) - eta2 * q1 ** gamma * sp.log(1 - q1),
               r"W(\mathbf{q}; \boldsymbol\eta)", "Eq. 7, K = 2, q = (q_1, 1 - q_1)")
    slope = d.add("thm5_slope", sp.diff(W2.subs(q1, eta1 + _t), _t).subs(_t, 0).subs(eta2, 1 - eta1),
                  r"\frac{d}{dt} W(\boldsymbol\eta + t(\mathbf{e}_1 - \mathbf{e}_2); \boldsymbol\eta)\Big|_{t=0}", "")
    d.add("thm5_residual", _simplify_in_u(sp.expand(slope - (gradient_factor_expr(1 - eta1, gamma)
                                                              - gradient_factor_expr(eta1, gamma))), eta1),
          r"\text{slope} - (\varphi^\gamma(\eta_2) - \varphi^\gamma(\eta_1))", "0: nonzero unless phi(eta1) = phi(eta2)")
    lam = sp.Symbol("lambda", positive=True)
    qi, ei = sp.symbols("q_i eta_i", positive=True)
    d.add("kkt", sp.solve(sp.Eq(ei * gradient_factor_expr(qi, gamma) / qi, lam), ei)[0], r"\eta_i",
          "KKT: eta_i phi(q_i) / q_i = lambda, so eta_i is proportional to h(q_i) (Thm. 11)")
    return d


# ------------------------------------------------------------- Zhou et al. (2025), reweighted risks
# Revisiting Reweighted Risk for Calibration: AURC, Focal and Inverse Focal Loss. App. C's gradients (the
# inverse-focal sign error), the positive-gradient threshold 1/W(1/e), the weight integrals of Fig. 1, and
# the 1/kappa that Prop. 4.6 drops. Integrals of -log(1 - u) are taken with t = 1 - u (sympy otherwise
# takes a complex branch).

__all__ += ["kappa", "reweighted_risk"]

#: low-confidence coverage of the AU loss (Zhou et al. 2025, App. E.2)
kappa = sp.Symbol("kappa", positive=True)


@lru_cache(maxsize=None)
def reweighted_risk() -> Derivation:
    """Zhou et al. (2025): focal / inverse focal gradients (App. C.1-C.2), gamma* = 1/W(1/e), the weight
    integrals (Fig. 1), E[beta] = kappa for Eq. 12 and the factor 1/kappa between Eqs. 11 and 12 (Prop. 4.6).

    Keys: ``fl``, ``fl_ce_residual`` (0), ``dfl``, ``dfl_printed``, ``dfl_residual`` (0), ``dfl_limit_3`` and
    ``dfl_limit_half`` (0), ``fl_factor_residual`` (-p dFL/dp - g(p, gamma), 0); ``ifl``, ``difl``,
    ``difl_printed``, ``difl_residual`` (-2 gamma (1+p)^(gamma-1) log p, not 0), ``difl_at_one`` (-2^gamma),
    ``ifl_factor`` (-p dIFL/dp), ``ifl_factor_residual`` (0), ``threshold_h`` ((1+p)/(-p log p)),
    ``threshold_numerator`` (p + log p + 1), ``p_star`` (W(1/e)), ``p_star_residual`` (W e^W - 1/e to 50
    digits),
    ``gamma_star`` (1/W(1/e)), ``gamma_star_value``; ``fl_weight_integral`` (1/(gamma+1)),
    ``ifl_weight_integral``, ``aurc_weight_integral`` (1), ``eq12_mean`` (kappa), ``eq11_low`` and
    ``eq11_over_eq12`` (1/kappa).
    """
    d = Derivation("reweighted risks (Zhou et al. 2025)")
    fl = d.add("fl", -(1 - p) ** gamma * sp.log(p), r"\ell_{FL}", "Def. 3.1, Eq. 2")
    d.add("fl_ce_residual", sp.simplify(fl.subs(gamma, 0) + sp.log(p)), r"\ell_{FL}|_{\gamma=0} + \log p",
          "0: focal loss with gamma = 0 is cross-entropy")
    dfl = d.add("dfl", sp.diff(fl, p), r"\frac{\partial \ell_{FL}}{\partial p}", "")
    dfl_printed = d.add("dfl_printed", gamma * (1 - p) ** (gamma - 1) * sp.log(p) - (1 - p) ** gamma / p,
                        r"\left.\frac{\partial \ell_{FL}}{\partial p}\right|_{\text{App. C.1}}", "as printed")
    d.add("dfl_residual", _simplify_in_u(dfl - dfl_printed), r"\frac{\partial \ell_{FL}}{\partial p} - (\text{C.1})",
          "0: App. C.1 is right")
    d.add("dfl_limit_3", _limit_at_one(dfl.subs(gamma, 3)), r"\lim_{p\to1}\frac{\partial \ell_{FL}}{\partial p}\Big|_{\gamma=3}", "0")
    d.add("dfl_limit_half", _limit_at_one(dfl.subs(gamma, sp.Rational(1, 2))),
          r"\lim_{p\to1}\frac{\partial \ell_{FL}}{\partial p}\Big|_{\gamma=1/2}", "0")
    d.add("fl_factor_residual", _simplify_in_u(-p * dfl - gradient_factor_expr(p, gamma)),
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


# ------------------------------------------------------------- Komisarenko & Kull (2024), Props. 1-5
# Convexity of focal loss (Prop. 1), the binary decomposition and the map p_hat (Prop. 2), focal calibration
# on logits and the algebra of the Prop. 3 proof, the multiclass map (Prop. 4) and the derivative used in the
# Prop. 5 proof (chapter 07).

__all__ += ["s", "focal_convexity", "binary_focal_decomposition", "focal_calibration_on_logits",
            "ts_bound_proof_algebra", "multiclass_focal_decomposition", "prop5_proof_derivative"]

#: a logit (real)
s = sp.Symbol("s", real=True)


@lru_cache(maxsize=None)
def focal_convexity() -> Derivation:
    """Komisarenko & Kull (2024), Prop. 1 (App. A.1): focal loss is convex in p, through its second derivative.

    Keys: ``L`` (-(1-p)^gamma log p), ``d1`` (computed), ``d1_paper`` (App. A.1), ``d1_residual`` (0), ``d2``
    (computed), ``d2_paper`` (App. A.1 as printed), ``d2_residual`` (0), ``quadratic`` (the printed quadratic in
    gamma with its coefficients ``a2``, ``a1``, ``a0``), ``quadratic_residual`` ((d2 - quadratic) / (1-p)^(gamma-2), 0),
    ``a1_factored`` ((1-p)^(gamma-2) (2 - 2p + p log p) / p), ``a1_residual`` (0), ``a1_bracket``
    (2 - 2p + p log p), ``a1_bracket_dp`` (log p - 1 < 0: the bracket decreases), ``a1_bracket_at_1`` (0),
    ``d2_gamma_one`` ((p + 1) / p^2).
    """
    d = Derivation("Komisarenko & Kull Prop. 1: focal loss is convex in p")
    L = d.add("L", focal_loss_expr(), r"L_{FL}(p, y{=}1)", "focal loss of the predicted probability p of the true class")
    d1 = d.add("d1", sp.diff(L, p), r"\partial_p L_{FL}", "first derivative, computed")
    d1p = d.add("d1_paper", gamma * (1 - p) ** (gamma - 1) * sp.log(p) - (1 - p) ** gamma / p,
                r"\partial_p L_{FL}\ \text{(App. A.1)}", "as printed")
    d.add("d1_residual", _simplify_in_u(d1 - d1p), r"\partial_p L_{FL} - \text{(App. A.1)}", "0")
    d2 = d.add("d2", sp.diff(L, p, 2), r"\partial^2_p L_{FL}", "second derivative, computed")
    d2p = d.add("d2_paper", gamma * (1 - p) ** (gamma - 1) / p
                - gamma * (gamma - 1) * (1 - p) ** (gamma - 2) * sp.log(p)
                - (-gamma * (1 - p) ** (gamma - 1) * p - (1 - p) ** gamma) / p ** 2,
                r"\partial^2_p L_{FL}\ \text{(App. A.1)}", "as printed")
    d.add("d2_residual", _simplify_in_u(d2 - d2p), r"\partial^2_p L_{FL} - \text{(App. A.1)}", "0")
    a2 = d.add("a2", -sp.log(p) * (1 - p) ** (gamma - 2), r"a_2", "coefficient of gamma^2: >= 0")
    a1 = d.add("a1", 2 * (1 - p) ** (gamma - 1) / p + (1 - p) ** (gamma - 2) * sp.log(p), r"a_1",
               "coefficient of gamma, as printed")
    a0 = d.add("a0", (1 - p) ** gamma / p ** 2, r"a_0", "constant term: > 0")
    quad = d.add("quadratic", gamma ** 2 * a2 + gamma * a1 + a0, r"a_2 \gamma^2 + a_1 \gamma + a_0",
                 "the printed quadratic in gamma (its coefficients still depend on gamma through (1-p)^(gamma-2))")
    d.add("quadratic_residual", _simplify_in_u(sp.expand((d2 - quad) / (1 - p) ** (gamma - 2))),
          r"\left(\partial^2_p L_{FL} - a_2\gamma^2 - a_1\gamma - a_0\right) / (1-p)^{\gamma-2}", "0")
    bracket = d.add("a1_bracket", 2 - 2 * p + p * sp.log(p), r"2 - 2p + p \log p", "the sign of a_1")
    d.add("a1_factored", (1 - p) ** (gamma - 2) * bracket / p, r"\frac{(1-p)^{\gamma-2}}{p}(2 - 2p + p\log p)",
          "a_1 factored")
    d.add("a1_residual",
          _simplify_in_u(sp.expand((a1 - (1 - p) ** (gamma - 2) * bracket / p) / (1 - p) ** (gamma - 2))),
          r"\left(a_1 - \tfrac{(1-p)^{\gamma-2}}{p}(2 - 2p + p\log p)\right) / (1-p)^{\gamma-2}", "0")
    d.add("a1_bracket_dp", sp.simplify(sp.diff(bracket, p)), r"\frac{d}{dp}(2 - 2p + p\log p)",
          "log p - 1 < 0 on (0, 1): the bracket decreases to its value 0 at p = 1, so it is positive")
    d.add("a1_bracket_at_1", bracket.subs(p, 1), r"(2 - 2p + p\log p)\big|_{p=1}", "0")
    d.add("d2_gamma_one", sp.simplify(d2.subs(gamma, 1)), r"\partial^2_p L_{FL}\big|_{\gamma=1}", "(p + 1) / p^2 > 0")
    return d


def _partial_losses():
    l1 = -(1 - q) ** gamma * sp.log(q)           # loss on a positive, predicted P(y=1) = q
    l0 = -q ** gamma * sp.log(1 - q)             # loss on a negative
    return l1, l0


@lru_cache(maxsize=None)
def binary_focal_decomposition() -> Derivation:
    """Komisarenko & Kull (2024), Prop. 2 (App. A.2): the binary focal calibration map p_hat from the partial losses.

    With q the predicted P(y = 1) and p the true one, the conditional risk p l_1(q) + (1 - p) l_0(q) is
    stationary where p l_1'(q) + (1 - p) l_0'(q) = 0, i.e. at the q whose p is
    ``p_hat(q) = l_0'(q) / (l_0'(q) - l_1'(q))``: the map that turns the focal-risk minimiser back into p.

    Keys: ``l1``, ``l0`` (partial losses), ``dl1``, ``dl0``, ``risk_derivative``, ``p_of_q`` (stationarity solved
    for p), ``p_hat`` (l_0' / (l_0' - l_1')), ``p_of_q_residual`` (0), ``p_hat_paper`` (Prop. 2 closed form),
    ``paper_residual`` (numerator of p_hat - p_hat_paper: 0), ``p_hat_g`` ((q/g(q)) / (q/g(q) + (1-q)/g(1-q))),
    ``g_residual`` (numerator of p_hat - p_hat_g: 0), ``dl1_g`` (-q l_1'(q) - g(q, gamma): 0, the link to
    Mukhoti's g), ``p_hat_gamma_zero`` (q: at gamma = 0 the map is the identity), ``p_hat_at_half`` (1/2).
    """
    d = Derivation("Komisarenko & Kull Prop. 2: the binary focal calibration map")
    l1, l0 = _partial_losses()
    d.add("l1", l1, r"\ell_1(q)", "focal loss on a positive when P(y=1) is predicted as q")
    d.add("l0", l0, r"\ell_0(q)", "focal loss on a negative")
    dl1 = d.add("dl1", sp.diff(l1, q), r"\ell_1'(q)", "< 0")
    dl0 = d.add("dl0", sp.diff(l0, q), r"\ell_0'(q)", "> 0")
    d.add("risk_derivative", p * dl1 + (1 - p) * dl0, r"\partial_q R(p, q)", "derivative of p l_1(q) + (1-p) l_0(q)")
    p_of_q = d.add("p_of_q", sp.solve(sp.Eq(p * dl1 + (1 - p) * dl0, 0), p)[0], r"p(q)",
                   "the p for which q is stationary")
    p_hat = d.add("p_hat", dl0 / (dl0 - dl1), r"\hat p(q)", "ratio of the partial-loss derivatives")
    d.add("p_of_q_residual", sp.simplify(p_of_q - p_hat), r"p(q) - \hat p(q)", "0")
    paper = d.add("p_hat_paper", 1 / (1 + ((1 - q) / q) ** gamma * ((1 - q) - gamma * q * sp.log(q))
                                      / (q - gamma * (1 - q) * sp.log(1 - q))),
                  r"\hat p(q)\ \text{(Prop. 2)}", "the paper's closed form")
    num, _ = sp.fraction(sp.together(sp.expand_power_base(sp.powsimp(p_hat - paper, force=True), force=True)))
    d.add("paper_residual", _simplify_in_u(sp.powsimp(sp.expand(num), force=True), q),
          r"\operatorname{numerator}\left(\hat p - \hat p_{\text{Prop. 2}}\right)", "0")
    w = lambda t: t / gradient_factor_expr(t, gamma)  # noqa: E731
    form_g = d.add("p_hat_g", w(q) / (w(q) + w(1 - q)),
                   r"\frac{q/g(q,\gamma)}{q/g(q,\gamma) + (1-q)/g(1-q,\gamma)}", "with Mukhoti's gradient factor g")
    num_g, _ = sp.fraction(sp.together(p_hat - form_g))
    d.add("g_residual", _simplify_in_u(sp.powsimp(sp.expand(num_g), force=True), q),
          r"\operatorname{numerator}\left(\hat p - \frac{q/g(q)}{q/g(q) + (1-q)/g(1-q)}\right)", "0")
    d.add("dl1_g", _simplify_in_u(sp.expand(-q * dl1 - gradient_factor_expr(q, gamma)), q), r"-q\,\ell_1'(q) - g(q,\gamma)",
          "0: the derivative of the positive partial loss is -g(q, gamma) / q")
    d.add("p_hat_gamma_zero", sp.simplify(p_hat.subs(gamma, 0)), r"\hat p(q)\big|_{\gamma=0}",
          "q: cross-entropy is proper")
    d.add("p_hat_at_half", sp.simplify(p_hat.subs(q, sp.Rational(1, 2))), r"\hat p(1/2)", "1/2")
    return d


@lru_cache(maxsize=None)
def focal_calibration_on_logits() -> Derivation:
    """Komisarenko & Kull (2024), Prop. 3 and App. A.3: FC(s) = p_hat(sigmoid(s)), f_gamma and its limits.

    Keys: ``FC`` (p_hat at q = 1 / (1 + e^-s), simplified), ``FC_paper`` (the paper's form in s),
    ``FC_paper_residual`` (0 after exponentials are expanded), ``f`` (f_gamma(s), App. A.3), ``FC_f``
    (1 / (1 + e^-(gamma+1) s f)), ``FC_f_residual`` (0), ``logit_FC`` ((gamma+1) s - log f), ``f_at_0`` (1),
    ``f_at_plus_inf`` (gamma + 1), ``f_at_minus_inf`` (1 / (gamma + 1)), ``df_at_0``
    (gamma (2 log 2 - 1) / (1 + gamma log 2)), ``beta_at_0`` (gamma + 1 - f'(0), the sharp lower inverse
    temperature for gamma <= 5), ``symmetry`` (f(-s) f(s) - 1: 0, so FC(-s) = 1 - FC(s)).
    """
    d = Derivation("Komisarenko & Kull Prop. 3: focal calibration on logits")
    e = sp.exp
    sig = 1 / (1 + e(-s))
    p_hat = binary_focal_decomposition()["p_hat_paper"]
    d.add("FC", p_hat.subs(q, sig), r"FC(s) = \hat p_\gamma(\sigma(s))", "by definition")
    fc_paper = d.add("FC_paper", 1 / (1 + e(-gamma * s) * (e(-s) + gamma * sp.log(1 + e(-s)))
                                      / (1 + gamma * e(-s) * sp.log(1 + e(s)))),
                     r"FC(s)\ \text{(Prop. 3)}", "the paper's form in s")
    f = d.add("f", (gamma * e(s) * sp.log(1 + e(-s)) + 1) / (1 + gamma * e(-s) * sp.log(1 + e(s))),
              r"f_\gamma(s)", "App. A.3")
    fc_f = d.add("FC_f", 1 / (1 + e(-(gamma + 1) * s) * f), r"\frac{1}{1 + e^{-(\gamma+1)s} f_\gamma(s)}", "App. A.3")
    # p_hat(sigma(s)) against the paper's forms, numerically at random points (sympy cannot cancel
    # log(1 - sigma(s)) against log(1 + e^s) symbolically without help), and symbolically after rewriting
    # log(sigma(s)) = -log(1 + e^-s), log(1 - sigma(s)) = -log(1 + e^s).
    lq, l1q = sp.Symbol("lq"), sp.Symbol("l1q")
    qq, r = sp.Symbol("qq", positive=True), sp.Symbol("r", positive=True)
    expr = (((1 - qq) / qq) ** gamma * ((1 - qq) - gamma * qq * lq) / (qq - gamma * (1 - qq) * l1q))
    expr = expr.subs({lq: -sp.log(1 + e(-s)), l1q: -sp.log(1 + e(s))}).subs(qq, sig)
    expr = sp.powsimp(sp.simplify(expr.subs(e(s), r).subs(e(-s), 1 / r)), force=True)
    ratio_paper = (e(-gamma * s) * (e(-s) + gamma * sp.log(1 + e(-s))) / (1 + gamma * e(-s) * sp.log(1 + e(s))))
    ratio_paper = ratio_paper.subs(e(-gamma * s), r ** -gamma).subs(e(s), r).subs(e(-s), 1 / r)
    d.add("FC_paper_residual", sp.simplify(sp.powsimp(sp.expand_power_base(expr / ratio_paper, force=True),
                                                      force=True) - 1),
          r"\frac{1 - \hat p(\sigma(s))}{\hat p(\sigma(s))} \Big/ "
          r"\frac{1 - FC_{\text{Prop. 3}}(s)}{FC_{\text{Prop. 3}}(s)} - 1",
          "0 (with r = e^s)")
    ratio_f = (e(-(gamma + 1) * s) * f).subs(e(-(gamma + 1) * s), r ** (-gamma - 1)).subs(e(s), r).subs(e(-s), 1 / r)
    d.add("FC_f_residual", sp.simplify(sp.powsimp(sp.expand_power_base(ratio_paper / ratio_f, force=True),
                                                  force=True) - 1),
          r"\frac{e^{-\gamma s}(e^{-s} + \gamma\log(1+e^{-s}))}{1 + \gamma e^{-s}\log(1+e^{s})} \Big/ "
          r"\left(e^{-(\gamma+1)s} f_\gamma(s)\right) - 1", "0: the two forms of App. A.3 agree")
    d.add("logit_FC", (gamma + 1) * s - sp.log(f), r"\operatorname{logit} FC(s)",
          "(gamma + 1) s - log f_gamma(s): the stable form")
    d.add("f_at_0", sp.simplify(f.subs(s, 0)), r"f_\gamma(0)", "1")
    d.add("f_at_plus_inf", sp.limit(f, s, sp.oo), r"\lim_{s \to +\infty} f_\gamma(s)", "gamma + 1")
    d.add("f_at_minus_inf", sp.limit(f, s, -sp.oo), r"\lim_{s \to -\infty} f_\gamma(s)", "1 / (gamma + 1)")
    df0 = d.add("df_at_0", sp.factor(sp.expand_log(sp.simplify(sp.diff(f, s).subs(s, 0)), force=True)), r"f_\gamma'(0)",
                "gamma (2 log 2 - 1) / (1 + gamma log 2)")
    d.add("beta_at_0", gamma + 1 - df0, r"\beta(0) = \lim_{s\to 0} \frac{\operatorname{logit}FC(s)}{s}",
          "gamma + 1 - f'(0): the sharp lower inverse temperature for gamma <= 5")
    d.add("symmetry", sp.simplify(sp.expand_log(f.subs(s, -s) * f, force=True) - 1), r"f_\gamma(-s) f_\gamma(s) - 1",
          "0: log f is odd, so FC(-s) = 1 - FC(s)")
    return d


@lru_cache(maxsize=None)
def ts_bound_proof_algebra() -> Derivation:
    """The algebra at the end of the Prop. 3 proof (App. A.3), with the slip that the paper makes.

    Keys: ``numerator`` (gamma^3 + 2 gamma^2 (1 + log^2 2) + gamma (1 + 2 log 2)), ``difference`` (numerator -
    (gamma + 1)^3, collected in gamma), ``difference_paper`` (the printed gamma^2 (2 log^2 2 - 1) + gamma
    (2 log 2 - 1) - 1), ``paper_slip`` (difference - difference_paper: -gamma, so the printed linear
    coefficient is off by one), ``discriminant`` (of the correct quadratic: 12 log^2 2 - 8 log 2 > 0),
    ``discriminant_paper`` (the printed -3 + 12 log^2 2 - 4 log 2 < 0), ``roots`` (of the correct quadratic,
    both negative), ``identity_paper`` (e^s log(1 + e^-s) - log((1 + e^-s) e^s), the printed identity: not 0),
    ``identity`` (e^s log(1 + e^-s) - log((1 + e^-s)^(e^s)): 0).
    """
    d = Derivation("Prop. 3 proof: the closing algebra")
    L2 = sp.log(2)
    num = d.add("numerator", gamma ** 3 + 2 * gamma ** 2 * (1 + L2 ** 2) + gamma * (1 + 2 * L2),
                r"N(\gamma)", "the bound's numerator, App. A.3")
    diff = d.add("difference", sp.collect(sp.expand(num - (gamma + 1) ** 3), gamma), r"N(\gamma) - (\gamma+1)^3",
                 "must be < 0 for the bound f' < (gamma + 1) / 2")
    paper = d.add("difference_paper", gamma ** 2 * (2 * L2 ** 2 - 1) + gamma * (2 * L2 - 1) - 1,
                  r"N(\gamma) - (\gamma+1)^3\ \text{(printed)}", "as printed")
    d.add("paper_slip", sp.simplify(diff - paper), r"\text{correct} - \text{printed}",
          "-gamma: the linear coefficient is 2 log 2 - 2, not 2 log 2 - 1")
    a, b, c = 2 * L2 ** 2 - 1, 2 * L2 - 2, -1
    d.add("discriminant", sp.expand(b ** 2 - 4 * a * c), r"D", "12 log^2 2 - 8 log 2 = 0.2203 > 0")
    d.add("discriminant_paper", sp.expand((2 * L2 - 1) ** 2 - 4 * a * c), r"D_{\text{printed}}",
          "-3 + 12 log^2 2 - 4 log 2 = -0.0072 < 0 comes from the slip")
    g_real = sp.Symbol("gamma", real=True)
    d.add("roots", sp.solve(sp.Eq(a * g_real ** 2 + b * g_real + c, 0), g_real),
          r"\text{roots}", "both negative, so the quadratic (leading coefficient < 0) is negative for gamma > 0")
    d.add("identity_paper", sp.exp(s) * sp.log(1 + sp.exp(-s)) - sp.log((1 + sp.exp(-s)) * sp.exp(s)),
          r"e^s\log(1+e^{-s}) - \log\left((1+e^{-s})e^s\right)", "the printed identity: not 0 (e.g. at s = 0)")
    d.add("identity", sp.simplify(sp.expand_log(sp.exp(s) * sp.log(1 + sp.exp(-s))
                                                - sp.log((1 + sp.exp(-s)) ** sp.exp(s)), force=True)),
          r"e^s\log(1+e^{-s}) - \log\left((1+e^{-s})^{e^s}\right)", "0: the intended identity")
    return d


@lru_cache(maxsize=None)
def multiclass_focal_decomposition() -> Derivation:
    """Komisarenko & Kull (2024), Prop. 4 (Eq. 1, App. A.4): the multiclass map from Lagrange stationarity.

    Minimising sum_i p_i L(q_i) subject to sum_i q_i = 1, with L(q) = -(1-q)^gamma log q, gives
    p_j L'(q_j) = lambda, so ``p_j = (1/L'(q_j)) / sum_i (1/L'(q_i))`` (Eq. 1). Since ``-q L'(q) = g(q, gamma)``,
    ``1 / L'(q_j) = -q_j / g(q_j, gamma)`` and ``p_hat_j`` is proportional to ``q_j / g(q_j, gamma)``.

    Keys: ``L``, ``dL`` (computed), ``dL_paper`` ((1-q)^gamma (gamma log q / (1-q) - 1/q), Eq. 1's
    denominator), ``dL_residual`` (0), ``inverse_dL`` (1 / L'), ``inverse_dL_g`` (-q / g(q)), ``g_residual``
    (-q L'(q) - g(q, gamma): 0), ``lagrangian`` (sum_i p_i L(q_i) + lambda (sum_i q_i - 1) for three classes),
    ``stationarity`` (its q-derivatives), ``lambda`` (1 / sum_i 1/L'(q_i)), ``p_from_stationarity`` (p_j),
    ``binary_residual`` (n = 2: the odds of Eq. 1 over those of Prop. 2's p_hat, minus 1: 0).
    """
    d = Derivation("Komisarenko & Kull Prop. 4: the multiclass focal calibration map")
    L = d.add("L", focal_loss_expr(q, gamma), r"L(q)", "focal loss of the predicted probability q of the true class")
    dL = d.add("dL", sp.diff(L, q), r"L'(q)", "computed")
    dLp = d.add("dL_paper", (1 - q) ** gamma * (gamma * sp.log(q) / (1 - q) - 1 / q), r"L'(q)\ \text{(Eq. 1)}",
                "the paper's denominator")
    d.add("dL_residual", _simplify_in_u(sp.expand(dL - dLp), q), r"L'(q) - \text{(Eq. 1)}", "0")
    d.add("inverse_dL", 1 / dLp, r"1 / L'(q)", "")
    d.add("inverse_dL_g", -q / gradient_factor_expr(q, gamma), r"-q / g(q, \gamma)", "the same, with Mukhoti's g")
    d.add("g_residual", _simplify_in_u(sp.expand(-q * dL - gradient_factor_expr(q, gamma)), q), r"-q L'(q) - g(q, \gamma)",
          "0, so p_hat_j is proportional to q_j / g(q_j, gamma)")
    qs = sp.symbols("q_1:4", positive=True)
    ps = sp.symbols("p_1:4", positive=True)
    lam = sp.Symbol("lambda")
    lag = d.add("lagrangian", sum(pi * focal_loss_expr(qi, gamma) for pi, qi in zip(ps, qs)) + lam * (sum(qs) - 1),
                r"\mathcal{L}(q, \lambda)", "three classes")
    d.add("stationarity", [sp.Eq(sp.diff(lag, qi), 0) for qi in qs], r"\partial_{q_j}\mathcal{L} = 0",
          "p_j L'(q_j) = -lambda")
    inv = [1 / dLp.subs(q, qi) for qi in qs]
    d.add("lambda", 1 / sum(inv), r"\lambda", "the paper's 'lambda = sum 1/dL' should be 1 / sum_i 1/L'(q_i)")
    d.add("p_from_stationarity", [inv[j] / sum(inv) for j in range(3)], r"p_j",
          "p_j = (1/L'(q_j)) / sum_i 1/L'(q_i): Eq. 1")
    # n = 2: compare the odds (1 - p_hat_1) / p_hat_1 = L'(q) / L'(1 - q) with those of Prop. 2's closed form
    odds_prop2 = ((1 - q) / q) ** gamma * ((1 - q) - gamma * q * sp.log(q)) / (q - gamma * (1 - q) * sp.log(1 - q))
    odds_eq1 = dLp / dLp.subs(q, 1 - q)
    d.add("binary_residual", _simplify_in_u(sp.powsimp(sp.expand_power_base(odds_eq1 / odds_prop2, force=True),
                                                       force=True), q) - 1,
          r"\frac{L'(q) / L'(1-q)}{(1 - \hat p(q)) / \hat p(q)} - 1", "0: Eq. 1 with n = 2 is Prop. 2")
    return d


@lru_cache(maxsize=None)
def prop5_proof_derivative() -> Derivation:
    """The derivative in the Prop. 5 proof (App. A.5): f = 1/L', f' = -L''/L'^2, and the paper's simplification.

    Keys: ``f`` (1 / L'(q)), ``df`` (computed), ``df_form`` (-L''/L'^2), ``df_residual`` (0), ``ratio_paper``
    (the printed L''/L'^2 in closed form), ``ratio_residual`` (numerator of L''/L'^2 - printed: 0), ``sign_slip``
    (df - ratio_paper, not 0: the printed f' has the wrong sign), ``f_sign`` (-q / g(q): f < 0, not >= 0).
    """
    d = Derivation("Komisarenko & Kull Prop. 5 proof: f = 1/L'")
    L = focal_loss_expr(q, gamma)
    dL, d2L = sp.diff(L, q), sp.diff(L, q, 2)
    f = d.add("f", 1 / dL, r"f(q) = 1 / L'(q)", "")
    df = d.add("df", sp.diff(f, q), r"f'(q)", "computed")
    d.add("df_form", -d2L / dL ** 2, r"-L''(q) / L'(q)^2", "")
    d.add("df_residual", sp.simplify(df + d2L / dL ** 2), r"f' + L''/L'^2", "0")
    paper = d.add("ratio_paper", (1 - q) ** (-gamma) * (-(gamma - 1) * gamma * q ** 2 * sp.log(q)
                                                        - (q - 1) * ((2 * gamma - 1) * q + 1))
                  / (gamma * q * sp.log(q) + q - 1) ** 2, r"L''/L'^2\ \text{(App. A.5)}", "the printed simplification")
    num, _ = sp.fraction(sp.together(d2L / dL ** 2 - paper))
    d.add("ratio_residual", _simplify_in_u(sp.powsimp(sp.expand(num), force=True), q),
          r"\operatorname{numerator}\left(L''/L'^2 - \text{(App. A.5)}\right)", "0: the simplification is right")
    d.add("sign_slip", sp.simplify((df - paper).subs({gamma: 2, q: sp.Rational(2, 5)})),
          r"\left(f' - \text{(App. A.5)}\right)\big|_{\gamma=2, q=2/5}",
          "not 0: f' = -L''/L'^2, the paper drops the sign")
    d.add("f_sign", _simplify_in_u(sp.expand(f * gradient_factor_expr(q, gamma) / q), q),
          r"f(q)\, g(q, \gamma) / q", "-1: f = -q / g < 0, so the paper's 'f >= 0' should be 'f <= 0'")
    return d


# ------------------------------------------------------ Karandikar et al. (2021): soft calibration objectives

__all__ += ["soft_binning", "soft_uncertainty", "avuc_identity"]


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


#: Old names that still work, with a DeprecationWarning: old name -> new name. The numpy and torch functions
#: keep the short names (calib.focal.gradient_factor, calib.losses.focal_loss); the sympy ones say "expr".
_RENAMED = {"focal_loss": "focal_loss_expr", "cross_entropy": "cross_entropy_expr",
            "gradient_factor": "gradient_factor_expr"}


def __getattr__(name: str):
    if name in _RENAMED:
        import warnings

        warnings.warn(f"calib.symbolic.{name} is now calib.symbolic.{_RENAMED[name]} (a sympy expression).",
                      DeprecationWarning, stacklevel=2)
        return globals()[_RENAMED[name]]
    raise AttributeError(f"module 'calib.symbolic' has no attribute {name!r}")
