"""Chapter 11's summary of the focal-loss runs across data and model sizes (Charoenphakdee et al., Figs. 4(c), 5, 6):
the stored summary.npz is what summarize.py makes from the runs, checked by retraining the cheapest run."""

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from calib.experiments import load_grid
from calib.run_config import config_from_meta
from calib.stats import bootstrap_counts
from calib.train import train

ROOT = Path(__file__).resolve().parents[1]
FOLDER = ROOT / "book" / "results" / "11-paper-tables" / "focal-size-width"
DEBIAN_FASHION_MNIST = Path("/usr/share/datasets/fashion-mnist")


def summarize_module():
    spec = importlib.util.spec_from_file_location("focal_size_width_summarize", FOLDER / "summarize.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_summary_holds_every_run_of_both_grids_and_is_small():
    with np.load(FOLDER / "summary.npz") as f:
        s = {k: f[k] for k in f.files}
    grids = [load_grid(FOLDER / g) for g in ("grid-cpu.toml", "grid-ls.toml")]
    grid_runs = {(r.model, r.loss, r.seed) for g in grids for r in g.runs}
    assert set(zip(s["cell"], s["loss"], s["seed"].tolist())) == grid_runs
    assert s["ece_resamples"].shape == (len(grid_runs), 4, 400)
    # the one-hot runs have all four maps, the label-smoothed ones no TS_FL; Psi at gamma = 0 is the identity
    standard = s["kind"] == "standard"
    assert np.isfinite(s["ece"][standard]).all() and np.isnan(s["ece"][~standard, 2:]).all()
    ce = s["loss"] == "ce"
    np.testing.assert_allclose(s["ece"][ce, 0], s["ece"][ce, 1], rtol=1e-12)
    assert (FOLDER / "summary.npz").stat().st_size < 1_000_000


def test_loss_settings_and_bad_labels():
    m = summarize_module()
    assert m.loss_setting("ce") == ("standard", 0.0) and m.loss_setting("fl-3") == ("standard", 3.0)
    assert m.loss_setting("ls-0.1-fl-2") == ("ls", 2.0)
    with pytest.raises(ValueError, match="is not a run of these grids"):
        m.loss_setting("brier")


@pytest.mark.skipif(not DEBIAN_FASHION_MNIST.is_dir(), reason="needs Fashion-MNIST (Debian's dataset-fashion-mnist)")
def test_the_cheapest_run_retrains_to_its_summary(tmp_path):
    """Retrain the 2,000-image cross-entropy run of seed 0 from its stored config and summarise it: under the torch
    kernels it was trained with, the same ECEs and temperatures to 1e-4 (float32 rounding, amplified by SGD); under
    other kernels (``calib._reproducible.kernels_match``) to the seeds' spread: accuracy within 0.5 points, ECE-raw
    within 1 point."""
    from calib._reproducible import kernels_match

    m = summarize_module()
    with np.load(FOLDER / "summary.npz") as f:
        s = {k: f[k] for k in f.files}
    i = int(np.flatnonzero((s["cell"] == "mlp-128-128-n2k") & (s["loss"] == "ce") & (s["seed"] == 0))[0])
    meta = json.loads(str(s["meta"][i]))
    (tmp_path / "meta.json").write_text(json.dumps(meta))
    threads = torch.get_num_threads()
    torch.set_num_threads(int(meta.get("threads", threads)))
    try:
        rerun = train(config_from_meta(tmp_path / "meta.json"), tmp_path / "rerun", progress=False)
    finally:
        torch.set_num_threads(threads)
    fresh = m.summarize_run(rerun.logits(), 0.0, True, bootstrap_counts(10_000, m.N_RESAMPLES, m.RESAMPLE_SEED))
    kernels = kernels_match(meta)
    if kernels["torch"]:
        np.testing.assert_allclose(fresh["ece"], s["ece"][i], atol=1e-4)
        np.testing.assert_allclose([fresh["t_nll"], fresh["t_fl"]], [s["t_nll"][i], s["t_fl"][i]], rtol=1e-3)
        assert abs(fresh["accuracy"] - s["accuracy"][i]) <= 2e-4
    else:
        print(f"other torch kernels ({kernels['why']}): comparing accuracy and ECE-raw")
        assert abs(fresh["accuracy"] - s["accuracy"][i]) < 0.005
        assert abs(fresh["ece"][0] - s["ece"][i][0]) < 0.01
