# Perch: `make run` sets up and starts the daemon, `make test` sets up and runs every check.
# `make run` installs only what the daemon needs; the checks add the dev tools (.[dev]).
# It runs on ./config.local.yaml if you made one (perch onboard does), else the tracked
# ./config.yaml; CONFIG=path picks another file.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
DEV    := $(VENV)/.installed-dev
CONFIG ?=
CONFIG_ARG := $(if $(CONFIG),--config $(CONFIG))
LOWEST := .venv-lowest
SYNAPSE := .venv-synapse

.PHONY: setup run init test test-lowest lint format typecheck unit docs bench install-service synapse clean

setup: $(DEV)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e .
	touch $(STAMP)

$(DEV): $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(DEV)

init: $(STAMP)
	$(BIN)/perch init $(CONFIG_ARG)

run: init
	$(BIN)/perch run $(CONFIG_ARG)

lint: $(DEV)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: $(DEV)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

typecheck: $(DEV)
	$(BIN)/mypy agents bot channels markup

unit: $(DEV)
	$(BIN)/python -m pytest -q -p no:cacheprovider

# The manual (docs/, mkdocs.yml): built strictly, so a broken link or a page missing from the
# nav fails like a failing test. The site goes to ./site (ignored); `mkdocs serve` shows it live.
docs: $(DEV)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

test: lint typecheck docs unit

# The suite again on the lowest version pyproject.toml allows of each direct dependency (uv's
# lowest-direct resolution), in a venv of its own: proves the declared floors. uv's cache
# (~/.cache/uv) makes a rerun quick. pip too: the install tests build Perch with the venv's own.
test-lowest: $(STAMP)
	test -x $(BIN)/uv || $(BIN)/python -m pip install --quiet uv
	$(BIN)/uv venv --quiet --clear --python $(BIN)/python $(LOWEST)
	$(BIN)/uv pip install --quiet --python $(LOWEST)/bin/python --resolution lowest-direct -e '.[dev]' 'pip>=24'
	$(LOWEST)/bin/python -m pytest -q -p no:cacheprovider

# A real Matrix homeserver for the Matrix channel's tests (tests/matrix_server.py looks for it
# here; without it those tests skip). A venv of its own: Synapse's pins must not fight Perch's
# floors, and `make test-lowest` does not depend on it.
synapse: $(SYNAPSE)/.installed

$(SYNAPSE)/.installed: | $(STAMP)
	test -x $(BIN)/uv || $(BIN)/python -m pip install --quiet uv
	$(BIN)/uv venv --quiet --clear --python $(BIN)/python $(SYNAPSE)
	$(BIN)/uv pip install --quiet --python $(SYNAPSE)/bin/python 'matrix-synapse>=1.120,<2'
	touch $@

bench: $(DEV)
	$(BIN)/python -m bench.run_all

install-service:
	systemd/install.sh

clean:
	rm -rf $(VENV) $(LOWEST) $(SYNAPSE) .pytest_cache .mypy_cache .ruff_cache site
