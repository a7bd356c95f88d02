# giant-assets: `make demo` and `make test` set themselves up on a fresh clone (Python >= 3.11 only).
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export DAGSTER_HOME := $(CURDIR)/dagster_home
# Dagster 1.13 warns on every `dagster asset materialize` that `dg launch` supersedes it (docs/environment.md)
export PYTHONWARNINGS := ignore:Function `asset_materialize_command` is superseded:FutureWarning
export GIANT_DATA_DIR ?= $(CURDIR)/data
VIEW_PORT ?= 8765

.PHONY: demo cluster-demo test ui scripted-model view lint bench clean

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

# the Dagster UI and daemon (dagster-webserver + dagster-daemon, what `dagster dev` ran) and the demo's
# scripted model on 127.0.0.1:47321, so the demo-* experiments re-run from the UI; the UI's viewer
# links point at `make view` on VIEW_PORT (GIANT_VIEWER_URL overrides)
ui: $(STAMP)
	GIANT_VIEWER_URL="$${GIANT_VIEWER_URL:-http://127.0.0.1:$(VIEW_PORT)/}" $(BIN)/python -m giant_assets.demo.ui -w workspace.yaml

# the scripted model alone (no key, no network), on the demo-* experiments' port; Ctrl-C stops it
scripted-model: $(STAMP)
	$(BIN)/giant-scripted-model --port 47321

# the trajectory viewer (data/viewer/), served on loopback only by giant-view, which draws a page's
# missing pictures on its first visit: VIEW_PORT=9000 make view
view: $(STAMP)
	@test -d "$(GIANT_DATA_DIR)/viewer" || { echo "no $(GIANT_DATA_DIR)/viewer yet: run make demo (or materialize trajectory_viewer)"; exit 1; }
	$(BIN)/python -m giant_assets.report.viewer.serve --port $(VIEW_PORT) --dir "$(GIANT_DATA_DIR)/viewer"

lint: $(STAMP)
	$(BIN)/ruff check giant_assets tests benchmarks
	$(BIN)/ruff format --check giant_assets tests benchmarks

bench: $(STAMP)
	$(BIN)/python -m benchmarks

clean:
	rm -rf $(VENV) data
