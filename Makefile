# Perch: `make run` sets up and starts the daemon, `make test` sets up and runs every check.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
CONFIG ?= config.yaml

.PHONY: setup run init test lint format typecheck unit bench install-service clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

init: $(STAMP)
	$(BIN)/perch init --config $(CONFIG)

run: init
	$(BIN)/perch run --config $(CONFIG)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

typecheck: $(STAMP)
	$(BIN)/mypy agents bot channels

unit: $(STAMP)
	$(BIN)/python -m pytest -q -p no:cacheprovider

test: lint typecheck unit

bench: $(STAMP)
	$(BIN)/python -m bench.run_all

install-service:
	systemd/install.sh

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
