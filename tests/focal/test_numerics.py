"""calib.focal.numerics: the kernels that the gradient factor, the focal calibration map, focal temperature
scaling and the training diagnostics share, against mpmath; the one check of gamma; the solvers."""

import mpmath as mp
import numpy as np
import pytest
import torch
from scipy.special import expit

from calib.focal import gradient_factor
from calib.focal.numerics import (GAMMA_DOMAINS, check_gamma, golden_section_minimise, gradient_factor_of_logit,
                                   log1p_gamma_r_negative, log_one_minus_r, logit_terms, r_top, solve_increasing)

mp.mp.dps = 50


def _r_exact(p):
    """r(p) = -p log p / (1 - p) in mpmath."""
    p = mp.mpf(p)
    return -p * mp.log(p) / (1 - p)


# ------------------------------------------------------------------------------------------------- gamma

@pytest.mark.parametrize("domain, good, bad, bound", [("focal", [0.0, 2.5], -0.5, ">= 0"),
                                                      ("positive", [1e-9, 3.0], 0.0, "> 0"),
                                                      ("map", [-1.0, 0.0, 7.0], -1.5, ">= -1")])
def test_check_gamma_domains(domain, good, bad, bound):
    np.testing.assert_array_equal(check_gamma(good, domain=domain), good)
    with pytest.raises(ValueError, match=f"gamma must be {bound}; found {bad}"):
        check_gamma([*good, bad], domain=domain)
    with pytest.raises(ValueError, match="my_gamma must be"):
        check_gamma(bad, "my_gamma", domain=domain)


def test_check_gamma_says_why_and_checks_shape_and_type():
    with pytest.raises(ValueError, match="changes sign"):              # the map's reason
        check_gamma(-2.0, domain="map")
    with pytest.raises(ValueError, match="cross-entropy"):             # focal loss's reason
        check_gamma(-1.0)
    with pytest.raises(ValueError, match="no threshold"):              # an explicit reason wins
        check_gamma(0.0, domain="positive", why="no threshold at 0")
    assert check_gamma(np.float64(2.0), scalar=True) == 2.0 and isinstance(check_gamma(2, scalar=True), float)
    for bad in (True, [1.0, 2.0], "3", None):
        with pytest.raises(ValueError, match="single real number"):
            check_gamma(bad, scalar=True)
    for bad in (np.inf, np.nan):
        with pytest.raises(ValueError, match="finite"):
            check_gamma(bad, scalar=True)
        with pytest.raises(ValueError, match="gamma"):
            check_gamma([1.0, bad])
    with pytest.raises(ValueError, match="at least one value"):
        check_gamma([], "gammas", ndim=1)
    with pytest.raises(ValueError, match="gammas"):
        check_gamma([[1.0]], "gammas", ndim=1)
    with pytest.raises(ValueError, match="domain='nonsense'"):
        check_gamma(1.0, domain="nonsense")
    assert set(GAMMA_DOMAINS) == {"focal", "positive", "map"}


# ------------------------------------------------------------------------------------ r at the top class

def test_r_top_against_mpmath_from_the_middle_to_underflow():
    log_rest = np.concatenate([np.linspace(-740.0, 6.0, 4001), [-20.0, -18.42, -18.43]])   # S from 1e-321 to 400
    rest = np.exp(log_rest)
    got = r_top(rest, log_rest, np.log1p(rest))
    exact = np.array([float(mp.log1p(mp.exp(x)) / mp.exp(x)) for x in log_rest])
    np.testing.assert_allclose(got, exact, rtol=4.5e-16, atol=0)
    # r at p_top = 1 / (1 + S) is r(p) of the definition
    for s in (1e-12, 1e-6, 0.3, 5.0):
        exact = float(_r_exact(1 / (1 + mp.mpf(s))))
        assert r_top(np.array([s]), np.log([s]), np.log1p([s]))[0] == pytest.approx(exact, rel=1e-14)


def test_r_top_torch_matches_numpy_and_has_finite_gradients():
    log_rest = torch.linspace(-700.0, 5.0, 2001, dtype=torch.float64, requires_grad=True)
    rest = torch.exp(log_rest)
    r = r_top(rest, log_rest, torch.nn.functional.softplus(log_rest), xp=torch)
    ref = r_top(rest.detach().numpy(), log_rest.detach().numpy(), np.log1p(rest.detach().numpy()))
    np.testing.assert_allclose(r.detach().numpy(), ref, rtol=1e-15)
    r.sum().backward()
    assert torch.isfinite(log_rest.grad).all()


def test_log_one_minus_r_and_log1p_gamma_r_negative_against_mpmath():
    log_rest = np.linspace(-700.0, 4.0, 1501)
    rest = np.exp(log_rest)
    got = log_one_minus_r(rest, log_rest)

    def exact(x, gamma=-1.0):                     # log(1 + gamma r); 1 - r ~ S / 2 needs about -log10(S) digits
        with mp.workdps(int(-x / 2.3) + 40 if x < 0 else 50):
            s = mp.exp(mp.mpf(x))
            return float(mp.log(1 + gamma * mp.log1p(s) / s))

    np.testing.assert_allclose(got, [exact(x) for x in log_rest], rtol=1e-14)
    for gamma in (-1.0, -0.5, -1e-3):
        got = log1p_gamma_r_negative(gamma, log_one_minus_r(rest, log_rest))
        np.testing.assert_allclose(got, [exact(x, gamma) for x in log_rest], rtol=1e-13)


# ----------------------------------------------------------------------------------------- in the logit

def test_logit_terms_against_mpmath():
    s = np.concatenate([np.linspace(-745.0, 745.0, 3001), [0.0, -1e-300, 1e-300]])
    r, softplus = logit_terms(s)
    r_exact = [float(mp.exp(mp.mpf(x)) * mp.log1p(mp.exp(-mp.mpf(x)))) for x in s]
    sp_exact = [float(mp.log1p(mp.exp(mp.mpf(x)))) for x in s]
    np.testing.assert_allclose(r, r_exact, rtol=4.5e-16, atol=1e-300)   # subnormal r: absolute
    np.testing.assert_allclose(softplus, sp_exact, rtol=4e-16)


def test_binary_gradient_factor_matches_the_closed_form_where_p_is_representable():
    s = np.linspace(-40, 30, 4001)
    for gamma in (0.0, 0.5, 1.0, 3.0):
        np.testing.assert_allclose(gradient_factor_of_logit(s, gamma), gradient_factor(expit(s), gamma), rtol=5e-3)
    # far out, where p rounds to 1 in float64, it keeps the tail (g ~ (1 + gamma) e^{-gamma s}) instead of 0
    assert gradient_factor_of_logit(np.array([60.0]), 1.0)[0] == pytest.approx(2 * np.exp(-60.0), rel=1e-12)
    assert gradient_factor_of_logit(np.array([-800.0, 800.0]), 2.0).tolist() == [1.0, 0.0]


# ------------------------------------------------------------------------------------------------ solvers

def test_solve_increasing_finds_cube_roots_element_wise():
    a = np.array([1e-9, 0.5, 8.0, 1e6])

    def fun(x, index):
        return x ** 3 - a[index], 3 * x ** 2

    x = solve_increasing(fun, np.ones_like(a), np.zeros_like(a), np.full_like(a, 200.0))
    np.testing.assert_allclose(x, np.cbrt(a), rtol=1e-15)


def test_golden_section_minimise_both_stopping_rules():
    centres = np.array([0.1, 0.37, 0.9])
    calls = []

    def fun(x):
        calls.append(x.size)
        return (x - centres) ** 2

    c, fc, d, fd = golden_section_minimise(fun, np.zeros(3), np.ones(3), iterations=60)
    best = np.where(fc < fd, c, d)
    np.testing.assert_allclose(best, centres, atol=1e-12)
    assert len(calls) == 62                          # two to start, then one new point per step
    c, fc, d, fd = golden_section_minimise(lambda x: np.abs(x - 0.25), [0.0], [1.0], xtol=1e-10)
    assert abs(c[0] - 0.25) < 1e-9 and abs(d[0] - 0.25) < 1e-9
    for kwargs in ({}, {"xtol": 1e-9, "iterations": 10}):
        with pytest.raises(ValueError, match="exactly one of xtol"):
            golden_section_minimise(fun, [0.0], [1.0], **kwargs)


# --------------------------------------------------------------------------------- the names that moved

def test_old_names_warn_and_still_work():
    import calib.focal as focal
    import calib.losses as losses
    import calib.symbolic as symbolic

    p, q = np.array([[0.7, 0.3]]), np.array([[1.0, 0.0]])
    with pytest.warns(DeprecationWarning, match="focal_risk"):
        assert focal.focal_loss(p, q, 2.0) == focal.focal_risk(p, q, 2.0)
    with pytest.warns(DeprecationWarning, match="soft_binned_ece_loss"):
        assert losses.soft_binned_ece is losses.soft_binned_ece_loss
    with pytest.warns(DeprecationWarning, match="focal_loss_expr"):
        assert symbolic.focal_loss is symbolic.focal_loss_expr
    with pytest.raises(AttributeError):
        focal.no_such_name


# --------------------------------------------------------------- mutation sample B: behaviour the sample found untested

def test_solve_increasing_takes_integer_starts_and_brackets_as_floats():
    """x0, lo and hi given as Python ints: the iterates are floats (an int array would truncate each Newton step)."""
    x = solve_increasing(lambda x, index: (x * x - 2.0, 2.0 * x), 1, 0, 2)
    assert x.dtype == np.float64 and x[0] == pytest.approx(np.sqrt(2.0), rel=1e-15)
    x = solve_increasing(lambda x, index: (x ** 3 - 10.0, 3.0 * x * x), [2, 3], [0, 0], [5, 5])
    np.testing.assert_allclose(x, np.cbrt(10.0), rtol=1e-15)


def test_solve_increasing_evaluates_only_strictly_inside_the_bracket():
    """A Newton step that lands exactly on the bracket's end is not taken (bisection instead): f is never evaluated
    at hi. Here f(x) = x - 0.375 with a derivative of 0.125 (too small): from x = 0.25 the step is exactly 1.0, onto
    hi = 1.25."""
    seen = []

    def fun(x, index):
        seen.extend(x.tolist())
        return x - 0.375, np.full_like(x, 0.125)

    x = solve_increasing(fun, [0.25], [0.0], [1.25])
    assert x[0] == 0.375
    assert seen[:2] == [0.25, 0.75]                          # the bisection point, not hi
    assert all(0.0 < s < 1.25 for s in seen)


def test_golden_section_stops_once_every_bracket_is_within_xtol():
    """xtol: the loop runs until every bracket [a, b] is narrower than xtol * max(1, b); on [0, 1] with xtol = 1e-6
    that is the first k with 0.618...^k <= 1e-6, k = 29 steps (2 + 29 evaluations), and the final interior points
    are (2 ratio - 1) (b - a) <= 0.236e-6 apart."""
    calls = []

    def fun(x):
        calls.append(x.copy())
        return (x - 0.3) ** 2

    ratio = (np.sqrt(5.0) - 1) / 2
    steps = int(np.ceil(np.log(1e-6) / np.log(ratio)))
    assert steps == 29
    c, fc, d, fd = golden_section_minimise(fun, [0.0], [1.0], xtol=1e-6)
    assert len(calls) == 2 + steps
    assert 0 < d[0] - c[0] <= (2 * ratio - 1) * 1e-6 * (1 + 1e-12)


# --------------------------------------------------------------- mutation sample C: behaviour the sample found untested

def test_check_gamma_scalar_takes_a_zero_d_array_and_refuses_a_one_element_vector():
    """scalar=True unwraps a 0-D array (np.array(2.0) is one number) but not a 1-D array of one value."""
    got = check_gamma(np.array(2.5), scalar=True)
    assert got == 2.5 and type(got) is float
    with pytest.raises(ValueError, match=r"^gamma must be a single real number >= 0; got array\(\[2\.5\]\)"):
        check_gamma(np.array([2.5]), scalar=True)


def test_solve_increasing_leaves_the_callers_start_array_unchanged():
    """The iterates live in a copy of x0: a float64 start array (which np.array could otherwise share) keeps its
    values, and so do the bracket arrays."""
    x0, lo, hi = np.array([1.0, 1.0]), np.array([0.0, 0.0]), np.array([4.0, 4.0])
    x = solve_increasing(lambda x, index: (x * x - np.array([2.0, 3.0])[index], 2.0 * x), x0, lo, hi)
    np.testing.assert_allclose(x, np.sqrt([2.0, 3.0]), rtol=1e-15)
    np.testing.assert_array_equal(x0, [1.0, 1.0])
    np.testing.assert_array_equal(lo, [0.0, 0.0])
    np.testing.assert_array_equal(hi, [4.0, 4.0])


def test_a_probability_outside_zero_one_is_named_as_a_plain_number():
    """The message shows the offending value as a number a reader can type ('1.5'), not numpy 2's repr
    ('np.float64(1.5)'), and names the argument."""
    from calib.focal import gradient_factor

    with pytest.raises(ValueError) as info:
        gradient_factor(np.array([0.2, 1.5]), 2.0)
    assert "p must lie in [0, 1]; found 1.5." in str(info.value) and "np.float64" not in str(info.value)
