"""gpu-check's preflight: the build's packages, then torch with a CUDA device to compare with.

Kept under tests/ with gpu_bench.py: torch is what the check compares against, never a dependency
of the plugin. GPU_CHECK_BUILD_ONLY=1 skips the torch part.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import shutil
import sys

BUILD_NEEDS = ["numpy", "pluggy", "pybind11", "scikit_build_core", "pytest", "setuptools"]


def missing_packages(build_only: bool) -> list[str]:
    need = BUILD_NEEDS + ([] if build_only else ["torch"])
    missing = [m for m in need if importlib.util.find_spec(m) is None]
    for tool in ("cmake", "ninja"):
        if shutil.which(tool) is None and importlib.util.find_spec(tool) is None:
            missing.append(tool)
    # an editable install of the core needs bdist_wheel: setuptools >= 70.1 or the wheel package
    try:
        importlib.import_module("setuptools.command.bdist_wheel")
    except ImportError:
        if importlib.util.find_spec("wheel") is None:
            missing.append("wheel (or setuptools >= 70.1)")
    return missing


def main() -> int:
    print("python", sys.version.split()[0], sys.executable)
    build_only = os.environ.get("GPU_CHECK_BUILD_ONLY") == "1"
    missing = missing_packages(build_only)
    if missing:
        print(f"missing: {', '.join(missing)}")
        return 1
    if build_only:
        return 0
    import torch

    print("torch", torch.__version__, "CUDA", torch.version.cuda, "available:",
          torch.cuda.is_available())
    if not torch.cuda.is_available():
        print("torch sees no CUDA device")
        return 1
    print("GPU 0:", torch.cuda.get_device_name(0))
    return 0


if __name__ == "__main__":
    sys.exit(main())
