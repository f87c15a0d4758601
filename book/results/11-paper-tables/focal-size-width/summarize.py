"""Summarise the runs of grid-cpu.toml and grid-ls.toml into summary.npz, the compact file chapter 11 reads.

A run's folder holds its validation and test logits (about 0.6 MB); the 69 runs would take 40 MB, and the chapter
needs far less. For each run this keeps, on the 10,000 test images, for four ways of reading the network
(``MAPS``: the raw softmax, the focal calibration map Psi^gamma of the training gamma, temperature scaling by the
validation focal loss at the training gamma, TS_FL, and Psi^gamma after it; the last two for the one-hot runs):

- the ECE with 10 equal-width bins (Charoenphakdee et al.'s, Sec. 6) and its value at each of the book's 400 shared
  bootstrap resamples of the test set (``calib.stats.bootstrap_counts(10000)``, seed 0), so that the chapter's
  paired intervals carry the test set's noise for any pair of runs (``calib.stats.resampled_variance``);
- the under-confident part of that ECE, ``sum_b (n_b / N) max(acc_b - conf_b, 0)`` (the bins above the diagonal),
  with its resamples, for the raw and TS_FL outputs;
- the 10 bins' counts, mean confidence and accuracy;
- the test accuracy and the two fitted temperatures (TS_FL, and the NLL fit that says whether the network is
  over-confident on validation);
- the run's ``meta.json`` (its config, versions, CPU and kernels, so that a retrained run is compared under the
  right tolerance: ``tests/test_focal_size_width.py``).

The values are float64, the resamples float32 (relative rounding 6e-8, far below a resample's spread). Run from the
repository root, after both sweeps (see the grids' headers):

    python book/results/11-paper-tables/focal-size-width/summarize.py
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from scipy.special import softmax

from calib import metrics
from calib.experiments import fit_temperature_focal, load_grid
from calib.focal import focal_map
from calib.stats import AdditiveStatistic, bootstrap_counts

HERE = Path(__file__).resolve().parent
GRIDS = (HERE / "grid-cpu.toml", HERE / "grid-ls.toml")
OUT = HERE / "summary.npz"
N_BINS = 10                                   # the paper's bins (Sec. 6)
MAPS = ("raw", "psi", "tsfl", "tsfl_psi")
N_RESAMPLES, RESAMPLE_SEED = 400, 0           # the book's shared test-set resamples (calib.stats.test_set)


def loss_setting(loss: str) -> tuple[str, float]:
    """The paradigm and training gamma of a loss label: ``"ce"`` -> ("standard", 0), ``"fl-2"`` -> ("standard", 2),
    ``"ls-0.1-fl-3"`` -> ("ls", 3)."""
    if loss == "ce":
        return "standard", 0.0
    if loss.startswith("fl-"):
        return "standard", float(loss[3:])
    if loss.startswith("ls-") and "-fl-" in loss:
        return "ls", float(loss.partition("-fl-")[2])
    raise ValueError(f"loss {loss!r} is not a run of these grids ('ce', 'fl-<gamma>' or 'ls-<alpha>-fl-<gamma>').")


def _under_confident_part(n_bins: int):
    def finish(sums: np.ndarray, total: np.ndarray) -> np.ndarray:
        conf, correct = sums[:, :n_bins], sums[:, n_bins:]
        return np.maximum(correct - conf, 0.0).sum(axis=1) / total
    return finish


def summarize_run(logits: dict, gamma: float, tsfl: bool, counts: np.ndarray) -> dict:
    """The summary of one run from its ``logits.npz`` arrays (module docstring); ``counts`` are the test-set
    resamples (``calib.stats.bootstrap_counts``). Maps a run does not get (TS_FL of a label-smoothed run) are NaN."""
    z, y = np.asarray(logits["test_logits"], dtype=np.float64), np.asarray(logits["test_labels"])
    zv, yv = logits["val_logits"], logits["val_labels"]
    t_nll = fit_temperature_focal(zv, yv, 0.0)
    t_fl = fit_temperature_focal(zv, yv, gamma) if tsfl else np.nan
    probs = {"raw": softmax(z, axis=1), "psi": focal_map(z, gamma)}
    if tsfl:
        probs["tsfl"], probs["tsfl_psi"] = softmax(z / t_fl, axis=1), focal_map(z / t_fl, gamma)
    m, b = len(MAPS), counts.shape[0]
    out = {"ece": np.full(m, np.nan), "ece_resamples": np.full((m, b), np.nan, dtype=np.float32),
           "uc": np.full(m, np.nan), "uc_resamples": np.full((m, b), np.nan, dtype=np.float32),
           "bins": np.full((m, 3, N_BINS), np.nan), "accuracy": metrics.accuracy(probs["raw"], y),
           "t_nll": t_nll, "t_fl": t_fl, "gamma": gamma}
    for i, name in enumerate(MAPS):
        if name not in probs:
            continue
        stat = metrics.statistic(probs[name], y, "ece", n_bins=N_BINS)
        out["ece"][i], out["ece_resamples"][i] = stat.value, stat.resampled(counts)
        rel = metrics.reliability(probs[name], y, n_bins=N_BINS)
        out["bins"][i] = np.stack([rel.counts, rel.confidence, rel.accuracy])
        if name in ("raw", "tsfl"):
            uc = AdditiveStatistic(stat.columns, _under_confident_part(N_BINS))
            out["uc"][i], out["uc_resamples"][i] = uc.value, uc.resampled(counts)
    return out


def runs_of_grids(grids=GRIDS) -> list:
    """Every run of the grids, in grid order: (cell label, loss label, seed, run folder)."""
    return [(r.model, r.loss, r.seed, r.out) for g in grids for r in load_grid(g).runs]


def summarize(grids=GRIDS, out=OUT) -> Path:
    """Summarise every finished run of ``grids`` into ``out`` (an npz; the module docstring says what it holds)."""
    counts = bootstrap_counts(10_000, N_RESAMPLES, RESAMPLE_SEED)
    rows, missing = [], []
    for cell, loss, seed, folder in runs_of_grids(grids):
        if not (folder / "logits.npz").is_file():
            missing.append(f"{cell}/{loss}/seed{seed}")
            continue
        kind, gamma = loss_setting(loss)
        with np.load(folder / "logits.npz") as f:
            row = summarize_run(dict(f), gamma, kind == "standard", counts)
        row["meta"] = (folder / "meta.json").read_text()
        rows.append(((cell, loss, kind, seed), row))
    if missing:
        print(f"{len(missing)} runs not stored yet, left out: {', '.join(missing)}", file=sys.stderr)
    keys = rows[0][1].keys()
    arrays = {k: np.stack([np.asarray(r[k]) for _, r in rows]) for k in keys}
    arrays = {k: (v.astype(np.float32) if k.endswith("_resamples") else v) for k, v in arrays.items()}
    np.savez_compressed(out, cell=np.array([r[0][0] for r in rows]), loss=np.array([r[0][1] for r in rows]),
                        kind=np.array([r[0][2] for r in rows]), seed=np.array([r[0][3] for r in rows]),
                        maps=np.array(MAPS), n_bins=N_BINS, n_resamples=N_RESAMPLES, resample_seed=RESAMPLE_SEED,
                        **arrays)
    return Path(out)


if __name__ == "__main__":
    path = summarize()
    print(f"wrote {path} ({path.stat().st_size / 1e3:.0f} kB)")
