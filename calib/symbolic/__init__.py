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

One module per paper, and :mod:`calib.symbolic.base` (the symbols, :class:`Derivation`, :func:`vanishes`,
the losses as expressions) under them: :mod:`~calib.symbolic.mukhoti`, :mod:`~calib.symbolic.charoenphakdee`,
:mod:`~calib.symbolic.zhou` (the reweighted risks), :mod:`~calib.symbolic.komisarenko` (Props. 1-5 of
Komisarenko & Kull 2024) and :mod:`~calib.symbolic.karandikar`. Every public name is importable from
``calib.symbolic``.

It needs sympy, which the rest of calib does not: ``pip install 'calib[symbolic]'`` (the extra ``book`` has it too).
"""

from __future__ import annotations

try:
    import sympy as _sympy  # noqa: F401  (the derivations below are sympy expressions)
except ImportError as exc:
    if exc.name != "sympy":
        raise
    raise ImportError("calib.symbolic needs sympy, which is an optional dependency of calib: install the extra "
                      "'symbolic', pip install 'calib[symbolic]' (or pip install 'sympy>=1.12').",
                      name="sympy") from exc

from calib.symbolic.base import (Derivation, Label, cross_entropy_expr, eta, focal_loss_expr, gamma,
                                 gradient_factor_expr, limit_at_one, p, p0, q, simplify_in_u, u, vanishes, x)
from calib.symbolic.charoenphakdee import eta1, eta2, posterior_recovery, v
from calib.symbolic.karandikar import avuc_identity, soft_binning, soft_uncertainty
from calib.symbolic.komisarenko import (binary_focal_decomposition, focal_calibration_on_logits, focal_convexity,
                                        multiclass_focal_decomposition, prop5_proof_derivative, s,
                                        ts_bound_proof_algebra)
from calib.symbolic.mukhoti import (entropy_bound, eq8_limit_at_one, eq8_prefactor_limit_at_one, focal_optimum,
                                    gamma_one, gamma_star_at_inverse_e, prop1, prop2, shape_of_g)
from calib.symbolic.zhou import kappa, reweighted_risk

__all__ = [
    "p", "gamma", "p0", "q", "eta", "x", "u", "Label", "Derivation", "simplify_in_u", "vanishes", "limit_at_one",
    "focal_loss_expr", "cross_entropy_expr", "gradient_factor_expr", "prop1", "shape_of_g",
    "eq8_prefactor_limit_at_one", "eq8_limit_at_one", "gamma_one", "prop2", "gamma_star_at_inverse_e",
    "entropy_bound", "focal_optimum", "v", "eta1", "eta2", "posterior_recovery", "kappa", "reweighted_risk", "s",
    "focal_convexity", "binary_focal_decomposition", "focal_calibration_on_logits", "ts_bound_proof_algebra",
    "multiclass_focal_decomposition", "prop5_proof_derivative", "soft_binning", "soft_uncertainty", "avuc_identity",
]

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
