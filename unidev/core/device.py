"""Device names ("aurora", "aurora:1") resolved to a plugin's loaded library and index."""

from __future__ import annotations

from dataclasses import dataclass

from . import discovery
from .errors import InvalidArgumentError, PluginLoadError

__all__ = ["Device", "device"]


@dataclass(frozen=True)
class Device:
    plugin: str
    index: int

    def __str__(self) -> str:
        return f"{self.plugin}:{self.index}"

    @property
    def library(self):
        return discovery.load(self.plugin)

    @property
    def host_addressable(self) -> bool:
        spec = discovery.get(self.plugin).spec
        return bool(spec and spec.host_addressable)


def device(spec: str | Device) -> Device:
    """Parse "name" or "name:index" and check the plugin has that device."""
    if isinstance(spec, Device):
        # a Device built by hand reaches the binding as is; its index must at least be an int32
        if isinstance(spec.index, bool) or not isinstance(spec.index, int) or \
                not 0 <= spec.index < 2**31 or not isinstance(spec.plugin, str):
            raise InvalidArgumentError(f"device: {spec!r}: expected a plugin name and an index in "
                                       f"[0, 2**31)")
        return spec
    if not isinstance(spec, str):
        raise InvalidArgumentError(f"device: expected a string like 'x86:0', got {spec!r}")
    name, _, idx = spec.partition(":")
    try:
        index = int(idx) if idx else 0
    except ValueError:
        raise InvalidArgumentError(f"device {spec!r}: index {idx!r} is not an integer") from None
    rec = discovery.get(name)
    if rec.status != discovery.OK:
        raise PluginLoadError(f"device {spec!r}: plugin {name!r} is {rec.status}: {rec.error}")
    if not 0 <= index < rec.devices:
        raise InvalidArgumentError(f"device {spec!r}: index {index} out of range; plugin "
                                   f"{name!r} has {rec.devices} device(s)")
    return Device(name, index)
