"""Binds torch's PrivateUse1 device to the chosen unidev plugin: pick, build, load, register."""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import re
import threading
import time
from dataclasses import dataclass
from types import ModuleType

from ...core import cache as _cache
from ...core import discovery

_lock = threading.Lock()
_FALLBACK_MODES = {"": 0, "count": 0, "warn": 1, "error": 2}


@dataclass
class State:
    """What this process's torch backend is bound to."""

    plugin: str | None = None
    torch_name: str | None = None
    ext: ModuleType | None = None


STATE = State()


class NoDevice(RuntimeError):
    """No plugin is broken, there is just nothing to bind (no devices, not applicable, none)."""


def choose() -> discovery.PluginRecord:
    """The plugin for PrivateUse1: ``UNIDEV_TORCH_DEVICE`` or the highest-priority usable one."""
    wanted = os.environ.get("UNIDEV_TORCH_DEVICE", "").strip()
    records = discovery.discover()
    if wanted:
        for rec in records:
            if rec.name == wanted or (rec.spec and rec.spec.torch_name == wanted):
                if not rec.usable:
                    raise RuntimeError(f"UNIDEV_TORCH_DEVICE={wanted!r}: plugin is {rec.status}"
                                       f": {rec.error}")
                return rec
        names = ", ".join(r.name for r in records) or "none"
        raise RuntimeError(f"UNIDEV_TORCH_DEVICE={wanted!r}: no such plugin (installed: {names})")
    usable = [r for r in records if r.usable]
    if not usable:
        why = "; ".join(f"{r.name}: {r.status} ({r.error})" for r in records) or "none installed"
        broken = any(r.status == discovery.BROKEN for r in records)
        raise (RuntimeError if broken else NoDevice)(f"no usable unidev plugin for torch ({why})")
    return max(usable, key=lambda r: r.spec.priority)


def torch_name(spec) -> str:
    """The plugin's torch device type; torch accepts only [a-z_]+ (no digits)."""
    if not re.fullmatch(r"[a-z_]+", spec.torch_name):
        raise RuntimeError(f"plugin {spec.name!r}: torch_name {spec.torch_name!r} is not a valid "
                           "torch device type (letters and '_' only); the plugin must declare one")
    return spec.torch_name


def _fallback_mode() -> int:
    raw = os.environ.get("UNIDEV_FALLBACK", "").strip().lower()
    if raw not in _FALLBACK_MODES:
        raise ValueError(f"UNIDEV_FALLBACK={raw!r}: expected one of warn, error (or unset)")
    return _FALLBACK_MODES[raw]


def load() -> State:
    """Make the chosen plugin torch's PrivateUse1 device (once per process); raises on failure."""
    with _lock:
        if STATE.ext is not None:
            return STATE
        import torch

        from . import build, device_module

        rec = choose()
        spec = rec.spec
        lib = discovery.load(rec.name)  # loaded and ABI-checked once, by the core's loader
        ext = build.import_extension(build.library())
        name, mode = torch_name(spec), _fallback_mode()
        ext.init(lib.api_address, spec.library, name)  # the same table: no second dlopen
        ext.set_fallback_mode(mode)
        if torch._C._get_privateuse1_backend_name() != name:
            torch.utils.rename_privateuse1_backend(name)
        torch._register_device_module(name, device_module.make(name, ext, lib))
        torch.utils.generate_methods_for_privateuse1_backend(for_storage=True)
        _patch_dlpack_device(torch, name)
        atexit.register(_release_gil_for_autograd_threads)
        STATE.plugin, STATE.torch_name, STATE.ext = rec.name, name, ext
        record(ok=True, plugin=rec.name)
        return STATE


def _release_gil_for_autograd_threads() -> None:
    """torch's device autograd thread frees a finished backward's GraphTask after waking the
    caller, and that free takes the GIL; if the script ends first, the interpreter kills the
    waiting thread during finalization and std::terminate aborts the process (~7 % of short
    scripts on x86). Letting go of the GIL once, before finalization, lets the free finish."""
    time.sleep(0.01)


def _patch_dlpack_device(torch, name: str) -> None:
    """torch 2.13's Tensor.__dlpack_device__ tests for the type "privateuse1" and so rejects a
    renamed backend; its C++ exporter already labels such tensors kDLExtDev, so say the same."""
    original = torch.Tensor.__dlpack_device__
    if getattr(original, "_unidev", False):
        return
    from torch.utils.dlpack import DLDeviceType

    def __dlpack_device__(self):
        if self.device.type == name:
            return (DLDeviceType.kDLExtDev, self.device.index or 0)
        return original(self)

    __dlpack_device__._unidev = True
    torch.Tensor.__dlpack_device__ = __dlpack_device__


def record(ok: bool, plugin: str | None = None, error: str | None = None) -> None:
    """Remember the last load's outcome for `unidev list` (another process)."""
    data = {"ok": ok, "plugin": plugin, "error": error, "time": time.time(), "pid": os.getpid()}
    with contextlib.suppress(OSError):
        (_cache.cache_root() / "torch-last-load.json").write_text(json.dumps(data))


def last_load() -> dict | None:
    with contextlib.suppress(OSError, ValueError):
        return json.loads((_cache.cache_root() / "torch-last-load.json").read_text())
    return None
