"""Runs unidev's conformance suite against this plugin at the tier it claims."""

import subprocess
import sys


def test_conformance() -> None:
    cmd = [sys.executable, "-m", "unidev", "conformance", "{{name}}", "--quiet"]
    assert subprocess.run(cmd).returncode == 0
