"""x86 batch norm and pooling fast paths (whole-vector chunks, 2-d blocks) against the reference."""

from __future__ import annotations

import numpy as np
import pytest

import unidev
from unidev import ops
from unidev.core import discovery, reference

DEV = "x86:0"
RNG = np.random.default_rng(16)


@pytest.fixture(scope="module", autouse=True)
def _x86() -> None:
    rec = discovery.get("x86")
    if rec.status != "ok":
        pytest.skip(f"x86 plugin: {rec.error}")


def put(a: np.ndarray, view: str = "") -> unidev.DeviceArray:
    """a on the device, as a contiguous array or (view='wide') a slice of a wider one."""
    if view != "wide":
        return unidev.DeviceArray.from_numpy(np.ascontiguousarray(a), device=DEV)
    big = np.zeros(a.shape[:-1] + (2 * a.shape[-1] + 3,), a.dtype)
    big[..., 1:2 * a.shape[-1] + 1:2] = a
    return unidev.DeviceArray.from_numpy(big, device=DEV)[..., 1:2 * a.shape[-1] + 1:2]


def data(shape: tuple, dtype: str, ties: bool = False) -> np.ndarray:
    x = RNG.integers(-3, 4, shape) if ties else RNG.standard_normal(shape)
    x = x.astype(dtype)
    if ties and x.size:  # nans and infinities where a window holds several of them
        flat = x.reshape(-1)
        flat[RNG.integers(0, flat.size, max(1, flat.size // 40))] = np.nan
        flat[RNG.integers(0, flat.size, max(1, flat.size // 40))] = -np.inf
    return x


POOLS = [  # (H, W, kernel, stride, padding, dilation, ceil_mode)
    (32, 32, (2, 2), (2, 2), (0, 0), (1, 1), False),
    (9, 37, (3, 3), (2, 2), (1, 1), (1, 1), True),
    (7, 41, (2, 3), (1, 1), (1, 1), (1, 1), False),
    (6, 50, (3, 3), (1, 2), (1, 0), (2, 1), False),
    (5, 70, (1, 4), (1, 2), (0, 2), (1, 1), True),
    (8, 67, (2, 2), (2, 2), (0, 0), (1, 3), True),
    (4, 19, (3, 2), (2, 1), (1, 1), (1, 2), False),
]


@pytest.mark.parametrize("geom", POOLS)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("view", ["", "wide"])
def test_max_pool_and_backward(geom, dtype, view):
    h, w, k, s, p, d, ceil = geom
    x = data((2, 3, h, w), dtype, ties=True)
    attrs = dict(kernel_size=k, stride=s, padding=p, dilation=d, ceil_mode=ceil)
    want_y, want_i = reference.run("max_pool2d", [x], attrs)
    y, i = ops.max_pool2d(put(x, view), **attrs)
    np.testing.assert_array_equal(i.numpy(), want_i)
    np.testing.assert_array_equal(y.numpy(), want_y)
    gy = data(want_y.shape, dtype)
    (want_gx,) = reference.run("max_pool2d_backward", [gy, x, want_i], attrs)
    gx = ops.max_pool2d_backward(put(gy), put(x), put(want_i), **attrs)
    np.testing.assert_allclose(gx.numpy(), want_gx, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("geom", POOLS)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("include_pad", [False, True])
def test_avg_pool_and_backward(geom, dtype, include_pad):
    h, w, k, s, p, _, ceil = geom
    x = data((2, 3, h, w), dtype)
    attrs = dict(kernel_size=k, stride=s, padding=p, ceil_mode=ceil, count_include_pad=include_pad)
    (want,) = reference.run("avg_pool2d", [x], attrs)
    y = ops.avg_pool2d(put(x, "wide"), **attrs)
    np.testing.assert_allclose(y.numpy(), want, rtol=1e-5, atol=1e-6)
    gy = data(want.shape, dtype)
    (want_gx,) = reference.run("avg_pool2d_backward", [gy, x], attrs)
    gx = ops.avg_pool2d_backward(put(gy), put(x), **attrs)
    np.testing.assert_allclose(gx.numpy(), want_gx, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("shape,out", [((3, 5, 8, 8), (1, 1)), ((2, 3, 9, 40), (2, 3)),
                                       ((2, 2, 14, 14), (7, 7)), ((1, 2, 5, 67), (1, 2))])
@pytest.mark.parametrize("view", ["", "wide"])
def test_adaptive_avg_pool(shape, out, view):
    x = data(shape, "float32")
    (want,) = reference.run("adaptive_avg_pool2d", [x], dict(output_size=out))
    y = ops.adaptive_avg_pool2d(put(x, view), output_size=out)
    np.testing.assert_allclose(y.numpy(), want, rtol=1e-5, atol=1e-6)


BN_SHAPES = [(32, 8, 8, 8), (4, 3, 5, 7), (2, 5, 33), (3, 4), (1, 6, 1, 1), (5, 2, 130, 3)]


@pytest.mark.parametrize("shape", BN_SHAPES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("view", ["", "wide"])
def test_batch_norm_training_and_backward(shape, dtype, view):
    c = shape[1]
    # a large offset per channel: the variance must come from the deviations, not cancel
    offset = RNG.uniform(-1e3, 1e3, (1, c) + (1,) * (len(shape) - 2))
    x = (data(shape, dtype) + offset).astype(dtype)
    w, b = data((c,), dtype), data((c,), dtype)
    rm, rv = data((c,), dtype), np.abs(data((c,), dtype)) + 1
    attrs = dict(training=True, momentum=0.1, eps=1e-5)
    rm_ref, rv_ref = rm.copy(), rv.copy()
    want = reference.run("batch_norm", [x, w, b, rm_ref, rv_ref], attrs)
    drm, drv = put(rm), put(rv)
    got = ops.batch_norm(put(x, view), put(w), put(b), drm, drv, **attrs)
    tol = dict(rtol=2e-4, atol=2e-4) if dtype == "float32" else dict(rtol=1e-9, atol=1e-9)
    for g_, w_ in zip(got, want, strict=True):
        np.testing.assert_allclose(g_.numpy(), w_, **tol)
    np.testing.assert_allclose(drm.numpy(), rm_ref, **tol)
    np.testing.assert_allclose(drv.numpy(), rv_ref, **tol)
    gy = data(shape, dtype)
    bw = dict(training=True)
    want_b = reference.run("batch_norm_backward", [gy, x, w, want[1], want[2]], bw)
    got_b = ops.batch_norm_backward(put(gy, view), put(x, view), put(w), put(want[1]),
                                    put(want[2]), **bw)
    for g_, w_ in zip(got_b, want_b, strict=True):
        np.testing.assert_allclose(g_.numpy(), w_, rtol=tol["rtol"] * 10, atol=tol["atol"] * 10)
