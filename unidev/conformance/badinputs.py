"""Bad-input cases: every malformed-call class must get a clear error, never a crash.

Cases run in a child process per group (``python -m unidev.conformance.badinputs DEVICE GROUP``)
that announces each case before running it, so a crash or a hang is charged to that case and the
group resumes after it. Groups:

- ``ops``: through ``unidev.ops`` (the checks every user call gets);
- ``direct``: the plugin's kernels called through ``Library.kernel`` with descriptors that
  ``unidev.ops`` would have refused — the adapters call kernels without those checks;
- ``raw``: the plugin's table called through ctypes, with no binding in between (negative and
  overflowing strides, descriptors past their allocation, freed and unknown handles, bad device
  indices, double frees);
- ``values``: for every op and dtype the plugin has, the attribute values its dtype cannot hold
  and the out-of-range indices that the reference refuses (unidev.conformance.refusals), passed
  to the kernel directly: the kernel must refuse them too;
- ``tier4`` (when the run covers tier 4): malformed programs refused by the kernel and by
  kernel_compile naming the token, and bad program/epilogue calls (unidev.conformance.tier4).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..core.errors import UnidevError
from . import abi
from .target import Target

__all__ = ["case_names", "run_group", "GROUP_NAMES"]

GROUP_NAMES = ("ops", "direct", "raw", "values", "tier4")
_TIMEOUT = 60.0  # seconds without progress before a case counts as hung

INVALID, OOM, OOB, UNKNOWN, UNSUPPORTED, DEVICE = 1, 2, 3, 4, 5, 7


class Skip(Exception):
    pass


@dataclass
class Ctx:
    t: Target
    lib: object
    dev: int
    api: abi.Api
    raw: abi.Raw
    stream: int

    @property
    def device(self) -> str:
        return self.t.device

    def need(self, op: str, dtype: str = "float32") -> None:
        if self.lib.kernel(op, dtype) is None:
            raise Skip(f"no {op}[{dtype}] kernel")

    def array(self, shape, dtype: str = "float32"):
        from ..core.array import DeviceArray

        return DeviceArray.from_numpy(np.ones(shape, dtype), self.device)


def expect_error(ctx: Ctx, call: Callable[[], object], codes: tuple[int, ...], what: str,
                 sync: Callable[[], object] | None = None) -> str:
    """Run `call`; it (or the synchronizing call after it) must raise with one of `codes`."""
    exc = _raised(call)
    deferred = False
    if exc is None and sync is not None:
        exc, deferred = _raised(sync), True
    if exc is None:
        raise AssertionError(f"{what}: accepted without an error")
    code = getattr(exc, "code", None)
    text = str(getattr(exc, "message", None) or exc)
    if code not in codes:
        names = "/".join(abi.ERROR_CODES.get(c, str(c)) for c in codes)
        raise AssertionError(f"{what}: raised {type(exc).__name__} "
                             f"({abi.ERROR_CODES.get(code, code)}: {text}), expected {names}")
    if not text.strip():
        raise AssertionError(f"{what}: the error has an empty message")
    return ("at the next synchronize: " if deferred else "") + text


def _raised(call: Callable[[], object]) -> BaseException | None:
    try:
        call()
    except (UnidevError, abi.PluginError) as exc:
        return exc
    return None


# ---- group "ops": the Python front door -----------------------------------------------------

def _ops_cases() -> dict[str, Callable[[Ctx], str]]:
    from ..core import ops
    from ..core.array import DeviceArray

    def wrong_dtype(c: Ctx) -> str:
        x, y = c.array((4,)), c.array((4,), "float64")
        return expect_error(c, lambda: ops.add(x, y), (INVALID,), "add(float32, float64)")

    def shape_mismatch(c: Ctx) -> str:
        x, y = c.array((3, 4)), c.array((5,))
        return expect_error(c, lambda: ops.add(x, y), (INVALID,), "add((3,4), (5,))")

    def matmul_inner(c: Ctx) -> str:
        a, b = c.array((3, 4)), c.array((5, 6))
        return expect_error(c, lambda: ops.matmul(a, b), (INVALID,), "matmul((3,4), (5,6))")

    def negative_stride(c: Ctx) -> str:
        # the view is built inside the call: DeviceArray refuses it at construction
        return expect_error(c, lambda: ops.copy(c.array((4,)).as_strided((4,), (-1,), 3)),
                            (INVALID,), "copy of a view with stride -1")

    def overflowing_stride(c: Ctx) -> str:
        return expect_error(c, lambda: ops.copy(c.array((4,)).as_strided((3,), (1 << 61,), 0)),
                            (INVALID, OOB), "copy with stride 2^61")

    def view_past_allocation(c: Ctx) -> str:
        return expect_error(c, lambda: ops.copy(c.array((10,)).as_strided((100,), (1,), 0)),
                            (OOB,), "copy of 100 elements of a 10-element allocation")

    def freed_handle(c: Ctx) -> str:
        x = c.array((10,))
        x.buffer.free()
        return expect_error(c, lambda: ops.copy(x), (UNKNOWN,), "copy from a freed buffer")

    def bad_device_index(c: Ctx) -> str:
        return expect_error(c, lambda: DeviceArray.empty((4,), "float32", f"{c.t.name}:9999"),
                            (INVALID,), "an array on device index 9999")

    def unknown_op(c: Ctx) -> str:
        try:
            ops.call("no_such_op", c.array((2,)))
        except KeyError as exc:
            if "no_such_op" not in str(exc):
                raise AssertionError(f"unknown op: KeyError without the op's name: {exc}") from None
            return str(exc)
        raise AssertionError("unknown op accepted")

    def bad_attr_type(c: Ctx) -> str:
        x = c.array((4,))
        return expect_error(c, lambda: ops.add(x, x, alpha="two"), (INVALID,), "alpha='two'")

    def bad_attr_choice(c: Ctx) -> str:
        x = c.array((4,))
        return expect_error(c, lambda: ops.gelu(x, approximate="bogus"), (INVALID,),
                            "gelu(approximate='bogus')")

    def unknown_attr(c: Ctx) -> str:
        x = c.array((4,))
        return expect_error(c, lambda: ops.add(x, x, beta=1.0), (INVALID,), "add(beta=1.0)")

    def bad_conv_geometry(c: Ctx) -> str:
        x, w = c.array((1, 3, 5, 5)), c.array((4, 3, 3, 3))
        return expect_error(c, lambda: ops.conv2d(x, w, stride=(0, 0)), (INVALID,),
                            "conv2d(stride=(0, 0))")

    return {f.__name__: f for f in (wrong_dtype, shape_mismatch, matmul_inner, negative_stride,
                                    overflowing_stride, view_past_allocation, freed_handle,
                                    bad_device_index, unknown_op, bad_attr_type,
                                    bad_attr_choice, unknown_attr, bad_conv_geometry)}


# ---- group "direct": Library.kernel with malformed but in-bounds descriptors ------------------

def _desc(a, shape=None, strides=None, dtype=None) -> tuple:
    h, off, dt, sh, st = a.descriptor()
    return (h, off, dtype or dt, list(shape if shape is not None else sh),
            list(strides if strides is not None else st))


def _attrs(op: str, **over) -> list:
    from ..contract import opset

    schema = opset.get(op)
    return [(a.name, a.type, over.get(a.name, a.default)) for a in schema.attrs]


def _direct_cases() -> dict[str, Callable[[Ctx], str]]:
    def kcall(c: Ctx, op: str, dtype: str, ins, outs, attrs, what: str,
              codes=(INVALID,)) -> str:
        c.need(op, dtype)
        k = c.lib.kernel(op, dtype)
        return expect_error(c, lambda: k(c.dev, ins, outs, attrs, c.stream), codes, what,
                            sync=lambda: c.lib.stream_synchronize(c.stream))

    def copy_shape_mismatch(c: Ctx) -> str:
        x, y = c.array((4,)), c.array((5,))
        return kcall(c, "copy", "float32", [_desc(x)], [_desc(y)], [],
                     "copy of shape (4,) into shape (5,)")

    def copy_dtype_mismatch(c: Ctx) -> str:
        x, y = c.array((4,)), c.array((4,), "float64")
        return kcall(c, "copy", "float32", [_desc(x)], [_desc(y)], [],
                     "copy of float32 into float64")

    def copy_wrong_arity(c: Ctx) -> str:
        x, y = c.array((4,)), c.array((4,))
        return kcall(c, "copy", "float32", [_desc(x), _desc(x)], [_desc(y)], [],
                     "copy with 2 inputs")

    def copy_no_output(c: Ctx) -> str:
        x = c.array((4,))
        return kcall(c, "copy", "float32", [_desc(x)], [], [], "copy with no output")

    def cast_shape_mismatch(c: Ctx) -> str:
        y = c.array((4,))
        return kcall(c, "cast", "float32", [_desc(y)], [_desc(y, shape=(2, 2), strides=(2, 1))],
                     _attrs("cast", dtype="float32"), "cast of shape (4,) into shape (2, 2)")

    def cast_unknown_dtype(c: Ctx) -> str:
        x, y = c.array((4,)), c.array((4,))
        return kcall(c, "cast", "float32", [_desc(x)], [_desc(y)], _attrs("cast", dtype="bogus"),
                     "cast(dtype='bogus')")

    def add_shape_mismatch(c: Ctx) -> str:
        x, y, o = c.array((4,)), c.array((5,)), c.array((4,))
        return kcall(c, "add", "float32", [_desc(x), _desc(y)], [_desc(o)], _attrs("add"),
                     "add with y of shape (5,) for an output of (4,) (not pre-broadcast)")

    def add_dtype_mismatch(c: Ctx) -> str:
        x, y, o = c.array((4,)), c.array((4,), "float64"), c.array((4,))
        return kcall(c, "add", "float32", [_desc(x), _desc(y)], [_desc(o)], _attrs("add"),
                     "add(float32, float64)")

    def add_bool_output(c: Ctx) -> str:
        x, o = c.array((4,)), c.array((4,), "bool")
        return kcall(c, "add", "float32", [_desc(x), _desc(x)], [_desc(o)], _attrs("add"),
                     "add into a bool output")

    def matmul_inner_mismatch(c: Ctx) -> str:
        a, b, o = c.array((3, 4)), c.array((5, 6)), c.array((3, 6))
        return kcall(c, "matmul", "float32", [_desc(a), _desc(b)], [_desc(o)], [],
                     "matmul (3,4) @ (5,6)")

    def matmul_out_shape(c: Ctx) -> str:
        a, b, o = c.array((3, 4)), c.array((4, 5)), c.array((3, 6))
        return kcall(c, "matmul", "float32", [_desc(a), _desc(b)], [_desc(o)], [],
                     "matmul (3,4) @ (4,5) into (3,6)")

    def sum_axis_out_of_range(c: Ctx) -> str:
        x, o = c.array((3, 4)), c.array((3, 4))
        return kcall(c, "sum", "float32", [_desc(x)], [_desc(o)],
                     _attrs("sum", axes=(5,)), "sum(axes=(5,)) of a 2-d tensor")

    def softmax_axis_out_of_range(c: Ctx) -> str:
        x, o = c.array((3, 4)), c.array((3, 4))
        return kcall(c, "softmax", "float32", [_desc(x)], [_desc(o)],
                     _attrs("softmax", axis=7), "softmax(axis=7) of a 2-d tensor")

    def gelu_bad_approximate(c: Ctx) -> str:
        x, o = c.array((4,)), c.array((4,))
        return kcall(c, "gelu", "float32", [_desc(x)], [_desc(o)],
                     _attrs("gelu", approximate="bogus"), "gelu(approximate='bogus')")

    def conv_zero_stride(c: Ctx) -> str:
        x, w, o = c.array((1, 3, 5, 5)), c.array((4, 3, 3, 3)), c.array((1, 4, 3, 3))
        return kcall(c, "conv2d", "float32", [_desc(x), _desc(w), None], [_desc(o)],
                     _attrs("conv2d", stride=(0, 0)), "conv2d(stride=(0, 0))")

    def conv_bad_groups(c: Ctx) -> str:
        x, w, o = c.array((1, 3, 5, 5)), c.array((4, 3, 3, 3)), c.array((1, 4, 3, 3))
        return kcall(c, "conv2d", "float32", [_desc(x), _desc(w), None], [_desc(o)],
                     _attrs("conv2d", groups=2), "conv2d(groups=2) with 3 input channels")

    def conv_unknown_algorithm(c: Ctx) -> str:
        x, w, o = c.array((1, 3, 5, 5)), c.array((4, 3, 3, 3)), c.array((1, 4, 3, 3))
        return kcall(c, "conv2d", "float32", [_desc(x), _desc(w), None], [_desc(o)],
                     _attrs("conv2d", algorithm="no-such-algorithm"),
                     "conv2d(algorithm='no-such-algorithm')")

    def conv_output_shape(c: Ctx) -> str:
        x, w, o = c.array((1, 3, 5, 5)), c.array((4, 3, 3, 3)), c.array((1, 4, 4, 4))
        return kcall(c, "conv2d", "float32", [_desc(x), _desc(w), None], [_desc(o)],
                     _attrs("conv2d"), "conv2d 5x5 with a 3x3 kernel into a 4x4 output")

    def pool_zero_kernel(c: Ctx) -> str:
        x, o, i = c.array((1, 1, 4, 4)), c.array((1, 1, 2, 2)), c.array((1, 1, 2, 2), "int64")
        return kcall(c, "max_pool2d", "float32", [_desc(x)], [_desc(o), _desc(i)],
                     _attrs("max_pool2d", kernel_size=(0, 0)), "max_pool2d(kernel_size=(0, 0))")

    def batch_norm_channel_mismatch(c: Ctx) -> str:
        x, w = c.array((2, 3, 4, 4)), c.array((5,))
        y, m, v = c.array((2, 3, 4, 4)), c.array((3,)), c.array((3,))
        return kcall(c, "batch_norm", "float32", [_desc(x), _desc(w), None, None, None],
                     [_desc(y), _desc(m), _desc(v)], _attrs("batch_norm"),
                     "batch_norm with a 5-element weight for 3 channels")

    return {f.__name__: f for f in (
        copy_shape_mismatch, copy_dtype_mismatch, copy_wrong_arity, copy_no_output,
        cast_shape_mismatch, cast_unknown_dtype, add_shape_mismatch, add_dtype_mismatch,
        add_bool_output, matmul_inner_mismatch, matmul_out_shape, sum_axis_out_of_range,
        softmax_axis_out_of_range, gelu_bad_approximate, conv_zero_stride, conv_bad_groups,
        conv_unknown_algorithm, conv_output_shape, pool_zero_kernel,
        batch_norm_channel_mismatch)}


# ---- group "raw": the plugin's table through ctypes, no binding ------------------------------

def _raw_cases() -> dict[str, Callable[[Ctx], str]]:
    T = abi.RawTensor

    def sync(c: Ctx):
        return lambda: c.api.call("stream_synchronize", c.stream)

    def rcopy(c: Ctx, x: abi.RawTensor, y: abi.RawTensor, what: str, codes) -> str:
        c.need("copy")
        dt = 1 if c.t.record.spec.host_addressable else 12
        x.device_type = y.device_type = dt
        return expect_error(c, lambda: c.raw.kernel("copy", "float32", c.dev, c.stream, [x], [y],
                                                    []), codes, what, sync=sync(c))

    def alloc(c: Ctx, n: int) -> int:
        return c.api.alloc(c.dev, c.stream, n)

    def negative_stride(c: Ctx) -> str:
        h, o = alloc(c, 64), alloc(c, 64)
        return rcopy(c, T(h, "float32", [4], [-1], byte_offset=12), T(o, "float32", [4]),
                     "copy from a view with stride -1", (INVALID,))

    def overflowing_stride(c: Ctx) -> str:
        h, o = alloc(c, 64), alloc(c, 64)
        return rcopy(c, T(h, "float32", [3], [1 << 62]), T(o, "float32", [3]),
                     "copy from a view with stride 2^62", (INVALID, OOB))

    def overflowing_shape(c: Ctx) -> str:
        h, o = alloc(c, 64), alloc(c, 64)
        return rcopy(c, T(h, "float32", [1 << 40, 1 << 40], [1, 1]),
                     T(o, "float32", [1 << 40, 1 << 40], [1, 1]),
                     "copy of shape (2^40, 2^40)", (INVALID, OOB))

    def negative_shape(c: Ctx) -> str:
        h, o = alloc(c, 64), alloc(c, 64)
        return rcopy(c, T(h, "float32", [-4], [1]), T(o, "float32", [-4], [1]),
                     "copy of shape (-4,)", (INVALID,))

    def descriptor_past_allocation(c: Ctx) -> str:
        h, o = alloc(c, 64), alloc(c, 4096)
        return rcopy(c, T(h, "float32", [1000]), T(o, "float32", [1000]),
                     "copy of 1000 float32 from a 64-byte allocation", (OOB, INVALID))

    def output_past_allocation(c: Ctx) -> str:
        h, o = alloc(c, 4096), alloc(c, 64)
        return rcopy(c, T(h, "float32", [1000]), T(o, "float32", [1000]),
                     "copy of 1000 float32 into a 64-byte allocation", (OOB, INVALID))

    def byte_offset_past_allocation(c: Ctx) -> str:
        h, o = alloc(c, 64), alloc(c, 64)
        return rcopy(c, T(h, "float32", [4], byte_offset=1 << 20), T(o, "float32", [4]),
                     "copy from byte_offset 1 MiB of a 64-byte allocation", (OOB, INVALID))

    def freed_handle(c: Ctx) -> str:
        h, o = alloc(c, 64), alloc(c, 64)
        c.api.call("mem_free", c.dev, c.stream, h)
        c.api.call("stream_synchronize", c.stream)
        return rcopy(c, T(h, "float32", [4]), T(o, "float32", [4]),
                     "copy from a freed handle", (UNKNOWN, OOB, INVALID))

    def unknown_handle(c: Ctx) -> str:
        o = alloc(c, 64)
        return rcopy(c, T(0x10, "float32", [4]), T(o, "float32", [4]),
                     "copy from handle 0x10 that was never allocated", (UNKNOWN, OOB, INVALID))

    def null_handle(c: Ctx) -> str:
        o = alloc(c, 64)
        return rcopy(c, T(0, "float32", [4]), T(o, "float32", [4]), "copy from handle 0",
                     (UNKNOWN, OOB, INVALID))

    def zero_unknown_handle(c: Ctx) -> str:
        c.need("zero")
        dt = 1 if c.t.record.spec.host_addressable else 12
        return expect_error(c, lambda: c.raw.kernel("zero", "float32", c.dev, c.stream, [],
                                                    [T(0x10, "float32", [1024], device_type=dt)],
                                                    []),
                            (UNKNOWN, OOB, INVALID), "zero into handle 0x10", sync=sync(c))

    def kernel_bad_device(c: Ctx) -> str:
        c.need("copy")
        h, o = alloc(c, 64), alloc(c, 64)
        return expect_error(c, lambda: c.raw.kernel("copy", "float32", 9999, c.stream,
                                                    [T(h, "float32", [4])],
                                                    [T(o, "float32", [4])], []),
                            (INVALID,), "a kernel call for device 9999", sync=sync(c))

    def free_twice(c: Ctx) -> str:
        h = alloc(c, 64)
        c.api.call("mem_free", c.dev, c.stream, h)
        c.api.call("stream_synchronize", c.stream)
        return expect_error(c, lambda: c.api.call("mem_free", c.dev, c.stream, h),
                            (UNKNOWN, INVALID), "mem_free of a freed handle", sync=sync(c))

    def free_offset_handle(c: Ctx) -> str:
        h = alloc(c, 64)
        return expect_error(c, lambda: c.api.call("mem_free", c.dev, c.stream, h + 8),
                            (INVALID, UNKNOWN), "mem_free of handle + 8", sync=sync(c))

    def free_unknown_handle(c: Ctx) -> str:
        return expect_error(c, lambda: c.api.call("mem_free", c.dev, c.stream, 0x10),
                            (UNKNOWN, INVALID), "mem_free of a never-allocated handle",
                            sync=sync(c))

    def h2d_out_of_bounds(c: Ctx) -> str:
        h = alloc(c, 64)
        buf = (abi.C.c_uint8 * 128)()
        return expect_error(c, lambda: c.api.call("memcpy_h2d", c.stream, h, buf, 128),
                            (OOB, INVALID), "memcpy_h2d of 128 bytes into 64", sync=sync(c))

    def d2h_out_of_bounds(c: Ctx) -> str:
        h = alloc(c, 64)
        buf = (abi.C.c_uint8 * 128)()
        return expect_error(c, lambda: c.api.call("memcpy_d2h", c.stream, buf, h + 32, 64),
                            (OOB, INVALID), "memcpy_d2h of 64 bytes from offset 32 of 64",
                            sync=sync(c))

    def d2d_out_of_bounds(c: Ctx) -> str:
        a, b = alloc(c, 64), alloc(c, 256)
        return expect_error(c, lambda: c.api.call("memcpy_d2d", c.stream, a, b, 256),
                            (OOB, INVALID), "memcpy_d2d of 256 bytes into 64", sync=sync(c))

    def memset_out_of_bounds(c: Ctx) -> str:
        h = alloc(c, 64)
        return expect_error(c, lambda: c.api.call("memset", c.stream, h, 0, 4, 17),
                            (OOB, INVALID), "memset of 17 x 4 bytes into 64", sync=sync(c))

    def memset_bad_elem_size(c: Ctx) -> str:
        h = alloc(c, 64)
        return expect_error(c, lambda: c.api.call("memset", c.stream, h, 0, 3, 4),
                            (INVALID,), "memset with elem_size 3", sync=sync(c))

    def use_after_stream_free(c: Ctx) -> str:
        h = alloc(c, 64)
        buf = (abi.C.c_uint8 * 64)()
        c.api.call("mem_free", c.dev, c.stream, h)
        return expect_error(c, lambda: c.api.call("memcpy_d2h", c.stream, buf, h, 64),
                            (UNKNOWN, OOB, INVALID, DEVICE),
                            "memcpy_d2h after a stream-ordered free of the source", sync=sync(c))

    def alloc_bad_device(c: Ctx) -> str:
        return expect_error(c, lambda: c.api.alloc(9999, c.stream, 64), (INVALID,),
                            "mem_alloc on device 9999")

    def alloc_negative_device(c: Ctx) -> str:
        return expect_error(c, lambda: c.api.alloc(-1, c.stream, 64), (INVALID,),
                            "mem_alloc on device -1")

    def stream_create_bad_device(c: Ctx) -> str:
        return expect_error(c, lambda: c.api.stream(9999), (INVALID,), "stream_create(9999)")

    def event_create_bad_device(c: Ctx) -> str:
        return expect_error(c, lambda: c.api.event(9999), (INVALID,), "event_create(9999)")

    def properties_bad_device(c: Ctx) -> str:
        return expect_error(c, lambda: c.api.properties(9999), (INVALID,),
                            "device_properties(9999)")

    def memory_info_bad_device(c: Ctx) -> str:
        free, total = abi.C.c_uint64(), abi.C.c_uint64()
        return expect_error(c, lambda: c.api.call("device_memory_info", 9999,
                                                  abi.C.byref(free), abi.C.byref(total)),
                            (INVALID,), "device_memory_info(9999)")

    def alloc_too_large(c: Ctx) -> str:
        return expect_error(c, lambda: c.api.alloc(c.dev, c.stream, 1 << 62), (OOM,),
                            "mem_alloc of 2^62 bytes")

    return {f.__name__: f for f in (
        negative_stride, overflowing_stride, overflowing_shape, negative_shape,
        descriptor_past_allocation, output_past_allocation, byte_offset_past_allocation,
        freed_handle, unknown_handle, null_handle, zero_unknown_handle, kernel_bad_device,
        free_twice,
        free_offset_handle, free_unknown_handle, h2d_out_of_bounds, d2h_out_of_bounds,
        d2d_out_of_bounds, memset_out_of_bounds, memset_bad_elem_size, use_after_stream_free,
        alloc_bad_device, alloc_negative_device, stream_create_bad_device,
        event_create_bad_device, properties_bad_device, memory_info_bad_device,
        alloc_too_large)}


# ---- group "values": refusals derived from the op set, for every op and dtype ----------------

def _value_cases(t: Target) -> dict[str, Callable[[Ctx], str]]:
    from . import refusals

    out: dict[str, Callable[[Ctx], str]] = {}
    for op in t.ops():
        for dtype in op.dtypes:
            for r in refusals.refusals_for(op.name, dtype):
                out[f"{op.name}[{dtype}]-{r.name}"] = _value_case(op.name, dtype, r)
    return out


def _value_case(op: str, dtype: str, r) -> Callable[[Ctx], str]:
    def run(c: Ctx) -> str:
        from ..contract import opset
        from ..core import ops, shapes
        from ..core.array import DeviceArray
        from .runner import dtype_of

        if c.t.exclusion(op, dtype):
            raise Skip(f"excluded by the plugin: {c.t.exclusion(op, dtype)}")
        c.need(op, dtype)
        schema = opset.get(op)
        ins = [None if x is None else DeviceArray.from_numpy(x, c.device) for x in r.inputs]
        attrs = ops.normalize_attrs(schema, dict(r.attrs))
        try:
            out_shapes, _ = shapes.infer(schema, [x.shape if x is not None else None
                                                  for x in ins], attrs, r.shape or (4,))
        except UnidevError:  # the shape rule refuses too (arange); the kernel gets an output
            out_shapes = [r.shape or (4,)] * len(schema.outputs)
        outs = [DeviceArray.empty(shp, dtype_of(o, dtype, attrs), c.device)
                for o, shp in zip(schema.outputs, out_shapes, strict=True)]
        k = c.lib.kernel(op, dtype)
        attr_list = [(a.name, a.type, attrs[a.name]) for a in schema.attrs]
        descs = [x.descriptor() if x is not None else None for x in ins]
        index = "[-1]=" in r.name
        try:
            return expect_error(c, lambda: k(c.dev, descs, [o.descriptor() for o in outs],
                                             attr_list, c.stream),
                                (INVALID, OOB) if index else (INVALID,), r.what,
                                sync=lambda: c.lib.stream_synchronize(c.stream))
        except AssertionError as exc:
            if "accepted without an error" not in str(exc):
                raise
            wrote = ", ".join(f"{o.name}={_head(d)}" for o, d in zip(schema.outputs, outs,
                                                                      strict=True))
            raise AssertionError(f"{exc}; it wrote {wrote}") from None
    return run


def _head(a) -> str:
    try:
        v = a.numpy().reshape(-1)
    except UnidevError as exc:  # a plugin that marks the output failed: say so
        return f"<unreadable: {exc}>"
    return np.array2string(v[:4], separator=", ") + (" ..." if v.size > 4 else "")


_GROUPS: dict[str, Callable[[], dict]] = {"ops": _ops_cases, "direct": _direct_cases,
                                          "raw": _raw_cases}


def _group_cases(t: Target, group: str) -> dict[str, Callable[[Ctx], str]]:
    if group == "tier4":
        from . import tier4

        return tier4.bad_cases(t)  # none unless the run covers tier 4
    return _value_cases(t) if group == "values" else _GROUPS[group]()


def case_names(t: Target) -> list[tuple[str, str]]:
    """(group, case) for every bad-input case, in run order."""
    return [(g, name) for g in GROUP_NAMES for name in _group_cases(t, g)]


# ---- running a group in a child process -------------------------------------------------------

def _child_env() -> dict:
    env = dict(os.environ)
    paths = [p for p in sys.path if p and os.path.isdir(p)]
    env["PYTHONPATH"] = os.pathsep.join(paths + [env.get("PYTHONPATH", "")])
    return env


def run_group(t: Target, group: str) -> dict[str, dict]:
    """Run every case of `group` in child processes; returns case → {outcome, message}."""
    names = list(_group_cases(t, group))
    results: dict[str, dict] = {}
    start = 0
    while start < len(names):
        # the child resolves the same target: the same tier and ops, so the same case list
        cmd = [sys.executable, "-m", "unidev.conformance.badinputs", t.device, group,
               "--start", str(start), "--tier", str(t.tier)]
        if t.only_ops:
            cmd += ["--ops", ",".join(sorted(t.only_ops))]
        began = time.time()
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, env=_child_env(),
                                  timeout=_TIMEOUT + 5 * (len(names) - start))
            out, err, rc, hung = proc.stdout, proc.stderr, proc.returncode, False
        except subprocess.TimeoutExpired as exc:
            out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
            err = exc.stderr.decode() if isinstance(exc.stderr, bytes) else (exc.stderr or "")
            rc, hung = None, True
        current = None
        for line in out.splitlines():
            if not line.startswith("{"):
                continue
            msg = json.loads(line)
            if msg["event"] == "start":
                current = msg["case"]
            elif msg["event"] == "result":
                results[msg["case"]] = {"outcome": msg["outcome"], "message": msg["message"]}
                current = None
        if current is None:
            if rc == 0 and not hung:
                break
            tail = (err or out)[-800:]
            for name in names[start:]:
                results.setdefault(name, {"outcome": "failed", "message":
                                   f"the child process failed before this case: {tail}"})
            break
        if hung:
            why = f"hung: no answer within {time.time() - began:.0f} s"
        else:
            sig = -rc if rc is not None and rc < 0 else None
            why = (f"crashed the process ({signal.Signals(sig).name})" if sig
                   else f"the process exited with status {rc}")
        tail = "\n".join(err.strip().splitlines()[-6:])
        results[current] = {"outcome": "failed",
                            "message": f"{group}/{current}: {why}" + (f"; stderr: {tail}"
                                                                       if tail else "")}
        start = names.index(current) + 1
    return results


def _child(device: str, group: str, start: int, tier: int | None = None,
           only_ops: str | None = None) -> int:
    from .target import resolve

    t = resolve(device, tier, only_ops)
    lib = t.library
    api = abi.Api(lib.api_address)
    # made through the binding, which passes only streams it made; the ctypes table shares it
    ctx = Ctx(t, lib, t.index, api, abi.Raw(api), lib.stream_create(t.index))
    cases = list(_group_cases(t, group).items())
    for name, fn in cases[start:]:
        print(json.dumps({"event": "start", "case": name}), flush=True)
        try:
            message, outcome = fn(ctx), "passed"
        except Skip as exc:
            message, outcome = str(exc), "skipped"
        except AssertionError as exc:
            message, outcome = f"{group}/{name}: {exc}", "failed"
        except Exception as exc:  # an unexpected exception type is a failure of the case
            message, outcome = f"{group}/{name}: {type(exc).__name__}: {exc}", "failed"
        print(json.dumps({"event": "result", "case": name, "outcome": outcome,
                          "message": message}), flush=True)
    return 0


if __name__ == "__main__":
    import argparse

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("device")
    p.add_argument("group", choices=GROUP_NAMES)
    p.add_argument("--start", type=int, default=0)
    p.add_argument("--tier", type=int, default=None)
    p.add_argument("--ops", default=None)
    a = p.parse_args()
    sys.exit(_child(a.device, a.group, a.start, a.tier, a.ops))
