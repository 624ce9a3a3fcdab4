"""Runs one conformance case on a device and compares it with the numpy reference."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..contract import opset
from ..core import ops, reference
from ..core.array import DeviceArray
from ..core.errors import UnidevError
from .cases import Case, ViewSpec, tolerance

__all__ = ["Outcome", "run_case", "host_view", "device_view"]


@dataclass
class Outcome:
    ok: bool
    message: str = ""
    max_diff: float = 0.0
    at: tuple[int, ...] | None = None  # the output position the message names


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
    if spec.kind in ("stride0", "stride0-inner") and _stride0_dim(x, spec) is not None:
        d = _stride0_dim(x, spec)
        return np.broadcast_to(x[(slice(None),) * d + (slice(0, 1),)], x.shape)
    return x  # contiguous, shifted and gapped hold x itself


def _stride0_dim(x: np.ndarray, spec: ViewSpec) -> int | None:
    d = 0 if spec.kind == "stride0" else x.ndim - 1
    return d if x.ndim >= 1 and x.shape[d] > 1 else None


# what a kernel reads if it reads outside its view: loud values, never a plausible result
_FILLER = {"f": np.nan, "i": -0x5A5A5A5B, "b": True}


def _filler(dtype: np.dtype, n: int) -> np.ndarray:
    return np.full(n, _FILLER[dtype.kind], dtype)


def _gapped_host(x: np.ndarray) -> np.ndarray:
    """A buffer holding x at [..., ::2] of its last dim, other elements filler."""
    shape = x.shape[:-1] + (2 * x.shape[-1],)
    buf = np.empty(shape, x.dtype)
    buf[...] = _filler(x.dtype, 1)[0]
    buf[..., ::2] = x
    return buf


_SHIFT = 3  # elements: odd, so a shifted view is also misaligned for every vector width


def device_view(x: np.ndarray, spec: ViewSpec, device: str) -> DeviceArray:
    """Upload `x` and build on the device the view `spec` names, so the kernel sees strides."""
    if spec.kind == "transposed" and x.ndim >= 2:
        axes = tuple(reversed(range(x.ndim)))
        return DeviceArray.from_numpy(np.ascontiguousarray(x.transpose(axes)), device).transpose(
            *axes)
    if spec.kind == "shifted":
        buf = np.concatenate([_filler(x.dtype, _SHIFT), x.ravel(), _filler(x.dtype, _SHIFT)])
        return DeviceArray.from_numpy(buf, device).as_strided(
            x.shape, _contiguous(x.shape), _SHIFT)
    if spec.kind == "gapped" and x.ndim >= 1:
        base = DeviceArray.from_numpy(_gapped_host(x), device)
        return base[(Ellipsis, slice(None, None, 2))]
    if spec.kind in ("stride0", "stride0-inner"):
        d = _stride0_dim(x, spec)
        if d is not None:
            row = np.ascontiguousarray(x[(slice(None),) * d + (slice(0, 1),)])
            return DeviceArray.from_numpy(row, device).broadcast_to(x.shape)
    base = DeviceArray.from_numpy(x, device)
    if spec.kind == "offset" and x.ndim >= 1 and x.shape[0] > 1:
        return base[x.shape[0] // 2:]
    if spec.kind == "strided" and x.ndim >= 1:
        return base[(Ellipsis, slice(None, None, 2))]
    if spec.kind == "broadcast":
        return base.broadcast_to(spec.shape)
    return base


def _contiguous(shape) -> tuple[int, ...]:
    strides, step = [], 1
    for d in reversed(shape):
        strides.append(step)
        step *= max(int(d), 1)
    return tuple(reversed(strides))


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
                       float(diff[idx]), tuple(int(i) for i in idx))
    g, w = got.astype(np.float64), want.astype(np.float64)
    nan_mismatch = np.isnan(g) != np.isnan(w)
    both = ~(np.isnan(g) | np.isnan(w))
    inf_mismatch = both & (np.isinf(g) | np.isinf(w)) & (g != w)
    with np.errstate(invalid="ignore", over="ignore"):  # inf - inf where both are inf
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
                   f"{tuple(int(i) for i in idx)} got {float(g[idx])!r}, expected "
                   f"{float(w[idx])!r}", max_diff, tuple(int(i) for i in idx))


def run_case(op_name: str, dtype: str, case: Case, device: str,
             plugin_tolerances: dict | None = None) -> Outcome:
    """Run `case` of (op, dtype) on `device`; compare every output and mutated input."""
    try:
        return _run_case(op_name, dtype, case, device, plugin_tolerances)
    except UnidevError as exc:
        return Outcome(False, f"{op_name}[{dtype}] case '{case.id}': the call raised "
                       f"{type(exc).__name__}: {exc}", float("inf"))


@dataclass
class _Gaps:
    """An output view inside a larger allocation: the elements around it must stay untouched."""

    name: str
    base: DeviceArray
    before: np.ndarray
    mask: np.ndarray  # True where the view is


def _view_outputs(schema: opset.OpSchema, dtype: str, dev_in: list, case: Case, kwargs: dict,
                  device: str) -> tuple[list[DeviceArray], list[_Gaps]]:
    """Outputs allocated as the views case.out_view names (transposed, shifted: at an odd
    element offset, gapped: last-dim stride 2), pre-filled with loud values, so the kernel must
    honour output strides and offsets and write every element of the view and nothing else."""
    from ..core import shapes

    attrs = ops.normalize_attrs(schema, dict(case.attrs))
    out_shapes, _ = shapes.infer(schema, [x.shape if x is not None else None for x in dev_in],
                                 attrs, kwargs.get("shape"))
    outs, gaps = [], []
    specs = list(schema.outputs)
    if specs and specs[-1].variadic:  # as many as the op's attributes make (a program's writes)
        specs = specs[:-1] + [specs[-1]] * (len(out_shapes) - len(specs) + 1)
    for o, shp in zip(specs, out_shapes, strict=True):
        dt = np.dtype(dtype_of(o, dtype, attrs))
        n = int(np.prod(shp))
        kind = case.out_view
        if kind == "transposed" and len(shp) >= 2:
            host = _filler(dt, n).reshape(tuple(reversed(shp)))
            outs.append(DeviceArray.from_numpy(host, device).T)
            continue
        if kind == "gapped" and len(shp) >= 1:
            host = _gapped_host(np.empty(shp, dt))
            mask = np.zeros(host.shape, bool)
            mask[..., ::2] = True
            base = DeviceArray.from_numpy(host, device)
            view = base[(Ellipsis, slice(None, None, 2))]
        else:  # shifted (and what cannot be transposed or gapped: 0-d, 1-d)
            host = _filler(dt, n + 2 * _SHIFT)
            mask = np.zeros(host.shape, bool)
            mask[_SHIFT:_SHIFT + n] = True
            base = DeviceArray.from_numpy(host, device)
            view = base.as_strided(shp, _contiguous(shp), _SHIFT)
        outs.append(view)
        gaps.append(_Gaps(o.name, base, host, mask))
    return outs, gaps


def _check_gaps(gaps: list[_Gaps]) -> str | None:
    for g in gaps:
        after = g.base.numpy()
        changed = (after.view(np.uint8).reshape(after.shape + (-1,)) !=
                   g.before.view(np.uint8).reshape(g.before.shape + (-1,))).any(axis=-1)
        changed &= ~g.mask
        if changed.any():
            pos = tuple(int(i) for i in np.argwhere(changed)[0])
            return (f"output '{g.name}': wrote {int(changed.sum())} element(s) outside its "
                    f"view (strided/offset output); first at buffer position {pos}: "
                    f"{after[pos]!r}, the buffer held {g.before[pos]!r}")
    return None


def dtype_of(o: opset.Output, op_dtype: str, attrs: dict) -> str:
    if o.dtype == "same":
        return op_dtype
    return attrs[o.dtype[5:]] if o.dtype.startswith("attr:") else o.dtype


def _inputs_at(schema: opset.OpSchema, host_in: list, shape: tuple, at) -> str:
    """For elementwise ops: the input values at the failing position."""
    if at is None or not schema.broadcast or len(shape) != len(at):
        return ""
    parts = []
    for spec, x in zip(schema.inputs, host_in, strict=False):
        if x is None:
            continue
        try:
            v = np.broadcast_to(x, shape)[at]
        except ValueError:
            return ""
        parts.append(f"{spec.name}={v.item()!r}")
    return f" (inputs there: {', '.join(parts)})" if parts else ""


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
    gaps: list[_Gaps] = []
    if case.out_view in ("transposed", "shifted", "gapped"):
        kwargs["out"], gaps = _view_outputs(schema, dtype, dev_in, case, kwargs, device)
    elif case.out_view == "input0":
        kwargs["out"] = dev_in[0]
    if schema.inputs and schema.inputs[0].variadic:
        got = ops.call(op_name, list(dev_in), **kwargs)
    else:
        got = ops.call(op_name, *dev_in, **kwargs)
    got = got if isinstance(got, tuple) else (got,)
    rtol, atol = tolerance(schema, dtype, plugin_tolerances, case.attrs)
    worst = 0.0
    names = [o.name for o in schema.outputs]
    if schema.outputs and schema.outputs[-1].variadic:
        names = names[:-1] + [f"{names[-1]}[{k}]" for k in range(len(want) - len(names) + 1)]
    pairs = list(zip(names, got, want, strict=True))
    for spec, d, h in zip(schema.inputs, dev_in, host_in, strict=False):
        if spec.mutated and d is not None:
            pairs.append((f"{spec.name} (updated in place)", d, h))
    for name, g, w in pairs:
        res = _compare(name, g.numpy(), np.asarray(w), rtol, atol)
        if not res.ok:
            return Outcome(False, f"{op_name}[{dtype}] case '{case.id}': {res.message}"
                           f"{_inputs_at(schema, host_in, np.shape(w), res.at)}", res.max_diff)
        worst = max(worst, res.max_diff)
    bad = _check_gaps(gaps)
    if bad:
        return Outcome(False, f"{op_name}[{dtype}] case '{case.id}': {bad}", float("inf"))
    return Outcome(True, max_diff=worst)
