"""The runner (calib_book.runner) on a tiny book made by the test: parameters, ledger, timings, and failures that name
the cell. The pages it writes are tested in test_pages.py, the chapter helpers in test_notebook.py."""

import json
import textwrap

import pytest

from calib_book import claims, runner

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
    lines = [json.loads(line) for line in (tiny_book / "_build" / "claims.jsonl").read_text().splitlines()]
    # a chapter that fails leaves the ledger as it was: only the successful chapter's record is there
    assert [(r["id"], r["chapter"], r["passed"]) for r in lines] == [("paper/seed", "01-good", True)]
    assert "seed=7, profile=quick" in lines[0]["evidence"]
    timings = json.loads((tiny_book / "_build" / "timings.json").read_text())
    assert timings["01-good"]["ok"] and not timings["02-bad"]["ok"] and timings["02-bad"]["claims"] == 1
    assert not list((tiny_book / "_build").glob("claims.*.running.jsonl"))


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
    runner.run_book(tiny_book, only=["01-good"], parameters={"seed": 7})
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
                                      "Compute it.\n```\n\n````{solution} ex-two\n:class: dropdown\n\n```python\nx = 1\n```\n"
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
    assert "check('ex-g-gamma-one', threshold=..., argmax=..., maximum=...)" in first
    assert "ex-no-check" in second and "check(" not in second
