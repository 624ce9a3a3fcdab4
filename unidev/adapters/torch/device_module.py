"""The ``torch.<device>`` module (like ``torch.cuda``) for the plugin bound to PrivateUse1."""

from __future__ import annotations

import contextlib
import types
from collections.abc import Iterator
from typing import Any

_MASK = 0xFFFF_FFFF_FFFF_FFFF  # torch seeds are taken modulo 2**64


def make(name: str, ext: Any, lib: Any) -> types.ModuleType:
    """A module for ``torch._register_device_module(name, ...)``: the C++ extension `ext` and the
    plugin's ``unidev._C.Library`` `lib` behind it."""
    import torch

    mod = types.ModuleType(f"torch.{name}", f"torch.{name}: the unidev device '{name}'")

    def _index(device: Any = None) -> int:
        if device is None:
            return ext.current_device()
        if isinstance(device, int):
            return device
        d = torch.device(device)
        return ext.current_device() if d.index is None else d.index

    @contextlib.contextmanager
    def device(device: Any) -> Iterator[None]:
        prev = ext.current_device()
        ext.set_device(_index(device))
        try:
            yield
        finally:
            ext.set_device(prev)

    def manual_seed_all(seed: int) -> None:
        for i in range(ext.device_count()):
            ext.manual_seed(i, int(seed) & _MASK)

    def per_device(fn: Any) -> Any:  # fn(index) behind torch.cuda's `device=None` argument
        return lambda device=None: fn(_index(device))

    table = {
        "is_available": lambda: ext.device_count() > 0,
        "device_count": ext.device_count,
        "current_device": ext.current_device,
        "set_device": lambda device: ext.set_device(_index(device)),
        "device": device,
        "synchronize": per_device(ext.synchronize),
        "current_stream": per_device(lambda i: torch.accelerator.current_stream(
            torch.device(name, i))),
        "memory_stats": per_device(lambda i: dict(ext.memory_stats(i))),
        "reset_peak_memory_stats": per_device(ext.reset_peak_stats),
        "mem_get_info": per_device(lambda i: tuple(ext.mem_get_info(i))),
        "empty_cache": ext.empty_cache,
        "get_device_name": per_device(lambda i: lib.device_properties(i)["name"]),
        "manual_seed": lambda seed: ext.manual_seed(ext.current_device(), int(seed) & _MASK),
        "manual_seed_all": manual_seed_all,
        "initial_seed": lambda: ext.initial_seed(ext.current_device()),
        "get_amp_supported_dtype": lambda: [torch.float32, torch.float64, torch.bfloat16,
                                            torch.float16],
        "is_initialized": lambda: True,
        "_is_in_bad_fork": lambda: False,
        "Stream": torch.Stream,
        "Event": torch.Event,
    }
    for attr, key in (("memory_allocated", "allocated_bytes.all.current"),
                      ("max_memory_allocated", "allocated_bytes.all.peak"),
                      ("memory_reserved", "reserved_bytes.all.current"),
                      ("max_memory_reserved", "reserved_bytes.all.peak")):
        table[attr] = per_device(lambda i, key=key: ext.memory_stats(i)[key])
    for attr, value in table.items():
        setattr(mod, attr, value)
    return mod
