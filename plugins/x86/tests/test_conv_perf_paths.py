"""unidev-x86 fast conv paths (depthwise ISPC loops, grouped convs, cached plans) vs numpy."""

from __future__ import annotations

import numpy as np
import pytest

import unidev
from unidev.core import discovery, reference

DEV = "x86"


def _available() -> bool:
    try:
        return discovery.get(DEV).status == "ok"
    except Exception:
        return False


pytestmark = pytest.mark.skipif(not _available(), reason="unidev-x86 is not installed")

TOL = {"float32": 2e-4, "float64": 1e-11}
rng = np.random.default_rng(11)


def dev(a: np.ndarray) -> unidev.DeviceArray:
    return unidev.DeviceArray.from_numpy(np.ascontiguousarray(a), device=DEV)


def close(got: unidev.DeviceArray, want: np.ndarray, dtype: str) -> None:
    got = got.numpy()
    assert got.shape == want.shape
    scale = max(1.0, float(np.abs(want).max())) if want.size else 1.0
    err = float(np.abs(got.astype(np.float64) - want).max()) if want.size else 0.0
    assert err <= TOL[dtype] * scale, f"max error {err:.3g} (scale {scale:.3g})"


def check_all(xs, ws, dtype, algo="auto", bias=True, **attrs):
    """conv2d and both backwards against the reference for x [xs] and weight [ws]."""
    x = rng.standard_normal(xs).astype(dtype)
    wt = rng.standard_normal(ws).astype(dtype)
    b = rng.standard_normal(ws[0]).astype(dtype) if bias else None
    y = reference.run("conv2d", [x, wt, b], attrs)[0]
    gy = rng.standard_normal(y.shape).astype(dtype)
    ins = [dev(x), dev(wt)] + ([dev(b)] if bias else [])
    close(unidev.ops.conv2d(*ins, algorithm=algo, **attrs), y, dtype)
    want_gx = reference.run("conv2d_backward_input", [gy, wt], dict(attrs, input_shape=x.shape))
    close(unidev.ops.conv2d_backward_input(dev(gy), dev(wt), input_shape=x.shape, algorithm=algo,
                                           **attrs), want_gx[0], dtype)
    want_gw = reference.run("conv2d_backward_weight", [gy, x], dict(attrs, weight_shape=wt.shape))
    close(unidev.ops.conv2d_backward_weight(dev(gy), dev(x), weight_shape=wt.shape,
                                            algorithm=algo, **attrs), want_gw[0], dtype)


# (x shape, weight shape, attrs): depthwise (groups = channels, multipliers), odd sizes,
# strides 1-3 with padding, dilation, channels 1
DEPTHWISE = [
    ((2, 8, 9, 9), (8, 1, 3, 3), {"stride": (1, 1), "padding": (1, 1)}),
    ((2, 8, 9, 10), (8, 1, 3, 3), {"stride": (2, 2), "padding": (1, 1)}),
    ((1, 5, 11, 7), (5, 1, 5, 5), {"stride": (2, 2), "padding": (2, 2)}),
    ((3, 7, 8, 8), (7, 1, 5, 5), {"stride": (1, 1), "padding": (2, 2)}),
    ((1, 1, 6, 5), (1, 1, 3, 3), {"stride": (1, 1), "padding": (1, 1)}),
    ((2, 1, 7, 7), (1, 1, 3, 3), {"stride": (2, 2), "padding": (0, 0)}),
    ((1, 3, 10, 9), (6, 1, 3, 3), {"stride": (2, 1), "padding": (1, 0)}),  # multiplier 2
    ((1, 4, 12, 12), (4, 1, 3, 2), {"stride": (3, 2), "padding": (2, 1), "dilation": (2, 3)}),
    ((2, 6, 5, 5), (6, 1, 1, 1), {"stride": (2, 2), "padding": (1, 1)}),
    ((1, 3, 4, 4), (3, 1, 4, 4), {"stride": (1, 1), "padding": (3, 3)}),
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("case", DEPTHWISE, ids=[f"dw{i}" for i in range(len(DEPTHWISE))])
@pytest.mark.parametrize("algo", ["auto", "direct", "im2col"])
def test_depthwise(case, dtype, algo):
    xs, ws, attrs = case
    check_all(xs, ws, dtype, algo, groups=xs[1], **attrs)


GROUPED = [
    ((2, 8, 9, 9), (8, 2, 3, 3), {"groups": 4, "stride": (1, 1), "padding": (1, 1)}),
    ((2, 12, 8, 7), (6, 4, 3, 3), {"groups": 3, "stride": (2, 2), "padding": (1, 1)}),
    ((1, 64, 6, 6), (64, 2, 3, 3), {"groups": 32, "stride": (2, 2), "padding": (1, 1)}),
    ((2, 6, 5, 5), (4, 3, 1, 1), {"groups": 2, "stride": (2, 2)}),
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("case", GROUPED, ids=[f"g{i}" for i in range(len(GROUPED))])
@pytest.mark.parametrize("algo", ["auto", "onednn", "direct", "im2col"])
def test_grouped(case, dtype, algo):
    if algo == "onednn" and dtype == "float64":
        pytest.skip("oneDNN serves float32 only")
    xs, ws, attrs = case
    check_all(xs, ws, dtype, algo, **attrs)


def test_depthwise_strided_views_and_output():
    """Non-contiguous inputs and an output with the caller's strides take the same answers."""
    x = rng.standard_normal((2, 6, 9, 9)).astype("float32")
    wt = rng.standard_normal((6, 1, 3, 3)).astype("float32")
    attrs = {"stride": (2, 2), "padding": (1, 1), "groups": 6}
    want = reference.run("conv2d", [x, wt, None], attrs)[0]
    xt = dev(np.ascontiguousarray(x.transpose(0, 2, 3, 1))).transpose((0, 3, 1, 2))
    close(unidev.ops.conv2d(xt, dev(wt), **attrs), want, "float32")
    wide = dev(np.zeros(want.shape[:3] + (2 * want.shape[3],), "float32"))
    out = wide[..., ::2]
    unidev.ops.conv2d(dev(x), dev(wt), out=out, **attrs)
    close(out, want, "float32")


@pytest.mark.parametrize("algo", ["auto", "direct"])
def test_depthwise_backward_input_nonfinite_weight(algo):
    """An inf weight reaches only the grad_x positions its tap touches (as in the reference)."""
    gy = rng.standard_normal((1, 2, 4, 4)).astype("float32")
    wt = rng.standard_normal((2, 1, 3, 3)).astype("float32")
    wt[0, 0, 0, 0] = np.inf
    attrs = {"stride": (2, 2), "padding": (1, 1), "groups": 2, "input_shape": (1, 2, 8, 8)}
    want = reference.run("conv2d_backward_input", [gy, wt], attrs)[0]
    got = unidev.ops.conv2d_backward_input(dev(gy), dev(wt), algorithm=algo, **attrs).numpy()
    np.testing.assert_array_equal(np.isfinite(got), np.isfinite(want))
    fin = np.isfinite(want)
    np.testing.assert_allclose(got[fin], want[fin], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("algo", ["auto", "onednn", "direct"])
@pytest.mark.parametrize("groups", [1, 8])
def test_cached_plan_sees_updated_weight(algo, groups):
    """A second call with the same shapes after an in-place weight update gives the new answer."""
    x = rng.standard_normal((2, 8, 10, 10)).astype("float32")
    wt = rng.standard_normal((16, 8 // groups, 3, 3)).astype("float32")
    attrs = {"stride": (1, 1), "padding": (1, 1), "groups": groups}
    dx, dw = dev(x), dev(wt)
    gy = rng.standard_normal((2, 16, 10, 10)).astype("float32")
    dgy = dev(gy)
    for step in range(3):
        close(unidev.ops.conv2d(dx, dw, algorithm=algo, **attrs),
              reference.run("conv2d", [x, wt, None], attrs)[0], "float32")
        close(unidev.ops.conv2d_backward_input(dgy, dw, input_shape=x.shape, algorithm=algo,
                                               **attrs),
              reference.run("conv2d_backward_input", [gy, wt],
                            dict(attrs, input_shape=x.shape))[0], "float32")
        wt -= 0.1 * step + 0.5  # in place, same buffer, same shapes
        unidev.ops.copy(dev(wt), out=dw)


@pytest.mark.parametrize("groups", [1, 4])
def test_conv_from_several_threads(groups):
    """Host threads sharing cached plans (same shapes, different data) get their own answers."""
    from concurrent.futures import ThreadPoolExecutor

    attrs = {"stride": (1, 1), "padding": (1, 1), "groups": groups}
    data = [(rng.standard_normal((2, 8, 12, 12)).astype("float32"),
             rng.standard_normal((8, 8 // groups, 3, 3)).astype("float32")) for _ in range(4)]

    def run(i: int) -> None:
        x, wt = data[i]
        for _ in range(5):
            close(unidev.ops.conv2d(dev(x), dev(wt), algorithm="onednn", **attrs),
                  reference.run("conv2d", [x, wt, None], attrs)[0], "float32")

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(run, range(4)))
