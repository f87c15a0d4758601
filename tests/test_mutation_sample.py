"""tests/mutation_sample.py, the sampled mutation score (README, Contributing): its interval and its bookkeeping."""
import json

import pytest

import mutation_sample


def test_the_wilson_interval_matches_its_closed_form_values():
    """Wilson's 95 % interval of 9/10 is [0.5958, 0.9821] and of 0/10 [0, 0.2775] (worked by hand from its formula);
    it narrows as n grows and always holds the share."""
    assert mutation_sample.wilson(9, 10) == pytest.approx((0.5958, 0.9821), abs=1e-4)
    assert mutation_sample.wilson(0, 10) == pytest.approx((0.0, 0.2775), abs=1e-4)
    low, high = mutation_sample.wilson(340, 400)
    assert low < 340 / 400 < high and high - low < 0.08


def test_a_draw_excludes_what_it_is_told_and_the_score_counts_by_exit_code(tmp_path, monkeypatch):
    """Two draws with the same seed are equal, a draw never holds an excluded name, and the score counts killed and
    timed-out mutants as detected, survivors and mutants no test reaches as not, leaving the equivalent ones out."""
    folder = tmp_path / "mutants" / "calib" / "stats"
    folder.mkdir(parents=True)
    codes = {f"calib.stats.x.x_f__mutmut_{i}": code for i, code in enumerate([1, 1, 3, 36, 0, 0, 33, None])}
    (folder / "x.py.meta").write_text(json.dumps({"exit_code_by_key": codes}))
    monkeypatch.setattr(mutation_sample, "MUTANTS", tmp_path / "mutants")
    monkeypatch.setattr(mutation_sample.generated, "__defaults__", (tmp_path / "mutants",))
    names = sorted(codes)
    assert mutation_sample.draw(4, 7, []) == mutation_sample.draw(4, 7, [])
    assert not set(mutation_sample.draw(5, 7, names[:3])) & set(names[:3])
    result = mutation_sample.score(names, {names[4]: "computes the same"})
    assert (result["detected"], result["judged"]) == (4, 6)
    assert [why for _, why in result["survivors"]] == ["survived", "no tests"]
    assert result["equivalent"] == [names[4]] and result["not run"] == [names[7]]
