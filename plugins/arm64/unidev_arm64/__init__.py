"""The unidev plugin for aarch64 CPUs: plugins/x86's kernels built for NEON, conv over OpenBLAS."""

from __future__ import annotations

import ctypes
import os
import platform
from pathlib import Path

from unidev.kit import Conformance, PluginSpec, hookimpl

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
        conformance=Conformance(tier=2),
        applicable=_applicable(),
    )


@hookimpl
def unidev_debug_counters() -> dict[str, int]:
    """The native library's counters (src/layout.c in plugins/x86): layout_copies, ..."""
    lib = ctypes.CDLL(library_path())  # the process's already loaded copy, when there is one
    try:
        name_of, value = lib.ud_x86_debug_counter_name, lib.ud_x86_debug_counter
    except AttributeError:  # a library built before the counters
        return {}
    name_of.restype, name_of.argtypes = ctypes.c_char_p, [ctypes.c_int]
    value.restype, value.argtypes = ctypes.c_int64, [ctypes.c_char_p]
    names: list[bytes] = []
    while (n := name_of(len(names))) is not None:
        names.append(n)
    return {n.decode(): int(value(n)) for n in names}


# plugins/x86's src/dense/conv.cpp built without oneDNN: its "auto" picks among these three
_CONV_ALGORITHMS = (
    ("direct", "direct loops (ISPC for depthwise); for thin or depthwise layers", {}),
    ("im2col", "im2col + OpenBLAS GEMM per (image, group)", {}),
    ("winograd", "Winograd F(2x2, 3x3): 16 GEMMs over 4x4 tiles",
     {"kernel": (3, 3), "stride": (1, 1), "dilation": (1, 1)}),
)


@hookimpl
def unidev_algorithms() -> dict:
    """The conv algorithms of every conv op (forward, both gradients, conv2d_bias_act)."""
    ops = ("conv2d", "conv2d_backward_input", "conv2d_backward_weight", "conv2d_bias_act")
    return {op: [dict(name=n, description=d, requires=r) for n, d, r in _CONV_ALGORITHMS]
            for op in ops}
