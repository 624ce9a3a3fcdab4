"""aurora's channels-last kernels (issue 24): conv2d and its gradients, pooling and batch norm on
NCHW-shaped views with channels-innermost strides, against the numpy reference; outputs written
in the layout their descriptors give, no layout copies, and other strides copied and counted."""

from __future__ import annotations

import numpy as np
import pytest

import unidev
from unidev.core import reference

F32, F64 = "float32", "float64"


def tol(dtype: str) -> dict:
    return {"rtol": 2e-4, "atol": 2e-4} if dtype == F32 else {"rtol": 1e-10, "atol": 1e-10}


def copies() -> int:
    return unidev.debug_counters("aurora")["layout_copies"]


def nchw(x: np.ndarray) -> unidev.DeviceArray:
    return unidev.DeviceArray.from_numpy(np.ascontiguousarray(x), "aurora")


def nhwc(x: np.ndarray) -> unidev.DeviceArray:
    """x [N, C, H, W] on the device as a channels-last view: strides (H*W*C, 1, W*C, C)."""
    return nchw(x.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)


def empty_nhwc(shape: tuple, dtype: str) -> unidev.DeviceArray:
    n, c, h, w = shape
    return unidev.DeviceArray.empty((n, h, w, c), dtype, "aurora").transpose(0, 3, 1, 2)


def is_nhwc(a: unidev.DeviceArray) -> bool:
    n, c, h, w = a.shape
    return a.strides == (h * w * c, 1, w * c, c)


def weight_view(w: np.ndarray, form: str) -> unidev.DeviceArray:
    """w [K, C/g, R, S] as the frameworks hand it: dense, channels-last (torch) or HWIO (TF)."""
    if form == "dense":
        return nchw(w)
    if form == "krsc":
        return nchw(w.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)
    return nchw(w.transpose(2, 3, 1, 0)).transpose(3, 2, 0, 1)  # hwio


CONV_CASES = [  # x shape, w shape, stride, padding, dilation, groups, weight form
    ((2, 3, 9, 11), (5, 3, 3, 3), (1, 1), (1, 1), (1, 1), 1, "krsc"),
    ((3, 8, 7, 6), (16, 8, 1, 1), (1, 1), (0, 0), (1, 1), 1, "hwio"),     # 1x1: x is the operand
    ((1, 6, 10, 9), (6, 1, 3, 3), (2, 2), (1, 1), (1, 1), 6, "dense"),    # depthwise, stride 2
    ((2, 4, 9, 8), (6, 2, 3, 2), (2, 1), (1, 1), (1, 2), 2, "krsc"),      # groups, dilation
    ((2, 6, 8, 7), (12, 1, 5, 3), (1, 2), (2, 0), (1, 1), 6, "hwio"),     # depth multiplier 2
    ((1, 5, 13, 5), (7, 5, 2, 4), (3, 1), (0, 2), (2, 1), 1, "dense"),
    ((2, 3, 5, 5), (4, 3, 1, 1), (2, 2), (1, 1), (1, 1), 1, "dense"),     # 1x1 but strided, padded
    ((9, 64, 9, 10), (48, 32, 3, 3), (1, 1), (1, 1), (1, 1), 2, "krsc"),  # blocks across images
]


@pytest.mark.parametrize("algorithm", ["auto", "direct", "im2col"])
@pytest.mark.parametrize("case", CONV_CASES, ids=[str(c[0]) + str(c[1]) for c in CONV_CASES])
def test_conv_and_gradients_channels_last(case, algorithm: str) -> None:
    xs, ws, stride, pad, dil, groups, form = case
    dtype = F64 if ws[2] == 5 else F32
    rng = np.random.default_rng(11)
    x = rng.standard_normal(xs).astype(dtype)
    w = rng.standard_normal(ws).astype(dtype)
    b = rng.standard_normal(ws[0]).astype(dtype)
    attrs = {"stride": stride, "padding": pad, "dilation": dil, "groups": groups,
             "algorithm": algorithm}
    before = copies()
    want = reference.run("conv2d", [x, w, b], attrs)[0]
    y = empty_nhwc(want.shape, dtype)
    unidev.ops.conv2d(nhwc(x), weight_view(w, form), nchw(b), out=y, **attrs)
    np.testing.assert_allclose(y.numpy(), want, **tol(dtype))
    gy = rng.standard_normal(want.shape).astype(dtype)
    gx_want = reference.run("conv2d_backward_input", [gy, w],
                                        dict(attrs, input_shape=xs))[0]
    gx = empty_nhwc(xs, dtype)
    unidev.ops.conv2d_backward_input(nhwc(gy), weight_view(w, form), input_shape=xs, out=gx,
                                     **attrs)
    np.testing.assert_allclose(gx.numpy(), gx_want, **tol(dtype))
    gw_want = reference.run("conv2d_backward_weight", [gy, x],
                                        dict(attrs, weight_shape=ws))[0]
    gw = unidev.ops.conv2d_backward_weight(nhwc(gy), nhwc(x), weight_shape=ws, **attrs)
    np.testing.assert_allclose(gw.numpy(), gw_want, **tol(dtype))
    assert copies() == before  # every activation was used in place, every output written so


POOLS = [  # op, attrs, x shape
    ("max_pool2d", {"kernel_size": (3, 3), "stride": (2, 2), "padding": (1, 1)}, (2, 5, 9, 7)),
    ("max_pool2d", {"kernel_size": (2, 3), "stride": (1, 2), "dilation": (2, 1),
                    "ceil_mode": True}, (1, 19, 6, 9)),
    ("avg_pool2d", {"kernel_size": (3, 2), "stride": (2, 1), "padding": (1, 1),
                    "count_include_pad": False}, (2, 3, 7, 8)),
    ("avg_pool2d", {"kernel_size": (3, 3), "stride": (2, 2), "padding": (1, 1),
                    "ceil_mode": True}, (1, 17, 8, 5)),
    ("adaptive_avg_pool2d", {"output_size": (3, 2)}, (2, 6, 7, 5)),
    ("adaptive_avg_pool2d", {"output_size": (1, 1)}, (3, 33, 4, 4)),   # global pooling
]


@pytest.mark.parametrize("dtype", [F32, F64])
@pytest.mark.parametrize("op,attrs,shape", POOLS, ids=[p[0] + str(p[2]) for p in POOLS])
def test_pooling_and_gradients_channels_last(op: str, attrs: dict, shape: tuple,
                                             dtype: str) -> None:
    rng = np.random.default_rng(12)
    x = rng.integers(-4, 5, shape).astype(dtype)  # ties: the first tap must win, as in NCHW
    if op == "max_pool2d":
        x.flat[rng.choice(x.size, 5, replace=False)] = np.nan
    before = copies()
    want = reference.run(op, [x], attrs)
    outs = [empty_nhwc(want[0].shape, dtype)]
    if op == "max_pool2d":
        outs.append(empty_nhwc(want[1].shape, "int64"))
    getattr(unidev.ops, op)(nhwc(x), out=outs if len(outs) > 1 else outs[0], **attrs)
    for got, w in zip(outs, want, strict=True):
        np.testing.assert_allclose(got.numpy(), w, **tol(dtype))
    gy = rng.standard_normal(want[0].shape).astype(dtype)
    extra = [want[1]] if op == "max_pool2d" else []
    gx_want = reference.run(op + "_backward", [gy, x, *extra], attrs)[0]
    gx = empty_nhwc(shape, dtype)
    dev_extra = [outs[1]] if op == "max_pool2d" else []
    getattr(unidev.ops, op + "_backward")(nhwc(gy), nhwc(x), *dev_extra, out=gx, **attrs)
    np.testing.assert_allclose(gx.numpy(), gx_want, **tol(dtype))
    assert copies() == before


@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("shape", [(4, 7, 5, 3), (1, 19, 1, 2), (3, 5, 6)],
                         ids=["4d", "one-image", "3d"])
def test_batch_norm_and_gradient_channels_last(shape: tuple, training: bool) -> None:
    rng = np.random.default_rng(13)
    c = shape[1]
    x = (rng.standard_normal(shape) * 3 + 1).astype(F32)
    w, b = rng.standard_normal(c).astype(F32), rng.standard_normal(c).astype(F32)
    rm, rv = rng.standard_normal(c).astype(F32), rng.random(c).astype(F32) + 0.5
    attrs = {"training": training, "momentum": 0.2, "eps": 1e-5}
    perm = (0, *range(2, len(shape)), 1)
    back = (0, len(shape) - 1, *range(1, len(shape) - 1))

    def cl(a: np.ndarray) -> unidev.DeviceArray:  # channels-last for any rank
        return nchw(a.transpose(perm)).transpose(back)

    before = copies()
    ref_rm, ref_rv = rm.copy(), rv.copy()
    want = reference.run("batch_norm", [x, w, b, ref_rm, ref_rv], attrs)
    d_rm, d_rv = nchw(rm), nchw(rv)
    y = nchw(np.zeros(shape, F32).transpose(perm)).transpose(back)
    _, sm, si = unidev.ops.batch_norm(cl(x), nchw(w), nchw(b), d_rm, d_rv,
                                      out=[y, nchw(np.zeros(c, F32)), nchw(np.zeros(c, F32))],
                                      **attrs)
    for got, ref in zip((y, sm, si), want, strict=True):
        np.testing.assert_allclose(got.numpy(), ref, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(d_rm.numpy(), ref_rm, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(d_rv.numpy(), ref_rv, rtol=1e-5, atol=1e-6)
    gy = rng.standard_normal(shape).astype(F32)
    want = reference.run("batch_norm_backward", [gy, x, w, want[1], want[2]],
                         {"training": training})
    gx = nchw(np.zeros(shape, F32).transpose(perm)).transpose(back)
    _, gw, gb = unidev.ops.batch_norm_backward(
        cl(gy), cl(x), nchw(w), sm, si, training=training,
        out=[gx, nchw(np.zeros(c, F32)), nchw(np.zeros(c, F32))])
    for got, ref in zip((gx, gw, gb), want, strict=True):
        np.testing.assert_allclose(got.numpy(), ref, rtol=1e-4, atol=1e-4)
    assert copies() == before


def sliced(x: np.ndarray) -> unidev.DeviceArray:
    """x as a view in neither layout: every other column of a wider array."""
    wide = np.zeros(x.shape[:3] + (2 * x.shape[3],), x.dtype)
    wide[..., ::2] = x
    return nchw(wide)[..., ::2]


def test_other_strides_and_mixed_layouts_are_copied_and_counted() -> None:
    rng = np.random.default_rng(14)
    x = rng.standard_normal((2, 4, 6, 5)).astype(F32)
    w = rng.standard_normal((3, 4, 3, 3)).astype(F32)
    attrs = {"stride": (1, 1), "padding": (1, 1), "dilation": (1, 1), "groups": 1,
             "algorithm": "auto"}
    want = reference.run("conv2d", [x, w, None], attrs)[0]
    cases = [  # x view, output (None: unidev.ops allocates NCHW), expected copies
        (nchw(x), None, 0), (sliced(x), None, 1), (nhwc(x), empty_nhwc(want.shape, F32), 0),
        (sliced(x), empty_nhwc(want.shape, F32), 1),  # x copied into the output's layout
        (nhwc(x), None, 1), (nchw(x), empty_nhwc(want.shape, F32), 1),
        (nhwc(x), sliced(np.zeros(want.shape, F32)), 1)]
    for xv, out, n in cases:
        before = copies()
        got = unidev.ops.conv2d(xv, nchw(w), None, out=out, **attrs)
        np.testing.assert_allclose(got.numpy(), want, rtol=2e-4, atol=2e-4)
        assert copies() - before == n, (xv.strides, got.strides)
    pool = {"kernel_size": (2, 2), "stride": (2, 2)}
    before = copies()
    y, idx = unidev.ops.max_pool2d(sliced(x), **pool)
    want_y, want_i = reference.run("max_pool2d", [x], pool)
    np.testing.assert_array_equal(idx.numpy(), want_i)
    gx = unidev.ops.max_pool2d_backward(nhwc(want_y), sliced(x), idx, **pool)  # x: shape only
    np.testing.assert_allclose(gx.numpy(), reference.run("max_pool2d_backward",
                                                         [want_y, x, want_i], pool)[0])
    y = unidev.ops.batch_norm(sliced(x), None, None, None, None, training=True)[0]
    np.testing.assert_allclose(y.numpy(), reference.run("batch_norm", [x, None, None, None, None],
                                                        {"training": True})[0], atol=1e-5)
    assert copies() - before == 1 + 1 + 1  # the sliced x twice, grad_y NHWC against NCHW outputs


def test_nchw_stays_uncopied_and_hooks_report_counters() -> None:
    assert set(unidev.debug_counters("aurora")) == {"layout_copies"}
    rng = np.random.default_rng(15)
    x = rng.standard_normal((1, 1, 5, 5)).astype(F32)  # C = 1: both layouts at once
    before = copies()
    y = unidev.ops.conv2d(nchw(x), nchw(np.ones((4, 1, 3, 3), F32)), None, stride=(1, 1),
                          padding=(0, 0), dilation=(1, 1), groups=1, algorithm="auto",
                          out=empty_nhwc((1, 4, 3, 3), F32))
    assert is_nhwc(y) and copies() == before  # the output's layout decides
    np.testing.assert_allclose(y.numpy()[0, 2], reference.run(
        "avg_pool2d", [x], {"kernel_size": (3, 3), "stride": (1, 1)})[0][0, 0] * 9, rtol=1e-5)


@pytest.mark.parametrize("layout", ["nchw", "nhwc"])
@pytest.mark.parametrize("xs,ws", [((0, 3, 5, 5), (4, 3, 3, 3)), ((2, 0, 5, 5), (4, 0, 3, 3)),
                                   ((2, 3, 5, 5), (0, 3, 3, 3))])
def test_empty_batch_or_channels(layout: str, xs: tuple, ws: tuple) -> None:
    # N = 0 crashed the NCHW weight gradient (a division by the number of (image, group) pairs)
    view = nhwc if layout == "nhwc" else nchw
    rng = np.random.default_rng(16)
    x, w = rng.standard_normal(xs).astype(F32), rng.standard_normal(ws).astype(F32)
    for algorithm in ("auto", "direct", "im2col"):
        attrs = {"stride": (1, 1), "padding": (1, 1), "dilation": (1, 1), "groups": 1,
                 "algorithm": algorithm}
        y = reference.run("conv2d", [x, w, None], attrs)[0]
        np.testing.assert_allclose(unidev.ops.conv2d(view(x), nchw(w), None, **attrs).numpy(), y)
        gy = rng.standard_normal(y.shape).astype(F32)
        gw = unidev.ops.conv2d_backward_weight(view(gy), view(x), weight_shape=ws, **attrs)
        np.testing.assert_allclose(gw.numpy(), reference.run(
            "conv2d_backward_weight", [gy, x], dict(attrs, weight_shape=ws))[0], atol=1e-5)
        gx = unidev.ops.conv2d_backward_input(view(gy), nchw(w), input_shape=xs, **attrs)
        np.testing.assert_allclose(gx.numpy(), reference.run(
            "conv2d_backward_input", [gy, w], dict(attrs, input_shape=xs))[0], atol=1e-5)
