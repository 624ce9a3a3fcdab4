"""unidev's exceptions, one per UD_ErrorCode, so callers can catch what went wrong by type."""

from __future__ import annotations

from ..contract import errors as _vocabulary

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


class UnknownHandleError(UnidevError, ValueError):
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


def _build() -> dict[int, type[UnidevError]]:
    # the contract's table decides the class of each code; the classes only have to exist
    by_code: dict[int, type[UnidevError]] = {}
    for e in _vocabulary.ERRORS:
        cls = globals()[e.exception]
        kind = _vocabulary.KINDS_BY_NAME[e.kind].python
        assert issubclass(cls, kind) and cls.code in (e.code, -1), (e, cls)
        by_code[e.code] = cls
    by_code.update({c.code: c for c in (PluginLoadError, AbiMismatchError)})
    return by_code


_BY_CODE = _build()


def from_code(code: int, message: str) -> UnidevError:
    """The exception for a UD_ErrorCode (used by unidev._C)."""
    cls = _BY_CODE.get(int(code), UnidevError)
    err = cls(message)
    err.code = int(code)
    return err
