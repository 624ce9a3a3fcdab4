"""What users ask the PyTorch adapter: which ops ran on the CPU, and the device in use."""

from __future__ import annotations

__all__ = ["load", "device_name", "fallback_report", "reset_fallbacks", "registered_ops"]


def load() -> str:
    """Bind PrivateUse1 to the chosen plugin if autoload did not; returns the torch device name."""
    from .adapters.torch import _backend

    return _backend.load().torch_name


def device_name() -> str:
    """The torch device type of the unidev backend, e.g. ``"aurora"``."""
    return load()


def fallback_report() -> dict[str, int]:
    """Aten operators that ran on the CPU instead of the device since the last reset, counted."""
    from .adapters.torch import _backend

    return dict(sorted(_backend.load().ext.fallback_counts().items()))


def reset_fallbacks() -> None:
    """Zero the fallback counters."""
    from .adapters.torch import _backend

    _backend.load().ext.reset_fallbacks()


def registered_ops() -> list[str]:
    """Aten operators with a device kernel (everything else falls back to the CPU)."""
    from .adapters.torch import _backend

    return list(_backend.load().ext.registered_ops())
