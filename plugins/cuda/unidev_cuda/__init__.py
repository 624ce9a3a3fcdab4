"""The unidev plugin for NVIDIA GPUs: CUDA kernels, cuBLAS and cuDNN from the nvidia-* wheels."""

from __future__ import annotations

import ctypes
import importlib.util
import os
from pathlib import Path

from unidev.kit import Conformance, PluginSpec, conv_algorithms, hookimpl

__all__ = ["library_path", "library_dirs", "status", "unidev_algorithms", "unidev_plugin"]

_LIBRARY = "libunidev_cuda.so"
_ENV = "UNIDEV_CUDA_LIBRARY_PATH"


def library_path() -> str:
    """The native library: ``$UNIDEV_CUDA_LIBRARY`` (a development build) or the installed one."""
    return os.environ.get("UNIDEV_CUDA_LIBRARY") or str(Path(__file__).resolve().parent / _LIBRARY)


def library_dirs() -> list[str]:
    """Folders of the installed nvidia-* wheels that hold shared libraries (cuBLAS, cuDNN)."""
    spec = importlib.util.find_spec("nvidia")
    if spec is None or not spec.submodule_search_locations:
        return []
    dirs = []
    for root in spec.submodule_search_locations:
        dirs += sorted(str(p) for p in Path(root).glob("*/lib") if p.is_dir())
    return dirs


def _export_library_dirs() -> None:
    # The native library reads this at its first cuBLAS/cuDNN use; an explicit setting wins.
    if _ENV not in os.environ:
        dirs = library_dirs()
        if dirs:
            os.environ[_ENV] = os.pathsep.join(dirs)


def status() -> str:
    """What the native library found: devices (or why none), driver, runtime, cuBLAS, cuDNN."""
    _export_library_dirs()
    lib = ctypes.CDLL(library_path())
    lib.unidev_cuda_status.restype = ctypes.c_char_p
    return lib.unidev_cuda_status().decode()


@hookimpl
def unidev_plugin() -> PluginSpec:
    _export_library_dirs()
    return PluginSpec(
        name="cuda",
        # torch's "cuda" and TensorFlow's "GPU" are their own built-in devices, so this plugin
        # appears as torch "nvgpu" and TF "NVGPU" and never shadows them.
        torch_name="nvgpu",
        tf_type="NVGPU",
        library=library_path(),
        priority=80,
        host_addressable=False,
        version="0.1.0",
        description="NVIDIA GPUs: CUDA kernels, cuBLAS (matmul, im2col) and cuDNN (conv2d)",
        conformance=Conformance(tier=2),
    )


# What src/check.cpp accepts as a conv `algorithm` besides "auto"
@hookimpl
def unidev_algorithms() -> dict:
    """The conv algorithms of every conv op (forward, both gradients, conv2d_bias_act)."""
    return conv_algorithms(
        dict(name="cudnn", description="cuDNN, the first algorithm its heuristics rank usable (no "
             "tensor-op math)"),
        dict(name="direct", description="the plugin's direct convolution kernels (NCHW)"),
        dict(name="im2col", description="the plugin's im2col kernel + cuBLAS GEMM"))
