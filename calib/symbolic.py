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

Sympy often cannot cancel powers of (1 - p) when it only knows p > 0; residuals are therefore simplified
after substituting p = 1 - u with u > 0 (:func:`vanishes`), and limits at p -> 1 are taken as u -> 0+.
"""

from __future__ import annotations

from functools import lru_cache

import sympy as sp

__all__ = [
    "p", "gamma", "p0", "q", "x", "Derivation", "vanishes", "focal_loss", "cross_entropy", "gradient_factor",
    "prop1", "shape_of_g", "gamma_one", "prop2", "gamma_star_at_inverse_e", "entropy_bound", "focal_optimum",
    "eq8_prefactor_limit_at_one", "eq8_limit_at_one",
]

#: probability of the true class (0 < p < 1)
p = sp.Symbol("p", positive=True)
#: focal parameter
gamma = sp.Symbol("gamma", positive=True)
#: threshold of Prop. 2
p0 = sp.Symbol("p_0", positive=True)
#: target probability of class 1 in the binary problem of Eq. 5
q = sp.Symbol("q", positive=True)
#: candidate prediction in Eq. 5
x = sp.Symbol("x", positive=True)

_u = sp.Symbol("u", positive=True)          # 1 - p
_a = sp.Symbol("a", positive=True)          # 1 - p0
_b = sp.Symbol("b", negative=True)          # p0 log p0
_W = sp.Symbol("W")                         # a value of Lambert W
_z = sp.Symbol("z")


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
        return [sp.Eq(sp.Symbol(self.labels[k]), self[k], evaluate=False) for k in keys]


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

def focal_loss(prob=p, gam=gamma):
    """L_f = -(1 - p)^gamma log p (Lin et al. 2017; Mukhoti et al. 2020, Sec. 4)."""
    return -(1 - prob) ** gam * sp.log(prob)


def cross_entropy(prob=p):
    """L_c = -log p."""
    return -sp.log(prob)


def gradient_factor(prob=p, gam=gamma):
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
    lf = d.add("L_f", focal_loss(), r"\mathcal{L}_f", "focal loss of the true-class probability p")
    lc = d.add("L_c", cross_entropy(), r"\mathcal{L}_c", "cross-entropy")
    dlf = d.add("dL_f", sp.diff(lf, p), r"\frac{\partial \mathcal{L}_f}{\partial p}", "derivative of focal loss")
    dlc = d.add("dL_c", sp.diff(lc, p), r"\frac{\partial \mathcal{L}_c}{\partial p}", "derivative of cross-entropy")
    ratio = sp.factor(sp.powsimp(sp.expand(dlf / dlc), force=True))
    d.add("ratio", ratio, r"\frac{\partial \mathcal{L}_f / \partial p}{\partial \mathcal{L}_c / \partial p}",
          "ratio of the two derivatives")
    g = d.add("g", gradient_factor(), r"g(p, \gamma)", "Eq. 7 as printed")
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
    g = gradient_factor()
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
    g1 = d.add("g1", sp.expand(gradient_factor(p, 1)), r"g(p, 1)", "")
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
    g_p0 = d.add("g_p0", gradient_factor(p0, gamma), r"g(p_0, \gamma)", "Eq. 7 at p0")
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
    """Eq. 4 / App. A: L_f >= KL(q || p) - gamma H[p], its Bernoulli step, and a proof for every gamma >= 0.

    Keys:
    ``chain`` (the printed steps, as (expression, justification) pairs over classes y = 1..K);
    ``bernoulli_gap`` B = (1-p)^gamma - (1 - gamma p), ``B_at_0`` (0), ``dB`` (computed), ``dB_form``
    (gamma (1 - (1-p)^(gamma-1))), ``dB_residual`` (0): B >= 0 on [0, 1] iff gamma >= 1 (B <= 0 for gamma <= 1);
    ``gap_linear_in_q`` (L_f - (L_c - gamma H[p]) per class, linear in q, so its minimum over q is at a vertex);
    ``D`` (the gap at the vertex q = e_j with H[p] replaced by the binary entropy h(p_j) <= H[p]),
    ``D_at_0`` (0), ``dD_dgamma``, ``dD_at_0`` (h(p) - log p log(1-p)), ``d2D`` (>= 0: D is convex in gamma),
    ``lemma`` (h(p) - log p log(1 - p)), ``lemma_symmetry`` (lemma(p) - lemma(1-p), 0),
    ``lemma_step1`` (-log(1-p) - p - p^2 / (2(1-p)) <= 0), ``lemma_step2`` (2(1-p)^2 + p log p >= 0 for p <= 1/2).
    """
    d = Derivation("Eq. 4: the entropy-regularised KL bound")
    K = sp.Symbol("K", integer=True, positive=True)
    y, j = sp.symbols("y j", integer=True, positive=True)
    P, Q = sp.IndexedBase(r"\hat{p}"), sp.IndexedBase("q")
    s = lambda e: sp.Sum(e, (y, 1, K))  # noqa: E731
    d.add("chain", [
        (s(-(1 - P[y]) ** gamma * Q[y] * sp.log(P[y])), "general focal loss L_f"),
        (s(-(1 - gamma * P[y]) * Q[y] * sp.log(P[y])), ">= by Bernoulli's inequality, for gamma >= 1"),
        (s(-Q[y] * sp.log(P[y])) - gamma * sp.Abs(s(Q[y] * P[y] * sp.log(P[y]))), "= since log p_y <= 0"),
        (s(-Q[y] * sp.log(P[y])) - gamma * sp.Max(Q[j]) * s(sp.Abs(P[y] * sp.log(P[y]))), ">= by Hoelder"),
        (s(-Q[y] * sp.log(P[y])) + gamma * s(P[y] * sp.log(P[y])), ">= since q_j <= 1"),
        (sp.Symbol(r"\mathcal{L}_c") - gamma * sp.Symbol(r"\mathbb{H}[\hat{p}]"), "= L_c - gamma H[p]"),
    ], r"\text{App. A}", "the printed chain")
    B = d.add("bernoulli_gap", (1 - p) ** gamma - (1 - gamma * p), r"B(p, \gamma)",
              "Bernoulli: B >= 0 on [0, 1] for gamma >= 1; B <= 0 for 0 <= gamma <= 1")
    d.add("B_at_0", B.subs(p, 0), r"B(0, \gamma)", "0")
    dB = d.add("dB", sp.diff(B, p), r"\frac{\partial B}{\partial p}", "")
    dB_form = d.add("dB_form", gamma * (1 - (1 - p) ** (gamma - 1)), r"\gamma\left(1 - (1-p)^{\gamma-1}\right)",
                    ">= 0 iff (1-p)^(gamma-1) <= 1 iff gamma >= 1")
    d.add("dB_residual", _simplify_in_u(dB - dB_form), r"\frac{\partial B}{\partial p} - (\dots)", "0")
    qy = sp.Symbol("q_y", nonnegative=True)
    d.add("gap_linear_in_q", qy * (-sp.log(p)) * ((1 - p) ** gamma - 1) + gamma * (-p * sp.log(p)),
          r"\text{gap}_y", "class y's share of L_f - (L_c - gamma H[p]); linear in q, minimal at a vertex q = e_j")
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
    (-q g(x, gamma)/x + (1 - q) g(1 - x, gamma)/(1 - x)), ``d_risk_residual`` (0), ``q_of_x`` (the q for which
    x is stationary), ``q_of_x_form`` (phi(x) / (phi(x) + phi(1-x)), phi = x / g), ``q_of_x_residual`` (0),
    ``d_risk_one_hot`` (q = 1) and ``d_risk_one_hot_residual`` (it equals -g(x)/x < 0, so the risk decreases
    up to x = 1 and p_hat = q).
    """
    d = Derivation("Eq. 5: the focal-optimal binary prediction")
    risk = d.add("risk", -(1 - x) ** gamma * q * sp.log(x) - x ** gamma * (1 - q) * sp.log(1 - x),
                 r"R(x)", "expected focal loss of predicting x when P(y = 1) = q")
    dr = d.add("d_risk", sp.diff(risk, x), r"R'(x)", "")
    form = d.add("d_risk_form", -q * gradient_factor(x, gamma) / x
                 + (1 - q) * gradient_factor(1 - x, gamma) / (1 - x),
                 r"-q \frac{g(x, \gamma)}{x} + (1-q) \frac{g(1-x, \gamma)}{1-x}", "")
    d.add("d_risk_residual", _simplify_in_u(sp.expand(dr - form), x), r"R'(x) - (\dots)", "0")
    sol = sp.solve(sp.Eq(q * gradient_factor(x, gamma) / x, (1 - q) * gradient_factor(1 - x, gamma) / (1 - x)), q)
    phi = lambda t: t / gradient_factor(t, gamma)  # noqa: E731
    q_of_x = d.add("q_of_x", sol[0], r"q(x)", "stationarity solved for q")
    form_q = d.add("q_of_x_form", phi(x) / (phi(x) + phi(1 - x)), r"\frac{\varphi(x)}{\varphi(x) + \varphi(1-x)}",
                   "phi(x) = x / g(x, gamma): q is proportional to p / g(p, gamma)")
    numerator, _ = sp.fraction(sp.together(q_of_x - form_q))
    numerator = _simplify_in_u(sp.expand_log(numerator, force=True), x)
    d.add("q_of_x_residual", sp.simplify(sp.powsimp(sp.expand(numerator), force=True)),
          r"\operatorname{numerator}\left(q(x) - \frac{\varphi(x)}{\varphi(x) + \varphi(1-x)}\right)", "0")
    one_hot = d.add("d_risk_one_hot", sp.simplify(dr.subs(q, 1)), r"R'(x)\big|_{q=1}", "= -g(x, gamma)/x < 0")
    d.add("d_risk_one_hot_residual", _simplify_in_u(one_hot + gradient_factor(x, gamma) / x, x),
          r"R'(x)\big|_{q=1} + \frac{g(x, \gamma)}{x}", "0")
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
    phi = d.add("phi", gradient_factor(v, gamma), r"\varphi^\gamma(v)", "Eq. 10 (= Mukhoti et al.'s g)")
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
    d.add("thm5_residual", _simplify_in_u(sp.expand(slope - (gradient_factor(1 - eta1, gamma)
                                                              - gradient_factor(eta1, gamma))), eta1),
          r"\text{slope} - (\varphi^\gamma(\eta_2) - \varphi^\gamma(\eta_1))", "0: nonzero unless phi(eta1) = phi(eta2)")
    lam = sp.Symbol("lambda", positive=True)
    qi, ei = sp.symbols("q_i eta_i", positive=True)
    d.add("kkt", sp.solve(sp.Eq(ei * gradient_factor(qi, gamma) / qi, lam), ei)[0], r"\eta_i",
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
    d.add("fl_factor_residual", _simplify_in_u(-p * dfl - gradient_factor(p, gamma)),
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
