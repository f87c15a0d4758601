"""The ``calib`` command: ``calib book run``, ``calib book build``, ``calib book check``, ``calib train``,
``calib sweep``.

``calib train`` and ``calib sweep`` run anywhere. ``calib book ...`` runs in a checkout of the book's repository:
it finds the book (``_toc.yml``) at or above the working directory and imports the book's machinery, the package
``calib_book`` in the checkout's ``book/`` folder, which no installation of calib holds.
"""

from __future__ import annotations

import argparse
import ast
import sys
import time
from collections.abc import Callable
from pathlib import Path

from calib._reproducible import pin_cpu_kernels


def _parse_value(text: str):
    """A parameter value: a Python literal when it parses as one, else the string itself."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose options may take their help from a registry (``generated_help``: action -> function
    that returns its help text), called when the help is shown: the names stay those the library accepts, and
    parsing ``calib book run`` imports neither torch nor the registries."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.generated_help: dict[argparse.Action, Callable[[], str]] = {}

    def format_help(self) -> str:
        for action, text in self.generated_help.items():
            action.help = text()
        return super().format_help()


def _listed(names, last: str = "or") -> str:
    """``a, b or c``."""
    names = list(names)
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} {last} {names[-1]}"


def _loss_help() -> str:
    """``--loss``'s help, every primary family of :data:`calib.losses.REGISTRY` with its name forms (and an example
    where a form has a parameter)."""
    from calib.losses import REGISTRY

    families = [", ".join(spec.forms) + ("" if spec.example in spec.forms else f" (e.g. {spec.example})")
                for spec in REGISTRY if spec.kind == "primary"]
    return f"loss: {'; '.join(families)}"


def _secondary_help() -> str:
    """``--secondary``'s help, every secondary loss of :data:`calib.losses.REGISTRY`."""
    from calib.losses import REGISTRY

    names = [form for spec in REGISTRY if spec.kind == "secondary" for form in spec.forms]
    return (f"secondary calibration loss added to --loss (Karandikar et al. 2021): {_listed(names)} (weight: "
            f"--secondary-weight)")


def _data_help() -> str:
    """``--data``'s help, every dataset of :data:`calib.data.DATASETS`."""
    from calib.data import DATASETS

    return f"dataset: {_listed(DATASETS)}"


def _model_help() -> str:
    """``--model``'s help, every name form of :data:`calib.models.MODEL_NAMES` (``<...>`` marks a parameter)."""
    from calib.models import MODEL_NAMES

    return f"network: {_listed(MODEL_NAMES)}"


def _augment_help() -> str:
    """``--augment``'s help, :data:`calib.run_config.AUGMENTATIONS` and the defaults of
    :data:`calib.run_config.DEFAULT_AUGMENT`."""
    from calib.run_config import AUGMENTATIONS, DEFAULT_AUGMENT

    by_choice: dict[str, list[str]] = {}
    for data, choice in DEFAULT_AUGMENT.items():
        by_choice.setdefault(choice, []).append(data)
    defaults = ", ".join(f"{choice} for {_listed(data, 'and')}" for choice, data in by_choice.items())
    return f"training augmentation: {_listed(AUGMENTATIONS)} (default: {defaults}, none otherwise)"


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="calib", description="The focal-calibration book and its library.")
    commands = parser.add_subparsers(dest="command", required=True)

    book_parser = commands.add_parser("book", help="execute and render the book")
    book_commands = book_parser.add_subparsers(dest="book_command", required=True)
    run = book_commands.add_parser("run", help="execute the chapters of _toc.yml with papermill into _build/")
    run.add_argument("--profile", default="quick",
                     help="quick (default): CPU, minutes for the whole book; full: paper scale, GPU if present")
    run.add_argument("--only", action="append", metavar="NAME",
                     help="run only this chapter (e.g. 01-measuring-calibration); repeatable")
    run.add_argument("-p", "--parameter", nargs=2, action="append", metavar=("NAME", "VALUE"), default=[],
                     help="override a chapter parameter, e.g. -p seed 3 (values are Python literals)")
    run.add_argument("--keep-going", action="store_true", help="run the remaining chapters after a failure")
    run.add_argument("--jobs", "-j", type=int, default=1, metavar="N",
                     help="execute N chapters at once, each in its own kernel (default 1; `make book` uses 2)")
    run.add_argument("--force", action="store_true",
                     help="execute every chapter run here, even one whose source, parameters, library, stored "
                          "results and versions are those of its last successful execution (which is otherwise "
                          "reused)")
    run.add_argument("--no-strict", action="store_true",
                     help="record a claim the computation does not confirm (e.g. at other parameters) as 'not "
                          "confirmed' in the ledger and go on, instead of stopping the chapter")
    build = book_commands.add_parser("build", help="render the executed chapters with jupyter-book")
    build.add_argument("--no-strict", action="store_true", help="do not turn Sphinx warnings into errors")
    build.add_argument("--student", action="store_true",
                       help="render the book without the exercises' solutions into _build/student, and write the "
                            "chapters as notebooks for students (solutions removed) to _build/student/notebooks")
    course = book_commands.add_parser("course", help="write _build/course: student notebooks graded by otter-grader "
                                                     "(no solutions, no key), its autograders, instructor notebooks")
    course.add_argument("--only", action="append", metavar="NAME",
                        help="only this chapter (e.g. 06-focal-loss-is-not-proper); repeatable")
    course.add_argument("--self-test", action="store_true",
                        help="then grade a planted right and a planted wrong submission of every chapter with its "
                             "autograder (otter run, no Docker) and fail unless they earn full and zero points")
    check = book_commands.add_parser("check", help="open every built page in headless chromium, offline, and check "
                                                   "math, tables, code, images and links (see calib_book.browser)")
    check.add_argument("--workers", type=int, default=2, help="pages rendered at once (default 2)")
    _add_train_parser(commands)
    _add_sweep_parser(commands)
    return parser


def _add_train_parser(commands) -> None:
    """``calib train``: one training run (calib.train.Trainer) into a run directory."""
    t = commands.add_parser(
        "train", help="train one network (per-epoch diagnostics, checkpoints, --resume)",
        description="Train a network with the recipe of Mukhoti et al. (2020) by default (SGD, momentum 0.9, "
                    "weight decay 5e-4, batch 128, lr 0.1 divided by 10 at 150/350 and 250/350 of the run). "
                    "Writes meta.json, history.json, logits.npz and checkpoint.pt into --out. Under torchrun "
                    "(torchrun --standalone --nproc_per_node N -m calib train ...) one run trains across the N "
                    "processes with DistributedDataParallel; --batch-size is the global batch.")
    # the names of datasets, networks, losses and augmentations come from their registries when help is shown
    t.generated_help[t.add_argument("--data")] = _data_help
    t.generated_help[t.add_argument("--model")] = _model_help
    t.generated_help[t.add_argument("--loss")] = _loss_help
    t.generated_help[t.add_argument("--secondary", default=None)] = _secondary_help
    t.add_argument("--secondary-weight", type=float, default=None,
                   help="weight beta of the secondary loss (default 1; needs --secondary)")
    t.add_argument("--interleave", type=float, default=None, metavar="FRACTION",
                   help="interleaved training (Karandikar et al. 2021, App. B): hold out this fraction of the "
                        "training set; each epoch trains the loss alone on the rest, then beta * secondary alone on "
                        "the held-out part (needs --secondary; default: joint training on the whole set)")
    t.add_argument("--epochs", type=int, help="passes over the training set (>= 1)")
    t.add_argument("--from-meta", metavar="RUN/meta.json",
                   help="rerun a stored run with exactly its config (only --device and --diagnostics may be given "
                        "beside it; a training flag that would change the run is refused)")
    t.add_argument("--seed", type=int, default=None, help="seed of the weights, data order and split (default 0)")
    t.add_argument("--out", required=True, help="run directory")
    t.add_argument("--resume", action="store_true", help="continue the run in --out from its last checkpoint")
    t.add_argument("--restart", action="store_true",
                   help="start the run in --out over (its checkpoint is corrupted, say); only a run of this config")
    t.add_argument("--device", default=None, help="auto (CUDA if present; the default), cpu or cuda")
    t.add_argument("--lr", type=float, default=None, help="learning rate, > 0 (default 0.1)")
    t.add_argument("--momentum", type=float, default=None, help="SGD momentum, in [0, 1) (default 0.9)")
    t.add_argument("--weight-decay", type=float, default=None, help="weight decay, >= 0 (default 5e-4)")
    t.add_argument("--milestones", type=int, nargs="*", default=None,
                   help="epochs after which the lr is multiplied by --lr-decay (default: 150/350 and 250/350 of "
                        "--epochs)")
    t.add_argument("--lr-decay", type=float, default=None, help="lr factor at each milestone, in (0, 1] (default 0.1)")
    t.add_argument("--batch-size", type=int, default=None, help="mini-batch size, >= 1 (default 128)")
    t.generated_help[t.add_argument("--augment", default=None)] = _augment_help
    t.add_argument("--train-subset", type=int, default=None, help="keep the first N training samples")
    t.add_argument("--val-subset", type=int, default=None)
    t.add_argument("--test-subset", type=int, default=None)
    t.add_argument("--pool", type=int, default=None,
                   help="average-pool the images by this factor (2: 28x28 -> 14x14; default 1)")
    t.add_argument("--grad-clip", type=float, default=None, help="clip the gradient norm (none by default)")
    t.add_argument("--amp", action=argparse.BooleanOptionalAction, default=None,
                   help="bf16 autocast (default: on for CUDA)")
    t.add_argument("--channels-last", action=argparse.BooleanOptionalAction, default=None,
                   help="channels-last memory format (default: on for CUDA)")
    t.add_argument("--diagnostics", default=None, choices=("full", "eval"),
                   help="per-epoch diagnostics: full (train/val/test, gradient norms, reliability) or eval (val/test)")
    t.add_argument("--discard", nargs="+", default=[], choices=("checkpoint.pt", "logits.npz"),
                   help="files to delete once the run has finished (a stored run keeps no checkpoint)")
    t.add_argument("--weights", default=None, choices=("float16", "float32"),
                   help="also keep the final network in weights.npz, its floats in this type (default: not kept)")
    t.add_argument("--no-progress", action="store_true", help="no progress bars")


def _add_sweep_parser(commands) -> None:
    """``calib sweep GRID.toml``: every run of a grid (calib.experiments)."""
    s = commands.add_parser(
        "sweep", help="train every run of a grid file (models x losses x seeds), skipping finished runs",
        description="Train every run of GRID.toml into <store>/<model>/<loss>/seed<k>/: finished runs are skipped, "
                    "interrupted ones resumed. Several sweeps of one store (processes, or machines sharing it) share "
                    "the work: each run is claimed by one process through its folder's lock (.calib-train.lock), "
                    "and a sweep skips the runs another one holds; at the end it names them and exits with status "
                    "3 (nothing evaluated), unless --wait makes it wait for them. --list prints one `calib train` "
                    "command per run instead, for GNU parallel or a cluster scheduler; with --nproc-per-node N (or "
                    "nproc_per_node = N in the grid) each one is `torchrun --standalone --nproc_per_node N -m calib "
                    "train ...`, one run across N processes. Exit status: 0 every run finished, 1 an error, 3 runs "
                    "that other processes were training are not finished yet, 130 interrupted.")
    s.add_argument("grid", help="the grid file, e.g. book/results/10-benchmark/grid-cpu.toml")
    s.add_argument("--list", action="store_true", help="print one `calib train` command per run and exit")
    s.add_argument("--nproc-per-node", type=int, metavar="N", default=None,
                   help="with --list: launch each run across N processes with torchrun (default: the grid's "
                        "nproc_per_node, else 1)")
    s.add_argument("--only", metavar="TEXT", help="only the runs whose model/loss/seed<k> contains TEXT")
    s.add_argument("--device", default=None, help="override the grid's device (auto, cpu, cuda)")
    s.add_argument("--wait", action="store_true",
                   help="when other processes hold runs of the grid (are training them), wait until each is finished, "
                        "or free (its holder died: it is resumed here), checking every 10 s, instead of exiting "
                        "with status 3")
    s.add_argument("--evaluate", action="store_true",
                   help="once every run of the grid is finished, fit every post-hoc map on every stored run of the "
                        "store and write <store>/posthoc.json (what chapter 10 reads); it says which runs it "
                        "evaluated and which it skipped (no logits.npz), and evaluates nothing while runs of the "
                        "grid are not finished")
    s.add_argument("--shift", action="store_true",
                   help="once every run of the grid is finished, score each run's stored network (the grid's weights "
                        "= \"float16\") on the clean and corrupted test sets, every post-hoc map fitted on clean "
                        "validation, into <store>/shift.json (calib.shift; what chapter 12 reads)")
    s.add_argument("--outcomes", action="store_true",
                   help="once every run of the grid is finished, write each run's top-label test confidence and "
                        "correctness with its meta.json to test-outcomes.npz beside the grid file "
                        "(calib.experiments.write_test_outcomes; what chapter 08's interleaved runs keep)")
    s.add_argument("--no-progress", action="store_true", help="no progress bars")


_TRAIN_FIELDS = ("data", "model", "loss", "secondary", "secondary_weight", "interleave", "epochs", "seed", "lr",
                 "momentum", "weight_decay", "milestones", "lr_decay", "batch_size", "augment", "train_subset",
                 "val_subset", "test_subset", "pool", "grad_clip", "amp", "channels_last", "device", "diagnostics")
#: Flags that may accompany --from-meta: they do not change what a run computes.
_FROM_META_OVERRIDES = ("device", "diagnostics")


def _train_config(args):
    """The TrainConfig of ``calib train``: from --from-meta (only --device and --diagnostics may be given beside
    it; any other training flag is refused, naming it), or from the flags, of which --data, --model, --loss and
    --epochs are required and the others default to TrainConfig's defaults. Every number is range-checked
    (:meth:`calib.train.TrainConfig.check_numbers`) before anything is read or written."""
    import dataclasses

    from calib.train import TrainConfig, config_from_meta

    given = {k: getattr(args, k) for k in _TRAIN_FIELDS if getattr(args, k) is not None}
    if args.from_meta:
        conflicting = [k for k in given if k not in _FROM_META_OVERRIDES]
        if conflicting:
            flags = ", ".join("--" + k.replace("_", "-") for k in conflicting)
            raise ValueError(f"{flags} cannot be combined with --from-meta {args.from_meta}: it reruns the stored "
                             f"config exactly. Drop {flags}, or train a new config with the flags alone (no "
                             f"--from-meta).")
        from calib.distributed import launch                       # a run reruns on its number of processes

        config = dataclasses.replace(config_from_meta(args.from_meta, world_size=launch().world_size), **given)
    else:
        missing = [f"--{k}" for k in ("data", "model", "loss", "epochs") if k not in given]
        if missing:
            raise ValueError(f"calib train needs {', '.join(missing)} (or --from-meta RUN/meta.json to rerun a "
                             f"stored run).")
        if args.secondary_weight is not None and args.secondary is None:
            raise ValueError(f"--secondary-weight {args.secondary_weight:g} needs --secondary (e.g. --secondary "
                             f"sb-ece): it weighs the secondary loss, and there is none.")
        config = TrainConfig(**given)
    try:
        config.check_numbers()
    except ValueError as exc:
        flag = str(exc).split(" ")[0].replace("_", "-")
        raise ValueError(f"--{flag.split('=')[0]}: {exc}") from None
    return config


def _sweep(args) -> None:
    import dataclasses

    from calib.experiments import RunsHeldError, load_grid, sweep, train_commands

    grid = load_grid(args.grid)
    if args.device is not None:
        grid.runs = [dataclasses.replace(r, config=dataclasses.replace(r.config, device=args.device))
                     for r in grid.runs]
    if args.only is not None:
        grid.runs = [r for r in grid.runs if args.only in f"{r.model}/{r.loss}/seed{r.seed}"]
        if not grid.runs:
            raise ValueError(f"no run of {args.grid} matches --only {args.only!r}.")
    if args.nproc_per_node is not None and args.nproc_per_node < 1:
        raise ValueError(f"--nproc-per-node must be an integer >= 1 (processes per run); got {args.nproc_per_node}.")
    if args.nproc_per_node is not None and not args.list:
        raise ValueError(f"--nproc-per-node {args.nproc_per_node} needs --list: calib sweep trains its runs one "
                         f"process each. Print the torchrun commands with --list --nproc-per-node "
                         f"{args.nproc_per_node} and run them.")
    if args.list:
        cwd = Path.cwd().resolve()
        relative = cwd if grid.store.is_relative_to(cwd) else None
        print("\n".join(train_commands(grid, relative_to=relative, nproc_per_node=args.nproc_per_node)))
        return
    selection = f" (--only {args.only!r})" if args.only is not None else ""
    try:
        sweep(grid, progress=not args.no_progress, wait=args.wait)
    except RunsHeldError as exc:
        note = (" Nothing was evaluated (--evaluate, --shift and --outcomes need every run finished)."
                if args.evaluate or args.shift or args.outcomes else "")
        raise _Incomplete(f"{exc}{note}" if not selection else f"{selection.strip()}: {exc}{note}") from None
    print(f"calib: grid {args.grid}{selection}: {len(grid.runs)} runs finished in {grid.store}")
    if args.evaluate:
        _evaluate(grid, progress=not args.no_progress)
    if args.shift:
        _evaluate_shift(grid, progress=not args.no_progress)
    if args.outcomes:
        from calib.experiments import write_test_outcomes

        if selection:
            raise ValueError(f"--outcomes writes the whole grid's runs; drop --only {args.only!r} (train them with "
                             f"it, then write the outcomes without it).")
        print(f"calib: wrote {write_test_outcomes(grid)}")


def _evaluate_shift(grid, progress: bool) -> None:
    """``calib sweep --shift``: every run of the grid scored under shift (calib.shift.evaluate_shift), its entry
    reused from <store>/shift.json when it was computed from the same weights."""
    from calib.experiments import load_store
    from calib.shift import evaluate_shift

    if not grid.weights:
        raise ValueError(f"{grid.path} keeps no network (no weights = \"float16\" in the grid), so --shift has "
                         f"nothing to score; add it and retrain.")
    names = {f"{r.model}/{r.loss}/seed{r.seed}" for r in grid.runs}
    stored = [r for r in load_store(grid.store) if f"{r.model}/{r.loss}/seed{r.seed}" in names]
    evaluation = evaluate_shift(stored, cache=grid.store / "shift.json", progress=progress)
    print(f"calib: {len(evaluation.entries)} runs scored on {len(evaluation.sets)} test sets in "
          f"{grid.store / 'shift.json'}")


def _evaluate(grid, progress: bool) -> None:
    """``calib sweep --evaluate``: the post-hoc maps of every stored run of the store, saying which runs of the
    grid it evaluated, which it skipped (a run stored without its logits) and how many other runs of the store."""
    from calib.experiments import evaluate_store, load_store

    stored = load_store(grid.store)
    names = {f"{r.model}/{r.loss}/seed{r.seed}" for r in stored}
    grid_names = [f"{r.model}/{r.loss}/seed{r.seed}" for r in grid.runs]
    skipped = [name for name in grid_names if name not in names]
    others = len(names - set(grid_names))
    evaluate_store(stored, cache=grid.store / "posthoc.json", progress=progress)
    line = (f"calib: post-hoc maps of {len(stored)} stored runs in {grid.store / 'posthoc.json'}: "
            f"{len(grid_names) - len(skipped)} of the {len(grid_names)} runs of the grid")
    if others:
        line += f" and {others} other run{'s' if others > 1 else ''} of the store"
    if skipped:
        line += (f"; skipped, stored without logits.npz (the grid's discard removes it): {', '.join(skipped)}")
    print(line)


class _Interrupted(Exception):
    """Ctrl-C during ``calib train``: exit 130 with the command that resumes the run."""


class _Incomplete(Exception):
    """``calib sweep`` left runs that other processes hold untrained: exit 3, naming them."""


def _train(args) -> None:
    from calib.train import train

    config = _train_config(args)
    try:
        run = train(config, args.out, resume=args.resume, progress=not args.no_progress, discard=args.discard,
                    restart=args.restart, weights=args.weights)
    except KeyboardInterrupt:
        import shlex

        meta = Path(args.out) / "meta.json"
        again = (f"calib train --from-meta {shlex.quote(str(meta))} --out {shlex.quote(args.out)} --resume"
                 if meta.is_file() else "the same command")
        raise _Interrupted(f"interrupted; {args.out} keeps every completed epoch (nothing is half-written). Continue "
                           f"with: {again}") from None
    from calib.distributed import launch

    if not launch().main:                           # torchrun: rank 0 reports the run
        return
    last = run.epochs[-1] if run.epochs else {}
    test = last.get("test", {})
    print(f"calib: run in {run.out}: {run.meta.get('epochs_done')} epochs, test accuracy "
          f"{test.get('accuracy', float('nan')):.4f}, test ECE {test.get('ece', float('nan')):.4f}, "
          f"wall time {run.meta.get('wall_time_s')} s")


def main(argv: list[str] | None = None) -> int:
    """Run the ``calib`` command with ``argv`` (default: the command line); returns the exit status.

    ``python -m calib --help`` lists the subcommands and ``python -m calib <command> --help`` their options.
    """
    args = _parser().parse_args(argv)
    if args.command in ("train", "sweep"):
        pin_cpu_kernels()                           # before torch is imported: runs retrain bit for bit
    try:
        if args.command == "book":
            return _book(args)
        elif args.command == "train":
            _train(args)
        elif args.command == "sweep":
            _sweep(args)
    except _Interrupted as exc:
        print(f"calib: {exc}", file=sys.stderr)
        return 130
    except _Incomplete as exc:
        print(f"calib: not finished: {_one_line(exc)}", file=sys.stderr)
        return 3
    except KeyboardInterrupt:
        print("calib: interrupted", file=sys.stderr)
        return 130
    except (_BookError, ValueError, OSError, FloatingPointError) as exc:   # OSError: missing files, full disks
        print(f"calib: error: {_one_line(exc)}", file=sys.stderr)
        return 1
    return 0


class _BookError(Exception):
    """``calib book`` cannot go on (no checkout, a chapter failed, the build folder is in use): exit 1, one line."""


def _book_machinery():
    """The book at or above the working directory, and its runner (``calib_book.runner``), imported from the
    checkout's ``book/`` folder (put first on ``sys.path``); _BookError outside a checkout."""
    here = Path.cwd().resolve()
    root = next((folder for folder in (here, *here.parents) if (folder / "_toc.yml").is_file()), None)
    if root is None:
        raise _BookError(f"`calib book` runs in a checkout of the book's repository, and there is no _toc.yml at or "
                         f"above {here}: cd into the repository (the folder with _toc.yml and book/calib_book/).")
    machinery = root / "book" / "calib_book"
    if (machinery / "__init__.py").is_file() and str(machinery.parent) not in sys.path:
        sys.path.insert(0, str(machinery.parent))
    try:
        from calib_book import runner
    except ModuleNotFoundError as exc:
        if exc.name not in ("calib_book", "calib_book.runner"):
            raise
        raise _BookError(f"{root} holds a book but not its machinery ({machinery} is missing): run `calib book` from "
                         f"a full checkout of the repository.") from None
    return root, runner


def _book(args) -> int:
    """``calib book run|build|check|course`` on the book at or above the working directory."""
    root, runner = _book_machinery()
    try:
        if args.book_command == "run":
            params = {name: _parse_value(value) for name, value in args.parameter}
            runner.run_book(root, profile=args.profile, only=args.only, parameters=params,
                            keep_going=args.keep_going, strict=not args.no_strict, force=args.force,
                            jobs=args.jobs)
        elif args.book_command == "build":
            runner.build_book(root, strict=not args.no_strict, student=args.student)
        elif args.book_command == "check":
            return _check_book(root, args.workers)
        elif args.book_command == "course":
            return _course(root, args.only, args.self_test)
    except (runner.ChapterError, runner.BuildLockedError) as exc:
        raise _BookError(str(exc)) from None
    except KeyboardInterrupt:
        raise _Interrupted("interrupted; the ledger keeps each chapter's last successful run, and the chapter that "
                           "was running must run again before `calib book build`.") from None
    return 0


def _course(root, only, self_test: bool) -> int:
    """``calib book course``: the course edition, and with ``--self-test`` its autograders' points table."""
    from calib_book import course

    folder = course.build_course(root, chapters=only)
    if not self_test:
        return 0
    rows = course.self_test(folder)
    print(course.self_test_table(rows))
    return 0 if all(row.as_expected for row in rows) else 1


def _check_book(root, workers: int) -> int:
    """``calib book check``: a line per page, the problems found, and exit status 1 when there are any."""
    from calib_book import browser

    if workers < 1:
        raise ValueError(f"workers={workers}: pass 1 or more pages to render at once.")
    start = time.perf_counter()
    reports = browser.check_book(root / "_build" / "html", workers=workers)
    print(f"{'page':48s} {'formulas':>8s} {'errors':>6s} {'images':>6s} {'links':>6s} {'code lines':>10s}")
    for r in reports:
        print(f"{r.page:48s} {r.formulas:8d} {r.math_errors:6d} {r.images:6d} {r.links:6d} {r.visible_code_lines:10d}")
        for problem in r.problems:
            print(f"    problem: {problem}")
    bad = [r for r in reports if not r.ok]
    print(f"[check] {len(reports)} pages in {time.perf_counter() - start:.0f} s: "
          + (f"{len(bad)} with problems" if bad else "every page reads well"))
    return 1 if bad else 0


def _one_line(exc: BaseException) -> str:
    """The message of an error, with the file an OSError names (PermissionError, IsADirectoryError, ...)."""
    if isinstance(exc, OSError) and exc.strerror:
        return f"{exc.filename}: {exc.strerror}" if exc.filename else exc.strerror
    return " ".join(str(exc).split()) or type(exc).__name__


if __name__ == "__main__":
    sys.exit(main())
