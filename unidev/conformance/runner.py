"""Runs one conformance case on a device and compares it with the numpy reference."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..core import ops, opset, reference
from ..core.array import DeviceArray
from ..core.errors import UnidevError
from .cases import Case, ViewSpec, tolerance

__all__ = ["Outcome", "run_case", "host_view", "device_view"]


@dataclass
class Outcome:
    ok: bool
    message: str = ""
    max_diff: float = 0.0


def host_view(x: np.ndarray, spec: ViewSpec) -> np.ndarray:
    """The numpy array a ViewSpec denotes (what the reference sees)."""
    if spec.kind == "transposed" and x.ndim >= 2:
        return x  # the device holds x.T contiguous and transposes it back
    if spec.kind == "offset" and x.ndim >= 1 and x.shape[0] > 1:
        return x[x.shape[0] // 2:]
    if spec.kind == "strided" and x.ndim >= 1:
        return x[..., ::2]
    if spec.kind == "broadcast":
        return np.broadcast_to(x, spec.shape)
    return x


def device_view(x: np.ndarray, spec: ViewSpec, device: str) -> DeviceArray:
    """Upload `x` and build on the device the view `spec` names, so the kernel sees strides."""
    if spec.kind == "transposed" and x.ndim >= 2:
        axes = tuple(reversed(range(x.ndim)))
        return DeviceArray.from_numpy(np.ascontiguousarray(x.transpose(axes)), device).transpose(
            *axes)
    base = DeviceArray.from_numpy(x, device)
    if spec.kind == "offset" and x.ndim >= 1 and x.shape[0] > 1:
        return base[x.shape[0] // 2:]
    if spec.kind == "strided" and x.ndim >= 1:
        return base[(Ellipsis, slice(None, None, 2))]
    if spec.kind == "broadcast":
        return base.broadcast_to(spec.shape)
    return base


def _compare(name: str, got: np.ndarray, want: np.ndarray, rtol: float, atol: float) -> Outcome:
    if got.shape != want.shape:
        return Outcome(False, f"output '{name}' has shape {got.shape}, expected {want.shape}")
    if got.dtype != want.dtype:
        return Outcome(False, f"output '{name}' has dtype {got.dtype}, expected {want.dtype}")
    if got.size == 0:
        return Outcome(True)
    if got.dtype.kind in "biu":
        bad = got != want
        if not bad.any():
            return Outcome(True)
        diff = np.abs(got.astype(np.float64) - want.astype(np.float64))
        idx = np.unravel_index(np.argmax(diff), got.shape)
        n = int(bad.sum())
        return Outcome(False, f"output '{name}': {n} of {got.size} elements differ (exact "
                       f"match required); largest |diff| {diff[idx]:.3g} at "
                       f"{tuple(int(i) for i in idx)}: got {got[idx]}, expected {want[idx]}",
                       float(diff[idx]))
    g, w = got.astype(np.float64), want.astype(np.float64)
    nan_mismatch = np.isnan(g) != np.isnan(w)
    both = ~(np.isnan(g) | np.isnan(w))
    inf_mismatch = both & (np.isinf(g) | np.isinf(w)) & (g != w)
    diff = np.where(both & ~np.isinf(w), np.abs(g - w), 0.0)
    limit = atol + rtol * np.abs(np.where(both, w, 0.0))
    bad = nan_mismatch | inf_mismatch | (diff > limit)
    max_diff = float(diff.max()) if diff.size else 0.0
    if not bad.any():
        return Outcome(True, max_diff=max_diff)
    idx = np.unravel_index(np.argmax(np.where(bad, diff + nan_mismatch + inf_mismatch, -1)),
                           got.shape)
    return Outcome(False, f"output '{name}': {int(bad.sum())} of {got.size} elements outside "
                   f"rtol={rtol:g} atol={atol:g}; largest |diff| {max_diff:.3g}; at "
                   f"{tuple(int(i) for i in idx)} got {g[idx]!r}, expected {w[idx]!r}", max_diff)


def run_case(op_name: str, dtype: str, case: Case, device: str,
             plugin_tolerances: dict | None = None) -> Outcome:
    """Run `case` of (op, dtype) on `device`; compare every output and mutated input."""
    try:
        return _run_case(op_name, dtype, case, device, plugin_tolerances)
    except UnidevError as exc:
        return Outcome(False, f"{op_name}[{dtype}] case '{case.id}': the call raised "
                       f"{type(exc).__name__}: {exc}", float("inf"))


def _transposed_outputs(schema: opset.OpSchema, dev_in: list, case: Case, kwargs: dict,
                        device: str) -> list[DeviceArray]:
    """Outputs allocated as transposed views, so the kernel must honour output strides."""
    from ..core import shapes

    attrs = ops.normalize_attrs(schema, dict(case.attrs))
    out_shapes, _ = shapes.infer(schema, [x.shape if x is not None else None for x in dev_in],
                                 attrs, kwargs.get("shape"))
    outs = []
    for o, shp in zip(schema.outputs, out_shapes, strict=True):
        dt = dtype_of(o, dev_in[0].dtype, attrs)
        outs.append(DeviceArray.empty(tuple(reversed(shp)), dt, device).T)
    return outs


def dtype_of(o: opset.Output, op_dtype: str, attrs: dict) -> str:
    if o.dtype == "same":
        return op_dtype
    return attrs[o.dtype[5:]] if o.dtype.startswith("attr:") else o.dtype


def _run_case(op_name: str, dtype: str, case: Case, device: str,
              plugin_tolerances: dict | None) -> Outcome:
    schema = opset.get(op_name)
    views = case.views or [ViewSpec()] * len(case.inputs)
    host_in = [None if x is None else np.array(host_view(x, v)) for x, v in zip(
        case.inputs, views, strict=True)]
    dev_in = [None if x is None else device_view(x, v, device) for x, v in zip(
        case.inputs, views, strict=True)]
    ref_out = None
    if not schema.inputs and schema.outputs[0].dtype == "same":
        ref_out = [np.empty(case.shape, case.dtype)]  # fill/zero take shape and dtype from out
    want = reference.run(op_name, host_in, dict(case.attrs), out=ref_out)
    kwargs = dict(case.attrs)
    if not schema.inputs:
        kwargs.update(device=device, shape=case.shape, dtype=case.dtype)
        if case.shape is None:
            kwargs.pop("shape")
            kwargs["shape"] = want[0].shape
    if case.out_view == "transposed":
        kwargs["out"] = _transposed_outputs(schema, dev_in, case, kwargs, device)
    elif case.out_view == "input0":
        kwargs["out"] = dev_in[0]
    if schema.inputs and schema.inputs[0].variadic:
        got = ops.call(op_name, list(dev_in), **kwargs)
    else:
        got = ops.call(op_name, *dev_in, **kwargs)
    got = got if isinstance(got, tuple) else (got,)
    rtol, atol = tolerance(schema, dtype, plugin_tolerances)
    worst = 0.0
    names = [o.name for o in schema.outputs]
    pairs = list(zip(names, got, want, strict=True))
    for spec, d, h in zip(schema.inputs, dev_in, host_in, strict=False):
        if spec.mutated and d is not None:
            pairs.append((f"{spec.name} (updated in place)", d, h))
    for name, g, w in pairs:
        res = _compare(name, g.numpy(), np.asarray(w), rtol, atol)
        if not res.ok:
            return Outcome(False, f"{op_name}[{dtype}] case '{case.id}': {res.message}",
                           res.max_diff)
        worst = max(worst, res.max_diff)
    return Outcome(True, max_diff=worst)
