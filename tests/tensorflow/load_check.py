"""Runs in a fresh process: ``python load_check.py [NAME TF_TYPE LIBRARY]`` registers a plugin
NAME (through discovery, before TF loads) when given, imports TF and prints one JSON line: the
device types, every mapped shared library, the libraries discovery reports, and a sum computed
on each non-CPU device."""

from __future__ import annotations

import json
import sys

from unidev.core import discovery

if len(sys.argv) > 3:
    from unidev.kit import PluginSpec, hookimpl

    class Plugin:
        @hookimpl
        def unidev_plugin(self) -> PluginSpec:
            return PluginSpec(name=sys.argv[1], tf_type=sys.argv[2], library=sys.argv[3])

    discovery.register(Plugin(), sys.argv[1])

import tensorflow as tf  # noqa: E402

types = [d.device_type for d in tf.config.list_physical_devices()]
sums = {}
for t in types:
    if t != "CPU":
        with tf.device(f"/device:{t}:0"):
            y = tf.constant([1.0, 2.0]) + tf.constant([3.0, 4.0])
        sums[t] = [y.numpy().tolist(), y.device]
maps = sorted({ln.split()[-1] for ln in open("/proc/self/maps") if ln.strip().endswith(".so")
               or ".so." in ln})
found = {r.name: r.spec.library for r in discovery.discover() if r.spec and r.usable}
print("RESULT " + json.dumps({"types": types, "maps": maps, "sums": sums, "discovered": found}))
