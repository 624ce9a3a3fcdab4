"""Lines about the PyTorch adapter for ``unidev list``; never imports torch."""

from __future__ import annotations

import importlib.util
import os
import time


def summary() -> list[str]:
    """Which plugin torch would use, whether the adapter is built, and the last load's outcome."""
    if importlib.util.find_spec("torch") is None:
        return ["torch adapter: torch is not installed"]
    from . import _backend, build

    why = "UNIDEV_TORCH_DEVICE" if os.environ.get("UNIDEV_TORCH_DEVICE") else "highest priority"
    try:
        rec = _backend.choose()
        lines = [f"torch adapter: device '{_backend.torch_name(rec.spec)}' = plugin {rec.name} "
                 f"({why})"]
    except Exception as exc:
        lines = [f"torch adapter: no device: {exc}"]
    path = build.cached()
    lines.append(f"  build: {path}" if path else
                 "  build: not built for this torch yet (unidev build torch, or first use)")
    if last := _backend.last_load():
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(last.get("time", 0)))
        lines.append(f"  last load ({when}): " + (f"ok, plugin {last.get('plugin')}" if last["ok"]
                                                  else f"FAILED: {last.get('error')}"))
    return lines
