"""Execute every chapter of _toc.yml once (quick profile) through the book runner, then build the book.

This is the same runner as `make book`; no chapter runs twice, and a chapter unchanged since `make book` executed
it is reused (calib_book.runner, "Executing only what changed"). The ledger must hold no failed claim and every
chapter must record at least one claim. The stored runs that chapter 05 reads are checked here too, without the
`chapters` mark: one of them is retrained.
"""

import dataclasses
import os
import re
import urllib.parse
from pathlib import Path

import numpy as np
import pytest

from calib.data import DEBIAN_FASHION_MNIST
from conftest import book_not_built
from test_self_answers import scan_executed_chapters
from calib_book import runner
from calib_book.claims import PROSE_FIELDS, ascii_math, quote_in_text, read_ledger

ROOT = runner.repo_root(__file__)
#: The quick-profile runs chapter 05 reads, <loss>/seed<k>: those of chapter 10's grid in the papers' regime.
STORED_05 = ROOT / "book" / "results" / "10-benchmark" / "regime" / "mlp-256-256-n20k-e40"
#: The epochs of the stored run that the retraining test reruns (of 40; the learning rate drops after 20 and 30).
RETRAINED_EPOCHS = 4
#: The per-epoch records of history.json that are clock readings, not results of the training.
CLOCK_FIELDS = ("train_seconds", "images_per_s")


def test_chapter_05_reads_finished_regime_runs_with_every_diagnostic_and_no_checkpoint():
    """Chapter 05's quick profile reads chapter 10's regime grid: CE, FL-1/2/3 and FLSD-53, seeds 0-4, one recipe
    (40 epochs, 20,000 images, drops after 20 and 30, no weight decay), full per-epoch diagnostics."""
    from calib.train import load_run

    losses = ("ce", "fl-1", "fl-2", "fl-3", "flsd-53")
    runs = {f"{loss}/seed{k}": load_run(STORED_05 / loss / f"seed{k}") for loss in losses for k in range(5)}
    recipe = {k: v for k, v in runs["ce/seed0"].config.items() if k not in ("loss", "seed")}
    for name, run in runs.items():
        assert run.finished and {k: v for k, v in run.config.items() if k not in ("loss", "seed")} == recipe, name
        assert f"{run.config['loss']}/seed{run.config['seed']}" == name
        assert run.meta["diagnostics"] == "full", name
        assert sorted(p.name for p in run.out.iterdir()) == ["history.json", "logits.npz", "meta.json"], name
    assert (recipe["model"], recipe["epochs"], recipe["milestones"], recipe["weight_decay"], recipe["train_subset"],
            recipe["val_subset"]) == ("mlp-256-256", 40, [20, 30], 0.0, 20000, None)
    size = sum(p.stat().st_size for p in (ROOT / "book" / "results").rglob("*") if p.is_file())
    assert size < 100 * 2 ** 20, f"book/results holds {size / 2 ** 20:.1f} MB (limit 100 MB)"


#: Float64 arithmetic on a run's float32 results (metrics summed over up to 20,000 samples) is reproducible only up to
#: the order of its sums, which numpy's SIMD dispatch (AVX-512 or AVX2 exp and log) and OpenBLAS's core type choose:
#: pairwise summation of N terms in another order moves a sum by about log2(N) ulps of the sum of |terms|, and an ECE
#: (a difference of two bin means) by that times mean / gap, at most about 100 here. 1e-12 relative is 4,500 ulps:
#: room for that, and 10^10 times smaller than the difference another seed makes (the control below).
FLOAT64_RTOL = 1e-12
#: Where the torch kernels differ (MKL picks them by CPU vendor: an Intel Xeon retraining the AMD EPYC runs), the
#: first epoch alone is compared, within these bounds; SGD at learning rate 0.1 amplifies the kernels' rounding until
#: the second epoch differs as much as another seed's. Measured, Intel vs the AMD-trained run: train loss 1.3e-6
#: relative, weight norm 7e-7, test NLL 2.3e-5, 1 prediction of 20,000, test ECE 1.4e-4; another seed: 10 %, 10 %,
#: 5 %, 243 predictions, 0.014.
FIRST_EPOCH_RTOL, FIRST_EPOCH_ECE_ATOL, FIRST_EPOCH_COUNT_SHARE = 1e-4, 5e-4, 1e-3


def _is_float32(x: float) -> bool:
    """A value the run read off its float32 state (a weight norm, a float32 loss) rather than computed in float64."""
    return float(np.float32(x)) == x


def run_record_differences(new, old, exact_float64: bool, path="") -> list[str]:
    """Where two per-epoch records of a run differ: integers, strings and None exactly, float32 readings exactly,
    float64 metrics exactly or, when ``exact_float64`` is False, within FLOAT64_RTOL."""
    if isinstance(old, dict) and isinstance(new, dict):
        if set(new) != set(old):
            return [f"{path}: keys {sorted(set(new) ^ set(old))} in one record only"]
        return [d for k in old for d in run_record_differences(new[k], old[k], exact_float64, f"{path}.{k}")]
    if isinstance(old, list) and isinstance(new, list):
        if len(new) != len(old):
            return [f"{path}: {len(new)} entries vs {len(old)}"]
        return [d for i, (a, b) in enumerate(zip(new, old)) for d in run_record_differences(a, b, exact_float64,
                                                                                             f"{path}[{i}]")]
    if isinstance(old, float) and isinstance(new, float) and not (exact_float64 or _is_float32(old)):
        ok = abs(new - old) <= FLOAT64_RTOL * max(abs(old), abs(new), 1e-300)
    else:
        ok = new == old and type(new) is type(old)
    return [] if ok else [f"{path}: {new!r} vs {old!r}"]


def first_epoch_differences(new: dict, old: dict) -> list[str]:
    """The first epoch's summary of two trainings compared within FIRST_EPOCH_*: what a run retrained under other
    torch kernels still reproduces."""
    out = []

    def close(what, a, b, rtol=FIRST_EPOCH_RTOL, atol=0.0):
        if abs(a - b) > max(atol, rtol * abs(b)):
            out.append(f"{what}: {a!r} vs {b!r}")

    close("train_loss", new["train_loss"], old["train_loss"])
    close("weight_norm", new["weight_norm"], old["weight_norm"])
    for split in ("train", "val", "test"):
        a, b = new[split], old[split]
        close(f"{split}.n_wrong", a["n_wrong"], b["n_wrong"], rtol=0, atol=FIRST_EPOCH_COUNT_SHARE * b["n"])
        for key in ("nll", "entropy", "confidence"):
            close(f"{split}.{key}", a[key], b[key])
        for key in ("ece", "adaece"):
            close(f"{split}.{key}", a[key], b[key], rtol=0, atol=FIRST_EPOCH_ECE_ATOL)
    return out


@pytest.mark.skipif(not DEBIAN_FASHION_MNIST.is_dir(), reason="needs Fashion-MNIST (Debian's dataset-fashion-mnist)")
def test_a_stored_quick_run_of_chapter_05_retrains_bit_for_bit(tmp_path):
    """Issue 30, item 1, and issue 45, item 1: chapter 05 reads its quick runs instead of training networks at every
    build; its CE run of seed 0, retrained from its meta.json on the CPU with the threads it records (one), gives the
    same per-epoch records (clock readings aside). The retraining stops after the first RETRAINED_EPOCHS of its 40
    epochs (the schedule's drops come later, and each epoch's data order depends on the seed and the epoch only).

    What "the same" means depends on what this machine shares with the one that trained the run
    (``calib._reproducible.kernels_match``): under the same torch kernels every float32 reading (weights, losses) and
    every count is equal bit for bit, and the float64 metrics computed from them are equal to the last bit under the
    same numpy kernels, within FLOAT64_RTOL otherwise (another SIMD dispatch sums in another order); under other
    torch kernels (another CPU vendor: MKL's dispatch) the first epoch is compared within FIRST_EPOCH_*. Each mode has
    its control: another seed's records fail it."""
    import torch

    from calib._reproducible import kernels_match
    from calib.train import config_from_meta, load_run, train

    stored = load_run(STORED_05 / "ce" / "seed0")
    kernels = kernels_match(stored.meta)
    epochs = RETRAINED_EPOCHS if kernels["torch"] else 1
    threads = torch.get_num_threads()
    torch.set_num_threads(stored.meta["threads"])
    try:
        # the same run cut short: no drop comes within its first epochs (the milestones must lie inside the run)
        config = dataclasses.replace(config_from_meta(stored.out), device="cpu", epochs=epochs, milestones=())
        rerun = train(config, tmp_path / "rerun", progress=False, discard=["checkpoint.pt"])
    finally:
        torch.set_num_threads(threads)
    assert {**rerun.config, "epochs": stored.config["epochs"], "milestones": stored.config["milestones"]} \
        == stored.config
    assert min(stored.config["milestones"]) > RETRAINED_EPOCHS

    def results(run):
        return [{k: v for k, v in epoch.items() if k not in CLOCK_FIELDS} for epoch in run.epochs]

    other = load_run(STORED_05 / "ce" / "seed1")
    assert len(rerun.epochs) == epochs
    print(f"kernels: {kernels['why']}")
    if kernels["torch"]:
        exact = bool(kernels["numpy"])
        differences = run_record_differences(results(rerun), results(stored)[:epochs], exact_float64=exact)
        assert not differences, f"retrained under the same kernels ({kernels['why']}): " + "; ".join(differences[:8])
        # the control: another seed's first epochs differ
        assert run_record_differences(results(other)[:epochs], results(stored)[:epochs], exact_float64=exact)
    else:
        differences = first_epoch_differences(rerun.epochs[0], stored.epochs[0])
        assert not differences, f"retrained under other kernels ({kernels['why']}): " + "; ".join(differences)
        assert len(first_epoch_differences(other.epochs[0], stored.epochs[0])) >= 10          # the control


def test_run_records_compare_float32_readings_exactly_and_float64_metrics_to_their_summation_order():
    """The comparison above: a float64 metric one ulp apart (the ECE of issue 45: 0.04423678764679625 against
    ...626, an AMD EPYC without AVX-512 against the one with it that trained the run) is the same result unless
    exactness is asked; a float32 reading one float32 ulp apart, a count one apart or a metric 1e-9 apart is not."""
    record = {"train_loss": float(np.float32(0.7576781)), "n_wrong": 3235, "ece": 0.04423678764679626,
              "reliability": {"counts": [0, 2], "accuracy": [None, 0.5]}}
    one_ulp = {**record, "ece": 0.04423678764679625}
    assert run_record_differences(one_ulp, record, exact_float64=False) == []
    assert run_record_differences(one_ulp, record, exact_float64=True) == [".ece: 0.04423678764679625 vs "
                                                                           "0.04423678764679626"]
    for changed in ({"train_loss": float(np.nextafter(np.float32(record["train_loss"]), np.float32(1)))},
                    {"n_wrong": 3234}, {"ece": record["ece"] + 1e-9},
                    {"reliability": {"counts": [0, 3], "accuracy": [None, 0.5]}}):
        assert run_record_differences({**record, **changed}, record, exact_float64=False), changed


@pytest.mark.chapters
def test_every_chapter_runs_and_the_book_builds(record_phase):
    import time

    from conftest import _cpu_seconds

    names = runner.chapters_in_toc(ROOT)
    wall, cpu = time.perf_counter(), _cpu_seconds()
    runs = runner.run_book(ROOT, profile="quick", jobs=2)      # as `make book` runs them: two at once
    record_phase("chapters", time.perf_counter() - wall, _cpu_seconds() - cpu)
    assert [r.name for r in runs] == names
    records = read_ledger(ROOT / "_build" / "claims.jsonl")
    failed = [r.id for r in records if r.passed is False]
    assert not failed, f"claims not confirmed: {failed}"
    untested_with_a_result = [r.id for r in records if r.passed is None and r.verdict != "untested"]
    assert not untested_with_a_result
    silent = [n for n in names if not any(r.chapter == n for r in records)]
    assert not silent, f"chapters that record no claim: {silent}"
    wall, cpu = time.perf_counter(), _cpu_seconds()
    index = runner.build_book(ROOT)                # the student edition: test_the_student_edition_builds (test-all)
    record_phase("builds", time.perf_counter() - wall, _cpu_seconds() - cpu)
    assert index.is_file() and index == ROOT / "_build" / "html" / "index.html"
    html = ROOT / "_build" / "html"
    for page in ["book/claims.html", "book/errata.html", "book/reproduction.html", "book/released-code.html",
                 *(f"chapters/{n}.html" for n in names)]:
        assert (html / page).is_file(), page
    ledger_html = (html / "book" / "claims.html").read_text()
    assert all(r.id in ledger_html for r in records)

    # MathJax comes from the book's own static files, so the math renders offline; no page loads it from a CDN
    # (what matters is where the script comes from, not the cache-busting ``?v=`` query a rebuild appends)
    local_mathjax = 0
    for page in html.rglob("*.html"):
        text = page.read_text(errors="replace")
        assert "cdn.jsdelivr.net/npm/mathjax" not in text and "mathjax@3" not in text, page
        for src in re.findall(r'<script[^>]*\bsrc="([^"]*tex-chtml\.js[^"]*)"', text):
            path = urllib.parse.urlsplit(src)
            assert not path.scheme and not path.netloc, (page, src)
            assert (page.parent / path.path).resolve() == (html / "_static" / "mathjax" / "tex-chtml.js").resolve(), \
                (page, src)
            local_mathjax += 1
    assert local_mathjax >= len(names), "the chapters do not load MathJax from _static"
    assert (html / "_static" / "mathjax" / "tex-chtml.js").stat().st_size > 500_000

    # every errata entry links to the cell that shows it, and that cell carries the anchor
    errata_html = (html / "book" / "errata.html").read_text()
    for r in records:
        if r.about == "paper" and r.verdict in ("false", "imprecise", "typo"):
            assert f"#{r.anchor}" in errata_html, r.id
            assert f'id="{r.anchor}"' in (html / "chapters" / f"{r.chapter}.html").read_text(), r.id


PAPERS_DIR = Path(os.environ.get("CALIB_PAPERS_DIR", ROOT.parent / "shared" / "papers"))


@pytest.mark.chapters
def test_the_student_edition_builds(record_phase):
    """After the run above: the book without the exercises' solutions, and the chapters as notebooks to work in, as
    `make student` builds them (strict: no warning); the two tests at the end of this file check what it holds."""
    import time

    from conftest import _cpu_seconds

    wall, cpu = time.perf_counter(), _cpu_seconds()
    index = runner.build_book(ROOT, student=True)
    record_phase("builds", time.perf_counter() - wall, _cpu_seconds() - cpu)
    assert index == ROOT / "_build" / "student" / "_build" / "html" / "index.html" and index.is_file()
    assert (index.parent / ".calib-strict-build-ok").is_file()


@pytest.mark.chapters
def test_every_quote_is_the_papers_words():
    """After the run above: each claim's quote occurs in its paper's text (calib_book.claims.quote_in_text), when
    the papers' texts are beside the repository (shared/papers, as on the project's machines and CI) or named by
    CALIB_PAPERS_DIR (a fresh clone elsewhere)."""
    if not PAPERS_DIR.is_dir():
        pytest.skip(f"the papers' texts are not at {PAPERS_DIR}; set CALIB_PAPERS_DIR to check the quotes")
    records = read_ledger(ROOT / "_build" / "claims.jsonl")
    if not records:
        book_not_built("the chapters have not run (the test above runs them)")
    texts = {p.name.split("-", 1)[0]: p.read_text(encoding="utf-8") for p in PAPERS_DIR.glob("*.txt")}
    assert set(texts) >= {r.paper for r in records if r.quote and r.paper != "book"}, sorted(texts)
    missing = [r.id for r in records if r.quote and r.paper in texts and not quote_in_text(r.quote, texts[r.paper])]
    assert not missing, f"quotes not found verbatim in the paper's text: {missing}"


@pytest.mark.chapters
def test_every_claim_field_writes_its_math_as_math():
    """Issue 47, item 3: after the run above, no statement, evidence, premise, correction or remark of the ledger
    writes math as ASCII ("gamma = 2", "T_CE >= 1.5", "p_y", "Psi^gamma"): the pages typeset what is inside
    ``$...$`` (calib_book.claims.ascii_math; the browser check reads the rendered blocks with the same pattern)."""
    records = read_ledger(ROOT / "_build" / "claims.jsonl")
    if not records:
        book_not_built("the chapters have not run (the test above runs them)")
    found = {f"{r.id} ({name})": ascii_math(getattr(r, name)) for r in records for name in PROSE_FIELDS
             if ascii_math(getattr(r, name))}
    assert not found, f"{len(found)} claim fields with ASCII math: {dict(list(found.items())[:10])}"


@pytest.mark.chapters
def test_no_number_the_executed_book_prints_answers_an_exercise():
    """Issue 27, item 2: after the build above, every number the executed chapters show before their exercises, and
    every number of the API docstrings, is fed to every exercise's check (tests/test_self_answers.py)."""
    scan_executed_chapters()




def _checked_in_a_browser(only=None) -> list:
    """calib_book.browser.check_book on the built book (every page, or the pages of ``only``), its problems asserted
    away; skipped without Chromium."""
    from calib_book import browser

    html = ROOT / "_build" / "html"
    if not (html / "index.html").is_file():
        book_not_built("the book is not built (the test above builds it)")
    chromium = browser.find_chromium()
    if chromium is None:
        pytest.skip("no chromium on the PATH: the rendered pages are not checked (make installs Debian's chromium "
                    "with apt when it can; or set CALIB_CHROMIUM)")
    reports = browser.check_book(html, chromium, only=only, progress=only is None)
    problems = [f"{r.page}: {p}" for r in reports for p in r.problems]
    assert not problems, "\n".join(problems)
    return reports


@pytest.mark.chapters
def test_every_built_page_reads_well_in_a_browser():
    """After the build above: every page opened in headless Chromium, offline (calib_book.browser has the checks)."""
    reports = _checked_in_a_browser()
    names = {r.page for r in reports}
    chapters = runner.chapters_in_toc(ROOT)
    assert {"book/intro.html", "book/claims.html", *(f"chapters/{n}.html" for n in chapters)} <= names
    # the math is there: the chapters typeset formulas, and the notation page does too
    formulas = {r.page: r.formulas for r in reports}
    assert all(formulas[f"chapters/{n}.html"] > 0 for n in chapters if n != "11-paper-tables")
    assert formulas["book/notation.html"] > 0


#: The pages `make test` opens in Chromium, one of each kind (the test above, in `make test-all`, opens every page): a
#: chapter with claims, formulas, figures and tables; a ledger page of claim entries; the page of notation (formulas);
#: the introduction (the landing page's layout, tables); a page of the API reference. 11.5 core-s of 245.
PAGES_OF_EACH_KIND = ("chapters/12-dataset-shift.html", "book/released-code.html", "book/notation.html",
                      "book/intro.html", "book/api/posthoc.html")


@pytest.mark.chapters
def test_a_page_of_each_kind_reads_well_in_a_browser():
    """After the build above: the pages of PAGES_OF_EACH_KIND opened in headless Chromium, offline, with every check
    of calib_book.browser (the width, the contents buttons, the claims' contrast in both themes, the math, the
    figures' text, the links)."""
    reports = _checked_in_a_browser(only=list(PAGES_OF_EACH_KIND))
    assert [r.page for r in reports] == list(PAGES_OF_EACH_KIND)
    formulas = {r.page: r.formulas for r in reports}
    assert formulas["chapters/12-dataset-shift.html"] > 0 and formulas["book/notation.html"] > 0


@pytest.mark.chapters
def test_the_student_book_has_no_solutions_and_a_cell_to_work_in_after_each_exercise():
    """After the build above (which renders the student edition beside the full one, as `calib book build
    --student` renders it alone): the same chapters without any solution, and notebooks with a work cell (and the
    self-check call where there is one) after each exercise."""
    import nbformat

    from calib_book import exercises
    from calib_book.exercises import exercises_in

    html = ROOT / "_build" / "student" / "_build" / "html"
    if not (html / ".calib-strict-build-ok").is_file():
        book_not_built("the student edition is not built (test_the_student_edition_builds builds it)")
    names = runner.chapters_in_toc(ROOT)
    full = (ROOT / "_build" / "html" / "chapters" / f"{names[1]}.html").read_text()
    assert "solution" in full.lower() and 'class="solution' in full            # the control: solutions exist
    for name in names:
        page = (html / "chapters" / f"{name}.html").read_text()
        assert 'class="solution' not in page and "solution-start" not in page, name
        entries = exercises_in(name, (ROOT / "chapters" / f"{name}.md").read_text(encoding="utf-8"))
        assert all(f'id="{e.label}"' in page for e in entries), name                 # the exercises remain
        notebook = nbformat.read(ROOT / "_build" / "student" / "notebooks" / f"{name}.ipynb", as_version=4)
        work = [c.source for c in notebook.cells if "student-work" in c.metadata.get("tags", [])]
        assert len(work) == len(entries), name
        for e, cell in zip(entries, work):
            assert e.label in cell and (("check(" in cell) == (e.label in exercises.labels())), e.label
        assert not any(sol in c.source for c in notebook.cells for sol in ("{solution-start}", "{solution}")), name


@pytest.mark.chapters
def test_the_student_site_holds_no_line_of_the_key_and_no_solution():
    """After the student build above: the student edition of the site shows the chapters' own outputs, so the
    numbers a chapter prints are there (whether one answers an exercise is the scan above); no line of the key and
    no solution may be (calib_book.leaks, with its control in tests/test_course.py)."""
    from calib_book import leaks
    from test_course import KEY_NAMES

    site = ROOT / "_build" / "student"
    if not (site / "_build" / "html" / "index.html").is_file():
        book_not_built("the student edition is not built (test_the_student_edition_builds builds it)")
    needles, _ = leaks.key_needles(ROOT)
    files = [p for p in site.rglob("*") if p.is_file()]
    hits, scanned = leaks.scan(files, [n for n in needles if n.kind != "value" and n.text not in KEY_NAMES])
    assert scanned > 30
    assert hits == []

