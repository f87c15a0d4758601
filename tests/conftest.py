"""Fixtures shared by the test modules, and the book's machinery (``book/calib_book``) on the import path."""

import atexit
import os
import shutil
import sys
import tempfile
from pathlib import Path

from calib._reproducible import pin_cpu_kernels

pin_cpu_kernels()   # before any test module imports torch: runs retrain bit for bit on any x86 machine

# A claim a test records outside a chapter goes to a ledger of the session's own, never into the checkout's
# _build/claims.jsonl, which the book's ledger pages are built from (the runner gives each chapter's kernel its own).
if "CALIB_LEDGER" not in os.environ:
    _LEDGER_FOLDER = tempfile.mkdtemp(prefix="calib-test-ledger-")
    atexit.register(shutil.rmtree, _LEDGER_FOLDER, ignore_errors=True)
    os.environ["CALIB_LEDGER"] = os.path.join(_LEDGER_FOLDER, "claims.jsonl")

#: The folder that holds ``calib_book``, the book's machinery: it ships in no wheel, the tests import it from here.
BOOK = Path(__file__).resolve().parents[1] / "book"
if str(BOOK) not in sys.path:
    sys.path.insert(0, str(BOOK))

import gzip  # noqa: E402
import struct  # noqa: E402

import numpy as np  # noqa: E402  (after pin_cpu_kernels: an MKL build reads its variables when it loads)
import pytest  # noqa: E402


def write_tiny_fashion_mnist(folder: Path, n_train=5600, n_test=300, side=8, seed=0):
    """A learnable stand-in in Fashion-MNIST's on-disk format: class k is a bright stripe at row k // 2 ..."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)

    def images(n):
        y = rng.integers(0, 10, n).astype(np.uint8)
        x = rng.integers(0, 90, (n, side, side)).astype(np.uint8)
        for k in range(10):
            rows = np.flatnonzero(y == k)
            x[rows, (k % 5) + 1, :] = 230 if k < 5 else 120
        return x, y

    def idx(arr):
        arr = np.ascontiguousarray(arr, np.uint8)
        return bytes([0, 0, 8, arr.ndim]) + b"".join(struct.pack(">I", d) for d in arr.shape) + arr.tobytes()

    for prefix, n in (("train", n_train), ("t10k", n_test)):
        x, y = images(n)
        for kind, arr in (("images-idx3", x), ("labels-idx1", y)):
            with gzip.open(folder / f"{prefix}-{kind}-ubyte.gz", "wb") as fh:
                fh.write(idx(arr))


@pytest.fixture
def tiny_fashion(tmp_path, monkeypatch):
    home = tmp_path / "data"
    write_tiny_fashion_mnist(home / "fashion-mnist")
    monkeypatch.setenv("CALIB_DATA", str(home))
    return home


def book_not_built(why: str) -> None:
    """Skip a test that needs the built book when it is not built; under pytest-xdist (``make test``, ``--dist
    loadfile``: each file in one worker, in order) fail instead, since the test that builds it comes first in the
    same file (tests/test_chapters.py) and has then failed or not run."""
    import os

    if os.environ.get("PYTEST_XDIST_WORKER"):
        pytest.fail(f"{why}, though tests/test_chapters.py builds it before this test in the same worker under "
                    f"make test")
    pytest.skip(why)


#: The files of the test suite by the CPU time they took in a cold `make test` (core-seconds, 2 cores, stop 39), the
#: longest first; the files not named here take a few seconds or less.
LONGEST_FILES = ("test_chapters.py", "test_course.py", "test_distributed.py", "test_experiments.py",
                 "test_course_seed.py", "test_book.py", "test_chapter_parameters.py", "test_browser.py",
                 "test_posthoc.py", "test_train.py", "test_runs.py", "test_layers.py", "test_exercises.py",
                 "test_packaging.py")
#: A short file that pytest-xdist hands to the worker of tests/test_chapters.py with it (each worker holds a second
#: file in advance), which waits until the book is built and checked.
WAITS_BEHIND_THE_BOOK = "test_api_reference.py"


#: The tests `make test` leaves to `make test-all` (the ``slow`` mark, added here): system tests of a whole capability,
#: seconds each, by file or by ``file::test`` (every parametrisation), each with what it covers; not one that shares a
#: costly fixture with a test of `make test` (it would save nothing). Cold, from a fresh clone on 2 cores (issue 45):
#: `make test-all` 840 s with the machine busy 1,624 core-seconds, `make test` 402 s and 774 (the 8 minutes asked);
#: `make test` keeps a cheaper test of most of them, named here. tests/test_slow_tier.py checks each entry.
SLOW_TESTS = {
    "test_chapters.py::test_the_student_edition_builds":
        "the student edition built (make test's builds took 109-141 core-s with it, 65 without)",
    "test_chapters.py::test_the_student_book_has_no_solutions_and_a_cell_to_work_in_after_each_exercise":
        "the student edition's pages and notebooks",
    "test_chapters.py::test_the_student_site_holds_no_line_of_the_key_and_no_solution": "the student edition's leaks",
    "test_chapters.py::test_every_built_page_reads_well_in_a_browser":
        "every page of the book in Chromium at both widths (250 core-s); make test opens a page of each kind",
    "test_browser.py": "the browser checks on planted pages; make test keeps the too-wide-content cases",
    "test_course.py::test_autograder_gives_full_points_to_right_and_none_to_wrong_submissions":
        "the solutions graded in four chapters' notebooks, every kind of part, otter's runner; make test grades one",
    "test_course.py::test_autograder_gives_the_points_of_the_exercises_that_are_answered":
        "a half-answered notebook of chapter 02 graded whole",
    "test_course.py::test_check_the_public_and_the_hidden_tests_agree_on_every_numeric_part":
        "1,000 answers around every numeric part of the key through three graders",
    "test_course_seed.py": "the course drawn from another seed (make course COURSE_SEED=...)",
    "test_chapter_parameters.py": "chapters executed at the edges of their parameters",
    "test_distributed.py": "trainings on two gloo ranks, killed and resumed",
    "test_train.py::test_sigkill_after_the_second_epoch_then_resume_is_exact": "a training killed and resumed",
    "test_train.py::test_ctrl_c_exits_130_with_the_resume_command_and_leaves_nothing_half_written":
        "a training stopped",
    "test_train.py::test_a_second_train_on_the_same_directory_is_refused_and_a_killed_run_leaves_no_stale_lock":
        "two trainings on one folder",
    "test_runs.py::test_resume_across_cpu_instruction_sets_is_refused": "a resume under another CPU dispatch",
    "test_portability.py::test_exactness_tests_pass_under_another_numpy_dispatch_and_openblas_core_type":
        "the exactness tests rerun under another numpy dispatch and OpenBLAS core type",
    "test_experiments.py::test_cheapest_stored_run_retrains_to_its_logits": "a stored grid run retrained",
    "test_focal_size_width.py::test_the_cheapest_run_retrains_to_its_summary": "a stored run retrained",
    "test_shift.py::test_a_stored_shift_run_retrains_and_keeps_the_network_of_its_logits": "a stored run retrained",
    "test_gpu_grid.py": "the GPU grid's script, dry-run on the CPU",
    "test_packaging.py::test_the_wheel_holds_the_library_and_nothing_of_the_book": "the wheel built",
    "test_packaging.py::test_the_installed_wheel_runs_every_public_module_outside_the_checkout":
        "the wheel installed and run outside the checkout",
    "test_packaging.py::test_the_installed_calib_command_runs": "the installed wheel's command",
    "test_exercises.py::test_the_key_computes_with_torch_only_under_the_notebooks_kernels": "the key's trainings",
    "test_exercises.py::test_as_in_the_notebook_runs_a_function_under_the_pinned_kernels_from_a_native_process":
        "a process under the notebooks' pinned kernels",
    "test_layers.py::test_every_module_imports_under_python_OO": "every module imported under python -OO",
    "test_book.py::test_a_second_run_on_the_same_build_folder_is_refused_at_once_naming_the_first":
        "two book runs at once",
    "test_book.py::test_chapters_executed_two_at_once_overlap_and_keep_the_ledger_in_toc_order":
        "two chapters' kernels at once",
}
#: The tests of a slow file that `make test` keeps: the too-wide-content checks of tests/test_browser.py (a planted page
#: each) and the refusal of a page that check_book(only=...) does not have (no Chromium started).
KEPT_FROM_SLOW_FILES = ("test_browser.py::test_content_wider_than_its_column_is_reported",
                        "test_browser.py::test_check_book_refuses_a_page_it_does_not_have_by_name")


def slow_reason(nodeid: str) -> str | None:
    """What the ``slow`` test ``nodeid`` covers (:data:`SLOW_TESTS`), or None for a test of `make test`."""
    path, _, name = nodeid.partition("::")
    file, name = path.rsplit("/", 1)[-1], name.split("[")[0]
    if f"{file}::{name}" in KEPT_FROM_SLOW_FILES:
        return None
    for key, reason in SLOW_TESTS.items():
        key_file, _, key_name = key.partition("::")
        if key_file == file and key_name in ("", name):
            return reason
    return None


@pytest.hookimpl(tryfirst=True)      # before pytest's -m deselects by the marks added here
def pytest_collection_modifyitems(config, items):
    """The longest files first, tests/test_chapters.py at their head, and the rest in their order: pytest-xdist
    (``--dist loadfile --no-loadscope-reorder``, as ``make test`` runs it) hands the files out in this order, a file
    to each worker as it asks, so the book is built at once on one worker while the other takes the long files, and
    the short ones come last, which the workers share until both finish (the longest first: the last files end
    within seconds of each other instead of one worker idling while the other runs a long one). The file each worker
    holds in advance is, for the book's worker, a short one, as it waits until the book is built."""
    rank = {name: i for i, name in enumerate(LONGEST_FILES)}
    order = {name: i for i, name in enumerate(dict.fromkeys(item.path.name for item in items))}

    def position(item):
        name = item.path.name
        if name == WAITS_BEHIND_THE_BOOK:
            return (0, 2, 0)                       # third: after the book's file and the longest of the rest
        if name in rank:
            return (0, 0 if rank[name] < 2 else 3, rank[name])
        return (1, 0, order[name])

    items.sort(key=position)
    slow = [item for item in items if slow_reason(item.nodeid) is not None]
    for item in slow:
        item.add_marker(pytest.mark.slow)
    config._calib_slow = len(slow)


def pytest_sessionfinish(session):
    """A pytest-xdist worker tells the controller how many slow tests it collected (the table's last line)."""
    if hasattr(session.config, "workeroutput"):
        session.config.workeroutput["calib_slow"] = getattr(session.config, "_calib_slow", 0)


@pytest.hookimpl(optionalhook=True)       # pytest-xdist's hook
def pytest_testnodedown(node, error):
    """The controller of pytest-xdist: the slow tests a worker collected (every worker collects them all)."""
    count = getattr(node, "workeroutput", {}).get("calib_slow", 0)
    node.config._calib_slow = max(getattr(node.config, "_calib_slow", 0), count)


# ---------------------------------------------------------------------------------------------------------------------
# The phase table printed at the end of `make test` (issue 45, item 3): where the time of a run went, so that two
# machines' runs can be compared phase by phase. Each worker measures every test's wall time and the CPU time of its
# process and of the processes it waited for (chapter kernels, Sphinx, Chromium, graders); the chapters' test reports
# its two parts (executing the chapters, building the editions) itself, through ``record_phase``.
# ---------------------------------------------------------------------------------------------------------------------

#: The phases of the table, in its order, and the tests that make each up (a test not named falls in "library tests").
PHASES = ("setup", "chapters", "builds", "browser check", "book checks", "course", "library tests")
_PHASE_OF_FILE = {"test_course.py": "course"}
_PHASE_OF_TEST = {"test_every_built_page_reads_well_in_a_browser": "browser check",
                  "test_a_page_of_each_kind_reads_well_in_a_browser": "browser check"}


def phase_of(nodeid: str) -> str:
    """The phase a test belongs to, by its node id."""
    path, _, name = nodeid.partition("::")
    name = name.split("[")[0]
    file = path.rsplit("/", 1)[-1]
    if name in _PHASE_OF_TEST:
        return _PHASE_OF_TEST[name]
    if file == "test_chapters.py":
        return "book checks"
    return _PHASE_OF_FILE.get(file, "library tests")


def _cpu_seconds() -> float:
    import resource

    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


@pytest.fixture
def record_phase(request):
    """``record_phase(name, wall_s, cpu_s)``: a part of a test counted under phase ``name`` in the phase table (and
    no longer under the test's own phase)."""
    def record(name: str, wall_s: float, cpu_s: float) -> None:
        request.node.user_properties.append(("phase", (name, wall_s, cpu_s)))
    return record


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    import time

    wall, cpu = time.perf_counter(), _cpu_seconds()
    item.user_properties.append(("phase-start", (wall, cpu)))
    yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    import time

    outcome = yield
    report = outcome.get_result()
    if call.when == "teardown":
        start = dict(item.user_properties).get("phase-start")
        if start:
            report.user_properties.append(("phase-total", (time.perf_counter() - start[0],
                                                           _cpu_seconds() - start[1])))


class _PhaseTable:
    def __init__(self):
        self.rows = {name: [0, 0.0, 0.0] for name in PHASES}        # tests, worker-seconds, CPU core-seconds
        self.tests: list[tuple[str, str, float, float]] = []         # per test: node id, phase, wall s, CPU s

    def add(self, report) -> None:
        props = [p for p in report.user_properties if isinstance(p, (list, tuple)) and len(p) == 2]
        total = next((v for k, v in props if k == "phase-total"), None)
        if total is None:
            return
        wall, cpu = total
        for key, value in props:
            if key == "phase":
                name, part_wall, part_cpu = value
                self.rows[name][1] += part_wall
                self.rows[name][2] += part_cpu
                wall, cpu = wall - part_wall, cpu - part_cpu
        row = self.rows[phase_of(report.nodeid)]
        row[0] += 1
        row[1] += max(0.0, wall)
        row[2] += max(0.0, cpu)
        self.tests.append((report.nodeid, phase_of(report.nodeid), round(max(0.0, wall), 3), round(max(0.0, cpu), 3)))


_TABLE = _PhaseTable()


def pytest_runtest_logreport(report):
    if report.when == "teardown":
        _TABLE.add(report)


def _setup_seconds(root: Path, session_start: float):
    """The seconds `make test` spent before pytest started (the venv, the install, data and browser), from the
    clock the Makefile's test-clock target writes; None when pytest was started otherwise."""
    clock = root / "_build" / ".test-clock"
    try:
        started = float(clock.read_text().strip())
    except (OSError, ValueError):
        return None
    return session_start - started if 0 <= session_start - started < 24 * 3600 else None


def _machine_busy_seconds() -> float | None:
    """The core-seconds this machine's CPUs have been busy since boot (every process's, from /proc/stat), or None
    where there is no /proc/stat."""
    try:
        fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    except (OSError, ValueError):
        return None
    user, nice, system, _idle, _iowait, irq, softirq, steal = fields
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def pytest_sessionstart(session):
    import time

    session.config._calib_started = time.time()
    session.config._calib_busy = _machine_busy_seconds()


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """The phase table: per phase the tests, the time the workers spent in it (the chapters' and the builds' own,
    measured inside the chapters' test) and the CPU time of its processes; then the run's wall time, the machine, and
    where the same table is written (``_build/test-phases.json``)."""
    import json
    import platform
    import time

    if hasattr(config, "workerinput"):
        return
    started = getattr(config, "_calib_started", time.time())
    root = Path(__file__).resolve().parents[1]
    setup = _setup_seconds(root, started)
    wall = time.time() - started
    rows = dict(_TABLE.rows)
    if not any(r[0] for r in rows.values()):
        return
    from calib._reproducible import cpu_vendor

    model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("model name")), platform.processor()) if Path("/proc/cpuinfo").is_file() \
        else platform.processor()
    try:
        load = f"{os.getloadavg()[0]:.1f}"
    except (AttributeError, OSError):
        load = "?"
    write = terminalreporter.write_line
    write("")
    tier = "make test" if "not slow" in (config.option.markexpr or "") else "make test-all"
    write(f"{tier}, phase by phase ({model}, {cpu_vendor()}, {os.cpu_count()} cores, load average {load} at the "
          f"end):")
    write(f"  {'phase':<15}{'tests':>7}{'worker s':>10}{'CPU s':>9}")
    if setup is not None:
        write(f"  {'setup':<15}{'':>7}{setup:>10.1f}{'':>9}")
    for name in PHASES[1:]:
        n, w, c = rows[name]
        if n or w:
            write(f"  {name:<15}{n if n else '':>7}{w:>10.1f}{c:>9.1f}")
    busy = sum(r[1] for r in rows.values())
    write(f"  {'pytest (wall)':<15}{'':>7}{wall:>10.1f}{sum(r[2] for r in rows.values()):>9.1f}   "
          f"(worker time {busy:.0f} s over the workers)")
    if setup is not None:
        write(f"  {tier:<15}{'':>7}{setup + wall:>10.1f}")
    left = getattr(config, "_calib_slow", 0)
    if tier == "make test" and left:
        write(f"  {left} tests marked slow left to make test-all (tests/conftest.py, SLOW_TESTS)")
    busy_then, busy_now = getattr(config, "_calib_busy", None), _machine_busy_seconds()
    machine_busy = None if busy_then is None or busy_now is None else busy_now - busy_then
    if machine_busy is not None:
        # CPU s counts each worker and the processes it waited for; Chromium's renderers are not among them (their
        # browser does not wait for them), so the browser check's own is several times its row's
        write(f"  the machine's CPUs were busy {machine_busy:.0f} core-seconds during pytest (every process's: "
              f"{machine_busy - sum(r[2] for r in rows.values()):.0f} more than the table counts, Chromium's "
              f"renderers and any other work on the machine)")
    out = root / "_build" / "test-phases.json"
    try:
        out.parent.mkdir(exist_ok=True)
        out.write_text(json.dumps({"machine": model, "vendor": cpu_vendor(), "cores": os.cpu_count(),
                                   "setup_s": setup, "pytest_wall_s": wall, "machine_busy_s": machine_busy,
                                   "phases": {k: {"tests": v[0], "worker_s": v[1], "cpu_s": v[2]}
                                              for k, v in rows.items()},
                                   # every test, the most CPU first (a part recorded by record_phase excluded)
                                   "tests": [{"test": t, "phase": ph, "wall_s": w, "cpu_s": c} for t, ph, w, c in
                                             sorted(_TABLE.tests, key=lambda row: -row[3])]}, indent=1) + "\n")
    except OSError:
        pass
