"""The unidev plugin for aarch64 CPUs: plugins/x86's kernels built for NEON, conv over OpenBLAS."""

from __future__ import annotations

import os
import platform
from pathlib import Path

from unidev.kit import Conformance, PluginSpec, conv_algorithms, hookimpl, native_counters

__all__ = ["library_path", "unidev_algorithms", "unidev_debug_counters", "unidev_plugin"]

_LIBRARY = "libunidev_arm64.so"


def library_path() -> str:
    """The native library: ``$UNIDEV_ARM64_LIBRARY`` (a development build) or the installed one."""
    return os.environ.get("UNIDEV_ARM64_LIBRARY") or str(Path(__file__).resolve().parent / _LIBRARY)


def _applicable() -> str | None:
    machine = platform.machine()
    if machine not in ("aarch64", "arm64"):
        return f"aarch64 plugin; this machine is {machine}"
    return None


@hookimpl
def unidev_plugin() -> PluginSpec:
    return PluginSpec(
        name="arm64",
        # torch and TF device names take no digits (and TF's no "CPU"): named after the ISA,
        # as x86's are ("avx")
        torch_name="neon",
        tf_type="NEON",
        library=library_path(),
        priority=40,
        host_addressable=True,
        version="0.1.0",
        description="aarch64 host CPU: plugins/x86's ISPC kernels for NEON, OpenBLAS, own conv",
        conformance=Conformance(tier=4),
        applicable=_applicable(),
    )


@hookimpl
def unidev_debug_counters() -> dict[str, int]:
    """The native library's counters (src/layout.c in plugins/x86): layout_copies, ..."""
    return native_counters(library_path(), "ud_x86")


# plugins/x86's src/dense/conv.cpp built without oneDNN: its "auto" picks among these three
@hookimpl
def unidev_algorithms() -> dict:
    """The conv algorithms of every conv op (forward, both gradients, conv2d_bias_act)."""
    return conv_algorithms(
        dict(name="direct", description="direct loops (ISPC for depthwise): thin or depthwise"),
        dict(name="im2col", description="im2col + OpenBLAS GEMM per (image, group)"),
        dict(name="winograd", description="Winograd F(2x2, 3x3): 16 GEMMs over 4x4 tiles",
             requires={"kernel": (3, 3), "stride": (1, 1), "dilation": (1, 1)}))
