"""The unidev plugin for x86-64 CPUs: host memory, ISPC kernels, OpenBLAS and oneDNN."""

import ctypes
import os
from pathlib import Path

from unidev.kit import Conformance, PluginSpec, hookimpl

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


# What src/dense/conv.cpp accepts as `algorithm` besides "auto" (its header says what auto picks):
# name, description, dtypes (None: every conv dtype), rules (unidev.algorithms.RULES)
_CONV_ALGORITHMS = (
    ("onednn", "oneDNN's convolution primitives (NCHW or channels-last)", ("float32",), {}),
    ("direct", "direct loops (ISPC for depthwise); for thin or depthwise layers", None, {}),
    ("im2col", "im2col + OpenBLAS GEMM per (image, group)", None, {}),
    ("winograd", "Winograd F(2x2, 3x3): 16 GEMMs over 4x4 tiles", None,
     {"kernel": (3, 3), "stride": (1, 1), "dilation": (1, 1)}),
)


@hookimpl
def unidev_algorithms() -> dict:
    """The conv algorithms of every conv op (forward, both gradients, conv2d_bias_act)."""
    ops = ("conv2d", "conv2d_backward_input", "conv2d_backward_weight", "conv2d_bias_act")
    return {op: [dict(name=n, description=d, dtypes=t, requires=r) for n, d, t, r in
                 _CONV_ALGORITHMS] for op in ops}
