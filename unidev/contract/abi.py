"""The one ctypes mirror of unidev.h: its structs, the UD_Api table and its size per ABI version."""

from __future__ import annotations

import ctypes as C

from . import errors

__all__ = ["DType", "DeviceRef", "Tensor", "Attr", "KernelArgs", "DeviceProperties", "KernelFn",
           "ApiTable", "API_FUNCTIONS", "HEADER_FIELDS", "ERROR_CODES", "SIZE_1_0", "SIZE_1_1",
           "SIZE_1_2", "SIZES", "covers", "has"]

ERROR_CODES: dict[int, str] = {0: "OK", **{e.code: e.name for e in errors.ERRORS}}

_ERR = C.c_void_p  # UD_Error*
_H = C.c_uint64
_P = C.c_void_p


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

HEADER_FIELDS = [("struct_size", C.c_size_t), ("abi_major", C.c_int32), ("abi_minor", C.c_int32),
                 ("plugin_name", C.c_char_p), ("plugin_version", C.c_char_p)]

# (name, restype, argtypes, minor) in UD_Api order after the header fields; `minor` is the ABI
# 1.x that added the function: 1.0's are all required, later ones read only when `has`.
API_FUNCTIONS: list[tuple[str, object, list, int]] = [
    ("error_code", C.c_int, [_ERR], 0),
    ("error_message", C.c_char_p, [_ERR], 0),
    ("error_destroy", None, [_ERR], 0),
    ("device_count", _ERR, [C.POINTER(C.c_int32), C.POINTER(C.c_char_p)], 0),
    ("device_properties", _ERR, [C.c_int32, C.POINTER(DeviceProperties)], 0),
    ("device_memory_info", _ERR, [C.c_int32, C.POINTER(C.c_uint64), C.POINTER(C.c_uint64)], 0),
    ("device_synchronize", _ERR, [C.c_int32], 0),
    ("mem_alloc", _ERR, [C.c_int32, _P, C.c_uint64, C.POINTER(_H)], 0),
    ("mem_free", _ERR, [C.c_int32, _P, _H], 0),
    ("memcpy_h2d", _ERR, [_P, _H, _P, C.c_uint64], 0),
    ("memcpy_d2h", _ERR, [_P, _P, _H, C.c_uint64], 0),
    ("memcpy_d2d", _ERR, [_P, _H, _H, C.c_uint64], 0),
    ("memset", _ERR, [_P, _H, C.c_uint64, C.c_uint32, C.c_uint64], 0),
    ("stream_create", _ERR, [C.c_int32, C.POINTER(_P)], 0),
    ("stream_destroy", _ERR, [_P], 0),
    ("stream_synchronize", _ERR, [_P], 0),
    ("stream_query", _ERR, [_P, C.POINTER(C.c_int32)], 0),
    ("stream_wait_event", _ERR, [_P, _P], 0),
    ("event_create", _ERR, [C.c_int32, C.POINTER(_P)], 0),
    ("event_destroy", _ERR, [_P], 0),
    ("event_record", _ERR, [_P, _P], 0),
    ("event_query", _ERR, [_P, C.POINTER(C.c_int32)], 0),
    ("event_synchronize", _ERR, [_P], 0),
    ("event_elapsed", _ERR, [_P, _P, C.POINTER(C.c_double)], 0),
    ("kernel_lookup", _ERR, [C.c_char_p, DType, C.POINTER(C.c_void_p)], 0),
    ("mem_device", _ERR, [_H, C.POINTER(C.c_int32)], 1),
    ("kernel_compile", _ERR, [C.c_char_p, DType, C.POINTER(Attr), C.c_int32,
                              C.POINTER(C.c_void_p)], 2),
]


class ApiTable(C.Structure):
    """UD_Api as this unidev defines it; a plugin's table may be shorter (see `covers`)."""

    _fields_ = HEADER_FIELDS + [(name, C.c_void_p) for name, _, _, _ in API_FUNCTIONS]


def _end(name: str) -> int:
    return getattr(ApiTable, name).offset + getattr(ApiTable, name).size


SIZE_1_0 = _end("kernel_lookup")  # UD_API_SIZE_1_0
SIZE_1_1 = _end("mem_device")     # UD_API_SIZE_1_1
SIZE_1_2 = _end("kernel_compile")  # UD_API_SIZE_1_2
SIZES: dict[tuple[int, int], int] = {(1, 0): SIZE_1_0, (1, 1): SIZE_1_1, (1, 2): SIZE_1_2}


def covers(table: ApiTable, name: str) -> bool:
    """Whether the plugin's struct_size holds field `name` (reading it is then defined)."""
    return table.struct_size >= _end(name)


def has(table: ApiTable, name: str) -> bool:
    """UD_API_HAS: the table holds function `name` and sets it."""
    return covers(table, name) and bool(getattr(table, name))
