"""unidev plugin for the SX-Aurora Vector Engine (emulated by vesim): where its library is."""

from __future__ import annotations

from pathlib import Path

from unidev.kit import Conformance, PluginSpec, conv_algorithms, hookimpl, native_counters

__all__ = ["library_path", "unidev_algorithms", "unidev_debug_counters", "unidev_plugin"]

_COUNTERS = ("layout_copies",)

__version__ = "0.1.0"


def library_path() -> str:
    """Absolute path of the plugin's native library (installed beside this module)."""
    return str(Path(__file__).resolve().parent / "libunidev_aurora.so")


@hookimpl
def unidev_plugin() -> PluginSpec:
    return PluginSpec(
        name="aurora",
        torch_name="aurora",
        tf_type="AURORA",
        library=library_path(),
        priority=50,
        host_addressable=False,
        version=__version__,
        description="NEC SX-Aurora Vector Engine on vesim (VESIM_DEVICES, VESIM_MEMORY, "
                    "VESIM_LATENCY=veda)",
        conformance=Conformance(tier=4),  # tiers 0-2 and 4 (tier 3 has no ops yet)
    )


@hookimpl
def unidev_debug_counters() -> dict[str, int]:
    """The native library's counters (src/layout.cpp): layout_copies, counted as calls are made."""
    return native_counters(library_path(), "ud_aurora", _COUNTERS)


# What src/conv.cpp accepts as `algorithm` besides "auto" ("auto" also has register tiles for
# unit-stride layers with few input taps, which no name selects)
@hookimpl
def unidev_algorithms() -> dict:
    """The conv algorithms of every conv op (forward, both gradients, conv2d_bias_act)."""
    return conv_algorithms(
        dict(name="im2col", description="im2col + BLAS GEMM per (image, group) on a column buffer"),
        dict(name="direct", description="direct loops over output planes, one per core, output "
             "rows as the vector loop"))
