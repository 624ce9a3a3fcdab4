"""The unidev command: list, info and doctor, run as a user would."""

from __future__ import annotations

import os
import subprocess
import sys

from wrongplugin import crash_site


def _cli(*args: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "unidev", *args], env=env, capture_output=True,
                          text=True, timeout=120)


def test_list_shows_status_and_errors(subprocess_env):
    out = _cli("list", env=subprocess_env)
    assert out.returncode == 0, out.stderr
    assert "testdev" in out.stdout and " ok" in out.stdout
    assert "abi_mismatch" in out.stdout and "ABI 99." in out.stdout  # minor: the header's
    assert "No module named 'not_a_module_that_exists_anywhere'" in out.stdout


def test_info_lists_ops_by_tier(subprocess_env):
    out = _cli("info", "testdev", "--dtypes", env=subprocess_env)
    assert out.returncode == 0, out.stderr
    assert "tier 0: 5/5" in out.stdout
    assert "add[float32,float64,int32,int64]" in out.stdout
    assert "device 1" in out.stdout
    bad = _cli("info", "nonexistent", env=subprocess_env)
    assert bad.returncode == 2 and "no unidev plugin named 'nonexistent'" in bad.stderr


def test_doctor(subprocess_env):
    out = _cli("doctor", env=subprocess_env)
    assert out.returncode == 0, out.stderr
    from unidev import _C

    abi = f"unidev._C   ABI {_C.ABI_MAJOR}.{_C.ABI_MINOR}"
    assert "cmake" in out.stdout and "numpy" in out.stdout and abi in out.stdout


def test_list_survives_crashing_plugins_and_reprobes(subprocess_env, tmp_path_factory, tmp_path):
    env = dict(subprocess_env, UNIDEV_CACHE_DIR=str(tmp_path / "cache"), UNIDEV_PROBE_TIMEOUT="2")
    env["PYTHONPATH"] = os.pathsep.join([str(crash_site(tmp_path_factory)), env["PYTHONPATH"]])
    for args in (("list",), ("list", "--reprobe")):
        out = _cli(*args, env=env)
        assert out.returncode == 0, (out.returncode, out.stdout[-2000:], out.stderr[-2000:])
        assert "killed by SIGSEGV in device_count" in out.stdout
        assert "timed out after 2 s in device_count" in out.stdout
        assert "SystemExit: 3" in out.stdout and "SystemExit: 4" in out.stdout
        assert any(line.startswith("testdev ") and line.rstrip().endswith(" ok")
                   for line in out.stdout.splitlines()), out.stdout
    assert "cached verdicts dropped" in out.stdout
