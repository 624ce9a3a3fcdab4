"""The conformance suite run the way vendors run it: on the test plugin, on a plugin with wrong
kernels (it must fail, naming op, dtype, case and the largest difference), and through the CLI."""

from __future__ import annotations

import json
import subprocess
import sys

UNIDEV = [sys.executable, "-m", "unidev"]


def _run(cmd: list[str], env: dict, cwd, timeout: int = 240) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)


def test_pytest_entry_on_testdev(suite_env, tmp_path) -> None:
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--pyargs",
           "unidev.conformance", "--unidev-device", "testdev", "--unidev-tier", "0",
           "--unidev-groups", "contract,memory,streams,kernels",
           "--unidev-report", str(tmp_path / "rep")]
    out = _run(cmd, suite_env, tmp_path)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    data = json.loads((tmp_path / "rep" / "report.json").read_text())
    assert data["plugin"] == "testdev" and data["totals"]["failed"] == 0
    for group in ("contract", "memory", "streams", "kernels"):
        assert data["groups"][group]["passed"] > 0, group
    assert data["matrix"]["copy"]["dtypes"]["float32"]["status"] == "pass"
    # bad inputs were not run, so tier 0 cannot be called passed
    assert data["tiers"]["0"]["status"] == "not checked"
    md = (tmp_path / "rep" / "report.md").read_text()
    assert "| copy | 0 | ✓ | ✓ | ✓ | ✓ | ✓ |" in md


def test_wrong_kernels_are_caught(suite_env, tmp_path) -> None:
    rep = tmp_path / "wrong"
    out = _run(UNIDEV + ["conformance", "wrongdev", "--tier", "1", "--ops", "copy,add,mul,zero",
                         "--groups", "kernels,bad_inputs", "--report", str(rep)],
               suite_env, tmp_path)
    assert out.returncode == 1, out.stdout[-3000:] + out.stderr[-2000:]
    data = json.loads((rep / "report.json").read_text())
    msgs = [f["message"] for f in data["failures"]]

    def one(*parts: str) -> str:
        hits = [m for m in msgs if all(p in m for p in parts)]
        assert hits, f"no failure mentions {parts}; failures: {msgs[:10]}"
        return hits[0]

    # strided view: op, dtype, case and the largest difference are named
    m = one("copy[float32] case 'transposed'", "largest |diff|")
    assert "expected" in m and "got" in m
    one("copy[int64] case 'strided'", "largest |diff|")
    # broadcasting
    one("mul[float32] case 'broadcast-", "largest |diff|")
    # an attribute value
    one("add[float32] case ", "alpha=-0.5", "largest |diff|")
    one("add[int32] case ", "alpha=-2.0", "largest |diff|")
    # zero writes its output as if it were contiguous: an output with gaps shows it
    one("zero[float32] case 'out-gapped'")
    # contiguous inputs and alpha=1 are still right: the suite is not failing everything
    cells = data["matrix"]
    assert cells["copy"]["dtypes"]["float32"]["status"] == "fail"
    zero = cells["zero"]["dtypes"]["float32"]
    assert zero["status"] == "fail" and 0 < zero["failed"] < zero["cases"], zero
    passed = {r for r in data["matrix"]}
    assert "mul" in passed
    # the plugin's settings are honoured and shown: an exclusion, a tighter and a looser tolerance
    assert cells["mul"]["dtypes"]["bool"] == {**cells["mul"]["dtypes"]["bool"],
                                              "status": "excluded",
                                              "reason": "bool mul is not ready (a test)"}
    tol = data["settings"]["tolerances"]["elementwise"]
    assert tol["float32"]["used"] == [1e-6, 1e-7] and "tightened" in tol["float32"]["note"]
    assert tol["float64"]["used"] == tol["float64"]["cap"] and "cap used" in tol["float64"]["note"]
    md = (rep / "report.md").read_text()
    assert "excluded `mul:bool`: bool mul is not ready (a test)" in md
    assert "| mul | 1 | ✗ | ✗ | ✗ | ✗ | excl |" in md
    # a kernel that crashes the process is charged to its case, and the run goes on after it
    one("raw/zero_unknown_handle", "crashed the process (SIGSEGV)")
    assert data["groups"]["bad_inputs"]["passed"] > 20
    assert data["tiers"]["0"]["status"] == "failed"
    assert "copy[float32]" in " ".join(data["tiers"]["0"]["notes"])
    # the CLI summary names the failures too
    assert "✗" in out.stdout and "tier 0: failed" in out.stdout


def test_cli_unknown_plugin_and_compare(suite_env, tmp_path) -> None:
    out = _run(UNIDEV + ["conformance", "no_such_plugin"], suite_env, tmp_path)
    assert out.returncode == 2 and "no unidev plugin named 'no_such_plugin'" in out.stderr
    for name in ("testdev", "wrongdev"):
        res = _run(UNIDEV + ["conformance", name, "--tier", "1", "--ops", "copy,mul",
                             "--groups", "contract,kernels", "--quiet", "--report",
                             str(tmp_path / name)], suite_env, tmp_path)
        assert res.returncode == (0 if name == "testdev" else 1), res.stdout[-2000:]
    cmp = _run(UNIDEV + ["conformance", "--compare", str(tmp_path / "testdev"),
                         str(tmp_path / "wrongdev")], suite_env, tmp_path)
    assert cmp.returncode == 0, cmp.stderr
    assert "| op | testdev | wrongdev |" in cmp.stdout
    assert "| copy | f32✓ f64✓ i32✓ i64✓ b✓ | f32✗ f64✗ i32✗ i64✗ b✗ |" in cmp.stdout
    missing = _run(UNIDEV + ["conformance", "--compare", str(tmp_path / "nowhere")], suite_env,
                   tmp_path)
    assert missing.returncode == 2 and "no conformance report" in missing.stderr
