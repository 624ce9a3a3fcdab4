"""The one error vocabulary: each UD_ErrorCode's name, Python kind, unidev class and TF code."""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["ErrorCode", "Kind", "KIND_TABLE", "ERRORS", "KINDS_BY_NAME", "ERROR_KINDS", "BY_CODE",
           "BY_NAME"]


class Kind(NamedTuple):
    """How a family of codes surfaces in Python: the builtin type and torch's check form."""

    name: str          # UD_KIND_<name> in the generated ops.h
    python: type       # the builtin every door raises (unidev's class subclasses it)
    torch_check: str   # the TORCH_CHECK form the torch adapter raises it with


class ErrorCode(NamedTuple):
    """One UD_ErrorCode of unidev.h and how each door reports it."""

    code: int          # the UD_ErrorCode value
    name: str          # UD_ERR_<name>
    kind: str          # a Kind name
    exception: str     # the class unidev.core.errors raises for it
    tf_code: str       # TF_<tf_code>, the TF_Code the TensorFlow adapter returns


KIND_TABLE: tuple[Kind, ...] = (
    Kind("VALUE", ValueError, "TORCH_CHECK_VALUE"),
    Kind("INDEX", IndexError, "TORCH_CHECK_INDEX"),
    Kind("NOT_IMPLEMENTED", NotImplementedError, "TORCH_CHECK_NOT_IMPLEMENTED"),
    Kind("MEMORY", MemoryError, "TORCH_CHECK_WITH(OutOfMemoryError, ...)"),
    Kind("RUNTIME", RuntimeError, "TORCH_CHECK"),
)

# In unidev.h's order. NOT_READY is a query's answer, not a failure: no class of its own.
ERRORS: tuple[ErrorCode, ...] = (
    ErrorCode(1, "INVALID_ARGUMENT", "VALUE", "InvalidArgumentError", "INVALID_ARGUMENT"),
    ErrorCode(2, "OUT_OF_MEMORY", "MEMORY", "DeviceOutOfMemoryError", "RESOURCE_EXHAUSTED"),
    ErrorCode(3, "OUT_OF_BOUNDS", "INDEX", "OutOfBoundsError", "OUT_OF_RANGE"),
    ErrorCode(4, "UNKNOWN_HANDLE", "VALUE", "UnknownHandleError", "INVALID_ARGUMENT"),
    ErrorCode(5, "UNSUPPORTED", "NOT_IMPLEMENTED", "UnsupportedError", "UNIMPLEMENTED"),
    ErrorCode(6, "NOT_READY", "RUNTIME", "UnidevError", "UNAVAILABLE"),
    ErrorCode(7, "DEVICE", "RUNTIME", "DeviceError", "INTERNAL"),
    ErrorCode(8, "INTERNAL", "RUNTIME", "InternalError", "INTERNAL"),
)

KINDS_BY_NAME: dict[str, Kind] = {k.name: k for k in KIND_TABLE}
ERROR_KINDS: dict[str, str] = {e.name: e.kind for e in ERRORS}  # read by unidev.contract.gen
BY_CODE: dict[int, ErrorCode] = {e.code: e for e in ERRORS}
BY_NAME: dict[str, ErrorCode] = {e.name: e for e in ERRORS}
