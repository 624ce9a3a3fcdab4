"""Runs in a fresh process: ``python two_devices.py TF_TYPE [NAME LIBRARY]`` (registering plugin
NAME with LIBRARY through discovery first, when given) copies tensors of several dtypes and sizes
from TF_TYPE:0 to TF_TYPE:1 and back and prints one JSON line: per case the values on CPU, the
copies and the device each copy is on, or the error class and message."""

from __future__ import annotations

import json
import sys

import numpy as np

from unidev.core import discovery

tf_type = sys.argv[1]
if len(sys.argv) > 3:
    from unidev.kit import PluginSpec, hookimpl

    class Plugin:
        @hookimpl
        def unidev_plugin(self) -> PluginSpec:
            return PluginSpec(name=sys.argv[2], tf_type=tf_type, library=sys.argv[3])

    discovery.register(Plugin(), sys.argv[2])

import tensorflow as tf  # noqa: E402

rng = np.random.default_rng(0)
CASES = {"float32[5]": rng.normal(size=5).astype(np.float32),
         "float64[3,4]": rng.normal(size=(3, 4)),
         "int64[1000,17]": rng.integers(-9, 9, (1000, 17)),
         "bool[7]": rng.integers(0, 2, 7).astype(bool),
         "float32[0]": np.zeros(0, np.float32)}
res: dict = {"devices": len(tf.config.list_physical_devices(tf_type)), "cases": {}}
for name, x in CASES.items():
    try:
        with tf.device(f"/device:{tf_type}:0"):
            a = tf.identity(tf.constant(x))  # made on device 0 (in a larger BFC region)
        with tf.device(f"/device:{tf_type}:1"):
            b = tf.identity(a)
        with tf.device(f"/device:{tf_type}:0"):
            c = tf.identity(b)
        res["cases"][name] = {"cpu": x.tolist(), "there": b.numpy().tolist(),
                              "back": c.numpy().tolist(), "devices": [a.device, b.device,
                                                                       c.device]}
    except Exception as exc:  # the error class is the result
        res["cases"][name] = {"error": type(exc).__name__, "message": str(exc)[:2000]}
print("RESULT " + json.dumps(res))
