"""Kernel conformance cases generated from the op set: shapes, views, attributes, input domains."""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from ..contract import opset

__all__ = ["Case", "ViewSpec", "cases_for", "TOLERANCE_CAPS", "tolerance"]


@dataclass(frozen=True)
class ViewSpec:
    """How an input reaches the kernel: a contiguous array, or a view made on the device."""

    # contiguous | transposed | broadcast, and views over part of the array: offset (its second
    # half) | strided (every other element of the last dim); and views that keep the array's
    # values: shifted (at an odd element offset) | gapped (last-dim stride 2) | stride0 (dim 0
    # broadcast from its first index) | stride0-inner (the same for the last dim)
    kind: str = "contiguous"
    shape: tuple[int, ...] = ()  # broadcast: the shape of the array that gets broadcast


@dataclass
class Case:
    id: str
    inputs: list[np.ndarray | None]
    attrs: dict
    views: list[ViewSpec] = field(default_factory=list)
    shape: tuple[int, ...] | None = None  # for ops without inputs
    dtype: str | None = None
    # "transposed" / "shifted" / "gapped": outputs written through such views (the elements
    # around a shifted or gapped view must stay untouched); "input0": output is input 0
    out_view: str = "contiguous"


# (rtol, atol) caps per dtype and op class; a plugin may tighten, never loosen
TOLERANCE_CAPS: dict[str, dict[str, tuple[float, float]]] = {
    "elementwise": {"float32": (2e-6, 1e-6), "float64": (1e-12, 1e-13)},
    "transcendental": {"float32": (1e-5, 1e-6), "float64": (1e-11, 1e-13)},
    "accumulate": {"float32": (1e-4, 1e-4), "float64": (1e-10, 1e-10)},
}
_TRANSCENDENTAL = {"exp", "log", "sqrt", "rsqrt", "sin", "cos", "tanh", "sigmoid", "gelu", "erf",
                   "pow", "gelu_backward", "sigmoid_backward", "tanh_backward", "reciprocal",
                   "div", "addcdiv", "lerp",
                   # tier 3: libm or exp-based compositions
                   "log1p", "expm1", "silu", "softplus", "elu", "mish", "log_sigmoid", "xlogy",
                   "hardswish", "hardswish_backward", "silu_backward", "mish_backward",
                   "log_sigmoid_backward", "softplus_backward", "elu_backward"}
# attribute sets beyond the first attribute's alternative (ops with several attributes)
_EXTRA_ATTRS: dict[str, list[dict]] = {
    "softplus": [{"beta": 2.0, "threshold": 1.0}],
    "softplus_backward": [{"beta": 2.0, "threshold": 1.0}],
    "elu": [{"alpha": 1.5, "scale": 1.0507, "input_scale": 2.0}],
    "elu_backward": [{"alpha": 1.5, "scale": 1.0507, "input_scale": 2.0}, {"is_result": True},
                     {"alpha": 0.5, "scale": 2.0, "input_scale": 0.5, "is_result": True}],
    "clamp": [{"min": -1.0, "max": 1.0}, {"min": 1.0, "max": -1.0}, {"max": 0.5}],
}


def op_class(op: opset.OpSchema, attrs: dict | None = None) -> str:
    if op.name == "elementwise_program":  # a chain of transcendental ops, or a reduction
        reduce = (attrs or {}).get("reduce", "none")
        return "transcendental" if reduce == "none" else "accumulate"
    if op.name in _TRANSCENDENTAL:
        return "transcendental"
    if op.broadcast or op.tier == 0 or op.name in ("concat", "pad_constant"):
        return "elementwise"
    return "accumulate"


def tolerance(op: opset.OpSchema, dtype: str, plugin_tol: dict | None = None,
              attrs: dict | None = None) -> tuple[float, float]:
    """(rtol, atol) for op at dtype (with these attributes): the cap, or the plugin's tighter
    setting."""
    if dtype not in ("float32", "float64"):
        return (0.0, 0.0)
    cap = TOLERANCE_CAPS[op_class(op, attrs)][dtype]
    if plugin_tol and dtype in plugin_tol:
        rt, at = plugin_tol[dtype]
        return (min(rt, cap[0]), min(at, cap[1]))
    return cap


# ---- input values -------------------------------------------------------------------------------

_POSITIVE = {"log", "sqrt", "rsqrt"}
_NONZERO = {"reciprocal"}


def _values(rng: np.random.Generator, shape, dtype: str, op: str, slot: int) -> np.ndarray:
    if dtype == "bool":
        return rng.random(shape) < 0.5
    if dtype in ("int32", "int64"):
        lo, hi = (-3, 4) if op in ("mul", "prod", "pow", "square") else (-50, 51)
        if op == "prod":
            lo, hi = -2, 3
        return rng.integers(lo, hi, size=shape).astype(dtype)
    if op == "log1p":  # its accurate range, near -1 included
        return np.asarray(rng.uniform(-0.99, 3.0, size=shape), dtype)
    if op == "xlogy":  # y > 0; x with zeros
        v = rng.uniform(0.1, 3.0, size=shape) if slot else rng.integers(-2, 3, size=shape) * 0.75
        return np.asarray(v, dtype)
    if op in _POSITIVE or (op == "pow" and slot == 0) or \
            (op in ("div", "addcdiv", "floor_divide", "remainder") and slot >= 1):
        v = rng.uniform(0.5, 2.0, size=shape) * (1 if op in _POSITIVE or op == "pow"
                                                 else rng.choice([-1, 1], size=shape))
        return np.asarray(v, dtype)
    if op in _NONZERO:
        return np.asarray(rng.uniform(0.5, 2.0, size=shape) * rng.choice([-1, 1], size=shape),
                          dtype)
    if op == "pow" and slot == 1:
        return np.asarray(rng.uniform(-2, 2, size=shape), dtype)
    if op in ("floor", "ceil", "round"):
        return np.asarray(rng.integers(-20, 20, size=shape) / 4.0, dtype)  # exact halves included
    if op in ("sigmoid_backward",) and slot == 1:
        return np.asarray(rng.uniform(0.01, 0.99, size=shape), dtype)
    if op in ("tanh_backward",) and slot == 1:
        return np.asarray(rng.uniform(-0.99, 0.99, size=shape), dtype)
    if op in ("eq", "ne", "lt", "le", "gt", "ge", "maximum", "minimum") and dtype.startswith("f"):
        return np.asarray(rng.integers(-3, 4, size=shape), dtype)  # ties happen
    return np.asarray(rng.standard_normal(shape) * 2.0, dtype)


# ---- generators per shape rule ----------------------------------------------------------------

_SHAPES = [(), (0,), (1,), (7,), (3, 5), (2, 3, 4), (4, 1, 3, 5)]
_LARGE = (257, 263)
# element counts just past a tile (1024) and the bundled plugins' thread grains (2^14..2^16;
# threads split work from 2 * grain): tails, tiles and chunks that are off by one fail here
BOUNDARY = (1025, 4097, 65537, 2 * 65536 + 3)


def _elementwise(op: opset.OpSchema, dtype: str, rng) -> Iterator[Case]:
    n = len(op.inputs)
    attrs_list = [{}]
    if op.attrs:
        a = op.attrs[0]
        if a.type == "float":
            alt = -0.5 if dtype.startswith("float") else -2.0  # integral for integer dtypes
            attrs_list = [{}, {a.name: alt if op.name != "threshold_backward" else 0.25}]
            attrs_list += _EXTRA_ATTRS.get(op.name, [])
        elif a.choices:
            attrs_list = [{a.name: c} for c in a.choices]

    def vals(shape, slot, input_dtype=None):
        spec = op.inputs[slot]
        dt = input_dtype or (dtype if spec.dtypes == "same" else spec.dtypes[0])
        return _values(rng, shape, dt, op.name, slot)

    if op.name == "pow":  # negative bases are defined for integral exponents
        base = np.asarray(rng.uniform(-3, 3, size=(4, 6)), dtype)
        expo = np.asarray(rng.integers(-3, 4, size=(4, 6)), dtype)
        yield Case("negative-base-integral-exponent", [base, expo], {}, [ViewSpec()] * 2)
    for shape in _SHAPES + [_LARGE]:
        for attrs in attrs_list:
            yield Case(f"{shape}{_attr_id(attrs)}", [vals(shape, i) for i in range(n)], attrs,
                       [ViewSpec()] * n)
    for size in BOUNDARY:
        yield Case(f"({size},)", [vals((size,), i) for i in range(n)], {}, [ViewSpec()] * n)
    # strided operands go through packed tiles: rows that end just past a tile
    yield Case("boundary-transposed", [vals((3, 1025), i) for i in range(n)], {},
               [ViewSpec("transposed")] * n)
    yield Case("boundary-gapped", [vals((2, 4097), i) for i in range(n)], {},
               [ViewSpec("gapped")] * n)
    yield Case("boundary-out-gapped", [vals((3, 1025), i) for i in range(n)], {},
               [ViewSpec()] * n, out_view="gapped")
    shape = (6, 5)
    ins = [vals(shape, i) for i in range(n)]
    yield Case("transposed", [x for x in ins], {}, [ViewSpec("transposed")] * n)
    yield Case("offset", [vals((12, 5), i) for i in range(n)], {}, [ViewSpec("offset")] * n)
    yield Case("strided", [vals((6, 10), i) for i in range(n)], {}, [ViewSpec("strided")] * n)
    yield Case("out-transposed", [vals((5, 6), i) for i in range(n)], {}, [ViewSpec()] * n,
               out_view="transposed")
    yield Case("transposed-3d", [vals((2, 3, 4), i) for i in range(n)], {},
               [ViewSpec("transposed")] * n)
    if op.outputs[0].dtype == "same" and op.tier > 0:
        # the in-place form (x.add_(y)): the output is exactly input 0, here a strided view
        yield Case("in-place", [vals((6, 10), i) for i in range(n)], {},
                   [ViewSpec("strided")] * n, out_view="input0")
    if n >= 2:
        yield Case("broadcast-row", [vals((4, 5), 0)] + [vals((1, 5), i) for i in range(1, n)],
                   {}, [ViewSpec()] * n)
        yield Case("broadcast-scalar", [vals((3, 4), 0)] + [vals((), i) for i in range(1, n)],
                   {}, [ViewSpec()] * n)
        yield Case("broadcast-both", [vals((4, 1), 0)] + [vals((1, 3), i) for i in range(1, n)],
                   {}, [ViewSpec()] * n)
        yield Case("broadcast-view", [vals((4, 5), 0)] + [vals((5,), i) for i in range(1, n)],
                   {}, [ViewSpec()] + [ViewSpec("broadcast", (4, 5))] * (n - 1))
        yield Case("boundary-broadcast", [vals((3, 4097), 0)] +
                   [vals((4097,), i) for i in range(1, n)], {},
                   [ViewSpec()] + [ViewSpec("broadcast", (3, 4097))] * (n - 1))


def _attr_id(attrs: dict) -> str:
    return "".join(f"-{k}={v}" for k, v in attrs.items())


def _tier0(op: opset.OpSchema, dtype: str, rng) -> Iterator[Case]:
    if op.name in ("fill", "zero"):
        for shape in [(), (0,), (7,), (3, 5), _LARGE] + [(n,) for n in BOUNDARY]:
            attrs = {"value": 2.5 if dtype.startswith("f") else 3.0} if op.name == "fill" else {}
            yield Case(f"{shape}", [], attrs, [], shape, dtype)
        if op.name == "fill":  # the attribute's range: negative, zero, large, (for bool) nonzero
            big = 1e30 if dtype.startswith("f") else float(2**31 - 1)
            for value in (-7.25 if dtype.startswith("f") else -7.0, 0.0, big):
                attrs = {"value": value}
                yield Case(f"(4, 3){_attr_id(attrs)}", [], attrs, [], (4, 3), dtype)
        return
    if op.name == "arange":
        for start, stop, step in [(0, 10, 1), (2, 3, 0.25), (5, -5, -1.5), (0, 0, 1), (0, 1000, 3),
                                  (0, 4097, 1), (7, 7 + 2 * 65536 + 3, 1), (0, -65537, -1)]:
            if dtype.startswith("int") and not all(float(v).is_integer()
                                                   for v in (start, stop, step)):
                continue
            attrs = {"start": float(start), "stop": float(stop), "step": float(step),
                     "dtype": dtype}
            yield Case(_attr_id(attrs), [], attrs, [], None, dtype)
        return
    if op.name == "cast":
        for to in ("float32", "float64", "int32", "int64", "bool"):
            x = _values(rng, (5, 7), dtype, "cast", 0)
            if dtype.startswith("f") and to.startswith("int"):
                x = np.trunc(x * 10) / 4
            yield Case(f"to-{to}", [x], {"dtype": to}, [ViewSpec()])
            yield Case(f"to-{to}-transposed", [x], {"dtype": to}, [ViewSpec("transposed")])
        yield Case("empty", [_values(rng, (0, 3), dtype, "cast", 0)], {"dtype": "float32"},
                   [ViewSpec()])
        for to in ("float32", "int64"):
            for shape, view in [((65537,), "contiguous"), ((2 * 65536 + 3,), "contiguous"),
                                ((3, 1025), "transposed")]:
                x = _values(rng, shape, dtype, "cast", 0)
                if dtype.startswith("f") and to.startswith("int"):
                    x = np.trunc(x * 10) / 4
                yield Case(f"to-{to}-{shape}-{view}", [x], {"dtype": to}, [ViewSpec(view)])
        return
    yield from _elementwise(op, dtype, rng)  # copy


def _reduce(op: opset.OpSchema, dtype: str, rng) -> Iterator[Case]:
    configs = [((), ()), ((7,), ()), ((7,), (0,)), ((3, 5), (1,)), ((3, 5), (0,)),
               ((2, 3, 4), (0, 2)), ((2, 3, 4), (-1,)), ((2, 3, 4), ()), ((4, 0, 3), (2,)),
               ((1000, 3), (0,)), ((3, 1001), (1,)), ((64, 65, 3), (1,)),
               ((3, 1025), (1,)), ((1025, 3), (0,)), ((2, 4097), (1,)), ((65537,), ()),
               ((2 * 65536 + 3,), ()), ((2, 65537), (1,)), ((65537, 2), (0,))]
    for shape, axes in configs:
        if op.name in ("argmax", "argmin") and len(axes) > 1:
            continue
        if op.name in ("max", "min", "argmax", "argmin") and 0 in shape:
            continue
        for keepdims in (False, True):
            attrs = {"axes": axes, "keepdims": keepdims}
            x = _values(rng, shape, dtype, op.name, 0)
            if op.name == "prod" and dtype.startswith("f"):
                x = np.asarray(rng.uniform(0.9, 1.1, size=shape), dtype)
            yield Case(f"{shape}{_attr_id(attrs)}", [x], attrs, [ViewSpec()])
    x = _values(rng, (6, 5), dtype, op.name, 0)
    yield Case("transposed", [x], {"axes": (1,)}, [ViewSpec("transposed")])
    yield Case("offset", [_values(rng, (12, 5), dtype, op.name, 0)], {"axes": (0,)},
               [ViewSpec("offset")])


def _matmul(op: opset.OpSchema, dtype: str, rng) -> Iterator[Case]:
    def m(*s):
        return _values(rng, s, dtype, "matmul", 0)

    if op.name == "matmul":
        for a, b in [((3, 4), (4, 5)), ((1, 1), (1, 1)), ((2, 3, 4), (2, 4, 5)),
                     ((1, 3, 4), (2, 4, 5)), ((0, 4), (4, 3)), ((3, 0), (0, 5)),
                     ((129, 257), (257, 65)), ((2, 2, 17, 9), (2, 2, 9, 33)),
                     ((2, 1025), (1025, 3)), ((1025, 4), (4, 5)), ((3, 4097), (4097, 2))]:
            yield Case(f"{a}@{b}", [m(*a), m(*b)], {}, [ViewSpec(), ViewSpec()])
        for va, vb in [("transposed", "contiguous"), ("contiguous", "transposed"),
                       ("transposed", "transposed"), ("offset", "strided")]:
            shape_a = (10, 6) if va == "offset" else (6, 7)
            shape_b = (7, 10) if vb == "strided" else (7, 5)
            if va == "offset":
                shape_a = (12, 7)
            yield Case(f"{va}-{vb}", [m(*shape_a), m(*shape_b)], {}, [ViewSpec(va), ViewSpec(vb)])
        return
    gemm_cases = [((3, 4, 5), None, 1.0, 1.0), ((3, 4, 5), (5,), 1.0, 1.0),
                  ((3, 4, 5), (3, 5), 0.5, 2.0), ((64, 33, 17), (17,), 1.0, 0.0),
                  ((0, 4, 5), (5,), 1.0, 1.0), ((5, 0, 3), (3,), 1.0, 1.0),
                  ((1025, 2, 3), (3,), 1.0, 1.0), ((2, 4097, 3), (2, 3), 1.0, 0.5)]
    for (mm, k, n), c_shape, alpha, beta in gemm_cases:
        ins = [m(mm, k), m(k, n), m(*c_shape) if c_shape else None]
        attrs = {"alpha": alpha, "beta": beta}
        yield Case(f"{(mm, k, n)}-c{c_shape}{_attr_id(attrs)}", ins, attrs, [ViewSpec()] * 3)
    yield Case("transposed", [m(6, 7), m(7, 5), m(5)], {}, [ViewSpec("transposed"),
                                                             ViewSpec("transposed"), ViewSpec()])


_CONV = [
    # (x shape, weight shape, stride, padding, dilation, groups, bias)
    ((1, 1, 5, 5), (1, 1, 3, 3), 1, 0, 1, 1, False),
    ((2, 3, 7, 6), (4, 3, 3, 3), 1, 1, 1, 1, True),
    ((2, 4, 9, 9), (6, 4, 3, 3), 2, 1, 1, 1, True),
    ((1, 2, 10, 8), (3, 2, 3, 2), 1, 2, 2, 1, False),
    ((2, 4, 6, 6), (4, 2, 3, 3), 1, 1, 1, 2, True),
    ((1, 6, 5, 5), (6, 1, 3, 3), 1, 1, 1, 6, False),
    ((2, 8, 5, 5), (16, 8, 1, 1), 1, 0, 1, 1, True),
    ((2, 3, 16, 16), (8, 3, 7, 7), 2, 3, 1, 1, False),
    ((2, 16, 14, 14), (16, 16, 3, 3), 1, 1, 1, 1, True),
    ((2, 4, 8, 8), (4, 4, 3, 3), 1, 0, 1, 1, True),  # unpadded 3x3: gets the special values
    ((1, 2, 33, 33), (3, 2, 3, 3), 1, 1, 1, 1, True),  # planes past 1024 and 4096 elements
    ((1, 1, 65, 65), (2, 1, 3, 3), 1, 0, 1, 1, False),
]


def _conv(op: opset.OpSchema, dtype: str, rng) -> Iterator[Case]:
    from ..core import shapes as shp

    for xs, ws, s, p, d, g, bias in _CONV:
        attrs = {"stride": (s, s), "padding": (p, p), "dilation": (d, d), "groups": g}
        x = _values(rng, xs, dtype, "conv", 0)
        w = _values(rng, ws, dtype, "conv", 1)
        cid = f"x{xs}-w{ws}-s{s}-p{p}-d{d}-g{g}" + ("-bias" if bias else "")
        if op.name == "conv2d":
            b = _values(rng, (ws[0],), dtype, "conv", 2) if bias else None
            yield Case(cid, [x, w, b], attrs, [ViewSpec()] * 3)
            continue
        geo = dict(attrs)
        ys = shp._conv_geometry("conv2d", xs, ws, geo)
        gy = _values(rng, ys, dtype, "conv", 3)
        if op.name == "conv2d_backward_input":
            yield Case(cid, [gy, w], dict(attrs, input_shape=xs), [ViewSpec()] * 2)
        else:
            yield Case(cid, [gy, x], dict(attrs, weight_shape=ws), [ViewSpec()] * 2)
    if op.name == "conv2d":
        x = _values(rng, (2, 3, 8, 8), dtype, "conv", 0)
        w = _values(rng, (4, 3, 3, 3), dtype, "conv", 1)
        yield Case("x-offset", [np.concatenate([x, x]), w, None], {"padding": (1, 1)},
                   [ViewSpec("offset"), ViewSpec(), ViewSpec()])


_POOL = [((1, 1, 4, 4), (2, 2), (), (0, 0), (1, 1), False, True),
         ((2, 3, 7, 9), (3, 3), (2, 2), (1, 1), (1, 1), False, True),
         ((2, 3, 7, 9), (3, 3), (2, 2), (1, 1), (1, 1), True, False),
         ((1, 2, 10, 10), (3, 2), (1, 2), (1, 0), (2, 1), True, True),
         ((2, 4, 8, 8), (2, 2), (2, 2), (0, 0), (1, 1), False, False),
         ((2, 16, 28, 28), (3, 3), (2, 2), (1, 1), (1, 1), False, True),
         ((1, 2, 33, 33), (3, 3), (2, 2), (1, 1), (1, 1), False, True),
         ((1, 1, 257, 257), (2, 2), (), (0, 0), (1, 1), False, True)]


def _pool(op: opset.OpSchema, dtype: str, rng) -> Iterator[Case]:
    from ..core import reference

    is_max = op.name.startswith("max")
    for xs, k, s, p, d, ceil, cip in _POOL:
        if not is_max and d != (1, 1):
            continue
        attrs = {"kernel_size": k, "stride": s, "padding": p, "ceil_mode": ceil}
        attrs.update({"dilation": d} if is_max else {"count_include_pad": cip})
        x = _values(rng, xs, dtype, "pool", 0)
        cid = f"x{xs}{_attr_id(attrs)}"
        if not op.name.endswith("backward"):
            yield Case(cid, [x], attrs, [ViewSpec()])
            continue
        fwd = reference.run(op.name.replace("_backward", ""), [x], dict(attrs))
        gy = _values(rng, fwd[0].shape, dtype, "pool", 1)
        ins = [gy, x, fwd[1]] if is_max else [gy, x]
        yield Case(cid, ins, attrs, [ViewSpec()] * len(ins))


def _adaptive(op: opset.OpSchema, dtype: str, rng) -> Iterator[Case]:
    for xs, osz in [((2, 3, 7, 7), (1, 1)), ((1, 2, 10, 7), (3, 4)), ((2, 2, 4, 4), (4, 4)),
                    ((1, 1, 5, 3), (2, 5)), ((1, 2, 33, 33), (3, 3)), ((1, 1, 257, 257), (2, 2))]:
        x = _values(rng, xs, dtype, "pool", 0)
        attrs = {"output_size": osz}
        if op.name.endswith("backward"):
            gy = _values(rng, xs[:2] + osz, dtype, "pool", 1)
            yield Case(f"x{xs}-o{osz}", [gy, x], attrs, [ViewSpec()] * 2)
        else:
            yield Case(f"x{xs}-o{osz}", [x], attrs, [ViewSpec()])


def _batch_norm(op: opset.OpSchema, dtype: str, rng) -> Iterator[Case]:
    for xs in [(4, 3), (2, 3, 5, 5), (8, 16, 7, 7), (2, 3, 33, 33), (4, 2, 130, 130)]:
        c = xs[1]
        for training in (True, False):
            for affine in (True, False):
                x = _values(rng, xs, dtype, "bn", 0)
                w = np.asarray(rng.uniform(0.5, 1.5, c), dtype) if affine else None
                cid = f"x{xs}-training={training}-affine={affine}"
                if op.name == "batch_norm":
                    b = np.asarray(rng.standard_normal(c), dtype) if affine else None
                    rm = np.asarray(rng.standard_normal(c), dtype)
                    rv = np.asarray(rng.uniform(0.5, 2.0, c), dtype)
                    yield Case(cid, [x, w, b, rm, rv],
                               {"training": training, "momentum": 0.1, "eps": 1e-5},
                               [ViewSpec()] * 5)
                    if xs == (2, 3, 5, 5):  # other momentum and eps values
                        attrs = {"training": training, "momentum": 0.7, "eps": 0.5}
                        yield Case(f"{cid}{_attr_id(attrs)}", [x, w, b, rm.copy(), rv.copy()],
                                   attrs, [ViewSpec()] * 5)
                else:
                    gy = _values(rng, xs, dtype, "bn", 1)
                    axes = (0,) + tuple(range(2, len(xs)))
                    mean = np.asarray(x.mean(axis=axes), dtype)
                    invstd = np.asarray(1 / np.sqrt(x.var(axis=axes) + 1e-5), dtype)
                    yield Case(cid, [gy, x, w, mean, invstd], {"training": training},
                               [ViewSpec()] * 5)


def _softmax(op: opset.OpSchema, dtype: str, rng) -> Iterator[Case]:
    for xs, axis in [((7,), 0), ((3, 5), -1), ((3, 5), 0), ((2, 3, 4), 1), ((64, 1000), 1),
                     ((0, 5), 1), ((3, 1025), 1), ((2, 4097), 1), ((1, 65537), 1), ((1025, 3), 0)]:
        x = _values(rng, xs, dtype, op.name, 0)
        if op.name.endswith("backward"):
            fwd = op.name.replace("_backward", "")
            y = np.exp(x - x.max(axis=axis, keepdims=True)) if x.size else x
            y = y / y.sum(axis=axis, keepdims=True) if x.size else y
            if fwd == "log_softmax":
                y = np.log(y)
            ins = [_values(rng, xs, dtype, op.name, 1), np.asarray(y, dtype)]
            yield Case(f"x{xs}-axis={axis}", ins, {"axis": axis}, [ViewSpec()] * 2)
        else:
            yield Case(f"x{xs}-axis={axis}", [x], {"axis": axis}, [ViewSpec()])
    if not op.name.endswith("backward"):
        yield Case("transposed", [_values(rng, (6, 5), dtype, op.name, 0)], {"axis": 1},
                   [ViewSpec("transposed")])


def _nll(op: opset.OpSchema, dtype: str, rng) -> Iterator[Case]:
    for n, c in [(5, 4), (0, 3), (None, 6), (64, 10), (1025, 5), (4097, 3)]:
        shape = (n, c) if n is not None else (c,)
        for reduction in ("mean", "sum", "none"):
            for weighted, ignore in [(False, -100), (True, 1)]:
                logp = np.asarray(np.log(rng.dirichlet(np.ones(c), size=n if n is not None else 1)),
                                  dtype).reshape(shape)
                target = rng.integers(0, c, size=shape[:-1]).astype("int64")
                w = np.asarray(rng.uniform(0.5, 2, c), dtype) if weighted else None
                attrs = {"reduction": reduction, "ignore_index": ignore}
                cid = f"{shape}{_attr_id(attrs)}-w={weighted}"
                if op.name == "nll_loss":
                    yield Case(cid, [logp, target, w], attrs, [ViewSpec()] * 3)
                else:
                    from ..core import reference

                    _, tw = reference.run("nll_loss", [logp, target, w], dict(attrs))
                    gl = _values(rng, target.shape if reduction == "none" else (), dtype, "", 0)
                    yield Case(cid, [gl, logp, target, w, tw], attrs, [ViewSpec()] * 5)


def _mse(op: opset.OpSchema, dtype: str, rng) -> Iterator[Case]:
    for xs, ts in [((7,), (7,)), ((3, 5), (3, 5)), ((3, 5), (5,)), ((0, 2), (0, 2)),
                   ((65537,), (65537,)), ((2 * 65536 + 3,), (2 * 65536 + 3,))]:
        for reduction in ("mean", "sum", "none"):
            x, t = _values(rng, xs, dtype, "", 0), _values(rng, ts, dtype, "", 1)
            attrs = {"reduction": reduction}
            if op.name == "mse_loss":
                yield Case(f"{xs}-{ts}-{reduction}", [x, t], attrs, [ViewSpec()] * 2)
            else:
                g = _values(rng, xs if reduction == "none" else (), dtype, "", 2)
                yield Case(f"{xs}-{ts}-{reduction}", [g, x, t], attrs, [ViewSpec()] * 3)


def _concat(op: opset.OpSchema, dtype: str, rng) -> Iterator[Case]:
    for shapes, axis in [([(3,), (4,)], 0), ([(2, 3), (2, 5), (2, 1)], 1), ([(2, 3), (4, 3)], 0),
                         ([(2, 0, 3), (2, 2, 3)], -2), ([(1, 2, 3)], 2),
                         ([(1025,), (4097,)], 0), ([(2, 65537), (1, 65537)], 0),
                         ([(3, 1025), (3, 4097)], 1)]:
        ins = [_values(rng, s, dtype, "", 0) for s in shapes]
        yield Case(f"{shapes}-axis={axis}", ins, {"axis": axis}, [ViewSpec()] * len(ins))
    ins = [_values(rng, (5, 4), dtype, "", 0), _values(rng, (3, 4), dtype, "", 0)]
    yield Case("transposed", ins, {"axis": 0}, [ViewSpec("transposed")] * 2)
    ins = [_values(rng, (4, 5), dtype, "", 0), _values(rng, (4, 3), dtype, "", 0)]
    yield Case("transposed-axis1", ins, {"axis": 1}, [ViewSpec("transposed")] * 2)
    ins = [_values(rng, (8, 3), dtype, "", 0), _values(rng, (4, 6), dtype, "", 0)]
    yield Case("offset-strided", ins, {"axis": 0}, [ViewSpec("offset"), ViewSpec("strided")])


def _pad(op: opset.OpSchema, dtype: str, rng) -> Iterator[Case]:
    for shape, pads, value in [((3,), (1, 2), 0.0), ((2, 3), (0, 0, 1, 1), 1.0),
                               ((2, 3, 4, 5), (0, 0, 0, 0, 1, 1, 2, 0), -1.0),
                               ((0, 2), (1, 1, 0, 0), 0.0), ((1025,), (3, 4), 0.0),
                               ((2, 65537), (0, 0, 1, 2), 2.0), ((3, 4097), (1, 1, 2, 3), -1.0)]:
        x = _values(rng, shape, dtype, "", 0)
        yield Case(f"{shape}-pads={pads}", [x], {"pads": pads, "value": value}, [ViewSpec()])
    yield Case("transposed", [_values(rng, (4, 3), dtype, "", 0)], {"pads": (1, 0, 0, 2)},
               [ViewSpec("transposed")])


_SGD_ATTRS = [{}, {"momentum": 0.9, "first_step": True}, {"momentum": 0.9},
              {"momentum": 0.9, "nesterov": True, "weight_decay": 0.01},
              {"momentum": 0.5, "dampening": 0.3, "maximize": True, "lr": 0.5},
              {"weight_decay": 0.1, "lr": 2.0}, {"momentum": 0.9, "lr_in_momentum": True},
              {"momentum": 0.8, "lr_in_momentum": True, "nesterov": True}]
_ADAM_ATTRS = [{}, {"weight_decay": 0.1, "step": 3.0}, {"weight_decay": 0.1, "decoupled": True,
               "lr": 0.01}, {"maximize": True, "beta1": 0.5, "beta2": 0.9, "eps": 1e-3},
               {"bias_correction": False, "nesterov": True}, {"beta1": 0.2, "step": 7.0},
               {"beta1": 0.0, "beta2": 0.0}]


def _optimizer(op: opset.OpSchema, dtype: str, rng) -> Iterator[Case]:
    """Steps over odd sizes (tails, tiles, thread chunks), every attribute path, and the AMP
    inputs (grad_scale; found_inf 0 runs, 1 skips)."""
    sgd = op.name == "sgd_update"

    def tensors(shape, amsgrad=False):
        x = [_values(rng, shape, dtype, "", 0), _values(rng, shape, dtype, "", 1)]
        if sgd:
            return x + [_values(rng, shape, dtype, "", 2)]
        sq = [np.asarray(rng.uniform(0, 2, shape), dtype) for _ in range(2)]
        return x + [_values(rng, shape, dtype, "", 2), sq[0], sq[1] if amsgrad else None]

    def one(v):
        return np.asarray([v], dtype)

    def case(cid, shape, attrs, amsgrad=False, step=None, scale=None, inf=None):
        ins = tensors(shape, amsgrad)
        if sgd and not attrs.get("momentum"):
            ins[2] = None
        ins += ([] if sgd else [None if step is None else one(step)])
        ins += [None if scale is None else one(scale), None if inf is None else one(inf)]
        return Case(cid, ins, attrs, [ViewSpec()] * len(ins))

    configs = _SGD_ATTRS if sgd else _ADAM_ATTRS
    for shape in [(), (0,), (1,), (7,), (3, 5), (2, 3, 4), (1025,), (4097,), (65537,),
                  (2 * 65536 + 3,)]:
        yield case(f"{shape}", shape, dict(configs[1]))
    for attrs in configs:
        for amsgrad in ((False,) if sgd else (False, True)):
            cid = f"(33, 7){_attr_id(attrs)}" + ("" if sgd else f"-amsgrad={amsgrad}")
            yield case(cid, (33, 7), dict(attrs), amsgrad)
    base = dict(configs[2])
    yield case("grad_scale", (5, 9), base, scale=0.25, inf=0.0)
    yield case("found_inf-skips", (5, 9), base, scale=4.0, inf=1.0)
    if not sgd:
        yield case("state_step", (5, 9), base, True, step=4.0)
        yield case("state_step-large", (65537,), dict(configs[0]), step=1000.0)


def _tier4(op: opset.OpSchema, dtype: str, rng) -> Iterator[Case]:
    from . import tier4

    if op.name == "elementwise_program":
        return tier4.program_cases(op, dtype, rng)
    return tier4.fused_cases(op, dtype, rng)


_GENERATORS = {
    "same": _elementwise, "broadcast": _elementwise, "reduce": _reduce, "matmul": _matmul,
    "gemm": _matmul, "conv2d": _conv, "conv2d_backward_input": _conv,
    "conv2d_backward_weight": _conv, "pool2d": _pool, "adaptive_pool2d": _adaptive,
    "batch_norm": _batch_norm, "batch_norm_backward": _batch_norm, "nll_loss": _nll,
    "loss": _mse, "concat": _concat, "pad": _pad, "optimizer": _optimizer,
    "conv2d_bias_act": _tier4, "gemm_bias_act": _tier4, "program": _tier4,
}


def cases_for(op_name: str, dtype: str, seed: int = 0) -> list[Case]:
    """Every conformance case of (op, dtype), deterministic for a seed."""
    from . import edgecases

    op = opset.get(op_name)
    rng = np.random.default_rng(seed + sum(map(ord, op_name + dtype)))
    base = list(_own_cases(op, dtype, rng))
    return base + edgecases.extend(op, dtype, base, rng)


def _own_cases(op: opset.OpSchema, dtype: str, rng) -> Iterator[Case]:
    if op.tier == 0:
        return _tier0(op, dtype, rng)
    if op.name in ("softmax", "log_softmax", "softmax_backward", "log_softmax_backward"):
        return _softmax(op, dtype, rng)
    if op.name.endswith("_backward") and op.shape == "like_input1":
        if op.name.startswith(("max_pool2d", "avg_pool2d")):
            return _pool(op, dtype, rng)
        if op.name.startswith("adaptive"):
            return _adaptive(op, dtype, rng)
        if op.name.startswith("nll"):
            return _nll(op, dtype, rng)
        if op.name.startswith("mse"):
            return _mse(op, dtype, rng)
    return _GENERATORS[op.shape](op, dtype, rng)


def numel(shape) -> int:
    return math.prod(shape)
