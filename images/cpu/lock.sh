#!/usr/bin/env bash
# Regenerate images/cpu/requirements.lock: pinbench's dependencies (pyproject.toml) plus its build
# backend (requirements.in), hashed, for the CPU image's platform (CPython 3.11, linux x86_64).
# Versions are constrained to the dev venv (`make setup`) so the image scores with the same packages.
# Needs PyPI; run from anywhere, then `make lint` and rebuild the image.
set -euo pipefail
cd "$(dirname "$0")/../.."
VENV="${VENV:-.venv}"
constraints="$(mktemp)"
trap 'rm -f "$constraints"' EXIT
"$VENV/bin/python" -m pip freeze --exclude-editable | grep -v -i '^pinbench==' > "$constraints"
"$VENV/bin/uv" pip compile pyproject.toml images/cpu/requirements.in \
  --constraint "$constraints" --generate-hashes \
  --python-version 3.11 --python-platform x86_64-manylinux_2_28 \
  --custom-compile-command "images/cpu/lock.sh" \
  --output-file images/cpu/requirements.lock
sed -i "s|$constraints|dev-venv-freeze|" images/cpu/requirements.lock
