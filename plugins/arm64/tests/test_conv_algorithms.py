"""What arm64 builds differently from x86: conv2d has no oneDNN, so each of x86's portable
algorithms (direct, im2col+GEMM over OpenBLAS, Winograd) is checked by name against the numpy
reference. Runs where the arm64 plugin is usable: on aarch64, or under qemu through
scripts/qemu-conformance (which passes this file to the emulated pytest)."""

from __future__ import annotations

import numpy as np
import pytest

import unidev
from unidev.core import discovery, errors, reference

DEV = "arm64:0"
RNG = np.random.default_rng(3)
ALGOS = ("direct", "im2col", "winograd")
# (x shape, weight shape, stride, padding, dilation, groups)
SHAPES = {
    "3x3": ((2, 16, 9, 7), (16, 16, 3, 3), (1, 1), (1, 1), (1, 1), 1),
    "3x3-nopad-odd": ((1, 5, 6, 11), (3, 5, 3, 3), (1, 1), (0, 0), (1, 1), 1),
    "3x3-grouped": ((2, 8, 6, 6), (12, 2, 3, 3), (1, 1), (1, 1), (1, 1), 4),
    "5x3-strided-dilated": ((1, 4, 11, 10), (6, 4, 5, 3), (2, 3), (2, 1), (1, 2), 1),
    "1x1-strided": ((2, 6, 5, 5), (4, 6, 1, 1), (2, 2), (0, 0), (1, 1), 1),
}


@pytest.fixture(scope="module", autouse=True)
def arm64() -> None:
    try:
        rec = discovery.get("arm64")
    except errors.PluginLoadError as exc:  # not installed here
        pytest.skip(str(exc))
    if rec.status != "ok":
        pytest.skip(f"arm64 is {rec.status}: {rec.error}")


def _winograd(shape: str) -> bool:
    _, w, stride, _, dil, _ = SHAPES[shape]
    return w[2:] == (3, 3) and stride == (1, 1) and dil == (1, 1)


def _check(op: str, inputs: list[np.ndarray], attrs: dict, dtype: str) -> None:
    want = reference.run(op, inputs, attrs)[0]
    dev = [unidev.DeviceArray.from_numpy(a, device=DEV) for a in inputs]
    got = getattr(unidev.ops, op)(*dev, **attrs)
    tol = 1e-4 if dtype == "float32" else 1e-10
    np.testing.assert_allclose(got.numpy(), want, rtol=tol, atol=tol * np.abs(want).max())


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("algo", ALGOS)
def test_conv_algorithm(algo: str, shape: str, dtype: str) -> None:
    if algo == "winograd" and not _winograd(shape):
        pytest.skip("winograd needs 3x3, stride 1, dilation 1")
    xs, ws, stride, padding, dilation, groups = SHAPES[shape]
    x = RNG.standard_normal(xs).astype(dtype)
    w = RNG.standard_normal(ws).astype(dtype)
    b = RNG.standard_normal(ws[0]).astype(dtype)
    attrs = dict(stride=stride, padding=padding, dilation=dilation, groups=groups, algorithm=algo)
    _check("conv2d", [x, w, b], attrs, dtype)
    y = reference.run("conv2d", [x, w, None], attrs)[0]
    gy = RNG.standard_normal(y.shape).astype(dtype)
    _check("conv2d_backward_input", [gy, w], dict(attrs, input_shape=xs), dtype)
    _check("conv2d_backward_weight", [gy, x], dict(attrs, weight_shape=ws), dtype)


def test_onednn_is_not_built_in() -> None:
    x = unidev.DeviceArray.from_numpy(np.ones((1, 1, 3, 3), np.float32), device=DEV)
    with pytest.raises(errors.UnsupportedError, match="onednn"):
        unidev.ops.conv2d(x, x, algorithm="onednn")
    with pytest.raises(errors.InvalidArgumentError, match="algorithm"):
        unidev.ops.conv2d(x, x, algorithm="fastest")
