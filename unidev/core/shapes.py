"""Shape rules of the op set: output shapes, input broadcast targets and attribute normalization."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from .errors import InvalidArgumentError

Shape = tuple[int, ...]
_INT_RANGE = {"int32": (-2**31, 2**31 - 1), "int64": (-2**63, 2**63 - 1)}
# rule(op, input shapes (None if absent), attrs) -> (output shapes, broadcast targets per input)
Rule = Callable[[str, list, dict], tuple[list[Shape], list[Shape | None]]]


def _err(op: str, arg: str, msg: str) -> InvalidArgumentError:
    return InvalidArgumentError(f"{op}: {arg} {msg}")


def broadcast_shapes(op: str, shapes: Sequence[Shape], names: Sequence[str]) -> Shape:
    """numpy broadcasting of `shapes`; the error names the op and the clashing inputs."""
    ndim = max((len(s) for s in shapes), default=0)
    out = [1] * ndim
    for s, name in zip(shapes, names, strict=True):
        for i, d in enumerate(s):
            j = ndim - len(s) + i
            if d != 1 and out[j] != 1 and out[j] != d:
                raise _err(op, f"input '{name}'", f"shape {tuple(s)} does not broadcast with "
                           f"{tuple(out)} (dim {i}: {d} vs {out[j]})")
            if d != 1:
                out[j] = d
    return tuple(out)


def _same(op, shapes, attrs):
    return [shapes[0]] * attrs["__num_outputs__"], [None] * len(shapes)


def _broadcast(op, shapes, attrs):
    names = attrs["__input_names__"]
    present = [(s, n) for s, n in zip(shapes, names, strict=True) if s is not None]
    out = broadcast_shapes(op, [s for s, _ in present], [n for _, n in present])
    return [out] * attrs["__num_outputs__"], [out if s is not None else None for s in shapes]


def _axes(op: str, attrs: dict, ndim: int, key: str = "axes") -> tuple[int, ...]:
    axes = tuple(attrs[key])
    norm = []
    for a in axes:
        if not -max(ndim, 1) <= a < max(ndim, 1):
            raise _err(op, f"attribute '{key}'", f"has axis {a}, expected in [{-ndim}, {ndim})")
        norm.append(a % max(ndim, 1))
    if len(set(norm)) != len(norm):
        raise _err(op, f"attribute '{key}'", f"{axes} repeats an axis")
    return tuple(sorted(norm))


def _reduce(op, shapes, attrs):
    x = shapes[0]
    axes = _axes(op, attrs, len(x))
    if op in ("argmax", "argmin") and len(axes) > 1:
        raise _err(op, "attribute 'axes'", f"{tuple(attrs['axes'])}: expected at most one axis")
    attrs["axes"] = axes
    reduced = set(axes) if axes and x else set(range(len(x)))  # 0-d: axis 0 reduces nothing
    if op in ("max", "min", "argmax", "argmin") and any(x[a] == 0 for a in reduced):
        raise _err(op, "input 'x'", f"has shape {x}: cannot reduce over an empty axis")
    if op in ("argmax", "argmin") and not axes and math.prod(x) == 0:
        raise _err(op, "input 'x'", "is empty")
    if attrs["keepdims"]:
        out = tuple(1 if i in reduced else d for i, d in enumerate(x))
    else:
        out = tuple(d for i, d in enumerate(x) if i not in reduced)
    return [out], [None]


def _none(op, shapes, attrs):
    return [tuple(attrs["__shape__"])], []


def _arange(op, shapes, attrs):
    start, stop, step = attrs["start"], attrs["stop"], attrs["step"]
    if step == 0 or not all(math.isfinite(v) for v in (start, stop, step)):
        raise _err(op, "attribute 'step'", f"= {step} with start={start}, stop={stop}: "
                   "expected finite values and a non-zero step")
    n = max(0, math.ceil((stop - start) / step))
    dtype = attrs.get("dtype", "float32")
    if n and dtype in _INT_RANGE:
        lo, hi = _INT_RANGE[dtype]
        first, last = math.trunc(start), math.trunc(start + (n - 1) * step)
        if not (lo <= first <= hi and lo <= last <= hi):
            raise _err(op, "attributes 'start'/'step'", f"give values from {first} to {last} "
                       f"(start={start}, stop={stop}, step={step}), outside {dtype}'s range "
                       f"[{lo}, {hi}]")
    return [(n,)], []


def _matmul(op, shapes, attrs):
    a, b = shapes
    if len(a) < 2 or len(b) < 2:
        raise _err(op, "inputs", f"have shapes {a} and {b}; expected ndim >= 2 for both")
    if a[-1] != b[-2]:
        raise _err(op, "input 'b'", f"shape {b}: inner dim {b[-2]} != a's {a[-1]} (a is {a})")
    batch = broadcast_shapes(op, [a[:-2], b[:-2]], ["a (batch dims)", "b (batch dims)"])
    return [batch + (a[-2], b[-1])], [batch + a[-2:], batch + b[-2:]]


def _gemm(op, shapes, attrs):
    a, b, c = shapes
    if len(a) != 2 or len(b) != 2:
        raise _err(op, "inputs", f"a {a} and b {b}: expected 2-D matrices")
    if a[1] != b[0]:
        raise _err(op, "input 'b'", f"shape {b}: inner dim {b[0]} != a's {a[1]}")
    out = (a[0], b[1])
    if c is not None:
        broadcast_shapes(op, [out, c], ["a @ b", "c"])
        if len(c) > 2 or broadcast_shapes(op, [out, c], ["a @ b", "c"]) != out:
            raise _err(op, "input 'c'", f"shape {c} does not broadcast to {out}")
    return [out], [None, None, out if c is not None else None]


def _pair(op: str, attrs: dict, key: str, minimum: int) -> tuple[int, int]:
    v = tuple(attrs[key])
    if len(v) == 1:
        v = v * 2
    if len(v) != 2 or any(int(e) < minimum for e in v):
        raise _err(op, f"attribute '{key}'",
                   f"= {tuple(attrs[key])}: expected two ints >= {minimum}")
    attrs[key] = v
    return v


def _conv_geometry(op: str, x: Shape, w: Shape, attrs: dict) -> Shape:
    if len(x) != 4:
        raise _err(op, "input 'x'", f"shape {x}: expected 4-D NCHW")
    if len(w) != 4:
        raise _err(op, "input 'weight'", f"shape {w}: expected 4-D [K, C/groups, R, S]")
    sh, sw = _pair(op, attrs, "stride", 1)
    ph, pw = _pair(op, attrs, "padding", 0)
    dh, dw = _pair(op, attrs, "dilation", 1)
    g = attrs["groups"]
    if g < 1 or x[1] % g or w[0] % g:
        raise _err(op, "attribute 'groups'", f"= {g}: expected >= 1 dividing C={x[1]} and K={w[0]}")
    if w[1] * g != x[1]:
        raise _err(op, "input 'weight'", f"shape {w}: expects {w[1] * g} input channels "
                   f"(groups={g}), x has {x[1]}")
    oh = (x[2] + 2 * ph - dh * (w[2] - 1) - 1) // sh + 1
    ow = (x[3] + 2 * pw - dw * (w[3] - 1) - 1) // sw + 1
    if oh < 1 or ow < 1:
        raise _err(op, "input 'x'", f"spatial size {x[2:]} is too small for kernel {w[2:]} with "
                   f"padding {(ph, pw)} and dilation {(dh, dw)}")
    return (x[0], w[0], oh, ow)


def _conv2d(op, shapes, attrs):
    x, w, b = shapes
    out = _conv_geometry(op, x, w, attrs)
    if b is not None and b != (w[0],):
        raise _err(op, "input 'bias'", f"shape {b}: expected ({w[0]},)")
    return [out], [None, None, None]


def _shape_attr(op: str, attrs: dict, key: str) -> Shape:
    s = tuple(int(v) for v in attrs[key])
    if len(s) != 4 or any(v < 0 for v in s):
        raise _err(op, f"attribute '{key}'", f"= {s}: expected 4 non-negative ints")
    return s


def _conv2d_backward_input(op, shapes, attrs):
    gy, w = shapes
    x = _shape_attr(op, attrs, "input_shape")
    expect = _conv_geometry(op, x, w, attrs)
    if gy != expect:
        raise _err(op, "input 'grad_y'", f"shape {gy}: expected {expect} for input_shape {x}")
    return [x], [None, None]


def _conv2d_backward_weight(op, shapes, attrs):
    gy, x = shapes
    w = _shape_attr(op, attrs, "weight_shape")
    expect = _conv_geometry(op, x, w, attrs)
    if gy != expect:
        raise _err(op, "input 'grad_y'", f"shape {gy}: expected {expect} for weight_shape {w}")
    return [w], [None, None]


def pool_out(n: int, k: int, s: int, p: int, d: int, ceil_mode: bool) -> int:
    """Output extent of one pooled dimension, with torch's ceil_mode rule."""
    span = n + 2 * p - d * (k - 1) - 1
    out = (span + (s - 1 if ceil_mode else 0)) // s + 1
    if ceil_mode and (out - 1) * s >= n + p:
        out -= 1
    return out


def _pool_geometry(op: str, x: Shape, attrs: dict) -> Shape:
    if len(x) != 4:
        raise _err(op, "input 'x'", f"shape {x}: expected 4-D NCHW")
    kh, kw = _pair(op, attrs, "kernel_size", 1)
    if not attrs["stride"]:
        attrs["stride"] = (kh, kw)
    sh, sw = _pair(op, attrs, "stride", 1)
    ph, pw = _pair(op, attrs, "padding", 0)
    dh, dw = _pair(op, attrs, "dilation", 1) if "dilation" in attrs else (1, 1)
    if ph * 2 > kh or pw * 2 > kw:
        raise _err(op, "attribute 'padding'", f"= {(ph, pw)}: expected at most half the kernel "
                   f"size {(kh, kw)}")
    oh = pool_out(x[2], kh, sh, ph, dh, attrs["ceil_mode"])
    ow = pool_out(x[3], kw, sw, pw, dw, attrs["ceil_mode"])
    if oh < 1 or ow < 1:
        raise _err(op, "input 'x'", f"spatial size {x[2:]} is too small for kernel {(kh, kw)}")
    return (x[0], x[1], oh, ow)


def _pool2d(op, shapes, attrs):
    out = _pool_geometry(op, shapes[0], attrs)
    return [out] * attrs["__num_outputs__"], [None]


def _adaptive_pool2d(op, shapes, attrs):
    x = shapes[0]
    if len(x) != 4:
        raise _err(op, "input 'x'", f"shape {x}: expected 4-D NCHW")
    oh, ow = _pair(op, attrs, "output_size", 1)
    return [(x[0], x[1], oh, ow)], [None]


def _like_input1(op, shapes, attrs):
    """Backward ops whose gradient has the shape of their second input (the forward input)."""
    gy, x = shapes[0], shapes[1]
    if op.startswith(("max_pool2d", "avg_pool2d")):
        expect = _pool_geometry(op, x, attrs)
    elif op.startswith("adaptive_avg_pool2d"):
        expect = _adaptive_pool2d(op, [x], attrs)[0][0]
    elif op.startswith("nll_loss"):
        _nll_check(op, x, shapes[2], shapes[3], attrs)
        expect = gy
    elif op.startswith("mse_loss"):
        expect = x if attrs["reduction"] == "none" else ()
        if shapes[2] is not None:
            broadcast_shapes(op, [x, shapes[2]], ["x", "target"])
        return [x], [None, None, x]
    else:
        expect = gy
    if gy != expect:
        raise _err(op, "input 'grad_y'", f"shape {gy}: expected {expect}")
    if op == "max_pool2d_backward" and shapes[2] != expect:
        raise _err(op, "input 'indices'", f"shape {shapes[2]}: expected {expect}")
    return [x], [None] * len(shapes)


def _batch_norm(op, shapes, attrs):
    x = shapes[0]
    if len(x) < 2:
        raise _err(op, "input 'x'", f"shape {x}: expected [N, C, ...]")
    c = x[1]
    for name, s in zip(("weight", "bias", "running_mean", "running_var"), shapes[1:], strict=True):
        if s is not None and s != (c,):
            raise _err(op, f"input '{name}'", f"shape {s}: expected ({c},)")
    if not attrs["training"] and (shapes[3] is None or shapes[4] is None):
        raise _err(op, "inputs", "running_mean and running_var are required when training=False")
    # one value per channel is valid (variance 0): torch's layer_norm decomposition passes it
    if attrs["training"] and math.prod(x) == 0:
        raise _err(op, "input 'x'", f"shape {x}: training needs at least one value per channel")
    return [x, (c,), (c,)], [None] * 5


def _batch_norm_backward(op, shapes, attrs):
    gy, x = shapes[0], shapes[1]
    if gy != x:
        raise _err(op, "input 'grad_y'", f"shape {gy}: expected x's shape {x}")
    c = x[1] if len(x) >= 2 else 0
    for name, s in zip(("weight", "save_mean", "save_invstd"), shapes[2:], strict=True):
        if s is not None and s != (c,):
            raise _err(op, f"input '{name}'", f"shape {s}: expected ({c},)")
    return [x, (c,), (c,)], [None] * 5


def _nll_check(op, logp, target, weight, attrs):
    if len(logp) not in (1, 2):
        raise _err(op, "input 'logp'", f"shape {logp}: expected [N, C] or [C]")
    expect = logp[:1] if len(logp) == 2 else ()
    if target != expect:
        raise _err(op, "input 'target'", f"shape {target}: expected {expect}")
    if weight is not None and weight != logp[-1:]:
        raise _err(op, "input 'weight'", f"shape {weight}: expected {logp[-1:]}")


def _nll_loss(op, shapes, attrs):
    logp, target, weight = shapes
    _nll_check(op, logp, target, weight, attrs)
    loss = target if attrs["reduction"] == "none" else ()
    return [loss, ()], [None] * 3


def _loss(op, shapes, attrs):
    x, target = shapes
    broadcast_shapes(op, [x, target], ["x", "target"])
    if broadcast_shapes(op, [x, target], ["x", "target"]) != x:
        raise _err(op, "input 'target'", f"shape {target} does not broadcast to x's {x}")
    return [x if attrs["reduction"] == "none" else ()], [None, x]


def _concat(op, shapes, attrs):
    if not shapes:
        raise _err(op, "input 'tensors'", "is empty: expected at least one tensor")
    first = shapes[0]
    if len(first) == 0:
        raise _err(op, "input 'tensors'", "holds 0-d tensors; expected ndim >= 1")
    (axis,) = _axes(op, {"axis": (attrs["axis"],)}, len(first), "axis")
    attrs["axis"] = axis
    total = 0
    for i, s in enumerate(shapes):
        if len(s) != len(first) or any(a != b for j, (a, b) in enumerate(zip(s, first, strict=True))
                                       if j != axis):
            raise _err(op, f"input 'tensors[{i}]'", f"shape {s} does not match {first} outside "
                       f"axis {axis}")
        total += s[axis]
    return [first[:axis] + (total,) + first[axis + 1:]], [None] * len(shapes)


def _pad(op, shapes, attrs):
    x = shapes[0]
    pads = tuple(int(p) for p in attrs["pads"])
    if len(pads) != 2 * len(x) or any(p < 0 for p in pads):
        raise _err(op, "attribute 'pads'", f"= {pads}: expected {2 * len(x)} non-negative ints "
                   "(before, after) per dimension")
    return [tuple(d + pads[2 * i] + pads[2 * i + 1] for i, d in enumerate(x))], [None]


def _softmax_like(op, shapes, attrs):
    x = shapes[0]
    for s, n in zip(shapes[1:], ("y",), strict=False):
        if s != x:
            raise _err(op, f"input '{n}'", f"shape {s}: expected {x}")
    (axis,) = _axes(op, {"axis": (attrs["axis"],)}, len(x), "axis")
    attrs["axis"] = axis
    return [x], [None] * len(shapes)


def _optimizer(op, shapes, attrs):
    """Optimizer steps: every tensor of the op's dtype has param's shape; the scalars (state_step,
    grad_scale, found_inf: the inputs of a fixed dtype group) hold one element each."""
    names = attrs["__input_names__"]
    p = shapes[0]
    for name, s in zip(names[1:], shapes[1:], strict=True):
        if s is None:
            continue
        if name in ("state_step", "grad_scale", "found_inf"):
            if math.prod(s) != 1:
                raise _err(op, f"input '{name}'", f"shape {s}: expected one element")
        elif s != p:
            raise _err(op, f"input '{name}'", f"shape {s}: expected param's shape {p}")
    if op == "sgd_update" and attrs["momentum"] != 0 and shapes[2] is None:
        raise _err(op, "input 'momentum_buffer'", f"is required when momentum = "
                   f"{attrs['momentum']!r} (not 0)")
    return [], [None] * len(shapes)


def _conv2d_bias_act(op, shapes, attrs):
    x, w, b, r = shapes
    (out,), _ = _conv2d(op, [x, w, b], attrs)
    if r is not None and r != out:
        raise _err(op, "input 'residual'", f"shape {r}: expected the output's {out}")
    return [out], [None] * 4


def _gemm_bias_act(op, shapes, attrs):
    a, b, bias, r = shapes
    if len(a) != 2 or len(b) != 2:
        raise _err(op, "inputs", f"a {a} and b {b}: expected 2-D matrices [M, K] and [K, N]")
    if a[1] != b[0]:
        raise _err(op, "input 'b'", f"shape {b}: inner dim {b[0]} != a's {a[1]}")
    out = (a[0], b[1])
    if bias is not None and bias != (b[1],):
        raise _err(op, "input 'bias'", f"shape {bias}: expected ({b[1]},)")
    if r is not None and r != out:
        raise _err(op, "input 'residual'", f"shape {r}: expected the output's {out}")
    return [out], [None] * 4


def _program(op, shapes, attrs):
    """elementwise_program: inputs broadcast to S; the program is validated here (for every
    caller: unidev.ops, the reference's callers, the graph layer); reduce_axes normalized to
    the sorted trailing axes of S."""
    from .program import parse_program

    if not shapes:
        raise _err(op, "input 'xs'", "is empty: expected at least one tensor")
    names = attrs["__input_names__"]
    s = broadcast_shapes(op, shapes, names)
    prog = parse_program(attrs["program"], len(shapes), attrs["__num_outputs__"], op)
    axes = _axes(op, attrs, len(s), "reduce_axes") if s or attrs["reduce_axes"] else ()
    if attrs["reduce"] == "none":
        if axes:
            raise _err(op, "attribute 'reduce_axes'", f"= {tuple(attrs['reduce_axes'])}: "
                       "expected () when reduce is 'none'")
        out = s
    else:
        trailing = tuple(range(len(s) - len(axes), len(s)))
        if not axes or len(s) == 0 or axes != trailing:
            raise _err(op, "attribute 'reduce_axes'", f"= {tuple(attrs['reduce_axes'])} for S = "
                       f"{s}: expected one or more trailing axes of S (e.g. ({len(s) - 1},)) "
                       f"when reduce is {attrs['reduce']!r}")
        if attrs["reduce"] in ("max", "min") and any(s[a] == 0 for a in axes):
            raise _err(op, "inputs", f"have the shape {s}: reduce={attrs['reduce']!r} over an "
                       "empty axis")
        out = s[:len(s) - len(axes)]
    attrs["reduce_axes"] = axes
    return [out] * prog.num_outputs, [s] * len(shapes)


RULES: dict[str, Rule] = {
    "same": _same,
    "broadcast": _broadcast,
    "reduce": _reduce,
    "none": _none,
    "arange": _arange,
    "matmul": _matmul,
    "gemm": _gemm,
    "conv2d": _conv2d,
    "conv2d_backward_input": _conv2d_backward_input,
    "conv2d_backward_weight": _conv2d_backward_weight,
    "pool2d": _pool2d,
    "adaptive_pool2d": _adaptive_pool2d,
    "like_input1": _like_input1,
    "batch_norm": _batch_norm,
    "batch_norm_backward": _batch_norm_backward,
    "nll_loss": _nll_loss,
    "loss": _loss,
    "concat": _concat,
    "pad": _pad,
    "softmax": _softmax_like,
    "optimizer": _optimizer,
    "conv2d_bias_act": _conv2d_bias_act,
    "gemm_bias_act": _gemm_bias_act,
    "program": _program,
}

# ops whose generic "same" rule also normalizes an axis attribute
_SOFTMAX_OPS = {"softmax", "log_softmax", "softmax_backward", "log_softmax_backward"}


def infer(schema, shapes: list, attrs: dict, out_shape: Sequence[int] | None = None,
          num_outputs: int | None = None) -> tuple[list[Shape], list[Shape | None]]:
    """Output shapes and input broadcast targets for `schema`; normalizes `attrs` in place.

    Normalization is part of the contract: kernels receive axes non-negative and sorted, pooling
    strides filled from kernel_size, and 2-element stride/padding/dilation lists. `num_outputs`
    is the caller's count for a variadic output (None: as many as the op's attributes say, e.g.
    the outputs elementwise_program's program writes).
    """
    rule = "softmax" if schema.name in _SOFTMAX_OPS else schema.shape
    ctx = dict(attrs)
    variadic_out = any(o.variadic for o in schema.outputs)
    ctx["__num_outputs__"] = num_outputs if variadic_out else len(schema.outputs)
    if schema.shape == "none":
        if out_shape is None or any(int(d) < 0 for d in out_shape):
            raise _err(schema.name, "argument 'shape'", f"= {out_shape}: expected non-negative "
                       "ints (ops without inputs need an explicit output shape)")
        ctx["__shape__"] = tuple(out_shape)
    ctx["__input_names__"] = [i.name for i in schema.inputs] if not any(
        i.variadic for i in schema.inputs) else [f"{schema.inputs[0].name}[{k}]"
                                                  for k in range(len(shapes))]
    outs, targets = RULES[rule](schema.name, list(shapes), ctx)
    for k in list(attrs):
        attrs[k] = ctx[k]
    return [tuple(int(d) for d in s) for s in outs], targets
