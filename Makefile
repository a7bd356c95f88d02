# giant-assets: `make demo` and `make test` set themselves up on a fresh clone (Python >= 3.11 only).
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export DAGSTER_HOME := $(CURDIR)/dagster_home
export GIANT_DATA_DIR ?= $(CURDIR)/data
VIEW_PORT ?= 8765

.PHONY: demo cluster-demo test ui view lint bench clean

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	@touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python -m giant_assets.demo

# PostgreSQL + Redis from wheels, two Celery workers, the daemon, one shared rate limit (docs/scale-out.md)
cluster-demo: $(STAMP)
	$(BIN)/python -m giant_assets.cluster

test: $(STAMP)
	$(BIN)/python -m pytest -q -n 2 --dist loadgroup

ui: $(STAMP)
	$(BIN)/dagster dev -w workspace.yaml

# the trajectory viewer's static sites (data/viewer/), served on loopback only: VIEW_PORT=9000 make view
view:
	@test -d "$(GIANT_DATA_DIR)/viewer" || { echo "no $(GIANT_DATA_DIR)/viewer yet: run make demo (or materialize trajectory_viewer)"; exit 1; }
	@echo "trajectory viewer: http://127.0.0.1:$(VIEW_PORT)/ (remote machine: ssh -L $(VIEW_PORT):127.0.0.1:$(VIEW_PORT) <host>)"
	$(PYTHON) -m http.server $(VIEW_PORT) --bind 127.0.0.1 --directory "$(GIANT_DATA_DIR)/viewer"

lint: $(STAMP)
	$(BIN)/ruff check giant_assets tests benchmarks
	$(BIN)/ruff format --check giant_assets tests benchmarks

bench: $(STAMP)
	$(BIN)/python -m benchmarks

clean:
	rm -rf $(VENV) data
