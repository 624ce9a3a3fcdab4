"""Numpy reference implementation of every op in the op set, matching torch CPU semantics."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..contract import dtypes, opset
from .errors import InvalidArgumentError

__all__ = ["run", "KERNELS"]

_Invalid = InvalidArgumentError

_erf_obj = np.frompyfunc(math.erf, 1, 1)  # numpy has no erf; math.erf is exact to double precision


def _erf(x: np.ndarray) -> np.ndarray:
    return np.asarray(_erf_obj(x), dtype=np.float64)


class _Bad(InvalidArgumentError):
    """A bad argument found inside a kernel; run() prefixes the op name."""


# ------------------------------------------------------------------------------------------------
# helpers
# ------------------------------------------------------------------------------------------------

def _f64(x: np.ndarray) -> np.ndarray:
    return np.asarray(x, dtype=np.float64)


def _wide(x: np.ndarray) -> np.ndarray:
    """Accumulation type: float64 for floats, int64 for ints (wraps like the narrow type once
    cast back), bool unchanged."""
    kind = x.dtype.kind
    if kind == "f":
        return x.astype(np.float64, copy=False)
    if kind in "iu":
        return x.astype(np.int64, copy=False)
    return x


def _scalar_as(value: float, dtype: np.dtype, what: str) -> Any:
    """Convert a float attribute to `dtype` the way torch does (truncation; range-checked)."""
    if dtype.kind == "b":
        return bool(value != 0)
    if dtype.kind in "iu":
        if not math.isfinite(value):
            raise _Bad(f"{what}: {value} cannot be converted to {dtype.name}")
        v = math.trunc(value)
        info = np.iinfo(dtype)
        if not info.min <= v <= info.max:
            raise _Bad(f"{what}: {value} overflows {dtype.name}")
        return dtype.type(v)
    return dtype.type(value)


def _axis(axis: int, ndim: int, what: str = "axis") -> int:
    """Normalize one axis; a 0-d tensor accepts 0 and -1 like torch."""
    n = max(ndim, 1)
    if not -n <= axis < n:
        raise _Bad(f"{what}: {axis} is out of range for a {ndim}-d input (expected "
                   f"{-n} <= {what} < {n})")
    return axis % n


def _reduce_axes(axes: tuple[int, ...], ndim: int) -> tuple[int, ...] | None:
    """None means all axes."""
    norm = tuple(_axis(a, ndim, "axes") for a in axes)
    if len(set(norm)) != len(norm):
        raise _Bad(f"axes: {axes} names an axis twice")
    if not norm or ndim == 0:
        return None
    return norm


def _ints(values: tuple[int, ...], n: int, what: str, lo: int) -> tuple[int, ...]:
    if n == 2 and len(values) == 1:  # one value serves both spatial dims, as in torch
        values = tuple(values) * 2
    if len(values) != n or any(v < lo for v in values):
        raise _Bad(f"{what}: expected {n} ints each >= {lo}, got {tuple(values)}")
    return tuple(values)


def _need_ndim(x: np.ndarray, ndim: int, what: str, layout: str) -> None:
    if x.ndim != ndim:
        raise _Bad(f"{what}: expected a {ndim}-d tensor {layout}, got shape {x.shape}")


def _need_shape(x: np.ndarray, shape: tuple[int, ...], what: str) -> None:
    if tuple(x.shape) != tuple(shape):
        raise _Bad(f"{what}: expected shape {tuple(shape)}, got {x.shape}")


def _channel_vec(v: np.ndarray | None, c: int, what: str) -> None:
    if v is not None and v.shape != (c,):
        raise _Bad(f"{what}: expected shape ({c},), got {v.shape}")


# ------------------------------------------------------------------------------------------------
# tier 0: memory
# ------------------------------------------------------------------------------------------------

def _copy(x: np.ndarray) -> np.ndarray:
    return np.array(x, copy=True)


def _fill(*, value: float, like: np.ndarray) -> np.ndarray:
    return np.full(like.shape, _scalar_as(value, like.dtype, "value"), like.dtype)


def _zero(*, like: np.ndarray) -> np.ndarray:
    return np.zeros(like.shape, like.dtype)


def _cast(x: np.ndarray, *, dtype: str) -> np.ndarray:
    return x.astype(np.dtype(dtype))


def _arange(*, start: float, stop: float, step: float, dtype: str) -> np.ndarray:
    dt = np.dtype(dtype)
    if not all(math.isfinite(v) for v in (start, stop, step)):
        raise _Bad(f"start/stop/step must be finite, got {start}, {stop}, {step}")
    if step == 0:
        raise _Bad("step: must be nonzero")
    n = max(0, math.ceil((stop - start) / step))
    if n and dt.kind in "iu":  # the first and last values must fit (int32 from 3e9: refused)
        _scalar_as(start, dt, "start")
        _scalar_as(start + (n - 1) * step, dt, "start + (n - 1) * step")
    # computed in double and converted like a C cast; torch differs only for non-integral
    # bounds with integer dtypes (it truncates start and step first)
    y = start + np.arange(n, dtype=np.float64) * step
    return np.trunc(y).astype(np.int64) if dt.kind in "iu" else y


# ------------------------------------------------------------------------------------------------
# tier 1: elementwise
# ------------------------------------------------------------------------------------------------

def _float_unary(fn: Callable[[np.ndarray], np.ndarray]) -> Callable[..., np.ndarray]:
    return lambda x: fn(_f64(x))


def _sign(x: np.ndarray) -> np.ndarray:
    # torch: (0 < x) - (x < 0), so nan gives 0
    return (x > 0).astype(x.dtype) - (x < 0).astype(x.dtype)


def _gelu_tanh_parts(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    k = math.sqrt(2.0 / math.pi)
    return np.tanh(k * (x + 0.044715 * x**3)), k * (1.0 + 3 * 0.044715 * x**2)


def _gelu(x: np.ndarray, *, approximate: str) -> np.ndarray:
    x = _f64(x)
    if approximate == "tanh":
        return 0.5 * x * (1.0 + _gelu_tanh_parts(x)[0])
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


def _gelu_backward(grad: np.ndarray, x: np.ndarray, *, approximate: str) -> np.ndarray:
    x = _f64(x)
    if approximate == "tanh":
        t, du = _gelu_tanh_parts(x)
        d = 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * du
    else:
        cdf = 0.5 * (1.0 + _erf(x / math.sqrt(2.0)))
        d = cdf + x * np.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)
    return _f64(grad) * d


def _alpha(alpha: float, x: np.ndarray) -> float | int:
    if x.dtype.kind in "iu":
        if not float(alpha).is_integer():
            raise _Bad(f"alpha: must be integral for {x.dtype.name} inputs, got {alpha}")
        return int(_scalar_as(alpha, x.dtype, "alpha"))  # and in the dtype's range
    return alpha


def _add(x: np.ndarray, y: np.ndarray, *, alpha: float) -> np.ndarray:
    return _wide(x) + np.int64(_alpha(alpha, x)) * _wide(y) if x.dtype.kind in "iu" \
        else _f64(x) + alpha * _f64(y)


def _sub(x: np.ndarray, y: np.ndarray, *, alpha: float) -> np.ndarray:
    # alpha itself is checked (-alpha of int32's minimum would not fit)
    return _wide(x) - np.int64(_alpha(alpha, x)) * _wide(y) if x.dtype.kind in "iu" \
        else _f64(x) - alpha * _f64(y)


def _mul(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return _wide(x) * _wide(y)


def _logical(fn: Callable) -> Callable[..., np.ndarray]:
    return lambda x, y: fn(x != 0, y != 0)


def _where(x: np.ndarray, y: np.ndarray, cond: np.ndarray) -> np.ndarray:
    return np.where(cond, x, y)


def _threshold_backward(grad: np.ndarray, x: np.ndarray, *, threshold: float) -> np.ndarray:
    # torch zeroes where x <= threshold, so a nan x passes grad through
    return np.where(_wide(x) <= threshold, 0, grad)


# ------------------------------------------------------------------------------------------------
# tier 3: elementwise (torch CPU's formulas, in float64; floor_divide and remainder in the dtype,
# as torch computes them)
# ------------------------------------------------------------------------------------------------

# softplus and its backward in the dtype: torch's e^(beta x) overflows float32 where float64's
# would not (x past 88.7 with a threshold above it gives inf, and nan in the backward)
def _softplus(x: np.ndarray, *, beta: float, threshold: float) -> np.ndarray:
    b = x.dtype.type(beta)
    return np.where(x * b > threshold, x, np.log1p(np.exp(x * b)) / b)


def _elu(x: np.ndarray, *, alpha: float, scale: float, input_scale: float) -> np.ndarray:
    x = _f64(x)
    return np.where(x <= 0, np.expm1(x * input_scale) * alpha * scale, x * scale)


def _clamp(x: np.ndarray, *, min: float, max: float) -> np.ndarray:  # noqa: A002 (op set names)
    x = _f64(x)
    r = np.where(x < min, min, x)
    r = np.where(r > max, max, r)
    return np.full_like(r, np.nan) if math.isnan(min) or math.isnan(max) else r  # as torch


def _torch_mod(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    mod = np.fmod(x, y)
    return mod, (mod != 0) & ((y < 0) != (mod < 0))


def _remainder(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    mod, fix = _torch_mod(x, y)
    return np.where(fix, mod + y, mod)


def _floor_divide(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    mod, fix = _torch_mod(x, y)
    div = (x - mod) / y
    div = np.where(fix, div - x.dtype.type(1), div)
    fl = np.floor(div)
    fl = np.where(div - fl > 0.5, fl + x.dtype.type(1), fl)
    fl = np.where(div != 0, fl, np.copysign(x.dtype.type(0), x / y))
    return np.where(y == 0, x / y, fl)


def _xlogy(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    x, y = _f64(x), _f64(y)
    return np.where(np.isnan(y), np.nan, np.where(x == 0, 0.0, x * np.log(y)))


def _sig(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def _mish_backward(grad: np.ndarray, x: np.ndarray) -> np.ndarray:
    x = _f64(x)
    t = np.tanh(np.log1p(np.exp(x)))
    return _f64(grad) * (t + x * _sig(x) * (1.0 - t * t))


def _log_sigmoid_backward(grad: np.ndarray, x: np.ndarray) -> np.ndarray:
    x = _f64(x)
    z = np.exp(-np.abs(x))
    neg = x < 0
    return _f64(grad) * (np.where(neg, 1.0, 0.0) - np.where(neg, 1.0, -1.0) * (z / (1.0 + z)))


def _softplus_backward(grad: np.ndarray, x: np.ndarray, *, beta: float,
                       threshold: float) -> np.ndarray:
    b = x.dtype.type(beta)
    z = np.exp(x * b)
    return np.where(x * b > threshold, grad, grad * z / (z + 1))


def _elu_backward(grad: np.ndarray, x: np.ndarray, *, alpha: float, scale: float,
                  input_scale: float, is_result: bool) -> np.ndarray:
    g, x = _f64(grad), _f64(x)
    neg = g * input_scale * (x + alpha * scale) if is_result \
        else g * input_scale * alpha * scale * np.exp(x * input_scale)
    return np.where(x <= 0, neg, g * scale)


def _hardsigmoid(x: np.ndarray) -> np.ndarray:
    t = _f64(x) + 3.0
    t = np.where(t < 0, 0.0, t)
    return np.where(t > 6, 6.0, t) / 6.0


_TIER3: dict[str, Callable[..., Any]] = {
    "log1p": _float_unary(np.log1p),
    "expm1": _float_unary(np.expm1),
    "silu": _float_unary(lambda x: x / (1.0 + np.exp(-x))),
    "softplus": _softplus,
    "elu": _elu,
    "leaky_relu": lambda x, *, negative_slope: np.where(_f64(x) > 0, _f64(x),
                                                        _f64(x) * negative_slope),
    "hardswish": lambda x: _f64(x) * _hardsigmoid(x),
    "hardsigmoid": _hardsigmoid,
    "mish": _float_unary(lambda x: x * np.tanh(np.log1p(np.exp(x)))),
    "log_sigmoid": _float_unary(lambda x: np.minimum(x, 0.0) - np.log1p(np.exp(-np.abs(x)))),
    "clamp": _clamp,
    "isnan": lambda x: np.isnan(x) if x.dtype.kind == "f" else np.zeros(x.shape, bool),
    "isinf": lambda x: np.isinf(x) if x.dtype.kind == "f" else np.zeros(x.shape, bool),
    "floor_divide": _floor_divide,
    "remainder": _remainder,
    "xlogy": _xlogy,
    "silu_backward": lambda grad, x: _f64(grad) * _sig(_f64(x)) * (
        1.0 + _f64(x) * (1.0 - _sig(_f64(x)))),
    "hardswish_backward": lambda grad, x: np.where(
        _f64(x) < -3, 0.0, np.where(_f64(x) <= 3, _f64(grad) * (_f64(x) / 3.0 + 0.5),
                                    _f64(grad))),
    "hardsigmoid_backward": lambda grad, x: np.where((_f64(x) > -3) & (_f64(x) < 3),
                                                     _f64(grad) / 6.0, 0.0),
    "mish_backward": _mish_backward,
    "log_sigmoid_backward": _log_sigmoid_backward,
    "leaky_relu_backward": lambda grad, x, *, negative_slope: np.where(
        _f64(x) > 0, _f64(grad), _f64(grad) * negative_slope),
    "softplus_backward": _softplus_backward,
    "elu_backward": _elu_backward,
}


# ------------------------------------------------------------------------------------------------
# tier 1: reductions and matrix products
# ------------------------------------------------------------------------------------------------

def _reduction(fn: Callable, widen: Callable) -> Callable[..., np.ndarray]:
    def reduce(x: np.ndarray, *, axes: tuple[int, ...], keepdims: bool) -> np.ndarray:
        return fn(widen(x), axis=_reduce_axes(axes, x.ndim), keepdims=keepdims)
    return reduce


def _mean(x: np.ndarray, axis: tuple[int, ...] | None = None, keepdims: bool = False) -> np.ndarray:
    # sum / count: np.mean warns on empty input, where the answer is simply nan
    count = x.size if axis is None else math.prod(x.shape[a] for a in axis)
    return np.sum(x, axis=axis, keepdims=keepdims) / count


def _check_nonempty(x: np.ndarray, axes: tuple[int, ...] | None) -> None:
    extents = x.shape if axes is None else [x.shape[a] for a in axes]
    if 0 in extents:
        raise _Bad(f"x: cannot reduce over an empty axis (shape {x.shape}, axes "
                   f"{'all' if axes is None else axes})")


def _extreme(fn: Callable) -> Callable[..., np.ndarray]:
    def reduce(x: np.ndarray, *, axes: tuple[int, ...], keepdims: bool) -> np.ndarray:
        ax = _reduce_axes(axes, x.ndim)
        _check_nonempty(x, ax)
        return fn(x, axis=ax, keepdims=keepdims)  # np.max/np.min propagate nan
    return reduce


def _arg(fn: Callable) -> Callable[..., np.ndarray]:
    def reduce(x: np.ndarray, *, axes: tuple[int, ...], keepdims: bool) -> np.ndarray:
        if len(axes) > 1:
            raise _Bad(f"axes: expected at most one axis, got {axes}")
        ax = _reduce_axes(axes, x.ndim)
        _check_nonempty(x, ax)
        if x.ndim == 0:
            return np.zeros((), np.int64)
        # numpy's argmax/argmin return the first extreme and treat nan as the extreme, like torch
        return fn(x, axis=None if ax is None else ax[0], keepdims=keepdims)
    return reduce


def _matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.ndim < 2 or b.ndim < 2:
        raise _Bad(f"a, b: expected ndim >= 2, got shapes {a.shape} and {b.shape}")
    if a.shape[-1] != b.shape[-2]:
        raise _Bad(f"b: inner dimensions differ: a {a.shape}, b {b.shape}")
    try:
        batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    except ValueError:
        raise _Bad(f"a, b: batch dims {a.shape[:-2]} and {b.shape[:-2]} do not "
                   "broadcast") from None
    out = np.empty(batch + (a.shape[-2], b.shape[-1]), np.float64)
    return np.matmul(_f64(a), _f64(b), out=out)


def _gemm(a: np.ndarray, b: np.ndarray, c: np.ndarray | None, *, alpha: float,
          beta: float) -> np.ndarray:
    _need_ndim(a, 2, "a", "[M, K]")
    _need_ndim(b, 2, "b", "[K, N]")
    if a.shape[1] != b.shape[0]:
        raise _Bad(f"b: expected {a.shape[1]} rows to match a {a.shape}, got {b.shape}")
    out = alpha * (_f64(a) @ _f64(b))
    if c is not None:
        try:
            cb = np.broadcast_to(_f64(c), out.shape)
        except ValueError:
            raise _Bad(f"c: shape {c.shape} does not broadcast to {out.shape}") from None
        if beta != 0:  # torch's addmm ignores c (and its nan/inf) when beta is 0
            out = out + beta * cb
    return out


# ------------------------------------------------------------------------------------------------
# tier 2: convolution
# ------------------------------------------------------------------------------------------------

class _Conv:
    """Geometry of one conv2d; every method loops over the R*S taps and does one batched
    matmul per tap, so no full im2col buffer is ever built."""

    def __init__(self, x_shape: Sequence[int], w_shape: Sequence[int], stride: tuple,
                 padding: tuple, dilation: tuple, groups: int) -> None:
        self.n, self.c, self.h, self.w = x_shape
        self.k, self.cg, self.r, self.s = w_shape
        self.sh, self.sw = _ints(stride, 2, "stride", 1)
        self.ph, self.pw = _ints(padding, 2, "padding", 0)
        self.dh, self.dw = _ints(dilation, 2, "dilation", 1)
        if groups < 1 or self.c % groups or self.k % groups:
            raise _Bad(f"groups: {groups} must be >= 1 and divide channels C={self.c} and "
                       f"K={self.k}")
        if self.cg * groups != self.c:
            raise _Bad(f"weight: expected C/groups = {self.c // groups} input channels, got "
                       f"shape {tuple(w_shape)}")
        self.g, self.kg = groups, self.k // groups
        self.oh = (self.h + 2 * self.ph - self.dh * (self.r - 1) - 1) // self.sh + 1
        self.ow = (self.w + 2 * self.pw - self.dw * (self.s - 1) - 1) // self.sw + 1
        if self.oh < 1 or self.ow < 1:
            raise _Bad(f"x: input {tuple(x_shape)} is too small for the dilated kernel "
                       f"{tuple(w_shape)} with padding {padding}")

    @property
    def y_shape(self) -> tuple[int, ...]:
        return (self.n, self.k, self.oh, self.ow)

    def taps(self) -> list[tuple[int, int, slice, slice]]:
        return [(r, s, slice(r * self.dh, r * self.dh + self.sh * (self.oh - 1) + 1, self.sh),
                 slice(s * self.dw, s * self.dw + self.sw * (self.ow - 1) + 1, self.sw))
                for r in range(self.r) for s in range(self.s)]

    def padded(self, x: np.ndarray) -> np.ndarray:
        xp = np.pad(_f64(x), ((0, 0), (0, 0), (self.ph, self.ph), (self.pw, self.pw)))
        return xp.reshape(self.n, self.g, self.cg, xp.shape[2], xp.shape[3])

    def window(self, xp: np.ndarray, hs: slice, ws: slice) -> np.ndarray:
        """[G, Cg, N*OH*OW] slab of the padded input under one tap."""
        return xp[..., hs, ws].transpose(1, 2, 0, 3, 4).reshape(self.g, self.cg,
                                                                self.n * self.oh * self.ow)

    def grad_y(self, gy: np.ndarray) -> np.ndarray:
        _need_shape(gy, self.y_shape, "grad_y")
        m = self.oh * self.ow
        return _f64(gy).reshape(self.n, self.g, self.kg, m).transpose(1, 2, 0, 3) \
            .reshape(self.g, self.kg, self.n * m)


def _conv2d(x: np.ndarray, weight: np.ndarray, bias: np.ndarray | None, *, stride: tuple,
            padding: tuple, dilation: tuple, groups: int, algorithm: str) -> np.ndarray:
    _need_ndim(x, 4, "x", "[N, C, H, W]")
    _need_ndim(weight, 4, "weight", "[K, C/groups, R, S]")
    cv = _Conv(x.shape, weight.shape, stride, padding, dilation, groups)
    _channel_vec(bias, cv.k, "bias")
    xp = cv.padded(x)
    wg = _f64(weight).reshape(cv.g, cv.kg, cv.cg, cv.r, cv.s)
    acc = np.zeros((cv.g, cv.kg, cv.n * cv.oh * cv.ow))
    for r, s, hs, ws in cv.taps():
        acc += wg[..., r, s] @ cv.window(xp, hs, ws)
    y = acc.reshape(cv.k, cv.n, cv.oh, cv.ow).transpose(1, 0, 2, 3)
    if bias is not None:
        y = y + _f64(bias)[:, None, None]
    return y


def _conv2d_backward_input(grad_y: np.ndarray, weight: np.ndarray, *, input_shape: tuple,
                           stride: tuple, padding: tuple, dilation: tuple, groups: int,
                           algorithm: str) -> np.ndarray:
    _ints(input_shape, 4, "input_shape", 0)
    _need_ndim(weight, 4, "weight", "[K, C/groups, R, S]")
    cv = _Conv(input_shape, weight.shape, stride, padding, dilation, groups)
    gy = cv.grad_y(grad_y)
    wt = _f64(weight).reshape(cv.g, cv.kg, cv.cg, cv.r, cv.s).transpose(0, 2, 1, 3, 4)
    gxp = np.zeros((cv.n, cv.g, cv.cg, cv.h + 2 * cv.ph, cv.w + 2 * cv.pw))
    for r, s, hs, ws in cv.taps():
        part = (wt[..., r, s] @ gy).reshape(cv.g, cv.cg, cv.n, cv.oh, cv.ow)
        gxp[..., hs, ws] += part.transpose(2, 0, 1, 3, 4)
    gx = gxp.reshape(cv.n, cv.c, gxp.shape[3], gxp.shape[4])
    return gx[:, :, cv.ph:cv.ph + cv.h, cv.pw:cv.pw + cv.w]


def _conv2d_backward_weight(grad_y: np.ndarray, x: np.ndarray, *, weight_shape: tuple,
                            stride: tuple, padding: tuple, dilation: tuple, groups: int,
                            algorithm: str) -> np.ndarray:
    _ints(weight_shape, 4, "weight_shape", 0)
    _need_ndim(x, 4, "x", "[N, C, H, W]")
    cv = _Conv(x.shape, weight_shape, stride, padding, dilation, groups)
    gy = cv.grad_y(grad_y)
    xp = cv.padded(x)
    gw = np.zeros((cv.g, cv.kg, cv.cg, cv.r, cv.s))
    for r, s, hs, ws in cv.taps():
        gw[..., r, s] = gy @ cv.window(xp, hs, ws).transpose(0, 2, 1)
    return gw.reshape(weight_shape)


# ------------------------------------------------------------------------------------------------
# tier 2: pooling
# ------------------------------------------------------------------------------------------------

def _pool_out(size: int, k: int, s: int, p: int, d: int, ceil_mode: bool) -> int:
    """torch's pooling_output_shape: a ceil-mode window must start inside input or left pad."""
    o = (size + 2 * p - d * (k - 1) - 1 + (s - 1 if ceil_mode else 0)) // s + 1
    if ceil_mode and (o - 1) * s >= size + p:
        o -= 1
    return o


class _Pool:
    """Geometry of one 2-d pooling (torch's rules for sizes and padding limits)."""

    def __init__(self, x: np.ndarray, kernel_size: tuple, stride: tuple, padding: tuple,
                 dilation: tuple, ceil_mode: bool) -> None:
        _need_ndim(x, 4, "x", "[N, C, H, W]")
        self.n, self.c, self.h, self.w = x.shape
        self.kh, self.kw = _ints(kernel_size, 2, "kernel_size", 1)
        self.sh, self.sw = _ints(stride, 2, "stride", 1) if stride else (self.kh, self.kw)
        self.ph, self.pw = _ints(padding, 2, "padding", 0)
        self.dh, self.dw = _ints(dilation, 2, "dilation", 1)
        if self.ph > self.kh // 2 or self.pw > self.kw // 2:
            raise _Bad(f"padding: {tuple(padding)} must be at most half of kernel_size "
                       f"{tuple(kernel_size)}")
        self.oh = _pool_out(self.h, self.kh, self.sh, self.ph, self.dh, ceil_mode)
        self.ow = _pool_out(self.w, self.kw, self.sw, self.pw, self.dw, ceil_mode)
        if self.oh < 1 or self.ow < 1:
            raise _Bad(f"x: input {x.shape} is too small for kernel_size {tuple(kernel_size)} "
                       f"(output would be {self.oh}x{self.ow})")
        # a buffer that holds every window: left pad, input, right pad and ceil-mode overhang
        self.hb = max(self.h + 2 * self.ph, (self.oh - 1) * self.sh + (self.kh - 1) * self.dh + 1)
        self.wb = max(self.w + 2 * self.pw, (self.ow - 1) * self.sw + (self.kw - 1) * self.dw + 1)

    @property
    def y_shape(self) -> tuple[int, ...]:
        return (self.n, self.c, self.oh, self.ow)

    def taps(self) -> list[tuple[slice, slice]]:
        return [(slice(r * self.dh, r * self.dh + self.sh * (self.oh - 1) + 1, self.sh),
                 slice(s * self.dw, s * self.dw + self.sw * (self.ow - 1) + 1, self.sw))
                for r in range(self.kh) for s in range(self.kw)]

    def buffer(self, fill: float, dtype: np.dtype) -> np.ndarray:
        return np.full((self.n, self.c, self.hb, self.wb), fill, dtype)

    def inner(self, buf: np.ndarray) -> np.ndarray:
        return buf[:, :, self.ph:self.ph + self.h, self.pw:self.pw + self.w]


def _max_pool2d(x: np.ndarray, *, kernel_size: tuple, stride: tuple, padding: tuple,
                dilation: tuple, ceil_mode: bool) -> tuple[np.ndarray, np.ndarray]:
    pl = _Pool(x, kernel_size, stride, padding, dilation, ceil_mode)
    xb = pl.buffer(-np.inf, x.dtype)
    pl.inner(xb)[...] = x
    valid = np.zeros((pl.hb, pl.wb), bool)
    valid[pl.ph:pl.ph + pl.h, pl.pw:pl.pw + pl.w] = True
    rows, cols = np.arange(pl.hb) - pl.ph, np.arange(pl.wb) - pl.pw
    pos = rows[:, None] * pl.w + cols[None, :]
    # torch starts each window's index at its first in-bounds tap and then takes a tap when it
    # is larger or nan; taking the first valid tap unconditionally gives the same result
    h0 = np.arange(pl.oh) * pl.sh - pl.ph
    w0 = np.arange(pl.ow) * pl.sw - pl.pw
    h0 = np.where(h0 < 0, h0 + (-h0 + pl.dh - 1) // pl.dh * pl.dh, h0)
    w0 = np.where(w0 < 0, w0 + (-w0 + pl.dw - 1) // pl.dw * pl.dw, w0)
    idx = np.broadcast_to(h0[:, None] * pl.w + w0[None, :], pl.y_shape).copy()
    best = np.full(pl.y_shape, -np.inf, x.dtype)
    seen = np.zeros((pl.oh, pl.ow), bool)
    for hs, ws in pl.taps():
        val, ok = xb[..., hs, ws], valid[hs, ws]
        take = ok & (~seen | (val > best) | np.isnan(val))
        best = np.where(take, val, best)
        idx = np.where(take, pos[hs, ws], idx)
        seen |= ok
    return best, idx


def _max_pool2d_backward(grad_y: np.ndarray, x: np.ndarray, indices: np.ndarray, *,
                         kernel_size: tuple, stride: tuple, padding: tuple, dilation: tuple,
                         ceil_mode: bool) -> np.ndarray:
    pl = _Pool(x, kernel_size, stride, padding, dilation, ceil_mode)
    _need_shape(grad_y, pl.y_shape, "grad_y")
    _need_shape(indices, pl.y_shape, "indices")
    plane = pl.h * pl.w
    if indices.size and (indices.min() < 0 or indices.max() >= plane):
        bad = indices[(indices < 0) | (indices >= plane)].flat[0]
        raise _Bad(f"indices: {bad} is outside the input plane [0, {plane})")
    planes = pl.n * pl.c
    flat = (np.arange(planes, dtype=np.int64)[:, None] * plane
            + indices.reshape(planes, pl.oh * pl.ow).astype(np.int64)).ravel()
    gx = np.bincount(flat, weights=_f64(grad_y).ravel(), minlength=planes * plane)
    return gx.reshape(x.shape)


def _avg_divisor(pl: _Pool, count_include_pad: bool) -> np.ndarray:
    """Per-window divisor following torch's cpu_avg_pool; 0 marks a window with no input."""
    def extent(o: int, s: int, p: int, k: int, size: int) -> tuple[np.ndarray, np.ndarray]:
        start = np.arange(o) * s - p
        end = np.minimum(start + k, size + p)
        inside = np.minimum(end, size) - np.maximum(start, 0)
        return end - start, np.maximum(inside, 0)
    ph, ih = extent(pl.oh, pl.sh, pl.ph, pl.kh, pl.h)
    pw, iw = extent(pl.ow, pl.sw, pl.pw, pl.kw, pl.w)
    div = np.outer(ph, pw) if count_include_pad else np.outer(ih, iw)
    return np.where(np.outer(ih, iw) > 0, div, 0).astype(np.float64)


def _avg_pool2d(x: np.ndarray, *, kernel_size: tuple, stride: tuple, padding: tuple,
                ceil_mode: bool, count_include_pad: bool) -> np.ndarray:
    pl = _Pool(x, kernel_size, stride, padding, (1, 1), ceil_mode)
    xb = pl.buffer(0.0, np.float64)
    pl.inner(xb)[...] = x
    acc = np.zeros(pl.y_shape)
    for hs, ws in pl.taps():
        acc += xb[..., hs, ws]
    div = _avg_divisor(pl, count_include_pad)
    return np.where(div > 0, acc / np.where(div > 0, div, 1), 0.0)


def _avg_pool2d_backward(grad_y: np.ndarray, x: np.ndarray, *, kernel_size: tuple,
                         stride: tuple, padding: tuple, ceil_mode: bool,
                         count_include_pad: bool) -> np.ndarray:
    pl = _Pool(x, kernel_size, stride, padding, (1, 1), ceil_mode)
    _need_shape(grad_y, pl.y_shape, "grad_y")
    div = _avg_divisor(pl, count_include_pad)
    g = np.where(div > 0, _f64(grad_y) / np.where(div > 0, div, 1), 0.0)
    gb = pl.buffer(0.0, np.float64)
    for hs, ws in pl.taps():
        gb[..., hs, ws] += g
    return pl.inner(gb)


def _adaptive_bins(size: int, out: int) -> np.ndarray:
    """[out, size] averaging matrix: row i covers [floor(i*size/out), ceil((i+1)*size/out))."""
    m = np.zeros((out, size))
    for i in range(out):
        lo, hi = i * size // out, -(-(i + 1) * size // out)
        m[i, lo:hi] = 1.0 / (hi - lo)
    return m


def _adaptive_mats(x: np.ndarray, output_size: tuple) -> tuple[np.ndarray, np.ndarray]:
    _need_ndim(x, 4, "x", "[N, C, H, W]")
    oh, ow = _ints(output_size, 2, "output_size", 1)
    if x.shape[2] == 0 or x.shape[3] == 0:
        raise _Bad(f"x: expected non-empty H and W, got shape {x.shape}")
    return _adaptive_bins(x.shape[2], oh), _adaptive_bins(x.shape[3], ow)


def _adaptive_cells(mh: np.ndarray, mw: np.ndarray) -> list[tuple[int, int, slice, slice]]:
    """(i, j, rows, cols) of every output cell, from the averaging matrices' nonzero spans."""
    def spans(m: np.ndarray) -> list[slice]:
        return [slice(int(np.argmax(r > 0)), int(len(r) - np.argmax(r[::-1] > 0))) for r in m]
    return [(i, j, hs, ws) for i, hs in enumerate(spans(mh)) for j, ws in enumerate(spans(mw))]


def _adaptive_avg_pool2d(x: np.ndarray, *, output_size: tuple) -> np.ndarray:
    # a mean per cell, not a product with the averaging matrices: their zeros would turn an
    # inf outside the cell into nan (0 * inf)
    mh, mw = _adaptive_mats(x, output_size)
    xf = _f64(x)
    y = np.empty(x.shape[:2] + (mh.shape[0], mw.shape[0]))
    for i, j, hs, ws in _adaptive_cells(mh, mw):
        y[:, :, i, j] = xf[:, :, hs, ws].mean(axis=(2, 3))
    return y


def _adaptive_avg_pool2d_backward(grad_y: np.ndarray, x: np.ndarray, *,
                                  output_size: tuple) -> np.ndarray:
    mh, mw = _adaptive_mats(x, output_size)
    _need_shape(grad_y, x.shape[:2] + (mh.shape[0], mw.shape[0]), "grad_y")
    gy = _f64(grad_y)
    gx = np.zeros(x.shape)
    for i, j, hs, ws in _adaptive_cells(mh, mw):
        n = (hs.stop - hs.start) * (ws.stop - ws.start)
        gx[:, :, hs, ws] += (gy[:, :, i, j] / n)[:, :, None, None]
    return gx


# ------------------------------------------------------------------------------------------------
# tier 2: normalization
# ------------------------------------------------------------------------------------------------

def _bn_layout(x: np.ndarray) -> tuple[int, tuple[int, ...], tuple[int, ...]]:
    if x.ndim < 2:
        raise _Bad(f"x: expected [N, C, ...] with ndim >= 2, got shape {x.shape}")
    c = x.shape[1]
    return c, (0,) + tuple(range(2, x.ndim)), (1, c) + (1,) * (x.ndim - 2)


def _batch_norm(x: np.ndarray, weight: np.ndarray | None, bias: np.ndarray | None,
                running_mean: np.ndarray | None, running_var: np.ndarray | None, *,
                training: bool, momentum: float, eps: float) -> tuple[np.ndarray, ...]:
    c, red, bshape = _bn_layout(x)
    for v, what in ((weight, "weight"), (bias, "bias"), (running_mean, "running_mean"),
                    (running_var, "running_var")):
        _channel_vec(v, c, what)
    if (running_mean is None) != (running_var is None):
        raise _Bad("running_mean, running_var: give both or neither")
    xf = _f64(x)
    if training:
        count = x.size // c if c else 0
        # one value per channel is valid, as in torch (F.layer_norm's decomposition passes it):
        # variance 0, and the unbiased running variance 0 / 0 = nan
        if count == 0:
            raise _Bad(f"x: training needs at least one value per channel, got shape {x.shape}")
        mean, var = xf.mean(axis=red), xf.var(axis=red)
        if running_mean is not None:
            new_mean = (1 - momentum) * _f64(running_mean) + momentum * mean
            new_var = (1 - momentum) * _f64(running_var) + momentum * var * count / (count - 1)
            running_mean[...] = new_mean
            running_var[...] = new_var
    else:
        if running_mean is None:
            raise _Bad("running_mean, running_var: required when training is False")
        mean, var = _f64(running_mean), _f64(running_var)
    invstd = 1.0 / np.sqrt(var + eps)
    y = (xf - mean.reshape(bshape)) * invstd.reshape(bshape)
    if weight is not None:
        y = y * _f64(weight).reshape(bshape)
    if bias is not None:
        y = y + _f64(bias).reshape(bshape)
    return y, mean, invstd


def _batch_norm_backward(grad_y: np.ndarray, x: np.ndarray, weight: np.ndarray | None,
                         save_mean: np.ndarray, save_invstd: np.ndarray, *,
                         training: bool) -> tuple[np.ndarray, ...]:
    c, red, bshape = _bn_layout(x)
    _need_shape(grad_y, x.shape, "grad_y")
    for v, what in ((weight, "weight"), (save_mean, "save_mean"), (save_invstd, "save_invstd")):
        _channel_vec(v, c, what)
    gy = _f64(grad_y)
    invstd = _f64(save_invstd).reshape(bshape)
    xhat = (_f64(x) - _f64(save_mean).reshape(bshape)) * invstd
    grad_bias = gy.sum(axis=red)
    grad_weight = (gy * xhat).sum(axis=red)
    scale = invstd * (1.0 if weight is None else _f64(weight).reshape(bshape))
    if training:
        count = max(x.size // c, 1) if c else 1
        mean_gy = grad_bias.reshape(bshape) / count
        mean_gyx = grad_weight.reshape(bshape) / count
        grad_x = scale * (gy - mean_gy - xhat * mean_gyx)
    else:
        grad_x = gy * scale
    return grad_x, grad_weight, grad_bias


# ------------------------------------------------------------------------------------------------
# tier 2: softmax and losses
# ------------------------------------------------------------------------------------------------

def _softmax_parts(x: np.ndarray, axis: int) -> tuple[np.ndarray, np.ndarray, int]:
    ax = _axis(axis, x.ndim)
    xf = _f64(x).reshape(x.shape or (1,))
    if xf.size == 0:
        return xf, xf, ax
    shifted = xf - xf.max(axis=ax, keepdims=True)
    return shifted, np.log(np.exp(shifted).sum(axis=ax, keepdims=True)), ax


def _softmax(x: np.ndarray, *, axis: int) -> np.ndarray:
    shifted, logsum, _ = _softmax_parts(x, axis)
    return np.exp(shifted - logsum).reshape(x.shape)


def _log_softmax(x: np.ndarray, *, axis: int) -> np.ndarray:
    shifted, logsum, _ = _softmax_parts(x, axis)
    return (shifted - logsum).reshape(x.shape)


def _softmax_backward(grad_y: np.ndarray, y: np.ndarray, *, axis: int) -> np.ndarray:
    ax = _axis(axis, y.ndim)
    _need_shape(grad_y, y.shape, "grad_y")
    gy, yf = _f64(grad_y).reshape(y.shape or (1,)), _f64(y).reshape(y.shape or (1,))
    return (yf * (gy - (gy * yf).sum(axis=ax, keepdims=True))).reshape(y.shape)


def _log_softmax_backward(grad_y: np.ndarray, y: np.ndarray, *, axis: int) -> np.ndarray:
    ax = _axis(axis, y.ndim)
    _need_shape(grad_y, y.shape, "grad_y")
    gy, yf = _f64(grad_y).reshape(y.shape or (1,)), _f64(y).reshape(y.shape or (1,))
    return (gy - np.exp(yf) * gy.sum(axis=ax, keepdims=True)).reshape(y.shape)


def _nll_targets(logp: np.ndarray, target: np.ndarray, weight: np.ndarray | None,
                 ignore_index: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(logp as [N, C], safe target [N], per-sample weight [N] (0 where ignored), ignored)."""
    if logp.ndim not in (1, 2):
        raise _Bad(f"logp: expected [N, C] or [C], got shape {logp.shape}")
    _need_shape(target, logp.shape[:-1], "target")
    c = logp.shape[-1]
    _channel_vec(weight, c, "weight")
    t = target.reshape(-1).astype(np.int64)
    ignored = t == ignore_index
    bad = ~ignored & ((t < 0) | (t >= c))
    if bad.any():
        raise _Bad(f"target: {t[bad][0]} is outside [0, {c}) and is not ignore_index "
                   f"({ignore_index})")
    safe = np.where(ignored, 0, t)
    w = np.ones(c) if weight is None else _f64(weight)
    wi = np.where(ignored, 0.0, w[safe] if c else 0.0)
    return _f64(logp).reshape(-1, c), safe, wi, ignored


def _nll_loss(logp: np.ndarray, target: np.ndarray, weight: np.ndarray | None, *,
              reduction: str, ignore_index: int) -> tuple[np.ndarray, np.ndarray]:
    lp, safe, wi, ignored = _nll_targets(logp, target, weight, ignore_index)
    picked = np.take_along_axis(lp, safe[:, None], 1)[:, 0] if lp.shape[1] else wi
    losses = np.where(ignored, 0.0, -wi * picked)
    total = wi.sum()  # for every reduction (torch leaves it 0 for a 2-d "none")
    if reduction == "none":
        return losses.reshape(target.shape), total
    return (losses.sum() / total if reduction == "mean" else losses.sum()), total


def _nll_loss_backward(grad_loss: np.ndarray, logp: np.ndarray, target: np.ndarray,
                       weight: np.ndarray | None, total_weight: np.ndarray, *, reduction: str,
                       ignore_index: int) -> np.ndarray:
    lp, safe, wi, ignored = _nll_targets(logp, target, weight, ignore_index)
    _need_shape(grad_loss, target.shape if reduction == "none" else (), "grad_loss")
    _need_shape(total_weight, (), "total_weight")
    g = _f64(grad_loss).reshape(-1)
    if reduction == "mean":
        g = g / _f64(total_weight)
    grad = np.zeros(lp.shape)
    rows = np.nonzero(~ignored)[0]
    grad[rows, safe[rows]] = wi[rows] * -np.broadcast_to(g, wi.shape)[rows]
    return grad.reshape(logp.shape)


def _loss_target(x: np.ndarray, target: np.ndarray) -> np.ndarray:
    try:
        return np.broadcast_to(_f64(target), x.shape)
    except ValueError:
        raise _Bad(f"target: shape {target.shape} does not broadcast to x {x.shape}") from None


def _mse_loss(x: np.ndarray, target: np.ndarray, *, reduction: str) -> np.ndarray:
    d = _f64(x) - _loss_target(x, target)
    sq = d * d
    return sq if reduction == "none" else sq.sum() if reduction == "sum" else _mean(sq)


def _mse_loss_backward(grad_loss: np.ndarray, x: np.ndarray, target: np.ndarray, *,
                       reduction: str) -> np.ndarray:
    if reduction == "none":
        try:
            g = np.broadcast_to(_f64(grad_loss), x.shape)
        except ValueError:
            raise _Bad(f"grad_loss: shape {grad_loss.shape} does not broadcast to "
                       f"x {x.shape}") from None
    else:
        _need_shape(grad_loss, (), "grad_loss")
        g = _f64(grad_loss)
    norm = 2.0 / x.size if reduction == "mean" and x.size else 2.0
    return norm * (_f64(x) - _loss_target(x, target)) * g


# ------------------------------------------------------------------------------------------------
# tier 2: shape ops
# ------------------------------------------------------------------------------------------------

def _concat(*tensors: np.ndarray, axis: int) -> np.ndarray:
    if not tensors:
        raise _Bad("tensors: expected at least one tensor")
    first = tensors[0]
    if first.ndim == 0:
        raise _Bad("tensors: 0-d tensors cannot be concatenated")
    ax = _axis(axis, first.ndim)
    for i, t in enumerate(tensors):
        if t.ndim != first.ndim or t.shape[:ax] + t.shape[ax + 1:] != \
                first.shape[:ax] + first.shape[ax + 1:]:
            raise _Bad(f"tensors[{i}]: shape {t.shape} differs from tensors[0] {first.shape} "
                       f"outside axis {ax}")
    return np.concatenate(tensors, axis=ax)


def _pad_constant(x: np.ndarray, *, pads: tuple, value: float) -> np.ndarray:
    _ints(pads, 2 * x.ndim, "pads", 0)
    shape = tuple(n + pads[2 * i] + pads[2 * i + 1] for i, n in enumerate(x.shape))
    y = np.full(shape, _scalar_as(value, x.dtype, "value"), x.dtype)
    y[tuple(slice(pads[2 * i], pads[2 * i] + n) for i, n in enumerate(x.shape))] = x
    return y


# ------------------------------------------------------------------------------------------------
# optimizer steps: in place, in the op's dtype, in the order torch's fused CPU kernels round
# ------------------------------------------------------------------------------------------------

def _one(t: np.ndarray | None) -> float | None:
    return None if t is None else float(t.reshape(-1)[0])


def _unscaled(grad: np.ndarray, grad_scale: np.ndarray | None, maximize: bool) -> np.ndarray:
    g = np.array(grad)
    if grad_scale is not None:
        g = g / grad.dtype.type(_one(grad_scale))
        grad[...] = g  # torch writes the unscaled gradient back
    return -g if maximize else g


def _sgd_update(param, grad, momentum_buffer, grad_scale, found_inf, *, lr: float,
                momentum: float, dampening: float, weight_decay: float, nesterov: bool,
                maximize: bool, first_step: bool, lr_in_momentum: bool) -> tuple:
    if _one(found_inf) == 1.0:
        return ()
    dt = param.dtype.type
    g = _unscaled(grad, grad_scale, maximize)
    if weight_decay != 0:
        g = g + param * dt(weight_decay)
    if lr_in_momentum:
        g = g * dt(-lr)
    if momentum != 0:
        if momentum_buffer is None:
            raise _Bad("input 'momentum_buffer' is required when momentum != 0")
        buf = np.array(g) if first_step else (momentum_buffer * dt(momentum)
                                              + g * dt(1 - dampening))
        momentum_buffer[...] = buf
        g = g + buf * dt(momentum) if nesterov else buf
    param[...] = param - g * dt(-1.0 if lr_in_momentum else lr)
    return ()


def _adam_update(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, state_step, grad_scale,
                 found_inf, *, lr: float, beta1: float, beta2: float, eps: float,
                 weight_decay: float, decoupled: bool, maximize: bool, step: float,
                 bias_correction: bool, nesterov: bool) -> tuple:
    if _one(found_inf) == 1.0:
        return ()
    dt = param.dtype.type
    g = _unscaled(grad, grad_scale, maximize)
    if weight_decay != 0:
        if decoupled:
            param[...] = param * dt(1 - lr * weight_decay)
        else:
            g = g + param * dt(weight_decay)
    t = _one(state_step) if state_step is not None else step
    bc1, bc2 = (1 - beta1 ** t, 1 - beta2 ** t) if bias_correction else (1.0, 1.0)
    w = dt(1 - beta1)
    m = (exp_avg + w * (g - exp_avg) if abs(w) < 0.5
         else g - (g - exp_avg) * (dt(1) - w))  # torch's lerp, exact at both ends
    exp_avg[...] = m
    exp_avg_sq[...] = exp_avg_sq * dt(beta2) + dt(1 - beta2) * g * g
    v = exp_avg_sq
    if max_exp_avg_sq is not None:
        max_exp_avg_sq[...] = np.maximum(max_exp_avg_sq, exp_avg_sq)
        v = max_exp_avg_sq
    if nesterov:
        m = m * dt(beta1) + dt(1 - beta1) * g
    denom = np.sqrt(v) / dt(math.sqrt(bc2)) + dt(eps)
    param[...] = param - dt(lr / bc1) * m / denom
    return ()


# ------------------------------------------------------------------------------------------------
# tier 4: fused ops
# ------------------------------------------------------------------------------------------------

def _activation(y: np.ndarray, activation: str) -> np.ndarray:
    from .program import OP_FUNCTIONS

    return y if activation == "none" else OP_FUNCTIONS[activation](y)


def _residual(y: np.ndarray, residual: np.ndarray | None) -> np.ndarray:
    if residual is None:
        return y
    _need_shape(residual, y.shape, "residual")
    return y + _f64(residual)


def _conv2d_bias_act(x: np.ndarray, weight: np.ndarray, bias: np.ndarray | None,
                     residual: np.ndarray | None, *, stride: tuple, padding: tuple,
                     dilation: tuple, groups: int, algorithm: str,
                     activation: str) -> np.ndarray:
    y = _conv2d(x, weight, bias, stride=stride, padding=padding, dilation=dilation,
                groups=groups, algorithm=algorithm)
    return _activation(_residual(y, residual), activation)


def _gemm_bias_act(a: np.ndarray, b: np.ndarray, bias: np.ndarray | None,
                   residual: np.ndarray | None, *, alpha: float, activation: str) -> np.ndarray:
    y = _gemm(a, b, None, alpha=alpha, beta=0.0)
    if bias is not None:
        _need_shape(bias, (y.shape[1],), "bias")
        y = y + _f64(bias)[None, :]
    return _activation(_residual(y, residual), activation)


def _elementwise_program(*xs: np.ndarray, program: str, reduce: str,
                         reduce_axes: tuple) -> tuple[np.ndarray, ...]:
    from . import shapes
    from .program import evaluate, parse_program

    attrs = {"program": program, "reduce": reduce, "reduce_axes": reduce_axes}
    # the op set's one shape rule validates the program and the axes (messages name the token)
    shapes.infer(opset.get("elementwise_program"), [x.shape for x in xs], attrs)
    prog = parse_program(program, len(xs))
    ys = evaluate(prog, xs)
    if reduce == "none":
        return tuple(ys)
    axes = tuple(attrs["reduce_axes"])
    fn = {"sum": np.sum, "mean": _mean, "max": np.max, "min": np.min}[reduce]
    return tuple(np.asarray(fn(y, axis=axes)) for y in ys)


# ------------------------------------------------------------------------------------------------
# the table
# ------------------------------------------------------------------------------------------------

def _sum_like(fn: Callable) -> Callable[..., np.ndarray]:
    return _reduction(fn, _wide)


KERNELS: dict[str, Callable[..., Any]] = {
    "copy": _copy,
    "fill": _fill,
    "zero": _zero,
    "cast": _cast,
    "arange": _arange,
    "neg": lambda x: np.negative(x),
    "abs": lambda x: np.abs(x),
    "exp": _float_unary(np.exp),
    "log": _float_unary(np.log),
    "sqrt": _float_unary(np.sqrt),
    "rsqrt": _float_unary(lambda x: 1.0 / np.sqrt(x)),
    "reciprocal": _float_unary(lambda x: 1.0 / x),
    "sin": _float_unary(np.sin),
    "cos": _float_unary(np.cos),
    "tanh": _float_unary(np.tanh),
    "sigmoid": _float_unary(lambda x: 1.0 / (1.0 + np.exp(-x))),
    "relu": lambda x: np.where(x < 0, x.dtype.type(0), x),  # like torch: -0 and nan stay
    "gelu": _gelu,
    "erf": _float_unary(_erf),
    "floor": lambda x: np.floor(x),
    "ceil": lambda x: np.ceil(x),
    "round": lambda x: np.round(x),  # numpy rounds half to even, like torch
    "sign": _sign,
    "square": lambda x: _wide(x) * _wide(x),
    "logical_not": lambda x: x == 0,
    "add": _add,
    "sub": _sub,
    "mul": _mul,
    "div": lambda x, y: _f64(x) / _f64(y),
    "pow": lambda x, y: np.power(_f64(x), _f64(y)),
    "maximum": lambda x, y: np.maximum(x, y),
    "minimum": lambda x, y: np.minimum(x, y),
    "eq": lambda x, y: x == y,
    "ne": lambda x, y: x != y,
    "lt": lambda x, y: x < y,
    "le": lambda x, y: x <= y,
    "gt": lambda x, y: x > y,
    "ge": lambda x, y: x >= y,
    "logical_and": _logical(np.logical_and),
    "logical_or": _logical(np.logical_or),
    "where": _where,
    "addcmul": lambda x, a, b, *, value: _f64(x) + value * _f64(a) * _f64(b),
    "addcdiv": lambda x, a, b, *, value: _f64(x) + value * _f64(a) / _f64(b),
    "lerp": lambda x, end, *, weight: _f64(x) + weight * (_f64(end) - _f64(x)),
    "threshold_backward": _threshold_backward,
    "sigmoid_backward": lambda grad, y: _f64(grad) * _f64(y) * (1.0 - _f64(y)),
    "tanh_backward": lambda grad, y: _f64(grad) * (1.0 - _f64(y) ** 2),
    "gelu_backward": _gelu_backward,
    "sum": _sum_like(np.sum),
    "mean": _reduction(_mean, _f64),
    "max": _extreme(np.max),
    "min": _extreme(np.min),
    "prod": _sum_like(np.prod),
    "argmax": _arg(np.argmax),
    "argmin": _arg(np.argmin),
    "matmul": _matmul,
    "gemm": _gemm,
    "conv2d": _conv2d,
    "conv2d_backward_input": _conv2d_backward_input,
    "conv2d_backward_weight": _conv2d_backward_weight,
    "max_pool2d": _max_pool2d,
    "max_pool2d_backward": _max_pool2d_backward,
    "avg_pool2d": _avg_pool2d,
    "avg_pool2d_backward": _avg_pool2d_backward,
    "adaptive_avg_pool2d": _adaptive_avg_pool2d,
    "adaptive_avg_pool2d_backward": _adaptive_avg_pool2d_backward,
    "batch_norm": _batch_norm,
    "batch_norm_backward": _batch_norm_backward,
    "softmax": _softmax,
    "log_softmax": _log_softmax,
    "softmax_backward": _softmax_backward,
    "log_softmax_backward": _log_softmax_backward,
    "nll_loss": _nll_loss,
    "nll_loss_backward": _nll_loss_backward,
    "mse_loss": _mse_loss,
    "mse_loss_backward": _mse_loss_backward,
    "concat": _concat,
    "pad_constant": _pad_constant,
    "sgd_update": _sgd_update,
    "adam_update": _adam_update,
    "conv2d_bias_act": _conv2d_bias_act,
    "gemm_bias_act": _gemm_bias_act,
    "elementwise_program": _elementwise_program,
    **_TIER3,
}


# ------------------------------------------------------------------------------------------------
# run(): argument checking, dtype rules, output conversion
# ------------------------------------------------------------------------------------------------

def _attr_value(op: str, a: opset.Attr, value: Any) -> Any:
    def bad(expected: str) -> _Invalid:
        return _Invalid(f"{op}: attribute {a.name!r} expects {expected}, got {value!r}")
    if a.type == "int":
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
            raise bad("an int")
        return int(value)
    if a.type == "float":
        if isinstance(value, (bool, np.bool_)) or not isinstance(
                value, (int, float, np.integer, np.floating)):
            raise bad("a float")
        return float(value)
    if a.type == "bool":
        if not isinstance(value, (bool, np.bool_)):
            raise bad("a bool")
        return bool(value)
    if a.type == "str":
        if not isinstance(value, str):
            raise bad("a str")
        if a.choices and value not in a.choices:
            raise bad(f"one of {a.choices}")
        return value
    if isinstance(value, (str, bytes)) or not isinstance(value, (Sequence, np.ndarray)):
        raise bad("a sequence of ints")
    items = list(np.asarray(value).ravel()) if isinstance(value, np.ndarray) else list(value)
    if any(isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer))
           for v in items):
        raise bad("a sequence of ints")
    return tuple(int(v) for v in items)


def _fill_attrs(schema: opset.OpSchema, attrs: dict | None) -> dict[str, Any]:
    given = dict(attrs or {})
    unknown = sorted(set(given) - set(schema.attr_names))
    if unknown:
        raise _Invalid(f"{schema.name}: unknown attribute(s) {unknown}; expected "
                         f"{list(schema.attr_names) or 'none'}")
    out = {a.name: _attr_value(schema.name, a, given.get(a.name, a.default))
           for a in schema.attrs}
    if "dtype" in out:  # cast converts to any dtype; a no-input op makes one of its dtypes
        allowed = schema.dtypes if not schema.inputs else dtypes.ALL
        if out["dtype"] not in allowed:
            raise _Invalid(f"{schema.name}: attribute 'dtype' expects one of {allowed}, "
                             f"got {out['dtype']!r}")
    return out


def _as_array(op: str, name: str, value: Any) -> np.ndarray:
    if isinstance(value, np.generic):
        value = np.asarray(value)
    if not isinstance(value, np.ndarray):
        raise TypeError(f"{op}: input {name!r} must be a numpy array, got "
                        f"{type(value).__name__}")
    return value


def _check_inputs(schema: opset.OpSchema, inputs: Sequence) -> list[np.ndarray | None]:
    op = schema.name
    if not isinstance(inputs, (list, tuple)):
        raise TypeError(f"{op}: inputs must be a list of arrays, got {type(inputs).__name__}")
    if schema.inputs and schema.inputs[0].variadic:
        items = inputs[0] if len(inputs) == 1 and isinstance(inputs[0], (list, tuple)) \
            else inputs
        name = schema.inputs[0].name
        if not items:
            raise _Invalid(f"{op}: input {name!r} expects at least one tensor, got none")
        return [_as_array(op, f"{name}[{i}]", t) for i, t in enumerate(items)]
    n_req = sum(1 for i in schema.inputs if not i.optional)
    if not n_req <= len(inputs) <= len(schema.inputs) or any(
            not i.optional for i in schema.inputs[len(inputs):]):
        names = [i.name + ("?" if i.optional else "") for i in schema.inputs]
        raise _Invalid(f"{op}: expected inputs {names}, got {len(inputs)} input(s)")
    ins = list(inputs) + [None] * (len(schema.inputs) - len(inputs))
    out: list[np.ndarray | None] = []
    for spec, value in zip(schema.inputs, ins, strict=True):
        if value is None:
            if not spec.optional:
                raise _Invalid(f"{op}: input {spec.name!r} is required, got None")
            out.append(None)
        else:
            out.append(_as_array(op, spec.name, value))
    return out


def _op_dtype(schema: opset.OpSchema, ins: list, attrs: dict, out: Sequence | None) -> str:
    if ins:
        name = ins[0].dtype.name
    elif schema.outputs[0].dtype.startswith("attr:"):
        name = attrs[schema.outputs[0].dtype[5:]]
    else:
        name = out[0].dtype.name
    if name not in schema.dtypes:
        raise _Invalid(f"{schema.name}: dtype {name} is not supported; expected one of "
                        f"{schema.dtypes}")
    return name


def _check_dtypes(schema: opset.OpSchema, ins: list, dtype: str) -> None:
    specs = [schema.inputs[0]] * len(ins) if schema.inputs and schema.inputs[0].variadic \
        else schema.inputs
    for i, (spec, x) in enumerate(zip(specs, ins, strict=True)):
        if x is None:
            continue
        allowed = (dtype,) if spec.dtypes == "same" else spec.dtypes
        got = np.dtype(x.dtype).name
        if got not in allowed:
            label = f"{spec.name}[{i}]" if spec.variadic else spec.name
            raise _Invalid(f"{schema.name}: input {label!r} has dtype {got}; expected "
                            f"{' or '.join(allowed)}")
        if spec.mutated and not x.flags.writeable:
            raise _Invalid(f"{schema.name}: input {spec.name!r} is updated in place and must "
                             "be writeable")


def _check_broadcast(schema: opset.OpSchema, ins: list) -> None:
    if schema.shape != "broadcast":
        return
    try:
        np.broadcast_shapes(*(x.shape for x in ins))
    except ValueError:
        shapes = ", ".join(f"{s.name} {x.shape}" for s, x in zip(schema.inputs, ins, strict=False))
        raise _Invalid(f"{schema.name}: input shapes do not broadcast: {shapes}") from None


def _out_dtypes(schema: opset.OpSchema, dtype: str, attrs: dict, n: int) -> list[np.dtype]:
    """Per output (a variadic one expanded to the `n` results)."""
    rules = {"same": dtype}
    outs = list(schema.outputs)
    if outs and outs[-1].variadic:
        outs = outs[:-1] + [outs[-1]] * (n - len(outs) + 1)
    return [np.dtype(rules.get(o.dtype) or (attrs[o.dtype[5:]] if o.dtype.startswith("attr:")
                                            else o.dtype)) for o in outs]


def _out_name(schema: opset.OpSchema, i: int) -> str:
    last = schema.outputs[-1]
    if last.variadic and i >= len(schema.outputs) - 1:
        return f"{last.name}[{i - len(schema.outputs) + 1}]"
    return schema.outputs[i].name


def _finish(schema: opset.OpSchema, result: Any, want: list[np.dtype], ins: list,
            out: Sequence | None) -> tuple[np.ndarray, ...]:
    results = result if isinstance(result, tuple) else (result,)
    assert len(results) == len(want), schema.name
    final = []
    for r, dt in zip(results, want, strict=True):
        y = np.asarray(r)
        with np.errstate(over="ignore"):  # a float64 result beyond float32's range is inf
            y = y.astype(dt, copy=False) if dt.kind != "b" or y.dtype.kind == "b" else y != 0
        if not y.flags.c_contiguous or any(x is not None and np.may_share_memory(y, x)
                                           for x in ins):
            y = np.array(y, order="C", copy=True)
        final.append(y)
    if out is None:
        return tuple(final)
    if len(out) != len(final):
        raise _Invalid(f"{schema.name}: out must hold {len(final)} array(s), got {len(out)}")
    for i, (y, o) in enumerate(zip(final, out, strict=True)):
        if o.shape != y.shape or o.dtype != y.dtype:
            raise _Invalid(f"{schema.name}: out[{i}] ({_out_name(schema, i)}) must have "
                             f"shape {y.shape} and dtype {y.dtype}, got {o.shape} {o.dtype}")
        np.copyto(o, y)
    return tuple(out)


def run(op: str, inputs: Sequence[np.ndarray | None], attrs: dict | None = None, *,
        out: Sequence[np.ndarray] | None = None) -> tuple[np.ndarray, ...]:
    """Compute op `op` on numpy arrays; returns its outputs in op-set order and dtypes.

    `inputs` follow the op set's order (trailing absent optional inputs may be left off or
    given as None; a variadic input is the list itself). Missing attributes take their
    defaults. Inputs the op set marks `mutated` are updated in place. `out`, if given, are
    arrays that receive the results (and are returned); ops without inputs whose output
    dtype is "same" (fill, zero) need it, as their shape and dtype come from the output.
    Bad arguments raise InvalidArgumentError (a ValueError) naming the op and the argument;
    an input that is not a numpy array raises TypeError.
    """
    schema = opset.get(op)
    ins = _check_inputs(schema, inputs)
    at = _fill_attrs(schema, attrs)
    if out is not None:
        out = [_as_array(op, f"out[{i}]", o) for i, o in enumerate(out)]
        if len(out) != len(schema.outputs) and not schema.outputs[-1].variadic:
            raise _Invalid(f"{op}: out must hold {len(schema.outputs)} array(s), got "
                             f"{len(out)}")
    needs_like = not schema.inputs and schema.outputs[0].dtype == "same"
    if needs_like and out is None:
        raise _Invalid(f"{op}: needs out=[y] (the output's shape and dtype come from it)")
    dtype = _op_dtype(schema, ins, at, out)
    _check_dtypes(schema, ins, dtype)
    _check_broadcast(schema, ins)
    kwargs = dict(at, like=out[0]) if needs_like else at
    try:
        with np.errstate(all="ignore"):
            result = KERNELS[op](*ins, **kwargs)
    except _Bad as e:
        raise _Invalid(f"{op}: {e}") from None
    n = len(result) if isinstance(result, tuple) else 1
    return _finish(schema, result, _out_dtypes(schema, dtype, at, n), ins, out)
