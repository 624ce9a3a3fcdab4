"""Entry point ``torch.backends`` → ``autoload``: makes the device available at ``import torch``."""

from __future__ import annotations

import contextlib
import warnings

_done = False


def autoload() -> None:
    """Bind PrivateUse1 to the best unidev plugin; never raises (torch must keep importing).

    torch skips every ``torch.backends`` entry point when ``TORCH_DEVICE_BACKEND_AUTOLOAD=0``.
    On failure this warns once with the real cause and records it for ``unidev list``.
    """
    global _done
    if _done:
        return
    _done = True
    try:
        from . import _backend

        _backend.load()
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # SystemExit from plugin code too: import torch must go on
        msg = f"{type(exc).__name__}: {exc}"
        with contextlib.suppress(Exception):  # e.g. the cache folder is not writable
            from . import _backend

            _backend.record(ok=False, error=msg)
            if isinstance(exc, _backend.NoDevice):
                return  # nothing is wrong: no device to offer; `unidev list` says why
        warnings.warn(f"unidev: the PyTorch device backend was not loaded: {msg}",
                      RuntimeWarning, stacklevel=2)
