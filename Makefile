# giant-assets: `make demo` and `make test` set themselves up on a fresh clone (Python >= 3.11 only).
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export DAGSTER_HOME := $(CURDIR)/dagster_home
export GIANT_DATA_DIR ?= $(CURDIR)/data

.PHONY: demo test ui lint bench clean

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	@touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python -m giant_assets.demo

test: $(STAMP)
	$(BIN)/python -m pytest -q -n 2 --dist loadgroup

ui: $(STAMP)
	$(BIN)/dagster dev -w workspace.yaml

lint: $(STAMP)
	$(BIN)/ruff check giant_assets tests benchmarks
	$(BIN)/ruff format --check giant_assets tests benchmarks

bench: $(STAMP)
	$(BIN)/python -m benchmarks

clean:
	rm -rf $(VENV) data
