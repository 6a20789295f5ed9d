# pinbench: every target a person runs is also what CI runs (.ci/run, .github/workflows/).
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PINBENCH := $(BIN)/pinbench
CHECKPOINT ?=
LIMIT ?=
GPUS ?= 4
RECIPE ?=
DEST ?=
RUN_ARGS ?=
VIDEOS ?=
TORCH_PINS := torch==2.14.1 torchvision==0.29.1

.DEFAULT_GOAL := help
.PHONY: help setup test lint demo export

help: ## show this help
	@echo "pinbench - pinned, reproducible benchmark recipes"
	@echo
	@grep -E '^[a-zA-Z_%-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/:.*## /\t/' | expand -t 24
	@echo
	@echo "recipes: $$(ls recipes | grep -v __ | tr '_' '-' | tr '\n' ' ')"
	@echo "examples: make recipe-paibench-c CHECKPOINT=Cosmos3-Nano   make recipe-paibench-c CHECKPOINT=Cosmos3-Nano LIMIT=4"

STAMP := $(VENV)/.pinbench-installed

setup: $(STAMP) ## create .venv with pinned torch and pinbench (editable) plus test tools (test/demo do it too)

# Re-installs when pyproject.toml changes (new recipe entry points, new dependencies).
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet $(TORCH_PINS)
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $@

test: $(STAMP) ## run the test suite (CPU, offline)
	$(BIN)/python -m pytest -q

lint: $(STAMP) ## ruff, hadolint on every Dockerfile, and the Dockerfile policy tests
	$(BIN)/ruff check common recipes tests
	$(BIN)/python -m pytest -q tests/test_dockerfiles.py

demo: $(STAMP) ## run every recipe's fixture mode on CPU; scorecards and a report under runs/demo
	$(PINBENCH) demo --out runs/demo

build-%: $(STAMP) ## build a recipe's images from its exported directory (needs Docker)
	$(PINBENCH) build $*

recipe-%: build-% ## build, run (docker runtime) and diff a recipe: make recipe-paibench-c CHECKPOINT=Cosmos3-Nano
	$(PINBENCH) run $* --checkpoint "$(CHECKPOINT)" --runtime docker --gpus $(GPUS) \
		$(if $(LIMIT),--limit $(LIMIT)) $(if $(VIDEOS),-o videos=$(VIDEOS)) $(RUN_ARGS)

diff-%: $(STAMP) ## diff a finished run against its reference: make diff-paibench-c CHECKPOINT=Cosmos3-Nano
	$(PINBENCH) diff runs/$*/$(CHECKPOINT)$(if $(LIMIT),-smoke)/scorecard.json

export: $(STAMP) ## write a self-contained recipe: make export RECIPE=paibench-c DEST=/tmp/paibench-c
	@test -n "$(RECIPE)" -a -n "$(DEST)" || { echo "usage: make export RECIPE=<name> DEST=<dir>"; exit 2; }
	$(PINBENCH) export $(RECIPE) $(DEST)
