"""The helpers chapters share for presentation (calib_book.notebook): glue, tables, number text, timing."""

import numpy as np
import pytest

from calib import stats
from calib_book import notebook


@pytest.fixture
def glued(monkeypatch):
    """What glue_number hands to myst_nb.glue: (name, value, display) of each call."""
    import myst_nb

    calls = []
    monkeypatch.setattr(myst_nb, "glue", lambda name, value, display=True: calls.append((name, value, display)))
    return calls


def test_glue_number_glues_python_numbers_without_display(glued):
    notebook.glue_number("n", np.int64(1200))
    notebook.glue_number("x", np.float32(0.25))
    notebook.glue_number("k", 3)
    notebook.glue_number("arr", np.array(2.5))
    assert [(name, value, type(value), display) for name, value, display in glued] == [
        ("n", 1200, int, False), ("x", 0.25, float, False), ("k", 3, int, False), ("arr", 2.5, float, False)]
    assert f"{glued[0][1]:,}" == "1,200"          # the format specs the prose uses apply to them


def test_markdown_table_escapes_pipes_and_stringifies_cells():
    table = notebook.markdown_table(["a", "b|c"], [[1, "x|y"], [2.5, "*z*"]])
    assert table.data.splitlines() == ["| a | b\\|c |", "|---|---|", "| 1 | x\\|y |", "| 2.5 | *z* |"]


def test_number_text_formats_numbers_pairs_text_and_missing_values():
    assert notebook.number_text(0.1234567) == "0.123457"
    assert notebook.number_text(np.float64(2.0), ".2f") == "2.00"
    assert notebook.number_text(None) == "–"
    assert notebook.number_text(None, missing="not installed") == "not installed"
    assert notebook.number_text("ValueError: empty bin") == "ValueError: empty bin"   # text is kept as it is
    assert notebook.number_text((95.1, 0.2), "g") == "95.1 ± 0.2"
    assert notebook.number_text((95.1, None), "g") == "95.1"


def test_per_seed_text():
    assert notebook.per_seed_text([0.1, -0.25], "+.2f") == "per seed +0.10, -0.25"
    assert notebook.per_seed_text(np.array([1.23456, 2.0])) == "per seed 1.235, 2.000"


def test_seed_interval_text_is_the_t_interval_over_seeds():
    values = [0.011, 0.013, 0.012]
    # mean 0.012, sd 0.001, t_{0.975, 2} = 4.3027: half-width 0.0024841
    assert notebook.seed_interval_text(values, digits=2, scale=100.0) == "1.20 [0.95, 1.45]"
    assert notebook.seed_interval_text(values) == stats.seed_interval(values).brief()


def test_truncate_text_cuts_at_a_word_boundary():
    assert notebook.truncate_text("short text") == "short text"
    assert notebook.truncate_text("x" * 70) == "x" * 70
    assert notebook.truncate_text("the expected calibration error of the model", 20) == "the expected …"


@pytest.fixture
def fake_clock(monkeypatch):
    """A CPU clock that only the timed calls advance: timing becomes exact arithmetic, not measurement."""
    clock = [0.0]
    monkeypatch.setattr(notebook.time, "process_time", lambda: clock[0])
    return clock


def test_best_cpu_ms_keeps_the_fastest_call(fake_clock):
    costs = iter([0.004, 0.002, 0.003])

    def work():
        fake_clock[0] += next(costs)

    assert notebook.best_cpu_ms(work, repeats=3) == pytest.approx(2.0)
    with pytest.raises(ValueError, match="repeats"):
        notebook.best_cpu_ms(work, repeats=0)


def test_cpu_time_exponent_recovers_the_growth_rate(fake_clock):
    sizes = [100, 1_000, 10_000]

    def work(n, noise):
        def call():
            fake_clock[0] += 1e-9 * n ** 1.5 * (1 + next(noise))
        return call

    noise = iter([0.5, 0.0, 0.2] + [0.0, 0.3, 0.0] + [0.1, 0.1, 0.4])   # each size's best round has no noise
    slope = notebook.cpu_time_exponent(sizes, [work(n, noise) for n in sizes], repeats=3)
    assert isinstance(slope, float) and slope == pytest.approx(1.5, abs=1e-9)
    with pytest.raises(ValueError, match="one call per size"):
        notebook.cpu_time_exponent([1, 2], [lambda: None])
