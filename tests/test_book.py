"""The runner (calib_book.runner) on a tiny book made by the test: parameters, ledger, timings, and failures that name
the cell. The pages it writes are tested in test_pages.py, the chapter helpers in test_notebook.py."""

import json
import re
import shutil
import textwrap
from pathlib import Path

import pytest

from calib_book import claims, runner
from calib_book.timeouts import scaled  # a subprocess's time limit, scaled by the machine's load

HEADER = textwrap.dedent("""\
    ---
    jupytext:
      text_representation:
        extension: .md
        format_name: myst
        format_version: 0.13
    kernelspec:
      display_name: Python 3
      language: python
      name: python3
    ---
    """)


def _chapter(body: str) -> str:
    return HEADER + textwrap.dedent("""
        # A chapter

        ```{code-cell} ipython3
        :tags: [parameters]
        profile = "quick"
        device = "auto"
        seed = 0
        ```
        """) + textwrap.dedent(body)


@pytest.fixture
def tiny_book(tmp_path):
    (tmp_path / "calib").mkdir()
    (tmp_path / "book").mkdir()
    (tmp_path / "chapters").mkdir()
    (tmp_path / "_config.yml").write_text("title: tiny\n")
    (tmp_path / "_toc.yml").write_text(textwrap.dedent("""\
        format: jb-book
        root: book/intro
        chapters:
          - file: chapters/01-good
          - file: chapters/02-bad
        """))
    (tmp_path / "book" / "intro.md").write_text("# Intro\n")
    (tmp_path / "chapters" / "01-good.md").write_text(_chapter("""
        ```{code-cell} ipython3
        from calib_book.claims import claim
        claim("paper/seed", "the seed parameter arrives", passed=seed == 7, evidence=f"seed={seed}, profile={profile}")
        ```
        """))
    (tmp_path / "chapters" / "02-bad.md").write_text(_chapter("""
        ```{code-cell} ipython3
        x = 1
        ```

        ```{code-cell} ipython3
        from calib_book.claims import claim
        claim("paper/false", "one is two", passed=x == 2, evidence=f"x={x}")
        ```
        """))
    return tmp_path


def test_toc_order(tiny_book):
    assert runner.chapters_in_toc(tiny_book) == ["01-good", "02-bad"]


def test_run_injects_parameters_records_claims_and_names_the_failing_cell(tiny_book):
    with pytest.raises(runner.ChapterError) as info:
        runner.run_book(tiny_book, only=None, parameters={"seed": 7}, keep_going=True)
    message = str(info.value)
    assert "chapter 02-bad failed in cell" in message and "ClaimError" in message and "paper/false" in message
    executed = tiny_book / "_build" / "src" / "chapters" / "01-good.ipynb"
    nb = json.loads(executed.read_text())
    assert any("injected-parameters" in c["metadata"].get("tags", []) for c in nb["cells"])
    # the failed chapter's notebook is written once, at the end, up to the failing cell and with its error
    failed = json.loads((executed.parent / "02-bad.ipynb").read_text())
    assert [o["ename"] for c in failed["cells"] for o in c.get("outputs", []) if o["output_type"] == "error"] \
        == ["ClaimError"]
    lines = [json.loads(line) for line in (tiny_book / "_build" / "claims.jsonl").read_text().splitlines()]
    # a chapter that fails leaves the ledger as it was: only the successful chapter's record is there
    assert [(r["id"], r["chapter"], r["passed"]) for r in lines] == [("paper/seed", "01-good", True)]
    assert "seed=7, profile=quick" in lines[0]["evidence"]
    timings = json.loads((tiny_book / "_build" / "timings.json").read_text())
    assert timings["01-good"]["ok"] and not timings["02-bad"]["ok"] and timings["02-bad"]["claims"] == 1
    assert not list((tiny_book / "_build").glob("claims.*.running.jsonl"))
    # a failed chapter is never reused: only the successful one has a cache entry
    assert sorted(p.name for p in (tiny_book / "_build" / "cache").iterdir()) == ["01-good.claims.jsonl",
                                                                                  "01-good.json"]


def test_a_failing_run_keeps_the_last_successful_records_and_the_build_names_it(tiny_book):
    with pytest.raises(runner.ChapterError, match="02-bad"):
        runner.run_book(tiny_book, parameters={"seed": 7}, keep_going=True)
    ledger = tiny_book / "_build" / "claims.jsonl"
    before = ledger.read_text()
    assert "paper/seed" in before
    with pytest.raises(runner.ChapterError, match="last successful run"):
        runner.run_book(tiny_book, only=["01-good"], parameters={"seed": 8})     # its claim now fails
    assert ledger.read_text() == before
    with pytest.raises(runner.ChapterError, match="chapters 01-good, 02-bad have no successful run"):
        runner.build_book(tiny_book)


def test_parameters_are_checked_against_the_parameters_cell(tiny_book):
    assert runner.chapter_parameters(tiny_book / "chapters" / "01-good.md") == {"profile": "quick", "device": "auto",
                                                                               "seed": 0}
    with pytest.raises(ValueError, match="no parameter 'nosuchparam'; it accepts: profile .*seed"):
        runner.run_chapter(tiny_book, "01-good", parameters={"nosuchparam": 1})
    with pytest.raises(ValueError, match="no chapter run here declares it"):
        runner.run_book(tiny_book, parameters={"nosuchparam": 1})
    with pytest.raises(ValueError, match="seed='abc' is a str, but its default 0 is a int"):
        runner.run_book(tiny_book, only=["01-good"], parameters={"seed": "abc"})
    with pytest.raises(ValueError, match="profile='nonsense' is not supported"):
        runner.run_book(tiny_book, only=["01-good"], parameters={"profile": "nonsense"})
    assert not (tiny_book / "_build" / "claims.jsonl").exists()          # nothing ran


def test_rerunning_one_chapter_replaces_only_its_records(tiny_book):
    runner.run_book(tiny_book, only=["01-good"], parameters={"seed": 7})
    runner.run_book(tiny_book, only=["01-good"], parameters={"seed": 7}, force=True)
    lines = (tiny_book / "_build" / "claims.jsonl").read_text().splitlines()
    assert len(lines) == 1


def test_unknown_chapter_and_profile_are_errors(tiny_book):
    with pytest.raises(ValueError, match="not a chapter"):
        runner.run_book(tiny_book, only=["03-missing"])
    with pytest.raises(ValueError, match="profile"):
        runner.run_chapter(tiny_book, "01-good", profile="huge")


def test_build_refuses_unexecuted_chapters(tiny_book):
    with pytest.raises(runner.ChapterError, match="not executed yet"):
        runner.build_book(tiny_book)


def test_the_runner_finds_the_repository_root():
    """The runner re-exports the repository root from the ledger's module."""
    assert runner.repo_root is claims.repo_root
    assert runner.repo_root(__file__) == claims.find_repo_root(__file__)
    assert (runner.repo_root(__file__) / "_toc.yml").is_file()


def test_repo_root_of_a_tiny_book_and_its_absence(tiny_book, tmp_path_factory):
    assert runner.repo_root(tiny_book / "chapters") == tiny_book.resolve()
    outside = tmp_path_factory.mktemp("elsewhere")
    assert claims.find_repo_root(outside) is None


def test_the_command_line_ends_every_user_error_in_one_line(tiny_book, monkeypatch, capsys):
    """-p values checked against the parameters cell, and a folder the runner cannot write, end in one
    `calib: error:` line naming the parameter or the file (exit 1), not a traceback."""
    from calib import cli

    monkeypatch.chdir(tiny_book)
    for argv, message in ((["-p", "seed", "abc"], "parameter seed='abc' is a str"),
                          (["-p", "nosuchparam", "1"], "-p nosuchparam: no chapter run here declares it"),
                          (["-p", "profile", "nonsense"], "profile='nonsense' is not supported")):
        assert cli.main(["book", "run", "--only", "01-good", *argv]) == 1
        err = capsys.readouterr().err
        assert err.startswith("calib: error:") and message in err and err.count("\n") == 1, err

    def read_only(*args, **kwargs):
        raise PermissionError(13, "Permission denied", str(tiny_book / "_build" / "src"))

    monkeypatch.setattr(runner, "build_book", read_only)
    assert cli.main(["book", "build"]) == 1
    assert capsys.readouterr().err == f"calib: error: {tiny_book / '_build' / 'src'}: Permission denied\n"


def test_book_check_needs_a_built_book_and_reports_each_page(tiny_book, monkeypatch, capsys):
    """`calib book check` ends in one error line without a build, and otherwise prints a line per page and
    exits 1 when any page has a problem (calib_book.browser's checks are tested in tests/test_browser.py)."""
    from calib import cli
    from calib_book import browser

    monkeypatch.chdir(tiny_book)
    assert cli.main(["book", "check"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("calib: error:") and "no built book" in err and err.count("\n") == 1, err
    assert cli.main(["book", "check", "--workers", "0"]) == 1
    assert "workers=0" in capsys.readouterr().err

    reports = [browser.PageReport("book/intro.html", formulas=3, links=2),
               browser.PageReport("chapters/01-good.html", images=1, problems=["image x.png has no alt text"])]
    monkeypatch.setattr(browser, "check_book", lambda html, workers: reports)
    assert cli.main(["book", "check"]) == 1
    out = capsys.readouterr().out
    assert "book/intro.html" in out and "problem: image x.png has no alt text" in out and "1 with problems" in out
    reports.pop()
    assert cli.main(["book", "check"]) == 0
    assert "every page reads well" in capsys.readouterr().out


def test_strip_solutions_removes_every_form_of_solution_and_keeps_the_rest():
    import nbformat

    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("## Exercises\n\n```{exercise} One\n:label: ex-one\n\nShow it.\n```\n\n"
                                      "```{solution-start} ex-one\n:class: dropdown\n```\n\nIt follows from A."),
        nbformat.v4.new_code_cell("answer = 42  # inside the solution"),
        nbformat.v4.new_markdown_cell("So 42.\n\n```{solution-end}\n```\n\n```{exercise} Two\n:label: ex-two\n\n"
                                      "Compute it.\n```\n\n````{solution} ex-two\n:class: dropdown\n\n"
                                      "```python\nx = 1\n```\n"
                                      "Secret text.\n````\n\nAfter it."),
        nbformat.v4.new_code_cell("starter = None  # students fill this in"),
    ])
    out = runner.strip_solutions(nb)
    text = "\n".join(c.source for c in out.cells)
    assert "42" not in text and "Secret" not in text and "It follows" not in text and "solution" not in text
    assert "Show it." in text and "Compute it." in text and "After it." in text and "starter" in text
    assert [c.cell_type for c in out.cells] == ["markdown", "markdown", "code"]
    broken = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("```{solution-start} ex\n```\nopen")])
    with pytest.raises(ValueError, match="no {solution-end}"):
        runner.strip_solutions(broken)


def test_student_notebooks_get_a_cell_to_work_in_after_each_exercise():
    import nbformat

    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("```{exercise} Threshold\n:label: ex-g-gamma-one\n\nShow it.\n```\n\n"
                                      "```{exercise} Other\n:label: ex-no-check\n\nExplain.\n```"),
        nbformat.v4.new_code_cell("x = 1")])
    out = runner.add_starter_cells(nb)
    assert [c.cell_type for c in out.cells] == ["markdown", "code", "code", "code"]
    first, second = out.cells[1].source, out.cells[2].source
    assert "check('ex-g-gamma-one', half=..., maximum=..., excess=...)" in first
    assert "ex-no-check" in second and "check(" not in second


REPO = Path(__file__).resolve().parents[1]


def _slow_book(root, seconds: float):
    """A one-chapter book whose chapter records two claims, writes its kernel's pid to ``started``, then sleeps."""
    (root / "calib").mkdir(parents=True)
    (root / "book").mkdir()
    (root / "chapters").mkdir()
    (root / "_config.yml").write_text("title: tiny\n")
    (root / "_toc.yml").write_text("format: jb-book\nroot: book/intro\nchapters:\n  - file: chapters/01-slow\n")
    (root / "book" / "intro.md").write_text("# Intro\n")
    (root / "chapters" / "01-slow.md").write_text(_chapter(f"""
        ```{{code-cell}} ipython3
        import os, pathlib, time
        from calib_book.claims import claim
        claim("paper/one", "one", passed=True, evidence="1")
        claim("paper/two", "two", passed=True, evidence="2")
        pathlib.Path("started").write_text(str(os.getpid()))
        time.sleep({seconds})
        ```
        """))
    return root


def _calib_book(root, *argv):
    """``python -m calib book ...`` in ``root`` as its own process, with Ctrl-C's default handling (a shell that
    starts jobs in the background would have it ignored)."""
    import os
    import signal
    import subprocess
    import sys

    env = {**os.environ, "PYTHONPATH": os.pathsep.join((str(REPO), str(REPO / "book")))}
    return subprocess.Popen([sys.executable, "-m", "calib", "book", *argv], cwd=root, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def _wait_for(path, timeout=None):
    import time

    timeout = scaled(120) if timeout is None else timeout
    deadline = time.monotonic() + timeout
    while not (path.is_file() and path.read_text()):
        assert time.monotonic() < deadline, f"{path} did not appear within {timeout} s"
        time.sleep(0.1)
    return path.read_text()


def test_a_second_run_on_the_same_build_folder_is_refused_at_once_naming_the_first(tmp_path):
    """Issue 24, item 1: two `calib book run --only` on one _build/ both exited 0 and the ledger kept part of the
    claims. Now the second process is refused within seconds, naming the first; the first keeps every claim."""
    import time

    root = _slow_book(tmp_path / "book", seconds=6)
    first = _calib_book(root, "run", "--only", "01-slow")
    holder = _wait_for(root / "_build" / runner.BuildLock.NAME)
    start = time.monotonic()
    second = _calib_book(root, "run", "--only", "01-slow")
    out, err = second.communicate(timeout=scaled(60))
    refused_after = time.monotonic() - start
    assert second.returncode == 1, (out, err)
    assert err.startswith("calib: error:") and "in use by another calib book run or build" in err, err
    assert f"pid {first.pid}" in holder and f"pid {first.pid}" in err and err.count("\n") == 1, err
    assert first.poll() is None and refused_after < 30      # refused while the first still runs
    assert first.wait(timeout=scaled(120)) == 0, first.communicate()
    ledger = [json.loads(line) for line in (root / "_build" / "claims.jsonl").read_text().splitlines()]
    assert sorted(r["id"] for r in ledger) == ["paper/one", "paper/two"]
    build = _calib_book(root, "build")                        # a build waits for nobody: the run is over
    assert "in use" not in build.communicate(timeout=scaled(120))[1]


def test_ctrl_c_to_the_runner_alone_ends_in_one_line_and_exit_130(tmp_path):
    """Issue 24, item 16: SIGINT to the `calib book run` process (not its kernel) printed the kernel's 18-line
    ZMQError traceback. Now: exit 130, one line; the kernel is gone, the chapter is marked not run and no
    temporary ledger is left."""
    import os
    import signal
    import time

    root = _slow_book(tmp_path / "book", seconds=60)
    run = _calib_book(root, "run", "--only", "01-slow")
    kernel = int(_wait_for(root / "started"))
    run.send_signal(signal.SIGINT)
    out, err = run.communicate(timeout=scaled(60))
    assert run.returncode == 130, (out, err)
    assert err.startswith("calib: interrupted;") and err.count("\n") == 1, err
    assert "Traceback" not in err + out and "ZMQError" not in err
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:                      # the kernel was shut down with its runner
        try:
            os.kill(kernel, 0)
        except ProcessLookupError:
            break
        time.sleep(0.2)
    else:
        raise AssertionError(f"the kernel {kernel} outlived its runner")
    assert not json.loads((root / "_build" / "timings.json").read_text())["01-slow"]["ok"]
    assert not list((root / "_build").glob("claims.*.running.jsonl"))
    assert not (root / "_build" / "claims.jsonl").exists()
    assert not (root / "_build" / "src" / "chapters" / "01-slow.ipynb").exists()     # no half-executed notebook


def test_a_parameter_out_of_range_is_refused_before_any_chapter_runs(tiny_book, monkeypatch, capsys):
    """Issue 24, item 25: `-p seed 99999999999999999999999` passed the check and overflowed inside the chapter.
    Now the range is checked with the type, before anything runs."""
    from calib import cli

    monkeypatch.chdir(tiny_book)
    assert cli.main(["book", "run", "-p", "seed", "99999999999999999999999"]) == 1
    err = capsys.readouterr().err
    assert err == ("calib: error: chapter 01-good: parameter seed=99999999999999999999999 is out of range: it takes "
                   "0 <= seed <= 2147483647 (numpy's RandomState (the data splits) takes seeds 0 to 2**32 - 1, and "
                   "the chapters add offsets to the seed); pass a value in that range (-p seed VALUE).\n")
    assert cli.main(["book", "run", "-p", "seed", "-1"]) == 1
    assert "seed=-1 is out of range" in capsys.readouterr().err
    assert not (tiny_book / "_build" / "claims.jsonl").exists() and not (tiny_book / "_build" / "src").exists()
    declared = {"profile": "quick", "seed": 0, "noise": 0.1, "half_side": 2.0, "epochs": 3}
    for given, message in (({"noise": 0.5}, "noise=0.5 is out of range: it takes 0 <= noise < 0.5"),
                           ({"half_side": 0.0}, "half_side=0.0 is out of range: it takes 0 < half_side"),
                           ({"noise": float("nan")}, "noise=nan is not a finite number"),
                           ({"epochs": 2**63}, "epochs=9223372036854775808 is out of range: it takes "
                                               "-9223372036854775808 <= epochs <= 9223372036854775807")):
        with pytest.raises(ValueError, match=re.escape(message)):
            runner.check_parameters("04-x", declared, given)
    runner.check_parameters("04-x", declared, {"seed": 2**31 - 1, "noise": 0.0, "half_side": 1e-9, "epochs": -5})


def test_calib_book_outside_a_checkout_says_where_to_run_it(tmp_path, monkeypatch, capsys):
    from calib import cli

    monkeypatch.chdir(tmp_path)
    assert cli.main(["book", "build"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("calib: error: `calib book` runs in a checkout of the book's repository") and \
        str(tmp_path.resolve()) in err and err.count("\n") == 1, err


def _key(book, name="01-good", **parameters):
    return runner.chapter_key(book, name, {"profile": "quick", "seed": 0, **parameters})[0]


def test_a_chapter_key_changes_with_its_source_parameters_library_and_results_and_nothing_else(tiny_book, tmp_path,
                                                                                             monkeypatch):
    """Issue 30, item 1: the key of 01-good changes when its source, a parameter, a file of calib/ or of
    calib_book/, or the stored results it reads change; not with another chapter, the book's pages, the config, a
    modification time, _build/ or another chapter's results. Each change is undone before the next."""
    import os

    from calib_book import cache

    base = _key(tiny_book)
    assert base == _key(tiny_book) and len(base) == 64
    source = tiny_book / "chapters" / "01-good.md"
    text = source.read_text()

    def changes(edit, undo) -> bool:
        edit()
        try:
            return _key(tiny_book) != base
        finally:
            undo()
            assert _key(tiny_book) == base

    assert changes(lambda: source.write_text(text + "\nA new paragraph.\n"), lambda: source.write_text(text))
    library = tiny_book / "calib" / "metrics.py"
    assert changes(lambda: library.write_text("X = 1\n"), library.unlink)
    results = tiny_book / "book" / "results" / "01-good"
    assert changes(lambda: (results.mkdir(parents=True), (results / "run.json").write_text("{}")),
                   lambda: shutil.rmtree(results))
    data = tiny_book / "book" / "data" / "published" / "p.csv"
    assert changes(lambda: (data.parent.mkdir(parents=True), data.write_text("a,b\n")),
                   lambda: shutil.rmtree(data.parent.parent))
    assert _key(tiny_book, seed=1) != base and _key(tiny_book, profile="full") != base
    assert runner.chapter_key(tiny_book, "01-good", {"profile": "quick", "seed": 0}, strict=False)[0] != base
    machinery = tmp_path / "machinery"                                   # the folder of calib_book
    (machinery / "calib_book").mkdir(parents=True)
    (machinery / "calib_book" / "claims.py").write_text("")
    monkeypatch.setattr(cache, "package_folder", lambda: machinery / "calib_book")
    base = _key(tiny_book)
    assert changes(lambda: (machinery / "calib_book" / "claims.py").write_text("# edited\n"),
                   lambda: (machinery / "calib_book" / "claims.py").write_text(""))

    other = tiny_book / "chapters" / "02-bad.md"
    os.utime(source, (1, 1))                                             # a modification time alone
    other.write_text(other.read_text() + "\nEdited.\n")                 # another chapter
    (tiny_book / "book" / "intro.md").write_text("# Another intro\n")    # a page of the book
    (tiny_book / "_config.yml").write_text("title: renamed\n")
    (tiny_book / "book" / "results" / "02-bad").mkdir(parents=True)     # another chapter's results
    (tiny_book / "book" / "results" / "02-bad" / "run.json").write_text("{}")
    (tiny_book / "_build" / "cache").mkdir(parents=True)                # the build folder
    (tiny_book / "calib" / "__pycache__").mkdir()                       # bytecode
    (tiny_book / "calib" / "__pycache__" / "metrics.cpython-311.pyc").write_bytes(b"\0")
    assert _key(tiny_book) == base
    # ... unless the chapter names that folder: then it reads it
    source.write_text(text + "\nIt reads `book/results/02-bad/run.json`.\n")
    named = _key(tiny_book)
    (tiny_book / "book" / "results" / "02-bad" / "run.json").write_text('{"changed": 1}')
    assert _key(tiny_book) != named
    assert runner.chapter_inputs(tiny_book, "01-good") == [Path("book/data/published"),
                                                           Path("book/results/01-good"), Path("book/results/02-bad")]
    # the papers' tables are an input; the coverage table (read by the coverage page, not by a chapter) is not
    current = _key(tiny_book)
    (tiny_book / "book" / "data" / "coverage").mkdir(parents=True)
    (tiny_book / "book" / "data" / "coverage" / "p.csv").write_text("paper,item\n")
    assert _key(tiny_book) == current
    (tiny_book / "book" / "data" / "published").mkdir(parents=True, exist_ok=True)
    (tiny_book / "book" / "data" / "published" / "p.csv").write_text("paper,value\n")
    assert _key(tiny_book) != current


def test_a_quick_kernel_runs_one_thread_unless_the_environment_says_otherwise_and_the_key_holds_the_count(
        tiny_book, monkeypatch):
    """Issue 30: the quick profile's kernels get one thread (calib_book.cache.kernel_environment); the full profile
    keeps the libraries' defaults; a count the environment sets is kept; the count is part of the chapter's key."""
    from calib_book import cache

    for name in cache.THREAD_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    assert {k: v for k, v in cache.kernel_environment("quick").items() if k in cache.THREAD_VARIABLES} == \
        dict.fromkeys(cache.THREAD_VARIABLES, "1")
    assert not set(cache.kernel_environment("full")) & set(cache.THREAD_VARIABLES)
    assert cache.kernel_environment("quick", {"OMP_NUM_THREADS": "4"}).get("OMP_NUM_THREADS") is None
    base = _key(tiny_book)
    monkeypatch.setenv("OMP_NUM_THREADS", "4")
    assert _key(tiny_book) != base
    monkeypatch.delenv("OMP_NUM_THREADS")
    assert _key(tiny_book) == base
    # what the kernel itself sees
    (tiny_book / "chapters" / "01-good.md").write_text(_chapter("""
        ```{code-cell} ipython3
        import os
        from calib_book.claims import claim
        seen = {k: os.environ.get(k) for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")}
        claim("paper/threads", "one thread a kernel in the quick profile", passed=set(seen.values()) == {"1"},
              evidence=str(seen))
        ```
        """))
    assert runner.run_chapter(tiny_book, "01-good").ok
    ledger = [json.loads(line) for line in (tiny_book / "_build" / "claims.jsonl").read_text().splitlines()]
    assert [(r["id"], r["passed"]) for r in ledger] == [("paper/threads", True)], ledger


def test_an_unchanged_chapter_is_reused_with_its_claims_and_timing_and_executed_when_needed(tiny_book, capsys):
    """Issue 30, item 1: a second run reuses the chapter (the notebook untouched, the ledger the same bytes, the
    timing that of the execution, marked reused); --force, a damaged claims file, a missing notebook and a
    changed source each execute it again, saying why."""
    build = tiny_book / "_build"
    first, = runner.run_book(tiny_book, only=["01-good"], parameters={"seed": 7})
    assert not first.reused and first.why == "no earlier successful execution"
    notebook = build / "src" / "chapters" / "01-good.ipynb"
    ledger, executed_at = (build / "claims.jsonl").read_bytes(), notebook.stat().st_mtime_ns
    timing = json.loads((build / "timings.json").read_text())["01-good"]
    capsys.readouterr()

    again, = runner.run_book(tiny_book, only=["01-good"], parameters={"seed": 7})
    assert again.reused and again.ok and (again.seconds, again.claims) == (timing["seconds"], 1)
    assert (build / "claims.jsonl").read_bytes() == ledger and notebook.stat().st_mtime_ns == executed_at
    reused = json.loads((build / "timings.json").read_text())["01-good"]
    assert reused == {**timing, "reused": True} and timing["reused"] is False
    out = capsys.readouterr().out
    assert f"01-good: reused (its last execution took {timing['seconds']:.1f} s), 1 claims" in out
    assert re.search(r"01-good +[\d.]+ +1  reused", out) and "1 of 1 chapters reused" in out

    (build / "claims.jsonl").unlink()                   # a lost ledger: reusing the chapter puts its claim back
    runner.run_chapter(tiny_book, "01-good", parameters={"seed": 7})
    assert (build / "claims.jsonl").read_bytes() == ledger

    claims_file = build / "cache" / "01-good.claims.jsonl"
    claims_file.write_text(claims_file.read_text()[:40])                  # damaged: cut inside the record
    run = runner.run_chapter(tiny_book, "01-good", parameters={"seed": 7})
    assert not run.reused and run.why == "its cache entry or claims file is damaged"
    claims_file.write_text("")                                            # emptied: fewer claims than recorded
    assert runner.run_chapter(tiny_book, "01-good", parameters={"seed": 7}).why == "its claims file is damaged"
    notebook.unlink()
    assert runner.run_chapter(tiny_book, "01-good", parameters={"seed": 7}).why == "its executed notebook is missing"
    assert runner.run_chapter(tiny_book, "01-good", parameters={"seed": 7}, force=True).why == "forced"
    assert runner.run_chapter(tiny_book, "01-good", parameters={"seed": 7}).reused
    source = tiny_book / "chapters" / "01-good.md"
    source.write_text(source.read_text() + "\nA new paragraph.\n")
    run = runner.run_chapter(tiny_book, "01-good", parameters={"seed": 7})
    assert not run.reused and run.why == "changed: source"
    assert (build / "claims.jsonl").read_bytes() == ledger


def test_the_command_line_forces_execution_and_the_status_page_names_the_reused_chapters(tiny_book, monkeypatch,
                                                                                        capsys):
    from calib import cli
    from calib_book import pages

    monkeypatch.chdir(tiny_book)
    calls = []
    monkeypatch.setattr(runner, "run_book", lambda root, **kw: calls.append(kw["force"]))
    assert cli.main(["book", "run"]) == 0 and cli.main(["book", "run", "--force"]) == 0
    assert calls == [False, True]
    timings = {"01-good": {"seconds": 12.25, "claims": 3, "ok": True, "profile": "quick",
                           "finished": "2025-01-01 12:00:00", "reused": True},
               "02-bad": {"seconds": 1.5, "claims": 1, "ok": True, "profile": "quick",
                          "finished": "2025-01-02 08:00:00", "reused": False}}
    page = pages.status_page(timings, ["01-good", "02-bad"])
    assert "This build executed 1 of the 2 chapters and reused 1 ({doc}`/chapters/01-good`)." in page
    assert "| {doc}`/chapters/01-good` | quick | 12.2 | 3 | 2025-01-01 12:00:00 | reused |" in page
    assert "| {doc}`/chapters/02-bad` | quick | 1.5 | 1 | 2025-01-02 08:00:00 | executed |" in page
    assert "| total | | 13.8 | | | |" in page


def test_staging_copies_only_what_changed_and_keeps_modification_times(tmp_path):
    """Sphinx reads a page again when its modification time changes: restaging the book keeps the times of
    the files that did not change (and the pages build_book generates), copies a changed file, drops a removed
    one, and leaves out results/ and the machinery."""
    import os

    root, src = tmp_path / "root", tmp_path / "root" / "_build" / "src"
    (root / "book" / "sub").mkdir(parents=True)
    (root / "book" / "results").mkdir()
    (root / "book" / "calib_book").mkdir()
    (root / "book" / "results" / "x.json").write_text("{}")
    (root / "book" / "calib_book" / "runner.py").write_text("")
    for name, text in (("_config.yml", "title: t\n"), ("_toc.yml", "root: book/intro\n"), ("book/intro.md", "# I\n"),
                       ("book/sub/page.md", "# P\n"), ("book/old.md", "# O\n")):
        (root / name).write_text(text)
        os.utime(root / name, (1_000_000, 1_000_000))
    runner._stage_static(root, src)
    (src / "book" / "status.md").write_text("generated")
    assert sorted(p.relative_to(src).as_posix() for p in src.rglob("*") if p.is_file()) == [
        "_config.yml", "_toc.yml", "book/intro.md", "book/old.md", "book/status.md", "book/sub/page.md"]
    assert (src / "book" / "intro.md").stat().st_mtime == 1_000_000
    os.utime(src / "book" / "status.md", (2_000_000, 2_000_000))

    (root / "book" / "sub" / "page.md").write_text("# P, edited\n")
    (root / "book" / "old.md").unlink()
    runner._stage_static(root, src)
    assert not (src / "book" / "old.md").exists() and (src / "book" / "sub" / "page.md").read_text() == "# P, edited\n"
    assert (src / "book" / "sub" / "page.md").stat().st_mtime == (root / "book" / "sub" / "page.md").stat().st_mtime
    for unchanged, seconds in (("_config.yml", 1_000_000), ("book/intro.md", 1_000_000), ("book/status.md", 2_000_000)):
        assert (src / unchanged).stat().st_mtime == seconds, unchanged
    runner._write_if_changed(src / "book" / "status.md", "generated")
    assert (src / "book" / "status.md").stat().st_mtime == 2_000_000
    runner._write_if_changed(src / "book" / "status.md", "regenerated")
    assert (src / "book" / "status.md").read_text() == "regenerated"


def _parallel_book(root, chapters: int = 3, seconds: float = 3):
    """A book of ``chapters`` chapters, each recording a claim, writing its kernel's pid to ``started-NN`` and when
    it ran to ``span-NN`` (after sleeping ``seconds``)."""
    (root / "calib").mkdir(parents=True)
    (root / "book").mkdir()
    (root / "chapters").mkdir()
    (root / "_config.yml").write_text("title: tiny\n")
    names = [f"0{i}-c{i}" for i in range(1, chapters + 1)]
    (root / "_toc.yml").write_text("format: jb-book\nroot: book/intro\nchapters:\n"
                                   + "".join(f"  - file: chapters/{n}\n" for n in names))
    (root / "book" / "intro.md").write_text("# Intro\n")
    for i, name in enumerate(names, 1):
        (root / "chapters" / f"{name}.md").write_text(_chapter(f"""
            ```{{code-cell}} ipython3
            import os, pathlib, time
            from calib_book.claims import claim
            start = time.time()
            pathlib.Path("started-{i}").write_text(str(os.getpid()))
            claim("paper/first-{i}", "first of chapter {i}", passed=True, evidence="{i}")
            time.sleep({seconds})
            claim("paper/second-{i}", "second of chapter {i}", passed=os.environ["CALIB_CHAPTER"] == "{name}",
                  evidence=os.environ["CALIB_CHAPTER"])
            pathlib.Path("span-{i}").write_text(f"{{start}} {{time.time()}}")
            ```
            """))
    return root, names


def test_chapters_executed_two_at_once_overlap_and_keep_the_ledger_in_toc_order(tmp_path):
    """Issue 30: `calib book run --jobs 2` (what `make book` and `make test` do) executes two chapters at once, each
    kernel with its own ledger and chapter name, and writes the ledger in the order of _toc.yml, the same records
    as one at a time."""
    root, names = _parallel_book(tmp_path / "book")
    here = Path.cwd()
    runs = runner.run_book(root, jobs=2)
    assert [r.name for r in runs] == names and all(r.ok and r.claims == 2 for r in runs)
    # every kernel ran in the book's folder, and this process stays in its own (papermill's cwd= chdir'ed the whole
    # process while a kernel started: two chapters starting at once undid it for each other)
    assert Path.cwd() == here and not list(here.glob("span-*")) and not list(here.glob("started-*"))
    spans = [tuple(map(float, (root / f"span-{i}").read_text().split())) for i in range(1, 4)]
    overlapping = sum(1 for i in range(3) for j in range(i + 1, 3)
                      if spans[i][0] < spans[j][1] and spans[j][0] < spans[i][1])
    assert overlapping >= 1, spans                                  # two chapters ran at the same time
    parallel = (root / "_build" / "claims.jsonl").read_text()
    assert [json.loads(line)["id"] for line in parallel.splitlines()] == \
        [f"paper/{k}-{i}" for i in range(1, 4) for k in ("first", "second")]
    runner.run_book(root, jobs=1, force=True)                       # the control: one at a time
    assert (root / "_build" / "claims.jsonl").read_text() == parallel
    with pytest.raises(ValueError, match=r"jobs=0: .* at least 1"):
        runner.run_book(root, jobs=0)


def test_a_failing_chapter_among_two_at_once_stops_the_run_and_keeps_the_others_records(tiny_book):
    """Two at once, one fails: the other chapter's records are in the ledger, the failure names its cell, and no
    chapter starts after the failure (with --keep-going they do)."""
    with pytest.raises(runner.ChapterError, match=r"02-bad failed in cell"):
        runner.run_book(tiny_book, parameters={"seed": 7}, jobs=2)
    ledger = [json.loads(line) for line in (tiny_book / "_build" / "claims.jsonl").read_text().splitlines()]
    assert [r["chapter"] for r in ledger] == ["01-good"]
    timings = json.loads((tiny_book / "_build" / "timings.json").read_text())
    assert timings["01-good"]["ok"] and not timings["02-bad"]["ok"]


def test_ctrl_c_to_a_run_of_two_at_once_stops_both_kernels_and_ends_in_one_line(tmp_path):
    """Ctrl-C to `calib book run --jobs 2` while two chapters execute: exit 130 in one line, both kernels gone,
    neither chapter marked as run nor reusable, no temporary ledger left."""
    import os
    import signal
    import time

    root, names = _parallel_book(tmp_path / "book", chapters=2, seconds=60)
    run = _calib_book(root, "run", "--jobs", "2")
    kernels = [int(_wait_for(root / f"started-{i}")) for i in (1, 2)]
    run.send_signal(signal.SIGINT)
    out, err = run.communicate(timeout=scaled(60))
    assert run.returncode == 130, (out, err)
    assert err.startswith("calib: interrupted;") and err.count("\n") == 1, err
    assert "Traceback" not in err + out
    deadline = time.monotonic() + 15
    alive = set(kernels)
    while alive and time.monotonic() < deadline:
        for pid in list(alive):
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                alive.discard(pid)
        time.sleep(0.2)
    assert not alive, f"kernels {alive} outlived their runner"
    timings = json.loads((root / "_build" / "timings.json").read_text())
    assert not any(timings[n]["ok"] for n in names)
    assert not list((root / "_build" / "cache").glob("*.json"))          # nothing to reuse
    assert not list((root / "_build").glob("claims.*.running.jsonl"))


def _no_jupyter_book(monkeypatch):
    """Make build_book stop where it would start jupyter-book (the check of the ledger comes before it)."""
    class Started(Exception):
        pass

    def popen(*args, **kwargs):
        raise Started("jupyter-book would start here")

    monkeypatch.setattr(runner.subprocess, "Popen", popen)
    return Started


def test_a_run_interrupted_while_reusing_chapters_keeps_every_chapters_claims(tmp_path, monkeypatch):
    """Issue 45, section 4, item 1: a full run deleted _build/claims.jsonl first, so a Ctrl-C while it reused the
    chapters left the ledger with only the chapters reused before it (53 of 248 claims), which `calib book build`
    published. Now the ledger is never emptied: each chapter's records are replaced when it succeeds or is reused."""
    root, names = _parallel_book(tmp_path / "book", chapters=3, seconds=0)
    runner.run_book(root)
    ledger = root / "_build" / "claims.jsonl"
    before = ledger.read_bytes()
    assert len(before.splitlines()) == 6
    reuse = runner._reuse

    def interrupted_at_the_second(root_, name, *args):
        if name == names[1]:
            raise KeyboardInterrupt
        return reuse(root_, name, *args)

    monkeypatch.setattr(runner, "_reuse", interrupted_at_the_second)
    with pytest.raises(KeyboardInterrupt):
        runner.run_book(root)
    assert ledger.read_bytes() == before                     # every chapter's last successful records, in order


def test_the_build_refuses_a_ledger_that_lacks_a_chapters_claims_and_says_to_run(tmp_path, monkeypatch):
    """Issue 45, section 4, item 1: `calib book build` exited 0 on a ledger holding a fraction of the claims. Now a
    chapter whose records are not those its last successful run recorded, or records of a chapter not in _toc.yml,
    stop the build before jupyter-book starts, naming them and the fix; `calib book run` puts them back."""
    root, names = _parallel_book(tmp_path / "book", chapters=2, seconds=0)
    runner.run_book(root)
    started = _no_jupyter_book(monkeypatch)
    ledger = root / "_build" / "claims.jsonl"
    whole = ledger.read_text()
    claims.drop_chapter(ledger, names[1])
    with pytest.raises(runner.ChapterError) as info:
        runner.build_book(root)
    assert str(info.value) == (
        "_build/claims.jsonl is not the chapters' last successful runs: the ledger lacks the claims of chapter 02-c2 "
        "(0 of the 2 claims its last successful run recorded). Run `calib book run` (it reuses every unchanged chapter "
        "and puts its claims back), then build.")
    lines = whole.splitlines()
    ledger.write_text("\n".join(lines[:1] + lines[2:]) + "\n" + json.dumps({**json.loads(lines[0]),
                                                                            "chapter": "interactive"}) + "\n")
    with pytest.raises(runner.ChapterError, match=r"lacks the claims of chapter 01-c1 \(1 of the 2 claims .*; it holds "
                                                  r"claims of interactive, not a chapter of _toc.yml\. Run `calib book "
                                                  r"run`"):
        runner.build_book(root)
    runs = runner.run_book(root)                             # reuses both, puts their claims back, drops the others
    assert all(r.reused for r in runs) and ledger.read_text() == whole
    with pytest.raises(started):                             # past the check: jupyter-book would start
        runner.build_book(root)


def test_a_killed_runs_temporary_records_are_removed_by_the_next_run_but_not_a_running_ones(tmp_path):
    """Issue 45, section 4, item 1: a killed run left its claims.<chapter>.*.running.jsonl files in _build/ for
    good. The next run (which holds the build lock, so no other run is going) removes them before it starts a
    chapter; a chapter run inside a run that holds the lock (two at once) leaves the others' files alone."""
    root, names = _parallel_book(tmp_path / "book", chapters=1, seconds=0)
    runner.run_book(root)
    build = root / "_build"
    stale = [build / f"claims.{names[0]}.k1ll3d.running.jsonl", build / "claims.99-gone.x.running.jsonl"]
    for path in stale:
        path.write_text('{"id": "paper/half", "chapter": "01-c1"}\n')
    runner.run_book(root)
    assert not [p for p in stale if p.exists()]
    with runner.BuildLock(root):                             # a run of this process holds the lock: a chapter of it
        going = build / f"claims.{names[0]}.g01ng.running.jsonl"     # is executing and writing this file
        going.write_text("")
        runner.run_chapter(root, names[0])
        assert going.exists()


def test_the_key_holds_the_versions_of_sympy_and_mpmath(tiny_book, monkeypatch):
    """Issue 45, section 4, item 2(b): chapters 02, 03, 06 and 07 derive with sympy and mpmath, whose versions the
    key left out, so an upgrade reused their results. Each version now changes the key."""
    import importlib.metadata

    from calib_book import cache

    assert {"sympy", "mpmath"} <= set(cache.versions())
    base = _key(tiny_book)
    real = importlib.metadata.version
    for package in ("sympy", "mpmath"):
        monkeypatch.setattr(importlib.metadata, "version", lambda name, p=package: "0.0" if name == p else real(name))
        assert _key(tiny_book) != base, package
        monkeypatch.setattr(importlib.metadata, "version", real)
    assert _key(tiny_book) == base


def test_the_key_holds_the_variables_that_choose_the_inputs_and_a_fingerprint_of_the_data_files(tiny_book, tmp_path,
                                                                                              monkeypatch):
    """Issue 45, section 4, item 2(c): the key left out CALIB_DATA and CALIB_BOOK_ROOT, which choose the dataset and
    the stored results a chapter reads, and never looked at the data files. Now their values are in the key, the
    stored results under CALIB_BOOK_ROOT are digested, and each dataset file the chapter's source names is
    fingerprinted (path, size, modification time, first and last MB): a file edited in place, touched or found
    elsewhere changes the key; a chapter that names no dataset is not keyed on it."""
    import os

    from calib.dataset_files import SOURCES
    from calib_book import cache
    from conftest import write_tiny_fashion_mnist

    for name in ("CALIB_DATA", "CALIB_BOOK_ROOT"):
        monkeypatch.delenv(name, raising=False)
    source = tiny_book / "chapters" / "01-good.md"
    source.write_text(source.read_text() + '\nIt trains on `load_dataset("fashion-mnist")`.\n')
    home = tmp_path / "data"
    write_tiny_fashion_mnist(home / "fashion-mnist", n_train=200, n_test=50)
    monkeypatch.setenv("CALIB_DATA", str(home))
    base, other = _key(tiny_book), _key(tiny_book, name="02-bad")

    labels = home / "fashion-mnist" / "t10k-labels-idx1-ubyte.gz"
    data, stat = labels.read_bytes(), labels.stat()
    labels.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))             # edited in place: same size, same time
    os.utime(labels, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert _key(tiny_book) != base and _key(tiny_book, name="02-bad") == other
    labels.write_bytes(data)
    os.utime(labels, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert _key(tiny_book) == base
    os.utime(labels, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1))     # touched
    assert _key(tiny_book) != base
    os.utime(labels, ns=(stat.st_atime_ns, stat.st_mtime_ns))

    elsewhere = tmp_path / "elsewhere"                                  # the same files in another cache
    shutil.copytree(home, elsewhere)
    monkeypatch.setenv("CALIB_DATA", str(elsewhere))
    assert _key(tiny_book) != base and _key(tiny_book, name="02-bad") != other
    monkeypatch.setenv("CALIB_DATA", str(home))
    assert _key(tiny_book) == base

    stored = tmp_path / "stored"                                         # the stored results another tree holds
    (stored / "book" / "results" / "01-good").mkdir(parents=True)
    (stored / "book" / "results" / "01-good" / "run.json").write_text("{}")
    monkeypatch.setenv("CALIB_BOOK_ROOT", str(stored))
    pointed = _key(tiny_book)
    assert pointed != base
    (stored / "book" / "results" / "01-good" / "run.json").write_text('{"changed": 1}')
    assert _key(tiny_book) != pointed
    monkeypatch.delenv("CALIB_BOOK_ROOT")

    components = runner.chapter_key(tiny_book, "01-good", {"profile": "quick", "seed": 0})[1]
    files = components["datasets"]["fashion-mnist"]
    assert sorted(files) == sorted(SOURCES["fashion-mnist"])
    assert all(text.startswith(str((home / "fashion-mnist").resolve())) for text in files.values())
    assert components["environment"] == {name: os.environ.get(name) for name in cache.INPUT_VARIABLES} == \
        {"CALIB_DATA": str(home), "CALIB_BOOK_ROOT": None}
    # the files fingerprinted are those loading reads: the cache first, else Debian's package
    from calib import dataset_files

    debian = tmp_path / "debian"
    shutil.copytree(home / "fashion-mnist", debian)
    monkeypatch.setattr(dataset_files, "DEBIAN_FASHION_MNIST", debian)
    assert set(dataset_files.installed_files("fashion-mnist").values()) == \
        {home / "fashion-mnist" / f for f in SOURCES["fashion-mnist"]}
    monkeypatch.setenv("CALIB_DATA", str(tmp_path / "empty"))
    installed = dataset_files.installed_files("fashion-mnist")
    assert set(installed.values()) == {debian / f for f in SOURCES["fashion-mnist"]}
    assert len(dataset_files.load_fashion_mnist(download=False)[1]) == 200
    assert dataset_files.installed_files("cifar10") is None                # not installed: nothing downloaded
    with pytest.raises(ValueError, match="name='mnist' is not a dataset with files; choose one of fashion-mnist"):
        dataset_files.installed_files("mnist")


def test_the_course_puts_its_work_cells_where_the_student_edition_does(monkeypatch):
    """The course's student notebook (calib_book.course.student_notebook) had a copy of the student edition's loop
    that adds a cell after each exercise; both now use calib_book.student.add_starter_cells: the same cells in the
    same places, the course's with its answer dictionary and grader call, and its grader cell before the first code."""
    import copy
    from types import SimpleNamespace

    import nbformat

    from calib_book import course

    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("# A chapter\n\n```{exercise} First\n:label: ex-first\n\nShow it.\n```\n\n"
                                      "```{solution} ex-first\nThe answer.\n```"),
        nbformat.v4.new_code_cell("x = 1\nfrom calib_book.exercises import check\n"),
        nbformat.v4.new_markdown_cell("```{exercise} Second\n:label: ex-second\n\nExplain.\n```")])
    monkeypatch.setattr(course, "_chapter_notebook", lambda root, chapter: copy.deepcopy(nb))
    monkeypatch.setattr(course, "key_parts_cached", lambda chapter: [SimpleNamespace(label="ex-first", part="a"),
                                                                      SimpleNamespace(label="ex-first", part="b")])
    monkeypatch.setattr(course, "_rule_lines", lambda label: [f"# how {label} is graded"])   # a made-up exercise's rule
    book = runner.add_starter_cells(runner.strip_solutions(copy.deepcopy(nb)))
    students = course.student_notebook(Path("."), "99-chapter")

    def outline(notebook):
        return [(c.cell_type, c.source.splitlines()[0]) for c in notebook.cells
                if not {"course-grader", "course-export"} & set(c.metadata.get("tags", []))]

    assert outline(students) == outline(book) == [
        ("markdown", "# A chapter"), ("code", "# Exercise ex-first: your work here"),
        ("code", "x = 1"), ("markdown", "```{exercise} Second"),
        ("code", "# Exercise ex-second: your work here")]
    work = [c.source for c in students.cells if "student-work" in c.metadata.get("tags", [])]
    assert work == ["# Exercise ex-first: your work here\n# how ex-first is graded\n\nex_first = dict(a=..., b=...)\n\n"
                    "grader.check('ex-first')",
                    "# Exercise ex-second: your work here"]
    assert [c.metadata.get("tags") for c in students.cells][2] == ["course-grader"]     # before the first code cell
    assert "check" not in students.cells[3].source                          # the key's import is dropped
