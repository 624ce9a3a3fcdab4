"""The plugin library a TF adapter loads: discovery's answer when TensorFlow loads the adapter."""

from __future__ import annotations

import os

__all__ = ["library"]


def _why_absent(plugin: str) -> str:
    # discovery decided; this only says which of its rules left the plugin out
    if os.environ.get("UNIDEV_DISABLE_PLUGIN_AUTOLOAD", "") in ("1", "true", "yes"):
        return "OFF UNIDEV_DISABLE_PLUGIN_AUTOLOAD is set"
    allow = {n.strip() for n in os.environ.get("UNIDEV_PLUGINS", "").split(",") if n.strip()}
    if allow and plugin not in allow:
        return "OFF not in UNIDEV_PLUGINS"
    return (f"ERR no unidev plugin named {plugin!r} is installed; run `unidev list`, then "
            "`unidev build tensorflow`")


def library(plugin: str, tf_type: str) -> str:
    """Called by the adapter's SE_InitPlugin (csrc/device.cc) in TF's process.

    Returns ``"OK <path>"`` (the native library discovery found for `plugin`, the one `unidev
    list` shows), ``"OFF <why>"`` when the user switched the plugin off (no device, no message)
    or ``"ERR <why>"``. Never raises: TF aborts on a failing plugin initialization.
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
        return "OK " + os.path.realpath(rec.spec.library)
    except BaseException as exc:  # SystemExit from a plugin module included: never end TF
        if isinstance(exc, KeyboardInterrupt):
            raise
        return f"ERR discovery failed: {type(exc).__name__}: {exc}"
