"""calib.focal.schedules: FLSD-53 / FLSD-532 as data and a schedule designed from Prop. 2 (Mukhoti et al. 2020)."""

import numpy as np
import pytest

from calib import focal


def _g_printed(p, gam):
    return (1 - p) ** gam - gam * p * (1 - p) ** (gam - 1) * np.log(p)


def test_flsd_schedules_as_data():
    p = np.array([0.0, 0.1999, 0.2, 0.3, 0.4999, 0.5, 1.0])
    np.testing.assert_array_equal(focal.schedule_gamma(focal.FLSD_53, p), [5, 5, 3, 3, 3, 3, 3])
    np.testing.assert_array_equal(focal.schedule_gamma(focal.FLSD_53_TABLE4, p), [5, 5, 5, 3, 3, 3, 3])
    np.testing.assert_array_equal(focal.schedule_gamma(focal.FLSD_532, p), [5, 5, 3, 3, 3, 2, 2])
    assert focal.SCHEDULES["flsd-53"] is focal.FLSD_53
    g_eff = focal.effective_gradient_factor(focal.FLSD_53, np.array([0.19, 0.199, 0.2, 0.25, 0.26]))
    np.testing.assert_allclose(g_eff, [_g_printed(0.19, 5), _g_printed(0.199, 5), _g_printed(0.2, 3),
                                       _g_printed(0.25, 3), _g_printed(0.26, 3)], rtol=1e-13)


def test_flsd53_upweights_two_intervals_not_one():
    (lo1, hi1), (lo2, hi2) = focal.upweighted_intervals(focal.FLSD_53)
    assert (lo1, lo2) == (0.0, 0.2)
    assert hi1 == pytest.approx(0.19680273893699807, abs=1e-15)       # p0(5)
    assert hi2 == pytest.approx(0.2525839887160048, abs=1e-15)        # p0(3)
    # brute force on a grid: g_eff > 1 exactly on these intervals
    p = np.linspace(1e-6, 1 - 1e-6, 200_001)
    up = focal.effective_gradient_factor(focal.FLSD_53, p) > 1
    inside = ((p < hi1) | ((p >= lo2) & (p < hi2)))
    assert np.array_equal(up, inside)


def test_schedule_from_prop2_has_a_single_crossing():
    sched = focal.schedule_from_prop2([0.2], 0.25)
    np.testing.assert_allclose(sched.gammas, [4.850554445506035, 3.070227101505456], rtol=1e-13)
    ((lo, hi),) = focal.upweighted_intervals(sched)
    assert lo == 0 and hi == pytest.approx(0.25, abs=1e-15)
    three = focal.schedule_from_prop2([0.1, 0.3, 0.6], 0.2)
    assert three.gammas[:3] == pytest.approx([focal.gamma_star(0.1), focal.gamma_star(0.2), focal.gamma_star(0.3)])
    assert three.gammas[3] == three.gammas[2]                          # above 1/2: any gamma works, keep the last
    ((lo, hi),) = focal.upweighted_intervals(three)
    assert hi == pytest.approx(0.2, abs=1e-15)
    with pytest.raises(ValueError, match=r"\(0, 1/2\)"):
        focal.schedule_from_prop2([0.2], 0.6)
    with pytest.raises(ValueError, match="gammas"):
        focal.GammaSchedule("bad", (0.2,), (5.0,))
    with pytest.raises(ValueError, match="increase"):
        focal.GammaSchedule("bad", (0.5, 0.2), (5.0, 3.0, 2.0))


def test_a_schedule_edge_must_lie_strictly_inside_zero_and_one():
    """An edge at 0 or 1 (or beyond) leaves a bin no probability can fall in: refused."""
    for edge in (0.0, 1.0, 1.5, -0.2):
        with pytest.raises(ValueError):
            focal.GammaSchedule("bad", (edge,), (5.0, 3.0))
    assert focal.GammaSchedule("fine", (0.999,), (5.0, 3.0)).edges == (0.999,)


# --------------------------------------------------------------- mutation sample C: behaviour the sample found untested

def test_schedule_gamma_names_p_when_a_probability_is_out_of_range():
    with pytest.raises(ValueError, match=r"^p must lie in \[0, 1\]; found (np.float64\()?1\.5"):
        focal.schedule_gamma(focal.FLSD_53, [0.1, 1.5])
