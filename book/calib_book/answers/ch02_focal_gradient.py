"""The answer key of chapter 02 (The focal-loss gradient). Chapter 02's exercises: the gradient factor's closed
forms, the entropy bound and two constructions.
"""

from __future__ import annotations

from calib_book.answers.common import sympy_module
from calib_book.answers.registry import Expected, choice, construction, parameter, register


def _gamma_one(part):
    """ex-g-gamma-one's closed forms for g(p, 1) = 1 - p - p log p: where it has fallen to 1/2, its largest value,
    and the area between it and 1 below its threshold 1/e. Its threshold (1/e) and the point of its maximum (e^-2)
    are chapters 03's and 06's results, so the exercise does not ask for them."""
    sp = sympy_module()
    p = sp.Symbol("p", positive=True)
    g = 1 - p - p * sp.log(p)
    if part == "half":
        (root,) = sp.solve(sp.Eq(g, sp.Rational(1, 2)), p)
        return root
    if part == "maximum":
        return 1 + sp.exp(-2)
    return sp.simplify(sp.integrate(g - 1, (p, 0, sp.exp(-1))))


register("ex-g-gamma-one", "02-focal-gradient",
         half=Expected(lambda: _gamma_one("half"), exact=True,
                       hint="where focal loss's gradient is half cross-entropy's"),
         maximum=Expected(lambda: _gamma_one("maximum"), exact=True, hint="the peak of the gradient factor"),
         excess=Expected(lambda: _gamma_one("excess"), exact=True,
                         hint="how much the gradient factor up-weights below its threshold"))
register("ex-g-near-one", "02-focal-gradient",
         limit=Expected(lambda: -sympy_module().Symbol("gamma", nonnegative=True) / 2,
                        hint="how fast the gradient factor approaches its limit near p = 1"))


def _exponent(gamma) -> str:
    """gamma as a TeX exponent: 2 as ``2``, 1.5 as ``{1.5}``."""
    return f"{gamma:g}" if float(gamma).is_integer() else f"{{{gamma:g}}}"


#: gamma = 2 in the book's first part; a course draws another from 1 to 3
BOUND_GAMMA = parameter("ex-entropy-bound", "gamma", 2.0, lambda rng: float(rng.choice([1.0, 1.5, 2.5, 3.0])),
                        shown=("For $\\gamma = {}$, compute", ("-(1 - 0.6)^{} \\log 0.6", _exponent),
                               ("focal_and_bound({})\n", repr), "print(f\"gamma = {}: L_f",
                               ("p_hat_b, eta_b, {}))", repr)),
                        text=lambda g: f"{g:g}")


def _entropy_bound_part(part):
    import numpy as np

    from calib import focal, metrics, symbolic

    p_hat, eta = np.array([0.6, 0.3, 0.1]), np.array([1.0, 0.0, 0.0])
    if part == "focal_loss":
        return float(focal.focal_risk(p_hat, eta, BOUND_GAMMA()))
    if part == "kl":                                 # one-hot eta: KL(eta || p_hat) is the cross-entropy
        return metrics.nll(p_hat[None], [0])
    if part == "entropy":                            # L_c - gamma H[p_hat] at gamma = 0 and 1
        return float(focal.entropy_regularised_bound(p_hat, eta, 0.0)
                     - focal.entropy_regularised_bound(p_hat, eta, 1.0))
    if part == "bound":
        return float(focal.entropy_regularised_bound(p_hat, eta, BOUND_GAMMA()))
    d = symbolic.entropy_bound()
    if part == "bernoulli_gap":
        return float(d["bernoulli_gap"].subs({symbolic.p: 0.6, symbolic.gamma: 0.5}))
    return sympy_module().simplify(d["dD_dgamma"].subs(symbolic.gamma, 1))        # the chapter shows it at gamma = 0


register("ex-entropy-bound", "02-focal-gradient",
         focal_loss=Expected(lambda: _entropy_bound_part("focal_loss"), hint="the focal loss of one prediction"),
         kl=Expected(lambda: _entropy_bound_part("kl"), hint="the KL divergence from a one-hot target"),
         entropy=Expected(lambda: _entropy_bound_part("entropy"), hint="the entropy of the prediction"),
         bound=Expected(lambda: _entropy_bound_part("bound"), hint="Mukhoti et al.'s bound, Eq. 4"),
         bernoulli_gap=Expected(lambda: _entropy_bound_part("bernoulli_gap"),
                                hint="Bernoulli's inequality"),
         slope=Expected(lambda: _entropy_bound_part("slope"),
                        hint="how the vertex gap changes with gamma"))


def _batch_gradient_grows(given) -> bool:
    """ex-batch-by-hand's property: ``given = [a, b, [g1, g2]]``, shape (3, 2), with a, b in R^2 and g1, g2 in
    [0, 1], has ||g1 a + g2 b|| > ||a + b|| (beyond rounding)."""
    import numpy as np

    x = np.asarray(given, dtype=float)
    if x.shape != (3, 2) or not np.all(np.isfinite(x)) or np.any(x[2] < 0) or np.any(x[2] > 1):
        return False
    a, b, (g1, g2) = x[0], x[1], x[2]
    rounding = 1e-9 * (np.linalg.norm(a) + np.linalg.norm(b))
    return bool(np.linalg.norm(g1 * a + g2 * b) > np.linalg.norm(a + b) + rounding)


def _focal_optimum_lowers_entropy(given) -> bool:
    """ex-multiclass-entropy's property: ``given = [eta_1, ..., eta_4, gamma, j]``: a target eta over four classes
    (positive, summing to 1 within 1e-3, then normalised) and 0 < gamma <= 20 whose focal-optimal prediction q has
    lower entropy than eta (by more than 1e-12), and j (0 to 3) the class whose probability falls the most,
    q_j - eta_j. The prediction solves eta_i = h(q_i) / sum_l h(q_l),
    h(v) = v / ((1 - v)^gamma - gamma v (1 - v)^(gamma - 1) log v) (chapter 06, Eq. 12)."""
    import numpy as np
    from scipy.optimize import brentq

    x = np.asarray(given, dtype=float)
    if x.shape != (6,) or not np.all(np.isfinite(x)):
        return False
    eta, gamma, j = x[:4], x[4], x[5]
    if np.any(eta <= 0) or abs(eta.sum() - 1) > 1e-3 or not 0 < gamma <= 20 or j not in (0, 1, 2, 3):
        return False
    eta = eta / eta.sum()

    def h(v):
        return v / ((1 - v) ** gamma - gamma * v * (1 - v) ** (gamma - 1) * np.log(v))

    low, high = 1e-300, 1 - 1e-15

    def q_of(c):                             # q_i with h(q_i) = c eta_i; h rises from 0 to h(high) on (0, 1)
        # a target past h's range at either end is that end: the outer bracket's top, h(high) / max(eta), times
        # the largest eta can exceed h(high) by an ulp, where brentq found no sign change and raised
        return np.array([low if h(low) >= c * e else high if h(high) <= c * e else
                         brentq(lambda v: h(v) - c * e, low, high, xtol=1e-300, rtol=1e-15) for e in eta])

    c = np.exp(brentq(lambda log_c: q_of(np.exp(log_c)).sum() - 1, -40.0, np.log(h(high) / eta.max()),
                      xtol=1e-15))
    q = q_of(c)
    q = q / q.sum()
    entropy = lambda r: -np.sum(r * np.log(r))          # noqa: E731
    return bool(entropy(q) < entropy(eta) - 1e-12 and int(j) == int(np.argmin(q - eta)))


def _lower_entropy_example():
    """One target of ex-multiclass-entropy's kind: the first of seeded Dirichlet targets whose focal-optimal
    prediction has lower entropy, with the class that loses the most."""
    import numpy as np

    from calib.focal import focal_optimal_prediction

    rng = np.random.default_rng(0)
    etas, gammas = rng.dirichlet(np.ones(4), size=4000), rng.uniform(0.05, 1.0, size=4000)
    q = focal_optimal_prediction(etas, gammas)
    entropy = -np.sum(q * np.log(q), axis=1) - (-np.sum(etas * np.log(etas), axis=1))
    i = int(np.flatnonzero(entropy < -1e-9)[0])
    return [*etas[i], gammas[i], float(np.argmin(q[i] - etas[i]))]


register("ex-batch-by-hand", "02-focal-gradient",
         example=construction(_batch_gradient_grows, lambda: [[1.0, 0.0], [-1.0, 0.1], [1.0, 0.5]],
                              accepts="any a, b in R^2 and g1, g2 in [0, 1] with ||g1 a + g2 b|| > ||a + b||",
                              hint="how the lengths of a sum and of its terms relate"),
         inner_product=choice(lambda: "negative", ("positive", "zero", "negative"),
                              hint="the angle between the two gradients"))
register("ex-multiclass-entropy", "02-focal-gradient",
         example=construction(_focal_optimum_lowers_entropy, _lower_entropy_example,
                              accepts="any target over four classes and gamma > 0 whose focal-optimal prediction "
                                      "has lower entropy, with the class that loses the most probability",
                              hint="the focal-optimal prediction for a target, and what entropy weighs"))
