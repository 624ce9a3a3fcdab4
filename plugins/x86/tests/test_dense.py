"""unidev-x86's dense kernels (matmul, gemm, conv2d and both backwards) vs the numpy reference."""

from __future__ import annotations

import numpy as np
import pytest

import unidev
from unidev.core import discovery, reference
from unidev.core import ops as uops
from unidev.core.errors import InvalidArgumentError, UnsupportedError

DEV = "x86"


def _available() -> bool:
    try:
        return discovery.get(DEV).status == "ok"
    except Exception:
        return False


pytestmark = pytest.mark.skipif(not _available(), reason="unidev-x86 is not installed")

ALGOS = ("auto", "onednn", "direct", "im2col", "winograd")
TOL = {"float32": 2e-5, "float64": 1e-12}
rng = np.random.default_rng(7)


def rand(shape, dtype: str) -> np.ndarray:
    return rng.standard_normal(shape).astype(dtype)


def layouts(a: np.ndarray) -> dict[str, unidev.DeviceArray]:
    """Device views holding `a`'s values: dense, reversed-axes memory, every-other-element and
    offset (a view starting one slab into its buffer)."""
    perm = tuple(reversed(range(a.ndim)))
    inv = tuple(np.argsort(perm))
    wide = np.zeros(a.shape[:-1] + (2 * a.shape[-1],), a.dtype)
    wide[..., ::2] = a
    padded = np.concatenate([np.zeros((1,) + a.shape[1:], a.dtype), a])
    views = {
        "dense": unidev.DeviceArray.from_numpy(a, device=DEV),
        "transposed": unidev.DeviceArray.from_numpy(np.ascontiguousarray(a.transpose(perm)),
                                                    device=DEV).transpose(inv),
        "strided": unidev.DeviceArray.from_numpy(wide, device=DEV)[..., ::2],
        "offset": unidev.DeviceArray.from_numpy(padded, device=DEV)[1:],
    }
    for name, v in views.items():
        assert np.array_equal(v.numpy(), a), name
    return views


def close(got: unidev.DeviceArray | np.ndarray, want: np.ndarray, dtype: str) -> None:
    got = np.asarray(got.numpy() if isinstance(got, unidev.DeviceArray) else got)
    assert got.shape == want.shape
    scale = max(1.0, float(np.abs(want).max())) if want.size else 1.0
    err = float(np.abs(got.astype(np.float64) - want).max()) if want.size else 0.0
    assert err <= TOL[dtype] * scale * 10, f"max error {err:.3g} (scale {scale:.3g})"


# ---- matmul / gemm ---------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("mkn", [(3, 4, 5), (1, 7, 1), (8, 1, 6), (33, 17, 65), (64, 64, 64),
                                 (65, 300, 130), (130, 300, 65)])  # split over threads
def test_matmul_layouts(dtype, mkn):
    m, k, n = mkn
    a, b = rand((m, k), dtype), rand((k, n), dtype)
    want = reference.run("matmul", [a, b])[0]
    for va in layouts(a).values():
        for vb in layouts(b).values():
            close(unidev.ops.matmul(va, vb), want, dtype)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_matmul_into_transposed_and_strided_outputs(dtype):
    a, b = rand((9, 5), dtype), rand((5, 7), dtype)
    want = a @ b
    col_major = unidev.DeviceArray.empty((7, 9), dtype, DEV).T
    unidev.ops.matmul(unidev.DeviceArray.from_numpy(a, device=DEV),
                      unidev.DeviceArray.from_numpy(b, device=DEV), out=col_major)
    close(col_major, want, dtype)
    every_other = unidev.DeviceArray.empty((9, 14), dtype, DEV)[:, ::2]
    unidev.ops.matmul(layouts(a)["strided"], layouts(b)["transposed"], out=every_other)
    close(every_other, want, dtype)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_matmul_batched_with_broadcast_batches(dtype):
    a, b = rand((3, 4, 5, 6), dtype), rand((1, 4, 6, 7), dtype)
    want = reference.run("matmul", [a, np.broadcast_to(b, (3, 4, 6, 7))])[0]
    vb = unidev.DeviceArray.from_numpy(b, device=DEV).broadcast_to((3, 4, 6, 7))
    for va in layouts(a).values():
        close(unidev.ops.matmul(va, vb), want, dtype)


def test_matmul_empty_inner_dim_gives_zeros():
    a, b = np.zeros((4, 0), np.float32), np.zeros((0, 3), np.float32)
    out = unidev.ops.matmul(unidev.DeviceArray.from_numpy(a, device=DEV),
                            unidev.DeviceArray.from_numpy(b, device=DEV))
    assert out.shape == (4, 3) and not out.numpy().any()


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("c_shape", [None, (6,), (5, 1), (5, 6), ()])
@pytest.mark.parametrize("alpha,beta", [(1.0, 1.0), (0.5, -2.0), (2.0, 0.0), (0.0, 3.0)])
def test_gemm(dtype, c_shape, alpha, beta):
    a, b = rand((5, 4), dtype), rand((4, 6), dtype)
    c = None if c_shape is None else rand(c_shape, dtype)
    want = reference.run("gemm", [a, b, c], {"alpha": alpha, "beta": beta})[0]
    vc = None if c is None else unidev.DeviceArray.from_numpy(c, device=DEV)
    for va in layouts(a).values():
        got = unidev.ops.gemm(va, layouts(b)["transposed"], vc, alpha=alpha, beta=beta)
        close(got, want, dtype)


def test_gemm_beta_zero_ignores_nan_c():
    a, b = rand((3, 3), "float32"), rand((3, 3), "float32")
    c = unidev.DeviceArray.from_numpy(np.full((3, 3), np.nan, np.float32), device=DEV)
    got = unidev.ops.gemm(unidev.DeviceArray.from_numpy(a, device=DEV),
                          unidev.DeviceArray.from_numpy(b, device=DEV), c, beta=0.0)
    close(got, a.astype(np.float64) @ b, "float32")


# ---- conv2d ----------------------------------------------------------------------------------

# (N, C, H, W, K, R, S, stride, padding, dilation, groups)
CONVS = [
    (2, 4, 9, 7, 6, 3, 3, (1, 1), (1, 1), (1, 1), 1),
    (1, 3, 10, 11, 5, 3, 3, (1, 1), (0, 0), (1, 1), 1),
    (2, 6, 8, 8, 4, 3, 3, (1, 1), (2, 1), (1, 1), 2),
    (2, 4, 9, 10, 8, 3, 2, (2, 3), (1, 0), (2, 1), 2),
    (1, 8, 7, 7, 8, 3, 3, (1, 1), (1, 1), (1, 1), 8),
    (3, 5, 6, 6, 7, 1, 1, (1, 1), (0, 0), (1, 1), 1),
    (2, 4, 13, 12, 3, 5, 5, (2, 2), (2, 2), (1, 1), 1),
    (1, 16, 5, 6, 16, 3, 3, (1, 1), (1, 1), (1, 1), 1),
    (2, 32, 4, 4, 24, 3, 3, (1, 1), (1, 1), (1, 1), 1),
    (2, 32, 29, 28, 32, 3, 3, (1, 1), (1, 1), (1, 1), 1),
]


def conv_inputs(case, dtype):
    n, c, h, w, k, r, s, stride, padding, dilation, groups = case
    attrs = {"stride": stride, "padding": padding, "dilation": dilation, "groups": groups}
    x, wt, bias = rand((n, c, h, w), dtype), rand((k, c // groups, r, s), dtype), rand(k, dtype)
    y = reference.run("conv2d", [x, wt, bias], attrs)[0]
    gy = rand(y.shape, dtype)
    return x, wt, bias, gy, attrs


def expect_rejection(algo: str, case, dtype: str):
    """The error an (algorithm, problem) pair must raise, or None if it must run."""
    r, s, stride, dilation = case[5], case[6], case[7], case[9]
    if algo == "winograd" and not (r == s == 3 and stride == (1, 1) and dilation == (1, 1)):
        return InvalidArgumentError
    if algo == "onednn" and dtype == "float64":
        return UnsupportedError
    return None


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("algo", ALGOS)
@pytest.mark.parametrize("case", CONVS, ids=[f"conv{i}" for i in range(len(CONVS))])
def test_conv2d_all_directions(case, algo, dtype):
    x, wt, bias, gy, attrs = conv_inputs(case, dtype)
    d = {name: unidev.DeviceArray.from_numpy(v, device=DEV)
         for name, v in (("x", x), ("w", wt), ("b", bias), ("gy", gy))}
    calls = [
        ("conv2d", [d["x"], d["w"], d["b"]], [x, wt, bias], {}),
        ("conv2d", [d["x"], d["w"]], [x, wt], {}),
        ("conv2d_backward_input", [d["gy"], d["w"]], [gy, wt], {"input_shape": x.shape}),
        ("conv2d_backward_weight", [d["gy"], d["x"]], [gy, x], {"weight_shape": wt.shape}),
    ]
    bad = expect_rejection(algo, case, dtype)
    for op, dev_in, np_in, extra in calls:
        if bad is not None:
            with pytest.raises(bad, match=op):
                uops.call(op, *dev_in, algorithm=algo, **attrs, **extra)
            continue
        want = reference.run(op, np_in, {**attrs, **extra})[0]
        close(uops.call(op, *dev_in, algorithm=algo, **attrs, **extra), want, dtype)


@pytest.mark.parametrize("algo", ALGOS)
def test_conv2d_strided_views(algo):
    case = CONVS[7]
    x, wt, bias, gy, attrs = conv_inputs(case, "float32")
    want = {op: reference.run(op, ins, {**attrs, **extra})[0] for op, ins, extra in [
        ("conv2d", [x, wt, bias], {}),
        ("conv2d_backward_input", [gy, wt], {"input_shape": x.shape}),
        ("conv2d_backward_weight", [gy, x], {"weight_shape": wt.shape})]}
    lx, lw, lb, lg = layouts(x), layouts(wt), layouts(bias), layouts(gy)
    for name in ("transposed", "strided", "offset"):
        close(unidev.ops.conv2d(lx[name], lw[name], lb[name], algorithm=algo, **attrs),
              want["conv2d"], "float32")
        close(unidev.ops.conv2d_backward_input(lg[name], lw[name], input_shape=x.shape,
                                               algorithm=algo, **attrs),
              want["conv2d_backward_input"], "float32")
        close(unidev.ops.conv2d_backward_weight(lg[name], lx[name], weight_shape=wt.shape,
                                                algorithm=algo, **attrs),
              want["conv2d_backward_weight"], "float32")
    # an output written through strides: NHWC memory seen as NCHW
    y = unidev.DeviceArray.empty((x.shape[0], 5, 6, 16), "float32", DEV).transpose(0, 3, 1, 2)
    unidev.ops.conv2d(lx["dense"], lw["dense"], lb["dense"], out=y, algorithm=algo, **attrs)
    close(y, want["conv2d"], "float32")


@pytest.mark.parametrize("algo", ["auto", "onednn", "direct", "im2col"])
def test_conv2d_empty_sums(algo):
    """No input channels (or a batch of 0 for grad_w): outputs are bias or zero."""
    attrs = {"stride": (1, 1), "padding": (0, 0), "dilation": (1, 1), "groups": 1}
    x, w = np.zeros((2, 0, 4, 4), np.float32), np.zeros((3, 0, 1, 1), np.float32)
    b = rand(3, "float32")
    dx, dw, db = (unidev.DeviceArray.from_numpy(v, device=DEV) for v in (x, w, b))
    y = unidev.ops.conv2d(dx, dw, db, algorithm=algo, **attrs)
    close(y, np.broadcast_to(b[None, :, None, None], (2, 3, 4, 4)), "float32")
    gy = unidev.DeviceArray.from_numpy(np.zeros((0, 3, 4, 4), np.float32), device=DEV)
    x0 = unidev.DeviceArray.from_numpy(np.zeros((0, 2, 4, 4), np.float32), device=DEV)
    gw = unidev.ops.conv2d_backward_weight(gy, x0, weight_shape=(3, 2, 1, 1), algorithm=algo,
                                           **attrs)
    assert gw.shape == (3, 2, 1, 1) and not gw.numpy().any()


def test_conv2d_wide_layers_agree_across_algorithms():
    """1024 channels: Winograd works through several tile blocks, im2col through big GEMMs."""
    attrs = {"stride": (1, 1), "padding": (1, 1), "dilation": (1, 1), "groups": 1}
    x, wt = rand((1, 1024, 12, 12), "float32"), rand((1024, 1024, 3, 3), "float32") / 96
    gy = rand((1, 1024, 12, 12), "float32")
    d = [unidev.DeviceArray.from_numpy(v, device=DEV) for v in (x, wt, gy)]
    results = {}
    for algo in ("im2col", "winograd", "onednn"):
        results[algo] = [
            unidev.ops.conv2d(d[0], d[1], algorithm=algo, **attrs).numpy(),
            unidev.ops.conv2d_backward_input(d[2], d[1], input_shape=x.shape, algorithm=algo,
                                             **attrs).numpy(),
            unidev.ops.conv2d_backward_weight(d[2], d[0], weight_shape=wt.shape, algorithm=algo,
                                              **attrs).numpy()]
    for algo in ("winograd", "onednn"):
        for got, want in zip(results[algo], results["im2col"], strict=True):
            scale = float(np.abs(want).max())
            assert float(np.abs(got - want).max()) <= 1e-4 * scale, algo


# ---- bad inputs: through unidev.ops and straight into the kernels ------------------------------

def test_unknown_algorithm_is_rejected():
    x, wt, _, _, attrs = conv_inputs(CONVS[0], "float32")
    with pytest.raises(InvalidArgumentError, match="algorithm.*fastest"):
        unidev.ops.conv2d(unidev.DeviceArray.from_numpy(x, device=DEV),
                          unidev.DeviceArray.from_numpy(wt, device=DEV), algorithm="fastest",
                          **attrs)


def test_winograd_names_its_limits():
    x, wt, _, _, attrs = conv_inputs(CONVS[6], "float32")
    with pytest.raises(InvalidArgumentError, match="winograd.*3x3.*got 5x5"):
        unidev.ops.conv2d(unidev.DeviceArray.from_numpy(x, device=DEV),
                          unidev.DeviceArray.from_numpy(wt, device=DEV), algorithm="winograd",
                          **attrs)


raw_call = uops.call_kernel  # past unidev.ops's own checks


def dev_zeros(shape, dtype="float32"):
    return unidev.DeviceArray.from_numpy(np.zeros(shape, dtype), device=DEV)


@pytest.mark.parametrize("op,inputs,outputs,attrs,match", [
    ("matmul", [(3, 4), (5, 6)], [(3, 6)], {}, r"matmul: a \[.., 3, 4\] @ b \[.., 5, 6\]"),
    ("matmul", [(3, 4), (4, 6)], [(3, 7)], {}, "expected b"),
    ("matmul", [(2, 3, 4), (3, 4, 6)], [(2, 3, 6)], {}, "batch dim 0"),
    ("gemm", [(3, 4), (4, 6), (2, 6)], [(3, 6)], {}, "'c' shape does not match"),
    ("conv2d", [(1, 4, 5, 5), (6, 3, 3, 3), None], [(1, 6, 3, 3)], {"groups": 2},
     "weight.shape\\[1\\] == 2"),
    ("conv2d", [(1, 4, 5, 5), (6, 4, 3, 3), None], [(1, 6, 4, 4)], {}, "'y' has shape"),
    ("conv2d", [(1, 4, 5, 5), (6, 4, 3, 3), (5,)], [(1, 6, 3, 3)], {}, "'bias' has 5 values"),
    ("conv2d", [(1, 4, 2, 2), (6, 4, 3, 3), None], [(1, 6, 1, 1)], {}, "larger than the padded"),
    ("conv2d_backward_input", [(1, 6, 3, 3), (6, 4, 3, 3)], [(1, 4, 5, 5)],
     {"input_shape": (1, 4, 6, 6)}, "'grad_y' has shape"),
    ("conv2d_backward_weight", [(1, 6, 3, 3), (1, 4, 5, 5)], [(6, 4, 3, 3)],
     {"weight_shape": (6, 4, 3)}, "'weight_shape' has 3 values"),
])
def test_kernels_validate_their_arguments(op, inputs, outputs, attrs, match):
    ins = [None if s is None else dev_zeros(s) for s in inputs]
    outs = [dev_zeros(s) for s in outputs]
    with pytest.raises(InvalidArgumentError, match=f"{op}.*{match}|{match}"):
        raw_call(op, ins, outs, attrs)


def test_kernels_reject_mixed_dtypes_and_bad_attrs():
    with pytest.raises(InvalidArgumentError, match="matmul: 'b' has dtype float64"):
        raw_call("matmul", [dev_zeros((2, 2)), dev_zeros((2, 2), "float64")],
                 [dev_zeros((2, 2))], {})
    with pytest.raises(InvalidArgumentError, match="'stride' has 0 at 0, expected values >= 1"):
        raw_call("conv2d", [dev_zeros((1, 1, 3, 3)), dev_zeros((1, 1, 1, 1)), None],
                 [dev_zeros((1, 1, 3, 3))], {"stride": (0, 1)})
    with pytest.raises(InvalidArgumentError, match="'groups' is 0"):
        raw_call("conv2d", [dev_zeros((1, 1, 3, 3)), dev_zeros((1, 1, 1, 1)), None],
                 [dev_zeros((1, 1, 3, 3))], {"groups": 0})
