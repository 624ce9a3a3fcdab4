"""The bundled plugins pass the whole suite, framework level included, the way a vendor runs it."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from unidev.contract import opset
from unidev.core import discovery


@pytest.mark.parametrize("name", ["aurora", "x86"])
def test_unidev_conformance_passes(name, tmp_path) -> None:
    rec = next((r for r in discovery.discover() if r.name == name), None)
    if rec is None or not rec.usable:
        pytest.skip(f"plugin {name} is not installed and usable here")
    done = subprocess.run([sys.executable, "-m", "unidev", "conformance", name, "-q",
                           "--report", str(tmp_path)], capture_output=True, text=True,
                          timeout=1200, cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["totals"]["failed"] == 0, report["failures"]
    # every op-set tier up to the plugin's claim (aurora claims 4, so tier 3 too)
    claimed = [t for t in opset.TIERS if t <= rec.spec.conformance.tier]
    assert sorted(report["tiers_passed"]) == claimed, report["tiers"]
    assert report["groups"]["framework"]["passed"] > 0, report["groups"]["framework"]
