"""The smoke run of an installed calib (not a test module: ``tests/test_packaging.py`` runs it with the interpreter of
a fresh environment, outside the repository, where calib is installed from its wheel).

It imports every public module of the installed calib and makes one real call in each, on small inputs, and prints
one JSON object: ``modules`` (module -> the call's result, as JSON data, or ``"ERROR: <type>: <message>"``),
``files`` (module -> the file it was imported from), ``walked`` (the public modules the installed package holds),
``calib`` (its ``__file__``) and ``sys_path``. The test compares each result with the value it must have. Usage:
``python wheel_smoke.py SCRATCH_FOLDER``.
"""

import contextlib
import importlib
import io
import json
import pkgutil
import sys
import traceback
from pathlib import Path

import numpy as np

PROBS = np.array([[0.8, 0.2], [0.3, 0.7], [0.6, 0.4], [0.1, 0.9]])
LABELS = np.array([0, 1, 1, 1])          # top-label ECE (15 bins) 0.3, accuracy 0.75, AURC 1/16
#: A folder for the files the calls write: the first argument.
SCRATCH = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(".")
#: module -> its call (the list of tests/test_api_reference.py's PUBLIC_MODULES; the test checks that it is).
CALLS = {}


def smoke(module: str):
    """Register the decorated function as the call of ``module``: it takes the module and returns JSON data."""
    def register(call):
        CALLS[module] = call
        return call
    return register


def _round(x, digits=6):
    return np.round(np.asarray(x, dtype=np.float64), digits).tolist()


def _torch_pair():
    import torch

    return torch.tensor([[0.0, 0.0], [1.0, -1.0]]), torch.tensor([0, 1])


def _scaled_logits(scale=2.0, n=4000, seed=0):
    """Logits ``scale`` times those that are calibrated for the labels drawn: temperature scaling fits T = scale."""
    rng = np.random.default_rng(seed)
    z = rng.normal(0.0, 2.0, (n, 3))
    p = np.exp(z - z.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    y = (rng.random(n)[:, None] > np.cumsum(p, axis=1)).sum(axis=1)
    return scale * z, y


@smoke("calib.metrics.binned")
def metrics_binned(m):
    return _round(m.ece(PROBS, LABELS))


@smoke("calib.metrics.scores")
def metrics_scores(m):
    return _round([m.accuracy(PROBS, LABELS), m.nll(PROBS, LABELS)])


@smoke("calib.metrics.risk_coverage")
def metrics_risk_coverage(m):
    return _round(m.aurc(PROBS, LABELS))


@smoke("calib.metrics.registry")
def metrics_registry(m):
    return _round(m.get_metric("ece")(PROBS, LABELS))


@smoke("calib.metrics.streaming")
def metrics_streaming(m):
    stream = m.StreamingECE()
    stream.update(PROBS[:2], LABELS[:2])
    stream.update(PROBS[2:], LABELS[2:])
    return _round(stream.compute())


@smoke("calib.metrics.resampling")
def metrics_resampling(m):
    return _round(m.statistic(PROBS, LABELS, "accuracy").columns.ravel())


@smoke("calib.stats.intervals")
def stats_intervals(m):
    interval = m.seed_interval([1.0, 2.0, 3.0])
    return _round([interval.estimate, interval.low, interval.high], 3)


@smoke("calib.stats.test_set")
def stats_test_set(m):
    counts = m.bootstrap_counts(5, n_resamples=50)
    return [list(counts.shape), _round(np.unique(counts.sum(axis=1)))]


@smoke("calib.stats.decisions")
def stats_decisions(m):
    return _round(m.holm([0.01, 0.04, 0.03]))


@smoke("calib.stats.ranks")
def stats_ranks(m):
    test = m.rank_agreement_test([1, 2, 3, 4], [1, 2, 3, 4])
    return _round([test.tau, test.p_value])


@smoke("calib.stats.effects")
def stats_effects(m):
    return _round(m.cohens_d(1.0, 1.0, 0.0, 1.0))


@smoke("calib.posthoc.temperature")
def posthoc_temperature(m):
    logits, labels = _scaled_logits()
    return _round(m.TemperatureScaling().fit(logits, labels).temperature_, 1)


@smoke("calib.posthoc.focal_temperature")
def posthoc_focal_temperature(m):
    logits, labels = _scaled_logits(n=300)
    probs = m.FocalTemperatureScaling().fit(logits, labels).predict_proba(logits[:5])
    return [list(probs.shape), _round(probs.sum(axis=1))]


@smoke("calib.posthoc.grid")
def posthoc_grid(m):
    grid = np.linspace(0.5, 2.0, 7)
    inside = m.grid_edge(grid, (grid - 1.25) ** 2, 0.0, lambda edge: "widen it", warn=False)
    at_edge = m.grid_edge(grid, grid, 0.0, lambda edge: "widen it", warn=False)
    return [inside, isinstance(at_edge, str)]


@smoke("calib.posthoc.registry")
def posthoc_registry(m):
    return [name in m.map_names() for name in ("none", "ts-nll", "fts")]


@smoke("calib.losses.functional")
def losses_functional(m):
    logits, targets = _torch_pair()
    return _round([float(m.cross_entropy(logits, targets)), float(m.focal_loss(logits, targets, gamma=0.0))], 4)


@smoke("calib.losses.batch")
def losses_batch(m):
    logits, targets = _torch_pair()
    return _round(float(m.mmce(logits, targets)), 4)


@smoke("calib.losses.registry")
def losses_registry(m):
    logits, targets = _torch_pair()
    return _round(float(m.get_loss("ce")(logits, targets)), 4)


@smoke("calib.losses.modules")
def losses_modules(m):
    logits, targets = _torch_pair()
    return _round(float(m.FocalLoss(gamma=0.0)(logits, targets)), 4)


@smoke("calib.focal.gradient")
def focal_gradient(m):
    return _round(m.gamma_star(np.exp(-1.0)))


@smoke("calib.focal.schedules")
def focal_schedules(m):
    return _round([m.schedule_gamma(m.FLSD_53, 0.1), m.schedule_gamma(m.FLSD_53, 0.5)])


@smoke("calib.focal.optimum")
def focal_optimum(m):
    return _round(m.focal_optimal_prediction([0.3, 0.7], 0.0))


@smoke("calib.focal.calibration_map")
def focal_calibration_map(m):
    return _round(m.focal_map(np.array([[0.0, np.log(3.0)]]), 0.0))


@smoke("calib.focal.numerics")
def focal_numerics(m):
    return _round(m.softplus(np.array([0.0])), 6)


@smoke("calib.soft_binning")
def soft_binning(m):
    return _round(m.bin_centres(4))


@smoke("calib.simulate")
def simulate(m):
    return _round(m.softmax([[0.0, np.log(3.0)]]))


@smoke("calib.selective")
def selective(m):
    return _round(m.inverse_focal_gamma_threshold(), 4)


@smoke("calib.data")
def data(m):
    train, val = m.validation_split(10, 3)
    return [len(train), len(val), sorted(int(i) for i in (*train, *val))]


@smoke("calib.corruptions")
def corruptions(m):
    grey = np.full((2, 28, 28), 128, dtype=np.uint8)
    out = m.corrupt_images(grey, "jpeg_compression", 3, seed=0)          # Pillow's JPEG
    return [list(out.shape), str(out.dtype), int(np.abs(out.astype(int) - 128).max() <= 1)]


@smoke("calib.toy_data")
def toy_data(m):
    toy = m.make_linear_toy(n_train=10, n_test=5)
    return [list(toy.x_train.shape), list(toy.x_test.shape)]


@smoke("calib.dataset_files")
def dataset_files(m):
    import gzip

    arr = np.arange(6, dtype=np.uint8).reshape(2, 3)
    path = SCRATCH / "tiny-idx3-ubyte.gz"
    with gzip.open(path, "wb") as fh:
        fh.write(bytes([0, 0, 8, 2, 0, 0, 0, 2, 0, 0, 0, 3]) + arr.tobytes())
    return m.read_idx(path).tolist()


@smoke("calib.models")
def models(m):
    return m.count_parameters(m.build_model("linear", (4,), 3, seed=0))


@smoke("calib.small_training")
def small_training(m):
    x = np.array([[1.0, 0.0], [-1.0, 0.0], [0.0, 1.0], [0.0, -1.0]])
    y = np.array([1, 0, 1, 0])
    out = m.logistic_gradient_descent(x, y, iterations=200, record_every=100)
    return bool(np.all(np.asarray(out["final_w"]) > 0))                       # the separating direction (1, 1)


@smoke("calib.run_config")
def run_config(m):
    return list(m.paper_milestones(350))


@smoke("calib.train")
def train(m):
    logits = np.log(PROBS).astype(np.float32)
    return _round(m.split_statistics(logits, LABELS)["accuracy"])


@smoke("calib.distributed")
def distributed(m):
    return m.world_size()


@smoke("calib.runs")
def runs(m):
    path = SCRATCH / "meta.json"
    m.write_json(path, {"a": 1})
    return m.read_json_object(path)


@smoke("calib.experiments")
def experiments(m):
    return m.run_path(Path("store"), "mlp", "ce", 3).as_posix()


@smoke("calib.shift")
def shift(m):
    sets = m.shift_sets(["fog"], severities=(1, 5))
    return [sets, _round(m.corruption_sem([[0.1, 0.3], [0.2, 0.5]]), 6)]


@smoke("calib.plots")
def plots(m):
    import matplotlib

    matplotlib.use("Agg")
    return type(m.reliability_diagram(PROBS, LABELS)).__name__


@smoke("calib.published.tables")
def published_tables(m):
    return {"dir": str(m.published_dir()), "mukhoti2020": len(m.read_published("mukhoti2020")),
            "mukhoti2020 tables": len(m.read_published_tables("mukhoti2020")),
            "zhou2025 acc": list(m.zhou2025_tables()["acc"].shape)}


@smoke("calib.published.compare")
def published_compare(m):
    from calib.published.tables import read_published_tables

    summary = m.reproduction_rows(read_published_tables("mukhoti2020"), {}, {}, "small", "make gpu")
    return [m.agree_as_printed("4.39", "4.4"), m.agree_as_printed("4.39", "4.5"), m.canonical_loss("FL-53"),
            len(summary)]


@smoke("calib.cli")
def cli(m):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            code = m.main(["--help"])
        except SystemExit as exc:
            code = exc.code
    return [code, out.getvalue().startswith("usage: calib")]


@smoke("calib.symbolic.base")
def symbolic_base(m):
    return [bool(m.vanishes(m.focal_loss_expr(gam=0) - m.cross_entropy_expr())), str(m.focal_loss_expr())]


@smoke("calib.symbolic.mukhoti")
def symbolic_mukhoti(m):
    return type(m.gamma_star_at_inverse_e()).__name__


@smoke("calib.symbolic.charoenphakdee")
def symbolic_charoenphakdee(m):
    return type(m.posterior_recovery()).__name__


@smoke("calib.symbolic.zhou")
def symbolic_zhou(m):
    return type(m.reweighted_risk()).__name__


@smoke("calib.symbolic.komisarenko")
def symbolic_komisarenko(m):
    return type(m.focal_convexity()).__name__


@smoke("calib.symbolic.karandikar")
def symbolic_karandikar(m):
    return type(m.soft_binning()).__name__



def main() -> None:
    import calib

    results, files = {}, {}
    for module, call in CALLS.items():
        try:
            mod = importlib.import_module(module)
            files[module] = mod.__file__
            results[module] = call(mod)
        except Exception as exc:                                       # reported, and the test names it
            results[module] = f"ERROR: {type(exc).__name__}: {exc}"
            traceback.print_exc()
    walked = sorted(m.name for m in pkgutil.walk_packages(calib.__path__, "calib.")
                    if not any(part.startswith("_") for part in m.name.split(".")[1:]))
    print(json.dumps({"modules": results, "files": files, "walked": walked, "calib": calib.__file__,
                      "sys_path": sys.path}, default=str))


if __name__ == "__main__":
    main()
