"""The unidev plugin for x86-64 CPUs: host memory, ISPC kernels, OpenBLAS and oneDNN."""

import os
from pathlib import Path

from unidev.kit import Conformance, PluginSpec, conv_algorithms, hookimpl, native_counters

__all__ = ["library_path", "unidev_algorithms", "unidev_debug_counters", "unidev_plugin"]

_LIBRARY = "libunidev_x86.so"


def library_path() -> str:
    """The native library: ``$UNIDEV_X86_LIBRARY`` (a development build) or the installed one."""
    return os.environ.get("UNIDEV_X86_LIBRARY") or str(Path(__file__).resolve().parent / _LIBRARY)


def _applicable() -> str | None:
    machine = os.uname().machine
    if machine not in ("x86_64", "AMD64"):
        return f"needs an x86-64 host (this is {machine})"
    try:  # the kernels' lowest ISPC target is AVX2; ISPC's dispatch aborts on older CPUs
        if " avx2" not in Path("/proc/cpuinfo").read_text():
            return "needs a CPU with AVX2"
    except OSError:
        pass
    return None


@hookimpl
def unidev_plugin() -> PluginSpec:
    return PluginSpec(
        name="x86",
        # neither torch ([a-z_]+) nor TensorFlow ([A-Z][A-Z_]*) accepts digits in a device type,
        # and TF's oneDNN graph rewrites claim every device type containing "CPU"
        torch_name="avx",
        tf_type="AVX",
        library=library_path(),
        priority=40,
        host_addressable=True,
        version="0.1.0",
        description="x86-64 host CPU: ISPC (AVX2/AVX-512) memory-bound kernels, OpenBLAS, oneDNN",
        conformance=Conformance(tier=4),
        applicable=_applicable(),
    )


@hookimpl
def unidev_debug_counters() -> dict[str, int]:
    """The native library's counters (src/layout.c in plugins/x86): layout_copies, ..."""
    return native_counters(library_path(), "ud_x86")


# What src/dense/conv.cpp accepts as `algorithm` besides "auto" (its header says what auto picks):
# dtypes (absent: every conv dtype), requires (unidev.algorithms.RULES)
@hookimpl
def unidev_algorithms() -> dict:
    """The conv algorithms of every conv op (forward, both gradients, conv2d_bias_act)."""
    return conv_algorithms(
        dict(name="onednn", description="oneDNN's convolution primitives (NCHW or channels-last)",
             dtypes=("float32",)),
        dict(name="direct", description="direct loops (ISPC for depthwise): thin or depthwise"),
        dict(name="im2col", description="im2col + OpenBLAS GEMM per (image, group)"),
        dict(name="winograd", description="Winograd F(2x2, 3x3): 16 GEMMs over 4x4 tiles",
             requires={"kernel": (3, 3), "stride": (1, 1), "dilation": (1, 1)}))
