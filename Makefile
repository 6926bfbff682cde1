# The Makefile is the interface: install, run, test, lint, format, bench, synth, deploy, destroy, layer.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
HOST ?= 127.0.0.1
PORT ?= 8000
# One stamp per dependency set: `make run` installs only what serving needs (runtime + local extras);
# test/lint/format/bench add the test tools (and the CDK libraries the infra tests synthesise with);
# synth/deploy/destroy/layer add the CDK libraries only.
STAMP_LOCAL := $(VENV)/.installed-local
STAMP_DEV := $(VENV)/.installed-dev
STAMP_INFRA := $(VENV)/.installed-infra

.PHONY: install run test test-deployed lint format bench clean clean-data browser

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP_LOCAL): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e ".[local]"
	touch $@

$(STAMP_DEV): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $@ $(STAMP_LOCAL) $(STAMP_INFRA)

$(STAMP_INFRA): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e ".[infra]"
	touch $@

install: $(STAMP_DEV)

run: $(STAMP_LOCAL)
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/agent-core serve --host $(HOST) --port $(PORT)

# The browser tests drive Debian's Chromium (Playwright never downloads a browser of its own): install it
# where it is missing and apt-get can; otherwise those tests skip, saying so.
CHROMIUM := /usr/bin/chromium
browser:
	@test -x $(CHROMIUM) || { command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ] && \
	  apt-get update -q >/dev/null && apt-get install -y -q chromium >/dev/null; } || \
	  echo "make: $(CHROMIUM) could not be installed; the browser tests will skip" >&2

test: $(STAMP_DEV) browser
	$(BIN)/ruff check shared functions tests bench infra
	$(BIN)/mypy
	$(BIN)/lint-imports
	$(BIN)/python -m pytest

# The deployed-emulation tier alone (part of `make test`; see docs/infrastructure.md), in one process: its
# tests share one session fixture, so more pytest-xdist workers would only wait.
test-deployed: $(STAMP_DEV)
	$(BIN)/python -m pytest -m deployed -n 0

lint: $(STAMP_DEV)
	$(BIN)/ruff check shared functions tests bench infra
	$(BIN)/ruff format --check shared functions tests bench infra
	$(BIN)/mypy
	$(BIN)/lint-imports  # the architecture rules: [tool.importlinter] in pyproject.toml

format: $(STAMP_DEV)
	$(BIN)/ruff check --fix shared functions tests bench infra
	$(BIN)/ruff format shared functions tests bench infra

bench: $(STAMP_DEV)
	$(BIN)/python -m bench.run_all

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .import_linter_cache

# Wipe the local server's data (the embedded store): stop the server first.
clean-data:
	rm -rf $(or $(AGENT_DATA_DIR),.agent-core)

# --- infrastructure (CDK app in infra/, see docs/infrastructure.md) ---
# The CDK CLI is pinned to 2.x (CLI 3.x cannot read assemblies from aws-cdk-lib 2.x) and installed
# into ./node_modules on first use. Context goes through CDK_ARGS, e.g.
#   make deploy CDK_ARGS="-c stage=prod -c authMode=jwt -c jwtIssuer=... -c jwtJwksUrl=..."
CDK_CLI_VERSION := ^2.1148
CDK := node_modules/.bin/cdk
CDK_RUN := JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION=20 npx --no-install cdk
CDK_ARGS ?=
DEPLOY_FLAGS ?= --require-approval never
LAYER_DIR := .build/layer
LAYER_ARCH ?= arm64

.PHONY: synth deploy destroy layer

$(CDK):
	npm install --prefix . --no-save --no-package-lock --no-audit --no-fund --loglevel=error "aws-cdk@$(CDK_CLI_VERSION)"

synth: $(STAMP_INFRA) $(CDK)
	$(CDK_RUN) synth --quiet $(CDK_ARGS)
	@echo "templates in cdk.out/ (cdk-nag AwsSolutions checked during synth)"

deploy: $(STAMP_INFRA) $(CDK)
	$(CDK_RUN) deploy $(DEPLOY_FLAGS) --outputs-file cdk.out/outputs.json $(CDK_ARGS)

destroy: $(STAMP_INFRA) $(CDK)
	$(CDK_RUN) destroy --force $(CDK_ARGS)

layer: $(STAMP_INFRA)
	$(BIN)/python -m infra.layer_build $(LAYER_DIR) --architecture $(LAYER_ARCH)
	du -sh --apparent-size $(LAYER_DIR)
