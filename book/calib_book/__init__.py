"""calib_book: the machinery of the focal-calibration book, apart from the ``calib`` library it is about.

It lives in the repository beside the book's Sphinx extension (``book/_ext``) and ships in no wheel: a
practitioner who installs ``calib`` gets the library, and the book's runner, pages and answer key stay here.
``calib book ...`` (:mod:`calib.cli`) finds the repository from the working directory and imports this package
from its ``book/`` folder; the runner puts ``book/`` on the path of the kernels that execute the chapters, and
``tests/conftest.py`` puts it on pytest's. A chapter imports it like the library::

    from calib_book.claims import claim
    from calib_book.notebook import glue_number, markdown_table
    from calib_book.exercises import check

Modules (an import goes to a module listed before it, or to ``calib``; of calib, only ``calib book`` imports this):

- ``calib_book.claims``: the claims ledger, its graded verdicts, and the repository root;
- ``calib_book.notebook``: the helpers chapters share for presentation (glued numbers, Markdown tables, number
  and interval text, CPU timing);
- ``calib_book.linear_toy``: chapter 04's experiment rerun at one setting, shared by its solutions and the key;
- ``calib_book.answers``: the exercises' answer key (kept out of the API reference and its source pages);
- ``calib_book.exercises``: self-checks for the exercises (right, close or wrong, never the answer);
- ``calib_book.pages``: the back-matter pages built from the ledger (claims, errata, reproduction, released
  code, execution statistics);
- ``calib_book.coverage``: what each paper states and the claims that decide it (the table in
  ``book/data/coverage/`` and its back-matter page);
- ``calib_book.browser``: the built book opened in headless Chromium, offline, and checked as a reader sees it;
- ``calib_book.cache``: the key of a chapter's execution (source, parameters, library, results, versions), which
  the runner compares to reuse an executed chapter;
- ``calib_book.student``: the student edition (solutions removed, a cell to work in after each exercise);
- ``calib_book.runner``: papermill executes the chapters, jupyter-book renders them;
- ``calib_book.pdf``: the executed book as one PDF (``make pdf``), and what its fonts lacked.
"""
