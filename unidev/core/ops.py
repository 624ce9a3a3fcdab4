"""Run any op of the op set on any device: ``unidev.ops.add(x, y, alpha=2.0)``.

Every op is a function generated from its schema. A call checks devices and dtypes, fills and
type-checks attributes, infers output shapes (unidev.core.shapes), broadcasts elementwise inputs
with stride-0 views, allocates the outputs (or writes into ``out=``), and calls the plugin's
kernel through unidev._C. Errors name the op, the argument and what was expected.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from . import dtypes, opset, shapes
from .array import DeviceArray
from .device import Device
from .device import device as parse_device
from .errors import InvalidArgumentError, UnsupportedError

__all__ = ["call", "kernel_for", "normalize_attrs"] + sorted(opset.OPS)

_kernels: dict[tuple[int, str, str], Any] = {}


def kernel_for(dev: Device, op: str, dtype: str):
    """The plugin kernel for (op, dtype) on `dev`, cached; None if the plugin lacks it."""
    lib = dev.library
    key = (id(lib), op, dtype)
    if key not in _kernels:
        _kernels[key] = lib.kernel(op, dtype)
    return _kernels[key]


def _coerce(op: str, attr: opset.Attr, value: Any) -> Any:
    where = f"{op}: attribute '{attr.name}'"
    try:
        if attr.type == "int":
            if isinstance(value, bool) or int(value) != value:
                raise TypeError
            value = int(value)
        elif attr.type == "float":
            value = float(value)
        elif attr.type == "bool":
            if value not in (True, False, 0, 1):
                raise TypeError
            value = bool(value)
        elif attr.type == "str":
            if not isinstance(value, str):
                raise TypeError
        else:  # ints
            if isinstance(value, int):
                value = (value,)
            value = tuple(int(v) for v in value)
    except (TypeError, ValueError):
        raise InvalidArgumentError(f"{where} = {value!r}, expected {attr.type}") from None
    if attr.choices and value not in attr.choices:
        raise InvalidArgumentError(f"{where} = {value!r}, expected one of {attr.choices}")
    return value


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


def _check_inputs(schema: opset.OpSchema, inputs: list, dev: Device | None) -> tuple[Device, str]:
    names = ([f"tensors[{k}]" for k in range(len(inputs))] if schema.inputs[0].variadic
             else [i.name for i in schema.inputs])
    specs = ([schema.inputs[0]] * len(inputs) if schema.inputs[0].variadic
             else list(schema.inputs))
    op_dtype = None
    for name, spec, x in zip(names, specs, inputs, strict=True):
        if x is None:
            continue
        if not isinstance(x, DeviceArray):
            raise InvalidArgumentError(f"{schema.name}: input '{name}' is a {type(x).__name__}, "
                                       "expected a unidev.DeviceArray (use DeviceArray.from_numpy)")
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
    """Run `op`. `device`, `shape`, `dtype` are for ops without inputs (fill, zero, arange)."""
    schema = opset.get(op)
    if dtype is not None and "dtype" in schema.attr_names:
        attrs["dtype"] = dtype  # cast and arange take their output dtype as an attribute
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
        dev = first_out.device if first_out is not None else parse_device(device)
        op_dtype = (attrs.get("dtype") or dtype or
                    (first_out.dtype if first_out is not None else "float32"))
        if first_out is not None and shape is None:
            shape = first_out.shape
        if op_dtype not in schema.dtypes:
            raise InvalidArgumentError(f"{op}: dtype {op_dtype}, expected one of "
                                       f"{list(schema.dtypes)}")
        if "dtype" in attrs:
            attrs["dtype"] = op_dtype
    out_shapes, targets = shapes.infer(
        schema, [x.shape if x is not None else None for x in bound], attrs, shape)
    views = [x.broadcast_to(t) if x is not None and t is not None and x.shape != t else x
             for x, t in zip(bound, targets, strict=False)] if targets else bound
    out_dtypes = [_out_dtype(o, op_dtype, attrs) for o in schema.outputs]
    outs = _outputs(op, out, out_shapes, out_dtypes, dev)
    kernel = kernel_for(dev, op, op_dtype)
    if kernel is None:
        raise UnsupportedError(f"{op}: plugin '{dev.plugin}' has no kernel for dtype {op_dtype}")
    attr_list = [(a.name, a.type, attrs[a.name]) for a in schema.attrs]
    kernel(dev.index, [v.descriptor() if v is not None else None for v in views],
           [o.descriptor() for o in outs], attr_list, stream)
    return outs[0] if len(outs) == 1 else tuple(outs)


def _outputs(op, out, out_shapes, out_dtypes, dev) -> list[DeviceArray]:
    if out is None:
        return [DeviceArray.empty(s, d, dev) for s, d in zip(out_shapes, out_dtypes, strict=True)]
    outs = [out] if isinstance(out, DeviceArray) else list(out)
    if len(outs) != len(out_shapes):
        raise InvalidArgumentError(f"{op}: out= has {len(outs)} arrays, expected "
                                   f"{len(out_shapes)}")
    for k, (o, s, d) in enumerate(zip(outs, out_shapes, out_dtypes, strict=True)):
        if o.shape != tuple(s) or o.dtype != d or o.device != dev:
            raise InvalidArgumentError(f"{op}: out[{k}] is {o.shape} {o.dtype} on {o.device}, "
                                       f"expected {tuple(s)} {d} on {dev}")
    return outs


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
