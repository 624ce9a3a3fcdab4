"""Proves the numpy reference (unidev.core.reference) right against torch CPU, op by op."""

from __future__ import annotations

import inspect
import math
import time
from collections.abc import Callable, Iterator

import numpy as np
import pytest

from unidev.contract import opset
from unidev.core import reference
from unidev.core.errors import InvalidArgumentError

torch = pytest.importorskip("torch")

# (rtol, atol relative to the largest finite expected magnitude)
TOL = {"float32": (2e-5, 2e-6), "float64": (1e-11, 1e-13)}
LOOSE = {"float32": (1e-4, 2e-5), "float64": (1e-9, 1e-11)}  # long accumulations
INTS = ("int32", "int64")
REDUCTION = {"none": 0, "mean": 1, "sum": 2}  # torch's enum
FLOAT_SPECIALS = (np.nan, np.inf, -np.inf, 0.0, -0.0, 0.5, -2.5, 1.5, 2.5, -1.0)


# ------------------------------------------------------------------------------------------------
# helpers
# ------------------------------------------------------------------------------------------------

def tt(a: np.ndarray | None):
    """Torch gets contiguous copies; the reference gets the odd layouts."""
    return None if a is None else torch.from_numpy(np.array(a, order="C", copy=True))


def values(shape: tuple, dtype: str, seed: int = 0, specials: bool = False,
           lo: int = -20, hi: int = 20) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if dtype == "bool":
        return np.asarray(rng.random(shape) < 0.5)
    if dtype in INTS:
        a = np.asarray(rng.integers(lo, hi + 1, size=shape), dtype=dtype)
        if specials and a.size >= 4:
            info = np.iinfo(dtype)
            a.flat[:4] = [info.min, info.max, 0, -1]
        return a
    a = np.asarray(rng.standard_normal(shape) * 3, dtype=dtype)
    if specials:
        n = min(a.size, len(FLOAT_SPECIALS))
        a.flat[:n] = FLOAT_SPECIALS[:n]
    return a


def layouts(a: np.ndarray | None) -> Iterator[tuple[str, np.ndarray | None]]:
    """The same values as a, viewed through several memory layouts."""
    yield "contiguous", a
    if a is None or a.ndim == 0:
        return
    yield "stepped", np.repeat(a, 2, axis=-1)[..., ::2]
    buf = np.empty(a.size + 1, a.dtype)
    buf[1:] = a.ravel()
    yield "offset", buf[1:].reshape(a.shape)
    if a.ndim >= 2:
        yield "transposed", np.ascontiguousarray(a.swapaxes(-1, -2)).swapaxes(-1, -2)


def layout_sets(inputs: list) -> Iterator[tuple[str, list]]:
    kinds = [dict(layouts(x)) for x in inputs]
    for name in ("contiguous", "stepped", "offset", "transposed"):
        if any(name in k for k in kinds):
            yield name, [k.get(name, k["contiguous"]) for k in kinds]


def expected_dtypes(op: str, inputs: list, attrs: dict) -> list[np.dtype]:
    schema = opset.OPS[op]
    first = inputs[0] if not inputs or not isinstance(inputs[0], list) else inputs[0][0]
    first = None if first is None else first.dtype
    out = []
    for o in schema.outputs:
        if o.dtype == "same":
            out.append(first)
        elif o.dtype.startswith("attr:"):
            out.append(np.dtype(attrs.get(o.dtype[5:], schema.attr(o.dtype[5:]).default)))
        else:
            out.append(np.dtype(o.dtype))
    return out


def ref(op: str, inputs: list, attrs: dict | None = None, **kw) -> tuple[np.ndarray, ...]:
    """reference.run, plus the schema's output dtypes checked independently."""
    outs = reference.run(op, inputs, attrs or {}, **kw)
    assert len(outs) == len(opset.OPS[op].outputs)
    if inputs:
        for got, want in zip(outs, expected_dtypes(op, inputs, attrs or {}), strict=True):
            assert got.dtype == want, (op, got.dtype, want)
    return outs


def close(got: np.ndarray, want, tol: dict = TOL, what: str = "") -> None:
    want = want.numpy() if isinstance(want, torch.Tensor) else np.asarray(want)
    assert got.shape == want.shape, (what, got.shape, want.shape)
    if got.dtype.kind == "f":
        rtol, atol = tol[got.dtype.name]
        finite = np.abs(want[np.isfinite(want)]).astype(np.float64)
        scale = max(1.0, float(finite.max())) if finite.size else 1.0
        np.testing.assert_allclose(got, want.astype(got.dtype), rtol=rtol, atol=atol * scale,
                                   equal_nan=True, err_msg=what)
    else:
        np.testing.assert_array_equal(got, want.astype(got.dtype), err_msg=what)


def check(op: str, inputs: list, attrs: dict, torch_fn: Callable, tol: dict = TOL) -> None:
    """Reference over every layout of `inputs` against torch on contiguous copies."""
    want = torch_fn(*[tt(x) for x in inputs])
    want = want if isinstance(want, tuple) else (want,)
    for name, ins in layout_sets(inputs):
        got = ref(op, ins, attrs)
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            close(g, w, tol, f"{op} output {i} ({name} inputs, attrs {attrs})")


def cases(ops: dict | list) -> list:
    """(op, dtype) for every dtype the op set lists for each op."""
    return [pytest.param(op, dt, id=f"{op}-{dt}") for op in ops for dt in opset.OPS[op].dtypes]


# ------------------------------------------------------------------------------------------------
# coverage of the table
# ------------------------------------------------------------------------------------------------

def test_every_op_has_a_reference_with_the_schema_signature():
    assert set(reference.KERNELS) == set(opset.OPS)
    for name, schema in opset.OPS.items():
        params = inspect.signature(reference.KERNELS[name]).parameters.values()
        kw = {p.name for p in params if p.kind is p.KEYWORD_ONLY} - {"like"}
        assert kw == set(schema.attr_names), name


# ------------------------------------------------------------------------------------------------
# tier 0
# ------------------------------------------------------------------------------------------------

SHAPES = [(), (0,), (7,), (3, 5), (2, 3, 4), (1, 0, 3)]


@pytest.mark.parametrize("op,dtype", cases(["copy"]))
@pytest.mark.parametrize("shape", SHAPES)
def test_copy(op, dtype, shape):
    x = values(shape, dtype, specials=True)
    check(op, [x], {}, torch.clone)
    (y,) = ref(op, [x])
    assert not np.shares_memory(x, y) and y.flags.c_contiguous


@pytest.mark.parametrize("op,dtype", cases(["fill", "zero"]))
@pytest.mark.parametrize("value", [0.0, 2.7, -2.7, 1.0])
def test_fill_zero(op, dtype, value):
    like = np.empty((3, 4), dtype)
    attrs = {"value": value} if op == "fill" else {}
    (y,) = reference.run(op, [], attrs, out=[like])
    assert y is like
    close(y, torch.empty((3, 4), dtype=getattr(torch, dtype)).fill_(attrs.get("value", 0.0)))


@pytest.mark.parametrize("op,dtype", cases(["cast"]))
@pytest.mark.parametrize("to", ["float32", "float64", "int32", "int64", "bool"])
def test_cast(op, dtype, to):
    x = values((4, 5), dtype, specials=to not in INTS)  # float nan/inf -> int is undefined
    if dtype in ("float32", "float64"):
        x.flat[-4:] = [2.9, -2.9, 0.4, -0.6]  # truncation toward zero
    check(op, [x], {"dtype": to}, lambda a: a.to(getattr(torch, to)))


@pytest.mark.parametrize("op,dtype", cases(["arange"]))
@pytest.mark.parametrize("start,stop,step", [(0, 10, 1), (2, 11, 3), (10, 0, -2), (5, 5, 1),
                                             (0, -3, 1), (0.5, 3.2, 0.35), (-1.5, 2.0, 0.5)])
def test_arange(op, dtype, start, stop, step):
    if dtype in INTS and not all(float(v).is_integer() for v in (start, stop, step)):
        pytest.skip("torch truncates non-integral bounds first for integer dtypes")
    attrs = {"start": start, "stop": stop, "step": step, "dtype": dtype}
    (y,) = ref(op, [], attrs)
    assert y.dtype == np.dtype(dtype)
    if (stop - start) * step < 0:
        assert y.shape == (0,)  # the op set's formula, where torch raises
    else:
        close(y, torch.arange(start, stop, step, dtype=getattr(torch, dtype)))


# ------------------------------------------------------------------------------------------------
# tier 1: elementwise
# ------------------------------------------------------------------------------------------------

UNARY = {
    "neg": torch.neg, "abs": torch.abs, "exp": torch.exp, "log": torch.log, "sqrt": torch.sqrt,
    "rsqrt": torch.rsqrt, "reciprocal": torch.reciprocal, "sin": torch.sin, "cos": torch.cos,
    "tanh": torch.tanh, "sigmoid": torch.sigmoid, "relu": torch.relu, "erf": torch.erf,
    "floor": torch.floor, "ceil": torch.ceil, "round": torch.round, "sign": torch.sign,
    "square": torch.square, "logical_not": torch.logical_not,
}


@pytest.mark.parametrize("op,dtype", cases(UNARY))
@pytest.mark.parametrize("shape", SHAPES)
def test_unary(op, dtype, shape):
    check(op, [values(shape, dtype, specials=True)], {}, UNARY[op])


@pytest.mark.parametrize("op,dtype", cases(["gelu", "gelu_backward"]))
@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize("shape", [(), (0,), (9,), (3, 4)])
def test_gelu(op, dtype, approximate, shape):
    x = values(shape, dtype, specials=True)
    x[np.isinf(x)] = 7.0  # torch's vectorized float32 gelu gives nan at +inf (scalar path: inf)
    if op == "gelu":
        check(op, [x], {"approximate": approximate},
              lambda a: torch.nn.functional.gelu(a, approximate=approximate))
    else:
        g = values(shape, dtype, seed=1)
        check(op, [g, x], {"approximate": approximate},
              lambda a, b: torch.ops.aten.gelu_backward(a, b, approximate=approximate))


def _int_alpha(alpha: float, dtype: str) -> float | int:
    return int(alpha) if dtype in INTS else alpha


BINARY = {
    "add": lambda x, y, alpha=1.0: torch.add(x, y, alpha=alpha),
    "sub": lambda x, y, alpha=1.0: torch.sub(x, y, alpha=alpha),
    "mul": torch.mul, "div": torch.div, "pow": torch.pow,
    "maximum": torch.maximum, "minimum": torch.minimum,
    "eq": torch.eq, "ne": torch.ne, "lt": torch.lt, "le": torch.le, "gt": torch.gt, "ge": torch.ge,
    "logical_and": torch.logical_and, "logical_or": torch.logical_or,
}
BINARY_SHAPES = [((), ()), ((5,), ()), ((3, 1), (1, 4)), ((2, 3, 4), (3, 4)), ((0, 3), (1, 3)),
                 ((4, 5), (4, 5)), ((1,), (2, 1, 3))]


@pytest.mark.parametrize("op,dtype", cases(BINARY))
@pytest.mark.parametrize("shapes", BINARY_SHAPES, ids=str)
def test_binary(op, dtype, shapes):
    x = values(shapes[0], dtype, specials=True, lo=-4, hi=4)
    y = values(shapes[1], dtype, seed=1, lo=-4, hi=4)
    if op == "pow":  # integral exponents keep negative bases real, except where nan is wanted
        y = np.round(y)
    alphas = [1.0, 2.0, -3.0] + ([0.5] if dtype not in INTS else []) if op in ("add", "sub") \
        else [None]
    for alpha in alphas:
        attrs = {} if alpha is None else {"alpha": alpha}
        al = None if alpha is None else _int_alpha(alpha, dtype)
        fn = BINARY[op] if alpha is None else (lambda a, b, al=al: BINARY[op](a, b, alpha=al))
        check(op, [x, y], attrs, fn)


@pytest.mark.parametrize("op", ["add", "mul", "eq", "maximum"])
def test_binary_broadcast_views(op):
    x = values((4, 6), "float32", specials=True)
    row = values((6,), "float32", seed=1)
    col = values((4, 1), "float32", seed=2)
    for y in (np.broadcast_to(row, (4, 6)), np.broadcast_to(col, (4, 6)), row, col):
        check(op, [x, y], {}, BINARY[op])
        check(op, [y, x.T.copy().T], {}, BINARY[op])


TERNARY = {
    "where": lambda x, y, c: torch.where(c, x, y),
    "addcmul": None, "addcdiv": None, "lerp": None,
}


@pytest.mark.parametrize("op,dtype", cases(TERNARY))
@pytest.mark.parametrize("shapes", [((), (), ()), ((3, 4), (4,), (3, 1)), ((2, 0), (1,), (2, 1)),
                                    ((5,), (5,), (5,))], ids=str)
@pytest.mark.parametrize("value", [1.0, -0.5, 0.0])
def test_ternary(op, dtype, shapes, value):
    x = values(shapes[0], dtype, specials=True)
    if op == "where":
        c = values(shapes[2], "bool", seed=3)
        check(op, [x, values(shapes[1], dtype, seed=1), c], {}, TERNARY[op])
    elif op == "lerp":
        end = values(shapes[1], dtype, seed=1)
        check(op, [x, end], {"weight": value}, lambda a, b: torch.lerp(a, b, value))
    else:
        a, b = values(shapes[1], dtype, seed=1), values(shapes[2], dtype, seed=2)
        fn = getattr(torch, op)
        check(op, [x, a, b], {"value": value}, lambda p, q, r: fn(p, q, r, value=value))


ELEMENTWISE_BACKWARD = {
    "threshold_backward": None,
    "sigmoid_backward": lambda g, y: torch.ops.aten.sigmoid_backward(g, y),
    "tanh_backward": lambda g, y: torch.ops.aten.tanh_backward(g, y),
}


@pytest.mark.parametrize("op,dtype", cases(ELEMENTWISE_BACKWARD))
@pytest.mark.parametrize("shapes", [((), ()), ((3, 4), (3, 4)), ((3, 4), (4,)), ((0, 2), (0, 2))],
                         ids=str)
def test_elementwise_backward(op, dtype, shapes):
    g = values(shapes[0], dtype, seed=1)
    x = values(shapes[1], dtype, specials=True, lo=-3, hi=3)
    if op == "threshold_backward":
        for thr in (0.0, 1.0, -2.0) + ((0.5,) if dtype not in INTS else ()):
            check(op, [g, x], {"threshold": thr},
                  lambda a, b, t=thr: torch.ops.aten.threshold_backward(a, b.expand(a.shape), t))
    else:
        y = np.tanh(x) if op == "tanh_backward" else 1 / (1 + np.exp(-x))
        check(op, [g, y.astype(dtype)], {},
              lambda a, b: ELEMENTWISE_BACKWARD[op](a.expand(torch.broadcast_shapes(a.shape,
                                                                                    b.shape)),
                                                    b.expand(torch.broadcast_shapes(a.shape,
                                                                                    b.shape))))


# ------------------------------------------------------------------------------------------------
# tier 3: elementwise
# ------------------------------------------------------------------------------------------------

_A = torch.ops.aten
_F = torch.nn.functional
# op -> (torch function of the op's inputs and attributes, attribute sets to try)
TIER3 = {
    "log1p": (torch.log1p, [{}]), "expm1": (torch.expm1, [{}]), "silu": (_F.silu, [{}]),
    "softplus": (lambda x, beta=1.0, threshold=20.0: _F.softplus(x, beta, threshold),
                 [{}, {"beta": 2.0, "threshold": 1.5}, {"beta": -0.5}]),
    "elu": (lambda x, alpha=1.0, scale=1.0, input_scale=1.0: _A.elu(x, alpha, scale, input_scale),
            [{}, {"alpha": 1.5, "scale": 2.0, "input_scale": 0.5}]),
    "leaky_relu": (lambda x, negative_slope=0.01: _F.leaky_relu(x, negative_slope),
                   [{}, {"negative_slope": 0.3}]),
    "hardswish": (_F.hardswish, [{}]), "hardsigmoid": (_F.hardsigmoid, [{}]),
    "mish": (_F.mish, [{}]), "log_sigmoid": (_F.logsigmoid, [{}]),
    "clamp": (lambda x, min=None, max=None: torch.clamp(x, min, max),  # noqa: A002
              [{"min": -1.0}, {"max": 0.5}, {"min": -1.0, "max": 1.0}, {"min": 1.0, "max": -1.0},
               {"min": math.nan}, {"min": -1.0, "max": math.nan}]),
    "isnan": (torch.isnan, [{}]), "isinf": (torch.isinf, [{}]),
    "floor_divide": (torch.floor_divide, [{}]), "remainder": (torch.remainder, [{}]),
    "xlogy": (torch.xlogy, [{}]),
    "silu_backward": (_A.silu_backward, [{}]),
    "hardswish_backward": (_A.hardswish_backward, [{}]),
    "hardsigmoid_backward": (_A.hardsigmoid_backward, [{}]),
    "mish_backward": (_A.mish_backward, [{}]),
    "log_sigmoid_backward": (lambda g, x: _A.log_sigmoid_backward(
        g, x, _A.log_sigmoid_forward(x)[1]), [{}]),
    "leaky_relu_backward": (lambda g, x, negative_slope=0.01: _A.leaky_relu_backward(
        g, x, negative_slope, False), [{}, {"negative_slope": 0.3}]),
    "softplus_backward": (lambda g, x, beta=1.0, threshold=20.0: _A.softplus_backward(
        g, x, beta, threshold), [{}, {"beta": 2.0, "threshold": 1.5}]),
    "elu_backward": (lambda g, x, alpha=1.0, scale=1.0, input_scale=1.0, is_result=False:
                     _A.elu_backward(g, alpha, scale, input_scale, is_result, x),
                     [{}, {"alpha": 1.5, "scale": 2.0, "input_scale": 0.5},
                      {"is_result": True}, {"alpha": 0.5, "scale": 2.0, "is_result": True}]),
}


@pytest.mark.parametrize("op,dtype", cases(TIER3))
@pytest.mark.parametrize("shape", [(), (0,), (3, 5)])
def test_tier3_elementwise(op, dtype, shape):
    fn, attr_sets = TIER3[op]
    n = len(opset.get(op).inputs)
    x = values(shape, dtype, specials=dtype.startswith("float"), lo=-5, hi=5)
    ins = [x] if n == 1 else ([values(shape, dtype, seed=1, lo=-4, hi=4), x]
                              if op.endswith("_backward") else [x, values(shape, dtype, seed=1)])
    if op == "hardswish_backward":  # torch's vectorized float kernel sends nan x to 0, not grad
        x[np.isnan(x)] = 1.0
    # torch's hardsigmoid_backward multiplies by 1/6 rounded to float32, in float64 too
    tol = dict(TOL, float64=(1e-7, 1e-12)) if op == "hardsigmoid_backward" else TOL
    for attrs in attr_sets:
        check(op, ins, attrs, lambda *a, at=attrs: fn(*a, **at), tol)


# ------------------------------------------------------------------------------------------------
# tier 1: reductions and matrix products
# ------------------------------------------------------------------------------------------------

REDUCE_CASES = [((), ()), ((), (0,)), ((5,), ()), ((5,), (-1,)), ((3, 4), (0,)), ((3, 4), (1,)),
                ((3, 4), (0, 1)), ((2, 3, 4), (0, 2)), ((2, 3, 4), (-2,)), ((2, 0, 3), (0,)),
                ((0,), ()), ((2, 0, 3), (1,))]


def _torch_reduce(op: str, x, axes: tuple, keepdims: bool):
    dims = tuple(axes) if axes else None
    if op == "sum":
        return torch.sum(x, dim=dims, keepdim=keepdims, dtype=x.dtype)
    if op == "mean":
        return torch.mean(x, dim=dims, keepdim=keepdims)
    if op in ("max", "min"):
        return getattr(torch, "a" + op)(x, dim=dims or (), keepdim=keepdims)
    if op == "prod":
        if not axes:
            out = torch.prod(x, dtype=x.dtype)
            return out.reshape((1,) * x.dim()) if keepdims else out
        for a in sorted({d % max(x.dim(), 1) for d in axes}, reverse=True):
            x = torch.prod(x, dim=a, keepdim=keepdims, dtype=x.dtype)
        return x
    return getattr(torch, op)(x, dim=dims[0] if dims else None, keepdim=keepdims)


@pytest.mark.parametrize("op,dtype", cases(["sum", "mean", "max", "min", "prod", "argmax",
                                            "argmin"]))
@pytest.mark.parametrize("shape,axes", REDUCE_CASES, ids=str)
@pytest.mark.parametrize("keepdims", [False, True])
def test_reduce(op, dtype, shape, axes, keepdims):
    extreme = op in ("max", "min", "argmax", "argmin")
    ndim = len(shape)
    reduced = [shape[a % ndim] for a in axes] if axes and ndim else list(shape)
    attrs = {"axes": axes, "keepdims": keepdims}
    x = values(shape, dtype, specials=extreme, lo=-3, hi=3)
    if extreme and 0 in reduced or op.startswith("arg") and len(axes) > 1:
        with pytest.raises(ValueError, match=op):
            reference.run(op, [x], attrs)
        return
    check(op, [x], attrs, lambda a: _torch_reduce(op, a, axes, keepdims))


def test_sum_int32_stays_int32_and_wraps():
    x = np.array([2**31 - 1, 1], np.int32)
    (y,) = ref("sum", [x])
    assert y.dtype == np.int32 and y == -(2**31)


@pytest.mark.parametrize("op,dtype", cases(["matmul"]))
@pytest.mark.parametrize("a,b", [((2, 3), (3, 4)), ((5, 2, 3), (5, 3, 4)),
                                 ((2, 1, 3, 4), (3, 4, 2)), ((0, 3), (3, 2)), ((3, 0), (0, 2)),
                                 ((1, 1), (1, 1))], ids=str)
def test_matmul(op, dtype, a, b):
    check(op, [values(a, dtype), values(b, dtype, seed=1)], {}, torch.matmul, LOOSE)


@pytest.mark.parametrize("op,dtype", cases(["gemm"]))
@pytest.mark.parametrize("c", [(3, 4), (4,), (1, 4), (3, 1), (), None], ids=str)
@pytest.mark.parametrize("alpha,beta", [(1.0, 1.0), (0.5, -2.0), (2.0, 0.0)])
def test_gemm(op, dtype, c, alpha, beta):
    a, b = values((3, 5), dtype), values((5, 4), dtype, seed=1)
    attrs = {"alpha": alpha, "beta": beta}
    if c is None:
        check(op, [a, b], attrs, lambda p, q: alpha * (p @ q), LOOSE)
        return
    cv = values(c, dtype, seed=2, specials=beta == 0)  # nan in c must vanish when beta is 0
    check(op, [a, b, cv], attrs,
          lambda p, q, r: torch.addmm(r, p, q, beta=beta, alpha=alpha), LOOSE)


# ------------------------------------------------------------------------------------------------
# tier 2: convolution
# ------------------------------------------------------------------------------------------------

# (x shape, weight shape, stride, padding, dilation, groups, bias)
CONV_CASES = [
    ((2, 3, 7, 9), (4, 3, 3, 3), (1, 1), (0, 0), (1, 1), 1, True),
    ((1, 4, 8, 8), (6, 2, 3, 2), (2, 1), (1, 2), (1, 1), 2, False),
    ((2, 4, 9, 7), (4, 1, 3, 3), (2, 2), (1, 1), (2, 2), 4, True),
    ((1, 2, 5, 5), (3, 2, 1, 1), (1, 1), (0, 0), (1, 1), 1, True),
    ((1, 3, 6, 7), (3, 3, 5, 5), (3, 3), (2, 2), (1, 1), 1, True),
    ((0, 2, 5, 5), (2, 2, 3, 3), (1, 1), (1, 1), (1, 1), 1, True),
    ((1, 1, 1, 1), (1, 1, 1, 1), (1, 1), (0, 0), (1, 1), 1, False),
    ((2, 3, 4, 10), (2, 3, 2, 3), (1, 3), (1, 0), (3, 2), 1, False),
]


@pytest.mark.parametrize("op,dtype", cases(["conv2d", "conv2d_backward_input",
                                            "conv2d_backward_weight"]))
@pytest.mark.parametrize("case", CONV_CASES, ids=str)
def test_conv2d(op, dtype, case):
    xs, ws, stride, padding, dilation, groups, has_bias = case
    x, w = values(xs, dtype), values(ws, dtype, seed=1)
    bias = values((ws[0],), dtype, seed=2) if has_bias else None
    geo = {"stride": stride, "padding": padding, "dilation": dilation, "groups": groups}
    attrs = dict(geo, algorithm="whatever")  # the reference ignores the algorithm
    if op == "conv2d":
        inputs = [x, w] + ([bias] if has_bias else [])
        check(op, inputs, attrs,
              lambda a, b, c=None: torch.nn.functional.conv2d(a, b, c, **geo), LOOSE)
        return
    y = torch.nn.functional.conv2d(tt(x), tt(w), None, **geo)
    gy = values(tuple(y.shape), dtype, seed=3)

    def torch_backward(a, b):
        gx, gw, _ = torch.ops.aten.convolution_backward(
            tt(gy), tt(x), tt(w), None, stride, padding, dilation, False, (0, 0), groups,
            (True, True, False))
        return gx if op == "conv2d_backward_input" else gw

    if op == "conv2d_backward_input":
        check(op, [gy, w], dict(attrs, input_shape=xs), torch_backward, LOOSE)
    else:
        check(op, [gy, x], dict(attrs, weight_shape=ws), torch_backward, LOOSE)


def test_conv2d_resnet_layer_is_fast_and_right():
    x, w = values((8, 64, 56, 56), "float32"), values((64, 64, 3, 3), "float32", seed=1)
    geo = {"stride": (1, 1), "padding": (1, 1), "dilation": (1, 1), "groups": 1}
    t0 = time.perf_counter()
    (y,) = ref("conv2d", [x, w], geo)
    (gx,) = ref("conv2d_backward_input", [y, w], dict(geo, input_shape=x.shape))
    (gw,) = ref("conv2d_backward_weight", [y, x], dict(geo, weight_shape=w.shape))
    elapsed = time.perf_counter() - t0
    want = torch.nn.functional.conv2d(tt(x), tt(w), None, **geo)
    close(y, want, LOOSE)
    wgx, wgw, _ = torch.ops.aten.convolution_backward(
        want, tt(x), tt(w), None, (1, 1), (1, 1), (1, 1), False, (0, 0), 1, (True, True, False))
    close(gx, wgx, LOOSE)
    close(gw, wgw, {"float32": (1e-3, 1e-4)})
    assert elapsed < 20, f"reference conv (3 passes) took {elapsed:.1f} s"


# ------------------------------------------------------------------------------------------------
# tier 2: pooling
# ------------------------------------------------------------------------------------------------

# (x shape, kernel, stride, padding, dilation, ceil_mode)
MAXPOOL_CASES = [
    ((2, 3, 7, 8), (2, 2), (), (0, 0), (1, 1), False),
    ((2, 3, 7, 8), (3, 3), (2, 2), (1, 1), (1, 1), True),
    ((1, 2, 9, 6), (3, 2), (2, 1), (1, 1), (2, 1), False),
    ((1, 2, 10, 10), (4, 4), (3, 3), (2, 2), (1, 1), True),
    ((1, 1, 5, 5), (2, 2), (2, 2), (1, 1), (1, 1), True),
    ((0, 2, 6, 6), (2, 2), (), (0, 0), (1, 1), False),
    ((1, 1, 1, 1), (1, 1), (1, 1), (0, 0), (1, 1), False),
    ((2, 2, 8, 7), (3, 3), (1, 2), (1, 0), (2, 3), True),
]


def _pool_values(shape: tuple, dtype: str, kind: str) -> np.ndarray:
    if kind == "ties":  # few distinct values: the first maximum must win
        return values(shape, "int32", lo=-2, hi=2).astype(dtype)
    x = values(shape, dtype)
    if kind == "special" and x.size > 6:
        x.flat[[1, 4, 5]] = [np.nan, -np.inf, np.nan]
        x.flat[-3:] = -np.inf
    return x


@pytest.mark.parametrize("op,dtype", cases(["max_pool2d", "max_pool2d_backward"]))
@pytest.mark.parametrize("case", MAXPOOL_CASES, ids=str)
@pytest.mark.parametrize("kind", ["plain", "ties", "special"])
def test_max_pool2d(op, dtype, case, kind):
    xs, k, s, p, d, ceil = case
    attrs = {"kernel_size": k, "stride": s, "padding": p, "dilation": d, "ceil_mode": ceil}
    x = _pool_values(xs, dtype, kind)
    targs = (k, s or k, p, d, ceil)
    if op == "max_pool2d":
        check(op, [x], attrs, lambda a: torch.ops.aten.max_pool2d_with_indices(a, *targs))
        return
    y, idx = torch.ops.aten.max_pool2d_with_indices(tt(x), *targs)
    gy = values(tuple(y.shape), dtype, seed=4)
    check(op, [gy, x, idx.numpy()], attrs,
          lambda g, a, i: torch.ops.aten.max_pool2d_with_indices_backward(g, a, *targs, i))


# (x shape, kernel, stride, padding, ceil_mode)
AVGPOOL_CASES = [
    ((2, 3, 7, 8), (2, 2), (), (0, 0), False),
    ((2, 3, 7, 8), (3, 3), (2, 2), (1, 1), True),
    ((1, 2, 9, 6), (3, 2), (2, 1), (1, 1), False),
    ((1, 2, 10, 10), (4, 4), (3, 3), (2, 2), True),
    ((1, 1, 5, 5), (2, 2), (2, 2), (1, 1), True),
    ((0, 2, 6, 6), (2, 2), (), (0, 0), False),
    ((1, 2, 6, 5), (5, 3), (4, 3), (2, 1), True),
]


@pytest.mark.parametrize("op,dtype", cases(["avg_pool2d", "avg_pool2d_backward"]))
@pytest.mark.parametrize("case", AVGPOOL_CASES, ids=str)
@pytest.mark.parametrize("count_include_pad", [True, False])
def test_avg_pool2d(op, dtype, case, count_include_pad):
    xs, k, s, p, ceil = case
    attrs = {"kernel_size": k, "stride": s, "padding": p, "ceil_mode": ceil,
             "count_include_pad": count_include_pad}
    x = values(xs, dtype)
    targs = (k, s or k, p, ceil, count_include_pad, None)
    if op == "avg_pool2d":
        check(op, [x], attrs, lambda a: torch.ops.aten.avg_pool2d(a, *targs))
        return
    y = torch.ops.aten.avg_pool2d(tt(x), *targs)
    gy = values(tuple(y.shape), dtype, seed=4)
    check(op, [gy, x], attrs, lambda g, a: torch.ops.aten.avg_pool2d_backward(g, a, *targs))


@pytest.mark.parametrize("op,dtype", cases(["adaptive_avg_pool2d", "adaptive_avg_pool2d_backward"]))
@pytest.mark.parametrize("xs,out", [((2, 3, 7, 9), (1, 1)), ((2, 3, 7, 9), (3, 4)),
                                    ((1, 2, 5, 5), (5, 5)), ((1, 2, 4, 6), (7, 9)),
                                    ((0, 2, 4, 4), (2, 2)), ((1, 1, 13, 1), (5, 1))], ids=str)
def test_adaptive_avg_pool2d(op, dtype, xs, out):
    x = values(xs, dtype)
    if op == "adaptive_avg_pool2d":
        check(op, [x], {"output_size": out},
              lambda a: torch.ops.aten._adaptive_avg_pool2d(a, out))
        return
    gy = values(xs[:2] + out, dtype, seed=4)
    check(op, [gy, x], {"output_size": out},
          lambda g, a: torch.ops.aten._adaptive_avg_pool2d_backward(g, a))


@pytest.mark.parametrize("op,dtype", cases(["adaptive_avg_pool2d", "adaptive_avg_pool2d_backward"]))
def test_adaptive_avg_pool2d_keeps_infinities_in_their_cells(op, dtype):
    # regression: the oracle multiplied by averaging matrices, whose zeros made 0 * inf = nan in
    # every cell (a single -inf gave nan)
    x = np.array([np.inf, -np.inf, 1.0, np.nan, -np.inf, 2.0], dtype).reshape(1, 1, 2, 3)
    for xs, out in (((1, 1, 1, 1), (1, 1)), ((1, 1, 2, 3), (2, 3)), ((1, 1, 2, 3), (1, 2)),
                    ((1, 1, 2, 3), (2, 5))):
        xi = x if xs == x.shape else np.full(xs, -np.inf, dtype)
        if op == "adaptive_avg_pool2d":
            check(op, [xi], {"output_size": out},
                  lambda a, out=out: torch.ops.aten._adaptive_avg_pool2d(a, out))
        else:
            gy = np.full(xs[:2] + out, np.inf, dtype)
            gy.flat[0] = 1.0
            check(op, [gy, xi], {"output_size": out},
                  lambda g, a: torch.ops.aten._adaptive_avg_pool2d_backward(g, a))


# ------------------------------------------------------------------------------------------------
# tier 2: normalization
# ------------------------------------------------------------------------------------------------

# (1, 3) and (1, 2, 1): one value per channel (F.layer_norm's decomposition): variance 0, the
# running variance 0 / 0 = nan, as torch
BN_SHAPES = [(4, 3), (2, 3, 5), (2, 3, 4, 5), (3, 1, 2, 2), (1, 3), (1, 2, 1)]


@pytest.mark.parametrize("op,dtype", cases(["batch_norm"]))
@pytest.mark.parametrize("shape", BN_SHAPES, ids=str)
@pytest.mark.parametrize("training,stats,affine", [(True, True, True), (True, False, True),
                                                   (True, True, False), (False, True, True),
                                                   (False, True, False)])
def test_batch_norm(op, dtype, shape, training, stats, affine):
    c = shape[1]
    x = values(shape, dtype) + 1.5
    w = values((c,), dtype, seed=1) if affine else None
    b = values((c,), dtype, seed=2) if affine else None
    rm0 = values((c,), dtype, seed=3) if stats else None
    rv0 = (np.abs(values((c,), dtype, seed=4)) + 0.5).astype(dtype) if stats else None
    attrs = {"training": training, "momentum": 0.3, "eps": 1e-3}
    trm, trv = tt(rm0), tt(rv0)
    y_t, mean_t, invstd_t = torch.ops.aten.native_batch_norm(tt(x), tt(w), tt(b), trm, trv,
                                                             training, 0.3, 1e-3)
    for name, ins in layout_sets([x, w, b]):
        # running stats are updated in place, through whatever strides they have
        rm = None if rm0 is None else np.repeat(rm0, 2)[::2]
        rv = None if rv0 is None else np.repeat(rv0, 2)[::2]
        y, mean, invstd = ref(op, ins + [rm, rv], attrs)
        close(y, y_t, LOOSE, f"y {name}")
        if training:
            close(mean, mean_t, LOOSE, "save_mean")
            close(invstd, invstd_t, LOOSE, "save_invstd")
        else:
            close(mean, rm0, TOL, "save_mean (inference)")
            close(invstd, 1 / np.sqrt(rv0.astype(np.float64) + 1e-3), LOOSE, "save_invstd")
        if stats:
            close(rm, trm, LOOSE, "running_mean")
            close(rv, trv, LOOSE, "running_var")


@pytest.mark.parametrize("op,dtype", cases(["batch_norm_backward"]))
@pytest.mark.parametrize("shape", BN_SHAPES, ids=str)
@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("affine", [True, False])
def test_batch_norm_backward(op, dtype, shape, training, affine):
    c = shape[1]
    x, gy = values(shape, dtype) + 1.5, values(shape, dtype, seed=5)
    w = values((c,), dtype, seed=1) if affine else None
    rm = values((c,), dtype, seed=3)
    rv = (np.abs(values((c,), dtype, seed=4)) + 0.5).astype(dtype)
    eps = 1e-3
    if training:
        _, mean, invstd = ref("batch_norm", [x, w, None, None, None], {"eps": eps})
        trm = trv = None
    else:
        mean, invstd = rm, (1 / np.sqrt(rv.astype(np.float64) + eps)).astype(dtype)
        trm, trv = tt(rm), tt(rv)

    def torch_bn_backward(g, a, wt, m, s):
        return torch.ops.aten.native_batch_norm_backward(
            g, a, wt, trm, trv, m if training else None, s if training else None, training, eps,
            (True, True, True))

    check(op, [gy, x, w, mean, invstd], {"training": training}, torch_bn_backward, LOOSE)


# ------------------------------------------------------------------------------------------------
# tier 2: softmax and losses
# ------------------------------------------------------------------------------------------------

SOFTMAX_CASES = [((), -1), ((), 0), ((5,), 0), ((3, 4), -1), ((3, 4), 0), ((2, 3, 4), 1),
                 ((2, 0, 3), 1), ((2, 0, 3), 2)]


@pytest.mark.parametrize("op,dtype", cases(["softmax", "log_softmax", "softmax_backward",
                                            "log_softmax_backward"]))
@pytest.mark.parametrize("shape,axis", SOFTMAX_CASES, ids=str)
def test_softmax(op, dtype, shape, axis):
    x = values(shape, dtype)
    if x.size > 4:
        x.flat[0] = 60.0  # large logits: the max shift must keep it finite
    attrs = {"axis": axis}
    if op in ("softmax", "log_softmax"):
        check(op, [x], attrs, lambda a: getattr(torch, op)(a, axis))
        return
    fwd = "softmax" if op == "softmax_backward" else "log_softmax"
    y = getattr(torch, fwd)(tt(x), axis).numpy()
    gy = values(shape, dtype, seed=6)
    aten = getattr(torch.ops.aten, f"_{fwd}_backward_data")
    check(op, [gy, y], attrs, lambda g, b: aten(g, b, axis, b.dtype))


NLL_CASES = [((4, 5), "none"), ((4, 5), "mean"), ((4, 5), "sum"), ((5,), "mean"), ((5,), "none"),
             ((0, 3), "mean"), ((0, 3), "sum"), ((6, 1), "mean")]


@pytest.mark.parametrize("op,dtype", cases(["nll_loss", "nll_loss_backward"]))
@pytest.mark.parametrize("shape,reduction", NLL_CASES, ids=str)
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("ignore_index", [-100, 0])
@pytest.mark.parametrize("tdtype", INTS)
def test_nll_loss(op, dtype, shape, reduction, weighted, ignore_index, tdtype):
    c = shape[-1]
    logp = np.log(np.abs(values(shape, dtype)) + 0.1).astype(dtype)
    target = values(shape[:-1], tdtype, lo=0, hi=c - 1) if c > 0 else np.zeros(0, tdtype)
    if target.size > 2:
        target.flat[1] = ignore_index
    weight = (np.abs(values((c,), dtype, seed=2)) + 0.1).astype(dtype) if weighted else None
    attrs = {"reduction": reduction, "ignore_index": ignore_index}
    red = REDUCTION[reduction]
    if op == "nll_loss":
        def torch_nll(lp, t, w):
            loss, total = torch.ops.aten.nll_loss_forward(lp, t.long(), w, red, ignore_index)
            if reduction == "none" and lp.dim() == 2:  # torch leaves it 0 there; the op set doesn't
                used = (t != ignore_index).double() * (1.0 if w is None else w.double()[
                    t.long().clamp(0, c - 1)] if c else 0.0)
                total = used.sum().to(lp.dtype)
            return loss, total
        check(op, [logp, target, weight], attrs, torch_nll)
        return
    _, total = torch.ops.aten.nll_loss_forward(tt(logp), tt(target).long(), tt(weight), red,
                                               ignore_index)
    gl = values(target.shape if reduction == "none" else (), dtype, seed=7)
    check(op, [gl, logp, target, weight, total.numpy()], attrs,
          lambda g, lp, t, w, tw: torch.ops.aten.nll_loss_backward(g, lp, t.long(), w, red,
                                                                   ignore_index, tw))


@pytest.mark.parametrize("op,dtype", cases(["mse_loss", "mse_loss_backward"]))
@pytest.mark.parametrize("xs,ts", [((), ()), ((4, 5), (4, 5)), ((4, 5), (5,)), ((0, 3), (0, 3)),
                                   ((2, 3, 4), (3, 1))], ids=str)
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_mse_loss(op, dtype, xs, ts, reduction):
    x, t = values(xs, dtype), values(ts, dtype, seed=1)
    red = REDUCTION[reduction]
    attrs = {"reduction": reduction}
    if op == "mse_loss":
        check(op, [x, t], attrs, lambda a, b: torch.ops.aten.mse_loss(a, b.expand(a.shape), red))
        return
    gl = values(xs if reduction == "none" else (), dtype, seed=2)
    check(op, [gl, x, t], attrs,
          lambda g, a, b: torch.ops.aten.mse_loss_backward(g, a, b.expand(a.shape), red))


# ------------------------------------------------------------------------------------------------
# tier 2: shape ops
# ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("op,dtype", cases(["concat"]))
@pytest.mark.parametrize("shapes,axis", [([(3,), (0,), (4,)], 0), ([(2, 3), (2, 1)], -1),
                                         ([(2, 3), (4, 3), (1, 3)], 0), ([(1, 2, 3)], 1),
                                         ([(2, 0, 3), (2, 2, 3)], 1)], ids=str)
def test_concat(op, dtype, shapes, axis):
    ts = [values(s, dtype, seed=i) for i, s in enumerate(shapes)]
    check(op, ts, {"axis": axis}, lambda *a: torch.cat(a, axis))
    (nested,) = ref(op, [ts], {"axis": axis})  # the variadic input may also come as one list
    close(nested, torch.cat([tt(t) for t in ts], axis))


@pytest.mark.parametrize("op,dtype", cases(["pad_constant"]))
@pytest.mark.parametrize("shape,pads", [((), ()), ((3,), (1, 2)), ((2, 3), (0, 1, 2, 0)),
                                        ((2, 0, 3), (1, 1, 0, 2, 3, 0)), ((2, 3), (0, 0, 0, 0))],
                         ids=str)
@pytest.mark.parametrize("value", [0.0, 1.7, -3.0])
def test_pad_constant(op, dtype, shape, pads, value):
    x = values(shape, dtype)
    torch_pads = [p for i in reversed(range(len(shape))) for p in pads[2 * i:2 * i + 2]]
    check(op, [x], {"pads": pads, "value": value},
          lambda a: torch.nn.functional.pad(a, torch_pads, value=value) if torch_pads else a)


def test_every_op_is_compared_with_torch():
    tested = set(UNARY) | set(BINARY) | set(TERNARY) | set(ELEMENTWISE_BACKWARD) | {
        "copy", "fill", "zero", "cast", "arange", "gelu", "gelu_backward", "sum", "mean", "max",
        "min", "prod", "argmax", "argmin", "matmul", "gemm", "conv2d", "conv2d_backward_input",
        "conv2d_backward_weight", "max_pool2d", "max_pool2d_backward", "avg_pool2d",
        "avg_pool2d_backward", "adaptive_avg_pool2d", "adaptive_avg_pool2d_backward",
        "batch_norm", "batch_norm_backward", "softmax", "log_softmax", "softmax_backward",
        "log_softmax_backward", "nll_loss", "nll_loss_backward", "mse_loss", "mse_loss_backward",
        "concat", "pad_constant",
        "sgd_update", "adam_update",  # against torch's fused kernels in test_reference_optim.py
        "conv2d_bias_act", "gemm_bias_act", "elementwise_program"} | set(TIER3)  # tier 4 in
    # test_tier4.py
    assert tested == set(opset.OPS)


# ------------------------------------------------------------------------------------------------
# in-place updates and bad input
# ------------------------------------------------------------------------------------------------

def test_batch_norm_updates_running_stats_in_place_with_unbiased_var():
    x = values((4, 2, 3), "float64")
    rm, rv = np.zeros(2), np.ones(2)
    ids = (id(rm), id(rv))
    ref("batch_norm", [x, None, None, rm, rv], {"momentum": 0.5})
    assert (id(rm), id(rv)) == ids
    np.testing.assert_allclose(rm, 0.5 * x.mean(axis=(0, 2)))
    np.testing.assert_allclose(rv, 0.5 + 0.5 * x.var(axis=(0, 2), ddof=1))


F32 = np.ones((2, 3), np.float32)

BAD_CALLS = [
    # (op, inputs, attrs, kwargs, words the message must contain)
    ("add", [F32], {}, {}, ["add", "inputs", "'x'", "'y'"]),
    ("add", [F32, F32, F32], {}, {}, ["add", "inputs"]),
    ("add", [F32, None], {}, {}, ["add", "'y'", "required"]),
    ("add", [F32, F32], {"beta": 1.0}, {}, ["add", "beta"]),
    ("add", [F32, F32], {"alpha": "two"}, {}, ["add", "alpha", "float"]),
    ("add", [np.ones(2, np.int32)] * 2, {"alpha": 0.5}, {}, ["add", "alpha", "integral"]),
    ("add", [F32, np.ones(4, np.float32)], {}, {}, ["add", "broadcast", "(4,)"]),
    ("add", [F32, np.ones(3)], {}, {}, ["add", "'y'", "float64", "float32"]),
    ("exp", [np.ones(3, np.int32)], {}, {}, ["exp", "int32"]),
    ("where", [F32, F32, F32], {}, {}, ["where", "'cond'", "bool"]),
    ("sum", [F32], {"axes": (2,)}, {}, ["sum", "axes", "2"]),
    ("sum", [F32], {"axes": (0, -2)}, {}, ["sum", "axes", "twice"]),
    ("sum", [F32], {"keepdims": 1}, {}, ["sum", "keepdims", "bool"]),
    ("max", [np.ones((2, 0), np.float32)], {"axes": (1,)}, {}, ["max", "empty"]),
    ("min", [np.ones(0, np.float32)], {}, {}, ["min", "empty"]),
    ("argmax", [F32], {"axes": (0, 1)}, {}, ["argmax", "axes", "one"]),
    ("matmul", [F32, F32], {}, {}, ["matmul", "inner"]),
    ("gemm", [F32, F32.T, np.ones(5, np.float32)], {}, {}, ["gemm", "c", "(5,)"]),
    ("nll_loss", [np.zeros((2, 3), np.float32), np.array([0, 7])], {}, {},
     ["nll_loss", "target", "7", "[0, 3)"]),
    ("nll_loss", [np.zeros((2, 3), np.float32), np.array([0, -1])], {}, {},
     ["nll_loss", "target", "-1"]),
    ("nll_loss", [np.zeros((2, 3), np.float32), np.array([0.0, 1.0])], {}, {},
     ["nll_loss", "'target'", "float64"]),
    ("nll_loss", [np.zeros((2, 3), np.float32), np.array([0, 1])], {"reduction": "avg"}, {},
     ["nll_loss", "reduction", "'none', 'mean', 'sum'"]),
    ("conv2d", [np.ones((1, 4, 5, 5)), np.ones((2, 4, 3, 3))], {"groups": 3}, {},
     ["conv2d", "groups", "3"]),
    ("conv2d", [np.ones((1, 4, 2, 2)), np.ones((2, 4, 3, 3))], {}, {}, ["conv2d", "too small"]),
    ("conv2d", [np.ones((1, 4, 5, 5)), np.ones((2, 2, 3, 3))], {}, {}, ["conv2d", "weight"]),
    ("conv2d", [np.ones((4, 5, 5)), np.ones((2, 4, 3, 3))], {}, {}, ["conv2d", "x", "4-d"]),
    ("conv2d", [np.ones((1, 4, 5, 5)), np.ones((2, 4, 3, 3))], {"stride": (0, 1)}, {},
     ["conv2d", "stride", ">= 1"]),
    ("conv2d_backward_input", [np.ones((1, 2, 3, 3)), np.ones((2, 4, 3, 3))], {}, {},
     ["conv2d_backward_input", "input_shape"]),
    ("max_pool2d", [np.ones((1, 1, 5, 5))], {"kernel_size": (2, 2), "padding": (2, 2)}, {},
     ["max_pool2d", "padding", "half"]),
    ("max_pool2d_backward", [np.ones((1, 1, 2, 2)), np.ones((1, 1, 4, 4)),
                             np.full((1, 1, 2, 2), 16)], {}, {},
     ["max_pool2d_backward", "indices", "16"]),
    ("avg_pool2d_backward", [np.ones((1, 1, 3, 3)), np.ones((1, 1, 4, 4))], {}, {},
     ["avg_pool2d_backward", "grad_y", "(1, 1, 2, 2)"]),
    ("batch_norm", [np.ones((2, 3))], {"training": False}, {}, ["batch_norm", "running_mean"]),
    ("batch_norm", [np.ones((0, 3))], {}, {}, ["batch_norm", "at least one value"]),
    ("add", [np.ones(3, np.int32)] * 2, {"alpha": 2.0 ** 31}, {}, ["add", "alpha", "int32"]),
    ("sub", [np.ones(3, np.int64)] * 2, {"alpha": 2.0 ** 63}, {}, ["sub", "alpha", "int64"]),
    ("arange", [], {"start": 3e9, "stop": 3e9 + 2, "dtype": "int32"}, {},
     ["arange", "start", "int32"]),
    ("arange", [], {"start": 0.0, "stop": 3e10, "step": 1e10, "dtype": "int32"}, {},
     ["arange", "start + (n - 1) * step", "int32"]),
    ("batch_norm", [np.ones((2, 3)), np.ones(4)], {}, {}, ["batch_norm", "weight", "(3,)"]),
    ("batch_norm", [np.ones((2, 3)), None, None, np.zeros(3), None], {}, {},
     ["batch_norm", "running_var"]),
    ("softmax", [F32], {"axis": 2}, {}, ["softmax", "axis", "2"]),
    ("softmax_backward", [F32, F32.T], {}, {}, ["softmax_backward", "grad_y"]),
    ("mse_loss", [F32, np.ones(4, np.float32)], {}, {}, ["mse_loss", "target"]),
    ("mse_loss_backward", [F32, F32, F32], {}, {}, ["mse_loss_backward", "grad_loss"]),
    ("concat", [F32, np.ones((2, 4), np.float32)], {}, {}, ["concat", "tensors[1]"]),
    ("concat", [F32, np.ones((2, 3))], {}, {}, ["concat", "tensors[1]", "float64"]),
    ("concat", [np.ones(()), np.ones(())], {}, {}, ["concat", "0-d"]),
    ("concat", [], {}, {}, ["concat", "tensors", "at least one"]),
    ("pad_constant", [F32], {"pads": (1, 1)}, {}, ["pad_constant", "pads", "4"]),
    ("pad_constant", [F32], {"pads": (1, 1, -1, 0)}, {}, ["pad_constant", "pads"]),
    ("pad_constant", [np.ones(2, np.int32)], {"pads": (1, 1), "value": 1e20}, {},
     ["pad_constant", "value", "int32"]),
    ("fill", [], {}, {}, ["fill", "out"]),
    ("fill", [], {"value": math.nan}, {"out": [np.ones(2, np.int64)]}, ["fill", "value"]),
    ("arange", [], {"step": 0.0, "stop": 1.0}, {}, ["arange", "step"]),
    ("arange", [], {"dtype": "bool"}, {}, ["arange", "dtype"]),
    ("cast", [F32], {"dtype": "complex64"}, {}, ["cast", "dtype"]),
    ("copy", [np.ones(2, np.int8)], {}, {}, ["copy", "int8"]),
    ("gelu", [F32], {"approximate": "sigmoid"}, {}, ["gelu", "approximate", "tanh"]),
]


@pytest.mark.parametrize("op,inputs,attrs,kwargs,words", BAD_CALLS,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(BAD_CALLS)])
def test_bad_input_raises_naming_op_and_argument(op, inputs, attrs, kwargs, words):
    with pytest.raises(InvalidArgumentError) as info:
        reference.run(op, inputs, attrs, **kwargs)
    assert isinstance(info.value, ValueError)
    msg = str(info.value).lower()
    for w in words:
        assert w.lower() in msg, (w, msg)


def test_bad_input_types():
    with pytest.raises(KeyError, match="frobnicate"):
        reference.run("frobnicate", [], {})
    with pytest.raises(TypeError, match="add.*'y'.*list"):
        reference.run("add", [F32, [1.0, 2.0, 3.0]], {})
    with pytest.raises(TypeError, match="add.*inputs"):
        reference.run("add", F32, {})
    frozen = np.zeros(3)
    frozen.flags.writeable = False
    with pytest.raises(InvalidArgumentError, match="batch_norm.*running_mean.*writeable"):
        reference.run("batch_norm", [np.ones((2, 3)), None, None, frozen, np.ones(3)], {})
    with pytest.raises(InvalidArgumentError, match="add: out\\[0\\].*shape \\(2, 3\\)"):
        reference.run("add", [F32, F32], {}, out=[np.ones(3, np.float32)])


def test_optional_inputs_may_be_left_off():
    a, b = values((2, 3), "float64"), values((3, 4), "float64", seed=1)
    (full,) = ref("gemm", [a, b, None], {})
    (short,) = ref("gemm", [a, b], {})
    np.testing.assert_array_equal(full, short)
