"""The answer key of chapter 06 (What focal loss estimates). Chapter 06's exercises: the thresholds of the gradient
factor, float32's limits, the KKT conditions and label smoothing.
"""

from __future__ import annotations

from calib_book.answers.common import sympy_module
from calib_book.answers.registry import Expected, parameter, register


def _tau_oc(gamma):
    from calib.focal import tau_oc

    return tau_oc(gamma)


def _phi_peak(gamma):
    from calib.focal import gradient_factor, tau_oc

    return float(gradient_factor(tau_oc(gamma), gamma))


def _tau_uc(gamma):
    from calib.focal import threshold

    return float(threshold(gamma))


def _float32_thresholds(runner_up):
    """The d from which a float32 softmax of the logits (d, runner_up, 0) has a top entry of exactly 1, and from which
    it is exactly (1, 0, 0): the largest small term, exp(runner_up - d), decides both (the chapter takes (d, 0, 0))."""
    import numpy as np

    fmt = np.finfo(np.float32)      # 1 + x rounds to 1 for x <= eps/2; a float32 rounds to 0 below half a subnormal
    return runner_up - np.log(float(fmt.eps) / 2), runner_up - np.log(float(fmt.smallest_subnormal) / 2)


#: gamma = 2.5 in the book (the chapter's table holds the whole gammas); a course draws 1.5, 3.5 or 4.5
THRESHOLD_GAMMA = parameter("ch06-ex-thresholds", "gamma", 2.5, lambda rng: float(rng.choice([1.5, 3.5, 4.5])),
                            shown=("$\\gamma = {}$", "\\tau^{{{}}}_{{oc}}", "\\varphi^{{{}}}", "\\tau^{{{}}}_{{uc}}",
                                   ("sp.Rational({}, 2)", lambda g: str(int(2 * g))), "gamma = {}: tau_oc"), text=str)

register("ch06-ex-thresholds", "06-focal-loss-is-not-proper",
         tau_oc=Expected(lambda: float(_tau_oc(THRESHOLD_GAMMA())), rtol=1e-8,
                         hint="the over-confidence threshold: where the gradient factor phi peaks"),
         peak=Expected(lambda: _phi_peak(THRESHOLD_GAMMA()), rtol=1e-8,
                       hint="the largest value the gradient factor takes"),
         tau_uc=Expected(lambda: _tau_uc(THRESHOLD_GAMMA()), rtol=1e-8,
                         hint="the under-confidence threshold: where focal loss's gradient equals cross-entropy's"))
_LOG2 = 0.6931471805599453


def _float32_small_entries(d, runner_up=None):
    """The two small entries of the softmax of (d, runner_up, 0) at d, as ch06-ex-float32's solution prints them."""
    import math

    runner_up = d - 16.7 if runner_up is None else runner_up
    total = 1 + math.exp(runner_up - d) + math.exp(-d)
    return (f"${math.exp(runner_up - d) / total * 1e8:.1f} \\times 10^{{-8}}$ and "
            f"${math.exp(-d) / total * 1e8:.1f} \\times 10^{{-8}}$ at $d = {d:g}$")


#: gamma = 1, 2, 3, 4, 5 in the book; a course draws five half-integer gammas from 0.5 to 7.5 (the chapter's table
#: holds the whole ones)
MINIMAL_K_GAMMAS = parameter(
    "ch06-ex-minimal-k", "gammas", (1.0, 2.0, 3.0, 4.0, 5.0),
    lambda rng: tuple(sorted(float(v) for v in rng.choice([k + 0.5 for k in range(8)], 5, replace=False))),
    shown=("Answer for $\\gamma = {}$,", ("gammas_k = [{}]", lambda gs: ", ".join(repr(float(g)) for g in gs))),
    text=lambda gs: ", ".join(f"{g:g}" for g in gs))
#: the runner-up logit is 1 in the book (the chapter takes (d, 0, 0)); a course draws another from 0.5 to 3
#: (from 0.6 on, a softmax at d = runner_up + 103.5, which the solution prints, is between its two thresholds)
FLOAT32_RUNNER_UP = parameter(
    "ch06-ex-float32", "runner_up", 1.0, lambda rng: float(rng.choice([1.5, 2.0, 2.5, 3.0])),
    shown=("logits $(d, {}, 0)$", ("np.array([[d, {}, 0.0]]", lambda r: repr(float(r))),
           "predicted = ({0} - np.log(float(fmt.eps) / 2), {0} - np.log(float(fmt.smallest_subnormal) / 2))",
           ("$d \\ge {}$", lambda r: f"{r:g} + 24 \\log 2 \\approx {r + 24 * _LOG2:.2f}"),
           ("only from $d = {}$", lambda r: f"{r:g} + 150 \\log 2 \\approx {r + 150 * _LOG2:.2f}"),
           ("(about {})", lambda r: _float32_small_entries(r + 16.7)),
           ("softmax32({})", lambda r: f"{r + 16.7:g}"), ("softmax32({})", lambda r: f"{r + 103.5:g}"),
           ("softmax32({})", lambda r: f"{r + 105:.1f}")),
    text=lambda r: f"{r:g}")

register("ch06-ex-minimal-k", "06-focal-loss-is-not-proper",
         k_min=Expected(lambda: __import__("numpy").floor(1 / _tau_oc(list(MINIMAL_K_GAMMAS()))) + 1, rtol=0,
                        atol=0.5, close_digits=None,
                        hint="the uniform prediction against the over-confidence threshold"))
register("ch06-ex-float32", "06-focal-loss-is-not-proper",
         d_top=Expected(lambda: _float32_thresholds(FLOAT32_RUNNER_UP())[0], rtol=1e-4,
                        hint="the machine epsilon of float32"),
         d_zero=Expected(lambda: _float32_thresholds(FLOAT32_RUNNER_UP())[1], rtol=1e-4,
                         hint="the smallest float32 and underflow"))


#: eta = (0.5, 0.3, 0.2) in the book; a course draws another target over three classes (one decimal each)
KKT_ETA = parameter("ch06-ex-kkt", "eta", (0.5, 0.3, 0.2),
                    lambda rng: [(0.6, 0.3, 0.1), (0.5, 0.4, 0.1), (0.7, 0.2, 0.1), (0.4, 0.4, 0.2),
                                 (0.6, 0.2, 0.2)][int(rng.integers(5))],
                    shown=("\\boldsymbol\\eta = ({})$", "np.array([{}]), 2.0"),
                    text=lambda eta: ", ".join(str(v) for v in eta))


def _ch06_kkt(part):
    """ch06-ex-kkt: the focal-risk minimiser for eta = (0.5, 0.3, 0.2), gamma = 2, and the multiplier lambda of
    the Lagrangian W + lambda (sum q - 1) at it, lambda = eta_i phi(q_i) / q_i (the same for every i)."""
    import numpy as np

    from calib.focal import focal_optimal_prediction, gradient_factor

    eta = np.array(KKT_ETA())
    q = focal_optimal_prediction(eta, 2.0)
    return q if part == "minimiser" else float(np.mean(eta * gradient_factor(q, 2.0) / q))


def _ch06_ls_inverse(smoothing):
    """The map from t = Psi(q*)_i back to eta_i under label smoothing: eps/K on every class or eps/(K-1) on the
    wrong ones, in the symbols t, epsilon, K."""
    sp = sympy_module()
    t, eps, k = sp.symbols("t epsilon K")
    return (t - eps / k) / (1 - eps) if smoothing == "uniform" else ((k - 1) * t - eps) / (k - 1 - k * eps)


#: epsilon = 0.1 in the book; a course draws another smoothing from 0.05 to 0.25
LS_EPSILON = parameter("ch06-ex-ls", "epsilon", 0.1, lambda rng: float(rng.choice([0.05, 0.15, 0.2, 0.25])),
                       shown=("$\\epsilon = {}$, $\\gamma = 2$.", "np.array([0.6, 0.3, 0.1]), {}, 2.0"), text=str)


def _ch06_ls_minimiser(smoothing, eta=(0.6, 0.3, 0.1), eps=None, gamma=2.0):
    import numpy as np

    from calib.focal import focal_optimal_prediction

    eps = LS_EPSILON() if eps is None else eps
    eta = np.asarray(eta)
    k = len(eta)
    target = (1 - eps) * eta + (eps / k if smoothing == "uniform" else eps * (1 - eta) / (k - 1))
    return focal_optimal_prediction(target, gamma)


register("ch06-ex-kkt", "06-focal-loss-is-not-proper",
         minimiser=Expected(lambda: _ch06_kkt("minimiser"), rtol=1e-6,
                            hint="the minimiser of the focal risk over the simplex"),
         multiplier=Expected(lambda: _ch06_kkt("multiplier"), rtol=1e-6,
                             hint="stationarity of the Lagrangian, with the sign convention the exercise gives"))
register("ch06-ex-ls", "06-focal-loss-is-not-proper",
         inverse_uniform=Expected(lambda: _ch06_ls_inverse("uniform"), exact=True,
                                  hint="undoing the smoothing of the target"),
         inverse_wrong=Expected(lambda: _ch06_ls_inverse("wrong"), exact=True,
                                hint="undoing a smoothing that gives mass only to the wrong classes"),
         minimiser_uniform=Expected(lambda: _ch06_ls_minimiser("uniform"), rtol=1e-6,
                                    hint="focal loss's minimiser for the smoothed target"),
         minimiser_wrong=Expected(lambda: _ch06_ls_minimiser("wrong"), rtol=1e-6,
                                  hint="focal loss's minimiser for the smoothed target"))
