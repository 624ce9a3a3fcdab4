"""aurora's register-tiled convolutions ("auto" at unit stride) and its kernel scratch reuse
against the numpy reference: tails of columns and channels, groups, dilation, padding, bias."""

from __future__ import annotations

import numpy as np
import pytest
from aurora_testutil import run_python

import unidev
from unidev.core import reference


def dev(x: np.ndarray) -> unidev.DeviceArray:
    return unidev.DeviceArray.from_numpy(np.ascontiguousarray(x), "aurora")


CASES = [  # x shape, w shape, padding, dilation, groups: unit stride, rows a multiple of 8
    ((2, 3, 12, 24), (5, 3, 3, 3), (1, 1), (1, 1), 1),     # 24 columns: 16 + 8; 5 channels: 4 + 1
    ((1, 4, 9, 8), (26, 2, 3, 1), (1, 0), (2, 1), 2),      # groups, dilation, 13 channels a group
    ((3, 8, 16, 16), (8, 8, 1, 1), (0, 0), (1, 1), 1),     # 1x1
    ((2, 2, 11, 32), (7, 2, 5, 3), (2, 1), (1, 2), 1),
    ((2, 6, 10, 10), (4, 3, 3, 3), (0, 0), (1, 1), 2),     # no padding: grad_x declines the tiles
    ((9, 2, 8, 8), (30, 2, 3, 3), (1, 1), (1, 1), 1),      # more images than cores
    ((1, 3, 4, 40), (12, 3, 3, 3), (1, 1), (1, 1), 1),     # one image: output channels in parts
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("case", CASES, ids=[str(c[0]) + str(c[1]) for c in CASES])
def test_tiled_conv_matches_reference(case, dtype: str) -> None:
    xs, ws, pad, dil, groups = case
    rng = np.random.default_rng(7)
    x = rng.standard_normal(xs).astype(dtype)
    w = rng.standard_normal(ws).astype(dtype)
    b = rng.standard_normal(ws[0]).astype(dtype)
    attrs = {"stride": (1, 1), "padding": pad, "dilation": dil, "groups": groups,
             "algorithm": "auto"}
    tol = {"rtol": 2e-4, "atol": 2e-4} if dtype == "float32" else {"rtol": 1e-10, "atol": 1e-10}
    for bias in (None, b):
        y = reference.run("conv2d", [x, w, bias], attrs)[0]
        got = unidev.ops.conv2d(dev(x), dev(w), None if bias is None else dev(bias), **attrs)
        np.testing.assert_allclose(got.numpy(), y, **tol)
    gy = rng.standard_normal(y.shape).astype(dtype)
    gx = reference.run("conv2d_backward_input", [gy, w], dict(attrs, input_shape=x.shape))[0]
    got = unidev.ops.conv2d_backward_input(dev(gy), dev(w), input_shape=x.shape, **attrs)
    np.testing.assert_allclose(got.numpy(), gx, **tol)
    gw = reference.run("conv2d_backward_weight", [gy, x], dict(attrs, weight_shape=w.shape))[0]
    got = unidev.ops.conv2d_backward_weight(dev(gy), dev(x), weight_shape=w.shape, **attrs)
    np.testing.assert_allclose(got.numpy(), gw, **tol)


def test_strided_views_and_reused_scratch() -> None:
    # a non-contiguous input is gathered into scratch; the same kernel run again (scratch blocks
    # cached by the stream, contents left from the last call) must give the same numbers
    rng = np.random.default_rng(8)
    x = rng.standard_normal((2, 3, 10, 24)).astype(np.float32)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    attrs = {"stride": (1, 1), "padding": (1, 1), "dilation": (1, 1), "groups": 1,
             "algorithm": "auto"}
    view = dev(np.pad(x, ((0, 0), (0, 0), (0, 0), (3, 1))))[..., 3:-1]
    want = reference.run("conv2d", [x, w, None], attrs)[0]
    big = rng.standard_normal((4, 3, 40, 40)).astype(np.float32)
    for _ in range(3):
        unidev.ops.conv2d(dev(big), dev(w), None, **attrs).numpy()  # leaves garbage in scratch
        np.testing.assert_allclose(unidev.ops.conv2d(view, dev(w), None, **attrs).numpy(), want,
                                   rtol=2e-4, atol=2e-4)


def test_vesim_profile_table_at_exit() -> None:
    code = ("import numpy as np, unidev\n"
            "x = unidev.DeviceArray.from_numpy(np.ones((1, 2, 8, 8), np.float32), 'aurora')\n"
            "w = unidev.DeviceArray.from_numpy(np.ones((3, 2, 3, 3), np.float32), 'aurora')\n"
            "y = unidev.ops.conv2d(x, w, None, stride=(1, 1), padding=(1, 1), dilation=(1, 1),"
            " groups=1, algorithm='auto').numpy()\n"
            "assert y[0, 0, 3, 3] == 18, y[0, 0, 3, 3]\n")
    done = run_python(code, {"VESIM_PROFILE": "1"})
    assert done.returncode == 0, done.stderr
    assert "vesim profile:" in done.stderr and "conv2d" in done.stderr, done.stderr
    assert "vesim profile:" not in run_python(code, {"VESIM_PROFILE": "0"}).stderr
