"""What users ask the PyTorch adapter: which ops ran on the CPU, and the device in use."""

from __future__ import annotations

__all__ = ["load", "device_name", "fallback_report", "reset_fallbacks", "registered_ops",
           "swap_conv2d", "swap_backend", "unswap", "algorithm_selection"]


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


def swap_conv2d(model, selector="auto", *, example_inputs=None):
    """Choose the algorithm of every ``nn.Conv2d`` of `model` (forward and both gradients), in
    place: a name, a list (one per conv layer), a function of the layer, "auto" or "autotune".
    See unidev.algorithms.torch_frontend.swap_backend and docs/algorithms.md."""
    from .algorithms import torch_frontend

    return torch_frontend.swap_conv2d(model, selector, example_inputs=example_inputs)


def swap_backend(model, selectors, *, example_inputs=None):
    """Like swap_conv2d with a selector per op: ``{"conv2d": s, "conv2d_backward_input": s2,
    "conv2d_backward_weight": s3}`` ("conv2d"'s serves a gradient left out)."""
    from .algorithms import torch_frontend

    return torch_frontend.swap_backend(model, selectors, example_inputs=example_inputs)


def unswap(model) -> None:
    """Undo swap_conv2d / swap_backend: the convs run the plugin's "auto" again."""
    from .algorithms import torch_frontend

    torch_frontend.unswap(model)


def algorithm_selection(model) -> dict:
    """Swapped conv layer name -> {op: algorithm} (and the autotuned choice per input shape)."""
    from .algorithms import torch_frontend

    return torch_frontend.selection(model)
