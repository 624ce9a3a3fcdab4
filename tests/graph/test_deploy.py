"""Standalone deployment: a saved plan run by a C program (ud_run.c + ud_plan.c), no Python."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import unidev.graph
from unidev.core import discovery, reference
from unidev.graph import Graph

NATIVE = Path(unidev.graph.__file__).parent / "native"
INCLUDE = Path(unidev.graph.__file__).parent.parent / "contract" / "include"
CC = shutil.which("gcc") or shutil.which("cc")
pytestmark = pytest.mark.skipif(CC is None, reason="no C compiler")


@pytest.fixture(scope="module")
def ud_run(tmp_path_factory) -> Path:
    exe = tmp_path_factory.mktemp("deploy") / "ud_run"
    subprocess.run([CC, "-std=c17", "-O1", "-Wall", "-Werror", f"-I{INCLUDE}",
                    str(NATIVE / "ud_run.c"), str(NATIVE / "ud_plan.c"), "-ldl", "-o", str(exe)],
                   check=True)
    return exe


def conv_net(rng):
    """conv3x3(+bias) -> relu -> flatten -> linear(+bias), N=2, 3x8x8 -> 5."""
    w = (rng.standard_normal((4, 3, 3, 3)) * 0.3).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    w2 = (rng.standard_normal((256, 5)) * 0.1).astype(np.float32)
    b2 = rng.standard_normal(5).astype(np.float32)
    g = Graph("convnet")
    x = g.input((2, 3, 8, 8))
    h = g.call("relu", g.call("conv2d", x, g.const(w), g.const(b), padding=(1, 1)))
    g.output(g.call("add", g.call("matmul", h.reshape(2, 256), g.const(w2)), g.const(b2)))
    return g, (w, b, w2, b2)


@pytest.mark.parametrize("dev", [d for d in ("x86", "aurora")
                                 if discovery.get(d).status == discovery.OK])
def test_saved_plan_runs_from_c(tmp_path, ud_run, dev):
    rng = np.random.default_rng(5)
    g, (w, b, w2, b2) = conv_net(rng)
    x = rng.standard_normal((2, 3, 8, 8)).astype(np.float32)
    unidev.graph.compile(g, dev, cache=False).save(tmp_path / "net.udplan")
    x.tofile(tmp_path / "x.bin")
    lib = discovery.load(dev).path
    done = subprocess.run([str(ud_run), lib, str(tmp_path / "net.udplan"), str(tmp_path / "x.bin"),
                           "-o", str(tmp_path / "y.bin"), "--repeat", "2", "--profile"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "output 0: float32, 40 bytes" in done.stdout and " ms" in done.stdout
    y = np.fromfile(tmp_path / "y.bin", np.float32).reshape(2, 5)
    conv = reference.run("conv2d", [x, w, b], {"padding": (1, 1)})[0]
    want = np.maximum(conv, 0).reshape(2, 256) @ w2 + b2
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-4)
    torch = pytest.importorskip("torch")  # the framework's answer for the same weights
    with torch.no_grad():
        t = torch.nn.functional.conv2d(torch.from_numpy(x), torch.from_numpy(w),
                                       torch.from_numpy(b), padding=1).relu()
        t = t.reshape(2, 256) @ torch.from_numpy(w2) + torch.from_numpy(b2)
    np.testing.assert_allclose(y, t.numpy(), rtol=1e-4, atol=1e-4)


def test_c_runner_refuses_bad_files(tmp_path, ud_run):
    lib = discovery.load("x86").path
    (tmp_path / "junk.udplan").write_bytes(b"not a plan at all" * 4)
    done = subprocess.run([str(ud_run), lib, str(tmp_path / "junk.udplan")], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 1 and "not a unidev plan file" in done.stderr
    g, _ = conv_net(np.random.default_rng(0))
    unidev.graph.compile(g, "x86", cache=False).save(tmp_path / "net.udplan")
    (tmp_path / "short.bin").write_bytes(bytes(100))
    done = subprocess.run([str(ud_run), lib, str(tmp_path / "net.udplan"),
                           str(tmp_path / "short.bin"), "-o", str(tmp_path / "y.bin")],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and "expected 1536 bytes of float32" in done.stderr
    done = subprocess.run([str(ud_run), str(tmp_path / "short.bin"), "x"], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 1 and "cannot load plugin library" in done.stderr
