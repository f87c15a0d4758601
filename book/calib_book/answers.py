"""The expected answers behind :func:`calib_book.exercises.check`, one ``register`` call per exercise.

Each expected value is computed by the library from the exercise's data (a closed form in sympy, or the
function the chapter teaches), so an answer key cannot drift from what the chapters compute. The chapter's
solution checks its own answer against the same entry with ``check(..., strict=True)``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import pickle
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

__all__ = ["Expected", "Exercise", "EXERCISES", "ACCEPT_RULES", "register", "interval_claim", "construction",
           "accepted", "expected_value", "interval_within_seed_noise", "verdict_of", "benchmark_runs", "BENCHMARK_STORE", "BENCHMARK_MODEL"]


@dataclass(frozen=True)
class Expected:
    """One part's expected answer: a function that computes it, and the rule that grades an answer to it.

    A numeric answer is ``right`` within ``rtol``/``atol`` (the precision the question asks for: ``rtol = 1e-6``
    asks for six significant digits), ``close`` when it is the expected value correctly rounded to at least
    ``close_digits`` significant digits (an error that rounding explains, so 25 ln 2 for 24 ln 2, 4 % off, is
    ``wrong``), and ``wrong`` beyond. :func:`calib_book.exercises.rule` states the rule of each part in words.

    Parameters
    ----------
    compute : callable
        Called once with no arguments; returns the expected value (number, array, sympy expression, bool, str).
    rtol, atol : float
        Tolerances for a ``right`` numeric answer.
    close_digits : int or None
        An answer that agrees with the expected value to this many significant digits (but not to ``rtol``) is
        ``close``; None for a count or any part where a near miss is a wrong answer.
    hint : str
        Shown with a ``wrong`` or ``close`` answer: the concept the part tests, never the method or the answer.
    points : int
        What a right answer to this part earns in the course's grading (the syllabus and the autograder read it).
    accept : str, callable or None
        For a question with several valid answers, the rule that decides (:mod:`calib_book.course_check` applies it,
        in ``check`` and in the course's public and hidden tests alike): ``"any-of"`` (within ``rtol``/``atol`` of
        the expected value or of one of ``alternatives()``), ``"interval"`` (the expected value is the key's 95 %
        interval, and an interval within seed noise of it is right: :func:`~calib_book.course_check.within_seed_noise`),
        or a construction's property ``verify(answer) -> bool`` (the expected value is one valid example; see
        :func:`construction`).
    accepts : str
        The valid answers in words, for :func:`calib_book.exercises.rule` (with ``accept``).
    alternatives : callable or None
        With ``accept="any-of"``: returns the list of the other valid values.
    exact : bool
        The part asks for a closed form: only a sympy expression equal to the expected one is ``right``; a decimal
        number (which the chapter may print) is at best ``close``.
    """

    compute: Callable[[], Any]
    rtol: float = 1e-6
    atol: float = 1e-12
    close_digits: int | None = 3
    hint: str = ""
    points: int = 1
    accept: str | Callable[[Any], bool] | None = None
    accepts: str = ""
    exact: bool = False
    alternatives: Callable[[], list] | None = None

    def __post_init__(self):
        if isinstance(self.accept, str) and self.accept not in ACCEPT_RULES:
            raise ValueError(f"accept={self.accept!r}: give one of {', '.join(ACCEPT_RULES)}, a construction's "
                             f"verify(answer) -> bool, or None.")
        if (self.alternatives is not None) != (self.accept == "any-of"):
            raise ValueError("alternatives= goes with accept='any-of' (the other valid values), and only with it.")


#: The rules for a part with several valid answers that need no secret to state (see :class:`Expected`).
ACCEPT_RULES = ("any-of", "interval")


@dataclass(frozen=True)
class Exercise:
    """An exercise's self-check: its label, its chapter, and the expected answer of each named part."""

    label: str
    chapter: str
    parts: dict[str, Expected]


#: Every exercise with a self-check, by label (filled by the ``register`` calls below).
#:
#: :meta hide-value:
EXERCISES: dict[str, Exercise] = {}


#: The expected values computed so far in this process, by ``(label, part)``: each is computed once, whoever asks
#: (``check``, the course builder, the leak scan); some rerun small trainings.
_VALUES: dict[tuple[str, str], Any] = {}


def expected_value(label: str, part: str):
    """The expected value of ``part`` of exercise ``label``, computed on first use and kept for the process, and
    stored in a checkout's ``_build/cache/answers/KEY/`` (:func:`~calib_book.cache.answers_key`: the library, the
    stored results, the versions) so that another process of the same checkout reads it instead of computing it
    again (``make test`` asks for every value in two processes; ``make course`` after it computes none)."""
    return _computed_once(label, part, EXERCISES[label].parts[part].compute)


def _computed_once(label: str, part: str, compute: Callable[[], Any]):
    """``compute()``, kept for the process under ``(label, part)`` and stored as :func:`expected_value` says. The
    process that computes a value holds its lock meanwhile, and another that asks for it waits and reads it: two
    processes that ask at once (a chapter's kernel and the course build, in `make test`) compute it once."""
    key = (label, part)
    if key not in _VALUES:
        stored = _stored_value_file(label, part)
        with _value_lock(stored):
            if stored is not None and stored.is_file():
                try:
                    _VALUES[key] = pickle.loads(stored.read_bytes())
                    return _VALUES[key]
                except Exception:                   # noqa: BLE001 - damaged or from elsewhere: compute it again
                    pass
            _VALUES[key] = compute()
            if stored is not None:
                try:
                    from calib_book.claims import write_atomic

                    write_atomic(stored, pickle.dumps(_VALUES[key]))
                except Exception:                   # noqa: BLE001 - not picklable, or a read-only checkout
                    pass
    return _VALUES[key]


@contextlib.contextmanager
def _value_lock(stored: Path | None):
    """An exclusive lock on ``stored`` (``<stored>.lock`` beside it, released when the process ends, however it
    ends); none outside a checkout, in a read-only one, or where ``fcntl`` does not exist (Windows)."""
    try:
        import fcntl

        stored.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(stored.with_name(stored.name + ".lock"), os.O_RDWR | os.O_CREAT, 0o644)
    except (ImportError, AttributeError, OSError):  # no fcntl, no store (None), or a read-only checkout
        yield
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


@functools.lru_cache(maxsize=1)
def _value_store() -> Path | None:
    """``_build/cache/answers/KEY`` of the checkout that holds this package, or None outside a checkout."""
    root = Path(__file__).resolve().parents[2]
    if not ((root / "calib").is_dir() and (root / "_toc.yml").is_file()):
        return None
    import shutil
    import time

    from calib_book.cache import answers_key

    store, key = root / "_build" / "cache" / "answers", answers_key(root)
    # The stores of other keys untouched for an hour go: an earlier library's values are stale for good. A recent
    # one may be another process's (a chapter's kernel, whose CPU settings are pinned, has a key of its own).
    for other in store.iterdir() if store.is_dir() else ():
        if other.name != key and time.time() - other.stat().st_mtime > 3600:
            shutil.rmtree(other, ignore_errors=True)
    return store / key


def _stored_value_file(label: str, part: str) -> Path | None:
    store = _value_store()
    return None if store is None else store / f"{label}.{part}.pickle"


def register(label: str, chapter: str, **parts: Expected) -> Exercise:
    """Add an exercise's self-check: ``register("ex-x", "02-focal-gradient", threshold=Expected(...))``."""
    if not parts:
        raise ValueError(f"register({label!r}): give at least one part, e.g. threshold=Expected(lambda: ...).")
    if label in EXERCISES:
        raise ValueError(f"exercise {label!r} is registered twice; labels are unique book-wide.")
    # the other valid values of an "any-of" part are computed once and stored too, like the expected value
    parts = {name: spec if spec.alternatives is None else dataclasses.replace(
                 spec, alternatives=functools.partial(_computed_once, label, f"{name}.alternatives", spec.alternatives))
             for name, spec in parts.items()}
    exercise = Exercise(label, chapter, parts)
    EXERCISES[label] = exercise
    return exercise


def interval_within_seed_noise(reference, given) -> bool:
    """The rule for an interval a training exercise claims (:func:`calib_book.course_check.within_seed_noise`):
    false, rather than an error, for an answer that is not an interval."""
    from calib_book import course_check

    try:
        return course_check.within_seed_noise(reference, given)
    except AssertionError:
        return False


def interval_claim(reference: Callable[[], Any], hint: str, points: int = 2) -> Expected:
    """An Expected for a training exercise's 95 % interval ``(low, high)``, graded by
    :func:`interval_within_seed_noise` against ``reference()``."""
    return Expected(reference, rtol=1e-6, atol=1e-9, close_digits=None, hint=hint, points=points,
                    accept="interval",
                    accepts="an interval (low, high) whose centre is within seed noise (a quarter of the reference "
                            "interval's width) of the runs' and whose width is within a factor 1.5 of theirs")


def construction(verify: Callable[[Any], bool], example: Callable[[], Any], accepts: str, hint: str,
                 points: int = 2) -> Expected:
    """An Expected for an exercise that asks for an example or a counterexample: any answer for which
    ``verify(answer)`` is true is right; ``example()`` is one (the course's planted right submission).

    ``verify`` must be self-contained (its imports inside its body; numpy, scipy and sympy only; no module
    globals): the course's test files carry its source, so that students' public tests and the hidden tests apply
    the same property. It returns False (or raises) for an answer of the wrong form."""
    if not callable(verify) or not callable(example):
        raise ValueError("construction(verify, example, ...): give two callables, verify(answer) -> bool and "
                         "example() -> one valid answer.")
    return Expected(example, close_digits=None, hint=hint, points=points, accept=verify, accepts=accepts)


def accepted(spec: Expected, expected, given) -> bool:
    """Whether ``given`` is one of the valid answers of a part with an ``accept`` rule (see :class:`Expected`)."""
    from calib_book import course_check

    if spec.accept == "interval":
        return interval_within_seed_noise(expected, given)
    if spec.accept == "any-of":
        return course_check.any_of([expected, *spec.alternatives()], given, spec.rtol, spec.atol)
    try:
        return bool(spec.accept(given))
    except Exception:           # a construction of the wrong form is not a valid one
        return False


def verdict_of(interval) -> str:
    """'lower', 'higher' or 'no difference': which side of 0 a 95 % interval of a difference lies on."""
    low, high = (float(v) for v in interval)
    return "lower" if high < 0 else "higher" if low > 0 else "no difference"


def _sympy():
    import sympy

    return sympy


# --- 00 Using calib in your own training -------------------------------------------------------------------------

# Chapter 00's exercises train on a smaller setting than the chapter (stated in each exercise), so that the key's
# rerun of their twelve runs (four losses, seeds 0, 1, 2) takes about 15 s on one thread.

_CH00_SETTING = dict(n_train=5_000, hidden=64, epochs=4)


def _ch00_run(loss, seed):
    """One run of chapter 00's loop in its exercises' setting (the first 5,000 training images, two hidden layers
    of 64, 4 epochs, one thread): the test ECE (15 equal-width bins) before and after TS fitted on the validation
    split by NLL and by the ECE grid, and the two temperatures."""
    return _ch00_cached_run(loss, seed, **_CH00_SETTING)


@functools.lru_cache(maxsize=None)
def _ch00_cached_run(loss, seed, n_train, hidden, epochs):
    import warnings

    import torch
    from scipy.special import softmax

    from calib import metrics
    from calib.losses import get_loss
    from calib.posthoc import TemperatureScaling
    from calib.run_config import paper_milestones

    data = _ch00_data(n_train)
    mean, std = torch.as_tensor(data.mean), torch.as_tensor(data.std)

    def inputs(images):
        x = torch.as_tensor(images, dtype=torch.float32) / 255.0
        return ((x - mean.view(1, -1, 1, 1)) / std.view(1, -1, 1, 1)).flatten(1)

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        x_train, y_train = inputs(data.x_train), torch.as_tensor(data.y_train)
        loss_fn = get_loss("ce", secondary="s-avuc", secondary_weight=1.0) if loss == "ce+s-avuc" else get_loss(loss)
        torch.manual_seed(seed)
        model = torch.nn.Sequential(torch.nn.Linear(x_train.shape[1], hidden), torch.nn.ReLU(),
                                    torch.nn.Linear(hidden, hidden), torch.nn.ReLU(),
                                    torch.nn.Linear(hidden, data.n_classes))
        optimiser = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4)
        schedule = torch.optim.lr_scheduler.MultiStepLR(optimiser, milestones=paper_milestones(epochs), gamma=0.1)
        order = torch.Generator().manual_seed(seed)
        model.train()
        for epoch in range(1, epochs + 1):
            if hasattr(loss_fn, "set_epoch"):
                loss_fn.set_epoch(epoch, epochs)
            for batch in torch.randperm(len(y_train), generator=order).split(256):
                optimiser.zero_grad()
                loss_fn(model(x_train[batch]), y_train[batch]).backward()
                optimiser.step()
            schedule.step()
        model.eval()
        with torch.no_grad():
            z_val, z_test = (model(inputs(x)).double().numpy() for x in (data.x_val, data.x_test))
    finally:
        torch.set_num_threads(threads)
    out = {"ece": metrics.ece(softmax(z_test, axis=1), data.y_test, n_bins=15)}
    for objective in ("nll", "ece"):
        with warnings.catch_warnings():          # the ECE grid's edge warning: the exercise compares the two fits
            warnings.simplefilter("ignore")
            ts = TemperatureScaling(objective).fit(z_val, data.y_val)
        out[f"t_{objective}"] = ts.temperature_
        out[f"ece_ts_{objective}"] = metrics.ece(ts.predict_proba(z_test), data.y_test, n_bins=15)
    return out


@functools.lru_cache(maxsize=None)
def _ch00_data(n_train):
    from calib.data import load_dataset

    return load_dataset("fashion-mnist").subset(n_train=n_train)


def _ch00_interval(loss, other, score, other_score=None):
    """The paired 95 % interval over seeds 0, 1, 2 of ``score`` of ``loss`` minus ``other_score`` of ``other``."""
    import numpy as np

    from calib.stats import paired_seed_interval

    a = np.array([_ch00_run(loss, seed)[score] for seed in range(3)])
    b = np.array([_ch00_run(other, seed)[other_score or score] for seed in range(3)])
    interval = paired_seed_interval(a, b)
    return (interval.low, interval.high)


_VERDICT_HINT = "which side of zero the interval lies on: 'lower', 'higher' or 'no difference'"

register("ch00-ex-focal-3", "00-using-calib",
         interval=interval_claim(lambda: _ch00_interval("fl-3", "flsd-53", "t_nll"),
                                 hint="a paired interval over seeds of the difference of the fitted temperatures"),
         verdict=Expected(lambda: verdict_of(_ch00_interval("fl-3", "flsd-53", "t_nll")), close_digits=None,
                          hint=_VERDICT_HINT))
register("ch00-ex-ece-grid", "00-using-calib",
         interval=interval_claim(lambda: _ch00_interval("flsd-53", "flsd-53", "ece_ts_ece", "ece_ts_nll"),
                                 hint="a paired interval over seeds of the difference of two fits' test ECE"),
         verdict=Expected(lambda: verdict_of(_ch00_interval("flsd-53", "flsd-53", "ece_ts_ece", "ece_ts_nll")),
                          close_digits=None, hint=_VERDICT_HINT))
register("ch00-ex-secondary", "00-using-calib",
         interval=interval_claim(lambda: _ch00_interval("ce+s-avuc", "ce", "ece"),
                                 hint="a paired interval over seeds of the difference of the test ECE before any map"),
         verdict=Expected(lambda: verdict_of(_ch00_interval("ce+s-avuc", "ce", "ece")), close_digits=None,
                          hint=_VERDICT_HINT),
         verdict_after_ts=Expected(lambda: verdict_of(_ch00_interval("ce+s-avuc", "ce", "ece_ts_nll")),
                                   close_digits=None, hint=_VERDICT_HINT))


# --- 01 Measuring calibration ------------------------------------------------------------------------------------

# Chapter 01's exercises build their data from seeded generators, as the exercise texts say, so that the key can
# rebuild exactly the student's data.

def _ch01_two_sample_ece(n):
    """The expected 15-bin ECE of n samples of a calibrated model that always predicts with confidence 0.45 (the
    chapter works the same example at 0.3)."""
    import numpy as np

    from calib import simulate

    return float(simulate.expected_ece_exact(np.array([[0.45, 0.25, 0.2, 0.1]] * n)))


def _ch01_debias_data():
    import numpy as np

    from calib import simulate

    z, y = simulate.calibrated_logits(1000, 10, np.random.default_rng(1), scale=2.0)
    return simulate.softmax(z), y


def _ch01_debias(part):
    import numpy as np

    from calib import metrics, simulate

    p, y = _ch01_debias_data()
    plugin = metrics.ece(p, y, norm="l2") ** 2
    bias = simulate.calibrated_ece_bias(p).l2_squared
    if part == "plugin":
        return plugin
    if part == "bias":
        return bias
    if part == "debiased":
        return plugin - bias
    # Kumar et al. (2019), as in their code (p-lambda/verified_calibration): per bin with n_b >= 2,
    # (A_b - C_b)^2 - A_b (1 - A_b) / (n_b - 1), weighted by n_b / N; a bin with fewer samples adds 0
    rel = metrics.reliability(p, y)
    n, full = rel.counts.sum(), rel.counts > 1
    a, c, nb = rel.accuracy[full], rel.confidence[full], rel.counts[full]
    return float(np.sum(nb / n * ((a - c) ** 2 - a * (1 - a) / (nb - 1))))


def _ch01_votes():
    import numpy as np

    from calib import simulate

    rng = np.random.default_rng(5)
    z, y = simulate.calibrated_logits(2000, 10, rng, scale=2.0)
    return rng.multinomial(16, simulate.softmax(z)) / 16, y


def _ch01_ties(part):
    import numpy as np

    from calib import metrics

    votes, y = _ch01_votes()
    if part == "calib_ece":
        return metrics.adaptive_ece(votes, y)
    value, counts = metrics.adaptive_ece_torrvision(votes, y, return_counts=True)
    return value if part == "torrvision_ece" else int(np.sum(counts == 0))


def _ch01_ts_limits(part):
    import numpy as np

    from calib import metrics, simulate
    from calib.posthoc import TemperatureScaling

    z, y = simulate.calibrated_logits(20_000, 10, np.random.default_rng(2), scale=2.0)
    z = np.where(np.arange(20_000) % 2 == 0, 2.5, 0.4)[:, None] * z
    ts = TemperatureScaling("nll").fit(z, y)
    if part == "temperature":
        return ts.temperature_
    return metrics.ece(ts.predict_proba(z), y) if part == "ece_after" else metrics.ece(simulate.softmax(z), y)


def _ch01_hidden_bin(part):
    import numpy as np

    from calib import metrics

    p, y = np.array([[0.97, 0.03], [1.0, 0.0]]), np.array([0, 1])
    if part == "right_closed":
        return metrics.ece(p, y)
    one = p.max(1) == 1.0                            # torchmetrics: confidence 1.0 in a bin of its own
    gap_one = abs(np.mean(p[one].argmax(1) == y[one]) - 1.0)
    return float((1 - one.mean()) * metrics.ece(p[~one], y[~one]) + one.mean() * gap_one)


register("ch01-ex-two-samples", "01-measuring-calibration",
         n2=Expected(lambda: _ch01_two_sample_ece(2),
                     hint="an expectation over the sampling distribution of the accuracy"),
         n3=Expected(lambda: _ch01_two_sample_ece(3),
                     hint="an expectation over the sampling distribution of the accuracy"))
register("ch01-ex-debias", "01-measuring-calibration",
         plugin=Expected(lambda: _ch01_debias("plugin"), hint="the plug-in squared (l2) calibration error"),
         bias=Expected(lambda: _ch01_debias("bias"),
                       hint="what a perfectly calibrated model's binned error is on average"),
         debiased=Expected(lambda: _ch01_debias("debiased"), hint="a bias-corrected estimator"),
         kumar=Expected(lambda: _ch01_debias("kumar"),
                        hint="Kumar et al.'s per-bin correction, which uses the accuracy rather than the confidence"))
register("ch01-ex-ties", "01-measuring-calibration",
         calib_ece=Expected(lambda: _ch01_ties("calib_ece"), hint="equal-mass binning of tied confidences"),
         torrvision_ece=Expected(lambda: _ch01_ties("torrvision_ece"),
                                 hint="the official code's equal-mass binning, quirks included"),
         torrvision_empty=Expected(lambda: _ch01_ties("torrvision_empty"),
                                   hint="what tied confidences do to equal-mass bins"))
register("ch01-ex-ts-limits", "01-measuring-calibration",
         temperature=Expected(lambda: _ch01_ts_limits("temperature"), rtol=1e-4,
                              hint="temperature scaling fitted by likelihood"),
         ece_before=Expected(lambda: _ch01_ts_limits("ece_before"), hint="top-label ECE, equal-width bins"),
         ece_after=Expected(lambda: _ch01_ts_limits("ece_after"), rtol=1e-4, hint="top-label ECE, equal-width bins"))
register("ch01-ex-hidden-bin", "01-measuring-calibration",
         right_closed=Expected(lambda: _ch01_hidden_bin("right_closed"),
                               hint="which bin a confidence of exactly 1 falls into"),
         torchmetrics=Expected(lambda: _ch01_hidden_bin("torchmetrics"), hint="the binning convention of torchmetrics"))


def _ch01_converse_holds(given) -> bool:
    """ch01-ex-converse's property: ``given``, shape (A, 2, 3), is a three-class model on A equally likely inputs
    (row a: the prediction, then the true posterior) that is top-label calibrated (population ECE 0, grouping by
    the confidence) with a positive class-wise ECE (grouping by each class's probability)."""
    import numpy as np

    model = np.asarray(given, dtype=float)
    if model.ndim != 3 or model.shape[1:] != (2, 3) or not np.all(np.isfinite(model)) or np.any(model < 0) \
            or not np.allclose(model.sum(axis=2), 1.0, atol=1e-9):
        return False
    f, eta = model[:, 0], model[:, 1]

    def mean_given(keys, values):          # E[values | keys], inputs equally likely
        _, group = np.unique(keys, return_inverse=True)
        group = group.ravel()
        return (np.bincount(group, weights=values) / np.bincount(group))[group]

    rows = np.arange(len(f))
    top = f.argmax(axis=1)
    confidence, hit = f[rows, top], eta[rows, top]
    top_label_ece = np.mean(np.abs(mean_given(confidence, hit) - confidence))
    classwise_ece = np.mean([np.mean(np.abs(mean_given(f[:, c], eta[:, c]) - f[:, c])) for c in range(3)])
    return bool(top_label_ece < 1e-9 and classwise_ece > 1e-6)


register("ch01-ex-converse", "01-measuring-calibration",
         model=construction(_ch01_converse_holds, lambda: [[[0.6, 0.3, 0.1], [0.6, 0.1, 0.3]]],
                            accepts="any three-class model, as (prediction, posterior) rows of equally likely "
                                    "inputs, with top-label ECE 0 and a positive class-wise ECE",
                            hint="top-label calibration looks only at the largest probability"))


# --- 02 The focal-loss gradient ----------------------------------------------------------------------------------

register("ex-g-gamma-one", "02-focal-gradient",
         threshold=Expected(lambda: _sympy().exp(-1), exact=True, hint="where focal loss's gradient equals cross-entropy's"),
         argmax=Expected(lambda: _sympy().exp(-2), exact=True, hint="the peak of the gradient factor"),
         maximum=Expected(lambda: 1 + _sympy().exp(-2), exact=True, hint="the peak of the gradient factor"))
register("ex-g-near-one", "02-focal-gradient",
         limit=Expected(lambda: 1 + _sympy().Symbol("gamma", nonnegative=True),
                        hint="how fast the gradient factor vanishes near p = 1"))


def _entropy_bound_part(part):
    import numpy as np

    from calib import focal, metrics, symbolic

    p_hat, eta = np.array([0.6, 0.3, 0.1]), np.array([1.0, 0.0, 0.0])
    if part == "focal_loss":
        return float(focal.focal_risk(p_hat, eta, 2.0))
    if part == "kl":                                 # one-hot eta: KL(eta || p_hat) is the cross-entropy
        return metrics.nll(p_hat[None], [0])
    if part == "entropy":                            # L_c - gamma H[p_hat] at gamma = 0 and 1
        return float(focal.entropy_regularised_bound(p_hat, eta, 0.0) - focal.entropy_regularised_bound(p_hat, eta, 1.0))
    if part == "bound":
        return float(focal.entropy_regularised_bound(p_hat, eta, 2.0))
    d = symbolic.entropy_bound()
    if part == "bernoulli_gap":
        return float(d["bernoulli_gap"].subs({symbolic.p: 0.6, symbolic.gamma: 0.5}))
    return d["dD_at_0"]


register("ex-entropy-bound", "02-focal-gradient",
         focal_loss=Expected(lambda: _entropy_bound_part("focal_loss"), hint="the focal loss of one prediction"),
         kl=Expected(lambda: _entropy_bound_part("kl"), hint="the KL divergence from a one-hot target"),
         entropy=Expected(lambda: _entropy_bound_part("entropy"), hint="the entropy of the prediction"),
         bound=Expected(lambda: _entropy_bound_part("bound"), hint="Mukhoti et al.'s bound, Eq. 2"),
         bernoulli_gap=Expected(lambda: _entropy_bound_part("bernoulli_gap"),
                                hint="Bernoulli's inequality"),
         slope=Expected(lambda: _entropy_bound_part("slope"),
                        hint="the first-order effect of gamma"))


def _batch_gradient_grows(given) -> bool:
    """ex-batch-by-hand's property: ``given = [a, b, [g1, g2]]``, shape (3, 2), with a, b in R^2 and g1, g2 in
    [0, 1], has ||g1 a + g2 b|| > ||a + b|| (beyond rounding)."""
    import numpy as np

    x = np.asarray(given, dtype=float)
    if x.shape != (3, 2) or not np.all(np.isfinite(x)) or np.any(x[2] < 0) or np.any(x[2] > 1):
        return False
    a, b, (g1, g2) = x[0], x[1], x[2]
    rounding = 1e-9 * (np.linalg.norm(a) + np.linalg.norm(b))
    return bool(np.linalg.norm(g1 * a + g2 * b) > np.linalg.norm(a + b) + rounding)


def _focal_optimum_lowers_entropy(given) -> bool:
    """ex-multiclass-entropy's property: ``given = [eta_1, ..., eta_4, gamma, j]``: a target eta over four classes
    (positive, summing to 1 within 1e-3, then normalised) and 0 < gamma <= 20 whose focal-optimal prediction q has
    lower entropy than eta (by more than 1e-12), and j (0 to 3) the class whose probability falls the most,
    q_j - eta_j. The prediction solves eta_i = h(q_i) / sum_l h(q_l),
    h(v) = v / ((1 - v)^gamma - gamma v (1 - v)^(gamma - 1) log v) (chapter 06, Eq. 12)."""
    import numpy as np
    from scipy.optimize import brentq

    x = np.asarray(given, dtype=float)
    if x.shape != (6,) or not np.all(np.isfinite(x)):
        return False
    eta, gamma, j = x[:4], x[4], x[5]
    if np.any(eta <= 0) or abs(eta.sum() - 1) > 1e-3 or not 0 < gamma <= 20 or j not in (0, 1, 2, 3):
        return False
    eta = eta / eta.sum()

    def h(v):
        return v / ((1 - v) ** gamma - gamma * v * (1 - v) ** (gamma - 1) * np.log(v))

    def q_of(c):                             # q_i with h(q_i) = c eta_i
        return np.array([brentq(lambda v: h(v) - c * e, 1e-300, 1 - 1e-15, xtol=1e-300, rtol=1e-15) for e in eta])

    c = np.exp(brentq(lambda log_c: q_of(np.exp(log_c)).sum() - 1, -40.0, np.log(h(1 - 1e-15) / eta.max()),
                      xtol=1e-15))
    q = q_of(c)
    q = q / q.sum()
    entropy = lambda r: -np.sum(r * np.log(r))          # noqa: E731
    return bool(entropy(q) < entropy(eta) - 1e-12 and int(j) == int(np.argmin(q - eta)))


def _lower_entropy_example():
    """One target of ex-multiclass-entropy's kind: the first of seeded Dirichlet targets whose focal-optimal
    prediction has lower entropy, with the class that loses the most."""
    import numpy as np

    from calib.focal import focal_optimal_prediction

    rng = np.random.default_rng(0)
    etas, gammas = rng.dirichlet(np.ones(4), size=4000), rng.uniform(0.05, 1.0, size=4000)
    q = focal_optimal_prediction(etas, gammas)
    entropy = -np.sum(q * np.log(q), axis=1) - (-np.sum(etas * np.log(etas), axis=1))
    i = int(np.flatnonzero(entropy < -1e-9)[0])
    return [*etas[i], gammas[i], float(np.argmin(q[i] - etas[i]))]


register("ex-batch-by-hand", "02-focal-gradient",
         example=construction(_batch_gradient_grows, lambda: [[1.0, 0.0], [-1.0, 0.1], [1.0, 0.5]],
                              accepts="any a, b in R^2 and g1, g2 in [0, 1] with ||g1 a + g2 b|| > ||a + b||",
                              hint="how the lengths of a sum and of its terms relate"),
         inner_product=Expected(lambda: "negative", close_digits=None,
                                hint="the angle between the two gradients: 'positive', 'zero' or 'negative'"))
register("ex-multiclass-entropy", "02-focal-gradient",
         example=construction(_focal_optimum_lowers_entropy, _lower_entropy_example,
                              accepts="any target over four classes and gamma > 0 whose focal-optimal prediction "
                                      "has lower entropy, with the class that loses the most probability",
                              hint="the focal-optimal prediction for a target, and what entropy weighs"))


# --- 03 Choosing gamma -------------------------------------------------------------------------------------------

def _gamma_star(p0):
    from calib.focal import gamma_star

    return float(gamma_star(p0))


def _near_half_slope():
    sp = _sympy()
    return 8 * (1 - sp.log(2)) / sp.log(2) ** 2


register("ex-gamma-star-p035", "03-choosing-gamma",        # p0 = 0.35: the chapter tabulates 0.3
         gamma=Expected(lambda: _gamma_star(0.35), rtol=1e-8,
                        hint="the branch of Lambert W that gives a positive gamma"),
         principal=Expected(lambda: 0.0, atol=1e-8, hint="the other branch of Lambert W"))
register("ex-gamma-star-near-half", "03-choosing-gamma",
         slope=Expected(_near_half_slope, exact=True, hint="the behaviour of gamma* near p0 = 1/2"))


def _design_schedule(part):
    from calib import focal

    schedule = focal.schedule_from_prop2([0.1, 0.2], 0.15)
    if part == "gammas":
        import numpy as np

        return np.asarray(schedule.gammas, dtype=float)
    return focal.upweighted_intervals(schedule)[-1][1]


def _flsd532(part):
    import numpy as np

    from calib import focal

    if part == "intervals":
        return np.asarray(focal.upweighted_intervals(focal.FLSD_532), dtype=float)
    return focal.upweighted_intervals(focal.FLSD_532) == focal.upweighted_intervals(focal.FLSD_53)


register("ex-design-schedule", "03-choosing-gamma",
         gammas=Expected(lambda: _design_schedule("gammas"), rtol=1e-8,
                         hint="Prop. 2's gamma for each bin"),
         upweighted_to=Expected(lambda: _design_schedule("upweighted_to"), rtol=1e-8,
                                hint="the samples a schedule up-weights"))
register("ex-flsd532", "03-choosing-gamma",
         intervals=Expected(lambda: _flsd532("intervals"), rtol=1e-8,
                            hint="the samples each part of a schedule up-weights, as (lo, hi) rows"),
         same_as_flsd53=Expected(lambda: _flsd532("same"), hint="what FLSD-53 already up-weights"))


# --- 04 Weight magnification in a linear model -------------------------------------------------------------------

@functools.lru_cache(maxsize=None)
def _linear_toy_rerun(noise=0.1, gamma=1.0, half_side=2.0, seeds=tuple(range(5))):
    """Chapter 04 at one setting, as its solutions rerun it (App. B toy, 500 full-batch steps of 0.5 from 0)."""
    from calib_book.linear_toy import rerun_linear_toy

    return rerun_linear_toy(noise=noise, gamma=gamma, half_side=half_side, seeds=seeds)


def _toy_ratio(**setting):
    return float(_linear_toy_rerun(**setting)["ratio"].mean())


def _toy_above_90(loss, **setting):
    return float(_linear_toy_rerun(**setting)[f"above_{loss}"].mean())


def _toy_median(loss, **setting):
    return float(_linear_toy_rerun(**setting)[f"median_{loss}"].mean())


@functools.lru_cache(maxsize=None)
def _separable_margin():
    from calib.data import make_linear_toy, separability_through_origin

    sep = make_linear_toy(noise=0.0, seed=0, margin=1.0)
    return separability_through_origin(sep.x_train, sep.y_train)[1]


@functools.lru_cache(maxsize=None)
def _stationary_gradients():
    """Autograd gradients of the focal (gamma = 1) and cross-entropy risks at focal loss's solution on the seed-0 draw."""
    import torch

    from calib.data import make_linear_toy
    from calib.train import logistic_gradient_descent

    d = make_linear_toy(noise=0.1, seed=0)
    w_fl = logistic_gradient_descent(d.x_train[None], d.y_train[None], gamma=[1.0], lr=0.5, iterations=500,
                                     record_every=500)["final_w"][0]
    x, y = torch.as_tensor(d.x_train, dtype=torch.float64), torch.as_tensor(d.y_train, dtype=torch.float64)
    w = torch.tensor(w_fl, dtype=torch.float64, requires_grad=True)
    log_p = torch.nn.functional.logsigmoid((2 * y - 1) * (x @ w))           # log of the true label's probability
    (grad_fl,) = torch.autograd.grad(-((1 - log_p.exp()) * log_p).mean(), w)
    (grad_ce,) = torch.autograd.grad(torch.nn.functional.binary_cross_entropy_with_logits(x @ w, y), w)
    return grad_fl.numpy(), float(grad_ce @ w.detach() / w.detach().norm())


register("ch04-ex-log-growth", "04-linear-toy",
         margin=Expected(_separable_margin, rtol=1e-4,
                         hint="the maximum-margin separator through the origin"),
         per_decade=Expected(lambda: float(_sympy().log(10)) / _separable_margin(), rtol=1e-4,
                             hint="the implicit bias of gradient descent on separable data"))
register("ch04-ex-stationary", "04-linear-toy",
         fl_gradient=Expected(lambda: _stationary_gradients()[0], rtol=0, atol=1e-8,
                              hint="the stationarity of the focal risk"),
         ce_along_w=Expected(lambda: _stationary_gradients()[1], rtol=1e-6, atol=1e-12,
                             hint="the cross-entropy gradient at focal loss's solution"))
register("ch04-ex-noise", "04-linear-toy",
         ratio=Expected(lambda: _toy_ratio(half_side=4.0), rtol=1e-4,
                        hint="weight magnification, averaged over the exercise's seeds"),
         above_90_ce=Expected(lambda: _toy_above_90("ce", half_side=4.0), rtol=1e-4, atol=0,
                              hint="a share in [0, 1]: how often the model is very confident"))
register("ch04-ex-more-noise", "04-linear-toy",        # 15 % flipped: the chapter's table has 0, 5, 10 and 20 %
         ratio=Expected(lambda: _toy_ratio(noise=0.15), rtol=1e-4,
                        hint="weight magnification, averaged over the exercise's seeds"),
         above_90_ce=Expected(lambda: _toy_above_90("ce", noise=0.15), rtol=1e-4, atol=0,
                              hint="a share in [0, 1]: how often the model is very confident"),
         above_90_fl=Expected(lambda: _toy_above_90("fl", noise=0.15), rtol=1e-4, atol=0,
                              hint="a share in [0, 1]: how often the model is very confident"))


def _toy_ratio_interval(seeds):
    from calib.stats import seed_interval

    return seed_interval(_linear_toy_rerun(seeds=tuple(seeds))["ratio"])


register("ch04-ex-other-draws", "04-linear-toy",        # three draws: five give an interval near the chapter's
         low=Expected(lambda: _toy_ratio_interval(range(100, 103)).low, rtol=1e-4,
                      hint="a t interval over seeds"),
         high=Expected(lambda: _toy_ratio_interval(range(100, 103)).high, rtol=1e-4,
                       hint="a t interval over seeds"))
register("ch04-ex-gamma", "04-linear-toy",
         ratio=Expected(lambda: _toy_ratio(gamma=2.0), rtol=1e-4,
                        hint="weight magnification, averaged over the exercise's seeds"),
         median_fl=Expected(lambda: _toy_median("fl", gamma=2.0), rtol=1e-4,
                            hint="how confident the wrong predictions are"))


# --- 05 Miscalibration during training ---------------------------------------------------------------------------

def _last_layer_gradient_norm():
    """Autograd's norm of the focal-loss (gamma = 3) gradient with respect to the last layer (weights and bias) of
    the chapter's MLP at its seed-0 initial weights, in float64, for the seed-0 standard-normal input labelled 7."""
    import torch

    from calib.losses import get_loss
    from calib.models import build_model, split_last_layer

    net = build_model("mlp-256-256", (1, 28, 28), 10, seed=0).double().eval()
    x = torch.randn(1, 1, 28, 28, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    get_loss("fl-3")(net(x), torch.tensor([7])).backward()
    head = split_last_layer(net)[1]
    return float(torch.sqrt(head.weight.grad.pow(2).sum() + head.bias.grad.pow(2).sum()))


register("ch05-ex-prop1-check", "05-miscalibration-dynamics",
         norm=Expected(_last_layer_gradient_norm, rtol=1e-9,
                       hint="Prop. 1: the last layer's gradient factorises"))


# ch05-ex-temperature and ch05-ex-flsd read the quick profile's stored runs at the chapter's default parameters:
# the CE, FL-3 and FLSD-53 runs of chapter 10's grid in the papers' regime, seeds 0 to 4.
_CH05_SEEDS = (0, 1, 2, 3, 4)


@functools.lru_cache(maxsize=None)
def _ch05_run(loss, seed):
    from calib.runs import load_run

    return load_run(BENCHMARK_STORE / BENCHMARK_MODEL / loss / f"seed{seed}")


def _ch05_ts_against_drop(reference):
    """The paired 95 % interval over seeds of the test ECE (15 equal-width bins) of the final CE model after
    temperature scaling (T by validation NLL) minus its ECE at the first epoch after the first learning-rate drop
    (``reference="after"``) or at the last epoch before it (``"before"``)."""
    from calib import metrics
    from calib.posthoc import TemperatureScaling
    from calib.stats import paired_seed_interval

    scaled, at_drop = [], []
    for seed in _CH05_SEEDS:
        run = _ch05_run("ce", seed)
        drop, logits = run.config["milestones"][0], run.logits()
        fitted = TemperatureScaling("nll").fit(logits["val_logits"], logits["val_labels"])
        scaled.append(metrics.ece(fitted.predict_proba(logits["test_logits"]), logits["test_labels"]))
        at_drop.append(run.series("test", "ece")[drop if reference == "after" else drop - 1])
    interval = paired_seed_interval(scaled, at_drop)
    return (interval.low, interval.high)


def _ch05_flsd_against_fl3(key):
    """The paired 95 % interval over seeds of FLSD-53's final ``key`` (test ECE or last-layer weight norm) minus
    FL-3's."""
    from calib.stats import paired_seed_interval

    def last(loss, seed):
        epoch = _ch05_run(loss, seed).epochs[-1]
        return epoch["test"]["ece"] if key == "ece" else epoch["last_layer_weight_norm"]

    interval = paired_seed_interval([last("flsd-53", s) for s in _CH05_SEEDS], [last("fl-3", s) for s in _CH05_SEEDS])
    return (interval.low, interval.high)


def _ch05_flsd_gamma3_share():
    """The share of test samples whose true-class probability under the final seed-0 FLSD-53 model is at least 0.2."""
    import numpy as np
    from scipy.special import softmax

    logits = _ch05_run("flsd-53", 0).logits()
    probs = softmax(logits["test_logits"].astype(np.float64), axis=1)
    return float(np.mean(probs[np.arange(len(probs)), logits["test_labels"]] >= 0.2))


register("ch05-ex-temperature", "05-miscalibration-dynamics",
         interval=interval_claim(lambda: _ch05_ts_against_drop("after"),
                                 hint="a paired interval over seeds of the difference ECE(end, after TS) - ECE(first "
                                      "epoch after the drop)"),
         verdict=Expected(lambda: verdict_of(_ch05_ts_against_drop("after")), close_digits=None,
                          hint="which side of zero the interval lies on: 'lower', 'higher' or 'no difference'"),
         verdict_before=Expected(lambda: verdict_of(_ch05_ts_against_drop("before")), close_digits=None,
                                 hint="the same comparison against the last epoch before the drop"))
register("ch05-ex-flsd", "05-miscalibration-dynamics",
         share=Expected(_ch05_flsd_gamma3_share, rtol=1e-4, close_digits=3,
                        hint="the samples FLSD-53 treats with gamma = 3, as a fraction of the test set"),
         ece=interval_claim(lambda: _ch05_flsd_against_fl3("ece"),
                            hint="a paired interval over seeds of the difference ECE(FLSD-53) - ECE(FL-3)"),
         ece_verdict=Expected(lambda: verdict_of(_ch05_flsd_against_fl3("ece")), close_digits=None,
                              hint="which side of zero the interval lies on: 'lower', 'higher' or 'no difference'"),
         norm=interval_claim(lambda: _ch05_flsd_against_fl3("norm"),
                             hint="a paired interval over seeds of the difference of the last-layer weight norms, "
                                  "FLSD-53 - FL-3"))


# --- 06 What focal loss estimates --------------------------------------------------------------------------------

def _tau_oc(gamma):
    from calib.focal import tau_oc

    return tau_oc(gamma)


def _phi_peak(gamma):
    from calib.focal import gradient_factor, tau_oc

    return float(gradient_factor(tau_oc(gamma), gamma))


def _tau_uc(gamma):
    from calib.focal import threshold

    return float(threshold(gamma))


def _float32_thresholds(runner_up):
    """The d from which a float32 softmax of the logits (d, runner_up, 0) has a top entry of exactly 1, and from which
    it is exactly (1, 0, 0): the largest small term, exp(runner_up - d), decides both (the chapter takes (d, 0, 0))."""
    import numpy as np

    fmt = np.finfo(np.float32)      # 1 + x rounds to 1 for x <= eps/2; a float32 rounds to 0 below half a subnormal
    return runner_up - np.log(float(fmt.eps) / 2), runner_up - np.log(float(fmt.smallest_subnormal) / 2)


register("ch06-ex-thresholds", "06-focal-loss-is-not-proper",
         tau_oc=Expected(lambda: float(_tau_oc(2.5)), rtol=1e-8,
                         hint="the over-confidence threshold: where the gradient factor phi peaks"),
         peak=Expected(lambda: _phi_peak(2.5), rtol=1e-8, hint="the largest value the gradient factor takes"),
         tau_uc=Expected(lambda: _tau_uc(2.5), rtol=1e-8,
                         hint="the under-confidence threshold: where focal loss's gradient equals cross-entropy's"))
register("ch06-ex-minimal-k", "06-focal-loss-is-not-proper",
         k_min=Expected(lambda: __import__("numpy").floor(1 / _tau_oc([1.0, 2.0, 3.0, 4.0, 5.0])) + 1, rtol=0,
                        atol=0.5, close_digits=None,
                        hint="the uniform prediction against the over-confidence threshold"))
register("ch06-ex-float32", "06-focal-loss-is-not-proper",
         d_top=Expected(lambda: _float32_thresholds(1.0)[0], rtol=1e-4, hint="the machine epsilon of float32"),
         d_zero=Expected(lambda: _float32_thresholds(1.0)[1], rtol=1e-4,
                         hint="the smallest float32 and underflow"))


def _ch06_kkt(part):
    """ch06-ex-kkt: the focal-risk minimiser for eta = (0.5, 0.3, 0.2), gamma = 2, and the multiplier lambda of
    the Lagrangian W + lambda (sum q - 1) at it, lambda = eta_i phi(q_i) / q_i (the same for every i)."""
    import numpy as np

    from calib.focal import focal_optimal_prediction, gradient_factor

    eta = np.array([0.5, 0.3, 0.2])
    q = focal_optimal_prediction(eta, 2.0)
    return q if part == "minimiser" else float(np.mean(eta * gradient_factor(q, 2.0) / q))


def _ch06_ls_inverse(smoothing):
    """The map from t = Psi(q*)_i back to eta_i under label smoothing: eps/K on every class or eps/(K-1) on the
    wrong ones, in the symbols t, epsilon, K."""
    sp = _sympy()
    t, eps, k = sp.symbols("t epsilon K")
    return (t - eps / k) / (1 - eps) if smoothing == "uniform" else ((k - 1) * t - eps) / (k - 1 - k * eps)


def _ch06_ls_minimiser(smoothing, eta=(0.6, 0.3, 0.1), eps=0.1, gamma=2.0):
    import numpy as np

    from calib.focal import focal_optimal_prediction

    eta = np.asarray(eta)
    k = len(eta)
    target = (1 - eps) * eta + (eps / k if smoothing == "uniform" else eps * (1 - eta) / (k - 1))
    return focal_optimal_prediction(target, gamma)


register("ch06-ex-kkt", "06-focal-loss-is-not-proper",
         minimiser=Expected(lambda: _ch06_kkt("minimiser"), rtol=1e-6,
                            hint="the minimiser of the focal risk over the simplex"),
         multiplier=Expected(lambda: _ch06_kkt("multiplier"), rtol=1e-6,
                             hint="stationarity of the Lagrangian, with the sign convention the exercise gives"))
register("ch06-ex-ls", "06-focal-loss-is-not-proper",
         inverse_uniform=Expected(lambda: _ch06_ls_inverse("uniform"), exact=True,
                                  hint="undoing the smoothing of the target"),
         inverse_wrong=Expected(lambda: _ch06_ls_inverse("wrong"), exact=True,
                                hint="undoing a smoothing that gives mass only to the wrong classes"),
         minimiser_uniform=Expected(lambda: _ch06_ls_minimiser("uniform"), rtol=1e-6,
                                    hint="focal loss's minimiser for the smoothed target"),
         minimiser_wrong=Expected(lambda: _ch06_ls_minimiser("wrong"), rtol=1e-6,
                                  hint="focal loss's minimiser for the smoothed target"))


# --- Chapter 10's stored grid, which the exercises of chapters 07 and 10 read ---------------------------------------

from pathlib import Path  # noqa: E402

#: Chapter 10's grid in the papers' regime, ``<store>/<model>/<loss>/seed<k>`` (the exercises' one store).
BENCHMARK_STORE = Path(__file__).resolve().parents[1] / "results" / "10-benchmark" / "regime"
#: The model label of that grid.
BENCHMARK_MODEL = "mlp-256-256-n20k-e40"


def benchmark_runs():
    """The stored runs of chapter 10's grid in the papers' regime, with their logits."""
    from calib.experiments import load_store

    return load_store(BENCHMARK_STORE, model=BENCHMARK_MODEL)


# --- 07 The focal calibration map --------------------------------------------------------------------------------

def _focal_logit_inflection():
    """The logit s* where d^2/ds^2 of -(1 - sigmoid(s))^3 log sigmoid(s) changes sign (sympy, by bisection)."""
    sp = _sympy()
    s = sp.Symbol("s", real=True)
    p = 1 / (1 + sp.exp(-s))
    return float(sp.nsolve(sp.diff(-(1 - p) ** 3 * sp.log(p), s, 2), s, (-4, -1), solver="bisect", tol=1e-20))


def _eighty_twenty():
    import numpy as np

    from calib.focal import focal_optimal_prediction

    return float(focal_optimal_prediction(np.array([0.7, 0.3]), 3.0)[0])


def _inverse_beta0(gamma):
    from calib.focal import effective_inverse_temperature

    return 1 / float(effective_inverse_temperature(0.0, gamma))


def _line_search_evaluations():
    import numpy as np

    from calib.posthoc import FocalTemperatureScaling

    rng = np.random.default_rng(0)
    fts = FocalTemperatureScaling(objective="nll", search="line").fit(2 * rng.normal(size=(300, 3)),
                                                                      rng.integers(0, 3, size=300))
    return fts.path_["n_evaluations"]


def _grid_evaluations():
    from calib.posthoc import KOMISARENKO_GAMMAS, KOMISARENKO_TEMPERATURES

    return len(KOMISARENKO_GAMMAS) * len(KOMISARENKO_TEMPERATURES)


def _stored_focal_scores():
    """Chapter 10's fl-3 run, seed 0: test ECE (10 equal-mass bins, calib's and the official code's: the stored
    evaluations hold the 15-bin one), NLL and
    accuracy of the softmax, Psi^3 and FTS (ECE criterion, line search) fitted on validation."""
    import numpy as np
    from scipy.special import log_softmax

    from calib import metrics
    from calib.experiments import fit_posthoc
    from calib.focal import log_focal_map
    from calib.posthoc import FocalTemperatureScaling

    run = next(r for r in benchmark_runs() if r.loss == "fl-3" and r.seed == 0)
    arrays = run.logits()
    z, y = np.asarray(arrays["test_logits"], dtype=np.float64), arrays["test_labels"]
    fts = FocalTemperatureScaling(objective="ece", search="line").fit(arrays["val_logits"], arrays["val_labels"])
    psi = fit_posthoc("psi", arrays["val_logits"], arrays["val_labels"], run.loss)
    logs = [log_softmax(z, axis=1), psi.log_proba(z), log_focal_map(z / fts.temperature_, fts.gamma_)]
    scores = {"ece": [], "ece_official": [], "nll": [], "accuracy": []}
    for log_p in logs:
        scores["ece"].append(metrics.adaptive_ece(np.exp(log_p), y, n_bins=10))
        scores["ece_official"].append(metrics.adaptive_ece_torrvision(np.exp(log_p), y, n_bins=10))
        scores["nll"].append(float(-np.mean(log_p[np.arange(len(y)), y])))
        scores["accuracy"].append(metrics.accuracy(np.exp(log_p), y))
    return {metric: np.array(values) for metric, values in scores.items()}


_STORED_FOCAL: dict = {}


def _stored_focal(metric):
    if not _STORED_FOCAL:
        _STORED_FOCAL.update(_stored_focal_scores())
    return _STORED_FOCAL[metric]


register("ch07-ex-prop1-logit", "07-focal-calibration-map",
         s_star=Expected(_focal_logit_inflection, rtol=1e-8, hint="convexity of the loss as a function of the logit"))
register("ch07-ex-prop2-eighty", "07-focal-calibration-map",
         q_star=Expected(_eighty_twenty, rtol=1e-8, hint="the focal-optimal prediction for a known posterior"))
register("ch07-ex-beta0", "07-focal-calibration-map",
         df0=Expected(lambda: __import__("calib.symbolic", fromlist=["x"]).focal_calibration_on_logits()["df_at_0"],
                      hint="the slope of the focal calibration map at the decision boundary"),
         inv_beta0=Expected(lambda: _inverse_beta0(1.0), rtol=1e-8,
                            hint="the effective temperature at the decision boundary"))
register("ch07-ex-line-cost", "07-focal-calibration-map",
         grid=Expected(_grid_evaluations, rtol=0, atol=0.5, close_digits=None, hint="the size of a grid search"),
         line=Expected(_line_search_evaluations, rtol=0, atol=0.5, close_digits=None,
                       hint="the cost of a line search against a grid"))
register("ch07-ex-planted", "07-focal-calibration-map",
         gamma=Expected(lambda: 1.0, atol=1e-9, hint="identifiability of the focal temperature map"),
         temperature=Expected(lambda: 0.5, atol=1e-9, hint="identifiability of the focal temperature map"))
register("ch07-ex-stored-focal", "07-focal-calibration-map",
         ece=Expected(lambda: _stored_focal("ece"), rtol=1e-6, atol=1e-9, accept="any-of",
                      alternatives=lambda: [_stored_focal("ece_official")],
                      accepts="6 significant digits, with calib's 10 equal-mass bins (sorted confidences cut into "
                              "10 parts whose sizes differ by at most 1) or the official code's (edges interpolated "
                              "between sorted confidences)",
                      hint="top-label ECE with equal-mass bins; order softmax, Psi^3, FTS (line search)"),
         nll=Expected(lambda: _stored_focal("nll"), rtol=1e-6, atol=1e-9,
                      hint="the negative log-likelihood, order softmax, Psi^3, FTS"),
         accuracy=Expected(lambda: _stored_focal("accuracy"), rtol=0, atol=1e-9,
                           hint="the negative log-likelihood, order softmax, Psi^3, FTS"))


@functools.lru_cache(maxsize=None)
def _ch07_prop5_worst(gamma=0.5):
    """The worst change of the top-class probability under Psi^gamma over four classes (Nelder-Mead over three
    logits, the fourth 0, from 20 seeded starts), and the top probability where it is reached."""
    import numpy as np
    from scipy.optimize import minimize
    from scipy.special import softmax

    from calib.focal import top_label_gain

    best = min((minimize(lambda z: top_label_gain(np.append(z, 0.0)[None], gamma)[0], x0, method="Nelder-Mead",
                         options={"xatol": 1e-10, "fatol": 1e-14, "maxiter": 4000})
                for x0 in np.random.default_rng(1).normal(size=(20, 3))), key=lambda r: r.fun)
    return float(best.fun), float(softmax(np.append(best.x, 0.0)).max())


def _lowers_top_class(given) -> bool:
    """ch07-ex-prop5-search's property: ``given`` is a probability vector q over four classes (positive, summing
    to 1 within 1e-3, then normalised) whose top-class probability the focal map Psi^0.5 lowers (by more than 1e-12):
    Psi(q)_i = h(q_i) / sum_l h(q_l), h(v) = v / ((1 - v)^gamma - gamma v (1 - v)^(gamma - 1) log v)."""
    import numpy as np

    q = np.asarray(given, dtype=float)
    if q.shape != (4,) or not np.all(np.isfinite(q)) or np.any(q <= 0) or np.any(q >= 1) or abs(q.sum() - 1) > 1e-3:
        return False
    q, gamma = q / q.sum(), 0.5
    h = q / ((1 - q) ** gamma - gamma * q * (1 - q) ** (gamma - 1) * np.log(q))
    top = int(np.argmax(q))
    return bool(h[top] / h.sum() - q[top] < -1e-12)


register("ch07-ex-prop5-search", "07-focal-calibration-map",
         counterexample=construction(_lowers_top_class, lambda: [0.325, 0.325, 0.325, 0.025],
                                     accepts="any probability vector over four classes whose top class Psi^0.5 "
                                             "lowers",
                                     hint="what the focal map does to the top class"),
         worst_drop=Expected(lambda: _ch07_prop5_worst()[0], rtol=1e-5, close_digits=3,
                             hint="the smallest change of the top-class probability under the focal map"),
         top_probability=Expected(lambda: _ch07_prop5_worst()[1], rtol=1e-5, close_digits=3,
                                  hint="where on the simplex the focal map lowers the top class most"))

# --- 08 Soft calibration objectives ------------------------------------------------------------------------------

def _ch08_membership(c, m=15, t=1e-2):
    from calib.soft_binning import soft_membership

    return soft_membership(c, m, t)


def _ch08_mode(j, m=15, t=1e-2):
    from calib.soft_binning import membership_modes

    return float(membership_modes(m, t)[j - 1])


_CH08_CONF, _CH08_CORRECT = (0.95, 0.85, 0.75, 0.65, 0.55), (1, 1, 0, 1, 0)


def _ch08_large_t(estimator):
    from calib.soft_binning import soft_binned_ece

    norm, power = ("l1", 1) if estimator == "bin" else ("l2", 2)
    return soft_binned_ece(_CH08_CONF, _CH08_CORRECT, 15, 1e9, norm, estimator) ** power


register("ch08-ex-temperature", "08-soft-calibration-objectives",
         temperature=Expected(lambda: float(__import__("calib.soft_binning", fromlist=["x"])
                                            .hard_limit_temperature(2e-3, 15, 0.01)),
                              hint="soft binning approaches hard binning as its temperature falls"),
         ratio=Expected(lambda: float(_ch08_membership(0.5, t=5e-3)[8] / _ch08_membership(0.5, t=5e-3)[7]),
                        hint="a soft-bin membership is a softmax over the bins"),
         own_share=Expected(lambda: float(_ch08_membership(0.5, t=5e-3)[7]),
                            hint="a softmax normalises over every bin, not only the neighbours"))
@functools.lru_cache(maxsize=None)
def _ch08_digits_probs(beta, seeds, steps=120):
    """The test probabilities, per seed, of the small networks of ch08-ex-sbece-train and ch08-ex-beta: an MLP
    64-32-10 on the standardised digits data, full-batch Adam (lr 1e-2) on NLL + beta SB-ECE, ``steps`` steps, one
    torch thread (:class:`_OneTorchThread`)."""
    import numpy as np
    import torch

    from calib.data import load_dataset
    from calib.losses import get_secondary_loss

    digits = load_dataset("digits")
    flat = lambda x: x.reshape(len(x), -1).astype(np.float32)        # noqa: E731
    x_train, x_test = flat(digits.x_train), flat(digits.x_test)
    mu, sd = x_train.mean(0), x_train.std(0) + 1e-6
    x_train, x_test = torch.as_tensor((x_train - mu) / sd), torch.as_tensor((x_test - mu) / sd)
    y_train, secondary = torch.as_tensor(digits.y_train), get_secondary_loss("sb-ece")
    probs = []
    with _OneTorchThread():
        for seed in seeds:
            torch.manual_seed(seed)
            net = torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.ReLU(), torch.nn.Linear(32, 10))
            opt = torch.optim.Adam(net.parameters(), lr=1e-2)
            for _ in range(steps):
                opt.zero_grad()
                z = net(x_train)
                loss = torch.nn.functional.cross_entropy(z, y_train)
                if beta > 0:
                    loss = loss + beta * secondary(z, y_train)
                loss.backward()
                opt.step()
            with torch.no_grad():
                probs.append(torch.softmax(net(x_test).double(), 1).numpy())
    return probs, digits.y_test


def _ch08_sbece_runs(beta_values=(0.0, 1.0), seeds=(0, 1, 2), steps=120):
    """The test ECE (15 equal-width bins) of ch08-ex-sbece-train's networks, per beta and seed."""
    import numpy as np

    from calib import metrics

    out = {}
    for beta in beta_values:
        probs, labels = _ch08_digits_probs(beta, seeds, steps)
        out[beta] = np.array([metrics.ece(p, labels, n_bins=15) for p in probs])
    return out


def _ch08_sbece_interval():
    from calib.stats import paired_seed_interval

    runs = _ch08_sbece_runs()
    interval = paired_seed_interval(runs[1.0], runs[0.0])
    return (interval.low, interval.high)


register("ch08-ex-edge-bins", "08-soft-calibration-objectives",
         mode_2=Expected(lambda: _ch08_mode(2), rtol=1e-8, hint="where a soft bin's membership peaks"),
         mode_8=Expected(lambda: _ch08_mode(8), rtol=1e-8, hint="the symmetry of the bins about 1/2"))
register("ch08-ex-sbece-train", "08-soft-calibration-objectives",
         interval=interval_claim(_ch08_sbece_interval,
                                 hint="a paired interval over seeds of the difference ECE(beta = 1) - ECE(beta = 0)"),
         verdict=Expected(lambda: verdict_of(_ch08_sbece_interval()), close_digits=None,
                          hint="which side of zero the interval lies on: 'lower', 'higher' or 'no difference'"))
register("ch08-ex-large-t", "08-soft-calibration-objectives",
         bin_limit=Expected(lambda: _ch08_large_t("bin"), rtol=1e-6, hint="what every soft bin becomes as T grows"),
         lb_limit=Expected(lambda: _ch08_large_t("label"), rtol=1e-6,
                           hint="the label-binned estimator as T grows"))


class _OneTorchThread:
    """Train with one torch thread, as the chapters' quick profiles do, and restore the count after: a full-batch
    run sums in another order with more threads, and a run that a large secondary weight makes unstable ends
    elsewhere (ch08-ex-beta's seeds move by several points of accuracy), so the key reruns what the exercise states."""

    def __enter__(self):
        import torch

        self.threads = torch.get_num_threads()
        torch.set_num_threads(1)

    def __exit__(self, *exc):
        import torch

        torch.set_num_threads(self.threads)


def _ch08_coarsen(part, cells=10):
    """ch08-ex-coarsen: the chapter's binary population (truth sigma(z), z ~ N(0, 3^2), quadrature nodes of
    ``binary_tempered_population(1.0)``) against its coarsening into ``cells`` equal-width cells of [0.5, 1]
    (each confidence replaced by the cell's mean accuracy): the coarse model's SB-ECE_lb,2^2 (M = 15, T = 1e-2)
    and NLL, and the beta above which NLL + beta SB-ECE_lb,2^2 prefers the coarse model."""
    import numpy as np

    from calib import soft_binning

    conf, acc, weight = soft_binning.binary_tempered_population(1.0)
    cell = np.minimum(((conf - 0.5) * 2 * cells).astype(int), cells - 1)
    coarse = (np.bincount(cell, weight * acc, cells) / np.bincount(cell, weight, cells))[cell]
    lb_sq = {name: soft_binning.soft_binned_ece(q, acc, 15, 1e-2, "l2", "label", weights=weight) ** 2
             for name, q in (("truth", conf), ("coarse", coarse))}
    nll = {name: float(-(weight @ (acc * np.log(q) + (1 - acc) * np.log1p(-q))))
           for name, q in (("truth", conf), ("coarse", coarse))}
    if part == "lb_coarse":
        return float(lb_sq["coarse"])
    if part == "nll_coarse":
        return nll["coarse"]
    return float((nll["coarse"] - nll["truth"]) / (lb_sq["truth"] - lb_sq["coarse"]))


def _ch08_avuc_init(part):
    """ch08-ex-avuc-init on 200 near-uniform logits (0.05 x standard normal, float64, and labels, both from
    ``torch.Generator().manual_seed(0)``), kappa = log(10) / 2: AvUC's value, or the verdict on the mean change of
    the correctly classified samples' confidence after one step of 0.1 along the gradient scaled to max-norm 1."""
    import numpy as np
    import torch

    from calib.losses import avuc

    gen = torch.Generator().manual_seed(0)
    logits = 0.05 * torch.randn(200, 10, dtype=torch.float64, generator=gen)
    labels = torch.randint(0, 10, (200,), generator=gen)
    kappa = 0.5 * np.log(10)
    if part == "avuc":
        return float(avuc(logits, labels, kappa))
    probs = torch.softmax(logits, 1)
    right = probs.argmax(1) == labels
    z = logits.clone().requires_grad_()
    avuc(z, labels, kappa, stop_gradient=part == "confidence_gs").backward()
    stepped = torch.softmax(logits - 0.1 * z.grad / z.grad.abs().max(), 1)
    change = float((stepped.max(1).values - probs.max(1).values)[right].mean())
    return "lower" if change < 0 else "higher" if change > 0 else "no difference"


def _ch08_beta_accuracy(beta, seeds=(0, 1, 2, 3, 4), steps=120):
    """The test accuracy per seed of ch08-ex-beta's networks (those of ch08-ex-sbece-train), seeds 0 to 4."""
    import numpy as np

    from calib import metrics

    probs, labels = _ch08_digits_probs(beta, seeds, steps)
    return np.array([metrics.accuracy(p, labels) for p in probs])


def _ch08_beta_interval():
    from calib.stats import paired_seed_interval

    interval = paired_seed_interval(_ch08_beta_accuracy(10.0), _ch08_beta_accuracy(0.0))
    return (interval.low, interval.high)


register("ch08-ex-coarsen", "08-soft-calibration-objectives",
         lb_coarse=Expected(lambda: _ch08_coarsen("lb_coarse"), rtol=1e-4, close_digits=3,
                            hint="the label-binned soft estimator of a model whose confidences take few values"),
         nll_coarse=Expected(lambda: _ch08_coarsen("nll_coarse"), rtol=1e-4, close_digits=3,
                             hint="the log loss of a calibrated but coarser predictor"),
         beta_flip=Expected(lambda: _ch08_coarsen("beta_flip"), rtol=1e-4, close_digits=3,
                            hint="where the combined objective ranks the two calibrated models equally"))
register("ch08-ex-avuc-init", "08-soft-calibration-objectives",
         avuc=Expected(lambda: _ch08_avuc_init("avuc"), rtol=1e-6, close_digits=3,
                       hint="which AvUC groups a near-uniform prediction falls into"),
         confidence_avuc=Expected(lambda: _ch08_avuc_init("confidence_avuc"), close_digits=None,
                                  hint="'lower', 'higher' or 'no difference': the gradient through the confidence"),
         confidence_gs=Expected(lambda: _ch08_avuc_init("confidence_gs"), close_digits=None,
                                hint="'lower', 'higher' or 'no difference': the gradient through the entropy alone"))
register("ch08-ex-beta", "08-soft-calibration-objectives",
         accuracy=interval_claim(_ch08_beta_interval,
                                 hint="a paired interval over seeds of the difference accuracy(beta = 10) - "
                                      "accuracy(beta = 0)"),
         verdict=Expected(lambda: verdict_of(_ch08_beta_interval()), close_digits=None,
                          hint="which side of zero the interval lies on: 'lower', 'higher' or 'no difference'"))


# --- 09 Reweighted risk ------------------------------------------------------------------------------------------

def _ch09_au_exact(n=10, kappa=0.4):
    import torch

    from calib.losses import au_weights

    scores = torch.linspace(1.0, 0.1, n, dtype=torch.float64)          # descending: rank r is entry r - 1
    return au_weights(scores, kappa=kappa, cdf="exact").numpy()


def _ch09_hierarchy(rho):
    from calib.selective import calibration_hierarchy

    return calibration_hierarchy([1.0], [[0.7, 0.3]], [[0.5, 0.5]], rho)


def _ch09_printed_bound_holds_only_at():
    import numpy as np

    rhos = np.linspace(1.0, 2.0, 101)
    holds = [r for r in rhos if _ch09_hierarchy(r).ce >= _ch09_hierarchy(r).lower_printed - 1e-12]
    return float(holds[0]) if len(holds) == 1 else float("nan")


def _ch09_ifl(part, gamma=6.0):
    from scipy.optimize import minimize_scalar

    from calib.selective import inverse_focal_dp, inverse_focal_positive_interval

    lo, hi = (float(v) for v in inverse_focal_positive_interval(gamma))
    if part == "low":
        return lo
    if part == "high":
        return hi
    res = minimize_scalar(lambda p: -inverse_focal_dp(p, gamma), bounds=(lo, hi), method="bounded",
                          options={"xatol": 1e-12})
    return float(-res.fun)


def _ch09_dual(variant):
    from calib.selective import dual_focal_weight

    return float(dual_focal_weight([[0.65, 0.35]], [1], 3.0, variant)[0])


def _ch09_smallest_k_code_differs_from_eq24():
    import numpy as np

    from calib.selective import dual_focal_weight

    rng = np.random.default_rng(0)
    for k in range(2, 6):
        p = rng.dirichlet(np.ones(k), size=200)
        y = rng.integers(0, k, 200)
        if not np.allclose(dual_focal_weight(p, y, 3.0, "official"), dual_focal_weight(p, y, 3.0, "competitor")):
            return k
    return -1


register("ex-ch09-harmonic", "09-reweighted-risk",
         weights=Expected(_ch09_au_exact, rtol=1e-10, hint="the exact AURC weights by rank"),
         mean=Expected(lambda: float(_ch09_au_exact().mean()), rtol=1e-10, hint="the mean weight of the AURC loss"))
register("ex-ch09-rho", "09-reweighted-risk",
         ce=Expected(lambda: _ch09_hierarchy(1.5).ce, rtol=1e-8, hint="the l_rho calibration error of Def. 3.6"),
         cwece=Expected(lambda: _ch09_hierarchy(1.5).cwece, rtol=1e-8,
                        hint="the class-wise calibration error of Def. 3.7"),
         holds_only_at=Expected(_ch09_printed_bound_holds_only_at, rtol=1e-9,
                                hint="the constant of the printed bound"))
register("ex-ch09-ifl", "09-reweighted-risk",
         low=Expected(lambda: _ch09_ifl("low"), rtol=1e-8, hint="where the inverse-focal gradient changes sign"),
         high=Expected(lambda: _ch09_ifl("high"), rtol=1e-8, hint="where the inverse-focal gradient changes sign"),
         maximum=Expected(lambda: _ch09_ifl("maximum"), rtol=1e-7,
                          hint="the largest positive gradient of the inverse focal loss"))
register("ex-ch09-dual-binary", "09-reweighted-risk",
         code=Expected(lambda: _ch09_dual("official"), rtol=1e-10,
                       hint="the released code's reading of the dual focal loss"),
         eq24=Expected(lambda: _ch09_dual("competitor"), rtol=1e-10, hint="the paper's Eq. 24"),
         smallest_k=Expected(_ch09_smallest_k_code_differs_from_eq24,
                             hint="when ties and ranks differ between the two readings"))

@functools.lru_cache(maxsize=None)
def _ch09_ifl_runs(gamma, seeds=(0, 1, 2), steps=100):
    """ex-ch09-ifl-train's runs: per seed, the test ECE (15 equal-width bins) and over-confidence (mean confidence
    minus accuracy) of an MLP 20-32-10 trained by full-batch Adam (lr 1e-2, 100 steps) with inverse focal loss
    (gamma = 0: cross-entropy) on the first 1,000 of the stand-in problem's 4,000 training points (the chapter's quick
    profile), scored on the first 5,000 of its 10,000 test points."""
    import numpy as np
    import torch

    from calib import metrics
    from calib.data import gaussian_mixture_means, make_gaussian_mixture
    from calib.losses import inverse_focal_loss

    rows = []
    with _OneTorchThread():
        for seed in seeds:
            means = gaussian_mixture_means(10, 20, spread=0.5, seed=seed)
            x, y, _ = make_gaussian_mixture(4_000, means, seed=seed + 1)
            x_test, y_test, _ = make_gaussian_mixture(10_000, means, seed=seed + 3)
            x, y = torch.as_tensor(x[:1_000], dtype=torch.float32), torch.as_tensor(y[:1_000])
            torch.manual_seed(seed)
            net = torch.nn.Sequential(torch.nn.Linear(20, 32), torch.nn.ReLU(), torch.nn.Linear(32, 10))
            opt = torch.optim.Adam(net.parameters(), lr=1e-2)
            for _ in range(steps):
                opt.zero_grad()
                inverse_focal_loss(net(x), y, gamma).backward()
                opt.step()
            with torch.no_grad():
                probs = torch.softmax(net(torch.as_tensor(x_test[:5_000], dtype=torch.float32)).double(), 1).numpy()
            rows.append((metrics.ece(probs, y_test[:5_000], n_bins=15),
                         probs.max(1).mean() - metrics.accuracy(probs, y_test[:5_000])))
    return np.array(rows)


def _ch09_ifl_interval(column):
    from calib.stats import paired_seed_interval

    interval = paired_seed_interval(_ch09_ifl_runs(2.0)[:, column], _ch09_ifl_runs(0.0)[:, column])
    return (interval.low, interval.high)


register("ex-ch09-ifl-train", "09-reweighted-risk",
         ece=interval_claim(lambda: _ch09_ifl_interval(0),
                            hint="a paired interval over seeds of the difference ECE(inverse FL) - ECE(CE)"),
         overconfidence=interval_claim(lambda: _ch09_ifl_interval(1),
                                       hint="a paired interval over seeds of the difference of the over-confidences, "
                                            "inverse FL - CE"),
         verdict=Expected(lambda: verdict_of(_ch09_ifl_interval(1)), close_digits=None,
                          hint="which side of zero the over-confidence interval lies on: 'lower', 'higher' or "
                               "'no difference'"))


# --- 10 The benchmark --------------------------------------------------------------------------------------------

# Chapter 10's exercises read the store through benchmark_runs() (BENCHMARK_STORE above), so that they follow the
# grid in the papers' regime once it is trained.

@functools.lru_cache(maxsize=None)
def _ch10_test_ece(loss):
    """Per-seed test ECE (15 equal-width bins, no post-hoc map) of one loss of chapter 10's stored grid."""
    from calib.experiments import evaluate_store, metric_values

    runs = [r for r in benchmark_runs() if r.loss == loss]
    rows = evaluate_store(runs, maps=("none",), progress=False, write_cache=False)
    return tuple(metric_values(rows, loss, "none", "ece"))


def _ch10_paired(kind):
    import numpy as np
    from scipy import stats as st

    from calib.stats import paired_seed_interval

    a, b = np.array(_ch10_test_ece("ce")), np.array(_ch10_test_ece("brier"))
    paired = paired_seed_interval(a, b)
    welch = st.ttest_ind(a, b, equal_var=False).confidence_interval(0.95)
    if kind == "paired":
        return (paired.low, paired.high)
    if kind == "welch":
        return (float(welch.low), float(welch.high))
    return "paired" if paired.high - paired.low < welch.high - welch.low else "welch"


#: ch10-ex-new-loss's runs: chapter 10's recipe in the papers' regime (MLP 256-256, SGD with momentum 0.9, lr 0.1,
#: batch 128, no weight decay or augmentation) scaled down so that the key can rerun them: 10 epochs (lr divided by
#: 10 after epochs 5 and 8) on 2,000 training images, the first 1,000 validation and 2,000 test images, one thread.
_CH10_SMALL = dict(data="fashion-mnist", model="mlp-256-256", epochs=10, milestones=(5, 8), lr=0.1, batch_size=128,
                   weight_decay=0.0, augment="none", train_subset=2000, val_subset=1000, test_subset=2000,
                   device="cpu", diagnostics="eval")


@functools.lru_cache(maxsize=None)
def _ch10_small_ece(loss, seeds=(0, 1, 2)):
    """Per seed, the test ECE (15 equal-width bins) of ``loss`` on ch10-ex-new-loss's small recipe, without a map and
    after temperature scaling fitted by validation NLL (``ts-nll``): ``{"none": [...], "ts-nll": [...]}``."""
    import tempfile

    from calib import metrics
    from calib.data import load_dataset
    from calib.experiments import fit_posthoc
    from calib.run_config import TrainConfig
    from calib.train import train

    dataset, out = load_dataset("fashion-mnist"), {"none": [], "ts-nll": []}
    with _OneTorchThread(), tempfile.TemporaryDirectory() as folder:
        for seed in seeds:
            run = train(TrainConfig(loss=loss, seed=seed, **_CH10_SMALL), f"{folder}/{loss}/seed{seed}",
                        progress=False, dataset=dataset)
            logits = run.logits()
            for name in out:
                fitted = fit_posthoc(name, logits["val_logits"], logits["val_labels"], loss=loss)
                out[name].append(metrics.ece(fitted.proba(logits["test_logits"]), logits["test_labels"]))
    return out


def _ch10_fl4_against_fl3(map_name):
    from calib.stats import paired_seed_interval

    interval = paired_seed_interval(_ch10_small_ece("fl-4")[map_name], _ch10_small_ece("fl-3")[map_name])
    return (interval.low, interval.high)


register("ch10-ex-paired", "10-benchmark",
         paired=Expected(lambda: _ch10_paired("paired"), rtol=1e-6, atol=1e-9, points=2,
                         hint="a paired interval rests on the per-seed differences"),
         welch=Expected(lambda: _ch10_paired("welch"), rtol=1e-6, atol=1e-9, points=2,
                        hint="an unpaired interval treats the two samples as independent, variances unequal"),
         narrower=Expected(lambda: _ch10_paired("narrower"), close_digits=None,
                           hint="'paired' or 'welch': compare the widths"))
register("ch10-ex-verify", "10-benchmark",
         dominant=Expected(lambda: "fts", close_digits=None,
                           hint="the map name as calib.posthoc.REGISTRY spells it; think of how many fits it makes"))
register("ch10-ex-new-loss", "10-benchmark",
         ece=interval_claim(lambda: _ch10_fl4_against_fl3("none"),
                            hint="a paired interval over seeds of the difference ECE(FL-4) - ECE(FL-3), no map"),
         ece_verdict=Expected(lambda: verdict_of(_ch10_fl4_against_fl3("none")), close_digits=None,
                              hint="which side of zero the interval lies on: 'lower', 'higher' or 'no difference'"),
         ece_ts=interval_claim(lambda: _ch10_fl4_against_fl3("ts-nll"),
                               hint="the same paired difference after temperature scaling fitted by validation NLL"),
         ece_ts_verdict=Expected(lambda: verdict_of(_ch10_fl4_against_fl3("ts-nll")), close_digits=None,
                                 hint="which side of zero the interval after temperature scaling lies on"))


# --- 11 The papers' tables ---------------------------------------------------------------------------------------

def _ch11_yardstick(part):
    """ch11-ex-yardstick: rows of Komisarenko & Kull's Table 1 (ECE) whose FTS gain over TS exceeds
    sqrt(s_TS^2 + s_FTS^2), or 2 s / sqrt(5) with s the larger printed standard deviation."""
    import numpy as np

    from calib.published import read_published, recount, select

    rows = select(read_published("komisarenko2024"), metric="ECE")
    cells = recount(rows, "FTS", ["TS"], field="stage", cell_by=("dataset", "method")).cells
    stds = {(r["dataset"], r["method"], r["stage"]): r["std"] for r in rows}
    if part == "independent":
        return int(sum(c["margin"] > np.hypot(stds[(*c["key"], "TS")], stds[(*c["key"], "FTS")]) for c in cells))
    return int(sum(c["margin"] > 2 * c["std"] / np.sqrt(5) for c in cells))


register("ch11-ex-yardstick", "11-paper-tables",
         independent=Expected(lambda: _ch11_yardstick("independent"), rtol=0, atol=0.5, close_digits=None,
                              hint="the spread of a difference of two independent means"),
         two_standard_errors=Expected(lambda: _ch11_yardstick("two_standard_errors"), rtol=0, atol=0.5,
                                      close_digits=None, hint="the standard error of a mean over five seeds"),
         fits=Expected(lambda: "neither", close_digits=None,
                       hint="what the two maps share: 'independent', 'two standard errors' or 'neither'"))


def _rows_compared(min_cells: int = 5, complete: bool = False) -> dict[str, list[int]]:
    """Chapter 11's search for coinciding rows: the length (printed cells) of each row of each paper with at least
    ``min_cells`` readable cells (and no unreadable one, with ``complete``), as ``{paper: [lengths]}``."""
    from calib.published import printed_row_values, read_published

    row_by = {"mukhoti2020": ("table", "dataset", "model"), "komisarenko2024": ("table", "dataset", "stage"),
              "karandikar2021": ("table", "dataset"), "zhou2025": ("table", "dataset", "model", "stage")}
    out = {}
    for paper, by in row_by.items():
        lengths = [len(values) for values in printed_row_values(read_published(paper), by).values()
                   if sum(v is not None for v in values) >= min_cells and not (complete and None in values)]
        out[paper] = lengths
    return out


def _chance_coincidence_bound(p_cell: float = 1 / 50, min_cells: int = 5) -> float:
    """Row pairs compared by chapter 11's search for coinciding rows, times p_cell ** min_cells."""
    return sum(len(n) * (len(n) - 1) // 2 for n in _rows_compared(min_cells).values()) * p_cell ** min_cells


def _chance_coincidence_expectation(p_cell: float = 1 / 50, min_cells: int = 5) -> float:
    """The expected number of chance coincidences itself: only rows of one length can agree cell for cell, a pair
    of length m with probability p_cell ** m (the tightest valid bound)."""
    import collections

    total = 0.0
    for lengths in _rows_compared(min_cells, complete=True).values():
        for m, n in collections.Counter(lengths).items():
            total += n * (n - 1) // 2 * p_cell ** m
    return total


register("ch11-ex-coincidence", "11-paper-tables",
         expected_coincidences=Expected(_chance_coincidence_bound, rtol=5e-3, atol=0, accept="any-of",
                                        alternatives=lambda: [_chance_coincidence_expectation()],
                                        accepts="either valid bound to 3 significant digits: the union bound over "
                                                "the pairs compared, or the tighter one that counts only the pairs "
                                                "that can agree cell for cell",
                                        hint="linearity of expectation over the pairs compared"))
