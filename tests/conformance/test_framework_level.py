"""The framework group: its checks are right (CPU against CPU passes, a wrong result fails) and it
skips with the reason when an adapter is missing."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from unidev.conformance import framework


def test_compare_names_the_difference() -> None:
    assert framework._compare(np.ones(3), np.ones(3), 1e-4, 1e-5, "x") is None
    msg = framework._compare(np.array([1.0, 2.0, 3.5]), np.array([1.0, 2.0, 3.0]), 1e-4, 1e-5,
                             "add")
    assert msg is not None and "add: 1 of 3 values differ" in msg and "0.5" in msg
    assert "shape" in framework._compare(np.ones(3), np.ones(4), 1e-4, 1e-5, "x")


def _child(fw: str, name: str, env=None) -> dict:
    out = subprocess.run([sys.executable, "-m", "unidev.conformance.framework", fw, name],
                         capture_output=True, text=True, timeout=600, env=env)
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_torch_checks_pass_cpu_against_cpu() -> None:
    res = _child("torch", "cpu")
    assert res["available"], res["reason"]
    names = {n for n, _, _ in framework.TORCH_SWEEP + framework._MODELS}
    assert set(res["items"]) == names
    bad = {k: v["message"] for k, v in res["items"].items() if v["outcome"] != "passed"}
    assert not bad


@pytest.mark.slow
def test_tensorflow_checks_pass_cpu_against_cpu() -> None:
    res = _child("tensorflow", "CPU")
    assert res["available"], res["reason"]
    bad = {k: v["message"] for k, v in res["items"].items() if v["outcome"] != "passed"}
    assert not bad and len(res["items"]) == len(framework.TF_SWEEP) + 2


def _framework_group(env: dict, tmp_path) -> dict:
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--pyargs",
           "unidev.conformance", "--unidev-device", "testdev", "--unidev-groups", "framework",
           "--unidev-tier", "2",  # testdev claims tier 0: ask for the sweeps it must fall back on
           "--unidev-report", str(tmp_path)]
    out = subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True,
                         timeout=600)
    assert out.returncode in (0, 1), out.stdout[-3000:]
    return json.loads((tmp_path / "report.json").read_text())


@pytest.mark.slow
def test_torch_fallbacks_are_reported(suite_env, tmp_path) -> None:
    """testdev has only a few kernels: through the torch adapter most ops fall back, and the
    report counts them."""
    data = _framework_group(suite_env, tmp_path)
    torch_rows = [r for r in data["framework"] if r["framework"] == "torch"]
    if all(r["outcome"] == "skipped" for r in torch_rows):
        pytest.skip(f"torch adapter not usable here: {torch_rows[0]['message']}")
    fb = data["fallbacks"]["torch"]["framework_ops"]
    assert fb and sum(fb.values()) > 0
    assert "## Framework fallbacks" in (tmp_path / "report.md").read_text()


@pytest.mark.slow
def test_group_skips_without_adapters(suite_env, tmp_path) -> None:
    env = dict(suite_env, TORCH_DEVICE_BACKEND_AUTOLOAD="0")  # no torch adapter at import
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          "--pyargs", "unidev.conformance", "--unidev-device", "testdev",
                          "--unidev-groups", "framework", "--unidev-report", str(tmp_path)],
                         env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-3000:]
    data = json.loads((tmp_path / "report.json").read_text())
    rows = data["framework"]
    assert rows and all(r["outcome"] == "skipped" for r in rows)
    torch_rows = [r for r in rows if r["framework"] == "torch"]
    assert "torch does not know device 'testdev'" in torch_rows[0]["message"]
    assert any("framework level skipped for torch" in n for n in data["tiers"]["0"]["notes"])
