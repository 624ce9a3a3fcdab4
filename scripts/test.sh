#!/usr/bin/env bash
# Runs the default (fast) test suite: core, plugins, adapters. `scripts/test.sh -m slow` for more.
set -euo pipefail
cd "$(dirname "$0")/.."
exec .venv/bin/python -m pytest -q "$@"
