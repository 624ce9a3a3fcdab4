"""Graphs compiled end to end (passes, lowering, native plan) vs numpy, fused where possible."""

from __future__ import annotations

import numpy as np
import pytest

import unidev.graph as ug
from unidev.core import discovery, reference
from unidev.core.array import DeviceArray
from unidev.graph import Graph

DEVICES = [d for d in ("x86", "aurora") if discovery.get(d).status == discovery.OK]
rng = np.random.default_rng(11)


@pytest.fixture(params=DEVICES)
def dev(request):
    ug.cache.clear()
    return request.param


def compiled(g: Graph, dev: str, fused_op: str):
    """The optimized plan; when the plugin has `fused_op` the plan must use it (and its
    kernel_compile specialization where it has one), else the plan must do without it."""
    cp = ug.compile(g, dev)
    lib = discovery.load(dev)
    ops = [op for _, op in cp.steps]
    if lib.kernel(fused_op, "float32") is not None:
        assert fused_op in ops, ops
        if fused_op == "elementwise_program" and getattr(lib, "has_kernel_compile", False):
            assert cp.num_compiled >= 1
    else:
        assert fused_op not in ops, ops  # never fused, or unfused by the lowering
    return cp


def test_elementwise_chain(dev):
    g = Graph("chain")
    x, y = g.input((3, 40)), g.input((40,))
    h = g.call("mul", g.call("add", x, y), g.const(np.float32(0.5)))
    g.output(g.call("sub", g.call("tanh", h), x), g.call("relu", h))
    cp = compiled(g, dev, "elementwise_program")
    xv, yv = rng.standard_normal((3, 40)).astype(np.float32), rng.standard_normal(40)
    yv = yv.astype(np.float32)
    a, b = cp.run([DeviceArray.from_numpy(xv, dev), DeviceArray.from_numpy(yv, dev)])
    hv = (xv + yv) * 0.5
    np.testing.assert_allclose(a.numpy(), np.tanh(hv) - xv, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(b.numpy(), np.maximum(hv, 0), rtol=1e-6)


def test_conv_bias_relu_and_gemm_bias_gelu(dev):
    w = (rng.standard_normal((6, 4, 3, 3)) * 0.2).astype(np.float32)
    b = rng.standard_normal((6, 1, 1)).astype(np.float32)
    g = Graph("cbr")
    x = g.input((2, 4, 9, 9))
    g.output(g.call("relu", g.call("add", g.call("conv2d", x, g.const(w), padding=(1, 1)),
                                   g.const(b))))
    cp = compiled(g, dev, "conv2d_bias_act")
    xv = rng.standard_normal((2, 4, 9, 9)).astype(np.float32)
    want = np.maximum(reference.run("conv2d", [xv, w], {"padding": (1, 1)})[0] + b, 0)
    np.testing.assert_allclose(cp.run([DeviceArray.from_numpy(xv, dev)])[0].numpy(), want,
                               rtol=1e-4, atol=1e-4)

    w2, b2 = rng.standard_normal((16, 24)).astype(np.float32), rng.standard_normal(24)
    b2 = b2.astype(np.float32)
    g = Graph("gbg")
    a = g.input((5, 16))
    g.output(g.call("gelu", g.call("add", g.call("matmul", a, g.const(w2)), g.const(b2))))
    cp = compiled(g, dev, "gemm_bias_act")
    av = rng.standard_normal((5, 16)).astype(np.float32)
    want = reference.run("gelu", [av @ w2 + b2])[0]
    np.testing.assert_allclose(cp.run([DeviceArray.from_numpy(av, dev)])[0].numpy(), want,
                               rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("act", ["none", "relu", "gelu", "tanh"])
def test_fused_epilogue_on_views_against_the_reference(dev, act):
    # the epilogue walks rows along whichever dim is contiguous: NCHW planes, channels-last
    # (per-channel bias along the row), [M, N] rows, and no bias at all; nan stays nan
    from unidev.core import ops
    x = rng.standard_normal((2, 5, 6, 8)).astype(np.float32)  # NHWC
    x[0, 0, 0, 0] = np.nan
    w = (rng.standard_normal((8, 8, 3, 3)) * 0.3).astype(np.float32)
    b = rng.standard_normal(8).astype(np.float32)
    r = rng.standard_normal((2, 8, 5, 6)).astype(np.float32)
    attrs = {"padding": (1, 1), "activation": act}
    want = reference.run("conv2d_bias_act", [x.transpose(0, 3, 1, 2), w, b, r], dict(attrs))[0]
    cl = [DeviceArray.from_numpy(a.transpose(0, 2, 3, 1).copy(), dev).transpose(0, 3, 1, 2)
          for a in (np.zeros_like(r), r)]
    dx = DeviceArray.from_numpy(x, dev).transpose(0, 3, 1, 2)
    for res, out in ((cl[1], cl[0]), (DeviceArray.from_numpy(r, dev), None)):
        y = ops.call("conv2d_bias_act", dx, DeviceArray.from_numpy(w, dev),
                     DeviceArray.from_numpy(b, dev), res, out=out, **attrs)
        y = out if out is not None else y
        np.testing.assert_allclose(y.numpy(), want, rtol=1e-4, atol=1e-4, equal_nan=True)
    a = rng.standard_normal((7, 5)).astype(np.float32)
    a[3, 1] = np.nan
    m = rng.standard_normal((5, 3)).astype(np.float32)
    gw = {"activation": act, "alpha": 1.0}
    want = reference.run("gemm_bias_act", [a, m, None, None], dict(gw))[0]
    got = ops.call("gemm_bias_act", DeviceArray.from_numpy(a, dev), DeviceArray.from_numpy(m, dev),
                   None, None, **gw)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-4, atol=1e-5, equal_nan=True)
