"""Checks behind chapter 09's verdicts on Zhou et al. (2025): the brute-force suprema over binning schemes and
the transcription of the paper's tables."""

import re
from pathlib import Path

import numpy as np
import pytest
from scipy.special import softmax

from calib import selective

PAPER_TEXT = Path("/work/shared/papers/zhou2025-reweighted-risk-aurc.txt")


def test_set_partitions_are_counted_by_the_bell_numbers():
    bell = [1, 1, 2, 5, 15, 52, 203]
    for n, b in enumerate(bell):
        parts = list(selective._set_partitions(list(range(n))))
        assert len(parts) == b
        # each is a partition: every index exactly once
        for part in parts:
            assert sorted(i for block in part for i in block) == list(range(n))


def test_brute_force_suprema_equal_the_singleton_values():
    rng = np.random.default_rng(3)
    for _ in range(25):
        n, k = int(rng.integers(1, 7)), int(rng.integers(2, 5))
        p = softmax(rng.normal(size=(n, k)) * 3, axis=1)
        y = rng.integers(0, k, n)
        sup_ece, sup_cw = selective.sup_binned_brute_force(p, y)
        assert sup_ece == pytest.approx(selective.sup_binned_ece(p, y), abs=1e-12)
        assert sup_cw == pytest.approx(selective.sup_binned_cwece(p, y), abs=1e-12)


def test_brute_force_by_hand():
    # two samples, k = 2: one correct at confidence 0.6, one wrong at confidence 0.7.
    p = np.array([[0.6, 0.4], [0.7, 0.3]])
    y = np.array([0, 1])
    sup_ece, sup_cw = selective.sup_binned_brute_force(p, y)
    # singletons: (|1 - 0.6| + |0 - 0.7|) / 2 = 0.55; one bin: |1 - 1.3| / 2 = 0.15
    assert sup_ece == pytest.approx(0.55)
    # class-wise singletons: (1/2) * [(|1-0.6| + |0-0.7|) + (|0-0.4| + |1-0.3|)] / 2 = 0.55
    assert sup_cw == pytest.approx(0.55)


def test_brute_force_refuses_large_n():
    with pytest.raises(ValueError, match="Bell"):
        selective.sup_binned_brute_force(np.full((9, 2), 0.5), np.zeros(9, dtype=int))


@pytest.mark.skipif(not PAPER_TEXT.is_file(), reason="the paper's text is not available here")
def test_transcribed_tables_occur_in_the_paper_in_order():
    text = re.sub(r"\s+", " ", PAPER_TEXT.read_text(encoding="utf-8"))
    for name in ("_TABLE1", "_TABLE2", "_APP_TABLE4"):
        position = 0
        for line in getattr(selective, name).strip().splitlines():
            found = text.find(line.strip(), position)
            assert found >= 0, f"{name}: {line!r} not found after position {position}"
            position = found + len(line.strip())
    for row in ("5.0 4.5 2.6 4.0 5.0 6.1 3.9 4.5 1.0 1.0", "2.0 3.0 1.5 2.0 1.0 1.5 1.0 1.0 1.0 1.0",
                "0.9 0.9 0.8 0.8 0.9 0.8 0.8 0.9 0.2 0.4"):
        assert row in text


def test_temperature_scaling_counts_from_app_table4():
    t = selective.paper_tables()
    col = {m: j for j, m in enumerate(selective.TABLE_METHODS)}
    better = (t["ecea_ts"] < t["ecea"]).sum(axis=0)
    assert better[col["XE"]] == 9
    assert better[col["Dual"]] == 0
    tin = [selective.TABLE_ROWS.index("Tiny-ImageNet/ViT-Small"), selective.TABLE_ROWS.index("Tiny-ImageNet/Swin-Tiny")]
    assert int((t["ecea_ts"][tin] > t["ecea"][tin]).sum()) == 12
    # TS preserves accuracy: App. Table 4 prints the same accuracy before and after
    assert np.array_equal(t["ecea_ts_acc"], t["ecea_acc"])
