"""The plugin library a TF adapter loads: discovery's answer when TensorFlow loads the adapter."""

from __future__ import annotations

import os
from importlib import metadata

__all__ = ["library"]


def _why_absent(plugin: str) -> str:
    # Discovery applied its switches (UNIDEV_PLUGINS, UNIDEV_DISABLE_PLUGIN_AUTOLOAD): an installed
    # plugin it left out was switched off by the user; otherwise none is installed.
    from ...core import discovery

    installed = {ep.name for ep in metadata.entry_points(group=discovery.ENTRY_POINT_GROUP)}
    if plugin in installed:
        return "OFF switched off by unidev's discovery settings"
    return (f"ERR no unidev plugin named {plugin!r} is installed; run `unidev list`, then "
            "`unidev build tensorflow`")


def library(plugin: str, tf_type: str) -> str:
    """Called by the adapter's SE_InitPlugin (csrc/plugin.cc) in TF's process.

    Returns ``"OK <address> <path>"`` (the table discovery's loader validated in this process, 0
    if it has none, and the native library, the one `unidev list` shows), ``"OFF <why>"`` when
    the user switched the plugin off (no device, no message) or ``"ERR <why>"``. Never raises:
    TF aborts on a failing plugin initialization.
    """
    try:
        from ...core import discovery

        rec = next((r for r in discovery.discover() if r.name == plugin), None)
        if rec is None:
            return _why_absent(plugin)
        if not rec.usable or rec.spec is None:
            return f"ERR plugin {plugin} is {rec.status}: {rec.error}"
        if rec.spec.tf_type != tf_type:
            return (f"ERR plugin {plugin} now declares TF device type {rec.spec.tf_type}; run "
                    "`unidev build tensorflow`")
        address = int(getattr(rec.library, "api_address", 0) or 0)
        return f"OK {address} {os.path.realpath(rec.spec.library)}"
    except BaseException as exc:  # SystemExit from a plugin module included: never end TF
        if isinstance(exc, KeyboardInterrupt):
            raise
        return f"ERR discovery failed: {type(exc).__name__}: {exc}"
