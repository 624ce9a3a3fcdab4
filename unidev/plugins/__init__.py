"""Deprecated name of unidev.kit (the plugin author's kit); kept for one release."""

import warnings

from ..kit import Conformance, PluginSpec, header, hookimpl, include_dir

__all__ = ["hookimpl", "PluginSpec", "Conformance", "include_dir", "header"]

warnings.warn("unidev.plugins is deprecated: import unidev.kit instead (same names)",
              DeprecationWarning, stacklevel=2)


def __getattr__(name: str):
    if name == "scaffold":
        from ..kit import scaffold

        return scaffold
    raise AttributeError(f"module 'unidev.plugins' has no attribute {name!r}")
