# The two commands of the book:  `make book`  and  `make test`  (and `make pdf`, the book as one PDF).
# Each creates .venv when missing, installs the project into it, then runs.

PYTHON     ?= python3
VENV       ?= .venv
PROFILE    ?= quick
# A chapter whose source, parameters, library, stored results and versions have not changed since its last
# successful execution is reused (see book/calib_book/runner.py); FORCE=1 executes every chapter again.
FORCE      ?=
# Chapters executed at once, each in its own kernel (calib book run --jobs).
JOBS       ?= 2
# Processes that run the tests (`make test`): two, one for the chapters while the other runs the rest.
TEST_WORKERS ?= 2
# torch is installed only when the environment lacks it, so that an existing (e.g. CUDA) torch is kept.
# Elsewhere, point TORCH_SPEC at the build you want, e.g. TORCH_SPEC="torch --index-url <your index>".
TORCH_SPEC ?= torch==2.13.0
FASHION_MNIST_DIR ?= /usr/share/datasets/fashion-mnist

# Python may write bytecode (__pycache__, which git ignores) in the commands below even where the environment says
# otherwise (PYTHONDONTWRITEBYTECODE): a module whose bytecode is not written is compiled again by every process that
# imports it, every kernel, rank and subprocess of `make test` (import torch 3.7 s instead of 1.4 s; in a fresh clone
# `make test`'s tests took 600 s instead of 458 s).
unexport PYTHONDONTWRITEBYTECODE

PY    := $(VENV)/bin/python
STAMP := $(VENV)/.calib-installed

.PHONY: book test test-all test-clock student course pdf tex setup data browser clean

book: setup
	$(PY) -m calib book run --profile $(PROFILE) --jobs $(JOBS) $(if $(FORCE),--force)
	$(PY) -m calib book build

# pytest-xdist, a file to a worker (--dist loadfile): tests/test_chapters.py executes and builds the book and then
# checks what was built, in order, in one worker, while the other files spread over the other workers. It is the
# first file (tests/conftest.py), and --no-loadscope-reorder keeps conftest's order (xdist would start the files with
# the most tests first, and this one has six): it starts at once, the other long files follow on the other worker,
# and the short ones come last. TEST_WORKERS=0 runs everything in this process.
#
# `make test` is the gate for every change, within 8 minutes on 2 cores: the library's tests, every chapter executed
# and its claims checked, the book built, a page of each kind opened in Chromium, the course graded on answer
# cells and one chapter's whole notebook. The tests marked `slow` (tests/conftest.py, SLOW_TESTS says what each
# covers) prove whole capabilities end to end in seconds each: the student edition, every page in Chromium, the key's solutions graded in
# four chapters' notebooks, trainings killed and resumed, two DDP ranks, the wheel, another CPU dispatch.
# `make test-all` runs them too (about twice the time): before a release, and after changing what they cover.
PYTEST_RUN = $(PY) -m pytest $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder)

test: test-clock setup
	$(PYTEST_RUN) -m "not slow"

test-all: test-clock setup
	$(PYTEST_RUN)

# When `make test` started, before its setup: the phase table at the end of the tests (tests/conftest.py) counts the
# setup's time from it.
test-clock:
	@mkdir -p _build && date +%s.%N > _build/.test-clock

# The book without the exercises' solutions, for a course: _build/student/_build/html, and the chapters as
# notebooks with the solutions removed in _build/student/notebooks (after `make book`).
student: setup
	$(PY) -m calib book build --student

# The course edition, _build/course (see book/calib_book/course.py): student notebooks graded by otter-grader
# (no solutions, no key) in _build/course/student, one autograder per chapter in _build/course/autograder (hidden
# tests, points), the instructors' notebooks in _build/course/instructor; then a planted right and a planted wrong
# submission of every chapter are graded here (otter run, no Docker) and must earn full and zero points.
# `make course COURSE_SEED=2031` draws the exercises' data (and the key) from a course seed ($$CALIB_COURSE_SEED).
course: setup
	$(if $(COURSE_SEED),CALIB_COURSE_SEED=$(COURSE_SEED) )$(PY) -m calib book course --self-test

# The whole book as one PDF, _build/latex/book.pdf (XeLaTeX through jupyter-book's LaTeX builder), from the executed
# book that `make book` leaves in _build/src (built first when missing). `make test` does not build it;
# tests/test_pdf.py does, when TeX is installed.
pdf: setup tex
	@test -f _build/src/book/claims.md || $(MAKE) book
	PYTHONPATH=book $(PY) -m calib_book.pdf

# Debian's TeX Live for `make pdf` when apt is there and we are root (about 370 MiB installed); carry on otherwise
# (calib_book.pdf then names what is missing).
TEX_PACKAGES := latexmk texlive-xetex texlive-latex-recommended texlive-latex-extra texlive-fonts-recommended \
                tex-gyre fonts-freefont-otf poppler-utils
tex:
	@if command -v xelatex >/dev/null 2>&1 && command -v latexmk >/dev/null 2>&1 && command -v pdffonts >/dev/null 2>&1; then \
	  echo "TeX: $$(command -v xelatex)"; \
	elif command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
	  echo "TeX: installing Debian's TeX Live ($(TEX_PACKAGES))"; \
	  (DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $(TEX_PACKAGES) >/dev/null 2>&1 || \
	   (apt-get update -q >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $(TEX_PACKAGES) >/dev/null 2>&1)) \
	  || echo "TeX: apt-get could not install it; the PDF cannot be built"; \
	else \
	  echo "TeX: not installed (no apt-get or not root); install TeX Live with XeLaTeX and latexmk for the PDF"; \
	fi

setup: $(STAMP) data browser

# The project and its dependencies go in with uv (from PyPI, into the environment), which resolves and installs
# them in 10-15 s where pip takes 80 s (2 cores, uv's cache warm); with pip when uv cannot be had or fails. torch
# too, with the local wheel folders and constraints of the machine's pip configuration (UV_PIP_OPTIONS), and with
# pip when uv fails: pip reads that configuration itself. uv does not compile the modules to bytecode as it
# installs (with --compile-bytecode, as pip does, it compiles every module: 60 s of CPU here, 25 s of wall time);
# the first process that imports a module writes its bytecode instead (PYTHONDONTWRITEBYTECODE, above), and every
# later one reads it.
UV := $(VENV)/bin/uv
UV_PIP_OPTIONS = $$($(PY) -m pip config list 2>/dev/null | \
  sed -n "s/^[^.]*\.\(find-links\|constraint\)='\(.*\)'$$/\1 \2/p" | \
  while read -r option values; do for value in $$values; do printf -- '--%s %s ' "$$option" "$$value"; done; done)
$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@$(PY) -m pip install -q uv >/dev/null 2>&1 || true
	@$(PY) -c "import torch" 2>/dev/null || \
	  ($(UV) --version >/dev/null 2>&1 && \
	   $(UV) pip install -q --python $(PY) $(UV_PIP_OPTIONS) "$(TORCH_SPEC)") || \
	  $(PY) -m pip install -q "$(TORCH_SPEC)"
	@if $(UV) --version >/dev/null 2>&1; then \
	  echo "$(UV) pip install -e '.[book,course,dev]'"; \
	  $(UV) pip install -q --python $(PY) -e '.[book,course,dev]' || \
	  $(PY) -m pip install -q -e '.[book,course,dev]'; \
	else \
	  echo "$(PY) -m pip install -e '.[book,course,dev]'"; \
	  $(PY) -m pip install -q -e '.[book,course,dev]'; \
	fi
	@touch $(STAMP)

# Fashion-MNIST from Debian's dataset-fashion-mnist when apt is there and we are root; carry on otherwise
# (calib.data then downloads it from the official location into its cache when a network is available).
data:
	@if [ -d "$(FASHION_MNIST_DIR)" ]; then \
	  echo "Fashion-MNIST: $(FASHION_MNIST_DIR)"; \
	elif command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
	  echo "Fashion-MNIST: installing Debian's dataset-fashion-mnist"; \
	  (DEBIAN_FRONTEND=noninteractive apt-get install -y -q dataset-fashion-mnist >/dev/null 2>&1 || \
	   (apt-get update -q >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q dataset-fashion-mnist >/dev/null 2>&1)) \
	  || echo "Fashion-MNIST: apt-get could not install dataset-fashion-mnist; carrying on without it"; \
	else \
	  echo "Fashion-MNIST: not installed (no apt-get or not root); carrying on without it"; \
	fi

# Debian's chromium, for the test that opens every built page offline (calib book check); when it cannot be
# installed, that test skips and says why.
browser:
	@if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then \
	  echo "chromium: $$(command -v chromium || command -v chromium-browser)"; \
	elif command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
	  echo "chromium: installing Debian's chromium"; \
	  (DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium >/dev/null 2>&1 || \
	   (apt-get update -q >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium >/dev/null 2>&1)) \
	  || echo "chromium: apt-get could not install it; the browser test will skip"; \
	else \
	  echo "chromium: not installed (no apt-get or not root); the browser test will skip"; \
	fi

clean:
	rm -rf _build
