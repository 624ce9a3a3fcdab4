"""Helpers shared by the aurora tests (a uniquely named module: test folders share sys.path)."""

from __future__ import annotations

import os
import subprocess
import sys


def run_python(code: str, env: dict | None = None,
               timeout: float = 120) -> subprocess.CompletedProcess:
    """Run `code` in a fresh interpreter (for VESIM_* settings and deliberate crashes)."""
    full = dict(os.environ, **(env or {}))
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=full,
                          timeout=timeout, check=False)
