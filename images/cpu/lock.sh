#!/usr/bin/env bash
# Regenerate images/cpu/requirements.lock from uv.lock (the development and CI lock): every extra, the
# `image` group (the build backend), no dev tools, hashed. The image thus scores with exactly the packages
# CI tests with. Run after `uv lock`; tests/test_dockerlint.py fails when this file is stale.
set -euo pipefail
cd "$(dirname "$0")/../.."
UV="${UV:-.tools/bin/uv}"
"$UV" export --locked --all-extras --no-dev --group image --no-emit-project --format requirements-txt \
  --no-header --output-file images/cpu/requirements.lock --quiet
