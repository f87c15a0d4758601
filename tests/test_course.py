"""The course edition (``make course``, calib_book.course): otter-grader's points for planted submissions, the public
tests' verdicts (a right answer is never rejected for rounding), the leak scan of every student file and of the
wheel with a control, and the book locator (calib_book.paths) from a student's folder."""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

import nbformat
import numpy as np
import pytest
import sympy

from calib_book import course, course_check, leaks, paths
from calib_book.answers import Expected
from calib_book.timeouts import scaled  # a time limit, scaled by the machine's load

ROOT = Path(__file__).resolve().parents[1]

#: Expected values that the course bundle holds, each for a reason: the stored runs' records (a run's NLL is a stored
#: result: ch07-ex-stored-focal asks for it computed from the logits; its ECE uses 10 bins, which no record holds, but
#: Psi^3 leaves every bin over-confident, and then the ECE is the mean confidence minus the accuracy under any binning,
#: which the stored 15-bin ECE of the map is; the run's history.json held the NLL too until its logits were stored as
#: float16, so the answer computed from them now differs from the float32 record); and the threshold p0(3), one end
#: of an interval ex-flsd532 asks for, which chapter 06's table prints among the thresholds of other gammas (the
#: intervals themselves are printed nowhere). The test fails on any other hit, and on an entry here that no longer
#: hits, so that the list only shrinks.
#: (Chapter 06's table printed the decimals of ex-g-gamma-one's threshold and argmax too: issue 46 asks for other
#: closed forms, which the book shows nowhere.)
KNOWN_SELF_ANSWERS = {
    ("ch07-ex-stored-focal ece", "posthoc.json"),
    ("ch07-ex-stored-focal nll", "posthoc.json"),
    ("ex-flsd532 intervals", "06-focal-loss-is-not-proper.ipynb"),
}


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    return course.build_course(ROOT, out=tmp_path_factory.mktemp("course") / "course")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    folder = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(folder),
                    str(ROOT)], check=True, capture_output=True)
    return next(folder.glob("calib-*.whl"))


def _part(value, rtol=1e-6, atol=1e-12, **kw):
    return course.KeyPart("00-x", "ex-x", "answer", Expected(lambda: value, rtol=rtol, atol=atol, **kw), value)


@pytest.fixture
def fast_digests(monkeypatch):
    """The digests' key stretching (course_check.DIGEST_ITERATIONS, which makes guessing slow) is beside the point
    of a test that makes hundreds of verdicts; the spec and the verdict use the same count."""
    monkeypatch.setattr(course_check, "DIGEST_ITERATIONS", 10)


def _three_verdicts(part: course.KeyPart, given):
    """(check, public test, hidden test) on ``given``: right or not (a public error on the answer's form is not)."""
    from calib_book import exercises

    checked = exercises._compare(part.part, given, part.value, part.spec, f"{part.label} {part.part}").verdict
    try:
        public = course_check.public_verdict(given, course.public_spec(part, "5a17" * 8))
    except AssertionError:
        public = False
    return checked == "right", public, course_check.hidden_verdict(given, part.form)


def _numeric_answers(part: course.KeyPart) -> list:
    """Answers to a numeric part around its expected value: the value, its correct rounding to the digits asked
    and to one digit fewer, 0.4 and 0.6 of a unit off, 1 % off, the value as a decimal for a closed form."""
    import sympy

    form = part.form
    if form["kind"] in ("exact", "symbolic"):
        value = part.value
        tiny = sympy.Rational(1, 10 ** 25)
        out = [value, value + 1, value * (1 + tiny), value + sympy.Rational(1, 10 ** 8)]
        if form["kind"] == "exact":
            out += [float(sympy.N(value, 30)), sympy.Float(sympy.N(value, 30), 30)]
        return out
    if form["kind"] == "any-of":
        form = form["options"][0]
    e = np.asarray(part.value, dtype=float)
    # the last digit asked: a tenth of it is a band's unit; a count's unit is 1
    exponents = np.array([b[0] + (b[2] > 0) for b in form["bands"]], dtype=float).reshape(e.shape)
    unit = 10.0 ** exponents
    out = [e, e + 0.4 * unit, e - 0.4 * unit, e + 0.6 * unit, e - 0.6 * unit, e * 1.01 + unit,
           np.round(e / unit) * unit, np.round(e / (10 * unit)) * 10 * unit]
    return [x.tolist() for x in out]


def test_check_the_public_and_the_hidden_tests_agree_on_every_numeric_part(fast_digests):
    """Issue 46: the public test passed a band 3.5-19 times wider than the hidden tolerance, so that the key
    correctly rounded to the six digits asked passed its public test and failed the hidden one in 21 of 83 numeric
    parts (and a closed form's hidden test took a decimal). Now one rule decides, through the same integers: over
    every numeric part of the key, and answers around it (rounded as asked, to a digit fewer, half a unit off, a
    decimal for a closed form), check, the public and the hidden test agree on every answer, a correct rounding is
    right, and a decimal for a closed form is not."""
    parts = [p for p in course.key_parts() if p.rule in ("value", "any-of", "interval")
             and p.form["kind"] not in ("text", "bool")]
    assert len(parts) >= 90
    disagreements, verdicts = [], 0
    for part in parts:
        answers = _numeric_answers(part)
        for given in answers:
            three = _three_verdicts(part, given)
            verdicts += 1
            if len(set(three)) != 1:
                disagreements.append((part.label, part.part, given, three))
        kind = part.form["kind"]
        assert _three_verdicts(part, answers[0]) == (True,) * 3, (part.label, part.part)
        if kind in ("number", "interval", "any-of"):
            assert _three_verdicts(part, answers[6]) == (True,) * 3, (part.label, part.part)   # correctly rounded
            assert _three_verdicts(part, answers[5]) == (False,) * 3, (part.label, part.part)  # 1 % off
        if kind == "exact":
            assert _three_verdicts(part, answers[4]) == (False,) * 3, (part.label, part.part)  # a decimal
    assert disagreements == [] and verdicts > 500


def test_a_correct_rounding_is_right_and_the_public_test_holds_no_readable_value(fast_digests):
    part = _part(24 * np.log(2), rtol=1e-6)                          # 24 ln 2 = 16.635532...
    spec = course.public_spec(part)
    for given, right in [(24 * np.log(2), True), (16.6355, True), (16.63555, True), (16.6356, False),
                         (16.64, False), (25 * np.log(2), False)]:
        assert _three_verdicts(part, given) == (right,) * 3, given
    text = json.dumps(spec)
    assert "16.63" not in text and "16635" not in text and len(spec["digests"]) == 1


def test_integers_arrays_booleans_words_and_expressions(fast_digests):
    ints = _part(np.array([3, 7, 12]), rtol=0, atol=0.5)
    assert _three_verdicts(ints, [3, 7, 12]) == (True,) * 3
    assert _three_verdicts(ints, [3, 7, 13]) == (False,) * 3 == _three_verdicts(ints, [3, 7, 12.6])
    with pytest.raises(AssertionError, match="shape"):
        course_check.public_verdict([3, 7], course.public_spec(ints))
    gamma = sympy.Symbol("gamma", positive=True)
    expression = _part(sympy.exp(-gamma) / (1 + gamma))
    g = sympy.Symbol("gamma")
    assert _three_verdicts(expression, sympy.exp(-g) * (g + 1) ** -1) == (True,) * 3
    assert _three_verdicts(expression, sympy.exp(-g) / (2 + g)) == (False,) * 3
    with pytest.raises(AssertionError, match="not answered yet"):
        course_check.public_verdict(..., course.public_spec(expression))
    closed = _part(sympy.exp(-1), exact=True)
    assert _three_verdicts(closed, sympy.exp(-1)) == (True,) * 3 == _three_verdicts(closed, 1 / sympy.E)
    for decimal in (float(np.exp(-1)), sympy.Float(sympy.N(sympy.exp(-1), 40), 40), sympy.exp(-1.0)):
        assert _three_verdicts(closed, decimal) == (False,) * 3, decimal
    with pytest.raises(AssertionError, match="a decimal: the question asks for the closed form"):
        course_check.public_verdict(0.36787944117144233, course.public_spec(closed))


def test_words_and_truth_values_are_graded_by_the_hidden_test_alone():
    """Issue 46: a verdict's public test said right or wrong, and its hint listed the three verdicts: three tries
    read the answer. The public test now checks the form (one of the options the question names) and that a verdict
    follows from the student's own interval; the hidden test grades it."""
    from calib_book.answers import VERDICTS, verdict_claim

    part = course.KeyPart("00-x", "ex-x", "verdict", verdict_claim(lambda: "lower", hint="h"), "lower")
    spec = course.public_spec(part)
    assert spec == {"kind": "text", "choices": list(VERDICTS), "verdict_on": "interval"}
    for word in VERDICTS:
        course_check.choice_form(word, spec)                       # no error: the public test passes all three
        assert course_check.hidden_verdict(word, part.form) == (word == "lower")
    with pytest.raises(AssertionError, match="expected one of"):
        course_check.choice_form("smaller", spec)
    course_check.verdict_follows("lower", (-0.3, -0.1))
    with pytest.raises(AssertionError, match="does not follow from your interval"):
        course_check.verdict_follows("higher", (-0.3, -0.1))


def test_the_interval_rule_rejects_welch_for_paired_adaece_and_a_reversed_difference():
    """Issue 46: the interval rule (centre within a quarter width, width within a factor 1.5) took Welch's interval
    for a paired one, AdaECE for 15 equal-width bins, and a sign-reversed difference near 0. The runs a question fixes
    are bit-reproducible, so each end is now graded to 3 significant digits of the width: on ch05-ex-flsd's stored runs
    (FLSD-53 minus FL-3, final test ECE, seeds 0-4) the key's interval and its correct rounding are right, the three
    mistakes are not, in check, the public and the hidden tests alike."""
    from scipy import stats as st
    from scipy.special import softmax

    from calib import metrics
    from calib.stats import paired_seed_interval
    from calib_book.answers import ch05_miscalibration_dynamics as ch05
    from calib_book.answers import interval_claim, interval_right

    seeds = ch05._CH05_SEEDS
    final = {loss: np.array([ch05._ch05_run(loss, s).epochs[-1]["test"]["ece"] for s in seeds])
             for loss in ("flsd-53", "fl-3")}

    def adaptive(loss, seed):
        arrays = ch05._ch05_run(loss, seed).logits()
        return metrics.adaptive_ece(softmax(arrays["test_logits"].astype(float), 1), arrays["test_labels"])

    key = paired_seed_interval(final["flsd-53"], final["fl-3"])
    reference = (key.low, key.high)
    welch = st.ttest_ind(final["flsd-53"], final["fl-3"], equal_var=False).confidence_interval(0.95)
    adaece = paired_seed_interval([adaptive("flsd-53", s) for s in seeds], [adaptive("fl-3", s) for s in seeds])
    part = course.KeyPart("05-x", "ex-x", "interval", interval_claim(lambda: reference, hint="h"), reference)
    assert interval_right(reference, reference) and interval_right(reference, [float(f"{v:.4g}") for v in reference])
    for mistake in ((welch.low, welch.high), (adaece.low, adaece.high), (-key.high, -key.low)):
        assert not interval_right(reference, mistake), mistake
        assert _three_verdicts(part, mistake) == (False,) * 3
    assert _three_verdicts(part, reference) == (True,) * 3
    near_zero = (-0.010, 0.012)                                      # a reversed difference the old rule took
    assert not interval_right(near_zero, (-0.012, 0.010)) and interval_right(near_zero, (-0.01, 0.012))


# --- the bundle -----------------------------------------------------------------------------------------------------

def test_student_notebooks_check_with_the_grader_and_import_no_key(built):
    student = built / "student"
    for chapter in course._chapters(ROOT):
        nb = nbformat.read(student / f"{chapter}.ipynb", as_version=4)
        code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
        assert "calib_book.exercises" not in code and "calib_book.answers" not in code, chapter
        # the training exercises' keys ran torch's CPU kernels with AVX2: the notebook pins them before torch loads
        first = next(c.source for c in nb.cells if c.cell_type == "code")
        assert "pin_cpu_kernels()" in first, chapter
        assert "import torch" not in code or code.index("pin_cpu_kernels()") < code.index("import torch"), chapter
        assert "{solution" not in "\n".join(c.source for c in nb.cells), chapter
        for label in {p.label for p in course.key_parts_cached(chapter)}:
            assert f"{course.answer_variable(label)} = dict(" in code and f"grader.check({label!r})" in code
            assert (student / "tests" / chapter / f"{label}.py").is_file()
    helpers = {p.name for p in (student / "calib_book").iterdir()}
    assert not {"answers", "answers.py", "exercises.py", "course.py"} & helpers        # the key's package among them


#: The chapters whose right submission `make test-all` grades (`make test` grades chapter 03's, below): together they
#: hold every kind of part the key has (the test below checks it), chapter 02 is graded by otter's own runner too,
#: and chapters 05 and 11 read stored results from the bundle. Grading runs the whole student notebook, the chapter's
#: code included: these four took 145 core-s, all thirteen chapters 300-510 s (issue 45), and `make course` grades
#: every chapter, with all five planted kinds and both graders.
GRADED_RIGHT = ("02-focal-gradient", "03-choosing-gamma", "05-miscalibration-dynamics", "11-paper-tables")


def _kind(part: course.KeyPart) -> str:
    return "construction" if part.rule == "construction" else part.form["kind"]


def test_autograder_gives_full_points_to_right_and_none_to_wrong_submissions(built):
    """The self-test of `make course` in the time of `make test-all`: the right submission of the chapters of
    GRADED_RIGHT, which hold every kind of part (a number, an interval, an exact and a symbolic closed form, one of
    several values, a construction, a word, a truth value), graded by grade(), full points, and otter's own runner on
    chapter 02 agreeing with it. The partly answered and the cheating submissions have tests of their own (below and
    in the grading section), and `make course` grades all five planted kinds, the classic mistakes of
    calib_book.course.MISTAKES among them, with both graders on every chapter."""
    parts = course.key_parts()
    assert {_kind(p) for p in parts if p.chapter in GRADED_RIGHT} == {_kind(p) for p in parts}
    chapters = list(GRADED_RIGHT)
    rows = course.self_test(built, kinds=("right",), chapters=chapters, otter=False)
    by_otter = course.self_test(built, kinds=("right",), chapters=["02-focal-gradient"])
    assert {r.chapter for r in rows} == set(chapters)
    for row in rows + by_otter:
        assert row.as_expected, row
        assert row.possible == sum(getattr(p.spec, "points", 1) for p in course.key_parts_cached(row.chapter))
        assert row.points == row.possible, row
    assert [r.otter_points for r in by_otter] == [by_otter[0].possible]


def test_the_solutions_earn_full_points_in_a_whole_student_notebook(built):
    """`make test`'s share of the test above (which `make test-all` runs): the right submission of the cheapest
    chapter to execute, its whole student notebook with the book's solutions as the student's code, graded by
    grade(): full points. With the cheap gradings of the grading section (answers given as values), it proves the
    bundle, the notebook, the key and the grader agree; the test above proves it for every kind of part."""
    chapter = "03-choosing-gamma"
    rows = course.self_test(built, kinds=("right",), chapters=[chapter], otter=False)
    assert [r.chapter for r in rows] == [chapter]
    assert rows[0].as_expected and rows[0].points == rows[0].possible > 0, rows[0]
    assert rows[0].possible == sum(getattr(p.spec, "points", 1) for p in course.key_parts_cached(chapter))


def test_autograder_gives_the_points_of_the_exercises_that_are_answered(built, tmp_path):
    """A submission that answers the first half of the exercises (right) and leaves the others: the points of those
    it answered, and no more."""
    chapter = "02-focal-gradient"
    submission = tmp_path / "partly.ipynb"
    nb, expected = course.planted_submission(ROOT, chapter, "partly")
    nbformat.write(nb, submission)
    points = course.grade(built / "autograder" / f"{chapter}.zip", submission).points
    total = sum(getattr(p.spec, "points", 1) for p in course.key_parts_cached(chapter))
    assert sum(points.values()) == pytest.approx(expected) and 0 < expected < total


def test_public_test_runs_from_the_students_folder(built, monkeypatch):
    import otter

    chapter, label = "06-focal-loss-is-not-proper", "ch06-ex-float32"
    monkeypatch.chdir(built / "student")
    grader = otter.Notebook(tests_dir=f"tests/{chapter}")
    right = {p.part: p.value for p in course.key_parts_cached(chapter) if p.label == label}
    assert grader.check(label, global_env={course.answer_variable(label): right}).passed_all
    wrong = {k: v * 1.01 for k, v in right.items()}
    assert not grader.check(label, global_env={course.answer_variable(label): wrong}).passed_all


# --- grading: time limits, a dead kernel, and the hidden tests out of the submission's reach (issue 45) ------------

GRADED = "02-focal-gradient"


def _answer_cell(label: str) -> str:
    """The cell that gives exercise ``label`` of GRADED the key's answers as plain Python values (no import)."""
    parts = [p for p in course.key_parts_cached(GRADED) if p.label == label]
    values = {p.part: p.value if isinstance(p.value, str) else np.asarray(p.value, dtype=float).tolist() for p in parts}
    return f"{course.answer_variable(label)} = {values!r}"


def _grade_cells(built, tmp_path, cells, **limits):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    submission = tmp_path / "submission.ipynb"
    nbformat.write(nb, submission)
    return course.grade(built / "autograder" / f"{GRADED}.zip", submission, **limits)


def _none_but(label: str | None = None) -> dict:
    """The points of GRADED's exercises when only ``label`` (or none) is right."""
    points = {p.label: 0.0 for p in course.key_parts_cached(GRADED)}
    if label is not None:
        points[label] = float(sum(p.points for p in course.key_parts_cached(GRADED) if p.label == label))
    return points


def test_a_cell_past_its_time_limit_is_interrupted_and_the_rest_is_graded(built, tmp_path):
    """Before: grade() had no time limit, and a submission with an endless loop never returned (otter run waited on
    it). Now the cell is interrupted at its limit, the exercise it would have answered scores 0, the others count,
    and a note says why."""
    loop = "import time\nwhile True:\n    time.sleep(0.05)\n"
    start, limit = time.monotonic(), scaled(3)
    result = _grade_cells(built, tmp_path, [loop + _answer_cell("ex-batch-by-hand"),
                                            _answer_cell("ex-multiclass-entropy")], cell_timeout=limit)
    assert result.points == _none_but("ex-multiclass-entropy")
    assert result.notes == (f"code cell 1 ran past its time limit ({limit:g} s) and was interrupted: the answers it "
                            "would have given are missing",)
    assert time.monotonic() - start < scaled(120)


def test_a_cell_that_ignores_the_interrupt_ends_the_run_and_scores_zero(built, tmp_path, monkeypatch):
    """A loop that swallows the interrupt: its kernel is killed after the grace period, and the submission scores 0
    (the answers of the cell before it are lost with the kernel), with a note."""
    monkeypatch.setattr(course, "INTERRUPT_GRACE_S", 2)
    loop = "import time\nwhile True:\n    try:\n        time.sleep(0.05)\n    except KeyboardInterrupt:\n        pass\n"
    result = _grade_cells(built, tmp_path, [_answer_cell("ex-multiclass-entropy"), loop], cell_timeout=scaled(3))
    assert result.points == _none_but() and result.total == 0
    assert re.fullmatch(r"code cell 2 did not stop within [0-9.]+ s of the interrupt: its kernel was killed, the "
                        r"submission scores 0", result.notes[-1]), result.notes


def test_a_submission_that_kills_its_kernel_scores_zero_with_a_note(built, tmp_path):
    """Before: a submission calling os._exit raised DeadKernelError out of grade(); now it scores 0 and says why."""
    result = _grade_cells(built, tmp_path, [_answer_cell("ex-batch-by-hand"), "import os\nos._exit(0)"])
    assert result.points == _none_but()
    assert result.possible == {label: float(sum(p.points for p in course.key_parts_cached(GRADED) if p.label == label))
                               for label in _none_but()}
    assert result.notes == ("the kernel died in code cell 2 (os._exit, exit(), a crash or no memory left): the "
                            "answers are lost, the submission scores 0",)


def _processes_below(pid: int) -> dict[int, str]:
    """The processes below ``pid`` (its children, theirs, ...) and their command lines, read from /proc."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parent = int(stat.read_text().rsplit(")", 1)[1].split()[1])      # the field after "pid (name) state"
        except (OSError, IndexError, ValueError):                            # a process that ended meanwhile
            continue
        children.setdefault(parent, []).append(int(stat.parent.name))
    found, todo = {}, list(children.get(pid, []))
    while todo:
        child = todo.pop()
        try:
            found[child] = (Path("/proc") / str(child) / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        todo += children.get(child, [])
    return found


def _processes_in(folder: Path) -> list[int]:
    """The processes whose working directory is ``folder`` or below it (what a kernel started there keeps)."""
    found = []
    for cwd in Path("/proc").glob("[0-9]*/cwd"):
        try:
            if Path(os.readlink(cwd)).is_relative_to(folder):
                found.append(int(cwd.parent.name))
        except OSError:                                                      # ended meanwhile, or not ours to read
            continue
    return found


#: A loop that swallows the interrupt: grade() ends its kernel after INTERRUPT_GRACE_S.
IGNORES_THE_INTERRUPT = ("import time\nwhile True:\n    try:\n        time.sleep(0.05)\n"
                         "    except KeyboardInterrupt:\n        pass\n")


@pytest.mark.skipif(not Path("/proc/self/stat").is_file(), reason="reads the process tree from /proc (Linux)")
@pytest.mark.parametrize("ending", ["answers collected", "interrupt ignored", "kernel died"])
def test_a_grading_leaves_no_kernel_and_no_temporary_file_behind(built, tmp_path, monkeypatch, ending):
    """Before: nbclient shuts down only a kernel whose manager it made itself, and grade() gives it one, so every
    grading left its kernel running, a sleeping child of the grader (eight at once in a test worker), with its
    connection file in the temporary folder, on every ending. Now no kernel of a grading outlives the call, and of
    the temporary files it made (its folder, the hidden tests' folder, the connection file) none is left."""
    monkeypatch.setattr(course, "INTERRUPT_GRACE_S", 2)
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))     # where grade() and jupyter_client make their files
    answered = _answer_cell("ex-multiclass-entropy")
    cells, points = {"answers collected": ([answered], _none_but("ex-multiclass-entropy")),
                     "interrupt ignored": ([answered, IGNORES_THE_INTERRUPT], _none_but()),
                     "kernel died": ([answered, "import os\nos._exit(0)"], _none_but())}[ending]
    before = _processes_below(os.getpid())
    result = _grade_cells(built, tmp_path, cells, cell_timeout=scaled(3))
    assert result.points == points, result.notes
    kernels_left = {pid: line for pid, line in _processes_below(os.getpid()).items()
                    if "ipykernel" in line and pid not in before}
    assert kernels_left == {}
    assert sorted(p.name for p in scratch.iterdir()) == []


@pytest.mark.skipif(not Path("/proc/self/stat").is_file(), reason="reads the process tree from /proc (Linux)")
def test_otter_run_past_its_time_limit_leaves_no_process_and_no_temporary_folder_behind(built, tmp_path,
                                                                                          monkeypatch):
    """The self-test's second grader, otter's own runner, stopped at NOTEBOOK_TIMEOUT_S. Before: only the otter
    process was killed; its temporary folder (a copy of the autograder, hidden tests included) stayed in $TMPDIR.
    Now otter runs in a process group of its own, which is killed, with its temporary files in the submission's
    folder, which its caller removes; its kernel ends with it."""
    monkeypatch.setattr(course, "NOTEBOOK_TIMEOUT_S", scaled(15))
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))                  # the $TMPDIR otter would inherit
    folder = tmp_path / "submission"
    folder.mkdir()
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("import time\nwhile True:\n    time.sleep(0.05)")])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, folder / f"{GRADED}.ipynb")
    before = _processes_below(os.getpid())
    with pytest.raises(subprocess.TimeoutExpired):
        course._otter_run(built / "autograder" / f"{GRADED}.zip", folder / f"{GRADED}.ipynb", Path(sys.executable),
                          folder)
    assert {pid: line for pid, line in _processes_below(os.getpid()).items() if pid not in before} == {}
    deadline = time.monotonic() + scaled(5)                      # an orphaned kernel notices its parent is gone
    while _processes_in(tmp_path) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _processes_in(tmp_path) == []
    assert sorted(p.name for p in scratch.iterdir()) == []
    # removed as its caller (self_test) removes it: otter's killed copy of the autograder, hidden tests included, is
    # in it, and a later test's planted cheat, which searches the folders above its own, would find it there
    shutil.rmtree(folder)


#: A submission that reads the hidden tests from disk (otter run copied them to tests/ beside it) and answers with
#: the values they hold: the self-test's planted cheat (calib_book.course._CHEAT_READ_CELL).
READ_HIDDEN_TESTS = course._CHEAT_READ_CELL


def test_a_submission_that_reads_the_hidden_tests_scores_nothing(built, tmp_path, monkeypatch):
    """Before: under otter run the hidden tests lay in tests/ beside the submission, and this one scored 11 of 15
    points without answering. Now they are never on disk where it runs. The control: given the files, the same cell
    does find the answers that score."""
    private = tmp_path / "tmp"                 # the cheat searches the folders above its own: $TMPDIR, here private
    private.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(private))
    result = _grade_cells(built, tmp_path, [READ_HIDDEN_TESTS])
    assert result.points == _none_but() and result.notes == ()
    tests = course._hidden_tests(built / "autograder" / f"{GRADED}.zip")
    control = tmp_path / "control"
    (control / "tests").mkdir(parents=True)
    for label, source in tests.items():
        (control / "tests" / f"{label}.py").write_text(source)
    monkeypatch.chdir(control)
    space = {}
    exec(READ_HIDDEN_TESTS, space)
    answers = {name: course._encode_answer(value) for name, value in space.items() if name.startswith("ex_")}
    graded = course._apply_hidden_tests(tests, answers, 60)["results"]
    assert sum(r["score"] for r in graded.values()) > 0         # the control: with the files, the cell finds answers


def _wrong_answer_cells() -> list[str]:
    """The work cells of GRADED's planted cheat-patch submission: every answer wrong, as plain values (the chapter's
    own code, which the answers do not need, is left out: it took 10 s a grading)."""
    nb, _ = course.planted_submission(ROOT, GRADED, "cheat-patch")
    work = re.compile(r"# Exercise \S+: your work here")
    cells = [c.source for c in nb.cells if c.cell_type == "code" and work.match(c.source)]
    assert len(cells) == len({p.label for p in course.key_parts_cached(GRADED)})
    return cells


#: A wrong submission that makes numpy.allclose and sympy.simplify say "equal", and makes otter's test runner pass
#: every case where otter is loaded in its kernel (otter run loads it there).
PATCH_THE_GRADER = '''import dataclasses, sys
import numpy as np, sympy
np.allclose = lambda *a, **k: True
sympy.simplify = lambda *a, **k: sympy.Integer(0)
if "otter" in sys.modules:
    import otter.test_files.exception_test as exception_test
    _run = exception_test.ExceptionTestFile.run
    def _passes(self, env):
        _run(self, env)
        self.test_case_results = [dataclasses.replace(r, passed=True) for r in self.test_case_results]
    exception_test.ExceptionTestFile.run = _passes
'''


def test_a_submission_that_patches_the_comparisons_and_the_runner_scores_nothing(built, tmp_path):
    """Before: under otter run the hidden tests ran in the submission's kernel, and this wrong submission scored 15
    of 15 points (10 with the comparisons patched alone). Now they run in another process, on its answers as
    data."""
    result = _grade_cells(built, tmp_path, _wrong_answer_cells() + [PATCH_THE_GRADER])
    assert result.points == _none_but() and result.notes == ()


#: A text answer that sympy's parser (sympify) runs as code: it patches the comparisons of the process it runs in.
PATCHING_TEXT = ('exec("import numpy, sympy; numpy.allclose = lambda *a, **k: True; '
                 'sympy.simplify = lambda *a, **k: 0") or p')


def test_a_text_answer_that_sympy_would_run_as_code_runs_only_in_the_submissions_kernel(built, tmp_path):
    """A symbolic part's hidden test sympifies the answer, and sympify runs a text as code: under otter run this
    wrong submission scored 5 of 15 points (the text patched the comparisons in its kernel, before the later tests),
    and 2 when the grader's process sympified text answers itself. The kernel now parses the text, and the grader
    reads the expression it got."""
    cells = _wrong_answer_cells() + [f"ex_entropy_bound['slope'] = {PATCHING_TEXT!r}"]
    result = _grade_cells(built, tmp_path, cells)
    assert result.points == _none_but() and result.notes == ()


def test_answers_reach_the_grader_as_data_that_runs_no_code(tmp_path):
    """The answers cross from the submission's kernel to the hidden tests' process as JSON: numbers, text, arrays
    and sympy trees come back equal; a node that is not a sympy class, a float that is not a number, an object array
    are refused; a type the encoder does not know arrives as unreadable, fails its test and gets a note."""
    g = sympy.Symbol("gamma", positive=True)
    x = sympy.Symbol("x")
    values = [0.25, 3, True, np.bool_(False), "Negative", None, ..., (0.1, 0.3), [1, [2.5, "a"]], {"k": 1.5},
              np.float64(0.5), np.int32(7), 1 + 2j, np.array([[1.0, 2.0]]), np.array([1, 2], dtype=np.int64),
              np.array([True]), np.array([1 + 1j]), sympy.exp(-g) / (1 + g), sympy.Rational(1, 3) * sympy.pi,
              sympy.Float("0.1", 30) * x, sympy.Piecewise((x, x > 0), (0, True)), sympy.oo, sympy.Matrix([[1, x]])]
    for value in values:
        back = course._decode_answer(json.loads(json.dumps(course._encode_answer(value))))
        expected = value.item() if isinstance(value, np.generic) else value      # a numpy scalar comes back plain
        assert isinstance(back, type(expected)) and (np.array_equal(back, value) if isinstance(value, np.ndarray)
                                                     else back == expected), value
        if isinstance(value, np.ndarray):
            assert back.dtype == value.dtype
    assert course._decode_answer(course._encode_answer(range(2))).what == "a builtins.range"
    # a text answer: sympy reads the expression the kernel parsed, never parses the text (its parser runs code)
    text = course._decode_answer(json.loads(json.dumps(course._encode_answer("exp(-p)/(1 + p)"))))
    q = sympy.Symbol("p")
    assert text == "exp(-p)/(1 + p)" and sympy.sympify(text) == sympy.exp(-q) / (1 + q)
    with pytest.raises(TypeError, match="not an expression"):
        sympy.sympify(course._decode_answer({"type": "str", "value": "__import__('os').getcwd()"}))
    for crafted in ({"type": "node", "value": "sympify", "args": [{"type": "integer", "value": 1}]},
                    {"type": "node", "value": "exp", "args": [{"type": "str", "value": "__import__('os')"}]},
                    {"type": "sympy-float", "value": "__import__('os').getcwd()", "precision": 53},
                    {"type": "array", "dtype": "O", "value": [1]}, {"type": "pickle", "value": "gASVAA=="}):
        with pytest.raises(ValueError):
            course._decode_answer(crafted)
    parts = [_part(0.5)]
    tests = {label: course.test_file(label, parts, hidden=True) for label in ("ex-x", "ex-y")}
    answers = {"ex_x": course._encode_answer({"answer": np.float64(0.5)}),
               "ex_y": course._encode_answer({"answer": range(2)})}
    graded = course._apply_hidden_tests(tests, answers, 60)
    assert graded["results"] == {"ex-x": {"score": 1.0, "possible": 1.0}, "ex-y": {"score": 0.0, "possible": 1.0}}
    assert graded["notes"] == ["ex_y['answer']: the grader cannot read a builtins.range; give a number, an array, a "
                               "string, True/False or a sympy expression"]


# --- the leak scan --------------------------------------------------------------------------------------------------

def _student_files(built: Path) -> list[Path]:
    return [p for p in (built / "student").rglob("*") if p.is_file()]


#: Needles that name the key's module rather than hold any of it: the site's guide for teaching assistants and the
#: scanner's own source name them, which gives nothing away.
KEY_NAMES = {"from calib_book.answers import", "import calib_book.answers", "EXERCISES["}


def _unknown(hits):
    return [h for h in hits if h.needle.kind != "value"
            or (h.needle.source, Path(h.file.split("!")[-1]).name) not in KNOWN_SELF_ANSWERS]


@pytest.fixture(scope="module")
def needles():
    found, counts = leaks.key_needles(ROOT)
    assert counts["values"] >= 60                        # the scan covers the key's numbers, not a handful
    return found


def test_the_scan_holds_every_module_of_the_key(needles):
    """The key is a package (issue 43, item 7): the scan's key needles come from each of its modules, the registry
    and every chapter's, not from one file."""
    key = ROOT / "book" / "calib_book" / "answers"
    modules = {f"answers/{p.relative_to(key).as_posix()}" for p in key.rglob("*.py")}
    assert len(modules) >= 14 and modules <= {n.source for n in needles if n.kind == "key"}


def test_no_student_file_and_no_wheel_holds_the_key(built, wheel, needles):
    hits, scanned = leaks.scan(_student_files(built) + [wheel], needles)
    assert scanned > 300
    assert _unknown(hits) == []
    known = {(h.needle.source, Path(h.file.split("!")[-1]).name) for h in hits if h.needle.kind == "value"}
    assert KNOWN_SELF_ANSWERS - known == set(), "no longer in the bundle: remove them from KNOWN_SELF_ANSWERS"


def test_the_leak_scan_finds_a_planted_leak(built, needles, tmp_path):
    part = next(p for p in course.key_parts_cached("09-reweighted-risk") if p.label == "ex-ch09-ifl")
    key_line = next(n.text for n in needles if n.kind == "key")
    solution_line = next(n.text for n in needles if n.kind == "solution")
    nb = nbformat.read(built / "student" / "09-reweighted-risk.ipynb", as_version=4)
    nb.cells.append(nbformat.v4.new_markdown_cell(f"The maximum is {float(part.value):.8g}."))
    nb.cells.append(nbformat.v4.new_code_cell(key_line + "\n" + solution_line))
    planted = tmp_path / "planted.ipynb"
    nbformat.write(nb, planted)
    clean, _ = leaks.scan([built / "student" / "09-reweighted-risk.ipynb"], needles)
    hits, _ = leaks.scan([planted], needles)
    assert {h.needle.kind for h in _unknown(hits)} == {"value", "key", "solution"}
    assert _unknown(clean) == []
    wheel_like = tmp_path / "leaky.whl"
    with zipfile.ZipFile(wheel_like, "w") as archive:
        archive.writestr("calib/leak.py", f"X = {float(part.value)!r}\n")
    assert {h.needle.source for h in leaks.scan([wheel_like], needles)[0]} == {f"ex-ch09-ifl {part.part}"}


def test_the_scan_finds_with_one_automaton_what_a_search_per_needle_finds():
    """Issue 30: the scan looks for its text needles with one Aho-Corasick automaton (pyahocorasick); it finds the
    needles, and their first places, that a search for each needle finds, overlapping ones and repeated ones too."""
    pytest.importorskip("ahocorasick")
    needles = [leaks.Needle("key", "return _stored_focal_scores(gamma, temperature)", "answers.py"),
               leaks.Needle("key", "_stored_focal_scores(gamma", "answers.py"),                # inside the first
               leaks.Needle("solution", "fitted = fit_posthoc(name, z_val, y_val, loss=loss)", "10-benchmark"),
               leaks.Needle("key", "EXERCISES[", "answers.py"),
               leaks.Needle("key", "never in the text at all, forty characters", "answers.py"),
               *(leaks.Needle("value", text, "ex-x answer", how) for text, how in
                 leaks.number_forms(0.123456789, 4).items())]
    text = ("x = EXERCISES['a']\n    return _stored_focal_scores(gamma, temperature)\nEXERCISES[\n"
            "fitted = fit_posthoc(name, z_val, y_val, loss=loss) and 0.1234568 and 0.12345")
    matcher = leaks._Matcher(needles, leaks.MIN_DIGITS)
    assert matcher.automaton is not None
    fast = leaks.scan_text("t", text, needles, matcher=matcher)
    matcher.automaton = None                                   # the search per needle (no pyahocorasick)
    slow = leaks.scan_text("t", text, needles, matcher=matcher)
    assert sorted(fast, key=repr) == sorted(slow, key=repr)
    assert {(h.needle.text, text.find(h.needle.text)) for h in fast if h.needle.kind != "value"} == {
        (n.text, text.find(n.text)) for n in needles[:4]}
    # 0.1234568 rounded, and its start 0.123456 truncated; 0.12345 is neither (5 digits, and not the rounding)
    assert {h.needle.text for h in fast if h.needle.kind == "value"} == {"0.1234568", "0.123456"}


# --- the locator ----------------------------------------------------------------------------------------------------

def test_book_file_from_the_repository_a_chapter_folder_and_the_bundle(built, monkeypatch, tmp_path):
    monkeypatch.delenv(paths.ROOT_VARIABLE, raising=False)
    monkeypatch.chdir(ROOT / "chapters")
    assert paths.book_file("book/results/10-benchmark") == ROOT / "book" / "results" / "10-benchmark"
    monkeypatch.chdir(built / "student")
    assert paths.book_root() == built / "student"
    assert paths.book_file("book/results/10-benchmark/posthoc.json").is_file()
    monkeypatch.setenv(paths.ROOT_VARIABLE, str(built / "student"))
    monkeypatch.chdir(tmp_path)
    assert paths.book_root() == built / "student"
    with pytest.raises(FileNotFoundError, match="book/results/nothing is not in the book"):
        paths.book_file("book/results/nothing")
    monkeypatch.setenv(paths.ROOT_VARIABLE, str(tmp_path / "missing"))
    with pytest.raises(FileNotFoundError, match="CALIB_BOOK_ROOT"):
        paths.book_root()
    with pytest.raises(ValueError, match="inside the repository"):
        paths.book_file("/etc/passwd")


# --- the hosted-notebook buttons ------------------------------------------------------------------------------------

def _launch_buttons(config: dict) -> list[dict]:
    """The launch buttons sphinx-book-theme renders for chapter 01 under ``config`` (a _config.yml as a dict)."""
    from types import SimpleNamespace

    from jupyter_book.config import get_final_config
    from sphinx_book_theme.header_buttons.launch import add_launch_buttons

    final, _ = get_final_config(user_yaml=config, cli_config={"latex_individualpages": False}, sourcedir=ROOT)
    theme = final["html_theme_options"]
    page = "chapters/01-measuring-calibration"
    app = SimpleNamespace(config={"html_theme_options": theme},
                          env=SimpleNamespace(doc2path=lambda name: ROOT / "_build" / "src" / f"{name}.ipynb",
                                              metadata={page: {"kernelspec": {"name": "python3"}}}))
    url = theme["repository_url"]
    context = {"pagename": page, "sourcename": f"{page}.ipynb", "header_buttons": [],
               "github_url": "https://github.com",
               "github_user": url.split("/")[-2] if url else "", "github_repo": url.split("/")[-1] if url else ""}
    if not url:
        del context["github_url"]
    add_launch_buttons(app, page, "page.html", context, None)
    sys.path.insert(0, str(ROOT / "book" / "_ext"))
    try:
        from launch_sources import retarget_launch_buttons
    finally:
        sys.path.remove(str(ROOT / "book" / "_ext"))
    retarget_launch_buttons(app, page, "page.html", context, None)
    return [button for group in context["header_buttons"] for button in group.get("buttons", [])]


def test_launch_buttons_are_off_until_the_repository_has_an_address_and_link_the_chapter_when_on():
    import yaml

    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    assert config["repository"]["url"] == "" and _launch_buttons(config) == []
    config["repository"]["url"] = "https://github.com/owner/calib"
    config["launch_buttons"].update(binderhub_url="https://mybinder.org", colab_url="https://colab.research.google.com")
    urls = sorted(button["url"] for button in _launch_buttons(config))
    # the chapter the repository holds (the theme linked the build's chapters/NN.ipynb, which git ignores); Colab,
    # which opens only .ipynb files, is not offered
    source = "chapters/01-measuring-calibration.md"
    assert (ROOT / source).is_file() and "chapters/*.ipynb" in (ROOT / ".gitignore").read_text()
    assert urls == [f"https://mybinder.org/v2/gh/owner/calib/main?urlpath=lab/tree/{source}"]
    # Binder installs environment.yml (jupytext in it) and runs postBuild: calib, and .md opened as a notebook
    assert "jupytext" in (ROOT / "environment.yml").read_text()
    post_build = (ROOT / "postBuild").read_text()
    assert "pip install --no-deps -e ." in post_build and "jupytext-config set-default-viewer markdown" in post_build


# --- parts with several valid answers: the same rule in check, the public and the hidden tests ----------------------

def _entropy_above_one(answer):
    import numpy as np

    p = np.asarray(answer, dtype=float)
    return p.ndim == 1 and bool(np.all(p >= 0)) and abs(p.sum() - 1) < 1e-9 and -(p[p > 0] * np.log(p[p > 0])).sum() > 1


def _rule_parts():
    from calib_book.answers import construction, interval_claim

    bound = Expected(lambda: 1.0, rtol=5e-3, atol=0, accept="any-of", alternatives=lambda: [0.25], accepts="either")
    interval = interval_claim(lambda: (0.10, 0.30), hint="seed noise")
    example = construction(_entropy_above_one, lambda: [0.25, 0.25, 0.25, 0.25], accepts="any such p", hint="entropy")
    return [course.KeyPart("00-x", "ex-rules", name, spec, spec.compute())
            for name, spec in (("bound", bound), ("interval", interval), ("example", example))]


def _run_test_file(path, answers):
    from otter.test_files import ExceptionTestFile

    test = ExceptionTestFile.from_file(str(path))
    test.run({course.answer_variable("ex-rules"): answers})
    return {case.test_case.name: case.passed for case in test.test_case_results}


@pytest.mark.parametrize("hidden", [False, True])
def test_parts_with_several_valid_answers_are_graded_by_their_rule_in_the_course_tests(tmp_path, hidden):
    """Issue 27, item 3: an alternative value, an interval within seed noise and a construction are graded by the
    autograder (before: left out of it and graded by hand with check); the public test of an interval checks only
    its form and holds no value of the key's interval."""
    parts = _rule_parts()
    source = course.test_file("ex-rules", parts, hidden=hidden)
    path = tmp_path / "ex-rules.py"
    path.write_text(source)
    assert "0.1" not in source.split("HIDDEN =")[0].split("# --- the tests of exercise")[1]   # no public value
    # the interval of the runs a question fixes, each end within half a unit of the 3rd digit of its width (0.0005)
    right = [dict(bound=1.0, interval=(0.1002, 0.2998), example=[0.5, 0.25, 0.25]),
             dict(bound=0.2501, interval=(0.0998, 0.3004), example=[0.3, 0.3, 0.4])]
    for answers in right:
        assert all(_run_test_file(path, answers).values()), answers
    wrong = dict(bound=0.5, interval=(0.5, 0.7), example=[0.9, 0.1])
    verdicts = _run_test_file(path, wrong)
    # the public test of an interval grades it as the hidden one does, through the digest of its band (no value)
    assert not verdicts["ex-rules bound"] and not verdicts["ex-rules example"] and not verdicts["ex-rules interval"]
    if hidden:
        graded = {name.removesuffix(" (graded)"): ok for name, ok in verdicts.items() if name.endswith("(graded)")}
        assert graded == {"ex-rules bound": False, "ex-rules interval": False, "ex-rules example": False}
    malformed = _run_test_file(path, dict(bound=1.0, interval=(0.3, 0.1), example="abc"))
    assert not malformed["ex-rules interval"]
    assert not malformed["ex-rules example"]


def test_check_applies_the_same_rules_as_the_course_tests():
    from calib_book import exercises

    parts = {p.part: p.spec for p in _rule_parts()}
    exercises.EXERCISES["ex-rules"] = exercises.Exercise("ex-rules", "00-x", parts)
    try:
        grade = lambda **kw: {p.part: p.verdict for p in exercises.check("ex-rules", quiet=True, **kw).parts}  # noqa
        assert grade(bound=0.25, interval=(0.1002, 0.2998), example=[0.3, 0.3, 0.4]) == dict.fromkeys(parts, "right")
        assert grade(interval=(0.12, 0.31))["interval"] == "wrong"           # within seed noise is no longer enough
        assert grade(bound=0.5, interval=(0.5, 0.7), example=[0.9, 0.1]) == dict.fromkeys(parts, "wrong")
        assert grade(interval="(0.1, 0.3)", example=None) == dict(interval="wrong", example="wrong")
    finally:
        exercises.EXERCISES.pop("ex-rules")
        for name in parts:
            exercises._CACHE.pop(("ex-rules", name), None)


def test_a_construction_needs_a_def_whose_source_the_test_files_carry():
    from calib_book.answers import construction

    part = course.KeyPart("00-x", "ex-rules", "example",
                          construction(lambda p: True, lambda: [1.0], accepts="any", hint="h"), [1.0])
    with pytest.raises(ValueError, match="def function"):
        course.test_file("ex-rules", [part], hidden=False)
    with pytest.raises(ValueError, match="alternatives= goes with accept='any-of'"):
        Expected(lambda: 1.0, alternatives=lambda: [2.0])
    with pytest.raises(ValueError, match="accept='between'"):
        Expected(lambda: 1.0, accept="between")


def test_a_whole_expected_value_with_a_tight_tolerance_is_not_graded_as_a_count():
    """A value that happens to be whole (1.0 to six digits) was graded as a count, to the nearest unit: 0.5 and 1.4
    passed its public test. Only a count (a tolerance of half a unit) is graded to the whole number."""
    spec = course.public_spec(_part(1.0, rtol=1e-6, atol=0))
    assert course_check.public_verdict(1.0, spec) and course_check.public_verdict(1.0 + 4e-7, spec)
    assert not course_check.public_verdict(0.5, spec) and not course_check.public_verdict(1.4, spec)
    count = course.public_spec(_part(7.0, rtol=0, atol=0.5))
    assert course_check.public_verdict(7, count) and not course_check.public_verdict(7.6, count)


def test_retargeting_the_launch_buttons_leaves_other_header_buttons_alone():
    """The build failed on every page ("macro 'render_js_button' takes no keyword argument 'url'") when the launch
    extension gave a JS button (full screen) a url."""
    sys.path.insert(0, str(ROOT / "book" / "_ext"))
    try:
        from launch_sources import retarget_launch_buttons
    finally:
        sys.path.remove(str(ROOT / "book" / "_ext"))
    page = "chapters/01-measuring-calibration"
    full_screen = {"type": "javascript", "javascript": "toggleFullScreen()", "tooltip": "Fullscreen mode"}
    download = {"type": "group", "buttons": [{"type": "link", "url": f"../_sources/{page}.ipynb", "label": ".ipynb"}]}
    launch = {"type": "group", "buttons": [
        {"type": "link", "url": f"https://mybinder.org/v2/gh/o/r/main?urlpath=lab/tree/{page}.ipynb"},
        {"type": "link", "url": f"https://colab.research.google.com/github/o/r/blob/main/{page}.ipynb"}]}
    only_colab = {"type": "group", "buttons": [{"type": "link", "url": "https://colab.research.google.com/x.ipynb"}]}
    context = {"header_buttons": [full_screen, download, launch, only_colab]}
    retarget_launch_buttons(None, page, "page.html", context, None)
    assert context["header_buttons"][0] == full_screen and "url" not in full_screen
    # the download of the page's own notebook keeps its .ipynb (the browser check found ../_sources/...md missing)
    assert context["header_buttons"][1]["buttons"] == [{"type": "link", "url": f"../_sources/{page}.ipynb",
                                                        "label": ".ipynb"}]
    assert context["header_buttons"][2]["buttons"] == [
        {"type": "link", "url": f"https://mybinder.org/v2/gh/o/r/main?urlpath=lab/tree/{page}.md"}]
    assert len(context["header_buttons"]) == 3          # the group left empty is dropped
