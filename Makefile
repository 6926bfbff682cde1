# The Makefile is the interface: install, run, test, lint, bench (synth/deploy arrive with the infrastructure issue).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: install run test lint format bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

install: $(STAMP)

run: install
	$(BIN)/agent-core serve --host $(HOST) --port $(PORT)

test: install
	$(BIN)/ruff check shared functions tests bench
	$(BIN)/mypy
	$(BIN)/python -m pytest

lint: install
	$(BIN)/ruff check shared functions tests bench
	$(BIN)/ruff format --check shared functions tests bench
	$(BIN)/mypy

format: install
	$(BIN)/ruff check --fix shared functions tests bench
	$(BIN)/ruff format shared functions tests bench

bench: install
	$(BIN)/python -m bench.run_all

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
