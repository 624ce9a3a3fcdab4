"""unidev-x86 tier-4 fused ops: conv2d_bias_act and gemm_bias_act against the reference."""

from __future__ import annotations

import numpy as np
import pytest

import unidev
from unidev.conformance import cases, runner
from unidev.core import reference

DEV = "x86:0"


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("op", ["conv2d_bias_act", "gemm_bias_act"])
def test_conformance_cases(op: str, dtype: str) -> None:
    # every tier-4 conformance case (the plugin's spec claims tier 2, so the suite skips them)
    bad = []
    for case in cases.cases_for(op, dtype):
        out = runner.run_case(op, dtype, case, DEV)
        if not out.ok:
            bad.append(out.message)
    assert not bad, bad[:3]


@pytest.mark.parametrize("algorithm", ["onednn", "im2col", "direct", "winograd"])
@pytest.mark.parametrize("activation", ["none", "relu", "gelu", "silu"])
def test_conv_bias_act_every_algorithm(algorithm: str, activation: str) -> None:
    # oneDNN runs bias, residual and the activation as post-ops (relu and gelu: our pass, since
    # oneDNN's relu drops nan and its gelu turns inf into nan); the others add an epilogue pass
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 16, 8, 8)).astype(np.float32)
    if algorithm != "winograd":  # its transforms spread a non-finite input to its neighbours
        x[0, 0, 0, :3] = [np.nan, np.inf, -np.inf]
    w = rng.standard_normal((16, 16, 3, 3)).astype(np.float32)
    b, r = rng.standard_normal(16).astype(np.float32), rng.standard_normal((2, 16, 8, 8))
    r = r.astype(np.float32)
    attrs = {"padding": (1, 1), "activation": activation, "algorithm": algorithm}
    want = reference.run("conv2d_bias_act", [x, w, b, r], dict(attrs))[0]
    d = [unidev.DeviceArray.from_numpy(a, DEV) for a in (x, w, b, r)]
    got = unidev.ops.conv2d_bias_act(*d, **attrs).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
