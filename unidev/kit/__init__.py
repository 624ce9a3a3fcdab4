"""The plugin author's kit: the hook marker, the spec classes, and where the C headers live."""

from __future__ import annotations

import ctypes
from pathlib import Path

import pluggy

from ..contract.spec import Conformance, PluginSpec

__all__ = ["hookimpl", "PluginSpec", "Conformance", "include_dir", "header", "cmake_dir",
           "native_counters", "conv_algorithms"]

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


def native_counters(library: str, prefix: str, names: tuple[str, ...] = ()) -> dict[str, int]:
    """A ``unidev_debug_counters`` hook's answer, read from the plugin's native library: the
    exported ``int64_t <prefix>_debug_counter(const char* name)`` for each of ``names`` or, when
    none are given, for each name ``const char* <prefix>_debug_counter_name(int i)`` lists (NULL
    after the last). A library without the functions has no counters: ``{}``."""
    lib = ctypes.CDLL(library)  # the process's already loaded copy, when there is one
    try:
        value = getattr(lib, f"{prefix}_debug_counter")
        name_of = None if names else getattr(lib, f"{prefix}_debug_counter_name")
    except AttributeError:  # a library built before the counters
        return {}
    value.restype, value.argtypes = ctypes.c_int64, [ctypes.c_char_p]
    found = [n.encode() for n in names]
    if name_of is not None:
        name_of.restype, name_of.argtypes = ctypes.c_char_p, [ctypes.c_int]
        while (n := name_of(len(found))) is not None:
            found.append(n)
    return {n.decode(): int(value(n)) for n in found}


CONV_OPS = ("conv2d", "conv2d_backward_input", "conv2d_backward_weight", "conv2d_bias_act")


def conv_algorithms(*algorithms: dict) -> dict[str, list[dict]]:
    """A ``unidev_algorithms`` hook's answer for a plugin whose conv algorithms serve every conv
    op alike (forward, both gradients, conv2d_bias_act): each algorithm a dict of name,
    description and optionally dtypes and requires (see unidev.algorithms)."""
    return {op: [dict(a) for a in algorithms] for op in CONV_OPS}
