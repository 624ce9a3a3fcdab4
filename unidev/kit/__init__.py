"""The plugin author's kit: the hook marker, the spec classes, and where the C headers live."""

from __future__ import annotations

from pathlib import Path

import pluggy

from ..contract.spec import Conformance, PluginSpec

__all__ = ["hookimpl", "PluginSpec", "Conformance", "include_dir", "header", "cmake_dir"]

hookimpl = pluggy.HookimplMarker("unidev")


def include_dir() -> str:
    """Folder to add to a plugin's include path: ``#include <unidev/unidev.h>``."""
    return str(Path(__file__).resolve().parent.parent / "contract" / "include")


def header() -> str:
    """Path of ``unidev.h``, the C contract."""
    return str(Path(include_dir()) / "unidev" / "unidev.h")


def cmake_dir() -> str:
    """Folder holding ``unidevConfig.cmake``: ``find_package(unidev)`` gives target ``unidev::kit``.

    scikit-build-core finds it by itself (unidev's ``cmake.root`` entry point); plain CMake takes
    ``-Dunidev_DIR=$(python -m unidev.kit --cmake-dir)``.
    """
    return str(Path(__file__).resolve().parent.parent / "contract" / "cmake")
