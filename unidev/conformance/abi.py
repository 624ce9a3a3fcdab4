"""Raw calls into a plugin's table past the binding's checks, through unidev.contract.abi."""

# The adapters call kernels that way, so the plugin must validate itself; the ctypes structs
# are unidev.contract.abi's (the one mirror of unidev.h), re-exported here for the suite.

from __future__ import annotations

import ctypes as C
from collections.abc import Sequence
from dataclasses import dataclass

from ..contract import dtypes
from ..contract.abi import (
    API_FUNCTIONS,
    ERROR_CODES,
    SIZE_1_0,
    SIZE_1_1,
    SIZE_1_2,
    SIZES,
    ApiTable,
    Attr,
    DeviceProperties,
    DeviceRef,
    DType,
    KernelArgs,
    KernelFn,
    Tensor,
    _Ints,
    covers,
    has,
)

__all__ = ["Api", "RawTensor", "Raw", "PluginError", "API_FUNCTIONS", "ERROR_CODES", "ApiTable",
           "SIZE_1_0", "SIZE_1_1", "SIZE_1_2", "SIZES", "Attr", "DeviceProperties", "DeviceRef",
           "DType",
           "KernelArgs", "KernelFn", "Tensor", "covers", "has"]

_H = C.c_uint64


class PluginError(Exception):
    """An error object returned by a raw call: code and message, already released."""

    def __init__(self, call: str, code: int, message: str) -> None:
        self.call, self.code, self.message = call, code, message
        super().__init__(f"{call}: {ERROR_CODES.get(code, code)}: {message}")

    @property
    def code_name(self) -> str:
        return ERROR_CODES.get(self.code, f"code {self.code}")


class Api:
    """The plugin's UD_Api table, read through ctypes from ``Library.api_address``."""

    def __init__(self, address: int) -> None:
        self.table = ApiTable.from_address(address)
        self._fns: dict[str, object] = {}
        for name, res, args, _ in API_FUNCTIONS:
            if has(self.table, name):  # never reads past the plugin's struct_size
                self._fns[name] = C.CFUNCTYPE(res, *args)(getattr(self.table, name))

    def has(self, name: str) -> bool:
        return name in self._fns

    def missing(self) -> list[str]:
        """The required (ABI 1.0) functions the table leaves NULL."""
        return [name for name, _, _, minor in API_FUNCTIONS if minor == 0 and name not in self._fns]

    def call(self, name: str, *args) -> None:
        """Call `name`; raise PluginError (with the plugin's code and message) on an error."""
        if name not in self._fns:
            raise PluginError(name, 5, "the plugin's table leaves this function NULL (or its "
                              "struct_size ends before it)")
        self.check(name, self._fns[name](*args))

    def check(self, name: str, err) -> None:
        if not err:
            return
        code = int(self._fns["error_code"](err))
        msg = self._fns["error_message"](err)
        text = msg.decode("utf-8", "replace") if msg else ""
        self._fns["error_destroy"](err)
        raise PluginError(name, code, text)

    # ---- conveniences over the raw table -----------------------------------------------------
    def device_count(self) -> int:
        n, reason = C.c_int32(0), C.c_char_p()
        self.call("device_count", C.byref(n), C.byref(reason))
        return n.value

    def properties(self, device: int, struct_size: int | None = None) -> DeviceProperties:
        p = DeviceProperties()
        p.struct_size = C.sizeof(p) if struct_size is None else struct_size
        self.call("device_properties", device, C.byref(p))
        return p

    def stream(self, device: int) -> int:
        s = C.c_void_p()
        self.call("stream_create", device, C.byref(s))
        return s.value or 0

    def event(self, device: int) -> int:
        e = C.c_void_p()
        self.call("event_create", device, C.byref(e))
        return e.value or 0

    def alloc(self, device: int, stream: int, size: int) -> int:
        h = _H(0)
        self.call("mem_alloc", device, stream, size, C.byref(h))
        return h.value

    def lookup(self, op: str, dtype: str):
        code, bits = dtypes.dlpack_code(dtype)
        fn = C.c_void_p()
        self.call("kernel_lookup", op.encode(), DType(code, bits, 1), C.byref(fn))
        return KernelFn(fn.value) if fn.value else None

    def compile(self, op: str, dtype: str, attrs: Sequence[tuple[str, str, object]]):
        """kernel_compile (ABI 1.2) with these (name, type, value) attributes: the kernel, or
        None for "no specialization"; PluginError on a refusal."""
        code, bits = dtypes.dlpack_code(dtype)
        keep: list = []
        tat = (Attr * max(len(attrs), 1))()
        for i, (name, kind, value) in enumerate(attrs):
            tat[i] = _attr(name, kind, value, keep)
        fn = C.c_void_p()
        self.call("kernel_compile", op.encode(), DType(code, bits, 1), tat, len(attrs),
                  C.byref(fn))
        return KernelFn(fn.value) if fn.value else None

    def mem_device(self, handle: int) -> int:
        device = C.c_int32(-1)
        self.call("mem_device", handle, C.byref(device))
        return device.value

    def elapsed(self, start: int, end: int) -> float:
        ms = C.c_double(0.0)
        self.call("event_elapsed", start, end, C.byref(ms))
        return ms.value


@dataclass
class RawTensor:
    """A descriptor built by hand, free to be malformed (negative strides, bad extents...)."""

    handle: int
    dtype: str
    shape: Sequence[int]
    strides: Sequence[int] | None = None  # None: contiguous
    byte_offset: int = 0
    device: int = 0
    device_type: int = 1
    ndim: int | None = None  # overrides len(shape), e.g. -1 for an absent input

    def build(self, keep: list) -> Tensor:
        shape = list(self.shape)
        strides = list(self.strides) if self.strides is not None else _contig(shape)
        sh = (C.c_int64 * max(len(shape), 1))(*shape)
        st = (C.c_int64 * max(len(strides), 1))(*strides)
        keep += [sh, st]
        code, bits = dtypes.dlpack_code(self.dtype)
        ndim = len(shape) if self.ndim is None else self.ndim
        return Tensor(self.handle, DeviceRef(self.device_type, self.device), ndim,
                      DType(code, bits, 1), C.cast(sh, C.POINTER(C.c_int64)),
                      C.cast(st, C.POINTER(C.c_int64)), self.byte_offset)


def _contig(shape: Sequence[int]) -> list[int]:
    out, acc = [], 1
    for d in reversed(shape):
        out.append(acc)
        acc *= max(d, 1)
    return out[::-1]


class Raw:
    """Raw kernel calls: descriptors and attributes exactly as given, no checks on our side."""

    def __init__(self, api: Api) -> None:
        self.api = api

    def kernel(self, op: str, dtype: str, device: int, stream: int,
               inputs: Sequence[RawTensor | None], outputs: Sequence[RawTensor],
               attrs: Sequence[tuple[str, str, object]], struct_size: int | None = None) -> None:
        fn = self.api.lookup(op, dtype)
        if fn is None:
            raise PluginError("kernel_lookup", 5, f"no kernel for {op}[{dtype}]")
        keep: list = []
        tin = (Tensor * max(len(inputs), 1))()
        for i, t in enumerate(inputs):
            tin[i] = t.build(keep) if t is not None else Tensor(ndim=-1)
        tout = (Tensor * max(len(outputs), 1))()
        for i, t in enumerate(outputs):
            tout[i] = t.build(keep)
        tat = (Attr * max(len(attrs), 1))()
        for i, (name, kind, value) in enumerate(attrs):
            tat[i] = _attr(name, kind, value, keep)
        args = KernelArgs(C.sizeof(KernelArgs) if struct_size is None else struct_size, device,
                          stream, tin, len(inputs), tout, len(outputs), tat, len(attrs))
        self.api.check(op, fn(C.byref(args)))


_ATTR_TYPES = {"int": 0, "float": 1, "bool": 2, "str": 3, "ints": 4}


def _attr(name: str, kind: str, value, keep: list) -> Attr:
    a = Attr()
    raw_name = name.encode()
    keep.append(raw_name)  # the descriptor points into these bytes; keep them alive
    a.name = raw_name
    a.type = _ATTR_TYPES[kind]
    if kind == "int":
        a.value.i = int(value)
    elif kind == "float":
        a.value.f = float(value)
    elif kind == "bool":
        a.value.b = int(bool(value))
    elif kind == "str":
        raw = str(value).encode()
        keep.append(raw)
        a.value.s = raw
    else:
        arr = (C.c_int64 * max(len(value), 1))(*value)
        keep.append(arr)
        a.value.ints = _Ints(C.cast(arr, C.POINTER(C.c_int64)), len(value))
    return a
