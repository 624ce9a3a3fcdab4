#!/usr/bin/env bash
# Installs unidev, its bundled plugins and the pinned frameworks into .venv, then runs the demo.
# Needs only Python 3.11, gcc, cmake and git; everything else comes from PyPI and Debian.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
step() { printf '\n==> %s\n' "$*"; }

step "virtual environment .venv"
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
PIP=(.venv/bin/python -m pip --disable-pip-version-check -q)
"${PIP[@]}" install -U pip
# torch and tensorflow are pinned: other versions download multi-GB builds (see DESIGN/FACTS)
"${PIP[@]}" install -r requirements-dev.txt

step "unidev core (builds unidev._C)"
"${PIP[@]}" install --no-build-isolation -e .

for plugin in $(cat plugins/BUNDLED); do
  step "plugin $plugin"
  # --no-deps: their dependencies are in requirements-dev.txt, and "unidev" must stay ours
  "${PIP[@]}" install --no-build-isolation --no-deps "./plugins/$plugin"
done

step "framework adapters: build against the installed torch and TensorFlow, install for autoload"
.venv/bin/unidev build all

if [ "${UNIDEV_SKIP_DEMO:-0}" != 1 ]; then
  step "demo"
  .venv/bin/unidev demo
fi
