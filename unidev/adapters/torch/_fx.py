"""aten FX nodes -> unidev graph IR nodes, by the eager adapter's table (_optable.TABLE)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...graph.frontend import axes, expanded, operand, pair, squeezed, swapped, unsqueezed
from ...graph.ir import Graph, Value
from ._optable import TABLE

_REDUCTION = {0: "none", 1: "mean", 2: "sum"}  # torch's at::Reduction enum
# aten's functional overloads whose packet differs from the row's (AOTAutograd emits these)
_ALIASES = {"convolution": "convolution_overrideable",
            "convolution_backward": "convolution_backward_overrideable",
            "_native_batch_norm_legit_functional": "native_batch_norm",
            "_native_batch_norm_legit_no_training": "native_batch_norm",
            "nll_loss_backward": "nll_loss_backward", "nll_loss_forward": "nll_loss_forward"}


def _packet(overload: str) -> str:
    return overload.split(".")[0]


# packet -> (unidev op, kind): the first row of each packet that is not an in-place form
ROWS: dict[str, tuple[str, str]] = {}
for _aten, _op, _kind in TABLE:
    if not _kind.endswith("inplace") and not _packet(_aten).endswith("_"):
        ROWS.setdefault(_packet(_aten), (_op, _kind))
    if _kind == "binary_scalar":  # pow.Tensor_Scalar, eq.Scalar: same template, scalar operand
        ROWS.setdefault(_packet(_aten), (_op, "binary"))


def _binary(g, op, a, kw):
    x, y = a[0], a[1]
    if set(kw) - {"alpha"}:  # div's rounding_mode: another op
        raise NotImplementedError(f"{op} with {sorted(kw)}")
    if not isinstance(x, Value):
        x = operand(g, x, y)
    y = operand(g, y, x)
    alpha = kw.get("alpha", a[2] if len(a) > 2 else 1)
    return g.call(op, x, y, alpha=float(alpha)) if alpha != 1 else g.call(op, x, y)


def _where(g, op, a, kw):
    cond, x, y = a[:3]
    x = operand(g, x, y if isinstance(y, Value) else cond)
    return g.call(op, x, operand(g, y, x), cond)


def _reduce(g, op, a, kw):
    x, dtype = a[0], kw.get("dtype")
    if dtype is not None and _dtype(dtype) != x.dtype:
        x = g.call("cast", x, dtype=_dtype(dtype))
    dims = a[1] if len(a) > 1 else kw.get("dim")
    keep = a[2] if len(a) > 2 else kw.get("keepdim", False)
    return g.call(op, x, axes=axes(dims, x.ndim), keepdims=bool(keep))


def _conv_attrs(x: Value, stride, padding, dilation, transposed, groups) -> dict:
    if transposed or x.ndim != 4:
        raise NotImplementedError("only non-transposed 2-d convolution")
    return dict(stride=pair(stride), padding=pair(padding), dilation=pair(dilation),
                groups=int(groups))


def _conv_backward(g, op, a, kw):
    gy, x, w, _, stride, padding, dilation, transposed, _, groups, mask = a[:11]
    at = _conv_attrs(x, stride, padding, dilation, transposed, groups)
    return (g.call(op, gy, w, input_shape=x.shape, **at) if mask[0] else None,
            g.call("conv2d_backward_weight", gy, x, weight_shape=w.shape, **at)
            if mask[1] else None,
            g.call("sum", gy, axes=(0, 2, 3)) if mask[2] else None)


def _pool(k, stride=(), padding=0, dilation=1, ceil=False) -> dict:
    return dict(kernel_size=pair(k), stride=pair(stride) if stride else (),
                padding=pair(padding), dilation=pair(dilation), ceil_mode=bool(ceil))


def _batch_norm(g, op, a, kw):
    if len(a) == 7:  # _native_batch_norm_legit_no_training: no `training` argument
        a = [*a[:5], False, *a[5:]]
    x, w, b, rm, rv, training, momentum, eps = a[:8]
    if training and rm is not None:
        # the functional form returns the new running stats: update copies, not the inputs
        rm, rv = g.call("copy", rm), g.call("copy", rv)
    n = g.node(op, [x, w, b, rm, rv], dict(training=bool(training), momentum=float(momentum),
                                          eps=float(eps)))
    return tuple(n.outputs) if training else tuple(n.outputs[:3])


def _red(r: int) -> str:
    return _REDUCTION[r]


_unary = lambda g, op, a, kw: g.call(op, a[0])  # noqa: E731
# row kind -> fn(graph, unidev op, args, kwargs) adding its node(s); the argument orders are
# aten's (native_functions.yaml), the attributes the op set's
KINDS: dict[str, Callable] = {
    "unary": _unary, "unary_float": _unary, "unary_fn": _unary,
    "gelu": lambda g, op, a, kw: g.call(op, a[0], approximate=kw.get(
        "approximate", a[1] if len(a) > 1 else "none")),
    "binary_alpha": _binary, "binary_alpha_fn": _binary, "binary": _binary,
    "binary_fn": _binary, "binary_bool": _binary, "where_fn": _where,
    "threshold_backward": lambda g, op, a, kw: g.call(op, a[0], a[1], threshold=float(a[2])),
    "reduce_dtype": _reduce, "reduce": _reduce, "reduce_all": _reduce,
    "mm": lambda g, op, a, kw: g.call(op, a[0], a[1]),
    "addmm": lambda g, op, a, kw: g.call(op, a[1], a[2], a[0], alpha=float(kw.get("alpha", 1)),
                                         beta=float(kw.get("beta", 1))),
    "conv": lambda g, op, a, kw: g.call(op, a[0], a[1], a[2],
                                        **_conv_attrs(a[0], *a[3:7], a[8])),
    "conv_backward": _conv_backward,
    "max_pool": lambda g, op, a, kw: g.call(op, a[0], **_pool(*a[1:6])),
    "max_pool_backward": lambda g, op, a, kw: g.call(op, a[0], a[1], a[7], **_pool(*a[2:7])),
    "adaptive_pool": lambda g, op, a, kw: g.call(op, a[0], output_size=pair(a[1])),
    "adaptive_pool_backward": lambda g, op, a, kw: g.call(op, a[0], a[1],
                                                          output_size=tuple(a[0].shape[2:])),
    "batch_norm": _batch_norm,
    "batch_norm_backward": lambda g, op, a, kw: g.call(op, a[0], a[1], a[2], a[5], a[6],
                                                       training=bool(a[7])),
    "softmax": lambda g, op, a, kw: g.call(op, a[0], axis=int(a[1])),
    "softmax_backward": lambda g, op, a, kw: g.call(op, a[0], a[1], axis=int(a[2])),
    "nll_loss": lambda g, op, a, kw: g.call(op, a[0], a[1], a[2], reduction=_red(a[3]),
                                            ignore_index=int(a[4])),
    "nll_loss_backward": lambda g, op, a, kw: g.call(op, a[0], a[1], a[2], a[3], a[6],
                                                     reduction=_red(a[4]),
                                                     ignore_index=int(a[5])),
    "mse_loss": lambda g, op, a, kw: g.call(op, a[0], a[1], reduction=_red(
        a[2] if len(a) > 2 else kw.get("reduction", 1))),
    "mse_loss_backward_fn": lambda g, op, a, kw: g.call(op, a[0], a[1], a[2],
                                                        reduction=_red(a[3])),
    "cat": lambda g, op, a, kw: g.call(op, *a[0], axis=int(a[1] if len(a) > 1 else 0)
                                       % a[0][0].ndim),
}


def _to_copy(g: Graph, x: Value, a: list, kw: dict) -> Value:
    if not set(kw) <= {"dtype", "layout", "device"}:
        raise NotImplementedError(f"_to_copy with {sorted(kw)}")
    dt = _dtype(kw["dtype"]) if kw.get("dtype") is not None else x.dtype
    return g.call("cast", x, dtype=dt) if dt != x.dtype else g.call("copy", x)


_reshape = lambda g, x, a, kw: g.call("reshape", x, shape=tuple(int(d) for d in a[1]))  # noqa: E731
_same = lambda g, x, a, kw: x  # noqa: E731
# views and identities, graph-level (no kernel): packet -> fn(graph, x = args[0], args, kwargs)
_VIEWS: dict[str, Callable] = {
    "view": _reshape, "_unsafe_view": _reshape, "reshape": _reshape,
    "squeeze": lambda g, x, a, kw: g.call("reshape", x, shape=squeezed(
        x, a[1] if len(a) > 1 else None)),
    "unsqueeze": lambda g, x, a, kw: g.call("reshape", x, shape=unsqueezed(x, a[1])),
    "t": lambda g, x, a, kw: g.call("transpose", x, perm=tuple(reversed(range(x.ndim)))),
    "permute": lambda g, x, a, kw: g.call("transpose", x, perm=tuple(int(p) for p in a[1])),
    "transpose": lambda g, x, a, kw: g.call("transpose", x, perm=swapped(x.ndim, a[1], a[2])),
    "expand": lambda g, x, a, kw: g.call("expand", x, shape=expanded(x, a[1])),
    "detach": _same, "alias": _same, "lift_fresh_copy": _same,
    "clone": lambda g, x, a, kw: g.call("copy", x),
    "_to_copy": _to_copy,
}


def supported(overload: str) -> bool:
    """Whether translate() knows aten overload name (e.g. 'add.Tensor') at all."""
    packet = _packet(overload)
    row = ROWS.get(_ALIASES.get(packet, packet))
    return packet in _VIEWS or (row is not None and row[1] in KINDS)


def _dtype(dt: Any) -> str:
    return str(dt).removeprefix("torch.")


def translate(g: Graph, target: Any, args: list, kwargs: dict) -> Any:
    """Add the IR node(s) for one aten call; raises (NotImplementedError, GraphError, ...) when
    it has no translation, so the caller keeps it as an eager torch call."""
    name = getattr(target, "__name__", "")  # OpOverload: "add.Tensor"
    if not hasattr(target, "_schema"):
        raise NotImplementedError(f"{target} is not an aten op")
    packet = _packet(name)
    if packet in _VIEWS:
        return _VIEWS[packet](g, args[0] if args else None, list(args), dict(kwargs))
    row = ROWS.get(_ALIASES.get(packet, packet))
    if row is None or row[1] not in KINDS or (row[1] == "reduce_all" and len(args) > 1):
        raise NotImplementedError(f"aten.{name} has no row in the op table")
    return KINDS[row[1]](g, row[0], list(args), dict(kwargs))
