"""unidev: one device layer for PyTorch and TensorFlow."""

from __future__ import annotations

from .contract.spec import Conformance, PluginSpec
from .core import ops
from .core.array import DeviceArray
from .core.device import Device, device
from .core.discovery import PluginRecord, debug_counters, discover
from .core.errors import (
    AbiMismatchError,
    DeviceError,
    DeviceOutOfMemoryError,
    InvalidArgumentError,
    OutOfBoundsError,
    PluginLoadError,
    UnidevError,
    UnknownHandleError,
    UnsupportedError,
)

__version__ = "0.1.0"

__all__ = [
    "AbiMismatchError", "Conformance", "Device", "DeviceArray", "DeviceError",
    "DeviceOutOfMemoryError", "InvalidArgumentError", "OutOfBoundsError", "PluginLoadError",
    "PluginRecord", "PluginSpec", "UnidevError", "UnknownHandleError", "UnsupportedError",
    "debug_counters", "device", "discover", "ops",
]
