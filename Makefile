# Development entry points. `make` (or `make help`) lists them.
# Everything runs from .venv, created and kept in step with pyproject.toml the same way
# scripts/test and scripts/example do it.

.DEFAULT_GOAL := help
SHELL := bash

VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.akadze-installed
PYTHON ?= python3

.PHONY: help check test example bench regen regen-golden db db-stop screenshots

help: ## Show this list of targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  %-13s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

$(STAMP): pyproject.toml
	@$(BIN)/python -c '' 2>/dev/null || { rm -rf $(VENV) && $(PYTHON) -m venv $(VENV); }
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --upgrade pip
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[dev]'
	@touch $@

check: $(STAMP) ## Lint and type-check: ruff format --check, ruff check, mypy
	$(BIN)/ruff format --check .
	$(BIN)/ruff check .
	$(BIN)/mypy

test: ## Run all checks and the test suite (bash scripts/test; ARGS="..." go to pytest)
	bash scripts/test $(ARGS)

example: ## Run the quickstart example against AKADZE_DATABASE_URL or the embedded PostgreSQL
	bash scripts/example

bench: $(STAMP) ## Run the benchmarks (python -m bench)
	$(BIN)/python -m bench

regen: $(STAMP) ## Regenerate the example producer's typed clients
	$(BIN)/akadze codegen examples.worker_app:app --out examples/producer/clients

regen-golden: $(STAMP) ## Regenerate the codegen goldens and typing snapshots (tests/codegen/regen.py)
	$(BIN)/python -m tests.codegen.regen

screenshots: $(STAMP) ## Photograph every dashboard page into docs/dashboard/ (needs chromium)
	AKADZE_SCREENSHOTS=docs/dashboard $(BIN)/python -m pytest tests/web/test_dashboard_browser.py tests/web/test_dashboard_browser_tools.py tests/web/test_workflow_browser.py -q -k "photographed or phone or trends or dark or graph_links"

db: $(STAMP) ## Start (or attach to) the embedded dev PostgreSQL and print its URL
	@$(BIN)/python -c 'from akadze import embedded; print(embedded.start())'

db-stop: $(STAMP) ## Stop the embedded dev PostgreSQL
	@$(BIN)/python -c 'from akadze import embedded; embedded.stop()'
