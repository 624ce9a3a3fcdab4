"""Run any op of the op set on any device: ``unidev.ops.add(x, y, alpha=2.0)``.

Every op is a function generated from its schema. A call checks devices and dtypes, fills and
type-checks attributes (numbers of the tensor dtype against that dtype), infers output shapes
(unidev.core.shapes), broadcasts elementwise inputs with stride-0 views, allocates the outputs on
the call's stream (or writes into ``out=``), and calls the plugin's kernel through unidev._C.
An ``out=`` that overlaps an input other than in the exact in-place form of an elementwise op is
computed through a temporary; an output that overlaps itself or another output is refused.
Errors name the op, the argument, the value and what was expected.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..contract import dtypes, opset
from . import shapes
from .array import INT64_MAX, MAX_BYTES, DeviceArray, check_int, check_shape
from .device import Device
from .device import device as parse_device
from .errors import InvalidArgumentError, UnknownHandleError, UnsupportedError

__all__ = ["call", "call_kernel", "kernel_for", "normalize_attrs"] + sorted(opset.OPS)

_kernels: dict[tuple[int, str, str], Any] = {}
# set by unidev.graph.trace(): call() records the op into a graph instead of running it
_trace_hook: Any = None
_MUTATES = {op.name for op in opset.OPS.values() if any(i.mutated for i in op.inputs)}


def kernel_for(dev: Device, op: str, dtype: str):
    """The plugin kernel for (op, dtype) on `dev`, cached; None if the plugin lacks it."""
    lib = dev.library
    key = (id(lib), op, dtype)
    if key not in _kernels:
        _kernels[key] = lib.kernel(op, dtype)
    return _kernels[key]


def _compiled_for(dev: Device, op: str, dtype: str, attr_list: list):
    """A tier-4 op's kernel specialized for these attributes by the plugin's kernel_compile
    (ABI 1.2), cached per (library, op, dtype, attributes); else kernel_lookup's (None if none).
    The plugin owns compiled code for the process's life, so caching the handle is safe."""
    lib = dev.library
    key = (id(lib), op, dtype, tuple((n, v) for n, _, v in attr_list))
    kernel = _compiled.get(key, _MISSING)
    if kernel is _MISSING:
        kernel = None
        if getattr(lib, "has_kernel_compile", False):
            kernel = lib.kernel_compile(op, dtype, attr_list)
        if kernel is None:
            kernel = kernel_for(dev, op, dtype)
        _compiled[key] = kernel
    return kernel


_compiled: dict[tuple, Any] = {}
_MISSING = object()


def call_kernel(op: str, inputs: list, outputs: list, attrs: dict) -> None:
    """The plugin's kernel itself, past unidev.ops's own checks (for tests that prove a plugin
    refuses bad input the way the adapters call it); `inputs` may hold None for absent ones."""
    schema = opset.get(op)
    first = next(x for x in [*outputs, *inputs] if x is not None)  # optimizer steps: no outputs
    dev = first.device
    dtype = (inputs[0] if inputs else outputs[0]).dtype
    full = normalize_attrs(schema, attrs)
    attr_list = [(a.name, a.type, full[a.name]) for a in schema.attrs]
    kernel = (_compiled_for(dev, op, dtype, attr_list) if schema.tier == 4
              else kernel_for(dev, op, dtype))
    kernel(dev.index, [None if v is None else v.descriptor() for v in inputs],
           [o.descriptor() for o in outputs], attr_list, 0)


def _is_int(value: Any) -> bool:
    return isinstance(value, int | np.integer) and not isinstance(value, bool)


def _coerce(op: str, attr: opset.Attr, value: Any) -> Any:
    where = f"{op}: attribute '{attr.name}'"
    raw = value
    expected = attr.type
    try:
        if attr.type == "int":
            expected = "an integer in [-2**63, 2**63)"
            if isinstance(value, bool) or int(value) != value:
                raise TypeError
            value = int(value)
            if not -INT64_MAX - 1 <= value <= INT64_MAX:
                raise TypeError
        elif attr.type == "float":
            if isinstance(value, str | bytes):
                raise TypeError
            value = float(value)
        elif attr.type == "bool":
            if value not in (True, False, 0, 1):
                raise TypeError
            value = bool(value)
        elif attr.type == "str":
            if not isinstance(value, str):
                raise TypeError
        else:  # ints
            expected = "ints (each an integer in [-2**63, 2**63))"
            if _is_int(value):
                value = (value,)
            if isinstance(value, str | bytes):
                raise TypeError
            value = tuple(value)
            if not all(_is_int(v) and -INT64_MAX - 1 <= v <= INT64_MAX for v in value):
                raise TypeError
            value = tuple(int(v) for v in value)
    except (TypeError, ValueError, OverflowError):
        raise InvalidArgumentError(f"{where} = {raw!r}, expected {expected}") from None
    if attr.choices and value not in attr.choices:
        raise InvalidArgumentError(f"{where} = {value!r}, expected one of {attr.choices}")
    return value


def _check_scalars(schema: opset.OpSchema, given: dict, attrs: dict, dtype: str) -> None:
    """Attributes that are numbers of the op's dtype (opset.Attr.scalar) must be representable
    in it; a float plugin attribute cannot carry them otherwise (nan would become INT_MIN)."""
    if dtype not in dtypes.INT:
        return
    info = np.iinfo(dtype)
    for a in schema.attrs:
        if not a.scalar:
            continue
        raw, v = given.get(a.name, a.default), attrs[a.name]
        ok = math.isfinite(v) and info.min <= math.trunc(v) <= info.max
        if a.scalar == "integral":
            ok = ok and float(v).is_integer()
        # an int beyond 2**53 does not survive the trip through a float attribute
        if ok and _is_int(raw) and int(raw) != math.trunc(v):
            raise InvalidArgumentError(
                f"{schema.name}: attribute '{a.name}' = {raw} for {dtype} is not exactly "
                f"representable as the float the attribute is passed as (|value| <= 2**53 is)")
        if not ok:
            raise InvalidArgumentError(
                f"{schema.name}: attribute '{a.name}' = {raw!r} for {dtype}, expected "
                + opset.SCALAR_RULES[a.scalar].format(lo=info.min, hi=info.max))


def normalize_attrs(schema: opset.OpSchema, given: dict) -> dict:
    """All of the op's attributes in schema order, defaults filled and types checked."""
    unknown = set(given) - set(schema.attr_names)
    if unknown:
        raise InvalidArgumentError(f"{schema.name}: unknown attribute(s) {sorted(unknown)}; "
                                   f"expected some of {list(schema.attr_names)}")
    attrs = {}
    for a in schema.attrs:
        attrs[a.name] = _coerce(schema.name, a, given.get(a.name, a.default))
    if "dtype" in attrs:
        dtypes.check(attrs["dtype"], f"{schema.name}: attribute 'dtype'")
    return attrs


def _bind_inputs(schema: opset.OpSchema, args: Sequence[Any]) -> list[DeviceArray | None]:
    specs = schema.inputs
    if specs and specs[0].variadic:
        if len(args) == 1 and isinstance(args[0], list | tuple):
            args = tuple(args[0])
        return list(args)
    if len(args) > len(specs):
        raise InvalidArgumentError(f"{schema.name}: takes {len(specs)} inputs "
                                   f"({', '.join(i.name for i in specs)}), got {len(args)}")
    bound = list(args) + [None] * (len(specs) - len(args))
    for spec, value in zip(specs, bound, strict=True):
        if value is None and not spec.optional:
            raise InvalidArgumentError(f"{schema.name}: input '{spec.name}' is required")
    return bound


def _output_names(schema: opset.OpSchema, n: int) -> list[str]:
    """Output names with a variadic (last) output expanded to `n` outputs in all: ys[0], ..."""
    names = [o.name for o in schema.outputs]
    if schema.outputs and schema.outputs[-1].variadic:
        head = names[:-1]
        names = head + [f"{names[-1]}[{k}]" for k in range(n - len(head))]
    return names


def _check_inputs(schema: opset.OpSchema, inputs: list, dev: Device | None) -> tuple[Device, str]:
    var = schema.inputs[0].name
    names = ([f"{var}[{k}]" for k in range(len(inputs))] if schema.inputs[0].variadic
             else [i.name for i in schema.inputs])
    specs = ([schema.inputs[0]] * len(inputs) if schema.inputs[0].variadic
             else list(schema.inputs))
    op_dtype = None
    for name, spec, x in zip(names, specs, inputs, strict=True):
        if x is None and not spec.variadic:
            continue
        if not isinstance(x, DeviceArray):
            raise InvalidArgumentError(f"{schema.name}: input '{name}' is a {type(x).__name__}, "
                                       "expected a unidev.DeviceArray (use DeviceArray.from_numpy)")
        if x.buffer.freed:
            raise UnknownHandleError(f"{schema.name}: input '{name}' {x!r} was freed "
                                     f"(buffer.free()); expected a live array")
        if dev is None:
            dev = x.device
        elif x.device != dev:
            raise InvalidArgumentError(f"{schema.name}: input '{name}' is on {x.device}, "
                                       f"expected {dev} like the other operands")
        if spec.dtypes == "same":
            if op_dtype is None:
                op_dtype = x.dtype
                if x.dtype not in schema.dtypes:
                    raise InvalidArgumentError(
                        f"{schema.name}: input '{name}' has dtype {x.dtype}, expected one of "
                        f"{list(schema.dtypes)}")
            elif x.dtype != op_dtype:
                raise InvalidArgumentError(f"{schema.name}: input '{name}' has dtype {x.dtype}, "
                                           f"expected {op_dtype} (same as the first input)")
        elif x.dtype not in spec.dtypes:
            raise InvalidArgumentError(f"{schema.name}: input '{name}' has dtype {x.dtype}, "
                                       f"expected one of {list(spec.dtypes)}")
    assert dev is not None and op_dtype is not None
    return dev, op_dtype


def _out_dtype(out: opset.Output, op_dtype: str, attrs: dict) -> str:
    if out.dtype == "same":
        return op_dtype
    if out.dtype.startswith("attr:"):
        return attrs[out.dtype[5:]]
    return out.dtype


def call(op: str, *inputs: Any, out: DeviceArray | Sequence[DeviceArray] | None = None,
         device: str | Device | None = None, shape: Sequence[int] | None = None,
         dtype: str | None = None, stream: int = 0, **attrs: Any):
    """Run `op`. `device`, `shape`, `dtype` are for ops without inputs (fill, zero, arange).

    `stream` (from ``Library.stream_create``; 0: the default stream) orders the call: outputs are
    allocated on it and every operand's earlier use, on any stream, comes first.
    """
    if _trace_hook is not None:
        traced = _trace_hook(op, inputs, attrs, out=out, shape=shape, dtype=dtype)
        if traced is not NotImplemented:  # NotImplemented: another thread's call, run it
            return traced
    schema = opset.get(op)
    if type(stream) is not int or not 0 <= stream < 2**64:
        stream = check_int(stream, f"{op}: argument 'stream'", 0, 2**64 - 1)
    if out is not None and not isinstance(out, DeviceArray | list | tuple):
        raise InvalidArgumentError(f"{op}: out= is a {type(out).__name__}, expected a "
                                   "unidev.DeviceArray or a list/tuple of them")
    if dtype is not None and "dtype" in schema.attr_names:
        attrs["dtype"] = dtype  # cast and arange take their output dtype as an attribute
    given = dict(attrs)
    attrs = normalize_attrs(schema, attrs)
    if schema.inputs:
        bound = _bind_inputs(schema, inputs)
        if not bound:
            raise InvalidArgumentError(f"{op}: needs at least one input")
        dev, op_dtype = _check_inputs(schema, bound,
                                      parse_device(device) if device is not None else None)
    else:
        if inputs:
            raise InvalidArgumentError(f"{op}: takes no tensor inputs, got {len(inputs)}")
        if device is None and out is None:
            raise InvalidArgumentError(f"{op}: needs device= (or out=)")
        bound = []
        first_out = out if isinstance(out, DeviceArray) else (out[0] if out else None)
        if first_out is not None and not isinstance(first_out, DeviceArray):
            raise InvalidArgumentError(f"{op}: out[0] is a {type(first_out).__name__}, expected "
                                       "a unidev.DeviceArray")
        if first_out is None and device is None:
            raise InvalidArgumentError(f"{op}: needs device= (or out=)")
        dev = first_out.device if isinstance(first_out, DeviceArray) else parse_device(device)
        op_dtype = (attrs.get("dtype") or dtype or
                    (first_out.dtype if isinstance(first_out, DeviceArray) else "float32"))
        if isinstance(first_out, DeviceArray) and shape is None:
            shape = first_out.shape
        if shape is not None:
            shape = check_shape(shape, f"{op}: argument 'shape'")
        if op_dtype not in schema.dtypes:
            raise InvalidArgumentError(f"{op}: dtype {op_dtype}, expected one of "
                                       f"{list(schema.dtypes)}")
        if "dtype" in attrs:
            attrs["dtype"] = op_dtype
    _check_scalars(schema, given, attrs, op_dtype)
    n_out = None
    if schema.outputs and schema.outputs[-1].variadic and out is not None:
        n_out = 1 if isinstance(out, DeviceArray) else len(out)
    out_shapes, targets = shapes.infer(
        schema, [x.shape if x is not None else None for x in bound], attrs, shape, n_out)
    views = [x.broadcast_to(t) if x is not None and t is not None and x.shape != t else x
             for x, t in zip(bound, targets, strict=False)] if targets else bound
    out_specs = list(schema.outputs)
    if out_specs and out_specs[-1].variadic:
        out_specs = out_specs[:-1] + [out_specs[-1]] * (len(out_shapes) - len(out_specs) + 1)
    out_dtypes = [_out_dtype(o, op_dtype, attrs) for o in out_specs]
    if stream:
        dev.library.check_stream(dev.index, stream, f"{op}: argument 'stream'")
    outs = _outputs(schema, out, out_shapes, out_dtypes, dev, stream)
    attr_list = [(a.name, a.type, attrs[a.name]) for a in schema.attrs]
    kernel = (_compiled_for(dev, op, op_dtype, attr_list) if schema.tier == 4
              else kernel_for(dev, op, op_dtype))
    if kernel is None:
        raise UnsupportedError(f"{op}: plugin '{dev.plugin}' has no kernel for dtype {op_dtype}")
    fresh = out is None and schema.name not in _MUTATES
    targets_out = outs if fresh else _through_temporaries(schema, views, outs, stream)
    kernel(dev.index, [v.descriptor() if v is not None else None for v in views],
           [o.descriptor() for o in targets_out], attr_list, stream)
    for tmp, o in zip(targets_out, outs, strict=True):
        if tmp is not o:
            call("copy", tmp, out=o, stream=stream)
    return outs[0] if len(outs) == 1 else tuple(outs)


def _outputs(schema, out, out_shapes, out_dtypes, dev, stream) -> list[DeviceArray]:
    op = schema.name
    names = _output_names(schema, len(out_shapes))
    if out is None:
        for name, s, d in zip(names, out_shapes, out_dtypes, strict=True):
            nbytes = math.prod(s) * dtypes.itemsize(d)
            if nbytes > MAX_BYTES:
                raise InvalidArgumentError(f"{op}: output '{name}' of shape {tuple(s)} {d} needs "
                                           f"{nbytes} bytes, more than the {MAX_BYTES} a unidev "
                                           "array can span")
        return [DeviceArray.empty(s, d, dev, stream)
                for s, d in zip(out_shapes, out_dtypes, strict=True)]
    outs = [out] if isinstance(out, DeviceArray) else list(out)
    if len(outs) != len(out_shapes):
        raise InvalidArgumentError(f"{op}: out= has {len(outs)} arrays, expected "
                                   f"{len(out_shapes)}")
    for k, (o, s, d) in enumerate(zip(outs, out_shapes, out_dtypes, strict=True)):
        if not isinstance(o, DeviceArray):
            raise InvalidArgumentError(f"{op}: out[{k}] ('{names[k]}') is a {type(o).__name__}, "
                                       "expected a unidev.DeviceArray")
        if o.buffer.freed:
            raise UnknownHandleError(f"{op}: out[{k}] ('{names[k]}') {o!r} was freed "
                                     "(buffer.free()); expected a live array")
        if o.shape != tuple(s) or o.dtype != d or o.device != dev:
            raise InvalidArgumentError(f"{op}: out[{k}] is {o.shape} {o.dtype} on {o.device}, "
                                       f"expected {tuple(s)} {d} on {dev}")
    return outs


def _overlap(a: DeviceArray, b: DeviceArray) -> bool:
    """Whether two views may share bytes (same buffer, intersecting byte ranges)."""
    if a.buffer is not b.buffer:
        return False
    (alo, ahi), (blo, bhi) = a.byte_range(), b.byte_range()
    return alo < bhi and blo < ahi


def _same_view(a: DeviceArray, b: DeviceArray) -> bool:
    return (a.buffer is b.buffer and a.offset == b.offset and a.shape == b.shape
            and a.strides == b.strides and a.dtype == b.dtype)


def _through_temporaries(schema: opset.OpSchema, views: list, outs: list[DeviceArray],
                         stream: int) -> list[DeviceArray]:
    """The arrays the kernel writes: `outs`, except a fresh temporary for each output that
    overlaps an input (the contract's kernels may assume they never do), copied back after.

    The exact in-place form of an elementwise op (output identical to an input) goes to the
    kernel as is, as unidev.h allows. Outputs that overlap themselves (stride 0, interleaved
    strides) or each other, and updated-in-place inputs that overlap anything, have no
    meaningful result and are refused.
    """
    op = schema.name
    if op not in _MUTATES and not any(o.overlaps_itself() for o in outs):
        out_ids = [id(o.buffer) for o in outs]
        if len(set(out_ids)) == len(out_ids) and \
                not {id(v.buffer) for v in views if v is not None}.intersection(out_ids):
            return outs  # the common case: each output has an allocation of its own
    names = _output_names(schema, len(outs))
    specs = (list(schema.inputs) if not (schema.inputs and schema.inputs[0].variadic)
             else [schema.inputs[0]] * len(views))
    in_names = ([i.name for i in schema.inputs] if not (schema.inputs and schema.inputs[0].variadic)
                else [f"{schema.inputs[0].name}[{k}]" for k in range(len(views))])
    written = [(f"output '{n}'", o) for n, o in zip(names, outs, strict=True)]
    written += [(f"input '{n}' (updated in place)", v)
                for n, spec, v in zip(in_names, specs, views, strict=True)
                if v is not None and spec.mutated]
    for i, (name, w) in enumerate(written):
        if w.overlaps_itself():
            raise InvalidArgumentError(
                f"{op}: {name} {w!r} with strides {w.strides} has elements that share memory "
                "(stride 0 or overlapping strides); expected an output whose elements are distinct "
                "(e.g. a contiguous array)")
        for other_name, other in written[i + 1:]:
            if _overlap(w, other):
                raise InvalidArgumentError(f"{op}: {name} and {other_name} overlap in memory; "
                                           "expected separate arrays")
    for name, w in written[len(outs):]:
        for n, v in zip(in_names, views, strict=True):
            if v is not None and v is not w and _overlap(v, w):
                raise InvalidArgumentError(f"{op}: {name} overlaps input '{n}'; expected "
                                           "separate arrays")
    elementwise = schema.broadcast and schema.shape in ("same", "broadcast")
    result = []
    for o in outs:
        clash = [v for v in views if v is not None and _overlap(v, o)]
        if clash and not (elementwise and all(_same_view(v, o) for v in clash)):
            o = DeviceArray.empty(o.shape, o.dtype, o.device, stream)
        result.append(o)
    return result


def _make(name: str):
    schema = opset.OPS[name]

    def op(*inputs: Any, **kwargs: Any):
        return call(name, *inputs, **kwargs)

    op.__name__ = op.__qualname__ = name
    ins = ", ".join(i.name + ("=None" if i.optional else "") for i in schema.inputs)
    at = ", ".join(f"{a.name}={a.default!r}" for a in schema.attrs)
    op.__doc__ = f"{name}({ins}{', ' if at else ''}{at}) — tier {schema.tier}. {schema.doc}"
    return op


globals().update({name: _make(name) for name in opset.OPS})
