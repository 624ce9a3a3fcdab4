"""A ctypes mirror of unidev.h, so the suite can read a plugin's table and call it without the
binding's own checks (the adapters call kernels that way, so the plugin must validate itself)."""

from __future__ import annotations

import ctypes as C
from collections.abc import Sequence
from dataclasses import dataclass

from ..contract import dtypes

__all__ = ["Api", "RawTensor", "Raw", "API_FUNCTIONS", "ERROR_CODES"]

ERROR_CODES = {0: "OK", 1: "INVALID_ARGUMENT", 2: "OUT_OF_MEMORY", 3: "OUT_OF_BOUNDS",
               4: "UNKNOWN_HANDLE", 5: "UNSUPPORTED", 6: "NOT_READY", 7: "DEVICE", 8: "INTERNAL"}

_ERR = C.c_void_p  # UD_Error*
_H = C.c_uint64


class DType(C.Structure):
    _fields_ = [("code", C.c_uint8), ("bits", C.c_uint8), ("lanes", C.c_uint16)]


class DeviceRef(C.Structure):
    _fields_ = [("device_type", C.c_int32), ("device_id", C.c_int32)]


class Tensor(C.Structure):
    _fields_ = [("handle", _H), ("device", DeviceRef), ("ndim", C.c_int32), ("dtype", DType),
                ("shape", C.POINTER(C.c_int64)), ("strides", C.POINTER(C.c_int64)),
                ("byte_offset", C.c_uint64)]


class _Ints(C.Structure):
    _fields_ = [("data", C.POINTER(C.c_int64)), ("len", C.c_int64)]


class _AttrValue(C.Union):
    _fields_ = [("i", C.c_int64), ("f", C.c_double), ("b", C.c_int32), ("s", C.c_char_p),
                ("ints", _Ints)]


class Attr(C.Structure):
    _fields_ = [("name", C.c_char_p), ("type", C.c_int), ("value", _AttrValue)]


class KernelArgs(C.Structure):
    _fields_ = [("struct_size", C.c_size_t), ("device", C.c_int32), ("stream", C.c_void_p),
                ("inputs", C.POINTER(Tensor)), ("num_inputs", C.c_int32),
                ("outputs", C.POINTER(Tensor)), ("num_outputs", C.c_int32),
                ("attrs", C.POINTER(Attr)), ("num_attrs", C.c_int32)]


class DeviceProperties(C.Structure):
    _fields_ = [("struct_size", C.c_size_t), ("name", C.c_char * 64),
                ("total_memory", C.c_uint64), ("compute_units", C.c_int32),
                ("vector_width", C.c_int32), ("host_addressable", C.c_int32),
                ("capabilities", C.c_uint32)]


KernelFn = C.CFUNCTYPE(_ERR, C.POINTER(KernelArgs))
_P = C.c_void_p
# (name, restype, argtypes) in the order of UD_Api, after the five header fields
API_FUNCTIONS: list[tuple[str, object, list]] = [
    ("error_code", C.c_int, [_ERR]),
    ("error_message", C.c_char_p, [_ERR]),
    ("error_destroy", None, [_ERR]),
    ("device_count", _ERR, [C.POINTER(C.c_int32), C.POINTER(C.c_char_p)]),
    ("device_properties", _ERR, [C.c_int32, C.POINTER(DeviceProperties)]),
    ("device_memory_info", _ERR, [C.c_int32, C.POINTER(C.c_uint64), C.POINTER(C.c_uint64)]),
    ("device_synchronize", _ERR, [C.c_int32]),
    ("mem_alloc", _ERR, [C.c_int32, _P, C.c_uint64, C.POINTER(_H)]),
    ("mem_free", _ERR, [C.c_int32, _P, _H]),
    ("memcpy_h2d", _ERR, [_P, _H, _P, C.c_uint64]),
    ("memcpy_d2h", _ERR, [_P, _P, _H, C.c_uint64]),
    ("memcpy_d2d", _ERR, [_P, _H, _H, C.c_uint64]),
    ("memset", _ERR, [_P, _H, C.c_uint64, C.c_uint32, C.c_uint64]),
    ("stream_create", _ERR, [C.c_int32, C.POINTER(_P)]),
    ("stream_destroy", _ERR, [_P]),
    ("stream_synchronize", _ERR, [_P]),
    ("stream_query", _ERR, [_P, C.POINTER(C.c_int32)]),
    ("stream_wait_event", _ERR, [_P, _P]),
    ("event_create", _ERR, [C.c_int32, C.POINTER(_P)]),
    ("event_destroy", _ERR, [_P]),
    ("event_record", _ERR, [_P, _P]),
    ("event_query", _ERR, [_P, C.POINTER(C.c_int32)]),
    ("event_synchronize", _ERR, [_P]),
    ("event_elapsed", _ERR, [_P, _P, C.POINTER(C.c_double)]),
    ("kernel_lookup", _ERR, [C.c_char_p, DType, C.POINTER(C.c_void_p)]),
]


class ApiTable(C.Structure):
    _fields_ = [("struct_size", C.c_size_t), ("abi_major", C.c_int32), ("abi_minor", C.c_int32),
                ("plugin_name", C.c_char_p), ("plugin_version", C.c_char_p)] + [
        (name, C.c_void_p) for name, _, _ in API_FUNCTIONS]


SIZE_1_0 = C.sizeof(ApiTable)  # the table as ABI 1.0 defines it


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
        for name, res, args in API_FUNCTIONS:
            ptr = getattr(self.table, name)
            if ptr:
                self._fns[name] = C.CFUNCTYPE(res, *args)(ptr)

    def has(self, name: str) -> bool:
        return name in self._fns

    def missing(self) -> list[str]:
        return [name for name, _, _ in API_FUNCTIONS if name not in self._fns]

    def call(self, name: str, *args) -> None:
        """Call `name`; raise PluginError (with the plugin's code and message) on an error."""
        if name not in self._fns:
            raise PluginError(name, 5, "the plugin's table leaves this function NULL")
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
