"""The data a plugin returns from its ``unidev_plugin`` hook."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = ["PluginSpec", "Conformance"]

_TF_TYPE = re.compile(r"^[A-Z][A-Z_]*$")
_TORCH_NAME = re.compile(r"^[a-z_]+$")  # torch's device-string parser takes nothing else
_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
# torch device types a PrivateUse1 backend must not shadow
_TORCH_BUILTIN = {"cpu", "cuda", "mps", "xpu", "xla", "meta", "hip", "ve", "ipu", "mtia", "hpu",
                  "lazy", "vulkan", "mkldnn", "opengl", "opencl", "ideep", "fpga", "maia",
                  "privateuseone"}


@dataclass(frozen=True)
class Conformance:
    """A plugin's conformance settings.

    ``exclusions``: ``"op"`` or ``"op:dtype"`` → reason; excluded cases are reported, not run.
    ``tolerances``: dtype name → (rtol, atol), used only where tighter than the suite's.
    ``tier``: the highest op tier the plugin claims.
    """

    exclusions: dict[str, str] = field(default_factory=dict)
    tolerances: dict[str, tuple[float, float]] = field(default_factory=dict)
    tier: int = 0


@dataclass(frozen=True)
class PluginSpec:
    """What a plugin says about itself (see ``unidev.contract.hookspecs.unidev_plugin``)."""

    name: str
    library: str
    torch_name: str = ""
    tf_type: str = ""
    priority: int = 0
    host_addressable: bool = False
    version: str = "0"
    description: str = ""
    conformance: Conformance = field(default_factory=Conformance)
    applicable: str | None = None

    def __post_init__(self) -> None:
        if not _NAME.match(self.name):
            raise ValueError(f"PluginSpec.name: {self.name!r} must match [a-z][a-z0-9_]*")
        if not self.torch_name:
            object.__setattr__(self, "torch_name", self.name)
        if not self.tf_type:
            object.__setattr__(self, "tf_type", self.name.upper())
        if not _TORCH_NAME.match(self.torch_name):
            raise ValueError(f"PluginSpec.torch_name: {self.torch_name!r} must match [a-z_]+ "
                             "(torch rejects device strings with digits or other characters)")
        if not _TF_TYPE.match(self.tf_type):
            raise ValueError(f"PluginSpec.tf_type: {self.tf_type!r} must match [A-Z][A-Z_]* "
                             "(TensorFlow aborts on anything else)")
        if "CPU" in self.tf_type:
            raise ValueError(f"PluginSpec.tf_type: {self.tf_type!r} contains 'CPU'; TensorFlow's "
                             "oneDNN rewrites claim such device types and their ops then fail")
        if self.torch_name in _TORCH_BUILTIN:
            raise ValueError(f"PluginSpec.torch_name: {self.torch_name!r} is a built-in torch "
                             "device type; choose another")
