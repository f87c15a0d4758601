"""Komisarenko & Kull (2024), Props. 1-5: the convexity of focal loss, the binary and multiclass focal
decompositions, focal calibration on logits, and the algebra of the proofs of Props. 3 and 5 (chapter 07)."""

from __future__ import annotations

from functools import lru_cache

import sympy as sp

from calib.symbolic.base import Derivation, focal_loss_expr, gamma, gradient_factor_expr, p, q, simplify_in_u

__all__ = ["s", "focal_convexity", "binary_focal_decomposition", "focal_calibration_on_logits",
           "ts_bound_proof_algebra", "multiclass_focal_decomposition", "prop5_proof_derivative"]

# ------------------------------------------------------------- Komisarenko & Kull (2024), Props. 1-5
# Convexity of focal loss (Prop. 1), the binary decomposition and the map p_hat (Prop. 2), focal calibration
# on logits and the algebra of the Prop. 3 proof, the multiclass map (Prop. 4) and the derivative used in the
# Prop. 5 proof (chapter 07).

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
    L = d.add("L", focal_loss_expr(), r"L_{FL}(p, y{=}1)",
              "focal loss of the predicted probability p of the true class")
    d1 = d.add("d1", sp.diff(L, p), r"\partial_p L_{FL}", "first derivative, computed")
    d1p = d.add("d1_paper", gamma * (1 - p) ** (gamma - 1) * sp.log(p) - (1 - p) ** gamma / p,
                r"\partial_p L_{FL}\ \text{(App. A.1)}", "as printed")
    d.add("d1_residual", simplify_in_u(d1 - d1p), r"\partial_p L_{FL} - \text{(App. A.1)}", "0")
    d2 = d.add("d2", sp.diff(L, p, 2), r"\partial^2_p L_{FL}", "second derivative, computed")
    d2p = d.add("d2_paper", gamma * (1 - p) ** (gamma - 1) / p
                - gamma * (gamma - 1) * (1 - p) ** (gamma - 2) * sp.log(p)
                - (-gamma * (1 - p) ** (gamma - 1) * p - (1 - p) ** gamma) / p ** 2,
                r"\partial^2_p L_{FL}\ \text{(App. A.1)}", "as printed")
    d.add("d2_residual", simplify_in_u(d2 - d2p), r"\partial^2_p L_{FL} - \text{(App. A.1)}", "0")
    a2 = d.add("a2", -sp.log(p) * (1 - p) ** (gamma - 2), r"a_2", "coefficient of gamma^2: >= 0")
    a1 = d.add("a1", 2 * (1 - p) ** (gamma - 1) / p + (1 - p) ** (gamma - 2) * sp.log(p), r"a_1",
               "coefficient of gamma, as printed")
    a0 = d.add("a0", (1 - p) ** gamma / p ** 2, r"a_0", "constant term: > 0")
    quad = d.add("quadratic", gamma ** 2 * a2 + gamma * a1 + a0, r"a_2 \gamma^2 + a_1 \gamma + a_0",
                 "the printed quadratic in gamma (its coefficients still depend on gamma through (1-p)^(gamma-2))")
    d.add("quadratic_residual", simplify_in_u(sp.expand((d2 - quad) / (1 - p) ** (gamma - 2))),
          r"\left(\partial^2_p L_{FL} - a_2\gamma^2 - a_1\gamma - a_0\right) / (1-p)^{\gamma-2}", "0")
    bracket = d.add("a1_bracket", 2 - 2 * p + p * sp.log(p), r"2 - 2p + p \log p", "the sign of a_1")
    d.add("a1_factored", (1 - p) ** (gamma - 2) * bracket / p, r"\frac{(1-p)^{\gamma-2}}{p}(2 - 2p + p\log p)",
          "a_1 factored")
    d.add("a1_residual",
          simplify_in_u(sp.expand((a1 - (1 - p) ** (gamma - 2) * bracket / p) / (1 - p) ** (gamma - 2))),
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
    d.add("paper_residual", simplify_in_u(sp.powsimp(sp.expand(num), force=True), q),
          r"\operatorname{numerator}\left(\hat p - \hat p_{\text{Prop. 2}}\right)", "0")
    w = lambda t: t / gradient_factor_expr(t, gamma)  # noqa: E731
    form_g = d.add("p_hat_g", w(q) / (w(q) + w(1 - q)),
                   r"\frac{q/g(q,\gamma)}{q/g(q,\gamma) + (1-q)/g(1-q,\gamma)}", "with Mukhoti's gradient factor g")
    num_g, _ = sp.fraction(sp.together(p_hat - form_g))
    d.add("g_residual", simplify_in_u(sp.powsimp(sp.expand(num_g), force=True), q),
          r"\operatorname{numerator}\left(\hat p - \frac{q/g(q)}{q/g(q) + (1-q)/g(1-q)}\right)", "0")
    d.add("dl1_g", simplify_in_u(sp.expand(-q * dl1 - gradient_factor_expr(q, gamma)), q),
          r"-q\,\ell_1'(q) - g(q,\gamma)", "0: the derivative of the positive partial loss is -g(q, gamma) / q")
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
    d.add("FC_paper", 1 / (1 + e(-gamma * s) * (e(-s) + gamma * sp.log(1 + e(-s)))
                           / (1 + gamma * e(-s) * sp.log(1 + e(s)))),
          r"FC(s)\ \text{(Prop. 3)}", "the paper's form in s")
    f = d.add("f", (gamma * e(s) * sp.log(1 + e(-s)) + 1) / (1 + gamma * e(-s) * sp.log(1 + e(s))),
              r"f_\gamma(s)", "App. A.3")
    d.add("FC_f", 1 / (1 + e(-(gamma + 1) * s) * f), r"\frac{1}{1 + e^{-(\gamma+1)s} f_\gamma(s)}", "App. A.3")
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
    d.add("dL_residual", simplify_in_u(sp.expand(dL - dLp), q), r"L'(q) - \text{(Eq. 1)}", "0")
    d.add("inverse_dL", 1 / dLp, r"1 / L'(q)", "")
    d.add("inverse_dL_g", -q / gradient_factor_expr(q, gamma), r"-q / g(q, \gamma)", "the same, with Mukhoti's g")
    d.add("g_residual", simplify_in_u(sp.expand(-q * dL - gradient_factor_expr(q, gamma)), q),
          r"-q L'(q) - g(q, \gamma)", "0, so p_hat_j is proportional to q_j / g(q_j, gamma)")
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
    d.add("binary_residual", simplify_in_u(sp.powsimp(sp.expand_power_base(odds_eq1 / odds_prop2, force=True),
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
    d.add("ratio_residual", simplify_in_u(sp.powsimp(sp.expand(num), force=True), q),
          r"\operatorname{numerator}\left(L''/L'^2 - \text{(App. A.5)}\right)", "0: the simplification is right")
    d.add("sign_slip", sp.simplify((df - paper).subs({gamma: 2, q: sp.Rational(2, 5)})),
          r"\left(f' - \text{(App. A.5)}\right)\big|_{\gamma=2, q=2/5}",
          "not 0: f' = -L''/L'^2, the paper drops the sign")
    d.add("f_sign", simplify_in_u(sp.expand(f * gradient_factor_expr(q, gamma) / q), q),
          r"f(q)\, g(q, \gamma) / q", "-1: f = -q / g < 0, so the paper's 'f >= 0' should be 'f <= 0'")
    return d
