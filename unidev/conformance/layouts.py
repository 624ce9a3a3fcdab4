"""Layout conformance cases (issue 24): layout-sensitive ops on channels-last and other strides."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..contract import opset
from ..core import ops, reference
from ..core.array import DeviceArray
from .cases import _values, tolerance
from .runner import Outcome, _compare

__all__ = ["LAYOUTS", "LayoutCase", "layout_cases", "layout_ops", "place", "run_layout_case"]

# A layout is the memory order of a 4-d [N, C, H, W] tensor's dims (outermost first) and a gap
# after each innermost row (a non-dense view). Activations (x, y, their gradients, a residual)
# take `act`, conv weights (and grad_w) take `weight`:
#   channels_last: dense NHWC activations, weights OHWI (torch's channels_last model);
#   channels_last_hwio: the same activations, weights HWIO (TensorFlow's filters);
#   permuted: dense, N H C W order (neither NCHW nor channels-last: a plugin copies it);
#   gapped: channels-last rows with 3 unused elements after each pixel's channels (a channel
#     slice of a larger tensor: not dense, copied or read in place).
LAYOUTS: dict[str, tuple[tuple[int, ...], int, tuple[int, ...]]] = {
    "channels_last": ((0, 2, 3, 1), 0, (0, 2, 3, 1)),
    "channels_last_hwio": ((0, 2, 3, 1), 0, (2, 3, 1, 0)),
    "permuted": ((0, 2, 1, 3), 0, (0, 2, 1, 3)),
    "gapped": ((0, 2, 3, 1), 3, (0, 1, 2, 3)),
}
_MARGIN = 3  # filler elements before and after every view: odd, so also misaligned
_FILLER = {"f": np.nan, "i": -0x5A5A5A5B}

# (op, configuration id, x shape, attributes); the weight's shape follows the configuration
_CONV = [("3x3-p1-bias", (2, 6, 7, 5), (4, 6, 3, 3), dict(padding=(1, 1)), True),
         ("3x3-s2-g2", (2, 6, 7, 6), (4, 3, 3, 3), dict(stride=(2, 2), groups=2), False),
         ("dw3x3-s2-p1", (2, 6, 8, 7), (6, 1, 3, 3), dict(stride=(2, 2), padding=(1, 1),
                                                        groups=6), True),
         ("1x1", (1, 5, 4, 3), (7, 5, 1, 1), {}, False)]
_POOL = [("k3-s2-p1", (2, 5, 7, 9), dict(kernel_size=(3, 3), stride=(2, 2), padding=(1, 1))),
         ("k2-ceil", (1, 40, 5, 6), dict(kernel_size=(2, 2), stride=(2, 2), ceil_mode=True))]
_ADAPTIVE = [("o1", (2, 5, 7, 6), dict(output_size=(1, 1))),
             ("o3x2", (1, 40, 5, 6), dict(output_size=(3, 2)))]
_BN = [("train", (3, 5, 4, 6), True), ("eval", (2, 40, 3, 5), False)]


@dataclass
class LayoutCase:
    id: str
    inputs: list[np.ndarray | None]
    attrs: dict
    layout: str


def layout_ops() -> list[str]:
    """The op set's layout-sensitive ops: those with a 4-d [N, C, H, W] activation."""
    names = ["conv2d", "conv2d_backward_input", "conv2d_backward_weight", "max_pool2d",
             "max_pool2d_backward", "avg_pool2d", "avg_pool2d_backward", "adaptive_avg_pool2d",
             "adaptive_avg_pool2d_backward", "batch_norm", "batch_norm_backward",
             "conv2d_bias_act"]
    return [n for n in names if n in opset.OPS]


def _is_weight(name: str) -> bool:
    return name in ("weight", "grad_w")


def _configs(op: str, dtype: str, rng) -> list[tuple[str, list, dict]]:
    out = []
    v = lambda shape, slot: _values(rng, shape, dtype, op, slot)  # noqa: E731
    if op.startswith("conv2d"):
        from ..core import shapes

        for cid, xs, ws, attrs, bias in _CONV:
            x, w = v(xs, 0), v(ws, 1)
            geo = {"stride": (1, 1), "padding": (0, 0), "dilation": (1, 1), "groups": 1, **attrs}
            ys = shapes._conv_geometry("conv2d", xs, ws, geo)
            b = v((ws[0],), 2) if bias else None
            if op == "conv2d":
                out.append((cid, [x, w, b], attrs))
            elif op == "conv2d_bias_act":
                out.append((cid + "-res-relu", [x, w, b, v(ys, 3)],
                            dict(attrs, activation="relu")))
            elif op == "conv2d_backward_input":
                out.append((cid, [v(ys, 3), w], dict(attrs, input_shape=xs)))
            else:
                out.append((cid, [v(ys, 3), x], dict(attrs, weight_shape=ws)))
    elif op.startswith(("max_pool2d", "avg_pool2d", "adaptive")):
        base = op.replace("_backward", "")
        for cid, xs, attrs in _ADAPTIVE if op.startswith("adaptive") else _POOL:
            x = v(xs, 0)
            if op == base:
                out.append((cid, [x], attrs))
                continue
            fwd = reference.run(base, [x], dict(attrs))
            extra = [fwd[1]] if base == "max_pool2d" else []
            out.append((cid, [v(fwd[0].shape, 1), x] + extra, attrs))
    else:
        for cid, xs, training in _BN:
            c = xs[1]
            x, w = v(xs, 0) * 1.5 + 3.0, np.asarray(rng.uniform(0.5, 1.5, c), dtype)
            if op == "batch_norm":
                rm = np.asarray(rng.standard_normal(c), dtype)
                rv = np.asarray(rng.uniform(0.5, 2.0, c), dtype)
                out.append((cid, [x, w, v((c,), 2), rm, rv],
                            dict(training=training, momentum=0.1, eps=1e-5)))
            else:
                axes = (0, 2, 3)
                mean = np.asarray(x.mean(axis=axes), dtype)
                invstd = np.asarray(1 / np.sqrt(x.var(axis=axes) + 1e-5), dtype)
                out.append((cid, [v(xs, 1), x, w, mean, invstd], dict(training=training)))
    return out


def layout_cases(op: str, dtype: str, seed: int = 0) -> list[LayoutCase]:
    """Every layout case of (op, dtype), deterministic for a seed."""
    rng = np.random.default_rng(seed + sum(map(ord, "layout" + op + dtype)))
    cases = []
    for cid, inputs, attrs in _configs(op, dtype, rng):
        for layout in LAYOUTS:
            if layout == "channels_last_hwio" and not op.startswith("conv2d"):
                continue
            cases.append(LayoutCase(f"{cid}-{layout}", inputs, attrs, layout))
    return cases


def place(shape: tuple[int, ...], order: tuple[int, ...], gap: int, dtype: np.dtype
          ) -> tuple[np.ndarray, tuple[int, ...], int, np.ndarray]:
    """A filler buffer holding a view of `shape` with dims laid out in `order` (outermost
    first), `gap` unused elements after each innermost run and a margin either side: (buffer,
    element strides, offset, mask of the view's elements in the buffer)."""
    strides = [0] * len(shape)
    step = 1
    for i, d in enumerate(reversed(order)):
        strides[d] = step
        step *= shape[d] + (gap if i == 0 else 0)
    size = max(1, step) if all(shape) else 1
    buf = np.full(size + 2 * _MARGIN, _FILLER[np.dtype(dtype).kind], dtype)
    mask = np.zeros(buf.shape, bool)
    _view(mask, shape, strides, _MARGIN)[...] = True
    return buf, tuple(strides), _MARGIN, mask


def _view(buf: np.ndarray, shape, strides, offset: int) -> np.ndarray:
    item = buf.itemsize
    return np.lib.stride_tricks.as_strided(buf[offset:], shape, [s * item for s in strides])


def _layout_of(name: str, layout: str) -> tuple[tuple[int, ...], int]:
    act, gap, weight = LAYOUTS[layout]
    return (weight, 0) if _is_weight(name) else (act, gap)


def _device(x: np.ndarray, name: str, layout: str, device: str) -> DeviceArray:
    if x.ndim != 4:
        return DeviceArray.from_numpy(np.ascontiguousarray(x), device)
    buf, strides, off, _ = place(x.shape, *_layout_of(name, layout), x.dtype)
    _view(buf, x.shape, strides, off)[...] = x
    return DeviceArray.from_numpy(buf, device).as_strided(x.shape, strides, off)


def run_layout_case(op: str, dtype: str, case: LayoutCase, device: str,
                    plugin_tolerances: dict | None = None) -> Outcome:
    """Run `case` with every 4-d input and output in the case's layout (outputs pre-filled with
    loud values, with margins and gaps that must stay untouched); compare with the reference."""
    schema = opset.get(op)
    host = [None if x is None else np.array(x) for x in case.inputs]
    dev = [None if x is None else _device(x, spec.name, case.layout, device)
           for x, spec in zip(host, schema.inputs, strict=True)]
    want = reference.run(op, host, dict(case.attrs))
    outs, checks = [], []
    for spec, w in zip(schema.outputs, want, strict=True):
        w = np.asarray(w)
        if w.ndim != 4:
            outs.append(DeviceArray.from_numpy(np.full(w.shape, _FILLER[w.dtype.kind], w.dtype),
                                               device))
            continue
        buf, strides, off, mask = place(w.shape, *_layout_of(spec.name, case.layout), w.dtype)
        base = DeviceArray.from_numpy(buf, device)
        outs.append(base.as_strided(w.shape, strides, off))
        checks.append((spec.name, base, buf, mask, strides))
    got = ops.call(op, *dev, out=outs if len(outs) > 1 else outs[0], **case.attrs)
    got = got if isinstance(got, tuple) else (got,)
    rtol, atol = tolerance(schema, dtype, plugin_tolerances)
    pairs = [(o.name, g, w) for o, g, w in zip(schema.outputs, got, want, strict=True)]
    pairs += [(f"{s.name} (updated in place)", d, h) for s, d, h in
              zip(schema.inputs, dev, host, strict=True) if s.mutated and d is not None]
    worst = 0.0
    for name, g, w in pairs:
        res = _compare(name, g.numpy(), np.asarray(w), rtol, atol)
        if not res.ok:
            return Outcome(False, f"{op}[{dtype}] layout case '{case.id}': {res.message}",
                           res.max_diff)
        worst = max(worst, res.max_diff)
    for name, base, before, mask, strides in checks:
        after = base.numpy()
        changed = (after.view(np.uint8).reshape(after.shape + (-1,)) !=
                   before.view(np.uint8).reshape(before.shape + (-1,))).any(axis=-1) & ~mask
        if changed.any():
            pos = int(np.argwhere(changed)[0][0])
            return Outcome(False, f"{op}[{dtype}] layout case '{case.id}': output '{name}' "
                           f"(strides {strides}) wrote {int(changed.sum())} element(s) outside "
                           f"its view, first at buffer element {pos}", float("inf"))
    return Outcome(True, max_diff=worst)
