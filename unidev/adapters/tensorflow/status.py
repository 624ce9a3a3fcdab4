"""Lines for `unidev list`: which plugins are TF devices, whether their builds are current."""

from __future__ import annotations

import filecmp

from ...core import discovery
from . import build

__all__ = ["summary"]


def summary() -> list[str]:
    """One line per plugin: installed and current, stale, not built, or skipped and why."""
    tf = build.tf_install()
    if tf is None:
        return ["tensorflow: not installed (pip install tensorflow-cpu==2.21.0)"]
    folder = build.plugin_dir(tf)
    lines = [f"tensorflow {tf.version}: PluggableDevices in {folder}"]
    varops = folder / "unidev" / build.VAROPS_NAME
    for rec in discovery.discover():
        if not rec.usable or rec.spec is None:
            lines.append(f"    {rec.name}: skipped ({rec.status}: {rec.error})")
            continue
        count = "0" if rec.devices == 1 else f"0-{rec.devices - 1}"
        name = f"/device:{rec.spec.tf_type}:{count} ({rec.name})"
        installed = folder / build.library_name(rec.name)
        cached = build.build_plugin(tf, rec, cached_only=True)
        if not installed.exists():
            state = "not installed; run `unidev build tensorflow`"
        elif cached is None or not filecmp.cmp(cached, installed, shallow=False):
            state = "installed but stale; run `unidev build tensorflow`"
        else:
            state = "installed, current"
        lines.append(f"    {name}: {state}")
    if not varops.exists():
        lines.append("    variable-op library missing: Keras optimizers cannot update device "
                     "variables; run `unidev build tensorflow`")
    return lines
