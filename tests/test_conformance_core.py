"""Kernel conformance v1 run the way a vendor runs it, against the C test plugin."""

from __future__ import annotations

import subprocess
import sys

from unidev.conformance import cases
from unidev.core import opset


def test_suite_passes_on_testplugin(subprocess_env, tmp_path):
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--pyargs",
           "unidev.conformance", "--unidev-device", "testdev", "--unidev-tier", "1",
           "--unidev-ops", "copy,fill,zero,cast,arange,add,mul,matmul"]
    out = subprocess.run(cmd, env=subprocess_env, capture_output=True, text=True, timeout=300,
                         cwd=tmp_path)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert " passed" in out.stdout


def test_every_op_and_dtype_has_cases():
    for op in opset.OPS.values():
        for dtype in op.dtypes:
            got = cases.cases_for(op.name, dtype)
            assert got, f"no conformance cases for {op.name}[{dtype}]"


def test_cases_cover_views_and_edge_shapes():
    ids = {c.id for c in cases.cases_for("add", "float32")}
    assert {"transposed", "offset", "strided", "broadcast-row", "broadcast-view"} <= ids
    assert any("(0,)" in i for i in ids) and any("()" == i[:2] for i in ids)
