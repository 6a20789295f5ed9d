# pinbench: every target a person runs is also what CI runs (.ci/run, .github/workflows/).
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PINBENCH := $(BIN)/pinbench
CHECKPOINT ?=
LIMIT ?=
GPUS ?=
RECIPE ?=
DEST ?=
RUN_ARGS ?=
VIDEOS ?=
GPU_CHECK_OUT ?=
V ?=
GPU_CHECK_ARGS ?=
BASE_IMAGE ?=
SMOKE_BASES ?=
SMOKE_ARGS ?=
UV_VERSION := 0.13.9
# pytest-xdist workers of `make test`; each test file runs whole in one of them (its module fixtures once)
TEST_WORKERS ?= auto
TOOLS := .tools
UV := $(TOOLS)/bin/uv

.DEFAULT_GOAL := help
.PHONY: help setup test test-old-av lint docs docs-site demo export gpu-check docker-smoke

help: ## show this help
	@echo "pinbench - pinned, reproducible benchmark recipes"
	@echo
	@grep -E '^[a-zA-Z_%-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/:.*## /\t/' | expand -t 24
	@echo
	@echo "recipes: $$(ls recipes | grep -v __ | tr '_' '-' | tr '\n' ' ')"
	@echo "examples: make recipe-paibench-c CHECKPOINT=Cosmos3-Nano GPUS=4   make recipe-paibench-c CHECKPOINT=Cosmos3-Nano GPUS=4 LIMIT=4"

STAMP := $(VENV)/.pinbench-installed

setup: $(STAMP) ## create .venv from uv.lock (every extra plus the dev tools); test/lint/demo do it too
	@echo "pinbench $$($(PINBENCH) --version | cut -d' ' -f2) is $(abspath $(PINBENCH)); to put it on PATH:"
	@echo '  export PATH="$(abspath $(BIN)):$$PATH"'

$(UV):
	$(PYTHON) -m venv $(TOOLS)
	$(TOOLS)/bin/python -m pip install --quiet uv==$(UV_VERSION)

# Re-syncs when the lock or pyproject.toml changes. --locked: fail instead of re-resolving a stale lock.
# --compile-bytecode, and compileall for this checkout's own sources: where PYTHONDONTWRITEBYTECODE is set (as on
# the development machine and in CI) nothing is ever cached, and every command compiled every module it imported
# (2.2 s of a 7 s CameraBench run). Measured: 40 s once, here. A source edited later is compiled again in memory.
$(STAMP): pyproject.toml setup.py uv.lock | $(UV)
	$(UV) sync --locked --all-extras --python $(PYTHON) --quiet --compile-bytecode
	$(BIN)/python -m compileall -q common recipes tools > /dev/null
	touch $@

test: $(STAMP) ## run the test suite (CPU, offline), one worker per core (TEST_WORKERS=1 for one process)
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile

# Each PyAV older than the venv's that a recipe lock pins (camerabench's 14.2.0, MIND's 16.1.0 kept from upstream):
# pinbench imported PyAV 17's av.index, so it failed to import in those images, and no test ran there.
# tools/old_av.py reads each lock's lines as pip does (packaging's Requirement: any case, extras, blanks, markers):
# AV[x] == 14.2.0 was once skipped unsaid. A line naming av that pins no plain version (av>=14, av===14.2.0,
# av==14.2.0rc1) stops the target, naming its lock.
test-old-av: $(STAMP) ## tests/test_video.py under each older PyAV a recipe's requirements.lock pins (needs PyPI)
	@set -e; now=$$($(BIN)/python -c 'import av; print(av.__version__)'); \
	versions=$$($(BIN)/python tools/old_av.py recipes/*/requirements.lock); \
	for v in $$versions; do \
	  [ "$$(printf '%s\n' "$$v" "$$now" | sort -V | head -1)" = "$$v" ] && [ "$$v" != "$$now" ] || continue; \
	  rm -rf .old-av/$$v; $(TOOLS)/bin/python -m pip install --quiet --no-deps --only-binary=:all: \
	    --python-version $$($(BIN)/python -c 'import sys; print("%d.%d" % sys.version_info[:2])') --target .old-av/$$v av==$$v; \
	  echo "PyAV $$v:"; PYTHONPATH=.old-av/$$v $(BIN)/python -m pytest -q -p no:randomly tests/test_video.py; \
	done

lint: $(STAMP) ## ruff, generated tables vs recipe.yaml, the documentation site, hadolint and the Dockerfile policy
	$(BIN)/ruff check common recipes tests tools conftest.py docs/conf.py
	$(PINBENCH) docs --check
	$(MAKE) --no-print-directory docs-site
	$(BIN)/python -m pytest -q tests/test_dockerfiles.py

docs: $(STAMP) ## regenerate the documentation's tables (recipe READMEs, docs/environment.md) from recipe.yaml
	$(PINBENCH) docs

# -W --keep-going: every warning (a broken link or anchor, a page in no table of contents) is named, then fails it.
# -E: read every page again, so a warning of an unchanged page is not hidden by the last build's cache.
docs-site: $(STAMP) ## build the documentation site into site/ (Sphinx, warnings are errors); open site/index.html
	$(BIN)/sphinx-build -W --keep-going -E -q -b html -c docs . site

demo: $(STAMP) ## every recipe's fixture mode on CPU: one line each, a summary, a report under runs/demo (V=1: all output)
	$(PINBENCH) demo --out runs/demo $(if $(V),-v)

gpu-check: $(STAMP) ## one lent GPU, offline, < 8 min: RAFT/LPIPS/CLIP on CUDA vs CPU, verdict flips, throughput (GPU_CHECK_OUT=DIR)
	$(BIN)/python tools/gpu_check.py $(if $(GPU_CHECK_OUT),--out $(GPU_CHECK_OUT)) $(GPU_CHECK_ARGS)

build-%: $(STAMP) ## build a recipe's images (needs Docker); BASE_IMAGE="[Dockerfile.x[:ARG]=]IMAGE ..." swaps bases
	$(PINBENCH) build $* $(foreach b,$(BASE_IMAGE),--base-image '$(b)')

# The doctor first (seconds: a misspelled CHECKPOINT, no GPU, no token), then the build (long), then the run.
recipe-%: $(STAMP) ## doctor, build (needs Docker), run (docker runtime) and diff a recipe: make recipe-paibench-c CHECKPOINT=Cosmos3-Nano
	$(PINBENCH) run $* --checkpoint "$(CHECKPOINT)" --runtime docker --build $(foreach b,$(BASE_IMAGE),--base-image '$(b)') \
		$(if $(GPUS),--gpus $(GPUS)) $(if $(LIMIT),--limit $(LIMIT)) $(if $(VIDEOS),-o videos=$(VIDEOS)) $(RUN_ARGS)

diff-%: $(STAMP) ## diff a finished run against its reference: make diff-paibench-c CHECKPOINT=Cosmos3-Nano
	$(PINBENCH) diff runs/$*/$(CHECKPOINT)$(if $(LIMIT),-smoke)/scorecard.json

check-%: $(STAMP) ## check a run directory (samples, counts, report, reference): make check-paibench-c CHECKPOINT=Cosmos3-Nano
	$(PINBENCH) check runs/$*/$(CHECKPOINT)$(if $(LIMIT),-smoke)

docker-smoke: $(STAMP) ## build every image whose base is reachable, run each fixture in it (= the host's), then the real-engine tests, on SMOKE_BASES (needs Docker)
	$(BIN)/python tools/docker_smoke.py $(foreach b,$(SMOKE_BASES),--base '$(b)') $(SMOKE_ARGS)

export: $(STAMP) ## write a self-contained recipe: make export RECIPE=paibench-c DEST=/tmp/paibench-c
	@test -n "$(RECIPE)" -a -n "$(DEST)" || { echo "usage: make export RECIPE=<name> DEST=<dir>"; exit 2; }
	$(PINBENCH) export $(RECIPE) $(DEST)
