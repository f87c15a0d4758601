"""calib: calibration metrics, focal losses and post-hoc calibration, the library under the focal-calibration book.

Modules, in layers (an import goes to the same or a lower layer, never in a cycle; ``tests/test_layers.py``
checks it against this list; ARCHITECTURE.md explains them):

- layer 0: ``calib._validate`` (input checking), ``calib._reproducible`` (one CPU instruction set for torch, so
  that runs retrain bit for bit on any x86 machine), ``calib.symbolic`` (sympy derivations the chapters display),
  ``calib.focal`` (the focal family as numpy functions, a package: ``gradient`` g, thresholds and gamma*;
  ``schedules`` FLSD; ``optimum`` the focal risk and its minimiser; ``calibration_map`` Psi^gamma and the TS
  bounds; ``numerics`` the kernels they share), ``calib.stats`` (seed-level and paired-bootstrap intervals, and
  the rule that turns them into a verdict), ``calib.distributed`` (the process group of a torchrun launch and
  the collectives calib uses)
- layer 1: ``calib.metrics`` (calibration, accuracy and selective-classification metrics, a package:
  ``binned`` binned calibration errors and reliability-diagram data; ``scores`` NLL, Brier, accuracy, KS;
  ``risk_coverage`` confidence scores, risk-coverage curve, AURC; ``streaming`` the same accumulated over
  batches and ranks; ``registry`` the one table behind ``get_metric``),
  ``calib.soft_binning`` (soft bin membership, SB-ECE and soft uncertainty in numpy, Karandikar et al. 2021),
  ``calib.losses`` (training losses in torch, a package: ``functional`` per-sample losses, ``modules`` the
  focal family as torch modules, ``batch`` batch objectives, ``registry`` the one table behind ``get_loss``),
  ``calib.published`` (the papers' result tables, a package: ``tables`` the transcribed tables read as data;
  ``compare`` the printed numbers compared with each other and with the book's runs), ``calib.toy_data`` (the
  papers' toy problems as seeded generators), ``calib.dataset_files`` (the image datasets' files: found,
  downloaded, read), ``calib.runs`` (the run directory: its files, lock, atomic writes and the errors for each
  damaged file)
- layer 2: ``calib.posthoc`` (post-hoc maps, a package: ``temperature`` temperature scaling;
  ``focal_temperature`` focal temperature scaling; ``grid`` the grid-edge check; ``registry`` the one table
  behind ``get_map``), ``calib.simulate`` (synthetic
  calibrated and miscalibrated models, exact population errors), ``calib.data`` (datasets and loaders),
  ``calib.corruptions`` (Hendrycks & Dietterich's common corruptions of grey images: Fashion-MNIST-C),
  ``calib.models`` (networks), ``calib.small_training`` (the in-memory trainings of the chapters: the linear
  toy's gradient descent, a minimal loop), ``calib.run_config`` (the configuration of a training run, checked,
  and read back from a stored run)
- layer 3: ``calib.train`` (training runs with diagnostics, checkpoints and resume), ``calib.experiments`` (grids
  of runs, the store of finished runs, post-hoc maps and metrics across runs), ``calib.shift`` (calibration under
  dataset shift: stored networks on the corrupted test sets, post-hoc maps fitted on clean validation),
  ``calib.selective``
  (Zhou et al. 2025's selective-classification bounds and counterexamples, built on simulate and losses)
- layer 4: ``calib.plots`` (the reliability diagram), ``calib.cli`` (the ``calib`` command)

The book's machinery (its runner, back-matter pages, browser check, notebook helpers, claims ledger, exercise
checker and answer key) is no part of the library: it is the package ``calib_book`` in the repository's
``book/`` folder, which imports calib and which no library module imports (only the ``calib book`` command
loads it, from a checkout).

Submodules are imported on first use, ``import calib.metrics`` or ``calib.metrics`` after ``import calib`` (the
module's ``__getattr__``, PEP 562, as scikit-learn does), so that ``import calib`` stays cheap: it imports
neither numpy nor torch.
"""

__version__ = "0.1.0"


def _public_submodules() -> list[str]:
    """The names of calib's public modules and packages (``metrics``, ``losses``, ...), read off the package folder."""
    from pkgutil import iter_modules

    return sorted(m.name for m in iter_modules(__path__) if not m.name.startswith("_"))


def __getattr__(name: str):
    if not name.startswith("_") and name in _public_submodules():
        from importlib import import_module

        return import_module(f"{__name__}.{name}")       # (import_module also binds it here: found once)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_public_submodules()})
