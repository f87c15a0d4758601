"""Effect sizes, the sign test and power: what a paper's table allows, and what our seeds can detect. Part of
:mod:`calib.stats`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
from scipy import stats as _scipy_stats

from calib.stats.intervals import ALTERNATIVES, check_level, seed_values

__all__ = ["cohens_d", "SignTest", "sign_test", "detectable_difference", "seeds_needed", "PowerLine", "power_line",
           "sd_upper_bound"]


def cohens_d(mean_a, sd_a, mean_b, sd_b):
    """Cohen's d of two groups of equal size from their summary statistics: ``(mean_a - mean_b) / s_pooled``.

    ``s_pooled = sqrt((sd_a**2 + sd_b**2) / 2)``, the pooled standard deviation of two groups of the same size
    (Cohen 1988, *Statistical Power Analysis for the Behavioral Sciences*, Sec. 2.2.1). It is what a paper's
    table of means and standard deviations (or standard errors times sqrt(n)) allows: Karandikar et al. (2021)
    rank their secondary losses by it in Fig. 1. By Cohen's convention d = 0.2 is small, 0.5 medium, 0.8 large.

    Parameters
    ----------
    mean_a, sd_a, mean_b, sd_b : array_like
        Means and standard deviations (ddof = 1) of the two groups; broadcast against each other, so one call
        gives the d of many settings.

    Returns
    -------
    float or numpy.ndarray
        d, positive when group a has the larger mean; a float for scalar inputs.
    """
    mean_a, sd_a, mean_b, sd_b = (np.asarray(x, dtype=np.float64) for x in (mean_a, sd_a, mean_b, sd_b))
    if np.any(sd_a < 0) or np.any(sd_b < 0):
        raise ValueError("sd_a and sd_b are standard deviations and must be >= 0.")
    pooled = np.sqrt((sd_a ** 2 + sd_b ** 2) / 2)
    if np.any(pooled == 0):
        raise ValueError("both standard deviations are 0 for some setting: Cohen's d is undefined there.")
    d = (mean_a - mean_b) / pooled
    return float(d) if d.ndim == 0 else d


@dataclass(frozen=True)
class SignTest:
    """An exact sign test over independent units."""

    wins: int
    losses: int
    ties: int
    p_value: float
    alternative: str

    @property
    def n(self) -> int:
        """The number of units that are not tied (the number of coin flips)."""
        return self.wins + self.losses

    @property
    def sided(self) -> str:
        """``"one-sided"`` or ``"two-sided"``, the label the p-value is printed with."""
        return "two-sided" if self.alternative == "two-sided" else "one-sided"

    def __str__(self) -> str:
        return (f"better in {self.wins} of {self.n} independent units ({self.losses} worse, {self.ties} tied), "
                f"{self.sided} sign test p = {self.p_value:.2g}")


def sign_test(differences: Sequence[float], units: Sequence | None = None,
              alternative: str = "greater") -> SignTest:
    """Exact sign test that the differences lean positive (``"greater"``), negative, or either way.

    ``differences`` are signed so that positive means "better as claimed" (e.g. baseline ECE minus the method's).
    ``units`` labels each difference with the independent unit it comes from (a network on a dataset): the
    differences of one unit count once, by the sign of the sum of their signs (a unit better in one table and
    worse in another is a tie), so that a network printed in two tables is not two coin flips. Ties are dropped.
    The p-value is ``scipy.stats.binomtest(wins, wins + losses, 0.5, alternative)``: one-sided for ``"greater"``
    or ``"less"``, two-sided for ``"two-sided"`` (:attr:`SignTest.sided` says which).
    """
    if alternative not in ALTERNATIVES:
        raise ValueError(f"alternative={alternative!r} is not supported; choose 'greater', 'less' or 'two-sided'.")
    d = np.asarray(differences, dtype=np.float64)
    if d.ndim != 1 or d.size == 0:
        raise ValueError(f"differences must be a non-empty 1-D sequence; got shape {d.shape}.")
    if not np.isfinite(d).all():
        raise ValueError("differences hold NaN or infinite values; drop the cells that were not printed.")
    signs = np.sign(d)
    if units is not None:
        units = list(units)
        if len(units) != d.size:
            raise ValueError(f"units must label every difference; got {len(units)} units for {d.size} differences.")
        by_unit: dict = {}
        for unit, s in zip(units, signs):
            by_unit[unit] = by_unit.get(unit, 0.0) + s
        signs = np.sign(np.array(list(by_unit.values())))
    wins, losses = int((signs > 0).sum()), int((signs < 0).sum())
    ties = int(signs.size - wins - losses)
    p = 1.0 if wins + losses == 0 else float(_scipy_stats.binomtest(wins, wins + losses, 0.5, alternative).pvalue)
    return SignTest(wins, losses, ties, p, alternative)


def _power(delta: float, sd: float, n: int, level: float) -> float:
    """Probability that the paired t-interval at ``level`` lies wholly above 0 when the true mean difference is
    ``delta`` (one side, as :func:`calib.stats.decide` reads it)."""
    critical = _scipy_stats.t.ppf(0.5 + level / 2, n - 1)
    return float(_scipy_stats.nct.sf(critical, n - 1, delta * np.sqrt(n) / sd))


def _check_power_inputs(sd, n, level, power) -> tuple:
    sd = float(sd)
    if not np.isfinite(sd) or sd <= 0:
        raise ValueError(f"sd must be a positive paired standard deviation; got {sd} (zero spread: any "
                         "difference is detected).")
    if int(n) != n or n < 2:
        raise ValueError(f"n must be an integer number of seeds >= 2; got {n}.")
    power = float(power)
    if not 0.5 <= power < 1:
        raise ValueError(f"power must lie in [0.5, 1), e.g. 0.8; got {power}.")
    return sd, int(n), check_level(level), power


def detectable_difference(sd: float, n: int, level: float = 0.95, power: float = 0.8) -> float:
    """The smallest true paired difference that ``n`` seeds detect with probability ``power``.

    Detected means that the paired t-interval at ``level`` lies wholly on the claimed side of 0
    (:func:`calib.stats.decide`), with ``sd`` the paired standard deviation over seeds: the ``delta`` with
    ``P(T > t_{(1+level)/2, n-1}) = power`` for ``T`` noncentral t with ``n - 1`` degrees of freedom and
    noncentrality ``delta sqrt(n) / sd`` (Cohen 1988, Ch. 2). For large n it tends to
    ``(z_{(1+level)/2} + z_power) sd / sqrt(n)``.
    """
    sd, n, level, power = _check_power_inputs(sd, n, level, power)
    from scipy.optimize import brentq

    high = sd
    while _power(high, sd, n, level) < power:
        high *= 2
    return float(brentq(lambda delta: _power(delta, sd, n, level) - power, 0.0, high, xtol=1e-12 * sd))


def seeds_needed(sd: float, effect: float, level: float = 0.95, power: float = 0.8, max_seeds: int = 10_000) -> int:
    """The fewest seeds whose paired t-interval detects a true difference ``effect`` with probability ``power``
    (see :func:`detectable_difference`); ValueError when more than ``max_seeds`` would be needed."""
    sd, _, level, power = _check_power_inputs(sd, 2, level, power)
    effect = abs(float(effect))
    if effect == 0 or not np.isfinite(effect):
        raise ValueError(f"effect must be a finite non-zero difference; got {effect}.")
    n = 2
    while _power(effect, sd, n, level) < power:
        n += 1
        if n > max_seeds:
            raise ValueError(f"an effect of {effect:.3g} with paired SD {sd:.3g} needs more than {max_seeds} seeds.")
    return n


def sd_upper_bound(sd: float, n: int, confidence: float = 0.8) -> float:
    """The upper confidence bound of a standard deviation estimated from ``n`` values: ``sd sqrt((n - 1) /
    chi2_{1 - confidence, n - 1})``. From 5 seeds (4 degrees of freedom) the true SD can be 1.56 times the estimate at
    80 % confidence; a power line that plugs the estimate in as if known overstates what the seeds detect."""
    sd, n, _, _ = _check_power_inputs(sd, n, 0.95, 0.8)
    confidence = float(confidence)
    if not 0.5 <= confidence < 1:
        raise ValueError(f"confidence must lie in [0.5, 1), e.g. 0.8; got {confidence}.")
    return float(sd * np.sqrt((n - 1) / _scipy_stats.chi2.ppf(1 - confidence, n - 1)))


@dataclass(frozen=True)
class PowerLine:
    """What our seeds can detect, beside the effect a paper reports: at the observed paired SD and at its upper
    confidence bound (``sd_high``, ``detectable_high``, ``seeds_high``), since an SD from few seeds is itself
    uncertain."""

    n: int
    sd: float
    detectable: float
    paper_effect: float
    seeds_for_paper_effect: int
    level: float
    power: float
    sd_high: float = float("nan")
    detectable_high: float = float("nan")
    seeds_high: int = 0
    sd_confidence: float = 0.8

    def __str__(self) -> str:
        more = ("our seeds suffice" if self.seeds_for_paper_effect <= self.n
                else f"{self.seeds_for_paper_effect} seeds would detect it")
        text = (f"with {self.n} seeds (paired SD {self.sd:.3g}) the smallest difference detected with "
                f"{self.power:.0%} power at {self.level:.0%} is {self.detectable:.3g}; the paper's effect is "
                f"{abs(self.paper_effect):.3g}: {more}")
        if np.isfinite(self.sd_high):
            text += (f" (at the SD's {self.sd_confidence:.0%} upper bound {self.sd_high:.3g}: "
                     f"{self.detectable_high:.3g}, and {self.seeds_high} seeds)")
        return text


def power_line(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray, paper_effect: float,
               level: float = 0.95, power: float = 0.8, sd_confidence: float = 0.8) -> PowerLine:
    """The power line of an *inconclusive* paired comparison: :func:`detectable_difference` at the observed
    paired SD of ``a - b`` and our number of seeds, beside the paper's effect and :func:`seeds_needed` for it; and the
    same at the SD's upper ``sd_confidence`` bound (:func:`sd_upper_bound`), since 5 seeds estimate the SD from 4
    degrees of freedom."""
    a, b = seed_values(a, "a"), seed_values(b, "b")
    if a.shape != b.shape:
        raise ValueError(f"a and b must hold one value per seed for the same seeds; got {a.size} and {b.size}.")
    sd = float(np.std(a - b, ddof=1))
    high = sd_upper_bound(sd, a.size, sd_confidence)
    return PowerLine(a.size, sd, detectable_difference(sd, a.size, level, power), float(paper_effect),
                     seeds_needed(sd, paper_effect, level, power), level, power, high,
                     detectable_difference(high, a.size, level, power), seeds_needed(high, paper_effect, level, power),
                     sd_confidence)
