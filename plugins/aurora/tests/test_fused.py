"""aurora's tier-4 kernels against the numpy reference: conv2d_bias_act (NCHW and channels-last,
every algorithm, the epilogue on each tile), gemm_bias_act (row and column tiles, strided
operands), elementwise_program (runs across rows, broadcasts, registers, several outputs,
reductions split over the cores) and malformed programs refused by the kernel itself."""

from __future__ import annotations

import numpy as np
import pytest
from test_channels_last import copies, empty_nhwc, nchw, nhwc

import unidev
from unidev.conformance import abi
from unidev.contract import opset
from unidev.core import reference

F32, F64 = "float32", "float64"


def as_list(x) -> list:
    return list(x) if isinstance(x, list | tuple) else [x]


@pytest.mark.parametrize("algorithm", ["auto", "direct", "im2col"])
@pytest.mark.parametrize("layout", ["nchw", "nhwc"])
def test_conv2d_bias_act_matches_reference(layout: str, algorithm: str) -> None:
    rng = np.random.default_rng(21)
    view = nhwc if layout == "nhwc" else nchw
    shapes = [((2, 4, 8, 16), (6, 2, 3, 3), (1, 1), 2),   # auto: register tiles in NCHW
              ((3, 5, 7, 6), (4, 5, 3, 2), (2, 1), 1),
              ((1, 6, 9, 9), (6, 1, 3, 3), (1, 2), 6)]    # depthwise
    for (xs, ws, stride, groups), act in zip(shapes * 3, opset.ACTIVATIONS[1:] * 2, strict=False):
        x, w = rng.standard_normal(xs), rng.standard_normal(ws)
        attrs = {"stride": stride, "padding": (1, 1), "dilation": (1, 1), "groups": groups,
                 "algorithm": algorithm, "activation": act}
        y_shape = reference.run("conv2d", [x, w, None], {k: v for k, v in attrs.items()
                                                        if k != "activation"})[0].shape
        bias = rng.standard_normal(ws[0]) if act != "tanh" else None
        res = rng.standard_normal(y_shape) if act != "gelu" else None
        dtype = F64 if act == "silu" else F32
        x, w = x.astype(dtype), w.astype(dtype)
        bias = None if bias is None else bias.astype(dtype)
        res = None if res is None else res.astype(dtype)
        want = reference.run("conv2d_bias_act", [x, w, bias, res], attrs)[0]
        out = empty_nhwc(y_shape, dtype) if layout == "nhwc" else None
        before = copies()
        got = unidev.ops.conv2d_bias_act(view(x), nchw(w), None if bias is None else nchw(bias),
                                         None if res is None else view(res), out=out, **attrs)
        tol = 2e-4 if dtype == F32 else 1e-10
        np.testing.assert_allclose(got.numpy(), want, rtol=tol, atol=tol, err_msg=act)
        assert copies() == before


@pytest.mark.parametrize("m,n,k", [(301, 17, 40), (3, 1000, 9), (8, 8, 0), (1, 1, 1)])
def test_gemm_bias_act_matches_reference(m: int, n: int, k: int) -> None:
    rng = np.random.default_rng(22)
    for act, dtype in zip(opset.ACTIVATIONS, [F32, F64] * 4, strict=False):
        a = rng.standard_normal((m, k)).astype(dtype)
        b = rng.standard_normal((k, n)).astype(dtype)
        bias = rng.standard_normal(n).astype(dtype)
        res = rng.standard_normal((m, n)).astype(dtype)
        attrs = {"alpha": -0.75, "activation": act}
        want = reference.run("gemm_bias_act", [a, b, bias, res], attrs)[0]
        # a transposed, b and the residual strided, the output a transposed view
        got = unidev.DeviceArray.empty((n, m), dtype, "aurora").T
        unidev.ops.gemm_bias_act(nchw(a.T).T, nchw(np.repeat(b, 2, axis=1))[:, ::2], nchw(bias),
                                 nchw(res.T).T, out=got, **attrs)
        tol = 2e-4 if dtype == F32 else 1e-10
        np.testing.assert_allclose(got.numpy(), want, rtol=tol, atol=tol, err_msg=act)
        plain = unidev.ops.gemm_bias_act(nchw(a), nchw(b), None, None, alpha=1.0, activation=act)
        np.testing.assert_allclose(plain.numpy(), reference.run(
            "gemm_bias_act", [a, b, None, None], {"alpha": 1.0, "activation": act})[0],
            rtol=tol, atol=tol)


PROGRAMS = [  # program, number of inputs
    ("i0 i1 mul i2 add o0", 3),
    ("i0 s0 r0 r0 mul c0.5 add s1 r1 sqrt o0 i1 r1 div tanh o1 r0 i1 maximum o2", 2),
    ("i0 i1 i0 c0 gt where gelu_tanh i1 silu sub o0 i0 floor o1", 2),
    ("i0 cnan i1 c0 lt where o0", 2),  # nan where i1 < 0: max/min propagate it
]


@pytest.mark.parametrize("program,n_in", PROGRAMS)
@pytest.mark.parametrize("reduce,axes", [("none", ()), ("sum", (2,)), ("mean", (1, 2)),
                                         ("max", (0, 1, 2)), ("min", (2,))])
def test_elementwise_program_matches_reference(program: str, n_in: int, reduce: str,
                                               axes: tuple) -> None:
    rng = np.random.default_rng(23)
    shape = (3, 7, 301)  # rows of 301: runs of 256 end inside rows; one output: parts per core
    xs = [rng.standard_normal(shape).astype(F32) for _ in range(n_in)]
    dev = [nchw(xs[0])]
    if n_in > 1:  # a broadcast row (stride 0) and a strided view
        xs[1] = np.broadcast_to(xs[1][0, :1], shape).copy()
        dev.append(nchw(xs[1][0, :1]).broadcast_to(shape))
    if n_in > 2:
        dev.append(nchw(np.repeat(xs[2], 3, axis=2))[..., ::3])
    attrs = {"program": program, "reduce": reduce, "reduce_axes": axes}
    want = reference.run("elementwise_program", xs, attrs)
    got = as_list(unidev.ops.elementwise_program(*dev, **attrs))
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g.numpy(), w, rtol=3e-5, atol=3e-5, err_msg=program)


def test_elementwise_program_output_views_and_float64() -> None:
    rng = np.random.default_rng(24)
    x = rng.standard_normal((5, 4, 3))
    out = unidev.DeviceArray.empty((3, 4, 5), F64, "aurora").transpose(2, 1, 0)
    unidev.ops.elementwise_program(nchw(x), program="i0 exp c-1 add o0", out=out)
    np.testing.assert_allclose(out.numpy(), np.expm1(x), rtol=1e-12, atol=1e-12)
    total = unidev.ops.elementwise_program(nchw(np.zeros((2, 0))), program="i0 o0",
                                           reduce="sum", reduce_axes=(1,))
    np.testing.assert_array_equal(as_list(total)[0].numpy(), [0.0, 0.0])


@pytest.mark.parametrize("program,word", [("i0 i1 foo o0", "'foo'"), ("i0 add o0", "'add'"),
                                          ("i0 i1 o0", "left on the stack"), ("i3 o0", "'i3'"),
                                          ("r2 o0", "'r2'"), ("i0 o1", "'o1'")])
def test_malformed_programs_are_refused_by_the_kernel(api, raw, program: str, word: str) -> None:
    h = api.alloc(0, 0, 64)
    t = abi.RawTensor(h, F32, [4])
    attrs = [("program", "str", program), ("reduce", "str", "none"), ("reduce_axes", "ints", [])]
    with pytest.raises(abi.PluginError) as err:
        raw.kernel("elementwise_program", F32, 0, 0, [t, t], [t], attrs)
    assert err.value.code_name == "INVALID_ARGUMENT"
    assert "elementwise_program" in err.value.message and word in err.value.message
    api.call("mem_free", 0, None, h)
    api.call("stream_synchronize", None)
