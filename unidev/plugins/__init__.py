"""The plugin author's kit: the hook marker, the spec classes, and where the C header lives."""

from __future__ import annotations

from pathlib import Path

import pluggy

from ..core.spec import Conformance, PluginSpec

__all__ = ["hookimpl", "PluginSpec", "Conformance", "include_dir", "header"]

hookimpl = pluggy.HookimplMarker("unidev")


def include_dir() -> str:
    """Folder to add to a plugin's include path: ``#include <unidev/unidev.h>``."""
    return str(Path(__file__).resolve().parent.parent / "include")


def header() -> str:
    """Path of ``unidev.h``, the C contract."""
    return str(Path(include_dir()) / "unidev" / "unidev.h")
