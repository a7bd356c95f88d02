# giant-assets: `make demo` and `make test` set themselves up on a fresh clone (Python >= 3.11 only).
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
export DAGSTER_HOME := $(CURDIR)/dagster_home
# Dagster 1.13 warns on every `dagster asset materialize` that `dg launch` supersedes it (docs/environment.md)
export PYTHONWARNINGS := ignore:Function `asset_materialize_command` is superseded:FutureWarning
export GIANT_DATA_DIR ?= $(CURDIR)/data
VIEW_PORT ?= 8765

.PHONY: demo deep-zoom cluster-demo test ui scripted-model view lint perf bench clean

# Two installs, each once per pyproject.toml change: the platform (what `make demo`, `make ui` and
# `make view` run: ~1.25 GB) and the test tools on top of it (`make test`, `make lint`, `make perf`,
# `make cluster-demo`: ~0.2 GB more). Both come from the Python package index (PyPI): the first
# install needs it; nothing after it does. INDEX_CHECK fails fast, saying so, when the index cannot be
# reached (pip itself would retry for about a minute, then name one package). The platform's install
# also needs the npm registry once, for OpenSeadragon (below).
RUN_STAMP := $(VENV)/.installed-run
# $(call INDEX_CHECK,what,size): one look at the index (no retries, 15 s) before the first download
INDEX_CHECK = $(BIN)/pip index versions dagster --retries 0 --timeout 15 >/dev/null 2>&1 || { \
	echo "make: installing $(1) needs the Python package index (PyPI, or the index pip is configured" \
	"with: PIP_INDEX_URL), about $(2) once installed, a few minutes; it cannot be reached now." \
	"Connect, or point PIP_INDEX_URL at a mirror, and run make again. Once installed, make demo needs" \
	"no network." >&2; exit 1; }
DEV_STAMP := $(VENV)/.installed-dev
# OpenSeadragon (deep zoom in the viewer and the review pages) from the npm registry, pinned by
# frontend/package-lock.json, copied where the servers serve it (git-ignored); never from a CDN at run
# time. Without it the pages show the static overview and say how to get deep zoom.
OSD := giant_assets/report/static/vendor/openseadragon
OSD_BUILD := frontend/node_modules/openseadragon/build/openseadragon
NPM_CHECK = command -v npm >/dev/null || { echo "make: deep zoom needs node 20 and npm (Debian: apt-get" \
	"install nodejs npm); install them and run make again." >&2; exit 1; }; \
	npm ping --fetch-retries 0 --fetch-timeout 15000 >/dev/null 2>&1 || { \
	echo "make: installing OpenSeadragon (deep zoom, 0.5 MB) needs the npm registry (or the one npm is" \
	"configured with: npm config set registry), once; it cannot be reached now. Connect, or point npm" \
	"at a mirror, and run make again." >&2; exit 1; }

$(OSD)/openseadragon.min.js: frontend/package.json frontend/package-lock.json
	@$(NPM_CHECK)
	cd frontend && npm ci --no-audit --no-fund --silent
	rm -rf $(OSD) && mkdir -p $(OSD)
	cp $(OSD_BUILD)/openseadragon.min.js $(OSD_BUILD)/../../LICENSE.txt $(OSD)/
	cp -r $(OSD_BUILD)/images $(OSD)/images
	@touch $@

$(RUN_STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@$(call INDEX_CHECK,the platform,1.25 GB)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e .
	@touch $(RUN_STAMP)

$(DEV_STAMP): $(RUN_STAMP)
	@$(call INDEX_CHECK,the test tools,0.2 GB)
	$(BIN)/pip install --quiet -e '.[dev]'
	@touch $(DEV_STAMP)

# deep zoom for the pages the demo, the UI and the viewer show: tried, not required (without npm or its
# registry they show the static overview); the tests require it
deep-zoom:
	@$(MAKE) --no-print-directory $(OSD)/openseadragon.min.js || echo "make: going on without deep zoom:" \
	"the viewer and review pages show the static overview (install node 20 + npm and run make again)" >&2

demo: $(RUN_STAMP) deep-zoom
	$(BIN)/python -m giant_assets.demo

# PostgreSQL + Redis from wheels, two Celery workers, the daemon, one shared rate limit (docs/scale-out.md)
cluster-demo: $(DEV_STAMP)
	$(BIN)/python -m giant_assets.cluster

test: $(DEV_STAMP) $(OSD)/openseadragon.min.js
	$(BIN)/python -m pytest -q -n 3 --dist loadgroup

# the Dagster UI and daemon (dagster-webserver + dagster-daemon, what `dagster dev` ran) and the demo's
# scripted model on 127.0.0.1:47321, so the demo-* experiments re-run from the UI; the UI's viewer
# links point at `make view` on VIEW_PORT (GIANT_VIEWER_URL overrides)
ui: $(RUN_STAMP) deep-zoom
	GIANT_VIEWER_URL="$${GIANT_VIEWER_URL:-http://127.0.0.1:$(VIEW_PORT)/}" $(BIN)/python -m giant_assets.demo.ui -w workspace.yaml

# the scripted model alone (no key, no network), on the demo-* experiments' port; Ctrl-C stops it
scripted-model: $(RUN_STAMP)
	$(BIN)/giant-scripted-model --port 47321

# the trajectory viewer (data/viewer/), served on loopback only by giant-view, which draws a page's
# missing pictures on its first visit: VIEW_PORT=9000 make view
view: $(RUN_STAMP) deep-zoom
	@test -d "$(GIANT_DATA_DIR)/viewer" || { echo "no $(GIANT_DATA_DIR)/viewer yet: run make demo (or materialize trajectory_viewer)"; exit 1; }
	$(BIN)/python -m giant_assets.report.viewer.serve --port $(VIEW_PORT) --dir "$(GIANT_DATA_DIR)/viewer"

lint: $(DEV_STAMP)
	$(BIN)/ruff check giant_assets tests perf examples
	$(BIN)/ruff format --check giant_assets tests perf examples

# the performance measurements (perf/, docs/perf.md); `make bench` is an old alias of it
perf: $(DEV_STAMP)
	$(BIN)/python -m perf

bench: perf

clean:
	rm -rf $(VENV) data frontend/node_modules $(OSD)
