"""Entry point that torch runs at ``import torch`` (group torch.backends); it never raises."""

from __future__ import annotations

import warnings


def autoload() -> None:
    """Register the unidev device with torch, or warn with the real cause and leave torch intact."""
    try:
        from . import backend
    except ImportError:
        return  # the adapter is not part of this installation
    try:
        backend.setup()
    except Exception as exc:  # torch must keep importing whatever happens here
        warnings.warn(f"unidev: the PyTorch adapter did not load: {type(exc).__name__}: {exc}",
                      RuntimeWarning, stacklevel=2)
