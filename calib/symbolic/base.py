"""What every derivation of :mod:`calib.symbolic` is built from: the symbols, :class:`Derivation` (named steps
with labels and notes), the simplification that cancels powers of (1 - p), and the losses as sympy expressions.

Sympy often cannot cancel powers of (1 - p) when it only knows p > 0; residuals are therefore simplified
after substituting p = 1 - u with u > 0 (:func:`simplify_in_u`, :func:`vanishes`), and limits at p -> 1 are
taken as u -> 0+ (:func:`limit_at_one`).
"""

from __future__ import annotations

import sympy as sp

__all__ = ["p", "gamma", "p0", "q", "eta", "x", "u", "Label", "Derivation", "simplify_in_u", "vanishes", "limit_at_one",
           "focal_loss_expr", "cross_entropy_expr", "gradient_factor_expr"]

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

#: 1 - p, the variable in which :func:`simplify_in_u` and :func:`limit_at_one` work (u > 0)
u = sp.Symbol("u", positive=True)


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
            raise TypeError(f"{', '.join(lists)} hold lists of steps; display their items, e.g. "
                            f"display(*d[{lists[0]!r}]).")
        return [sp.Eq(Label(self.labels[k]), self[k], evaluate=False) for k in keys]


def simplify_in_u(expr, var=p):
    """Simplify after var = 1 - u (u > 0), so that powers of (1 - var) combine; return in terms of var."""
    e = sp.sympify(expr).subs(var, 1 - u)
    e = sp.powsimp(sp.expand(sp.powsimp(sp.expand(e), force=True)), force=True)
    return sp.simplify(e).subs(u, 1 - var)


def vanishes(expr, var=p) -> bool:
    """True when ``expr`` simplifies to exactly 0 (after the substitution var = 1 - u, u > 0)."""
    return sp.simplify(expr) == 0 or simplify_in_u(expr, var) == 0


def limit_at_one(expr, var=p):
    """lim_{var -> 1-} expr, taken as u -> 0+ with var = 1 - u."""
    return sp.limit(sp.sympify(expr).subs(var, 1 - u), u, 0, "+")


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
