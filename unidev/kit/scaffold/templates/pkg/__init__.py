"""unidev plugin '{{name}}': describes the native library to unidev (entry point group unidev)."""

from __future__ import annotations

from pathlib import Path

from unidev.kit import Conformance, PluginSpec, hookimpl

__version__ = "0.1.0"


def library_path() -> str:
    """The native library, installed beside this module by CMake."""
    return str(Path(__file__).resolve().parent / "libunidev_{{name}}.so")


@hookimpl
def unidev_plugin() -> PluginSpec:
    return PluginSpec(
        name="{{name}}",
        library=library_path(),
        host_addressable=True,  # the skeleton's memory is host memory
        version=__version__,
        description="{{name}} device (scaffold)",
        # raise `tier` as you add ops; exclusions map "op" or "op:dtype" to a reason
        conformance=Conformance(tier=0, exclusions={}, tolerances={}),
    )
