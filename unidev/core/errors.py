"""unidev's exceptions, one per UD_ErrorCode, so callers can catch what went wrong by type."""

from __future__ import annotations

__all__ = [
    "UnidevError", "InvalidArgumentError", "DeviceOutOfMemoryError", "OutOfBoundsError",
    "UnknownHandleError", "UnsupportedError", "DeviceError", "InternalError", "PluginLoadError",
    "AbiMismatchError", "from_code",
]


class UnidevError(RuntimeError):
    """Base of every unidev error; `code` is the UD_ErrorCode (or 100+ for loader errors)."""

    code = -1


class InvalidArgumentError(UnidevError, ValueError):
    code = 1


class DeviceOutOfMemoryError(UnidevError, MemoryError):
    code = 2


class OutOfBoundsError(UnidevError, IndexError):
    code = 3


class UnknownHandleError(UnidevError):
    code = 4


class UnsupportedError(UnidevError, NotImplementedError):
    code = 5


class DeviceError(UnidevError):
    code = 7


class InternalError(UnidevError):
    code = 8


class PluginLoadError(UnidevError, ImportError):
    code = 100


class AbiMismatchError(PluginLoadError):
    code = 101


_BY_CODE = {cls.code: cls for cls in (
    InvalidArgumentError, DeviceOutOfMemoryError, OutOfBoundsError, UnknownHandleError,
    UnsupportedError, DeviceError, InternalError, PluginLoadError, AbiMismatchError)}


def from_code(code: int, message: str) -> UnidevError:
    """The exception for a UD_ErrorCode (used by unidev._C)."""
    cls = _BY_CODE.get(int(code), UnidevError)
    err = cls(message)
    err.code = int(code)
    return err
