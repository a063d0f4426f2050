# gputui: two commands do all the set-up on a fresh machine.
#   make demo   - create .venv, install gputui alone, open the console on a simulated cluster
#   make test   - create .venv, install the dev extras too, run lint, types and tests
#   make install-team PREFIX=/opt/gputui BINDIR=/usr/local/bin
#               - one install every user of this machine runs (scripts/install-team)
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
RUN_STAMP := $(VENV)/.installed-run
PREFIX ?= /opt/gputui
BINDIR ?= /usr/local/bin

.PHONY: demo test lint typecheck layers unit bench bench-check bench-quick clean help install-team locale

help:
	@echo "make demo | test | lint | bench | bench-check | install-team | clean"

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# The dev extras (test, lint and type tools) for everything but the demo, which needs
# gputui's own dependencies only: a venv with the dev extras serves both.
$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@touch $@ $(RUN_STAMP)

$(RUN_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	@touch $@

# The translations: each gputui/locale/*/LC_MESSAGES/gputui.po compiled to the .mo the
# package ships (no GNU gettext needed; a test checks the .mo is up to date).
locale:
	$(PYTHON) scripts/msgfmt.py

demo: $(RUN_STAMP)
	$(BIN)/gputui demo

# A venv under PREFIX that every user can read and run, gputui linked into BINDIR
# (PYTHON=... picks the interpreter; else the first one all users can run).
install-team:
	scripts/install-team --prefix "$(PREFIX)" --bindir "$(BINDIR)" \
	  $(if $(filter command line environment,$(origin PYTHON)),--python "$(PYTHON)")

lint: $(STAMP)
	$(BIN)/ruff check gputui tests bench
	$(BIN)/ruff format --check gputui tests bench
	$(BIN)/lint-imports

typecheck: $(STAMP)
	$(BIN)/mypy

# The whole suite, in parallel (pytest-xdist): the tests that need root or sshd run a
# module to a worker, the Slurm ones in one (tests/privileged.py), and hypothesis runs its ci profile (every test's own
# example counts; tests/hypoprofiles.py). Workers: one a core, at least 4 (much of the
# suite waits on processes and sockets: on 2 cores 4 workers leave them idle some 12% of
# the time, 3 workers 20%), at most 8. A quick local pass instead:
#   .venv/bin/pytest -n 4 --hypothesis-profile=dev
TEST_WORKERS ?= $(shell n=$$(nproc 2>/dev/null || echo 2); echo $$(( n < 4 ? 4 : n > 8 ? 8 : n )))
# A worker that dies (a test stuck past its timeout and its grace: tests/hangwatch.py)
# ends the run with that failure: replaced, loadgroup gives the test to the next worker.
test: lint typecheck
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadgroup --max-worker-restart 0

bench: $(STAMP)
	$(BIN)/python bench/fanout.py --hosts 200 --seconds 20
	$(BIN)/python bench/decode.py --gpus 8
	$(BIN)/python bench/render.py --gpus 4096
	$(BIN)/python bench/model_rows.py
	$(BIN)/python bench/nvml_real.py
	$(BIN)/python bench/sched.py
	$(BIN)/python bench/consoles.py --hosts 1000 --consoles 50

# Every benchmark, smaller (about three minutes on 2 cores), each figure against its
# target (a ratio to its same-run baseline, or README's absolute one); exit 1 on a miss.
# Run it before every change to a hot path. Not part of `make test`.
bench-check: $(STAMP)
	$(BIN)/python bench/check.py

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache build *.egg-info
