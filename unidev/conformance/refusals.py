"""Values a kernel must refuse, found from the op set and the reference: attributes the dtype
cannot represent (an integer fill of nan, an integer add with alpha 0.5) and out-of-range indices.

Every float attribute of every op and dtype is tried with values no integer holds, and every
index input (an input of a fixed integer dtype: targets, pooling indices) with -1, the first
out-of-range value and 2^40, written at its last element. Where the reference refuses
(InvalidArgumentError), the plugin's kernel, called directly as the adapters call it, must
refuse too: the call or the next synchronize raises an invalid-argument error.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

from ..contract import dtypes, opset
from ..core import reference
from ..core.errors import InvalidArgumentError
from . import cases

__all__ = ["Refusal", "refusals_for", "ATTR_VALUES"]

# values outside every integer dtype, non-integral, or just past int32 / int64
ATTR_VALUES = (math.nan, math.inf, -math.inf, 1e20, -1e20, 0.5, -2.5, 2.0**31, 2.0**63)


@dataclass
class Refusal:
    name: str  # "<attr>=<value>" or "<input>[-1]=<value>"
    inputs: list[np.ndarray | None]
    attrs: dict
    shape: tuple[int, ...] | None  # the output shape of an op without inputs
    what: str  # the call described for messages


def _template(op: opset.OpSchema, dtype: str) -> cases.Case | None:
    """The op's first plain case with non-empty inputs (or output)."""
    for c in cases.cases_for(op.name, dtype):
        if c.out_view != "contiguous" or any(v.kind != "contiguous" for v in c.views):
            continue
        present = [x for x in c.inputs if x is not None]
        if not op.inputs:
            n = math.prod(c.shape) if c.shape is not None else _arange_len(c.attrs)
            if 0 < n <= 64:
                return c
            continue
        if present and all(0 < x.size <= 4096 for x in present):
            return c
    return None


def _arange_len(attrs: dict) -> int:
    return max(0, math.ceil((attrs["stop"] - attrs["start"]) / attrs["step"]))


def _refused(op: opset.OpSchema, dtype: str, inputs: list, attrs: dict,
             shape: tuple[int, ...] | None) -> bool:
    if not op.inputs:  # the output size may come from the attributes (arange): bound it first
        from ..core import ops, shapes

        try:
            size = math.prod(shapes.infer(op, [], ops.normalize_attrs(op, dict(attrs)),
                                          shape or (4,))[0][0])
        except InvalidArgumentError:
            return True
        if size > 1 << 16:
            return False
    out = None
    if not op.inputs and op.outputs[0].dtype == "same":
        out = [np.empty(shape or (4,), dtypes.to_numpy(dtype))]
    try:
        reference.run(op.name, inputs, attrs, out=out)
    except InvalidArgumentError:
        return True
    except (ValueError, MemoryError, OverflowError):
        return False  # e.g. an arange too long to build: not a refusal the op set defines
    return False


def _fmt(v: float | int) -> str:
    """Short names for case ids: 2^31 rather than 2147483648.0, -1 rather than -1.0."""
    if isinstance(v, float) and not math.isfinite(v):
        return repr(v)
    if v == int(v):
        n = abs(int(v))
        if n >= 2**31 and n & (n - 1) == 0:
            return ("-" if v < 0 else "") + f"2^{n.bit_length() - 1}"
        if abs(v) < 1e15:
            return str(int(v))
    return repr(v)


def _attr_refusals(op: opset.OpSchema, dtype: str, tpl: cases.Case) -> list[Refusal]:
    out = []
    for a in op.attrs:
        if a.type != "float":
            continue
        for v in ATTR_VALUES:
            attrs = dict(tpl.attrs, **{a.name: v})
            if op.name == "arange" and "dtype" in attrs:
                attrs["dtype"] = dtype
            if _refused(op, dtype, list(tpl.inputs), attrs, tpl.shape):
                out.append(Refusal(f"{a.name}={_fmt(v)}", list(tpl.inputs), attrs, tpl.shape,
                                   f"{op.name}[{dtype}]({a.name}={v!r})"))
    return out


def _index_refusals(op: opset.OpSchema, dtype: str, tpl: cases.Case) -> list[Refusal]:
    out = []
    dims = sorted({d for x in tpl.inputs if x is not None for d in x.shape} |
                  {math.prod(x.shape[i:j]) for x in tpl.inputs if x is not None
                   for i, j in itertools.combinations(range(x.ndim + 1), 2)})
    for slot, spec in enumerate(op.inputs):
        x = tpl.inputs[slot] if slot < len(tpl.inputs) else None
        if spec.dtypes == "same" or not set(spec.dtypes) <= set(dtypes.INT) or x is None:
            continue
        found: list[int] = []
        for v in [-1] + [d for d in dims if d > 0] + [2**40]:
            if v > 0 and v != 2**40 and any(f > 0 for f in found):
                continue  # the first positive value refused is the bound; one past is enough
            bad = np.array(x)
            bad.reshape(-1)[-1] = v
            ins = list(tpl.inputs)
            ins[slot] = bad
            if _refused(op, dtype, ins, dict(tpl.attrs), tpl.shape):
                found.append(v)
                out.append(Refusal(f"{spec.name}[-1]={_fmt(v)}", ins, dict(tpl.attrs),
                                   tpl.shape, f"{op.name}[{dtype}] with {spec.name}[-1] = {v}"))
    return out


def refusals_for(op_name: str, dtype: str) -> list[Refusal]:
    """Every refusal case of (op, dtype), deterministic."""
    op = opset.get(op_name)
    tpl = _template(op, dtype)
    if tpl is None:
        return []
    return _attr_refusals(op, dtype, tpl) + _index_refusals(op, dtype, tpl)
