#!/usr/bin/env bash
# Runs the default (fast) test suite: core, plugins, adapters. `scripts/test.sh -m slow` runs the
# model-level tests instead. On a fresh clone it first installs everything (scripts/setup.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x .venv/bin/python ] || ! .venv/bin/python -c "import unidev._C" 2>/dev/null; then
  echo "scripts/test.sh: no working .venv yet; running scripts/setup.sh first (without the demo)"
  UNIDEV_SKIP_DEMO=1 bash scripts/setup.sh
fi
# the slowest tests are listed so that CI time (30 min on 2 cores) stays visible
exec .venv/bin/python -m pytest -q --durations=25 "$@"
